"""Reproduce the comparisons of the DSSP paper (Zhao et al., ICDCS 2019, Section V) in one command.

::

    python -m mxnet_ssp.reproduce --preset quick --out results/quick          # minutes, here
    python -m mxnet_ssp.reproduce --preset paper-alexnet --out results/alexnet
    mxnet-ssp-reproduce --list-presets                                         # the same

A *grid* is a set of *arms* (a paradigm with its settings: ``bsp``, ``asp``,
``ssp3``, ``dssp``, ``dssp-paper``, ...) times a number of *trials*.  Every
run is one local parameter-server job of the training script
(``python -m mxnet_ssp.experiments.train_cifar``, installed with the package)
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

The median trial (see :func:`median_trial`) is chosen the way the paper did:
the trial with the median final test accuracy; every number of an arm's row
comes from that one trial.  The functions that compute the report
(:func:`time_to_target`, :func:`median_trial`, :func:`average_curves`,
:func:`lead_from_train_logs`, :func:`staleness_from_train_logs`) are pure and
take plain lists, so they are tested on synthetic data.
"""
import argparse
import bisect
import dataclasses
import datetime
import glob
import json
import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

__all__ = ['Arm', 'Preset', 'Grid', 'PRESETS', 'parse_arm', 'resolve_grid', 'run_command',
           'time_to_target', 'median_trial', 'average_curves', 'lead_from_train_logs',
           'staleness_from_train_logs', 'collect_run', 'build_report', 'main']

logger = logging.getLogger(__name__)

#: the training script every run starts (by module: it is installed with the package);
#: ``--train-script PATH`` runs another script instead, e.g. a modified copy
TRAIN_MODULE = 'mxnet_ssp.experiments.train_cifar'

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2      # interrupted: 128 + the signal number
#: models train_cifar.py builds itself; any other name is a GluonCV model
BUILTIN_MODELS = ('mlp', 'alexnet-small')
MARKER = 'run.json'
#: seconds a run may take beyond the launcher's own --timeout before it is stopped from here
TIMEOUT_GRACE = 120.0

MATPLOTLIB_HINT = ("pip install 'matplotlib<3.9' 'numpy<1.24' (numpy 1.24 breaks MXNet 1.9.1), "
                   "or pass --no-plots")


class UsageError(Exception):
    """Bad input found before any job started (exit code 2)."""


# ---------------------------------------------------------------------------
# arms (a paradigm and its settings)
# ---------------------------------------------------------------------------
ARM_FORMS = ('bsp, asp, ssp<S> (e.g. ssp3), dssp[<SL>-<SU>][-paper] (e.g. dssp = [3, 15] '
             'bounded, dssp-paper, dssp2-10), or ssp for every SSP threshold of the preset')
_SSP_RE = re.compile(r'^ssp(\d+)$')
_DSSP_RE = re.compile(r'^dssp(?:(\d+)-(\d+))?(?:-(paper|bounded))?$')


@dataclass(frozen=True)
class Arm:
    """One paradigm with its settings: a row of the report.

    Attributes
    ----------
    name : str
        Canonical name, also the run directory: ``bsp``, ``asp``, ``ssp3``,
        ``dssp`` ([3, 15] bounded), ``dssp-paper``, ``dssp2-10``, ...
    family : str
        ``bsp``, ``asp``, ``ssp`` or ``dssp``.
    kvstore : str
        train_cifar.py's ``--kvstore``.
    staleness : tuple of int
        ``(s,)`` for SSP, ``(sL, sU)`` for DSSP, ``()`` otherwise.
    mode : str or None
        DSSP mode, ``bounded`` or ``paper``.
    """
    name: str
    family: str
    kvstore: str
    staleness: tuple = ()
    mode: str = None

    @property
    def label(self):
        """The name in tables and legends: ``SSP s=3``, ``DSSP [3,15] paper``, ..."""
        if self.family == 'ssp':
            return 'SSP s=%d' % self.staleness[0]
        if self.family == 'dssp':
            return 'DSSP [%d,%d]%s' % (self.staleness + (' paper' if self.mode == 'paper' else '',))
        return self.family.upper()

    def train_flags(self):
        """train_cifar.py flags that select this arm's store and settings.

        BSP applies the mean of the workers' gradients (``--sync-average``),
        as MXNet's Module did in the paper's runs, not gluon.Trainer's sum.
        """
        flags = ['--kvstore', self.kvstore]
        if self.family == 'bsp':
            flags.append('--sync-average')
        elif self.family == 'ssp':
            flags += ['--staleness', str(self.staleness[0])]
        elif self.family == 'dssp':
            flags += ['--staleness', '%d,%d' % self.staleness, '--dssp-mode', self.mode]
        return flags


def parse_arm(name):
    """The :class:`Arm` called `name` (see :data:`ARM_FORMS`).

    Raises
    ------
    ValueError
        `name` is not one of the accepted forms, or its thresholds are inconsistent.
    """
    text = name.strip().lower()
    if text in ('bsp', 'asp'):
        return Arm(text, text, 'dist_sync' if text == 'bsp' else 'dist_async')
    match = _SSP_RE.match(text)
    if match:
        return Arm('ssp%d' % int(match.group(1)), 'ssp', 'dist_ssp', (int(match.group(1)),))
    match = _DSSP_RE.match(text)
    if match:
        low, high = (3, 15) if match.group(1) is None else (int(match.group(1)),
                                                            int(match.group(2)))
        if low > high:
            raise ValueError('%r has sL %d > sU %d' % (name, low, high))
        mode = match.group(3) or 'bounded'
        canonical = 'dssp' + ('' if (low, high) == (3, 15) else '%d-%d' % (low, high))
        canonical += '-paper' if mode == 'paper' else ''
        return Arm(canonical, 'dssp', 'dist_dssp', (low, high), mode)
    raise ValueError('%r is not a paradigm' % name)


# ---------------------------------------------------------------------------
# presets
# ---------------------------------------------------------------------------
SSP_RANGE = tuple('ssp%d' % s for s in range(3, 16))

#: Table I of the paper: seconds to reach 0.67 / 0.68 test accuracy, ResNet-110 on CIFAR-100,
#: two workers (GTX 1080 Ti and GTX 1060); None: never reached
PAPER_TABLE_I = (('BSP', 6159.2, None), ('ASP', 2993.1, 3017.2), ('SSP s=3', 5678.2, None),
                 ('SSP s=6', 5703.8, 6908.2), ('SSP s=15', 5564.9, 7255.6),
                 ('DSSP [3,15]', 3016.4, 3046.3))


@dataclass(frozen=True)
class Preset:
    """A named grid.  Epoch counts are per worker, over the worker's own shard."""
    name: str
    description: str
    model: str
    dataset: str
    workers: int
    batch_size: int
    lr: float
    epochs: int
    arms: tuple
    targets: tuple
    timeout_s: float
    cost: str
    momentum: float = 0.9
    wd: float = 1e-4
    lr_decay: float = None
    lr_decay_epochs: tuple = ()
    slowdown: str = None
    trials: int = 3
    servers: int = 1
    num_iterations: int = None
    paper_table: tuple = ()


PRESETS = {p.name: p for p in (
    Preset('paper-alexnet',
           'Figure 3a/3b: downsized AlexNet (3 conv + 2 FC) on CIFAR-10, 4 homogeneous workers',
           model='alexnet-small', dataset='cifar10', workers=4, batch_size=128, lr=0.001,
           epochs=300, arms=('bsp', 'asp') + SSP_RANGE + ('dssp', 'dssp-paper'),
           targets=(0.65, 0.70), timeout_s=48 * 3600,
           cost='51 runs of 29,100 iterations per worker; 0.14-0.24 s per iteration of one '
                'process here, 4 workers share 2 cores: about 2-4 h per run, 5-8 days for the '
                'grid (estimated with --epochs-scale 0.1 --data-fraction 0.1, the full test '
                'set still evaluated every epoch: 2-4 h)'),
    Preset('paper-resnet50',
           'Figure 3c/3d: ResNet-50 (CIFAR-style, 6n+2 layers with n = 8) on CIFAR-100, '
           '4 homogeneous workers, lr decayed x0.1 at epochs 200 and 250',
           model='cifar_resnet50_v1', dataset='cifar100', workers=4, batch_size=128, lr=0.05,
           epochs=300, lr_decay=0.1, lr_decay_epochs=(200, 250),
           arms=('bsp', 'asp') + SSP_RANGE + ('dssp', 'dssp-paper'), targets=(0.60, 0.65),
           timeout_s=14 * 24 * 3600,
           cost='51 runs of 29,100 iterations per worker; about 3.5 s per iteration of one '
                'process here (estimated from ResNet-20\'s 1.4 s), 4 workers on 2 cores: about '
                '2-3 days per run, months for the grid: a GPU cluster job'),
    Preset('paper-resnet110',
           'Figure 3e/3f: ResNet-110 on CIFAR-100, 4 homogeneous workers, lr decayed x0.1 at '
           'epochs 200 and 250',
           model='cifar_resnet110_v1', dataset='cifar100', workers=4, batch_size=128, lr=0.05,
           epochs=300, lr_decay=0.1, lr_decay_epochs=(200, 250),
           arms=('bsp', 'asp') + SSP_RANGE + ('dssp', 'dssp-paper'), targets=(0.67, 0.68),
           timeout_s=14 * 24 * 3600,
           cost='51 runs of 29,100 iterations per worker; about 7.7 s per iteration of one '
                'process here (estimated from ResNet-20\'s 1.4 s): about 5 days per run, '
                'about 8 months for the grid: a GPU cluster job'),
    Preset('paper-mixed',
           'Figure 4 / Table I: ResNet-110 on CIFAR-100, 2 workers, worker 1 2.5x slower '
           '(emulates the GTX 1060 next to the GTX 1080 Ti), lr decayed x0.1 at epochs 200 '
           'and 250',
           model='cifar_resnet110_v1', dataset='cifar100', workers=2, batch_size=128, lr=0.05,
           epochs=300, lr_decay=0.1, lr_decay_epochs=(200, 250), slowdown='1:2.5',
           arms=('bsp', 'asp', 'ssp3', 'ssp6', 'ssp15', 'dssp', 'dssp-paper'),
           targets=(0.67, 0.68), timeout_s=30 * 24 * 3600, paper_table=PAPER_TABLE_I,
           cost='21 runs of 58,500 iterations per worker; about 7.7 s per iteration here '
                '(estimated), the slow worker 2.5x that: about 2 weeks per run, 9 months for '
                'the grid: a GPU job'),
    Preset('quick',
           'Table I in miniature: downsized AlexNet on the bundled 8x8 digits, 2 workers, '
           'worker 1 2.5x slower',
           model='alexnet-small', dataset='digits', workers=2, batch_size=128, lr=0.01,
           epochs=60, slowdown='1:2.5',
           arms=('bsp', 'asp', 'ssp3', 'ssp6', 'ssp15', 'dssp', 'dssp-paper'),
           targets=(0.95, 0.97), timeout_s=600, paper_table=PAPER_TABLE_I,
           cost='21 runs of 11-15 s each (about 5 s of it job start-up): about 4.5 minutes '
                'here'),
    Preset('tiny',
           'smoke test: downsized AlexNet on the digits, 2 workers, worker 1 2.5x slower, '
           '2 epochs',
           model='alexnet-small', dataset='digits', workers=2, batch_size=64, lr=0.05,
           epochs=2, slowdown='1:2.5', arms=('bsp', 'asp', 'ssp3', 'dssp', 'dssp-paper'),
           targets=(0.5, 0.8), timeout_s=120, trials=1,
           cost='5 runs of about 5 s each (mostly job start-up): about 25 s here'),
)}


# ---------------------------------------------------------------------------
# the resolved grid
# ---------------------------------------------------------------------------
@dataclass
class Grid:
    """A preset with the command line's overrides applied: everything a run needs."""
    preset: str
    model: str
    dataset: str
    data_dir: str
    data_fraction: float
    workers: int
    servers: int
    batch_size: int
    lr: float
    momentum: float
    wd: float
    epochs: int
    lr_decay: float
    lr_decay_epochs: tuple
    slowdown: str
    num_iterations: int
    seed: int
    arms: list
    trials: int
    targets: tuple
    timeout_s: float
    #: path of the training script given with --train-script; None: :data:`TRAIN_MODULE`
    train_script: str
    paper_table: tuple = ()
    #: the data directory runs use (a subset under --out when data_fraction < 1)
    run_data_dir: str = None
    #: flags added to every run that change no result (see check_train_script)
    extra_flags: list = dataclasses.field(default_factory=list)

    #: fields that change what a run computes: an --out directory holds one such grid
    IDENTITY = ('preset', 'model', 'dataset', 'data_fraction', 'workers', 'servers',
                'batch_size', 'lr', 'momentum', 'wd', 'epochs', 'lr_decay', 'lr_decay_epochs',
                'slowdown', 'num_iterations', 'seed')

    def train_argv(self, python=None):
        """The command that starts the training script (before its flags)."""
        python = python or sys.executable
        if self.train_script is None:
            return [python, '-m', TRAIN_MODULE]
        return [python, self.train_script]

    @property
    def train_script_name(self):
        """The training script in messages: its path, or ``python -m <module>``."""
        return self.train_script or 'python -m ' + TRAIN_MODULE

    def identity(self):
        """The IDENTITY fields as a JSON-ready dict (what ``grid.json`` holds)."""
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in ((k, getattr(self, k)) for k in self.IDENTITY)}


def _bad(flag, value, accepted):
    return UsageError('%s %r is not valid: expected %s' % (flag, value, accepted))


def _positive_float(flag, text, accepted='a number > 0'):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise _bad(flag, text, accepted) from None
    if not (math.isfinite(value) and value > 0):
        raise _bad(flag, text, accepted)
    return value


def _check_slowdown(text, workers):
    for item in filter(None, (x.strip() for x in text.split(','))):
        rank, sep, factor = item.partition(':')
        try:
            ok = bool(sep) and 0 <= int(rank) < workers and float(factor) >= 1
        except ValueError:
            ok = False
        if not ok:
            raise _bad('--slowdown', text, 'RANK:FACTOR[,RANK:FACTOR] with ranks in 0..%d '
                       '(%d workers) and factors >= 1, e.g. 1:2.5' % (workers - 1, workers))


def resolve_grid(args):
    """Apply the command line `args` to their preset; raise :class:`UsageError` on bad input."""
    if args.preset not in PRESETS:
        raise _bad('--preset', args.preset, 'one of %s' % ', '.join(PRESETS))
    preset = PRESETS[args.preset]
    scale = 1.0 if args.epochs_scale is None else _positive_float(
        '--epochs-scale', args.epochs_scale, 'a number > 0 (e.g. 0.1 for a tenth of the epochs)')
    epochs = max(1, int(round(preset.epochs * scale)))
    decay_epochs = tuple(sorted({min(epochs, max(1, int(round(e * scale))))
                                 for e in preset.lr_decay_epochs}))
    fraction = 1.0
    if args.data_fraction is not None:
        fraction = _positive_float('--data-fraction', args.data_fraction,
                                   'a number in (0, 1] (the share of the training set)')
        if fraction > 1:
            raise _bad('--data-fraction', args.data_fraction, 'a number in (0, 1]')
        if fraction < 1 and preset.dataset == 'digits':
            raise _bad('--data-fraction', args.data_fraction,
                       '1 with preset %s: the digits are already tiny; a fraction applies to '
                       'the CIFAR presets' % preset.name)
    workers = preset.workers
    if args.workers is not None:
        try:
            workers = int(args.workers)
        except ValueError:
            raise _bad('--workers', args.workers, 'an integer >= 2') from None
        if workers < 2:
            raise _bad('--workers', args.workers, 'an integer >= 2 (the paradigms differ only '
                       'with several workers)')
    trials = preset.trials
    if args.trials is not None:
        try:
            trials = int(args.trials)
        except ValueError:
            raise _bad('--trials', args.trials, 'an integer >= 1') from None
        if trials < 1:
            raise _bad('--trials', args.trials, 'an integer >= 1')
    targets = preset.targets
    if args.targets is not None:
        try:
            targets = tuple(float(x) for x in args.targets.split(',') if x.strip())
        except ValueError:
            targets = ()
        if not targets or not all(0 < t <= 1 for t in targets):
            raise _bad('--targets', args.targets,
                       'comma-separated test accuracies in (0, 1], e.g. 0.67,0.68')
    timeout = preset.timeout_s if args.timeout is None else _positive_float(
        '--timeout', args.timeout, 'a number of seconds > 0')
    slowdown = preset.slowdown if args.slowdown is None else (args.slowdown.strip() or None)
    if slowdown:
        _check_slowdown(slowdown, workers)
    arms = _select_arms(args.paradigms, preset)
    model = args.model or preset.model
    train_script = None
    if args.train_script is not None:
        train_script = os.path.abspath(os.path.expanduser(args.train_script))
        if not os.path.isfile(train_script):
            raise _bad('--train-script', args.train_script,
                       'the path of a training script with the flags of train_cifar.py (no '
                       'such file; leave the flag out to run the installed '
                       'mxnet_ssp.experiments.train_cifar)')
    data_dir = os.path.abspath(os.path.expanduser(
        args.data_dir or os.path.join('~', '.mxnet', 'datasets', 'cifar')))
    return Grid(preset=preset.name, model=model, dataset=preset.dataset, data_dir=data_dir,
                data_fraction=fraction, workers=workers, servers=preset.servers,
                batch_size=preset.batch_size, lr=preset.lr, momentum=preset.momentum,
                wd=preset.wd, epochs=epochs, lr_decay=preset.lr_decay,
                lr_decay_epochs=decay_epochs, slowdown=slowdown,
                num_iterations=preset.num_iterations, seed=args.seed, arms=arms, trials=trials,
                targets=targets, timeout_s=timeout, train_script=train_script,
                paper_table=preset.paper_table)


def _select_arms(text, preset):
    if text is None:
        return [parse_arm(n) for n in preset.arms]
    arms = []
    for item in (x.strip() for x in text.split(',')):
        if not item:
            continue
        if item.lower() == 'ssp':
            chosen = [parse_arm(n) for n in preset.arms if _SSP_RE.match(n)]
        else:
            try:
                chosen = [parse_arm(item)]
            except ValueError:
                raise _bad('--paradigms', text, 'a comma-separated list of ' + ARM_FORMS) from None
        arms += [a for a in chosen if a not in arms]
    if not arms:
        raise _bad('--paradigms', text, 'a comma-separated list of ' + ARM_FORMS)
    return arms


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------
def run_dir(out, arm, trial):
    """Directory of trial `trial` (1-based) of `arm` under `out`."""
    return os.path.join(out, 'runs', arm.name, 'trial%d' % trial)


def trial_seed(grid, trial):
    """Seed of trial `trial`: every arm's trial k uses the same seed (paired trials)."""
    return grid.seed + trial - 1


def run_command(grid, arm, trial, directory):
    """The launcher command line of one run (a list of arguments)."""
    python = sys.executable
    cmd = [python, '-m', 'mxnet_ssp.launch', '-n', str(grid.workers), '-s', str(grid.servers),
           '--launcher', 'local', '--timeout', '%.6g' % grid.timeout_s
           if grid.timeout_s < 1e6 else '%.0f' % grid.timeout_s,
           *grid.train_argv(python),
           '--model', grid.model, '--dataset', grid.dataset,
           '--batch-size', str(grid.batch_size), '--num-epochs', str(grid.epochs),
           '--lr', '%g' % grid.lr, '--momentum', '%g' % grid.momentum, '--wd', '%g' % grid.wd,
           '--seed', str(trial_seed(grid, trial)), '--save-dir', directory,
           '--log-interval', '0'] + arm.train_flags() + list(grid.extra_flags)
    if grid.dataset != 'digits':
        cmd += ['--data-dir', grid.run_data_dir or grid.data_dir]
    if grid.slowdown:
        cmd += ['--slowdown', grid.slowdown]
    if grid.num_iterations:
        cmd += ['--num-iterations', str(grid.num_iterations)]
    if grid.lr_decay is not None and grid.lr_decay_epochs:
        cmd += ['--lr-decay', '%g' % grid.lr_decay,
                '--lr-decay-epoch', ','.join(str(e) for e in grid.lr_decay_epochs)]
    return cmd


def run_env(directory, environ=None):
    """Environment of a run: one OpenMP thread, metrics in `directory`.

    DMLC_* and the staleness settings of the calling shell are dropped: every
    setting of a run is on its command line.
    """
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if not k.startswith('DMLC_') and k not in (
               'MXNET_SSP_STALENESS', 'MXNET_SSP_DSSP_MODE', 'MXNET_SSP_SOFTSYNC_SPLITS')}
    env['OMP_NUM_THREADS'] = '1'
    env['MXNET_SSP_METRICS_DIR'] = directory
    return env


#: train_cifar.py flags passed when the script accepts them (they change no result): no
#: progress bar in job.log, no periodic checkpoints (only the final model is kept)
OPTIONAL_FLAGS = (('--no-progress',), ('--save-period', '0'))


def script_flags(grid):
    """The flags the grid's training script accepts, read from its ``--help`` (empty if that
    fails)."""
    env = run_env('off')
    try:
        proc = subprocess.run(grid.train_argv() + ['--help'], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', proc.stdout))


def check_train_script(grid, keep_checkpoints=False):
    """Problems that would make every run fail: missing train_cifar.py flags or packages.

    Returns a list of messages (empty if none) and sets ``grid.extra_flags``
    to the optional flags the script accepts (without ``--save-period 0``
    when `keep_checkpoints`).
    """
    problems = []
    if grid.model not in BUILTIN_MODELS:
        import importlib.util
        if importlib.util.find_spec('gluoncv') is None:
            problems.append(
                "preset %s trains the GluonCV model %s, but gluoncv is not installed: python -m "
                "pip install '.[gluoncv]' in the checkout (docs/train_scripts.md gives the pins "
                "that keep numpy below 1.24)" % (grid.preset, grid.model))
    known = script_flags(grid)
    needed = ['--lr-decay', '--lr-decay-epoch'] if grid.lr_decay is not None else []
    if any(arm.family == 'bsp' for arm in grid.arms):
        needed.append('--sync-average')
    missing = [f for f in needed if f not in known]
    if known and missing:                # (no flags read: the runs will say what is wrong)
        problems.append('the grid needs %s of %s, which does not accept %s (yet)'
                        % (' '.join(needed), grid.train_script_name, ', '.join(missing)))
    grid.extra_flags = [part for flag in OPTIONAL_FLAGS if flag[0] in known
                        and not (keep_checkpoints and flag[0] == '--save-period')
                        for part in flag]
    return problems


#: where mxnet_ssp.data looks for each CIFAR dataset under --data-dir (any one will do)
CIFAR_FILES = {
    'cifar10': ('cifar-10-batches-py', 'cifar-10-batches-bin', 'cifar-10-python.tar.gz',
                'cifar-10-binary.tar.gz'),
    'cifar100': ('cifar-100-python', 'cifar-100-binary', 'cifar-100-python.tar.gz',
                 'cifar-100-binary.tar.gz'),
}


def check_dataset(grid, download):
    """Problems with the grid's dataset (a list of messages, empty if none).

    The digits ship with scikit-learn.  A CIFAR dataset must be under
    ``grid.data_dir``; when it is not and `download` is true, it is
    downloaded now, once, instead of by every worker of the first run.
    """
    if grid.dataset not in CIFAR_FILES:
        return []
    if any(os.path.exists(os.path.join(grid.data_dir, name))
           for name in CIFAR_FILES[grid.dataset]):
        return []
    if not download:
        return ['%s is not under --data-dir %s (the first run would download it)'
                % (grid.dataset, grid.data_dir)]
    from .experiments import data as datasets
    sys.stderr.write('reproduce: %s is not under %s: downloading it\n'
                     % (grid.dataset, grid.data_dir))
    try:
        datasets.load(grid.dataset, grid.data_dir)
    except (OSError, ValueError) as err:
        return [str(err)]
    return []


# ---------------------------------------------------------------------------
# data subsets (--data-fraction)
# ---------------------------------------------------------------------------
def subset_dir(out, grid):
    return os.path.join(out, 'data', '%s-fraction%g' % (grid.dataset, grid.data_fraction))


def prepare_subset(out, grid):
    """Write a stratified `grid.data_fraction` of the training set (full test set) under `out`.

    The subset is in the CIFAR python format, so train_cifar.py reads it with
    ``--data-dir``; it is made once and reused.  Returns its directory.
    """
    from .experiments import data as datasets
    target = subset_dir(out, grid)
    done = os.path.join(target, 'SUBSET.json')
    if os.path.isfile(done):
        return target
    full = datasets.load(grid.dataset, grid.data_dir)
    rng = np.random.RandomState(grid.seed)
    keep = []
    for label in np.unique(full.train_label):
        members = np.flatnonzero(full.train_label == label)
        keep.append(rng.permutation(members)[:max(1, int(round(grid.data_fraction
                                                               * len(members))))])
    keep = np.sort(np.concatenate(keep))

    def rows(images):
        return np.round(images * 255.0).astype(np.uint8).reshape(len(images), -1)

    import pickle
    if grid.dataset == 'cifar10':
        folder, label_key = os.path.join(target, 'cifar-10-batches-py'), b'labels'
        parts = np.array_split(keep, 5)
        files = [('data_batch_%d' % (i + 1), part) for i, part in enumerate(parts)]
        test_name = 'test_batch'
    else:
        folder, label_key = os.path.join(target, 'cifar-100-python'), b'fine_labels'
        files, test_name = [('train', keep)], 'test'
    os.makedirs(folder, exist_ok=True)
    for name, index in files:
        with open(os.path.join(folder, name), 'wb') as f:
            pickle.dump({b'data': rows(full.train_data[index]),
                         label_key: full.train_label[index].tolist()}, f)
    with open(os.path.join(folder, test_name), 'wb') as f:
        pickle.dump({b'data': rows(full.test_data), label_key: full.test_label.tolist()}, f)
    _write_json(done, {'dataset': grid.dataset, 'fraction': grid.data_fraction,
                       'train_images': int(len(keep)), 'source': full.source,
                       'seed': grid.seed})
    return target


# ---------------------------------------------------------------------------
# reading a run
# ---------------------------------------------------------------------------
def _read_jsonl(path):
    """Records of a JSON Lines file; a torn last line (killed writer) is ignored."""
    records = []
    if not os.path.isfile(path):
        return records
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    break
    return records


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_json(path, obj):
    """Write `obj` to `path` atomically (a reader sees the old file or the whole new one)."""
    fd, tmp = tempfile.mkstemp(prefix='.tmp-', dir=os.path.dirname(path) or '.')
    with os.fdopen(fd, 'w') as f:
        json.dump(obj, f, indent=2)
        f.write('\n')
    os.replace(tmp, path)


def time_to_target(curve, target):
    """Seconds until the test accuracy first reached `target`, or None if it never did.

    Parameters
    ----------
    curve : list of (seconds, accuracy)
        Evaluations in time order.
    """
    for seconds, accuracy in curve:
        if accuracy >= target:
            return seconds
    return None


def median_trial(trials):
    """The trial with the median final test accuracy (the paper's choice).

    Parameters
    ----------
    trials : list of dict
        Each with ``final_accuracy`` and ``trial``.

    Returns
    -------
    dict or None
        Sorted by (final accuracy, trial number), the element at index
        ``(n - 1) // 2``: the median for an odd count, the lower of the two
        middle trials for an even count.  None for an empty list.
    """
    ranked = sorted(trials, key=lambda t: (t['final_accuracy'], t['trial']))
    return ranked[(len(ranked) - 1) // 2] if ranked else None


def average_curves(curves):
    """Mean of accuracy-vs-time curves on a common time grid.

    Each curve is linear between its points and holds its last accuracy after
    its end (a finished run keeps its final model).  The grid is the union of
    all the curves' times from the latest first point, where every curve is
    defined, to the latest last point.  Between grid points the mean is exact,
    because every curve is linear there.

    Parameters
    ----------
    curves : list of list of (seconds, accuracy)

    Returns
    -------
    list of (seconds, mean accuracy)
        Empty if no curve has a point.
    """
    curves = [sorted(c) for c in curves if c]
    if not curves:
        return []
    start = max(c[0][0] for c in curves)
    times = sorted({t for c in curves for t, _ in c if t >= start})
    grid = np.asarray(times, dtype=float)
    values = [np.interp(grid, [t for t, _ in c], [a for _, a in c]) for c in curves]
    mean = np.mean(values, axis=0)
    return [(float(t), float(a)) for t, a in zip(grid, mean)]


def lead_from_train_logs(logs):
    """Leads over the slowest worker, seen at the end of every iteration.

    Parameters
    ----------
    logs : dict of rank -> list of records with ``time`` and ``iteration``

    Returns
    -------
    (max lead, mean lead) : (int, float)
        At the end of each iteration of each worker, its iteration count
        minus the smallest iteration count among the workers that have not
        finished yet (a finished worker no longer holds anyone back, as in
        the controller).  (0, 0.0) without records.
    """
    events = sorted((r['time'], rank, r['iteration']) for rank, recs in logs.items()
                    for r in recs)
    last = {rank: max(r['iteration'] for r in recs) for rank, recs in logs.items() if recs}
    count = {rank: 0 for rank in logs}
    leads = []
    for _, rank, iteration in events:
        count[rank] = iteration
        active = [c for r, c in count.items() if r == rank or c < last.get(r, 0)]
        leads.append(iteration - min(active))
    if not leads:
        return 0, 0.0
    return max(leads), float(np.mean(leads))


def staleness_from_train_logs(logs):
    """Estimated staleness of every gradient: others' updates between its pull and its push.

    For iteration i > 1 of worker r, the weights it computed on were pulled by
    the end of its iteration i - 1, and its gradient was pushed when its step
    began (``time - step_s``: the step is push, wait for OK, pull).  Its
    staleness is estimated as the number of iterations the other workers
    ended in between; each is one update on the servers under ASP, SSP and
    DSSP.  (BSP has none; the caller reports 0.)  A hold after the push does
    not count: the gradient was applied before it.

    Returns
    -------
    list of int
        One value per iteration after each worker's first.
    """
    ends = {rank: sorted(r['time'] for r in recs) for rank, recs in logs.items()}
    values = []
    for rank, recs in logs.items():
        recs = sorted(recs, key=lambda r: r['time'])
        others = [t for r, t in ends.items() if r != rank]
        for previous, current in zip(recs, recs[1:]):
            pulled = previous['time']
            pushed = max(pulled, current['time'] - current.get('step_s', 0.0))
            values.append(sum(bisect.bisect_right(t, pushed) - bisect.bisect_right(t, pulled)
                              for t in others))
    return values


def collect_run(directory, arm):
    """The numbers of one finished run, from the files in `directory`.

    Returns
    -------
    dict
        ``curve`` [(seconds, accuracy)], ``final_accuracy``, ``train_time_s``,
        per-rank ``iterations``, ``it_per_s``, ``compute_ms`` (median compute
        plus emulated slowdown), ``step_ms`` (median push/pull/wait), the
        leads from the train logs, the stores' leads at release, grants and
        waiting, and the gradient staleness (servers' histograms when there
        are, else the estimate from the train logs).
    """
    summary = _read_json(os.path.join(directory, 'summary.json')) or {}
    evals = _read_jsonl(os.path.join(directory, 'eval.jsonl'))
    curve = [(float(e['elapsed_s']), float(e['accuracy'])) for e in evals]
    logs = {}
    for path in glob.glob(os.path.join(directory, 'train-worker*.jsonl')):
        records = _read_jsonl(path)
        if records:
            logs[int(records[0]['rank'])] = records
    ranks = sorted(logs)
    result = {
        'curve': curve,
        'final_accuracy': summary.get('final_accuracy', curve[-1][1] if curve else None),
        'train_time_s': summary.get('wall_time_s'),
        'iterations': {r: logs[r][-1]['iteration'] for r in ranks},
        'it_per_s': {}, 'compute_ms': {}, 'step_ms': {},
    }
    busy = {}
    for r in ranks:
        recs = logs[r]
        busy[r] = sum(x['compute_s'] + x.get('sleep_s', 0.0) + x['step_s'] for x in recs)
        span = recs[-1]['time'] - recs[0]['time'] + (
            recs[0]['compute_s'] + recs[0].get('sleep_s', 0.0) + recs[0]['step_s'])
        result['it_per_s'][r] = len(recs) / span if span > 0 else None
        result['compute_ms'][r] = 1e3 * float(np.median(
            [x['compute_s'] + x.get('sleep_s', 0.0) for x in recs]))
        result['step_ms'][r] = 1e3 * float(np.median([x['step_s'] for x in recs]))
    result['max_lead'], result['mean_lead'] = lead_from_train_logs(logs)

    # the SSP stores' own metrics: lead at release, grants, waiting for OK
    store = {}
    for path in glob.glob(os.path.join(directory, 'worker-*.jsonl')):
        records = _read_jsonl(path)
        if records:
            store[int(records[0]['rank'])] = records
    if store:
        result['release_lead_mean'] = {r: float(np.mean([x['lead'] for x in recs]))
                                       for r, recs in sorted(store.items())}
        result['release_lead_max'] = max(x['lead'] for recs in store.values() for x in recs)
        result['grants'] = sum(1 for recs in store.values() for x in recs if x.get('granted'))
        result['longest_wait_s'] = max(x['wait_s'] for recs in store.values() for x in recs)
        pushes = [e for e in _read_jsonl(os.path.join(directory, 'controller.jsonl'))
                  if e.get('event') == 'push']
        if pushes:
            result['holds'] = sum(1 for e in pushes if e.get('decision') == 'wait')
        result['wait_share'] = {r: (sum(x['wait_s'] for x in recs) / busy[r]
                                    if busy.get(r) else None)
                                for r, recs in sorted(store.items())}

    histogram = {}
    for path in glob.glob(os.path.join(directory, 'server-*-staleness.json')):
        data = _read_json(path) or {}
        for tau, n in data.get('histogram', {}).items():
            histogram[int(tau)] = histogram.get(int(tau), 0) + int(n)
    if histogram:
        total = sum(histogram.values())
        result['staleness'] = {
            'source': 'servers', 'mean': sum(t * n for t, n in histogram.items()) / total,
            'max': max(histogram)}
    elif arm.family == 'bsp':
        result['staleness'] = {'source': 'bsp', 'mean': 0.0, 'max': 0}
    else:
        values = staleness_from_train_logs(logs)
        result['staleness'] = {'source': 'estimate',
                               'mean': float(np.mean(values)) if values else None,
                               'max': max(values) if values else None}
    return result


# ---------------------------------------------------------------------------
# running the grid
# ---------------------------------------------------------------------------
class _Stop(Exception):
    """SIGTERM or SIGINT arrived while a run was going on."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def run_signature(grid, arm, trial):
    """What makes a run the same run: the grid's settings, the arm and the seed.

    Paths, the Python executable and the time limit are left out, so a moved
    --out directory or a new --timeout does not redo finished runs.
    """
    return dict(grid.identity(), arm=arm.name, seed=trial_seed(grid, trial))


def is_done(directory, signature):
    """True if `directory` holds a finished, successful run with this `signature`."""
    marker = _read_json(os.path.join(directory, MARKER))
    return bool(marker and marker.get('status') == 'ok'
                and marker.get('signature') == signature
                and os.path.isfile(os.path.join(directory, 'summary.json')))


def _tail(path, lines=12):
    try:
        with open(path, errors='replace') as f:
            return f.read().splitlines()[-lines:]
    except OSError:
        return []


def _failure_reason(code, directory):
    """A one-line reason for a failed run: its exit code, what the job printed last about an
    error, and the launcher's verdict (which process stopped the job)."""
    if code == 124:
        head = 'timed out (launcher --timeout)'
    elif code is None:
        head = 'stopped'
    else:
        head = 'exit code %d' % code
    tail = [line.strip() for line in _tail(os.path.join(directory, 'job.log'), 400)
            if line.strip() and not line.startswith('$ ')]
    launcher = [line for line in tail if line.startswith('mxnet-ssp-launch:')]
    output = [line for line in tail if not line.startswith('mxnet-ssp-launch:')]
    errors = ([line for line in output if ': error:' in line]
              or [line for line in output
                  if re.search(r'error|exception|traceback|killed|failed', line, re.I)])
    parts = [head]
    if errors or output:
        parts.append((errors or output)[-1][:300])
    if launcher:
        parts.append(launcher[-1][len('mxnet-ssp-launch:'):].strip()[:200])
    return ': '.join(parts[:2]) + (' (%s)' % parts[2] if len(parts) > 2 else '')


def _is_usage_failure(code, directory):
    """True when every other run would fail the same way (bad flag, missing dataset)."""
    if code == 2:
        return True
    return any(': error:' in line and 'train_cifar' in line
               for line in _tail(os.path.join(directory, 'job.log'), 400))


def execute_run(grid, arm, trial, directory, command):
    """Run one job into `directory` (emptied first); write and return its marker."""
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    started = time.time()
    load_before = os.getloadavg()[0]
    log_path = os.path.join(directory, 'job.log')
    code = None
    with open(log_path, 'w') as log:
        log.write('$ %s\n' % shlex.join(command))
        log.flush()
        proc = subprocess.Popen(command, env=run_env(directory), cwd=directory, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=grid.timeout_s + TIMEOUT_GRACE)
        except subprocess.TimeoutExpired:
            # the launcher did not stop its own job: SIGINT makes it stop every process
            _stop_launcher(proc, signal.SIGINT)
            code = 124
        except (_Stop, KeyboardInterrupt) as stop:
            _stop_launcher(proc, getattr(stop, 'signum', signal.SIGINT))
            raise
    duration = time.time() - started
    marker = {'arm': arm.name, 'trial': trial, 'seed': trial_seed(grid, trial),
              'signature': run_signature(grid, arm, trial), 'command': command,
              'exit_code': code, 'started': started, 'duration_s': round(duration, 2),
              'load_avg': [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    if code == 0 and not os.path.isfile(os.path.join(directory, 'summary.json')):
        marker.update(status='failed', reason='exit code 0 but no summary.json')
    elif code == 0:
        marker.update(status='ok')
    else:
        marker.update(status='failed', reason=_failure_reason(code, directory))
    _write_json(os.path.join(directory, MARKER), marker)
    return marker


def _stop_launcher(proc, signum):
    """Ask the launcher to stop its job (it forwards to every process), then make sure."""
    try:
        proc.send_signal(signum)
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _prune_checkpoints(directory):
    for path in glob.glob(os.path.join(directory, 'model-epoch*')):
        os.unlink(path)


def plan(grid, out):
    """Every run of the grid in order: trial 1 of every arm, then trial 2, ...

    Trial-major order gives a complete first trial of every arm early, so an
    interrupted grid already has a report for each arm.
    """
    runs = []
    for trial in range(1, grid.trials + 1):
        for arm in grid.arms:
            directory = run_dir(out, arm, trial)
            runs.append((arm, trial, directory, run_command(grid, arm, trial, directory),
                         run_signature(grid, arm, trial)))
    return runs


def run_grid(grid, out, keep_checkpoints=False):
    """Run every unfinished run of the grid; return (started, skipped, failed, aborted)."""
    runs = plan(grid, out)
    started = skipped = failed = 0
    aborted = None
    for index, (arm, trial, directory, command, signature) in enumerate(runs, 1):
        tag = '[%d/%d] %s trial %d' % (index, len(runs), arm.name, trial)
        if is_done(directory, signature):
            logger.info('%s: finished earlier, skipped', tag)
            skipped += 1
            continue
        if aborted:
            continue
        if os.path.isdir(directory):
            logger.info('%s: removing the unfinished run directory %s', tag, directory)
        logger.info('%s: running (%s)', tag, os.path.relpath(directory, out))
        started += 1
        marker = execute_run(grid, arm, trial, directory, command)
        if marker['status'] == 'ok':
            if not keep_checkpoints:
                _prune_checkpoints(directory)
            summary = _read_json(os.path.join(directory, 'summary.json')) or {}
            curve = [(e.get('elapsed_s'), e.get('accuracy', 0.0))
                     for e in _read_jsonl(os.path.join(directory, 'eval.jsonl'))]
            reached = time_to_target(curve, grid.targets[0])
            logger.info('%s: done in %.1f s, final accuracy %s, time to %g: %s', tag,
                        marker['duration_s'], _fmt(summary.get('final_accuracy'), '%.4f'),
                        grid.targets[0], '-' if reached is None else '%.1f s' % reached)
        else:
            failed += 1
            logger.error('%s: FAILED after %.1f s: %s (see %s)', tag, marker['duration_s'],
                         marker['reason'], os.path.join(directory, 'job.log'))
            if _is_usage_failure(marker['exit_code'], directory):
                aborted = ('%s trial %d failed on its settings (%s); the remaining runs would '
                           'fail the same way and were not started'
                           % (arm.name, trial, marker['reason']))
                logger.error(aborted)
    return started, skipped, failed, aborted


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------
def gather(grid, out):
    """Per arm, the list of trial records found under `out` (planned arms first)."""
    arms = list(grid.arms)
    root = os.path.join(out, 'runs')
    if os.path.isdir(root):
        for name in sorted(os.listdir(root)):
            try:
                arm = parse_arm(name)
            except ValueError:
                continue
            if arm not in arms:
                arms.append(arm)
    table = []
    for arm in arms:
        trials = []
        found = glob.glob(os.path.join(root, arm.name, 'trial*'))
        numbers = sorted({int(m.group(1)) for m in
                          (re.match(r'trial(\d+)$', os.path.basename(p)) for p in found) if m}
                         | set(range(1, grid.trials + 1)))
        for trial in numbers:
            directory = run_dir(out, arm, trial)
            marker = _read_json(os.path.join(directory, MARKER))
            record = {'trial': trial, 'dir': directory,
                      'status': marker['status'] if marker else 'not run',
                      'reason': marker.get('reason') if marker else None,
                      'duration_s': marker.get('duration_s') if marker else None,
                      'load_avg': marker.get('load_avg') if marker else None,
                      'seed': marker.get('seed') if marker else trial_seed(grid, trial)}
            if record['status'] == 'ok':
                try:
                    record.update(collect_run(directory, arm))
                except (KeyError, ValueError, TypeError, IndexError) as err:
                    record.update(status='failed', reason='its metrics cannot be read: %s: %s'
                                  % (type(err).__name__, err))
                else:
                    if record['final_accuracy'] is None:
                        record.update(status='failed', reason='no test accuracy recorded')
            trials.append(record)
        table.append((arm, trials))
    return table


def _fmt(value, fmt='%.1f'):
    return '-' if value is None else fmt % value


def _per_rank(values, fmt):
    return '/'.join(_fmt(values[r], fmt) for r in sorted(values)) if values else '-'


def summarize(grid, table):
    """Per arm: the median trial, its numbers and the spread over trials."""
    rows = []
    for arm, trials in table:
        ok = [t for t in trials if t['status'] == 'ok']
        chosen = median_trial(ok)
        row = {'arm': arm, 'trials': trials, 'ok': len(ok), 'median': chosen,
               'times': {}, 'spread': {}}
        for target in grid.targets:
            reached = [time_to_target(t['curve'], target) for t in ok]
            row['times'][target] = time_to_target(chosen['curve'], target) if chosen else None
            row['spread'][target] = reached
        rows.append(row)
    return rows


def ssp_average(rows):
    """(label, curve) of the mean of the SSP arms' median-trial curves, or None if < 2."""
    ssp = [r for r in rows if r['arm'].family == 'ssp' and r['median']]
    if len(ssp) < 2:
        return None
    values = sorted(r['arm'].staleness[0] for r in ssp)
    label = 'SSP average (s=%s)' % (
        '%d..%d' % (values[0], values[-1])
        if values == list(range(values[0], values[-1] + 1)) else ','.join(map(str, values)))
    return label, average_curves([r['median']['curve'] for r in ssp])


def _spread_text(values):
    """'median 2.9 (2.1-5.0)' over the trials that reached the target, and how many did."""
    reached = sorted(v for v in values if v is not None)
    if not values:
        return '-'
    text = ('median %.1f (%.1f-%.1f)' % (float(np.median(reached)), reached[0], reached[-1])
            if reached else '-')
    if len(reached) < len(values):
        text += ', %d of %d reached' % (len(reached), len(values))
    return text


def build_report(grid, out, rows, average=None, plots=(), command_line=None):
    """The markdown report (Table I analogue, explanations, runs, failures) as a string.

    `rows` come from :func:`summarize`, `average` from :func:`ssp_average`,
    `plots` are (title, path) pairs.
    """
    lines = []
    preset = PRESETS[grid.preset]
    lines.append('# Reproduction report: preset `%s`' % grid.preset)
    lines.append('')
    lines.append('%s. %s on %s%s, %d workers, %d server, batch %d per worker, lr %g '
                 '(momentum %g, wd %g)%s, %d epochs per worker; %s; %d trial(s) per paradigm.'
                 % (preset.description, grid.model, grid.dataset,
                    '' if grid.data_fraction == 1 else ' (%g of the training set)'
                    % grid.data_fraction,
                    grid.workers, grid.servers, grid.batch_size, grid.lr, grid.momentum,
                    grid.wd,
                    '' if grid.lr_decay is None else ', decayed x%g at epochs %s' % (
                        grid.lr_decay, ', '.join(map(str, grid.lr_decay_epochs))),
                    grid.epochs,
                    'slowdown %s (worker RANK sleeps FACTOR-1 times its compute time)'
                    % grid.slowdown if grid.slowdown else 'no slow worker', grid.trials))
    lines.append('')
    loads = [x for row in rows for t in row['trials'] for x in (t.get('load_avg') or ())]
    lines.append('Generated %s on %s (%d cores%s) by `%s`.' % (
        datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), os.uname().nodename,
        os.cpu_count() or 0,
        '; 1-minute load average %.1f-%.1f at the starts and ends of the runs'
        % (min(loads), max(loads)) if loads else '',
        command_line or 'python -m mxnet_ssp.reproduce --preset %s' % grid.preset))
    lines.append('')

    targets = grid.targets
    lines.append('## Time to reach the target accuracies (analogue of Table I)')
    lines.append('')
    lines.append('Median trial of each paradigm by final test accuracy, as in the paper; '
                 '"-": not reached. Times are seconds of training (worker 0\'s clock from its '
                 'first iteration), test accuracy measured by worker 0 at the end of each of '
                 'its epochs.')
    lines.append('')
    head = ['paradigm'] + ['time to %g (s)' % t for t in targets] + [
        'time to %g over trials (s)' % targets[0], 'final accuracy', 'iterations/worker',
        'it/s per worker', 'max lead', 'train time (s)', 'trials ok']
    lines.append('| ' + ' | '.join(head) + ' |')
    lines.append('|---' + '|---:' * (len(head) - 1) + '|')
    for row in rows:
        m = row['median']
        cells = [row['arm'].label]
        cells += [_fmt(row['times'][t]) for t in targets]
        cells.append(_spread_text(row['spread'][targets[0]]))
        if m:
            iters = sorted(m['iterations'].values())
            span = '%d' % iters[0] if iters[0] == iters[-1] else '%d-%d' % (iters[0], iters[-1])
            cells += ['%.3f' % m['final_accuracy'], span,
                      _per_rank(m['it_per_s'], '%.0f'), '%d' % m['max_lead'],
                      _fmt(m['train_time_s'])]
        else:
            cells += ['-'] * 5
        cells.append('%d/%d' % (row['ok'], len(row['trials'])))
        lines.append('| ' + ' | '.join(cells) + ' |')
    if average:
        label, curve = average
        cells = [label] + [_fmt(time_to_target(curve, t)) for t in targets]
        cells += ['-', '%.3f' % curve[-1][1] if curve else '-'] + ['-'] * 4 + ['-']
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines.append('')
    lines.append('it/s per worker: iterations per second of each rank (rank order). '
                 'max lead: the largest number of iterations a worker was ahead of the slowest '
                 'unfinished worker, at the end of its iterations. %s'
                 % ('SSP average: mean of the SSP curves on a common time grid.' if average
                    else ''))
    lines.append('')

    lines.append('## What explains the curves')
    lines.append('')
    head = ['paradigm', 'compute ms/it per worker', 'step ms/it per worker',
            'waiting for OK (% of iteration time)', 'longest wait (s)',
            'lead at release, mean per worker', 'grants / holds',
            'gradient staleness mean / max', 'mean lead']
    lines.append('| ' + ' | '.join(head) + ' |')
    lines.append('|---' + '|---:' * (len(head) - 1) + '|')
    estimated = False
    for row in rows:
        m = row['median']
        if not m:
            lines.append('| %s |' % row['arm'].label + ' - |' * (len(head) - 1))
            continue
        st = m['staleness']
        mark = '*' if st['source'] == 'estimate' else ''
        estimated = estimated or bool(mark)
        cells = [row['arm'].label, _per_rank(m['compute_ms'], '%.1f'),
                 _per_rank(m['step_ms'], '%.1f'),
                 _per_rank({r: None if v is None else 100 * v
                            for r, v in m['wait_share'].items()}, '%.0f%%')
                 if 'wait_share' in m else '-',
                 _fmt(m.get('longest_wait_s'), '%.2f'),
                 '%s (max %d)' % (_per_rank(m['release_lead_mean'], '%.1f'),
                                  m['release_lead_max'])
                 if 'release_lead_max' in m else '-',
                 '%s / %s' % (_fmt(m.get('grants'), '%d'), _fmt(m.get('holds'), '%d'))
                 if 'grants' in m else '-',
                 '%s / %s%s' % (_fmt(st['mean'], '%.2f'), _fmt(st['max'], '%d'), mark),
                 '%.1f' % m['mean_lead']]
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines.append('')
    lines.append('- **compute**: median per iteration of the forward/backward pass plus the '
                 'emulated slowdown (`sleep_s`); **step**: median of `trainer.step` until the '
                 'new weights are there (push, waiting, pull). Under BSP the waiting for the '
                 'slow worker is inside the fast workers\' step time.')
    lines.append('- **waiting for OK**: the SSP stores\' `wait_s` (time held by the '
                 'synchronization controller) over the worker\'s iteration time; **longest '
                 'wait**: the longest single hold. **lead at release**, **grants** (pushes where '
                 'Algorithm 2 granted r* > 0) and **holds** (pushes answered "wait"): from the '
                 'stores\' `worker-<rank>.jsonl` and `controller.jsonl` (docs/metrics.md). A '
                 'held worker goes on only when its lead is back to sL.')
    lines.append('- **gradient staleness**: updates by other workers between a worker\'s pull '
                 'and the application of its gradient; BSP has none.%s'
                 % (' *: estimated from the iteration end times in `train-worker<rank>.jsonl` '
                    '(the servers record it only in slot mode).' if estimated else ''))
    lines.append('- **mean lead**: mean of the leads at the end of every iteration (train logs).')
    lines.append('')

    if grid.paper_table:
        lines.append('## The paper\'s Table I, for comparison')
        lines.append('')
        lines.append('ResNet-110 on CIFAR-100, two workers (GTX 1080 Ti and GTX 1060), median '
                     'of 3 trials; seconds to reach 0.67 / 0.68 test accuracy ("-": never).')
        lines.append('')
        lines.append('| paradigm | time to 0.67 (s) | time to 0.68 (s) |')
        lines.append('|---|---:|---:|')
        for name, t67, t68 in grid.paper_table:
            lines.append('| %s | %s | %s |' % (name, _fmt(t67), _fmt(t68)))
        lines.append('')

    if plots:
        lines.append('## Plots')
        lines.append('')
        for title, path in plots:
            lines.append('![%s](%s)' % (title, os.path.relpath(path, out)))
            lines.append('')

    lines.append('## All runs')
    lines.append('')
    lines.append('| paradigm | trial | seed | status | final accuracy | time to %g (s) | '
                 'train time (s) | job time (s) | load avg start/end | run directory |'
                 % targets[0])
    lines.append('|---|---:|---:|---|---:|---:|---:|---:|---:|---|')
    failures = []
    for row in rows:
        for t in row['trials']:
            chosen = row['median'] is t
            status = t['status'] + (' (median)' if chosen else '')
            if t['status'] == 'ok':
                cells = ['%.3f' % t['final_accuracy'],
                         _fmt(time_to_target(t['curve'], targets[0])), _fmt(t['train_time_s'])]
            else:
                cells = ['-', '-', '-']
                if t['status'] == 'failed':
                    failures.append((row['arm'], t))
            load = t.get('load_avg')
            lines.append('| %s | %d | %s | %s | %s | %s | %s | %s |' % (
                row['arm'].label, t['trial'], t['seed'], status, ' | '.join(cells),
                _fmt(t['duration_s']), '%.1f/%.1f' % tuple(load) if load else '-',
                os.path.relpath(t['dir'], out)))
    lines.append('')
    if failures:
        lines.append('## Failed runs')
        lines.append('')
        for arm, t in failures:
            lines.append('- **%s trial %d**: %s (`%s`)' % (
                arm.label, t['trial'], t['reason'],
                os.path.relpath(os.path.join(t['dir'], 'job.log'), out)))
        lines.append('')
    missing = [(row['arm'], t) for row in rows for t in row['trials'] if t['status'] == 'not run']
    if missing:
        lines.append('Not run yet: %s. Run the same command again to continue.' % ', '.join(
            '%s trial %d' % (a.name, t['trial']) for a, t in missing))
        lines.append('')
    lines.append('## Settings')
    lines.append('')
    if rows and rows[0]['trials']:
        example = run_command(grid, rows[0]['arm'], 1, run_dir(out, rows[0]['arm'], 1))
        lines.append('Each run, e.g. %s trial 1 (with `OMP_NUM_THREADS=1` and '
                     '`MXNET_SSP_METRICS_DIR` set to its run directory):' % rows[0]['arm'].label)
        lines.append('')
        lines.append('```')
        lines.append(shlex.join(example))
        lines.append('```')
        lines.append('')
    lines.append('Trial k uses seed %d + k - 1 in every paradigm. The median trial is the one '
                 'with the median final test accuracy (for an even number of finished trials, '
                 'the lower middle one; ties go to the earlier trial).' % grid.seed)
    lines.append('')
    return '\n'.join(lines)


def results_json(grid, rows, average):
    """The report's numbers as a JSON-serializable dict."""
    return {
        'grid': dataclasses.asdict(grid) | {'arms': [a.name for a in grid.arms]},
        'arms': [{'arm': r['arm'].name, 'label': r['arm'].label,
                  'median_trial': r['median']['trial'] if r['median'] else None,
                  'time_to_target': {str(t): v for t, v in r['times'].items()},
                  'trials': r['trials']} for r in rows],
        'ssp_average': None if average is None else {'label': average[0],
                                                     'curve': average[1]},
    }


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------
def _have_matplotlib():
    """Whether matplotlib can be imported (found without importing it)."""
    if 'matplotlib' in sys.modules:
        return sys.modules['matplotlib'] is not None
    import importlib.util
    return importlib.util.find_spec('matplotlib') is not None


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError('the plots need matplotlib, which is not installed: '
                         + MATPLOTLIB_HINT) from None
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _style(arm, ssp_values):
    if arm.family == 'bsp':
        return {'color': 'black'}
    if arm.family == 'asp':
        return {'color': 'tab:red'}
    if arm.family == 'dssp':
        return {'color': 'tab:blue' if arm.mode == 'bounded' else 'tab:purple', 'linewidth': 2.2,
                'linestyle': '-' if arm.mode == 'bounded' else '--'}
    import matplotlib
    rank = ssp_values.index(arm.staleness[0])
    return {'color': matplotlib.colormaps['viridis'](rank / max(1, len(ssp_values) - 1) * 0.85),
            'linewidth': 1.0}


def _plot(path, title, series, targets):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for label, curve, style in series:
        if curve:
            ax.plot([t for t, _ in curve], [a for _, a in curve], label=label, **style)
    for target in targets:
        ax.axhline(target, color='grey', linewidth=0.6, linestyle=':')
    ax.set_xlabel('wall time (s)')
    ax.set_ylabel('test accuracy')
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if any(curve for _, curve, _ in series):
        ax.legend(fontsize=8, loc='lower right')
    else:
        ax.text(0.5, 0.5, 'no finished run', ha='center', va='center', transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_plots(grid, out, rows, average):
    """Figures 3/4 in style: paradigms, each SSP vs DSSP, average SSP vs DSSP, all trials."""
    folder = os.path.join(out, 'plots')
    os.makedirs(folder, exist_ok=True)
    chosen = [r for r in rows if r['median']]
    ssp_values = sorted(r['arm'].staleness[0] for r in chosen if r['arm'].family == 'ssp')
    note = '%s, %d workers%s; median of %d trial(s)' % (
        grid.preset, grid.workers, ', slowdown ' + grid.slowdown if grid.slowdown else '',
        grid.trials)

    def series(filter_fn):
        return [(r['arm'].label, r['median']['curve'], _style(r['arm'], ssp_values))
                for r in chosen if filter_fn(r['arm'])]

    plots = []
    main = series(lambda a: a.family in ('bsp', 'asp', 'dssp')
                  or (a.family == 'ssp' and len(ssp_values) <= 3))
    if average and len(ssp_values) > 3:
        main.append((average[0], average[1], {'color': 'tab:green', 'linewidth': 1.8}))
    plots.append(('Paradigms', _plot(os.path.join(folder, 'paradigms.png'),
                                     'BSP, ASP, SSP and DSSP (%s)' % note, main, grid.targets)))
    if ssp_values:
        plots.append(('Each SSP threshold vs DSSP', _plot(
            os.path.join(folder, 'ssp_vs_dssp.png'), 'SSP thresholds vs DSSP (%s)' % note,
            series(lambda a: a.family in ('ssp', 'dssp')), grid.targets)))
    if average:
        plots.append(('Average SSP vs DSSP', _plot(
            os.path.join(folder, 'average_ssp_vs_dssp.png'),
            '%s vs DSSP (%s)' % (average[0], note),
            [(average[0], average[1], {'color': 'tab:green', 'linewidth': 1.8})]
            + series(lambda a: a.family == 'dssp'), grid.targets)))
    plots.append(('All trials', _plot_trials(os.path.join(folder, 'trials.png'), rows, note,
                                             grid.targets)))
    return plots


def _plot_trials(path, rows, note, targets):
    plt = _pyplot()
    rows = [r for r in rows if r['ok']]
    cols = min(4, max(1, len(rows)))
    nrows = max(1, int(math.ceil(len(rows) / float(cols))))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.6 * nrows), squeeze=False,
                             sharex=True, sharey=True)
    for ax, row in zip(axes.flat, rows):
        for t in row['trials']:
            if t['status'] != 'ok':
                continue
            median = t is row['median']
            ax.plot([x for x, _ in t['curve']], [a for _, a in t['curve']],
                    color='tab:blue' if median else 'grey', linewidth=1.6 if median else 0.8,
                    label='trial %d%s' % (t['trial'], ' (median)' if median else ''))
        for target in targets:
            ax.axhline(target, color='grey', linewidth=0.5, linestyle=':')
        ax.set_title(row['arm'].label, fontsize=9)
        ax.set_xlabel('wall time (s)', fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc='lower right')
    for ax in list(axes.flat)[len(rows):]:
        ax.axis('off')
    fig.suptitle('Every trial: test accuracy vs wall time (%s)' % note, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(grid, out, plots_on=True, command_line=None):
    """Read every run under `out`, write plots, report.md and results.json; return rows."""
    rows = summarize(grid, gather(grid, out))
    average = ssp_average(rows)
    plots = make_plots(grid, out, rows, average) if plots_on else ()
    text = build_report(grid, out, rows, average, plots, command_line)
    with open(os.path.join(out, 'report.md'), 'w') as f:
        f.write(text)
    _write_json(os.path.join(out, 'results.json'), results_json(grid, rows, average))
    return rows


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def build_parser():
    p = argparse.ArgumentParser(
        prog='python -m mxnet_ssp.reproduce',
        description='Run the DSSP paper\'s comparison grid (BSP, ASP, SSP, DSSP; several '
                    'trials) with mxnet_ssp.experiments.train_cifar and write accuracy-vs-time '
                    'plots '
                    'and a report with the analogue of its Table I.',
        epilog='Presets: %s. Exit codes: 0 every run finished; 1 a run failed (see report.md); '
               '2 bad input (nothing started); 130/143 interrupted (run the same command '
               'again to continue).' % ', '.join(PRESETS))
    p.add_argument('--preset', help='the grid: %s' % ', '.join(PRESETS))
    p.add_argument('--out', help='output directory (created; a grid there is continued)')
    p.add_argument('--trials', help='trials per paradigm (default: the preset\'s)')
    p.add_argument('--epochs-scale', help='multiply the epochs (and lr decay epochs) by this')
    p.add_argument('--data-fraction',
                   help='train on this stratified share of the CIFAR training set (0, 1]')
    p.add_argument('--workers', help='workers per job (default: the preset\'s)')
    p.add_argument('--paradigms', help='comma-separated subset: ' + ARM_FORMS)
    p.add_argument('--targets', help='target test accuracies, e.g. 0.67,0.68')
    p.add_argument('--slowdown', help="train_cifar.py's --slowdown RANK:FACTOR ('' for none)")
    p.add_argument('--model', help="override the preset's model")
    p.add_argument('--data-dir', help='directory of the CIFAR archives '
                                      '(default ~/.mxnet/datasets/cifar)')
    p.add_argument('--timeout', help='seconds a run may take (default: the preset\'s)')
    p.add_argument('--seed', type=int, default=42, help='seed of trial 1 (trial k: seed + k - 1)')
    p.add_argument('--train-script', metavar='PATH',
                   help='run this script instead of the installed '
                        'mxnet_ssp.experiments.train_cifar (it must take the same flags)')
    p.add_argument('--dry-run', action='store_true', help='print the commands, run nothing')
    p.add_argument('--report-only', action='store_true',
                   help='run nothing; rebuild the report from the runs under --out')
    p.add_argument('--no-plots', action='store_true', help='write no plots (no matplotlib)')
    p.add_argument('--keep-checkpoints', action='store_true',
                   help="keep train_cifar.py's periodic checkpoints (default: only the final "
                        "model)")
    p.add_argument('--list-presets', action='store_true', help='describe the presets and exit')
    return p


def check_out(out, create):
    """Raise UsageError unless `out` is (or can become) a writable directory."""
    path = os.path.abspath(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise _bad('--out', out, 'a directory (this is a file)')
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise _bad('--out', out, 'a writable directory (%s is a file)' % parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _bad('--out', out, 'a writable directory (%s is not writable)' % parent)
    if create:
        try:
            os.makedirs(path, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as err:
            raise _bad('--out', out, 'a writable directory (%s)' % err) from None
    return path


def check_grid_file(grid, out):
    """Refuse an --out that holds a grid with other settings; record this grid's otherwise."""
    path = os.path.join(out, 'grid.json')
    previous = _read_json(path)
    mine = grid.identity()
    if previous is not None:
        differ = ['%s (%s there, %s now)' % (k, previous.get(k), v) for k, v in mine.items()
                  if previous.get(k) != v]
        if differ:
            raise UsageError('--out %s already holds a grid with other settings: %s; use '
                             'another --out, or delete it to start over'
                             % (out, '; '.join(differ)))
    return path, mine


def list_presets(stream=sys.stdout):
    for preset in PRESETS.values():
        stream.write('%s\n  %s\n  %s on %s, %d workers, batch %d, lr %g%s, %d epochs, slowdown '
                     '%s, %d trials\n  paradigms: %s\n  targets: %s; timeout per run %.0f s\n'
                     '  cost: %s\n\n' % (
                         preset.name, preset.description, preset.model, preset.dataset,
                         preset.workers, preset.batch_size, preset.lr,
                         '' if preset.lr_decay is None else ' (x%g at %s)' % (
                             preset.lr_decay, ','.join(map(str, preset.lr_decay_epochs))),
                         preset.epochs, preset.slowdown or 'none', preset.trials,
                         ', '.join(preset.arms), ', '.join(map(str, preset.targets)),
                         preset.timeout_s, preset.cost))


def print_plan(grid, out, problems=()):
    """Print every run's command and whether it would run or be skipped (``--dry-run``)."""
    for problem in problems:
        print('# warning: %s' % problem)
    for arm, trial, directory, command, signature in plan(grid, out):
        state = 'finished, would be skipped' if is_done(directory, signature) else 'would run'
        print('# %s trial %d (%s)' % (arm.name, trial, state))
        print('OMP_NUM_THREADS=1 MXNET_SSP_METRICS_DIR=%s %s'
              % (shlex.quote(directory), shlex.join(command)))
    if grid.data_fraction < 1:
        print('# the %g subset of %s would be written to %s'
              % (grid.data_fraction, grid.dataset, grid.run_data_dir))
    sys.stdout.flush()


def _setup_logging(out):
    handlers = [logging.StreamHandler(sys.stdout)]
    if out:
        handlers.append(logging.FileHandler(os.path.join(out, 'reproduce.log')))
    formatter = logging.Formatter('%(asctime)s reproduce %(levelname)s %(message)s',
                                  '%Y-%m-%d %H:%M:%S')
    for handler in handlers:
        handler.setFormatter(formatter)
    logger.handlers[:] = handlers
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _raise_stop(signum, frame):
    raise _Stop(signum)


def main(argv=None):
    """Entry point; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_presets:
        list_presets()
        return EXIT_OK
    try:
        if not args.preset:
            raise UsageError('--preset is required: one of %s' % ', '.join(PRESETS))
        grid = resolve_grid(args)
        if not args.out:
            raise UsageError('--out is required: the directory for the runs, plots and report')
        out = check_out(args.out, create=not args.dry_run)
        grid_path, identity = check_grid_file(grid, out)
        if grid.data_fraction < 1:
            grid.run_data_dir = subset_dir(out, grid)
        problems = []
        if not args.no_plots and not _have_matplotlib():
            problems.append('the plots need matplotlib, which is not installed: '
                            + MATPLOTLIB_HINT)
        if not args.report_only:
            problems += check_train_script(grid, args.keep_checkpoints)
            problems += check_dataset(grid, download=not args.dry_run)
        if problems and not args.dry_run:
            raise UsageError('; '.join(problems))
    except UsageError as err:
        parser.print_usage(sys.stderr)
        sys.stderr.write('%s: error: %s\n' % (parser.prog, err))
        return EXIT_USAGE

    if args.dry_run:
        try:
            print_plan(grid, out, problems)
        except BrokenPipeError:          # e.g. piped into head: not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK

    _setup_logging(out)
    command_line = 'python -m mxnet_ssp.reproduce ' + shlex.join(
        sys.argv[1:] if argv is None else list(argv))
    _write_json(grid_path, identity)
    failed = 0
    aborted = None
    if not args.report_only:
        logger.info('preset %s: %d paradigms x %d trials = %d runs into %s', grid.preset,
                    len(grid.arms), grid.trials, len(grid.arms) * grid.trials, out)
        previous = signal.signal(signal.SIGTERM, _raise_stop)
        try:
            if grid.data_fraction < 1:
                prepare_subset(out, grid)
            started, skipped, failed, aborted = run_grid(grid, out, args.keep_checkpoints)
        except (_Stop, KeyboardInterrupt) as stop:
            signum = getattr(stop, 'signum', signal.SIGINT)
            logger.error('interrupted by %s; run the same command again to continue',
                         signal.Signals(signum).name)
            return 128 + signum
        finally:
            signal.signal(signal.SIGTERM, previous)
        logger.info('started %d run(s), skipped %d finished run(s), %d failed', started,
                    skipped, failed)
    try:
        rows = write_report(grid, out, plots_on=not args.no_plots, command_line=command_line)
    except UsageError as err:
        logger.error('%s', err)
        return EXIT_USAGE
    bad = [t for r in rows for t in r['trials'] if t['status'] == 'failed']
    logger.info('report: %s', os.path.join(out, 'report.md'))
    if bad or aborted:
        logger.error('%d run(s) failed%s; see the report', len(bad),
                     ' and the grid was stopped' if aborted else '')
        return EXIT_FAILED
    return EXIT_OK


if __name__ == '__main__':
    sys.exit(main())
