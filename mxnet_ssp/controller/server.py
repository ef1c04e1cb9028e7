"""The synchronization controller: a TCP service that says when workers may go on.

One :class:`ControllerServer` runs per job, as a daemon thread inside one
MXNet server process.  Each worker rank connects with
:class:`mxnet_ssp.controller.client.ControllerClient`, authenticates with the job's
shared secret, and after each of its pushes sends CLOCK and blocks until the
server sends RELEASE.  The decisions come from a
:class:`mxnet_ssp.core.sync.SyncPolicy`; this module only moves its events and
releases over the network, enforces the protocol
(:mod:`mxnet_ssp.controller.protocol`) and turns every fault into a job failure whose
message names the rank responsible.  Sockets, framing and the event loop are
:class:`mxnet_ssp.controller.transport.FrameServer`'s; this class implements its hooks, with
the handling of faults in :class:`mxnet_ssp.controller.server_faults.ServerFaults`.

Contracts
---------
* :meth:`ControllerServer.start` binds and returns at once; everything else
  happens on one daemon thread using ``selectors`` with non-blocking
  sockets.  That thread is the only caller of the policy, so the policy must
  not be touched by anyone else while the server runs.
* :meth:`~ControllerServer.stop`, :attr:`~ControllerServer.address` and
  :attr:`~ControllerServer.failure` may be called from any thread.
  :meth:`~ControllerServer.stop` blocks until the thread has ended
  (normally milliseconds) and is idempotent.
* Times are seconds on the server's ``clock`` (``time.monotonic`` by
  default).  A push is stamped when its CLOCK message is handled; that
  stamp is what :meth:`SyncPolicy.on_push` receives.
* Faults of an *authenticated* worker fail the job: it disconnects without
  LEAVE, sends a malformed or out-of-order message, or a held worker waits
  longer than ``timeout`` for the slowest ones.  The first such message is
  kept in :attr:`~ControllerServer.failure`, logged, written to the metrics
  and sent as ERROR to every connected worker; later CLOCKs get the same
  ERROR.  The server keeps running until stopped.
* With ``on_failed``, once the job failed and every worker's connection
  has closed (each read its ERROR and ended), or ``drain`` seconds after the
  failure if some never close (a stopped process), ``on_failed(message)``
  is called once, on the server thread: how the process hosting the
  controller learns that the job is over
  (:func:`mxnet_ssp.ps.job_watch.controller_failed`).
* Elastic mode (``min_workers`` >= 1): an authenticated worker whose connection ends
  without LEAVE is *lost*, not a failure: it is dropped as if it had left (the slowest clock
  and DSSP's predictions go on with the others, a worker held for it is released at once),
  logged, written to the metrics, sent to the connected workers (LOST) and listed in the
  BYE every later LEAVE gets.  The job fails only when fewer than ``min_workers`` workers
  are not lost.  A lost rank may connect again (a replacement that ps-lite gave the dead
  worker's rank): it is back in the job at the slowest clock of the others, told with
  REJOINED right after WELCOME.  Every other fault (malformed messages, a stall) still
  fails the job.
* A barrier (BARRIER, any mode): a worker waits until every worker neither lost nor left
  sent one, then all get PASSED.  It fails the job when none of the workers it waits for
  has pushed or arrived for ``timeout`` seconds.  A worker at the barrier may not push.
* Lost hosts (``liveness`` > 0): TCP keepalive is on for every authenticated worker's
  connection (:mod:`mxnet_ssp.core.liveness`), and every
  :data:`~mxnet_ssp.controller.server_faults.LOOK_S` seconds the server reads from the
  kernel how long each has been silent (nothing received, not even the answer to a probe,
  which the worker's kernel gives whatever its process does).  A
  connection silent for ``liveness`` seconds leads to a host that is down or cut off: the
  worker is handled as one whose connection ended without LEAVE (fail-fast: the job fails
  naming its rank and host; elastic: it is lost), and the connection is closed.
* Faults of an *unauthenticated* peer (garbage, bad lengths, wrong secret,
  wrong or duplicate rank, no HELLO within ``auth_timeout``) only close that
  connection; such a peer never reaches the policy.

Metrics
-------
With ``metrics_path`` the server writes one JSON object per line and flushes
after each line; the file is started afresh at each start (one job's records, never
appended across jobs).  All ``time`` fields are the server's clock in seconds;
``rank`` and ``clock`` are the worker and its push count.

``{"event": "connect", "rank", "time", "host"}``
    A worker authenticated (from address ``host``).
``{"event": "push", "rank", "clock", "time", "lead", "t_slowest", "decision", "granted"}``
    A CLOCK was handled.  ``decision`` is ``"ok"`` (released at once) or
    ``"wait"`` (held); ``lead`` and ``t_slowest`` are those at the decision
    (at release if ok); ``granted`` is r* of Algorithm 2 (0 if not called).
``{"event": "release", "rank", "clock", "time", "waited_s", "lead", "t_slowest", "by"}``
    A held worker was released after ``waited_s`` seconds, because of a push
    or leave of worker ``by``.
``{"event": "leave", "rank", "clock", "time"}``
    A worker finished.
``{"event": "rejoin", "rank", "clock", "time"}``
    Elastic mode: a lost rank connected again and starts at ``clock``.
``{"event": "lost", "rank", "clock", "time", "after_s", "left", "host", "why"}``
    Elastic mode: a worker's connection ended without LEAVE, or stayed silent for the
    liveness bound, at its clock ``clock``, ``after_s`` seconds after the controller
    started; ``left`` workers are neither lost nor finished; ``host``: the worker's
    address; ``why``: the message that says what was seen.
``{"event": "barrier", "rank", "clock", "time"}`` and ``{"event": "passed", "ranks", "time"}``
    A worker arrived at the barrier; the barrier passed for `ranks`.
``{"event": "failure", "time", "message"}``
    The job failed; ``message`` is the text sent to the workers.
"""
import json
import logging
import time

from . import protocol as P
from ..core.agreement import differences, mismatch_message
from .protocol import ControllerError
from . import liveness as live
from .server_faults import ServerFaults
from .transport import LEFT, READY, FrameServer
from ..core.liveness import MIN_BOUND, SilenceWatch

__all__ = ['ControllerServer', 'ControllerError']

log = logging.getLogger(__name__)


class ControllerServer(ServerFaults, FrameServer):
    """Serve one job's synchronization decisions over TCP.

    Parameters
    ----------
    policy : mxnet_ssp.core.sync.SyncPolicy
        Decision state; owned by the server thread from :meth:`start` on.
    secret : bytes
        Shared job secret (non-empty); workers prove they know it.
    host : str
        Interface to listen on.
    port : int
        TCP port; 0 picks a free one (see :attr:`address`).
    timeout : float
        Seconds a worker may be held before the job fails naming the
        slowest workers.
    metrics_path : str, optional
        JSON Lines file to append to (see the module docstring).
    clock : callable
        Monotonic seconds; used for push stamps and all timeouts.
    auth_timeout : float
        Seconds a new connection has to authenticate.
    max_pending : int
        Unauthenticated connections kept at most; more are refused.
    on_failed : callable, optional
        ``on_failed(message)`` once the job failed and the workers hung up (see
        Contracts).
    drain : float
        Seconds after a failure that ``on_failed`` waits at most for them: the
        ERROR sent to a worker must not be lost in a connection reset because
        the process hosting the controller ended first.
    min_workers : int
        0: fail-fast (a worker that disconnects without LEAVE fails the job).  n >= 1:
        elastic mode, the job goes on while at least n workers are not lost (Contracts).
    agree : dict, optional
        The job's settings that every worker must share (:func:`mxnet_ssp.config.job_settings`):
        ``{"rank", "host", "settings": {name: [value, origin]}}`` of the worker whose
        request started the controller.  A worker whose HELLO carries other values fails
        the job before its first step, with a message naming each setting, both values and
        where they came from, and both workers.  None: the first HELLO with settings sets
        them.  A HELLO without settings (an mxnet-ssp that sends none) is not compared.
    liveness : float
        0: off.  Else seconds (>= 2) a worker's connection may stay silent before its host
        counts as lost (Contracts).
    """

    def __init__(self, policy, secret, host='127.0.0.1', port=0, timeout=300.0,
                 metrics_path=None, clock=time.monotonic, auth_timeout=5.0, max_pending=64,
                 on_failed=None, drain=5.0, min_workers=0, agree=None, liveness=0.0):
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError('secret must be non-empty bytes')
        if not timeout > 0:
            raise ValueError('timeout must be > 0 seconds, got %r' % (timeout,))
        super().__init__(host, port, clock, auth_timeout, max_pending, secret)
        self.policy = policy
        self.timeout = float(timeout)
        if not 0 <= min_workers <= policy.num_workers:
            raise ValueError('min_workers must be in 0..%d, got %r'
                             % (policy.num_workers, min_workers))
        self.min_workers = int(min_workers)
        if liveness and not (live.SUPPORTED and liveness >= MIN_BOUND):
            if liveness < MIN_BOUND:
                raise ValueError('liveness must be 0 (off) or >= %g seconds, got %r'
                                 % (MIN_BOUND, liveness))
            log.warning('controller: this system cannot read TCP keepalive state; a lost '
                        'host will be seen as a stall')
            liveness = 0.0
        self.liveness = float(liveness)
        self._silence = SilenceWatch(self.liveness) if self.liveness else None
        self._next_look = None
        self._lost = []                        # elastic: {"rank", "clock", "after_s"}, in order
        self._gone = set()                     # elastic: ranks lost and not back
        self._barrier = {}                     # rank -> Conn waiting at the barrier
        self._barrier_progress = None          # last push or arrival while some wait
        self._started_at = clock()
        self._metrics_path = metrics_path
        self._failure = None
        self._failed_at = None                 # when the job failed (server clock)
        self._on_failed = on_failed            # called once the workers hung up (Contracts)
        self.drain = float(drain)
        self._metrics = None
        self._connected_at = {}                # rank -> time of first WELCOME
        self._left = set()
        self._held = {}                        # rank -> time its CLOCK was handled
        self._agree = None                     # (who, settings) every worker must match
        if agree:
            self._agree = ('worker %s on host %s' % (agree.get('rank', '?'),
                                                     agree.get('host', '?')),
                           dict(agree['settings']))

    # -- public API (and start, stop, address: FrameServer) ---------------------
    @property
    def failure(self):
        """None, or the first job-fatal error message."""
        return self._failure

    @property
    def lost(self):
        """Elastic mode: the workers lost so far (dicts ``rank``, ``clock``, ``after_s``)."""
        return [dict(x) for x in self._lost]

    def start(self):
        """Bind, start the server thread and return self (non-blocking).

        Raises
        ------
        ControllerError
            The address cannot be bound or the metrics file not opened.
        """
        super().start()
        log.info('synchronization controller listening on %s:%d for %d workers',
                 self._address[0], self._address[1], self.policy.num_workers)
        return self

    # -- FrameServer hooks -----------------------------------------------------
    def _on_start(self):
        if self._metrics_path is not None:
            try:
                self._metrics = open(self._metrics_path, 'w', encoding='utf-8')   # this job's only
            except OSError as exc:
                raise ControllerError('controller cannot open metrics file %s: %s'
                                      % (self._metrics_path, exc)) from exc

    def _on_internal_error(self, conn, exc):
        if conn.state == READY:
            who = 'worker %d' % conn.rank
            self._fail('controller internal error while serving %s at clock %d: %r'
                       % (who, self.policy.clocks[conn.rank], exc))

    def _on_crash(self, exc):
        self._fail('synchronization controller crashed: %r' % (exc,))
        self._report_failure()      # the loop is over: nobody will hang up any more

    def _next_deadline(self):
        if self._failed_at is not None:
            return self._failed_at + self.drain
        times = [t + self.timeout for t in self._held.values()]
        if self._barrier and self._failure is None:
            times.append(self._barrier_progress + self.timeout)
        if self._silence is not None and self._by_rank and self._failure is None:
            times.append(self._next_look)
        return min(times) if times else None

    def _goodbye(self):
        host, port = self._address
        return P.encode_error('synchronization controller at %s:%d stopped' % (host, port))

    def _on_stopped(self):
        self._close_metrics()

    def _check_deadlines(self, now):
        if self._failed_at is not None:
            # every worker told has hung up (ended), or the drain is over
            if not self._by_rank or now >= self._failed_at + self.drain:
                self._report_failure()
            return
        if self._held and self._failure is None:
            rank, since = min(self._held.items(), key=lambda kv: (kv[1], kv[0]))
            if now - since >= self.timeout:
                self._fail(self._stall_message(rank, since, now))
        if self._barrier and self._failure is None and \
                now - self._barrier_progress >= self.timeout:
            missing = sorted(self._live() - set(self._barrier))
            self._fail('worker(s) %s waited %.1f s at the barrier for worker(s) %s, which '
                       'neither pushed nor arrived meanwhile; timeout is %g s'
                       % (', '.join(map(str, sorted(self._barrier))),
                          now - self._barrier_progress, ', '.join(map(str, missing)),
                          self.timeout))
        if self._silence is not None and self._failure is None and self._by_rank and \
                now >= self._next_look:
            self._look(now)

    def _on_message(self, conn, payload):
        state = conn.state
        kind = payload[0]
        if state == READY:
            if kind == P.CLOCK:
                try:
                    t = P.decode_clock(payload)
                except P.ProtocolError as exc:
                    self._malformed(conn, str(exc))
                    return
                self._on_clock(conn, t)
            elif kind == P.LEAVE and len(payload) == 1:
                self._on_leave(conn)
            elif kind == P.BARRIER and len(payload) == 1:
                self._on_barrier(conn)
            else:
                self._malformed(conn, 'unexpected %s message (%d bytes)'
                                % (P.message_name(kind), len(payload)))
        else:   # LEFT: the worker is out of the job; whatever it sends cannot matter
            log.warning('controller: worker %d sent %s after LEAVE; closing its connection',
                        conn.rank, P.message_name(kind))
            self._close(conn)

    # -- handshake (the MAC is checked by FrameServer._on_hello) ------------------
    def _refusal(self, rank):
        nw = self.policy.num_workers
        if not 0 <= rank < nw:
            return 'rank %d is outside 0..%d (the job has %d workers)' % (rank, nw - 1, nw)
        other = self._by_rank.get(rank)
        if other is not None:
            return 'rank %d is already connected from %s' % (rank, other.describe())
        if rank in self._left:
            return 'worker %d already left the job' % rank
        if rank in self._gone and self.policy.t_slowest() is None:
            return 'worker %d was lost and no worker is left to rejoin' % rank
        if self._failure is not None:
            return 'the job already failed: ' + self._failure
        return None

    def _settings_refusal(self, conn, rank, settings):
        """A worker whose settings differ from the job's fails the job (class docstring)."""
        if settings is None:
            return None
        host, mine = settings
        who = 'worker %d on host %s (connected from %s)' % (rank, host, conn.describe())
        if self._agree is None:
            self._agree = ('worker %d on host %s' % (rank, host), dict(mine))
            return None
        job_who, job = self._agree
        names = differences(job, mine)
        if not names:
            return None
        message = mismatch_message(names, mine, who, job, job_who)
        self._fail(message)
        return message

    def _on_admitted(self, conn, rank):
        now = self._clock()
        self._connected_at.setdefault(rank, now)
        pol = self.policy
        self._send(conn, P.encode_welcome(pol.num_workers, pol.s_lower, pol.s_upper, pol.mode,
                                          self.timeout))
        if rank in self._gone:                 # elastic: a replacement of a lost worker
            clock = pol.t_slowest()
            self._gone.discard(rank)
            for rel in pol.on_join(rank, clock, now):
                self._release_held(rel, now, rank)
            self._send(conn, P.encode_rejoined(clock))
            self._send_losses(conn)
            self._watch(conn, now)
            log.warning('controller: worker %d rejoined from %s at clock %d (the slowest of '
                        'the others)', rank, conn.describe(), clock)
            self._metric({'event': 'rejoin', 'rank': rank, 'clock': clock, 'time': now})
            return
        self._send_losses(conn)
        self._watch(conn, now)
        log.info('controller: worker %d connected from %s', rank, conn.describe())
        self._metric({'event': 'connect', 'rank': rank, 'time': now, 'host': conn.peer[0]})

    def _send_losses(self, conn):
        """Elastic mode: every loss so far, one LOST each, right after WELCOME (and
        REJOINED), so a worker admitted after a loss knows the leader (the lowest rank never
        lost) from its first answer on, as the workers connected at the loss do.  (Without
        it, a worker slow to connect took rank 0 for the leader after worker 0 was lost, and
        nobody sent the learning rate or saved: issue 58.)"""
        for loss in self._lost:
            self._send(conn, P.encode_lost(loss))

    # -- job events ----------------------------------------------------------
    def _on_clock(self, conn, t):
        now = self._clock()
        rank = conn.rank
        if self._failure is not None:
            self._send(conn, P.encode_error(self._failure))
            return
        pol = self.policy
        current = pol.clocks[rank]
        if rank in self._held:
            self._fail('worker %d sent CLOCK %d while still waiting for the release of clock %d'
                       % (rank, t, current))
            return
        if rank in self._barrier:
            self._fail('worker %d sent CLOCK %d while waiting at the barrier' % (rank, t))
            return
        if self._barrier:
            self._barrier_progress = now
        if t != current + 1:
            self._fail('worker %d sent CLOCK %d but its clock is %d (expected CLOCK %d)'
                       % (rank, t, current, current + 1))
            return
        releases = pol.on_push(rank, now)
        own = None
        for rel in releases:
            if rel.rank == rank:
                own = rel
                self._send(conn, P.encode_release(rel))
            else:
                self._release_held(rel, now, rank)
        if own is None:
            self._held[rank] = now
        if self._metrics is not None:
            if own is not None:
                lead, slowest, decision, granted = own.lead, own.t_slowest, 'ok', own.granted
            else:
                lead, slowest, decision = pol.lead(rank), pol.t_slowest(), 'wait'
                granted = pol.waiting.get(rank, 0)
            self._metric({'event': 'push', 'rank': rank, 'clock': t, 'time': now,
                          'lead': lead, 't_slowest': slowest, 'decision': decision,
                          'granted': granted})

    def _release_held(self, rel, now, by):
        since = self._held.pop(rel.rank, now)
        conn = self._by_rank.get(rel.rank)
        if conn is not None:
            self._send(conn, P.encode_release(rel))
        self._metric({'event': 'release', 'rank': rel.rank, 'clock': rel.clock, 'time': now,
                      'waited_s': now - since, 'lead': rel.lead, 't_slowest': rel.t_slowest,
                      'by': by})

    def _on_leave(self, conn):
        now = self._clock()
        rank = conn.rank
        conn.state = LEFT
        self._left.add(rank)
        self._by_rank.pop(rank, None)
        self._held.pop(rank, None)
        self._barrier.pop(rank, None)
        log.info('controller: worker %d left at clock %d', rank, self.policy.clocks[rank])
        self._metric({'event': 'leave', 'rank': rank, 'clock': self.policy.clocks[rank],
                      'time': now})
        if self._failure is None:
            for rel in self.policy.on_leave(rank):
                self._release_held(rel, now, rank)
            self._check_barrier(now)
        self._send(conn, P.encode_bye(self._lost))

    def _live(self):
        """Ranks neither lost nor left."""
        return set(range(self.policy.num_workers)) - self._left - self._gone

    def _on_barrier(self, conn):
        now = self._clock()
        rank = conn.rank
        if self._failure is not None:
            self._send(conn, P.encode_error(self._failure))
            return
        if rank in self._held or rank in self._barrier:
            self._fail('worker %d sent BARRIER while %s' % (
                rank, 'held' if rank in self._held else 'already at the barrier'))
            return
        self._barrier[rank] = conn
        self._barrier_progress = now
        self._metric({'event': 'barrier', 'rank': rank, 'clock': self.policy.clocks[rank],
                      'time': now})
        self._check_barrier(now)

    def _check_barrier(self, now):
        """Pass the barrier if every live worker is at it."""
        if not self._barrier or not self._live() <= set(self._barrier):
            return
        waiting, self._barrier = self._barrier, {}
        for conn in waiting.values():
            self._send(conn, P.PASSED_FRAME)
        self._metric({'event': 'passed', 'ranks': sorted(waiting), 'time': now})

    # -- metrics -------------------------------------------------------------
    def _metric(self, record):
        if self._metrics is None:
            return
        try:
            self._metrics.write(json.dumps(record, separators=(',', ':')) + '\n')
            self._metrics.flush()
        except (OSError, ValueError) as exc:
            log.warning('controller: metrics disabled, cannot write %s: %s',
                        self._metrics_path, exc)
            self._close_metrics()

    def _close_metrics(self):
        if self._metrics is not None:
            try:
                self._metrics.close()
            except OSError:
                pass
            self._metrics = None
