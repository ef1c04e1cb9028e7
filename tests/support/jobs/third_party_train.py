"""A training script as found in the wild: it takes --kvstore and knows nothing of mxnet-ssp.

It never imports mxnet_ssp; asked for --kvstore dist_dssp it only works if the
installed autoload hook registered the type.  Writes ``<out>/done-<rank>.json``.
"""
import argparse
import json
import os

import mxnet as mx
from mxnet import autograd, gluon


def main():
    parser = argparse.ArgumentParser(description='train a linear model')
    parser.add_argument('--kvstore', type=str, default='local')
    parser.add_argument('--num-batches', type=int, default=15)
    parser.add_argument('--out', type=str, required=True)
    args = parser.parse_args()
    kv = mx.kv.create(args.kvstore)
    net = gluon.nn.Dense(1, in_units=4)
    net.initialize(mx.init.Zero())
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1}, kvstore=kv)
    w = mx.nd.array([[1.0, -2.0, 0.5, 3.0]])
    for i in range(args.num_batches):
        x = mx.nd.random.normal(shape=(32, 4))
        with autograd.record():
            loss = ((net(x) - mx.nd.dot(x, w.T)) ** 2).mean()
        loss.backward()
        trainer.step(1)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'done-%d.json' % kv.rank), 'w') as f:
        json.dump({'type': kv.type, 'loss': float(loss.asscalar()),
                   'clock': getattr(kv, 'clock', None)}, f)


if __name__ == '__main__':
    main()
