"""The generated datasets: made from a seed on every call, no file and no download.

``teacher``: inputs ``x ~ N(0, I)`` in ``R^dim`` labelled by a fixed random "teacher"
network, ``argmax(tanh(scale * x @ W1) @ W2)``, with a fraction of the *training* labels
replaced by uniform random classes (``noise``); the test labels are the teacher's, so a
student that learns the teacher exactly reaches test accuracy 1.0.  The difficulty is in
learning the teacher: `scale` (the gain in front of the tanh) moves it from nearly linear
(small scale: a linear model does well) to strongly non-linear (large scale: the units
saturate into sign-like features).  :func:`mxnet_ssp.lab.data.teacher` wraps the arrays as
an :class:`~mxnet_ssp.lab.data.ImageData`.

NumPy only (no MXNet, no scikit-learn): the reproduce runner and the tests import it
without starting anything.
"""
import math

import numpy as np

from .training_flags.generated_knobs import GENERATED, TEACHER_DEFAULTS, TEACHER_KNOBS, load_options

__all__ = ['GENERATED', 'TEACHER_DEFAULTS', 'TEACHER_KNOBS', 'PIXEL_CENTER', 'PIXEL_SCALE',
           'teacher_weights', 'teacher_labels', 'teacher_arrays', 'image_shape', 'load_options']

#: a stored pixel is ``PIXEL_CENTER + PIXEL_SCALE * x`` clipped to [0, 255]: 127.5 / 32 is
#: 3.98 standard deviations on each side, so about 1 value in 15,000 is clipped
PIXEL_CENTER = 127.5
PIXEL_SCALE = 32.0


def image_shape(dim):
    """``(H, W, 1)`` of an input of `dim` numbers: a square when `dim` is one (64 -> 8x8,
    16 -> 4x4), else one row (10 -> 1x10).  The networks take the shape from the data
    (:attr:`mxnet_ssp.lab.data.ImageData.image_shape`), so every `dim` trains."""
    side = int(math.isqrt(dim))
    return (side, side, 1) if side * side == dim else (1, dim, 1)


def _streams(seed):
    """Independent generators for the teacher, the train inputs, the test inputs and the
    label noise: the test set and the teacher do not move when `train_size` or `noise` do."""
    return [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(4)]


def teacher_weights(seed=0, dim=64, hidden=64, classes=10):
    """``(W1, W2)`` of the teacher of `seed`: float64 ``(dim, hidden)`` and
    ``(hidden, classes)``.

    Built so that the classes are balanced in expectation: ``W1``'s columns are orthonormal
    (when ``hidden <= dim``; unit-norm otherwise), so with ``x ~ N(0, I)`` every hidden unit
    sees an independent ``N(0, scale^2)``; ``W2``'s columns are orthonormal columns with
    their mean across the classes removed (a regular simplex: equal norms, equal angles), so
    no class's logit is favoured.  With random Gaussian weights instead, the largest class of
    the default task held 16% of the samples and the smallest 5%.
    """
    dim, hidden, classes = _check_sizes(dim, hidden, classes)
    rng = _streams(seed)[0]
    first = rng.standard_normal((dim, hidden))
    if hidden <= dim:
        w1 = np.linalg.qr(first)[0]
    else:
        w1 = first / np.linalg.norm(first, axis=0)
    second = rng.standard_normal((hidden, classes))
    if classes <= hidden:
        second = np.linalg.qr(second)[0]
    else:
        second = second / np.linalg.norm(second, axis=0)
    return w1, second - second.mean(axis=1, keepdims=True)


def teacher_labels(x, weights, scale):
    """int32 labels of the rows of `x` (float, ``(N, dim)``): the teacher's argmax."""
    w1, w2 = weights
    return np.argmax(np.tanh(scale * (np.asarray(x, dtype=np.float64) @ w1)) @ w2,
                     axis=1).astype(np.int32)


def teacher_arrays(train_size=20000, test_size=10000, seed=0, dim=64, hidden=64, classes=10,
                   noise=0.0, scale=2.0):
    """``(x_train, y_train, x_test, y_test)`` of the teacher task (the parameters:
    :func:`mxnet_ssp.lab.data.teacher`).

    The images are float32 ``(N, H, W, 1)`` (:func:`image_shape`), pixel values
    ``127.5 + 32 x`` clipped to [0, 255]; the labels (int32) are computed from the stored
    pixels mapped back (``(p - 127.5) / 32``), so they are exactly a function of the image.
    The sizes may come as whole floats (16.0, e.g. from a JSON record): they are used as ints.
    """
    dim, hidden, classes = _check_sizes(dim, hidden, classes)
    if not 0.0 <= noise <= 1.0:
        raise ValueError('noise must be in [0, 1], got %r' % (noise,))
    if not scale > 0:
        raise ValueError('scale must be positive, got %r' % (scale,))
    for what, size in (('train_size', train_size), ('test_size', test_size)):
        if int(size) != size or size < 1:
            raise ValueError('%s must be a positive integer, got %r' % (what, size))
    weights = teacher_weights(seed, dim, hidden, classes)
    _, train_rng, test_rng, noise_rng = _streams(seed)
    shape = image_shape(dim)
    out = []
    for rng, size in ((train_rng, int(train_size)), (test_rng, int(test_size))):
        pixels = np.clip(PIXEL_CENTER + PIXEL_SCALE * rng.standard_normal((size, dim)),
                         0.0, 255.0).astype(np.float32)
        labels = teacher_labels((pixels - np.float32(PIXEL_CENTER)) / np.float32(PIXEL_SCALE),
                                weights, scale)
        out.append([np.ascontiguousarray(pixels.reshape((size,) + shape)), labels])
    if noise > 0:
        train_labels = out[0][1]
        flipped = noise_rng.choice(len(train_labels), int(round(noise * len(train_labels))),
                                   replace=False)
        train_labels[flipped] = noise_rng.integers(0, classes, len(flipped), dtype=np.int32)
    return out[0][0], out[0][1], out[1][0], out[1][1]


def _check_sizes(dim, hidden, classes):
    """``(dim, hidden, classes)`` as ints; ValueError unless each is a whole number, at least
    1 (2 classes)."""
    out = []
    for what, value, least in (('dim', dim, 1), ('hidden', hidden, 1), ('classes', classes, 2)):
        try:
            whole = int(value)
        except (TypeError, ValueError, OverflowError):
            whole = None
        if whole is None or whole != value or whole < least:
            raise ValueError('%s must be an integer >= %d, got %r' % (what, least, value))
        out.append(whole)
    return tuple(out)
