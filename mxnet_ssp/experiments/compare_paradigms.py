"""Compare BSP, ASP, SSP and DSSP on one machine, with one worker made slower.

Runs :mod:`mxnet_ssp.experiments.train_cifar` once per paradigm as a local
parameter-server job (``python -m mxnet_ssp.launch -n N -s 1 --launcher local
python -m mxnet_ssp.experiments.train_cifar ...``), each into its own
subdirectory of ``--out``, then prints a markdown table::

    mxnet-ssp-compare       # about 1.5-3 minutes on 2 busy cores

(``python -m mxnet_ssp.experiments.compare_paradigms`` and, in a checkout,
``python train_scripts/compare_paradigms.py`` run the same :func:`main`.)

Paradigms and the kvstore each one uses:

=========  ==============================================
bsp        ``dist_sync``
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
the numbers to ``<out>/results.json``.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

#: the training code every run starts, by module (it is installed with the package)
TRAIN_MODULE = 'mxnet_ssp.experiments.train_cifar'

#: paradigm -> (label, kvstore)
PARADIGMS = {
    'bsp': ('BSP', 'dist_sync'),
    'asp': ('ASP', 'dist_async'),
    'ssp': ('SSP', 'dist_ssp'),
    'dssp': ('DSSP', 'dist_dssp'),
}


def build_parser():
    p = argparse.ArgumentParser(
        description='Run train_cifar.py under BSP, ASP, SSP and DSSP with one slow worker '
                    'and print a comparison table.',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('-n', '--num-workers', type=int, default=4, help='workers per job')
    p.add_argument('-s', '--num-servers', type=int, default=1, help='servers per job')
    p.add_argument('--paradigms', default='bsp,asp,ssp,dssp',
                   help='comma-separated subset of %s, run in this order' % ','.join(PARADIGMS))
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
    unknown = [x for x in names if x not in PARADIGMS]
    if not names or unknown:
        parser.error('--paradigms %r is not valid: expected a comma-separated subset of %s'
                     % (args.paradigms, ','.join(PARADIGMS)))
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
    if not 0 < args.target_accuracy <= 1:
        parser.error('--target-accuracy %r is not valid: expected a number in (0, 1]'
                     % args.target_accuracy)
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        parser.error('--timeout %r is not valid: expected a number of seconds > 0' % args.timeout)
    return args


def train_command(args, paradigm, save_dir):
    """The train_cifar.py command line of one run (without the launcher)."""
    kvstore = PARADIGMS[paradigm][1]
    cmd = [sys.executable, '-m', TRAIN_MODULE, '--kvstore', kvstore,
           '--model', args.model, '--dataset', args.dataset,
           '--batch-size', str(args.batch_size), '--num-epochs', str(args.epochs),
           '--lr', str(args.lr), '--momentum', str(args.momentum), '--seed', str(args.seed),
           '--save-dir', save_dir, '--log-interval', '0']
    if args.slowdown:
        cmd += ['--slowdown', args.slowdown]
    if paradigm == 'ssp':
        cmd += ['--staleness', args.ssp_staleness]
    elif paradigm == 'dssp':
        cmd += ['--staleness', args.dssp_staleness]
    return cmd + args.extra.split()


def job_env():
    """This environment without DMLC_* and with one OpenMP thread per process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    env['OMP_NUM_THREADS'] = '1'
    return env


def read_jsonl(path):
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def collect(save_dir, num_workers, target):
    """Numbers of one finished run, from the files train_cifar.py wrote."""
    iterations, iteration_ms = {}, {}
    for rank in range(num_workers):
        records = read_jsonl(os.path.join(save_dir, 'train-worker%d.jsonl' % rank))
        iterations[rank] = max((r['iteration'] for r in records), default=0)
        if len(records) > 1:   # mean time between the ends of two iterations
            iteration_ms[rank] = round(
                1e3 * (records[-1]['time'] - records[0]['time']) / (len(records) - 1), 2)
    evals = read_jsonl(os.path.join(save_dir, 'eval.jsonl'))
    summary_path = os.path.join(save_dir, 'summary.json')
    summary = {}
    if os.path.isfile(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    reached = next((e for e in evals if e['accuracy'] >= target), None)
    return {
        'iterations_per_worker': iterations,
        'iteration_ms_per_worker': iteration_ms,
        'final_accuracy': summary.get('final_accuracy'),
        'train_time_s': summary.get('wall_time_s'),
        'time_to_target_s': reached['elapsed_s'] if reached else None,
        'iteration_at_target': reached['iteration'] if reached else None,
        'evaluations': len(evals),
    }


def run_one(args, paradigm):
    """Run one paradigm's job; return its result dict."""
    label, kvstore = PARADIGMS[paradigm]
    save_dir = os.path.abspath(os.path.join(args.out, paradigm))
    os.makedirs(save_dir, exist_ok=True)
    for name in os.listdir(save_dir):      # a previous run's metrics must not be mixed in
        if name.endswith(('.jsonl', '.json', '.params', '.log')):
            os.unlink(os.path.join(save_dir, name))
    launcher = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', str(args.num_workers),
                '-s', str(args.num_servers), '--launcher', 'local',
                '--timeout', '%g' % args.timeout]
    command = launcher + train_command(args, paradigm, save_dir)
    log_path = os.path.join(save_dir, 'job.log')
    print('[%s] %s ...' % (label, kvstore), end=' ', flush=True)
    start = time.time()
    with open(log_path, 'w') as log:
        log.write('$ %s\n' % ' '.join(command))
        log.flush()
        code = subprocess.call(command, env=job_env(), stdout=log, stderr=subprocess.STDOUT)
    job_time = time.time() - start
    result = {'paradigm': label, 'kvstore': kvstore, 'exit_code': code,
              'job_time_s': round(job_time, 2), 'log': log_path}
    result.update(collect(save_dir, args.num_workers, args.target_accuracy))
    if code == 0:
        print('%.0f s, final accuracy %s' % (job_time, _fmt(result['final_accuracy'], '%.3f')))
    else:
        print('FAILED with exit code %d after %.0f s, see %s' % (code, job_time, log_path))
    return result


def _fmt(value, fmt):
    return '-' if value is None else fmt % value


def markdown_table(results, args):
    """The comparison as a markdown table (one row per run)."""
    lines = ['| paradigm | kvstore | train time (s) | job time (s) | iterations/worker (min/max) '
             '| ms/iteration (min/max) | final test accuracy | time to %.0f%% (s) |'
             % (100 * args.target_accuracy),
             '|---|---|---:|---:|---:|---:|---:|---:|']
    for r in results:
        iters = list(r['iterations_per_worker'].values())
        status = '' if r['exit_code'] == 0 else ' (failed, exit %d)' % r['exit_code']
        kv = r['kvstore']
        if r['paradigm'] == 'SSP':
            kv += ' s=%s' % args.ssp_staleness
        elif r['paradigm'] == 'DSSP':
            kv += ' s=%s' % args.dssp_staleness
        per_iter = list(r['iteration_ms_per_worker'].values())
        lines.append('| %s%s | %s | %s | %.1f | %s | %s | %s | %s |' % (
            r['paradigm'], status, kv, _fmt(r['train_time_s'], '%.1f'), r['job_time_s'],
            '%d/%d' % (min(iters), max(iters)) if iters else '-',
            '%.0f/%.0f' % (min(per_iter), max(per_iter)) if per_iter else '-',
            _fmt(r['final_accuracy'], '%.3f'), _fmt(r['time_to_target_s'], '%.1f')))
    return '\n'.join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    print('%d workers, 1 slow (%s), %s on %s, %d epochs, batch %d, lr %g; runs in %s'
          % (args.num_workers, args.slowdown or 'none', args.model, args.dataset, args.epochs,
             args.batch_size, args.lr, os.path.abspath(args.out)), flush=True)
    results = [run_one(args, p) for p in args.paradigm_list]
    table = markdown_table(results, args)
    note = ('train time: worker 0 from its first iteration until every worker finished; '
            'job time: the whole launcher run, start-up included; ms/iteration: mean time per '
            'iteration of the fastest and of the slowest worker; time to target: training '
            'time until worker 0 first measured that test accuracy at the end of an epoch '
            '("-": not reached).')
    print()
    print(table)
    print()
    print(note)
    with open(os.path.join(args.out, 'results.md'), 'w') as f:
        f.write(table + '\n\n' + note + '\n')
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump({'settings': {k: v for k, v in vars(args).items() if k != 'paradigm_list'},
                   'runs': results}, f, indent=2)
    return 0 if all(r['exit_code'] == 0 for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
