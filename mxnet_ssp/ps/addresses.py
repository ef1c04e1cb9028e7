"""The address of this host that the job's other processes can reach (what a server
advertises for the controller it starts, and worker 0 for the balancing service).

Standard library only.
"""
import logging
import os
import socket

from ..core.env_names import DMLC_INTERFACE, DMLC_NODE_HOST, DMLC_PS_ROOT_PORT, DMLC_PS_ROOT_URI

__all__ = ['advertised_host', 'interface_address']

logger = logging.getLogger(__name__)


def advertised_host(environ=None):
    """The address of this host that workers can reach.

    What ps-lite binds and advertises, in its order: ``DMLC_NODE_HOST`` if the launcher set
    it; else the IPv4 address of the interface ``DMLC_INTERFACE`` names (a host with several
    networks: the one the job's traffic should take); otherwise the local address the
    kernel would use to reach the scheduler (``DMLC_PS_ROOT_URI``), which is on the network
    every worker already uses.
    """
    env = os.environ if environ is None else environ
    if env.get(DMLC_NODE_HOST):
        return env[DMLC_NODE_HOST]
    if env.get(DMLC_INTERFACE):
        address = interface_address(env[DMLC_INTERFACE])
        if address is not None:
            return address
        logger.warning('DMLC_INTERFACE=%s: no such interface with an IPv4 address on this '
                       'host; advertising the address towards the scheduler instead',
                       env[DMLC_INTERFACE])
    root = env.get(DMLC_PS_ROOT_URI, '127.0.0.1')
    port = int(env.get(DMLC_PS_ROOT_PORT, '9000') or 9000)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((root, port))       # UDP: no packet is sent
        return probe.getsockname()[0]
    except OSError:
        return '127.0.0.1'
    finally:
        probe.close()


def interface_address(name):
    """The IPv4 address of network interface `name` (Linux: SIOCGIFADDR), or None."""
    import fcntl
    import struct
    SIOCGIFADDR = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(probe.fileno(), SIOCGIFADDR,
                                 struct.pack('256s', name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])
