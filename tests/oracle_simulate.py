"""The simulator's straightforward loop, kept as the oracle of :func:`mxnet_ssp.simulate.simulate`.

It recomputes the slowest active clock by a scan of every worker at each ASP push (O(workers)),
as the simulator did before it kept that clock incrementally; tests/unit/test_simulate.py
requires both to give identical results.  Only the loop is its own: the arguments, the random
streams and the result come from the simulator's helpers.
"""
import heapq
from collections import Counter

from mxnet_ssp.simulate import _label, _result, _setup


def simulate(times, policy=None, wall_time=None, iterations=None, latency=0.0, jitter=0.0,
             seed=0, stall_factor=2.0):
    """:func:`mxnet_ssp.simulate.simulate` as it was, with the ASP scan (same arguments)."""
    times, policy, compute_time = _setup(times, policy, wall_time, iterations, latency,
                                         jitter, seed, stall_factor)
    m = len(times)
    label = _label(policy)
    end = float('inf') if wall_time is None else float(wall_time)
    clocks = [0] * m
    active = set(range(m))
    wait = [0.0] * m
    idle_since = [None] * m      # push time of a worker that is not computing
    lead_hist = Counter()
    max_lead = 0
    last_push = 0.0
    heap = []
    seq = 0

    def schedule(when, kind, rank):
        nonlocal seq
        heapq.heappush(heap, (when, seq, kind, rank))
        seq += 1

    def start(i, now):
        if idle_since[i] is not None:
            wait[i] += now - idle_since[i]
            idle_since[i] = None
        schedule(now + compute_time(i), 'push', i)

    for i in range(m):
        start(i, 0.0)
    while heap and heap[0][0] <= end:
        now, _, kind, i = heapq.heappop(heap)
        if kind == 'resume':
            start(i, now)
            continue
        clocks[i] += 1
        last_push = now
        idle_since[i] = now
        finished = iterations is not None and clocks[i] >= iterations
        if policy is None:
            lead = clocks[i] - min(clocks[j] for j in active)
            lead_hist[lead] += 1
            max_lead = max(max_lead, lead)
            if finished:
                active.discard(i)
            else:
                start(i, now)
            continue
        releases = policy.on_push(i, now)
        if finished:
            active.discard(i)
            releases = releases + policy.on_leave(i)
        for rel in releases:
            lead_hist[rel.lead] += 1
            if rel.rank in active:
                schedule(now + latency, 'resume', rel.rank)
        max_lead = policy.max_lead
    return _result(label, times, clocks, wait, idle_since, active, wall_time, last_push,
                   max_lead, lead_hist)
