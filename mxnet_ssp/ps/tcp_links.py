"""This process's TCP connections, read from its own sockets, and which of them are alive.

The connections are this process's own sockets (``/proc/self/fd``, each read through a
duplicate of its descriptor: addresses and ``TCP_INFO``'s state), so a look costs the same
whatever else runs on the host: Linux only (:func:`tcp_links` raises OSError elsewhere).
:class:`LinkLiveness` also judges each connection's silence against the liveness bound
(lost hosts, :mod:`mxnet_ssp.core.liveness`); :func:`scheduler_links`, :func:`server_links`
and :func:`links_to` pick out the ps-lite connections that :mod:`mxnet_ssp.ps.job_watch` counts.
Nothing here imports MXNet.
"""
import ipaddress
import os
import socket
import time

from ..controller import liveness as live
from ..core.liveness import SilenceWatch

__all__ = ['tcp_links', 'LinkLiveness', 'scheduler_links', 'server_links', 'links_to',
           'host_addresses']

_ESTABLISHED = 1          # TCP_ESTABLISHED: tcp_info.tcpi_state, its first byte (Linux)
_LISTEN = 10              # TCP_LISTEN


def _socket_fds():
    """``[(fd, inode)]`` of this process's sockets."""
    fds = []
    for fd in os.listdir('/proc/self/fd'):
        try:
            target = os.readlink('/proc/self/fd/' + fd)
        except OSError:         # closed meanwhile
            continue
        if target.startswith('socket:['):
            fds.append((int(fd), target[8:-1]))
    return fds


def _open_socket(fd):
    """A socket object on a duplicate of `fd` (a TCP socket over IP), or None.

    Closing it closes only the duplicate: the socket is ZeroMQ's."""
    try:
        dup = os.dup(fd)
    except OSError:
        return None
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return None
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        sock.close()
        return None
    return sock


def _link(fd):
    """``(local, peer, established)`` of TCP socket `fd`, or None (not TCP, not connected)."""
    sock = _open_socket(fd)
    if sock is None:
        return None
    with sock:
        try:
            state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
            local, peer = sock.getsockname(), sock.getpeername()
        except OSError:         # listening, or not connected
            return None
    return _address(local), _address(peer), state == _ESTABLISHED


def _address(sockaddr):
    host, port = sockaddr[:2]
    addr = ipaddress.ip_address(host.split('%')[0])
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return str(addr), port


def tcp_links(watch=None):
    """This process's connected TCP sockets: a list of ``(local, peer, established)``.

    `local` and `peer` are ``(ip, port)``; `established` is whether the connection is
    open both ways (not closed by the peer) and, with a :class:`LinkLiveness` `watch`, not
    silent for its bound (its peer's host is down or cut off).  Raises OSError where there
    is no ``/proc/self/fd`` or no ``TCP_INFO`` (not Linux).
    """
    if not hasattr(socket, 'TCP_INFO'):
        raise OSError('socket.TCP_INFO is not available on this system')
    if watch is not None:
        return watch.links()
    links = []
    for fd, _ in _socket_fds():
        link = _link(fd)
        if link is not None:
            links.append(link)
    return links


class LinkLiveness:
    """Lost hosts among this process's connections (:mod:`mxnet_ssp.core.liveness`).

    Each look (:meth:`links`) turns TCP keepalive on for every connection it judges, the
    first time it sees it, and reads from the kernel how long each has been silent; one
    silent for `bound` seconds counts as not established, and is listed in :attr:`silent`
    as ``(peer, seconds)``.

    Parameters
    ----------
    bound : float
        The liveness bound (``MXNET_SSP_LIVENESS_TIMEOUT``), > 0.
    job_hosts : set of str, optional
        None: judge every connection (a scheduler or server, whose sockets are all the
        job's).  A set (a worker, whose script may hold connections of its own): judge only
        connections to these addresses and to the peers that connected to one of this
        process's listening ports (ps-lite's servers and scheduler).
    """

    def __init__(self, bound, job_hosts=None):
        self.watch = SilenceWatch(bound)
        self.bound = self.watch.bound
        self.job_hosts = None if job_hosts is None else set(job_hosts)
        self.silent = []

    def links(self, now=None):
        now = time.monotonic() if now is None else now
        found, listening = [], set()
        for fd, inode in _socket_fds():
            sock = _open_socket(fd)
            if sock is None:
                continue
            with sock:
                info = live.tcp_info(sock)
                if info is None:
                    continue
                try:
                    local = _address(sock.getsockname())
                except (OSError, ValueError):
                    continue
                if info[0] == _LISTEN:
                    listening.add(local[1])
                    continue
                try:
                    peer = _address(sock.getpeername())
                except (OSError, ValueError):     # not connected
                    continue
                up = info[0] == _ESTABLISHED
                found.append((fd, inode, local, peer, up, live.silence_s(info[1], info[2])))
        hosts = self.job_hosts
        if hosts is not None:
            hosts = hosts | {f[3][0] for f in found if f[2][1] in listening}
        links, self.silent, judged = [], [], []
        for fd, inode, local, peer, up, quiet in found:
            if up and (hosts is None or peer[0] in hosts):
                judged.append(inode)
                if self.watch.first_seen(inode, now):
                    sock = _open_socket(fd)
                    if sock is not None:
                        with sock:
                            live.enable(sock, self.bound)
                silent = self.watch.observe(inode, quiet, now)
                if silent is not None:
                    self.silent.append((peer, silent))
                    up = False
            links.append((local, peer, up))
        self.watch.keep(judged)
        return links

    def describe_silent(self):
        """``'198.18.0.3:4321 (silent 10.2 s), ...'``."""
        return ', '.join('%s:%d (silent %.1f s)' % (peer[0], peer[1], quiet)
                         for peer, quiet in self.silent)


def scheduler_links(links, port):
    """Open connections of other processes to this process's `port` (the scheduler's).

    ps-lite's scheduler also connects to itself; that connection's peer is one of this
    process's own sockets and is not counted.
    """
    own = {local for local, _, _ in links}
    return [peer for local, peer, up in links if up and local[1] == port and peer not in own]


def server_links(links, addresses, port):
    """A server's open connections other than its own to itself and its outgoing one to the
    scheduler at `port` on one of `addresses`: the scheduler's incoming one and two per
    worker (ps-lite connects each node to every node of another role and to itself)."""
    own = {local for local, _, _ in links}
    return [peer for _, peer, up in links
            if up and peer not in own and not (peer[1] == port and peer[0] in addresses)]


def links_to(links, addresses, port):
    """Open connections of this process to `port` on one of `addresses` (any if empty)."""
    return [peer for _, peer, up in links
            if up and peer[1] == port and (not addresses or peer[0] in addresses)]


def host_addresses(host):
    """The IP addresses `host` resolves to (empty if it does not)."""
    try:
        return set(socket.gethostbyname_ex(host)[2]) | {host}
    except OSError:
        return set()
