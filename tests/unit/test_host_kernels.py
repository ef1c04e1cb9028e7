"""The NumPy passes on MXNet NDArrays' memory (:mod:`mxnet_ssp.host_kernels`): DC-ASGD's
compensation and momentum step against values worked out by hand, and when copy_into takes
its memcpy through NumPy views (dense float32/float64 CPU arrays of one shape and dtype)."""
import numpy as np
import pytest

from conftest import need_module
from mxnet_ssp import host_kernels
from mxnet_ssp.host_kernels import dcasgd_compensate, momentum_step


def a32(*values):
    return np.array(values, dtype=np.float32)


# g = [2, -1], w - b = [0.5, 2], g*g = [4, 1], (g*g)*(w - b) = [2, 2]
G, W, B = a32(2.0, -1.0), a32(1.0, 3.0), a32(0.5, 1.0)


def compensate(lamda, adaptive, reading, ms=None, **kwargs):
    g, w, b = G.copy(), W.copy(), B.copy()
    out, p = np.full(2, np.nan, np.float32), np.full(2, np.nan, np.float32)
    dcasgd_compensate(g, w, b, out, p, lamda, adaptive, reading, mean_square=ms, **kwargs)
    assert (g == G).all() and (w == W).all() and (b == B).all()      # only read
    return out


def test_dcasgd_c():
    """g + lamda * ((g*g) * (w - b)) = [2, -1] + 0.5 * [2, 2]."""
    assert compensate(0.5, False, 'paper').tolist() == [3.0, 0.0]


def test_dcasgd_a_paper_defaults_decay_0_and_epsilon_0():
    """decay 0: MS = g*g = [4, 1]; epsilon 0: g + 0.5 * [2, 2] / [2, 1] = [2.5, 0]."""
    ms = a32(1.0, 5.0)
    assert compensate(0.5, True, 'paper', ms).tolist() == [2.5, 0.0]
    assert ms.tolist() == [4.0, 1.0]


def test_dcasgd_a_paper():
    """decay 0.5: MS = 0.5 * [14, 7] + 0.5 * [4, 1] = [9, 4]; epsilon 1 outside the sqrt:
    g + 0.75 * [2, 2] / [3 + 1, 2 + 1] = [2 + 0.375, -1 + 0.5]."""
    ms = a32(14.0, 7.0)
    assert compensate(0.75, True, 'paper', ms, decay=0.5, epsilon=1.0).tolist() == [2.375, -0.5]
    assert ms.tolist() == [9.0, 4.0]


def test_dcasgd_a_multiverso_defaults():
    """MS = g*g = [4, 1]; g + (0.5 * (g / [2, 1])) * ((w - b) * g) = [2 + 0.5, -1 + 1]."""
    ms = a32(1.0, 5.0)
    assert compensate(0.5, True, 'multiverso', ms).tolist() == [2.5, 0.0]
    assert ms.tolist() == [4.0, 1.0]


def test_dcasgd_a_multiverso():
    """decay 0.5: MS = 0.5 * [4, 1] + 0.5 * [3, 6] = [3.5, 3.5]; epsilon 0.5 inside the sqrt:
    g + (0.75 * (g / [2, 2])) * ((w - b) * g) = [2 + 0.75 * 1 * 1, -1 + 0.75 * -0.5 * -2]."""
    ms = a32(3.0, 6.0)
    out = compensate(0.75, True, 'multiverso', ms, decay=0.5, epsilon=0.5)
    assert ms.tolist() == [3.5, 3.5] and out.tolist() == [2.75, -0.25]


def test_momentum_step():
    """lr 0.5, d = [2, 4]: SGD w = [1, 1] - [1, 2]; momentum 0.5 from mom [2, -2]:
    mom = [1, -1] - [1, 2] = [0, -3], w = [1, -2]."""
    w, d, p = a32(1.0, 1.0), a32(2.0, 4.0), a32(0.0, 0.0)
    momentum_step(w, d, None, p, 0.5, 0.9)
    assert w.tolist() == [0.0, -1.0] and d.tolist() == [2.0, 4.0]
    w, mom = a32(1.0, 1.0), a32(2.0, -2.0)
    momentum_step(w, d, mom, p, 0.5, 0.5)
    assert mom.tolist() == [0.0, -3.0] and w.tolist() == [1.0, -2.0]


# -- copy_into ---------------------------------------------------------------------------------

@pytest.fixture
def mx():
    return need_module('mxnet')


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_host_views_are_the_arrays_memory_in_their_dtype(mx, dtype):
    a = mx.nd.arange(6, dtype=dtype).reshape((2, 3)) + 1          # queued
    b = mx.nd.zeros(4, dtype=dtype)
    va, vb = host_kernels.host_views(a, b)
    assert (va.dtype, va.shape, vb.dtype, vb.shape) == (np.dtype(dtype), (2, 3),
                                                        np.dtype(dtype), (4,))
    assert va.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]] and vb.tolist() == [0.0] * 4
    va[1, 2] = -1.0
    vb[3] = 7.0
    assert a.asnumpy()[1].tolist() == [4.0, 5.0, -1.0] and b.asnumpy().tolist() == [0, 0, 0, 7]


@pytest.fixture
def fast_paths(monkeypatch):
    """The arrays of every copy_into that went through NumPy views (host_views)."""
    calls = []
    real = host_kernels.host_views

    def spy(*arrays):
        calls.append(arrays)
        return real(*arrays)

    monkeypatch.setattr(host_kernels, 'host_views', spy)
    return calls


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_copy_into_host_arrays_of_one_shape_and_dtype_is_a_memcpy(mx, fast_paths, dtype):
    dst = mx.nd.zeros((2, 3), dtype=dtype)
    src = mx.nd.arange(6, dtype=dtype).reshape((2, 3)) * 2        # queued
    host_kernels.copy_into(dst, src)
    assert len(fast_paths) == 1 and fast_paths[0] == (dst, src)
    assert dst.dtype == np.dtype(dtype)
    assert dst.asnumpy().tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


def test_copy_into_float16_goes_through_mxnet(mx, fast_paths):
    dst = mx.nd.zeros(3, dtype='float16')
    host_kernels.copy_into(dst, mx.nd.array([0.5, -2.0, 3.0], dtype='float16'))
    assert fast_paths == [] and dst.asnumpy().tolist() == [0.5, -2.0, 3.0]


def test_copy_into_other_shapes_go_through_mxnet_which_broadcasts(mx, fast_paths):
    dst = mx.nd.zeros((2, 3))
    host_kernels.copy_into(dst, mx.nd.array([1.0, 2.0, 3.0]))
    assert fast_paths == [] and dst.asnumpy().tolist() == [[1.0, 2.0, 3.0]] * 2
    with pytest.raises(ValueError, match='operands could not be broadcast together'):
        host_kernels.copy_into(mx.nd.zeros(2), mx.nd.zeros(3))
    assert fast_paths == []


def test_copy_into_other_dtypes_go_through_mxnet_which_casts(mx, fast_paths):
    dst = mx.nd.zeros(3, dtype='float32')
    host_kernels.copy_into(dst, mx.nd.array([0.5, -2.0, 3.0], dtype='float64'))
    assert fast_paths == [] and dst.dtype == np.float32
    assert dst.asnumpy().tolist() == [0.5, -2.0, 3.0]
    ints = mx.nd.zeros(3, dtype='int32')
    host_kernels.copy_into(ints, mx.nd.array([1.75, -2.5, 3.25]))    # truncated, as MXNet does
    assert fast_paths == [] and ints.asnumpy().tolist() == [1, -2, 3]


@pytest.mark.parametrize('pinned', ['dst', 'src'])
def test_copy_into_needs_both_arrays_on_the_plain_cpu(mx, fast_paths, pinned):
    ctx = {name: mx.cpu_pinned() if name == pinned else mx.cpu() for name in ('dst', 'src')}
    dst = mx.nd.zeros(3, ctx=ctx['dst'])
    src = mx.nd.array([1.0, 2.0, 3.0], ctx=ctx['src'])
    assert not host_kernels.on_host(dst, src)
    host_kernels.copy_into(dst, src)
    assert fast_paths == [] and dst.asnumpy().tolist() == [1.0, 2.0, 3.0]


def test_host_views_read_each_array_with_its_own_dtype():
    mx = need_module('mxnet')
    a = mx.nd.array([1.5, -2.25, 3.0], dtype='float32')
    b = mx.nd.array([[1e300, -4.0]], dtype='float64')
    c = mx.nd.array([7, 8], dtype='float16')
    va, vb, vc = host_kernels.host_views(a, b, c)
    assert (va.dtype, vb.dtype, vc.dtype) == (np.float32, np.float64, np.float16)
    assert va.shape == (3,) and vb.shape == (1, 2)
    np.testing.assert_array_equal(va, [1.5, -2.25, 3.0])
    np.testing.assert_array_equal(vb, [[1e300, -4.0]])
    np.testing.assert_array_equal(vc, [7, 8])


@pytest.mark.parametrize('name', ['multiply', 'add', 'subtract', 'divide'])
@pytest.mark.parametrize('operand', ['array', 'number'])
def test_ndarray_ops_compute_what_numpy_computes(name, operand):
    """NDArrayOps, the passes' operations as MXNet operators, with an array or a number as
    the second operand: the bits of NumPy's operation (element-wise IEEE float32)."""
    mx = need_module('mxnet')
    a = a32(1.5, -2.25, 7.0, 0.1)
    b = a32(0.3, 4.0, -0.7, 3.0) if operand == 'array' else np.float32(0.3)
    out = mx.nd.zeros(4)
    second = mx.nd.array(b) if operand == 'array' else float(b)
    getattr(host_kernels.NDArrayOps, name)(mx.nd.array(a), second, out=out)
    np.testing.assert_array_equal(out.asnumpy(), getattr(np, name)(a, b))


def test_ndarray_ops_copyto_and_clip_and_sqrt():
    mx = need_module('mxnet')
    src, dst = mx.nd.array(a32(1, -4, 9)), mx.nd.zeros(3)
    host_kernels.NDArrayOps.copyto(dst, src)
    assert dst.asnumpy().tolist() == [1, -4, 9]
    host_kernels.NDArrayOps.clip(src, -2, 3, out=dst)
    assert dst.asnumpy().tolist() == [1, -2, 3]
    host_kernels.NDArrayOps.sqrt(mx.nd.array(a32(4, 9, 0.25)), out=dst)
    assert dst.asnumpy().tolist() == [2, 3, 0.5]
