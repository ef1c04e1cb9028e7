"""A plain gluon script of a user's under mxnet-ssp-launch: it writes nothing into the working
directory unless asked, our lines have one format, and a metrics folder used twice holds one
job's records (real MXNet scheduler, server and workers on loopback)."""
import json
import os
import re
import subprocess
import sys

from conftest import ROOT

USER_SCRIPT = '''\
import mxnet as mx
from mxnet import autograd, gluon, nd
net = gluon.nn.Dense(2)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1},
                        kvstore='dist_ssp')
x, y = nd.ones((4, 3)), nd.array([0, 1, 0, 1])
loss = gluon.loss.SoftmaxCrossEntropyLoss()
for _ in range(5):
    with autograd.record():
        out = loss(net(x), y)
    out.backward()
    trainer.step(4)
print('done', trainer._kvstore.rank)
'''


def run_job(cwd, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('DMLC_', 'MXNET_SSP_'))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS='1', **extra)
    return subprocess.run([sys.executable, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1',
                           '--launcher', 'local', '--timeout', '150', sys.executable,
                           'train.py'], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=180)


def test_a_user_script_leaves_the_working_directory_as_it_was(tmp_path):
    (tmp_path / 'train.py').write_text(USER_SCRIPT)
    proc = run_job(tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert sorted(os.listdir(tmp_path)) == ['train.py'], text[-4000:]   # no metrics folder
    ours = [line for line in proc.stderr.splitlines()
            if 'summary:' in line or 'controller for' in line or ' bucket' in line]
    assert ours, proc.stderr[-4000:]
    for line in ours:            # one format: "mxnet-ssp: <role>[<rank>] ..."
        assert re.match(r'mxnet-ssp: (worker|server)\[\d+\]:? ', line), line
    assert proc.stderr.count('dist_ssp summary: 5 iterations') == 2, proc.stderr[-4000:]
    # plain SSP: one threshold, not a range of two equal ends; buckets counted once
    assert re.search(r'server\[0\]: dist_ssp controller for 2 workers, staleness 3, in a ',
                     proc.stderr), proc.stderr[-4000:]
    assert '[3, 3]' not in proc.stderr
    assert re.search(r'server\[0\]: 2 arrays in 1 bucket\n', proc.stderr), proc.stderr[-4000:]


def test_a_metrics_folder_used_again_holds_only_the_last_job(tmp_path):
    (tmp_path / 'train.py').write_text(USER_SCRIPT)
    metrics = tmp_path / 'run'
    metrics.mkdir()
    stale = {'event': 'connect', 'rank': 9, 'time': 0.0, 'host': 'an earlier job'}
    (metrics / 'controller.jsonl').write_text(json.dumps(stale) + '\n')
    proc = run_job(tmp_path, MXNET_SSP_METRICS_DIR=str(metrics))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    records = [json.loads(line) for line in
               (metrics / 'controller.jsonl').read_text().splitlines()]
    assert stale not in records
    assert sorted(r['rank'] for r in records if r['event'] == 'connect') == [0, 1]
    assert sorted(os.listdir(tmp_path)) == ['run', 'train.py']
