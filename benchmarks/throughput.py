"""Iterations per second of dist_ssp with a huge s against native dist_async.

Runs the same job (benchmarks/throughput_job.py: 2 workers, 1 server, a small
CNN under gluon.Trainer) alternately under both stores, ``--trials`` times,
and prints the median steps/s per worker of each and their ratio as a
markdown table.  ``dist_ssp`` with s = 1000000 never holds a worker, so the
ratio is the cost of the store's per-step bookkeeping and controller round trip.

    OMP_NUM_THREADS=1 python -m benchmarks.throughput --trials 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile



def run_once(store, steps, workdir):
    out = os.path.join(workdir, store)
    env = dict(os.environ, OMP_NUM_THREADS='1', MXNET_SSP_STALENESS='1000000',
               MXNET_SSP_METRICS_DIR='off',
               # the baseline is MXNet's own dist_async, not mxnet-ssp's wrapper of it
               MXNET_SSP_WRAP_ASYNC='0' if store == 'dist_async' else '1')
    cmd = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', '2', '-s', '1', '--launcher', 'local',
           sys.executable, '-m', 'benchmarks.throughput_job', '--kvstore', store,
           '--steps', str(steps), '--out', out]
    # every process starts in this directory (the checkout), so imports come from it
    subprocess.run(cmd, env=env, check=True, cwd=os.getcwd(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=900)
    rates = []
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as f:
            rates.append(json.load(f)['steps_per_s'])
    return sum(rates) / len(rates)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--trials', type=int, default=3)
    p.add_argument('--steps', type=int, default=80)
    args = p.parse_args()
    results = {'dist_async': [], 'dist_ssp': []}
    with tempfile.TemporaryDirectory() as workdir:
        for trial in range(args.trials):
            for store in ('dist_async', 'dist_ssp'):
                trial_dir = os.path.join(workdir, str(trial))
                os.makedirs(trial_dir, exist_ok=True)
                results[store].append(run_once(store, args.steps, trial_dir))
                print('trial %d %s: %.2f steps/s per worker' % (trial, store, results[store][-1]),
                      file=sys.stderr)
    med = {k: statistics.median(v) for k, v in results.items()}
    ratios = [s / a for s, a in zip(results['dist_ssp'], results['dist_async'])]
    print('| store | steps/s per worker (median of %d) | trials |' % args.trials)
    print('|---|---:|---|')
    for store in ('dist_async', 'dist_ssp'):
        print('| %s | %.2f | %s |' % (store, med[store], ', '.join('%.2f' % r for r in results[store])))
    print('\nratio dist_ssp / dist_async: median %.3f (per trial: %s)'
          % (statistics.median(ratios), ', '.join('%.3f' % r for r in ratios)))


if __name__ == '__main__':
    main()
