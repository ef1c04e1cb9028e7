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

__all__ = ['StepTracker']


class StepTracker:
    """Infers step boundaries from init and push events.  Pure, not thread-safe."""

    def __init__(self):
        self.expected = set()
        self.pushed = []
        self._pushed_set = set()
        self.learned = False
        self.string_keys = False
        self.shapes = {}

    def on_init(self, keys, values=None):
        """Keys were initialized in the store; a step is expected to push them.

        `values` (one per key, an array or a list of per-device arrays) give
        the shapes the keys were initialized with.
        """
        self.expected.update(keys)
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
        for k in keys:
            if k not in self._pushed_set:
                self._pushed_set.add(k)
                self.pushed.append(k)
        if self.expected and self.expected <= self._pushed_set:
            self._reset()
            return True
        return False

    def in_step(self, key):
        """True if `key` was pushed in the current, not yet complete, step."""
        return key in self._pushed_set

    def _reset(self):
        self.pushed = []
        self._pushed_set = set()
