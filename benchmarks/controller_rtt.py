"""Round-trip latency of the synchronization controller (CLOCK sent -> RELEASE received).

The controller runs as a thread of this process, as it does inside an MXNet
server; each client is a separate process (so clients do not share a GIL
with each other or with the server) doing ``--n`` CLOCK round trips with a
staleness so large that no worker is ever held.  The baseline is a bare
Python TCP ping-pong measured the same way: a ``selectors`` echo thread
answering each 13-byte request with a 37-byte reply (the sizes of CLOCK and
RELEASE frames), so the difference is the cost of the protocol and policy.

Usage::

    OMP_NUM_THREADS=1 python -m benchmarks.controller_rtt [--clients 1,16] [--n 2000]

Prints a markdown table; latencies are microseconds over all round trips
of all clients (after ``--warmup`` untimed ones per client).
"""
import argparse
import multiprocessing as mp
import os
import selectors
import socket
import statistics
import sys
import threading
import time

from mxnet_ssp.controller.client import ControllerClient
from mxnet_ssp.controller.server import ControllerServer
from mxnet_ssp.core.sync import SyncPolicy

SECRET = b'benchmark-secret'
REQUEST = b'\x00\x00\x00\x09\x04' + bytes(8)        # the size of a CLOCK frame
REPLY = b'\x00\x00\x00\x21\x05' + bytes(32)         # the size of a RELEASE frame
HUGE = 10 ** 9


def percentile(sorted_values, q):
    """Nearest-rank percentile of a sorted list."""
    idx = min(len(sorted_values) - 1, max(0, int(round(q / 100.0 * len(sorted_values))) - 1))
    return sorted_values[idx]


# -- bare ping-pong -----------------------------------------------------------------

class EchoServer(threading.Thread):
    """selectors loop answering every complete request with REPLY."""

    def __init__(self):
        super().__init__(daemon=True)
        self.listener = socket.create_server(('127.0.0.1', 0), backlog=128)
        self.listener.setblocking(False)
        self.address = self.listener.getsockname()
        self.wake_r, self.wake_w = socket.socketpair()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.sel.register(self.wake_r, selectors.EVENT_READ, 'wake')
        self.pending = {}

    def run(self):
        while True:
            for key, _ in self.sel.select():
                if key.data == 'wake':
                    return
                if key.data is None:
                    conn, _ = self.listener.accept()
                    conn.setblocking(False)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self.pending[conn] = 0
                    self.sel.register(conn, selectors.EVENT_READ, conn)
                    continue
                conn = key.data
                data = conn.recv(65536)
                if not data:
                    self.sel.unregister(conn)
                    conn.close()
                    del self.pending[conn]
                    continue
                got = self.pending[conn] + len(data)
                replies, self.pending[conn] = divmod(got, len(REQUEST))
                if replies:
                    conn.send(REPLY * replies)

    def stop(self):
        self.wake_w.send(b'x')
        self.join()


def ping_client(address, n, warmup, barrier, out):
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    want = len(REPLY)
    samples = []
    barrier.wait()
    for i in range(warmup + n):
        t0 = time.perf_counter_ns()
        sock.sendall(REQUEST)
        got = 0
        while got < want:
            got += len(sock.recv(65536))
        t1 = time.perf_counter_ns()
        if i >= warmup:
            samples.append(t1 - t0)
    sock.close()
    out.send(samples)


# -- controller -----------------------------------------------------------------------

def clock_client(address, rank, n, warmup, barrier, out):
    client = ControllerClient(address, SECRET, rank, timeout=60.0).connect()
    samples = []
    barrier.wait()
    for t in range(1, warmup + n + 1):
        t0 = time.perf_counter_ns()
        client.clock(t)
        t1 = time.perf_counter_ns()
        if t > warmup:
            samples.append(t1 - t0)
    client.leave()
    out.send(samples)


def run_clients(ctx, target, args_for, clients):
    barrier = ctx.Barrier(clients)
    pipes, procs = [], []
    for rank in range(clients):
        recv_end, send_end = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=target, args=args_for(rank) + (barrier, send_end))
        proc.start()
        pipes.append(recv_end)
        procs.append(proc)
    samples = []
    for recv_end in pipes:
        samples.extend(recv_end.recv())
    for proc in procs:
        proc.join(60)
        if proc.exitcode != 0:
            raise RuntimeError('client process failed with exit code %s' % proc.exitcode)
    return sorted(s / 1000.0 for s in samples)


def summarize(samples):
    return {'median': statistics.median(samples), 'p99': percentile(samples, 99),
            'count': len(samples)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--clients', default='1,16',
                        help='comma-separated client process counts (default 1,16)')
    parser.add_argument('--n', type=int, default=2000, help='timed round trips per client')
    parser.add_argument('--warmup', type=int, default=200, help='untimed round trips first')
    args = parser.parse_args(argv)
    # fork: children inherit the imported modules instead of importing MXNet again
    ctx = mp.get_context('fork')
    rows = []
    for clients in [int(c) for c in args.clients.split(',')]:
        echo = EchoServer()
        echo.start()
        base = run_clients(ctx, ping_client, lambda r: (echo.address, args.n, args.warmup),
                           clients)
        echo.stop()

        policy = SyncPolicy(clients, HUGE, HUGE)
        server = ControllerServer(policy, SECRET, timeout=60.0).start()
        try:
            ctrl = run_clients(ctx, clock_client,
                               lambda r: (server.address, r, args.n, args.warmup), clients)
            failure = server.failure
        finally:
            server.stop()
        if failure:
            raise RuntimeError('controller failed: %s' % failure)
        b, c = summarize(base), summarize(ctrl)
        rows.append((clients, b, c))

    print('Round trip on loopback, %d timed round trips per client after %d warm-up, '
          'microseconds (os.cpu_count() = %s, Python %s):'
          % (args.n, args.warmup, os.cpu_count(), sys.version.split()[0]))
    print()
    print('| client processes | bare TCP ping-pong median | p99 '
          '| controller CLOCK->RELEASE median | p99 | median overhead |')
    print('|---:|---:|---:|---:|---:|---:|')
    for clients, b, c in rows:
        print('| %d | %.1f | %.1f | %.1f | %.1f | %+.1f |'
              % (clients, b['median'], b['p99'], c['median'], c['p99'],
                 c['median'] - b['median']))


if __name__ == '__main__':
    main()
