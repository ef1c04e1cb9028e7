"""Datasets for the training scripts: embedded digits, CIFAR-10/100 readers, sharding.

Every loader returns a :class:`Dataset` of float32 NCHW images scaled to
``[0, 1]`` and int32 labels.  Nothing here imports MXNet, so the module is
cheap to import and to test.

* :func:`digits` -- scikit-learn's bundled 8x8 handwritten digits (1797 real
  images shipped inside scikit-learn, no download), split once into a fixed
  stratified train/test split.  It is the default, embedded dataset.
* :func:`cifar10` / :func:`cifar100` -- the official archives, in the python
  pickle format (``cifar-10-batches-py/``, ``cifar-100-python/``) or the
  binary format (``cifar-10-batches-bin/``, ``cifar-100-binary/``), each
  either extracted under the data directory or as the ``.tar.gz`` downloaded
  from the CIFAR page.  When none is there, the python archive is downloaded;
  when that fails, :class:`DatasetNotFoundError` names the data directory,
  every path looked for and the download error.
* :func:`shard` -- the disjoint part of a dataset one worker trains on.
* :func:`epoch_order`, :func:`crop_flip`, :func:`iterate_batches` -- the
  minibatches of one epoch of a shard: a permutation that depends only on
  (seed, rank, epoch), CIFAR's standard augmentation (random 32x32 crop of the
  image padded by 4, random horizontal flip), optionally prepared ahead by
  threads.  The batches do not depend on the number of threads.
"""
import os
import pickle
import shutil
import tarfile
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

__all__ = ['Dataset', 'DatasetNotFoundError', 'DATASETS', 'CIFAR_URLS',
           'digits', 'cifar10', 'cifar100', 'load', 'shard', 'download_file',
           'epoch_order', 'batch_rng', 'crop_flip', 'iterate_batches']

#: Names accepted by :func:`load`.
DATASETS = ('digits', 'cifar10', 'cifar100')

#: Official archives on the CIFAR page (https://www.cs.toronto.edu/~kriz/cifar.html).
CIFAR_URLS = {
    'cifar-10-python.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz',
    'cifar-10-binary.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz',
    'cifar-100-python.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz',
    'cifar-100-binary.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz',
}

_IMAGE_BYTES = 3 * 32 * 32
DOWNLOAD_TIMEOUT = 60.0


class DatasetNotFoundError(FileNotFoundError):
    """A dataset is not under the data directory and could not be downloaded."""


@dataclass
class Dataset:
    """A train/test pair of image arrays.

    Attributes
    ----------
    name : str
        Dataset name, one of :data:`DATASETS`.
    train_data, test_data : numpy.ndarray
        float32 images of shape ``(N, C, H, W)`` with values in ``[0, 1]``.
    train_label, test_label : numpy.ndarray
        int32 class indices of shape ``(N,)``.
    num_classes : int
        Number of classes; labels are in ``[0, num_classes)``.
    source : str
        Where the data came from (a path, or the scikit-learn loader).
    """
    name: str
    train_data: np.ndarray
    train_label: np.ndarray
    test_data: np.ndarray
    test_label: np.ndarray
    num_classes: int
    source: str = ''

    @property
    def image_shape(self):
        """``(C, H, W)`` of one image."""
        return tuple(self.train_data.shape[1:])

    def __repr__(self):
        return ('Dataset(%s: train %s, test %s, %d classes, from %s)'
                % (self.name, self.train_data.shape, self.test_data.shape,
                   self.num_classes, self.source))


# ---------------------------------------------------------------------------
# digits
# ---------------------------------------------------------------------------
def digits(test_size=360, seed=0):
    """Load scikit-learn's bundled 8x8 handwritten digits.

    Parameters
    ----------
    test_size : int
        Number of test images (the rest, 1797 - `test_size`, are for training).
    seed : int
        Seed of the stratified split.  The default gives the split every run
        and every worker of a job uses; change it only on purpose.

    Returns
    -------
    Dataset
        Images of shape ``(N, 1, 8, 8)`` scaled from 0..16 to ``[0, 1]``,
        10 classes; 1437 train / 360 test with the defaults.
    """
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as err:
        raise ImportError("the digits come with scikit-learn, which cannot be imported (%s): "
                          "python -m pip install 'scikit-learn>=1.0' (mxnet-ssp's [demo] and "
                          "[test] extras include it)" % err) from err

    bunch = load_digits()
    images = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    labels = bunch.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_size, random_state=seed, stratify=labels)
    return Dataset('digits', np.ascontiguousarray(x_train), y_train,
                   np.ascontiguousarray(x_test), y_test, num_classes=10,
                   source='sklearn.datasets.load_digits')


# ---------------------------------------------------------------------------
# CIFAR
# ---------------------------------------------------------------------------
# Each layout: (name used in messages, directory or archive, member directory,
# train members, test member, reader).  Members are relative to the directory.
_CIFAR10_LAYOUTS = (
    ('python', 'cifar-10-batches-py', 'cifar-10-python.tar.gz',
     ['data_batch_%d' % i for i in range(1, 6)], 'test_batch'),
    ('binary', 'cifar-10-batches-bin', 'cifar-10-binary.tar.gz',
     ['data_batch_%d.bin' % i for i in range(1, 6)], 'test_batch.bin'),
)
_CIFAR100_LAYOUTS = (
    ('python', 'cifar-100-python', 'cifar-100-python.tar.gz', ['train'], 'test'),
    ('binary', 'cifar-100-binary', 'cifar-100-binary.tar.gz', ['train.bin'], 'test.bin'),
)


def _to_images(flat):
    """uint8 rows of 3072 bytes (R, G, B planes of 32x32) -> float32 NCHW in [0, 1]."""
    flat = np.asarray(flat, dtype=np.uint8).reshape(-1, 3, 32, 32)
    return flat.astype(np.float32) / 255.0


def _read_pickle_batch(raw, label_key, where):
    try:
        batch = pickle.loads(raw, encoding='bytes')
    except Exception as err:  # a truncated or foreign file: say which one
        raise ValueError('%s is not a CIFAR python batch: %s' % (where, err)) from None
    batch = {(k.decode() if isinstance(k, bytes) else k): v for k, v in batch.items()}
    if 'data' not in batch or label_key not in batch:
        raise ValueError('%s is not a CIFAR python batch: it has keys %s, expected data and %s'
                         % (where, sorted(batch), label_key))
    data = np.asarray(batch['data'], dtype=np.uint8)
    labels = np.asarray(batch[label_key], dtype=np.int32)
    if data.ndim != 2 or data.shape[1] != _IMAGE_BYTES or len(data) != len(labels):
        raise ValueError('%s is not a CIFAR python batch: data %s, %d labels'
                         % (where, data.shape, len(labels)))
    return _to_images(data), labels


def _read_binary_batch(raw, label_bytes, label_index, where):
    record = label_bytes + _IMAGE_BYTES
    if len(raw) == 0 or len(raw) % record:
        raise ValueError('%s is not a CIFAR binary batch: %d bytes is not a multiple of the '
                         '%d-byte record' % (where, len(raw), record))
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(-1, record)
    return _to_images(rows[:, label_bytes:]), rows[:, label_index].astype(np.int32)


def _reader(fmt, fine):
    """Return a function (raw bytes, where) -> (images, labels) for one member."""
    if fmt == 'python':
        if fine is None:
            key = 'labels'
        else:
            key = 'fine_labels' if fine else 'coarse_labels'
        return lambda raw, where: _read_pickle_batch(raw, key, where)
    if fine is None:                      # CIFAR-10: <label><3072 pixels>
        return lambda raw, where: _read_binary_batch(raw, 1, 0, where)
    # CIFAR-100: <coarse label><fine label><3072 pixels>
    return lambda raw, where: _read_binary_batch(raw, 2, 1 if fine else 0, where)


def _read_from_dir(directory, members, read):
    parts = []
    for member in members:
        path = os.path.join(directory, member)
        with open(path, 'rb') as f:
            parts.append(read(f.read(), path))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _read_from_tar(path, subdir, members, read):
    with tarfile.open(path, 'r:gz') as tar:
        names = {os.path.normpath(m.name): m for m in tar.getmembers() if m.isfile()}
        parts = []
        for member in members:
            key = os.path.normpath(os.path.join(subdir, member))
            if key not in names:
                raise ValueError('%s does not contain %s' % (path, key))
            raw = tar.extractfile(names[key]).read()
            parts.append(read(raw, '%s:%s' % (path, key)))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _find_cifar(layouts, data_dir):
    """First complete layout under data_dir: (fmt, kind, path, subdir, train, test) or None."""
    for fmt, subdir, archive, train, test in layouts:
        directory = os.path.join(data_dir, subdir)
        if all(os.path.isfile(os.path.join(directory, m)) for m in train + [test]):
            return fmt, 'dir', directory, subdir, train, test
        tar_path = os.path.join(data_dir, archive)
        if os.path.isfile(tar_path):
            return fmt, 'tar', tar_path, subdir, train, test
    return None


def download_file(url, dest, timeout=DOWNLOAD_TIMEOUT):
    """Download `url` to the file `dest` (written to a temporary name, then renamed).

    Parameters
    ----------
    url : str
    dest : str
        Final path; its directory must exist.
    timeout : float
        Seconds to wait for the connection and for each read.

    Raises
    ------
    OSError
        Any network or file error (``urllib.error.URLError`` is one).
    """
    fd, tmp = tempfile.mkstemp(prefix='.download-', dir=os.path.dirname(dest) or '.')
    try:
        with os.fdopen(fd, 'wb') as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            shutil.copyfileobj(resp, out, 1 << 20)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load_cifar(name, layouts, fine, data_dir, download):
    data_dir = os.path.abspath(os.path.expanduser(data_dir or '.'))
    found = _find_cifar(layouts, data_dir)
    download_error = None
    if found is None and download:
        archive = layouts[0][2]               # the python-pickle archive
        url = CIFAR_URLS[archive]
        created = not os.path.isdir(data_dir)
        try:
            os.makedirs(data_dir, exist_ok=True)
            download_file(url, os.path.join(data_dir, archive))
        except Exception as err:              # network, proxy, disk: all end the same way
            download_error = 'downloading %s failed: %s: %s' % (url, type(err).__name__, err)
            if created and os.path.isdir(data_dir) and not os.listdir(data_dir):
                os.rmdir(data_dir)            # leave no empty directory behind
        found = _find_cifar(layouts, data_dir)
    if found is None:
        looked = []
        for _, subdir, archive, train, test in layouts:
            looked.append('%s/{%s}' % (os.path.join(data_dir, subdir), ','.join(train + [test])))
            looked.append(os.path.join(data_dir, archive))
        reason = (download_error if download_error is not None
                  else 'download disabled (download=False)')
        raise DatasetNotFoundError(
            '%s not found under --data-dir %s; looked for:\n  %s\nand %s. Put one of these '
            'there (archives from https://www.cs.toronto.edu/~kriz/cifar.html) or point '
            '--data-dir at the directory that holds them.'
            % (name, data_dir, '\n  '.join(looked), reason))
    fmt, kind, path, subdir, train, test = found
    read = _reader(fmt, fine)
    if kind == 'dir':
        x_train, y_train = _read_from_dir(path, train, read)
        x_test, y_test = _read_from_dir(path, [test], read)
    else:
        x_train, y_train = _read_from_tar(path, subdir, train, read)
        x_test, y_test = _read_from_tar(path, subdir, [test], read)
    return x_train, y_train, x_test, y_test, path


def cifar10(data_dir='.', download=True):
    """Load CIFAR-10 from `data_dir`, downloading the python archive if it is missing.

    Parameters
    ----------
    data_dir : str
        Directory holding ``cifar-10-batches-py/``, ``cifar-10-batches-bin/``,
        ``cifar-10-python.tar.gz`` or ``cifar-10-binary.tar.gz`` (first found wins).
    download : bool
        Download ``cifar-10-python.tar.gz`` into `data_dir` when nothing is found.

    Returns
    -------
    Dataset
        Images ``(N, 3, 32, 32)`` in ``[0, 1]``, 10 classes (50000 / 10000 for
        the full archive).

    Raises
    ------
    DatasetNotFoundError
        Nothing found and the download failed or was disabled.
    ValueError
        A file is there but is not in the CIFAR format.
    """
    x_train, y_train, x_test, y_test, path = _load_cifar(
        'CIFAR-10', _CIFAR10_LAYOUTS, None, data_dir, download)
    return Dataset('cifar10', x_train, y_train, x_test, y_test, num_classes=10, source=path)


def cifar100(data_dir='.', download=True, fine_labels=True):
    """Load CIFAR-100 from `data_dir`, downloading the python archive if it is missing.

    Parameters
    ----------
    data_dir : str
        Directory holding ``cifar-100-python/``, ``cifar-100-binary/``,
        ``cifar-100-python.tar.gz`` or ``cifar-100-binary.tar.gz``.
    download : bool
        Download ``cifar-100-python.tar.gz`` into `data_dir` when nothing is found.
    fine_labels : bool
        The 100 fine classes (default) or the 20 coarse superclasses.

    Returns
    -------
    Dataset
        Images ``(N, 3, 32, 32)`` in ``[0, 1]``, 100 (or 20) classes.

    Raises
    ------
    DatasetNotFoundError
        Nothing found and the download failed or was disabled.
    ValueError
        A file is there but is not in the CIFAR format.
    """
    x_train, y_train, x_test, y_test, path = _load_cifar(
        'CIFAR-100', _CIFAR100_LAYOUTS, bool(fine_labels), data_dir, download)
    return Dataset('cifar100', x_train, y_train, x_test, y_test,
                   num_classes=100 if fine_labels else 20, source=path)


def load(name, data_dir='.', download=True):
    """Load a dataset by name.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    data_dir : str
        Where CIFAR archives are looked for (ignored for ``digits``).
    download : bool
        Whether a missing CIFAR archive may be downloaded.

    Returns
    -------
    Dataset
    """
    if name == 'digits':
        return digits()
    if name == 'cifar10':
        return cifar10(data_dir, download)
    if name == 'cifar100':
        return cifar100(data_dir, download)
    raise ValueError('dataset %r is not known: expected one of %s' % (name, ', '.join(DATASETS)))


# ---------------------------------------------------------------------------
# sharding
# ---------------------------------------------------------------------------
def shard(n_items, rank, num_workers, seed=None):
    """Indices of the items worker `rank` of `num_workers` trains on.

    The shards of ranks ``0..num_workers-1`` are disjoint and together cover
    ``range(n_items)``; their sizes differ by at most one.

    Parameters
    ----------
    n_items : int
        Size of the dataset.
    rank : int
        This worker, ``0 <= rank < num_workers``.
    num_workers : int
        Workers in the job (>= 1).
    seed : int, optional
        If given, items are first permuted with this seed (the same on every
        worker, so the shards stay disjoint); otherwise shards are contiguous.

    Returns
    -------
    numpy.ndarray
        int64 indices, sorted when `seed` is None.
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


# ---------------------------------------------------------------------------
# minibatches
# ---------------------------------------------------------------------------
def _check_seed_parts(parts):
    for part in parts:
        if isinstance(part, bool) or int(part) != part or not 0 <= int(part) < 2 ** 32:
            raise ValueError('seed, rank, epoch and batch must be integers in [0, 2**32), '
                             'got %r' % (parts,))
    return [int(p) for p in parts]


def batch_rng(seed, rank, epoch, batch):
    """The random generator of one batch: a function of its four arguments only.

    Used for the augmentation of batch `batch` of epoch `epoch` on worker
    `rank`, so that batches come out the same however many threads prepare
    them and whether or not the run was resumed.
    """
    return np.random.RandomState(_check_seed_parts((seed, rank, epoch, batch, 1)))


def epoch_order(n_items, seed, rank, epoch):
    """The order in which worker `rank` visits its `n_items` images in epoch `epoch`.

    A permutation of ``range(n_items)`` that depends only on the arguments (so
    a resumed run sees the same order as an uninterrupted one).
    """
    rng = np.random.RandomState(_check_seed_parts((seed, rank, epoch, 0, 0)))
    return rng.permutation(int(n_items))


def crop_flip(images, rng, pad=4, flip=True):
    """Random crops of the zero-padded images and random horizontal flips.

    CIFAR's standard augmentation (He et al. 2016; GluonCV's ``RandomCrop(32,
    pad=4)`` and ``RandomFlipLeftRight``): every image is padded with `pad`
    zeros on each side, a window of the original size is cut at a random
    offset, and with probability 1/2 it is mirrored left-right.

    Parameters
    ----------
    images : numpy.ndarray
        ``(N, C, H, W)``; not modified.
    rng : numpy.random.RandomState
    pad : int
        Padding on each side, >= 0.
    flip : bool
        Whether to flip at random.

    Returns
    -------
    numpy.ndarray
        A new array of the same shape and dtype.
    """
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError('crop_flip expects NCHW images, got shape %s' % (images.shape,))
    pad = int(pad)
    if pad < 0:
        raise ValueError('pad must be >= 0, got %d' % pad)
    n, c, h, w = images.shape
    if pad:
        padded = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=images.dtype)
        padded[:, :, pad:pad + h, pad:pad + w] = images
        ys = rng.randint(0, 2 * pad + 1, size=n)
        xs = rng.randint(0, 2 * pad + 1, size=n)
        rows = (ys[:, None] + np.arange(h))[:, None, :, None]
        cols = (xs[:, None] + np.arange(w))[:, None, None, :]
        out = padded[np.arange(n)[:, None, None, None], np.arange(c)[None, :, None, None],
                     rows, cols]
    else:
        out = images.copy()
    if flip:
        mirrored = rng.rand(n) < 0.5
        out[mirrored] = out[mirrored][:, :, :, ::-1]
    return out


def iterate_batches(images, labels, batch_size, order, transform=None, num_threads=0,
                    ahead=None):
    """Yield ``(x, y)`` for every full batch of `images` / `labels` visited in `order`.

    Parameters
    ----------
    images, labels : numpy.ndarray
        The shard.
    batch_size : int
        Images per batch; a last partial batch is dropped (as GluonCV's
        ``last_batch='discard'``).
    order : numpy.ndarray
        Indices into `images`, e.g. from :func:`epoch_order`.
    transform : callable, optional
        ``transform(x, batch_index) -> x`` applied to each batch (the
        augmentation; it must take its randomness from `batch_index`, e.g.
        through :func:`batch_rng`, for the batches not to depend on threads).
    num_threads : int
        0: prepare each batch when it is asked for; N > 0: N threads prepare
        batches ahead of the consumer.
    ahead : int, optional
        Batches prepared ahead with threads (default ``2 * num_threads``).

    Yields
    ------
    tuple of numpy.ndarray
        ``(x, y)``, in order.  Closing the generator early (``break``) stops
        the threads.
    """
    batch_size = int(batch_size)
    if batch_size < 1:
        raise ValueError('batch_size must be >= 1, got %d' % batch_size)
    count = len(order) // batch_size

    def make(b):
        idx = order[b * batch_size:(b + 1) * batch_size]
        x, y = images[idx], labels[idx]
        if transform is not None:
            x = transform(x, b)
        return x, y

    if num_threads <= 0:
        for b in range(count):
            yield make(b)
        return
    ahead = max(1, 2 * num_threads if ahead is None else int(ahead))
    pool = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix='batches')
    try:
        pending = [pool.submit(make, b) for b in range(min(ahead, count))]
        for b in range(count):
            result = pending.pop(0).result()
            if b + ahead < count:
                pending.append(pool.submit(make, b + ahead))
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
