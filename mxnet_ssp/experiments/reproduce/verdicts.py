"""The lab's statistics and verdicts: medians with bootstrap intervals, one verdict per claim
of the DSSP paper, and the simulator's prediction next to the measurement.

Pure functions of the trial records that :func:`.collect.gather` reads (and of
:mod:`mxnet_ssp.lab.simulate`); tested on synthetic trials.

A trial that never reached a target counts as taking infinitely long, so a
paradigm whose median trial misses the target has an infinite median time.
Intervals are 95% percentile bootstrap intervals of the median (trials of each
paradigm resampled independently, 2,000 resamples, a fixed seed so a report is
reproducible), taken at order statistics (no interpolation, so infinite times
stay infinite).
"""
import math
import random
import types

import numpy as np

from ...lab.simulate import simulate
from .stats import time_to_target

RESAMPLES = 2000
LEVEL = 0.95
#: the claims' margins, fixed before the lab ran
SAME_TIME = 0.10            # "DSSP ≈ ASP": within 10% of ASP's time
ACCURACY_MARGIN = 0.005     # "accuracy >= ASP's": not more than 0.5 points below
TUNED_MARGIN = 0.10         # "untuned DSSP within 10% of the best hand-tuned SSP"
SPEEDUP = 1.3               # "DSSP >= 1.3x faster than BSP"
#: simulator vs lab: a larger difference is explained in the report
SIM_TOLERANCE = 0.15

SUPPORTED, REFUTED, INCONCLUSIVE = 'supported', 'refuted', 'inconclusive'
#: fewer finished trials of a paradigm than this give no interval ('-'), so no verdict: the
#: bootstrap of one or two values is the values themselves, not a 95% interval
MIN_TRIALS = 3


def _median(values):
    return float(np.quantile(np.asarray(values, dtype=float), 0.5, method='lower'))


def _interval(samples):
    """(low, high) of the 95% percentile interval at order statistics; nan if undefined."""
    samples = np.asarray(samples, dtype=float)
    if samples.size == 0 or np.isnan(samples).mean() > 1 - LEVEL:
        return math.nan, math.nan
    samples = samples[~np.isnan(samples)]
    tail = (1 - LEVEL) / 2
    return (float(np.quantile(samples, tail, method='lower')),
            float(np.quantile(samples, 1 - tail, method='higher')))


def _resampled_medians(values, rng):
    values = np.asarray(values, dtype=float)
    picks = rng.integers(0, len(values), size=(RESAMPLES, len(values)))
    return np.quantile(values[picks], 0.5, axis=1, method='lower')


def median_interval(values, seed=0):
    """(median, low, high) of `values` (a list of numbers, inf allowed); None if empty;
    low and high are nan with fewer than :data:`MIN_TRIALS` values."""
    if not values:
        return None
    if len(values) < MIN_TRIALS:
        return _median(values), math.nan, math.nan
    rng = np.random.default_rng(seed)
    low, high = _interval(_resampled_medians(values, rng))
    return _median(values), low, high


def _ratio(a, b):
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(np.isinf(a) & np.isinf(b), np.nan, np.asarray(a) / np.asarray(b))


def ratio_interval(numerator, denominator, seed=0):
    """(median ratio, low, high) of median(numerator) / median(denominator) over bootstrap
    resamples of each list; a ratio of two infinite medians is undefined (nan); low and high
    are nan when either list has fewer than :data:`MIN_TRIALS` values."""
    if not numerator or not denominator:
        return None
    point = float(_ratio(_median(numerator), _median(denominator)))
    if min(len(numerator), len(denominator)) < MIN_TRIALS:
        return point, math.nan, math.nan
    rng = np.random.default_rng(seed)
    num, den = _resampled_medians(numerator, rng), _resampled_medians(denominator, rng)
    low, high = _interval(_ratio(num, den))
    return point, low, high


def difference_interval(a, b, seed=0):
    """(median(a) - median(b), low, high) over bootstrap resamples of each list (low and
    high nan when either has fewer than :data:`MIN_TRIALS` values)."""
    if not a or not b:
        return None
    if min(len(a), len(b)) < MIN_TRIALS:
        return _median(a) - _median(b), math.nan, math.nan
    rng = np.random.default_rng(seed)
    low, high = _interval(_resampled_medians(a, rng) - _resampled_medians(b, rng))
    return _median(a) - _median(b), low, high


def trial_times(trials, target):
    """Seconds to `target` of every finished trial (inf where never reached)."""
    return [math.inf if t is None else t for t in
            (time_to_target(r['curve'], target) for r in trials if r['status'] == 'ok')]


def trial_accuracies(trials):
    return [r['final_accuracy'] for r in trials if r['status'] == 'ok']


def _greater(interval, bound, tol=0.0):
    """supported when the interval lies above `bound`, refuted when below, else inconclusive.

    Within `tol` of `bound` counts as at the bound (neither above nor below): a difference of
    two accuracies that is the margin exactly can come out of floating point just below it
    (0.94 - 0.945 < -0.005).
    """
    if interval is None or any(math.isnan(x) for x in interval[1:]):
        return INCONCLUSIVE
    if interval[1] > bound + tol:
        return SUPPORTED
    if interval[2] < bound - tol:
        return REFUTED
    return INCONCLUSIVE


def _at_most(interval, bound):
    if interval is None or any(math.isnan(x) for x in interval[1:]):
        return INCONCLUSIVE
    if interval[2] <= bound:
        return SUPPORTED
    if interval[1] > bound:
        return REFUTED
    return INCONCLUSIVE


def _all(verdicts):
    if any(v == REFUTED for v in verdicts):
        return REFUTED
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    return INCONCLUSIVE


def _fmt_interval(interval, fmt='%.2f'):
    if interval is None:
        return 'no trials'
    point, low, high = interval

    def one(x):
        return 'never' if math.isinf(x) else ('-' if math.isnan(x) else fmt % x)
    return '%s [%s, %s]' % (one(point), one(low), one(high))


def verdicts(rows, target, dssp_name='dssp'):
    """One verdict per claim of the paper, for the DSSP arm called `dssp_name`.

    Parameters
    ----------
    rows : list of dict
        :func:`.report.summarize`'s rows (``arm`` and ``trials`` are read).
    target : float
        The accuracy whose time-to-target the time claims compare.

    Returns
    -------
    list of (claim, verdict, evidence) tuples, in Table I's order; evidence is
    the intervals that decide it (text).
    """
    by_name = {r['arm'].name: r['trials'] for r in rows}
    times = {name: trial_times(trials, target) for name, trials in by_name.items()}
    ssp_arms = sorted((r['arm'] for r in rows if r['arm'].family == 'ssp'
                       and not r['arm'].balance and times[r['arm'].name]),
                      key=lambda a: a.staleness)
    ssp = [a.name for a in ssp_arms]
    threshold = {a.name: a.staleness[0] for a in ssp_arms}
    bsp, asp, dssp = times.get('bsp') or [], times.get('asp') or [], times.get(dssp_name) or []
    out = []

    def row(claim, verdict, evidence):
        out.append((claim, verdict, evidence))

    # Table I's order in time: BSP > SSP > DSSP ≈ ASP
    parts = [(n, ratio_interval(bsp, times[n])) for n in ssp]
    row('BSP slower than every SSP (t_BSP / t_SSP > 1)',
        _all([_greater(iv, 1.0) for _, iv in parts]) if parts and bsp else INCONCLUSIVE,
        '; '.join('%s: %s' % (n, _fmt_interval(iv)) for n, iv in parts) or 'no trials')
    parts = [(n, ratio_interval(times[n], dssp)) for n in ssp]
    row('every SSP slower than DSSP (t_SSP / t_DSSP > 1)',
        _all([_greater(iv, 1.0) for _, iv in parts]) if parts and dssp else INCONCLUSIVE,
        '; '.join('%s: %s' % (n, _fmt_interval(iv)) for n, iv in parts) or 'no trials')
    iv = ratio_interval(dssp, asp)
    if iv is None or any(math.isnan(x) for x in iv[1:]):
        same = INCONCLUSIVE
    elif 1 - SAME_TIME <= iv[1] and iv[2] <= 1 + SAME_TIME:
        same = SUPPORTED
    elif iv[2] < 1 - SAME_TIME or iv[1] > 1 + SAME_TIME:
        same = REFUTED
    else:
        same = INCONCLUSIVE
    row('DSSP as fast as ASP (t_DSSP / t_ASP within 1 ± %g)' % SAME_TIME, same,
        't_DSSP / t_ASP: ' + _fmt_interval(iv))
    # accuracy
    iv = difference_interval(trial_accuracies(by_name.get(dssp_name, [])),
                             trial_accuracies(by_name.get('asp', [])))
    row("DSSP's final accuracy >= ASP's (difference > -%g)" % ACCURACY_MARGIN,
        _greater(iv, -ACCURACY_MARGIN, 1e-12), 'acc_DSSP - acc_ASP: ' + _fmt_interval(iv, '%+.4f'))
    # untuned DSSP vs the best hand-tuned SSP (the SSP arm with the smallest median time)
    if ssp and dssp:
        best = min(ssp, key=lambda n: (_median(times[n]), threshold[n]))
        iv = ratio_interval(dssp, times[best])
        row('untuned DSSP within %d%% of the best hand-tuned SSP (t_DSSP / t_best SSP <= %g)'
            % (100 * TUNED_MARGIN, 1 + TUNED_MARGIN), _at_most(iv, 1 + TUNED_MARGIN),
            'best SSP: %s; t_DSSP / t_%s: %s' % (best, best, _fmt_interval(iv)))
    else:
        row('untuned DSSP within %d%% of the best hand-tuned SSP' % (100 * TUNED_MARGIN),
            INCONCLUSIVE, 'no trials')
    iv = ratio_interval(bsp, dssp)
    row('DSSP at least %gx faster than BSP (t_BSP / t_DSSP >= %g)' % (SPEEDUP, SPEEDUP),
        _greater(iv, SPEEDUP - 1e-12), 't_BSP / t_DSSP: ' + _fmt_interval(iv))
    return out


# ---------------------------------------------------------------------------
# the simulator next to the lab

def sim_policy(arm):
    """The :func:`mxnet_ssp.lab.simulate.simulate` policy of a grid arm (BSP is SSP with s = 0)."""
    if arm.family == 'bsp':
        return 'ssp:0'
    if arm.family == 'asp':
        return 'asp'
    if arm.family == 'ssp':
        return 'ssp:%d' % arm.staleness[0]
    return 'dssp:%d:%d:%s' % (arm.staleness + (arm.mode,))


def _fast_ranks(scenario):
    times = scenario.times()
    return [r for r, t in enumerate(times) if t == min(times)]


def measured_rates(trial, scenario):
    """(total iterations/s, fast workers' non-compute share) of one finished lab trial."""
    total = sum(v for v in trial['it_per_s'].values() if v)
    fast = _fast_ranks(scenario)
    shares = [trial['idle_share'][r] for r in fast if trial.get('idle_share', {}).get(r)
              is not None]
    return total, (float(np.mean(shares)) if shares else None)


class _Replayed:
    """A scenario whose streams replay given iteration times (what the simulator draws)."""

    jitter = 0.0

    def __init__(self, scenario, per_rank):
        self.name, self._scenario, self._per_rank = scenario.name, scenario, per_rank

    def times(self):
        return self._scenario.times()

    def stream(self, rank, seed):      # pylint: disable=unused-argument
        values = iter(self._per_rank[rank])
        return types.SimpleNamespace(next=lambda: next(values))


def simulated_rates(arm, scenario, seed, iterations, step_samples=()):
    """(total iterations/s, fast workers' non-compute share) the simulator predicts for one
    trial, measured like the lab's: each worker's iterations over its own span (start to
    its last push), summed; the share of that span not computing.

    The compute times are the trial's draws (``scenario.stream(rank, seed)``).  With
    `step_samples` (seconds), every iteration also takes a push/pull time drawn from them
    (seeded by the trial): the step time the simulator's model otherwise leaves out.
    """
    rng = random.Random('steps:%d' % seed)
    computed, per_rank = [], []
    for rank in range(scenario.workers):
        stream = scenario.stream(rank, seed)
        draws = [stream.next() for _ in range(iterations)]
        computed.append(draws)
        per_rank.append([t + rng.choice(step_samples) for t in draws] if len(step_samples)
                        else draws)
    res = simulate(None, sim_policy(arm), iterations=iterations, seed=seed,
                   scenario=_Replayed(scenario, per_rank))
    spans = [(sum(computed[r][:n]), sum(per_rank[r][:n]) + res.wait[r])
             for r, n in enumerate(res.iterations)]
    total = sum(n / span for n, (_, span) in zip(res.iterations, spans) if span > 0)
    fast = _fast_ranks(scenario)
    share = float(np.mean([1.0 - spans[r][0] / spans[r][1] for r in fast]))
    return total, share


def asp_step_samples(rows, name='asp'):
    """The step times (seconds) measured under the ASP arm `name`, where nobody waits:
    each trial's percentiles 0..100 over all its iterations (``step_quantiles_ms``), pooled."""
    return [q / 1e3 for r in rows if r['arm'].name == name for t in r['trials']
            if t['status'] == 'ok' for q in t.get('step_quantiles_ms', ())]


def sim_vs_lab(rows, scenario, iterations):
    """Per arm: measured and predicted (model alone, model + measured push/pull time).

    Returns a list of dicts with ``arm``, ``measured`` / ``model`` / ``fixed`` =
    (median total it/s, median fast-worker non-compute share) over the trials,
    ``step_mean`` (the mean of the ASP step times the fixed model draws from) and the
    relative differences of the it/s.
    """
    samples = asp_step_samples(rows)
    step_mean = float(np.mean(samples)) if samples else 0.0
    out = []
    for row in rows:
        ok = [t for t in row['trials'] if t['status'] == 'ok']
        if not ok or row['arm'].balance:       # the simulator does not balance batches
            continue
        measured = [measured_rates(t, scenario) for t in ok]
        model = [simulated_rates(row['arm'], scenario, t['seed'], iterations) for t in ok]
        # an ASP arm's own steps are push/pull alone (ASP lr/tau's servers keep a slot
        # per worker: its steps are longer than plain ASP's); the others' include waiting
        own = asp_step_samples(rows, row['arm'].name) if row['arm'].family == 'asp' else []
        fixed = [simulated_rates(row['arm'], scenario, t['seed'], iterations, own or samples)
                 for t in ok]

        def med(pairs, i):
            values = [p[i] for p in pairs if p[i] is not None]
            return float(np.median(values)) if values else None
        entry = {'arm': row['arm'], 'step_mean': step_mean,
                 'measured': (med(measured, 0), med(measured, 1)),
                 'model': (med(model, 0), med(model, 1)),
                 'fixed': (med(fixed, 0), med(fixed, 1))}
        entry['model_diff'] = entry['model'][0] / entry['measured'][0] - 1
        entry['fixed_diff'] = entry['fixed'][0] / entry['measured'][0] - 1
        out.append(entry)
    return out


def balance_verdicts(rows, target):
    """Batch balancing's goal: time to `target` no later than ASP's (issue 11), and against
    the same store unbalanced; one (arm, verdict vs ASP, interval vs ASP, interval vs its
    store) per ``-balance`` arm."""
    times = {r['arm'].name: trial_times(r['trials'], target) for r in rows}
    out = []
    for row in rows:
        arm = row['arm']
        if not arm.balance or not times[arm.name]:
            continue
        vs_asp = ratio_interval(times[arm.name], times.get('asp') or [])
        base = arm.name[:-len('-balance')]
        vs_base = ratio_interval(times[arm.name], times.get(base) or [])
        out.append((arm, _at_most(vs_asp, 1.0), vs_asp, base, vs_base))
    return out
