"""The lab's design checked before it runs: how often its intervals cover the truth, and how
often each claim can come out supported with the trials one can afford.

Both draw synthetic trials from known distributions and apply the lab's own procedures
(:mod:`.paired`, :func:`.verdicts.verdicts`); pure, deterministic for a given seed, no I/O.
docs/lab.md quotes their figures ("What the trials we can afford can decide").

Synthetic trials: the time of arm A at seed k is lognormal,
``log t_A,k = log median_A + spread * (sqrt(c) z_k + sqrt(1 - c) e_A,k)`` with z, e standard
normal: `spread` is the trial-to-trial spread (the standard deviation of log time, 0.2 about
20%), `c` the correlation that a shared seed gives two arms (0: pairing gains nothing, the
least favourable case).  The true value of a ratio claim is median_A / median_B, both the
median per-seed ratio and the ratio of the medians.
"""
import math

import numpy as np

from ..cluster_model.arms import parse_arm
from .paired import LEVEL, median_interval, paired_ratio
from .stats import METRICS
from .verdicts import (INCONCLUSIVE, REFUTED, SUPPORTED, _interval, _ratio,
                       _resampled_medians, common_budget, seed_times, verdicts)

__all__ = ['draw_times', 'interval_coverage', 'claim_power', 'coverage_table', 'power_table',
           'lab_times', 'measured_spread', 'PAPER_WORLD', 'LARGE_WORLD', 'METHODS']

#: the procedures whose coverage :func:`interval_coverage` measures
METHODS = ('paired', 'median', 'unpaired-bootstrap', 'paired-bootstrap')

#: a world where the paper is right by moderate margins (median seconds to the target):
#: BSP / SSP 1.28, SSP / DSSP 1.25, DSSP / ASP 1.0, DSSP / best SSP 0.8, BSP / DSSP 1.6,
#: equal final accuracies
PAPER_WORLD = {'bsp': 160.0, 'ssp3': 125.0, 'ssp6': 125.0, 'ssp15': 125.0, 'asp': 100.0,
               'dssp': 100.0}
#: the same order by large margins: BSP / SSP 1.5, SSP / DSSP 1.5, DSSP / ASP 1.0,
#: DSSP / best SSP 0.67, BSP / DSSP 2.25
LARGE_WORLD = {'bsp': 225.0, 'ssp3': 150.0, 'ssp6': 150.0, 'ssp15': 150.0, 'asp': 100.0,
               'dssp': 100.0}


def draw_times(rng, medians, n, spread, correlation=0.0):
    """{arm: array of n times}: seed k's times share ``sqrt(correlation) z_k``."""
    shared = rng.standard_normal(n)
    return {arm: m * np.exp(spread * (math.sqrt(correlation) * shared
                                      + math.sqrt(1 - correlation) * rng.standard_normal(n)))
            for arm, m in medians.items()}


def _bootstrap(a, b, rng, level):
    """Percentile bootstrap of the ratio of medians (unpaired) or, with b None, of the median
    of a; the lab's second reading without its minimum number of trials."""
    if b is None:
        return _interval(_resampled_medians(a, rng), level)
    return _interval(_ratio(_resampled_medians(a, rng), _resampled_medians(b, rng)), level)


def interval_coverage(ns=(3, 5, 6, 8, 10), method='paired', spread=0.2, ratio=1.2,
                      correlation=0.0, reps=4000, seed=0, level=LEVEL):
    """{n: share of `reps` synthetic experiments whose interval covers the true value}.

    Each experiment draws n trials of two arms with medians `ratio` and 1 (see the module) and
    applies `method`:

    - ``paired``: the lab's, :func:`.paired.paired_ratio` of the per-seed ratios, covering
      `ratio`; below :data:`.paired.MIN_TRIALS` it is [min, max] at its own coverage;
    - ``median``: :func:`.paired.median_interval` of arm A's times alone, covering its median;
    - ``unpaired-bootstrap``: the second reading's bootstrap of median(A) / median(B);
    - ``paired-bootstrap``: a percentile bootstrap of the median per-seed ratio (resampling
      seeds), what the paired analysis would be with the bootstrap instead of order statistics.

    A bound equal to the true value covers it.
    """
    if method not in METHODS:
        raise ValueError('method %r is not one of %s' % (method, ', '.join(METHODS)))
    rng = np.random.default_rng(seed)
    out = {}
    for n in ns:
        hits = 0
        for _ in range(reps):
            t = draw_times(rng, {'a': ratio, 'b': 1.0}, n, spread, correlation)
            a, b = t['a'], t['b']
            truth = ratio
            if method == 'paired':
                iv = paired_ratio(dict(enumerate(a)), dict(enumerate(b)), level)
                low, high = iv.low, iv.high
            elif method == 'median':
                iv = median_interval(a, level)
                low, high = iv.low, iv.high
            elif method == 'unpaired-bootstrap':
                low, high = _bootstrap(a, b, rng, level)
            else:
                low, high = _bootstrap(a / b, None, rng, level)
            hits += low <= truth <= high
        out[n] = hits / reps
    return out


def _synthetic_rows(times, accuracies):
    """:func:`.report.summarize`-like rows: trial k of every arm has seed k; its accuracy
    jumps to above any target at its time."""
    rows = []
    for name, values in times.items():
        trials = [{'status': 'ok', 'trial': k + 1, 'seed': k + 1,
                   'curve': [(0.0, 0.0), (float(t), 1.0)],
                   'final_accuracy': float(accuracies[name][k])}
                  for k, t in enumerate(values)]
        rows.append({'arm': parse_arm(name), 'trials': trials})
    return rows


def claim_power(n, spread=0.2, world=None, correlation=0.0, accuracy_spread=0.003,
                reps=400, seed=0):
    """{claim: (P(supported), P(refuted))} of :func:`.verdicts.verdicts`'s claims with n trials
    per arm, over `reps` synthetic labs.

    `world` maps arm names to their true median times (default :data:`PAPER_WORLD`); every
    arm's final accuracy is 0.94 plus normal noise of sd `accuracy_spread` (independent per
    trial).  Claims are keyed by their text up to the parenthesis.
    """
    world = PAPER_WORLD if world is None else world
    rng = np.random.default_rng(seed)
    counts = {}
    for _ in range(reps):
        times = draw_times(rng, world, n, spread, correlation)
        accuracies = {arm: 0.94 + accuracy_spread * rng.standard_normal(n) for arm in world}
        for row in verdicts(_synthetic_rows(times, accuracies), 0.5, unpaired=False):
            key = row.claim.split(' (')[0]
            tally = counts.setdefault(key, {SUPPORTED: 0, REFUTED: 0, INCONCLUSIVE: 0})
            tally[row.verdict] += 1
    return {key: (tally[SUPPORTED] / reps, tally[REFUTED] / reps)
            for key, tally in counts.items()}


def coverage_table(ns=(3, 5, 6, 8, 10), spread=0.2, seed=0, reps=20000,
                   bootstrap_reps=5000):
    """Markdown lines: each method's measured coverage at 95% for `ns` trials."""
    head = '| interval (95% asked) | ' + ' | '.join('%d trials' % n for n in ns) + ' |'
    lines = [head, '|---' + '|---:' * len(ns) + '|']
    names = {'paired': 'paired, order statistics (decides)',
             'median': 'one arm\'s median, order statistics (medians table)',
             'unpaired-bootstrap': 'unpaired bootstrap of median / median (second reading)',
             'paired-bootstrap': 'paired percentile bootstrap (not used)'}
    for method in METHODS:
        got = interval_coverage(ns, method, spread=spread, seed=seed,
                                reps=reps if method in ('paired', 'median') else bootstrap_reps)
        lines.append('| %s | ' % names[method] + ' | '.join('%.1f%%' % (100 * got[n])
                                                              for n in ns) + ' |')
    return lines


def power_table(ns=(5, 6, 8, 10), spread=0.2, correlation=0.0, world=None, reps=1000,
                seed=0):
    """Markdown lines: each claim's P(supported) (and P(refuted) where above 0) for `ns`."""
    powers = {n: claim_power(n, spread, world, correlation, reps=reps, seed=seed) for n in ns}
    lines = ['| claim | ' + ' | '.join('%d trials' % n for n in ns) + ' |',
             '|---' + '|---:' * len(ns) + '|']
    for claim in powers[ns[0]]:
        cells = []
        for n in ns:
            supported, refuted = powers[n][claim]
            cells.append('%.0f%%' % (100 * supported)
                         + (' (%.1f%% refuted)' % (100 * refuted) if refuted else ''))
        lines.append('| %s | %s |' % (claim, ' | '.join(cells)))
    return lines


def lab_times(results, target, metric='first'):
    """{arm: {seed: seconds to `target`}} of a lab's ``results.json`` (parsed) under the
    progress `metric` (:data:`.stats.METRICS`; ``first``: its first evaluation at or above;
    ``shortfall`` over the lab's common budget): the successful trials that reached it."""
    budget = common_budget(results['arms']) if metric == 'shortfall' else None
    return {row['arm']: {seed: t for seed, t in seed_times(row['trials'], target, budget,
                                                           metric).items()
                         if 0 < t < math.inf}
            for row in results['arms']}


def measured_spread(times):
    """(spread, correlation, n) of measured trials, as :func:`draw_times` takes them.

    `times` maps arms to {seed: seconds}.  spread: the pooled standard deviation of the log
    times around each arm's own mean (ddof 1 per arm, arms with one time left out);
    correlation: the mean over pairs of arms of the Pearson correlation of their log times at
    the seeds both have (pairs sharing fewer than 3 seeds, or with no variation, left out),
    clipped to [0, 1] (0 when no pair qualifies); n: how many log times the spread rests on.
    """
    squares, dof = 0.0, 0
    logs = {}
    for arm, by_seed in times.items():
        values = {seed: math.log(t) for seed, t in by_seed.items()}
        logs[arm] = values
        if len(values) > 1:
            v = np.array(list(values.values()))
            squares += float(np.sum((v - v.mean()) ** 2))
            dof += len(v) - 1
    if not dof:
        raise ValueError('no arm has two times to the target: no spread can be measured')
    spread = math.sqrt(squares / dof)
    correlations = []
    arms = sorted(logs)
    for i, a in enumerate(arms):
        for b in arms[i + 1:]:
            seeds = sorted(set(logs[a]) & set(logs[b]))
            if len(seeds) < 3:
                continue
            x = np.array([logs[a][k] for k in seeds])
            y = np.array([logs[b][k] for k in seeds])
            if x.std() == 0 or y.std() == 0:
                continue
            correlations.append(float(np.corrcoef(x, y)[0, 1]))
    correlation = min(1.0, max(0.0, float(np.mean(correlations)))) if correlations else 0.0
    return spread, correlation, sum(len(v) for v in logs.values() if len(v) > 1)


def parse_args(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        prog='python -m mxnet_ssp.lab.reproduce.power_analysis',
        description='Print the coverage of the lab\'s intervals and the power of its claims, '
                    'measured on synthetic lognormal trials (the tables of docs/lab.md).')
    parser.add_argument('--seed', type=int, default=0, help='random seed (default 0)')
    parser.add_argument('--reps', type=int, default=1000,
                        help='synthetic labs per power figure (default 1000)')
    parser.add_argument('--results', metavar='RESULTS_JSON',
                        help="a lab's results.json: print the power of each claim at the "
                             "spread and correlation measured there (time to --target) "
                             "instead of the tables of docs/lab.md")
    parser.add_argument('--target', type=float, default=0.92,
                        help='the accuracy target whose times --results measures (default '
                             '0.92)')
    parser.add_argument('--metric', choices=METRICS, default='first',
                        help='the progress metric whose times --results measures (default '
                             'first: the first evaluation at or above --target)')
    parser.add_argument('--trials', default='6,8,10',
                        help='comma-separated trial counts of the --results power tables '
                             '(default 6,8,10)')
    args = parser.parse_args(argv)
    given = args.trials
    try:
        args.trials = tuple(int(n) for n in given.split(','))
        if any(n < 2 or n > 100 for n in args.trials):
            raise ValueError
    except ValueError:
        parser.error('--trials %s: expected comma-separated integers from 2 to 100' % given)
    if not 0 < args.target < 1:
        parser.error('--target %r: expected an accuracy between 0 and 1' % args.target)
    return args


def _measured_power(args):
    import json
    try:
        with open(args.results) as f:
            results = json.load(f)
        times = lab_times(results, args.target, args.metric)
        spread, correlation, n = measured_spread(times)
    except (OSError, ValueError, KeyError, TypeError) as err:
        print('--results %s: %s' % (args.results, err))
        return 2
    print('Measured in %s (time to %g, %s): spread %.3f (sd of log time, %d times), '
          'correlation %.2f between arms at the same seed\n'
          % (args.results, args.target, args.metric, spread, n, correlation))
    for label, world in (('moderate', PAPER_WORLD), ('large', LARGE_WORLD)):
        print('P(supported), %s margins (%s):\n'
              % (label, ', '.join('%s %g' % kv for kv in world.items())))
        print('\n'.join(power_table(ns=args.trials, spread=spread, correlation=correlation,
                                    world=world, reps=args.reps, seed=args.seed)))
        print()
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.results:
        return _measured_power(args)
    print('Coverage at 95%, spread 20%, no correlation between arms:\n')
    print('\n'.join(coverage_table(seed=args.seed)))
    settings = [('moderate', PAPER_WORLD, 0.2, 0.0), ('moderate', PAPER_WORLD, 0.2, 0.5),
                ('large', LARGE_WORLD, 0.2, 0.0), ('moderate', PAPER_WORLD, 0.15, 0.0),
                ('moderate', PAPER_WORLD, 0.3, 0.0)]
    for label, world, spread, correlation in settings:
        print('\nP(supported), %s margins (%s), spread %d%%, correlation %g:\n'
              % (label, ', '.join('%s %g' % kv for kv in world.items()), 100 * spread,
                 correlation))
        print('\n'.join(power_table(spread=spread, correlation=correlation, world=world,
                                    reps=args.reps, seed=args.seed)))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
