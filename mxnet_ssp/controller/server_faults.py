"""How the synchronization controller turns a fault into a failed job or a lost worker.

:class:`ServerFaults` is the part of :class:`mxnet_ssp.controller.server.ControllerServer`
that handles what goes wrong (the "Contracts" of :mod:`mxnet_ssp.controller.server` say what
each fault leads to): the job's failure and its report (:meth:`ServerFaults._fail`, sent to
every worker, and ``on_failed`` once they hung up), a held worker's stall message, an
authenticated worker's connection that ends without LEAVE or sends a malformed message
(the job fails, or in elastic mode the worker is lost), and lost hosts (a connection silent
for the liveness bound).  It runs on the server's thread only, like the rest of the class.
"""
import logging

from . import liveness as live
from . import protocol as P
from .transport import LEFT, READY

__all__ = ['ServerFaults', 'LOOK_S']

# the controller's lines, all under one logger: the server's
log = logging.getLogger(__package__ + '.server')

#: Seconds between two looks at the workers' connections' silence (lost hosts).
LOOK_S = 0.5
_LIVENESS_SETTING = 'MXNET_SSP_LIVENESS_TIMEOUT'


class ServerFaults:
    """The fault handling of :class:`~mxnet_ssp.controller.server.ControllerServer` (a mixin:
    it uses the server's policy, connections, metrics and job events)."""

    # -- the job's failure ---------------------------------------------------------
    def _fail(self, message):
        if self._failure is not None:
            return
        self._failure = message
        if self._on_failed is not None:
            self._failed_at = self._clock()
        log.error('mxnet-ssp job failed: %s', message)
        self._held.clear()
        self._barrier.clear()
        self._metric({'event': 'failure', 'time': self._clock(), 'message': message})
        frame = P.encode_error(message)
        for conn in list(self._by_rank.values()):
            self._send(conn, frame)

    def _report_failure(self):
        on_failed, self._on_failed, self._failed_at = self._on_failed, None, None
        if on_failed is not None and self._failure is not None:
            try:
                on_failed(self._failure)
            except Exception:
                log.exception('controller: reporting the failure failed')

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

    # -- a worker's connection ends, or says what it may not -----------------------
    def _on_eof(self, conn, why):
        if conn.state == READY and not self._stop_requested:
            self._disconnected(conn, '')
        else:
            log.debug('controller: %s closed (%s)', conn.describe(), why)
        self._close(conn)

    def _malformed(self, conn, why):
        if conn.state == READY:
            self._fail('worker %d sent a malformed message at clock %d: %s'
                       % (conn.rank, self.policy.clocks[conn.rank], why))
        else:
            log.warning('controller: closing connection from %s: %s', conn.describe(), why)
        self._close(conn)

    def _on_send_error(self, conn, exc):
        if conn.state == READY and self._failure is None and not self._stop_requested:
            self._disconnected(conn, ': %s' % (exc,))
        self._close(conn)

    def _disconnected(self, conn, detail):
        """An authenticated worker's connection ended without LEAVE: fail, or lose it."""
        self._lose(conn, 'worker %d disconnected at clock %d without leaving (process died?)%s; '
                         'it ran on %s' % (conn.rank, self.policy.clocks[conn.rank], detail,
                                           conn.peer[0]))

    def _lose(self, conn, what):
        """Worker `conn` is gone (`what` says how): fail the job, or lose it (elastic)."""
        rank = conn.rank
        clock = self.policy.clocks[rank]
        if not self.min_workers or self._failure is not None:
            self._fail(what)
            return
        now = self._clock()
        conn.state = LEFT
        self._by_rank.pop(rank, None)
        self._held.pop(rank, None)
        self._barrier.pop(rank, None)
        self._lost.append({'rank': rank, 'clock': clock,
                           'after_s': round(now - self._started_at, 3), 'host': conn.peer[0]})
        self._gone.add(rank)
        self._metric({'event': 'lost', 'rank': rank, 'clock': clock, 'time': now,
                      'after_s': self._lost[-1]['after_s'], 'left': len(self._live()),
                      'host': conn.peer[0], 'why': what})
        alive = self.policy.num_workers - len(self._gone)
        if alive < self.min_workers:
            self._fail('%s; %d of the %d workers are lost, more than the job can lose '
                       '(elastic: at least %d needed)'
                       % (what, len(self._gone), self.policy.num_workers, self.min_workers))
            return
        log.warning('controller: %s; elastic: dropped, %d of %d workers go on (at least %d '
                    'needed)', what, alive, self.policy.num_workers, self.min_workers)
        notice = P.encode_lost(self._lost[-1])
        for other in list(self._by_rank.values()):
            if other.state == READY:
                self._send(other, notice)
        for rel in self.policy.on_leave(rank):
            self._release_held(rel, now, rank)
        self._check_barrier(now)

    # -- lost hosts ----------------------------------------------------------------
    def _watch(self, conn, now):
        """Lost hosts: keepalive on for an admitted worker's connection, silence counted."""
        if self._silence is None:
            return
        live.enable(conn.sock, self.liveness)
        self._silence.first_seen(conn, now)
        if self._next_look is None:
            self._next_look = now + LOOK_S

    def _look(self, now):
        """Lose (or fail the job for) every worker whose connection has been silent for the
        liveness bound."""
        self._next_look = now + LOOK_S
        conns = [c for c in self._by_rank.values() if c.state == READY]
        self._silence.keep(conns)
        for conn in conns:
            quiet = live.silence(conn.sock)
            if quiet is None:
                continue
            silent = self._silence.observe(conn, quiet, now)
            if silent is None or conn.closed:
                continue
            self._lose(conn, 'worker %d on %s sent nothing, not even the answer to a TCP '
                             'keepalive probe, for %.1f s at clock %d (%s=%g): its host is '
                             'down or cut off' % (
                                 conn.rank, conn.peer[0], silent,
                                 self.policy.clocks[conn.rank], _LIVENESS_SETTING,
                                 self.liveness))
            self._close(conn)
            if self._failure is not None:
                return
