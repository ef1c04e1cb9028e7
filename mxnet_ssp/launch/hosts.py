"""Hosts: the hostfile, this machine's address towards a host, a free port.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import socket
from dataclasses import dataclass

from .settings import LaunchError


@dataclass
class Host:
    """A hostfile entry."""
    name: str                  # as given to ssh (may be user@host)
    port: int = None           # ssh port, from host:port

    @property
    def address(self):
        return self.name.rpartition('@')[2]


def parse_hostfile(path):
    """Read a hostfile: ``host``, ``user@host``, ``host:sshport`` or MPI-style
    ``host slots=N`` per line; blank lines and ``#`` comments are skipped."""
    if not path:
        raise LaunchError('no hostfile: give -H/--hostfile with one host per line')
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise LaunchError('hostfile %r does not exist' % path) from None
    except OSError as err:
        raise LaunchError('cannot read hostfile %r: %s' % (path, err.strerror)) from None
    hosts = []
    for num, line in enumerate(lines, 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        entry = line.split()[0]
        port = None
        if entry.count(':') == 1:
            entry, port_s = entry.split(':')
            if not port_s.isdigit() or not 0 < int(port_s) < 65536:
                raise LaunchError('hostfile %r line %d: %r is not HOST or HOST:PORT'
                                  % (path, num, line))
            port = int(port_s)
        if not entry or entry.startswith('-'):
            raise LaunchError('hostfile %r line %d: %r is not a host name' % (path, num, line))
        hosts.append(Host(entry, port))
    if not hosts:
        raise LaunchError('hostfile %r lists no hosts (one host per line expected)' % path)
    return hosts


def free_port(bind_host='127.0.0.1'):
    """An ephemeral TCP port that is free now (bound to port 0, read, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((bind_host, 0))
        return s.getsockname()[1]


def address_towards(host):
    """This machine's IPv4 address that the kernel would use to reach `host`."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))           # UDP connect: picks a route, sends nothing
            return s.getsockname()[0]
    except OSError as err:
        raise LaunchError('cannot find a route from this machine to host %r: %s'
                          % (host, err.strerror or err)) from None
