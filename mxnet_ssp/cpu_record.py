"""The CPU a scheduler, server or controller process used, written when it ends.

A lab run compares paradigms on one machine, so how busy each arm keeps it matters (issue 23:
CPU contention differs between arms).  Workers record their own CPU time in their train logs;
the processes without a training script record theirs here: given a metrics directory (the
start-up hook passes ``MXNET_SSP_METRICS_DIR`` when it is set, which the lab does for every
process of a run; the controller passes its own), the process writes
``<dir>/cpu-<role>-<pid>.json`` when it exits::

    {"role": "server", "pid": 4242, "cpu_s": 12.5, "wall_s": 61.0}

``cpu_s`` is the user and system time of all its threads; ``wall_s`` the time from
:func:`record_cpu` (called at start-up, before ``import mxnet``) to the exit.  Nothing is
written without a directory (the hook does not use the default metrics directory: a job of
MXNet's own stores would find a new folder in its working directory), or when the process
ends without exit hooks (a failed job's scheduler and servers, ended by
:mod:`mxnet_ssp.ps.job_watch`, and the servers of an elastic job).

Pure standard library.
"""
import atexit
import json
import os
import time

__all__ = ['record_cpu', 'usage_file']


def usage_file(directory, role, pid):
    """The path a process of `role` with `pid` writes its CPU record to."""
    return os.path.join(directory, 'cpu-%s-%d.json' % (role, pid))


def record_cpu(role, directory):
    """Write this process's CPU record into `directory` at its exit (see the module's
    docstring).  Returns the path it will write, or None when `directory` is None."""
    if directory is None:
        return None
    path = usage_file(directory, role, os.getpid())
    start = time.monotonic()

    def write():
        record = {'role': role, 'pid': os.getpid(), 'cpu_s': round(time.process_time(), 4),
                  'wall_s': round(time.monotonic() - start, 4)}
        try:
            os.makedirs(directory, exist_ok=True)
            with open(path, 'w') as f:
                json.dump(record, f)
        except OSError:
            pass          # a record is not worth failing the end of a job over
    atexit.register(write)
    return path
