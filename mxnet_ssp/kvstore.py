"""The KVStore types of mxnet-ssp: ``dist_ssp``, ``dist_dssp``, ``dist_async``, ``dist_softsync``.

A :class:`SSPKVStore` wraps MXNet's native ``dist_async`` store: tensors travel
over MXNet's own ps-lite data path and the servers apply every push with the
optimizer the workers sent.  On top of that:

* ``dist_ssp`` / ``dist_dssp`` decide *when a worker may go on*: at the end of
  every step the worker reports its clock to the synchronization controller
  and issues the step's pulls only once it is released (Algorithm 1 of the
  DSSP paper; see :mod:`mxnet_ssp.core.sync`).
* ``dist_async`` (replacing MXNet's registration of that name once
  mxnet_ssp is imported; ``MXNET_SSP_WRAP_ASYNC=0`` keeps MXNet's own) and
  ``dist_softsync`` never hold a worker.  ``dist_softsync`` is Rudra's
  n-softsync: the servers apply one averaged update per ``floor(workers / n)``
  gradients.
* With an optimizer that needs the sender of each gradient (the
  :class:`mxnet_ssp.optim.WorkerAwareOptimizer` rules: lr / staleness,
  DC-ASGD) and always under ``dist_softsync``, the store runs in *slot mode*:
  each worker pushes and pulls a parameter through its own key slot
  (:mod:`mxnet_ssp.ps.slots`), so the servers know who sent each gradient and
  its staleness.  Cost: M slots per parameter on the servers.

The modules this store is made of: :mod:`~mxnet_ssp.ps.native` (MXNet's store
under it), :mod:`~mxnet_ssp.ps.steps` (where a step ends; what it measures),
:mod:`~mxnet_ssp.ps.discovery` and :mod:`~mxnet_ssp.controller.client` (the controller),
:mod:`~mxnet_ssp.ps.channel` (what travels to the servers), :mod:`~mxnet_ssp.ps._process`
(when it shuts down).

Worker-side contract
--------------------
* ``push`` and ``pushpull`` return without waiting, except, in SSP/DSSP, the
  call that completes a step (see :mod:`mxnet_ssp.ps.steps`), which blocks
  until the controller releases this worker.  Pulls of keys pushed in the
  current step are deferred to the release unless the release is already
  certain; all other pulls are issued at once.
* One decision per step: the pushes of the step are applied on the servers
  before the clock is reported, and its pulls read weights the decision
  allowed, so a released worker reads every gradient that counted for its
  release.
* Learning-rate changes (``Trainer.set_learning_rate``, the optimizer's
  ``lr_scheduler`` called with this worker's step number, as MXNet counts
  updates) reach the servers before the first push of the next step (rank 0
  sends them, after its earlier pushes are applied).
* Not thread-safe: call it from one training thread, as MXNet's stores.
"""
import collections
import logging
import os
import pickle
import sys
import time

import numpy as np
from mxnet import ndarray as nd
from mxnet.base import py_str
from mxnet.kvstore.base import KVStoreBase

from .ps import _process
from .ps import discovery
from . import config as cfg
from .config import job_settings, sender
from .core.buckets import (BUCKET_KEY_STR, PAD_KEY_STR, ArrayInfo, BucketPlan, int_keys_on,
                         plan_buckets)
from .ps.channel import (ABORT, DISCOVERY_KEY, DISCOVERY_KEY_STR, MAX_INT_KEY, RESERVED_KEYS, Control,
                         UpdaterSpec, refresh_marker)
from .controller.client import ControllerClient
from .ps.native import FreedNative, create_native, free_native
from .controller.protocol import ControllerError, describe_losses
from .ps.slots import KeyLayout, SlotKeyError, as_list, as_values, has_row_sparse
from .ps.steps import Step, StepLog, StepTracker

__all__ = ['SSPKVStore', 'SSPError', 'create']

logger = logging.getLogger(__name__)


class SSPError(RuntimeError):
    """The store cannot go on; the message says why and what to do."""


class _LocalUpdater:
    """What gluon.Trainer reads as ``kvstore._updater.optimizer`` after load_states."""

    def __init__(self, optimizer):
        self.optimizer = optimizer


class SSPKVStore(KVStoreBase):
    """A distributed KVStore of one of the types above.

    Parameters
    ----------
    store : {'dist_ssp', 'dist_dssp', 'dist_async', 'dist_softsync'}
    **settings
        ``staleness`` (``s``, ``'s'``, ``(sL, sU)`` or ``'sL,sU'``), ``mode``
        (``'bounded'``, ``'paper'`` or ``'threshold'``, see :mod:`mxnet_ssp.core.sync`)
        and ``timeout`` (seconds) for SSP/DSSP;
        ``splits`` (n) for ``dist_softsync``; ``metrics_dir`` and
        ``staleness_log`` for all.  Anything not given comes from the
        environment (``MXNET_SSP_*``, see :mod:`mxnet_ssp.config`).
    """

    store_type = None

    def __init__(self, store=None, **settings):
        store = store or self.store_type
        self._bucket_bytes = cfg.bucket_bytes(value=settings.pop('bucket_bytes', None))
        self._host_copies = cfg.host_copies()
        self._host_updates = cfg.host_updates()
        self._config = cfg.from_env(store, **settings)
        self._rejoining = cfg.rejoining()   # a replacement of a lost worker (elastic mode)
        if self._rejoining and not self._config.elastic:
            raise SSPError('%s=1 (a restarted worker rejoining the job) needs elastic mode: '
                           'set %s in every process' % (cfg.ENV_REJOIN, cfg.ENV_ELASTIC))
        if self._config.store in cfg.SERVER_SYNC_TYPES and self._config.elastic:
            raise SSPError('%s (BSP) cannot go on without a lost worker: MXNet\'s servers wait '
                           'for every worker\'s push of each key; unset %s, or use dist_ssp, '
                           'dist_dssp or dist_async for elastic training'
                           % (self._config.store, cfg.ENV_ELASTIC))
        self._kv = create_native(self._config.timeout,
                                 'dist_sync' if self._config.store in cfg.SERVER_SYNC_TYPES
                                 else 'dist_async')
        self._rank = self._kv.rank
        if self._rejoining and self._rank == 0:
            # MXNet's own free of the native store would wait in ps-lite's barrier for ever
            free_native(self._kv, self._config.timeout, 0, barrier=False)
            raise SSPError('worker 0 cannot rejoin: MXNet\'s init on rank 0 pushes its initial '
                           'values, which the servers would apply as a gradient to the trained '
                           'weights; the job goes on without it (docs/elastic.md)')
        self._rejoin_pulls = []           # rejoining, first step: (key, out) to pull after it
        self._start_clock = 0             # the clock this process started at (a rejoiner's)
        self._num_workers = self._kv.num_workers
        self._num_servers = cfg.num_servers()     # ps-lite read the same variable
        if self._config.store == 'dist_softsync':
            cfg.parse_splits(self._config.splits, self._num_workers,
                             source='splits' if 'splits' in settings else cfg.ENV_SOFTSYNC_SPLITS)
        self._tracker = StepTracker()
        self._step = None                 # the _Step in progress, None between steps
        self._next_guaranteed = self._config.s_lower >= 1   # is step 1 released for sure?
        self._next_visible = 0            # t_slowest the next fast step may rely on
        self._optimizer = None
        self._keys = KeyLayout(self._rank, self._num_servers)   # M workers in slot mode
        self._refresh = {}                # slot mode, SSP slow path: key -> numpy marker
        self._lr_sent = None
        self._client = None
        self._clock = 0
        self._closed = False
        self._log = StepLog(self._rank, self._config.metrics_dir)
        self._arrays = {}                 # key -> (shape, dtype, stype, server-side index)
        self._plan = None                 # the BucketPlan, decided at the first push
        self._bucket_keys = {}            # bucket key -> Bucket
        self._packer = None
        # bucket number -> [(member, out)] to unpack
        self._waiting = collections.defaultdict(list)
        self._pulled_in_step = set()      # buckets pulled in this (fast) step
        self._loop = None                 # (caller's frame, buckets it completes): see _loop_of
        self._sent_optimizer = None
        self._first_keys = []             # the first step's pushed keys, in order
        self._first_seen = set()
        self._sparse_pushed = set()       # keys whose first-step gradients were sparse
        self.last_release = None
        logger.info('worker[%d] %s', self._rank, self._config.describe())
        _process.adopt(self)      # closed and freed at exit in the same phase on every worker

    # -- identity ------------------------------------------------------------
    @property
    def type(self):
        """The store type, e.g. ``'dist_dssp'``."""
        return self._config.store

    @property
    def rank(self):
        """This worker's rank, as assigned by ps-lite."""
        return self._rank

    @property
    def num_workers(self):
        """Number of workers in the job."""
        return self._num_workers

    @property
    def config(self):
        """The :class:`~mxnet_ssp.config.SyncConfig` in effect."""
        return self._config

    @property
    def clock(self):
        """Steps this worker has completed."""
        return self._clock

    @property
    def slot_mode(self):
        """True when every worker pushes and pulls through its own key slots."""
        return self._keys.slot_mode

    @property
    def data_path(self):
        """What this store's traffic travels as: its class, the buckets of its plan (0 before
        the first step ends, or with one key per array), the arrays they hold, and why MXNet's
        own store serves every call (None: it does not)."""
        plan = self._plan
        return {'store_class': '%s.%s' % (type(self).__module__, type(self).__name__),
                'buckets': len(plan.buckets) if plan else 0,
                'arrays_in_buckets': len(plan.of_key) if plan else 0,
                'handed_off': self.handed_off}

    @property
    def _updater(self):
        return _LocalUpdater(self._optimizer)

    #: The :class:`~mxnet_ssp.core.sync.Release` of the last completed step (None before).
    last_release = None
    #: Every worker's gradients up to this clock are in the weights the last step pulled.
    visible_clock = 0

    @property
    def lost_workers(self):
        """Elastic mode: the workers the controller dropped so far, as this worker has heard
        (dicts ``rank``, ``clock``, ``after_s``; complete after :meth:`close`)."""
        return list(self._client.lost) if self._client is not None else []

    @property
    def leader(self):
        """The rank that sends the job's commands to the servers (learning rate, save, load):
        0, or in elastic mode the lowest rank not lost."""
        if self._client is None or not self._client.lost:
            return 0
        lost = {x['rank'] for x in self._client.lost}
        return min(r for r in range(self._num_workers) if r not in lost)

    def _barrier(self):
        """Wait for every worker (MXNet's ``kv._barrier()``).  Elastic mode, once connected to
        the controller: every worker neither lost nor finished, through the controller (ps-lite's
        barrier would wait for lost workers for ever)."""
        if self._config.elastic and self._client is not None and not self._closed:
            try:
                self._client.barrier()
            except ControllerError as err:
                self._fail(err)
            return
        self._kv._barrier()

    @staticmethod
    def is_capable(capability):
        """Whether the store supports `capability`: optimizer, pushpull, broadcast."""
        return capability.lower() in (KVStoreBase.OPTIMIZER, 'pushpull', 'broadcast')

    def _init_slots(self, key, value):
        """Collective init of every worker's slot of `key` (or of each key of a list)."""
        try:
            keys, values = self._keys.init_block(key, value, nd.zeros(1, dtype=np.float32))
        except SlotKeyError as err:
            raise SSPError(str(err)) from err
        self._kv.init(keys, values)

    # -- data path -------------------------------------------------------------
    def init(self, key, value):
        """Initialize `key` on the servers (collective, like the native store)."""
        if has_row_sparse(value):
            self._sparse_case('key %r' % (key,))
        self._tracker.on_init(as_list(key), as_values(key, value))
        self._remember(key, value)
        if not self._keys.slot_mode:
            self._kv.init(key, value)
            self._keys.count_string_keys(key)
        else:
            self._init_slots(key, value)

    def broadcast(self, key, value, out, priority=0):
        """Initialize `key` with `value` and pull it into `out` (collective)."""
        if has_row_sparse(value) or has_row_sparse(out):
            self._sparse_case('key %r' % (key,))
        self._tracker.on_init(as_list(key), as_values(key, value))
        self._remember(key, value)
        if not self._keys.slot_mode:
            self._kv.broadcast(key, value, out, priority=priority)
            self._keys.count_string_keys(key)
        else:
            self._init_slots(key, value)
            self._kv.pull(self._keys.mine(key), out=out, priority=priority)

    def push(self, key, value, priority=0):
        """Push gradients; in SSP/DSSP blocks only when this push completes a step."""
        if self._plan is None and has_row_sparse(value):
            self._sparse_case('a push of key %r' % (key,))
        keys = as_list(key)
        step = self._begin(keys)
        if self._first_keys is not None:
            value = self._first_step(key, keys, value)
            if self._rejoining:
                self._rejoin_step(keys, None, priority)
                return
        if self._plan:
            own = self._stage(keys, as_values(key, value), None, step, priority, ())
            if own:
                self._kv.push(self._keys.mine(own[0]), own[1], priority=priority)
        else:
            self._kv.push(self._keys.mine(key), value, priority=priority)
        step.unpulled.update(keys)
        if self._tracker.on_push(keys):
            self._finish_step(priority)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Pull weights; deferred to the release if `key` was pushed in this SSP step."""
        keys = as_list(key)
        step = self._step
        in_step = step is not None and any(self._tracker.in_step(k) for k in keys)
        if in_step and self._rejoining:
            self._rejoin_pulls.append((key, out))
            return
        if in_step and not step.fast:
            step.deferred.append((key, out, priority, ignore_sparse))
            return
        if self._plan and any(self._plan.bucket_of(k) for k in keys):
            self._pull_through_buckets(key, out, priority, ignore_sparse, step if in_step else None)
            return
        self._kv.pull(self._keys.mine(key), out=out, priority=priority, ignore_sparse=ignore_sparse)
        if in_step:
            step.pulled(keys, out)

    def pushpull(self, key, value, out=None, priority=0):
        """Push `value` and pull the updated weights into `out` (or `value`)."""
        step, plan = self._step, self._plan
        found = (plan.of_key.get(key) if step is not None and plan is not None
                 and not self._closed and not isinstance(key, (list, tuple)) else None)
        if found is not None and not self._tracker.in_step(key):
            # one bucketed key in a step in progress, as gluon.Trainer and Module push every
            # step (335 calls per ResNet-110 step): what _begin and _stage do for it, without
            # their other cases
            bucket, member = found
            self._stage_one(key, bucket, member, value, value if out is None else out, step,
                            priority)
            if bucket.number not in self._loop_of(sys._getframe(1)):
                self._packer.gather(bucket)
            if self._tracker.on_push((key,)):
                self._finish_step(priority)
            return
        if self.handed_off is not None or (self._plan is None and (
                (has_row_sparse(value) and self._sparse_case('a push of key %r' % (key,)))
                or (self._optimizer is None and self._no_optimizer_case()))):
            return self._kv.pushpull(key, value, out=out, priority=priority)
        keys = as_list(key)
        out = value if out is None else out
        step = self._begin(keys)
        if self._first_keys is not None:
            value = self._first_step(key, keys, value)
            if self._rejoining:
                self._rejoin_step(keys, (key, out), priority)
                return
        if self._plan:
            own = self._stage(keys, as_values(key, value), as_values(key, out), step, priority,
                              self._loop_of(sys._getframe(1)))
            if own:
                own_keys, own_values, own_outs = own
                if step.fast:
                    self._kv.pushpull(self._keys.mine(own_keys), own_values, out=own_outs,
                                      priority=priority)
                    step.pulled(own_keys, own_outs)
                else:
                    self._kv.push(self._keys.mine(own_keys), own_values, priority=priority)
                    step.deferred.append((own_keys, own_outs, priority, True))
        elif step.fast:
            self._kv.pushpull(self._keys.mine(key), value, out=out, priority=priority)
            step.pulled(keys, out)
        else:
            self._kv.push(self._keys.mine(key), value, priority=priority)
            step.deferred.append((key, out, priority, True))
        if self._tracker.on_push(keys):
            self._finish_step(priority)

    # -- buckets (mxnet_ssp.core.buckets) ----------------------------------------------
    def _remember(self, key, value):
        """Note the shape, dtype and kind of each initialized array, for the bucket plan."""
        str_id = self._keys.str_ids
        for k, v in zip(as_list(key), as_values(key, value)):
            v = v[0] if isinstance(v, (list, tuple)) else v
            if self._plan and (k in self._plan.of_key or k in self._bucket_keys):
                raise SSPError(
                    'worker[%d]: key %r is initialized again after the store packed it into a '
                    'bucket (or it is a bucket\'s key): set %s=0 to keep one key per array'
                    % (self._rank, k, cfg.ENV_BUCKET_BYTES))
            if isinstance(k, str):
                # MXNet numbers string keys in the order they are initialized
                sid, str_id = (None if self._keys.slot_mode else str_id), str_id + 1
            else:
                sid = k
            self._arrays[k] = (tuple(v.shape), np.dtype(v.dtype), v.stype, sid)

    def _first_step(self, key, keys, value):
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
            if (v[0] if isinstance(v, (list, tuple)) else v).stype != 'default':
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

    def _rejoin_step(self, keys, pull, priority):
        """A rejoining worker's first step: note the keys (the bucket plan is learnt from
        them at the step's end, as every worker did at its first step), push nothing (the
        servers have taken the small arrays' weights into buckets: a push to their own keys
        would update copies nobody reads), pull after the step."""
        if pull is not None:
            self._rejoin_pulls.append(pull)
        if self._tracker.on_push(keys):
            self._finish_step(priority)

    def _rejoined(self):
        """After a rejoiner's first step: pull the current weights into every array the step
        asked for (through the buckets, refreshed in slot mode), then train as any worker."""
        pulls, self._rejoin_pulls, self._rejoining = self._rejoin_pulls, [], False
        pulled = {}
        for key, out in pulls:
            if self._plan and any(self._plan.bucket_of(k) for k in as_list(key)):
                self._pull_through_buckets(key, out, 0, True, None, pulled)
                continue
            if self._keys.slot_mode:
                self._push_refresh(key, 0)
            self._kv.pull(self._keys.mine(key), out=out)
        self._unpack(pulled)
        with _process.bounded(self._config.timeout, self._no_apply_message()):
            nd.waitall()

    def _no_buckets_reason(self):
        """Why this store keeps one key per array, or None."""
        if self._bucket_bytes <= 0:
            return '%s=0' % cfg.ENV_BUCKET_BYTES
        from .optim import is_elementwise
        if not is_elementwise(self._optimizer):
            return ('%s is not known to be element-wise (its update of an element may read '
                    'others, e.g. a layer\'s norm), so the servers must update each array on '
                    'its own' % type(self._optimizer).__name__)
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
        taken = set(self._arrays) | {k for k in RESERVED_KEYS if not isinstance(k, str)}
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

    def _learn_plan(self):
        """After the first step: pack the small arrays it pushed into buckets.

        Collective: every worker learns the same plan from the same arrays.  Each waits until
        its first step's pushes are applied and meets the others in a barrier, so the servers
        hold every worker's first step; rank 0 then tells the servers the plan (a
        ``buckets`` command: each server's buckets take over their members' optimizer state
        there) and initializes the bucket keys with the members' weights as the servers hold
        them.  No worker pushes a packed array on its own key after this.
        """
        pushed, self._first_keys = self._first_keys, None
        self._plan, self._bucket_keys = BucketPlan([]), {}
        why = self._no_buckets_reason()
        if why is not None:
            if self._bucket_bytes > 0:
                logger.warning('worker[%d] one key per array: %s', self._rank, why)
            return
        from .optim import server_multipliers
        arrays = []
        for k in pushed:
            shape, dtype, stype, sid = self._arrays.get(k, ((), None, None, None))
            eligible = (stype == 'default' and sid is not None and k not in RESERVED_KEYS
                        and k not in self._sparse_pushed)
            group = ((self._server_of(sid), dtype.str)
                     + server_multipliers(self._sent_optimizer, sid)) if eligible else ()
            arrays.append(ArrayInfo(k, shape, int(np.prod(shape)),
                                    dtype.itemsize if eligible else 0, group, eligible))
        plan = plan_buckets(arrays, self._bucket_bytes, cfg.bigarray_bound())
        if not plan:
            return
        try:
            keys, owners = self._assign_keys(plan)
        except ValueError as err:
            logger.info('worker[%d] one key per array: %s', self._rank, err)
            return
        dtypes = [np.dtype(b.group[1]) for b in plan.buckets]
        message = ('worker[%d]: the other workers did not finish their first step within %g s '
                   '(%s): a worker died or is stopped' % (self._rank, self._config.timeout,
                                                           cfg.ENV_TIMEOUT))
        with _process.bounded(self._config.timeout, message):
            if not self._rejoining:       # a rejoiner's plan is the one the servers have
                nd.waitall()              # this worker's first step is applied on the servers
                self._kv._barrier()       # and so is every worker's
            if self._rank == 0:
                self._send_control('buckets', [self._server_spec(b) for b in plan.buckets])
            values = self._initial_values(owners, dtypes)
            if self._keys.slot_mode:
                self._init_slots(keys, values)
            else:
                self._kv.init(keys, values)
                self._keys.count_string_keys(keys)
        self._plan, self._bucket_keys = plan, {b.key: b for b in plan.buckets}
        from .ps.packer import Packer
        self._packer = Packer(plan, dtypes, host=self._host_copies)
        if self._tracker.learned:
            self._packer.expect(self._tracker.expected)
        logger.info('worker[%d] %s', self._rank, plan.describe())

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
                    self._kv.pull(self._keys.mine(m.key),
                                  out=value[m.offset:m.offset + m.size].reshape(m.shape))
            values.append(value)
        nd.waitall()
        return values

    def _stage(self, keys, values, outs, step, priority, loop):
        """Pack the bucketed arrays of a push; push the buckets now complete.  Returns the
        keys that keep their own (and their values and outs), or None.

        The arrays are copied into their buckets many at a time: at a bucket's push, or at
        the end of this call for a bucket not complete by then, unless its number is in
        `loop` (the buckets that the caller's loop over the parameters completes, in which
        nothing writes to a gradient between two calls: see :meth:`_loop_of`)."""
        own = ([], [], [])
        of_key = self._plan.of_key
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
        numbers = frozenset(b.number for b in self._plan.buckets
                            if self._packer.needs(b) <= pushed)
        self._loop = (frame, numbers)
        return numbers

    def _flush(self, bucket, step, priority):
        """Push `bucket`; on the fast path pull it at once and unpack what waits for it."""
        key = self._keys.mine(bucket.key)
        self._kv.push(key, self._packer.take(bucket), priority=priority)
        if step.fast:
            recv = self._packer.recv(bucket)
            self._kv.pull(key, out=recv, priority=priority)
            self._pulled_in_step.add(bucket.number)
            waiting = self._waiting.pop(bucket.number, ())
            self._packer.scatter(bucket, waiting)
            # the step's end waits for the pull (so for the push: the server answers a pull
            # after the pushes before it), not for the copies out of it, which MXNet orders
            # before anything that reads the callers' arrays
            step.pulled([m.key for m, _ in waiting], recv)

    def _finish_step(self, priority):
        """The step's last push: push the buckets still holding gradients, then end it."""
        step = self._step
        if self._packer is not None and step is not None:
            for bucket in self._packer.pending():
                self._flush(bucket, step, priority)
        self._pulled_in_step = set()
        self._loop = None
        self._end_step()
        if self._plan is None:
            self._learn_plan()
        if self._rejoining:
            self._rejoined()

    def _pull_through_buckets(self, key, out, priority, ignore_sparse, step, pulled=None):
        """Pull `key` (or a list), the bucketed ones from their bucket.  `step`: the fast step
        in progress that pushed them; `pulled`: at a release, bucket number -> the (member,
        out) pairs to unpack from the bucket, which the caller unpacks once it has issued every
        pull (each bucket is pulled once)."""
        own_keys, own_outs = [], []
        unpack = {} if pulled is None else pulled
        for k, o in zip(as_list(key), as_values(key, out)):
            found = self._plan.bucket_of(k)
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
                    self._push_refresh(bucket.key, priority)
                self._kv.pull(self._keys.mine(bucket.key), out=self._packer.recv(bucket),
                              priority=priority)
            unpack.setdefault(bucket.number, []).append((member, o))
            if step is not None:
                step.pulled([k], o)
        if pulled is None:
            self._unpack(unpack)
        if own_keys:
            if pulled is not None and self._keys.slot_mode:
                self._push_refresh(own_keys, priority)
            self._kv.pull(self._keys.mine(own_keys), out=own_outs, priority=priority,
                          ignore_sparse=ignore_sparse)
            if step is not None:
                step.pulled(own_keys, own_outs)

    def _unpack(self, unpack):
        """Copy the pulled weights out of their buckets: `unpack` maps a bucket number to its
        (member, out) pairs."""
        for number, pairs in unpack.items():
            self._packer.scatter(self._plan.buckets[number], pairs)

    #: Set by :class:`mxnet_ssp.stock_names.StockNameStore` once MXNet's own store serves
    #: every call; the stores named by mxnet-ssp never hand off.
    handed_off = None

    def _sparse_case(self, what):
        """`what` holds row_sparse arrays, which this store's data path does not serve."""
        raise SSPError('worker[%d]: %s: %s holds row_sparse arrays, which mxnet-ssp\'s stores '
                       'do not serve; use dense parameters (e.g. Embedding(sparse_grad=False)), '
                       'or dist_async, which hands them to MXNet\'s own store'
                       % (self._rank, self.type, what))

    def _no_optimizer_case(self):
        """A push before set_optimizer: False here (the push is refused, naming the call)."""
        return False

    def _refuse(self, message):
        raise SSPError(message)

    def set_gradient_compression(self, compression_params):
        """Refused: the buckets and the servers' update rules of this store are not shown to
        keep MXNet's compression exact."""
        raise SSPError('worker[%d]: %s does not support gradient compression (%r); use '
                       'dist_async or dist_sync, which hand it to MXNet\'s own store, or train '
                       'without it' % (self._rank, self.type, compression_params))

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Passed to MXNet's store for ``dist_async`` with a plain optimizer; else refused."""
        if self._config.synchronous or self._keys.slot_mode:
            raise SSPError('%s%s does not support row_sparse_pull; use dense parameters, or '
                           'dist_async with a plain optimizer'
                           % (self.type, ' in slot mode' if self._keys.slot_mode else ''))
        return self._kv.row_sparse_pull(key, out=out, priority=priority, row_ids=row_ids)

    # -- optimizer -------------------------------------------------------------
    def set_optimizer(self, optimizer):
        """Send `optimizer` to the servers, which apply every push with it.

        The optimizer is pickled and unpickled on every server, so its class
        must be importable there under the same module path.  Call it before
        the first ``init``/``broadcast`` (gluon.Trainer and Module do): rules
        that need the sender of each gradient switch the store to slot mode.
        """
        module = type(optimizer).__module__
        if module == '__main__':
            raise SSPError('optimizer class %s is defined in the script (__main__); the servers '
                           'unpickle it and cannot import it from there: define it in a module '
                           'that every server host can import' % type(optimizer).__name__)
        # imported here: `import mxnet_ssp.optim` before mxnet imports this module while
        # optim is half-initialized (its `import mxnet` runs the store registration)
        from .optim import STORES_THAT_REPORT, StalenessRequiredError, is_worker_aware
        if self._config.store in cfg.SERVER_SYNC_TYPES and is_worker_aware(optimizer):
            raise StalenessRequiredError(
                '%s needs a store that reports the staleness of each gradient: use one of %s '
                '(in %s every gradient is fresh: MXNet\'s servers sum a step\'s gradients)'
                % (type(optimizer).__name__, STORES_THAT_REPORT, self._config.store))
        slots = is_worker_aware(optimizer) or self._config.store == 'dist_softsync'
        if slots and self._tracker.expected and not self._keys.slot_mode:
            raise SSPError('worker[%d]: %s needs the sender of every gradient, so set the '
                           'optimizer before the first init/broadcast of this store'
                           % (self._rank, type(optimizer).__name__))
        self._keys.workers = self._num_workers if slots else None
        softsync_c = 1
        if self._config.store == 'dist_softsync':
            softsync_c = max(1, self._num_workers // self._config.splits)
        from .optim import with_parameter_multipliers
        self._sent_optimizer = with_parameter_multipliers(optimizer)
        spec = UpdaterSpec(self._sent_optimizer, num_workers=self._num_workers, slots=bool(slots),
                           num_servers=self._num_servers, softsync_c=softsync_c,
                           metrics_dir=self._config.metrics_dir,
                           staleness_log=self._config.staleness_log,
                           host_updates=self._host_updates,
                           agree=sender(self._rank, job_settings(self._config, self._bucket_bytes,
                                                                 self._host_updates)))
        if not self._rejoining:           # the servers have it, with the job's optimizer state
            self._kv.set_optimizer(spec)
        self._optimizer = optimizer
        self._lr_sent = self._current_lr()

    def _current_lr(self):
        opt = self._optimizer
        if opt is None:
            return None
        if opt.lr_scheduler is not None:
            # MXNet counts the update being made: step t uses lr_scheduler(t)
            return float(opt.lr_scheduler(self._clock + 1))
        return float(opt.lr)

    def _send_control(self, action, payload):
        """Run a command on every server, after this worker's pushes so far are applied."""
        body = py_str(pickle.dumps(Control(action, payload), 0))
        nd.waitall()        # commands do not queue behind pushes still in MXNet's engine
        self._kv._send_command_to_servers(0, body)

    def _sync_learning_rate(self):
        """The leader tells the servers about a learning-rate change (MXNet never does, #15919)."""
        if self._optimizer is None or self._rank != self.leader:
            return
        lr = self._current_lr()
        if lr != self._lr_sent:
            self._send_control('set_lr', lr)
            self._lr_sent = lr

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Ask every server to save its optimizer state to ``fname + '.server-<rank>'``.

        Only the leader (rank 0; elastic: the lowest rank not lost) sends the request; each
        server writes on its own host.  The state is the optimizer's per-key
        state (momentum, MeanSquare, ...), its counters and learning rate, and
        in slot mode the canonical weights, versions and per-worker backups.
        """
        if self._optimizer is None:
            raise SSPError('save_optimizer_states before set_optimizer: nothing to save')
        if self._rank == self.leader:
            self._send_control('save', os.path.abspath(fname))

    def load_optimizer_states(self, fname):
        """Restore what :meth:`save_optimizer_states` wrote (collective: every worker calls it)."""
        if self._optimizer is None:
            raise SSPError('load_optimizer_states before set_optimizer: set the optimizer first')
        if self._rank == self.leader:
            self._send_control('load', os.path.abspath(fname))
        self._barrier()

    def __getattr__(self, name):
        if name.startswith('__') or name == '_kv':
            raise AttributeError(name)
        return getattr(self._kv, name)

    # -- synchronization -------------------------------------------------------
    def _check_ready(self):
        if self._closed:
            raise SSPError('worker[%d]: the %s store is closed' % (self._rank, self.type))
        if self._optimizer is None:
            raise SSPError(
                'worker[%d]: %s needs an updater on the servers before the first push: '
                'call kv.set_optimizer(optimizer) (gluon.Trainer and Module.fit do this when '
                'they update on the kvstore); pushes without an optimizer cannot be applied'
                % (self._rank, self.type))

    def _ensure_controller(self):
        if self._client is not None:
            return
        self._check_ready()
        # MXNet forbids mixing integer and string keys in one store.  One key, so one
        # server, for every worker (also in slot mode: the servers answer a discovery
        # push before decoding slots, and a later string key skips to a whole block)
        key = DISCOVERY_KEY_STR if self._tracker.string_keys else DISCOVERY_KEY
        agree = job_settings(self._config, self._bucket_bytes, self._host_updates)
        try:
            answer = discovery.request_controller(self._kv, key, self._config, self._num_workers,
                                                  self._rank, agree)
        except discovery.DiscoveryError as err:
            raise SSPError(str(err)) from err
        finally:
            self._keys.count_string_keys(key)
        client = ControllerClient((answer['host'], answer['port']),
                                  bytes.fromhex(answer['secret']), self._rank,
                                  timeout=self._config.timeout, rejoin=self._rejoining,
                                  settings=agree, liveness=self._config.liveness)
        try:
            client.connect()
        except ControllerError as err:
            self._fail(err)
        self._client = client
        if self._rejoining:
            self._clock = self._start_clock = client.start_clock
            logger.warning('worker[%d] rejoined the job at clock %d: this first step only '
                           'learns the layout of the keys; its gradients are not pushed',
                           self._rank, self._clock)
        self._log.open()
        logger.info('worker[%d] connected to the %s controller at %s:%d',
                    self._rank, self.type, answer['host'], answer['port'])

    def _begin(self, keys):
        """Close a step that ended early, and open a step at its first push."""
        if self._config.reports_clock:
            self._ensure_controller()
        else:
            self._check_ready()
        if self._tracker.repeats(keys):
            self._tracker.close_early()
            if self._packer is not None and self._tracker.learned:
                self._packer.expect(self._tracker.expected)
            self._finish_step(0)
        if self._step is None:
            self._sync_learning_rate()    # a change made since the last step applies to this one
            # asynchronous stores never hold a worker: every step is "released for sure"
            self._step = Step(self._next_guaranteed or not self._config.synchronous)
        return self._step

    def _end_step(self):
        """Close the current step.

        Asynchronous stores only count the step.  SSP/DSSP, slow path (the
        release is not certain): wait until every push of the step is
        applied, report the clock, block until RELEASE, then issue the
        deferred pulls (in slot mode after a refresh push, which makes the
        server copy its latest weights into this worker's slot).  Fast path
        (the previous release already implies this one, because the slowest
        clock never decreases): the pulls were issued with their pushes, as
        in ``dist_async``; wait until they are complete (so the pushes are
        applied), then report; RELEASE comes back at once.
        """
        step, self._step = self._step, None
        if not self._config.synchronous:
            self._clock += 1
            if self._client is not None:      # elastic: the controller counts, never holds
                try:
                    self.last_release = self._client.clock(self._clock)
                except ControllerError as err:
                    self._fail(err)
            return
        t0 = time.perf_counter()
        with _process.bounded(self._config.timeout, self._no_apply_message()):
            if step.fast:
                for arr in step.outs:
                    arr.wait_to_read()        # each pull follows its push on the server
                if step.unpulled:
                    nd.waitall()
            else:
                nd.waitall()                  # every push of this step is applied on the servers
        t1 = time.perf_counter()
        self._clock += 1
        reported_at = time.time()
        try:
            release = self._client.clock(self._clock)
        except ControllerError as err:
            self._fail(err)
        t2 = time.perf_counter()
        if step.fast:
            authorized_at, visible = step.authorized_at, self._next_visible
        else:
            pulled = {}                   # buckets pulled at this release: what to unpack
            for key, out, priority, ignore_sparse in step.deferred:
                if self._plan and any(self._plan.bucket_of(k) for k in as_list(key)):
                    self._pull_through_buckets(key, out, priority, ignore_sparse, None, pulled)
                    continue
                if self._keys.slot_mode:
                    self._push_refresh(key, priority)
                self._kv.pull(self._keys.mine(key), out=out, priority=priority,
                              ignore_sparse=ignore_sparse)
            self._unpack(pulled)
            authorized_at, visible = reported_at + (t2 - t1), release.t_slowest
        self.last_release = release
        self.visible_clock = visible
        # The slowest clock never decreases: the next push is released for sure
        # if it would be within sL of the slowest now, or holds a granted extra.
        self._next_guaranteed = (release.extra_left > 0
                                 or self._clock + 1 - release.t_slowest <= self._config.s_lower)
        self._next_visible = release.t_slowest
        self._log.record(self._clock, step, release, (t0, t1, t2), reported_at, authorized_at,
                         visible)

    def _no_apply_message(self):
        return ('worker[%d]: the servers did not apply the pushes of step %d within %g s (%s): '
                'a server process died or is stopped'
                % (self._rank, self._clock + 1, self._config.timeout, cfg.ENV_TIMEOUT))

    def _push_refresh(self, key, priority):
        """Slot mode: make the servers copy their latest weights into this worker's slots."""
        for k in as_list(key):
            marker = self._refresh.get(k)
            if marker is None:
                marker = self._refresh[k] = refresh_marker(self._shape_of(k))
            # a fresh NDArray every time: MXNet's dist store keeps the pushed CPU array as
            # the key's receive buffer, so the pull that follows overwrites it
            self._kv.push(self._keys.mine(k), nd.array(marker), priority=priority)

    def _shape_of(self, key):
        if self._plan and key in self._bucket_keys:
            return (self._bucket_keys[key].length,)
        shapes = self._tracker.shapes
        if key not in shapes:
            raise SSPError('worker[%d]: key %r was pushed but never initialized' % (self._rank, key))
        return shapes[key]

    def _fail(self, err):
        """The job cannot go on: raise, and make sure the process will exit.

        MXNet's own shutdown waits in a barrier for every worker, which never
        comes when a peer died or hangs; so if the error is not handled, the
        exit hook ends this process with status 1 instead of hanging.
        """
        raise SSPError(_process.fatal('worker[%d]: %s' % (self._rank, err))) from err

    def abort_servers(self, message):
        """The job failed on this worker (`message`): make every server end now.  Returns
        whether the notice was sent: only by the stores without a controller (the
        asynchronous ones and BSP outside elastic mode).  Where a controller runs, it fails the
        job itself and tells every worker which rank failed; in elastic mode the job goes on
        without this worker.  Called by the exit hook of :mod:`mxnet_ssp.ps._process`."""
        if (self._config.elastic or self._client is not None
                or isinstance(self._kv, FreedNative)):
            return False
        body = py_str(pickle.dumps(Control(ABORT, message), 0))
        self._kv._send_command_to_servers(0, body)
        return True

    def free_native(self):
        """Free MXNet's native store: ps-lite's finalize barrier, so it waits for every node.

        Called at exit by :mod:`mxnet_ssp.ps._process`, after :meth:`close`, on
        every worker in the same phase (before MXNet's own exit hook stops the
        engine).  Blocks until every worker of the job gets there; later uses
        of the store raise :class:`SSPError`.  Idempotent.
        """
        native = self._kv
        if isinstance(native, FreedNative):
            return
        self._kv = FreedNative(self._rank, self.type, SSPError)
        # elastic: ps-lite's finalize barrier would wait for lost workers for ever
        free_native(native, self._config.timeout, self._rank,
                    barrier=not self._config.elastic)

    def close(self):
        """Leave the job: the controller stops counting this worker.  Idempotent.

        Never blocks: the other workers are released at once.  MXNet's native
        store stays allocated until exit, where every worker frees it in the
        same phase (see :mod:`mxnet_ssp.ps._process`); until then the store
        refuses pushes and pulls.
        """
        if self._closed:
            return
        self._closed = True
        lost = []
        if self._client is not None:
            self._step = None
            lost = self._client.leave()
            self._client.close()
        self._log.close()
        if self._config.synchronous:
            self._say(self._log.summary(self.type, self._clock - self._start_clock))
        if self._config.elastic:
            self._say(elastic_summary(self._rank, self.type, self._clock, lost))

    def _say(self, summary):
        if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
            logger.info(summary)
        else:   # the script configured no logging: the summary is still promised
            sys.stderr.write(summary + '\n')


def elastic_summary(rank, store, clock, lost):
    """The line an elastic worker prints when it leaves: its clock and the workers lost."""
    if not lost:
        return 'worker[%d] %s elastic: finished at clock %d; no worker was lost' % (
            rank, store, clock)
    return 'worker[%d] %s elastic: finished at clock %d; lost %s' % (
        rank, store, clock, describe_losses(lost))


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


def _store_class(name):
    klass = type(name, (SSPKVStore,), {'store_type': name,
                                       '__doc__': 'The %s KVStore type.' % name})
    KVStoreBase.kv_registry[name] = klass      # register() would warn when replacing dist_async
    return klass


def _stock_name_class(name):
    """MXNet's store type `name` (``dist_async``, ``dist_sync``) served by mxnet-ssp: an
    :class:`SSPKVStore` that is also MXNet's ``KVStore`` and hands what it does not serve to
    MXNet's own store (:class:`mxnet_ssp.stock_names.StockNames`)."""
    from mxnet.kvstore.kvstore import KVStore as NativeKVStore
    from .stock_names import StockNames
    return type(name, (StockNames, SSPKVStore, NativeKVStore), {
        'store_type': name, '__module__': 'mxnet_ssp.stock_names',
        '__doc__': 'MXNet\'s %s KVStore type, served by mxnet-ssp where it is faster '
                   '(mxnet_ssp.stock_names).' % name})


DistSSP = _store_class('dist_ssp')
DistDSSP = _store_class('dist_dssp')
DistSoftsync = _store_class('dist_softsync')
# MXNet's names, served unless the user keeps MXNet's own (register() would warn on replacing)
if cfg.wrap_async():
    KVStoreBase.kv_registry['dist_async'] = _stock_name_class('dist_async')
if cfg.wrap_sync():
    KVStoreBase.kv_registry['dist_sync'] = _stock_name_class('dist_sync')


def create(name, **settings):
    """Create a KVStore; like ``mx.kv.create`` but takes mxnet-ssp settings.

    Parameters
    ----------
    name : str
        ``'dist_ssp'``, ``'dist_dssp'``, ``'dist_async'`` or ``'dist_softsync'``
        (with settings), or any other MXNet type (without).
    **settings
        ``staleness``, ``mode``, ``timeout`` (SSP/DSSP), ``splits``
        (``dist_softsync``), ``metrics_dir``, ``staleness_log``.

    Examples
    --------
    >>> kv = mxnet_ssp.create('dist_dssp', staleness=(3, 15))   # doctest: +SKIP
    >>> kv = mxnet_ssp.create('dist_softsync', splits=4)         # doctest: +SKIP
    """
    if not isinstance(name, str):
        raise cfg.ConfigError('kvstore type must be a string, got %r' % (name,))
    lowered = name.lower()
    if (lowered in cfg.STORE_TYPES or lowered in cfg.ASYNC_STORE_TYPES
            or lowered in cfg.SERVER_SYNC_TYPES and lowered in KVStoreBase.kv_registry):
        klass = KVStoreBase.kv_registry.get(lowered)
        if klass is not None and issubclass(klass, SSPKVStore):
            return klass(**settings)
        return SSPKVStore(lowered, **settings)
    if settings:
        raise cfg.ConfigError('settings %s are only accepted by %s, not by kvstore type %r'
                              % (', '.join(sorted(settings)),
                                 ', '.join(tuple(cfg.STORE_TYPES) + cfg.ASYNC_STORE_TYPES), name))
    cfg.check_kvstore_name(lowered)
    from mxnet.kvstore.base import create as mx_create
    return mx_create(lowered)
