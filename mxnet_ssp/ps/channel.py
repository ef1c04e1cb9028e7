"""The channel between a worker's store and the servers, inside MXNet's own KVStore traffic.

Four kinds of message travel where MXNet only expects gradients, weights and
optimizers; this module holds their formats, so the worker and the server
agree on them without the worker importing the server's code:

================  ==============================================  ========================
message           how it travels                                  who acts on it
================  ==============================================  ========================
discovery         a push of :data:`DISCOVERY_LEN` float32 values  the server owning the key
                  (:func:`encode_blob`) to :data:`DISCOVERY_KEY`  starts the controller and
                  (or :data:`DISCOVERY_KEY_STR`), then a pull of  writes its address and the
                  the same key (:func:`decode_blob`)              job's secret into the value
refresh           a push of :func:`refresh_marker` (first         the server copies its latest
                  element: a NaN with :data:`REFRESH_BITS`) to    weights into the sender's
                  the sender's slot of a key (slot mode)          slot, which it pulls next
updater,          where MXNet sends an optimizer: see             every server's door
command           :mod:`mxnet_ssp.ps.commands`                    (:mod:`mxnet_ssp.server.door`)
================  ==============================================  ========================

This module must import in a server process, where ``import mxnet`` has not
returned (the server loop runs inside it): it imports nothing from MXNet.
"""
import json

import numpy as np

__all__ = ['DISCOVERY_KEY', 'DISCOVERY_KEY_STR', 'BALANCE_KEY', 'BALANCE_KEY_STR', 'RESERVED_KEYS',
           'DISCOVERY_LEN', 'MAGIC', 'MAX_INT_KEY',
           'REFRESH_BITS', 'slot_key', 'slot_of', 'encode_blob', 'decode_blob', 'is_discovery',
           'refresh_marker', 'is_refresh']

#: Reserved integer key for controller discovery.  MXNet places a small key on
#: server (key * 9973) % num_servers, computed in a C int: keep key * 9973 < 2**31.
DISCOVERY_KEY = 199999
#: The same key for stores whose keys are strings (MXNet forbids mixing the two).
DISCOVERY_KEY_STR = '__mxnet_ssp_discovery__'
#: The reserved key worker 0 publishes the balancing service's address in
#: (:mod:`mxnet_ssp.balance`), and its string twin.
BALANCE_KEY = 199998
BALANCE_KEY_STR = '__mxnet_ssp_balance__'
#: Keys the store itself uses; they are never packed into buckets.
RESERVED_KEYS = frozenset([DISCOVERY_KEY, DISCOVERY_KEY_STR, BALANCE_KEY, BALANCE_KEY_STR])
#: Length (float32 elements) of the discovery value: a header of len(MAGIC) + 4
#: elements, then one byte per element.  An unusual (prime) size, so the server
#: only looks inside pushes of exactly this size.
DISCOVERY_LEN = 1031
#: First elements of every discovery message (exactly representable in float32).
MAGIC = (-8191.0, 131071.0, -524287.0)


def encode_blob(obj, length=DISCOVERY_LEN):
    """Encode a JSON-able object as a float32 vector of `length` elements.

    The one packing of JSON into a KVStore value (controller discovery, the balancing
    service's address): :data:`MAGIC`, the JSON's byte count in 4 elements (big-endian, one
    byte each), then one UTF-8 byte per element, zeros after.  Every element is an integer
    below 2**24, so float32 holds it exactly.  Raises ValueError if the JSON does not fit.
    """
    raw = json.dumps(obj, sort_keys=True).encode('utf-8')
    head = len(MAGIC) + 4
    if len(raw) > length - head:
        raise ValueError('message too long for %d elements (%d bytes of JSON, at most %d)'
                         % (length, len(raw), length - head))
    out = np.zeros(length, dtype=np.float32)
    out[:len(MAGIC)] = MAGIC
    out[len(MAGIC):head] = [len(raw) >> 24 & 255, len(raw) >> 16 & 255, len(raw) >> 8 & 255,
                            len(raw) & 255]
    out[head:head + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return out


def is_discovery(values):
    """True if `values` (NDArray) is a discovery message: right size and magic header."""
    if values.shape != (DISCOVERY_LEN,):
        return False
    return tuple(values[:len(MAGIC)].asnumpy().tolist()) == MAGIC


def decode_blob(values):
    """Inverse of :func:`encode_blob` (any length); None if `values` is not such a message.

    `values` is a 1-D array (NumPy, or anything ``np.asarray`` reads); the vector's own
    length bounds the JSON's.
    """
    values = np.asarray(values)
    head = len(MAGIC) + 4
    if (values.ndim != 1 or values.shape[0] < head
            or tuple(values[:len(MAGIC)].tolist()) != MAGIC):
        return None
    values = values.round().astype(np.int64)
    b = values[len(MAGIC):head]
    length = int(b[0]) << 24 | int(b[1]) << 16 | int(b[2]) << 8 | int(b[3])
    if length <= 0 or length > values.shape[0] - head:
        return None
    raw = bytes(int(v) & 255 for v in values[head:head + length])
    return json.loads(raw.decode('utf-8'))


#: Largest integer key MXNet can place on a server: it computes key * 9973 in a C int.
MAX_INT_KEY = (2 ** 31 - 1) // 9973


def slot_key(key, rank, num_workers, num_servers):
    """The integer key of worker `rank`'s slot of parameter `key` (slot mode).

    ``(key * M + rank) * S + key % S`` for M workers and S servers.  MXNet
    (``KVStoreDist::EncodeDefaultKey``) puts an array smaller than
    ``MXNET_KVSTORE_BIGARRAY_BOUND`` on server ``(x * 9973) % S`` of its key
    x; here ``x % S == key % S`` for every rank, so the M slots of a parameter
    share one server (and one canonical weight), while consecutive parameters
    go to different servers.  A big array is split over all servers by
    ranges, so every server holds the same slice of each slot.  With S = 1
    this is ``key * M + rank``.  The server decodes it with :func:`slot_of`.
    """
    return (key * num_workers + rank) * num_servers + key % num_servers


def slot_of(index, num_workers, num_servers):
    """Inverse of :func:`slot_key`: ``(key, rank)`` of the slot key `index`.

    Raises ValueError if `index` is not a slot key for this number of servers
    (its residue must be that of its parameter), e.g. when the workers and the
    servers disagree on the set-up.
    """
    key, rank = divmod(index // num_servers, num_workers)
    if index % num_servers != key % num_servers:
        raise ValueError('key %d is not a slot key for %d workers and %d servers'
                         % (index, num_workers, num_servers))
    return key, rank
#: Bit pattern of the first element of a refresh push (a NaN no arithmetic produces).
REFRESH_BITS = 0x7FC5A1E5


def refresh_marker(shape):
    """A push value that asks the server to copy its latest weights into the sender's slot."""
    out = np.zeros(shape, dtype=np.float32)
    out.reshape(-1)[:1] = np.array([REFRESH_BITS], dtype=np.uint32).view(np.float32)
    return out


def is_refresh(grad):
    """True if `grad` (NDArray) is a refresh push (see :func:`refresh_marker`)."""
    head = grad.reshape((-1,))[0:1].asnumpy()
    return head.view(np.uint32)[0] == REFRESH_BITS
