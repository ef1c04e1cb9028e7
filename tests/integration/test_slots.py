"""Slot mode on real MXNet jobs: the servers know sender, staleness and backup of each gradient.

The job (tests/support/jobs/slot_job.py) makes the staleness of every gradient
observable from the workers: the sum of key 0's weights is the number of
updates applied when a worker pulled.  The tests check the servers' recorded
staleness against what the workers saw, and (where a rule is given) replay the
servers' recorded order through the NumPy reference.
"""
import json
import math
import os
import sys

import numpy as np
import pytest

from conftest import JOBS, fail_msg, job_env, read_jsonl, run_job

pytestmark = pytest.mark.integration



def _slot_job_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location('slot_job', os.path.join(JOBS, 'slot_job.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay_through_reference(steps, server_events, rule, splits, iters, parts=None, dead=()):
    """Replay the servers' recorded order, with the gradients the workers recorded, through
    the single-process NumPy reference: every weight each worker pulled must match.

    `parts` ({key: slice}): replay only these slices of the keys (what one server holds
    of a big array that MXNet splits over the servers).  `dead`: workers killed between two
    steps (elastic mode): they pushed the steps they recorded, no more."""
    import oracle_optim as reference
    workers = len(steps)
    opt = _slot_job_module().make_optimizer(rule)
    if rule.startswith('sgd'):
        ref_rule = reference.SASGDRule(opt.lr, momentum=opt.momentum, staleness_lr='none',
                                       rescale_grad=opt.rescale_grad)
    else:
        ref_rule = reference.rule_from_optimizer(opt)
    c = max(1, workers // splits) if splits else 1
    ref = reference.Reference(ref_rule, workers, softsync_c=c)
    parts = parts or {0: slice(None), 1: slice(None)}
    ref.init(0, np.zeros(workers * iters, dtype=np.float32)[parts[0]])
    ref.init(1, np.full(6, 0.5, dtype=np.float32)[parts[1]])
    events = sorted((e for log in server_events for e in log), key=lambda e: e['seq'])
    taken = {(m, k): 0 for m in range(workers) for k in (0, 1)}
    pulled = {(m, k): None for m in range(workers) for k in (0, 1)}
    name = {0: 'w0', 1: 'w1'}

    def check(m, k, step_index):
        rec = steps[m][step_index]
        np.testing.assert_allclose(np.asarray(rec[name[k]])[parts[k]], pulled[(m, k)],
                                   rtol=1e-5, atol=1e-6,
                                   err_msg='worker %d key %d step %d' % (m, k, rec['step']))

    for e in events:
        m, k = e['sender'], e['key']
        if e['event'] == 'gradient':
            t = taken[(m, k)]                         # steps of m already pushed for k
            if t:
                check(m, k, t - 1)                    # what m pulled after its previous push
            if k == 0:
                grad = np.zeros(workers * iters, dtype=np.float32)
                grad[m * iters + t] = -1.0
            else:
                grad = np.asarray(steps[m][t]['g1'], dtype=np.float32)
            tau = ref.push(m, k, grad[parts[k]])
            assert tau == e['tau'], (m, k, t, tau, e)
            taken[(m, k)] = t + 1
        pulled[(m, k)] = ref.pull(m, k)               # the slot: what m pulls next
    for (m, k), t in taken.items():
        assert t == (len(steps[m]) if m in dead else iters), (m, k, t)
        if t:
            check(m, k, t - 1)


def run_slot_job(tmp_path, workers=3, servers=1, iters=8, env=None, launcher_args=(),
                 **flags):
    out = tmp_path / 'o'
    cmd = [sys.executable, os.path.join(JOBS, 'slot_job.py'), '--out', str(out),
           '--iters', str(iters)]
    for name, value in flags.items():
        cmd += ['--' + name.replace('_', '-')] + ([] if value is True else [str(value)])
    proc = run_job(tmp_path, cmd, workers=workers, servers=servers, env=env,
                   launcher_args=launcher_args)
    assert proc.returncode == 0, fail_msg(proc)
    steps = {r: read_jsonl(out / ('slot-%d.jsonl' % r)) for r in range(workers)}
    mdir = tmp_path / 'metrics'
    events = []
    for name in sorted(os.listdir(mdir)):
        if name.startswith('server-') and name.endswith('-staleness.jsonl'):
            events.append(read_jsonl(mdir / name))
    summaries = [json.load(open(mdir / n)) for n in sorted(os.listdir(mdir))
                 if n.startswith('server-') and n.endswith('-staleness.json')]
    return steps, events, summaries


def check_staleness_against_workers(steps, server_events, key=0):
    """Replay the server's order of key `key`: tau must be (updates applied before the
    gradient) - (updates the sender had seen when it computed it)."""
    events = [e for log in server_events for e in log if e['key'] == key]
    assert events, 'no server logged key %d' % key
    events.sort(key=lambda e: e['seq'])
    applied = 0
    next_step = {r: 0 for r in steps}
    last_seen = {r: 0 for r in steps}
    for e in events:
        m = e['sender']
        if e['event'] == 'refresh':
            last_seen[m] = applied
            continue
        rec = steps[m][next_step[m]]
        next_step[m] += 1
        used = int(round(rec['version_used']))
        assert used == last_seen[m], (
            'worker %d step %d computed on version %d but its slot held %d'
            % (m, rec['step'], used, last_seen[m]))
        expected_tau = applied - used
        assert e['tau'] == expected_tau, (
            'gradient of worker %d step %d: server said tau=%d, replay gives %d'
            % (m, rec['step'], e['tau'], expected_tau))
        applied += 1 if e['applied'] else 0
        assert e['version'] == applied
        last_seen[m] = applied            # the sender's slot now holds this version
    for r, recs in steps.items():
        assert next_step[r] == len(recs), 'worker %d: %d steps, server saw %d' % (
            r, len(recs), next_step[r])
        final = int(round(sum(recs[-1]['w0'])))
        assert final == last_seen[r], 'worker %d last pulled version %d, its slot held %d' % (
            r, final, last_seen[r])
    return applied


@pytest.mark.parametrize('splits,c', [pytest.param(1, 3, marks=pytest.mark.slow),
                                      pytest.param(3, 1, marks=pytest.mark.slow)])
def test_softsync_plain_sgd_staleness(tmp_path, splits, c):
    iters = 8
    steps, events, summaries = run_slot_job(tmp_path, workers=3, iters=iters,
                                            store='dist_softsync', splits=splits, rule='sgd')
    assert all(rec['slot_mode'] for recs in steps.values() for rec in recs)
    applied = check_staleness_against_workers(steps, events)
    assert applied == (3 * iters) // c
    (summary,) = summaries
    assert summary['softsync_c'] == c and summary['gradients'] == 2 * 3 * iters
    # each applied update adds exactly 1 to key 0's weights (c markers of 1/c each)
    for recs in steps.values():
        for rec in recs:
            assert abs(sum(rec['w0']) - round(sum(rec['w0']))) < 1e-4


@pytest.mark.parametrize('store,rule,extra', [   # one in the default run, all four when slow
    pytest.param('dist_async', 'sasgd', {}, marks=pytest.mark.slow),
    ('dist_ssp', 'dcasgd', {'staleness': 0, 'slow_rank': 1, 'slow_seconds': 0.03}),
    pytest.param('dist_dssp', 'dcasgd-a-momentum', {'staleness': '1,3', 'slow_rank': 0,
                                                     'slow_seconds': 0.03},
                 marks=pytest.mark.slow),
    pytest.param('dist_softsync', 'sasgd-average', {'splits': 2}, marks=pytest.mark.slow),
])
def test_worker_aware_rules_report_staleness_under_every_store(tmp_path, store, rule, extra):
    steps, events, summaries = run_slot_job(tmp_path, workers=3, iters=8, store=store,
                                            rule=rule, **extra)
    assert all(rec['slot_mode'] for recs in steps.values() for rec in recs)
    # the reference recomputes every tau and every weight each worker pulled
    replay_through_reference(steps, events, rule, extra.get('splits'), iters=8)
    if store == 'dist_ssp':
        # SSP(0) holds workers; their deferred pulls go through a refresh of their slot
        assert any(e['event'] == 'refresh' for log in events for e in log)


@pytest.mark.parametrize('store,extra', [
    pytest.param('dist_async', {'slow_rank': 2, 'slow_seconds': 0.03},   # ASP: apply_one
                 marks=pytest.mark.slow),
    pytest.param('dist_softsync', {'splits': 1}, marks=pytest.mark.slow),   # prepare_grad
])
def test_dcasgd_multiverso_reading_reaches_the_servers(tmp_path, store, extra):
    """DCASGD(adaptive_reading='multiverso') goes to the servers through set_optimizer like
    its other arguments: the servers keep MeanSquare per sender (the paper's reading would
    not replay)."""
    steps, events, _ = run_slot_job(tmp_path, workers=3, iters=8, store=store,
                                    rule='dcasgd-a-multiverso', **extra)
    assert all(rec['slot_mode'] for recs in steps.values() for rec in recs)
    replay_through_reference(steps, events, 'dcasgd-a-multiverso', extra.get('splits'),
                             iters=8)
    with pytest.raises(AssertionError):
        replay_through_reference(steps, events, 'dcasgd-a-momentum', extra.get('splits'),
                                 iters=8)


def _round_robin_taus(workers, iters, c):
    """Staleness of every gradient when the workers push in turns 0, 1, ..., M-1 and each
    pulls right after its push, with one update per c gradients: gradient number
    i = (t - 1) * M + m (0-based) is computed on the version pulled after gradient
    i - M, i.e. floor((i - M + 1) / c) updates (0 for the first round)."""
    taus = []
    for i in range(workers * iters):
        used = (i - workers + 1) // c if i >= workers else 0
        taus.append(i // c - used)
    return taus


@pytest.mark.slow    # ~13 s; the default run keeps test_softsync_plain_sgd_staleness
def test_softsync_staleness_distribution_matches_rudra(tmp_path):
    """Rudra: under n-softsync the average staleness is about n and rarely above 2n, for
    homogeneous learners.  The workers take turns (a barrier between turns), the
    homogeneous order made deterministic, so the distribution is exact whatever the load;
    n = 1 (one update per 4 gradients) and n = 4 (ASP), 4 workers."""
    means = {}
    workers, iters = 4, 12
    for n in (1, 4):
        run_dir = tmp_path / ('n%d' % n)
        run_dir.mkdir()
        steps, events, (summary,) = run_slot_job(run_dir, workers=workers, iters=iters,
                                                 store='dist_softsync', splits=n, rule='sgd',
                                                 turns=True)
        c = workers // n
        assert summary['softsync_c'] == c
        check_staleness_against_workers(steps, events)
        # key 0's gradients in the servers' order: the round robin, with its staleness
        grads = sorted((e for log in events for e in log
                        if e['key'] == 0 and e['event'] == 'gradient'), key=lambda e: e['seq'])
        assert [e['sender'] for e in grads] == list(range(workers)) * iters
        assert [e['tau'] for e in grads] == _round_robin_taus(workers, iters, c)
        hist = {int(t): k for t, k in summary['histogram'].items()}
        total = sum(hist.values())
        assert total == 2 * workers * iters            # both keys
        means[n] = summary['mean_tau']
        above = sum(k for t, k in hist.items() if t > 2 * n) / float(total)
        assert means[n] <= 1.25 * n, (n, summary)
        assert above <= 0.1, 'n=%d: %.1f%% of gradients staler than 2n: %r' % (
            n, 100 * above, hist)
    assert means[4] > 2 * means[1], means


@pytest.mark.parametrize('case,words', [   # one in the default run, all three when slow
    ('native-store', ['StalenessAwareSGD needs a store that reports', 'dist_softsync']),
    pytest.param('main-class', ['ScriptOptimizer', '__main__', 'cannot import'],
                 marks=pytest.mark.slow),
    pytest.param('splits', ['splits=5', '1 <= n <= 2'], marks=pytest.mark.slow),
])
def test_bad_optimizer_setups_fail_before_training(tmp_path, case, words):
    proc = run_job(tmp_path, [sys.executable, os.path.join(JOBS, 'bad_optimizer_job.py'),
                              '--case', case], workers=2)
    assert proc.returncode != 0
    assert 'no error was raised' not in proc.stderr
    for word in words:
        assert word in proc.stderr, fail_msg(proc)


@pytest.mark.slow
def test_worker_aware_rule_with_two_servers_keeps_one_model(tmp_path):
    """3 workers, 2 servers: every weight a worker pulls must be the single model's."""
    steps, events, _ = run_slot_job(tmp_path, workers=3, servers=2, iters=4,
                                    store='dist_async', rule='sasgd')
    replay_through_reference(steps, events, 'sasgd', None, iters=4)


def _mxnet_parts(size, servers):
    """The slice of a big array each server holds (KVStoreDist::EncodeDefaultKey in MXNet
    1.9.1: round(size / S * (i + 1)) - round(size / S * i) elements to server i)."""
    edges = [int(math.floor(size / float(servers) * i + 0.5)) for i in range(servers + 1)]
    return [slice(edges[i], edges[i + 1]) for i in range(servers)]


@pytest.mark.slow
def test_worker_aware_rule_with_big_arrays_split_over_two_servers(tmp_path):
    """Arrays above MXNET_KVSTORE_BIGARRAY_BOUND are split over every server by ranges: each
    server holds the same slice of every slot of a key, and replays as one model of it."""
    workers, servers, iters = 3, 2, 4
    env = job_env(tmp_path, MXNET_KVSTORE_BIGARRAY_BOUND='4', MXNET_SSP_STALENESS_LOG='1')
    steps, events, _ = run_slot_job(tmp_path, workers=workers, servers=servers, iters=iters,
                                    env=env, store='dist_async', rule='sasgd')
    assert len(events) == servers
    parts = {0: _mxnet_parts(workers * iters, servers), 1: _mxnet_parts(6, servers)}
    for s, log in enumerate(events):        # run_slot_job reads server-0 before server-1
        # both keys are split: every server got every worker's gradient of each key
        for k in (0, 1):
            grads = [e for e in log if e['key'] == k and e['event'] == 'gradient']
            assert sorted(e['sender'] for e in grads) == sorted(list(range(workers)) * iters)
        replay_through_reference(steps, [log], 'sasgd', None, iters=iters,
                                 parts={k: parts[k][s] for k in (0, 1)})


def _events_by_key(server_events):
    """{key: [(server log index, event), ...]} of the servers' staleness logs."""
    by_key = {}
    for s, log in enumerate(server_events):
        for e in log:
            by_key.setdefault(e['key'], []).append((s, e))
    return by_key


@pytest.mark.parametrize('store', [pytest.param('dist_async', marks=pytest.mark.slow),
                                   'dist_ssp'])
def test_module_fit_string_keys_two_servers_train_one_model(tmp_path, store):
    """Module.fit (string keys), a worker-aware rule, 2 workers and 2 servers: every
    parameter has one canonical weight, on one server, updated by both workers'
    gradients; the parameters are spread over both servers; both workers end with
    the same weights.  (Under dist_ssp both workers also find one controller.)"""
    workers, servers = 2, 2
    out = tmp_path / 'o'
    env = job_env(tmp_path, MXNET_SSP_STALENESS_LOG='1')
    proc = run_job(tmp_path, [sys.executable, os.path.join(JOBS, 'module_slot_job.py'),
                              '--store', store, '--out', str(out)],
                   workers=workers, servers=servers, env=env)
    assert proc.returncode == 0, fail_msg(proc)
    finals = [json.load(open(out / ('final-%d.json' % r))) for r in range(workers)]
    assert all(f['slot_mode'] and f['type'] == store for f in finals)
    names = sorted(finals[0]['weights'])
    assert names == ['fc1_bias', 'fc1_weight', 'fc2_bias', 'fc2_weight']
    for name in names:
        np.testing.assert_array_equal(finals[1]['weights'][name], finals[0]['weights'][name],
                                      err_msg='the workers read different %s' % name)
    mdir = tmp_path / 'metrics'
    logs = sorted(n for n in os.listdir(mdir) if n.startswith('server-')
                  and n.endswith('-staleness.jsonl'))
    assert len(logs) == servers, logs
    by_key = _events_by_key([read_jsonl(mdir / n) for n in logs])
    assert sorted(by_key) == list(range(len(names))), sorted(by_key)
    steps = finals[0]['steps']
    holders = {}
    for k, events in by_key.items():
        holders[k] = {s for s, _ in events}
        assert len(holders[k]) == 1, 'parameter %d has a canonical weight on servers %s' % (
            k, sorted(holders[k]))
        grads = sorted((e for _, e in events if e['event'] == 'gradient'),
                       key=lambda e: e['seq'])
        senders = [e['sender'] for e in grads]
        assert sorted(senders) == sorted(list(range(workers)) * steps), (k, senders)
        # one model: each gradient, whoever sent it, is one more update of the same weight
        assert [e['version'] for e in grads] == list(range(1, workers * steps + 1)), k
        assert all(e['applied'] for e in grads)
    assert set.union(*holders.values()) == set(range(servers)), holders


@pytest.mark.parametrize('store,rule,extra', [
    ('dist_async', 'dcasgd-a-momentum', {}),
    pytest.param('dist_softsync', 'sasgd-average', {'splits': 1},
                 marks=pytest.mark.slow),     # default run: the marker job's softsync case
])
def test_elastic_loss_replays_through_the_reference(tmp_path, store, rule, extra):
    """Elastic mode (at least 2 of 3 workers), worker 1 killed (kill -9) before its step 4:
    the servers' recorded order, replayed through the NumPy reference with the gradients the
    workers recorded, gives every weight each survivor pulled (every survivor push applied
    exactly once, the dead worker's 3 steps too; per-worker backups and softsync rounds of
    c = 3 gradients go on with the survivors)."""
    iters = 8
    steps, events, _ = run_slot_job(tmp_path, workers=3, iters=iters, store=store, rule=rule,
                                    die_rank=1, die_at=4, launcher_args=['--elastic', '2'],
                                    **extra)
    assert [len(steps[r]) for r in range(3)] == [iters, 3, iters]
    replay_through_reference(steps, events, rule, extra.get('splits'), iters=iters, dead=(1,))


@pytest.mark.parametrize('bucket_bytes', [None, '0'], ids=['buckets', 'own-keys'])
def test_the_end_reads_the_servers_latest_weights_after_a_late_push(tmp_path, bucket_bytes):
    """gluon.Trainer in slot mode: worker 1 pushes once more after worker 0's last pull; at the
    end both read the servers' weights as the training script does (refresh, then pull) and
    read the same ones, which hold worker 1's late push.  With buckets (the default) the
    refresh must reach the bucket the arrays travel in: refreshing an array's own key left
    worker 0 reading its last pull, and the lab's final models in slot arms stale."""
    out = tmp_path / 'o'
    extra = {} if bucket_bytes is None else {'MXNET_SSP_BUCKET_BYTES': bucket_bytes}
    proc = run_job(tmp_path, [sys.executable, os.path.join(JOBS, 'late_push_job.py'),
                              '--out', str(out)], env=job_env(tmp_path, **extra))
    assert proc.returncode == 0, fail_msg(proc)
    finals = [json.load(open(out / ('final-%d.json' % r))) for r in range(2)]
    assert all(f['slot_mode'] for f in finals), finals
    assert [f['buckets'] > 0 for f in finals] == [bucket_bytes is None] * 2, finals
    indexes = sorted(finals[0]['servers'])
    assert len(indexes) == 4
    for i in indexes:
        np.testing.assert_array_equal(finals[0]['servers'][i], finals[1]['servers'][i],
                                      err_msg='the workers read different weights of %s' % i)
        # worker 1 held the latest weights after its late step; worker 0 did not
        np.testing.assert_array_equal(finals[1]['servers'][i], finals[1]['own'][i])
    assert any(finals[0]['own'][i] != finals[0]['servers'][i] for i in indexes)
