"""Integration-test worker: ``Module.fit`` (string keys) with a worker-aware rule (slot mode).

Each worker trains a small MLP (4 parameters: fc1/fc2 weight and bias) on its own
data with ``Module.fit(kvstore=kv, optimizer=RULE)``, the store made by
``mx.kv.create(STORE)`` (the registry, as Module.fit does for a name; made first
because the data depends on the rank); Module sends the parameters under their
string names.  When
every worker is done, each makes the servers copy their latest weights into its
slots (a refresh push) and pulls them: with one model on the servers, every
worker reads the same weights.

Writes ``<out>/final-<rank>.json``: ``{rank, slot_mode, steps, weights: {name: list}}``.
"""
import argparse
import json
import os


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--store', default='dist_async')
    p.add_argument('--optimizer', default='sasgd')
    p.add_argument('--batches', type=int, default=6)
    p.add_argument('--epochs', type=int, default=2)
    p.add_argument('--out', required=True)
    return p.parse_args()


def main():
    args = parse_args()
    import mxnet as mx
    import numpy as np
    import mxnet_ssp  # noqa: F401  (registers the stores and the rules)
    kv = mx.kv.create(args.store)
    rank = kv.rank
    data = mx.sym.Variable('data')
    net = mx.sym.FullyConnected(data, num_hidden=16, name='fc1')
    net = mx.sym.Activation(net, act_type='relu')
    net = mx.sym.FullyConnected(net, num_hidden=3, name='fc2')
    net = mx.sym.SoftmaxOutput(net, name='softmax')
    batch = 8
    rng = np.random.RandomState(11 + rank)          # every worker its own data
    x = rng.randn(batch * args.batches, 8).astype('float32')
    y = rng.randint(0, 3, size=batch * args.batches).astype('float32')
    it = mx.io.NDArrayIter(x, y, batch_size=batch, label_name='softmax_label')
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.fit(it, num_epoch=args.epochs, kvstore=kv, optimizer=args.optimizer,
            optimizer_params={'learning_rate': 0.1}, initializer=mx.init.Xavier())
    assert mod._kvstore is kv
    mx.nd.waitall()                 # this worker's pushes are applied on the servers
    kv._barrier()                   # ... and every other worker's
    arg_params, _ = mod.get_params()
    weights = {}
    for name in sorted(arg_params):
        out = mx.nd.zeros(arg_params[name].shape)
        if kv.slot_mode:
            kv.refresh_slots(name)       # the servers' latest weights into my slot
        kv.pull(name, out=out)
        weights[name] = out.asnumpy().ravel().tolist()
    mx.nd.waitall()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'final-%d.json' % kv.rank), 'w') as f:
        json.dump({'rank': kv.rank, 'slot_mode': kv.slot_mode, 'type': kv.type,
                   'steps': args.epochs * args.batches, 'weights': weights}, f)


if __name__ == '__main__':
    main()
