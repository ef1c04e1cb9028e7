"""A worker's copies into and out of buckets: NumPy on MXNet's engine against MXNet's copies.

Drives the package's own :class:`mxnet_ssp.worker.packer.Packer` as a worker's store does in a
gluon.Trainer step, with no server: every trainable array of a GluonCV model's parameter list
(benchmarks/param_shapes.json) is staged into its bucket (``defer``, as in Trainer's loop),
each bucket is taken (its gradients gathered in one operation, the header written) and its
members' weights are scattered from the receive buffer into the weight arrays.  Each
repetition waits for MXNet's engine (``nd.waitall``), so the figures are whole copies.

Three ways, taking turns within each trial:

* ``mxnet``: MXNet's copies only (``MXNET_SSP_HOST_COPIES=0``): one ``amp_multicast`` per
  bucket and direction;
* ``package``: what the package does (the default): gradients in by NumPy inside one engine
  operation (each of two or more dimensions checked for MKL-DNN's layout there), weights out
  by NumPy for one-dimensional arrays and by ``amp_multicast`` for the others;
* ``numpy-all``: NumPy both ways for every array, the variant withdrawn because MKL-DNN
  reorders weights in place at inference passes (docs/benchmarks.md): the bound.

Prints a markdown table of CPU milliseconds per step (the whole process: MXNet's engine
threads included), the calling thread's CPU and the wall time.

    OMP_NUM_THREADS=1 python -m benchmarks.bucket_copies [--model cifar_resnet110_v1]
                                                         [--reps 300] [--trials 3]
"""
import argparse
import contextlib
import statistics
import time

import numpy as np
from mxnet import nd

from benchmarks.ps_step import MODELS, NO_WD, load_shapes
from mxnet_ssp.config import DEFAULT_BUCKET_BYTES
from mxnet_ssp.core.buckets import ArrayInfo, plan_buckets
from mxnet_ssp.worker import packer as packer_mod
from mxnet_ssp.worker.packer import Packer

WAYS = ('mxnet', 'package', 'numpy-all')


class Step:
    """One model's arrays, bucket plan and packer for one way of copying."""

    def __init__(self, entries, way, bucket_bytes=DEFAULT_BUCKET_BYTES):
        infos = []
        for key, (name, shape, _) in enumerate(entries):
            shape = tuple(shape)
            size = int(np.prod(shape))
            # GluonCV's --no-wd groups: wd_mult 0 on biases and BatchNorm
            group = (0, np.dtype(np.float32).str, 1.0, 0.0 if NO_WD.search(name) else 1.0)
            infos.append(ArrayInfo(key, shape, size, 4, group, True))
        self.plan = plan_buckets(infos, bucket_bytes)
        self.packer = Packer(self.plan, [np.dtype(np.float32)] * len(self.plan),
                             host=way != 'mxnet')
        rs = np.random.RandomState(0)
        shapes = {i.key: i.shape for i in infos}
        self.grads = {k: nd.array(rs.uniform(-1, 1, s)) for k, s in shapes.items()}
        self.weights = {k: nd.zeros(s) for k, s in shapes.items()}
        self.way = way

    def run(self):
        """One step's copies, pushed (not waited for)."""
        packer = self.packer
        for bucket in self.plan.buckets:
            for member in bucket.members:
                packer.stage(bucket, member, self.grads[member.key], defer=True)
            packer.take(bucket)
            packer.scatter(bucket, [(m, self.weights[m.key]) for m in bucket.members])

    def check(self):
        """The weights equal the gradients after a step (the receive buffer is the buffer
        pushed last: nothing else writes it here)."""
        nd.waitall()
        for k, g in self.grads.items():
            np.testing.assert_array_equal(self.weights[k].asnumpy(), g.asnumpy())


def measure(step, reps, warmup=10):
    """(process CPU ms, calling thread CPU ms, wall ms) per step, `reps` steps."""
    with _way(step.way):
        for _ in range(warmup):
            step.run()
        nd.waitall()
        c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        for _ in range(reps):
            step.run()
            nd.waitall()
        c1, t1, w1 = time.process_time(), time.thread_time(), time.perf_counter()
    return tuple(1e3 * d / reps for d in (c1 - c0, t1 - t0, w1 - w0))


@contextlib.contextmanager
def _way(way):
    """With 'numpy-all', let NumPy copy weights of any shape out of buckets (the withdrawn
    variant; for this measurement only)."""
    saved = packer_mod._HOST_OUT_MAX_NDIM
    if way == 'numpy-all':
        packer_mod._HOST_OUT_MAX_NDIM = 32
    try:
        yield
    finally:
        packer_mod._HOST_OUT_MAX_NDIM = saved


def fmt(values):
    values = sorted(values)
    if len(values) == 1:
        return '%.2f' % values[0]
    return '%.2f [%.2f-%.2f]' % (statistics.median(values), values[0], values[-1])


def table(model, arrays, buckets, results):
    """`results`: way -> list over trials of (cpu, thread, wall)."""
    lines = ['%s: %d arrays in %d buckets; per step, median [min-max] over trials'
             % (model, arrays, buckets), '',
             '| copies | process CPU ms | calling thread CPU ms | wall ms |',
             '|---|---:|---:|---:|']
    for way in WAYS:
        if results.get(way):
            cols = list(zip(*results[way]))
            lines.append('| %s | %s | %s | %s |' % (way, fmt(cols[0]), fmt(cols[1]),
                                                   fmt(cols[2])))
    return '\n'.join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--model', default='cifar_resnet110_v1', choices=MODELS)
    p.add_argument('--reps', type=int, default=300)
    p.add_argument('--trials', type=int, default=3)
    args = p.parse_args(argv)
    if args.reps < 1 or args.trials < 1:
        p.error('--reps and --trials: integers >= 1 (got %d, %d)' % (args.reps, args.trials))
    entries = load_shapes()[args.model]['params']
    steps = {way: Step(entries, way) for way in WAYS}
    for way, step in steps.items():
        with _way(way):
            step.run()
            step.check()
    results = {way: [] for way in WAYS}
    for _ in range(args.trials):
        for way in WAYS:
            results[way].append(measure(steps[way], args.reps))
    some = steps['package']
    print(table(args.model, len(entries), len(some.plan), results))
    return results


if __name__ == '__main__':
    main()
