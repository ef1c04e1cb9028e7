"""The controller in a process of its own (MXNET_SSP_CONTROLLER=process, the default):
started as ``python -m mxnet_ssp.controller.process`` with its settings on stdin, it serves
real clients over TCP and ends when its stdin closes (the server process that started it
ended, in any way)."""
import json
import os
import secrets
import subprocess
import sys

import pytest

from conftest import ROOT
from mxnet_ssp.server import discovery
from mxnet_ssp.controller.client import ControllerClient
from mxnet_ssp.controller.protocol import ControllerError

BOUND_S = 60


def settings(**changes):
    base = {'num_workers': 2, 's_lower': 1, 's_upper': 1, 'mode': 'bounded', 'timeout': 30.0,
            'host': '127.0.0.1', 'secret': secrets.token_hex(32), 'metrics_path': None}
    base.update(changes)
    return base


def start(request):
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, '-m', 'mxnet_ssp.controller.process'],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    proc.stdin.write((json.dumps(request) + '\n').encode())
    proc.stdin.flush()
    return proc, json.loads(proc.stdout.readline())


def test_serves_clients_and_ends_when_its_stdin_closes(tmp_path):
    request = settings(metrics_path=str(tmp_path / 'controller.jsonl'))
    proc, answer = start(request)
    try:
        assert answer['host'] == '127.0.0.1' and answer['port'] > 0
        secret = bytes.fromhex(request['secret'])
        clients = [ControllerClient((answer['host'], answer['port']), secret, r).connect()
                   for r in range(2)]
        assert clients[0].clock(1).lead == 1              # s = 1: one step ahead is allowed
        assert clients[1].clock(1).lead == 0
        for c in clients:
            c.leave()
            c.close()
        assert proc.poll() is None                        # still serving: stdin is open
        proc.stdin.close()                                # what the server's exit does
        assert proc.wait(timeout=BOUND_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    events = [json.loads(line)['event'] for line in open(tmp_path / 'controller.jsonl')]
    assert events.count('connect') == 2 and events.count('leave') == 2


def test_a_failed_job_is_reported_on_stdout_once_the_workers_hung_up():
    """The server that started the controller reads this line and ends
    (mxnet_ssp.ps.job_watch.follow_controller_process)."""
    request = settings(s_lower=0, s_upper=0)
    proc, answer = start(request)
    try:
        secret = bytes.fromhex(request['secret'])
        clients = [ControllerClient((answer['host'], answer['port']), secret, r).connect()
                   for r in range(2)]
        clients[1].close()                                # worker 1 died
        with pytest.raises(ControllerError, match='worker 1 disconnected'):
            clients[0].clock(1)                           # held until the failure, then told
        clients[0].close()                                # and ends
        line = json.loads(proc.stdout.readline())
        assert line == {'failed': 'worker 1 disconnected at clock 0 without leaving '
                                  '(process died?); it ran on 127.0.0.1'}
        assert proc.poll() is None                        # it serves until stdin closes
        proc.stdin.close()
        assert proc.wait(timeout=BOUND_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bad_settings_are_answered_as_an_error():
    proc, answer = start(settings(mode='sideways'))
    assert proc.wait(timeout=BOUND_S) == 1
    assert 'sideways' in answer['error']


def test_a_controller_that_does_not_start_fails_discovery_naming_why():
    with pytest.raises(RuntimeError, match='the controller process did not start: .*sideways'):
        discovery._start_process(settings(mode='sideways'))


def test_ends_when_the_process_that_started_it_is_killed(tmp_path):
    """SIGKILL of the server process that started it: its end of the pipe closes, and the
    controller process exits by itself (nobody else would stop it)."""
    import signal
    import time
    parent_code = (
        'import json, sys, time\n'
        'from mxnet_ssp.server import discovery\n'
        'proc, address = discovery._start_process(json.loads(sys.argv[1]))\n'
        'print(proc.pid, flush=True)\n'
        'time.sleep(600)\n')
    env = dict(os.environ, PYTHONPATH=ROOT)
    parent = subprocess.Popen([sys.executable, '-c', parent_code, json.dumps(settings())],
                              stdout=subprocess.PIPE, env=env)
    child = None
    try:
        child = int(parent.stdout.readline())
        os.kill(child, 0)                               # the controller process is running
        parent.kill()
        parent.wait(timeout=BOUND_S)
        deadline = time.monotonic() + BOUND_S
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)                            # polling with a deadline
        assert not _alive(child), 'controller process %d outlived its server' % child
    finally:
        parent.kill()
        parent.wait()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid):
    """Whether `pid` runs (a zombie, exited but not reaped by its dead parent, does not)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def test_a_request_that_names_no_placement_gets_the_documented_default(monkeypatch):
    """config documents ``process`` as MXNET_SSP_CONTROLLER's default; a discovery request
    without the setting (a worker of an older release) gets the same, not a thread."""
    from mxnet_ssp import config
    assert config.DEFAULT_CONTROLLER == 'process'
    assert config.controller_placement({}) == 'process'
    monkeypatch.setattr(discovery, '_controller', None)
    monkeypatch.setattr(discovery, '_controller_answer', None)
    monkeypatch.delenv('DMLC_NODE_HOST', raising=False)
    monkeypatch.setenv('DMLC_PS_ROOT_URI', '127.0.0.1')
    request = {'store': 'dist_ssp', 'num_workers': 1, 's_lower': 0, 's_upper': 0,
               'mode': 'bounded', 'timeout': 30.0}
    answer = discovery.start_controller(request)
    proc = discovery._controller
    try:
        assert isinstance(proc, subprocess.Popen)
        assert answer['host'] == '127.0.0.1' and answer['port'] > 0
    finally:
        if isinstance(proc, subprocess.Popen):
            proc.stdin.close()
            assert proc.wait(timeout=BOUND_S) == 0
        else:
            proc.stop()
