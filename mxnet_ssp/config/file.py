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
Only the ``MXNET_SSP_*`` settings of the table that the processes of a job read are accepted
(:data:`FILE_SETTINGS`); each value is checked as the process reads it (:func:`.table.read`:
an empty value means the default).  Anything else (an unknown name, a misspelt one, a line that
is not ``NAME=VALUE``, a name given twice, a bad value) is an error that names the file, the
line and what is accepted: a setting must never be silently ignored.

Precedence
----------
``mxnet_ssp.create(name, staleness=...)`` arguments > environment > file > defaults.  The
environment wins over the file because it is the narrower, per-process layer: a launcher's
``--env-worker``, a one-off ``MXNET_SSP_TIMEOUT=60 python train.py``, a test harness; the file
is the job-wide baseline that every host shares.  Each worker reports where each of its
settings came from, and the controller refuses a worker whose settings differ from the job's
(:func:`mxnet_ssp.config.agree.job_settings`), so an environment value that reached only some
hosts is caught before the first step instead of running a job with two configurations.
"""
import os
from collections.abc import Mapping

from ..core.agreement import SETTINGS_FILE
from .table import (LAUNCHER_PREFIX, OFF_WORDS, TABLE, ConfigError, Setting, declare, read,
                    read_settings_with, text)

__all__ = ['ENV_SETTINGS', 'SETTINGS_FILE', 'FILE_SETTINGS', 'NOT_IN_FILE', 'SettingsView',
           'settings_path', 'parse_settings_file', 'settings_environ', 'settings_origin',
           'reset_settings_cache', 'current', 'check_setting', 'not_in_file']

#: The path of the settings file, or ``off``.
ENV_SETTINGS = 'MXNET_SSP_SETTINGS'
declare(Setting(ENV_SETTINGS, 'settings file', 'The path of the settings file (relative to '
                'the working directory), or off; unset: %s in the working directory.'
                % SETTINGS_FILE, text, not_in_file='it says which file to read'))
_LAUNCHER_OWN = "it is the launcher's own; set it in the launcher's environment"


def not_in_file(name):
    """Why a settings file may not set the ``MXNET_SSP_*`` setting `name`, or None (it may, or
    it is not a setting).  The launcher's own (``MXNET_SSP_LAUNCH_*``) are refused even where
    :mod:`mxnet_ssp.launch` has not declared them."""
    setting = TABLE.get(name)
    if setting is not None:
        return setting.not_in_file
    return _LAUNCHER_OWN if name.startswith(LAUNCHER_PREFIX) else None


class _NotInFile(Mapping):
    """name -> why a file may not set it, for the declared ``MXNET_SSP_*`` settings (live: the
    launcher's join when :mod:`mxnet_ssp.launch` is imported)."""

    def _names(self):
        return [n for n, s in TABLE.items() if s.not_in_file and n.startswith('MXNET_SSP_')]

    def __getitem__(self, name):
        if name not in self._names():
            raise KeyError(name)
        return TABLE[name].not_in_file

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())


#: The settings a file may not set, and why.
NOT_IN_FILE = _NotInFile()


def file_settings():
    """The settings a file may set (those every process of a job reads from its environment)."""
    return tuple(name for name, setting in TABLE.items() if setting.in_file)


FILE_SETTINGS = ()      # filled in by mxnet_ssp.config once every concern declared its own


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
    if given.lower() in OFF_WORDS:
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


def _file_text(path, given):
    if given is not None:
        return given
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError('settings file %s cannot be read: %s' % (path, exc)) from None


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
    accepted = file_settings()
    values = {}
    for number, raw in enumerate(_file_text(path, text).splitlines(), 1):
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
        if not_in_file(name):
            raise ConfigError('%s: %s cannot be set in a settings file: %s'
                              % (where, name, not_in_file(name)))
        if name not in accepted:
            what = ('is not a setting of mxnet-ssp' if name.startswith('MXNET_SSP_') else
                    'is not an mxnet-ssp setting (the file sets MXNET_SSP_* settings only; '
                    "set other variables in the processes' environment)")
            raise ConfigError('%s: %s %s: expected one of %s'
                              % (where, name, what, ', '.join(accepted)))
        if name in values:
            raise ConfigError('%s: %s is set again (first on line %d): expected each setting '
                              'once' % (where, name, values[name][1]))
        try:
            read(name, {name: value})
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


def current(environ=None):
    """`environ` as given, or this process's settings: ``os.environ`` over the settings file
    (:func:`settings_environ`)."""
    return settings_environ() if environ is None else environ


read_settings_with(current)


def settings_origin(env, name):
    """Where `name` comes from in `env` (a :class:`SettingsView` or a plain mapping)."""
    if isinstance(env, SettingsView):
        return env.origin(name)
    return 'environment' if name in env else 'default'


def check_setting(name, value, num_workers=None):
    """Check one setting as every process of a job would read it.

    With `num_workers` (the job's), ``MXNET_SSP_SOFTSYNC_SPLITS`` and ``MXNET_SSP_ELASTIC`` are
    checked against it too.  Returns whether `name` is a setting checked here (the settings a
    file may set, and ``MXNET_SSP_GPUS``: :attr:`.table.Setting.launch_checked`).

    Raises
    ------
    ConfigError
        Naming the setting, its value and what is accepted.
    """
    setting = TABLE.get(name)
    if setting is None or not setting.launch_checked:
        return False
    read(name, {name: value}, num_workers=num_workers)
    return True
