"""mxnet_ssp.lab.reproduce.stats: the report's statistics, pure functions of plain lists.

Every expected value is worked out by hand in the comments next to it.  The tests that go
through the CLI and the collector (tests/e2e/test_reproduce.py) exercise the same functions on
files; these pin each function's branches and boundaries.
"""
import pytest

from mxnet_ssp.lab.reproduce.stats import (average_curves, curve_band, lead_from_train_logs,
                                                   median_trial, staleness_from_train_logs,
                                                   time_to_target)


# ---------------------------------------------------------------------------
# time_to_target
# ---------------------------------------------------------------------------
def test_time_to_target():
    curve = [(1.0, 0.3), (2.0, 0.66), (3.0, 0.67), (4.0, 0.65), (5.0, 0.69)]
    assert time_to_target(curve, 0.67) == 3.0       # reaching exactly counts
    assert time_to_target(curve, 0.68) == 5.0       # first time, not the last
    assert time_to_target(curve, 0.3) == 1.0
    assert time_to_target(curve, 0.7) is None
    assert time_to_target([], 0.1) is None


@pytest.mark.parametrize('target,expected', [
    (0.5, 20.0),                 # exactly at the point's accuracy: reached there
    (0.5 - 1e-9, 20.0),          # just below it: reached there too (10 s had 0.25)
    (0.5 + 1e-9, 40.0),          # just above it: only the later 0.75 reaches it
    (0.25, 10.0),                # the first point itself
    (0.75, 40.0),                # the last point, exactly
    (0.75 + 1e-9, None),         # just above the best accuracy: never
])
def test_time_to_target_at_the_boundary(target, expected):
    curve = [(10.0, 0.25), (20.0, 0.5), (30.0, 0.4), (40.0, 0.75)]
    assert time_to_target(curve, target) == expected


def test_time_to_target_returns_the_seconds_of_the_first_reaching_point():
    # the accuracy dips below the target again and comes back: the first time counts,
    # and the value returned is the time (7.5), not the accuracy or the index
    curve = [(2.5, 0.1), (7.5, 0.9), (9.0, 0.2), (12.0, 0.95)]
    assert time_to_target(curve, 0.9) == 7.5
    assert time_to_target(curve, 0.95) == 12.0
    # a curve that never gets there, with or without points
    assert time_to_target([(1.0, 0.0), (2.0, 0.0)], 0.0) == 1.0
    assert time_to_target([(1.0, 0.0), (2.0, 0.0)], 0.01) is None


# ---------------------------------------------------------------------------
# median_trial
# ---------------------------------------------------------------------------
def test_median_trial_by_final_accuracy():
    trials = [{'trial': 1, 'final_accuracy': 0.70}, {'trial': 2, 'final_accuracy': 0.60},
              {'trial': 3, 'final_accuracy': 0.65}]
    assert median_trial(trials)['trial'] == 3
    assert median_trial(trials[:2])['trial'] == 2     # even count: the lower middle
    assert median_trial(trials[:1])['trial'] == 1
    assert median_trial([]) is None
    ties = [{'trial': t, 'final_accuracy': 0.5} for t in (3, 1, 2)]
    assert median_trial(ties)['trial'] == 2             # ties in trial order


#: trial -> final accuracy; ranked: 2 (0.1), 4 (0.2), 5 (0.25), 3 (0.3), 6 (0.35), 1 (0.4)
ACCURACIES = {1: 0.4, 2: 0.1, 3: 0.3, 4: 0.2, 5: 0.25, 6: 0.35}


@pytest.mark.parametrize('n,expected', [
    (1, 1),     # [1]: the only one
    (2, 2),     # 2 (0.1), 1 (0.4): index (2 - 1) // 2 = 0, the lower
    (3, 3),     # 2, 3, 1: index 1
    (4, 4),     # 2, 4, 3, 1: index 1, the lower middle (not 3, the upper)
    (5, 5),     # 2, 4, 5, 3, 1: index 2
    (6, 5),     # 2, 4, 5, 3, 6, 1: index 2, the lower middle (not 3)
])
def test_median_trial_odd_and_even_counts(n, expected):
    trials = [{'trial': t, 'final_accuracy': ACCURACIES[t]} for t in range(1, n + 1)]
    assert median_trial(trials)['trial'] == expected
    assert median_trial(list(reversed(trials)))['trial'] == expected   # input order is irrelevant


def test_median_trial_breaks_a_tie_by_the_trial_number_and_returns_the_record():
    # ranked by (accuracy, trial): (0.1, 3), (0.5, 2), (0.5, 4), (0.9, 1): the lower middle,
    # index 1, is trial 2 of the tied pair, although trial 4 comes first in the input
    trials = [{'trial': 4, 'final_accuracy': 0.5, 'x': 'four'},
              {'trial': 2, 'final_accuracy': 0.5, 'x': 'two'},
              {'trial': 3, 'final_accuracy': 0.1}, {'trial': 1, 'final_accuracy': 0.9}]
    chosen = median_trial(trials)
    assert chosen is trials[1]
    # five tied trials given in the order 5, 3, 1, 4, 2: the middle one by number is 3
    ties = [{'trial': t, 'final_accuracy': 0.7} for t in (5, 3, 1, 4, 2)]
    assert median_trial(ties)['trial'] == 3
    assert median_trial(ties[:4])['trial'] == 3        # 1, 3, 4, 5: index 1


# ---------------------------------------------------------------------------
# average_curves
# ---------------------------------------------------------------------------
def test_average_curves_on_a_common_grid():
    a = [(0.0, 0.0), (10.0, 1.0)]                 # linear, ends at 10 s
    b = [(2.0, 0.2), (6.0, 0.6), (20.0, 0.6)]     # starts later, runs longer
    avg = dict(average_curves([a, b]))
    # the grid starts where both are defined and is the union of their times
    assert sorted(avg) == [2.0, 6.0, 10.0, 20.0]
    assert avg[2.0] == pytest.approx((0.2 + 0.2) / 2)
    assert avg[6.0] == pytest.approx((0.6 + 0.6) / 2)
    assert avg[10.0] == pytest.approx((1.0 + 0.6) / 2)
    assert avg[20.0] == pytest.approx((1.0 + 0.6) / 2)   # a holds its final accuracy
    # unsorted input and an empty curve are handled
    assert average_curves([list(reversed(a)), [], a]) == [(0.0, 0.0), (10.0, 1.0)]
    assert average_curves([]) == []
    # the average's time to target is read off the same way as a single curve's
    assert time_to_target(average_curves([a, b]), 0.8) == 10.0


def test_average_curves_of_different_lengths_and_grids():
    a = [(0.0, 0.0), (10.0, 1.0)]
    b = [(5.0, 0.5), (15.0, 0.7)]
    # grid from the latest first point (5, b's first, included) to the latest last point (15):
    # 5: a 0.5, b 0.5; 10: a 1.0, b 0.6 (halfway 0.5 -> 0.7); 15: a holds 1.0, b 0.7
    got = average_curves([a, b])
    assert [t for t, _ in got] == [5.0, 10.0, 15.0]
    assert [v for _, v in got] == pytest.approx([0.5, 0.8, 0.85])
    # a curve that ends before the others start only contributes its last accuracy
    early = [(0.0, 0.1), (1.0, 0.3)]
    late = [(4.0, 0.5), (8.0, 0.9)]
    got = average_curves([early, late])
    assert [t for t, _ in got] == [4.0, 8.0]
    assert [v for _, v in got] == pytest.approx([(0.3 + 0.5) / 2, (0.3 + 0.9) / 2])


def test_average_curves_is_a_mean_and_holds_a_single_point():
    # three curves at the same times: the mean (0.3), not the median (0.0)
    zero = [(1.0, 0.0), (2.0, 0.0)]
    high = [(1.0, 0.9), (2.0, 0.6)]
    got = average_curves([zero, zero, high])
    assert [t for t, _ in got] == [1.0, 2.0]
    assert [v for _, v in got] == pytest.approx([0.3, 0.2])
    # a one-point curve is defined from its point on and holds it: start 3 s
    line = [(0.0, 0.0), (10.0, 1.0)]
    got = average_curves([line, [(3.0, 0.4)]])
    assert [t for t, _ in got] == [3.0, 10.0]
    assert [v for _, v in got] == pytest.approx([(0.3 + 0.4) / 2, (1.0 + 0.4) / 2])


def test_average_curves_dedupes_times_and_returns_float_pairs():
    # both curves have points at 2 and 4: each time once on the grid; integer times in,
    # float pairs out
    a = [(4, 1.0), (0, 0.0), (2, 0.5)]            # unsorted
    b = [(2, 0.0), (4, 0.0), (6, 0.3)]
    got = average_curves([a, b])
    assert [t for t, _ in got] == [2.0, 4.0, 6.0]
    assert [v for _, v in got] == pytest.approx([0.25, 0.5, 0.65])
    assert all(type(t) is float and type(v) is float for t, v in got)
    assert all(type(pair) is tuple for pair in got)
    # only empty curves: no point at all
    assert average_curves([[], []]) == []


# ---------------------------------------------------------------------------
# curve_band
# ---------------------------------------------------------------------------
def test_curve_band_without_points():
    assert curve_band([]) == ([], [], [], [])
    assert curve_band([[], []]) == ([], [], [], [])


def test_curve_band_median_min_and_max_of_an_even_count():
    # four curves on the same grid: the median of an even count is the mean of the middle two
    curves = [[(0.0, 0.1), (1.0, 0.4)], [(0.0, 0.8), (1.0, 0.5)],
              [(0.0, 0.4), (1.0, 0.6)], [(0.0, 0.2), (1.0, 0.9)]]
    times, median, low, high = curve_band(curves)
    assert times == [0.0, 1.0]
    # t = 0: 0.1, 0.2, 0.4, 0.8 -> median (0.2 + 0.4) / 2; t = 1: 0.4, 0.5, 0.6, 0.9 -> 0.55
    assert median == pytest.approx([0.3, 0.55])
    assert low == pytest.approx([0.1, 0.4])
    assert high == pytest.approx([0.8, 0.9])


def test_curve_band_of_an_odd_count_on_different_grids():
    a = [(10.0, 1.0), (0.0, 0.0)]                # unsorted; linear, ends at 10 s
    b = [(5.0, 0.9), (20.0, 0.3)]                # starts last: the grid starts at 5 s
    c = [(2.0, 0.2), (12.0, 0.2)]                # flat, ends at 12 s
    times, median, low, high = curve_band([a, [], b, c])
    assert times == [5.0, 10.0, 12.0, 20.0]
    # a: 0.5, 1.0, 1.0 (held), 1.0; b: 0.9, 0.7, 0.62, 0.3; c: 0.2 everywhere
    assert median == pytest.approx([0.5, 0.7, 0.62, 0.3])
    assert low == pytest.approx([0.2, 0.2, 0.2, 0.2])
    assert high == pytest.approx([0.9, 1.0, 1.0, 1.0])
    assert all(type(x) is float for x in times + median + low + high)


def test_curve_band_of_one_curve_is_that_curve():
    times, median, low, high = curve_band([[(3.0, 0.5), (1.0, 0.25)]])
    assert (times, median, low, high) == ([1.0, 3.0], [0.25, 0.5], [0.25, 0.5], [0.25, 0.5])


def test_curve_band_times_are_floats_for_integer_seconds():
    times, median, low, high = curve_band([[(2, 0.5), (1, 0.25)], [(1, 0.75), (3, 0.75)]])
    # grid 1, 2, 3 (from 1, both start there); the first holds 0.5 after 2 s
    assert times == [1.0, 2.0, 3.0] and all(type(t) is float for t in times)
    assert median == [0.5, 0.625, 0.625]
    assert (low, high) == ([0.25, 0.5, 0.5], [0.75, 0.75, 0.75])


# ---------------------------------------------------------------------------
# lead_from_train_logs
# ---------------------------------------------------------------------------
def _logs(times):
    """{rank: train records} from {rank: [end time of each iteration]}."""
    return {r: [{'rank': r, 'iteration': i + 1, 'time': t} for i, t in enumerate(ts)]
            for r, ts in times.items()}


def test_lead_from_train_logs():
    # rank 0 ends an iteration every second, rank 1 every 2.5 s; both run 4 iterations
    logs = _logs({0: [1, 2, 3, 4], 1: [2.5, 5, 7.5, 10]})
    max_lead, mean_lead = lead_from_train_logs(logs)
    # in time order (t = 1, 2, 2.5, 3, 4, 5, 7.5, 10): rank 0 leads by 1, 2; rank 1 at 2.5 s
    # is the slowest itself (0); rank 0 leads by 2, 3; then rank 0 has finished and no longer
    # counts, so rank 1 leads nobody (0, 0, 0)
    assert max_lead == 3
    assert mean_lead == pytest.approx((1 + 2 + 0 + 2 + 3 + 0 + 0 + 0) / 8.0)
    assert lead_from_train_logs({}) == (0, 0.0)
    # equal pace: never more than one ahead
    assert lead_from_train_logs(_logs({0: [1, 2, 3], 1: [1.1, 2.1, 3.1]}))[0] == 1


def test_lead_counts_a_worker_that_has_not_ended_an_iteration_as_zero():
    # t = 1: rank 0 at 1, rank 1 at 0 (it has not finished its first) -> lead 1;
    # t = 5: rank 1 at 1, rank 0 has finished (1 of 1) and holds nobody back -> lead 0
    assert lead_from_train_logs(_logs({0: [1], 1: [5]})) == (1, 0.5)


def test_lead_ignores_a_worker_without_records():
    # rank 1 never ended an iteration and has no records at all: it is not waited for
    assert lead_from_train_logs(_logs({0: [1, 2], 1: []})) == (0, 0.0)
    assert lead_from_train_logs({0: [], 1: []}) == (0, 0.0)


def test_lead_of_a_lone_worker_and_of_ties_in_time():
    # a lone worker is always the slowest
    assert lead_from_train_logs(_logs({0: [1, 2, 3]})) == (0, 0.0)
    # both end each iteration at the same instant, rank 0 first (events ordered by rank):
    # (t=1, r0): 1 - 0 = 1; (t=1, r1): 0; (t=2, r0): 2 - 1 = 1; (t=2, r1): r0 is done, 0
    assert lead_from_train_logs(_logs({0: [1, 2], 1: [1, 2]})) == (1, 0.5)


def test_lead_with_three_workers_one_of_which_finishes_early():
    # rank 0: 1, 2 (done); rank 1: 1.5, 3, 4.5; rank 2: 2.5, 5, 7.5, 10
    logs = _logs({0: [1, 2], 1: [1.5, 3, 4.5], 2: [2.5, 5, 7.5, 10]})
    # t=1 r0 it 1: min(1, r1 0, r2 0) -> 1
    # t=1.5 r1 it 1: min(r0 1, 1, r2 0) -> 1
    # t=2 r0 it 2 (its last, it counts itself): min(2, r1 1, r2 0) -> 2
    # t=2.5 r2 it 1: r0 done; min(r1 1, 1) -> 0
    # t=3 r1 it 2: min(2, r2 1) -> 1
    # t=4.5 r1 it 3 (last): min(3, r2 1) -> 2
    # t=5 r2 it 2: r0, r1 done -> 0; likewise 7.5 and 10 -> 0, 0
    max_lead, mean_lead = lead_from_train_logs(logs)
    assert max_lead == 2 and type(max_lead) is int
    assert type(mean_lead) is float
    assert mean_lead == pytest.approx((1 + 1 + 2 + 0 + 1 + 2 + 0 + 0 + 0) / 9.0)


def test_lead_sorts_the_records_by_time():
    # the same logs as test_lead_from_train_logs with every worker's records reversed
    logs = _logs({0: [1, 2, 3, 4], 1: [2.5, 5, 7.5, 10]})
    logs = {r: list(reversed(recs)) for r, recs in logs.items()}
    assert lead_from_train_logs(logs) == (3, 1.0)


# ---------------------------------------------------------------------------
# staleness_from_train_logs
# ---------------------------------------------------------------------------
def test_staleness_from_train_logs():
    logs = _logs({0: [1, 2, 3, 4], 1: [2.5, 5]})
    values = staleness_from_train_logs(logs)
    # rank 0 between its iteration ends 1-2, 2-3, 3-4: rank 1 ended one iteration (at 2.5)
    # in 2-3; rank 1 between 2.5 and 5: rank 0 ended two (at 3 and 4)
    assert sorted(values) == [0, 0, 1, 2]
    # a hold after the push does not make the gradient staler: rank 0 pushes its 3rd
    # gradient at 2.2 and waits until 6.0; rank 1 ends iterations at 2.5, 3, 4, 5 meanwhile
    logs = _logs({0: [1, 2, 6], 1: [2.5, 3, 4, 5]})
    logs[0][2]['step_s'] = 3.8
    values = staleness_from_train_logs(logs)
    assert values[:2] == [0, 0]               # rank 0: none before 2, none between 2 and 2.2
    assert values[2:] == [0, 0, 0]            # rank 1: rank 0 ends nothing in (2.5, 5]


def test_staleness_counts_ends_after_the_pull_and_up_to_the_push():
    # both end iterations at 1 and 3: for each second iteration (pulled at 1, pushed at 3) the
    # other's end at 1 is not after the pull, its end at 3 is at the push and counts
    assert staleness_from_train_logs(_logs({0: [1, 3], 1: [1, 3]})) == [1, 1]
    # an end just after the pull counts, one just after the push does not
    assert staleness_from_train_logs(_logs({0: [1, 3], 1: [1.001, 3.001]})) == [1, 1]


def test_staleness_without_step_time_pushes_at_the_end_of_the_iteration():
    # rank 0 pulled at 1 and pushed at 3 (no step_s: the push is at the record's time);
    # rank 1's end at 2.5 is in between
    assert staleness_from_train_logs(_logs({0: [1, 3], 1: [2.5]})) == [1]


def test_staleness_uses_the_current_iteration_s_step_time():
    logs = _logs({0: [1, 3], 1: [1.2, 2]})
    logs[0][1]['step_s'] = 1.5          # rank 0's 2nd gradient pushed at 3 - 1.5 = 1.5
    logs[1][0]['step_s'] = 5.0          # a first iteration's step time is never used
    # rank 0: rank 1's ends in (1, 1.5]: 1.2 -> 1; rank 1 (pulled 1.2, pushed 2): rank 0's
    # ends in (1.2, 2]: none -> 0
    assert staleness_from_train_logs(logs) == [1, 0]
    # the step time of the previous record does not move the push
    logs = _logs({0: [1, 3], 1: [2.5]})
    logs[0][0]['step_s'] = 1.9
    assert staleness_from_train_logs(logs) == [1]


def test_staleness_push_is_never_before_the_pull():
    logs = _logs({0: [1, 3], 1: [0.8, 2]})
    logs[0][1]['step_s'] = 2.5          # 3 - 2.5 = 0.5 < pulled 1: the push counts as at 1
    # rank 0: (1, 1] is empty -> 0 (not -1 for rank 1's 0.8); rank 1: rank 0's ends in
    # (0.8, 2]: 1 -> 1
    assert staleness_from_train_logs(logs) == [0, 1]


def test_staleness_counts_only_the_other_workers():
    # a lone worker (and one with an empty log beside it) sees no one else's updates
    assert staleness_from_train_logs(_logs({0: [1, 2, 3]})) == [0, 0]
    assert staleness_from_train_logs(_logs({0: [1, 2, 3], 1: []})) == [0, 0]
    # one record per worker: no iteration after a worker's first
    assert staleness_from_train_logs(_logs({0: [1], 1: [2]})) == []
    assert staleness_from_train_logs({}) == []


def test_staleness_values_in_log_order_from_unsorted_records():
    # rank 1 first in the dict, each worker's records in reverse order: the values come per
    # worker in dict order, each in time order
    logs = _logs({1: [1.5, 3.5, 4.5], 0: [1, 2, 3, 4]})
    logs = {r: list(reversed(recs)) for r, recs in logs.items()}
    # rank 1: (1.5, 3.5]: rank 0's 2, 3 -> 2; (3.5, 4.5]: 4 -> 1
    # rank 0: (1, 2]: 1.5 -> 1; (2, 3]: none -> 0; (3, 4]: 3.5 -> 1
    assert staleness_from_train_logs(logs) == [2, 1, 1, 0, 1]


# -- the progress metrics (primary: sustained crossing) --------------------------------------
def test_one_lucky_evaluation_is_not_a_sustained_crossing():
    from mxnet_ssp.lab.reproduce.stats import sustained_time, time_to_target
    curve = [(0.25 * k, a) for k, a in enumerate(
        [0.5, 0.7, 0.93, 0.85, 0.88] + [0.9] * 3 + [0.93] * 12)]
    assert time_to_target(curve, 0.92) == 0.5
    assert sustained_time(curve, 0.92, hold_s=2.0) == 2.0
    # held to the end of the run: the final model stays, so a shorter tail counts
    assert sustained_time([(0.0, 0.5), (1.0, 0.95)], 0.92, hold_s=2.0) == 1.0
    assert sustained_time([(0.0, 0.5), (1.0, 0.95), (1.5, 0.9)], 0.92, hold_s=2.0) is None


def test_shortfall_reads_as_the_time_of_a_step_and_counts_dips():
    from mxnet_ssp.lab.reproduce.stats import shortfall_seconds
    # from 0 to the first point: the whole target short; a jump at 4 s that stays: 4 s
    assert abs(shortfall_seconds([(1.0, 0.0), (4.0, 0.95)], 0.9, 10.0) - 4.0) < 1e-12
    # half the target for 2 s, then a dip to 0.45 for 1 s after reaching it
    value = shortfall_seconds([(0.0, 0.45), (2.0, 0.9), (5.0, 0.45), (6.0, 0.9)], 0.9, 10.0)
    assert abs(value - 1.5) < 1e-12
    # only up to the budget; none without one
    assert abs(shortfall_seconds([(0.0, 0.0)], 0.9, 3.0) - 3.0) < 1e-12
    assert shortfall_seconds([(0.0, 0.0)], 0.9, None) is None


def test_metric_value_names_the_metrics_it_accepts():
    import pytest
    from mxnet_ssp.lab.reproduce.stats import metric_value
    with pytest.raises(ValueError) as info:
        metric_value([(0.0, 1.0)], 0.9, 'auc')
    assert str(info.value) == "metric 'auc': expected one of sustained, first, shortfall"


# -- sustained_time and shortfall_seconds at their edges (hand-computed) ---------------------
def test_sustained_time_holds_for_hold_s_two_seconds_by_default():
    from mxnet_ssp.lab.reproduce.stats import HOLD_S, sustained_time
    assert HOLD_S == 2.0
    curve = [(1.0, 0.95), (3.0, 0.5), (3.5, 0.95)]       # the dip at 3.0 is 2 s after 1.0
    assert sustained_time(curve, 0.92) == 3.5
    assert sustained_time(curve, 0.92, hold_s=1.9) == 1.0


def test_sustained_time_counts_the_target_itself_as_reached():
    from mxnet_ssp.lab.reproduce.stats import sustained_time
    assert sustained_time([(0.0, 0.92), (1.0, 0.92)], 0.92, hold_s=2.0) == 0.0
    assert sustained_time([(0.0, 0.95), (1.0, 0.92), (4.0, 0.5)], 0.92, hold_s=2.0) == 0.0
    assert sustained_time([(0.0, 0.95), (1.0, 0.9199), (4.0, 0.95)], 0.92, hold_s=2.0) == 4.0


def test_sustained_time_window_includes_its_end():
    from mxnet_ssp.lab.reproduce.stats import sustained_time
    # a dip exactly hold_s after the crossing breaks it; one just after does not
    assert sustained_time([(1.0, 0.95), (3.0, 0.5)], 0.92, hold_s=2.0) is None
    assert sustained_time([(1.0, 0.95), (3.001, 0.5)], 0.92, hold_s=2.0) == 1.0
    # 0.1 + 0.7 is 0.7999999999999999 in binary64: the point at 0.8 is still in the window
    assert 0.1 + 0.7 < 0.8
    assert sustained_time([(0.1, 0.95), (0.8, 0.5)], 0.92, hold_s=0.7) is None
    # the window [t, t + hold_s] takes 1e-9 s for rounding, and stays closed at that end
    end = 1.0 + 2.0 + 1e-9
    assert sustained_time([(1.0, 0.95), (end, 0.5)], 0.92, hold_s=2.0) is None
    assert sustained_time([(1.0, 0.95), (end + 1e-9, 0.5)], 0.92, hold_s=2.0) == 1.0


def test_sustained_time_sorts_the_curve_first():
    from mxnet_ssp.lab.reproduce.stats import sustained_time
    # in time order: below at 0, reached at 2 and kept to the end
    assert sustained_time([(2.0, 0.95), (0.0, 0.5)], 0.92, hold_s=1.0) == 2.0
    assert sustained_time([(2.0, 0.95), (3.0, 0.95), (0.0, 0.95), (1.0, 0.5)], 0.92,
                          hold_s=1.0) == 2.0
    assert sustained_time([], 0.92) is None


def test_shortfall_needs_a_positive_budget():
    from mxnet_ssp.lab.reproduce.stats import shortfall_seconds
    assert shortfall_seconds([(0.0, 0.0)], 0.9, 0) is None
    assert shortfall_seconds([(0.0, 0.0)], 0.9, 0.0) is None
    assert shortfall_seconds([(0.0, 0.0)], 0.9, -1.0) is None
    assert shortfall_seconds([(0.0, 0.0)], 0.9, 1e-3) == pytest.approx(1e-3, abs=1e-15)


def test_shortfall_counts_nothing_above_the_target():
    from mxnet_ssp.lab.reproduce.stats import shortfall_seconds
    # 0.45 short for 1 s, above the target for 2 s (no credit), 0.45 short for 1 s:
    # area 0.9, / 0.9 = 1 s
    curve = [(0.0, 0.45), (1.0, 1.0), (3.0, 0.45)]
    assert shortfall_seconds(curve, 0.9, 4.0) == pytest.approx(1.0, abs=1e-12)
    assert shortfall_seconds([(0.0, 0.9), (1.0, 0.95)], 0.9, 4.0) == 0.0
    assert shortfall_seconds([(0.0, 1.0)], 0.9, 4.0) == 0.0


def test_shortfall_sorts_the_curve_and_stops_at_the_budget():
    from mxnet_ssp.lab.reproduce.stats import shortfall_seconds
    curve = [(3.0, 0.45), (0.0, 0.45), (1.0, 1.0)]
    assert shortfall_seconds(curve, 0.9, 4.0) == pytest.approx(1.0, abs=1e-12)
    # evaluations from the budget on do not count; the last before it holds to the budget
    assert shortfall_seconds([(0.0, 0.45), (4.0, 0.0), (5.0, 0.0)], 0.9, 4.0) == \
        pytest.approx(2.0, abs=1e-12)
    # before the first evaluation the whole target is short: 2 s, then reached
    assert shortfall_seconds([(2.0, 0.9)], 0.9, 5.0) == pytest.approx(2.0, abs=1e-12)
    # no evaluation before the budget: the whole budget
    assert shortfall_seconds([(6.0, 1.0)], 0.9, 5.0) == pytest.approx(5.0, abs=1e-12)
    assert shortfall_seconds([], 0.9, 5.0) == pytest.approx(5.0, abs=1e-12)
