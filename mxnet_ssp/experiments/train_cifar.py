"""Train an image classifier on an MXNet parameter server: BSP, ASP, SSP, DSSP or n-softsync.

The training script of the DSSP paper's experiments, with the flags of GluonCV's
``scripts/classification/cifar/train_cifar10.py`` plus the store and update-rule
flags of mxnet-ssp (``docs/train_scripts.md`` lists them all).  It is installed
with the package: run it as ``mxnet-ssp-train`` or ``python -m
mxnet_ssp.experiments.train_cifar`` (``train_scripts/train_cifar.py`` in a
checkout calls the same :func:`main`).  Every process of a job runs this same
command; MXNet reads the role from ``DMLC_ROLE``::

    mxnet-ssp-launch -n 4 -s 1 --launcher local \\
        mxnet-ssp-train --kvstore dist_dssp --staleness 3,15

Without a launcher (no ``DMLC_ROLE``) use ``--kvstore local``::

    mxnet-ssp-train --kvstore local --num-epochs 2

In scheduler and server processes ``import mxnet`` runs the parameter-server
loop and exits, so :func:`main` sets up logging there and imports MXNet; it
never returns.  Importing this module imports neither MXNet nor GluonCV, and
:func:`validate_args` / :func:`check_args` check a command line cheaply, so a
job runner can reject bad flags before it starts any process.

Each worker trains on its own shard of the training set.  Every worker writes
``<save-dir>/train-worker<rank>.jsonl`` (one JSON object per iteration);
worker 0 also evaluates the test set at the end of every epoch and at the end
(``eval.jsonl``), saves checkpoints (``model-epoch<N>.{params,states,json}``
every ``--save-period`` epochs, ``model-final.*``) and writes ``summary.json``.
The stores write their metrics into ``--save-dir`` too.
"""
import argparse
import ast
import difflib
import glob
import importlib
import importlib.util
import json
import logging
import math
import os
import re
import sys
import tempfile
import time

import numpy as np

from .. import config
from . import data

#: Models built here, without GluonCV.
BUILTIN_MODELS = ('mlp', 'alexnet-small')
#: Short names of GluonCV's CIFAR ResNets (v1, basic blocks): resnet<D>, D = 6n + 2.
RESNET_SHORT = ('resnet20', 'resnet50', 'resnet56', 'resnet110')
#: What --model accepts (GluonCV model zoo names are accepted as well).
MODELS = BUILTIN_MODELS + RESNET_SHORT
DATASETS = ('digits', 'cifar10', 'cifar100')
SSP_KVSTORES = tuple(config.STORE_TYPES)
#: Stores that report the sender and staleness of every gradient to the servers.
STALENESS_KVSTORES = config.OUR_STORE_TYPES
KVSTORES = ('local', 'dist_sync') + STALENESS_KVSTORES
DSSP_MODES = config.DSSP_MODES
OPTIMIZERS = ('sgd', 'nag', 'sasgd', 'dcasgd_pw')
STALENESS_LR = ('inverse', 'average', 'none')
TRAIN_MODES = ('hybrid', 'imperative')
#: DC-ASGD's lambda0 when --lamda is not given: the paper's CIFAR-10 settings.
DEFAULT_LAMDA = {False: 0.04, True: 2.0}

_RESNET_SHORT_RE = re.compile(r'^resnet(\d+)$')
_CIFAR_RESNET_RE = re.compile(r'^cifar_resnet(\d+)_v([12])$')

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# models (names only: nothing here imports MXNet or GluonCV)
# ---------------------------------------------------------------------------
def gluoncv_available():
    """Whether gluoncv can be imported (found on the path; not imported)."""
    return importlib.util.find_spec('gluoncv') is not None


def gluoncv_model_names():
    """Names in GluonCV's model zoo, read from its source without importing it.

    Returns an empty set when gluoncv is not installed or the file cannot be
    read (the caller then imports gluoncv to ask it).
    """
    spec = importlib.util.find_spec('gluoncv')
    if spec is None or not spec.submodule_search_locations:
        return set()
    path = os.path.join(list(spec.submodule_search_locations)[0], 'model_zoo', 'model_zoo.py')
    try:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == '_models' for t in node.targets)):
            return {k.value for k in node.value.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return set()


def resolve_model(name):
    """What `name` builds: ``('builtin', name)``, ``('cifar_resnet', version, depth)``
    or ``('gluoncv', name)`` for any other GluonCV model zoo name.

    ``resnet<D>`` is GluonCV's CIFAR ResNet v1 of depth D (``cifar_resnet<D>_v1``);
    ``cifar_resnet<D>_v<1|2>`` is accepted for every depth D = 6n + 2, including
    those GluonCV does not register (e.g. ``resnet50`` = ``cifar_resnet50_v1``,
    n = 8).  Raises ValueError with the reason; the name is not checked against
    the GluonCV model zoo here (see :func:`check_model`).
    """
    key = str(name).strip().lower()
    if key in BUILTIN_MODELS:
        return ('builtin', key)
    match = _RESNET_SHORT_RE.match(key)
    version = 1
    if match is None:
        match = _CIFAR_RESNET_RE.match(key)
        if match is not None:
            version = int(match.group(2))
    if match is not None:
        depth = int(match.group(1))
        if depth < 8 or (depth - 2) % 6:
            raise ValueError('%s names a CIFAR ResNet of depth %d, but CIFAR ResNets have '
                             'depth 6n + 2 with n >= 1 (20, 32, 44, 50, 56, 110, ...)'
                             % (name, depth))
        return ('cifar_resnet', version, depth)
    return ('gluoncv', key)


def describe_model(name):
    """One line saying what --model `name` builds (for logs and summary.json)."""
    kind = resolve_model(name)
    if kind[0] == 'builtin':
        return kind[1]
    if kind[0] == 'cifar_resnet':
        version, depth = kind[1], kind[2]
        return ('GluonCV CIFARResNetV%d (basic blocks, %d per stage, depth %d = '
                'cifar_resnet%d_v%d)' % (version, (depth - 2) // 6, depth, depth, version))
    return 'GluonCV model zoo %s' % kind[1]


def check_model(name):
    """Check --model `name`; return its :func:`resolve_model` tuple or raise ValueError.

    Imports nothing heavy unless `name` is neither one of ours nor in the
    model zoo's source (then gluoncv is imported to ask it).
    """
    accepted = ('%s, resnet<D> / cifar_resnet<D>_v1|v2 with D = 6n + 2 (e.g. %s), or a '
                'GluonCV model zoo name' % (', '.join(BUILTIN_MODELS), ', '.join(RESNET_SHORT)))
    try:
        kind = resolve_model(name)
    except ValueError as err:
        raise ValueError('%s; expected %s' % (err, accepted)) from None
    if kind[0] == 'builtin':
        return kind
    if not gluoncv_available():
        raise ValueError("%s needs GluonCV, which is not installed (pip install "
                         "'mxnet-ssp[gluoncv]' from the checkout: python -m pip install "
                         "'.[gluoncv]'); without it: %s" % (name, ', '.join(BUILTIN_MODELS)))
    if kind[0] == 'cifar_resnet':
        return kind
    names = gluoncv_model_names()
    if kind[1] in names:
        return kind
    try:   # not in the parsed source: ask gluoncv itself (imports mxnet)
        from gluoncv.model_zoo import get_model_list
        names = set(get_model_list())
    except Exception:
        pass
    if kind[1] in names:
        return kind
    close = difflib.get_close_matches(kind[1], sorted(names) + list(MODELS), n=3)
    raise ValueError('%s is not a known model: expected %s%s' % (
        name, accepted, ' (close: %s)' % ', '.join(close) if close else ''))


# ---------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------
def build_parser():
    """The command-line parser (flags only; :func:`validate_args` checks values)."""
    p = argparse.ArgumentParser(
        description='Train an image classifier on an MXNet parameter server with BSP '
                    '(dist_sync), ASP (dist_async), SSP (dist_ssp), DSSP (dist_dssp) or '
                    'n-softsync (dist_softsync).',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group('model and data')
    g.add_argument('--model', default='alexnet-small',
                   help='network: %s (CIFAR ResNet v1 of depth 20/50/56/110 from GluonCV), '
                        'cifar_resnet<D>_v1|v2 for any depth D = 6n+2, or any other GluonCV '
                        'model zoo name' % ', '.join(MODELS))
    g.add_argument('--dataset', default='digits',
                   help='dataset: %s (digits is bundled with scikit-learn, no download)'
                        % ', '.join(DATASETS))
    g.add_argument('--data-dir', default=os.path.join('~', '.mxnet', 'datasets', 'cifar'),
                   help='directory with the CIFAR archives (downloaded there if missing)')
    g.add_argument('--no-augment', action='store_true',
                   help='train CIFAR without the random crop (pad 4) and horizontal flip '
                        '(digits is never augmented)')
    g.add_argument('-j', '--num-data-workers', dest='num_data_workers', type=int, default=0,
                   help='threads preparing batches ahead of training (0: in the training '
                        'loop)')
    g.add_argument('--drop-rate', type=float, default=0.0,
                   help='dropout rate of the GluonCV wide ResNets (cifar_wideresnet*)')
    g.add_argument('--mode', default='hybrid',
                   help='%s: hybridize the network or not' % ' or '.join(TRAIN_MODES))
    g = p.add_argument_group('training')
    g.add_argument('--batch-size', type=int, default=32,
                   help='batch size per device (per worker with --num-gpus 0)')
    g.add_argument('--num-gpus', type=int, default=0,
                   help='GPUs per worker (0: CPU); each worker splits its batch over them')
    g.add_argument('--num-epochs', type=int, default=10,
                   help="passes over each worker's shard (in all, counting resumed ones)")
    g.add_argument('--num-iterations', type=int, default=None,
                   help='stop each worker after this many iterations (default: no cap)')
    g.add_argument('--optimizer', default='sgd',
                   help='update rule: %s (sasgd and dcasgd_pw run on the servers of '
                        'dist_async, dist_ssp, dist_dssp, dist_softsync)' % ', '.join(OPTIMIZERS))
    g.add_argument('--lr', type=float, default=0.1, help='learning rate')
    g.add_argument('--momentum', type=float, default=0.9, help='momentum')
    g.add_argument('--wd', type=float, default=1e-4, help='weight decay')
    g.add_argument('--lr-decay', type=float, default=0.1,
                   help='factor the learning rate is multiplied by at each decay epoch')
    g.add_argument('--lr-decay-epoch', default='',
                   help="comma-separated epochs after which the learning rate decays, e.g. "
                        "'200,250' ('' for none)")
    g.add_argument('--lr-decay-period', type=int, default=0,
                   help='decay every this many epochs instead (0: use --lr-decay-epoch)')
    g.add_argument('--staleness-lr', default=None,
                   help="sasgd only: %s (default inverse: lr / tau)" % ', '.join(STALENESS_LR))
    g.add_argument('--staleness-window', type=int, default=None,
                   help='sasgd --staleness-lr average only: updates averaged (default 1)')
    g.add_argument('--lamda', type=float, default=None,
                   help='dcasgd_pw only: lambda (DC-ASGD-c) or lambda0 (DC-ASGD-a) '
                        '(default %g, or %g with --adaptive)'
                        % (DEFAULT_LAMDA[False], DEFAULT_LAMDA[True]))
    g.add_argument('--adaptive', action='store_true',
                   help='dcasgd_pw only: DC-ASGD-a (lambda0 / sqrt(MeanSquare))')
    g.add_argument('--mean-square-decay', type=float, default=None,
                   help='dcasgd_pw --adaptive only: MeanSquare decay (default 0.95)')
    g.add_argument('--seed', type=int, default=42, help='random seed')
    g = p.add_argument_group('parameter server')
    g.add_argument('--kvstore', default='dist_sync',
                   help='kvstore type: %s' % ', '.join(KVSTORES))
    g.add_argument('--staleness', default=None,
                   help="dist_ssp: s (e.g. 3); dist_dssp: 'sL,sU' (e.g. 3,15) "
                        "(default: the store's, or MXNET_SSP_STALENESS)")
    g.add_argument('--dssp-mode', default=None,
                   help='dist_dssp only: %s (default: bounded, or MXNET_SSP_DSSP_MODE)'
                        % ', '.join(DSSP_MODES))
    g.add_argument('--splits', default=None,
                   help='dist_softsync only: n of n-softsync, 1 <= n <= workers (default 1, '
                        'or MXNET_SSP_SOFTSYNC_SPLITS)')
    g.add_argument('--sync-average', action='store_true',
                   help="dist_sync only: apply the mean of the workers' gradients (MXNet "
                        "Module's convention, as in the DSSP paper's MXNet runs) instead of "
                        "their sum (gluon.Trainer's)")
    g.add_argument('--slowdown', default=None, metavar='RANK:FACTOR[,RANK:FACTOR]',
                   help='make worker RANK sleep (FACTOR-1) x its compute time every '
                        'iteration, to emulate a slower device (FACTOR >= 1)')
    g = p.add_argument_group('output')
    g.add_argument('--save-dir', default=os.path.join('.', 'results', 'run'),
                   help='directory for metrics, logs of the stores and checkpoints')
    g.add_argument('--save-period', type=int, default=10,
                   help='worker 0 saves a checkpoint every this many epochs (0: only the '
                        'final one)')
    g.add_argument('--resume-from', default=None,
                   help='a checkpoint (model-epoch<N>.params or model-final.params): load '
                        'its weights and optimizer state and go on from the epoch after it')
    g.add_argument('--log-interval', type=int, default=20,
                   help='log every this many iterations (0: only epoch summaries)')
    g.add_argument('--no-progress', action='store_true',
                   help="no progress bar (worker 0 shows one when stderr is a terminal)")
    return p


def _fail(parser, flag, value, accepted):
    parser.error('%s %r is not valid: expected %s' % (flag, value, accepted))


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
    """Workers the job will have: 1 for local, else ``DMLC_NUM_WORKER``."""
    env = os.environ if environ is None else environ
    if kvstore == 'local':
        return 1
    try:
        return max(1, int(env.get('DMLC_NUM_WORKER', '1')))
    except ValueError:
        return 1


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


def validate_args(args, parser, environ=None):
    """Check every flag; on error print usage and the reason and exit with status 2.

    `environ` stands for the worker's environment (``DMLC_ROLE``,
    ``DMLC_NUM_WORKER``, ``MXNET_SSP_*``).  Imports neither MXNet nor GluonCV
    (except to look up a model name that is not in GluonCV's model zoo source).
    """
    env = os.environ if environ is None else environ
    try:
        args.model_kind = check_model(args.model)
    except ValueError as err:
        parser.error('--model %s' % err)
    if args.dataset not in DATASETS:
        _fail(parser, '--dataset', args.dataset, 'one of %s' % ', '.join(DATASETS))
    if args.kvstore not in KVSTORES:
        _fail(parser, '--kvstore', args.kvstore, 'one of %s' % ', '.join(KVSTORES))
    if args.optimizer not in OPTIMIZERS:
        _fail(parser, '--optimizer', args.optimizer, 'one of %s' % ', '.join(OPTIMIZERS))
    if args.mode not in TRAIN_MODES:
        _fail(parser, '--mode', args.mode, 'one of %s' % ', '.join(TRAIN_MODES))
    for flag, value in (('--batch-size', args.batch_size), ('--num-epochs', args.num_epochs)):
        if value < 1:
            _fail(parser, flag, value, 'an integer >= 1')
    for flag, value in (('--num-gpus', args.num_gpus),
                        ('--num-data-workers', args.num_data_workers),
                        ('--save-period', args.save_period), ('--log-interval', args.log_interval),
                        ('--lr-decay-period', args.lr_decay_period)):
        if value < 0:
            _fail(parser, flag, value, 'an integer >= 0')
    if args.num_iterations is not None and args.num_iterations < 1:
        _fail(parser, '--num-iterations', args.num_iterations, 'an integer >= 1 (or omit it)')
    if not 0 <= args.seed < 2 ** 32:
        _fail(parser, '--seed', args.seed, 'an integer in [0, 2**32)')
    if not (math.isfinite(args.lr) and args.lr > 0):
        _fail(parser, '--lr', args.lr, 'a number > 0')
    if not (math.isfinite(args.momentum) and 0 <= args.momentum < 1):
        _fail(parser, '--momentum', args.momentum, 'a number in [0, 1)')
    if not (math.isfinite(args.wd) and args.wd >= 0):
        _fail(parser, '--wd', args.wd, 'a number >= 0')
    if not (math.isfinite(args.drop_rate) and 0 <= args.drop_rate < 1):
        _fail(parser, '--drop-rate', args.drop_rate, 'a number in [0, 1)')
    if not (math.isfinite(args.lr_decay) and args.lr_decay > 0):
        _fail(parser, '--lr-decay', args.lr_decay, 'a number > 0 (the learning rate is '
                                                    'multiplied by it)')
    try:
        args.lr_decay_epochs = parse_decay_epochs(args.lr_decay_epoch)
    except ValueError as err:
        parser.error("--lr-decay-epoch %r is not valid: %s; expected increasing epochs >= 1, "
                     "comma-separated (e.g. '200,250'), or '' for none"
                     % (args.lr_decay_epoch, err))
    if args.lr_decay_period and args.lr_decay_epochs:
        parser.error('--lr-decay-period %d and --lr-decay-epoch %r both say when to decay: '
                     'give one of them' % (args.lr_decay_period, args.lr_decay_epoch))

    # the store and its settings
    if args.kvstore.startswith('dist') and not env.get('DMLC_ROLE'):
        parser.error('--kvstore %s needs a parameter-server job (DMLC_ROLE is not set): run '
                     'under "mxnet-ssp-launch -n N -s S --launcher local mxnet-ssp-train ...", '
                     'or use --kvstore local' % args.kvstore)
    num_workers = expected_num_workers(args.kvstore, env)
    if args.staleness is not None:
        if args.kvstore not in SSP_KVSTORES:
            parser.error('--staleness is only accepted with --kvstore %s, not with --kvstore %s'
                         % (' or '.join(SSP_KVSTORES), args.kvstore))
        try:
            config.parse_staleness(args.staleness, args.kvstore, source='--staleness')
        except ValueError as err:
            parser.error(str(err))
    if args.dssp_mode is not None:
        if args.kvstore != 'dist_dssp':
            parser.error('--dssp-mode is only accepted with --kvstore dist_dssp, not with '
                         '--kvstore %s' % args.kvstore)
        if args.dssp_mode not in DSSP_MODES:
            _fail(parser, '--dssp-mode', args.dssp_mode, 'one of %s' % ', '.join(DSSP_MODES))
    if args.splits is not None:
        if args.kvstore != 'dist_softsync':
            parser.error('--splits is only accepted with --kvstore dist_softsync, not with '
                         '--kvstore %s' % args.kvstore)
        try:
            args.splits = config.parse_splits(args.splits, num_workers, source='--splits')
        except ValueError as err:
            parser.error(str(err))

    if args.sync_average and args.kvstore != 'dist_sync':
        parser.error('--sync-average is only accepted with --kvstore dist_sync, not with '
                     '--kvstore %s' % args.kvstore)

    # the update rule
    ours = [s for s in STALENESS_KVSTORES if s != 'dist_async' or wraps_async(env)]
    if args.optimizer in ('sasgd', 'dcasgd_pw') and args.kvstore not in ours:
        why = (' (MXNET_SSP_WRAP_ASYNC=0 keeps MXNet\'s own dist_async, which does not)'
               if args.kvstore == 'dist_async' else '')
        parser.error('--optimizer %s needs a store that reports the staleness of every '
                     'gradient: --kvstore %s, not --kvstore %s%s'
                     % (args.optimizer, ', '.join(ours), args.kvstore, why))
    for flag, value, rule in (('--staleness-lr', args.staleness_lr, 'sasgd'),
                              ('--staleness-window', args.staleness_window, 'sasgd'),
                              ('--lamda', args.lamda, 'dcasgd_pw'),
                              ('--adaptive', args.adaptive or None, 'dcasgd_pw'),
                              ('--mean-square-decay', args.mean_square_decay, 'dcasgd_pw')):
        if value is not None and args.optimizer != rule:
            parser.error('%s is only accepted with --optimizer %s, not with --optimizer %s'
                         % (flag, rule, args.optimizer))
    if args.staleness_lr is not None and args.staleness_lr not in STALENESS_LR:
        _fail(parser, '--staleness-lr', args.staleness_lr, 'one of %s' % ', '.join(STALENESS_LR))
    if args.staleness_window is not None and args.staleness_window < 1:
        _fail(parser, '--staleness-window', args.staleness_window, 'an integer >= 1')
    if args.lamda is not None and not (math.isfinite(args.lamda) and args.lamda >= 0):
        _fail(parser, '--lamda', args.lamda, 'a number >= 0')
    if args.mean_square_decay is not None:
        if not args.adaptive:
            parser.error('--mean-square-decay is only accepted with --adaptive (DC-ASGD-a)')
        if not (math.isfinite(args.mean_square_decay) and 0 <= args.mean_square_decay < 1):
            _fail(parser, '--mean-square-decay', args.mean_square_decay, 'a number in [0, 1)')

    # workers and files
    try:
        args.slowdown_factors = parse_slowdown(args.slowdown)
    except ValueError as err:
        parser.error('--slowdown %r is not valid: %s; expected RANK:FACTOR[,RANK:FACTOR] with '
                     'integer ranks >= 0 and factors >= 1 (e.g. 1:2.5)' % (args.slowdown, err))
    too_high = sorted(r for r in args.slowdown_factors if r >= num_workers)
    if too_high:
        parser.error('--slowdown %r names rank %d but the job has %d worker(s) '
                     '(ranks 0..%d)' % (args.slowdown, too_high[0], num_workers, num_workers - 1))
    try:
        check_save_dir(args.save_dir)
    except ValueError as err:
        parser.error('--save-dir %r is not valid: %s; expected a directory that can be '
                     'created or written' % (args.save_dir, err))
    args.resume_info = None
    if args.resume_from is not None:
        if not os.path.isfile(args.resume_from):
            _fail(parser, '--resume-from', args.resume_from,
                  'an existing checkpoint file (<save-dir>/model-epoch<N>.params or '
                  'model-final.params)')
        try:
            args.resume_info = checkpoint_info(args.resume_from)
        except ValueError as err:
            parser.error('--resume-from %r is not valid: %s' % (args.resume_from, err))
    return args


def parse_args(argv=None, environ=None):
    """Parse and validate the command line; exits with status 2 on a bad flag."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.options = sorted(vars(args).items())       # as given, for the start-up log
    args.parser = parser
    return validate_args(args, parser, environ)


def check_args(argv, num_workers=1, environ=None):
    """Check the flags of a job of `num_workers` workers before starting it.

    For job runners: ``check_args(['--kvstore', 'dist_ssp', ...], 4)``
    returns the parsed arguments, or prints usage and the reason and raises
    ``SystemExit(2)``, like the workers would.
    """
    env = dict(os.environ if environ is None else environ)
    env.update({'DMLC_ROLE': 'worker', 'DMLC_NUM_WORKER': str(int(num_workers))})
    return parse_args(argv, env)


# ---------------------------------------------------------------------------
# model, optimizer, store, data (these import MXNet)
# ---------------------------------------------------------------------------
def get_model(name, num_classes, image_shape, drop_rate=0.0):
    """Build the network `name` for images of `image_shape` ``(C, H, W)``.

    ``alexnet-small`` is the downsized AlexNet of the SSP/DSSP experiments:
    three 'conv-relu-pool' blocks (32, 32, 64 channels; max pooling after
    the first, average pooling after the others) and two fully connected
    layers (128 hidden units).  It follows the input size: for CIFAR's 32x32,
    5x5 convolutions and three overlapping 3x3/2 poolings (cuda-convnet's
    layout); for smaller images, 3x3 convolutions and as many 2x2/2 poolings
    as keep the feature map at least 2x2 (two for the 8x8 digits; overlapping
    padded poolings of such small maps train badly).

    ``resnet<D>`` / ``cifar_resnet<D>_v<k>`` are GluonCV's CIFAR ResNets
    (``gluoncv.model_zoo.cifarresnet``) of depth D = 6n + 2; any other name
    goes to ``gluoncv.model_zoo.get_model(name, classes=num_classes)``.
    """
    from mxnet.gluon import nn
    kind = resolve_model(name)
    if kind == ('builtin', 'mlp'):
        net = nn.HybridSequential(prefix='mlp_')
        with net.name_scope():
            net.add(nn.Flatten(), nn.Dense(256, activation='relu'),
                    nn.Dense(128, activation='relu'), nn.Dense(num_classes))
        return net
    if kind == ('builtin', 'alexnet-small'):
        size = min(image_shape[1:])
        large = size >= 24
        kernel = 5 if large else 3
        pools = 3 if large else max(0, min(3, int(math.log2(size)) - 1))
        net = nn.HybridSequential(prefix='alexnet_small_')
        with net.name_scope():
            for i, channels in enumerate((32, 32, 64)):
                net.add(nn.Conv2D(channels, kernel, padding=kernel // 2, activation='relu'))
                if i < pools:
                    pool = nn.MaxPool2D if i == 0 else nn.AvgPool2D
                    net.add(pool(pool_size=3, strides=2, padding=1) if large
                            else pool(pool_size=2, strides=2))
            net.add(nn.Flatten(), nn.Dense(128, activation='relu'), nn.Dense(num_classes))
        return net
    if not gluoncv_available():
        raise ValueError("model %s needs GluonCV: python -m pip install '.[gluoncv]'" % name)
    if kind[0] == 'cifar_resnet':
        from gluoncv.model_zoo.cifarresnet import get_cifar_resnet
        return get_cifar_resnet(kind[1], kind[2], classes=num_classes)
    from gluoncv.model_zoo import get_model as gluoncv_get_model
    kwargs = {'classes': num_classes}
    if kind[1].startswith('cifar_wideresnet'):
        kwargs['drop_rate'] = drop_rate
    return gluoncv_get_model(kind[1], **kwargs)


def make_optimizer(args, batch_size):
    """The update rule of ``args.optimizer``, normalizing gradients by `batch_size`
    (``rescale_grad = 1 / batch_size``).

    ``rescale_grad`` is fixed here (and the script calls ``trainer.step(1)``)
    rather than set by ``trainer.step(batch_size)``: a resumed run sends the
    optimizer to the servers in ``trainer.load_states``, before the first step.
    """
    import mxnet as mx
    common = {'learning_rate': args.lr, 'wd': args.wd, 'rescale_grad': 1.0 / batch_size}
    if args.optimizer == 'sgd':
        return mx.optimizer.SGD(momentum=args.momentum, **common)
    if args.optimizer == 'nag':
        return mx.optimizer.NAG(momentum=args.momentum, **common)
    from .. import optim     # imports MXNet
    if args.optimizer == 'sasgd':
        return optim.StalenessAwareSGD(
            momentum=args.momentum, staleness_lr=args.staleness_lr or 'inverse',
            staleness_window=args.staleness_window or 1, **common)
    lamda = DEFAULT_LAMDA[bool(args.adaptive)] if args.lamda is None else args.lamda
    extra = {} if args.mean_square_decay is None else {'mean_square_decay': args.mean_square_decay}
    return optim.DCASGD(lamda=lamda, adaptive=bool(args.adaptive), momentum=args.momentum,
                        **extra, **common)


def uses_mxnet_ssp_store(args, environ=None):
    """Whether ``args.kvstore`` is one of mxnet-ssp's stores (servers keep optimizer state
    and take learning-rate changes)."""
    return args.kvstore in STALENESS_KVSTORES and (args.kvstore != 'dist_async'
                                                   or wraps_async(environ))


def make_kvstore(args):
    """Create the store for ``args.kvstore``; mxnet-ssp's get the settings and save-dir."""
    if uses_mxnet_ssp_store(args):
        import mxnet_ssp
        settings = {'metrics_dir': os.path.abspath(args.save_dir)}
        if args.staleness is not None:
            settings['staleness'] = args.staleness
        if args.dssp_mode is not None:
            settings['mode'] = args.dssp_mode
        if args.splits is not None:
            settings['splits'] = args.splits
        return mxnet_ssp.create(args.kvstore, **settings)
    import mxnet as mx
    return mx.kv.create(args.kvstore)


def load_data(args):
    """Load ``args.dataset``; a missing CIFAR archive exits with status 2 and the reason."""
    try:
        return data.load(args.dataset, os.path.expanduser(args.data_dir))
    except (FileNotFoundError, ImportError) as err:
        args.parser.error('--dataset %s: %s' % (args.dataset, err)
                          if isinstance(err, ImportError) else str(err))


def normalize(dataset):
    """Standardize every channel with the training set's mean and std (in place).

    The statistics come from the whole training set, so every worker applies
    the same transform whatever its shard.
    """
    axes = (0, 2, 3)
    mean = dataset.train_data.mean(axis=axes, keepdims=True)
    std = dataset.train_data.std(axis=axes, keepdims=True) + 1e-6
    dataset.train_data = ((dataset.train_data - mean) / std).astype(np.float32)
    dataset.test_data = ((dataset.test_data - mean) / std).astype(np.float32)
    return dataset


def evaluate(net, images, labels, batch_size=500, ctx=None):
    """Top-1 accuracy of `net` on numpy `images`/`labels`."""
    import mxnet as mx
    ctx = ctx or mx.cpu()
    correct = 0
    for start in range(0, len(images), batch_size):
        out = net(mx.nd.array(images[start:start + batch_size], ctx=ctx))
        pred = out.argmax(axis=1).asnumpy().astype(np.int64)
        correct += int((pred == labels[start:start + batch_size]).sum())
    return correct / float(len(images))


# ---------------------------------------------------------------------------
# logging, progress and metrics
# ---------------------------------------------------------------------------
class _RankFilter(logging.Filter):
    """Adds ``role`` and ``rank`` to every record.

    A worker's rank is '?' until its store exists; a server's is looked up
    once mxnet-ssp's server module runs in it.
    """

    def __init__(self, role=None):
        super().__init__()
        self.role = role or os.environ.get('DMLC_ROLE', 'worker')
        self.rank = 0 if self.role == 'scheduler' else '?'

    def filter(self, record):
        if self.rank == '?' and self.role == 'server':
            server = sys.modules.get('mxnet_ssp.server')
            rank = server.server_rank() if server is not None else None
            if rank is not None:
                self.rank = rank
        record.role = self.role
        record.rank = self.rank
        return True


class _Handler(logging.StreamHandler):
    """stderr, through tqdm while worker 0's progress bar is on screen."""

    bar = None

    def emit(self, record):
        if self.bar is None:
            return super().emit(record)
        try:
            self.bar.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def setup_logging(role=None):
    """Log to stderr as ``<time> <role>[<rank>] <level> <message>``; returns the filter."""
    rank_filter = _RankFilter(role)
    handler = _Handler()
    handler.addFilter(rank_filter)
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(role)s[%(rank)s] %(levelname)s %(message)s'))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return rank_filter


def make_progress(rank, total, initial=0, disabled=False, stream=None):
    """Worker 0's tqdm progress bar over `total` iterations, or None.

    None on other ranks, with ``--no-progress``, when `stream` (stderr) is not
    a terminal, or when tqdm is not installed.
    """
    stream = sys.stderr if stream is None else stream
    if rank != 0 or disabled or not getattr(stream, 'isatty', lambda: False)():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, file=stream, unit='it', dynamic_ncols=True,
                desc='worker[0]', leave=True)


class JsonLines:
    """JSON Lines file, one flushed line per record (appended to with `append`)."""

    def __init__(self, path, append=False):
        self.path = path
        self._file = open(path, 'a' if append else 'w', buffering=1)

    def write(self, **record):
        self._file.write(json.dumps(record) + '\n')

    def close(self):
        self._file.close()


def count_iterations(save_dir):
    """``{rank: iterations}`` from the ``train-worker<rank>.jsonl`` files in `save_dir`."""
    counts = {}
    for path in glob.glob(os.path.join(save_dir, 'train-worker*.jsonl')):
        last = 0
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rec = json.loads(line)
                    last = max(last, int(rec['iteration']))
                    rank = int(rec['rank'])
        if last:
            counts[rank] = last
    return dict(sorted(counts.items()))


# ---------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------
def states_kind(kv):
    """Where ``trainer.save_states`` puts the optimizer state on this job's store.

    'servers' (mxnet-ssp stores: every server writes ``<file>.server-<rank>``),
    'file' (updates on the workers: ``local``, and ``dist_sync``, which this
    script runs with ``update_on_kvstore=False``), or None (MXNet's own
    ``dist_async`` cannot save it).
    """
    if kv.type in ('local', 'dist_sync'):
        return 'file'
    return 'servers' if hasattr(kv, 'slot_mode') else None


def save_checkpoint(net, trainer, kv, save_dir, name, info):
    """Worker 0: ``<name>.params``, ``<name>.states`` (where the store allows), ``<name>.json``."""
    base = os.path.join(save_dir, name)
    net.save_parameters(base + '.params')
    kind = states_kind(kv)
    if kind is not None:
        trainer.save_states(base + '.states')
    info = dict(info, params=base + '.params', states=base + '.states' if kind else None,
                states_kind=kind)
    with open(base + '.json', 'w') as f:
        json.dump(info, f, indent=2)
    logger.info('saved checkpoint %s (weights%s)', base + '.params',
                ', optimizer state on the servers' if kind == 'servers'
                else ', optimizer state' if kind else '; this store cannot save optimizer state')


def restore_states(trainer, kv, args, info):
    """Every worker: load the checkpoint's optimizer state when this job can take it."""
    kind = states_kind(kv)
    saved = info.get('states')
    why = None
    if not saved:
        why = 'the checkpoint has none'
    elif kind is None:
        why = '%s cannot restore optimizer state' % kv.type
    elif info.get('states_kind') != kind:
        why = 'it was saved by a %s store and this job uses %s' % (info.get('kvstore'), kv.type)
    elif kind == 'servers' and (info.get('num_workers') != kv.num_workers
                                or info.get('optimizer') != args.optimizer
                                or info.get('kvstore') != kv.type):
        why = ('it was saved by %s workers of %s with %s; this job has %d of %s with %s'
               % (info.get('num_workers'), info.get('kvstore'), info.get('optimizer'),
                  kv.num_workers, kv.type, args.optimizer))
    if why is not None:
        logger.warning('resuming with the weights of %s only, not its optimizer state: %s',
                       args.resume_from, why)
        return False
    trainer.load_states(saved)      # collective on mxnet-ssp stores
    logger.info('restored optimizer state from %s%s', saved,
                '.server-*' if kind == 'servers' else '')
    return True


def read_server_weights(kv, params):
    """Pull the servers' current weights into `params` (after every worker is done).

    In slot mode a plain pull returns what this worker last pulled, so each
    key is refreshed first (the server copies its latest weights into the slot).
    """
    import mxnet as mx
    for i, param in enumerate(params):
        if param.grad_req == 'null':     # e.g. BatchNorm statistics: never pushed
            continue
        if getattr(kv, 'slot_mode', False):
            kv._push_refresh(i, 0)
        kv.pull(i, out=param.list_data())
    mx.nd.waitall()


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------
def run_server_role(role):
    """Scheduler or server: log with the role, then let ``import mxnet`` serve (and exit)."""
    setup_logging(role)
    import mxnet  # noqa: F401  (runs the parameter server and calls sys.exit)
    return 0


def main(argv=None):
    role = os.environ.get('DMLC_ROLE')
    if role in ('scheduler', 'server'):
        return run_server_role(role)
    args = parse_args(argv)
    rank_filter = setup_logging()
    save_dir = os.path.abspath(os.path.expanduser(args.save_dir))
    try:
        os.makedirs(save_dir, exist_ok=True)
    except OSError as err:
        args.parser.error('--save-dir %r is not valid: %s' % (args.save_dir, err))

    import mxnet as mx
    from mxnet import autograd, gluon

    if args.num_gpus > mx.context.num_gpus():
        args.parser.error('--num-gpus %d is not valid: this MXNet build sees %d GPU(s)'
                          % (args.num_gpus, mx.context.num_gpus()))
    ctx = [mx.gpu(i) for i in range(args.num_gpus)] if args.num_gpus else [mx.cpu()]
    batch_size = args.batch_size * max(1, args.num_gpus)
    mx.random.seed(args.seed)
    np.random.seed(args.seed)

    dataset = load_data(args)
    normalize(dataset)
    num_workers = expected_num_workers(args.kvstore)
    shard_size = len(dataset.train_data) // num_workers
    if shard_size // batch_size < 1:
        args.parser.error('--batch-size %d is larger than a worker\'s shard (%d images of %s '
                          'over %d workers): expected at most %d'
                          % (batch_size, shard_size, args.dataset, num_workers, shard_size))

    try:
        net = get_model(args.model, dataset.num_classes, dataset.image_shape, args.drop_rate)
    except Exception as err:
        args.parser.error('--model %s: cannot build it for %s (%s classes, images %s): %s: %s'
                          % (args.model, args.dataset, dataset.num_classes,
                             'x'.join(map(str, dataset.image_shape)), type(err).__name__, err))
    kv = make_kvstore(args)
    rank, num_workers = kv.rank, kv.num_workers
    rank_filter.rank = rank
    iters_per_epoch = (len(dataset.train_data) // num_workers) // batch_size
    shard_index = data.shard(len(dataset.train_data), rank, num_workers, seed=args.seed)
    train_x, train_y = dataset.train_data[shard_index], dataset.train_label[shard_index]
    augment = args.dataset.startswith('cifar') and not args.no_augment
    slowdown = args.slowdown_factors.get(rank, 1.0)
    total_iters = args.num_epochs * iters_per_epoch
    if args.num_iterations is not None:
        total_iters = min(total_iters, args.num_iterations)
    num_epochs = int(math.ceil(total_iters / float(iters_per_epoch)))

    resume = args.resume_info
    start_epoch = int(resume['completed_epochs']) + 1 if resume else 1
    iteration = int(resume.get('iteration') or (start_epoch - 1) * iters_per_epoch) if resume \
        else 0
    logger.info('options: %s', ' '.join('%s=%s' % kv for kv in args.options))
    about = describe_model(args.model)
    logger.info('%s on %s (%s), kvstore %s, %d worker(s), optimizer %s; shard of %d '
                'images, %d iterations of %d per epoch, %d epoch(s)%s%s%s',
                args.model if about == args.model else '%s [%s]' % (args.model, about),
                args.dataset, dataset.source, kv.type, num_workers,
                args.optimizer, len(train_x), iters_per_epoch, batch_size, num_epochs,
                ', augmented' if augment else '',
                ', slowdown x%g' % slowdown if slowdown != 1.0 else '',
                ', resuming after epoch %d (iteration %d) from %s'
                % (start_epoch - 1, iteration, args.resume_from) if resume else '')

    if resume:
        net.load_parameters(args.resume_from, ctx=ctx)
    else:
        net.initialize(mx.init.Xavier(rnd_type='gaussian', factor_type='in', magnitude=2),
                       ctx=ctx)
    if args.mode == 'hybrid':
        net.hybridize(static_alloc=True, static_shape=True)
    # A list, so that the store key of a parameter is its index in `params`.
    params = list(net.collect_params().values())
    # dist_sync sums the workers' gradients; --sync-average makes it their mean
    optimizer = make_optimizer(args, batch_size * (num_workers if args.sync_average else 1))
    # dist_sync: the servers sum the gradients and every worker applies the same update,
    # so learning-rate changes need no server (MXNet's servers ignore them, #15919).
    update_on_kvstore = False if kv.type == 'dist_sync' else None
    trainer = gluon.Trainer(params, optimizer, kvstore=kv, update_on_kvstore=update_on_kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def lr_of(epoch):
        return learning_rate_at(epoch, args.lr, args.lr_decay, args.lr_decay_epochs,
                                args.lr_decay_period)

    # before the store gets the optimizer (first step, or load_states): a resumed run's
    # servers start with the learning rate of its first epoch
    lr = lr_of(start_epoch)
    trainer.set_learning_rate(lr)
    if resume:
        logger.info('epoch %d: learning rate %g', start_epoch, lr)
        if restore_states(trainer, kv, args, resume):
            # MXNet's own stores replace the optimizer by the one saved with the state
            trainer.set_learning_rate(lr)

    appending = resume is not None
    train_log = JsonLines(os.path.join(save_dir, 'train-worker%d.jsonl' % rank), appending)
    eval_log = JsonLines(os.path.join(save_dir, 'eval.jsonl'), appending) if rank == 0 else None
    start = time.time()
    progress = make_progress(rank, total_iters, min(iteration, total_iters), args.no_progress)
    _Handler.bar = progress

    def record_eval(epoch, iteration, final=False):
        accuracy = evaluate(net, dataset.test_data, dataset.test_label, ctx=ctx[0])
        now = time.time()
        eval_log.write(time=now, elapsed_s=round(now - start, 4), epoch=epoch,
                       iteration=iteration, accuracy=accuracy, lr=lr, final=final)
        return accuracy

    def checkpoint_meta(epoch, completed):
        return {'completed_epochs': completed, 'epoch': epoch,
                'iteration': iteration, 'lr': lr, 'kvstore': kv.type,
                'num_workers': num_workers, 'optimizer': args.optimizer, 'model': args.model,
                'dataset': args.dataset, 'time': time.time()}

    accuracy = None
    epoch = completed = start_epoch - 1
    for epoch in range(start_epoch, num_epochs + 1):
        if iteration >= total_iters:
            break
        new_lr = lr_of(epoch)
        if new_lr != lr:
            logger.info('epoch %d: learning rate %g', epoch, new_lr)
            trainer.set_learning_rate(new_lr)   # mxnet-ssp stores pass it on to the servers
            lr = new_lr
        order = data.epoch_order(len(train_x), args.seed, rank, epoch)

        def transform(x, b, epoch=epoch):
            return data.crop_flip(x, data.batch_rng(args.seed, rank, epoch, b))

        batches = data.iterate_batches(train_x, train_y, batch_size, order,
                                           transform if augment else None,
                                           args.num_data_workers)
        epoch_loss, epoch_correct, epoch_start, epoch_iters = 0.0, 0, time.time(), 0
        for xb, yb in batches:
            if iteration >= total_iters:
                break
            t0 = time.perf_counter()
            xs = gluon.utils.split_and_load(mx.nd.array(xb), ctx, even_split=False)
            ys = gluon.utils.split_and_load(mx.nd.array(yb), ctx, even_split=False)
            with autograd.record():
                outs = [net(x) for x in xs]
                losses = [loss_fn(out, y) for out, y in zip(outs, ys)]
            for loss in losses:
                loss.backward()
            # waits for the backward pass
            loss_value = sum(float(loss.sum().asscalar()) for loss in losses) / len(yb)
            correct = sum(int((out.argmax(axis=1) == y.astype(out.dtype)).sum().asscalar())
                          for out, y in zip(outs, ys))
            compute_s = time.perf_counter() - t0
            sleep_s = (slowdown - 1.0) * compute_s
            if sleep_s > 0:
                time.sleep(sleep_s)
            t1 = time.perf_counter()
            trainer.step(1)                      # rescale_grad = 1 / batch_size already
            mx.nd.waitall()                      # the new weights are here
            step_s = time.perf_counter() - t1
            iteration += 1
            epoch_iters += 1
            epoch_loss += loss_value
            epoch_correct += correct
            train_log.write(rank=rank, iteration=iteration, epoch=epoch, time=time.time(),
                            compute_s=round(compute_s, 6), step_s=round(step_s, 6),
                            loss=round(loss_value, 6), sleep_s=round(sleep_s, 6),
                            lr=lr, train_accuracy=round(correct / float(len(yb)), 6))
            if progress is not None:
                progress.update(1)
                progress.set_postfix(epoch=epoch, loss='%.3f' % loss_value, refresh=False)
            if args.log_interval and iteration % args.log_interval == 0:
                logger.info('epoch %d iteration %d loss %.4f compute %.1f ms step %.1f ms',
                            epoch, iteration, loss_value, 1e3 * compute_s, 1e3 * step_s)
        batches.close()
        if epoch_iters == 0:
            epoch -= 1
            break
        if epoch_iters == iters_per_epoch:
            completed = epoch
        msg = ('epoch %d done: %d iterations in %.2f s, mean loss %.4f, train accuracy %.4f'
               % (epoch, epoch_iters, time.time() - epoch_start, epoch_loss / epoch_iters,
                  epoch_correct / float(epoch_iters * batch_size)))
        if rank == 0:
            accuracy = record_eval(epoch, iteration)
            msg += ', test accuracy %.4f' % accuracy
        logger.info(msg)
        if rank == 0 and args.save_period and epoch % args.save_period == 0:
            save_checkpoint(net, trainer, kv, save_dir, 'model-epoch%03d' % epoch,
                            checkpoint_meta(epoch, completed))
    if progress is not None:
        progress.close()
        _Handler.bar = None
    train_log.close()

    # Wait for every worker, then read the weights on the servers: under ASP/SSP
    # the others may still have pushed after worker 0's last pull.  (dist_sync keeps
    # summed gradients, not weights, on its servers: its workers all hold the weights.)
    distributed = kv.type.startswith('dist')
    if distributed:
        kv._barrier()
    if rank == 0:
        if distributed and kv.type != 'dist_sync':
            read_server_weights(kv, params)
        accuracy = record_eval(epoch, iteration, final=True)
        save_checkpoint(net, trainer, kv, save_dir, 'model-final',
                        checkpoint_meta(epoch, completed))
        eval_log.close()
        wall = time.time() - start
        staleness, mode = args.staleness, args.dssp_mode
        settings = getattr(kv, 'config', None)       # our stores: the settings in effect
        if settings is not None and settings.synchronous:
            staleness = (str(settings.s_lower) if settings.s_lower == settings.s_upper
                         else '%d,%d' % (settings.s_lower, settings.s_upper))
            mode = settings.mode if kv.type == 'dist_dssp' else None
        summary = {
            'kvstore': kv.type, 'staleness': staleness, 'dssp_mode': mode,
            'splits': getattr(settings, 'splits', None) if kv.type == 'dist_softsync' else None,
            'num_workers': num_workers, 'model': args.model,
            'model_description': describe_model(args.model), 'dataset': args.dataset,
            'augment': augment, 'batch_size': args.batch_size, 'num_gpus': args.num_gpus,
            'sync_average': args.sync_average,
            'optimizer': args.optimizer, 'lr': args.lr, 'momentum': args.momentum,
            'wd': args.wd, 'lr_decay': args.lr_decay, 'lr_decay_epoch': args.lr_decay_epochs,
            'lr_decay_period': args.lr_decay_period, 'final_lr': lr,
            'num_parameters': int(sum(p.data(ctx[0]).size for p in params)),
            'slowdown': args.slowdown, 'seed': args.seed, 'resumed_from': args.resume_from,
            'iterations_per_worker': {str(r): n for r, n in count_iterations(save_dir).items()},
            'final_accuracy': accuracy, 'wall_time_s': round(wall, 3),
        }
        with open(os.path.join(save_dir, 'summary.json'), 'w') as f:
            json.dump(summary, f, indent=2)
        logger.info('done: final test accuracy %.4f, %d iterations, %.1f s; metrics in %s',
                    accuracy, iteration, wall, save_dir)
    else:
        logger.info('done: %d iterations in %.1f s', iteration, time.time() - start)
    return 0


if __name__ == '__main__':
    sys.exit(main())
