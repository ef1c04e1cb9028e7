"""Train an image classifier on an MXNet parameter server: BSP, ASP, SSP, DSSP or n-softsync.

The training script of the DSSP paper's experiments, with the flags of GluonCV's
``scripts/classification/cifar/train_cifar10.py`` plus the store and update-rule
flags of mxnet-ssp (``docs/train_scripts.md`` lists them all).  It is installed
with the package: run it as ``mxnet-ssp-train`` or ``python -m
mxnet_ssp.lab.train_cifar`` (``train_scripts/train_cifar.py`` in a
checkout calls the same :func:`main`).  Every process of a job runs this same
command; MXNet reads the role from ``DMLC_ROLE``::

    mxnet-ssp-launch -n 4 -s 1 --launcher local \\
        mxnet-ssp-train --kvstore dist_dssp --staleness 3,15

Without a launcher (no ``DMLC_ROLE``) use ``--kvstore local``::

    mxnet-ssp-train --kvstore local --num-epochs 2

In scheduler and server processes ``import mxnet`` runs the parameter-server
loop and exits, so :func:`main` sets up logging there and imports MXNet; it
never returns.  Importing this module imports neither MXNet nor GluonCV, and
:func:`~mxnet_ssp.lab.training_flags.check_args` checks a command
line cheaply, so a job runner can reject bad flags before it starts any process.

Each worker trains on its own shard of the training set.  Every worker writes
``<save-dir>/train-worker<rank>.jsonl`` (one JSON object per iteration);
worker 0 also evaluates the test set at the end of every epoch and at the end
(``eval.jsonl``), saves checkpoints (``model-epoch<N>.{params,states,json}``
every ``--save-period`` epochs, ``model-final.*``) and writes ``summary.json``.
The stores write their metrics into ``--save-dir`` too.

The code is the package :mod:`mxnet_ssp.lab.training`; this module
keeps the command where it was.
"""
import sys

from .training.cli import main

if __name__ == '__main__':
    sys.exit(main())
