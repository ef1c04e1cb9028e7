"""The pilot that chooses the lab's task: its criteria C1-C4 (docs/lab.md, "The pilot for a task
with power") and C1' ("The second pilot: candidate C"), read from a pilot's runs.  Reads,
changes nothing.

    python -m mxnet_ssp.lab.reproduce.pilot OUT/SCENARIO [--json FILE]

``OUT/SCENARIO`` holds ``runs/<arm>/trial<k>/`` as the runner writes them (no tuning runs).

* **C1, a late target.**  T is the highest multiple of 0.005 that the pooled median run (every
  run, the primary metric: sustained accuracy) holds by 80% of the common budget (the shortest
  finished run's last evaluation).  Met if the pooled median time to T is at least 50% of it.
* **C1', the target comes from learning, not from a noisy plateau** (added before the second
  pilot, candidate C): with L(f) the highest multiple of 0.005 that the pooled median run holds
  by f of the budget (so T = L(0.8)), met if L(1) - L(0.5) >= 0.01 (the pooled median curve
  still gains between half and all of the budget) and T is at least 0.02 below the median of
  the finished runs' final accuracies (each run's last evaluation).  The first pilot's readings
  (candidates A and B) were made without it; it is reported for them too.  Not met
  when the pooled median run holds no level by half the budget.
* **C2, staleness costs.**  Gradients to T: every worker's iterations done when the run first
  holds T (the train logs' times against worker 0's clock).  Met if the median of ``asp``'s
  runs or of ``ssp15``'s is at least 1.3 times ``bsp``'s.  A run that never holds T counts as
  infinite.
* **C3, evaluation noise.**  Met if sqrt(T (1 - T) / n_test) <= 0.02 / 4.
* **C4, cost.**  Met if the median run takes at most 120 s (``run.json``'s ``duration_s``, the
  job from its start; the servers' evaluation after it not counted) and a scenario (9 arms x 8
  trials, tuning of 9 arms x 3 rates x 2 seeds) at the median run and evaluation times fits in
  6 hours.
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys

from ...core.names import TRAIN_LOG
from .collect import eval_curve
from ...core.jsonl import read_jsonl
from .json_files import read_json
from .target_rule import held_time, read_rule
from .verdicts import common_budget

__all__ = ['read_runs', 'gradients_by', 'criteria', 'main']

STEP = 0.005
#: T is held by the pooled median run by this share of the budget ...
TARGET_SHARE = 0.8
#: ... and C1 wants its pooled median time at least this share of it
LATE_SHARE = 0.5
#: C1': the pooled median curve gains at least this between half and all of the budget ...
LATE_GAIN = 0.01
#: ... and T lies at least this far below the median final accuracy
FINAL_MARGIN = 0.02
STALE_COST = 1.3
SMALLEST_GAP = 0.02
MAX_RUN_S = 120.0
SCENARIO_RUNS = 9 * 8 + 9 * 3 * 2
SCENARIO_HOURS = 6.0


def read_runs(scenario_dir):
    """[{arm, trial, status, curve, start, logs, duration_s, eval_s, n_test}] of the runs
    under `scenario_dir`/runs (tuning runs left out)."""
    runs = []
    for directory in sorted(glob.glob(os.path.join(scenario_dir, 'runs', '*', 'trial*'))):
        marker = read_json(os.path.join(directory, 'run.json'))
        if not marker:
            continue
        curve = eval_curve(directory)[0] if marker.get('status') == 'ok' else []
        evals = read_jsonl(os.path.join(directory, 'eval.jsonl'))
        start = (float(evals[0]['time']) - float(evals[0]['elapsed_s'])) if evals else None
        logs = {}
        for path in glob.glob(os.path.join(directory, TRAIN_LOG.replace('%d', '*'))):
            records = read_jsonl(path)
            if records:
                logs[int(records[0]['rank'])] = [float(r['time']) for r in records]
        summary = read_json(os.path.join(directory, 'summary.json')) or {}
        options = summary.get('data_options') or {}
        runs.append({'arm': os.path.basename(os.path.dirname(directory)),
                     'trial': os.path.basename(directory), 'status': marker.get('status'),
                     'curve': curve, 'start': start, 'logs': logs,
                     'duration_s': marker.get('duration_s'),
                     'eval_s': (marker.get('server_eval') or {}).get('seconds'),
                     'n_test': options.get('test_size')})
    return runs


def time_to(run, target):
    """Seconds until `run` holds `target` (the primary metric), or infinity."""
    return held_time((run['status'], run['curve']), target)


def gradients_by(run, seconds):
    """Every worker's iterations done by `seconds` on worker 0's clock (None: no clock)."""
    if run['start'] is None or math.isinf(seconds):
        return math.inf
    limit = run['start'] + seconds
    return sum(sum(1 for t in times if t <= limit) for times in run['logs'].values())


def _median(values):
    return statistics.median(values) if values else None


def criteria(runs, n_test_default=10000):
    """The pilot's reading: budget, T, C1-C4 with their figures and verdicts."""
    finished = [r for r in runs if r['status'] == 'ok' and r['curve']]
    if not finished:
        raise ValueError('no finished run with an evaluation curve')
    budget = common_budget([{'trials': runs}])
    pool = {}
    for r in runs:
        pool.setdefault(r['arm'], []).append((r['status'], r['curve']))
    # rule 3's reading, at 80% of the budget and from the lowest step up
    target = read_rule(pool, budget, step=STEP, fraction=TARGET_SHARE, lowest=STEP)['target']
    out = {'runs': len(runs), 'finished': len(finished), 'budget_s': budget, 'target': target}
    if target is None:
        out['verdict'] = 'no target: the pooled median run holds no level by 80% of the budget'
        return out
    pooled = statistics.median([time_to(r, target) for r in runs])
    out['c1'] = {'pooled_median_s': pooled, 'share_of_budget': pooled / budget,
                 'met': pooled >= LATE_SHARE * budget}
    out['c1_strict'] = _still_learning(pool, budget, target, finished)
    per_arm = {}
    for r in runs:
        per_arm.setdefault(r['arm'], []).append(gradients_by(r, time_to(r, target)))
    medians = {arm: _median(v) for arm, v in sorted(per_arm.items())}
    bsp = medians.get('bsp')
    ratios = {arm: (medians[arm] / bsp if bsp and not math.isinf(bsp) else None)
              for arm in ('asp', 'ssp15') if arm in medians}
    out['c2'] = {'gradients_to_target': {a: v for a, v in per_arm.items()},
                 'median': medians, 'ratio_to_bsp': ratios,
                 'met': any(x is not None and x >= STALE_COST for x in ratios.values())}
    sizes = [r['n_test'] for r in runs if r['n_test']]
    n_test = sizes[0] if sizes else n_test_default
    se = math.sqrt(target * (1 - target) / n_test)
    out['c3'] = {'n_test': n_test, 'standard_error': se, 'met': se <= SMALLEST_GAP / 4}
    run_s = _median([r['duration_s'] for r in runs if r['duration_s']])
    eval_s = _median([r['eval_s'] for r in runs if r['eval_s']]) or 0.0
    hours = SCENARIO_RUNS * ((run_s or 0.0) + eval_s) / 3600.0
    out['c4'] = {'median_run_s': run_s, 'median_eval_s': eval_s, 'scenario_hours': hours,
                 'met': run_s is not None and run_s <= MAX_RUN_S and hours <= SCENARIO_HOURS}
    out['met'] = all(out[c]['met'] for c in ('c1', 'c2', 'c3', 'c4'))
    out['met_with_c1_strict'] = out['met'] and out['c1_strict']['met']
    return out


def _still_learning(pool, budget, target, finished):
    """C1': the pooled median run's held level at half and all of the budget, and the
    median final accuracy against T."""
    half, whole = (read_rule(pool, budget, step=STEP, fraction=f, lowest=STEP)['target']
                   for f in (0.5, 1.0))
    final = statistics.median([r['curve'][-1][1] for r in finished])
    gain = (whole - half) if half is not None and whole is not None else None
    return {'held_at_half': half, 'held_at_end': whole, 'gain': gain,
            'median_final_accuracy': final, 'margin': final - target,
            'met': (gain is not None and gain >= LATE_GAIN - 1e-9
                    and final - target >= FINAL_MARGIN - 1e-9)}


def _fmt(x):
    return 'never' if x is None or (isinstance(x, float) and math.isinf(x)) else (
        '%.3g' % x if isinstance(x, float) else str(x))


def format_reading(reading):
    lines = ['runs %d (finished %d); common budget %.2f s' % (
        reading['runs'], reading['finished'], reading['budget_s'])]
    if reading['target'] is None:
        return '\n'.join(lines + [reading['verdict']])
    c1, c1s, c2, c3, c4 = (reading[k] for k in ('c1', 'c1_strict', 'c2', 'c3', 'c4'))
    lines += [
        'T = %.3f (the highest level the pooled median run holds by %d%% of the budget)'
        % (reading['target'], round(100 * TARGET_SHARE)),
        'C1 late target: pooled median time to T %.2f s = %.0f%% of the budget (goal >= %d%%): %s'
        % (c1['pooled_median_s'], 100 * c1['share_of_budget'], round(100 * LATE_SHARE),
           'met' if c1['met'] else 'NOT met'),
        "C1' still learning: the pooled median run holds %s at half the budget and %s at its "
        "end (gain %s, goal >= %g); median final accuracy %.3f, %.3f above T (goal >= %g): %s"
        % (_fmt(c1s['held_at_half']), _fmt(c1s['held_at_end']), _fmt(c1s['gain']), LATE_GAIN,
           c1s['median_final_accuracy'], c1s['margin'], FINAL_MARGIN,
           'met' if c1s['met'] else 'NOT met'),
        'C2 staleness costs: gradients to T, median per arm: %s; ratio to BSP: %s (goal >= %g '
        'for asp or ssp15): %s' % (
            ', '.join('%s %s' % (a, _fmt(v)) for a, v in c2['median'].items()),
            ', '.join('%s %s' % (a, _fmt(v)) for a, v in c2['ratio_to_bsp'].items()),
            STALE_COST, 'met' if c2['met'] else 'NOT met'),
        'C3 evaluation noise: SE at T with %d test samples %.4f (goal <= %.4f): %s'
        % (c3['n_test'], c3['standard_error'], SMALLEST_GAP / 4,
           'met' if c3['met'] else 'NOT met'),
        'C4 cost: median run %s s (goal <= %g), evaluation %s s; a scenario of %d runs: %.1f h '
        '(goal <= %g): %s' % (_fmt(c4['median_run_s']), MAX_RUN_S, _fmt(c4['median_eval_s']),
                             SCENARIO_RUNS, c4['scenario_hours'], SCENARIO_HOURS,
                             'met' if c4['met'] else 'NOT met'),
        'C1-C4 met (the first pilot\'s rule): %s; with C1\' (the second pilot\'s rule): %s'
        % ('yes' if reading['met'] else 'no', 'yes' if reading['met_with_c1_strict'] else 'no')]
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m mxnet_ssp.lab.reproduce.pilot',
                                     description=__doc__.split('\n')[0])
    parser.add_argument('scenario_dir', help='OUT/SCENARIO: holds runs/<arm>/trial<k>/')
    parser.add_argument('--json', metavar='FILE', help='also write the reading as JSON')
    args = parser.parse_args(argv)
    runs = read_runs(args.scenario_dir)
    try:
        reading = criteria(runs)
    except ValueError as err:
        parser.error('%s: %s' % (args.scenario_dir, err))
    print(format_reading(reading))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(reading, f, indent=1, default=lambda x: None)
    return 0


if __name__ == '__main__':
    sys.exit(main())
