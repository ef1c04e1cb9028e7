"""Benchmark worker: a fixed number of gluon.Trainer steps of a small CNN.

Run as every role of a job.  Rank r writes ``<out>/rate-<r>.json`` with the
steps per second measured after ``--warmup`` steps.  The input is synthetic:
this measures iteration throughput only, not learning.
"""
import argparse
import json
import os
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--kvstore', required=True)
    p.add_argument('--steps', type=int, default=60)
    p.add_argument('--warmup', type=int, default=10)
    p.add_argument('--batch-size', type=int, default=32)
    p.add_argument('--out', required=True)
    args = p.parse_args()
    import mxnet as mx
    import mxnet_ssp  # noqa: F401
    from mxnet import autograd, gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(32, 5, padding=2, activation='relu'), gluon.nn.MaxPool2D(3, 2),
            gluon.nn.Conv2D(32, 5, padding=2, activation='relu'), gluon.nn.MaxPool2D(3, 2),
            gluon.nn.Conv2D(64, 5, padding=2, activation='relu'), gluon.nn.MaxPool2D(3, 2),
            gluon.nn.Dense(64, activation='relu'), gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.01},
                            kvstore=args.kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = mx.nd.random.uniform(shape=(args.batch_size, 3, 32, 32))
    y = mx.nd.array([i % 10 for i in range(args.batch_size)])
    start = None
    for step in range(args.steps):
        if step == args.warmup:
            mx.nd.waitall()
            start = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(args.batch_size)
    mx.nd.waitall()
    elapsed = time.perf_counter() - start
    kv = trainer._kvstore
    params = sum(p.data().size for p in net.collect_params().values())
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'rate-%d.json' % kv.rank), 'w') as f:
        json.dump({'rank': kv.rank, 'kvstore': args.kvstore, 'params': params,
                   'steps_per_s': (args.steps - args.warmup) / elapsed}, f)


if __name__ == '__main__':
    main()
