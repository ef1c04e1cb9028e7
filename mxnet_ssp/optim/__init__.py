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
``docs/update_rules.md``; the NumPy oracle ``tests/oracle_optim.py`` is a NumPy reference of the same rules.

Importing this module imports MXNet and registers the names ``'stalenessawaresgd'``,
``'sasgd'`` and ``'dcasgd_pw'`` with ``mx.optimizer``.  It changes nothing of MXNet's: that
MXNet's own dist stores refuse these rules in ``set_optimizer`` is installed by ``import
mxnet_ssp`` (:func:`mxnet_ssp.ps.native.refuse_worker_aware_rules`).
"""
import math
import numbers
import warnings

import mxnet as mx
import numpy as np
# In MXNet's server processes ``import mxnet`` has not returned when the servers
# unpickle these rules, so the ``mx.nd`` alias does not exist yet: use the module.
from mxnet import ndarray as nd

from ..core.names import ADAPTIVE_READINGS, DCASGD_PW, SASGD, STALENESS_POLICIES
from ..host_kernels import (NDArrayOps, dcasgd_compensate, host_views, momentum_step, on_host,
                           scalar_type)

__all__ = ['WorkerAwareOptimizer', 'StalenessAwareSGD', 'DCASGD', 'StalenessRequiredError',
           'STALENESS_POLICIES', 'ADAPTIVE_READINGS', 'is_worker_aware', 'one_call_update',
           'is_elementwise', 'with_parameter_multipliers', 'server_multipliers']


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


class _WorkBuffers:
    """Work arrays of an update rule, allocated once and shared by all keys.

    A server updates one key at a time, so a rule needs its intermediate arrays for one key
    at a time: each named buffer is one flat array as large as the largest key seen so far,
    and a key gets a view of its first elements in the key's shape (cached per shape).  MXNet
    orders the operations on views of one buffer as on the buffer itself, so reusing a
    buffer for the next key waits for the operations of the previous one.  Not pickled: a
    copy starts empty and allocates on first use.
    """

    def __init__(self):
        self._flat = {}           # (name, context, dtype) -> flat NDArray
        self._views = {}          # (name, context, dtype, shape) -> view of the flat array

    def get(self, name, like):
        """Buffer `name` with the shape, context and dtype of `like` (contents undefined,
        except ``'zeros'``, which is all zeros and must never be written)."""
        flat_key = (name, like.context, like.dtype)
        key = flat_key + (like.shape,)
        view = self._views.get(key)
        if view is None:
            size = like.size
            flat = self._flat.get(flat_key)
            if flat is None or flat.size < size:
                flat = nd.zeros((size,), like.context, dtype=like.dtype)
                self._flat[flat_key] = flat
                # views of the smaller array would keep it alive
                for old in [k for k in self._views if k[:3] == flat_key]:
                    del self._views[old]
            view = flat[:size].reshape(like.shape)
            self._views[key] = view
        return view

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        self.__init__()


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
    uses_sender : bool
        True when :meth:`prepare_grad` needs its optional ``sender`` argument (the index of
        the worker that sent the gradient); see ``DCASGD(adaptive_reading='multiverso')``.
    """

    needs_backup = False
    uses_grad_staleness = False
    #: the step (and a rule's own passes) as NumPy on dense float32/float64 CPU arrays'
    #: memory (:mod:`.host_kernels`); False: MXNet's kernels (set on an instance to force them)
    host_kernels = False
    uses_sender = False

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
    def prepare_grad(self, index, weight, grad, state, backup=None, staleness=None, sender=None):
        """One received gradient -> the gradient to accumulate (a new NDArray).

        ``rescale_grad``, then ``clip_gradient``, then ``+ wd * weight`` (MXNet's SGD
        order).  Subclasses add their own terms.  `grad` is neither modified nor kept.
        `staleness` and `sender` are passed only to rules that say they use them
        (``uses_grad_staleness``, ``uses_sender``).
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

    def apply_one(self, index, weight, grad, state, backup=None, staleness=None, sender=None):
        """A gradient that is an update on its own (ASP): :meth:`prepare_grad` then
        :meth:`apply`, which is what this default does.  Rules may override it to update
        `weight` without the intermediate array (:class:`DCASGD` does); the result must be
        the same.  `staleness` is the gradient's tau.
        """
        kwargs = {}
        if self.uses_grad_staleness:
            kwargs['staleness'] = staleness
        if self.uses_sender:
            kwargs['sender'] = sender
        g = self.prepare_grad(index, weight, grad, state, backup, **kwargs)
        self.apply(index, weight, g, state, staleness)

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
        if self.momentum > 0 and mom is None:
            raise ValueError('momentum=%r but the state of this key has no momentum buffer '
                             '(was it created by another optimizer?)' % self.momentum)
        if self.host_kernels and on_host(weight, grad):
            # 'p' is free here: the prepared gradient is never in it
            arrays = [weight, grad, self._work('p', weight)]
            if self.momentum > 0:
                arrays.append(mom)
            views = host_views(*arrays)
            momentum_step(views[0], views[1], views[3] if self.momentum > 0 else None,
                          views[2], lr, self.momentum)
            return
        if self.momentum > 0:
            nd.sgd_mom_update(weight, grad, mom, lr=lr, momentum=self.momentum, wd=0.0,
                                 rescale_grad=1.0, clip_gradient=-1.0, out=weight)
        else:
            nd.sgd_update(weight, grad, lr=lr, wd=0.0, rescale_grad=1.0,
                             clip_gradient=-1.0, out=weight)

    def _work(self, name, like):
        """Work buffer `name` shaped like `like`, shared by all keys (:class:`_WorkBuffers`)."""
        work = self.__dict__.get('_work_buffers')
        if work is None:
            work = self._work_buffers = _WorkBuffers()
        return work.get(name, like)

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

    def prepare_grad(self, index, weight, grad, state, backup=None, staleness=None, sender=None):
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
    (Section 6): ``MeanSquare <- m * MeanSquare + (1 - m) * g * g`` (elementwise, updated
    with every received gradient before it is compensated) and, in the paper's reading
    (``adaptive_reading='paper'``, the default), ``lambda_t = lamda / (sqrt(MeanSquare) +
    epsilon)`` with one MeanSquare per key; in the reading of Microsoft's Multiverso
    ``DCASGDUpdater`` (``'multiverso'``), ``lambda_t = lamda / sqrt(MeanSquare + epsilon)``
    with one MeanSquare per key *and worker*, updated with that worker's gradients only.

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
        DC-ASGD-a only: added to ``sqrt(MeanSquare)`` (``'paper'``; the paper uses 1e-7) or to
        MeanSquare under the root (``'multiverso'``; Multiverso hard-codes 1e-10).
    adaptive_reading : {'paper', 'multiverso'}
        DC-ASGD-a only: which reading of lambda_t and MeanSquare (above).  ``'multiverso'``
        needs the sender of each gradient, which the mxnet-ssp servers pass
        (``uses_sender``).
    momentum : float, in [0, 1)
        Momentum on the compensated gradient.

    State per key: ``(momentum buffer or None, MeanSquare)``: MeanSquare is None for
    DC-ASGD-c, an NDArray for ``'paper'`` and a dict ``{sender: NDArray}`` for
    ``'multiverso'`` (created at the sender's first gradient).  The per-worker backups are not
    state of this object: the servers keep them and pass the sender's as ``backup``.  The
    intermediate arrays are work buffers shared by all keys (allocated once, not pickled).
    """

    needs_backup = True
    host_kernels = True

    def __init__(self, learning_rate=None, lamda=2.0, adaptive=False, mean_square_decay=0.95,
                 epsilon=1e-7, momentum=0.0, adaptive_reading='paper', **kwargs):
        super().__init__(momentum=momentum, learning_rate=learning_rate, **kwargs)
        self.lamda = _check_number('lamda', lamda, 0.0)
        if adaptive not in (True, False):
            raise ValueError('adaptive=%r is not accepted: it must be True (DC-ASGD-a) or '
                             'False (DC-ASGD-c)' % (adaptive,))
        self.adaptive = bool(adaptive)
        self.mean_square_decay = _check_number('mean_square_decay', mean_square_decay,
                                               0.0, 1.0, high_open=True)
        self.epsilon = _check_number('epsilon', epsilon, 0.0, low_open=True)
        if not isinstance(adaptive_reading, str) or adaptive_reading not in ADAPTIVE_READINGS:
            raise ValueError(
                "adaptive_reading=%r is not accepted: it must be 'paper' (lamda / "
                "(sqrt(MeanSquare) + epsilon), one MeanSquare per key) or 'multiverso' (lamda / "
                "sqrt(MeanSquare + epsilon), one MeanSquare per key and worker)"
                % (adaptive_reading,))
        self.adaptive_reading = adaptive_reading
        self.uses_sender = self.adaptive and adaptive_reading == 'multiverso'

    def create_state(self, index, weight):
        mom = self._zeros_like(weight) if self.momentum > 0 else None
        if not self.adaptive:
            mean_square = None
        elif self.uses_sender:
            mean_square = {}
        else:
            mean_square = self._zeros_like(weight)
        return (mom, mean_square)

    def prepare_grad(self, index, weight, grad, state, backup=None, staleness=None, sender=None):
        """The delay-compensated gradient ``g + lambda_t*g*g*(weight - backup) + wd*weight``
        as a new array (updates MeanSquare for DC-ASGD-a).  `staleness` is not used; `sender`
        is needed by ``adaptive_reading='multiverso'``."""
        self._check_backup(weight, backup)
        out = nd.empty(weight.shape, weight.context, dtype=weight.dtype)
        prepared = self._prepare_into(index, weight, grad, state, backup, sender, out)
        if prepared is not out:                 # `grad` or a work buffer: not ours to return
            prepared.copyto(out)
        return out

    def apply_one(self, index, weight, grad, state, backup=None, staleness=None, sender=None):
        """:meth:`prepare_grad` then :meth:`apply` for one gradient (ASP), with the same
        kernels and the same result, but the prepared gradient goes to a work buffer instead
        of a new array."""
        self._check_backup(weight, backup)
        prepared = self._prepare_into(index, weight, grad, state, backup, sender,
                                      self._work('prepared', weight))
        self.apply(index, weight, prepared, state, staleness)

    def _prepare_into(self, index, weight, grad, state, backup, sender, out):
        """The prepared gradient, written to `out` -- or, when there is nothing to add to the
        loss gradient, that gradient itself (`grad` or a work buffer: read it only).

        One definition for every device: dense float32/float64 CPU arrays run it as NumPy
        passes on the arrays' memory (:mod:`.host_kernels`: no array allocated after the first
        gradient of a key or sender, several times faster than MXNet's CPU kernels), others
        (a GPU's, float16) as the same operations in MXNet (:class:`NDArrayOps`).  Passes over
        the key's elements: ``g = clip(rescale_grad * grad)`` (0-2), the compensation
        (:func:`dcasgd_compensate`), then ``out = g_c + wd * weight`` (0 or 2)."""
        clip = self.clip_gradient is not None and self.clip_gradient > 0
        rescale = self.rescale_grad != 1.0
        compensate = self.adaptive or self.lamda != 0.0
        wd = self._get_wd(index)
        arrays = [weight, grad, backup, out]
        if rescale or clip:
            arrays.append(self._work('loss_grad', weight))
        if compensate or wd != 0.0:
            arrays.append(self._work('p', weight))
        if self.adaptive:
            arrays.append(self._mean_square(state, weight, sender))
        if self.host_kernels and on_host(*arrays):
            ops, views = np, host_views(*arrays)
        else:
            ops, views = NDArrayOps, list(arrays)
        w, g, b, o = views[:4]
        rest = views[4:]
        f = scalar_type(o)
        result = grad
        if rescale or clip:
            g_in, g = g, rest.pop(0)
            if rescale:
                ops.multiply(g_in, f(self.rescale_grad), out=g)
            else:
                ops.copyto(g, g_in)
            if clip:
                c = f(self.clip_gradient)
                ops.clip(g, -c, c, out=g)
            result = arrays[4]
        p = rest.pop(0) if (compensate or wd != 0.0) else None
        if compensate:
            dcasgd_compensate(g, w, b, o, p, self.lamda, self.adaptive, self.adaptive_reading,
                              mean_square=rest.pop(0) if self.adaptive else None,
                              decay=self.mean_square_decay, epsilon=self.epsilon, ops=ops)
            g, result = o, out
        if wd != 0.0:                           # out = g_c + wd * weight
            ops.multiply(w, f(wd), out=p)
            ops.add(g, p, out=o)
            result = out
        return result

    @staticmethod
    def _check_backup(weight, backup):
        if backup is None:
            raise ValueError('DCASGD.prepare_grad needs backup: the weights the sender last '
                             'pulled (the server keeps one copy per worker)')
        if backup.shape != weight.shape:
            raise ValueError('backup has shape %s but weight has shape %s'
                             % (backup.shape, weight.shape))

    def _mean_square(self, state, weight, sender):
        mean_square = state[1]
        if mean_square is None:
            raise ValueError('adaptive=True but the state of this key has no MeanSquare '
                             '(was it created by another optimizer?)')
        if not self.uses_sender:
            return mean_square
        if sender is None:
            raise ValueError("DCASGD(adaptive_reading='multiverso') keeps MeanSquare per "
                             'worker and needs the sender of each gradient: '
                             'prepare_grad(..., sender=m) (the mxnet-ssp servers pass it)')
        ms = mean_square.get(sender)
        if ms is None:
            ms = mean_square[sender] = self._zeros_like(weight)
        return ms


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
