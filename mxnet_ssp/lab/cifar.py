"""CIFAR-10/100 under ``--data-dir``, as ``gluon.data`` datasets; used by :mod:`.data`.

Why each piece is here rather than only Gluon's ``vision.CIFAR10`` / ``CIFAR100``:

* **binary layout** (``cifar-10-batches-bin/``, ``cifar-100-binary/``, or the
  ``*.bin`` files directly under the data directory as Gluon's own download
  leaves them) -- read by Gluon's classes.  :class:`GluonCIFAR10` /
  :class:`GluonCIFAR100` only take out their download: Gluon's checks each
  file's SHA1, then downloads with no timeout (five tries) and extracts over
  any file that is not byte-identical to the official one.
* **python layout** (``cifar-10-batches-py/``, ``cifar-100-python/``: the CIFAR
  page's first archive, what torchvision and Keras download, and what
  ``mxnet-ssp-reproduce`` writes for its subsets) -- Gluon has no reader for
  it; :class:`PickledCIFAR` is that reader.
* **archives** (``*.tar.gz`` from the CIFAR page) are extracted next to
  themselves first, as Gluon does with what it downloads; in a read-only
  directory, into a cache directory instead (:func:`cache_dir`).
* **download** -- when nothing is found, the python archive is downloaded with
  a timeout (:data:`DOWNLOAD_TIMEOUT`); when that fails,
  :class:`DatasetNotFoundError` names the data directory, every path looked
  for and the download error.

Images stay numpy arrays (Gluon's CIFAR keeps one ``NDArray``): a numpy
sample is a view, well under a microsecond, while an ``NDArray`` sample is an
MXNet call.
"""
import hashlib
import os
import pickle
import shutil
import tarfile
import tempfile
import urllib.request

import numpy as np
from mxnet import gluon
from mxnet.gluon.data import vision

__all__ = ['DatasetNotFoundError', 'CIFAR_URLS', 'DOWNLOAD_TIMEOUT', 'GluonCIFAR10',
           'GluonCIFAR100', 'PickledCIFAR', 'download_file', 'load_cifar']

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


def cache_dir(archive, environ=None):
    """Where an archive in a read-only directory is extracted: a directory of its own under
    ``$XDG_CACHE_HOME`` (default ``~/.cache``)/mxnet-ssp, named by the archive's path."""
    env = os.environ if environ is None else environ
    base = env.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    tag = hashlib.sha1(os.path.abspath(archive).encode()).hexdigest()[:16]
    return os.path.join(base, 'mxnet-ssp', 'cifar-%s' % tag)


def _extract(archive, data_dir, subdir):
    """Extract `subdir` of `archive` into `data_dir` (atomically: concurrent workers agree);
    into :func:`cache_dir` when `data_dir` is read-only."""
    tmp = None
    errors = []
    for where in (data_dir, cache_dir(archive)):
        target = os.path.join(where, subdir)
        if where != data_dir and os.path.isdir(target):
            return target                  # extracted there by an earlier run
        try:
            os.makedirs(where, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix='.extract-', dir=where)
            break
        except OSError as err:
            errors.append('%s: %s' % (where, err))
    if tmp is None:
        raise DatasetNotFoundError(
            'found %s but cannot extract it into --data-dir %s nor into the cache (%s); extract '
            'it (tar xzf) into a writable directory and point --data-dir there'
            % (archive, data_dir, '; '.join(errors)))
    try:
        with tarfile.open(archive, 'r:gz') as tar:
            names = {os.path.normpath(m.name).split(os.sep)[0] for m in tar.getmembers()}
            if subdir not in names:
                raise ValueError('%s does not contain %s/' % (archive, subdir))
            if hasattr(tarfile, 'data_filter'):   # Python >= 3.8.17 / 3.11.4: no '..' paths
                tar.extractall(tmp, filter='data')
            else:
                tar.extractall(tmp)
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


def load_cifar(name, data_dir, download=True, fine_labels=True):
    """Read ``cifar10`` or ``cifar100`` from `data_dir` (see the module's docstring for where
    it is looked for); returns (train, test, number of classes, where it was read).

    Raises
    ------
    DatasetNotFoundError
        Nothing found and the download failed or was disabled.
    ValueError
        A file is there but is not in the CIFAR format.
    """
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
    return splits[0], splits[1], classes, source
