"""MXNet's own store under every mxnet-ssp store (``dist_async``; ``dist_sync`` for BSP): creating and freeing it.

The tensors travel through MXNet's native store; the two moments where it waits in ps-lite
for the rest of the job, with no Python timeout of its own, are here, each bounded by the
job's timeout (:func:`mxnet_ssp.ps.process_exit.bounded`):

* creating it joins the job (waits for the scheduler);
* freeing it enters ps-lite's finalize barrier (waits for every node).  That happens once,
  at interpreter exit, in the same phase on every worker (see :mod:`mxnet_ssp.worker.shutdown`);
  afterwards a :class:`FreedNative` stands in and names what is no longer available.
"""
import ctypes
import os

from mxnet.base import KVStoreHandle, _LIB, c_str, check_call
from mxnet.kvstore.kvstore import KVStore as _NativeKVStore

from ..ps import process_exit, job_watch
from .. import config as cfg
from .._hooks import module_done
from ..core.env_names import DMLC_PS_ROOT_PORT, DMLC_PS_ROOT_URI

__all__ = ['create_native', 'free_native', 'FreedNative', 'refuse_worker_aware_rules']


def create_native(timeout, kind='dist_async'):
    """MXNet's own store of type `kind` (``'dist_async'``, or ``'dist_sync'`` for BSP),
    bypassing the registry (mxnet-ssp may own that name).

    Joining the job waits in ps-lite for the scheduler, for ever if it never came up: the
    process ends after `timeout` seconds with a message naming the scheduler's address.
    """
    message = ('worker: could not join the job within %g s (%s): the scheduler at %s:%s did not '
               'answer (it died, never started, or its port was taken)'
               % (timeout, cfg.ENV_TIMEOUT, os.environ.get(DMLC_PS_ROOT_URI, '?'),
                  os.environ.get(DMLC_PS_ROOT_PORT, '?')))
    handle = KVStoreHandle()
    with process_exit.bounded(timeout, message):
        check_call(_LIB.MXKVStoreCreate(c_str(kind), ctypes.byref(handle)))
    native = _NativeKVStore(handle)
    job_watch.follow_scheduler(native.rank)    # end this worker when the job failed elsewhere
    return native


def free_native(native, timeout, rank, barrier=True):
    """Free `native` (ps-lite's finalize barrier, which waits for every node of the job).

    The process ends after `timeout` seconds if another node never gets there.  The Python
    object is left without a handle, so its own ``__del__`` frees nothing.

    ``barrier=False`` (elastic mode) frees it without any barrier: MXNet's
    ``MXKVStoreSetBarrierBeforeExit(handle, 0)`` makes the destructor skip the workers'
    barrier and the stop command to the servers and finalize ps-lite locally; it still waits
    until every push and pull of this worker was answered (docs/elastic.md, (b)).
    """
    handle, native.handle = native.handle, None
    if not barrier:
        check_call(_LIB.MXKVStoreSetBarrierBeforeExit(handle, ctypes.c_int(0)))
    message = ('worker[%d]: the job did not shut down within %g s (%s): another worker, a '
               'server or the scheduler never reached ps-lite\'s finalize barrier (died, '
               'stopped, or still working)' % (rank, timeout, cfg.ENV_TIMEOUT))
    job_watch.leaving()        # the scheduler closes its connections once the barrier passed
    with process_exit.bounded(timeout, message):
        check_call(_LIB.MXKVStoreFree(handle))


class FreedNative:
    """Stands in for MXNet's store once it was freed: every use raises `error`."""

    def __init__(self, rank, store_type, error):
        self._what = 'worker[%d]: the %s store was shut down' % (rank, store_type)
        self._error = error

    def __getattr__(self, name):
        raise self._error('%s (at interpreter exit); %s is no longer available'
                          % (self._what, name))


def _is_worker_node():
    is_worker = ctypes.c_int()
    check_call(_LIB.MXKVStoreIsWorkerNode(ctypes.byref(is_worker)))
    return bool(is_worker.value)


def refuse_worker_aware_rules():
    """Make MXNet's own dist stores refuse worker-aware rules before they send them.

    ``mxnet.kvstore.KVStore.set_optimizer`` pickles the optimizer for servers that would call
    its plain ``update`` (no sender, no staleness): a worker-aware rule
    (:func:`mxnet_ssp.optim.is_worker_aware`) would fail there, in a server, with the worker
    none the wiser.  Wrapping that one method is the only change mxnet-ssp makes to MXNet's
    classes; mxnet-ssp's own stores send a :class:`mxnet_ssp.ps.channel.UpdaterSpec` through
    it, which is not worker-aware.  ``import mxnet_ssp`` calls this once MXNet is imported;
    calling it again changes nothing.
    """
    native = _NativeKVStore.set_optimizer
    if getattr(native, 'refuses_worker_aware', False):
        return

    def set_optimizer(self, optimizer):
        from ..optim import STORES_THAT_REPORT, StalenessRequiredError, is_worker_aware
        # the condition under which MXNet pickles (in a server it installs the updater)
        if is_worker_aware(optimizer) and 'dist' in self.type and _is_worker_node():
            raise StalenessRequiredError(
                '%s needs a store that reports the staleness of each gradient: use one of %s '
                '(MXNet\'s own %s store cannot)'
                % (type(optimizer).__name__, STORES_THAT_REPORT, self.type))
        return native(self, optimizer)

    set_optimizer.__doc__ = native.__doc__
    set_optimizer.__wrapped__ = native
    set_optimizer.refuses_worker_aware = True
    _NativeKVStore.set_optimizer = set_optimizer


# the store types are registered now if MXNet's import finished inside this module's import
module_done(__name__)   # (mxnet_ssp/__init__.py: _STORE_CHAIN)
