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
from ..cluster_model.arms import ARM_FORMS, SSP_RE, parse_arm
from ..cluster_model.profiles import get_scenario
from ..training_flags.generated_knobs import TEACHER_KNOBS, knob_value
from ...core.names import DATASETS
from . import links as on_links
from .presets import LAB_PREFIX, PRESETS, lab_epochs, lab_preset, train_samples


#: the training script every run starts (by module: it is installed with the package);
#: ``--train-script PATH`` runs another script instead, e.g. a modified copy
TRAIN_MODULE = 'mxnet_ssp.lab.train_cifar'


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
    #: --tune-lr: the learning rates each paradigm tries first, on seeds of its own, and the
    #: trials of each (:func:`plan_tuning`); () for the preset's one rate
    tune_lr: tuple = ()
    tune_trials: int = 3
    #: --tune-momentum: the momenta tried with every rate; () for the preset's one momentum
    tune_momentum: tuple = ()
    #: --tuned-choice: 0 runs the trials at each paradigm's best setting, 1 at its runner-up
    tune_choice: int = 0
    #: the rate each paradigm runs its trials with, once tuned (arm name -> lr)
    arm_lr: dict = dataclasses.field(default_factory=dict)
    #: the momentum each paradigm runs its trials with, once tuned (arm name -> momentum)
    arm_momentum: dict = dataclasses.field(default_factory=dict)
    #: the emulated cluster's worker links (bits/s, one per worker) of a scenario with
    #: links, or (): the runs then run on the testbed of `testbed_prefix` (:mod:`.links`)
    links: tuple = ()
    testbed_prefix: str = None
    #: the teacher's knobs --teacher-scale, --teacher-noise, --teacher-dim, --teacher-hidden
    #: and --teacher-train-size (``--dataset teacher``): passed to every run when given; None:
    #: the training script's default (the generator's)
    teacher_scale: float = None
    teacher_noise: float = None
    teacher_dim: int = None
    teacher_hidden: int = None
    teacher_train_size: int = None

    #: fields that change what a run computes: an --out directory holds one such grid
    IDENTITY = ('preset', 'model', 'dataset', 'data_fraction', 'workers', 'servers',
                'batch_size', 'lr', 'momentum', 'wd', 'epochs', 'lr_decay', 'lr_decay_epochs',
                'slowdown', 'num_iterations', 'seed', 'bsp_average', 'emulate')
    #: fields of the identity only when given (grids and runs from before them stay the same
    #: grids and runs); a grid.json that holds one is another grid than one without it
    OPTIONAL_IDENTITY = tuple('teacher_' + knob for knob, _ in TEACHER_KNOBS)

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
        """The IDENTITY fields as a JSON-ready dict (what ``grid.json`` holds); with
        --tune-lr also the rates tried and their trials."""
        keys = self.IDENTITY + (('tune_lr', 'tune_trials') if self.tune_lr else ()) + (
            ('tune_momentum',) if self.tune_momentum else ()) + tuple(
            k for k in self.OPTIONAL_IDENTITY if getattr(self, k) is not None)
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in ((k, getattr(self, k)) for k in keys)}

    def data_flags(self):
        """The training script's flags of the dataset's knobs given (``--teacher-scale``,
        ``--teacher-noise``, ``--teacher-dim``, ``--teacher-hidden``,
        ``--teacher-train-size``), or []."""
        return [part for knob, flag in TEACHER_KNOBS
                if getattr(self, 'teacher_' + knob) is not None
                for part in (flag, '%r' % getattr(self, 'teacher_' + knob))]

    def data_options(self):
        """{knob: value} of the knobs given (the runs' others are the generator's
        defaults)."""
        return {knob: getattr(self, 'teacher_' + knob) for knob, _ in TEACHER_KNOBS
                if getattr(self, 'teacher_' + knob) is not None}

    def lr_of(self, arm):
        """The learning rate `arm`'s trials run with: its tuned one, else the grid's."""
        return self.arm_lr.get(arm.name, self.lr)

    def momentum_of(self, arm):
        """The momentum `arm`'s trials run with: its tuned one, else the grid's."""
        return self.arm_momentum.get(arm.name, self.momentum)


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


def _positive_int(flag, text):
    """`text` as an integer >= 1, else the usage error naming `flag`."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise bad_option(flag, text, 'an integer >= 1')
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


def _workers(value):
    """``--workers``: an integer >= 2."""
    try:
        workers = int(value)
    except ValueError:
        raise bad_option('--workers', value, 'an integer >= 2') from None
    if workers < 2:
        raise bad_option('--workers', value, 'an integer >= 2 (the paradigms differ only '
                         'with several workers)')
    return workers


def _targets(value):
    """``--targets``: comma-separated test accuracies in (0, 1]."""
    try:
        targets = tuple(float(x) for x in value.split(',') if x.strip())
    except ValueError:
        targets = ()
    if not targets or not all(0 < t <= 1 for t in targets):
        raise bad_option('--targets', value,
                         'comma-separated test accuracies in (0, 1], e.g. 0.67,0.68')
    return targets


def resolve_grid(args):
    """Apply the command line `args` to their preset; raise :class:`UsageError` on bad input."""
    scenario = getattr(args, 'lab_scenario', None)    # --preset emulated --scenario
    if scenario is not None:
        preset = lab_preset(scenario)
    elif args.preset not in PRESETS:
        raise bad_option('--preset', args.preset, 'one of %s' % ', '.join(PRESETS))
    else:
        preset = PRESETS[args.preset]
    dataset = _dataset(getattr(args, 'dataset', None), preset)
    knobs = _teacher_knobs(args, dataset)
    base_epochs = preset.epochs
    size = knobs.get('teacher_train_size')
    if preset.name.startswith(LAB_PREFIX) and (dataset != preset.dataset or size is not None):
        # a lab run ends at its iterations: the epochs must hold them on this training set
        # (--teacher-train-size's when given)
        base_epochs = lab_epochs(preset.workers, preset.num_iterations,
                                 train_samples(dataset, size))
    scale = 1.0 if args.epochs_scale is None else _positive_float(
        '--epochs-scale', args.epochs_scale, 'a number > 0 (e.g. 0.1 for a tenth of the epochs)')
    epochs = max(1, int(round(base_epochs * scale)))
    decay_epochs = tuple(sorted({min(epochs, max(1, int(round(e * scale))))
                                 for e in preset.lr_decay_epochs}))
    fraction = 1.0
    if args.data_fraction is not None:
        fraction = _positive_float('--data-fraction', args.data_fraction,
                                   'a number in (0, 1] (the share of the training set)')
        if fraction > 1:
            raise bad_option('--data-fraction', args.data_fraction, 'a number in (0, 1]')
        if fraction < 1 and not dataset.startswith('cifar'):
            raise bad_option('--data-fraction', args.data_fraction,
                       '1 with preset %s: %s is already small; a fraction applies to '
                       'the CIFAR datasets' % (preset.name, dataset))
    workers = preset.workers if args.workers is None else _workers(args.workers)
    trials = preset.trials
    if args.trials is not None:
        trials = _positive_int('--trials', args.trials)
    targets = preset.targets if args.targets is None else _targets(args.targets)
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
    tune_lr, tune_trials, tune_momentum, tune_choice = _tuning(args)
    arm_lr = _arm_lr(getattr(args, 'arm_lr', None), arms, tune_lr)
    links, prefix = _links(preset, getattr(args, 'testbed_prefix', None))
    gpus = _gpu_flags(args, workers)
    model = args.model or preset.model
    train_script = None
    if args.train_script is not None:
        train_script = os.path.abspath(os.path.expanduser(args.train_script))
        if not os.path.isfile(train_script):
            raise bad_option('--train-script', args.train_script,
                       'the path of a training script with the flags of train_cifar.py (no '
                       'such file; leave the flag out to run the installed '
                       'mxnet_ssp.lab.train_cifar)')
    data_dir = os.path.abspath(os.path.expanduser(
        args.data_dir or os.path.join('~', '.mxnet', 'datasets', 'cifar')))
    return Grid(preset=preset.name, model=model, dataset=dataset, data_dir=data_dir,
                data_fraction=fraction, workers=workers, servers=preset.servers,
                batch_size=preset.batch_size, lr=preset.lr, momentum=preset.momentum,
                wd=preset.wd, epochs=epochs, lr_decay=preset.lr_decay,
                lr_decay_epochs=decay_epochs, slowdown=slowdown,
                num_iterations=preset.num_iterations, seed=args.seed, arms=arms, trials=trials,
                targets=targets, timeout_s=timeout, train_script=train_script,
                paper_table=preset.paper_table, gpus=gpus, emulate=preset.emulate,
                tune_lr=tune_lr, tune_trials=tune_trials, tune_momentum=tune_momentum,
                tune_choice=tune_choice, arm_lr=arm_lr, links=links, testbed_prefix=prefix,
                **knobs)


def _dataset(text, preset):
    """--dataset: one of :data:`~mxnet_ssp.core.names.DATASETS` (the preset's without it)."""
    if text is None:
        return preset.dataset
    if text not in DATASETS:
        raise bad_option('--dataset', text, 'one of %s' % ', '.join(DATASETS))
    return text


#: the teacher's knobs: (what is accepted, test of the value read as the knob's type by
#: generated_knobs.knob_value)
KNOB_RANGES = {'scale': ('a number > 0 (the gain in front of the teacher\'s tanh)',
                         lambda x: x > 0),
               'noise': ('a number in [0, 1] (the share of training labels made random)',
                         lambda x: 0 <= x <= 1),
               'dim': ('an integer >= 1 (the inputs\' dimension)', lambda n: n >= 1),
               'hidden': ('an integer >= 1 (the teacher\'s tanh units)', lambda n: n >= 1),
               'train_size': ('an integer >= 1 (the training samples generated)',
                              lambda n: n >= 1)}


def _teacher_knobs(args, dataset):
    """{'teacher_scale': x, 'teacher_dim': n, ...} of the knobs given, each as its type
    (float, or int for the sizes: '16' is 16, '16.5' and '1e3' are refused), checked, only
    with --dataset teacher; {} without them."""
    knobs = {}
    for knob, flag in TEACHER_KNOBS:
        text = getattr(args, 'teacher_' + knob, None)
        if text is None:
            continue
        accepted, ok = KNOB_RANGES[knob]
        try:
            value = knob_value(knob, text)
        except (TypeError, ValueError):
            raise bad_option(flag, text, accepted) from None
        if not (math.isfinite(value) and ok(value)):
            raise bad_option(flag, text, accepted)
        if dataset != 'teacher':
            raise bad_option(flag, text, 'nothing with the dataset %s (a knob of --dataset '
                             'teacher)' % dataset)
        knobs['teacher_' + knob] = value
    return knobs


def _links(preset, prefix_text):
    """(worker links, testbed prefix) of the preset's scenario: () and None without links;
    --testbed-prefix is refused there."""
    links = get_scenario(preset.emulate).links if preset.emulate else ()
    if not links:
        if prefix_text is not None:
            raise bad_option('--testbed-prefix', prefix_text, 'nothing with preset %s: its '
                             'jobs run on loopback (only a scenario with links, such as '
                             'link-4, runs on the emulated cluster)' % preset.name)
        return (), None
    try:
        return tuple(links), on_links.check_prefix_option(prefix_text)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _arm_lr(text, arms, tune_lr):
    """--arm-lr ``bsp=0.04,*=0.01``: each named paradigm's learning rate, ``*`` every other
    one's ({arm name: lr} over the grid's arms; {} without the flag)."""
    if text is None:
        return {}
    names = [arm.name for arm in arms]
    accepted = ('comma-separated ARM=LR items with ARM one of the grid\'s paradigms (%s) or * '
                'for every other one, each once, and LR in (0, 10), e.g. bsp=0.04,*=0.01'
                % ', '.join(names))
    if tune_lr:
        raise bad_option('--arm-lr', text, 'nothing with --tune-lr (which chooses each '
                         'paradigm\'s rate itself)')
    given = {}
    for item in (x.strip() for x in text.split(',')):
        if not item:
            continue
        name, sep, value = (x.strip() for x in item.partition('='))
        try:
            lr = float(value)
        except ValueError:
            lr = None
        if (not sep or (name != '*' and name not in names) or name in given or lr is None
                or not (math.isfinite(lr) and 0 < lr < 10)):
            raise bad_option('--arm-lr', text, accepted)
        given[name] = lr
    if not given:
        raise bad_option('--arm-lr', text, accepted)
    return {name: given.get(name, given.get('*')) for name in names
            if name in given or '*' in given}


#: --tune-lr LOW:HIGH:STEP: the step's names
STEPS = {'sqrt2': math.sqrt(2.0), '2': 2.0}


def parse_rates(text):
    """--tune-lr: ``0.001,0.003,0.01``, or ``LOW:HIGH:STEP`` for LOW, LOW*STEP, ... up to HIGH
    (STEP ``sqrt2`` or ``2``; e.g. ``0.0025:0.04:sqrt2``: 9 rates), each rounded to 4
    significant digits.  Raises :class:`UsageError`."""
    accepted = ('comma-separated learning rates in (0, 10), e.g. 0.001,0.003,0.01, or LOW:HIGH:'
                'STEP with STEP sqrt2 or 2, e.g. 0.0025:0.04:sqrt2')
    rates = ()
    try:
        if ':' in text:
            low, high, step = text.split(':')
            low, high, factor = float(low), float(high), STEPS[step.strip()]
            count = int(math.floor(math.log(high / low) / math.log(factor) + 1e-9)) + 1
            if low <= high and count <= 40:
                rates = tuple(float('%.4g' % (low * factor ** i)) for i in range(count))
        else:
            rates = tuple(sorted({float(x) for x in text.split(',') if x.strip()}))
    except (ValueError, KeyError, ZeroDivisionError):
        rates = ()
    if not rates or not all(math.isfinite(r) and 0 < r < 10 for r in rates):
        raise bad_option('--tune-lr', text, accepted)
    return rates


def _tuning(args):
    """(rates, trials, momenta, choice) of --tune-lr, --tune-trials, --tune-momentum and
    --tuned-choice; ((), 3, (), 0) without --tune-lr."""
    text, trials_text = getattr(args, 'tune_lr', None), getattr(args, 'tune_trials', None)
    momentum_text = getattr(args, 'tune_momentum', None)
    choice_text = getattr(args, 'tuned_choice', None)
    if text is None:
        for flag, value in (('--tune-trials', trials_text), ('--tune-momentum', momentum_text),
                            ('--tuned-choice', choice_text)):
            if value is not None:
                raise bad_option(flag, value, 'nothing without --tune-lr')
        return (), 3, (), 0
    rates = parse_rates(text)
    trials = 3 if trials_text is None else _positive_int('--tune-trials', trials_text)
    momenta = ()
    if momentum_text is not None:
        try:
            momenta = tuple(sorted({float(x) for x in momentum_text.split(',') if x.strip()}))
        except ValueError:
            momenta = ()
        if not momenta or not all(0 <= m < 1 for m in momenta):
            raise bad_option('--tune-momentum', momentum_text,
                             'comma-separated momenta in [0, 1), e.g. 0.8,0.9,0.95')
    choices = {'best': 0, 'runner-up': 1}
    if choice_text is not None and choice_text not in choices:
        raise bad_option('--tuned-choice', choice_text, 'best or runner-up')
    return rates, trials, momenta, choices.get(choice_text, 0)


def _gpu_flags(args, workers):
    """The launcher's GPU flags, checked for form (the GPU count is checked by the runner)."""
    per_worker = getattr(args, 'gpus_per_worker', None)
    gpu_map = getattr(args, 'gpu_map', None)
    if per_worker is not None and gpu_map is not None:
        raise UsageError('--gpus-per-worker and --gpu-map are exclusive: give one of them')
    if per_worker is not None:
        return ('--gpus-per-worker', str(_positive_int('--gpus-per-worker', per_worker)))
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
#: a run's status in its marker when its training diverged: a result (it never reaches a
#: target), not a failure to run again
DIVERGED = 'diverged'


def run_dir(out, arm, trial):
    """Directory of trial `trial` (1-based) of `arm` under `out`."""
    return os.path.join(out, 'runs', arm.name, 'trial%d' % trial)


def trial_seed(grid, trial):
    """Seed of trial `trial`: every arm's trial k uses the same seed (paired trials)."""
    return grid.seed + trial - 1


def run_command(grid, arm, trial, directory, lr=None, seed=None, momentum=None):
    """The launcher command line of one run (a list of arguments); `lr`, `seed` and
    `momentum` replace the arm's rate, the trial's seed and the arm's momentum (the tuning
    runs)."""
    python = sys.executable
    lr = grid.lr_of(arm) if lr is None else lr
    momentum = grid.momentum_of(arm) if momentum is None else momentum
    seed = trial_seed(grid, trial) if seed is None else seed
    cmd = [python, '-m', 'mxnet_ssp.launch', '-n', str(grid.workers), '-s', str(grid.servers),
           '--launcher', 'local', *grid.gpus, '--timeout', '%.6g' % grid.timeout_s
           if grid.timeout_s < 1e6 else '%.0f' % grid.timeout_s,
           *on_links.wrap(grid, grid.train_argv(python), python),
           '--model', grid.model, '--dataset', grid.dataset, *grid.data_flags(),
           '--batch-size', str(grid.batch_size), '--num-epochs', str(grid.epochs),
           '--lr', '%g' % lr, '--momentum', '%g' % momentum, '--wd', '%g' % grid.wd,
           '--seed', str(seed), '--save-dir', directory,
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
    if grid.lr_of(arm) != grid.lr:     # a tuned rate: another run (absent otherwise)
        signature['lr'] = grid.lr_of(arm)
    if grid.momentum_of(arm) != grid.momentum:
        signature['momentum'] = grid.momentum_of(arm)
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


# -- --tune-lr: each paradigm's learning rate, chosen on seeds of its own --------------------

#: the tuning runs' seeds start here after the grid's seed (trial k: seed + 1000 + k - 1), so
#: no seed of a tuning run is a seed of a trial
TUNE_SEED_OFFSET = 1000


def lr_candidates(grid, arm):
    """The rates `arm` tries: --tune-lr's, one grid of per-gradient rates for every paradigm;
    BSP, which averages the workers' gradients, at each times the number of workers (the same
    per-gradient rate)."""
    if arm.family == 'bsp' and grid.bsp_average:
        return sorted(float('%.6g' % (lr * grid.workers)) for lr in grid.tune_lr)
    return sorted(grid.tune_lr)


def candidates(grid, arm):
    """The settings `arm` tries: (lr, momentum) for every rate of :func:`lr_candidates` and
    every momentum of --tune-momentum (the grid's momentum without it)."""
    momenta = grid.tune_momentum or (grid.momentum,)
    return [(lr, m) for lr in lr_candidates(grid, arm) for m in sorted(momenta)]


def setting_key(grid, lr, momentum):
    """A tuning setting's name in ``tuned_lr.json`` and its directory: ``lr0.01``, with
    --tune-momentum ``lr0.01-m0.9``."""
    return 'lr%g' % lr + ('-m%g' % momentum if grid.tune_momentum else '')


def tune_seed(grid, k):
    return grid.seed + TUNE_SEED_OFFSET + k - 1


def tune_dir(out, arm, key, k):
    return os.path.join(out, 'runs', arm.name, 'tune', key, 'trial%d' % k)


def plan_tuning(grid, out):
    """Every tuning run: (arm, (lr, momentum), k, directory, command, signature), tuning trial
    k of every candidate of every arm, trial-major like :func:`plan`."""
    runs = []
    for k in range(1, grid.tune_trials + 1):
        for arm in grid.arms:
            for lr, momentum in candidates(grid, arm):
                directory = tune_dir(out, arm, setting_key(grid, lr, momentum), k)
                signature = dict(grid.identity(), arm=arm.name, seed=tune_seed(grid, k),
                                 lr=lr, tuning=True)
                if grid.tune_momentum:
                    signature['momentum'] = momentum
                if grid.gpus:
                    signature['gpus'] = list(grid.gpus)
                runs.append((arm, (lr, momentum), k, directory,
                             run_command(grid, arm, k, directory, lr=lr,
                                         seed=tune_seed(grid, k), momentum=momentum),
                             signature))
    return runs


def rank_settings(results):
    """The settings of `results` (setting -> [(seconds to the target or inf, final accuracy
    or None), one per tuning trial]) best first: the smallest median time (a trial that never
    reached the target counts as infinitely long), then the higher median final accuracy,
    then the smaller setting.  Settings without a finished trial are left out."""
    def key(setting):
        times = sorted(t for t, _ in results[setting])
        finals = sorted(a for _, a in results[setting] if a is not None)
        median_time = times[(len(times) - 1) // 2]
        median_final = finals[(len(finals) - 1) // 2] if finals else -1.0
        return (median_time, -median_final, setting)
    return sorted((s for s in results if results[s]), key=key)


def choose_lr(results):
    """The best setting of :func:`rank_settings`, or None if none has a finished trial."""
    ranked = rank_settings(results)
    return ranked[0] if ranked else None
