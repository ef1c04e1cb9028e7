"""The command line of the reproduction: ``python -m mxnet_ssp.lab.reproduce`` and
``mxnet-ssp-reproduce`` (:func:`main`)."""
import argparse
import logging
import os
import shlex
import signal
import sys
import tempfile

from ..._cli import add_version, prog_name
from .json_files import read_json, write_json
from .grid import UsageError, bad_option, plan, plan_tuning, resolve_grid
from .plots import MATPLOTLIB_HINT, have_matplotlib
from ..cluster_model.arms import ARM_FORMS
from ..training_flags.generated_knobs import TEACHER_DEFAULTS
from ...core.names import DATASETS
from ..cluster_model.profiles import SCENARIOS, SPEC_EXAMPLE, get_scenario
from . import links as on_links
from .presets import LAB_PREFIX, PRESETS, SUITE, SUITE_SCENARIOS, lab_preset
from .report import tuning_target, write_report, write_suite_report
from .runner import (TUNED_FILE, Stop, check_dataset, check_gpus, check_train_script, finished,
                     load_tuned, prepare_subset, run_grid, run_tuning, subset_dir,
                     tuned_rankings, tuning_on_record)

logger = logging.getLogger(__name__)


EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2      # interrupted: 128 + the signal number


def build_parser():
    p = argparse.ArgumentParser(
        prog=prog_name('mxnet-ssp-reproduce', 'mxnet_ssp.lab.reproduce'),
        description='Run the DSSP paper\'s comparison grid (BSP, ASP, SSP, DSSP; several '
                    'trials) with mxnet_ssp.lab.train_cifar and write accuracy-vs-time '
                    'plots '
                    'and a report with the analogue of its Table I.',
        epilog='Presets: %s. Exit codes: 0 every run finished; 1 a run failed (see report.md); '
               '2 bad input (nothing started); 130/143 interrupted (run the same command '
               'again to continue).' % ', '.join(PRESETS))
    add_version(p)
    p.add_argument('--preset', help='the grid: %s, or %s for every emulated scenario '
                                    '(docs/lab.md)' % (', '.join(PRESETS), SUITE))
    p.add_argument('--scenario', help='with --preset %s: run only this scenario: %s, your '
                                      'own cluster as a spec such as %s, or a .json/.toml '
                                      'file of the same keys (docs/lab.md); without it, every '
                                      'scenario without links (%s)'
                                      % (SUITE, ', '.join(SCENARIOS),
                                         SPEC_EXAMPLE.replace('%', '%%'),
                                         ', '.join(SUITE_SCENARIOS)))
    p.add_argument('--testbed-prefix', metavar='PREFIX',
                   help='a scenario with links (link-4, or links= in a spec) runs on the '
                        'emulated cluster (root, ip, tc), brought up before the first run and '
                        'down after the last: the prefix of its names (default %s)'
                        % on_links.DEFAULT_PREFIX)
    p.add_argument('--arm-lr', metavar='ARM=LR[,...]',
                   help='fixed per-paradigm learning rates, e.g. bsp=0.04,*=0.01 (* every '
                        'other paradigm; the preset\'s rate for one not named); not with '
                        '--tune-lr')
    p.add_argument('--out', help='output directory (created; a grid there is continued)')
    p.add_argument('--trials', help='trials per paradigm (default: the preset\'s)')
    p.add_argument('--epochs-scale', help='multiply the epochs (and lr decay epochs) by this')
    p.add_argument('--data-fraction',
                   help='train on this stratified share of the CIFAR training set (0, 1]')
    p.add_argument('--workers', help='workers per job (default: the preset\'s)')
    p.add_argument('--paradigms', help='comma-separated subset: ' + ARM_FORMS)
    p.add_argument('--targets', help='target test accuracies, e.g. 0.67,0.68')
    p.add_argument('--tune-lr', metavar='LR[,LR...]|LOW:HIGH:STEP',
                   help='first run every paradigm at each of these per-gradient learning rates '
                        '(BSP, which averages the workers\' gradients, at each times the number '
                        'of workers) on seeds of its own (seed + 1000 on), --tune-trials times; '
                        'each paradigm\'s trials then run at the setting that held the higher '
                        'target soonest (median). LOW:HIGH:sqrt2 (or :2): a geometric grid, '
                        'e.g. 0.0025:0.04:sqrt2')
    p.add_argument('--tune-trials', metavar='K', help='tuning trials per rate (default 3)')
    p.add_argument('--tune-momentum', metavar='M[,M...]',
                   help='with --tune-lr: also try each of these momenta with every rate')
    p.add_argument('--tuned-choice', metavar='best|runner-up',
                   help='with --tune-lr: run the trials at each paradigm\'s best tuned setting '
                        '(default) or at its runner-up (another --out, with the first one\'s '
                        'tuned_lr.json copied into it)')
    p.add_argument('--slowdown', help="train_cifar.py's --slowdown RANK:FACTOR ('' for none)")
    p.add_argument('--gpus-per-worker', metavar='N',
                   help='mxnet-ssp-launch --gpus-per-worker: worker i trains on GPUs '
                        'i*N..i*N+N-1 (with --slowdown \'\' for real mixed GPUs)')
    p.add_argument('--gpu-map', metavar='MAP',
                   help="mxnet-ssp-launch --gpu-map: each worker's GPUs, e.g. '0:0,1:1'")
    p.add_argument('--model', help="override the preset's model")
    _add_data_options(p)
    p.add_argument('--data-dir', help='directory of the CIFAR archives '
                                      '(default ~/.mxnet/datasets/cifar)')
    p.add_argument('--timeout', help='seconds a run may take (default: the preset\'s)')
    p.add_argument('--seed', type=int, default=42, help='seed of trial 1 (trial k: seed + k - 1)')
    p.add_argument('--train-script', metavar='PATH',
                   help='run this script instead of the installed '
                        'mxnet_ssp.lab.train_cifar (it must take the same flags)')
    p.add_argument('--dry-run', action='store_true', help='print the commands, run nothing')
    p.add_argument('--report-only', action='store_true',
                   help='run nothing; rebuild the report from the runs under --out')
    p.add_argument('--no-plots', action='store_true', help='write no plots (no matplotlib)')
    p.add_argument('--keep-checkpoints', action='store_true',
                   help="keep train_cifar.py's periodic checkpoints (default: only the final "
                        "model)")
    p.add_argument('--list-presets', action='store_true', help='describe the presets and exit')
    return p


def _add_data_options(p):
    """--dataset and the generated task's knobs (docs/reproduce.md, "Another task")."""
    p.add_argument('--dataset', metavar='NAME',
                   help="override the preset's dataset: %s (an emulated lab preset's epochs "
                        "then follow its training set; the iterations stay the scenario's)"
                        % ', '.join(DATASETS))
    p.add_argument('--teacher-scale', metavar='X',
                   help='with --dataset teacher: the gain in front of the teacher\'s tanh, '
                        'passed to every run (default: the generator\'s, %g)'
                        % TEACHER_DEFAULTS['scale'])
    p.add_argument('--teacher-noise', metavar='P',
                   help='with --dataset teacher: the share of the training labels replaced by '
                        'random classes, passed to every run (default: the generator\'s, %g)'
                        % TEACHER_DEFAULTS['noise'])
    p.add_argument('--teacher-dim', metavar='N',
                   help='with --dataset teacher: the inputs\' dimension, an integer >= 1 (the '
                        'images: a square when it is one, 16 -> 4x4), passed to every run '
                        '(default: the generator\'s, %d)' % TEACHER_DEFAULTS['dim'])
    p.add_argument('--teacher-hidden', metavar='N',
                   help='with --dataset teacher: the teacher network\'s tanh units, an integer '
                        '>= 1, passed to every run (default: the generator\'s, %d)'
                        % TEACHER_DEFAULTS['hidden'])
    p.add_argument('--teacher-train-size', metavar='N',
                   help='with --dataset teacher: the training samples generated, an integer '
                        '>= 1, passed to every run; an emulated lab preset\'s epochs follow it '
                        '(default: the generator\'s, %d)' % TEACHER_DEFAULTS['train_size'])


def check_out(out, create):
    """Raise UsageError unless `out` is (or can become) a writable directory."""
    path = os.path.abspath(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise bad_option('--out', out, 'a directory (this is a file)')
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise bad_option('--out', out, 'a writable directory (%s is a file)' % parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise bad_option('--out', out, 'a writable directory (%s is not writable)' % parent)
    if create:
        try:
            os.makedirs(path, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as err:
            raise bad_option('--out', out, 'a writable directory (%s)' % err) from None
    return path


def check_grid_file(grid, out):
    """Refuse an --out that holds a grid with other settings; record this grid's otherwise.
    A setting of the identity only when given (``Grid.OPTIONAL_IDENTITY``, e.g.
    --teacher-scale) differs when it is given on one side only."""
    path = os.path.join(out, 'grid.json')
    previous = read_json(path)
    mine = grid.identity()
    if previous is not None:
        keys = list(mine) + [k for k in grid.OPTIONAL_IDENTITY if k in previous and k not in mine]
        differ = ['%s (%s there, %s now)' % (k, previous.get(k), mine.get(k)) for k in keys
                  if previous.get(k) != mine.get(k)]
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
    if grid.links:
        print('# on the emulated cluster (prefix %s, up before the first run, down after the '
              'last): %s' % (grid.testbed_prefix,
                             on_links.place.describe(on_links.placement(grid))))
    on_record = tuning_on_record(grid, out)
    if on_record:
        load_tuned(grid, out)        # the trials' commands below carry those rates
        print('# tuning: %s holds every paradigm\'s rate; no tuning run would run, the trials '
              'run at those rates' % os.path.join(out, TUNED_FILE))
    for arm, (lr, momentum), k, directory, command, signature in (
            [] if on_record else plan_tuning(grid, out)):
        state = 'finished, would be skipped' if finished(directory, signature) else 'would run'
        print('# %s tuning lr %g momentum %g trial %d (%s)' % (arm.name, lr, momentum, k,
                                                               state))
        print('OMP_NUM_THREADS=1 MXNET_SSP_METRICS_DIR=%s %s'
              % (shlex.quote(directory), shlex.join(command)))
    if grid.tune_lr and not on_record:
        print('# the trials below run at each paradigm\'s chosen rate (the grid\'s %g until '
              'the tuning runs have run)' % grid.lr)
    for arm, trial, directory, command, signature in plan(grid, out):
        state = 'finished, would be skipped' if finished(directory, signature) else 'would run'
        print('# %s trial %d (%s)' % (arm.name, trial, state))
        print('OMP_NUM_THREADS=1 MXNET_SSP_METRICS_DIR=%s %s'
              % (shlex.quote(directory), shlex.join(command)))
    if grid.data_fraction < 1:
        print('# the %g subset of %s would be written to %s'
              % (grid.data_fraction, grid.dataset, grid.run_data_dir))
    sys.stdout.flush()


def _setup_logging(out):
    """Log every module of this package to stdout and ``<out>/reproduce.log``."""
    handlers = [logging.StreamHandler(sys.stdout)]
    if out:
        handlers.append(logging.FileHandler(os.path.join(out, 'reproduce.log')))
    formatter = logging.Formatter('%(asctime)s reproduce %(levelname)s %(message)s',
                                  '%Y-%m-%d %H:%M:%S')
    for handler in handlers:
        handler.setFormatter(formatter)
    package = logging.getLogger(__package__)
    package.handlers[:] = handlers
    package.setLevel(logging.INFO)
    package.propagate = False


def _raise_stop(signum, frame):
    raise Stop(signum)


def main(argv=None, num_gpus=None):
    """Entry point; returns the exit code.

    `num_gpus` (``num_gpus(environ) -> int``) counts the GPUs MXNet sees for the GPU
    flags (default: ask MXNet in a child process; tests inject a count).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_presets:
        list_presets()
        return EXIT_OK
    command_line = 'python -m mxnet_ssp.lab.reproduce ' + shlex.join(
        sys.argv[1:] if argv is None else list(argv))
    if args.preset == SUITE or args.scenario is not None:
        return run_suite(parser, args, num_gpus, command_line)
    return run_preset(parser, args, num_gpus, command_line)


def run_suite(parser, args, num_gpus, command_line):
    """``--preset emulated``: the grid of every scenario (or ``--scenario``'s) into
    ``<out>/<scenario>/``, then ``<out>/report.md`` with every scenario's verdicts."""
    try:
        if args.preset != SUITE:
            raise bad_option('--scenario', args.scenario, 'nothing without --preset %s (the '
                             'preset emulated-<scenario> runs one scenario)' % SUITE)
        scenarios = [SCENARIOS[name] for name in SUITE_SCENARIOS]
        if args.scenario is not None:
            try:
                scenarios = [get_scenario(args.scenario)]
            except ValueError as err:
                raise UsageError('--scenario %r is not valid: %s' % (args.scenario, err)) from None
        if not args.out:
            raise UsageError('--out is required: the directory for the runs, plots and report')
        out = check_out(args.out, create=not args.dry_run)
    except UsageError as err:
        parser.print_usage(sys.stderr)
        sys.stderr.write('%s: error: %s\n' % (parser.prog, err))
        return EXIT_USAGE
    codes = []
    names = [sc.name for sc in scenarios]
    for scenario in scenarios:
        one = argparse.Namespace(**vars(args))
        one.preset, one.scenario = LAB_PREFIX + scenario.name, None
        one.lab_scenario = scenario
        one.out = os.path.join(out, scenario.name)
        codes.append(run_preset(parser, one, num_gpus, command_line))
        if codes[-1] not in (EXIT_OK, EXIT_FAILED):      # bad input or interrupted
            return codes[-1]
    if not args.dry_run:
        path = write_suite_report(out, names, command_line)
        sys.stdout.write('reproduce: verdicts of every scenario in %s\n' % path)
    return max(codes)


def _ranked_at_another_target(grid, out):
    """[the problem] when ``<out>/tuned_lr.json`` ranks exactly this grid's settings for every
    paradigm at one target other than the grid's last: running would rank the tuning runs
    again at the grid's and may change every choice; else []."""
    ranked_at = tuning_target(tuned_rankings(grid, out))
    if ranked_at is None or ranked_at == grid.targets[-1]:
        return []
    return ['--targets %s: the tuning in %s was ranked at %g, and running would rank it again '
            'at %g, which may change every paradigm\'s chosen setting; to keep them, run with '
            'targets ending in %g and rebuild the report with --report-only --targets ...,%g; '
            'to rank again, delete that file'
            % (','.join('%g' % t for t in grid.targets), os.path.join(out, TUNED_FILE),
               ranked_at, grid.targets[-1], ranked_at, grid.targets[-1])]


def _preset_cost(args):
    """The cost line of the preset `args` runs (for its default grid)."""
    scenario = getattr(args, 'lab_scenario', None)
    return lab_preset(scenario).cost if scenario is not None else PRESETS[args.preset].cost


def _run_runs(grid, out, args):
    """The grid's tuning runs (--tune-lr) and trials, on the emulated cluster for a scenario
    with links (:func:`.links.testbed`: up before the first run, down after the last);
    returns (failed tuning runs, started, skipped, failed trials, aborted)."""
    failed = 0
    with on_links.testbed(grid, out):
        if grid.tune_lr and tuning_on_record(grid, out):
            logger.info('--tune-lr: %s already holds every paradigm\'s rate, chosen from '
                        'these rates and trials: no tuning run is run again (delete it to '
                        'tune again)', os.path.join(out, TUNED_FILE))
        elif grid.tune_lr:
            failed += run_tuning(grid, out)
        return (failed,) + tuple(run_grid(grid, out, args.keep_checkpoints, _preset_cost(args)))


def run_preset(parser, args, num_gpus, command_line):
    """One preset's grid: check, run what is not finished, report; returns the exit code."""
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
        if not args.no_plots and not have_matplotlib():
            problems.append('the plots need matplotlib, which is not installed: '
                            + MATPLOTLIB_HINT)
        if not args.report_only:
            problems += check_gpus(grid, num_gpus)
            problems += check_train_script(grid, args.keep_checkpoints)
            problems += check_dataset(grid, download=not args.dry_run)
            problems += on_links.check_machine(grid)
            problems += _ranked_at_another_target(grid, out)
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
    write_json(grid_path, identity)
    failed = 0
    aborted = None
    load_tuned(grid, out)
    if not args.report_only:
        logger.info('preset %s: %d paradigms x %d trials = %d runs into %s', grid.preset,
                    len(grid.arms), grid.trials, len(grid.arms) * grid.trials, out)
        # SIGINT too: a shell that starts the runner in the background (``&``, nohup) leaves
        # SIGINT ignored, and ``kill -INT`` would then stop nothing
        previous = {signum: signal.signal(signum, _raise_stop)
                    for signum in (signal.SIGTERM, signal.SIGINT)}
        try:
            if grid.data_fraction < 1:
                prepare_subset(out, grid)
            tuned_failed, started, skipped, failed_trials, aborted = _run_runs(grid, out, args)
            failed += tuned_failed
        except (Stop, KeyboardInterrupt) as stop:
            signum = getattr(stop, 'signum', signal.SIGINT)
            logger.error('interrupted by %s; run the same command again to continue',
                         signal.Signals(signum).name)
            return 128 + signum
        except on_links.ClusterError as err:
            logger.error('%s', err)
            return EXIT_FAILED
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        failed += failed_trials
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
