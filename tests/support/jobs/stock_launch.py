"""Run MXNet's own tools/launch.py with its dmlc tracker made to work on Python >= 3.9.

The tracker the mxnet 1.9.1 wheel ships calls ``Thread.isAlive``, removed in
Python 3.9 (fixed upstream in dmlc-core later).  This shim restores that one
name and runs the stock launcher unchanged: ``stock_launch.py ARGS...`` is
``python .../mxnet/tools/launch.py ARGS...``.

The stock tracker advertises this machine's interface address (it has no
flag for it) and gives the scheduler the first free port from 9091 up, which
concurrent jobs race for; ``STOCK_LAUNCH_HOST_IP=127.0.0.1`` (what the tests
set) keeps a local job's traffic on loopback (also ``DMLC_NODE_HOST``, the
address ps-lite's workers and servers bind) and starts that search at a port
the kernel picked (ephemeral) instead.
"""
import os
import runpy
import sys
import threading

threading.Thread.isAlive = threading.Thread.is_alive


def _pin_tracker_address(address):
    """Make the dmlc tracker advertise `address`, and search its port from an ephemeral one."""
    import socket

    import dmlc_tracker.tracker as tracker
    guess = tracker.get_host_ip
    tracker.get_host_ip = lambda host_ip=None: address if host_ip in (None, 'auto', 'ip') \
        else guess(host_ip)
    stock_init = tracker.PSTracker.__init__

    def init(self, hostIP, cmd, port=9091, port_end=9999, envs=None):
        probe = socket.socket()
        probe.bind((address, 0))
        port = probe.getsockname()[1]
        probe.close()
        stock_init(self, hostIP, cmd, port=port, port_end=min(port + 100, 65536), envs=envs)

    tracker.PSTracker.__init__ = init


def main():
    if os.environ.get('STOCK_LAUNCH_HOST_IP'):
        _pin_tracker_address(os.environ['STOCK_LAUNCH_HOST_IP'])
        # ps-lite's workers and servers bind the interface address unless told (the tracker
        # passes this environment on to every process it starts)
        os.environ.setdefault('DMLC_NODE_HOST', os.environ['STOCK_LAUNCH_HOST_IP'])
    import importlib.util
    spec = importlib.util.find_spec('mxnet')     # locate without importing mxnet here
    launch = os.path.join(os.path.dirname(spec.origin), 'tools', 'launch.py')
    sys.argv = [launch] + sys.argv[1:]
    runpy.run_path(launch, run_name='__main__')


if __name__ == '__main__':
    main()
