"""Integration-test worker: the servers' latest weights read after a push that came late.

Each worker trains a small MLP with ``gluon.Trainer`` (integer keys) on a store in slot mode
(a worker-aware rule), ``--steps`` steps on its own data.  Then, ordered by barriers: worker 1
alone makes one more step, after worker 0's last pull; every worker then reads the servers'
weights as the training script does at its end (``read_server_weights``: a refresh of each
slot, then a pull).  Worker 0's own last pull is older than worker 1's last push, so reading
its slot without the refresh gives other weights than worker 1's.

Writes ``<out>/final-<rank>.json``: ``{rank, slot_mode, buckets, own: {index: list}, servers:
{index: list}}``: ``own`` the weights this worker held after its last step, ``servers`` what
it read at the end.
"""
import argparse
import json
import os


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--store', default='dist_async')
    p.add_argument('--optimizer', default='sasgd')
    p.add_argument('--steps', type=int, default=4)
    p.add_argument('--out', required=True)
    return p.parse_args()


def main():
    args = parse_args()
    import mxnet as mx
    import numpy as np
    from mxnet import autograd, gluon
    import mxnet_ssp  # noqa: F401  (registers the stores and the rules)
    from mxnet_ssp.lab.training.store import read_server_weights
    kv = mx.kv.create(args.store)
    rank = kv.rank
    mx.random.seed(5)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation='relu', in_units=8), gluon.nn.Dense(3, in_units=16))
    net.initialize(mx.init.Xavier())
    params = list(net.collect_params().values())   # the trainer's keys: list positions
    trainer = gluon.Trainer(params, args.optimizer, {'learning_rate': 0.1}, kvstore=kv)
    rng = np.random.RandomState(11 + rank)          # every worker its own data
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step():
        x = mx.nd.array(rng.randn(8, 8).astype('float32'))
        y = mx.nd.array(rng.randint(0, 3, size=8).astype('float32'))
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(8)

    for _ in range(args.steps):
        step()
    mx.nd.waitall()
    kv._barrier()                   # every worker's last pull is done
    if rank == 1:
        step()                      # a push after worker 0's last pull
        mx.nd.waitall()
    kv._barrier()
    own = {i: p.data().asnumpy().ravel().tolist() for i, p in enumerate(params)}
    read_server_weights(kv, params)
    servers = {i: p.data().asnumpy().ravel().tolist() for i, p in enumerate(params)}
    buckets = kv.data_path['arrays_in_buckets']
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'final-%d.json' % rank), 'w') as f:
        json.dump({'rank': rank, 'slot_mode': bool(getattr(kv, 'slot_mode', False)),
                   'buckets': buckets, 'own': own, 'servers': servers}, f)


if __name__ == '__main__':
    main()
