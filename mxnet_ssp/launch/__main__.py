"""``python -m mxnet_ssp.launch``: see :mod:`mxnet_ssp.launch`."""
import sys

from .cli import main

sys.exit(main())
