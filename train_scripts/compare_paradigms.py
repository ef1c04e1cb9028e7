"""Entry file of the demo: ``python train_scripts/compare_paradigms.py [flags]``.

The code is :mod:`mxnet_ssp.lab.compare_paradigms`, installed with
the package (``python -m pip install ".[lab]"``); this file only calls its
``main()``, as ``mxnet-ssp-compare`` and ``python -m
mxnet_ssp.lab.compare_paradigms`` do.
"""
import sys

try:
    from mxnet_ssp.lab.compare_paradigms import main
except ImportError as err:
    sys.exit('compare_paradigms.py: cannot import mxnet_ssp.lab (%s): install the '
             'package first, python -m pip install ".[lab]" in the checkout' % err)

if __name__ == '__main__':
    sys.exit(main())
