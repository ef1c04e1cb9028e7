"""Tests of the demo, mxnet_ssp.experiments.compare_paradigms (`mxnet-ssp-compare`).

Flags, commands and the table start no job; the README's first command runs
for real, shortened (default run), and longer in the slow set.
"""
import json
import os
import sys

import pytest

from conftest import job_env
from mxnet_ssp.experiments import compare_paradigms as cp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    args = cp.parse_args(['--out', str(tmp_path), '--slowdown', '2:3'])
    assert args.paradigm_list == ['bsp', 'asp', 'ssp', 'dssp']
    cmds = {p: cp.train_command(args, p, str(tmp_path / p)) for p in args.paradigm_list}
    assert cmds['bsp'][cmds['bsp'].index('--kvstore') + 1] == 'dist_sync'
    assert cmds['asp'][cmds['asp'].index('--kvstore') + 1] == 'dist_async'
    assert cmds['ssp'][-2:] == ['--staleness', '3']
    assert cmds['dssp'][-2:] == ['--staleness', '3,15']
    for p, cmd in cmds.items():
        assert cmd[:3] == [sys.executable, '-m', 'mxnet_ssp.experiments.train_cifar']
        assert cmd[cmd.index('--slowdown') + 1] == '2:3'
        assert cmd[cmd.index('--save-dir') + 1] == str(tmp_path / p)
        assert '--staleness' not in cmd or p in ('ssp', 'dssp')
    no_slow = cp.parse_args(['--slowdown', ''])
    assert '--slowdown' not in cp.train_command(no_slow, 'bsp', 'x')


def test_collect_and_table(tmp_path):
    run = tmp_path / 'asp'
    run.mkdir()
    for rank, (n, dt) in enumerate(((10, 0.02), (8, 0.05))):
        with open(run / ('train-worker%d.jsonl' % rank), 'w') as f:
            for i in range(1, n + 1):
                f.write(json.dumps({'rank': rank, 'iteration': i, 'time': 100 + i * dt}) + '\n')
    with open(run / 'eval.jsonl', 'w') as f:
        for elapsed, acc in ((1.0, 0.5), (2.0, 0.92), (3.0, 0.95)):
            f.write(json.dumps({'elapsed_s': elapsed, 'accuracy': acc, 'iteration': 5}) + '\n')
    with open(run / 'summary.json', 'w') as f:
        json.dump({'final_accuracy': 0.95, 'wall_time_s': 3.5}, f)
    result = cp.collect(str(run), 2, 0.9)
    assert result['iterations_per_worker'] == {0: 10, 1: 8}
    assert result['iteration_ms_per_worker'] == {0: 20.0, 1: 50.0}
    assert result['time_to_target_s'] == 2.0 and result['final_accuracy'] == 0.95
    assert cp.collect(str(run), 2, 0.99)['time_to_target_s'] is None

    result.update({'paradigm': 'ASP', 'kvstore': 'dist_async', 'exit_code': 0,
                   'job_time_s': 12.3})
    failed = dict(result, paradigm='DSSP', kvstore='dist_dssp', exit_code=1,
                  iterations_per_worker={}, iteration_ms_per_worker={}, final_accuracy=None,
                  time_to_target_s=None, train_time_s=None)
    table = cp.markdown_table([result, failed], cp.parse_args([]))
    lines = table.splitlines()
    assert lines[0].startswith('| paradigm |') and 'time to 90% (s)' in lines[0]
    assert lines[2] == '| ASP | dist_async | 3.5 | 12.3 | 8/10 | 20/50 | 0.950 | 2.0 |'
    assert lines[3] == '| DSSP (failed, exit 1) | dist_dssp s=3,15 | - | 12.3 | - | - | - | - |'


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
    with open(out / 'dssp' / 'summary.json') as f:
        assert json.load(f)['staleness'] == '3,15'
