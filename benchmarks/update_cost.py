"""Server-side update cost per MB: plain SGD against lr/staleness and DC-ASGD-a.

Drives mxnet-ssp's server updater (:class:`mxnet_ssp.server.updater.ServerOptimizer`)
in one process exactly as MXNet's server calls it: ``update(key, stored,
received)`` with 1-D float32 arrays, one call per pushed gradient, the
senders taking turns.  Plain SGD runs as a plain store does (the model once,
no sender); the worker-aware rules run in slot mode (one slot per worker,
the canonical weight, staleness book-keeping, backups).  Prints a markdown
table of milliseconds per MB of gradient.

With ``--trials N`` every rule is measured N times, the rules taking turns
within each trial (so that load from other work hits them alike); a cell is
then the median of the trials and their range, and a last table gives each
rule's ratio to SGD with momentum on MXNet's operator per trial (both measured in the same
trial; the servers' own SGD runs as NumPy passes: its own row).

    OMP_NUM_THREADS=1 python -m benchmarks.update_cost [--mb 1,16] [--workers 4] [--n 200]
                                                       [--trials 3] [--rules DC-ASGD]
"""
import argparse
import time

import mxnet as mx

from mxnet_ssp import optim
from mxnet_ssp.server.updater import ServerOptimizer

def _kernels_only(opt):
    """DC-ASGD on MXNet's kernels, as on a GPU (CPU arrays otherwise take NumPy passes)."""
    opt.host_kernels = False
    return opt


def _sgd_momentum():
    return mx.optimizer.SGD(learning_rate=0.01, momentum=0.9, rescale_grad=1.0)


RULES = {
    'SGD (plain store)': (lambda: mx.optimizer.SGD(learning_rate=0.01, rescale_grad=1.0), False),
    'SGD momentum 0.9 (plain store)': (_sgd_momentum, False),
    "SGD momentum 0.9, MXNet's operator (plain store)": (_sgd_momentum, False),
    'lr / tau, momentum 0.9 (slot mode)': (
        lambda: optim.StalenessAwareSGD(learning_rate=0.01, momentum=0.9, rescale_grad=1.0), True),
    'DC-ASGD-a, momentum 0.9 (slot mode)': (
        lambda: optim.DCASGD(learning_rate=0.01, lamda=0.5, adaptive=True, momentum=0.9,
                             rescale_grad=1.0), True),
    'DC-ASGD-a, momentum 0.9, MXNet kernels (slot mode)': (
        lambda: _kernels_only(optim.DCASGD(learning_rate=0.01, lamda=0.5, adaptive=True,
                                           momentum=0.9, rescale_grad=1.0)), True),
    'DC-ASGD-a Multiverso reading, momentum 0.9 (slot mode)': (
        lambda: optim.DCASGD(learning_rate=0.01, lamda=0.5, adaptive=True, momentum=0.9,
                             rescale_grad=1.0, adaptive_reading='multiverso'), True),
}
#: the ratios' baseline: MXNet's own SGD kernel, what every earlier figure compared with (the
#: servers run MXNet's SGD as NumPy passes since 2026-11-26: the row above it)
BASELINE = "SGD momentum 0.9, MXNet's operator (plain store)"
#: ServerOptimizer settings of a row, where not the defaults
SETTINGS = {BASELINE: {'host_updates': False}}


def measure(make, slots, size, workers, n, settings=None):
    server = ServerOptimizer(make(), num_workers=workers, slots=slots, **(settings or {}))
    stored = [mx.nd.zeros(size) for _ in range(workers if slots else 1)]
    grads = [mx.nd.random.uniform(-1, 1, shape=size) for _ in range(workers)]
    mx.nd.waitall()

    def push(i):
        m = i % workers
        if slots:
            server.update_key(m, stored[m], grads[m])          # key 0 of worker m
        else:
            server.update_key(0, stored[0], grads[m])

    for i in range(2 * workers):                                 # warm-up, state creation
        push(i)
    mx.nd.waitall()
    start = time.perf_counter()
    for i in range(n):
        push(i)
    mx.nd.waitall()
    return (time.perf_counter() - start) / n


def _cell(values):
    """'median' of one trial, or 'median [min-max]' of several."""
    values = sorted(values)
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])
    if len(values) == 1:
        return '%.3f' % median
    return '%.3f [%.3f-%.3f]' % (median, values[0], values[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--mb', default='1,16', help='gradient sizes in MB, comma-separated')
    p.add_argument('--workers', type=int, default=4)
    p.add_argument('--n', type=int, default=200, help='timed updates per measurement')
    p.add_argument('--trials', type=int, default=1,
                   help='measurements per cell (median and range), rules taking turns')
    p.add_argument('--rules', default='',
                   help='only the rules whose name contains one of these comma-separated '
                        'words (the SGD momentum baseline is always measured)')
    args = p.parse_args()
    sizes = [float(s) for s in args.mb.split(',')]
    words = [w for w in args.rules.split(',') if w]
    rules = [name for name in RULES
             if name == BASELINE or not words or any(w in name for w in words)]
    times = {(name, mb): [] for name in rules for mb in sizes}     # ms/MB per trial
    for _ in range(args.trials):
        for name in rules:
            make, slots = RULES[name]
            for mb in sizes:
                size = int(mb * 2 ** 20 / 4)
                per_update = measure(make, slots, size, args.workers, args.n,
                                     SETTINGS.get(name))
                times[(name, mb)].append(1e3 * per_update / mb)
    print('| rule | ' + ' | '.join('ms/MB at %g MB' % s for s in sizes) + ' | server memory |')
    print('|---|' + '---:|' * len(sizes) + '---|')
    for name in rules:
        slots = RULES[name][1]
        cells = [_cell(times[(name, mb)]) for mb in sizes]
        memory = ('model x (%d slots + 1 canonical) + state' % args.workers if slots
                  else 'model x 1 + state')
        print('| %s | %s | %s |' % (name, ' | '.join(cells), memory))
    if args.trials > 1:
        print()
        print('| ratio to %s | ' % BASELINE
              + ' | '.join('at %g MB: median (per trial)' % s for s in sizes) + ' |')
        print('|---|' + '---:|' * len(sizes))
        for name in rules:
            if name == BASELINE:
                continue
            cells = []
            for mb in sizes:
                ratios = [t / b for t, b in zip(times[(name, mb)], times[(BASELINE, mb)])]
                cells.append('%s (%s)' % (_cell(ratios).split(' ')[0],
                                          ', '.join('%.2f' % r for r in ratios)))
            print('| %s | %s |' % (name, ' | '.join(cells)))


if __name__ == '__main__':
    main()
