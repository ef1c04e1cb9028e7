"""Integration-test worker for slot mode: sender, staleness and backups on the servers.

Key 0 carries marker gradients (worker m's step t adds exactly 1 at position
m * T + t - 1 with lr = 1 under SGD), so the sum of the weights a worker pulls
is the number of updates applied to key 0 when it pulled (the version it
computes its next gradient on).  Key 1 carries a gradient that depends on the
pulled weights, as real gradients do.  Each worker records, per step, the
version it used, the exact gradients it pushed and the weights it pulled after,
so a test can replay the servers' recorded order in the NumPy reference.

Writes ``<out>/slot-<rank>.jsonl``.
"""
import argparse
import json
import os
import signal
import time

from mxnet_ssp._hooks import skip_optional_mxnet_imports

# MXNet without its optional scikit-learn and SciPy imports, as in mxnet-ssp's training script
# (about 1.3 s of CPU less per worker: the test suite's time); a user's plain import is
# tested by marker_job.py's other import orders
skip_optional_mxnet_imports()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--store', default='dist_async')
    p.add_argument('--rule', default='sgd',
                   choices=['sgd', 'sgd-momentum', 'sasgd', 'sasgd-average', 'dcasgd',
                            'dcasgd-a-momentum', 'dcasgd-a-multiverso'])
    p.add_argument('--iters', type=int, default=8)
    p.add_argument('--splits', type=int, default=None)
    p.add_argument('--staleness', default=None)
    p.add_argument('--slow-rank', type=int, default=-1)
    p.add_argument('--slow-seconds', type=float, default=0.0)
    p.add_argument('--turns', action='store_true',
                   help='workers take turns (0, 1, ..., a barrier between turns): the servers '
                        'see round-robin order, the same in every run')
    p.add_argument('--die-rank', type=int, default=-1,
                   help='this rank kills itself (SIGKILL) before its step --die-at')
    p.add_argument('--die-at', type=int, default=-1)
    p.add_argument('--out', required=True)
    return p.parse_args()


def make_optimizer(rule):
    import mxnet as mx
    from mxnet_ssp import optim
    common = dict(learning_rate=1.0 if rule == 'sgd' else 0.5, rescale_grad=1.0, wd=0.0)
    if rule == 'sgd':
        return mx.optimizer.SGD(**common)
    if rule == 'sgd-momentum':
        return mx.optimizer.SGD(momentum=0.5, **common)
    if rule == 'sasgd':
        return optim.StalenessAwareSGD(momentum=0.0, **common)
    if rule == 'sasgd-average':
        return optim.StalenessAwareSGD(momentum=0.9, staleness_lr='average', **common)
    if rule == 'dcasgd':
        return optim.DCASGD(lamda=0.5, **common)
    if rule == 'dcasgd-a-multiverso':
        return optim.DCASGD(lamda=0.5, adaptive=True, momentum=0.5,
                            adaptive_reading='multiverso', **common)
    return optim.DCASGD(lamda=0.5, adaptive=True, momentum=0.5, **common)


def main():
    args = parse_args()
    import mxnet as mx
    import mxnet_ssp
    settings = {}
    if args.splits is not None:
        settings['splits'] = args.splits
    if args.staleness is not None:
        settings['staleness'] = args.staleness
    kv = mxnet_ssp.create(args.store, staleness_log=True, **settings)
    rank, nworkers, T = kv.rank, kv.num_workers, args.iters
    kv.set_optimizer(make_optimizer(args.rule))
    w0 = mx.nd.zeros(nworkers * T)
    w1 = mx.nd.ones(6) * 0.5
    kv.broadcast(0, mx.nd.zeros(nworkers * T), out=w0)
    kv.broadcast(1, mx.nd.ones(6) * 0.5, out=w1)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, 'slot-%d.jsonl' % rank), 'w', buffering=1)
    for t in range(1, T + 1):
        if rank == args.die_rank and t == args.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        for turn in range(nworkers if args.turns else 1):
            if not args.turns or turn == rank:
                step(args, kv, log, rank, nworkers, T, t, w0, w1)
            if args.turns:
                kv._barrier()                      # the next worker's turn
    log.close()


def step(args, kv, log, rank, nworkers, T, t, w0, w1):
    """Worker `rank`'s step t: push both keys' gradients, pull, record."""
    import mxnet as mx
    if rank == args.slow_rank:
        time.sleep(args.slow_seconds)              # emulated slow compute
    used = w0.asnumpy().sum()
    g0 = mx.nd.zeros(nworkers * T)
    g0[rank * T + t - 1] = -1.0
    g1 = mx.nd.sin(w1 * (rank + 1) + t)
    g1_sent = g1.asnumpy().tolist()
    kv.pushpull(0, g0, out=w0)
    kv.pushpull(1, g1, out=w1)
    log.write(json.dumps({'rank': rank, 'step': t, 'version_used': float(used),
                          'g1': g1_sent, 'w0': w0.asnumpy().tolist(),
                          'w1': w1.asnumpy().tolist(), 'slot_mode': kv.slot_mode}) + '\n')


if __name__ == '__main__':
    main()
