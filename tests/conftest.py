"""Shared helpers for tests that start real MXNet jobs on loopback."""
import json
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = os.path.join(ROOT, 'tests', 'jobs')


def job_env(tmp_path, **extra):
    """Environment for a job: this checkout first on the path, metrics into tmp_path."""
    env = dict(os.environ)
    env['PYTHONPATH'] = ROOT + (os.pathsep + env['PYTHONPATH'] if env.get('PYTHONPATH') else '')
    env['MXNET_SSP_METRICS_DIR'] = str(tmp_path / 'metrics')
    env['OMP_NUM_THREADS'] = '1'
    env.setdefault('MXNET_SSP_TIMEOUT', '60')
    for key in [k for k in env if k.startswith('DMLC_')]:
        del env[key]
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_job(tmp_path, command, workers=2, servers=1, timeout=180, env=None, launcher_args=()):
    """Run `command` as every role of a local job through mxnet-ssp-launch.

    On timeout the launcher gets SIGINT (it then stops the whole job) before
    the test fails, so no process of the job outlives the test.
    """
    argv = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', str(workers), '-s', str(servers),
            '--launcher', 'local'] + list(launcher_args) + list(command)
    proc = subprocess.Popen(argv, env=env or job_env(tmp_path), cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        pytest.fail('job did not finish within %d s:\n%s\n%s' % (timeout, out[-3000:], err[-6000:]))
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def fail_msg(proc):
    """What a failed job printed, for an assertion message."""
    return 'exit %s\nstdout:\n%s\nstderr:\n%s' % (proc.returncode, proc.stdout[-3000:],
                                                  proc.stderr[-6000:])


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def marker_job(tmp_path):
    """Run tests/jobs/marker_job.py; returns (completed process, {rank: [records]})."""
    def run(workers=2, servers=1, env=None, **flags):
        out = tmp_path / 'steps'
        cmd = [sys.executable, os.path.join(JOBS, 'marker_job.py'), '--out', str(out)]
        for name, value in flags.items():
            cmd += ['--' + name.replace('_', '-'), str(value)]
        proc = run_job(tmp_path, cmd, workers=workers, servers=servers, env=env)
        steps = {}
        if out.exists():
            for name in sorted(os.listdir(out)):
                rank = int(name.split('-')[1].split('.')[0])
                steps[rank] = read_jsonl(out / name)
        return proc, steps
    return run


def require_autoload_hook():
    """Skip the calling test unless this Python runs mxnet-ssp's start-up hook.

    The hook (kvstore_patches/mxnet_ssp_autoload.{pth,py}) is put at the root
    of site-packages by ``pip install .`` and, with setuptools >= 64, by
    ``pip install -e .``; the .pth imports ``mxnet_ssp_autoload`` at every
    start-up, so it is in ``sys.modules`` exactly when the hook is in place.
    """
    if 'mxnet_ssp_autoload' not in sys.modules:
        import site
        pytest.skip('the start-up hook mxnet_ssp_autoload.pth is not installed for %s (looked '
                    'in %s): run python -m pip install . (or pip install -e . with '
                    'setuptools >= 64) in the checkout, which puts it there'
                    % (sys.executable, ', '.join(site.getsitepackages())))
