"""What stock MXNet gets wrong around server-side optimizers, checked on real jobs:
learning-rate changes reach the servers (#15919) and the servers' optimizer
state can be saved and restored (#15923)."""
import os
import sys

import mxnet as mx
import numpy as np
import pytest

from conftest import JOBS, fail_msg, read_jsonl, run_job

pytestmark = pytest.mark.integration



def _job(tmp_path, *flags, workers=1):
    cmd = [sys.executable, os.path.join(JOBS, 'lr_resume_job.py'), '--out', str(tmp_path / 'o')]
    proc = run_job(tmp_path, cmd + list(flags), workers=workers)
    assert proc.returncode == 0, fail_msg(proc)


@pytest.mark.parametrize('store', ['dist_async', 'dist_ssp'])
def test_lr_scheduler_and_set_learning_rate_reach_the_servers(tmp_path, store):
    _job(tmp_path, '--mode', 'lr', '--store', store)
    weights = read_jsonl(tmp_path / 'o' / 'lr-0.json')[0]['weights']
    deltas = -np.diff([0.0] + weights)
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    expected = [sched(t) for t in range(1, 7)] + [0.0, 0.0, 0.0]
    np.testing.assert_allclose(deltas, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize('store,rule', [('dist_async', 'sgd-momentum'),
                                        ('dist_ssp', 'dcasgd-a-momentum'),
                                        ('dist_softsync', 'sasgd')])
def test_resume_from_saved_server_state_gives_the_same_next_update(tmp_path, store, rule):
    _job(tmp_path, '--mode', 'full', '--store', store, '--rule', rule)
    _job(tmp_path, '--mode', 'resume', '--store', store, '--rule', rule)
    _job(tmp_path, '--mode', 'resume', '--store', store, '--rule', rule, '--no-load')
    full = read_jsonl(tmp_path / 'o' / 'full.json')[0]
    resumed = read_jsonl(tmp_path / 'o' / 'resume.json')[0]
    fresh = read_jsonl(tmp_path / 'o' / 'resume-noload.json')[0]
    assert full['slot_mode'] == (rule != 'sgd-momentum' or store == 'dist_softsync')
    np.testing.assert_array_equal(resumed['weights'], full['weights'])
    # without the saved state (momentum, MeanSquare, versions) the next update differs
    assert not np.allclose(fresh['weights'], full['weights'], atol=1e-6)
    assert any(name.startswith('server-state.server-') for name in os.listdir(tmp_path / 'o'))
