"""mxnet_ssp.lab.reproduce.paired: the exact coverage of order-statistic intervals,
the rank they take at a level, the Bonferroni level of a family, pairs by seed, pairs where
neither arm reached the target, and the text of an interval.

Coverages are worked out by hand from the binomial distribution (in the comments) or by
enumerating every sign pattern, never by the module's own helpers."""
import itertools
import math
import warnings

import pytest

from conftest import same_interval

from mxnet_ssp.lab.reproduce import paired as P

INF, NAN = math.inf, math.nan


same = same_interval           # (tests/conftest.py)


@pytest.mark.parametrize('n,j,cov', [
    (3, 1, 6 / 8),          # [min, max] of 3 misses when all three fall on one side: 2/8
    (5, 1, 30 / 32),
    (6, 1, 62 / 64),
    (8, 1, 254 / 256),
    (8, 2, 1 - 2 * 9 / 256),            # misses with 0 or 1 of 8 below the median, either side
    (10, 2, 1 - 2 * 11 / 1024),
    (10, 3, 1 - 2 * 56 / 1024),
    (2, 1, 0.5),
    (1, 1, 0.0), (5, 3, 0.0), (6, 0, 0.0), (6, 4, 0.0),     # not an interval
])
def test_coverage_is_the_binomial_probability(n, j, cov):
    assert P.coverage(n, j) == pytest.approx(cov)


@pytest.mark.parametrize('n', [3, 6, 7])
def test_coverage_by_enumerating_which_values_fall_below_the_median(n):
    # each of n values is below the median or above with probability 1/2, independently;
    # [x_(j), x_(n+1-j)] misses it when fewer than j are below or fewer than j are above
    for j in range(1, n // 2 + 1):
        hits = sum(1 for signs in itertools.product((0, 1), repeat=n)
                   if j <= sum(signs) <= n - j)
        assert P.coverage(n, j) == pytest.approx(hits / 2 ** n)


@pytest.mark.parametrize('n,level,j', [
    (3, 0.95, 0), (5, 0.95, 0), (6, 0.95, 1), (8, 0.95, 1), (9, 0.95, 2), (10, 0.95, 2),
    (20, 0.95, 6), (6, 0.975, 0), (8, 0.975, 1), (8, 1 - 0.05 / 3, 1), (10, 1 - 0.05 / 3, 1),
    (12, 1 - 0.05 / 3, 2), (3, 0.75, 1), (0, 0.95, 0),
])
def test_rank_is_the_narrowest_interval_at_the_level(n, level, j):
    assert P.rank(n, level) == j


def test_six_is_the_fewest_values_for_95_percent():
    assert P.MIN_TRIALS == 6 == min(n for n in range(1, 20) if P.rank(n, P.LEVEL) > 0)
    assert P.LEVEL == 0.95


@pytest.mark.parametrize('m,level', [(1, 0.95), (2, 0.975), (3, 1 - 0.05 / 3), (0, 0.95)])
def test_family_level_is_bonferroni(m, level):
    assert P.family_level(m) == pytest.approx(level)


def test_median_interval():
    assert P.median_interval([]) is None
    # 6 values: [min, max] at 31/32; the point is the middle two's mean
    assert P.median_interval([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (3.5, 1.0, 6.0, 31 / 32, 0.95)
    # 10 values: the 2nd smallest and 2nd largest
    assert P.median_interval(list(range(10, 0, -1))) == (5.5, 2.0, 9.0, 1 - 22 / 1024, 0.95)
    # infinite values stay infinite; a median of inf
    got = P.median_interval([1.0, INF, INF, 2.0, INF, 3.0])
    assert got == (INF, 1.0, INF, 31 / 32, 0.95) and got.decisive
    # too few: [min, max] at its own coverage, not decisive
    got = P.median_interval([2.0, 1.0, 3.0])
    assert got == (2.0, 1.0, 3.0, 0.75, 0.95) and not got.decisive
    assert P.median_interval([4.0]) == (4.0, 4.0, 4.0, 0.0, 0.95)
    # another level
    assert P.median_interval(list(range(10)), level=0.99) == (4.5, 0.0, 9.0, 1 - 2 / 1024,
                                                              0.99)


def test_an_interval_is_decisive_only_at_its_level_with_both_ends():
    assert P.Interval(1.0, 0.5, 2.0, 0.96875, 0.95).decisive
    assert not P.Interval(1.0, 0.5, 2.0, 0.96875, 0.975).decisive
    assert not P.Interval(1.0, NAN, 2.0, 0.99, 0.95).decisive
    assert not P.Interval(1.0, 0.5, NAN, 0.99, 0.95).decisive
    assert P.Interval(NAN, 0.0, INF, 0.99, 0.95).decisive       # decides, if nothing
    iv = P.Interval(1.0, 0.5, 2.0, 0.96875, 0.95)
    assert (iv[0], iv[1], iv[2]) == (iv.point, iv.low, iv.high) == (1.0, 0.5, 2.0)


def test_pairs_are_the_common_seeds():
    a = {3: 30.0, 1: 10.0, 2: 20.0, 7: 1.0}
    b = {2: 10.0, 1: 10.0, 3: 10.0, 9: 1.0}
    assert P.common_seeds(a, b) == [1, 2, 3]
    assert P.seed_ratios(a, b) == ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert P.paired_ratio(a, {}) is None and P.paired_ratio({}, {}) is None
    assert P.paired_difference({}, b) is None


def test_seed_ratios_where_a_trial_never_got_there():
    a = {1: INF, 2: 10.0, 3: INF, 4: 5.0}
    b = {1: 10.0, 2: INF, 3: INF, 4: 5.0}
    # A never: inf; B never: 0; neither: anything from 0 to inf
    assert P.seed_ratios(a, b) == ([INF, 0.0, 0.0, 1.0], [INF, 0.0, INF, 1.0])


def test_paired_ratio():
    a = {k: 10.0 * k for k in range(1, 7)}
    b = {k: 5.0 * k for k in range(1, 7)}
    assert P.paired_ratio(a, b) == (2.0, 2.0, 2.0, 31 / 32, 0.95)
    # the point of an even count is the geometric mean of the middle two ratios
    a = {1: 1.0, 2: 2.0, 3: 4.0, 4: 8.0, 5: 16.0, 6: 32.0}
    b = dict.fromkeys(a, 1.0)
    same(P.paired_ratio(a, b), (math.sqrt(4.0 * 8.0), 1.0, 32.0, 31 / 32, 0.95))
    # at 97.5% six pairs fall short: [min, max], not decisive
    got = P.paired_ratio(a, b, level=0.975)
    assert (got.low, got.high, got.asked, got.decisive) == (1.0, 32.0, 0.975, False)


def test_pairs_of_unknown_order_widen_the_interval_and_hide_the_point():
    times = {k: 100.0 for k in range(10)}
    both_never = dict(times)
    both_never[9] = INF
    # one of ten: the 2nd order statistics leave it out
    assert P.paired_ratio(both_never, both_never) == (1.0, 1.0, 1.0, 1 - 22 / 1024, 0.95)
    # two of ten: the 2nd smallest is 0, the 2nd largest inf
    both_never[8] = INF
    assert P.paired_ratio(both_never, both_never) == (1.0, 0.0, INF, 1 - 22 / 1024, 0.95)
    # half of six: the middle two are 1 and 0 one way, 1 and inf the other: no point
    a = {1: 5.0, 2: 5.0, 3: 5.0, 4: INF, 5: INF, 6: INF}
    with warnings.catch_warnings():
        warnings.simplefilter('error')              # 0 * inf computed quietly
        same(P.paired_ratio(a, a), (NAN, 0.0, INF, 31 / 32, 0.95))


def test_paired_difference():
    a = {k: 0.90 + 0.01 * k for k in range(6)}
    b = dict.fromkeys(range(6), 0.90)
    # differences 0, 0.01, ..., 0.05: [min, max], the middle two's mean
    same(P.paired_difference(a, b), (0.025, 0.0, 0.05, 31 / 32, 0.95))


@pytest.mark.parametrize('interval,fmt,text', [
    (None, '%.2f', 'no trials'),
    (P.Interval(1.0, 0.5, 2.0, 31 / 32, 0.95), '%.2f', '1.00 [0.50, 2.00] 96.9%'),
    (P.Interval(1.0, 0.5, 2.0, 0.75, 0.95), '%.2f', '1.00 [0.50, 2.00] 75% < 95%'),
    (P.Interval(1.0, 0.5, 2.0, 31 / 32, 1 - 0.05 / 3), '%.1f',
     '1.0 [0.5, 2.0] 96.9% < 98.3%'),
    (P.Interval(INF, 2.0, INF, 15 / 16, 0.95), '%.2f', 'never [2.00, never] 93.8% < 95%'),
    (P.Interval(NAN, 0.0, INF, 254 / 256, 0.975), '%.2f', '- [0.00, never] 99.2%'),
    (P.Interval(0.02, 0.01, 0.03, 1 - 22 / 1024, 0.95), '%+.4f',
     '+0.0200 [+0.0100, +0.0300] 97.9%'),
    (P.Interval(1.0, 1.0, 1.0, 1.0, 0.95), '%.2f', '1.00 [1.00, 1.00] 100%'),
])
def test_fmt_interval(interval, fmt, text):
    assert P.fmt_interval(interval, fmt) == text


def test_an_undefined_ratio_is_a_pair_of_unknown_order_and_quiet():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert P.seed_ratios({1: 0.0, 2: 3.0}, {1: 0.0, 2: 0.0}) == ([0.0, INF], [INF, INF])


@pytest.mark.parametrize('n,level,j', [
    # coverage(2, 1) = 1/2 exactly; coverage(10, 4) = 1 - 2 * 176 / 1024 = 0.656,
    # coverage(10, 5) = 1 - 2 * 386 / 1024 = 0.246: j can exceed n / 3 at a low level;
    # coverage(7, 3) = 1 - 2 * 29 / 128 = 0.547
    (2, 0.5, 1), (10, 0.5, 4), (10, 0.6, 4), (7, 0.5, 3), (7, 0.55, 2),
])
def test_rank_at_low_levels(n, level, j):
    assert P.rank(n, level) == j


def test_a_median_between_zero_and_never_is_undefined_and_quiet():
    # three pairs where only B never got there (ratio 0), three where only A never did (inf):
    # the middle two are 0 and inf, their geometric mean undefined
    a = {1: 5.0, 2: 5.0, 3: 5.0, 4: INF, 5: INF, 6: INF}
    b = {1: INF, 2: INF, 3: INF, 4: 5.0, 5: 5.0, 6: 5.0}
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        same(P.paired_ratio(a, b), (NAN, 0.0, INF, 31 / 32, 0.95))
        # -inf and inf: the midpoint of the middle two is undefined
        same(P.median_interval([-INF, INF, -INF, INF, -INF, INF]),
             (NAN, -INF, INF, 31 / 32, 0.95))


@pytest.mark.parametrize('interval,text', [
    # minus infinity is a number, not a target never reached
    (P.Interval(-INF, -INF, 0.0, 31 / 32, 0.95), '-inf [-inf, 0.00] 96.9%'),
    (P.Interval(NAN, -INF, INF, 31 / 32, 0.95), '- [-inf, never] 96.9%'),
    # a coverage exactly at the level asked is not short of it
    (P.Interval(2.0, 1.0, 3.0, 0.75, 0.75), '2.00 [1.00, 3.00] 75%'),
])
def test_fmt_interval_defaults(interval, text):
    assert P.fmt_interval(interval) == text


def test_an_interval_at_exactly_its_level_is_shown_without_a_mark():
    got = P.median_interval([3.0, 1.0, 2.0], level=0.75)
    assert got == (2.0, 1.0, 3.0, 0.75, 0.75) and got.decisive
    assert P.fmt_interval(got) == '2.00 [1.00, 3.00] 75%'
