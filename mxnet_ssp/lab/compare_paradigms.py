"""Compare BSP, ASP, SSP and DSSP on one machine, with one worker made slower.

The demo is one trial of a grid of the reproduction (:mod:`mxnet_ssp.lab.reproduce`),
with its own flags and table: each paradigm runs
:mod:`mxnet_ssp.lab.train_cifar` once as a local parameter-server job
(``python -m mxnet_ssp.launch -n N -s 1 --launcher local ...``), started,
bounded and collected by the reproduction's runner, into
``<out>/runs/<arm>/trial1``; then it prints a markdown table::

    mxnet-ssp-compare       # about 1.5-3 minutes on 2 busy cores

(``python -m mxnet_ssp.lab.compare_paradigms`` and, in a checkout,
``python train_scripts/compare_paradigms.py`` run the same :func:`main`.)

Paradigms and the kvstore each one uses:

=========  ==============================================
bsp        ``dist_sync`` (gradients summed, as gluon.Trainer does)
asp        ``dist_async``
ssp        ``dist_ssp --staleness 3`` (``--ssp-staleness``)
dssp       ``dist_dssp --staleness 3,15`` (``--dssp-staleness``)
=========  ==============================================

Every worker runs the same number of epochs of its own shard, so the slow
worker bounds the job's wall time under every paradigm; what differs is how
long the fast workers wait for it and therefore how soon the model is good:
the table's "time to target" is the training time until worker 0's test
accuracy (measured at the end of each of its epochs) first reached
``--target-accuracy``.  The table is also written to ``<out>/results.md`` and
the numbers to ``<out>/results.json``, and (with matplotlib, the ``lab`` extra) worker 0's
test accuracy over wall time per paradigm to ``<out>/accuracy.png``.  A closing note says where
the time went (waiting for the slow worker, CPU contention, the emulated compute).  Every
invocation runs every paradigm
again (a demo, not a resumable grid: use ``mxnet-ssp-reproduce`` for that).
"""
import argparse
import json
import math
import os
import shutil
import sys

from .._cli import DefaultsOnce, add_version, prog_name
from ..core.jsonl import read_jsonl
from ..core.names import STORE_METRICS
from .reproduce import collect, grid as grids, runner
from .cluster_model.arms import parse_arm

#: paradigm family (--paradigms) -> its label in the table
FAMILY_LABELS = {'bsp': 'BSP', 'asp': 'ASP', 'ssp': 'SSP', 'dssp': 'DSSP'}


def build_parser():
    p = argparse.ArgumentParser(
        prog=prog_name('mxnet-ssp-compare', 'mxnet_ssp.lab.compare_paradigms'),
        description='Run train_cifar.py under BSP, ASP, SSP and DSSP with one slow worker '
                    'and print a comparison table.',
        formatter_class=DefaultsOnce)
    add_version(p)
    p.add_argument('-n', '--num-workers', type=int, default=4, help='workers per job')
    p.add_argument('-s', '--num-servers', type=int, default=1, help='servers per job')
    p.add_argument('--paradigms', default='bsp,asp,ssp,dssp',
                   help='comma-separated subset of %s, run in this order' % ','.join(FAMILY_LABELS))
    p.add_argument('--epochs', type=int, default=30, help='epochs every worker runs')
    p.add_argument('--slowdown', default='1:2.5', metavar='RANK:FACTOR[,RANK:FACTOR]',
                   help="train_cifar.py's --slowdown ('' for none)")
    p.add_argument('--ssp-staleness', default='3', help='staleness s of the SSP run')
    p.add_argument('--dssp-staleness', default='3,15', help='staleness sL,sU of the DSSP run')
    p.add_argument('--target-accuracy', type=float, default=0.9,
                   help='test accuracy whose first reaching time is reported')
    p.add_argument('--model', default='alexnet-small', help="train_cifar.py's --model")
    p.add_argument('--dataset', default='digits', help="train_cifar.py's --dataset")
    p.add_argument('--batch-size', type=int, default=32, help='batch size per worker')
    p.add_argument('--lr', type=float, default=0.02, help='learning rate')
    p.add_argument('--momentum', type=float, default=0.9, help='SGD momentum')
    p.add_argument('--seed', type=int, default=42, help='seed (the same for every run)')
    p.add_argument('--out', default=os.path.join('results', 'compare'),
                   help='output directory; each run goes to <out>/<paradigm>')
    p.add_argument('--timeout', type=float, default=600,
                   help='seconds after which a run is stopped')
    p.add_argument('--extra', default='', help='more train_cifar.py flags, as one string')
    return p


def parse_args(argv=None):
    """Parse and check the flags; exits with status 2 naming a bad one."""
    parser = build_parser()
    args = parser.parse_args(argv)
    names = [x.strip().lower() for x in args.paradigms.split(',') if x.strip()]
    unknown = [x for x in names if x not in FAMILY_LABELS]
    if not names or unknown:
        parser.error('--paradigms %r is not valid: expected a comma-separated subset of %s'
                     % (args.paradigms, ','.join(FAMILY_LABELS)))
    if len(set(names)) != len(names):
        parser.error('--paradigms %r names a paradigm twice' % args.paradigms)
    args.paradigm_list = names
    for flag, value in (('--num-workers', args.num_workers), ('--num-servers', args.num_servers),
                        ('--epochs', args.epochs), ('--batch-size', args.batch_size)):
        if value < 1:
            parser.error('%s %r is not valid: expected an integer >= 1' % (flag, value))
    for item in filter(None, (x.strip() for x in args.slowdown.split(','))):
        rank, sep, factor = item.partition(':')
        try:
            ok = sep and 0 <= int(rank) < args.num_workers and float(factor) >= 1
        except ValueError:
            ok = False
        if not ok:
            parser.error('--slowdown %r is not valid: expected RANK:FACTOR[,RANK:FACTOR] with '
                         'ranks in 0..%d (--num-workers %d) and factors >= 1'
                         % (args.slowdown, args.num_workers - 1, args.num_workers))
    try:
        args.arms = {'bsp': parse_arm('bsp'), 'asp': parse_arm('asp'),
                     'ssp': parse_arm('ssp%d' % _staleness(args.ssp_staleness, 1)),
                     'dssp': parse_arm('dssp%d-%d' % _staleness(args.dssp_staleness, 2))}
    except ValueError:
        parser.error('--ssp-staleness %r / --dssp-staleness %r are not valid: expected s (an '
                     'integer >= 0) and sL,sU (integers, 0 <= sL <= sU)'
                     % (args.ssp_staleness, args.dssp_staleness))
    if not 0 < args.target_accuracy <= 1:
        parser.error('--target-accuracy %r is not valid: expected a number in (0, 1]'
                     % args.target_accuracy)
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        parser.error('--timeout %r is not valid: expected a number of seconds > 0' % args.timeout)
    return args


def _staleness(text, count):
    values = tuple(int(x) for x in str(text).split(','))
    if len(values) != count or min(values) < 0:
        raise ValueError(text)
    return values[0] if count == 1 else values


def to_grid(args):
    """The reproduction grid of the demo: one trial of each chosen paradigm."""
    return grids.Grid(
        preset='compare', model=args.model, dataset=args.dataset,
        data_dir=os.path.abspath(os.path.join(args.out, 'data')), data_fraction=1.0,
        workers=args.num_workers, servers=args.num_servers, batch_size=args.batch_size,
        lr=args.lr, momentum=args.momentum, wd=1e-4, epochs=args.epochs, lr_decay=None,
        lr_decay_epochs=(), slowdown=args.slowdown or None, num_iterations=None,
        seed=args.seed, arms=[args.arms[p] for p in args.paradigm_list], trials=1,
        targets=(args.target_accuracy,), timeout_s=args.timeout, train_script=None,
        extra_flags=args.extra.split(), bsp_average=False)


def train_command(args, paradigm, save_dir):
    """The launcher command line of one paradigm's run (the grid's, see :func:`to_grid`)."""
    return grids.run_command(to_grid(args), args.arms[paradigm], 1, save_dir)


def result_of(grid, arm, paradigm, directory, marker):
    """One row of the demo: the runner's marker and the reproduction's numbers of the run."""
    result = {'paradigm': FAMILY_LABELS[paradigm], 'kvstore': arm.kvstore,
              'exit_code': marker['exit_code'], 'status': marker['status'],
              'job_time_s': marker['duration_s'], 'dir': directory,
              'log': os.path.join(directory, 'job.log')}
    try:
        numbers = collect.collect_run(directory, arm)
    except (KeyError, ValueError, TypeError, IndexError, OSError):
        if marker['status'] == 'ok':
            raise
        numbers = {'curve': [], 'iterations': {}, 'it_per_s': {}, 'final_accuracy': None,
                   'train_time_s': None, 'max_lead': None}   # a failed run wrote too little
    reached = next(((t, a) for t, a in numbers['curve'] if a >= grid.targets[0]), None)
    result.update({
        'iterations_per_worker': numbers['iterations'],
        'iteration_ms_per_worker': {r: (round(1e3 / v, 2) if v else None)
                                    for r, v in numbers['it_per_s'].items()},
        'final_accuracy': numbers['final_accuracy'],
        'train_time_s': numbers['train_time_s'],
        'time_to_target_s': reached[0] if reached else None,
        'max_lead': numbers['max_lead'], 'data_path': numbers.get('data_path'),
        'curve': numbers['curve'], 'wait_s_per_worker': waits_of(directory)})
    return result


def waits_of(directory):
    """{rank: seconds the worker waited for the controller's OK} (SSP/DSSP runs' metrics;
    {} for stores without a controller)."""
    waits = {}
    for rank in range(64):
        path = os.path.join(directory, STORE_METRICS % rank)
        if not os.path.exists(path):
            break
        waits[str(rank)] = round(sum(r.get('wait_s') or 0.0 for r in read_jsonl(path)), 3)
    return waits


def describe_data_path(path):
    """'mxnet-ssp, 2 buckets' / 'MXNet's own': the table's data-path column."""
    if not path:
        return '-'
    if not path['store_class'].startswith('mxnet_ssp.') or path.get('handed_off'):
        return "MXNet's own"
    return 'mxnet-ssp, %d bucket%s' % (path['buckets'], '' if path['buckets'] == 1 else 's')


def run_one(args, grid, paradigm, index=1, count=1):
    """Run one paradigm's job (afresh), saying so on one line; return its result dict."""
    arm = args.arms[paradigm]
    directory = grids.run_dir(os.path.abspath(args.out), arm, 1)
    print('job %d of %d: [%s] %s, %d workers, %d epochs ...' % (
        index, count, FAMILY_LABELS[paradigm], arm.kvstore, args.num_workers, args.epochs),
        end=' ', flush=True)
    marker = runner.execute_run(grid, arm, 1, directory,
                                grids.run_command(grid, arm, 1, directory))
    result = result_of(grid, arm, paradigm, directory, marker)
    if marker['status'] == 'ok':
        print('%.0f s, final accuracy %s' % (marker['duration_s'],
                                             _fmt(result['final_accuracy'], '%.3f')))
    else:
        print('FAILED after %.0f s: %s, see %s' % (marker['duration_s'], marker['reason'],
                                                   result['log']))
    return result


def _fmt(value, fmt):
    return '-' if value is None else fmt % value


def markdown_table(results, args):
    """The comparison as a markdown table (one row per run)."""
    lines = ['| paradigm | kvstore | data path | train time (s) | job time (s) '
             '| iterations/worker (min/max) '
             '| ms/iteration (min/max) | final test accuracy | time to %.0f%% (s) |'
             % (100 * args.target_accuracy),
             '|---|---|---|---:|---:|---:|---:|---:|---:|']
    for r in results:
        iters = list(r['iterations_per_worker'].values())
        status = '' if r['status'] == 'ok' else ' (failed, exit %s)' % r['exit_code']
        kv = r['kvstore']
        if r['paradigm'] == 'SSP':
            kv += ' s=%s' % args.ssp_staleness
        elif r['paradigm'] == 'DSSP':
            kv += ' s=%s' % args.dssp_staleness
        per_iter = [v for v in r['iteration_ms_per_worker'].values() if v is not None]
        lines.append('| %s%s | %s | %s | %s | %.1f | %s | %s | %s | %s |' % (
            r['paradigm'], status, kv, describe_data_path(r.get('data_path')),
            _fmt(r['train_time_s'], '%.1f'), r['job_time_s'],
            '%d/%d' % (min(iters), max(iters)) if iters else '-',
            '%.0f/%.0f' % (min(per_iter), max(per_iter)) if per_iter else '-',
            _fmt(r['final_accuracy'], '%.3f'), _fmt(r['time_to_target_s'], '%.1f')))
    return '\n'.join(lines)


#: the plot's colour per paradigm
COLOURS = {'BSP': 'black', 'ASP': 'tab:red', 'SSP': 'tab:green', 'DSSP': 'tab:blue'}


def plot_accuracy(results, path):
    """Worker 0's test accuracy over training wall time, one line per paradigm, to `path`
    (PNG); returns `path`, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for r in results:
        if r['curve']:
            ax.plot([t for t, _ in r['curve']], [a for _, a in r['curve']], marker='.',
                    color=COLOURS.get(r['paradigm']), label='%s (%s)' % (r['paradigm'],
                                                                     r['kvstore']))
    ax.set_xlabel('training wall time (s)')
    ax.set_ylabel("worker 0's test accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc='lower right', fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def where_the_time_went(results, args, cores=None):
    """The closing note: where each paradigm's time went, in the user's terms."""
    cores = cores or os.cpu_count() or 1
    processes = args.num_workers + args.num_servers + 1
    lines = ['Where the time went:',
             '- %d workers, %d server(s) and a scheduler (%d processes, plus a controller for '
             'SSP/DSSP) share %d CPU core(s)%s.' % (
                 args.num_workers, args.num_servers, processes, cores,
                 ': they take turns, so every step is slower than on a cluster'
                 if processes > cores else '')]
    if args.slowdown:
        lines.append('- The slow worker (--slowdown %s) is emulated: after each step\'s '
                     'compute it sleeps (factor - 1) x that compute time. CPU contention '
                     'lengthens the measured compute, so the sleep grows with it.'
                     % args.slowdown)
    for r in results:
        per = [v for v in r['iteration_ms_per_worker'].values() if v is not None]
        if not per or r['train_time_s'] is None:
            continue
        text = '- %s: %.0f-%.0f ms per iteration (fastest-slowest worker)' % (
            r['paradigm'], min(per), max(per))
        waits = r.get('wait_s_per_worker') or {}
        if r['paradigm'] == 'BSP':
            text += '; every worker waits for the slowest at every step.'
        elif r['paradigm'] == 'ASP':
            text += '; no worker waits: the fast ones push stale gradients.'
        elif waits:
            rank, most = max(waits.items(), key=lambda kv: kv[1])
            text += ('; the workers waited for the slow one only when s steps ahead: '
                     'worker %s at most, %.1f s of %.1f s of training.'
                     % (rank, most, r['train_time_s']))
        lines.append(text)
    return '\n'.join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    grid = to_grid(args)
    print('%d workers, 1 slow (%s), %s on %s, %d epochs, batch %d, lr %g; runs in %s'
          % (args.num_workers, args.slowdown or 'none', args.model, args.dataset, args.epochs,
             args.batch_size, args.lr, os.path.abspath(args.out)), flush=True)
    shutil.rmtree(os.path.join(args.out, 'runs'), ignore_errors=True)   # a demo runs afresh
    count = len(args.paradigm_list)
    results = [run_one(args, grid, p, i + 1, count) for i, p in enumerate(args.paradigm_list)]
    table = markdown_table(results, args)
    note = ('train time: worker 0 from its first iteration until every worker finished; '
            'job time: the whole launcher run, start-up included; ms/iteration: mean time per '
            'iteration of the fastest and of the slowest worker; time to target: training '
            'time until worker 0 first measured that test accuracy at the end of an epoch '
            '("-": not reached).')
    went = where_the_time_went(results, args)
    print()
    print(table)
    print()
    print(note)
    print()
    print(went)
    out = os.path.abspath(args.out)
    plot = plot_accuracy(results, os.path.join(out, 'accuracy.png'))
    with open(os.path.join(args.out, 'results.md'), 'w') as f:
        f.write(table + '\n\n' + note + '\n\n' + went + '\n')
        if plot:
            f.write('\n![test accuracy over wall time](accuracy.png)\n')
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump({'settings': {k: v for k, v in vars(args).items()
                                if k not in ('paradigm_list', 'arms')},
                   'grid': grid.identity(), 'runs': results}, f, indent=2)
    print()
    print('plot: %s' % (plot or "none (matplotlib is not installed: python -m pip install "
                                 "'.[lab]')"))
    print('results: %s (results.md, results.json; each run under runs/)' % out)
    return 0 if all(r['status'] == 'ok' for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
