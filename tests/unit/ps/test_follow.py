"""How a scheduler or server process of a failed job ends (mxnet_ssp.ps.job_watch), without MXNet.

The decision (LinkFollower) is pure logic; the connections are read from /proc on real
loopback sockets; the watching thread runs in a child Python whose "server loop" is a
stand-in function named like MXNet's (``run`` in ``.../kvstore/kvstore_server.py``), with
real TCP peers that the test closes.  Waits are bounded (process waits, deadlines), never
sleeps.
"""
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import ROOT
from mxnet_ssp import _hooks
from mxnet_ssp.ps import job_watch, tcp_links
from mxnet_ssp.ps.job_watch import DrainFollower, LinkFollower

LINUX = pytest.mark.skipif(not (os.path.exists('/proc/self/fd') and hasattr(socket, 'TCP_INFO')),
                           reason='reads /proc/self/fd and TCP_INFO (Linux)')
BOUND_S = 30


# -- the decision --------------------------------------------------------------

def test_nothing_is_decided_before_the_first_connection():
    f = LinkFollower(expected=3, grace=1.0)
    assert [f.observe(0, t) for t in (0.0, 5.0, 50.0)] == [None, None, None]


def test_a_connection_that_stays_closed_for_the_grace_is_a_failure():
    f = LinkFollower(expected=3, grace=1.0)
    assert f.observe(3, 0.0) is None
    assert f.observe(2, 1.0) is None        # fell below: the grace starts
    assert f.observe(2, 1.5) is None
    assert f.observe(2, 2.0) == pytest.approx(1.0)
    assert f.observe(1, 7.0) == pytest.approx(6.0)


def test_a_replaced_connection_is_no_failure():
    """ps-lite may close a node's connection and open a new one (start-up)."""
    f = LinkFollower(expected=3, grace=1.0)
    for t, n in [(0.0, 3), (0.2, 2), (0.9, 2), (1.0, 3), (1.5, 2), (2.4, 2), (2.5, 3)]:
        assert f.observe(n, t) is None, (t, n)


def test_more_than_expected_for_a_moment_raises_nothing():
    """A replacement opened before the old one closed: the count goes above `expected`."""
    f = LinkFollower(expected=2, grace=1.0)
    for t, n in [(0.0, 2), (0.1, 3), (0.2, 2), (5.0, 2)]:
        assert f.observe(n, t) is None, (t, n)
    assert f.peak == 2


def test_a_node_lost_while_the_others_still_join_is_a_failure():
    f = LinkFollower(expected=4, grace=1.0)
    assert f.observe(1, 0.0) is None
    assert f.observe(2, 0.5) is None
    assert f.observe(1, 1.0) is None
    assert f.observe(1, 2.0) == pytest.approx(1.0)


def test_drain_decides_once_only_the_servers_are_left_for_the_grace():
    f = DrainFollower(floor=2, grace=3.0)
    assert f.observe(1, 0.0) is None and f.observe(2, 1.0) is None   # servers joining
    assert f.observe(4, 2.0) is None                                  # workers joined
    assert f.observe(3, 3.0) is None                                  # one worker lost: goes on
    assert f.observe(2, 4.0) is None and f.observe(2, 6.9) is None    # drained, in the grace
    assert f.observe(2, 7.0) == 3.0


def test_drain_is_reset_by_a_connection_and_ignores_a_job_without_workers():
    f = DrainFollower(floor=1, grace=1.0)
    assert f.observe(1, 0.0) is None and f.observe(1, 50.0) is None   # no worker yet
    assert f.observe(2, 51.0) is None and f.observe(1, 52.0) is None
    assert f.observe(2, 52.5) is None                                  # a worker (re)connects
    assert f.observe(0, 53.0) is None and f.observe(0, 53.9) is None
    assert f.observe(0, 54.0) == 1.0                                   # a dead server: at most
    with pytest.raises(ValueError, match='floor must be >= 0'):
        DrainFollower(-1)


def test_drain_of_a_server_whose_workers_came_and_went_between_two_looks():
    f = DrainFollower(floor=1, grace=1.0)
    assert f.observe(1, 0.0) is None and f.observe(1, 5.0) is None    # never seen a worker
    assert f.observe(1, 6.0, joined=True) is None                      # but it applied pushes
    assert f.observe(1, 7.0, joined=True) == 1.0


def test_every_node_gone_after_a_complete_job_decides_after_the_short_grace():
    f = LinkFollower(expected=3, grace=10.0, gone_grace=2.0)
    assert f.observe(3, 0.0) is None
    assert f.observe(0, 1.0) is None and f.observe(0, 2.9) is None     # within the short grace
    assert f.observe(0, 3.0) == pytest.approx(2.0)


def test_some_nodes_left_or_an_incomplete_job_keeps_the_long_grace():
    f = LinkFollower(expected=3, grace=10.0, gone_grace=2.0)
    assert f.observe(3, 0.0) is None
    assert f.observe(1, 1.0) is None and f.observe(1, 10.9) is None    # one node left: 10 s
    assert f.observe(1, 11.0) == pytest.approx(10.0)
    g = LinkFollower(expected=3, grace=10.0, gone_grace=2.0)
    assert g.observe(2, 0.0) is None                                   # never complete
    assert g.observe(0, 1.0) is None and g.observe(0, 10.9) is None
    assert g.observe(0, 11.0) == pytest.approx(10.0)


def test_gone_grace_never_exceeds_the_grace():
    f = LinkFollower(expected=1, grace=1.0, gone_grace=5.0)
    assert f.observe(1, 0.0) is None and f.observe(0, 0.5) is None
    assert f.observe(0, 1.5) == pytest.approx(1.0)


def test_expected_must_be_positive():
    with pytest.raises(ValueError, match='expected'):
        LinkFollower(expected=0)


# -- reading the connections ---------------------------------------------------

def _pair():
    listener = socket.create_server(('127.0.0.1', 0))
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    return listener, client, accepted


@LINUX
def test_this_processs_connections_are_found_and_its_own_peers_not_counted():
    listener, client, accepted = _pair()
    try:
        port = listener.getsockname()[1]
        links = tcp_links.tcp_links()
        mine = client.getsockname()[:2]
        assert (('127.0.0.1', port), mine, True) in links
        assert (mine, ('127.0.0.1', port), True) in links
        # both ends are in this process: like ps-lite's scheduler connecting to itself
        assert tcp_links.scheduler_links(links, port) == []
        assert tcp_links.links_to(links, {'127.0.0.1'}, port) == [('127.0.0.1', port)]
        assert tcp_links.links_to(links, {'10.9.9.9'}, port) == []
        assert tcp_links.links_to(links, set(), port) == [('127.0.0.1', port)]
    finally:
        for s in (client, accepted, listener):
            s.close()


def _peer_process(port):
    """A child Python connected to `port` that ends when its stdin closes."""
    code = ('import socket, sys\n'
            's = socket.create_connection(("127.0.0.1", %d))\n'
            'print("up", flush=True)\n'
            'sys.stdin.read()\n' % port)
    proc = subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == 'up\n'
    return proc


@LINUX
def test_a_peer_process_that_ends_is_seen_to_close():
    listener = socket.create_server(('127.0.0.1', 0))
    port = listener.getsockname()[1]
    peer = _peer_process(port)
    accepted, _ = listener.accept()
    try:
        assert len(tcp_links.scheduler_links(tcp_links.tcp_links(), port)) == 1
        peer.stdin.close()
        assert peer.wait(timeout=BOUND_S) == 0
        deadline = time.monotonic() + BOUND_S
        while tcp_links.scheduler_links(tcp_links.tcp_links(), port):   # CLOSE_WAIT is not open
            assert time.monotonic() < deadline, tcp_links.tcp_links()
            time.sleep(0.01)        # polling /proc with a deadline
    finally:
        accepted.close()
        listener.close()
        if peer.poll() is None:
            peer.kill()
            peer.wait()


# -- where the thread runs -----------------------------------------------------

@pytest.mark.parametrize('name,where', [('run', ('kvstore', 'kvstore_server.py')),
                                        ('serve', ('mxnet_ssp', 'server', 'scheduler.py'))],
                         ids=['mxnets-server-loop', 'scheduler-from-the-library'])
def test_in_server_loop_sees_only_the_loop_functions_on_the_main_thread(tmp_path, name, where):
    folder = tmp_path.joinpath(*where[:-1])
    folder.mkdir(parents=True)
    code = 'def %s(check):\n    return check()\n' % name
    scope, other = {}, {}
    exec(compile(code, str(folder / where[-1]), 'exec'), scope)
    exec(compile(code, str(folder / 'x.py'), 'exec'), other)

    def from_a_thread():
        seen = []
        t = threading.Thread(target=lambda: seen.append(job_watch.in_server_loop()))
        t.start()
        t.join(BOUND_S)
        return seen
    assert scope[name](from_a_thread) == [True]
    assert other[name](from_a_thread) == [False]
    assert from_a_thread() == [False]


def test_when_importing_runs_before_the_modules_code_once(tmp_path, monkeypatch):
    (tmp_path / 'follow_probe_mod.py').write_text('import builtins\n'
                                                  'SEEN = list(builtins.follow_probe_calls)\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = []
    import builtins
    monkeypatch.setattr(builtins, 'follow_probe_calls', calls, raising=False)
    before = list(sys.meta_path)
    try:
        _hooks.when_importing('follow_probe_mod', lambda: calls.append('called'))
        assert calls == []
        import follow_probe_mod
        assert follow_probe_mod.SEEN == ['called']
        del sys.modules['follow_probe_mod']
        import follow_probe_mod  # noqa: F811 (imported again: no second call)
        assert calls == ['called']
        _hooks.when_importing('follow_probe_mod', lambda: calls.append('at once'))
        assert calls == ['called', 'at once']
    finally:
        sys.meta_path[:] = before
        sys.modules.pop('follow_probe_mod', None)


def test_follow_job_refuses_other_roles():
    with pytest.raises(ValueError, match='scheduler or server'):
        job_watch.follow_job('worker')


# -- the thread in a stand-in scheduler ------------------------------------------

# The child: a "scheduler" whose loop is a function `run` of kvstore/kvstore_server.py that
# accepts connections on a listener and returns when its stdin says "end".
_LOOP = '''
import socket, sys, threading

def run(listener):
    conns = []

    def accept():
        while True:
            conns.append(listener.accept()[0])
    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.readline()
'''

_CHILD = '''
import logging, socket, sys, threading
logging.basicConfig(level=logging.INFO, format="%(message)s")
sys.path.insert(0, {dir!r})
from mxnet_ssp.ps import job_watch
from kvstore.kvstore_server import run
listener = socket.create_server(("127.0.0.1", 0))
env = {{"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(listener.getsockname()[1]),
       "DMLC_NUM_WORKER": "1", "DMLC_NUM_SERVER": "1", **{env_grace!r}}}
threading.Thread(target=job_watch._watch, args=("scheduler", env, 0.02, {grace}),
                 daemon=True).start()
print(listener.getsockname()[1], flush=True)
run(listener)
print("loop returned", flush=True)
'''


def _stand_in_scheduler(tmp_path, grace, env_grace=None):
    """`grace` given to the thread, or None: the thread reads MXNET_SSP_FOLLOW_GRACE from its
    job's environment, `env_grace` (unset when None)."""
    pkg = tmp_path / 'kvstore'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('')
    (pkg / 'kvstore_server.py').write_text(_LOOP)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, '-c', textwrap.dedent(
        _CHILD.format(dir=str(tmp_path), grace=grace,
                      env_grace={} if env_grace is None else {'MXNET_SSP_FOLLOW_GRACE': env_grace}
                      ))], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, int(proc.stdout.readline())


@LINUX
def test_a_scheduler_whose_node_went_away_ends_with_status_1_after_the_grace(tmp_path):
    proc, port = _stand_in_scheduler(tmp_path, grace=None, env_grace='1')
    nodes = []
    try:
        nodes = [socket.create_connection(('127.0.0.1', port)) for _ in range(2)]
        line = proc.stderr.readline()       # both seen before one goes
        assert ('scheduler follows its 2 ps-lite connection(s) of the job; it ends 1 s after '
                'one closes for good') in line, line
        nodes[0].close()
        proc.wait(timeout=BOUND_S)          # its stdin stays open: the loop never returns
        out, err = proc.stdout.read(), line + proc.stderr.read()
    finally:
        for s in nodes:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    assert 'loop returned' not in out
    assert ('mxnet-ssp: scheduler: 2 of the 2 workers and servers of the job were connected; '
            'for ' in err and ' s now only 1: a node ended without ps-lite' in err), err
    assert '(exit status 1)' in err


@LINUX
def test_a_scheduler_whose_loop_returned_is_left_alone(tmp_path):
    """The healthy end: the nodes hang up, the loop returns within the grace, exit 0."""
    proc, port = _stand_in_scheduler(tmp_path, grace=BOUND_S)
    nodes = [socket.create_connection(('127.0.0.1', port)) for _ in range(2)]
    try:
        line = proc.stderr.readline()       # following both
        assert 'scheduler follows its 2 ps-lite connection(s)' in line, line
        for s in nodes:
            s.close()
        out, err = proc.communicate('end\n', timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert 'loop returned' in out and err == ''


# -- the thread in a stand-in worker of an mxnet-ssp store ------------------------

_WORKER = '''
import logging, socket, sys, threading
logging.basicConfig(level=logging.INFO, format="%(message)s")
from mxnet_ssp.ps import job_watch
port = int(sys.argv[1])
env = {"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(port)}
leaving = []
threading.Thread(target=job_watch._watch, args=("worker", env, 0.02, 0.5),
                 kwargs={"active": lambda: not leaving, "who": "worker[3]"}, daemon=True).start()
link = socket.create_connection(("127.0.0.1", port))
for line in sys.stdin:
    leaving.append(line)        # "leave": like free_native, before ps-lite's finalize
    print("left", flush=True)
'''


def _stand_in_worker():
    listener = socket.create_server(('127.0.0.1', 0))
    port = listener.getsockname()[1]
    proc = subprocess.Popen([sys.executable, '-c', _WORKER, str(port)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    scheduler_side, _ = listener.accept()
    listener.close()
    line = proc.stderr.readline()
    assert 'worker follows its 1 ps-lite connection(s)' in line, line
    return proc, scheduler_side, port


@LINUX
def test_a_worker_whose_scheduler_closed_its_connection_exits_1():
    proc, scheduler_side, port = _stand_in_worker()
    try:
        scheduler_side.close()              # the scheduler ended
        proc.wait(timeout=BOUND_S)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == 1, err
    assert ('mxnet-ssp: worker[3]: the scheduler at 127.0.0.1:%d closed its connection' % port
            in err), err


@LINUX
def test_a_worker_that_entered_the_finalize_is_left_alone():
    proc, scheduler_side, port = _stand_in_worker()
    try:
        proc.stdin.write('leave\n')
        proc.stdin.flush()
        assert proc.stdout.readline() == 'left\n'
        scheduler_side.close()              # the barrier passed: the scheduler hangs up
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)          # 4 times the grace: the thread stood down
        out, err = proc.communicate('', timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == 0 and 'mxnet-ssp' not in err, err
