"""What the stores and the servers read off an optimizer, of this package or not.

Whether it needs the sender of each gradient (:func:`is_worker_aware`), whether one call may
stand for its two steps (:func:`one_call_update`), whether it may update a bucket of arrays
in one call (:func:`is_elementwise`), and the gluon Parameters' multipliers that the servers
must apply (:func:`with_parameter_multipliers`, :func:`server_multipliers`).
"""
from .dcasgd import DCASGD
from .sasgd import StalenessAwareSGD
from .worker_aware import WorkerAwareOptimizer


def is_worker_aware(optimizer):
    """Whether `optimizer` needs the sender of each gradient: the interface of
    :class:`WorkerAwareOptimizer` (``prepare_grad`` and ``apply``), also in classes of
    its own.  The store then runs in slot mode and the servers use that interface."""
    return callable(getattr(optimizer, 'prepare_grad', None)) and callable(
        getattr(optimizer, 'apply', None))


def one_call_update(optimizer):
    """``optimizer.apply_one`` when it stands for ``prepare_grad`` then ``apply`` of this very
    object, else None (the servers then call the two).

    :class:`WorkerAwareOptimizer`'s own ``apply_one`` calls the two, so it always does.  A
    rule's own ``apply_one`` (a fused path) does not see a ``prepare_grad`` or ``apply``
    replaced on the instance (a wrapper, say) or overridden by a subclass below the class
    that defines it: then None.
    """
    fused = getattr(optimizer, 'apply_one', None)
    if not callable(fused):
        return None
    cls = type(optimizer)
    instance = vars(optimizer) if hasattr(optimizer, '__dict__') else {}
    generic = getattr(cls, 'apply_one', None) is WorkerAwareOptimizer.apply_one
    if generic or 'apply_one' in instance:
        return fused

    def owner(name):
        return next((k for k in cls.__mro__ if name in vars(k)), None)

    fused_owner = owner('apply_one')
    for name in ('prepare_grad', 'apply'):
        defined = owner(name)
        if name in instance or defined is None or not issubclass(fused_owner, defined):
            return None
    return fused


#: MXNet 1.9.1's rules whose update of an element reads only that element, its gradient, its
#: own state and per-key numbers (learning rate, weight decay, the key's update count): the
#: servers may run them once over a bucket of arrays (:mod:`mxnet_ssp.core.buckets`).  Left
#: out: Nadam (one momentum schedule advanced at every update call), SGLD (random noise drawn
#: per call), LBSGD, LARS, LAMB (per-layer norms).
ELEMENTWISE_MXNET_RULES = ('SGD', 'NAG', 'Signum', 'FTML', 'DCASGD', 'Adam', 'AdaGrad',
                           'RMSProp', 'AdaDelta', 'Ftrl', 'Adamax')


def is_elementwise(optimizer):
    """Whether `optimizer` may update a bucket of arrays in one call with the same result as
    one call per array: one of :data:`ELEMENTWISE_MXNET_RULES` or of this module's rules
    (exactly those classes: a subclass may change the update), or any object whose
    ``elementwise`` attribute is True (a user's rule that says so)."""
    flag = getattr(optimizer, 'elementwise', None)
    if flag is not None:
        return flag is True
    cls = type(optimizer)
    if cls in (StalenessAwareSGD, DCASGD):
        return True
    return cls.__module__ == 'mxnet.optimizer.optimizer' and \
        cls.__name__ in ELEMENTWISE_MXNET_RULES


def with_parameter_multipliers(optimizer):
    """`optimizer` as the servers must get it: with gluon Parameters' ``lr_mult`` and
    ``wd_mult`` in its own tables.

    ``gluon.Trainer`` gives the optimizer ``param_dict`` (index -> Parameter), which MXNet's
    pickling drops (``Optimizer.__getstate__``), so MXNet's own dist stores update every
    parameter with multipliers 1 on the servers (GluonCV's ``wd_mult = 0`` on biases and
    BatchNorm is lost).  The copy returned carries them as ``lr_mult[index]`` and
    ``wd_mult[index]``, which the servers read; multipliers changed after ``set_optimizer``
    do not reach the servers.  Without ``param_dict`` the optimizer itself is returned.
    """
    params = getattr(optimizer, 'param_dict', None) or {}
    if not params:
        return optimizer
    import copy
    sent = copy.copy(optimizer)
    sent.lr_mult = dict(optimizer.lr_mult)
    sent.wd_mult = dict(optimizer.wd_mult)
    for index, param in params.items():
        sent.lr_mult[index] = float(param.lr_mult)
        sent.wd_mult[index] = float(param.wd_mult)
    return sent


def server_multipliers(optimizer, index):
    """``(lr_mult, wd_mult)`` a server applies to key `index`: MXNet's ``_get_lrs`` and
    ``_get_wds`` without ``param_dict`` (which servers never have)."""
    names = getattr(optimizer, 'idx2name', None) or {}

    def one(table):
        if index in table:
            return float(table[index])
        if index in names:
            return float(table.get(names[index], 1.0))
        return 1.0
    return one(optimizer.lr_mult), one(optimizer.wd_mult)

