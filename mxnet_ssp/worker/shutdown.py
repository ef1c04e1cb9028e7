"""How a worker ends, cleanly or not: its stores shut down in one phase on every worker.

A worker's MXNet store must be shut down the same way on every worker.
Freeing MXNet's native distributed store waits in ps-lite's finalize barrier
for every node of the job, and MXNet's own exit hook (``_notify_shutdown``)
stops the engine; a worker that frees its store in another phase than its
peers (at a garbage collection, after the engine stopped, or never) can leave
them waiting for ever.  So the phase is fixed here, whatever the script does
with its store (drops it early, keeps it global, closes it, or never does):

1. :meth:`SSPKVStore.close` (called by the script, or by the exit hook below)
   leaves the synchronization controller, flushes the metrics and prints the
   summary.  It never blocks: the other workers are released at once.
2. At interpreter exit, one hook (:func:`_at_exit`), which runs before
   MXNet's own (it is registered after ``import mxnet``, and atexit runs
   hooks last-in first-out), closes every store still open and then frees
   every store's native store, in creation order.  Every worker meets the
   others in ps-lite's barrier there, with the engine still running.

The stores are kept alive here until then, so a store the script dropped is
not freed at a garbage collection whose timing differs between workers.

Fatal errors
------------
When a worker cannot go on (a peer died, the controller timed out), the store
records it with :func:`fatal` and raises.  If the script does not handle the
error, the exit hook ends the process with status 1 without entering the
barrier that the dead peer would never reach.  The same holds when the
script itself dies of an exception it does not handle (recorded by a
``sys.excepthook`` installed with the first store): the worker exits 1
without leaving the controller, so the controller fails the job and names
this rank to the others, instead of letting them train on without it.  A server whose update or
command fails ends at once with :data:`SERVER_FAILED` (:func:`end_server`).  The scheduler
and the servers of a job that failed elsewhere end with :data:`FATAL_EXIT`
(:func:`end_job`, called as :mod:`mxnet_ssp.ps.job_watch` decides).  A copy into a bucket
that failed after the job's last push (a gradient of the last step found in MKL-DNN's own
layout: :mod:`mxnet_ssp.worker.host_copy`) would have no later push to report it: once the
stores are freed, the exit hook ends the worker with status 1 and says so.

The deadlines of waits inside MXNet's native code and the exits of servers and schedulers
are :mod:`mxnet_ssp.ps.process_exit`'s.
"""
import atexit
import logging
import sys
import threading

from ..ps.process_exit import _die, _exit_now, _say_fatal

__all__ = ['adopt', 'fatal', 'copy_error_left', 'ABORT_S']

logger = logging.getLogger(__name__)

_stores = []        # every store of this process, in creation order, until exit
_fatal = None       # the message of the error the job cannot survive, or None
_hooked = False
#: What the exit hook did, per step ('close', 'free_native'): how many stores (diagnostics).
exit_counts = {}


def adopt(store):
    """Keep `store` until exit; there, ``store.close()`` then ``store.free_native()``.

    Call it once MXNet is imported (a store exists, so it is): the exit hook
    is registered on the first call, after MXNet's, so it runs before it.
    """
    global _hooked
    if not _hooked:
        atexit.register(_at_exit)
        sys.excepthook = _recording(sys.excepthook)
        _hooked = True
    _stores.append(store)


def _recording(excepthook):
    """`excepthook` that first records the script's unhandled exception as fatal."""
    def hook(kind, value, tb):
        if _fatal is None:
            who = 'worker[%d]: ' % _stores[0].rank if _stores else ''
            fatal('%sthe training script raised %s: %s' % (who, kind.__name__, value))
        excepthook(kind, value, tb)
    return hook


def fatal(message):
    """Record that this worker's job failed with `message`; returns `message`."""
    global _fatal
    _fatal = message
    return message


def _abort_servers(message):
    """Tell the servers that the job failed on this worker, so that they end now.

    Without it they would wait in ps-lite's finalize barrier for this worker, until their
    connection to the scheduler closes (:mod:`mxnet_ssp.ps.job_watch`): a scheduler that never
    saw this worker connected (it failed right after joining) never closes it.  Each store
    that can (``abort_servers``; not in elastic mode, where the job goes on) sends one
    command; the worker exits :data:`ABORT_S` seconds later at the latest (a server ends as
    it takes it, so nobody answers), and a server that did not take it is left to the
    followers.
    """
    stores = [s for s in _stores if getattr(s, 'abort_servers', None) is not None]
    if not stores:
        return

    def send():
        try:
            stores[0].abort_servers(message)
        except Exception as err:     # the notice is a courtesy: exit as planned
            logger.warning('mxnet-ssp: could not tell the servers that the job failed: %s', err)
    # a server ends as it takes the notice, so the command is never answered: the sender
    # waits on its own thread, and this one only as long as delivering it takes
    sender = threading.Thread(target=send, daemon=True, name='mxnet-ssp-abort')
    sender.start()
    sender.join(ABORT_S)


def copy_error_left(rank=None):
    """What an operation of :mod:`mxnet_ssp.worker.host_copy` met after the last push that could
    report it (a gradient of the job's last step found in MKL-DNN's layout, say), as the
    message the job ends with, or None.  Call it once every operation has run."""
    host_copy = sys.modules.get(__name__.rsplit('.', 1)[0] + '.host_copy')    # worker/
    if host_copy is None:
        return None
    try:
        host_copy.raise_pending()
    except Exception as err:        # noqa: BLE001 - LayoutChanged or a copy's failure
        who = '' if rank is None else 'worker[%d]: ' % rank
        return '%sthe last step\'s copies into its buckets: %s' % (who, err)
    return None


#: Seconds a failing worker gives its abort notice to reach the servers (:func:`_at_exit`).
ABORT_S = 2.0


def _at_exit():
    if _fatal is not None:
        _say_fatal(_fatal)          # first: a server that ends on the notice answers nothing
        _abort_servers(_fatal)
        _exit_now()
    stores = list(_stores)
    del _stores[:]
    for step in ('close', 'free_native'):   # leave the controller first: nobody stays held
        for store in stores:
            try:
                getattr(store, step)()
                exit_counts[step] = exit_counts.get(step, 0) + 1
            except Exception:       # one store's failure must not keep the others' barrier
                logger.exception('mxnet-ssp: %s of a store at exit failed', step)
    # the native stores are freed: every push was sent, so every copy before it has run
    left = copy_error_left(stores[0].rank if stores else None)
    if left is not None:
        _die(fatal(left))
