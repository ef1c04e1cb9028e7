"""Slow episodes from a run's compute times: how often, how long and how slow.

A worker of a shared cluster is sometimes slow for a while (another job on its machine), then
normal again.  Medians do not see that; the simulator does, when a
:class:`~mxnet_ssp.lab.cluster_model.profiles.Scenario` has ``episode_rate``, ``episode_factor``
and ``episode_length``.  :func:`fit_episodes` reads them from each worker's compute times:

* an iteration is **slow** when it took more than :data:`SLOW` times its worker's median;
* an **episode** is a run of consecutive slow iterations (one slow iteration alone is jitter
  unless it is at least :data:`SLOW` x and part of a run of :data:`MIN_LENGTH` or more);
* **rate**: episodes started per iteration outside an episode (all workers pooled);
* **length**: the 10th and 90th percentiles of the episodes' lengths (iterations);
* **factor**: the median over the episodes' iterations of compute / the worker's median.

Pure functions of lists of numbers; no I/O.
"""
import statistics

__all__ = ['Episodes', 'fit_episodes', 'SLOW', 'MIN_LENGTH', 'MIN_EPISODES']

SLOW = 2.0           # an iteration over twice its worker's median is slow
MIN_LENGTH = 2       # consecutive slow iterations that make an episode
MIN_EPISODES = 2     # fewer episodes in the whole run: none fitted (not enough to say)


class Episodes:
    """Fitted episodes: ``rate`` (per iteration), ``factor``, ``length`` (low, high) and
    ``count`` (episodes seen); ``rate`` 0 when none were fitted."""

    __slots__ = ('rate', 'factor', 'length', 'count')

    def __init__(self, rate=0.0, factor=1.0, length=(0, 0), count=0):
        self.rate, self.factor, self.length, self.count = rate, factor, length, count

    def __bool__(self):
        return self.rate > 0

    def describe(self):
        if not self:
            return 'no slow episodes (runs of %d+ iterations over %gx their worker\'s median)' % (
                MIN_LENGTH, SLOW)
        return ('slow episodes: %d seen, x%.1f for %d-%d iterations, started with probability '
                '%.3f per iteration' % (self.count, self.factor, self.length[0], self.length[1],
                                        self.rate))


def _percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))]


def fit_episodes(per_worker):
    """:class:`Episodes` of `per_worker` (a list, one per worker, of compute seconds per
    iteration in order).  Also returns each worker's median over its normal iterations."""
    lengths, factors, normal = [], [], 0
    medians = []
    for times in per_worker:
        median = statistics.median(times)
        # the iterations inside episodes, and the others (where an episode may start)
        in_episode = [False] * len(times)
        for start, n, slow in _iterate_runs([t > SLOW * median for t in times]):
            if slow and n >= MIN_LENGTH:
                lengths.append(n)
                for k in range(start, start + n):
                    in_episode[k] = True
                    factors.append(times[k] / median)
        normal += sum(1 for x in in_episode if not x)
        medians.append(statistics.median([t for t, x in zip(times, in_episode) if not x]
                                         or times))
    if len(lengths) < MIN_EPISODES or not normal:
        return Episodes(), medians
    return Episodes(rate=len(lengths) / float(normal), factor=statistics.median(factors),
                    length=(_percentile(lengths, 0.1), _percentile(lengths, 0.9)),
                    count=len(lengths)), medians


def _iterate_runs(flags):
    """(start, length, value) of every run of equal values in `flags`."""
    start = 0
    for i in range(1, len(flags) + 1):
        if i == len(flags) or flags[i] != flags[start]:
            yield start, i - start, flags[start]
            start = i
