"""The lab's sections of ``report.md`` (presets ``emulated-<scenario>``): the scenario,
every paradigm's medians with their intervals, the verdict per claim of the paper (paired
by seed, the unpaired reading beside it), and the simulator's prediction next to the
measurement."""
import math

import numpy as np

from ..cluster_model.arms import parse_arm
from ..cluster_model.profiles import get_scenario
from ...core.names import DSSP_MODES
from . import links as on_links
from .paired import LEVEL, MIN_TRIALS, family_level, fmt_interval, median_interval
from .stats import HOLD_S, METRIC_TEXT, METRICS
from .verdicts import (METRIC_DEPENDENT, NOT_SEPARATED, SIM_TOLERANCE, _fmt_interval,
                       across_metrics, balance_verdicts, common_budget, measured_rates,
                       mode_pairs, sim_vs_lab, trial_accuracies, trial_times)

#: (arm name, DSSP mode) of the DSSP arms whose verdicts get a column, in this order:
#: ``dssp``, ``dssp-paper``, ``dssp-threshold``
DSSP_MODE_ARMS = tuple((parse_arm('dssp-' + mode).name, mode) for mode in DSSP_MODES)


def lab_sections(grid, rows):
    """The markdown lines of the lab's sections (empty for a grid without --emulate)."""
    if not grid.emulate:
        return []
    scenario = get_scenario(grid.emulate)
    return (_scenario(grid, scenario, rows) + _machine(rows) + _medians(grid, scenario, rows)
            + verdict_table(rows, grid.targets[-1]) + mode_table(rows, grid.targets[-1])
            + _balance(rows, grid.targets[-1])
            + _simulator(grid, scenario, rows))


def _scenario(grid, scenario, rows):
    overruns = [n for r in rows for t in r['trials'] if t['status'] == 'ok'
                for n in t.get('overruns', {}).values()]
    iterations = [sum(t['iterations'].values()) for r in rows for t in r['trials']
                  if t['status'] == 'ok']
    return [
        '## The emulated cluster: `%s`' % scenario.name, '',
        '%s (%s).' % (scenario.description, scenario.summary()), '',
        '- **Emulated:** the compute time of each iteration. Every worker pads its real '
        'forward/backward pass to the time its profile draws for that iteration (by '
        'sleeping); the draws depend only on (scenario, trial seed, rank), so trial k of '
        'every paradigm sees the same compute times.',
        '- **Real:** the parameter-server traffic, the store types and their controller, the '
        'staleness of every gradient, and the test accuracy.',
        '- Passes longer than their profile time (not padded, so the iteration ran longer): '
        '%d of %d iterations.' % (sum(overruns), sum(iterations))] + _links(grid) + ['']


def _links(grid):
    """The bullet of a scenario with links: where every process ran, what was shaped."""
    if not grid.links:
        return []
    return ['- **On links:** every run ran on the emulated cluster (prefix %s): %s. Each '
            'link is shaped by tbf in both directions; no delay, jitter or loss is added '
            '(netem is not available), and every host computes on the same cores. The links '
            'as measured when the cluster came up: `testbed.json`; each run\'s placement: '
            'its `run.json`.' % (grid.testbed_prefix, on_links.place.describe(
                on_links.placement(grid)))]


def _machine(rows):
    """Per paradigm: the cores its workers kept busy and how late the emulated compute's
    sleeps woke (medians over the trials): arms that load the machine differently see
    different contention, in their step times and in Algorithm 2's timestamps."""
    lines = ['## The machine under each paradigm', '',
             'Medians over the trials: the cores the workers\' processes kept busy (their CPU '
             'time over the training time), those the servers and those the scheduler and the '
             'synchronization controller kept busy (each process\'s CPU time over its life, '
             'start-up and evaluation included), and how much later than asked the emulated '
             'compute\'s sleeps woke (50th and 99th percentile over all iterations that '
             'slept). Runs from before these were recorded show "-".', '',
             '| paradigm | worker cores busy | server cores busy | scheduler + controller '
             'cores busy | sleep late, p50 (ms) | sleep late, p99 (ms) |',
             '|---|---:|---:|---:|---:|---:|']
    for row in rows:
        trials = [t for t in row['trials'] if t['status'] == 'ok']
        cores = [t['worker_cores'] for t in trials if t.get('worker_cores') is not None]
        late = [t['sleep_late_ms'] for t in trials if t.get('sleep_late_ms')]
        usage = [t['process_cpu'] for t in trials if t.get('process_cpu')]
        servers = [u['server']['cores'] for u in usage if 'server' in u]
        others = [sum(u[r]['cores'] for r in ('scheduler', 'controller') if r in u)
                  for u in usage if 'scheduler' in u or 'controller' in u]

        def med(values, fmt):
            return fmt % float(np.median(values)) if values else '-'
        lines.append('| %s | %s | %s | %s | %s | %s |' % (
            row['arm'].label, med(cores, '%.2f'), med(servers, '%.2f'), med(others, '%.2f'),
            med([x['p50'] for x in late], '%.2f'), med([x['p99'] for x in late], '%.2f')))
    return lines + ['']


def _cell(interval, fmt='%.1f', reached=None):
    text = fmt_interval(interval, fmt)
    return text + ('' if reached is None else ' (%d/%d)' % reached)


def _median_held(trials):
    """Median over the trials of the mean over workers of the SSP stores' held share."""
    values = [float(np.mean([v for v in t['wait_share'].values() if v is not None]))
              for t in trials if t.get('wait_share')]
    return '%.2f' % float(np.median(values)) if values else '-'


def _medians(grid, scenario, rows):
    head = (['paradigm'] + ['%s to %g (s)' % (m, t) for t in grid.targets
                            for m in METRICS[:2]] + ['%s to %g (s)' % (METRICS[2],
                                                                      grid.targets[-1])]
            + ['final accuracy', 'non-compute share (fast workers)', 'held (share)',
               'grants / holds', 'staleness mean'])
    budget = common_budget(rows)
    lines = ['## Medians with their intervals', '',
             'Median over the trials [interval] and the interval\'s coverage: the order '
             'statistics that cover the median with probability at least %d%% whatever the '
             'distribution (at least %d trials); with fewer, [min, max] and its lower '
             'coverage, marked "< %d%%". Times: seconds of training until the servers\' model '
             'reached the target, held it for %g s (sustained, primary) or first reached it '
             '(first) ("never": at least half the trials did not; (k/n): trials that reached '
             'it), and the shortfall (see the Verdicts), counted only up to %s, the shortest '
             'run\'s last '
             'evaluation, the same wall-clock budget for every arm. Each arm on its own: the '
             'verdicts below compare arms seed by seed.'
             % (100 * LEVEL, MIN_TRIALS, 100 * LEVEL, HOLD_S,
                'no budget' if budget is None else '%.1f s' % budget), '',
             '| ' + ' | '.join(head) + ' |', '|---' + '|---:' * (len(head) - 1) + '|']
    for row in rows:
        trials = [t for t in row['trials'] if t['status'] == 'ok']
        if not trials:
            continue
        cells = [row['arm'].label]
        for target, metric in [(t, m) for t in grid.targets for m in METRICS[:2]] + [
                (grid.targets[-1], METRICS[2])]:
            times = trial_times(trials, target, budget, metric)
            cells.append(_cell(median_interval(times), '%.1f',
                               (sum(1 for x in times if not math.isinf(x)), len(times))))
        cells.append(_cell(median_interval(trial_accuracies(trials)), '%.3f'))
        fast = [share for _, share in (measured_rates(t, scenario) for t in trials)
                if share is not None]
        cells.append('%.2f' % float(np.median(fast)) if fast else '-')
        cells.append(_median_held(trials))
        grants = [t.get('grants') for t in trials if t.get('grants') is not None]
        holds = [t.get('holds') for t in trials if t.get('holds') is not None]
        cells.append('%s / %s' % ('%d' % np.median(grants) if grants else '-',
                                  '%d' % np.median(holds) if holds else '-'))
        stale = [t['staleness']['mean'] for t in trials if t['staleness']['mean'] is not None]
        cells.append('%.2f' % np.median(stale) if stale else '-')
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines += ['', '- **non-compute share**: the fast workers\' (the ranks with the '
              'smallest base compute time) share of their wall time not spent computing '
              '(push, pull, waiting); **held**: the SSP stores\' time held '
              'by the controller over the iteration time (mean over workers); **grants / '
              'holds**: Algorithm 2\'s grants r* > 0 and the pushes answered "wait"; '
              '**staleness**: updates by others between a pull and the gradient\'s '
              'application (estimated from the train logs where the servers do not record '
              'it). Medians over the trials.', '']
    return lines


def verdict_table(rows, target):
    """The Verdicts table: one row per claim, one column per DSSP mode run, the verdict under
    the primary metric (or "metric-dependent" when the three metrics disagree), the paired
    evidence under each metric and the primary's unpaired reading."""
    modes = [(name, mode) for name, mode in DSSP_MODE_ARMS
             if any(r['arm'].name == name and r['ok'] for r in rows)]
    if not modes:
        return []
    budget = common_budget(rows)
    results = {mode: across_metrics(rows, target, name, budget=budget) for name, mode in modes}
    lines = ['## Verdicts', '',
             'One row per claim of the paper (Table I\'s order first), progress to %g test '
             'accuracy of the servers\' model, under three metrics fixed before the runs: '
             '**%s** (primary: %s), **%s** (%s) and **%s** (%s). A verdict that is not the '
             'same under all three is **%s**: the cell then lists each. Decided **seed by '
             'seed**: trial k of every paradigm shares its seed, and the evidence is the '
             'median over the common seeds of the per-seed ratio t_A,k / t_B,k (for accuracy, '
             'the difference) [interval] and its exact coverage. **supported**: the interval '
             'lies on the claim\'s side of its bound; **refuted**: on the other side; '
             '**inconclusive**: it straddles the bound, or it falls short of the level asked '
             '(fewer than %d common seeds for %d%%, marked "<"). A seed where neither arm '
             'reached the target counts as a ratio anywhere in [0, never]. **Several '
             'comparisons:** a claim made of m comparisons (one per SSP threshold) asks each '
             'for the level 1 - %g/m (Bonferroni: %.1f%% for three thresholds) and is '
             'supported when every one is, refuted when any one is. "within 10%% of the best '
             'SSP" is "within 10%% of every SSP", so no best threshold is chosen on the '
             'trials that test it. **Unpaired** (primary metric): median(t_A) / median(t_B) '
             '[percentile bootstrap interval] at the same level; it decides nothing. Budget: '
             '%s, the shortest run\'s last evaluation.'
             % ((target, METRICS[0], METRIC_TEXT[METRICS[0]], METRICS[1],
                 METRIC_TEXT[METRICS[1]], METRICS[2], METRIC_TEXT[METRICS[2]],
                 METRIC_DEPENDENT, MIN_TRIALS, 100 * LEVEL, 1 - LEVEL,
                 100 * family_level(3), '-' if budget is None else '%.2f s' % budget)),
             '', '| claim | ' + ' | '.join('DSSP %s' % m for _, m in modes)
             + ' | evidence (paired, per metric) | unpaired |',
             '|---' + '|---' * len(modes) + '|---|---|']
    first = results[modes[0][1]]
    for i, (_, cells0) in enumerate(first):
        claim = cells0[METRICS[0]].claim
        verdict_cells, evidence, second = [], [], []
        for _, mode in modes:
            overall, cells = results[mode][i]
            text = '**%s**' % overall
            if overall == METRIC_DEPENDENT:
                text += ' (' + ', '.join('%s: %s' % (m, cells[m].verdict) for m in METRICS) + ')'
            verdict_cells.append(text)
            evidence.append('%s: ' % mode + '; '.join('*%s* %s' % (m, cells[m].evidence)
                                                      for m in METRICS))
            second.append('%s: %s' % (mode, cells[METRICS[0]].unpaired))
        lines.append('| ' + ' | '.join([claim] + verdict_cells) + ' | ' + '<br>'.join(evidence)
                     + ' | ' + '<br>'.join(second) + ' |')
    lines.append('')
    return lines


def mode_table(rows, target):
    """The DSSP modes against each other (:func:`.verdicts.mode_pairs`): one row per pair of
    modes that ran, the reading and the paired intervals under each metric; empty with fewer
    than two modes."""
    budget = common_budget(rows)
    pairs = mode_pairs(rows, target, DSSP_MODE_ARMS, budget=budget)
    if not pairs:
        return []
    lines = ['## The DSSP modes against each other', '',
             'Not a claim of the paper: which mode to use. Each pair of DSSP modes compared seed '
             'by seed as in the Verdicts (progress to %g), every comparison at the level of a '
             'family of the %d pairs (Bonferroni: %.1f%% each). A pair is **separated** under a '
             'metric when the interval of the median per-seed ratio t_A / t_B lies on one side '
             'of 1 (the reading names the sooner mode), **%s** when it straddles 1 or falls '
             'short of the level, **%s** when the three metrics (%s) disagree. Final accuracy: '
             'the median per-seed difference, separated when its interval excludes 0.'
             % (target, len(pairs), 100 * family_level(len(pairs)), NOT_SEPARATED,
                METRIC_DEPENDENT, ', '.join(METRICS)), '',
             '| A vs B | time to %g | ' % target
             + ' | '.join('t_A / t_B, %s' % m for m in METRICS)
             + ' | acc_A - acc_B | accuracy |',
             '|---|---|' + '---:|' * len(METRICS) + '---:|---|']
    for mode_a, mode_b, reading, per, accuracy, acc_reading in pairs:
        lines.append('| %s vs %s | **%s** | %s | %s | %s |' % (
            mode_a, mode_b, reading, ' | '.join(fmt_interval(per[m]) for m in METRICS),
            fmt_interval(accuracy, '%+.4f'), acc_reading))
    lines.append('')
    return lines


def _balance(rows, target):
    budget = common_budget(rows)
    per = {m: balance_verdicts(rows, target, budget=budget, metric=m, unpaired=m == METRICS[0])
           for m in METRICS}
    results = per[METRICS[0]]
    if not results:
        return []
    lines = ['## Batch balancing', '',
             'Goal (docs/balance.md): with balanced batches, reach %g test accuracy no later '
             'than ASP, without staleness under BSP. Seed by seed as in the Verdicts, under the '
             'primary metric (%s; "%s" when the three metrics disagree, each then listed): '
             '**supported**: the interval of the median per-seed t_balanced / t_ASP lies at or '
             'below 1; **refuted**: above 1. Unpaired: median / median [bootstrap interval], '
             'the second reading.' % (target, METRICS[0], METRIC_DEPENDENT), '',
             '| paradigm | t / t_ASP (paired) | verdict | unpaired | t / t_unbalanced (paired) |',
             '|---|---:|---|---:|---:|']
    for i, (arm, verdict, vs_asp, second, base, vs_base) in enumerate(results):
        each = {m: per[m][i][1] for m in METRICS}
        verdict = '**%s**' % verdict if len(set(each.values())) == 1 else (
            '**%s** (%s)' % (METRIC_DEPENDENT, ', '.join('%s: %s' % kv for kv in each.items())))
        lines.append('| %s | %s | %s | %s | %s: %s |' % (
            arm.label, fmt_interval(vs_asp), verdict, _fmt_interval(second), base,
            fmt_interval(vs_base)))
    lines.append('')
    return lines


def _simulator(grid, scenario, rows):
    iterations = grid.num_iterations
    if not iterations:
        return []
    table = sim_vs_lab(rows, scenario, iterations)
    if not table:
        return []
    step_mean = table[0]['step_mean']
    lines = ['## Simulator vs lab', '',
             '`mxnet_ssp.lab.cluster_model.simulate` run on the same compute-time draws as each trial '
             '(`--scenario %s`, the trial\'s seed, %d iterations per worker). **model**: the '
             'simulator as it is (compute only%s, instant push/pull, no control latency); '
             '**+ steps**: every iteration also takes a push/pull time drawn from the step '
             'times measured under ASP here, where nobody waits (mean %.1f ms; their '
             'percentiles, pooled over the trials%s; ASP lr/tau draws from its own). Total '
             'iterations per second of all workers (each over its own span), and the fast '
             'workers\' share of wall time '
             'not computing; medians over the trials. A difference above %d%% is marked.'
             % (scenario.name, iterations,
                ' and each worker\'s link time' if scenario.links else '', 1e3 * step_mean,
                ' and over the workers, so a slow link\'s steps are drawn for every worker: '
                'read **model** for a scenario with links' if scenario.links else '',
                100 * SIM_TOLERANCE), '',
             '| paradigm | lab it/s | model it/s (diff) | + steps it/s (diff) | lab '
             'non-compute | model | + steps |', '|---|---:|---:|---:|---:|---:|---:|']

    def pct(x):
        mark = ' **!**' if abs(x) > SIM_TOLERANCE else ''
        return '%+.0f%%%s' % (100 * x, mark)

    def share(x):
        return '-' if x is None else '%.2f' % x
    for e in table:
        lines.append('| %s | %.1f | %.1f (%s) | %.1f (%s) | %s | %s | %s |' % (
            e['arm'].label, e['measured'][0], e['model'][0], pct(e['model_diff']),
            e['fixed'][0], pct(e['fixed_diff']), share(e['measured'][1]),
            share(e['model'][1]), share(e['fixed'][1])))
    worst = max(abs(e['fixed_diff']) for e in table)
    lines += ['', '- The model alone leaves out the push/pull time of every iteration, so it '
              'predicts more iterations per second than the lab wherever that time is a '
              'sizeable share of an iteration. With the measured ASP step times drawn into '
              'every iteration, the largest difference is %.0f%%. What the drawn step times '
              'still leave out: under BSP and the SSP stores a step also waits for the '
              'servers to apply every push and for the controller\'s answer (control '
              'latency), and all of it grows with contention for the 2 cores.'
              % (100 * worst), '']
    return lines
