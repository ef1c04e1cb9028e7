"""``python -m mxnet_ssp.testbed``: see :mod:`mxnet_ssp.testbed.cli`."""
import sys

from .cli import main

sys.exit(main())
