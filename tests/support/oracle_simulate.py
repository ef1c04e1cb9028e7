"""The simulator's straightforward loop, kept as the oracle of
:func:`mxnet_ssp.lab.cluster_model.simulate.simulate`.

It recomputes the slowest active clock by a scan of every worker at each ASP push (O(workers)),
as the simulator did before it kept that clock incrementally;
tests/unit/cluster_model/test_simulate.py
requires both to give identical results.  It imports nothing from the simulator: the policy
spec, the label, the jittered compute times and every field of the result are written out here
again from the simulator's documented contract, so a bug in one of the simulator's helpers
shows up as a difference instead of being shared by both sides.  Only the synchronization
policy itself (:class:`mxnet_ssp.core.sync.SyncPolicy`, which has its own oracle in
tests/support/oracle_sync.py) is the same object on both sides.
"""
import heapq
import random
from collections import Counter

from mxnet_ssp.core.sync import SyncPolicy


def _policy(spec, m, stall_factor):
    """'asp' -> None, 'ssp:S' -> SyncPolicy(m, S, S), 'dssp:SL:SU[:MODE]' (bounded by default)."""
    parts = spec.split(':')
    if parts == ['asp']:
        return None, 'asp'
    if parts[0] == 'ssp':
        s = int(parts[1])
        return SyncPolicy(m, s, s, stall_factor=stall_factor), 'ssp:%d' % s
    mode = parts[3] if len(parts) == 4 else 'bounded'
    s_lower, s_upper = int(parts[1]), int(parts[2])
    return (SyncPolicy(m, s_lower, s_upper, mode=mode, stall_factor=stall_factor),
            'dssp:%d:%d:%s' % (s_lower, s_upper, mode))


def simulate(times, spec, wall_time=None, iterations=None, latency=0.0, jitter=0.0,
             seed=0, stall_factor=2.0):
    """The simulator's result as a dict of its fields (times and a spec string only).

    Worker i's k-th compute time is ``times[i] * max(0.05, 1 + jitter * g)`` with ``g`` the
    k-th ``gauss(0, 1)`` of ``random.Random('<seed>:<i>')``, as the simulator documents.
    """
    times = [float(t) for t in times]
    m = len(times)
    policy, label = _policy(spec, m, stall_factor)
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
        for i in range(m):           # still held (or the OK in flight) at the end
            if idle_since[i] is not None and i in active:
                wait[i] += wall - idle_since[i]
    return dict(label=label, times=times, iterations=clocks, wait=wait, wall_time=wall,
                max_lead=max_lead, lead_hist=lead_hist)
