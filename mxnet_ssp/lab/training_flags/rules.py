"""The rules of the training script's flags: :data:`CHECKS` has one row per rule, in the
order they are tried, and :func:`find_problem` reports the first that fails (the flag, its
value and what is accepted).  :func:`parse_args` / :func:`check_args` check a command line
cheaply (no MXNet, no GluonCV), so a job runner can reject bad flags before it starts any
process.
"""
import math
import os
from collections import namedtuple

from ... import config
from ...core.names import ADAPTIVE_READINGS, DATASETS, DCASGD_PW, DSSP_MODES, SASGD
from ..cluster_model.profiles import get_scenario
from .generated_knobs import TEACHER_DEFAULTS, TEACHER_KNOBS
from ...core.env_names import DMLC_ROLE
from .defaults import fill_defaults
from .flags import (KVSTORES, OPTIMIZERS, SSP_KVSTORES, STALENESS_KVSTORES, STALENESS_LR,
                    TRAIN_MODES, build_parser)
from .models import check_model
from .values import (check_save_dir, checkpoint_info, expected_num_workers,
                     parse_decay_epochs, parse_slowdown, wraps_async)


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


def _check_teacher_knobs(args, job):
    """The teacher's knobs (--teacher-scale, --teacher-noise, --teacher-dim,
    --teacher-hidden, --teacher-train-size), set to other than their defaults, only with
    --dataset teacher (on another dataset they would change nothing)."""
    if args.dataset == 'teacher':
        return None
    for knob, flag in TEACHER_KNOBS:
        value = getattr(args, _attr(flag))
        if value != TEACHER_DEFAULTS[knob]:
            return ('%s %r is only accepted with --dataset teacher, not with --dataset %s'
                    % (flag, value, args.dataset))
    return None


def _check_one_decay_schedule(args, job):
    """--lr-decay-period and --lr-decay-epoch exclude each other."""
    if args.lr_decay_period and args.lr_decay_epochs:
        return ('--lr-decay-period %d and --lr-decay-epoch %r both say when to decay: '
                'give one of them' % (args.lr_decay_period, args.lr_decay_epoch))
    return None


def _check_job(args, job):
    """A dist store needs a parameter-server job (DMLC_ROLE set by a launcher)."""
    if args.kvstore.startswith('dist') and not job.environ.get(DMLC_ROLE):
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
            bound = job.num_workers if job.environ.get(DMLC_ROLE) else None
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
    Value('--teacher-scale', _number(lambda x: x > 0), 'a number > 0'),
    Value('--teacher-noise', _number(lambda x: 0 <= x <= 1), 'a number in [0, 1]'),
    Value('--teacher-dim', _at_least(1), 'an integer >= 1'),
    Value('--teacher-hidden', _at_least(1), 'an integer >= 1'),
    Value('--teacher-train-size', _at_least(1), 'an integer >= 1'),
    _check_teacher_knobs,
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
    Value('--lr', _optional(_number(lambda x: x > 0)), 'a number > 0'),
    Value('--momentum', _optional(_number(lambda x: 0 <= x < 1)), 'a number in [0, 1)'),
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
    --resume-from).  When every row passes, the defaults that depend on the model and the
    job (``--lr``, ``--momentum``) are filled in (:func:`.defaults.fill_defaults`)."""
    env = config.current(environ)     # os.environ over the job's settings file
    job = Job(env, expected_num_workers(args.kvstore, env))
    for row in CHECKS:
        if getattr(row, 'flag', None) in skip:
            continue
        message = row(args, job)
        if message:
            return row, message
    fill_defaults(args, job)
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
    env.update({DMLC_ROLE: 'worker', config.ENV_NUM_WORKER: str(int(num_workers))})
    return parse_args(argv, env)
