"""``python -m mxnet_ssp.reproduce``: the DSSP paper's comparison grid.

The code is the package :mod:`mxnet_ssp.experiments.reproduce`; this module
keeps the command (and the console script ``mxnet-ssp-reproduce``) where it was.
"""
import sys

from .experiments.reproduce.cli import main

if __name__ == '__main__':
    sys.exit(main())
