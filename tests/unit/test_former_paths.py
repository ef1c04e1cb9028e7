"""Paths that moved when the package got its folders (core/, controller/, ps/, lab/) keep
working where users or their saved files name them: ``python -m mxnet_ssp.controller_process``,
``python -m mxnet_ssp.simulate``, ``mxnet_ssp.controller.ControllerServer``, and the update
rules pickled into Trainer states under ``mxnet_ssp.optim``."""
import json
import os
import pickle
import secrets
import subprocess
import sys

import pytest

from conftest import ROOT

BOUND_S = 60


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    return {k: v for k, v in env.items() if not k.startswith('DMLC_')}


def test_python_m_controller_process_still_serves():
    settings = {'num_workers': 1, 's_lower': 0, 's_upper': 0, 'mode': 'bounded',
                'timeout': 30.0, 'host': '127.0.0.1', 'secret': secrets.token_hex(32),
                'metrics_path': None}
    proc = subprocess.Popen([sys.executable, '-m', 'mxnet_ssp.controller_process'],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env())
    try:
        proc.stdin.write((json.dumps(settings) + '\n').encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer['host'] == '127.0.0.1' and answer['port'] > 0
        proc.stdin.close()
        assert proc.wait(timeout=BOUND_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_python_m_simulate_still_runs():
    out = subprocess.run([sys.executable, '-m', 'mxnet_ssp.simulate', '--times', '1,2',
                          '--iterations', '20', 'asp', 'ssp:2'],
                         env=_env(), capture_output=True, text=True, timeout=BOUND_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert 'asp' in out.stdout and 'ssp:2' in out.stdout


def test_former_module_names_are_the_new_objects():
    import mxnet_ssp.controller as controller
    import mxnet_ssp.controller_process as former_process
    import mxnet_ssp.simulate as former_simulate
    from mxnet_ssp.controller import process, protocol, server
    from mxnet_ssp.cluster_model import simulate
    assert controller.ControllerServer is server.ControllerServer
    assert controller.ControllerError is protocol.ControllerError
    assert former_process.start is process.start
    assert former_simulate.simulate is simulate.simulate
    assert former_simulate.main is simulate.main


def test_the_controller_package_has_no_other_attributes():
    import mxnet_ssp.controller as controller
    with pytest.raises(AttributeError, match='NoSuchThing'):
        controller.NoSuchThing


def test_update_rules_pickle_under_mxnet_ssp_optim():
    code = ('import pickle, sys, mxnet_ssp.optim as o\n'
            'sys.stdout.buffer.write(pickle.dumps(o.DCASGD(learning_rate=0.5)))\n')
    out = subprocess.run([sys.executable, '-c', code], env=_env(), capture_output=True,
                         timeout=BOUND_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert b'mxnet_ssp.optim' in out.stdout
    rule = pickle.loads(out.stdout)
    assert type(rule).__module__ == 'mxnet_ssp.optim'
    assert rule.lr == 0.5
