"""Tests of train_scripts/train_cifar.py: flag validation, model shapes, a short local run.

Flag checks run in this process (no job, no store is created); the training
run is one ``--kvstore local`` process on the bundled digits.
"""
import json
import logging
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'train_scripts', 'train_cifar.py')
sys.path.insert(0, os.path.join(ROOT, 'train_scripts'))

import train_cifar  # noqa: E402

WORKER_ENV = {'DMLC_ROLE': 'worker', 'DMLC_NUM_WORKER': '4'}


def bad_flag(capsys, argv, environ=None):
    """Parse `argv`; assert it exits with status 2; return the error text."""
    with pytest.raises(SystemExit) as info:
        train_cifar.parse_args(argv, environ={} if environ is None else environ)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert 'usage:' in err
    return err.split('error:', 1)[1]


@pytest.mark.parametrize('argv,flag,value,accepted', [
    (['--model', 'resnet9000'], '--model', 'resnet9000', 'alexnet-small'),
    (['--dataset', 'mnist'], '--dataset', 'mnist', 'cifar100'),
    (['--kvstore', 'dist_fast'], '--kvstore', 'dist_fast', 'dist_dssp'),
    (['--batch-size', '0'], '--batch-size', '0', '>= 1'),
    (['--num-epochs', '-2'], '--num-epochs', '-2', '>= 1'),
    (['--num-iterations', '0'], '--num-iterations', '0', '>= 1'),
    (['--lr', '0'], '--lr', '0', '> 0'),
    (['--lr', 'nan'], '--lr', 'nan', '> 0'),
    (['--momentum', '1.5'], '--momentum', '1.5', '[0, 1)'),
    (['--wd', '-1'], '--wd', '-1', '>= 0'),
    (['--log-interval', '-1'], '--log-interval', '-1', '>= 0'),
])
def test_bad_values_exit_2_naming_flag_value_and_accepted(capsys, argv, flag, value, accepted):
    err = bad_flag(capsys, argv + ['--kvstore', 'local'] if '--kvstore' not in argv else argv)
    assert flag in err and value in err and accepted in err


def test_non_numeric_value_exits_2(capsys):
    err = bad_flag(capsys, ['--kvstore', 'local', '--batch-size', 'big'])
    assert '--batch-size' in err and 'big' in err


def test_dist_store_without_launcher(capsys):
    err = bad_flag(capsys, ['--kvstore', 'dist_sync'])
    assert '--kvstore dist_sync' in err and 'DMLC_ROLE' in err and '--kvstore local' in err
    # the default store is dist_sync: a bare command outside a job says the same
    assert 'DMLC_ROLE' in bad_flag(capsys, [])


@pytest.mark.parametrize('store', ['local', 'dist_sync', 'dist_async'])
def test_staleness_only_with_our_stores(capsys, store):
    err = bad_flag(capsys, ['--kvstore', store, '--staleness', '3'], WORKER_ENV)
    assert '--staleness' in err and store in err and 'dist_ssp' in err and 'dist_dssp' in err


@pytest.mark.parametrize('store,value', [('dist_ssp', '3,15'), ('dist_ssp', 'x'),
                                         ('dist_dssp', '15,3'), ('dist_dssp', '-1'),
                                         ('dist_dssp', '1,2,3')])
def test_bad_staleness_values(capsys, store, value):
    err = bad_flag(capsys, ['--kvstore', store, '--staleness', value], WORKER_ENV)
    assert '--staleness' in err and value in err and store in err


def test_dssp_mode(capsys):
    err = bad_flag(capsys, ['--kvstore', 'dist_ssp', '--dssp-mode', 'paper'], WORKER_ENV)
    assert '--dssp-mode' in err and 'dist_dssp' in err
    err = bad_flag(capsys, ['--kvstore', 'dist_dssp', '--dssp-mode', 'eager'], WORKER_ENV)
    assert '--dssp-mode' in err and 'eager' in err and 'bounded' in err and 'paper' in err


@pytest.mark.parametrize('value,words', [
    ('4:2', ['rank 4', '4 worker(s)', '0..3']),
    ('1:0.5', ['factor', '>= 1']),
    ('1:x', ['1:x', 'RANK:FACTOR']),
    ('one', ['one', 'RANK:FACTOR']),
    ('-1:2', ['negative']),
    ('1:2,1:3', ['twice']),
])
def test_bad_slowdown(capsys, value, words):
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--slowdown=' + value], WORKER_ENV)
    assert '--slowdown' in err and value in err
    for word in words:
        assert word in err


def test_slowdown_rank_checked_against_local_job(capsys):
    err = bad_flag(capsys, ['--kvstore', 'local', '--slowdown', '1:2'])
    assert '--slowdown' in err and '1 worker(s)' in err


def test_valid_flags_parse():
    args = train_cifar.parse_args(
        ['--kvstore', 'dist_dssp', '--staleness', '3,15', '--dssp-mode', 'paper',
         '--slowdown', '1:2.5,3:4', '--model', 'mlp', '--dataset', 'cifar10'], environ=WORKER_ENV)
    assert args.slowdown_factors == {1: 2.5, 3: 4.0}
    assert args.kvstore == 'dist_dssp' and args.staleness == '3,15'
    args = train_cifar.parse_args(['--kvstore', 'local'], environ={})
    assert args.slowdown_factors == {} and args.dataset == 'digits'
    assert args.save_dir == os.path.join('.', 'results', 'run')


def test_make_kvstore_passes_ssp_settings(monkeypatch, tmp_path):
    import mxnet_ssp
    calls = []
    monkeypatch.setattr(mxnet_ssp, 'create', lambda name, **kw: calls.append((name, kw)) or 'kv')
    args = train_cifar.parse_args(['--kvstore', 'dist_dssp', '--staleness', '2,9',
                                   '--dssp-mode', 'paper', '--save-dir', str(tmp_path)],
                                  environ=WORKER_ENV)
    assert train_cifar.make_kvstore(args) == 'kv'
    assert calls == [('dist_dssp', {'staleness': '2,9', 'mode': 'paper',
                                    'metrics_dir': str(tmp_path)})]
    args = train_cifar.parse_args(['--kvstore', 'dist_ssp', '--save-dir', str(tmp_path)],
                                  environ=WORKER_ENV)
    train_cifar.make_kvstore(args)
    assert calls[-1] == ('dist_ssp', {'metrics_dir': str(tmp_path)})


@pytest.fixture
def keep_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_missing_cifar_exits_2_naming_data_dir(capsys, monkeypatch, tmp_path, keep_logging):
    data = train_cifar._ssp_module('data')

    def no_network(url, dest, timeout=None):
        raise OSError('no network (test)')

    monkeypatch.setattr(data, 'download_file', no_network)
    with pytest.raises(SystemExit) as info:
        train_cifar.main(['--kvstore', 'local', '--dataset', 'cifar10',
                          '--data-dir', str(tmp_path / 'none'), '--save-dir', str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert '--data-dir' in err and str(tmp_path / 'none') in err and 'no network (test)' in err


def test_batch_larger_than_shard_exits_2(capsys, tmp_path, keep_logging):
    with pytest.raises(SystemExit) as info:
        train_cifar.main(['--kvstore', 'local', '--batch-size', '5000',
                          '--save-dir', str(tmp_path)])
    assert info.value.code == 2
    assert '--batch-size 5000' in capsys.readouterr().err


@pytest.mark.parametrize('model', train_cifar.MODELS)
@pytest.mark.parametrize('shape,classes', [((1, 8, 8), 10), ((3, 32, 32), 100)])
def test_models_fit_the_input(model, shape, classes):
    import mxnet as mx
    net = train_cifar.get_model(model, classes, shape)
    net.initialize()
    assert net(mx.nd.zeros((2,) + shape)).shape == (2, classes)


def test_alexnet_small_has_three_convs_and_two_dense_layers():
    net = train_cifar.get_model('alexnet-small', 10, (3, 32, 32))
    kinds = [type(layer).__name__ for layer in net]
    assert kinds.count('Conv2D') == 3 and kinds.count('Dense') == 2


def test_parse_slowdown():
    assert train_cifar.parse_slowdown(None) == {}
    assert train_cifar.parse_slowdown('0:1, 2:3.5') == {0: 1.0, 2: 3.5}


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_local_run_learns_and_writes_metrics(tmp_path):
    save = tmp_path / 'run'
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env = {k: v for k, v in env.items() if not k.startswith('DMLC_')}
    proc = subprocess.run(
        [sys.executable, SCRIPT, '--kvstore', 'local', '--num-epochs', '2',
         '--num-iterations', '60', '--batch-size', '32', '--lr', '0.02',
         '--log-interval', '25', '--slowdown', '0:1.5', '--save-dir', str(save)],
        env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    log_lines = [l for l in proc.stderr.splitlines() if ' INFO ' in l]
    assert log_lines and all(' worker[0] ' in l for l in log_lines)
    assert any('iteration 25 ' in l for l in log_lines)

    train = read_jsonl(save / 'train-worker0.jsonl')
    assert [r['iteration'] for r in train] == list(range(1, 61))
    assert {r['epoch'] for r in train} == {1, 2}           # 44 iterations per epoch
    for r in train:
        assert {'rank', 'iteration', 'epoch', 'time', 'compute_s', 'step_s', 'loss'} <= set(r)
        assert r['rank'] == 0 and r['compute_s'] > 0 and r['step_s'] >= 0
        assert r['sleep_s'] == pytest.approx(0.5 * r['compute_s'], rel=0.01, abs=1e-5)
    assert train[-1]['time'] >= train[0]['time']

    evals = read_jsonl(save / 'eval.jsonl')
    assert [(e['epoch'], e['iteration']) for e in evals] == [(1, 44), (2, 60), (2, 60)]
    for e in evals:
        assert {'time', 'elapsed_s', 'epoch', 'iteration', 'accuracy'} <= set(e)

    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['kvstore'] == 'local' and summary['staleness'] is None
    assert summary['num_workers'] == 1
    assert summary['iterations_per_worker'] == {'0': 60}
    assert summary['final_accuracy'] == evals[-1]['accuracy']
    assert summary['final_accuracy'] > 0.5, summary     # chance is 0.1
    assert summary['wall_time_s'] > 0
    for name in ('model-epoch001.params', 'model-epoch002.params', 'model-final.params'):
        assert (save / name).is_file()


def test_checkpoint_loads_into_the_model(tmp_path):
    import mxnet as mx
    net = train_cifar.get_model('mlp', 10, (1, 8, 8))
    net.initialize()
    net(mx.nd.zeros((1, 1, 8, 8)))
    net.save_parameters(str(tmp_path / 'm.params'))
    other = train_cifar.get_model('mlp', 10, (1, 8, 8))
    other.load_parameters(str(tmp_path / 'm.params'))


def test_count_iterations(tmp_path):
    for rank, n in ((0, 3), (1, 5)):
        with open(tmp_path / ('train-worker%d.jsonl' % rank), 'w') as f:
            for i in range(1, n + 1):
                f.write(json.dumps({'rank': rank, 'iteration': i}) + '\n')
    assert train_cifar.count_iterations(str(tmp_path)) == {0: 3, 1: 5}


def test_local_run_on_cifar10_archive(tmp_path):
    """The CIFAR path end to end: a generated binary archive, 32x32 alexnet-small."""
    from test_data import make_tar, write_cifar10_binary
    src = tmp_path / 'src'
    src.mkdir()
    (tmp_path / 'data').mkdir()
    make_tar(write_cifar10_binary(str(src), per_batch=20),
             str(tmp_path / 'data' / 'cifar-10-binary.tar.gz'))
    save = tmp_path / 'run'
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    env['OMP_NUM_THREADS'] = '1'
    proc = subprocess.run(
        [sys.executable, SCRIPT, '--kvstore', 'local', '--dataset', 'cifar10',
         '--data-dir', str(tmp_path / 'data'), '--batch-size', '16', '--num-epochs', '1',
         '--save-dir', str(save)],
        env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'cifar-10-binary.tar.gz' in proc.stderr
    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['dataset'] == 'cifar10' and summary['iterations_per_worker'] == {'0': 6}


@pytest.mark.integration
def test_two_worker_async_job(tmp_path):
    """A real parameter-server job through the launcher: shards, slowdown, gathered summary."""
    save = tmp_path / 'run'
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    env['OMP_NUM_THREADS'] = '1'
    env['PYTHONPATH'] = ROOT + (os.pathsep + env['PYTHONPATH'] if env.get('PYTHONPATH') else '')
    proc = subprocess.run(
        [sys.executable, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher', 'local',
         '--timeout', '100', sys.executable, SCRIPT, '--kvstore', 'dist_async',
         '--model', 'mlp', '--num-iterations', '15', '--lr', '0.05', '--slowdown', '1:2',
         '--log-interval', '0', '--save-dir', str(save)],
        env=env, capture_output=True, text=True, timeout=150, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ' worker[0] ' in proc.stderr and ' worker[1] ' in proc.stderr
    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['kvstore'] == 'dist_async' and summary['num_workers'] == 2
    assert summary['iterations_per_worker'] == {'0': 15, '1': 15}
    assert summary['final_accuracy'] > 0.3
    slow = read_jsonl(save / 'train-worker1.jsonl')
    fast = read_jsonl(save / 'train-worker0.jsonl')
    assert all(r['sleep_s'] > 0 for r in slow) and all(r['sleep_s'] == 0 for r in fast)
    assert len(read_jsonl(save / 'eval.jsonl')) == 2       # end of epoch 1 and final
