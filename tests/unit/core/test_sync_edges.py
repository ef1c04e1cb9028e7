"""SyncPolicy and predict_r_star at the edges the oracle tests rarely reach.

* Stall detection at the last bit: a slowest worker whose stall limit a_0 + f x interval
  rounds to exactly `now` while ``now - a_0 > f x interval`` holds (it is stalled), with the
  slowest worker at rank 1, so that its rank cannot stand in for a time.
* predict_r_star's scan (used when a predicted time overflows to inf), checked against the
  points computed by hand.
"""
import math

import pytest

from mxnet_ssp.core.names import DSSP_MODES
from mxnet_ssp.core.sync import BOUNDED, THRESHOLD, Release, SyncPolicy, predict_r_star

# Worker 1 pushes at 0.0 and 0.7: interval 0.7, allowed age 2.5 x 0.7 = 1.75, stall limit
# 0.7 + 1.75 = 2.45 in binary64; but 2.45 - 0.7 = 1.7500000000000002 > 1.75: at EDGE the
# limit equals now and the worker is stalled; one float earlier (BEFORE) it is not.
FACTOR = 2.5
EDGE = 2.45
BEFORE = math.nextafter(EDGE, 0.0)


def test_the_edge_in_floating_point():
    """The premise: at `EDGE` the limit equals now, yet the exact test says stalled."""
    assert 0.7 + FACTOR * (0.7 - 0.0) == EDGE and EDGE - 0.7 > FACTOR * 0.7
    assert not (BEFORE - 0.7 > FACTOR * 0.7)


def _policy(mode):
    """Worker 1 (slowest, clock 2) pushed at 0.0 and 0.7; worker 0 is at clock 4 (lead
    2 = sL, last pushes at 2.0 and 2.1) and its next push has lead 3 > sL, which calls the
    controller."""
    policy = SyncPolicy(2, 2, 6, mode=mode, stall_factor=FACTOR)
    for rank, when in [(1, 0.0), (0, 0.1), (0, 0.2), (1, 0.7), (0, 2.0), (0, 2.1)]:
        assert [r.rank for r in policy.on_push(rank, when)] == [rank]
    assert policy.clocks == [4, 2]
    return policy


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_slowest_stalled_when_its_limit_rounds_to_now(mode):
    policy = _policy(mode)
    assert predict_r_star((EDGE, 2.1), (0.7, 0.0), 4) > 0   # it would grant otherwise
    assert policy.on_push(0, EDGE) == []
    assert policy.waiting == {0: 0}


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_slowest_not_stalled_one_step_before_the_edge(mode):
    policy = _policy(mode)
    (rel,) = policy.on_push(0, BEFORE)
    # Sim_p = 2.45-, 2.8, ...; Sim_slowest = 1.4, 2.1, 2.8, ...: r* = 1
    expected = predict_r_star((BEFORE, 2.1), (0.7, 0.0), 4)
    assert expected == 1
    assert (rel.rank, rel.clock, rel.lead, rel.granted) == (0, 5, 3, expected)


def _four(mode=BOUNDED):
    """Workers 1, 2, 3 at clock 2: ranks 1 and 2 pushed at 0.0 and 0.9 (stall limit
    0.9 + 2.25 = 3.15), rank 3 at 0.0 and 0.7 (limit 2.45, as worker 1 above); worker 0 at
    clock 4, about to push with lead 3."""
    policy = SyncPolicy(4, 2, 6, mode=mode, stall_factor=FACTOR)
    for rank, when in [(1, 0.0), (2, 0.0), (3, 0.0), (0, 0.1), (0, 0.2),
                       (1, 0.9), (2, 0.9), (3, 0.7), (0, 2.0), (0, 2.1)]:
        assert [r.rank for r in policy.on_push(rank, when)] == [rank]
    assert policy.clocks == [4, 2, 2, 2]
    return policy


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_the_stalled_one_of_several_slowest_workers_is_found(mode):
    """Only rank 3 is stalled at EDGE; its rank (3) is larger than the time (2.45), so a
    search that read the rank where the limit belongs would miss it."""
    assert _four(mode).on_push(0, EDGE) == []


@pytest.mark.parametrize('mode', DSSP_MODES)
def test_several_slowest_workers_none_stalled(mode):
    (rel,) = _four(mode).on_push(0, BEFORE)
    # the slowest predicted to push last: ranks 1 and 2 (next push 1.8), the largest rank;
    # Sim_slowest = 1.8, 2.7, 3.6, ...; Sim_p = 2.45-, 2.8, 3.15, 3.5, 3.85: gaps 0.25, 0.1,
    # 0.45, 0.1, 0.25: r* = 1 (ties go to the smallest r)
    assert rel.granted == predict_r_star((BEFORE, 2.1), (0.9, 0.0), 4) == 1


# ---------------------------------------------------------------------------
# predict_r_star: the scan for times that overflow
# ---------------------------------------------------------------------------
def test_scan_when_the_slowest_prediction_overflows():
    """Slowest: 1e308 after 0.6e308, so Sim_slowest = [1.4e308, inf, inf, ...]; p: 0 after
    -0.5e308, so Sim_p[r] = 0.5e308 r.  Gaps to 1.4e308: 1.4, 0.9, 0.4 (x 1e308) for
    r = 0, 1, 2, and 0.1e308 for r = 3: r* is the largest r allowed."""
    a_p, a_slow = (0.0, -0.5e308), (1e308, 0.6e308)
    assert math.isinf(a_slow[0] + 2 * (a_slow[0] - a_slow[1]))
    assert predict_r_star(a_p, a_slow, 2) == 2
    assert predict_r_star(a_p, a_slow, 3) == 3
    assert predict_r_star(a_p, a_slow, 4) == 3       # r = 4: 2e308 overflows, gap inf


def test_the_scan_starts_from_ps_latest_push():
    """Slowest: 1e308 after 0.5e308, so Sim_slowest = [1.5e308, inf, ...]; p: 1.5e308 after
    1e308, so Sim_p[0] = 1.5e308 meets Sim_slowest[0]: r* = 0 (from p's second latest push,
    1e308, r = 1 would land there instead)."""
    assert predict_r_star((1.5e308, 1.0e308), (1e308, 0.5e308), 3) == 0


def test_scan_with_every_gap_infinite_keeps_r_zero():
    """Every Sim_slowest point is inf: every gap is inf and the first r (0) stays."""
    assert predict_r_star((0.0, -1.0), (1.5e308, 1.0e308), 3) == 0


def test_r_max_zero_returns_zero_without_reading_the_times():
    assert predict_r_star((1.0, 0.0), (5.0, 4.0), 0) == 0
    assert predict_r_star((math.nan, math.nan), (math.inf, 0.0), 0) == 0


# -- on_join: a lost worker's replacement (elastic rejoin) ------------------------------

def test_join_at_the_slowest_clock_holds_the_fast_one_back_again():
    pol = SyncPolicy(3, 1, 1)
    pol.on_leave(1)                       # lost at clock 0
    for t in range(3):
        pol.on_push(0, float(t))
        pol.on_push(2, float(t))
    assert pol.t_slowest() == 3
    assert pol.on_join(1, 3, 10.0) == []
    assert pol.clocks[1] == 3 and 1 in pol.active and pol.stamps[1] == [10.0, 10.0]
    assert pol.slowest_ranks() == [0, 1, 2]
    rel = pol.on_push(0, 11.0)            # lead 1 <= 1: goes on
    assert [r.rank for r in rel] == [0]
    assert pol.on_push(0, 12.0) == []     # lead 2 > 1: held, now also for the rejoiner
    pol.on_push(2, 12.5)
    released = pol.on_push(1, 13.0)       # the rejoiner's first push frees worker 0
    assert sorted(r.rank for r in released) == [0, 1]


def test_a_rejoiner_without_history_gets_no_grant_for_the_others():
    pol = SyncPolicy(2, 0, 4, mode=BOUNDED)
    for t in range(4):
        pol.on_push(1, float(t))
        pol.on_push(0, float(t))
    pol.on_leave(1)
    pol.on_join(1, 4, 4.0)
    pol.on_push(0, 4.5)                   # lead 1 > 0: would ask Algorithm 2
    assert pol.waiting == {0: 0}          # the slowest (the rejoiner) counts as stalled


@pytest.mark.parametrize('rank, clock, why', [(0, 3, 'is in the job'), (5, 3, 'outside'),
                                              (1, 2, 'below the slowest')])
def test_join_refuses_a_member_an_unknown_rank_and_a_clock_below_the_slowest(rank, clock, why):
    pol = SyncPolicy(2, 1, 1)
    pol.on_leave(1)
    for t in range(3):
        pol.on_push(0, float(t))
    with pytest.raises(ValueError, match=why):
        pol.on_join(rank, clock, 5.0)


@pytest.mark.parametrize('rank, clock, message', [
    (0, 3, 'worker 0 is in the job'),
    (2, 3, 'rank 2 is outside 0..1'),           # the first rank past the last
    (-1, 3, 'rank -1 is outside 0..1'),
    (1, 2, 'worker 1 cannot join at clock 2 below the slowest (3)'),
    (1, -1, 'worker 1 cannot join at clock -1 below the slowest (3)'),
])
def test_join_refusals_say_which_rank_and_clock(rank, clock, message):
    pol = SyncPolicy(2, 1, 1)
    pol.on_leave(1)
    for t in range(3):
        pol.on_push(0, float(t))
    with pytest.raises(ValueError) as info:
        pol.on_join(rank, clock, 5.0)
    assert str(info.value) == message
    assert pol.active == {0} and pol.clocks == [3, 0]           # nothing changed


def test_join_of_the_last_rank_and_of_rank_0():
    pol = SyncPolicy(3, 1, 1)
    pol.on_leave(2)
    pol.on_leave(0)
    assert pol.on_join(2, 0, 1.0) == [] and pol.on_join(0, 0, 1.0) == []
    assert pol.active == {0, 1, 2} and pol.slowest_ranks() == [0, 1, 2]


def _two_in_step(mode=BOUNDED):
    """Workers 0 and 1 push 4 times, 1 s apart (worker 1 half a second later): clocks 4, 4."""
    pol = SyncPolicy(2, 0, 4, mode=mode, stall_factor=100.0)
    for t in range(4):
        pol.on_push(0, float(t))
        pol.on_push(1, float(t) + 0.5)
    return pol


def test_a_rejoiner_at_the_fastest_clock_is_the_fastest_and_asks_algorithm_2():
    pol = _two_in_step()
    pol.on_leave(1)
    assert pol.on_join(1, 4, 4.0) == []
    assert pol.extra == [0, 0] and pol.stamps[1] == [4.0, 4.0]
    # lead 1 > sL = 0, at the fastest clock: Algorithm 2 grants r* = 4 (worker 0 is not
    # stalled); in bounded mode this push uses one of them
    assert pol.on_push(1, 4.2) == [Release(1, 5, 1, 4, 4, 3)]
    assert pol.extra == [0, 3]
    # it leaves with 3 extra iterations left and comes back without them
    pol.on_leave(1)
    assert pol.on_join(1, 5, 6.0) == []
    assert pol.extra == [0, 0] and pol.clocks == [4, 5]


def test_a_rejoiner_above_the_fastest_clock_becomes_the_fastest():
    pol = _two_in_step()
    pol.on_leave(1)
    assert pol.on_join(1, 6, 4.0) == []
    assert pol.lead(1) == 2 and pol.t_slowest() == 4
    # lead 3 > sL at the fastest clock: granted 1 by Algorithm 2, released (3 <= sU = 4)
    assert pol.on_push(1, 4.5) == [Release(1, 7, 3, 4, 1, 0)]


def test_a_rejoiner_starts_at_the_lower_threshold():
    pol = _two_in_step(THRESHOLD)
    pol.on_leave(1)
    assert pol.on_join(1, 5, 5.0) == []
    assert pol.threshold == [0, 0]
    assert pol.on_push(1, 5.5) == []       # lead 2 > sL + r* = 0 + 1: held
    assert pol.threshold == [0, 1] and pol.waiting == {1: 1}
    pol.on_leave(1)                        # lost while held, with its threshold raised
    assert pol.on_join(1, 6, 7.0) == []
    assert pol.threshold == [0, 0] and pol.waiting == {}


def test_after_everyone_left_a_rejoin_below_the_old_clocks_still_releases_the_held():
    # the job had released up to clock 5 when both workers left; they come back at clock 0
    # (below it): a worker held at the new clocks is released when the other catches up
    pol = SyncPolicy(2, 1, 1)
    now = 0.0
    for _ in range(5):
        for rank in (0, 1):
            now += 1.0
            pol.on_push(rank, now)
    pol.on_leave(0)
    pol.on_leave(1)
    assert pol.on_join(0, 0, 20.0) == [] and pol.on_join(1, 0, 20.0) == []
    assert [r.rank for r in pol.on_push(0, 21.0)] == [0]
    assert pol.on_push(0, 22.0) == [] and 0 in pol.waiting        # lead 2 > s = 1: held
    released = pol.on_push(1, 23.0)
    assert [(r.rank, r.clock, r.lead) for r in released] == [(1, 1, 0), (0, 2, 1)]
    assert not pol.waiting


def test_join_after_everyone_left_starts_the_clocks_again():
    pol = SyncPolicy(2, 1, 1)
    pol.on_leave(0)
    pol.on_leave(1)
    assert pol.t_slowest() is None
    pol.on_join(1, 0, 1.0)
    assert pol.t_slowest() == 0 and pol.slowest_ranks() == [1]
    assert [r.rank for r in pol.on_push(1, 2.0)] == [1]


# -- the invariants' own checks ----------------------------------------------------------

def test_the_lead_is_zero_once_every_worker_left():
    pol = SyncPolicy(2, 1, 1)
    pol.on_push(0, 1.0)
    pol.on_leave(0)
    pol.on_leave(1)
    assert pol.t_slowest() is None
    assert pol.lead(0) == 0 and pol.lead(1) == 0


@pytest.mark.parametrize('mode', [BOUNDED, THRESHOLD])
def test_a_release_past_su_stops_with_the_broken_invariant_named(mode):
    # a state no sequence of events reaches (Algorithm 1 holds a worker at sU): worker 1 set
    # 4 clocks ahead by hand; the policy refuses to release it rather than break the bound
    pol = SyncPolicy(2, 1, 3, mode=mode)
    pol.clocks[1] = 4
    with pytest.raises(AssertionError) as err:
        pol._release(1, granted=0)
    assert str(err.value) == '%s mode released worker 1 at lead 4 > sU=3' % mode
    pol.clocks[1] = 3
    assert pol._release(1, granted=0).lead == 3 and pol.max_lead == 3


def test_paper_mode_may_release_past_su():
    pol = SyncPolicy(2, 1, 3, mode='paper')
    pol.clocks[1] = 9
    assert pol._release(1, granted=0).lead == 9 and pol.max_lead == 9


def test_a_push_from_a_held_worker_is_refused_naming_it():
    pol = SyncPolicy(2, 1, 1)
    pol.on_push(1, 1.0)
    assert pol.on_push(1, 2.0) == [] and 1 in pol.waiting      # lead 2 > s = 1: held
    with pytest.raises(ValueError) as err:
        pol.on_push(1, 3.0)
    assert str(err.value) == 'worker 1 pushed again before it was released'


@pytest.mark.parametrize('call', ['push', 'leave'])
def test_push_and_leave_refusals_say_which_rank(call):
    pol = SyncPolicy(3, 1, 1)

    def act(rank):
        return pol.on_push(rank, 1.0) if call == 'push' else pol.on_leave(rank)
    for rank, message in [(3, 'rank 3 is outside 0..2'), (-1, 'rank -1 is outside 0..2')]:
        with pytest.raises(ValueError) as info:
            act(rank)
        assert str(info.value) == message
    pol.on_leave(1)
    with pytest.raises(ValueError) as info:
        act(1)
    assert str(info.value) == 'worker 1 already left the job'


@pytest.mark.parametrize('workers', [0, -2])
def test_a_policy_without_workers_is_refused_naming_the_count(workers):
    with pytest.raises(ValueError) as info:
        SyncPolicy(workers, 1, 1)
    assert str(info.value) == 'num_workers must be >= 1, got %d' % workers
