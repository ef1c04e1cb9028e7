"""Real parameter-server jobs across an emulated 4-host cluster (mxnet-ssp-testbed).

The launcher runs on the login host (host0) and starts the servers and workers over ssh on
the other hosts, through each host's own sshd, with the hostfile the testbed wrote: our
launcher (``python -m mxnet_ssp.launch --launcher ssh``) with ``dist_ssp``, and MXNet's
stock tools/launch.py (mxnet-ssp-stock-launch) with ``dist_async``.  Every process
records, before it imports mxnet, the network namespace it runs in and its address towards
the scheduler, so the tests check where each one ran.  Needs what test_testbed_cluster.py
needs (root, iproute2, OpenSSH); skipped without it, failed under CI=true.
"""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from conftest import JOBS, ROOT, fail_msg, job_env, read_jsonl
from test_testbed_cluster import four_hosts

PY = sys.executable

pytestmark = [pytest.mark.integration, pytest.mark.ssh]

# Records where this process runs (DIR/<role>-<pid>.json), then runs the job script
# (argv[2:]) as __main__.  Written before `import mxnet`, which never returns in a scheduler
# or server.
WHERE = '''\
import json, os, runpy, socket, sys
out = sys.argv[1]
role = os.environ.get('DMLC_ROLE')
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
probe.connect((os.environ['DMLC_PS_ROOT_URI'], int(os.environ['DMLC_PS_ROOT_PORT'])))
record = {'role': role, 'address': probe.getsockname()[0],
          'netns': os.readlink('/proc/self/ns/net'), 'node_host': os.environ.get('DMLC_NODE_HOST'),
          'root_uri': os.environ['DMLC_PS_ROOT_URI'], 'pid': os.getpid(),
          'index': os.environ.get('MXNET_SSP_LAUNCH_INDEX', os.environ.get('DMLC_TASK_ID'))}
probe.close()
path = os.path.join(out, '%s-%d.json' % (role, os.getpid()))
with open(path + '.tmp', 'w') as f:
    json.dump(record, f)
os.rename(path + '.tmp', path)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name='__main__')
'''


@pytest.fixture(scope='module')
def cluster4():
    """4 emulated hosts at 1gbit (host0: the login host); removed on every exit path."""
    yield from four_hosts()


def namespace_ids(state):
    """{'net:[inode]': host name} of the testbed's hosts."""
    return {'net:[%d]' % os.stat('/run/netns/' + h['namespace']).st_ino: h['name']
            for h in state['hosts']}


def placements(directory, state):
    """[(role, launch index, host name by namespace, address, DMLC_NODE_HOST)], sorted."""
    ids = namespace_ids(state)
    out = []
    for name in os.listdir(directory):
        if name.endswith('.json'):
            with open(os.path.join(directory, name)) as f:
                r = json.load(f)
            out.append((r['role'], r['index'] if r['role'] != 'scheduler' else None,
                        ids.get(r['netns'], r['netns']), r['address'], r['node_host']))
    return sorted(out, key=lambda p: (p[0], p[1] or ''))


def run_on_login_host(prefix, argv, env, cwd, timeout=150):
    """``mxnet-ssp-testbed run -- ARGV`` on host0 in a session of its own; on timeout the
    whole session is killed (and `down` stops what is left on the hosts)."""
    proc = subprocess.Popen([PY, '-m', 'mxnet_ssp.lab.testbed', '--prefix', prefix, 'run', '--']
                            + list(argv), env=env, cwd=str(cwd), start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail('job on the testbed did not finish within %d s:\n%s\n%s'
                    % (timeout, out[-3000:], err[-6000:]))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def check_training(out, store, steps):
    for rank in (0, 1):
        result = read_jsonl(out / ('train-%d.json' % rank))[0]
        assert result['type'] == store, result
        assert result['loss_last'] < 0.1 * result['loss_first'], result


@pytest.mark.slow    # the default run has our launcher's dist_ssp job in the DMLC_INTERFACE test
def test_dist_softsync_job_with_our_ssh_launcher_from_the_login_host(cluster4, tmp_path):
    """-n 2 -s 1 over ssh with the testbed's hostfile (host1..host3): the scheduler on host0,
    then round-robin per role over the hostfile: server #0 and worker #0 on host1, worker #1
    on host2; each process binds its own host's address (DMLC_NODE_HOST from the
    hostfile)."""
    store = 'dist_softsync'
    steps = 10
    where, out = tmp_path / 'where', tmp_path / 'train'
    where.mkdir()
    (tmp_path / 'where.py').write_text(WHERE)
    hostfile = os.path.join(cluster4['state_dir'], 'hostfile')
    env = job_env(tmp_path)
    env.pop('STOCK_LAUNCH_HOST_IP')
    argv = [PY, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher', 'ssh',
            '-H', hostfile, '--env', 'PYTHONPATH', '--timeout', '120',
            PY, str(tmp_path / 'where.py'), str(where), os.path.join(JOBS, 'gluon_job.py'),
            '--kvstore', store, '--steps', str(steps), '--out', str(out)]
    proc = run_on_login_host(cluster4['prefix'], argv, env, tmp_path)
    assert proc.returncode == 0, fail_msg(proc)
    assert 'all 4 processes exited with code 0' in proc.stderr, fail_msg(proc)
    check_training(out, store, steps)
    assert 'Traceback' not in proc.stderr, fail_msg(proc)
    # the servers wrote their staleness summaries at exit
    summary = json.loads((tmp_path / 'metrics' / 'server-0-staleness.json').read_text())
    assert summary['num_workers'] == 2 and summary['gradients'] > 0, summary
    assert placements(where, cluster4) == [
        ('scheduler', None, 'host0', '198.18.0.1', None),
        ('server', '0', 'host1', '198.18.0.2', '198.18.0.2'),
        ('worker', '0', 'host1', '198.18.0.2', '198.18.0.2'),
        ('worker', '1', 'host2', '198.18.0.3', '198.18.0.3'),
    ], fail_msg(proc)


def test_dist_async_job_with_mxnets_stock_launch_py_over_ssh(cluster4, tmp_path):
    """MXNet's tools/launch.py --launcher ssh, unchanged, from host0: the tracker advertises
    host0's address (STOCK_LAUNCH_HOST_IP); it gives each process DMLC_NODE_HOST = its
    hostfile entry, and puts server #0 on host1 and workers #0, #1 on host2 and host3."""
    steps = 10
    where, out = tmp_path / 'where', tmp_path / 'train'
    where.mkdir()
    (tmp_path / 'where.py').write_text(WHERE)
    hostfile = os.path.join(cluster4['state_dir'], 'hostfile')
    env = job_env(tmp_path, STOCK_LAUNCH_HOST_IP='198.18.0.1')
    argv = [PY, '-m', 'mxnet_ssp.launch.stock', '-n', '2', '-s', '1',
            '--launcher', 'ssh', '-H', hostfile,
            PY, str(tmp_path / 'where.py'), str(where), os.path.join(JOBS, 'gluon_job.py'),
            '--kvstore', 'dist_async', '--steps', str(steps), '--out', str(out)]
    proc = run_on_login_host(cluster4['prefix'], argv, env, tmp_path)
    assert proc.returncode == 0, fail_msg(proc)
    check_training(out, 'dist_async', steps)
    found = placements(where, cluster4)
    assert sorted((role, host, address, node) for role, _, host, address, node in found) == [
        ('scheduler', 'host0', '198.18.0.1', '198.18.0.1'),
        ('server', 'host1', '198.18.0.2', '198.18.0.2'),
        ('worker', 'host2', '198.18.0.3', '198.18.0.3'),
        ('worker', 'host3', '198.18.0.4', '198.18.0.4'),
    ], fail_msg(proc)


def test_stock_launch_py_over_ssh_takes_the_settings_file_on_every_host(cluster4, tmp_path):
    """MXNet's stock launch.py over ssh drops every MXNET_SSP_* variable; the job's settings
    file (mxnet_ssp.env in the directory every host cds into: the hosts share the machine's
    files, as a cluster shares a home directory) reaches the workers and servers on their
    own hosts: DSSP's range [1, 2], elastic mode and the metrics directory.  Worker 1 is
    slower, so the fast worker reaches the range and is held there (the default [3, 15]
    would let it run further)."""
    iters = 12
    job = tmp_path / 'job'
    job.mkdir()
    (job / 'mxnet_ssp.env').write_text(
        'MXNET_SSP_STALENESS=1,2\nMXNET_SSP_ELASTIC=1\nMXNET_SSP_TIMEOUT=60\n'
        'MXNET_SSP_FOLLOW_GRACE=4\nMXNET_SSP_METRICS_DIR=metrics\n')
    hostfile = os.path.join(cluster4['state_dir'], 'hostfile')
    env = {k: v for k, v in job_env(tmp_path, STOCK_LAUNCH_HOST_IP='198.18.0.1').items()
           if not k.startswith('MXNET_SSP_')}
    argv = [PY, '-m', 'mxnet_ssp.launch.stock', '-n', '2', '-s', '1',
            '--launcher', 'ssh', '-H', hostfile, PY, os.path.join(JOBS, 'marker_job.py'),
            '--out', str(tmp_path / 'steps'), '--store', 'dist_dssp', '--iters', str(iters),
            '--slow-rank', '1', '--slow-seconds', '0.2']
    proc = run_on_login_host(cluster4['prefix'], argv, env, job)
    assert proc.returncode == 0, fail_msg(proc)
    steps = {r: read_jsonl(tmp_path / 'steps' / ('steps-%d.jsonl' % r)) for r in (0, 1)}
    assert [len(steps[r]) for r in (0, 1)] == [iters, iters], fail_msg(proc)
    leads = [rec['lead'] for r in (0, 1) for rec in steps[r]]
    assert max(leads) == 2 and all(0 <= lead <= 2 for lead in leads), leads
    text = proc.stdout + proc.stderr
    assert 'staleness [1, 2]' in text, fail_msg(proc)           # the controller's range
    assert 'elastic: finished at clock %d' % iters in text, fail_msg(proc)
    controller = read_jsonl(job / 'metrics' / 'controller.jsonl')
    assert any(e.get('event') == 'push' and e.get('decision') == 'wait' for e in controller)
    assert 'no MXNET_SSP_* setting reached it' not in text, fail_msg(proc)


def test_module_fit_with_dcasgd_on_our_dist_async_and_two_servers_across_hosts(cluster4,
                                                                             tmp_path):
    """Module.fit (string keys) with the DC-ASGD rule (``dcasgd_pw``, a backup per worker:
    slot mode) on our dist_async, -n 2 -s 2 with our launcher: server #0 and worker #0 on
    host1, server #1 and worker #1 on host2, so each worker pushes to a server on the other
    host.  Every parameter has one canonical weight on one server, updated by both workers'
    gradients with their staleness (the servers' logs); the parameters are spread over both
    servers; both workers end with the same weights."""
    out = tmp_path / 'out'
    hostfile = os.path.join(cluster4['state_dir'], 'hostfile')
    env = job_env(tmp_path, MXNET_SSP_STALENESS_LOG='1', MXNET_SSP_WRAP_ASYNC='1')
    env.pop('STOCK_LAUNCH_HOST_IP')
    argv = [PY, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '2', '--launcher', 'ssh',
            '-H', hostfile, '--env', 'PYTHONPATH', '--timeout', '120',
            PY, os.path.join(JOBS, 'module_slot_job.py'), '--store', 'dist_async',
            '--optimizer', 'dcasgd_pw', '--out', str(out)]
    proc = run_on_login_host(cluster4['prefix'], argv, env, tmp_path)
    assert proc.returncode == 0, fail_msg(proc)
    assert 'all 5 processes exited with code 0' in proc.stderr, fail_msg(proc)
    # a job across hosts gets the pipeline's defaults (on loopback: 4 MiB buckets, no chunks,
    # no window)
    assert ('worker[0] data path across hosts: buckets of up to 262144 bytes, fitted to the '
            'model, chunks above 524288 bytes, window 4') in proc.stderr, fail_msg(proc)
    finals = [json.loads((out / ('final-%d.json' % r)).read_text()) for r in (0, 1)]
    assert all(f['slot_mode'] and f['type'] == 'dist_async' for f in finals), finals
    names = sorted(finals[0]['weights'])
    assert names == ['fc1_bias', 'fc1_weight', 'fc2_bias', 'fc2_weight']
    for name in names:
        assert finals[1]['weights'][name] == finals[0]['weights'][name], name
    metrics = tmp_path / 'metrics'
    logs = sorted(n for n in os.listdir(metrics) if n.startswith('server-')
                  and n.endswith('-staleness.jsonl'))
    assert len(logs) == 2, logs
    by_key = {}
    for server, name in enumerate(logs):
        for e in read_jsonl(metrics / name):
            by_key.setdefault(e['key'], []).append((server, e))
    assert sorted(by_key) == [0, 1, 2, 3], sorted(by_key)
    steps = finals[0]['steps']
    for key, events in by_key.items():
        assert len({s for s, _ in events}) == 1, (key, events)      # one canonical weight
        grads = sorted((e for _, e in events if e['event'] == 'gradient'),
                       key=lambda e: e['seq'])
        assert sorted(e['sender'] for e in grads) == sorted([0, 1] * steps), key
        assert [e['version'] for e in grads] == list(range(1, 2 * steps + 1)), key
        assert all(e['applied'] and e['tau'] >= 0 for e in grads), key
    assert {s for events in by_key.values() for s, _ in events} == {0, 1}


def add_data_interface(state, index):
    """Give host `index` a second interface, ``<prefix>dat`` (a second link to the bridge),
    at 198.19.1.<index+1>/24: a "data network" inside 198.18.0.0/15, more specific than the
    /15 on ``<prefix>eth``, so traffic to 198.19.1.x leaves by it.  Returns its address."""
    prefix = state['prefix']
    bridge_ns, link = prefix + 'net', '%sd%d' % (prefix, index)
    namespace, address = '%sh%d' % (prefix, index), '198.19.1.%d' % (index + 1)
    for argv in (['-n', bridge_ns, 'link', 'add', link, 'type', 'veth', 'peer', 'name',
                  prefix + 'dat', 'netns', namespace],
                 ['-n', bridge_ns, 'link', 'set', link, 'master', prefix + 'br', 'up'],
                 ['-n', namespace, 'addr', 'add', address + '/24', 'dev', prefix + 'dat'],
                 ['-n', namespace, 'link', 'set', prefix + 'dat', 'up']):
        subprocess.run(['ip'] + argv, check=True, capture_output=True)
    return address


def test_dmlc_interface_picks_the_second_interface_for_the_controller_and_balancing(
        cluster4, tmp_path):
    """host1 and host2 get a second interface (``<prefix>dat``, 198.19.1.x/24) beside their
    own (198.18.0.x, which ssh and the scheduler use).  A balanced dist_ssp job with our
    launcher from the login host (-n 2 -s 1 over the testbed's hostfile host1..host3: the
    scheduler on host0, server #0 and worker #0 on host1, worker #1 on host2, round-robin
    per role), DMLC_INTERFACE=<prefix>dat forwarded: the launcher leaves DMLC_NODE_HOST
    unset, so ps-lite, the synchronization controller (in the server on host1) and the
    balancing service (on worker 0) all take the address on that interface; the workers
    reach the controller and the service from their own data addresses, across hosts."""
    prefix = cluster4['prefix']
    where = tmp_path / 'where'
    where.mkdir()
    (tmp_path / 'where.py').write_text(WHERE)
    try:
        data = [add_data_interface(cluster4, i) for i in (1, 2)]
        out = tmp_path / 'out'
        hostfile = os.path.join(cluster4['state_dir'], 'hostfile')
        env = job_env(tmp_path, DMLC_INTERFACE=prefix + 'dat')
        env.pop('STOCK_LAUNCH_HOST_IP')
        argv = [PY, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher', 'ssh',
                '-H', hostfile, '--env', 'PYTHONPATH', '--timeout', '120',
                PY, str(tmp_path / 'where.py'), str(where),
                os.path.join(JOBS, 'balance_job.py'), '--kvstore', 'dist_ssp',
                '--total', '128', '--steps', '9', '--period', '3',
                '--cost', '0:0.0002,1:0.0008', '--out', str(out)]
        proc = run_on_login_host(prefix, argv, env, tmp_path)
    finally:
        for i in (1, 2):
            subprocess.run(['ip', '-n', prefix + 'net', 'link', 'del', '%sd%d' % (prefix, i)],
                           capture_output=True)
    assert proc.returncode == 0, fail_msg(proc)
    assert 'all 4 processes exited with code 0' in proc.stderr, fail_msg(proc)
    # placed as without DMLC_INTERFACE, but no DMLC_NODE_HOST: ps-lite takes the interface
    assert placements(where, cluster4) == [
        ('scheduler', None, 'host0', '198.18.0.1', None),
        ('server', '0', 'host1', '198.18.0.2', None),
        ('worker', '0', 'host1', '198.18.0.2', None),
        ('worker', '1', 'host2', '198.18.0.3', None),
    ], fail_msg(proc)
    assert re.search(r'server(\[\d+\])?: dist_ssp controller for 2 workers, .* at %s:\d+'
                     % re.escape(data[0]), proc.stderr), fail_msg(proc)
    controller = read_jsonl(tmp_path / 'metrics' / 'controller.jsonl')
    assert sorted(e['host'] for e in controller if e.get('event') == 'connect') == data, \
        controller
    ranks = [json.loads((out / ('rank-%d.json' % r)).read_text()) for r in (0, 1)]
    # both workers reached the service on worker 0's host at its data address
    assert ranks[0]['service'] == ranks[1]['service'] and ranks[0]['service'][0] in data, ranks
    for rank in ranks:
        assert rank['switches'] and sum(rank['log'][-1]['split']) == 128, rank['switches']
    assert ranks[1]['log'][-1]['size'] < ranks[0]['log'][-1]['size']    # worker 1 is slower


def test_the_docs_ssh_example_runs_as_written_with_the_active_venvs_python(cluster4, tmp_path):
    """docs/many_hosts.md's first command, `... --launcher ssh -H hostfile --env PYTHONPATH
    python train.py --kvstore dist_ssp`, with a bare `python`: over ssh that would be the
    host's system Python (no mxnet); with a virtual environment active the launcher runs its
    interpreter on every host and says so."""
    from test_testbed_slurm import TRAIN
    with open(os.path.join(ROOT, 'docs', 'many_hosts.md')) as f:
        block = re.search(r'```\n(mxnet-ssp-launch .*?)```', f.read(), re.S).group(1)
    command = shlex.split(block.replace('\\\n', ' ').replace('...', ''))
    assert command[:8] == ['mxnet-ssp-launch', '-n', '2', '-s', '1', '--launcher', 'ssh', '-H']
    assert command[9:] == ['--env', 'PYTHONPATH', 'python', 'train.py', '--kvstore', 'dist_ssp']
    venv = sys.prefix
    if venv == sys.base_prefix or not os.access(os.path.join(venv, 'bin', 'python'), os.X_OK):
        pytest.skip('the tests do not run in a virtual environment')
    job = tmp_path / 'job'
    job.mkdir()
    (job / 'train.py').write_text(TRAIN)
    command[8] = os.path.join(cluster4['state_dir'], 'hostfile')
    env = job_env(tmp_path, VIRTUAL_ENV=venv)
    env.pop('STOCK_LAUNCH_HOST_IP')
    env['PATH'] = os.path.join(venv, 'bin') + os.pathsep + env['PATH']
    argv = [PY, '-m', 'mxnet_ssp.launch'] + command[1:]
    proc = run_on_login_host(cluster4['prefix'], argv, env, job)
    assert proc.returncode == 0, fail_msg(proc)
    assert ('mxnet-ssp-launch: ssh: "python" runs %s on every host (the active virtual '
            "environment's)" % os.path.join(venv, 'bin', 'python')) in proc.stderr, fail_msg(proc)
    results = [json.loads((job / ('train-%d.json' % r)).read_text()) for r in (0, 1)]
    assert all(r['type'] == 'dist_ssp' and r['last'] < 0.5 * r['first'] for r in results), \
        results


#: run in a host's namespace: a listener on ADDRESS:PORT whose queue is full (the kernel then
#: drops every further SYN: no answer, no refusal), until stdin closes
SILENT_LISTENER = '''\
import socket, sys
address, port = sys.argv[1], int(sys.argv[2])
listener = socket.socket()
listener.bind((address, port))
listener.listen(0)
held = []
while True:
    c = socket.socket()
    c.settimeout(1.0)
    try:
        c.connect((address, port))
    except socket.timeout:
        break
    held.append(c)
print('ready', flush=True)
sys.stdin.read()
'''


def test_a_host_that_takes_no_connection_ends_the_ssh_launch_within_15_s_naming_it(
        cluster4, tmp_path):
    """host3 at a port whose listen queue is full (the kernel drops every SYN: the host
    answers ARP, never a SYN, as a wedged or firewalled one): the launch from host0 ends
    before anything starts, in one line naming the host and ssh's error."""
    host3 = cluster4['hosts'][3]
    port = 2222
    listener = subprocess.Popen(['ip', 'netns', 'exec', host3['namespace'], PY, '-c',
                                 SILENT_LISTENER, host3['address'], str(port)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline().strip() == 'ready'
        hostfile = tmp_path / 'hosts'
        hostfile.write_text('%s\n%s\n%s:%d\n' % (cluster4['hosts'][1]['address'],
                                                  cluster4['hosts'][2]['address'],
                                                  host3['address'], port))
        argv = [PY, '-m', 'mxnet_ssp.launch', '-n', '3', '-s', '1', '--launcher', 'ssh',
                '-H', str(hostfile), PY, '-c', 'pass']
        started = time.monotonic()
        proc = run_on_login_host(cluster4['prefix'], argv, job_env(tmp_path), tmp_path,
                                 timeout=60)
        took = time.monotonic() - started
    finally:
        listener.stdin.close()
        listener.wait(timeout=30)
    assert proc.returncode == 1, fail_msg(proc)
    lines = [ln for ln in proc.stderr.splitlines() if 'ssh connection' in ln]
    assert lines == ['mxnet-ssp-launch: host %s takes no ssh connection: ssh: connect to host '
                     '%s port %d: Connection timed out — nothing started'
                     % (host3['address'], host3['address'], port)], fail_msg(proc)
    assert 'ssh job:' not in proc.stderr, fail_msg(proc)
    assert took < 15, (took, fail_msg(proc))
