"""Rule 3 of the lab's design (docs/lab.md, "Target and task"): the trials' target, fixed from
the tuning runs before any trial.

The target is the highest multiple of ``step`` (0.005) that the median tuning run at its
paradigm's chosen setting holds (the primary metric, ``stats.METRICS[0]``) by
``fraction`` (30%) of the tuning runs' common budget. Read as written in docs/lab.md before it
was first computed: the pool is every paradigm's tuning runs at its chosen setting (3 each);
a run that never holds a target, diverged or failed counts as infinitely long; the common
budget is the shortest finished tuning run's last evaluation (as
:func:`verdicts.common_budget` over the trials). The per-paradigm reading (every paradigm's
own median within the fraction) is computed beside it and reported, not used.

Run: ``python -m mxnet_ssp.lab.reproduce.target_rule OUT/SCENARIO`` (the folder
holding ``tuned_lr.json`` and ``runs/``); it reads the runs and changes nothing.  On the lab's
task C the rule reads at 80% of the budget from any level: ``--fraction 0.8 --lowest 0.005``
(:data:`TASK_C`; docs/lab.md, "transient-4 on the lab's task C").
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys

from .collect import eval_curve
from .json_files import read_json
from .stats import METRICS, metric_value
from .verdicts import common_budget

__all__ = ['chosen_runs', 'tuning_budget', 'held_time', 'read_rule', 'main']

#: the rule's constants, as pre-registered
STEP, FRACTION, LOWEST = 0.005, 0.3, 0.90
#: rule 3 on the lab's task C (docs/lab.md, "transient-4 on the lab's task C"): a late target
TASK_C = {'fraction': 0.8, 'lowest': STEP}


def _finished(directory):
    """(status, curve) of the run in `directory`; status None while it has no run.json."""
    marker = read_json(os.path.join(directory, 'run.json'))
    if not marker:
        return None, []
    status = marker.get('status')
    return status, (eval_curve(directory)[0] if status == 'ok' else [])


def _chosen_key(entry):
    """The directory name of a paradigm's chosen setting in its tuned_lr.json entry."""
    for key, cand in entry['candidates'].items():
        if math.isclose(cand['lr'], entry['chosen'], rel_tol=1e-9) and \
                math.isclose(cand.get('momentum', entry['momentum']), entry['momentum'],
                             rel_tol=1e-9):
            return key
    raise ValueError('tuned_lr.json: no candidate of lr %g momentum %g'
                     % (entry['chosen'], entry['momentum']))


def chosen_runs(scenario_dir, tuned):
    """{paradigm: [(status, curve)]}: the finished tuning runs at each chosen setting."""
    pool = {}
    for arm, entry in sorted(tuned.items()):
        pattern = os.path.join(scenario_dir, 'runs', arm, 'tune', _chosen_key(entry), 'trial*')
        runs = [_finished(d) for d in sorted(glob.glob(pattern))]
        pool[arm] = [r for r in runs if r[0] is not None]
    return pool


def tuning_budget(scenario_dir):
    """The shortest finished tuning run's last evaluation (seconds), or None: the trials'
    rule (:func:`verdicts.common_budget`) over every tuning run."""
    runs = [_finished(d) for d in
            glob.glob(os.path.join(scenario_dir, 'runs', '*', 'tune', '*', 'trial*'))]
    return common_budget([{'trials': [{'status': status, 'curve': curve}
                                      for status, curve in runs]}])


def held_time(run, target):
    """Seconds until `run` (``(status, curve)``) holds `target` under the primary metric; never: infinitely long."""
    status, curve = run
    held = metric_value(curve, target, METRICS[0]) if status == 'ok' and curve else None
    return math.inf if held is None else held


def read_rule(pool, budget, step=STEP, fraction=FRACTION, lowest=LOWEST):
    """The rule's table and reading: {'rows': [{target, pooled_median_s, per_arm, holds,
    every_arm_holds}], 'target', 'per_arm_target', 'limit_s'} (targets None when none holds)."""
    limit = fraction * budget
    rows = []
    for k in range(int(round(lowest / step)), int(round(1.0 / step)) + 1):
        target = round(k * step, 6)
        per_arm = {arm: statistics.median([held_time(r, target) for r in runs])
                   for arm, runs in pool.items() if runs}
        pooled = statistics.median([held_time(r, target) for runs in pool.values() for r in runs])
        rows.append(dict(target=target, pooled_median_s=pooled, per_arm=per_arm,
                         holds=pooled <= limit,
                         every_arm_holds=all(m <= limit for m in per_arm.values())))
    held = [r['target'] for r in rows if r['holds']]
    every = [r['target'] for r in rows if r['every_arm_holds']]
    return dict(rows=rows, limit_s=limit, budget_s=budget, fraction=fraction,
                target=max(held) if held else None,
                per_arm_target=max(every) if every else None)


def _seconds(x):
    return 'never' if math.isinf(x) else '%.2f' % x


def format_rule(reading, pool):
    lines = ['runs at the chosen settings: %s' % ', '.join(
                 '%s %d' % (arm, len(runs)) for arm, runs in sorted(pool.items())),
             'common budget %.2f s (the shortest finished tuning run); %d%% of it: %.2f s'
             % (reading['budget_s'], round(100 * reading['fraction']), reading['limit_s'])]
    for row in reading['rows']:
        if math.isinf(row['pooled_median_s']) and not row['holds']:
            continue
        lines.append('  %.3f: pooled median %s s%s; per paradigm: %s' % (
            row['target'], _seconds(row['pooled_median_s']),
            ' (holds)' if row['holds'] else '',
            ' '.join('%s %s' % (a, _seconds(m)) for a, m in sorted(row['per_arm'].items()))))
    lines.append('target by the rule (pooled median): %s' % reading['target'])
    lines.append('per-paradigm reading (every median within; reported, not used): %s'
                 % reading['per_arm_target'])
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m mxnet_ssp.lab.reproduce.target_rule',
        description='The trials\' target from the tuning runs (docs/lab.md, rule 3).')
    parser.add_argument('scenario_dir', help='OUT/SCENARIO: holds tuned_lr.json and runs/')
    parser.add_argument('--json', metavar='FILE', help='also write the reading as JSON')
    parser.add_argument('--fraction', type=float, default=FRACTION,
                        help='the share of the tuning runs\' common budget by which the target '
                             'is held (default %g, the mnist5k design; %g on the lab\'s task C)'
                        % (FRACTION, TASK_C['fraction']))
    parser.add_argument('--lowest', type=float, default=LOWEST,
                        help='the lowest level read (default %g, the mnist5k design; %g on the '
                             'lab\'s task C)' % (LOWEST, TASK_C['lowest']))
    args = parser.parse_args(argv)
    if not 0 < args.fraction <= 1:
        parser.error('--fraction %r is not valid: expected a number in (0, 1]' % args.fraction)
    if not 0 < args.lowest <= 1:
        parser.error('--lowest %r is not valid: expected a number in (0, 1]' % args.lowest)
    path = os.path.join(args.scenario_dir, 'tuned_lr.json')
    if not os.path.exists(path):
        parser.error('%s: no tuned_lr.json (the tuning has not finished there)' % path)
    tuned = read_json(path)
    if not isinstance(tuned, dict):
        parser.error('%s: not a JSON object' % path)
    pool = chosen_runs(args.scenario_dir, tuned)
    budget = tuning_budget(args.scenario_dir)
    if budget is None:
        parser.error('%s: no finished tuning run with an evaluation curve' % args.scenario_dir)
    reading = read_rule(pool, budget, fraction=args.fraction, lowest=args.lowest)
    print(format_rule(reading, pool))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(reading, f, indent=1, default=str)
    return 0


if __name__ == '__main__':
    sys.exit(main())
