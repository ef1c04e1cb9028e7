"""Integration-test worker for buckets and chunks: the same training with and without them.

A small network (Dense, BatchNorm, Dense, Dense: a dozen arrays of a few hundred bytes, so
they all fit in buckets) trained for ``--steps`` steps on data fixed by the worker's rank,
through gluon.Trainer or Module.fit, with per-parameter multipliers (biases and BatchNorm
``wd_mult = 0``, one layer ``lr_mult = 0.5``, one bias ``lr_mult = 0``, which must stay at
its initial zeros) and one frozen weight (``grad_req='null'`` /
``fixed_param_names``): a bucket member that is never pushed.  Optionally saves the
optimizer states after ``--save-at`` steps, or loads them before training (``--resume``).

Writes ``<out>/params-<rank>.npz`` (the final weights) and ``<out>/info-<rank>.json``.
"""
import argparse
import json
import os

import numpy as np

from mxnet_ssp._hooks import skip_optional_mxnet_imports

# MXNet without its optional scikit-learn and SciPy imports, as in mxnet-ssp's training script
# (about 1.3 s of CPU less per worker: the test suite's time); a user's plain import is
# tested by marker_job.py's other import orders
skip_optional_mxnet_imports()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--api', choices=['trainer', 'module', 'raw'], default='trainer')
    p.add_argument('--store', default='dist_async')
    p.add_argument('--rule', default='sgd',
                   choices=['sgd', 'adam', 'sasgd', 'dcasgd-a', 'rmsprop', 'lamb'])
    p.add_argument('--steps', type=int, default=6)
    p.add_argument('--save-at', type=int, default=0)
    p.add_argument('--resume', default=None, help='states saved by --save-at, to load first')
    p.add_argument('--devices', type=int, default=1, help='CPU contexts per worker')
    p.add_argument('--conv', action='store_true',
                   help='trainer: a 16-channel convolution in place of the middle layers, '
                        'and an inference pass after every step (MKL-DNN then reorders the '
                        'weights in place into its own layout)')
    p.add_argument('--no-multipliers', action='store_true',
                   help='trainer: no lr_mult/wd_mult on Parameters (MXNet\'s own dist stores '
                        'drop them on the servers: a comparison with them needs none)')
    p.add_argument('--out', required=True)
    return p.parse_args()


def make_optimizer(rule):
    import mxnet as mx
    from mxnet_ssp import optim
    common = dict(learning_rate=0.05, wd=0.01, rescale_grad=1.0 / 8)
    if rule == 'sgd':
        return mx.optimizer.SGD(momentum=0.9, **common)
    if rule == 'adam':
        return mx.optimizer.Adam(**common)
    if rule == 'rmsprop':
        return mx.optimizer.RMSProp(**common)
    if rule == 'lamb':
        return mx.optimizer.LAMB(**common)
    if rule == 'sasgd':
        return optim.StalenessAwareSGD(momentum=0.9, **common)
    return optim.DCASGD(lamda=0.5, adaptive=True, momentum=0.9, **common)


def data(rank, step):
    rs = np.random.RandomState(1000 * rank + step)
    return rs.uniform(-1, 1, (8, 5)).astype(np.float32), rs.randint(0, 3, 8).astype(np.float32)


def train_trainer(args, kv, opt):
    import mxnet as mx
    from mxnet import gluon
    mx.random.seed(7)
    net = gluon.nn.HybridSequential()
    if args.conv:
        net.add(gluon.nn.Dense(144, in_units=5),
                gluon.nn.HybridLambda(lambda F, h: F.reshape(h, (-1, 16, 3, 3))),
                gluon.nn.Conv2D(16, 3, padding=1, in_channels=16),
                gluon.nn.Dense(3, in_units=144))
    else:
        net.add(gluon.nn.Dense(6, in_units=5), gluon.nn.BatchNorm(in_channels=6),
                gluon.nn.Dense(4, in_units=6), gluon.nn.Dense(3, in_units=4))
    ctx = [mx.cpu(i) for i in range(args.devices)]
    net.initialize(mx.init.Xavier(rnd_type='uniform'), ctx=ctx)
    if args.resume:                               # the weights saved with the states
        net.load_parameters(os.path.join(os.path.dirname(args.resume), 'net.params'))
    if not args.conv and not args.no_multipliers:  # (with --conv: one bucket for the
        for name, param in net.collect_params().items():      # weights and the conv's bias)
            if name.endswith(('bias', 'gamma', 'beta')):
                param.wd_mult = 0.0
        net[2].weight.lr_mult = 0.5
    if not args.no_multipliers:
        net[0].bias.lr_mult = 0.0                 # starts at 0 and must stay there
    net[3].bias.grad_req = 'null'                 # frozen: a bucket member never pushed
    trainer = gluon.Trainer(net.collect_params(), opt, kvstore=kv)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    resumed = 0
    if args.resume:
        # load_states starts the store, which sends the optimizer as it is now: give it the
        # rescaling step(8) will check for (MXNet refuses a change after the store started)
        trainer._optimizer.rescale_grad = trainer._scale / 8
        trainer.load_states(args.resume)
        resumed = args.save_at
    for step in range(resumed + 1, args.steps + 1):
        x, y = data(kv.rank, step)
        half = len(x) // len(ctx)                 # each device its share of the batch
        with mx.autograd.record():
            losses = [loss_fn(net(mx.nd.array(x[i * half:(i + 1) * half], ctx=c)),
                              mx.nd.array(y[i * half:(i + 1) * half], ctx=c))
                      for i, c in enumerate(ctx)]
        for loss in losses:
            loss.backward()
        trainer.step(8)
        if args.conv:                             # evaluation, as between epochs
            for c in ctx:
                net(mx.nd.array(x, ctx=c)).wait_to_read()
        if step == args.save_at and not args.resume:
            mx.nd.waitall()
            trainer.save_states(os.path.join(args.out, 'states'))
            net.save_parameters(os.path.join(args.out, 'net.params'))
    mx.nd.waitall()
    if args.conv:
        from mxnet_ssp.worker.host_copy import in_mxnet_layout
        conv = net[2].weight.data(ctx[0])
        assert in_mxnet_layout(conv), 'the inference passes left the weights row-major'
    for p in net.collect_params().values():       # the devices agree on what is trained
        for d in (p.list_data()[1:] if p.grad_req != 'null' else ()):
            assert (d.asnumpy() == p.data(ctx[0]).asnumpy()).all(), p.name
    return {name: p.data(ctx[0]).asnumpy() for name, p in net.collect_params().items()}


def train_module(args, kv, opt):
    import mxnet as mx
    mx.random.seed(7)
    x = mx.sym.Variable('data')
    h = mx.sym.FullyConnected(x, num_hidden=6, name='fc1')
    h = mx.sym.BatchNorm(h, name='bn1')
    h = mx.sym.FullyConnected(h, num_hidden=4, name='fc2')
    h = mx.sym.FullyConnected(h, num_hidden=3, name='fc3')
    out = mx.sym.SoftmaxOutput(h, name='softmax')
    xs, ys = zip(*(data(kv.rank, s) for s in range(1, args.steps + 1)))
    it = mx.io.NDArrayIter(np.concatenate(xs), np.concatenate(ys), batch_size=8,
                           label_name='softmax_label')
    mod = mx.mod.Module(out, fixed_param_names=['fc3_bias'])
    opt.set_lr_mult({'fc2_weight': 0.5})
    mod.fit(it, num_epoch=1, kvstore=kv, optimizer=opt,
            initializer=mx.init.Xavier(rnd_type='uniform'))
    args_, aux = mod.get_params()
    return {k: v.asnumpy() for k, v in args_.items()}


RAW_SHAPES = [(6, 5), (6,), (4, 6), (4,), (3, 4), (3,)]


def train_raw(args, kv, opt):
    """The store's own push and pull, as a script would call them: the first two keys in
    one list push, the others one by one; each gradient is overwritten right after its push
    (MXNet's push takes the value it is given at the call, so the overwrite must not reach
    the servers); in the middle of a step, a key not pushed yet is pulled."""
    import mxnet as mx
    rs = np.random.RandomState(3)
    keys = list(range(len(RAW_SHAPES)))
    weights = [mx.nd.array(rs.uniform(-1, 1, s)) for s in RAW_SHAPES]
    kv.set_optimizer(opt)
    kv.init(keys, weights)
    grads = [mx.nd.zeros(s) for s in RAW_SHAPES]
    scratch = mx.nd.zeros(RAW_SHAPES[-1])
    for step in range(1, args.steps + 1):
        rs = np.random.RandomState(1000 * kv.rank + step)
        for g, s in zip(grads, RAW_SHAPES):
            g[:] = rs.uniform(-1, 1, s)
        kv.push(keys[:2], grads[:2])
        for g in grads[:2]:
            g[:] = 1e6
        for k in keys[2:]:
            # the last key from a fresh array: MXNet's own store pulls a key into the array
            # last pushed to it (on the CPU), so the pull below would land on the gradient
            kv.push(k, grads[k] if k != keys[-1] else grads[k].copy())
            grads[k][:] = 1e6
            if k == 3:                # a key of the step not pushed yet: its weights, now
                kv.pull(keys[-1], out=scratch)
        kv.pull(keys, out=weights)
    return {'w%d' % k: w.asnumpy() for k, w in zip(keys, weights)}


def main():
    args = parse_args()
    import mxnet_ssp
    kv = mxnet_ssp.create(args.store)
    opt = make_optimizer(args.rule)
    os.makedirs(args.out, exist_ok=True)
    train = {'trainer': train_trainer, 'module': train_module, 'raw': train_raw}[args.api]
    params = train(args, kv, opt)
    np.savez(os.path.join(args.out, 'params-%d.npz' % kv.rank), **params)
    path = getattr(kv, 'data_path', None) or {}  # MXNet's own store (dist_sync unwrapped): none
    with open(os.path.join(args.out, 'info-%d.json' % kv.rank), 'w') as f:
        json.dump({'buckets': path.get('buckets', 0),
                   'bucketed': path.get('arrays_in_buckets', 0),
                   'chunked': path.get('chunked_arrays', 0),
                   'chunks': path.get('chunks', 0),
                   'chunk_host_fills': path.get('chunk_host_fills', 0),
                   'chunk_host_gathers': path.get('chunk_host_gathers', 0),
                   'store_class': '%s.%s' % (type(kv).__module__, type(kv).__name__),
                   'slot_mode': getattr(kv, 'slot_mode', False),
                   'clock': getattr(kv, 'clock', None)}, f)


if __name__ == '__main__':
    main()
