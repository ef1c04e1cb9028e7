"""Names that several layers must spell alike, defined once here and imported everywhere.

Standard library only (``config`` imports it in every process, before MXNet).
"""

__all__ = ['BOUNDED', 'PAPER', 'THRESHOLD', 'DSSP_MODES', 'DSSP_STALENESS', 'SASGD',
           'DCASGD_PW', 'STALENESS_POLICIES', 'ADAPTIVE_READINGS', 'BUILTIN_MODELS', 'DATASETS',
           'TRAIN_LOG', 'STORE_METRICS', 'CONTROLLER_METRICS']

#: DSSP modes (docs/dssp_modes.md): :class:`mxnet_ssp.core.sync.SyncPolicy`'s ``mode``,
#: ``MXNET_SSP_DSSP_MODE``, the trainer's ``--dssp-mode`` and the simulator's specs.  The
#: controller's WELCOME carries a mode as its index in this tuple: append new modes only.
BOUNDED, PAPER, THRESHOLD = 'bounded', 'paper', 'threshold'
DSSP_MODES = (BOUNDED, PAPER, THRESHOLD)

#: DSSP's thresholds [sL, sU] when none are given: ``dist_dssp``'s default staleness, the
#: lab's ``dssp`` arm, the advisor's and the simulator's DSSP.
DSSP_STALENESS = (3, 15)

#: Update rules registered with ``mx.optimizer`` by :mod:`mxnet_ssp.optim` (and offered by
#: the trainer's ``--optimizer``).
SASGD = 'sasgd'
DCASGD_PW = 'dcasgd_pw'

#: ``StalenessAwareSGD(staleness_lr=...)`` and its NumPy reference ``SASGDRule``.
STALENESS_POLICIES = ('inverse', 'average', 'none')

#: ``DCASGD(adaptive_reading=...)`` (DC-ASGD-a): the paper's reading or Multiverso's.
ADAPTIVE_READINGS = ('paper', 'multiverso')

#: ``--model`` names the trainer builds itself (without GluonCV); any other name is GluonCV's.
BUILTIN_MODELS = ('mlp', 'alexnet-small')

#: ``--dataset`` names (:func:`mxnet_ssp.lab.data.load`).
DATASETS = ('digits', 'mnist5k', 'teacher', 'cifar10', 'cifar100')

#: The JSON Lines files of a job's metrics (docs/metrics.md); ``%d`` is the worker's rank.
#: The trainer's line per iteration, in its ``--save-dir``:
TRAIN_LOG = 'train-worker%d.jsonl'
#: An SSP/DSSP store's line per step, in ``MXNET_SSP_METRICS_DIR``:
STORE_METRICS = 'worker-%d.jsonl'
#: The controller's events, in ``MXNET_SSP_METRICS_DIR``:
CONTROLLER_METRICS = 'controller.jsonl'
