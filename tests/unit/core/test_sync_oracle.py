"""The incremental :class:`mxnet_ssp.core.sync.SyncPolicy` against the oracle.

``tests/support/oracle_sync.py`` is the straightforward policy as it shipped before
the decisions became O(1) amortized (scans over every clock, a sort of the
waiters), copied unchanged but for the ``threshold`` mode, added to both the
same straightforward way.  Both are driven through the same timelines and
must return identical releases (same ranks, same Release values, same order)
and expose identical public state after every event.  The timelines go
through the :class:`test_sync.Driver` harness, so every release is also
checked against the rules of Algorithm 1.
"""
import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle_sync
from mxnet_ssp.core.names import DSSP_MODES
from mxnet_ssp.core.sync import BOUNDED, PAPER, THRESHOLD, SyncPolicy, predict_r_star
from test_sync import Driver, _iteration_times, run_random_order, run_timed


def _values(releases):
    """Releases as comparable values (the oracle has its own Release class)."""
    return [sorted(dataclasses.asdict(r).items()) for r in releases]


class Twin:
    """Looks like one SyncPolicy to the Driver; runs the new one and the oracle."""

    def __init__(self, *args, **kwargs):
        self.new = SyncPolicy(*args, **kwargs)
        self.old = oracle_sync.SyncPolicy(*args, **kwargs)
        self.events = 0

    def __getattr__(self, name):          # num_workers, s_lower, waiting, max_lead, ...
        return getattr(self.new, name)

    def on_push(self, rank, now):
        return self._same('on_push', rank, now)

    def on_leave(self, rank):
        return self._same('on_leave', rank)

    def _same(self, method, *args):
        self.events += 1
        want = getattr(self.old, method)(*args)
        got = getattr(self.new, method)(*args)
        where = 'event %d: %s%r' % (self.events, method, args)
        if _values(got) != _values(want):
            first = next((k for k, (g, w) in enumerate(zip(got, want)) if _values([g]) != _values([w])),
                         min(len(got), len(want)))
            raise AssertionError('%s: releases differ at position %d of %d / %d\n new %r\n old %r'
                                 % (where, first, len(got), len(want), got[first:first + 3],
                                    want[first:first + 3]))
        new, old = self.new, self.old
        for name in ('clocks', 'stamps', 'extra', 'threshold', 'active', 'waiting', 'max_lead'):
            assert getattr(new, name) == getattr(old, name), '%s: %s differs' % (where, name)
        assert new.t_slowest() == old.t_slowest(), where
        assert new.slowest_ranks() == old.slowest_ranks(), where
        for rank in old.active:
            assert new.lead(rank) == old.lead(rank), where
        return got


def test_twin_sees_a_difference():
    """The comparison itself can fail: a policy with sL off by one differs."""
    twin = Twin(2, 1, 3)
    twin.new = SyncPolicy(2, 0, 3)
    with pytest.raises(AssertionError, match='releases differ'):
        twin.on_push(0, 1.0)                # lead 1: the oracle (sL=1) releases, sL=0 holds


# ---------------------------------------------------------------------------
# Random timelines chosen by hypothesis
# ---------------------------------------------------------------------------
# Small dyadic steps make equal times and exact stall limits (now - a_0 equal
# to stall_factor x interval) common, so the tie and boundary rules are hit.
time_step = st.one_of(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 7.5, 40.0, 0.1]),
                      st.floats(min_value=0.0, max_value=100.0,
                                allow_nan=False, allow_infinity=False))
stall_factors = st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.5, 100.0])


def _policy_args(data, max_workers):
    m = data.draw(st.integers(min_value=1, max_value=max_workers), label='workers')
    s_lower = data.draw(st.integers(min_value=0, max_value=4), label='sL')
    width = data.draw(st.sampled_from([0, 0, 1, 2, 4, 12]), label='sU - sL')   # 0: SSP
    mode = data.draw(st.sampled_from(DSSP_MODES), label='mode')
    stall = data.draw(stall_factors, label='stall_factor')
    return (m, s_lower, s_lower + width), dict(mode=mode, stall_factor=stall)


#: examples per property: a few in the default run, many more with -m slow
EXAMPLES = [pytest.param(15, id='15'), pytest.param(600, id='600', marks=pytest.mark.slow)]


def check(prop, examples):
    """Run the property `prop(data)` on `examples` hypothesis examples."""
    settings(max_examples=examples, deadline=None, database=None,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])(
        given(data=st.data())(prop))()


def _same_releases_any_interleaving(data):
    """Any order of pushes and leaves, any times (ties, stalls, jumps)."""
    args, kwargs = _policy_args(data, max_workers=24)
    drv = Driver(Twin(*args, **kwargs))
    now = 0.0
    for _ in range(data.draw(st.integers(min_value=1, max_value=250), label='events')):
        runnable = drv.runnable()
        assert runnable, 'deadlock: every active worker is held'
        rank = runnable[data.draw(st.integers(0, len(runnable) - 1), label='who')]
        now += data.draw(time_step, label='step')
        leave = len(drv.active) > 1 and data.draw(st.integers(0, 30), label='leave?') == 0
        if leave:
            drv.leave(rank)
        else:
            drv.push(rank, now)


@pytest.mark.parametrize('examples', EXAMPLES)
def test_same_releases_any_interleaving(examples):
    """Any order of pushes and leaves, any times (ties, stalls, jumps)."""
    check(_same_releases_any_interleaving, examples)


def _same_releases_timed_workers(data):
    """Workers with their own cyclic iteration times, each leaving when done."""
    args, kwargs = _policy_args(data, max_workers=40)
    m = args[0]
    cycles = [data.draw(st.lists(time_step.filter(lambda t: t < 60), min_size=1, max_size=4))
              for _ in range(m)]
    n_iters = [data.draw(st.integers(min_value=1, max_value=30)) for _ in range(m)]
    latency = data.draw(st.sampled_from([0.0, 0.1]))
    twin = Twin(*args, **kwargs)
    drv = run_timed(twin, lambda i, k: cycles[i][k % len(cycles[i])], n_iters, latency=latency)
    assert sum(drv.clocks) == sum(n_iters)


@pytest.mark.parametrize('examples', EXAMPLES)
def test_same_releases_timed_workers(examples):
    """Workers with their own cyclic iteration times, each leaving when done."""
    check(_same_releases_timed_workers, examples)


# ---------------------------------------------------------------------------
# Seeded timelines, including many workers
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('seed', range(30))
@pytest.mark.parametrize('mode', DSSP_MODES)
def test_same_releases_seeded_interleavings(seed, mode):
    rng = random.Random(7000 + seed)
    m = rng.choice([1, 2, 3, 8, 50])
    s_lower = rng.randint(0, 3)
    s_upper = s_lower + rng.choice([0, 2, 12])
    twin = Twin(m, s_lower, s_upper, mode=mode, stall_factor=rng.choice([0.5, 2.0, 50.0]))
    run_random_order(twin, rng, steps=600, leave_prob=0.01)


@pytest.mark.parametrize('seed', range(12))
@pytest.mark.parametrize('mode', DSSP_MODES)
def test_same_releases_seeded_timed(seed, mode):
    rng = random.Random(seed)
    m = rng.randint(2, 12)
    s_lower = rng.randint(0, 4)
    policy = Twin(m, s_lower, s_lower + rng.randint(0, 8), mode=mode,
                  stall_factor=rng.choice([0.5, 2.0, 10.0]))
    run_timed(policy, _iteration_times(seed, m), [rng.randint(5, 60) for _ in range(m)],
              latency=rng.choice([0.0, 0.05, 1.0]))


@pytest.mark.parametrize('spec', [   # the other modes with many workers: seeded tests above
    (300, 3, 15, BOUNDED),
    pytest.param((300, 3, 15, PAPER), marks=pytest.mark.slow),
    pytest.param((300, 3, 15, THRESHOLD), marks=pytest.mark.slow),
    pytest.param((300, 3, 3, BOUNDED), marks=pytest.mark.slow),
    (150, 0, 0, BOUNDED), (200, 2, 6, BOUNDED)])
def test_same_releases_many_workers_one_straggler(spec):
    """The benchmark's shape: one worker 2.5x slower, 10% jitter, leaves at the end."""
    m, s_lower, s_upper, mode = spec
    rng = random.Random(m * 31 + s_upper)
    jitter = [[1.0 + 0.1 * rng.gauss(0.0, 1.0) for _ in range(40)] for _ in range(m)]

    def compute(i, k):
        return (2.5 if i == m // 2 else 1.0) * max(0.05, jitter[i][k % 40])

    twin = Twin(m, s_lower, s_upper, mode=mode)
    drv = run_timed(twin, compute, [rng.randint(15, 25) for _ in range(m)])
    assert any(r.granted for r in drv.releases) == (s_upper > s_lower)


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_same_releases_many_equal_slowest(mode):
    """Many workers tied at the slowest clock, with equal predicted pushes (rank ties)."""
    m = 60
    twin = Twin(m, 2, 8, mode=mode, stall_factor=2.0)
    drv = run_timed(twin, lambda i, k: 1.0 if i < 4 else 3.0, [40] * 4 + [12] * (m - 4))
    assert any(r.granted for r in drv.releases)


# ---------------------------------------------------------------------------
# Algorithm 2's r*: the neighbour search against the scan over every point
# ---------------------------------------------------------------------------
stamp = st.one_of(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12,
                            max_value=1e12),
                  st.sampled_from([0.0, 0.5, 1.0, 2.6, 5.2, 7.8, 10.0, 13.0, -1.0]),
                  st.integers(min_value=-1000, max_value=1000),
                  st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=1000, deadline=None, database=None)
@given(a_p=st.tuples(stamp, stamp), a_slow=st.tuples(stamp, stamp),
       r_max=st.integers(min_value=-2, max_value=16))
def test_predict_r_star_same_as_scan(a_p, a_slow, r_max):
    assert predict_r_star(a_p, a_slow, r_max) == oracle_sync.predict_r_star(a_p, a_slow, r_max)


@pytest.mark.parametrize('seed', range(20))
def test_predict_r_star_same_as_scan_near_ties(seed):
    """Grid-aligned stamps: many exactly equal gaps, where the first r must win."""
    rng = random.Random(seed)
    for _ in range(500):
        step = rng.choice([0.25, 0.5, 1.0, 0.1, 1 / 3])
        a_p = (rng.randint(0, 40) * step, None)
        a_p = (a_p[0], a_p[0] - rng.randint(0, 6) * step)
        a_s = rng.randint(0, 40) * step
        a_slow = (a_s, a_s - rng.randint(-2, 8) * step)
        r_max = rng.randint(0, 14)
        assert (predict_r_star(a_p, a_slow, r_max)
                == oracle_sync.predict_r_star(a_p, a_slow, r_max)), (a_p, a_slow, r_max)


# ---------------------------------------------------------------------------
# Targeted: equal predictions among the slowest workers
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('mode', DSSP_MODES)
def test_equal_predicted_pushes_take_the_larger_rank(mode):
    """Workers 1 and 2 share the smallest clock and are both predicted at 6.0.

    Worker 1 pushed at 2.0 and 4.0 (Sim = 6, 8, 10, ...), worker 2 at 4.0 and
    5.0 (Sim = 6, 7, 8, ...); worker 0 (Sim = 6.5, 6.75, 7.0, ...) gets r* = 0
    against worker 1 and r* = 2 against worker 2.  The tie in the prediction
    goes to the larger rank, as in the oracle's ``max(candidates, key=(predicted, i))``.
    """
    twin = Twin(3, 2, 6, mode=mode)
    drv = Driver(twin)
    for rank, t in [(1, 2.0), (2, 4.0), (1, 4.0), (2, 5.0),
                    (0, 5.5), (0, 5.75), (0, 6.0), (0, 6.25)]:
        assert [r.rank for r in drv.push(rank, t)] == [rank]
    assert predict_r_star((6.5, 6.25), (4.0, 2.0), 4) == 0
    assert predict_r_star((6.5, 6.25), (5.0, 4.0), 4) == 2
    (rel,) = drv.push(0, 6.5)
    assert rel.granted == 2


def _same_releases_on_a_coarse_time_grid(data):
    """Whole-second steps: equal predictions and exact stall limits are the rule."""
    args, kwargs = _policy_args(data, max_workers=12)
    drv = Driver(Twin(*args, **kwargs))
    now = 0.0
    for _ in range(data.draw(st.integers(min_value=1, max_value=250), label='events')):
        runnable = drv.runnable()
        rank = runnable[data.draw(st.integers(0, len(runnable) - 1), label='who')]
        now += data.draw(st.sampled_from([0.0, 1.0, 1.0, 2.0, 5.0]), label='step')
        if len(drv.active) > 1 and data.draw(st.integers(0, 40), label='leave?') == 0:
            drv.leave(rank)
        else:
            drv.push(rank, now)


@pytest.mark.parametrize('examples', EXAMPLES)
def test_same_releases_on_a_coarse_time_grid(examples):
    """Whole-second steps: equal predictions and exact stall limits are the rule."""
    check(_same_releases_on_a_coarse_time_grid, examples)


def test_twin_sees_a_threshold_difference():
    """The comparison covers the thresholds: the state after a grant differs."""
    twin = Twin(2, 1, 5, mode=THRESHOLD)
    twin.new = SyncPolicy(2, 1, 5, mode=THRESHOLD)
    drv = Driver(twin)
    for rank, t in [(1, 1.0), (1, 3.0), (0, 3.0), (0, 3.5), (0, 4.0)]:
        drv.push(rank, t)                   # worker 0 at clock 3, worker 1 at 2: lead 1
    (rel,) = drv.push(0, 4.5)               # lead 2 > sL: Sim_p 4.5, 5, ... meets 5.0: r* = 1
    assert (rel.granted, twin.old.threshold, twin.new.threshold) == (1, [2, 1], [2, 1])
    twin.new.threshold[0] = 1               # as if the grant had not raised s_p
    with pytest.raises(AssertionError, match='threshold differs'):
        twin.on_leave(1)
