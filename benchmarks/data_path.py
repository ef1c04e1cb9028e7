"""Time per epoch of the training data path, and of a training epoch, side by side.

Two measurements, each on the embedded digits and on a generated CIFAR-shaped
dataset (random 32x32x3 bytes, the CIFAR python layout, ``--images`` images):

* **data path only**: one worker's batches of one epoch (shard, order,
  augmentation for CIFAR, ``NDArray`` batches), with 0, 1 and 2 loader
  workers, nothing else running.  ``--before-data FILE`` also times the
  numpy data path this package had before ``gluon.data`` (its
  ``mxnet_ssp/lab/data.py``, e.g. from ``git show 56a6b16:...``)
  with 0, 1, 2 threads, interleaved with ours.  It also prints what Gluon's
  ``ToTensor`` + ``Normalize`` cost on one batch of 128 CIFAR images: what
  normalizing every batch of every epoch would add.
* **training epoch**: ``train_cifar.py --kvstore local`` for two epochs, the
  time its log gives for epoch 2 (``epoch 2 done: ... in X s``).
  ``--before-checkout DIR`` runs the same command in another checkout too
  (e.g. ``git archive 56a6b16 | tar -x -C DIR``), interleaved.

Every figure is the median of ``--repeats`` runs (min in brackets).  Run from
the checkout root (with this checkout installed, or ``PYTHONPATH=.``), e.g.::

    git show 56a6b16:mxnet_ssp/lab/data.py > /tmp/old_data.py
    mkdir /tmp/before && git archive 56a6b16 | tar -x -C /tmp/before
    OMP_NUM_THREADS=1 python -m benchmarks.data_path --before-data /tmp/old_data.py \\
        --before-checkout /tmp/before
"""
import argparse
import importlib.util
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_cifar_like(root, images, seed=0):
    """A CIFAR-10 python-layout directory of `images` random training images (and images/5
    test images) under `root`; returns `root`."""
    rng = np.random.RandomState(seed)
    folder = os.path.join(root, 'cifar-10-batches-py')
    os.makedirs(folder, exist_ok=True)
    names = ['data_batch_%d' % i for i in range(1, 6)] + ['test_batch']
    for name in names:
        n = images // 5
        with open(os.path.join(folder, name), 'wb') as f:
            pickle.dump({b'data': rng.randint(0, 256, (n, 3072)).astype(np.uint8),
                         b'labels': (rng.randint(0, 10, n)).tolist()}, f)
    return root


def summary(times):
    return '%.3f s [%.3f]' % (statistics.median(times), min(times))


# ---------------------------------------------------------------------------
# data path only
# ---------------------------------------------------------------------------
def ours(name, data_dir, batch_size, augment, workers):
    """A function timing one epoch of our data path (rank 0 of 1)."""
    from mxnet_ssp.lab import data, loader
    ds = data.load(name, data_dir, download=False)
    mean, std = loader.channel_stats(data.arrays(ds.train)[0])
    train = loader.normalized(ds.train, mean, std)
    train_loader = loader.TrainLoader(train, batch_size, 0, 1, seed=42, augment=augment,
                                      loader_workers=workers)
    epoch = [0]

    def run():
        import mxnet as mx
        epoch[0] += 1
        start = time.perf_counter()
        for x, y in train_loader.epoch(epoch[0]):
            pass
        mx.nd.waitall()
        return time.perf_counter() - start
    return run


def before(module, name, data_dir, batch_size, augment, threads):
    """The same with the numpy data path of `module` (the old data.py)."""
    import mxnet as mx
    ds = module.load(name, data_dir, download=False)
    axes = (0, 2, 3)
    mean = ds.train_data.mean(axis=axes, keepdims=True)
    std = ds.train_data.std(axis=axes, keepdims=True) + 1e-6
    train = ((ds.train_data - mean) / std).astype(np.float32)
    index = module.shard(len(train), 0, 1, seed=42)
    x, y = train[index], ds.train_label[index]
    epoch = [0]

    def run():
        epoch[0] += 1
        e = epoch[0]
        start = time.perf_counter()
        order = module.epoch_order(len(x), 42, 0, e)

        def transform(xb, b):
            return module.crop_flip(xb, module.batch_rng(42, 0, e, b))
        for xb, yb in module.iterate_batches(x, y, batch_size, order,
                                             transform if augment else None, threads):
            mx.nd.array(xb), mx.nd.array(yb)          # what the training loop did with them
        mx.nd.waitall()
        return time.perf_counter() - start
    return run


def normalize_per_batch(calls=200):
    """Milliseconds of Gluon's ToTensor + Normalize on one (128, 32, 32, 3) uint8 batch: what
    normalizing every batch of every epoch would cost (loader.normalized does it once)."""
    import mxnet as mx
    from mxnet.gluon.data.vision import transforms
    batch = mx.nd.array(np.random.RandomState(0).randint(0, 256, (128, 32, 32, 3)),
                        dtype=np.uint8)
    transform = transforms.Compose([transforms.ToTensor(),
                                    transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    transform(batch).wait_to_read()
    start = time.perf_counter()
    for _ in range(calls):
        out = transform(batch)
    out.wait_to_read()
    mx.nd.waitall()
    return (time.perf_counter() - start) / calls * 1e3


def data_only(args, datasets):
    old = None
    if args.before_data:
        spec = importlib.util.spec_from_file_location('data_before', args.before_data)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    rows = []
    for name, data_dir, batch_size, augment in datasets:
        runners = {}
        for workers in (0, 1, 2):
            if old is not None:
                runners['before, %d threads' % workers] = before(old, name, data_dir, batch_size,
                                                                 augment, workers)
            runners['gluon.data, %d loader workers' % workers] = ours(
                name, data_dir, batch_size, augment, workers)
        times = {k: [] for k in runners}
        for _ in range(args.repeats):                 # interleaved: the same load on both
            for label, run in runners.items():
                times[label].append(run())
        for label in runners:
            rows.append((name, label, summary(times[label])))
    return rows


# ---------------------------------------------------------------------------
# training epochs
# ---------------------------------------------------------------------------
EPOCH = re.compile(r'epoch 2 done: (\d+) iterations in ([0-9.]+) s')


def train_epoch(checkout, flags, tmp):
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=checkout)
    save = tempfile.mkdtemp(dir=tmp)
    proc = subprocess.run([sys.executable, '-m', 'mxnet_ssp.lab.train_cifar',
                           '--kvstore', 'local', '--num-epochs', '2', '--log-interval', '0',
                           '--save-dir', save, '--save-period', '0'] + flags,
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError('%s failed:\n%s' % (checkout, proc.stderr[-3000:]))
    found = EPOCH.search(proc.stderr)
    return float(found.group(2))


def training(args, datasets, tmp):
    checkouts = [('this checkout', os.getcwd())]
    if args.before_checkout:
        checkouts.insert(0, ('before', os.path.abspath(args.before_checkout)))
    rows = []
    for name, data_dir, batch_size, augment in datasets:
        flags = ['--dataset', name, '--data-dir', data_dir, '--batch-size', str(batch_size),
                 '--model', args.model]
        for workers in args.train_workers:
            times = {label: [] for label, _ in checkouts}
            for _ in range(args.train_repeats):
                for label, checkout in checkouts:
                    times[label].append(train_epoch(checkout, flags + ['-j', str(workers)],
                                                    tmp))
            for label, _ in checkouts:
                rows.append((name, '%s, -j %d' % (label, workers), summary(times[label])))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--images', type=int, default=10000,
                   help='training images of the generated CIFAR-shaped dataset')
    p.add_argument('--repeats', type=int, default=5, help='data-path epochs per setting')
    p.add_argument('--train-repeats', type=int, default=2, help='training runs per setting')
    p.add_argument('--train-workers', type=int, nargs='*', default=[0, 1],
                   help='-j values of the training runs (none: skip them)')
    p.add_argument('--model', default='alexnet-small', help='--model of the training runs')
    p.add_argument('--before-data', help="the old mxnet_ssp/lab/data.py to time too")
    p.add_argument('--before-checkout', help='an old checkout whose training script to time')
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cifar_dir = write_cifar_like(os.path.join(tmp, 'cifar'), args.images)
        datasets = [('digits', '.', 32, False), ('cifar10', cifar_dir, 128, True)]
        print('OMP_NUM_THREADS=%s, %d CIFAR-shaped training images, median [min] of %d'
              % (os.environ.get('OMP_NUM_THREADS'), args.images, args.repeats))
        print('\ndata path only, one epoch of one worker:')
        for row in data_only(args, datasets):
            print('  %-8s %-34s %s' % row)
        print('  (ToTensor + Normalize on a batch of 128 CIFAR images: %.2f ms a batch)'
              % normalize_per_batch())
        if args.train_workers:
            print('\ntraining epoch 2 (train_cifar.py --kvstore local --model %s), median [min] '
                  'of %d:' % (args.model, args.train_repeats))
            for row in training(args, datasets, tmp):
                print('  %-8s %-34s %s' % row)


if __name__ == '__main__':
    main()
