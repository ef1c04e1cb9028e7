"""Settings of synchronization: the store types, the staleness, the DSSP mode, the timeout,
the metrics and where the controller runs; :class:`SyncConfig` holds them for one job."""
import logging
import os
import re
from dataclasses import dataclass, field, replace

from ..core.controller_settings import DEFAULT_PLACEMENT, PLACEMENTS
from ..core.names import BOUNDED, DSSP_MODES, DSSP_STALENESS
from .lifetime import DEFAULT_LIVENESS
from .file import current, settings_origin
from .lifetime import ENV_ELASTIC, elastic_min_workers, liveness_timeout
from .table import TABLE, ConfigError, Setting, choice, declare, flag, number, read

__all__ = ['ENV_STALENESS', 'ENV_DSSP_MODE', 'ENV_TIMEOUT', 'ENV_METRICS_DIR',
           'ENV_SERVER_SNAPSHOTS', 'parse_snapshot_period',
           'ENV_SOFTSYNC_SPLITS', 'ENV_STALENESS_LOG', 'ENV_CONTROLLER', 'STORE_TYPES',
           'ASYNC_STORE_TYPES', 'SERVER_SYNC_TYPES', 'OUR_STORE_TYPES', 'NATIVE_DIST_TYPES',
           'CONTROLLER_PLACEMENTS', 'DEFAULT_CONTROLLER', 'DEFAULT_TIMEOUT',
           'DEFAULT_METRICS_DIR', 'SyncConfig', 'check_kvstore_name', 'parse_staleness',
           'parse_mode', 'parse_timeout', 'parse_splits', 'parse_flag', 'format_staleness',
           'from_env', 'with_store', 'controller_placement', 'metrics_dir_if_set', 'SYNC_SETTINGS',
           'note_worker_defaults']

ENV_STALENESS = 'MXNET_SSP_STALENESS'
ENV_DSSP_MODE = 'MXNET_SSP_DSSP_MODE'
ENV_TIMEOUT = 'MXNET_SSP_TIMEOUT'
ENV_METRICS_DIR = 'MXNET_SSP_METRICS_DIR'
ENV_SOFTSYNC_SPLITS = 'MXNET_SSP_SOFTSYNC_SPLITS'
#: Seconds between the servers' copies of their weights (the lab's wall-clock evaluation,
#: mxnet_ssp/server/snapshots.py); unset or 0: none.
ENV_SERVER_SNAPSHOTS = 'MXNET_SSP_SERVER_SNAPSHOTS'
ENV_STALENESS_LOG = 'MXNET_SSP_STALENESS_LOG'
ENV_CONTROLLER = 'MXNET_SSP_CONTROLLER'
CONTROLLER_PLACEMENTS = PLACEMENTS
#: Where the controller runs when MXNET_SSP_CONTROLLER is not set.
DEFAULT_CONTROLLER = DEFAULT_PLACEMENT
DEFAULT_TIMEOUT = 300.0
DEFAULT_METRICS_DIR = None      # off unless MXNET_SSP_METRICS_DIR names a directory

#: Store types this package adds, mapped to their default staleness (sL, sU).
STORE_TYPES = {'dist_ssp': (3, 3), 'dist_dssp': DSSP_STALENESS}
#: Asynchronous store types this package provides: no controller; the servers know the
#: sender and staleness of every gradient when the optimizer needs it.
ASYNC_STORE_TYPES = ('dist_async', 'dist_softsync')
#: MXNet's synchronous store type that this package serves too (no controller: MXNet's
#: servers wait for every worker's push of a key and apply the sum once).
SERVER_SYNC_TYPES = ('dist_sync',)
#: Every store type of this package (in the order messages list them): their servers can
#: report the sender and staleness of every gradient.
OUR_STORE_TYPES = ('dist_async', 'dist_ssp', 'dist_dssp', 'dist_softsync')
#: MXNet's own store types that a launcher or script may also name.
NATIVE_DIST_TYPES = ('local', 'device', 'nccl', 'dist_sync', 'dist_device_sync',
                     'dist_async', 'dist_device_async', 'dist', 'horovod')
_SSP_ACCEPTED = "one integer s >= 0 (e.g. '3')"


def check_kvstore_name(name, ours_only=False):
    """Check a kvstore type name; raise ConfigError naming the accepted ones."""
    ours = tuple(STORE_TYPES) + ASYNC_STORE_TYPES
    accepted = ours if ours_only else ours + tuple(n for n in NATIVE_DIST_TYPES if n not in ours)
    if not isinstance(name, str) or name.lower() not in accepted:
        raise ConfigError('kvstore type %r is not known: expected one of %s'
                          % (name, ', '.join(accepted)))
    return name.lower()


def _staleness_numbers(value):
    """The integers of a staleness value, or None when it is not one."""
    if isinstance(value, str):
        try:
            return [int(p.strip()) for p in value.split(',')]
        except ValueError:
            return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [value]
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return list(value)
    return None


def _staleness(value, source, setting, store='dist_dssp', **_):
    if check_kvstore_name(store, ours_only=True) not in STORE_TYPES:
        raise ConfigError('staleness is not a setting of %s: only %s take one'
                          % (store, ' and '.join(STORE_TYPES)))
    accepted = _SSP_ACCEPTED if store == 'dist_ssp' else setting.accepted
    bad = '%s=%r is not valid for %s: ' % (source, value, store)
    nums = _staleness_numbers(value)
    if nums is None or (len(nums) != 1 and (store == 'dist_ssp' or len(nums) != 2)):
        raise ConfigError('%sexpected %s' % (bad, accepted))
    if len(nums) == 1:
        nums = nums * 2
    s_lower, s_upper = nums
    if s_lower < 0 or s_upper < 0:
        raise ConfigError('%sstaleness cannot be negative; expected %s' % (bad, accepted))
    if s_lower > s_upper:
        raise ConfigError('%ssL=%d is greater than sU=%d; expected %s'
                          % (bad, s_lower, s_upper, accepted))
    return s_lower, s_upper


def _splits(value, source, setting, num_workers=None, **_):
    bound = 'num_workers' if num_workers is None else str(num_workers)
    try:
        splits = int(str(value).strip())
    except ValueError:
        splits = None
    if splits is None or isinstance(value, bool) or splits < 1 or (
            num_workers is not None and splits > num_workers):
        raise ConfigError('%s=%r is not valid for dist_softsync: expected %s'
                          % (source, value, setting.accepted.format(bound=bound)))
    return splits


def _metrics_dir(value, source, setting, **_):
    return None if str(value).strip().lower() in ('', 'off', 'none', '0') else value


declare(
    Setting(ENV_STALENESS, 'sync', 'The staleness range [sL, sU] of dist_dssp, the bound s of '
            'dist_ssp, in iterations.', _staleness, arg='staleness',
            accepted="'sL,sU' with integers 0 <= sL <= sU (e.g. '3,15'), or one integer s "
                     "meaning [s, s]"),
    Setting(ENV_DSSP_MODE, 'sync', 'What a grant of dist_dssp means (docs/dssp_modes.md).',
            choice(DSSP_MODES), default=BOUNDED, arg='mode', blank='empty',
            accepted='one of %s' % ', '.join(DSSP_MODES)),
    Setting(ENV_TIMEOUT, 'sync', 'Seconds a worker may wait for a release (or the controller '
            'for a peer) before the job fails naming the rank that holds it up.',
            number(lambda x: x > 0, bools=True), default=DEFAULT_TIMEOUT, arg='timeout',
            blank='empty',
            accepted='a number of seconds > 0 (e.g. 300)'),
    Setting(ENV_METRICS_DIR, 'sync', 'Directory of the JSON Lines metrics; empty, off, none or '
            '0: none.', _metrics_dir, default=DEFAULT_METRICS_DIR, arg='metrics_dir',
            blank=False, accepted='a directory, or off'),
    Setting(ENV_SOFTSYNC_SPLITS, 'sync', 'n of n-softsync (dist_softsync): the server applies '
            'one update per floor(num_workers / n) gradients.', _splits, default=1, arg='splits',
            accepted='an integer n with 1 <= n <= {bound} (the server applies one update per '
                     'floor({bound} / n) gradients)'),
    Setting(ENV_STALENESS_LOG, 'sync', "Whether the servers log each gradient's staleness.",
            flag, default=False, arg='staleness_log'),
    Setting(ENV_CONTROLLER, 'sync', "Where the controller runs on its server's host: process "
            '(its own) or thread (a thread of the server process, sharing its GIL).',
            choice(CONTROLLER_PLACEMENTS), default=DEFAULT_CONTROLLER,
            accepted='one of %s' % ', '.join(CONTROLLER_PLACEMENTS)),
)


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
    return TABLE[ENV_STALENESS].value(value, source, store=store)


def parse_mode(value, source=ENV_DSSP_MODE):
    """Parse the DSSP mode: one of :data:`DSSP_MODES` (case-insensitive)."""
    return TABLE[ENV_DSSP_MODE].value(value, source)


def parse_timeout(value, source=ENV_TIMEOUT):
    """Parse a timeout in seconds: a finite number > 0."""
    return TABLE[ENV_TIMEOUT].value(value, source)


declare(
    Setting(ENV_SERVER_SNAPSHOTS, 'sync', "Seconds between the servers' copies of their "
            "weights (the lab's wall-clock evaluation); unset or 0: none.",
            number(lambda x: x == 0 or 0.01 <= x <= 3600), default=0.0,
            accepted="seconds between the servers' weight copies, 0 (off) or a number from "
                     '0.01 to 3600'),
)


def parse_snapshot_period(value=None, source=ENV_SERVER_SNAPSHOTS):
    """Seconds between the servers' weight copies: 0 (off, also when `value` is None or blank)
    or a number in [0.01, 3600]."""
    if value is None or not str(value).strip():
        return 0.0
    return TABLE[ENV_SERVER_SNAPSHOTS].value(value, source)


def parse_splits(value, num_workers=None, source=ENV_SOFTSYNC_SPLITS):
    """Parse n of n-softsync: an integer in [1, num_workers] (upper bound checked if known)."""
    return TABLE[ENV_SOFTSYNC_SPLITS].value(value, source, num_workers=num_workers)


def parse_flag(value, source, default):
    """Parse a yes/no setting (see FLAG_VALUES, any case); empty or None gives `default`."""
    if value is None or not str(value).strip():
        return default
    return flag(value, source, TABLE[ENV_STALENESS_LOG])


def format_staleness(store, s_lower, s_upper):
    """A staleness in its one normal form: ``'3'`` for dist_ssp, ``'3,15'`` for dist_dssp."""
    return '%d' % s_lower if store == 'dist_ssp' else '%d,%d' % (s_lower, s_upper)


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
    metrics_dir: str = DEFAULT_METRICS_DIR    # None (the default): no metrics
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

    @property
    def staleness_text(self):
        """The staleness in its normal form (:func:`format_staleness`)."""
        return format_staleness(self.store, self.s_lower, self.s_upper)

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


def controller_placement(environ=None):
    """Where the controller runs (``MXNET_SSP_CONTROLLER``): ``process`` (default) or ``thread``."""
    return read(ENV_CONTROLLER, environ)


def metrics_dir_if_set(environ=None):
    """``MXNET_SSP_METRICS_DIR`` when it is set and not off (the default is not applied)."""
    env = current(environ)
    return read(ENV_METRICS_DIR, env) if ENV_METRICS_DIR in env else None


#: The settings a SyncConfig holds, in the order of its origins.
SYNC_SETTINGS = (ENV_STALENESS, ENV_DSSP_MODE, ENV_TIMEOUT, ENV_METRICS_DIR, ENV_SOFTSYNC_SPLITS,
                 ENV_STALENESS_LOG, ENV_ELASTIC, ENV_CONTROLLER)


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
    env = current(environ)
    try:
        conf = _sync_config(store, env, overrides)
    except ConfigError as err:
        raise ConfigError(_with_origins(str(err), env)) from None
    given = {TABLE[name].arg for name in SYNC_SETTINGS if TABLE[name].arg in overrides and (
        overrides[TABLE[name].arg] is not None or name == ENV_METRICS_DIR)}
    origins = tuple((name, 'mxnet_ssp.create()' if TABLE[name].arg in given
                     else settings_origin(env, name)) for name in SYNC_SETTINGS)
    conf = replace(conf, origins=origins)
    if environ is None:
        _note_defaults_once(conf, env)
    return conf


def _sync_config(store, env, overrides):
    """The SyncConfig of `store`: each value from `overrides` (Python) or `env` (:func:`read`)."""
    if not (isinstance(store, str) and store.lower() in SERVER_SYNC_TYPES):
        store = check_kvstore_name(store, ours_only=True)
    store = store.lower()
    known = {TABLE[name].arg for name in SYNC_SETTINGS} - {None}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError('unknown settings %s: expected %s'
                        % (', '.join(sorted(unknown)), ', '.join(sorted(known))))
    if 'metrics_dir' in overrides:
        metrics_dir = overrides['metrics_dir'] or None
    else:
        metrics_dir = read(ENV_METRICS_DIR, env)
    log = overrides.get('staleness_log')
    common = dict(store=store, metrics_dir=metrics_dir,
                  staleness_log=bool(read(ENV_STALENESS_LOG, env) if log is None else log),
                  controller=read(ENV_CONTROLLER, env), elastic=elastic_min_workers(env),
                  liveness=liveness_timeout(env))
    splits = overrides.get('splits')
    if store in STORE_TYPES:
        if splits is not None:
            raise ConfigError('splits is a setting of dist_softsync, not of %s' % store)
        bound = read(ENV_STALENESS, env, overrides.get('staleness'), store=store)
        s_lower, s_upper = bound or STORE_TYPES[store]
        return SyncConfig(s_lower=s_lower, s_upper=s_upper,
                          mode=read(ENV_DSSP_MODE, env, overrides.get('mode')),
                          timeout=read(ENV_TIMEOUT, env, overrides.get('timeout')), **common)
    for name in ('staleness', 'mode'):
        if overrides.get(name) is not None:
            raise ConfigError('%s is not a setting of %s: only %s take one'
                              % (name, store, ' and '.join(STORE_TYPES)))
    if store == 'dist_softsync':
        splits = read(ENV_SOFTSYNC_SPLITS, env, splits)
    elif splits is not None:
        raise ConfigError('splits is a setting of dist_softsync, not of %s' % store)
    return SyncConfig(s_lower=0, s_upper=0, timeout=read(ENV_TIMEOUT, env), splits=splits,
                      **common)


def with_store(config, store):
    """Return `config` for another store type (used by tests)."""
    return replace(config, store=check_kvstore_name(store, ours_only=True))


def _with_origins(message, env):
    """`message` plus where the settings it names were set, when some came from the file."""
    from_file = getattr(env, 'from_file', {})
    # a whole name: MXNET_SSP_STALENESS is not named by a message about MXNET_SSP_STALENESS_LOG
    named = [n for n in sorted(from_file) if re.search(r'\b%s\b' % n, message)]
    if not named:
        return message
    return '%s (%s)' % (message, '; '.join('%s is set in %s' % (n, env.origin(n))
                                           for n in named))


_noted = []
_held = []          # a worker's note, until its store knows its rank (note_worker_defaults)

#: set by mxnet-ssp-launch in every process (mxnet_ssp.launch.settings.ENV_LAUNCH_INDEX)
_LAUNCH_INDEX = 'MXNET_SSP_LAUNCH_INDEX'


def _launcher_used(env):
    """What started this process over ssh, as the note names it."""
    cluster = env.get('DMLC_JOB_CLUSTER')
    if cluster:
        return 'a launcher that set DMLC_JOB_CLUSTER=%s' % cluster
    if env.get('DMLC_ROLE'):
        return ("MXNet's tools/launch.py --launcher ssh (or another launcher that passes no "
                'MXNET_SSP_* setting over ssh)')
    return 'an ssh session'


def _note_defaults_once(conf, env):
    """Under ssh, with no MXNET_SSP_* setting in the environment nor a settings file, say
    once per job which values the processes use and where they come from (issue 41: MXNet's
    stock launch.py drops them over ssh without a word), naming what started them.  Never
    under mxnet-ssp-launch, which passes the MXNET_SSP_* settings of its environment.  A
    worker holds the note until its rank is known: worker 0 says it
    (:func:`note_worker_defaults`), the others keep quiet."""
    from .file import ENV_SETTINGS, SETTINGS_FILE, not_in_file
    from .topology import this_host, under_ssh
    if _noted or _held or not under_ssh(env) or env.get(_LAUNCH_INDEX) is not None:
        return
    ours = [n for n in env if n.startswith('MXNET_SSP_') and not not_in_file(n)]
    if ours or getattr(env, 'path', None):
        return
    text = ('mxnet-ssp: started over ssh on %s by %s; no MXNET_SSP_* setting reached it and '
            'there is no settings file (%s in %s, or %s): using %s, all of them defaults '
            '(mxnet-ssp-launch passes the settings of its environment; docs/launch.md)'
            % (this_host(), _launcher_used(env), SETTINGS_FILE, os.getcwd(), ENV_SETTINGS,
               conf.describe()))
    if env.get('DMLC_ROLE') == 'worker':
        _held.append(text)
        return
    _noted.append(conf.store)
    logging.getLogger('mxnet_ssp').warning(text)


def note_worker_defaults(rank):
    """A worker's store, once its rank is known: worker 0 says the note
    :func:`_note_defaults_once` held (once per job, not once per worker)."""
    if not _held or _noted:
        return
    text = _held.pop()
    _noted.append(rank)
    if rank == 0:            # named here: the store saying it is not registered yet
        logging.getLogger('mxnet_ssp').warning('worker[0] ' + text[len('mxnet-ssp: '):])
