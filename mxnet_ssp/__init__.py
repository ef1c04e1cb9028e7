"""mxnet-ssp: Stale Synchronous Parallel (SSP) and Dynamic SSP for MXNet parameter servers.

``import mxnet_ssp`` registers the KVStore types ``dist_ssp`` and ``dist_dssp``
with ``mx.kv.create``, so ``gluon.Trainer(..., kvstore='dist_dssp')`` and
``Module.fit(kvstore='dist_ssp')`` work.  Configuration comes from the
environment (see :mod:`mxnet_ssp.config`) or from :func:`create`.
"""
from .config import ConfigError, SyncConfig
from .kvstore import SSPKVStore, create

__all__ = ['create', 'SSPKVStore', 'SyncConfig', 'ConfigError', '__version__']
__version__ = '0.1.0'
