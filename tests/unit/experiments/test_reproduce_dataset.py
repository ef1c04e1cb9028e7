"""The reproduce runner on another dataset (issue 57): ``--dataset``, the generated task's knobs
``--teacher-scale`` / ``--teacher-noise`` / ``--teacher-dim`` / ``--teacher-hidden`` /
``--teacher-train-size`` (runner and training script), the lab presets' epochs on another
training set (``--teacher-train-size``'s when given), the grid's identity, and the servers'
evaluation loading the data the run used.  No job and no process starts here: the tests
through the command line forbid them (``subprocess.Popen`` raises), and the runner's read of
the training script's ``--help`` is replaced by the flags it would find.
"""
import json
import math
import subprocess

import pytest

from grid_args import Args  # tests/support

from mxnet_ssp.core.names import DATASETS
from mxnet_ssp.lab.cluster_model.arms import parse_arm
from mxnet_ssp.lab.training_flags.generated_knobs import TEACHER_DEFAULTS, load_options
from mxnet_ssp.lab.reproduce import cli, runner, server_eval
from mxnet_ssp.lab.reproduce.grid import UsageError, resolve_grid, run_command, run_signature
from mxnet_ssp.lab.reproduce.presets import (LAB_BATCH, PRESETS, TRAIN_SAMPLES, lab_epochs,
                                            lab_iterations)
from mxnet_ssp.lab.training_flags import build_parser as train_parser

LAB = 'emulated-transient-4'          # 4 workers, 800 iterations per worker
#: load_options of the default teacher: every knob, the sizes as ints
DEFAULT_OPTIONS = {'scale': 2.0, 'noise': 0.0, 'dim': 64, 'hidden': 64, 'train_size': 20000}
#: the next pilot's task (issue 57, pilot C): a smaller teacher, ten times the training samples
PILOT_C = dict(dataset='teacher', teacher_dim='16', teacher_hidden='16',
               teacher_train_size='200000')


def grid_of(**kw):
    return resolve_grid(Args(preset=kw.pop('preset', LAB), **kw))


def flags_after_script(cmd):
    """The training script's flags of a launcher command."""
    return cmd[cmd.index('mxnet_ssp.lab.train_cifar') + 1:]


# --- --dataset ---------------------------------------------------------------------------

def test_the_option_parses_and_overrides_the_preset_s_dataset():
    args = cli.build_parser().parse_args(['--preset', LAB, '--dataset', 'teacher'])
    assert args.dataset == 'teacher'
    assert resolve_grid(args).dataset == 'teacher'
    assert PRESETS[LAB].dataset == 'mnist5k'
    assert grid_of().dataset == 'mnist5k'                  # without it: the preset's


@pytest.mark.parametrize('value', ['mnist', 'Teacher', '', 'svhn'])
def test_an_unknown_dataset_is_refused_naming_option_value_and_choices(value):
    with pytest.raises(UsageError) as info:
        grid_of(dataset=value)
    assert str(info.value) == ("--dataset %r is not valid: expected one of %s"
                               % (value, ', '.join(DATASETS)))


def test_the_command_line_refuses_it_with_exit_code_2_before_anything(tmp_path, capsys):
    code = cli.main(['--preset', 'emulated', '--scenario', 'transient-4', '--dataset', 'mnist',
                     '--out', str(tmp_path / 'out')])
    assert code == 2
    err = capsys.readouterr().err
    assert "--dataset 'mnist' is not valid: expected one of digits, mnist5k, teacher" in err
    assert not (tmp_path / 'out' / 'transient-4' / 'grid.json').exists()


# --- the epochs of a lab run follow the training set --------------------------------------

@pytest.mark.parametrize('workers,iterations,epochs', [
    (2, 1000, 4), (4, 800, 6), (8, 600, 8), (3, 900, 5), (16, 400, 11)])
def test_lab_epochs_with_a_20000_sample_training_set(workers, iterations, epochs):
    assert lab_epochs(workers, iterations, 20000) == epochs
    batches = 20000 // workers // LAB_BATCH            # whole batches of a worker's shard
    # enough epochs for every iteration, and not one more than that needs
    assert epochs * batches >= iterations > (epochs - 1) * batches


def test_lab_epochs_keeps_the_mnist5k_default():
    assert TRAIN_SAMPLES['mnist5k'] == 4000
    for workers in (2, 4, 8):
        iterations = lab_iterations(workers)
        assert lab_epochs(workers, iterations) == lab_epochs(workers, iterations, 4000)
    assert [lab_epochs(w, lab_iterations(w)) for w in (2, 4, 8)] == [17, 26, 40]


def test_the_teacher_s_training_size_is_the_generator_s():
    from mxnet_ssp.lab.generated import teacher_arrays
    assert TRAIN_SAMPLES['teacher'] == TEACHER_DEFAULTS['train_size'] == 20000
    assert len(teacher_arrays(test_size=1)[0]) == TRAIN_SAMPLES['teacher']


def test_a_lab_preset_on_teacher_gets_the_epochs_of_its_training_set():
    mnist, teacher = grid_of(), grid_of(dataset='teacher')
    assert (mnist.epochs, mnist.num_iterations) == (26, 800)       # 31 batches a shard
    assert (teacher.epochs, teacher.num_iterations) == (6, 800)    # 156 batches a shard
    assert grid_of(dataset='mnist5k').epochs == 26
    # --epochs-scale applies to the dataset's epochs
    assert grid_of(dataset='teacher', epochs_scale='2').epochs == 12
    cmd = run_command(teacher, parse_arm('asp'), 1, '/tmp/run')
    assert cmd[cmd.index('--num-epochs') + 1] == '6'
    assert cmd[cmd.index('--num-iterations') + 1] == '800'


def test_a_preset_counted_in_epochs_keeps_its_epochs_on_another_dataset():
    assert grid_of(preset='quick', dataset='teacher').epochs == PRESETS['quick'].epochs == 60


def test_a_data_fraction_is_refused_unless_the_chosen_dataset_is_cifar():
    with pytest.raises(UsageError, match="--data-fraction '0.5'.*teacher is already small"):
        grid_of(preset='paper-alexnet', dataset='teacher', data_fraction='0.5')
    assert grid_of(preset='quick', dataset='cifar10', data_fraction='0.5').data_fraction == 0.5


# --- the knobs --------------------------------------------------------------------------------

def test_the_training_argv_carries_the_dataset_and_the_knobs():
    grid = grid_of(dataset='teacher', teacher_scale='4', teacher_noise='0.1')
    for arm in ('bsp', 'asp', 'ssp15', 'dssp'):
        cmd = run_command(grid, parse_arm(arm), 2, '/tmp/run')
        flags = flags_after_script(cmd)
        assert flags[flags.index('--dataset') + 1] == 'teacher'
        assert flags[flags.index('--teacher-scale') + 1] == '4.0'
        assert flags[flags.index('--teacher-noise') + 1] == '0.1'
        # the training script reads them back as given
        args = train_parser().parse_args(flags)
        assert (args.dataset, args.teacher_scale, args.teacher_noise) == ('teacher', 4.0, 0.1)


def test_a_knob_not_given_is_left_to_the_training_script_s_default():
    cmd = run_command(grid_of(dataset='teacher', teacher_noise='0.25'), parse_arm('bsp'), 1, '/x')
    flags = flags_after_script(cmd)
    assert '--teacher-scale' not in flags and flags[flags.index('--teacher-noise') + 1] == '0.25'
    args = train_parser().parse_args(flags)
    assert args.teacher_scale == TEACHER_DEFAULTS['scale'] == 2.0
    assert not any(f.startswith('--teacher') for f in run_command(
        grid_of(), parse_arm('bsp'), 1, '/x'))                 # mnist5k: as before


@pytest.mark.parametrize('kw,message', [
    (dict(dataset='teacher', teacher_scale='0'),
     "--teacher-scale '0' is not valid: expected a number > 0"),
    (dict(dataset='teacher', teacher_scale='nan'),
     "--teacher-scale 'nan' is not valid: expected a number > 0"),
    (dict(dataset='teacher', teacher_scale='big'),
     "--teacher-scale 'big' is not valid: expected a number > 0"),
    (dict(dataset='teacher', teacher_noise='1.01'),
     "--teacher-noise '1.01' is not valid: expected a number in [0, 1]"),
    (dict(dataset='teacher', teacher_noise='-0.1'),
     "--teacher-noise '-0.1' is not valid: expected a number in [0, 1]"),
    (dict(teacher_scale='4'),
     "--teacher-scale '4' is not valid: expected nothing with the dataset mnist5k"),
    (dict(dataset='digits', teacher_noise='0.1'),
     "--teacher-noise '0.1' is not valid: expected nothing with the dataset digits"),
])
def test_a_bad_knob_is_refused_naming_it(kw, message):
    with pytest.raises(UsageError) as info:
        grid_of(**kw)
    assert str(info.value).startswith(message), str(info.value)


def test_the_knobs_bounds_are_accepted():
    grid = grid_of(dataset='teacher', teacher_scale='1e-3', teacher_noise='1')
    assert (grid.teacher_scale, grid.teacher_noise) == (0.001, 1.0)
    assert grid_of(dataset='teacher', teacher_noise='0').teacher_noise == 0.0


# --- the identity of a grid -----------------------------------------------------------------

def test_the_knobs_are_part_of_the_identity_only_when_given():
    plain = grid_of(dataset='teacher').identity()
    assert 'teacher_scale' not in plain and 'teacher_noise' not in plain
    assert set(grid_of().identity()) == set(plain)      # grid.json of an old grid: the same keys
    given = grid_of(dataset='teacher', teacher_scale='4').identity()
    assert given['teacher_scale'] == 4.0 and 'teacher_noise' not in given
    arm = parse_arm('dssp')
    signatures = [run_signature(grid_of(**kw), arm, 1) for kw in (
        {}, dict(dataset='teacher'), dict(dataset='teacher', teacher_scale='4'),
        dict(dataset='teacher', teacher_scale='4', teacher_noise='0.1'))]
    assert len({json.dumps(s, sort_keys=True) for s in signatures}) == 4


def record(grid, out):
    path, identity = cli.check_grid_file(grid, str(out))
    with open(path, 'w') as f:
        json.dump(identity, f)


@pytest.mark.parametrize('first,then,words', [
    ({}, dict(dataset='teacher'), 'dataset (mnist5k there, teacher now)'),
    (dict(dataset='teacher'), {}, 'dataset (teacher there, mnist5k now)'),
    (dict(dataset='teacher', teacher_scale='4'), dict(dataset='teacher', teacher_scale='3'),
     'teacher_scale (4.0 there, 3.0 now)'),
    (dict(dataset='teacher', teacher_scale='4'), dict(dataset='teacher'),
     'teacher_scale (4.0 there, None now)'),
    (dict(dataset='teacher'), dict(dataset='teacher', teacher_noise='0.1'),
     'teacher_noise (None there, 0.1 now)'),
])
def test_a_grid_continued_on_other_data_is_refused(tmp_path, first, then, words):
    record(grid_of(**first), tmp_path)
    with pytest.raises(UsageError) as info:
        cli.check_grid_file(grid_of(**then), str(tmp_path))
    assert words in str(info.value) and 'already holds a grid' in str(info.value)


def test_a_grid_continued_on_the_same_data_is_accepted(tmp_path):
    for kw in ({}, dict(dataset='teacher', teacher_scale='4', teacher_noise='0.1')):
        out = tmp_path / str(len(kw))
        out.mkdir()
        record(grid_of(**kw), out)
        cli.check_grid_file(grid_of(**kw), str(out))
    # --dataset mnist5k on a lab preset is the preset's grid
    cli.check_grid_file(grid_of(dataset='mnist5k'), str(tmp_path / '0'))


def test_a_grid_json_from_before_the_option_still_continues(tmp_path):
    """A grid.json written before --dataset existed: the same keys, the same grid."""
    old = dict(grid_of().identity())
    (tmp_path / 'grid.json').write_text(json.dumps(old))
    cli.check_grid_file(grid_of(), str(tmp_path))
    with pytest.raises(UsageError, match='dataset'):
        cli.check_grid_file(grid_of(dataset='teacher'), str(tmp_path))


# --- through the command line: a dry run that starts nothing ---------------------------------

def test_the_dry_run_of_the_pilot_prints_teacher_runs(tmp_path, capsys, monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError('a process was started: %r' % (args,))
    monkeypatch.setattr(subprocess, 'Popen', no_process)
    flags = {'--no-progress', '--save-period', '--sync-average', '--teacher-scale',
             '--teacher-noise'}
    monkeypatch.setattr(runner, 'script_flags', lambda grid: flags)
    assert cli.main(['--preset', 'emulated', '--scenario', 'transient-4', '--dataset', 'teacher',
                     '--teacher-scale', '3', '--paradigms', 'bsp,asp,ssp15,dssp', '--trials',
                     '2', '--arm-lr', 'bsp=0.04,*=0.01', '--no-plots', '--dry-run',
                     '--out', str(tmp_path / 'pilot')]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if 'train_cifar' in line]
    assert len(commands) == 8
    for line in commands:
        assert ' --dataset teacher --teacher-scale 3.0 ' in line
        assert ' --num-epochs 6 ' in line and line.endswith(' --num-iterations 800')
        assert '--teacher-noise' not in line
    assert sum(' --lr 0.04 ' in c for c in commands) == 2
    assert sum(' --lr 0.01 ' in c for c in commands) == 6
    assert not (tmp_path / 'pilot').exists()


def test_a_training_script_without_the_knobs_is_refused_before_any_run(monkeypatch):
    monkeypatch.setattr(runner, 'script_flags', lambda grid: {'--sync-average', '--model'})
    problems = runner.check_train_script(grid_of(dataset='teacher', teacher_noise='0.1'))
    assert len(problems) == 1 and 'does not accept --teacher-noise' in problems[0]
    assert runner.check_train_script(grid_of(dataset='teacher')) == []


# --- the servers' evaluation loads the run's data ------------------------------------------

def write_summary(directory, **summary):
    (directory / 'summary.json').write_text(json.dumps(summary))


def test_load_options_of_each_dataset():
    assert load_options('teacher', {}) == DEFAULT_OPTIONS
    assert load_options('teacher', {'scale': 4, 'noise': None}) == dict(DEFAULT_OPTIONS,
                                                                        scale=4.0)
    assert load_options('mnist5k', {'scale': 4}) == {}
    assert load_options('mnist5k', {'dim': 16}) == {}


def test_server_eval_loads_the_dataset_and_knobs_the_run_recorded(tmp_path):
    write_summary(tmp_path, dataset='teacher', data_options={'scale': 4.0, 'noise': 0.1},
                  final_accuracy=0.8)
    # what the run recorded wins over what the caller (the grid) says
    assert server_eval.run_data(str(tmp_path), 'mnist5k') == (
        'teacher', {'scale': 4.0, 'noise': 0.1})
    assert server_eval.run_data(str(tmp_path), 'teacher', {'scale': 2.0}) == (
        'teacher', {'scale': 4.0, 'noise': 0.1})


def test_server_eval_reads_old_records_as_before(tmp_path):
    write_summary(tmp_path, dataset='mnist5k', final_accuracy=0.94)   # no data_options
    assert server_eval.run_data(str(tmp_path), 'mnist5k') == ('mnist5k', {})
    write_summary(tmp_path, dataset='teacher')          # a teacher run before the knobs
    assert server_eval.run_data(str(tmp_path), 'teacher', {'scale': 4.0}) == ('teacher', {})
    write_summary(tmp_path, dataset='mnist5k', data_options={})
    assert server_eval.run_data(str(tmp_path), 'mnist5k') == ('mnist5k', {})


def test_server_eval_without_a_record_uses_the_grid_s(tmp_path):
    assert server_eval.run_data(str(tmp_path), 'teacher', {'scale': 3.0}) == (
        'teacher', dict(DEFAULT_OPTIONS, scale=3.0))
    assert server_eval.run_data(str(tmp_path), 'mnist5k') == ('mnist5k', {})
    (tmp_path / 'summary.json').write_text('{not json')
    assert server_eval.run_data(str(tmp_path), 'digits', None) == ('digits', {})


def test_evaluate_run_builds_its_network_on_the_recorded_data(tmp_path, monkeypatch):
    """evaluate_run hands run_data's choice to the loader (stopped there: no MXNet)."""
    from mxnet_ssp.server.snapshots import SNAPSHOT_FILES
    (tmp_path / (SNAPSHOT_FILES[0] % '0')).write_text('')
    (tmp_path / 'eval.jsonl').write_text(json.dumps(
        {'time': 100.0, 'elapsed_s': 1.0, 'accuracy': 0.5, 'final': True}) + '\n')
    write_summary(tmp_path, dataset='teacher', data_options={'scale': 0.5, 'noise': 0.2})
    monkeypatch.setattr(server_eval, 'read_snapshots', lambda path: [])
    seen = []

    class Stop(Exception):
        pass

    def network(directory, model, dataset, data_dir, options=None):
        seen.append((model, dataset, data_dir, options))
        raise Stop
    monkeypatch.setattr(server_eval, '_network', network)
    with pytest.raises(Stop):
        server_eval.evaluate_run(str(tmp_path), 'mlp', 'mnist5k', '/data',
                                 data_options={'scale': 9.0})
    assert seen == [('mlp', 'teacher', '/data', {'scale': 0.5, 'noise': 0.2})]


def test_the_runner_passes_the_grid_s_knobs_to_the_evaluation(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(runner, 'evaluate_run', lambda *a, **kw: seen.append((a, kw)) or [])
    marker = {}
    runner._evaluate_servers(grid_of(dataset='teacher', teacher_scale='4'), str(tmp_path), marker)
    (args, kw), = seen
    assert args[1:3] == ('mlp', 'teacher') and kw == {'data_options': {'scale': 4.0}}
    assert 'server_eval' in marker


def test_data_load_takes_the_knobs_and_refuses_them_elsewhere():
    pytest.importorskip('mxnet')
    import numpy as np
    from mxnet_ssp.lab import data
    from mxnet_ssp.lab.generated import teacher_arrays
    ds = data.load('teacher', scale=4.0, noise=0.1)
    x_train, y_train, x_test, y_test = teacher_arrays(scale=4.0, noise=0.1)
    np.testing.assert_array_equal(data.arrays(ds.test)[1], y_test)
    np.testing.assert_array_equal(data.arrays(ds.train)[1], y_train)
    # another scale labels the same test inputs otherwise
    assert (data.arrays(data.load('teacher').test)[1] != y_test).any()
    with pytest.raises(ValueError, match="dataset 'mnist5k' takes no options"):
        data.load('mnist5k', scale=4.0)
    assert math.isfinite(float(x_train.mean()))


# --- the training script: its flags reach the loader ----------------------------------------

def test_the_training_script_loads_with_its_knobs(monkeypatch):
    from mxnet_ssp.lab.training import loop
    args = train_parser().parse_args(['--dataset', 'teacher', '--teacher-scale', '4'])
    assert loop.data_options(args) == dict(DEFAULT_OPTIONS, scale=4.0)
    assert loop.data_options(train_parser().parse_args(['--dataset', 'mnist5k'])) == {}
    pytest.importorskip('mxnet')
    from mxnet_ssp.lab import data
    seen = []
    monkeypatch.setattr(data, 'load', lambda *a, **kw: seen.append((a, kw)) or 'loaded')
    args.parser = None
    assert loop.load_data(args) == 'loaded'
    assert seen[0][0][0] == 'teacher' and seen[0][1] == dict(DEFAULT_OPTIONS, scale=4.0)


def test_the_report_says_which_data_the_grid_ran_on():
    from mxnet_ssp.lab.reproduce import report
    lines = report._header(grid_of(dataset='teacher', teacher_scale='4'), [], 'cmd')
    assert "The data: teacher, scale 4 (`--dataset`), not the preset's mnist5k." in lines
    assert not any(line.startswith('The data:') for line in report._header(grid_of(), [], 'c'))


# --- the size knobs: --teacher-dim, --teacher-hidden, --teacher-train-size --------------------

#: (runner option, attribute, a value given, the int it is)
SIZE_KNOBS = [('--teacher-dim', 'teacher_dim', '16', 16),
              ('--teacher-hidden', 'teacher_hidden', '16', 16),
              ('--teacher-train-size', 'teacher_train_size', '200000', 200000)]


@pytest.mark.parametrize('option,attr,text,value', SIZE_KNOBS)
def test_each_size_option_parses_into_an_int_of_the_grid(option, attr, text, value):
    args = cli.build_parser().parse_args(['--preset', LAB, '--dataset', 'teacher', option, text])
    assert getattr(args, attr) == text                     # as typed: resolve_grid checks it
    grid = resolve_grid(args)
    assert getattr(grid, attr) == value and type(getattr(grid, attr)) is int
    knob = attr[len('teacher_'):]
    assert grid.data_options() == {knob: value} and type(grid.data_options()[knob]) is int
    assert grid.data_flags() == [option, text]
    # the others stay unset: the training script's defaults
    assert all(getattr(grid, other) is None for _, other, _, _ in SIZE_KNOBS if other != attr)


def test_the_size_knobs_reach_every_run_and_the_training_script_as_ints():
    grid = grid_of(**PILOT_C)
    for arm in ('bsp', 'asp', 'ssp15', 'dssp'):
        flags = flags_after_script(run_command(grid, parse_arm(arm), 2, '/tmp/run'))
        assert flags[flags.index('--teacher-dim') + 1] == '16'
        assert flags[flags.index('--teacher-hidden') + 1] == '16'
        assert flags[flags.index('--teacher-train-size') + 1] == '200000'
        assert '--teacher-scale' not in flags and '--teacher-noise' not in flags
        args = train_parser().parse_args(flags)
        for attr, value in (('teacher_dim', 16), ('teacher_hidden', 16),
                            ('teacher_train_size', 200000)):
            assert getattr(args, attr) == value and type(getattr(args, attr)) is int, attr


def test_the_training_script_passes_the_size_knobs_to_the_loader_as_ints():
    from mxnet_ssp.lab.training import loop
    args = train_parser().parse_args(['--dataset', 'teacher', '--teacher-dim', '16',
                                      '--teacher-hidden', '16', '--teacher-train-size', '200000'])
    options = loop.data_options(args)
    assert options == dict(DEFAULT_OPTIONS, dim=16, hidden=16, train_size=200000)
    assert [type(options[k]) for k in ('dim', 'hidden', 'train_size')] == [int] * 3
    assert [type(options[k]) for k in ('scale', 'noise')] == [float] * 2
    # summary.json records them: a JSON round trip keeps them as they are
    assert json.loads(json.dumps(options)) == options
    assert type(json.loads(json.dumps(options))['dim']) is int
    defaults = loop.data_options(train_parser().parse_args(['--dataset', 'teacher']))
    assert defaults == DEFAULT_OPTIONS and type(defaults['train_size']) is int


@pytest.mark.parametrize('argv', [['--teacher-dim', '16.5'], ['--teacher-hidden', 'x'],
                                  ['--teacher-train-size', '2e5']])
def test_the_training_script_refuses_a_size_that_is_not_an_integer(argv, capsys):
    with pytest.raises(SystemExit) as info:
        train_parser().parse_args(['--dataset', 'teacher'] + argv)
    assert info.value.code == 2
    assert argv[0] in capsys.readouterr().err


@pytest.mark.parametrize('flag', ['--teacher-dim', '--teacher-hidden', '--teacher-train-size'])
def test_the_training_script_checks_the_size_knobs(flag):
    from mxnet_ssp.lab.training_flags import build_parser, find_problem
    args = build_parser().parse_args(['--kvstore', 'local', '--dataset', 'teacher', flag, '0'])
    assert find_problem(args, {})[1] == '%s 0 is not valid: expected an integer >= 1' % flag
    args = build_parser().parse_args(['--kvstore', 'local', '--dataset', 'mnist5k', flag, '16'])
    assert find_problem(args, {})[1] == ('%s 16 is only accepted with --dataset teacher, not '
                                         'with --dataset mnist5k' % flag)
    args = build_parser().parse_args(['--kvstore', 'local', '--dataset', 'teacher', flag, '16'])
    assert find_problem(args, {}) == (None, None)


@pytest.mark.parametrize('kw,message', [
    (dict(dataset='teacher', teacher_dim='0'),
     "--teacher-dim '0' is not valid: expected an integer >= 1 (the inputs' dimension)"),
    (dict(dataset='teacher', teacher_dim='16.5'),
     "--teacher-dim '16.5' is not valid: expected an integer >= 1 (the inputs' dimension)"),
    (dict(dataset='teacher', teacher_dim='16.0'),
     "--teacher-dim '16.0' is not valid: expected an integer >= 1"),
    (dict(dataset='teacher', teacher_hidden='-1'),
     "--teacher-hidden '-1' is not valid: expected an integer >= 1 (the teacher's tanh units)"),
    (dict(dataset='teacher', teacher_hidden='many'),
     "--teacher-hidden 'many' is not valid: expected an integer >= 1"),
    (dict(dataset='teacher', teacher_train_size='0'),
     "--teacher-train-size '0' is not valid: expected an integer >= 1 (the training samples "
     "generated)"),
    (dict(dataset='teacher', teacher_train_size='2e5'),
     "--teacher-train-size '2e5' is not valid: expected an integer >= 1"),
    (dict(dataset='teacher', teacher_train_size=''),
     "--teacher-train-size '' is not valid: expected an integer >= 1"),
    (dict(teacher_dim='16'),
     "--teacher-dim '16' is not valid: expected nothing with the dataset mnist5k"),
    (dict(dataset='digits', teacher_train_size='200000'),
     "--teacher-train-size '200000' is not valid: expected nothing with the dataset digits"),
])
def test_a_bad_size_knob_is_refused_naming_option_value_and_what_is_accepted(kw, message):
    with pytest.raises(UsageError) as info:
        grid_of(**kw)
    assert str(info.value).startswith(message), str(info.value)


def test_the_command_line_refuses_a_bad_size_with_exit_code_2(tmp_path, capsys):
    code = cli.main(['--preset', 'emulated', '--scenario', 'transient-4', '--dataset', 'teacher',
                     '--teacher-dim', '16.5', '--out', str(tmp_path / 'out')])
    assert code == 2
    assert "--teacher-dim '16.5' is not valid: expected an integer >= 1" in capsys.readouterr().err
    assert not (tmp_path / 'out' / 'transient-4' / 'grid.json').exists()


@pytest.mark.parametrize('size,epochs', [('200000', 1), ('20000', 6), ('5000', 21),
                                         ('2000', 54), ('100', 800)])
def test_a_lab_run_s_epochs_follow_the_teacher_s_training_size(size, epochs):
    """4 workers, 800 iterations: the epochs hold every iteration on the shard of the
    training set given, and not one epoch more than that needs."""
    grid = grid_of(dataset='teacher', teacher_train_size=size)
    assert (grid.epochs, grid.num_iterations) == (epochs, 800)
    batches = max(1, int(size) // 4 // LAB_BATCH)
    assert epochs * batches >= 800 > (epochs - 1) * batches
    cmd = run_command(grid, parse_arm('bsp'), 1, '/tmp/run')
    assert cmd[cmd.index('--num-epochs') + 1] == str(epochs)
    assert cmd[cmd.index('--teacher-train-size') + 1] == size
    # --epochs-scale applies to those epochs
    assert grid_of(dataset='teacher', teacher_train_size=size, epochs_scale='2').epochs == \
        2 * epochs


def test_the_training_samples_lookup_takes_the_knob():
    from mxnet_ssp.lab.reproduce.presets import train_samples
    assert train_samples('teacher') == TRAIN_SAMPLES['teacher'] == 20000
    assert train_samples('teacher', 200000) == 200000
    assert train_samples('mnist5k') == 4000 and train_samples('mnist5k', None) == 4000
    # the other knobs do not move the epochs
    assert grid_of(dataset='teacher', teacher_dim='16', teacher_hidden='16').epochs == 6
    # a preset counted in epochs keeps them
    assert grid_of(preset='quick', dataset='teacher', teacher_train_size='200000').epochs == \
        PRESETS['quick'].epochs


def test_the_size_knobs_are_part_of_the_identity_only_when_given(tmp_path):
    plain = grid_of(dataset='teacher').identity()
    assert not any(k in plain for _, k, _, _ in SIZE_KNOBS)
    given = grid_of(**PILOT_C).identity()
    assert (given['teacher_dim'], given['teacher_hidden'], given['teacher_train_size']) == (
        16, 16, 200000)
    assert 'teacher_scale' not in given and given['epochs'] == 1
    arm = parse_arm('bsp')
    signatures = [run_signature(grid_of(**kw), arm, 1) for kw in (
        dict(dataset='teacher'), dict(dataset='teacher', teacher_dim='16'),
        dict(dataset='teacher', teacher_hidden='16'),
        dict(dataset='teacher', teacher_train_size='40000'), PILOT_C)]
    assert len({json.dumps(s, sort_keys=True) for s in signatures}) == 5
    # an --out of pilot C continues as pilot C, and is refused to another teacher
    record(grid_of(**PILOT_C), tmp_path)
    cli.check_grid_file(grid_of(**PILOT_C), str(tmp_path))
    with pytest.raises(UsageError) as info:
        cli.check_grid_file(grid_of(**dict(PILOT_C, teacher_dim='25')), str(tmp_path))
    assert 'teacher_dim (16 there, 25 now)' in str(info.value)
    with pytest.raises(UsageError) as info:
        cli.check_grid_file(grid_of(dataset='teacher'), str(tmp_path))
    assert 'teacher_train_size (200000 there, None now)' in str(info.value)


def test_a_grid_json_of_the_two_old_knobs_still_continues(tmp_path):
    """A grid.json written before the size knobs (pilot B's: scale 4, noise 0.1)."""
    old = grid_of(dataset='teacher', teacher_scale='4', teacher_noise='0.1')
    (tmp_path / 'grid.json').write_text(json.dumps(old.identity()))
    cli.check_grid_file(grid_of(dataset='teacher', teacher_scale='4', teacher_noise='0.1'),
                        str(tmp_path))
    with pytest.raises(UsageError, match='teacher_hidden'):
        cli.check_grid_file(grid_of(dataset='teacher', teacher_scale='4', teacher_noise='0.1',
                                    teacher_hidden='16'), str(tmp_path))


def test_load_options_give_each_knob_its_type():
    options = load_options('teacher', {'dim': 16.0, 'hidden': 16, 'train_size': '200000',
                                       'scale': 2, 'noise': None})
    assert options == dict(DEFAULT_OPTIONS, dim=16, hidden=16, train_size=200000)
    assert {k: type(v) for k, v in options.items()} == {
        'scale': float, 'noise': float, 'dim': int, 'hidden': int, 'train_size': int}
    for bad in ({'dim': 16.5}, {'hidden': 'x'}, {'train_size': True}):
        with pytest.raises(ValueError, match='must be an integer'):
            load_options('teacher', bad)


def test_server_eval_loads_the_size_knobs_the_run_recorded(tmp_path):
    recorded = dict(DEFAULT_OPTIONS, dim=16, hidden=16, train_size=200000)
    write_summary(tmp_path, dataset='teacher', data_options=recorded)
    dataset, options = server_eval.run_data(str(tmp_path), 'teacher', {'dim': 64})
    assert (dataset, options) == ('teacher', recorded)
    assert [type(options[k]) for k in ('dim', 'hidden', 'train_size')] == [int] * 3
    # a record written as floats (16.0) loads the same ints; other keys are kept as recorded
    write_summary(tmp_path, dataset='teacher',
                  data_options={'dim': 16.0, 'hidden': 16.0, 'test_size': 5000})
    assert server_eval.run_data(str(tmp_path), 'teacher') == (
        'teacher', {'dim': 16, 'hidden': 16, 'test_size': 5000})
    assert type(server_eval.run_data(str(tmp_path), 'teacher')[1]['dim']) is int
    write_summary(tmp_path, dataset='teacher', data_options={'dim': 16.5})
    with pytest.raises(ValueError, match="summary.json's data_options: dim must be an integer"):
        server_eval.run_data(str(tmp_path), 'teacher')


def test_server_eval_without_a_record_uses_the_grid_s_size_knobs(tmp_path):
    grid = grid_of(**PILOT_C)
    assert server_eval.run_data(str(tmp_path), 'teacher', grid.data_options()) == (
        'teacher', dict(DEFAULT_OPTIONS, dim=16, hidden=16, train_size=200000))


def test_the_runner_passes_the_size_knobs_to_the_evaluation(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(runner, 'evaluate_run', lambda *a, **kw: seen.append((a, kw)) or [])
    runner._evaluate_servers(grid_of(**PILOT_C), str(tmp_path), {})
    (args, kw), = seen
    assert kw == {'data_options': {'dim': 16, 'hidden': 16, 'train_size': 200000}}


def test_a_training_script_without_the_size_knobs_is_refused_before_any_run(monkeypatch):
    monkeypatch.setattr(runner, 'script_flags', lambda grid: {
        '--sync-average', '--model', '--teacher-scale', '--teacher-noise'})
    problems = runner.check_train_script(grid_of(**PILOT_C))
    assert len(problems) == 1
    assert 'does not accept --teacher-dim, --teacher-hidden, --teacher-train-size' in problems[0]
    assert runner.check_train_script(grid_of(dataset='teacher', teacher_scale='4')) == []


def test_the_report_names_the_size_knobs():
    from mxnet_ssp.lab.reproduce import report
    lines = report._header(grid_of(**PILOT_C), [], 'cmd')
    assert ("The data: teacher, dim 16, hidden 16, train_size 200000 (`--dataset`), not the "
            "preset's mnist5k." in lines)
    lines = report._header(grid_of(dataset='teacher', teacher_train_size='2000000'), [], 'c')
    assert any('train_size 2000000 ' in line for line in lines)


#: the next pilot's command line (issue 57, pilot C), as it is to be run (without --out)
PILOT_C_ARGV = ['--preset', 'emulated', '--scenario', 'transient-4', '--dataset', 'teacher',
                '--teacher-dim', '16', '--teacher-hidden', '16', '--teacher-train-size',
                '200000', '--paradigms', 'bsp,asp,ssp15,dssp', '--trials', '2', '--arm-lr',
                'bsp=0.04,asp=0.01,ssp15=0.01,dssp=0.01']


def test_every_option_of_the_pilot_s_command_line_exists_as_written():
    """Each option in full (argparse would also take a prefix of one)."""
    parser = cli.build_parser()
    known = {s for action in parser._actions for s in action.option_strings}
    assert {a for a in PILOT_C_ARGV if a.startswith('--')} | {'--out'} <= known


def test_the_dry_run_of_pilot_c_prints_its_runs(tmp_path, capsys, monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError('a process was started: %r' % (args,))
    monkeypatch.setattr(subprocess, 'Popen', no_process)
    flags = {'--no-progress', '--save-period', '--sync-average', '--teacher-scale',
             '--teacher-noise', '--teacher-dim', '--teacher-hidden', '--teacher-train-size'}
    monkeypatch.setattr(runner, 'script_flags', lambda grid: flags)
    assert cli.main(PILOT_C_ARGV + ['--no-plots', '--dry-run',
                                    '--out', str(tmp_path / 'pilotC')]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if 'train_cifar' in line]
    assert len(commands) == 8
    for line in commands:
        assert (' --dataset teacher --teacher-dim 16 --teacher-hidden 16 '
                '--teacher-train-size 200000 ') in line
        assert ' --num-epochs 1 ' in line and line.endswith(' --num-iterations 800')
        assert '--teacher-scale' not in line and '--teacher-noise' not in line
    assert sum(' --lr 0.04 ' in c for c in commands) == 2
    assert sum(' --lr 0.01 ' in c for c in commands) == 6
    assert not (tmp_path / 'pilotC').exists()
