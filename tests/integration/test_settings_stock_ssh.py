"""Issue 41: MXNet's stock tools/launch.py --launcher ssh passes no MXNET_SSP_* variable to
the remote processes; the job's settings file (mxnet_ssp.env in the working directory, which
the stock launcher cd's into on every host) still reaches every process.

The job runs over a private sshd on 127.0.0.1 / 127.0.0.2 (test_launch.py's ``sshd``
fixture).  The stock tracker runs plain ``ssh HOST -p PORT '...'`` with no way to pass ssh
options, so a wrapper named ``ssh`` first on PATH adds ``-F <the fixture's config>``.  The
remote processes run this Python (``sys.executable``) and import the mxnet_ssp it has
installed (``pip install -e .`` of this checkout).
"""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import JOBS, fail_msg, job_env, read_jsonl
from test_launch import alive, sshd  # noqa: F401  (sshd: the private sshd fixture)

PY = sys.executable

#: Exec's the job script after recording, in <pids>/<role>-<pid>.json, this process's pid,
#: whether it runs under ssh and which MXNET_SSP_* variables its environment has.
RECORD_AND_EXEC = r'''
import json, os, sys
pids, script = sys.argv[1], sys.argv[2]
role = os.environ.get('DMLC_ROLE', 'none')
with open(os.path.join(pids, '%s-%d.json' % (role, os.getpid())), 'w') as f:
    json.dump({'pid': os.getpid(), 'role': role, 'ssh': bool(os.environ.get('SSH_CONNECTION')),
               'ours': sorted(k for k in os.environ if k.startswith('MXNET_SSP_'))}, f)
os.execv(sys.executable, [sys.executable, script] + sys.argv[3:])
'''


def _ssh_config(sshd_args):
    """The fixture's ssh config file and the port its sshd listens on."""
    config = sshd_args.split()[-1]
    with open(config) as f:
        port = re.search(r'^\s*Port (\d+)', f.read(), re.M).group(1)
    return config, port


def _recorded(pids_dir):
    return {name: json.loads((pids_dir / name).read_text())['pid']
            for name in os.listdir(pids_dir)}


def _wait_ended(pids_dir, timeout):
    """Names of the recorded processes still alive after up to `timeout` seconds.  The stock
    launcher returns with its scheduler, while the remote processes may still be ending."""
    deadline = time.monotonic() + timeout
    while True:
        left = sorted(n for n, pid in _recorded(pids_dir).items() if alive(pid))
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)     # polling a condition with a deadline, not a synchronization


def _stop_all(session, pids_dir):
    """Kill the launcher's session and every recorded process still alive (remote ones are
    sshd's children, not in the session)."""
    try:
        os.killpg(session, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in _recorded(pids_dir).values():
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.ssh
def _stock_ssh_job(tmp_path, sshd, settings, iters):  # noqa: F811
    """Run marker_job.py (dist_ssp, worker 1 slowed) under the stock launch.py over ssh, in
    tmp_path/job with `settings` as its mxnet_ssp.env (None: no file), with no MXNET_SSP_*
    variable in the environment; returns (launcher exit code, processes left, result)."""
    config, port = _ssh_config(sshd)
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    wrapper = bindir / 'ssh'
    wrapper.write_text('#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' % config)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    job = tmp_path / 'job'
    job.mkdir()
    if settings is not None:
        (job / 'mxnet_ssp.env').write_text(settings)
    (job / 'record.py').write_text(RECORD_AND_EXEC)
    (job / 'hosts').write_text('127.0.0.1:%s\n127.0.0.2:%s\n' % (port, port))
    pids = tmp_path / 'pids'
    pids.mkdir()
    env = {k: v for k, v in job_env(tmp_path).items() if not k.startswith('MXNET_SSP_')}
    env['PATH'] = '%s%s%s' % (bindir, os.pathsep, env.get('PATH', ''))
    argv = [PY, '-m', 'mxnet_ssp.launch.stock', '-n', '2', '-s', '1', '--launcher', 'ssh',
            '-H', 'hosts', PY, 'record.py', str(pids), os.path.join(JOBS, 'marker_job.py'),
            '--out', str(tmp_path / 'steps'), '--store', 'dist_ssp', '--iters', str(iters),
            '--slow-rank', '1', '--slow-seconds', '0.2']
    out_path, err_path = tmp_path / 'launch.out', tmp_path / 'launch.err'
    with open(out_path, 'w') as out, open(err_path, 'w') as err:
        proc = subprocess.Popen(argv, env=env, cwd=str(job), start_new_session=True,
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    left = None
    try:
        try:
            rc = proc.wait(timeout=150)
            left = _wait_ended(pids, 30)
        except subprocess.TimeoutExpired:
            rc = None
    finally:
        _stop_all(proc.pid, pids)
        proc.wait()
    return rc, left, subprocess.CompletedProcess(argv, rc, out_path.read_text(),
                                                 err_path.read_text())


def test_stock_launch_ssh_takes_staleness_from_the_settings_file(tmp_path, sshd):  # noqa: F811
    """dist_ssp with MXNET_SSP_STALENESS=1 in mxnet_ssp.env only (the default is 3), worker 1
    slowed down: no process has any MXNET_SSP_* variable, the remote ones run under ssh, and
    the fast worker is released at lead 1 at most and reaches it.  With the default bound the
    lead would reach 3.  The metrics directory also comes from the file (the server writes
    the controller's log there)."""
    iters = 12
    rc, left, result = _stock_ssh_job(
        tmp_path, sshd, '# the job\'s settings, read by every process in this directory\n'
        'MXNET_SSP_STALENESS=1\nMXNET_SSP_TIMEOUT=60\nMXNET_SSP_FOLLOW_GRACE=4\n'
        'export MXNET_SSP_METRICS_DIR="metrics"\n', iters)
    pids, job = tmp_path / 'pids', tmp_path / 'job'
    assert rc == 0, fail_msg(result)
    assert left == [], fail_msg(result)
    records = [json.loads((pids / n).read_text()) for n in sorted(os.listdir(pids))]
    assert sorted(r['role'] for r in records) == ['scheduler', 'server', 'worker', 'worker'], \
        records
    assert all(r['ours'] == [] for r in records), records          # nothing in the environment
    assert all(r['ssh'] for r in records if r['role'] != 'scheduler'), records
    steps = {rank: read_jsonl(tmp_path / 'steps' / ('steps-%d.jsonl' % rank)) for rank in (0, 1)}
    assert [len(steps[r]) for r in (0, 1)] == [iters, iters], fail_msg(result)
    leads = [rec['lead'] for rec in steps[0]]
    assert max(leads) == 1, leads                                    # the file's bound, reached
    assert all(rec['lead'] <= 1 for r in (0, 1) for rec in steps[r])
    controller = read_jsonl(job / 'metrics' / 'controller.jsonl')
    pushes = [e for e in controller if e['event'] == 'push']
    assert len(pushes) == 2 * iters, controller
    released = [e['lead'] for e in controller if e['event'] == 'release'
                or e['event'] == 'push' and e['decision'] == 'ok']
    assert max(released) == 1, controller            # every release within the file's bound
    assert any(e['decision'] == 'wait' for e in pushes), controller    # and it held a worker
    assert 'no MXNET_SSP_* setting reached it' not in result.stderr, fail_msg(result)


def test_stock_launch_ssh_with_no_setting_anywhere_warns_once_per_job_naming_it(
        tmp_path, sshd):  # noqa: F811
    """No settings file and no MXNET_SSP_* variable: the job runs on the defaults, and says so
    in one line for the whole job (worker 0's), naming MXNet's tools/launch.py, not once per
    process."""
    rc, left, result = _stock_ssh_job(tmp_path, sshd, None, 4)
    assert rc == 0 and left == [], fail_msg(result)
    text = result.stdout + result.stderr
    lines = [ln for ln in text.splitlines() if 'no MXNET_SSP_* setting reached it' in ln]
    assert len(lines) == 1, fail_msg(result)
    assert lines[0].startswith('mxnet-ssp: WARNING worker[0] started over ssh on '), lines
    assert "by MXNet's tools/launch.py --launcher ssh" in lines[0], lines
