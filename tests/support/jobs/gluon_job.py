"""A small real training job through gluon.Trainer or Module.fit (integration tests).

Learns a fixed random linear map with least squares; every worker draws its own
shard with a seed from its rank.  Writes ``<out>/train-<rank>.json`` with the
loss before and after and the number of optimizer steps taken.
"""
import argparse
import json
import os
import signal


def maybe_die(args, rank, step):
    if rank == args.die_rank and step == args.die_at:
        os.kill(os.getpid(), signal.SIGKILL)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--api', choices=['trainer', 'module'], default='trainer')
    p.add_argument('--kvstore', default='dist_dssp')
    p.add_argument('--steps', type=int, default=30)
    p.add_argument('--out', required=True)
    p.add_argument('--die-rank', type=int, default=-1,
                   help='this rank kills itself (SIGKILL) before its step --die-at')
    p.add_argument('--die-at', type=int, default=-1)
    p.add_argument('--final-barrier', action='store_true',
                   help="kv._barrier() after training (elastic: the controller's), then record "
                        'the leader and the lost workers')
    p.add_argument('--no-optimizer-test', action='store_true',
                   help='push through the raw store without set_optimizer (expects a clear error)')
    return p.parse_args()


def main():
    args = parse_args()
    import mxnet as mx
    import mxnet_ssp  # noqa: F401
    import numpy as np
    from mxnet import autograd, gluon

    if args.no_optimizer_test:
        kv = mx.kv.create(args.kvstore)
        kv.init(0, mx.nd.zeros(4))
        kv.push(0, mx.nd.ones(4))
        return
    truth = np.random.RandomState(0).randn(8, 1).astype('float32')
    if args.api == 'trainer':
        net = gluon.nn.Dense(1, in_units=8)
        net.initialize(mx.init.Zero())
        trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1},
                                kvstore=args.kvstore)
        kv = trainer._kvstore if hasattr(trainer, '_kvstore') else None
        rng = np.random.RandomState(100)
        xs = rng.randn(args.steps + 1, 16, 8).astype('float32')
        losses = []
        for step in range(args.steps + 1):
            x = mx.nd.array(xs[step])
            y = mx.nd.array(xs[step].dot(truth))
            with autograd.record():
                loss = ((net(x) - y) ** 2).mean()
            losses.append(float(loss.asscalar()))
            if step < args.steps:
                loss.backward()
                maybe_die(args, trainer._kvstore.rank if step else -1, step)
                trainer.step(1)
        kv = trainer._kvstore
        result = {'loss_first': losses[0], 'loss_last': losses[-1], 'steps': args.steps,
                  'type': kv.type, 'rank': kv.rank, 'clock': kv.clock,
                  'update_on_kvstore': trainer._update_on_kvstore}
    else:
        rng = np.random.RandomState(200)
        x = rng.randn(16 * args.steps, 8).astype('float32')
        y = x.dot(truth).ravel()
        it = mx.io.NDArrayIter(x, y, batch_size=16, label_name='lin_reg_label')
        data = mx.sym.Variable('data')
        label = mx.sym.Variable('lin_reg_label')
        fc = mx.sym.FullyConnected(data, num_hidden=1, name='fc')
        out = mx.sym.LinearRegressionOutput(fc, label, name='lro')
        mod = mx.mod.Module(out, label_names=['lin_reg_label'])
        kv = mx.kv.create(args.kvstore)
        before = None
        mod.fit(it, num_epoch=1, kvstore=kv, optimizer='sgd',
                optimizer_params={'learning_rate': 0.05}, initializer=mx.init.Zero(),
                eval_metric='mse',
                batch_end_callback=lambda p: maybe_die(args, kv.rank, p.nbatch + 1))
        it.reset()
        score = dict(mod.score(it, 'mse'))
        before = float((y ** 2).mean())
        result = {'loss_first': before, 'loss_last': score['mse'], 'steps': args.steps,
                  'type': kv.type, 'rank': kv.rank, 'clock': kv.clock,
                  'update_on_kvstore': mod._update_on_kvstore}
    if args.final_barrier:
        kv._barrier()
        result.update(leader=kv.leader, lost=kv.lost_workers)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'train-%d.json' % result['rank']), 'w') as f:
        json.dump(result, f)


if __name__ == '__main__':
    main()
