"""The job's settings file: ``MXNET_SSP_*`` settings that reach every process of a job.

Why a file (issue 41): MXNet 1.9.1's stock ``tools/launch.py --launcher ssh`` (its dmlc
tracker's ``ssh.py``) exports only ``DMLC_*`` and a fixed list of variables into the remote
command, and ignores ``--env`` there, so every ``MXNET_SSP_*`` variable set on the launching
host is silently lost on the other hosts.  What it does keep is the working directory: it runs
``cd <the launcher's cwd>; <command>`` on every host (a cluster's shared home or file system).
A file in that directory therefore reaches every process under every launcher (stock or ours,
local, ssh or mpi) and every process started by hand in that directory, without the launcher's
help.

Where it is found
-----------------
``MXNET_SSP_SETTINGS`` names the file (a path, relative to the working directory; it must
exist), or ``off`` to read none.  Unset or empty: ``mxnet_ssp.env`` in the working directory,
when it exists.  (``MXNET_SSP_SETTINGS`` itself is an environment variable, so under stock ssh
only the default name works on the remote hosts.)

Format
------
One setting per line, ``NAME=VALUE`` (``export NAME=VALUE`` too, so a shell can ``source`` the
file); blank lines and lines whose first non-blank character is ``#`` are ignored; spaces
around the name and the value are dropped, and one pair of matching quotes around the value.
Only the ``MXNET_SSP_*`` settings that the processes of a job read are accepted
(:data:`FILE_SETTINGS`); each value is checked as the process would check it.  Anything else
(an unknown name, a misspelt one, a line that is not ``NAME=VALUE``, a name given twice, a bad
value) is an error that names the file, the line and what is accepted: a setting must never be
silently ignored.

Precedence
----------
``mxnet_ssp.create(name, staleness=...)`` arguments > environment > file > defaults.  The
environment wins over the file because it is the narrower, per-process layer: a launcher's
``--env-worker``, a one-off ``MXNET_SSP_TIMEOUT=60 python train.py``, a test harness; the file
is the job-wide baseline that every host shares.  Each worker reports where each of its
settings came from, and the controller refuses a worker whose settings differ from the job's
(:mod:`mxnet_ssp.agreement`), so an environment value that reached only some hosts is caught
before the first step instead of running a job with two configurations.
"""
import logging
import os

__all__ = ['ENV_SETTINGS', 'DEFAULT_FILE', 'FILE_SETTINGS', 'NOT_IN_FILE', 'SettingsView',
           'settings_path', 'parse_settings_file', 'environ', 'origin', 'reset_cache']

logger = logging.getLogger(__name__)

#: The path of the settings file, or ``off``.
ENV_SETTINGS = 'MXNET_SSP_SETTINGS'
#: The file read from the working directory when ``MXNET_SSP_SETTINGS`` is not set.
DEFAULT_FILE = 'mxnet_ssp.env'
_OFF = ('off', 'none', 'no', '0', 'false')


def _checks():
    """name -> check(value): raises ConfigError naming the setting, value and accepted form."""
    from . import config as cfg

    def one(reader):
        return lambda name, value: reader({name: value})

    return {
        cfg.ENV_STALENESS: lambda name, value: cfg.parse_staleness(value, 'dist_dssp', name),
        cfg.ENV_DSSP_MODE: lambda name, value: cfg.parse_mode(value, name),
        cfg.ENV_TIMEOUT: lambda name, value: cfg.parse_timeout(value, name),
        cfg.ENV_METRICS_DIR: lambda name, value: None,
        cfg.ENV_SOFTSYNC_SPLITS: lambda name, value: cfg.parse_splits(value, None, name),
        cfg.ENV_STALENESS_LOG: lambda name, value: cfg.parse_flag(value, name, False),
        cfg.ENV_WRAP_ASYNC: lambda name, value: cfg.parse_flag(value, name, True),
        cfg.ENV_HOST_COPIES: lambda name, value: cfg.parse_flag(value, name, True),
        cfg.ENV_HOST_UPDATES: lambda name, value: cfg.parse_flag(value, name, True),
        cfg.ENV_CONTROLLER: one(cfg.controller_placement),
        cfg.ENV_ELASTIC: lambda name, value: cfg.parse_elastic(value, None, name),
        cfg.ENV_FOLLOW_GRACE: one(cfg.follow_grace),
        cfg.ENV_BUCKET_BYTES: one(cfg.bucket_bytes),
        cfg.ENV_BALANCE_MIN: one(cfg.balance_from_env),
        cfg.ENV_BALANCE_MAX: one(cfg.balance_from_env),
        cfg.ENV_BALANCE_PERIOD: one(cfg.balance_from_env),
        cfg.ENV_BALANCE_THRESHOLD: one(cfg.balance_from_env),
        cfg.ENV_BALANCE_SMOOTHING: one(cfg.balance_from_env),
    }


#: The settings a file may set (those every process of a job reads from its environment).
FILE_SETTINGS = ('MXNET_SSP_BALANCE_MAX', 'MXNET_SSP_BALANCE_MIN', 'MXNET_SSP_BALANCE_PERIOD',
                 'MXNET_SSP_BALANCE_SMOOTHING', 'MXNET_SSP_BALANCE_THRESHOLD',
                 'MXNET_SSP_BUCKET_BYTES', 'MXNET_SSP_CONTROLLER', 'MXNET_SSP_DSSP_MODE',
                 'MXNET_SSP_ELASTIC', 'MXNET_SSP_FOLLOW_GRACE', 'MXNET_SSP_HOST_COPIES',
                 'MXNET_SSP_HOST_UPDATES', 'MXNET_SSP_METRICS_DIR', 'MXNET_SSP_SOFTSYNC_SPLITS',
                 'MXNET_SSP_STALENESS', 'MXNET_SSP_STALENESS_LOG', 'MXNET_SSP_TIMEOUT',
                 'MXNET_SSP_WRAP_ASYNC')

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
    from .config import ConfigError
    env = os.environ if base is None else base
    cwd = os.getcwd() if cwd is None else cwd
    given = (env.get(ENV_SETTINGS) or '').strip()
    if given.lower() in _OFF:
        return None
    if given:
        path = os.path.join(cwd, os.path.expanduser(given))
        if not os.path.isfile(path):
            raise ConfigError('%s=%r is not valid: expected the path of an existing settings '
                              'file (NAME=VALUE lines; relative to the working directory %s), '
                              'or off to read none' % (ENV_SETTINGS, given, cwd))
        return os.path.abspath(path)
    path = os.path.join(cwd, DEFAULT_FILE)
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
    from .config import ConfigError
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


_cache = {}


def reset_cache():
    """Forget the files read so far (tests)."""
    _cache.clear()


def _read(path):
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _cache:
        _cache[key] = parse_settings_file(path)
    return _cache[key]


def environ(base=None, cwd=None):
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
    return SettingsView(base, path, _read(path))


def origin(env, name):
    """Where `name` comes from in `env` (a :class:`SettingsView` or a plain mapping)."""
    if isinstance(env, SettingsView):
        return env.origin(name)
    return 'environment' if name in env else 'default'
