"""``python -m mxnet_ssp.lab.reproduce``: the same as ``mxnet-ssp-reproduce``."""
import sys

from .cli import main

sys.exit(main())
