"""Server side of buckets: running the update rule over a bucket, exactly as over its arrays.

A bucket (:mod:`mxnet_ssp.core.buckets`) arrives as one key: its members' gradients end to end,
then a header of one flag per member (1: this push carries the member).  The server keeps one
optimizer state per bucket, laid out like the bucket, and gives the rule:

* when the push carries every member and every member has been updated as often as the
  others: one call over the whole payload, under the bucket's own index, whose learning-rate
  and weight-decay multipliers are its members' (they share them) and whose update count is
  theirs;
* otherwise: one call per member carried, under the member's own index, on views of the
  weight, the gradient and the state.

Either way each element gets the operations it would get if its array had its own key (the
rules are element-wise: ``optim.is_elementwise``), and each member's update count, which
rules such as Adam read, is the one it would have.  Saved states list the members, as they
did before buckets (:mod:`mxnet_ssp.server.state`).

This module must import in a server process while ``import mxnet`` has not returned.
"""

__all__ = ['ServerBucket', 'state_part', 'copy_state']


class ServerBucket:
    """What a server knows of one bucket (from the workers' ``buckets`` command)."""

    __slots__ = ('index', 'payload', 'length', 'members', 'uniform')

    def __init__(self, spec):
        self.index = spec['index']
        self.payload = spec['payload']
        self.length = spec['length']
        # (member index, offset, size, shape)
        self.members = [(sid, off, size, tuple(shape)) for sid, off, size, shape
                        in spec['members']]
        self.uniform = True               # every member updated as often as the others

    def flags(self, grad):
        """Which members the push `grad` carries (a bool array), or None for all of them."""
        flags = grad[self.payload:self.length].asnumpy() > 0.5
        return None if flags.all() else flags

    def run(self, optimizer, flags, call, each=False):
        """Run the rule over the bucket: ``call(index, part, i)`` with ``part`` a slice of the
        payload, once for all of it (``i`` None) or once per member carried (``i`` its
        number; always so with `each`; see the module's docstring).  Keeps the members'
        update counts as per-array updates would."""
        counts = optimizer._index_update_count
        members = self.members
        if flags is None and self.uniform and not each:
            counts[self.index] = counts.get(members[0][0], 0)
            call(self.index, slice(0, self.payload), None)
            done = counts.get(self.index, 0)
            for sid, _, _, _ in members:
                counts[sid] = done
            return
        for i, (sid, off, size, _) in enumerate(members):
            if flags is None or flags[i]:
                call(sid, slice(off, off + size), i)
        self.uniform = self.counts_agree(optimizer)

    def counts_agree(self, optimizer):
        """Whether every member has been updated as often as the others."""
        counts = optimizer._index_update_count
        first = counts.get(self.members[0][0], 0)
        return all(counts.get(sid, 0) == first for sid, _, _, _ in self.members)

    def parts(self):
        """``(member index, slice of the payload)`` of every member."""
        return [(sid, slice(off, off + size)) for sid, off, size, _ in self.members]


class _DictPart(dict):
    """A member's view of a dict state (DC-ASGD's MeanSquare per worker): an entry the rule
    adds for a new worker is added to the bucket's dict at full size, zeros elsewhere."""

    def __init__(self, full, part, payload):
        super().__init__((k, v[part]) for k, v in full.items())
        self._full, self._part, self._payload = full, part, payload

    def __setitem__(self, key, value):
        from mxnet import ndarray as nd
        whole = nd.zeros(self._payload, ctx=value.context, dtype=value.dtype)
        value.reshape((-1,)).copyto(whole[self._part])
        self._full[key] = whole
        super().__setitem__(key, whole[self._part])


def state_part(state, part, payload):
    """The state of the elements `part` of a bucket's payload (views, not copies)."""
    if state is None:
        return None
    if isinstance(state, (list, tuple)):
        return type(state)(state_part(s, part, payload) for s in state)
    if isinstance(state, dict):
        return _DictPart(state, part, payload)
    if hasattr(state, 'asnumpy'):
        return state[part]
    return state                          # a number the rule keeps per key


def copy_state(src, dst):
    """Copy a member's state `src` (its array's shape) into `dst`, its part of a bucket's
    state (:func:`state_part`)."""
    if src is None or dst is None:
        return
    if isinstance(src, (list, tuple)):
        for s, d in zip(src, dst):
            copy_state(s, d)
        return
    if isinstance(src, dict):
        for k, v in src.items():
            if k not in dst:
                from mxnet import ndarray as nd
                dst[k] = nd.zeros_like(v)
            copy_state(v, dst[k])
        return
    if hasattr(src, 'asnumpy'):
        src.reshape((-1,)).copyto(dst)
