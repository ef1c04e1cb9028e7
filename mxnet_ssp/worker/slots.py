"""Worker side of slot mode: which server key each worker uses for each parameter.

In slot mode (rules that need the sender of every gradient, and always under
``dist_softsync``) worker m pushes and pulls parameter k through its own key
slot, so the servers know who sent each gradient.  Integer keys map to
:func:`mxnet_ssp.ps.channel.slot_key`; string keys to ``'key@m'``, numbered by
MXNet so that they land on the same ids (see :meth:`KeyLayout.block`).  All
M slots of a parameter live on one server.  The servers decode slots with
:func:`mxnet_ssp.ps.channel.slot_of`; ``docs/stores.md`` draws the layout.

Nothing here imports MXNet: :meth:`KeyLayout.block` takes the padding value.
"""
from ..ps.channel import MAX_INT_KEY, slot_key

__all__ = ['KeyLayout', 'SlotKeyError', 'as_list', 'as_values', 'first_of', 'has_row_sparse']


class SlotKeyError(ValueError):
    """A key does not fit the slot layout (MXNet's 32-bit key arithmetic)."""


def as_list(key):
    """`key` as a list of keys (a key, or a list or tuple of keys)."""
    return list(key) if isinstance(key, (list, tuple)) else [key]


def first_of(value):
    """The first array of `value` (an NDArray, or a list or tuple of per-device arrays)."""
    return value[0] if isinstance(value, (list, tuple)) else value


def has_row_sparse(value):
    """Whether `value` (an NDArray, or a list of them, or a list of lists) holds a
    ``row_sparse`` array."""
    if isinstance(value, (list, tuple)):
        return any(has_row_sparse(v) for v in value)
    return getattr(value, 'stype', 'default') == 'row_sparse'


def as_values(key, value):
    """The value of each key of `key`: `value` itself for one key, its items for a list."""
    return list(value) if isinstance(key, (list, tuple)) else [value]


class KeyLayout:
    """The server keys of one worker's store.

    Parameters
    ----------
    rank : int
        This worker's rank (m).
    num_servers : int
        Servers in the job (S).
    workers : int or None
        M in slot mode; None when every worker uses the parameter's own key.

    Attributes
    ----------
    str_ids : int
        String keys MXNet has numbered so far in this store (it numbers them 0, 1, ... in
        the order they are initialized); every native init of string keys must be counted
        with :meth:`count_string_keys` or :meth:`init_block`.
    """

    def __init__(self, rank, num_servers, workers=None):
        self.rank = rank
        self.num_servers = num_servers
        self.workers = workers
        self.str_ids = 0

    @property
    def slot_mode(self):
        return self.workers is not None

    def slot(self, key, rank=None):
        """Worker `rank`'s slot of `key`: ``'key@rank'``, or the int of channel.slot_key."""
        rank = self.rank if rank is None else rank
        if isinstance(key, str):
            return '%s@%d' % (key, rank)
        return slot_key(key, rank, self.workers, self.num_servers)

    def mine(self, key):
        """The key this worker uses on the servers for `key` (or a list of keys)."""
        if self.workers is None:
            return key
        if isinstance(key, (list, tuple)):
            return [self.slot(k) for k in key]
        return self.slot(key)

    def count_string_keys(self, key):
        """Count the string keys of `key` (or of a list) that MXNet has just numbered."""
        self.str_ids += sum(isinstance(k, str) for k in as_list(key))

    def block(self, key, value, pad):
        """Keys and values that initialize every worker's slot of `key`, in MXNet's order.

        Integer keys: the M slot keys of :func:`mxnet_ssp.ps.channel.slot_key`.
        String keys: MXNet numbers each new string key with the next integer
        (0, 1, ...) in the order they are initialized, and places that integer
        as it places integer keys.  Parameter number i (in init order) takes
        the block of ids ``i * M * S ... (i + 1) * M * S - 1``; worker m's slot
        ``'key@m'`` gets id ``slot_key(i, m, M, S)`` and the other ids of the
        block go to padding keys (value `pad`, 1 element), never pushed again.
        So the servers decode string keys exactly as integer ones (parameter i).
        """
        workers, servers = self.workers, self.num_servers
        if not isinstance(key, str):
            if key < 0 or (key + 1) * workers * servers > MAX_INT_KEY:
                raise SlotKeyError(
                    'worker[%d]: key %r is too large for slot mode with %d workers and %d '
                    'servers: integer keys must satisfy (key + 1) * workers * servers <= %d '
                    '(MXNet places keys on servers with 32-bit arithmetic); use smaller keys '
                    'or string keys' % (self.rank, key, workers, servers, MAX_INT_KEY))
            return [self.slot(key, m) for m in range(workers)], [value] * workers
        size = workers * servers
        block = -(-self.str_ids // size)     # the next whole block (an earlier key may pad)
        if (block + 1) * size > MAX_INT_KEY:
            raise SlotKeyError(
                'worker[%d]: too many string keys for slot mode with %d workers and %d '
                'servers: MXNet numbers string keys from 0 and places them with 32-bit '
                'arithmetic, and each parameter takes workers * servers numbers, so at most '
                '%d parameters fit' % (self.rank, workers, servers, MAX_INT_KEY // size))
        keys, values = [], []
        for i in range(self.str_ids, (block + 1) * size):
            if i >= block * size and i % servers == block % servers:
                keys.append(self.slot(key, i // servers % workers))
                values.append(value)
            else:
                keys.append('__mxnet_ssp_pad_%d__' % i)
                values.append(pad)
        return keys, values

    def init_block(self, key, value, pad):
        """Keys and values of the collective init of every worker's slot of `key` (or of
        each key of a list), counted as numbered by MXNet."""
        all_keys, all_values = [], []
        for k, v in zip(as_list(key), as_values(key, value)):
            v = v[0] if isinstance(v, (list, tuple)) else v
            block_keys, block_values = self.block(k, v, pad)
            self.count_string_keys(block_keys)
            all_keys.extend(block_keys)
            all_values.extend(block_values)
        return all_keys, all_values
