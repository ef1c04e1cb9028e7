"""``mxnet-ssp-launch --job-restarts`` across emulated hosts (issue 58): the server's host is
cut off; the job fails within the liveness bound, the launcher probes the hosts, leaves the
cut-off one out for the hostfile's spare, starts the whole job again there, and
mxnet-ssp-train resumes from its latest checkpoint and finishes.

The testbed (tests/testbed/test_testbed_cluster.py ``four_hosts``): host0 is the login host
(the scheduler), the hostfile lists host1..host3.  ``-n 2 -s 1`` places server #0 and worker
#0 on host1 and worker #1 on host2 (round robin per role): host3 is the spare.  The cut is
a partition (host1's link taken down on the bridge's side; no FIN or RST).  Waiting is
polling files with a deadline, never a sleep standing for an event.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import fail_msg, job_env
from test_testbed_cluster import four_hosts
from test_testbed_lost_hosts import cut

PY = sys.executable
pytestmark = [pytest.mark.integration, pytest.mark.ssh]

EPOCHS = 5
ITERS_PER_EPOCH = 22


@pytest.fixture
def testbed():
    yield from four_hosts()


def _iterations(save):
    try:
        with open(os.path.join(str(save), 'train-worker0.jsonl')) as f:
            return sum(1 for line in f if line.endswith('}\n'))
    except OSError:
        return 0


def test_the_server_host_cut_off_the_job_restarts_on_the_spare_host_and_finishes(
        testbed, tmp_path):
    save = tmp_path / 'run'
    env = job_env(tmp_path, MXNET_SSP_TIMEOUT='120', MXNET_SSP_LIVENESS_TIMEOUT='5')
    env.pop('STOCK_LAUNCH_HOST_IP')
    hostfile = os.path.join(testbed['state_dir'], 'hostfile')
    argv = [PY, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher', 'ssh',
            '-H', hostfile, '--env', 'PYTHONPATH', '--timeout', '240', '--job-restarts', '1',
            PY, '-m', 'mxnet_ssp.lab.train_cifar', '--kvstore', 'dist_ssp',
            '--model', 'mlp', '--dataset', 'digits', '--num-epochs', str(EPOCHS),
            '--batch-size', '32', '--lr', '0.03', '--save-dir', str(save), '--log-interval',
            '0', '--save-period', '1', '--no-progress',
            '--emulate', 'workers=2,base_ms=120,factors=1:1,jitter=0%']
    out_path, err_path = tmp_path / 'launcher.out', tmp_path / 'launcher.err'
    with open(out_path, 'w') as out, open(err_path, 'w') as err:
        proc = subprocess.Popen(
            [PY, '-m', 'mxnet_ssp.lab.testbed', '--prefix', testbed['prefix'], 'run', '--'] + argv,
            env=env, cwd=str(tmp_path), start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 150
        manifest = save / 'model-epoch001.manifest.json'
        while proc.poll() is None and time.monotonic() < deadline and not (
                manifest.exists() and _iterations(save) >= ITERS_PER_EPOCH + 4):
            time.sleep(0.05)    # polling the job's files with a deadline, not a sync
        assert proc.poll() is None, 'the job ended before the cut:\n' + err_path.read_text()
        assert manifest.exists(), 'no checkpoint within 150 s:\n' + err_path.read_text()
        cut(testbed, 1)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    done = subprocess.CompletedProcess(argv, proc.returncode, out_path.read_text(),
                                       err_path.read_text())
    assert done.returncode == 0, fail_msg(done)
    assert re.search(r"restart 1 of 1: .*; left out unreachable 198\.18\.0\.2 \([^)]*\); the "
                     r"hostfile's spare 198\.18\.0\.4 takes its place — starting the whole "
                     r"job again \(MXNET_SSP_RESTART=1\)", done.stderr), fail_msg(done)
    assert re.search(r'restart 1: resuming from \S+model-epoch\d+\.params', done.stderr), \
        fail_msg(done)
    summary = json.loads((save / 'summary.json').read_text())
    assert summary['final_accuracy'] > 0.8, summary
    with open(save / 'train-worker0.jsonl') as f:
        last = [json.loads(line) for line in f if line.strip()][-1]
    assert last['iteration'] == EPOCHS * ITERS_PER_EPOCH, last
