"""A worker's large arrays held as chunks (:mod:`mxnet_ssp.core.chunks`): their keys, their
send buffers, and their pushes and pulls.

:class:`Chunks` learns each array as it is initialized: one larger than
``MXNET_SSP_CHUNK_BYTES`` is initialized as chunk keys (each on the server the plan chose)
instead of its own key, and from then on every push of it is a push of each chunk and every
pull a pull of each chunk, in element order (the first layer's first), into views of the
caller's array.  The servers apply the rule to each chunk under the chunk's own index, with
the array's learning-rate and weight-decay multipliers (rank 0 sends them in a ``chunks``
command before the chunks' init); the rules are element-wise (``optim.is_elementwise``), so
each element gets the operations it would get whole.

A chunk is pushed from a buffer of its own: MXNet's dist store keeps a pushed CPU array as
the key's receive buffer, and views of one array share one engine variable, so pushing views
would make each chunk's push wait for the previous chunk's pull (no pipeline at all).  With a
buffer per chunk, the pushes of later chunks and the pulls of earlier ones are in flight at
once; the engine orders the next step's copy into a buffer after that buffer's pull.  The
copies into the buffers are one NumPy operation per array where they can be (:meth:`Chunks._fill`).

Contracts: not thread-safe (the store's training thread); returns without waiting (MXNet's
engine orders the copies, pushes and pulls), except :meth:`init` (collective, as MXNet's init).
"""
import logging

import numpy as np
from mxnet import ndarray as nd

from ..core.chunks import CHUNK_KEY_STR, CHUNK_PAD_KEY_STR, ChunkPlan
from ..core.buckets import int_keys_on
from ..ps.channel import MAX_INT_KEY, RESERVED_KEYS
from . import host_copy
from .slots import as_list, first_of

__all__ = ['Chunks']

logger = logging.getLogger(__name__)


def _no_copy(chunk, buf):
    """A chunk's copy when one operation copies every chunk of the array."""


class Chunks:
    """The chunks of one worker's store.

    Parameters
    ----------
    owner : :class:`mxnet_ssp.worker.bucketing.Buckets`
        Whose native store, key layout, key numbering and init the chunks use.
    chunk_bytes : int
        ``MXNET_SSP_CHUNK_BYTES`` (0: every array stays whole).
    max_elements : int
        MXNet's big-array bound less one: a chunk stays whole on its server.
    """

    def __init__(self, owner, chunk_bytes, max_elements):
        self._owner = owner
        self.chunk_bytes = chunk_bytes
        self.plan = ChunkPlan(chunk_bytes, owner._num_servers, max_elements)
        self._keys_taken = set()          # integer chunk keys (the buckets skip them)
        self._bufs = {}                   # chunk key -> its send buffer
        self._staging = {}                # array key -> its gradient, whole, plain layout
        self._fill_plans = {}             # array key -> (its gradient array, its host copy)
        self._gather_plans = {}           # array key -> (its receive buffer, its host copy)
        self._buf_views = {}              # chunk key -> the NumPy view of its send buffer
        self._receive = {}                # array key -> its pulled weights, plain layout
        self._shapes = {}                 # chunk key -> (size,)
        self.multipliers = None           # callable: server index -> (lr_mult, wd_mult)
        self.send_control = None          # callable(action, payload): rank 0's commands

    def __bool__(self):
        return bool(self.plan)

    def get(self, key):
        """The :class:`~mxnet_ssp.core.chunks.ChunkedArray` of `key`, or None (whole)."""
        return self.plan.arrays.get(key) if self.plan.arrays else None

    def taken(self):
        return self._keys_taken

    def shape_of(self, chunk_key):
        return self._shapes.get(chunk_key)

    def chunk_keys(self, key):
        """The server keys holding `key` (or a list): its chunks', or itself."""
        out = []
        for k in as_list(key):
            array = self.get(k)
            out.extend(array.keys if array is not None else [k])
        return out

    def describe(self):
        return {'chunked_arrays': len(self.plan.arrays),
                'chunks': sum(len(a.chunks) for a in self.plan.arrays.values()),
                'chunk_host_fills': sum(p is not None for _, p in self._fill_plans.values()),
                'chunk_host_gathers': sum(p is not None
                                          for _, p in self._gather_plans.values())}

    # -- init ------------------------------------------------------------------------------
    def wants(self, key, value, sid):
        """Whether `key` (initialized with `value`; `sid` the index the servers would see for
        it whole, or None) is to be held as chunks: learns it in the plan either way."""
        v = first_of(value)
        owner = self._owner
        eligible = (self.chunk_bytes > 0 and self.multipliers is not None
                    and v.stype == 'default' and key not in RESERVED_KEYS)
        nbytes = v.size * np.dtype(v.dtype).itemsize
        server = None
        if sid is not None and v.size < owner._bigarray_bound:
            server = owner._server_of(sid)
        if not eligible or nbytes <= self.chunk_bytes:
            if server is None and v.size < owner._bigarray_bound:
                server = 0
            self.plan.add(key, v.shape, np.dtype(v.dtype).itemsize, False, server)
            return False
        return self.plan.add(key, v.shape, np.dtype(v.dtype).itemsize, True,
                             server) is not None

    def init(self, key, value, parent_sid):
        """Initialize the chunks of `key` (collective): give each a key on its server, tell
        the servers its multipliers (rank 0), and init each with its part of `value`."""
        owner = self._owner
        array = self.plan.arrays[key]
        v = first_of(value)
        flat = nd.zeros(array.size, dtype=v.dtype)      # read whole (see _stage)
        v.copyto(flat.reshape(array.shape))
        keys, values = self._assign(array)
        specs = {idx: self.multipliers(parent_sid) for idx in array.indices}
        pieces = {idx: (parent_sid, c.offset, c.size)
                  for idx, c in zip(array.indices, array.chunks)}
        if owner._rank == 0 and self.send_control is not None:
            # before the init's barrier: no worker pushes a chunk before the servers know it
            self.send_control('chunks', {'multipliers': specs, 'pieces': pieces})
        init_keys, init_values = [], []
        for k, c in zip(keys, values):
            if c is None:
                init_keys.append(k)
                init_values.append(nd.zeros(1))
                continue
            part = flat[c.offset:c.offset + c.size].copy()
            init_keys.append(k)
            init_values.append(part)
            self._bufs[k] = nd.zeros(c.size, dtype=v.dtype)
            self._shapes[k] = (c.size,)
        owner._init_keys(init_keys, init_values)

    def _assign(self, array):
        """Server keys for `array`'s chunks: integer keys on the chosen servers (the store's
        keys are integers), or string keys numbered by MXNet (padding keys move the numbering
        to a chunk's server, except in slot mode, where each key's block decides).  Returns
        the keys to initialize in order and, for each, its chunk (None: padding)."""
        owner = self._owner
        layout = owner._keys
        if isinstance(array.key, str):
            keys, owners = [], []
            next_id = layout.str_ids
            for c in array.chunks:
                if not layout.slot_mode:
                    while owner._server_of(next_id) != c.server:
                        keys.append(CHUNK_PAD_KEY_STR % next_id)
                        owners.append(None)
                        next_id += 1
                name = CHUNK_KEY_STR % (array.key, c.number)
                array.keys[c.number] = name
                if layout.slot_mode:
                    workers, servers = layout.workers, layout.num_servers
                    block = -(-next_id // (workers * servers))
                    array.indices[c.number] = block
                    next_id = (block + 1) * workers * servers
                else:
                    array.indices[c.number] = next_id
                    next_id += 1
                keys.append(name)
                owners.append(c)
            return keys, owners
        taken = owner.int_keys_in_use()     # the buckets' keys too: a store that learned
        #                                     its buckets may init a large array later
        top = (MAX_INT_KEY // (owner._num_workers * owner._num_servers) - 1
               if layout.slot_mode else MAX_INT_KEY - 1)
        for c in array.chunks:
            key = int_keys_on(c.server, 1, top, owner._server_of, taken)[0]
            taken.add(key)
            self._keys_taken.add(key)
            array.keys[c.number] = array.indices[c.number] = key
        return list(array.keys), list(array.chunks)

    # -- a step's traffic ------------------------------------------------------------------
    # The callers' weights are written whole, by MXNet, never through views: MKL-DNN keeps a
    # convolution's or dense layer's weights in its own blocked layout after an inference
    # pass, where a view of the flat elements is not the array's elements (and MXNet refuses
    # to write one: "Check failed: !is_view").  The chunks are pulled into views of the
    # array's receive buffer (plain), copied whole into the caller's.  A gradient is read by
    # NumPy where it can be (:meth:`_fill`, checked for that layout), else copied whole by
    # MXNet into the array's staging buffer (plain layout) and each chunk from there.
    def _stage(self, array, value):
        """Copy `value` whole into `array`'s staging buffer; its flat view."""
        stage = self._staging.get(array.key)
        if stage is None:
            v = first_of(value)
            stage = self._staging[array.key] = nd.zeros(array.size, dtype=v.dtype)
        self._summed(value).copyto(stage.reshape(array.shape))
        return stage

    def _receiver(self, array, out):
        recv = self._receive.get(array.key)
        if recv is None:
            recv = self._receive[array.key] = nd.zeros(array.size, dtype=first_of(out).dtype)
        return recv

    def push(self, array, value, priority):
        """Push `value` (the caller's array, or a list of per-device arrays) chunk by chunk."""
        owner = self._owner
        fill = self._fill(array, value)
        for c, k in zip(array.chunks, array.keys):
            buf = self._bufs[k]
            fill(c, buf)
            owner.native.push(owner._keys.mine(k), buf, priority=priority)

    def pull(self, array, out, priority, refresh=False):
        """Pull the chunks of `array` into `out` (or each of a list of per-device arrays),
        first chunk first; `refresh` (slot mode, at a release): refresh each chunk's slot
        before its pull."""
        owner = self._owner
        recv = self._receiver(array, out)
        for c, k in zip(array.chunks, array.keys):
            if refresh:
                owner.refresh(k, priority)
            owner.native.pull(owner._keys.mine(k), out=recv[c.offset:c.offset + c.size],
                              priority=priority)
        self._deliver(array, recv, out)

    def pushpull(self, array, value, out, priority):
        """Push each chunk and pull it back at once (a fast step): chunk j's pull follows its
        own push while chunk j + 1 is pushed, each through the store's window
        (:meth:`mxnet_ssp.worker.bucketing.Buckets.enter_window`)."""
        owner = self._owner
        fill = self._fill(array, value)
        recv = self._receiver(array, out)
        gather = self._gather_plan(array, recv)
        for c, k in zip(array.chunks, array.keys):
            buf = self._bufs[k]
            owner.enter_window(buf)
            fill(c, buf)
            mine = owner._keys.mine(k)
            owner.native.push(mine, buf, priority=priority)
            # into the chunk's own buffer (MXNet's dist store receives there and then skips
            # the copy to `out`), gathered into `recv` by one NumPy operation below; else
            # into its place in `recv` by MXNet's copy
            owner.native.pull(mine, out=buf if gather is not None
                              else recv[c.offset:c.offset + c.size], priority=priority)
        if gather is not None:
            gather.push()
        self._deliver(array, recv, out)

    def _gather_plan(self, array, recv):
        """The host copy of `array`'s pulled chunks (their send buffers) into `recv`, made
        once, or None where host copies are off or not available (or the fill of this array
        is not one: a list of per-device gradients keeps MXNet's copies both ways)."""
        known = self._gather_plans.get(array.key)
        if known is not None and known[0] is recv:
            return known[1]
        fill = self._fill_plans.get(array.key)
        plan = None
        if fill is not None and fill[1] is not None:
            flat = host_copy.host_view(recv)
            if flat is not None:
                plan = host_copy.CopyPlan(
                    [(flat[c.offset:c.offset + c.size], self._buf_view(k))
                     for c, k in zip(array.chunks, array.keys)],
                    [self._bufs[k] for k in array.keys], [recv])
        self._gather_plans[array.key] = (recv, plan)
        return plan

    def _fill(self, array, value):
        """Start copying the gradient `value` into the send buffers of `array`'s chunks; returns
        ``fill(chunk, buf)``, to call before each chunk's push (it copies that chunk, or
        nothing where one operation already copies them all).

        One CPU array of float32 or float64 (a worker's usual gradient) is copied by NumPy in
        one operation of MXNet's engine (:mod:`mxnet_ssp.worker.host_copy`, with
        ``MXNET_SSP_HOST_COPIES``), straight from its memory into every buffer, the source
        checked there for MKL-DNN's own layout; the plan is made once per gradient array.
        Else the gradient is copied whole into a staging buffer by MXNet (which knows the
        layout), and each chunk from there (:meth:`_stage`): two copies instead of one."""
        plan = self._fill_plan(array, value)
        if plan is not None:
            plan.push()
            return _no_copy
        stage = self._stage(array, value)

        def fill(c, buf):
            stage[c.offset:c.offset + c.size].copyto(buf)
        return fill

    def _fill_plan(self, array, value):
        """The host copy of `value` into `array`'s send buffers, made at its first use, or None
        where it cannot be (a list of arrays, another type or device, host copies off or not
        available, the gradient found in MKL-DNN's layout)."""
        if isinstance(value, (list, tuple)):
            if len(value) != 1:
                return None
            value = value[0]
        known = self._fill_plans.get(array.key)
        if known is not None and known[0] is value:
            return known[1]
        plan = None
        if (self._owner._host_copies and value.context.device_type == 'cpu'
                and np.dtype(value.dtype) in host_copy.HOST_TYPES and value.stype == 'default'
                and host_copy.available()):
            source = host_copy.host_view(value)      # waits once, for this first gradient
            if source is not None:
                flat = source.reshape(-1)
                copies = [(self._buf_view(k), flat[c.offset:c.offset + c.size],
                           value if value.ndim > 1 else None)
                          for c, k in zip(array.chunks, array.keys)]
                plan = host_copy.CopyPlan(copies, [value], [self._bufs[k] for k in array.keys])
                plan.keys = [array.key] * len(copies)
        self._fill_plans[array.key] = (value, plan)
        return plan

    def _buf_view(self, chunk_key):
        """The NumPy view of a chunk's send buffer (made once: both host copies use it)."""
        view = self._buf_views.get(chunk_key)
        if view is None:
            view = self._buf_views[chunk_key] = host_copy.host_view(self._bufs[chunk_key])
        return view

    @staticmethod
    def _deliver(array, recv, out):
        """Copy the pulled weights whole into `out` (an array or a list of them)."""
        for o in (out if isinstance(out, (list, tuple)) else [out]):
            recv.reshape(array.shape).copyto(o)

    @staticmethod
    def _summed(value):
        """One array of a key's per-device gradients: their sum (as MXNet sums them), or the
        array itself."""
        if not isinstance(value, (list, tuple)):
            return value
        if len(value) == 1:
            return value[0]
        total = value[0].copyto(value[0].context)
        for v in value[1:]:
            total += v.as_in_context(total.context)
        return total
