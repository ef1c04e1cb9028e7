"""The datasets of the training scripts, as ``mxnet.gluon.data`` datasets.

:func:`load` returns an :class:`ImageData`: a train and a test
``gluon.data.ArrayDataset`` of ``(H, W, C)`` images (pixel values 0..255, as
Gluon's vision datasets give them) and int32 labels.  Batches are made by
:mod:`.loader` (``gluon.data.DataLoader``, Gluon's transforms).

What is here, and why it is not simply Gluon's:

* **digits** (:func:`digits`) -- scikit-learn's bundled 8x8 handwritten digits,
  the default dataset: no download.  Gluon has no such dataset.
* **CIFAR, binary layout** (``cifar-10-batches-bin/``, ``cifar-100-binary/``,
  or the ``*.bin`` files directly under the data directory as Gluon's own
  download leaves them) -- read by Gluon's ``vision.CIFAR10`` /
  ``vision.CIFAR100``.  :class:`GluonCIFAR10` / :class:`GluonCIFAR100` only
  replace their download: Gluon's waits without a timeout (five tries) and
  overwrites any file that is not byte-identical to the official one.
* **CIFAR, python layout** (``cifar-10-batches-py/``, ``cifar-100-python/``:
  the CIFAR page's first archive, what torchvision and Keras download, and what
  ``mxnet-ssp-reproduce`` writes for its subsets) -- Gluon cannot read it;
  :class:`PickledCIFAR` is that reader.
* **archives** (``*.tar.gz`` from the CIFAR page) are extracted next to
  themselves first, as Gluon does with what it downloads.
* **download** -- when nothing is found, the python archive is downloaded with
  a timeout (:data:`DOWNLOAD_TIMEOUT`); when that fails,
  :class:`DatasetNotFoundError` names the data directory, every path looked
  for and the download error.

Images are kept as numpy arrays (Gluon's CIFAR keeps one ``NDArray``): a
numpy sample is a view, well under a microsecond, while an ``NDArray`` sample
is an MXNet call; the DataLoader makes each batch one ``NDArray``.
"""
import os
import pickle
import shutil
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass

import numpy as np
from mxnet import gluon
from mxnet.gluon.data import vision

__all__ = ['ImageData', 'DatasetNotFoundError', 'DATASETS', 'CIFAR_URLS', 'DOWNLOAD_TIMEOUT',
           'digits', 'cifar10', 'cifar100', 'load', 'download_file', 'arrays',
           'GluonCIFAR10', 'GluonCIFAR100', 'PickledCIFAR']

#: Names accepted by :func:`load`.
DATASETS = ('digits', 'cifar10', 'cifar100')

#: Official archives on the CIFAR page (https://www.cs.toronto.edu/~kriz/cifar.html).
CIFAR_URLS = {
    'cifar-10-python.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz',
    'cifar-10-binary.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz',
    'cifar-100-python.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz',
    'cifar-100-binary.tar.gz': 'https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz',
}

#: Seconds a download waits for the connection and for each read.
DOWNLOAD_TIMEOUT = 60.0


class DatasetNotFoundError(FileNotFoundError):
    """A dataset is not under the data directory and could not be downloaded."""


@dataclass
class ImageData:
    """A dataset's train and test split.

    Attributes
    ----------
    name : str
        One of :data:`DATASETS`.
    train, test : mxnet.gluon.data.Dataset
        Samples ``(image, label)``: a numpy ``(H, W, C)`` image with values
        0..255 (uint8 for CIFAR, float32 for the digits) and an int32 label.
    num_classes : int
    source : str
        Where the data came from (a path, or the scikit-learn loader).
    """
    name: str
    train: gluon.data.Dataset
    test: gluon.data.Dataset
    num_classes: int
    source: str = ''

    @property
    def image_shape(self):
        """``(C, H, W)`` of one image as the network sees it (after ``ToTensor``)."""
        h, w, c = self.train[0][0].shape
        return c, h, w

    def __repr__(self):
        return ('ImageData(%s: %d train, %d test, %d classes, from %s)'
                % (self.name, len(self.train), len(self.test), self.num_classes, self.source))


def arrays(dataset):
    """``(images, labels)`` of a dataset from :func:`load`, as numpy arrays (views)."""
    images, labels = dataset[:]
    return np.asarray(images), np.asarray(labels)


def digits(test_size=360, seed=0):
    """scikit-learn's bundled 8x8 digits, split once into a fixed stratified train/test split.

    Parameters
    ----------
    test_size : int
        Number of test images (the rest, 1797 - `test_size`, are for training).
    seed : int
        Seed of the split; the default gives the split every run and worker uses.

    Returns
    -------
    ImageData
        ``(8, 8, 1)`` float32 images, the 0..16 intensities scaled to 0..255
        (so ``ToTensor`` maps them to [0, 1] as it does CIFAR's bytes), 10
        classes; 1437 train / 360 test with the defaults.
    """
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as err:
        raise ImportError("the digits come with scikit-learn, which cannot be imported (%s): "
                          "python -m pip install 'scikit-learn>=1.0' (mxnet-ssp's [demo] and "
                          "[test] extras include it)" % err) from err
    bunch = load_digits()
    images = (bunch.images.astype(np.float32) * np.float32(255.0 / 16.0))[:, :, :, None]
    labels = bunch.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_size, random_state=seed, stratify=labels)
    return ImageData('digits', gluon.data.ArrayDataset(np.ascontiguousarray(x_train), y_train),
                     gluon.data.ArrayDataset(np.ascontiguousarray(x_test), y_test),
                     num_classes=10, source='sklearn.datasets.load_digits')


# ---------------------------------------------------------------------------
# CIFAR readers
# ---------------------------------------------------------------------------
class _OfflineCIFAR:
    """Gluon's CIFAR reader without its download: a file it cannot read is an error here."""

    def _get_data(self):
        # MXNet 1.9.1's CIFAR10._get_data, minus the SHA1 check that triggers the download;
        # _read_batch (Gluon's reader of the binary records) does the reading.
        names = self._train_data if self._train else self._test_data
        parts = []
        for name, _ in names:
            path = os.path.join(self._root, name)
            try:
                parts.append(self._read_batch(path))
            except ValueError as err:      # a size that is no multiple of the record
                raise ValueError('%s is not a CIFAR binary batch: %d bytes is not a multiple '
                                 'of the %d-byte record (%s)'
                                 % (path, os.path.getsize(path), self._record, err)) from None
        # numpy, not NDArray as in Gluon: a numpy sample is a view, an NDArray one an MXNet call
        self._data = np.concatenate([p[0] for p in parts])
        self._label = np.concatenate([p[1] for p in parts])


class GluonCIFAR10(_OfflineCIFAR, vision.CIFAR10):
    """``gluon.data.vision.CIFAR10`` reading `root` only (never downloading); samples are
    numpy ``(32, 32, 3)`` uint8 images and int32 labels."""
    _record = 1 + 3072


class GluonCIFAR100(_OfflineCIFAR, vision.CIFAR100):
    """``gluon.data.vision.CIFAR100`` reading `root` only (never downloading)."""
    _record = 2 + 3072


class PickledCIFAR(gluon.data.ArrayDataset):
    """CIFAR-10/100 in the python layout (pickled dicts), which Gluon does not read.

    Parameters
    ----------
    root : str
        ``cifar-10-batches-py`` or ``cifar-100-python`` directory.
    members : list of str
        The batch files to read (``data_batch_1``.., ``test_batch``, ``train``, ``test``).
    label_key : str
        ``labels`` (CIFAR-10), ``fine_labels`` or ``coarse_labels`` (CIFAR-100).
    """

    def __init__(self, root, members, label_key):
        images, labels = [], []
        for member in members:
            path = os.path.join(root, member)
            with open(path, 'rb') as f:
                x, y = self._read(f.read(), label_key, path)
            images.append(x)
            labels.append(y)
        super().__init__(np.concatenate(images), np.concatenate(labels))

    @staticmethod
    def _read(raw, label_key, where):
        try:
            batch = pickle.loads(raw, encoding='bytes')
        except Exception as err:  # a truncated or foreign file: say which one
            raise ValueError('%s is not a CIFAR python batch: %s' % (where, err)) from None
        batch = {(k.decode() if isinstance(k, bytes) else k): v for k, v in batch.items()}
        if 'data' not in batch or label_key not in batch:
            raise ValueError('%s is not a CIFAR python batch: it has keys %s, expected data and '
                             '%s' % (where, sorted(batch), label_key))
        data = np.asarray(batch['data'], dtype=np.uint8)
        labels = np.asarray(batch[label_key], dtype=np.int32)
        if data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
            raise ValueError('%s is not a CIFAR python batch: data %s, %d labels'
                             % (where, data.shape, len(labels)))
        # rows of R, G, B planes -> (N, H, W, C) like Gluon's CIFAR
        return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


# ---------------------------------------------------------------------------
# finding CIFAR under --data-dir
# ---------------------------------------------------------------------------
# Each layout: (format, directory, archive, train members, test member).  The binary layout
# is also accepted directly under the data directory (Gluon's own download leaves it so).
_LAYOUTS = {
    'cifar10': (('python', 'cifar-10-batches-py', 'cifar-10-python.tar.gz',
                 ['data_batch_%d' % i for i in range(1, 6)], 'test_batch'),
                ('binary', 'cifar-10-batches-bin', 'cifar-10-binary.tar.gz',
                 ['data_batch_%d.bin' % i for i in range(1, 6)], 'test_batch.bin')),
    'cifar100': (('python', 'cifar-100-python', 'cifar-100-python.tar.gz', ['train'], 'test'),
                 ('binary', 'cifar-100-binary', 'cifar-100-binary.tar.gz', ['train.bin'],
                  'test.bin')),
}


def _complete(directory, members):
    return all(os.path.isfile(os.path.join(directory, m)) for m in members)


def _extract(archive, data_dir, subdir):
    """Extract `subdir` of `archive` into `data_dir` (atomically: concurrent workers agree)."""
    target = os.path.join(data_dir, subdir)
    tmp = tempfile.mkdtemp(prefix='.extract-', dir=data_dir)
    try:
        with tarfile.open(archive, 'r:gz') as tar:
            names = {os.path.normpath(m.name).split(os.sep)[0] for m in tar.getmembers()}
            if subdir not in names:
                raise ValueError('%s does not contain %s/' % (archive, subdir))
            tar.extractall(tmp, filter='data')
        if not os.path.isdir(target):
            os.rename(os.path.join(tmp, subdir), target)
    except OSError:
        if not os.path.isdir(target):       # another worker may have won the rename
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _find(name, data_dir):
    """(format, directory, train members, test member, source) of the first layout found."""
    for fmt, subdir, archive, train, test in _LAYOUTS[name]:
        directory = os.path.join(data_dir, subdir)
        if _complete(directory, train + [test]):
            return fmt, directory, train, test, directory
        if fmt == 'binary' and _complete(data_dir, train + [test]):
            return fmt, data_dir, train, test, data_dir
        archive_path = os.path.join(data_dir, archive)
        if os.path.isfile(archive_path):
            directory = _extract(archive_path, data_dir, subdir)
            if not _complete(directory, train + [test]):
                raise ValueError('%s has no %s' % (archive_path, ', '.join(
                    os.path.join(subdir, m) for m in train + [test])))
            return fmt, directory, train, test, '%s (from %s)' % (directory, archive_path)
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


def _locate_cifar(name, data_dir, download):
    """Find (or download) CIFAR under `data_dir`; see :func:`_find` for what is returned."""
    found = _find(name, data_dir)
    download_error = None
    if found is None and download:
        archive = _LAYOUTS[name][0][2]          # the python archive
        url = CIFAR_URLS[archive]
        created = not os.path.isdir(data_dir)
        try:
            os.makedirs(data_dir, exist_ok=True)
            download_file(url, os.path.join(data_dir, archive))
        except Exception as err:                # network, proxy, disk: all end the same way
            download_error = 'downloading %s failed: %s: %s' % (url, type(err).__name__, err)
            if created and os.path.isdir(data_dir) and not os.listdir(data_dir):
                os.rmdir(data_dir)              # leave no empty directory behind
        found = _find(name, data_dir)
    if found is None:
        looked = []
        for fmt, subdir, archive, train, test in _LAYOUTS[name]:
            looked.append('%s/{%s}' % (os.path.join(data_dir, subdir), ','.join(train + [test])))
            looked.append(os.path.join(data_dir, archive))
            if fmt == 'binary':
                looked.append('%s/{%s}' % (data_dir, ','.join(train + [test])))
        reason = (download_error if download_error is not None
                  else 'download disabled (download=False)')
        raise DatasetNotFoundError(
            '%s not found under --data-dir %s; looked for:\n  %s\nand %s. Put one of these '
            'there (archives from https://www.cs.toronto.edu/~kriz/cifar.html) or point '
            '--data-dir at the directory that holds them.'
            % (name.upper().replace('CIFAR', 'CIFAR-'), data_dir, '\n  '.join(looked), reason))
    return found


def _load_cifar(name, data_dir, download, fine_labels=True):
    data_dir = os.path.abspath(os.path.expanduser(data_dir or '.'))
    fmt, directory, train, test, source = _locate_cifar(name, data_dir, download)
    if fmt == 'python':
        key = 'labels' if name == 'cifar10' else ('fine_labels' if fine_labels else
                                                  'coarse_labels')
        splits = [PickledCIFAR(directory, members, key) for members in (train, [test])]
    else:
        if name == 'cifar10':
            splits = [GluonCIFAR10(directory, train=t) for t in (True, False)]
        else:
            splits = [GluonCIFAR100(directory, fine_label=fine_labels, train=t)
                      for t in (True, False)]
    classes = 10 if name == 'cifar10' else (100 if fine_labels else 20)
    return ImageData(name, splits[0], splits[1], num_classes=classes, source=source)


def cifar10(data_dir='.', download=True):
    """Load CIFAR-10 from `data_dir`, downloading the python archive if nothing is there.

    Parameters
    ----------
    data_dir : str
        Directory holding ``cifar-10-batches-py/``, ``cifar-10-batches-bin/``, the
        ``*.bin`` files, ``cifar-10-python.tar.gz`` or ``cifar-10-binary.tar.gz``
        (first found wins; an archive is extracted there).
    download : bool
        Download ``cifar-10-python.tar.gz`` into `data_dir` when nothing is found.

    Returns
    -------
    ImageData
        ``(32, 32, 3)`` uint8 images, 10 classes (50000 / 10000 for the full set).

    Raises
    ------
    DatasetNotFoundError
        Nothing found and the download failed or was disabled.
    ValueError
        A file is there but is not in the CIFAR format.
    """
    return _load_cifar('cifar10', data_dir, download)


def cifar100(data_dir='.', download=True, fine_labels=True):
    """Load CIFAR-100 like :func:`cifar10` (``cifar-100-python/``, ``cifar-100-binary/``,
    their archives); `fine_labels`: the 100 classes (default) or the 20 superclasses."""
    return _load_cifar('cifar100', data_dir, download, fine_labels)


def load(name, data_dir='.', download=True):
    """Load a dataset by name (one of :data:`DATASETS`); `data_dir` and `download` are for
    CIFAR.  Returns an :class:`ImageData`."""
    if name == 'digits':
        return digits()
    if name in _LAYOUTS:
        return _load_cifar(name, data_dir, download)
    raise ValueError('dataset %r is not known: expected one of %s' % (name, ', '.join(DATASETS)))
