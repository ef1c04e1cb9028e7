"""A 2-worker job whose learning rate is far too high stops with the divergence guard's
message, not after its epochs with a NaN model (issue 38, part 1)."""
import sys

import pytest

from conftest import job_env, run_job

pytestmark = pytest.mark.integration


@pytest.mark.parametrize('store', ['dist_async', 'dist_dssp'])
def test_a_huge_lr_stops_the_job_with_one_message_per_worker(tmp_path, store):
    """dist_dssp has a controller: the diverged worker leaves the job, so the other is not
    failed with a traceback ("disconnected without leaving") before the launcher stops it."""
    proc = run_job(tmp_path, [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar',
                              '--kvstore', store, '--model', 'mlp', '--dataset', 'digits',
                              '--lr', '1000', '--num-epochs', '1', '--log-interval', '0',
                              '--no-progress', '--save-dir', str(tmp_path / 'run')],
                   workers=2, servers=1, timeout=150,
                   env=job_env(tmp_path), launcher_args=['--timeout', '120'])
    assert proc.returncode == 1, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines()
              if line.startswith('python -m mxnet_ssp.lab.train_cifar: error: ')]
    assert errors, proc.stderr[-3000:]
    for line in errors:
        assert 'diverged at iteration' in line
        assert 'with --lr 1000 and --kvstore %s (2 workers)' % store in line
        assert line.endswith('try a lower --lr, e.g. --lr 100')
    assert 'exited with code 3' in proc.stderr
    assert 'Traceback' not in proc.stderr
    assert not (tmp_path / 'run' / 'summary.json').exists()
