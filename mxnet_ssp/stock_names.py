"""MXNet's own store names served by mxnet-ssp: a store that is MXNet's wherever it is not faster.

Installing mxnet-ssp registers its ``dist_async`` under MXNet's own name (on by default,
``MXNET_SSP_WRAP_ASYNC=0`` keeps MXNet's), so a script that never asked for mxnet-ssp gets
it.  Such a script must see MXNet behaving as MXNet:

* The store is an instance of MXNet's ``KVStore`` class as well as of
  :class:`~mxnet_ssp.kvstore.SSPKVStore`: MXNet's own code accepts only that class in
  places (``gluon.Trainer`` with ``row_sparse`` weights or sparse gradients,
  ``mxnet.model._create_sparse_kvstore``).  Every call the store does not serve itself
  reaches MXNet's store under it.
* What the store was not shown to do exactly as MXNet does (tests/integration/
  test_conformance.py), it hands to MXNet's store at once, saying so in one log line:
  ``row_sparse`` arrays (an init, a push, a ``row_sparse_pull``) and gradient compression.
  From then on every call goes to MXNet's store, and the servers get the optimizer as
  MXNet sends it (they had mxnet-ssp's updater).  That is possible until the first push;
  later (the servers already hold this store's buckets or slots) it is refused, naming
  the setting that keeps MXNet's store from the start.

The stores a user names explicitly (``dist_ssp``, ``dist_dssp``, ``dist_softsync``) refuse
those cases instead, with an error that says what to use.
"""
import logging

from . import config as cfg
from .worker.slots import has_row_sparse

__all__ = ['StockNames']

logger = logging.getLogger(__name__)


class StockNames:
    """What an mxnet-ssp store under one of MXNet's own names adds: the hand-over.

    A mixin: :mod:`mxnet_ssp.kvstore` builds each store class from it, its ``SSPKVStore`` and
    MXNet's ``KVStore`` (in that order), whose ``__init__`` is never called: ``handle`` and
    every method of MXNet's class that the store does not define act on MXNet's store
    under it.
    """

    #: Why MXNet's own store serves every call (a sentence), or None.
    handed_off = None

    def __del__(self):
        # MXNet's KVStore.__del__ would free the handle, which is the native store's: that
        # one is freed at exit, in the same phase on every worker (mxnet_ssp.worker.shutdown)
        pass

    @property
    def _updater(self):
        if self.handed_off is not None:
            return self._kv._updater
        return super()._updater

    def _hand_off(self, why):
        """Let MXNet's own store serve every call from now on, because of `why`."""
        if self.handed_off is not None:
            return
        if self._buckets.began or self._keys.slot_mode:
            self._refuse(
                'worker[%d]: %s: %s after this store began to train with mxnet-ssp\'s data path '
                '(%s); MXNet\'s own %s store serves that case: set %s=0 to use it from the start'
                % (self._rank, self.type, why,
                   'its slots' if self._keys.slot_mode else 'its pushes so far',
                   self.type, cfg.WRAP_SETTINGS[self.type]))
        self.handed_off = why
        logger.warning('worker[%d] %s: %s: MXNet\'s own %s store serves this job from here on '
                       '(%s=0 chooses it from the start)', self._rank, self.type, why, self.type,
                       cfg.WRAP_SETTINGS[self.type])
        if self._optimizer is not None:
            # the servers hold mxnet-ssp's updater: send them the optimizer as MXNet does
            self._kv.set_optimizer(self._optimizer)

    def _no_optimizer_case(self):
        if self.type not in cfg.SERVER_SYNC_TYPES:
            return False        # MXNet's dist_async cannot apply it either: refused by name
        self._hand_off('a push before any set_optimizer (update_on_kvstore=False): the '
                       'servers sum the gradients')
        return True

    def _sparse_case(self, what):
        self._hand_off('%s holds row_sparse arrays' % what)
        return True

    # every call: MXNet's store once handed off, or when it carries what only MXNet's serves
    def init(self, key, value):
        if self.handed_off is None and has_row_sparse(value):
            self._hand_off('key %r is initialized with a row_sparse array' % (key,))
        if self.handed_off is not None:
            return self._kv.init(key, value)
        return super().init(key, value)

    def broadcast(self, key, value, out, priority=0):
        if self.handed_off is None and (has_row_sparse(value) or has_row_sparse(out)):
            self._hand_off('key %r is broadcast as a row_sparse array' % (key,))
        if self.handed_off is not None:
            return self._kv.broadcast(key, value, out, priority=priority)
        return super().broadcast(key, value, out, priority)

    def push(self, key, value, priority=0):
        if self.handed_off is None and self._buckets.plan is None and has_row_sparse(value):
            self._hand_off('a push of key %r holds row_sparse arrays' % (key,))
        if self.handed_off is None and self._optimizer is None:
            self._no_optimizer_case()
        if self.handed_off is not None:
            return self._kv.push(key, value, priority=priority)
        return super().push(key, value, priority)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        if self.handed_off is not None:
            return self._kv.pull(key, out=out, priority=priority, ignore_sparse=ignore_sparse)
        return super().pull(key, out, priority, ignore_sparse)

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        self._hand_off('row_sparse_pull of key %r' % (key,))
        return self._kv.row_sparse_pull(key, out=out, priority=priority, row_ids=row_ids)

    def set_gradient_compression(self, compression_params):
        self._hand_off('gradient compression %r' % (compression_params,))
        return self._kv.set_gradient_compression(compression_params)

    def set_optimizer(self, optimizer):
        if self.handed_off is not None:
            self._optimizer = optimizer
            return self._kv.set_optimizer(optimizer)
        return super().set_optimizer(optimizer)

    def save_optimizer_states(self, fname, dump_optimizer=False):
        if self.handed_off is not None:
            return self._kv.save_optimizer_states(fname, dump_optimizer=dump_optimizer)
        return super().save_optimizer_states(fname, dump_optimizer)

    def load_optimizer_states(self, fname):
        if self.handed_off is not None:
            return self._kv.load_optimizer_states(fname)
        return super().load_optimizer_states(fname)

    def _barrier(self):
        if self.handed_off is not None:
            return self._kv._barrier()
        return super()._barrier()

