"""A worker's arrays on their way to the servers: each on its own key, or packed in a bucket.

:class:`Buckets` is the one place that knows the buckets of a worker's store (the store
itself only counts steps and talks to the controller): the plan (:mod:`mxnet_ssp.core.buckets`:
which small arrays share a server key, learnt at the end of the first step), the buffers
(:class:`mxnet_ssp.worker.packer.Packer`), and each bucket's state in a step (which callers'
arrays wait for its pull, whether it was pulled, which buckets the caller's loop completes).
The store hands it every key of every call, once; it sends what is not in a bucket on the
key's own (slot) key.

Contracts
---------
* Not thread-safe; called by the store, from the one training thread.
* Returns without waiting, except :meth:`learn` (collective: a barrier with the other
  workers, bounded by the store's timeout).
* Owns the buckets' buffers; the callers' arrays are read (pushes) and written (pulls) by
  MXNet operations, in MXNet's engine order, never kept beyond the step that handed them in,
  except as the cached routes of :mod:`mxnet_ssp.worker.packer`.
* A fast step (:class:`mxnet_ssp.worker.steps.Step` with ``fast``) pulls each bucket with its
  push; a slow step defers its pulls to the store, which hands them back at the release
  (:meth:`pull_released`), and then each bucket is pulled once.
"""
import collections
import logging

import numpy as np
from mxnet import ndarray as nd

from ..ps import process_exit
from .. import config as cfg
from .._hooks import module_done
from ..core.buckets import (BUCKET_KEY_STR, PAD_KEY_STR, ArrayInfo, BucketPlan,
                            fitted_bucket_bytes, int_keys_on, plan_buckets)
from ..ps.channel import MAX_INT_KEY, RESERVED_KEYS, refresh_marker
from .slots import SlotKeyError, as_list, as_values, first_of

__all__ = ['Buckets']

logger = logging.getLogger(__name__)


class Buckets:
    """The buckets of one worker's store, and the way of every array to the servers.

    Parameters
    ----------
    native : MXNet's store under the worker's (its ``rank`` and ``num_workers`` are read
        here).  Set :attr:`native` again when the store replaces it.
    keys : :class:`mxnet_ssp.worker.slots.KeyLayout`
        The store's key layout (shared: slot mode starts at the store's set_optimizer).
    tracker : :class:`mxnet_ssp.worker.steps.StepTracker`
        The store's (shared): whether keys are strings, which keys a step pushes.
    num_servers : int
    bucket_bytes : int
        ``MXNET_SSP_BUCKET_BYTES`` (0: one key per array).
    host_copies : bool
        ``MXNET_SSP_HOST_COPIES``: whether the packer may copy by NumPy.
    timeout : float
        Seconds the first step's barrier may take (``MXNET_SSP_TIMEOUT``).
    error : exception class
        What a refused call raises (the store's :class:`~mxnet_ssp.store.SSPError`).
    chunk_bytes : int
        ``MXNET_SSP_CHUNK_BYTES`` (0: every array stays whole).
    fit_buckets : bool
        Whether `bucket_bytes` is only a cap, the plan's size fitted to the model
        (:func:`mxnet_ssp.core.buckets.fitted_bucket_bytes`; the default across hosts).
    """

    def __init__(self, native, keys, tracker, num_servers, bucket_bytes, host_copies, timeout,
                 error, chunk_bytes=0, fit_buckets=False):
        self.native = native
        self._keys, self._tracker = keys, tracker
        self._rank, self._num_workers = native.rank, native.num_workers
        self._num_servers = num_servers
        self._bucket_bytes, self._host_copies = bucket_bytes, host_copies
        self._fit_buckets = fit_buckets   # the default across hosts: fitted to the model
        self._timeout, self._error = timeout, error
        self._arrays = {}                 # key -> (shape, dtype, stype, server-side index)
        self.plan = None                  # the BucketPlan, learnt at the first step's end
        self._bucket_keys = {}            # bucket key -> Bucket
        self._packer = None
        # bucket number -> [(member, out)] to unpack
        self._waiting = collections.defaultdict(list)
        self._pulled_in_step = set()      # buckets pulled in this (fast) step
        self._loop = None                 # (caller's frame, buckets it completes): see _loop_of
        self._first_keys = []             # the first step's pushed keys, in order
        self._first_seen = set()
        self._sparse_pushed = set()       # keys whose first-step gradients were sparse
        self._refresh = {}                # slot mode: key -> numpy refresh marker
        self._bigarray_bound = cfg.bigarray_bound()
        # the large arrays held as chunks (mxnet_ssp.worker.chunking)
        from .chunking import Chunks
        self.chunks = Chunks(self, chunk_bytes, self._bigarray_bound - 1)
        self._window = cfg.chunk_window()             # MXNET_SSP_CHUNK_WINDOW (0: no limit)
        self._in_flight = collections.deque()         # pushed, not yet pulled back
        self._str_natural = 0             # string keys the caller initialized so far
        self._natural_of = {}             # server index -> the index MXNet's store would use

    @property
    def learning(self):
        """True until the first step ends: the plan is learnt from its pushes."""
        return self._first_keys is not None

    @property
    def began(self):
        """Whether a push went through (the servers may hold buckets)."""
        return bool(self._first_seen) or self.plan is not None

    def describe(self):
        """The buckets of the plan (0 before the first step ends, or with one key per array)
        and the arrays they hold."""
        plan = self.plan
        return {'buckets': len(plan.buckets) if plan else 0,
                'arrays_in_buckets': len(plan.of_key) if plan else 0, **self.chunks.describe()}

    # -- every key: init, push, pull -------------------------------------------------------
    def init(self, key, value):
        """Initialize `key` on the servers (collective): on its own key, or every worker's
        slot of it in slot mode, or as chunks (:mod:`mxnet_ssp.worker.chunking`)."""
        if self._chunking():
            keys, values = as_list(key), as_values(key, value)
            if len(keys) != len(values):    # as MXNet's own init, before anything is sent
                raise AssertionError('kv.init: %d keys but %d values' % (len(keys), len(values)))
            for k, v in zip(keys, values):
                if not self._init_chunked(k, v):
                    self._remember(k, v)
                    self._init_keys(k, v)
            return
        self._count_natural(key)
        self._remember(key, value)
        self._init_keys(key, value)

    def _chunking(self):
        return self.chunks.chunk_bytes > 0 and self.chunks.multipliers is not None

    def _count_natural(self, key):
        self._str_natural += sum(isinstance(k, str) for k in as_list(key))

    def _init_chunked(self, key, value):
        """Initialize `key` as chunks if the chunk plan holds it so (returns True); else
        note the index its own key will have, which differs from MXNet's numbering of string
        keys once chunks took numbers (rank 0 then sends the servers that index's
        multipliers)."""
        layout = self._keys
        if self.chunks.get(key) is not None:
            raise self._error(
                'worker[%d]: key %r is initialized again after the store split it into chunks: '
                'set %s=0 to keep every array whole' % (self._rank, key, cfg.ENV_CHUNK_BYTES))
        if isinstance(key, str):
            natural = self._str_natural
            self._str_natural += 1
            if layout.slot_mode:
                size = layout.workers * layout.num_servers
                actual = -(-layout.str_ids // size)
            else:
                actual = layout.str_ids
        else:
            natural = actual = key
        if self.chunks.wants(key, value, actual):
            self.chunks.init(key, value, natural)
            v = first_of(value)
            self._arrays[key] = (tuple(v.shape), np.dtype(v.dtype), v.stype, None)
            return True
        if actual != natural:
            self._natural_of[actual] = natural
            if self._rank == 0 and self.chunks.send_control is not None:
                self.chunks.send_control(
                    'chunks', {'multipliers': {actual: self.chunks.multipliers(natural)},
                               'natural': {actual: natural}})
        return False

    def _apart(self, key, value, out=None):
        """The chunked keys of a call, ``[(ChunkedArray, value, out)]``, and the rest as
        ``(key, value, out)`` in the call's form (None if nothing is left)."""
        chunks = self.chunks
        if not chunks:
            return (), (key, value, out)
        if not isinstance(key, (list, tuple)):
            array = chunks.get(key)
            return ((), (key, value, out)) if array is None else ([(array, value, out)], None)
        outs = as_values(key, out) if out is not None else [None] * len(key)
        found, rest = [], ([], [], [])
        for k, v, o in zip(key, as_values(key, value), outs):
            array = chunks.get(k)
            if array is not None:
                found.append((array, v, o))
            else:
                rest[0].append(k)
                rest[1].append(v)
                rest[2].append(o)
        if not rest[0]:
            return found, None
        return found, (rest[0], rest[1], rest[2] if out is not None else None)

    def broadcast(self, key, value, out, priority=0):
        """Initialize `key` with `value` and pull it into `out` (collective)."""
        if self._chunking():
            for k, v, o in zip(as_list(key), as_values(key, value), as_values(key, out)):
                if self._init_chunked(k, v):
                    self.chunks.pull(self.chunks.get(k), o, priority)
                else:
                    self._broadcast_whole(k, v, o, priority)
            return
        self._count_natural(key)
        self._broadcast_whole(key, value, out, priority)

    def _broadcast_whole(self, key, value, out, priority):
        self._remember(key, value)
        if not self._keys.slot_mode:
            self.native.broadcast(key, value, out, priority=priority)
            self._keys.count_string_keys(key)
        else:
            self._init_keys(key, value)
            self.native.pull(self._keys.mine(key), out=out, priority=priority)

    def _init_keys(self, key, value):
        if not self._keys.slot_mode:
            self.native.init(key, value)
            self._keys.count_string_keys(key)
            return
        try:
            keys, values = self._keys.init_block(key, value, nd.zeros(1, dtype=np.float32))
        except SlotKeyError as err:
            raise self._error(str(err)) from err
        self.native.init(keys, values)

    def push(self, key, value, step, priority):
        """Push `value` of `key` (or a list) in `step`: the bucketed arrays into their buckets
        (each pushed when complete), the chunked ones chunk by chunk, the others on their
        own keys."""
        chunked, rest = self._apart(key, value)
        for array, v, _ in chunked:
            self.chunks.push(array, v, priority)
        if rest is None:
            return
        key, value, _ = rest
        if self.plan:
            own = self._stage(as_list(key), as_values(key, value), None, step, priority, ())
            if own:
                self.native.push(self._keys.mine(own[0]), own[1], priority=priority)
        else:
            self.native.push(self._keys.mine(key), value, priority=priority)

    def pushpull_one(self, key, value, out, step, priority, frame):
        """The common call, made for every parameter of every step by gluon.Trainer and
        Module: one bucketed key, not yet pushed in `step`, pushed and pulled through its
        bucket (`out` None: into `value`); `frame` is the caller's (see :meth:`_loop_of`).
        Returns False, doing nothing, for any other call."""
        plan = self.plan
        if plan is None or isinstance(key, (list, tuple)):
            return False
        found = plan.of_key.get(key)
        if found is None or self._tracker.in_step(key):
            return False
        bucket, member = found
        self._stage_one(key, bucket, member, value, value if out is None else out, step,
                        priority)
        if bucket.number not in self._loop_of(frame):
            self._packer.gather(bucket)
        return True

    def pushpull(self, key, value, out, step, priority, frame):
        """Push `value` of `key` (or a list) and pull the weights into `out`: with the push in
        a fast step, else deferred to the release (``step.deferred``)."""
        chunked, rest = self._apart(key, value, out)
        for array, v, o in chunked:
            if step.fast:
                self.chunks.pushpull(array, v, o, priority)
                step.pulled([array.key], o)
            else:
                self.chunks.push(array, v, priority)
                step.deferred.append((array.key, o, priority, True))
        if rest is None:
            return
        key, value, out = rest
        keys = as_list(key)
        if self.plan:
            own = self._stage(keys, as_values(key, value), as_values(key, out), step, priority,
                              self._loop_of(frame))
            if not own:
                return
            key, value, out = own
            keys = key
        if step.fast:
            if not isinstance(key, (list, tuple)):
                # into the window with the buckets and chunks: the pull writes `out` last
                self.enter_window(first_of(out))
            self.native.pushpull(self._keys.mine(key), value, out=out, priority=priority)
            step.pulled(keys, out)
        else:
            self.native.push(self._keys.mine(key), value, priority=priority)
            step.deferred.append((key, out, priority, True))

    def pull(self, key, out, priority, ignore_sparse, step):
        """Pull the weights of `key` (or a list) into `out`, the bucketed ones from their
        bucket.  `step`: the fast step in progress that pushed them (a bucket not yet pulled
        in it is unpacked at its pull), or None."""
        chunked, rest = self._apart(key, out)
        for array, o, _ in chunked:
            self.chunks.pull(array, o, priority)
            if step is not None:
                step.pulled([array.key], o)
        if rest is None:
            return
        key, out, _ = rest
        if self.plan and any(self.plan.bucket_of(k) for k in as_list(key)):
            self._pull_through_buckets(key, out, priority, ignore_sparse, step)
            return
        self.native.pull(self._keys.mine(key), out=out, priority=priority,
                         ignore_sparse=ignore_sparse)
        if step is not None:
            step.pulled(as_list(key), out)

    def pull_released(self, pulls):
        """At a release: issue `pulls`, ``(key, out, priority, ignore_sparse)`` each (every
        bucket pulled once, in slot mode after a refresh of the slot), then unpack them."""
        pulled = {}                   # bucket number -> the (member, out) pairs to unpack
        for key, out, priority, ignore_sparse in pulls:
            chunked, rest = self._apart(key, out)
            for array, o, _ in chunked:
                self.chunks.pull(array, o, priority, refresh=self._keys.slot_mode)
            if rest is None:
                continue
            key, out, _ = rest
            if self.plan and any(self.plan.bucket_of(k) for k in as_list(key)):
                self._pull_through_buckets(key, out, priority, ignore_sparse, None, pulled)
                continue
            if self._keys.slot_mode:
                self.refresh(key, priority)
            self.native.pull(self._keys.mine(key), out=out, priority=priority,
                             ignore_sparse=ignore_sparse)
        self._unpack(pulled)

    @property
    def window(self):
        """``MXNET_SSP_CHUNK_WINDOW`` as this store read it at start (0: no limit)."""
        return self._window

    def enter_window(self, buf):
        """Before a push that a fast step pulls back at once (a bucket's, a chunk's or an array's
        on its own key): wait (this thread) until fewer than ``MXNET_SSP_CHUNK_WINDOW`` such
        pushes are not yet pulled back, then count this one in; `buf` is the array its pull
        writes last.

        Without it a step issues every push at once, and each pull's request, sent when its
        own push is applied, waits on the link behind the pushes still queued: the weights
        then come back only after the whole model went up, and the link's two directions
        take turns (2x the wire floor).  With it a pull's request follows its push within
        a few keys, so the model goes up and comes back at once, first key first.
        """
        window, in_flight = self._window, self._in_flight
        if not window:
            return
        while len(in_flight) >= window:
            in_flight.popleft().wait_to_read()
        in_flight.append(buf)

    def refresh(self, key, priority=0):
        """Slot mode: make the servers copy their latest weights into this worker's slots of
        `key` (or a list; a bucket's key too; a bucketed key's bucket, which its pull reads)."""
        keys = self.chunks.chunk_keys(key) if self.chunks else as_list(key)
        for k in (self.plan.carriers(keys) if self.plan else keys):
            marker = self._refresh.get(k)
            if marker is None:
                marker = self._refresh[k] = refresh_marker(self._shape_of(k))
            # a fresh NDArray every time: MXNet's dist store keeps the pushed CPU array as
            # the key's receive buffer, so the pull that follows overwrites it
            self.native.push(self._keys.mine(k), nd.array(marker), priority=priority)

    def _shape_of(self, key):
        chunk_shape = self.chunks.shape_of(key)
        if chunk_shape is not None:
            return chunk_shape
        if self.plan and key in self._bucket_keys:
            return (self._bucket_keys[key].length,)
        shapes = self._tracker.shapes
        if key not in shapes:
            raise self._error('worker[%d]: key %r was pushed but never initialized'
                              % (self._rank, key))
        return shapes[key]

    # -- step boundaries -------------------------------------------------------------------
    def keys_learned(self):
        """The tracker learnt the keys a step pushes: a bucket waits only for those."""
        if self._packer is not None and self._tracker.learned:
            self._packer.expect(self._tracker.expected)

    def end_step(self, step, priority):
        """The step's last push: push the buckets still holding gradients; forget the step."""
        if self._packer is not None and step is not None:
            for bucket in self._packer.pending():
                self._flush(bucket, step, priority)
        self._pulled_in_step = set()
        self._loop = None

    # -- the plan ----------------------------------------------------------------------------
    def _remember(self, key, value):
        """Note the shape, dtype and kind of each initialized array, for the bucket plan."""
        str_id = self._keys.str_ids
        for k, v in zip(as_list(key), as_values(key, value)):
            v = first_of(v)
            if self.plan and (k in self.plan.of_key or k in self._bucket_keys):
                raise self._error(
                    'worker[%d]: key %r is initialized again after the store packed it into a '
                    'bucket (or it is a bucket\'s key): set %s=0 to keep one key per array'
                    % (self._rank, k, cfg.ENV_BUCKET_BYTES))
            if isinstance(k, str):
                # MXNet numbers string keys in the order they are initialized
                sid, str_id = (None if self._keys.slot_mode else str_id), str_id + 1
            else:
                sid = k
            self._arrays[k] = (tuple(v.shape), np.dtype(v.dtype), v.stype, sid)

    def first_step(self, key, keys, value):
        """Before the plan: note the keys the first step pushes, and push copies of the small
        CPU arrays among them.

        MXNet's dist store keeps a pushed CPU array as the key's buffer and pulls into it
        (``KVStoreDist::PushImpl``: "avoid memory copy"): the gradient array then receives
        the weights.  The plan pulls the first step's arrays once more (rank 0, for the
        buckets' values), possibly after the second step's gradients are written to those
        arrays (when the first step's end shows only at the second step's first push); with
        copies, those pulls land in the copies.
        """
        for k, v in zip(keys, as_values(key, value)):
            if k not in self._first_seen:
                self._first_seen.add(k)
                self._first_keys.append(k)
            if first_of(v).stype != 'default':
                self._sparse_pushed.add(k)        # pushed by rows: keeps its own key
        if self._bucket_bytes <= 0:
            return value

        def shielded(v):
            if isinstance(v, (list, tuple)):
                return [shielded(x) for x in v]
            small = 2 * v.size * np.dtype(v.dtype).itemsize <= self._bucket_bytes
            if small and v.stype == 'default' and v.context.device_type == 'cpu':
                return v.copy()
            return v
        if isinstance(key, (list, tuple)):
            return [shielded(v) for v in value]
        return shielded(value)

    def _no_buckets_reason(self, optimizer):
        """Why this store keeps one key per array, or None."""
        if self._bucket_bytes <= 0:
            return '%s=0' % cfg.ENV_BUCKET_BYTES
        from ..optim import is_elementwise
        if not is_elementwise(optimizer):
            return ('%s is not known to be element-wise (its update of an element may read '
                    'others, e.g. a layer\'s norm), so the servers must update each array on '
                    'its own' % type(optimizer).__name__)
        return None

    def _server_of(self, index):
        """The server of a small array whose key the servers see as `index`."""
        servers = self._num_servers
        if self._keys.slot_mode:
            return index % servers                  # all of its slots (channel.slot_key)
        return index * 9973 % servers               # MXNet's KVStoreDist::EncodeDefaultKey

    def _assign_keys(self, plan):
        """Give each bucket a key on its members' server.  Returns the keys to initialize, in
        order, and for each its bucket (None: a padding key, string keys only)."""
        if self._tracker.string_keys:
            # MXNet numbers string keys 0, 1, ... as they are initialized: skip to the server
            next_id, keys, owners = self._keys.str_ids, [], []
            for bucket in plan.buckets:
                while self._server_of(next_id) != bucket.server:
                    keys.append(PAD_KEY_STR % next_id)
                    owners.append(None)
                    next_id += 1
                bucket.key, bucket.index = BUCKET_KEY_STR % next_id, next_id
                keys.append(bucket.key)
                owners.append(bucket)
                next_id += 1
            return keys, owners
        taken = self.int_keys_in_use()
        top = (MAX_INT_KEY // (self._num_workers * self._num_servers) - 1
               if self._keys.slot_mode else MAX_INT_KEY - 1)
        by_server = {}
        for bucket in plan.buckets:
            by_server.setdefault(bucket.server, []).append(bucket)
        for server, buckets in by_server.items():
            for bucket, key in zip(buckets, int_keys_on(server, len(buckets), top,
                                                         self._server_of, taken)):
                bucket.key = bucket.index = key
        return [b.key for b in plan.buckets], list(plan.buckets)

    def int_keys_in_use(self):
        """Every integer key this store's native store holds or reserves: the arrays', the
        buckets', the chunks' and the reserved ones.  A new bucket or chunk key is chosen
        outside it (MXNet fixes a key's size at its first init)."""
        return (set(self._arrays) | set(self._bucket_keys) | set(self.chunks.taken())
                | {k for k in RESERVED_KEYS if not isinstance(k, str)})

    def learn(self, optimizer, sent_optimizer, rejoining, send_control):
        """After the first step: pack the small arrays it pushed into buckets.

        Collective: every worker learns the same plan from the same arrays.  Each waits until
        its first step's pushes are applied and meets the others in a barrier, so the servers
        hold every worker's first step; rank 0 then tells the servers the plan (a
        ``buckets`` command: each server's buckets take over their members' optimizer state
        there) and initializes the bucket keys with the members' weights as the servers hold
        them.  No worker pushes a packed array on its own key after this.
        """
        pushed, self._first_keys = self._first_keys, None
        self.plan, self._bucket_keys = BucketPlan([]), {}
        if self.chunks:
            logger.info('worker[%d] %s', self._rank, self.chunks.plan.describe())
        why = self._no_buckets_reason(optimizer)
        if why is not None:
            if self._bucket_bytes > 0:
                logger.warning('worker[%d] one key per array: %s', self._rank, why)
            return
        infos = self._array_infos(pushed, sent_optimizer)
        size = (fitted_bucket_bytes(infos, self._bucket_bytes) if self._fit_buckets
                else self._bucket_bytes)
        plan = plan_buckets(infos, size, self._bigarray_bound)
        if not plan:
            return
        try:
            keys, owners = self._assign_keys(plan)
        except ValueError as err:
            logger.info('worker[%d] one key per array: %s', self._rank, err)
            return
        dtypes = [np.dtype(b.group[1]) for b in plan.buckets]
        message = ('worker[%d]: the other workers did not finish their first step within %g s '
                   '(%s): a worker died or is stopped' % (self._rank, self._timeout,
                                                           cfg.ENV_TIMEOUT))
        with process_exit.bounded(self._timeout, message):
            if not rejoining:             # a rejoiner's plan is the one the servers have
                nd.waitall()              # this worker's first step is applied on the servers
                self.native._barrier()    # and so is every worker's
            if self._rank == 0:
                send_control('buckets', [self._server_spec(b) for b in plan.buckets])
            values = self._initial_values(owners, dtypes)
            self._init_keys(keys, values)
        self.plan, self._bucket_keys = plan, {b.key: b for b in plan.buckets}
        from .packer import Packer
        self._packer = Packer(plan, dtypes, host=self._host_copies)
        if self._tracker.learned:
            self._packer.expect(self._tracker.expected)
        logger.info('worker[%d] %s', self._rank, plan.describe())

    def _array_infos(self, pushed, sent_optimizer):
        """What the plan needs to know of the arrays `pushed` (keys, in push order)."""
        from ..optim import server_multipliers
        arrays = []
        for k in pushed:
            shape, dtype, stype, sid = self._arrays.get(k, ((), None, None, None))
            eligible = (stype == 'default' and sid is not None and k not in RESERVED_KEYS
                        and k not in self._sparse_pushed)
            group = ((self._server_of(sid), dtype.str)
                     + server_multipliers(sent_optimizer, self._natural_of.get(sid, sid))
                     ) if eligible else ()
            arrays.append(ArrayInfo(k, shape, int(np.prod(shape)),
                                    dtype.itemsize if eligible else 0, group, eligible))
        return arrays

    def _server_spec(self, bucket):
        """What the servers need to know of a bucket (plain data, sent in a command)."""
        members = [(self._arrays[m.key][3], m.offset, m.size, m.shape) for m in bucket.members]
        return {'index': bucket.index, 'payload': bucket.payload, 'length': bucket.length,
                'members': members, 'lr_mult': bucket.group[2], 'wd_mult': bucket.group[3]}

    def _initial_values(self, owners, dtypes):
        """The values of the keys to initialize: rank 0 pulls each bucket's members as the
        servers hold them; other ranks' values are not used (MXNet's init takes rank 0's)."""
        values = []
        for bucket in owners:
            if bucket is None:
                values.append(nd.zeros(1))
                continue
            value = nd.zeros(bucket.length, dtype=dtypes[bucket.number])
            if self._rank == 0:
                for m in bucket.members:
                    self.native.pull(self._keys.mine(m.key),
                                  out=value[m.offset:m.offset + m.size].reshape(m.shape))
            values.append(value)
        nd.waitall()
        return values

    # -- a step's traffic through the buckets ----------------------------------------------
    def _stage(self, keys, values, outs, step, priority, loop):
        """Pack the bucketed arrays of a push; push the buckets now complete.  Returns the
        keys that keep their own (and their values and outs), or None.

        The arrays are copied into their buckets many at a time: at a bucket's push, or at
        the end of this call for a bucket not complete by then, unless its number is in
        `loop` (the buckets that the caller's loop over the parameters completes, in which
        nothing writes to a gradient between two calls: see :meth:`_loop_of`)."""
        own = ([], [], [])
        of_key = self.plan.of_key
        for i, k in enumerate(keys):
            found = of_key.get(k)
            if found is None:
                own[0].append(k)
                own[1].append(values[i])
                own[2].append(None if outs is None else outs[i])
            else:
                self._stage_one(k, found[0], found[1], values[i],
                                None if outs is None else outs[i], step, priority)
        for bucket in self._packer.deferring():
            if bucket.number not in loop:
                self._packer.gather(bucket)
        return own if own[0] else None

    def _stage_one(self, key, bucket, member, value, out, step, priority):
        """Stage `key`'s `value` in its bucket (deferred: see :meth:`_stage`), note where its
        weights go (`out`, or None for a push), and push the bucket if now complete."""
        complete = self._packer.stage(bucket, member, value, defer=True)
        if out is not None:
            if step.fast:
                self._waiting[bucket.number].append((member, out))
            else:
                step.deferred.append((key, out, priority, True))
        if complete:
            self._flush(bucket, step, priority)

    def _loop_of(self, frame):
        """The numbers of the buckets that the loop calling :meth:`pushpull` will complete,
        if `frame` (the caller's) is a loop known to call it once per parameter and do nothing
        else in between: gluon.Trainer's and Module's (MXNet 1.9.1).  Then a bucket's members
        can wait for its last one and be copied in one operation.  Otherwise an empty set."""
        loop = self._loop
        if loop is not None and loop[0] is frame:
            return loop[1]
        pushed = _keys_pushed_by(frame)
        if pushed is None:
            return ()
        numbers = frozenset(b.number for b in self.plan.buckets
                            if self._packer.needs(b) <= pushed)
        self._loop = (frame, numbers)
        return numbers

    def _flush(self, bucket, step, priority):
        """Push `bucket`; on the fast path pull it at once and unpack what waits for it."""
        key = self._keys.mine(bucket.key)
        send = self._packer.take(bucket)
        if not step.fast:
            self.native.push(key, send, priority=priority)
            return
        # the pull lands in the buffer just pushed (Packer.recv): the window waits on it
        self.enter_window(send)
        self.native.push(key, send, priority=priority)
        recv = self._packer.recv(bucket)
        self.native.pull(key, out=recv, priority=priority)
        self._pulled_in_step.add(bucket.number)
        waiting = self._waiting.pop(bucket.number, ())
        self._packer.scatter(bucket, waiting)
        # the step's end waits for the pull (so for the push: the server answers a pull
        # after the pushes before it), not for the copies out of it, which MXNet orders
        # before anything that reads the callers' arrays
        step.pulled([m.key for m, _ in waiting], recv)

    def _pull_through_buckets(self, key, out, priority, ignore_sparse, step, pulled=None):
        """Pull `key` (or a list), the bucketed ones from their bucket.  `step`: the fast step
        in progress that pushed them; `pulled`: at a release, bucket number -> the (member,
        out) pairs to unpack from the bucket, which the caller unpacks once it has issued every
        pull (each bucket is pulled once)."""
        own_keys, own_outs = [], []
        unpack = {} if pulled is None else pulled
        for k, o in zip(as_list(key), as_values(key, out)):
            found = self.plan.bucket_of(k)
            if found is None:
                own_keys.append(k)
                own_outs.append(o)
                continue
            bucket, member = found
            if step is not None and bucket.number not in self._pulled_in_step:
                self._waiting[bucket.number].append((member, o))
                continue
            if step is None and bucket.number not in unpack:
                if pulled is not None and self._keys.slot_mode:
                    self.refresh(bucket.key, priority)
                self.native.pull(self._keys.mine(bucket.key), out=self._packer.recv(bucket),
                              priority=priority)
            unpack.setdefault(bucket.number, []).append((member, o))
            if step is not None:
                step.pulled([k], o)
        if pulled is None:
            self._unpack(unpack)
        if own_keys:
            if pulled is not None and self._keys.slot_mode:
                self.refresh(own_keys, priority)
            self.native.pull(self._keys.mine(own_keys), out=own_outs, priority=priority,
                          ignore_sparse=ignore_sparse)
            if step is not None:
                step.pulled(own_keys, own_outs)

    def _unpack(self, unpack):
        """Copy the pulled weights out of their buckets: `unpack` maps a bucket number to its
        (member, out) pairs."""
        for number, pairs in unpack.items():
            self._packer.scatter(self.plan.buckets[number], pairs)


def _keys_pushed_by(frame):
    """The keys that `frame`'s loop pushes in one pass, if `frame` runs a loop of MXNet 1.9.1
    known to call the store's ``pushpull`` once per parameter with nothing between the calls
    that writes to an array: ``gluon.Trainer._allreduce_grads`` (keys: the parameters'
    indices) and ``model._update_params_on_kvstore`` (Module; keys: the parameters' names).
    Otherwise None."""
    if not _LOOPS:
        # looked up at the first use: this module is imported while MXNet is importing
        from mxnet.gluon.trainer import Trainer
        from mxnet import model
        _LOOPS.update({Trainer._allreduce_grads.__code__: 'trainer',
                       model._update_params_on_kvstore.__code__: 'module'})
    kind = _LOOPS.get(frame.f_code)
    if kind == 'trainer':
        trainer = frame.f_locals['self']
        return {i for i, p in enumerate(trainer._params) if p.grad_req != 'null'}
    if kind == 'module':
        local = frame.f_locals
        return {name for name, grads in zip(local['param_names'], local['grad_arrays'])
                if grads[0] is not None}
    return None


_LOOPS = {}      # code object -> which loop of MXNet's it is


# the store types are registered now if MXNet's import finished inside this module's import
module_done(__name__)   # (mxnet_ssp/__init__.py: _STORE_CHAIN)
