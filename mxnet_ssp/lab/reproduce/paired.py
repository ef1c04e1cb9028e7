"""Intervals of medians at order statistics, and arms compared seed by seed.

Pure functions of plain numbers (no I/O, no randomness); tested on synthetic values.

Conventions, stated once:

- **Pairs.** Trial k of every arm runs with the same seed (data order, compute draws), so two
  arms are compared on the seeds where both have a value: one ratio ``t_A,k / t_B,k`` per seed
  for times (equivalently, one log-ratio), one difference ``a_k - b_k`` for accuracies.
- **Never.** A trial that never reached the target took infinitely long, as everywhere in the
  lab: a pair where only A never got there has the ratio inf, only B: 0.  A pair where neither
  did has an unknown order; its ratio lies somewhere in [0, inf] and enters the interval's low
  end as 0 and its high end as inf.  Such pairs only ever widen an interval, never move it to
  one side, so they cannot decide a claim either way.
- **Interval.** The interval of a median of n values is ``[x_(j), x_(n+1-j)]`` (order
  statistics, 1-based).  For n independent values from any continuous distribution it covers
  that distribution's median with probability exactly :func:`coverage` (n, j) =
  ``1 - 2 P(Bin(n, 1/2) < j)`` (the sign test's interval); j is the largest that keeps this at
  or above the level asked (:func:`rank`).  Where even ``[min, max]`` covers less (fewer than
  :data:`MIN_TRIALS` values for 95%), the interval is ``[min, max]`` with its own lower
  coverage, and :attr:`Interval.decisive` is false: it is shown, it decides nothing.  A
  percentile bootstrap of a median picks order statistics too, but narrower ones: with 6
  values its 95% interval covers 87.5% (``design.interval_coverage``), which is why it is
  not used here.
- **Point.** The median: the middle value, or for an even count the midpoint of the two middle
  ones (for ratios their geometric mean, the midpoint of the log-ratios).  With pairs of
  unknown order it is the median when it comes out the same with them at 0 and at inf, else
  undefined (nan).
- **Several comparisons.** A claim made of m comparisons gives each the level
  :func:`family_level` (m) = ``1 - (1 - level) / m`` (Bonferroni).
"""
import collections
import math
from math import comb

import numpy as np

#: the level a claim's intervals are asked for
LEVEL = 0.95
#: the fewest values whose [min, max] covers a median with probability >= 95% (31/32)
MIN_TRIALS = 6


class Interval(collections.namedtuple('Interval', 'point low high level asked')):
    """A median with its interval: ``level`` is the interval's exact coverage, ``asked`` the
    level it was computed for.  Indexing gives point, low, high as in the lab's (point, low,
    high) tuples."""

    __slots__ = ()

    @property
    def decisive(self):
        """True when the interval reaches the level asked and both ends are defined."""
        return (self.level >= self.asked and not math.isnan(self.low)
                and not math.isnan(self.high))


def coverage(n, j):
    """P(x_(j) <= m <= x_(n+1-j)) for n independent draws of a continuous variable with
    median m: ``1 - 2 P(Bin(n, 1/2) <= j - 1)``; 0 for j outside 1..n/2."""
    if j < 1 or 2 * j > n:
        return 0.0
    return 1.0 - 2.0 * sum(comb(n, i) for i in range(j)) / 2.0 ** n


def rank(n, level=LEVEL):
    """The largest j with :func:`coverage` (n, j) >= `level`; 0 when there is none."""
    best = 0
    for j in range(1, n // 2 + 1):
        if coverage(n, j) >= level:
            best = j
    return best


def family_level(m, level=LEVEL):
    """Each comparison's level when a claim is made of `m` of them (Bonferroni)."""
    return 1.0 - (1.0 - level) / max(m, 1)


def _middle(values, mid):
    n = len(values)
    if n % 2:
        return float(values[n // 2])
    return float(mid(values[n // 2 - 1], values[n // 2]))


def _geometric(a, b):
    with np.errstate(invalid='ignore'):
        return np.sqrt(np.float64(a) * np.float64(b))


def _arithmetic(a, b):
    with np.errstate(invalid='ignore'):
        return (np.float64(a) + np.float64(b)) / 2


def _order_interval(lows, highs, level, mid):
    """The interval of the median of values known to lie in [lows[i], highs[i]]."""
    n = len(lows)
    if not n:
        return None
    lows, highs = sorted(lows), sorted(highs)
    j = max(rank(n, level), 1)
    point = _middle(lows, mid)
    if _middle(highs, mid) != point:
        point = math.nan
    return Interval(point, float(lows[j - 1]), float(highs[n - j]), coverage(n, j), level)


def median_interval(values, level=LEVEL):
    """:class:`Interval` of the median of `values` (numbers, inf allowed); None if empty."""
    values = [float(v) for v in values]
    return _order_interval(values, values, level, _arithmetic)


def common_seeds(a, b):
    """The seeds (keys) of the dicts `a` and `b` that both have, sorted."""
    return sorted(set(a) & set(b))


def seed_ratios(a, b):
    """(lowest, highest) ratio ``a[k] / b[k]`` of every common seed k of two dicts of times
    (seconds, inf for never): equal where the ratio is defined, (0, inf) where it is not
    (neither reached the target, inf / inf; or 0 / 0)."""
    lows, highs = [], []
    for k in common_seeds(a, b):
        with np.errstate(divide='ignore', invalid='ignore'):
            r = float(np.float64(a[k]) / np.float64(b[k]))
        lows.append(0.0 if math.isnan(r) else r)
        highs.append(math.inf if math.isnan(r) else r)
    return lows, highs


def paired_ratio(a, b, level=LEVEL):
    """:class:`Interval` of the median per-seed ratio ``a[k] / b[k]`` (dicts seed -> seconds,
    inf for never); None without a common seed."""
    lows, highs = seed_ratios(a, b)
    return _order_interval(lows, highs, level, _geometric)


def paired_difference(a, b, level=LEVEL):
    """:class:`Interval` of the median per-seed difference ``a[k] - b[k]`` (dicts seed ->
    finite numbers); None without a common seed."""
    diffs = [float(a[k]) - float(b[k]) for k in common_seeds(a, b)]
    return _order_interval(diffs, diffs, level, _arithmetic)


def fmt_interval(interval, fmt='%.2f'):
    """'point [low, high] coverage%', marked where it falls short of the level asked:
    '1.20 [0.90, 1.50] 75.0% < 95%' ('never' for inf, '-' for undefined, 'no trials' for
    None)."""
    if interval is None:
        return 'no trials'

    def one(x):
        return 'never' if math.isinf(x) and x > 0 else ('-' if math.isnan(x) else fmt % x)
    text = '%s [%s, %s] %s' % (one(interval.point), one(interval.low), one(interval.high),
                               _percent(interval.level))
    if interval.level < interval.asked:
        text += ' < %s' % _percent(interval.asked)
    return text


def _percent(p):
    """96.9%, 95%, 98.3%: one decimal unless it is a whole percentage."""
    text = '%.1f' % (100 * p)
    return (text[:-2] if text.endswith('.0') else text) + '%'
