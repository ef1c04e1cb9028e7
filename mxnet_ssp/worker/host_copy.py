"""Many CPU copies as one operation of MXNet's engine, done by NumPy.

A worker's bucket step copies every gradient of a bucket into the bucket's send buffer and
every pulled weight out of its receive buffer.  MXNet 1.9.1's CPU copy kernels move about
3 GB/s here; NumPy's ``copyto`` on views of the same memory moves the ResNet-110 list
(335 arrays, 6.9 MB) in 0.4 ms against 2.3 ms for one batched MXNet copy (docs/benchmarks.md).

The copies must keep MXNet's ordering: after the operations that write the sources
(backward, a pull) and before those that read the destinations (the push, the next
forward), without making the caller wait.  So :class:`CopyPlan` pushes ONE operation onto
MXNet's engine (``MXEnginePushSyncND``) that reads the sources' arrays and writes the
destinations'; the engine runs its body, a Python function doing the NumPy copies, on one
of its CPU threads once the sources are ready, and everything pushed later that touches a
destination waits for it.

Two things MXNet leaves to the caller, both checked here:

* The engine deadlocks (waits for ever, no error) when one operation names the same
  variable twice.  A variable belongs to an array's storage chunk, which views (slices,
  reshapes) share.  MXNet gives Python no name for it, so :func:`chunk_of` reads the chunk
  pointer at the start of the C++ ``NDArray`` (its first member, ``std::shared_ptr<Chunk>``
  in MXNet 1.9.1); :func:`available` checks that reading on arrays whose sharing is known
  (a base, two slices of it, a reshape, another array) before the first use, and the path is
  off if it does not hold.  Each operation names each chunk once, and never a chunk both
  read and written.
* NumPy views (:func:`host_view`) are made from ``MXNDArrayGetData``: valid while the array
  lives and keeps its storage (dense arrays never move it).  The first view of an array
  waits until it is written (its storage exists).

Only dense CPU arrays of :data:`HOST_TYPES` take this path (the callers,
:mod:`mxnet_ssp.worker.packer` and :mod:`mxnet_ssp.worker.chunking`, check); they keep MXNet's
copies for the rest.

MXNet's CPU build (MKL-DNN) may keep an array's memory in a blocked layout of its own, which
NumPy would read and write as if it were row-major: a convolution or fully connected layer
reorders its *weight* array in place at an inference pass (``MKLDNNDataReorderAsync``; the
next training pass queues the way back), and an operator may write an output in its layout.
No call tells, without waiting on the engine, whether such a layout is still to come; what
can be told is whether it is there now (:func:`in_mxnet_layout`: MXNet refuses a plain view of
such an array).  So:

* :func:`host_view` refuses an array in MXNet's layout (the caller copies it through MXNet);
* a plan may name, per copy, the source to check in the operation's body, just before the
  copy (`check`); a source found in MXNet's layout there is not copied, and the next
  push of a plan raises :class:`LayoutChanged` (the step that pushed it would
  otherwise carry a wrong value without a word);
* the callers never give this path a destination that MXNet may reorder in place: weights
  of two or more dimensions are copied out of buckets by MXNet (:mod:`mxnet_ssp.worker.packer`).
  One-dimensional arrays have one layout only (MXNet 1.9.1 reorders weights in place for
  convolution, deconvolution and fully connected layers, whose weights have 2 to 5).

An error inside an operation's body (none is expected: shapes and types are checked when the
views are made) is kept and raised by the next push (:func:`raise_pending`).
"""
import ctypes
import itertools
import logging
import sys
import threading
import traceback

import numpy as np

from ..host_kernels import _Interface

__all__ = ['HOST_TYPES', 'CopyPlan', 'LayoutChanged', 'available', 'chunk_of', 'host_view',
           'in_mxnet_layout', 'raise_pending']

#: The element types a host copy takes.
HOST_TYPES = (np.dtype(np.float32), np.dtype(np.float64))

logger = logging.getLogger(__name__)

_SYNC_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class _Context(ctypes.Structure):
    """MXNet's ``Context``: device type (1: CPU) and id."""
    _fields_ = [('dev_type', ctypes.c_int), ('dev_id', ctypes.c_int)]


_CPU = _Context(1, 0)
_jobs = {}                       # token -> the CopyPlan pushed (alive until its body ran)
_errors = []
_tokens = itertools.count(1)
_lock = threading.Lock()
_state = {'available': None}


def _run(_rctx, token):
    """The operations' body, on an engine thread (ctypes takes the GIL for it)."""
    with _lock:
        job = _jobs.pop(token, None)
    if job is None:
        return
    try:
        changed = []                     # the indices of the copies not made
        out = ctypes.c_void_p()
        ref = ctypes.byref(out)
        for i, (dst, src, check) in enumerate(job.copies):
            if check is not None and _refused(check, out, ref):
                changed.append(i)
                continue
            dst[...] = src                # np.copyto's work, without its dispatch (1 us)
        if changed:
            keys = job.keys or ()
            raise LayoutChanged([keys[i] for i in changed if i < len(keys)])
    except BaseException as err:             # noqa: BLE001 - reported by raise_pending
        _errors.append(err)
        sys.stderr.write('mxnet-ssp: a host copy failed on MXNet\'s engine thread:\n%s'
                         % ''.join(traceback.format_exception(type(err), err,
                                                              err.__traceback__)))


_RUN = _SYNC_FN(_run)


class LayoutChanged(RuntimeError):
    """A source of a host copy was found, in the copy's operation, in MKL-DNN's own layout."""

    def __init__(self, keys):
        self.keys = list(keys)
        super().__init__(
            'the array for key(s) %s was in MKL-DNN\'s own memory layout when its host copy ran '
            '(an MXNet operator wrote it so after its copies were planned): it was not copied, '
            'so what reads the copy has a stale value; set MXNET_SSP_HOST_COPIES=0 to copy '
            'through MXNet' % (', '.join(str(k) for k in self.keys) or '?'))


def _refused(handle, out, ref):
    """Whether MXNet refuses to describe the memory of the NDArray behind `handle` (a
    ``c_void_p``) as a plain array (its ``ToDLPack`` fails): it is in MKL-DNN's own layout.
    No engine wait.  `out` is a ``c_void_p`` and `ref` ``byref(out)``, made by the caller
    (made once per operation, the check costs a quarter of what it does otherwise)."""
    api = _API or _load_api()
    if api[0](handle, ref) != 0:
        return True
    api[1](out)
    return False


_API = []


def _load_api():
    from mxnet.base import _LIB
    _API[:] = [_LIB.MXNDArrayToDLPack, _LIB.MXNDArrayCallDLPackDeleter]
    return _API


def in_mxnet_layout(array):
    """Whether `array` (an NDArray) is now in MKL-DNN's own (blocked) memory layout."""
    out = ctypes.c_void_p()
    return _refused(ctypes.c_void_p(array.handle.value), out, ctypes.byref(out))


def chunk_of(array):
    """The address of `array`'s storage chunk (its engine variable's owner), read from the
    C++ NDArray; only meaningful once :func:`available` said True."""
    return ctypes.c_void_p.from_address(array.handle.value).value


def _layout_holds():
    from mxnet import ndarray as nd
    base = nd.zeros((4, 2))
    other = nd.zeros((4, 2))
    first, second, shaped = base[0:2], base[2:4], base.reshape((8,))
    chunks = [chunk_of(a) for a in (base, first, second, shaped, other)]
    return (all(chunks) and len({chunks[0], chunks[1], chunks[2], chunks[3]}) == 1
            and chunks[4] != chunks[0])


def available():
    """Whether this MXNet has the engine call and the NDArray layout this module relies on
    (checked once per process)."""
    if _state['available'] is None:
        try:
            from mxnet.base import _LIB
            ok = hasattr(_LIB, 'MXEnginePushSyncND') and _layout_holds()
        except Exception as err:             # noqa: BLE001 - any surprise: keep MXNet's copies
            logger.info('mxnet-ssp: host copies are off (%s: %s)', type(err).__name__, err)
            ok = False
        _state['available'] = ok
    return _state['available']


def host_view(array):
    """A NumPy array sharing `array`'s memory (a dense CPU float32/float64 NDArray, whose
    storage then exists: this waits until pending writes to it are done), or None where
    the array is in MKL-DNN's own layout (:func:`in_mxnet_layout`)."""
    from mxnet.base import _LIB, check_call
    array.wait_to_read()
    if in_mxnet_layout(array):
        return None
    address = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(address)))
    return np.asarray(_Interface(address.value, array.shape, np.dtype(array.dtype).str))


def _distinct(arrays, skip=()):
    seen, out = set(skip), []
    for a in arrays:
        c = chunk_of(a)
        if c not in seen:
            seen.add(c)
            out.append(a)
    return out


def raise_pending():
    """Raise the first error an operation's body met, if any (then forget them)."""
    if _errors:
        err = _errors[0]
        del _errors[:]
        if isinstance(err, LayoutChanged):
            raise LayoutChanged(err.keys) from err
        raise RuntimeError('a host copy failed on MXNet\'s engine thread: %s: %s'
                           % (type(err).__name__, err)) from err


class CopyPlan:
    """One engine operation doing ``dst[...] = src`` for each ``(dst, src)`` or
    ``(dst, src, check)`` of `copies` (NumPy views; `check` an NDArray whose layout is checked
    just before the copy, see the module's docstring, or None), after MXNet's pending writes
    to `reads` and reads and writes of `writes` (NDArrays: those whose memory the views show).
    Made once by its caller and pushed every step (:meth:`push`) while its arrays stay the
    same; `keys` may label the copies, one per copy, for :class:`LayoutChanged`."""

    __slots__ = ('copies', 'reads', 'writes', 'keys', '_checked', '_const', '_mutable')

    def __init__(self, copies, reads, writes):
        self._checked = [c[2] for c in copies if len(c) > 2 and c[2] is not None]
        self.copies = [(c[0], c[1], ctypes.c_void_p(c[2].handle.value)
                        if len(c) > 2 and c[2] is not None else None)
                       for c in copies]           # the handles stay valid: _checked
        self.writes = _distinct(writes)
        self.reads = _distinct(reads, skip={chunk_of(a) for a in self.writes})
        self.keys = None                  # the caller's label of what the copies are
        self._const = (ctypes.c_void_p * len(self.reads))(*[a.handle.value for a in self.reads])
        self._mutable = (ctypes.c_void_p * len(self.writes))(
            *[a.handle.value for a in self.writes])

    def push(self, report=True):
        """Push the operation; returns at once.  First raises what an earlier operation's body
        met (:func:`raise_pending`), unless `report` is False."""
        from mxnet.base import _LIB, check_call
        if report:
            raise_pending()
        token = next(_tokens)
        with _lock:
            _jobs[token] = self                   # kept alive until the body ran
        try:
            check_call(_LIB.MXEnginePushSyncND(
                _RUN, ctypes.c_void_p(token), None, ctypes.byref(_CPU), self._const,
                len(self.reads), self._mutable, len(self.writes), None, 0,
                b'mxnet_ssp_host_copy'))
        except BaseException:
            with _lock:
                _jobs.pop(token, None)
            raise
