"""The worker/server channel: the worker's side never imports the server's code."""
import os
import pickle
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_worker_store_does_not_import_the_server_module():
    code = ('import sys, mxnet, mxnet_ssp.kvstore, pickle\n'
            'from mxnet_ssp.channel import UpdaterSpec\n'
            'pickle.dumps(UpdaterSpec(mxnet.optimizer.SGD(), num_workers=2), 0)\n'
            'print(sorted(m for m in sys.modules if m.startswith("mxnet_ssp.")))\n')
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    env = {k: v for k, v in env.items() if not k.startswith('DMLC_')}
    proc = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = proc.stdout.strip().splitlines()[-1]
    assert 'mxnet_ssp.kvstore' in modules, modules
    for server_side in ('mxnet_ssp.server', 'mxnet_ssp.controller'):
        assert server_side not in modules, modules


def test_updater_spec_unpickles_as_the_server_optimizer():
    mx = pytest.importorskip('mxnet')
    from mxnet_ssp.channel import UpdaterSpec
    from mxnet_ssp.server import ServerOptimizer
    opt = mx.optimizer.SGD(learning_rate=0.25, multi_precision=False)
    spec = UpdaterSpec(opt, num_workers=3, slots=True, softsync_c=2)
    assert spec.multi_precision is False
    server_side = pickle.loads(pickle.dumps(spec, 0))
    assert isinstance(server_side, ServerOptimizer)
    assert (server_side.num_workers, server_side.slots, server_side.softsync_c) == (3, True, 2)
    assert server_side.optimizer.lr == 0.25
