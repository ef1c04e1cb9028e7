"""Former path of :mod:`mxnet_ssp.cluster_model.simulate`, kept so that ``python -m mxnet_ssp.simulate``
and ``from mxnet_ssp.simulate import simulate`` keep working."""
import sys

from .cluster_model.simulate import (DEFAULT_POLICIES, DEFAULT_TIMES, SimResult, format_table, main,
                           make_policy, simulate)

__all__ = ['SimResult', 'simulate', 'make_policy', 'format_table', 'main',
           'DEFAULT_TIMES', 'DEFAULT_POLICIES']

if __name__ == '__main__':
    sys.exit(main())
