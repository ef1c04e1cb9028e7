"""Finding where a training step ends from the stream of KVStore calls.

gluon.Trainer and Module call the store once per parameter (``pushpull(i,
...)`` in index order) and never say where a step ends.  SSP needs exactly one
decision per worker per step, after all of that step's pushes and before any
of its pulls.  :class:`StepTracker` infers the boundary:

* The keys a step pushes are expected to be the keys initialized in the store
  (``init``/``broadcast``); a step is complete when every expected key has
  been pushed once.  This is exact for the usual case where every parameter
  has a gradient.
* If a key is pushed a second time before that happens, some initialized keys
  never get gradients (frozen parameters): the previous step ended before
  this push.  The tracker then learns the set of keys actually pushed and
  uses it from then on; only that first step is closed late.
"""

import json
import os
import time

from ..core.names import STORE_METRICS

__all__ = ['StepTracker', 'Step', 'StepLog']


class StepTracker:
    """Infers step boundaries from init and push events.  Pure, not thread-safe."""

    def __init__(self):
        self.expected = set()
        self.pushed = []
        self._pushed_set = set()
        self._hits = 0                    # expected keys pushed in this step
        self.learned = False
        self.string_keys = False
        self.shapes = {}

    def on_init(self, keys, values=None):
        """Keys were initialized in the store; a step is expected to push them.

        `values` (one per key, an array or a list of per-device arrays) give
        the shapes the keys were initialized with.
        """
        self.expected.update(keys)
        self._hits = len(self.expected & self._pushed_set)
        self.string_keys = self.string_keys or any(isinstance(k, str) for k in keys)
        for k, v in zip(keys, values or ()):
            v = v[0] if isinstance(v, (list, tuple)) else v
            self.shapes[k] = tuple(v.shape)

    def repeats(self, keys):
        """True if pushing `keys` means the current step already ended."""
        return any(k in self._pushed_set for k in keys) or len(set(keys)) < len(keys)

    def close_early(self):
        """The current step ended without pushing all expected keys: learn its key set."""
        if self.pushed:
            self.expected = set(self.pushed)
            self.learned = True
        self._reset()

    def on_push(self, keys):
        """Record pushes of `keys`; return True when they complete the current step."""
        expected = self.expected
        for k in keys:
            if k not in self._pushed_set:
                self._pushed_set.add(k)
                self.pushed.append(k)
                if k in expected:
                    self._hits += 1
        if expected and self._hits == len(expected):
            self._reset()
            return True
        return False

    def in_step(self, key):
        """True if `key` was pushed in the current, not yet complete, step."""
        return key in self._pushed_set

    def _reset(self):
        self.pushed = []
        self._pushed_set = set()
        self._hits = 0


class Step:
    """Book-keeping of one step in progress on a worker (see :class:`mxnet_ssp.SSPKVStore`)."""

    __slots__ = ('fast', 'started', 'authorized_at', 'deferred', 'outs', 'unpulled')

    def __init__(self, fast):
        self.fast = fast                  # released for sure: pull with the pushes
        self.started = time.perf_counter()
        self.authorized_at = time.time()
        self.deferred = []                # slow path: pulls to issue after RELEASE
        self.outs = []                    # fast path: arrays pulled, to wait for
        self.unpulled = set()             # keys pushed but not pulled in this step

    def pulled(self, keys, out):
        """Fast path: `keys` were pulled into `out` (an array, or a list of arrays or of
        lists of them: one per key, one per device)."""
        self.unpulled.difference_update(keys)
        stack = [out]
        while stack:
            item = stack.pop()
            if isinstance(item, (list, tuple)):
                stack.extend(item)
            else:
                self.outs.append(item)


class StepLog:
    """What a worker of an SSP/DSSP store measures about its steps.

    Totals for the summary printed at :meth:`summary`, and, with a metrics directory,
    one JSON line per step in ``<metrics_dir>/worker-<rank>.jsonl`` (fields in
    ``docs/metrics.md``).
    """

    def __init__(self, rank, metrics_dir=None):
        self.rank = rank
        self.metrics_dir = metrics_dir
        self.wait_s = self.apply_s = 0.0
        self.grants = self.max_lead = self.fast = 0
        self.start = time.time()
        self._file = None

    def open(self):
        """Create the metrics file (at the first step that reports to the controller)."""
        if self.metrics_dir and self._file is None:
            os.makedirs(self.metrics_dir, exist_ok=True)
            path = os.path.join(self.metrics_dir, STORE_METRICS % self.rank)
            self._file = open(path, 'w', buffering=1)

    def record(self, clock, step, release, times, reported_at, authorized_at, visible):
        """Count step `clock` (released by `release`); `times` = (t0, t1, t2) of perf_counter:
        waiting for the pushes to apply from t0 to t1, for the release from t1 to t2."""
        t0, t1, t2 = times
        self.apply_s += t1 - t0
        self.wait_s += t2 - t1
        self.grants += 1 if release.granted else 0
        self.max_lead = max(self.max_lead, release.lead)
        self.fast += 1 if step.fast else 0
        if self._file is not None:
            self._file.write(json.dumps({
                'rank': self.rank, 'clock': clock, 'reported_at': reported_at,
                'released_at': authorized_at, 'fast': step.fast,
                'push_s': round(t1 - step.started, 6), 'apply_wait_s': round(t1 - t0, 6),
                'wait_s': round(t2 - t1, 6), 'lead': release.lead,
                't_slowest': release.t_slowest, 'visible_clock': visible,
                'granted': release.granted, 'extra_left': release.extra_left}) + '\n')

    def close(self):
        if self._file is not None:
            self._file.close()

    def summary(self, store_type, clock):
        """One line: iterations, time waiting for the release and for pushes, max lead."""
        elapsed = max(time.time() - self.start, 1e-9)
        return ('worker[%d] %s summary: %d iterations, waited %.2f s for OK (%.1f%% of %.1f s), '
                '%.2f s for pushes to apply, max lead %d, %d grants'
                % (self.rank, store_type, clock, self.wait_s, 100.0 * self.wait_s / elapsed,
                   elapsed, self.apply_s, self.max_lead, self.grants))
