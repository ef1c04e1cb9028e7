"""mxnet-ssp-launch --job-restarts: the whole job starts again after a failure (issue 58).

Real processes on this machine (plain Python scripts standing in for a job: each reads
MXNET_SSP_RESTART and fails on purpose in the start the test picks); synchronization by
process exit only.
"""
import re
import sys

import pytest

from mxnet_ssp import launch
from mxnet_ssp.launch.hosts import Host
from mxnet_ssp.launch.restarts import replace_hosts

PY = sys.executable

# every process runs this; argv[1]: the role that fails, argv[2]: in starts < this number,
# argv[3]: a file each process appends "ROLE INDEX RESTART" to
FLAKY = '''\
import os, sys
role, restart = os.environ['DMLC_ROLE'], os.environ.get('MXNET_SSP_RESTART', 'unset')
with open(sys.argv[3], 'a') as f:
    f.write('%s %s %s\\n' % (role, os.environ['MXNET_SSP_LAUNCH_INDEX'], restart))
if role == sys.argv[1] and (restart == 'unset' or int(restart) < int(sys.argv[2])):
    sys.exit(7)
'''


def run(tmp_path, fail_role, fail_starts, restarts, capfd, workers=2):
    script = tmp_path / 'flaky.py'
    script.write_text(FLAKY)
    seen = tmp_path / 'seen.txt'
    rc = launch.main(['-n', str(workers), '-s', '1', '--launcher', 'local', '--timeout', '120',
                      '--job-restarts', str(restarts), PY, str(script), fail_role,
                      str(fail_starts), str(seen)])
    lines = seen.read_text().split() if seen.exists() else []
    starts = sorted({lines[i + 2] for i in range(0, len(lines), 3)})
    return rc, capfd.readouterr().err, starts, lines


@pytest.mark.parametrize('role', ['server', 'scheduler', 'worker'])
def test_a_failed_process_restarts_the_whole_job_once(tmp_path, capfd, role):
    rc, err, starts, lines = run(tmp_path, role, 1, 1, capfd)
    assert rc == 0, err
    assert starts == ['0', '1'], lines
    # every process of the second start ran, with MXNET_SSP_RESTART=1
    second = [(lines[i], lines[i + 1]) for i in range(0, len(lines), 3) if lines[i + 2] == '1']
    assert sorted(second) == [('scheduler', '0'), ('server', '0'), ('worker', '0'),
                              ('worker', '1')], lines
    label = 'scheduler' if role == 'scheduler' else '%s #' % role
    assert re.search(r'restart 1 of 1: %s.*exited with code 7 — starting the whole job again '
                     r'\(MXNET_SSP_RESTART=1\)' % re.escape(label), err), err
    assert err.count('restart 1 of 1') == 1 and 'restart 2' not in err, err


def test_a_failure_after_the_last_restart_ends_the_job_with_the_usual_message(tmp_path, capfd):
    rc, err, starts, lines = run(tmp_path, 'server', 5, 2, capfd)
    assert rc == launch.EXIT_FAILED, err
    assert starts == ['0', '1', '2'], lines
    assert 'restart 1 of 2: server #0' in err and 'restart 2 of 2: server #0' in err, err
    assert re.search(r'server #0 \(launch index; pid \d+\) exited with code 7 — stopping the '
                     r'job\n.*no restart left: the job failed after 2 restart\(s\) '
                     r'\(--job-restarts 2\)', err, re.S), err


def test_without_job_restarts_a_failure_ends_the_job_as_before(tmp_path, capfd):
    rc, err, starts, lines = run(tmp_path, 'server', 1, 0, capfd)
    assert rc == launch.EXIT_FAILED, err
    assert starts == ['unset'], lines          # MXNET_SSP_RESTART is not set at all
    assert re.search(r'server #0 \(launch index; pid \d+\) exited with code 7 — stopping the '
                     r'job', err), err
    assert 'restart' not in err, err


def test_a_job_that_succeeds_is_not_restarted(tmp_path, capfd):
    rc, err, starts, lines = run(tmp_path, 'nobody', 1, 3, capfd)
    assert rc == 0, err
    assert starts == ['0'] and len(lines) == 3 * 4, lines
    assert 'restart 1' not in err, err


@pytest.mark.parametrize('bad', ['-1', '101'])
def test_job_restarts_out_of_range_is_refused_naming_the_flag(tmp_path, capfd, bad):
    rc = launch.main(['-n', '1', '--launcher', 'local', '--job-restarts', bad, PY, '-c', 'pass'])
    assert rc == launch.EXIT_USAGE
    assert ('--job-restarts %s is not valid: expected an integer from 0 to 100' % bad
            in capfd.readouterr().err)


def test_replace_hosts_takes_the_spare_in_place_of_an_unreachable_host():
    hosts = [Host('a'), Host('b'), Host('c')]
    kept, note = replace_hosts(hosts, 2, {'a': 'no answer within 20 s'})
    assert [h.name for h in kept] == ['b', 'c']
    assert note == "; left out unreachable a (no answer within 20 s); the hostfile's spare c " \
                   "takes its place"
    kept, note = replace_hosts(hosts, 3, {'b': 'x'})
    assert [h.name for h in kept] == ['a', 'c'] and 'no spare host left' in note
    assert replace_hosts(hosts, 2, {}) == (hosts, '')
    kept, note = replace_hosts(hosts, 3, {'a': 'x', 'b': 'x', 'c': 'x'})
    assert kept == hosts and 'no host of the hostfile can be reached' in note
