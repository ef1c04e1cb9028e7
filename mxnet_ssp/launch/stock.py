"""``mxnet-ssp-stock-launch``: MXNet's own ``tools/launch.py`` (from the installed mxnet wheel),
unchanged, on Python 3.9 and later, and nothing of its job left behind when it ends.

``mxnet-ssp-stock-launch ARGS...`` is ``python .../mxnet/tools/launch.py ARGS...`` with two
differences:

* the dmlc tracker the mxnet 1.9.1 wheel ships calls ``Thread.isAlive``, removed in Python
  3.9 (dmlc-core fixed it later); that one alias of ``Thread.is_alive`` is restored, and
  nothing else of the tracker changes;
* the stock launcher runs as a child of this process, which is the subreaper of everything
  below it (Linux): when the stock launcher ends (done, crashed, killed), every process left
  below this one (the scheduler the tracker started here, local servers and workers, ssh
  clients) gets SIGTERM, then SIGKILL 5 s later (after the stock launcher exited 0: once
  they had 30 s to end on their own); the stock tracker alone leaves its scheduler
  running when it dies.  SIGINT / SIGTERM / SIGHUP are passed on to the stock launcher.

``STOCK_LAUNCH_HOST_IP=ADDRESS`` makes the tracker advertise ADDRESS (it has no flag for it and
guesses this machine's interface address) and search its port from one the kernel picks, not
from 9091, which concurrent jobs race for; it also gives the processes it starts
``DMLC_NODE_HOST=ADDRESS`` unless set.  ``127.0.0.1`` keeps a local job on loopback.

Exit code: the stock launcher's (128+N when it was killed by signal N).  For everything else
(settings checked first, a failed process ending the job, Slurm), use ``mxnet-ssp-launch``,
which takes the same flags (docs/launch.md).

This module must stay light: the standard library only (mxnet is found, never imported here).
"""
import os
import runpy
import signal
import subprocess
import sys
import threading
import time

from .supervisor import live_processes


PROG = 'mxnet-ssp-stock-launch'
ENV_HOST_IP = 'STOCK_LAUNCH_HOST_IP'
_CHILD = '--mxnet-ssp-stock-child'
GRACE = 5.0
FINISH_WAIT = 30.0


def _pin_tracker_address(address):
    """Make the dmlc tracker advertise `address`, and search its port from an ephemeral one."""
    import socket

    import dmlc_tracker.tracker as tracker
    guess = tracker.get_host_ip
    tracker.get_host_ip = lambda host_ip=None: address if host_ip in (None, 'auto', 'ip') \
        else guess(host_ip)
    stock_init = tracker.PSTracker.__init__

    def init(self, hostIP, cmd, port=9091, port_end=9999, envs=None):
        with socket.socket() as probe:
            probe.bind((address, 0))
            port = probe.getsockname()[1]
        stock_init(self, hostIP, cmd, port=port, port_end=min(port + 100, 65536), envs=envs)

    tracker.PSTracker.__init__ = init


def stock_launch_path():
    """The path of the installed mxnet wheel's tools/launch.py (mxnet is not imported)."""
    import importlib.util
    spec = importlib.util.find_spec('mxnet')
    if spec is None or not spec.origin:
        raise SystemExit('%s: mxnet is not installed in %s' % (PROG, sys.executable))
    path = os.path.join(os.path.dirname(spec.origin), 'tools', 'launch.py')
    if not os.path.isfile(path):
        raise SystemExit('%s: the installed mxnet has no %s' % (PROG, path))
    return path


def run_stock(args):
    """In the child: run the stock launch.py with `args`, as its own ``__main__``."""
    threading.Thread.isAlive = threading.Thread.is_alive
    address = os.environ.get(ENV_HOST_IP)
    if address:
        _pin_tracker_address(address)
        os.environ.setdefault('DMLC_NODE_HOST', address)
    launch = stock_launch_path()
    sys.argv = [launch] + list(args)
    runpy.run_path(launch, run_name='__main__')


def _set_subreaper():
    """Linux: make this process the subreaper of its descendants (an orphan of the job is
    re-parented here, not to init, so it stays findable); False where that is not possible."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0          # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def descendants(pid):
    """The live (not zombie) descendants of process `pid`, read from /proc."""
    children = {}
    for child, parent, _ in live_processes() or ():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def stop_descendants(grace=GRACE, wait_first=0.0):
    """Wait up to `wait_first` seconds for the processes left below this one to end on their
    own, then SIGTERM them, then SIGKILL `grace` seconds later; return the pids still alive
    after that."""
    me = os.getpid()
    deadline = time.monotonic() + wait_first
    while descendants(me) and time.monotonic() < deadline:
        _reap()
        time.sleep(0.05)              # polling the processes' end with a deadline
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in descendants(me):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while True:
            _reap()
            if not descendants(me):
                return []
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)          # polling the processes' end with a deadline
    return descendants(me)


def main(argv=None):
    """Entry point of ``mxnet-ssp-stock-launch``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [_CHILD]:
        run_stock(args[1:])
        return 0
    stock_launch_path()                      # say it here, before a child starts
    _set_subreaper()
    # the stock launcher stays in this process group: a terminal's Ctrl-C reaches all of it
    child = subprocess.Popen([sys.executable, '-m', 'mxnet_ssp.launch.stock', _CHILD] + args)
    got = []

    def forward(signum, frame):
        got.append(signum)
        try:
            os.kill(child.pid, signum)
        except OSError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    rc = None
    try:
        rc = child.wait()
    finally:
        # a job that ended well: its last processes (ssh clients of remote workers still
        # writing their results) get FINISH_WAIT seconds to end on their own
        left = stop_descendants(wait_first=FINISH_WAIT if rc == 0 and not got else 0.0)
        for s, handler in old.items():
            signal.signal(s, handler)
        if left:
            sys.stderr.write('%s: processes %s of the job did not end\n' % (PROG, left))
    if got and rc == 0:
        return 128 + got[0]
    return 128 - rc if rc < 0 else rc


if __name__ == '__main__':
    sys.exit(main())
