"""Cost of one SyncPolicy decision against the number of workers: old (oracle) and new.

One worker is 2.5x slower than the others, compute times have 10% jitter,
DSSP(sL=3, sU=15) in bounded mode by default.  A timeline of pushes (rank,
time) is recorded once per worker count by an event-driven run of the
workers under the policy (no leaves: the run stops at ``--sim-time``
simulated seconds, longer for small jobs so that every timeline has about
``--min-pushes`` pushes), then replayed on fresh policies: the straightforward one
kept as the test oracle (``tests/support/oracle_sync.py``, scans over all clocks) and
``mxnet_ssp.core.sync.SyncPolicy``.  Both take the same decisions, so the replay
is the same job for both; the final clocks and max lead are checked.  Only
the ``on_push`` calls are timed (garbage collection off, as timeit does).
Prints a markdown table of microseconds per push, min and median over the
repeats, and optionally writes it to a file.

    python -m benchmarks.policy_scale [--workers 16,128,1024,4096] [--repeats 5]
                                      [--sim-time 12] [--min-pushes 20000]
                                      [--mode bounded] [--out FILE]
"""
import argparse
import gc
import heapq
import random
import statistics
import sys
import time


from mxnet_ssp.core.sync import SyncPolicy
from tests.support.oracle_sync import SyncPolicy as OraclePolicy  # the tests' oracle (run from the checkout)

STRAGGLER_FACTOR = 2.5
JITTER = 0.1


def record(m, s_lower, s_upper, mode, sim_time, seed):
    """The pushes ``(rank, time)`` of `m` workers run under the policy until `sim_time`."""
    rngs = [random.Random('%d:%d' % (seed, i)) for i in range(m)]
    base = [STRAGGLER_FACTOR if i == 0 else 1.0 for i in range(m)]

    def compute(i):
        return base[i] * max(0.05, 1.0 + JITTER * rngs[i].gauss(0.0, 1.0))

    policy = SyncPolicy(m, s_lower, s_upper, mode=mode)
    heap = [(compute(i), i) for i in range(m)]
    heapq.heapify(heap)
    pushes = []
    while heap and heap[0][0] <= sim_time:
        now, i = heapq.heappop(heap)
        pushes.append((i, now))
        for rel in policy.on_push(i, now):
            heapq.heappush(heap, (now + compute(rel.rank), rel.rank))
    return pushes


def replay(make, pushes):
    """Seconds spent in on_push for the whole timeline, and the final policy."""
    policy = make()
    on_push = policy.on_push
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for rank, now in pushes:
            on_push(rank, now)
        elapsed = time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    return elapsed, policy


def measure(m, args):
    # every worker soon runs at the straggler's pace: 1 push per 2.5 s (fast iteration: 1 s)
    sim_time = max(args.sim_time, STRAGGLER_FACTOR * args.min_pushes / m)
    pushes = record(m, args.s_lower, args.s_upper, args.mode, sim_time, args.seed)
    per_push = {'old': [], 'new': []}
    finals = {}
    for _ in range(args.repeats):          # alternate, so that load on the machine hits both
        for name, cls in (('old', OraclePolicy), ('new', SyncPolicy)):
            elapsed, policy = replay(
                lambda: cls(m, args.s_lower, args.s_upper, mode=args.mode), pushes)
            per_push[name].append(1e6 * elapsed / len(pushes))
            finals[name] = (list(policy.clocks), policy.max_lead, dict(policy.waiting))
    cells = {name: (min(v), statistics.median(v)) for name, v in per_push.items()}
    if finals['old'] != finals['new']:
        raise SystemExit('old and new policies disagree on the %d-worker timeline' % m)
    return len(pushes), finals['new'][1], cells


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workers', default='16,128,1024,4096',
                        help='worker counts, comma-separated (default: %(default)s)')
    parser.add_argument('--repeats', type=int, default=5,
                        help='timed replays per policy and worker count (default: %(default)s)')
    parser.add_argument('--sim-time', type=float, default=12.0,
                        help='simulated seconds of the recorded timeline; a fast iteration '
                             'takes 1 s (default: %(default)s)')
    parser.add_argument('--min-pushes', type=int, default=20000,
                        help='lengthen the timeline of small jobs to about this many pushes '
                             '(default: %(default)s)')
    parser.add_argument('--s-lower', type=int, default=3)
    parser.add_argument('--s-upper', type=int, default=15)
    parser.add_argument('--mode', choices=['bounded', 'paper', 'threshold'], default='bounded')
    parser.add_argument('--seed', type=int, default=0, help='jitter seed (default: 0)')
    parser.add_argument('--out', help='also write the table to this file')
    args = parser.parse_args(argv)
    workers = [int(w) for w in args.workers.split(',')]
    if args.repeats < 1 or any(w < 1 for w in workers):
        parser.error('--repeats and every --workers entry must be >= 1')
    print('options: %s' % ', '.join('%s=%s' % kv for kv in sorted(vars(args).items())),
          file=sys.stderr)
    lines = ['DSSP(sL=%d, sU=%d, %s), 1 worker %gx slower, jitter %g, %g simulated s '
             '(>= %d pushes), %d repeats; microseconds per on_push, min / median'
             % (args.s_lower, args.s_upper, args.mode, STRAGGLER_FACTOR, JITTER,
                args.sim_time, args.min_pushes, args.repeats), '',
             '| workers | pushes | max lead | old (oracle) min | old median | new min '
             '| new median | old / new (median) |',
             '|---:|---:|---:|---:|---:|---:|---:|---:|']
    print('\n'.join(lines), flush=True)
    for m in workers:
        n, max_lead, cells = measure(m, args)
        (old_min, old_med), (new_min, new_med) = cells['old'], cells['new']
        line = ('| %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1fx |'
                % (m, n, max_lead, old_min, old_med, new_min, new_med, old_med / new_med))
        print(line, flush=True)
        lines.append(line)
    if args.out:
        with open(args.out, 'w') as f:
            f.write('\n'.join(lines) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
