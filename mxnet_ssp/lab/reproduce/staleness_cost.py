"""Fit what staleness costs on the lab's runs, and calibrate the advisor's time to a target.

``python -m mxnet_ssp.lab.reproduce.staleness_cost [--write]`` reads the committed run
records (``docs/lab_runs/<record>/results.json`` of :data:`RECORDS`) and

1. **fits** the model of :mod:`mxnet_ssp.lab.cluster_model.time_to_target`: per trial, the
   gradients (of all workers) applied until the target was held (time to the target under the
   lab's primary metric x the trial's measured iterations per second) against the trial's
   measured mean gradient staleness.  Each scenario's ``updates0`` is the median of its BSP
   trials (staleness 0); ``cost`` is the least-squares slope, through the origin, of
   ``updates / updates0 - 1`` against the staleness over every other trial (ASP, SSP,
   DSSP; not ``asp-lrtau``, another update rule).  The advisor's ``updates0`` is the median
   over every BSP trial.
2. **calibrates** the whole prediction out of sample: for each scenario, the model is fitted
   on the *other* scenarios only, the advisor's simulator (``mxnet-ssp-advise --cluster
   <scenario>``: its default step overhead, :data:`SEEDS` seeds) gives each paradigm's
   throughput and gradient staleness, and the predicted time to the target (median over the
   seeds) is set against the median measured one.  The 10th and 90th percentiles of
   measured / predicted over the rows are the advisor's error.

``--write`` stores the result in ``mxnet_ssp/lab/cluster_model/time_to_target.json`` (a few
KB); without it, the table is printed.  Nothing here starts a job.
"""
import argparse
import json
import os
import statistics
import sys

from ..cluster_model.advise import fit_cluster, predict
from ..cluster_model.arms import parse_arm, sim_policy
from ..cluster_model.profiles import SCENARIOS
from ..cluster_model.time_to_target import FIT_FILE, quantile
from .json_files import write_json
from .stats import HOLD_S, sustained_time

__all__ = ['RECORDS', 'LEFT_OUT', 'trial_rows', 'fit_cost', 'calibrate', 'build',
           'format_table', 'main']

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
RUNS_DIR = os.path.join(ROOT, 'docs', 'lab_runs')
#: (record, scenario): every lab scenario's chosen settings, the older tuned runs included
RECORDS = (('2026-11-26-mixed-2-tuned', 'mixed-2'),
           ('2026-11-26-mixed-4-tuned', 'mixed-4'),
           ('2026-11-28-link-4', 'link-4'),
           ('2026-11-29-transient-4-trials-part2', 'transient-4'),
           ('2026-11-30-mixed-4-trials-part1', 'mixed-4'))
#: records with a results.json that the fit leaves out, and why
LEFT_OUT = {
    '2026-11-25-mixed-2': 'learning rates not tuned per paradigm (BSP needed 3x the '
                          'gradients of its tuned rerun)',
    '2026-11-27-transient-4-pilot': 'a pilot: one finished trial per paradigm',
    '2026-11-29-transient-4-runner-up-part2': 'the runner-up settings, not the chosen ones',
    '2026-11-30-mixed-4-runner-up-part2': 'the runner-up settings, not the chosen ones',
}
#: the target every record measured (its grid's targets all include it)
TARGET = 0.92
METRIC = 'sustained'
#: arms that are another update rule, not another synchronization
OTHER_RULES = ('asp-lrtau',)
#: compute draws per paradigm in the calibration's simulations
SEEDS = 10
#: the quantiles of measured / predicted that make the advisor's interval
ERROR_QUANTILES = (0.1, 0.9)


class CalibrationError(ValueError):
    """A record cannot be read or fitted: the message names it."""


def trial_rows(results, target=TARGET):
    """Rows of one record's results.json (a dict): ``{'arm', 'time_s', 'throughput',
    'staleness', 'updates'}`` per finished trial that held `target` (the sustained metric);
    also the number of finished trials that did not."""
    rows, missed = [], 0
    for arm in results.get('arms', []):
        if arm['arm'] in OTHER_RULES:
            continue
        for trial in arm.get('trials', []):
            if trial.get('status') != 'ok' or not trial.get('curve'):
                continue
            seconds = sustained_time(trial['curve'], target, HOLD_S)
            if seconds is None:
                missed += 1
                continue
            rate = sum(trial['it_per_s'].values())
            stale = (trial.get('staleness') or {}).get('mean')
            if stale is None:
                raise CalibrationError('trial %s of %s has no measured staleness'
                                       % (trial.get('trial'), arm['arm']))
            rows.append({'arm': arm['arm'], 'time_s': seconds, 'throughput': rate,
                         'staleness': stale, 'updates': seconds * rate})
    return rows, missed


def fit_cost(by_scenario):
    """``{'cost', 'updates0', 'per_scenario'}`` of ``{scenario: rows}`` (see the module's
    docstring); a scenario without a BSP trial adds nothing."""
    per_scenario, xs, ys, bsp = {}, [], [], []
    for name, rows in sorted(by_scenario.items()):
        base = [r['updates'] for r in rows if r['arm'] == 'bsp']
        if not base:
            continue
        per_scenario[name] = statistics.median(base)
        bsp += base
        for r in rows:
            if r['arm'] != 'bsp' and r['staleness'] > 0:
                xs.append(r['staleness'])
                ys.append(r['updates'] / per_scenario[name] - 1.0)
    if not xs:
        raise CalibrationError('no scenario has both BSP trials and stale ones to fit')
    cost = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    return {'cost': cost, 'updates0': statistics.median(bsp), 'per_scenario': per_scenario,
            'trials': len(xs) + len(bsp), 'staleness_max': max(xs)}


def simulated(scenario, arms, target, seeds=SEEDS):
    """{arm: per-seed predicted seconds to the target} of the advisor on the lab scenario
    `scenario` (``mxnet-ssp-advise --cluster <scenario>``: its simulator, its default step
    overhead and run), `target` ``(updates0, cost)``."""
    paradigms = []
    for name in arms:
        arm = parse_arm(name)
        paradigms.append((name, sim_policy(arm), arm.balance))
    return {p.label: p.times
            for p in predict(fit_cluster(SCENARIOS[scenario]), seeds=seeds,
                             paradigms=paradigms, target=target)}


def calibrate(by_scenario, seeds=SEEDS, predicted_times=simulated):
    """Out-of-sample rows: for each scenario, the model fitted on the others predicts each
    arm's time to the target (`predicted_times(scenario, arms, (updates0, cost), seeds)`:
    {arm: per-seed seconds}; default the advisor's simulator).  Each row: ``{'scenario',
    'arm', 'trials', 'measured_s', 'measured_range', 'predicted_s', 'ratio', ...}`` (ratio:
    measured / predicted, the medians over trials and over seeds)."""
    out = []
    for name in sorted(by_scenario):
        others = {k: v for k, v in by_scenario.items() if k != name}
        fit = fit_cost(others)
        rows = by_scenario[name]
        arms = sorted({r['arm'] for r in rows})
        times = predicted_times(name, arms, (fit['updates0'], fit['cost']), seeds)
        for arm in arms:
            measured = [r['time_s'] for r in rows if r['arm'] == arm]
            predicted = statistics.median(times[arm])
            m = statistics.median(measured)
            out.append({'scenario': name, 'arm': arm, 'trials': len(measured),
                        'measured_s': round(m, 3),
                        'measured_range': [round(min(measured), 3), round(max(measured), 3)],
                        'predicted_s': round(predicted, 3), 'ratio': round(m / predicted, 4),
                        'cost_fitted_without': round(fit['cost'], 4),
                        'updates0_fitted_without': round(fit['updates0'], 1)})
    return out


def read_records(runs_dir=RUNS_DIR, records=RECORDS, target=TARGET):
    """{scenario: rows} of `records` (several records of one scenario are pooled) and the
    trials that missed the target per record."""
    by_scenario, missed = {}, {}
    for record, scenario in records:
        path = os.path.join(runs_dir, record, 'results.json')
        try:
            with open(path) as f:
                results = json.load(f)
        except (OSError, ValueError) as err:
            raise CalibrationError('%s cannot be read: %s' % (path, err)) from None
        emulate = results.get('grid', {}).get('emulate')
        if emulate != scenario:
            raise CalibrationError('%s ran scenario %r, not %r' % (path, emulate, scenario))
        rows, missed[record] = trial_rows(results, target)
        by_scenario.setdefault(scenario, []).extend(rows)
    return by_scenario, missed


def build(runs_dir=RUNS_DIR, seeds=SEEDS, records=RECORDS):
    """The fit file's content (what :data:`FIT_FILE` holds)."""
    by_scenario, missed = read_records(runs_dir, records)
    fit = fit_cost(by_scenario)
    rows = calibrate(by_scenario, seeds)
    ratios = [r['ratio'] for r in rows]
    low, high = (quantile(ratios, q) for q in ERROR_QUANTILES)
    return {
        'command': 'python -m mxnet_ssp.lab.reproduce.staleness_cost --write',
        'model': {'target': TARGET, 'metric': METRIC, 'updates0': round(fit['updates0'], 1),
                  'cost': round(fit['cost'], 4), 'error_low': round(low, 4),
                  'error_high': round(high, 4), 'rows': len(rows),
                  'coverage': round(sum(low <= x <= high for x in ratios) / len(ratios), 4),
                  'staleness_max': round(fit['staleness_max'], 3)},
        'per_scenario_updates0': {k: round(v, 1) for k, v in fit['per_scenario'].items()},
        'records': [r for r, _ in records], 'left_out': LEFT_OUT,
        'trials_missing_the_target': missed, 'trials_fitted': fit['trials'],
        'seeds': seeds, 'calibration': rows}


def format_table(data):
    """The calibration table (markdown) and the fit, as docs/lab.md shows them."""
    m = data['model']
    lines = ['| scenario | paradigm | trials | measured s: median [min-max] | predicted s | '
             'measured / predicted |', '|---|---|---:|---:|---:|---:|']
    for r in data['calibration']:
        lines.append('| %s | %s | %d | %.1f [%.1f-%.1f] | %.1f | %.2f |' % (
            r['scenario'], r['arm'], r['trials'], r['measured_s'], r['measured_range'][0],
            r['measured_range'][1], r['predicted_s'], r['ratio']))
    ratios = [r['ratio'] for r in data['calibration']]
    lines += ['', 'Fit on %d trials of %s: updates0 %.0f gradients to %.3g (%s), cost %.3f per '
              'unit of mean gradient staleness. Out of sample, measured / predicted: median '
              '%.2f, 10th-90th percentile %.2f-%.2f (%d of the %d rows inside), min-max '
              '%.2f-%.2f.' % (
                  data['trials_fitted'], ', '.join(data['records']), m['updates0'],
                  m['target'], m['metric'], m['cost'], statistics.median(ratios),
                  m['error_low'], m['error_high'], round(m['coverage'] * len(ratios)),
                  len(ratios), min(ratios), max(ratios))]
    return '\n'.join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog='python -m mxnet_ssp.lab.reproduce.staleness_cost',
        description='Fit the staleness cost on the lab\'s run records and calibrate the '
                    'advisor\'s time to target against every scenario (docs/lab.md).')
    p.add_argument('--runs-dir', default=RUNS_DIR, help='the run records (default %(default)s)')
    p.add_argument('--seeds', type=int, default=SEEDS,
                   help='simulator seeds per paradigm (default %(default)s)')
    p.add_argument('--write', action='store_true', help='write %s' % FIT_FILE)
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error('--seeds %r is not valid: expected an integer >= 1' % args.seeds)
    try:
        data = build(args.runs_dir, args.seeds)
    except CalibrationError as err:
        sys.stderr.write('staleness_cost: error: %s\n' % err)
        return 2
    print(format_table(data))
    if args.write:
        write_json(FIT_FILE, data)
        print('wrote %s' % FIT_FILE)
    return 0


if __name__ == '__main__':
    sys.exit(main())
