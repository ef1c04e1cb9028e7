"""The network half of mxnet-ssp's services: one thread, non-blocking sockets, framed
messages, peer authentication.

:class:`FrameServer` accepts TCP connections, splits what they send into the
length-prefixed frames of :mod:`mxnet_ssp.controller.protocol`, authenticates each peer
(CHALLENGE with a fresh nonce, HELLO with :func:`~mxnet_ssp.controller.protocol.peer_mac`
under the service's own :attr:`FrameServer.mac_context`, ERROR on refusal), buffers what
it sends, and closes connections, all on one daemon thread driven by ``selectors``.
It knows nothing about workers, clocks or policies: a subclass
(:class:`mxnet_ssp.controller.server.ControllerServer`,
:class:`mxnet_ssp.controller.balance_service.BalanceService`) names itself with the class
attributes ``name``, ``title``, ``mac_context`` and ``error_class`` and implements the hooks
below, which all run on that thread.

Hooks
-----
``_on_start()``
    Before the thread starts (open files; raise ``error_class`` to refuse).
``_refusal(rank)``
    A peer proved it knows the secret: None to admit it as `rank`, or the reason
    sent to it in ERROR.
``_settings_refusal(conn, rank, settings)``
    Then, with the HELLO's ``(host, {name: [value, origin]})`` or None (a HELLO without
    settings): None to admit it, or the reason sent to it in ERROR.
``_on_admitted(conn, rank)``
    `conn` is authenticated as `rank` (typically sends a welcome).
``_on_message(conn, payload)``
    One complete frame arrived on an authenticated connection (the frames of a
    pending one are the handshake's).
``_on_closed(conn, current)``
    An authenticated connection was closed; `current`: it was its rank's newest.
``_on_eof(conn, why)``, ``_on_send_error(conn, exc)``, ``_malformed(conn, why)``
    The peer went away, could not be written to, or sent bytes that are not a frame.
``_on_internal_error(conn, exc)``
    A hook raised while serving `conn` (the connection is closed afterwards).
``_next_deadline()`` / ``_check_deadlines(now)``
    The subclass's own next deadline (or None), and what to do when the loop wakes.
``_goodbye()`` / ``_on_stopped()``
    The frame sent to authenticated connections at stop (or None); the last clean-up.

Contracts: :meth:`start`, :meth:`stop` and :attr:`address` may be called from
any thread; everything else is the server thread's.  A pending connection
that is not admitted within ``auth_timeout`` is closed, and at most
``max_pending`` are kept (more are refused at accept).  A pending peer never reaches a
hook but ``_malformed`` and ``_on_eof``: garbage, a wrong MAC, a HELLO for another
service or a refused rank close only its own connection.
"""
import hmac
import logging
import secrets
import selectors
import socket
import threading

from . import protocol as P
from .protocol import ControllerError

__all__ = ['FrameServer', 'Conn', 'CHALLENGED', 'READY', 'LEFT']

log = logging.getLogger('mxnet_ssp.controller')

#: Connection states: awaiting authentication, a worker in the job, a worker that left.
CHALLENGED, READY, LEFT = 'challenged', 'ready', 'left'
_RECV_BYTES = 65536


class Conn:
    """One accepted connection (server-thread only)."""

    __slots__ = ('sock', 'peer', 'reader', 'wbuf', 'state', 'nonce', 'rank',
                 'deadline', 'close_when_flushed', 'closed')

    def __init__(self, sock, peer, deadline):
        self.sock = sock
        self.peer = peer
        self.reader = P.FrameReader()
        self.wbuf = b''
        self.state = CHALLENGED
        self.nonce = None
        self.rank = None
        self.deadline = deadline
        self.close_when_flushed = False
        self.closed = False

    def describe(self):
        host, port = self.peer[:2]
        return '%s:%s' % (host, port)


class FrameServer:
    """Accept, authenticate, read frames, write, close; see the module docstring for the hooks.

    `secret` (non-empty bytes) is what peers prove they know; `clock` gives monotonic
    seconds for the deadlines.
    """

    #: how log lines and refusals name the service
    name = 'controller'
    #: how the crash log names it
    title = 'synchronization controller'
    #: the HELLO MAC's context: a MAC made for another service is refused
    mac_context = P.MAC_CONTEXT
    #: raised by :meth:`start`
    error_class = ControllerError

    def __init__(self, host, port, clock, auth_timeout, max_pending, secret):
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError('secret must be non-empty bytes')
        self._secret = bytes(secret)
        self._host = host
        self._port = port
        self._clock = clock
        self.auth_timeout = float(auth_timeout)
        self.max_pending = max_pending
        self._address = None
        self._thread = None
        self._stop_requested = False
        self._stopped = False
        self._lock = threading.Lock()
        # server-thread state
        self._sel = None
        self._listener = None
        self._wake_r = self._wake_w = None
        self._conns = set()
        self._pending = set()                  # unauthenticated connections
        self._by_rank = {}                     # rank -> Conn while connected

    # -- public API ----------------------------------------------------------
    @property
    def address(self):
        """``(host, port)`` actually bound; None before :meth:`start`."""
        return self._address

    def start(self):
        """Bind, start the server thread and return self (non-blocking).

        Raises
        ------
        ControllerError
            The address cannot be bound, or ``_on_start`` refused.
        """
        with self._lock:
            if self._thread is not None or self._stopped:
                raise RuntimeError('%s.start() may be called once' % type(self).__name__)
            try:
                listener = socket.create_server((self._host, self._port), backlog=128)
            except OSError as exc:
                raise self.error_class('%s cannot listen on %s:%s: %s'
                                       % (self.name, self._host, self._port, exc)) from exc
            try:
                self._on_start()
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
                                            name='mxnet-ssp-%s:%d' % (self.name.replace(' ', '-'),
                                                                      self._address[1]))
            self._thread.start()
        return self

    def stop(self):
        """Close all connections and the listener and join the thread.

        Blocking, idempotent, callable from any thread (also the server thread).
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
                now = self._clock()
                for conn in [c for c in self._pending if c.deadline <= now]:
                    log.warning('%s: closing connection from %s: no valid HELLO within %g s',
                                self.name, conn.describe(), self.auth_timeout)
                    self._close(conn)
                self._check_deadlines(now)
        except Exception as exc:          # never take the hosting process down
            log.exception('%s crashed', self.title)
            self._on_crash(exc)
        finally:
            self._shutdown()

    def _select_timeout(self):
        deadline = self._next_deadline()
        if self._pending:
            first = min(c.deadline for c in self._pending)
            deadline = first if deadline is None else min(deadline, first)
        if deadline is None:
            return None
        return max(0.0, deadline - self._clock())

    def _on_event(self, conn, mask):
        try:
            if mask & selectors.EVENT_READ and not conn.closed:
                self._on_readable(conn)
            if mask & selectors.EVENT_WRITE and not conn.closed:
                self._flush(conn)
        except Exception as exc:
            log.exception('%s error while serving %s', self.name, conn.describe())
            self._on_internal_error(conn, exc)
            self._close(conn)

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
                log.warning('%s: accept failed: %s', self.name, exc)
                return
            if len(self._pending) >= self.max_pending:
                log.warning('%s: refusing %s: %d connections are already authenticating',
                            self.name, peer, len(self._pending))
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Conn(sock, peer, self._clock() + self.auth_timeout)
            self._conns.add(conn)
            self._pending.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)
            conn.nonce = secrets.token_bytes(P.NONCE_BYTES)
            self._send(conn, P.encode_challenge(conn.nonce))

    # -- authentication --------------------------------------------------------
    def _on_hello(self, conn, payload):
        """A pending connection's frame: it must be a HELLO with a valid MAC."""
        if payload[0] != P.HELLO:
            self._malformed(conn, 'expected HELLO, got %s' % P.message_name(payload[0]))
            return
        try:
            version, rank, mac, body, settings = P.decode_hello_settings(payload)
        except P.ProtocolError as exc:
            self._malformed(conn, str(exc))
            return
        if version != P.VERSION:
            self._refuse(conn, 'protocol version %d is not supported (%s speaks %d)'
                         % (version, self.name, P.VERSION))
            return
        if not hmac.compare_digest(mac, P.peer_mac(self._secret, self.mac_context,
                                                   conn.nonce, rank, body)):
            self._refuse(conn, 'authentication failed for rank %d: wrong secret' % rank)
            return
        reason = self._refusal(rank)
        if reason is None:
            reason = self._settings_refusal(conn, rank, settings)
        if reason is not None:
            self._refuse(conn, reason)
            return
        self._admit(conn, rank)
        self._on_admitted(conn, rank)

    def _refuse(self, conn, reason):
        log.warning('%s: refusing connection from %s: %s', self.name, conn.describe(), reason)
        self._send(conn, P.encode_error(reason))
        self._close(conn, flush=True)

    def _admit(self, conn, rank):
        """`conn` authenticated as `rank`: it is no longer pending (the rank's newest)."""
        self._pending.discard(conn)
        conn.state = READY
        conn.rank = rank
        conn.nonce = None
        self._by_rank[rank] = conn

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
            if conn.state == CHALLENGED:
                self._on_hello(conn, payload)
            else:
                self._on_message(conn, payload)

    # -- output --------------------------------------------------------------
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
        current = conn.rank is not None and self._by_rank.get(conn.rank) is conn
        if current:
            del self._by_rank[conn.rank]
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass
        if conn.state == READY:
            self._on_closed(conn, current)

    # -- stopping ------------------------------------------------------------
    def _shutdown(self):
        bye = None
        for conn in list(self._conns):
            if conn.state == READY:
                if bye is None:
                    bye = self._goodbye()
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
        self._on_stopped()

    # -- hooks (see the module docstring) --------------------------------------
    def _on_start(self):
        pass

    def _refusal(self, rank):
        return None

    def _settings_refusal(self, conn, rank, settings):
        return None

    def _on_admitted(self, conn, rank):
        pass

    def _on_message(self, conn, payload):
        raise NotImplementedError

    def _on_closed(self, conn, current):
        pass

    def _on_eof(self, conn, why):
        self._close(conn)

    def _on_send_error(self, conn, exc):
        self._close(conn)

    def _malformed(self, conn, why):
        self._close(conn)

    def _on_internal_error(self, conn, exc):
        pass

    def _on_crash(self, exc):
        pass

    def _next_deadline(self):
        return None

    def _check_deadlines(self, now):
        pass

    def _goodbye(self):
        return b''

    def _on_stopped(self):
        pass
