"""The real mxnet-ssp-launch refuses a bad setting or training flag before it starts any
process: exit 2, one line naming the setting or flag, its value and what is accepted
(issue 38, part 2)."""
import sys

import pytest

from conftest import job_env, run_job

pytestmark = pytest.mark.integration

#: every role of the job would leave a file named after its role and launch index
MARKER = [sys.executable, '-c',
          'import os; open("started-%s-%s" % (os.environ.get("DMLC_ROLE"), '
          'os.environ.get("MXNET_SSP_LAUNCH_INDEX")), "w").close()']


def assert_refused_before_starting(proc, tmp_path, *words):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith('mxnet-ssp-launch: error: ')
    for word in words:
        assert word in lines[0]
    assert proc.stdout == ''
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith('started')) == []


@pytest.mark.parametrize('name,value,words', [
    ('MXNET_SSP_BUCKET_BYTES', 'x', ["MXNET_SSP_BUCKET_BYTES='x' is not valid", 'integer >= 0']),
    ('MXNET_SSP_SOFTSYNC_SPLITS', '5', ["MXNET_SSP_SOFTSYNC_SPLITS='5' is not valid",
                                        '1 <= n <= 2']),
])
def test_a_bad_setting_starts_no_process(tmp_path, name, value, words):
    proc = run_job(tmp_path, MARKER, workers=2, timeout=60,
                   env=job_env(tmp_path, **{name: value}))
    assert_refused_before_starting(proc, tmp_path, *words)


def test_a_bad_training_flag_starts_no_process(tmp_path):
    proc = run_job(tmp_path, [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar',
                              '--kvstore', 'dist_dssp', '--staleness', '9,2',
                              '--save-dir', str(tmp_path / 'started-run')],
                   workers=2, timeout=60)
    assert_refused_before_starting(proc, tmp_path, "--staleness='9,2'", 'sL=9 is greater',
                                   "expected 'sL,sU'")


def test_the_marker_command_does_start_every_process(tmp_path):
    """The check above can fail: with good settings the same command runs in every role."""
    proc = run_job(tmp_path, MARKER, workers=2, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith('started')) == [
        'started-scheduler-0', 'started-server-0', 'started-worker-0', 'started-worker-1']
