"""MXNet's SGD run by NumPy on the servers (mxnet_ssp.host_kernels: HostSGD, sgd_step and
SGDScalars): the same bits and the same book-keeping as ``mx.optimizer.SGD`` itself, for every
setting its kernel reads, and MXNet's own update wherever the NumPy path does not apply."""
import pickle

import numpy as np
import pytest

mx = pytest.importorskip('mxnet')
nd = mx.nd

from mxnet_ssp.host_kernels import HostSGD, SGDScalars, sgd_step  # noqa: E402
from mxnet_ssp.server.updater import ServerOptimizer  # noqa: E402

# numbers MXNet 1.9.1 reads one bit away from numpy.float32(x): lrs/wds entries (one parser)
# and the scalar parameters (another); an update with numpy.float32 of them differs
LR_ODD, WD_ODD = 0.3839855343103409, 0.40906475484371185
FIELD_ODD = (0.9742120206356049, 0.39301227033138275, 0.20404959470033646)

SETTINGS = {
    'momentum, wd, rescale': dict(learning_rate=0.1, momentum=0.9, wd=1e-4, rescale_grad=1 / 128),
    'no momentum': dict(learning_rate=0.0123456789, wd=5e-4),
    'no momentum, clipped': dict(learning_rate=1.7, wd=1e-4, clip_gradient=0.01),
    'momentum, clipped': dict(learning_rate=0.05, momentum=0.987654, wd=0.0312345,
                              clip_gradient=0.5, rescale_grad=0.3333),
    'negative bound: no clipping': dict(learning_rate=0.1, momentum=0.9, clip_gradient=-1.0),
    'numbers MXNet reads its own way': dict(learning_rate=LR_ODD, wd=WD_ODD,
                                            rescale_grad=FIELD_ODD[0], momentum=FIELD_ODD[1],
                                            clip_gradient=FIELD_ODD[2]),
    'the same without clipping': dict(learning_rate=LR_ODD, wd=WD_ODD,
                                      rescale_grad=FIELD_ODD[0], momentum=FIELD_ODD[1]),
}


def optimizer(kw, schedule):
    opt = mx.optimizer.SGD(**kw)
    if schedule:
        opt.lr_scheduler = mx.lr_scheduler.FactorScheduler(1, 0.9, base_lr=opt.lr)
    opt.set_lr_mult({3: 0.37})
    opt.set_wd_mult({3: 0.0})
    return opt


def gradients(rs, n, dtype, steps):
    return [(rs.standard_normal(n) * rs.choice([1e-3, 1.0, 100.0])).astype(dtype)
            for _ in range(steps)]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('schedule', [False, True])
@pytest.mark.parametrize('name', sorted(SETTINGS))
def test_host_sgd_gives_the_bits_and_the_counts_of_mxnets_sgd(name, schedule, dtype):
    rs = np.random.RandomState(7)
    mine, theirs = optimizer(SETTINGS[name], schedule), optimizer(SETTINGS[name], schedule)
    host = HostSGD(mine)
    for index, shape in ((3, (37, 11)), (5, (1009,)), (3, (37, 11))):
        w0 = (rs.standard_normal(shape) * 3).astype(dtype)
        w_mine, w_theirs = nd.array(w0, dtype=dtype), nd.array(w0, dtype=dtype)
        s_mine = mine.create_state_multi_precision(index, w_mine)
        s_theirs = theirs.create_state_multi_precision(index, w_theirs)
        for g in gradients(rs, w0.size, dtype, 3):
            g = g.reshape(shape)
            assert host.update(index, w_mine, nd.array(g, dtype=dtype), s_mine) is True
            theirs.update_multi_precision(index, w_theirs, nd.array(g, dtype=dtype), s_theirs)
            np.testing.assert_array_equal(w_mine.asnumpy(), w_theirs.asnumpy())
            if s_theirs is not None:
                np.testing.assert_array_equal(s_mine.asnumpy(), s_theirs.asnumpy())
    assert mine._index_update_count == theirs._index_update_count
    assert mine.num_update == theirs.num_update


@pytest.mark.parametrize('name,numbers', [
    ('lrs', (LR_ODD, WD_ODD)), ('wds', (LR_ODD, WD_ODD)), ('rescale_grad', FIELD_ODD),
    ('momentum', FIELD_ODD), ('clip_gradient', FIELD_ODD)])
def test_scalars_are_the_operators_own_not_the_nearest_float32(name, numbers):
    scalars = SGDScalars()
    for x in numbers:
        got = scalars.value(name, x)
        assert isinstance(got, np.float32)
        assert got != np.float32(x)
        assert abs(float(got) - x) < 1e-7 * x         # one bit away, not another number
        assert scalars.value(name, x) == got          # cached: same answer
    assert scalars.value(name, 0.5) == np.float32(0.5)
    assert scalars.value(name, 2.0) == np.float32(2.0)


def test_scalars_are_learnt_once_per_text():
    scalars, calls = SGDScalars(), []
    real = nd.multi_sgd_mom_update

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)
    nd.multi_sgd_mom_update = counting
    try:
        for _ in range(3):
            scalars.value('lrs', 0.1)
            scalars.value('momentum', 0.1)
    finally:
        nd.multi_sgd_mom_update = real
    assert [sorted(c) for c in calls] == [
        ['lrs', 'momentum', 'num_weights', 'out', 'rescale_grad', 'wds']] * 2
    assert calls[0]['lrs'] == [0.1] and calls[1]['momentum'] == 0.1


def test_scalars_forget_all_past_the_limit():
    scalars = SGDScalars()
    scalars._LIMIT = 3
    for x in (0.1, 0.2, 0.3):
        scalars.value('wds', x)
    assert len(scalars._known['wds']) == 3
    scalars.value('wds', 0.4)
    assert list(scalars._known['wds']) == [0.4]


def test_sgd_step_without_momentum_keeps_the_sign_of_zero_as_the_kernel():
    # the kernel computes 0 - (lr*wd)*w - (lr*rescale)*g: for w = -0 and g = 0, +0
    w = np.array([-0.0, -0.0, 1.0], np.float32)
    g = np.zeros(3, np.float32)
    work = [np.empty(3, np.float32) for _ in range(2)]
    sgd_step(w, g, None, work, 0.0, np.float32(0.1), np.float32(0.5), np.float32(1.0))
    mine = w.copy()
    theirs = nd.array([-0.0, -0.0, 1.0])
    nd.multi_sgd_update(theirs, nd.zeros(3), out=theirs, lrs=[0.1], wds=[0.5], num_weights=1)
    np.testing.assert_array_equal(np.signbit(mine), np.signbit(theirs.asnumpy()))
    np.testing.assert_array_equal(mine, theirs.asnumpy())


def fresh(kw=None):
    return mx.optimizer.SGD(**(kw or dict(learning_rate=0.1, momentum=0.9)))


@pytest.mark.parametrize('case', ['float16', 'row_sparse gradient', 'row_sparse weight',
                                  'shapes differ',
                                  'dtypes differ', 'no momentum state', 'state of another dtype',
                                  'bound at float32\'s largest', 'bound MXNet refuses'])
def test_where_the_numpy_path_does_not_apply_nothing_is_touched(case):
    kw = dict(learning_rate=0.1, momentum=0.9)
    w = nd.ones(6)
    g = nd.ones(6)
    state = nd.zeros(6)
    if case == 'float16':
        w, g, state = w.astype('float16'), g.astype('float16'), state.astype('float16')
    elif case == 'row_sparse gradient':
        g = g.tostype('row_sparse')
    elif case == 'row_sparse weight':
        w = w.tostype('row_sparse')
    elif case == 'shapes differ':
        g = nd.ones((2, 3))
    elif case == 'dtypes differ':
        g = g.astype('float64')
    elif case == 'no momentum state':
        state = None
    elif case == 'state of another dtype':
        state = state.astype('float64')
    elif case == 'bound at float32\'s largest':
        kw['clip_gradient'] = float(np.finfo(np.float32).max)
    elif case == 'bound MXNet refuses':
        kw['clip_gradient'] = 1e39
    opt = fresh(kw)
    before = w.tostype('default').asnumpy().copy()
    assert HostSGD(opt).update(0, w, g, state) is False
    assert opt.num_update == 0 and opt._index_update_count == {}
    np.testing.assert_array_equal(w.tostype('default').asnumpy(), before)
    if case == 'bound MXNet refuses':
        with pytest.raises(mx.base.MXNetError, match='clip_gradient'):
            opt.update_multi_precision(0, w, g, state)


def test_a_momentum_of_zero_needs_no_state():
    opt = fresh(dict(learning_rate=0.5))
    w = nd.ones(4)
    assert HostSGD(opt).update(0, w, nd.ones(4), None) is True
    np.testing.assert_array_equal(w.asnumpy(), np.full(4, 0.5, np.float32))


def test_only_mxnets_sgd_itself_applies():
    class Mine(mx.optimizer.SGD):
        pass
    assert HostSGD.applies(mx.optimizer.SGD())
    assert not HostSGD.applies(Mine())
    assert not HostSGD.applies(mx.optimizer.NAG())
    assert not HostSGD.applies(mx.optimizer.Adam())


def test_work_buffers_grow_per_dtype_and_are_reused():
    host = HostSGD(fresh(dict(learning_rate=0.1)))
    small, big = np.zeros((2, 3), np.float32), np.zeros(50, np.float32)
    a = host._buffers(small)
    assert [b.shape for b in a] == [(2, 3), (2, 3)]
    b = host._buffers(big)
    assert [x.shape for x in b] == [(50,), (50,)]
    c = host._buffers(small)
    assert all(np.shares_memory(x, y) for x, y in zip(c, b))
    again = host._buffers(big)                    # as large as the buffers: no new ones
    assert all(np.shares_memory(x, y) for x, y in zip(again, b))
    d = host._buffers(np.zeros(4, np.float64))
    assert d[0].dtype == np.float64 and not np.shares_memory(d[0], b[0])
    assert not np.shares_memory(b[0], b[1])


def server_pushes(host_updates, pickled=False):
    """A server's updater (one key per array, and a bucket of two) fed the same pushes."""
    opt = mx.optimizer.SGD(learning_rate=LR_ODD, momentum=0.9, wd=1e-3, rescale_grad=0.25)
    server = ServerOptimizer(opt, host_updates=host_updates)
    if pickled:
        server = pickle.loads(pickle.dumps(server))
    server.control('buckets', [{'index': 900, 'payload': 30, 'length': 32,
                                'members': [(1, 0, 20, (4, 5)), (2, 20, 10, (10,))],
                                'lr_mult': 1.0, 'wd_mult': 1.0}])
    rs = np.random.RandomState(3)
    weights = {0: nd.array(rs.standard_normal(12).astype(np.float32)),
               900: nd.array(np.concatenate([rs.standard_normal(30), [0, 0]]).astype(np.float32))}
    for _ in range(4):
        server.update_key(0, weights[0], nd.array(rs.standard_normal(12).astype(np.float32)))
        push = np.concatenate([rs.standard_normal(30), [1, 1]]).astype(np.float32)
        server.update_key(900, weights[900], nd.array(push))
    return server, {k: v.asnumpy() for k, v in weights.items()}


def test_a_server_runs_sgd_by_numpy_unless_told_not_to():
    on, got_on = server_pushes(True)
    off, got_off = server_pushes(False)
    assert isinstance(on._host_rule, HostSGD) and off._host_rule is None
    for k in got_on:
        np.testing.assert_array_equal(got_on[k], got_off[k])
    # the setting travels with the updater to the servers
    again, got_again = server_pushes(False, pickled=True)
    assert again._host_rule is None and again.host_updates is False
    assert server_pushes(True, pickled=True)[0]._host_rule is not None


def test_the_numpy_path_is_the_one_taken(monkeypatch):
    calls = []
    real = HostSGD.update

    def spy(self, *args):
        done = real(self, *args)
        calls.append(done)
        return done
    monkeypatch.setattr(HostSGD, 'update', spy)
    server_pushes(True)
    assert calls == [True] * 8
    del calls[:]
    server_pushes(False)
    assert calls == []


def test_an_updater_pickled_before_the_setting_runs_sgd_by_numpy():
    server = ServerOptimizer(mx.optimizer.SGD())
    state = server.__getstate__()
    del state['host_updates']
    old = ServerOptimizer.__new__(ServerOptimizer)
    old.__dict__.update(state)
    old._init_runtime()
    assert isinstance(old._host_rule, HostSGD)
    assert isinstance(ServerOptimizer(mx.optimizer.NAG())._host_rule, type(None))
