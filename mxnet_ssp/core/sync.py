"""SSP / DSSP synchronization decisions, as plain Python (no MXNet, no I/O).

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
* ``threshold`` mode: a grant sets worker ``p``'s own staleness threshold
  ``s_p = sL + r*`` (at most ``sU``, the paper's ``s* = sL + r*``); every
  worker starts at ``s_p = sL``.  After a push, ``p`` is released when its lead
  is at most ``s_p``; otherwise, if it is the fastest, Algorithm 2 runs and
  sets ``s_p`` anew (``r* = 0``, a refused grant included, sets it back to
  ``sL``), and ``p`` is released if its lead is now at most ``s_p``, else it
  waits until the lead is back to ``s_p`` -- for a lead one above ``s_p``,
  until the slowest worker's next push (Figure 2), not until the lead is back
  to ``sL``.  A worker that is not the fastest keeps its ``s_p``.  The lead at
  release never exceeds ``sU``.  ``extra`` stays 0 in this mode;
  ``threshold`` holds each ``s_p`` (``sL`` in the other modes).

Algorithm 2 is applied as written with two clarifications: the table A of the
two latest push timestamps is updated on *every* push of every worker (the
slowest worker never calls the controller, so updating A only inside the
controller would leave its entry empty), and when several workers share the
smallest clock the one predicted to push last is taken as "the slowest", since
the lead shrinks only once all of them have pushed.  Ties in the argmin pick
the smallest r (least staleness).  No grant (r* = 0) is given while either
worker has fewer than two timestamps, or while the slowest worker is stalled:
its last push is more than ``stall_factor`` of its latest interval old.

Cost: every decision is O(1) amortized in the number of workers, whatever the
number of workers.  The clocks are kept as a histogram (clock -> workers at
it) with the smallest and largest clock maintained on push and leave, a held
worker is filed under the slowest clock that frees it (``t_p - s_p``), and the
workers at the slowest clock are indexed once, when Algorithm 2 first needs
them, for the latest predicted push and the earliest stall limit.  Decisions
and Release values are exactly those of the straightforward scans (the tests
keep that version as an oracle).
"""
import heapq
from bisect import bisect_left
from dataclasses import dataclass
from math import isfinite

from .names import BOUNDED, DSSP_MODES, PAPER, THRESHOLD

__all__ = ['Release', 'SyncPolicy', 'predict_r_star', 'BOUNDED', 'PAPER', 'THRESHOLD']


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
        Extra iterations the worker still holds after this release (always 0
        in ``threshold`` mode, where a grant raises the worker's threshold
        instead: see :attr:`SyncPolicy.threshold`).
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
    if i_slow < 0:
        sim_slow.reverse()
    if not (isfinite(sim_slow[0]) and isfinite(sim_slow[-1]) and isfinite(i_p)):
        return _predict_r_star_scan(a_p[0], i_p, sim_slow, r_max)
    # sim_slow is sorted (rounding is monotone), and so is the rounded gap
    # s - sim_p on each side of sim_p: the closest point is a neighbour of
    # sim_p, and its gap is the same float a scan of all points would find.
    last = len(sim_slow) - 1
    best_r, best_gap = 0, None
    for r in range(r_max + 1):
        sim_p = a_p[0] + r * i_p
        j = bisect_left(sim_slow, sim_p)
        if j == 0:
            gap = abs(sim_slow[0] - sim_p)
        elif j > last:
            gap = abs(sim_slow[last] - sim_p)
        else:
            gap = min(abs(sim_slow[j - 1] - sim_p), abs(sim_slow[j] - sim_p))
        if best_gap is None or gap < best_gap:
            best_r, best_gap = r, gap
    return best_r


def _predict_r_star_scan(a_p0, i_p, sim_slow, r_max):
    """predict_r_star by scanning every point (for infinite or NaN times)."""
    best_r, best_gap = 0, None
    for r in range(r_max + 1):
        sim_p = a_p0 + r * i_p
        gap = min(abs(s - sim_p) for s in sim_slow)
        if best_gap is None or gap < best_gap:
            best_r, best_gap = r, gap
    return best_r


class SyncPolicy:
    """The decision state of one job: clocks, timestamps, grants, waiters.

    Not thread-safe: one caller (the controller's event loop) drives it.
    Times are seconds on the caller's clock; clocks are iteration counts.
    Every event costs O(1) amortized in the number of workers (see the
    module docstring); the public attributes below are kept current.

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

    Attributes
    ----------
    threshold : list of int
        Each worker's staleness threshold ``s_p``: a lead above it holds the
        worker.  Always ``s_lower`` in ``bounded`` and ``paper`` modes; in
        ``threshold`` mode ``s_lower + r*`` of the worker's latest grant.
    """

    def __init__(self, num_workers, s_lower, s_upper, mode=BOUNDED, stall_factor=2.0):
        if num_workers < 1:
            raise ValueError('num_workers must be >= 1, got %r' % (num_workers,))
        if not 0 <= s_lower <= s_upper:
            raise ValueError('need 0 <= s_lower <= s_upper, got %r, %r' % (s_lower, s_upper))
        if mode not in DSSP_MODES:
            raise ValueError('mode must be one of %s, got %r' % (', '.join(DSSP_MODES), mode))
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
        # Incremental state; None for the clocks once nobody is left.
        self._at = {0: set(range(num_workers))}   # clock -> active ranks at it (histogram)
        self._slowest = 0                          # min(self._at)
        self._fastest = 0                          # max(self._at)
        self._frees = {}                           # slowest clock -> held ranks it frees
        self._freed_upto = 0                       # waiters up to this slowest clock are freed
        self._bottom = None                        # _Bottom of the slowest clock, built lazily

    # -- queries -----------------------------------------------------------
    def t_slowest(self):
        """Smallest clock among workers still in the job (None if none is)."""
        return self._slowest

    def lead(self, rank):
        """Clock of `rank` minus the slowest clock."""
        slowest = self._slowest
        return 0 if slowest is None else self.clocks[rank] - slowest

    def slowest_ranks(self):
        """Ranks in the job whose clock is the smallest, sorted."""
        if self._slowest is None:
            return []
        return sorted(self._at[self._slowest])

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
        clock = self.clocks[rank]
        self.clocks[rank] = clock + 1
        self._leave_clock(rank, clock)
        at_next = self._at.get(clock + 1)
        if at_next is None:
            self._at[clock + 1] = {rank}
            if clock == self._fastest:
                self._fastest = clock + 1
        else:
            at_next.add(rank)
        if clock == self._slowest and clock not in self._at:
            self._slowest = clock + 1      # it was the last one at the slowest clock
        stamps = self.stamps[rank]
        stamps[1], stamps[0] = stamps[0], now
        releases = []
        decision = self._decide(rank, now)
        if decision is not None:
            releases.append(decision)
        releases.extend(self._release_waiters())
        return releases

    def on_leave(self, rank):
        """Worker `rank` left the job (finished); it no longer holds others."""
        self._check_rank(rank)
        self.active.discard(rank)
        clock = self.clocks[rank]
        if rank in self.waiting:
            del self.waiting[rank]
            key = clock - self.threshold[rank]
            frees = self._frees[key]
            frees.discard(rank)
            if not frees:
                del self._frees[key]
        self._leave_clock(rank, clock)
        if not self._at:
            self._slowest = self._fastest = None
        elif clock not in self._at:
            # Scans over empty clocks: the slowest only rises, and the fastest
            # falls only past clocks the leaving worker pushed through, so both
            # scans together cost at most one step per push ever made.
            while self._slowest not in self._at:
                self._slowest += 1
            while self._fastest not in self._at:
                self._fastest -= 1
        return self._release_waiters()

    def on_join(self, rank, clock, now):
        """Worker `rank`, which had left, comes back at `clock` (elastic rejoin) at `now`.

        It starts with no history: both timestamps are `now` (an interval of 0), so while it
        is among the slowest Algorithm 2 sees a stalled worker and grants nothing.  Returns
        the workers released (none when `clock` is at least the slowest clock, the only
        use: the controller gives a rejoiner the slowest clock).
        """
        if not 0 <= rank < self.num_workers:
            raise ValueError('rank %r is outside 0..%d' % (rank, self.num_workers - 1))
        if rank in self.active:
            raise ValueError('worker %d is in the job' % rank)
        if clock < 0 or (self._slowest is not None and clock < self._slowest):
            raise ValueError('worker %d cannot join at clock %d below the slowest (%s)'
                             % (rank, clock, self._slowest))
        self.active.add(rank)
        self.clocks[rank] = clock
        self._at.setdefault(clock, set()).add(rank)
        if self._slowest is None:
            # everyone had left: the clocks start again here, maybe below the clock released
            # last (nobody is held, so nothing at or below `clock` is owed a release)
            self._slowest = self._fastest = self._freed_upto = clock
        else:
            self._fastest = max(self._fastest, clock)
        self.stamps[rank] = [now, now]
        self.extra[rank] = 0
        self.threshold[rank] = self.s_lower
        self._bottom = None
        return self._release_waiters()

    def _leave_clock(self, rank, clock):
        at = self._at[clock]
        at.discard(rank)
        if not at:
            del self._at[clock]

    # -- Algorithm 1 -------------------------------------------------------
    def _decide(self, p, now):
        lead = self.lead(p)
        if self.mode == THRESHOLD:
            return self._decide_threshold(p, lead, now)
        if self.extra[p] > 0 and (self.mode == PAPER or lead <= self.s_upper):
            self.extra[p] -= 1                                     # lines 3-5
            return self._release(p, granted=0)
        if lead <= self.s_lower:                                   # lines 8-9
            return self._release(p, granted=0)
        granted = 0
        if self.clocks[p] == self._fastest:                        # line 11
            granted = self._controller(p, lead, now)               # line 12
            if granted > 0:                                        # lines 13-14
                self.extra[p] = granted if self.mode == PAPER else granted - 1
                return self._release(p, granted=granted)
        self._hold(p, granted)                                     # line 17
        return None

    def _decide_threshold(self, p, lead, now):
        """Algorithm 1 with r_p read as p's threshold ``s_p = sL + r_p``."""
        if lead <= self.threshold[p]:                              # lines 3-5, 8-9
            return self._release(p, granted=0)
        granted = 0
        if self.clocks[p] == self._fastest:                        # line 11
            granted = self._controller(p, lead, now)               # line 12
            self.threshold[p] = min(self.s_lower + granted, self.s_upper)
            if lead <= self.threshold[p]:                          # lines 13-14
                return self._release(p, granted=granted)
        self._hold(p, granted)                                     # line 17, up to s_p
        return None

    def _hold(self, p, granted):
        """p waits until its lead is <= s_p.

        That is until the slowest clock reaches ``clocks[p] - s_p``, which is
        beyond the current one (the lead is > s_p).
        """
        self.waiting[p] = granted
        self._frees.setdefault(self.clocks[p] - self.threshold[p], set()).add(p)

    def _release_waiters(self):
        """Release the held workers the slowest clock has reached, by rank."""
        slowest = self._slowest
        if slowest is None or slowest <= self._freed_upto:
            return []
        frees = self._frees
        if slowest - self._freed_upto <= len(frees):
            reached = range(self._freed_upto + 1, slowest + 1)
        else:                                  # a jump (a leave): fewer entries than clocks
            reached = [t for t in frees if t <= slowest]
        self._freed_upto = slowest
        freed = []
        for t in reached:
            ranks = frees.pop(t, None)
            if ranks:
                freed.extend(ranks)
        freed.sort()
        releases = []
        for q in freed:
            del self.waiting[q]
            releases.append(self._release(q, granted=0))
        return releases

    def _release(self, p, granted):
        lead = self.lead(p)
        if self.mode != PAPER and lead > self.s_upper:
            raise AssertionError('%s mode released worker %d at lead %d > sU=%d'
                                 % (self.mode, p, lead, self.s_upper))
        if lead > self.max_lead:
            self.max_lead = lead
        return Release(p, self.clocks[p], lead, self._slowest, granted, self.extra[p])

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
        # The candidates are the workers at the slowest clock; p is not among
        # them (its lead is > sL >= 0).  Each has pushed `slowest` times, so
        # all or none of them have two timestamps.
        if self._slowest < 2:
            return 0                          # no interval known for a slowest worker
        bottom = self._bottom
        if bottom is None or bottom.clock != self._slowest:
            bottom = self._bottom = _Bottom(self._slowest, self._at[self._slowest],
                                            self.stamps, self.stall_factor)
        if bottom.stalled(now):
            return 0                          # the slowest worker is stalled
        slowest = bottom.latest_next()
        return predict_r_star(tuple(a_p), tuple(self.stamps[slowest]), r_max)

    def _check_rank(self, rank):
        if not 0 <= rank < self.num_workers:
            raise ValueError('rank %r is outside 0..%d' % (rank, self.num_workers - 1))
        if rank not in self.active:
            raise ValueError('worker %d already left the job' % rank)


class _Bottom:
    """The workers at the slowest clock, indexed for Algorithm 2 (line 6-7).

    Nobody joins the slowest clock, so the entries only go stale (the worker
    pushed or left; `members` is the live set) and are dropped lazily.  Built
    once per slowest clock: O(1) amortized per push of its members.
    """

    __slots__ = ('clock', 'members', 'by_next', 'by_limit', 'scale')

    def __init__(self, clock, members, stamps, stall_factor):
        self.clock = clock
        self.members = members
        self.by_next = []        # (-predicted next push, -rank): the latest first
        self.by_limit = []       # (~ time it counts as stalled, rank, last push, allowed age)
        scale = 0.0
        for i in members:
            a_0, a_1 = stamps[i]
            interval = a_0 - a_1
            allowed = stall_factor * max(interval, 0.0)
            limit = a_0 + allowed
            self.by_next.append((-(a_0 + interval), -i))
            self.by_limit.append((limit, i, a_0, allowed))
            scale = max(scale, abs(a_0) + abs(limit))
        heapq.heapify(self.by_next)
        heapq.heapify(self.by_limit)
        self.scale = scale

    def latest_next(self):
        """The rank predicted to push last; on equal predictions the largest."""
        heap = self.by_next
        while -heap[0][1] not in self.members:
            heapq.heappop(heap)
        return -heap[0][1]

    def stalled(self, now):
        """Whether ``now - a_0 > stall_factor * max(interval, 0)`` for any member.

        ``limit`` only orders the heap; the test itself is the exact
        expression.  Rounding moves ``limit`` by less than ``margin``, so a
        stalled member always has ``limit <= now + margin``.
        """
        heap = self.by_limit
        while heap[0][1] not in self.members:
            heapq.heappop(heap)
        margin = 1e-15 * (abs(now) + self.scale) + 1e-300
        if heap[0][0] > now + margin:
            return False
        seen, stalled = [], False
        while heap and heap[0][0] <= now + margin:
            entry = heapq.heappop(heap)
            if entry[1] in self.members:
                seen.append(entry)
                if now - entry[2] > entry[3]:
                    stalled = True
                    break
        for entry in seen:
            heapq.heappush(heap, entry)
        return stalled
