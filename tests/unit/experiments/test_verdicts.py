"""mxnet_ssp.lab.reproduce.verdicts at its boundaries: the claims decided seed by seed
(every claim's margin just below, at and just above it, the level a family of comparisons
asks for, never-reached trials), the unpaired bootstrap's order statistics, the minimum
number of trials, and the simulator-vs-lab arithmetic.

Expected values are worked out by hand (in the comments) or by a brute force written here,
never by the module's own helpers.  The paired intervals are order statistics of the per-seed
ratios (mxnet_ssp/lab/reproduce/paired.py): with 6 seeds and one comparison they are
[min, max] at 31/32 = 96.9%; with 8 seeds [min, max] at 254/256 = 99.2%, which is also what
two comparisons (97.5% each) need.  Six seeds cannot serve two comparisons.
"""
import itertools
import math
import operator
import random
import types
import warnings

import numpy as np
import pytest

from conftest import same_interval

from mxnet_ssp.lab.reproduce import verdicts as V
from mxnet_ssp.lab.reproduce.paired import Interval
from mxnet_ssp.lab.cluster_model.arms import parse_arm, sim_policy
from mxnet_ssp.lab.cluster_model.profiles import Scenario

S, R, I = 'supported', 'refuted', 'inconclusive'
TARGET = 0.93
NAN = math.nan
INF = math.inf


def trial(n, reach_at, final=0.94, status='ok'):
    """A trial whose accuracy reaches 0.95 at `reach_at` seconds (never if None)."""
    curve = [(0.5, 0.1)] + ([(float(reach_at), 0.95)] if reach_at is not None
                            else [(500.0, 0.5)])
    return {'status': status, 'trial': n, 'seed': n, 'curve': curve, 'final_accuracy': final}


def rows_for(times, accuracies=None):
    """rows of :func:`.report.summarize` from {arm: [seconds to the target of each trial]}
    and optionally {arm: [final accuracy of each trial]}."""
    accuracies = accuracies or {}
    rows = []
    for name, ts in times.items():
        accs = accuracies.get(name, [0.94] * len(ts))
        rows.append({'arm': parse_arm(name),
                     'trials': [trial(i, t, a) for i, (t, a) in enumerate(zip(ts, accs))]})
    return rows


def claims(times, accuracies=None, dssp_name='dssp'):
    """{claim without its parenthesis: (verdict, paired evidence)}"""
    return {v.claim.split(' (')[0]: (v.verdict, v.evidence)
            for v in V.verdicts(rows_for(times, accuracies), TARGET, dssp_name)}


same = same_interval           # (tests/conftest.py)


# ---------------------------------------------------------------------------
# the documented constants
# ---------------------------------------------------------------------------
def test_the_margins_fixed_before_the_lab_ran():
    # docs/lab.md: 95% intervals, 2,000 resamples for the unpaired reading, [0.9, 1.1],
    # -0.005, <= 1.1, >= 1.3, 15%, fewer than 6 trials give no 95% interval
    assert (V.LEVEL, V.RESAMPLES, V.MIN_TRIALS) == (0.95, 2000, 6)
    assert (V.SAME_TIME, V.ACCURACY_MARGIN, V.TUNED_MARGIN, V.SPEEDUP, V.SIM_TOLERANCE) == (
        0.10, 0.005, 0.10, 1.3, 0.15)
    assert (V.SUPPORTED, V.REFUTED, V.INCONCLUSIVE) == (S, R, I)

# ---------------------------------------------------------------------------
# the unpaired reading: order statistics of the bootstrap
# ---------------------------------------------------------------------------
def test_median_is_the_lower_middle_value():
    assert V._median([3.0, 1.0, 2.0]) == 2.0
    assert V._median([4.0, 1.0, 3.0, 2.0]) == 2.0          # lower of 2 and 3, not 2.5
    assert V._median([1.0, INF, INF, 2.0]) == 2.0          # sorted 1, 2, inf, inf: index 1
    assert V._median([1.0, INF, INF]) == INF               # a median that never got there
    assert V._median([5.0]) == 5.0


def test_interval_is_the_2_5_and_97_5_percent_order_statistics():
    # 2000 distinct values: tail 0.025 -> position 0.025 * 1999 = 49.975, rounded down to 49;
    # 0.975 * 1999 = 1949.025, rounded up to 1950
    samples = np.random.default_rng(11).permutation(2000).astype(float)
    assert V._interval(samples) == (49.0, 1950.0)
    # 41 values 0..40: 0.025 * 40 = 1 and 0.975 * 40 = 39 exactly
    assert V._interval(list(range(41))[::-1]) == (1.0, 39.0)
    # 20 values: 0.475 down to 0, 18.525 up to 19: the extremes
    assert V._interval([float(x) for x in range(20)]) == (0.0, 19.0)
    # one value, an infinite order statistic stays infinite (no interpolation)
    assert V._interval([5.0]) == (5.0, 5.0)
    assert V._interval([float(x) for x in range(19)] + [INF]) == (0.0, INF)
    low, high = V._interval([])
    assert math.isnan(low) and math.isnan(high)


def test_interval_allows_at_most_5_percent_undefined_samples():
    # 1 nan in 20 (5%): the interval of the 19 others, 0.45 -> 0 and 17.55 -> 18
    assert V._interval([NAN] + [float(x) for x in range(1, 20)]) == (1.0, 19.0)
    # 2 in 20 (10%): undefined
    low, high = V._interval([NAN, NAN] + [float(x) for x in range(1, 19)])
    assert math.isnan(low) and math.isnan(high)
    # 100 nan in 2000 (5%): 1900 values 0..1899: 0.025 * 1899 = 47.475 -> 47,
    # 0.975 * 1899 = 1851.525 -> 1852
    assert V._interval([NAN] * 100 + [float(x) for x in range(1900)]) == (47.0, 1852.0)
    # 101 in 2000 (5.05%): undefined
    low, high = V._interval([NAN] * 101 + [float(x) for x in range(1899)])
    assert math.isnan(low) and math.isnan(high)


def _replay_medians(rng, values):
    """2000 resamples of `values` with replacement, each one's lower median: drawn as the
    module documents (one integers() call of shape (2000, n)), computed with plain Python."""
    n = len(values)
    return [sorted(values[i] for i in row)[(n - 1) // 2]
            for row in rng.integers(0, n, size=(2000, n)).tolist()]


def test_resampled_medians_are_2000_lower_medians():
    values = [5.0, 1.0, 4.0, 2.0]
    got = V._resampled_medians(values, np.random.default_rng(3))
    assert got.tolist() == _replay_medians(np.random.default_rng(3), values)
    assert len(got) == 2000
    # the lower median of 4 draws from 1, 2, 4, 5 is the 2nd smallest: it is <= v when at
    # least 2 of the 4 draws are, P = 1 - q^4 - 4 (1 - q) q^3 with q = P(draw > v):
    # <= 1: 67/256, <= 2: 176/256, <= 4: 243/256; the enumeration of the 256 equally likely
    # resamples agrees, and the frequencies of 2000 seeded ones are close to it
    exact = {}
    for draw in itertools.product(values, repeat=4):
        m = sorted(draw)[1]
        exact[m] = exact.get(m, 0) + 1 / 256
    assert exact == pytest.approx({1.0: 67 / 256, 2.0: 109 / 256, 4.0: 67 / 256, 5.0: 13 / 256})
    for m, p in exact.items():
        seen = float(np.mean(got == m))
        assert abs(seen - p) < 4 * math.sqrt(p * (1 - p) / 2000) + 1e-9, (m, seen, p)




A9 = [100.0 + 3 * i for i in range(9)]
B9 = [50.0 + i for i in range(9)]


def _replay_pair(a, b, seed, op):
    """The numerator's (or minuend's) resamples are drawn first, then the other list's,
    from one generator."""
    rng = np.random.default_rng(seed)
    x, y = _replay_medians(rng, a), _replay_medians(rng, b)
    values = sorted(op(p, q) for p, q in zip(x, y))
    return values[49], values[1950]


@pytest.mark.parametrize('seed', [0, 1])
def test_ratio_interval_is_a_seeded_replay(seed):
    expected = _replay_pair(A9, B9, seed, operator.truediv)
    # point: median(A9) / median(B9) = 112 / 54
    assert V.ratio_interval(A9, B9, seed=seed) == (112.0 / 54.0,) + expected
    assert _replay_pair(A9, B9, 0, operator.truediv) != _replay_pair(A9, B9, 1, operator.truediv)
    assert V.ratio_interval(A9, B9) == V.ratio_interval(A9, B9, seed=0)


@pytest.mark.parametrize('seed', [0, 1])
def test_difference_interval_is_a_seeded_replay(seed):
    expected = _replay_pair(A9, B9, seed, operator.sub)
    assert V.difference_interval(A9, B9, seed=seed) == (112.0 - 54.0,) + expected
    assert _replay_pair(A9, B9, 0, operator.sub) != _replay_pair(A9, B9, 1, operator.sub)
    assert V.difference_interval(A9, B9) == (58.0,) + _replay_pair(A9, B9, 0, operator.sub)


def test_intervals_of_constant_lists_are_points():
    assert V.ratio_interval([3.0] * 6, [2.0] * 7) == (1.5, 1.5, 1.5)
    assert V.difference_interval([3.0] * 7, [2.0] * 6) == (1.0, 1.0, 1.0)
    # three distinct values twice each: the extremes.  The lower median of a resample of 6 is
    # its 3rd smallest: 90 with P(at least 3 of 6 draws are 90) = 0.32, 110 with P(at least 4
    # of 6 are 110) = 0.10, both far above the 2.5% tails
    assert V.ratio_interval([90.0, 110.0, 100.0] * 2, [100.0] * 6) == (1.0, 0.9, 1.1)
    assert V.difference_interval([0.0, 0.01, 0.02] * 2, [0.005] * 6) == pytest.approx(
        (0.005, -0.005, 0.015))


def test_the_level_asked_moves_the_order_statistics():
    # 41 resampled values of the ratio would be needed to pin it by hand; instead: a wider
    # level never gives a narrower interval, and 95% is the default
    a, b = [float(x) for x in range(100, 120)], [float(x) for x in range(50, 70)]
    _, low95, high95 = V.ratio_interval(a, b)
    _, low99, high99 = V.ratio_interval(a, b, level=1 - 0.05 / 3)
    assert low99 <= low95 < high95 <= high99 and (low99, high99) != (low95, high95)
    assert V.ratio_interval(a, b, level=0.95) == V.ratio_interval(a, b)
    # the 98.3% percentile interval of 0..40: tails 0.0083 * 40 = 0.33 -> 0, 39.67 -> 40
    assert V._interval(list(range(41)), 1 - 0.05 / 3) == (0.0, 40.0)


def test_infinite_times():
    # never reached everywhere: inf / inf is undefined, the interval too
    same(V.ratio_interval([INF] * 6, [INF] * 6), (NAN, NAN, NAN))
    # never reached on one side only: infinite or zero ratios, not undefined
    assert V.ratio_interval([INF] * 6, [1.0] * 6) == (INF, INF, INF)
    assert V.ratio_interval([1.0] * 6, [INF] * 6) == (0.0, 0.0, 0.0)
    same(V.ratio_interval([INF] * 5, [INF] * 6), (NAN, NAN, NAN))


def test_undefined_and_infinite_ratios_are_computed_quietly():
    # inf / inf (invalid) and x / 0 (divide) give nan and inf without a RuntimeWarning
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        same(V.ratio_interval([INF] * 6, [INF] * 6), (NAN, NAN, NAN))
        assert V.ratio_interval([1.0] * 6, [0.0] * 6) == (INF, INF, INF)
        same(V.ratio_interval([0.0] * 6, [0.0] * 6), (NAN, NAN, NAN))


# ---------------------------------------------------------------------------
# fewer than MIN_TRIALS values: no unpaired interval
# ---------------------------------------------------------------------------
def test_no_values_no_interval():
    assert V.ratio_interval([], [1.0] * 6) is None
    assert V.ratio_interval([1.0] * 6, []) is None
    assert V.difference_interval([], [1.0] * 6) is None
    assert V.difference_interval([1.0] * 6, []) is None


@pytest.mark.parametrize('n,m,defined', [(5, 6, False), (6, 5, False), (5, 5, False),
                                         (6, 6, True), (1, 9, False), (9, 1, False),
                                         (3, 3, False)])
def test_minimum_number_of_trials_at_its_edge(n, m, defined):
    a, b = [6.0] * n, [3.0] * m
    for got, point in ((V.ratio_interval(a, b), 2.0), (V.difference_interval(a, b), 3.0)):
        same(got, (point, point, point) if defined else (point, NAN, NAN))


def test_too_few_values_give_the_lower_median_and_no_interval():
    same(V.ratio_interval([4.0, 2.0], [1.0, 1.0, 1.0]), (2.0, NAN, NAN))
    same(V.difference_interval([1.0, 1.0, 1.0], [4.0, 2.0]), (-1.0, NAN, NAN))
    same(V.ratio_interval([5.0, 4.0, 3.0, 2.0, 1.0, 9.0], [1.0] * 5), (3.0, NAN, NAN))


# ---------------------------------------------------------------------------
# trial times and accuracies
# ---------------------------------------------------------------------------
def test_trial_times_and_accuracies_of_finished_trials_only():
    trials = [trial(1, 40.0, 0.95), trial(2, None, 0.6), trial(3, 10.0, 0.97, status='failed'),
              trial(4, 30.0, 0.96)]
    assert V.trial_times(trials, TARGET) == [40.0, INF, 30.0]
    assert V.trial_times(trials, 0.95) == [40.0, INF, 30.0]         # reaching exactly counts
    assert V.trial_times(trials, 0.96) == [INF, INF, INF]
    assert V.trial_accuracies(trials) == [0.95, 0.6, 0.96]
    assert V.trial_times([], TARGET) == [] and V.trial_accuracies([]) == []
    # by seed: what the paired comparisons read
    assert V.seed_times(trials, TARGET) == {1: 40.0, 2: INF, 4: 30.0}
    assert V.seed_accuracies(trials) == {1: 0.95, 2: 0.6, 4: 0.96}
    assert V.seed_times([], TARGET) == {} and V.seed_accuracies([]) == {}



# ---------------------------------------------------------------------------
# the decision rules: only a decisive paired interval decides
# ---------------------------------------------------------------------------
def iv(low, high, point=1.0, level=31 / 32, asked=0.95):
    return Interval(point, low, high, level, asked)


@pytest.mark.parametrize('interval,verdict', [
    (None, I),
    (iv(NAN, NAN), I),
    (iv(NAN, 0.5), I),              # an undefined bound decides nothing, either one
    (iv(2.0, NAN), I),
    (iv(1.5, 2.0, point=NAN), S),   # only the bounds count, not the point
    (iv(1.01, 2.0), S),             # just above the bound
    (iv(1.0, 2.0), I),              # at it: not above
    (iv(0.0, 1.0), I),              # high at it: not below
    (iv(0.0, 0.99), R),             # just below
    (iv(0.5, 1.5), I),              # straddles
    (iv(1.01, 2.0, level=15 / 16), I),      # [min, max] of 5 covers 93.8%: no verdict
    (iv(0.0, 0.99, level=15 / 16), I),
    (iv(1.01, 2.0, asked=0.975), I),        # 6 seeds cannot serve two comparisons
    (iv(1.01, 2.0, level=254 / 256, asked=1 - 0.05 / 3), S),    # 8 can serve three
])
def test_greater(interval, verdict):
    assert V._greater(interval, 1.0) == verdict


@pytest.mark.parametrize('interval,verdict', [
    (None, I),
    (iv(NAN, 0.5), I),
    (iv(0.5, NAN), I),
    (iv(0.5, 0.9, point=NAN), S),
    (iv(0.5, 1.0), S),              # at the bound: supported (at most)
    (iv(0.5, 1.01), I),             # just above it, low below: straddles
    (iv(1.0, 2.0), I),              # low at the bound: not above it
    (iv(1.01, 2.0), R),             # just above
    (iv(0.5, 0.9, level=0.75), I),  # [min, max] of 3
    (iv(1.01, 2.0, level=0.75), I),
])
def test_at_most(interval, verdict):
    assert V._at_most(interval, 1.0) == verdict


@pytest.mark.parametrize('interval,verdict', [
    (None, I),
    (iv(NAN, 1.0), I),
    (iv(0.9, 1.1), S),              # both ends at the margins
    (iv(0.95, 1.05), S),
    (iv(0.89, 1.1), I),
    (iv(0.9, 1.11), I),
    (iv(0.5, 0.9), I),              # high at 0.9: not below it
    (iv(0.5, 0.89), R),
    (iv(1.1, 2.0), I),              # low at 1.1: not above it
    (iv(1.11, 2.0), R),
    (iv(0.0, math.inf), I),         # seeds where neither got there
    (iv(0.95, 1.05, level=15 / 16), I),
])
def test_within(interval, verdict):
    assert V._within(interval, 0.9, 1.1) == verdict


@pytest.mark.parametrize('verdicts,verdict', [
    ([], I), ([S], S), ([S, S], S), ([S, I], I), ([I, S, I], I), ([S, R], R), ([I, R, S], R),
    ([R], R), ([I], I),
])
def test_all(verdicts, verdict):
    assert V._all(verdicts) == verdict


@pytest.mark.parametrize('interval,fmt,text', [
    (None, '%.2f', 'no trials'),
    ((1.0, 0.5, 2.0), '%.2f', '1.00 [0.50, 2.00]'),
    ((1.234, 1.0, 1.5), '%.1f', '1.2 [1.0, 1.5]'),
    ((INF, 2.0, INF), '%.2f', 'never [2.00, never]'),
    ((-INF, -INF, 0.0), '%.2f', 'never [never, 0.00]'),
    ((NAN, NAN, NAN), '%.2f', '- [-, -]'),
    ((2.0, NAN, NAN), '%.2f', '2.00 [-, -]'),
    ((0.001, -0.0025, 0.0), '%+.4f', '+0.0010 [-0.0025, +0.0000]'),
])
def test_fmt_interval_of_the_unpaired_reading(interval, fmt, text):
    assert V._fmt_interval(interval, fmt) == text


def test_fmt_interval_defaults_to_two_decimals():
    assert V._fmt_interval((1.0, 0.125, 3.14159)) == '1.00 [0.12, 3.14]'


# ---------------------------------------------------------------------------
# the claims: texts and evidence
# ---------------------------------------------------------------------------
CLAIMS = ['BSP slower than every SSP (t_BSP / t_SSP > 1)',
          'every SSP slower than DSSP (t_SSP / t_DSSP > 1)',
          'DSSP as fast as ASP (t_DSSP / t_ASP within 1 \u00b1 0.1)',
          "DSSP's final accuracy >= ASP's (difference > -0.005)",
          'untuned DSSP within 10% of the best hand-tuned SSP (t_DSSP / t_SSP <= 1.1 for '
          'every s)',
          'DSSP at least 1.3x faster than BSP (t_BSP / t_DSSP >= 1.3)']


def eight(values):
    """Three values' pattern over 8 seeds: the same minimum and maximum."""
    return (list(values) * 3)[:8]


def six(values):
    return list(values) * 2


def test_claims_in_table_order_with_their_evidence():
    # equal times within each paradigm: every interval is a point; ssp6 given first; two SSP
    # thresholds ask 97.5% of each comparison: 8 seeds, [min, max] at 254/256
    times = {'ssp6': [120] * 8, 'bsp': [200] * 8, 'asp': [100] * 8, 'ssp3': [150] * 8,
             'dssp': [100] * 8}
    got = V.verdicts(rows_for(times), TARGET)
    assert [v.claim for v in got] == CLAIMS
    assert [v.verdict for v in got] == [S] * 6
    assert [v.evidence for v in got] == [
        'ssp3: 1.33 [1.33, 1.33] 99.2%; ssp6: 1.67 [1.67, 1.67] 99.2%',   # 200/150, 200/120
        'ssp3: 1.50 [1.50, 1.50] 99.2%; ssp6: 1.20 [1.20, 1.20] 99.2%',   # 150/100, 120/100
        't_DSSP / t_ASP: 1.00 [1.00, 1.00] 99.2%',
        'acc_DSSP - acc_ASP: +0.0000 [+0.0000, +0.0000] 99.2%',
        'ssp3: 0.67 [0.67, 0.67] 99.2%; ssp6: 0.83 [0.83, 0.83] 99.2%',   # 100/150, 100/120
        't_BSP / t_DSSP: 2.00 [2.00, 2.00] 99.2%']
    assert [v.unpaired for v in got] == [
        'ssp3: 1.33 [1.33, 1.33]; ssp6: 1.67 [1.67, 1.67]',
        'ssp3: 1.50 [1.50, 1.50]; ssp6: 1.20 [1.20, 1.20]',
        't_DSSP / t_ASP: 1.00 [1.00, 1.00]',
        'acc_DSSP - acc_ASP: +0.0000 [+0.0000, +0.0000]',
        'ssp3: 0.67 [0.67, 0.67]; ssp6: 0.83 [0.83, 0.83]',
        't_BSP / t_DSSP: 2.00 [2.00, 2.00]']
    # without the unpaired reading (the power simulation's call): the same verdicts
    quick = V.verdicts(rows_for(times), TARGET, unpaired=False)
    assert [(v.claim, v.verdict, v.evidence) for v in quick] == [
        (v.claim, v.verdict, v.evidence) for v in got]
    assert {v.unpaired for v in quick} == {''}


def test_six_seeds_decide_one_comparison_but_not_two():
    times = {'ssp6': [120] * 6, 'bsp': [200] * 6, 'asp': [100] * 6, 'ssp3': [150] * 6,
             'dssp': [100] * 6}
    got = {v.claim.split(' (')[0]: (v.verdict, v.evidence)
           for v in V.verdicts(rows_for(times), TARGET)}
    # [min, max] of 6 covers 31/32 = 96.9%: enough for 95%, short of 97.5%
    assert got['BSP slower than every SSP'] == (
        I, 'ssp3: 1.33 [1.33, 1.33] 96.9% < 97.5%; ssp6: 1.67 [1.67, 1.67] 96.9% < 97.5%')
    assert got['every SSP slower than DSSP'][0] == I
    assert got['untuned DSSP within 10% of the best hand-tuned SSP'][0] == I
    assert got['DSSP as fast as ASP'] == (S, 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 96.9%')
    assert got['DSSP at least 1.3x faster than BSP'][0] == S
    # one SSP threshold: a family of one, 95%
    del times['ssp6']
    got = claims(times)
    assert got['every SSP slower than DSSP'] == (S, 'ssp3: 1.50 [1.50, 1.50] 96.9%')
    # three thresholds: 98.3%, which 8 seeds reach (99.2%) and 6 do not
    times = {'bsp': [200] * 8, 'ssp3': [150] * 8, 'ssp6': [120] * 8, 'ssp15': [110] * 8}
    assert claims(times)['BSP slower than every SSP'][0] == S
    times = {k: v[:6] for k, v in times.items()}
    assert claims(times)['BSP slower than every SSP'][1].endswith('96.9% < 98.3%')


def test_claims_without_trials():
    got = V.verdicts([], TARGET)
    assert [v.verdict for v in got] == [I] * 6
    texts = ['no trials', 'no trials', 't_DSSP / t_ASP: no trials',
             'acc_DSSP - acc_ASP: no trials', 'no trials', 't_BSP / t_DSSP: no trials']
    assert [v.evidence for v in got] == texts
    assert [v.unpaired for v in got] == texts
    assert got[4].claim.startswith('untuned DSSP within 10% of the best hand-tuned SSP')


def test_the_dssp_arm_is_chosen_by_name():
    # dssp (bounded) as slow as BSP, dssp-paper as fast as ASP
    times = {'bsp': [200] * 6, 'asp': [100] * 6, 'ssp3': [150] * 6, 'dssp': [200] * 6,
             'dssp-paper': [100] * 6}
    bounded = claims(times)
    paper = claims(times, dssp_name='dssp-paper')
    assert bounded['DSSP as fast as ASP'] == (R, 't_DSSP / t_ASP: 2.00 [2.00, 2.00] 96.9%')
    assert paper['DSSP as fast as ASP'] == (S, 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 96.9%')
    assert paper['DSSP at least 1.3x faster than BSP'][0] == S
    assert bounded['DSSP at least 1.3x faster than BSP'][0] == R
    # the other DSSP arms are not SSP thresholds
    assert paper['every SSP slower than DSSP'][1].startswith('ssp3: 1.50 ')
    assert 'dssp' not in paper['BSP slower than every SSP'][1]
    # a name that did not run: every DSSP claim inconclusive
    none = claims(times, dssp_name='dssp-threshold')
    assert {k: v for k, (v, _) in none.items()} == {
        'BSP slower than every SSP': S, 'every SSP slower than DSSP': I,
        'DSSP as fast as ASP': I, "DSSP's final accuracy >= ASP's": I,
        'untuned DSSP within 10% of the best hand-tuned SSP': I,
        'DSSP at least 1.3x faster than BSP': I}


def test_the_ssp_arms_are_the_plain_ssp_ones_that_finished():
    times = {'bsp': [200] * 6, 'ssp3': [150] * 6, 'ssp9': [10] * 6, 'ssp4-balance': [300] * 6,
             'asp': [100] * 6, 'dssp': [100] * 6}
    rows = rows_for(times)
    for t in rows[2]['trials']:               # ssp9 never finished a trial
        t['status'] = 'failed'
    got = {v.claim.split(' (')[0]: (v.verdict, v.evidence) for v in V.verdicts(rows, TARGET)}
    # one threshold left: a family of one, 95%
    assert got['BSP slower than every SSP'] == (S, 'ssp3: 1.33 [1.33, 1.33] 96.9%')
    assert got['every SSP slower than DSSP'] == (S, 'ssp3: 1.50 [1.50, 1.50] 96.9%')
    assert got['untuned DSSP within 10% of the best hand-tuned SSP'] == (
        S, 'ssp3: 0.67 [0.67, 0.67] 96.9%')


def test_within_10_percent_of_the_best_ssp_is_within_10_percent_of_every_ssp():
    # no threshold is chosen: DSSP is compared with each; ssp6 is the fastest, ssp15 never
    # gets there (ratio 0); three comparisons ask 98.3% each, 8 seeds give 99.2%
    times = {'ssp3': [150] * 8, 'ssp6': [100] * 8, 'ssp15': [None] * 8, 'dssp': [110] * 8}
    claim = 'untuned DSSP within 10% of the best hand-tuned SSP'
    assert claims(times)[claim] == (
        S, 'ssp3: 0.73 [0.73, 0.73] 99.2%; ssp6: 1.10 [1.10, 1.10] 99.2%; '
        'ssp15: 0.00 [0.00, 0.00] 99.2%')
    # more than 10% slower than the fastest one: refuted, whatever the others
    times['ssp6'] = [99.9] * 8
    assert claims(times)[claim][0] == R
    # an SSP faster on some seeds and far slower on others: its per-seed ratios straddle
    times['ssp6'] = eight([80, 300, 300])
    assert claims(times)[claim][0] == I


# ---------------------------------------------------------------------------
# seed by seed: what pairing does
# ---------------------------------------------------------------------------
def test_pairing_removes_what_a_seed_shares():
    # DSSP and ASP take the same time on every seed, and seeds differ 8-fold: paired, the
    # ratio is 1 on every seed; unpaired, the medians' ratio spreads over the seeds' range
    spread = [50, 100, 200, 400, 80, 160]
    got = V.verdicts(rows_for({'asp': spread, 'dssp': spread}), TARGET)
    same_time = {v.claim.split(' (')[0]: v for v in got}['DSSP as fast as ASP']
    assert same_time.verdict == S
    assert same_time.evidence == 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 96.9%'
    low, high = [float(x) for x in
                 same_time.unpaired.split('[')[1].rstrip(']').split(', ')]
    assert low < 0.9 and high > 1.1
    # the same times on other seeds: per seed 100/50, 200/100, 400/200, 80/400, 160/80,
    # 50/160, sorted 0.2, 0.31, 2, 2, 2, 2
    shifted = spread[1:] + spread[:1]
    got = claims({'asp': spread, 'dssp': shifted})['DSSP as fast as ASP']
    assert got == (I, 't_DSSP / t_ASP: 2.00 [0.20, 2.00] 96.9%')


def test_pairs_are_matched_by_seed_not_by_position():
    rows = rows_for({'asp': [100, 200, 300, 400, 500, 600], 'dssp': [100, 200, 300, 400, 500,
                                                                      600]})
    rows[1]['trials'].reverse()
    got = {v.claim.split(' (')[0]: v for v in V.verdicts(rows, TARGET)}
    assert got['DSSP as fast as ASP'].evidence == 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 96.9%'
    # a seed one arm lacks is left out: 5 pairs, [min, max] at 15/16
    rows[0]['trials'][2]['status'] = 'failed'
    got = {v.claim.split(' (')[0]: v for v in V.verdicts(rows, TARGET)}
    assert (got['DSSP as fast as ASP'].verdict, got['DSSP as fast as ASP'].evidence) == (
        I, 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 93.8% < 95%')


def test_seeds_where_neither_arm_got_there_only_widen_the_interval():
    claim = 'DSSP as fast as ASP'
    # all six: the ratio may be anything, no point
    assert claims({'asp': [None] * 6, 'dssp': [None] * 6})[claim] == (
        I, 't_DSSP / t_ASP: - [0.00, never] 96.9%')
    # two of six: [min, max] takes them in, 0 and never; the point stays 1
    times = [100, 100, 100, 100, None, None]
    assert claims({'asp': times, 'dssp': times})[claim] == (
        I, 't_DSSP / t_ASP: 1.00 [0.00, never] 96.9%')
    # one of ten: the 2nd smallest and 2nd largest (97.9%) leave it out
    times = [100] * 9 + [None]
    assert claims({'asp': times, 'dssp': times})[claim] == (
        S, 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 97.9%')
    # one arm alone never got there on a seed: a ratio of never (or 0), not unknown
    assert claims({'asp': [100] * 6, 'dssp': [100] * 5 + [None]})[claim] == (
        I, 't_DSSP / t_ASP: 1.00 [1.00, never] 96.9%')
    assert claims({'asp': [100] * 6, 'dssp': [None] * 6})[claim] == (
        R, 't_DSSP / t_ASP: never [never, never] 96.9%')


# ---------------------------------------------------------------------------
# the claims at their margins
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('bsp,ssp3,ssp6,verdict', [
    ([101] * 3, [100] * 3, [100] * 3, S),            # 1.01 for both
    ([100] * 3, [100] * 3, [50] * 3, I),             # ssp3 at exactly 1: not above
    ([99] * 3, [100] * 3, [50] * 3, R),              # ssp3 at 0.99
    ([100, 150, 200], [100] * 3, [50] * 3, I),       # ssp3 in [1.0, 2.0]: low at 1
    ([50, 75, 100], [100] * 3, [25] * 3, I),         # ssp3 in [0.5, 1.0]: high at 1
    ([50, 75, 99], [100] * 3, [25] * 3, R),          # ssp3 in [0.5, 0.99]
    ([200] * 3, [100] * 3, [100, 200, 300], I),      # ssp6 straddles: [0.67, 2]
    ([200] * 3, [100] * 3, [300] * 3, R),            # ssp6 refutes although ssp3 supports
])
def test_bsp_slower_than_every_ssp(bsp, ssp3, ssp6, verdict):
    # two thresholds: 8 seeds, [min, max] of the per-seed ratios
    times = {'bsp': eight(bsp), 'ssp3': eight(ssp3), 'ssp6': eight(ssp6)}
    assert claims(times)['BSP slower than every SSP'][0] == verdict


def test_bsp_slower_than_every_ssp_needs_bsp_and_an_ssp():
    assert claims({'ssp3': [100] * 6})['BSP slower than every SSP'] == (
        I, 'ssp3: no trials')
    assert claims({'bsp': [200] * 6})['BSP slower than every SSP'] == (I, 'no trials')


@pytest.mark.parametrize('ssp3,dssp,verdict', [
    ([101] * 3, [100] * 3, S),
    ([100] * 3, [100] * 3, I),
    ([99] * 3, [100] * 3, R),
    ([101, 150, 200], [100] * 3, S),
    ([100, 150, 200], [100] * 3, I),
    ([50, 75, 100], [100] * 3, I),
    ([50, 75, 99], [100] * 3, R),
    ([101] * 3, [None] * 3, R),                      # DSSP never: ratio 0
    ([None] * 3, [100] * 3, S),                      # SSP never: ratio inf
    ([None] * 3, [None] * 3, I),                     # neither: anything in [0, inf]
])
def test_every_ssp_slower_than_dssp(ssp3, dssp, verdict):
    assert claims({'ssp3': six(ssp3), 'dssp': six(dssp)})['every SSP slower than DSSP'][0] \
        == verdict


@pytest.mark.parametrize('dssp,verdict,evidence', [
    ([90, 100, 110], S, '1.00 [0.90, 1.10]'),        # both bounds exactly at the margins
    ([90] * 3, S, '0.90 [0.90, 0.90]'),              # at 1 - 0.1
    ([110] * 3, S, '1.10 [1.10, 1.10]'),             # at 1 + 0.1
    ([89.9, 100, 110], I, '1.00 [0.90, 1.10]'),      # low just below 0.9
    ([90, 100, 110.1], I, '1.00 [0.90, 1.10]'),      # high just above 1.1
    ([89.9] * 3, R, '0.90 [0.90, 0.90]'),            # 0.899: all below
    ([110.1] * 3, R, '1.10 [1.10, 1.10]'),           # 1.101: all above
    ([85, 87, 90], I, '0.87 [0.85, 0.90]'),          # high at 0.9: not below it
    ([85, 87, 89.9], R, '0.87 [0.85, 0.90]'),
    ([110, 112, 115], I, '1.12 [1.10, 1.15]'),       # low at 1.1: not above it
    ([110.1, 112, 115], R, '1.12 [1.10, 1.15]'),
    ([None] * 3, R, 'never [never, never]'),         # DSSP never gets there
])
def test_dssp_as_fast_as_asp(dssp, verdict, evidence):
    got = claims({'asp': [100] * 6, 'dssp': six(dssp)})['DSSP as fast as ASP']
    assert got == (verdict, 't_DSSP / t_ASP: ' + evidence + ' 96.9%')


def test_dssp_as_fast_as_asp_needs_six_seeds_of_both():
    assert claims({'asp': [100] * 5, 'dssp': [100] * 6})['DSSP as fast as ASP'] == (
        I, 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 93.8% < 95%')
    assert claims({'asp': [100] * 6, 'dssp': [100] * 5})['DSSP as fast as ASP'][0] == I
    assert claims({'asp': [100] * 6, 'dssp': [100] * 6})['DSSP as fast as ASP'][0] == S
    # three seeds: [min, max] at 75%, shown, deciding nothing; the unpaired reading: none
    got = {v.claim.split(' (')[0]: v for v in V.verdicts(
        rows_for({'asp': [100] * 3, 'dssp': [100] * 3}), TARGET)}['DSSP as fast as ASP']
    assert (got.verdict, got.evidence, got.unpaired) == (
        I, 't_DSSP / t_ASP: 1.00 [1.00, 1.00] 75% < 95%', 't_DSSP / t_ASP: 1.00 [-, -]')


@pytest.mark.parametrize('dssp,asp,verdict', [
    # 0.0 - 0.005 is -0.005 exactly in floating point (checked below): at the margin
    ([0.0] * 3, [0.005] * 3, I),
    ([0.0001] * 3, [0.005] * 3, S),                  # -0.0049
    ([0.0] * 3, [0.0051] * 3, R),                    # -0.0051
    ([0.0, 0.01, 0.02], [0.005] * 3, I),             # [-0.005, 0.015]: low at the margin
    ([0.0001, 0.01, 0.02], [0.005] * 3, S),          # [-0.0049, 0.015]
    ([-0.005, 0.0, 0.005], [0.01] * 3, I),           # [-0.015, -0.005]: high at the margin
    ([-0.005, 0.0, 0.0049], [0.01] * 3, R),          # [-0.015, -0.0051]
    ([0.94] * 3, [0.6] * 3, S),
    ([0.6] * 3, [0.94] * 3, R),
    # 0.94 - 0.945 is -0.0050000000000000044 in floating point: still at the margin, not below
    ([0.94] * 3, [0.945] * 3, I),
    ([0.9451] * 3, [0.95] * 3, S),                   # -0.0049
    ([0.9449] * 3, [0.95] * 3, R),                   # -0.0051
])
def test_dssp_accuracy_not_below_asp_s(dssp, asp, verdict):
    assert 0.0 - 0.005 == -0.005 and 0.005 - 0.01 == -0.005
    times = {'asp': [100] * 6, 'dssp': [100] * 6}
    got = claims(times, {'asp': six(asp), 'dssp': six(dssp)})["DSSP's final accuracy >= ASP's"]
    assert got[0] == verdict and got[1].startswith('acc_DSSP - acc_ASP: ')


def test_dssp_accuracy_evidence_and_trials():
    times = {'asp': [100] * 6, 'dssp': [100] * 6}
    got = claims(times, {'asp': [0.9] * 6, 'dssp': six([0.91, 0.92, 0.93])})
    assert got["DSSP's final accuracy >= ASP's"] == (
        S, 'acc_DSSP - acc_ASP: +0.0200 [+0.0100, +0.0300] 96.9%')
    # five DSSP trials: no 95% interval, inconclusive although far above
    got = claims({'asp': [100] * 6, 'dssp': [100] * 5},
                 {'asp': [0.6] * 6, 'dssp': [0.9] * 5})
    assert got["DSSP's final accuracy >= ASP's"] == (
        I, 'acc_DSSP - acc_ASP: +0.3000 [+0.3000, +0.3000] 93.8% < 95%')
    # failed trials do not count: one of six DSSP trials failed
    rows = rows_for({'asp': [100] * 6, 'dssp': [100] * 6},
                    {'asp': [0.6] * 6, 'dssp': [0.9] * 6})
    rows[1]['trials'][0]['status'] = 'failed'
    got = {v.claim.split(' (')[0]: v.verdict for v in V.verdicts(rows, TARGET)}
    assert got["DSSP's final accuracy >= ASP's"] == I
    # an accuracy counts even when the target was never reached
    got = claims({'asp': [None] * 6, 'dssp': [None] * 6},
                 {'asp': [0.6] * 6, 'dssp': [0.9] * 6})
    assert got["DSSP's final accuracy >= ASP's"][0] == S


@pytest.mark.parametrize('dssp,verdict,evidence', [
    ([110] * 3, S, '1.10 [1.10, 1.10]'),             # at 1.1: at most, so supported
    ([109.9] * 3, S, '1.10 [1.10, 1.10]'),
    ([110.1] * 3, R, '1.10 [1.10, 1.10]'),           # 1.101
    ([100, 105, 110], S, '1.05 [1.00, 1.10]'),       # high exactly at 1.1
    ([100, 105, 110.1], I, '1.05 [1.00, 1.10]'),     # high just above
    ([110, 115, 120], I, '1.15 [1.10, 1.20]'),       # low at 1.1: not above it
    ([110.1, 115, 120], R, '1.15 [1.10, 1.20]'),     # low just above
    ([None] * 3, R, 'never [never, never]'),
])
def test_untuned_dssp_within_10_percent_of_the_best_ssp(dssp, verdict, evidence):
    got = claims({'ssp3': [100] * 6, 'dssp': six(dssp)})[
        'untuned DSSP within 10% of the best hand-tuned SSP']
    assert got == (verdict, 'ssp3: ' + evidence + ' 96.9%')


def test_untuned_dssp_needs_an_ssp_and_a_dssp_arm():
    claim = 'untuned DSSP within 10% of the best hand-tuned SSP'
    assert claims({'dssp': [100] * 6})[claim] == (I, 'no trials')
    assert claims({'ssp3': [100] * 6})[claim] == (I, 'no trials')
    # a DSSP arm whose trials all failed has no times
    rows = rows_for({'ssp3': [100] * 6, 'dssp': [100] * 6})
    for t in rows[1]['trials']:
        t['status'] = 'failed'
    got = {v.claim.split(' (')[0]: (v.verdict, v.evidence) for v in V.verdicts(rows, TARGET)}
    assert got[claim] == (I, 'no trials')


@pytest.mark.parametrize('bsp,verdict,evidence', [
    ([130] * 3, S, '1.30 [1.30, 1.30]'),             # exactly 1.3: "at least"
    ([130.1] * 3, S, '1.30 [1.30, 1.30]'),
    ([129.9] * 3, R, '1.30 [1.30, 1.30]'),           # 1.299: below
    ([120, 130, 140], I, '1.30 [1.20, 1.40]'),
    ([130, 140, 150], S, '1.40 [1.30, 1.50]'),       # low exactly at 1.3
    ([129.9, 140, 150], I, '1.40 [1.30, 1.50]'),     # low just below
    ([120, 125, 130], I, '1.25 [1.20, 1.30]'),       # high exactly at 1.3: not below
    ([120, 125, 129.9], R, '1.25 [1.20, 1.30]'),     # high just below
    ([None] * 3, S, 'never [never, never]'),         # BSP never gets there
])
def test_dssp_at_least_1_3x_faster_than_bsp(bsp, verdict, evidence):
    got = claims({'bsp': six(bsp), 'dssp': [100] * 6})['DSSP at least 1.3x faster than BSP']
    assert got == (verdict, 't_BSP / t_DSSP: ' + evidence + ' 96.9%')


# ---------------------------------------------------------------------------
# batch balancing
# ---------------------------------------------------------------------------
def test_balance_verdicts_at_the_bound():
    times = {'asp': [100] * 6, 'bsp': [200] * 6, 'ssp3': [150] * 6,
             'bsp-balance': [100] * 6,                    # exactly ASP's: no later, supported
             'ssp3-balance': [100.1] * 6,                 # 1.001: refuted
             'dssp-balance': six([90, 100, 110]),         # [0.9, 1.1]: straddles
             'dssp-paper-balance': six([100, 110, 120])}  # [1.0, 1.2]: low at 1, inconclusive
    got = V.balance_verdicts(rows_for(times), TARGET)
    assert [(a.name, v, base) for a, v, _, _, base, _ in got] == [
        ('bsp-balance', S, 'bsp'), ('ssp3-balance', R, 'ssp3'), ('dssp-balance', I, 'dssp'),
        ('dssp-paper-balance', I, 'dssp-paper')]
    by_name = {a.name: (vs_asp, second, vs_base) for a, _, vs_asp, second, _, vs_base in got}
    assert by_name['bsp-balance'] == ((1.0, 1.0, 1.0, 31 / 32, 0.95), (1.0, 1.0, 1.0),
                                      (0.5, 0.5, 0.5, 31 / 32, 0.95))
    same(by_name['ssp3-balance'][0], (1.001, 1.001, 1.001, 31 / 32, 0.95))
    same(by_name['ssp3-balance'][2], (100.1 / 150,) * 3 + (31 / 32, 0.95))
    same(by_name['dssp-balance'][0], (1.0, 0.9, 1.1, 31 / 32, 0.95))
    assert by_name['dssp-balance'][2] is None          # plain dssp did not run
    same(by_name['dssp-paper-balance'][0], (1.1, 1.0, 1.2, 31 / 32, 0.95))


def test_balance_verdicts_skip_plain_and_unfinished_arms():
    rows = rows_for({'bsp-balance': [50] * 6, 'ssp3-balance': [50] * 6, 'bsp': [100] * 6})
    for t in rows[1]['trials']:
        t['status'] = 'failed'
    got = V.balance_verdicts(rows, TARGET)
    assert len(got) == 1
    arm, verdict, vs_asp, second, base, vs_base = got[0]
    # no ASP arm: nothing to compare with
    assert (arm.name, verdict, vs_asp, second, base) == ('bsp-balance', I, None, None, 'bsp')
    same(vs_base, (0.5, 0.5, 0.5, 31 / 32, 0.95))
    # five ASP trials: [min, max] at 93.8%, no verdict; no unpaired interval
    rows = rows_for({'asp': [100] * 5, 'bsp-balance': [50] * 6})
    (_, verdict, vs_asp, second, _, _), = V.balance_verdicts(rows, TARGET)
    assert verdict == I and not vs_asp.decisive
    same(vs_asp, (0.5, 0.5, 0.5, 15 / 16, 0.95))
    same(second, (0.5, NAN, NAN))
    assert V.balance_verdicts([], TARGET) == []
    # the unpaired reading can be left out
    rows = rows_for({'asp': [100] * 6, 'bsp-balance': [50] * 6})
    assert V.balance_verdicts(rows, TARGET, unpaired=False)[0][3] is None


# ---------------------------------------------------------------------------
# the simulator next to the lab
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('arm,policy', [
    ('bsp', 'ssp:0'), ('bsp-balance', 'ssp:0'), ('asp', 'asp'), ('asp-lrtau', 'asp'),
    ('ssp3', 'ssp:3'), ('ssp15', 'ssp:15'), ('dssp', 'dssp:3:15:bounded'),
    ('dssp2-10-paper', 'dssp:2:10:paper'), ('dssp4-9-threshold', 'dssp:4:9:threshold'),
])
def test_sim_policy(arm, policy):
    assert sim_policy(parse_arm(arm)) == policy


def _scenario(*times, links=None):
    return types.SimpleNamespace(times=lambda: list(times),
                                 link_times=lambda: list(links or [0.0] * len(times)))


def test_measured_rates():
    trial_ = {'it_per_s': {0: 10.0, 1: None, 2: 4.0, 3: 0.0},
              'idle_share': {0: 0.3, 1: 0.0, 2: 0.9}}
    # total: 10 + 4 (None and 0 left out); fast ranks 0, 1 (1.0 s): shares 0.3 and 0.0
    assert V.measured_rates(trial_, _scenario(1.0, 1.0, 2.5, 1.5)) == (14.0, pytest.approx(0.15))
    # a fast rank without a share is left out; no share at all: None
    trial_['idle_share'] = {0: None, 1: 0.2, 2: 0.9}
    assert V.measured_rates(trial_, _scenario(1.0, 1.0, 2.5, 1.5)) == (14.0, pytest.approx(0.2))
    assert V.measured_rates({'it_per_s': {0: 2.0, 1: 3.0}}, _scenario(1.0, 2.0)) == (5.0, None)
    assert V.measured_rates({'it_per_s': {0: 2.0}, 'idle_share': {1: 0.5}},
                            _scenario(1.0, 2.0)) == (2.0, None)
    # the slow rank is not a fast one
    assert V.measured_rates({'it_per_s': {}, 'idle_share': {0: 0.1, 1: 0.7}},
                            _scenario(2.0, 1.0)) == (0, pytest.approx(0.7))
    # nor is a rank slow by its link alone (link-4's worker 3)
    assert V.measured_rates({'it_per_s': {}, 'idle_share': {0: 0.1, 1: 0.7}},
                            _scenario(1.0, 1.0, links=[0.1, 0.01])) == (0, pytest.approx(0.7))


#: no jitter: every draw is the plain time, rank 0 takes 1 s, rank 1 2 s
FLAT = Scenario('flat', 'test', workers=2, base_s=1.0, slow=((1, 2.0),))


def test_simulated_rates_on_plain_times():
    asp, bsp = parse_arm('asp'), parse_arm('bsp')
    # ASP, 10 iterations: nobody waits; 10 / 10 s + 10 / 20 s
    assert V.simulated_rates(asp, FLAT, 1, 10) == pytest.approx((1.5, 0.0))
    # + 0.5 s push/pull per iteration: 10 / 15 + 10 / 25; rank 0 computes 10 of 15 s
    assert V.simulated_rates(asp, FLAT, 1, 10, [0.5]) == pytest.approx((10 / 15 + 10 / 25,
                                                                        5 / 15))
    # BSP: rank 0 waits 1 s for rank 1 before each of its iterations 2..10 (its span ends at
    # its last push, 10 + 9 s); rank 1 never waits
    assert V.simulated_rates(bsp, FLAT, 1, 10) == pytest.approx((10 / 19 + 10 / 20, 9 / 19))
    # with 0.5 s steps: rank 0 1.5 s per iteration + 9 waits of 1 s, rank 1 2.5 s
    assert V.simulated_rates(bsp, FLAT, 1, 10, [0.5]) == pytest.approx(
        (10 / 24 + 10 / 25, 1 - 10 / 24))
    # an empty tuple of steps is no step time
    assert V.simulated_rates(asp, FLAT, 1, 10, ()) == pytest.approx((1.5, 0.0))
    # spans shorter than a second count too: 10 / 0.1 s + 10 / 0.2 s
    fast = Scenario('fast', 'test', workers=2, base_s=0.01, slow=((1, 2.0),))
    assert V.simulated_rates(asp, fast, 1, 10) == pytest.approx((150.0, 0.0))


def test_simulated_rates_draw_the_step_times_from_a_generator_seeded_by_the_trial():
    samples = [0.1, 0.7]
    for seed in (3, 7):
        rng = random.Random('steps:%d' % seed)
        steps = [[rng.choice(samples) for _ in range(10)] for _ in range(2)]   # rank 0, 1
        spans = [10 * 1.0 + sum(steps[0]), 10 * 2.0 + sum(steps[1])]
        total, share = V.simulated_rates(parse_arm('asp'), FLAT, seed, 10, samples)
        assert total == pytest.approx(10 / spans[0] + 10 / spans[1])
        assert share == pytest.approx(1 - 10 / spans[0])


def test_asp_step_samples():
    def tr(status, quantiles=None):
        t = {'status': status}
        if quantiles is not None:
            t['step_quantiles_ms'] = quantiles
        return t
    rows = [{'arm': parse_arm('asp'), 'trials': [tr('ok', [10, 20]), tr('failed', [999]),
                                                 tr('ok'), tr('ok', [30])]},
            {'arm': parse_arm('bsp'), 'trials': [tr('ok', [5])]},
            {'arm': parse_arm('asp-lrtau'), 'trials': [tr('ok', [40])]}]
    assert V.asp_step_samples(rows) == pytest.approx([0.01, 0.02, 0.03])
    assert V.asp_step_samples(rows, 'asp-lrtau') == pytest.approx([0.04])
    assert V.asp_step_samples(rows, 'ssp3') == []


def _lab_trial(seed, it_per_s, idle_share, steps_ms=None, status='ok'):
    t = {'status': status, 'seed': seed, 'it_per_s': it_per_s, 'idle_share': idle_share}
    if steps_ms is not None:
        t['step_quantiles_ms'] = steps_ms
    return t


def test_sim_vs_lab_on_plain_times():
    rows = [
        {'arm': parse_arm('asp'), 'trials': [
            _lab_trial(1, {0: 1.0, 1: 0.5}, {0: 0.1, 1: 0.0}, [500, 500]),
            _lab_trial(2, {0: 1.2, 1: 0.5}, {0: 0.3, 1: 0.0}, [500]),
            _lab_trial(3, {0: 9.0, 1: 9.0}, {0: 0.9, 1: 0.9}, [9000], status='failed')]},
        {'arm': parse_arm('asp-lrtau'), 'trials': [
            _lab_trial(1, {0: 0.8, 1: 0.4}, {0: 0.5}, [1000])]},
        {'arm': parse_arm('bsp-balance'), 'trials': [_lab_trial(1, {0: 1.0}, {0: 0.0})]},
        {'arm': parse_arm('ssp3'), 'trials': [_lab_trial(1, {0: 1.0}, {0: 0.0},
                                                         status='failed')]},
        {'arm': parse_arm('bsp'), 'trials': [          # BSP's own steps include waiting
            _lab_trial(1, {0: 0.5, 1: 0.5}, {0: None}, [3000]),
            _lab_trial(2, {0: 0.5, 1: 0.5}, {})]},
    ]
    got = V.sim_vs_lab(rows, FLAT, 10)
    # the balanced arm and the arm without a finished trial are left out, the rest kept
    assert [e['arm'].name for e in got] == ['asp', 'asp-lrtau', 'bsp']
    asp, lrtau, bsp = got
    # the ASP step samples of finished trials: 0.5 s each
    assert [e['step_mean'] for e in got] == [0.5, 0.5, 0.5]
    # measured: the medians (mean of the middle two for two trials) of 1.5, 1.7 it/s and of
    # the fast rank 0's shares 0.1, 0.3
    assert asp['measured'] == pytest.approx((1.6, 0.2))
    assert asp['model'] == pytest.approx((1.5, 0.0))
    assert asp['fixed'] == pytest.approx((10 / 15 + 10 / 25, 5 / 15))
    assert asp['model_diff'] == pytest.approx(1.5 / 1.6 - 1)
    assert asp['fixed_diff'] == pytest.approx((10 / 15 + 10 / 25) / 1.6 - 1)
    # ASP lr/tau: its own steps (1 s), not plain ASP's
    assert lrtau['measured'] == pytest.approx((1.2, 0.5))
    assert lrtau['fixed'] == pytest.approx((10 / 20 + 10 / 30, 10 / 20))
    assert lrtau['model_diff'] == pytest.approx(1.5 / 1.2 - 1)
    # BSP: plain ASP's steps; no measured share
    assert bsp['measured'][0] == 1.0 and bsp['measured'][1] is None
    assert bsp['model'] == pytest.approx((10 / 19 + 10 / 20, 9 / 19))
    assert bsp['fixed'] == pytest.approx((10 / 24 + 10 / 25, 1 - 10 / 24))
    assert bsp['fixed_diff'] == pytest.approx((10 / 24 + 10 / 25) / 1.0 - 1)


def test_sim_vs_lab_without_asp_step_times():
    rows = [{'arm': parse_arm('asp-lrtau'), 'trials': [_lab_trial(1, {0: 1.0, 1: 0.5},
                                                                  {0: 0.0})]},
            {'arm': parse_arm('asp'), 'trials': [_lab_trial(1, {0: 1.0, 1: 0.5}, {0: 0.0},
                                                            [250])]}]
    got = V.sim_vs_lab(rows, FLAT, 10)
    # ASP lr/tau has no step times of its own: plain ASP's 0.25 s
    assert got[0]['fixed'] == pytest.approx((10 / 12.5 + 10 / 22.5, 2.5 / 12.5))
    assert got[0]['step_mean'] == 0.25
    # no step times at all: step mean 0 and the fixed model is the model
    got = V.sim_vs_lab(rows[:1], FLAT, 10)
    assert got[0]['step_mean'] == 0.0
    assert got[0]['fixed'] == got[0]['model'] == pytest.approx((1.5, 0.0))
    assert got[0]['model_diff'] == pytest.approx(0.0) and got[0]['fixed_diff'] == \
        pytest.approx(0.0)
    assert V.sim_vs_lab([], FLAT, 10) == []


# ---------------------------------------------------------------------------
# the level asked, the budget, and the claim's own defaults
# ---------------------------------------------------------------------------
def _replay_at(a, b, seed, op, level):
    """The percentile interval of the replayed resamples at `level`: with 2000 values, the
    lower order statistic at floor(tail * 1999), the upper at ceil((1 - tail) * 1999)."""
    rng = np.random.default_rng(seed)
    x, y = _replay_medians(rng, a), _replay_medians(rng, b)
    values = sorted(op(p, q) for p, q in zip(x, y))
    tail = (1 - level) / 2
    return values[math.floor(tail * 1999)], values[math.ceil((1 - tail) * 1999)]


def test_the_unpaired_intervals_take_the_level_asked():
    # 97.5% (two comparisons): tail 0.0125, positions 24.99 -> 24 and 1974.01 -> 1975
    assert (math.floor(0.0125 * 1999), math.ceil(0.9875 * 1999)) == (24, 1975)
    for seed in (0, 1):
        wide = _replay_at(A9, B9, seed, operator.sub, 0.975)
        assert wide != _replay_pair(A9, B9, seed, operator.sub)
        assert V.difference_interval(A9, B9, seed=seed, level=0.975) == (58.0,) + wide
        assert V.ratio_interval(A9, B9, seed=seed, level=0.975) == (
            (112.0 / 54.0,) + _replay_at(A9, B9, seed, operator.truediv, 0.975))


def test_interval_allows_undefined_samples_up_to_exactly_1_minus_the_level():
    # 1 - 0.75 = 0.25 exactly: one nan in four is allowed; [1, 2, 3] at tails 0.125:
    # 0.25 -> 0 and 1.75 -> 2
    assert V._interval([NAN, 3.0, 1.0, 2.0], 0.75) == (1.0, 3.0)
    low, high = V._interval([NAN, NAN, 1.0, 2.0, 3.0, 4.0, 5.0], 0.75)      # 2/7 > 0.25
    assert math.isnan(low) and math.isnan(high)


def test_a_claim_of_two_comparisons_asks_each_unpaired_reading_at_97_5_percent():
    a = dict(enumerate(A9))
    b = dict(enumerate(B9))
    got = V._claim('A slower than B', [('first', a, b), ('second', a, b)],
                   lambda iv: V._greater(iv, 1.0))
    low, high = _replay_at(A9, B9, 0, operator.truediv, 0.975)
    one = '%.2f [%.2f, %.2f]' % (112.0 / 54.0, low, high)
    assert got.unpaired == 'first: %s; second: %s' % (one, one)
    low95, high95 = _replay_pair(A9, B9, 0, operator.truediv)
    assert '%.2f [%.2f, %.2f]' % (112.0 / 54.0, low95, high95) != one    # the level shows
    # the paired side: 9 seeds at 97.5% take [min, max] (99.6%): ratios 100/50 .. 124/58
    assert got.claim == 'A slower than B' and got.verdict == S
    assert got.evidence == 'first: 2.07 [2.00, 2.14] 99.6%; second: 2.07 [2.00, 2.14] 99.6%'


def test_a_claim_reads_the_unpaired_medians_unless_told_not_to():
    a, b = {k: 200.0 for k in range(6)}, {k: 100.0 for k in range(6)}
    got = V._claim('t', [('x', a, b)], lambda iv: V._greater(iv, 1.0))
    assert got == ('t', S, 'x: 2.00 [2.00, 2.00] 96.9%', 'x: 2.00 [2.00, 2.00]')
    assert V._claim('t', [('x', a, b)], lambda iv: V._greater(iv, 1.0), reading=False) == (
        't', S, 'x: 2.00 [2.00, 2.00] 96.9%', '')


def test_verdicts_censor_every_arm_at_the_budget():
    times = {'asp': [100] * 6, 'dssp': [100] * 5 + [105]}
    claim = 'DSSP as fast as ASP'

    def at(budget):
        return {v.claim.split(' (')[0]: (v.verdict, v.evidence)
                for v in V.verdicts(rows_for(times), TARGET, budget=budget)}[claim]
    assert at(None) == (S, 't_DSSP / t_ASP: 1.00 [1.00, 1.05] 96.9%')
    # reached exactly at the budget: counts
    assert at(105.0) == (S, 't_DSSP / t_ASP: 1.00 [1.00, 1.05] 96.9%')
    # reached after it: never, as far as the comparison knows
    assert at(104.9) == (I, 't_DSSP / t_ASP: 1.00 [1.00, never] 96.9%')


def test_seed_times_at_and_past_the_budget():
    trials = [trial(1, 60.0), trial(2, 60.5), trial(3, None)]
    assert V.seed_times(trials, TARGET, 60.0) == {1: 60.0, 2: INF, 3: INF}
    assert V.seed_times(trials, TARGET) == {1: 60.0, 2: 60.5, 3: INF}


def test_the_shortfall_metric_without_a_budget_is_refused_by_name():
    # the shortfall is an area over the common budget: without one there is nothing to measure
    # (stats.shortfall_seconds alone would answer None, read as "never reached")
    with pytest.raises(ValueError) as err:
        V.seed_times([trial(1, 60.0)], TARGET, metric='shortfall')
    assert str(err.value) == 'the shortfall metric needs the common budget'
    # no finished trial: nothing is measured, nothing refused
    assert V.seed_times([trial(1, 60.0, status='failed')], TARGET, metric='shortfall') == {}
    assert V.seed_times([trial(1, 60.0)], TARGET, 100.0, metric='shortfall')[1] >= 0


def test_balance_verdicts_censor_at_the_budget():
    rows = rows_for({'asp': [100] * 5 + [200], 'bsp-balance': [100] * 6})
    (_, verdict, vs_asp, _, _, _), = V.balance_verdicts(rows, TARGET)
    assert (verdict, vs_asp) == (S, (1.0, 0.5, 1.0, 31 / 32, 0.95))
    # at 150 s ASP's sixth trial never got there: a ratio of 0 on that seed
    (_, verdict, vs_asp, _, _, _), = V.balance_verdicts(rows, TARGET, budget=150.0)
    assert (verdict, vs_asp) == (S, (1.0, 0.0, 1.0, 31 / 32, 0.95))


def test_common_budget_reads_finished_trials_with_a_curve_only():
    rows = [{'arm': parse_arm('asp'), 'trials': [trial(1, 80.0), trial(2, 30.0, status='failed'),
                                                 dict(trial(3, 10.0), curve=[])]},
            {'arm': parse_arm('bsp'), 'trials': [trial(1, 70.0)]}]
    assert V.common_budget(rows) == 70.0
    rows[1]['trials'][0]['status'] = 'failed'
    assert V.common_budget(rows) == 80.0


def test_a_verdict_that_changes_with_the_metric_is_metric_dependent():
    from mxnet_ssp.lab.cluster_model.arms import parse_arm
    from mxnet_ssp.lab.reproduce.verdicts import METRIC_DEPENDENT, across_metrics

    def trial(seed, curve):
        return {'status': 'ok', 'trial': seed, 'seed': seed, 'curve': curve,
                'final_accuracy': 0.94}
    # BSP crosses once at 2 s by luck and for good at 20 s; DSSP for good at 10 s
    lucky = [(0.0, 0.5), (2.0, 0.93), (2.25, 0.8), (20.0, 0.94), (60.0, 0.94)]
    steady = [(0.0, 0.5), (10.0, 0.94), (60.0, 0.94)]
    rows = [{'arm': parse_arm('bsp'), 'trials': [trial(s, lucky) for s in range(8)]},
            {'arm': parse_arm('dssp'), 'trials': [trial(s, steady) for s in range(8)]},
            {'arm': parse_arm('asp'), 'trials': [trial(s, steady) for s in range(8)]}]
    out = across_metrics(rows, 0.92, budget=60.0, unpaired=False)
    speedup = [o for o in out if 'faster than BSP' in o[1]['sustained'].claim][0]
    assert speedup[1]['sustained'].verdict == 'supported'
    assert speedup[1]['first'].verdict == 'refuted'
    assert speedup[0] == METRIC_DEPENDENT
    same = [o for o in out if 'as fast as ASP' in o[1]['sustained'].claim][0]
    assert same[0] == 'supported'


def _metric_rows(dssp='dssp2-4'):
    from mxnet_ssp.lab.cluster_model.arms import parse_arm

    def trial(seed, curve):
        return {'status': 'ok', 'trial': seed, 'seed': seed, 'curve': curve,
                'final_accuracy': 0.94}
    lucky = [(0.0, 0.5), (2.0, 0.93), (2.25, 0.8), (20.0, 0.94), (60.0, 0.94)]
    steady = [(0.0, 0.5), (10.0, 0.94), (60.0, 0.94)]
    return [{'arm': parse_arm('bsp'), 'trials': [trial(s, lucky) for s in range(8)]},
            {'arm': parse_arm(dssp), 'trials': [trial(s, steady) for s in range(8)]},
            {'arm': parse_arm('asp'), 'trials': [trial(s, steady) for s in range(8)]}]


def test_across_metrics_is_each_metric_s_verdicts_with_its_arguments():
    from mxnet_ssp.lab.reproduce.stats import METRICS
    from mxnet_ssp.lab.reproduce.verdicts import METRIC_DEPENDENT, across_metrics
    rows = _metric_rows()
    out = across_metrics(rows, 0.92, 'dssp2-4', budget=60.0)
    for m in METRICS:                    # the unpaired reading is on by default
        assert [cells[m] for _, cells in out] == V.verdicts(rows, 0.92, 'dssp2-4', budget=60.0,
                                                            metric=m)
    assert all(set(cells) == set(METRICS) for _, cells in out)
    assert sum(bool(cells['first'].unpaired) for _, cells in out) == 6
    assert out[5][1]['first'].unpaired == 't_BSP / t_DSSP: 0.20 [0.20, 0.20]'
    assert [v for v, _ in out] == ['inconclusive', 'inconclusive', 'supported', 'supported',
                                   'inconclusive', METRIC_DEPENDENT]
    off = across_metrics(rows, 0.92, 'dssp2-4', budget=60.0, unpaired=False)
    for m in METRICS:
        assert [cells[m] for _, cells in off] == V.verdicts(rows, 0.92, 'dssp2-4', unpaired=False,
                                                            budget=60.0, metric=m)
    assert not any(cells[m].unpaired for _, cells in off for m in METRICS)


def test_across_metrics_reads_the_dssp_arm_called_dssp_by_default():
    from mxnet_ssp.lab.reproduce.verdicts import across_metrics
    named = across_metrics(_metric_rows('dssp'), 0.92, budget=60.0, unpaired=False)
    assert [v for v, _ in named][2:] == ['supported', 'supported', 'inconclusive',
                                         'metric-dependent']
    other = across_metrics(_metric_rows(), 0.92, budget=60.0, unpaired=False)
    assert [v for v, _ in other] == ['inconclusive'] * 6        # no arm called 'dssp'


def test_across_metrics_of_one_metric_or_another_primary():
    from mxnet_ssp.lab.reproduce.verdicts import across_metrics
    rows = _metric_rows()
    one = across_metrics(rows, 0.92, 'dssp2-4', budget=60.0, metrics=('first',), unpaired=False)
    assert all(set(cells) == {'first'} for _, cells in one)
    assert [v for v, _ in one] == [cells['first'].verdict for _, cells in one]
    assert one[5][0] == 'refuted'
    two = across_metrics(rows, 0.92, 'dssp2-4', budget=60.0, metrics=('shortfall', 'first'),
                         unpaired=False)
    assert two[5][0] == 'refuted' and list(two[5][1]) == ['shortfall', 'first']
    assert across_metrics(rows, 0.92, 'dssp2-4', budget=60.0, metrics=('sustained',),
                          unpaired=False)[5][0] == 'supported'


def test_a_diverged_trial_never_reaches_a_target_and_counts_as_zero_accuracy():
    # a diverged trial has no curve (its metrics were never collected): a result all the same
    diverged = {'status': 'diverged', 'trial': 2, 'seed': 2, 'final_accuracy': None}
    trials = [trial(1, 40.0, 0.95), diverged, trial(3, 10.0, 0.97, status='failed')]
    for metric in ('first', 'sustained'):
        assert V.seed_times(trials, TARGET, metric=metric)[2] == INF
        assert V.seed_times(trials, TARGET, 100.0, metric=metric)[2] == INF
    # the shortfall: the whole budget, the largest any run can have (0 accuracy throughout)
    shortfall = V.seed_times(trials, TARGET, 100.0, metric='shortfall')
    assert shortfall[2] == 100.0 and set(shortfall) == {1, 2}
    assert shortfall[1] == pytest.approx(0.5 + 39.5 * (TARGET - 0.1) / TARGET, rel=1e-9)
    with pytest.raises(ValueError, match='needs the common budget'):
        V.seed_times([diverged], TARGET, metric='shortfall')
    assert V.seed_accuracies(trials) == {1: 0.95, 2: V.DIVERGED_ACCURACY}
    assert V.DIVERGED_ACCURACY == 0.0


def test_a_dssp_that_diverged_on_every_seed_loses_every_claim_it_makes():
    rows = rows_for({'asp': [10.0] * 8, 'ssp3': [20.0] * 8, 'dssp': [10.0] * 8})
    for t in rows[2]['trials']:
        t.update(status='diverged', final_accuracy=None)
        del t['curve']
    by_claim = {v.claim.split(' (')[0]: v for v in V.verdicts(rows, TARGET, unpaired=False)}
    assert by_claim['every SSP slower than DSSP'].verdict == V.REFUTED
    assert by_claim["DSSP's final accuracy >= ASP's"].verdict == V.REFUTED
    assert 'never' in by_claim['DSSP as fast as ASP'].evidence
