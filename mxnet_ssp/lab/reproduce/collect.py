"""Reading the runs under ``--out``: one run's numbers (:func:`collect_run`) and every
trial of every arm (:func:`gather`)."""
import glob
import os
import re

import numpy as np

from ..cluster_model.arms import parse_arm
from ...core.jsonl import read_jsonl
from ...core.names import CONTROLLER_METRICS, STORE_METRICS, TRAIN_LOG
from ..training.diverge import reports_divergence
from .grid import DIVERGED, MARKER, run_dir, trial_seed
from .json_files import read_json
from .server_eval import SERVER_EVAL
from .stats import lead_from_train_logs, staleness_from_train_logs


def log_tail(path, lines=12):
    """The last `lines` lines of the text file at `path` ([] when it cannot be read)."""
    try:
        with open(path, errors='replace') as f:
            return f.read().splitlines()[-lines:]
    except OSError:
        return []


def diverged_run(marker, directory):
    """True if the run whose `marker` is in `directory` ended because its training diverged:
    its status says so, or (a marker written before that status existed) it failed with the
    training script's divergence message (:mod:`..training.diverge`) in its reason or in the
    last 400 lines of its ``job.log``."""
    if not marker or marker.get('status') == 'ok':
        return False
    if marker.get('status') == DIVERGED:
        return True
    return reports_divergence(marker.get('reason') or '') or any(
        reports_divergence(line) for line in log_tail(os.path.join(directory, 'job.log'), 400))


def eval_curve(directory):
    """(curve, source, epochs) of the run in `directory`: the [(seconds, accuracy)] that
    decides its times to target, where it comes from, and worker 0's per-epoch curve.

    ``source`` is ``servers`` (the servers' model at fixed wall-clock times,
    ``eval_server.jsonl``: the lab since 2026-11-27), ``fixed`` (worker 0's copies at fixed
    times, ``eval_fixed.jsonl``, ``--snapshot-every``) or ``epochs`` (worker 0's per-epoch
    evaluations), the first the run has."""
    epochs = [(float(e['elapsed_s']), float(e['accuracy']))
              for e in read_jsonl(os.path.join(directory, 'eval.jsonl'))]
    for source, name in (('servers', SERVER_EVAL), ('fixed', 'eval_fixed.jsonl')):
        points = read_jsonl(os.path.join(directory, name))
        if points:
            return [(float(e['elapsed_s']), float(e['accuracy'])) for e in points], source, epochs
    return epochs, 'epochs', epochs


def _read_logs(directory, pattern):
    """{rank: records} of the JSON Lines files `pattern` (``%d`` the rank) in `directory`."""
    logs = {}
    for path in glob.glob(os.path.join(directory, pattern.replace('%d', '*'))):
        records = read_jsonl(path)
        if records:
            logs[int(records[0]['rank'])] = records
    return logs


def _computing(x):
    return x['compute_s'] + x.get('sleep_s', 0.0)


def _worker_numbers(logs, result):
    """Per rank: iterations per second, median compute and step, idle share, overruns, CPU;
    returns {rank: seconds busy}."""
    busy = {}
    for r, recs in sorted(logs.items()):
        busy[r] = sum(_computing(x) + x['step_s'] for x in recs)
        span = recs[-1]['time'] - recs[0]['time'] + _computing(recs[0]) + recs[0]['step_s']
        result['it_per_s'][r] = len(recs) / span if span > 0 else None
        result['compute_ms'][r] = 1e3 * float(np.median([_computing(x) for x in recs]))
        result['step_ms'][r] = 1e3 * float(np.median([x['step_s'] for x in recs]))
        if span > 0:      # the share of the wall time not spent computing (incl. emulated)
            result.setdefault('idle_share', {})[r] = 1.0 - sum(
                _computing(x) for x in recs) / span
        if 'emulated_s' in recs[0]:       # passes longer than the profile (not padded)
            result.setdefault('overruns', {})[r] = sum(
                1 for x in recs if x['compute_s'] > x['emulated_s'])
        if 'cpu_s' in recs[-1]:           # this worker's process CPU over its iterations
            result.setdefault('cpu_s', {})[r] = recs[-1]['cpu_s'] - recs[0]['cpu_s']
    late = [x['sleep_late_s'] for recs in logs.values() for x in recs
            if x.get('sleep_s', 0.0) > 0 and 'sleep_late_s' in x]
    if late:         # how late the emulated compute's sleeps woke: CPU contention
        result['sleep_late_ms'] = {'p%d' % q: round(1e3 * float(np.percentile(late, q)), 3)
                                   for q in (50, 90, 99)}
    steps = [x['step_s'] for recs in logs.values() for x in recs]
    if steps:        # the step-time distribution (the lab's simulator check draws from it)
        result['step_quantiles_ms'] = [round(1e3 * v, 4) for v in
                                       np.percentile(steps, np.arange(101))]
    return busy


def process_cpu(directory):
    """Per role of the processes that record it (``cpu-<role>-<pid>.json``: scheduler,
    server, controller): their number, CPU seconds and the cores they kept busy."""
    usage = {}
    for path in glob.glob(os.path.join(directory, 'cpu-*.json')):
        record = read_json(path) or {}
        if record.get('role') and record.get('wall_s'):
            cpu = float(record['cpu_s'])
            role = usage.setdefault(record['role'], {'processes': 0, 'cpu_s': 0.0, 'cores': 0.0})
            role['processes'] += 1
            role['cpu_s'] = round(role['cpu_s'] + cpu, 4)
            role['cores'] = round(role['cores'] + cpu / record['wall_s'], 4)
    return usage


def store_numbers(directory, busy):
    """The SSP stores' own metrics: lead at release, grants, waiting for OK (empty without)."""
    store = _read_logs(directory, STORE_METRICS)
    if not store:
        return {}
    out = {'release_lead_mean': {r: float(np.mean([x['lead'] for x in recs]))
                                 for r, recs in sorted(store.items())},
           'release_lead_max': max(x['lead'] for recs in store.values() for x in recs),
           'grants': sum(1 for recs in store.values() for x in recs if x.get('granted')),
           'longest_wait_s': max(x['wait_s'] for recs in store.values() for x in recs),
           'wait_share': {r: (sum(x['wait_s'] for x in recs) / busy[r] if busy.get(r) else None)
                          for r, recs in sorted(store.items())}}
    pushes = [e for e in read_jsonl(os.path.join(directory, CONTROLLER_METRICS))
              if e.get('event') == 'push']
    if pushes:
        out['holds'] = sum(1 for e in pushes if e.get('decision') == 'wait')
    return out


def gradient_staleness(directory, logs, arm):
    """The gradients' staleness: the servers' histograms when there are, else 0 for BSP, else
    the estimate from the train logs."""
    histogram = {}
    for path in glob.glob(os.path.join(directory, 'server-*-staleness.json')):
        for tau, n in (read_json(path) or {}).get('histogram', {}).items():
            histogram[int(tau)] = histogram.get(int(tau), 0) + int(n)
    if histogram:
        total = sum(histogram.values())
        return {'source': 'servers', 'mean': sum(t * n for t, n in histogram.items()) / total,
                'max': max(histogram)}
    if arm.family == 'bsp':
        return {'source': 'bsp', 'mean': 0.0, 'max': 0}
    values = staleness_from_train_logs(logs)
    return {'source': 'estimate', 'mean': float(np.mean(values)) if values else None,
            'max': max(values) if values else None}


def collect_run(directory, arm):
    """The numbers of one finished run, from the files in `directory`.

    Returns
    -------
    dict
        ``curve`` [(seconds, accuracy)] and ``curve_source`` (:func:`eval_curve`), worker 0's
        per-epoch ``curve_epochs``, ``final_accuracy``, ``train_time_s``, per-rank
        ``iterations``, ``it_per_s``, ``compute_ms`` (median compute plus emulated slowdown),
        ``step_ms`` (median push/pull/wait), the leads from the train logs, the stores' leads at
        release, grants and waiting (:func:`store_numbers`), the gradient staleness
        (:func:`gradient_staleness`) and ``process_cpu`` (:func:`process_cpu`).
    """
    summary = read_json(os.path.join(directory, 'summary.json')) or {}
    curve, source, epochs = eval_curve(directory)
    logs = _read_logs(directory, TRAIN_LOG)
    result = {
        'curve': curve, 'curve_source': source, 'curve_epochs': epochs,
        'final_accuracy': summary.get('final_accuracy', epochs[-1][1] if epochs else None),
        'train_time_s': summary.get('wall_time_s'),
        'iterations': {r: logs[r][-1]['iteration'] for r in sorted(logs)},
        'it_per_s': {}, 'compute_ms': {}, 'step_ms': {},
        # which store carried the arm's traffic (class, buckets): one data path per comparison
        'data_path': summary.get('data_path'),
    }
    busy = _worker_numbers(logs, result)
    if result.get('cpu_s') and result['train_time_s']:
        # the cores the workers kept busy on average (scheduler and servers not counted)
        result['worker_cores'] = round(sum(result['cpu_s'].values())
                                       / float(result['train_time_s']), 3)
    usage = process_cpu(directory)
    if usage:
        result['process_cpu'] = usage
    result['max_lead'], result['mean_lead'] = lead_from_train_logs(logs)
    result.update(store_numbers(directory, busy))
    result['staleness'] = gradient_staleness(directory, logs, arm)
    return result


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
            marker = read_json(os.path.join(directory, MARKER))
            record = {'trial': trial, 'dir': directory,
                      'status': (DIVERGED if diverged_run(marker, directory)
                                 else marker['status'] if marker else 'not run'),
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
