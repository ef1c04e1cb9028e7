"""A pilot's rate check: the lab's model trained on one process, no parameter server, at a few
learning rates, its test accuracy read every few iterations (docs/lab.md, "The second pilot:
candidate C").  It tells a task that plateaus early from one still learning at the end of a
run's iterations, and which rate a pilot should give its arms, before any cluster run.

    python -m mxnet_ssp.lab.reproduce.rate_check --dataset teacher --teacher-dim 16 \\
        --lrs 0.003,0.01,0.03,0.1 --iterations 3200 [--json FILE]

The data are the lab's: :func:`mxnet_ssp.lab.data.load` with the generated task's knobs, each
image normalized by the training set's per-channel mean and std as the lab's loader does, in
batches of ``--batch-size`` drawn without replacement (a new order every epoch); the model is
the lab's (:func:`mxnet_ssp.lab.training.models.get_model`), SGD with momentum and weight decay
as the lab's runs.  `--iterations` of one process stand for the iterations of every worker of a
run together (a lab run of 4 workers x 800 iterations: 3,200).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

from ...core.names import DATASETS
from ..training_flags.generated_knobs import TEACHER_KNOBS, load_options

__all__ = ['rate_curve', 'main']


def _normalized(images, mean, std):
    """``(N, H, W, C)`` images in 0..255 as float32 ``(N, C, H, W)``, normalized per channel."""
    x = np.asarray(images, dtype=np.float32) / np.float32(255.0)
    x = (x - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def load_arrays(dataset, options):
    """``(x_train, y_train, x_test, y_test, classes)`` of `dataset` as the lab's runs see it."""
    from .. import data
    from ..loader import channel_stats
    loaded = data.load(dataset, **options)
    train_x, train_y = data.arrays(loaded.train)
    test_x, test_y = data.arrays(loaded.test)
    mean, std = channel_stats(train_x)
    return (_normalized(train_x, mean, std), np.asarray(train_y, dtype=np.int64),
            _normalized(test_x, mean, std), np.asarray(test_y, dtype=np.int64),
            loaded.num_classes)


def rate_curve(arrays, model, lr, iterations, every, batch_size=32, momentum=0.9, wd=1e-4,
               seed=1):
    """Test accuracies after every `every` iterations of SGD at `lr` (a list of
    ``(iteration, accuracy)``), and the training's seconds."""
    import mxnet as mx
    from mxnet import autograd, gluon, nd
    from ..training.models import get_model
    x_train, y_train, x_test, y_test, classes = arrays
    mx.random.seed(seed)
    rng = np.random.default_rng(seed)
    net = get_model(model, classes, x_train.shape[1:])
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': lr, 'momentum': momentum, 'wd': wd})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    test = nd.array(x_test)
    order, pos, curve = rng.permutation(len(x_train)), 0, []
    start = time.time()
    for it in range(1, iterations + 1):
        if pos + batch_size > len(order):
            order, pos = rng.permutation(len(x_train)), 0
        rows = order[pos:pos + batch_size]
        pos += batch_size
        x, y = nd.array(x_train[rows]), nd.array(y_train[rows])
        with autograd.record():
            out = loss(net(x), y)
        out.backward()
        trainer.step(batch_size)
        if it % every == 0 or it == iterations:
            predicted = net(test).argmax(axis=1).asnumpy().astype(np.int64)
            curve.append((it, float((predicted == y_test).mean())))
    return curve, time.time() - start


def _positive_list(text, option, kind):
    try:
        values = [kind(v) for v in text.split(',')]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError('%s %r is not valid: expected a comma-separated list '
                                         'of numbers > 0' % (option, text))
    return values


def _parser():
    p = argparse.ArgumentParser(prog='python -m mxnet_ssp.lab.reproduce.rate_check',
                                description=__doc__.split('\n')[0])
    p.add_argument('--dataset', default='teacher', choices=DATASETS)
    for knob, flag in TEACHER_KNOBS:
        p.add_argument(flag, dest='knob_' + knob, metavar='V',
                       help='with --dataset teacher: the generator\'s %s' % knob)
    p.add_argument('--model', default='mlp')
    p.add_argument('--lrs', default='0.003,0.01,0.03,0.1',
                   type=lambda t: _positive_list(t, '--lrs', float))
    p.add_argument('--iterations', type=int, default=3200)
    p.add_argument('--every', type=int, default=400)
    p.add_argument('--batch-size', type=int, default=32)
    p.add_argument('--momentum', type=float, default=0.9)
    p.add_argument('--wd', type=float, default=1e-4)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--json', metavar='FILE', help='also write the curves as JSON')
    return p


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ('iterations', 'every', 'batch_size'):
        if getattr(args, name) < 1:
            parser.error('--%s %d is not valid: expected an integer >= 1'
                         % (name.replace('_', '-'), getattr(args, name)))
    given = {knob: getattr(args, 'knob_' + knob) for knob, _ in TEACHER_KNOBS}
    if args.dataset != 'teacher' and any(v is not None for v in given.values()):
        parser.error('the --teacher-* options are only accepted with --dataset teacher')
    try:
        options = load_options(args.dataset, given)
    except (TypeError, ValueError) as err:
        parser.error(str(err))
    arrays = load_arrays(args.dataset, options)
    print('rate check: %s %s, %d train / %d test, model %s, batch %d, momentum %g, wd %g; '
          'load average %.1f' % (args.dataset, options or '', len(arrays[0]), len(arrays[2]),
                                 args.model, args.batch_size, args.momentum, args.wd,
                                 os.getloadavg()[0]), flush=True)
    result = {'dataset': args.dataset, 'options': options, 'model': args.model,
              'batch_size': args.batch_size, 'momentum': args.momentum, 'wd': args.wd,
              'seed': args.seed, 'curves': {}}
    for lr in args.lrs:
        curve, seconds = rate_curve(arrays, args.model, lr, args.iterations, args.every,
                                    args.batch_size, args.momentum, args.wd, args.seed)
        result['curves'][repr(lr)] = curve
        print('lr %g (%.1f s): %s' % (lr, seconds,
                                     ' '.join('%d:%.3f' % point for point in curve)), flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
