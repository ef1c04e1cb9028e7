"""Time to a target accuracy (mxnet_ssp.lab.cluster_model.time_to_target, the advisor's ranking
by it, and the pinned episodes of a cluster spec): pure functions on hand-built inputs whose
results are worked out here."""
import json
import math

import pytest

from mxnet_ssp.lab.cluster_model import advise
from mxnet_ssp.lab.cluster_model.advise import Prediction
from mxnet_ssp.lab.cluster_model.profiles import ScenarioError, get_scenario
from mxnet_ssp.lab.cluster_model.simulate import simulate
from mxnet_ssp.lab.cluster_model.time_to_target import (CostFileError, StalenessCost, load_cost,
                                                        quantile, reached_at, time_to_target,
                                                        updates_needed)

COST = StalenessCost(0.92, 'sustained', 100.0, 0.25, 0.8, 1.25, 10, 0.8)


# -- the model --------------------------------------------------------------------------------

def test_the_gradients_needed_grow_with_the_staleness():
    assert updates_needed(100.0, 0.25, 0.0) == 100.0
    assert updates_needed(100.0, 0.25, 2.0) == 150.0
    # a negative cost fitted on noise never makes progress free: at least 10% of updates0
    assert updates_needed(100.0, -0.5, 4.0) == pytest.approx(10.0)
    assert time_to_target(100.0, 0.25, 2.0, 50.0) == 3.0
    assert time_to_target(100.0, 0.25, 2.0, 0.0) == math.inf


def test_a_run_reaches_the_target_at_the_push_that_completes_the_gradients_it_needs():
    fresh = [(0.5 * k, 0) for k in range(1, 21)]
    assert reached_at(fresh, 4, 0.25, 10.0) == (2.0, True)          # the 4th push
    stale = [(0.5 * k, 2) for k in range(1, 21)]
    assert reached_at(stale, 4, 0.25, 10.0) == (3.0, True)          # 4 x 1.5 = 6th push
    # the running mean: stale gradients after the target do not delay it
    mixed = fresh[:4] + [(t, 8) for t, _ in fresh[4:]]
    assert reached_at(mixed, 4, 0.25, 10.0) == (2.0, True)


def test_a_run_short_of_the_target_is_extrapolated_at_its_mean_pace_and_flagged():
    pushes = [(1.0 * k, 1) for k in range(1, 6)]                    # 5 pushes in 5 s
    # needs 8 x 1.25 = 10 gradients: twice the run
    assert reached_at(pushes, 8, 0.25, 5.0) == (10.0, False)
    assert reached_at([], 8, 0.25, 5.0) == (math.inf, False)


def test_quantile_interpolates_between_order_statistics():
    assert quantile([3, 1, 2, 4, 5], 0.5) == 3
    assert quantile([1, 2, 3, 4, 5], 0.1) == pytest.approx(1.4)
    assert quantile([7], 0.9) == 7
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_the_fit_file_is_read_and_a_bad_one_is_named(tmp_path):
    path = tmp_path / 'fit.json'
    path.write_text(json.dumps({'model': {'target': 0.9, 'metric': 'first', 'updates0': 50,
                                          'cost': 0.1, 'error_low': 0.7, 'error_high': 1.3,
                                          'rows': 4}}))
    assert load_cost(str(path)) == StalenessCost(0.9, 'first', 50, 0.1, 0.7, 1.3, 4, 0.0)
    path.write_text('{"model": {"target": 0.9}}')
    with pytest.raises(CostFileError, match='fit.json has no "model" with target, metric'):
        load_cost(str(path))
    with pytest.raises(CostFileError, match='nope.json cannot be read.*--write'):
        load_cost(str(tmp_path / 'nope.json'))


# -- the advisor ranks by time, with intervals, and declines to separate overlaps ---------------

def timed(label, times, balanced=False, stale=0.0):
    policy = advise.ARM_OF[label] if label in advise.ARM_OF else None
    return Prediction(label, 'asp' if policy is None else advise.sim_policy(policy), balanced,
                      10.0, (9.0, 11.0), 0.1, 0.5, 1, stale, 1, 0.0, (9.0, 11.0), (stale, stale),
                      tuple(times), (True,) * len(times))


def test_the_interval_is_the_spread_over_every_seed_widened_by_the_calibration():
    p, = advise.with_times([timed('SSP s=3', [4.0, 5.0, 6.0, 4.5, 5.5])], COST)
    assert p.time_s == 5.0 and p.interval == pytest.approx((3.2, 7.5))  # 4 x 0.8, 6 x 1.25
    b, = advise.with_times([timed('BSP + balance', [4.0, 6.0], balanced=True)], COST)
    assert b.interval == pytest.approx((3.2, 6.0 * 1.25 / 0.8))   # ideal balancing charged
    with pytest.raises(ValueError, match='SSP s=3 has no time to the target'):
        advise.with_times([timed('SSP s=3', [])], COST)


def test_arms_whose_intervals_overlap_the_fastest_are_not_separated():
    rows = advise.with_times([timed('DSSP [3,15]', [4.0], stale=1.0),
                              timed('BSP', [4.8]),              # 3.84-6.0 overlaps 3.2-5.0
                              timed('ASP', [6.5], stale=2.0)], COST)   # 5.2-8.1: apart
    assert advise.fastest(rows).label == 'DSSP [3,15]'
    assert [p.label for p in advise.inseparable(rows)] == ['DSSP [3,15]', 'BSP']
    choice = advise.recommend_by_time(rows)
    assert choice.label == 'BSP'                     # the simplest of the two, not the fastest
    text = advise.format_time_advice('RUN', FIT, rows, choice, COST)
    lines = text.split('\n')
    assert [line.split(' | ')[0] for line in lines[6:9]] == [
        '| DSSP [3,15]', '| BSP (recommended)', '| ASP']                # ranked by time
    assert lines[6] == '| DSSP [3,15] | 4.0 [3.2-5.0] | 4.0-4.0 | 10.0 [9.0-11.0] | 10% | ' \
                       '1.00 / 1 |'
    assert lines[10].startswith('Not separated: DSSP [3,15], BSP. Their intervals overlap the '
                               "fastest's (DSSP [3,15], 3.2-5.0 s), so the advisor declines "
                               'to rank them')


def test_an_arm_apart_from_every_other_is_recommended_as_the_fastest():
    rows = advise.with_times([timed('ASP', [2.0, 2.2]), timed('BSP', [4.0, 4.1])], COST)
    assert advise.inseparable(rows) == [rows[0]]
    assert advise.recommend_by_time(rows) is rows[0]
    text = advise.format_time_advice('RUN', FIT, rows, rows[0], COST)
    assert 'Recommended: ASP, the fastest to the target; no other paradigm\'s interval ' \
           'overlaps its 1.6-2.8 s.' in text
    assert 'the measured time was 0.80-1.25 x the predicted one in 80% of its 10 rows' in text


FIT = advise.Fit('store metrics', [0.35, 1.2], 0.6, 0.25, [21, 23], 0.0, [0.25])


# -- pinned episodes ----------------------------------------------------------------------------

PINNED = 'workers=8,base_ms=60,jitter=5%,pin=3:4:30%,run_iterations=200'


def test_a_pinned_episode_slows_its_worker_for_its_share_of_the_run_only():
    sc = get_scenario('workers=4,base_ms=10,pin=3:4:10%-40%,run_iterations=100')
    assert sc.pins == ((3, 4.0, 0.1, 0.4),) and sc.run_iterations == 100
    stream = sc.stream(3, 0)
    times = [stream.next() for _ in range(100)]
    assert times[:10] == [0.01] * 10 and times[10:40] == [0.04] * 30 and times[40:] == [0.01] * 60
    other = sc.stream(2, 0)
    assert [other.next() for _ in range(100)] == [0.01] * 100
    assert sc.pinned_mean(3) == pytest.approx(1.9) and sc.pinned_mean(0) == 1.0
    # a share is centred; the spec reads back into the same scenario (what the lab's jobs get)
    centred = get_scenario(PINNED)
    assert centred.pins == ((3, 4.0, 0.35, 0.65),) and get_scenario(centred.spec()) == centred
    assert 'worker 3 x4 for iterations 70-129 of 200 (35%-65% of the run)' in centred.summary()


def test_pins_from_a_json_file_and_several_at_once(tmp_path):
    path = tmp_path / 'pins.json'
    path.write_text(json.dumps({'workers': 3, 'base_ms': 5, 'pin': ['0:2:0-0.5', '2:3:50%']}))
    assert get_scenario(str(path)).pins == ((0, 2.0, 0.0, 0.5), (2, 3.0, 0.25, 0.75))
    assert get_scenario('workers=3,base_ms=5,pin=0:2:0-0.5;1:3:1').pins == (
        (0, 2.0, 0.0, 0.5), (1, 3.0, 0.0, 1.0))


@pytest.mark.parametrize('pin,words', [
    ('8:4:30%', "rank '8' is not a worker of 8 (0..7)"),
    ('x:4:30%', "rank 'x' is not a worker of 8 (0..7)"),
    ('3:0.5:30%', "factor '0.5' is not in [1, 100]"),
    ('3:nan:30%', "factor 'nan' is not in [1, 100]"),
    ('3:4:130%', "'130%' is not a share of the run"),
    ('3:4:0.5-0.2', "the window '0.5-0.2' is empty; expected START < END"),
    ('3:4', "'3:4' is not RANK:FACTOR:SHARE or RANK:FACTOR:START-END"),
])
def test_a_bad_pin_names_the_setting_the_value_and_what_is_accepted(pin, words):
    with pytest.raises(ScenarioError) as err:
        get_scenario('workers=8,base_ms=60,pin=%s' % pin)
    assert str(err.value).startswith("scenario spec: pin = '%s': " % pin)
    assert words in str(err.value)


def test_the_advisor_sees_a_straggler_pinned_to_one_worker():
    fit = advise.fit_cluster(get_scenario(PINNED))
    plain = advise.fit_cluster(get_scenario('workers=8,base_ms=60,jitter=5%,'
                                            'run_iterations=200'))
    # 200 iterations of the slowest: 63 ms, 4x for 30% of them
    assert advise.default_wall_time(fit) == pytest.approx(200 * (0.06 * 1.9 + 0.003))
    bsp = [('BSP', 'ssp:0', False)]
    target = (8 * 150, 0.2)                  # 150 iterations each: past the episode's start
    got, = advise.predict(fit, seeds=3, paradigms=bsp, target=target)
    base, = advise.predict(plain, seeds=3, paradigms=bsp, target=target,
                           wall_time=advise.default_wall_time(fit))
    assert got.fast_wait > 0.2 and base.fast_wait < 0.1          # the straggler is seen
    assert len(got.times) == 3 and all(got.reached)
    # 60 of the 150 rounds wait for the 4x worker: about 90 x 63 + 60 x 243 ms
    assert got.time_s == pytest.approx(90 * 0.063 + 60 * 0.243, rel=0.08)
    assert base.time_s == pytest.approx(150 * 0.063, rel=0.08)
    # a target reached before the episode does not see it
    early = (8 * 50, 0.2)
    a, = advise.predict(fit, seeds=2, paradigms=bsp, target=early)
    b, = advise.predict(plain, seeds=2, paradigms=bsp, target=early, wall_time=a.times[0] * 3)
    assert a.times == pytest.approx(b.times, rel=1e-9)


def test_the_command_prints_the_time_to_target_ranking_of_a_pinned_straggler(capsys):
    assert advise.main(['--cluster', PINNED, '--seeds', '2', '--updates-to-target',
                        '1200']) == 0
    out = capsys.readouterr().out
    lines = out.split('\n')
    assert 'worker 3 x4 for iterations 70-129 of 200' in lines[0]
    assert lines[2].startswith('| paradigm | time to target, s: median [interval] | over the '
                               '2 seeds |')
    rows = lines[4:4 + len(advise.ADVISED)]
    times = [float(r.split(' | ')[1].split(' ')[0]) for r in rows]
    assert times == sorted(times)                                # ranked by time to target
    bsp = [r for r in rows if r.startswith('| BSP |') or r.startswith('| BSP (recommended) |')]
    assert len(bsp) == 1 and int(bsp[0].split(' | ')[4].rstrip('%')) > 0
    assert out.count('(recommended)') == 1
    assert ('Not separated: ' in out) != ('Recommended: ' in out)
    assert '1200 x (1 + ' in out and '(as given)' in out


@pytest.mark.parametrize('argv,message', [
    (['--updates-to-target', '0'], '--updates-to-target 0.0 is not valid: expected a number of '
                                   'gradients > 0'),
    (['--updates-to-target', 'nan'], '--updates-to-target nan is not valid'),
    (['--staleness-cost', '-1'], '--staleness-cost -1.0 is not valid: expected a number in '
                                 '[-0.9, 100]'),
])
def test_bad_target_settings_are_refused(capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        advise.main(['--cluster', 'mixed-4'] + argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_the_advice_says_where_the_target_falls_what_is_extrapolated_and_what_ran_short():
    cost = StalenessCost(0.92, 'sustained', 100.0, 0.25, 0.8, 1.25, 10, 0.8, staleness_max=2.0)
    short = timed('ASP', [30.0, 34.0], stale=3.0)
    short = short.__class__(**dict(short.__dict__, reached=(True, False)))
    rows = advise.with_times([timed('BSP', [10.0]), short], cost)
    text = advise.format_time_advice('RUN', FIT, rows, rows[0], cost, wall_time=40.0)
    lines = text.split('\n')
    assert 'The target falls at 25-80% of the simulated run (the fastest and the slowest ' \
           'paradigm): slow episodes later in the run do not delay it.' in lines
    assert 'Extrapolated: the lab measured the cost of a mean gradient staleness up to 2.0; ' \
           'ASP go beyond it.' in lines
    assert lines[-1] == 'Not reached within the simulated run, extrapolated at its mean pace: ' \
                        'ASP (give a longer --wall-time).'
    # a cost given by the user is not the lab's: nothing is called extrapolated
    text = advise.format_time_advice('RUN', FIT, rows, rows[0], cost, staleness_cost=0.1,
                                     wall_time=20.0)
    assert 'Extrapolated' not in text and 'falls at 50-160% of the simulated run (the ' \
           'fastest and the slowest paradigm).' in text
