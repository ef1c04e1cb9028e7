"""The values of the training script's flags: parsers and the facts they are checked
against (the job's workers, the output directory, a checkpoint's description).

Standard library and :mod:`mxnet_ssp.config` only: a launcher imports it before any process
starts.
"""
import json
import math
import os
import re
import tempfile

from ... import config
from ...core.env_names import CUDA_VISIBLE_DEVICES


def parse_slowdown(text):
    """Parse ``RANK:FACTOR[,RANK:FACTOR]`` into ``{rank: factor}``.

    Raises
    ------
    ValueError
        With a message saying what is wrong (the caller names the flag).
    """
    result = {}
    if text is None or not text.strip():
        return result
    for item in text.split(','):
        rank_text, sep, factor_text = item.strip().partition(':')
        try:
            if not sep:
                raise ValueError
            rank, factor = int(rank_text), float(factor_text)
        except ValueError:
            raise ValueError('%r is not RANK:FACTOR' % item.strip()) from None
        if rank < 0:
            raise ValueError('rank %d is negative' % rank)
        if not (math.isfinite(factor) and factor >= 1.0):
            raise ValueError('factor %s of rank %d is not a number >= 1' % (factor_text, rank))
        if rank in result:
            raise ValueError('rank %d is given twice' % rank)
        result[rank] = factor
    return result


def parse_decay_epochs(text):
    """Parse ``'200,250'`` into ``[200, 250]``: increasing integers >= 1 ('' -> [])."""
    if text is None or not str(text).strip():
        return []
    epochs = []
    for item in str(text).split(','):
        try:
            epoch = int(item.strip())
        except ValueError:
            raise ValueError('%r is not an integer' % item.strip()) from None
        if epoch < 1:
            raise ValueError('epoch %d is not >= 1' % epoch)
        if epochs and epoch <= epochs[-1]:
            raise ValueError('epochs are not increasing (%d after %d)' % (epoch, epochs[-1]))
        epochs.append(epoch)
    return epochs


def learning_rate_at(epoch, base_lr, decay, decay_epochs=(), decay_period=0):
    """The learning rate of (1-based) `epoch`.

    It is multiplied by `decay` once for each entry of `decay_epochs` that is
    ``<= epoch - 1`` (GluonCV's convention: ``--lr-decay-epoch 40,60`` decays
    after 40 and after 60 epochs), or, with `decay_period` > 0, once every
    `decay_period` epochs.
    """
    done = epoch - 1
    if decay_period:
        count = done // decay_period
    else:
        count = sum(1 for e in decay_epochs if e <= done)
    return float('%.12g' % (base_lr * decay ** count))    # 0.005, not 0.005000000000000001


def expected_num_workers(kvstore, environ=None):
    """Workers the job will have: 1 for local, else :func:`config.num_workers`
    (``DMLC_NUM_WORKER``; a value that is not an integer >= 1 counts as 1)."""
    if kvstore == 'local':
        return 1
    return config.num_workers(environ)


def wraps_async(environ=None):
    """Whether ``dist_async`` is mxnet-ssp's store (not with MXNET_SSP_WRAP_ASYNC=0)."""
    return config.wrap_async(environ)


def check_save_dir(path):
    """Raise ValueError saying why `path` cannot be used as an output directory.

    An existing directory must accept a new file; otherwise the nearest
    existing ancestor must be a directory this process may create entries in.
    Nothing is created.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise ValueError('%s exists and is not a directory' % path)
        try:
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as err:
            raise ValueError('cannot write in %s: %s' % (path, err.strerror or err)) from None
        return path
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError('cannot create %s: %s is a file, not a directory' % (path, parent))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError('cannot create %s: %s is not writable' % (path, parent))
    return path


def checkpoint_info(params_path):
    """What a checkpoint says about itself: the JSON next to it, or its file name.

    Returns a dict with at least ``completed_epochs`` and ``iteration``;
    raises ValueError when neither the JSON file nor an ``epoch<N>`` in the
    name tells the epoch.
    """
    base = params_path[:-len('.params')] if params_path.endswith('.params') else params_path
    meta_path = base + '.json'
    if os.path.isfile(meta_path):
        try:
            with open(meta_path) as f:
                info = json.load(f)
            int(info['completed_epochs'])
            info.setdefault('iteration', 0)
            return info
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError('%s is not a checkpoint description: %s' % (meta_path, err)) from None
    match = re.search(r'epoch(\d+)', os.path.basename(params_path))
    if match is None:
        raise ValueError('%s has no %s next to it and no epoch<N> in its name, so the epoch '
                         'to go on from is unknown' % (params_path, os.path.basename(meta_path)))
    return {'completed_epochs': int(match.group(1)), 'iteration': 0, 'states': None}


def choose_gpus(num_gpus, environ, visible):
    """The GPU ids this worker trains on (an empty list: the CPU).

    Parameters
    ----------
    num_gpus : int
        ``--num-gpus`` (0 when not given).
    environ : mapping
        The worker's environment: ``MXNET_SSP_GPUS``, set by ``mxnet-ssp-launch
        --gpus-per-worker / --gpu-map``, names this worker's GPUs.
    visible : int
        ``mx.context.num_gpus()`` in this process.

    Raises
    ------
    ValueError
        With the setting, its value and what is accepted.
    """
    try:
        ids = config.worker_gpus(environ)
    except config.ConfigError as err:
        raise ValueError(str(err)) from None
    if not ids:
        if num_gpus > visible:
            raise ValueError('--num-gpus %d is not valid: this MXNet build sees %d GPU(s)'
                             % (num_gpus, visible))
        return list(range(num_gpus))
    name = '%s=%r' % (config.ENV_GPUS, environ[config.ENV_GPUS])
    if num_gpus and num_gpus != len(ids):
        raise ValueError('--num-gpus %d is not valid with %s (set by the launcher): this worker '
                         'has %d GPU(s); leave --num-gpus out or give %d'
                         % (num_gpus, name, len(ids), len(ids)))
    if max(ids) >= visible:
        raise ValueError('%s is not valid here: MXNet sees %d GPU(s) in this worker '
                         '(CUDA_VISIBLE_DEVICES=%r): ids 0..%d'
                         % (name, visible, environ.get(CUDA_VISIBLE_DEVICES), visible - 1))
    return list(ids)
