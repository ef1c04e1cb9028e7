"""Tests of mxnet-ssp-launch (mxnet_ssp/launch/).

Real jobs run on this machine only (loopback).  Helper scripts written to
tmp_path stand in for training scripts: they dump their environment, record
their pid, block, or fail on purpose.  Synchronization is by files and
process exit, never by sleeping: the only waits are polls for files with a
deadline.

The ``ssh`` tests start a private sshd on 127.0.0.1 / 127.0.0.2 with keys in
tmp_path; they need /usr/sbin/sshd, ssh and ssh-keygen (Debian:
``apt-get install openssh-server openssh-client``), and root (sshd's
privilege-separation directory /run/sshd, and login as the current user).
The mpi runs need ``mpirun`` (Debian: ``apt-get install openmpi-bin``).  Without
these the tests are skipped, and fail under CI=true (tests/conftest.py need).
"""
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import INSTALL_MPI, INSTALL_SSH, in_ci, need, need_program, run_stock_launch
from mxnet_ssp import launch
from mxnet_ssp.launch import (Host, LaunchError, Spec, Supervisor, find_kvstore_names,
                              mpi_argv, mpi_flavor, parse_hostfile, remote_script, role_settings,
                              rsync_argv, ssh_argv, validate_settings)

from conftest import ROOT as REPO  # noqa: E402  (the checkout)
PY = sys.executable

# ---------------------------------------------------------------------------
# helper scripts (each process of a job runs the same one)
# ---------------------------------------------------------------------------

MINIMAL_JOB = '''\
import mxnet as mx          # in scheduler/server roles this never returns
kv = mx.kv.create('dist_sync'); kv.init(0, mx.nd.zeros(4)); kv.push(0, mx.nd.ones(4)); out = mx.nd.zeros(4); kv.pull(0, out=out)
import sys; sys.stdout.write('%d %s\\n' % (kv.rank, out.asnumpy()))   # one write: workers share stdout
'''

# Writes DIR/<role>-<pid>.json with its environment.  The scheduler then waits (at most 60 s)
# until every process of the job has written its own: MXNet's stock launcher exits when its
# scheduler does, and its other processes are started by daemon threads that die with it.
DUMP_ENV = '''\
import json, os, sys, time
role = os.environ.get('DMLC_ROLE')
path = os.path.join(sys.argv[1], '%s-%d.json' % (role, os.getpid()))
with open(path + '.tmp', 'w') as f:
    json.dump(dict(os.environ), f)
os.rename(path + '.tmp', path)
if role == 'scheduler':
    total = 1 + int(os.environ['DMLC_NUM_WORKER']) + int(os.environ['DMLC_NUM_SERVER'])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sum(n.endswith('.json') for n in os.listdir(sys.argv[1])) >= total:
            break
        time.sleep(0.05)
'''

# Records its pid in DIR/<role>-<launch index>.pid, then blocks until killed.
# FAIL="worker-1:3": worker #1 exits 3 once every process has recorded its pid.
# IGNORE_TERM=1: ignore SIGTERM (installed before the pid is recorded).
BLOCK = '''\
import os, signal, sys, time
d, fail = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3 and sys.argv[3] == 'IGNORE_TERM':
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
me = '%s-%s' % (os.environ.get('DMLC_ROLE'), os.environ.get('MXNET_SSP_LAUNCH_INDEX'))
with open(os.path.join(d, me + '.tmp'), 'w') as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(d, me + '.tmp'), os.path.join(d, me + '.pid'))
who, _, code = fail.partition(':')
if who == me:
    total = int(os.environ['DMLC_NUM_WORKER']) + int(os.environ['DMLC_NUM_SERVER']) + 1
    deadline = time.monotonic() + 60
    while sum(n.endswith('.pid') for n in os.listdir(d)) < total and time.monotonic() < deadline:
        time.sleep(0.02)
    sys.exit(int(code))
while True:
    signal.pause()
'''

# Under mpirun: records its pid in DIR/<role>-<pid>.pid; worker rank 1 (MPI rank) exits 3
# once all 4 processes of a -n 2 -s 1 job have recorded theirs; the others block.
MPI_BLOCK = '''\
import os, signal, sys, time
d = sys.argv[1]
role = os.environ.get('DMLC_ROLE')
with open(os.path.join(d, 'tmp-%d' % os.getpid()), 'w') as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(d, 'tmp-%d' % os.getpid()), os.path.join(d, '%s-%d.pid' % (role, os.getpid())))
rank = os.environ.get('OMPI_COMM_WORLD_RANK', os.environ.get('PMI_RANK'))
if role == 'worker' and rank == '1':
    deadline = time.monotonic() + 60
    while sum(n.endswith('.pid') for n in os.listdir(d)) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    sys.exit(3)
while True:
    signal.pause()
'''


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def launcher_env(**extra):
    """Environment for a launcher subprocess: this checkout importable, no stray settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('DMLC_', 'MXNET_SSP_')) and k != 'PS_VERBOSE'}
    env['PYTHONPATH'] = REPO + (os.pathsep + env['PYTHONPATH'] if env.get('PYTHONPATH') else '')
    env['OMP_NUM_THREADS'] = '1'
    env.update(extra)
    return env


def run_launcher(args, env=None, cwd=None, timeout=120):
    return subprocess.run([PY, '-m', 'mxnet_ssp.launch'] + list(args),
                          env=env or launcher_env(), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def clean_env(monkeypatch):
    """os.environ for launch.main() run in this process."""
    for key in list(os.environ):
        if key.startswith(('DMLC_', 'MXNET_SSP_')) or key in ('OMP_NUM_THREADS', 'PS_VERBOSE'):
            monkeypatch.delenv(key)
    return monkeypatch


def wait_for_files(directory, suffix, count, timeout=60, proc=None):
    """Poll until `count` files ending in `suffix` exist (or fail after `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        names = sorted(n for n in os.listdir(directory) if n.endswith(suffix))
        if len(names) >= count:
            return names
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail('launcher exited %s before %d %s files: %s\n%s\n%s'
                        % (proc.returncode, count, suffix, names, out, err))
        if time.monotonic() > deadline:
            pytest.fail('only %s after %d s' % (names, timeout))
        time.sleep(0.05)


def read_pids(directory):
    return {n[:-4]: int(Path(directory, n).read_text()) for n in os.listdir(directory)
            if n.endswith('.pid')}


def alive(pid):
    """True if `pid` is a running (not zombie) process."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False
    except OSError:                     # pragma: no cover - no /proc
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def read_dumps(directory):
    out = {}
    for name in os.listdir(directory):
        if name.endswith('.json'):
            env = json.loads(Path(directory, name).read_text())
            out.setdefault(env['DMLC_ROLE'], []).append(env)
    return out


# ---------------------------------------------------------------------------
# local launcher: real jobs
# ---------------------------------------------------------------------------

def test_local_dist_sync_job(tmp_path):
    """A real 2-worker 1-server dist_sync job through `python -m mxnet_ssp.launch`."""
    script = write(tmp_path, 'job.py', MINIMAL_JOB)
    proc = run_launcher(['-n', '2', '-s', '1', '--launcher', 'local', '--timeout', '100',
                         PY, script], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    results = sorted(line for line in proc.stdout.splitlines() if line.strip())
    assert results == ['0 [2. 2. 2. 2.]', '1 [2. 2. 2. 2.]'], proc.stdout
    assert 'all 4 processes exited with code 0' in proc.stderr


def test_local_env_of_each_role(tmp_path, clean_env, capfd):
    """OMP_NUM_THREADS=1 by default; --env-worker / --env-server reach only their role."""
    out = tmp_path / 'dumps'
    out.mkdir()
    clean_env.setenv('LAUNCH_TEST_INHERITED', 'yes')
    clean_env.setenv('DMLC_ROLE', 'stale-value-must-not-leak')
    script = write(tmp_path, 'dump.py', DUMP_ENV)
    rc = launch.main(['-n', '2', '-s', '2', '--launcher', 'local',
                      '--env-worker', 'ONLY_WORKER:w:1', '--env-server', 'ONLY_SERVER=s',
                      '--env', 'EVERYONE:all', '--env-worker', 'MXNET_SSP_STALENESS:2,6',
                      '--timeout', '60', PY, script, str(out)])
    err = capfd.readouterr().err
    assert rc == 0, err
    dumps = read_dumps(out)
    assert {r: len(v) for r, v in dumps.items()} == {'scheduler': 1, 'server': 2, 'worker': 2}
    ports = set()
    for role, envs in dumps.items():
        for env in envs:
            assert env['OMP_NUM_THREADS'] == '1'
            assert env['LAUNCH_TEST_INHERITED'] == 'yes'
            assert env['EVERYONE'] == 'all'
            assert env['DMLC_PS_ROOT_URI'] == '127.0.0.1'
            assert (env['DMLC_NUM_WORKER'], env['DMLC_NUM_SERVER']) == ('2', '2')
            assert ('ONLY_WORKER' in env) == (role == 'worker')
            assert ('ONLY_SERVER' in env) == (role == 'server')
            assert ('MXNET_SSP_STALENESS' in env) == (role == 'worker')
            ports.add(env['DMLC_PS_ROOT_PORT'])
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    assert {e['ONLY_WORKER'] for e in dumps['worker']} == {'w:1'}
    assert {e['ONLY_SERVER'] for e in dumps['server']} == {'s'}
    assert sorted(e[launch.ENV_LAUNCH_INDEX] for e in dumps['worker']) == ['0', '1']
    assert sorted(e[launch.ENV_LAUNCH_INDEX] for e in dumps['server']) == ['0', '1']
    # what MXNet's tools/launch.py (dmlc tracker, local mode) gives: workers are tasks 0..n-1,
    # servers n..n+s-1, in the worker's launch order
    for env in dumps['worker'] + dumps['server']:
        offset = 0 if env['DMLC_ROLE'] == 'worker' else 2
        assert env['DMLC_TASK_ID'] == str(offset + int(env[launch.ENV_LAUNCH_INDEX])), env
        assert (env['DMLC_JOB_CLUSTER'], env['DMLC_NUM_ATTEMPT']) == ('local', '0')
    assert not {'DMLC_TASK_ID', 'DMLC_JOB_CLUSTER'} & set(dumps['scheduler'][0])


def test_local_env_matches_mxnets_stock_launch_py(tmp_path, clean_env, capfd):
    """Every DMLC_* variable MXNet's own tools/launch.py --launcher local gives a process of
    each role (run through mxnet-ssp-stock-launch: python -m mxnet_ssp.launch.stock), ours
    gives too, with the same value (but the scheduler address and port, which differ per
    job)."""
    script = write(tmp_path, 'dump.py', DUMP_ENV)
    dumps = {}
    for name, run in (('stock', _stock_local), ('ours', _our_local)):
        out = tmp_path / name
        out.mkdir()
        run(tmp_path, [PY, script, str(out)])
        wait_for_files(out, '.json', 5)     # the stock launcher may return before its children
        dumps[name] = read_dumps(out)
    # (DMLC_NODE_HOST: the tests' shim pins the stock job's nodes to loopback with it)
    per_job = {'DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT', 'DMLC_NODE_HOST'}

    def dmlc(env):
        return {k: v for k, v in env.items() if k.startswith('DMLC_') and k not in per_job}

    for role in ('scheduler', 'server', 'worker'):
        stock = sorted((dmlc(e) for e in dumps['stock'][role]), key=lambda e: sorted(e.items()))
        ours = sorted((dmlc(e) for e in dumps['ours'][role]), key=lambda e: sorted(e.items()))
        assert len(stock) == len(ours), role
        for theirs, mine in zip(stock, ours):
            assert theirs.items() <= mine.items(), (role, theirs, mine)


def _stock_local(tmp_path, command):
    env = dict(os.environ, STOCK_LAUNCH_HOST_IP='127.0.0.1')
    proc = run_stock_launch(tmp_path, command, workers=2, servers=2, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _our_local(tmp_path, command):
    assert launch.main(['-n', '2', '-s', '2', '--launcher', 'local', '--timeout', '60']
                       + command) == 0


def test_local_user_omp_num_threads_is_kept(tmp_path, clean_env, capfd):
    out = tmp_path / 'dumps'
    out.mkdir()
    clean_env.setenv('OMP_NUM_THREADS', '3')
    script = write(tmp_path, 'dump.py', DUMP_ENV)
    rc = launch.main(['-n', '1', '-s', '1', '--launcher', 'local',
                      '--env-worker', 'OMP_NUM_THREADS:2', PY, script, str(out)])
    assert rc == 0, capfd.readouterr().err
    dumps = read_dumps(out)
    assert [e['OMP_NUM_THREADS'] for e in dumps['worker']] == ['2']
    assert [e['OMP_NUM_THREADS'] for e in dumps['server']] == ['3']
    assert [e['OMP_NUM_THREADS'] for e in dumps['scheduler']] == ['3']


def test_failing_worker_stops_the_job(tmp_path, clean_env, capfd):
    """Worker #1 exits 3: the launcher names it, stops everything, exits non-zero."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'block.py', BLOCK)
    rc = launch.main(['-n', '2', '-s', '1', '--launcher', 'local', '--timeout', '60',
                      PY, script, str(pids), 'worker-1:3'])
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED, err
    lines = [line for line in err.splitlines() if 'stopping the job' in line]
    assert len(lines) == 1, err
    assert 'worker #1 (launch index; pid' in lines[0] and 'exited with code 3' in lines[0]
    recorded = read_pids(pids)
    assert sorted(recorded) == ['scheduler-0', 'server-0', 'worker-0', 'worker-1']
    assert [name for name, pid in recorded.items() if alive(pid)] == []


def test_sigint_to_launcher_stops_everything(tmp_path):
    """SIGINT to the launcher (a subprocess, as from Ctrl-C): exit 130, no process left."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'block.py', BLOCK)
    proc = subprocess.Popen([PY, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1',
                             '--launcher', 'local', '--timeout', '90',
                             PY, script, str(pids), 'none'],
                            env=launcher_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for_files(pids, '.pid', 4, proc=proc)
        recorded = read_pids(pids)
        assert all(alive(pid) for pid in recorded.values())
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert 'received SIGINT — stopping the job' in err
    assert [name for name, pid in recorded.items() if alive(pid)] == []


def test_sigterm_to_launcher_stops_everything(tmp_path, clean_env, capfd):
    """SIGTERM to a launcher running in this process: exit 143, no process left."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'block.py', BLOCK)
    recorded = {}

    def send_sigterm():
        wait_for_files(pids, '.pid', 3, timeout=60)
        recorded.update(read_pids(pids))
        os.kill(os.getpid(), signal.SIGTERM)   # handled by the launcher's handler

    before = signal.getsignal(signal.SIGTERM)
    sender = threading.Thread(target=send_sigterm, daemon=True)
    sender.start()
    rc = launch.main(['-n', '1', '-s', '1', '--launcher', 'local', '--timeout', '60',
                      PY, script, str(pids), 'none'])
    sender.join(timeout=10)
    err = capfd.readouterr().err
    assert rc == 143, err
    assert 'received SIGTERM — stopping the job' in err
    assert len(recorded) == 3
    assert [name for name, pid in recorded.items() if alive(pid)] == []
    assert signal.getsignal(signal.SIGTERM) is before   # handler restored


# ---------------------------------------------------------------------------
# validation: bad settings stop the launcher before anything starts
# ---------------------------------------------------------------------------

#: A process that ends (status 0) once the file sys.argv[1] exists (polled every 20 ms).
WAIT_FOR_FILE = ('import os, sys, time\n'
                 'while not os.path.exists(sys.argv[1]):\n'
                 '    time.sleep(0.02)\n')

MARKER_CMD = [PY, '-c', 'import sys; open(sys.argv[1], "w").write("started")']


@pytest.mark.parametrize('env, args, expect', [
    ({'MXNET_SSP_STALENESS': '-1'}, [], ["MXNET_SSP_STALENESS='-1'", 'cannot be negative',
                                         "'sL,sU'"]),
    ({'MXNET_SSP_STALENESS': '5,3'}, [], ["MXNET_SSP_STALENESS='5,3'", 'sL=5 is greater than sU=3',
                                         'expected']),
    ({'MXNET_SSP_STALENESS': 'abc'}, [], ["MXNET_SSP_STALENESS='abc'", 'expected']),
    ({'MXNET_SSP_STALENESS': '3,15'}, ['--kvstore', 'dist_ssp'],
     ["MXNET_SSP_STALENESS='3,15'", 'dist_ssp', 'one integer s >= 0']),
    ({}, ['--kvstore', 'dist_sspp'], ['--kvstore dist_sspp', "'dist_sspp'", 'dist_ssp, dist_dssp']),
    ({}, ['--kv-store=dist_sspp'], ['--kv-store dist_sspp', 'dist_ssp, dist_dssp']),
    ({}, ['--kvstore'], ['--kvstore without a value in the command', 'dist_ssp, dist_dssp']),
    ({'MXNET_SSP_DSSP_MODE': 'fast'}, [], ["MXNET_SSP_DSSP_MODE='fast'", 'bounded, paper']),
    ({'MXNET_SSP_TIMEOUT': '0'}, [], ["MXNET_SSP_TIMEOUT='0'", 'seconds > 0']),
    ({'MXNET_SSP_ELASTIC': 'yes'}, [], ["MXNET_SSP_ELASTIC='yes'", 'least number of workers',
                                        '1 <= n <= the number of workers (2)', '0/off']),
    ({'MXNET_SSP_ELASTIC': '3'}, [], ["MXNET_SSP_ELASTIC='3'", '1 <= n <= the number of '
                                      'workers (2)']),
])
def test_bad_setting_exits_2_and_starts_nothing(tmp_path, clean_env, capfd, env, args, expect):
    marker = tmp_path / 'started'
    for key, value in env.items():
        clean_env.setenv(key, value)
    rc = launch.main(['-n', '2', '--launcher', 'local'] + MARKER_CMD + [str(marker)] + args)
    err = capfd.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('mxnet-ssp-launch: error: '), err
    for text in expect:
        assert text in lines[0], lines[0]
    assert not marker.exists()


@pytest.mark.parametrize('args, expect', [
    (['--env-worker', 'MXNET_SSP_STALENESS:7,2'], ['sL=7 is greater than sU=2', '--env-worker']),
    (['--env-server', 'MXNET_SSP_DSSP_MODE:fast'], ["'fast'", '--env-server']),
    (['--env-worker', 'NOVALUE'], ['--env-worker', "'NOVALUE'", 'NAME:VALUE']),
    (['--env-server', 'DMLC_ROLE:worker'], ['DMLC_ROLE', 'set by mxnet-ssp-launch']),
    (['-n', '0'], ['-n/--num-workers 0', 'at least 1']),
    (['-s', '0'], ['-s/--num-servers 0', 'at least 1']),
    (['--timeout', '-5'], ['--timeout', 'seconds > 0']),
    (['--elastic', '0.5'], ["--elastic='0.5' is not valid", '1 <= n <= the number of workers (2)']),
    (['--elastic', '-1'], ["--elastic='-1' is not valid"]),
    (['--elastic', '1', '--launcher', 'mpi'], ['--elastic 1 is not supported with --launcher mpi']),
    (['--elastic', '1', '--max-restarts', '2'], ['--max-restarts 2 is not valid: expected 0 or 1',
                                                 'one replacement per job']),
    (['--max-restarts', '1'], ['--max-restarts 1 needs --elastic MIN_WORKERS']),
    (['--elastic', '1', '--max-restarts', '1', '--env', 'PS_HEARTBEAT_TIMEOUT:0'],
     ["PS_HEARTBEAT_TIMEOUT='0' is not valid with --max-restarts", 'whole seconds >= 1']),
    (['--elastic', '1', '--max-restarts', '1', '--env', 'PS_HEARTBEAT_INTERVAL:9'],
     ['PS_HEARTBEAT_INTERVAL=9 must be below PS_HEARTBEAT_TIMEOUT=5']),
    (['--env-worker', 'MXNET_SSP_ELASTIC:1'], ['--env-worker MXNET_SSP_ELASTIC',
                                               'the same in every process', '--elastic']),
    (['--launcher', 'sge'], ['--launcher sge is not supported by mxnet-ssp-launch', 'use']),
    (['--launcher', 'yarn'], ['--launcher yarn is not supported by mxnet-ssp-launch', 'use']),
    (['--launcher', 'ssh'], ['needs -H/--hostfile']),
    (['--launcher', 'ssh', '-H', 'no-such-hostfile'],
     ["hostfile 'no-such-hostfile' does not exist"]),
    (['-H', 'x', 'OMP_NUM_THREADS=2'], ["command 'OMP_NUM_THREADS=2' not found", "sh -c"]),
])
def test_bad_usage_exits_2_and_starts_nothing(tmp_path, clean_env, capfd, args, expect):
    marker = tmp_path / 'started'
    base = ['-n', '2', '--launcher', 'local']
    rc = launch.main(base + args + MARKER_CMD + [str(marker)])
    err = capfd.readouterr().err
    assert rc == 2, err
    assert all(text in err for text in expect), err
    assert not marker.exists()


def test_no_command_exits_2(clean_env, capfd):
    assert launch.main(['-n', '2', '--launcher', 'local']) == 2
    assert 'no command given' in capfd.readouterr().err


def test_cli_bad_staleness_in_subprocess(tmp_path):
    """The same check through `python -m mxnet_ssp.launch`, from a fresh process."""
    marker = tmp_path / 'started'
    proc = run_launcher(['-n', '1', '--launcher', 'local', '--env-worker', 'X:1']
                        + MARKER_CMD + [str(marker), '--kvstore', 'dist_dssp'],
                        env=launcher_env(MXNET_SSP_STALENESS='5,3'))
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "mxnet-ssp-launch: error: MXNET_SSP_STALENESS='5,3' is not valid for dist_dssp")
    assert not marker.exists()


def test_launcher_does_not_import_mxnet():
    code = 'import sys, mxnet_ssp.launch; print("mxnet" in sys.modules)'
    proc = subprocess.run([PY, '-c', code], env=launcher_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.strip() == 'False', proc.stderr


def test_find_kvstore_names():
    assert find_kvstore_names(['python', 't.py', '--kvstore', 'dist_ssp']) == [
        ('--kvstore', 'dist_ssp')]
    assert find_kvstore_names(['python', 't.py', '--kv-store=dist_dssp', '--kvstore']) == [
        ('--kv-store', 'dist_dssp'), ('--kvstore', '')]
    assert find_kvstore_names(['sh', '-c', 'python t.py --kvstore dist_sync']) == [
        ('--kvstore', 'dist_sync')]
    assert find_kvstore_names(['python', 't.py', '--kvstore-type', 'x']) == []


def test_validate_settings_store_specific():
    # a single staleness is valid for both stores; 'sL,sU' only for dist_dssp
    assert validate_settings(['t', '--kvstore', 'dist_ssp'], {'MXNET_SSP_STALENESS': '4'}) == [
        'dist_ssp']
    assert validate_settings(['t', '--kvstore', 'dist_dssp'],
                             {'MXNET_SSP_STALENESS': '2,9'}) == ['dist_dssp']
    assert validate_settings(['t', '--kvstore', 'DIST_SYNC'], {}) == ['dist_sync']
    # without --kvstore, settings are checked as for dist_dssp (the most permissive)
    assert validate_settings(['t'], {}, [('--env-worker', {'MXNET_SSP_STALENESS': '1,2'})]) == []
    with pytest.raises(LaunchError, match=r"'1,2' is not valid for dist_ssp.*--env-worker"):
        validate_settings(['t', '--kvstore', 'dist_ssp'], {},
                          [('--env-worker', {'MXNET_SSP_STALENESS': '1,2'})])


def test_role_settings_omp_default():
    assert role_settings({}, {}, {})['OMP_NUM_THREADS'] == '1'
    assert role_settings({}, {}, {'OMP_NUM_THREADS': '4'})['OMP_NUM_THREADS'] == '4'
    assert role_settings({'OMP_NUM_THREADS': '2'}, {}, {})['OMP_NUM_THREADS'] == '2'
    assert role_settings({}, {'OMP_NUM_THREADS': '5'}, {'OMP_NUM_THREADS': '4'}
                         )['OMP_NUM_THREADS'] == '5'
    p3 = role_settings({}, {}, {}, p3=True)
    assert (p3['DMLC_PS_VAN_TYPE'], p3['DMLC_PS_WATER_MARK']) == ('p3', '10')


# ---------------------------------------------------------------------------
# Supervisor details (in process, small grace)
# ---------------------------------------------------------------------------

def test_supervisor_sigkills_a_process_ignoring_sigterm(tmp_path, capfd):
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'block.py', BLOCK)
    base = dict(os.environ, DMLC_NUM_WORKER='1', DMLC_NUM_SERVER='0')
    stubborn = Spec('scheduler', 0, [PY, script, str(pids), 'none', 'IGNORE_TERM'],
                    dict(base, DMLC_ROLE='scheduler', MXNET_SSP_LAUNCH_INDEX='0'))
    failing = Spec('worker', 0, [PY, script, str(pids), 'worker-0:5'],
                   dict(base, DMLC_ROLE='worker', MXNET_SSP_LAUNCH_INDEX='0'))
    rc = Supervisor([stubborn, failing], grace=0.5).run()
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED
    assert 'worker #0 (launch index; pid' in err and 'exited with code 5' in err
    assert 'sent SIGKILL to scheduler (still running 0.5 s after SIGTERM)' in err
    assert [n for n, pid in read_pids(pids).items() if alive(pid)] == []


def test_supervisor_stops_descendants_in_other_process_groups(tmp_path, capfd):
    """A child whose own child moved to another process group (as mpirun's ranks do)
    exits 4: that grandchild is found through the session and stopped as well."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'block.py', BLOCK)
    parent = ('import os, subprocess, sys, time\n'
              'subprocess.Popen([sys.argv[1], sys.argv[2], sys.argv[3], "none"],\n'
              '                 preexec_fn=lambda: os.setpgid(0, 0))\n'
              'while not os.path.exists(os.path.join(sys.argv[3], "worker-7.pid")):\n'
              '    time.sleep(0.02)\n'
              'sys.exit(4)\n')
    spec = Spec('worker', 0, [PY, '-c', parent, PY, script, str(pids)],
                dict(os.environ, DMLC_ROLE='worker', MXNET_SSP_LAUNCH_INDEX='7'))
    rc = Supervisor([spec], grace=2).run()
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED and 'exited with code 4' in err
    recorded = read_pids(pids)
    assert list(recorded) == ['worker-7']
    assert not alive(recorded['worker-7'])


def test_supervisor_names_a_signal(tmp_path, capfd):
    spec = Spec('worker', 2, [PY, '-c', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'])
    assert Supervisor([spec], grace=0.5).run() == launch.EXIT_FAILED
    err = capfd.readouterr().err
    assert 'worker #2 (launch index; pid' in err and 'was killed by signal SIGKILL' in err


def test_supervisor_server_that_never_exits(tmp_path, capfd):
    """All workers exited 0 but a server keeps running: stopped after finish_timeout."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'block.py', BLOCK)
    server = Spec('server', 0, [PY, script, str(pids), 'none'],
                  dict(os.environ, DMLC_ROLE='server', MXNET_SSP_LAUNCH_INDEX='0'))
    worker = Spec('worker', 0, [PY, '-c', WAIT_FOR_FILE, str(pids / 'server-0.pid')])
    rc = Supervisor([server, worker], finish_timeout=0.3, grace=2).run()
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED
    assert 'all workers exited with code 0 but server #0 (launch index; pid' in err
    recorded = read_pids(pids)
    assert list(recorded) == ['server-0'] and not alive(recorded['server-0'])


def test_supervisor_elastic_goes_on_without_a_lost_worker(tmp_path, capfd):
    """min_workers=1: worker #1 killed, worker #0 and the server exit 0: the job succeeds and
    its last line names the lost worker; the server is not stopped when the worker dies."""
    done = tmp_path / 'done'
    server = Spec('server', 0, [PY, '-c', WAIT_FOR_FILE, str(done)])
    dies = Spec('worker', 1, [PY, '-c', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'])
    finishes = Spec('worker', 0, [PY, '-c', WAIT_FOR_FILE + 'open(sys.argv[2], "w").close()\n',
                                  str(tmp_path / 'go'), str(done)])
    go = Spec('worker', 2, [PY, '-c', 'import sys; open(sys.argv[1], "w").close()',
                            str(tmp_path / 'go')])
    rc = Supervisor([server, dies, finishes, go], grace=2, min_workers=2).run()
    err = capfd.readouterr().err
    assert rc == 0, err
    assert re.search(r'worker #1 \(launch index; pid \d+\) was killed by signal SIGKILL — '
                     r'elastic: 2 of 3 workers go on \(at least 2 needed\)', err), err
    assert re.search(r'job finished: 3 of 4 processes exited with code 0; lost worker #1 '
                     r'\(was killed by signal SIGKILL [\d.]+ s after the start\)', err), err


@pytest.mark.parametrize('min_workers', [0, 1])
def test_supervisor_sees_a_process_that_died_while_the_others_were_starting(
        capfd, monkeypatch, min_workers):
    """Each next process starts only once the first one's exit is queued: the launcher must
    still count it (it once read that exit while starting and dropped it: the job then
    'succeeded' with all 3 processes at code 0, or elastic named no lost worker)."""
    spawn = Supervisor._spawn

    def spawn_after_the_first_died(self, spec):
        if self.procs:
            self.procs[0].thread.join(timeout=60)     # its exit is written to the event pipe
            assert not self.procs[0].thread.is_alive()
        return spawn(self, spec)
    monkeypatch.setattr(Supervisor, '_spawn', spawn_after_the_first_died)
    dies = Spec('worker', 0, [PY, '-c', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'])
    other = Spec('worker', 1, [PY, '-c', 'pass'])
    server = Spec('server', 0, [PY, '-c', 'pass'])
    rc = Supervisor([dies, other, server], grace=2, min_workers=min_workers).run()
    err = capfd.readouterr().err
    if min_workers:
        assert rc == 0, err
        assert re.search(r'job finished: 2 of 3 processes exited with code 0; lost worker #0 '
                         r'\(was killed by signal SIGKILL [\d.]+ s after the start\)', err), err
    else:
        assert rc == launch.EXIT_FAILED, err
        assert re.search(r'worker #0 \(launch index; pid \d+\) was killed by signal SIGKILL — '
                         r'stopping the job', err), err


@pytest.mark.parametrize('min_workers', [2, 0])
def test_supervisor_fails_when_more_workers_are_lost_than_allowed(tmp_path, capfd, min_workers):
    block = Spec('worker', 0, [PY, '-c', 'import signal; signal.pause()'])
    dies = Spec('worker', 1, [PY, '-c', 'import sys; sys.exit(3)'])
    rc = Supervisor([block, dies], grace=2, min_workers=min_workers).run()
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED, err
    assert 'worker #1 (launch index; pid' in err and 'exited with code 3 — stopping the job' in err
    assert 'elastic' not in err


def test_supervisor_elastic_never_tolerates_a_failed_server(tmp_path, capfd):
    block = Spec('worker', 0, [PY, '-c', 'import signal; signal.pause()'])
    server = Spec('server', 0, [PY, '-c', 'import sys; sys.exit(70)'])
    rc = Supervisor([block, server], grace=2, min_workers=1).run()
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED and 'server #0' in err and 'code 70 — stopping' in err, err


def test_supervisor_timeout(tmp_path, capfd):
    spec = Spec('worker', 0, [PY, '-c', 'import signal; signal.pause()'])
    assert Supervisor([spec], timeout=0.3, grace=2).run() == launch.EXIT_TIMEOUT
    assert 'job still running after 0.3 s (--timeout)' in capfd.readouterr().err


def test_supervisor_cannot_start(capfd):
    ok = Spec('scheduler', 0, [PY, '-c', 'import signal; signal.pause()'])
    bad = Spec('worker', 0, ['/nonexistent/program'])
    assert Supervisor([ok, bad], grace=2).run() == launch.EXIT_FAILED
    assert 'cannot start worker #0' in capfd.readouterr().err


# ---------------------------------------------------------------------------
# ssh: hostfile, argv builders, the remote script
# ---------------------------------------------------------------------------

def test_parse_hostfile(tmp_path):
    path = write(tmp_path, 'hosts', '# cluster\n\nnode1\n  node2:2222  # second\n'
                 'alice@10.0.0.3 slots=4\n')
    assert parse_hostfile(path) == [Host('node1'), Host('node2', 2222), Host('alice@10.0.0.3')]
    assert parse_hostfile(path)[2].address == '10.0.0.3'
    with pytest.raises(LaunchError, match='lists no hosts'):
        parse_hostfile(write(tmp_path, 'empty', '# nothing\n\n'))
    with pytest.raises(LaunchError, match='line 1'):
        parse_hostfile(write(tmp_path, 'badport', 'node1:http\n'))
    with pytest.raises(LaunchError, match='does not exist'):
        parse_hostfile(str(tmp_path / 'missing'))


def test_ssh_argv_shape():
    argv = ssh_argv('node1', ['python', 'train.py'], {'A': '1'}, '/work dir',
                    port=2222, ssh_args=['-F', 'cfg'])
    assert argv[:3] == ['ssh', '-o', 'BatchMode=yes']
    assert argv[3:8] == ['-F', 'cfg', '-p', '2222', 'node1']
    assert len(argv) == 9
    remote = shlex.split(argv[8])       # what the remote login shell parses
    assert remote[:2] == ['sh', '-c']
    script = remote[2]
    assert script.splitlines()[0] == "cd '/work dir' || exit 1"
    assert script.splitlines()[1] == 'export A=1'
    assert 'python train.py 3<&- &' in script
    assert ssh_argv('n', ['x'], {}, '/d')[3:5] == ['n', "sh -c " + shlex.quote(
        remote_script(['x'], {}, '/d'))]


def run_remote_script(argv):
    """Run `argv` like ssh does: stdin a pipe that stays open until the command ends."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        out = proc.stdout.read()          # EOF when the command and the script are done
        return proc.wait(timeout=30), out
    finally:
        proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()


def test_remote_script_quoting_runs_in_sh(tmp_path):
    """The script (as the remote host runs it) keeps awkward values intact."""
    workdir = tmp_path / "dir with 'quote' and $dollar"
    workdir.mkdir()
    env = {'PLAIN': 'x', 'TRICKY': "a b'c\"d$HOME`e`;f\\g\nh", 'EMPTY': ''}
    cmd = [PY, '-c', 'import json, os, sys; print(json.dumps([os.getcwd(), sys.argv[1:], '
                     '{k: os.environ.get(k) for k in ("PLAIN", "TRICKY", "EMPTY")}]))',
           "arg with space", '$(false)', "'"]
    argv = ssh_argv('host', cmd, env, str(workdir))
    rc, out = run_remote_script(['sh', '-c', argv[-1]])
    assert rc == 0
    cwd, args, got = json.loads(out)
    assert cwd == str(workdir)
    assert args == ["arg with space", '$(false)', "'"]
    assert got == env


def test_remote_script_exit_code_and_stdin_watchdog(tmp_path):
    """Exit code passes through; EOF on stdin (launcher gone) stops the command."""
    rc, _ = run_remote_script(['sh', '-c', remote_script([PY, '-c', 'raise SystemExit(7)'], {},
                                                         str(tmp_path))])
    assert rc == 7
    pidfile = tmp_path / 'pid'
    cmd = [PY, '-c', 'import os, signal, sys; open(sys.argv[1] + ".tmp", "w").write('
                     'str(os.getpid())); os.rename(sys.argv[1] + ".tmp", sys.argv[1]); '
                     'signal.pause()', str(pidfile)]
    proc = subprocess.Popen(['sh', '-c', remote_script(cmd, {}, str(tmp_path))],
                            stdin=subprocess.PIPE)
    try:
        wait_for_files(tmp_path, 'pid', 1, timeout=30)
        pid = int(pidfile.read_text())
        assert alive(pid)
        proc.stdin.close()                # what ssh does when the launcher closes the pipe
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not alive(pid)


def _exports(ssh_spec):
    """The variables the remote script of an ssh Spec exports."""
    script = shlex.split(ssh_spec.argv[-1])[2]
    line = [ln for ln in script.splitlines() if ln.startswith('export ')][0]
    return dict(item.split('=', 1) for item in shlex.split(line)[1:])


def test_ssh_plan_with_dmlc_interface_leaves_each_host_its_address_on_that_interface(
        tmp_path):
    """DMLC_INTERFACE forwarded: no DMLC_NODE_HOST from the hostfile (ps-lite would take it
    first), so each host binds and advertises its address on the named interface."""
    hostfile = write(tmp_path, 'hosts', '127.0.0.1\n127.0.0.2\n')
    environ = {'PATH': os.environ['PATH'], 'DMLC_INTERFACE': 'data0'}
    args = launch.build_parser().parse_args(['-n', '2', '-s', '1', '-H', hostfile, 'python',
                                             'train.py'])
    specs = launch.plan(args, environ)[0]
    for spec in specs[1:]:
        env = _exports(spec)
        assert env['DMLC_INTERFACE'] == 'data0' and 'DMLC_NODE_HOST' not in env, env


def test_advertised_host_follows_ps_lites_order():
    from mxnet_ssp.ps.addresses import advertised_host, interface_address
    assert interface_address('lo') == '127.0.0.1'
    assert interface_address('no-such-if0') is None
    root = {'DMLC_PS_ROOT_URI': '127.0.0.1', 'DMLC_PS_ROOT_PORT': '9'}
    assert advertised_host(dict(root, DMLC_NODE_HOST='10.9.8.7', DMLC_INTERFACE='lo')) == \
        '10.9.8.7'
    assert advertised_host(dict(root, DMLC_INTERFACE='lo')) == '127.0.0.1'
    assert advertised_host(dict(root, DMLC_INTERFACE='no-such-if0')) == '127.0.0.1'


def test_ssh_plan_round_robin_and_env(tmp_path):
    hostfile = write(tmp_path, 'hosts', '127.0.0.1\nbob@127.0.0.2:2222\n')
    environ = {'PATH': os.environ['PATH'], 'MXNET_SSP_STALENESS': '2', 'OMP_NUM_THREADS': '4',
               'UNRELATED': 'x', 'PASSME': 'p q', launch.ENV_SSH_ARGS: '-F cfg'}
    args = launch.build_parser().parse_args(
        ['-n', '3', '-s', '2', '-H', hostfile, '--env', 'PASSME', '--env-worker', 'A:1',
         '--sync-dst-dir', '/remote/dir', 'python', 'train.py', '--kvstore', 'dist_ssp'])
    specs, summary, syncs = launch.plan(args, environ)
    assert [(s.role, s.index, s.host) for s in specs] == [
        ('scheduler', 0, None), ('server', 0, '127.0.0.1'), ('server', 1, 'bob@127.0.0.2'),
        ('worker', 0, '127.0.0.1'), ('worker', 1, 'bob@127.0.0.2'), ('worker', 2, '127.0.0.1')]
    scheduler = specs[0]
    assert scheduler.argv == ['python', 'train.py', '--kvstore', 'dist_ssp']
    assert scheduler.env['DMLC_ROLE'] == 'scheduler' and scheduler.env['UNRELATED'] == 'x'
    port = scheduler.env['DMLC_PS_ROOT_PORT']
    assert scheduler.env['DMLC_PS_ROOT_URI'] == '127.0.0.1'   # this machine, seen from host 1
    for spec in specs[1:]:
        assert spec.stdin_pipe and spec.argv[:5] == list(launch.SSH_BASE) + ['-F', 'cfg']
        env = _exports(spec)
        assert env['DMLC_ROLE'] == spec.role and env['DMLC_PS_ROOT_PORT'] == port
        assert env['DMLC_NODE_HOST'] == spec.host.rpartition('@')[2]
        assert env[launch.ENV_LAUNCH_INDEX] == str(spec.index)
        assert (env['DMLC_NUM_WORKER'], env['DMLC_NUM_SERVER']) == ('3', '2')
        assert env['DMLC_TASK_ID'] == str(spec.index + (3 if spec.role == 'server' else 0))
        assert (env['DMLC_JOB_CLUSTER'], env['DMLC_NUM_ATTEMPT']) == ('ssh', '0')
        assert env['MXNET_SSP_STALENESS'] == '2' and env['OMP_NUM_THREADS'] == '4'
        assert env['PASSME'] == 'p q'
        assert ('A' in env) == (spec.role == 'worker')
        assert 'UNRELATED' not in env and launch.ENV_SSH_ARGS not in env
        assert 'cd /remote/dir || exit 1' in shlex.split(spec.argv[-1])[2]
        # ssh gives up on a host silent for about 4/3 of the liveness bound (10 s default)
        assert spec.argv[5:9] == ['-o', 'ServerAliveInterval=4', '-o', 'ServerAliveCountMax=3']
        if spec.host == 'bob@127.0.0.2':
            assert spec.argv[9:12] == ['-p', '2222', 'bob@127.0.0.2']
        else:
            assert spec.argv[9] == '127.0.0.1'
    assert [h.name for h, _ in syncs] == ['127.0.0.1', 'bob@127.0.0.2']
    assert syncs[1][1][-1] == 'bob@127.0.0.2:/remote/dir/'


@pytest.mark.parametrize('liveness, alive', [
    ('off', []), ('2', ['-o', 'ServerAliveInterval=1', '-o', 'ServerAliveCountMax=3']),
    ('10', ['-o', 'ServerAliveInterval=4', '-o', 'ServerAliveCountMax=3']),
    ('60', ['-o', 'ServerAliveInterval=20', '-o', 'ServerAliveCountMax=3'])])
def test_ssh_plan_gives_up_on_a_silent_host_after_the_liveness_bound(tmp_path, liveness, alive):
    hostfile = write(tmp_path, 'hosts', '127.0.0.1\n')
    environ = {'PATH': os.environ['PATH'], 'MXNET_SSP_LIVENESS_TIMEOUT': liveness}
    args = launch.build_parser().parse_args(['-n', '1', '-s', '1', '-H', hostfile, 'true'])
    specs, _, _ = launch.plan(args, environ)
    for spec in specs[1:]:
        assert spec.argv[len(launch.SSH_BASE):len(launch.SSH_BASE) + len(alive)] == alive
        assert ('ServerAliveInterval' in ' '.join(spec.argv[:-1])) == bool(alive)


def test_the_launcher_refuses_a_bad_liveness_bound_naming_setting_value_and_range(tmp_path):
    hostfile = write(tmp_path, 'hosts', '127.0.0.1\n')
    args = launch.build_parser().parse_args(['-n', '1', '-s', '1', '-H', hostfile, 'true'])
    with pytest.raises(launch.LaunchError, match=r"MXNET_SSP_LIVENESS_TIMEOUT='1' is not valid: "
                                                 r"expected a number of seconds from 2 to 3600"):
        launch.plan(args, {'PATH': os.environ['PATH'], 'MXNET_SSP_LIVENESS_TIMEOUT': '1'})


def test_local_plan_is_check_job_then_plan_local():
    environ = {'PATH': os.environ['PATH'], 'DMLC_ROLE': 'stale', 'KEEP': 'k'}
    args = launch.build_parser().parse_args(
        ['-n', '2', '-s', '1', '--launcher', 'local', '--env-server', 'S:1', '--', 'true'])
    job = launch.check_job(args, environ)
    assert isinstance(job, launch.Job)
    assert (job.launcher, job.command, job.num_workers, job.num_servers) == ('local', ['true'],
                                                                             2, 1)
    assert job.settings['server']['S'] == '1' and 'S' not in job.settings['worker']
    plan = launch.plan_local(job)
    assert isinstance(plan, launch.Plan) and plan.syncs == ()
    assert plan.summary.startswith('local job: 1 scheduler, 1 server, 2 workers; scheduler at '
                                   '127.0.0.1:')
    assert [(s.role, s.index) for s in plan.specs] == [('scheduler', 0), ('server', 0),
                                                       ('worker', 0), ('worker', 1)]
    for spec in plan.specs:
        assert spec.argv == ['true'] and spec.env['KEEP'] == 'k'
        assert spec.env['DMLC_ROLE'] == spec.role
        assert spec.env[launch.ENV_LAUNCH_INDEX] == str(spec.index)
    assert [s.env.get('DMLC_NODE_HOST') for s in plan.specs] == [None] + ['127.0.0.1'] * 3
    assert [s.env.get('DMLC_TASK_ID') for s in plan.specs] == [None, '2', '0', '1']
    again = launch.plan(args, environ)          # plan() is the same two steps
    assert [(s.role, s.index) for s in again.specs] == [(s.role, s.index) for s in plan.specs]


def test_check_job_refuses_before_any_launcher_check():
    args = launch.build_parser().parse_args(['-n', '0', '--launcher', 'ssh', 'python', 't.py'])
    with pytest.raises(LaunchError, match='-n/--num-workers 0 is not valid'):
        launch.check_job(args, {'PATH': os.environ['PATH']})   # not: ssh needs -H


def test_mpi_plan_with_fake_mpirun(tmp_path):
    fake = tmp_path / 'mpirun'
    fake.write_text('#!/bin/sh\necho "mpirun (Open MPI) 4.1.4"\n')
    fake.chmod(0o755)
    environ = {'PATH': os.environ['PATH'], launch.ENV_MPIRUN: str(fake), 'MXNET_SSP_TIMEOUT': '9'}
    args = launch.build_parser().parse_args(
        ['-n', '2', '-s', '1', '--launcher', 'mpi', '--env-server', 'S:1', 'python', 't.py'])
    specs, summary, _ = launch.plan(args, environ)
    assert 'mpi job (openmpi)' in summary
    assert [(s.role, s.mpirun) for s in specs] == [('scheduler', 0), ('server', 1), ('worker', 2)]
    for spec in specs[1:]:
        argv = spec.argv
        assert argv[:5] == [str(fake), '-n', str(spec.mpirun), '--bind-to', 'none']
        assert argv[-2:] == ['python', 't.py']
        xs = {argv[i + 1] for i, a in enumerate(argv) if a == '-x'}
        assert {'DMLC_ROLE=%s' % spec.role, 'DMLC_PS_ROOT_URI=127.0.0.1', 'OMP_NUM_THREADS=1',
                'MXNET_SSP_TIMEOUT=9', 'DMLC_NODE_HOST=127.0.0.1', 'DMLC_JOB_CLUSTER=mpi',
                'DMLC_NUM_ATTEMPT=0'} <= xs
        assert not any(x.startswith('DMLC_TASK_ID=') for x in xs)   # one mpirun per role
        assert ('S=1' in xs) == (spec.role == 'server')
    assert specs[2].describe(7) == 'workers (mpirun of 2; pid 7)'


def test_rsync_argv():
    argv = rsync_argv('node1', '/src/dir/', '/dst dir', port=2200, ssh_args=['-F', 'c f'])
    assert argv[:3] == ['rsync', '-az', '-e']
    assert shlex.split(argv[3]) == ['ssh', '-o', 'BatchMode=yes', '-F', 'c f', '-p', '2200']
    assert argv[4:6] == ['--rsync-path', "mkdir -p '/dst dir' && rsync"]
    assert argv[6:] == ['/src/dir/', 'node1:/dst dir/']


# ---------------------------------------------------------------------------
# mpi: argv builder, flavour detection, a real run when mpirun exists
# ---------------------------------------------------------------------------

def test_mpi_argv_openmpi():
    env = {'DMLC_ROLE': 'worker', 'V': 'a b'}
    assert mpi_argv('openmpi', 2, ['python', 't.py'], env, hostfile='hosts', as_root=True) == [
        'mpirun', '-n', '2', '--bind-to', 'none', '--allow-run-as-root', '--hostfile', 'hosts',
        '-x', 'DMLC_ROLE=worker', '-x', 'V=a b', 'python', 't.py']
    assert mpi_argv('openmpi', 1, ['x'], {}, mpirun='/opt/mpirun') == [
        '/opt/mpirun', '-n', '1', '--bind-to', 'none', 'x']


def test_mpi_argv_mpich():
    assert mpi_argv('mpich', 3, ['python', 't.py'], {'DMLC_ROLE': 'server', 'V': 'a b'},
                    hostfile='hosts') == [
        'mpirun', '-n', '3', '-f', 'hosts', '-genv', 'DMLC_ROLE', 'server', '-genv', 'V', 'a b',
        'python', 't.py']
    with pytest.raises(ValueError):
        mpi_argv('lam', 1, ['x'], {})


@pytest.mark.parametrize('banner, flavor', [
    ('mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/',
     'openmpi'),
    ('HYDRA build details:\n    Version: 4.0.2', 'mpich'),
    ('Intel(R) MPI Library for Linux* OS, Version 2021.6', 'mpich'),
])
def test_mpi_flavor(tmp_path, banner, flavor):
    fake = tmp_path / 'mpirun'
    fake.write_text('#!/bin/sh\ncat <<"EOF"\n%s\nEOF\n' % banner)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert mpi_flavor(str(fake)) == flavor


@pytest.mark.need(program='mpirun', install=INSTALL_MPI)
def test_mpi_real_run(tmp_path, clean_env, capfd):
    """--launcher mpi on this machine: roles, counts and per-role env through mpirun."""
    out = tmp_path / 'dumps'
    out.mkdir()
    script = write(tmp_path, 'dump.py', DUMP_ENV)
    clean_env.setenv('MXNET_SSP_STALENESS', '2')
    rc = launch.main(['-n', '2', '-s', '1', '--launcher', 'mpi', '--timeout', '60',
                      '--env-worker', 'ONLY_WORKER:1', '--env-server', 'ONLY_SERVER:1',
                      PY, script, str(out)])
    err = capfd.readouterr().err
    assert rc == 0, err
    dumps = read_dumps(out)
    assert {r: len(v) for r, v in dumps.items()} == {'scheduler': 1, 'server': 1, 'worker': 2}
    for role, envs in dumps.items():
        for env in envs:
            assert env['OMP_NUM_THREADS'] == '1'
            assert env['MXNET_SSP_STALENESS'] == '2'
            assert (env['DMLC_NUM_WORKER'], env['DMLC_NUM_SERVER']) == ('2', '1')
            assert ('ONLY_WORKER' in env) == (role == 'worker')
            assert ('ONLY_SERVER' in env) == (role == 'server')


@pytest.mark.need(program='mpirun', install=INSTALL_MPI)
def test_mpi_failing_rank_stops_the_job(tmp_path, clean_env, capfd):
    """Worker rank 1 under mpirun exits 3: the launcher reports the workers' mpirun and
    stops the scheduler, the servers' mpirun and its rank (in its own process group)."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'mpiblock.py', MPI_BLOCK)
    rc = launch.main(['-n', '2', '-s', '1', '--launcher', 'mpi', '--timeout', '60',
                      PY, script, str(pids)])
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED, err
    assert 'workers (mpirun of 2; pid' in err and 'exited with code 3 — stopping the job' in err
    recorded = read_pids(pids)
    assert sorted(name.rsplit('-', 1)[0] for name in recorded) == [
        'scheduler', 'server', 'worker', 'worker']
    assert [name for name, pid in recorded.items() if alive(pid)] == []


# ---------------------------------------------------------------------------
# ssh end to end: a private sshd on loopback
# ---------------------------------------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _drain(fd):
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


@pytest.fixture(scope='module')
def sshd(tmp_path_factory):
    """An sshd on 127.0.0.1 and 127.0.0.2 that accepts a key made here.

    Gives the value of MXNET_SSP_LAUNCH_SSH_ARGS for the launcher: ssh
    options pointing at a config with the port and key.
    """
    for tool in ('/usr/sbin/sshd', 'ssh', 'ssh-keygen'):
        need_program(tool, INSTALL_SSH)
    if not os.path.isdir('/run/sshd'):
        try:
            os.makedirs('/run/sshd', mode=0o755)
        except OSError as err:
            need("sshd's privilege-separation directory /run/sshd (creating it: %s)" % err,
                 'run the tests as root, or mkdir -m 755 /run/sshd as root')
    d = tmp_path_factory.mktemp('sshd')
    for name in ('hostkey', 'userkey'):
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', str(d / name)],
                       check=True, stdin=subprocess.DEVNULL)
    shutil.copy(d / 'userkey.pub', d / 'authorized_keys')
    port = _free_port()
    # the launcher checks host keys as ssh's configuration says: this one knows the test sshd's
    host_key = ' '.join((d / 'hostkey.pub').read_text().split()[:2])
    (d / 'known_hosts').write_text(''.join('[%s]:%d %s\n' % (address, port, host_key)
                                           for address in ('127.0.0.1', '127.0.0.2')))
    (d / 'sshd_config').write_text('\n'.join([
        'Port %d' % port, 'ListenAddress 127.0.0.1', 'ListenAddress 127.0.0.2',
        'HostKey %s' % (d / 'hostkey'), 'AuthorizedKeysFile %s' % (d / 'authorized_keys'),
        'PidFile %s' % (d / 'sshd.pid'), 'StrictModes no', 'UsePAM no',
        'PasswordAuthentication no', 'KbdInteractiveAuthentication no',
        'PermitRootLogin prohibit-password', 'LogLevel INFO', '']))
    (d / 'ssh_config').write_text('\n'.join([
        'Host *', '  Port %d' % port, '  IdentityFile %s' % (d / 'userkey'),
        '  IdentitiesOnly yes', '  UserKnownHostsFile %s' % (d / 'known_hosts'),
        '  GlobalKnownHostsFile /dev/null', '  StrictHostKeyChecking yes', '  LogLevel ERROR',
        '']))
    proc = subprocess.Popen(['/usr/sbin/sshd', '-D', '-e', '-f', str(d / 'sshd_config')],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    # ready when it logged "Server listening on 127.0.0.x port N." for both addresses
    log = b''
    deadline = time.monotonic() + 30
    while log.count(b'Server listening') < 2:
        left = deadline - time.monotonic()
        ready = select.select([proc.stderr], [], [], max(left, 0))[0]
        chunk = os.read(proc.stderr.fileno(), 4096) if ready else b''
        if not chunk or b'Bind to port' in log + chunk:
            proc.terminate()
            proc.wait()
            need('an sshd listening on 127.0.0.1 and 127.0.0.2 (it did not start: %s)'
                 % (log + chunk).decode(errors='replace')[-500:],
                 '%s, and a loopback interface that has 127.0.0.2' % INSTALL_SSH)
        log += chunk
    drain = threading.Thread(target=_drain, args=(proc.stderr.fileno(),), daemon=True)
    drain.start()                          # keep reading sshd's log so its pipe never fills
    check = subprocess.run(['ssh', '-F', str(d / 'ssh_config'), '-o', 'BatchMode=yes',
                            '127.0.0.2', 'true'],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    if check.returncode != 0:
        proc.terminate()
        proc.wait()
        need('a login as %s on the test sshd with its key (ssh said: %s)'
             % (os.environ.get('USER') or os.getuid(), check.stderr.strip()[-300:]),
             '%s, and run the tests as a user sshd lets log in (root here: '
             'PermitRootLogin prohibit-password)' % INSTALL_SSH)
    yield '-F %s' % (d / 'ssh_config')
    proc.terminate()
    proc.wait(timeout=30)
    drain.join(timeout=10)
    proc.stderr.close()


@pytest.mark.ssh
def test_ssh_dist_sync_job_on_loopback_hosts(tmp_path, sshd, clean_env, capfd):
    """A real dist_sync job: 1 server and 2 workers spread over 127.0.0.1 and
    127.0.0.2 by ssh, the scheduler here; with --sync-dst-dir when rsync exists."""
    src = tmp_path / 'src'
    src.mkdir()
    write(src, 'job.py', MINIMAL_JOB)
    write(src, 'hosts', '# test hosts\n127.0.0.1\n\n127.0.0.2\n')
    clean_env.chdir(src)
    clean_env.setenv(launch.ENV_SSH_ARGS, sshd)
    clean_env.setenv('PYTHONPATH', launcher_env()['PYTHONPATH'])
    args = ['-n', '2', '-s', '1', '-H', 'hosts', '--timeout', '100', '--env', 'PYTHONPATH']
    if in_ci() and not shutil.which('rsync'):
        need_program('rsync', 'apt-get install rsync')    # .ci/run installs it: a failure there
    if shutil.which('rsync'):
        dst = tmp_path / 'remote' / 'copy'
        args += ['--sync-dst-dir', str(dst)]
    rc = launch.main(args + [PY, 'job.py'])
    out, err = capfd.readouterr()
    assert rc == 0, err
    results = sorted(line for line in out.splitlines() if line.strip())
    assert results == ['0 [2. 2. 2. 2.]', '1 [2. 2. 2. 2.]'], out + err
    assert 'all 4 processes exited with code 0' in err
    if shutil.which('rsync'):
        assert (dst / 'job.py').read_text() == MINIMAL_JOB


@pytest.mark.ssh
def test_ssh_failure_stops_remote_processes(tmp_path, sshd, clean_env, capfd):
    """Worker #1 (on 127.0.0.2) exits 3: the launcher reports it, and the processes on
    the remote hosts are gone when the launcher returns."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    script = write(tmp_path, 'block.py', BLOCK)
    write(tmp_path, 'hosts', '127.0.0.1\n127.0.0.2\n')
    clean_env.chdir(tmp_path)
    clean_env.setenv(launch.ENV_SSH_ARGS, sshd)
    rc = launch.main(['-n', '2', '-s', '2', '-H', 'hosts', '--timeout', '60',
                      PY, script, str(pids), 'worker-1:3'])
    err = capfd.readouterr().err
    assert rc == 1, err
    assert 'worker #1 (launch index) on 127.0.0.2 (local ssh pid' in err
    assert 'exited with code 3 — stopping the job' in err
    recorded = read_pids(pids)
    assert len(recorded) == 5
    assert [name for name, pid in recorded.items() if alive(pid)] == []


def test_supervisor_restarts_a_lost_worker_once_with_its_restart_spec(tmp_path, capfd):
    """--max-restarts 1: worker #1 is killed; after restart_delay its restart Spec runs (here
    it sees MXNET_SSP_REJOIN=1 and exits 0); worker #0 waits for that, then exits 0."""
    done = tmp_path / 'rejoined'
    first = Spec('worker', 0, [PY, '-c', WAIT_FOR_FILE, str(done)])
    dies = Spec('worker', 1, [PY, '-c', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'])
    dies.restart = Spec('worker', 1, [PY, '-c', 'import os, sys; assert os.environ['
                                      '"MXNET_SSP_REJOIN"] == "1"; open(sys.argv[1], "w")',
                                      str(done)], dict(os.environ, MXNET_SSP_REJOIN='1'))
    rc = Supervisor([first, dies], grace=2, min_workers=1, restarts=1, restart_delay=0.3).run()
    err = capfd.readouterr().err
    assert rc == 0, err
    assert 'restarting worker #1 in 0.3 s (once ps-lite counts it dead); 0 restart(s) left' in err
    assert re.search(r'restarted worker #1 as worker #1 \(launch index; pid \d+\) to rejoin', err)
    assert re.search(r'lost worker #1 \(was killed by signal SIGKILL [\d.]+ s after the start\); '
                     r'worker #1 rejoined \(pid \d+, exited with code 0\)', err), err


def test_supervisor_does_not_restart_when_no_worker_is_left(tmp_path, capfd):
    dies = Spec('worker', 0, [PY, '-c', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'])
    dies.restart = Spec('worker', 0, [PY, '-c', 'raise SystemExit(9)'])
    finishes = Spec('worker', 1, [PY, '-c', 'pass'])
    rc = Supervisor([dies, finishes], grace=2, min_workers=1, restarts=1,
                    restart_delay=0.2).run()
    err = capfd.readouterr().err
    assert rc == 0 and 'not restarting worker #0: no worker is left to rejoin' in err, err
    assert 'rejoined' not in err


@pytest.mark.parametrize('launcher', ['local', 'ssh'])
def test_plan_with_elastic_restarts_sets_heartbeats_and_a_rejoining_replacement(tmp_path,
                                                                                 launcher):
    hostfile = write(tmp_path, 'hosts', '127.0.0.1\n')
    environ = {'PATH': os.environ['PATH'], 'PS_HEARTBEAT_TIMEOUT': '3'}
    args = launch.build_parser().parse_args(
        ['-n', '2', '-s', '1', '--launcher', launcher, '-H', hostfile, '--elastic', '1',
         '--max-restarts', '1', PY, 'train.py'])
    job = launch.cli.check_job(args, environ)
    assert (job.elastic, job.max_restarts, job.restart_delay) == (1, 1, 3 + 1 + 2)
    specs = launch.cli.plan_job(job).specs
    env_of = (lambda s: s.env) if launcher == 'local' else (
        lambda s: s.env if s.role == 'scheduler' else _exports(s))
    for spec in specs:
        env = env_of(spec)
        assert (env['PS_HEARTBEAT_INTERVAL'], env['PS_HEARTBEAT_TIMEOUT']) == ('1', '3')
        assert env['MXNET_SSP_ELASTIC'] == '1' and 'MXNET_SSP_REJOIN' not in env
        assert (spec.restart is not None) == (spec.role == 'worker')
        if spec.restart is not None:
            again = env_of(spec.restart)
            assert again['MXNET_SSP_REJOIN'] == '1'
            assert {k: v for k, v in again.items() if k != 'MXNET_SSP_REJOIN'} == env


# ---------------------------------------------------------------------------
# ssh a user can trust (issue 59): hosts checked first, the venv's python, host keys
# ---------------------------------------------------------------------------

@pytest.fixture
def silent_port():
    """A port on 127.0.0.1 that takes no connection: its listen queue is full, so the kernel
    drops every further SYN (as a firewalled or wedged host: no answer, no refusal)."""
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(('127.0.0.1', port))
        except BlockingIOError:
            pass
        fillers.append(c)
    probe = socket.socket()
    probe.settimeout(1.0)
    try:                 # the queue is full once a connect no longer completes
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.connect(('127.0.0.1', port))
            except socket.timeout:
                break
            probe.close()
            probe = socket.socket()
            probe.settimeout(1.0)
            fillers.append(probe)
            assert time.monotonic() < deadline, 'the listen queue never filled'
        yield port
    finally:
        for c in fillers + [probe, listener]:
            c.close()


@pytest.mark.ssh
def test_a_host_that_takes_no_connection_ends_the_launch_within_15_s_naming_it(
        tmp_path, sshd, clean_env, capfd, silent_port):
    """127.0.0.2 answers (the test sshd), 127.0.0.1:PORT drops every SYN: the launch ends
    before anything starts, in one line naming the host and ssh's error."""
    write(tmp_path, 'hosts', '127.0.0.2\n127.0.0.1:%d\n' % silent_port)
    clean_env.chdir(tmp_path)
    clean_env.setenv(launch.ENV_SSH_ARGS, sshd)
    started = time.monotonic()
    rc = launch.main(['-n', '2', '-s', '1', '-H', 'hosts', PY, '-c', 'pass'])
    took = time.monotonic() - started
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED, err
    lines = [ln for ln in err.splitlines() if 'takes no ssh connection' in ln]
    assert lines == ['mxnet-ssp-launch: host 127.0.0.1 takes no ssh connection: ssh: connect to '
                     'host 127.0.0.1 port %d: Connection timed out — nothing started'
                     % silent_port], err
    assert 'ssh job:' not in err, err                  # nothing started
    assert 9.5 < took < 15, (took, err)


@pytest.mark.ssh
def test_a_host_key_the_user_does_not_know_is_refused_unless_turned_off(tmp_path, sshd,
                                                                        clean_env, capfd):
    """The test sshd's key is in the config's known_hosts; with an empty known_hosts ssh
    refuses the host (the launcher no longer passes StrictHostKeyChecking=no), and the user
    can turn the check off in MXNET_SSP_LAUNCH_SSH_ARGS."""
    write(tmp_path, 'hosts', '127.0.0.2\n')
    write(tmp_path, 'empty_known_hosts', '')
    clean_env.chdir(tmp_path)
    strict = sshd + ' -o UserKnownHostsFile=%s' % (tmp_path / 'empty_known_hosts')
    clean_env.setenv(launch.ENV_SSH_ARGS, strict)
    rc = launch.main(['-n', '1', '-s', '1', '-H', 'hosts', PY, '-c', 'pass'])
    err = capfd.readouterr().err
    assert rc == launch.EXIT_FAILED, err
    assert re.search(r'host 127\.0\.0\.2 takes no ssh connection: Host key verification '
                     r'failed\. — nothing started', err), err
    clean_env.setenv(launch.ENV_SSH_ARGS, strict + ' -o StrictHostKeyChecking=no')
    rc = launch.main(['-n', '1', '-s', '1', '-H', 'hosts', PY, '-c', 'pass'])
    err = capfd.readouterr().err
    assert rc == 0, err


@pytest.mark.ssh
def test_a_bare_python_runs_the_active_virtual_environments_interpreter_on_every_host(
        tmp_path, sshd, clean_env, capfd):
    """`python` over ssh would be the host's system one (or none); with a virtual environment
    active every remote process runs its interpreter, said in one line."""
    venv = tmp_path / 'venv'
    (venv / 'bin').mkdir(parents=True)
    (venv / 'bin' / 'python').symlink_to(PY)
    out = tmp_path / 'out'
    out.mkdir()
    write(tmp_path, 'hosts', '127.0.0.2\n')
    clean_env.chdir(tmp_path)
    clean_env.setenv(launch.ENV_SSH_ARGS, sshd)
    clean_env.setenv('VIRTUAL_ENV', str(venv))
    record = ('import os, sys; open(os.path.join(%r, os.environ["DMLC_ROLE"]), "w")'
              '.write(sys.argv[0] + " " + os.readlink("/proc/self/exe"))' % str(out))
    rc = launch.main(['-n', '1', '-s', '1', '-H', 'hosts', 'python', '-c', record])
    err = capfd.readouterr().err
    assert rc == 0, err
    assert ('mxnet-ssp-launch: ssh: "python" runs %s on every host (the active virtual '
            "environment's); to run another, give its path, e.g. /usr/bin/python3"
            % (venv / 'bin' / 'python')) in err.splitlines(), err
    real = os.path.realpath(PY)
    got = {p.name: p.read_text() for p in out.iterdir()}
    assert sorted(got) == ['scheduler', 'server', 'worker']     # the scheduler: here, as given
    assert (got['server'], got['worker']) == ('-c ' + real, '-c ' + real)


def test_remote_python_is_left_alone_for_other_commands_and_without_a_venv(tmp_path,
                                                                          monkeypatch):
    from mxnet_ssp.launch.ssh import remote_python
    venv = tmp_path / 'v'
    (venv / 'bin').mkdir(parents=True)
    (venv / 'bin' / 'python3').symlink_to(PY)
    assert remote_python(['python3', 'x.py'], {'VIRTUAL_ENV': str(venv)}) == \
        str(venv / 'bin' / 'python3')
    assert remote_python(['/usr/bin/python3', 'x.py'], {'VIRTUAL_ENV': str(venv)}) is None
    assert remote_python(['mxnet-ssp-train'], {'VIRTUAL_ENV': str(venv)}) is None
    monkeypatch.setattr(sys, 'base_prefix', sys.prefix)           # not in a venv
    assert remote_python(['python', 'x.py'], {}) is None
