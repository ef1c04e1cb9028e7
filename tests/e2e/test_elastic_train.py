"""mxnet-ssp-train in elastic mode: a worker killed (kill -9, from outside) in the middle of
training; the survivor finishes, evaluates and saves as the leader, the job exits 0, and the
checkpoint it saved after the loss resumes in a new job.

Real processes on loopback, the embedded digits data; compute is emulated (a sleep per
iteration) so the kill lands mid-run.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import fail_msg, job_env, pids_with_env

pytestmark = pytest.mark.integration

TOKEN = 'MXNET_SSP_ELASTIC_TEST'


def _train(save, epochs, extra=()):
    # lr 0.03: at 0.1 (momentum 0.9) this MLP with two SSP workers diverged to chance accuracy
    # in 2 of 3 plain 4-epoch jobs, with buckets and without, resumed or not (a CI run failed
    # this test so: the resumed job has two workers where the first trains mostly with one)
    return [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar', '--kvstore', 'dist_ssp',
            '--model', 'mlp', '--dataset', 'digits', '--num-epochs', str(epochs),
            '--batch-size', '32', '--lr', '0.03', '--save-dir', str(save), '--log-interval', '0',
            '--no-progress', '--emulate', 'workers=2,base_ms=25,factors=1:1,jitter=0%'] + list(extra)


def _worker_pid(token, index):
    """The pid of worker #index (launch index) of the job whose processes carry `token`."""
    pids = pids_with_env({TOKEN: token, 'DMLC_ROLE': 'worker',
                          'MXNET_SSP_LAUNCH_INDEX': str(index)})
    return pids[0] if pids else None


def _iterations(save):
    total = 0
    for path in glob.glob(os.path.join(str(save), 'train-worker*.jsonl')):
        with open(path) as f:
            total += sum(1 for _ in f)
    return total


def test_training_goes_on_after_a_kill_and_the_checkpoint_resumes(tmp_path):
    save = tmp_path / 'run'
    token = uuid.uuid4().hex
    env = job_env(tmp_path, **{TOKEN: token})
    base = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher',
            'local', '--timeout', '300']
    launch = base + ['--elastic', '1']
    proc = subprocess.Popen(launch + _train(save, 4), env=env, cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _iterations(save) < 40 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)     # polling the job's progress with a deadline, not a sync
        victim = _worker_pid(token, 1)
        assert victim is not None and proc.poll() is None, 'the job ended before the kill'
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    done = subprocess.CompletedProcess(launch, proc.returncode, out, err)
    assert proc.returncode == 0, fail_msg(done)
    assert 'worker #1 (launch index; pid %d) was killed by signal SIGKILL' % victim in err, \
        fail_msg(done)
    summary = json.loads((save / 'summary.json').read_text())
    (lost,) = summary['lost_workers']
    assert summary['elastic'] == 1 and lost['clock'] >= 20, summary
    # 10 classes (chance 0.1); 5 runs at lr 0.03 ended at 0.958-0.975 here
    assert summary['final_accuracy'] > 0.8, summary
    assert 'done: final test accuracy %.4f' % summary['final_accuracy'] in err, fail_msg(done)
    assert '; lost worker %d at clock %d' % (lost['rank'], lost['clock']) in err, fail_msg(done)
    assert (save / 'model-final.params').exists()
    # a new job (fail-fast, 2 workers) resumes from the checkpoint saved after the loss
    again = subprocess.run(base + _train(
        save, 5, ['--resume-from', str(save / 'model-final.params')]), env=env,
        cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, fail_msg(again)
    resumed = json.loads((save / 'summary.json').read_text())
    assert resumed['resumed_from'] == str(save / 'model-final.params')
    # the resumed job goes on from the checkpoint (5 runs: 0.928-0.969), not from scratch
    assert resumed['final_accuracy'] > 0.8 and resumed['lost_workers'] == [], resumed
