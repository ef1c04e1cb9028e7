"""Discrete-event simulation of workers under ASP, SSP and DSSP (no MXNet).

Each of ``M`` workers loops: compute one iteration (its own, possibly
jittered, compute time), push, then wait for the release of
:class:`mxnet_ssp.core.sync.SyncPolicy` before starting the next iteration.  The
policy sees every push at the time it completes, exactly like the network
controller does; a release reaches the worker ``latency`` seconds after the
event that produced it.  Under ASP there is no controller: a worker starts its
next iteration as soon as it has pushed.

The model is deliberately small: compute time includes the push and pull of
an iteration (a scenario with links adds each worker's link time to every iteration of
it: the step's bytes up and down at the link's payload rate), servers are infinitely fast and never the bottleneck, and the
only idle time of a worker is the time between its push and its release
(plus the control latency).  It is meant to compare the synchronization rules,
not to predict the wall time of a real job.

Run ``python -m mxnet_ssp.lab.cluster_model.simulate --help``; with no arguments it prints a
markdown table for 4 workers, one 2.5x slower, over 300 simulated seconds.
"""
import argparse
import heapq
import itertools
import random
import sys
from collections import Counter
from dataclasses import dataclass, field

from ...core.names import BOUNDED, DSSP_MODES, DSSP_STALENESS
from ...core.sync import SyncPolicy
from .profiles import LAB_STEP_BYTES, SCENARIOS, SPEC_EXAMPLE, get_scenario

__all__ = ['SimResult', 'simulate', 'make_policy', 'format_table', 'main',
           'DEFAULT_TIMES', 'DEFAULT_POLICIES']

#: Per-iteration compute times (seconds) of the default scenario.
DEFAULT_TIMES = (1.0, 1.0, 1.0, 2.5)
#: Policies compared by :func:`main` when none are given.
DEFAULT_POLICIES = ('asp', 'ssp:3', 'ssp:15') + tuple(
    'dssp:%d:%d:%s' % (DSSP_STALENESS + (mode,)) for mode in DSSP_MODES)


@dataclass
class SimResult:
    """Outcome of one simulated run.

    Attributes
    ----------
    label : str
        Name of the policy (``'asp'``, ``'ssp:3'``, ``'dssp:3:15:bounded'``...).
    times : list of float
        Base per-iteration compute time of each worker.
    iterations : list of int
        Pushes completed by each worker.
    wait : list of float
        Seconds each worker spent idle between a push and the start of its
        next iteration: time held by the policy plus the control latency.
        Always 0 under ASP.
    wall_time : float
        Simulated seconds: the requested wall time, or the time of the last
        push when running a fixed number of iterations.
    max_lead : int
        Largest lead ``clock - t_slowest`` at a release (under ASP: at a push,
        since every push is released at once).
    lead_hist : collections.Counter
        The lead at release: number of releases at each lead (how far the released worker
        is ahead of the slowest; what SSP bounds).
    finish : list of float
        When each worker pushed its last iteration (its own span; the wall time for a worker
        still running at a wall-time limit).
    stale_hist : collections.Counter
        The gradients' staleness: number of gradients at each count of other workers'
        updates applied between the worker's pull and its push (BSP, ``ssp:0``, sums a
        round's gradients before applying them: 0).
    pushes : list of (float, int) or None
        With ``record=True``: every gradient's push time and staleness, in time order.
    """
    label: str
    times: list
    iterations: list
    wait: list
    wall_time: float
    max_lead: int
    lead_hist: Counter = field(default_factory=Counter)
    finish: list = None
    stale_hist: Counter = field(default_factory=Counter)
    pushes: list = None

    @property
    def total_iterations(self):
        """Pushes of all workers together."""
        return sum(self.iterations)

    @property
    def iterations_per_second(self):
        """Iterations per simulated second of all workers, each over its own span (its
        iterations up to its last push): with a fixed number of iterations per worker, ASP's
        fast workers finish early and count at their own pace, where BSP holds them to the
        slowest's.  (Over the job's span instead, every policy would read the same: the
        slowest worker's iterations set the end.)"""
        if not self.finish:
            return self.total_iterations / self.wall_time if self.wall_time > 0 else 0.0
        return sum(n / t for n, t in zip(self.iterations, self.finish) if t > 0)

    @property
    def mean_staleness(self):
        """Mean gradient staleness (0.0 without gradients)."""
        n = sum(self.stale_hist.values())
        return sum(k * v for k, v in self.stale_hist.items()) / n if n else 0.0

    def staleness_quantile(self, q):
        """Smallest gradient staleness such that a fraction >= `q` of gradients had at most
        that."""
        return _quantile(self.stale_hist, q)

    @property
    def mean_lead(self):
        """Mean lead at release (0.0 if there was no release)."""
        n = sum(self.lead_hist.values())
        return sum(k * v for k, v in self.lead_hist.items()) / n if n else 0.0

    def lead_quantile(self, q):
        """Smallest lead such that a fraction >= `q` of releases had at most that lead."""
        return _quantile(self.lead_hist, q)

    def wait_fraction(self, rank):
        """Fraction of the wall time worker `rank` spent waiting."""
        return self.wait[rank] / self.wall_time if self.wall_time > 0 else 0.0

    def fast_workers(self):
        """Ranks whose base compute time is the smallest."""
        fastest = min(self.times)
        return [i for i, t in enumerate(self.times) if t == fastest]

    @property
    def fast_wait_fraction(self):
        """Mean :meth:`wait_fraction` over :meth:`fast_workers`."""
        fast = self.fast_workers()
        return sum(self.wait_fraction(i) for i in fast) / len(fast)


def _quantile(hist, q):
    n = sum(hist.values())
    if not n:
        return 0
    seen = 0
    for value in sorted(hist):
        seen += hist[value]
        if seen >= q * n:
            return value
    return max(hist)


def make_policy(spec, num_workers, stall_factor=2.0):
    """Build a :class:`~mxnet_ssp.core.sync.SyncPolicy` from a short spec string.

    Parameters
    ----------
    spec : str
        ``'asp'`` (no policy), ``'ssp:S'``, or ``'dssp:SL:SU'`` optionally
        followed by ``':bounded'`` (default), ``':paper'`` or ``':threshold'``.
    num_workers : int
    stall_factor : float
        Passed to :class:`~mxnet_ssp.core.sync.SyncPolicy`.

    Returns
    -------
    SyncPolicy or None
        None for ``'asp'``.

    Raises
    ------
    ValueError
        If the spec cannot be parsed or the policy rejects its values.
    """
    parts = spec.strip().lower().split(':')
    try:
        if parts == ['asp']:
            return None
        if parts[0] == 'ssp' and len(parts) == 2:
            s = int(parts[1])
            return SyncPolicy(num_workers, s, s, stall_factor=stall_factor)
        if parts[0] == 'dssp' and len(parts) in (3, 4):
            mode = parts[3] if len(parts) == 4 else BOUNDED
            return SyncPolicy(num_workers, int(parts[1]), int(parts[2]), mode=mode,
                              stall_factor=stall_factor)
    except ValueError as exc:
        raise ValueError('bad policy %r: %s' % (spec, exc)) from None
    raise ValueError("bad policy %r: expected 'asp', 'ssp:S' or 'dssp:SL:SU[:%s]'"
                     % (spec, '|'.join(DSSP_MODES)))


def _label(policy):
    if policy is None:
        return 'asp'
    if policy.s_lower == policy.s_upper:
        return 'ssp:%d' % policy.s_lower
    return 'dssp:%d:%d:%s' % (policy.s_lower, policy.s_upper, policy.mode)


def _setup(times, policy, wall_time, iterations, latency, jitter, seed, stall_factor,
           scenario=None, step_bytes=LAB_STEP_BYTES):
    """Check :func:`simulate`'s arguments; return (times, policy, compute_time(i))."""
    links = None
    if scenario is not None:
        if isinstance(scenario, str):
            scenario = get_scenario(scenario)
        if times is not None and [float(t) for t in times] != scenario.times():
            raise ValueError('give times or a scenario, not both (scenario %s has times %r)'
                             % (scenario.name, scenario.times()))
        if jitter:
            raise ValueError('scenario %s has its own jitter (%g); jitter must be 0'
                             % (scenario.name, scenario.jitter))
        times = scenario.times()
        # a scenario's links: every iteration of a worker also moves the step's bytes
        links = getattr(scenario, 'link_times', None)
        links = links(step_bytes) if links is not None else [0.0] * len(times)
        times = [t + link for t, link in zip(times, links)]
    times = [float(t) for t in times]
    m = len(times)
    if m < 1 or any(not t > 0 for t in times):
        raise ValueError('times must be a non-empty list of positive numbers, got %r' % (times,))
    if (wall_time is None) == (iterations is None):
        raise ValueError('give exactly one of wall_time and iterations')
    if wall_time is not None and not wall_time > 0:
        raise ValueError('wall_time must be > 0, got %r' % (wall_time,))
    if iterations is not None and (int(iterations) != iterations or iterations < 1):
        raise ValueError('iterations must be a positive integer, got %r' % (iterations,))
    if latency < 0 or jitter < 0:
        raise ValueError('latency and jitter must be >= 0')
    if isinstance(policy, str):
        policy = make_policy(policy, m, stall_factor=stall_factor)
    if policy is not None:
        if policy.num_workers != m:
            raise ValueError('policy is for %d workers, times has %d' % (policy.num_workers, m))
        if any(policy.clocks) or policy.waiting or len(policy.active) != m:
            raise ValueError('policy must be fresh (no push or leave yet)')
    if scenario is not None:
        streams = [scenario.stream(i, seed) for i in range(m)]
        return times, policy, lambda i: streams[i].next() + links[i]
    rngs = [random.Random('%s:%d' % (seed, i)) for i in range(m)]

    def compute_time(i):
        if not jitter:
            return times[i]
        return times[i] * max(0.05, 1.0 + jitter * rngs[i].gauss(0.0, 1.0))

    return times, policy, compute_time


def simulate(times, policy=None, wall_time=None, iterations=None, latency=0.0, jitter=0.0,
             seed=0, stall_factor=2.0, scenario=None, step_bytes=LAB_STEP_BYTES,
             record=False):
    """Run workers under a synchronization policy until a time or iteration limit.

    Parameters
    ----------
    times : sequence of float
        Base compute time (seconds, > 0) of one iteration for each worker.
    policy : SyncPolicy, str or None
        A fresh policy for ``len(times)`` workers, a spec for
        :func:`make_policy`, or None / ``'asp'`` for no synchronization.
    wall_time : float, optional
        Stop at this simulated time; pushes completed at or before it count.
    iterations : int, optional
        Instead of `wall_time`: every worker runs this many iterations and then
        leaves the job (``SyncPolicy.on_leave``).  Exactly one of the two
        limits must be given.
    latency : float
        Seconds from the event that releases a worker to the start of its next
        iteration (the OK message).  Not applied under ASP.
    jitter : float
        Relative standard deviation of compute times: iteration ``k`` of
        worker ``i`` takes ``times[i] * max(0.05, 1 + jitter * N(0, 1))``.
    seed : int
        Seed of the jitter; each worker has its own stream, so every policy
        sees the same sequence of compute times for the same seed.
    stall_factor : float
        Used when `policy` is a spec string.
    scenario : mxnet_ssp.lab.cluster_model.profiles.Scenario or str, optional
        Draw the compute times from this emulated cluster instead (`times`
        None or the scenario's base times, `jitter` 0): worker ``i`` gets the
        sequence of ``scenario.stream(i, seed)``, the one the training
        script's ``--emulate`` sleeps to with ``--seed seed``.  A scenario with
        links adds each worker's link time (``scenario.link_times(step_bytes)``) to every
        iteration of that worker, and to its base time in the result's ``times``.
    step_bytes : int
        With a scenario with links: the bytes a worker sends up (and receives down) per
        step; default the lab's task (:data:`~.profiles.LAB_STEP_BYTES`).
    record : bool
        Keep every gradient's (push time, staleness) in the result's ``pushes``.

    Returns
    -------
    SimResult

    Raises
    ------
    ValueError
        On invalid arguments.
    """
    times, policy, compute_time = _setup(times, policy, wall_time, iterations, latency,
                                         jitter, seed, stall_factor, scenario, step_bytes)
    label = _label(policy)
    # BSP (ssp:0) sums a round's gradients before applying them: their staleness is 0
    run = _Run(len(times), compute_time, policy, iterations, latency,
               aggregated=label == 'ssp:0')
    run.pushes = [] if record else None
    run.until(float('inf') if wall_time is None else float(wall_time))
    return run.result(label, times, wall_time)


class _Run:
    """The event loop of :func:`simulate`: each worker computes, pushes, and is resumed.

    Events are ``(time, seq, kind, rank)`` on a heap, `kind` ``'push'`` (an iteration ends)
    or ``'resume'`` (a release reaches a held worker); ties at one time go in scheduling
    order (`seq`).
    """

    def __init__(self, m, compute_time, policy, iterations, latency, aggregated=False):
        self.compute_time, self.policy = compute_time, policy
        self.aggregated = aggregated
        self.stale_hist = Counter()
        self.pushes = None                # (time, staleness) of every push, when recorded
        self.pulled = [0] * m             # updates applied when each worker last pulled
        self.applied = 0
        self.finish = [None] * m
        self.iterations, self.latency = iterations, latency
        self.clocks = [0] * m
        self.active = set(range(m))
        self.wait = [0.0] * m
        self.idle_since = [None] * m      # push time of a worker that is not computing
        self.lead_hist = Counter()
        self.max_lead = 0
        self.last_push = 0.0
        self.heap = []
        self.seq = itertools.count()
        # ASP's lead needs the slowest active clock at every push: kept incrementally (active
        # workers per clock, and the smallest clock with any, which never decreases), O(1)
        # amortized instead of a scan of every worker per push
        self.at_clock = Counter({0: m})
        self.slowest = 0
        for i in range(m):
            self.start(i, 0.0)

    def start(self, i, now):
        """Worker `i` starts an iteration at `now` (its wait, if any, ends)."""
        if self.idle_since[i] is not None:
            self.wait[i] += now - self.idle_since[i]
            self.idle_since[i] = None
        self.pulled[i] = self.applied
        heapq.heappush(self.heap, (now + self.compute_time(i), next(self.seq), 'push', i))

    def until(self, end):
        """Run the events at or before `end`."""
        heap = self.heap
        while heap and heap[0][0] <= end:
            now, _, kind, i = heapq.heappop(heap)
            if kind == 'resume':
                self.start(i, now)
                continue
            self.clocks[i] += 1
            self.last_push = self.finish[i] = now
            self.idle_since[i] = now
            stale = 0 if self.aggregated else self.applied - self.pulled[i]
            self.stale_hist[stale] += 1
            if self.pushes is not None:
                self.pushes.append((now, stale))
            self.applied += 1
            finished = self.iterations is not None and self.clocks[i] >= self.iterations
            if self.policy is None:
                self._asp_push(i, now, finished)
            else:
                self._push(i, now, finished)

    def _asp_push(self, i, now, finished):
        """No controller: the push is released at once, at its lead over the slowest."""
        c = self.clocks[i]
        at_clock = self.at_clock
        at_clock[c - 1] -= 1
        at_clock[c] += 1
        while at_clock[self.slowest] == 0:    # stops at c at the latest: i is active
            self.slowest += 1
        lead = c - self.slowest
        self.lead_hist[lead] += 1
        self.max_lead = max(self.max_lead, lead)
        if finished:                          # the next push moves `slowest` on
            self.active.discard(i)
            at_clock[c] -= 1
        else:
            self.start(i, now)

    def _push(self, i, now, finished):
        """The policy sees the push (and the leave of a finished worker); each release
        reaches its worker `latency` seconds later."""
        policy = self.policy
        releases = policy.on_push(i, now)
        if finished:
            self.active.discard(i)
            releases = releases + policy.on_leave(i)
        for rel in releases:
            self.lead_hist[rel.lead] += 1
            if rel.rank in self.active:
                heapq.heappush(self.heap, (now + self.latency, next(self.seq), 'resume',
                                           rel.rank))
        self.max_lead = policy.max_lead

    def result(self, label, times, wall_time):
        """The :class:`SimResult` of the finished loop (the waits still open end at the
        limit)."""
        wait = self.wait
        if wall_time is None:
            wall = self.last_push
        else:
            wall = float(wall_time)
            for i in range(len(times)):      # still held (or the OK in flight) at the end
                if self.idle_since[i] is not None and i in self.active:
                    wait[i] += wall - self.idle_since[i]
        finish = [wall_time if wall_time is not None and i in self.active else (t or 0.0)
                  for i, t in enumerate(self.finish)]
        return SimResult(label=label, times=times, iterations=self.clocks, wait=wait,
                         wall_time=wall, max_lead=self.max_lead, lead_hist=self.lead_hist,
                         finish=finish, stale_hist=self.stale_hist, pushes=self.pushes)


def format_table(results):
    """A markdown table comparing :class:`SimResult` objects.

    Columns: iterations of the fastest / slowest worker (most / fewest
    pushes), total iterations per second (each worker over its own span), max lead, the lead
    at release (mean; what SSP bounds), the gradients' staleness (mean and 95th percentile:
    other workers' updates between a gradient's pull and its push) and the mean fraction of
    time the workers with the smallest base compute time spent waiting.

    Parameters
    ----------
    results : list of SimResult

    Returns
    -------
    str
    """
    lines = ['| policy | iters fastest / slowest | total it/s | max lead | mean lead at release '
             '| gradient staleness mean / p95 | fast workers waiting |',
             '|---|---:|---:|---:|---:|---:|---:|']
    for r in results:
        lines.append('| %s | %d / %d | %.3f | %d | %.2f | %.2f / %d | %.1f %% |' % (
            r.label, max(r.iterations), min(r.iterations), r.iterations_per_second,
            r.max_lead, r.mean_lead, r.mean_staleness, r.staleness_quantile(0.95),
            100.0 * r.fast_wait_fraction))
    return '\n'.join(lines)


def _parse_times(text):
    try:
        return [float(x) for x in text.split(',') if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError('expected comma-separated seconds, got %r' % text)


def _parse_scenario(value):
    try:
        return get_scenario(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _print_header(args, times):
    """The lines above :func:`main`'s table: the cluster, its links, the limits."""
    limit_text = ('%g s' % args.wall_time if args.wall_time is not None
                  else '%d iterations per worker' % args.iterations)
    if args.scenario:
        print('scenario %s: %s; latency %g s, %s, seed %d\n' % (
            args.scenario.name, args.scenario.summary(), args.latency, limit_text, args.seed))
        if args.scenario.links:
            print('link time per iteration (%d bytes up and down at the payload rate): %s ms\n'
                  % (args.step_bytes, ', '.join('%.1f' % (1e3 * t) for t in
                                                args.scenario.link_times(args.step_bytes))))
    else:
        print('%d workers, compute times %s s, jitter %g, latency %g s, %s, seed %d\n' % (
            len(times), ', '.join('%g' % t for t in times), args.jitter, args.latency,
            limit_text, args.seed))


def main(argv=None):
    """Command line: simulate several policies and print a markdown table.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status.
    """
    parser = argparse.ArgumentParser(
        prog='python -m mxnet_ssp.lab.cluster_model.simulate',
        description='Discrete-event simulation of ASP / SSP / DSSP workers (no MXNet).')
    parser.add_argument('--times', type=_parse_times, default=None,
                        help='per-iteration compute time of each worker, comma-separated '
                             '(default: %s)' % ','.join('%g' % t for t in DEFAULT_TIMES))
    parser.add_argument('--scenario', type=_parse_scenario, default=None,
                        help="an emulated cluster instead of --times (the compute times "
                             "train_cifar.py's --emulate sleeps to): %s, a spec such as %s, or "
                             "a .json/.toml file of the same keys (docs/lab.md)"
                             % (', '.join(SCENARIOS), SPEC_EXAMPLE.replace('%', '%%')))
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument('--wall-time', type=float, default=None,
                       help='simulated seconds (default: 300 unless --iterations)')
    limit.add_argument('--iterations', type=int, default=None,
                       help='run every worker for this many iterations instead')
    parser.add_argument('--latency', type=float, default=0.0,
                        help='push->release control latency in seconds (default: 0)')
    parser.add_argument('--jitter', type=float, default=0.0,
                        help='relative std-dev of compute times (default: 0)')
    parser.add_argument('--seed', type=int, default=0, help='jitter seed (default: 0)')
    parser.add_argument('--stall-factor', type=float, default=2.0,
                        help='SyncPolicy stall_factor (default: 2.0)')
    parser.add_argument('--step-bytes', type=int, default=LAB_STEP_BYTES,
                        help="with a scenario's links: bytes a worker sends up (and receives "
                             "down) per step (default: %d, the lab's MLP)" % LAB_STEP_BYTES)
    parser.add_argument('--hist', action='store_true',
                        help='also print quantiles of the lead at release')
    parser.add_argument('policies', nargs='*', default=list(DEFAULT_POLICIES),
                        help="'asp', 'ssp:S', 'dssp:SL:SU[:%s]' "
                             '(default: %s)' % ('|'.join(DSSP_MODES), ' '.join(DEFAULT_POLICIES)))
    args = parser.parse_args(argv)
    if args.wall_time is None and args.iterations is None:
        args.wall_time = 300.0
    if args.scenario and args.times is not None:
        parser.error('--times and --scenario are exclusive: give one of them')
    times = list(DEFAULT_TIMES) if args.times is None and not args.scenario else args.times
    results = []
    try:
        for spec in args.policies:
            results.append(simulate(times, spec, wall_time=args.wall_time,
                                    iterations=args.iterations, latency=args.latency,
                                    jitter=args.jitter, seed=args.seed,
                                    stall_factor=args.stall_factor, scenario=args.scenario,
                                    step_bytes=args.step_bytes))
    except ValueError as exc:
        parser.error(str(exc))
    _print_header(args, times)
    print(format_table(results))
    if args.hist:
        print()
        print('| policy | releases | lead p50 | lead p90 | lead p99 | max |')
        print('|---|---:|---:|---:|---:|---:|')
        for r in results:
            print('| %s | %d | %d | %d | %d | %d |' % (
                r.label, sum(r.lead_hist.values()), r.lead_quantile(0.5),
                r.lead_quantile(0.9), r.lead_quantile(0.99), r.max_lead))
    return 0


if __name__ == '__main__':
    sys.exit(main())
