"""How a process of a job ends when it cannot go on: deadlines on waits nobody else bounds,
and the exits of servers and schedulers.

A worker's own end (its stores shut down in one phase on every worker, the exit hook, fatal
errors) is :mod:`mxnet_ssp.worker.shutdown`'s; it ends through :func:`_die` here.

A server whose update or command fails ends at once with :data:`SERVER_FAILED`
(:func:`end_server`).  The scheduler and the servers of a job that failed elsewhere end with
:data:`FATAL_EXIT` (:func:`end_job`, called as :mod:`mxnet_ssp.ps.job_watch` decides).

Waits that nobody else bounds
-----------------------------
Some waits happen inside MXNet's native code, where no Python timeout
reaches: the servers applying a step's pushes, ps-lite's finalize barrier at
exit.  A server that died or was stopped, or a peer that never reaches the
barrier, would block them for ever.  :func:`bounded` puts a deadline on such
a wait: a watchdog thread ends the process with :data:`FATAL_EXIT` and a
message that says what was awaited, when the deadline passes first.

Contracts: :func:`bounded` is called from the training thread (the watchdog is its own daemon
thread); nothing here imports MXNet.
"""
import contextlib
import logging
import os
import sys
import threading
import time

__all__ = ['bounded', 'end_server', 'end_job', 'SERVER_FAILED', 'FATAL_EXIT']

logger = logging.getLogger(__name__)

#: Exit status of a server whose update or command failed.
SERVER_FAILED = 70
#: Exit status of a process whose job failed (a peer died, the controller timed out): a
#: worker, or a scheduler or server that ended because of it (:func:`end_job`).
FATAL_EXIT = 1



class _Watchdog:
    """One daemon thread that ends the process when a :func:`bounded` wait overruns."""

    def __init__(self):
        self._cond = threading.Condition()
        self._deadline = None       # time.monotonic() by which the current wait must end
        self._message = None
        self._idle = True           # the thread waits without a deadline: wake it to start
        self._thread = None

    @contextlib.contextmanager
    def bounded(self, seconds, message):
        with self._cond:
            self._deadline = time.monotonic() + seconds
            self._message = message
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name='mxnet-ssp-watchdog')
                self._thread.start()
            elif self._idle:
                self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._deadline = None

    def _run(self):
        with self._cond:
            while True:
                if self._deadline is None:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                _die(self._message)     # os._exit: nothing after it reads a record


_watchdog = _Watchdog()


def bounded(seconds, message):
    """Context manager: if the block is still running after `seconds`, exit the process.

    The exit prints `message` (say what was awaited and which setting bounds
    it) and ends the process with :data:`FATAL_EXIT`, without exit hooks: the
    wait that overran would block them too.  Not reentrant: one bounded wait
    at a time, from the training thread.
    """
    return _watchdog.bounded(seconds, message)


def _say_fatal(message):
    logger.error('%s -- exiting without waiting for the other workers', message)


def _exit_now():
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(FATAL_EXIT)


def _die(message):
    _say_fatal(message)
    _exit_now()


def end_server(what):
    """Log the exception being handled and end this server process with SERVER_FAILED.

    MXNet calls the server's updater and commands from ctypes callbacks that
    print and *ignore* exceptions: the job would go on silently wrong.  Ending
    the server instead lets the launcher stop the job, naming this server.
    """
    logger.exception('server: %s failed; stopping this server', what)
    sys.stderr.write('mxnet-ssp: server %s failed (see above); exiting with status %d\n'
                     % (what, SERVER_FAILED))
    sys.stderr.flush()
    os._exit(SERVER_FAILED)


def end_job(message, status=FATAL_EXIT):
    """End this scheduler or server process of a failed job with `status`, saying `message`.

    `status` is FATAL_EXIT except at the end of an elastic job (0: :mod:`mxnet_ssp.ps.job_watch`).

    Their loop (MXNet's, inside ``import mxnet``) waits for every node of the job and
    cannot be left from Python: the process ends without exit hooks, which would wait too.
    Called by the threads of :mod:`mxnet_ssp.ps.job_watch`.
    """
    # one line on stderr, not through logging: a scheduler has no handler of its own (the
    # line would come twice through logging's last resort) and a server's is MXNet's
    sys.stderr.write('mxnet-ssp: %s (exit status %d)\n' % (message, status))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


