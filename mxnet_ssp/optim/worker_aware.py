"""The base of the update rules that know the sender and the staleness of each gradient.

:class:`WorkerAwareOptimizer` is the two-step interface the mxnet-ssp servers drive
(``prepare_grad`` once per received gradient, ``apply`` once per weight update), with the
steps every rule shares: the loss gradient (``rescale_grad``, ``clip_gradient``), weight
decay, and the SGD or momentum step (on the arrays' memory through
:mod:`mxnet_ssp.host_kernels` for dense CPU arrays).  MXNet's plain ``update`` raises
:class:`StalenessRequiredError`.  The rules themselves: :mod:`.sasgd`, :mod:`.dcasgd`.
"""
import math
import numbers

import mxnet as mx
# In MXNet's server processes ``import mxnet`` has not returned when the servers
# unpickle these rules, so the ``mx.nd`` alias does not exist yet: use the module.
from mxnet import ndarray as nd

from ..host_kernels import host_views, momentum_step, on_host


STORES_THAT_REPORT = ('dist_async with mxnet_ssp imported, dist_ssp, dist_dssp, '
                      'dist_softsync')


class StalenessRequiredError(RuntimeError):
    """A worker-aware update rule was called through MXNet's plain ``update``."""


def check_number(name, value, low=None, high=None, low_open=False, high_open=False):
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
        self.momentum = check_number('momentum', momentum, 0.0, 1.0, high_open=True)

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

