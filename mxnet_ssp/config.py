"""The one place that reads mxnet-ssp configuration.

Every environment variable the package understands is named here as a
constant, parsed into a typed value and validated with a message that names
the variable, the value and the accepted form.  Nothing else in the package
reads ``os.environ`` for these settings.

A reader called without an explicit `environ` reads this process's settings: ``os.environ``
over the job's settings file (``mxnet_ssp.env`` in the working directory, or
``MXNET_SSP_SETTINGS``; see "the job's settings file" below), which reaches every host whatever
the launcher.  Precedence: ``mxnet_ssp.create()`` arguments > environment > file > defaults.
"""
import math
import os
import socket
from dataclasses import dataclass, field, replace

from .core.agreement import KVSTORE, SETTINGS_FILE, differences, mismatch_message
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
           'metrics_dir_if_set', 'under_ssh', 'ENV_SETTINGS', 'SETTINGS_FILE', 'FILE_SETTINGS',
           'NOT_IN_FILE', 'SettingsView', 'settings_path', 'parse_settings_file',
           'settings_environ', 'settings_origin', 'reset_settings_cache', 'job_settings',
           'sender', 'this_host', 'check_updater_settings',
           'ENV_LIVENESS', 'DEFAULT_LIVENESS', 'parse_liveness', 'liveness_timeout', 'check_setting']

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
#: Seconds a connection of the job may stay silent (nothing received, not even the answer to
#: a TCP keepalive probe) before its peer host counts as lost: down or cut off
#: (:mod:`mxnet_ssp.core.liveness`, docs/elastic.md "Lost hosts").  ``0``/``off``: never.
ENV_LIVENESS = 'MXNET_SSP_LIVENESS_TIMEOUT'
DEFAULT_LIVENESS = 10.0
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
#: Seconds between the servers' copies of their weights (the lab's wall-clock evaluation,
#: mxnet_ssp/ps/snapshots.py); unset or 0: none.
ENV_SERVER_SNAPSHOTS = 'MXNET_SSP_SERVER_SNAPSHOTS'
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
    origins : tuple of (str, str)
        Where each setting came from: ``(MXNET_SSP_NAME, 'mxnet_ssp.create()' |
        'environment' | '<settings file> line N' | 'default')``; not compared.
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
    origins: tuple = field(default=(), compare=False)
    liveness: float = DEFAULT_LIVENESS

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


def parse_snapshot_period(value, source=ENV_SERVER_SNAPSHOTS):
    """Seconds between the servers' weight copies: 0 (off) or a number in [0.01, 3600]."""
    if value is None or not str(value).strip():
        return 0.0
    try:
        period = float(value)
    except ValueError:
        period = float('nan')
    if not (period == 0 or 0.01 <= period <= 3600):
        raise ConfigError('%s = %r: expected seconds between the servers\' weight copies, 0 '
                          '(off) or a number from 0.01 to 3600' % (source, value))
    return period


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
    env = _environ(environ)
    value = env.get(ENV_ELASTIC)
    workers = env.get(ENV_NUM_WORKER)
    return parse_elastic(value, parse_num_workers(workers) if workers else None)


def rejoining(environ=None):
    """Whether this worker replaces a lost one (:data:`ENV_REJOIN`, a yes/no flag)."""
    env = _environ(environ)
    return parse_flag(env.get(ENV_REJOIN), ENV_REJOIN, False)


def controller_placement(environ=None):
    """Where the controller runs (``MXNET_SSP_CONTROLLER``): ``process`` (default) or ``thread``."""
    env = _environ(environ)
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
    env = _environ(environ)
    return parse_flag(env.get(ENV_WRAP_ASYNC), ENV_WRAP_ASYNC, True)


def wrap_sync(environ=None):
    """Whether mxnet-ssp serves ``dist_sync`` with its bucketed data path
    (``MXNET_SSP_WRAP_SYNC``, default on)."""
    env = _environ(environ)
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
        Environment to read; tests pass a dict.  Default: ``os.environ`` over the job's
        settings file (:func:`settings_environ`).
    **overrides
        ``staleness``, ``mode``, ``timeout``, ``metrics_dir`` given from
        Python take precedence over the environment, which takes precedence over the
        settings file.
    """
    env = _environ(environ)
    try:
        conf = _from_env(store, env, overrides)
    except ConfigError as err:
        raise ConfigError(_with_origins(str(err), env)) from None
    origins = tuple((name, 'mxnet_ssp.create()' if arg in overrides and (
        overrides[arg] is not None or arg == 'metrics_dir')
                     else settings_origin(env, name))
                    for arg, name in _OVERRIDE_ENV)
    conf = replace(conf, origins=origins)
    if environ is None:
        _note_defaults_once(conf, env)
    return conf


#: from_env's keyword arguments and the settings they replace.
_OVERRIDE_ENV = (('staleness', ENV_STALENESS), ('mode', ENV_DSSP_MODE), ('timeout', ENV_TIMEOUT),
                 ('metrics_dir', ENV_METRICS_DIR), ('splits', ENV_SOFTSYNC_SPLITS),
                 ('staleness_log', ENV_STALENESS_LOG), (None, ENV_ELASTIC),
                 (None, ENV_CONTROLLER))


def _environ(environ):
    """`environ` as given, or this process's settings: ``os.environ`` over the settings file
    (:func:`settings_environ`)."""
    if environ is not None:
        return environ
    return settings_environ()


def _with_origins(message, env):
    """`message` plus where the settings it names were set, when some came from the file."""
    from_file = getattr(env, 'from_file', {})
    named = [n for n in sorted(from_file) if n in message]
    if not named:
        return message
    return '%s (%s)' % (message, '; '.join('%s is set in %s' % (n, env.origin(n))
                                           for n in named))


_noted = []


def under_ssh(environ=None):
    """Whether this process was started over ssh (``SSH_CONNECTION``, or ``DMLC_JOB_CLUSTER``
    = ``ssh`` as mxnet-ssp-launch sets it): where MXNet's stock launcher passes no setting."""
    env = os.environ if environ is None else environ
    return bool(env.get('SSH_CONNECTION')) or env.get('DMLC_JOB_CLUSTER') == 'ssh'


def _note_defaults_once(conf, env):
    """Under ssh, with no MXNET_SSP_* setting in the environment nor a settings file, say
    once which values this process uses and where they come from (issue 41: MXNet's stock
    launch.py drops them over ssh without a word)."""
    if _noted or not under_ssh(env):
        return
    ours = [n for n in env if n.startswith('MXNET_SSP_')
            and n not in NOT_IN_FILE]
    if ours or getattr(env, 'path', None):
        return
    _noted.append(conf.store)
    import logging
    logging.getLogger('mxnet_ssp').warning(
        'mxnet-ssp: %s on %s was started over ssh and no MXNET_SSP_* setting reached it '
        '(MXNet\'s tools/launch.py passes none over ssh; mxnet-ssp-launch passes those of '
        'its environment) and there is no settings file '
        '(%s in %s, or %s): using %s, all of them defaults (docs/launch.md)',
        env.get('DMLC_ROLE') or 'this process', this_host(), SETTINGS_FILE, os.getcwd(),
        ENV_SETTINGS, conf.describe())


def _from_env(store, env, overrides):
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
                          elastic=elastic_min_workers(env), liveness=liveness_timeout(env))
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
                      controller=controller_placement(env), elastic=elastic_min_workers(env),
                      liveness=liveness_timeout(env))


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
    env = _environ(environ)
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
        env = _environ(environ)
        value = env.get(ENV_BUCKET_BYTES)
        source = ENV_BUCKET_BYTES
        if value is None or not str(value).strip():
            return DEFAULT_BUCKET_BYTES
    return _int_setting(value, source, 0, 'a number of bytes, an integer >= 0 (0 turns '
                        'bucketing off; default %d)' % DEFAULT_BUCKET_BYTES)


def host_copies(environ=None):
    """``MXNET_SSP_HOST_COPIES``: whether bucket copies may run as NumPy copies on MXNet's
    engine (default on; a yes/no value as :func:`parse_flag` reads it)."""
    env = _environ(environ)
    return parse_flag(env.get(ENV_HOST_COPIES), ENV_HOST_COPIES, True)


def host_updates(environ=None):
    """``MXNET_SSP_HOST_UPDATES``: whether the servers may run MXNet's SGD as NumPy passes
    (default on; a yes/no value as :func:`parse_flag` reads it)."""
    env = _environ(environ)
    return parse_flag(env.get(ENV_HOST_UPDATES), ENV_HOST_UPDATES, True)


def bigarray_bound(environ=None):
    """MXNet's ``MXNET_KVSTORE_BIGARRAY_BOUND`` as MXNet reads it (default 1000000)."""
    env = _environ(environ)
    value = env.get(ENV_BIGARRAY_BOUND)
    if value is None or not str(value).strip():
        return 1000000
    return _int_setting(value, ENV_BIGARRAY_BOUND, 1, 'an integer >= 1 (MXNet\'s own setting: '
                        'arrays of at least this many elements are split over all servers)')


def follow_grace(environ=None):
    """``MXNET_SSP_FOLLOW_GRACE``: seconds, a number in [1, 600], default
    :data:`DEFAULT_FOLLOW_GRACE` (shorter would take ps-lite's reconnects at start-up for a
    failed job)."""
    env = _environ(environ)
    value = env.get(ENV_FOLLOW_GRACE)
    if value is None or not str(value).strip():
        return DEFAULT_FOLLOW_GRACE
    return _float_setting(value, ENV_FOLLOW_GRACE, lambda x: 1 <= x <= 600,
                          'a number of seconds from 1 to 600 (default %g)' % DEFAULT_FOLLOW_GRACE)


def parse_liveness(value, source=ENV_LIVENESS):
    """Parse the liveness bound: seconds from 2 to 3600, or ``0``/``off`` (never judge a
    host lost; a lost host is then a stall, failed at ``MXNET_SSP_TIMEOUT``)."""
    from .core.liveness import MAX_BOUND, MIN_BOUND
    text = '' if value is None else str(value).strip().lower()
    if text in ('0', 'off', 'no', 'false'):
        return 0.0
    return _float_setting(value, source, lambda x: MIN_BOUND <= x <= MAX_BOUND,
                          'a number of seconds from %g to %g (default %g), or 0/off to turn '
                          'lost-host detection off' % (MIN_BOUND, MAX_BOUND, DEFAULT_LIVENESS))


def liveness_timeout(environ=None):
    """``MXNET_SSP_LIVENESS_TIMEOUT`` (:func:`parse_liveness`); unset or empty: the default
    :data:`DEFAULT_LIVENESS`."""
    env = _environ(environ)
    value = env.get(ENV_LIVENESS)
    if value is None or not str(value).strip():
        return DEFAULT_LIVENESS
    return parse_liveness(value)


def metrics_dir_if_set(environ=None):
    """``MXNET_SSP_METRICS_DIR`` when it is set and not off (the default is not applied)."""
    env = _environ(environ)
    value = env.get(ENV_METRICS_DIR)
    if value is None or value.strip().lower() in ('', 'off', 'none', '0'):
        return None
    return value


# ---------------------------------------------------------------------------
# the job's settings file
# ---------------------------------------------------------------------------
# The job's settings file: ``MXNET_SSP_*`` settings that reach every process of a job.
#
# Why a file (issue 41): MXNet 1.9.1's stock ``tools/launch.py --launcher ssh`` (its dmlc
# tracker's ``ssh.py``) exports only ``DMLC_*`` and a fixed list of variables into the remote
# command, and ignores ``--env`` there, so every ``MXNET_SSP_*`` variable set on the launching
# host is silently lost on the other hosts.  What it does keep is the working directory: it runs
# ``cd <the launcher's cwd>; <command>`` on every host (a cluster's shared home or file system).
# A file in that directory therefore reaches every process under every launcher (stock or ours,
# local, ssh or mpi) and every process started by hand in that directory, without the launcher's
# help.
#
# Where it is found
# -----------------
# ``MXNET_SSP_SETTINGS`` names the file (a path, relative to the working directory; it must
# exist), or ``off`` to read none.  Unset or empty: ``mxnet_ssp.env`` in the working directory,
# when it exists.  (``MXNET_SSP_SETTINGS`` itself is an environment variable, so under stock ssh
# only the default name works on the remote hosts.)
#
# Format
# ------
# One setting per line, ``NAME=VALUE`` (``export NAME=VALUE`` too, so a shell can ``source`` the
# file); blank lines and lines whose first non-blank character is ``#`` are ignored; spaces
# around the name and the value are dropped, and one pair of matching quotes around the value.
# Only the ``MXNET_SSP_*`` settings that the processes of a job read are accepted
# (:data:`FILE_SETTINGS`); each value is checked as the process would check it.  Anything else
# (an unknown name, a misspelt one, a line that is not ``NAME=VALUE``, a name given twice, a bad
# value) is an error that names the file, the line and what is accepted: a setting must never be
# silently ignored.
#
# Precedence
# ----------
# ``mxnet_ssp.create(name, staleness=...)`` arguments > environment > file > defaults.  The
# environment wins over the file because it is the narrower, per-process layer: a launcher's
# ``--env-worker``, a one-off ``MXNET_SSP_TIMEOUT=60 python train.py``, a test harness; the file
# is the job-wide baseline that every host shares.  Each worker reports where each of its
# settings came from, and the controller refuses a worker whose settings differ from the job's
# (:func:`job_settings`), so an environment value that reached only some hosts is caught
# before the first step instead of running a job with two configurations.

#: The path of the settings file, or ``off``.
ENV_SETTINGS = 'MXNET_SSP_SETTINGS'
_OFF = ('off', 'none', 'no', '0', 'false')


def _checks():
    """name -> check(value): raises ConfigError naming the setting, value and accepted form."""

    def one(reader):
        return lambda name, value: reader({name: value})

    return {
        ENV_STALENESS: lambda name, value: parse_staleness(value, 'dist_dssp', name),
        ENV_DSSP_MODE: lambda name, value: parse_mode(value, name),
        ENV_TIMEOUT: lambda name, value: parse_timeout(value, name),
        ENV_METRICS_DIR: lambda name, value: None,
        ENV_SOFTSYNC_SPLITS: lambda name, value: parse_splits(value, None, name),
        ENV_STALENESS_LOG: lambda name, value: parse_flag(value, name, False),
        ENV_WRAP_ASYNC: lambda name, value: parse_flag(value, name, True),
        ENV_WRAP_SYNC: lambda name, value: parse_flag(value, name, True),
        ENV_LIVENESS: lambda name, value: parse_liveness(value, name),
        ENV_HOST_COPIES: lambda name, value: parse_flag(value, name, True),
        ENV_HOST_UPDATES: lambda name, value: parse_flag(value, name, True),
        ENV_SERVER_SNAPSHOTS: lambda name, value: parse_snapshot_period(value, name),
        ENV_CONTROLLER: one(controller_placement),
        ENV_ELASTIC: lambda name, value: parse_elastic(value, None, name),
        ENV_FOLLOW_GRACE: one(follow_grace),
        ENV_BUCKET_BYTES: one(bucket_bytes),
        ENV_BALANCE_MIN: one(balance_from_env),
        ENV_BALANCE_MAX: one(balance_from_env),
        ENV_BALANCE_PERIOD: one(balance_from_env),
        ENV_BALANCE_THRESHOLD: one(balance_from_env),
        ENV_BALANCE_SMOOTHING: one(balance_from_env),
    }


def check_setting(name, value, num_workers=None):
    """Check one ``MXNET_SSP_*`` setting as every process of a job would read it.

    With `num_workers` (the job's), ``MXNET_SSP_SOFTSYNC_SPLITS`` and ``MXNET_SSP_ELASTIC`` are
    checked against it too.  Returns whether `name` is a setting checked here (the settings a
    file may set, and ``MXNET_SSP_GPUS``).

    Raises
    ------
    ConfigError
        Naming the setting, its value and what is accepted.
    """
    if value is None or not str(value).strip():
        return name in FILE_SETTINGS or name == ENV_GPUS    # blank reads as unset: the default
    if name == ENV_SOFTSYNC_SPLITS:
        parse_splits(value, num_workers, name)
    elif name == ENV_ELASTIC:
        parse_elastic(value, num_workers, name)
    elif name == ENV_GPUS:
        parse_gpus(value, name)
    else:
        check = _checks().get(name)
        if check is None:
            return False
        check(name, value)
    return True


#: The settings a file may set (those every process of a job reads from its environment).
FILE_SETTINGS = ('MXNET_SSP_BALANCE_MAX', 'MXNET_SSP_BALANCE_MIN', 'MXNET_SSP_BALANCE_PERIOD',
                 'MXNET_SSP_BALANCE_SMOOTHING', 'MXNET_SSP_BALANCE_THRESHOLD',
                 'MXNET_SSP_BUCKET_BYTES', 'MXNET_SSP_CONTROLLER', 'MXNET_SSP_DSSP_MODE',
                 'MXNET_SSP_ELASTIC', 'MXNET_SSP_FOLLOW_GRACE', 'MXNET_SSP_HOST_COPIES',
                 'MXNET_SSP_HOST_UPDATES', 'MXNET_SSP_METRICS_DIR', 'MXNET_SSP_SOFTSYNC_SPLITS',
                 'MXNET_SSP_STALENESS', 'MXNET_SSP_STALENESS_LOG', 'MXNET_SSP_TIMEOUT',
                 'MXNET_SSP_WRAP_ASYNC', 'MXNET_SSP_WRAP_SYNC', 'MXNET_SSP_LIVENESS_TIMEOUT',
                 'MXNET_SSP_SERVER_SNAPSHOTS')

#: MXNET_SSP_* names that exist but cannot come from the file, and why.
NOT_IN_FILE = {
    ENV_SETTINGS: 'it says which file to read',
    'MXNET_SSP_AUTOLOAD': 'the start-up hook reads it before any file is read; set it in the '
                          'environment',
    'MXNET_SSP_GPUS': 'it differs per worker (mxnet-ssp-launch --gpu-map sets it)',
    'MXNET_SSP_LAUNCH_INDEX': 'the launcher sets it per process',
    'MXNET_SSP_REJOIN': 'the launcher sets it in a restarted worker',
    'MXNET_SSP_LAUNCH_SSH_ARGS': "it is the launcher's own; set it in the launcher's "
                                 'environment',
    'MXNET_SSP_LAUNCH_MPIRUN': "it is the launcher's own; set it in the launcher's environment",
}


class SettingsView(dict):
    """The environment with the settings file's values under it (the environment wins).

    A plain dict of name -> value (what every reader in :mod:`mxnet_ssp.config` takes as
    `environ`), plus where the values came from: :attr:`path` (the file read, or None),
    :attr:`from_file` (name -> line number of each value taken from the file) and
    :attr:`overridden` (name -> (line, file's value) for file values the environment
    replaced).
    """

    def __init__(self, base, path=None, values=None):
        super().__init__(base)
        self.path = path
        self.from_file = {}
        self.overridden = {}
        for name, (value, line) in (values or {}).items():
            if name in base:
                if base[name] != value:
                    self.overridden[name] = (line, value)
            else:
                self[name] = value
                self.from_file[name] = line

    def origin(self, name):
        """Where setting `name` comes from: ``'environment'``, ``'<file> line N'`` or
        ``'default'`` (not set)."""
        if name in self.from_file:
            return '%s line %d' % (self.path, self.from_file[name])
        if name in self:
            return 'environment'
        return 'default'


def settings_path(base=None, cwd=None):
    """The settings file this process reads, or None.

    Raises
    ------
    ConfigError
        ``MXNET_SSP_SETTINGS`` names a file that does not exist.
    """
    env = os.environ if base is None else base
    given = (env.get(ENV_SETTINGS) or '').strip()
    if given.lower() in _OFF:
        return None
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:          # the working directory was removed: it holds no file
            if not given:
                return None
            if not os.path.isabs(os.path.expanduser(given)):
                raise ConfigError('%s=%r is not valid here: it is relative to the working '
                                  'directory, which no longer exists; expected an absolute '
                                  'path, or off' % (ENV_SETTINGS, given)) from None
            cwd = '/'
    if given:
        path = os.path.join(cwd, os.path.expanduser(given))
        if not os.path.isfile(path):
            raise ConfigError('%s=%r is not valid: expected the path of an existing settings '
                              'file (NAME=VALUE lines; relative to the working directory %s), '
                              'or off to read none' % (ENV_SETTINGS, given, cwd))
        return os.path.abspath(path)
    path = os.path.join(cwd, SETTINGS_FILE)
    return os.path.abspath(path) if os.path.isfile(path) else None


def _unquote(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
        return value[1:-1]
    return value


def parse_settings_file(path, text=None):
    """Read and check the settings file at `path` (or its `text`).

    Returns
    -------
    dict
        name -> ``(value, line number)``.

    Raises
    ------
    ConfigError
        Naming the file, the line, what is wrong and what is accepted.
    """
    if text is None:
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError('settings file %s cannot be read: %s' % (path, exc)) from None
    checks = _checks()
    accepted = 'one of %s' % ', '.join(FILE_SETTINGS)
    values = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        where = 'settings file %s, line %d' % (path, number)
        body = line[len('export '):].lstrip() if line.startswith('export ') else line
        name, eq, value = body.partition('=')
        name, value = name.strip(), _unquote(value.strip())
        if not eq or not name or any(c.isspace() for c in name):
            raise ConfigError('%s: %r is not a setting: expected NAME=VALUE (e.g. '
                              'MXNET_SSP_STALENESS=2), a comment starting with #, or an '
                              'empty line' % (where, raw))
        if name in NOT_IN_FILE:
            raise ConfigError('%s: %s cannot be set in a settings file: %s'
                              % (where, name, NOT_IN_FILE[name]))
        if name not in checks:
            what = ('is not a setting of mxnet-ssp' if name.startswith('MXNET_SSP_') else
                    'is not an mxnet-ssp setting (the file sets MXNET_SSP_* settings only; '
                    "set other variables in the processes' environment)")
            raise ConfigError('%s: %s %s: expected %s' % (where, name, what, accepted))
        if name in values:
            raise ConfigError('%s: %s is set again (first on line %d): expected each setting '
                              'once' % (where, name, values[name][1]))
        try:
            checks[name](name, value)
        except ConfigError as err:
            raise ConfigError('%s: %s' % (where, err)) from None
        values[name] = (value, number)
    return values


_settings_cache = {}


def reset_settings_cache():
    """Forget the files read so far (tests)."""
    _settings_cache.clear()


def _read_settings(path):
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _settings_cache:
        _settings_cache[key] = parse_settings_file(path)
    return _settings_cache[key]


def settings_environ(base=None, cwd=None):
    """This process's settings: `base` (default ``os.environ``) over the settings file.

    Returns a :class:`SettingsView`.  The file is read once per process while it does not
    change.

    Raises
    ------
    ConfigError
        The file is malformed, or ``MXNET_SSP_SETTINGS`` names no file.
    """
    base = os.environ if base is None else base
    path = settings_path(base, cwd)
    if path is None:
        return SettingsView(base)
    return SettingsView(base, path, _read_settings(path))


def settings_origin(env, name):
    """Where `name` comes from in `env` (a :class:`SettingsView` or a plain mapping)."""
    if isinstance(env, SettingsView):
        return env.origin(name)
    return 'environment' if name in env else 'default'


# ---------------------------------------------------------------------------
# the settings every worker of a job must share
# ---------------------------------------------------------------------------
# Every worker of a job runs with the same settings, or the job fails before its first step.
#
# Each worker sends the settings that must agree, with where each came from, in its HELLO to
# the controller (:func:`mxnet_ssp.controller.protocol.encode_hello`); the controller compares
# them with the job's (those of the worker whose discovery request started it) and fails the
# job, naming the setting, both values, where each came from and both workers' rank and host,
# when they differ (:meth:`mxnet_ssp.controller.server.ControllerServer`).
#
# What must agree, and why (:func:`job_settings`):
#
# ========================  =================================================================
# kvstore type              the workers would follow different synchronization rules
# MXNET_SSP_STALENESS       the controller enforces one bound; a worker configured with a
#                           larger sL would skip waits it believes unneeded (its fast path)
# MXNET_SSP_DSSP_MODE       ``dist_dssp``: what a grant means
# MXNET_SSP_TIMEOUT         when a wait counts as a failure: one worker would give up, or
#                           report a stall, long before another
# MXNET_SSP_ELASTIC         whether a lost worker ends the job
# MXNET_SSP_SOFTSYNC_SPLITS ``dist_softsync``: how many gradients make one update
# MXNET_SSP_BUCKET_BYTES    the layout of the server keys: workers with different buckets
#                           push and pull different keys
# MXNET_SSP_HOST_UPDATES,   sent to the servers with the optimizer: the last worker's would win
# MXNET_SSP_STALENESS_LOG   silently on every server
# MXNET_KVSTORE_BIGARRAY_   MXNet's own: which arrays are split over all servers (the key
# BOUND                     layout again)
# ========================  =================================================================
#
# The asynchronous stores outside elastic mode have no controller: there each server compares
# the settings every worker sends with its optimizer (:func:`check_updater_settings`; MXNet
# sends every worker's ``set_optimizer`` to every server) and ends, failing the job, at the
# first worker whose settings differ.
#
# Not compared: ``MXNET_SSP_METRICS_DIR`` (a path on each host), ``MXNET_SSP_HOST_COPIES``
# (how one worker copies, the same bits either way), ``MXNET_SSP_CONTROLLER`` (only the worker
# that starts the controller's counts), ``MXNET_SSP_FOLLOW_GRACE`` (how fast each process ends
# after a failure) and the batch-balancing settings (read by the balancing service).

def _flag(value):
    return 'on' if value else 'off'


def this_host():
    """This host's name, as the messages give it."""
    return socket.gethostname()


def job_settings(config, bytes_per_bucket, updates_on_host, environ=None):
    """The settings of a worker that must agree across the job.

    Parameters
    ----------
    config : mxnet_ssp.config.SyncConfig
        The worker's (its :attr:`~mxnet_ssp.config.SyncConfig.origins` say where each came
        from).
    bytes_per_bucket : int
        Its bytes per bucket (``MXNET_SSP_BUCKET_BYTES`` or ``create(bucket_bytes=...)``).
    updates_on_host : bool
        Its ``MXNET_SSP_HOST_UPDATES``.
    environ : mapping, optional
        Where the other values are read (default: the process's settings).

    Returns
    -------
    dict
        name -> ``[value, origin]``, both strings: values in one normal form (``'3,15'``,
        ``'300'``, ``'on'``), so equal settings spelt differently compare equal.
    """
    env = _environ(environ)
    origins = dict(config.origins)

    def where(name):
        return origins.get(name) or settings_origin(env, name)

    out = {KVSTORE: [config.store, 'the script']}
    if config.synchronous:
        value = ('%d' % config.s_lower if config.store == 'dist_ssp'
                 else '%d,%d' % (config.s_lower, config.s_upper))
        out[ENV_STALENESS] = [value, where(ENV_STALENESS)]
        if config.store == 'dist_dssp':
            out[ENV_DSSP_MODE] = [config.mode, where(ENV_DSSP_MODE)]
    out[ENV_TIMEOUT] = ['%g' % config.timeout, where(ENV_TIMEOUT)]
    out[ENV_ELASTIC] = ['%d' % config.elastic, where(ENV_ELASTIC)]
    if config.store == 'dist_softsync':
        out[ENV_SOFTSYNC_SPLITS] = ['%d' % config.splits, where(ENV_SOFTSYNC_SPLITS)]
    from_env_bytes = bucket_bytes(env)
    out[ENV_BUCKET_BYTES] = ['%d' % bytes_per_bucket, where(ENV_BUCKET_BYTES)
                             if bytes_per_bucket == from_env_bytes else 'mxnet_ssp.create()']
    out[ENV_HOST_UPDATES] = [_flag(updates_on_host), where(ENV_HOST_UPDATES)]
    out[ENV_STALENESS_LOG] = [_flag(config.staleness_log), where(ENV_STALENESS_LOG)]
    out[ENV_BIGARRAY_BOUND] = ['%d' % bigarray_bound(env),
                               'environment' if ENV_BIGARRAY_BOUND in env else 'default']
    return out


def sender(rank, settings):
    """What a worker sends: its rank, its host and its :func:`job_settings`."""
    return {'rank': int(rank), 'host': this_host(), 'settings': settings}


def _has_controller(settings):
    store = (settings.get(KVSTORE) or [None])[0]
    elastic = (settings.get(ENV_ELASTIC) or ['0'])[0]
    return store in STORE_TYPES or elastic not in ('0', None)


_updater_reference = []      # a server's first sender (:func:`check_updater_settings`)


def check_updater_settings(sent):
    """Server side: compare a worker's settings sent with its optimizer (:func:`sender`)
    with the first worker's; return the failure message, or None.

    Only where the controller cannot compare them: when either worker's store has no
    controller (an asynchronous store outside elastic mode).  With a controller it compares
    them at the worker's first step and its message reaches every worker.
    """
    if not isinstance(sent, dict) or not isinstance(sent.get('settings'), dict):
        return None
    if not _updater_reference:
        _updater_reference.append(sent)
        return None
    first = _updater_reference[0]
    if _has_controller(first['settings']) and _has_controller(sent['settings']):
        return None
    names = differences(first['settings'], sent['settings'])
    if not names:
        return None
    return mismatch_message(names, sent['settings'],
                            'worker %s on host %s' % (sent.get('rank'), sent.get('host')),
                            first['settings'],
                            'worker %s on host %s' % (first.get('rank'), first.get('host')))
