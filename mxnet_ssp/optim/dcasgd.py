"""Delay-Compensated ASGD with a backup of the weights per worker (``'dcasgd_pw'``).

Zheng et al., ICML 2017, Algorithm 2; MXNet's own ``mx.optimizer.DCASGD`` (``'dcasgd'``)
keeps one previous weight per key.  The formulas are in ``docs/update_rules.md``.
"""
import numpy as np
# In MXNet's server processes ``import mxnet`` has not returned when the servers
# unpickle these rules, so the ``mx.nd`` alias does not exist yet: use the module.
from mxnet import ndarray as nd

from ..core.names import ADAPTIVE_READINGS
from ..host_kernels import NDArrayOps, dcasgd_compensate, host_views, on_host, scalar_type
from .worker_aware import WorkerAwareOptimizer, check_number


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
        self.lamda = check_number('lamda', lamda, 0.0)
        if adaptive not in (True, False):
            raise ValueError('adaptive=%r is not accepted: it must be True (DC-ASGD-a) or '
                             'False (DC-ASGD-c)' % (adaptive,))
        self.adaptive = bool(adaptive)
        self.mean_square_decay = check_number('mean_square_decay', mean_square_decay,
                                               0.0, 1.0, high_open=True)
        self.epsilon = check_number('epsilon', epsilon, 0.0, low_open=True)
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

