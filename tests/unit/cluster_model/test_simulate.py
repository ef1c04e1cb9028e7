"""Tests of the discrete-event simulator :mod:`mxnet_ssp.lab.cluster_model.simulate` (no MXNet processes)."""
import dataclasses
import pytest

from mxnet_ssp.lab.cluster_model.simulate import (DEFAULT_POLICIES, SimResult, format_table, main, make_policy,
                                simulate)
from mxnet_ssp.core.sync import BOUNDED, PAPER, SyncPolicy

HETERO = [1.0, 1.0, 1.0, 2.5]


def test_asp_has_no_wait_and_runs_at_full_speed():
    r = simulate(HETERO, 'asp', wall_time=100.0)
    assert r.iterations == [100, 100, 100, 40]
    assert r.wait == [0.0] * 4
    assert r.fast_wait_fraction == 0.0
    assert r.max_lead == 60                    # 100 - 40 at t = 100
    assert sum(r.lead_hist.values()) == r.total_iterations
    assert r.iterations_per_second == pytest.approx(340 / 100.0)


def test_asp_none_and_string_agree():
    assert simulate(HETERO, None, wall_time=50.0) == simulate(HETERO, 'asp', wall_time=50.0)


def test_ssp0_is_lockstep_without_jitter():
    # every round lasts max(times) = 2.5 s; round k ends at 2.5 k; 100 s -> 40 rounds
    r = simulate(HETERO, 'ssp:0', wall_time=100.0)
    assert r.iterations == [40, 40, 40, 40]
    assert set(r.lead_hist) == {0} and r.max_lead == 0
    # each fast worker computes 1 s and waits 1.5 s per round
    for i in range(3):
        assert r.wait[i] == pytest.approx(40 * 1.5)
    assert r.wait[3] == pytest.approx(0.0)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_ssp0_is_lockstep_with_jitter(seed):
    times = [1.0, 1.3, 0.7]
    r = simulate(times, 'ssp:0', iterations=30, jitter=0.4, seed=seed)
    assert r.iterations == [30, 30, 30]
    assert set(r.lead_hist) == {0}
    # at any instant clocks differ by at most one; in wall-time mode too
    for t in (5.0, 11.3, 20.0):
        w = simulate(times, 'ssp:0', wall_time=t, jitter=0.4, seed=seed)
        assert max(w.iterations) - min(w.iterations) <= 1
    # lockstep is never faster than running free
    free = simulate(times, 'asp', iterations=30, jitter=0.4, seed=seed)
    assert r.wall_time >= free.wall_time


@pytest.mark.parametrize('s', [1, 3, 15])
def test_ssp_fast_workers_run_s_ahead_of_persistent_straggler(s):
    r = simulate(HETERO, 'ssp:%d' % s, wall_time=300.0)
    assert r.iterations[3] == 120
    assert r.iterations[:3] == [120 + s] * 3
    assert r.max_lead == s


@pytest.mark.parametrize('mode', ['bounded', 'threshold'])
@pytest.mark.parametrize('jitter', [0.0, 0.3])
@pytest.mark.parametrize('times', [HETERO, [1.0, 1.0, 1.0, 1.0], [0.5, 3.0, 1.0]])
def test_bounded_dssp_lead_never_exceeds_su(times, jitter, mode):
    r = simulate(times, 'dssp:3:15:' + mode, wall_time=200.0, jitter=jitter, seed=7)
    assert r.max_lead <= 15
    assert max(r.lead_hist) <= 15


def test_paper_dssp_lead_grows_under_persistent_straggler():
    bounded = simulate(HETERO, 'dssp:3:15:bounded', wall_time=300.0)
    paper = simulate(HETERO, 'dssp:3:15:paper', wall_time=300.0)
    asp = simulate(HETERO, 'asp', wall_time=300.0)
    assert bounded.max_lead <= 15 < paper.max_lead
    # paper mode keeps renewing the grant: the fast workers never stop, like ASP
    assert paper.iterations == asp.iterations
    assert paper.iterations_per_second > 2 * bounded.iterations_per_second


def test_paper_dssp_with_jitter_is_not_asp():
    """docs/dssp_modes.md, third table: one r* = 0 makes the fast worker wait for its lead."""
    times = [1.0, 2.5]
    asp = simulate(times, 'asp', wall_time=300.0, jitter=0.1, seed=2)
    paper = simulate(times, 'dssp:3:15:paper', wall_time=300.0, jitter=0.1, seed=2)
    threshold = simulate(times, 'dssp:3:15:threshold', wall_time=300.0, jitter=0.1, seed=2)
    # the fast worker ran ahead like ASP (lead far past sU), then stopped for good
    assert paper.max_lead > 4 * 15 and threshold.max_lead <= 15
    assert paper.iterations[0] < 0.6 * asp.iterations[0]
    assert paper.fast_wait_fraction > 0.4 and asp.fast_wait_fraction == 0.0


def test_deterministic_with_seed():
    a = simulate(HETERO, 'dssp:3:15', wall_time=100.0, jitter=0.3, seed=42)
    b = simulate(HETERO, 'dssp:3:15', wall_time=100.0, jitter=0.3, seed=42)
    c = simulate(HETERO, 'dssp:3:15', wall_time=100.0, jitter=0.3, seed=43)
    assert a == b
    assert a != c


def test_same_compute_times_for_every_policy():
    # the jitter stream belongs to the worker, not to the event order: a worker
    # that is never held does the same iterations under any policy
    asp = simulate([1.0, 1.0], 'asp', iterations=50, jitter=0.3, seed=5)
    loose = simulate([1.0, 1.0], 'ssp:100', iterations=50, jitter=0.3, seed=5)
    assert loose.wall_time == asp.wall_time
    assert loose.wait == [0.0, 0.0]


def test_latency_is_paid_on_every_release():
    r = simulate([1.0, 1.0], 'ssp:5', wall_time=30.0, latency=0.5)
    # pushes at 1, 2.5, 4, ..., 29.5: 20 per worker, each followed by 0.5 s idle
    assert r.iterations == [20, 20]
    assert r.wait == [pytest.approx(10.0), pytest.approx(10.0)]
    assert simulate([1.0, 1.0], 'asp', wall_time=30.0, latency=0.5).wait == [0.0, 0.0]


def test_iterations_mode_everyone_finishes_and_leaves():
    for spec in DEFAULT_POLICIES + ('ssp:0',):
        r = simulate(HETERO, spec, iterations=40, jitter=0.2, seed=3)
        assert r.iterations == [40] * 4, spec
        assert r.wall_time > 0
    # the straggler alone sets the time when nobody waits for it
    r = simulate(HETERO, 'asp', iterations=40)
    assert r.wall_time == pytest.approx(100.0)


def test_accepts_a_fresh_policy_object():
    policy = SyncPolicy(4, 3, 15, mode=PAPER)
    r = simulate(HETERO, policy, wall_time=60.0)
    assert r.label == 'dssp:3:15:paper'
    assert r.max_lead == policy.max_lead
    with pytest.raises(ValueError, match='fresh'):
        simulate(HETERO, policy, wall_time=60.0)
    with pytest.raises(ValueError, match='workers'):
        simulate(HETERO, SyncPolicy(3, 0, 0), wall_time=60.0)


def test_make_policy():
    assert make_policy('asp', 3) is None
    p = make_policy('ssp:4', 3)
    assert (p.num_workers, p.s_lower, p.s_upper) == (3, 4, 4)
    p = make_policy('dssp:3:15', 2)
    assert (p.s_lower, p.s_upper, p.mode) == (3, 15, BOUNDED)
    p = make_policy('DSSP:1:2:paper', 2, stall_factor=5.0)
    assert (p.mode, p.stall_factor) == (PAPER, 5.0)
    for bad in ('bsp', 'ssp', 'ssp:x', 'dssp:3', 'dssp:5:3', 'dssp:3:15:fast', 'ssp:-1',
                'dssp:1:2:paper:x'):
        with pytest.raises(ValueError):
            make_policy(bad, 2)


@pytest.mark.parametrize('kwargs', [
    dict(times=[], wall_time=10.0),
    dict(times=[1.0, 0.0], wall_time=10.0),
    dict(times=[1.0, -1.0], wall_time=10.0),
    dict(times=[1.0]),
    dict(times=[1.0], wall_time=10.0, iterations=5),
    dict(times=[1.0], wall_time=0.0),
    dict(times=[1.0], iterations=0),
    dict(times=[1.0], iterations=2.5),
    dict(times=[1.0], wall_time=10.0, latency=-1.0),
    dict(times=[1.0], wall_time=10.0, jitter=-0.1),
])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        simulate(policy='asp', **kwargs)


def test_result_helpers():
    r = SimResult(label='x', times=[1.0, 1.0, 2.0], iterations=[3, 2, 1], wait=[1.0, 3.0, 0.0],
                  wall_time=4.0, max_lead=2)
    r.lead_hist.update({0: 2, 1: 1, 2: 1})
    assert r.total_iterations == 6 and r.iterations_per_second == 1.5
    assert r.mean_lead == pytest.approx(0.75)
    assert r.fast_workers() == [0, 1]
    assert r.fast_wait_fraction == pytest.approx(0.5)
    assert (r.lead_quantile(0.5), r.lead_quantile(0.75), r.lead_quantile(1.0)) == (0, 1, 2)


def test_format_table_and_main(capsys):
    table = format_table([simulate(HETERO, 'asp', wall_time=10.0)])
    assert table.splitlines()[0].startswith('| policy |')
    assert main(['--wall-time', '30', '--hist']) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith('| ')]
    assert len(rows) == 2 * (1 + len(DEFAULT_POLICIES))     # two tables with headers
    for spec in DEFAULT_POLICIES:
        assert '| %s |' % spec in out
    assert main(['--times', '1,2', '--iterations', '5', '--jitter', '0.1', 'asp', 'ssp:1']) == 0
    out = capsys.readouterr().out
    assert '5 iterations per worker' in out and '| ssp:1 | 5 / 5 |' in out


def test_main_rejects_bad_policy(capsys):
    with pytest.raises(SystemExit):
        main(['--wall-time', '5', 'bsp'])
    assert 'bad policy' in capsys.readouterr().err


SCENARIOS = [  # (times, limit, jitter, latency, seed)
    ((1.0, 1.0, 1.0, 2.5), {'wall_time': 300}, 0.0, 0.0, 0),           # the default table
    ((1.0, 1.0, 1.0, 2.5), {'wall_time': 120}, 0.1, 0.05, 3),
    ((1.0, 2.5), {'iterations': 200}, 0.1, 0.0, 2),                     # dssp_modes.md
    ((1.0,) * 15 + (2.5,), {'iterations': 60}, 0.1, 0.0, 7),
    ((0.5, 1.0, 1.5, 2.0, 3.0), {'iterations': 40}, 0.3, 0.01, 11),   # every worker leaves
    ((1.0,) * 6, {'wall_time': 50}, 0.0, 0.0, 0),                     # ties everywhere
]


@pytest.mark.parametrize('scenario', range(len(SCENARIOS)))
@pytest.mark.parametrize('spec', ['asp', 'ssp:0', 'ssp:3', 'dssp:3:15:bounded',
                                  'dssp:3:15:paper', 'dssp:3:15:threshold', 'dssp:1:4'])
def test_same_results_as_the_straightforward_loop(scenario, spec):
    """The simulator keeps ASP's slowest clock incrementally; the oracle scans every worker
    at each push (tests/support/oracle_simulate.py): every field of the result is identical."""
    from oracle_simulate import simulate as oracle
    times, limit, jitter, latency, seed = SCENARIOS[scenario]
    fast = simulate(times, spec, jitter=jitter, latency=latency, seed=seed, **limit)
    slow = oracle(times, spec, jitter=jitter, latency=latency, seed=seed, **limit)
    # (the oracle predates the per-worker finish times and the gradients' staleness)
    assert set(slow) | {'finish', 'stale_hist', 'pushes'} == {f.name for f in dataclasses.fields(fast)}
    assert {name: getattr(fast, name) for name in slow} == slow
    assert fast.total_iterations == sum(slow['iterations'])


def test_a_fixed_number_of_iterations_tells_asp_from_bsp():
    """Each worker over its own span: ASP's fast workers finish early at their own pace,
    BSP holds them to the slowest's; over the job's span both would read the same."""
    times = (1.0, 1.3, 1.8, 3.0)
    asp = simulate(times, 'asp', iterations=100)
    bsp = simulate(times, 'ssp:0', iterations=100)
    assert asp.iterations_per_second == pytest.approx(sum(100 / (100 * t) for t in times))
    # (the fast ones push their last gradient before the slowest does: 297 s + their own)
    assert bsp.iterations_per_second == pytest.approx(sum(100 / (297 + t) for t in times))
    assert asp.total_iterations / asp.wall_time == pytest.approx(
        bsp.total_iterations / bsp.wall_time)


def test_gradient_staleness_is_not_the_lead_at_release():
    # equal workers under ASP: every gradient has the other 3 workers' updates since its pull
    asp = simulate((1.0,) * 4, 'asp', iterations=50)
    assert asp.staleness_quantile(0.5) == 3 and asp.mean_lead < 1
    bsp = simulate((1.0, 2.0), 'ssp:0', iterations=20)
    assert bsp.mean_staleness == 0.0 and sum(bsp.stale_hist.values()) == 40
    # SSP s=3, one worker 3x slower: the fast one is released 3 ahead, but it is held most of
    # the time, so a gradient sees at most 2 updates since its pull
    ssp = simulate((1.0, 3.0), 'ssp:3', iterations=60)
    assert ssp.lead_quantile(1.0) == 3 and ssp.staleness_quantile(1.0) == 2
