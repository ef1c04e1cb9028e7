"""The scheduler that the start-up hook runs from libmxnet.so (mxnet_ssp.server.scheduler), in real
jobs: MXNet's Python package does not run there, the job is what it was, and
``MXNET_SSP_AUTOLOAD=0`` gives MXNet's own scheduler back."""
import glob
import json
import os
import subprocess
import sys

import pytest

from conftest import fail_msg, job_env, read_jsonl, require_autoload_hook

pytestmark = pytest.mark.integration


@pytest.mark.parametrize('autoload', ['1', '0'])
def test_the_scheduler_runs_without_mxnets_python_package_unless_autoload_is_off(
        marker_job, tmp_path, autoload):
    require_autoload_hook()
    modules = tmp_path / 'modules'
    env = job_env(tmp_path, MXNET_SSP_AUTOLOAD=autoload)
    proc, steps = marker_job(workers=2, store='dist_ssp', staleness=1, iters=3, env=env,
                             record_modules=str(modules))
    assert proc.returncode == 0, fail_msg(proc)
    assert sorted(steps) == [0, 1] and all(len(s) == 3 for s in steps.values()), steps
    for rank, records in steps.items():            # the bound held (s = 1)
        assert all(r['lead'] <= 1 for r in records), (rank, records)
    ran = {}
    for path in glob.glob(str(modules / 'modules-*.json')):
        with open(path) as f:
            record = json.load(f)
        ran.setdefault(record['role'], []).append(record['mxnet_package_ran'])
    # every process wrote its record at its exit: the scheduler's exit is MXNet's sys.exit()
    assert ran == {'scheduler': [autoload == '0'], 'server': [True], 'worker': [True, True]}, ran


@pytest.mark.parametrize('autoload', ['1', '0'])
def test_a_scheduler_that_cannot_start_ends_with_status_1_and_mxnets_message(tmp_path, autoload):
    """DMLC_NUM_WORKER unset: ps-lite's check fails in MXKVStoreRunServer, in either path."""
    require_autoload_hook()
    env = job_env(tmp_path, MXNET_SSP_AUTOLOAD=autoload, DMLC_ROLE='scheduler',
                  DMLC_PS_ROOT_URI='127.0.0.1', DMLC_PS_ROOT_PORT='1', DMLC_NUM_SERVER='1')
    proc = subprocess.run([sys.executable, '-c', 'import mxnet'], env=env, cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert 'Environment::Get()->find("DMLC_NUM_WORKER")' in proc.stderr, proc.stderr[-3000:]
    if autoload == '1':
        assert 'mxnet-ssp: scheduler (pid %d): MXKVStoreRunServer failed: MXNetError: ' in (
            proc.stderr.replace(proc.stderr.split('(pid ')[1].split(')')[0], '%d', 1)), (
            proc.stderr[-3000:])
    else:
        assert 'mxnet.base.MXNetError' in proc.stderr and 'mxnet-ssp: ' not in proc.stderr, (
            proc.stderr[-3000:])
