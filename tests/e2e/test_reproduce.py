"""Tests of mxnet_ssp.lab.reproduce: reports of synthetic runs, bad input, the runner and resuming.

* The report's maths (mxnet_ssp.lab.reproduce.stats) is tested in
  tests/unit/experiments/test_stats.py; here it runs through the collector and the report.
* Runner tests with a stand-in for train_cifar.py that writes synthetic
  metrics: real launcher jobs that take a fraction of a second, so resuming,
  failures and aborts are checked without MXNet.
* One integration test runs the ``tiny`` preset for real (a few runs of
  train_cifar.py, about 20 s on 2 cores); a ``slow`` one runs the ``quick``
  preset with one trial.
"""
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import types

import pytest

from conftest import INSTALL_TEST, job_env
from mxnet_ssp.lab.cluster_model.arms import parse_arm
from mxnet_ssp.lab.reproduce.cli import build_parser, main
from mxnet_ssp.lab.reproduce.json_files import write_json
from mxnet_ssp.lab.reproduce.grid import (MARKER, choose_lr, resolve_grid, run_dir,
                                                  run_signature, trial_seed)
from mxnet_ssp.lab.reproduce.presets import PRESETS
from mxnet_ssp.lab.reproduce.report import write_report
from mxnet_ssp.lab.reproduce.runner import (check_dataset, eta_text, prepare_subset,
                                                     run_env, subset_dir)

from conftest import ROOT  # noqa: E402  (the checkout)
HAVE_MATPLOTLIB = importlib.util.find_spec('matplotlib') is not None
PLOT_FLAGS = [] if HAVE_MATPLOTLIB else ['--no-plots']


@pytest.fixture(autouse=True)
def checkout_first(monkeypatch):
    """Processes started here (the runs, the training script's --help) import this checkout."""
    old = os.environ.get('PYTHONPATH')
    monkeypatch.setenv('PYTHONPATH', ROOT + (os.pathsep + old if old else ''))


# ---------------------------------------------------------------------------
# arms (parse_arm itself: tests/unit/cluster_model/test_arms.py)
# ---------------------------------------------------------------------------
def test_every_preset_resolves_to_its_paradigms():
    for preset in PRESETS.values():
        arms = [parse_arm(n) for n in preset.arms]
        assert len(set(arms)) == len(arms), preset.name
        assert {a.family for a in arms} == {'bsp', 'asp', 'ssp', 'dssp'}, preset.name
    assert [a.staleness[0] for a in map(parse_arm, PRESETS['paper-alexnet'].arms)
            if a.family == 'ssp'] == list(range(3, 16))


def test_collect_run_and_report_from_synthetic_runs(tmp_path):
    grid = _grid(tmp_path, 'bsp,ssp3,ssp4,dssp', trials=3)
    curves = {'bsp': [0.5, 0.8, 0.9], 'ssp3': [0.6, 0.85, 0.9], 'ssp4': [0.7, 0.9, 0.92],
              'dssp': [0.7, 0.9, 0.95]}
    for arm in grid.arms:
        for trial in (1, 2, 3):
            # trial 2 is the median by final accuracy (trial 1 lower, trial 3 higher)
            bonus = {1: -0.01, 2: 0.0, 3: 0.02}[trial]
            accs = [min(1.0, a + bonus) for a in curves[arm.name]]
            _synthetic_run(run_dir(str(tmp_path), arm, trial), arm, grid, trial, accs)
    rows = write_report(grid, str(tmp_path), plots_on=False)
    by_name = {r['arm'].name: r for r in rows}
    assert all(r['median']['trial'] == 2 for r in rows)
    assert by_name['dssp']['times'][0.9] == 2.0 and by_name['bsp']['times'][0.9] == 3.0
    median = by_name['dssp']['median']
    assert median['iterations'] == {0: 6, 1: 3}
    # worker 0's last iteration ends with worker 1 at 2 of 3: lead 4 (train logs); the
    # store's own lead at release comes from worker-0.jsonl
    assert median['max_lead'] == 4 and median['release_lead_max'] == 3
    assert median['staleness']['source'] == 'estimate'
    assert by_name['bsp']['median']['staleness'] == {'source': 'bsp', 'mean': 0.0, 'max': 0}
    report = (tmp_path / 'report.md').read_text()
    table = _table(report, 'Time to reach')
    assert [row[0] for row in table] == ['BSP', 'SSP s=3', 'SSP s=4', 'DSSP [3,15]',
                                         'SSP average (s=3..4)']
    assert table[3][1:3] == ['2.0', '3.0']              # DSSP: 0.9 at 2 s, 0.92 at 3 s
    assert table[1][2] == '-'                           # SSP s=3 never reaches 0.92
    assert table[0][3] == 'median 3.0 (3.0-3.0), 2 of 3 reached'   # trial 1 tops out at 0.89
    assert table[3][3] == 'median 2.0 (2.0-3.0)'           # trial 1 reaches 0.9 at 3 s
    results = json.loads((tmp_path / 'results.json').read_text())
    assert [a['median_trial'] for a in results['arms']] == [2, 2, 2, 2]
    assert "the curves: worker 0's own weights at the end of each of its epochs" in report


def test_the_table_i_analogue_says_whose_curve_its_times_come_from(tmp_path):
    """Its times are those of the curve that decides the verdicts: the servers' model where a
    run has one; the text says so (it once said worker 0's copies, whatever the curve)."""
    grid = _grid(tmp_path, 'bsp,dssp', trials=2)
    for arm in grid.arms:
        for trial in (1, 2):
            directory = run_dir(str(tmp_path), arm, trial)
            _synthetic_run(directory, arm, grid, trial, [0.5, 0.8, 0.9])
            if arm.name == 'dssp' or trial == 1:
                # the servers' model reaches 0.9 at 1.5 s, worker 0's epochs only at 3 s
                with open(os.path.join(directory, 'eval_server.jsonl'), 'w') as f:
                    for t, acc in ((0.5, 0.6), (1.0, 0.85), (1.5, 0.9), (2.0, 0.91)):
                        f.write(json.dumps({'elapsed_s': t, 'accuracy': acc}) + '\n')
    write_report(grid, str(tmp_path), plots_on=False)
    report = (tmp_path / 'report.md').read_text()
    text = next(line for line in report.splitlines() if line.startswith('Median trial'))
    assert ("the servers' model, evaluated every 0.25 s of the servers' wall clock, held "
            "workers or not (eval_server.jsonl) in 3 trials; worker 0's own weights at the end "
            "of each of its epochs (eval.jsonl) in 1 trial") in text
    over_trials = {row[0]: row[3] for row in _table(report, 'Time to reach')}
    assert over_trials['DSSP [3,15]'] == 'median 1.5 (1.5-1.5)'
    assert over_trials['BSP'] == 'median 2.2 (1.5-3.0)'


def test_collect_run_reads_cpu_use_and_sleep_lateness(tmp_path):
    run = tmp_path / 'run'
    run.mkdir()
    (run / 'summary.json').write_text(json.dumps({'final_accuracy': 0.9, 'wall_time_s': 10.0}))
    for rank, (cpu0, cpu1) in enumerate([(1.0, 4.0), (2.0, 4.0)]):
        with open(str(run / ('train-worker%d.jsonl' % rank)), 'w') as f:
            for i in range(11):
                f.write(json.dumps({'rank': rank, 'iteration': i + 1, 'time': 100.0 + i,
                                    'compute_s': 0.5, 'step_s': 0.1,
                                    'sleep_s': 0.4 if i % 2 else 0.0,
                                    'sleep_late_s': 0.001 * i if i % 2 else 0.0,
                                    'cpu_s': cpu0 + (cpu1 - cpu0) * i / 10.0}) + '\n')
    records = [('server', 11, 6.0, 12.0), ('server', 12, 3.0, 12.0), ('scheduler', 10, 0.6, 12.0),
               ('controller', 13, 1.2, 12.0)]
    for role, pid, cpu, wall in records:
        (run / ('cpu-%s-%d.json' % (role, pid))).write_text(json.dumps(
            {'role': role, 'pid': pid, 'cpu_s': cpu, 'wall_s': wall}))
    (run / 'cpu-server-14.json').write_text('{"role": "ser')      # cut short: not counted
    from mxnet_ssp.lab.reproduce.collect import collect_run
    result = collect_run(str(run), parse_arm('asp'))
    assert result['process_cpu'] == {
        'server': {'processes': 2, 'cpu_s': 9.0, 'cores': 0.75},
        'scheduler': {'processes': 1, 'cpu_s': 0.6, 'cores': 0.05},
        'controller': {'processes': 1, 'cpu_s': 1.2, 'cores': 0.1}}
    assert result['cpu_s'] == {0: 3.0, 1: 2.0}
    assert result['worker_cores'] == 0.5                    # 5 CPU-seconds over 10 s
    # only the iterations that slept count: 1, 3, 5, 7, 9 ms late on both workers
    assert result['sleep_late_ms'] == {'p50': 5.0, 'p90': 9.0, 'p99': 9.0}


@pytest.mark.parametrize('dataset,folder,train,test,key', [
    ('cifar10', 'cifar-10-batches-py', ['data_batch_%d' % i for i in range(1, 6)], 'test_batch',
     b'labels'),
    ('cifar100', 'cifar-100-python', ['train'], 'test', b'fine_labels'),
])
def test_data_fraction_subset(tmp_path, dataset, folder, train, test, key):
    import pickle

    import numpy as np

    from mxnet_ssp.lab import data
    rng = np.random.RandomState(0)
    source = tmp_path / 'cifar' / folder
    source.mkdir(parents=True)
    per_file = 48                                      # 12 per class per file
    for name in train + [test]:
        labels = np.arange(per_file) % 4                     # 4 classes, balanced
        with open(source / name, 'wb') as f:
            pickle.dump({b'data': rng.randint(0, 256, (per_file, 3072)).astype(np.uint8),
                         key: labels.tolist()}, f)
    args = build_parser().parse_args([
        '--preset', 'paper-resnet110' if dataset == 'cifar100' else 'paper-alexnet',
        '--out', str(tmp_path / 'out'), '--data-fraction', '0.25',
        '--data-dir', str(tmp_path / 'cifar')])
    grid = resolve_grid(args)
    target = prepare_subset(str(tmp_path / 'out'), grid)
    assert target == subset_dir(str(tmp_path / 'out'), grid)
    full = data.load(dataset, str(tmp_path / 'cifar'), download=False)
    subset = data.load(dataset, target, download=False)
    (full_x, full_y), (sub_x, sub_y) = data.arrays(full.train), data.arrays(subset.train)
    assert len(sub_y) == len(full_y) // 4
    assert np.bincount(sub_y).tolist() == [len(full_y) // 16] * 4
    np.testing.assert_array_equal(data.arrays(subset.test)[0],
                                  data.arrays(full.test)[0])      # the whole test set
    # every kept image is one of the originals, pixel for pixel
    originals = {row.tobytes() for row in full_x}
    assert all(row.tobytes() in originals for row in sub_x)
    # made once: a second call reuses it
    mtime = os.stat(os.path.join(target, 'SUBSET.json')).st_mtime_ns
    prepare_subset(str(tmp_path / 'out'), grid)
    assert os.stat(os.path.join(target, 'SUBSET.json')).st_mtime_ns == mtime


# ---------------------------------------------------------------------------
# bad input: exit 2 before any process starts
# ---------------------------------------------------------------------------
def _main(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize('argv,words', [
    (['--preset', 'paper-vgg'], ['--preset', 'paper-vgg', 'paper-alexnet', 'quick', 'tiny']),
    (['--preset', 'tiny', '--epochs-scale', '0'], ['--epochs-scale', "'0'", '> 0']),
    (['--preset', 'tiny', '--epochs-scale', 'half'], ['--epochs-scale', 'half']),
    (['--preset', 'tiny', '--workers', '1'], ['--workers', "'1'", '>= 2']),
    (['--preset', 'tiny', '--workers', 'two'], ['--workers', 'two']),
    (['--preset', 'tiny', '--trials', '0'], ['--trials', "'0'", '>= 1']),
    (['--preset', 'tiny', '--paradigms', 'bsp,hogwild'], ['--paradigms', 'hogwild', 'ssp<S>']),
    (['--preset', 'tiny', '--targets', '1.5'], ['--targets', '1.5', '(0, 1]']),
    (['--preset', 'tiny', '--data-fraction', '0.5'], ['--data-fraction', '0.5', 'CIFAR']),
    (['--preset', 'paper-alexnet', '--data-fraction', '2'], ['--data-fraction', "'2'"]),
    (['--preset', 'tiny', '--slowdown', '2:2.5'], ['--slowdown', '2:2.5', '0..1']),
    (['--preset', 'tiny', '--timeout', '-5'], ['--timeout', '-5']),
    (['--preset', 'tiny', '--train-script', '/nonexistent/train.py'], ['--train-script']),
    (['--out', 'x'], ['--preset']),
    (['--preset', 'tiny', '--tune-lr', 'fast'], ['--tune-lr', 'fast', 'learning rates in (0, 10)']),
    (['--preset', 'tiny', '--tune-lr', '0,0.1'], ['--tune-lr', "'0,0.1'"]),
    (['--preset', 'tiny', '--tune-lr', '0.1', '--tune-trials', '0'], ['--tune-trials', '>= 1']),
    (['--preset', 'tiny', '--tune-trials', '2'], ['--tune-trials', 'nothing without --tune-lr']),
    (['--preset', 'tiny', '--tune-lr', '0.1', '--tune-momentum', '1.2'],
     ['--tune-momentum', 'momenta in [0, 1)']),
    (['--preset', 'tiny', '--tune-lr', '0.1', '--tuned-choice', 'second'],
     ['--tuned-choice', 'best or runner-up']),
])
def test_bad_input_exits_2(tmp_path, capsys, argv, words):
    out = tmp_path / 'out'
    if '--out' not in argv:
        argv = argv + ['--out', str(out)]
    code, text = _main(capsys, argv)
    assert code == 2, text
    assert 'error:' in text
    for word in words:
        assert word in text, (word, text)
    assert not (out / 'runs').exists()


def test_unwritable_out_exits_2(tmp_path, capsys):
    blocker = tmp_path / 'file'
    blocker.write_text('not a directory')
    for out in (blocker, blocker / 'results'):
        code, text = _main(capsys, ['--preset', 'tiny', '--out', str(out)])
        assert code == 2 and '--out' in text and str(out) in text and 'directory' in text


def test_out_with_another_grid_exits_2(tmp_path, capsys):
    (tmp_path / 'grid.json').write_text(json.dumps(dict(_grid(tmp_path, 'bsp').identity(),
                                                        epochs=99)))
    code, text = _main(capsys, ['--preset', 'tiny', '--out', str(tmp_path), '--dry-run'])
    assert code == 2 and 'epochs (99 there, 2 now)' in text


def test_dry_run_scales_and_prints_commands(tmp_path, capsys):
    code, text = _main(capsys, ['--preset', 'paper-resnet110', '--out', str(tmp_path / 'o'),
                                '--epochs-scale', '0.1', '--workers', '2', '--trials', '2',
                                '--paradigms', 'bsp,dssp-paper', '--data-fraction', '0.1',
                                '--data-dir', str(tmp_path / 'no-data'), '--dry-run'])
    assert code == 0, text
    # a dry run only warns about what a real run would stop on (or download)
    assert '# warning: cifar100 is not under --data-dir %s' % (tmp_path / 'no-data') in text
    commands = [line for line in text.splitlines() if line.startswith('OMP_NUM_THREADS=1')]
    assert len(commands) == 4                       # 2 paradigms x 2 trials
    assert text.index('# bsp trial 1') < text.index('# dssp-paper trial 1') < text.index(
        '# bsp trial 2')                              # trial-major order
    first = commands[0]
    for part in ('-m mxnet_ssp.launch -n 2 -s 1 --launcher local', '--num-epochs 30',
                 '--lr-decay 0.1 --lr-decay-epoch 20,25', '--model cifar_resnet110_v1',
                 '--dataset cifar100', '--batch-size 128', '--lr 0.05', '--seed 42',
                 'cifar100-fraction0.1'):
        assert part in first, part
    assert '--seed 43' in commands[2]
    assert '--dssp-mode paper' in commands[1]
    assert not (tmp_path / 'o').exists()            # a dry run writes nothing


def test_check_dataset(tmp_path):
    grid = _grid(tmp_path, 'bsp')
    assert check_dataset(grid, download=True) == []              # digits: nothing to check
    grid.dataset, grid.data_dir = 'cifar10', str(tmp_path)
    assert 'cifar10 is not under' in check_dataset(grid, download=False)[0]
    (tmp_path / 'cifar-10-python.tar.gz').write_bytes(b'')
    assert check_dataset(grid, download=False) == []


@pytest.mark.parametrize('name', ['digits', 'mnist5k'])
def test_check_dataset_names_the_install_of_a_missing_bundled_set(tmp_path, monkeypatch, name):
    """The runner looks for a bundled set's file as the workers do (mxnet_ssp.lab.
    bundled), before any process starts, and names the install when it is not there."""
    from mxnet_ssp.lab import bundled
    grid = _grid(tmp_path, 'bsp')
    grid.dataset = name
    assert check_dataset(grid, download=False) == []
    package, parts, requirement = bundled.BUNDLED[name]
    monkeypatch.setitem(bundled.BUNDLED, name, ('mxnet_ssp_no_such_package', parts, requirement))
    problem, = check_dataset(grid, download=False)
    assert problem.startswith('the %s dataset ships with mxnet_ssp_no_such_package, which is '
                              'not installed' % name)
    assert 'python -m pip install %s' % requirement in problem


def test_eta_from_the_runs_done_so_far():
    assert eta_text([], 5) == '' and eta_text([10.0], 0) == ''
    assert eta_text([50.0, 70.0], 1) == '; 1 run left, about 1 min to go'
    assert eta_text([60.0, 120.0], 30) == '; 30 runs left, about 45 min to go'
    assert eta_text([100.0], 60) == '; 60 runs left, about 1.7 h to go'


def test_run_env():
    env = run_env('/r', {'PATH': '/bin', 'DMLC_ROLE': 'worker', 'MXNET_SSP_STALENESS': '9',
                            'PYTHONPATH': '/x'})
    assert env['OMP_NUM_THREADS'] == '1' and env['MXNET_SSP_METRICS_DIR'] == '/r'
    assert 'DMLC_ROLE' not in env and 'MXNET_SSP_STALENESS' not in env
    assert env['PYTHONPATH'] == '/x'        # the training script is found as an installed module


# ---------------------------------------------------------------------------
# the runner, with a stand-in for train_cifar.py (real launcher jobs, no MXNet)
# ---------------------------------------------------------------------------
FAKE_TRAIN = textwrap.dedent('''
    """Stand-in for train_cifar.py: writes the files a run leaves, in a fraction of a second."""
    import argparse, json, os, sys, time
    p = argparse.ArgumentParser()
    for flag in ('--model', '--dataset', '--batch-size', '--num-epochs', '--lr', '--momentum',
                 '--wd', '--seed', '--save-dir', '--log-interval', '--kvstore', '--staleness',
                 '--dssp-mode', '--slowdown', '--data-dir'):
        p.add_argument(flag)
    p.add_argument('--sync-average', action='store_true')
    args = p.parse_args()                   # --help: prints the flags the runner looks for
    if os.environ.get('DMLC_ROLE') != 'worker':
        sys.exit(0)
    rank = int(os.environ['MXNET_SSP_LAUNCH_INDEX'])
    if args.kvstore == os.environ.get('FAKE_FAIL_KVSTORE'):
        sys.exit('worker %d: simulated crash' % rank)
    if args.kvstore == os.environ.get('FAKE_BAD_FLAG_KVSTORE'):
        print('usage: train_cifar.py ...', file=sys.stderr)
        print('train_cifar.py: error: --model %r is not valid' % args.model, file=sys.stderr)
        sys.exit(2)
    # every worker notes its run (the fixture keeps one line per run): a worker that stops
    # the job early (a divergence) may end the others before they get here
    with open(os.environ['FAKE_JOB_LOG'], 'a') as f:
        f.write('%s %s %s %s\\n' % (args.kvstore, args.seed, args.save_dir, args.lr))
    if (args.lr == os.environ.get('FAKE_DIVERGE_LR')
            and args.seed in os.environ.get('FAKE_DIVERGE_SEEDS', '').split(',')):
        # as train_cifar.py's divergence guard says it (and its exit status)
        print('train_cifar.py: error: worker %d diverged at iteration 2 (epoch 1): the loss '
              'is nan, with --lr %s' % (rank, args.lr), file=sys.stderr)
        sys.exit(3)
    if args.kvstore == os.environ.get('FAKE_HANG_KVSTORE'):
        with open(os.path.join(args.save_dir, 'hanging-%d.pid' % rank), 'w') as f:
            f.write(str(os.getpid()))
        time.sleep(3600)                    # until the job is stopped
    start = time.time()
    with open(os.path.join(args.save_dir, 'train-worker%d.jsonl' % rank), 'w') as f:
        for i in range(1, 4):
            f.write(json.dumps({'rank': rank, 'iteration': i, 'epoch': i, 'time': start + i,
                                'compute_s': 0.01, 'step_s': 0.01, 'loss': 1.0,
                                'sleep_s': 0.0}) + '\\n')
    if rank == 0:
        acc = {'dist_sync': 0.6, 'dist_async': 0.5}.get(args.kvstore, 0.7)
        acc = float(os.environ.get('FAKE_ACC', acc))
        if 'FAKE_LR_BEST' in os.environ and float(args.lr) != float(os.environ['FAKE_LR_BEST']):
            acc *= 0.9                      # --tune-lr's tests: one rate is the best
        with open(os.path.join(args.save_dir, 'eval.jsonl'), 'w') as f:
            for i in range(1, 4):
                f.write(json.dumps({'time': start + i, 'elapsed_s': float(i), 'epoch': i,
                                    'iteration': i, 'accuracy': acc * i / 3}) + '\\n')
        with open(os.path.join(args.save_dir, 'summary.json'), 'w') as f:
            json.dump({'final_accuracy': acc, 'wall_time_s': 3.0, 'kvstore': args.kvstore}, f)
''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    script = tmp_path / 'fake_train.py'
    script.write_text(FAKE_TRAIN)
    jobs = tmp_path / 'jobs.log'
    monkeypatch.setenv('FAKE_JOB_LOG', str(jobs))

    def command(*extra, paradigms='bsp,asp,dssp', trials='2'):
        return [sys.executable, '-m', 'mxnet_ssp.lab.reproduce', '--preset', 'tiny',
                '--out', str(tmp_path / 'out'), '--train-script', str(script),
                '--paradigms', paradigms, '--trials', trials, '--timeout', '60'] + list(extra)

    def run(*extra, **grid):
        proc = subprocess.run(command(*extra, **grid), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300,
                              env=job_env(tmp_path))
        lines = jobs.read_text().splitlines() if jobs.exists() else []
        started = list(dict.fromkeys(lines))         # one line per run, in start order
        jobs.unlink(missing_ok=True)
        return proc, started

    run.out = tmp_path / 'out'
    run.command = command
    run.jobs = jobs
    return run


def test_runner_resumes_and_redoes_half_written_runs(fake):
    proc, started = fake('--no-plots')
    assert proc.returncode == 0, proc.stdout
    assert 'batch 64 per worker, lr 0.05 (momentum 0.9' in (fake.out / 'report.md').read_text()
    assert len(started) == 6 and 'started 6 run(s)' in proc.stdout
    # the cost before it starts, then what is left after each run (the last says nothing)
    assert ('6 run(s) to do, 0 finished earlier; the whole grid\'s cost: %s'
            % PRESETS['tiny'].cost) in proc.stdout
    for left in range(5, 0, -1):
        assert re.search(r'\[%d/6\] .*: done in .*; %d runs? left, about \d+ min to go'
                         % (6 - left, left), proc.stdout), proc.stdout
    assert re.search(r'\[6/6\] .*: done in [^;]*\n', proc.stdout), proc.stdout
    report = (fake.out / 'report.md').read_text()
    assert [r[0] for r in _table(report, 'Time to reach')] == ['BSP', 'ASP', 'DSSP [3,15]']
    marker = json.loads((fake.out / 'runs' / 'asp' / 'trial2' / 'run.json').read_text())
    assert marker['status'] == 'ok' and marker['seed'] == 43 and marker['exit_code'] == 0

    # a second invocation starts no job
    proc, started = fake('--no-plots')
    assert proc.returncode == 0 and started == [], proc.stdout
    assert 'started 0 run(s), skipped 6' in proc.stdout

    # a half-written run (killed before its marker) and a stale file are redone
    half = fake.out / 'runs' / 'dssp' / 'trial1'
    (half / 'run.json').unlink()
    (half / 'stale.txt').write_text('left by a killed run')
    proc, started = fake('--no-plots')
    assert proc.returncode == 0, proc.stdout
    assert len(started) == 1 and started[0].startswith('dist_dssp 42 ')
    assert not (half / 'stale.txt').exists() and (half / 'run.json').exists()

    # more trials later: only the new ones run; the dry run says what would happen
    proc, started = fake('--no-plots', trials='3')
    assert len(started) == 3 and 'started 3 run(s), skipped 6' in proc.stdout
    assert '3 run(s) to do, 6 finished earlier' in proc.stdout
    proc, started = fake('--dry-run', trials='3')
    assert started == [] and proc.stdout.count('finished, would be skipped') == 9


def test_tune_lr_chooses_each_paradigms_rate_on_seeds_of_its_own(fake, monkeypatch):
    monkeypatch.setenv('FAKE_LR_BEST', '0.1')
    argv = ('--no-plots', '--tune-lr', '0.05,0.1', '--tune-trials', '1')
    proc, started = fake(*argv, paradigms='bsp,asp', trials='1')
    assert proc.returncode == 0, proc.stdout
    # tuning first, on seed 42 + 1000: ASP at 0.05 and 0.1, BSP at the same per-gradient
    # rates: 0.1 and 0.2 (x 2 workers, as it averages their gradients)
    tuning = [line.split() for line in started if line.split()[1] == '1042']
    trials = [line.split() for line in started if line.split()[1] == '42']
    assert started.index(' '.join(trials[0])) > 0 and len(started) == 6
    assert sorted((k, lr) for k, _, _, lr in tuning) == [
        ('dist_async', '0.05'), ('dist_async', '0.1'), ('dist_sync', '0.1'),
        ('dist_sync', '0.2')]
    assert sorted((k, lr) for k, _, _, lr in trials) == [('dist_async', '0.1'), ('dist_sync', '0.1')]
    assert all('/tune/lr' in d for _, _, d, _ in tuning)
    tuned = json.loads((fake.out / 'tuned_lr.json').read_text())
    assert tuned['bsp']['chosen'] == 0.1 and tuned['asp']['chosen'] == 0.1
    assert sorted(tuned['bsp']['candidates']) == ['lr0.1', 'lr0.2']
    assert tuned['bsp']['candidates']['lr0.1']['final_accuracy'] == [0.6]
    assert tuned['bsp']['ranked'] == [[0.1, 0.9], [0.2, 0.9]]
    report = (fake.out / 'report.md').read_text()
    assert '## Learning rate per paradigm (--tune-lr)' in report and '| BSP |' in report
    assert 'lr per paradigm, chosen by --tune-lr (bsp 0.1, asp 0.1; see' in report
    assert 'lr 0.05' not in report.split('\n\n')[1]          # the header names no one rate
    assert '--tune-lr: bsp ranks lr0.1, lr0.2' in proc.stdout
    # everything finished: a second invocation starts nothing and keeps the choice
    proc, started = fake(*argv, paradigms='bsp,asp', trials='1')
    assert proc.returncode == 0 and started == [], proc.stdout
    # the grid keeps its rates: other ones in the same --out are refused
    proc, started = fake('--no-plots', '--tune-lr', '0.05', paradigms='bsp,asp', trials='1')
    assert proc.returncode == 2 and 'tune_lr' in proc.stdout and started == []
    # a new --out holding only the choice (as the lab commits it): the trials, no tuning run
    kept = fake.out.with_name('kept')
    fake.out.rename(kept)
    fake.out.mkdir()
    shutil.copy(str(kept / 'tuned_lr.json'), str(fake.out / 'tuned_lr.json'))
    proc, started = fake(*argv, paradigms='bsp,asp', trials='1')
    assert proc.returncode == 0, proc.stdout
    assert sorted(s.split()[1] for s in started) == ['42', '42'], started
    assert 'no tuning run is run again' in proc.stdout
    assert json.loads((fake.out / 'tuned_lr.json').read_text()) == tuned
    proc, started = fake('--dry-run', *argv, paradigms='bsp,asp', trials='1')
    assert proc.returncode == 0 and started == [] and 'no tuning run would run' in proc.stdout
    assert 'tune/lr' not in proc.stdout and '--lr 0.1' in proc.stdout, proc.stdout
    # a choice made from other rates is not this grid's: it tunes again
    shutil.rmtree(str(fake.out))
    fake.out.mkdir()
    shutil.copy(str(kept / 'tuned_lr.json'), str(fake.out / 'tuned_lr.json'))
    proc, started = fake('--no-plots', '--tune-lr', '0.1,0.4', '--tune-trials', '1',
                         paradigms='bsp,asp', trials='1')
    assert proc.returncode == 0 and len([s for s in started if s.split()[1] == '1042']) == 4


def test_a_tuning_ranked_at_another_target_is_not_ranked_again_unasked(fake, monkeypatch):
    """The lab fixes the trials' target from the tuning runs after ranking them at another:
    a --targets whose last differs from the one tuned_lr.json was ranked at is refused
    before any run starts, naming both, instead of ranking the tuning again."""
    monkeypatch.setenv('FAKE_LR_BEST', '0.1')
    argv = ('--no-plots', '--tune-lr', '0.05,0.1', '--tune-trials', '1')
    proc, started = fake(*argv, paradigms='asp', trials='1')
    assert proc.returncode == 0, proc.stdout
    tuned = (fake.out / 'tuned_lr.json').read_text()
    ranked_at = json.loads(tuned)['asp']['target']
    other = 0.999 if ranked_at != 0.999 else 0.998
    proc, started = fake(*argv, '--targets', '%g,%g' % (ranked_at, other), paradigms='asp',
                         trials='1')
    assert proc.returncode == 2 and started == [], proc.stdout
    assert 'was ranked at %g, and running would rank it again at %g' % (ranked_at, other) \
        in proc.stdout, proc.stdout
    assert (fake.out / 'tuned_lr.json').read_text() == tuned
    # the report at the other target from the same runs: nothing is ranked again
    proc, started = fake(*argv, '--targets', '%g,%g' % (ranked_at, other), '--report-only',
                         paradigms='asp', trials='1')
    assert proc.returncode == 0 and started == [], proc.stdout
    assert (fake.out / 'tuned_lr.json').read_text() == tuned
    report = (fake.out / 'report.md').read_text()
    assert '%g' % other in report
    # the tuning's table is what it ranked: times to the tuning's target, said so
    tuning = report[report.index('## Learning rate per paradigm'):]
    assert 'median seconds to hold %g (reached / trials)' % ranked_at in tuning
    assert 'The tuning ranked at %g; the verdicts above are at %g.' % (ranked_at, other) \
        in tuning


def test_the_runner_up_and_momentum_are_tuned_too(fake, monkeypatch):
    monkeypatch.setenv('FAKE_LR_BEST', '0.1')
    argv = ('--no-plots', '--tune-lr', '0.05,0.1', '--tune-trials', '1', '--tune-momentum',
            '0.8,0.9')
    proc, started = fake(*argv, paradigms='asp', trials='1')
    assert proc.returncode == 0, proc.stdout
    tuned = json.loads((fake.out / 'tuned_lr.json').read_text())
    assert sorted(tuned['asp']['candidates']) == ['lr0.05-m0.8', 'lr0.05-m0.9', 'lr0.1-m0.8',
                                                 'lr0.1-m0.9']
    assert tuned['asp']['ranked'][0] == [0.1, 0.8]      # tie on momentum: the smaller
    # the runner-up in a new --out from the same choice
    kept = fake.out.with_name('kept2')
    fake.out.rename(kept)
    fake.out.mkdir()
    shutil.copy(str(kept / 'tuned_lr.json'), str(fake.out / 'tuned_lr.json'))
    proc, _ = fake('--dry-run', *argv, '--tuned-choice', 'runner-up', paradigms='asp',
                   trials='1')
    assert proc.returncode == 0 and '--lr 0.1 --momentum 0.9' in proc.stdout, proc.stdout


def test_a_tuning_run_that_diverged_never_reached_the_target(fake, monkeypatch):
    """docs/lab.md ranks settings by the median time to the target, "never = infinitely
    long": a rate that diverged on two of its three seeds is not chosen for the one where it
    was best (left out, its median was that one run), and a crash is not counted as never."""
    monkeypatch.setenv('FAKE_LR_BEST', '0.1')
    monkeypatch.setenv('FAKE_ACC', '0.9')             # every run reaches the target, 0.8
    monkeypatch.setenv('FAKE_DIVERGE_LR', '0.1')
    monkeypatch.setenv('FAKE_DIVERGE_SEEDS', '1043,1044')
    argv = ('--no-plots', '--tune-lr', '0.05,0.1', '--tune-trials', '3')
    proc, started = fake(*argv, paradigms='asp', trials='1')
    # a diverged tuning run is a result, not a failure of the lab: the trial ran, exit 0
    assert proc.returncode == 0 and 'asp lr0.1 trial 3: diverged after' in proc.stdout, \
        proc.stdout
    assert 'FAILED' not in proc.stdout, proc.stdout
    tuned = json.loads((fake.out / 'tuned_lr.json').read_text())['asp']
    assert tuned['candidates']['lr0.1']['times_s'][1:] == [None, None], tuned
    assert tuned['candidates']['lr0.1']['final_accuracy'] == [0.9, None, None], tuned
    assert tuned['chosen'] == 0.05 and tuned['ranked'][0][0] == 0.05, tuned
    marker = json.loads((fake.out / 'runs' / 'asp' / 'tune' / 'lr0.1' / 'trial3' / 'run.json')
                        .read_text())
    assert marker['status'] == 'diverged' and 'diverged at iteration 2' in marker['reason']
    # and a result is not run again: a second call with the same settings starts nothing
    (fake.out / 'tuned_lr.json').unlink()
    proc, started = fake(*argv, paradigms='asp', trials='1')
    assert proc.returncode == 0 and started == [], (started, proc.stdout)
    assert json.loads((fake.out / 'tuned_lr.json').read_text())['asp']['chosen'] == 0.05
    # a crash of the same runs is not a result: left out, they run again
    shutil.rmtree(str(fake.out))
    monkeypatch.delenv('FAKE_DIVERGE_LR')
    monkeypatch.setenv('FAKE_FAIL_KVSTORE', 'dist_async')
    proc, _ = fake(*argv, paradigms='asp', trials='1')
    tuned = json.loads((fake.out / 'tuned_lr.json').read_text())['asp']
    assert proc.returncode == 1 and tuned['chosen'] is None and tuned['ranked'] == [], tuned


def test_a_trial_that_diverged_is_a_result_counted_as_never(fake, monkeypatch):
    """A trial whose training diverged is not a failure of the lab (exit 0) nor run again,
    and the verdicts count it as never reaching a target with final accuracy 0, where a
    crash is left out."""
    from mxnet_ssp.lab.reproduce.collect import gather
    from mxnet_ssp.lab.reproduce.verdicts import seed_accuracies, seed_times
    monkeypatch.setenv('FAKE_DIVERGE_LR', '0.05')       # the tiny preset's rate
    monkeypatch.setenv('FAKE_DIVERGE_SEEDS', '42')
    proc, started = fake('--no-plots', paradigms='asp')
    assert proc.returncode == 0, proc.stdout
    # the next trial still runs: the script's "train_cifar.py: error: ..." is not read as a
    # bad setting that would fail every run (which stopped the grid before)
    assert len(started) == 2 and 'asp trial 1: diverged after' in proc.stdout, proc.stdout
    assert 'not started' not in proc.stdout, proc.stdout
    report = (fake.out / 'report.md').read_text()
    assert '## Failed and diverged runs' in report and '(diverged)' in report, report
    grid = types.SimpleNamespace(arms=[parse_arm('asp')], trials=2, seed=42)
    (_, trials), = gather(grid, str(fake.out))
    assert [t['status'] for t in trials] == ['diverged', 'ok']
    assert seed_times(trials, 0.6) == {42: math.inf, 43: seed_times(trials[1:], 0.6)[43]}
    assert seed_times(trials, 0.6, 10.0, metric='shortfall')[42] == 10.0
    assert seed_accuracies(trials)[42] == 0.0
    # a second call runs nothing: the diverged trial has its result
    proc, started = fake('--no-plots', paradigms='asp')
    assert proc.returncode == 0 and started == [], proc.stdout


def test_a_geometric_grid_of_rates_in_steps_of_sqrt2():
    from mxnet_ssp.lab.reproduce.grid import UsageError, parse_rates
    assert parse_rates('0.0025:0.01:sqrt2') == (0.0025, 0.003536, 0.005, 0.007071, 0.01)
    assert parse_rates('0.01:0.04:2') == (0.01, 0.02, 0.04)
    with pytest.raises(UsageError, match='LOW:HIGH:STEP with STEP sqrt2 or 2'):
        parse_rates('0.01:0.04:3')


def test_choose_lr_takes_the_fastest_then_the_most_accurate_then_the_smallest():
    inf = float('inf')
    assert choose_lr({0.1: [(5.0, 0.9), (7.0, 0.9), (inf, 0.8)],
                      0.2: [(6.0, 0.9), (6.5, 0.9), (6.6, 0.9)]}) == 0.2   # medians 7 / 6.5
    assert choose_lr({0.1: [(inf, 0.8)], 0.2: [(inf, 0.85)]}) == 0.2       # never: accuracy
    assert choose_lr({0.2: [(3.0, 0.9)], 0.1: [(3.0, 0.9)]}) == 0.1        # a tie: smaller
    assert choose_lr({0.1: [], 0.2: [(inf, None)]}) == 0.2
    assert choose_lr({0.1: []}) is None


def test_failed_runs_are_reported_and_exit_1(fake, monkeypatch):
    monkeypatch.setenv('FAKE_FAIL_KVSTORE', 'dist_async')
    proc, started = fake('--no-plots')
    assert proc.returncode == 1, proc.stdout
    assert len(started) == 4                     # the other runs went on
    assert 'asp trial 1: FAILED' in proc.stdout
    report = (fake.out / 'report.md').read_text()
    assert '## Failed and diverged runs' in report and 'simulated crash' in report
    row = [r for r in _table(report, 'Time to reach') if r[0] == 'ASP'][0]
    assert row[-1] == '0/2'
    # fixed: the next invocation retries only the failed runs
    monkeypatch.delenv('FAKE_FAIL_KVSTORE')
    proc, started = fake('--no-plots')
    assert proc.returncode == 0 and sorted(s.split()[1] for s in started) == ['42', '43']
    assert 'Failed and diverged runs' not in (fake.out / 'report.md').read_text()


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open('/proc/%d/stat' % pid) as f:           # a zombie no one has reaped yet
        return f.read().rsplit(')', 1)[1].split()[0] == 'Z'


def test_sigint_stops_a_runner_that_a_shell_started_in_the_background(fake, tmp_path,
                                                                     monkeypatch):
    """`mxnet-ssp-reproduce ... &` (or nohup) starts the runner with SIGINT ignored;
    `kill -INT` must still stop it: the running job stopped, no further run started, exit
    130, and the interrupted run is not counted as finished."""
    monkeypatch.setenv('FAKE_HANG_KVSTORE', 'dist_sync')
    proc = subprocess.Popen(fake.command('--no-plots', paradigms='bsp,asp', trials='1'),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=job_env(tmp_path), start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    run = fake.out / 'runs' / 'bsp' / 'trial1'
    try:
        deadline = time.monotonic() + 60
        while len(list(run.glob('hanging-*.pid'))) < 2:        # both workers are in the run
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.05)
        hanging = [int(p.read_text()) for p in run.glob('hanging-*.pid')]
        proc.send_signal(signal.SIGINT)             # the runner alone, not its group
        out = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGINT, out
    assert 'interrupted by SIGINT' in out, out
    assert len(set(fake.jobs.read_text().splitlines())) == 1, out  # asp never started
    assert not (run / MARKER).exists()                             # redone on the next call
    deadline = time.monotonic() + 30
    while not all(_gone(pid) for pid in hanging):
        assert time.monotonic() < deadline, 'a worker of the stopped job is still running'
        time.sleep(0.05)


def test_a_settings_error_stops_the_grid(fake, monkeypatch):
    monkeypatch.setenv('FAKE_BAD_FLAG_KVSTORE', 'dist_sync')
    proc, started = fake('--no-plots')
    assert proc.returncode == 1 and started == [], proc.stdout
    assert 'the remaining runs would fail the same way' in proc.stdout
    report = (fake.out / 'report.md').read_text()
    assert "--model 'alexnet-small' is not valid" in report and 'Not run yet' in report


def test_a_script_without_a_needed_flag_exits_2(tmp_path, capsys):
    script = tmp_path / 'old_train.py'
    script.write_text(FAKE_TRAIN.replace("p.add_argument('--sync-average', action='store_true')",
                                         ''))
    argv = ['--preset', 'tiny', '--out', str(tmp_path / 'out'), '--train-script', str(script),
            '--no-plots']
    code, text = _main(capsys, argv + ['--paradigms', 'bsp'])
    assert code == 2 and 'does not accept --sync-average' in text, text
    assert not (tmp_path / 'out' / 'runs').exists()
    code, text = _main(capsys, argv + ['--paradigms', 'asp', '--dry-run'])
    assert code == 0 and 'warning' not in text                # only BSP needs it


@pytest.mark.need(module='matplotlib', install=INSTALL_TEST)
def test_plots_from_the_stand_in(fake):
    proc, _ = fake(paradigms='bsp,asp,ssp3,ssp4,ssp5,ssp6,dssp,dssp-paper', trials='1')
    assert proc.returncode == 0, proc.stdout
    plots = sorted(os.listdir(fake.out / 'plots'))
    assert plots == ['average_ssp_vs_dssp.png', 'paradigms.png', 'ssp_vs_dssp.png',
                     'trials.png']
    for name in plots:
        assert (fake.out / 'plots' / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert '![Average SSP vs DSSP](plots/average_ssp_vs_dssp.png)' in (
        fake.out / 'report.md').read_text()


def test_missing_matplotlib_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)     # import fails
    code, text = _main(capsys, ['--preset', 'tiny', '--out', str(tmp_path / 'o')])
    assert code == 2 and 'matplotlib' in text and '--no-plots' in text


# ---------------------------------------------------------------------------
# real runs
# ---------------------------------------------------------------------------
@pytest.mark.integration
def test_tiny_preset_end_to_end(tmp_path):
    out = tmp_path / 'results'
    argv = [sys.executable, '-m', 'mxnet_ssp.lab.reproduce', '--preset', 'tiny', '--out', str(out),
            '--paradigms', 'bsp,dssp'] + PLOT_FLAGS
    env = job_env(tmp_path)
    proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert 'started 2 run(s)' in proc.stdout
    report = (out / 'report.md').read_text()
    rows = _table(report, 'Time to reach')
    assert [r[0] for r in rows] == ['BSP', 'DSSP [3,15]']
    for name in ('bsp', 'dssp'):
        run = out / 'runs' / name / 'trial1'
        for f in ('run.json', 'summary.json', 'eval.jsonl', 'train-worker0.jsonl',
                  'train-worker1.jsonl', 'job.log', 'model-final.params'):
            assert (run / f).exists(), (name, f)
        assert not list(run.glob('model-epoch*.params'))
    assert (out / 'runs' / 'dssp' / 'trial1' / 'worker-0.jsonl').exists()
    results = json.loads((out / 'results.json').read_text())
    medians = {a['arm']: a['trials'][0] for a in results['arms']}
    assert medians['dssp']['release_lead_max'] <= 15
    assert medians['bsp']['max_lead'] <= 1
    if HAVE_MATPLOTLIB:
        assert sorted(os.listdir(out / 'plots')) == ['paradigms.png', 'trials.png']
    mtime = (out / 'runs' / 'bsp' / 'trial1' / 'run.json').stat().st_mtime_ns
    proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0 and 'started 0 run(s), skipped 2' in proc.stdout, proc.stdout
    assert (out / 'runs' / 'bsp' / 'trial1' / 'run.json').stat().st_mtime_ns == mtime


@pytest.mark.integration
@pytest.mark.parametrize('store', [['--kvstore', 'dist_async'],
                                   ['--kvstore', 'dist_async', '--optimizer', 'sasgd',
                                    '--staleness-lr', 'inverse'],
                                   ['--kvstore', 'dist_sync', '--sync-average']],
                         ids=['plain', 'slots', 'bsp'])
def test_the_servers_model_on_a_wall_clock(tmp_path, store):
    """A real job with MXNET_SSP_SERVER_SNAPSHOTS: the server's copies, one per grid point
    whoever is held, evaluated after the run; the last point is the final model's accuracy."""
    from mxnet_ssp.lab.reproduce.server_eval import evaluate_run
    from mxnet_ssp.lab.reproduce.runner import run_env
    run = tmp_path / 'run'
    run.mkdir()
    python = sys.executable
    argv = [python, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher', 'local',
            '--timeout', '200', python, '-m', 'mxnet_ssp.lab.train_cifar', '--model',
            'mlp', '--dataset', 'digits', '--batch-size', '32', '--num-epochs', '20', '--lr',
            '0.05', '--seed', '1', '--save-dir', str(run), '--no-progress', '--save-period',
            '0', '--emulate', 'workers=2,base_ms=20,factors=1:3', '--num-iterations', '60'
            ] + store
    env = dict(job_env(tmp_path), **run_env(str(run), snapshots=0.1))
    proc = subprocess.run(argv, cwd=str(run), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    points = evaluate_run(str(run), 'mlp', 'digits')
    assert not list(run.glob('server-*-snapshots.bin'))            # evaluated, then deleted
    written = [json.loads(line) for line in (run / 'eval_server.jsonl').read_text().split('\n')
               if line]
    assert [(p['elapsed_s'], p['accuracy']) for p in written] == points
    times = [t for t, _ in points]
    # one point per 0.1 s from the first update to worker 0's final evaluation: no gaps,
    # although the slow worker holds the fast one (BSP) at every step
    assert all(abs(b - a - 0.1) < 1e-3 for a, b in zip(times, times[1:])), times
    final = [json.loads(line) for line in (run / 'eval.jsonl').read_text().split('\n')
             if line and json.loads(line).get('final')][-1]
    assert times[-1] <= final['elapsed_s'] < times[-1] + 0.1 + 1e-9
    # the final evaluation reads the servers' weights once every worker is done; the last points
    # are the servers' model in the last 0.3 s before it: one of them is the final model or a
    # few updates from it (under load the final evaluation comes up to 0.1 s after the last
    # point).  In slot mode the final model was once worker 0's last pull (a refresh of its
    # arrays' own keys, not of their bucket): 0.03-0.07 off in 2 of 6 runs under load
    assert min(abs(a - final['accuracy']) for _, a in points[-3:]) <= 0.03, (points[-3:], final)
    assert len(points) >= 10 and points[0][1] < points[-1][1]


@pytest.mark.slow
@pytest.mark.integration
def test_quick_preset_one_trial(tmp_path):
    out = tmp_path / 'quick'
    argv = [sys.executable, '-m', 'mxnet_ssp.lab.reproduce', '--preset', 'quick', '--out', str(out),
            '--trials', '1'] + PLOT_FLAGS
    proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=1800, env=job_env(tmp_path))
    assert proc.returncode == 0, proc.stdout[-4000:]
    rows = _table((out / 'report.md').read_text(), 'Time to reach')
    assert [r[0] for r in rows] == ['BSP', 'ASP', 'SSP s=3', 'SSP s=6', 'SSP s=15',
                                    'DSSP [3,15]', 'DSSP [3,15] paper', 'DSSP [3,15] threshold',
                                    'SSP average (s=3,6,15)']
    results = json.loads((out / 'results.json').read_text())
    trials = {a['arm']: a['trials'][0] for a in results['arms']}
    for name, bound in (('ssp3', 3), ('ssp6', 6), ('ssp15', 15), ('dssp', 15),
                        ('dssp-threshold', 15)):
        assert trials[name]['release_lead_max'] <= bound, name
    for trial in trials.values():
        assert trial['final_accuracy'] > 0.8


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _grid(tmp_path, paradigms, trials=1):
    args = build_parser().parse_args(['--preset', 'tiny', '--out', str(tmp_path),
                                      '--paradigms', paradigms, '--trials', str(trials),
                                      '--targets', '0.9,0.92'])
    return resolve_grid(args)


def _synthetic_run(directory, arm, grid, trial, accuracies):
    """A finished run: worker 0 does 6 iterations in 3 s, worker 1 does 3; evals each second."""
    os.makedirs(directory)
    with open(os.path.join(directory, 'eval.jsonl'), 'w') as f:
        for i, acc in enumerate(accuracies, 1):
            f.write(json.dumps({'elapsed_s': float(i), 'accuracy': acc, 'epoch': i,
                                'iteration': 2 * i, 'time': 100.0 + i}) + '\n')
    for rank, count in ((0, 6), (1, 3)):
        with open(os.path.join(directory, 'train-worker%d.jsonl' % rank), 'w') as f:
            for i in range(1, count + 1):
                f.write(json.dumps({'rank': rank, 'iteration': i, 'time': 100.0 + i * 3.0 / count,
                                    'compute_s': 0.1, 'step_s': 0.2, 'sleep_s': 0.0}) + '\n')
    if arm.family in ('ssp', 'dssp'):
        with open(os.path.join(directory, 'worker-0.jsonl'), 'w') as f:
            for i in range(1, 7):
                f.write(json.dumps({'rank': 0, 'clock': i, 'wait_s': 0.05, 'lead': min(i, 3),
                                    'granted': 0}) + '\n')
    with open(os.path.join(directory, 'summary.json'), 'w') as f:
        json.dump({'final_accuracy': accuracies[-1], 'wall_time_s': 3.0}, f)
    write_json(os.path.join(directory, MARKER),
               {'status': 'ok', 'exit_code': 0, 'duration_s': 5.0,
                'seed': trial_seed(grid, trial),
                'signature': run_signature(grid, arm, trial)})


def _table(report, heading):
    """Rows (lists of cells) of the first markdown table after the heading containing `heading`."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('#') and heading in line)
    rows, inside = [], False
    for line in lines[start + 1:]:
        if line.startswith('|'):
            inside = True
            rows.append([c.strip() for c in line.strip('|').split('|')])
        elif inside:
            break
    return rows[2:]
