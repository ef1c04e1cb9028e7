"""The three DSSP modes on the Figure 2 timeline, and the ``threshold`` mode's own rules.

No MXNet, no processes.  The Figure 2 replay here is timed: a released worker
starts its next iteration at once and pushes one iteration time later, so a
hold delays every later push of the worker (the replay in ``test_sync.py``
keeps fixed push times and only covers the first grant).  Worker 0 takes
1 s per iteration, worker 1 (the slowest) 2.6 s, ``[sL, sU] = [6, 10]``
(``R = [0, 4]``): the controller first runs at t = 10 and returns r* = 3.
The slowest worker pushes at multiples of 2.6 s, so at t = 13.0 both
workers push at the same instant and the order of the two pushes is a
parameter.
"""
import pytest

from mxnet_ssp import config
from mxnet_ssp.controller import protocol
from mxnet_ssp.core.names import DSSP_MODES
from mxnet_ssp.core.sync import BOUNDED, PAPER, THRESHOLD, SyncPolicy, predict_r_star
from test_sync import Driver, _persistent, _policy_before_decision, run_timed

SL, SU = 6, 10


def _figure2_timed(mode, fast_first, end=30.0):
    """Run the two workers of Figure 2 up to `end` s.

    Returns the Driver and a list of ``(time, rank, releases)`` per push.
    """
    drv = Driver(SyncPolicy(2, SL, SU, mode=mode))
    next_push = {0: 1.0, 1: 26 / 10}
    slow_pushes = [1]
    log = []
    while True:
        due = [(t, r) for r, t in next_push.items() if t is not None and t <= end]
        if not due:
            return drv, log
        t, rank = min(due, key=lambda e: (e[0], e[1] if fast_first else -e[1]))
        next_push[rank] = None                       # pushed: blocked until released
        out = drv.push(rank, t)
        log.append((t, rank, out))
        for rel in out:
            if rel.rank == 0:
                next_push[0] = t + 1.0
            else:
                slow_pushes[0] += 1
                next_push[1] = slow_pushes[0] * 26 / 10   # exact: 13.0 == 5 x 2.6 here


def _fast(log):
    """Per push of worker 0: (push time, its own Release or None, when it was released)."""
    rows = []
    for i, (t, rank, out) in enumerate(log):
        if rank != 0:
            continue
        own = next((r for r in out if r.rank == 0), None)
        released_at = t if own is not None else next(
            (t2 for t2, _, out2 in log[i + 1:] if any(r.rank == 0 for r in out2)), None)
        rows.append((t, own, released_at))
    return rows


def _row(log, t):
    return next(row for row in _fast(log) if row[0] == t)


@pytest.mark.parametrize('fast_first', [True, False])
@pytest.mark.parametrize('mode', DSSP_MODES)
def test_figure2_first_grant_is_the_same_in_every_mode(mode, fast_first):
    _, log = _figure2_timed(mode, fast_first)
    for t in range(1, 10):                            # lead <= sL: no controller
        _, own, _ = _row(log, float(t))
        assert own is not None and own.granted == 0 and own.lead <= SL
    _, grant, _ = _row(log, 10.0)
    assert (grant.granted, grant.lead, grant.clock) == (3, 7, 10)
    assert grant.extra_left == {BOUNDED: 2, PAPER: 3, THRESHOLD: 0}[mode]


def test_figure2_bounded_fast_push_first_stops_at_sim_p_r_star():
    """The slowest's push at 13.0 comes after the fast one's: the grant ends at
    Sim_p[3] = 13.0, and the worker waits until its lead is back to sL (line 17)."""
    _, log = _figure2_timed(BOUNDED, fast_first=True)
    assert [_row(log, t)[1].extra_left for t in (10.0, 11.0, 12.0)] == [2, 1, 0]
    t, own, released_at = _row(log, 13.0)
    assert own is None
    # held at clock 13: free once the slowest has pushed 7 times (at 7 x 2.6 = 18.2 s)
    assert released_at == pytest.approx(18.2)
    release = next(r for t2, _, out in log if t2 == released_at for r in out if r.rank == 0)
    assert release.lead == SL


def test_figure2_bounded_slow_push_first_grants_again():
    """Same instant, other order: at the fast worker's push at 13.0 the slowest
    has already pushed, the lead is 8, the controller runs again and grants:
    the grant does not stop at Sim_p[r*]."""
    _, log = _figure2_timed(BOUNDED, fast_first=False)
    _, own, _ = _row(log, 13.0)
    assert own is not None and own.lead == 8
    assert own.granted == predict_r_star((13.0, 12.0), (13.0, 10.4), SU - 8 + 1) == 3
    assert _row(log, 14.0)[1] is not None and _row(log, 15.0)[1] is not None


@pytest.mark.parametrize('fast_first', [True, False])
def test_figure2_paper_never_waits(fast_first):
    """r_p <- r* (no decrement), then a new grant each time it runs out: like ASP."""
    _, log = _figure2_timed(PAPER, fast_first)
    rows = _fast(log)
    assert len(rows) == 30 and all(own is not None for _, own, _ in rows)
    assert [_row(log, t)[1].extra_left for t in (10.0, 11.0, 12.0, 13.0)] == [3, 2, 1, 0]
    assert _row(log, 14.0)[1].granted == 4
    assert max(own.lead for _, own, _ in rows) > SU


@pytest.mark.parametrize('fast_first', [True, False])
def test_figure2_threshold_waits_for_the_slowest_push_only(fast_first):
    """s_p = sL + 3 = 9: released while the lead is <= 9, then held at lead 10
    only until the slowest worker's next push (the dashed line of Figure 2)."""
    drv, log = _figure2_timed(THRESHOLD, fast_first)
    leads = [_row(log, t)[1].lead for t in (10.0, 11.0, 12.0, 13.0, 14.0)]
    assert leads == ([7, 7, 8, 9, 9] if fast_first else [7, 7, 8, 8, 9])
    t, own, released_at = _row(log, 15.0)
    assert own is None                               # clock 15, slowest at 5: lead 10 > 9
    assert released_at == pytest.approx(15.6)        # the slowest's 6th push: lead 9
    release = next(r for t2, _, out in log if t2 == released_at for r in out if r.rank == 0)
    assert (release.lead, release.granted) == (9, 0)
    # At 16.6 the fast worker's latest interval includes the wait (1.6 s), so
    # Algorithm 2 now meets the slowest's push at 18.2 with r* = 1: s_p = 7,
    # below the lead of 10, and the worker waits for three slowest pushes.
    assert predict_r_star((16.6, 15.0), (15.6, 13.0), SU - SL) == 1
    t, own, released_at = _row(log, 16.6)
    assert own is None
    at_16_6, _ = _figure2_timed(THRESHOLD, fast_first, end=16.6)
    assert at_16_6.policy.waiting == {0: 1} and at_16_6.policy.threshold == [SL + 1, SL]
    assert released_at == pytest.approx(23.4)
    assert max(r.lead for r in drv.releases) <= SU


def test_figure2_first_waits_compared():
    """Where each mode first holds the fast worker, and for how long (fast push first)."""
    first_wait = {}
    for mode in DSSP_MODES:
        _, log = _figure2_timed(mode, fast_first=True)
        held = [(t, released_at) for t, own, released_at in _fast(log) if own is None]
        first_wait[mode] = held[0] if held else None
    assert first_wait[BOUNDED] == (13.0, pytest.approx(18.2))
    assert first_wait[THRESHOLD] == (15.0, pytest.approx(15.6))
    assert first_wait[PAPER] is None


# ---------------------------------------------------------------------------
# threshold mode: the threshold itself
# ---------------------------------------------------------------------------
def test_threshold_is_sl_in_the_other_modes():
    for mode in (BOUNDED, PAPER):
        policy, drv = _persistent(mode, iters=30)
        assert any(r.granted for r in drv.releases)
        assert policy.threshold == [policy.s_lower] * 3
    assert SyncPolicy(3, 2, 6, mode=THRESHOLD).threshold == [2, 2, 2]


def test_refused_grant_sets_the_threshold_back_to_sl():
    """A grant raises s_p; a later controller call that refuses (stalled slowest) lowers it."""
    policy = _policy_before_decision(7.0, THRESHOLD)  # sL = 2, sU = 6
    (rel,) = policy.on_push(0, 7.0)
    assert (rel.granted, rel.lead, policy.threshold) == (4, 3, [6, 2])
    for t, lead in ((7.25, 4), (7.5, 5), (7.75, 6)):  # within s_p = 6: no controller
        (rel,) = policy.on_push(0, t)
        assert (rel.lead, rel.granted, rel.extra_left) == (lead, 0, 0)
    # lead 7 > 6: the controller runs; 8.0 - 2.0 > 2.5 x 2: stalled, r* = 0, s_p = sL
    assert policy.on_push(0, 8.0) == []
    assert policy.threshold == [2, 2] and policy.waiting == {0: 0}
    # held at clock 9 until the slowest reaches 9 - 2 = 7: its 5th push from clock 2
    for t in (9.0, 10.0, 11.0, 12.0):
        assert [r.rank for r in policy.on_push(1, t)] == [1]
    out = policy.on_push(1, 13.0)
    assert sorted(r.rank for r in out) == [0, 1]
    assert next(r for r in out if r.rank == 0).lead == 2


class _Recorder:
    """A SyncPolicy that also notes, per push, whether the pusher was the fastest."""

    def __init__(self, policy):
        self.policy = policy
        self.pushes = []                  # (rank, was fastest, its Release or None, freed others)

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def on_push(self, rank, now):
        out = self.policy.on_push(rank, now)
        fastest = self.policy.clocks[rank] == max(self.policy.clocks[i]
                                                  for i in self.policy.active)
        own = next((r for r in out if r.rank == rank), None)
        self.pushes.append((rank, fastest, own, [r for r in out if r.rank != rank]))
        return out

    def on_leave(self, rank):
        return self.policy.on_leave(rank)


def _mixed_speeds(mode):
    """4 workers of 1.0, 1.1, 1.3 and 2.5 s per iteration with a little jitter, [2, 8]."""
    rec = _Recorder(SyncPolicy(4, 2, 8, mode=mode))
    base = [1.0, 1.1, 1.3, 2.5]
    run_timed(rec, lambda i, k: base[i] * (1.0 + 0.2 * ((k * 7 + i * 3) % 5) / 4),
              [200, 180, 160, 80])
    return rec


def test_thresholds_differ_between_workers_and_hold_past_sl():
    """The Driver checks every event against the threshold rules; this checks that
    the run exercises what sets the mode apart from line 17 read literally."""
    rec = _mixed_speeds(THRESHOLD)
    s_lower = rec.s_lower
    # a held worker freed by another's push at a lead above sL (its own s_p)
    freed = [r for _, _, _, others in rec.pushes for r in others]
    assert any(r.lead > s_lower for r in freed)
    # a pusher that is not the fastest, released above sL (its s_p from an earlier grant)
    assert any(own is not None and not fastest and own.lead > s_lower
               for _, fastest, own, _ in rec.pushes)
    # several workers hold a threshold above sL at some point: thresholds differ
    assert len({rank for rank, _, own, _ in rec.pushes if own is not None and own.granted}) >= 2
    assert rec.max_lead <= rec.s_upper
    # bounded mode frees waiters only at sL, and never releases a non-granted,
    # non-extra pusher above sL
    rec = _mixed_speeds(BOUNDED)
    assert all(r.lead <= s_lower for _, _, _, others in rec.pushes for r in others)


def test_threshold_mode_bound_under_a_persistent_straggler():
    policy, drv = _persistent(THRESHOLD)
    assert policy.max_lead <= policy.s_upper
    assert all(r.lead <= policy.s_upper for r in drv.releases)
    assert max(r.lead for r in drv.releases) > policy.s_lower     # it used its range
    assert all(r.extra_left == 0 for r in drv.releases)
    assert all(policy.s_lower <= t <= policy.s_upper for t in policy.threshold)


def test_sl_equal_su_threshold_is_ssp():
    policy = SyncPolicy(3, 2, 2, mode=THRESHOLD)
    drv = Driver(policy)
    for k in range(1, 40):
        for rank in drv.runnable():
            drv.push(rank, k + rank * 0.1)
    assert policy.threshold == [2, 2, 2]
    assert all(r.granted == 0 and r.lead <= 2 for r in drv.releases)


# ---------------------------------------------------------------------------
# the mode everywhere it is named
# ---------------------------------------------------------------------------
def test_mode_lists_agree():
    assert DSSP_MODES == ('bounded', 'paper', 'threshold')
    assert config.parse_mode(' Threshold ') == THRESHOLD
    with pytest.raises(config.ConfigError, match="MXNET_SSP_DSSP_MODE='thresh'.*bounded, paper, "
                                                 "threshold"):
        config.from_env('dist_dssp', environ={config.ENV_DSSP_MODE: 'thresh'})
    with pytest.raises(ValueError, match='bounded, paper, threshold'):
        SyncPolicy(2, 0, 3, mode='Threshold')


def test_threshold_mode_on_the_wire():
    payload = protocol.encode_welcome(4, 3, 15, THRESHOLD, 30.0)[4:]
    assert protocol.decode_welcome(payload) == (4, 3, 15, THRESHOLD, 30.0)
