"""The training script's code; :mod:`mxnet_ssp.lab.train_cifar` is its command.

==================  ==========================================================
:mod:`.models`      builds the network ``--model`` names
:mod:`.store`       the update rule and the store (these import MXNet)
:mod:`.loop`        one worker's training, step by step
:mod:`.checkpoint`  saving and resuming
:mod:`.logs`        logging with role and rank, progress bar, metrics files
:mod:`.cli`         :func:`main`: the role of this process
==================  ==========================================================

The flags (parser, checks, defaults, learning-rate schedule) are :mod:`mxnet_ssp.lab.training_flags`,
which the launcher imports too.  Importing any of them imports neither MXNet nor GluonCV.
"""
from .cli import main
from ..training_flags import build_parser, check_args, parse_args, validate_args

__all__ = ['main', 'build_parser', 'parse_args', 'validate_args', 'check_args']
