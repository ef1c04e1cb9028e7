"""``python -m mxnet_ssp.lab.testbed``: see :mod:`mxnet_ssp.lab.testbed.cli`."""
import sys

from .cli import main

sys.exit(main())
