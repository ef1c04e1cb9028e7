"""benchmarks.wire_step on the emulated cluster: its smallest configuration for a couple of
steps (slow: about a minute of jobs and a testbed of its own).  Checks the report's fields:
the floor, the step times, the bytes each worker's and the server's link carried (from the
hosts' own interface counters), the placement and the goal lines."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from test_testbed_cluster import need_testbed_tools, new_prefix, tb

PY = sys.executable
pytestmark = [pytest.mark.integration, pytest.mark.ssh, pytest.mark.slow]


def test_the_smallest_wire_step_run_reports_its_fields(tmp_path):
    need_testbed_tools()
    prefix, out = new_prefix(), tmp_path / 'out'
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    try:
        proc = subprocess.run(
            [PY, '-m', 'benchmarks.wire_step', '--quick', '--models', 'cifar_resnet20_v1',
             '--layouts', '2x1', '--stores', 'native_async,ours_async', '--trials', '1',
             '--prefix', prefix, '--out', str(out)], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=600, stdin=subprocess.DEVNULL)
    finally:
        assert tb(prefix, 'down').returncode == 0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    report = json.loads((out / 'results.json').read_text())
    assert report['configs'] == ['native_async', 'ours_async']
    assert sorted(report['links_measured']) == ['host0', 'host1', 'host2', 'host3']
    assert report['failures'] == []
    nbytes = 4 * 272474                      # cifar_resnet20_v1's float32 parameters
    floor = 8 * 2 * nbytes / (1e9 * 1448 / 1514)      # the server's link: 2 workers' bytes
    for cell in report['cells']:
        assert (cell['model'], cell['workers'], cell['servers']) == ('cifar_resnet20_v1', 2, 1)
        (trial,) = cell['trials']
        assert trial['bytes'] == nbytes and trial['steps'] == 2
        assert trial['floor_s'] == pytest.approx(floor)
        assert trial['ms'] > 0 and trial['over_floor'] == pytest.approx(
            trial['ms'] / (1e3 * floor))
        assert trial['node_hosts'] == ['198.18.0.3', '198.18.0.4']   # hosts 2 and 3
        assert trial['root_uri'] == ['198.18.0.1']
        # each worker's link: its gradients out, the weights in, each step (+ headers)
        for w in trial['worker_bytes_per_step']:
            for way in ('rx', 'tx'):
                assert nbytes <= w[way] <= 1.25 * nbytes, (cell['config'], w)
        (server,) = trial['server_bytes_per_step']
        assert server['rx'] > 0.5 * nbytes and server['tx'] > 0.5 * nbytes, server
    text = proc.stdout
    assert '| 2x1 | ours dist_async |' in text and "| 2x1 | MXNet's dist_async |" in text
    assert 'cifar_resnet20_v1 2x1 ours dist_async: step / floor ' in text
    assert "cifar_resnet20_v1 2x1 ours dist_async: MXNet's dist_async / this " in text
