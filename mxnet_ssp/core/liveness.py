"""Whether the host at the other end of a TCP connection is still there: pure logic.

A process that dies closes its connections: its kernel sends FIN (or RST), and the peer
reads end of file.  A host that goes down, or is cut off from the others (a partition, a
link down, a dropping firewall), closes nothing: its peers see an open connection that
merely stays quiet, exactly like a busy or stopped peer process.

To tell the two apart mxnet-ssp turns on TCP keepalive with short timers on the connections
it watches (the controller's to each worker, and a job's ps-lite connections:
:func:`keepalive_plan`).  A keepalive probe is answered by the peer's *kernel*, whatever
its processes do (computing, blocked, stopped with SIGSTOP), so on such a connection
something arrives at least every ``idle`` seconds plus a round trip: data, an ACK, or the
answer to a probe.  A connection from which nothing at all arrived for ``bound`` seconds
(:func:`silence_s`, read from the kernel's ``TCP_INFO``) therefore leads to a host that is
down or unreachable.  That is the *liveness bound* (``MXNET_SSP_LIVENESS_TIMEOUT``,
:func:`mxnet_ssp.config.liveness_timeout`).

Why not heartbeats of our own: a heartbeat is sent by a thread of the peer process, which
may be descheduled on a loaded host, or starved by native code holding the GIL; a process
stopped by the user would be declared lost.  The kernel's answer is none of that, it needs
no change to any wire protocol (ps-lite's included, whose sockets are ZeroMQ's), and a peer
of an older mxnet-ssp answers it too.

Nothing here does I/O or reads a clock: :class:`SilenceWatch` is fed times and the
kernel's counters by :mod:`mxnet_ssp.controller.liveness`.
"""
import math
from dataclasses import dataclass

__all__ = ['KeepalivePlan', 'keepalive_plan', 'silence_s', 'SilenceWatch', 'MIN_BOUND',
           'MAX_BOUND', 'DEFAULT_BOUND', 'IDLE_SHARE']

#: The shortest liveness bound accepted (seconds): the kernel's keepalive timers count in
#: whole seconds, and a live peer must get at least two chances to answer within the bound.
MIN_BOUND = 2.0
#: The longest accepted (seconds).
MAX_BOUND = 3600.0
#: The bound when none is set (``MXNET_SSP_LIVENESS_TIMEOUT``; seconds).
DEFAULT_BOUND = 10.0
#: The keepalive idle time and interval are this share of the bound (at least 1 s): a live
#: peer is heard from at least every bound / 5 seconds, five times within the bound.
IDLE_SHARE = 5


@dataclass(frozen=True)
class KeepalivePlan:
    """TCP keepalive settings for one liveness bound (whole seconds, as the kernel takes
    them): the first probe after ``idle`` seconds without receiving anything, then one every
    ``interval`` seconds; the kernel itself ends the connection after ``count`` unanswered
    probes, a backstop that comes after the bound."""
    idle: int
    interval: int
    count: int


def keepalive_plan(bound):
    """The :class:`KeepalivePlan` for a liveness bound of `bound` seconds (>= MIN_BOUND).

    ``idle = interval = max(1, floor(bound / IDLE_SHARE))``; ``count`` probes go
    unanswered before the kernel aborts, so that abort comes at ``idle + count * interval
    >= bound + 2 * interval`` seconds of silence, after mxnet-ssp's own decision.
    """
    if not (isinstance(bound, (int, float)) and math.isfinite(bound) and bound >= MIN_BOUND):
        raise ValueError('liveness bound must be a number of seconds >= %g, got %r'
                         % (MIN_BOUND, bound))
    step = max(1, int(bound // IDLE_SHARE))
    count = int(math.ceil((bound - step) / step)) + 2
    return KeepalivePlan(step, step, min(count, 127))     # 127: the kernel's largest


def silence_s(last_data_recv_ms, last_ack_recv_ms):
    """Seconds since anything arrived on a connection, from ``TCP_INFO``'s
    ``tcpi_last_data_recv`` and ``tcpi_last_ack_recv`` (milliseconds since the last data
    segment, and since the last ACK, which answers to keepalive probes and retransmissions
    are too)."""
    return min(last_data_recv_ms, last_ack_recv_ms) / 1000.0


class SilenceWatch:
    """Decides which watched connections have been silent for the bound.

    Connections are keys (a socket's inode, say).  A connection counts only from the time it
    was first seen (:meth:`observe`), when keepalive was turned on for it: before that, an
    idle connection without keepalive is silent without meaning anything.

    Parameters
    ----------
    bound : float
        Seconds of silence after which a connection's peer host is lost.
    """

    def __init__(self, bound):
        if not bound > 0:
            raise ValueError('bound must be > 0 seconds, got %r' % (bound,))
        self.bound = float(bound)
        self._since = {}        # key -> time it was first seen

    def first_seen(self, key, now):
        """Note `key` at `now` if new; return whether it is new (turn keepalive on then)."""
        if key in self._since:
            return False
        self._since[key] = now
        return True

    def observe(self, key, silence, now):
        """Connection `key` has been silent for `silence` seconds (:func:`silence_s`) at
        `now`: the seconds it counts as silent once that reached the bound, else None.

        Silence before the connection was first seen does not count."""
        self.first_seen(key, now)
        counted = min(silence, now - self._since[key])
        return counted if counted >= self.bound else None

    def keep(self, keys):
        """Forget every connection but `keys` (the ones still open)."""
        keys = set(keys)
        for key in [k for k in self._since if k not in keys]:
            del self._since[key]

    def __len__(self):
        return len(self._since)
