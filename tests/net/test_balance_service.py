"""The batch-balancing service (a thread of worker 0) over TCP on loopback: it answers only
authenticated workers, and peers that send garbage, over-long lines, a wrong MAC or a
malformed report neither crash it nor stop it from deciding for the real workers."""
import json
import secrets
import socket

from mxnet_ssp.balance import MAX_LINE, BalancePolicy, BalanceService, _mac

SECRET = secrets.token_bytes(32)


def connect(service):
    sock = socket.create_connection(service.address, timeout=10)
    reader = sock.makefile('rb')
    nonce = bytes.fromhex(json.loads(reader.readline())['nonce'])
    return sock, reader, nonce


def send(sock, obj):
    sock.sendall((json.dumps(obj) + '\n').encode())


def worker(service, rank, secret=SECRET):
    sock, reader, nonce = connect(service)
    send(sock, {'rank': rank, 'mac': _mac(secret, nonce, rank)})
    return sock, reader, json.loads(reader.readline())


def closed(sock, reader):
    """True when the service ended the connection (after an optional error line); a reset
    (the service closed with our bytes unread) is an end too."""
    try:
        line = reader.readline()
        if line and 'error' in json.loads(line):
            line = reader.readline()
    except ConnectionResetError:
        line = b''
    sock.close()
    return line == b''


def test_only_authenticated_well_formed_reports_count():
    service = BalanceService(BalancePolicy(2, 64, 1, 64, threshold=0.05), SECRET,
                             lockstep=True).start()
    try:
        # garbage, an over-long line, a wrong secret, a rank outside the job: refused
        for payload in (b'\x00\xff garbage\n', b'x' * (2 * MAX_LINE) + b'\n'):
            sock, reader, _ = connect(service)
            sock.sendall(payload)
            assert closed(sock, reader)
        sock, reader, first = worker(service, 0, secret=secrets.token_bytes(32))
        assert first == {'error': 'authentication failed'} and closed(sock, reader)
        sock, reader, nonce = connect(service)
        send(sock, {'rank': 7, 'mac': _mac(SECRET, nonce, 7)})
        assert json.loads(reader.readline()) == {'error': 'authentication failed'}
        sock.close()
        # an authenticated worker whose report is malformed loses its connection only
        sock, reader, hello = worker(service, 1)
        assert hello['sizes'] == [32, 32]
        send(sock, {'op': 'report', 'model': 'not a model'})
        assert closed(sock, reader)
        # the real workers: worker 1 three times slower per sample; one round decides
        s0, r0, _ = worker(service, 0)
        s1, r1, _ = worker(service, 1)
        send(s0, {'op': 'report', 'model': [0.0, 0.001]})
        send(s1, {'op': 'report', 'model': [0.0, 0.003]})
        answers = [json.loads(r0.readline()), json.loads(r1.readline())]
        assert answers[0] == answers[1] and answers[0]['sizes'] == [48, 16]
        for sock in (s0, s1):
            send(sock, {'op': 'leave'})
            sock.close()
    finally:
        service.stop()
