"""Check job: gluon.data.DataLoader worker processes or threads inside a PS worker.

Run as every role of a job (``python -m mxnet_ssp.launch -n 2 -s 1 --launcher local
python -m benchmarks.loader_in_worker_job --kvstore dist_ssp --pool process --out DIR``).
Each worker creates the store, trains a few steps, then reads two epochs of a
generated CIFAR-shaped dataset through a ``DataLoader`` with 2 loader workers
(``--pool process``: forked after the store started; ``thread``: a thread
pool), training one step per batch, and writes ``<out>/loader-<rank>.json``
with the seconds each part took.  See docs/train_scripts.md for what was seen.
"""
import argparse
import json
import os
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--kvstore', required=True)
    p.add_argument('--pool', choices=('process', 'thread'), required=True)
    p.add_argument('--images', type=int, default=2048)
    p.add_argument('--out', required=True)
    args = p.parse_args()
    import numpy as np
    import mxnet as mx
    import mxnet_ssp  # noqa: F401
    from mxnet import autograd, gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(8, 3, padding=1, activation='relu'), gluon.nn.MaxPool2D(4, 4),
            gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.01},
                            kvstore=args.kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step(x, y):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(x.shape[0])
        mx.nd.waitall()

    x0 = mx.nd.random.uniform(shape=(32, 3, 32, 32))
    y0 = mx.nd.array(np.arange(32) % 10)
    for _ in range(3):
        step(x0, y0)                        # the store is running from here on
    rng = np.random.RandomState(0)
    data = gluon.data.ArrayDataset(rng.rand(args.images, 3, 32, 32).astype(np.float32),
                                   (np.arange(args.images) % 10).astype(np.int32))
    t0 = time.perf_counter()
    loader = gluon.data.DataLoader(data, batch_size=32, shuffle=True, last_batch='discard',
                                   num_workers=2, thread_pool=args.pool == 'thread')
    t1 = time.perf_counter()
    batches = 0
    for _ in range(2):
        for x, y in loader:
            step(x, y.astype('float32'))
            batches += 1
    t2 = time.perf_counter()
    del loader
    kv = trainer._kvstore
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'loader-%d.json' % kv.rank), 'w') as f:
        json.dump({'kvstore': args.kvstore, 'pool': args.pool, 'batches': batches,
                   'create_s': round(t1 - t0, 3), 'epochs_s': round(t2 - t1, 3)}, f)


if __name__ == '__main__':
    main()
