"""``mxnet-ssp-advise RUN_DIR``: which paradigm for this cluster, from the metrics of a real run.

A job already writes, per worker, what each iteration cost: ``train-worker<rank>.jsonl``
(mxnet-ssp-train's ``--save-dir``: the compute of each pass, padded or slowed as the job was
told, and the store's step) or ``worker-<rank>.jsonl`` (the metrics of an SSP/DSSP store,
``MXNET_SSP_METRICS_DIR``: when each step's pushes went out and came back).  From a few hundred
iterations of any store, :func:`fit_run` fits

* each worker's compute per iteration (median) and its jitter (median absolute deviation,
  relative), and
* the step's overhead: the push and pull that every paradigm pays once per iteration
  (train logs: the smallest per-worker median of the step time, which is the slowest
  worker's under BSP and everybody's under ASP; store metrics: the median push time),

into a :class:`~mxnet_ssp.lab.cluster_model.profiles.Scenario` of the compute, and keeps the step times of
the worker that waited least as samples of the overhead.  Every simulated iteration is a
compute draw plus a step time drawn from those samples: without the step times' noise the
simulator runs DSSP's ``paper`` mode like ASP, which the real store does not (docs/results.md,
"Simulator vs lab").  :func:`predict` then runs the simulator (:mod:`mxnet_ssp.lab.cluster_model.simulate`) for every paradigm
over the same fixed wall time and several seeds, and :func:`recommend` picks the least stale
paradigm within 10% of the best throughput.

What this cannot know, and says: how much accuracy per update the staleness costs the
user's model (the recommendation takes the least stale of the fast ones for that reason);
slow episodes that the run did not show; how the overhead grows with more workers or
servers.  :func:`check_lab` measures the simulator's error out of sample: fitted on a lab
scenario's ASP runs only, it predicts how long each other paradigm's runs took.
"""
import argparse
import dataclasses
import math
import os
import random
import re
import statistics
import sys
import types
from dataclasses import dataclass, field

from ...core.jsonl import read_jsonl
from ...core.names import STORE_METRICS, TRAIN_LOG
from .arms import parse_arm, sim_policy
from ..._cli import add_version, prog_name
from .episodes import Episodes, fit_episodes
from .profiles import DEFAULT_RUN_ITERATIONS, Scenario, get_scenario
from .time_to_target import CostFileError, load_cost, reached_at
from .simulate import simulate

__all__ = ['Fit', 'Prediction', 'fit_run', 'fit_cluster', 'predict', 'recommend',
           'format_advice', 'apply_text', 'check_lab', 'main', 'ADVISED_ARMS', 'ADVISED',
           'MEASURED_ERROR', 'BALANCE_ERROR', 'with_times', 'fastest', 'inseparable',
           'recommend_by_time', 'format_time_advice', 'default_wall_time', 'DEFAULT_SEEDS']

#: The arms (:mod:`.arms`) the advisor compares.  The simulator runs BSP as SSP with s = 0;
#: "+ balance" sizes each worker's batch to its speed (docs/balance.md), so every worker's
#: iteration takes the same time: W / sum(1 / t_i).
ADVISED_ARMS = ('bsp', 'asp', 'ssp1', 'ssp2', 'ssp3', 'ssp6', 'ssp15', 'dssp', 'dssp-paper',
                'dssp-threshold', 'bsp-balance', 'ssp3-balance')
#: (label, simulator policy, balanced) of each of :data:`ADVISED_ARMS`: what :func:`predict`
#: runs.
ADVISED = tuple((arm.label, sim_policy(arm), arm.balance)
                for arm in map(parse_arm, ADVISED_ARMS))
#: label -> :class:`.arms.Arm` of every advised paradigm
ARM_OF = {arm.label: arm for arm in map(parse_arm, ADVISED_ARMS)}
WITHIN = 0.10          # the decision window: within 10% of the best charged throughput
#: The simulator's measured error per paradigm, out of sample (docs/lab.md, "The advisor
#: against the lab": its predicted finish times were early, i.e. optimistic, by BSP 1-9%, SSP
#: s=3 2-5%, DSSP bounded 2-4% (the middle of each range here), and DSSP paper mode's fast
#: worker up to 28%); each option's throughput is charged it (read as that much slower).  ASP
#: is what the check fits on (0); threshold mode was not measured: charged as paper mode.
MEASURED_ERROR = {'asp': 0.0, 'bsp': 0.05, 'ssp': 0.035, 'dssp-bounded': 0.03,
                  'dssp-paper': 0.28, 'dssp-threshold': 0.28}
#: "+ balance" is modelled as perfect balancing, measured 20% optimistic (docs/lab.md)
BALANCE_ERROR = 0.20
#: ties inside the decision window go to the simpler paradigm: fewer moving parts first
COMPLEXITY = {'asp': 0, 'bsp': 0, 'ssp': 1, 'dssp': 2}
#: the step overhead assumed for a cluster given as data (--cluster), per iteration: the lab's
#: 4-worker ASP runs measured about 3 ms (docs/lab.md)
CLUSTER_OVERHEAD_S = 0.003
#: compute draws (seeds) per paradigm by default; the advice reports the spread over all of
#: them (min-max), not a median
DEFAULT_SEEDS = 10
WARMUP = 5             # iterations of each worker left out (start-up, first pulls)
MIN_ITERATIONS = 20    # per worker, after the warm-up
TRAIN_RE = re.compile('^%s$' % re.escape(TRAIN_LOG).replace('%d', r'(\d+)'))
STORE_RE = re.compile('^%s$' % re.escape(STORE_METRICS).replace('%d', r'(\d+)'))


class AdviseError(ValueError):
    """The run directory cannot be read or fitted: the message says what is missing."""


@dataclass
class Fit:
    """What a run says about its cluster."""
    source: str               # 'train log' or 'store metrics'
    compute_s: list           # per rank: median compute per iteration (s)
    jitter: float             # median over workers of the relative MAD of their compute
    overhead_s: float         # per iteration, every paradigm
    iterations: list          # per rank: iterations used for the fit
    slow_share: float         # share of iterations over twice their worker's median
    step_samples: list = field(default_factory=list)   # overhead draws (s); [] -> overhead_s
    episodes: Episodes = field(default_factory=Episodes)   # slow episodes fitted
    cluster: Scenario = None  # --cluster: the cluster as given (episodes and all)

    @property
    def workers(self):
        return len(self.compute_s)

    def scenario(self, balanced=False, name='fitted'):
        """The fitted compute as a :class:`Scenario` (without the step overhead), its slow
        episodes included; balanced: every worker's base time W / sum(1 / t_i)."""
        times = list(self.compute_s)
        if balanced:
            times = [len(times) / sum(1.0 / t for t in times)] * len(times)
        base = min(times)
        slow = tuple((r, t / base) for r, t in enumerate(times) if t != base)
        if self.cluster is not None:
            return dataclasses.replace(self.cluster, base_s=base, slow=slow)
        ep = self.episodes
        return Scenario(name, 'fitted from a run', len(times), base, slow=slow,
                        jitter=min(self.jitter, 0.99), episode_rate=ep.rate if ep else 0.0,
                        episode_factor=ep.factor if ep else 1.0,
                        episode_length=tuple(ep.length) if ep else (0, 0))


@dataclass
class Prediction:
    """One paradigm's simulated outcome (over the seeds: median, and min-max)."""
    label: str
    policy: str
    balanced: bool
    throughput: float         # iterations of all workers per second
    throughput_range: tuple
    fast_wait: float          # share of the wall time the fastest workers wait
    mean_lead: float          # lead at release (how far ahead of the slowest), mean
    p95_lead: int
    stale_mean: float = None  # gradient staleness: others' updates between pull and push
    stale_p95: int = None
    error: float = 0.0        # the simulator's measured error for it (MEASURED_ERROR ...)
    rates: tuple = ()         # per seed: iterations/s (all workers)
    stalenesses: tuple = ()   # per seed: mean gradient staleness
    times: tuple = ()         # per seed: predicted seconds to the target (predict's target)
    reached: tuple = ()       # per seed: the simulated run reached it (else extrapolated)
    interval: tuple = None    # (low, high) seconds: the seeds' spread widened by the error

    @property
    def time_s(self):
        """The median over the seeds of the predicted time to the target (None before
        :func:`with_times`)."""
        return statistics.median(self.times) if self.times else None

    @property
    def arm(self):
        return ARM_OF.get(self.label)

    @property
    def charged(self):
        """The throughput charged its measured error (read as that much slower)."""
        return self.throughput * (1.0 - self.error)


class _WithSteps:
    """What the simulator draws for a fitted cluster: each iteration a compute draw of the
    fitted scenario plus a step time drawn from the run's samples (seeded per worker)."""

    jitter = 0.0

    def __init__(self, fit, balanced=False):
        self.compute = fit.scenario(balanced=balanced)
        self.name = self.compute.name
        self.workers = self.compute.workers
        self.steps = list(fit.step_samples) or [fit.overhead_s]
        # a cluster given with links (--cluster link-4): the simulator adds each worker's
        # link time to its iterations, on top of the step overhead
        self.link_times = self.compute.link_times

    def times(self):
        overhead = statistics.median(self.steps)
        return [t + overhead for t in self.compute.times()]

    def stream(self, rank, seed):
        compute = self.compute.stream(rank, seed)
        rng = random.Random('steps:%s:%d' % (seed, rank))
        steps = self.steps
        return types.SimpleNamespace(next=lambda: compute.next() + rng.choice(steps))


def _mad(values):
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def read_run(run_dir):
    """``(source, {rank: records})`` of `run_dir`'s per-worker metrics."""
    if not os.path.isdir(run_dir):
        raise AdviseError('%s is not a directory' % run_dir)
    names = os.listdir(run_dir)
    for source, pattern in (('train log', TRAIN_RE), ('store metrics', STORE_RE)):
        files = {int(m.group(1)): os.path.join(run_dir, n)
                 for n in names for m in [pattern.match(n)] if m}
        if files:
            return source, {r: read_jsonl(p, AdviseError) for r, p in sorted(files.items())}
    raise AdviseError('%s has no train-worker<rank>.jsonl (mxnet-ssp-train\'s --save-dir) and '
                      'no worker-<rank>.jsonl (MXNET_SSP_METRICS_DIR of a dist_ssp or '
                      'dist_dssp job)' % run_dir)


def _samples(source, records):
    """(compute per iteration, overhead per iteration) samples of one worker."""
    if source == 'train log':
        rows = [r for r in records if 'compute_s' in r and 'step_s' in r][WARMUP:]
        return ([r['compute_s'] + r.get('sleep_s', 0.0) for r in rows],
                [r['step_s'] for r in rows])
    rows = sorted((r for r in records if 'reported_at' in r and 'released_at' in r),
                  key=lambda r: r['clock'])[WARMUP:]
    compute = [b['reported_at'] - b.get('push_s', 0.0) - a['released_at']
               for a, b in zip(rows, rows[1:]) if b['clock'] == a['clock'] + 1]
    return [max(0.0, c) for c in compute], [r.get('push_s', 0.0) for r in rows[1:]]


def fit_run(run_dir):
    """The :class:`Fit` of the run in `run_dir` (see the module's docstring)."""
    source, per_rank = read_run(run_dir)
    ranks = sorted(per_rank)
    if ranks != list(range(len(ranks))) or len(ranks) < 2:
        raise AdviseError('%s: expected the metrics of ranks 0..W-1 with W >= 2, found ranks %s'
                          % (run_dir, ranks))
    compute, steps, counts = [], [], []
    for rank in ranks:
        c, o = _samples(source, per_rank[rank])
        if len(c) < MIN_ITERATIONS or not o:
            raise AdviseError('%s: worker %d has %d usable iterations; the fit needs at least '
                              '%d after the first %d' % (run_dir, rank, len(c), MIN_ITERATIONS,
                                                          WARMUP))
        compute.append(c)
        steps.append(o)
        counts.append(len(c))
    least = min(steps, key=statistics.median)     # the worker that waited least
    if min(statistics.median(c) for c in compute) <= 0:
        raise AdviseError('%s: a worker\'s median compute is 0 s' % run_dir)
    # slow episodes (how often, how long, how slow) and each worker's median outside them
    episodes, medians = fit_episodes(compute)
    jitter = statistics.median(1.4826 * _mad(c) / m for c, m in zip(compute, medians))
    slow = sum(sum(1 for x in c if x > 2 * m) for c, m in zip(compute, medians))
    return Fit(source, medians, jitter, statistics.median(least), counts,
               slow / float(sum(counts)), least, episodes)


def fit_cluster(scenario, overhead_s=CLUSTER_OVERHEAD_S):
    """The :class:`Fit` of a cluster given as data (a
    :class:`~mxnet_ssp.lab.cluster_model.profiles.Scenario`: workers, speeds, jitter, slow
    episodes), with `overhead_s` of push and pull per iteration."""
    ep = Episodes(scenario.episode_rate, scenario.episode_factor, scenario.episode_length,
                  0) if scenario.episode_rate else Episodes()
    return Fit('cluster', scenario.times(), scenario.jitter, overhead_s, [], 0.0, [], ep,
               scenario)


def charged_error(arm):
    """The measured error an arm's prediction is charged (:data:`MEASURED_ERROR`; "+ balance"
    also :data:`BALANCE_ERROR`)."""
    key = arm.family if arm.family != 'dssp' else 'dssp-' + arm.mode
    error = MEASURED_ERROR.get(key, max(MEASURED_ERROR.values()))
    return 1.0 - (1.0 - error) * (1.0 - BALANCE_ERROR) if arm.balance else error


def default_wall_time(fit):
    """The simulated seconds by default: the run's iterations (2,000, or a cluster spec's
    run_iterations) of the slowest worker, its pinned episodes included."""
    sc = _WithSteps(fit)
    cluster = fit.cluster
    n = cluster.run_iterations if cluster is not None else DEFAULT_RUN_ITERATIONS
    pinned = [cluster.pinned_mean(r) if cluster is not None else 1.0
              for r in range(sc.workers)]
    overhead = statistics.median(sc.steps)
    return n * max((t - overhead) * p + overhead + link for t, p, link in
                   zip(sc.times(), pinned, sc.link_times()))


def predict(fit, wall_time=None, seeds=DEFAULT_SEEDS, paradigms=ADVISED, target=None):
    """A :class:`Prediction` per paradigm: the simulator over `wall_time` seconds (default:
    :func:`default_wall_time`) with each seed's compute draws.  With `target`, ``(updates0,
    cost)`` of :mod:`.time_to_target`: each seed's time to the target too
    (:func:`.time_to_target.reached_at`)."""
    if wall_time is None:
        wall_time = default_wall_time(fit)
    out = []
    for label, policy, balanced in paradigms:
        sc = _WithSteps(fit, balanced)
        results, times, reached = [], [], []
        for seed in range(seeds):
            result = simulate(None, policy, wall_time=wall_time, scenario=sc, seed=seed,
                              record=target is not None)
            if target is not None:
                seconds, done = reached_at(result.pushes, target[0], target[1], wall_time)
                times.append(seconds)
                reached.append(done)
                result.pushes = None          # the advice keeps the summary only
            results.append(result)
        rates = [r.iterations_per_second for r in results]
        # balanced without links: every worker's time is the same, so the fast workers are
        # all of them; with links, the workers behind the faster links
        fast = [r.fast_wait_fraction for r in results]
        arm = ARM_OF.get(label)
        stales = [r.mean_staleness for r in results]
        out.append(Prediction(label, policy, balanced, statistics.median(rates),
                              (min(rates), max(rates)), statistics.median(fast),
                              statistics.median(r.mean_lead for r in results),
                              int(statistics.median(r.lead_quantile(0.95) for r in results)),
                              statistics.median(r.mean_staleness for r in results),
                              int(statistics.median(r.staleness_quantile(0.95)
                                                    for r in results)),
                              0.0 if arm is None else charged_error(arm),
                              tuple(rates), tuple(stales), tuple(times), tuple(reached)))
    return out


def _simplicity(p):
    arm = p.arm
    return (COMPLEXITY.get(arm.family, 3), arm.balance) if arm is not None else (3, p.balanced)


def _staleness(p):
    return p.mean_lead if p.stale_mean is None else p.stale_mean


def window(predictions, within=WITHIN):
    """The predictions inside the decision window: charged throughput within `within` of the
    best charged throughput (a difference the simulator's error could make)."""
    best = max(p.charged for p in predictions)
    return [p for p in predictions if p.charged >= (1 - within) * best]


def recommend(predictions, within=WITHIN):
    """Inside the decision window (:func:`window`), the simplest paradigm (ASP/BSP before SSP
    before DSSP, no balancing before balancing: :data:`COMPLEXITY`), then the least stale
    (gradient staleness), then the fastest: the advisor does not know what staleness costs
    the user's model, so it claims no gain its error could erase."""
    return min(window(predictions, within),
               key=lambda p: (_simplicity(p), _staleness(p), -p.charged))


def least_stale(predictions, within=WITHIN):
    """Inside the decision window, the least stale prediction (for a model that staleness
    hurts), or None when it is the recommendation."""
    choice = recommend(predictions, within)
    other = min(window(predictions, within),
                key=lambda p: (_staleness(p), _simplicity(p), -p.charged))
    return None if other is choice else other


def apply_text(arm):
    """How to run `arm`: the store, the settings and the flags (lines)."""
    settings = []
    if arm.family == 'ssp':
        settings.append('MXNET_SSP_STALENESS=%d' % arm.staleness[0])
    elif arm.family == 'dssp':
        settings += ['MXNET_SSP_STALENESS=%d,%d' % arm.staleness,
                     'MXNET_SSP_DSSP_MODE=%s' % arm.mode]
    flags = ' '.join(arm.train_flags())
    lines = ['How to apply it:',
             '- store: kvstore=%r (gluon.Trainer(..., kvstore=%r) after `import mxnet_ssp`, '
             'or mxnet-ssp-train --kvstore %s)' % (arm.kvstore, arm.kvstore, arm.kvstore),
             '- settings: %s' % (' '.join(settings) + ' in the job\'s environment (or its '
                                 'settings file), e.g. `%s mxnet-ssp-launch -n W ...`'
                                 % ' '.join(settings) if settings else 'none'),
             '- mxnet-ssp-train flags: %s' % flags]
    if arm.family == 'bsp':
        lines.append('- BSP: --sync-average applies the mean of the workers\' gradients (keep '
                     'the per-gradient learning rate: W x the single-worker rate)')
    if arm.balance:
        lines.append('- batch balancing needs --balance (mxnet-ssp-train; docs/balance.md); '
                     'its gain is charged %d%% here, the error measured in docs/lab.md'
                     % (100 * BALANCE_ERROR))
    return lines


def _describe_fit(source, fit):
    if fit.cluster is not None:
        head = '%s: %d workers (%s), the cluster as given; step overhead %.1f ms per iteration ' \
               '(assumed; --overhead-ms)' % (source, fit.workers, fit.cluster.summary(),
                                              1e3 * fit.overhead_s)
        return [head]
    return ['%s: %d workers, %s, %s iterations per worker fitted' % (
        source, fit.workers, fit.source, '/'.join(str(n) for n in fit.iterations)),
        'compute per iteration (median outside slow episodes): %s ms; jitter %.0f%%; step '
        'overhead %.1f ms per iteration' % (', '.join('%.1f' % (1e3 * c) for c in fit.compute_s),
                                            100 * fit.jitter, 1e3 * fit.overhead_s),
        fit.episodes.describe() + (' (simulated)' if fit.episodes else '')]


def format_advice(source, fit, predictions, choice):
    best = max(p.charged for p in predictions)
    lines = _describe_fit(source, fit) + [
        '', '| paradigm | iterations/s (all workers) | charged error | charged / best | '
        'fastest workers waiting | lead at release: mean / p95 | gradient staleness: mean / '
        'p95 |', '|---|---:|---:|---:|---:|---:|---:|']
    for p in predictions:
        lines.append('| %s%s | %.1f [%.1f-%.1f] | %.0f%% | %.2f | %.0f%% | %.2f / %d | %s |' % (
            p.label, ' (recommended)' if p is choice else '', p.throughput,
            p.throughput_range[0], p.throughput_range[1], 100 * p.error, p.charged / best,
            100 * p.fast_wait, p.mean_lead, p.p95_lead,
            '-' if p.stale_mean is None else '%.2f / %d' % (p.stale_mean, p.stale_p95)))
    inside = window(predictions)
    other = least_stale(predictions)
    lines += ['', 'Recommended: %s. Inside the decision window (charged throughput within %d%% '
              'of the best, %.1f iterations/s: %s) the simplest paradigm wins (ASP/BSP, then '
              'SSP, then DSSP; no balancing before balancing), then the least stale: a gain '
              'smaller than the simulator\'s error is not claimed.' % (
                  choice.label, 100 * WITHIN, best, ', '.join(p.label for p in inside))]
    if other is not None:
        lines.append('If staleness costs your model accuracy (this cannot be known from '
                     'timings): %s, the least stale inside the window (gradient staleness '
                     '%.2f against %.2f).' % (other.label, _staleness(other), _staleness(choice)))
    lines += [''] + (apply_text(choice.arm) if choice.arm is not None else []) + [
        '', 'Simulated over a fixed wall time with the compute times above (and the slow '
        'episodes, when there are) plus, every iteration, a step time %s. "charged error": '
        'the simulator\'s error measured for that paradigm against the lab (docs/lab.md, '
        '"Advice"), taken off its throughput; "+ balance" models ideal '
        'balancing and is charged %d%% more. Lead at release: how far ahead of the slowest a '
        'worker is released (what SSP bounds); gradient staleness: updates by others between '
        'a gradient\'s pull and its push (what the model sees). What this cannot know: how much '
        'accuracy per update staleness costs your model; slow episodes the run did not show'
        '%s; how the overhead grows with more workers or servers.' % (
            'drawn from those of the worker that waited least' if fit.step_samples else
            'of %.1f ms' % (1e3 * fit.overhead_s), 100 * BALANCE_ERROR,
            ' (%.1f%% of its iterations took over twice their worker\'s median)'
            % (100 * fit.slow_share) if fit.slow_share >= 0.01 else '')]
    return '\n'.join(lines)


# -- time to a target accuracy ---------------------------------------------------------------

def with_times(predictions, cost):
    """Each prediction (from :func:`predict` with a target) with its interval: the spread of
    its times to the target over the seeds (min-max) widened by the calibration's error
    (`cost`, a :class:`.time_to_target.StalenessCost`: measured / predicted between its
    ``error_low`` and ``error_high``); "+ balance", modelled as ideal, is also charged
    :data:`BALANCE_ERROR` on the slow side."""
    out = []
    for p in predictions:
        if not p.times:
            raise ValueError('prediction %s has no time to the target: predict(..., '
                             'target=(updates0, cost))' % p.label)
        high = cost.error_high / ((1.0 - BALANCE_ERROR) if p.balanced else 1.0)
        out.append(dataclasses.replace(p, interval=(min(p.times) * cost.error_low,
                                                    max(p.times) * high)))
    return out


def fastest(predictions):
    """The prediction with the shortest median time to the target."""
    return min(predictions, key=lambda p: p.time_s)


def _overlap(a, b):
    return a.interval[0] <= b.interval[1] and b.interval[0] <= a.interval[1]


def inseparable(predictions):
    """The predictions whose interval overlaps the fastest's (the fastest included): the
    advisor cannot tell them apart, and says so."""
    best = fastest(predictions)
    return [p for p in predictions if _overlap(p, best)]


def recommend_by_time(predictions):
    """Among the arms that cannot be separated from the fastest (:func:`inseparable`), the
    simplest (ASP/BSP, then SSP, then DSSP; no balancing first), then the least stale, then
    the fastest: a difference inside the intervals is not claimed."""
    return min(inseparable(predictions),
               key=lambda p: (_simplicity(p), _staleness(p), p.time_s))


def format_time_advice(source, fit, predictions, choice, cost, updates0=None,
                       staleness_cost=None, wall_time=None):
    """The advice ranked by predicted time to the target (predictions from
    :func:`with_times`), throughput as a column."""
    u0 = cost.updates0 if updates0 is None else updates0
    c = cost.cost if staleness_cost is None else staleness_cost
    seeds = len(predictions[0].times)
    ranked = sorted(predictions, key=lambda p: p.time_s)
    tied = inseparable(predictions)
    lines = _describe_fit(source, fit) + [
        '', '| paradigm | time to target, s: median [interval] | over the %d seeds | '
        'iterations/s (all workers) [seeds] | fastest workers waiting | gradient staleness: '
        'mean / p95 |' % seeds, '|---|---:|---:|---:|---:|---:|']
    for p in ranked:
        lines.append('| %s%s | %.1f [%.1f-%.1f] | %.1f-%.1f | %.1f [%.1f-%.1f] | %.0f%% | %s |'
                     % (p.label, ' (recommended)' if p is choice else '', p.time_s,
                        p.interval[0], p.interval[1], min(p.times), max(p.times),
                        p.throughput, min(p.rates), max(p.rates), 100 * p.fast_wait,
                        '-' if p.stale_mean is None else '%.2f / %d' % (p.stale_mean,
                                                                         p.stale_p95)))
    best = fastest(predictions)
    lines.append('')
    if len(tied) > 1:
        lines.append('Not separated: %s. Their intervals overlap the fastest\'s (%s, %.1f-%.1f '
                     's), so the advisor declines to rank them; among them it recommends the '
                     'simplest (ASP/BSP, then SSP, then DSSP; no balancing first), then the '
                     'least stale: %s.' % (', '.join(p.label for p in tied), best.label,
                                          best.interval[0], best.interval[1], choice.label))
    else:
        lines.append('Recommended: %s, the fastest to the target; no other paradigm\'s '
                     'interval overlaps its %.1f-%.1f s.' % (choice.label, choice.interval[0],
                                                             choice.interval[1]))
    lines += [''] + (apply_text(choice.arm) if choice.arm is not None else []) + [
        '', 'Time to target = gradients to the target / iterations per second, the gradients '
        'growing with staleness: %.0f x (1 + %.3f x mean gradient staleness)%s. The staleness '
        'cost is fitted on the lab\'s runs (docs/lab.md, "Time to target: the calibration"; '
        'target %.3g, %s metric); the interval is the spread over all %d seeds widened by the '
        'calibration\'s error: the measured time was %.2f-%.2f x the predicted one in %.0f%% of '
        'its %d rows (out of sample)%s. The times are the lab\'s task (an MLP on MNIST); for '
        'another model give --updates-to-target (its gradients to the target under BSP) and '
        '--staleness-cost if known. Simulated over %s with the compute above plus a step time '
        '%s.' % (u0, c, '' if updates0 is None and staleness_cost is None else ' (as given)',
                 cost.target, cost.metric, seeds, cost.error_low, cost.error_high,
                 100 * cost.coverage, cost.rows,
                 '; "+ balance" models ideal balancing and is charged %d%% more on the slow '
                 'side' % (100 * BALANCE_ERROR) if any(p.balanced for p in predictions) else '',
                 '%.1f s' % wall_time if wall_time else 'a fixed wall time', 'drawn from those of the worker that waited least'
                 if fit.step_samples else 'of %.1f ms' % (1e3 * fit.overhead_s))]
    if wall_time:
        share = (100 * ranked[0].time_s / wall_time, 100 * ranked[-1].time_s / wall_time)
        lines.append('The target falls at %.0f-%.0f%% of the simulated run (the fastest and '
                     'the slowest paradigm)%s.' % (share + (
                         ': slow episodes later in the run do not delay it'
                         if share[1] < 100 else '',)))
    beyond = [p.label for p in predictions
              if p.stale_mean is not None and p.stale_mean > cost.staleness_max]
    if beyond and staleness_cost is None:
        lines.append('Extrapolated: the lab measured the cost of a mean gradient staleness up to '
                     '%.1f; %s go beyond it.' % (cost.staleness_max, ', '.join(beyond)))
    short = [p.label for p in predictions if not all(p.reached)]
    if short:
        lines.append('Not reached within the simulated run, extrapolated at its mean pace: '
                     '%s (give a longer --wall-time).' % ', '.join(short))
    return '\n'.join(lines)


# -- the simulator's error, out of sample ----------------------------------------------------

def _finish_times(run_dir):
    """Each worker's finish time (s) in a finished lab run, counted from the start of the first
    iteration of any worker, from the train logs; and the iterations per worker."""
    _, per_rank = read_run(run_dir)
    rows = [per_rank[r] for r in sorted(per_rank)]
    first = min(r[0]['time'] - r[0].get('compute_s', 0) - r[0].get('sleep_s', 0)
                - r[0].get('step_s', 0) for r in rows)
    return [r[-1]['time'] - first for r in rows], min(len(r) for r in rows)


def predicted_finish_times(fit, policy, iterations, seed, balanced=False):
    """Each worker's simulated finish time with `iterations` iterations each: its compute
    draws (the stream the simulator used) plus the time it waited."""
    sc = _WithSteps(fit, balanced)
    result = simulate(None, policy, iterations=iterations, scenario=sc, seed=seed)
    finish = []
    for rank in range(sc.workers):
        stream = sc.stream(rank, seed)
        finish.append(sum(stream.next() for _ in range(iterations)) + result.wait[rank])
    return finish


def _arm_policy(arm):
    """(simulator policy, balanced) of a lab arm's directory name (:func:`.arms.parse_arm`);
    None for names that are no arm and for arms that are not a timing of their own
    (asp-lrtau: ASP's timing, another update rule)."""
    try:
        parsed = parse_arm(arm)
    except ValueError:
        return None
    if parsed.rule is not None:
        return None
    return sim_policy(parsed), parsed.balance


def check_lab(scenario_dir, seeds=3):
    """Fit on the ASP runs of a lab scenario's directory (``<out>/<scenario>`` of
    ``mxnet-ssp-reproduce --preset emulated``) and predict when each worker of every run
    finished (the lab runs a fixed number of iterations per worker).  Returns rows of
    (arm, trial, measured finish times, predicted finish times), one time per worker."""
    runs = os.path.join(scenario_dir, 'runs')
    asp = os.path.join(runs, 'asp')
    if not os.path.isdir(asp):
        raise AdviseError('%s has no runs/asp: run the lab\'s asp paradigm first' % scenario_dir)
    fits = [fit_run(os.path.join(asp, t)) for t in sorted(os.listdir(asp))]
    if not fits:
        raise AdviseError('%s has no ASP trial' % asp)
    fit = Fit('train log', [statistics.median(f.compute_s[r] for f in fits)
                            for r in range(fits[0].workers)],
              statistics.median(f.jitter for f in fits),
              statistics.median(f.overhead_s for f in fits), fits[0].iterations, 0.0,
              [x for f in fits for x in f.step_samples])
    rows = []
    for arm in sorted(os.listdir(runs)):
        found = _arm_policy(arm)
        if found is None:
            continue
        policy, balanced = found
        for trial in sorted(os.listdir(os.path.join(runs, arm))):
            try:
                measured, iterations = _finish_times(os.path.join(runs, arm, trial))
            except (AdviseError, IndexError, KeyError):
                continue                  # a run that did not finish
            per_seed = [predicted_finish_times(fit, policy, iterations, s, balanced)
                        for s in range(seeds)]
            predicted = [statistics.median(p[r] for p in per_seed)
                         for r in range(len(measured))]
            rows.append((arm, trial, measured, predicted))
    return rows


def format_check(scenario_dir, rows):
    lines = ['%s: fitted on runs/asp only; when each worker finished, predicted' % scenario_dir,
             '', '| paradigm | trial | finish s per worker, measured | predicted | error per '
             'worker |', '|---|---|---|---|---|']
    errors = []
    for arm, trial, measured, predicted in rows:
        err = [p / m - 1.0 for m, p in zip(measured, predicted)]
        if arm != 'asp':
            errors += [abs(e) for e in err]
        lines.append('| %s | %s | %s | %s | %s |' % (
            arm, trial, ', '.join('%.1f' % m for m in measured),
            ', '.join('%.1f' % p for p in predicted),
            ', '.join('%+.1f%%' % (100 * e) for e in err)))
    if errors:
        lines += ['', 'paradigms other than ASP: median |error| %.1f%%, max %.1f%% (%d worker '
                  'finish times)' % (100 * statistics.median(errors), 100 * max(errors),
                                     len(errors))]
    return '\n'.join(lines)


def _parser():
    p = argparse.ArgumentParser(
        prog=prog_name('mxnet-ssp-advise', 'mxnet_ssp.lab.cluster_model.advise'),
        description='Which paradigm for this cluster: from a real run\'s metrics (RUN_DIR) or '
                    'a description of the cluster (--cluster), simulate every paradigm over '
                    'the same wall time, charge each its measured error, and recommend the '
                    'simplest inside the decision window (docs/lab.md, "Advice").')
    add_version(p)
    p.add_argument('run_dir', metavar='RUN_DIR', nargs='?',
                   help="a job's mxnet-ssp-train --save-dir (train-worker<rank>.jsonl), or the "
                        'MXNET_SSP_METRICS_DIR of a dist_ssp/dist_dssp job (worker-<rank>.jsonl)')
    p.add_argument('--cluster', metavar='SPEC|FILE',
                   help='instead of RUN_DIR: the cluster as data, as the lab reads it: a '
                        'scenario name, a spec such as "workers=3,base_ms=50,factors=1:1:2,'
                        'jitter=5%%,episode_rate=0.01,episode_factor=5,episode_length=5-15", or '
                        'a .json/.toml file of the same keys (docs/lab.md, "Your own cluster")')
    p.add_argument('--overhead-ms', type=float, default=None,
                   help='with --cluster: push and pull per iteration (default %g ms)'
                        % (1e3 * CLUSTER_OVERHEAD_S))
    p.add_argument('--wall-time', type=float, default=None,
                   help='simulated seconds (default: 2,000 iterations of the slowest worker)')
    p.add_argument('--seeds', type=int, default=DEFAULT_SEEDS,
                   help='compute draws per paradigm; the advice reports the spread over all '
                        'of them (default %d)' % DEFAULT_SEEDS)
    p.add_argument('--updates-to-target', type=float, default=None, metavar='N',
                   help='gradients (all workers) your model needs to the target accuracy '
                        'under BSP (default: the lab\'s task, docs/lab.md)')
    p.add_argument('--staleness-cost', type=float, default=None, metavar='C',
                   help='extra share of gradients to the target per unit of mean gradient '
                        'staleness (default: fitted on the lab\'s runs)')
    p.add_argument('--by-throughput', action='store_true',
                   help='rank by throughput charged its measured error instead of by time to '
                        'the target (the advisor before the staleness cost was fitted)')
    p.add_argument('--check-lab', action='store_true',
                   help='RUN_DIR is a lab scenario directory (<out>/<scenario> of '
                        'mxnet-ssp-reproduce --preset emulated): fit on its ASP runs and '
                        'report how far the predicted duration of every other run is')
    return p


def main(argv=None):
    p = _parser()
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error('--seeds %r is not valid: expected an integer >= 1' % args.seeds)
    if args.wall_time is not None and not (math.isfinite(args.wall_time) and args.wall_time > 0):
        p.error('--wall-time %r is not valid: expected seconds > 0' % args.wall_time)
    if args.updates_to_target is not None and not (math.isfinite(args.updates_to_target)
                                                   and args.updates_to_target > 0):
        p.error('--updates-to-target %r is not valid: expected a number of gradients > 0'
                % args.updates_to_target)
    if args.staleness_cost is not None and not (math.isfinite(args.staleness_cost)
                                                and -0.9 <= args.staleness_cost <= 100):
        p.error('--staleness-cost %r is not valid: expected a number in [-0.9, 100]'
                % args.staleness_cost)
    if (args.run_dir is None) == (args.cluster is None):
        p.error('give RUN_DIR (a run\'s metrics) or --cluster SPEC|FILE (the cluster as data), '
                'one of them')
    if args.overhead_ms is not None and (args.cluster is None or not (
            math.isfinite(args.overhead_ms) and 0 <= args.overhead_ms <= 60000)):
        p.error('--overhead-ms %r is not valid: expected milliseconds in [0, 60000], with '
                '--cluster' % args.overhead_ms)
    try:
        if args.check_lab:
            if args.run_dir is None:
                p.error('--check-lab reads a lab scenario directory: give it as RUN_DIR')
            print(format_check(args.run_dir, check_lab(args.run_dir, args.seeds)))
            return 0
        if args.cluster is not None:
            try:
                scenario = get_scenario(args.cluster)
            except ValueError as err:
                p.error('--cluster: %s' % err)
            fit = fit_cluster(scenario, CLUSTER_OVERHEAD_S if args.overhead_ms is None
                              else args.overhead_ms / 1e3)
            source = 'cluster %s' % scenario.name
        else:
            fit = fit_run(args.run_dir)
            source = args.run_dir
        if args.by_throughput:
            predictions = predict(fit, args.wall_time, args.seeds)
            print(format_advice(source, fit, predictions, recommend(predictions)))
            return 0
        cost = load_cost()
        wall_time = default_wall_time(fit) if args.wall_time is None else args.wall_time
        target = (cost.updates0 if args.updates_to_target is None else args.updates_to_target,
                  cost.cost if args.staleness_cost is None else args.staleness_cost)
        predictions = predict(fit, wall_time, args.seeds, target=target)
    except (AdviseError, CostFileError) as err:
        sys.stderr.write('mxnet-ssp-advise: error: %s\n' % err)
        return 2
    timed = with_times(predictions, cost)
    print(format_time_advice(source, fit, timed, recommend_by_time(timed), cost,
                             args.updates_to_target, args.staleness_cost, wall_time))
    return 0


if __name__ == '__main__':
    sys.exit(main())
