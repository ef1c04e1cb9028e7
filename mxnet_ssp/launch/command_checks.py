"""Checks of the job's command that run before the launcher starts any process.

A package can teach the launcher to check its own training script's flags: it registers a
callable in the entry-point group ``mxnet_ssp.launch_checks`` (setup.py's ``entry_points``).
The launcher calls each one as ``check(command, worker_environ, num_workers, local=...,
cwd=...)``; a check returns None when the command is not its script or its flags are
fine, else one line saying which flag, its value and what is accepted, which the launcher
prints as its error (exit 2) before any process starts.  mxnet-ssp's own training script
registers :func:`mxnet_ssp.lab.launch_check.check_training_flags` there, so the launcher
imports nothing of the lab by name.
"""
import logging
from importlib import metadata

from .settings import LaunchError

GROUP = 'mxnet_ssp.launch_checks'

logger = logging.getLogger(__name__)


def registered_checks():
    """The entry points of :data:`GROUP`, in name order (none when the package's metadata
    is not installed, as in a bare checkout on PYTHONPATH)."""
    found = metadata.entry_points()
    if hasattr(found, 'select'):                      # Python 3.10+
        points = list(found.select(group=GROUP))
    else:                                             # Python 3.8, 3.9
        points = list(found.get(GROUP, ()))
    unique = {point.name: point for point in points}  # a package seen twice on sys.path
    return [unique[name] for name in sorted(unique)]


def check_command(command, worker_environ, num_workers, local=True, cwd=None):
    """Run every registered check on `command`; raise LaunchError with the first problem."""
    for point in registered_checks():
        try:
            check = point.load()
        except Exception as err:          # a broken plug-in must not stop every launch
            logger.warning('the launch check %s (%s) could not be loaded: %s: %s',
                           point.name, point.value, type(err).__name__, err)
            continue
        message = check(command, worker_environ, num_workers, local=local, cwd=cwd)
        if message:
            raise LaunchError('in the command: %s' % message)
