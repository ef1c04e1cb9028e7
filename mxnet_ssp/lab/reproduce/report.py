"""The report: per arm the median trial and its numbers (:func:`summarize`), the markdown
``report.md`` with the analogue of the paper's Table I (:func:`build_report`) and
``results.json`` (:func:`results_json`); :func:`write_report` writes them and the plots.
"""
import collections
import dataclasses
import datetime
import os
import shlex

import numpy as np

from .collect import gather
from .json_files import read_json, write_json
from .grid import DIVERGED, run_command, run_dir
from .lab_report import lab_sections
from .plots import make_plots
from .presets import LAB_SNAPSHOT_S, PRESETS
from .stats import average_curves, median_trial, time_to_target


def _fmt(value, fmt='%.1f'):
    return '-' if value is None else fmt % value


def _per_rank(values, fmt):
    return '/'.join(_fmt(values[r], fmt) for r in sorted(values)) if values else '-'


def summarize(grid, table):
    """Per arm: the median trial, its numbers and the spread over trials."""
    rows = []
    for arm, trials in table:
        ok = [t for t in trials if t['status'] == 'ok']
        chosen = median_trial(ok)
        row = {'arm': arm, 'trials': trials, 'ok': len(ok), 'median': chosen,
               'times': {}, 'spread': {}}
        for target in grid.targets:
            reached = [time_to_target(t['curve'], target) for t in ok]
            row['times'][target] = time_to_target(chosen['curve'], target) if chosen else None
            row['spread'][target] = reached
        rows.append(row)
    return rows


def ssp_average(rows):
    """(label, curve) of the mean of the SSP arms' median-trial curves, or None if < 2."""
    ssp = [r for r in rows if r['arm'].family == 'ssp' and r['median']]
    if len(ssp) < 2:
        return None
    values = sorted(r['arm'].staleness[0] for r in ssp)
    label = 'SSP average (s=%s)' % (
        '%d..%d' % (values[0], values[-1])
        if values == list(range(values[0], values[-1] + 1)) else ','.join(map(str, values)))
    return label, average_curves([r['median']['curve'] for r in ssp])


def _spread_text(values):
    """'median 2.9 (2.1-5.0)' over the trials that reached the target, and how many did."""
    reached = sorted(v for v in values if v is not None)
    if not values:
        return '-'
    text = ('median %.1f (%.1f-%.1f)' % (float(np.median(reached)), reached[0], reached[-1])
            if reached else '-')
    if len(reached) < len(values):
        text += ', %d of %d reached' % (len(reached), len(values))
    return text


def build_report(grid, out, rows, average=None, plots=(), command_line=None):
    """The markdown report (Table I analogue, explanations, runs, failures) as a string.

    `rows` come from :func:`summarize`, `average` from :func:`ssp_average`,
    `plots` are (title, path) pairs.
    """
    sections = (_header(grid, rows, command_line), lab_sections(grid, rows),
                _time_to_targets(grid, rows, average),
                _explanations(rows), _paper_table(grid), _plot_links(out, plots),
                _all_runs(grid, out, rows), _settings(grid, out, rows))
    return '\n'.join(line for section in sections for line in section)


def _header(grid, rows, command_line):
    """The title, the settings in a sentence, and where and how the report was made."""
    lines = []
    preset = PRESETS[grid.preset]
    lines.append('# Reproduction report: preset `%s`' % grid.preset)
    lines.append('')
    rates = ('lr %g' % grid.lr if not grid.arm_lr else
             'lr per paradigm, %s' % ('chosen by --tune-lr (%s; see "Learning rate per '
                                      'paradigm")' if grid.tune_lr else 'fixed by --arm-lr (%s)')
             % ', '.join('%s %g' % (arm.name, grid.arm_lr.get(arm.name, grid.lr))
                         + ('' if arm.name not in grid.arm_momentum
                            else ' momentum %g' % grid.arm_momentum[arm.name])
                         for arm in grid.arms))
    lines.append('%s. %s on %s%s, %d workers, %d server, batch %d per worker, %s '
                 '(momentum %g, wd %g)%s, %d epochs per worker; %s; %d trial(s) per paradigm.'
                 % (preset.description, grid.model, grid.dataset,
                    '' if grid.data_fraction == 1 else ' (%g of the training set)'
                    % grid.data_fraction,
                    grid.workers, grid.servers, grid.batch_size, rates, grid.momentum,
                    grid.wd,
                    '' if grid.lr_decay is None else ', decayed x%g at epochs %s' % (
                        grid.lr_decay, ', '.join(map(str, grid.lr_decay_epochs))),
                    grid.epochs,
                    'slowdown %s (worker RANK sleeps FACTOR-1 times its compute time)'
                    % grid.slowdown if grid.slowdown else
                    'emulated compute: scenario %s' % grid.emulate if grid.emulate else
                    'no slow worker', grid.trials))
    lines += _data_line(grid, preset)
    lines.append('')
    loads = [x for row in rows for t in row['trials'] for x in (t.get('load_avg') or ())]
    lines.append('Generated %s on %s (%d cores%s) by `%s`.' % (
        datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), os.uname().nodename,
        os.cpu_count() or 0,
        '; 1-minute load average %.1f-%.1f at the starts and ends of the runs'
        % (min(loads), max(loads)) if loads else '',
        command_line or 'python -m mxnet_ssp.lab.reproduce --preset %s' % grid.preset))
    lines.append('')
    return lines


def _data_line(grid, preset):
    """['', 'The data: ...'] when the grid's dataset (--dataset) or its knobs are not the
    preset's, else []."""
    knobs = ''.join(', %s %s' % (knob, value if isinstance(value, int) else '%g' % value)
                    for knob, value in sorted(grid.data_options().items()))
    if grid.dataset == preset.dataset and not knobs:
        return []
    other = ('' if grid.dataset == preset.dataset
             else ' (`--dataset`), not the preset\'s %s' % preset.dataset)
    return ['', 'The data: %s%s%s.' % (grid.dataset, knobs, other)]


def _time_to_targets(grid, rows, average):
    """The analogue of Table I: each paradigm's median trial and its time to each target."""
    lines = []
    targets = grid.targets
    lines.append('## Time to reach the target accuracies (analogue of Table I)')
    lines.append('')
    lines.append('Median trial of each paradigm by final test accuracy, as in the paper; '
                 '"-": not reached (the first time the curve reached the target). Times are '
                 'seconds of training; the curves: %s.' % _curve_sources(rows))
    lines.append('')
    head = ['paradigm'] + ['time to %g (s)' % t for t in targets] + [
        'time to %g over trials (s)' % targets[0], 'final accuracy', 'iterations/worker',
        'it/s per worker', 'max lead', 'train time (s)', 'trials ok']
    lines.append('| ' + ' | '.join(head) + ' |')
    lines.append('|---' + '|---:' * (len(head) - 1) + '|')
    for row in rows:
        m = row['median']
        cells = [row['arm'].label]
        cells += [_fmt(row['times'][t]) for t in targets]
        cells.append(_spread_text(row['spread'][targets[0]]))
        if m:
            iters = sorted(m['iterations'].values())
            span = '%d' % iters[0] if iters[0] == iters[-1] else '%d-%d' % (iters[0], iters[-1])
            cells += ['%.3f' % m['final_accuracy'], span,
                      _per_rank(m['it_per_s'], '%.0f'), '%d' % m['max_lead'],
                      _fmt(m['train_time_s'])]
        else:
            cells += ['-'] * 5
        cells.append('%d/%d' % (row['ok'], len(row['trials'])))
        lines.append('| ' + ' | '.join(cells) + ' |')
    if average:
        label, curve = average
        cells = [label] + [_fmt(time_to_target(curve, t)) for t in targets]
        cells += ['-', '%.3f' % curve[-1][1] if curve else '-'] + ['-'] * 4 + ['-']
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines.append('')
    lines.append('it/s per worker: iterations per second of each rank (rank order). '
                 'max lead: the largest number of iterations a worker was ahead of the slowest '
                 'unfinished worker, at the end of its iterations. %s'
                 % ('SSP average: mean of the SSP curves on a common time grid.' if average
                    else ''))
    lines.append('')
    return lines


#: what each source of a run's accuracy curve (:func:`.collect.eval_curve`) is, in words
CURVE_SOURCES = {
    'servers': "the servers' model, evaluated every %g s of the servers' wall clock, held "
               "workers or not (eval_server.jsonl)" % LAB_SNAPSHOT_S,
    'fixed': "worker 0's copies of its own weights, taken every %g s of its training, only "
             "between its iterations (eval_fixed.jsonl)" % LAB_SNAPSHOT_S,
    'epochs': "worker 0's own weights at the end of each of its epochs (eval.jsonl)",
}


def _curve_sources(rows):
    """Which curves the trials' times come from, in words, with counts when they differ."""
    counts = collections.Counter(t.get('curve_source', 'epochs') for r in rows
                                 for t in r['trials'] if t['status'] == 'ok')
    if len(counts) <= 1:
        return CURVE_SOURCES[next(iter(counts), 'epochs')]
    return '; '.join('%s in %d trial%s' % (CURVE_SOURCES[k], n, 's' * (n != 1))
                     for k, n in counts.most_common())


def _explanations(rows):
    """The numbers that explain the curves: compute, step, waiting, leads, staleness."""
    lines = []
    lines.append('## What explains the curves')
    lines.append('')
    head = ['paradigm', 'compute ms/it per worker', 'step ms/it per worker',
            'waiting for OK (% of iteration time)', 'longest wait (s)',
            'lead at release, mean per worker', 'grants / holds',
            'gradient staleness mean / max', 'mean lead']
    lines.append('| ' + ' | '.join(head) + ' |')
    lines.append('|---' + '|---:' * (len(head) - 1) + '|')
    estimated = False
    for row in rows:
        m = row['median']
        if not m:
            lines.append('| %s |' % row['arm'].label + ' - |' * (len(head) - 1))
            continue
        st = m['staleness']
        mark = '*' if st['source'] == 'estimate' else ''
        estimated = estimated or bool(mark)
        cells = [row['arm'].label, _per_rank(m['compute_ms'], '%.1f'),
                 _per_rank(m['step_ms'], '%.1f'),
                 _per_rank({r: None if v is None else 100 * v
                            for r, v in m['wait_share'].items()}, '%.0f%%')
                 if 'wait_share' in m else '-',
                 _fmt(m.get('longest_wait_s'), '%.2f'),
                 '%s (max %d)' % (_per_rank(m['release_lead_mean'], '%.1f'),
                                  m['release_lead_max'])
                 if 'release_lead_max' in m else '-',
                 '%s / %s' % (_fmt(m.get('grants'), '%d'), _fmt(m.get('holds'), '%d'))
                 if 'grants' in m else '-',
                 '%s / %s%s' % (_fmt(st['mean'], '%.2f'), _fmt(st['max'], '%d'), mark),
                 '%.1f' % m['mean_lead']]
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines.append('')
    lines.append('- **compute**: median per iteration of the forward/backward pass plus the '
                 'emulated slowdown (`sleep_s`); **step**: median of `trainer.step` until the '
                 'new weights are there (push, waiting, pull). Under BSP the waiting for the '
                 'slow worker is inside the fast workers\' step time.')
    lines.append('- **waiting for OK**: the SSP stores\' `wait_s` (time held by the '
                 'synchronization controller) over the worker\'s iteration time; **longest '
                 'wait**: the longest single hold. **lead at release**, **grants** (pushes where '
                 'Algorithm 2 granted r* > 0) and **holds** (pushes answered "wait"): from the '
                 'stores\' `worker-<rank>.jsonl` and `controller.jsonl` (docs/metrics.md). A '
                 'held worker goes on only when its lead is back to sL.')
    lines.append('- **gradient staleness**: updates by other workers between a worker\'s pull '
                 'and the application of its gradient; BSP has none.%s'
                 % (' *: estimated from the iteration end times in `train-worker<rank>.jsonl` '
                    '(the servers record it only in slot mode).' if estimated else ''))
    lines.append('- **mean lead**: mean of the leads at the end of every iteration (train logs).')
    lines.append('')
    return lines


def _paper_table(grid):
    """The paper's Table I, when the preset compares with it."""
    lines = []
    if grid.paper_table:
        lines.append('## The paper\'s Table I, for comparison')
        lines.append('')
        lines.append('ResNet-110 on CIFAR-100, two workers (GTX 1080 Ti and GTX 1060), median '
                     'of 3 trials; seconds to reach 0.67 / 0.68 test accuracy ("-": never).')
        lines.append('')
        lines.append('| paradigm | time to 0.67 (s) | time to 0.68 (s) |')
        lines.append('|---|---:|---:|')
        for name, t67, t68 in grid.paper_table:
            lines.append('| %s | %s | %s |' % (name, _fmt(t67), _fmt(t68)))
        lines.append('')
    return lines


def _plot_links(out, plots):
    """The plots, as images relative to `out`."""
    lines = []
    if plots:
        lines.append('## Plots')
        lines.append('')
        for title, path in plots:
            lines.append('![%s](%s)' % (title, os.path.relpath(path, out)))
            lines.append('')
    return lines


def _all_runs(grid, out, rows):
    """Every run with its status, the failed ones with their reasons, the ones not run yet."""
    lines = []
    targets = grid.targets
    lines.append('## All runs')
    lines.append('')
    lines.append('| paradigm | trial | seed | status | final accuracy | time to %g (s) | '
                 'train time (s) | job time (s) | load avg start/end | run directory |'
                 % targets[0])
    lines.append('|---|---:|---:|---|---:|---:|---:|---:|---:|---|')
    failures = []
    for row in rows:
        for t in row['trials']:
            chosen = row['median'] is t
            status = t['status'] + (' (median)' if chosen else '')
            if t['status'] == 'ok':
                cells = ['%.3f' % t['final_accuracy'],
                         _fmt(time_to_target(t['curve'], targets[0])), _fmt(t['train_time_s'])]
            else:
                cells = ['-', '-', '-']
                if t['status'] in ('failed', DIVERGED):
                    failures.append((row['arm'], t))
            load = t.get('load_avg')
            lines.append('| %s | %d | %s | %s | %s | %s | %s | %s |' % (
                row['arm'].label, t['trial'], t['seed'], status, ' | '.join(cells),
                _fmt(t['duration_s']), '%.1f/%.1f' % tuple(load) if load else '-',
                os.path.relpath(t['dir'], out)))
    lines.append('')
    if failures:
        lines.append('## Failed and diverged runs')
        lines.append('')
        lines.append('A diverged run is a result: the verdicts count it as never reaching a '
                     'target, with final accuracy 0; a failed run is left out and runs again.')
        lines.append('')
        for arm, t in failures:
            lines.append('- **%s trial %d** (%s): %s (`%s`)' % (
                arm.label, t['trial'], t['status'], t['reason'],
                os.path.relpath(os.path.join(t['dir'], 'job.log'), out)))
        lines.append('')
    missing = [(row['arm'], t) for row in rows for t in row['trials'] if t['status'] == 'not run']
    if missing:
        lines.append('Not run yet: %s. Run the same command again to continue.' % ', '.join(
            '%s trial %d' % (a.name, t['trial']) for a, t in missing))
        lines.append('')
    return lines


def _settings(grid, out, rows):
    """An example run's command line and how trials are seeded and chosen."""
    lines = []
    lines.append('## Settings')
    lines.append('')
    if rows and rows[0]['trials']:
        example = run_command(grid, rows[0]['arm'], 1, run_dir(out, rows[0]['arm'], 1))
        lines.append('Each run, e.g. %s trial 1 (with `OMP_NUM_THREADS=1` and '
                     '`MXNET_SSP_METRICS_DIR` set to its run directory):' % rows[0]['arm'].label)
        lines.append('')
        lines.append('```')
        lines.append(shlex.join(example))
        lines.append('```')
        lines.append('')
    lines.append('Trial k uses seed %d + k - 1 in every paradigm. The median trial is the one '
                 'with the median final test accuracy (for an even number of finished trials, '
                 'the lower middle one; ties go to the earlier trial).' % grid.seed)
    lines.append('')
    return lines


def results_json(grid, rows, average):
    """The report's numbers as a JSON-serializable dict."""
    return {
        'grid': dataclasses.asdict(grid) | {'arms': [a.name for a in grid.arms]},
        'arms': [{'arm': r['arm'].name, 'label': r['arm'].label,
                  'median_trial': r['median']['trial'] if r['median'] else None,
                  'time_to_target': {str(t): v for t, v in r['times'].items()},
                  'trials': r['trials']} for r in rows],
        'ssp_average': None if average is None else {'label': average[0],
                                                     'curve': average[1]},
    }


def tuning_target(entries):
    """The one target every paradigm's entry of ``tuned_lr.json`` (`entries`, by paradigm) was
    ranked at; None when they name none, several, or not a number."""
    targets = {entry.get('target') for entry in (entries or {}).values()
               if isinstance(entry, dict)}
    target = targets.pop() if len(targets) == 1 else None
    return target if isinstance(target, (int, float)) else None


def tuned_section(grid, tuned):
    """The report's lines on --tune-lr: per paradigm, each setting's median time to hold the
    target the tuning ranked at (``tuned_lr.json``'s, which a report rebuilt with other
    --targets does not change) on the tuning seeds, the best setting and the runner-up."""
    target = tuning_target(tuned) or grid.targets[-1]
    lines = ['## Learning rate per paradigm (--tune-lr)', '',
             'One grid of per-gradient rates for every paradigm (BSP, which averages the %d '
             'workers\' gradients, at each times %d)%s, on seeds %d on, %d trial(s) each; '
             'its trials then ran at the %s setting: the one that held %g soonest (median over '
             'the tuning trials, primary metric; never = infinitely long; ties: the higher '
             'final accuracy, then the smaller setting). The tuning seeds are none of the '
             'trials\' seeds.' % (grid.workers, grid.workers,
                                  ', every rate with momentum %s' % ', '.join(
                                      '%g' % m for m in grid.tune_momentum)
                                  if grid.tune_momentum else '', grid.seed + 1000,
                                  grid.tune_trials, ('best', 'runner-up')[grid.tune_choice],
                                  target)
             + (' The tuning ranked at %g; the verdicts above are at %g.'
                % (target, grid.targets[-1]) if target != grid.targets[-1] else ''), '',
             '| paradigm | setting: median seconds to hold %g (reached / trials) | best | '
             'runner-up |' % target, '|---|---|---:|---:|']
    for arm in grid.arms:
        entry = tuned.get(arm.name)
        if not entry:
            continue
        parts = []
        for name, result in sorted(entry['candidates'].items(),
                                   key=lambda kv: (kv[1].get('lr', 0), kv[1].get('momentum'))):
            times = sorted(float('inf') if t is None else t for t in result['times_s'])
            if not times:
                parts.append('%s: no finished run' % name)
                continue
            median = times[(len(times) - 1) // 2]
            parts.append('%s: %s (%d/%d)' % (name, 'never' if median == float('inf')
                                             else '%.1f' % median,
                                             sum(1 for t in times if t != float('inf')),
                                             len(times)))
        ranked = entry.get('ranked') or []
        named = ['lr %g, momentum %g' % tuple(s) for s in ranked[:2]] + ['-', '-']
        lines.append('| %s | %s | %s | %s |' % (arm.label, '; '.join(parts), named[0],
                                                named[1]))
    return lines + ['']


def write_report(grid, out, plots_on=True, command_line=None):
    """Read every run under `out`, write plots, report.md and results.json; return rows."""
    rows = summarize(grid, gather(grid, out))
    average = ssp_average(rows)
    plots = make_plots(grid, out, rows, average) if plots_on else ()
    text = build_report(grid, out, rows, average, plots, command_line)
    tuned = read_json(os.path.join(out, 'tuned_lr.json')) if grid.tune_lr else None
    if tuned:
        text = text.rstrip('\n') + '\n\n' + '\n'.join(tuned_section(grid, tuned)) + '\n'
    with open(os.path.join(out, 'report.md'), 'w') as f:
        f.write(text)
    write_json(os.path.join(out, 'results.json'), results_json(grid, rows, average),
               compact=True)
    return rows


def _section(text, title):
    """The lines of the markdown section `title` (``## title`` up to the next ``## ``)."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith('## '):
            inside = line[3:].startswith(title)
        if inside:
            lines.append(line)
    return lines


def write_suite_report(out, scenarios, command_line=None):
    """``<out>/report.md`` of ``--preset emulated``: each scenario's verdicts and simulator
    check, taken from ``<out>/<scenario>/report.md``, with a link to it; returns its path."""
    lines = ['# The emulated-cluster lab: verdicts per scenario', '',
             'Generated %s by `%s`. Each scenario\'s full report (medians with intervals, '
             'plots, waiting, staleness, every run) is linked below.'
             % (datetime.datetime.now().strftime('%Y-%m-%d %H:%M'),
                command_line or 'python -m mxnet_ssp.lab.reproduce --preset emulated'), '']
    for name in scenarios:
        path = os.path.join(out, name, 'report.md')
        lines += ['# Scenario `%s`' % name, '']
        if not os.path.exists(path):
            lines += ['No report yet: the scenario has not run.', '']
            continue
        with open(path) as f:
            text = f.read()
        lines += ['[full report](%s)' % os.path.join(name, 'report.md'), '']
        for title in ('The emulated cluster', 'Verdicts', 'Simulator vs lab'):
            section = _section(text, title)
            if section:
                lines += ['#' + section[0]] + section[1:]
    target = os.path.join(out, 'report.md')
    with open(target, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return target
