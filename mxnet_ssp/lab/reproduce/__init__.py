"""Reproduce the comparisons of the DSSP paper (Zhao et al., ICDCS 2019, Section V) in one command.

::

    python -m mxnet_ssp.lab.reproduce --preset quick --out results/quick          # minutes, here
    python -m mxnet_ssp.lab.reproduce --preset paper-alexnet --out results/alexnet
    mxnet-ssp-reproduce --list-presets                                         # the same

A *grid* is a set of *arms* (a paradigm with its settings: ``bsp``, ``asp``,
``ssp3``, ``dssp``, ``dssp-paper``, ...) times a number of *trials*.  Every
run is one local parameter-server job of the training script
(``python -m mxnet_ssp.lab.train_cifar``, installed with the package)
started through ``python -m mxnet_ssp.launch``, one after the other, with
``OMP_NUM_THREADS=1``, ``MXNET_SSP_METRICS_DIR`` pointing into its run
directory and a time limit.  Everything goes under ``--out``:

* ``runs/<arm>/trial<k>/`` -- what the job wrote (``train-worker<r>.jsonl``,
  ``eval.jsonl``, ``summary.json``, the stores' ``worker-<r>.jsonl`` and
  ``controller.jsonl``), the launcher's output ``job.log`` and ``run.json``,
  the marker written last that says the run is finished and how it ended;
* ``plots/*.png`` -- test accuracy against wall time, in the style of the
  paper's Figures 3 and 4;
* ``report.md`` -- the analogue of Table I and the numbers that explain it;
  ``results.json`` -- the same numbers for programs;
* ``grid.json`` -- the settings of the grid; ``reproduce.log`` -- what each
  invocation did.

A grid is resumable: a run whose ``run.json`` says it finished, with the
same settings, is skipped; any other run directory (half written by a killed
grid, or failed) is deleted and run again.

The modules, in the order a grid flows through them:

======================  ==============================================================
:mod:`.presets`         the named grids (presets); their arms: :mod:`~mxnet_ssp.lab.cluster_model.arms`
:mod:`.grid`            a preset with the options applied, checked; the runs it makes
:mod:`.runner`          checks before the first run, the data subset, running the runs
:mod:`.json_files`      the JSON files of a run directory
:mod:`.stats`           the report's statistics: pure, on plain lists
:mod:`.collect`         reading the runs back
:mod:`.report`          the median trials, ``report.md`` and ``results.json``
:mod:`.paired`          intervals of medians at order statistics, arms paired by seed
:mod:`.verdicts`        the lab's claims decided seed by seed; the simulator beside it
:mod:`.lab_report`      the lab's sections of ``report.md``
:mod:`.power_analysis`  the intervals' coverage and the claims' power, by simulation
:mod:`.plots`           accuracy against wall time (matplotlib)
:mod:`.cli`             the command line (:func:`main`)
======================  ==============================================================
"""
from .cli import main
from .collect import collect_run
from .grid import Grid, resolve_grid, run_command
from ..cluster_model.arms import Arm, parse_arm
from .presets import PRESETS, Preset
from .report import build_report
from .stats import (average_curves, lead_from_train_logs, median_trial,
                    staleness_from_train_logs, time_to_target)

__all__ = ['Arm', 'Preset', 'Grid', 'PRESETS', 'parse_arm', 'resolve_grid', 'run_command',
           'time_to_target', 'median_trial', 'average_curves', 'lead_from_train_logs',
           'staleness_from_train_logs', 'collect_run', 'build_report', 'main']
