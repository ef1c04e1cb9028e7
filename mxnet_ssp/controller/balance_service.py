"""The batch-balancing service: the workers' rates in, the split out (standard library only).

:class:`BalanceService` runs on a thread of worker 0 (see :mod:`mxnet_ssp.balance`, which
starts it and tells the workers where it is); each worker holds one :class:`BalanceClient`.
Both are the controller's transport with the balancing service's own frame types and MAC
context (:mod:`mxnet_ssp.controller.protocol`): a controller frame or MAC is never accepted
here, nor one of these by the controller.

The decision itself is :class:`mxnet_ssp.core.split.BalancePolicy`'s.  A round is complete
when every worker still in the job has reported since the last decision; the service then
runs the policy (O(M log M) once per round, nothing per push).

Contracts
---------
* :meth:`BalanceService.start` binds and returns at once; the service runs on one daemon
  thread (``selectors``, non-blocking sockets), the only user of the policy from then on.
  :meth:`~BalanceService.stop` blocks until that thread ends and is idempotent.
* Lockstep (``lockstep=True``): a REPORT is answered with the DECISION of its round, when
  the last worker still in the job has reported (or left); otherwise at once, with the
  newest decision.
* A worker is in the job from its first authenticated connection until its newest
  connection closes (B_LEAVE, end of stream, or a malformed frame, which closes only that
  connection).  A rank may connect again; its newest connection counts.
* Peers that do not authenticate (garbage, bad lengths, a wrong MAC, a rank outside the
  job, no HELLO within ``auth_timeout``) only lose their own connection.
* :class:`BalanceClient` is not thread-safe; its waits are bounded by its ``timeout``.
"""
import json
import logging
import math
import time

from . import protocol as P
from .client import FrameClient
from .transport import READY, FrameServer

__all__ = ['BalanceError', 'BalanceTimeout', 'BalanceLost', 'BalanceService', 'BalanceClient']

log = logging.getLogger(__name__)


class BalanceError(RuntimeError):
    """Balancing cannot go on; the message says why."""


class BalanceTimeout(BalanceError):
    """The balancing service did not answer in time."""


class BalanceLost(BalanceError):
    """The connection to the balancing service is gone."""


def _model(report):
    """``(a, c)`` of a REPORT body, None for a model that cannot be used; ProtocolError if
    the body is not a report at all."""
    model = report.get('model')
    if model is None:
        return None
    try:
        a, c = float(model[0]), float(model[1])
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise P.ProtocolError('REPORT model %.80r is not [a, c]: %s' % (model, exc)) from None
    ok = math.isfinite(a) and math.isfinite(c) and a >= 0 and c > 0
    return (a, c) if ok else None


class BalanceService(FrameServer):
    """Collect the workers' rates and hand out splits (see the module docstring).

    Parameters
    ----------
    policy : mxnet_ssp.core.split.BalancePolicy
        Decision state; owned by the service thread from :meth:`start` on.
    secret : bytes
        Shared secret (non-empty); workers prove they know it.
    host : str
        Interface to listen on.
    lockstep : bool
        Answer each report with its round's decision (see the module docstring).
    log_path : str, optional
        Append one JSON line per decision (opened here: an error raises at once).
    port : int
        TCP port; 0 picks a free one (see :attr:`address`, set by :meth:`start`).
    clock, auth_timeout, max_pending
        As :class:`~mxnet_ssp.controller.transport.FrameServer`'s; `max_pending` defaults
        to ``max(64, 2 * workers)``, so a whole job may authenticate at once.
    """

    name = 'balance service'
    title = 'batch-balancing service'
    mac_context = P.BALANCE_MAC_CONTEXT
    error_class = BalanceError

    def __init__(self, policy, secret, host='127.0.0.1', lockstep=True, log_path=None, port=0,
                 clock=time.monotonic, auth_timeout=30.0, max_pending=None):
        if max_pending is None:
            max_pending = max(64, 2 * policy.num_workers)
        super().__init__(host, port, clock, auth_timeout, max_pending, secret)
        self.policy = policy
        self.lockstep = lockstep
        self.rounds = 0
        self._active = set(range(policy.num_workers))
        self._reported = set()
        self._models = [None] * policy.num_workers
        self._waiting = []                  # lockstep: connections awaiting the round's end
        self._log = open(log_path, 'a', encoding='utf-8') if log_path else None
        self._finishing = False

    def finish(self):
        """Stop once no worker is in the job any more: at once if every worker has left
        (or lost its connection), else when the last one does.  For the hosting worker's
        own end of training; callable from any thread, idempotent."""
        self._finishing = True
        if not self._active:            # the server thread checks again after each close
            self.stop()

    # -- FrameServer hooks -----------------------------------------------------
    def _refusal(self, rank):
        nw = self.policy.num_workers
        if not 0 <= rank < nw:
            return 'rank %d is outside 0..%d (the job has %d workers)' % (rank, nw - 1, nw)
        return None

    def _on_admitted(self, conn, rank):
        self._active.add(rank)              # a worker that connects again is in the job again
        self._send(conn, P.encode_json(P.B_WELCOME, {'sizes': self.policy.sizes,
                                                     'version': self.policy.version}))
        log.debug('balance service: worker %d connected from %s', rank, conn.describe())

    def _on_message(self, conn, payload):
        kind = payload[0]
        if kind == P.REPORT:
            if conn in self._waiting:
                self._malformed(conn, 'REPORT while waiting for the decision of the round')
                return
            try:
                model = _model(P.decode_json(payload, P.REPORT))
            except P.ProtocolError as exc:
                self._malformed(conn, str(exc))
                return
            self._on_report(conn, model)
        elif kind == P.B_LEAVE and len(payload) == 1:
            log.debug('balance service: worker %d left', conn.rank)
            self._close(conn)
        else:
            self._malformed(conn, 'unexpected %s message (%d bytes)'
                            % (P.message_name(kind), len(payload)))

    def _malformed(self, conn, why):
        who = 'worker %d' % conn.rank if conn.state == READY else conn.describe()
        log.warning('balance service: closing the connection of %s: %s', who, why)
        self._close(conn)

    def _on_closed(self, conn, current):
        if conn in self._waiting:
            self._waiting.remove(conn)
        if current and not self._stop_requested:   # only the rank's newest connection counts
            self._active.discard(conn.rank)
            self._maybe_decide()
            if self._finishing and not self._active:
                self.stop()

    def _goodbye(self):
        host, port = self._address
        return P.encode_error('balance service at %s:%d stopped' % (host, port))

    def _on_stopped(self):
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- rounds ----------------------------------------------------------------
    def _on_report(self, conn, model):
        self._models[conn.rank] = model
        self._reported.add(conn.rank)
        if self.lockstep:
            self._waiting.append(conn)
            self._maybe_decide()
        else:
            self._maybe_decide()
            self._send(conn, self._decision())

    def _decision(self):
        return P.encode_json(P.DECISION, {'sizes': self.policy.sizes,
                                          'version': self.policy.version,
                                          'round': self.rounds})

    def _maybe_decide(self):
        """Decide once everybody still in has reported (O(1) check)."""
        if not self._reported or not self._active <= self._reported:
            return
        record = self.policy.decide(self._models)
        self.rounds += 1
        self._reported.clear()
        record.update(round=self.rounds, time=time.time())
        if record['switched']:
            log.info('balance: round %d: split %s (predicted %.1f%% faster)',
                     self.rounds, record['sizes'], 100 * record['gain'])
        if self._log is not None:
            self._log.write(json.dumps(record) + '\n')
            self._log.flush()
        if self._waiting:
            answer = self._decision()
            waiting, self._waiting = self._waiting, []
            for conn in waiting:
                self._send(conn, answer)


class BalanceClient(FrameClient):
    """Worker `rank`'s connection to the balancing service at `address`.

    :meth:`connect` (from :class:`~mxnet_ssp.controller.client.FrameClient`) authenticates
    and sets :attr:`welcome` (``{'sizes', 'version'}``).  Every wait is bounded by
    `timeout` seconds.
    """

    service = 'balance service'
    peer = 'the balance service'
    connect_hint = 'is worker 0 running?'
    mac_context = P.BALANCE_MAC_CONTEXT
    welcome_type = P.B_WELCOME
    error_class = BalanceError
    timeout_class = BalanceTimeout
    lost_class = BalanceLost

    def __init__(self, address, secret, rank, timeout=300.0):
        super().__init__(address, secret, rank, timeout, handshake_timeout=timeout,
                         max_frame=P.MAX_JSON_FRAME)
        self.welcome = None

    def _on_welcome(self, payload):
        self.welcome = self._decode(P.decode_json, payload, P.B_WELCOME)

    def report(self, model):
        """Send this worker's model (``(a, c)`` or None); return the service's answer.

        Blocks until the answer (lockstep: the round's decision): ``{'sizes', 'version',
        'round'}``, or ``{'error': text}`` if the service sent ERROR.

        Raises
        ------
        BalanceTimeout
            No answer within `timeout`.
        BalanceLost
            The connection is gone.
        BalanceError
            A protocol error (the connection is unusable).
        """
        if self._error is not None:
            raise self._error
        if self._sock is None:
            raise BalanceError('%s: report() called before connect() or after close()'
                               % self._where())
        body = {'model': None if model is None else [float(model[0]), float(model[1])]}
        self._sendall(P.encode_json(P.REPORT, body, P.MAX_FRAME), 'REPORT')
        kind, payload = self._read(self.timeout, 'the decision')
        if kind == P.DECISION:
            return self._decode(P.decode_json, payload, P.DECISION)
        if kind == P.ERROR:
            return {'error': P.decode_error(payload)}
        self._protocol_error('unexpected %s while waiting for the decision'
                             % P.message_name(kind))

    def leave(self):
        """Tell the service this worker is out, then close; never raises, never waits."""
        if self._sock is not None:
            try:
                self._sock.sendall(P.B_LEAVE_FRAME)
            except OSError:
                pass
        self.close()
