"""The split policy of batch balancing (pure: no MXNet, no I/O, no threads).

:func:`solve_split` finds the integer batches of a fixed total that make the workers'
predicted iteration times as equal as the bounds allow; :class:`BalancePolicy` keeps the
current split and changes it only past a hysteresis threshold; :func:`fit_cost` turns
measured ``{batch: seconds}`` into each worker's cost model ``t = a + c * b``.
:mod:`mxnet_ssp.balance` runs them on worker 0 for every round (docs/balance.md).
"""
import heapq
import math

__all__ = ['equal_split', 'predicted_time', 'solve_split', 'fit_cost', 'BalancePolicy']


def equal_split(total, num_workers):
    """``total`` samples over `num_workers`: equal, the remainder to the lowest ranks."""
    base, extra = divmod(int(total), int(num_workers))
    return [base + (1 if m < extra else 0) for m in range(num_workers)]


def predicted_time(rates, sizes, overheads=None):
    """The iteration time the models predict for `sizes`: ``max(a_m + rate_m * b_m)``."""
    overheads = overheads or [0.0] * len(rates)
    return max(a + r * b for a, r, b in zip(overheads, rates, sizes))


def solve_split(rates, total, lo, hi, overheads=None):
    """Integer batches minimizing ``max(a_m + rate_m * b_m)`` with ``lo <= b_m <= hi``, sum `total`.

    Parameters
    ----------
    rates : sequence of float > 0
        Seconds of compute per sample of each worker (c_m).
    total, lo, hi : int
        Requires ``len(rates) * lo <= total <= len(rates) * hi``.
    overheads : sequence of float >= 0, optional
        Seconds per iteration whatever the batch (a_m); default 0.

    The continuous optimum gives every worker ``clip((T - a_m) / rate_m, lo, hi)`` for
    the T that makes them sum to `total` (bisection on T); the integer split takes the
    floor of that and hands the missing samples one by one to the worker whose time
    would grow least (ties: the lower rank).  Deterministic.
    """
    m = len(rates)
    if not m * lo <= total <= m * hi:
        raise ValueError('no split of %d samples over %d workers within [%d, %d]'
                         % (total, m, lo, hi))
    if any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise ValueError('rates must be finite and > 0, got %r' % (list(rates),))
    overheads = list(overheads) if overheads is not None else [0.0] * m

    def filled(t):
        return sum(min(hi, max(lo, (t - a) / r)) for a, r in zip(overheads, rates))

    low, high = 0.0, max(a + r * hi for a, r in zip(overheads, rates))
    for _ in range(100):
        mid = 0.5 * (low + high)
        if filled(mid) < total:
            low = mid
        else:
            high = mid
    sizes = [min(hi, max(lo, int(math.floor((low - a) / r)))) for a, r in zip(overheads, rates)]
    missing = total - sum(sizes)
    heap = [(a + (b + 1) * r, q) for q, (a, r, b) in enumerate(zip(overheads, rates, sizes))
            if b < hi]
    heapq.heapify(heap)
    while missing > 0:
        _, q = heapq.heappop(heap)
        sizes[q] += 1
        missing -= 1
        if sizes[q] < hi:
            heapq.heappush(heap, (overheads[q] + (sizes[q] + 1) * rates[q], q))
    while missing < 0:          # only if rounding ever overshoots: take from the slowest
        q = max((q for q in range(m) if sizes[q] > lo),
                key=lambda q: (overheads[q] + sizes[q] * rates[q], -q))
        sizes[q] -= 1
        missing += 1
    return sizes


def fit_cost(points):
    """``(a, c)`` of ``t = a + c * b`` from ``{batch: seconds per iteration}``.

    One batch size: ``a = 0`` (all of the time is taken as per-sample).  Several: least
    squares, with ``a >= 0`` and ``c`` at least 1% of the mean seconds per sample
    (measurement noise must not make a worker look free).
    """
    bs = list(points)
    ts = [points[b] for b in bs]
    per_sample = sum(ts) / float(sum(bs))
    if len(bs) < 2:
        return 0.0, per_sample
    n = float(len(bs))
    mb, mt = sum(bs) / n, sum(ts) / n
    var = sum((b - mb) ** 2 for b in bs)
    c = sum((b - mb) * (t - mt) for b, t in zip(bs, ts)) / var
    c = max(c, 0.01 * per_sample)
    a = mt - c * mb
    if a < 0:                   # through the origin
        a, c = 0.0, sum(b * t for b, t in zip(bs, ts)) / float(sum(b * b for b in bs))
    return a, c


class BalancePolicy:
    """The current split and when to change it.

    :meth:`decide` is called once per round with every worker's smoothed rate.
    It changes the split only when the best split is predicted to shorten the
    iteration by more than ``threshold`` of the current one (hysteresis), so rates
    that jitter by less than that never move the split back and forth.
    """

    def __init__(self, num_workers, total, lo, hi, threshold, initial=None):
        self.num_workers, self.total, self.lo, self.hi = num_workers, total, lo, hi
        self.threshold = threshold
        sizes = list(initial) if initial is not None else None
        if sizes is None:
            sizes = [min(hi, max(lo, b)) for b in equal_split(total, num_workers)]
            if sum(sizes) != total:
                sizes = solve_split([1.0] * num_workers, total, lo, hi)
        self.sizes = sizes
        self.version = 0        # decisions that changed the split

    def decide(self, models):
        """Decide on the workers' ``(a, c)`` cost models (None: not measured yet).

        Returns a record of the decision; ``self.sizes`` is the split from now on.
        """
        record = {'models': [list(m) if m else None for m in models],
                  'sizes': list(self.sizes), 'switched': False}
        if any(m is None for m in models):
            record['why'] = 'a worker has no measurement yet'
            return record
        overheads = [m[0] for m in models]
        rates = [m[1] for m in models]
        best = solve_split(rates, self.total, self.lo, self.hi, overheads)
        now = predicted_time(rates, self.sizes, overheads)
        new = predicted_time(rates, best, overheads)
        gain = (now - new) / now if now > 0 else 0.0
        record.update(predicted_s=now, best_s=new, gain=gain)
        if best != self.sizes and gain > self.threshold:
            self.sizes = best
            self.version += 1
            record.update(sizes=list(best), switched=True)
        return record
