"""mxnet_ssp.experiments.reproduce.verdicts at its boundaries: the bootstrap's order statistics,
the minimum number of trials, every claim's margin (just below, at and just above), the
formatting of intervals, and the simulator-vs-lab arithmetic.

Expected values are worked out by hand (in the comments) or by a brute force written here,
never by the module's own helpers.  Synthetic trials with equal times make an interval a
point (every resampled median is that time); three distinct values ``lo < mid < hi`` against
a constant give the interval ``[lo, hi] / constant``: each extreme is the median of a resample
of three with probability 7/27 (two or three of the three draws), far above the 2.5% tails.
"""
import itertools
import math
import operator
import random
import types
import warnings
from math import comb

import numpy as np
import pytest

from mxnet_ssp.experiments.reproduce import verdicts as V
from mxnet_ssp.experiments.reproduce.presets import parse_arm
from mxnet_ssp.lab.profiles import Scenario

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
    """{claim without its parenthesis: (verdict, evidence)}"""
    return {c.split(' (')[0]: (v, e)
            for c, v, e in V.verdicts(rows_for(times, accuracies), TARGET, dssp_name)}


def same(interval, expected):
    """Tuples equal, nan equal to nan."""
    assert interval is not None and len(interval) == len(expected)
    for got, want in zip(interval, expected):
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got), (interval, expected)
        else:
            assert got == pytest.approx(want), (interval, expected)


# ---------------------------------------------------------------------------
# the documented constants
# ---------------------------------------------------------------------------
def test_the_margins_fixed_before_the_lab_ran():
    # docs/lab.md: 95% intervals, 2,000 resamples, [0.9, 1.1], -0.005, <= 1.1, >= 1.3, 15%,
    # fewer than 3 trials give no interval
    assert (V.LEVEL, V.RESAMPLES, V.MIN_TRIALS) == (0.95, 2000, 3)
    assert (V.SAME_TIME, V.ACCURACY_MARGIN, V.TUNED_MARGIN, V.SPEEDUP, V.SIM_TOLERANCE) == (
        0.10, 0.005, 0.10, 1.3, 0.15)
    assert (V.SUPPORTED, V.REFUTED, V.INCONCLUSIVE) == (S, R, I)


# ---------------------------------------------------------------------------
# order statistics of the bootstrap
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


def _replay(values, seed):
    medians = sorted(_replay_medians(np.random.default_rng(seed), values))
    return medians[49], medians[1950]


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


def test_median_interval_of_1_to_7_is_2_to_6_by_the_exact_distribution():
    # the lower median of 7 draws from 1..7 is the 4th smallest: P(median <= k) is the chance
    # that at least 4 of the 7 draws are <= k
    def cdf(k):
        p = k / 7
        return sum(comb(7, j) * p ** j * (1 - p) ** (7 - j) for j in range(4, 8))
    assert cdf(1) < 0.015 and cdf(2) > 0.1          # 2.5% lies well inside median = 2
    assert cdf(5) < 0.9 and cdf(6) > 0.985          # 97.5% lies well inside median = 6
    assert V.median_interval([7.0, 3.0, 1.0, 5.0, 2.0, 6.0, 4.0]) == (4.0, 2.0, 6.0)


@pytest.mark.parametrize('n', [8, 15])
@pytest.mark.parametrize('seed', [0, 1, 5])
def test_median_interval_is_a_seeded_replay(n, seed):
    values = [float(x) for x in range(1, n + 1)]
    low, high = _replay(values, seed)
    assert V.median_interval(values, seed=seed) == (float((n + 1) // 2), low, high)


def test_median_interval_uses_seed_0_by_default():
    values = [float(x) for x in range(1, 16)]
    assert _replay(values, 0) != _replay(values, 1)     # the seed shows here
    assert V.median_interval(values) == (8.0,) + _replay(values, 0)
    # 1..8 with seed 0: the 1950th of the sorted medians is 7, the one before it 6 -- the
    # upper bound sits on the boundary between the two
    medians = sorted(_replay_medians(np.random.default_rng(0), list(range(1, 9))))
    assert (medians[1949], medians[1950]) == (6, 7)
    assert V.median_interval([float(x) for x in range(1, 9)])[2] == 7.0


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
    assert V.median_interval([2.5] * 3) == (2.5, 2.5, 2.5)
    assert V.ratio_interval([3.0] * 3, [2.0] * 4) == (1.5, 1.5, 1.5)
    assert V.difference_interval([3.0] * 4, [2.0] * 3) == (1.0, 1.0, 1.0)
    # three distinct values: the extremes (see the module docstring above)
    assert V.median_interval([30.0, 10.0, 20.0]) == (20.0, 10.0, 30.0)
    assert V.ratio_interval([90.0, 110.0, 100.0], [100.0] * 3) == (1.0, 0.9, 1.1)
    assert V.difference_interval([0.0, 0.01, 0.02], [0.005] * 3) == pytest.approx(
        (0.005, -0.005, 0.015))


def test_infinite_times():
    # never reached everywhere: inf / inf is undefined, the interval too
    same(V.ratio_interval([INF] * 3, [INF] * 3), (NAN, NAN, NAN))
    # never reached on one side only: infinite or zero ratios, not undefined
    assert V.ratio_interval([INF] * 3, [1.0] * 3) == (INF, INF, INF)
    assert V.ratio_interval([1.0] * 3, [INF] * 3) == (0.0, 0.0, 0.0)
    same(V.ratio_interval([INF] * 2, [INF] * 3), (NAN, NAN, NAN))
    # a median of inf with an infinite upper bound (sorted 1, 2, inf, inf, inf); the lower
    # bound is 1: a resample of 5 has the median 1 when at least 3 draws are 1, with
    # probability (10 * 16 + 5 * 4 + 1) / 5^5 = 5.8%, above the 2.5% tail
    assert V.median_interval([1.0, INF, INF, INF, 2.0]) == (INF, 1.0, INF)


def test_undefined_and_infinite_ratios_are_computed_quietly():
    # inf / inf (invalid) and x / 0 (divide) give nan and inf without a RuntimeWarning
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        same(V.ratio_interval([INF] * 3, [INF] * 3), (NAN, NAN, NAN))
        assert V.ratio_interval([1.0] * 3, [0.0] * 3) == (INF, INF, INF)
        same(V.ratio_interval([0.0] * 3, [0.0] * 3), (NAN, NAN, NAN))


# ---------------------------------------------------------------------------
# fewer than MIN_TRIALS values: no interval
# ---------------------------------------------------------------------------
def test_no_values_no_interval():
    assert V.median_interval([]) is None
    assert V.ratio_interval([], [1.0] * 3) is None
    assert V.ratio_interval([1.0] * 3, []) is None
    assert V.difference_interval([], [1.0] * 3) is None
    assert V.difference_interval([1.0] * 3, []) is None


@pytest.mark.parametrize('n,m,defined', [(2, 3, False), (3, 2, False), (2, 2, False),
                                         (3, 3, True), (1, 5, False), (5, 1, False)])
def test_minimum_number_of_trials_at_its_edge(n, m, defined):
    a, b = [6.0] * n, [3.0] * m
    for got, point in ((V.ratio_interval(a, b), 2.0), (V.difference_interval(a, b), 3.0)):
        same(got, (point, point, point) if defined else (point, NAN, NAN))
    same(V.median_interval(a), (6.0, 6.0, 6.0) if n >= 3 else (6.0, NAN, NAN))
    same(V.median_interval(b), (3.0, 3.0, 3.0) if m >= 3 else (3.0, NAN, NAN))


def test_two_values_give_the_lower_median_and_no_interval():
    same(V.median_interval([3.0, 1.0]), (1.0, NAN, NAN))
    same(V.ratio_interval([4.0, 2.0], [1.0, 1.0, 1.0]), (2.0, NAN, NAN))
    same(V.difference_interval([1.0, 1.0, 1.0], [4.0, 2.0]), (-1.0, NAN, NAN))


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


# ---------------------------------------------------------------------------
# the decision rules
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('interval,verdict', [
    (None, I),
    ((1.5, NAN, NAN), I),
    ((1.5, NAN, 0.5), I),           # an undefined bound decides nothing, either one
    ((1.5, 2.0, NAN), I),
    ((NAN, 1.5, 2.0), S),           # only the bounds count, not the point
    ((1.5, 1.01, 2.0), S),          # just above the bound
    ((1.5, 1.0, 2.0), I),           # at it: not above
    ((0.5, 0.0, 1.0), I),           # high at it: not below
    ((0.5, 0.0, 0.99), R),          # just below
    ((1.0, 0.5, 1.5), I),           # straddles
])
def test_greater(interval, verdict):
    assert V._greater(interval, 1.0) == verdict


@pytest.mark.parametrize('interval,verdict', [
    (None, I),
    ((0.5, NAN, 0.5), I),
    ((0.5, 0.5, NAN), I),
    ((NAN, 0.5, 0.9), S),
    ((0.5, 0.5, 1.0), S),           # at the bound: supported (at most)
    ((0.5, 0.5, 1.01), I),          # just above it, low below: straddles
    ((1.5, 1.0, 2.0), I),           # low at the bound: not above it
    ((1.5, 1.01, 2.0), R),          # just above
])
def test_at_most(interval, verdict):
    assert V._at_most(interval, 1.0) == verdict


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
def test_fmt_interval(interval, fmt, text):
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
          'untuned DSSP within 10% of the best hand-tuned SSP (t_DSSP / t_best SSP <= 1.1)',
          'DSSP at least 1.3x faster than BSP (t_BSP / t_DSSP >= 1.3)']


def test_claims_in_table_order_with_their_evidence():
    # equal times within each paradigm: every interval is a point; ssp6 given first
    times = {'ssp6': [120] * 3, 'bsp': [200] * 3, 'asp': [100] * 3, 'ssp3': [150] * 3,
             'dssp': [100] * 3}
    got = V.verdicts(rows_for(times), TARGET)
    assert [c for c, _, _ in got] == CLAIMS
    assert [v for _, v, _ in got] == [S] * 6
    assert [e for _, _, e in got] == [
        'ssp3: 1.33 [1.33, 1.33]; ssp6: 1.67 [1.67, 1.67]',          # 200/150, 200/120
        'ssp3: 1.50 [1.50, 1.50]; ssp6: 1.20 [1.20, 1.20]',          # 150/100, 120/100
        't_DSSP / t_ASP: 1.00 [1.00, 1.00]',
        'acc_DSSP - acc_ASP: +0.0000 [+0.0000, +0.0000]',
        'best SSP: ssp6; t_DSSP / t_ssp6: 0.83 [0.83, 0.83]',        # 100/120
        't_BSP / t_DSSP: 2.00 [2.00, 2.00]']


def test_claims_without_trials():
    got = V.verdicts([], TARGET)
    assert [v for _, v, _ in got] == [I] * 6
    assert [e for _, _, e in got] == [
        'no trials', 'no trials', 't_DSSP / t_ASP: no trials',
        'acc_DSSP - acc_ASP: no trials', 'no trials', 't_BSP / t_DSSP: no trials']
    assert got[4][0] == 'untuned DSSP within 10% of the best hand-tuned SSP'


def test_the_dssp_arm_is_chosen_by_name():
    # dssp (bounded) as slow as BSP, dssp-paper as fast as ASP
    times = {'bsp': [200] * 3, 'asp': [100] * 3, 'ssp3': [150] * 3, 'dssp': [200] * 3,
             'dssp-paper': [100] * 3}
    bounded = claims(times)
    paper = claims(times, dssp_name='dssp-paper')
    assert bounded['DSSP as fast as ASP'] == (R, 't_DSSP / t_ASP: 2.00 [2.00, 2.00]')
    assert paper['DSSP as fast as ASP'] == (S, 't_DSSP / t_ASP: 1.00 [1.00, 1.00]')
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
    times = {'bsp': [200] * 3, 'ssp3': [150] * 3, 'ssp9': [10] * 3, 'ssp4-balance': [300] * 3,
             'asp': [100] * 3, 'dssp': [100] * 3}
    rows = rows_for(times)
    for t in rows[2]['trials']:               # ssp9 never finished a trial
        t['status'] = 'failed'
    got = {c.split(' (')[0]: (v, e) for c, v, e in V.verdicts(rows, TARGET)}
    assert got['BSP slower than every SSP'] == (S, 'ssp3: 1.33 [1.33, 1.33]')
    assert got['every SSP slower than DSSP'] == (S, 'ssp3: 1.50 [1.50, 1.50]')
    assert got['untuned DSSP within 10% of the best hand-tuned SSP'][1].startswith(
        'best SSP: ssp3; ')


def test_the_best_ssp_has_the_smallest_median_time():
    # ssp3 has the fastest single trial (90) but the slowest median (300); ssp15 never gets
    # there (inf); ssp6's median 100 is the smallest
    times = {'ssp3': [90, 300, 300], 'ssp6': [100, 100, 100], 'ssp15': [None] * 3,
             'dssp': [110] * 3}
    verdict, evidence = claims(times)['untuned DSSP within 10% of the best hand-tuned SSP']
    assert (verdict, evidence) == (S, 'best SSP: ssp6; t_DSSP / t_ssp6: 1.10 [1.10, 1.10]')
    # two SSP thresholds with the same median: the smaller threshold
    times = {'ssp6': [100] * 3, 'ssp3': [100] * 3, 'dssp': [100] * 3}
    assert claims(times)['untuned DSSP within 10% of the best hand-tuned SSP'][1].startswith(
        'best SSP: ssp3; ')


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
    times = {'bsp': bsp, 'ssp3': ssp3, 'ssp6': ssp6}
    assert claims(times)['BSP slower than every SSP'][0] == verdict


def test_bsp_slower_than_every_ssp_needs_bsp_and_an_ssp():
    assert claims({'ssp3': [100] * 3})['BSP slower than every SSP'] == (
        I, 'ssp3: no trials')
    assert claims({'bsp': [200] * 3})['BSP slower than every SSP'] == (I, 'no trials')


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
])
def test_every_ssp_slower_than_dssp(ssp3, dssp, verdict):
    assert claims({'ssp3': ssp3, 'dssp': dssp})['every SSP slower than DSSP'][0] == verdict


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
    got = claims({'asp': [100] * 3, 'dssp': dssp})['DSSP as fast as ASP']
    assert got == (verdict, 't_DSSP / t_ASP: ' + evidence)


def test_dssp_as_fast_as_asp_needs_three_trials_of_each():
    assert claims({'asp': [100] * 2, 'dssp': [100] * 3})['DSSP as fast as ASP'] == (
        I, 't_DSSP / t_ASP: 1.00 [-, -]')
    assert claims({'asp': [100] * 3, 'dssp': [100] * 2})['DSSP as fast as ASP'][0] == I
    assert claims({'asp': [100] * 3, 'dssp': [100] * 3})['DSSP as fast as ASP'][0] == S
    # both never: undefined
    assert claims({'asp': [None] * 3, 'dssp': [None] * 3})['DSSP as fast as ASP'] == (
        I, 't_DSSP / t_ASP: - [-, -]')


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
    times = {'asp': [100] * 3, 'dssp': [100] * 3}
    got = claims(times, {'asp': asp, 'dssp': dssp})["DSSP's final accuracy >= ASP's"]
    assert got[0] == verdict and got[1].startswith('acc_DSSP - acc_ASP: ')


def test_dssp_accuracy_evidence_and_trials():
    times = {'asp': [100] * 3, 'dssp': [100] * 3}
    got = claims(times, {'asp': [0.9] * 3, 'dssp': [0.91, 0.92, 0.93]})
    assert got["DSSP's final accuracy >= ASP's"] == (
        S, 'acc_DSSP - acc_ASP: +0.0200 [+0.0100, +0.0300]')
    # two DSSP trials: no interval, inconclusive although far above
    got = claims({'asp': [100] * 3, 'dssp': [100] * 2},
                 {'asp': [0.6] * 3, 'dssp': [0.9] * 2})
    assert got["DSSP's final accuracy >= ASP's"] == (I, 'acc_DSSP - acc_ASP: +0.3000 [-, -]')
    # failed trials do not count: two of three DSSP trials failed
    rows = rows_for({'asp': [100] * 3, 'dssp': [100] * 3},
                    {'asp': [0.6] * 3, 'dssp': [0.9] * 3})
    rows[1]['trials'][0]['status'] = 'failed'
    got = {c.split(' (')[0]: v for c, v, _ in V.verdicts(rows, TARGET)}
    assert got["DSSP's final accuracy >= ASP's"] == I
    # an accuracy counts even when the target was never reached
    got = claims({'asp': [None] * 3, 'dssp': [None] * 3},
                 {'asp': [0.6] * 3, 'dssp': [0.9] * 3})
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
    got = claims({'ssp3': [100] * 3, 'dssp': dssp})[
        'untuned DSSP within 10% of the best hand-tuned SSP']
    assert got == (verdict, 'best SSP: ssp3; t_DSSP / t_ssp3: ' + evidence)


def test_untuned_dssp_needs_an_ssp_and_a_dssp_arm():
    claim = 'untuned DSSP within 10% of the best hand-tuned SSP'
    assert claims({'dssp': [100] * 3})[claim] == (I, 'no trials')
    assert claims({'ssp3': [100] * 3})[claim] == (I, 'no trials')
    # a DSSP arm whose trials all failed has no times
    rows = rows_for({'ssp3': [100] * 3, 'dssp': [100] * 3})
    for t in rows[1]['trials']:
        t['status'] = 'failed'
    got = {c.split(' (')[0]: (v, e) for c, v, e in V.verdicts(rows, TARGET)}
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
    got = claims({'bsp': bsp, 'dssp': [100] * 3})['DSSP at least 1.3x faster than BSP']
    assert got == (verdict, 't_BSP / t_DSSP: ' + evidence)


# ---------------------------------------------------------------------------
# batch balancing
# ---------------------------------------------------------------------------
def test_balance_verdicts_at_the_bound():
    times = {'asp': [100] * 3, 'bsp': [200] * 3, 'ssp3': [150] * 3,
             'bsp-balance': [100] * 3,                    # exactly ASP's: no later, supported
             'ssp3-balance': [100.1] * 3,                 # 1.001: refuted
             'dssp-balance': [90, 100, 110],              # [0.9, 1.1]: straddles
             'dssp-paper-balance': [100, 110, 120]}       # [1.0, 1.2]: low at 1, inconclusive
    got = V.balance_verdicts(rows_for(times), TARGET)
    assert [(a.name, v, base) for a, v, _, base, _ in got] == [
        ('bsp-balance', S, 'bsp'), ('ssp3-balance', R, 'ssp3'), ('dssp-balance', I, 'dssp'),
        ('dssp-paper-balance', I, 'dssp-paper')]
    by_name = {a.name: (vs_asp, vs_base) for a, _, vs_asp, _, vs_base in got}
    assert by_name['bsp-balance'] == ((1.0, 1.0, 1.0), (0.5, 0.5, 0.5))
    assert by_name['ssp3-balance'][0] == pytest.approx((1.001, 1.001, 1.001))
    assert by_name['ssp3-balance'][1] == pytest.approx((100.1 / 150,) * 3)
    assert by_name['dssp-balance'][0] == (1.0, 0.9, 1.1)
    assert by_name['dssp-balance'][1] is None          # plain dssp did not run
    assert by_name['dssp-paper-balance'][0] == (1.1, 1.0, 1.2)


def test_balance_verdicts_skip_plain_and_unfinished_arms():
    rows = rows_for({'bsp-balance': [50] * 3, 'ssp3-balance': [50] * 3, 'bsp': [100] * 3})
    for t in rows[1]['trials']:
        t['status'] = 'failed'
    got = V.balance_verdicts(rows, TARGET)
    assert len(got) == 1
    arm, verdict, vs_asp, base, vs_base = got[0]
    # no ASP arm: nothing to compare with
    assert (arm.name, verdict, vs_asp, base, vs_base) == ('bsp-balance', I, None, 'bsp',
                                                          (0.5, 0.5, 0.5))
    # two ASP trials: no interval
    rows = rows_for({'asp': [100] * 2, 'bsp-balance': [50] * 3})
    (_, verdict, vs_asp, _, _), = V.balance_verdicts(rows, TARGET)
    assert verdict == I
    same(vs_asp, (0.5, NAN, NAN))
    assert V.balance_verdicts([], TARGET) == []


# ---------------------------------------------------------------------------
# the simulator next to the lab
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('arm,policy', [
    ('bsp', 'ssp:0'), ('bsp-balance', 'ssp:0'), ('asp', 'asp'), ('asp-lrtau', 'asp'),
    ('ssp3', 'ssp:3'), ('ssp15', 'ssp:15'), ('dssp', 'dssp:3:15:bounded'),
    ('dssp2-10-paper', 'dssp:2:10:paper'), ('dssp4-9-threshold', 'dssp:4:9:threshold'),
])
def test_sim_policy(arm, policy):
    assert V.sim_policy(parse_arm(arm)) == policy


def _scenario(*times):
    return types.SimpleNamespace(times=lambda: list(times))


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
