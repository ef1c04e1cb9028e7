"""A worker's connection to the synchronization controller.

Each worker process holds one :class:`ControllerClient` for its rank.  After
each push (once the servers have applied all of that iteration's gradients)
it calls :meth:`ControllerClient.clock`, which blocks until the controller
releases it, and at the end :meth:`ControllerClient.leave`.

Contracts
---------
* Not thread-safe: one thread of one worker uses a client.
* :meth:`~ControllerClient.connect` and :meth:`~ControllerClient.clock`
  block, each for a bounded time, and raise :class:`ControllerError` whose
  message names the controller address and the rank, or carries the
  controller's job-failure message verbatim.
* :meth:`~ControllerClient.leave` and :meth:`~ControllerClient.close` never
  raise because the controller is gone; problems are logged.
* Times are seconds.

The connection itself (connect with retries, the authenticated handshake, framed reads
with a deadline, errors that name the peer) is :class:`FrameClient`'s, which the
balancing service's client (:class:`mxnet_ssp.controller.balance_service.BalanceClient`)
shares.
"""
import logging
import socket
import struct
import sys
import time

from . import liveness as live
from . import protocol as P
from .protocol import ControllerError
from ..core.liveness import SilenceWatch

__all__ = ['FrameClient', 'ControllerClient', 'ControllerError']

log = logging.getLogger(__name__)

_RETRYABLE = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError,
              TimeoutError, socket.timeout)
# On Linux the receive timeout is the kernel's SO_RCVTIMEO on a blocking socket: one
# recv() system call per message instead of poll() + recv() as with socket.settimeout().
_KERNEL_TIMEOUT = sys.platform.startswith('linux') and hasattr(socket, 'SO_RCVTIMEO')
_DONTWAIT = getattr(socket, 'MSG_DONTWAIT', 0)
#: Lost hosts: seconds between two looks at the connection's silence while waiting.
LOOK_S = 0.5


def _timeval(seconds):
    """``struct timeval`` for SO_RCVTIMEO/SO_SNDTIMEO (Linux: two C longs); never 0 (= forever)."""
    sec = int(seconds)
    usec = int((seconds - sec) * 1e6)
    if sec == 0 and usec == 0:
        usec = 1
    return struct.pack('@ll', sec, usec)


class FrameClient:
    """One authenticated, framed connection of worker `rank` to a service at `address`.

    The service side is a :class:`mxnet_ssp.controller.transport.FrameServer`.  A subclass
    names the service (``service``, ``peer``, ``connect_hint``), its HELLO context
    (``mac_context``), the type of its welcome (``welcome_type``, decoded by
    :meth:`_on_welcome`) and the exceptions it raises (``error_class``; ``timeout_class``
    when an answer does not come in time, ``lost_class`` when the connection is gone).

    Parameters
    ----------
    address : tuple of (str, int)
        The service's ``(host, port)``.
    secret : bytes
        The job's shared secret.
    rank : int
        This worker's rank.
    timeout : float
        Seconds; the subclass's waits derive from it.
    connect_timeout : float, optional
        Seconds :meth:`connect` keeps retrying while the service is not listening yet;
        defaults to `timeout`.
    handshake_timeout : float
        Seconds to wait for each handshake message once connected.
    max_frame : int
        Longest frame accepted from the service.
    """

    service = 'controller'
    peer = 'the controller'
    connect_hint = 'is the server process that hosts the controller running?'
    mac_context = P.MAC_CONTEXT
    welcome_type = P.WELCOME
    error_class = timeout_class = lost_class = ControllerError

    def __init__(self, address, secret, rank, timeout=300.0, connect_timeout=None,
                 handshake_timeout=10.0, max_frame=P.MAX_FRAME):
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError('secret must be non-empty bytes')
        if not isinstance(rank, int) or rank < 0:
            raise ValueError('rank must be an int >= 0, got %r' % (rank,))
        host, port = address[0], int(address[1])
        self.address = (host, port)
        self.rank = rank
        self.timeout = float(timeout)
        self.connect_timeout = self.timeout if connect_timeout is None else float(connect_timeout)
        self.handshake_timeout = float(handshake_timeout)
        self._secret = bytes(secret)
        self._sock = None
        self._recv_timeout = None
        self._reader = P.FrameReader(max_frame)
        self._frames = []
        self._error = None          # error_class once the connection is unusable
        self._hello_body = b''      # settings sent with the HELLO (protocol.encode_settings)
        #: Lost hosts: seconds the service's connection may stay silent (0: not watched).
        self.liveness = 0.0
        self._silence = None

    def _where(self):
        return '%s at %s:%d (worker %d)' % (self.service, self.address[0], self.address[1],
                                            self.rank)

    def _send_timeout(self):
        """Seconds a send may block (SO_SNDTIMEO)."""
        return self.timeout

    # -- connect ---------------------------------------------------------------
    def connect(self):
        """Connect and authenticate; return self.

        Retries refused connections for up to ``connect_timeout`` seconds.

        Raises
        ------
        error_class
            Not reachable in time, authentication refused (the message says
            why: wrong secret, rank out of range, rank already connected, ...)
            or the job already failed.
        """
        if self._sock is not None:
            raise self.error_class('%s: already connected' % self._where())
        deadline = time.monotonic() + self.connect_timeout
        delay = 0.02
        attempts = 0
        while True:
            attempts += 1
            remaining = deadline - time.monotonic()
            try:
                sock = socket.create_connection(self.address,
                                                timeout=max(0.05, min(remaining, 5.0)))
                break
            except socket.gaierror as exc:
                raise self.error_class('%s: cannot resolve host %r: %s'
                                       % (self._where(), self.address[0], exc)) from None
            except (_RETRYABLE + (OSError,)) as exc:
                if not isinstance(exc, _RETRYABLE) or time.monotonic() + delay >= deadline:
                    raise self.error_class(
                        '%s: cannot connect after %d attempt(s) in %.1f s: %s (%s)'
                        % (self._where(), attempts, self.connect_timeout, exc,
                           self.connect_hint)) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if _KERNEL_TIMEOUT:
            sock.settimeout(None)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                            _timeval(self._send_timeout()))
        self._sock = sock
        self._recv_timeout = None
        self._error = None
        self._silence = None
        if self.liveness and live.enable(sock, self.liveness):
            self._silence = SilenceWatch(self.liveness)
            self._silence.first_seen(0, time.monotonic())
        try:
            self._handshake()
        except BaseException:
            self.close()
            raise
        return self

    def _handshake(self):
        kind, payload = self._read(self.handshake_timeout, 'the CHALLENGE')
        if kind != P.CHALLENGE:
            self._protocol_error('expected CHALLENGE, got %s' % P.message_name(kind))
        version, nonce = self._decode(P.decode_challenge, payload)
        if version != P.VERSION:
            raise self._set_error('%s: %s speaks protocol version %d, this client '
                                  '%d (mxnet-ssp versions differ)'
                                  % (self._where(), self.peer, version, P.VERSION))
        body = self._hello_body
        mac = P.peer_mac(self._secret, self.mac_context, nonce, self.rank, body)
        self._sendall(P.encode_hello(self.rank, mac, body=body), 'HELLO')
        kind, payload = self._read(self.handshake_timeout, 'the WELCOME')
        if kind == P.ERROR:
            raise self._set_error('%s refused the connection: %s'
                                  % (self._where(), P.decode_error(payload)))
        if kind != self.welcome_type:
            self._protocol_error('expected WELCOME, got %s' % P.message_name(kind))
        self._on_welcome(payload)

    def _on_welcome(self, payload):
        """Decode the service's welcome (a subclass's)."""

    def close(self):
        """Close the connection (idempotent; does not tell the service)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self):
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc):
        self.close()

    # -- I/O -------------------------------------------------------------------
    def _set_error(self, message, cls=None):
        self._error = (cls or self.error_class)(message)
        return self._error

    def _protocol_error(self, why):
        raise self._set_error('%s: protocol error: %s' % (self._where(), why))

    def _decode(self, fn, *args):
        try:
            return fn(*args)
        except P.ProtocolError as exc:
            self._protocol_error(str(exc))

    def _sendall(self, data, what):
        try:
            self._sock.sendall(data)
        except OSError as exc:
            # The service may have told us why before the connection died.
            reason = self._pending_error()
            if reason:
                raise self._set_error(reason) from None
            raise self._set_error('%s: connection lost while sending %s: %s'
                                  % (self._where(), what, exc), self.lost_class) from None

    def _pending_error(self):
        """The text of an ERROR already received, if any (non-blocking)."""
        if not _DONTWAIT:
            return None
        try:
            data = self._sock.recv(P.MAX_FRAME + 4, _DONTWAIT)
            self._frames.extend(self._reader.feed(data))
        except (OSError, P.ProtocolError):
            pass
        for payload in self._frames:
            if payload[0] == P.ERROR:
                return P.decode_error(payload)
        return None

    def _check_silence(self, what):
        """Raise `lost_class` if the connection has been silent for the liveness bound."""
        if self._silence is None:
            return
        quiet = live.silence(self._sock)
        silent = None if quiet is None else self._silence.observe(0, quiet, time.monotonic())
        if silent is not None:
            raise self._set_error(
                '%s: %s on %s sent nothing, not even the answer to a TCP keepalive probe, for '
                '%.1f s while this worker waited for %s (MXNET_SSP_LIVENESS_TIMEOUT=%g): that '
                'host is down or cut off from this one'
                % (self._where(), self.peer, self.address[0], silent, what, self.liveness),
                self.lost_class)

    def _set_recv_timeout(self, seconds):
        # Only reset when it changes noticeably: the common wait (the release bound) repeats.
        if self._recv_timeout is not None and abs(self._recv_timeout - seconds) < 0.01 * seconds:
            return
        self._recv_timeout = seconds
        if _KERNEL_TIMEOUT:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(seconds))
        else:
            self._sock.settimeout(seconds)

    def _read(self, wait, what, patient=False):
        """Next ``(type, payload)``, waiting at most `wait` seconds (then an error, or
        ``(None, None)`` if `patient`)."""
        if self._frames:
            payload = self._frames.pop(0)
            return payload[0], payload
        deadline = time.monotonic() + wait
        sock = self._sock
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if patient:
                    return None, None
                raise self._set_error('%s: no answer within %.1f s while waiting for %s'
                                      % (self._where(), wait, what), self.timeout_class)
            if self._silence is not None:     # wake up to look at the connection's silence
                remaining = min(remaining, LOOK_S)
            self._set_recv_timeout(remaining)
            try:
                data = sock.recv(65536)
            except (socket.timeout, BlockingIOError):      # BlockingIOError: SO_RCVTIMEO
                self._check_silence(what)
                continue
            except OSError as exc:
                raise self._set_error('%s: connection lost while waiting for %s: %s'
                                      % (self._where(), what, exc), self.lost_class) from None
            if not data:
                raise self._set_error('%s: %s closed the connection while waiting for %s'
                                      % (self._where(), self.peer, what),
                                      self.lost_class)
            try:
                frames = self._reader.feed(data)
            except P.ProtocolError as exc:
                self._protocol_error(str(exc))
            if frames:
                payload = frames[0]
                self._frames.extend(frames[1:])
                return payload[0], payload


class ControllerClient(FrameClient):
    """The connection of worker `rank` to the controller at `address`.

    Parameters
    ----------
    address : tuple of (str, int)
        The controller's ``(host, port)``.
    secret : bytes
        The job's shared secret.
    rank : int
        This worker's rank.
    timeout : float
        Seconds this worker may wait for a release.  :meth:`clock` gives up
        after ``max(timeout, controller's timeout) + release_margin``; the
        controller normally reports a stall first, naming the slow worker.
    connect_timeout : float, optional
        Seconds :meth:`connect` keeps retrying while the controller is not
        listening yet; defaults to `timeout`.
    release_margin : float
        Extra seconds to wait for the controller's own stall report.
    handshake_timeout : float
        Seconds to wait for each handshake message once connected.
    settings : dict, optional
        This worker's settings that must agree across the job, ``{name: [value, origin]}``
        (:func:`mxnet_ssp.config.job_settings`), sent with the HELLO together with
        `host`; the controller refuses the worker, and fails the job, if they differ from
        the job's.
    host : str, optional
        This worker's host name for those messages (default: ``socket.gethostname()``).
    liveness : float, optional
        Seconds the connection may stay silent (nothing received, not even the answer to a
        TCP keepalive probe) while this worker waits before the controller's host counts as
        lost (:mod:`mxnet_ssp.core.liveness`); 0 or None: never.  The store passes the
        job's ``MXNET_SSP_LIVENESS_TIMEOUT`` (its SyncConfig's ``liveness``).
    """

    def __init__(self, address, secret, rank, timeout=300.0, connect_timeout=None,
                 release_margin=10.0, handshake_timeout=10.0, rejoin=False, settings=None,
                 host=None, liveness=None):
        super().__init__(address, secret, rank, timeout, connect_timeout, handshake_timeout)
        if settings is not None:
            self._hello_body = P.encode_settings(host or socket.gethostname(), settings)
        self.liveness = float(liveness or 0.0)
        self.release_margin = float(release_margin)
        self.rejoin = bool(rejoin)
        #: A rejoining worker's clock, from the controller's REJOINED (None otherwise).
        self.start_clock = None
        self._left = False
        self._wait = self.timeout + self.release_margin
        #: Elastic mode: the workers the controller dropped so far (dicts ``rank``, ``clock``,
        #: ``after_s``), from its LOST notices and BYE.
        self.lost = []
        #: Job settings from the controller's WELCOME (set by :meth:`connect`).
        self.num_workers = self.s_lower = self.s_upper = self.mode = None
        self.server_timeout = None

    def _send_timeout(self):
        return self.timeout + self.release_margin

    def _on_welcome(self, payload):
        (self.num_workers, self.s_lower, self.s_upper, self.mode,
         self.server_timeout) = self._decode(P.decode_welcome, payload)
        self._wait = max(self.timeout, self.server_timeout) + self.release_margin
        if self.rejoin:
            kind, payload = self._read(self.handshake_timeout, 'the REJOINED')
            while kind == P.LOST:       # losses come after REJOINED; a worker that was never
                self._note_lost(payload)    # lost gets them instead, and no REJOINED
                kind, payload = self._read(self.handshake_timeout, 'the REJOINED')
            if kind != P.REJOINED:
                self._protocol_error('expected REJOINED (a rejoining worker replaces one the '
                                     'controller lost), got %s' % P.message_name(kind))
            self.start_clock = self._decode(P.decode_rejoined, payload)

    # -- job -------------------------------------------------------------------
    def clock(self, t):
        """Report push number `t` (1, 2, ...) and block until released.

        Returns
        -------
        mxnet_ssp.core.sync.Release
            The controller's release for clock `t`.

        Raises
        ------
        ControllerError
            The controller reported a job failure (its message), the
            connection dropped, or no release came within the wait bound.
        """
        if self._error is not None:
            raise self._error
        if self._left:
            raise ControllerError('%s: clock(%r) called after leave()' % (self._where(), t))
        if self._sock is None:
            raise ControllerError('%s: clock(%r) called before connect() or after close()'
                                  % (self._where(), t))
        if not 1 <= t < 2 ** 63:
            raise ValueError('clock must be a push count >= 1, got %r' % (t,))
        self._sendall(P.encode_clock(t), 'CLOCK %d' % t)
        kind, payload = self._read(self._wait, 'the release of clock %d' % t)
        while kind == P.LOST:
            self._note_lost(payload)
            kind, payload = self._read(self._wait, 'the release of clock %d' % t)
        if kind == P.RELEASE:
            rel = self._decode(P.decode_release, payload, self.rank)
            if rel.clock != t:
                self._protocol_error('RELEASE for clock %d while waiting for clock %d'
                                     % (rel.clock, t))
            return rel
        if kind == P.ERROR:
            raise self._set_error(P.decode_error(payload))
        self._protocol_error('unexpected %s while waiting for the release of clock %d'
                             % (P.message_name(kind), t))

    def _note_lost(self, payload):
        loss = self._decode(P.decode_lost, payload)
        self.lost.append(loss)
        log.warning('mxnet-ssp: worker %d: the controller dropped worker %d (lost at clock %d)',
                    self.rank, loss['rank'], loss['clock'])

    def barrier(self):
        """Wait until every worker neither lost nor left is at the barrier.

        Waits as long as the controller does: it fails the job (and this call raises) when
        none of the workers awaited pushed or arrived for its timeout.

        Raises
        ------
        ControllerError
            The job failed, or the connection dropped.
        """
        if self._error is not None:
            raise self._error
        if self._left or self._sock is None:
            raise ControllerError('%s: barrier() called after leave() or close()'
                                  % self._where())
        self._sendall(P.BARRIER_FRAME, 'BARRIER')
        while True:
            kind, payload = self._read(self._wait, 'the barrier', patient=True)
            if kind is None or kind == P.LOST:
                if kind is not None:
                    self._note_lost(payload)
                continue
            if kind == P.PASSED and len(payload) == 1:
                return
            if kind == P.ERROR:
                raise self._set_error(P.decode_error(payload))
            self._protocol_error('unexpected %s while waiting at the barrier'
                                 % P.message_name(kind))

    def leave(self):
        """Tell the controller this worker finished, then close.

        Waits up to ``min(timeout, 10)`` s for the acknowledgement; never
        raises because of the controller (logs a warning instead).  Returns the workers
        the controller lost so far (elastic mode; see :func:`protocol.encode_bye`), an
        empty list otherwise or when the answer did not come.
        """
        lost = []
        if self._sock is None or self._left:
            self.close()
            return lost
        self._left = True
        try:
            self._sendall(P.LEAVE_FRAME, 'LEAVE')
            while True:
                kind, payload = self._read(min(self.timeout, 10.0), 'the answer to LEAVE')
                if kind == P.BYE:
                    lost = self._decode(P.decode_bye, payload)
                    self.lost = list(lost) or self.lost
                    break
                if kind == P.LOST:
                    self._note_lost(payload)
                    continue
                if kind == P.ERROR:      # the job failed meanwhile; we are leaving anyway
                    log.warning('mxnet-ssp: worker %d leaving a failed job: %s',
                                self.rank, P.decode_error(payload))
                    continue
                self._protocol_error('unexpected %s after LEAVE' % P.message_name(kind))
        except ControllerError as exc:
            log.warning('mxnet-ssp: worker %d could not confirm leaving: %s', self.rank, exc)
        finally:
            self.close()
        return lost
