"""MXNet's scheduler, run from ``libmxnet`` without MXNet's Python package.

A scheduler process of an MXNet job runs ps-lite's scheduler inside ``import mxnet``
(``mxnet/kvstore/kvstore_server.py``): the package loads, registers its ~1,000 operators as
Python functions, creates a ``dist`` store (``MXKVStoreCreate``) and calls
``MXKVStoreRunServer``, which for a scheduler starts ps-lite, waits at its barriers and returns
once the job ends; the package then calls ``sys.exit()``.  None of the Python the package
loads is used on the way: loading it costs about 1.9 s of CPU here (with
:func:`mxnet_ssp._hooks.skip_optional_mxnet_imports`), loading ``libmxnet.so`` itself 0.15 s.

:func:`serve_at_import` makes the scheduler's ``import mxnet`` make the same C calls
(``MXKVStoreCreate("dist")``, ``MXKVStoreRunServer`` with a controller that ignores commands,
as MXNet's would for a scheduler, which is sent none; ``MXNotifyShutdown`` at exit) from the
library directly, then ``sys.exit()`` as MXNet does: what the job sees (its ps-lite
messages, the scheduler's exit status, code of the script before ``import mxnet`` running
first) is unchanged.  The start-up hook (``mxnet_ssp_autoload``) calls it in scheduler
processes; ``MXNET_SSP_AUTOLOAD=0`` leaves MXNet's own path.  Where the library is not where
the wheel puts it (:func:`library_path` is None), MXNet's path runs.

A failing C call ends the process with status 1 and MXNet's error message, as MXNet's
``check_call`` would (there with a traceback).  Pure standard library; nothing here imports
MXNet.
"""
import atexit
import ctypes
import os
import sys
from importlib.machinery import PathFinder

from .._hooks import when_importing

__all__ = ['library_path', 'serve', 'serve_at_import']

#: MXNet's variable for a library outside its package (``mxnet/libinfo.py`` reads it first)
ENV_LIBRARY_PATH = 'MXNET_LIBRARY_PATH'
_LIBRARY = 'libmxnet.so'
_CONTROLLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def library_path(environ=None):
    """The ``libmxnet.so`` that ``import mxnet`` would load, or None if not found plainly.

    ``MXNET_LIBRARY_PATH`` when it names a file; otherwise the file beside the ``mxnet``
    package's ``__init__.py`` (where the PyPI wheels put it).  None when neither exists (a
    source build with the library elsewhere, no MXNet): then MXNet's own path runs.
    """
    env = os.environ if environ is None else environ
    given = env.get(ENV_LIBRARY_PATH)
    if given:
        return given if os.path.isfile(given) else None
    try:
        # the path's finder itself: importlib.util.find_spec would ask sys.meta_path, where
        # the hooks waiting for ``import mxnet`` (the job watch's) would take it for the import
        spec = PathFinder.find_spec('mxnet')
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, _LIBRARY)
        if os.path.isfile(path):
            return path
    return None


class SchedulerError(RuntimeError):
    """A C call of the scheduler failed; the message is MXNet's."""


def _check(lib, status, call):
    if status != 0:
        message = lib.MXGetLastError()
        raise SchedulerError('%s failed: %s' % (call, message.decode('utf-8', 'replace')
                                                 if message else 'no message'))


def _ignore_command(head, body, handle):
    """The scheduler's controller: ps-lite sends a scheduler no commands."""


def serve(path):
    """Run this process's ps-lite scheduler from the library at `path` until the job ends.

    The main thread stays in this function while ps-lite runs (the job watch's
    :func:`mxnet_ssp.ps.job_watch.in_server_loop` looks for it).  Raises
    :class:`SchedulerError` when a call fails.
    """
    lib = ctypes.CDLL(path, ctypes.RTLD_LOCAL)
    lib.MXGetLastError.restype = ctypes.c_char_p
    atexit.register(lib.MXNotifyShutdown)      # as MXNet's package does at its exit
    handle = ctypes.c_void_p()
    _check(lib, lib.MXKVStoreCreate(b'dist', ctypes.byref(handle)), 'MXKVStoreCreate("dist")')
    controller = _CONTROLLER(_ignore_command)
    _check(lib, lib.MXKVStoreRunServer(handle, controller, None), 'MXKVStoreRunServer')


def _serve_and_exit(path):
    try:
        serve(path)
    except SchedulerError as err:
        sys.stderr.write('mxnet-ssp: scheduler (pid %d): %s\n' % (os.getpid(), err))
        sys.exit(1)
    sys.exit()


def serve_at_import(environ=None):
    """In a scheduler process: when ``import mxnet`` begins, serve from the library and exit.

    Returns True when that is arranged, False when the library is not found plainly
    (:func:`library_path`; MXNet's own path then runs).  Its hook runs after the other
    hooks of that import (:func:`mxnet_ssp.ps.job_watch.follow_job`'s thread starts first),
    since it does not return.
    """
    path = library_path(environ)
    if path is None:
        return False
    when_importing('mxnet', lambda: _serve_and_exit(path), last=True)
    return True
