"""The staleness cost fitted on the lab's runs and the advisor's calibration
(mxnet_ssp.lab.reproduce.staleness_cost): the fit and the leave-one-scenario-out calibration
on small hand-built fixtures, then the committed fit file against the committed run records."""
import json
import os
import statistics

import pytest

from mxnet_ssp.lab.cluster_model.time_to_target import FIT_FILE, load_cost, quantile
from mxnet_ssp.lab.reproduce import staleness_cost as sc


def trial(curve, rates, stale, status='ok'):
    return {'status': status, 'curve': curve, 'it_per_s': dict(enumerate(rates)),
            'staleness': {'mean': stale}}


def curve_reaching(seconds, target=0.92, end=20.0):
    """The lab's 0.25 s grid: below the target until `seconds`, at it from then on."""
    return [[0.25 * k, target if 0.25 * k >= seconds else target - 0.1]
            for k in range(1, int(end / 0.25) + 1)]


def test_trial_rows_read_the_sustained_time_the_throughput_and_the_staleness():
    results = {'arms': [
        {'arm': 'bsp', 'trials': [trial(curve_reaching(4.0), [10, 10], 0.0)]},
        {'arm': 'asp', 'trials': [
            trial(curve_reaching(3.0), [20, 20], 1.5),
            # one evaluation at the target that does not hold for 2 s: reached later
            trial([[1.0, 0.95], [1.25, 0.80]] + curve_reaching(5.0)[5:], [20, 20], 1.4),
            trial(curve_reaching(99.0), [20, 20], 1.5),           # never: counted as missed
            trial(curve_reaching(1.0), [20, 20], 1.5, status='failed')]},
        {'arm': 'asp-lrtau', 'trials': [trial(curve_reaching(1.0), [20, 20], 1.5)]}]}
    rows, missed = sc.trial_rows(results)
    assert missed == 1
    assert rows == [
        {'arm': 'bsp', 'time_s': 4.0, 'throughput': 20, 'staleness': 0.0, 'updates': 80.0},
        {'arm': 'asp', 'time_s': 3.0, 'throughput': 40, 'staleness': 1.5, 'updates': 120.0},
        {'arm': 'asp', 'time_s': 5.0, 'throughput': 40, 'staleness': 1.4, 'updates': 200.0}]
    bad = {'arms': [{'arm': 'asp', 'trials': [dict(trial(curve_reaching(1.0), [1], 0),
                                                   staleness=None)]}]}
    with pytest.raises(sc.CalibrationError, match='trial None of asp has no measured staleness'):
        sc.trial_rows(bad)


def row(arm, updates, stale, time_s=1.0):
    return {'arm': arm, 'updates': updates, 'staleness': stale, 'time_s': time_s,
            'throughput': updates / time_s}


FIXTURE = {
    # scenario a: BSP needs 100 gradients; ASP at staleness 2 needs 140 (cost 0.2)
    'a': [row('bsp', 90.0, 0.0), row('bsp', 100.0, 0.0), row('bsp', 110.0, 0.0),
          row('asp', 140.0, 2.0)],
    # scenario b: BSP 200; SSP at staleness 1 needs 260 (cost 0.3)
    'b': [row('bsp', 200.0, 0.0), row('ssp3', 260.0, 1.0)],
}


def test_the_cost_is_the_least_squares_slope_over_each_scenarios_bsp_median():
    fit = sc.fit_cost(FIXTURE)
    # slope through the origin of (2, 0.4) and (1, 0.3): (2 x 0.4 + 1 x 0.3) / (4 + 1) = 0.22
    assert fit['cost'] == pytest.approx(0.22)
    assert fit['per_scenario'] == {'a': 100.0, 'b': 200.0}
    assert fit['updates0'] == 105.0                     # the median of all 4 BSP trials
    assert fit['trials'] == 6 and fit['staleness_max'] == 2.0
    with pytest.raises(sc.CalibrationError, match='no scenario has both BSP trials and stale'):
        sc.fit_cost({'a': [row('bsp', 1.0, 0.0)]})


def test_each_scenario_is_predicted_by_the_fit_of_the_others_only():
    asked = []

    def predicted(name, arms, target, seeds):
        asked.append((name, arms, target, seeds))
        return {arm: [2.0, 3.0, 4.0] for arm in arms}      # median 3 s

    rows = sc.calibrate(FIXTURE, seeds=3, predicted_times=predicted)
    # a is predicted from b alone (cost 0.3, updates0 200), b from a alone (0.2, 100)
    assert asked == [('a', ['asp', 'bsp'], (200.0, pytest.approx(0.3)), 3),
                     ('b', ['bsp', 'ssp3'], (100.0, pytest.approx(0.2)), 3)]
    assert [(r['scenario'], r['arm'], r['trials'], r['measured_s'], r['predicted_s'],
             r['ratio']) for r in rows] == [('a', 'asp', 1, 1.0, 3.0, 0.3333),
                                            ('a', 'bsp', 3, 1.0, 3.0, 0.3333),
                                            ('b', 'bsp', 1, 1.0, 3.0, 0.3333),
                                            ('b', 'ssp3', 1, 1.0, 3.0, 0.3333)]


def test_a_record_of_another_scenario_is_refused(tmp_path):
    record = tmp_path / 'r1'
    record.mkdir()
    (record / 'results.json').write_text(json.dumps({'grid': {'emulate': 'mixed-4'},
                                                     'arms': []}))
    with pytest.raises(sc.CalibrationError, match="ran scenario 'mixed-4', not 'link-4'"):
        sc.read_records(str(tmp_path), (('r1', 'link-4'),))
    with pytest.raises(sc.CalibrationError, match='r2.*results.json cannot be read'):
        sc.read_records(str(tmp_path), (('r2', 'link-4'),))


# -- the committed fit against the committed run records --------------------------------------

def committed():
    with open(FIT_FILE) as f:
        return json.load(f)


def test_the_committed_fit_is_what_the_committed_records_give():
    data = committed()
    by_scenario, missed = sc.read_records()
    fit = sc.fit_cost(by_scenario)
    model = data['model']
    assert model['updates0'] == round(fit['updates0'], 1)
    assert model['cost'] == round(fit['cost'], 4)
    assert model['staleness_max'] == round(fit['staleness_max'], 3)
    assert data['trials_fitted'] == fit['trials'] and data['trials_missing_the_target'] == missed
    assert data['records'] == [r for r, _ in sc.RECORDS]
    assert load_cost() == load_cost(FIT_FILE) and load_cost().cost == model['cost']
    # the cost of staleness is positive: more gradients to the target for a stale paradigm
    assert 0 < model['cost'] < 1


def test_the_calibration_covers_every_lab_scenario_and_states_its_error():
    data = committed()
    rows = data['calibration']
    assert {r['scenario'] for r in rows} == {'transient-4', 'mixed-4', 'link-4', 'mixed-2'}
    for r in rows:
        assert r['ratio'] == pytest.approx(r['measured_s'] / r['predicted_s'], abs=1e-3)
        assert r['measured_range'][0] <= r['measured_s'] <= r['measured_range'][1]
    ratios = [r['ratio'] for r in rows]
    model = data['model']
    assert model['rows'] == len(rows) == 32
    assert model['error_low'] == pytest.approx(quantile(ratios, 0.1), abs=1e-4)
    assert model['error_high'] == pytest.approx(quantile(ratios, 0.9), abs=1e-4)
    inside = sum(model['error_low'] <= x <= model['error_high'] for x in ratios)
    assert model['coverage'] == pytest.approx(inside / len(rows), abs=1e-4)
    assert 0.7 <= model['coverage'] <= 0.85
    # each scenario's rows were predicted by a fit that left that scenario out
    for name in {r['scenario'] for r in rows}:
        costs = {r['cost_fitted_without'] for r in rows if r['scenario'] == name}
        assert len(costs) == 1 and costs != {model['cost']}
    assert 0.5 < statistics.median(ratios) < 2


def test_the_docs_show_the_committed_calibration_table():
    docs = open(os.path.join(sc.ROOT, 'docs', 'lab.md'), encoding='utf-8').read()
    assert sc.format_table(committed()) in docs
