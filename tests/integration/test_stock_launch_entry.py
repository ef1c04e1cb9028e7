"""mxnet-ssp-stock-launch (python -m mxnet_ssp.launch.stock): MXNet's own tools/launch.py from
the installed wheel on this Python (3.9+), and nothing of its job left when it ends."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, job_env
from test_launch import alive

PY = sys.executable

pytestmark = pytest.mark.integration

#: every role records its pid, then blocks (no MXNet: the launcher is what is tested)
BLOCK = '''\
import os, sys, time
path = os.path.join(sys.argv[1], '%s-%d' % (os.environ['DMLC_ROLE'], os.getpid()))
open(path, 'w').close()
time.sleep(600)
'''


def _children(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def test_a_killed_stock_tracker_leaves_no_process_of_its_job(tmp_path):
    """The stock launcher alone leaves its scheduler (and every local process) running when
    it dies; under the entry, SIGKILL to the stock launcher ends every process of the job
    and the entry exits 137 (128 + SIGKILL)."""
    pids = tmp_path / 'pids'
    pids.mkdir()
    (tmp_path / 'block.py').write_text(BLOCK)
    env = job_env(tmp_path)
    proc = subprocess.Popen([PY, '-m', 'mxnet_ssp.launch.stock', '-n', '2', '-s', '1',
                             '--launcher', 'local', PY, str(tmp_path / 'block.py'), str(pids)],
                            env=env, cwd=str(tmp_path), start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(pids)) < 4:          # scheduler, server, 2 workers
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.05)         # polling the job's start with a deadline
        recorded = [int(name.rsplit('-', 1)[1]) for name in os.listdir(pids)]
        assert sorted(name.rsplit('-', 1)[0] for name in os.listdir(pids)) == [
            'scheduler', 'server', 'worker', 'worker']
        (tracker,) = _children(proc.pid)          # the stock launch.py
        with open('/proc/%d/cmdline' % tracker, 'rb') as f:
            assert b'mxnet_ssp.launch.stock' in f.read()
        started = time.monotonic()
        os.kill(tracker, signal.SIGKILL)
        rc = proc.wait(timeout=30)
        took = time.monotonic() - started
        assert rc == 128 + signal.SIGKILL, proc.stdout.read()
        assert [pid for pid in recorded if alive(pid)] == []
        assert took < 10, took                    # SIGTERM, SIGKILL after 5 s at most
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def test_the_entry_runs_the_installed_wheels_launch_py_on_this_python(tmp_path):
    """Not a file of the checkout's tests/: the wheel's own tools/launch.py."""
    from mxnet_ssp.launch.stock import stock_launch_path
    path = stock_launch_path()
    assert path.endswith(os.path.join('mxnet', 'tools', 'launch.py')) and os.path.isfile(path)
    assert not path.startswith(ROOT + os.sep)
    done = subprocess.run([PY, '-m', 'mxnet_ssp.launch.stock', '--help'], env=job_env(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and '--num-workers' in done.stdout, done.stderr
    with open(os.path.join(ROOT, 'setup.py')) as f:
        assert "'mxnet-ssp-stock-launch = mxnet_ssp.launch.stock:main'" in f.read()
