"""What the servers' wall-clock snapshots (MXNET_SSP_SERVER_SNAPSHOTS) cost a lab job.

Runs the same lab job (an emulated scenario, one paradigm, one seed) with and without the
snapshots, alternating (off, on, off, on, ...) so that a change in the machine's load hits
both, and prints each run's throughput (iterations of all workers per second over the job's
span) and the paired ratio on/off::

    python benchmarks/snapshot_cost.py --scenario mixed-4 --kvstore dist_async --pairs 3

The throughput is read from the workers' train logs; the load average before each run is
printed beside it (the 2 cores here are shared).
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from mxnet_ssp import config as cfg
from mxnet_ssp.lab.cluster_model.profiles import get_scenario
from mxnet_ssp.lab.reproduce.presets import LAB_SNAPSHOT_S, lab_epochs


def throughput(directory):
    """Iterations of all workers per second, from the first iteration's end to the last's."""
    ends = []
    for path in glob.glob(os.path.join(directory, 'train-worker*.jsonl')):
        with open(path) as f:
            ends += [json.loads(line)['time'] for line in f if line.strip()]
    return (len(ends) - 1) / (max(ends) - min(ends)) if len(ends) > 1 else None


def run_once(args, directory, snapshots):
    scenario = get_scenario(args.scenario)
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    env.update(OMP_NUM_THREADS='1', **{cfg.ENV_METRICS_DIR: directory})
    env.pop(cfg.ENV_SERVER_SNAPSHOTS, None)
    if snapshots:
        env[cfg.ENV_SERVER_SNAPSHOTS] = '%g' % LAB_SNAPSHOT_S
    python = sys.executable
    command = [python, '-m', 'mxnet_ssp.launch', '-n', str(scenario.workers), '-s', '1',
               '--launcher', 'local', '--timeout', '900', python, '-m',
               'mxnet_ssp.lab.train_cifar', '--model', 'mlp', '--dataset', 'mnist5k',
               '--batch-size', '32', '--num-epochs',
               str(lab_epochs(scenario.workers, args.iterations)), '--lr', '0.003',
               '--seed', '42', '--save-dir', directory, '--log-interval', '0', '--kvstore',
               args.kvstore, '--no-progress', '--save-period', '0', '--emulate',
               scenario.spec(), '--num-iterations', str(args.iterations)] + args.extra
    with open(os.path.join(directory, 'job.log'), 'w') as log:
        subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, check=True,
                       cwd=directory)
    return throughput(directory)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--scenario', default='mixed-4')
    parser.add_argument('--kvstore', default='dist_async')
    parser.add_argument('--iterations', type=int, default=400)
    parser.add_argument('--pairs', type=int, default=3)
    parser.add_argument('extra', nargs='*', help='more train_cifar flags (after --)')
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix='snapshot-cost-')
    ratios = []
    try:
        for pair in range(args.pairs):
            rates = {}
            for snapshots in (False, True):
                directory = os.path.join(root, '%d-%s' % (pair, 'on' if snapshots else 'off'))
                os.makedirs(directory)
                load = os.getloadavg()[0]
                rates[snapshots] = run_once(args, directory, snapshots)
                print('pair %d snapshots %-3s: %.1f it/s (load average before: %.1f)'
                      % (pair + 1, 'on' if snapshots else 'off', rates[snapshots], load),
                      flush=True)
            ratios.append(rates[True] / rates[False])
        print('on / off: median %.3f, each %s' % (float(np.median(ratios)),
                                                  ', '.join('%.3f' % r for r in ratios)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
