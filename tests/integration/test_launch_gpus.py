"""GPUs per worker: ``mxnet-ssp-launch --gpus-per-worker / --gpu-map`` and the training loop.

This machine has no GPU (``mx.context.num_gpus()`` is 0), so the GPU count is injected
through the ``num_gpus`` parameter of ``launch.main`` / ``launch.plan_gpus`` /
``reproduce.main``; the jobs started with it are real local jobs whose processes dump
their environment.  The count MXNet really gives here (0) is used where it can be:
the launcher then refuses to start, and a worker given a GPU refuses to train.  The pure
checks (the map, the plan, each worker's environment, ``choose_gpus``) are unit tests:
tests/unit/launch/test_gpus.py.
"""
import os

import pytest

from conftest import fake_gpu_counter
from mxnet_ssp import launch
from mxnet_ssp.lab.training_flags import choose_gpus
from mxnet_ssp.launch import LaunchError, count_gpus
from test_launch import (DUMP_ENV, MARKER_CMD, PY, launcher_env, read_dumps, run_launcher,
                         write)


@pytest.fixture
def clean_env(monkeypatch):
    """os.environ for launch.main() run in this process, without GPU settings."""
    for key in list(os.environ):
        if key.startswith(('DMLC_', 'MXNET_SSP_')) or key in (
                'OMP_NUM_THREADS', 'PS_VERBOSE', 'CUDA_VISIBLE_DEVICES'):
            monkeypatch.delenv(key)
    return monkeypatch


# ---------------------------------------------------------------------------
# the count MXNet really gives (the pure checks: tests/unit/launch/test_gpus.py)
# ---------------------------------------------------------------------------
@pytest.mark.slow
def test_count_gpus_asks_mxnet_here():
    """This machine: MXNet sees no GPU (test_cli_refuses_gpus_mxnet_does_not_see covers
    the same call in the default run)."""
    env = launcher_env(CUDA_VISIBLE_DEVICES='')
    assert count_gpus(env) == 0


def test_count_gpus_failure_is_a_launch_error(tmp_path):
    broken = write(tmp_path, 'no_mxnet.py', 'import sys; sys.exit("no module named mxnet")')
    with pytest.raises(LaunchError, match='cannot count the GPUs MXNet sees'):
        count_gpus({'PATH': os.environ['PATH']}, python=broken)


# ---------------------------------------------------------------------------
# real local jobs with an injected GPU count
# ---------------------------------------------------------------------------
def test_local_job_gives_each_worker_its_gpus(tmp_path, clean_env, capfd):
    out = tmp_path / 'dumps'
    out.mkdir()
    script = write(tmp_path, 'dump.py', DUMP_ENV)
    counter = fake_gpu_counter(2)
    rc = launch.main(['-n', '2', '-s', '1', '--launcher', 'local', '--gpu-map', '0:1,1:0',
                      '--timeout', '60', PY, script, str(out)], num_gpus=counter)
    err = capfd.readouterr().err
    assert rc == 0, err
    assert 'worker 0 -> GPU 1, worker 1 -> GPU 0' in err
    assert len(counter.asked) == 1
    dumps = read_dumps(out)
    workers = {e[launch.ENV_LAUNCH_INDEX]: e for e in dumps['worker']}
    assert {i: (e['CUDA_VISIBLE_DEVICES'], e['MXNET_SSP_GPUS']) for i, e in workers.items()} \
        == {'0': ('1', '0'), '1': ('0', '0')}
    for env in dumps['scheduler'] + dumps['server']:
        assert 'MXNET_SSP_GPUS' not in env and 'CUDA_VISIBLE_DEVICES' not in env
    # what the training loop makes of a worker's environment (1 GPU visible in it)
    assert choose_gpus(0, workers['0'], visible=1) == [0]


def test_local_job_gpus_per_worker_under_a_visible_list(tmp_path, clean_env, capfd):
    out = tmp_path / 'dumps'
    out.mkdir()
    clean_env.setenv('CUDA_VISIBLE_DEVICES', '4,5,6,7')
    script = write(tmp_path, 'dump.py', DUMP_ENV)
    rc = launch.main(['-n', '2', '-s', '1', '--launcher', 'local', '--gpus-per-worker', '2',
                      '--timeout', '60', PY, script, str(out)], num_gpus=fake_gpu_counter(4))
    err = capfd.readouterr().err
    assert rc == 0, err
    dumps = read_dumps(out)
    workers = {e[launch.ENV_LAUNCH_INDEX]: e for e in dumps['worker']}
    assert {i: (e['CUDA_VISIBLE_DEVICES'], e['MXNET_SSP_GPUS']) for i, e in workers.items()} \
        == {'0': ('4,5', '0,1'), '1': ('6,7', '0,1')}
    for env in dumps['scheduler'] + dumps['server']:
        assert env['CUDA_VISIBLE_DEVICES'] == '4,5,6,7' and 'MXNET_SSP_GPUS' not in env


@pytest.mark.parametrize('args, count, words', [
    (['--gpu-map', '0:0,1:1'], 1, ["--gpu-map '0:0,1:1' gives worker 1 GPU 1"]),
    (['--gpus-per-worker', '1'], 0, ['needs GPUs, but MXNet sees none']),
    (['--gpu-map', '0:0'], 2, ['no GPU for worker 1']),
    (['--gpu-map', '0:0,1:1', '--env-worker', 'CUDA_VISIBLE_DEVICES:3'], 2,
     ['--env-worker CUDA_VISIBLE_DEVICES clashes with --gpus-per-worker / --gpu-map']),
    (['--gpus-per-worker', '1', '--launcher', 'ssh', '-H', 'hosts'], 2,
     ['are for --launcher local', 'MXNET_SSP_GPUS']),
])
def test_bad_gpu_flags_exit_2_and_start_nothing(tmp_path, clean_env, capfd, args, count, words):
    marker = tmp_path / 'started'
    (tmp_path / 'hosts').write_text('127.0.0.1\n')
    clean_env.chdir(tmp_path)
    rc = launch.main(['-n', '2', '--launcher', 'local'] + args + MARKER_CMD + [str(marker)],
                     num_gpus=fake_gpu_counter(count))
    err = capfd.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('mxnet-ssp-launch: error: '), err
    assert all(w in lines[0] for w in words), lines[0]
    assert not marker.exists()


def test_cli_refuses_gpus_mxnet_does_not_see(tmp_path):
    """`python -m mxnet_ssp.launch` from a fresh process, with the count MXNet really gives."""
    marker = tmp_path / 'started'
    proc = run_launcher(['-n', '2', '--launcher', 'local', '--gpu-map', '0:0,1:1']
                        + MARKER_CMD + [str(marker)])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("mxnet-ssp-launch: error: --gpu-map '0:0,1:1' needs GPUs, "
                                  'but MXNet sees none here'), proc.stderr
    assert not marker.exists()


# ---------------------------------------------------------------------------
# the training loop
# ---------------------------------------------------------------------------
def test_training_script_refuses_a_gpu_this_machine_lacks(tmp_path, monkeypatch, capsys):
    """The real script, in this process: MXNet sees no GPU here, so MXNET_SSP_GPUS=0 fails."""
    import mxnet as mx
    from mxnet_ssp.lab.training.cli import main
    assert mx.context.num_gpus() == 0
    monkeypatch.setenv('MXNET_SSP_GPUS', '0')
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '1')
    with pytest.raises(SystemExit) as info:
        main(['--kvstore', 'local', '--save-dir', str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "MXNET_SSP_GPUS='0' is not valid here: MXNet sees 0 GPU(s) in this worker " \
           "(CUDA_VISIBLE_DEVICES='1')" in err, err


# ---------------------------------------------------------------------------
# reproduce: the flags reach every run's launcher, checked once before any run
# ---------------------------------------------------------------------------
def test_reproduce_passes_the_gpu_flags(tmp_path, capsys):
    from mxnet_ssp.lab.reproduce.cli import main
    counter = fake_gpu_counter(2)
    rc = main(['--preset', 'paper-mixed', '--slowdown', '', '--gpu-map', '0:1,1:0',
               '--paradigms', 'asp,dssp-threshold', '--out', str(tmp_path / 'grid'),
               '--dry-run', '--no-plots'], num_gpus=counter)
    out = capsys.readouterr().out
    assert rc == 0, out
    commands = [line for line in out.splitlines() if 'mxnet_ssp.launch' in line]
    assert len(commands) == 2 * 3                      # 2 arms x 3 trials
    for line in commands:
        assert '--launcher local --gpu-map 0:1,1:0 --timeout' in line, line
        assert '--slowdown' not in line.split('mxnet_ssp.launch', 1)[1], line
    assert len(counter.asked) == 1


@pytest.mark.parametrize('args, count, words', [
    (['--gpus-per-worker', '1'], 0, ['--gpus-per-worker 1 needs GPUs, but MXNet sees none']),
    (['--gpu-map', '0:0'], 2, ["--gpu-map '0:0' is not valid: no GPU for worker 1"]),
    (['--gpus-per-worker', 'two'], 2, ["--gpus-per-worker 'two' is not valid"]),
])
def test_reproduce_refuses_bad_gpu_flags(tmp_path, capsys, args, count, words):
    from mxnet_ssp.lab.reproduce.cli import main
    rc = main(['--preset', 'tiny', '--out', str(tmp_path / 'grid'), '--no-plots'] + args,
              num_gpus=fake_gpu_counter(count))
    err = capsys.readouterr().err
    assert rc == 2, err
    assert all(w in err for w in words), err
    assert not (tmp_path / 'grid' / 'runs').exists()
