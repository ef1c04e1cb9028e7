"""SGD whose learning rate is divided by the staleness (``'sasgd'``).

Per gradient (Zhang et al., IJCAI 2016, Eq. 3) or by the average staleness of the gradients
of an update (Rudra, ``<sigma>``); the formulas are in ``docs/update_rules.md``.
"""
import numbers

from ..core.names import STALENESS_POLICIES
from .worker_aware import WorkerAwareOptimizer


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

