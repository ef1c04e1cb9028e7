"""Running the processes of a job and stopping all of them when one fails.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import collections
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .settings import (EXIT_FAILED, EXIT_TIMEOUT, FINISH_TIMEOUT, KILL_GRACE, say)


@dataclass
class Spec:
    """One process the launcher starts."""
    role: str                  # scheduler, server or worker
    index: int                 # launch index within the role (not the ps-lite rank)
    argv: list
    env: dict = None           # full environment for Popen; None = inherit
    host: str = None           # ssh: the remote host; slurm: the node
    stdin_pipe: bool = False   # ssh: keep a pipe on stdin so the remote side sees EOF if we die
    mpirun: int = 0            # mpi: this is one mpirun starting that many processes of the role
    restart: object = None     # --max-restarts: the Spec of this worker's replacement
    via: str = 'ssh'           # with a host: the local program that runs it there (ssh, srun)

    def label(self):
        if self.mpirun:
            return '%ss (mpirun of %d)' % (self.role, self.mpirun)
        if self.role == 'scheduler':
            return 'scheduler'
        return '%s #%d' % (self.role, self.index)

    def describe(self, pid):
        if self.mpirun:
            return '%ss (mpirun of %d; pid %d)' % (self.role, self.mpirun, pid)
        if self.role == 'scheduler':
            return 'scheduler (pid %d)' % pid
        if self.host:
            return '%s #%d (launch index) on %s (local %s pid %d)' % (
                self.role, self.index, self.host, self.via, pid)
        return '%s #%d (launch index; pid %d)' % (self.role, self.index, pid)


def live_processes():
    """(pid, ppid, sid) of every live (not zombie) process, read from /proc; None where
    there is no /proc."""
    try:
        names = os.listdir('/proc')
    except OSError:
        return None
    if 'self' not in names:
        return None
    out = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name, 'rb') as f:
                data = f.read()
            fields = data[data.rindex(b')') + 2:].split()   # state ppid pgrp session ...
            state, ppid, sid = fields[0], int(fields[1]), int(fields[3])
        except (OSError, ValueError, IndexError):
            continue
        if state not in (b'Z', b'X'):
            out.append((int(name), ppid, sid))
    return out


def session_pids(sids):
    """{sid: [pid, ...]}: the running (not zombie) processes of the sessions `sids`.

    Read from /proc; None where there is no /proc (then only process groups
    are used to find a job's processes).
    """
    processes = live_processes()
    if processes is None:
        return None
    out = {sid: [] for sid in sids}
    for pid, _, sid in processes:
        if sid in out:
            out[sid].append(pid)
    return out


@dataclass(eq=False)          # hashable by identity
class _Proc:
    spec: Spec
    popen: subprocess.Popen
    rc: int = None
    thread: threading.Thread = field(default=None, repr=False)

    @property
    def pid(self):
        return self.popen.pid


def describe_exit(rc, spec=None):
    """'exited with code 3' or 'was killed by signal SIGKILL'."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = 'signal %d' % -rc
        return 'was killed by signal %s' % name
    text = 'exited with code %d' % rc
    if spec is not None and spec.host and spec.via == 'srun':
        if rc > 128:
            try:
                text += " (srun's code for its task killed by signal %s)" % (
                    signal.Signals(rc - 128).name)
            except ValueError:
                pass
    elif spec is not None and spec.host:
        if rc == 255:
            text += ' (ssh could not connect to %s, or the connection broke)' % spec.host
        elif rc > 128:
            try:
                text += ' (the remote shell\'s code for signal %s)' % signal.Signals(rc - 128).name
            except ValueError:
                pass
    return text


class Supervisor:
    """Start processes, watch them, stop them all when one fails or we are signalled.

    Every process is started as the leader of a new session (so of its own
    process group too); stopping it means SIGTERM to everything running in
    that session, then SIGKILL after `grace` seconds (see :meth:`_stop_all`).
    Waiting is event driven: one thread per child blocks in ``wait()`` and
    writes a byte to a pipe; signals reach the same pipe through
    :func:`signal.set_wakeup_fd`; the main thread blocks in ``select``.

    With ``min_workers`` >= 1 (elastic mode, ``--elastic``) a worker that fails is *lost*,
    not the end of the job, while at least ``min_workers`` workers have not failed; the job
    then succeeds (exit 0) when every process ended, no scheduler or server failed and at
    least ``min_workers`` workers exited 0, and the last line names each lost worker.  With
    ``restarts`` (``--max-restarts``) a lost worker whose Spec has a ``restart`` is started
    again ``restart_delay`` seconds after it died (once ps-lite's scheduler counts it dead),
    at most ``restarts`` times in the job, while some other worker still runs.
    """

    SIGNALS = ('SIGINT', 'SIGTERM', 'SIGHUP')

    def __init__(self, specs, timeout=None, finish_timeout=FINISH_TIMEOUT, grace=KILL_GRACE,
                 stream=None, min_workers=0, restarts=0, restart_delay=None):
        self.specs = list(specs)
        self.min_workers = min_workers
        self.restarts_left = restarts
        self.restart_delay = restart_delay or 0.0
        self._pending = []             # (due, lost proc): restarts waiting for their time
        self.rejoined = []             # (lost proc, its replacement)
        self.lost = []                 # elastic: (proc, seconds after the start) per lost worker
        self._started = None
        self.timeout = timeout
        self.finish_timeout = finish_timeout
        self.grace = grace
        self.stream = stream
        self.procs = []
        #: what ended the job when one of its processes failed (the line's cause, e.g.
        #: 'server #0 (launch index; pid 12) was killed by signal SIGKILL'), and that
        #: process; None when the job ended otherwise (success, signal, --timeout)
        self.failure = self.failed = None
        self._exits = collections.deque()
        self._rfd = self._wfd = None
        self._signals = []

    def _say(self, msg):
        say(msg, self.stream)

    # -- events -------------------------------------------------------------
    def _waiter(self, proc):
        rc = proc.popen.wait()
        self._exits.append((proc, rc))
        try:
            os.write(self._wfd, b'\0')
        except OSError:
            pass

    def _read_events(self, timeout):
        """Wait up to `timeout` seconds (None: forever) for events; collect them."""
        try:
            ready, _, _ = select.select([self._rfd], [], [], timeout)
        except InterruptedError:         # pragma: no cover - PEP 475 retries
            ready = [self._rfd]
        if ready:
            try:
                data = os.read(self._rfd, 4096)
            except BlockingIOError:
                data = b''
            self._signals.extend(b for b in data if b)
        exited = []
        while self._exits:
            proc, rc = self._exits.popleft()
            proc.rc = rc
            exited.append(proc)
        return bool(ready), exited

    def _install_signals(self):
        self._old = {}
        if threading.current_thread() is not threading.main_thread():
            return
        self._old['wakeup'] = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
        for name in self.SIGNALS:
            signum = getattr(signal, name, None)
            if signum is not None:
                self._old[signum] = signal.signal(signum, lambda *a: None)

    def _restore_signals(self):
        for key, old in self._old.items():
            if key == 'wakeup':
                signal.set_wakeup_fd(old)
            else:
                signal.signal(key, old)
        self._old = {}

    # -- running ------------------------------------------------------------
    def run(self):
        """Run the job; return the launcher's exit code."""
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._install_signals()
        try:
            code = self._start()
            if code is None:
                code = self._watch()
            return code
        finally:
            try:
                self._stop_all()
            except BaseException:
                for p in self.procs:          # never leave the job running
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
                raise
            finally:
                self._restore_signals()
                os.close(self._rfd)
                os.close(self._wfd)

    def _start(self):
        self._started = time.monotonic()
        for spec in self.specs:
            _, exited = self._read_events(0)      # a process may die before the last starts
            code = self._check(exited)
            if code is not None:
                return code
            try:
                self._spawn(spec)
            except OSError as err:
                self._say('cannot start %s: %s — stopping the job' % (spec.label(), err))
                return EXIT_FAILED
        return None

    def _spawn(self, spec):
        popen = subprocess.Popen(spec.argv, env=spec.env, start_new_session=True,
                                 stdin=subprocess.PIPE if spec.stdin_pipe else None)
        proc = _Proc(spec, popen)
        proc.thread = threading.Thread(target=self._waiter, args=(proc,), daemon=True,
                                       name='wait-%s-%d' % (spec.role, spec.index))
        self.procs.append(proc)
        proc.thread.start()
        return proc

    def _start_due(self, now, final=False):
        """Start the restarts whose time has come (`final`: the job is over, start none)."""
        due = [(t, p) for t, p in self._pending if final or t <= now]
        self._pending = [(t, p) for t, p in self._pending if not (final or t <= now)]
        for _, lost in due:
            others = [p for p in self._workers() if p.rc is None]
            if final or not others:
                self._say('not restarting %s: no worker is left to rejoin' % lost.spec.label())
                continue
            try:
                proc = self._spawn(lost.spec.restart)
            except OSError as err:
                self._say('cannot restart %s: %s — the job goes on without it'
                          % (lost.spec.label(), err))
                continue
            self.rejoined.append((lost, proc))
            self._say('restarted %s as %s to rejoin the job'
                      % (lost.spec.label(), proc.spec.describe(proc.pid)))

    def _check(self, exited):
        """Exit code if the job must stop now (signal or failure), else None."""
        if self._signals:
            signum = self._signals[0]
            try:
                name = signal.Signals(signum).name
            except ValueError:
                name = 'signal %d' % signum
            self._say('received %s — stopping the job' % name)
            return 128 + signum
        for proc in exited:
            if proc.rc != 0:
                if self._lose(proc):
                    continue
                self.failure = '%s %s' % (proc.spec.describe(proc.pid),
                                          describe_exit(proc.rc, proc.spec))
                self.failed = proc
                self._say('%s — stopping the job' % self.failure)
                return EXIT_FAILED
        return None

    def _workers(self):
        return [p for p in self.procs if p.spec.role == 'worker']

    def _lose(self, proc):
        """Elastic mode: whether the job goes on without failed worker `proc` (said)."""
        if not self.min_workers or proc.spec.role != 'worker' or proc.spec.mpirun:
            return False
        specs = [s for s in self.specs if s.role == 'worker']
        latest = {p.spec.index: p for p in self._workers()}     # each worker's last process
        failed = [p for p in latest.values() if p.rc not in (None, 0)]
        if len(specs) - len(failed) < self.min_workers:
            return False
        self.lost.append((proc, time.monotonic() - self._started))
        self._say('%s %s — elastic: %d of %d workers go on (at least %d needed)'
                  % (proc.spec.describe(proc.pid), describe_exit(proc.rc, proc.spec),
                     len(specs) - len(failed), len(specs), self.min_workers))
        if self.restarts_left > 0 and proc.spec.restart is not None:
            self.restarts_left -= 1
            self._pending.append((time.monotonic() + self.restart_delay, proc))
            self._say('restarting %s in %g s (once ps-lite counts it dead); %d restart(s) '
                      'left' % (proc.spec.label(), self.restart_delay, self.restarts_left))
        return True

    def _finished(self):
        """The line of a job whose processes all ended (elastic: naming the lost workers)."""
        if not self.lost:
            return 'all %d processes exited with code 0' % len(self.procs)
        rejoined = ''.join('; %s rejoined (pid %d, %s)' % (new.spec.label(), new.pid,
                                                          describe_exit(new.rc, new.spec))
                           for _, new in self.rejoined)
        return ('job finished: %d of %d processes exited with code 0; lost %s%s'
                % (sum(p.rc == 0 for p in self.procs), len(self.procs),
                   ', '.join('%s (%s %.1f s after the start)'
                             % (p.spec.label(), describe_exit(p.rc, p.spec), t)
                             for p, t in self.lost), rejoined))

    def _watch(self):
        start = time.monotonic()
        deadline = start + self.timeout if self.timeout else None
        finish_deadline = None
        while True:
            running = [p for p in self.procs if p.rc is None]
            if not running:
                self._start_due(time.monotonic(), final=True)
                self._say(self._finished())
                return 0
            now = time.monotonic()
            self._start_due(now)
            limits = [d for d in (deadline, finish_deadline) if d is not None]
            limits += [t for t, _ in self._pending]
            wait = max(0.0, min(limits) - now) if limits else None
            ready, exited = self._read_events(wait)
            code = self._check(exited)
            if code is not None:
                return code
            workers = self._workers()
            lost = {p for p, _ in self.lost}
            if finish_deadline is None and not self._pending and \
                    all(p.rc == 0 or p in lost for p in workers):
                finish_deadline = time.monotonic() + self.finish_timeout
            now = time.monotonic()
            if ready or exited:
                continue
            running = [p for p in self.procs if p.rc is None]
            if deadline is not None and now >= deadline:
                self._say('job still running after %g s (--timeout): %s — stopping the job'
                          % (self.timeout, ', '.join(p.spec.describe(p.pid) for p in running)))
                return EXIT_TIMEOUT
            if finish_deadline is not None and now >= finish_deadline and running:
                self._say('all workers exited with code 0 but %s still running %g s later '
                          '— stopping it' % (', '.join(p.spec.describe(p.pid) for p in running),
                                             self.finish_timeout))
                return EXIT_FAILED

    # -- stopping -----------------------------------------------------------
    @staticmethod
    def _signal(proc, members, signum):
        """Send `signum` to `proc`'s process group and to the members of its session
        outside that group (each process gets it once); True if any was sent."""
        sent = False
        targets = [(os.killpg, proc.pid)]
        for pid in members:
            try:
                if os.getpgid(pid) != proc.pid:
                    targets.append((os.kill, pid))
            except OSError:
                pass
        for kill, target in targets:
            try:
                kill(target, signum)
                sent = True
            except (ProcessLookupError, PermissionError):
                pass
        return sent

    def _leftovers(self, procs):
        """{proc: [pids]} of `procs` whose session (or, without /proc, group) still has
        running processes: the child itself or descendants that stayed in its session,
        such as Open MPI's ranks, which mpirun puts in process groups of their own."""
        sessions = session_pids({p.pid for p in procs})
        if sessions is None:
            return {p: [] for p in procs if p.rc is None or self._signal(p, (), 0)}
        return {p: sessions[p.pid] for p in procs if p.rc is None or sessions.get(p.pid)}

    def _wait_children(self, deadline):
        """Wait for the direct children until `deadline`; False if a signal came."""
        while any(p.rc is None for p in self.procs):
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            nsig = len(self._signals)
            self._read_events(left)
            if len(self._signals) > nsig:      # a second Ctrl-C: no more grace
                return False
        return True

    def _wait_leftovers(self, procs, deadline):
        """Poll until no process is left in the sessions of `procs` or `deadline`."""
        left = self._leftovers(procs)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = self._leftovers(left)
        return left

    def _stop_all(self):
        """Stop every process of the job still running.

        Each child was started as the leader of a new session; everything
        still running in those sessions gets SIGTERM (to the process group and
        to each session member; an ssh child instead gets EOF on its stdin,
        see :func:`remote_script`), then SIGKILL if still there after the
        grace, or at once if another signal comes meanwhile.  Processes a
        finished job left behind in its sessions are stopped the same way.
        """
        if not self.procs:
            return
        targets = self._leftovers(self.procs)
        if not targets:
            return
        for p, members in targets.items():
            if p.popen.stdin is not None and p.rc is None:
                # ssh: EOF on its stdin makes the remote script stop the command (SIGTERM,
                # SIGKILL after REMOTE_GRACE) and exit, so ssh ends once the remote side is gone
                self._close_stdin(p)
            else:
                self._signal(p, members, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        patient = self._wait_children(deadline)
        # descendants left in the sessions (mpirun's ranks, a shell's children) get the rest
        left = self._wait_leftovers(targets, deadline if patient else 0)
        killed = [p for p, members in left.items() if self._signal(p, members, signal.SIGKILL)]
        if killed:
            why = ('still running %g s after SIGTERM' % self.grace if patient
                   else 'signalled again while stopping')
            self._say('sent SIGKILL to %s (%s)' % (', '.join(p.spec.label() for p in killed), why))
        self._wait_children(time.monotonic() + 10.0)
        self._wait_leftovers(killed, time.monotonic() + 5.0)
        for p in self.procs:
            self._close_stdin(p)

    @staticmethod
    def _close_stdin(proc):
        if proc.popen.stdin is not None:
            try:
                proc.popen.stdin.close()
            except OSError:
                pass
