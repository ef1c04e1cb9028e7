"""The synchronization controller under many workers: decisions per second and release latency.

A load generator drives the real :class:`mxnet_ssp.controller.server.ControllerServer` over TCP on
127.0.0.1 with ``--ranks`` authenticated fake workers, multiplexed on non-blocking sockets in
``--procs`` processes (so 1024 ranks need no 1024 processes).  Each fake worker does what a
worker's store does at the end of a step: it sends CLOCK t and waits for RELEASE, then (after
``1 / --rate`` seconds of "training", or at once with ``--rate 0``) sends CLOCK t + 1.  The
staleness is SSP's s = ``--staleness``, so the policy holds and releases workers as in a job.

Latency is measured per CLOCK: from just before it is sent to the moment its RELEASE is read,
so it includes the time a worker is held by the policy.  ``--staleness`` large (the default)
makes every release immediate: then the latency is the controller's own.

With ``--update-mb M`` a thread of this process applies SGD-with-momentum updates to an M MB
model of ``--keys`` parameters in a loop, one parameter at a time as MXNet's server calls its
updater (MXNet's fused ``sgd_mom_update`` and a wait per parameter).
``--placement thread`` runs the controller as a thread of this process too (sharing its GIL
with the busy server, ``MXNET_SSP_CONTROLLER=thread``); ``process`` starts it the way a server
does by default, as ``python -m mxnet_ssp.controller.process``.

Usage (from the checkout root)::

    OMP_NUM_THREADS=1 python -m benchmarks.controller_load --ranks 256,1024 --seconds 10
    OMP_NUM_THREADS=1 python -m benchmarks.controller_load --ranks 1024 --rate 10 --update-mb 0,100

Prints one markdown row per (ranks, update-mb): CLOCKs handled per second, release latency
median and p99 (ms), and the updates per second the busy thread made.
"""
import argparse
import multiprocessing as mp
import os
import secrets
import selectors
import socket
import statistics
import threading
import time

from mxnet_ssp.controller import process as controller_process, protocol as P
from mxnet_ssp.server import discovery

HUGE = 10 ** 9


def percentile(sorted_values, q):
    """Nearest-rank percentile of a sorted list."""
    idx = min(len(sorted_values) - 1, max(0, int(round(q / 100.0 * len(sorted_values))) - 1))
    return sorted_values[idx]


class _Fake:
    """One fake worker's connection (generator side)."""

    __slots__ = ('rank', 'sock', 'reader', 'state', 'clock', 'sent_at', 'due', 'out')

    def __init__(self, rank, sock):
        self.rank = rank
        self.sock = sock
        self.reader = P.FrameReader()
        self.state = 'challenge'
        self.clock = 0
        self.sent_at = None
        self.due = None           # when to send the next CLOCK (paced mode)
        self.out = b''


def _handshake(fake, secret):
    """CHALLENGE, HELLO, WELCOME on the blocking socket of `fake`."""
    payloads = []
    while not payloads:
        payloads = fake.reader.feed(fake.sock.recv(4096))
    _, nonce = P.decode_challenge(payloads[0])
    fake.sock.sendall(P.encode_hello(fake.rank, P.hello_mac(secret, nonce, fake.rank)))
    payloads = []
    while not payloads:
        payloads = fake.reader.feed(fake.sock.recv(4096))
    if payloads[0][0] != P.WELCOME:
        raise SystemExit('rank %d: no WELCOME: %r' % (fake.rank, payloads[0][:80]))
    fake.state = 'ready'
    fake.due = None


def generator(address, secret, ranks, rate, start_at, stop_at, results):
    """Drive the fake workers `ranks` until `stop_at` (time.time()); put latencies in `results`."""
    sel = selectors.DefaultSelector()
    fakes = []
    for rank in ranks:            # connect and authenticate one by one, as workers start
        sock = socket.create_connection(address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fake = _Fake(rank, sock)
        _handshake(fake, secret)
        sock.setblocking(False)
        fakes.append(fake)
        sel.register(sock, selectors.EVENT_READ, fake)
    ready = len(fakes)
    period = 1.0 / rate if rate > 0 else 0.0
    latencies = []
    errors = []

    def send(fake, data):
        fake.out += data
        try:
            sent = fake.sock.send(fake.out)
        except BlockingIOError:
            sent = 0
        fake.out = fake.out[sent:]

    def send_clock(fake, now):
        fake.clock += 1
        fake.sent_at = time.perf_counter()
        fake.due = None
        send(fake, P.encode_clock(fake.clock))

    while True:
        now = time.time()
        if now >= stop_at:
            break
        timeout = 0.05
        if period:
            dues = [f.due for f in fakes if f.due is not None]
            if dues:
                timeout = max(0.0, min(min(dues) - now, timeout))
        for key, _ in sel.select(timeout):
            fake = key.data
            try:
                data = fake.sock.recv(65536)
            except BlockingIOError:
                continue
            if not data:
                errors.append('rank %d: controller closed the connection' % fake.rank)
                sel.unregister(fake.sock)
                continue
            for payload in fake.reader.feed(data):
                kind = payload[0]
                if kind == P.RELEASE:
                    t = time.perf_counter()
                    if time.time() >= start_at:
                        latencies.append(t - fake.sent_at)
                    fake.due = time.time() + period
                    if not period:
                        send_clock(fake, t)
                elif kind == P.ERROR:
                    errors.append('rank %d: %s' % (fake.rank, P.decode_error(payload)))
        now = time.time()
        if now >= start_at:
            for fake in fakes:
                if fake.clock == 0 and fake.due is None:
                    fake.due = start_at        # everyone starts together
                if fake.state == 'ready' and fake.due is not None and fake.due <= now:
                    send_clock(fake, now)
    for fake in fakes:
        try:
            fake.sock.setblocking(True)
            fake.sock.sendall(fake.out + P.LEAVE_FRAME)
        except OSError:
            pass
    for fake in fakes:
        fake.sock.close()
    results.put((latencies, errors, ready))


def busy_server(mb, keys, stop, counter):
    """Apply SGD-momentum updates to an `mb` MB model of `keys` parameters, one key at a time
    as MXNet's server calls its updater, until `stop` is set; count the whole-model steps."""
    from mxnet import ndarray as nd
    n = max(1, int(mb * 2 ** 20 // 4 // keys))
    params = [(nd.ones(n), nd.ones(n) * 1e-6, nd.zeros(n)) for _ in range(keys)]
    while not stop.is_set():
        for weight, grad, mom in params:
            nd.sgd_mom_update(weight, grad, mom, lr=0.01, momentum=0.9, out=weight)
            weight.wait_to_read()
        counter[0] += 1


def measure(ranks, procs, seconds, rate, staleness, update_mb, warmup, placement, keys):
    secret = secrets.token_bytes(32)
    settings = {'num_workers': ranks, 's_lower': staleness, 's_upper': staleness,
                'mode': 'bounded', 'timeout': 600.0, 'host': '127.0.0.1', 'secret': secret.hex(),
                'metrics_path': None}
    if placement == 'thread':         # what a server does with MXNET_SSP_CONTROLLER=thread
        server = controller_process.start(settings)
        address = server.address
    else:                             # ... and by default
        server, address = discovery._start_process(settings)
    stop, counter, busy = threading.Event(), [0], None
    if update_mb:
        busy = threading.Thread(target=busy_server, args=(update_mb, keys, stop, counter),
                                daemon=True)
        busy.start()
    ctx = mp.get_context('spawn')
    results = ctx.Queue()
    start_at = time.time() + warmup
    stop_at = start_at + seconds
    chunks = [list(range(ranks))[i::procs] for i in range(procs)]
    workers = [ctx.Process(target=generator, args=(address, secret, chunk, rate,
                                                   start_at, stop_at, results))
               for chunk in chunks]
    for w in workers:
        w.start()
    counted_from = None
    while time.time() < start_at:
        time.sleep(0.01)
    counted_from = counter[0]
    outs = [results.get(timeout=seconds + warmup + 120) for _ in workers]
    updates = counter[0] - counted_from
    for w in workers:
        w.join(timeout=60)
    stop.set()
    if busy is not None:
        busy.join(timeout=60)
    if placement == 'thread':
        failure = server.failure
        server.stop()
    else:
        server.stdin.close()            # the controller process ends at end of file
        failure = None if server.wait(timeout=60) == 0 else 'exit %s' % server.returncode
    latencies = sorted(x for lat, _, _ in outs for x in lat)
    errors = [e for _, errs, _ in outs for e in errs]
    ready = sum(r for _, _, r in outs)
    if errors or ready != ranks or failure:
        raise SystemExit('load generator: %d/%d ranks connected; errors: %s; controller: %s'
                         % (ready, ranks, errors[:3], failure))
    return {'ranks': ranks, 'update_mb': update_mb, 'placement': placement, 'clocks_per_s': len(latencies) / seconds,
            'median_ms': 1e3 * statistics.median(latencies),
            'p99_ms': 1e3 * percentile(latencies, 99), 'updates_per_s': updates / seconds,
            'n': len(latencies)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--ranks', default='256,1024', help='comma-separated numbers of fake workers')
    p.add_argument('--procs', type=int, default=4, help='generator processes')
    p.add_argument('--seconds', type=float, default=10.0, help='measured seconds per row')
    p.add_argument('--warmup', type=float, default=8.0,
                   help='seconds to connect and settle before measuring')
    p.add_argument('--rate', type=float, default=0.0,
                   help='iterations per second per fake worker (0: as fast as released)')
    p.add_argument('--staleness', type=int, default=HUGE, help='SSP threshold s')
    p.add_argument('--trials', type=int, default=3, help='measurements per row')
    p.add_argument('--keys', type=int, default=160,
                   help='parameters (keys) the busy model is split into')
    p.add_argument('--placement', default='thread,process',
                   help='comma-separated: the controller as a thread of this process, or in '
                        'its own process (MXNET_SSP_CONTROLLER)')
    p.add_argument('--update-mb', default='0',
                   help='comma-separated model sizes (MB) a busy thread updates in the '
                        "controller's process (0: none)")
    args = p.parse_args(argv)
    print('| ranks | controller | model updated by the server (MB) | CLOCKs/s '
          '| release median (ms) | release p99 (ms), per trial | p99 median (ms) '
          '| updates/s of the busy thread |')
    print('|---:|---|---:|---:|---:|---|---:|---:|')
    for ranks in (int(x) for x in args.ranks.split(',')):
        for placement in args.placement.split(','):
            for mb in (float(x) for x in args.update_mb.split(',')):
                rows = [measure(ranks, args.procs, args.seconds, args.rate, args.staleness, mb,
                                args.warmup, placement, args.keys)
                        for _ in range(args.trials)]
                print('| %d | %s | %g | %.0f | %.2f | %s | %.2f | %.1f |'
                      % (ranks, placement, mb,
                         statistics.median(r['clocks_per_s'] for r in rows),
                         statistics.median(r['median_ms'] for r in rows),
                         ', '.join('%.1f' % r['p99_ms'] for r in rows),
                         statistics.median(r['p99_ms'] for r in rows),
                         statistics.median(r['updates_per_s'] for r in rows)), flush=True)
    return 0


if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    raise SystemExit(main())
