"""mxnet-ssp-train under ``mxnet-ssp-launch --job-restarts``: the server of a 2-worker job is
killed (kill -9, from outside) mid-training; the launcher starts the whole job again, the
workers resume from the latest complete checkpoint by themselves, and the job finishes the
asked number of epochs (issue 58).

Real scheduler/server/worker processes on loopback, the embedded digits data; compute is
emulated (a sleep per iteration) so the kill lands mid-run.  The kill waits (polling with a
deadline, never sleeping as a synchronization) for the first checkpoint's manifest and a few
iterations past it.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import fail_msg, job_env, pids_with_env, read_jsonl

pytestmark = pytest.mark.integration

TOKEN = 'JOB_RESTART_TEST_TOKEN'
EPOCHS = 4
ITERS_PER_EPOCH = 22          # 1437 digits / 2 workers // 32


def _train(save, kvstore, epochs=EPOCHS, seed=42):
    return [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar', '--kvstore', kvstore,
            '--model', 'mlp', '--dataset', 'digits', '--num-epochs', str(epochs),
            '--batch-size', '32', '--lr', '0.03', '--save-dir', str(save), '--log-interval', '0',
            '--save-period', '1', '--seed', str(seed), '--no-progress',
            '--emulate', 'workers=2,base_ms=40,factors=1:1,jitter=0%']


def _launch(restarts):
    return [sys.executable, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher',
            'local', '--timeout', '400', '--job-restarts', str(restarts)]


def _pid_of(token, role):
    pids = pids_with_env({TOKEN: token, 'DMLC_ROLE': role})
    return pids[0] if pids else None


def _iterations(save, rank=0):
    path = os.path.join(str(save), 'train-worker%d.jsonl' % rank)
    try:
        with open(path) as f:
            return [json.loads(line)['iteration'] for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def run_killing_the_server(tmp_path, kvstore, restarts=1, seed=42):
    """Run the job, kill its server once the first checkpoint exists and 6 more iterations
    ran; return (CompletedProcess, the iteration worker 0 had reached at the kill)."""
    save = tmp_path / 'run'
    token = uuid.uuid4().hex
    env = job_env(tmp_path, **{TOKEN: token})
    cmd = _launch(restarts) + _train(save, kvstore, seed=seed)
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 200
        manifest = save / 'model-epoch001.manifest.json'
        while proc.poll() is None and time.monotonic() < deadline and not (
                manifest.exists() and len(_iterations(save)) >= ITERS_PER_EPOCH + 6):
            time.sleep(0.05)     # polling the job's progress with a deadline, not a sync
        victim = _pid_of(token, 'server')
        assert victim is not None and proc.poll() is None, 'the job ended before the kill'
        reached = len(_iterations(save))
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), victim, reached


def lost_work(save, rank=0):
    """From worker `rank`'s log: (iterations run before the restart, the iteration it resumed
    after, the last iteration).  The log is appended to by the restarted job, whose
    iterations go on from the checkpoint's."""
    its = _iterations(save, rank)
    drops = [i for i in range(1, len(its)) if its[i] <= its[i - 1]]
    assert len(drops) == 1, its
    before, resumed = its[drops[0] - 1], its[drops[0]] - 1
    return before, resumed, its[-1]


@pytest.mark.parametrize('kvstore', ['dist_ssp', 'dist_sync'])
def test_a_killed_server_restarts_the_job_which_resumes_from_its_checkpoint(tmp_path, kvstore):
    done, victim, reached = run_killing_the_server(tmp_path, kvstore)
    err = done.stderr
    assert done.returncode == 0, fail_msg(done)
    assert re.search(r'restart 1 of 1: server #0 \(launch index; pid %d\) was killed by signal '
                     r'SIGKILL — starting the whole job again \(MXNET_SSP_RESTART=1\)' % victim,
                     err), fail_msg(done)
    save = tmp_path / 'run'
    match = re.search(r'restart 1: resuming from (\S+)model-epoch(\d+)\.params \(after epoch '
                      r'(\d+), iteration (\d+)\)', err)
    assert match, fail_msg(done)
    epoch = int(match.group(2))
    assert epoch >= 1 and int(match.group(3)) == epoch, match.group(0)
    before, resumed, last = lost_work(save)
    assert resumed == int(match.group(4)) == epoch * ITERS_PER_EPOCH, (before, resumed)
    # the work lost is at most one checkpoint interval (one epoch here)
    assert 0 <= before - resumed <= ITERS_PER_EPOCH, (before, resumed)
    assert before >= reached - 1, (before, reached)
    # the job ran the asked number of epochs in all
    assert last == EPOCHS * ITERS_PER_EPOCH, last
    summary = json.loads((save / 'summary.json').read_text())
    assert summary['resumed_from'] == str(save / ('model-epoch%03d.params' % epoch)), summary
    assert summary['final_accuracy'] > 0.8, summary
    if kvstore == 'dist_ssp':   # the servers' optimizer state came back from their own file
        assert 'restored optimizer state from %s' % (
            save / ('model-epoch%03d.states' % epoch)) in err, fail_msg(done)


def test_without_job_restarts_a_killed_server_ends_the_job_as_before(tmp_path):
    done, victim, _ = run_killing_the_server(tmp_path, 'dist_ssp', restarts=0)
    assert done.returncode == 1, fail_msg(done)
    assert re.search(r'server #0 \(launch index; pid %d\) was killed by signal SIGKILL — '
                     r'stopping the job' % victim, done.stderr), fail_msg(done)
    assert not re.search(r'restart \d|resuming from|MXNET_SSP_RESTART', done.stderr), \
        fail_msg(done)


def test_a_torn_latest_checkpoint_is_skipped_and_the_previous_one_resumed(tmp_path):
    """A kill during a checkpoint's write leaves it without its manifest, or (a disk that lost
    data) a manifest whose files differ: a restarted run resumes from the one before."""
    save = tmp_path / 'run'
    env = job_env(tmp_path)
    base = [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar', '--kvstore', 'local',
            '--model', 'mlp', '--dataset', 'digits', '--batch-size', '32', '--lr', '0.03',
            '--save-dir', str(save), '--log-interval', '0', '--save-period', '1',
            '--no-progress']
    first = subprocess.run(base + ['--num-epochs', '3'], env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, fail_msg(first)
    (save / 'model-epoch003.manifest.json').unlink()        # killed before the manifest
    with open(save / 'model-final.params', 'r+b') as f:     # torn after it
        f.truncate(100)
    again = subprocess.run(base + ['--num-epochs', '4'], env=dict(env, MXNET_SSP_RESTART='1'),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, fail_msg(again)
    assert ('skipping a torn checkpoint: %s lists %s, which differs from what was written'
            % (save / 'model-final.manifest.json', save / 'model-final.params')) in again.stderr
    assert 'restart 1: resuming from %s (after epoch 2, iteration 88)' % (
        save / 'model-epoch002.params') in again.stderr, fail_msg(again)
    evals = [r for r in read_jsonl(save / 'eval.jsonl') if not r['final']]
    # epochs 1-3, then 3-4 again from epoch 2's checkpoint: the same epoch 3 (same data
    # order, weights and optimizer state)
    assert [r['epoch'] for r in evals] == [1, 2, 3, 3, 4], evals
    assert evals[2]['accuracy'] == evals[3]['accuracy'], evals


def test_a_restart_never_resumes_from_an_earlier_runs_checkpoint(tmp_path):
    save = tmp_path / 'run'
    env = job_env(tmp_path)
    base = [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar', '--kvstore', 'local',
            '--model', 'mlp', '--dataset', 'digits', '--batch-size', '32', '--lr', '0.03',
            '--save-dir', str(save), '--log-interval', '0', '--save-period', '1',
            '--no-progress', '--num-epochs', '1']
    assert subprocess.run(base, env=env, capture_output=True, timeout=120).returncode == 0
    (save / 'run.json').write_text(json.dumps({'run_id': 'a-later-run'}))
    again = subprocess.run(base, env=dict(env, MXNET_SSP_RESTART='1'), capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, fail_msg(again)
    assert "run_id '" in again.stderr and "this run has 'a-later-run'" in again.stderr
    assert 'no complete checkpoint of this run in %s; starting from the beginning' % save \
        in again.stderr, fail_msg(again)


@pytest.mark.slow
@pytest.mark.parametrize('kvstore', ['dist_ssp', 'dist_sync'])
def test_a_restarted_runs_accuracy_is_within_the_spread_of_uninterrupted_runs(tmp_path, kvstore):
    """3 uninterrupted runs (seeds 1-3) and one of seed 2 whose server is killed once: the
    restarted run's final accuracy lies within the uninterrupted runs' range, widened by its
    own width on each side (a 4-run sample; about 70 s here)."""
    accuracies = []
    for seed in (1, 2, 3):
        save = tmp_path / ('plain-%d' % seed)
        done = subprocess.run(_launch(0) + _train(save, kvstore, seed=seed),
                              env=job_env(tmp_path), cwd=str(tmp_path), capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, fail_msg(done)
        accuracies.append(json.loads((save / 'summary.json').read_text())['final_accuracy'])
    (tmp_path / 'killed').mkdir()
    done, _, _ = run_killing_the_server(tmp_path / 'killed', kvstore, seed=2)
    assert done.returncode == 0, fail_msg(done)
    restarted = json.loads((tmp_path / 'killed' / 'run' / 'summary.json').read_text())
    low, high = min(accuracies), max(accuracies)
    width = high - low
    print('%s: uninterrupted %s, restarted %.4f' % (kvstore, accuracies,
                                                    restarted['final_accuracy']))
    assert low - width <= restarted['final_accuracy'] <= high + width, (
        restarted['final_accuracy'], accuracies)


def _gluon_example(tmp_path, epochs, restart=None):
    env = job_env(tmp_path)
    if restart is not None:           # as --job-restarts sets it in a restarted job
        env['MXNET_SSP_RESTART'] = str(restart)
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), 'train_scripts', 'restartable_gluon.py')
    done = subprocess.run(_launch(0)[:-2] + [sys.executable, script, '--dir',
                                             str(tmp_path / 'ckpt'), '--epochs', str(epochs)],
                          env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=200)
    assert done.returncode == 0, fail_msg(done)
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith('{')]
    return done, {(r['rank'], r['epoch']): r for r in lines}


def test_the_docs_gluon_example_resumes_weights_and_server_optimizer_state(tmp_path):
    """train_scripts/restartable_gluon.py (docs/faults.md) on dist_ssp: 2 epochs, then a
    restarted job resumes after epoch 1 from save_gluon's checkpoint (the weights, and the
    servers' optimizer state, which the server loads) and trains on from there."""
    first, before = _gluon_example(tmp_path, 2)
    assert sorted(before) == [(0, 0), (0, 1), (1, 0), (1, 1)], first.stdout
    manifest = json.loads((tmp_path / 'ckpt' / 'ckpt-epoch001.manifest.json').read_text())
    assert sorted(manifest['external']) == ['states.server-0'], manifest
    assert manifest['external']['states.server-0']['size'] > 0, manifest
    again, after = _gluon_example(tmp_path, 4, restart=1)
    assert sorted(after) == [(0, 2), (0, 3), (1, 2), (1, 3)], again.stdout
    assert all(r['resumed_after'] == 1 and r['restart'] == 1 for r in after.values()), after
    assert 'load %s' % (tmp_path / 'ckpt' / 'ckpt-epoch001.states') in again.stderr, \
        fail_msg(again)
    for rank in (0, 1):
        assert before[(rank, 1)]['loss'] < before[(rank, 0)]['loss']      # the first job trained
        # it goes on from the checkpoint, not from the start: a fresh model's first epoch is at
        # epoch 0's level (1.23-1.27 here), a resumed one's well below it (0.43-0.54). Not
        # below epoch 1's: each epoch draws batches of its own, and by epoch 2 the mean loss
        # of one epoch can sit 0.0002 above the one before (seen in CI: 0.52602 vs 0.52578)
        assert after[(rank, 2)]['loss'] < 0.75 * before[(rank, 0)]['loss'], (after, before)
