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



def _job(tmp_path, *flags, workers=1, servers=1):
    cmd = [sys.executable, os.path.join(JOBS, 'lr_resume_job.py'), '--out', str(tmp_path / 'o')]
    proc = run_job(tmp_path, cmd + list(flags), workers=workers, servers=servers)
    assert proc.returncode == 0, fail_msg(proc)


@pytest.mark.parametrize('store', [pytest.param('dist_async', marks=pytest.mark.slow), 'dist_ssp'])
def test_lr_scheduler_and_set_learning_rate_reach_the_servers(tmp_path, store):
    _job(tmp_path, '--mode', 'lr', '--store', store)
    weights = read_jsonl(tmp_path / 'o' / 'lr-0.json')[0]['weights']
    deltas = -np.diff([0.0] + weights)
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    expected = [sched(t) for t in range(1, 7)] + [0.0, 0.0, 0.0]
    np.testing.assert_allclose(deltas, expected, rtol=0, atol=1e-6)


def _resume_runs(tmp_path, store, rule, workers=1, servers=1, keys=1, **flags):
    """full (K + 1 steps), resume (step K + 1 with the saved state), resume --no-load
    (step K + 1 from the same weights without it): {name: {rank: record}}."""
    extra = ['--store', store, '--rule', rule, '--keys', str(keys)]
    for name, value in flags.items():
        extra += ['--' + name.replace('_', '-'), str(value)]
    runs = (('full', ['--mode', 'full']), ('resume', ['--mode', 'resume']),
            ('resume-noload', ['--mode', 'resume', '--no-load']))
    out = {}
    for name, mode in runs:
        _job(tmp_path, *(mode + extra), workers=workers, servers=servers)
        out[name] = {r: read_jsonl(tmp_path / 'o' / ('%s-%d.json' % (name, r)))[0]
                     for r in range(workers)}
    return out


def _check_resume(runs, workers):
    for r in range(workers):
        full, resumed, fresh = (runs[n][r] for n in ('full', 'resume', 'resume-noload'))
        # the same step K + 1 from the same weights: with the saved state it is exact ...
        np.testing.assert_array_equal(resumed['weights'], full['weights'],
                                      err_msg='worker %d: resumed step differs' % r)
        # ... and without it (momentum, MeanSquare, versions, backups) it differs: the
        # control runs the very same single step, so only the state can explain this
        assert len(fresh['steps']) == len(resumed['steps']) == 1
        assert fresh['steps'][0]['step'] == resumed['steps'][0]['step']
        assert not np.allclose(fresh['weights'], full['weights'], rtol=0, atol=1e-4), (
            'worker %d: step K + 1 without the saved state gives the same weights' % r)


@pytest.mark.parametrize('store,rule', [  # all with -m slow (the script's resume job is default)
    pytest.param('dist_async', 'sgd-momentum', marks=pytest.mark.slow),
    pytest.param('dist_ssp', 'dcasgd-a-momentum', marks=pytest.mark.slow),
    pytest.param('dist_softsync', 'sasgd', marks=pytest.mark.slow)])
def test_resume_from_saved_server_state_gives_the_same_next_update(tmp_path, store, rule):
    runs = _resume_runs(tmp_path, store, rule)
    full = runs['full'][0]
    assert full['slot_mode'] == (rule != 'sgd-momentum' or store == 'dist_softsync')
    _check_resume(runs, 1)
    assert any(name.startswith('server-state.server-') for name in os.listdir(tmp_path / 'o'))


@pytest.mark.slow      # 22 s: run with -m slow before a resolve
@pytest.mark.parametrize('rule', ['dcasgd-a-momentum', 'sasgd-average'])
def test_resume_three_workers_two_servers_dist_dssp(tmp_path, rule):
    """Slot state (per-worker backups, versions, MeanSquare, momentum) on 2 servers, under
    dist_dssp, with the workers taking turns so that every job sees the same order."""
    runs = _resume_runs(tmp_path, 'dist_dssp', rule, workers=3, servers=2, keys=2,
                        staleness='1,3')
    assert all(rec['slot_mode'] for rec in runs['full'].values())
    _check_resume(runs, 3)
    saved = sorted(n for n in os.listdir(tmp_path / 'o') if n.startswith('server-state.'))
    assert saved == ['server-state.server-0', 'server-state.server-1'], saved


@pytest.mark.parametrize('name', ['adam', 'sgd'])
def test_restored_update_counts_survive_mxnets_updater(tmp_path, name):
    """In-process: MXNet's Updater re-selects the optimizer's per-device update counts
    before every update; a load must restore what it selects (Adam's bias correction
    and lr schedules use these counts), so after K + 1 updates the counts are K + 1."""
    from mxnet_ssp.server.door import Door
    from mxnet_ssp.server.updater import ServerOptimizer

    def fresh():
        wrapper = ServerOptimizer(mx.optimizer.create(name, learning_rate=0.1))
        return wrapper, mx.optimizer.get_updater(Door(wrapper))    # as a server installs it

    def step(updater, w, t):
        updater(0, mx.nd.sin(3 * w + t), w)

    prefix = str(tmp_path / 'state')
    full, up = fresh()
    w = mx.nd.array(np.linspace(-1, 1, 5))
    for t in range(1, 4):
        step(up, w, t)
    full.control('save', prefix)
    saved_w = w.copy()
    step(up, w, 4)
    resumed, up2 = fresh()
    w2 = saved_w.copy()
    step(up2, w2, 99)                       # the resumed server has seen an update (warm-up)
    resumed.control('load', prefix)
    w2[:] = saved_w
    step(up2, w2, 4)
    assert resumed.optimizer._index_update_count == {0: 4} == full.optimizer._index_update_count
    np.testing.assert_array_equal(w2.asnumpy(), w.asnumpy())


@pytest.mark.parametrize('rule', ['sasgd', 'dcasgd_pw'])
def test_backup_is_given_and_saved_only_to_rules_that_read_it(tmp_path, rule):
    """In-process slot mode: a rule with needs_backup=False gets backup=None and its saved
    state carries no per-worker backups; DC-ASGD gets the sender's slot and saves it."""
    import pickle
    from mxnet_ssp.ps.channel import slot_key
    from mxnet_ssp.server.updater import ServerOptimizer

    opt = mx.optimizer.create(rule, learning_rate=0.1)
    seen = []
    prepare = opt.prepare_grad

    def recording(index, weight, grad, state, backup, **kw):
        seen.append(None if backup is None else backup.asnumpy().copy())
        return prepare(index, weight, grad, state, backup, **kw)

    opt.prepare_grad = recording
    server = ServerOptimizer(opt, num_workers=2, slots=True)
    slots = {m: mx.nd.array([1.0, 2.0]) for m in range(2)}
    held = []                               # what worker 0's slot holds before each push
    for m in (0, 1, 0):
        held.append(slots[0].asnumpy().copy())
        server.update_key(slot_key(0, m, 2, 1), slots[m], mx.nd.array([0.5, -0.5]))
    prefix = str(tmp_path / 'state')
    server.control('save', prefix)
    with open(server._path(prefix), 'rb') as f:
        backups = pickle.load(f)['backups']
    if opt.needs_backup:
        assert all(b is not None for b in seen) and len(seen) == 3
        np.testing.assert_array_equal(seen[2], held[2])   # what worker 0 last pulled
        assert not np.array_equal(held[2], held[0])       # ... the update of its first push
        assert sorted(backups[0]) == [0, 1]
    else:
        assert seen == [None, None, None]
        assert backups == {}
