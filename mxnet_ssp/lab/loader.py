"""Batches for training and evaluation: ``gluon.data.DataLoader``, Gluon's transforms, and
the few pieces our experiments need that Gluon does not give by itself.

A worker's training batches are what GluonCV's ``train_cifar10.py`` makes::

    normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)])
    augment = transforms.Compose([RandomCrop(32, pad=4), RandomFlipLeftRight()])
    loader = gluon.data.DataLoader(train.transform_first(augment), batch_size, shuffle=True,
                                   last_batch='discard', num_workers=j)

with three differences, each for a reason:

* :class:`ShardSampler` instead of ``shuffle=True``: each worker reads its own
  part of the training set (:func:`shard`), in an order that is a function of
  (seed, rank, epoch) only (:func:`epoch_order`), so a resumed run sees the
  batches an uninterrupted one would.
* :class:`RandomCrop` / :class:`RandomFlipLeftRight` instead of GluonCV's and
  Gluon's: those draw from the process-wide generators, so with loader workers
  the draws would depend on which thread gets which sample first.  Ours draw
  from the sample's own numbers, which :class:`SeededTransform` fixes by
  (seed, rank, epoch, index): the batches are the same for any number of
  loader workers, and in a resumed run.
* ``ToTensor`` and ``Normalize`` do not depend on the epoch, so they run once,
  over the whole set in chunks (:func:`normalized`), not on every image of
  every epoch: on a CPU the two cost ~1 ms per batch of 128 CIFAR images,
  about as much as the rest of the data path (docs/benchmarks.md).  So the
  crop pads with the mean image value (0 after ``Normalize``).

Loader workers are threads (``thread_pool=True``): see :class:`TrainLoader`.
"""
import threading
import time

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon.data.vision import transforms

__all__ = ['shard', 'epoch_order', 'ShardSampler', 'SeededTransform', 'sample_random',
           'RandomCrop', 'RandomFlipLeftRight', 'channel_stats', 'normalized', 'batchify',
           'TrainLoader', 'eval_loader', 'global_order', 'BalancedLoader', 'BalancedIter',
           'time_module']

#: Uniform numbers each sample gets per epoch for its random transforms.
DRAWS_PER_SAMPLE = 4


# ---------------------------------------------------------------------------
# which images, in which order: a function of (seed, rank, epoch)
# ---------------------------------------------------------------------------
def shard(n_items, rank, num_workers, seed=None):
    """Indices of the items worker `rank` of `num_workers` trains on.

    The shards of ranks ``0..num_workers-1`` are disjoint and together cover
    ``range(n_items)``; their sizes differ by at most one.  With `seed`, items
    are first permuted with it (the same on every worker, so the shards stay
    disjoint); otherwise shards are contiguous.  Returns sorted int64 indices.
    """
    n_items, rank, num_workers = int(n_items), int(rank), int(num_workers)
    if num_workers < 1:
        raise ValueError('num_workers must be >= 1, got %d' % num_workers)
    if not 0 <= rank < num_workers:
        raise ValueError('rank must be in 0..%d, got %d' % (num_workers - 1, rank))
    if n_items < 0:
        raise ValueError('n_items must be >= 0, got %d' % n_items)
    start = rank * n_items // num_workers
    stop = (rank + 1) * n_items // num_workers
    if seed is None:
        return np.arange(start, stop, dtype=np.int64)
    order = np.random.RandomState(seed).permutation(n_items)
    return np.sort(order[start:stop]).astype(np.int64)


def _seed_parts(parts):
    for part in parts:
        if isinstance(part, bool) or int(part) != part or not 0 <= int(part) < 2 ** 32:
            raise ValueError('seed, rank and epoch must be integers in [0, 2**32), got %r'
                             % (parts[:3],))
    return [int(p) for p in parts]


def epoch_order(n_items, seed, rank, epoch):
    """The order in which worker `rank` visits its `n_items` images in `epoch`: a
    permutation of ``range(n_items)`` that depends only on the arguments."""
    rng = np.random.RandomState(_seed_parts((seed, rank, epoch, 0, 0)))
    return rng.permutation(int(n_items))


class ShardSampler(gluon.data.Sampler):
    """Worker `rank`'s shard of a dataset of `n_items`, in the order of the epoch set last.

    Yields indices into the whole dataset.  :meth:`set_epoch` must be called
    before each pass (not during one).
    """

    def __init__(self, n_items, rank, num_workers, seed):
        self._index = shard(n_items, rank, num_workers, seed=seed)
        self._seed, self._rank = seed, rank
        self._epoch = None

    def set_epoch(self, epoch):
        """The epoch whose order the next pass follows."""
        _seed_parts((self._seed, self._rank, epoch))
        self._epoch = int(epoch)

    def __iter__(self):
        if self._epoch is None:
            raise RuntimeError('ShardSampler: call set_epoch(epoch) before iterating')
        order = epoch_order(len(self._index), self._seed, self._rank, self._epoch)
        return iter(self._index[order].tolist())

    def __len__(self):
        return len(self._index)


# ---------------------------------------------------------------------------
# random transforms whose draws do not depend on the loader's threads
# ---------------------------------------------------------------------------
_current = threading.local()


class _SampleDraws:
    """A sample's uniform numbers in [0, 1), handed out in turn."""
    __slots__ = ('_values', '_next')

    def __init__(self, values):
        self._values, self._next = values, 0

    def random(self):
        if self._next >= len(self._values):
            raise RuntimeError('the random transforms of one sample need more than %d numbers '
                               '(DRAWS_PER_SAMPLE)' % len(self._values))
        value = self._values[self._next]
        self._next += 1
        return value


def sample_random():
    """A uniform number in [0, 1) for the sample being transformed.

    Inside :class:`SeededTransform` it is the sample's next own number;
    elsewhere it comes from numpy's global generator (as GluonCV's transforms
    draw theirs).  Thread-safe: each loader thread has its own current sample.
    """
    draws = getattr(_current, 'draws', None)
    return draws.random() if draws is not None else np.random.random_sample()


class RandomCrop(gluon.Block):
    """Pad a ``(C, H, W)`` numpy image with `pad` zeros on each side and cut a `size` window at
    a random offset (GluonCV's ``RandomCrop(32, pad=4)``, drawing from :func:`sample_random`)."""

    def __init__(self, size, pad=0):
        super().__init__()
        self._size = (size, size) if np.isscalar(size) else tuple(size)
        self._pad = int(pad)
        if self._pad < 0:
            raise ValueError('RandomCrop: pad must be >= 0, got %d' % self._pad)

    def forward(self, x):
        if x.ndim != 3:
            raise ValueError('RandomCrop expects a (C, H, W) image, got shape %s' % (x.shape,))
        h, w = x.shape[1:]
        th, tw = self._size
        p = self._pad
        if th > h + 2 * p or tw > w + 2 * p:
            raise ValueError('RandomCrop: a %dx%d window does not fit a %dx%d image padded by %d'
                             % (th, tw, h, w, p))
        top = int(sample_random() * (h + 2 * p - th + 1))
        left = int(sample_random() * (w + 2 * p - tw + 1))
        out = np.zeros((x.shape[0], th, tw), dtype=x.dtype)
        # the window is [top, top + th) x [left, left + tw) of the padded image,
        # whose pixels [p, p + h) x [p, p + w) are the image
        y0, y1 = max(top, p), min(top + th, p + h)
        x0, x1 = max(left, p), min(left + tw, p + w)
        if y0 < y1 and x0 < x1:
            out[:, y0 - top:y1 - top, x0 - left:x1 - left] = x[:, y0 - p:y1 - p, x0 - p:x1 - p]
        return out

    def __repr__(self):
        return 'RandomCrop(size=%s, pad=%d)' % (self._size, self._pad)


class RandomFlipLeftRight(gluon.Block):
    """Mirror a ``(C, H, W)`` numpy image left-right with probability 1/2 (Gluon's
    ``RandomFlipLeftRight``, drawing from :func:`sample_random`)."""

    def forward(self, x):
        return x[:, :, ::-1] if sample_random() < 0.5 else x


class SeededTransform(gluon.data.Dataset):
    """``dataset.transform_first(transform)`` whose random transforms draw numbers fixed by
    (seed, rank, epoch, index): the same sample of the same epoch gets the same
    crop and flip whichever thread transforms it, and in a resumed run.

    :meth:`set_epoch` must be called before each pass (not during one).
    """

    def __init__(self, dataset, transform, seed, rank):
        self._dataset, self._transform = dataset, transform
        self._seed, self._rank = seed, rank
        self._draws = None

    def set_epoch(self, epoch):
        """Draw every sample's numbers of `epoch` (one vectorized call)."""
        rng = np.random.RandomState(_seed_parts((self._seed, self._rank, epoch, 0, 1)))
        self._draws = rng.random_sample((len(self._dataset), DRAWS_PER_SAMPLE)).tolist()

    def __getitem__(self, idx):
        if self._draws is None:
            raise RuntimeError('SeededTransform: call set_epoch(epoch) before reading samples')
        image, label = self._dataset[idx]
        _current.draws = _SampleDraws(self._draws[idx])
        try:
            return self._transform(image), label
        finally:
            _current.draws = None

    def __len__(self):
        return len(self._dataset)


# ---------------------------------------------------------------------------
# per-batch transforms and the loaders
# ---------------------------------------------------------------------------
def channel_stats(images, chunk=4096):
    """Per-channel mean and std of ``(N, H, W, C)`` images in 0..255, scaled to [0, 1] (what
    ``Normalize`` gets after ``ToTensor``); a chunk at a time, no float copy of the set."""
    images = np.asarray(images)
    total = np.zeros(images.shape[-1])
    squares = np.zeros(images.shape[-1])
    for start in range(0, len(images), chunk):
        part = images[start:start + chunk].reshape(-1, images.shape[-1]).astype(np.float64)
        total += part.sum(axis=0)
        squares += np.square(part).sum(axis=0)
    count = images.size // images.shape[-1]
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean ** 2, 0.0))
    return tuple(float(m) for m in mean / 255.0), tuple(float(s) + 1e-6 for s in std / 255.0)


def normalized(dataset, mean, std, chunk=1000):
    """`dataset` through Gluon's ``ToTensor`` and ``Normalize(mean, std)``, once.

    Returns a ``gluon.data.ArrayDataset`` of ``(C, H, W)`` float32 numpy
    images, standardized per channel, and the labels.  The transforms run on
    chunks of `chunk` images (both take batches): one MXNet call per chunk.
    """
    images, labels = dataset[:]
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)])
    out = np.empty((len(images), images.shape[3]) + images.shape[1:3], dtype=np.float32)
    for start in range(0, len(images), chunk):
        part = mx.nd.array(images[start:start + chunk], dtype=images.dtype)
        out[start:start + chunk] = transform(part).asnumpy()
    return gluon.data.ArrayDataset(out, np.asarray(labels))


def batchify(samples):
    """``(image, label)`` numpy samples -> ``(x, y)`` NDArrays, x stacked and y int32.

    Gluon's ``default_batchify_fn`` with one copy less: the stacked arrays are
    handed to MXNet as they are (``nd.from_numpy(zero_copy=True)``, which keeps
    them alive and read-only); ~40 us a batch instead of ~100-550 us.
    """
    images, labels = zip(*samples)
    return (mx.nd.from_numpy(np.stack(images), zero_copy=True),
            mx.nd.from_numpy(np.array(labels, dtype=np.int32), zero_copy=True))


def _loader(dataset, num_workers, **kwargs):
    # thread_pool: see TrainLoader
    return gluon.data.DataLoader(dataset, num_workers=num_workers, thread_pool=True,
                                 batchify_fn=batchify, **kwargs)


class TrainLoader:
    """One worker's training batches, epoch by epoch.

    Parameters
    ----------
    dataset : mxnet.gluon.data.Dataset
        The whole training set from :func:`normalized` (every worker passes
        the same): ``(C, H, W)`` float32 numpy images and int32 labels.
    batch_size : int
        A last partial batch is dropped (``last_batch='discard'``).
    rank, num_workers : int
        This worker and the job's workers: which shard is read.
    seed : int
        With `rank` and the epoch, fixes the order and the augmentation.
    augment : bool
        Random crop (pad 4) and horizontal flip of every image.
    loader_workers : int
        ``DataLoader`` worker threads (0: batches made when asked for).

    Notes
    -----
    The workers are threads (``thread_pool=True``), not processes: a worker of
    a parameter-server job has ps-lite's and MXNet's engine threads running,
    and a process pool would fork it; forked workers would also keep the epoch
    they were forked with (docs/train_scripts.md says what was seen).  Threads
    share the data with no copy and prepare batches while the engine computes.
    Not thread-safe itself: one consumer.
    """

    def __init__(self, dataset, batch_size, rank, num_workers, seed, augment=False,
                 loader_workers=0):
        self.sampler = ShardSampler(len(dataset), rank, num_workers, seed)
        if augment:
            h, w = dataset[0][0].shape[1:]
            dataset = SeededTransform(dataset, transforms.Compose(
                [RandomCrop((h, w), pad=4), RandomFlipLeftRight()]), seed, rank)
        self.dataset = dataset
        self._loader = _loader(dataset, loader_workers, batch_sampler=gluon.data.BatchSampler(
            self.sampler, batch_size, 'discard'))

    def __len__(self):
        """Batches per epoch."""
        return len(self._loader)

    def epoch(self, epoch):
        """An iterator of ``(x, y)`` NDArrays, every batch of `epoch`: x ``(N, C, H, W)``
        float32, y int32.  Leaving it early is allowed; the next call starts a new pass."""
        self.sampler.set_epoch(epoch)
        if isinstance(self.dataset, SeededTransform):
            self.dataset.set_epoch(epoch)
        return iter(self._loader)


def global_order(n_items, seed, epoch):
    """The order of the whole training set in `epoch` under balancing: a permutation of
    ``range(n_items)`` that depends on (seed, epoch) only, the same on every worker."""
    rng = np.random.RandomState(_seed_parts((seed, 0, epoch, 1, 0)))
    return rng.permutation(int(n_items))


class BalancedLoader:
    """One worker's batches when a :class:`mxnet_ssp.balance.BatchBalancer` sizes them.

    Iteration j of an epoch trains on the global batch ``order[j*B:(j+1)*B]`` of
    :func:`global_order` (B: the balancer's total); worker m takes the slice of
    ``balancer.batch_size()`` samples at ``balancer.offset``.  The workers' slices
    of an iteration are disjoint and together are the global batch, whatever the
    split, so a balanced ``dist_sync`` step is the step of one process on all B
    samples.  An epoch is ``len(dataset) // B`` iterations (the rest is dropped),
    one pass of the job over the whole set; augmentation draws are fixed by
    (seed, epoch, sample), not by the worker that happens to read the sample.

    ``batch_size()`` is called when the next batch is asked for, so it must be asked
    for only when the previous iteration is done (no read-ahead; `loader_workers`
    threads read the samples of one batch in parallel).
    """

    def __init__(self, dataset, balancer, seed, augment=False, loader_workers=0):
        self.balancer = balancer
        self.total = balancer.total
        self._seed = seed
        self._n = len(dataset)
        if self._n < self.total:
            raise ValueError('a balanced iteration takes %d samples but the training set has '
                             'only %d' % (self.total, self._n))
        if augment:
            h, w = dataset[0][0].shape[1:]
            dataset = SeededTransform(dataset, transforms.Compose(
                [RandomCrop((h, w), pad=4), RandomFlipLeftRight()]), seed, 0)
        self.dataset = dataset
        self._pool = None
        if loader_workers:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(loader_workers, thread_name_prefix='balanced-loader')

    def __len__(self):
        """Iterations per epoch."""
        return self._n // self.total

    def epoch(self, epoch):
        """A generator of ``(x, y)`` NDArrays, one per iteration of `epoch`."""
        order = global_order(self._n, self._seed, epoch)
        if isinstance(self.dataset, SeededTransform):
            self.dataset.set_epoch(epoch)
        read = self.dataset.__getitem__
        for j in range(len(self)):
            size = self.balancer.batch_size()
            start = j * self.total + self.balancer.offset
            index = order[start:start + size].tolist()
            samples = list(self._pool.map(read, index)) if self._pool else [read(i) for i in index]
            yield batchify(samples)


class BalancedIter(mx.io.DataIter):
    """:class:`BalancedLoader`'s batches as a ``DataIter``, for ``Module.fit``.

    `data` and `label` are arrays (NumPy or NDArray) with one sample per row;
    iteration j of epoch e is the slice of ``balancer.batch_size()`` rows at
    ``balancer.offset`` of the global batch ``order[j*B:(j+1)*B]`` of
    :func:`global_order` (epochs count from 1; ``reset`` starts the next).  Each
    batch carries its own ``provide_data``/``provide_label``, so ``Module.forward``
    reshapes the executors when the split changes.  With ``Module.fit``, also call
    :func:`time_module` (the balancer needs the compute time of each iteration) and
    pass ``optimizer_params={'rescale_grad': 1.0 / balancer.step_batch, ...}``
    (``Module`` would take ``1 / batch`` from the first batch's shape)::

        it = BalancedIter(x, y, bal, seed=1)
        mod = mx.mod.Module(sym)
        time_module(mod, bal)
        mod.fit(it, kvstore=kv, optimizer='sgd',
                optimizer_params={'learning_rate': 0.1, 'rescale_grad': 1.0 / bal.step_batch})

    The loss must be summed over the samples (``SoftmaxOutput``'s default
    ``normalization='null'``), as with Gluon (docs/balance.md).
    """

    def __init__(self, data, label, balancer, seed, data_name='data',
                 label_name='softmax_label', first_epoch=1):
        super().__init__(balancer.split[balancer.rank])     # batch_size: the latest batch
        self.data = data.asnumpy() if isinstance(data, mx.nd.NDArray) else np.asarray(data)
        self.label = label.asnumpy() if isinstance(label, mx.nd.NDArray) else np.asarray(label)
        if len(self.data) != len(self.label):
            raise ValueError('data has %d rows but label has %d' % (len(self.data),
                                                                  len(self.label)))
        self.balancer = balancer
        self.total = balancer.total
        if len(self.data) < self.total:
            raise ValueError('a balanced iteration takes %d samples but the training set has '
                             'only %d' % (self.total, len(self.data)))
        self.data_name, self.label_name = data_name, label_name
        self._seed = seed
        self.epoch = first_epoch
        self._order = global_order(len(self.data), seed, self.epoch)
        self._j = 0

    def _descs(self, size):
        return ([mx.io.DataDesc(self.data_name, (size,) + self.data.shape[1:],
                                self.data.dtype)],
                [mx.io.DataDesc(self.label_name, (size,) + self.label.shape[1:],
                                self.label.dtype)])

    @property
    def provide_data(self):
        """The shapes of this worker's current batch (they change with the split)."""
        return self._descs(self.balancer.split[self.balancer.rank])[0]

    @property
    def provide_label(self):
        return self._descs(self.balancer.split[self.balancer.rank])[1]

    def __len__(self):
        """Iterations per epoch."""
        return len(self.data) // self.total

    def reset(self):
        """The next epoch."""
        self.epoch += 1
        self._order = global_order(len(self.data), self._seed, self.epoch)
        self._j = 0

    def next(self):
        if self._j >= len(self):
            raise StopIteration
        size = self.batch_size = self.balancer.batch_size()
        start = self._j * self.total + self.balancer.offset
        index = self._order[start:start + size]
        self._j += 1
        provide_data, provide_label = self._descs(size)
        return mx.io.DataBatch([mx.nd.array(self.data[index], dtype=self.data.dtype)],
                               [mx.nd.array(self.label[index], dtype=self.label.dtype)],
                               pad=0, provide_data=provide_data, provide_label=provide_label)


def time_module(module, balancer):
    """Make `module`'s ``forward_backward`` (what ``Module.fit`` calls once per
    iteration) report its compute time to `balancer` (:meth:`BatchBalancer.record`).

    It first waits for MXNet's queued work (the previous update's pull, which in
    ``dist_sync`` waits for the slowest worker), so that only this iteration's
    forward and backward are timed, and waits for them to finish.
    """
    inner = module.forward_backward

    def forward_backward(data_batch):
        mx.nd.waitall()
        start = time.perf_counter()
        inner(data_batch)
        mx.nd.waitall()
        balancer.record(time.perf_counter() - start, data_batch.data[0].shape[0])

    module.forward_backward = forward_backward
    return module


def eval_loader(dataset, batch_size=500, loader_workers=0):
    """A ``DataLoader`` of all of `dataset` (from :func:`normalized`) in order, the last
    batch possibly smaller: ``(x, y)`` NDArrays."""
    return _loader(dataset, loader_workers, batch_size=batch_size, last_batch='keep')
