"""Former path of :mod:`mxnet_ssp.controller.process`, kept so that
``python -m mxnet_ssp.controller_process`` and ``from mxnet_ssp.controller_process import
start`` keep working."""
import sys

from .controller.process import main, serve, start

__all__ = ['main', 'serve', 'start']

if __name__ == '__main__':
    sys.exit(main())
