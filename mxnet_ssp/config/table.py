"""The table of settings and its one reader.

Every environment variable mxnet-ssp reads is one :class:`Setting` row, declared once by the
module of its concern (:mod:`.sync`, :mod:`.data_path`, :mod:`.lifetime`, :mod:`.topology`,
:mod:`.balance`, :mod:`.file`; the launcher's own in :mod:`mxnet_ssp.launch.settings`) with
:func:`declare`: its name, the parser that turns a text into the typed value, the default, the
accepted values in words, its concern and one line saying what it does.  :func:`read` is the
only function that looks a setting up in an environment.

A parser is called as ``parse(value, source, setting, **context)``: `source` is the name the
error message gives (the variable, or the keyword argument when the value came from Python),
`context` what some checks need (``store`` for the staleness, ``num_workers`` for the bounds
that depend on the job).  A bad value raises :class:`ConfigError` naming the setting, the value
and what is accepted: ``NAME='value' is not valid: expected <accepted>``.
"""
import math
from dataclasses import dataclass

__all__ = ['ConfigError', 'Setting', 'TABLE', 'declare', 'read', 'FLAG_VALUES']

#: The accepted spellings of a yes/no setting, and what they mean.
FLAG_VALUES = {'1': True, 'true': True, 'yes': True, 'on': True,
               '0': False, 'false': False, 'no': False, 'off': False}
#: The spellings of "none" for a setting that can be turned off.
OFF_WORDS = ('off', 'none', 'no', '0', 'false')
#: The launcher's own settings (:mod:`mxnet_ssp.launch.settings` declares them): a process of
#: the job never reads them, so a settings file may not set them.
LAUNCHER_PREFIX = 'MXNET_SSP_LAUNCH_'


class ConfigError(ValueError):
    """A setting has a value that is not accepted; the message says which."""


@dataclass(frozen=True)
class Setting:
    """One setting: one row of the table.

    Attributes
    ----------
    name : str
        The environment variable.
    concern : str
        What it is about (``'sync'``, ``'data path'``, ``'lifetime'``, ``'topology'``,
        ``'balance'``, ``'settings file'``, ``'launcher'``).
    doc : str
        One line: what it does.
    parse : callable
        ``parse(value, source, setting, **context)`` -> the typed value.
    default : object
        The value when it is unset (or blank, see `blank`).
    accepted : str
        The accepted values in words, as error messages give them (``{bound}`` is filled in
        by the parsers that know it).
    arg : str or None
        The keyword that gives it from Python (``mxnet_ssp.create(staleness=...)``).
    not_in_file : str or None
        Why a settings file may not set it; None: the file may.
    blank : bool or str
        True: an empty or all-space value reads as unset (the default); ``'empty'``: only an
        empty one does (spaces are a bad value); False: the parser reads every value.
    checked : bool or None
        Whether the launcher checks it before a job starts (None: when a file may set it).
    required : str or None
        The error when it is unset (no default).
    """
    name: str
    concern: str
    doc: str
    parse: object
    default: object = None
    accepted: str = ''
    arg: str = None
    not_in_file: str = None
    blank: bool = True
    checked: bool = None
    required: str = None

    @property
    def in_file(self):
        """Whether a settings file may set it (its own ``MXNET_SSP_*`` settings only)."""
        return self.not_in_file is None and self.name.startswith('MXNET_SSP_')

    @property
    def launch_checked(self):
        """Whether the launcher checks it in its environment before the job starts."""
        return self.in_file if self.checked is None else self.checked

    def value(self, value, source=None, **context):
        """`value` (a text, or a value from Python) parsed and checked; `source` names it in
        errors (default: the variable)."""
        return self.parse(value, source or self.name, self, **context)

    def invalid(self, source, value, accepted=None):
        """The error for `value`: naming `source`, the value and what is accepted."""
        return ConfigError('%s=%r is not valid: expected %s'
                           % (source, value, self.accepted if accepted is None else accepted))


#: name -> :class:`Setting`, in the order declared.
TABLE = {}


def declare(*settings):
    """Add `settings` to :data:`TABLE` (each name once); return them."""
    for setting in settings:
        if TABLE.get(setting.name, setting) != setting:
            raise ValueError('setting %s is declared twice' % setting.name)
        TABLE[setting.name] = setting
    return settings


def _process_settings(environ):
    """Until :mod:`.file` registers the settings file's reader: `environ`, or ``os.environ``."""
    import os
    return os.environ if environ is None else environ


#: Where :func:`read` looks when no environ is given; :mod:`.file` installs its reader
#: (``os.environ`` over the settings file) when it is imported, so the table needs no import
#: of the module that reads the file.
_SOURCE = [_process_settings]


def read_settings_with(source):
    """Make :func:`read` look up unset environs with ``source(environ)``."""
    _SOURCE[0] = source


def read(name, environ=None, given=None, **context):
    """The value of setting `name`: `given` (from Python) when it is not None, else the
    environment over the job's settings file, else its default.

    Parameters
    ----------
    name : str
        A name of :data:`TABLE`.
    environ : mapping, optional
        Where to look (tests pass a dict); default: ``os.environ`` over the settings file
        (:func:`mxnet_ssp.config.file.settings_environ`).
    given : object, optional
        The value from Python (an argument); errors then name the setting's `arg`.
    **context
        For the parsers that need it (``store``, ``num_workers``).

    Raises
    ------
    ConfigError
        Naming the setting, its value and what is accepted.
    """
    setting = TABLE[name]
    if given is not None:
        return setting.value(given, setting.arg or name, **context)
    value = _SOURCE[0](environ).get(name)
    if value is None or (setting.blank and not (value if setting.blank == 'empty'
                                                 else str(value).strip())):
        if setting.required:
            raise ConfigError(setting.required)
        return setting.default
    return setting.value(value, **context)


# -- parsers --------------------------------------------------------------------------------
def flag(value, source, setting, **_):
    """A yes/no value (:data:`FLAG_VALUES`, any case)."""
    key = str(value).strip().lower()
    if key not in FLAG_VALUES:
        raise setting.invalid(source, value, flag_accepted())
    return FLAG_VALUES[key]


def flag_accepted():
    """The accepted spellings of a yes/no setting, in words."""
    return 'one of %s (yes) or %s (no)' % (', '.join(k for k, v in FLAG_VALUES.items() if v),
                                          ', '.join(k for k, v in FLAG_VALUES.items() if not v))


def integer(least):
    """A parser of integers >= `least` (not bools, not floats)."""
    def parse(value, source, setting, **_):
        try:
            number = int(str(value).strip())
        except ValueError:
            number = None
        if number is None or isinstance(value, (bool, float)) or number < least:
            raise setting.invalid(source, value)
        return number
    return parse


def number(ok, bools=False):
    """A parser of finite numbers for which ``ok(x)`` holds (bools refused unless `bools`)."""
    def parse(value, source, setting, **_):
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = float('nan')
        if (isinstance(value, bool) and not bools) or not (math.isfinite(x) and ok(x)):
            raise setting.invalid(source, value)
        return x
    return parse


def choice(values):
    """A parser of one of `values` (any case, spaces around dropped)."""
    def parse(value, source, setting, **_):
        word = str(value).strip().lower()
        if word not in values:
            raise setting.invalid(source, value, 'one of %s' % ', '.join(values))
        return word
    return parse


def text(value, source, setting, **_):
    """Any text, as it is."""
    return value
