"""The emulated-cluster lab without processes: the compute profiles (mxnet_ssp.lab.cluster_model.profiles),
the simulator on the same draws, the lab presets, and the verdicts on synthetic trials."""
import math
import statistics

import pytest

from mxnet_ssp.lab.reproduce import paired as P
from mxnet_ssp.lab.reproduce import verdicts as V
from mxnet_ssp.lab.reproduce.grid import run_command, resolve_grid
from mxnet_ssp.lab.cluster_model.arms import parse_arm, sim_policy
from mxnet_ssp.lab.reproduce.presets import LAB_ARMS, PRESETS
from mxnet_ssp.lab.cluster_model.profiles import SCENARIOS, Scenario, get_scenario
from mxnet_ssp.lab.cluster_model.simulate import simulate


def draws(scenario, rank, seed, n):
    stream = scenario.stream(rank, seed)
    return [stream.next() for _ in range(n)]


# --- profiles ---------------------------------------------------------------------------

def test_the_scenarios_of_the_issue():
    assert set(SCENARIOS) == {'mixed-2', 'mixed-4', 'straggler-8', 'transient-8', 'jitter-8',
                              'transient-4', 'link-4'}
    # stragglers that come and go, sized for 2 cores: 4 workers, 5x for 5-15 iterations
    transient = SCENARIOS['transient-4']
    assert (transient.workers, transient.episode_factor, transient.episode_length) == (
        4, 5.0, (5, 15))
    assert len(set(transient.times())) == 1
    mixed = SCENARIOS['mixed-2']
    assert mixed.workers == 2 and mixed.times()[1] == pytest.approx(2.5 * mixed.times()[0])
    four = SCENARIOS['mixed-4']       # the issue's example cluster, 1 : 1.3 : 1.8 : 3
    assert [t / four.times()[0] for t in four.times()] == pytest.approx([1, 1.3, 1.8, 3])
    assert four.jitter == 0.10 and four.workers == 4
    assert SCENARIOS['straggler-8'].times().count(max(SCENARIOS['straggler-8'].times())) == 1
    assert len(set(SCENARIOS['jitter-8'].times())) == 1


def test_a_stream_depends_only_on_scenario_seed_and_rank():
    sc = SCENARIOS['jitter-8']
    assert draws(sc, 3, 42, 50) == draws(sc, 3, 42, 50)
    assert draws(sc, 3, 42, 50) != draws(sc, 3, 43, 50)
    assert draws(sc, 3, 42, 50) != draws(sc, 4, 42, 50)


def test_jitter_has_the_stated_spread():
    sc = SCENARIOS['jitter-8']
    values = draws(sc, 0, 1, 4000)
    assert statistics.mean(values) == pytest.approx(sc.base_s, rel=0.03)
    assert statistics.pstdev(values) / sc.base_s == pytest.approx(0.30, rel=0.1)
    assert min(values) >= 0.05 * sc.base_s


def test_transient_episodes_are_4x_and_last_20_to_60_iterations():
    sc = SCENARIOS['transient-8']
    stream = sc.stream(5, 7)
    values, lengths, left = [], [], 0
    for _ in range(20000):
        values.append(stream.next())
        if stream.episode_left > left or (left == 0 and values[-1] > 2.5 * sc.base_s):
            lengths.append(stream.episode_left + 1)      # an episode started here
        left = stream.episode_left
    assert lengths, 'no episode in 20,000 iterations'
    assert all(20 <= n <= 60 for n in lengths)
    slow = [v for v in values if v > 2.5 * sc.base_s]   # 4x with 5% jitter vs 1x
    assert statistics.mean(slow) == pytest.approx(4 * sc.base_s, rel=0.05)
    assert len(slow) == sum(lengths) - stream.episode_left
    # P(start) 0.003 per iteration, 40 iterations on average: about 11% of the time slow
    assert 0.05 < len(slow) / len(values) < 0.2


def test_scale_multiplies_and_bad_input_is_named():
    sc = SCENARIOS['mixed-2']
    a, b = sc.stream(1, 0), sc.stream(1, 0)
    assert b.next(0.5) == pytest.approx(0.5 * a.next())
    with pytest.raises(ValueError, match=r"ranks 0\.\.1, not 2"):
        sc.stream(2, 0)
    with pytest.raises(ValueError, match='mixed-2, mixed-4, straggler-8'):
        get_scenario('mixed-3')


# --- the simulator on the same draws ------------------------------------------------------

def test_asp_in_the_simulator_finishes_each_worker_at_the_sum_of_its_draws():
    sc = SCENARIOS['transient-8']
    r = simulate(None, 'asp', iterations=200, scenario=sc, seed=9)
    finish = max(sum(draws(sc, rank, 9, 200)) for rank in range(sc.workers))
    assert r.iterations == [200] * 8
    assert r.wall_time == pytest.approx(finish)


def test_the_lab_check_predicts_asp_rates_from_the_draws_and_the_step_times():
    sc = SCENARIOS['mixed-2']
    spans = [sum(draws(sc, rank, 3, 100)) for rank in (0, 1)]
    total, share = V.simulated_rates(parse_arm('asp'), sc, 3, 100)
    assert total == pytest.approx(100 / spans[0] + 100 / spans[1]) and share == 0.0
    total, share = V.simulated_rates(parse_arm('asp'), sc, 3, 100, step_samples=[0.01])
    assert total == pytest.approx(100 / (spans[0] + 1.0) + 100 / (spans[1] + 1.0))
    assert share == pytest.approx(1.0 / (spans[0] + 1.0))        # rank 0 is the fast one
    total, share = V.simulated_rates(parse_arm('bsp'), sc, 3, 100, step_samples=[0.01])
    assert total == pytest.approx(200 / (spans[1] + 1.0), rel=0.02)   # paced by rank 1
    assert share > 0.5


@pytest.mark.parametrize('policy', ['asp', 'ssp:0', 'ssp:3', 'dssp:3:15:bounded',
                                    'dssp:3:15:paper', 'dssp:3:15:threshold'])
def test_a_scenario_without_jitter_is_the_plain_times(policy):
    sc = Scenario('flat', 'test', workers=3, base_s=1.0, slow=((2, 2.5),))
    assert (simulate(None, policy, wall_time=200.0, scenario=sc)
            == simulate([1.0, 1.0, 2.5], policy, wall_time=200.0))


def test_scenario_and_times_or_jitter_are_exclusive():
    sc = SCENARIOS['mixed-2']
    with pytest.raises(ValueError, match='not both'):
        simulate([1.0, 1.0], 'asp', wall_time=1.0, scenario=sc)
    with pytest.raises(ValueError, match='own jitter'):
        simulate(None, 'asp', wall_time=1.0, scenario=sc, jitter=0.1)


# --- presets ------------------------------------------------------------------------------

from grid_args import Args  # noqa: E402  (tests/support)


@pytest.mark.parametrize('name', sorted(SCENARIOS))
def test_every_scenario_has_a_preset_with_every_paradigm_and_8_trials(name):
    preset = PRESETS['emulated-' + name]
    assert preset.trials == 8 and preset.emulate == name
    assert preset.workers == SCENARIOS[name].workers
    assert {'bsp', 'asp', 'asp-lrtau', 'ssp3', 'ssp6', 'ssp15', 'dssp', 'dssp-paper',
            'dssp-threshold'} == set(LAB_ARMS) == set(preset.arms)
    grid = resolve_grid(Args(preset='emulated-' + name))
    cmd = run_command(grid, parse_arm('asp-lrtau'), 1, '/tmp/x')
    assert cmd[cmd.index('--emulate') + 1] == name
    assert cmd[cmd.index('--optimizer') + 1] == 'sasgd'
    assert '--data-dir' not in cmd and '--slowdown' not in cmd


def test_a_lab_preset_refuses_a_slowdown_or_other_worker_counts():
    from mxnet_ssp.lab.reproduce.grid import UsageError
    with pytest.raises(UsageError, match='--slowdown.*emulated cluster'):
        resolve_grid(Args(preset='emulated-mixed-2', slowdown='1:2'))
    with pytest.raises(UsageError, match='--workers.*2 with preset emulated-mixed-2'):
        resolve_grid(Args(preset='emulated-mixed-2', workers='4'))


# --- statistics and verdicts --------------------------------------------------------------

def test_median_interval_keeps_infinite_times():
    assert P.median_interval([]) is None
    # five values: [min, max], covering 15/16, short of 95%
    assert P.median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) == (3.0, 1.0, 5.0, 15 / 16, 0.95)
    point, low, high, _, _ = P.median_interval([1.0, math.inf, math.inf, math.inf, 2.0])
    assert math.isinf(point) and low == 1.0 and math.isinf(high)


def trial(seed, reach_at, final=0.94, end=1000.0):
    """A finished trial whose accuracy jumps from 0.5 to `final` at `reach_at` seconds; its
    last evaluation is at `end` seconds."""
    curve = [(1.0, 0.5)] + ([(reach_at, final), (end, final)] if reach_at is not None
                            else [(end, 0.6)])
    return {'status': 'ok', 'trial': seed, 'seed': seed, 'curve': curve,
            'final_accuracy': final if reach_at is not None else 0.6}


def rows_for(times, finals=None):
    finals = finals or {}
    return [{'arm': parse_arm(name), 'trials': [trial(i, t, finals.get(name, 0.94))
                                                 for i, t in enumerate(ts)]}
            for name, ts in times.items()]


def by_claim(result):
    return {v.claim.split(' (')[0]: v.verdict for v in result}


def test_verdicts_support_the_paper_when_the_data_do():
    # two SSP thresholds ask 97.5% of each comparison: 8 seeds ([min, max] at 99.2%)
    times = {'bsp': [100, 104, 98, 101, 99, 100, 103, 97],
             'asp': [50, 51, 49, 52, 50, 50, 51, 49],
             'ssp3': [80, 82, 79, 81, 80, 80, 81, 79], 'ssp6': [75, 76, 74, 77, 75, 75, 76, 74],
             'dssp': [51, 50, 52, 49, 50, 50, 51, 49]}
    got = by_claim(V.verdicts(rows_for(times), 0.93))
    assert got == {'BSP slower than every SSP': 'supported',
                   'every SSP slower than DSSP': 'supported',
                   'DSSP as fast as ASP': 'supported',
                   "DSSP's final accuracy >= ASP's": 'supported',
                   'untuned DSSP within 10% of the best hand-tuned SSP': 'supported',
                   'DSSP at least 1.3x faster than BSP': 'supported'}


def test_verdicts_refute_the_paper_when_the_data_do():
    # DSSP as slow as BSP, ASP never reaches the target, SSP faster than BSP
    times = {'bsp': [100, 101, 99, 100, 102, 100, 101, 99], 'asp': [None] * 8,
             'ssp3': [60, 61, 59, 60, 62, 60, 61, 59],
             'ssp6': [120, 121, 119, 122, 120, 120, 121, 119],
             'dssp': [100, 99, 101, 100, 98, 100, 99, 101]}
    got = by_claim(V.verdicts(rows_for(times, {'dssp': 0.94}), 0.93))
    assert got['BSP slower than every SSP'] == 'refuted'        # ssp6 is slower than BSP
    assert got['every SSP slower than DSSP'] == 'refuted'       # ssp3 beats DSSP
    assert got['DSSP as fast as ASP'] == 'refuted'              # ASP never gets there
    assert got['untuned DSSP within 10% of the best hand-tuned SSP'] == 'refuted'
    assert got['DSSP at least 1.3x faster than BSP'] == 'refuted'
    assert got["DSSP's final accuracy >= ASP's"] == 'supported'  # 0.94 vs 0.6


def test_trials_that_overlap_across_seeds_are_decided_seed_by_seed():
    # the arms' ranges overlap, but on every seed BSP is slower than SSP s=3 (ratios
    # 1.05-1.2): paired, supported; unpaired, the medians' ratio straddles 1
    times = {'bsp': [60, 140, 90, 110, 100, 70], 'asp': [40, 120, 70, 100, 60, 50],
             'ssp3': [50, 130, 80, 105, 90, 60], 'dssp': [45, 125, 75, 100, 85, 55]}
    result = V.verdicts(rows_for(times), 0.93)
    got = by_claim(result)
    assert got['BSP slower than every SSP'] == 'supported'
    unpaired = result[0].unpaired              # 'ssp3: 1.11 [low, high]'
    low = float(unpaired.split('[')[1].split(',')[0])
    assert low < 1.0
    # BSP / DSSP is 1.1-1.33 per seed: straddles 1.3
    assert got['DSSP at least 1.3x faster than BSP'] == 'inconclusive'


def test_sim_policy_of_every_lab_arm():
    assert [sim_policy(parse_arm(a)) for a in LAB_ARMS] == [
        'ssp:0', 'asp', 'asp', 'ssp:3', 'ssp:6', 'ssp:15', 'dssp:3:15:bounded',
        'dssp:3:15:paper', 'dssp:3:15:threshold']


# --- --preset emulated ----------------------------------------------------------------------

def test_preset_emulated_plans_every_scenario_into_its_own_directory(tmp_path, capsys):
    from mxnet_ssp.lab.reproduce.cli import main
    assert main(['--preset', 'emulated', '--out', str(tmp_path / 'lab'), '--dry-run']) == 0
    out = capsys.readouterr().out
    for name, scenario in SCENARIOS.items():
        commands = [line for line in out.splitlines()
                    if '--emulate %s ' % name in line + ' ']
        if scenario.links:           # the emulated cluster's: only with --scenario
            assert not commands
            continue
        assert len(commands) == len(LAB_ARMS) * 8
        assert all(str(tmp_path / 'lab' / name / 'runs') in c for c in commands)
        assert all(' -n %d ' % scenario.workers in c for c in commands)
    assert not (tmp_path / 'lab').exists()             # a dry run writes nothing
    assert main(['--preset', 'emulated', '--scenario', 'jitter-8', '--out',
                 str(tmp_path / 'lab'), '--dry-run']) == 0
    out = capsys.readouterr().out
    assert '--emulate jitter-8' in out and '--emulate mixed-2' not in out


def test_preset_emulated_runs_the_users_own_cluster_sized_from_it(tmp_path, capsys):
    from mxnet_ssp.lab.reproduce.cli import main
    (tmp_path / 'four.toml').write_text('workers = 4\nbase_ms = 15\nfactors = [1, 1.3, 1.8, 3]\n'
                                        'jitter = "10%"\n')
    assert main(['--preset', 'emulated', '--scenario', str(tmp_path / 'four.toml'), '--out',
                 str(tmp_path / 'lab'), '--dry-run']) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if 'train_cifar' in line]
    spec = 'name=four,workers=4,base_ms=15.0,factors=1.0:1.3:1.8:3.0,jitter=0.1'
    assert len(commands) == len(LAB_ARMS) * 8
    for c in commands:
        assert str(tmp_path / 'lab' / 'four' / 'runs') in c and ' -n 4 ' in c
        # the processes get every setting, not the file; 800 iterations with 4 workers
        assert ' --emulate %s ' % spec in c and c.endswith(' --num-iterations 800')
        assert ' --num-epochs 26 ' in c         # 4000 samples / 4 workers / 32 = 31 batches


@pytest.mark.parametrize('workers,iterations,epochs', [
    (2, 1000, 17), (3, 900, 22), (4, 800, 26), (8, 600, 40), (16, 400, 58)])
def test_a_lab_preset_follows_from_its_scenarios_workers(workers, iterations, epochs):
    from mxnet_ssp.lab.reproduce.presets import lab_preset
    from mxnet_ssp.lab.cluster_model.profiles import get_scenario
    scenario = get_scenario('workers=%d,base_ms=60,factors=%s' % (
        workers, ':'.join(['1'] * (workers - 1) + ['2.5'])))
    preset = lab_preset(scenario)
    assert (preset.workers, preset.num_iterations, preset.epochs) == (workers, iterations, epochs)
    assert get_scenario(preset.emulate) == scenario
    # 10 s of start-up, then the slow worker's 150 ms or the machine's share, + 10 ms
    run_s = 10 + iterations * (max(0.150, 0.012 * workers) + 0.010)
    assert preset.timeout_s == max(900, 60 * math.ceil(5 * run_s / 60))
    assert preset.cost.startswith('72 runs of about %.0f s' % run_s)


def test_the_built_in_lab_presets_keep_their_measured_sizes():
    assert [(PRESETS['emulated-' + n].num_iterations, PRESETS['emulated-' + n].epochs,
             PRESETS['emulated-' + n].timeout_s) for n in SCENARIOS] == [
        (1000, 17, 900), (800, 26, 900), (600, 40, 900), (600, 40, 900), (600, 40, 900),
        (800, 26, 900), (800, 26, 900)]


@pytest.mark.parametrize('argv,words', [
    (['--preset', 'emulated', '--scenario', 'mixed-9'], ['--scenario', 'mixed-9', 'jitter-8']),
    (['--preset', 'emulated', '--scenario', 'workers=20,base_ms=5'],
     ["--scenario 'workers=20,base_ms=5' is not valid", 'from 2 to 16']),
    (['--preset', 'quick', '--scenario', 'mixed-2'], ['--scenario', 'without --preset emulated']),
    (['--preset', 'emulated'], ['--out is required']),
])
def test_preset_emulated_bad_input(tmp_path, capsys, argv, words):
    from mxnet_ssp.lab.reproduce.cli import main
    if '--out' not in argv and 'required' not in words[0]:
        argv = argv + ['--out', str(tmp_path / 'lab')]
    assert main(argv) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err


def test_the_suite_report_collects_each_scenario_s_verdicts(tmp_path):
    from mxnet_ssp.lab.reproduce.report import write_suite_report
    (tmp_path / 'mixed-2').mkdir()
    (tmp_path / 'mixed-2' / 'report.md').write_text(
        '# Report\n\n## The emulated cluster: `mixed-2`\n\nabout\n\n## Medians\n\nskip me\n\n'
        '## Verdicts\n\n| claim | x |\n\n## Simulator vs lab\n\n| sim |\n\n## Other\n\nno\n')
    text = open(write_suite_report(str(tmp_path), ['mixed-2', 'jitter-8'])).read()
    assert '### Verdicts' in text and '| claim | x |' in text and '| sim |' in text
    assert 'skip me' not in text and 'no\n' not in text
    assert '[full report](mixed-2/report.md)' in text
    assert '# Scenario `jitter-8`\n\nNo report yet' in text


def test_balance_arms_and_their_verdict():
    arm = parse_arm('ssp3-balance')
    assert (arm.name, arm.label, arm.family, arm.balance) == (
        'ssp3-balance', 'SSP s=3 + balance', 'ssp', True)
    assert arm.train_flags()[-1] == '--balance'
    with pytest.raises(ValueError, match='twice'):
        parse_arm('bsp-balance-balance')
    times = {'asp': [50, 51, 49, 52, 50, 50], 'bsp': [100, 101, 99, 100, 102, 100],
             'bsp-balance': [40, 41, 39, 42, 40, 40], 'ssp3-balance': [70, 71, 69, 72, 70, 70]}
    got = {a.name: (verdict, base) for a, verdict, _, _, base, _ in
           V.balance_verdicts(rows_for(times), 0.93)}
    assert got == {'bsp-balance': ('supported', 'bsp'), 'ssp3-balance': ('refuted', 'ssp3')}
    # the paper's claims compare the plain stores: balanced arms are not SSP thresholds
    times.update({'ssp3': [80, 82, 79, 81, 80, 80], 'dssp': [51, 50, 52, 49, 50, 50]})
    evidence = {v.claim.split(' (')[0]: v.evidence for v in V.verdicts(rows_for(times), 0.93)}
    assert evidence['every SSP slower than DSSP'].startswith('ssp3: ')
    assert 'balance' not in evidence['every SSP slower than DSSP']


def test_the_verdict_table_has_a_column_per_dssp_mode_that_ran():
    from mxnet_ssp.lab.reproduce.lab_report import verdict_table
    rows = rows_for({'bsp': [100, 101, 99], 'asp': [50, 51, 49], 'dssp': [60, 61, 59],
                     'dssp-threshold': []})
    for row in rows:
        row['ok'] = len(row['trials'])
    header = [line for line in verdict_table(rows, 0.93) if line.startswith('| claim')]
    assert header == ['| claim | DSSP bounded | evidence (paired, per metric) | unpaired |']
    assert verdict_table([r for r in rows if r['arm'].family != 'dssp'], 0.93) == []


def test_fewer_than_six_trials_give_no_95_percent_interval_and_no_verdict():
    # five trials each that would support every claim with six (one SSP threshold: 95%)
    times = {'bsp': [100, 104, 98, 101, 99], 'asp': [50, 51, 49, 52, 50],
             'ssp3': [80, 82, 79, 81, 80], 'dssp': [51, 50, 52, 49, 50]}
    got = by_claim(V.verdicts(rows_for(times), 0.93))
    assert set(got.values()) == {'inconclusive'}
    # [min, max] is shown with its own coverage
    assert P.median_interval([3.0, 1.0]) == (2.0, 1.0, 3.0, 0.5, 0.95)
    assert P.fmt_interval(P.median_interval([3.0, 1.0])) == '2.00 [1.00, 3.00] 50% < 95%'
    point, low, high = V.ratio_interval([2.0] * 6, [1.0] * 5)
    assert point == 2.0 and math.isnan(low) and math.isnan(high)
    assert V._fmt_interval((2.0, math.nan, math.nan)) == '2.00 [-, -]'
    # a sixth trial each is enough to decide again
    times = {name: ts + [ts[0]] for name, ts in times.items()}
    assert set(by_claim(V.verdicts(rows_for(times), 0.93)).values()) == {'supported'}


def test_every_arm_is_censored_at_the_shortest_runs_last_evaluation():
    # ASP's runs end at 60 s: BSP's later times are past the budget every arm had
    rows = [{'arm': parse_arm('asp'), 'trials': [trial(i, 50 + i, end=60.0) for i in range(6)]},
            {'arm': parse_arm('bsp'), 'trials': [trial(i, t) for i, t in
                                                 enumerate([55, 58, 70, 90, 61, 59])]}]
    assert V.common_budget(rows) == 60.0
    assert V.trial_times(rows[1]['trials'], 0.93, 60.0) == [55, 58, math.inf, math.inf,
                                                              math.inf, 59]
    assert V.trial_times(rows[1]['trials'], 0.93) == [55, 58, 70, 90, 61, 59]
    assert V.common_budget([]) is None
    import types
    from mxnet_ssp.lab.reproduce.lab_report import _medians
    from mxnet_ssp.lab.cluster_model.profiles import get_scenario
    for row in rows:
        for t in row['trials']:
            t.update(it_per_s={0: 10.0, 1: 4.0}, idle_share={0: 0.2, 1: 0.1},
                     staleness={'mean': 1.0})
    text = '\n'.join(_medians(types.SimpleNamespace(targets=(0.93,)), get_scenario('mixed-2'),
                              rows))
    assert 'counted only up to 60.0 s' in text and '(3/6)' in text


def test_the_medians_table_renders_with_and_without_intervals():
    import types
    from mxnet_ssp.lab.reproduce.lab_report import _medians
    from mxnet_ssp.lab.cluster_model.profiles import get_scenario
    rows = rows_for({'asp': [50, 51, 49, 52, 48, 50], 'bsp': [100, 104]})
    for row in rows:
        for t in row['trials']:
            t.update(it_per_s={0: 10.0, 1: 4.0}, idle_share={0: 0.2, 1: 0.1},
                     staleness={'mean': 1.5})
    lines = _medians(types.SimpleNamespace(targets=(0.93,)), get_scenario('mixed-2'), rows)
    text = '\n'.join(lines)
    assert '## Medians with their intervals' in text and 'at least 6 trials' in text
    # six trials: [min, max] at 31/32; the median of an even count is the middle two's mean
    # sustained and first crossing agree on a curve that jumps and stays; the shortfall is
    # 1 s below at 0 then (0.93 - 0.5) / 0.93 of the time to the jump: 1 + 0.4624 * 49 = 23.7
    assert ('| ASP | 50.0 [48.0, 52.0] 96.9% (6/6) | 50.0 [48.0, 52.0] 96.9% (6/6) | '
            '23.7 [22.7, 24.6] 96.9% (6/6) | 0.940 [0.940, 0.940] 96.9% | 0.20 | - | '
            '- / - | 1.50 |') in lines
    # two trials: [min, max] at 50%, marked
    assert '| BSP | 102.0 [100.0, 104.0] 50% < 95% (2/2) |' in text


def test_the_machine_table_gives_each_paradigm_s_cores_per_role_and_sleep_lateness():
    from mxnet_ssp.lab.reproduce.lab_report import _machine

    def trial(cores, server, others, late):
        t = {'status': 'ok', 'worker_cores': cores, 'sleep_late_ms': {'p50': late, 'p99': 2 * late}}
        t['process_cpu'] = {'server': {'processes': 1, 'cpu_s': 1.0, 'cores': server},
                            'scheduler': {'processes': 1, 'cpu_s': 0.1, 'cores': others / 4},
                            'controller': {'processes': 1, 'cpu_s': 0.3, 'cores': 3 * others / 4}}
        return t
    rows = [{'arm': parse_arm('asp'), 'trials': [trial(1.0, 0.5, 0.04, 1.0),
                                                  trial(1.2, 0.7, 0.08, 3.0),
                                                  dict(trial(9, 9, 9, 9), status='failed')]},
            {'arm': parse_arm('bsp'), 'trials': [{'status': 'ok', 'worker_cores': 0.6}]}]
    lines = _machine(rows)
    assert lines[4] == ('| paradigm | worker cores busy | server cores busy | scheduler + '
                        'controller cores busy | sleep late, p50 (ms) | sleep late, p99 (ms) |')
    assert lines[6] == '| %s | 1.10 | 0.60 | 0.06 | 2.00 | 4.00 |' % parse_arm('asp').label
    assert lines[7] == '| %s | 0.60 | - | - | - | - |' % parse_arm('bsp').label


def test_the_balancing_table_is_decided_under_every_metric():
    from mxnet_ssp.lab.reproduce.lab_report import _balance

    def trial(seed, curve):
        return {'status': 'ok', 'trial': seed, 'seed': seed, 'curve': curve,
                'final_accuracy': 0.94}
    # balanced BSP crosses once at 2 s by luck, for good at 20 s; ASP for good at 10 s
    lucky = [(0.0, 0.5), (2.0, 0.95), (2.25, 0.8), (20.0, 0.95), (60.0, 0.95)]
    steady = [(0.0, 0.5), (10.0, 0.95), (60.0, 0.95)]
    rows = [{'arm': parse_arm('bsp-balance'), 'trials': [trial(s, lucky) for s in range(6)]},
            {'arm': parse_arm('asp'), 'trials': [trial(s, steady) for s in range(6)]}]
    line = [x for x in _balance(rows, 0.93) if x.startswith('| BSP + balance')][0]
    assert '**metric-dependent** (sustained: refuted, first: supported, shortfall: ' in line
    rows[0]['trials'] = [trial(s, steady) for s in range(6)]
    rows[1]['trials'] = [trial(s, [(0.0, 0.5), (30.0, 0.95), (60.0, 0.95)]) for s in range(6)]
    line = [x for x in _balance(rows, 0.93) if x.startswith('| BSP + balance')][0]
    assert '| **supported** |' in line


# --- the DSSP modes against each other -----------------------------------------------------

MODES = (('dssp', 'bounded'), ('dssp-paper', 'paper'), ('dssp-threshold', 'threshold'))


def test_mode_pairs_name_the_sooner_and_the_more_accurate_mode_only_when_separated():
    times = {'dssp': [50, 51, 49, 52, 50, 50, 51, 49],
             'dssp-paper': [100, 104, 98, 101, 99, 100, 103, 97],
             'dssp-threshold': [52, 48, 51, 50, 49, 53, 47, 50]}
    rows = rows_for(times, finals={'dssp': 0.95, 'dssp-paper': 0.90, 'dssp-threshold': 0.95})
    got = {(a, b): (reading, acc) for a, b, reading, _, _, acc in
           V.mode_pairs(rows, 0.93, MODES, budget=V.common_budget(rows))}
    assert got == {('bounded', 'paper'): ('bounded sooner', 'bounded more accurate'),
                   ('bounded', 'threshold'): ('not separated', 'not separated'),
                   ('paper', 'threshold'): ('threshold sooner', 'threshold more accurate')}
    # each of the three comparisons at the level of a family of three (Bonferroni)
    pairs = V.mode_pairs(rows, 0.93, MODES, budget=V.common_budget(rows))
    asked = {iv.asked for pair in pairs for iv in list(pair[3].values()) + [pair[4]]}
    assert asked == {1 - 0.05 / 3}


def test_mode_pairs_are_metric_dependent_when_the_first_and_the_sustained_crossing_disagree():
    def dipping(seed):
        # reaches 0.93 at 10 s, falls back at 11 s, holds it from 60 s
        return {'status': 'ok', 'trial': seed, 'seed': seed, 'final_accuracy': 0.94,
                'curve': [(1.0, 0.5), (10.0, 0.94), (11.0, 0.9), (60.0, 0.94), (1000.0, 0.94)]}
    rows = rows_for({'dssp-paper': [30 + k % 3 for k in range(8)]})
    rows.append({'arm': parse_arm('dssp'), 'trials': [dipping(k) for k in range(8)]})
    (a, b, reading, per, _, _), = V.mode_pairs(rows, 0.93, MODES, budget=V.common_budget(rows))
    assert (a, b) == ('bounded', 'paper') and reading == V.METRIC_DEPENDENT
    assert per['first'].high < 1 < per['sustained'].low


def test_the_mode_table_has_a_row_per_pair_of_modes_that_ran():
    from mxnet_ssp.lab.reproduce.lab_report import mode_table
    rows = rows_for({'bsp': [100] * 6, 'dssp': [60, 61, 59, 60, 62, 58],
                     'dssp-threshold': [61, 60, 62, 59, 60, 61]})
    table = [line for line in mode_table(rows, 0.93) if line.startswith('| ')]
    assert len(table) == 2 and table[1].startswith('| bounded vs threshold | **not separated** |')
    assert 'Bonferroni: 95.0% each' in ''.join(mode_table(rows, 0.93))
    assert mode_table(rows_for({'bsp': [100] * 6, 'dssp': [60] * 6}), 0.93) == []
