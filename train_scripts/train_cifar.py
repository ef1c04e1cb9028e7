"""Entry file of the training script: ``python train_scripts/train_cifar.py [flags]``.

The code is :mod:`mxnet_ssp.lab.train_cifar`, installed with the
package (``python -m pip install .``); this file only calls its ``main()``, as
``mxnet-ssp-train`` and ``python -m mxnet_ssp.lab.train_cifar`` do.
``docs/train_scripts.md`` lists the flags.
"""
import sys

try:
    from mxnet_ssp.lab.train_cifar import main
except ImportError as err:
    sys.exit('train_cifar.py: cannot import mxnet_ssp.lab (%s): install the package '
             'first, python -m pip install . in the checkout' % err)

if __name__ == '__main__':
    sys.exit(main())
