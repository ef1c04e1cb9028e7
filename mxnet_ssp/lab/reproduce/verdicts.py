"""The lab's verdicts: one per claim of the DSSP paper, decided by arms compared seed by seed,
the unpaired medians beside them as a second reading, and the simulator's prediction next to
the measurement.

Pure functions of the trial records that :func:`.collect.gather` reads (and of
:mod:`mxnet_ssp.lab.cluster_model.simulate`); tested on synthetic trials.

- **Paired (decides).** Trial k of every arm shares its seed, so a time claim t_A / t_B is
  decided by the median over the common seeds of the per-seed ratio t_A,k / t_B,k, with its
  interval at order statistics (:mod:`.paired`: exact coverage, never-reached pairs, the
  minimum of :data:`MIN_TRIALS` pairs for a 95% interval); the accuracy claim by the per-seed
  difference.
- **Several comparisons.** A claim made of m comparisons (one per SSP threshold) asks each for
  the level ``1 - 0.05 / m`` (Bonferroni).  The family is one cell of the Verdicts table: one
  claim, one DSSP mode, one target, one scenario; nothing is corrected across cells.
- **Unpaired (second reading).** median(t_A) / median(t_B) with a percentile bootstrap
  interval (each arm's trials resampled independently, 2,000 resamples, order statistics so
  infinite times stay infinite, a fixed seed), at the same level, shown only with at least
  :data:`MIN_TRIALS` trials of each arm; it decides nothing.

A trial that never reached a target counts as taking infinitely long; so does one whose
training diverged, whose final accuracy counts as 0 (:func:`seed_times`).
"""
import collections
import math
import random
import types

import numpy as np

from ..cluster_model.arms import sim_policy
from ..cluster_model.simulate import simulate
from .grid import DIVERGED
from .paired import (LEVEL, MIN_TRIALS, family_level, fmt_interval, paired_difference,
                     paired_ratio)
from .stats import METRICS, metric_value

__all__ = ['verdicts', 'Verdict', 'balance_verdicts', 'trial_times', 'trial_accuracies',
           'seed_times', 'seed_accuracies', 'ratio_interval', 'difference_interval',
           'sim_vs_lab', 'simulated_rates', 'measured_rates', 'asp_step_samples',
           'mode_pairs', 'LEVEL', 'MIN_TRIALS']

RESAMPLES = 2000
#: the claims' margins, fixed before the lab ran
SAME_TIME = 0.10            # "DSSP ≈ ASP": within 10% of ASP's time
ACCURACY_MARGIN = 0.005     # "accuracy >= ASP's": not more than 0.5 points below
TUNED_MARGIN = 0.10         # "untuned DSSP within 10% of the best hand-tuned SSP"
SPEEDUP = 1.3               # "DSSP >= 1.3x faster than BSP"
#: simulator vs lab: a larger difference is explained in the report
SIM_TOLERANCE = 0.15

SUPPORTED, REFUTED, INCONCLUSIVE = 'supported', 'refuted', 'inconclusive'

#: one row of the Verdicts table: the claim, its verdict, the paired intervals that decided it
#: and the unpaired reading (texts)
Verdict = collections.namedtuple('Verdict', 'claim verdict evidence unpaired')


# ---------------------------------------------------------------------------
# the unpaired reading: bootstrap of the ratio of medians

def _median(values):
    return float(np.quantile(np.asarray(values, dtype=float), 0.5, method='lower'))


def _interval(samples, level=LEVEL):
    """(low, high) of the percentile interval at order statistics; nan if undefined."""
    samples = np.asarray(samples, dtype=float)
    if samples.size == 0 or np.isnan(samples).mean() > 1 - level:
        return math.nan, math.nan
    samples = samples[~np.isnan(samples)]
    tail = (1 - level) / 2
    return (float(np.quantile(samples, tail, method='lower')),
            float(np.quantile(samples, 1 - tail, method='higher')))


def _resampled_medians(values, rng):
    values = np.asarray(values, dtype=float)
    picks = rng.integers(0, len(values), size=(RESAMPLES, len(values)))
    return np.quantile(values[picks], 0.5, axis=1, method='lower')


def _ratio(a, b):
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(np.isinf(a) & np.isinf(b), np.nan, np.asarray(a) / np.asarray(b))


def ratio_interval(numerator, denominator, seed=0, level=LEVEL):
    """(median ratio, low, high) of median(numerator) / median(denominator) over bootstrap
    resamples of each list (lower medians); a ratio of two infinite medians is undefined
    (nan); low and high are nan when either list has fewer than :data:`MIN_TRIALS` values."""
    if not numerator or not denominator:
        return None
    point = float(_ratio(_median(numerator), _median(denominator)))
    if min(len(numerator), len(denominator)) < MIN_TRIALS:
        return point, math.nan, math.nan
    rng = np.random.default_rng(seed)
    num, den = _resampled_medians(numerator, rng), _resampled_medians(denominator, rng)
    low, high = _interval(_ratio(num, den), level)
    return point, low, high


def difference_interval(a, b, seed=0, level=LEVEL):
    """(median(a) - median(b), low, high) over bootstrap resamples of each list (low and
    high nan when either has fewer than :data:`MIN_TRIALS` values)."""
    if not a or not b:
        return None
    if min(len(a), len(b)) < MIN_TRIALS:
        return _median(a) - _median(b), math.nan, math.nan
    rng = np.random.default_rng(seed)
    low, high = _interval(_resampled_medians(a, rng) - _resampled_medians(b, rng), level)
    return _median(a) - _median(b), low, high


def _fmt_interval(interval, fmt='%.2f'):
    """'point [low, high]' of an unpaired (point, low, high); 'never' for inf, '-' for nan."""
    if interval is None:
        return 'no trials'
    point, low, high = interval

    def one(x):
        return 'never' if math.isinf(x) else ('-' if math.isnan(x) else fmt % x)
    return '%s [%s, %s]' % (one(point), one(low), one(high))


# ---------------------------------------------------------------------------
# trial records

def trial_times(trials, target, budget=None, metric='first'):
    """Seconds to `target` of every finished trial (inf where never reached, or reached after
    `budget` seconds), under `metric`."""
    return list(seed_times(trials, target, budget, metric).values())


def trial_accuracies(trials):
    return list(seed_accuracies(trials).values())


def seed_times(trials, target, budget=None, metric='first'):
    """{seed: seconds to `target`} of every finished trial under the progress `metric`
    (:data:`.stats.METRICS`; inf where never reached, or only after `budget` seconds: every arm
    is censored at the same wall-clock time; ``shortfall`` is computed over `budget`).

    A trial whose training diverged (status :data:`.grid.DIVERGED`) is a result, not a gap:
    it never reaches the target (inf), and its shortfall is the whole budget (its model counts
    as 0 accuracy throughout: the largest shortfall any run can have).  Other failed trials
    are left out."""
    out = {}
    for r in trials:
        if r['status'] not in ('ok', DIVERGED):
            continue
        if metric == 'shortfall' and budget is None:
            raise ValueError('the shortfall metric needs the common budget')
        if r['status'] == DIVERGED:
            out[r['seed']] = budget if metric == 'shortfall' else math.inf
            continue
        t = metric_value(r['curve'], target, metric, budget)
        out[r['seed']] = math.inf if t is None or (budget is not None and t > budget) else t
    return out


def common_budget(rows):
    """The wall-clock budget every arm's times are censored at: the shortest finished run's
    last evaluation (its curve's end), so no arm is judged on time another arm did not
    have; None without a curve."""
    ends = [t['curve'][-1][0] for r in rows for t in r['trials']
            if t['status'] == 'ok' and t.get('curve')]
    return min(ends) if ends else None


#: the final accuracy a diverged trial counts as: its model is unusable
DIVERGED_ACCURACY = 0.0


def seed_accuracies(trials):
    """{seed: final test accuracy} of every finished trial; a trial whose training diverged
    counts as :data:`DIVERGED_ACCURACY`."""
    return {r['seed']: DIVERGED_ACCURACY if r['status'] == DIVERGED else r['final_accuracy']
            for r in trials if r['status'] in ('ok', DIVERGED)}


# ---------------------------------------------------------------------------
# the decision rules: on a paired Interval, decisive only at the level asked

def _greater(interval, bound, tol=0.0):
    """supported when the interval lies above `bound`, refuted when below, else inconclusive.

    Within `tol` of `bound` counts as at the bound (neither above nor below): a difference of
    two accuracies that is the margin exactly can come out of floating point just below it
    (0.94 - 0.945 < -0.005).
    """
    if interval is None or not interval.decisive:
        return INCONCLUSIVE
    if interval.low > bound + tol:
        return SUPPORTED
    if interval.high < bound - tol:
        return REFUTED
    return INCONCLUSIVE


def _at_most(interval, bound):
    if interval is None or not interval.decisive:
        return INCONCLUSIVE
    if interval.high <= bound:
        return SUPPORTED
    if interval.low > bound:
        return REFUTED
    return INCONCLUSIVE


def _within(interval, low, high):
    """supported when the interval lies within [low, high], refuted when it lies outside."""
    if interval is None or not interval.decisive:
        return INCONCLUSIVE
    if low <= interval.low and interval.high <= high:
        return SUPPORTED
    if interval.high < low or interval.low > high:
        return REFUTED
    return INCONCLUSIVE


def _all(verdicts):
    if any(v == REFUTED for v in verdicts):
        return REFUTED
    if verdicts and all(v == SUPPORTED for v in verdicts):
        return SUPPORTED
    return INCONCLUSIVE


def _claim(title, parts, rule, paired=paired_ratio, unpaired=ratio_interval, fmt='%.2f',
           reading=True):
    """A claim made of the comparisons `parts` = [(label, a, b)] (dicts seed -> value), each
    at the level of a family of len(parts); supported when every part is, refuted when any is.

    Returns a :class:`Verdict`; the unpaired reading is left empty without `reading`.
    """
    level = family_level(len(parts))
    decided = [(label, paired(a, b, level)) for label, a, b in parts]
    verdict = _all([rule(iv) for _, iv in decided]) if decided else INCONCLUSIVE

    def text(pairs):
        return '; '.join('%s: %s' % pair for pair in pairs) or 'no trials'
    evidence = text([(label, fmt_interval(iv, fmt)) for label, iv in decided])
    second = text([(label, _fmt_interval(unpaired(list(a.values()), list(b.values()),
                                                  level=level) if a and b else None, fmt))
                   for label, a, b in parts]) if reading else ''
    return Verdict(title, verdict, evidence, second)


def verdicts(rows, target, dssp_name='dssp', unpaired=True, budget=None, metric='first'):
    """One verdict per claim of the paper, for the DSSP arm called `dssp_name`.

    Parameters
    ----------
    rows : list of dict
        :func:`.report.summarize`'s rows (``arm`` and ``trials`` are read).
    target : float
        The accuracy whose time-to-target the time claims compare.
    unpaired : bool
        Also compute the unpaired reading (2,000 bootstrap resamples per comparison); off, its
        texts are empty (what :mod:`.power_analysis`'s power simulation uses).
    budget : float, optional
        Censor every arm's times at this many seconds (:func:`common_budget`; the lab report
        passes it).
    metric : str
        The progress metric of the time claims (:data:`.stats.METRICS`).

    Returns
    -------
    list of :class:`Verdict`, in Table I's order; evidence: the paired intervals that decide
    it, ``label: median ratio [low, high] coverage``; unpaired: median(t_A) / median(t_B)
    [bootstrap interval] at the same level.
    """
    by_name = {r['arm'].name: r['trials'] for r in rows}
    times = {name: seed_times(trials, target, budget, metric)
             for name, trials in by_name.items()}
    ssp = [a.name for a in sorted((r['arm'] for r in rows if r['arm'].family == 'ssp'
                                   and not r['arm'].balance and times[r['arm'].name]),
                                  key=lambda a: a.staleness)]
    bsp, asp, dssp = times.get('bsp', {}), times.get('asp', {}), times.get(dssp_name, {})
    out = []

    def claim(title, parts, rule, **kwargs):
        out.append(_claim(title, parts, rule, reading=unpaired, **kwargs))

    # Table I's order in time: BSP > SSP > DSSP ≈ ASP
    claim('BSP slower than every SSP (t_BSP / t_SSP > 1)',
          [(n, bsp, times[n]) for n in ssp], lambda iv: _greater(iv, 1.0))
    claim('every SSP slower than DSSP (t_SSP / t_DSSP > 1)',
          [(n, times[n], dssp) for n in ssp], lambda iv: _greater(iv, 1.0))
    claim('DSSP as fast as ASP (t_DSSP / t_ASP within 1 ± %g)' % SAME_TIME,
          [('t_DSSP / t_ASP', dssp, asp)], lambda iv: _within(iv, 1 - SAME_TIME, 1 + SAME_TIME))
    claim("DSSP's final accuracy >= ASP's (difference > -%g)" % ACCURACY_MARGIN,
          [('acc_DSSP - acc_ASP', seed_accuracies(by_name.get(dssp_name, [])),
            seed_accuracies(by_name.get('asp', [])))],
          lambda iv: _greater(iv, -ACCURACY_MARGIN, 1e-12), paired=paired_difference,
          unpaired=difference_interval, fmt='%+.4f')
    # within 10% of the best SSP is within 10% of every SSP: no threshold is chosen, so none
    # is chosen on the trials that test it
    claim('untuned DSSP within %d%% of the best hand-tuned SSP (t_DSSP / t_SSP <= %g for '
          'every s)' % (100 * TUNED_MARGIN, 1 + TUNED_MARGIN),
          [(n, dssp, times[n]) for n in ssp] if dssp else [],
          lambda iv: _at_most(iv, 1 + TUNED_MARGIN))
    claim('DSSP at least %gx faster than BSP (t_BSP / t_DSSP >= %g)' % (SPEEDUP, SPEEDUP),
          [('t_BSP / t_DSSP', bsp, dssp)], lambda iv: _greater(iv, SPEEDUP - 1e-12))
    return out


METRIC_DEPENDENT = 'metric-dependent'


def across_metrics(rows, target, dssp_name='dssp', budget=None, metrics=METRICS,
                   unpaired=True):
    """The verdicts under every progress metric: a list, one per claim, of (the verdict of
    the primary metric, or :data:`METRIC_DEPENDENT` when the metrics disagree, {metric:
    :class:`Verdict`})."""
    per = {m: verdicts(rows, target, dssp_name, unpaired=unpaired, budget=budget, metric=m)
           for m in metrics}
    out = []
    for i in range(len(per[metrics[0]])):
        cells = {m: per[m][i] for m in metrics}
        kinds = {v.verdict for v in cells.values()}
        out.append((cells[metrics[0]].verdict if len(kinds) == 1 else METRIC_DEPENDENT, cells))
    return out


NOT_SEPARATED = 'not separated'


def _separation(interval, name_a, name_b, bound):
    """`name_a` when the interval lies below `bound`, `name_b` when above, else
    :data:`NOT_SEPARATED` (also when it falls short of the level asked): the claims' rule
    :func:`_greater`, its sides named."""
    return {SUPPORTED: name_b, REFUTED: name_a}.get(_greater(interval, bound), NOT_SEPARATED)


def mode_pairs(rows, target, modes, budget=None, metrics=METRICS):
    """The DSSP modes against each other, seed by seed: not a claim of the paper, the answer
    to "which mode".

    `modes` = [(arm name, mode)] of the arms that ran.  Each pair (A, B) is compared as the
    verdicts compare arms, every comparison at the level of a family of all the pairs
    (Bonferroni): the median per-seed t_A / t_B under each metric, and acc_A - acc_B.

    Returns [(mode A, mode B, reading, {metric: Interval}, accuracy Interval, accuracy
    reading)]: a reading names the mode that was sooner (more accurate) when the interval lies
    on one side of 1 (of 0), :data:`NOT_SEPARATED` when it straddles it, and is
    :data:`METRIC_DEPENDENT` when the metrics disagree.
    """
    by_name = {r['arm'].name: r['trials'] for r in rows}
    present = [(name, mode) for name, mode in modes if by_name.get(name)]
    pairs = [(a, b) for i, a in enumerate(present) for b in present[i + 1:]]
    level = family_level(len(pairs))
    out = []
    times = {name: {m: seed_times(by_name[name], target, budget, m) for m in metrics}
             for name, _ in present}
    for (name_a, mode_a), (name_b, mode_b) in pairs:
        per = {m: paired_ratio(times[name_a][m], times[name_b][m], level) for m in metrics}
        readings = {_separation(iv, mode_a + ' sooner', mode_b + ' sooner', 1.0)
                    for iv in per.values()}
        accuracy = paired_difference(seed_accuracies(by_name[name_a]),
                                     seed_accuracies(by_name[name_b]), level)
        out.append((mode_a, mode_b, readings.pop() if len(readings) == 1 else METRIC_DEPENDENT,
                    per, accuracy, _separation(accuracy, mode_b + ' more accurate',
                                               mode_a + ' more accurate', 0.0)))
    return out


# ---------------------------------------------------------------------------
# the simulator next to the lab

def _fast_ranks(scenario):
    """The ranks with the shortest iteration: compute and, with links, link time."""
    times = [t + link for t, link in zip(scenario.times(), scenario.link_times())]
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

    The compute times are the trial's draws (``scenario.stream(rank, seed)``), and with
    links each worker's link time (:meth:`Scenario.link_times`).  With `step_samples`
    (seconds), every iteration takes a push/pull time drawn from them instead (seeded by
    the trial): the step time the simulator's model otherwise leaves out (measured, so it
    holds the links' time, pooled over the workers).
    """
    rng = random.Random('steps:%d' % seed)
    links = scenario.link_times()
    computed, per_rank = [], []
    for rank in range(scenario.workers):
        stream = scenario.stream(rank, seed)
        draws = [stream.next() for _ in range(iterations)]
        computed.append(draws)
        per_rank.append([t + rng.choice(step_samples) for t in draws] if len(step_samples)
                        else [t + links[rank] for t in draws])
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


def balance_verdicts(rows, target, unpaired=True, budget=None, metric='first'):
    """Batch balancing's goal: time to `target` no later than ASP's (issue 11), and against
    the same store unbalanced, compared seed by seed.

    Returns
    -------
    list of (arm, verdict vs ASP, paired Interval vs ASP, unpaired (point, low, high) vs ASP
    or None, unbalanced arm's name, paired Interval vs it), one per ``-balance`` arm with a
    finished trial.
    """
    times = {r['arm'].name: seed_times(r['trials'], target, budget, metric) for r in rows}
    out = []
    for row in rows:
        arm = row['arm']
        if not arm.balance or not times[arm.name]:
            continue
        own, asp = times[arm.name], times.get('asp', {})
        vs_asp = paired_ratio(own, asp)
        second = (ratio_interval(list(own.values()), list(asp.values())) if unpaired and asp
                  else None)
        base = arm.name[:-len('-balance')]
        vs_base = paired_ratio(own, times.get(base, {}))
        out.append((arm, _at_most(vs_asp, 1.0), vs_asp, second, base, vs_base))
    return out
