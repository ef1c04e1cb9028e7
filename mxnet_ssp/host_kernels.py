"""Server-side passes: DC-ASGD's compensation (one definition, run by NumPy on the memory of
CPU NDArrays or by MXNet's operators elsewhere), the momentum step, the copy into a
sender's slot and MXNet's own SGD (:class:`HostSGD`) as NumPy operations.

MXNet 1.9.1's CPU kernels for element-wise operators run one scalar at a time, and the
square root DC-ASGD-a needs per element costs about two whole ``sgd_mom_update`` passes
(docs/benchmarks.md).  NumPy's float32/float64 loops are vectorized, so the same passes
written as NumPy operations with ``out=`` are several times faster, allocate nothing and,
being IEEE operations in the same order, give the same bits as MXNet's operators and as
the NumPy oracle ``tests/support/oracle_optim.py``.

:func:`host_views` waits for every pending operation of MXNet's engine (``nd.waitall``:
the arrays may still be written or read by queued kernels) and returns NumPy arrays that
share the NDArrays' memory.  The caller writes through them synchronously and returns; MXNet
operations pushed afterwards see the new contents.  Only dense float32/float64 CPU arrays
qualify (:func:`on_host`); anything else runs the same passes through :class:`NDArrayOps`.
"""
import ctypes

import numpy as np

#: dtypes whose NumPy operations round like MXNet's CPU kernels (float16 does not: NumPy
#: computes it through float32 with other intermediate roundings)
HOST_DTYPES = (np.float32, np.float64)


def on_host(*arrays):
    """True if every array is a dense CPU NDArray of a dtype in :data:`HOST_DTYPES`."""
    for a in arrays:
        if a.context.device_type != 'cpu' or a.stype != 'default' \
                or a.dtype not in HOST_DTYPES:
            return False
    return True


class _Interface:
    """An object NumPy reads through the array interface (no copy)."""
    __slots__ = ('__array_interface__',)

    def __init__(self, address, shape, typestr):
        self.__array_interface__ = {'data': (address, False), 'shape': shape,
                                    'typestr': typestr, 'version': 3}


def host_views(*arrays):
    """NumPy arrays sharing the memory of `arrays` (dense CPU NDArrays, :func:`on_host`),
    after every queued MXNet operation has finished.  Valid until the next MXNet operation
    on one of them is pushed; keep them local to one update."""
    from mxnet import ndarray as nd
    from mxnet.base import _LIB, check_call
    nd.waitall()
    views = []
    address = ctypes.c_void_p()
    for a in arrays:
        check_call(_LIB.MXNDArrayGetData(a.handle, ctypes.byref(address)))
        views.append(np.asarray(_Interface(address.value, a.shape, np.dtype(a.dtype).str)))
    return views


class NDArrayOps:
    """The NumPy functions the passes below call, as MXNet operators writing `out`.

    The passes take ``ops``: :mod:`numpy` itself for views of host memory (:func:`host_views`),
    or this class for arrays that stay in MXNet (a GPU's, float16).  The operations and their
    order are the same either way, so there is one definition of each pass; element-wise
    float32/float64 operations are correctly rounded in both, so on CPU the two give the same
    bits (tests/unit/optim/test_optim.py).  A scalar operand is rounded to the arrays' dtype first.
    """

    @staticmethod
    def _binary(tensor_op, scalar_op, a, b, out):
        from mxnet import ndarray as nd
        if isinstance(b, nd.NDArray):
            return getattr(nd, tensor_op)(a, b, out=out)
        return getattr(nd._internal, scalar_op)(a, scalar=float(b), out=out)

    @classmethod
    def multiply(cls, a, b, out):
        return cls._binary('elemwise_mul', '_mul_scalar', a, b, out)

    @classmethod
    def add(cls, a, b, out):
        return cls._binary('elemwise_add', '_plus_scalar', a, b, out)

    @classmethod
    def subtract(cls, a, b, out):
        return cls._binary('elemwise_sub', '_minus_scalar', a, b, out)

    @classmethod
    def divide(cls, a, b, out):
        return cls._binary('elemwise_div', '_div_scalar', a, b, out)

    @staticmethod
    def sqrt(a, out):
        from mxnet import ndarray as nd
        return nd.sqrt(a, out=out)

    @staticmethod
    def clip(a, low, high, out):
        from mxnet import ndarray as nd
        return nd.clip(a, float(low), float(high), out=out)

    @staticmethod
    def copyto(dst, src):
        src.copyto(dst)


def scalar_type(array):
    """The NumPy scalar type of `array`'s elements (a NumPy array or an NDArray)."""
    return np.dtype(array.dtype).type


def dcasgd_compensate(g, w, b, out, p, lamda, adaptive, reading, mean_square=None,
                      decay=0.0, epsilon=0.0, ops=np):
    """``g_c`` of DC-ASGD into `out` (arrays of one dtype; `p` a work array; `ops`:
    :mod:`numpy` or :class:`NDArrayOps`):

    * DC-ASGD-c: ``g + lamda * ((g*g) * (w - b))``;
    * ``'paper'``: ``MS = m*MS + ((1-m)*g)*g``, then
      ``g + (lamda * ((g*g) * (w - b))) / (sqrt(MS) + epsilon)``;
    * ``'multiverso'``: ``MS = (1-m)*(g*g) + m*MS``, then
      ``g + (lamda * (g / sqrt(MS + epsilon))) * ((w - b) * g)``.

    The groupings are those of ``DCASGDRule`` of ``tests/support/oracle_optim.py``; the scalars are
    rounded to the arrays' dtype first.  `g`, `w` and `b` are only read.
    """
    f = scalar_type(out)
    lam = f(lamda)
    if not adaptive:
        ops.multiply(g, g, out=p)
        ops.subtract(w, b, out=out)
        ops.multiply(p, out, out=p)
        ops.multiply(p, lam, out=p)
        ops.add(g, p, out=out)
        return
    m = f(decay)
    one_m = f(1.0) - m
    eps = f(epsilon)
    ms = mean_square
    if reading == 'multiverso':
        ops.multiply(g, g, out=p)
        ops.multiply(p, one_m, out=p)
        ops.multiply(ms, m, out=ms)
        ops.add(ms, p, out=ms)
        ops.add(ms, eps, out=out)
        ops.sqrt(out, out=out)
        ops.divide(g, out, out=out)
        ops.multiply(out, lam, out=out)
        ops.subtract(w, b, out=p)
        ops.multiply(p, g, out=p)
        ops.multiply(out, p, out=out)
        ops.add(g, out, out=out)
        return
    ops.multiply(g, one_m, out=p)
    ops.multiply(p, g, out=p)
    ops.multiply(ms, m, out=ms)
    ops.add(ms, p, out=ms)
    ops.multiply(g, g, out=p)
    ops.subtract(w, b, out=out)
    ops.multiply(p, out, out=p)
    ops.multiply(p, lam, out=p)
    ops.sqrt(ms, out=out)
    ops.add(out, eps, out=out)
    ops.divide(p, out, out=p)
    ops.add(g, p, out=out)


def momentum_step(w, d, mom, p, lr, momentum):
    """The step of ``sgd_mom_update`` (``momentum > 0``) or ``sgd_update`` with ``wd = 0``
    and no rescaling: ``mom = momentum*mom - lr*d; w += mom``, or ``w -= lr*d``.  `d` is
    only read; `p` is a work array."""
    f = w.dtype.type
    np.multiply(d, f(lr), out=p)
    if mom is None:
        np.subtract(w, p, out=w)
        return
    np.multiply(mom, f(momentum), out=mom)
    np.subtract(mom, p, out=mom)
    np.add(w, mom, out=w)


class SGDScalars:
    """The numbers MXNet's SGD operators compute with, for the Python numbers given to them.

    MXNet hands an operator its parameters as text (``str`` of each keyword argument), and
    the parsers it reads them with do not always give the float32 nearest to the number: of
    41,013 learning rates tried with MXNet 1.9.1, 1,486 came out of ``multi_sgd_update``'s
    ``lrs`` one bit away from ``numpy.float32(lr)``.  So each parameter is learnt from the
    operator itself, once per number: ``multi_sgd_mom_update`` on one element whose result
    is exactly the parameter or minus it.  Cached; one small MXNet operation per new number
    (a learning-rate schedule gives one per new rate).  MXNet writes each number with ``str``
    (``repr`` inside the lists ``lrs`` and ``wds``), the same text for equal numbers of one
    type, so the cache is keyed by the number.
    """

    #: parameter -> (weight, gradient, momentum state, the call's other parameters, sign):
    #: the one element's result (the new momentum) is ``sign * parameter``
    _PROBES = {
        'lrs': (0.0, 1.0, 0.0, {'wds': [0.0], 'momentum': 0.0, 'rescale_grad': 1.0}, -1.0),
        'wds': (1.0, 0.0, 0.0, {'lrs': [1.0], 'momentum': 0.0, 'rescale_grad': 1.0}, -1.0),
        'rescale_grad': (0.0, 1.0, 0.0, {'lrs': [1.0], 'wds': [0.0], 'momentum': 0.0}, -1.0),
        'momentum': (0.0, 0.0, 1.0, {'lrs': [0.0], 'wds': [0.0], 'rescale_grad': 1.0}, 1.0),
        # the largest float32 gradient, clipped to the bound
        'clip_gradient': (0.0, float(np.finfo(np.float32).max), 0.0,
                          {'lrs': [1.0], 'wds': [0.0], 'momentum': 0.0, 'rescale_grad': 1.0},
                          -1.0),
    }
    _LIMIT = 4096                         # numbers remembered, per parameter

    def __init__(self):
        self._known = {name: {} for name in self._PROBES}

    def value(self, name, number):
        """The float32 MXNet computes with for `number` given as parameter `name` of
        ``multi_sgd_mom_update`` / ``multi_sgd_update`` (``lrs`` and ``wds``: one entry)."""
        known = self._known[name]
        got = known.get(number)           # equal numbers: the same text for MXNet
        if got is None:
            from mxnet import ndarray as nd
            w, g, m, others, sign = self._PROBES[name]
            weight, mom = nd.array([w]), nd.array([m])
            kwargs = dict(others)
            kwargs[name] = [number] if name in ('lrs', 'wds') else number
            nd.multi_sgd_mom_update(weight, nd.array([g]), mom, out=weight, num_weights=1,
                                    **kwargs)
            got = np.float32(sign * mom.asnumpy()[0])
            if len(known) >= self._LIMIT:
                known.clear()
            known[number] = got
        return got


def sgd_step(w, g, mom, work, momentum, lr, wd, rescale, clip=None):
    """One update of MXNet 1.9.1's ``multi_sgd_mom_update`` (`mom` an array) or
    ``multi_sgd_update`` (`mom` None) on NumPy arrays of one dtype, float32 or float64, in the
    kernel's order of operations (so with its bits)::

        mom = momentum*mom - (lr*wd)*w - (lr*rescale)*g ;  w = w + mom
        w = w + ((0 - (lr*wd)*w) - (lr*rescale)*g)            (no momentum)

    with ``lr * clip(rescale*g, -clip, clip)`` for the last term when `clip` is given.  The
    scalars are the kernel's own (:class:`SGDScalars`), converted to `w`'s dtype before the
    products, as the kernel does.  `work`: one work array shaped like `w` (two without
    momentum)."""
    f = w.dtype.type
    lr, wd, rescale = f(lr), f(wd), f(rescale)
    u = work[0]
    np.multiply(w, lr * wd, out=u)
    if mom is not None:
        np.multiply(mom, f(momentum), out=mom)
        np.subtract(mom, u, out=mom)
        acc = mom
    else:
        np.subtract(f(0), u, out=u)
        acc, u = u, work[1]
    if clip is None:
        np.multiply(g, lr * rescale, out=u)
    else:
        np.multiply(g, rescale, out=u)
        np.clip(u, -f(clip), f(clip), out=u)
        np.multiply(u, lr, out=u)
    np.subtract(acc, u, out=acc)
    np.add(w, acc, out=w)


class HostSGD:
    """MXNet's own SGD (``mx.optimizer.SGD``, that class exactly: a subclass may change the
    update) run by NumPy on a server, with the same bits.

    :meth:`update` does what ``SGD.update_multi_precision`` does for one dense float32/float64
    CPU array: the same book-keeping on the optimizer (update count, learning rate with its
    multiplier, weight decay with its multiplier) and the arithmetic of MXNet's
    ``multi_sgd_mom_update`` / ``multi_sgd_update`` kernel as NumPy passes
    (:func:`sgd_step`), with the kernel's own values of the scalars
    (:class:`SGDScalars`).  MXNet 1.9.1's kernel runs one scalar at
    a time and, for each element, loops over the list of arrays it was given: 0.57 ms per MB
    here, the NumPy passes 0.18-0.35 (docs/benchmarks.md).
    Anything else (float16, sparse, other devices, a momentum state that is not an array,
    a clipping bound beyond float32) returns False before touching the optimizer, and the
    caller runs MXNet's own update.
    """

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self._scalars = SGDScalars()
        self._work = {}                   # dtype -> two flat arrays, as large as needed yet

    @staticmethod
    def applies(optimizer):
        """Whether `optimizer` is MXNet's SGD itself."""
        from mxnet.optimizer import SGD
        return type(optimizer) is SGD

    def _buffers(self, like):
        work = self._work.get(like.dtype)
        if work is None or work[0].size < like.size:
            work = self._work[like.dtype] = [np.empty(like.size, dtype=like.dtype)
                                             for _ in range(2)]
        return [b[:like.size].reshape(like.shape) for b in work]

    def update(self, index, weight, grad, state):
        """Update `weight` (NDArray) with `grad` and the momentum `state` as
        ``optimizer.update_multi_precision(index, weight, grad, state)`` would; False (and
        nothing done) where this path does not apply."""
        from mxnet import ndarray as nd
        from mxnet.base import MXNetError
        opt = self.optimizer
        momentum = opt.momentum > 0
        if not (on_host(weight, grad) and grad.shape == weight.shape
                and grad.dtype == weight.dtype):
            return False
        if momentum and not (isinstance(state, nd.NDArray) and on_host(state)
                             and state.shape == weight.shape and state.dtype == weight.dtype):
            return False
        scalars = self._scalars
        clip = None
        # MXNet passes a bound that is not 0 (or None); its kernel clips when it is >= 0
        if opt.clip_gradient and opt.clip_gradient > 0:
            try:
                clip = scalars.value('clip_gradient', opt.clip_gradient)
            except MXNetError:    # MXNet refuses the bound: its own update says so
                return False
            if not clip < np.finfo(np.float32).max:     # no bound below float32's largest
                return False
        indices = [index]
        opt._update_count(indices)
        lr = scalars.value('lrs', opt._get_lrs(indices)[0])
        wd = scalars.value('wds', opt._get_wds(indices)[0])
        rescale = scalars.value('rescale_grad', opt.rescale_grad)
        mom = scalars.value('momentum', opt.momentum) if momentum else None
        views = host_views(weight, grad, state) if momentum else host_views(weight, grad)
        sgd_step(views[0], views[1], views[2] if momentum else None, self._buffers(views[0]),
                 mom, lr, wd, rescale, clip)
        return True


def copy_into(dst, src):
    """``dst[:] = src`` for two NDArrays of one shape and dtype: a memcpy through NumPy views
    when both are dense float32/float64 CPU arrays (:func:`on_host`), else MXNet's copy."""
    if dst.shape == src.shape and dst.dtype == src.dtype and on_host(dst, src):
        d, s = host_views(dst, src)
        np.copyto(d, s)
    else:
        dst[:] = src
