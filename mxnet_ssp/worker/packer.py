"""Worker side of buckets: packing a step's gradients into buckets and its weights out of them.

The plan (:mod:`mxnet_ssp.core.buckets`) says which arrays share a bucket.  A :class:`Packer`
holds, per bucket, two buffers on the CPU, where MXNet's dist store sends from and receives
into: the members' gradients end to end, then the header (1 for a member this push carries,
0 for one it does not).  They take turns: one is filled while the other, the last pushed,
receives the pulled weights.  MXNet's dist store keeps a pushed CPU array as the key's receive
buffer (``comm_buf_`` in kvstore_dist.h) and pulls into it before it copies to the pull's
`out`: with `out` that same array the copy is skipped, and a pull never lands on gradients
being gathered for the next push.  The store calls:

* :meth:`stage` for every pushed array of a bucket (copied, or summed over the devices, into
  its place; or, with ``defer``, only remembered, to be copied with the bucket's other members
  in one operation); it says when the bucket holds every member it expects in the step;
* :meth:`gather` to copy what was remembered, at the latest before anything may write to it;
* :meth:`take` to get the filled buffer with its header written, once per push;
* :meth:`recv` for the pull's `out`, and :meth:`scatter` to copy members' weights from it into
  the caller's arrays.

All copies are MXNet operations on its engine, so they are ordered after the pull that
fills a buffer and before the push that reads it, without a wait.

A copy costs one engine operation and about 12 us of Python per array on this machine (a
worker's ResNet-110 step made 670 of them).  So members on the CPU are copied many at a time,
in one engine operation per bucket and direction where they can:

* by NumPy's ``copyto`` on views of the arrays' memory, inside one operation of MXNet's engine
  (:mod:`mxnet_ssp.worker.host_copy`; float32 and float64; ``MXNET_SSP_HOST_COPIES``, on by
  default): 0.5 ms for the 335 arrays of the ResNet-110 list where MXNet's copy kernels take
  2.0-2.3 ms.  Into a bucket, every gradient takes it, checked in the operation for MKL-DNN's
  own memory layout (a source found so stops the job at the next push, with a message);
  out of a bucket, only one-dimensional weights: MKL-DNN reorders a layer's weights of two or
  more dimensions in place at an inference pass, and NumPy would write row-major values into
  its blocked layout;
* else by one ``amp_multicast`` (MXNet's cast of several arrays to their widest type, which
  for arrays of one type is a copy of each into its output; float32 only), which knows the
  layout.

Other types and devices keep a copy per array (MXNet's CPU ``amp_multicast`` fails for
float16 and float64, and its outputs must share the inputs' device).
"""
import operator

from mxnet import ndarray as nd
import numpy as np

from . import host_copy

__all__ = ['Packer']

_BATCHED = np.dtype(np.float32)          # what amp_multicast copies on the CPU
#: Weights copied out of buckets by NumPy have at most this many dimensions: MKL-DNN reorders
#: weights of 2 to 5 in place at inference passes (module docstring).
_HOST_OUT_MAX_NDIM = 1


def _copy_many(srcs, dsts):
    """Copy each of `srcs` into the array of `dsts` at the same place (same shapes), by
    MXNet: one operation for float32 arrays, else one per array."""
    if len(srcs) > 1 and np.dtype(srcs[0].dtype) == _BATCHED:
        nd.amp_multicast(*srcs, num_outputs=len(srcs), out=dsts)
    else:
        for src, dst in zip(srcs, dsts):
            src.copyto(dst)


class _Route:
    """How one bucket buffer's copies to or from the callers' arrays run, made when the
    arrays first come and kept while the same keys come with the same array objects (the
    store is handed the same gradient and weight arrays step after step): one NumPy
    operation (`plan`, for `host_keys`), one MXNet operation (`mx_srcs` into `mx_dsts`) and
    copies one by one (`singles`: (source, destination) pairs)."""
    __slots__ = ('keys', 'arrays', 'plan', 'host_keys', 'mx_srcs', 'mx_dsts', 'singles')

    def __init__(self, keys, arrays):
        self.keys, self.arrays = list(keys), list(arrays)
        self.plan = None
        self.host_keys, self.mx_srcs, self.mx_dsts, self.singles = [], [], [], []

    def matches(self, keys, arrays):
        return (keys == self.keys and len(arrays) == len(self.arrays)
                and all(map(operator.is_, arrays, self.arrays)))

    def run(self):
        if self.plan is not None:
            self.plan.push()
        _copy_many(self.mx_srcs, self.mx_dsts)
        for src, dst in self.singles:
            src.copyto(dst)


class _Buffers:
    __slots__ = ('bucket', 'arrays', 'views', 'headers', 'filling', 'present', 'need',
                 'missing', 'batched', 'deferred', 'fit_in', 'fit_out', 'host',
                 '_host_views', '_host_of', '_routes', '_header_plans')

    def __init__(self, bucket, dtype, host):
        self.bucket = bucket
        self.arrays = [nd.zeros(bucket.length, dtype=dtype) for _ in range(2)]
        # each member's place, in its own shape, made once: a copy is then one engine
        # operation (reshaping on every step costs as much again)
        self.views = [{m.key: a[m.offset:m.offset + m.size].reshape(m.shape)
                       for m in bucket.members} for a in self.arrays]
        self.headers = [a[bucket.payload:bucket.length] for a in self.arrays]
        self.filling = 0                  # the array being filled; the other was pushed last
        self.present = set()              # member keys staged since the last push
        self.need = {m.key for m in bucket.members}
        self.missing = len(self.need)     # members it needs and has not got since the push
        on_cpu = self.arrays[0].context.device_type == 'cpu'
        # batched copies done by NumPy in an engine operation (module docstring), else by
        # MXNet's amp_multicast (float32 only)
        self.host = (host and on_cpu and np.dtype(dtype) in host_copy.HOST_TYPES
                     and host_copy.available())
        self.batched = self.host or (on_cpu and np.dtype(dtype) == _BATCHED)
        self.deferred = {}                # member key -> the array to copy into its place
        self.fit_in = {}                  # member key -> the last gradient found fit to batch
        self.fit_out = {}                 # member key -> the last weight array found fit
        self._host_views = [None, None]   # per buffer: member key -> NumPy view of its place
        self._host_of = {}                # (member key, 'in'/'out') -> (array, its NumPy view)
        self._routes = {}                 # ('in'/'out', buffer) -> the last _Route made
        self._header_plans = [None, None]  # per buffer: a host copy of ones into its header

    def copy_in(self, keys, srcs):
        """Copy `srcs` (gradients that :meth:`fits`) into the places of members `keys` in
        the buffer being filled: by NumPy where :meth:`host_of` gives a view (each source of
        two or more dimensions checked for MKL-DNN's layout in the operation), else by
        MXNet."""
        which = self.filling
        route = self._routes.get(('in', which))
        if route is None or not route.matches(keys, srcs):
            route = _Route(keys, srcs)
            views, host, host_srcs = self.views[which], [], []
            for k, a in zip(keys, srcs):
                view = self.host_of(k, 'in', a) if self.host else None
                if view is None:
                    route.mx_srcs.append(a)
                    route.mx_dsts.append(views[k])
                else:
                    host.append((self.host_places(which)[k], view, a if a.ndim > 1 else None))
                    host_srcs.append(a)
                    route.host_keys.append(k)
            if host:
                route.plan = host_copy.CopyPlan(host, host_srcs, [self.arrays[which]])
                route.plan.keys = route.host_keys
            self._routes[('in', which)] = route
        route.run()

    def copy_out(self, keys, outs):
        """Copy members' weights from the receive buffer into `outs` (member ``keys[i]``
        into ``outs[i]``): by NumPy for one-dimensional arrays with a view (:meth:`host_of`),
        by MXNet in one operation for the others that :meth:`fits`, one by one for the
        rest."""
        which = 1 - self.filling
        route = self._routes.get(('out', which))
        if route is None or not route.matches(keys, outs):
            route = _Route(keys, outs)
            pulled, host, host_outs = self.views[which], [], []
            for k, o in zip(keys, outs):
                src = pulled[k]
                view = None
                if not (self.batched and self.fits(k, o, self.fit_out)):
                    route.singles.append((src, o))
                    continue
                if self.host and len(src.shape) <= _HOST_OUT_MAX_NDIM:
                    view = self.host_of(k, 'out', o)
                if view is None:
                    route.mx_srcs.append(src)
                    route.mx_dsts.append(o)
                else:
                    host.append((view, self.host_places(which)[k]))
                    host_outs.append(o)
                    route.host_keys.append(k)
            if host:
                route.plan = host_copy.CopyPlan(host, [self.arrays[which]], host_outs)
            self._routes[('out', which)] = route
        route.run()

    def write_header_all(self, which):
        """Write 1 for every member into the header of buffer `which` (a pull into the buffer
        since its last push overwrote the header), after the other buffer's last push and
        pull (:meth:`after_other`): one engine operation by NumPy, else two by MXNet."""
        plan = self._header_plans[which]
        if plan is None and self.host:
            base = host_copy.host_view(self.arrays[which])    # None: never, a 1-D array
            if base is not None:
                ones = np.ones(len(self.bucket.members), dtype=base.dtype)
                # the other buffer named as written: the operation waits for its push
                plan = self._header_plans[which] = host_copy.CopyPlan(
                    [(base[self.bucket.payload:], ones)], [],
                    [self.arrays[which], self.arrays[1 - which]])
        if plan is None:
            self.after_other(which)
            nd.ones_like(self.headers[1 - which], out=self.headers[which])
        else:
            plan.push(report=False)       # the members' copies report at the next push

    def after_other(self, which):
        """Make MXNet's engine run the next write to the header of buffer `which` (so the
        buffer's push) after the other buffer's last push and the pull into it, by an
        operation on the other buffer's header (whose value nothing reads) that changes no bit.

        MXNet's dist store orders the pushes of a key only through the array it pulls into,
        and a bucket's two buffers take turns: without this, two pushes of one bucket may
        reach the servers in either order, the later step's gradient applied first, when
        nothing else ties them (a script pushing and pulling without reading the weights in
        between; gluon.Trainer and Module read them in the next forward pass)."""
        other = self.headers[1 - which]
        other *= 1

    def host_places(self, which):
        """NumPy views of the members' places in buffer `which` (made once)."""
        if self._host_views[which] is None:
            self._host_views[which] = {k: host_copy.host_view(v)
                                       for k, v in self.views[which].items()}
        return self._host_views[which]

    def host_of(self, key, side, array):
        """The NumPy view of `array`, a caller's array for member `key` (remembered: the
        store is handed the same arrays step after step), or None if it is in MKL-DNN's own
        layout when first seen (then MXNet copies it)."""
        known = self._host_of.get((key, side))
        if known is None or known[0] is not array:
            known = (array, host_copy.host_view(array))
            self._host_of[(key, side)] = known
        return known[1]

    def fits(self, key, array, seen):
        """Whether `array` can be copied with others in one operation: on the buffers'
        device, of their type and of the member's shape.  Checked once per array object
        (the store is handed the same gradient and weight arrays step after step)."""
        if seen.get(key) is array:
            return True
        view = self.views[0][key]
        if (isinstance(array, nd.NDArray) and array.stype == 'default'
                and array.context == view.context and array.dtype == view.dtype
                and array.shape == view.shape):
            seen[key] = array
            return True
        return False


class Packer:
    """The buffers of a worker's buckets (see the module's docstring)."""

    def __init__(self, plan, dtypes, host=True):
        # host: whether copies may run as NumPy copies on MXNet's engine (module docstring)
        self._buffers = [_Buffers(b, dtypes[b.number], host) for b in plan.buckets]

    def buffers(self, bucket):
        return self._buffers[bucket.number]

    def expect(self, keys):
        """From now on a bucket waits, in a step, only for its members among `keys` (the keys
        a step pushes, once the store has learnt them)."""
        keys = set(keys)
        for buf in self._buffers:
            buf.need = {m.key for m in buf.bucket.members if m.key in keys}
            buf.missing = len(buf.need - buf.present)

    def needs(self, bucket):
        """The member keys `bucket` waits for in a step."""
        return self._buffers[bucket.number].need

    def stage(self, bucket, member, value, defer=False):
        """Put `value` (an array, or a list of one per device: their sum) in its place: at
        once, or with `defer` at the bucket's next :meth:`gather` or :meth:`take` (the caller
        promises nothing writes to `value` until then).  Returns True when the bucket now
        holds every member it expects in this step."""
        buf = self._buffers[bucket.number]
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
        if defer and buf.batched and buf.fits(member.key, value, buf.fit_in):
            buf.deferred[member.key] = value
        else:
            buf.deferred.pop(member.key, None)
            dst = buf.views[buf.filling][member.key]
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

    def gather(self, bucket):
        """Copy the deferred members of `bucket` into its send buffer (one operation)."""
        buf = self._buffers[bucket.number]
        if buf.deferred:
            keys = list(buf.deferred)
            buf.copy_in(keys, list(buf.deferred.values()))
            buf.deferred = {}

    def deferring(self):
        """The buckets holding deferred members."""
        return [buf.bucket for buf in self._buffers if buf.deferred]

    def pending(self):
        """The buckets holding a member not yet pushed."""
        return [buf.bucket for buf in self._buffers if buf.present]

    def take(self, bucket):
        """The buffer filled for `bucket`, its members gathered and its header written, ready
        to push; forgets what was staged and fills the other buffer from now on.  A member
        the push does not carry gets zeros (so that n-softsync, which sums pushes, adds
        nothing for it) and a 0 in the header."""
        self.gather(bucket)
        buf = self._buffers[bucket.number]
        members = bucket.members
        send, views = buf.arrays[buf.filling], buf.views[buf.filling]
        if len(buf.present) == len(members):
            buf.write_header_all(buf.filling)
        else:
            header = buf.headers[buf.filling]
            flags = np.zeros(len(members), dtype=np.float32)
            for i, m in enumerate(members):
                if m.key in buf.present:
                    flags[i] = 1.0
                else:
                    views[m.key][:] = 0
            flags = nd.array(flags, dtype=send.dtype)
            buf.after_other(buf.filling)
            # the flags, read after the other buffer's header (where(c, x, x) is x)
            nd.where(buf.headers[1 - buf.filling], flags, flags, out=header)
        buf.present = set()
        buf.missing = len(buf.need)
        buf.filling = 1 - buf.filling
        return send

    def recv(self, bucket):
        """The array a pull of `bucket` goes into (the pull's `out`): the one pushed last
        (before the first push, the one not being filled)."""
        buf = self._buffers[bucket.number]
        return buf.arrays[1 - buf.filling]

    def scatter(self, bucket, pairs):
        """Copy members' weights from the receive buffer of `bucket` into the callers' arrays:
        `pairs` of (member, out), `out` an array or a list of arrays."""
        buf = self._buffers[bucket.number]
        keys, outs = [], []
        for member, out in pairs:
            if isinstance(out, (list, tuple)):
                keys.extend([member.key] * len(out))
                outs.extend(out)
            else:
                keys.append(member.key)
                outs.append(out)
        buf.copy_out(keys, outs)
