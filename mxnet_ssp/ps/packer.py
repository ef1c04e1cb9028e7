"""Worker side of buckets: packing a step's gradients into buckets and its weights out of them.

The plan (:mod:`mxnet_ssp.core.buckets`) says which arrays share a bucket.  A :class:`Packer`
holds, per bucket, a send buffer (the members' gradients end to end, then the header: 1 for a
member this push carries, 0 for one it does not) and a receive buffer (the weights pulled),
both on the CPU, where MXNet's dist store sends from and receives into.  The store calls:

* :meth:`stage` for every pushed array of a bucket (copied, or summed over the devices, into
  its place);
* :meth:`ready` to learn which buckets have every member they expect in this step, and
  :meth:`take` to get a bucket's send buffer with its header written, once per push;
* :meth:`scatter` to copy a member's weights from the receive buffer into the caller's arrays.

All copies are MXNet operations on its engine, so they are ordered after the pull that
fills the receive buffer and before the next push that reads the send buffer, without a wait.
"""
from mxnet import ndarray as nd
import numpy as np

__all__ = ['Packer']


class _Buffers:
    __slots__ = ('bucket', 'send', 'recv', 'present', 'need', 'missing', 'header_all',
                 'send_views', 'recv_views')

    def __init__(self, bucket, dtype):
        self.bucket = bucket
        self.send = nd.zeros(bucket.length, dtype=dtype)
        self.recv = nd.zeros(bucket.length, dtype=dtype)
        self.present = set()              # member keys staged since the last push
        self.need = {m.key for m in bucket.members}
        self.missing = len(self.need)     # members it needs and has not got since the push
        self.header_all = nd.ones(len(bucket.members), dtype=dtype)
        # each member's place, in its own shape, made once: a copy is then one engine
        # operation (reshaping on every step costs as much again)
        self.send_views = {m.key: self.send[m.offset:m.offset + m.size].reshape(m.shape)
                           for m in bucket.members}
        self.recv_views = {m.key: self.recv[m.offset:m.offset + m.size].reshape(m.shape)
                           for m in bucket.members}


class Packer:
    """The buffers of a worker's buckets (see the module's docstring)."""

    def __init__(self, plan, dtypes):
        self.plan = plan
        self._buffers = [_Buffers(b, dtypes[b.number]) for b in plan.buckets]

    def buffers(self, bucket):
        return self._buffers[bucket.number]

    def expect(self, keys):
        """From now on a bucket waits, in a step, only for its members among `keys` (the keys
        a step pushes, once the store has learnt them)."""
        keys = set(keys)
        for buf in self._buffers:
            buf.need = {m.key for m in buf.bucket.members if m.key in keys}
            buf.missing = len(buf.need - buf.present)

    def stage(self, bucket, member, value):
        """Copy `value` (an array, or a list of one per device: their sum) into its place.
        Returns True when the bucket now holds every member it expects in this step."""
        buf = self._buffers[bucket.number]
        dst = buf.send_views[member.key]
        if isinstance(value, (list, tuple)):
            value[0].copyto(dst)
            for v in value[1:]:
                dst += v.as_in_context(dst.context)
        else:
            value.copyto(dst)
        if member.key not in buf.present:
            buf.present.add(member.key)
            if member.key in buf.need:
                buf.missing -= 1
        return buf.missing == 0

    def pending(self):
        """The buckets holding a member not yet pushed."""
        return [buf.bucket for buf in self._buffers if buf.present]

    def take(self, bucket):
        """The send buffer of `bucket`, its header written, ready to push; forgets what was
        staged.  A member the push does not carry gets zeros (so that n-softsync, which sums
        pushes, adds nothing for it) and a 0 in the header."""
        buf = self._buffers[bucket.number]
        members = bucket.members
        header = buf.send[bucket.payload:bucket.length]
        if len(buf.present) == len(members):
            buf.header_all.copyto(header)
        else:
            flags = np.zeros(len(members), dtype=np.float32)
            for i, m in enumerate(members):
                if m.key in buf.present:
                    flags[i] = 1.0
                else:
                    buf.send_views[m.key][:] = 0
            header[:] = nd.array(flags, dtype=buf.send.dtype)
        buf.present = set()
        buf.missing = len(buf.need)
        return buf.send

    def recv(self, bucket):
        """The receive buffer of `bucket` (the pull's `out`)."""
        return self._buffers[bucket.number].recv

    def scatter(self, bucket, member, out):
        """Copy `member`'s weights from the receive buffer into `out` (an array or a list)."""
        src = self._buffers[bucket.number].recv_views[member.key]
        if isinstance(out, (list, tuple)):
            for o in out:
                src.copyto(o)
        else:
            src.copyto(out)
