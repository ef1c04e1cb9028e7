"""Buckets: the small arrays of a step packed into a few server keys.

A parameter server spends about a quarter of a millisecond per array and step on its own
book-keeping (a request, an update call, a response), whatever the array's size; GluonCV's
CIFAR ResNet-110 has 335 arrays, most of them a few kilobytes.  So a store packs the dense
arrays smaller than half of ``MXNET_SSP_BUCKET_BYTES`` into *buckets*: each bucket is one
server key holding its members end to end, followed by a *header* of one element per member
that says, in every push, which members the push carries (1) and which it does not (0).

This module is the plan, pure (no MXNet): which arrays go in which bucket, where each member
lies in its bucket, and which key (and so which server) each bucket gets.

* Members of one bucket share a dtype and the learning-rate and weight-decay multipliers the
  servers would give them, so a server can run the update rule once over the whole bucket
  when every member is pushed (element-wise rules only: the store checks that).
* A bucket never reaches MXNet's big-array bound (``MXNET_KVSTORE_BIGARRAY_BOUND``
  elements): MXNet then keeps it whole on one server, as slot mode needs, and the header with
  its payload.
* Buckets are spread over the servers by bytes (largest first, each to the server holding the
  fewest bytes so far).

The store decides the plan once, at its first push, from the arrays initialized so far (in
their order); every worker decides the same plan from the same model.
"""
from collections import namedtuple

__all__ = ['ArrayInfo', 'Member', 'Bucket', 'BucketPlan', 'plan_buckets', 'mask_runs',
           'DEFAULT_BIGARRAY_BOUND', 'BUCKET_KEY_STR']

#: MXNet's default ``MXNET_KVSTORE_BIGARRAY_BOUND``: arrays of at least this many elements
#: are split over all servers.
DEFAULT_BIGARRAY_BOUND = 1000000
#: The string keys of buckets in stores whose keys are strings (``%`` the bucket's number).
BUCKET_KEY_STR = '__mxnet_ssp_bucket_%d__'

#: What the plan needs to know of an initialized array.  `group` holds what members of one
#: bucket must share (dtype, multipliers); `eligible` is False for arrays that keep their own
#: key whatever their size (sparse ones).
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
    group : tuple
        What the members share (see :class:`ArrayInfo`).
    members : tuple of Member
    payload : int
        Elements of the members, end to end.
    length : int
        ``payload`` plus the header (one element per member).
    server : int
        The server the key lands on.
    """

    __slots__ = ('number', 'key', 'group', 'members', 'payload', 'length', 'server', 'itemsize')

    def __init__(self, members, group, itemsize):
        self.members = tuple(members)
        self.group = group
        self.itemsize = itemsize
        self.payload = sum(m.size for m in self.members)
        self.length = self.payload + len(self.members)
        self.number = self.key = self.server = None

    @property
    def nbytes(self):
        return self.length * self.itemsize

    def header_slice(self):
        return slice(self.payload, self.length)

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

    def describe(self):
        """One line for the log: buckets, arrays in them, bytes per server."""
        per_server = {}
        for b in self.buckets:
            per_server[b.server] = per_server.get(b.server, 0) + b.nbytes
        return ('%d bucket%s holding %d arrays (%s)'
                % (len(self.buckets), '' if len(self.buckets) == 1 else 's', len(self.of_key),
                   ', '.join('server %d: %.1f kB' % (s, n / 1e3)
                             for s, n in sorted(per_server.items()))))


def plan_buckets(arrays, bucket_bytes, num_servers, key_candidates,
                 bigarray_bound=DEFAULT_BIGARRAY_BOUND):
    """The bucket plan of `arrays` (ArrayInfo, in the order they were initialized).

    Parameters
    ----------
    bucket_bytes : int
        At most this many bytes per bucket (header included); arrays above half of it keep
        their own key.  0: no buckets.
    num_servers : int
    key_candidates : callable
        ``key_candidates(n)`` -> n pairs ``(key, server)`` the buckets may take, in order;
        the plan gives each bucket one of them (see :func:`int_key_candidates`).
    bigarray_bound : int
        MXNet's ``MXNET_KVSTORE_BIGARRAY_BOUND``: a bucket stays below it.

    A bucket with a single member is no bucket (the array keeps its own key).
    """
    if bucket_bytes <= 0:
        return BucketPlan([])
    open_buckets = {}                     # group -> (members, bytes so far, itemsize)
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
        if entry is not None:
            members, used, _ = entry
            # elements so far, this array and the header (one per member)
            if used + a.size + len(members) + 1 > cap_elements:
                close(a.group)
                entry = None
        if entry is None:
            entry = open_buckets[a.group] = ([], 0, a.itemsize)
        members, used, itemsize = entry
        members.append(Member(a.key, tuple(a.shape), used, a.size))
        open_buckets[a.group] = (members, used + a.size, itemsize)
    for group in list(open_buckets):
        close(group)
    if not closed:
        return BucketPlan([])
    _place(closed, num_servers, key_candidates(len(closed)))
    return BucketPlan(closed)


def _place(buckets, num_servers, candidates):
    """Give each bucket a key: largest first, to the least loaded server among the keys left."""
    load = [0] * num_servers
    left = list(candidates)
    order = sorted(range(len(buckets)), key=lambda i: (-buckets[i].nbytes, i))
    for i in order:
        j = min(range(len(left)), key=lambda c: (load[left[c][1]], c))
        key, server = left.pop(j)
        buckets[i].key, buckets[i].server = key, server
        load[server] += buckets[i].nbytes
    # numbered in the order of their keys' candidates, so every worker inits them alike
    rank = {key: n for n, (key, _) in enumerate(candidates)}
    buckets.sort(key=lambda b: rank[b.key])
    for n, b in enumerate(buckets):
        b.number = n


def int_key_candidates(num_servers, top, server_of, taken):
    """``key_candidates`` for stores with integer keys: keys from `top` down, skipping
    `taken`, in a round robin over the servers (``server_of(key)``), so that any bucket can
    go to any server."""
    def candidates(n):
        per_server = {s: [] for s in range(num_servers)}
        want = -(-n // num_servers) if num_servers else n
        key = top
        while key >= 0 and any(len(v) < want for v in per_server.values()):
            if key not in taken:
                s = server_of(key)
                if len(per_server[s]) < want:
                    per_server[s].append(key)
            key -= 1
        out = []
        for i in range(want):
            for s in range(num_servers):
                if i < len(per_server[s]):
                    out.append((per_server[s][i], s))
        if len(out) < n:
            raise ValueError('no room for %d bucket keys below %d' % (n, top))
        return out
    return candidates


def mask_runs(present):
    """Runs of consecutive True in `present` (a sequence of bools): ``[(start, stop), ...]``."""
    runs = []
    start = None
    for i, p in enumerate(present):
        if p and start is None:
            start = i
        elif not p and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(present)))
    return runs
