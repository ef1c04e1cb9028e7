"""A small gluon job whose batches a BatchBalancer sizes (integration tests of balancing).

Every worker trains a 2-layer MLP on the slices ``BalancedLoader`` gives it,
emulating a device speed by sleeping ``--cost RANK:SECONDS`` per sample, and
writes ``<out>/rank-<r>.json``: its batch, offset and split at every iteration,
the switches, and its final weights.  Rank 0 also writes ``<out>/init.npz``.

``--reference W`` runs one process, no store: the same global batches of
``--total`` samples with ``trainer.step(total / W)``, starting from the job's
``init.npz``, and writes ``<out>/reference.npz``.
"""
import argparse
import json
import os
import time

from mxnet_ssp._hooks import skip_optional_mxnet_imports

# MXNet without its optional scikit-learn and SciPy imports, as in mxnet-ssp's training script
# (about 1.3 s of CPU less per worker: the test suite's time); a user's plain import is
# tested by marker_job.py's other import orders
skip_optional_mxnet_imports()

N_FEATURES, N_CLASSES = 10, 4
OPTIMIZER = {'learning_rate': 0.1, 'momentum': 0.9}
SEED = 7


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--kvstore', default='dist_sync')
    p.add_argument('--total', type=int, default=128)
    p.add_argument('--initial', default=None, help='e.g. 96,32')
    p.add_argument('--period', type=int, default=None)
    p.add_argument('--threshold', type=float, default=None)
    p.add_argument('--steps', type=int, default=6)
    p.add_argument('--cost', default='', help='RANK:SECONDS per sample, comma-separated')
    p.add_argument('--out', required=True)
    p.add_argument('--reference', type=int, default=None, metavar='WORKERS')
    p.add_argument('--api', choices=('gluon', 'module'), default='gluon',
                   help='module: the same network as a symbol, trained by Module.fit on '
                        'BalancedIter batches, timed by time_module')
    return p.parse_args()


def arrays(total, steps):
    import numpy as np
    rng = np.random.RandomState(5)
    x = rng.randn(total * steps, N_FEATURES).astype('float32')
    y = (x[:, :N_CLASSES] + 0.5 * rng.randn(len(x), N_CLASSES)).argmax(axis=1).astype('int32')
    return x, y


def dataset(total, steps):
    from mxnet import gluon
    return gluon.data.ArrayDataset(*arrays(total, steps))


def network():
    from mxnet import gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation='relu', in_units=N_FEATURES),
            gluon.nn.Dense(N_CLASSES, in_units=16))
    return net


def weights(params):
    return {name: p.data().asnumpy() for name, p in zip('abcdefgh', params)}


def reference(out, total, steps, workers):
    """The weights of one process, no store, on the job's global batches from its init.npz:
    ``trainer.step(total / workers)``, as every worker of the job passes ``step_batch``."""
    import mxnet as mx
    import numpy as np
    from mxnet import autograd, gluon
    from mxnet_ssp.lab.loader import global_order
    data = dataset(total, steps)
    net = network()
    net.initialize()
    params = list(net.collect_params().values())
    init = np.load(os.path.join(out, 'init.npz'))
    for name, p in zip('abcdefgh', params):
        p.set_data(mx.nd.array(init[name]))
    trainer = gluon.Trainer(params, 'sgd', OPTIMIZER, kvstore=None)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    order = global_order(len(data), SEED, 1)
    for j in range(steps):
        x, y = data[order[j * total:(j + 1) * total]]
        with autograd.record():
            loss = loss_fn(net(mx.nd.array(x)), mx.nd.array(y))
        loss.backward()
        trainer.step(total / float(workers))
    return weights(params)


def main():
    args = parse_args()
    import mxnet as mx
    import numpy as np
    import mxnet_ssp  # noqa: F401
    from mxnet import gluon
    from mxnet_ssp.balance import BatchBalancer

    os.makedirs(args.out, exist_ok=True)
    data = dataset(args.total, args.steps)
    net = network()
    mx.random.seed(1)
    net.initialize(mx.init.Xavier())
    params = list(net.collect_params().values())
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    if args.reference:
        np.savez(os.path.join(args.out, 'reference.npz'),
                 **reference(args.out, args.total, args.steps, args.reference))
        return

    kv = mx.kv.create(args.kvstore)
    bal = BatchBalancer(kv, args.total, period=args.period, threshold=args.threshold,
                        initial=[int(b) for b in args.initial.split(',')] if args.initial
                        else None, log_path=os.path.join(args.out, 'decisions.jsonl'))
    cost = {int(r): float(s) for r, s in (item.split(':') for item in args.cost.split(',')
                                          if item)}
    if kv.rank == 0:
        np.savez(os.path.join(args.out, 'init.npz'), **weights(params))
    if args.api == 'module':
        log, final = train_module(args, kv, bal, cost, weights(params))
    else:
        log, final = train_gluon(kv, bal, cost, data, net, params, loss_fn)
    service = list(bal._client.address) if bal._client is not None else None
    bal.close()
    result = {'rank': kv.rank, 'type': kv.type, 'lockstep': bal.lockstep, 'log': log,
              'service': service,
              'switches': bal.switches, 'rate': bal.rate,
              'weights': {k: v.tolist() for k, v in final.items()}}
    with open(os.path.join(args.out, 'rank-%d.json' % kv.rank), 'w') as f:
        json.dump(result, f)


def train_module(args, kv, bal, cost, init):
    """Module.fit on BalancedIter batches, rescale_grad = 1 / step_batch, timed by
    time_module (the per-sample cost slept inside the timed forward/backward)."""
    import mxnet as mx
    from mxnet_ssp.lab.loader import BalancedIter, time_module
    names = ('fc1_weight', 'fc1_bias', 'fc2_weight', 'fc2_bias')
    x = mx.sym.Variable('data')
    h = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=16, name='fc1'), act_type='relu')
    sym = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=N_CLASSES, name='fc2'),
                               name='softmax')
    x, y = arrays(args.total, args.steps)
    train = BalancedIter(x, y.astype('float32'), bal, seed=SEED)
    mod = mx.mod.Module(sym, context=mx.cpu())
    log = []
    inner = mod.forward_backward

    def forward_backward(batch):
        inner(batch)
        mx.nd.waitall()
        size = batch.data[0].shape[0]
        if cost.get(kv.rank):
            time.sleep(cost[kv.rank] * size)
        log.append({'iteration': bal.iteration, 'size': size, 'offset': bal.offset,
                    'split': list(bal.split)})

    mod.forward_backward = forward_backward
    time_module(mod, bal)
    arg_params = {n: mx.nd.array(init[k]) for n, k in zip(names, 'abcd')}
    mod.fit(train, num_epoch=1, kvstore=kv, optimizer='sgd', arg_params=arg_params,
            optimizer_params=dict(OPTIMIZER, rescale_grad=1.0 / bal.step_batch))
    got = mod.get_params()[0]
    return log, {k: got[n].asnumpy() for n, k in zip(names, 'abcd')}


def train_gluon(kv, bal, cost, data, net, params, loss_fn):
    import mxnet as mx
    from mxnet import autograd, gluon
    from mxnet_ssp.lab.loader import BalancedLoader
    trainer = gluon.Trainer(params, 'sgd', OPTIMIZER, kvstore=kv)
    loader = BalancedLoader(data, bal, seed=SEED)
    log = []
    for x, y in loader.epoch(1):
        t0 = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), y.astype('float32'))
        loss.backward()
        mx.nd.waitall()
        if cost.get(kv.rank):
            time.sleep(cost[kv.rank] * len(y))
        bal.record(time.perf_counter() - t0, len(y))
        trainer.step(bal.step_batch)
        mx.nd.waitall()
        log.append({'iteration': bal.iteration, 'size': len(y), 'offset': bal.offset,
                    'split': list(bal.split)})
    return log, weights(params)


if __name__ == '__main__':
    main()
