"""Tests of the demo, mxnet_ssp.lab.compare_paradigms (`mxnet-ssp-compare`).

Flags, commands and the table start no job; the README's first command runs
for real, shortened (default run), and longer in the slow set.
"""
import json
import os
import shlex
import sys

import pytest

from conftest import job_env, read_jsonl
from mxnet_ssp.lab import compare_paradigms as cp

from conftest import ROOT  # noqa: E402  (the checkout)

#: paradigm -> its run directory under <out>/runs (the reproduction's arm names)
ARMS = {'bsp': 'bsp', 'asp': 'asp', 'ssp': 'ssp3', 'dssp': 'dssp'}


@pytest.mark.parametrize('argv,words', [
    (['--paradigms', 'bsp,hogwild'], ['--paradigms', 'hogwild', 'bsp,asp,ssp,dssp']),
    (['--paradigms', 'bsp,bsp'], ['--paradigms', 'twice']),
    (['--epochs', '0'], ['--epochs', '>= 1']),
    (['--num-workers', '0'], ['--num-workers']),
    (['--slowdown', '4:2'], ['--slowdown', '0..3']),
    (['-n', '2', '--slowdown', '1:0.5'], ['--slowdown', 'factors >= 1']),
    (['--target-accuracy', '1.5'], ['--target-accuracy']),
])
def test_bad_flags_exit_2(capsys, argv, words):
    with pytest.raises(SystemExit) as info:
        cp.parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err


def test_commands_per_paradigm(tmp_path):
    args = cp.parse_args(['--out', str(tmp_path), '--slowdown', '2:3', '--extra', '--wd 0'])
    assert args.paradigm_list == ['bsp', 'asp', 'ssp', 'dssp']
    cmds = {p: cp.train_command(args, p, str(tmp_path / p)) for p in args.paradigm_list}

    def flag(cmd, name):
        return cmd[cmd.index(name) + 1]

    assert flag(cmds['bsp'], '--kvstore') == 'dist_sync'
    assert '--sync-average' not in cmds['bsp']        # the demo sums, as gluon.Trainer does
    assert flag(cmds['asp'], '--kvstore') == 'dist_async'
    assert flag(cmds['ssp'], '--staleness') == '3'
    assert flag(cmds['dssp'], '--staleness') == '3,15'
    for p, cmd in cmds.items():
        assert cmd[:3] == [sys.executable, '-m', 'mxnet_ssp.launch']
        assert flag(cmd, '-n') == '4' and flag(cmd, '--launcher') == 'local'
        train = cmd.index('mxnet_ssp.lab.train_cifar')
        assert cmd[train - 2:train] == [sys.executable, '-m']
        assert flag(cmd, '--slowdown') == '2:3'
        assert flag(cmd, '--save-dir') == str(tmp_path / p)
        last_wd = len(cmd) - 1 - cmd[::-1].index('--wd')    # --extra comes last: it wins
        assert cmd[last_wd + 1] == '0' and last_wd > cmd.index('--kvstore')
        assert ('--staleness' in cmd) == (p in ('ssp', 'dssp'))
    no_slow = cp.parse_args(['--slowdown', ''])
    assert '--slowdown' not in cp.train_command(no_slow, 'bsp', 'x')


@pytest.mark.parametrize('flag', ['--ssp-staleness', '--dssp-staleness'])
def test_bad_staleness_exits_2_naming_the_flags(capsys, flag):
    with pytest.raises(SystemExit) as info:
        cp.parse_args([flag, 'x'])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and "'x'" in err


def test_collect_and_table(tmp_path):
    """A run's files through the reproduction's collector into the demo's row and table."""
    args = cp.parse_args(['-n', '2'])
    grid = cp.to_grid(args)
    run = tmp_path / 'asp'
    run.mkdir()
    for rank, (n, dt) in enumerate(((10, 0.02), (8, 0.05))):
        with open(run / ('train-worker%d.jsonl' % rank), 'w') as f:
            for i in range(1, n + 1):
                f.write(json.dumps({'rank': rank, 'iteration': i, 'time': 100 + i * dt,
                                    'compute_s': dt / 2, 'step_s': dt / 2,
                                    'lead': 0}) + '\n')
    with open(run / 'eval.jsonl', 'w') as f:
        for elapsed, acc in ((1.0, 0.5), (2.0, 0.92), (3.0, 0.95)):
            f.write(json.dumps({'elapsed_s': elapsed, 'accuracy': acc, 'iteration': 5}) + '\n')
    with open(run / 'summary.json', 'w') as f:
        json.dump({'final_accuracy': 0.95, 'wall_time_s': 3.5,
                   'data_path': {'store_class': 'mxnet_ssp.stock_names.dist_async',
                                 'buckets': 2, 'arrays_in_buckets': 4, 'handed_off': None}}, f)
    marker = {'exit_code': 0, 'status': 'ok', 'duration_s': 12.3}
    result = cp.result_of(grid, args.arms['asp'], 'asp', str(run), marker)
    assert result['iterations_per_worker'] == {0: 10, 1: 8}
    assert result['iteration_ms_per_worker'] == {0: 20.0, 1: 50.0}
    assert result['time_to_target_s'] == 2.0 and result['final_accuracy'] == 0.95
    high = cp.to_grid(cp.parse_args(['-n', '2', '--target-accuracy', '0.99']))
    assert cp.result_of(high, args.arms['asp'], 'asp', str(run), marker)['time_to_target_s'] \
        is None

    failed = cp.result_of(grid, args.arms['dssp'], 'dssp', str(tmp_path / 'nothing'),
                          {'exit_code': 1, 'status': 'failed', 'duration_s': 12.3})
    table = cp.markdown_table([result, failed], cp.parse_args([]))
    lines = table.splitlines()
    assert lines[0].startswith('| paradigm |') and 'time to 90% (s)' in lines[0]
    assert lines[2] == ('| ASP | dist_async | mxnet-ssp, 2 buckets | 3.5 | 12.3 | 8/10 | 20/50 '
                        '| 0.950 | 2.0 |')
    assert lines[3] == ('| DSSP (failed, exit 1) | dist_dssp s=3,15 | - | - | 12.3 | - | - | - '
                        '| - |')
    bsp = dict(result, paradigm='BSP', kvstore='dist_sync')
    dssp = dict(result, paradigm='DSSP', kvstore='dist_dssp', wait_s_per_worker={'0': 1.25,
                                                                                 '1': 0.0})
    note = cp.where_the_time_went([bsp, result, dssp], cp.parse_args([]), cores=2).splitlines()
    assert note[1] == ('- 4 workers, 1 server(s) and a scheduler (6 processes, plus a controller '
                       'for SSP/DSSP) share 2 CPU core(s): they take turns, so every step is '
                       'slower than on a cluster.')
    assert '--slowdown 1:2.5' in note[2] and 'sleeps' in note[2]
    assert note[3] == ('- BSP: 20-50 ms per iteration (fastest-slowest worker); every worker '
                       'waits for the slowest at every step.')
    assert note[4].startswith('- ASP: 20-50 ms') and 'stale' in note[4]
    assert note[5].endswith('worker 0 at most, 1.2 s of 3.5 s of training.')
    assert cp.describe_data_path({'store_class': 'mxnet.kvstore.kvstore.KVStore', 'buckets': 0,
                                  'handed_off': None}) == "MXNet's own"
    assert cp.describe_data_path({'store_class': 'mxnet_ssp.stock_names.dist_sync',
                                  'buckets': 1, 'handed_off': 'row_sparse'}) == "MXNet's own"
    assert cp.describe_data_path({'store_class': 'mxnet_ssp.stock_names.dist_sync',
                                  'buckets': 1, 'handed_off': None}) == 'mxnet-ssp, 1 bucket'


def readme_demo_command():
    """The README's first command, after its install step, as arguments (run it in ROOT)."""
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    block = text.split('```', 2)[1]
    first = [line for line in block.splitlines() if line.strip()][0]
    install, sep, demo = first.partition('&&')
    assert sep and 'pip install' in install, first
    argv = shlex.split(demo)
    assert argv[0] == 'python', first
    return [sys.executable] + argv[1:]


@pytest.mark.integration
def test_readme_demo_command_one_epoch(tmp_path):
    """The README's first command for real, shortened to 2 workers and 1 epoch (~20-30 s).

    Four launcher jobs (scheduler, server, 2 workers each) on loopback; the
    table, results.json and every run's files must agree with what the runs
    wrote and with the digits split.
    """
    import subprocess
    from mxnet_ssp.lab import data
    out = tmp_path / 'compare'
    workers, batch, target = 2, 32, 0.5
    argv = readme_demo_command() + [
        '-n', str(workers), '--epochs', '1', '--model', 'mlp', '--batch-size', str(batch),
        '--target-accuracy', str(target), '--timeout', '90', '--out', str(out)]
    proc = subprocess.run(argv, env=job_env(tmp_path), cwd=ROOT, capture_output=True,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    expected_iterations = len(data.load('digits').train) // workers // batch
    with open(out / 'results.json') as f:
        runs = json.load(f)['runs']
    assert [r['paradigm'] for r in runs] == ['BSP', 'ASP', 'SSP', 'DSSP']
    assert [r['kvstore'] for r in runs] == ['dist_sync', 'dist_async', 'dist_ssp', 'dist_dssp']
    table = (out / 'results.md').read_text().split('\n\n')[0]
    assert table in proc.stdout                      # printed and written: the same table
    rows = [line.split('|')[1:-1] for line in table.splitlines()[2:]]
    assert len(rows) == 4
    for run, row in zip(runs, rows):
        name = run['paradigm'].lower()
        assert run['exit_code'] == 0, (name, run['log'])
        assert run['iterations_per_worker'] == {str(r): expected_iterations
                                               for r in range(workers)}, name
        with open(out / 'runs' / ARMS[name] / 'trial1' / 'summary.json') as f:
            summary = json.load(f)
        assert summary['kvstore'] == run['kvstore'] and summary['num_workers'] == workers
        assert run['final_accuracy'] == summary['final_accuracy'] > target, name  # chance: 0.1
        evals = read_jsonl(out / 'runs' / ARMS[name] / 'trial1' / 'eval.jsonl')
        first = next(e for e in evals if e['accuracy'] >= target)
        assert run['time_to_target_s'] == first['elapsed_s'], name
        cells = [c.strip() for c in row]
        assert cells[0] == run['paradigm'] and cells[1].startswith(run['kvstore'])
        assert cells[5] == '%d/%d' % (expected_iterations, expected_iterations)
        assert cells[7] == '%.3f' % run['final_accuracy']
        # one data path in every arm: mxnet-ssp's, with buckets, BSP included
        path = summary['data_path']
        assert run['data_path'] == path, name
        assert path['store_class'].startswith('mxnet_ssp.') and path['buckets'] >= 1, (name, path)
        assert path['handed_off'] is None and cells[2].startswith('mxnet-ssp, '), (name, path)
    # a line per job as it starts, the plot, where the time went, the results path at the end
    for i, run in enumerate(runs):
        assert 'job %d of 4: [%s] %s' % (i + 1, run['paradigm'], run['kvstore']) in proc.stdout
        assert run['curve'] and all(0 <= a <= 1 for _, a in run['curve']), run['paradigm']
    assert (out / 'accuracy.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert 'plot: %s' % (out / 'accuracy.png') in proc.stdout
    assert 'Where the time went:' in proc.stdout and 'share' in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith('results: %s ' % out)
    # the slow worker (rank 1, x2.5) slept; the SSP/DSSP runs stayed within their bounds

    slow = read_jsonl(out / 'runs' / 'bsp' / 'trial1' / 'train-worker1.jsonl')
    assert all(r['sleep_s'] > 0 for r in slow)
    for name, bound in (('ssp', 3), ('dssp', 15)):
        leads = [r['lead'] for rank in range(workers)
                 for r in read_jsonl(out / 'runs' / ARMS[name] / 'trial1' /
                                     ('worker-%d.jsonl' % rank))]
        assert len(leads) == workers * expected_iterations and max(leads) <= bound, name


@pytest.mark.slow
@pytest.mark.integration
def test_demo_runs_all_four_paradigms(tmp_path):
    """The demo end to end, shortened: 2 workers, 3 epochs (about a minute on 2 cores)."""
    import subprocess
    out = tmp_path / 'compare'
    env = job_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'train_scripts', 'compare_paradigms.py'),
         '-n', '2', '--epochs', '3', '--model', 'mlp', '--target-accuracy', '0.5',
         '--timeout', '120', '--out', str(out)],
        env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [l for l in proc.stdout.splitlines() if l.startswith('| ') and 'paradigm' not in l]
    assert [r.split('|')[1].strip() for r in rows] == ['BSP', 'ASP', 'SSP', 'DSSP']
    with open(out / 'results.json') as f:
        runs = json.load(f)['runs']
    for run in runs:
        assert run['exit_code'] == 0
        assert run['iterations_per_worker'] == {'0': 66, '1': 66}
        assert run['final_accuracy'] > 0.5 and run['time_to_target_s'] is not None
    assert (out / 'results.md').read_text().startswith('| paradigm |')
    with open(out / 'runs' / 'dssp' / 'trial1' / 'summary.json') as f:
        assert json.load(f)['staleness'] == '3,15'
