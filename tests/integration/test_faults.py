"""Faults under MXNet's stock tools/launch.py, through benchmarks/faults.py (slow).

A worker killed with SIGKILL mid-job: the surviving worker must exit non-zero
within the bound, naming the dead rank.  The harness kills every process of
the trial afterwards whatever happened, so nothing outlives the test.
"""
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
import faults  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BOUND_S = 60


def _trial(tmp_path, fault, store='dist_dssp', launcher='stock'):
    args = faults.build_parser().parse_args(['--bound', str(BOUND_S), '--ssp-timeout', '10'])
    result = faults.run_trial(fault, store, launcher, args, str(tmp_path))
    assert 'error' not in result, result['error']
    assert not result.get('leftover'), result
    return result


def _survivor_workers(result):
    return [r for r in result['processes']
            if r['process'].startswith('worker') and not r['target']]


def test_worker_sigkill_under_stock_launch_survivor_exits_naming_rank(tmp_path):
    result = _trial(tmp_path, 'worker-kill')
    (w0,) = _survivor_workers(result)
    assert w0['process'] == 'worker 0', result
    assert w0['rc'] not in (None, 0), w0           # exited, and not as a success
    assert w0['exit_s'] <= BOUND_S, w0
    assert w0['names_dead'], w0['printed']
    assert any('worker 1' in line for line in w0['printed']), w0['printed']
