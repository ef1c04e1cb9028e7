"""Batch balancing's pure logic: the split, the cost fit, the hysteresis, the settings, and
the balanced loader's slices (no jobs: tests/integration/test_balance_jobs.py runs them)."""
import itertools
import math
import random

import numpy as np
import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.balance import BalancePolicy, fit_cost, predicted_time, solve_split


@pytest.mark.parametrize('rates,total,lo,hi,expected', [
    ([1, 3], 128, 1, 128, [96, 32]),
    ([1, 1, 1], 128, 1, 128, [43, 43, 42]),
    ([1, 10], 128, 40, 128, [88, 40]),                  # the slow worker held at min
    ([10, 1], 128, 1, 100, [28, 100]),                  # the fast worker held at max
])
def test_split_is_proportional_to_speed_within_bounds(rates, total, lo, hi, expected):
    assert solve_split(rates, total, lo, hi) == expected


def greedy_split(rates, total, lo, hi, overheads=None):
    """The integer split as documented, without the bisection: from lo everywhere, hand out
    the samples one by one to the worker whose time would grow least (ties: lower rank)."""
    overheads = overheads if overheads is not None else [0.0] * len(rates)
    sizes = [lo] * len(rates)
    for _ in range(total - lo * len(rates)):
        q = min((q for q in range(len(rates)) if sizes[q] < hi),
                key=lambda q: (overheads[q] + (sizes[q] + 1) * rates[q], q))
        sizes[q] += 1
    return sizes


@pytest.mark.parametrize('seed', range(4))
def test_split_is_the_documented_greedy_split(seed):
    """The bisection only picks where the one-by-one hand-out starts: the result is the
    same split, sample for sample, as handing out every sample one by one from lo.  Rates
    from 1e-4 to 10 s per sample (iteration times far below and above 1 s), speed ratios
    up to 1e5, overheads >= 0 or none."""
    rng = random.Random(seed)
    for _ in range(150):
        m, lo = rng.randint(1, 5), rng.randint(0, 4)
        hi = lo + rng.randint(0, 40)
        total = rng.randint(m * lo, m * hi)
        scale = 10.0 ** rng.randint(-4, 1)
        rates = [scale * rng.choice([1.0, 2.0, 3.0, 0.5, rng.uniform(0.1, 10.0)])
                 for _ in range(m)]
        over = rng.choice([None, [scale * rng.choice([0.0, 1.0, rng.uniform(0, 20)])
                                  for _ in range(m)]])
        assert solve_split(rates, total, lo, hi, over) == greedy_split(rates, total, lo, hi, over), (
            rates, total, lo, hi, over)


def test_split_is_optimal_against_brute_force():
    rng = random.Random(3)
    for _ in range(60):
        m, lo, hi = rng.randint(2, 3), rng.randint(1, 3), rng.randint(5, 12)
        total = rng.randint(m * lo, m * hi)
        rates = [rng.uniform(0.1, 2) for _ in range(m)]
        over = [rng.choice([0.0, rng.uniform(0, 3)]) for _ in range(m)]
        got = solve_split(rates, total, lo, hi, over)
        assert sum(got) == total and all(lo <= b <= hi for b in got)
        best = min(predicted_time(rates, s, over)
                   for s in itertools.product(range(lo, hi + 1), repeat=m) if sum(s) == total)
        assert predicted_time(rates, got, over) == pytest.approx(best)


def test_fit_cost_recovers_a_fixed_cost_per_iteration():
    assert fit_cost({32: 0.0064}) == (0.0, pytest.approx(0.0002))
    a, c = fit_cost({16: 0.010 + 16 * 1e-4, 48: 0.010 + 48 * 1e-4, 32: 0.010 + 32 * 1e-4})
    assert a == pytest.approx(0.010) and c == pytest.approx(1e-4)
    a, c = fit_cost({16: 0.02, 48: 0.01})      # noise: slower with fewer samples
    assert a >= 0 and c > 0


def policy_run(threshold, rounds=300, jitter=0.04, seed=0):
    """Two workers, the second 3x slower per sample, rates jittering by +-jitter."""
    rng = random.Random(seed)
    pol = BalancePolicy(2, 128, 8, 120, threshold)
    switches = 0
    for _ in range(rounds):
        models = [(0.0, 1e-4 * (1 + rng.uniform(-jitter, jitter))),
                  (0.0, 3e-4 * (1 + rng.uniform(-jitter, jitter)))]
        switches += pol.decide(models)['switched']
    return switches, pol.sizes


def test_hysteresis_keeps_the_split_under_jitter():
    # rates jittering by +-2% (the ratio by up to ~4%) never beat a 5% threshold again
    switches, sizes = policy_run(threshold=0.05, jitter=0.02)
    assert switches == 1 and 90 <= sizes[0] <= 102
    # +-4%: a first split off by up to ~8% may be corrected once, then it stays
    switches, sizes = policy_run(threshold=0.05, jitter=0.04)
    assert switches <= 2 and 90 <= sizes[0] <= 102
    # without hysteresis the same jitter moves the split again and again
    assert policy_run(threshold=0.0, jitter=0.02)[0] > 20


def test_no_decision_before_every_worker_is_measured():
    pol = BalancePolicy(2, 64, 1, 64, 0.05)
    record = pol.decide([(0.0, 1e-4), None])
    assert not record['switched'] and pol.sizes == [32, 32] and 'no measurement' in record['why']


@pytest.mark.parametrize('env,fragment', [
    ({cfg.ENV_BALANCE_MIN: '0'}, "integer >= 1 (one worker's batch"),
    ({cfg.ENV_BALANCE_MAX: 'big'}, "integer >= 1 (one worker's batch"),
    ({cfg.ENV_BALANCE_PERIOD: '2.5'}, 'iterations between two decisions'),
    ({cfg.ENV_BALANCE_THRESHOLD: '1'}, 'fraction in [0, 1)'),
    ({cfg.ENV_BALANCE_SMOOTHING: '0'}, 'weight in (0, 1]'),
])
def test_bad_settings_name_the_variable_the_value_and_what_is_accepted(env, fragment):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.balance_from_env(env, num_workers=2, total=64)
    (name, value), = env.items()
    assert name in str(err.value) and repr(value) in str(err.value) and fragment in str(err.value)


def test_bounds_that_admit_no_split_are_refused():
    with pytest.raises(cfg.ConfigError, match=r'admit no split of 64 samples over 4 workers'):
        cfg.balance_from_env({cfg.ENV_BALANCE_MIN: '20'}, num_workers=4, total=64)
    with pytest.raises(cfg.ConfigError, match=r'MXNET_SSP_BALANCE_MIN=9 is greater than '
                                              r'MXNET_SSP_BALANCE_MAX=8'):
        cfg.balance_from_env({cfg.ENV_BALANCE_MIN: '9', cfg.ENV_BALANCE_MAX: '8'})
    conf = cfg.balance_from_env({cfg.ENV_BALANCE_PERIOD: '5'}, num_workers=2, total=64,
                                min_batch=4)
    assert (conf.period, conf.bounds()) == (5, (4, 64))


class FakeBalancer:
    def __init__(self, splits, rank):
        self.total, self.rank, self._splits, self.split = 8, rank, iter(splits), None

    def batch_size(self):
        self.split = next(self._splits)
        return self.split[self.rank]

    @property
    def offset(self):
        return sum(self.split[:self.rank])


def test_balanced_loader_slices_partition_each_global_batch():
    from mxnet import gluon
    from mxnet_ssp.lab.loader import BalancedLoader, global_order
    data = gluon.data.ArrayDataset(np.arange(24, dtype=np.float32).reshape(24, 1),
                                   np.arange(24, dtype=np.int32))
    splits = [[4, 4], [6, 2], [1, 7]]
    seen = []
    for rank in (0, 1):
        loader = BalancedLoader(data, FakeBalancer(splits, rank), seed=3)
        assert len(loader) == 3
        seen.append([y.asnumpy().tolist() for _, y in loader.epoch(2)])
    order = global_order(24, 3, 2)
    for j, split in enumerate(splits):
        assert [len(seen[0][j]), len(seen[1][j])] == split
        assert seen[0][j] + seen[1][j] == order[8 * j:8 * (j + 1)].tolist()


def test_the_launcher_checks_balancing_settings_before_starting_anything():
    from mxnet_ssp.launch.settings import LaunchError, validate_settings
    with pytest.raises(LaunchError, match=r"MXNET_SSP_BALANCE_PERIOD='0' is not valid"):
        validate_settings(['t', '--kvstore', 'dist_sync'], {cfg.ENV_BALANCE_PERIOD: '0'})
    with pytest.raises(LaunchError, match=r"MXNET_SSP_BALANCE_SMOOTHING='x' is not valid"):
        validate_settings(['t'], {}, [('--env-worker', {cfg.ENV_BALANCE_SMOOTHING: 'x'})])


@pytest.mark.parametrize('user_key,expected', [('w', 'string'), (3, 'int')])
def test_the_reserved_key_follows_the_store_s_key_type(user_key, expected):
    """MXNet refuses to mix int and string keys in one store: a store whose parameters have
    names (Module) gets the string form of the reserved key, after the int one is refused."""
    import types
    import mxnet as mx
    from mxnet_ssp.balance import (ADDRESS_ELEMENTS, BALANCE_KEY, BALANCE_KEY_STR,
                                   BatchBalancer)
    kv = mx.kv.create('local')
    kv.init(user_key, mx.nd.zeros(2))
    vec = mx.nd.arange(ADDRESS_ELEMENTS)
    key = BatchBalancer._init_key(types.SimpleNamespace(kv=kv), kv, vec)
    assert key == (BALANCE_KEY_STR if expected == 'string' else BALANCE_KEY)
    out = mx.nd.zeros(ADDRESS_ELEMENTS)
    kv.pull(key, out=out)
    assert (out.asnumpy() == vec.asnumpy()).all()


# ---------------------------------------------------------------------------
# the split policy at its edges (mxnet_ssp/core/split.py); expected values by hand
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('total,workers,expected', [
    (12, 3, [4, 4, 4]),             # an exact multiple: no remainder to hand out
    (10, 3, [4, 3, 3]),             # remainder 1: rank 0 only
    (11, 3, [4, 4, 3]),             # remainder 2: ranks 0 and 1, never the last
    (128, 5, [26, 26, 26, 25, 25]),  # 128 = 5 * 25 + 3
    (5, 4, [2, 1, 1, 1]),
    (7, 4, [2, 2, 2, 1]),           # remainder workers - 1
    (7, 1, [7]),                    # one worker takes everything
    (2, 3, [1, 1, 0]),              # fewer samples than workers: the highest rank gets none
    (0, 3, [0, 0, 0]),
])
def test_equal_split_gives_the_remainder_to_the_lowest_ranks(total, workers, expected):
    from mxnet_ssp.balance import equal_split
    got = equal_split(total, workers)
    assert got == expected and all(type(b) is int for b in got)


def test_equal_split_reads_the_total_as_an_integer():
    from mxnet_ssp.balance import equal_split
    got = equal_split(10.0, 3)
    assert got == [4, 3, 3] and all(type(b) is int for b in got)


@pytest.mark.parametrize('rates,sizes,overheads,expected', [
    ([1.0, 2.0], [3, 1], None, 3.0),            # max(3, 2): the slowest worker
    ([1.0, 2.0], [1, 3], None, 6.0),            # max(1, 6)
    ([1.0, 2.0], [3, 1], [0.5, 2.0], 4.0),      # max(0.5 + 3, 2 + 2): the overhead adds
    ([1.0, 2.0], [3, 1], [], 3.0),              # an empty list of overheads: none
])
def test_predicted_time_is_the_slowest_worker_s_time(rates, sizes, overheads, expected):
    assert predicted_time(rates, sizes, overheads) == expected


@pytest.mark.parametrize('rates,total,expected', [
    ([1.0, 5.0], 8, [4, 4]),        # total == M * lo: everyone at lo, whatever the rates
    ([1.0, 5.0], 20, [10, 10]),     # total == M * hi: everyone at hi
    ([5.0, 1.0], 9, [4, 5]),        # one above M * lo: the fast worker takes it
    ([1.0, 5.0], 19, [10, 9]),      # one below M * hi: the slow worker gives it up
])
def test_split_at_the_bounds_of_the_total(rates, total, expected):
    assert solve_split(rates, total, 4, 10) == expected


@pytest.mark.parametrize('total', [7, 21, 0])
def test_split_beyond_the_bounds_of_the_total_is_refused(total):
    with pytest.raises(ValueError) as err:
        solve_split([1.0, 5.0], total, 4, 10)
    assert str(err.value) == 'no split of %d samples over 2 workers within [4, 10]' % total


@pytest.mark.parametrize('bad', [0.0, -1.0, float('inf'), float('nan')])
def test_split_refuses_rates_that_are_not_finite_and_positive(bad):
    with pytest.raises(ValueError) as err:
        solve_split([1.0, bad], 8, 1, 8)
    assert str(err.value) == 'rates must be finite and > 0, got [1.0, %r]' % bad


@pytest.mark.parametrize('lo,hi,expected', [
    (32, 128, [96, 32]),            # the optimum [96, 32] (96 * 1 == 32 * 3) sits at lo
    (33, 128, [95, 33]),            # lo one above: the slow worker is held there
    (1, 96, [96, 32]),              # the optimum sits at hi
    (1, 95, [95, 33]),              # hi one below: the fast worker is held there
])
def test_split_holds_workers_exactly_at_lo_and_hi(lo, hi, expected):
    assert solve_split([1.0, 3.0], 128, lo, hi) == expected


def test_split_hands_out_the_last_samples_one_by_one_never_past_hi():
    """a = [48.5, 0, 1], c = [1, 10, 10], 21 samples, at most 10 each: the continuous
    optimum T = 58 gives [9.5, 5.8, 5.7]; the floors [9, 5, 5] miss 2 samples.  Their next
    times are 58.5, 60 and 61: worker 0 takes one and reaches hi = 10 (its next time, 59.5,
    would be the smallest), so worker 1 takes the other: times 58.5, 60, 51."""
    assert solve_split([1.0, 10.0, 10.0], 21, 1, 10, [48.5, 0.0, 1.0]) == [10, 6, 5]


@pytest.mark.parametrize('total,expected', [
    (10, [4, 3, 3]),                # equal times: the extra samples go to the lowest ranks
    (11, [4, 4, 3]),
    (12, [4, 4, 4]),
])
def test_split_ties_go_to_the_lower_rank(total, expected):
    assert solve_split([1.0, 1.0, 1.0], total, 1, 12) == expected


@pytest.mark.parametrize('overheads,expected', [
    ([4.0, 0.0], [8, 12]),          # (T - 4) + T = 20: T = 12, both finish at 12
    ([0.0, 4.0], [12, 8]),
    ([0.0, 0.0], [10, 10]),
    (None, [10, 10]),
])
def test_split_gives_less_to_a_worker_with_a_fixed_overhead(overheads, expected):
    assert solve_split([1.0, 1.0], 20, 1, 20, overheads) == expected


def test_split_takes_back_an_overshoot_from_the_slowest_worker_lower_rank_first():
    """Only an overhead below 0 (outside the documented a >= 0, which fit_cost and the
    service guarantee) makes the floors overshoot: here they give [10, 10] for 15 samples,
    and the 5 extra are taken one at a time from the worker with the longest time (both at
    0, then -1 / 0, ...), rank 0 first on a tie: [9, 10], [9, 9], [8, 9], [8, 8], [7, 8]."""
    assert solve_split([1.0, 1.0], 15, 1, 20, [-10.0, -10.0]) == [7, 8]


def test_split_takes_back_an_overshoot_by_time_not_by_size():
    """Rates 2 and 0.5, a = -20 each, 10 samples: the floors [10, 30] (30 = hi) overshoot by
    30; taking one at a time from the longer time a + rate * b ends at [2, 8], both -16."""
    assert solve_split([2.0, 0.5], 10, 1, 30, [-20.0, -20.0]) == [2, 8]


def test_split_takes_back_an_overshoot_never_below_lo():
    """a = [-10, 5]: the floors give [10, 1] for 5 samples.  Worker 1 has the longer time
    (5 + 1 = 6 against -10 + 10 = 0) but is at lo = 1, so all 6 come from worker 0."""
    assert solve_split([1.0, 1.0], 5, 1, 20, [-10.0, 5.0]) == [4, 1]


@pytest.mark.parametrize('points,expected', [
    ({10: 0.5}, (0.0, 0.05)),                            # one batch: all of it per sample
    ({10: 2.0, 30: 4.0}, (1.0, 0.1)),                    # exactly t = 1 + 0.1 b
    ({0: 0.5, 10: 1.5}, (0.5, 0.1)),                     # a batch of 0 measures a directly
    ({10: 1.0, 20: 2.0}, (0.0, 0.1)),                    # exactly t = 0.1 b
    ({10: 1.0, 20: 2.5, 30: 3.0}, (1.0 / 6, 0.1)),       # least squares: cov 20 / var 200
    # a < 0 (least squares: -1 + 0.2 b): refit through the origin, c = 70 / 500
    ({10: 1.0, 20: 3.0}, (0.0, 0.14)),
    # flat: c floored at 1% of 2 / 30 seconds per sample, a = 1 - 15 c
    ({10: 1.0, 20: 1.0}, (0.99, 1.0 / 1500)),
    # slower with fewer samples: c floored at 1% of 0.03 / 64, a = 0.015 - 32 c
    ({16: 0.02, 48: 0.01}, (0.01485, 0.03 / 6400)),
    ({10: 0.0}, (0.0, 0.0)),                             # no time measured at all
    ({10: 0.0, 20: 0.0}, (0.0, 0.0)),
])
def test_fit_cost_at_its_edges(points, expected):
    a, c = fit_cost(points)
    assert a == pytest.approx(expected[0], rel=1e-9, abs=1e-12)
    assert c == pytest.approx(expected[1], rel=1e-9, abs=1e-15)
    assert a >= 0


@pytest.mark.parametrize('a, c, batches', [
    (0.3, 1e-4, (30, 31, 32, 33)),
    (1.0, 1e-4, (126, 127, 129)),
])
def test_fit_cost_of_close_batch_sizes_under_a_large_fixed_cost(a, c, batches):
    """What the balancer measures: batch sizes close to a worker's share, most of the time
    fixed per iteration.  The slope is the least-squares slope of the given floats to 1e-13
    (worked out in exact rationals), which the centred sums give; a sum of (b + mb) * (t - mt)
    or of (b - mb) * (t + mt), equal in exact arithmetic, is off by up to 6e-11."""
    from fractions import Fraction
    points = {b: a + c * b for b in batches}
    bs = [Fraction(b) for b in points]
    ts = [Fraction(points[b]) for b in points]
    mb, mt = sum(bs) / len(bs), sum(ts) / len(ts)
    exact_c = sum((b - mb) * (t - mt) for b, t in zip(bs, ts)) / sum((b - mb) ** 2 for b in bs)
    assert float(exact_c) == pytest.approx(c, rel=1e-9)                 # the premise
    got_a, got_c = fit_cost(points)
    assert got_c == pytest.approx(float(exact_c), rel=1e-13, abs=0)
    assert got_a == pytest.approx(float(mt - exact_c * mb), rel=1e-13, abs=0)


def test_fit_cost_does_not_depend_on_the_order_of_the_points():
    assert fit_cost({30: 3.0, 10: 1.0, 20: 2.5}) == pytest.approx((1.0 / 6, 0.1))


@pytest.mark.parametrize('workers,total,lo,hi,expected', [
    (3, 10, 1, 10, [4, 3, 3]),      # equal, the remainder to the lowest ranks
    (4, 8, 2, 2, [2, 2, 2, 2]),     # lo == hi: the only split
    (2, 20, 10, 10, [10, 10]),
    (1, 7, 1, 7, [7]),
])
def test_policy_starts_from_the_equal_split(workers, total, lo, hi, expected):
    pol = BalancePolicy(workers, total, lo, hi, 0.05)
    assert pol.sizes == expected and pol.version == 0
    assert (pol.num_workers, pol.total, pol.lo, pol.hi, pol.threshold) == \
        (workers, total, lo, hi, 0.05)


def test_policy_takes_a_given_initial_split_as_a_list_of_its_own():
    initial = (7, 3)
    pol = BalancePolicy(2, 10, 1, 10, 0.05, initial=initial)
    assert pol.sizes == [7, 3] and pol.version == 0       # a list: (7, 3) != [7, 3]
    given = [6, 4]
    pol = BalancePolicy(2, 10, 1, 10, 0.05, initial=given)
    given[0] = 99
    assert pol.sizes == [6, 4]


@pytest.mark.parametrize('total,lo,hi', [
    (30, 1, 10),        # the equal split [15, 15] is above hi and no split fits
    (1, 1, 10),         # [1, 0] is below lo: [1, 1] would not sum to 1
])
def test_policy_refuses_a_total_no_split_within_the_bounds_fits(total, lo, hi):
    with pytest.raises(ValueError, match=r'^no split of %d samples over 2 workers within '
                                         r'\[%d, %d\]$' % (total, lo, hi)):
        BalancePolicy(2, total, lo, hi, 0.05)


def test_policy_predicts_the_best_split_with_the_overheads():
    """Worker 1 pays 2.5 s on top: [2, 2] takes max(2, 4.5) = 4.5 s; the best split [3, 1]
    takes max(3, 3.5) = 3.5 s, the overhead's worker being the slower one there too."""
    pol = BalancePolicy(2, 4, 1, 3, 0.1)
    record = pol.decide([(0.0, 1.0), (2.5, 1.0)])
    assert (record['predicted_s'], record['best_s']) == (4.5, 3.5)
    assert record['gain'] == (4.5 - 3.5) / 4.5 and record['switched'] and pol.sizes == [3, 1]


#: Worker 1 pays 2 s per iteration on top: on [2, 2] the times are 2 and 4, so now = 4;
#: the best split [3, 1] gives 3 and 3, so the gain is exactly (4 - 3) / 4 = 0.25.
GAIN_MODELS = [(0.0, 1.0), (2.0, 1.0)]


@pytest.mark.parametrize('threshold,switched', [
    (0.2, True),
    (math.nextafter(0.25, 0.0), True),      # just below the gain: switch
    (0.25, False),                          # exactly at it: the gain must exceed it
    (math.nextafter(0.25, 1.0), False),     # just above
    (0.3, False),
])
def test_policy_switches_only_when_the_gain_exceeds_the_threshold(threshold, switched):
    pol = BalancePolicy(2, 4, 1, 3, threshold)
    assert pol.sizes == [2, 2]
    record = pol.decide(GAIN_MODELS)
    assert record['predicted_s'] == 4.0 and record['best_s'] == 3.0
    assert record['gain'] == 0.25
    assert record['models'] == [[0.0, 1.0], [2.0, 1.0]]
    assert record['switched'] is switched
    assert pol.sizes == record['sizes'] == ([3, 1] if switched else [2, 2])
    assert pol.version == (1 if switched else 0)


def test_policy_after_a_switch_stays_put_and_counts_versions():
    pol = BalancePolicy(2, 4, 1, 3, 0.0)
    assert pol.decide(GAIN_MODELS)['switched'] and pol.version == 1
    record = pol.decide(GAIN_MODELS)           # the split is already the best one: gain 0
    assert not record['switched'] and record['gain'] == 0.0 and pol.version == 1
    assert pol.sizes == [3, 1]
    # now worker 0 pays the overhead: [3, 1] takes max(2 + 3, 1) = 5, [1, 3] max(2 + 1, 3) = 3
    record = pol.decide([(2.0, 1.0), (0.0, 1.0)])
    assert record['switched'] and pol.sizes == [1, 3] and pol.version == 2
    assert record['predicted_s'] == 5.0 and record['best_s'] == 3.0


def test_policy_does_not_switch_to_a_split_that_is_just_as_fast():
    """Threshold 0: [2, 2, 1] is the solver's split and as fast as the current [1, 2, 2]
    (both 2 s): a gain of 0 does not exceed 0, so the split stays."""
    pol = BalancePolicy(3, 5, 1, 5, 0.0, initial=[1, 2, 2])
    record = pol.decide([(0.0, 1.0)] * 3)
    assert record['predicted_s'] == record['best_s'] == 2.0 and record['gain'] == 0.0
    assert not record['switched'] and pol.sizes == [1, 2, 2] and pol.version == 0


def test_policy_with_nothing_to_time_reports_no_gain():
    """Zero samples and no overhead: every split takes 0 s, so the gain is 0 (not 0 / 0)."""
    pol = BalancePolicy(2, 0, 0, 4, 0.0)
    assert pol.sizes == [0, 0]
    record = pol.decide([(0.0, 1.0), (0.0, 1.0)])
    assert record['predicted_s'] == 0.0 and record['gain'] == 0.0 and not record['switched']


def test_policy_waits_for_every_worker_s_model():
    pol = BalancePolicy(3, 9, 1, 9, 0.0)
    for models in ([None, (0.0, 1.0), (0.0, 1.0)], [(0.0, 1.0), (0.0, 1.0), None]):
        record = pol.decide(models)
        assert record == {'models': [list(m) if m else None for m in models],
                          'sizes': [3, 3, 3], 'switched': False,
                          'why': 'a worker has no measurement yet'}
    assert pol.version == 0
