"""Tests of mxnet_ssp.experiments.data: digits, CIFAR readers on generated archives, sharding.

The CIFAR archives here are written in the official formats (python pickles
of dicts with byte-string keys, and fixed-size binary records) with a few
records whose pixels follow a known pattern, so that the tests check the
channel/row/column layout, not only shapes.  No test touches the network.
"""
import os
import pickle
import tarfile

import numpy as np
import pytest

from mxnet_ssp.experiments import data


# ---------------------------------------------------------------------------
# generated CIFAR archives
# ---------------------------------------------------------------------------
def pattern(first, count):
    """Images ``first..first+count-1`` as (count, 3072) uint8 in CIFAR's row layout."""
    i = np.arange(first, first + count)[:, None, None, None]
    c = np.arange(3)[None, :, None, None]
    y = np.arange(32)[None, None, :, None]
    x = np.arange(32)[None, None, None, :]
    return ((i * 7 + c * 50 + y * 3 + x) % 256).astype(np.uint8).reshape(count, 3072)


def labels_for(first, count, classes):
    return [(first + k) % classes for k in range(count)]


def write_cifar10_python(root, per_batch=3):
    d = os.path.join(root, 'cifar-10-batches-py')
    os.makedirs(d)
    names = ['data_batch_%d' % i for i in range(1, 6)] + ['test_batch']
    for n, name in enumerate(names):
        first = n * per_batch
        batch = {b'batch_label': name.encode(), b'labels': labels_for(first, per_batch, 10),
                 b'data': pattern(first, per_batch),
                 b'filenames': [b'img%d.png' % k for k in range(per_batch)]}
        with open(os.path.join(d, name), 'wb') as f:
            pickle.dump(batch, f, protocol=2)
    with open(os.path.join(d, 'batches.meta'), 'wb') as f:
        pickle.dump({b'label_names': [b'c%d' % k for k in range(10)]}, f, protocol=2)
    return d


def write_cifar10_binary(root, per_batch=3):
    d = os.path.join(root, 'cifar-10-batches-bin')
    os.makedirs(d)
    names = ['data_batch_%d.bin' % i for i in range(1, 6)] + ['test_batch.bin']
    for n, name in enumerate(names):
        first = n * per_batch
        labels = np.array(labels_for(first, per_batch, 10), dtype=np.uint8)[:, None]
        records = np.concatenate([labels, pattern(first, per_batch)], axis=1)
        with open(os.path.join(d, name), 'wb') as f:
            f.write(records.tobytes())
    return d


def write_cifar100_python(root, n_train=5, n_test=2):
    d = os.path.join(root, 'cifar-100-python')
    os.makedirs(d)
    for name, first, count in (('train', 0, n_train), ('test', n_train, n_test)):
        batch = {b'filenames': [b'x.png'] * count, b'batch_label': name.encode(),
                 b'fine_labels': labels_for(first, count, 100),
                 b'coarse_labels': [k % 20 for k in labels_for(first + 3, count, 100)],
                 b'data': pattern(first, count)}
        with open(os.path.join(d, name), 'wb') as f:
            pickle.dump(batch, f, protocol=2)
    return d


def write_cifar100_binary(root, n_train=5, n_test=2):
    d = os.path.join(root, 'cifar-100-binary')
    os.makedirs(d)
    for name, first, count in (('train.bin', 0, n_train), ('test.bin', n_train, n_test)):
        fine = np.array(labels_for(first, count, 100), dtype=np.uint8)[:, None]
        coarse = np.array([k % 20 for k in labels_for(first + 3, count, 100)],
                          dtype=np.uint8)[:, None]
        records = np.concatenate([coarse, fine, pattern(first, count)], axis=1)
        with open(os.path.join(d, name), 'wb') as f:
            f.write(records.tobytes())
    return d


def make_tar(directory, tar_path):
    """Pack `directory` as the official archives do: members under its base name."""
    with tarfile.open(tar_path, 'w:gz') as tar:
        tar.add(directory, arcname=os.path.basename(directory))
    return tar_path


def expected_images(first, count):
    return pattern(first, count).reshape(count, 3, 32, 32).astype(np.float32) / 255.0


def check_cifar10(ds, per_batch=3):
    assert ds.name == 'cifar10' and ds.num_classes == 10
    assert ds.train_data.shape == (5 * per_batch, 3, 32, 32)
    assert ds.test_data.shape == (per_batch, 3, 32, 32)
    assert ds.train_data.dtype == np.float32 and ds.train_label.dtype == np.int32
    np.testing.assert_array_equal(ds.train_data, expected_images(0, 5 * per_batch))
    np.testing.assert_array_equal(ds.test_data, expected_images(5 * per_batch, per_batch))
    assert ds.train_label.tolist() == labels_for(0, 5 * per_batch, 10)
    assert ds.test_label.tolist() == labels_for(5 * per_batch, per_batch, 10)
    # layout: channel, then row, then column
    assert ds.train_data[1, 2, 4, 5] == pytest.approx(((1 * 7 + 2 * 50 + 4 * 3 + 5) % 256) / 255.0)


def check_cifar100(ds, fine=True):
    assert ds.name == 'cifar100' and ds.num_classes == (100 if fine else 20)
    assert ds.train_data.shape == (5, 3, 32, 32) and ds.test_data.shape == (2, 3, 32, 32)
    np.testing.assert_array_equal(ds.train_data, expected_images(0, 5))
    np.testing.assert_array_equal(ds.test_data, expected_images(5, 2))
    if fine:
        assert ds.train_label.tolist() == labels_for(0, 5, 100)
        assert ds.test_label.tolist() == labels_for(5, 2, 100)
    else:
        assert ds.train_label.tolist() == [k % 20 for k in labels_for(3, 5, 100)]


@pytest.fixture
def no_network(monkeypatch):
    """Make every download fail as it does on a machine without internet."""
    calls = []

    def fail(url, dest, timeout=None):
        calls.append((url, dest))
        raise OSError('network is unreachable (test)')

    monkeypatch.setattr(data, 'download_file', fail)
    return calls


# ---------------------------------------------------------------------------
# digits
# ---------------------------------------------------------------------------
def test_digits_shapes_labels_and_range():
    ds = data.digits()
    assert ds.name == 'digits' and ds.num_classes == 10
    assert ds.train_data.shape == (1437, 1, 8, 8) and ds.test_data.shape == (360, 1, 8, 8)
    assert ds.image_shape == (1, 8, 8)
    assert ds.train_data.dtype == np.float32 and ds.test_data.dtype == np.float32
    assert ds.train_label.dtype == np.int32 and ds.train_label.shape == (1437,)
    assert 0.0 <= ds.train_data.min() and ds.train_data.max() == 1.0
    assert set(ds.train_label.tolist()) == set(range(10))
    # stratified: every class has 35-37 test images (1797 images, 174-183 per class)
    counts = np.bincount(ds.test_label, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37


def test_digits_split_is_fixed_and_complete():
    from sklearn.datasets import load_digits
    a, b = data.digits(), data.digits()
    np.testing.assert_array_equal(a.train_data, b.train_data)
    np.testing.assert_array_equal(a.test_label, b.test_label)
    # train + test is exactly the bundled dataset (as a multiset of image+label rows)
    bunch = load_digits()
    original = np.hstack([bunch.data / 16.0, bunch.target[:, None]])
    ours = np.vstack([np.hstack([x.reshape(len(x), -1), y[:, None]])
                      for x, y in ((a.train_data, a.train_label), (a.test_data, a.test_label))])
    np.testing.assert_allclose(np.array(sorted(map(tuple, ours))),
                               np.array(sorted(map(tuple, original))), rtol=0, atol=1e-6)
    other = data.digits(seed=1)
    assert not np.array_equal(other.test_label, a.test_label)


def test_load_by_name():
    assert data.load('digits').name == 'digits'
    with pytest.raises(ValueError, match='cifar10'):
        data.load('mnist')


# ---------------------------------------------------------------------------
# CIFAR readers
# ---------------------------------------------------------------------------
def test_cifar10_python_dir(tmp_path, no_network):
    write_cifar10_python(str(tmp_path))
    check_cifar10(data.cifar10(str(tmp_path)))
    assert no_network == []


def test_cifar10_binary_dir(tmp_path, no_network):
    write_cifar10_binary(str(tmp_path))
    check_cifar10(data.cifar10(str(tmp_path)))


def test_cifar10_tar_gz_both_formats(tmp_path, no_network):
    src = tmp_path / 'src'
    src.mkdir()
    py_dir = write_cifar10_python(str(src))
    (tmp_path / 'py').mkdir()
    make_tar(py_dir, str(tmp_path / 'py' / 'cifar-10-python.tar.gz'))
    check_cifar10(data.cifar10(str(tmp_path / 'py')))
    bin_dir = write_cifar10_binary(str(src))
    (tmp_path / 'bin').mkdir()
    make_tar(bin_dir, str(tmp_path / 'bin' / 'cifar-10-binary.tar.gz'))
    check_cifar10(data.cifar10(str(tmp_path / 'bin')))
    assert no_network == []


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


def test_corrupt_binary_batch_is_reported(tmp_path, no_network):
    d = write_cifar10_binary(str(tmp_path))
    with open(os.path.join(d, 'test_batch.bin'), 'ab') as f:
        f.write(b'\x00' * 10)
    with pytest.raises(ValueError, match='test_batch.bin.*3073-byte record'):
        data.cifar10(str(tmp_path))


def test_missing_cifar_and_failed_download_gives_clear_error(tmp_path, no_network):
    missing = tmp_path / 'nothing-here'
    with pytest.raises(data.DatasetNotFoundError) as info:
        data.cifar10(str(missing))
    msg = str(info.value)
    assert '--data-dir' in msg and str(missing) in msg
    for looked_for in ('cifar-10-batches-py', 'data_batch_1', 'test_batch',
                       'cifar-10-python.tar.gz', 'cifar-10-batches-bin', 'cifar-10-binary.tar.gz'):
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
        with open(archive, 'rb') as f_in, open(dest, 'wb') as f_out:
            f_out.write(f_in.read())

    monkeypatch.setattr(data, 'download_file', fake_download)
    check_cifar10(data.cifar10(str(tmp_path / 'data')))
    assert (tmp_path / 'data' / 'cifar-10-python.tar.gz').is_file()


# ---------------------------------------------------------------------------
# sharding
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('n_items,num_workers', [(1437, 4), (10, 3), (5, 5), (3, 4), (0, 2),
                                                 (1000, 1)])
@pytest.mark.parametrize('seed', [None, 7])
def test_shards_are_disjoint_and_cover(n_items, num_workers, seed):
    shards = [data.shard(n_items, r, num_workers, seed=seed) for r in range(num_workers)]
    joined = np.concatenate(shards)
    assert sorted(joined.tolist()) == list(range(n_items))      # cover, no duplicate
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    again = [data.shard(n_items, r, num_workers, seed=seed) for r in range(num_workers)]
    assert all(np.array_equal(a, b) for a, b in zip(shards, again))


def test_seeded_shards_mix_the_dataset():
    plain = data.shard(100, 0, 4)
    mixed = data.shard(100, 0, 4, seed=3)
    assert plain.tolist() == list(range(25))
    assert mixed.tolist() != plain.tolist() and len(mixed) == 25


@pytest.mark.parametrize('args', [(10, 2, 2), (10, -1, 2), (10, 0, 0), (-1, 0, 1)])
def test_shard_rejects_bad_arguments(args):
    with pytest.raises(ValueError):
        data.shard(*args)


# ---------------------------------------------------------------------------
# minibatches: order, augmentation, threads
# ---------------------------------------------------------------------------
def test_epoch_order_is_a_permutation_fixed_by_seed_rank_epoch():
    a = data.epoch_order(50, 7, 1, 3)
    assert sorted(a.tolist()) == list(range(50))
    np.testing.assert_array_equal(a, data.epoch_order(50, 7, 1, 3))
    for other in ((8, 1, 3), (7, 0, 3), (7, 1, 4)):
        assert not np.array_equal(a, data.epoch_order(50, *other))


@pytest.mark.parametrize('bad', [(-1, 0, 1), (0, 0, 2 ** 32), (1.5, 0, 1)])
def test_epoch_order_rejects_bad_seed_parts(bad):
    with pytest.raises(ValueError, match='2\\*\\*32'):
        data.epoch_order(10, *bad)


def test_crop_flip_crops_shift_and_mirror_the_padded_image():
    images = np.random.RandomState(0).rand(64, 3, 6, 5).astype(np.float32) + 1.0  # all > 0
    out = data.crop_flip(images, np.random.RandomState(1), pad=2)
    assert out.shape == images.shape and out.dtype == images.dtype
    assert not np.shares_memory(out, images)
    shifted = flipped = 0
    for src, dst in zip(images, out):
        padded = np.zeros((3, 10, 9), np.float32)
        padded[:, 2:8, 2:7] = src
        windows = [(y, x, m) for y in range(5) for x in range(5) for m in (False, True)
                   if np.array_equal(dst, (padded[:, y:y + 6, x:x + 5][:, :, ::-1] if m
                                           else padded[:, y:y + 6, x:x + 5]))]
        assert windows, 'output is not a (mirrored) window of the padded image'
        y, x, m = windows[0]
        shifted += (y, x) != (2, 2)
        flipped += m
    assert 40 < shifted < 64 and 16 < flipped < 48       # offsets 0..4 each, flips about 1/2


def test_crop_flip_without_padding_or_flip_is_identity():
    images = np.arange(2 * 1 * 3 * 3, dtype=np.float32).reshape(2, 1, 3, 3)
    out = data.crop_flip(images, np.random.RandomState(0), pad=0, flip=False)
    np.testing.assert_array_equal(out, images)
    with pytest.raises(ValueError, match='NCHW'):
        data.crop_flip(images[0], np.random.RandomState(0))


@pytest.mark.parametrize('threads', [0, 1, 3])
def test_iterate_batches_same_batches_with_any_number_of_threads(threads):
    images = np.arange(23 * 1 * 2 * 2, dtype=np.float32).reshape(23, 1, 2, 2)
    labels = np.arange(23, dtype=np.int32)
    order = data.epoch_order(23, 1, 0, 1)

    def transform(x, b):
        return data.crop_flip(x, data.batch_rng(1, 0, 1, b), pad=1)

    got = list(data.iterate_batches(images, labels, 5, order, transform, num_threads=threads))
    assert len(got) == 4                          # 23 // 5; the partial batch is dropped
    for b, (x, y) in enumerate(got):
        np.testing.assert_array_equal(y, labels[order[b * 5:(b + 1) * 5]])
        np.testing.assert_array_equal(
            x, data.crop_flip(images[order[b * 5:(b + 1) * 5]], data.batch_rng(1, 0, 1, b),
                              pad=1))


def test_iterate_batches_stops_its_threads_when_closed_early():
    import threading
    images, labels = np.zeros((40, 1, 2, 2), np.float32), np.zeros(40, np.int32)
    before = threading.active_count()
    gen = data.iterate_batches(images, labels, 2, np.arange(40), num_threads=2)
    next(gen)
    gen.close()
    assert threading.active_count() == before
    with pytest.raises(ValueError, match='batch_size'):
        next(data.iterate_batches(images, labels, 0, np.arange(40)))
