"""Server-side update rules that know the sender and the staleness of each gradient.

Two rules, both for mxnet-ssp stores whose servers report who sent a gradient and how stale
it is (``dist_async`` with ``mxnet_ssp`` imported, ``dist_ssp``, ``dist_dssp``,
``dist_softsync``):

* :class:`StalenessAwareSGD` (``'sasgd'``): SGD whose learning rate is divided by the
  staleness, per gradient (Zhang et al., IJCAI 2016, Eq. 3) or by the average staleness of
  the gradients of an update (Rudra, ``<sigma>``).
* :class:`DCASGD` (``'dcasgd_pw'``): Delay-Compensated ASGD (Zheng et al., ICML 2017) with a
  backup of the weights *per worker*, as in the paper's Algorithm 2 (MXNet's own
  ``mx.optimizer.DCASGD``, registered as ``'dcasgd'``, keeps one previous weight per key).

The servers drive them through :class:`WorkerAwareOptimizer`'s two-step interface:
``prepare_grad`` once per received gradient and ``apply`` once per weight update.  MXNet's
plain ``update`` (no sender information) raises :class:`StalenessRequiredError`.
The formulas, the order of the operations and the state each rule keeps are in
``docs/update_rules.md``; the NumPy oracle ``tests/support/oracle_optim.py`` is a NumPy reference of
the same rules.

==========================================  ================================================
:mod:`~mxnet_ssp.optim.worker_aware`        :class:`WorkerAwareOptimizer`, the steps every
                                            rule shares, :class:`StalenessRequiredError`
:mod:`~mxnet_ssp.optim.sasgd`               :class:`StalenessAwareSGD`
:mod:`~mxnet_ssp.optim.dcasgd`              :class:`DCASGD`
:mod:`~mxnet_ssp.optim.traits`              what the stores and servers read off any
                                            optimizer (worker-aware, element-wise, the
                                            parameters' multipliers)
==========================================  ================================================

The names are imported from here (``mxnet_ssp.optim``), where the classes also pickle.
Importing this module imports MXNet and registers the names ``'stalenessawaresgd'``,
``'sasgd'`` and ``'dcasgd_pw'`` with ``mx.optimizer``.  It changes nothing of MXNet's: that
MXNet's own dist stores refuse these rules in ``set_optimizer`` is installed by ``import
mxnet_ssp`` (:func:`mxnet_ssp.worker.native_store.refuse_worker_aware_rules`).
"""
import warnings

import mxnet as mx

from ..core.names import ADAPTIVE_READINGS, DCASGD_PW, SASGD, STALENESS_POLICIES
from .dcasgd import DCASGD
from .sasgd import StalenessAwareSGD
from .traits import (is_elementwise, is_worker_aware, one_call_update, server_multipliers,
                     with_parameter_multipliers)
from .worker_aware import StalenessRequiredError, WorkerAwareOptimizer, _WorkBuffers
# not in __all__, but named here: the stores import STORES_THAT_REPORT from this path
from .traits import ELEMENTWISE_MXNET_RULES  # noqa: F401
from .worker_aware import STORES_THAT_REPORT  # noqa: F401

__all__ = ['WorkerAwareOptimizer', 'StalenessAwareSGD', 'DCASGD', 'StalenessRequiredError',
           'STALENESS_POLICIES', 'ADAPTIVE_READINGS', 'is_worker_aware', 'one_call_update',
           'is_elementwise', 'with_parameter_multipliers', 'server_multipliers']

# The classes pickle (into the servers, into Trainer states) under this, their public path,
# not under the module that defines them.
for _cls in (WorkerAwareOptimizer, StalenessAwareSGD, DCASGD, StalenessRequiredError,
             _WorkBuffers):
    _cls.__module__ = __name__
del _cls


def _register(name, klass):
    """Register `klass` under `name` (lower case) without replacing another optimizer."""
    registry = mx.optimizer.Optimizer.opt_registry
    name = name.lower()
    if registry.get(name, klass) is not klass:
        prev = registry[name]
        if not (prev.__module__ == klass.__module__ and prev.__name__ == klass.__name__):
            warnings.warn('mxnet_ssp.optim: not registering %r: it is already %s.%s'
                          % (name, prev.__module__, prev.__name__))
            return
    registry[name] = klass


# 'stalenessawaresgd' the MXNet way, plus the short alias.
_register(StalenessAwareSGD.__name__, StalenessAwareSGD)
_register(SASGD, StalenessAwareSGD)
# Not Optimizer.register(DCASGD): its class name would replace MXNet's own 'dcasgd'.
_register(DCASGD_PW, DCASGD)
