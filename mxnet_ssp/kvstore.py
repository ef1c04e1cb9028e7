"""The KVStore types of mxnet-ssp: ``dist_ssp``, ``dist_dssp``, ``dist_async``, ``dist_softsync``.

A :class:`SSPKVStore` wraps MXNet's native ``dist_async`` store: tensors travel
over MXNet's own ps-lite data path and the servers apply every push with the
optimizer the workers sent.  On top of that:

* ``dist_ssp`` / ``dist_dssp`` decide *when a worker may go on*: at the end of
  every step the worker reports its clock to the synchronization controller
  and issues the step's pulls only once it is released (Algorithm 1 of the
  DSSP paper; see :mod:`mxnet_ssp.core.sync`).
* ``dist_async`` (replacing MXNet's registration of that name once
  mxnet_ssp is imported; ``MXNET_SSP_WRAP_ASYNC=0`` keeps MXNet's own) and
  ``dist_softsync`` never hold a worker.  ``dist_softsync`` is Rudra's
  n-softsync: the servers apply one averaged update per ``floor(workers / n)``
  gradients.
* With an optimizer that needs the sender of each gradient (the
  :class:`mxnet_ssp.optim.WorkerAwareOptimizer` rules: lr / staleness,
  DC-ASGD) and always under ``dist_softsync``, the store runs in *slot mode*:
  each worker pushes and pulls a parameter through its own key slot
  (:mod:`mxnet_ssp.worker.slots`), so the servers know who sent each gradient and
  its staleness.  Cost: M slots per parameter on the servers.

Importing this module registers the types with MXNet's ``mx.kv.create`` (also under MXNet's
own names ``dist_async`` and ``dist_sync``, see :mod:`mxnet_ssp.stock_names`); every type is
an :class:`SSPKVStore` (:mod:`mxnet_ssp.store`, where its contract is stated).
"""
from mxnet.kvstore.base import KVStoreBase

from . import config as cfg
from .store import SSPError, SSPKVStore

__all__ = ['SSPKVStore', 'SSPError', 'create']


def _store_class(name):
    klass = type(name, (SSPKVStore,), {'store_type': name,
                                       '__doc__': 'The %s KVStore type.' % name})
    KVStoreBase.kv_registry[name] = klass      # register() would warn when replacing dist_async
    return klass


def _stock_name_class(name):
    """MXNet's store type `name` (``dist_async``, ``dist_sync``) served by mxnet-ssp: an
    :class:`SSPKVStore` that is also MXNet's ``KVStore`` and hands what it does not serve to
    MXNet's own store (:class:`mxnet_ssp.stock_names.StockNames`)."""
    from mxnet.kvstore.kvstore import KVStore as NativeKVStore
    from .stock_names import StockNames
    return type(name, (StockNames, SSPKVStore, NativeKVStore), {
        'store_type': name, '__module__': 'mxnet_ssp.stock_names',
        '__doc__': 'MXNet\'s %s KVStore type, served by mxnet-ssp where it is faster '
                   '(mxnet_ssp.stock_names).' % name})


DistSSP = _store_class('dist_ssp')
DistDSSP = _store_class('dist_dssp')
DistSoftsync = _store_class('dist_softsync')
# MXNet's names, served unless the user keeps MXNet's own (register() would warn on replacing)
if cfg.wrap_async():
    KVStoreBase.kv_registry['dist_async'] = _stock_name_class('dist_async')
if cfg.wrap_sync():
    KVStoreBase.kv_registry['dist_sync'] = _stock_name_class('dist_sync')


def create(name, **settings):
    """Create a KVStore; like ``mx.kv.create`` but takes mxnet-ssp settings.

    Parameters
    ----------
    name : str
        ``'dist_ssp'``, ``'dist_dssp'``, ``'dist_async'`` or ``'dist_softsync'``
        (with settings), or any other MXNet type (without).
    **settings
        ``staleness``, ``mode``, ``timeout`` (SSP/DSSP), ``splits``
        (``dist_softsync``), ``metrics_dir``, ``staleness_log``.

    Examples
    --------
    >>> kv = mxnet_ssp.create('dist_dssp', staleness=(3, 15))   # doctest: +SKIP
    >>> kv = mxnet_ssp.create('dist_softsync', splits=4)         # doctest: +SKIP
    """
    if not isinstance(name, str):
        raise cfg.ConfigError('kvstore type must be a string, got %r' % (name,))
    lowered = name.lower()
    if (lowered in cfg.STORE_TYPES or lowered in cfg.ASYNC_STORE_TYPES
            or lowered in cfg.SERVER_SYNC_TYPES and lowered in KVStoreBase.kv_registry):
        klass = KVStoreBase.kv_registry.get(lowered)
        if klass is not None and issubclass(klass, SSPKVStore):
            return klass(**settings)
        return SSPKVStore(lowered, **settings)
    if settings:
        raise cfg.ConfigError('settings %s are only accepted by %s, not by kvstore type %r'
                              % (', '.join(sorted(settings)),
                                 ', '.join(tuple(cfg.STORE_TYPES) + cfg.ASYNC_STORE_TYPES), name))
    cfg.check_kvstore_name(lowered)
    from mxnet.kvstore.base import create as mx_create
    return mx_create(lowered)
