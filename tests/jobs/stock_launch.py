"""Run MXNet's own tools/launch.py with its dmlc tracker made to work on Python >= 3.9.

The tracker the mxnet 1.9.1 wheel ships calls ``Thread.isAlive``, removed in
Python 3.9 (fixed upstream in dmlc-core later).  This shim restores that one
name and runs the stock launcher unchanged: ``stock_launch.py ARGS...`` is
``python .../mxnet/tools/launch.py ARGS...``.
"""
import os
import runpy
import sys
import threading

threading.Thread.isAlive = threading.Thread.is_alive


def main():
    import importlib.util
    spec = importlib.util.find_spec('mxnet')     # locate without importing mxnet here
    launch = os.path.join(os.path.dirname(spec.origin), 'tools', 'launch.py')
    sys.argv = [launch] + sys.argv[1:]
    runpy.run_path(launch, run_name='__main__')


if __name__ == '__main__':
    main()
