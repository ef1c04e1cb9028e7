"""A user's own Gluon script that survives ``mxnet-ssp-launch --job-restarts`` (docs/faults.md,
"Your own Gluon script"): it saves a checkpoint every epoch with :mod:`mxnet_ssp.checkpoint`
and, when the launcher started the job again, resumes from the latest complete one.

    mxnet-ssp-launch -n 2 -s 1 --launcher local --job-restarts 2 \\
        python train_scripts/restartable_gluon.py --dir /tmp/run1 --epochs 10

Synthetic data: a linear model to learn, 8 features -> 1 output; each worker's batches are
drawn from a generator seeded by (epoch, rank), so a resumed epoch sees the same batches.
Every worker prints one JSON line per epoch: ``{"rank", "epoch", "loss", "restart",
"resumed_after"}``.
"""
import argparse
import json
import os
import sys

import numpy as np


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--dir', required=True, help='checkpoint directory (the same for every worker)')
    p.add_argument('--epochs', type=int, default=10, help='epochs in all, counting resumed ones')
    p.add_argument('--kvstore', default='dist_ssp', help='the store (default dist_ssp)')
    p.add_argument('--steps', type=int, default=20, help='batches per epoch per worker')
    return p.parse_args(argv)


def batches(epoch, rank, steps, truth):
    rng = np.random.RandomState(1000 * epoch + rank)
    for _ in range(steps):
        x = rng.randn(16, 8).astype('float32')
        yield x, x.dot(truth)


def main(argv=None):
    args = parse_args(argv)
    import mxnet as mx       # a scheduler or server serves inside this import, and exits
    from mxnet import autograd, gluon
    from mxnet_ssp import checkpoint

    kv = mx.kv.create(args.kvstore)
    net = gluon.nn.Dense(1, in_units=8)
    net.initialize(mx.init.Zero())
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': 0.05, 'momentum': 0.9}, kvstore=kv)
    truth = np.arange(1, 9, dtype='float32').reshape(8, 1) / 8
    os.makedirs(args.dir, exist_ok=True)

    start, resumed_after = 0, None
    latest = checkpoint.latest_checkpoint(args.dir) if checkpoint.is_restart() else None
    if latest is not None:       # every worker loads: the optimizer state's load is collective
        checkpoint.load_gluon(latest, net, trainer)
        resumed_after = latest.meta['epoch']
        start = resumed_after + 1
    for epoch in range(start, args.epochs):
        total = 0.0
        for x, y in batches(epoch, kv.rank, args.steps, truth):
            x, y = mx.nd.array(x), mx.nd.array(y)
            with autograd.record():
                loss = ((net(x) - y) ** 2).mean()
            loss.backward()
            trainer.step(1)
            total += float(loss.asscalar())
        print(json.dumps({'rank': kv.rank, 'epoch': epoch, 'loss': total / args.steps,
                          'restart': checkpoint.restart_count(),
                          'resumed_after': resumed_after}), flush=True)
        if kv.rank == getattr(kv, 'leader', 0):     # one process saves
            checkpoint.save_gluon(args.dir, 'ckpt-epoch%03d' % epoch, net, step=epoch,
                                  trainer=trainer, meta={'epoch': epoch})
    return 0


if __name__ == '__main__':
    sys.exit(main())
