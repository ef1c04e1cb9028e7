"""Chunks: the large arrays of a model split into pieces spread over the servers.

A step that pushes a large array whole and then pulls it whole keeps one direction of a link
idle while the other works, and puts all of that array's bytes on one server (or, above MXNet's
big-array bound, on all of them at once).  A store with ``MXNET_SSP_CHUNK_BYTES`` > 0 instead
holds every dense array larger than that many bytes as *chunks*: consecutive pieces of its
flat elements, each on its own server key, pushed and pulled one after the other, so that a
chunk's pull (its weights coming back) runs while the next chunks are still pushed.

This module is the plan, pure (no MXNet): which arrays are chunked, into how many pieces, and
on which server each piece lies.

* Only arrays larger than the chunk size are chunked; small arrays are never split (they go
  into buckets, :mod:`mxnet_ssp.core.buckets`, or keep their own key).  An array of ``n``
  bytes becomes ``ceil(n / chunk_bytes)`` pieces of nearly equal size, so a chunk holds
  between half of the chunk size and the chunk size: chunks never shrink to fit a small
  model (an earlier plan did, to balance the servers, and a small model's step took 2.5
  times as long).
* Each chunk goes to the server with the fewest bytes so far (the largest chunks first), the
  arrays that are not chunked counted where MXNet places them.  Equal bytes per server is a
  goal, not a promise: when the arrays that are not split already differ by more than a
  chunk, the servers differ (:meth:`ChunkPlan.imbalance` says by how much).
* A chunk stays below MXNet's big-array bound, so MXNet keeps it whole on its server.
"""
from collections import namedtuple

__all__ = ['Chunk', 'ChunkedArray', 'ChunkPlan', 'plan_chunks', 'chunk_parts',
           'CHUNK_KEY_STR', 'CHUNK_PAD_KEY_STR']

#: The string key of chunk ``j`` of string key ``name`` (``% (name, j)``).
CHUNK_KEY_STR = '%s@@chunk%d'
#: String keys initialized only to move MXNet's numbering to a chunk's server.
CHUNK_PAD_KEY_STR = '__mxnet_ssp_chunk_pad_%d__'

#: One piece of an array: elements ``offset .. offset + size - 1`` of its flat elements, on
#: ``server``; `key` (the server key) and `index` (the integer the servers see) are given by
#: the store.
Chunk = namedtuple('Chunk', 'number offset size server')


class ChunkedArray:
    """An array held as chunks: its key, its shape, its chunks (in element order)."""

    __slots__ = ('key', 'shape', 'size', 'itemsize', 'chunks', 'keys', 'indices')

    def __init__(self, key, shape, size, itemsize, chunks):
        self.key, self.shape, self.size, self.itemsize = key, tuple(shape), size, itemsize
        self.chunks = tuple(chunks)
        self.keys = [None] * len(self.chunks)       # the server key of each chunk
        self.indices = [None] * len(self.chunks)    # the integer the servers see for it

    def __repr__(self):
        return 'ChunkedArray(%r, %d chunks)' % (self.key, len(self.chunks))


def chunk_parts(size, itemsize, chunk_bytes, max_elements):
    """``[(offset, size)]`` of the pieces of an array of `size` elements: none (an empty list)
    if it is not larger than `chunk_bytes`; else ``ceil(bytes / chunk_bytes)`` pieces (more if
    a piece would reach `max_elements`), of sizes differing by at most one element."""
    if chunk_bytes <= 0 or size * itemsize <= chunk_bytes:
        return []
    per = max(1, min(chunk_bytes // itemsize, max_elements))
    count = -(-size // per)
    if count < 2:
        return []
    base, extra = divmod(size, count)
    parts, offset = [], 0
    for i in range(count):
        n = base + (1 if i < extra else 0)
        parts.append((offset, n))
        offset += n
    return parts


class ChunkPlan:
    """Which arrays are held as chunks, and the bytes each server holds of one step.

    The store learns the arrays one at a time, as they are initialized (:meth:`add`); each
    worker adds the same arrays in the same order and gets the same plan.

    Parameters
    ----------
    chunk_bytes : int
        ``MXNET_SSP_CHUNK_BYTES``: arrays larger than this are chunked (0: none are).
    num_servers : int
    max_elements : int
        A chunk holds at most this many elements (MXNet's big-array bound less one).
    """

    def __init__(self, chunk_bytes, num_servers, max_elements):
        if num_servers < 1:
            raise ValueError('num_servers must be >= 1, not %r' % (num_servers,))
        self.chunk_bytes, self.num_servers = chunk_bytes, num_servers
        self.max_elements = max_elements
        self.arrays = {}                    # key -> ChunkedArray
        self.load = [0] * num_servers       # bytes per server

    def __bool__(self):
        return bool(self.arrays)

    def get(self, key):
        """The :class:`ChunkedArray` of `key`, or None if it is held whole."""
        return self.arrays.get(key)

    def add(self, key, shape, itemsize, eligible=True, server=None):
        """Learn an array: returns its :class:`ChunkedArray` (its chunks on the least-loaded
        servers, the largest first), or None if it stays whole; then it counts `server`'s
        bytes (None: spread over all servers, as MXNet spreads arrays above its bound)."""
        size = 1
        for d in shape:
            size *= int(d)
        parts = (chunk_parts(size, itemsize, self.chunk_bytes, self.max_elements)
                 if eligible else [])
        load = self.load
        if not parts:
            if server is None:
                for s in range(self.num_servers):
                    load[s] += size * itemsize / float(self.num_servers)
            else:
                load[server] += size * itemsize
            return None
        placed = []
        for n, j in sorted(((n, j) for j, (_, n) in enumerate(parts)), key=lambda p: -p[0]):
            target = min(range(self.num_servers), key=lambda s: (load[s], s))
            load[target] += n * itemsize
            placed.append((j, target))
        servers = dict(placed)
        array = ChunkedArray(key, shape, size, itemsize,
                             [Chunk(j, off, n, servers[j]) for j, (off, n) in enumerate(parts)])
        self.arrays[key] = array
        return array

    def imbalance(self):
        """``(max - min) / max`` of the servers' bytes (0: equal)."""
        top = max(self.load)
        return (top - min(self.load)) / float(top) if top else 0.0

    def describe(self):
        """One line for the log: arrays chunked, chunks, bytes per server."""
        chunks = sum(len(a.chunks) for a in self.arrays.values())
        return ('%d array%s in %d chunks (%s; servers within %.1f%%)'
                % (len(self.arrays), '' if len(self.arrays) == 1 else 's', chunks,
                   ', '.join('server %d: %.1f MB' % (s, n / 1e6)
                             for s, n in enumerate(self.load)),
                   100 * self.imbalance()))


def plan_chunks(arrays, chunk_bytes, num_servers, max_elements):
    """The :class:`ChunkPlan` of `arrays`, ``(key, shape, itemsize, eligible, server)`` each in
    init order (`server`: where the array lies if whole; None: spread over all)."""
    plan = ChunkPlan(chunk_bytes, num_servers, max_elements)
    for key, shape, itemsize, eligible, server in arrays:
        plan.add(key, shape, itemsize, eligible, server)
    return plan
