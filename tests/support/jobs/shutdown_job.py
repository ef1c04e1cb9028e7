"""A short training job in one of the shapes real scripts take, to test clean shutdown.

``--api``: ``module`` (``Module.fit``, as MXNet's image-classification examples),
``trainer`` (``gluon.Trainer``) or ``raw`` (``kv.init/push/pull`` by hand).
``--shape``: where the store lives and how the script ends with it:

* ``local``: created inside a function that returns (``fit.py`` in MXNet's
  examples), so the script drops it before the end;
* ``global``: kept in a module-level variable until the interpreter exits;
* ``closed``: the script closes it (``kv.close()``) and keeps the object;
* ``string``: ``Module.fit(kvstore=NAME)`` / ``Trainer(kvstore=NAME)``, so the
  framework creates the store and holds it (global module / trainer).

On the way out every worker writes ``<out>/done-<rank>.json``; the test asserts
that every process of the job then exits 0 within a bound.  With ``--phase``,
an exit hook that runs after mxnet-ssp's and before MXNet's own
(``_notify_shutdown``) writes ``<out>/phase-<rank>.json``: whether the store
was closed and its native store already freed there, the phase in which
mxnet-ssp promises every worker frees it.
"""
import argparse
import json
import os
import sys

HOLD = []       # the 'global' shape keeps its objects here until exit


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--api', choices=['module', 'trainer', 'raw'], required=True)
    p.add_argument('--shape', choices=['local', 'global', 'closed', 'string'], required=True)
    p.add_argument('--kvstore', required=True)
    p.add_argument('--batches', type=int, default=6)
    p.add_argument('--epochs', type=int, default=2)
    p.add_argument('--optimizer', default='sgd')
    p.add_argument('--out', required=True)
    p.add_argument('--raise-rank', type=int, default=-1,
                   help='raw API: this rank raises ValueError at step --raise-at')
    p.add_argument('--raise-at', type=int, default=-1)
    p.add_argument('--phase', action='store_true',
                   help='record the store\'s state between mxnet-ssp\'s and MXNet\'s exit hooks')
    return p.parse_args()


def watch_exit_phase(mx, args, holder):
    """Register a hook that runs after mxnet-ssp's exit hook and before MXNet's own.

    atexit runs hooks last-in first-out: this one is registered after
    ``import mxnet`` and before the store exists (mxnet-ssp registers its hook
    when the first store is created), so it runs between the two.
    """
    import atexit
    import weakref

    def record():
        kv = holder[0]() if holder else None
        if kv is None:
            state = {'store_alive': False}
        else:
            try:
                kv.handle           # delegated to MXNet's native store while it exists
                freed = False
            except Exception as err:    # mxnet_ssp.SSPError once the native store is freed
                freed = 'shut down' in str(err)
            state = {'store_alive': True, 'native_freed': freed,
                     'closed': getattr(kv, '_closed', None)}
        state['rank'] = holder[1] if len(holder) > 1 else None
        process = sys.modules.get('mxnet_ssp.worker.shutdown')     # what mxnet-ssp's exit hook did
        state['exit_counts'] = getattr(process, 'exit_counts', None)
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, 'phase-%s.json' % state['rank']), 'w') as f:
            json.dump(state, f)

    atexit.register(record)
    return lambda kv: holder.extend([weakref.ref(kv), kv.rank])


def _symbol(mx):
    data = mx.sym.Variable('data')
    net = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name='conv')
    net = mx.sym.BatchNorm(net, name='bn')
    net = mx.sym.Activation(net, act_type='relu')
    net = mx.sym.Pooling(net, global_pool=True, kernel=(1, 1), pool_type='avg')
    net = mx.sym.FullyConnected(mx.sym.flatten(net), num_hidden=3, name='fc')
    return mx.sym.SoftmaxOutput(net, name='softmax')


def _data(mx, np, args, batch=8):
    rng = np.random.RandomState(7)
    x = rng.randn(batch * args.batches, 2, 6, 6).astype('float32')
    y = rng.randint(0, 3, size=batch * args.batches).astype('float32')
    return mx.io.NDArrayIter(x, y, batch_size=batch, label_name='softmax_label')


def run_module(mx, np, args):
    it = _data(mx, np, args)
    mod = mx.mod.Module(_symbol(mx), context=mx.cpu())
    kv = args.kvstore if args.shape == 'string' else mx.kv.create(args.kvstore)
    mod.fit(it, num_epoch=args.epochs, kvstore=kv, optimizer=args.optimizer,
            optimizer_params={'learning_rate': 0.05}, initializer=mx.init.Xavier())
    store = mod._kvstore
    return mod, store


def run_trainer(mx, np, args):
    from mxnet import autograd, gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, padding=1), gluon.nn.BatchNorm(), gluon.nn.Activation('relu'),
            gluon.nn.GlobalAvgPool2D(), gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    kv = args.kvstore if args.shape == 'string' else mx.kv.create(args.kvstore)
    trainer = gluon.Trainer(net.collect_params(), args.optimizer, {'learning_rate': 0.05},
                            kvstore=kv)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    it = _data(mx, np, args)
    for _ in range(args.epochs):
        it.reset()
        for batch in it:
            with autograd.record():
                loss = loss_fn(net(batch.data[0]), batch.label[0])
            loss.backward()
            trainer.step(batch.data[0].shape[0])
    return trainer, trainer._kvstore


def run_raw(mx, np, args):
    kv = mx.kv.create(args.kvstore)
    kv.set_optimizer(mx.optimizer.create(args.optimizer, learning_rate=0.05))
    shapes = [(4, 3), (5,), (2, 2, 2)]
    for k, shape in enumerate(shapes):
        kv.init(k, mx.nd.ones(shape))
    outs = [mx.nd.zeros(shape) for shape in shapes]
    for step in range(args.epochs * args.batches):
        if kv.rank == args.raise_rank and step == args.raise_at:
            raise ValueError('worker %d fails on purpose at step %d' % (kv.rank, step))
        for k, shape in enumerate(shapes):
            kv.push(k, mx.nd.ones(shape) * 0.1)
        for k in range(len(shapes)):
            kv.pull(k, out=outs[k])
    mx.nd.waitall()
    return outs, kv


def main():
    args = parse_args()
    import mxnet as mx
    import numpy as np
    if os.environ.get('SHUTDOWN_JOB_IMPORT', '1') == '1':
        import mxnet_ssp  # noqa: F401
    watch = watch_exit_phase(mx, args, []) if args.phase else None
    runner = {'module': run_module, 'trainer': run_trainer, 'raw': run_raw}[args.api]
    owner, kv = runner(mx, np, args)
    if watch is not None:
        watch(kv)
    rank = kv.rank
    if args.shape == 'closed':
        kv.close()
    if args.shape in ('global', 'string', 'closed'):
        HOLD.extend([owner, kv])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'done-%d.json' % rank), 'w') as f:
        json.dump({'rank': rank, 'type': kv.type, 'api': args.api, 'shape': args.shape}, f)


if __name__ == '__main__':
    main()
