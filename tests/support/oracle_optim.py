"""Single-process NumPy reference of the update rules of :mod:`mxnet_ssp.optim`.

Pure NumPy (no MXNet).  Two parts:

* **Rules** -- :class:`SASGDRule` and :class:`DCASGDRule`, the formulas of
  ``docs/update_rules.md`` written from the papers, in float32 (default) or float64.
  :func:`rule_from_optimizer` builds the rule matching an ``optim`` optimizer object.
* **A scripted interleaving simulator** -- :class:`Reference`: one canonical weight per
  key, ``num_workers`` workers, per-key versions, per-worker pulled versions and backups,
  optional n-softsync batching.  The servers of an mxnet-ssp job driven with the same
  script must produce the same staleness sequence and (within float tolerance) the same
  weights.

Semantics of the simulator (per key; keys are independent):

* ``init(key, w0)``: version 0; every worker counts as having pulled version 0, and its
  backup is ``w0`` (DC-ASGD's ``w_bak(m) = w0``).
* ``pull(m, key)``: returns a copy of the current weight; worker m's pulled version becomes
  the current version and its backup the current weight.  In n-softsync a pull between two
  updates returns the current weight (pending gradients are not in it).
* ``push(m, key, grad)``: staleness ``tau = version - pulled_version[m]``, computed when the
  gradient arrives; the gradient is prepared (rescale, clip, wd, and for DC-ASGD the
  compensation with m's backup and the current weight) at once.  Every ``softsync_c``-th
  received gradient triggers one update with the mean of the prepared gradients and
  ``<sigma>`` = the mean tau of those gradients; the version then increases by 1.
  With ``softsync_c=1`` (ASP) every push is an update.
* ``set_learning_rate(lr)``: the base learning rate from now on (as
  ``Optimizer.set_learning_rate``).

Example::

    ref = Reference(SASGDRule(0.1, staleness_lr='inverse'), num_workers=2)
    ref.init(0, np.zeros(3))
    ref.pull(0, 0); ref.pull(1, 0)
    ref.push(0, 0, np.ones(3))      # -> 0
    ref.push(1, 0, np.ones(3))      # -> 1: applied with lr 0.1 / 1
    ref.log                         # [Received(key=0, sender=0, tau=0), Received(0, 1, 1)]

or, equivalently, ``Reference.run(rule, 2, {0: np.zeros(3)}, script)`` with
``script = [('pull', 0, 0), ('pull', 1, 0), ('push', 0, 0, g), ('push', 1, 0, g)]``.
"""
import collections

import numpy as np

from mxnet_ssp.core.names import ADAPTIVE_READINGS, STALENESS_POLICIES
from mxnet_ssp.core.staleness import KeyClock

__all__ = ['SASGDRule', 'DCASGDRule', 'Reference', 'Received', 'Update', 'rule_from_optimizer']

Received = collections.namedtuple('Received', 'key sender tau')
Received.__doc__ = 'One received gradient: its key, sender (worker index) and staleness tau.'
Update = collections.namedtuple('Update', 'key version senders taus mean_tau')
Update.__doc__ = ('One weight update: key, the version it produced, the senders and taus of '
                  'the gradients it averaged, and their mean tau.')


class _Rule:
    """Common parts: rescale/clip/wd, lr and wd multipliers per key, momentum."""

    needs_backup = False

    def __init__(self, learning_rate, momentum=0.0, wd=0.0, rescale_grad=1.0,
                 clip_gradient=None, lr_mult=None, wd_mult=None, dtype=np.float32):
        self.learning_rate = float(learning_rate)
        self.momentum = float(momentum)
        self.wd = float(wd)
        self.rescale_grad = float(rescale_grad)
        self.clip_gradient = clip_gradient
        self.lr_mult = dict(lr_mult or {})
        self.wd_mult = dict(wd_mult or {})
        self.dtype = np.dtype(dtype)

    def _f(self, x):
        """A Python float as a scalar of the rule's dtype."""
        return self.dtype.type(x)

    def lr(self, key):
        return self.learning_rate * self.lr_mult.get(key, 1.0)

    def wd_of(self, key):
        return self.wd * self.wd_mult.get(key, 1.0)

    def create_state(self, key, weight):
        return {'mom': np.zeros_like(weight) if self.momentum > 0 else None}

    def loss_grad(self, grad):
        """``clip(rescale_grad * grad)``."""
        g = np.asarray(grad, dtype=self.dtype) * self._f(self.rescale_grad)
        if self.clip_gradient is not None and self.clip_gradient > 0:
            c = self._f(self.clip_gradient)
            g = np.clip(g, -c, c)
        return g

    def add_wd(self, key, weight, g):
        wd = self.wd_of(key)
        return g + self._f(wd) * weight if wd != 0.0 else g

    def step(self, weight, state, delta):
        """Apply ``delta`` (= lr * gradient, already combined): SGD or MXNet-style momentum."""
        if self.momentum > 0:
            state['mom'] = self._f(self.momentum) * state['mom'] - delta
            return weight + state['mom']
        return weight - delta

    # The simulator calls prepare(key, weight, grad, state, backup, tau, sender=m) once per
    # gradient, then update(key, weight, state, prepared, taus) once per update; it returns the
    # new weight.


class SASGDRule(_Rule):
    """Staleness-aware SGD (Zhang et al. 2016 Eq. 2/3; Rudra's alpha0 / <sigma>).

    ``staleness_lr``: ``'inverse'`` -- update = ``alpha0 * mean_l(g_l / max(1, tau_l))``
    (per-gradient rates, Eq. 2; with ``per_gradient_staleness=False`` instead
    ``alpha0 / max(1, mean tau) * mean(g)``, what the servers do when they do not pass each
    gradient's tau to ``prepare_grad``);  ``'average'`` -- ``alpha0 / max(1, <sigma>) * mean(g)``
    with ``<sigma>`` the mean over the last `staleness_window` updates of each update's mean
    tau;  ``'none'`` -- ``alpha0 * mean(g)``.
    """

    def __init__(self, learning_rate, momentum=0.0, staleness_lr='inverse', staleness_window=1,
                 per_gradient_staleness=True, **kwargs):
        super().__init__(learning_rate, momentum=momentum, **kwargs)
        if staleness_lr not in STALENESS_POLICIES:
            raise ValueError('staleness_lr=%r is not accepted' % (staleness_lr,))
        self.staleness_lr = staleness_lr
        self.staleness_window = int(staleness_window)
        self.per_gradient_staleness = bool(per_gradient_staleness)

    def create_state(self, key, weight):
        state = super().create_state(key, weight)
        state['recent'] = []
        return state

    def prepare(self, key, weight, grad, state, backup, tau, sender=None):
        return self.add_wd(key, weight, self.loss_grad(grad))

    def update(self, key, weight, state, prepared, taus):
        alpha0 = self.lr(key)
        n = len(prepared)
        mean_tau = sum(taus) / float(len(taus))
        if self.staleness_lr == 'inverse' and self.per_gradient_staleness:
            total = sum(g * self._f(1.0 / max(1.0, t)) for g, t in zip(prepared, taus))
            delta = self._f(alpha0) * (total / self._f(n))
        else:
            mean_g = sum(prepared) / self._f(n)
            if self.staleness_lr == 'none':
                factor = 1.0
            elif self.staleness_lr == 'inverse':
                factor = 1.0 / max(1.0, mean_tau)
            else:
                recent = state['recent']
                recent.append(mean_tau)
                del recent[:-self.staleness_window]
                factor = 1.0 / max(1.0, sum(recent) / len(recent))
            delta = self._f(alpha0 * factor) * mean_g
        return self.step(weight, state, delta)


class DCASGDRule(_Rule):
    """Delay-compensated ASGD with per-worker backups (Zheng et al. 2017, Algorithm 2).

    Per gradient g (after rescale/clip) from worker m with backup ``b``, at weight ``w``:
    ``lambda_t = lamda`` (-c) or, after ``MS = m*MS + (1-m)*g*g``,
    ``lambda_t = lamda / (sqrt(MS) + epsilon)`` with one MS per key
    (-a, ``adaptive_reading='paper'``) or ``lambda_t = lamda / sqrt(MS + epsilon)`` with one
    MS per key and worker (-a, ``'multiverso'``); prepared gradient
    ``g + lambda_t*g*g*(w - b) + wd*w``.  Update: ``w -= lr * mean(prepared)`` (or momentum).

    The float32 operations are grouped as the MXNet kernels of :class:`mxnet_ssp.optim.DCASGD`
    group them (``1 - m`` is computed in the rule's dtype, the compensation is
    ``g + (lamda * (g*g*(w - b))) / (sqrt(MS) + epsilon)``), so that the two agree to the
    last bit in float32; in float64 this is the same formula.
    """

    needs_backup = True

    def __init__(self, learning_rate, lamda=2.0, adaptive=False, mean_square_decay=0.95,
                 epsilon=1e-7, momentum=0.0, adaptive_reading='paper', **kwargs):
        super().__init__(learning_rate, momentum=momentum, **kwargs)
        if adaptive_reading not in ADAPTIVE_READINGS:
            raise ValueError('adaptive_reading=%r is not accepted' % (adaptive_reading,))
        self.lamda = float(lamda)
        self.adaptive = bool(adaptive)
        self.mean_square_decay = float(mean_square_decay)
        self.epsilon = float(epsilon)
        self.adaptive_reading = adaptive_reading

    def create_state(self, key, weight):
        state = super().create_state(key, weight)
        if not self.adaptive:
            state['mean_square'] = None
        elif self.adaptive_reading == 'multiverso':
            state['mean_square'] = {}           # sender -> MS, zeros at its first gradient
        else:
            state['mean_square'] = np.zeros_like(weight)
        return state

    def prepare(self, key, weight, grad, state, backup, tau, sender=None):
        g = self.loss_grad(grad)
        f = self._f
        if self.adaptive:
            m = f(self.mean_square_decay)
            per_worker = self.adaptive_reading == 'multiverso'
            if per_worker:
                if sender is None:
                    raise ValueError("adaptive_reading='multiverso' needs the sender")
                ms = state['mean_square'].get(sender)
                if ms is None:
                    ms = np.zeros_like(weight)
            else:
                ms = state['mean_square']
            lam, eps, one_m, diff = f(self.lamda), f(self.epsilon), f(1.0) - m, weight - backup
            if per_worker:      # as MXNet's rmsprop_update groups it
                ms = state['mean_square'][sender] = one_m * (g * g) + m * ms
                g = g + (lam * (g / np.sqrt(ms + eps))) * (diff * g)
            else:               # as MXNet's adam_update groups it
                ms = state['mean_square'] = m * ms + (one_m * g) * g
                g = g + (lam * ((g * g) * diff)) / (np.sqrt(ms) + eps)
        elif self.lamda != 0.0:
            g = g + f(self.lamda) * ((g * g) * (weight - backup))
        return self.add_wd(key, weight, g)

    def update(self, key, weight, state, prepared, taus):
        mean_g = sum(prepared) / self._f(len(prepared))
        return self.step(weight, state, self._f(self.lr(key)) * mean_g)


def rule_from_optimizer(opt, dtype=np.float32, per_gradient_staleness=True):
    """The reference rule for an :mod:`mxnet_ssp.optim` optimizer object (read, not imported).

    Copies learning rate, momentum, wd, rescale_grad, clip_gradient, integer-keyed
    ``lr_mult``/``wd_mult`` and the rule's own settings.  Learning-rate schedulers are not
    modelled (the reference uses ``opt.lr``).
    """
    common = dict(momentum=opt.momentum, wd=opt.wd, rescale_grad=opt.rescale_grad,
                  clip_gradient=opt.clip_gradient, dtype=dtype,
                  lr_mult={k: v for k, v in opt.lr_mult.items() if not isinstance(k, str)},
                  wd_mult={k: v for k, v in opt.wd_mult.items() if not isinstance(k, str)})
    kind = type(opt).__name__
    if kind == 'StalenessAwareSGD':
        return SASGDRule(opt.lr, staleness_lr=opt.staleness_lr,
                         staleness_window=opt.staleness_window,
                         per_gradient_staleness=per_gradient_staleness, **common)
    if kind == 'DCASGD' and hasattr(opt, 'adaptive'):
        return DCASGDRule(opt.lr, lamda=opt.lamda, adaptive=opt.adaptive,
                          mean_square_decay=opt.mean_square_decay, epsilon=opt.epsilon,
                          adaptive_reading=getattr(opt, 'adaptive_reading', 'paper'), **common)
    raise TypeError('no reference rule for %s.%s' % (type(opt).__module__, kind))


class _Key:
    def __init__(self, weight, clock, state):
        self.weight = weight
        self.clock = clock          # versions, pulls, this softsync round (KeyClock)
        self.state = state
        self.backup = [weight.copy() for _ in clock.pulled]
        self.pending = []           # this round's prepared gradients


class Reference:
    """Scripted interleaving simulator of a parameter server running `rule`.

    Parameters
    ----------
    rule : SASGDRule or DCASGDRule
    num_workers : int
        M; workers are 0 .. M-1.
    softsync_c : int
        Gradients per update: 1 for ASP, ``c = floor(lambda / n)`` for n-softsync.
    keep_history : bool
        Record the weights after every event in `history` (turn off for long runs).

    Attributes
    ----------
    log : list of Received
        One record per received gradient, in order.
    updates : list of Update
        One record per weight update.
    history : list of (event, {key: weight copy})
        The event (as a tuple) and all weights after it, one entry per event.
    """

    def __init__(self, rule, num_workers, softsync_c=1, keep_history=True):
        if int(num_workers) < 1:
            raise ValueError('num_workers=%r: need at least one worker' % (num_workers,))
        if int(softsync_c) < 1:
            raise ValueError('softsync_c=%r: need at least one gradient per update'
                             % (softsync_c,))
        self.rule = rule
        self.num_workers = int(num_workers)
        self.softsync_c = int(softsync_c)
        self.keep_history = bool(keep_history)
        self.log = []
        self.updates = []
        self.history = []
        self._keys = {}

    # -- events ------------------------------------------------------------------------------
    def init(self, key, weight):
        """Create `key` with initial value `weight` (every worker has pulled it)."""
        if key in self._keys:
            raise ValueError('key %r is already initialized' % (key,))
        w = np.array(weight, dtype=self.rule.dtype, copy=True)
        self._keys[key] = _Key(w, KeyClock(self.num_workers, self.softsync_c),
                               self.rule.create_state(key, w))
        self._record(('init', key))

    def pull(self, m, key):
        """Worker `m` pulls `key`: returns a copy of the current weight and records its backup."""
        k = self._key(key, m)
        k.clock.pulled_by(m)
        k.backup[m] = k.weight.copy()
        self._record(('pull', m, key))
        return k.weight.copy()

    def push(self, m, key, grad):
        """Worker `m` pushes `grad` for `key`; returns the gradient's staleness tau."""
        k = self._key(key, m)
        grad = np.asarray(grad)
        if grad.shape != k.weight.shape:
            raise ValueError('gradient of shape %s for key %r of shape %s'
                             % (grad.shape, key, k.weight.shape))
        tau, complete = k.clock.receive(m)
        self.log.append(Received(key, m, tau))
        k.pending.append(self.rule.prepare(key, k.weight, grad, k.state, k.backup[m], tau,
                                           sender=m))
        if complete:
            grads, k.pending = k.pending, []
            senders, taus = k.clock.advance()
            k.weight = np.asarray(self.rule.update(key, k.weight, k.state, grads, list(taus)),
                                  dtype=self.rule.dtype)
            self.updates.append(Update(key, k.clock.version, senders, taus, KeyClock.mean(taus)))
        self._record(('push', m, key))
        return tau

    def set_learning_rate(self, lr):
        """Base learning rate from now on."""
        self.rule.learning_rate = float(lr)
        self._record(('lr', lr))

    # -- views -------------------------------------------------------------------------------
    @property
    def weights(self):
        """{key: current weight} (copies)."""
        return {key: k.weight.copy() for key, k in self._keys.items()}

    def version(self, key):
        """Number of updates applied to `key`."""
        return self._keys[key].clock.version

    def pending(self, key):
        """Number of received gradients of `key` not yet applied (n-softsync)."""
        return len(self._keys[key].pending)

    # -- scripts -----------------------------------------------------------------------------
    def play(self, script):
        """Run events ``('push', m, key, grad)``, ``('pull', m, key)``, ``('lr', value)``.

        Returns the list of results: tau for a push, the weight for a pull, None for lr.
        """
        out = []
        for event in script:
            kind = event[0]
            if kind == 'push':
                out.append(self.push(event[1], event[2], event[3]))
            elif kind == 'pull':
                out.append(self.pull(event[1], event[2]))
            elif kind == 'lr':
                out.append(self.set_learning_rate(event[1]))
            else:
                raise ValueError('unknown event %r (expected push, pull or lr)' % (event,))
        return out

    @classmethod
    def run(cls, rule, num_workers, init, script, softsync_c=1):
        """New simulator, ``init`` ({key: weight}) applied in key order, then `script` played."""
        ref = cls(rule, num_workers, softsync_c=softsync_c)
        for key in sorted(init):
            ref.init(key, init[key])
        ref.play(script)
        return ref

    # -- internals ---------------------------------------------------------------------------
    def _key(self, key, m):
        if not 0 <= m < self.num_workers:
            raise ValueError('worker %r out of range 0..%d' % (m, self.num_workers - 1))
        try:
            return self._keys[key]
        except KeyError:
            raise KeyError('key %r was not initialized' % (key,)) from None

    def _record(self, event):
        if self.keep_history:
            self.history.append((event, self.weights))
