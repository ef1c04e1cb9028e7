"""mxnet-ssp-launch checks every MXNET_SSP_* setting it forwards and the training script's
flags before it starts any process (issue 38, part 2)."""
import os
import sys

import pytest

from mxnet_ssp import config
from mxnet_ssp.launch import cli
from mxnet_ssp.launch.settings import LaunchError, check_every_setting
from mxnet_ssp.lab.launch_check import training_flags
# the launcher's way in: every check registered in the entry-point group mxnet_ssp.launch_checks
from mxnet_ssp.launch.command_checks import check_command as check_training_flags
from mxnet_ssp.launch.command_checks import registered_checks


@pytest.fixture
def launch(monkeypatch, tmp_path, capsys):
    """Run mxnet-ssp-launch's main in `tmp_path` with `env` over a clean environment;
    returns (exit code, stderr lines).  Starting a process fails the test."""
    def no_start(*args, **kwargs):
        raise AssertionError('a process was started')

    monkeypatch.setattr(cli, 'Supervisor', no_start)
    monkeypatch.chdir(tmp_path)
    config.reset_settings_cache()

    def run(argv, env=None, settings_file=None):
        capsys.readouterr()          # what an earlier call printed
        for name in list(os.environ):
            if name.startswith(('MXNET_SSP_', 'DMLC_')):
                monkeypatch.delenv(name)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        if settings_file is not None:
            (tmp_path / 'mxnet_ssp.env').write_text(settings_file)
        code = cli.main(argv)
        return code, capsys.readouterr().err.splitlines()
    return run


TRAIN = ['mxnet-ssp-train', '--kvstore', 'dist_softsync']


@pytest.mark.parametrize('name,value,words', [
    ('MXNET_SSP_BUCKET_BYTES', 'x', ['integer >= 0']),
    ('MXNET_SSP_SOFTSYNC_SPLITS', '5', ['1 <= n <= 2']),
    ('MXNET_SSP_HOST_COPIES', 'maybe', ['yes', 'no']),
    ('MXNET_SSP_FOLLOW_GRACE', '0', ['1 to 600']),
    ('MXNET_SSP_GPUS', '0,0', ['distinct GPU ids']),
    ('MXNET_SSP_BALANCE_PERIOD', '-1', [config.ENV_BALANCE_PERIOD]),
])
def test_a_bad_setting_in_the_environment_is_one_line_exit_2(launch, name, value, words):
    code, err = launch(['-n', '2', '--launcher', 'local'] + TRAIN, {name: value})
    assert code == 2
    assert len(err) == 1, err
    assert err[0].startswith('mxnet-ssp-launch: error: %s=%r is not valid' % (name, value))
    for word in words:
        assert word in err[0]


def test_the_softsync_splits_are_checked_against_the_workers(launch):
    code, err = launch(['-n', '5', '--launcher', 'local', '--timeout', '1', 'true'],
                       {'MXNET_SSP_SOFTSYNC_SPLITS': '6'})
    assert code == 2 and '1 <= n <= 5' in err[0]
    # and the same value is accepted by a job that has enough workers: the launch goes on
    with pytest.raises(AssertionError, match='a process was started'):
        launch(['-n', '6', '--launcher', 'local', 'true'], {'MXNET_SSP_SOFTSYNC_SPLITS': '6'})


def test_the_splits_bound_only_a_job_that_may_run_softsync(launch):
    # the command names another store: the splits must have their form, nothing more
    with pytest.raises(AssertionError, match='a process was started'):
        launch(['-n', '2', '--launcher', 'local', 'mxnet-ssp-train', '--kvstore', 'dist_ssp'],
               {'MXNET_SSP_SOFTSYNC_SPLITS': '4'})
    code, err = launch(['-n', '2', '--launcher', 'local', 'mxnet-ssp-train', '--kvstore',
                        'dist_ssp'], {'MXNET_SSP_SOFTSYNC_SPLITS': '0'})
    assert code == 2 and "MXNET_SSP_SOFTSYNC_SPLITS='0' is not valid" in err[0]


def test_a_bad_setting_in_the_settings_file_names_its_line(launch):
    code, err = launch(['-n', '2', '--launcher', 'local', 'true'],
                       settings_file='# job\nMXNET_SSP_SOFTSYNC_SPLITS=3\n')
    assert code == 2 and len(err) == 1
    assert "MXNET_SSP_SOFTSYNC_SPLITS='3' is not valid" in err[0]
    assert 'mxnet_ssp.env line 2' in err[0] or 'mxnet_ssp.env, line 2' in err[0]


def test_a_bad_setting_of_env_worker_names_the_flag(launch):
    code, err = launch(['-n', '2', '--launcher', 'local', '--env-worker',
                        'MXNET_SSP_BUCKET_BYTES:-1', 'true'])
    assert code == 2 and len(err) == 1
    assert "MXNET_SSP_BUCKET_BYTES='-1' is not valid" in err[0]
    assert err[0].endswith('(set with --env-worker)')


def test_blank_settings_read_as_unset(launch):
    with pytest.raises(AssertionError, match='a process was started'):
        launch(['-n', '2', '--launcher', 'local', 'true'],
               {'MXNET_SSP_SOFTSYNC_SPLITS': ' ', 'MXNET_SSP_BUCKET_BYTES': ''})


@pytest.mark.parametrize('flags,message', [
    (['--kvstore', 'dist_dssp', '--staleness', '9,2'],
     "in the command: --staleness='9,2' is not valid for dist_dssp: sL=9 is greater than sU=2"),
    (['--kvstore', 'dist_dssp', '--lr', '-0.1'],
     'in the command: --lr -0.1 is not valid: expected a number > 0'),
    (['--kvstore', 'dist_softsync', '--splits', '3'],
     "in the command: --splits='3' is not valid for dist_softsync: expected an integer n with "
     "1 <= n <= 2"),
    (['--kvstore', 'dist_ssp', '--lr', 'x'],
     "in the command: argument --lr: invalid float value: 'x'"),
    (['--kvstore', 'dist_ssp', '--no-such-flag'],
     'in the command: unrecognized arguments: --no-such-flag'),
])
@pytest.mark.parametrize('runner', [
    ['mxnet-ssp-train'],
    [sys.executable, '-u', '-m', 'mxnet_ssp.lab.train_cifar'],
    ['python3', os.path.join('train_scripts', 'train_cifar.py')],
])
def test_bad_training_flags_are_one_line_exit_2(launch, monkeypatch, flags, message, runner):
    code, err = launch(['-n', '2', '--launcher', 'local'] + runner + flags)
    assert code == 2
    assert err == ['mxnet-ssp-launch: error: ' + message] or (
        len(err) == 1 and err[0].startswith('mxnet-ssp-launch: error: ' + message)), err


def test_good_training_flags_start_the_job(launch):
    with pytest.raises(AssertionError, match='a process was started'):
        launch(['-n', '2', '--launcher', 'local', 'mxnet-ssp-train', '--kvstore', 'dist_dssp',
                '--staleness', '2,9', '--lr', '0.05', '--save-dir', 'out'])


def test_the_flags_are_checked_in_the_workers_environment(launch):
    # --splits 2 fits a 2-worker job; the worker count is the launcher's -n
    with pytest.raises(AssertionError, match='a process was started'):
        launch(['-n', '2', '--launcher', 'local'] + TRAIN + ['--splits', '2'])
    # the launcher's environment reaches the workers: --balance's bounds come from it
    code, err = launch(['-n', '2', '--launcher', 'local', 'mxnet-ssp-train', '--kvstore',
                        'dist_sync', '--balance'], {'MXNET_SSP_BALANCE_MIN': '64'})
    assert code == 2 and len(err) == 1 and '--balance' in err[0]


@pytest.mark.parametrize('command,flags', [
    (['mxnet-ssp-train', '--lr', '1'], ['--lr', '1']),
    (['/venv/bin/mxnet-ssp-train'], []),
    (['python', '-m', 'mxnet_ssp.lab.train_cifar', '--x'], ['--x']),
    (['python3.11', '-mmxnet_ssp.lab.train_cifar', '--x'], ['--x']),
    (['python', '-X', 'dev', '-m', 'mxnet_ssp.lab.train_cifar'], []),
    (['python', '/src/train_scripts/train_cifar.py', '--y'], ['--y']),
    (['python', '-m', 'mxnet_ssp.lab.compare_paradigms'], None),
    (['python', 'train.py', '--kvstore', 'dist_ssp'], None),
    (['python', '-c', 'import mxnet_ssp.lab.train_cifar'], None),
    (['sh', '-c', 'mxnet-ssp-train --lr -1'], None),
    (['python', '/src/other/train_cifar.py'], None),
    ([], None),
])
def test_training_flags_finds_the_training_script(command, flags):
    assert training_flags(command, cwd='/src') == flags


def test_the_training_scripts_check_is_registered_for_the_launcher():
    """The launcher imports nothing of the lab: it finds the check through the package's
    entry points (setup.py), installed with the package."""
    points = {p.name: p.value for p in registered_checks()}
    assert points.get('mxnet-ssp-train') == 'mxnet_ssp.lab.launch_check:check_training_flags'


def test_help_and_version_are_left_to_the_processes():
    for flag in ('--help', '-h', '--version'):
        check_training_flags(['mxnet-ssp-train', '--lr', '-1', flag], {}, 2)


def test_the_files_of_other_hosts_are_not_checked_under_ssh(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('')
    command = ['mxnet-ssp-train', '--kvstore', 'dist_ssp', '--save-dir', str(blocker / 'out')]
    with pytest.raises(LaunchError, match='--save-dir'):
        check_training_flags(command, {}, 2, local=True)
    check_training_flags(command, {}, 2, local=False)


def test_the_launcher_check_imports_neither_mxnet_nor_gluoncv():
    import subprocess
    code = ('import sys\n'
            'from mxnet_ssp.launch.command_checks import check_command as check_training_flags\n'
            'check_training_flags(["mxnet-ssp-train", "--kvstore", "dist_ssp", "--model", '
            '"cifar_resnet20_v1", "--save-dir", "out"], {}, 2)\n'
            'print(sorted(m for m in ("mxnet", "gluoncv") if m in sys.modules))\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, MXNET_SSP_AUTOLOAD='0'))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '[]'


def test_check_every_setting_skips_other_variables_and_the_launchers_own():
    check_every_setting({'MXNET_SSP_LAUNCH_SSH_ARGS': '-F x', 'OMP_NUM_THREADS': 'x',
                         'MXNET_SSP_NOT_A_SETTING': 'x'}, 2)
    with pytest.raises(LaunchError, match="MXNET_SSP_STALENESS='x'"):
        check_every_setting({'MXNET_SSP_STALENESS': 'x'}, 2)


@pytest.mark.parametrize('flags,message', [
    (['--kvstore', 'dist_dssp', '--lr', '-0.1'], '--lr -0.1 is not valid: expected a number > 0'),
    (['--kvstore', 'dist_dssp', '--lr', 'x'], "argument --lr: invalid float value: 'x'"),
])
def test_a_worker_that_finds_a_bad_flag_prints_one_line(tmp_path, flags, message):
    """Started without the launcher's check (a stock launcher, by hand), every worker of the
    job prints one line, not the 22-line usage."""
    import subprocess
    env = {k: v for k, v in os.environ.items() if not k.startswith(('DMLC_', 'MXNET_SSP_'))}
    env.update(DMLC_ROLE='worker', DMLC_NUM_WORKER='2', DMLC_NUM_SERVER='1',
               MXNET_SSP_AUTOLOAD='0', OMP_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, '-m', 'mxnet_ssp.lab.train_cifar'] + flags
                          + ['--save-dir', str(tmp_path / 'out')], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == 'python -m mxnet_ssp.lab.train_cifar: error: %s\n' % message


def test_run_by_hand_a_bad_store_flag_comes_before_the_missing_job(tmp_path, capsys,
                                                                   monkeypatch):
    from mxnet_ssp.lab.training_flags import parse_args
    monkeypatch.delenv('DMLC_ROLE', raising=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    with pytest.raises(SystemExit) as info:
        parse_args(['--kvstore', 'dist_dssp', '--dssp-mode', 'foo',
                    '--save-dir', str(tmp_path)], env)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith(
        "error: --dssp-mode 'foo' is not valid: expected one of bounded, paper, threshold")
    assert 'DMLC_ROLE' not in err
    # with good store flags the missing job is what is reported
    with pytest.raises(SystemExit):
        parse_args(['--kvstore', 'dist_dssp', '--dssp-mode', 'paper',
                    '--save-dir', str(tmp_path)], env)
    assert 'needs a parameter-server job (DMLC_ROLE is not set)' in capsys.readouterr().err


def test_a_misspelt_setting_is_a_warning_that_names_the_setting(launch, capsys):
    with pytest.raises(AssertionError, match='a process was started'):
        launch(['-n', '2', '--launcher', 'local', '--env-worker', 'MXNET_SSP_TIMOUT:30',
                'true'], {'MXNET_SSP_STALENES': '3', 'MXNET_SSP_MXNET_PACKAGE': 'mxnet'})
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if 'warning' in line] == [
        'mxnet-ssp-launch: warning: MXNET_SSP_STALENES is not a setting of mxnet-ssp; the '
        'processes ignore it (did you mean MXNET_SSP_STALENESS?)',
        'mxnet-ssp-launch: warning: MXNET_SSP_TIMOUT is not a setting of mxnet-ssp; the '
        'processes ignore it (did you mean MXNET_SSP_TIMEOUT?)']
