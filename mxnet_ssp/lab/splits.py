"""The fixed train/test splits of the bundled digit sets, without importing scikit-learn.

The digits and ``mnist5k`` (:mod:`.data`) are split once, stratified by label, as
scikit-learn's ``train_test_split(..., test_size=n, random_state=seed, stratify=labels)``
splits them.  Importing scikit-learn for that costs about 2 s of CPU (it imports SciPy and
more), in every worker of every job on these sets, which do nothing else with it.  So the
splits of the default sizes and seeds are kept here (:mod:`._kept_splits`): the order of the
train and of the test rows, as scikit-learn gave them, with the SHA-256 of the labels they
were made from.  A kept split is used only for those same labels; any other size, seed or
set of labels is split by scikit-learn, as before.  ``tests/unit/experiments/test_data.py``
holds every kept split against scikit-learn's.

``python -m mxnet_ssp.lab.splits`` writes :mod:`._kept_splits` again (with
scikit-learn), for the day a dataset or scikit-learn's split changes.
"""
import base64
import hashlib
import os
import sys

import numpy as np

#: (dataset, test_size, seed) of the splits kept: the defaults of data.digits and data.mnist5k
KEPT = (('digits', 360, 0), ('mnist5k', 1000, 0))


def labels_digest(labels):
    """SHA-256 of `labels` as little-endian int32: what a kept split was made from."""
    return hashlib.sha256(np.asarray(labels).astype('<i4').tobytes()).hexdigest()


def encode(indices):
    """Row indices (each below 65,536) as base64 of little-endian uint16."""
    indices = np.asarray(indices)
    if indices.size and (indices.min() < 0 or indices.max() > 0xFFFF):
        raise ValueError('row indices must lie in 0..65535 to be kept, got %d..%d'
                         % (indices.min(), indices.max()))
    return base64.b64encode(indices.astype('<u2').tobytes()).decode('ascii')


def decode(text):
    """The row indices :func:`encode` wrote, as an int64 array."""
    return np.frombuffer(base64.b64decode(text), dtype='<u2').astype(np.int64)


def sklearn_split(labels, test_size, seed, dataset):
    """scikit-learn's stratified split of ``range(len(labels))``: (train rows, test rows)."""
    try:
        from sklearn.model_selection import train_test_split
    except ImportError as err:
        raise ImportError("%s is split with scikit-learn, which cannot be imported (%s): "
                          "python -m pip install 'scikit-learn>=1.0' (mxnet-ssp's [lab] and "
                          "[test] extras include it)" % (dataset, err)) from err
    rows = np.arange(len(labels))
    train, test = train_test_split(rows, test_size=test_size, random_state=seed,
                                   stratify=labels)
    return np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)


def kept_split(dataset, labels, test_size, seed):
    """The kept split of these labels, or None (another size, seed or set of labels)."""
    from ._kept_splits import SPLITS
    kept = SPLITS.get('%s/%d/%d' % (dataset, test_size, seed))
    if kept is None or kept['labels_sha256'] != labels_digest(labels):
        return None
    return decode(kept['train']), decode(kept['test'])


def stratified_split(dataset, labels, test_size, seed):
    """(train rows, test rows) of `labels`, in scikit-learn's order: kept, or computed."""
    kept = kept_split(dataset, labels, test_size, seed)
    return kept if kept is not None else sklearn_split(labels, test_size, seed, dataset)


def write(path=None):
    """Write :mod:`._kept_splits` (scikit-learn's split of every :data:`KEPT` entry)."""
    from . import data
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), '_kept_splits.py')
    lines = ['"""Written by ``python -m mxnet_ssp.lab.splits`` (scikit-learn %s); see '
             'splits.py."""' % _sklearn_version(), 'SPLITS = {']
    for dataset, test_size, seed in KEPT:
        labels = data.labels_of(dataset)
        train, test = sklearn_split(labels, test_size, seed, dataset)
        lines.append('    %r: {' % ('%s/%d/%d' % (dataset, test_size, seed)))
        lines.append('        %r: %r,' % ('labels_sha256', labels_digest(labels)))
        for name, rows in (('train', train), ('test', test)):
            text = encode(rows)
            lines.append('        %r: (' % name)
            lines.extend('            %r' % text[i:i + 88] for i in range(0, len(text), 88))
            lines.append('        ),')
        lines.append('    },')
    lines.append('}')
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def _sklearn_version():
    import sklearn
    return sklearn.__version__


if __name__ == '__main__':
    sys.stdout.write('wrote %s\n' % write())
