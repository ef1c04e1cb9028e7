"""The one place that reads mxnet-ssp configuration.

Every environment variable the package understands is named here as a
constant, parsed into a typed value and validated with a message that names
the variable, the value and the accepted form.  Nothing else in the package
reads ``os.environ`` for these settings.
"""
import math
import os
from dataclasses import dataclass, replace

from .core.names import BOUNDED, DSSP_MODES, DSSP_STALENESS

__all__ = ['ENV_STALENESS', 'ENV_DSSP_MODE', 'ENV_TIMEOUT', 'ENV_METRICS_DIR',
           'ENV_SOFTSYNC_SPLITS', 'ENV_STALENESS_LOG', 'ENV_WRAP_ASYNC', 'ENV_WRAP_SYNC',
           'ENV_CONTROLLER', 'SERVER_SYNC_TYPES', 'wrap_sync', 'WRAP_SETTINGS',
           'STORE_TYPES', 'ASYNC_STORE_TYPES', 'OUR_STORE_TYPES', 'NATIVE_DIST_TYPES',
           'CONTROLLER_PLACEMENTS', 'DEFAULT_CONTROLLER', 'SyncConfig',
           'ConfigError', 'parse_staleness', 'parse_mode', 'parse_timeout',
           'from_env', 'check_kvstore_name', 'parse_splits', 'parse_flag', 'wrap_async',
           'controller_placement', 'ENV_AUTOLOAD', 'FLAG_VALUES', 'ENV_NUM_SERVER',
           'parse_num_servers', 'num_servers', 'ENV_NUM_WORKER', 'parse_num_workers',
           'num_workers', 'ENV_GPUS', 'parse_gpus', 'worker_gpus',
           'ENV_BALANCE_MIN', 'ENV_BALANCE_MAX', 'ENV_BALANCE_PERIOD', 'ENV_BALANCE_THRESHOLD',
           'ENV_BALANCE_SMOOTHING', 'BALANCE_ENV', 'BalanceConfig', 'balance_from_env',
           'ENV_ELASTIC', 'parse_elastic', 'elastic_min_workers', 'UNBOUNDED_STALENESS',
           'ENV_REJOIN', 'rejoining', 'ENV_FOLLOW_GRACE', 'DEFAULT_FOLLOW_GRACE', 'follow_grace',
           'metrics_dir_if_set']

ENV_STALENESS = 'MXNET_SSP_STALENESS'
ENV_DSSP_MODE = 'MXNET_SSP_DSSP_MODE'
ENV_TIMEOUT = 'MXNET_SSP_TIMEOUT'
ENV_METRICS_DIR = 'MXNET_SSP_METRICS_DIR'
ENV_SOFTSYNC_SPLITS = 'MXNET_SSP_SOFTSYNC_SPLITS'
ENV_STALENESS_LOG = 'MXNET_SSP_STALENESS_LOG'
ENV_WRAP_ASYNC = 'MXNET_SSP_WRAP_ASYNC'
#: Whether mxnet-ssp serves MXNet's ``dist_sync`` (BSP) with its bucketed data path.
ENV_WRAP_SYNC = 'MXNET_SSP_WRAP_SYNC'
#: The GPUs of one worker process, as its MXNet numbers them (``'0'``, ``'0,1'``): set by
#: ``mxnet-ssp-launch --gpus-per-worker / --gpu-map``, read by the training loop.
ENV_GPUS = 'MXNET_SSP_GPUS'
#: Batch balancing (:mod:`mxnet_ssp.balance`, docs/balance.md): the smallest and largest batch
#: of one worker, iterations between two decisions, the predicted gain below which the split
#: stays (hysteresis) and the weight of the newest measurement in the rate average (EMA).
ENV_BALANCE_MIN = 'MXNET_SSP_BALANCE_MIN'
ENV_BALANCE_MAX = 'MXNET_SSP_BALANCE_MAX'
ENV_BALANCE_PERIOD = 'MXNET_SSP_BALANCE_PERIOD'
ENV_BALANCE_THRESHOLD = 'MXNET_SSP_BALANCE_THRESHOLD'
ENV_BALANCE_SMOOTHING = 'MXNET_SSP_BALANCE_SMOOTHING'
BALANCE_ENV = (ENV_BALANCE_MIN, ENV_BALANCE_MAX, ENV_BALANCE_PERIOD, ENV_BALANCE_THRESHOLD,
               ENV_BALANCE_SMOOTHING)
#: Where the controller runs in its server process's host: ``process`` (its own, default) or
#: ``thread`` (a thread of the server process, sharing its GIL with the update rules).
ENV_CONTROLLER = 'MXNET_SSP_CONTROLLER'
CONTROLLER_PLACEMENTS = ('process', 'thread')
#: Where the controller runs when MXNET_SSP_CONTROLLER is not set.
DEFAULT_CONTROLLER = 'process'
#: Elastic mode (docs/elastic.md): the least number of workers the job needs; a lost worker
#: is dropped and the others go on while at least that many are left.  Unset, empty, ``0`` or
#: ``off``: fail-fast (a lost worker fails the job).  Set in every process of the job.
ENV_ELASTIC = 'MXNET_SSP_ELASTIC'
#: Set by ``mxnet-ssp-launch --max-restarts`` in a worker it restarted: the process replaces a
#: lost worker (ps-lite gives it the dead worker's rank) and rejoins the job (docs/elastic.md).
ENV_REJOIN = 'MXNET_SSP_REJOIN'
#: The staleness bound of the asynchronous stores' controller in elastic mode: it only counts
#: clocks and members, it never holds a worker.
UNBOUNDED_STALENESS = 2 ** 31 - 1
#: Launcher-only setting: extra ssh options, split like a shell would, put
#: after ``ssh`` (and in rsync's ``-e``), e.g. ``'-F ./ssh_config'`` or ``'-i key -l user'``.
ENV_SSH_ARGS = 'MXNET_SSP_LAUNCH_SSH_ARGS'
#: Launcher-only setting: the mpirun program to use (default ``mpirun``).
ENV_MPIRUN = 'MXNET_SSP_LAUNCH_MPIRUN'
#: Set by the launcher in every process: its launch index within its role
#: (``worker #1`` has 1).  Not the ps-lite rank, which ps-lite assigns itself.
ENV_LAUNCH_INDEX = 'MXNET_SSP_LAUNCH_INDEX'
#: ps-lite's number of servers (set by every launcher); slot mode lays out keys with it.
ENV_NUM_SERVER = 'DMLC_NUM_SERVER'
#: ps-lite's number of workers (set by every launcher); the training script checks
#: ``--splits``, ``--slowdown``, ``--emulate`` and ``--balance`` against it.
ENV_NUM_WORKER = 'DMLC_NUM_WORKER'
#: Read by the start-up hook (kvstore_patches/mxnet_ssp_autoload.py) before this package is
#: imported, with the same values as :func:`parse_flag`.
ENV_AUTOLOAD = 'MXNET_SSP_AUTOLOAD'
#: Seconds a scheduler, server or worker waits, once one of its ps-lite connections closed
#: for good, before it ends itself because the job failed (:mod:`mxnet_ssp.ps.follow`).
ENV_FOLLOW_GRACE = 'MXNET_SSP_FOLLOW_GRACE'
DEFAULT_FOLLOW_GRACE = 10.0
#: Bytes per bucket of small arrays (:mod:`mxnet_ssp.core.buckets`); 0 turns bucketing off.
ENV_BUCKET_BYTES = 'MXNET_SSP_BUCKET_BYTES'
#: Its default (docs/stores.md, "Buckets", gives the measurements behind it).
DEFAULT_BUCKET_BYTES = 4 << 20
#: Whether a worker's batched copies into and out of buckets run as NumPy copies inside one
#: operation of MXNet's engine (on, the default) or as MXNet's own copies (docs/stores.md).
ENV_HOST_COPIES = 'MXNET_SSP_HOST_COPIES'
#: Whether the servers run MXNet's own SGD as NumPy passes with the same bits (on, the
#: default) or through MXNet's operator (docs/stores.md, "The servers' update").
ENV_HOST_UPDATES = 'MXNET_SSP_HOST_UPDATES'
#: MXNet's own setting: arrays of at least this many elements are split over all servers.
ENV_BIGARRAY_BOUND = 'MXNET_KVSTORE_BIGARRAY_BOUND'
#: The accepted spellings of a yes/no setting, and what they mean.
FLAG_VALUES = {'1': True, 'true': True, 'yes': True, 'on': True,
               '0': False, 'false': False, 'no': False, 'off': False}

#: Store types this package adds, mapped to their default staleness (sL, sU).
STORE_TYPES = {'dist_ssp': (3, 3), 'dist_dssp': DSSP_STALENESS}
#: Asynchronous store types this package provides: no controller; the servers know the
#: sender and staleness of every gradient when the optimizer needs it.
ASYNC_STORE_TYPES = ('dist_async', 'dist_softsync')
#: MXNet's synchronous store type that this package serves too (no controller: MXNet's
#: servers wait for every worker's push of a key and apply the sum once).
SERVER_SYNC_TYPES = ('dist_sync',)
#: MXNet's store types mxnet-ssp serves under their own names, and the setting that keeps
#: MXNet's store instead.
WRAP_SETTINGS = {'dist_async': ENV_WRAP_ASYNC, 'dist_sync': ENV_WRAP_SYNC}
#: Every store type of this package (in the order messages list them): their servers can
#: report the sender and staleness of every gradient.
OUR_STORE_TYPES = ('dist_async', 'dist_ssp', 'dist_dssp', 'dist_softsync')
#: MXNet's own store types that a launcher or script may also name.
NATIVE_DIST_TYPES = ('local', 'device', 'nccl', 'dist_sync', 'dist_device_sync',
                     'dist_async', 'dist_device_async', 'dist', 'horovod')
DEFAULT_TIMEOUT = 300.0
DEFAULT_METRICS_DIR = 'mxnet_ssp_metrics'


class ConfigError(ValueError):
    """A setting has a value that is not accepted; the message says which."""


@dataclass(frozen=True)
class SyncConfig:
    """Settings of one SSP/DSSP job, identical on every process of the job.

    Attributes
    ----------
    store : str
        ``'dist_ssp'`` or ``'dist_dssp'``.
    s_lower, s_upper : int
        Staleness range in iterations; ``s_lower == s_upper`` is plain SSP.
    mode : str
        ``'bounded'`` (the lead never exceeds ``s_upper``), ``'paper'``
        (Algorithm 1 of the DSSP paper read literally) or ``'threshold'``
        (a grant sets the worker's own threshold ``s_lower + r*``); see
        docs/dssp_modes.md.
    timeout : float
        Seconds a worker may wait for a release (or the controller for a
        peer) before the job fails naming the rank that holds it up.
    metrics_dir : str or None
        Directory for JSON Lines metrics; None disables them.
    controller : str
        Where the controller runs on its server's host: ``'process'`` or ``'thread'``
        (``MXNET_SSP_CONTROLLER``).
    """
    store: str = 'dist_dssp'
    s_lower: int = DSSP_STALENESS[0]
    s_upper: int = DSSP_STALENESS[1]
    mode: str = BOUNDED
    timeout: float = DEFAULT_TIMEOUT
    metrics_dir: str = DEFAULT_METRICS_DIR
    splits: int = None
    staleness_log: bool = False
    controller: str = DEFAULT_CONTROLLER
    elastic: int = 0

    @property
    def synchronous(self):
        """True for SSP/DSSP stores (a controller decides when workers go on)."""
        return self.store in STORE_TYPES

    @property
    def reports_clock(self):
        """True when the worker reports each step to the controller: SSP/DSSP, and every
        store in elastic mode (the controller keeps the members and their clocks)."""
        return self.synchronous or self.elastic > 0

    @property
    def r_max(self):
        """Largest number of extra iterations the controller may grant."""
        return self.s_upper - self.s_lower

    def describe(self):
        """One line with the settings in effect, for the start-up log."""
        if not self.synchronous:
            extra = ' splits=%s' % self.splits if self.store == 'dist_softsync' else ''
            return '%s%s%s metrics=%s' % (self.store, extra, self._elastic_text(),
                                         self.metrics_dir or 'off')
        rng = (str(self.s_lower) if self.s_lower == self.s_upper
               else '[%d, %d]' % (self.s_lower, self.s_upper))
        return ('%s staleness=%s mode=%s timeout=%gs%s metrics=%s'
                % (self.store, rng, self.mode, self.timeout, self._elastic_text(),
                   self.metrics_dir or 'off'))

    def _elastic_text(self):
        return ' elastic(min %d workers)' % self.elastic if self.elastic else ''


def _accepted_staleness(store):
    if store == 'dist_ssp':
        return "one integer s >= 0 (e.g. '3')"
    return "'sL,sU' with integers 0 <= sL <= sU (e.g. '3,15'), or one integer s meaning [s, s]"


def parse_staleness(value, store='dist_dssp', source=ENV_STALENESS):
    """Parse a staleness setting for `store`.

    Parameters
    ----------
    value : str, int or tuple of two ints
        ``'s'`` / ``s`` or ``'sL,sU'`` / ``(sL, sU)``.
    store : str
        Which store the value is for; ``dist_ssp`` takes a single integer.
    source : str
        Name of the setting, used in error messages.

    Returns
    -------
    tuple of int
        ``(s_lower, s_upper)``.
    """
    if check_kvstore_name(store, ours_only=True) not in STORE_TYPES:
        raise ConfigError('staleness is not a setting of %s: only %s take one'
                          % (store, ' and '.join(STORE_TYPES)))
    accepted = _accepted_staleness(store)
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(',')]
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise ConfigError('%s=%r is not valid for %s: expected %s'
                              % (source, value, store, accepted)) from None
    elif isinstance(value, bool):
        raise ConfigError('%s=%r is not valid for %s: expected %s' % (source, value, store, accepted))
    elif isinstance(value, int):
        nums = [value]
    elif isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                  for v in value):
        nums = list(value)
    else:
        raise ConfigError('%s=%r is not valid for %s: expected %s' % (source, value, store, accepted))
    if len(nums) == 1:
        nums = nums * 2
    elif store == 'dist_ssp' or len(nums) != 2:
        raise ConfigError('%s=%r is not valid for %s: expected %s' % (source, value, store, accepted))
    s_lower, s_upper = nums
    if s_lower < 0 or s_upper < 0:
        raise ConfigError('%s=%r is not valid for %s: staleness cannot be negative; expected %s'
                          % (source, value, store, accepted))
    if s_lower > s_upper:
        raise ConfigError('%s=%r is not valid for %s: sL=%d is greater than sU=%d; expected %s'
                          % (source, value, store, s_lower, s_upper, accepted))
    return s_lower, s_upper


def parse_mode(value, source=ENV_DSSP_MODE):
    """Parse the DSSP mode: one of :data:`DSSP_MODES` (case-insensitive)."""
    mode = str(value).strip().lower()
    if mode not in DSSP_MODES:
        raise ConfigError('%s=%r is not valid: expected one of %s'
                          % (source, value, ', '.join(DSSP_MODES)))
    return mode


def parse_timeout(value, source=ENV_TIMEOUT):
    """Parse a timeout in seconds: a finite number > 0."""
    try:
        timeout = float(value)
    except (TypeError, ValueError):
        timeout = float('nan')
    if not (math.isfinite(timeout) and timeout > 0):
        raise ConfigError('%s=%r is not valid: expected a number of seconds > 0 (e.g. 300)'
                          % (source, value))
    return timeout


def parse_splits(value, num_workers=None, source=ENV_SOFTSYNC_SPLITS):
    """Parse n of n-softsync: an integer in [1, num_workers] (upper bound checked if known)."""
    bound = 'num_workers' if num_workers is None else str(num_workers)
    try:
        splits = int(str(value).strip())
    except ValueError:
        splits = None
    if splits is None or isinstance(value, bool) or splits < 1 or (
            num_workers is not None and splits > num_workers):
        raise ConfigError('%s=%r is not valid for dist_softsync: expected an integer n with '
                          '1 <= n <= %s (the server applies one update per floor(%s / n) '
                          'gradients)' % (source, value, bound, bound))
    return splits


def parse_flag(value, source, default):
    """Parse a yes/no setting (see FLAG_VALUES, any case); empty or None gives `default`."""
    if value is None or not str(value).strip():
        return default
    key = str(value).strip().lower()
    if key not in FLAG_VALUES:
        raise ConfigError('%s=%r is not valid: expected one of %s (yes) or %s (no)'
                          % (source, value, ', '.join(k for k, v in FLAG_VALUES.items() if v),
                             ', '.join(k for k, v in FLAG_VALUES.items() if not v)))
    return FLAG_VALUES[key]


def parse_gpus(value, source=ENV_GPUS):
    """Parse a list of GPU ids: distinct integers >= 0, comma-separated (``'0'``, ``'0,1'``).

    Returns
    -------
    tuple of int
        In the given order; empty for an empty or blank value.
    """
    text = str(value).strip()
    if not text:
        return ()
    try:
        ids = tuple(int(part) for part in text.split(','))
    except ValueError:
        ids = None
    if ids is None or any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ConfigError("%s=%r is not valid: expected distinct GPU ids >= 0, comma-separated "
                          "(e.g. '0' or '0,1')" % (source, value))
    return ids


def worker_gpus(environ=None):
    """The GPU ids :data:`ENV_GPUS` gives this process (empty tuple if it is not set)."""
    env = os.environ if environ is None else environ
    return parse_gpus(env.get(ENV_GPUS, ''))


def parse_num_servers(value, source=ENV_NUM_SERVER):
    """Parse a number of servers: an integer >= 1."""
    try:
        count = int(str(value).strip())
    except ValueError:
        count = None
    if count is None or isinstance(value, bool) or count < 1:
        raise ConfigError('%s=%r is not valid: expected the number of parameter servers of the '
                          'job, an integer >= 1 (the launcher sets it)' % (source, value))
    return count


def num_servers(environ=None):
    """The job's number of servers (``DMLC_NUM_SERVER``, which ps-lite itself requires)."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_NUM_SERVER)
    if value is None or not str(value).strip():
        raise ConfigError('%s is not set: a distributed store needs the number of parameter '
                          'servers of the job (the launcher sets it)' % ENV_NUM_SERVER)
    return parse_num_servers(value)


def parse_num_workers(value):
    """Parse a number of workers leniently: an integer, and at least 1.

    Unlike the other parsers here it refuses nothing: a value that is not an
    integer (``'two'``, ``''``, ``'2.0'``) counts as 1 worker, and so does one below 1.
    This is how the training script has always read :data:`ENV_NUM_WORKER`, kept so
    that its behaviour does not change; ps-lite itself refuses such a job later.
    """
    try:
        count = int(value)
    except ValueError:
        return 1
    return max(1, count)


def num_workers(environ=None):
    """The job's number of workers (``DMLC_NUM_WORKER``); 1 when it is not set.

    Lenient like :func:`parse_num_workers`: never raises for a bad value.
    """
    env = os.environ if environ is None else environ
    value = env.get(ENV_NUM_WORKER)
    if value is None:
        return 1
    return parse_num_workers(value)


def parse_elastic(value, num_workers=None, source=ENV_ELASTIC):
    """Parse the elastic setting: the least number of workers the job needs, or 0 (off).

    Accepted: unset, empty, ``0``, ``off``, ``no`` or ``false`` (off: a lost worker fails the
    job), or an integer ``1 <= n`` (at most `num_workers` when given).
    """
    text = '' if value is None else str(value).strip().lower()
    if text in ('', '0', 'off', 'no', 'false'):
        return 0
    try:
        least = int(text)
    except ValueError:
        least = None
    bound = 'the number of workers (%d)' % num_workers if num_workers else 'the number of workers'
    if least is None or isinstance(value, bool) or least < 1 or (
            num_workers is not None and least > num_workers):
        raise ConfigError('%s=%r is not valid: expected the least number of workers the job '
                          'needs to go on, an integer 1 <= n <= %s, or 0/off for fail-fast'
                          % (source, value, bound))
    return least


def elastic_min_workers(environ=None):
    """The job's elastic setting (:data:`ENV_ELASTIC`): least workers, or 0 (off)."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_ELASTIC)
    workers = env.get(ENV_NUM_WORKER)
    return parse_elastic(value, parse_num_workers(workers) if workers else None)


def rejoining(environ=None):
    """Whether this worker replaces a lost one (:data:`ENV_REJOIN`, a yes/no flag)."""
    env = os.environ if environ is None else environ
    return parse_flag(env.get(ENV_REJOIN), ENV_REJOIN, False)


def controller_placement(environ=None):
    """Where the controller runs (``MXNET_SSP_CONTROLLER``): ``process`` (default) or ``thread``."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_CONTROLLER)
    if value is None or not value.strip():
        return DEFAULT_CONTROLLER
    placement = value.strip().lower()
    if placement not in CONTROLLER_PLACEMENTS:
        raise ConfigError('%s=%r is not valid: expected one of %s'
                          % (ENV_CONTROLLER, value, ', '.join(CONTROLLER_PLACEMENTS)))
    return placement


def wrap_async(environ=None):
    """Whether mxnet-ssp registers its own ``dist_async`` (``MXNET_SSP_WRAP_ASYNC``, default on)."""
    env = os.environ if environ is None else environ
    return parse_flag(env.get(ENV_WRAP_ASYNC), ENV_WRAP_ASYNC, True)


def wrap_sync(environ=None):
    """Whether mxnet-ssp serves ``dist_sync`` with its bucketed data path
    (``MXNET_SSP_WRAP_SYNC``, default on)."""
    env = os.environ if environ is None else environ
    return parse_flag(env.get(ENV_WRAP_SYNC), ENV_WRAP_SYNC, True)


def check_kvstore_name(name, ours_only=False):
    """Check a kvstore type name; raise ConfigError naming the accepted ones."""
    ours = tuple(STORE_TYPES) + ASYNC_STORE_TYPES
    accepted = ours if ours_only else ours + tuple(n for n in NATIVE_DIST_TYPES if n not in ours)
    if not isinstance(name, str) or name.lower() not in accepted:
        raise ConfigError('kvstore type %r is not known: expected one of %s'
                          % (name, ', '.join(accepted)))
    return name.lower()


def from_env(store, environ=None, **overrides):
    """Build the SyncConfig for `store` from the environment and overrides.

    Parameters
    ----------
    store : str
        ``'dist_ssp'`` or ``'dist_dssp'``.
    environ : mapping, optional
        Environment to read (defaults to ``os.environ``); tests pass a dict.
    **overrides
        ``staleness``, ``mode``, ``timeout``, ``metrics_dir`` given from
        Python take precedence over the environment.
    """
    env = os.environ if environ is None else environ
    if not (isinstance(store, str) and store.lower() in SERVER_SYNC_TYPES):
        store = check_kvstore_name(store, ours_only=True)
    store = store.lower()
    known = {'staleness', 'mode', 'timeout', 'metrics_dir', 'splits', 'staleness_log'}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError('unknown settings %s: expected %s'
                        % (', '.join(sorted(unknown)), ', '.join(sorted(known))))
    if 'metrics_dir' in overrides:
        metrics_dir = overrides['metrics_dir'] or None
    else:
        metrics_dir = (metrics_dir_if_set(env) if ENV_METRICS_DIR in env
                       else DEFAULT_METRICS_DIR)
    log = overrides.get('staleness_log')
    if log is None:
        log = parse_flag(env.get(ENV_STALENESS_LOG), ENV_STALENESS_LOG, False)
    if store in ASYNC_STORE_TYPES or store in SERVER_SYNC_TYPES:
        for name in ('staleness', 'mode'):
            if overrides.get(name) is not None:
                raise ConfigError('%s is not a setting of %s: only %s take one'
                                  % (name, store, ' and '.join(STORE_TYPES)))
        splits = overrides.get('splits')
        if store == 'dist_softsync':
            if splits is not None:
                splits = parse_splits(splits, source='splits')
            elif env.get(ENV_SOFTSYNC_SPLITS, '').strip():
                splits = parse_splits(env[ENV_SOFTSYNC_SPLITS])
            else:
                splits = 1
        elif splits is not None:
            raise ConfigError('splits is a setting of dist_softsync, not of %s' % store)
        return SyncConfig(store=store, s_lower=0, s_upper=0, mode=BOUNDED,
                          timeout=parse_timeout(env.get(ENV_TIMEOUT) or DEFAULT_TIMEOUT),
                          metrics_dir=metrics_dir, splits=splits, staleness_log=bool(log),
                          controller=controller_placement(env),
                          elastic=elastic_min_workers(env))
    if overrides.get('splits') is not None:
        raise ConfigError('splits is a setting of dist_softsync, not of %s' % store)
    staleness = overrides.get('staleness')
    if staleness is not None:
        s_lower, s_upper = parse_staleness(staleness, store, source='staleness')
    elif env.get(ENV_STALENESS, '').strip():
        s_lower, s_upper = parse_staleness(env[ENV_STALENESS], store)
    else:
        s_lower, s_upper = STORE_TYPES[store]
    mode = overrides.get('mode')
    mode = (parse_mode(mode, source='mode') if mode is not None
            else parse_mode(env.get(ENV_DSSP_MODE) or BOUNDED))
    timeout = overrides.get('timeout')
    timeout = (parse_timeout(timeout, source='timeout') if timeout is not None
               else parse_timeout(env.get(ENV_TIMEOUT) or DEFAULT_TIMEOUT))
    return SyncConfig(store=store, s_lower=s_lower, s_upper=s_upper, mode=mode,
                      timeout=timeout, metrics_dir=metrics_dir, staleness_log=bool(log),
                      controller=controller_placement(env), elastic=elastic_min_workers(env))


def with_store(config, store):
    """Return `config` for another store type (used by tests)."""
    return replace(config, store=check_kvstore_name(store, ours_only=True))


# ---------------------------------------------------------------------------
# batch balancing
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class BalanceConfig:
    """Settings of batch balancing (docs/balance.md).

    Attributes
    ----------
    total : int or None
        Samples per iteration over all workers (fixed; None until the caller gives it).
    min_batch, max_batch : int or None
        Bounds of one worker's batch (None: 1, and the total).
    period : int
        Iterations between two decisions (K).
    threshold : float
        The split changes only when the predicted iteration time drops by more than this
        fraction (hysteresis).
    smoothing : float
        Weight of the newest round's compute time per sample in each worker's average (EMA).
    """
    total: int = None
    min_batch: int = None
    max_batch: int = None
    period: int = 10
    threshold: float = 0.05
    smoothing: float = 0.5

    def bounds(self):
        """``(lo, hi)`` of one worker's batch with the defaults filled in."""
        lo = 1 if self.min_batch is None else self.min_batch
        hi = self.total if self.max_batch is None else self.max_batch
        return lo, hi


def _int_setting(value, source, least, accepted):
    try:
        number = int(str(value).strip())
    except ValueError:
        number = None
    if number is None or isinstance(value, bool) or isinstance(value, float) or number < least:
        raise ConfigError('%s=%r is not valid: expected %s' % (source, value, accepted))
    return number


def _float_setting(value, source, ok, accepted):
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float('nan')
    if isinstance(value, bool) or not (math.isfinite(number) and ok(number)):
        raise ConfigError('%s=%r is not valid: expected %s' % (source, value, accepted))
    return number


def balance_from_env(environ=None, num_workers=None, **overrides):
    """Build the :class:`BalanceConfig` from the environment and overrides (Python wins).

    Parameters
    ----------
    environ : mapping, optional
        Defaults to ``os.environ``.
    num_workers : int, optional
        With ``total``, checks that the bounds admit a split:
        ``num_workers * min <= total <= num_workers * max``.
    **overrides
        ``total``, ``min_batch``, ``max_batch``, ``period``, ``threshold``, ``smoothing``.

    Raises
    ------
    ConfigError
        Naming the setting, its value and what is accepted.
    """
    env = os.environ if environ is None else environ
    known = {'total', 'min_batch', 'max_batch', 'period', 'threshold', 'smoothing'}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError('unknown balancing settings %s: expected %s'
                        % (', '.join(sorted(unknown)), ', '.join(sorted(known))))

    def pick(name, variable):
        if overrides.get(name) is not None:
            return overrides[name], name
        value = env.get(variable)
        if value is None or not str(value).strip():
            return None, variable
        return value, variable

    values = {}
    if overrides.get('total') is not None:
        values['total'] = _int_setting(overrides['total'], 'total', 1, 'an integer >= 1 (samples per '
                                       'iteration over all workers)')
    for name, variable in (('min_batch', ENV_BALANCE_MIN), ('max_batch', ENV_BALANCE_MAX)):
        value, source = pick(name, variable)
        if value is not None:
            values[name] = _int_setting(value, source, 1, "an integer >= 1 (one worker's "
                                        "batch, in samples)")
    value, source = pick('period', ENV_BALANCE_PERIOD)
    if value is not None:
        values['period'] = _int_setting(value, source, 1, 'an integer >= 1 (iterations '
                                        'between two decisions)')
    value, source = pick('threshold', ENV_BALANCE_THRESHOLD)
    if value is not None:
        values['threshold'] = _float_setting(
            value, source, lambda x: 0 <= x < 1,
            'a fraction in [0, 1): the predicted gain below which the split stays (e.g. 0.05)')
    value, source = pick('smoothing', ENV_BALANCE_SMOOTHING)
    if value is not None:
        values['smoothing'] = _float_setting(
            value, source, lambda x: 0 < x <= 1,
            'a weight in (0, 1]: how much the newest measurement counts (1: no averaging)')
    conf = BalanceConfig(**values)
    if conf.min_batch is not None and conf.max_batch is not None \
            and conf.min_batch > conf.max_batch:
        raise ConfigError('%s=%d is greater than %s=%d: expected min <= max'
                          % (ENV_BALANCE_MIN if overrides.get('min_batch') is None
                             else 'min_batch', conf.min_batch,
                             ENV_BALANCE_MAX if overrides.get('max_batch') is None
                             else 'max_batch', conf.max_batch))
    if conf.total is not None and num_workers is not None:
        lo, hi = conf.bounds()
        if not num_workers * lo <= conf.total <= num_workers * hi:
            raise ConfigError(
                'batch bounds [%d, %d] per worker (%s, %s) admit no split of %d samples over '
                '%d workers: expected %d * min <= %d <= %d * max'
                % (lo, hi, ENV_BALANCE_MIN, ENV_BALANCE_MAX, conf.total, num_workers,
                   num_workers, conf.total, num_workers))
    return conf


def bucket_bytes(environ=None, value=None):
    """Bytes per bucket: `value` (from Python) or ``MXNET_SSP_BUCKET_BYTES``, an integer >= 0
    (0: every array keeps its own key), default :data:`DEFAULT_BUCKET_BYTES`."""
    source = 'bucket_bytes'
    if value is None:
        env = os.environ if environ is None else environ
        value = env.get(ENV_BUCKET_BYTES)
        source = ENV_BUCKET_BYTES
        if value is None or not str(value).strip():
            return DEFAULT_BUCKET_BYTES
    return _int_setting(value, source, 0, 'a number of bytes, an integer >= 0 (0 turns '
                        'bucketing off; default %d)' % DEFAULT_BUCKET_BYTES)


def host_copies(environ=None):
    """``MXNET_SSP_HOST_COPIES``: whether bucket copies may run as NumPy copies on MXNet's
    engine (default on; a yes/no value as :func:`parse_flag` reads it)."""
    env = os.environ if environ is None else environ
    return parse_flag(env.get(ENV_HOST_COPIES), ENV_HOST_COPIES, True)


def host_updates(environ=None):
    """``MXNET_SSP_HOST_UPDATES``: whether the servers may run MXNet's SGD as NumPy passes
    (default on; a yes/no value as :func:`parse_flag` reads it)."""
    env = os.environ if environ is None else environ
    return parse_flag(env.get(ENV_HOST_UPDATES), ENV_HOST_UPDATES, True)


def bigarray_bound(environ=None):
    """MXNet's ``MXNET_KVSTORE_BIGARRAY_BOUND`` as MXNet reads it (default 1000000)."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_BIGARRAY_BOUND)
    if value is None or not str(value).strip():
        return 1000000
    return _int_setting(value, ENV_BIGARRAY_BOUND, 1, 'an integer >= 1 (MXNet\'s own setting: '
                        'arrays of at least this many elements are split over all servers)')


def follow_grace(environ=None):
    """``MXNET_SSP_FOLLOW_GRACE``: seconds, a number in [1, 600], default
    :data:`DEFAULT_FOLLOW_GRACE` (shorter would take ps-lite's reconnects at start-up for a
    failed job)."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_FOLLOW_GRACE)
    if value is None or not str(value).strip():
        return DEFAULT_FOLLOW_GRACE
    return _float_setting(value, ENV_FOLLOW_GRACE, lambda x: 1 <= x <= 600,
                          'a number of seconds from 1 to 600 (default %g)' % DEFAULT_FOLLOW_GRACE)


def metrics_dir_if_set(environ=None):
    """``MXNET_SSP_METRICS_DIR`` when it is set and not off (the default is not applied)."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_METRICS_DIR)
    if value is None or value.strip().lower() in ('', 'off', 'none', '0'):
        return None
    return value
