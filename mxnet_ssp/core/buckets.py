"""Buckets: the small arrays of a step packed into a few server keys.

A parameter server spends about a quarter of a millisecond per array and step on its own
book-keeping (a request, an update call, a response), whatever the array's size; GluonCV's
CIFAR ResNet-110 has 335 arrays, most of them a few kilobytes.  So a store packs the dense
arrays smaller than half of ``MXNET_SSP_BUCKET_BYTES`` into *buckets*: each bucket is one
server key holding its members end to end, followed by a *header* of one element per member
that says, in every push, which members the push carries (1) and which it does not (0).

This module is the plan, pure (no MXNet): which arrays go in which bucket and where each
member lies in its bucket.

* Members of one bucket share a server, a dtype and the learning-rate and weight-decay
  multipliers the servers give them, so that server can run the update rule once over the
  whole bucket when every member is pushed (element-wise rules only: the store checks that).
  The bucket's key lands on its members' server, which holds their weights and optimizer
  state when the bucket takes over from them; so the buckets are spread over the servers as
  MXNet spread the arrays (by key).
* A bucket never reaches MXNet's big-array bound (``MXNET_KVSTORE_BIGARRAY_BOUND``
  elements): MXNet then keeps it whole on one server, as slot mode needs, and the header with
  its payload.

The store learns the plan from the arrays its first step pushes, in their order; every worker
learns the same plan from the same model.
"""
from collections import namedtuple

__all__ = ['ArrayInfo', 'Member', 'Bucket', 'BucketPlan', 'plan_buckets', 'int_keys_on',
           'fitted_bucket_bytes', 'PIPELINE_BUCKETS', 'MIN_PIPELINE_BUCKET_BYTES',
           'DEFAULT_BIGARRAY_BOUND', 'BUCKET_KEY_STR', 'PAD_KEY_STR']

#: MXNet's default ``MXNET_KVSTORE_BIGARRAY_BOUND``: arrays of at least this many elements
#: are split over all servers.
DEFAULT_BIGARRAY_BOUND = 1000000
#: The string keys of buckets in stores whose keys are strings (``%`` MXNet's number of it).
BUCKET_KEY_STR = '__mxnet_ssp_bucket_%d__'
#: String keys initialized only to move MXNet's numbering to a bucket's server.
PAD_KEY_STR = '__mxnet_ssp_bucket_pad_%d__'

#: What the plan needs to know of a pushed array.  `group` holds what members of one bucket
#: must share (server, dtype, multipliers), the server first; `eligible` is False for arrays
#: that keep their own key whatever their size (sparse ones).
ArrayInfo = namedtuple('ArrayInfo', 'key shape size itemsize group eligible')

#: One array in a bucket: elements ``offset .. offset + size - 1`` of the bucket.
Member = namedtuple('Member', 'key shape offset size')


class Bucket:
    """One bucket: its key, its members and its size.

    Attributes
    ----------
    number : int
        Position in :attr:`BucketPlan.buckets` (0, 1, ...).
    key : int or str
        The key the workers push and pull (before slot mode's per-worker slots).
    index : int
        The integer the servers see for it (MXNet numbers string keys).
    group : tuple
        What the members share (see :class:`ArrayInfo`).
    members : tuple of Member
    payload : int
        Elements of the members, end to end.
    length : int
        ``payload`` plus the header (one element per member).
    server : int
        The server of its members and of its key (``group[0]``).
    """

    __slots__ = ('number', 'key', 'index', 'group', 'members', 'payload', 'length', 'server',
                 'itemsize')

    def __init__(self, members, group, itemsize):
        self.members = tuple(members)
        self.group = group
        self.itemsize = itemsize
        self.payload = sum(m.size for m in self.members)
        self.length = self.payload + len(self.members)
        self.server = group[0]
        self.number = self.key = None
        self.index = None                 # the integer the servers see for `key`

    @property
    def nbytes(self):
        return self.length * self.itemsize

    def __repr__(self):
        return 'Bucket(%r, %d members, %d elements, server %r)' % (
            self.key, len(self.members), self.payload, self.server)


class BucketPlan:
    """Which key holds each array: its bucket (with the member's place), or its own."""

    def __init__(self, buckets):
        self.buckets = list(buckets)
        self.of_key = {}                  # member key -> (bucket, member)
        for b in self.buckets:
            for m in b.members:
                self.of_key[m.key] = (b, m)

    def __bool__(self):
        return bool(self.buckets)

    def __len__(self):
        return len(self.buckets)

    def bucket_of(self, key):
        """``(bucket, member)`` of `key`, or None if `key` keeps its own key."""
        return self.of_key.get(key)

    def carriers(self, keys):
        """The keys the servers hold `keys` under: a bucketed key's bucket key, any other key
        itself; each once, in the order of `keys`."""
        out = []
        for k in keys:
            found = self.of_key.get(k)
            k = k if found is None else found[0].key
            if k not in out:
                out.append(k)
        return out

    def describe(self):
        """One line for the log: buckets, arrays in them, bytes per server."""
        per_server = {}
        for b in self.buckets:
            per_server[b.server] = per_server.get(b.server, 0) + b.nbytes
        return ('%d bucket%s holding %d arrays (%s)'
                % (len(self.buckets), '' if len(self.buckets) == 1 else 's', len(self.of_key),
                   ', '.join('server %d: %.1f kB' % (s, n / 1e3)
                             for s, n in sorted(per_server.items()))))


def plan_buckets(arrays, bucket_bytes, bigarray_bound=DEFAULT_BIGARRAY_BOUND):
    """The buckets of `arrays` (ArrayInfo, in the order they were pushed), numbered; their
    keys are the store's to give (:attr:`Bucket.key`, :func:`int_keys_on`).

    Parameters
    ----------
    bucket_bytes : int
        At most this many bytes per bucket (header included); arrays above half of it keep
        their own key.  0: no buckets (no array fits).
    bigarray_bound : int
        MXNet's ``MXNET_KVSTORE_BIGARRAY_BOUND``: a bucket stays below it.

    A bucket of a single member would be no gain: that array keeps its own key.
    """
    open_buckets = {}                     # group -> (members, elements so far, itemsize)
    closed = []

    def close(group):
        members, _, itemsize = open_buckets.pop(group)
        if len(members) > 1:
            closed.append(Bucket(members, group, itemsize))

    for a in arrays:
        nbytes = a.size * a.itemsize
        if not a.eligible or a.size == 0 or 2 * nbytes > bucket_bytes:
            continue
        cap_elements = min(bucket_bytes // a.itemsize, bigarray_bound - 1)
        entry = open_buckets.get(a.group)
        # elements so far, this array and the header (one per member)
        if entry is not None and entry[1] + a.size + len(entry[0]) + 1 > cap_elements:
            close(a.group)
            entry = None
        if entry is None:
            entry = ([], 0, a.itemsize)
        members, used, itemsize = entry
        members.append(Member(a.key, tuple(a.shape), used, a.size))
        open_buckets[a.group] = (members, used + a.size, itemsize)
    for group in list(open_buckets):
        close(group)
    for n, bucket in enumerate(closed):
        bucket.number = n
    return BucketPlan(closed)


#: Across hosts a step's buckets go up and come back as a pipeline (the worker's window): a
#: model whose small arrays fill only a few buckets would push them all before the first
#: comes back, so the default bucket size there gives at least this many buckets ...
PIPELINE_BUCKETS = 16
#: ... unless they would be smaller than this (a server spends about half a millisecond per
#: key and push whatever its size).
MIN_PIPELINE_BUCKET_BYTES = 64 << 10


def fitted_bucket_bytes(arrays, cap):
    """Bytes per bucket for a pipeline of `arrays` (ArrayInfo): the bytes that buckets of
    `cap` bytes would hold, over :data:`PIPELINE_BUCKETS`, within
    [:data:`MIN_PIPELINE_BUCKET_BYTES`, `cap`].  Measured at 100 Mbit/s, 2 workers and 2
    servers: CIFAR ResNet-20 (1.1 MB) took 156 ms a step in 256 KiB buckets, 125 ms in
    64 KiB ones (MXNet's own, one key per array: 123 ms)."""
    total = sum(a.size * a.itemsize for a in arrays
                if a.eligible and a.size and 2 * a.size * a.itemsize <= cap)
    return int(max(min(cap, MIN_PIPELINE_BUCKET_BYTES), min(cap, total // PIPELINE_BUCKETS)))


def int_keys_on(server, count, top, server_of, taken):
    """`count` integer keys that land on `server` (``server_of(key)``), from `top` down,
    skipping `taken`.  Raises ValueError if there are not that many."""
    keys = []
    key = top
    while len(keys) < count and key >= 0:
        if key not in taken and server_of(key) == server:
            keys.append(key)
        key -= 1
    if len(keys) < count:
        raise ValueError('no room for %d bucket keys on server %d below key %d'
                         % (count, server, top))
    return keys
