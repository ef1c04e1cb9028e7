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
``docs/update_rules.md``; :mod:`mxnet_ssp.reference` is a NumPy reference of the same rules.

Importing this module imports MXNet, registers the names ``'stalenessawaresgd'``, ``'sasgd'``
and ``'dcasgd_pw'`` with ``mx.optimizer`` and makes MXNet's own dist stores refuse these rules
in ``set_optimizer`` (:func:`_refuse_on_native_dist_stores`).
"""
import math
import numbers
import warnings

import mxnet as mx
# In MXNet's server processes ``import mxnet`` has not returned when the servers
# unpickle these rules, so the ``mx.nd`` alias does not exist yet: use the module.
from mxnet import ndarray as nd

__all__ = ['WorkerAwareOptimizer', 'StalenessAwareSGD', 'DCASGD', 'StalenessRequiredError',
           'STALENESS_POLICIES', 'is_worker_aware']

STALENESS_POLICIES = ('inverse', 'average', 'none')

STORES_THAT_REPORT = ('dist_async with mxnet_ssp imported, dist_ssp, dist_dssp, '
                      'dist_softsync')


class StalenessRequiredError(RuntimeError):
    """A worker-aware update rule was called through MXNet's plain ``update``."""


def _check_number(name, value, low=None, high=None, low_open=False, high_open=False):
    """`value` as a float if it is a finite number in the range, else ValueError naming it."""
    lo = '' if low is None else ('(' if low_open else '[') + repr(low)
    hi = '' if high is None else repr(high) + (')' if high_open else ']')
    if low is not None and high is not None:
        accepted = '%s, %s' % (lo, hi)
    elif low is not None:
        accepted = '%s, inf)' % lo
    else:
        accepted = '(-inf, %s' % hi
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise ValueError('%s=%r is not accepted: it must be a number in %s'
                         % (name, value, accepted))
    return float(value)


def is_worker_aware(optimizer):
    """Whether `optimizer` needs the sender of each gradient: the interface of
    :class:`WorkerAwareOptimizer` (``prepare_grad`` and ``apply``), also in classes of
    its own.  The store then runs in slot mode and the servers use that interface."""
    return callable(getattr(optimizer, 'prepare_grad', None)) and callable(
        getattr(optimizer, 'apply', None))


def _is_worker_node():
    import ctypes
    from mxnet.base import _LIB, check_call
    is_worker = ctypes.c_int()
    check_call(_LIB.MXKVStoreIsWorkerNode(ctypes.byref(is_worker)))
    return bool(is_worker.value)


def _refuse_on_native_dist_stores():
    """Make MXNet's own dist stores refuse worker-aware rules before they send them.

    ``mxnet.kvstore.KVStore.set_optimizer`` pickles the optimizer for servers that would call
    its plain ``update`` (no sender, no staleness).  Wrapping that one method is the only
    change mxnet-ssp makes to MXNet's classes; mxnet-ssp's stores send a
    :class:`mxnet_ssp.channel.UpdaterSpec` through it, which is not worker-aware.
    """
    from mxnet.kvstore.kvstore import KVStore
    native = KVStore.set_optimizer
    if getattr(native, 'refuses_worker_aware', False):
        return

    def set_optimizer(self, optimizer):
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
    KVStore.set_optimizer = set_optimizer


_refuse_on_native_dist_stores()


class WorkerAwareOptimizer(mx.optimizer.Optimizer):
    """Base of update rules that need the sender and staleness of each gradient.

    On an mxnet-ssp store the servers call :meth:`prepare_grad` once per received gradient and
    :meth:`apply` once per weight update (once per gradient in ASP; once per c gradients in
    n-softsync, with the mean of the c prepared gradients).  All arrays are float32 NDArrays
    of one shape (the servers store them flattened).

    Parameters
    ----------
    momentum : float, in [0, 1)
        Momentum applied to the prepared (for DC-ASGD: compensated) gradient, MXNet's SGD
        convention: ``mom = momentum * mom - lr * g; weight += mom``.
    **kwargs
        Passed to :class:`mxnet.optimizer.Optimizer` (``learning_rate``, ``wd``,
        ``rescale_grad``, ``clip_gradient``, ``lr_scheduler``, ...).

    Attributes
    ----------
    needs_backup : bool
        True when :meth:`prepare_grad` uses ``backup`` (what the sender last pulled); when
        False the servers may pass ``None`` and need not keep per-worker copies.
    uses_grad_staleness : bool
        True when :meth:`prepare_grad` uses its optional ``staleness`` argument (the
        staleness of that one gradient); see :class:`StalenessAwareSGD`.
    """

    needs_backup = False
    uses_grad_staleness = False

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = _check_number('momentum', momentum, 0.0, 1.0, high_open=True)

    # -- state -------------------------------------------------------------------------------
    def create_state(self, index, weight):
        """Per-key state: a tuple whose first item is the momentum buffer (or None)."""
        return (self._zeros_like(weight) if self.momentum > 0 else None,)

    @staticmethod
    def _zeros_like(weight):
        return nd.zeros(weight.shape, weight.context, dtype=weight.dtype)

    # -- the two steps -----------------------------------------------------------------------
    def prepare_grad(self, index, weight, grad, state, backup=None, staleness=None):
        """One received gradient -> the gradient to accumulate (a new NDArray).

        ``rescale_grad``, then ``clip_gradient``, then ``+ wd * weight`` (MXNet's SGD
        order).  Subclasses add their own terms.  `grad` is neither modified nor kept.
        """
        g = self._loss_grad(grad)
        self._add_wd(index, weight, g)
        return g

    def apply(self, index, weight, grad, state, staleness):
        """Update `weight` in place with the (possibly averaged) prepared gradient `grad`.

        `staleness` is the gradient's tau, or the mean tau of the gradients averaged into
        `grad`.  The learning rate is ``self._get_lr(index)`` (so ``lr_mult``, schedulers and
        ``set_learning_rate`` apply) times :meth:`_lr_factor`.
        """
        self._update_count(index)
        lr = self._get_lr(index) * self._lr_factor(index, state, staleness)
        self._step(weight, grad, state[0], lr)

    def _lr_factor(self, index, state, staleness):  # pylint: disable=unused-argument
        return 1.0

    # -- MXNet's plain path ------------------------------------------------------------------
    def update(self, index, weight, grad, state):
        raise StalenessRequiredError(
            '%s needs an mxnet-ssp store that reports staleness (%s); it was used on a store '
            'that updates locally' % (type(self).__name__, STORES_THAT_REPORT))

    def update_multi_precision(self, index, weight, grad, state):
        self.update(index, weight, grad, state)

    # -- helpers -----------------------------------------------------------------------------
    def _loss_grad(self, grad):
        """``clip(rescale_grad * grad)`` as a new array (never `grad` itself)."""
        if self.rescale_grad != 1.0:
            g = grad * self.rescale_grad
        else:
            g = grad.copy()
        if self.clip_gradient is not None and self.clip_gradient > 0:
            nd.clip(g, -self.clip_gradient, self.clip_gradient, out=g)
        return g

    def _add_wd(self, index, weight, g):
        wd = self._get_wd(index)
        if wd != 0.0:
            g += wd * weight

    def _step(self, weight, grad, mom, lr):
        """``weight -= lr * grad``, or with momentum ``mom = m*mom - lr*grad; weight += mom``."""
        if self.momentum > 0:
            if mom is None:
                raise ValueError('momentum=%r but the state of this key has no momentum buffer '
                                 '(was it created by another optimizer?)' % self.momentum)
            nd.sgd_mom_update(weight, grad, mom, lr=lr, momentum=self.momentum, wd=0.0,
                                 rescale_grad=1.0, clip_gradient=-1.0, out=weight)
        else:
            nd.sgd_update(weight, grad, lr=lr, wd=0.0, rescale_grad=1.0,
                             clip_gradient=-1.0, out=weight)

    @staticmethod
    def _check_staleness(staleness):
        if staleness is None or isinstance(staleness, bool) \
                or not isinstance(staleness, numbers.Real) \
                or not math.isfinite(staleness) or staleness < 0:
            raise ValueError('staleness=%r is not accepted: it must be a number >= 0 (the '
                             "gradient's tau, or the mean tau of the gradients of this update)"
                             % (staleness,))
        return float(staleness)


class StalenessAwareSGD(WorkerAwareOptimizer):
    """SGD with a staleness-dependent learning rate (``'sasgd'``).

    ``alpha0 = self._get_lr(index)`` (the learning rate for this key, with multipliers and
    schedules), ``tau`` a gradient's staleness (weight versions of this key applied since
    the sender last pulled it).

    Parameters
    ----------
    learning_rate : float
        alpha0: the learning rate for staleness-free (synchronous) SGD.
    momentum : float, in [0, 1)
    staleness_lr : {'inverse', 'average', 'none'}
        * ``'inverse'`` (Zhang et al. 2016, Eq. 3): each gradient is applied with
          ``alpha0 / tau`` (``alpha0`` when ``tau == 0``).  In n-softsync (Eq. 2) every
          gradient of the batch gets its own ``1/max(tau, 1)``: the servers pass the
          gradient's tau to ``prepare_grad(..., staleness=tau)``, which scales the prepared
          gradient, and ``apply`` then uses ``alpha0``.  If the servers do not pass it,
          ``apply`` divides by ``max(1, mean tau)`` of the batch instead (exact in ASP).
        * ``'average'`` (Rudra): ``alpha0 / max(1, <sigma>)`` where ``<sigma>`` is the mean
          staleness of the gradients that make up the update (the vector-clock average of
          the Rudra paper, passed to ``apply``), averaged over the last `staleness_window`
          updates of this key.  With the default window 1 this is exactly Rudra's
          per-update ``<sigma>``; in ASP (one gradient per update) it then equals
          ``'inverse'``, and a window of a few updates per worker gives Rudra's smoother
          ``alpha0 / n``.
        * ``'none'``: ``alpha0`` whatever the staleness: plain ASGD / Downpour.
    staleness_window : int, >= 1
        Number of updates averaged by ``'average'`` (ignored by the other policies).
    **kwargs
        ``wd``, ``rescale_grad``, ``clip_gradient``, ``lr_scheduler``, ... as for MXNet's SGD.

    State per key: ``(momentum buffer or None, recent staleness list or None, pending)``:
    the staleness of the last `staleness_window` updates (``'average'`` with a window > 1)
    and, for ``'inverse'``, ``pending = [gradients scaled by their own tau, gradients not
    scaled]`` since the last update (plain Python objects, so the state pickles as is).
    """

    def __init__(self, learning_rate=None, momentum=0.0, staleness_lr='inverse',
                 staleness_window=1, **kwargs):
        super().__init__(momentum=momentum, learning_rate=learning_rate, **kwargs)
        if staleness_lr not in STALENESS_POLICIES:
            raise ValueError('staleness_lr=%r is not accepted: it must be one of %s'
                             % (staleness_lr, ', '.join(repr(p) for p in STALENESS_POLICIES)))
        if isinstance(staleness_window, bool) or not isinstance(staleness_window,
                                                                numbers.Integral) \
                or staleness_window < 1:
            raise ValueError('staleness_window=%r is not accepted: it must be an integer >= 1'
                             % (staleness_window,))
        self.staleness_lr = staleness_lr
        self.staleness_window = int(staleness_window)
        self.uses_grad_staleness = staleness_lr == 'inverse'

    def create_state(self, index, weight):
        mom = self._zeros_like(weight) if self.momentum > 0 else None
        recent = [] if self.staleness_lr == 'average' and self.staleness_window > 1 else None
        pending = [0, 0] if self.staleness_lr == 'inverse' else None
        return (mom, recent, pending)

    def prepare_grad(self, index, weight, grad, state, backup=None, staleness=None):
        """``clip(rescale * grad) + wd * weight``; for ``'inverse'`` with `staleness` given,
        also times ``1 / max(tau, 1)`` (Eq. 2 of Zhang et al.: each gradient its own rate)."""
        g = super().prepare_grad(index, weight, grad, state, backup)
        if self.staleness_lr == 'inverse':
            counts = state[2]
            if staleness is None:
                counts[1] += 1
            else:
                tau = self._check_staleness(staleness)
                if tau > 1.0:
                    g *= 1.0 / tau
                counts[0] += 1
        return g

    def _lr_factor(self, index, state, staleness):
        policy = self.staleness_lr
        if policy == 'none':
            return 1.0
        tau = self._check_staleness(staleness)
        if policy == 'inverse':
            counts = state[2]
            scaled, unscaled = counts
            counts[:] = [0, 0]
            if scaled and unscaled:
                raise ValueError(
                    'StalenessAwareSGD: %d gradients of this update of key %r were prepared '
                    'with their staleness and %d without; pass staleness to prepare_grad for '
                    'all of them or for none' % (scaled, index, unscaled))
            if scaled:
                return 1.0          # each gradient already carries 1 / max(tau, 1)
            return 1.0 / max(1.0, tau)
        # 'average'
        recent = state[1] if len(state) > 1 else None
        if recent is not None:
            recent.append(tau)
            del recent[:-self.staleness_window]
            tau = sum(recent) / len(recent)
        return 1.0 / max(1.0, tau)


class DCASGD(WorkerAwareOptimizer):
    """Delay-Compensated ASGD with a backup per worker (``'dcasgd_pw'``).

    Zheng et al., ICML 2017, Algorithm 2: the server compensates the gradient ``g`` that
    worker m computed on ``w_bak(m)`` (what m last pulled) when it arrives at weight ``w``::

        g_c = g + lambda_t * g * g * (w - w_bak(m))           (elementwise)
        w  <- w - lr * (g_c + wd * w)                          (or with momentum on it)

    where ``g = clip(rescale_grad * grad)``.  DC-ASGD-c: ``lambda_t = lamda``.  DC-ASGD-a
    (Section 6): ``MeanSquare <- m * MeanSquare + (1 - m) * g * g`` (elementwise, per key,
    updated with every received gradient before it is compensated) and
    ``lambda_t = lamda / (sqrt(MeanSquare) + epsilon)``.

    Parameters
    ----------
    learning_rate : float
        eta.
    lamda : float, >= 0
        lambda (DC-ASGD-c) or lambda0 (DC-ASGD-a); 0 is plain ASGD.  Spelled as in MXNet.
    adaptive : bool
        False: DC-ASGD-c.  True: DC-ASGD-a.
    mean_square_decay : float, in [0, 1)
        m of MeanSquare (DC-ASGD-a only).
    epsilon : float, > 0
        Added to ``sqrt(MeanSquare)`` (DC-ASGD-a only); the paper uses 1e-7.
    momentum : float, in [0, 1)
        Momentum on the compensated gradient.

    State per key: ``(momentum buffer or None, MeanSquare or None)``.  The per-worker
    backups are not state of this object: the servers keep them and pass the sender's as
    ``backup``.
    """

    needs_backup = True

    def __init__(self, learning_rate=None, lamda=2.0, adaptive=False, mean_square_decay=0.95,
                 epsilon=1e-7, momentum=0.0, **kwargs):
        super().__init__(momentum=momentum, learning_rate=learning_rate, **kwargs)
        self.lamda = _check_number('lamda', lamda, 0.0)
        if adaptive not in (True, False):
            raise ValueError('adaptive=%r is not accepted: it must be True (DC-ASGD-a) or '
                             'False (DC-ASGD-c)' % (adaptive,))
        self.adaptive = bool(adaptive)
        self.mean_square_decay = _check_number('mean_square_decay', mean_square_decay,
                                               0.0, 1.0, high_open=True)
        self.epsilon = _check_number('epsilon', epsilon, 0.0, low_open=True)

    def create_state(self, index, weight):
        mom = self._zeros_like(weight) if self.momentum > 0 else None
        mean_square = self._zeros_like(weight) if self.adaptive else None
        return (mom, mean_square)

    def prepare_grad(self, index, weight, grad, state, backup=None, staleness=None):
        """The delay-compensated gradient ``g + lambda_t*g*g*(weight - backup) + wd*weight``
        (updates MeanSquare for DC-ASGD-a).  `staleness` is not used."""
        if backup is None:
            raise ValueError('DCASGD.prepare_grad needs backup: the weights the sender last '
                             'pulled (the server keeps one copy per worker)')
        if backup.shape != weight.shape:
            raise ValueError('backup has shape %s but weight has shape %s'
                             % (backup.shape, weight.shape))
        g = self._loss_grad(grad)
        if self.adaptive or self.lamda != 0.0:
            gg = g * g
            if self.adaptive:
                mean_square = state[1]
                m = self.mean_square_decay
                mean_square *= m
                mean_square += (1.0 - m) * gg
                gg *= self.lamda / (nd.sqrt(mean_square) + self.epsilon)
            else:
                gg *= self.lamda
            gg *= weight - backup
            g += gg
        self._add_wd(index, weight, g)
        return g


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
_register('sasgd', StalenessAwareSGD)
# Not Optimizer.register(DCASGD): its class name would replace MXNet's own 'dcasgd'.
_register('dcasgd_pw', DCASGD)
