"""Server-side update cost per MB: plain SGD against lr/staleness and DC-ASGD-a.

Drives mxnet-ssp's server updater (:class:`mxnet_ssp.server.ServerOptimizer`)
in one process exactly as MXNet's server calls it: ``update(key, stored,
received)`` with 1-D float32 arrays, one call per pushed gradient, the
senders taking turns.  Plain SGD runs as a plain store does (the model once,
no sender); the worker-aware rules run in slot mode (one slot per worker,
the canonical weight, staleness book-keeping, backups).  Prints a markdown
table of milliseconds per MB of gradient.

    OMP_NUM_THREADS=1 python -m benchmarks.update_cost [--mb 1,16] [--workers 4] [--n 200]
"""
import argparse
import time

import mxnet as mx

from mxnet_ssp import optim
from mxnet_ssp.server import ServerOptimizer

RULES = {
    'SGD (plain store)': (lambda: mx.optimizer.SGD(learning_rate=0.01, rescale_grad=1.0), False),
    'SGD momentum 0.9 (plain store)': (
        lambda: mx.optimizer.SGD(learning_rate=0.01, momentum=0.9, rescale_grad=1.0), False),
    'lr / tau, momentum 0.9 (slot mode)': (
        lambda: optim.StalenessAwareSGD(learning_rate=0.01, momentum=0.9, rescale_grad=1.0), True),
    'DC-ASGD-a, momentum 0.9 (slot mode)': (
        lambda: optim.DCASGD(learning_rate=0.01, lamda=0.5, adaptive=True, momentum=0.9,
                             rescale_grad=1.0), True),
}


def measure(make, slots, size, workers, n):
    server = ServerOptimizer(make(), num_workers=workers, slots=slots)
    stored = [mx.nd.zeros(size) for _ in range(workers if slots else 1)]
    grads = [mx.nd.random.uniform(-1, 1, shape=size) for _ in range(workers)]
    mx.nd.waitall()

    def push(i):
        m = i % workers
        if slots:
            server.update(m, stored[m], grads[m], None)          # key 0 of worker m
        else:
            server.update(0, stored[0], grads[m], None)

    for i in range(2 * workers):                                 # warm-up, state creation
        push(i)
    mx.nd.waitall()
    start = time.perf_counter()
    for i in range(n):
        push(i)
    mx.nd.waitall()
    return (time.perf_counter() - start) / n


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--mb', default='1,16', help='gradient sizes in MB, comma-separated')
    p.add_argument('--workers', type=int, default=4)
    p.add_argument('--n', type=int, default=200, help='timed updates per measurement')
    args = p.parse_args()
    sizes = [float(s) for s in args.mb.split(',')]
    print('| rule | ' + ' | '.join('ms/MB at %g MB' % s for s in sizes) + ' | server memory |')
    print('|---|' + '---:|' * len(sizes) + '---|')
    for name, (make, slots) in RULES.items():
        cells = []
        for mb in sizes:
            size = int(mb * 2 ** 20 / 4)
            per_update = measure(make, slots, size, args.workers, args.n)
            cells.append('%.3f' % (1e3 * per_update / mb))
        memory = ('model x (%d slots + 1 canonical) + state' % args.workers if slots
                  else 'model x 1 + state')
        print('| %s | %s | %s |' % (name, ' | '.join(cells), memory))


if __name__ == '__main__':
    main()
