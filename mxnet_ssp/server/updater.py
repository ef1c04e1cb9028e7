"""What runs inside MXNet's server processes for the mxnet-ssp stores: the update rule.

The worker-side store sends a :class:`mxnet_ssp.ps.commands.UpdaterSpec` with
``kv.set_optimizer``; every server unpickles it as its door (:mod:`mxnet_ssp.server.door`)
around a :class:`ServerOptimizer` (so ``mxnet_ssp`` must be installed on every server host).
The door sorts every push and hands this class only gradients (:meth:`update_key`), refresh
markers (:meth:`refresh`) and commands (:meth:`control`: learning rate, buckets; save and
load, :mod:`mxnet_ssp.server.state`).  It applies the user's optimizer: in slot mode with the
sender's staleness and backup, kept per parameter by :class:`mxnet_ssp.core.staleness.KeyClock`.

This module must import in a server process, where ``import mxnet`` has not
returned (the server loop runs inside it): it only touches MXNet submodules
that are loaded before the loop starts.  Workers never import it.
"""
import json
import logging
import os

import numpy as np

from ..core.staleness import KeyClock
from ..ps.channel import slot_of
from .buckets import ServerBucket, copy_state, state_part
from .state import SavedState
from ..core.env_names import DMLC_ROLE
from .snapshots import snapshots_from_env

__all__ = ['ServerOptimizer', 'server_rank']

logger = logging.getLogger(__name__)

_SERVER_RANK = None


def server_rank():
    """This server's ps-lite rank, or None outside a server process whose node has started.

    MXNet's server object is a local of ``mxnet.kvstore_server``'s start-up function, so the
    rank is asked of ps-lite through a second KVStore handle: in a server process creating a
    ``dist`` handle starts nothing (only worker nodes connect in the constructor) and its
    rank is ps-lite's ``MyRank()``, the same as the server's own store reports.
    """
    global _SERVER_RANK
    if _SERVER_RANK is None and os.environ.get(DMLC_ROLE) == 'server':
        import ctypes
        from mxnet.base import KVStoreHandle, _LIB, c_str, check_call
        handle, rank = KVStoreHandle(), ctypes.c_int()
        check_call(_LIB.MXKVStoreCreate(c_str('dist'), ctypes.byref(handle)))
        try:
            check_call(_LIB.MXKVStoreGetRank(handle, ctypes.byref(rank)))
        finally:
            check_call(_LIB.MXKVStoreFree(handle))
        _SERVER_RANK = rank.value
    return _SERVER_RANK


class _KeyState:
    """Slot mode, per parameter k on this server: the one canonical weight and its book-keeping."""

    __slots__ = ('weight', 'clock', 'state', 'acc', 'acc_flags', 'restore', 'slot_refs',
                 'offsets', 'round_offsets')

    def __init__(self, weight, clock, state):
        self.weight = weight              # canonical weight (an NDArray owned by us)
        self.clock = clock                # versions, pulls, this softsync round (KeyClock)
        self.state = state                # optimizer state (momentum, MeanSquare, ...)
        self.acc = None                   # n-softsync: sum of the gradients of this round
        self.acc_flags = None             # a bucket's: members carried by this round's pushes
        # a bucket that took over its members: worker -> how much older each member's last
        # pull is than the bucket's clock says (the members were pulled at different
        # versions), for that worker's next gradient; and the same summed over the open
        # n-softsync round's gradients
        self.offsets = {}
        self.round_offsets = None
        self.restore = {}                 # worker -> saved backup to put in its slot
        self.slot_refs = {}               # worker -> its slot (MXNet's storage of its slot key)


class ServerOptimizer(SavedState):
    """The updater object mxnet-ssp stores send to the servers.

    Parameters
    ----------
    optimizer : mxnet.optimizer.Optimizer
        The user's optimizer; pickled with this object.
    num_workers : int
        Workers in the job (M).
    slots : bool
        Slot mode: parameter k arrives from worker m as key
        ``(k * M + m) * S + k % S`` (:func:`mxnet_ssp.ps.channel.slot_key`),
        so all M slots of k are on one server.  The servers keep one
        canonical weight per k (updated by every worker's gradients) and
        after each push copy it into the sender's slot, which the sender
        pulls.  The server thus knows the sender of
        every gradient, its staleness ``tau = version(k) - version the sender
        last pulled`` and what the sender last pulled (its slot, DC-ASGD's
        backup).
    num_servers : int
        Servers in the job (S), from the workers' ``DMLC_NUM_SERVER``: the
        slot keys depend on it, and so does which keys a server's saved
        state holds.
    softsync_c : int
        Slot mode: apply one averaged update per `softsync_c` gradients of a
        parameter (Rudra's n-softsync with c = floor(M / n)); 1 applies each.
    metrics_dir : str or None
        Where the servers write staleness statistics.
    staleness_log : bool
        Also log every gradient (key, sender, tau, version) as JSON Lines.
    host_updates : bool
        Run MXNet's own SGD as NumPy passes with the same bits (:class:`mxnet_ssp.host_kernels.HostSGD`;
        the workers' ``MXNET_SSP_HOST_UPDATES``); otherwise through MXNet's operator.

    Notes
    -----
    Optimizer state lives in this object, not in MXNet's ``Updater``, so a
    learning-rate change or a state restore (which make MXNet build a new
    Updater around this object) keeps it.  Attribute access falls through to
    `optimizer`, so MXNet sees the user's optimizer (multi-precision flag,
    ...).  All methods run on the server's single update thread.
    """

    def __init__(self, optimizer, num_workers=1, slots=False, num_servers=1, softsync_c=1,
                 metrics_dir=None, staleness_log=False, host_updates=True):
        self.optimizer = optimizer
        # MXNet's Updater batches keys when aggregate_num > 0; the server calls
        # it with one key at a time anyway, and batching would hide the reserved key.
        self.aggregate_num = 0
        self.num_workers = num_workers
        self.slots = slots
        self.num_servers = num_servers
        self.softsync_c = softsync_c
        self.metrics_dir = metrics_dir
        self.staleness_log = staleness_log
        self.host_updates = host_updates
        self._init_runtime()

    def _init_runtime(self):
        # lazily: MXNet is still importing in a server
        from ..host_kernels import HostSGD
        from ..optim import is_worker_aware, one_call_update
        self._worker_aware = is_worker_aware(self.optimizer)
        # MXNet's SGD by NumPy, same bits (host_kernels.HostSGD); MXNET_SSP_HOST_UPDATES=0: MXNet's
        self._host_rule = (HostSGD(self.optimizer) if self.__dict__.get('host_updates', True)
                           and HostSGD.applies(self.optimizer) else None)
        # rules of users' own classes may not say: assume they read the backup
        self._needs_backup = self._worker_aware and getattr(self.optimizer, 'needs_backup', True)
        # ASP: prepare_grad + apply in one call, when the rule has one
        self._apply_one = one_call_update(self.optimizer) if self._worker_aware else None
        self._states = {}                 # plain mode: key -> optimizer state
        self._keys = {}                   # slot mode: k -> _KeyState
        self._hist = {}                   # staleness -> gradients
        self._seq = 0
        self._log = None
        self._pending_load = None
        self._buckets = {}                # index -> ServerBucket (the workers' plan)
        self._snapshots = None            # MXNET_SSP_SERVER_SNAPSHOTS (ps/snapshots.py)
        self._plain_weights = {}          # plain mode: key -> MXNet's stored weight
        self._pieces = {}                 # chunk index -> (array's index, offset, size)
        self._natural = {}                # key index -> MXNet's own index (string keys)
        self._loaded = None               # plain mode: a loaded file's states, by array

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith('_')
                or k == 'aggregate_num'}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_runtime()
        self.activate()

    def activate(self):
        """Become this server process's updater: returns self.

        The workers drive the learning-rate schedule (see the store), the door hands
        the :class:`mxnet_ssp.ps.commands.Control` commands to :meth:`control`, and
        the staleness summary is written at exit.
        """
        opt = self.optimizer
        if getattr(opt, 'lr_scheduler', None) is not None:
            # the workers drive the schedule with their own step counts (see the store)
            opt.lr = float(opt.lr_scheduler(1))
            opt.lr_scheduler = None
        import atexit
        atexit.register(self._write_summary)
        self._snapshots = snapshots_from_env(self.metrics_dir, self._tag())
        if self._snapshots is not None:
            atexit.register(self._snapshots.close)
        return self

    #: MXNet's Updater interface is the door's (server/door.py): a push reaches this class
    #: only sorted, through update_key, refresh or control, never as the user's rule's own
    #: update (which the attributes below would otherwise find on the optimizer)
    _DOOR_ONLY = ('update', 'update_multi_precision', 'create_state',
                  'create_state_multi_precision')

    def __getattr__(self, name):
        if name.startswith('__') or name == 'optimizer':
            raise AttributeError(name)
        if name in self._DOOR_ONLY:
            raise AttributeError('%s: MXNet calls the server door (mxnet_ssp.server.door.Door), '
                                 'which hands gradients to update_key' % name)
        return getattr(self.optimizer, name)

    @property
    def worker_aware(self):
        """Whether the rule uses the sender's staleness and backup (:func:`is_worker_aware`)."""
        return self._worker_aware

    # -- the update ----------------------------------------------------------------
    # The door (server/door.py) has sorted the push: this is a gradient, and it goes to the
    # path of the store's mode.
    def update_key(self, index, weight, grad):
        """Apply one pushed gradient to key `index` (MXNet's stored `weight`)."""
        if self.slots:
            if self._snapshots is not None:   # the weights held just before this update
                self._snapshots.before_update({k: ks.weight for k, ks in self._keys.items()},
                                              self._buckets)
            self._update_slot(index, weight, grad)
        else:
            if self._snapshots is not None:
                self._plain_weights[index] = weight
                self._snapshots.before_update(self._plain_weights, self._buckets)
            self._update_plain(index, weight, grad)

    def _update_plain(self, index, weight, grad):
        """One key per parameter, shared by all workers: the rule updates MXNet's stored weight."""
        bucket = self._buckets.get(index)
        if bucket is not None:
            self._update_plain_bucket(bucket, weight, grad)
            return
        if index not in self._states:
            loaded = self._take_loaded(index, weight)
            self._states[index] = (loaded if loaded is not None else
                                   self.optimizer.create_state_multi_precision(index, weight))
        self._rule_update(index, weight, grad, self._states[index])

    def _rule_update(self, index, weight, grad, state):
        """The user's rule, as MXNet's Updater calls it, on a key or a part of a bucket."""
        host = self._host_rule
        if host is None or not host.update(index, weight, grad, state):
            self.optimizer.update_multi_precision(index, weight, grad, state)

    def _update_plain_bucket(self, bucket, weight, grad):
        """A bucket's key: the rule over the payload, or over the members carried."""
        opt = self.optimizer
        state = self._states.get(bucket.index)
        if state is None:
            for sid, part in bucket.parts():
                loaded = None if sid in self._states else self._take_loaded(sid, weight[part])
                if loaded is not None:
                    self._states[sid] = loaded
            state = self._states[bucket.index] = self._bucket_state(
                bucket, weight, opt.create_state_multi_precision, self._states)

        def call(index, part, _):
            self._rule_update(index, weight[part], grad[part],
                              state_part(state, part, bucket.payload))
        bucket.run(opt, bucket.flags(grad), call)

    def _bucket_state(self, bucket, weight, create, saved):
        """A new state for `bucket`'s payload; members with a state in `saved` (a checkpoint
        loaded before the bucket's first push: member index -> state) take theirs."""
        state = create(bucket.index, weight[0:bucket.payload])
        for sid, part in bucket.parts():
            member_state = saved.pop(sid, None)
            if member_state is not None:
                copy_state(member_state, state_part(state, part, bucket.payload))
        bucket.uniform = bucket.counts_agree(self.optimizer)
        return state

    def _slot(self, index, weight):
        """Worker m's slot of parameter k: (k, m, k's state), the slot's weight adopted."""
        k, m = slot_of(index, self.num_workers, self.num_servers)
        ks = self._keys.get(k)
        if ks is None:
            ks = self._new_key(k, weight)
        ks.slot_refs[m] = weight
        if m in ks.restore:               # a restored job: this worker's backup
            weight[:] = ks.restore.pop(m)
        return k, m, ks

    def refresh(self, index, weight):
        """A refresh marker to worker m's slot of k (slot mode): copy k's latest weights
        into the slot, which the sender pulls next."""
        k, m, ks = self._slot(index, weight)
        weight[:] = ks.weight
        ks.clock.pulled_by(m)
        bucket = self._buckets.get(k)
        self._record(k, m, None, ks.clock.version, False,
                     None if bucket is None else [sid for sid, _ in bucket.parts()])

    def _update_slot(self, index, weight, grad):
        """Worker m's slot of parameter k: update k's canonical weight, then refill the slot."""
        k, m, ks = self._slot(index, weight)
        clock = ks.clock
        tau, applied = clock.receive(m)
        backup = weight if self._needs_backup else None     # what the sender last pulled
        carried = taus = None             # a bucket's members this push holds, their taus
        bucket = self._buckets.get(k)
        if bucket is not None:
            carried, taus = self._update_slot_bucket(bucket, ks, grad, backup, tau, m, applied)
        elif self.softsync_c > 1:
            self._accumulate(k, ks, self._prepared(k, ks.weight, ks.state, grad, backup, tau, m),
                             applied)
        elif self._apply_one is not None:
            # one gradient, one update: the rule's own path, without an intermediate array
            self._apply_one(k, ks.weight, grad, ks.state, backup, float(tau), m)
        else:
            self._apply(k, ks.weight, ks.state,
                        self._prepared(k, ks.weight, ks.state, grad, backup, tau, m), float(tau))
        if applied:
            clock.advance()
        from mxnet import ndarray as nd
        from ..host_kernels import copy_into
        copy_into(weight, ks.weight)      # the sender's slot: what it pulls next
        clock.pulled_by(m)
        # the receive buffer `grad` is MXNet's and must not be read after we return
        nd.waitall()
        self._record(k, m, tau, clock.version, applied, carried, taus)

    def _update_slot_bucket(self, bucket, ks, grad, backup, tau, m, applied):
        """Slot mode, a bucket: as :meth:`_update_slot` over the payload or its members.
        Returns the indices of the members the push carries, and each member's tau (None
        when all have the bucket's)."""
        opt, payload = self.optimizer, bucket.payload
        flags = bucket.flags(grad)
        carried = [sid for i, (sid, _, _, _) in enumerate(bucket.members)
                   if flags is None or flags[i]]

        # each member's tau: the bucket's, unless the takeover left this worker's members
        # pulled at different versions (then once, member by member)
        offsets = ks.offsets.pop(m, None)
        # (the offsets are whole numbers in a float array: the taus stay ints)
        taus = None if offsets is None else [tau + int(d) for d in offsets]

        def views(part):
            return (ks.weight[part], state_part(ks.state, part, payload), grad[part],
                    None if backup is None else backup[part])

        if self.softsync_c > 1:
            if ks.acc is None:
                from mxnet import ndarray as nd
                ks.acc = nd.zeros(payload, ctx=ks.weight.context, dtype=ks.weight.dtype)
                ks.acc_flags = np.zeros(len(bucket.members), dtype=bool)
            if offsets is not None:
                if ks.round_offsets is None:
                    ks.round_offsets = np.zeros(len(bucket.members))
                ks.round_offsets += offsets

            def add(index, part, i):
                w, st, g, b = views(part)
                t = tau if taus is None else taus[i]
                ks.acc[part] += self._prepared(index, w, st, g, b, t, m)
            bucket.run(opt, flags, add, each=offsets is not None)
            ks.acc_flags |= True if flags is None else flags
            if applied:
                ks.acc /= ks.clock.waiting
                mean_tau = KeyClock.mean(ks.clock.taus)
                extra = ks.round_offsets

                def apply(index, part, i):
                    mean = mean_tau if i is None else mean_tau + extra[i] / ks.clock.waiting
                    self._apply(index, ks.weight[part], state_part(ks.state, part, payload),
                                ks.acc[part], mean)
                bucket.run(opt, None if ks.acc_flags.all() else ks.acc_flags, apply,
                           each=extra is not None and extra.any())
                ks.acc = ks.acc_flags = ks.round_offsets = None
            return carried, taus

        def one(index, part, i):
            w, st, g, b = views(part)
            t = float(tau if taus is None else taus[i])
            if self._apply_one is not None:
                self._apply_one(index, w, g, st, b, t, m)
            else:
                self._apply(index, w, st, self._prepared(index, w, st, g, b, t, m), t)
        bucket.run(opt, flags, one, each=offsets is not None)
        return carried, taus

    def _prepared(self, k, weight, state, grad, backup, tau, m):
        """The gradient as the rule applies it (DC-ASGD's compensation, ...); plain rules: as is."""
        if not self.worker_aware:
            return grad
        opt = self.optimizer
        kwargs = {}
        if getattr(opt, 'uses_grad_staleness', False):   # per-gradient alpha0 / tau
            kwargs['staleness'] = float(tau)
        if getattr(opt, 'uses_sender', False):           # e.g. MeanSquare per worker
            kwargs['sender'] = m
        return opt.prepare_grad(k, weight, grad, state, backup, **kwargs)

    def _accumulate(self, k, ks, g, applied):
        """n-softsync: sum the round's gradients; the last one applies their mean."""
        if ks.acc is None:
            ks.acc = g.copy()
        else:
            ks.acc += g
        if applied:
            ks.acc /= ks.clock.waiting
            self._apply(k, ks.weight, ks.state, ks.acc, KeyClock.mean(ks.clock.taus))
            ks.acc = None

    def _new_key(self, k, weight):
        ks = _KeyState(weight.copy(), KeyClock(self.num_workers, self.softsync_c), None)
        create = (self.optimizer.create_state if self.worker_aware
                  else self.optimizer.create_state_multi_precision)
        bucket = self._buckets.get(k)
        if bucket is None:
            ks.state = create(k, ks.weight)
        else:
            ks.state = self._bucket_state(bucket, ks.weight, create, {})
        self._keys[k] = ks
        if bucket is not None:
            self._adopt_members(bucket, ks)
        if self._pending_load is not None:
            if k in self._pending_load:
                self._restore_key(k, ks, self._pending_load.pop(k))
            elif bucket is not None:
                self._restore_bucket(bucket, ks)
        return ks

    def _adopt_members(self, bucket, ks):
        """Slot mode: the bucket's first push takes over its members' keys on this server."""
        entries = []
        for i, (sid, part) in enumerate(bucket.parts()):
            member = self._keys.pop(sid, None)
            if member is not None:
                entries.append((i, part, dict(
                    member.clock.state(), weight=member.weight, state=member.state,
                    acc=member.acc, backups={**member.slot_refs, **member.restore})))
        self._fill_bucket(bucket, ks, entries)

    def _apply(self, k, weight, state, grad, staleness):
        if self.worker_aware:
            self.optimizer.apply(k, weight, grad, state, staleness)
        else:
            self._rule_update(k, weight, grad, state)

    def _record(self, k, m, tau, version, applied, members=None, taus=None):
        """Count a gradient's staleness (tau None: a refresh) and log it if asked; a bucket's
        push counts as one gradient of each of `members`, the parameters it carries (their
        taus: `taus`, one per member of the bucket, or all `tau`)."""
        keys = [k] if members is None else members
        tau_of = {}
        if taus is not None and tau is not None:
            tau_of = {sid: t for (sid, _, _, _), t in zip(self._buckets[k].members, taus)}
        if tau is not None and not tau_of:
            self._hist[tau] = self._hist.get(tau, 0) + len(keys)
        elif tau is not None:
            for key in keys:
                t = tau_of.get(key, tau)
                self._hist[t] = self._hist.get(t, 0) + 1
        if tau is not None and self.metrics_dir:
            # the rank now, while ps-lite runs (cached after the first call): the summary
            # written at exit names the file with it, when ps-lite has stopped
            self._tag()
        if self.staleness_log and self.metrics_dir:
            if self._log is None:
                os.makedirs(self.metrics_dir, exist_ok=True)
                path = os.path.join(self.metrics_dir, 'server-%s-staleness.jsonl' % self._tag())
                self._log = open(path, 'w', buffering=1)
            for key in keys:
                self._seq += 1
                self._log.write(json.dumps({
                    'seq': self._seq, 'key': key, 'sender': m,
                    'event': 'refresh' if tau is None else 'gradient',
                    'tau': tau_of.get(key, tau),
                    'version': version, 'applied': applied}) + '\n')
        else:
            self._seq += len(keys)

    def _tag(self):
        rank = server_rank()
        return str(rank) if rank is not None else 'pid%d' % os.getpid()

    def staleness_histogram(self):
        """{tau: number of gradients} of the gradients this server received in slot mode."""
        return dict(self._hist)

    def _write_summary(self):
        if not (self.slots and self.metrics_dir and self._hist):
            return
        total = sum(self._hist.values())
        mean = sum(t * c for t, c in self._hist.items()) / float(total)
        path = os.path.join(self.metrics_dir, 'server-%s-staleness.json' % self._tag())
        try:
            with open(path, 'w') as f:
                json.dump({'gradients': total, 'mean_tau': mean, 'max_tau': max(self._hist),
                           'histogram': {str(t): c for t, c in sorted(self._hist.items())},
                           'softsync_c': self.softsync_c, 'num_workers': self.num_workers}, f)
        except OSError:
            logger.exception('server: cannot write %s', path)

    def _set_buckets(self, specs):
        """The workers' bucket plan: each bucket's index gets its members' multipliers."""
        opt = self.optimizer
        for spec in specs:
            bucket = ServerBucket(spec)
            self._buckets[bucket.index] = bucket
            opt.lr_mult[bucket.index] = float(spec['lr_mult'])
            opt.wd_mult[bucket.index] = float(spec['wd_mult'])
            bucket.uniform = bucket.counts_agree(opt)

    def _set_chunks(self, payload):
        """The workers' chunks (mxnet_ssp.core.chunks): each chunk's index gets its array's
        learning-rate and weight-decay multipliers (and so does an array's own key when
        chunks moved MXNet's numbering of string keys)."""
        opt = self.optimizer
        for index, (lr_mult, wd_mult) in payload.get('multipliers', {}).items():
            opt.lr_mult[int(index)] = float(lr_mult)
            opt.wd_mult[int(index)] = float(wd_mult)
        # what a saved file names each key by (mxnet_ssp.server.state): a chunk as a piece of
        # its array, an array's own key by the index MXNet's own store gives it
        self._pieces.update(payload.get('pieces', {}))
        self._natural.update(payload.get('natural', {}))

    # -- commands ------------------------------------------------------------------
    def control(self, action, payload):
        """Run a :class:`mxnet_ssp.ps.commands.Control` command (on the server's update thread,
        handed on by the door)."""
        if action == 'set_lr':
            self.optimizer.lr = float(payload)
        elif action == 'save':
            self._save(payload)
        elif action == 'load':
            self._load(payload)
        elif action == 'buckets':
            self._set_buckets(payload)
        elif action == 'chunks':
            self._set_chunks(payload)
        else:
            raise ValueError('unknown mxnet-ssp server command %r' % (action,))
        if action == 'chunks':
            logger.debug('server: multipliers of %d chunk keys', len(payload['multipliers']))
        elif action == 'buckets':
            arrays = sum(len(b['members']) for b in payload)
            logger.info('server: %d array%s in %d bucket%s', arrays, 's' * (arrays != 1),
                        len(payload), 's' * (len(payload) != 1))
        else:
            logger.info('server: %s %s', action, payload)
