"""The simulator's straightforward loop, kept as the oracle of :func:`mxnet_ssp.simulate.simulate`.

It recomputes the slowest active clock by a scan of every worker at each ASP push (O(workers)),
as the simulator did before it kept that clock incrementally; tests/unit/test_simulate.py
requires both to give identical results.  Same event order, same random streams.
"""
import heapq
import random
from collections import Counter

from mxnet_ssp.simulate import SimResult, _label, make_policy


def simulate(times, policy=None, wall_time=None, iterations=None, latency=0.0, jitter=0.0,
             seed=0, stall_factor=2.0):
    """:func:`mxnet_ssp.simulate.simulate` as it was, with the ASP scan (same arguments)."""
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
    label = _label(policy)
    rngs = [random.Random('%s:%d' % (seed, i)) for i in range(m)]

    def compute_time(i):
        if not jitter:
            return times[i]
        return times[i] * max(0.05, 1.0 + jitter * rngs[i].gauss(0.0, 1.0))

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
    if wall_time is None:
        wall = last_push
    else:
        wall = float(wall_time)
        for i in range(m):               # still held (or the OK in flight) at the end
            if idle_since[i] is not None and i in active:
                wait[i] += wall - idle_since[i]
    return SimResult(label=label, times=times, iterations=clocks, wait=wait, wall_time=wall,
                     max_lead=max_lead, lead_hist=lead_hist)
