"""Batch balancing in real MXNet jobs (tests/support/jobs/balance_job.py): a balanced dist_sync
step is the step of one process on the same samples, and the split follows the speeds."""
import json
import os
import sys

import numpy as np
import pytest

from conftest import JOBS, fail_msg, read_jsonl, run_job

pytestmark = pytest.mark.integration

TOTAL = 128


def balance_job(tmp_path, store='dist_sync', steps=5, **flags):
    out = tmp_path / 'out'
    cmd = [sys.executable, os.path.join(JOBS, 'balance_job.py'), '--kvstore', store,
           '--total', str(TOTAL), '--steps', str(steps), '--out', str(out)]
    for name, value in flags.items():
        cmd += ['--' + name, str(value)]
    proc = run_job(tmp_path, cmd, workers=2)
    assert proc.returncode == 0, fail_msg(proc)
    ranks = [json.load(open(out / ('rank-%d.json' % r))) for r in (0, 1)]
    return out, ranks


def reference(out, steps):
    """One process, no store, the same global batches from the job's init.npz."""
    sys.path.insert(0, JOBS)
    try:
        import balance_job
    finally:
        sys.path.remove(JOBS)
    return balance_job.reference(str(out), TOTAL, steps, 2)


def assert_same_weights(rank, ref, init):
    for name in ref:
        got = np.array(rank['weights'][name], dtype=np.float32)
        assert np.abs(ref[name] - init[name]).max() > 1e-2          # training moved it
        np.testing.assert_allclose(got, ref[name], rtol=1e-5, atol=2e-6,
                                   err_msg='worker %d, parameter %s' % (rank['rank'], name))


@pytest.mark.slow   # the Module.fit job below checks the same equality, with a changing split
def test_fixed_uneven_batches_give_the_step_of_one_big_batch(tmp_path):
    out, ranks = balance_job(tmp_path, steps=5, initial='96,32', period=1000)
    assert [e['size'] for e in ranks[0]['log']] == [96] * 5
    assert [e['size'] for e in ranks[1]['log']] == [32] * 5
    ref = reference(out, 5)
    init = np.load(out / 'init.npz')
    for rank in ranks:
        assert_same_weights(rank, ref, init)


@pytest.mark.slow
def test_dist_sync_split_follows_speed_and_every_worker_switches_together(tmp_path):
    # worker 1 costs 4x per sample: 1/(1+4) of 128 is ~26 (real compute shifts it a little);
    # the first round runs the opposite split, 32 and 96
    out, ranks = balance_job(tmp_path, steps=12, period=3, cost='0:0.0002,1:0.0008',
                             initial='32,96')
    logs = [r['log'] for r in ranks]
    assert all(r['lockstep'] for r in ranks)
    for a, b in zip(*logs):
        assert a['split'] == b['split'] and sum(a['split']) == TOTAL    # same iteration, same split
        assert a['size'] == a['split'][0] and b['size'] == a['split'][1]
        assert b['offset'] == a['size']
    assert ranks[0]['switches'] == ranks[1]['switches']
    assert ranks[0]['switches'] and all(it % 3 == 0 for it, _ in ranks[0]['switches'])
    # no back and forth: worker 1's share only shrinks (a per-iteration fixed cost makes
    # the rate of a small batch look high, so the split may approach in more than one round)
    shares = [split[1] for _, split in ranks[0]['switches']]
    assert shares == sorted(set(shares), reverse=True), ranks[0]['switches']
    final = logs[0][-1]['split']
    assert 18 <= final[1] <= 36, ranks[0]['switches']
    decisions = read_jsonl(out / 'decisions.jsonl')
    assert len(decisions) == 3 and decisions[0]['switched']
    # whatever the split, the job's step is the step of one process on the same samples
    ref = reference(out, 12)
    init = np.load(out / 'init.npz')
    for rank in ranks:
        assert_same_weights(rank, ref, init)


@pytest.mark.parametrize('store', [pytest.param('dist_dssp', marks=pytest.mark.slow),
                                   pytest.param('dist_async', marks=pytest.mark.slow),
                                   pytest.param('dist_ssp', marks=pytest.mark.slow)])
def test_asynchronous_stores_balance_without_waiting_for_each_other(tmp_path, store):
    out, ranks = balance_job(tmp_path, store=store, steps=9, period=3,
                             cost='0:0.0002,1:0.0008')
    assert not any(r['lockstep'] for r in ranks)
    for rank in ranks:
        assert all(e['size'] == e['split'][rank['rank']] for e in rank['log'])
        assert all(it % 3 == 0 for it, _ in rank['switches'])
        assert sum(rank['log'][-1]['split']) == TOTAL
    assert ranks[1]['log'][-1]['size'] <= 40 and ranks[0]['log'][-1]['size'] >= 88


@pytest.mark.slow   # default run time; the e2e --balance job runs a balanced job by default
def test_module_fit_balances_and_takes_the_step_of_one_big_batch(tmp_path):
    """Module.fit on BalancedIter batches, timed by time_module, rescale_grad = 1/step_batch:
    the split follows the speeds at the same iteration on both workers, the executors
    reshape when it changes, and the weights are those of one process on the same samples."""
    out, ranks = balance_job(tmp_path, api='module', steps=9, period=3,
                             cost='0:0.0002,1:0.0008', initial='32,96')
    logs = [r['log'] for r in ranks]
    assert [len(log) for log in logs] == [9, 9]
    for a, b in zip(*logs):
        assert a['split'] == b['split'] and sum(a['split']) == TOTAL
        assert a['size'] == a['split'][0] and b['size'] == a['split'][1]
    assert ranks[0]['switches'] == ranks[1]['switches'] and ranks[0]['switches']
    assert logs[1][0]['size'] == 96 and logs[1][-1]['size'] <= 40     # worker 1 is 4x slower
    ref = reference(out, 9)
    init = np.load(out / 'init.npz')
    for rank in ranks:
        assert_same_weights(rank, ref, init)
