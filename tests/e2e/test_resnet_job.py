"""A network with BatchNorm under our stores: GluonCV's CIFAR ResNet-20 on a real job.

BatchNorm's running statistics are initialized in the store but never get
gradients; the store must still make exactly one decision per optimizer step
(see tests/unit/ps/test_steps.py for the unit tests of the step boundary).
"""
import os
import sys

import pytest

from conftest import INSTALL_TEST, JOBS, fail_msg, read_jsonl, run_job

pytestmark = [pytest.mark.integration,
              pytest.mark.need(module='gluoncv', install=INSTALL_TEST)]


def test_cifar_resnet20_two_workers_dist_dssp(tmp_path):
    steps = 4
    out = tmp_path / 'o'
    proc = run_job(tmp_path, [sys.executable, os.path.join(JOBS, 'resnet_job.py'),
                              '--kvstore', 'dist_dssp', '--steps', str(steps),
                              '--batch-size', '4', '--out', str(out)], workers=2, servers=1)
    assert proc.returncode == 0, fail_msg(proc)
    mdir = tmp_path / 'metrics'
    for rank in (0, 1):
        res = read_jsonl(out / ('resnet-%d.json' % rank))[0]
        assert res['type'] == 'dist_dssp' and res['update_on_kvstore'] is True, res
        # one decision per optimizer step, the last step included
        assert res['clock'] == steps, 'worker %d: %d steps, clock %d' % (
            rank, steps, res['clock'])
        decisions = read_jsonl(mdir / ('worker-%d.jsonl' % rank))
        assert [m['clock'] for m in decisions] == list(range(1, steps + 1)), decisions
        # ResNet-20 has BatchNorm: running mean / var are in the store without gradients
        assert res['frozen'] > 0 and res['frozen_moved'] == res['frozen'], res
        assert res['learned'] and res['expected'] == res['with_grad'], (
            'worker %d: the store expects keys %r per step, the gradients are %r'
            % (rank, res['expected'], res['with_grad']))
        assert len(res['with_grad']) + res['frozen'] == res['params']
        assert all(l == l and l < 1e3 for l in res['losses']), res['losses']
