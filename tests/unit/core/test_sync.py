"""Unit tests of the SSP / DSSP decision logic in :mod:`mxnet_ssp.core.sync`.

No MXNet, no processes: the policy is driven with scripted or randomized
push timelines.  The spec is Algorithm 1 and Algorithm 2 of Zhao et al.
(ICDCS 2019) with the conventions of the ``mxnet_ssp.core.sync`` docstring.
"""
import heapq
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mxnet_ssp.core.names import DSSP_MODES
from mxnet_ssp.core.sync import (BOUNDED, PAPER, THRESHOLD, Release, SyncPolicy,
                                 predict_r_star)


# ---------------------------------------------------------------------------
# Harness: drive a SyncPolicy like a real job and check every Release.
# ---------------------------------------------------------------------------
class Driver:
    """Keeps its own bookkeeping of clocks / held workers and checks the policy.

    Only workers that are running (not held, not left) may push: a worker
    whose push got no Release for itself waits until a later event releases
    it, exactly as a worker blocks on the server's OK.

    Besides safety (a Release describes the true state, waiters are freed
    only within sL), every event is checked for needless waiting, with the
    conventions of :mod:`mxnet_ssp.core.sync` (lead = own clock after the push
    minus the smallest clock of the workers in the job, that push counted):

    * a pusher whose lead is <= sL is released by its own push (line 8-9);
    * a pusher holding granted extra iterations is released by its own push
      (lines 3-5; in bounded mode only while its lead stays <= sU);
    * after every event, no held worker is within sL of the slowest.

    In ``threshold`` mode ``sL`` above is each worker's own threshold, which
    the driver follows itself: it changes only when the pusher's lead is above
    it and the pusher is at the largest clock (the controller runs), to
    ``sL + granted`` of that push; and there are no extra iterations.

    A policy that held workers longer than the rules say (lockstep, an
    off-by-one at sL, a grant not honoured) fails these checks although it
    keeps the bound and stays live.
    """

    def __init__(self, policy):
        self.policy = policy
        self.m = policy.num_workers
        self.clocks = [0] * self.m
        self.active = set(range(self.m))
        self.held = set()
        self.extra = [0] * self.m        # extra iterations each worker holds (its last Release)
        self.threshold = [policy.s_lower] * self.m    # threshold mode: each worker's s_p
        self.releases = []

    def true_min(self):
        return min(self.clocks[i] for i in self.active)

    def runnable(self):
        return sorted(self.active - self.held)

    def push(self, rank, now):
        assert rank in self.active and rank not in self.held, 'driver bug'
        self.clocks[rank] += 1
        fastest = self.clocks[rank] == max(self.clocks[i] for i in self.active)
        before = self.threshold[rank]
        out = self.policy.on_push(rank, now)
        if self.policy.mode == THRESHOLD and self.clocks[rank] - self.true_min() > before and fastest:
            own = next((r for r in out if r.rank == rank), None)
            granted = own.granted if own is not None else self.policy.waiting[rank]
            self.threshold[rank] = min(self.policy.s_lower + granted, self.policy.s_upper)
        self.held.add(rank)
        self._check(out, pusher=rank, threshold_before=before)
        return out

    def leave(self, rank):
        assert rank in self.active and rank not in self.held, 'driver bug'
        self.active.discard(rank)
        out = self.policy.on_leave(rank)
        self._check(out, pusher=None)
        return out

    def _check(self, out, pusher, threshold_before=None):
        seen = {}
        for rel in out:
            assert isinstance(rel, Release)
            assert rel.rank not in seen, 'released twice in one event'
            seen[rel.rank] = rel
            # only a worker that is actually blocked can be released
            assert rel.rank in self.held, 'released a worker that was not waiting'
            assert rel.rank in self.active
            # safety: the Release describes the true state of the job
            assert rel.clock == self.clocks[rel.rank]
            assert rel.t_slowest == self.true_min()
            assert rel.clock - rel.t_slowest == rel.lead
            assert rel.lead >= 0
            assert rel.extra_left >= 0
            if rel.rank != pusher:
                # waiters are freed only by the slowest clock advancing to sL (s_p)
                assert rel.lead <= self.threshold[rel.rank]
                assert rel.granted == 0
            elif self.policy.mode == THRESHOLD:
                assert rel.lead <= self.threshold[rel.rank] and rel.extra_left == 0
            self.held.discard(rel.rank)
            self.releases.append(rel)
        assert set(self.policy.waiting) == self.held
        assert self.policy.threshold == self.threshold
        self._check_no_needless_wait(seen, pusher, threshold_before)
        for rel in out:
            self.extra[rel.rank] = rel.extra_left

    def _check_no_needless_wait(self, released, pusher, threshold_before):
        policy = self.policy
        if not self.active:
            return                       # the last worker left: nobody can wait
        slowest = self.true_min()
        if pusher is not None:
            lead = self.clocks[pusher] - slowest
            if lead <= max(threshold_before, self.threshold[pusher]):
                assert pusher in released, (
                    'worker %d pushed clock %d at lead %d <= its threshold %d but was held'
                    % (pusher, self.clocks[pusher], lead, max(threshold_before,
                                                              self.threshold[pusher])))
            if self.extra[pusher] > 0 and (policy.mode == PAPER or lead <= policy.s_upper):
                assert pusher in released, (
                    'worker %d held %d granted extra iterations (lead %d) but was held'
                    % (pusher, self.extra[pusher], lead))
                own = released[pusher]
                assert own.granted == 0 and own.extra_left == self.extra[pusher] - 1, (
                    'worker %d used one of %d extra iterations: %r'
                    % (pusher, self.extra[pusher], own))
            own = released.get(pusher)
            if own is not None and own.granted and policy.mode != THRESHOLD:
                # a grant of r* is r* releases without waiting; in bounded mode this
                # release is the first of them, in paper mode r_p <- r* (line 13)
                used = 1 if policy.mode == BOUNDED else 0
                assert own.extra_left == own.granted - used, (
                    'worker %d granted %d but holds %d extra iterations (%s mode)'
                    % (pusher, own.granted, own.extra_left, policy.mode))
        for q in self.held:
            assert self.clocks[q] - slowest > self.threshold[q], (
                'worker %d is held at clock %d although the slowest clock is %d (s_p=%d)'
                % (q, self.clocks[q], slowest, self.threshold[q]))


def run_timed(policy, compute, n_iters, latency=0.0, leave=True):
    """Event-driven run: worker i's k-th iteration takes compute(i, k) seconds.

    Every worker runs `n_iters[i]` iterations and then leaves (if `leave`).
    Returns the Driver; asserts that every worker finished (no deadlock).
    """
    drv = Driver(policy)
    heap = []
    seq = 0
    for i in range(drv.m):
        heapq.heappush(heap, (compute(i, 0), seq, 'push', i))
        seq += 1
    done = [False] * drv.m
    while heap:
        now, _, kind, i = heapq.heappop(heap)
        if kind == 'push':
            out = drv.push(i, now)
        else:                       # the release arrived at worker i
            if drv.clocks[i] >= n_iters[i]:
                done[i] = True
                out = drv.leave(i) if leave else []
            else:
                heapq.heappush(heap, (now + compute(i, drv.clocks[i]), seq, 'push', i))
                seq += 1
                out = []
        for rel in out:
            heapq.heappush(heap, (now + latency, seq, 'go', rel.rank))
            seq += 1
    assert all(done), 'some worker never got released: %r' % (drv.held,)
    return drv


def run_random_order(policy, rng, steps, leave_prob=0.0):
    """Arbitrary interleaving: at each step a random running worker pushes
    (or, rarely, leaves) at a time that advances by a random amount."""
    drv = Driver(policy)
    now = 0.0
    for _ in range(steps):
        runnable = drv.runnable()
        assert runnable, 'deadlock: every active worker is held'
        rank = rng.choice(runnable)
        now += rng.choice([0.0, rng.random(), rng.random() * 10])
        if leave_prob and len(drv.active) > 1 and rng.random() < leave_prob:
            drv.leave(rank)
        else:
            drv.push(rank, now)
    return drv


# ---------------------------------------------------------------------------
# Figure 2 of the paper
# ---------------------------------------------------------------------------
# Worker 0 is the fastest (interval 1), worker 1 the slowest (interval 2.6).
# With sL = 6 the fast worker first exceeds sL at its 10th push (t = 10.0),
# when the slowest has pushed at 5.2 and 7.8: Sim_slowest = 10.4, 13.0, ...
# and Sim_p = 10, 11, 12, 13, 14, so r* = 3 (13.0 meets the slow push at 13.0).
FIG2_SL = 6
FIG2_SU = FIG2_SL + 4          # R = [0, 4]
FAST_PUSHES = [float(k) for k in range(1, 20)]
SLOW_PUSHES = [2.6, 5.2, 7.8, 10.4, 13.0, 15.6, 18.2]


def test_figure2_predict_r_star():
    assert predict_r_star((10.0, 9.0), (7.8, 5.2), 4) == 3
    # the range matters: with R = [0, 2] the best point is r = 0 (gap 0.4)
    assert predict_r_star((10.0, 9.0), (7.8, 5.2), 2) == 0
    assert predict_r_star((10.0, 9.0), (7.8, 5.2), 0) == 0


def _figure2_run(mode):
    """Replay the Figure 2 timeline; fast pushes at t come before slow pushes at t."""
    policy = SyncPolicy(2, FIG2_SL, FIG2_SU, mode=mode)
    drv = Driver(policy)
    events = sorted([(t, 0) for t in FAST_PUSHES] + [(t, 1) for t in SLOW_PUSHES])
    log = []   # (time, rank, releases of this event)
    for t, rank in events:
        if rank in drv.held:
            continue                # a held worker cannot push; its push time passes
        log.append((t, rank, drv.push(rank, t)))
    return drv, log


def _own(log, t, rank=0):
    """The Release for `rank`'s own push at time t, or None if it was held."""
    for time, r, out in log:
        if time == t and r == rank:
            return next((x for x in out if x.rank == rank), None)
    raise AssertionError('no push of %d at %r' % (rank, t))


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_figure2_no_grant_before_sl_exceeded(mode):
    _, log = _figure2_run(mode)
    for t in FAST_PUSHES[:9]:
        rel = _own(log, t)
        assert rel is not None and rel.granted == 0 and rel.lead <= FIG2_SL


def test_figure2_bounded_releases():
    _, log = _figure2_run(BOUNDED)
    grant = _own(log, 10.0)
    assert grant is not None
    assert (grant.granted, grant.lead, grant.clock, grant.extra_left) == (3, 7, 10, 2)
    # exactly 2 more releases without waiting: 3 in all including the grant push
    r11, r12 = _own(log, 11.0), _own(log, 12.0)
    assert r11 is not None and r11.granted == 0 and r11.extra_left == 1
    assert r12 is not None and r12.granted == 0 and r12.extra_left == 0
    # ... and the 3rd push after the grant (the Sim_p[3] point, t = 13) waits
    assert _own(log, 13.0) is None
    assert max(r.lead for _, _, out in log for r in out) <= FIG2_SU


def test_figure2_paper_releases():
    _, log = _figure2_run(PAPER)
    grant = _own(log, 10.0)
    assert grant is not None
    assert (grant.granted, grant.lead, grant.extra_left) == (3, 7, 3)
    # r_p <- r* without decrementing: 3 more releases, each using one extra
    for t, left in ((11.0, 2), (12.0, 1), (13.0, 0)):
        rel = _own(log, t)
        assert rel is not None and rel.granted == 0 and rel.extra_left == left
    # the next release of worker 0 is not an extra one: the grant is used up,
    # so the controller decides again (here it grants anew, r* = 4)
    nxt = _own(log, 14.0)
    assert nxt is not None and nxt.granted > 0 and nxt.extra_left == nxt.granted


@pytest.mark.parametrize('mode', [BOUNDED, PAPER])
def test_figure2_through_on_push_directly(mode):
    """The same decision without the replay: state right before t = 10."""
    p = SyncPolicy(2, FIG2_SL, FIG2_SU, mode=mode)
    # worker 1 pushes 3 times (2.6, 5.2, 7.8); worker 0 pushes at 1..9
    events = sorted([(float(k), 0) for k in range(1, 10)] + [(2.6, 1), (5.2, 1), (7.8, 1)])
    for t, r in events:
        assert [x.rank for x in p.on_push(r, t)] == [r]
    (rel,) = p.on_push(0, 10.0)
    assert rel.granted == 3
    assert p.extra[0] == (2 if mode == BOUNDED else 3)


# ---------------------------------------------------------------------------
# The bound under adversarial speeds (bounded mode) and safety (both modes)
# ---------------------------------------------------------------------------
def _iteration_times(seed, m):
    rng = random.Random(seed)
    base = [rng.choice([0.1, 0.5, 1.0, 1.0, 2.0, 3.0, 7.0]) for _ in range(m)]
    style = rng.choice(['steady', 'jitter', 'wild', 'stalls'])

    def compute(i, k):
        r = random.Random(seed * 1_000_003 + i * 10_007 + k)
        if style == 'steady':
            return base[i]
        if style == 'jitter':
            return base[i] * (0.7 + 0.6 * r.random())
        if style == 'wild':
            return r.choice([0.0, 0.01, 0.3, 1.0, 4.0, 20.0])
        return base[i] * (50.0 if r.random() < 0.05 else 1.0)   # occasional stall
    return compute


@pytest.mark.parametrize('seed', range(40))
@pytest.mark.parametrize('mode', [BOUNDED, THRESHOLD])
def test_bounded_lead_never_exceeds_su_seeded(seed, mode):
    rng = random.Random(seed)
    m = rng.randint(2, 6)
    s_lower = rng.randint(0, 4)
    s_upper = s_lower + rng.randint(0, 8)
    policy = SyncPolicy(m, s_lower, s_upper, mode=mode,
                        stall_factor=rng.choice([0.5, 2.0, 10.0]))
    n_iters = [rng.randint(5, 60) for _ in range(m)]
    drv = run_timed(policy, _iteration_times(seed, m), n_iters,
                    latency=rng.choice([0.0, 0.05, 1.0]))
    assert drv.releases
    assert all(r.lead <= s_upper for r in drv.releases)
    assert policy.max_lead <= s_upper
    assert policy.max_lead == max(r.lead for r in drv.releases)


@pytest.mark.parametrize('seed', range(40))
@pytest.mark.parametrize('mode', DSSP_MODES)
def test_random_interleavings_safe(seed, mode):
    rng = random.Random(1000 + seed)
    m = rng.randint(1, 6)
    s_lower = rng.randint(0, 3)
    s_upper = s_lower + rng.randint(0, 6)
    policy = SyncPolicy(m, s_lower, s_upper, mode=mode, stall_factor=rng.choice([1.0, 2.0, 50.0]))
    drv = run_random_order(policy, rng, steps=300, leave_prob=0.01)
    if mode != PAPER:
        assert policy.max_lead <= s_upper
        assert all(r.lead <= s_upper for r in drv.releases)


iteration_time = st.one_of(st.just(0.0), st.floats(min_value=0.001, max_value=50.0,
                                                   allow_nan=False, allow_infinity=False))


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(min_value=1, max_value=5),
    s_lower=st.integers(min_value=0, max_value=4),
    width=st.integers(min_value=0, max_value=6),
    mode=st.sampled_from(DSSP_MODES),
    stall_factor=st.sampled_from([0.5, 2.0, 100.0]),
    latency=st.sampled_from([0.0, 0.1]),
    data=st.data(),
)
def test_hypothesis_timelines(m, s_lower, width, mode, stall_factor, latency, data):
    s_upper = s_lower + width
    # per worker a short cyclic list of iteration times: arbitrary speeds and orders
    cycles = [data.draw(st.lists(iteration_time, min_size=1, max_size=4)) for _ in range(m)]
    n_iters = [data.draw(st.integers(min_value=1, max_value=25)) for _ in range(m)]
    policy = SyncPolicy(m, s_lower, s_upper, mode=mode, stall_factor=stall_factor)
    drv = run_timed(policy, lambda i, k: cycles[i][k % len(cycles[i])], n_iters, latency=latency)
    assert sum(drv.clocks) == sum(n_iters)
    if mode != PAPER:
        assert policy.max_lead <= s_upper
        assert all(r.lead <= s_upper for r in drv.releases)
        if s_lower == s_upper:
            assert all(r.granted == 0 for r in drv.releases)


@pytest.mark.parametrize('s', [0, 1, 3])
@pytest.mark.parametrize('seed', range(10))
def test_ssp_lead_never_exceeds_s(s, seed):
    rng = random.Random(seed)
    m = rng.randint(2, 5)
    policy = SyncPolicy(m, s, s)
    drv = run_timed(policy, _iteration_times(seed, m), [40] * m, latency=rng.choice([0.0, 0.3]))
    assert all(r.lead <= s for r in drv.releases)
    assert all(r.granted == 0 for r in drv.releases)
    assert policy.max_lead <= s


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_ssp_equal_bounds_never_call_controller(mode):
    """sL == sU gives r_max = 0 in both modes: plain SSP."""
    policy = SyncPolicy(3, 2, 2, mode=mode)
    drv = run_timed(policy, lambda i, k: [1.0, 1.0, 3.0][i], [60, 60, 60])
    assert policy.max_lead <= 2
    assert all(r.granted == 0 for r in drv.releases)


# ---------------------------------------------------------------------------
# SSP(0) is lockstep
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('seed', range(10))
def test_ssp0_lockstep(seed):
    rng = random.Random(seed)
    m = rng.randint(2, 5)
    policy = SyncPolicy(m, 0, 0)
    drv = Driver(policy)
    pushed_round = {}     # t -> ranks that pushed their t-th time
    now = 0.0
    for _ in range(200):
        rank = rng.choice(drv.runnable())
        now += rng.random()
        t = drv.clocks[rank] + 1
        out = drv.push(rank, now)
        pushed_round.setdefault(t, set()).add(rank)
        for rel in out:
            # nobody starts iteration t + 1 before everybody has pushed t times
            assert pushed_round.get(rel.clock, set()) == set(range(m))
            assert rel.lead == 0
        if len(pushed_round[t]) < m:
            assert all(rel.rank != rank for rel in out)      # held until the round is full
        else:
            assert sorted(rel.rank for rel in out) == list(range(m))   # everybody goes


def test_ssp0_single_worker_is_never_held():
    policy = SyncPolicy(1, 0, 0)
    for k in range(1, 6):
        (rel,) = policy.on_push(0, float(k))
        assert (rel.clock, rel.lead, rel.t_slowest) == (k, 0, k)


# ---------------------------------------------------------------------------
# Ties
# ---------------------------------------------------------------------------
def test_argmin_tie_takes_smallest_r():
    # Sim_p = 0, 1, 2, 3, 4; Sim_slowest = 0.5, 5.5, ...: r = 0 and r = 1 both at 0.5
    assert predict_r_star((0.0, -1.0), (-4.5, -9.5), 4) == 0
    # Sim_slowest = 2.5, 7.5, ...: r = 2 and r = 3 tie, r = 2 wins
    assert predict_r_star((0.0, -1.0), (-2.5, -7.5), 4) == 2
    # several exact zero gaps (slowest interval 2, Sim_slowest = 1, 3, 5, ...)
    assert predict_r_star((0.0, -1.0), (-1.0, -3.0), 4) == 1


def test_predict_r_star_edges():
    assert predict_r_star((5.0, 4.0), (3.0, 1.0), 0) == 0
    assert predict_r_star((5.0, 4.0), (3.0, 1.0), -3) == 0
    # equal speeds in phase: Sim_slowest[0] = 5 + 1 = Sim_p[1]
    assert predict_r_star((5.0, 4.0), (5.0, 4.0), 4) == 1
    # Sim_slowest[0] is one interval after the slowest's last push (line 7),
    # not the push itself: slowest at 0.0 every 3 s -> 3, 6, ...; Sim_p[3] = 3
    assert predict_r_star((0.0, -1.0), (0.0, -3.0), 4) == 3
    # r is capped at r_max even when a later point would match exactly
    assert predict_r_star((0.0, -1.0), (0.0, -3.0), 2) == 2


def test_two_workers_at_min_clock_latest_predicted_is_slowest():
    """Workers 1 and 2 share the smallest clock; worker 2 is predicted to push last."""
    for mode in DSSP_MODES:
        policy = SyncPolicy(3, 2, 6, mode=mode)
        script = [(0, 0.5), (0, 1.0), (2, 4.25), (1, 6.0), (0, 7.0), (2, 7.75), (1, 8.0),
                  (0, 8.0)]
        for rank, t in script:
            assert [r.rank for r in policy.on_push(rank, t)] == [rank]
        assert policy.clocks == [4, 2, 2] and policy.slowest_ranks() == [1, 2]
        # worker 1: next push predicted at 10.0, worker 2 at 11.25 (later: "the slowest")
        by_1 = predict_r_star((9.0, 8.0), (8.0, 6.0), 4)
        by_2 = predict_r_star((9.0, 8.0), (7.75, 4.25), 4)
        assert (by_1, by_2) == (1, 2)                # the choice matters
        (rel,) = policy.on_push(0, 9.0)              # clock 5, lead 3 > sL: controller
        assert rel.granted == by_2


def test_two_workers_at_max_clock_both_count_as_fastest():
    policy = SyncPolicy(3, 2, 6)
    script = [(2, 1.0), (0, 1.5), (1, 1.5), (0, 2.0), (1, 2.0), (2, 3.0),
              (0, 3.25), (1, 3.25), (0, 3.5), (1, 3.5)]
    for rank, t in script:
        assert [r.rank for r in policy.on_push(rank, t)] == [rank]
    assert policy.clocks == [4, 4, 2]
    expected = predict_r_star((3.75, 3.5), (3.0, 1.0), 4)
    assert expected > 0
    (r0,) = policy.on_push(0, 3.75)                  # clock 5: the unique max
    (r1,) = policy.on_push(1, 3.75)                  # clock 5: ties the max, still fastest
    assert (r0.granted, r1.granted) == (expected, expected)
    assert r0.lead == r1.lead == 3


def test_not_fastest_is_not_granted():
    """Line 11: only a worker at the max clock calls the controller; others wait."""
    policy = SyncPolicy(3, 2, 6)
    script = [(2, 0.0), (0, 0.5), (1, 0.6), (0, 1.0), (1, 1.1), (0, 1.5), (1, 1.6),
              (2, 2.0), (0, 2.5)]
    for rank, t in script:
        assert [r.rank for r in policy.on_push(rank, t)] == [rank]
    (g,) = policy.on_push(0, 3.0)                    # clock 5, lead 3: granted
    assert g.granted > 1
    (e,) = policy.on_push(0, 3.5)                    # clock 6: uses an extra iteration
    assert e.granted == 0
    assert policy.clocks == [6, 3, 2]
    assert [r.rank for r in policy.on_push(1, 3.6)] == [1]    # clock 4, lead 2 <= sL
    assert policy.on_push(1, 3.7) == []              # clock 5 < max 6, lead 3: held
    assert policy.waiting == {1: 0}


# ---------------------------------------------------------------------------
# No grant: stuck slowest worker, too few timestamps
# ---------------------------------------------------------------------------
def _policy_before_decision(t, mode=BOUNDED, stall_factor=2.5):
    """Worker 1 (slowest) pushed at 0.0 and 2.0 (interval 2, clock 2); worker 0
    pushed at t - 0.5 and t - 0.25 and is at clock 4 (lead 2 = sL): its next
    push at `t` has lead 3 > sL and calls the controller."""
    policy = SyncPolicy(2, 2, 6, mode=mode, stall_factor=stall_factor)
    for rank, when in [(1, 0.0), (0, 0.5), (0, 1.0), (1, 2.0), (0, t - 0.5), (0, t - 0.25)]:
        assert [r.rank for r in policy.on_push(rank, when)] == [rank]
    assert policy.clocks == [4, 2]
    return policy


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_slowest_not_yet_stalled_gets_grant(mode):
    # stall limit: 2.0 + 2.5 x 2 = 7.0; exactly at the limit it is not stalled (>)
    policy = _policy_before_decision(7.0, mode)
    (rel,) = policy.on_push(0, 7.0)
    assert rel.granted == predict_r_star((7.0, 6.75), (2.0, 0.0), 4) == 4


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_stalled_slowest_gets_no_grant(mode):
    policy = _policy_before_decision(7.5, mode)
    assert predict_r_star((7.5, 7.25), (2.0, 0.0), 4) > 0   # it would grant otherwise
    assert policy.on_push(0, 7.5) == []
    assert policy.waiting == {0: 0}


def test_stall_factor_is_used():
    policy = _policy_before_decision(7.5, stall_factor=10.0)
    (rel,) = policy.on_push(0, 7.5)                  # 5.5 s old < 10 x 2 s
    assert rel.granted > 0


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_slowest_with_one_timestamp_gets_no_grant(mode):
    policy = SyncPolicy(2, 2, 6, mode=mode)
    policy.on_push(1, 0.0)                           # the slowest has a single timestamp
    for t in (0.25, 0.5, 0.75):
        assert [r.rank for r in policy.on_push(0, t)] == [0]
    assert policy.on_push(0, 1.0) == []              # clock 4, lead 3 > sL: no interval
    assert policy.waiting == {0: 0}


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_no_timestamps_gets_no_grant(mode):
    # worker 0 pushes once (one timestamp of its own) while worker 1 never pushed
    policy = SyncPolicy(2, 0, 4, mode=mode)
    assert policy.on_push(0, 1.0) == []              # clock 1, lead 1 > sL = 0
    assert policy.waiting == {0: 0}
    out = policy.on_push(1, 5.0)
    assert sorted(r.rank for r in out) == [0, 1]


# ---------------------------------------------------------------------------
# Leaving
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('mode', DSSP_MODES)
def test_leave_releases_held_workers(mode):
    policy = SyncPolicy(3, 1, 1, mode=mode)
    policy.on_push(0, 1.0)
    policy.on_push(1, 1.0)
    assert policy.on_push(0, 2.0) == []          # clock 2 vs worker 2 at 0: lead 2
    assert policy.on_push(1, 2.0) == []
    assert set(policy.waiting) == {0, 1}
    out = policy.on_leave(2)
    assert sorted(r.rank for r in out) == [0, 1]
    assert all(r.t_slowest == 2 and r.lead == 0 for r in out)
    assert policy.waiting == {}


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_a_held_worker_that_leaves_does_not_take_the_release_of_another_held_at_its_clock(mode):
    """Workers 1 and 2 are held until the slowest clock reaches 1; 2 leaves (lost while held);
    worker 0's push to clock 1 must still release 1."""
    policy = SyncPolicy(3, 1, 1, mode=mode)
    for rank in (1, 2):
        policy.on_push(rank, 1.0)
        assert policy.on_push(rank, 2.0) == []   # clock 2 vs worker 0 at 0: lead 2
    assert set(policy.waiting) == {1, 2}
    assert policy.on_leave(2) == []              # worker 0 still at 0
    out = {r.rank: r for r in policy.on_push(0, 3.0)}
    assert sorted(out) == [0, 1]                 # its own push, and worker 1
    assert (out[1].clock, out[1].lead, out[1].t_slowest) == (2, 1, 1)
    assert policy.waiting == {}


def test_left_worker_no_longer_counts_as_slowest():
    policy = SyncPolicy(3, 0, 0)
    assert policy.on_push(0, 1.0) == []
    assert policy.on_push(1, 1.0) == []
    assert sorted(r.rank for r in policy.on_leave(2)) == [0, 1]
    assert policy.t_slowest() == 1
    assert policy.slowest_ranks() == [0, 1]
    assert policy.on_push(0, 2.0) == []          # lockstep between 0 and 1 only
    out = policy.on_push(1, 2.0)
    assert sorted(r.rank for r in out) == [0, 1]
    assert all(r.t_slowest == 2 for r in out)


def test_leave_of_held_worker_and_of_last_worker():
    policy = SyncPolicy(2, 0, 0)
    assert policy.on_push(0, 1.0) == []
    assert policy.on_leave(0) == []              # a held worker may leave (e.g. it crashed)
    assert policy.waiting == {}
    (rel,) = policy.on_push(1, 2.0)
    assert (rel.clock, rel.lead, rel.t_slowest) == (1, 0, 1)
    assert policy.on_leave(1) == []
    assert policy.t_slowest() is None
    assert policy.slowest_ranks() == []


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_push_or_leave_after_leaving_raises(mode):
    policy = SyncPolicy(2, 1, 3, mode=mode)
    policy.on_leave(1)
    with pytest.raises(ValueError, match='left'):
        policy.on_push(1, 1.0)
    with pytest.raises(ValueError, match='left'):
        policy.on_leave(1)


# ---------------------------------------------------------------------------
# paper vs bounded under a persistently 3x slower worker
# ---------------------------------------------------------------------------
def _persistent(mode, iters=150):
    policy = SyncPolicy(3, 2, 6, mode=mode)
    # workers 0, 1 fast (1 s), worker 2 three times slower; nobody leaves early
    drv = run_timed(policy, lambda i, k: 3.0 if i == 2 else 1.0, [iters * 3, iters * 3, iters],
                    leave=True)
    return policy, drv


def test_paper_mode_lead_grows_past_su():
    policy, drv = _persistent(PAPER)
    assert policy.max_lead > policy.s_upper
    fast = [r.lead for r in drv.releases if r.rank == 0]
    # it keeps growing: the lead in the last quarter is far above the first quarter's
    q = len(fast) // 4
    assert max(fast[-q:]) > max(fast[:q]) + policy.s_upper
    assert max(fast) > 5 * policy.s_upper


def test_bounded_mode_same_timeline_stays_within_su():
    policy, drv = _persistent(BOUNDED)
    assert policy.max_lead <= policy.s_upper
    assert all(r.lead <= policy.s_upper for r in drv.releases)
    # and DSSP actually used its range: some release beyond sL
    assert max(r.lead for r in drv.releases) > policy.s_lower


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('args', [
    dict(num_workers=0, s_lower=0, s_upper=0),
    dict(num_workers=-2, s_lower=0, s_upper=0),
    dict(num_workers=2, s_lower=-1, s_upper=3),
    dict(num_workers=2, s_lower=4, s_upper=3),
    dict(num_workers=2, s_lower=0, s_upper=3, mode='fast'),
    dict(num_workers=2, s_lower=0, s_upper=3, mode='BOUNDED'),
])
def test_invalid_constructor_args(args):
    with pytest.raises(ValueError):
        SyncPolicy(**args)


def test_valid_constructor_defaults():
    policy = SyncPolicy(4, 3, 15)
    assert policy.mode == BOUNDED and policy.r_max == 12 and policy.stall_factor == 2.0
    assert policy.clocks == [0, 0, 0, 0] and policy.t_slowest() == 0 and policy.max_lead == 0


@pytest.mark.parametrize('rank', [-1, 2, 10, 2.5])
def test_bad_rank(rank):
    policy = SyncPolicy(2, 0, 0)
    with pytest.raises(ValueError, match='outside'):
        policy.on_push(rank, 1.0)
    with pytest.raises(ValueError, match='outside'):
        policy.on_leave(rank)


def test_push_while_held_raises_and_changes_nothing():
    policy = SyncPolicy(2, 0, 3)
    assert policy.on_push(0, 1.0) == []
    clocks = list(policy.clocks)
    with pytest.raises(ValueError, match='before it was released'):
        policy.on_push(0, 2.0)
    assert policy.clocks == clocks and policy.stamps[0] == [1.0, None]
