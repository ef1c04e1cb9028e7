"""mxnet_ssp.lab.reproduce.power_analysis: the coverage of the lab's intervals measured on
synthetic lognormal trials agrees with the exact binomial coverage, the bootstrap's falls
short where docs/lab.md says, and the power simulation counts the verdicts it would give.

Fast (a few seconds in all) and deterministic: fixed seeds, and the measured figures are
compared with exact ones within a binomial margin of four standard errors."""
import math
import types
import warnings

import numpy as np
import pytest

from mxnet_ssp.lab.reproduce import power_analysis as D
from mxnet_ssp.lab.reproduce import paired as P

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


def test_lab_times_under_the_sustained_crossing_and_the_shortfall():
    # reaches 0.92 at 1 s, falls back at 1.5 s, holds it from 2 s to the end (5 s)
    dipping = [[1.0, 0.93], [1.5, 0.9], [2.0, 0.93], [5.0, 0.94]]
    results = {'arms': [{'arm': 'bsp', 'trials': [
        {'seed': 1, 'status': 'ok', 'curve': dipping},
        {'seed': 2, 'status': 'ok', 'curve': [[0.5, 0.5], [6.0, 0.5]]}]}]}
    assert D.lab_times(results, 0.92) == {'bsp': {1: 1.0}}
    assert D.lab_times(results, 0.92, 'sustained') == {'bsp': {1: 2.0}}
    # over the common budget (5 s, the shorter run's end): seed 2 is short all the time
    shortfall = D.lab_times(results, 0.92, 'shortfall')['bsp']
    assert set(shortfall) == {1, 2} and 0 < shortfall[1] < shortfall[2] <= 5.0


def test_the_command_prints_the_power_at_a_labs_measured_spread(tmp_path, capsys):
    _, path = _results(tmp_path)
    assert D.main(['--results', str(path), '--trials', '6', '--reps', '5']) == 0
    out = capsys.readouterr().out
    spread = math.sqrt(((math.log(2.0) - math.log(2.0) / 2) ** 2 * 2
                        + (math.log(0.5) - math.log(1.5) / 2) ** 2
                        + (math.log(3.0) - math.log(1.5) / 2) ** 2) / 2)
    assert 'time to 0.92, first): spread %.3f (sd of log time, 4 times)' % spread in out, out
    assert out.count('| claim | 6 trials |') == 2
    assert D.main(['--results', str(tmp_path / 'missing.json')]) == 2
    assert 'missing.json' in capsys.readouterr().out
    for bad in (['--trials', '1'], ['--trials', 'x'], ['--target', '1.5'],
                ['--metric', 'last']):
        with pytest.raises(SystemExit) as exit_:
            D.parse_args(['--results', str(path)] + bad)
        assert exit_.value.code == 2


# ---------------------------------------------------------------------------
# the command line: options, their defaults, and the messages for bad values

def _squash(text):
    return ' '.join(text.split())


def test_parse_args_defaults():
    args = D.parse_args([])
    assert args.seed == 0 and args.reps == 1000 and args.results is None
    assert args.target == 0.92 and args.trials == (6, 8, 10) and args.metric == 'first'
    assert D.parse_args(['--metric', 'sustained']).metric == 'sustained'


def test_parse_args_reads_every_option():
    args = D.parse_args(['--seed', '7', '--reps', '12', '--results', 'r.json',
                         '--target', '0.5', '--trials', '2,100,9'])
    assert (args.seed, args.reps, args.results, args.target) == (7, 12, 'r.json', 0.5)
    assert args.trials == (2, 100, 9)                    # 2 and 100 are the bounds, included
    assert D.parse_args(['--target', '0.999']).target == 0.999
    assert D.parse_args(['--trials', '5']).trials == (5,)


def test_the_help_names_the_program_and_describes_each_option(capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '200')
    with pytest.raises(SystemExit) as exit_:
        D.parse_args(['--help'])
    assert exit_.value.code == 0
    out = _squash(capsys.readouterr().out)
    assert out.startswith('usage: python -m mxnet_ssp.lab.reproduce.power_analysis ')
    for text in ("Print the coverage of the lab's intervals and the power of its claims, "
                 'measured on synthetic lognormal trials (the tables of docs/lab.md).',
                 '--seed SEED random seed (default 0)',
                 '--reps REPS synthetic labs per power figure (default 1000)',
                 "--results RESULTS_JSON a lab's results.json: print the power of each claim "
                 'at the spread and correlation measured there (time to --target) instead of '
                 'the tables of docs/lab.md',
                 '--target TARGET the accuracy target whose times --results measures '
                 '(default 0.92)',
                 '--trials TRIALS comma-separated trial counts of the --results power tables '
                 '(default 6,8,10)'):
        assert text in out, text


@pytest.mark.parametrize('argv, message', [
    (['--trials', 'x'], '--trials x: expected comma-separated integers from 2 to 100'),
    (['--trials', '6,,8'], '--trials 6,,8: expected comma-separated integers from 2 to 100'),
    (['--trials', '1'], '--trials 1: expected comma-separated integers from 2 to 100'),
    (['--trials', '101'], '--trials 101: expected comma-separated integers from 2 to 100'),
    (['--target', '1'], '--target 1.0: expected an accuracy between 0 and 1'),
    (['--target', '0'], '--target 0.0: expected an accuracy between 0 and 1'),
    (['--target', '-0.5'], '--target -0.5: expected an accuracy between 0 and 1'),
])
def test_parse_args_rejects_bad_values_saying_what_it_accepts(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        D.parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.split()[:4] == ['usage:', 'python', '-m',
                               'mxnet_ssp.lab.reproduce.power_analysis']
    assert err.rstrip().endswith('error: ' + message), err


@pytest.mark.parametrize('argv', [['--seed', '1.5'], ['--reps', 'many'], ['--target', 'x']])
def test_parse_args_types_its_numbers(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        D.parse_args(argv)
    assert exit_.value.code == 2
    assert 'invalid' in capsys.readouterr().err


def test_parse_args_rejects_a_list_with_one_count_out_of_range(capsys):
    """The message names the value as given (it once formatted the parsed tuple with %,
    which raised TypeError for a list of two or more counts)."""
    with pytest.raises(SystemExit) as exit_:
        D.parse_args(['--trials', '6,1'])
    assert exit_.value.code == 2
    assert ('--trials 6,1: expected comma-separated integers from 2 to 100'
            in capsys.readouterr().err)


def _recorder(calls, result):
    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return result(*args, **kwargs) if callable(result) else list(result)
    return fake


def test_main_prints_the_coverage_table_and_five_power_tables(monkeypatch, capsys):
    coverage, power = [], []
    monkeypatch.setattr(D, 'coverage_table', _recorder(coverage, ['| cov |', '|---|']))
    monkeypatch.setattr(D, 'power_table', _recorder(power, ['| pow |', '|---|']))
    assert D.main(['--seed', '3', '--reps', '9']) == 0
    assert coverage == [((), {'seed': 3})]
    worlds = [(D.PAPER_WORLD, 0.2, 0.0), (D.PAPER_WORLD, 0.2, 0.5), (D.LARGE_WORLD, 0.2, 0.0),
              (D.PAPER_WORLD, 0.15, 0.0), (D.PAPER_WORLD, 0.3, 0.0)]
    assert power == [((), {'spread': s, 'correlation': c, 'world': w, 'reps': 9, 'seed': 3})
                     for w, s, c in worlds]
    moderate = 'bsp 160, ssp3 125, ssp6 125, ssp15 125, asp 100, dssp 100'
    large = 'bsp 225, ssp3 150, ssp6 150, ssp15 150, asp 100, dssp 100'
    table = '| pow |\n|---|\n'
    assert capsys.readouterr().out == (
        'Coverage at 95%, spread 20%, no correlation between arms:\n\n| cov |\n|---|\n'
        + '\nP(supported), moderate margins (%s), spread 20%%, correlation 0:\n\n' % moderate
        + table
        + '\nP(supported), moderate margins (%s), spread 20%%, correlation 0.5:\n\n' % moderate
        + table
        + '\nP(supported), large margins (%s), spread 20%%, correlation 0:\n\n' % large
        + table
        + '\nP(supported), moderate margins (%s), spread 15%%, correlation 0:\n\n' % moderate
        + table
        + '\nP(supported), moderate margins (%s), spread 30%%, correlation 0:\n\n' % moderate
        + table)


def test_main_uses_the_default_seed_and_reps(monkeypatch, capsys):
    coverage, power = [], []
    monkeypatch.setattr(D, 'coverage_table', _recorder(coverage, []))
    monkeypatch.setattr(D, 'power_table', _recorder(power, []))
    assert D.main([]) == 0
    assert coverage == [((), {'seed': 0})]
    assert len(power) == 5
    assert all(kw['reps'] == 1000 and kw['seed'] == 0 for _, kw in power)


def _write(tmp_path, results, name='results.json'):
    path = tmp_path / name
    path.write_text(__import__('json').dumps(results))
    return path


def _lab(times):
    """results.json of arms whose trial at seed k reaches accuracy 0.95 at times[arm][k]."""
    return {'arms': [{'arm': arm, 'trials': [{'seed': k, 'status': 'ok',
                                              'curve': [[0.0, 0.1], [t, 0.95]]}
                                             for k, t in by_seed.items()]}
                     for arm, by_seed in times.items()]}


def test_measured_power_prints_the_measured_figures_and_both_worlds(tmp_path, capsys,
                                                                  monkeypatch):
    # log times 0, 1, 2 for both arms, the same order: spread 1 (ddof 1), correlation 1
    e = math.e
    path = _write(tmp_path, _lab({'bsp': {1: 1.0, 2: e, 3: e * e},
                                  'asp': {1: 2.0, 2: 2 * e, 3: 2 * e * e}}))
    power = []
    monkeypatch.setattr(D, 'power_table', _recorder(power, ['| t |', '|-|']))
    assert D.main(['--results', str(path), '--target', '0.9', '--trials', '6,8',
                   '--reps', '4', '--seed', '5']) == 0
    assert [kw['world'] for _, kw in power] == [D.PAPER_WORLD, D.LARGE_WORLD]
    for _, kw in power:
        assert kw['ns'] == (6, 8) and kw['reps'] == 4 and kw['seed'] == 5
        assert kw['spread'] == pytest.approx(1.0) and kw['correlation'] == pytest.approx(1.0)
    assert capsys.readouterr().out == (
        'Measured in %s (time to 0.9, first): spread 1.000 (sd of log time, 6 times), '
        'correlation 1.00 between arms at the same seed\n\n' % path
        + 'P(supported), moderate margins (bsp 160, ssp3 125, ssp6 125, ssp15 125, asp 100, '
          'dssp 100):\n\n| t |\n|-|\n\n'
        + 'P(supported), large margins (bsp 225, ssp3 150, ssp6 150, ssp15 150, asp 100, '
          'dssp 100):\n\n| t |\n|-|\n\n')


def test_measured_power_measures_at_the_default_target(tmp_path, capsys):
    # accuracy 0.915 at 4 s, 0.93 at 8 s: the default target 0.92 reads 8 s, target 0.91 4 s
    def trial(seed, late):
        return {'seed': seed, 'status': 'ok', 'curve': [[4.0, 0.915], [late, 0.93]]}
    path = _write(tmp_path, {'arms': [{'arm': 'bsp', 'trials': [trial(1, 8.0),
                                                                trial(2, 8.0 * math.e)]}]})
    assert D.main(['--results', str(path), '--trials', '6', '--reps', '2']) == 0
    out = capsys.readouterr().out
    # log 8 and log 8 + 1: sd sqrt(1/2)
    assert 'spread %.3f (sd of log time, 2 times)' % math.sqrt(0.5) in out
    assert '(time to 0.92, first)' in out
    assert out.count('| claim | 6 trials |') == 2
    # at 0.91 both trials reach it at 4 s: no spread
    assert D.main(['--results', str(path), '--target', '0.91', '--trials', '6',
                   '--reps', '2']) == 0
    assert 'spread 0.000 (sd of log time, 2 times)' in capsys.readouterr().out


@pytest.mark.parametrize('content, error', [
    ('{"arms": [', 'Expecting value'),                               # not JSON: ValueError
    ('{"runs": []}', "'arms'"),                                       # KeyError
    ('[1, 2]', 'list indices must be integers'),                      # TypeError
    ('{"arms": [{"arm": "bsp", "trials": []}]}', 'no arm has two times to the target'),
])
def test_measured_power_reports_an_unreadable_results_file(tmp_path, capsys, content, error):
    path = tmp_path / 'results.json'
    path.write_text(content)
    assert D.main(['--results', str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith('--results %s: ' % path) and error in out, out
    assert out.count('\n') == 1                                      # nothing else printed


def test_measured_power_reports_a_missing_file(tmp_path, capsys):
    path = tmp_path / 'missing.json'
    assert D.main(['--results', str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith('--results %s: [Errno 2] ' % path) and out.count('\n') == 1


# ---------------------------------------------------------------------------
# the tables: what they pass on, and how they print it

def test_coverage_table_prints_each_methods_coverage(monkeypatch):
    calls = []

    def fake(ns, method, spread, seed, reps):
        calls.append((ns, method, spread, seed, reps))
        return {n: D.METHODS.index(method) / 10 + n / 1000 for n in ns}
    monkeypatch.setattr(D, 'interval_coverage', fake)
    lines = D.coverage_table(ns=(3, 12), spread=0.3, seed=4, reps=70, bootstrap_reps=8)
    assert calls == [((3, 12), 'paired', 0.3, 4, 70), ((3, 12), 'median', 0.3, 4, 70),
                     ((3, 12), 'unpaired-bootstrap', 0.3, 4, 8),
                     ((3, 12), 'paired-bootstrap', 0.3, 4, 8)]
    assert lines == [
        '| interval (95% asked) | 3 trials | 12 trials |',
        '|---|---:|---:|',
        '| paired, order statistics (decides) | 0.3% | 1.2% |',
        "| one arm's median, order statistics (medians table) | 10.3% | 11.2% |",
        '| unpaired bootstrap of median / median (second reading) | 20.3% | 21.2% |',
        '| paired percentile bootstrap (not used) | 30.3% | 31.2% |']


def test_coverage_table_defaults(monkeypatch):
    calls = []

    def fake(ns, method, spread, seed, reps):
        calls.append((ns, spread, seed, reps))
        return {n: 0.5 for n in ns}
    monkeypatch.setattr(D, 'interval_coverage', fake)
    lines = D.coverage_table()
    assert calls == [((3, 5, 6, 8, 10), 0.2, 0, 20000)] * 2 + [((3, 5, 6, 8, 10), 0.2, 0,
                                                                5000)] * 2
    assert lines[0] == ('| interval (95% asked) | 3 trials | 5 trials | 6 trials | 8 trials '
                        '| 10 trials |')
    assert lines[1] == '|---|---:|---:|---:|---:|---:|'
    assert lines[2] == '| paired, order statistics (decides) |' + ' 50.0% |' * 5


def test_power_table_prints_supported_and_refuted_shares(monkeypatch):
    calls = []

    def fake(n, spread, world, correlation, reps, seed):
        calls.append((n, spread, world, correlation, reps, seed))
        return {'first claim': (n / 10, 0.0), 'second claim': (0.5, n / 20)}
    monkeypatch.setattr(D, 'claim_power', fake)
    world = {'bsp': 2.0, 'asp': 1.0}
    lines = D.power_table(ns=(4, 7), spread=0.3, correlation=0.25, world=world, reps=11,
                          seed=6)
    assert calls == [(4, 0.3, world, 0.25, 11, 6), (7, 0.3, world, 0.25, 11, 6)]
    assert lines == ['| claim | 4 trials | 7 trials |',
                     '|---|---:|---:|',
                     '| first claim | 40% | 70% |',
                     '| second claim | 50% (20.0% refuted) | 50% (35.0% refuted) |']


def test_power_table_defaults(monkeypatch):
    calls = []

    def fake(n, spread, world, correlation, reps, seed):
        calls.append((n, spread, world, correlation, reps, seed))
        return {'c': (1.0, 0.0)}
    monkeypatch.setattr(D, 'claim_power', fake)
    lines = D.power_table()
    assert calls == [(n, 0.2, None, 0.0, 1000, 0) for n in (5, 6, 8, 10)]
    assert lines == ['| claim | 5 trials | 6 trials | 8 trials | 10 trials |',
                     '|---|---:|---:|---:|---:|', '| c | 100% | 100% | 100% | 100% |']


# ---------------------------------------------------------------------------
# the simulations' wiring: what each draws, which procedure it applies, what it counts

class _Iv:
    def __init__(self, low, high):
        self.low, self.high = low, high


def test_interval_coverage_defaults(monkeypatch):
    # the defaults: 4000 experiments at each of 3, 5, 6, 8, 10 trials, arms with medians 1.2
    # and 1, spread 0.2, no correlation, seed 0, the paired interval at 95%; a bound at the
    # truth (1.2) covers it, so alternate intervals [1.2, 1.2] and [1.3, 2] cover half
    draws, levels = [], []
    arrays = {}

    def draw(rng, medians, n, spread, correlation):
        if not draws:
            assert rng.bit_generator.state == np.random.default_rng(0).bit_generator.state
        draws.append((tuple(sorted(medians.items())), n, spread, correlation))
        if n not in arrays:
            arrays[n] = {arm: np.full(n, m) for arm, m in medians.items()}
        return arrays[n]

    def paired_ratio(a, b, level):
        levels.append(level)
        if len(levels) % 4000 == 1:
            assert a == {k: 1.2 for k in range(len(a))}
            assert b == {k: 1.0 for k in range(len(b))}
        return _Iv(1.2, 1.2) if len(levels) % 2 else _Iv(1.3, 2.0)
    monkeypatch.setattr(D, 'draw_times', draw)
    monkeypatch.setattr(D, 'paired_ratio', paired_ratio)
    assert D.interval_coverage() == {3: 0.5, 5: 0.5, 6: 0.5, 8: 0.5, 10: 0.5}
    assert [d[1] for d in draws[::4000]] == [3, 5, 6, 8, 10] and len(draws) == 20000
    assert set(d[:1] + d[2:] for d in draws) == {((('a', 1.2), ('b', 1.0)), 0.2, 0.0)}
    assert set(levels) == {0.95}


def test_interval_coverage_passes_its_settings_to_each_procedure(monkeypatch):
    a, b = np.array([2.0, 3.0, 8.0]), np.array([1.0, 2.0, 4.0])
    draws, calls = [], []

    def draw(rng, medians, n, spread, correlation):
        draws.append((medians, n, spread, correlation))
        return {'a': a, 'b': b}

    def bootstrap(x, y, rng, level):
        calls.append((list(x), None if y is None else list(y), level))
        return (1.0, 2.0)                        # covers 2, the truth, at its upper bound

    def median_interval(x, level):
        calls.append((list(x), level))
        return _Iv(2.5, 3.0)                     # misses 2
    monkeypatch.setattr(D, 'draw_times', draw)
    monkeypatch.setattr(D, '_bootstrap', bootstrap)
    monkeypatch.setattr(D, 'median_interval', median_interval)
    kw = dict(spread=0.4, ratio=2.0, correlation=0.3, reps=2, seed=1, level=0.8)
    assert D.interval_coverage((3,), 'unpaired-bootstrap', **kw) == {3: 1.0}
    assert calls == [([2.0, 3.0, 8.0], [1.0, 2.0, 4.0], 0.8)] * 2
    del calls[:]
    assert D.interval_coverage((3,), 'paired-bootstrap', **kw) == {3: 1.0}
    assert calls == [([2.0, 1.5, 2.0], None, 0.8)] * 2           # the per-seed ratios
    del calls[:]
    assert D.interval_coverage((3,), 'median', **kw) == {3: 0.0}
    assert calls == [([2.0, 3.0, 8.0], 0.8)] * 2
    assert draws == [({'a': 2.0, 'b': 1.0}, 3, 0.4, 0.3)] * 6


def test_interval_coverage_counts_a_bound_at_the_truth_as_covering():
    # no spread: every interval is [ratio, ratio]
    for method in D.METHODS:
        assert D.interval_coverage((6,), method, spread=0.0, ratio=1.7, reps=2) == {6: 1.0}
    assert D.interval_coverage((3,), 'paired', spread=0.0, ratio=0.6, reps=3) == {3: 1.0}


def test_interval_coverage_at_another_level():
    # 6 trials at 75%: the 2nd to 5th order statistic, coverage 1 - 2 (1 + 6) / 64 = 78.1%
    reps = 800
    got = D.interval_coverage((6,), 'paired', spread=0.2, reps=reps, seed=11, level=0.75)
    assert _near(got[6], 50 / 64, reps)
    got = D.interval_coverage((6,), 'median', spread=0.2, reps=reps, seed=11, level=0.75)
    assert _near(got[6], 50 / 64, reps)


def test_interval_coverage_rejects_an_unknown_method_naming_the_accepted_ones():
    with pytest.raises(ValueError) as err:
        D.interval_coverage((6,), 'bootstrap', reps=1)
    assert str(err.value) == ("method 'bootstrap' is not one of paired, median, "
                              'unpaired-bootstrap, paired-bootstrap')


def test_bootstrap_of_constant_values_is_that_value():
    rng = np.random.default_rng(0)
    assert D._bootstrap(np.full(5, 3.0), None, rng, 0.95) == (3.0, 3.0)
    assert D._bootstrap(np.full(5, 3.0), np.full(4, 2.0), rng, 0.95) == (1.5, 1.5)


def test_bootstrap_of_a_ratio_narrows_with_the_level():
    a, b = np.array([1.0, 2.0, 3.0, 4.0, 50.0]), np.array([10.0, 20.0, 40.0, 80.0])
    narrow = D._bootstrap(a, b, np.random.default_rng(3), 0.2)
    wide = D._bootstrap(a, b, np.random.default_rng(3), 0.99)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1]
    assert wide[1] - wide[0] > 2 * (narrow[1] - narrow[0])


def test_bootstrap_intervals_lie_between_the_extreme_values():
    rng = np.random.default_rng(3)
    a, b = np.array([1.0, 2.0, 3.0, 4.0, 50.0]), np.array([10.0, 20.0, 40.0])
    low, high = D._bootstrap(a, None, rng, 0.95)
    assert 1.0 <= low < 3.0 < high <= 50.0
    low, high = D._bootstrap(a, b, rng, 0.95)
    assert 1 / 40 <= low < 2 / 20 < 4 / 20 <= high <= 50 / 10
    # a lower level narrows it
    narrow = D._bootstrap(a, None, np.random.default_rng(3), 0.2)
    wide = D._bootstrap(a, None, np.random.default_rng(3), 0.99)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1] and wide[1] - wide[0] > narrow[1] - narrow[0]


def test_synthetic_rows_give_each_trial_its_seed_time_and_accuracy():
    from mxnet_ssp.lab.cluster_model.arms import parse_arm
    rows = D._synthetic_rows({'bsp': np.array([3.0, 4.5]), 'ssp3': [2]},
                             {'bsp': np.array([0.9, 0.91]), 'ssp3': [1]})
    assert rows == [
        {'arm': parse_arm('bsp'), 'trials': [
            {'status': 'ok', 'trial': 1, 'seed': 1, 'curve': [(0.0, 0.0), (3.0, 1.0)],
             'final_accuracy': 0.9},
            {'status': 'ok', 'trial': 2, 'seed': 2, 'curve': [(0.0, 0.0), (4.5, 1.0)],
             'final_accuracy': 0.91}]},
        {'arm': parse_arm('ssp3'), 'trials': [
            {'status': 'ok', 'trial': 1, 'seed': 1, 'curve': [(0.0, 0.0), (2.0, 1.0)],
             'final_accuracy': 1.0}]}]
    trial = rows[1]['trials'][0]
    assert type(trial['curve'][1][0]) is float and type(trial['final_accuracy']) is float


def test_claim_power_defaults_and_tally(monkeypatch):
    # the defaults: 400 labs of PAPER_WORLD, spread 0.2, no correlation, seed 0, accuracies
    # 0.94 + N(0, 0.003); the verdicts at a target every synthetic curve reaches, without the
    # unpaired reading; claims keyed by their text before ' ('
    real_draw = D.draw_times
    draws, accuracies, labs = [], [], []

    def draw(rng, medians, n, spread, correlation):
        if not draws:
            assert rng.bit_generator.state == np.random.default_rng(0).bit_generator.state
        draws.append((medians, n, spread, correlation))
        return real_draw(rng, medians, n, spread, correlation)

    def verdicts(rows, target, unpaired=True):
        labs.append(len(labs))
        assert 0 < target <= 1 and unpaired is False
        assert sorted(r['arm'].name for r in rows) == sorted(D.PAPER_WORLD)
        accuracies.extend(t['final_accuracy'] for r in rows for t in r['trials'])
        verdict = D.SUPPORTED if len(labs) % 4 else D.REFUTED
        return [types.SimpleNamespace(claim='one (a) (b)', verdict=verdict),
                types.SimpleNamespace(claim='two', verdict=D.INCONCLUSIVE)]
    monkeypatch.setattr(D, 'draw_times', draw)
    monkeypatch.setattr(D, 'verdicts', verdicts)
    assert D.claim_power(3) == {'one': (0.75, 0.25), 'two': (0.0, 0.0)}
    assert len(draws) == 400 and all(d == (D.PAPER_WORLD, 3, 0.2, 0.0) for d in draws)
    assert len(accuracies) == 400 * 6 * 3
    assert np.mean(accuracies) == pytest.approx(0.94, abs=4 * 0.003 / math.sqrt(7200))
    assert np.std(accuracies) == pytest.approx(0.003, rel=0.05)


def test_claim_power_passes_its_settings(monkeypatch):
    draws = []
    real_draw = D.draw_times

    def draw(rng, medians, n, spread, correlation):
        draws.append((medians, n, spread, correlation))
        return real_draw(rng, medians, n, spread, correlation)
    monkeypatch.setattr(D, 'draw_times', draw)
    world = dict(D.LARGE_WORLD)
    got = D.claim_power(6, spread=0.1, world=world, correlation=0.6, reps=2, seed=3)
    assert draws == [(world, 6, 0.1, 0.6)] * 2
    assert set(got) == set(D.claim_power(6, spread=0.0, reps=1))
    # the accuracy spread enters: 0.5 points of noise on 6 trials decides the accuracy
    # claim less often than none
    calm = D.claim_power(6, spread=0.0, accuracy_spread=0.0, reps=20)
    noisy = D.claim_power(6, spread=0.0, accuracy_spread=0.02, reps=20)
    assert calm["DSSP's final accuracy >= ASP's"] == (1.0, 0.0)
    assert noisy["DSSP's final accuracy >= ASP's"][0] < 0.5


def test_measured_spread_pools_arms_and_skips_pairs_it_cannot_correlate():
    e = math.e
    times = {'a': {1: 1.0, 2: e, 3: e * e},                 # log 0, 1, 2
             'b': {1: 3.0, 2: 3 * e, 3: 3 * e * e},         # the same order: correlation 1
             'c': {1: 5.0, 2: 5.0, 3: 5.0}}                 # no variation: no correlation
    spread, correlation, n = D.measured_spread(times)
    assert spread == pytest.approx(math.sqrt((2 + 2 + 0) / (2 + 2 + 2)))
    assert correlation == pytest.approx(1.0) and n == 9
    # d shares only two seeds with a and b (where it runs against them): left out
    times = {'a': times['a'], 'b': times['b'], 'd': {1: e * e, 2: 1.0, 9: 4.0}}
    assert D.measured_spread(times)[1] == pytest.approx(1.0)
    # two arms of two times each: a spread, but no pair to correlate
    spread, correlation, n = D.measured_spread({'a': {1: 1.0, 2: e}, 'b': {1: e, 2: 1.0}})
    assert spread == pytest.approx(math.sqrt(0.5)) and correlation == 0.0 and n == 4


def test_draw_times_follows_the_documented_formula():
    # log t = log median + spread (sqrt(c) z + sqrt(1 - c) e): z drawn first (shared by the
    # seeds' arms), then each arm's own e in the order of `medians`
    c, spread = 0.36, 0.5
    t = D.draw_times(np.random.default_rng(5), {'a': 2.0, 'b': 7.0}, 4, spread, c)
    rng = np.random.default_rng(5)
    z, e_a, e_b = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4)
    assert np.allclose(np.log(t['a']), math.log(2.0) + spread * (0.6 * z + 0.8 * e_a))
    assert np.allclose(np.log(t['b']), math.log(7.0) + spread * (0.6 * z + 0.8 * e_b))


def test_claim_power_draws_accuracies_as_documented(monkeypatch):
    # with times that use no randomness, each arm's accuracies are 0.94 plus accuracy_spread
    # times the generator's next n standard normals, arm after arm in the world's order
    world = {'bsp': 2.0, 'asp': 1.0, 'dssp': 1.0}
    got = []
    monkeypatch.setattr(D, 'draw_times',
                        lambda rng, medians, n, spread, correlation:
                        {arm: np.full(n, m) for arm, m in medians.items()})
    monkeypatch.setattr(D, 'verdicts', lambda rows, target, unpaired: got.append(
        {r['arm'].name: [t['final_accuracy'] for t in r['trials']] for r in rows}) or [])
    assert D.claim_power(3, world=world, accuracy_spread=0.01, reps=1, seed=8) == {}
    rng = np.random.default_rng(8)
    for arm in world:
        assert got[0][arm] == pytest.approx(list(0.94 + 0.01 * rng.standard_normal(3)))


def test_lab_times_leaves_out_a_time_of_zero(tmp_path):
    # a trial at the target at its first evaluation, at 0 s, has no log time: left out
    results = _lab({'bsp': {1: 2.0, 2: 5.0}})
    results['arms'][0]['trials'].append({'seed': 3, 'status': 'ok', 'curve': [[0.0, 0.95]]})
    assert D.lab_times(results, 0.9) == {'bsp': {1: 2.0, 2: 5.0}}


def test_measured_spread_skips_only_the_pairs_it_cannot_correlate():
    e = math.e
    a = {1: 1.0, 2: e, 3: e * e}
    # b shares one seed with a and c, then c correlates with a: 1
    times = {'a': a, 'b': {1: 4.0, 9: 5.0}, 'c': {k: 3 * t for k, t in a.items()}}
    assert D.measured_spread(times)[1] == pytest.approx(1.0)
    # b is constant where it meets a and c: left out, a and c still count
    times['b'] = {1: 4.0, 2: 4.0, 3: 4.0}
    assert D.measured_spread(times)[1] == pytest.approx(1.0)
    # an arm whose log times have sd exactly 1 varies: a with sd 1, b the same order
    times = {'a': {1: 1 / e, 2: 1 / e, 3: e, 4: e}, 'b': {1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0}}
    assert D.measured_spread(times)[1] == pytest.approx(1.0)


def test_measured_spread_without_a_pair_to_correlate_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert D.measured_spread({'a': {1: 1.0, 2: 2.0}, 'b': {3: 1.0, 4: 2.0}})[1] == 0.0


def test_measured_spread_says_why_it_cannot_measure():
    with pytest.raises(ValueError) as err:
        D.measured_spread({'a': {1: 3.0}, 'b': {}})
    assert str(err.value) == 'no arm has two times to the target: no spread can be measured'
