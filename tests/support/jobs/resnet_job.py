"""Integration-test worker: GluonCV's CIFAR ResNet-20 (with BatchNorm) through gluon.Trainer.

BatchNorm's running mean and variance are initialized in the store
(``broadcast``) but never get gradients, so the store must learn where a step
ends (:mod:`mxnet_ssp.worker.steps`).  Tiny batches of generated 3x32x32 images (a
class-dependent colour plus noise, seeded by the launch index) keep a step
cheap on a CPU.  Writes ``<out>/resnet-<rank>.json``.
"""
import argparse
import json
import os


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--kvstore', default='dist_dssp')
    p.add_argument('--steps', type=int, default=4)
    p.add_argument('--batch-size', type=int, default=4)
    p.add_argument('--out', required=True)
    return p.parse_args()


def main():
    args = parse_args()
    import mxnet as mx
    import mxnet_ssp  # noqa: F401  (registers the store types)
    import numpy as np
    from gluoncv.model_zoo.cifarresnet import cifar_resnet20_v1
    from mxnet import autograd, gluon

    seed = int(os.environ.get('MXNET_SSP_LAUNCH_INDEX', '0'))
    mx.random.seed(seed)
    rng = np.random.RandomState(seed)
    net = cifar_resnet20_v1(classes=10)
    net.initialize(mx.init.Xavier())
    params = net.collect_params()
    trainer = gluon.Trainer(params, 'sgd', {'learning_rate': 0.05, 'momentum': 0.9},
                            kvstore=args.kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    colours = np.random.RandomState(0).rand(10, 3, 1, 1).astype('float32')
    frozen = [name for name, p in params.items() if p.grad_req == 'null']
    start = {name: None for name in frozen}
    losses = []
    for step in range(args.steps):
        y = rng.randint(0, 10, size=args.batch_size)
        x = colours[y] + 0.1 * rng.randn(args.batch_size, 3, 32, 32).astype('float32')
        x, y = mx.nd.array(x), mx.nd.array(y)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        if step == 0:
            start = {name: params[name].data().asnumpy().copy() for name in frozen}
        trainer.step(args.batch_size)
        losses.append(float(loss.mean().asscalar()))
    kv = trainer._kvstore
    mx.nd.waitall()
    result = {
        'rank': kv.rank, 'type': kv.type, 'clock': kv.clock, 'steps': args.steps,
        'update_on_kvstore': trainer._update_on_kvstore,
        'losses': losses,
        'params': len(params.keys()),
        'with_grad': sorted(trainer._param2idx[n] for n, p in params.items()
                            if p.grad_req != 'null'),
        'frozen': len(frozen),
        'frozen_moved': sum(1 for n in frozen
                            if not np.array_equal(start[n], params[n].data().asnumpy())),
        'learned': bool(kv._tracker.learned),
        'expected': sorted(kv._tracker.expected),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'resnet-%d.json' % kv.rank), 'w') as f:
        json.dump(result, f)


if __name__ == '__main__':
    main()
