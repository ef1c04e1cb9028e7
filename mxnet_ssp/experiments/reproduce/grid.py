"""A preset with the command line's overrides (:class:`Grid`) and the runs it makes.

:func:`resolve_grid` checks the options and applies them to their preset, raising
:class:`UsageError` on bad input; :func:`plan` lists every run of a grid: its
directory, launcher command and signature (what makes a finished run the same
run when a grid is resumed).  Nothing here reads a file or starts a process.
"""
import dataclasses
import math
import os
import sys
from dataclasses import dataclass

from ...launch.gpus import MAP_FORM, parse_gpu_map
from ...launch.settings import LaunchError
from .presets import ARM_FORMS, PRESETS, SSP_RE, lab_preset, parse_arm


#: the training script every run starts (by module: it is installed with the package);
#: ``--train-script PATH`` runs another script instead, e.g. a modified copy
TRAIN_MODULE = 'mxnet_ssp.experiments.train_cifar'


class UsageError(Exception):
    """Bad input found before any job started (exit code 2)."""


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
    #: flags added to every run that change no result (see check_train_script), and
    #: flags of the user's for the training script (the demo's --extra)
    extra_flags: list = dataclasses.field(default_factory=list)
    #: BSP applies the mean of the gradients (see :meth:`Arm.train_flags`)
    bsp_average: bool = True
    #: the launcher's GPU flags (``--gpus-per-worker N`` or ``--gpu-map MAP``), or ()
    gpus: tuple = ()
    #: the emulated cluster (train_cifar.py's --emulate), or None
    emulate: str = None

    #: fields that change what a run computes: an --out directory holds one such grid
    IDENTITY = ('preset', 'model', 'dataset', 'data_fraction', 'workers', 'servers',
                'batch_size', 'lr', 'momentum', 'wd', 'epochs', 'lr_decay', 'lr_decay_epochs',
                'slowdown', 'num_iterations', 'seed', 'bsp_average', 'emulate')

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


def bad_option(flag, value, accepted):
    return UsageError('%s %r is not valid: expected %s' % (flag, value, accepted))


def _positive_float(flag, text, accepted='a number > 0'):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise bad_option(flag, text, accepted) from None
    if not (math.isfinite(value) and value > 0):
        raise bad_option(flag, text, accepted)
    return value


def _check_slowdown(text, workers):
    for item in filter(None, (x.strip() for x in text.split(','))):
        rank, sep, factor = item.partition(':')
        try:
            ok = bool(sep) and 0 <= int(rank) < workers and float(factor) >= 1
        except ValueError:
            ok = False
        if not ok:
            raise bad_option('--slowdown', text, 'RANK:FACTOR[,RANK:FACTOR] with ranks in 0..%d '
                       '(%d workers) and factors >= 1, e.g. 1:2.5' % (workers - 1, workers))


def resolve_grid(args):
    """Apply the command line `args` to their preset; raise :class:`UsageError` on bad input."""
    scenario = getattr(args, 'lab_scenario', None)    # --preset emulated --scenario
    if scenario is not None:
        preset = lab_preset(scenario)
    elif args.preset not in PRESETS:
        raise bad_option('--preset', args.preset, 'one of %s' % ', '.join(PRESETS))
    else:
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
            raise bad_option('--data-fraction', args.data_fraction, 'a number in (0, 1]')
        if fraction < 1 and not preset.dataset.startswith('cifar'):
            raise bad_option('--data-fraction', args.data_fraction,
                       '1 with preset %s: %s is already small; a fraction applies to '
                       'the CIFAR presets' % (preset.name, preset.dataset))
    workers = preset.workers
    if args.workers is not None:
        try:
            workers = int(args.workers)
        except ValueError:
            raise bad_option('--workers', args.workers, 'an integer >= 2') from None
        if workers < 2:
            raise bad_option('--workers', args.workers, 'an integer >= 2 (the paradigms differ only '
                       'with several workers)')
    trials = preset.trials
    if args.trials is not None:
        try:
            trials = int(args.trials)
        except ValueError:
            raise bad_option('--trials', args.trials, 'an integer >= 1') from None
        if trials < 1:
            raise bad_option('--trials', args.trials, 'an integer >= 1')
    targets = preset.targets
    if args.targets is not None:
        try:
            targets = tuple(float(x) for x in args.targets.split(',') if x.strip())
        except ValueError:
            targets = ()
        if not targets or not all(0 < t <= 1 for t in targets):
            raise bad_option('--targets', args.targets,
                       'comma-separated test accuracies in (0, 1], e.g. 0.67,0.68')
    timeout = preset.timeout_s if args.timeout is None else _positive_float(
        '--timeout', args.timeout, 'a number of seconds > 0')
    slowdown = preset.slowdown if args.slowdown is None else (args.slowdown.strip() or None)
    if slowdown:
        if preset.emulate:
            raise bad_option('--slowdown', args.slowdown, "nothing with preset %s: its emulated "
                             "cluster (%s) sets every worker's compute time"
                             % (preset.name, preset.emulate))
        _check_slowdown(slowdown, workers)
    if preset.emulate and workers != preset.workers:
        raise bad_option('--workers', args.workers, '%d with preset %s (its emulated cluster '
                         'has %d workers)' % (preset.workers, preset.name, preset.workers))
    arms = _select_arms(args.paradigms, preset)
    gpus = _gpu_flags(args, workers)
    model = args.model or preset.model
    train_script = None
    if args.train_script is not None:
        train_script = os.path.abspath(os.path.expanduser(args.train_script))
        if not os.path.isfile(train_script):
            raise bad_option('--train-script', args.train_script,
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
                paper_table=preset.paper_table, gpus=gpus, emulate=preset.emulate)


def _gpu_flags(args, workers):
    """The launcher's GPU flags, checked for form (the GPU count is checked by the runner)."""
    per_worker = getattr(args, 'gpus_per_worker', None)
    gpu_map = getattr(args, 'gpu_map', None)
    if per_worker is not None and gpu_map is not None:
        raise UsageError('--gpus-per-worker and --gpu-map are exclusive: give one of them')
    if per_worker is not None:
        try:
            count = int(per_worker)
        except ValueError:
            count = 0
        if count < 1:
            raise bad_option('--gpus-per-worker', per_worker, 'an integer >= 1')
        return ('--gpus-per-worker', str(count))
    if gpu_map is not None:
        try:
            parse_gpu_map(gpu_map, workers)
        except LaunchError as err:
            raise UsageError('%s (%d workers; expected %s)' % (err, workers, MAP_FORM)) from None
        return ('--gpu-map', gpu_map)
    return ()


def _select_arms(text, preset):
    if text is None:
        return [parse_arm(n) for n in preset.arms]
    arms = []
    for item in (x.strip() for x in text.split(',')):
        if not item:
            continue
        if item.lower() == 'ssp':
            chosen = [parse_arm(n) for n in preset.arms if SSP_RE.match(n)]
        else:
            try:
                chosen = [parse_arm(item)]
            except ValueError:
                raise bad_option('--paradigms', text, 'a comma-separated list of ' + ARM_FORMS) from None
        arms += [a for a in chosen if a not in arms]
    if not arms:
        raise bad_option('--paradigms', text, 'a comma-separated list of ' + ARM_FORMS)
    return arms


MARKER = 'run.json'


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
           '--launcher', 'local', *grid.gpus, '--timeout', '%.6g' % grid.timeout_s
           if grid.timeout_s < 1e6 else '%.0f' % grid.timeout_s,
           *grid.train_argv(python),
           '--model', grid.model, '--dataset', grid.dataset,
           '--batch-size', str(grid.batch_size), '--num-epochs', str(grid.epochs),
           '--lr', '%g' % grid.lr, '--momentum', '%g' % grid.momentum, '--wd', '%g' % grid.wd,
           '--seed', str(trial_seed(grid, trial)), '--save-dir', directory,
           '--log-interval', '0'] + arm.train_flags(grid.bsp_average) + list(grid.extra_flags)
    if grid.dataset.startswith('cifar'):
        cmd += ['--data-dir', grid.run_data_dir or grid.data_dir]
    if grid.emulate:
        cmd += ['--emulate', grid.emulate]
    if grid.slowdown:
        cmd += ['--slowdown', grid.slowdown]
    if grid.num_iterations:
        cmd += ['--num-iterations', str(grid.num_iterations)]
    if grid.lr_decay is not None and grid.lr_decay_epochs:
        cmd += ['--lr-decay', '%g' % grid.lr_decay,
                '--lr-decay-epoch', ','.join(str(e) for e in grid.lr_decay_epochs)]
    return cmd


def run_signature(grid, arm, trial):
    """What makes a run the same run: the grid's settings, the arm and the seed.

    Paths, the Python executable and the time limit are left out, so a moved
    --out directory or a new --timeout does not redo finished runs.
    """
    signature = dict(grid.identity(), arm=arm.name, seed=trial_seed(grid, trial))
    if grid.gpus:                    # runs on GPUs are other runs (absent before the flags)
        signature['gpus'] = list(grid.gpus)
    return signature


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
