"""Tests of mxnet_ssp.lab.data and .cifar: digits and the CIFAR readers on generated
archives.

The CIFAR archives here are written in the official formats (python pickles
of dicts with byte-string keys, and fixed-size binary records) with a few
records whose pixels follow a known pattern, so that the tests check the
channel/row/column layout, not only shapes.  No test touches the network.
"""
import os

import numpy as np
import pytest
from mxnet.gluon.data import vision
from mxnet.gluon.data.vision import datasets as vision_datasets

from mxnet_ssp.lab import cifar, data, splits
from mxnet_ssp.lab.bundled import bundled_file

from cifar_files import (check_cifar10, check_cifar100, make_tar, write_cifar10_binary,
                         write_cifar10_python, write_cifar100_binary, write_cifar100_python)


# ---------------------------------------------------------------------------
# generated CIFAR archives
# ---------------------------------------------------------------------------
@pytest.fixture
def no_network(monkeypatch):
    """Make every download fail as it does on a machine without internet; Gluon's own
    download (which must never be called) is recorded as well."""
    calls = []

    def fail(url, dest, timeout=None):
        calls.append((url, dest))
        raise OSError('network is unreachable (test)')

    def gluon_download(*args, **kwargs):
        calls.append(('gluon',) + args)
        raise OSError('gluon download (test)')

    monkeypatch.setattr(cifar, 'download_file', fail)
    monkeypatch.setattr(vision_datasets, 'download', gluon_download)
    return calls


# ---------------------------------------------------------------------------
# digits
# ---------------------------------------------------------------------------
def test_digits_shapes_labels_and_range():
    ds = data.digits()
    assert ds.name == 'digits' and ds.num_classes == 10
    (x_train, y_train), (x_test, y_test) = data.arrays(ds.train), data.arrays(ds.test)
    assert x_train.shape == (1437, 8, 8, 1) and x_test.shape == (360, 8, 8, 1)
    assert ds.image_shape == (1, 8, 8)
    assert x_train.dtype == np.float32 and x_test.dtype == np.float32
    assert y_train.dtype == np.int32 and y_train.shape == (1437,)
    assert 0.0 <= x_train.min() and x_train.max() == 255.0         # 0..16 scaled to 0..255
    assert set(y_train.tolist()) == set(range(10))
    # stratified: every class has 35-37 test images (1797 images, 174-183 per class)
    counts = np.bincount(y_test, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37


def test_digits_split_is_fixed_and_complete():
    from sklearn.datasets import load_digits
    a, b = data.digits(), data.digits()
    np.testing.assert_array_equal(data.arrays(a.train)[0], data.arrays(b.train)[0])
    np.testing.assert_array_equal(data.arrays(a.test)[1], data.arrays(b.test)[1])
    # train + test is exactly the bundled dataset (as a multiset of image+label rows)
    bunch = load_digits()
    original = np.hstack([bunch.data / 16.0, bunch.target[:, None]])
    ours = np.vstack([np.hstack([x.reshape(len(x), -1) / 255.0, y[:, None]])
                      for x, y in (data.arrays(a.train), data.arrays(a.test))])
    np.testing.assert_allclose(np.array(sorted(map(tuple, ours))),
                               np.array(sorted(map(tuple, original))), rtol=0, atol=1e-6)
    other = data.digits(seed=1)
    assert not np.array_equal(data.arrays(other.test)[1], data.arrays(a.test)[1])


@pytest.mark.parametrize('name,test_size,seed', splits.KEPT)
def test_the_kept_splits_are_sklearns(name, test_size, seed):
    """data.digits and data.mnist5k read their file and take the kept split, without
    scikit-learn: the same arrays, in the same order, as train_test_split gives them."""
    from sklearn.model_selection import train_test_split
    table = np.loadtxt(bundled_file(name), delimiter=',')
    labels = table[:, -1].astype(np.int32)
    rows = np.arange(len(labels))
    train, test = train_test_split(rows, test_size=test_size, random_state=seed, stratify=labels)
    kept = splits.kept_split(name, labels, test_size, seed)
    assert kept is not None
    np.testing.assert_array_equal(kept[0], train)
    np.testing.assert_array_equal(kept[1], test)
    ds = getattr(data, name)()
    (x_train, y_train), (x_test, y_test) = data.arrays(ds.train), data.arrays(ds.test)
    np.testing.assert_array_equal(y_train, labels[train])
    np.testing.assert_array_equal(y_test, labels[test])
    side = 8 if name == 'digits' else 28
    scale = 255.0 / 16.0 if name == 'digits' else 1.0
    images = table[:, :-1].reshape(-1, side, side, 1).astype(np.float32) * np.float32(scale)
    np.testing.assert_array_equal(x_train, images[train])
    np.testing.assert_array_equal(x_test, images[test])
    if name == 'digits':                              # scikit-learn's own loader, too
        from sklearn.datasets import load_digits
        bunch = load_digits()
        np.testing.assert_array_equal(
            x_test[..., 0], bunch.images[test].astype(np.float32) * np.float32(scale))
        np.testing.assert_array_equal(y_test, bunch.target[test])


class _FoundButNotImportable:
    """A finder that finds scikit-learn where it is installed (so its data files are
    found) and whose loader refuses to import it."""

    def find_spec(self, name, path=None, target=None):
        import importlib.machinery
        if name.split('.')[0] != 'sklearn':
            return None
        real = importlib.machinery.PathFinder.find_spec(name, path)
        if real is None:
            return None
        spec = importlib.machinery.ModuleSpec(name, self, origin=real.origin,
                                              is_package=real.submodule_search_locations
                                              is not None)
        spec.submodule_search_locations = real.submodule_search_locations
        return spec

    def create_module(self, spec):
        raise ImportError('%s: refused by the test' % spec.name)

    def exec_module(self, module):
        raise ImportError('refused by the test')


def test_the_default_splits_need_no_sklearn_and_others_name_it(monkeypatch):
    import sys
    for module in [m for m in sys.modules if m.split('.')[0] == 'sklearn']:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(sys, 'meta_path', [_FoundButNotImportable()] + sys.meta_path)
    with pytest.raises(ImportError, match='refused by the test'):
        import sklearn  # noqa: F401
    assert len(data.digits().test) == 360 and len(data.mnist5k().test) == 1000
    with pytest.raises(ImportError, match=r"digits is split with scikit-learn.*"
                                          r"pip install 'scikit-learn>=1\.0'"):
        data.digits(seed=1)
    with pytest.raises(ImportError, match='mnist5k is split with scikit-learn'):
        data.mnist5k(test_size=500)
    assert not [m for m in sys.modules if m.split('.')[0] == 'sklearn']


def test_a_kept_split_serves_only_the_labels_it_was_made_from():
    labels = data.labels_of('digits')
    assert splits.kept_split('digits', labels, 360, 0) is not None
    assert splits.kept_split('digits', labels, 360, 1) is None          # another seed
    assert splits.kept_split('digits', labels, 300, 0) is None          # another size
    other = labels.copy()
    other[[0, 1]] = other[[1, 0]]
    assert other[0] != other[1] and splits.kept_split('digits', other, 360, 0) is None
    assert splits.kept_split('mnist5k', labels, 360, 0) is None


def test_kept_indices_round_trip_and_refuse_what_they_cannot_hold():
    rows = np.array([0, 1, 65535, 1796, 7])
    np.testing.assert_array_equal(splits.decode(splits.encode(rows)), rows)
    for bad in ([65536], [-1]):
        with pytest.raises(ValueError, match='0..65535'):
            splits.encode(bad)


def test_the_kept_splits_module_is_what_the_writer_writes(tmp_path):
    """`python -m mxnet_ssp.lab.splits` writes the committed file again."""
    import sklearn
    written = splits.write(str(tmp_path / 'kept.py'))
    ours = os.path.join(os.path.dirname(splits.__file__), '_kept_splits.py')
    with open(ours) as f:
        committed = f.read()
    with open(written) as f:
        again = f.read()
    assert again.replace(sklearn.__version__, 'X') == committed.replace(
        committed.split('scikit-learn ')[1].split(')')[0], 'X')


def test_load_by_name():
    assert data.load('digits').name == 'digits'
    with pytest.raises(ValueError, match='cifar10'):
        data.load('mnist')


# ---------------------------------------------------------------------------
# CIFAR readers
# ---------------------------------------------------------------------------
def test_cifar10_python_dir(tmp_path, no_network):
    write_cifar10_python(str(tmp_path))
    ds = data.cifar10(str(tmp_path))
    check_cifar10(ds)
    assert isinstance(ds.train, cifar.PickledCIFAR)
    assert no_network == []


def test_cifar10_binary_dir_is_read_by_gluons_cifar10(tmp_path, no_network):
    write_cifar10_binary(str(tmp_path))
    ds = data.cifar10(str(tmp_path))
    check_cifar10(ds)
    # Gluon's reader; its SHA1 check would download (these are not the official files)
    assert isinstance(ds.train, vision.CIFAR10) and isinstance(ds.test, vision.CIFAR10)
    assert no_network == []


def test_gluons_own_layout_binary_files_directly_under_data_dir(tmp_path, no_network):
    d = write_cifar10_binary(str(tmp_path))
    flat = tmp_path / 'flat'
    os.rename(d, flat)                                 # data_batch_1.bin ... in --data-dir
    ds = data.cifar10(str(flat))
    check_cifar10(ds)
    assert ds.source == str(flat) and no_network == []


def test_cifar10_tar_gz_both_formats(tmp_path, no_network):
    src = tmp_path / 'src'
    src.mkdir()
    py_dir = write_cifar10_python(str(src))
    (tmp_path / 'py').mkdir()
    make_tar(py_dir, str(tmp_path / 'py' / 'cifar-10-python.tar.gz'))
    ds = data.cifar10(str(tmp_path / 'py'))
    check_cifar10(ds)
    assert 'cifar-10-python.tar.gz' in ds.source
    assert (tmp_path / 'py' / 'cifar-10-batches-py' / 'test_batch').is_file()   # extracted
    assert [p.name for p in (tmp_path / 'py').iterdir() if p.name.startswith('.')] == []
    check_cifar10(data.cifar10(str(tmp_path / 'py')))  # again, from the extracted directory
    bin_dir = write_cifar10_binary(str(src))
    (tmp_path / 'bin').mkdir()
    make_tar(bin_dir, str(tmp_path / 'bin' / 'cifar-10-binary.tar.gz'))
    check_cifar10(data.cifar10(str(tmp_path / 'bin')))
    assert no_network == []


def test_archive_without_the_expected_directory(tmp_path, no_network):
    src = tmp_path / 'src'
    src.mkdir()
    other = src / 'something-else'
    other.mkdir()
    (other / 'x').write_text('x')
    (tmp_path / 'data').mkdir()
    make_tar(str(other), str(tmp_path / 'data' / 'cifar-10-python.tar.gz'))
    with pytest.raises(ValueError, match='cifar-10-python.tar.gz does not contain '
                                         'cifar-10-batches-py'):
        data.cifar10(str(tmp_path / 'data'))


def test_archive_in_a_read_only_directory(tmp_path, no_network, monkeypatch):
    """A read-only --data-dir: the archive is extracted into the cache; with the cache
    read-only too, the error names both places."""
    import tempfile
    from mxnet_ssp.lab import cifar
    src = tmp_path / 'src'
    src.mkdir()
    (tmp_path / 'ro').mkdir()
    archive = str(tmp_path / 'ro' / 'cifar-10-python.tar.gz')
    batches = write_cifar10_python(str(src))
    make_tar(batches, archive)
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
    mkdtemp = tempfile.mkdtemp
    denied = [str(tmp_path / 'ro')]

    def read_only(*args, **kwargs):       # what mkdtemp does there (the tests run as root)
        if kwargs.get('dir') in denied:
            raise PermissionError(13, 'Permission denied', kwargs.get('dir'))
        return mkdtemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, 'mkdtemp', read_only)
    loaded = data.cifar10(str(tmp_path / 'ro'))
    assert len(loaded.train) == len(data.cifar10(str(src)).train)
    assert os.listdir(str(tmp_path / 'ro')) == ['cifar-10-python.tar.gz']
    assert os.path.isdir(os.path.join(cifar.cache_dir(archive), 'cifar-10-batches-py'))

    os.makedirs(str(tmp_path / 'ro2'))
    other = str(tmp_path / 'ro2' / 'cifar-10-python.tar.gz')
    make_tar(batches, other)
    denied[:] = [str(tmp_path / 'ro2'), cifar.cache_dir(other)]
    with pytest.raises(data.DatasetNotFoundError,
                       match='(?s)cannot extract.*--data-dir .*ro2.*nor into the cache.*'
                             'Permission denied'):
        data.cifar10(str(tmp_path / 'ro2'))


@pytest.mark.parametrize('fmt', ['python', 'binary'])
@pytest.mark.parametrize('fine', [True, False])
def test_cifar100_formats(tmp_path, no_network, fmt, fine):
    writer = write_cifar100_python if fmt == 'python' else write_cifar100_binary
    directory = writer(str(tmp_path / 'dir'))
    check_cifar100(data.cifar100(str(tmp_path / 'dir'), fine_labels=fine), fine)
    (tmp_path / 'tar').mkdir()
    archive = 'cifar-100-python.tar.gz' if fmt == 'python' else 'cifar-100-binary.tar.gz'
    make_tar(directory, str(tmp_path / 'tar' / archive))
    check_cifar100(data.cifar100(str(tmp_path / 'tar'), fine_labels=fine), fine)
    assert no_network == []


def test_corrupt_binary_batch_is_reported(tmp_path, no_network):
    d = write_cifar10_binary(str(tmp_path))
    with open(os.path.join(d, 'test_batch.bin'), 'ab') as f:
        f.write(b'\x00' * 10)
    with pytest.raises(ValueError, match='test_batch.bin.*3073-byte record'):
        data.cifar10(str(tmp_path))
    assert no_network == []


def test_missing_cifar_and_failed_download_gives_clear_error(tmp_path, no_network):
    missing = tmp_path / 'nothing-here'
    with pytest.raises(data.DatasetNotFoundError) as info:
        data.cifar10(str(missing))
    msg = str(info.value)
    assert '--data-dir' in msg and str(missing) in msg
    for looked_for in ('cifar-10-batches-py', 'data_batch_1', 'test_batch',
                       'cifar-10-python.tar.gz', 'cifar-10-batches-bin', 'cifar-10-binary.tar.gz',
                       '%s/{data_batch_1.bin' % missing):
        assert looked_for in msg
    assert 'failed' in msg and 'network is unreachable (test)' in msg
    assert data.CIFAR_URLS['cifar-10-python.tar.gz'] in msg
    assert no_network == [(data.CIFAR_URLS['cifar-10-python.tar.gz'],
                           str(missing / 'cifar-10-python.tar.gz'))]
    assert not missing.exists()          # no empty directory left behind
    assert isinstance(info.value, FileNotFoundError)

    with pytest.raises(data.DatasetNotFoundError,
                       match='(?s)cifar-100-python.*cifar-100-binary.tar.gz'):
        data.cifar100(str(missing))


def test_missing_cifar_without_download(tmp_path, no_network):
    with pytest.raises(data.DatasetNotFoundError, match='download disabled'):
        data.cifar100(str(tmp_path), download=False)
    assert no_network == []


def test_download_is_used_when_missing(tmp_path, monkeypatch):
    src = tmp_path / 'src'
    src.mkdir()
    archive = make_tar(write_cifar10_python(str(src)), str(tmp_path / 'made.tar.gz'))

    def fake_download(url, dest, timeout=None):
        assert url == data.CIFAR_URLS['cifar-10-python.tar.gz']
        assert timeout is None or timeout == data.DOWNLOAD_TIMEOUT
        with open(archive, 'rb') as f_in, open(dest, 'wb') as f_out:
            f_out.write(f_in.read())

    monkeypatch.setattr(cifar, 'download_file', fake_download)
    check_cifar10(data.cifar10(str(tmp_path / 'data')))
    assert (tmp_path / 'data' / 'cifar-10-python.tar.gz').is_file()


def test_download_file_gives_up_after_its_timeout(tmp_path):
    """A server that accepts the connection and never answers: the download fails after
    the timeout instead of waiting for ever (Gluon's own download has no timeout)."""
    import socket
    import time
    with socket.socket() as server:
        server.bind(('127.0.0.1', 0))
        server.listen(1)
        url = 'http://127.0.0.1:%d/cifar-10-python.tar.gz' % server.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(OSError, match='timed out'):
            cifar.download_file(url, str(tmp_path / 'x.tar.gz'), timeout=0.5)
        assert time.monotonic() - start < 10
    assert list(tmp_path.iterdir()) == []              # no partial file left
