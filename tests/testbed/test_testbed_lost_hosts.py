"""Lost hosts, not only lost processes (issue 36 part 3), on an emulated 4-host cluster.

Each test brings a testbed of its own up (random prefix, removed on every exit path) and runs
tests/support/jobs/marker_job.py with ``mxnet-ssp-launch --launcher ssh`` from the login host
(host0, which runs the scheduler) over the testbed's hostfile (host1..host3): -n 3 -s 1
places server #0 and worker #0 on host1 and workers #1, #2 on host2 and host3 (our
launcher's round-robin per role).  Then one host is lost while the job trains:

* a **partition**: the host's link is taken down on the bridge's side (``ip link set
  <prefix>bI down`` in the bridge's namespace).  No FIN or RST leaves or reaches the host;
  its processes run on, cut off;
* a host whose **processes all die at once**: every process in its namespace is killed
  (SIGKILL), its sshd included.

The job's controller (on host1) must see it within the liveness bound
(``MXNET_SSP_LIVENESS_TIMEOUT``): fail-fast, the job fails naming the rank and the host's
address; elastic, the survivors go on and every push of theirs is applied exactly once
(markers, as in tests/integration/test_elastic.py).  A lost server host fails the job naming
it.  Which rank runs on which host is read from the controller's ``connect`` events (ps-lite
assigns ranks, not the launcher).  Times: the cut is stamped with ``time.monotonic()`` here,
the controller's events with the same clock (one machine); with
``MXNET_SSP_LIVENESS_TRIALS=<file>`` each test appends what it measured as one JSON line
(docs/elastic.md, "Lost hosts").  Waiting is polling files with a deadline, never a sleep
standing for an event.  The default run has three tests (88 s here); ``-m slow`` adds
the host whose processes all die and the job under MXNet's stock launch.py.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import JOBS, fail_msg, job_env, read_jsonl
from test_testbed_cluster import fail, four_hosts

PY = sys.executable
pytestmark = [pytest.mark.integration, pytest.mark.ssh]

HOST_ADDRESS = {1: '198.18.0.2', 2: '198.18.0.3', 3: '198.18.0.4'}
POLL_S = 0.05          # between two looks at a file the job writes


@pytest.fixture
def testbed():
    """4 emulated hosts at 1gbit (host0: the login host), removed on every exit path."""
    yield from four_hosts()


class Job:
    """The marker job, launched from host0 in a session of its own; always reaped."""

    def __init__(self, state, tmp_path, store='dist_ssp', iters=60, elastic=None,
                 liveness=None, base_seconds=0.05, staleness='2', stock=False):
        self.tmp, self.out = tmp_path, tmp_path / 'steps'
        self.metrics = tmp_path / 'metrics'
        env = job_env(tmp_path, MXNET_SSP_TIMEOUT='120')
        env.pop('STOCK_LAUNCH_HOST_IP')
        if liveness is not None:
            env['MXNET_SSP_LIVENESS_TIMEOUT'] = str(liveness)
        self.liveness = float(liveness or 10)
        hostfile = os.path.join(state['state_dir'], 'hostfile')
        if stock:       # MXNet's tools/launch.py: server #0 on host1, workers on host2, host3
            env['STOCK_LAUNCH_HOST_IP'] = '198.18.0.1'
            if elastic:
                env['MXNET_SSP_ELASTIC'] = str(elastic)
            # its ssh tracker forwards only a few variables: the settings go in the command
            argv = [PY, '-m', 'mxnet_ssp.launch.stock', '-n', '2', '-s', '1',
                    '--launcher', 'ssh', '-H', hostfile, 'env'] + [
                '%s=%s' % (k, env[k]) for k in sorted(env) if k.startswith('MXNET_SSP_')]
        else:
            argv = [PY, '-m', 'mxnet_ssp.launch', '-n', '3', '-s', '1', '--launcher', 'ssh',
                    '-H', hostfile, '--env', 'PYTHONPATH', '--timeout', '100']
            if elastic:
                argv += ['--elastic', str(elastic)]
        argv += [PY, os.path.join(JOBS, 'marker_job.py'), '--out', str(self.out),
                 '--store', store, '--staleness', staleness, '--iters', str(iters),
                 '--base-seconds', str(base_seconds)]
        self.iters = iters
        # the output goes to files, which the test can read while the job runs
        self.out_path, self.err_path = tmp_path / 'launcher.out', tmp_path / 'launcher.err'
        with open(self.out_path, 'w') as out, open(self.err_path, 'w') as err:
            self.proc = subprocess.Popen(
                [PY, '-m', 'mxnet_ssp.lab.testbed', '--prefix', state['prefix'], 'run', '--'] + argv,
                env=env, cwd=str(tmp_path), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=out, stderr=err)
        self.started = time.monotonic()

    def events(self, kind=None):
        path = self.metrics / 'controller.jsonl'
        if not path.exists():
            return []
        records = []
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:          # a line being written
                break
        return [r for r in records if kind is None or r['event'] == kind]

    def steps(self, rank):
        path = self.out / ('steps-%d.jsonl' % rank)
        if not path.exists():
            return []
        return [json.loads(x) for x in path.read_text().splitlines() if x.endswith('}')]

    def until(self, what, check, deadline_s=60):
        """Poll `check()` until it returns something true; fail naming `what` at the deadline
        or when the job ended first."""
        deadline = time.monotonic() + deadline_s
        while True:
            found = check()
            if found:
                return found
            if self.proc.poll() is not None:
                out, err = self.output()
                pytest.fail('the job ended before %s:\n%s\n%s' % (what, out[-3000:], err[-6000:]))
            if time.monotonic() > deadline:
                pytest.fail('no %s within %d s' % (what, deadline_s))
            time.sleep(POLL_S)

    def rank_on(self, address):
        """The rank of the worker the controller saw connect from `address`, once it has
        made 3 steps."""
        def ready():
            ranks = [e['rank'] for e in self.events('connect') if e.get('host') == address]
            return ranks and len(self.steps(ranks[0])) >= 3 and ranks[0] + 1
        return self.until('worker on %s at its step 3' % address, ready) - 1

    def output(self):
        return self.out_path.read_text(), self.err_path.read_text()

    def wait(self, timeout=90):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
            out, err = self.output()
            pytest.fail('job on the testbed did not finish within %d s:\n%s\n%s'
                        % (timeout, out[-3000:], err[-6000:]))
        self.ended = time.monotonic()
        self.kill()
        out, err = self.output()
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def cut(state, host):
    """Take host `host`'s link down on the bridge's side: a partition; returns the time."""
    prefix = state['prefix']
    subprocess.run(['ip', 'netns', 'exec', prefix + 'net', 'ip', 'link', 'set',
                    '%sb%d' % (prefix, host), 'down'], check=True)
    return time.monotonic()


def kill_host(state, host):
    """SIGKILL every process in host `host`'s namespace at once; returns the time."""
    ns = '%sh%d' % (state['prefix'], host)
    pids = subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True,
                          check=True).stdout.split()
    assert pids, 'no process runs on %s' % ns
    at = time.monotonic()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return at


def job_processes(state, host):
    """Pids of the job's processes (marker_job.py) still running on host `host`."""
    ns = '%sh%d' % (state['prefix'], host)
    pids = subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True,
                          check=True).stdout.split()
    found = []
    for pid in pids:
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                if b'marker_job.py' in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


class Ending(threading.Thread):
    """Polls, from now on, for the time no job process is left on `host` (:attr:`at`)."""

    def __init__(self, state, host, deadline_s):
        super().__init__(daemon=True)
        self.state, self.host, self.deadline_s, self.at = state, host, deadline_s, None
        self.start()

    def run(self):
        deadline = time.monotonic() + self.deadline_s
        while time.monotonic() < deadline:
            if not job_processes(self.state, self.host):
                self.at = time.monotonic()
                return
            time.sleep(POLL_S)


def record(test, **measured):
    path = os.environ.get('MXNET_SSP_LIVENESS_TRIALS')
    if path:
        with open(path, 'a') as f:
            f.write(json.dumps(dict(test=test, **measured)) + '\n')



def check_survivors(job, proc, rank):
    """Elastic, worker `rank` on host3 lost: the others' pushes all applied once (markers),
    and each survivor names the lost worker and its host when it leaves."""
    survivors = sorted({0, 1, 2} - {rank})
    check_markers(job, survivors, rank)
    for r in survivors:
        assert re.search(r'worker\[%d\] dist_ssp elastic: finished at clock %d; lost worker %d '
                         r'at clock \d+ \([\d.]+ s after the controller started\) on '
                         r'198\.18\.0\.4' % (r, job.iters, rank), proc.stderr), fail_msg(proc)

def check_markers(job, survivors, lost):
    """Each survivor ran every step and its last pull shows each of its own markers exactly
    once; the lost worker's steps it recorded are all applied, at most the next one is, and
    none after that."""
    done = len(job.steps(lost))
    for rank in survivors:
        steps = job.steps(rank)
        assert len(steps) == job.iters, (rank, len(steps))
        seen = steps[-1]['seen']
        assert seen[rank] == [1] * job.iters, (rank, seen[rank])
        assert seen[lost][:done] == [1] * done, (rank, done, seen[lost])
        assert seen[lost][done] in (0, 1) and seen[lost][done + 1:] == [0] * (
            job.iters - done - 1), (rank, done, seen[lost])
        assert all(v in (0, 1) for row in seen for v in row), (rank, seen)


def test_fail_fast_a_partitioned_worker_host_fails_the_job_naming_rank_and_host(
        testbed, tmp_path):
    """Default liveness bound (10 s): host3's link goes down while worker #2 trains there;
    the controller fails the job naming the worker's rank and 198.18.0.4 within the bound,
    the survivors exit 1 with that message and the launcher stops the job."""
    job = Job(testbed, tmp_path, iters=400)
    rank = job.rank_on(HOST_ADDRESS[3])
    at = cut(testbed, 3)
    proc = job.wait()
    assert proc.returncode == 1, fail_msg(proc)
    (failure,) = job.events('failure')
    message = failure['message']
    assert re.fullmatch(r'worker %d on 198\.18\.0\.4 sent nothing, not even the answer to a '
                        r'TCP keepalive probe, for 1\d\.\d s at clock \d+ '
                        r'\(MXNET_SSP_LIVENESS_TIMEOUT=10\): its host is down or cut off'
                        % rank, message), message
    assert message in proc.stderr, fail_msg(proc)         # the survivors say it
    # a survivor, or the server it told as it failed (host1 or host2), fails first
    assert re.search(r'(?:worker|server) #[01] \(launch index\) on 198\.18\.0\.[23] \(local '
                     r'ssh pid \d+\) exited with code 1 — stopping the job', proc.stderr), \
        fail_msg(proc)
    detected, ended = failure['time'] - at, job.ended - at
    record('fail-fast partition', bound=10, detected_s=round(detected, 2),
           launcher_exit_s=round(ended, 2))
    assert 8.0 <= detected <= 11.5, detected     # 10 s of silence, counted from the last
    assert ended < 20, ended                     # packet (up to 2 s before the cut)


def test_elastic_survivors_go_on_when_a_worker_host_is_cut_off(testbed, tmp_path):
    """--elastic 2, MXNET_SSP_LIVENESS_TIMEOUT=5: host3 is cut off mid-run; the controller
    drops worker #2's rank within 5 s (its record names 198.18.0.4), the survivors finish
    every step with each of their pushes applied exactly once and exit 0, the server and the
    scheduler end by themselves (the cut-off worker's ps-lite connections count as closed
    once silent), and the launcher returns 0 naming the lost worker (its ssh gave up)."""
    job = Job(testbed, tmp_path, iters=80, elastic=2, liveness=5)
    rank = job.rank_on(HOST_ADDRESS[3])
    at = cut(testbed, 3)
    ending = Ending(testbed, 3, 20)
    proc = job.wait()
    assert proc.returncode == 0, fail_msg(proc)
    (lost,) = job.events('lost')
    assert (lost['rank'], lost['host'], lost['left']) == (rank, '198.18.0.4', 2), lost
    assert 'TCP keepalive probe' in lost['why'] and '=5)' in lost['why'], lost
    check_survivors(job, proc, rank)
    assert re.search(r'job finished: 4 of 5 processes exited with code 0; lost worker #2 '
                     r'\(exited with code 255 \(ssh could not connect to 198\.18\.0\.4, or '
                     r'the connection broke\)', proc.stderr), fail_msg(proc)
    assert re.search(r'scheduler: every worker of the job has ended \(elastic', proc.stderr), \
        fail_msg(proc)
    detected = lost['time'] - at
    # the cut-off worker, its connections to the scheduler and the server silent, ended too
    ending.join(max(0.0, at + 20 - time.monotonic()))
    gone = ending.at
    record('elastic partition', bound=5, detected_s=round(detected, 2),
           launcher_exit_s=round(job.ended - at, 2),
           cut_off_worker_ended_s=None if gone is None else round(gone - at, 2))
    assert 3.0 <= detected <= 6.5, detected
    assert gone is not None, ('the cut-off worker still runs 20 s after the cut',
                              job_processes(testbed, 3))


@pytest.mark.parametrize('elastic', [None, pytest.param(2, marks=pytest.mark.slow)])
def test_a_partitioned_server_host_fails_the_job_naming_it(testbed, tmp_path, elastic):
    """MXNET_SSP_LIVENESS_TIMEOUT=5: host1 (server #0, the controller, worker #0) is cut off;
    the workers on host2 and host3 fail within the bound naming 198.18.0.2 (their
    connection to the controller, or to the server, went silent), and the launcher stops
    the job.  Elastic mode too: a job cannot lose a server."""
    job = Job(testbed, tmp_path, iters=400, liveness=5, elastic=elastic)
    job.rank_on(HOST_ADDRESS[3])
    at = cut(testbed, 1)
    proc = job.wait()
    assert proc.returncode == 1, fail_msg(proc)
    named = re.findall(r'(?:the controller on 198\.18\.0\.2 sent nothing, not even the answer '
                       r'to a TCP keepalive probe, for [\d.]+ s while this worker waited|'
                       r'on its connection\(s\) to 198\.18\.0\.2:\d+ \(silent [\d.]+ s\))',
                       proc.stderr)
    assert named, fail_msg(proc)
    assert '(MXNET_SSP_LIVENESS_TIMEOUT=5)' in proc.stderr or \
        'liveness bound (MXNET_SSP_LIVENESS_TIMEOUT=5 s)' in proc.stderr, fail_msg(proc)
    assert re.search(r'worker #[12] \(launch index\) on 198\.18\.0\.[34] \(local ssh pid \d+\) '
                     r'exited with code 1 — stopping the job', proc.stderr), fail_msg(proc)
    ended = job.ended - at
    record('%s server partition' % ('elastic' if elastic else 'fail-fast'), bound=5, launcher_exit_s=round(ended, 2),
           named_by=sorted({'client' if 'controller on' in n else 'follow' for n in named}),
           silent_s=[float(x) for x in re.findall(r'(?:for|silent) ([\d.]+) s', ' '.join(named))])
    assert 3.0 <= ended <= 12, ended


@pytest.mark.slow     # keeps the default run of this file under 90 s
def test_elastic_a_worker_host_whose_processes_all_die_is_lost_at_once_by_name(
        testbed, tmp_path):
    """--elastic 2: every process of host3 is killed at once (its sshd too).  Its kernel
    closes the connections, so the controller drops the rank at once, naming 198.18.0.4; the
    survivors finish with each push of theirs applied once and name the host; the launcher
    counts worker #2 lost (its ssh session broke) and returns 0."""
    job = Job(testbed, tmp_path, iters=60, elastic=2)
    rank = job.rank_on(HOST_ADDRESS[3])
    at = kill_host(testbed, 3)
    proc = job.wait()
    assert proc.returncode == 0, fail_msg(proc)
    (lost,) = job.events('lost')
    assert (lost['rank'], lost['host'], lost['left']) == (rank, '198.18.0.4', 2), lost
    assert re.fullmatch(r'worker %d disconnected at clock \d+ without leaving \(process died\?\); '
                        r'it ran on 198\.18\.0\.4' % rank, lost['why']), lost
    check_survivors(job, proc, rank)
    assert re.search(r'lost worker #2 \(exited with code 255 \(ssh could not connect to '
                     r'198\.18\.0\.4, or the connection broke\)', proc.stderr), fail_msg(proc)
    detected = lost['time'] - at
    record('elastic host processes killed', detected_s=round(detected, 2),
           launcher_exit_s=round(job.ended - at, 2))
    assert detected < 2, detected


@pytest.mark.slow     # keeps the default run of this file under 90 s
def test_elastic_under_mxnets_stock_launch_py_every_process_ends_when_a_host_is_cut_off(
        testbed, tmp_path):
    """MXNet's stock tools/launch.py over ssh (the scheduler on host0, the server alone on
    host1, the workers on host2 and host3), MXNET_SSP_ELASTIC=1, bound 5 s: host3 is cut
    off.  The controller drops its worker; the survivor finishes, every push of its applied
    once; the cut-off worker ends by itself; the server and the scheduler end by themselves,
    the cut-off worker's connections counting as closed once silent; and the launcher, which
    waits for its scheduler only (its ssh sessions run on daemon threads), returns 0 with
    it.  What it leaves: its ssh client to the cut-off host, which has no keepalive, runs
    on, orphaned (recorded here; the testbed's ``down`` ends it)."""
    job = Job(testbed, tmp_path, iters=60, elastic=1, liveness=5, stock=True)
    rank = job.rank_on(HOST_ADDRESS[3])
    at = cut(testbed, 3)
    ending = Ending(testbed, 3, 20)
    job.until('the scheduler\'s end', lambda: 'mxnet-ssp: scheduler: ' in job.output()[1])
    ended = time.monotonic()
    try:
        job.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    returned = None if job.proc.poll() is None else time.monotonic()
    left = subprocess.run(['pgrep', '-a', '-g', str(job.proc.pid)], capture_output=True,
                          text=True).stdout.splitlines()
    job.kill()
    job.proc.wait()
    out, err = job.output()
    proc = subprocess.CompletedProcess(job.proc.args, job.proc.returncode, out, err)
    assert returned is not None, ('the launcher did not return within 30 s of its '
                                  'scheduler', left, err[-3000:])
    assert proc.returncode == 0, fail_msg(proc)
    (lost,) = job.events('lost')
    assert (lost['rank'], lost['host'], lost['left']) == (rank, '198.18.0.4', 1), lost
    check_markers(job, [1 - rank], rank)
    assert re.search(r'worker\[%d\] dist_ssp elastic: finished at clock %d; lost worker %d at '
                     r'clock \d+ \([\d.]+ s after the controller started\) on 198\.18\.0\.4'
                     % (1 - rank, job.iters, rank), proc.stderr), fail_msg(proc)
    assert re.search(r'scheduler: every worker of the job has ended \(elastic', proc.stderr), \
        fail_msg(proc)
    assert re.search(r'server \(pid \d+\): no worker has been connected for [\d.]+ s '
                     r'\(elastic mode', proc.stderr), fail_msg(proc)
    ending.join(max(0.0, at + 20 - time.monotonic()))
    record('elastic partition, stock launch.py', bound=5, detected_s=round(lost['time'] - at, 2),
           scheduler_ended_s=round(ended - at, 2), launcher_returned_s=round(returned - at, 2),
           left_behind=[line.split(None, 1)[1][:80] for line in left],
           cut_off_worker_ended_s=None if ending.at is None else round(ending.at - at, 2))
    assert 3.0 <= lost['time'] - at <= 6.5, lost['time'] - at
    assert ending.at is not None, job_processes(testbed, 3)
