"""The socket half of liveness (:mod:`mxnet_ssp.core.liveness`): keepalive on, silence read.

Standard library only; Linux (``TCP_KEEPIDLE``, ``TCP_INFO``).  Elsewhere :func:`enable`
returns False and :func:`silence` None: the connection is then never judged, as before.
"""
import socket
import struct

from ..core.liveness import keepalive_plan, silence_s

__all__ = ['enable', 'silence', 'tcp_info', 'SUPPORTED']

#: Whether this system has what liveness needs.
SUPPORTED = all(hasattr(socket, name) for name in ('TCP_KEEPIDLE', 'TCP_KEEPINTVL',
                                                   'TCP_KEEPCNT', 'TCP_INFO'))
# struct tcp_info (linux/tcp.h) up to tcpi_last_ack_recv: 8 bytes of u8 fields, then u32s
# rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans, fackets, last_data_sent,
# last_ack_sent, last_data_recv, last_ack_recv
_TCP_INFO = struct.Struct('=8B13I')
_STATE, _LAST_DATA_RECV, _LAST_ACK_RECV = 0, 19, 20


def enable(sock, bound):
    """Turn on TCP keepalive on `sock` with the timers of a `bound`-second liveness bound
    (:func:`mxnet_ssp.core.liveness.keepalive_plan`).  Returns whether it could."""
    if not SUPPORTED:
        return False
    plan = keepalive_plan(bound)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, plan.idle)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, plan.interval)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, plan.count)
    except OSError:
        return False
    return True


def tcp_info(sock):
    """``(state, last_data_recv_ms, last_ack_recv_ms)`` of TCP socket `sock`, or None."""
    if not SUPPORTED:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO.size)
    except OSError:
        return None
    if len(raw) < _TCP_INFO.size:
        return None
    fields = _TCP_INFO.unpack(raw)
    return fields[_STATE], fields[_LAST_DATA_RECV], fields[_LAST_ACK_RECV]


def silence(sock):
    """Seconds since anything arrived on `sock` (:func:`mxnet_ssp.core.liveness.silence_s`),
    or None where the kernel does not say."""
    info = tcp_info(sock)
    if info is None:
        return None
    return silence_s(info[1], info[2])
