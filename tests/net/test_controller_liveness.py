"""Lost hosts on the controller's connections, over real loopback sockets.

A real partition needs network namespaces (tests/testbed/test_testbed_lost_hosts.py); here
the kernel's silence of one chosen connection is replaced by a large value, so these tests
check what the controller and a worker's client do with it: the decision, its timing, the
messages (rank, host, setting) and elastic mode's drop.  No sleeps: the waits are the
clients' own blocking calls, bounded.
"""
import json
import re
import time

import pytest

from mxnet_ssp.controller import liveness as live
from mxnet_ssp.controller.client import ControllerClient, LOOK_S
from mxnet_ssp.controller.server import ControllerError, ControllerServer
from mxnet_ssp.core.sync import SyncPolicy

pytestmark = pytest.mark.skipif(not live.SUPPORTED, reason='Linux TCP keepalive and TCP_INFO')

SECRET = b'liveness-secret-0123'
BOUND = 2.0


@pytest.fixture
def silenced(monkeypatch):
    """silenced(predicate): sockets for which predicate(sock) is true read as silent for
    an hour; the others as the kernel says."""
    real = live.silence

    def install(predicate):
        monkeypatch.setattr(live, 'silence',
                            lambda sock: 3600.0 if predicate(sock) else real(sock))
    return install


def peer_is(address):
    def predicate(sock):
        try:
            return sock.getpeername()[:2] == tuple(address)
        except OSError:
            return False
    return predicate


def start(workers=2, **kwargs):
    kwargs.setdefault('timeout', 30.0)
    return ControllerServer(SyncPolicy(workers, 0, 0), SECRET, liveness=BOUND,
                            **kwargs).start()


def connect(srv, rank, liveness=0):
    return ControllerClient(srv.address, SECRET, rank, timeout=30.0, connect_timeout=2.0,
                            liveness=liveness).connect()


def test_fail_fast_a_silent_worker_fails_the_job_naming_rank_host_and_setting(silenced):
    srv = start()
    try:
        a, b = connect(srv, 0), connect(srv, 1)
        silenced(peer_is(b._sock.getsockname()))     # the controller's end of worker 1's
        started = time.monotonic()
        with pytest.raises(ControllerError) as err:
            a.clock(1)                               # held for worker 1 (s = 0)
        took = time.monotonic() - started
        assert re.fullmatch(
            r'worker 1 on 127\.0\.0\.1 sent nothing, not even the answer to a TCP keepalive '
            r'probe, for 2\.\d s at clock 0 \(MXNET_SSP_LIVENESS_TIMEOUT=2\): its host is down '
            r'or cut off', str(err.value)), err.value
        assert BOUND - 0.1 < took < BOUND + 2 * LOOK_S + 1.0, took
        assert srv.failure == str(err.value)
    finally:
        srv.stop()


def test_elastic_a_silent_worker_is_lost_and_the_held_one_released(silenced, tmp_path):
    metrics = tmp_path / 'controller.jsonl'
    srv = start(workers=2, min_workers=1, metrics_path=str(metrics))
    try:
        a, b = connect(srv, 0), connect(srv, 1)
        silenced(peer_is(b._sock.getsockname()))
        started = time.monotonic()
        rel = a.clock(1)                             # held for worker 1, released by the drop
        took = time.monotonic() - started
        assert rel.clock == 1 and BOUND - 0.1 < took < BOUND + 2 * LOOK_S + 1.0, took
        assert srv.failure is None
        (lost,) = srv.lost
        assert (lost['rank'], lost['clock'], lost['host']) == (1, 0, '127.0.0.1')
        assert a.clock(2).clock == 2                 # goes on alone
        assert [x['rank'] for x in a.leave()] == [1]
    finally:
        srv.stop()
    (record,) = [json.loads(x) for x in metrics.read_text().splitlines()
                 if json.loads(x)['event'] == 'lost']
    assert record['host'] == '127.0.0.1' and 'keepalive' in record['why'], record


def test_a_worker_whose_controller_went_silent_fails_naming_its_host(silenced):
    srv = ControllerServer(SyncPolicy(2, 0, 0), SECRET, timeout=30.0).start()   # not judging
    try:
        a = connect(srv, 0, liveness=BOUND)
        b = connect(srv, 1)  # noqa: F841 (kept open)
        silenced(peer_is(srv.address))               # the worker's end of its connection
        started = time.monotonic()
        with pytest.raises(ControllerError) as err:
            a.clock(1)                               # held for worker 1, which never pushes
        took = time.monotonic() - started
        assert re.fullmatch(
            r'controller at 127\.0\.0\.1:\d+ \(worker 0\): the controller on 127\.0\.0\.1 sent '
            r'nothing, not even the answer to a TCP keepalive probe, for 2\.\d s while this '
            r'worker waited for the release of clock 1 \(MXNET_SSP_LIVENESS_TIMEOUT=2\): that '
            r'host is down or cut off from this one', str(err.value)), err.value
        assert BOUND - 0.1 < took < BOUND + 2 * LOOK_S + 1.0, took
    finally:
        srv.stop()


def test_live_idle_connections_are_not_judged_lost():
    """Nothing patched: the kernel answers keepalive probes (idle 1 s for a 2 s bound), so
    a worker held for 3 bounds by a peer that never pushes stays connected, and the job
    fails only at the controller's hold timeout, naming the stall."""
    srv = start(timeout=3 * BOUND)
    try:
        a = connect(srv, 0, liveness=BOUND)
        b = connect(srv, 1, liveness=BOUND)  # noqa: F841 (kept open)
        with pytest.raises(ControllerError, match=r'worker 0 waited 6\.\d s at clock 1 for '
                                                  r'worker 1 \(clock 0, connected'):
            a.clock(1)
        assert srv.lost == []
    finally:
        srv.stop()


@pytest.mark.parametrize('liveness', [0.5, 1.99])
def test_the_server_refuses_a_bound_the_kernel_cannot_keep(liveness):
    with pytest.raises(ValueError, match='liveness must be 0 \\(off\\) or >= 2 seconds'):
        ControllerServer(SyncPolicy(2, 0, 0), SECRET, liveness=liveness)
