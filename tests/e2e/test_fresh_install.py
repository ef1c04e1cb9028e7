"""A user who installs mxnet-ssp without extras gets the product and nothing of the lab's
dependencies, and a gluon.Trainer job on dist_dssp runs without loading any lab module.

Slow (a new virtual environment, MXNet from the registry or pip's cache): ``-m slow``.
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

JOBS = os.path.join(ROOT, 'tests', 'support', 'jobs')
RECORD_STARTUP = os.path.join(ROOT, 'tests', 'support', 'rooms_startup')
#: what the lab's extra installs and the product must never need
LAB_PACKAGES = ('sklearn', 'mlxtend', 'matplotlib', 'pandas', 'tqdm', 'gluoncv', 'scipy', 'cv2')


def test_pip_install_without_extras_runs_a_dist_dssp_job_without_the_lab(tmp_path):
    venv = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True, timeout=300)
    python = str(venv / 'bin' / 'python')
    source = tmp_path / 'src'               # a copy: pip builds in it, the checkout stays clean
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        '.git', '__pycache__', '*.egg-info', 'build', 'results', 'lab_runs'))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('DMLC_', 'MXNET_SSP_', 'PYTHONPATH', 'VIRTUAL_ENV'))}
    env.update(OMP_NUM_THREADS='1', PATH=str(venv / 'bin') + os.pathsep + env.get('PATH', ''))
    out = subprocess.run([python, '-m', 'pip', 'install', '-q', str(source)], env=env,
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    probe = ('import importlib.util, json\n'
             'print(json.dumps({m: importlib.util.find_spec(m) is not None for m in %r}))\n'
             % (LAB_PACKAGES,))
    found = subprocess.run([python, '-c', probe], env=env, capture_output=True, text=True,
                           timeout=120, cwd=str(tmp_path))
    assert found.returncode == 0, found.stderr
    assert '"sklearn": false' in found.stdout and 'true' not in found.stdout, found.stdout
    records = tmp_path / 'records'
    records.mkdir()
    job_env = dict(env, PYTHONPATH=RECORD_STARTUP, ROOMS_RECORD_DIR=str(records),
                   MXNET_SSP_TIMEOUT='60')
    job = subprocess.run([str(venv / 'bin' / 'mxnet-ssp-launch'), '-n', '2', '-s', '1',
                          '--launcher', 'local', python, os.path.join(JOBS, 'gluon_job.py'),
                          '--kvstore', 'dist_dssp', '--steps', '6',
                          '--out', str(tmp_path / 'out')],
                         env=job_env, capture_output=True, text=True, timeout=300,
                         cwd=str(tmp_path))
    assert job.returncode == 0, job.stderr[-4000:]
    names = sorted(os.listdir(records))
    assert sum(n.startswith('worker-') for n in names) == 2, names
    assert any(n.startswith('server-') for n in names), names
    for name in names:
        modules = open(os.path.join(records, name)).read().split()
        if name.startswith('other-') and 'mxnet_ssp.launch' in modules:
            continue        # the launcher: not a process of the job (it loads the registered
            #                 checks of scripts' flags, the lab's among them)
        lab = [m for m in modules if m.startswith('mxnet_ssp.lab')]
        assert not lab, '%s loaded %s' % (name, lab)
        assert all(not m.startswith(str(source)) for m in modules)
