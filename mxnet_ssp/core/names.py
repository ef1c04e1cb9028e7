"""Names that several layers must spell alike, defined once here and imported everywhere.

Standard library only (``config`` imports it in every process, before MXNet).
"""

__all__ = ['BOUNDED', 'PAPER', 'THRESHOLD', 'DSSP_MODES', 'SASGD', 'DCASGD_PW',
           'STALENESS_POLICIES', 'ADAPTIVE_READINGS']

#: DSSP modes (docs/dssp_modes.md): :class:`mxnet_ssp.core.sync.SyncPolicy`'s ``mode``,
#: ``MXNET_SSP_DSSP_MODE``, the trainer's ``--dssp-mode`` and the simulator's specs.  The
#: controller's WELCOME carries a mode as its index in this tuple: append new modes only.
BOUNDED, PAPER, THRESHOLD = 'bounded', 'paper', 'threshold'
DSSP_MODES = (BOUNDED, PAPER, THRESHOLD)

#: Update rules registered with ``mx.optimizer`` by :mod:`mxnet_ssp.optim` (and offered by
#: the trainer's ``--optimizer``).
SASGD = 'sasgd'
DCASGD_PW = 'dcasgd_pw'

#: ``StalenessAwareSGD(staleness_lr=...)`` and its NumPy reference ``SASGDRule``.
STALENESS_POLICIES = ('inverse', 'average', 'none')

#: ``DCASGD(adaptive_reading=...)`` (DC-ASGD-a): the paper's reading or Multiverso's.
ADAPTIVE_READINGS = ('paper', 'multiverso')
