"""CIFAR files in the official layouts, written small for the tests (test_data, the training
script's CIFAR jobs), and checks of what a reader made of them."""
import os
import pickle
import tarfile

import numpy as np
from mxnet import gluon

from mxnet_ssp.lab import data


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
    """The generated images as Gluon's CIFAR gives them: (N, 32, 32, 3) uint8."""
    return pattern(first, count).reshape(count, 3, 32, 32).transpose(0, 2, 3, 1)


def check_cifar10(ds, per_batch=3):
    assert ds.name == 'cifar10' and ds.num_classes == 10
    assert isinstance(ds.train, gluon.data.Dataset) and isinstance(ds.test, gluon.data.Dataset)
    assert len(ds.train) == 5 * per_batch and len(ds.test) == per_batch
    assert ds.image_shape == (3, 32, 32)
    x_train, y_train = data.arrays(ds.train)
    x_test, y_test = data.arrays(ds.test)
    assert x_train.dtype == np.uint8 and y_train.dtype == np.int32
    np.testing.assert_array_equal(x_train, expected_images(0, 5 * per_batch))
    np.testing.assert_array_equal(x_test, expected_images(5 * per_batch, per_batch))
    assert y_train.tolist() == labels_for(0, 5 * per_batch, 10)
    assert y_test.tolist() == labels_for(5 * per_batch, per_batch, 10)
    # layout: row, column, channel; sample access as the DataLoader does it
    image, label = ds.train[1]
    assert image[4, 5, 2] == (1 * 7 + 2 * 50 + 4 * 3 + 5) % 256 and label == 1


def check_cifar100(ds, fine=True):
    assert ds.name == 'cifar100' and ds.num_classes == (100 if fine else 20)
    (x_train, y_train), (x_test, y_test) = data.arrays(ds.train), data.arrays(ds.test)
    assert x_train.shape == (5, 32, 32, 3) and x_test.shape == (2, 32, 32, 3)
    np.testing.assert_array_equal(x_train, expected_images(0, 5))
    np.testing.assert_array_equal(x_test, expected_images(5, 2))
    if fine:
        assert y_train.tolist() == labels_for(0, 5, 100)
        assert y_test.tolist() == labels_for(5, 2, 100)
    else:
        assert y_train.tolist() == [k % 20 for k in labels_for(3, 5, 100)]
