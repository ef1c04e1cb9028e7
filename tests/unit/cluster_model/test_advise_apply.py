"""mxnet-ssp-advise's answer for every paradigm it compares (mxnet_ssp.lab.cluster_model.advise):
the error each is charged, how to apply it (the lines printed), and a cluster given as data
(fit_cluster, Fit.scenario, the description line).  Pure: no simulation."""
import pytest

from mxnet_ssp.lab.cluster_model import advise
from mxnet_ssp.lab.cluster_model.arms import parse_arm
from mxnet_ssp.lab.cluster_model.profiles import get_scenario
from mxnet_ssp.lab.cluster_model.time_to_target import StalenessCost


def store(kv):
    return ("- store: kvstore='%s' (gluon.Trainer(..., kvstore='%s') after `import mxnet_ssp`, "
            'or mxnet-ssp-train --kvstore %s)' % (kv, kv, kv))


def settings(values):
    return ("- settings: %s in the job's environment (or its settings file), e.g. `%s "
            'mxnet-ssp-launch -n W ...`' % (values, values))


BSP_NOTE = ("- BSP: --sync-average applies the mean of the workers' gradients (keep the "
            'per-gradient learning rate: W x the single-worker rate)')
BALANCE_NOTE = ('- batch balancing needs --balance (mxnet-ssp-train; docs/balance.md); its gain '
                'is charged 20% here, the error measured in docs/lab.md')


@pytest.mark.parametrize('label,lines', [
    ('BSP', [store('dist_sync'), '- settings: none',
             '- mxnet-ssp-train flags: --kvstore dist_sync --sync-average', BSP_NOTE]),
    ('ASP', [store('dist_async'), '- settings: none',
             '- mxnet-ssp-train flags: --kvstore dist_async']),
    ('SSP s=6', [store('dist_ssp'), settings('MXNET_SSP_STALENESS=6'),
                 '- mxnet-ssp-train flags: --kvstore dist_ssp --staleness 6']),
    ('DSSP [3,15] threshold', [
        store('dist_dssp'), settings('MXNET_SSP_STALENESS=3,15 MXNET_SSP_DSSP_MODE=threshold'),
        '- mxnet-ssp-train flags: --kvstore dist_dssp --staleness 3,15 --dssp-mode threshold']),
    ('BSP + balance', [store('dist_sync'), '- settings: none',
                       '- mxnet-ssp-train flags: --kvstore dist_sync --sync-average --balance',
                       BSP_NOTE, BALANCE_NOTE]),
    ('SSP s=3 + balance', [store('dist_ssp'), settings('MXNET_SSP_STALENESS=3'),
                           '- mxnet-ssp-train flags: --kvstore dist_ssp --staleness 3 --balance',
                           BALANCE_NOTE]),
])
def test_apply_text_lines(label, lines):
    assert advise.apply_text(advise.ARM_OF[label]) == ['How to apply it:'] + lines


def test_apply_text_of_a_dssp_arm_with_its_own_thresholds():
    lines = advise.apply_text(parse_arm('dssp2-10'))
    assert lines[2] == settings('MXNET_SSP_STALENESS=2,10 MXNET_SSP_DSSP_MODE=bounded')


@pytest.mark.parametrize('name,error', [
    ('bsp', 0.05), ('asp', 0.0), ('ssp1', 0.035), ('ssp15', 0.035), ('dssp', 0.03),
    ('dssp-paper', 0.28), ('dssp-threshold', 0.28), ('dssp2-10', 0.03),
    ('bsp-balance', 1 - 0.95 * 0.8), ('asp-balance', 0.2), ('ssp3-balance', 1 - 0.965 * 0.8),
    ('dssp-paper-balance', 1 - 0.72 * 0.8),
])
def test_charged_error_of_each_arm(name, error):
    assert advise.charged_error(parse_arm(name)) == pytest.approx(error, abs=1e-12)


def test_an_arm_without_a_measured_error_is_charged_the_largest():
    unknown = parse_arm('asp')
    unknown = type(unknown)('x', 'hogwild', 'dist_async')
    assert advise.charged_error(unknown) == 0.28


def test_advised_paradigms_are_the_arms_in_order_with_their_policies():
    assert advise.ADVISED == (
        ('BSP', 'ssp:0', False), ('ASP', 'asp', False), ('SSP s=1', 'ssp:1', False),
        ('SSP s=2', 'ssp:2', False), ('SSP s=3', 'ssp:3', False), ('SSP s=6', 'ssp:6', False),
        ('SSP s=15', 'ssp:15', False), ('DSSP [3,15]', 'dssp:3:15:bounded', False),
        ('DSSP [3,15] paper', 'dssp:3:15:paper', False),
        ('DSSP [3,15] threshold', 'dssp:3:15:threshold', False),
        ('BSP + balance', 'ssp:0', True), ('SSP s=3 + balance', 'ssp:3', True))
    assert sorted(advise.ARM_OF) == sorted(label for label, _, _ in advise.ADVISED)


# -- a cluster given as data -----------------------------------------------------------------

SPEC = ('workers=3,base_ms=20,factors=1:1.5:4,jitter=5%,episode_rate=0.02,episode_factor=5,'
        'episode_length=5-15')


def test_fit_cluster_keeps_the_cluster_its_times_jitter_and_episodes():
    sc = get_scenario(SPEC)
    fit = advise.fit_cluster(sc, 0.004)
    assert fit.source == 'cluster' and fit.cluster is sc
    assert fit.compute_s == pytest.approx([0.02, 0.03, 0.08])
    assert fit.jitter == 0.05 and fit.overhead_s == 0.004
    assert fit.iterations == [] and fit.slow_share == 0.0 and fit.step_samples == []
    ep = fit.episodes
    assert (ep.rate, ep.factor, ep.length, ep.count) == (0.02, 5.0, (5, 15), 0)


def test_fit_cluster_without_episodes_and_the_default_overhead():
    fit = advise.fit_cluster(get_scenario('workers=2,base_ms=10'))
    assert fit.overhead_s == advise.CLUSTER_OVERHEAD_S == 0.003
    ep = fit.episodes
    assert not ep and (ep.rate, ep.factor, ep.length, ep.count) == (0.0, 1.0, (0, 0), 0)


def test_the_scenario_of_a_cluster_is_the_cluster_with_the_fitted_times():
    sc = get_scenario(SPEC)
    fit = advise.fit_cluster(sc)
    assert fit.scenario() == sc
    balanced = fit.scenario(balanced=True)
    harmonic = 3 / (1 / 0.02 + 1 / 0.03 + 1 / 0.08)
    assert balanced.base_s == pytest.approx(harmonic) and balanced.slow == ()
    assert (balanced.name, balanced.jitter, balanced.episode_rate, balanced.episode_factor,
            balanced.episode_length) == (sc.name, 0.05, 0.02, 5.0, (5, 15))


def test_the_scenario_of_a_fit_carries_its_episodes():
    from mxnet_ssp.lab.cluster_model.episodes import Episodes
    fit = advise.Fit('train log', [0.01, 0.02], 0.1, 0.001, [30, 30], 0.0, [0.001],
                     Episodes(0.01, 4.0, [3, 9], 5))
    sc = fit.scenario()
    assert (sc.name, sc.description, sc.workers, sc.base_s, sc.slow) == (
        'fitted', 'fitted from a run', 2, 0.01, ((1, 2.0),))
    assert (sc.jitter, sc.episode_rate, sc.episode_factor, sc.episode_length) == (
        0.1, 0.01, 4.0, (3, 9))
    plain = advise.Fit('train log', [0.01, 0.02], 0.1, 0.001, [30, 30], 0.0, [0.001])
    sc = plain.scenario(name='other')
    assert sc.name == 'other'
    assert (sc.episode_rate, sc.episode_factor, sc.episode_length) == (0.0, 1.0, (0, 0))


def test_the_description_of_a_cluster_as_data():
    fit = advise.fit_cluster(get_scenario('workers=2,base_ms=10,factors=1:2'), 0.0025)
    assert advise._describe_fit('cluster custom', fit) == [
        'cluster custom: 2 workers (2 workers, base 10 ms, worker 1 x2, jitter 0%), the '
        'cluster as given; step overhead 2.5 ms per iteration (assumed; --overhead-ms)']


def test_the_description_of_a_run_with_episodes():
    from mxnet_ssp.lab.cluster_model.episodes import Episodes
    fit = advise.Fit('train log', [0.0123, 0.0456], 0.123, 0.0021, [30, 31], 0.0, [0.002],
                     Episodes(0.0123, 4.56, (3, 9), 5))
    assert advise._describe_fit('RUN', fit) == [
        'RUN: 2 workers, train log, 30/31 iterations per worker fitted',
        'compute per iteration (median outside slow episodes): 12.3, 45.6 ms; jitter 12%; '
        'step overhead 2.1 ms per iteration',
        'slow episodes: 5 seen, x4.6 for 3-9 iterations, started with probability 0.012 per '
        'iteration (simulated)']


# -- main with --cluster: what reaches the prediction, and the refusals ----------------------

class Predicted:
    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr(advise, 'predict', self.predict)

        monkeypatch.setattr(advise, 'load_cost', lambda: COST)

    def predict(self, fit, wall_time, seeds, target=None):
        self.calls.append((fit, wall_time, seeds))
        assert target == (COST.updates0, COST.cost)
        # ASP: 4 s to the target, BSP 8 s: the intervals (x0.8 - x1.25) do not overlap
        return [advise.Prediction('ASP', 'asp', False, 10.0, (9.0, 11.0), 0.0, 1.0, 2, 1.0, 2,
                                  0.0, (9.0, 11.0), (1.0, 1.0), (3.9, 4.1), (True, True)),
                advise.Prediction('BSP', 'ssp:0', False, 5.0, (5.0, 5.0), 0.5, 0.0, 0, 0.0, 0,
                                  0.05, (5.0, 5.0), (0.0, 0.0), (8.0, 8.0), (True, True))]


COST = StalenessCost(0.92, 'sustained', 40.0, 0.25, 0.8, 1.25, 12)


@pytest.mark.parametrize('argv,overhead', [
    ([], 0.003), (['--overhead-ms', '0'], 0.0), (['--overhead-ms', '60000'], 60.0),
    (['--overhead-ms', '12.5'], 0.0125),
])
def test_main_cluster_overhead_reaches_the_fit(monkeypatch, capsys, argv, overhead):
    rec = Predicted(monkeypatch)
    assert advise.main(['--cluster', 'workers=2,base_ms=10,factors=1:2', '--wall-time', '3']
                       + argv) == 0
    (fit, wall_time, seeds), = rec.calls
    assert fit.overhead_s == pytest.approx(overhead) and fit.source == 'cluster'
    assert fit.compute_s == pytest.approx([0.01, 0.02]) and (wall_time, seeds) == (3.0, 10)
    out, err = capsys.readouterr()
    assert err == '' and out.split('\n')[0] == (
        'cluster custom: 2 workers (2 workers, base 10 ms, worker 1 x2, jitter 0%%), the cluster '
        'as given; step overhead %.1f ms per iteration (assumed; --overhead-ms)' % (1e3 * overhead))
    assert '| ASP (recommended) | 4.0 [3.1-5.1] | 3.9-4.1 | 10.0 [9.0-11.0] |' in out
    assert 'Recommended: ASP, the fastest to the target' in out


def test_main_cluster_by_name(monkeypatch, capsys):
    rec = Predicted(monkeypatch)
    assert advise.main(['--cluster', 'mixed-4', '--seeds', '2']) == 0
    (fit, wall_time, seeds), = rec.calls
    assert fit.cluster.name == 'mixed-4' and seeds == 2
    assert wall_time == advise.default_wall_time(fit) == pytest.approx(2000 * (0.06 + 0.003))
    assert capsys.readouterr().out.startswith('cluster mixed-4: 4 workers (4 workers, base 20 ms')


@pytest.mark.parametrize('argv,message', [
    (['--cluster', 'mixed-4', '--overhead-ms', '60000.5'],
     '--overhead-ms 60000.5 is not valid: expected milliseconds in [0, 60000], with --cluster'),
    (['--cluster', 'mixed-4', '--overhead-ms', '-0.001'],
     '--overhead-ms -0.001 is not valid: expected milliseconds in [0, 60000], with --cluster'),
    (['--cluster', 'mixed-4', '--overhead-ms', 'nan'],
     '--overhead-ms nan is not valid: expected milliseconds in [0, 60000], with --cluster'),
    (['--cluster', 'mixed-4', '--overhead-ms', 'inf'],
     '--overhead-ms inf is not valid: expected milliseconds in [0, 60000], with --cluster'),
    (['run', '--overhead-ms', '2'],
     '--overhead-ms 2.0 is not valid: expected milliseconds in [0, 60000], with --cluster'),
    (['--check-lab', '--cluster', 'mixed-4'],
     '--check-lab reads a lab scenario directory: give it as RUN_DIR'),
    (['--cluster', 'nosuch'], "--cluster: emulated scenario 'nosuch' is not known: expected "
                              'one of mixed-2, mixed-4, straggler-8, transient-8, jitter-8, '
                              'transient-4, link-4, a spec such as workers=4,base_ms=15,factors=1:1.3:'
                              '1.8:3,jitter=10% (keys: name, workers, base_ms, factors, jitter, '
                              'episode_rate, episode_factor, episode_length, links, pin, run_iterations, description), '
                              'or a '
                              '.json or .toml file with those keys'),
    ([], "give RUN_DIR (a run's metrics) or --cluster SPEC|FILE (the cluster as data), one of "
         'them'),
    (['run', '--cluster', 'mixed-4'], "give RUN_DIR (a run's metrics) or --cluster SPEC|FILE "
                                      '(the cluster as data), one of them'),
])
def test_main_cluster_refusals(monkeypatch, capsys, argv, message):
    rec = Predicted(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        advise.main(argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == '' and err.split('\n')[-2] == 'mxnet-ssp-advise: error: ' + message
    assert rec.calls == []


def test_the_charged_error_column_rounds_to_a_whole_percent():
    fit = advise.Fit('store metrics', [0.35, 1.2], 0.6, 0.25, [21, 23], 0.0, [0.25])
    asp = advise.Prediction('ASP', 'asp', False, 4.0, (3.5, 4.5), 0.0, 1.5, 4, 1.0, 2, 0.0)
    odd = advise.Prediction('SSP s=1', 'ssp:1', False, 8.0, (8.0, 8.0), 0.2, 0.5, 1, 0.5, 1, 0.6)
    lines = advise.format_advice('RUN', fit, [asp, odd], asp).split('\n')
    # 8.0 x (1 - 0.6) = 3.2 charged, 0.80 of ASP's 4.0
    assert lines[7] == '| SSP s=1 | 8.0 [8.0-8.0] | 60% | 0.80 | 20% | 0.50 / 1 | 0.50 / 1 |'


# -- format_advice: every line of the answer -------------------------------------------------

def closing(step):
    return ('Simulated over a fixed wall time with the compute times above (and the slow '
            'episodes, when there are) plus, every iteration, a step time STEP. "charged error": '
            "the simulator's error measured for that paradigm against the lab (docs/lab.md, "
            '"Advice"), taken off its throughput; "+ balance" models ideal balancing and is '
            'charged 20% more. Lead at release: how far ahead of the slowest a worker is '
            'released (what SSP bounds); gradient staleness: updates by others between a '
            "gradient's pull and its push (what the model sees). What this cannot know: how "
            'much accuracy per update staleness costs your model; slow episodes the run did '
            'not show; how the overhead grows with more workers or servers.').replace('STEP', step)


HEAD = ('| paradigm | iterations/s (all workers) | charged error | charged / best | fastest '
        'workers waiting | lead at release: mean / p95 | gradient staleness: mean / p95 |')


def test_format_advice_in_full_without_staleness_columns_or_step_samples():
    # no step samples: a fixed step time; no gradient staleness measured: '-' and the lead
    # stands in for it; 'custom' is no advised arm: the most complex, no way to apply it
    fit = advise.Fit('store metrics', [0.35, 1.2], 0.6, 0.25, [21, 23], 0.0, [])
    asp = advise.Prediction('ASP', 'asp', False, 4.0, (3.5, 4.5), 0.0, 1.5, 4, None, None)
    custom = advise.Prediction('custom', 'ssp:2', False, 4.1, (4.0, 4.2), 0.1, 0.5, 1, None,
                               None)
    choice = advise.recommend([asp, custom])
    assert choice is asp
    assert advise.format_advice('RUN', fit, [asp, custom], choice).split('\n') == [
        'RUN: 2 workers, store metrics, 21/23 iterations per worker fitted',
        'compute per iteration (median outside slow episodes): 350.0, 1200.0 ms; jitter 60%; '
        'step overhead 250.0 ms per iteration',
        "no slow episodes (runs of 2+ iterations over 2x their worker's median)",
        '', HEAD, '|---|---:|---:|---:|---:|---:|---:|',
        '| ASP (recommended) | 4.0 [3.5-4.5] | 0% | 0.98 | 0% | 1.50 / 4 | - |',
        '| custom | 4.1 [4.0-4.2] | 0% | 1.00 | 10% | 0.50 / 1 | - |',
        '',
        'Recommended: ASP. Inside the decision window (charged throughput within 10% of the '
        'best, 4.1 iterations/s: ASP, custom) the simplest paradigm wins (ASP/BSP, then SSP, '
        'then DSSP; no balancing before balancing), then the least stale: a gain smaller than '
        "the simulator's error is not claimed.",
        'If staleness costs your model accuracy (this cannot be known from timings): custom, '
        'the least stale inside the window (gradient staleness 0.50 against 1.50).',
        '',
        'How to apply it:', store('dist_async'), '- settings: none',
        '- mxnet-ssp-train flags: --kvstore dist_async',
        '',
        closing('of 250.0 ms')]


def test_format_advice_in_full_for_a_choice_that_is_no_arm_with_step_samples():
    fit = advise.Fit('train log', [0.0125], 0.05, 0.002, [40], 0.5, [0.002, 0.003])
    custom = advise.Prediction('custom', 'ssp:2', False, 80.0, (79.0, 81.0), 0.25, 0.5, 1, 0.75,
                               2)
    assert advise.format_advice('R', fit, [custom], custom).split('\n') == [
        'R: 1 workers, train log, 40 iterations per worker fitted',
        'compute per iteration (median outside slow episodes): 12.5 ms; jitter 5%; '
        'step overhead 2.0 ms per iteration',
        "no slow episodes (runs of 2+ iterations over 2x their worker's median)",
        '', HEAD, '|---|---:|---:|---:|---:|---:|---:|',
        '| custom (recommended) | 80.0 [79.0-81.0] | 0% | 1.00 | 25% | 0.50 / 1 | 0.75 / 2 |',
        '',
        'Recommended: custom. Inside the decision window (charged throughput within 10% of the '
        'best, 80.0 iterations/s: custom) the simplest paradigm wins (ASP/BSP, then SSP, '
        'then DSSP; no balancing before balancing), then the least stale: a gain smaller than '
        "the simulator's error is not claimed.",
        '', '',
        closing('drawn from those of the worker that waited least').replace(
            'did not show;', "did not show (50.0% of its iterations took over twice their "
                             "worker's median);")]


# -- least_stale, and the command's own description ------------------------------------------

def P(label, throughput, stale, error=0.0):
    return advise.Prediction(label, '', label.endswith('balance'), throughput,
                             (throughput, throughput), 0.0, stale, 0, stale, 0, error)


def test_least_stale_is_none_when_it_is_the_recommendation():
    rows = [P('BSP', 100.0, 0.0), P('ASP', 100.0, 2.0)]
    assert advise.recommend(rows).label == 'BSP' and advise.least_stale(rows) is None
    assert advise.least_stale([P('ASP', 100.0, 2.0)]) is None


def test_least_stale_uses_the_window_it_is_given():
    rows = [P('ASP', 100.0, 2.0), P('SSP s=3', 95.0, 1.0), P('BSP', 85.0, 0.0)]
    assert advise.least_stale(rows).label == 'SSP s=3'
    # a 20% window takes BSP in: it is also the recommendation then
    assert advise.recommend(rows, within=0.2).label == 'BSP'
    assert advise.least_stale(rows, within=0.2) is None
    # a 1% window leaves ASP alone
    assert advise.least_stale(rows, within=0.01) is None
    rows = [P('ASP', 100.0, 2.0), P('DSSP [3,15]', 85.0, 0.5), P('SSP s=3', 95.0, 1.0)]
    assert advise.least_stale(rows, within=0.2).label == 'DSSP [3,15]'


def test_least_stale_ties_go_to_the_simpler_then_the_faster():
    rows = [P('ASP', 100.0, 3.0), P('SSP s=2', 95.0, 1.0), P('SSP s=1', 97.0, 1.0),
            P('DSSP [3,15]', 99.0, 1.0)]
    assert advise.least_stale(rows).label == 'SSP s=1'


def test_help_describes_the_command_and_python_m_names_the_module(monkeypatch, capsys):
    monkeypatch.setattr('sys.argv', ['/somewhere/mxnet_ssp/lab/cluster_model/advise.py'])
    with pytest.raises(SystemExit) as stop:
        advise.main(['--help'])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: python -m mxnet_ssp.lab.cluster_model.advise [-h] [--version]')
    assert ("Which paradigm for this cluster: from a real run's metrics (RUN_DIR) or a "
            'description of the cluster (--cluster), simulate every paradigm over the same wall '
            'time, charge each its measured error, and recommend the simplest inside the '
            'decision window (docs/lab.md, "Advice").') in ' '.join(out.split())


def test_help_of_cluster_in_full(monkeypatch, capsys):
    monkeypatch.setenv('COLUMNS', '1000')     # one line per option: no long word broken
    with pytest.raises(SystemExit):
        advise.main(['--help'])
    flat = ' '.join(capsys.readouterr().out.split())
    assert ('--cluster SPEC|FILE instead of RUN_DIR: the cluster as data, as the lab reads it: a '
            'scenario name, a spec such as "workers=3,base_ms=50,factors=1:1:2,jitter=5%,'
            'episode_rate=0.01,episode_factor=5,episode_length=5-15", or a .json/.toml file of '
            'the same keys (docs/lab.md, "Your own cluster") ') in flat


def test_the_window_includes_its_edge():
    # (1 - 0.5) x 4.0 = 2.0 exactly: a prediction at the edge is inside
    rows = [P('ASP', 4.0, 2.0), P('BSP', 2.0, 0.0), P('SSP s=1', 1.999, 0.0)]
    assert [p.label for p in advise.window(rows, within=0.5)] == ['ASP', 'BSP']
    assert advise.recommend(rows, within=0.5).label == 'BSP'


def test_recommend_ties_in_simplicity_and_staleness_go_to_the_faster():
    rows = [P('SSP s=2', 95.0, 1.0), P('SSP s=1', 97.0, 1.0), P('SSP s=3', 100.0, 2.0)]
    assert advise.recommend(rows).label == 'SSP s=1'


def test_predict_reports_the_simulated_gradient_staleness():
    from mxnet_ssp.lab.cluster_model.simulate import simulate
    fit = advise.Fit('train log', [0.01, 0.025], 0.0, 0.001, [30, 30], 0.0, [0.001])
    (p,) = advise.predict(fit, wall_time=1.0, seeds=1, paradigms=(('ASP', 'asp', False),))
    r = simulate(None, 'asp', wall_time=1.0, scenario=advise._WithSteps(fit), seed=0)
    assert p.stale_mean == r.mean_staleness > 0
    assert p.stale_p95 == r.staleness_quantile(0.95) >= 1
    assert p.error == 0.0                   # 'ASP' is an advised arm, charged 0


def test_predict_p95_staleness_is_not_the_max_and_no_arm_is_charged_nothing():
    from mxnet_ssp.lab.cluster_model.simulate import simulate
    # a worker 30x slower: its few gradients are ~28 updates stale, 3 of 93
    fit = advise.Fit('train log', [0.01, 0.3], 0.0, 0.001, [30, 30], 0.0, [0.001])
    (p,) = advise.predict(fit, wall_time=1.0, seeds=1, paradigms=(('custom', 'asp', False),))
    r = simulate(None, 'asp', wall_time=1.0, scenario=advise._WithSteps(fit), seed=0)
    assert p.stale_p95 == r.staleness_quantile(0.95) == 1 < max(r.stale_hist) == 28
    assert p.error == 0.0
