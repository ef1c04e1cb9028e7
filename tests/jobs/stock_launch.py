"""Run MXNet's own tools/launch.py with its dmlc tracker made to work on Python >= 3.9.

The tracker the mxnet 1.9.1 wheel ships calls ``Thread.isAlive``, removed in
Python 3.9 (fixed upstream in dmlc-core later).  This shim restores that one
name and runs the stock launcher unchanged: ``stock_launch.py ARGS...`` is
``python .../mxnet/tools/launch.py ARGS...``.

The stock tracker advertises this machine's interface address (it has no
flag for it); ``STOCK_LAUNCH_HOST_IP=127.0.0.1`` (what the tests set) keeps a
local job's traffic on loopback.
"""
import os
import runpy
import sys
import threading

threading.Thread.isAlive = threading.Thread.is_alive


def _pin_tracker_address(address):
    """Make the dmlc tracker bind to and advertise `address` instead of its own guess."""
    import dmlc_tracker.tracker as tracker
    guess = tracker.get_host_ip
    tracker.get_host_ip = lambda host_ip=None: address if host_ip in (None, 'auto', 'ip') \
        else guess(host_ip)


def main():
    if os.environ.get('STOCK_LAUNCH_HOST_IP'):
        _pin_tracker_address(os.environ['STOCK_LAUNCH_HOST_IP'])
    import importlib.util
    spec = importlib.util.find_spec('mxnet')     # locate without importing mxnet here
    launch = os.path.join(os.path.dirname(spec.origin), 'tools', 'launch.py')
    sys.argv = [launch] + sys.argv[1:]
    runpy.run_path(launch, run_name='__main__')


if __name__ == '__main__':
    main()
