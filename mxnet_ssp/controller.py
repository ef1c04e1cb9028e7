"""The synchronization controller: a TCP service that says when workers may go on.

One :class:`ControllerServer` runs per job, as a daemon thread inside one
MXNet server process.  Each worker rank connects with
:class:`mxnet_ssp.client.ControllerClient`, authenticates with the job's
shared secret, and after each of its pushes sends CLOCK and blocks until the
server sends RELEASE.  The decisions come from a
:class:`mxnet_ssp.sync.SyncPolicy`; this module only moves its events and
releases over the network, enforces the protocol
(:mod:`mxnet_ssp.protocol`) and turns every fault into a job failure whose
message names the rank responsible.

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
* Faults of an *unauthenticated* peer (garbage, bad lengths, wrong secret,
  wrong or duplicate rank, no HELLO within ``auth_timeout``) only close that
  connection; such a peer never reaches the policy.

Metrics
-------
With ``metrics_path`` the server appends one JSON object per line and flushes
after each line.  All ``time`` fields are the server's clock in seconds;
``rank`` and ``clock`` are the worker and its push count.

``{"event": "connect", "rank", "time"}``
    A worker authenticated.
``{"event": "push", "rank", "clock", "time", "lead", "t_slowest", "decision", "granted"}``
    A CLOCK was handled.  ``decision`` is ``"ok"`` (released at once) or
    ``"wait"`` (held); ``lead`` and ``t_slowest`` are those at the decision
    (at release if ok); ``granted`` is r* of Algorithm 2 (0 if not called).
``{"event": "release", "rank", "clock", "time", "waited_s", "lead", "t_slowest", "by"}``
    A held worker was released after ``waited_s`` seconds, because of a push
    or leave of worker ``by``.
``{"event": "leave", "rank", "clock", "time"}``
    A worker finished.
``{"event": "failure", "time", "message"}``
    The job failed; ``message`` is the text sent to the workers.
"""
import hmac
import json
import logging
import secrets
import selectors
import socket
import threading
import time

from . import protocol as P
from .protocol import ControllerError

__all__ = ['ControllerServer', 'ControllerError']

log = logging.getLogger(__name__)

_CHALLENGED, _READY, _LEFT = 'challenged', 'ready', 'left'
_RECV_BYTES = 65536


class _Conn:
    """One accepted connection (server-thread only)."""

    __slots__ = ('sock', 'peer', 'reader', 'wbuf', 'state', 'nonce', 'rank',
                 'deadline', 'close_when_flushed', 'closed')

    def __init__(self, sock, peer, nonce, deadline):
        self.sock = sock
        self.peer = peer
        self.reader = P.FrameReader()
        self.wbuf = b''
        self.state = _CHALLENGED
        self.nonce = nonce
        self.rank = None
        self.deadline = deadline
        self.close_when_flushed = False
        self.closed = False

    def describe(self):
        host, port = self.peer[:2]
        return '%s:%s' % (host, port)


class ControllerServer:
    """Serve one job's synchronization decisions over TCP.

    Parameters
    ----------
    policy : mxnet_ssp.sync.SyncPolicy
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
    """

    def __init__(self, policy, secret, host='127.0.0.1', port=0, timeout=300.0,
                 metrics_path=None, clock=time.monotonic, auth_timeout=5.0, max_pending=64):
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError('secret must be non-empty bytes')
        if not timeout > 0:
            raise ValueError('timeout must be > 0 seconds, got %r' % (timeout,))
        self.policy = policy
        self._secret = bytes(secret)
        self._host = host
        self._port = port
        self.timeout = float(timeout)
        self.auth_timeout = float(auth_timeout)
        self.max_pending = max_pending
        self._metrics_path = metrics_path
        self._clock = clock
        self._address = None
        self._failure = None
        self._thread = None
        self._stop_requested = False
        self._stopped = False
        self._lock = threading.Lock()
        # server-thread state
        self._sel = None
        self._listener = None
        self._wake_r = self._wake_w = None
        self._metrics = None
        self._conns = set()
        self._pending = set()                  # unauthenticated connections
        self._by_rank = {}                     # rank -> _Conn while connected
        self._connected_at = {}                # rank -> time of first WELCOME
        self._left = set()
        self._held = {}                        # rank -> time its CLOCK was handled

    # -- public API ----------------------------------------------------------
    @property
    def address(self):
        """``(host, port)`` actually bound; None before :meth:`start`."""
        return self._address

    @property
    def failure(self):
        """None, or the first job-fatal error message."""
        return self._failure

    def start(self):
        """Bind, start the server thread and return self (non-blocking).

        Raises
        ------
        ControllerError
            The address cannot be bound or the metrics file not opened.
        """
        with self._lock:
            if self._thread is not None or self._stopped:
                raise RuntimeError('ControllerServer.start() may be called once')
            try:
                listener = socket.create_server((self._host, self._port), backlog=128)
            except OSError as exc:
                raise ControllerError('controller cannot listen on %s:%s: %s'
                                      % (self._host, self._port, exc)) from exc
            try:
                if self._metrics_path is not None:
                    try:
                        self._metrics = open(self._metrics_path, 'a', encoding='utf-8')
                    except OSError as exc:
                        raise ControllerError('controller cannot open metrics file %s: %s'
                                              % (self._metrics_path, exc)) from exc
                listener.setblocking(False)
                self._wake_r, self._wake_w = socket.socketpair()
                self._wake_r.setblocking(False)
                self._wake_w.setblocking(False)
                self._sel = selectors.DefaultSelector()
                self._sel.register(listener, selectors.EVENT_READ, 'listen')
                self._sel.register(self._wake_r, selectors.EVENT_READ, 'wake')
            except BaseException:
                listener.close()
                self._close_resources()
                raise
            self._listener = listener
            self._address = listener.getsockname()[:2]
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name='mxnet-ssp-controller:%d' % self._address[1])
            self._thread.start()
        log.info('synchronization controller listening on %s:%d for %d workers',
                 self._address[0], self._address[1], self.policy.num_workers)
        return self

    def stop(self):
        """Close all connections and the listener and join the thread.

        Blocking, idempotent, callable from any thread.  Workers still in the
        job get an ERROR saying the controller stopped.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._stop_requested = True
            thread = self._thread
        if thread is None:
            return
        try:
            self._wake_w.send(b'x')
        except OSError:
            pass
        if thread is not threading.current_thread():
            thread.join()

    def __enter__(self):
        return self.start() if self._thread is None else self

    def __exit__(self, *exc):
        self.stop()

    # -- event loop ----------------------------------------------------------
    def _run(self):
        try:
            while not self._stop_requested:
                events = self._sel.select(self._select_timeout())
                for key, mask in events:
                    what = key.data
                    if what == 'listen':
                        self._accept()
                    elif what == 'wake':
                        self._drain_wake()
                    else:
                        self._on_event(what, mask)
                if self._pending or self._held:
                    self._check_deadlines()
        except Exception as exc:          # never take the hosting process down
            log.exception('synchronization controller crashed')
            self._fail('synchronization controller crashed: %r' % (exc,))
        finally:
            self._shutdown()

    def _on_event(self, conn, mask):
        try:
            if mask & selectors.EVENT_READ and not conn.closed:
                self._on_readable(conn)
            if mask & selectors.EVENT_WRITE and not conn.closed:
                self._flush(conn)
        except Exception as exc:
            log.exception('controller error while serving %s', conn.describe())
            who = 'worker %d' % conn.rank if conn.rank is not None else conn.describe()
            if conn.state == _READY:
                self._fail('controller internal error while serving %s at clock %d: %r'
                           % (who, self.policy.clocks[conn.rank], exc))
            self._close(conn)

    def _select_timeout(self):
        deadline = None
        if self._pending:
            deadline = min(c.deadline for c in self._pending)
        if self._held:
            held = min(self._held.values()) + self.timeout
            deadline = held if deadline is None else min(deadline, held)
        if deadline is None:
            return None
        return max(0.0, deadline - self._clock())

    def _check_deadlines(self):
        now = self._clock()
        for conn in [c for c in self._pending if c.deadline <= now]:
            log.warning('controller: closing connection from %s: no valid HELLO within %g s',
                        conn.describe(), self.auth_timeout)
            self._close(conn)
        if self._held and self._failure is None:
            rank, since = min(self._held.items(), key=lambda kv: (kv[1], kv[0]))
            if now - since >= self.timeout:
                self._fail(self._stall_message(rank, since, now))

    def _stall_message(self, rank, since, now):
        pol = self.policy
        parts = []
        for q in pol.slowest_ranks():
            if q not in self._connected_at:
                parts.append('worker %d (clock %d, never connected)' % (q, pol.clocks[q]))
            elif pol.stamps[q][0] is None:
                parts.append('worker %d (clock %d, connected %.1f s ago, no push yet)'
                             % (q, pol.clocks[q], now - self._connected_at[q]))
            else:
                parts.append('worker %d (clock %d, last push %.1f s ago)'
                             % (q, pol.clocks[q], now - pol.stamps[q][0]))
        return ('worker %d waited %.1f s at clock %d for %s; timeout is %g s'
                % (rank, now - since, pol.clocks[rank], ', '.join(parts) or 'nobody',
                   self.timeout))

    def _drain_wake(self):
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _accept(self):
        while True:
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning('controller: accept failed: %s', exc)
                return
            if len(self._pending) >= self.max_pending:
                log.warning('controller: refusing %s: %d connections are already '
                            'authenticating', peer, len(self._pending))
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            nonce = secrets.token_bytes(P.NONCE_BYTES)
            conn = _Conn(sock, peer, nonce, self._clock() + self.auth_timeout)
            self._conns.add(conn)
            self._pending.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)
            self._send(conn, P.encode_challenge(nonce))

    def _on_readable(self, conn):
        try:
            data = conn.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._on_eof(conn, str(exc))
            return
        if not data:
            self._on_eof(conn, 'end of stream')
            return
        if conn.close_when_flushed:       # refused; only waiting to deliver the ERROR
            return
        try:
            payloads = conn.reader.feed(data)
        except P.ProtocolError as exc:
            self._malformed(conn, str(exc))
            return
        for payload in payloads:
            if conn.closed:
                return
            self._on_message(conn, payload)

    def _on_message(self, conn, payload):
        state = conn.state
        kind = payload[0]
        if state == _READY:
            if kind == P.CLOCK:
                try:
                    t = P.decode_clock(payload)
                except P.ProtocolError as exc:
                    self._malformed(conn, str(exc))
                    return
                self._on_clock(conn, t)
            elif kind == P.LEAVE and len(payload) == 1:
                self._on_leave(conn)
            else:
                self._malformed(conn, 'unexpected %s message (%d bytes)'
                                % (P.message_name(kind), len(payload)))
        elif state == _CHALLENGED:
            self._on_hello(conn, payload)
        else:   # _LEFT: the worker is out of the job; whatever it sends cannot matter
            log.warning('controller: worker %d sent %s after LEAVE; closing its connection',
                        conn.rank, P.message_name(kind))
            self._close(conn)

    # -- handshake -----------------------------------------------------------
    def _on_hello(self, conn, payload):
        if payload[0] != P.HELLO:
            self._malformed(conn, 'expected HELLO, got %s' % P.message_name(payload[0]))
            return
        try:
            version, rank, mac = P.decode_hello(payload)
        except P.ProtocolError as exc:
            self._malformed(conn, str(exc))
            return
        if version != P.VERSION:
            self._refuse(conn, 'protocol version %d is not supported (controller speaks %d)'
                         % (version, P.VERSION))
            return
        if not hmac.compare_digest(mac, P.hello_mac(self._secret, conn.nonce, rank)):
            self._refuse(conn, 'authentication failed for rank %d: wrong secret' % rank)
            return
        nw = self.policy.num_workers
        if not 0 <= rank < nw:
            self._refuse(conn, 'rank %d is outside 0..%d (the job has %d workers)'
                         % (rank, nw - 1, nw))
            return
        other = self._by_rank.get(rank)
        if other is not None:
            self._refuse(conn, 'rank %d is already connected from %s' % (rank, other.describe()))
            return
        if rank in self._left:
            self._refuse(conn, 'worker %d already left the job' % rank)
            return
        if self._failure is not None:
            self._refuse(conn, 'the job already failed: ' + self._failure)
            return
        now = self._clock()
        self._pending.discard(conn)
        conn.state = _READY
        conn.rank = rank
        conn.nonce = None
        self._by_rank[rank] = conn
        self._connected_at.setdefault(rank, now)
        pol = self.policy
        self._send(conn, P.encode_welcome(nw, pol.s_lower, pol.s_upper, pol.mode, self.timeout))
        log.info('controller: worker %d connected from %s', rank, conn.describe())
        self._metric({'event': 'connect', 'rank': rank, 'time': now})

    def _refuse(self, conn, reason):
        log.warning('controller: refusing connection from %s: %s', conn.describe(), reason)
        self._send(conn, P.encode_error(reason))
        self._close(conn, flush=True)

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
        conn.state = _LEFT
        self._left.add(rank)
        self._by_rank.pop(rank, None)
        self._held.pop(rank, None)
        log.info('controller: worker %d left at clock %d', rank, self.policy.clocks[rank])
        self._metric({'event': 'leave', 'rank': rank, 'clock': self.policy.clocks[rank],
                      'time': now})
        if self._failure is None:
            for rel in self.policy.on_leave(rank):
                self._release_held(rel, now, rank)
        self._send(conn, P.BYE_FRAME)

    def _on_eof(self, conn, why):
        if conn.state == _READY and not self._stop_requested:
            self._fail('worker %d disconnected at clock %d without leaving (process died?)'
                       % (conn.rank, self.policy.clocks[conn.rank]))
        else:
            log.debug('controller: %s closed (%s)', conn.describe(), why)
        self._close(conn)

    def _malformed(self, conn, why):
        if conn.state == _READY:
            self._fail('worker %d sent a malformed message at clock %d: %s'
                       % (conn.rank, self.policy.clocks[conn.rank], why))
        else:
            log.warning('controller: closing connection from %s: %s', conn.describe(), why)
        self._close(conn)

    def _fail(self, message):
        if self._failure is not None:
            return
        self._failure = message
        log.error('mxnet-ssp job failed: %s', message)
        self._held.clear()
        self._metric({'event': 'failure', 'time': self._clock(), 'message': message})
        frame = P.encode_error(message)
        for conn in list(self._by_rank.values()):
            self._send(conn, frame)

    # -- I/O -----------------------------------------------------------------
    def _send(self, conn, data):
        if conn.closed:
            return
        if conn.wbuf:
            conn.wbuf += data
            return
        try:
            sent = conn.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._on_send_error(conn, exc)
            return
        if sent < len(data):
            conn.wbuf = data[sent:]
            self._sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def _flush(self, conn):
        if conn.wbuf:
            try:
                sent = conn.sock.send(conn.wbuf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._on_send_error(conn, exc)
                return
            conn.wbuf = conn.wbuf[sent:]
        if not conn.wbuf:
            if conn.close_when_flushed:
                self._close(conn)
            else:
                self._sel.modify(conn.sock, selectors.EVENT_READ, conn)

    def _on_send_error(self, conn, exc):
        if conn.state == _READY and self._failure is None and not self._stop_requested:
            self._fail('worker %d disconnected at clock %d without leaving (process died?): %s'
                       % (conn.rank, self.policy.clocks[conn.rank], exc))
        self._close(conn)

    def _close(self, conn, flush=False):
        if conn.closed:
            return
        if flush and conn.wbuf:
            # still in _pending, so the auth deadline closes it if the peer never reads
            conn.close_when_flushed = True
            return
        conn.closed = True
        self._pending.discard(conn)
        self._conns.discard(conn)
        if conn.rank is not None and self._by_rank.get(conn.rank) is conn:
            del self._by_rank[conn.rank]
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass

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

    def _shutdown(self):
        bye = None
        for conn in list(self._conns):
            if conn.state == _READY:
                if bye is None:
                    host, port = self._address
                    bye = P.encode_error('synchronization controller at %s:%d stopped'
                                         % (host, port))
                try:
                    conn.sock.send(bye)
                except OSError:
                    pass
            self._close(conn)
        self._close_resources()

    def _close_resources(self):
        for sock in (self._listener, self._wake_r, self._wake_w):
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
        if self._sel is not None:
            self._sel.close()
        self._close_metrics()
