"""mxnet_ssp.cpu_record: a process's CPU record, written when it exits, only with a directory."""
import json
import os
import subprocess
import sys

from conftest import ROOT
from mxnet_ssp.config import metrics_dir_if_set
from mxnet_ssp.cpu_record import record_cpu, usage_file

SCRIPT = '''
import sys, time
from mxnet_ssp.cpu_record import record_cpu
print(record_cpu('server', sys.argv[1] if len(sys.argv) > 1 else None), flush=True)
end = time.process_time() + 0.2
while time.process_time() < end:      # 0.2 s of CPU
    pass
'''


def run(*args):
    proc = subprocess.run([sys.executable, '-c', SCRIPT] + list(args), capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_process_writes_its_cpu_and_wall_time_at_exit(tmp_path):
    where = tmp_path / 'new' / 'metrics'                  # made when the record is written
    path = run(str(where))
    (name,) = os.listdir(str(where))
    assert path == str(where / name) and name.startswith('cpu-server-') and name.endswith('.json')
    record = json.loads((where / name).read_text())
    assert record['role'] == 'server' and name == 'cpu-server-%d.json' % record['pid']
    assert 0.2 <= record['cpu_s'] < 30 and record['wall_s'] >= 0.2


def test_nothing_is_written_without_a_directory(tmp_path):
    assert run() == 'None'
    assert record_cpu('scheduler', None) is None
    assert usage_file('d', 'scheduler', 7) == os.path.join('d', 'cpu-scheduler-7.json')


def test_the_hook_passes_the_metrics_directory_only_when_it_is_set():
    assert metrics_dir_if_set({}) is None
    for off in ('', ' ', 'off', 'OFF', 'none', '0'):
        assert metrics_dir_if_set({'MXNET_SSP_METRICS_DIR': off}) is None
    assert metrics_dir_if_set({'MXNET_SSP_METRICS_DIR': '/tmp/run'}) == '/tmp/run'
