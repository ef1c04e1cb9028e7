"""The per-parameter clock of a parameter server that knows who sent each gradient.

In slot mode (see :mod:`mxnet_ssp.kvstore`) the servers keep, for every
parameter, the number of updates applied to it and the version each worker
last pulled.  From these follow the staleness of a gradient and, under
n-softsync, when an update happens.  This module is that bookkeeping and
nothing else: plain Python, no arrays.  The servers
(:class:`mxnet_ssp.server.updater.ServerOptimizer`, on MXNet arrays) and the NumPy
reference (``Reference`` of ``tests/support/oracle_optim.py``) each keep one
:class:`KeyClock` per parameter, so they cannot disagree on a tau or on which
gradients form an update.

Conventions
-----------
* A version counts the updates applied to the parameter; it starts at 0.
* Initialization counts as a pull of version 0 by every worker.
* A gradient's staleness is ``tau = version - pulled[sender]`` at the moment
  the server receives it, before any update it takes part in.
* An update gathers ``per_update`` gradients (1 for ASP; ``c = floor(M / n)``
  for n-softsync) and advances the version by one.  Its staleness, where a
  rule uses one number, is the mean tau of its gradients (Rudra's
  ``<sigma>``).
"""

__all__ = ['KeyClock']


class KeyClock:
    """Versions, pulls and softsync rounds of one parameter.

    Parameters
    ----------
    num_workers : int
        M; workers are 0 .. M-1.
    per_update : int
        Gradients per update (>= 1).

    Not thread-safe: the server calls it from its one update thread.
    """

    __slots__ = ('version', 'pulled', 'per_update', 'senders', 'taus')

    def __init__(self, num_workers, per_update=1):
        if int(per_update) < 1:
            raise ValueError('per_update=%r: need at least one gradient per update'
                             % (per_update,))
        self.version = 0
        self.pulled = [0] * int(num_workers)    # version each worker last pulled
        self.per_update = int(per_update)
        self.senders = []                       # this round's gradients, in arrival order
        self.taus = []

    def pulled_by(self, m):
        """Worker `m` now holds the current version."""
        self.pulled[m] = self.version

    def receive(self, m):
        """A gradient from worker `m` arrives: returns ``(tau, completes_update)``.

        When `completes_update` is true, call :meth:`advance` once the update
        is applied.
        """
        tau = self.version - self.pulled[m]
        self.senders.append(m)
        self.taus.append(tau)
        return tau, len(self.taus) >= self.per_update

    def advance(self):
        """Close the round: returns ``(senders, taus)`` of its gradients; the version grows by 1."""
        senders, taus = tuple(self.senders), tuple(self.taus)
        self.senders, self.taus = [], []
        self.version += 1
        return senders, taus

    @property
    def waiting(self):
        """Gradients received in this round and not yet applied."""
        return len(self.taus)

    @staticmethod
    def mean(taus):
        """The staleness of an update of several gradients: their mean tau (a float)."""
        return float(sum(taus)) / len(taus)

    def state(self):
        """A plain dict to save (see :meth:`restore`)."""
        return {'version': self.version, 'pulled': list(self.pulled),
                'senders': list(self.senders), 'taus': list(self.taus)}

    def restore(self, saved):
        """Take back what :meth:`state` returned (``senders`` may be missing: older saves)."""
        self.version = int(saved['version'])
        self.pulled = [int(v) for v in saved['pulled']]
        self.taus = [int(t) for t in saved['taus']]
        self.senders = list(saved.get('senders') or [None] * len(self.taus))
