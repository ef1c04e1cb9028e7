"""Integration-test worker: learning-rate changes and optimizer-state save/resume on the servers.

``--mode lr``: gluon.Trainer on one scalar weight with a constant gradient 1,
so each step moves the weight by exactly the learning rate the servers used.
Runs with an lr_scheduler, then ``trainer.set_learning_rate``; writes the
weight after every step to ``<out>/lr-<rank>.json``.

``--mode full`` / ``--mode resume``: the raw store API with deterministic
gradients g_t = sin(3 w + t) (they depend on the weights, like real ones).
``full`` runs K + 1 steps, saving the weights and the servers' optimizer state
after step K; ``resume`` starts a new job from them and runs step K + 1.
Both write the weights after step K + 1 to ``<out>/<mode>.json``.
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
    kv = mxnet_ssp.create(args.store)
    kv.set_optimizer(make_optimizer(args.rule))
    start = np.linspace(-1, 1, 5).astype(np.float32)
    prefix = os.path.join(args.out, 'server-state')
    if args.mode == 'resume':
        start = np.load(os.path.join(args.out, 'weights-k.npy'))
    w = mx.nd.array(start)
    kv.broadcast(0, mx.nd.array(start), out=w)
    if args.mode == 'resume' and not args.no_load:
        kv.load_optimizer_states(prefix)
        steps = [args.k + 1]
    else:
        steps = range(1, args.k + 2)
    for t in steps:
        g = mx.nd.sin(3 * w + t)
        kv.pushpull(0, g, out=w)
        w.wait_to_read()
        if args.mode == 'full' and t == args.k:
            np.save(os.path.join(args.out, 'weights-k.npy'), w.asnumpy())
            kv.save_optimizer_states(prefix)
    name = args.mode + ('-noload' if args.no_load else '')
    with open(os.path.join(args.out, '%s.json' % name), 'w') as f:
        json.dump({'weights': w.asnumpy().tolist(), 'slot_mode': kv.slot_mode}, f)


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.mode == 'lr':
        run_lr(args)
    else:
        run_resume(args)


if __name__ == '__main__':
    main()
