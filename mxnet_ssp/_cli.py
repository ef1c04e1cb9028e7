"""What every console script of the package shares: its name in ``--help``, ``--version``
and a help formatter that shows each default once.

Standard library only (the launcher and the training script's checks import it before MXNet).
"""
import argparse
import os
import sys

from . import __version__


def prog_name(command, module, argv0=None):
    """The name ``usage:`` shows: `command` (the installed console script, e.g.
    ``mxnet-ssp-train``) unless this process was started as a Python file: then
    ``python -m <module>`` when the file is the module's own (``python -m``), else the
    file's name (e.g. ``train_cifar.py`` of train_scripts/), but the command again under
    another package's ``__main__.py`` (``python -m pytest``)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    base = os.path.basename(argv0 or '')
    if not base.endswith('.py'):
        return command
    path = os.path.normpath(argv0)
    own = os.path.join(*module.split('.'))
    if path.endswith((own + '.py', os.path.join(own, '__main__.py'))):
        return 'python -m %s' % module
    if base == '__main__.py':        # another package's runner (python -m pytest)
        return command
    return base


def add_version(parser):
    """``--version``: prints ``<prog> <mxnet_ssp.__version__>`` and exits 0."""
    parser.add_argument('--version', action='version', version='%(prog)s ' + __version__,
                        help="print the program's name and mxnet-ssp's version, then exit")
    return parser


class DefaultsOnce(argparse.HelpFormatter):
    """Like :class:`argparse.ArgumentDefaultsHelpFormatter`, but adds ``(default: X)`` only
    where the help text does not say the default itself (``default``), and never for a
    default of None or a switch left off (which read as ``(default: None)`` / ``False``)."""

    def _get_help_string(self, action):
        text = action.help or ''
        if 'default' in text.lower() or action.default in (None, False, argparse.SUPPRESS):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + ' (default: %(default)s)'
        return text
