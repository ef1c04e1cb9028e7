"""The training script's code; :mod:`mxnet_ssp.experiments.train_cifar` is its command.

==================  ==========================================================
:mod:`.options`     the flags: parser, checks, learning-rate schedule
:mod:`.models`      the networks ``--model`` names
:mod:`.store`       the update rule and the store (these import MXNet)
:mod:`.loop`        one worker's training, step by step
:mod:`.checkpoint`  saving and resuming
:mod:`.logs`        logging with role and rank, progress bar, metrics files
:mod:`.cli`         :func:`main`: the role of this process
==================  ==========================================================

Importing any of them imports neither MXNet nor GluonCV.
"""
from .cli import main
from .options import build_parser, check_args, parse_args, validate_args

__all__ = ['main', 'build_parser', 'parse_args', 'validate_args', 'check_args']
