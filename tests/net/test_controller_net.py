"""The controller service over real loopback sockets: protocol, faults, fuzz.

Synchronisation between test threads uses queues, events and joins with
timeouts, never sleeps.  A ``RecordingPolicy`` reports each push the server
handled, which is how a test knows a worker is being held.
"""
import json
import queue
import random
import re
import socket
import struct
import threading
import time

import pytest

from mxnet_ssp.controller import protocol as P
from mxnet_ssp.controller.client import ControllerClient
from mxnet_ssp.controller.server import ControllerError, ControllerServer
from mxnet_ssp.core.sync import SyncPolicy

SECRET = b'test-secret-0123456789'
WAIT = 5.0          # generous bound on anything that should happen "at once"


class RecordingPolicy(SyncPolicy):
    """SyncPolicy that reports every push it handled: (rank, clock, released ranks)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events = queue.Queue()

    def on_push(self, rank, now):
        releases = super().on_push(rank, now)
        self.events.put((rank, self.clocks[rank], [r.rank for r in releases]))
        return releases

    def next_push(self):
        return self.events.get(timeout=WAIT)


@pytest.fixture
def servers():
    started = []

    def make(num_workers=2, s_lower=0, s_upper=None, **kwargs):
        policy = RecordingPolicy(num_workers, s_lower, s_lower if s_upper is None else s_upper)
        kwargs.setdefault('timeout', WAIT)            # a broken test fails instead of hanging
        srv = ControllerServer(policy, SECRET, **kwargs).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


def client(srv, rank, secret=SECRET, **kwargs):
    kwargs.setdefault('timeout', 10.0)
    kwargs.setdefault('connect_timeout', 2.0)
    return ControllerClient(srv.address, secret, rank, **kwargs).connect()


class Worker(threading.Thread):
    """Runs `fn(client)` in a thread; keeps its result or exception."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None

    def run(self):
        try:
            self.result = self.fn()
        except BaseException as exc:       # reported by finish()
            self.error = exc

    def finish(self):
        self.join(WAIT)
        assert not self.is_alive(), 'worker thread did not finish'
        return self


def raw(srv):
    """A plain socket to the server, with the CHALLENGE read: (sock, nonce)."""
    sock = socket.create_connection(srv.address, timeout=WAIT)
    reader = P.FrameReader()
    frames = []
    while not frames:
        data = sock.recv(4096)
        assert data, 'server closed before sending CHALLENGE'
        frames = reader.feed(data)
    version, nonce = P.decode_challenge(frames[0])
    assert version == P.VERSION
    return sock, nonce


def read_until_closed(sock):
    """Everything the server sends until it closes; fails if it does not close."""
    chunks = []
    while True:
        try:
            data = sock.recv(4096)
        except ConnectionResetError:
            break
        except socket.timeout:
            pytest.fail('server did not close the connection')
        if not data:
            break
        chunks.append(data)
    sock.close()
    return P.FrameReader().feed(b''.join(chunks)) if chunks else []


def assert_serves(srv, alive, t):
    """`alive` (an authenticated client at clock t-1) still gets released."""
    rel = alive.clock(t)
    assert rel.clock == t and rel.rank == alive.rank
    assert srv.failure is None


# -- normal operation ----------------------------------------------------------------

def test_lockstep_rounds_ssp0(servers):
    srv = servers(num_workers=3, s_lower=0)
    rounds = 6
    start = threading.Barrier(3, timeout=WAIT)

    def run(rank):
        c = client(srv, rank)
        assert (c.num_workers, c.s_lower, c.s_upper, c.mode) == (3, 0, 0, 'bounded')
        start.wait()
        out = [c.clock(t) for t in range(1, rounds + 1)]
        c.leave()
        return out

    workers = [Worker(lambda r=r: run(r)) for r in range(3)]
    for w in workers:
        w.start()
    for rank, w in enumerate(workers):
        w.finish()
        assert w.error is None, w.error
        assert [r.clock for r in w.result] == list(range(1, rounds + 1))
        for rel in w.result:
            # lockstep: released only once every worker has pushed this clock
            assert rel.rank == rank and rel.t_slowest == rel.clock and rel.lead == 0
    assert srv.failure is None
    assert srv.policy.clocks == [rounds] * 3


def test_held_worker_released_when_slowest_pushes(servers, tmp_path):
    metrics = tmp_path / 'controller.jsonl'
    metrics.write_text('{"event": "connect", "rank": 7, "note": "an earlier job"}\n')
    srv = servers(num_workers=2, s_lower=1, metrics_path=str(metrics))    # starts it afresh
    fast, slow = client(srv, 0), client(srv, 1)
    assert fast.clock(1).lead == 1                      # lead 1 <= s=1: goes on
    assert srv.policy.next_push() == (0, 1, [0])
    held = Worker(lambda: fast.clock(2))                # lead 2 > 1: held
    held.start()
    assert srv.policy.next_push() == (0, 2, [])         # the server handled it: held
    assert held.is_alive()
    rel = slow.clock(1)
    assert (rel.clock, rel.lead, rel.t_slowest) == (1, 0, 1)
    held.finish()
    assert held.error is None
    assert (held.result.clock, held.result.lead, held.result.t_slowest) == (2, 1, 1)
    fast.leave()
    slow.leave()
    srv.stop()
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    pushes = [r for r in records if r['event'] == 'push']
    assert [(r['rank'], r['clock'], r['decision']) for r in pushes] == \
        [(0, 1, 'ok'), (0, 2, 'wait'), (1, 1, 'ok')]
    assert set(pushes[0]) == {'event', 'rank', 'clock', 'time', 'lead', 't_slowest',
                              'decision', 'granted'}
    (release,) = [r for r in records if r['event'] == 'release']
    assert (release['rank'], release['clock'], release['by'], release['lead']) == (0, 2, 1, 1)
    assert 0 <= release['waited_s'] < WAIT
    assert release['time'] >= pushes[1]['time']
    assert sorted(r['rank'] for r in records if r['event'] == 'leave') == [0, 1]
    assert sorted(r['rank'] for r in records if r['event'] == 'connect') == [0, 1]


def test_leave_releases_waiting_worker(servers):
    srv = servers(num_workers=2, s_lower=0)
    a, b = client(srv, 0), client(srv, 1)
    held = Worker(lambda: a.clock(1))
    held.start()
    assert srv.policy.next_push() == (0, 1, [])
    b.leave()
    held.finish()
    assert held.error is None
    assert (held.result.clock, held.result.t_slowest, held.result.lead) == (1, 1, 0)
    assert a.clock(2).t_slowest == 2                    # alone now: never held
    a.leave()
    with pytest.raises(ControllerError, match=r'\(worker 0\): clock\(3\) called after leave'):
        a.clock(3)
    assert srv.failure is None


class FakeClock:
    """The controller's clock, set by the test before each message it sends."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_dssp_releases_mirror_policy_including_grants(servers):
    fake = FakeClock()
    srv = servers(num_workers=2, s_lower=1, s_upper=5, clock=fake)
    reference = SyncPolicy(2, 1, 5)
    clients = [client(srv, 0), client(srv, 1)]
    got, expected = [], []
    # (rank, controller time); worker 0 is three times as fast as worker 1
    script = [(0, 1), (1, 3), (0, 2), (0, 3), (1, 6), (0, 4), (0, 5), (0, 6), (1, 9), (0, 7)]
    held = None
    for rank, now in script:
        expected += reference.on_push(rank, float(now))
        fake.now = float(now)
        c = clients[rank]
        if rank in reference.waiting:                  # this push will be held
            held = Worker(lambda c=c: c.clock(srv.policy.clocks[0] + 1))
            held.start()
            assert srv.policy.next_push() == (0, reference.clocks[0], [])
            continue
        got.append(c.clock(reference.clocks[rank]))
        srv.policy.next_push()
        if held is not None and not reference.waiting:
            held.finish()
            got.append(held.result)
            held = None
    key = lambda r: (r.rank, r.clock)
    assert sorted(got, key=key) == sorted(expected, key=key)
    grants = [r for r in got if r.granted]
    assert grants and grants[0].rank == 0 and grants[0].extra_left == grants[0].granted - 1
    assert max(r.lead for r in got) > 1                # DSSP let the fast worker run ahead
    assert srv.failure is None


# -- authentication ---------------------------------------------------------------------

def test_wrong_secret_rejected(servers):
    srv = servers(s_lower=5)
    with pytest.raises(ControllerError, match=r'worker 0.*wrong secret'):
        client(srv, 0, secret=b'not-the-secret')
    assert srv.failure is None
    assert client(srv, 0).clock(1).clock == 1         # the rank is still free


def test_rank_out_of_range_rejected(servers):
    srv = servers(num_workers=2)
    with pytest.raises(ControllerError, match=r'rank 2 is outside 0\.\.1'):
        client(srv, 2)
    assert srv.failure is None


def test_duplicate_rank_rejected(servers):
    srv = servers(num_workers=2, s_lower=5)
    first = client(srv, 0)
    with pytest.raises(ControllerError, match='rank 0 is already connected'):
        client(srv, 0)
    assert_serves(srv, first, 1)


def test_replayed_hello_rejected(servers):
    srv = servers(num_workers=2, s_lower=5)
    sock1, nonce1 = raw(srv)
    sock2, _ = raw(srv)
    sock2.sendall(P.encode_hello(0, P.hello_mac(SECRET, nonce1, 0)))   # mac for another nonce
    frames = read_until_closed(sock2)
    assert [f[0] for f in frames] == [P.ERROR]
    assert 'wrong secret' in P.decode_error(frames[0])
    sock1.close()
    assert_serves(srv, client(srv, 0), 1)


def test_rejoin_after_leave_refused(servers):
    srv = servers(num_workers=2, s_lower=5)
    c = client(srv, 1)
    c.leave()
    with pytest.raises(ControllerError, match='worker 1 already left'):
        client(srv, 1)
    assert srv.failure is None


# -- job failures -------------------------------------------------------------------------

def test_dead_worker_fails_job_naming_rank(servers):
    srv = servers(num_workers=3, s_lower=0)
    a, b, c = client(srv, 0), client(srv, 1), client(srv, 2)
    assert srv.policy.num_workers == 3
    held = Worker(lambda: a.clock(1))
    held.start()
    assert srv.policy.next_push() == (0, 1, [])
    b.close()                                          # died: no LEAVE
    held.finish()
    assert isinstance(held.error, ControllerError)
    assert 'worker 1 disconnected at clock 0 without leaving' in str(held.error)
    assert srv.failure == str(held.error)
    with pytest.raises(ControllerError, match='worker 1 disconnected'):
        c.clock(1)                                     # a later CLOCK gets the ERROR
    with pytest.raises(ControllerError, match='worker 1 disconnected'):
        a.clock(2)                                     # the client stays failed
    c.leave()                                          # leaving a failed job is quiet
    with pytest.raises(ControllerError, match='worker 1 disconnected'):
        client(srv, 1)                                 # no rejoining a failed job


def test_dead_worker_after_pushes_names_its_clock(servers):
    srv = servers(num_workers=2, s_lower=3)
    a, b = client(srv, 0), client(srv, 1)
    for t in (1, 2):
        b.clock(t)
    b.close()
    with pytest.raises(ControllerError, match='worker 1 disconnected at clock 2'):
        a.clock(1)


def test_stall_timeout_names_never_connected_and_idle_workers(servers):
    srv = servers(num_workers=3, s_lower=0, timeout=0.5)
    a, b = client(srv, 0), client(srv, 1)
    started = time.monotonic()
    with pytest.raises(ControllerError) as info:
        a.clock(1)
    elapsed = time.monotonic() - started
    msg = str(info.value)
    assert 0.45 <= elapsed < WAIT
    assert re.match(r'worker 0 waited \d+\.\d s at clock 1 for ', msg)
    assert 'worker 1 (clock 0, connected' in msg and 'no push yet' in msg
    assert 'worker 2 (clock 0, never connected)' in msg
    assert srv.failure == msg
    with pytest.raises(ControllerError, match='worker 0 waited'):
        b.clock(1)


def test_stall_timeout_names_last_push(servers):
    srv = servers(num_workers=2, s_lower=0, timeout=0.5)
    a, b = client(srv, 0), client(srv, 1)
    w = Worker(lambda: a.clock(1))
    w.start()
    assert srv.policy.next_push() == (0, 1, [])
    b.clock(1)
    w.finish()
    with pytest.raises(ControllerError,
                       match=r'^worker 0 waited \d+\.\d s at clock 2 for worker 1 '
                             r'\(clock 1, last push \d+\.\d s ago\)'):
        a.clock(2)


def test_on_failed_once_every_worker_told_has_hung_up(servers):
    """How the server hosting the controller learns that the job is over (and ends)."""
    told = queue.Queue()
    srv = servers(num_workers=3, s_lower=0, on_failed=told.put, drain=60.0)
    a, b, c = client(srv, 0), client(srv, 1), client(srv, 2)
    b.close()                                          # died: no LEAVE
    with pytest.raises(ControllerError, match='worker 1 disconnected'):
        a.clock(1)                                     # the failure happened and was sent
    a.close()
    assert told.empty()                                # worker 2 has not hung up yet
    c.close()
    assert told.get(timeout=WAIT).startswith('worker 1 disconnected at clock 0')
    assert told.empty()


def test_on_failed_after_the_drain_when_a_worker_never_hangs_up(servers):
    """A stopped worker keeps its connection: the drain bounds the wait for it."""
    told = queue.Queue()
    srv = servers(num_workers=2, s_lower=0, timeout=0.3, on_failed=told.put, drain=0.2)
    a, _ = client(srv, 0), client(srv, 1)
    started = time.monotonic()
    with pytest.raises(ControllerError, match='worker 0 waited'):
        a.clock(1)                                     # worker 1 never pushes: timeout
    message = told.get(timeout=WAIT)                   # nobody hung up
    assert message.startswith('worker 0 waited') and message == srv.failure
    assert 0.5 <= time.monotonic() - started < WAIT


def test_no_on_failed_for_a_job_that_ends_normally(servers):
    told = queue.Queue()
    srv = servers(num_workers=2, s_lower=0, on_failed=told.put, drain=0.0)
    a, b = client(srv, 0), client(srv, 1)
    for c in (a, b):
        c.leave()
        c.close()
    srv.stop()
    assert told.empty() and srv.failure is None


def test_out_of_order_clock_fails_job(servers):
    srv = servers(num_workers=2, s_lower=3)
    a, b = client(srv, 0), client(srv, 1)
    with pytest.raises(ControllerError, match='worker 1 sent CLOCK 5 but its clock is 0'):
        b.clock(5)
    with pytest.raises(ControllerError, match='worker 1 sent CLOCK 5'):
        a.clock(1)


def test_malformed_frame_from_authenticated_worker_fails_job(servers):
    srv = servers(num_workers=2, s_lower=3)
    a = client(srv, 0)
    sock, nonce = raw(srv)
    sock.sendall(P.encode_hello(1, P.hello_mac(SECRET, nonce, 1)))
    assert P.FrameReader().feed(sock.recv(4096))[0][0] == P.WELCOME
    sock.sendall(P.frame(b'\x63junk'))
    frames = read_until_closed(sock)
    assert [f[0] for f in frames] == [P.ERROR]
    with pytest.raises(ControllerError, match='worker 1 sent a malformed message at clock 0'):
        a.clock(1)


def test_metrics_record_failure(servers, tmp_path):
    path = tmp_path / 'm.jsonl'
    srv = servers(num_workers=2, s_lower=0, metrics_path=str(path))
    a = client(srv, 0)
    client(srv, 1).close()
    with pytest.raises(ControllerError):
        a.clock(1)
    srv.stop()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    failures = [r for r in records if r['event'] == 'failure']
    assert len(failures) == 1 and failures[0]['message'] == srv.failure
    assert 'worker 1' in failures[0]['message']


# -- client-side faults -----------------------------------------------------------------

class SilentController(threading.Thread):
    """Handshakes correctly, then reads one CLOCK and either hangs up or stays silent."""

    def __init__(self, hang_up):
        super().__init__(daemon=True)
        self.listener = socket.create_server(('127.0.0.1', 0))
        self.listener.settimeout(WAIT)
        self.address = self.listener.getsockname()
        self.hang_up = hang_up
        self.done = threading.Event()

    def run(self):
        conn, _ = self.listener.accept()
        with conn, self.listener:
            conn.settimeout(WAIT)
            conn.sendall(P.encode_challenge(b'n' * P.NONCE_BYTES))
            conn.recv(4096)
            conn.sendall(P.encode_welcome(2, 0, 0, 'bounded', 0.1))
            conn.recv(4096)                               # the CLOCK
            if not self.hang_up:
                self.done.wait(WAIT)


@pytest.mark.parametrize('hang_up, reason', [(False, 'no answer within 0.2 s'),
                                             (True, 'closed the connection')])
def test_client_gives_up_naming_address_and_rank(hang_up, reason):
    fake = SilentController(hang_up)
    fake.start()
    c = ControllerClient(fake.address, SECRET, 1, timeout=0.1, release_margin=0.1)
    c.connect()
    with pytest.raises(ControllerError) as info:
        c.clock(1)
    fake.done.set()
    fake.join(WAIT)
    msg = str(info.value)
    assert 'controller at 127.0.0.1:%d (worker 1)' % fake.address[1] in msg
    assert reason in msg and 'release of clock 1' in msg


def test_connect_retries_then_fails_clearly():
    probe = socket.create_server(('127.0.0.1', 0))
    port = probe.getsockname()[1]
    probe.close()                                     # nothing listens there now
    c = ControllerClient(('127.0.0.1', port), SECRET, 3, connect_timeout=0.3)
    with pytest.raises(ControllerError,
                       match=r'controller at 127\.0\.0\.1:%d \(worker 3\): cannot connect '
                             r'after [2-9]\d* attempt' % port):
        c.connect()


def test_stop_wakes_waiting_worker_and_leave_never_raises(servers):
    srv = servers(num_workers=2, s_lower=0)
    a = client(srv, 0)
    held = Worker(lambda: a.clock(1))
    held.start()
    assert srv.policy.next_push() == (0, 1, [])
    srv.stop()
    srv.stop()                                         # idempotent
    held.finish()
    assert isinstance(held.error, ControllerError)
    assert 'stopped' in str(held.error)
    a.leave()                                          # logs, does not raise
    assert srv.failure is None


def test_start_reports_bind_error():
    holder = socket.create_server(('127.0.0.1', 0))
    try:
        srv = ControllerServer(SyncPolicy(1, 0, 0), SECRET, port=holder.getsockname()[1])
        with pytest.raises(ControllerError, match='cannot listen on 127.0.0.1:%d'
                           % holder.getsockname()[1]):
            srv.start()
    finally:
        holder.close()


# -- hostile or broken peers --------------------------------------------------------------

def _garbage(srv):
    sock, _ = raw(srv)
    sock.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    return read_until_closed(sock)


def _truncated_then_close(srv):
    sock, nonce = raw(srv)
    sock.sendall(P.encode_hello(1, P.hello_mac(SECRET, nonce, 1))[:20])
    sock.shutdown(socket.SHUT_WR)
    return read_until_closed(sock)


def _length_zero(srv):
    sock, _ = raw(srv)
    sock.sendall(struct.pack('>I', 0))
    return read_until_closed(sock)


def _huge_length(srv):
    sock, _ = raw(srv)
    sock.sendall(struct.pack('>I', 2 ** 31) + b'\x02' * 64)
    return read_until_closed(sock)


def _random_payloads(srv):
    rng = random.Random(7)
    got = []
    for size in (1, 9, 39, 39, 200):
        sock, _ = raw(srv)
        payload = bytes(rng.randrange(256) for _ in range(size))
        if size == 39:
            payload = bytes((P.HELLO,)) + payload[1:]          # a HELLO with a random mac
        sock.sendall(P.frame(payload))
        got += read_until_closed(sock)
    return got


def _idle(srv):
    sock, _ = raw(srv)
    return read_until_closed(sock)                 # auth_timeout closes it


@pytest.mark.parametrize('attack', [_garbage, _truncated_then_close, _length_zero, _huge_length,
                                    _random_payloads, _idle])
def test_bad_peer_closed_server_survives(servers, attack):
    srv = servers(num_workers=3, s_lower=100, auth_timeout=0.3)
    alive = client(srv, 0)
    assert_serves(srv, alive, 1)
    frames = attack(srv)
    assert all(f[0] == P.ERROR for f in frames)    # at most a refusal, never a WELCOME
    assert_serves(srv, alive, 2)
    fresh = client(srv, 1)                         # the handshake path still works
    assert_serves(srv, fresh, 1)
    assert srv.policy.clocks == [2, 1, 0]


def test_fuzz_unauthenticated_junk_never_fails_job(servers):
    """300 junk connections, one at a time.  The controller's clock is frozen, so the
    auth deadline never passes: every junk connection must be closed by the server's own
    answer to what it received (refusal, malformed frame, end of stream), not by waiting
    out auth_timeout -- checked per connection instead of by the run's wall time."""
    srv = servers(num_workers=2, s_lower=10 ** 6, auth_timeout=2.0, clock=lambda: 0.0)
    alive = client(srv, 0)
    rng = random.Random(1234)
    welcomed = 0
    for i in range(300):
        sock, nonce = raw(srv)
        hello = P.encode_hello(1, P.hello_mac(SECRET, nonce, 1))
        kind = rng.randrange(5)
        if kind == 0:                                  # random bytes
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
        elif kind == 1:                                # valid HELLO with one byte changed
            data = bytearray(hello)
            pos = rng.randrange(len(data))
            data[pos] ^= rng.randrange(1, 256)
            data = bytes(data)
        elif kind == 2:                                # random payload, correct length header
            data = P.frame(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60))))
        elif kind == 3:                                # prefix of a valid HELLO
            data = hello[:rng.randrange(1, len(hello))]
        else:                                          # other messages before authenticating
            data = rng.choice([P.encode_clock(1), P.LEAVE_FRAME, P.encode_error('x'),
                               P.encode_challenge(nonce), hello[:4] + b'\x04' + hello[5:]])
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        frames = read_until_closed(sock)
        welcomed += sum(f[0] == P.WELCOME for f in frames)
        if i % 50 == 0:
            assert_serves(srv, alive, 1 + i // 50)
    assert welcomed == 0
    assert srv.failure is None
    assert not srv._pending, 'junk connections still open on the server'
    c = client(srv, 1)
    assert c.clock(1).clock == 1
    assert_serves(srv, alive, 7)
    c.leave()
    alive.leave()
    assert srv.failure is None


# -- elastic mode (min_workers >= 1): a lost worker is dropped, not a failure ------------

def test_elastic_drop_releases_held_workers_and_bye_lists_the_loss(servers, tmp_path):
    metrics = tmp_path / 'controller.jsonl'
    srv = servers(num_workers=3, s_lower=0, min_workers=2, metrics_path=str(metrics))
    a, b, c = client(srv, 0), client(srv, 1), client(srv, 2)
    first = [Worker(lambda w=w: w.clock(1)) for w in (b, c)]
    for w in first:
        w.start()
    for _ in first:
        srv.policy.next_push()
    assert a.clock(1).t_slowest == 1                   # the last of clock 1 releases all
    assert srv.policy.next_push() == (0, 1, [0, 1, 2])
    for w in first:
        assert w.finish().error is None
    held = [Worker(lambda w=w: w.clock(2)) for w in (a, b)]
    for w in held:
        w.start()
    assert sorted(srv.policy.next_push()[:2] for _ in held) == [(0, 2), (1, 2)]
    assert all(w.is_alive() for w in held)             # SSP 0: held for worker 2
    c.close()                                          # worker 2 dies at clock 1: no LEAVE
    for w in held:                                     # released by the drop, not a timeout
        assert w.finish().error is None and w.result.t_slowest == 2
    assert srv.failure is None
    assert [(x['rank'], x['clock']) for x in srv.lost] == [(2, 1)]
    assert b.leave() == srv.lost
    assert a.clock(3).t_slowest == 3                   # the last one goes on alone
    assert a.leave() == srv.lost
    srv.stop()
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    (lost,) = [r for r in records if r['event'] == 'lost']
    assert (lost['rank'], lost['clock'], lost['left']) == (2, 1, 2)
    assert lost['after_s'] == srv.lost[0]['after_s'] >= 0
    released = [r for r in records if r['event'] == 'release' and r['by'] == 2]
    assert sorted((r['rank'], r['clock']) for r in released) == [(0, 2), (1, 2)]
    assert all(r['time'] == lost['time'] and r['waited_s'] < WAIT for r in released)


def test_elastic_fails_when_more_are_lost_than_the_job_can_lose(servers):
    srv = servers(num_workers=3, s_lower=0, min_workers=2)
    a, b, c = client(srv, 0), client(srv, 1), client(srv, 2)
    c.close()
    held = Worker(lambda: a.clock(1))
    held.start()
    assert srv.policy.next_push()[:2] == (0, 1)
    assert srv.failure is None
    b.close()                                          # 2 of 3 lost: fewer than 2 left
    held.finish()
    assert isinstance(held.error, ControllerError)
    assert re.search(r'worker 1 disconnected at clock 0 without leaving.*2 of the 3 workers '
                     r'are lost, more than the job can lose \(elastic: at least 2 needed\)',
                     str(held.error)), held.error
    assert srv.failure == str(held.error)


def test_fail_fast_bye_has_no_body(servers):
    srv = servers(num_workers=1, s_lower=0)
    a = client(srv, 0)
    a.clock(1)
    assert a.leave() == []


@pytest.mark.parametrize('bad', [0 - 1, 4])
def test_elastic_min_workers_checked(bad):
    with pytest.raises(ValueError, match='min_workers must be in 0..3'):
        ControllerServer(SyncPolicy(3, 0, 0), SECRET, min_workers=bad)


def test_barrier_passes_once_every_live_worker_is_there_and_a_loss_counts(servers, tmp_path):
    metrics = tmp_path / 'controller.jsonl'
    srv = servers(num_workers=3, s_lower=5, min_workers=1, metrics_path=str(metrics))
    a, b, c = client(srv, 0), client(srv, 1), client(srv, 2)
    a.clock(1)
    first = Worker(a.barrier)
    first.start()
    b.clock(1)                                    # its CLOCK is handled after a's BARRIER
    assert first.is_alive()
    second = Worker(b.barrier)
    second.start()
    c.close()                                     # worker 2 is lost: the barrier passes
    assert first.finish().error is None and second.finish().error is None
    assert [x['rank'] for x in a.lost] == [2] and b.lost == a.lost   # LOST notices read
    assert srv.failure is None
    again = Worker(a.barrier)                     # a barrier of the two survivors
    again.start()
    b.barrier()
    assert again.finish().error is None
    assert a.leave() == b.leave() == srv.lost
    srv.stop()
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r['ranks'] for r in records if r['event'] == 'passed'] == [[0, 1], [0, 1]]


def test_barrier_fails_the_job_when_the_awaited_workers_make_no_progress(servers):
    srv = servers(num_workers=2, s_lower=5, timeout=0.5)
    a, b = client(srv, 0), client(srv, 1)
    with pytest.raises(ControllerError, match=r'worker\(s\) 0 waited [\d.]+ s at the barrier '
                                              r'for worker\(s\) 1, which neither pushed nor '
                                              r'arrived meanwhile; timeout is 0.5 s'):
        a.barrier()
    assert 'at the barrier' in srv.failure
    b.leave()


def test_clock_while_at_the_barrier_is_a_protocol_fault(servers):
    srv = servers(num_workers=2, s_lower=5)
    a, b = client(srv, 0), client(srv, 1)
    waiting = Worker(a.barrier)
    waiting.start()
    raw_sock = a._sock
    deadline = time.monotonic() + WAIT
    while 0 not in srv._barrier and time.monotonic() < deadline:
        time.sleep(0.01)        # polling the server's state with a deadline, not a sync
    raw_sock.sendall(P.encode_clock(1))
    assert isinstance(waiting.finish().error, ControllerError)
    assert srv.failure == 'worker 0 sent CLOCK 1 while waiting at the barrier'
    b.close()


def test_a_lost_rank_rejoins_at_the_slowest_clock_and_is_waited_for_again(servers, tmp_path):
    metrics = tmp_path / 'controller.jsonl'
    srv = servers(num_workers=3, s_lower=1, min_workers=2, metrics_path=str(metrics))
    a, b, c = client(srv, 0), client(srv, 1), client(srv, 2)
    c.close()                                          # worker 2 lost at clock 0
    for t in (1, 2):
        a.clock(t)
        b.clock(t)
    assert a.lost and a.lost[0]['rank'] == 2
    back = client(srv, 2, rejoin=True)                 # its replacement
    assert back.start_clock == 2 and srv.policy.clocks[2] == 2
    assert a.clock(3).lead == 1
    held = Worker(lambda: a.clock(4))                  # lead 2 > 1: held for 1 and 2
    held.start()
    while srv.policy.next_push()[:2] != (0, 4):        # the pushes handled so far
        pass
    b.clock(3)
    assert held.is_alive()
    assert back.clock(3).clock == 3                    # the rejoiner's push frees worker 0
    assert held.finish().error is None
    for w in (a, b, back):
        w.leave()
    srv.stop()
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [(r['rank'], r['clock']) for r in records if r['event'] == 'rejoin'] == [(2, 2)]


def test_rejoin_refusals(servers):
    srv = servers(num_workers=2, s_lower=1, min_workers=1)
    client(srv, 0)
    with pytest.raises(ControllerError, match='no answer within 0.5 s while waiting for the '
                                              'REJOINED'):
        client(srv, 1, rejoin=True, handshake_timeout=0.5)     # worker 1 was never lost
    other = servers(num_workers=2, s_lower=1, min_workers=1)
    a, b = client(other, 0), client(other, 1)
    b.close()                                          # lost
    deadline = time.monotonic() + WAIT
    while not other.lost and time.monotonic() < deadline:
        time.sleep(0.01)        # polling the server's state with a deadline, not a sync
    a.clock(1)
    a.leave()                                          # finished: nobody is left
    with pytest.raises(ControllerError, match='worker 1 was lost and no worker is left'):
        client(other, 1, rejoin=True)
    assert other.failure is None


@pytest.mark.parametrize('rejoin', [False, True])
def test_a_worker_admitted_after_a_loss_hears_of_it_before_its_first_answer(servers, rejoin):
    """The leadership race (issue 58): worker 0 is lost before worker 1 first connects (a
    slow start on a busy machine); worker 1 must know of the loss from its first answer on,
    or it takes rank 0 for the leader and nobody sends the learning rate or saves.  The
    controller once told only the workers connected at the loss.  A replacement of the lost
    rank (``rejoin``) hears of it too, so every worker names the same leader."""
    srv = servers(num_workers=3, s_lower=5, min_workers=1)
    a, c = client(srv, 0), client(srv, 2)
    a.close()                                          # worker 0 dies: no LEAVE
    deadline = time.monotonic() + WAIT
    while not srv.lost and time.monotonic() < deadline:
        time.sleep(0.01)       # polling the controller's state with a deadline, not a sync
    assert [x['rank'] for x in srv.lost] == [0]
    b = client(srv, 1)                                 # admitted after the loss
    assert b.clock(1).clock == 1                       # its first answer
    assert [x['rank'] for x in b.lost] == [0], b.lost
    if rejoin:
        again = client(srv, 0, rejoin=True)
        assert again.clock(again.start_clock + 1).rank == 0
        assert [x['rank'] for x in again.lost] == [0], again.lost
        assert again.leave() == srv.lost
    c.clock(1)
    assert [x['rank'] for x in c.lost] == [0]
    assert b.leave() == c.leave() == srv.lost
