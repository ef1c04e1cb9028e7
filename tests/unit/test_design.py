"""mxnet_ssp.experiments.reproduce.design: the coverage of the lab's intervals measured on
synthetic lognormal trials agrees with the exact binomial coverage, the bootstrap's falls
short where docs/lab.md says, and the power simulation counts the verdicts it would give.

Fast (a few seconds in all) and deterministic: fixed seeds, and the measured figures are
compared with exact ones within a binomial margin of four standard errors."""
import math

import numpy as np
import pytest

from mxnet_ssp.experiments.reproduce import design as D
from mxnet_ssp.experiments.reproduce import paired as P

NS = (3, 5, 6, 8, 10)


def _near(measured, exact, reps):
    return abs(measured - exact) <= 4 * math.sqrt(exact * (1 - exact) / reps) + 1e-9


def test_draw_times_are_lognormal_around_their_medians():
    rng = np.random.default_rng(1)
    t = D.draw_times(rng, {'a': 100.0, 'b': 50.0}, 20000, 0.2, correlation=0.5)
    assert np.median(t['a']) == pytest.approx(100.0, rel=0.01)
    assert np.median(t['b']) == pytest.approx(50.0, rel=0.01)
    assert np.std(np.log(t['a'])) == pytest.approx(0.2, rel=0.03)
    assert np.corrcoef(np.log(t['a']), np.log(t['b']))[0, 1] == pytest.approx(0.5, abs=0.03)
    # no correlation: the log-ratio's spread is sqrt(2) x 0.2
    t = D.draw_times(rng, {'a': 1.0, 'b': 1.0}, 20000, 0.2)
    assert np.std(np.log(t['a'] / t['b'])) == pytest.approx(0.2 * math.sqrt(2), rel=0.03)


@pytest.mark.parametrize('spread', [0.15, 0.3])
def test_the_paired_interval_covers_as_the_binomial_says(spread):
    reps = 3000
    got = D.interval_coverage(NS, 'paired', spread=spread, reps=reps, seed=7)
    for n in NS:
        exact = P.coverage(n, max(P.rank(n), 1))
        assert _near(got[n], exact, reps), (n, got[n], exact)
    # 3 and 5 trials: [min, max], 75% and 93.8%; 6 and more: at least 95%
    assert got[3] < 0.8 and got[5] < 0.95
    assert all(got[n] >= 0.95 for n in (6, 8, 10))


def test_the_median_interval_of_one_arm_too():
    reps = 3000
    got = D.interval_coverage((5, 6), 'median', spread=0.3, reps=reps, seed=3)
    assert _near(got[5], 15 / 16, reps) and _near(got[6], 31 / 32, reps)


def test_a_percentile_bootstrap_of_the_paired_median_falls_short_of_95_percent():
    # why the lab uses order statistics: with 6 seeds the bootstrap's 95% interval is the 1st
    # to 5th order statistic of the lower medians, which covers 1 - 1/64 - 7/64 = 87.5%
    got = D.interval_coverage((6,), 'paired-bootstrap', spread=0.2, reps=400, seed=5)
    assert _near(got[6], 0.875, 400)


def test_coverage_is_reproducible_and_checks_its_method():
    assert D.interval_coverage((6,), reps=50, seed=2) == D.interval_coverage((6,), reps=50,
                                                                             seed=2)
    with pytest.raises(ValueError, match="'bayes' is not one of paired, median"):
        D.interval_coverage((6,), 'bayes')


def test_power_counts_the_verdicts_of_synthetic_labs():
    # no spread: every synthetic lab is the world itself, and the verdicts are certain.
    # PAPER_WORLD with 8 trials: every claim supported (three thresholds at 98.3% need 8)
    got = D.claim_power(8, spread=0.0, accuracy_spread=0.0, reps=5)
    assert got == {'BSP slower than every SSP': (1.0, 0.0),
                   'every SSP slower than DSSP': (1.0, 0.0),
                   'DSSP as fast as ASP': (1.0, 0.0),
                   "DSSP's final accuracy >= ASP's": (1.0, 0.0),
                   'untuned DSSP within 10% of the best hand-tuned SSP': (1.0, 0.0),
                   'DSSP at least 1.3x faster than BSP': (1.0, 0.0)}
    # 6 trials: the three-threshold claims cannot be decided, the others still are
    got = D.claim_power(6, spread=0.0, accuracy_spread=0.0, reps=5)
    assert got['every SSP slower than DSSP'] == (0.0, 0.0)
    assert got['DSSP as fast as ASP'] == (1.0, 0.0)
    # a world where DSSP is as slow as BSP: refuted every time
    world = dict(D.PAPER_WORLD, dssp=160.0)
    got = D.claim_power(6, spread=0.0, accuracy_spread=0.0, world=world, reps=5)
    assert got['DSSP as fast as ASP'] == (0.0, 1.0)
    assert got['DSSP at least 1.3x faster than BSP'] == (0.0, 1.0)


def test_power_with_spread_is_a_seeded_probability():
    one = D.claim_power(6, spread=0.2, reps=60, seed=4)
    assert one == D.claim_power(6, spread=0.2, reps=60, seed=4)
    # 20% spread, true ratio 1.0: "as fast as ASP within 10%" is (almost) never supported
    # with 6 trials: [min, max] of 6 per-seed ratios spread by 28% must lie within 10%
    assert one['DSSP as fast as ASP'][0] <= 0.05
    for supported, refuted in one.values():
        assert 0.0 <= supported + refuted <= 1.0


def test_the_tables_of_docs_lab_md_render():
    lines = D.coverage_table(ns=(3, 6), reps=200, bootstrap_reps=20)
    assert lines[0] == '| interval (95% asked) | 3 trials | 6 trials |'
    assert len(lines) == 2 + len(D.METHODS)
    assert lines[2].startswith('| paired, order statistics (decides) | ')
    lines = D.power_table(ns=(5, 8), spread=0.0, reps=3)
    assert lines[0] == '| claim | 5 trials | 8 trials |'
    assert '| DSSP as fast as ASP | 0% | 100% |' in lines


def test_measured_spread_recovers_the_spread_and_correlation_it_was_drawn_with():
    rng = np.random.default_rng(7)
    drawn = D.draw_times(rng, {'a': 10.0, 'b': 5.0, 'c': 20.0}, 4000, 0.25, correlation=0.4)
    times = {arm: dict(enumerate(values)) for arm, values in drawn.items()}
    spread, correlation, n = D.measured_spread(times)
    assert spread == pytest.approx(0.25, rel=0.03)
    assert correlation == pytest.approx(0.4, abs=0.04)
    assert n == 12000
    # arms measured at different seeds: only the shared ones enter the correlation
    times['b'] = {k: v for k, v in times['b'].items() if k % 2}
    assert D.measured_spread(times)[1] == pytest.approx(0.4, abs=0.05)


def test_measured_spread_on_a_small_lab_by_hand():
    times = {'a': {1: 1.0, 2: math.e, 3: math.e ** 2},          # log times 0, 1, 2
             'b': {1: 2.0, 2: 2.0 * math.e, 3: 2.0 * math.e ** 2},  # the same, shifted
             'c': {1: 5.0}}                                     # one time: no spread
    spread, correlation, n = D.measured_spread(times)
    assert spread == pytest.approx(1.0)                         # sd of 0, 1, 2 (ddof 1)
    assert correlation == pytest.approx(1.0) and n == 6
    times['b'] = {1: math.e ** 2, 2: math.e, 3: 1.0}            # reversed: -1, clipped to 0
    assert D.measured_spread(times)[1] == 0.0
    with pytest.raises(ValueError, match='no arm has two times'):
        D.measured_spread({'a': {1: 3.0}, 'b': {}})


def _results(tmp_path):
    def trial(seed, curve, status='ok'):
        return {'seed': seed, 'status': status, 'curve': curve}
    results = {'arms': [
        {'arm': 'bsp', 'trials': [trial(1, [[1.0, 0.5], [2.0, 0.93]]),
                                  trial(2, [[1.0, 0.95]]), trial(3, [[1.0, 0.5]]),
                                  trial(4, [[4.0, 0.99]], status='failed')]},
        {'arm': 'asp', 'trials': [trial(1, [[0.5, 0.92]]), trial(2, [[3.0, 0.921]])]}]}
    path = tmp_path / 'results.json'
    path.write_text(__import__('json').dumps(results))
    return results, path


def test_lab_times_reads_each_trials_first_evaluation_at_the_target(tmp_path):
    results, _ = _results(tmp_path)
    assert D.lab_times(results, 0.92) == {'bsp': {1: 2.0, 2: 1.0}, 'asp': {1: 0.5, 2: 3.0}}
    assert D.lab_times(results, 0.94) == {'bsp': {2: 1.0}, 'asp': {}}


def test_the_command_prints_the_power_at_a_labs_measured_spread(tmp_path, capsys):
    _, path = _results(tmp_path)
    assert D.main(['--results', str(path), '--trials', '6', '--reps', '5']) == 0
    out = capsys.readouterr().out
    spread = math.sqrt(((math.log(2.0) - math.log(2.0) / 2) ** 2 * 2
                        + (math.log(0.5) - math.log(1.5) / 2) ** 2
                        + (math.log(3.0) - math.log(1.5) / 2) ** 2) / 2)
    assert 'spread %.3f (sd of log time, 4 times)' % spread in out, out
    assert out.count('| claim | 6 trials |') == 2
    assert D.main(['--results', str(tmp_path / 'missing.json')]) == 2
    assert 'missing.json' in capsys.readouterr().out
    for bad in (['--trials', '1'], ['--trials', 'x'], ['--target', '1.5']):
        with pytest.raises(SystemExit) as exit_:
            D.parse_args(['--results', str(path)] + bad)
        assert exit_.value.code == 2
