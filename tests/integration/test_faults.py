"""Faults under MXNet's stock tools/launch.py, through benchmarks/faults.py.

A worker killed with SIGKILL mid-job: the surviving worker exits non-zero naming the dead
rank, and every other process of the job ends by itself (nobody stops them under stock
launch.py) within ``MXNET_SSP_TIMEOUT`` + 30 s: the server hosting the controller follows
it, the scheduler sees the nodes' ps-lite connections close, any other server sees the
scheduler's close (:mod:`mxnet_ssp.ps.job_watch`), and the stock launcher returns with its
scheduler.  Each process runs under the harness's reaper, which records its exit status
and time; the harness kills every process of the trial afterwards whatever happened, so
nothing outlives the test, and reports any it had to kill as left behind.
"""
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
import faults  # noqa: E402

pytestmark = pytest.mark.integration

SSP_TIMEOUT = 10
BOUND_S = SSP_TIMEOUT + 30      # issue 24: every process ends within MXNET_SSP_TIMEOUT + 30 s


def _trial(tmp_path, fault, store='dist_dssp', launcher='stock', servers=1):
    args = faults.build_parser().parse_args(['--bound', str(BOUND_S), '--ssp-timeout',
                                             str(SSP_TIMEOUT), '--servers', str(servers)])
    result = faults.run_trial(fault, store, launcher, args, str(tmp_path))
    assert 'error' not in result, result['error']
    assert not result.get('leftover'), result
    return result


def _by_role(result):
    roles = {}
    for row in result['processes']:
        if not row['target']:
            roles.setdefault(row['process'].split(' ')[0], []).append(row)
    return roles


def _check_whole_job_ended(result, servers=1):
    """Every process but the target exited by itself within the bound; the survivors and
    MXNet's scheduler and servers with status 1; the stock launcher with its scheduler."""
    roles = _by_role(result)
    assert len(roles['server']) == servers and len(roles['scheduler']) == 1, result
    for row in result['processes']:
        if row['target']:
            continue
        assert row['rc'] is not None, ('still running at %d s' % BOUND_S, row)
        assert row['exit_s'] <= BOUND_S, row
    for row in roles['worker'] + roles['server'] + roles['scheduler']:
        assert row['rc'] == 1, row                      # mxnet_ssp.ps.process_exit.FATAL_EXIT
    (launcher,) = roles['launcher']
    # the stock tracker returns 0 whatever its processes did (dmlc_tracker/tracker.py: the
    # launcher waits for the scheduler's thread, which raises CalledProcessError)
    assert launcher['rc'] == 0, launcher
    (scheduler,) = roles['scheduler']
    assert launcher['exit_s'] >= scheduler['exit_s'] - 0.5, result
    assert any('mxnet-ssp: scheduler:' in line for line in scheduler['printed']), scheduler
    return roles


def test_worker_sigkill_under_stock_launch_ends_the_whole_job_in_bound(tmp_path):
    result = _trial(tmp_path, 'worker-kill')
    roles = _check_whole_job_ended(result)
    (w0,) = roles['worker']
    assert w0['process'] == 'worker 0', result
    assert w0['names_dead'] and any('worker 1' in line for line in w0['printed']), w0['printed']
    (server,) = roles['server']                         # it hosts the controller
    # told by the controller it hosts, or by the survivor's abort notice, whichever is first
    assert any('mxnet-ssp: server' in line and 'the job failed: worker 1 disconnected' in line
               for line in server['printed']), server['printed']
    # the server ends once the survivor hung up, not after a grace
    assert server['exit_s'] < w0['exit_s'] + 5, result


@pytest.mark.slow
def test_worker_sigkill_under_stock_launch_two_servers(tmp_path):
    result = _trial(tmp_path, 'worker-kill', store='dist_ssp', servers=2)
    roles = _check_whole_job_ended(result, servers=2)
    (w0,) = roles['worker']
    assert w0['names_dead'], w0['printed']
    # the server hosting the controller names the dead rank; the other follows the scheduler
    texts = ['\n'.join(s['printed']) for s in roles['server']]
    assert sum('the job failed: worker 1 disconnected' in t for t in texts) == 1, texts
    assert sum('the scheduler at 127.0.0.1:' in t for t in texts) == 1, texts


@pytest.mark.slow
def test_worker_sigkill_under_stock_launch_async_store(tmp_path):
    """dist_async has no controller: nothing tells the survivor, which would train on; every
    process ends through the scheduler (it sees the dead worker's connection close), the
    server and the survivor when the scheduler's closes.  No process can name the rank."""
    result = _trial(tmp_path, 'worker-kill', store='dist_async')
    roles = _check_whole_job_ended(result)
    for row in roles['worker'] + roles['server']:
        assert any('the scheduler at 127.0.0.1:' in line and 'closed its connection' in line
                   for line in row['printed']), row


@pytest.mark.slow
def test_worker_sigstop_under_stock_launch_ends_all_but_the_stopped_one_in_bound(tmp_path):
    """The stopped worker itself cannot be ended from inside (all its threads are stopped);
    everything else ends after the controller's timeout."""
    result = _trial(tmp_path, 'worker-stop')
    roles = _check_whole_job_ended(result)
    (w0,) = roles['worker']
    assert w0['exit_s'] >= SSP_TIMEOUT - 1 and w0['names_dead'], w0
