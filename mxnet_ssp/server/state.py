"""Saving and restoring a server's optimizer state (``kv.save_optimizer_states``).

MXNet's stock dist stores cannot save the state their servers hold (issue #15923); the
mxnet-ssp stores send a ``save``/``load`` :class:`mxnet_ssp.ps.channel.Control` command and
every server writes or reads its own file, ``<prefix>.server-<rank>``: the optimizer's
learning rate and update counts, the per-key optimizer state (momentum, MeanSquare, ...), and
in slot mode each parameter's canonical weight, versions
(:class:`mxnet_ssp.core.staleness.KeyClock`) and, for rules that read it, what each worker last pulled (DC-ASGD's backup).

A server holds the keys ps-lite places on it, which depend on the number of servers, so a
file only loads into a job with the same set-up (slot mode, workers, servers); anything else
is refused naming both set-ups.  Keys that arrive after the load (a restored job pushes them
again) are restored when they first appear.

Buckets (:mod:`mxnet_ssp.core.buckets`) do not show in the file: a bucket's state is saved as its
members' states, each flat as the server holds every key, so files load whether the saving
job and the loading job used buckets or not.

Chunks (:mod:`mxnet_ssp.core.chunks`) do not show either, in plain mode: a chunk's state is
saved as a piece of its array's (``pieces``: array index -> ``[(offset, size, state)]``), and
every array under the index MXNet's own store gives it, so a file saved with one chunk size
loads with another or with none.  The pieces of one array may lie in several servers' files:
a server loading reads every ``<prefix>.server-*`` file it can see and takes what it needs
when a key is first pushed (a missing piece ends the job, naming it).  In slot mode a file
loads only with the chunk layout it was saved with (refused otherwise, naming the setting).
"""
import glob
import os
import pickle

from .buckets import state_part

__all__ = ['SavedState']


def _to_numpy(obj):
    from mxnet import ndarray as nd
    if isinstance(obj, nd.NDArray):
        return ('nd', obj.asnumpy())
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [_to_numpy(o) for o in obj])
    if isinstance(obj, dict):           # e.g. DC-ASGD's MeanSquare per worker
        return ('dict', {k: _to_numpy(v) for k, v in obj.items()})
    return ('raw', obj)


def _from_numpy(obj):
    from mxnet import ndarray as nd
    kind, value = obj
    if kind == 'nd':
        return nd.array(value, dtype=value.dtype)
    if kind in ('list', 'tuple'):
        items = [_from_numpy(o) for o in value]
        return items if kind == 'list' else tuple(items)
    if kind == 'dict':
        return {k: _from_numpy(v) for k, v in value.items()}
    return value


class SavedState:
    """The save/load half of :class:`mxnet_ssp.server.updater.ServerOptimizer`.

    Reads and writes the updater's fields: ``optimizer``, ``slots``, ``num_workers``,
    ``num_servers``, ``_states`` (plain mode), ``_keys`` (slot mode, ``_KeyState`` per
    parameter), ``_hist``, ``_needs_backup``, ``_pending_load``, and ``_tag()`` (the rank).
    """

    def _path(self, prefix):
        return '%s.server-%s' % (prefix, self._tag())

    def _save(self, prefix):
        from mxnet import ndarray as nd
        nd.waitall()
        keys = {}
        for k, ks in self._keys.items():
            for sid, part in self._members(k):
                keys[sid] = dict(ks.clock.state(), weight=_part(ks.weight, part),
                                 state=_to_numpy(self._state_of(k, ks.state, part)),
                                 acc=None if ks.acc is None else _part(ks.acc, part))
        plain, pieces = {}, {}
        for i, st in self._states.items():
            for sid, part in self._members(i):
                entry = _to_numpy(self._state_of(i, st, part))
                if sid in self._pieces:
                    parent, offset, size = self._pieces[sid]
                    pieces.setdefault(parent, []).append((offset, size, entry))
                else:
                    plain[self._natural.get(sid, sid)] = entry
        opt = self.optimizer
        counts = {}
        for i, c in opt._index_update_count.items():
            if i in self._buckets:
                continue
            if i in self._pieces:
                parent = self._pieces[i][0]
                counts[parent] = max(c, counts.get(parent, 0))
            else:
                counts[self._natural.get(i, i)] = c
        blob = {'format': 1, 'slots': self.slots, 'num_workers': self.num_workers,
                'num_servers': self.num_servers, 'plain': plain, 'pieces': pieces,
                'chunk_layout': sorted(self._pieces.items()),
                'keys': keys, 'backups': self._backups(),
                'lr': opt.lr, 'num_update': opt.num_update,
                'index_update_count': counts,
                'hist': dict(self._hist)}
        # atomically (a temporary name, fsync, rename): a server killed while writing
        # leaves the file absent or whole, never torn (docs/faults.md, --job-restarts)
        path = self._path(prefix)
        tmp = '%s.tmp-%d' % (path, os.getpid())
        try:
            with open(tmp, 'wb') as f:
                pickle.dump(blob, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def _members(self, index):
        """``(index, part)`` of each array a key holds: a bucket's members, or the key itself
        (part None)."""
        bucket = self._buckets.get(index)
        if bucket is None:
            return [(index, None)]
        return bucket.parts()

    def _state_of(self, index, state, part):
        """The state of one array of key `index`, or the key's whole state.  Flat, as MXNet's
        server holds every key's weight (``KVStoreDistServer`` stores 1-D arrays), so the
        entry is what the array's own key would have saved."""
        if part is None:
            return state
        return state_part(state, part, self._buckets[index].payload)

    def _backups(self):
        # what each worker last pulled: its slot (MXNet's storage, seen at its pushes);
        # only a rule that reads it needs it back after a restore
        if not self._needs_backup:
            return {}
        out = {}
        for k, ks in self._keys.items():
            for sid, part in self._members(k):
                out[sid] = {m: _part(ref, part) for m, ref in ks.slot_refs.items()}
        return out

    def _load(self, prefix):
        with open(self._path(prefix), 'rb') as f:
            blob = pickle.load(f)
        # each server saved the keys it holds, and which keys that is depends on the
        # number of servers (older files do not say it: not checked)
        servers = blob.get('num_servers', self.num_servers)
        if (blob.get('format') != 1 or blob['slots'] != self.slots
                or servers != self.num_servers
                or self.slots and blob['num_workers'] != self.num_workers):
            raise ValueError('mxnet-ssp: %s was saved by a job with a different store set-up '
                             '(slot mode %s, %s workers, %s servers); this job has slot mode %s, '
                             '%s workers, %s servers'
                             % (self._path(prefix), blob['slots'], blob['num_workers'],
                                blob.get('num_servers', '?'), self.slots, self.num_workers,
                                self.num_servers))
        layout = sorted(self._pieces.items())
        if self.slots and blob.get('chunk_layout', []) != layout:
            raise ValueError('mxnet-ssp: %s was saved by a job whose arrays were held as other '
                             'chunks (MXNET_SSP_CHUNK_BYTES); in slot mode a file loads only '
                             'with the chunk size it was saved with' % self._path(prefix))
        opt = self.optimizer
        opt.lr = blob['lr']
        opt.num_update = blob['num_update']
        if self.slots:
            counts = dict(blob['index_update_count'])
            self._states = {i: _from_numpy(st) for i, st in blob['plain'].items()}
        else:
            counts = self._load_plain(prefix, blob)
        # MXNet's Updater re-selects the counts of the weight's device before every
        # update (_set_current_context), so the restored counts must be that entry too
        opt._all_index_update_counts = {0: counts}
        opt._index_update_count = counts
        self._hist = dict(blob['hist'])
        self._pending_load = {k: dict(saved, backups=blob['backups'].get(k, {}))
                              for k, saved in blob['keys'].items()}
        for bucket in self._buckets.values():
            bucket.uniform = bucket.counts_agree(opt)
        for k, ks in list(self._keys.items()):
            if k in self._pending_load:
                self._restore_key(k, ks, self._pending_load.pop(k))
            elif k in self._buckets:
                self._restore_bucket(self._buckets[k], ks)

    def _load_plain(self, prefix, blob):
        """Plain mode: keep the states of every server's file at `prefix` (this server's
        `blob` first) by array, to be taken at each key's first push (:meth:`_take_loaded`).
        Returns the update counts of the keys this server knows now."""
        plain, pieces, counts = {}, {}, {}
        blobs = [blob]
        for path in sorted(glob.glob(glob.escape(prefix) + '.server-*')):
            if path != self._path(prefix):
                with open(path, 'rb') as f:
                    blobs.append(pickle.load(f))
        for b in blobs:
            for index, st in b['plain'].items():
                plain.setdefault(index, st)
            for parent, parts in b.get('pieces', {}).items():
                pieces.setdefault(parent, []).extend(parts)
            for index, c in b['index_update_count'].items():
                counts[index] = max(c, counts.get(index, 0))
        self._states = {}
        self._loaded = {'plain': plain, 'pieces': pieces, 'counts': counts}
        actual = {n: a for a, n in self._natural.items()}
        out = {actual.get(n, n): c for n, c in counts.items()}
        for index, (parent, _, _) in self._pieces.items():
            if parent in counts:
                out[index] = counts[parent]
        return out

    def _take_loaded(self, index, weight):
        """Plain mode: the loaded state of key `index` (a chunk: its piece of its array's
        state; an array: its own, or its pieces joined), or None if the file has none."""
        loaded = self._loaded
        if loaded is None:
            return None
        if index in self._pieces:
            array, offset, size = self._pieces[index]
        else:
            array, offset, size = self._natural.get(index, index), 0, weight.size
            if array in loaded['plain']:
                state, offset = loaded['plain'][array], None
        if offset is not None:
            state = _cut(loaded, array, offset, size)
        if state is None:
            return None
        counts = self.optimizer._index_update_count
        if index not in counts and array in loaded['counts']:
            counts[index] = loaded['counts'][array]
        return _from_numpy(state)

    def _restore_key(self, k, ks, saved):
        from mxnet import ndarray as nd
        ks.weight[:] = nd.array(saved['weight'])
        ks.clock.restore(saved)
        ks.state = _from_numpy(saved['state'])
        ks.acc = None if saved['acc'] is None else nd.array(saved['acc'])
        ks.restore = {m: nd.array(b) for m, b in saved.get('backups', {}).items()}

    def _restore_bucket(self, bucket, ks):
        """Slot mode: restore a bucket from its members' entries in a loaded file."""
        entries = []
        for i, (sid, part) in enumerate(bucket.parts()):
            if sid in self._pending_load:
                saved = self._pending_load.pop(sid)
                entries.append((i, part, dict(saved, state=_from_numpy(saved['state']))))
        self._fill_bucket(bucket, ks, entries)

    def _fill_bucket(self, bucket, ks, entries):
        """Slot mode: a bucket takes over its members' canonical weights, optimizer state,
        n-softsync sums, clock and what each worker last pulled (its slot, restored at its
        next push).  `entries`: ``(member number, part, entry)``, an entry holding ``weight``,
        ``state``, ``acc``, ``backups`` ({worker: array}) and the clock's fields (NumPy arrays
        from a file, or NDArrays of live keys)."""
        from mxnet import ndarray as nd
        import numpy as np
        from .buckets import copy_state

        def flat(x):
            return (nd.array(x) if isinstance(x, np.ndarray) else x).reshape((-1,))

        if not entries:
            return
        ks.clock.restore(entries[0][2])
        # what each worker last pulled of each member, against the clock the bucket took
        pulled = np.array([[int(p) for p in entry['pulled']] for _, _, entry in entries])
        diffs = pulled[0][None, :] - pulled                  # member x worker
        round_taus = np.array([sum(int(t) for t in entry['taus']) for _, _, entry in entries])
        if diffs.any() or round_taus.any():
            width = len(bucket.members)
            for m in range(pulled.shape[1]):
                if diffs[:, m].any():
                    offsets = np.zeros(width)
                    for row, (i, _, _) in enumerate(entries):
                        offsets[i] = diffs[row, m]
                    ks.offsets[m] = offsets
            if (round_taus - round_taus[0]).any():
                ks.round_offsets = np.zeros(width)
                for row, (i, _, _) in enumerate(entries):
                    ks.round_offsets[i] = round_taus[row] - round_taus[0]
        restore = {}
        for i, part, entry in entries:
            flat(entry['weight']).copyto(ks.weight[part])
            copy_state(entry['state'], state_part(ks.state, part, bucket.payload))
            if entry.get('acc') is not None:
                if ks.acc is None:
                    ks.acc = nd.zeros(bucket.payload, dtype=ks.weight.dtype)
                    ks.acc_flags = np.zeros(len(bucket.members), dtype=bool)
                flat(entry['acc']).copyto(ks.acc[part])
                ks.acc_flags[i] = True
            for m, b in entry.get('backups', {}).items():
                if m not in restore:
                    restore[m] = ks.weight.copy()
                flat(b).copyto(restore[m][part])
        ks.restore = restore


def _cut(loaded, array, offset, size):
    """Elements ``offset .. offset + size - 1`` of the saved state of `array` (an array
    index), from its whole entry or its pieces; None if the file has no state for it."""
    whole = loaded['plain'].get(array)
    if whole is not None:
        return _np_slice(whole, offset, offset + size)
    parts = sorted(loaded['pieces'].get(array, ()), key=lambda p: p[0])
    if not parts:
        return None
    chosen, at = [], offset
    for off, n, st in parts:
        if off <= at < off + n:
            end = min(off + n, offset + size)
            chosen.append(_np_slice(st, at - off, end - off))
            at = end
    if at != offset + size:
        raise ValueError('mxnet-ssp: the saved optimizer states hold elements %d..%d of array '
                         '%r only up to %d: a file saved with other chunks '
                         '(MXNET_SSP_CHUNK_BYTES) loads only where every server\'s file of it '
                         'is readable under the same prefix' % (offset, offset + size - 1,
                                                                 array, at - 1))
    return _np_join(chosen)


def _np_slice(obj, start, stop):
    """Elements `start`..`stop` of a saved state (:func:`_to_numpy`'s form; flat arrays)."""
    kind, value = obj
    if kind == 'nd':
        return ('nd', value.reshape(-1)[start:stop])
    if kind in ('list', 'tuple'):
        return (kind, [_np_slice(o, start, stop) for o in value])
    if kind == 'dict':
        return ('dict', {k: _np_slice(v, start, stop) for k, v in value.items()})
    return obj


def _np_join(parts):
    """Saved states of consecutive elements joined into one (:func:`_to_numpy`'s form)."""
    import numpy as np
    kind, value = parts[0]
    if len(parts) == 1:
        return parts[0]
    if kind == 'nd':
        return ('nd', np.concatenate([v for _, v in parts]))
    if kind in ('list', 'tuple'):
        return (kind, [_np_join([p[1][i] for p in parts]) for i in range(len(value))])
    if kind == 'dict':
        return ('dict', {k: _np_join([p[1][k] for p in parts]) for k in value})
    return parts[0]


def _part(array, part):
    """`array` (part None) or its elements `part` (flat, as the server holds keys), as a
    NumPy array."""
    if part is None:
        return array.asnumpy()
    return array[part].asnumpy()
