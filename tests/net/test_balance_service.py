"""The batch-balancing service (a thread of worker 0) over TCP on loopback: it runs on the
controller's transport, answers only workers that prove the secret under its own MAC
context, and peers that send garbage, bad lengths, a wrong or a controller's MAC, or a
malformed report neither crash it nor stop it from deciding for the real workers."""
import random
import secrets
import socket
import struct
import time

import pytest

from mxnet_ssp.controller import protocol as P
from mxnet_ssp.controller.balance_service import (BalanceClient, BalanceError, BalanceLost,
                                                  BalanceService, BalanceTimeout)
from mxnet_ssp.controller.client import ControllerClient
from mxnet_ssp.controller.server import ControllerError, ControllerServer
from mxnet_ssp.core.split import BalancePolicy
from mxnet_ssp.core.sync import SyncPolicy

SECRET = secrets.token_bytes(32)
WAIT = 5.0


@pytest.fixture
def services():
    started = []

    def make(workers=2, lockstep=True, **kwargs):
        service = BalanceService(BalancePolicy(workers, 64, 1, 64, threshold=0.05), SECRET,
                                 lockstep=lockstep, **kwargs).start()
        started.append(service)
        return service

    yield make
    for service in started:
        service.stop()


def raw(service):
    """A raw connection that has read the CHALLENGE; returns (sock, reader, nonce)."""
    sock = socket.create_connection(service.address, timeout=WAIT)
    reader = P.FrameReader(P.MAX_JSON_FRAME)
    version, nonce = P.decode_challenge(next_frame(sock, reader))
    assert version == P.VERSION
    return sock, reader, nonce


def next_frame(sock, reader):
    while True:
        data = sock.recv(65536)
        assert data, 'the service closed the connection'
        frames = reader.feed(data)
        if frames:
            return frames[0]


def hello(sock, reader, nonce, rank, secret=SECRET, context=P.BALANCE_MAC_CONTEXT):
    sock.sendall(P.encode_hello(rank, P.peer_mac(secret, context, nonce, rank)))
    return next_frame(sock, reader)


def closed(sock):
    """True when the service ended the connection (after an optional ERROR frame); a reset
    (the service closed with our bytes unread) is an end too."""
    reader = P.FrameReader(P.MAX_JSON_FRAME)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            if any(f[0] != P.ERROR for f in reader.feed(data)):
                return False
    except ConnectionResetError:
        pass
    sock.close()
    return True


def worker(service, rank, secret=SECRET, timeout=WAIT):
    return BalanceClient(service.address, secret, rank, timeout=timeout).connect()


def test_only_authenticated_well_formed_reports_count(services):
    service = services()
    # garbage, a zero length, an over-long frame, a frame that is no HELLO: closed
    for payload in (b'\x00\xff garbage\n', b'\x00\x00\x00\x00', struct.pack('>I', 1 << 20),
                    P.encode_json(P.REPORT, {'model': [0, 1]}),
                    P.frame(b'\x02' + b'\x00' * 5)):
        sock, reader, _ = raw(service)
        sock.sendall(payload)
        assert closed(sock), payload
    # a wrong secret, a rank outside the job: refused with a reason
    with pytest.raises(BalanceError, match=r'refused the connection: authentication failed '
                                           r'for rank 0: wrong secret'):
        worker(service, 0, secret=secrets.token_bytes(32))
    with pytest.raises(BalanceError, match=r'rank 7 is outside 0..1 \(the job has 2 workers\)'):
        worker(service, 7)
    # an authenticated worker whose report is malformed loses its connection only
    sock, reader, nonce = raw(service)
    welcome = P.decode_json(hello(sock, reader, nonce, 1), P.B_WELCOME)
    assert welcome == {'sizes': [32, 32], 'version': 0}
    sock.sendall(P.encode_json(P.REPORT, {'model': 'not a model'}))
    assert closed(sock)
    # the real workers: worker 1 three times slower per sample; one round decides
    w0, w1 = worker(service, 0), worker(service, 1)
    assert w0.welcome == {'sizes': [32, 32], 'version': 0}
    w0._sendall(P.encode_json(P.REPORT, {'model': [0.0, 0.001]}), 'REPORT')
    assert w1.report((0.0, 0.003)) == {'sizes': [48, 16], 'version': 1, 'round': 1}
    kind, payload = w0._read(WAIT, 'the decision')
    assert P.decode_json(payload, P.DECISION) == {'sizes': [48, 16], 'version': 1, 'round': 1}
    w0.leave()
    w1.leave()
    assert service.rounds == 1


def test_a_controller_mac_or_frame_is_never_accepted_and_vice_versa(services):
    service = services()
    # the controller's HELLO (its context) at the balancing service: refused
    sock, reader, nonce = raw(service)
    answer = hello(sock, reader, nonce, 0, context=P.MAC_CONTEXT)
    assert answer[0] == P.ERROR
    assert P.decode_error(answer) == 'authentication failed for rank 0: wrong secret'
    assert closed(sock)
    # a controller client with the right secret: refused too
    with pytest.raises(ControllerError, match='refused the connection: authentication failed'):
        ControllerClient(service.address, SECRET, 0, timeout=WAIT, connect_timeout=WAIT).connect()
    # an authenticated balancing worker that sends a controller frame loses its connection
    for frame in (P.encode_clock(1), P.LEAVE_FRAME, P.encode_json(P.DECISION, {})):
        sock, reader, nonce = raw(service)
        assert hello(sock, reader, nonce, 0)[0] == P.B_WELCOME
        sock.sendall(frame)
        assert closed(sock), frame
    # and the other way round: the balancing MAC at the controller
    controller = ControllerServer(SyncPolicy(2, 0, 0), SECRET, timeout=WAIT).start()
    try:
        with pytest.raises(BalanceError, match='refused the connection: authentication failed'):
            BalanceClient(controller.address, SECRET, 0, timeout=WAIT).connect()
        with ControllerClient(controller.address, SECRET, 0, timeout=WAIT) as good:
            good._sendall(P.encode_json(P.REPORT, {'model': None}), 'REPORT')
            kind, payload = good._read(WAIT, 'the failure')
            assert kind == P.ERROR and 'malformed message' in P.decode_error(payload)
    finally:
        controller.stop()


def test_garbage_from_many_peers_does_not_kill_the_service(services):
    """Fuzz: random bytes, random frames and random HELLOs from unauthenticated peers, and
    random frames from authenticated ones; the service still decides for real workers."""
    service = services(workers=3)
    rng = random.Random(7)
    for i in range(60):
        sock, reader, nonce = raw(service)
        if i % 3 == 2:          # authenticated first, then garbage
            assert hello(sock, reader, nonce, i % 3)[0] == P.B_WELCOME
        choice = i % 4
        if choice == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        elif choice == 1:
            data = P.frame(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))))
        elif choice == 2:
            data = P.frame(bytes([P.REPORT]) + bytes(rng.randrange(256)
                                                     for _ in range(rng.randrange(0, 40))))
        else:
            data = P.encode_hello(rng.randrange(1 << 32), secrets.token_bytes(32))
        try:
            sock.sendall(data)
        except OSError:
            pass
        sock.close()
    clients = [worker(service, r) for r in range(3)]
    clients[0]._sendall(P.encode_json(P.REPORT, {'model': [0.0, 0.001]}), 'REPORT')
    clients[1]._sendall(P.encode_json(P.REPORT, {'model': [0.0, 0.001]}), 'REPORT')
    answer = clients[2].report((0.0, 0.001))
    assert answer['round'] == 1 and sum(answer['sizes']) == 64
    for c in clients:
        c.leave()


def test_lockstep_waits_for_the_round_and_a_worker_that_leaves_ends_it(services):
    service = services(workers=3)
    w = [worker(service, r, timeout=0.3) for r in range(3)]
    with pytest.raises(BalanceTimeout, match=r'balance service at .* \(worker 0\): no answer '
                                             r'within 0.3 s while waiting for the decision'):
        w[0].report((0.0, 0.001))          # the others have not reported
    w[1]._sendall(P.encode_json(P.REPORT, {'model': [0.0, 0.001]}), 'REPORT')
    w[2].leave()                           # the last one leaves: the round is complete
    kind, payload = w[1]._read(WAIT, 'the decision')
    assert kind == P.DECISION and P.decode_json(payload, P.DECISION)['round'] == 1
    w[1].leave()
    w[0].close()


def test_without_lockstep_a_report_is_answered_at_once(services):
    service = services(lockstep=False)
    w0, w1 = worker(service, 0), worker(service, 1)
    assert w0.report((0.0, 0.001)) == {'sizes': [32, 32], 'version': 0, 'round': 0}
    assert w1.report((0.0, 0.003)) == {'sizes': [48, 16], 'version': 1, 'round': 1}
    w0.leave()
    w1.leave()


def test_a_stopped_service_is_an_error_or_a_lost_connection(services):
    service = services()
    w0 = worker(service, 0)
    host, port = service.address
    service.stop()
    try:
        answer = w0.report(None)
    except BalanceLost:
        pass
    else:
        assert answer == {'error': 'balance service at %s:%d stopped' % (host, port)}
    with pytest.raises(BalanceError, match='cannot connect after'):
        BalanceClient((host, port), SECRET, 0, timeout=0.2).connect()


def test_finish_ends_the_service_when_the_last_worker_has_left(services):
    """Worker 0's BatchBalancer.close: the service outlives the workers still training, then
    releases its thread and port; a lost connection counts as leaving."""
    service = services(workers=3)
    w = [worker(service, r) for r in range(3)]
    service.finish()
    w[0].leave()
    w[1].close()                           # lost, not left
    assert service._thread.is_alive()
    assert w[2].report((0.0, 0.001))['round'] == 1     # still deciding for the last one
    w[2].leave()
    service._thread.join(WAIT)
    assert not service._thread.is_alive()
    with pytest.raises(BalanceError, match='cannot connect after'):
        BalanceClient(service.address, SECRET, 0, timeout=0.2).connect()


def test_finish_after_every_worker_left_stops_at_once(services):
    service = services(workers=2)
    for w in [worker(service, r) for r in range(2)]:
        w.leave()
    deadline = time.monotonic() + WAIT
    while service._active:                 # the service thread has seen both leave
        assert time.monotonic() < deadline
        time.sleep(0.01)
    service.finish()
    service._thread.join(WAIT)
    assert not service._thread.is_alive()
