"""Batch balancing's pure logic: the split, the cost fit, the hysteresis, the settings, and
the balanced loader's slices (no jobs: tests/integration/test_balance_jobs.py runs them)."""
import itertools
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
    from mxnet_ssp.experiments.loader import BalancedLoader, global_order
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
