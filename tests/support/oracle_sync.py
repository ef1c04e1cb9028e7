"""SSP / DSSP synchronization decisions, as plain Python (no MXNet, no I/O).

Test oracle: the straightforward policy as it shipped before the decisions
became O(1) amortized, with the ``threshold`` mode added the same
straightforward way (a per-worker threshold, waiters scanned on every event).

This module is the specification of when a worker may go on.  It implements
Algorithm 1 (the server's OK-or-wait decision after each push) and
Algorithm 2 (the synchronization controller predicting r*) of Zhao et al.,
*Dynamic Stale Synchronous Parallel Distributed Training for Deep Learning*
(ICDCS 2019).  The network controller (:mod:`mxnet_ssp.controller.server`) feeds it
events and sends the releases it returns; tests and simulations drive it with
scripted timelines.

Conventions (the off-by-one, stated once)
-----------------------------------------
* ``t_p`` is the number of pushes (clocks) worker ``p`` has completed; all
  workers start at 0.  A push of worker ``p`` is counted when the controller
  receives it, and the worker reports it only after all of that iteration's
  gradients have been applied on the servers.
* After its ``t``-th push, worker ``p`` is *released* (gets OK, pulls and
  computes iteration ``t + 1``) when its lead ``L = t - t_slowest`` satisfies
  ``L <= sL``, or when it holds extra iterations granted by the controller.
  ``t_slowest`` is the smallest clock among the workers still in the job.
* Hence the lead at release is at most ``sL`` for SSP(sL); SSP(0) is lockstep:
  nobody starts iteration ``t + 1`` before everybody has pushed ``t`` times.
  Counted at an arbitrary instant (not at release), clocks may differ by one
  more, because a worker can push once more before it is held.
* ``bounded`` mode (default): a grant ``r*`` from Algorithm 2 means "run r*
  more iterations and stop at the r*-th push from now", exactly the point
  ``Sim_p[r*]`` Algorithm 2 chose; the current release uses one of them.  The
  search range is cut so that the lead at release never exceeds ``sU``.
* ``paper`` mode: Algorithm 1 verbatim.  ``r_p <- r*`` and OK is sent without
  decrementing (line 13-14), then each later push with ``r_p > 0`` decrements
  and gets OK (lines 3-5); when the grant runs out and ``p`` is still the
  fastest, it is granted again.  Under persistent heterogeneity the lead then
  grows without bound.
* ``threshold`` mode: each worker has its own threshold ``s_p``, ``sL`` at
  first and ``sL + r*`` after each call of the controller; a worker is
  released when its lead is at most ``s_p``, and a held worker waits until it
  is again.

Algorithm 2 is applied as written with two clarifications: the table A of the
two latest push timestamps is updated on *every* push of every worker (the
slowest worker never calls the controller, so updating A only inside the
controller would leave its entry empty), and when several workers share the
smallest clock the one predicted to push last is taken as "the slowest", since
the lead shrinks only once all of them have pushed.  Ties in the argmin pick
the smallest r (least staleness).  No grant (r* = 0) is given while either
worker has fewer than two timestamps, or while the slowest worker is stalled:
its last push is more than ``stall_factor`` of its latest interval old.
"""
from dataclasses import dataclass

__all__ = ['Release', 'SyncPolicy', 'predict_r_star', 'BOUNDED', 'PAPER', 'THRESHOLD']

BOUNDED = 'bounded'
PAPER = 'paper'
THRESHOLD = 'threshold'


@dataclass(frozen=True)
class Release:
    """An OK for one worker.

    Attributes
    ----------
    rank : int
        The worker released.
    clock : int
        Its push count at release (it now computes iteration ``clock + 1``).
    lead : int
        ``clock - t_slowest`` at release.
    t_slowest : int
        Smallest clock among workers in the job at release.  Every gradient
        of every worker up to this clock has been applied on the servers.
    granted : int
        r* returned by Algorithm 2 at this push (0 if it was not called).
    extra_left : int
        Extra iterations the worker still holds after this release.
    """
    rank: int
    clock: int
    lead: int
    t_slowest: int
    granted: int = 0
    extra_left: int = 0


def predict_r_star(a_p, a_slow, r_max):
    """Algorithm 2, line 4-9: the r in [0, r_max] minimizing predicted waiting.

    Parameters
    ----------
    a_p, a_slow : tuple of float
        ``(latest, second latest)`` push timestamps of worker p and of the
        slowest worker, in seconds on one clock.
    r_max : int
        Largest r to consider (>= 0).

    Returns
    -------
    int
        r*, the index of ``Sim_p[r]`` closest to any ``Sim_slowest[k]``,
        ``k in [0, r_max]``; ties go to the smallest r.
    """
    if r_max <= 0:
        return 0
    i_p = a_p[0] - a_p[1]
    i_slow = a_slow[0] - a_slow[1]
    sim_slow0 = a_slow[0] + i_slow
    sim_slow = [sim_slow0 + k * i_slow for k in range(r_max + 1)]
    best_r, best_gap = 0, None
    for r in range(r_max + 1):
        sim_p = a_p[0] + r * i_p
        gap = min(abs(s - sim_p) for s in sim_slow)
        if best_gap is None or gap < best_gap:
            best_r, best_gap = r, gap
    return best_r


class SyncPolicy:
    """The decision state of one job: clocks, timestamps, grants, waiters.

    Not thread-safe: one caller (the controller's event loop) drives it.
    Times are seconds on the caller's clock; clocks are iteration counts.

    Parameters
    ----------
    num_workers : int
        Workers in the job (ranks 0..num_workers-1), all at clock 0.
    s_lower, s_upper : int
        Staleness range; equal values give SSP(s).
    mode : {'bounded', 'paper', 'threshold'}
    stall_factor : float
        The slowest worker counts as stalled (no grant) when its last push is
        older than ``stall_factor`` times its latest iteration interval.
    """

    def __init__(self, num_workers, s_lower, s_upper, mode=BOUNDED, stall_factor=2.0):
        if num_workers < 1:
            raise ValueError('num_workers must be >= 1, got %r' % (num_workers,))
        if not 0 <= s_lower <= s_upper:
            raise ValueError('need 0 <= s_lower <= s_upper, got %r, %r' % (s_lower, s_upper))
        if mode not in (BOUNDED, PAPER, THRESHOLD):
            raise ValueError('mode must be %r, %r or %r, got %r'
                             % (BOUNDED, PAPER, THRESHOLD, mode))
        self.num_workers = num_workers
        self.s_lower = s_lower
        self.s_upper = s_upper
        self.r_max = s_upper - s_lower
        self.mode = mode
        self.stall_factor = stall_factor
        self.clocks = [0] * num_workers
        self.stamps = [[None, None] for _ in range(num_workers)]  # table A
        self.extra = [0] * num_workers                            # r_p
        self.threshold = [s_lower] * num_workers                  # s_p
        self.active = set(range(num_workers))
        self.waiting = {}                                          # rank -> granted at its push
        self.max_lead = 0
        self._slowest = 0                  # cached min clock of active workers (None: none left)

    # -- queries -----------------------------------------------------------
    def t_slowest(self):
        """Smallest clock among workers still in the job (None if none is)."""
        return self._slowest

    def _update_slowest(self):
        self._slowest = min((self.clocks[i] for i in self.active), default=None)

    def lead(self, rank):
        """Clock of `rank` minus the slowest clock."""
        slowest = self.t_slowest()
        return 0 if slowest is None else self.clocks[rank] - slowest

    def slowest_ranks(self):
        """Ranks in the job whose clock is the smallest, sorted."""
        slowest = self.t_slowest()
        return sorted(i for i in self.active if self.clocks[i] == slowest)

    # -- events ------------------------------------------------------------
    def on_push(self, rank, now):
        """Worker `rank` completed a push at time `now`.

        Returns
        -------
        list of Release
            Workers released by this event: `rank` itself if it may go on,
            and any waiting worker the advance of the slowest clock frees.
        """
        self._check_rank(rank)
        if rank in self.waiting:
            raise ValueError('worker %d pushed again before it was released' % rank)
        was_slowest = self.clocks[rank] == self._slowest
        self.clocks[rank] += 1
        if was_slowest:
            self._update_slowest()
        stamps = self.stamps[rank]
        stamps[1], stamps[0] = stamps[0], now
        releases = []
        decision = self._decide(rank, now)
        if decision is not None:
            releases.append(decision)
        releases.extend(self._release_waiters(exclude=rank))
        return releases

    def on_leave(self, rank):
        """Worker `rank` left the job (finished); it no longer holds others."""
        self._check_rank(rank)
        self.active.discard(rank)
        self.waiting.pop(rank, None)
        self._update_slowest()
        return self._release_waiters()

    # -- Algorithm 1 -------------------------------------------------------
    def _decide(self, p, now):
        lead = self.lead(p)
        if self.mode == THRESHOLD:
            if lead <= self.threshold[p]:
                return self._release(p, granted=0)
            granted = 0
            if self.clocks[p] == max(self.clocks[i] for i in self.active):
                granted = self._controller(p, lead, now)
                self.threshold[p] = min(self.s_lower + granted, self.s_upper)
                if lead <= self.threshold[p]:
                    return self._release(p, granted=granted)
            self.waiting[p] = granted
            return None
        if self.extra[p] > 0 and (self.mode == PAPER or lead <= self.s_upper):
            self.extra[p] -= 1                                     # lines 3-5
            return self._release(p, granted=0)
        if lead <= self.s_lower:                                   # lines 8-9
            return self._release(p, granted=0)
        granted = 0
        if self.clocks[p] == max(self.clocks[i] for i in self.active):  # line 11
            granted = self._controller(p, lead, now)               # line 12
            if granted > 0:                                        # lines 13-14
                self.extra[p] = granted if self.mode == PAPER else granted - 1
                return self._release(p, granted=granted)
        self.waiting[p] = granted                                  # line 17
        return None

    def _release_waiters(self, exclude=None):
        releases = []
        for q in sorted(self.waiting):
            if q == exclude:
                continue
            lead = self.lead(q)
            if lead <= self.threshold[q]:
                del self.waiting[q]
                releases.append(self._release(q, granted=0))
        return releases

    def _release(self, p, granted):
        lead = self.lead(p)
        if self.mode != PAPER and lead > self.s_upper:
            raise AssertionError('%s mode released worker %d at lead %d > sU=%d'
                                 % (self.mode, p, lead, self.s_upper))
        self.max_lead = max(self.max_lead, lead)
        return Release(rank=p, clock=self.clocks[p], lead=lead, t_slowest=self.t_slowest(),
                       granted=granted, extra_left=self.extra[p])

    # -- Algorithm 2 -------------------------------------------------------
    def _controller(self, p, lead, now):
        if self.mode == BOUNDED:
            r_max = min(self.r_max, self.s_upper - lead + 1)
        else:
            r_max = self.r_max
        if r_max <= 0:
            return 0
        a_p = self.stamps[p]
        if a_p[1] is None:
            return 0
        candidates = [i for i in self.slowest_ranks() if i != p]
        if not candidates:
            return 0
        predicted = {}
        for i in candidates:
            a_i = self.stamps[i]
            if a_i[0] is None or a_i[1] is None:
                return 0                      # no interval known for a slowest worker
            interval = a_i[0] - a_i[1]
            if now - a_i[0] > self.stall_factor * max(interval, 0.0):
                return 0                      # the slowest worker is stalled
            predicted[i] = a_i[0] + interval
        slowest = max(candidates, key=lambda i: (predicted[i], i))
        return predict_r_star(tuple(a_p), tuple(self.stamps[slowest]), r_max)

    def _check_rank(self, rank):
        if not 0 <= rank < self.num_workers:
            raise ValueError('rank %r is outside 0..%d' % (rank, self.num_workers - 1))
        if rank not in self.active:
            raise ValueError('worker %d already left the job' % rank)
