"""Integration-test worker: learning-rate changes and optimizer-state save/resume on the servers.

``--mode lr``: gluon.Trainer on one scalar weight with a constant gradient 1,
so each step moves the weight by exactly the learning rate the servers used.
Runs with an lr_scheduler, then ``trainer.set_learning_rate``; writes the
weight after every step to ``<out>/lr-<rank>.json``.

``--mode full`` / ``--mode resume``: the raw store API with deterministic
gradients g_t = sin(3 w + t) (they depend on the weights, like real ones) on
``--keys`` parameters (one per server with 2 servers: MXNet places key k on
server (k * 9973) % servers).  ``full`` runs K + 1 steps, saving each worker's
pulled weights and the servers' optimizer state after step K; ``resume``
starts a new job from them and runs step K + 1 only.  With ``--no-load`` it
does the same without loading the servers' state: the control, which differs
from ``full`` only by the missing state.

With several workers the workers take turns inside each step (worker 0
pushes and pulls, then worker 1, ...; a barrier between turns), so the
servers see the same order in every job and the results are exact.  Each
worker writes the weights after step K + 1 to ``<out>/<name>-<rank>.json``
(name: full, resume or resume-noload), with, for ``full``, what it pushed and
pulled at every step.
"""
import argparse
import json
import os

import numpy as np


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--mode', choices=['lr', 'full', 'resume'], required=True)
    p.add_argument('--store', default='dist_async')
    p.add_argument('--rule', default='sgd-momentum')
    p.add_argument('--k', type=int, default=4)
    p.add_argument('--keys', type=int, default=1)
    p.add_argument('--staleness', default=None)
    p.add_argument('--no-load', action='store_true', help='resume without the saved state')
    p.add_argument('--out', required=True)
    return p.parse_args()


def make_optimizer(rule):
    import mxnet as mx
    from mxnet_ssp import optim
    if rule == 'sgd-momentum':
        return mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, rescale_grad=1.0)
    if rule == 'dcasgd-a-momentum':
        return optim.DCASGD(learning_rate=0.1, lamda=0.5, adaptive=True, momentum=0.9,
                            rescale_grad=1.0)
    if rule == 'sasgd-average':
        return optim.StalenessAwareSGD(learning_rate=0.1, momentum=0.9, rescale_grad=1.0,
                                       staleness_lr='average', staleness_window=3)
    return optim.StalenessAwareSGD(learning_rate=0.1, momentum=0.9, rescale_grad=1.0)


def run_lr(args):
    import mxnet as mx
    import mxnet_ssp
    from mxnet import gluon
    kv = mxnet_ssp.create(args.store)
    w = gluon.Parameter('w', shape=(1,), init=mx.init.Zero())
    w.initialize()
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    trainer = gluon.Trainer([w], 'sgd', {'learning_rate': 1.0, 'lr_scheduler': sched,
                                         'rescale_grad': 1.0}, kvstore=kv)
    values = []
    for step in range(1, 10):
        if step == 7:
            trainer._optimizer.lr_scheduler = None       # hand over to a fixed rate
            trainer.set_learning_rate(0.0)
        with mx.autograd.record():
            loss = w.data().sum()               # d loss / d w = 1
        loss.backward()
        trainer.step(1)
        values.append(float(w.data().asscalar()))
    with open(os.path.join(args.out, 'lr-%d.json' % kv.rank), 'w') as f:
        json.dump({'weights': values}, f)


def run_resume(args):
    import mxnet as mx
    import mxnet_ssp
    settings = {} if args.staleness is None else {'staleness': args.staleness}
    kv = mxnet_ssp.create(args.store, **settings)
    rank, workers = kv.rank, kv.num_workers
    kv.set_optimizer(make_optimizer(args.rule))
    keys = list(range(args.keys))
    starts = [np.linspace(-1, 1, 5).astype(np.float32) + k for k in keys]
    prefix = os.path.join(args.out, 'server-state')
    saved = os.path.join(args.out, 'weights-k-%d.npy' % rank)
    if args.mode == 'resume':
        starts = list(np.load(saved))             # what this worker pulled after step K
    ws = [mx.nd.array(v) for v in starts]
    for k in keys:
        # the servers take rank 0's value (a plain optimizer keeps no weights of its own)
        kv.broadcast(k, mx.nd.array(starts[k]), out=ws[k])
    if args.mode == 'resume':
        if not args.no_load:
            kv.load_optimizer_states(prefix)      # slot mode: canonical weights and backups
        for k in keys:
            ws[k][:] = starts[k]                  # the broadcast pulled rank 0's weights
        steps = [args.k + 1]
    else:
        steps = range(1, args.k + 2)
    log = []
    for t in steps:
        for turn in range(workers):
            if turn == rank:
                grads = [mx.nd.sin(3 * w + t) for w in ws]
                record = {'step': t, 'grads': [g.asnumpy().tolist() for g in grads]}
                for k in keys:
                    kv.pushpull(k, grads[k], out=ws[k])
                record['pulled'] = [w.asnumpy().tolist() for w in ws]
                log.append(record)
            if workers > 1:
                kv._barrier()                     # the next worker's turn
        if args.mode == 'full' and t == args.k:
            np.save(saved, np.stack([w.asnumpy() for w in ws]))
            kv.save_optimizer_states(prefix)      # rank 0 asks; after its pushes are applied
            if workers > 1:
                kv._barrier()
    name = args.mode + ('-noload' if args.no_load else '')
    with open(os.path.join(args.out, '%s-%d.json' % (name, rank)), 'w') as f:
        json.dump({'rank': rank, 'weights': [w.asnumpy().tolist() for w in ws],
                   'slot_mode': kv.slot_mode, 'steps': log}, f)


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.mode == 'lr':
        run_lr(args)
    else:
        run_resume(args)


if __name__ == '__main__':
    main()
