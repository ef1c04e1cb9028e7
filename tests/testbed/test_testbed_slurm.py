"""``mxnet-ssp-launch --launcher slurm`` under a real Slurm (Debian's 22.05 packages) on the
emulated hosts (``mxnet-ssp-testbed up --slurm``): slurmctld on host0, one slurmd on each of
host1..host3.  Every job is an sbatch job submitted from the login host (host0); its batch
script runs mxnet-ssp-launch on the allocation's first node, which starts every server and
worker as an ``srun --overlap`` step on its node (no ssh).

Needs root, iproute2, OpenSSH (the testbed) and Slurm (``apt-get install slurmctld slurmd
slurm-client munge``); skipped with one line without them, failed under CI=true (.ci/run
installs them).
"""
import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

from conftest import JOBS, ROOT, fail_msg, job_env, need, read_jsonl
from test_testbed_cluster import need_testbed_tools, new_prefix, tb

PY = sys.executable

pytestmark = [pytest.mark.integration, pytest.mark.ssh]

SLURM_INSTALL = 'apt-get install slurmctld slurmd slurm-client munge'

#: the job's own bound: a killed worker must end the job within this (launcher + Slurm)
FAIL_WITHIN_S = 30.0


def need_slurm():
    from mxnet_ssp.lab.testbed.slurm import missing_programs
    missing = missing_programs()
    if missing:
        need('Slurm (the packages %s)' % ', '.join(missing), SLURM_INSTALL)


@pytest.fixture(scope='module')
def slurm4():
    """4 emulated hosts with Slurm up (host0: login host and slurmctld; host1..host3:
    slurmd, 4 CPUs each); removed on every exit path."""
    need_testbed_tools()
    need_slurm()
    prefix = new_prefix()
    try:
        proc = tb(prefix, 'up', '--hosts', '4', '--no-measure', '--slurm')
        assert proc.returncode == 0, fail_msg(proc)
        assert re.search(r'every node idle [\d.]+ s after the start', proc.stdout), proc.stdout
        state_dir = '/run/%stestbed' % prefix
        status = tb(prefix, 'status')
        assert status.returncode == 0 and 'slurm: munged, slurmctld and 3 slurmd running' \
            in status.stdout, fail_msg(status)
        yield {'prefix': prefix, 'state_dir': state_dir,
               'slurm_conf': os.path.join(state_dir, 'slurm', 'slurm.conf')}
    finally:
        down = tb(prefix, 'down')
        assert down.returncode == 0, fail_msg(down)


def test_up_slurm_without_slurm_is_refused_naming_the_packages(monkeypatch, capsys):
    """No root needed: the check comes before anything is made."""
    from mxnet_ssp.lab.testbed import cli, cluster, slurm
    assert slurm.missing_programs(which=lambda name: None) == [
        'munge', 'slurm-client', 'slurmctld', 'slurmd', 'util-linux']
    monkeypatch.setattr(cluster, 'preflight', lambda verb: None)
    monkeypatch.setattr(cluster, 'find_sshd', lambda: '/usr/sbin/sshd')
    monkeypatch.setattr(slurm, 'missing_programs', lambda: ['slurmd'])
    monkeypatch.setattr(cluster, 'up', lambda *a, **k: pytest.fail('up ran'))
    assert cli.main(['up', '--hosts', '3', '--slurm', '--prefix', 'zz-']) == 2
    assert capsys.readouterr().err == (
        'mxnet-ssp-testbed: --slurm: the packages slurmd are not installed; accepted: an '
        'installed Slurm (apt-get install slurmctld slurmd slurm-client munge)\n')


def on_login(cluster, argv, env, cwd, timeout=150):
    """Run `argv` on host0 (``mxnet-ssp-testbed run``, which sets SLURM_CONF)."""
    return subprocess.run([PY, '-m', 'mxnet_ssp.lab.testbed', '--prefix', cluster['prefix'], 'run',
                           '--'] + list(argv), env=env, cwd=str(cwd), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def batch_script(job, launch_args, job_args):
    """An sbatch script running mxnet-ssp-launch --launcher slurm with marker_job.py."""
    argv = [PY, '-m', 'mxnet_ssp.launch', '--launcher', 'slurm', '--timeout', '120'] + \
        list(launch_args) + [PY, os.path.join(JOBS, 'marker_job.py')] + list(job_args)
    path = job / 'job.sh'
    path.write_text('#!/bin/sh\nexec %s\n' % ' '.join(shlex.quote(a) for a in argv))
    path.chmod(0o755)
    return path


def slurm_env(tmp_path):
    """The job's environment: this checkout on the path, no MXNET_SSP_* setting (they come
    from the settings file, which every node reads from the shared directory)."""
    return {k: v for k, v in job_env(tmp_path).items()
            if not k.startswith('MXNET_SSP_') or k in ('MXNET_SSP_LEAN_WORKERS',
                                                       'MXNET_SSP_OP_CODE_CACHE')}


def settings_file(job, elastic=False):
    (job / 'mxnet_ssp.env').write_text(
        'MXNET_SSP_STALENESS=1,2\nMXNET_SSP_TIMEOUT=60\nMXNET_SSP_FOLLOW_GRACE=4\n'
        'MXNET_SSP_METRICS_DIR=metrics\n' + ('MXNET_SSP_ELASTIC=1\n' if elastic else ''))


def job_state(cluster, job_id):
    """(JobState, exit code) of a Slurm job, from ``scontrol -o show job`` on host0."""
    proc = subprocess.run(['ip', 'netns', 'exec', cluster['prefix'] + 'h0', 'scontrol', '-o',
                           'show', 'job', job_id], env=dict(os.environ,
                                                            SLURM_CONF=cluster['slurm_conf']),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    fields = dict(f.split('=', 1) for f in proc.stdout.split() if '=' in f)
    return fields.get('JobState'), int(fields.get('ExitCode', '-1:0').split(':')[0])


def wait_job(cluster, job_id, timeout=150):
    """Poll the job until it ended (sbatch --wait polls every 10 s); its (state, exit code)."""
    deadline = time.monotonic() + timeout
    while True:
        state, code = job_state(cluster, job_id)
        if state not in ('PENDING', 'CONFIGURING', 'RUNNING', 'COMPLETING', None):
            return state, code
        assert time.monotonic() < deadline, 'job %s still %s after %d s' % (job_id, state,
                                                                        timeout)
        time.sleep(0.2)              # polling the job's state with a deadline


def sbatch_wait(cluster, tmp_path, script, nodes=3, tasks=4, options=None, env=None):
    """Submit `script` from host0 and wait for its end: (CompletedProcess whose returncode
    is the job's exit code, the job's output, seconds from submission to the end)."""
    out = tmp_path / 'slurm.out'
    env = slurm_env(tmp_path) if env is None else env
    started = time.monotonic()
    if options is None:
        options = ['--nodes=%d' % nodes, '--ntasks=%d' % tasks, '--chdir=%s' % script.parent]
    sub = on_login(cluster, ['sbatch', '--parsable', '--output=%s' % out] + options
                   + [str(script)], env, script.parent)
    assert sub.returncode == 0, fail_msg(sub)
    job_id = sub.stdout.strip().split(';')[0]
    try:
        state, code = wait_job(cluster, job_id)
    finally:
        on_login(cluster, ['scancel', job_id], env, script.parent)      # ended: a no-op
    took = time.monotonic() - started
    text = out.read_text() if out.exists() else '(no output file)'
    proc = subprocess.CompletedProcess(sub.args, code, sub.stdout, 'job %s: %s' % (job_id, state))
    return proc, text, took


def test_dist_dssp_job_with_two_servers_holds_the_settings_files_bound(slurm4, tmp_path):
    """-n 2 -s 2 in an allocation of 4 tasks on 3 nodes (2,1,1): the servers on host1 and
    host2, the workers on host3 and host1 (slots node by node in turns); the settings file
    (DSSP range [1, 2]) reaches every node; worker 1 is slower, so the fast one is held at
    the bound."""
    iters = 10
    job = tmp_path / 'job'
    job.mkdir()
    settings_file(job)
    script = batch_script(job, ['-n', '2', '-s', '2'],
                          ['--out', str(tmp_path / 'steps'), '--store', 'dist_dssp', '--iters',
                           str(iters), '--slow-rank', '1', '--slow-seconds', '0.2'])
    proc, text, _ = sbatch_wait(slurm4, tmp_path, script)
    assert proc.returncode == 0, fail_msg(proc) + text
    summary = re.search(r'slurm job: 1 scheduler, 2 servers, 2 workers on job \d+: 3 nodes '
                        r'\(host1,host2,host3\), task slots host1:2,host2:1,host3:1; scheduler '
                        r'here at 198\.18\.0\.2:\d+; one srun step per process: '
                        r'host1 s0 w1; host2 s1; host3 w0', text)
    assert summary, text
    steps = {r: read_jsonl(tmp_path / 'steps' / ('steps-%d.jsonl' % r)) for r in (0, 1)}
    assert [len(steps[r]) for r in (0, 1)] == [iters, iters], text
    leads = [rec['lead'] for r in (0, 1) for rec in steps[r]]
    assert max(leads) == 2 and all(0 <= lead <= 2 for lead in leads), leads
    assert 'staleness [1, 2]' in text, text
    assert 'all 5 processes exited with code 0' in text, text
    controller = read_jsonl(job / 'metrics' / 'controller.jsonl')
    assert any(e.get('event') == 'push' and e.get('decision') == 'wait' for e in controller)
    assert 'no MXNET_SSP_* setting reached it' not in text, text


def test_a_killed_worker_step_fails_the_job_naming_it_within_the_bound(slurm4, tmp_path):
    job = tmp_path / 'job'
    job.mkdir()
    settings_file(job)
    script = batch_script(job, ['-n', '2', '-s', '1'],
                          ['--out', str(tmp_path / 'steps'), '--store', 'dist_dssp', '--iters',
                           '400', '--base-seconds', '0.05', '--die-rank', '0', '--die-at', '3',
                           '--die-by', 'sigkill'])
    proc, text, took = sbatch_wait(slurm4, tmp_path, script)
    ended = time.time()
    assert proc.returncode != 0, text
    m = re.search(r'worker #\d \(launch index\) on host\d \(local srun pid \d+\) exited with '
                  r"code 137 \(srun's code for its task killed by signal SIGKILL\) — stopping "
                  r'the job', text)
    assert m, text
    died = re.search(r'worker 0 dying on purpose', text)
    assert died, text
    # worker 0 wrote its last step just before it killed itself: from then to sbatch's end
    died = os.stat(tmp_path / 'steps' / 'steps-0.jsonl').st_mtime
    assert 0 < ended - died < FAIL_WITHIN_S, (ended - died, took, text)


def test_elastic_mode_survives_a_killed_worker_step(slurm4, tmp_path):
    job = tmp_path / 'job'
    job.mkdir()
    settings_file(job, elastic=True)
    script = batch_script(job, ['-n', '2', '-s', '1', '--elastic', '1'],
                          ['--out', str(tmp_path / 'steps'), '--store', 'dist_dssp', '--iters',
                           '12', '--die-rank', '1', '--die-at', '3', '--die-by', 'sigkill'])
    proc, text, _ = sbatch_wait(slurm4, tmp_path, script)
    assert proc.returncode == 0, fail_msg(proc) + text
    assert re.search(r'worker #\d \(launch index\) on host\d \(local srun pid \d+\) exited '
                     r'with code 137 .* — elastic: 1 of 2 workers go on', text), text
    assert re.search(r'job finished: \d of 4 processes exited with code 0; lost worker #\d',
                     text), text
    survivor = read_jsonl(tmp_path / 'steps' / 'steps-0.jsonl')
    assert len(survivor) == 12, text


def _job_processes(marker):
    """'pid cmdline' of the live processes whose command line contains `marker`."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open('/proc/%s/cmdline' % name, 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode(errors='replace')
            with open('/proc/%s/stat' % name) as f:
                state = f.read().rsplit(')', 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != 'Z':
            found.append('%s %s' % (name, cmd[:200]))
    return found


def test_scancel_mid_job_leaves_no_process_of_the_job(slurm4, tmp_path):
    job = tmp_path / 'job'
    job.mkdir()
    settings_file(job)
    steps = tmp_path / 'steps'
    script = batch_script(job, ['-n', '2', '-s', '1'],
                          ['--out', str(steps), '--store', 'dist_dssp', '--iters', '100000',
                           '--base-seconds', '0.05'])
    env = slurm_env(tmp_path)
    sub = on_login(slurm4, ['sbatch', '--parsable', '--nodes=3', '--ntasks=3',
                            '--output=%s' % (tmp_path / 'slurm.out'), '--chdir=%s' % job,
                            str(script)], env, job)
    assert sub.returncode == 0, fail_msg(sub)
    job_id = sub.stdout.strip().split(';')[0]
    marker = str(steps)
    try:
        deadline = time.monotonic() + 90
        while not all((steps / ('steps-%d.jsonl' % r)).exists() for r in (0, 1)):
            assert time.monotonic() < deadline, (tmp_path / 'slurm.out').read_text()
            time.sleep(0.1)         # polling the workers' first steps with a deadline
        assert len(_job_processes(marker)) >= 4       # scheduler, server, 2 workers at least
        cancel = on_login(slurm4, ['scancel', job_id], env, job)
        assert cancel.returncode == 0, fail_msg(cancel)
        deadline = time.monotonic() + 20
        while _job_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.1)         # polling the processes' end with a deadline
        assert _job_processes(marker) == [], (tmp_path / 'slurm.out').read_text()
    finally:
        on_login(slurm4, ['scancel', '--signal=KILL', job_id], env, job)


#: a user's train.py for the docs' batch script: a few steps of a small model on the store
#: its --kvstore names; each worker writes its rank and final loss
TRAIN = '''\
import argparse, json, os
import mxnet as mx
import mxnet_ssp  # noqa: F401
from mxnet import autograd, gluon, nd
p = argparse.ArgumentParser()
p.add_argument('--kvstore', required=True)
args = p.parse_args()
kv = mx.kv.create(args.kvstore)
mx.random.seed(kv.rank)
net = gluon.nn.Dense(1)
net.initialize(mx.init.Zero())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1}, kvstore=kv)
x = nd.random.uniform(shape=(64, 4))
y = nd.dot(x, nd.array([[1.0], [2.0], [-1.0], [0.5]]))
losses = []
for _ in range(30):
    with autograd.record():
        loss = ((net(x) - y) ** 2).mean()
    loss.backward()
    trainer.step(1)
    losses.append(float(loss.asscalar()))
with open('train-%d.json' % kv.rank, 'w') as f:
    json.dump({'rank': kv.rank, 'type': kv.type, 'first': losses[0], 'last': losses[-1],
               'host': os.uname()[1]}, f)
'''


def docs_batch_script():
    """The batch script of docs/launch.md's Slurm section, as written."""
    with open(os.path.join(ROOT, 'docs', 'launch.md')) as f:
        text = f.read()
    section = text[text.index('## Slurm (`--launcher slurm`)'):]
    return re.search(r'```sh\n(#!/bin/bash\n.*?)```', section, re.S).group(1)


def test_the_docs_batch_script_runs_as_written(slurm4, tmp_path):
    """docs/launch.md's job.sh, submitted with plain `sbatch job.sh` from the directory
    of train.py (a user's script) and a settings file: its #SBATCH lines ask for the
    allocation, and mxnet-ssp-launch and python are the active virtual environment's (the
    "source .../activate" the script leaves to the user is this test's environment: PATH
    and VIRTUAL_ENV)."""
    script = docs_batch_script()
    assert 'mxnet-ssp-launch --launcher slurm -n 2 -s 2 python train.py --kvstore dist_dssp' \
        in script, script
    job = tmp_path / 'job'
    job.mkdir()
    (job / 'job.sh').write_text(script)
    (job / 'train.py').write_text(TRAIN)
    (job / 'mxnet_ssp.env').write_text('MXNET_SSP_STALENESS=1,3\nMXNET_SSP_TIMEOUT=60\n')
    # the installed commands, as this checkout's (a venv's bin first on PATH)
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    (bindir / 'mxnet-ssp-launch').write_text('#!/bin/sh\nexec %s -m mxnet_ssp.launch "$@"\n'
                                             % PY)
    (bindir / 'python').write_text('#!/bin/sh\nexec %s "$@"\n' % PY)
    for name in ('mxnet-ssp-launch', 'python'):
        (bindir / name).chmod(0o755)
    env = slurm_env(tmp_path)
    env['PATH'] = '%s%s%s' % (bindir, os.pathsep, env['PATH'])
    env['VIRTUAL_ENV'] = str(tmp_path)
    proc, text, _ = sbatch_wait(slurm4, tmp_path, job / 'job.sh', options=[], env=env)
    assert proc.returncode == 0, fail_msg(proc) + text
    assert re.search(r'one srun step per process: host1 s0 w1; host2 s1; host3 w0', text), text
    results = sorted((json.loads((job / ('train-%d.json' % r)).read_text()) for r in (0, 1)),
                     key=lambda r: r['rank'])
    assert [r['type'] for r in results] == ['dist_dssp', 'dist_dssp'], results
    assert sorted(r['host'] for r in results) == ['host1', 'host3'], results
    assert all(r['last'] < 0.5 * r['first'] for r in results), results
    assert 'staleness [1, 3]' in text, text
