"""mxnet-ssp: Stale Synchronous Parallel (SSP) and Dynamic SSP for MXNet parameter servers.

``import mxnet_ssp`` registers the KVStore types ``dist_ssp`` and ``dist_dssp``
with ``mx.kv.create`` -- at once if MXNet is already imported, otherwise as
soon as it is -- so ``gluon.Trainer(..., kvstore='dist_dssp')`` and
``Module.fit(kvstore='dist_ssp')`` work in either import order.  Importing
the package alone does not import MXNet (the launcher and the pure decision
logic do not need it).  Configuration comes from the environment (see
:mod:`mxnet_ssp.config`) or from :func:`create`.
"""
import importlib

from ._hooks import when_done_importing as _when_done_importing
from ._hooks import when_imported as _when_imported
from ._log import attach as _attach_log
from .config import ConfigError, SyncConfig

__all__ = ['create', 'SSPKVStore', 'SSPError', 'SyncConfig', 'ConfigError', 'optim',
           '__version__']
__version__ = '0.1.0'

_LAZY = ('create', 'SSPKVStore', 'SSPError')


#: The modules of the store's own import chain that import MXNet at their top: when a script
#: imports one of them before mxnet, MXNet's import finishes inside it, before the names
#: kvstore takes from it exist; each calls _hooks.module_done as its last line.
_STORE_CHAIN = ('mxnet_ssp.store', 'mxnet_ssp.worker.native_store', 'mxnet_ssp.worker.bucketing',
                'mxnet_ssp.worker.clock_sync')


def _register_store_types():
    _when_done_importing(_STORE_CHAIN, _define_store_types)


def _define_store_types():
    # defining the classes registers them: the store types with mx.kv.create,
    # the update rules with mx.optimizer (so Trainer(..., 'sasgd') works); and MXNet's
    # own dist stores refuse those rules before sending them to servers that cannot run them
    importlib.import_module(__name__ + '.kvstore')
    importlib.import_module(__name__ + '.optim')
    importlib.import_module(__name__ + '.worker.native_store').refuse_worker_aware_rules()


def __getattr__(name):
    # importlib, not "from . import": that asks this module for the attribute again
    if name == 'optim':
        return importlib.import_module(__name__ + '.optim')
    if name in _LAZY:
        return getattr(importlib.import_module(__name__ + '.kvstore'), name)
    raise AttributeError('module %r has no attribute %r' % (__name__, name))


_attach_log()       # in a process of a job: our lines as "mxnet-ssp: <role>[<rank>] ..."
_when_imported('mxnet', _register_store_types)
