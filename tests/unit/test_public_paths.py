"""Public names that users or their saved files use stay where they are: the controller
package's names and the update rules pickled into Trainer states under ``mxnet_ssp.optim``.
(The package keeps no former module paths: it has no released version to stay compatible
with.)"""
import os
import pickle
import subprocess
import sys

import pytest

from conftest import ROOT

BOUND_S = 60


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    return {k: v for k, v in env.items() if not k.startswith('DMLC_')}


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
