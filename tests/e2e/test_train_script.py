"""Tests of the training script, mxnet_ssp.lab.train_cifar (``mxnet-ssp-train``).

* Flag checks run in this process (no job, no store is created) and must not
  import MXNet or GluonCV.
* Model construction: the built-in networks, and GluonCV's CIFAR ResNets (skipped
  when gluoncv is not installed).
* End-to-end runs on the bundled digits: ``--kvstore local`` in one process,
  and a 2-worker job through the launcher under every store type; an lr decay
  to ~0 that must freeze the weights on the servers; a resumed job.
"""
import json
import logging
import math
import os
import signal
import statistics
import subprocess
import sys

import numpy as np
import pytest

from mxnet_ssp.lab.training_flags import models
from mxnet_ssp.lab.training.checkpoint import checkpoint_info
from mxnet_ssp.lab.training.cli import main
from mxnet_ssp.lab.training.logs import count_iterations, make_progress
from mxnet_ssp.lab.training.models import get_model
from mxnet_ssp.lab.training_flags.models import (BUILTIN_MODELS, describe_model, gluoncv_model_names,
                                             resolve_model)
from mxnet_ssp.lab.training_flags import (check_args, learning_rate_at, parse_args,
                                      parse_decay_epochs)
from mxnet_ssp.lab.training.store import make_kvstore, make_optimizer, read_server_weights

from conftest import INSTALL_TEST, ROOT, need, need_module, read_jsonl  # noqa: E402  (the checkout)
#: how the launcher and reproduce start the training script: by module, not by a file path
TRAIN = [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar']

WORKER_ENV = {'DMLC_ROLE': 'worker', 'DMLC_NUM_WORKER': '4'}
HAVE_GLUONCV = models.gluoncv_available()
needs_gluoncv = pytest.mark.need(module='gluoncv', install=INSTALL_TEST)


def bad_flag(capsys, argv, environ=None):
    """Parse `argv`; assert it exits with status 2; return the error text."""
    with pytest.raises(SystemExit) as info:
        parse_args(argv, environ={} if environ is None else environ)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert 'usage:' in err
    return err.split('error:', 1)[1]


def script_env(**extra):
    """This environment without DMLC_*, the checkout first on the path, one thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    env['PYTHONPATH'] = ROOT + (os.pathsep + env['PYTHONPATH'] if env.get('PYTHONPATH') else '')
    env['OMP_NUM_THREADS'] = '1'
    env.update(extra)
    return env


# ---------------------------------------------------------------------------
# flags
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('argv,flag,value,accepted', [
    (['--model', 'resnet9000'], '--model', 'resnet9000', 'alexnet-small'),
    (['--model', 'resnet18'], '--model', 'resnet18', '6n + 2'),
    (['--dataset', 'mnist'], '--dataset', 'mnist', 'cifar100'),
    (['--kvstore', 'dist_fast'], '--kvstore', 'dist_fast', 'dist_softsync'),
    (['--optimizer', 'adam'], '--optimizer', 'adam', 'dcasgd_pw'),
    (['--mode', 'eager'], '--mode', 'eager', 'imperative'),
    (['--batch-size', '0'], '--batch-size', '0', '>= 1'),
    (['--num-epochs', '-2'], '--num-epochs', '-2', '>= 1'),
    (['--num-iterations', '0'], '--num-iterations', '0', '>= 1'),
    (['--num-gpus', '-1'], '--num-gpus', '-1', '>= 0'),
    (['-j', '-1'], '--num-data-workers', '-1', '>= 0'),
    (['--save-period', '-1'], '--save-period', '-1', '>= 0'),
    (['--seed', '-1'], '--seed', '-1', '2**32'),
    (['--lr', '0'], '--lr', '0', '> 0'),
    (['--lr', 'nan'], '--lr', 'nan', '> 0'),
    (['--momentum', '1.5'], '--momentum', '1.5', '[0, 1)'),
    (['--wd', '-1'], '--wd', '-1', '>= 0'),
    (['--drop-rate', '1'], '--drop-rate', '1', '[0, 1)'),
    (['--lr-decay', '0'], '--lr-decay', '0', '> 0'),
    (['--lr-decay-epoch', '200,x'], '--lr-decay-epoch', '200,x', 'increasing epochs >= 1'),
    (['--lr-decay-epoch', '250,200'], '--lr-decay-epoch', '250,200', 'increasing'),
    (['--lr-decay-epoch', '0'], '--lr-decay-epoch', '0', '>= 1'),
    (['--lr-decay-period', '-5'], '--lr-decay-period', '-5', '>= 0'),
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


@pytest.mark.parametrize('store', ['local', 'dist_sync', 'dist_async', 'dist_softsync'])
def test_staleness_only_with_ssp_stores(capsys, store):
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


def test_splits(capsys):
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--splits', '2'], WORKER_ENV)
    assert '--splits' in err and 'dist_softsync' in err and 'dist_async' in err
    for value in ('5', '0', 'two'):      # the job has 4 workers
        err = bad_flag(capsys, ['--kvstore', 'dist_softsync', '--splits', value], WORKER_ENV)
        assert '--splits' in err and value in err and '1 <= n <= 4' in err
    args = parse_args(['--kvstore', 'dist_softsync', '--splits', '4'], WORKER_ENV)
    assert args.splits == 4


@pytest.mark.parametrize('rule', ['sasgd', 'dcasgd_pw'])
@pytest.mark.parametrize('store', ['local', 'dist_sync'])
def test_worker_aware_rules_need_a_store_that_reports_staleness(capsys, rule, store):
    err = bad_flag(capsys, ['--kvstore', store, '--optimizer', rule], WORKER_ENV)
    assert '--optimizer %s' % rule in err and store in err
    assert 'dist_async, dist_ssp, dist_dssp, dist_softsync' in err


def test_worker_aware_rules_and_mxnets_own_dist_async(capsys):
    env = dict(WORKER_ENV, MXNET_SSP_WRAP_ASYNC='0')
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--optimizer', 'sasgd'], env)
    assert 'MXNET_SSP_WRAP_ASYNC=0' in err
    parse_args(['--kvstore', 'dist_async', '--optimizer', 'sasgd'], WORKER_ENV)


@pytest.mark.parametrize('argv,words', [
    (['--optimizer', 'sgd', '--lamda', '0.5'], ['--lamda', 'dcasgd_pw', 'sgd']),
    (['--optimizer', 'sasgd', '--adaptive'], ['--adaptive', 'dcasgd_pw', 'sasgd']),
    (['--optimizer', 'dcasgd_pw', '--staleness-lr', 'inverse'], ['--staleness-lr', 'sasgd']),
    (['--optimizer', 'nag', '--staleness-window', '4'], ['--staleness-window', 'sasgd']),
    (['--optimizer', 'sasgd', '--staleness-lr', 'square'], ['--staleness-lr', 'square',
                                                            'inverse, average, none']),
    (['--optimizer', 'sasgd', '--staleness-window', '0'], ['--staleness-window', '0', '>= 1']),
    (['--optimizer', 'dcasgd_pw', '--lamda', '-1'], ['--lamda', '-1', '>= 0']),
    (['--optimizer', 'dcasgd_pw', '--mean-square-decay', '0.9'], ['--mean-square-decay',
                                                                  '--adaptive']),
    (['--optimizer', 'dcasgd_pw', '--adaptive', '--mean-square-decay', '1'],
     ['--mean-square-decay', '1', '[0, 1)']),
    (['--lr-decay-period', '10', '--lr-decay-epoch', '20'], ['--lr-decay-period',
                                                             '--lr-decay-epoch']),
    (['--sync-average'], ['--sync-average', 'dist_sync', 'dist_async']),
])
def test_rule_and_schedule_flags(capsys, argv, words):
    err = bad_flag(capsys, ['--kvstore', 'dist_async'] + argv, WORKER_ENV)
    for word in words:
        assert word in err


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


def test_save_dir_that_is_a_file_or_under_one(capsys, tmp_path):
    path = tmp_path / 'file'
    path.write_text('x')
    for target in (path, path / 'sub'):
        err = bad_flag(capsys, ['--kvstore', 'local', '--save-dir', str(target)])
        assert '--save-dir' in err and str(target) in err and 'not a directory' in err


#: A directory nobody may write in, root included: the kernel refuses every write to the
#: top of /proc/sys (fs/proc/proc_sysctl.c), whatever the capabilities (Linux only).
PROC_SYS = '/proc/sys'


def _read_only_dirs(tmp_path):
    """Existing directories this process cannot create entries in.

    A mode 0555 directory of its own (not as root, who writes there regardless) and
    /proc/sys (root as well).  Each is checked to be unwritable first, so that a test
    using them fails only for the check under test.
    """
    dirs = []
    if not (hasattr(os, 'geteuid') and os.geteuid() == 0):
        ro = tmp_path / 'ro'
        ro.mkdir()
        ro.chmod(0o555)
        dirs.append(str(ro))
    if os.path.isdir(PROC_SYS):
        dirs.append(PROC_SYS)
    if not dirs:
        need('a directory root cannot write in (%s, on Linux)' % PROC_SYS,
             'run the tests on Linux, or as a user other than root')
    for d in dirs:
        assert not os.access(d, os.W_OK), '%s is writable here' % d
    return dirs


def test_read_only_save_dir(capsys, tmp_path):
    """An existing directory that takes no new file, and a new one under it, are refused
    (the check tries a file in the first, asks os.access about the parent of the second)."""
    try:
        for ro in _read_only_dirs(tmp_path):
            err = bad_flag(capsys, ['--kvstore', 'local', '--save-dir', ro])
            assert "--save-dir %r is not valid: cannot write in %s: " % (ro, ro) in err, err
            sub = os.path.join(ro, 'sub')
            err = bad_flag(capsys, ['--kvstore', 'local', '--save-dir', sub])
            assert ("--save-dir %r is not valid: cannot create %s: %s is not writable"
                    % (sub, sub, ro)) in err, err
    finally:
        if (tmp_path / 'ro').exists():
            (tmp_path / 'ro').chmod(0o755)


def test_save_dir_is_not_created_by_the_check(tmp_path):
    target = tmp_path / 'a' / 'b'
    parse_args(['--kvstore', 'local', '--save-dir', str(target)], {})
    assert not (tmp_path / 'a').exists()


def test_resume_from(capsys, tmp_path):
    err = bad_flag(capsys, ['--kvstore', 'local', '--resume-from', str(tmp_path / 'none')])
    assert '--resume-from' in err and 'none' in err and 'model-epoch' in err
    odd = tmp_path / 'weights.params'
    odd.write_bytes(b'')
    err = bad_flag(capsys, ['--kvstore', 'local', '--resume-from', str(odd)])
    assert '--resume-from' in err and 'weights.json' in err and 'epoch' in err
    named = tmp_path / 'model-epoch007.params'
    named.write_bytes(b'')
    args = parse_args(['--kvstore', 'local', '--resume-from', str(named)], {})
    assert args.resume_info['completed_epochs'] == 7 and args.resume_info['states'] is None
    (tmp_path / 'model-epoch007.json').write_text(json.dumps(
        {'completed_epochs': 6, 'iteration': 130, 'states': 'x.states'}))
    args = parse_args(['--kvstore', 'local', '--resume-from', str(named)], {})
    assert args.resume_info['completed_epochs'] == 6 and args.resume_info['iteration'] == 130


def test_valid_flags_parse():
    args = parse_args(
        ['--kvstore', 'dist_dssp', '--staleness', '3,15', '--dssp-mode', 'paper',
         '--slowdown', '1:2.5,3:4', '--model', 'mlp', '--dataset', 'cifar10',
         '--optimizer', 'dcasgd_pw', '--adaptive', '--lamda', '1', '--mean-square-decay', '0.9',
         '--lr-decay-epoch', '200,250', '--num-gpus', '0', '-j', '2'], environ=WORKER_ENV)
    assert args.slowdown_factors == {1: 2.5, 3: 4.0}
    assert args.kvstore == 'dist_dssp' and args.staleness == '3,15'
    assert args.lr_decay_epochs == [200, 250] and args.num_data_workers == 2
    args = parse_args(['--kvstore', 'local'], environ={})
    assert args.slowdown_factors == {} and args.dataset == 'digits'
    assert args.save_dir == os.path.join('.', 'results', 'run')
    assert args.optimizer == 'sgd' and args.lr_decay_epochs == [] and args.save_period == 10


def test_check_args_is_the_workers_check():
    args = check_args(['--kvstore', 'dist_softsync', '--splits', '3'], 3,
                      environ={})
    assert args.splits == 3
    with pytest.raises(SystemExit) as info:
        check_args(['--kvstore', 'dist_ssp', '--slowdown', '3:2'], 3, environ={})
    assert info.value.code == 2


def test_validation_imports_neither_mxnet_nor_gluoncv(tmp_path):
    models = ['alexnet-small', 'resnet110'] + (['cifar_wideresnet16_10'] if HAVE_GLUONCV else [])
    code = ('import sys; from mxnet_ssp.lab import train_cifar\n'
            'from mxnet_ssp.lab.training_flags import check_args\n'
            'for m in %r:\n'
            '    check_args(["--kvstore", "dist_dssp", "--staleness", "2,6",'
            ' "--model", m, "--optimizer", "sasgd", "--save-dir", %r], 4)\n'
            'heavy = [m for m in ("mxnet", "gluoncv") if m in sys.modules]\n'
            'assert not heavy, heavy\n'
            % (models if HAVE_GLUONCV else models[:1], str(tmp_path)))
    proc = subprocess.run([sys.executable, '-c', code], env=script_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_model_names():
    resolve = resolve_model
    assert resolve('alexnet-small') == ('builtin', 'alexnet-small')
    assert resolve('resnet50') == ('cifar_resnet', 1, 50)       # 50 = 6 * 8 + 2
    assert resolve('ResNet110') == ('cifar_resnet', 1, 110)
    assert resolve('cifar_resnet50_v2') == ('cifar_resnet', 2, 50)
    assert resolve('cifar_resnet56_v1') == ('cifar_resnet', 1, 56)
    assert resolve('resnet50_v1') == ('gluoncv', 'resnet50_v1')   # GluonCV's ImageNet net
    for bad in ('resnet51', 'resnet2', 'cifar_resnet18_v1'):
        with pytest.raises(ValueError, match='6n \\+ 2'):
            resolve(bad)
    assert '8 per stage, depth 50' in describe_model('resnet50')


def test_gluoncv_model_without_gluoncv(capsys, monkeypatch):
    monkeypatch.setattr(models, 'gluoncv_available', lambda: False)
    for name in ('resnet50', 'cifar_wideresnet16_10'):
        err = bad_flag(capsys, ['--kvstore', 'local', '--model', name])
        assert '--model %s' % name in err and 'gluoncv' in err and 'alexnet-small' in err


@needs_gluoncv
def test_gluoncv_zoo_names(capsys):
    names = gluoncv_model_names()
    assert {'cifar_resnet20_v1', 'cifar_resnet110_v1', 'cifar_wideresnet16_10'} <= names
    assert 'cifar_resnet50_v1' not in names          # why resnet50 is built from the classes
    parse_args(['--kvstore', 'local', '--model', 'cifar_resnext29_16x64d'], {})
    err = bad_flag(capsys, ['--kvstore', 'local', '--model', 'cifar_resnet20_v3'])
    assert 'cifar_resnet20_v3' in err and 'close: cifar_resnet20_v' in err


# ---------------------------------------------------------------------------
# schedule, store, optimizer, progress, checkpoints
# ---------------------------------------------------------------------------
def test_learning_rate_schedule():
    lr = learning_rate_at
    # GluonCV: decay at the start of 0-based epoch 2 = after 2 epochs
    assert [lr(e, 0.1, 0.1, [2, 4]) for e in range(1, 7)] == [0.1, 0.1, 0.01, 0.01, 0.001, 0.001]
    assert [lr(e, 1.0, 0.5, decay_period=2) for e in range(1, 6)] == [1, 1, 0.5, 0.5, 0.25]
    assert lr(3, 0.05, 0.1, [1]) == 0.005
    assert parse_decay_epochs(' 200, 250 ') == [200, 250]
    assert parse_decay_epochs('') == []


def test_make_kvstore_passes_settings(monkeypatch, tmp_path):
    import mxnet_ssp
    calls = []
    monkeypatch.setattr(mxnet_ssp, 'create', lambda name, **kw: calls.append((name, kw)) or 'kv')
    args = parse_args(['--kvstore', 'dist_dssp', '--staleness', '2,9',
                       '--dssp-mode', 'paper', '--save-dir', str(tmp_path)],
                      environ=WORKER_ENV)
    assert make_kvstore(args) == 'kv'
    assert calls == [('dist_dssp', {'staleness': '2,9', 'mode': 'paper',
                                    'metrics_dir': str(tmp_path)})]
    for argv, expected in ((['--kvstore', 'dist_ssp'], ('dist_ssp', {})),
                           (['--kvstore', 'dist_softsync', '--splits', '2'],
                            ('dist_softsync', {'splits': 2})),
                           (['--kvstore', 'dist_async'], ('dist_async', {}))):
        args = parse_args(argv + ['--save-dir', str(tmp_path)], environ=WORKER_ENV)
        make_kvstore(args)
        expected[1]['metrics_dir'] = str(tmp_path)
        assert calls[-1] == expected


def test_make_optimizer():
    import mxnet as mx
    from mxnet_ssp import optim

    def make(*argv):
        args = parse_args(['--kvstore', 'dist_async', '--lr', '0.2', '--wd', '0.001']
                          + list(argv), WORKER_ENV)
        return make_optimizer(args, 64)

    opt = make()
    assert type(opt) is mx.optimizer.SGD and opt.momentum == 0.9 and opt.rescale_grad == 1 / 64
    assert opt.lr == 0.2 and opt.wd == 0.001
    assert type(make('--optimizer', 'nag', '--momentum', '0.5')) is mx.optimizer.NAG
    opt = make('--optimizer', 'sasgd', '--staleness-lr', 'average', '--staleness-window', '4')
    assert isinstance(opt, optim.StalenessAwareSGD)
    assert (opt.staleness_lr, opt.staleness_window) == ('average', 4)
    assert make('--optimizer', 'sasgd').staleness_lr == 'inverse'
    opt = make('--optimizer', 'dcasgd_pw')
    assert isinstance(opt, optim.DCASGD) and not opt.adaptive and opt.lamda == 0.04
    opt = make('--optimizer', 'dcasgd_pw', '--adaptive', '--mean-square-decay', '0.9')
    assert opt.adaptive and opt.lamda == 2.0 and opt.mean_square_decay == 0.9
    assert make('--optimizer', 'dcasgd_pw', '--lamda', '0.5').lamda == 0.5


class _Terminal:
    def __init__(self, tty):
        self.tty, self.text = tty, []

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text.append(s)

    def flush(self):
        pass


def test_progress_bar_only_on_worker_0_at_a_terminal():
    assert make_progress(1, 10, stream=_Terminal(True)) is None
    assert make_progress(0, 10, stream=_Terminal(False)) is None
    assert make_progress(0, 10, disabled=True, stream=_Terminal(True)) is None
    need_module('tqdm')      # a requirement of the package: INSTALL_TEST installs it
    term = _Terminal(True)
    bar = make_progress(0, 10, initial=4, stream=term)
    bar.update(2)
    bar.close()
    assert '6/10' in ''.join(term.text)


class _FakeStore:
    def __init__(self, slot_mode):
        self.slot_mode, self.calls = slot_mode, []

    def refresh_slots(self, key, priority=0):
        self.calls.append(('refresh', key))

    def pull(self, key, out=None):
        self.calls.append(('pull', key))


@pytest.mark.parametrize('slot_mode', [False, True])
def test_final_read_skips_parameters_that_are_never_pushed(slot_mode):
    """BatchNorm's running statistics stay worker 0's: the servers hold their initial values."""
    import mxnet as mx
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Dense(4), mx.gluon.nn.BatchNorm(), mx.gluon.nn.Dense(2))
    net.initialize()
    net(mx.nd.zeros((1, 3)))
    params = list(net.collect_params().values())
    pushed = [i for i, p in enumerate(params) if p.grad_req != 'null']
    assert len(pushed) == len(params) - 2          # running_mean, running_var
    kv = _FakeStore(slot_mode)
    read_server_weights(kv, params)
    expected = [('pull', i) for i in pushed]
    if slot_mode:     # the slot holds what worker 0 last pulled: refresh it first
        expected = [c for i in pushed for c in (('refresh', i), ('pull', i))]
    assert kv.calls == expected


def test_checkpoint_info_falls_back_to_the_name(tmp_path):
    path = str(tmp_path / 'model-epoch012.params')
    assert checkpoint_info(path)['completed_epochs'] == 12
    with open(str(tmp_path / 'model-epoch012.json'), 'w') as f:
        f.write('{broken')
    with pytest.raises(ValueError, match='model-epoch012.json'):
        checkpoint_info(path)


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('model', BUILTIN_MODELS)
@pytest.mark.parametrize('shape,classes', [((1, 8, 8), 10), ((3, 32, 32), 100)])
def test_builtin_models_fit_the_input(model, shape, classes):
    import mxnet as mx
    net = get_model(model, classes, shape)
    net.initialize()
    assert net(mx.nd.zeros((2,) + shape)).shape == (2, classes)


def test_alexnet_small_has_three_convs_and_two_dense_layers():
    net = get_model('alexnet-small', 10, (3, 32, 32))
    kinds = [type(layer).__name__ for layer in net]
    assert kinds.count('Conv2D') == 3 and kinds.count('Dense') == 2


def _blocks(net, name):
    found = []

    def visit(block):
        if type(block).__name__ == name:
            found.append(block)
        for child in block._children.values():
            visit(child)
    visit(net)
    return found


@needs_gluoncv
@pytest.mark.parametrize('model,version,depth', [('resnet20', 1, 20), ('resnet50', 1, 50),
                                                 ('resnet110', 1, 110),
                                                 ('cifar_resnet56_v2', 2, 56)])
def test_gluoncv_cifar_resnets(model, version, depth):
    import mxnet as mx
    net = get_model(model, 100, (3, 32, 32))
    blocks = _blocks(net, 'CIFARBasicBlockV%d' % version)
    assert len(blocks) == 3 * (depth - 2) // 6      # n blocks of 2 convs per stage, 3 stages
    net.initialize()
    net.hybridize()
    assert net(mx.nd.random.uniform(shape=(2, 3, 32, 32))).shape == (2, 100)
    # the 8x8 digits go through as well (feature maps 8 -> 4 -> 2)
    small = get_model(model, 10, (1, 8, 8))
    small.initialize()
    assert small(mx.nd.zeros((1, 1, 8, 8))).shape == (1, 10)


@needs_gluoncv
def test_gluoncv_zoo_model_by_name():
    import mxnet as mx
    net = get_model('cifar_wideresnet16_10', 10, (3, 32, 32), drop_rate=0.3)
    net.initialize()
    assert net(mx.nd.zeros((1, 3, 32, 32))).shape == (1, 10)
    blocks = _blocks(net, 'CIFARBasicBlockV2')
    assert blocks and all(b.droprate == 0.3 for b in blocks)


def parameter_values(net):
    """{name: NumPy copy} of every parameter of `net`."""
    return {name: p.data().asnumpy() for name, p in net.collect_params().items()}


def assert_same_parameters(got, expected, atol=0):
    """The same parameter names, and every value equal (exactly, or within `atol`)."""
    assert sorted(got) == sorted(expected)
    for name in expected:
        if atol:
            np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=atol,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def load_checkpoint(path, model, classes=10, image_shape=(1, 8, 8)):
    """parameter_values of a new `model` network after load_parameters(`path`), as a resume."""
    net = get_model(model, classes, image_shape)
    net.load_parameters(str(path))
    return parameter_values(net)


def test_checkpoint_loads_into_the_model(tmp_path):
    """A checkpoint the training script writes (save_checkpoint) loads as it does on resume
    (load_parameters into a new network) and gives back every parameter, name and value."""
    import mxnet as mx
    from mxnet import gluon
    from mxnet_ssp.lab.training.checkpoint import save_checkpoint
    mx.random.seed(3)
    net = get_model('mlp', 10, (1, 8, 8))
    net.initialize()
    net(mx.nd.zeros((1, 1, 8, 8)))
    for p in net.collect_params().values():    # no zero biases: every value is its own
        p.set_data(mx.nd.random.normal(shape=p.shape))
    saved = parameter_values(net)
    assert len(saved) == 6                     # 3 dense layers, a weight and a bias each
    kv = mx.kv.create('local')
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1}, kvstore=kv)
    save_checkpoint(net, trainer, kv, str(tmp_path), 'model-epoch001',
                    {'completed_epochs': 1, 'iteration': 7})
    path = str(tmp_path / 'model-epoch001.params')
    assert checkpoint_info(path)['completed_epochs'] == 1

    other = get_model('mlp', 10, (1, 8, 8))    # not initialized: every value is the file's
    other.load_parameters(path)
    assert_same_parameters(parameter_values(other), saved)

    # the comparison sees one changed value, and a missing name
    changed = mx.nd.load(path)
    key = sorted(changed)[0]
    changed[key][0] += 1e-3
    mx.nd.save(str(tmp_path / 'changed.params'), changed)
    third = get_model('mlp', 10, (1, 8, 8))
    third.load_parameters(str(tmp_path / 'changed.params'))
    with pytest.raises(AssertionError, match='Mismatched elements: 1 /'):
        assert_same_parameters(parameter_values(third), saved)
    fewer = dict(saved)
    fewer.popitem()
    with pytest.raises(AssertionError):
        assert_same_parameters(fewer, saved)


def test_count_iterations(tmp_path):
    for rank, n in ((0, 3), (1, 5)):
        with open(tmp_path / ('train-worker%d.jsonl' % rank), 'w') as f:
            for i in range(1, n + 1):
                f.write(json.dumps({'rank': rank, 'iteration': i}) + '\n')
    assert count_iterations(str(tmp_path)) == {0: 3, 1: 5}


# ---------------------------------------------------------------------------
# runs in one process (--kvstore local)
# ---------------------------------------------------------------------------
@pytest.fixture
def keep_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_missing_cifar_exits_2_naming_data_dir(capsys, monkeypatch, tmp_path, keep_logging):
    from mxnet_ssp.lab import cifar

    def no_network(url, dest, timeout=None):
        raise OSError('no network (test)')

    monkeypatch.setattr(cifar, 'download_file', no_network)
    with pytest.raises(SystemExit) as info:
        main(['--kvstore', 'local', '--dataset', 'cifar10',
              '--data-dir', str(tmp_path / 'none'), '--save-dir', str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert '--data-dir' in err and str(tmp_path / 'none') in err and 'no network (test)' in err


def test_digits_without_scikit_learn_exits_2_naming_the_install(capsys, monkeypatch, tmp_path,
                                                                keep_logging):
    # scikit-learn not installed: its package (where the digits' file ships) is not found
    # (importlib.util.find_spec answers None for a module that sys.modules holds as None)
    for module in [m for m in sys.modules if m.split('.')[0] == 'sklearn']:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, 'sklearn', None)
    with pytest.raises(SystemExit) as info:
        main(['--kvstore', 'local', '--save-dir', str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert '--dataset digits' in err and "pip install 'scikit-learn>=1.0'" in err


def test_batch_larger_than_shard_exits_2(capsys, tmp_path, keep_logging):
    with pytest.raises(SystemExit) as info:
        main(['--kvstore', 'local', '--batch-size', '5000',
              '--save-dir', str(tmp_path)])
    assert info.value.code == 2
    assert '--batch-size 5000' in capsys.readouterr().err


def test_gpus_that_are_not_there_exit_2(capsys, tmp_path, keep_logging):
    import mxnet as mx
    n = mx.context.num_gpus()
    with pytest.raises(SystemExit) as info:
        main(['--kvstore', 'local', '--num-gpus', str(n + 1),
              '--save-dir', str(tmp_path)])
    assert info.value.code == 2
    assert '--num-gpus %d' % (n + 1) in capsys.readouterr().err


def run_local(tmp_path, save, *flags):
    proc = subprocess.run(
        TRAIN + ['--kvstore', 'local', '--save-dir', str(save)] + list(flags),
        env=script_env(), capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_local_run_learns_and_writes_metrics(tmp_path):
    save = tmp_path / 'run'
    proc = run_local(tmp_path, save, '--num-epochs', '2', '--num-iterations', '60',
                     '--batch-size', '32', '--lr', '0.02', '--log-interval', '25',
                     '--slowdown', '0:1.5', '--save-period', '1', '-j', '2',
                     '--lr-decay-epoch', '1', '--lr-decay', '0.5')
    log_lines = [line for line in proc.stderr.splitlines() if ' INFO ' in line]
    assert log_lines and all(' worker[0] ' in line for line in log_lines)
    assert any('iteration 25 ' in line for line in log_lines)
    assert any('epoch 2: learning rate 0.01' in line for line in log_lines)
    assert '\r' not in proc.stderr                  # no progress bar when not a terminal

    train = read_jsonl(save / 'train-worker0.jsonl')
    assert [r['iteration'] for r in train] == list(range(1, 61))
    assert {r['epoch'] for r in train} == {1, 2}           # 44 iterations per epoch
    for r in train:
        assert {'rank', 'iteration', 'epoch', 'time', 'compute_s', 'step_s', 'loss', 'lr',
                'train_accuracy'} <= set(r)
        assert r['rank'] == 0 and r['compute_s'] > 0 and r['step_s'] >= 0
        assert r['sleep_s'] == pytest.approx(0.5 * r['compute_s'], rel=0.01, abs=1e-5)
        assert r['lr'] == (0.02 if r['epoch'] == 1 else 0.01)
    assert train[-1]['time'] >= train[0]['time']

    evals = read_jsonl(save / 'eval.jsonl')
    assert [(e['epoch'], e['iteration'], e['final']) for e in evals] == [
        (1, 44, False), (2, 60, False), (2, 60, True)]
    for e in evals:
        assert {'time', 'elapsed_s', 'epoch', 'iteration', 'accuracy'} <= set(e)

    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['kvstore'] == 'local' and summary['staleness'] is None
    assert summary['num_workers'] == 1 and summary['optimizer'] == 'sgd'
    assert summary['iterations_per_worker'] == {'0': 60}
    assert summary['final_accuracy'] == evals[-1]['accuracy']
    assert summary['final_accuracy'] > 0.5, summary     # chance is 0.1
    assert summary['wall_time_s'] > 0 and summary['final_lr'] == 0.01
    for name in ('model-epoch001', 'model-epoch002', 'model-final'):
        for ext in ('.params', '.states', '.json'):
            assert (save / (name + ext)).is_file(), name + ext
    with open(save / 'model-epoch002.json') as f:
        meta = json.load(f)
    # the epoch was cut short by --num-iterations: a resume starts it again
    assert meta['completed_epochs'] == 1 and meta['iteration'] == 60
    # every checkpoint loads into the network; model-final holds the weights of epoch 2's
    # end (no step between them), epoch 1's are those of 16 iterations before
    first, second, final = (load_checkpoint(save / (name + '.params'), 'alexnet-small')
                            for name in ('model-epoch001', 'model-epoch002', 'model-final'))
    assert_same_parameters(final, second)
    assert sorted(first) == sorted(final) and len(final) == 10     # 5 layers, weight and bias
    assert all(np.isfinite(v).all() for v in final.values())
    assert any(not np.array_equal(first[k], final[k]) for k in final)


@pytest.mark.slow
def test_local_resume_continues_exactly(tmp_path):
    """Stopped after epoch 1 and resumed = uninterrupted (weights, momentum, order, lr)."""
    import mxnet as mx
    flags = ['--model', 'mlp', '--num-epochs', '2', '--lr', '0.05', '--lr-decay-epoch', '1',
             '--save-period', '1', '--log-interval', '0']
    run_local(tmp_path, tmp_path / 'full', *flags)
    proc = run_local(tmp_path, tmp_path / 'resumed', *flags, '--resume-from',
                     str(tmp_path / 'full' / 'model-epoch001.params'))
    assert 'restored optimizer state' in proc.stderr
    train = read_jsonl(tmp_path / 'resumed' / 'train-worker0.jsonl')
    assert {r['epoch'] for r in train} == {2} and train[0]['iteration'] == 45
    assert {r['lr'] for r in train} == {0.005}
    full = mx.nd.load(str(tmp_path / 'full' / 'model-final.params'))
    resumed = mx.nd.load(str(tmp_path / 'resumed' / 'model-final.params'))
    assert full.keys() == resumed.keys()
    for k in full:
        np.testing.assert_allclose(resumed[k].asnumpy(), full[k].asnumpy(), rtol=1e-5, atol=1e-6)


def test_local_run_on_cifar10_archive(tmp_path):
    """The CIFAR path end to end: a generated binary archive, 32x32 alexnet-small, augmented."""
    from cifar_files import make_tar, write_cifar10_binary
    src = tmp_path / 'src'
    src.mkdir()
    (tmp_path / 'data').mkdir()
    make_tar(write_cifar10_binary(str(src), per_batch=20),
             str(tmp_path / 'data' / 'cifar-10-binary.tar.gz'))
    save = tmp_path / 'run'
    proc = run_local(tmp_path, save, '--dataset', 'cifar10', '--data-dir', str(tmp_path / 'data'),
                     '--batch-size', '16', '--num-epochs', '1')
    assert 'cifar-10-binary.tar.gz' in proc.stderr and 'augmented' in proc.stderr
    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['dataset'] == 'cifar10' and summary['iterations_per_worker'] == {'0': 6}
    assert summary['augment'] is True


# ---------------------------------------------------------------------------
# parameter-server jobs through the launcher
# ---------------------------------------------------------------------------
def run_job(tmp_path, flags, workers=2, timeout=150):
    """Run train_cifar.py as a local 2-worker, 1-server job; returns the completed process."""
    argv = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', str(workers), '-s', '1',
            '--launcher', 'local', '--timeout', str(timeout - 30)] + TRAIN + [
            '--model', 'mlp', '--log-interval', '0'] + list(flags)
    env = script_env(MXNET_SSP_METRICS_DIR=str(tmp_path / 'env-metrics'), MXNET_SSP_TIMEOUT='60')
    proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)        # the launcher stops the whole job
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        pytest.fail('job did not finish within %d s:\n%s' % (timeout, err[-6000:]))
    assert proc.returncode == 0, err[-4000:]
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


#: store -> (extra flags, store metrics files expected in --save-dir)
STORE_RUNS = {
    'dist_sync': (['--optimizer', 'nag', '--sync-average'], []),
    'dist_async': (['--optimizer', 'sasgd'], ['server-0-staleness.json']),
    'dist_ssp': (['--staleness', '2'], ['worker-0.jsonl', 'worker-1.jsonl', 'controller.jsonl']),
    'dist_dssp': (['--staleness', '1,4', '--optimizer', 'dcasgd_pw', '--adaptive'],
                  ['worker-0.jsonl', 'worker-1.jsonl', 'controller.jsonl',
                   'server-0-staleness.json']),
    'dist_softsync': (['--splits', '2'], ['server-0-staleness.json']),
}


@pytest.mark.integration
@pytest.mark.parametrize('store', [   # all with -m slow (dist_sync: the balance job, dist_dssp:
    pytest.param(s, marks=pytest.mark.slow) for s in STORE_RUNS])   # the emulated job)
def test_two_worker_job_under_every_store(tmp_path, store):
    extra, store_files = STORE_RUNS[store]
    save = tmp_path / 'run'
    proc = run_job(tmp_path, ['--kvstore', store, '--num-epochs', '2', '--lr', '0.05',
                              '--lr-decay-epoch', '1', '--save-period', '1',
                              '--slowdown', '1:1.5', '--save-dir', str(save)] + extra)
    err = proc.stderr
    assert ' worker[0] ' in err and ' worker[1] ' in err
    for rank in (0, 1):
        assert 'worker[%d] INFO epoch 2: learning rate 0.005' % rank in err
    if store != 'dist_sync':          # dist_sync updates on the workers
        assert 'server[0] INFO server: set_lr 0.005' in err
    saves = [line for line in err.splitlines() if 'saved checkpoint' in line]
    assert len(saves) == 3 and all(' worker[0] INFO ' in line for line in saves)

    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['kvstore'] == store and summary['num_workers'] == 2
    assert summary['iterations_per_worker'] == {'0': 44, '1': 44}
    assert summary['final_accuracy'] > 0.3, summary       # chance is 0.1
    evals = read_jsonl(save / 'eval.jsonl')
    assert len(evals) == 3 and evals[-1]['accuracy'] == summary['final_accuracy']
    slow = read_jsonl(save / 'train-worker1.jsonl')
    fast = read_jsonl(save / 'train-worker0.jsonl')
    assert len(slow) == len(fast) == 44
    assert all(r['sleep_s'] > 0 for r in slow) and all(r['sleep_s'] == 0 for r in fast)
    for name in store_files:
        assert (save / name).is_file(), (name, sorted(os.listdir(save)))
    states = 'model-final.states' + ('' if store == 'dist_sync' else '.server-0')
    assert (save / states).is_file(), sorted(os.listdir(save))
    for name in ('model-epoch001', 'model-epoch002', 'model-final'):
        assert (save / (name + '.params')).is_file() and (save / (name + '.json')).is_file()
    assert not (tmp_path / 'env-metrics').exists()      # the stores wrote into --save-dir


@pytest.mark.slow
@pytest.mark.integration
def test_two_worker_job_on_cifar_with_loader_threads(tmp_path):
    """CIFAR through gluon.data inside the workers of a job: both extract the same archive,
    each reads its shard through a DataLoader with 2 worker threads, augmented."""
    from cifar_files import make_tar, write_cifar10_python
    src = tmp_path / 'src'
    src.mkdir()
    (tmp_path / 'data').mkdir()
    make_tar(write_cifar10_python(str(src), per_batch=20),      # 100 training images
             str(tmp_path / 'data' / 'cifar-10-python.tar.gz'))
    save = tmp_path / 'run'
    proc = run_job(tmp_path, ['--kvstore', 'dist_ssp', '--staleness', '2', '--dataset',
                              'cifar10', '--data-dir', str(tmp_path / 'data'), '--batch-size',
                              '8', '--num-epochs', '2', '-j', '2', '--save-dir', str(save)])
    for rank in (0, 1):
        assert ('worker[%d] INFO ' % rank) in proc.stderr
        # 50 images per shard: 6 batches of 8 per epoch
        train = read_jsonl(save / ('train-worker%d.jsonl' % rank))
        assert [(r['epoch'], r['iteration']) for r in train] == (
            [(1, i) for i in range(1, 7)] + [(2, i) for i in range(7, 13)]), rank
    assert 'augmented' in proc.stderr and 'cifar-10-python.tar.gz' in proc.stderr
    assert (tmp_path / 'data' / 'cifar-10-batches-py' / 'test_batch').is_file()
    # extracted once, whichever worker came first; no temporary directory left
    assert sorted(p.name for p in (tmp_path / 'data').iterdir()) == [
        'cifar-10-batches-py', 'cifar-10-python.tar.gz']
    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['augment'] is True and summary['iterations_per_worker'] == {'0': 12, '1': 12}
    assert [e['epoch'] for e in read_jsonl(save / 'eval.jsonl')] == [1, 2, 2]


@pytest.fixture(scope='module')
def frozen_job(tmp_path_factory):
    """dist_async, no momentum; the lr decays to ~0 after epoch 1 of 3."""
    tmp_path = tmp_path_factory.mktemp('frozen')
    save = tmp_path / 'run'
    proc = run_job(tmp_path, ['--kvstore', 'dist_async', '--num-epochs', '3', '--lr', '0.1',
                              '--momentum', '0', '--lr-decay-epoch', '1', '--lr-decay', '1e-9',
                              '--save-period', '1', '--save-dir', str(save)])
    return tmp_path, save, proc


@pytest.mark.integration
def test_lr_decay_reaches_the_servers(frozen_job):
    _, save, proc = frozen_job
    assert 'server[0] INFO server: set_lr 1e-10' in proc.stderr
    second = load_checkpoint(save / 'model-epoch002.params', 'mlp')
    final = load_checkpoint(save / 'model-final.params', 'mlp')  # the servers' weights, at the end
    assert len(final) == 6                     # 3 dense layers, a weight and a bias each
    # in epoch 3 both workers pushed 22 gradients each: at lr 1e-10 they move nothing
    assert_same_parameters(final, second, atol=1e-6)
    # ... whereas epoch 1, at lr 0.1, trained the network
    assert read_jsonl(save / 'eval.jsonl')[0]['accuracy'] > 0.3


@pytest.mark.integration
def test_resume_a_job_from_a_checkpoint_with_the_servers_state(frozen_job):
    tmp_path, save, _ = frozen_job
    out = tmp_path / 'resumed'
    proc = run_job(tmp_path, ['--kvstore', 'dist_async', '--num-epochs', '3', '--lr', '0.1',
                              '--momentum', '0', '--lr-decay-epoch', '1', '--lr-decay', '1e-9',
                              '--resume-from', str(save / 'model-epoch002.params'),
                              '--save-dir', str(out)])
    assert 'server[0] INFO server: load %s' % (save / 'model-epoch002.states') in proc.stderr
    for rank in (0, 1):
        assert 'worker[%d] INFO restored optimizer state' % rank in proc.stderr
        train = read_jsonl(out / ('train-worker%d.jsonl' % rank))
        assert {r['epoch'] for r in train} == {3} and train[0]['iteration'] == 45
    with open(out / 'summary.json') as f:
        summary = json.load(f)
    with open(save / 'summary.json') as f:
        original = json.load(f)
    # weights frozen since epoch 2: the resumed job ends where the original did, with the
    # weights of the checkpoint it started from (a job that did not load them would hold
    # freshly initialized ones)
    assert_same_parameters(load_checkpoint(out / 'model-final.params', 'mlp'),
                           load_checkpoint(save / 'model-epoch002.params', 'mlp'), atol=1e-6)
    assert summary['final_accuracy'] == original['final_accuracy']
    assert summary['resumed_from'] == str(save / 'model-epoch002.params')
    # ... which holds even if loading did nothing (lr ~0, no momentum).  The servers' own
    # state must go on from the checkpoint: the update count the optimizer keeps per key
    # is the checkpoint's plus one per gradient pushed in the resumed job
    import pickle
    with open(save / 'model-epoch002.states.server-0', 'rb') as f:
        saved_state = pickle.load(f)
    with open(out / 'model-final.states.server-0', 'rb') as f:
        resumed_state = pickle.load(f)
    pushed = sum(len(read_jsonl(out / ('train-worker%d.jsonl' % rank))) for rank in (0, 1))
    assert saved_state['index_update_count'] and all(
        n > pushed for n in saved_state['index_update_count'].values())
    assert resumed_state['index_update_count'] == {
        k: n + pushed for k, n in saved_state['index_update_count'].items()}


# ---------------------------------------------------------------------------
# emulated compute (--emulate): the lab's worker iteration
# ---------------------------------------------------------------------------
def test_bad_emulate(capsys):
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--emulate', 'mixed-3'], WORKER_ENV)
    assert '--emulate' in err and 'mixed-3' in err and 'straggler-8' in err
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--emulate', 'mixed-2'], WORKER_ENV)
    assert '--emulate mixed-2 is for 2 workers but the job has 4' in err and '-n 2' in err
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--emulate', 'straggler-8',
                            '--slowdown', '1:2'], WORKER_ENV)
    assert '--emulate and --slowdown are exclusive' in err


@pytest.mark.integration
@pytest.mark.parametrize('emulate', ['mixed-2', 'name=pair,workers=2,base_ms=15,factors=1:2.5,'
                                                'jitter=1%'])
def test_emulated_job_pads_every_pass_to_the_profile(tmp_path, emulate):
    """Each worker's compute (real pass + sleep) is the profile's draw for its rank, seed and
    iteration, and the draws are logged as emulated_s (2 workers, mixed-2 or the same cluster
    described by a spec, dist_dssp with DC-ASGD-a on the servers: the stores' metrics and the
    servers' state are written)."""
    from mxnet_ssp.lab.cluster_model.profiles import get_scenario
    scenario = get_scenario(emulate)
    save = tmp_path / 'run'
    run_job(tmp_path, ['--dataset', 'mnist5k', '--kvstore', 'dist_dssp', '--staleness', '1,4',
                       # lr 0.01: at the default 0.1 DC-ASGD-a's loss grows past 100x its
                       # first value within 10 iterations and the divergence guard stops it
                       '--optimizer', 'dcasgd_pw', '--adaptive', '--lr', '0.01',
                       '--emulate', emulate, '--seed', '5', '--num-iterations', '25',
                       '--batch-size', '16', '--save-dir', str(save), '--save-period', '0',
                       '--snapshot-every', '0.2'])
    summary = json.loads((save / 'summary.json').read_text())
    assert summary['emulate'] == emulate and summary['iterations_per_worker'] == {
        '0': 25, '1': 25}
    for name in STORE_RUNS['dist_dssp'][1] + ['model-final.states.server-0']:
        assert (save / name).is_file(), (name, sorted(os.listdir(save)))
    for rank in (0, 1):
        records = read_jsonl(save / ('train-worker%d.jsonl' % rank))
        stream = scenario.stream(rank, 5)
        expected = [round(stream.next(), 6) for _ in records]
        assert [r['emulated_s'] for r in records] == expected
        for r in records:       # padded to the draw, or the real pass was longer
            assert r['compute_s'] + r['sleep_s'] == pytest.approx(
                max(r['emulated_s'], r['compute_s']), abs=2e-6)
            assert r['sleep_late_s'] >= 0 and (r['sleep_s'] > 0 or r['sleep_late_s'] == 0)
        cpu = [r['cpu_s'] for r in records]          # the process's CPU, never decreasing
        assert cpu == sorted(cpu) and cpu[-1] > cpu[0]
    slow = read_jsonl(save / 'train-worker1.jsonl')
    assert statistics.median(r['emulated_s'] for r in slow) == pytest.approx(
        2.5 * scenario.base_s, rel=0.05)
    # worker 0's weights every 0.2 s of training, evaluated at the end: one per period passed
    fixed = read_jsonl(save / 'eval_fixed.jsonl')
    times = [e['elapsed_s'] for e in fixed]
    assert fixed and all(0 <= e['accuracy'] <= 1 for e in fixed)
    assert all(b - a > 0 for a, b in zip(times, times[1:])) and times[0] >= 0.2
    # the period of each written time, counted without float rounding (0.6 / 0.2 < 3)
    periods = [math.floor(round(t / 0.2, 6)) for t in times]
    assert periods == sorted(set(periods))
    from mxnet_ssp.lab.reproduce.collect import collect_run
    from mxnet_ssp.lab.cluster_model.arms import parse_arm
    run = collect_run(str(save), parse_arm('dssp'))
    assert run['curve_source'] == 'fixed' and [t for t, _ in run['curve']] == times
    # the advisor reads the same logs back: each worker's compute, and an overhead per step
    from mxnet_ssp.lab.cluster_model import advise
    fit = advise.fit_run(str(save))
    assert fit.iterations == [20, 20]
    assert fit.compute_s == pytest.approx(scenario.times(), rel=0.1)
    assert 0 < fit.overhead_s < 0.5
    assert advise.main([str(save), '--seeds', '1']) == 0


def test_balance_bounds_that_admit_no_split_exit_2(capsys):
    err = bad_flag(capsys, ['--kvstore', 'dist_sync', '--balance', '--batch-size', '8'],
                   dict(WORKER_ENV, MXNET_SSP_BALANCE_MIN='9'))
    assert '--balance' in err and 'MXNET_SSP_BALANCE_MIN' in err and 'admit no split' in err


@pytest.mark.integration
def test_two_worker_dist_sync_job_with_balance(tmp_path):
    save = tmp_path / 'run'
    argv = ['--kvstore', 'dist_sync', '--balance', '--slowdown', '1:3', '--num-epochs', '1',
            '--save-dir', str(save)]
    proc = run_job(tmp_path, argv)
    assert 'balance: from iteration' in proc.stderr
    logs = [read_jsonl(save / ('train-worker%d.jsonl' % r)) for r in (0, 1)]
    assert len(logs[0]) == len(logs[1]) == 1437 // 64           # one pass of the job over the set
    assert all(a['batch'] + b['batch'] == 64 for a, b in zip(*logs))
    assert logs[1][-1]['batch'] < 32 < logs[0][-1]['batch']      # the slow worker got less
    with open(save / 'summary.json') as f:
        balance = json.load(f)['balance']
    assert balance['total'] == 64 and balance['switches']


def test_adaptive_reading_flag(capsys):
    args = parse_args(['--kvstore', 'dist_async', '--optimizer', 'dcasgd_pw', '--adaptive',
                       '--adaptive-reading', 'multiverso'], environ=WORKER_ENV)
    assert make_optimizer(args, 32).adaptive_reading == "multiverso"
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--optimizer', 'dcasgd_pw', '--adaptive',
                            '--adaptive-reading', 'numpy'], WORKER_ENV)
    assert '--adaptive-reading' in err and 'numpy' in err and 'multiverso' in err
    err = bad_flag(capsys, ['--kvstore', 'dist_async', '--optimizer', 'dcasgd_pw',
                            '--adaptive-reading', 'paper'], WORKER_ENV)
    assert 'only accepted with --adaptive' in err


def test_a_fresh_run_clears_what_an_earlier_job_left(tmp_path):
    """Worker 0 of a fresh run in a used --save-dir: the earlier job's CPU records and the
    files of ranks this job lacks go; this job's ranks' files are left to be overwritten."""
    from mxnet_ssp.lab.training.logs import clear_earlier_job
    names = ['cpu-server-11.json', 'cpu-controller-12.json', 'train-worker0.jsonl',
             'train-worker1.jsonl', 'train-worker3.jsonl', 'worker-1.jsonl', 'worker-2.jsonl',
             'controller.jsonl', 'summary.json', 'model-final.params']
    for name in names:
        (tmp_path / name).write_text('{}\n')
    gone = clear_earlier_job(str(tmp_path), num_workers=2)
    assert [os.path.basename(p) for p in gone] == ['cpu-controller-12.json', 'cpu-server-11.json',
                                                   'train-worker3.jsonl', 'worker-2.jsonl']
    assert sorted(os.listdir(tmp_path)) == sorted(
        ['train-worker0.jsonl', 'train-worker1.jsonl', 'worker-1.jsonl', 'controller.jsonl',
         'summary.json', 'model-final.params'])
