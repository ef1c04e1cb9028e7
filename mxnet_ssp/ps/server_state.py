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
"""
import pickle

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
    """The save/load half of :class:`mxnet_ssp.ps.server.ServerOptimizer`.

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
            keys[k] = dict(ks.clock.state(), weight=ks.weight.asnumpy(),
                           state=_to_numpy(ks.state),
                           acc=None if ks.acc is None else ks.acc.asnumpy())
        opt = self.optimizer
        blob = {'format': 1, 'slots': self.slots, 'num_workers': self.num_workers,
                'num_servers': self.num_servers,
                'plain': {i: _to_numpy(st) for i, st in self._states.items()},
                'keys': keys, 'backups': self._backups(),
                'lr': opt.lr, 'num_update': opt.num_update,
                'index_update_count': dict(opt._index_update_count),
                'hist': dict(self._hist)}
        with open(self._path(prefix), 'wb') as f:
            pickle.dump(blob, f)

    def _backups(self):
        # what each worker last pulled: its slot (MXNet's storage, seen at its pushes);
        # only a rule that reads it needs it back after a restore
        if not self._needs_backup:
            return {}
        return {k: {m: ref.asnumpy() for m, ref in ks.slot_refs.items()}
                for k, ks in self._keys.items()}

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
        opt = self.optimizer
        opt.lr = blob['lr']
        opt.num_update = blob['num_update']
        # MXNet's Updater re-selects the counts of the weight's device before every
        # update (_set_current_context), so the restored counts must be that entry too
        counts = dict(blob['index_update_count'])
        opt._all_index_update_counts = {0: counts}
        opt._index_update_count = counts
        self._states = {i: _from_numpy(st) for i, st in blob['plain'].items()}
        self._hist = dict(blob['hist'])
        self._pending_load = {k: dict(saved, backups=blob['backups'].get(k, {}))
                              for k, saved in blob['keys'].items()}
        for k, ks in list(self._keys.items()):
            if k in self._pending_load:
                self._restore_key(k, ks, self._pending_load.pop(k))

    def _restore_key(self, k, ks, saved):
        from mxnet import ndarray as nd
        ks.weight[:] = nd.array(saved['weight'])
        ks.clock.restore(saved)
        ks.state = _from_numpy(saved['state'])
        ks.acc = None if saved['acc'] is None else nd.array(saved['acc'])
        ks.restore = {m: nd.array(b) for m, b in saved.get('backups', {}).items()}
