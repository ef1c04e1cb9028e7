"""The worker's bucket buffers (mxnet_ssp.worker.packer) on real NDArrays, and how the store tells
the parameter loops of gluon.Trainer and Module (whose members may be copied late, many at a
time) from any other caller (whose arrays are copied before the call returns).

Every buffer test runs twice: with the batched copies done by NumPy in an engine operation
(mxnet_ssp.worker.host_copy, the default where it is available) and by MXNet's own copies (where
it is not)."""
import ctypes
import sys
import threading

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from mxnet_ssp.core.buckets import ArrayInfo, plan_buckets
from mxnet_ssp.worker.bucketing import _keys_pushed_by
from mxnet_ssp.worker import host_copy
from mxnet_ssp.worker.packer import Packer

SHAPES = {0: (2, 3), 1: (4,), 2: (1, 2, 2)}


@pytest.fixture(autouse=True, params=['host copies', 'mxnet copies'])
def copies(request, monkeypatch):
    """Which path the batched copies take (decided when a Packer is made)."""
    host = request.param == 'host copies'
    if host:
        assert host_copy.available()              # MXNet 1.9.1 has what the path needs
    monkeypatch.setitem(host_copy._state, 'available', host)
    return host


def test_the_path_asked_for_is_the_one_taken(copies):
    plan, packer = make_packer()
    assert packer.buffers(plan.buckets[0]).host is copies
    plan16, packer16 = make_packer('float16')
    assert packer16.buffers(plan16.buckets[0]).host is False     # float16: never NumPy's
    plan64, packer64 = make_packer('float64')
    assert packer64.buffers(plan64.buckets[0]).host is copies


def test_host_copies_turned_off_are_mxnet_s(copies):
    plan = make_packer()[0]
    assert Packer(plan, [np.dtype('float32')], host=False).buffers(plan.buckets[0]).host is False
    assert Packer(plan, [np.dtype('float32')], host=True).buffers(plan.buckets[0]).host is copies


def make_packer(dtype='float32', shapes=SHAPES):
    group = (0, np.dtype(dtype).str, 1.0, 1.0)
    infos = [ArrayInfo(k, s, int(np.prod(s)), np.dtype(dtype).itemsize, group, True)
             for k, s in shapes.items()]
    plan = plan_buckets(infos, 1 << 20)
    assert len(plan) == 1
    return plan, Packer(plan, [np.dtype(dtype)])


def grads(dtype='float32', base=1.0):
    return {k: nd.array(np.arange(np.prod(s)).reshape(s) + 10 * k + base, dtype=dtype)
            for k, s in SHAPES.items()}


def payload(bucket, send):
    """member key -> its part of the send buffer, as NumPy, and the header."""
    flat = send.asnumpy()
    parts = {m.key: flat[m.offset:m.offset + m.size].reshape(m.shape) for m in bucket.members}
    return parts, flat[bucket.payload:bucket.length]


def stage_all(plan, packer, values, defer):
    bucket = plan.buckets[0]
    done = [packer.stage(bucket, m, values[m.key], defer=defer) for m in bucket.members]
    return bucket, done


@pytest.mark.parametrize('defer', [False, True])
def test_every_member_lands_in_its_place_with_a_full_header(defer):
    plan, packer = make_packer()
    g = grads()
    bucket, done = stage_all(plan, packer, g, defer)
    assert done == [False, False, True]           # complete at the last member only
    parts, header = payload(bucket, packer.take(bucket))
    for k in SHAPES:
        np.testing.assert_array_equal(parts[k], g[k].asnumpy())
    np.testing.assert_array_equal(header, [1, 1, 1])
    assert packer.pending() == [] and packer.deferring() == []


def test_a_staged_array_is_read_at_once_unless_deferred():
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    g = grads()
    packer.stage(bucket, bucket.members[0], g[0])                 # copied now
    packer.stage(bucket, bucket.members[1], g[1], defer=True)     # copied at the push
    assert packer.deferring() == [bucket]
    expected0, expected2 = g[0].asnumpy(), g[2].asnumpy()
    g[0][:] = -1
    g[1][:] = -2
    packer.stage(bucket, bucket.members[2], g[2], defer=True)
    parts, _ = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(parts[0], expected0)
    np.testing.assert_array_equal(parts[1], np.full(4, -2.0))
    np.testing.assert_array_equal(parts[2], expected2)


def test_gather_copies_the_deferred_members_before_anything_writes_to_them():
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    g = grads()
    packer.stage(bucket, bucket.members[0], g[0], defer=True)
    packer.stage(bucket, bucket.members[1], g[1], defer=True)
    expected = {k: g[k].asnumpy() for k in (0, 1)}
    packer.gather(bucket)
    assert packer.deferring() == []
    g[0][:] = -1
    g[1][:] = -1
    parts, header = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(parts[0], expected[0])
    np.testing.assert_array_equal(parts[1], expected[1])
    np.testing.assert_array_equal(parts[2], np.zeros((1, 2, 2)))  # not pushed: zeros, flag 0
    np.testing.assert_array_equal(header, [1, 1, 0])


def test_a_member_staged_again_keeps_its_latest_value():
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    first, second = grads(base=1.0), grads(base=100.0)
    packer.stage(bucket, bucket.members[0], first[0], defer=True)
    packer.stage(bucket, bucket.members[0], second[0])            # at once: forgets the first
    packer.stage(bucket, bucket.members[1], first[1])
    packer.stage(bucket, bucket.members[1], second[1], defer=True)
    parts, _ = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(parts[0], second[0].asnumpy())
    np.testing.assert_array_equal(parts[1], second[1].asnumpy())


@pytest.mark.parametrize('dtype', ['float16', 'float64'])
def test_types_mxnet_cannot_copy_many_at_a_time_are_copied_at_once(dtype, copies):
    # MXNet's CPU amp_multicast fails for these types (at run time, inside the engine);
    # host copies take float64 many at a time, as float32
    plan, packer = make_packer(dtype)
    bucket = plan.buckets[0]
    g = grads(dtype)
    expected = {k: v.asnumpy() for k, v in g.items()}
    batched = copies and dtype == 'float64'
    for m in bucket.members:
        packer.stage(bucket, m, g[m.key], defer=True)
        if batched:
            packer.gather(bucket)                 # what the store does before a write
        g[m.key][:] = -1
    assert packer.deferring() == []
    assert packer.buffers(bucket).batched is batched
    parts, _ = payload(bucket, packer.take(bucket))
    for k in SHAPES:
        np.testing.assert_array_equal(parts[k], expected[k])


def test_an_array_of_another_type_is_converted_by_a_copy_of_its_own():
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    g = grads()
    g[1] = g[1].astype('float64')
    for m in bucket.members:
        packer.stage(bucket, m, g[m.key], defer=True)
    assert set(packer.buffers(bucket).deferred) == {0, 2}
    parts, _ = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(parts[1], g[1].asnumpy().astype(np.float32))


def test_the_devices_of_a_member_are_summed_at_once():
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    a = nd.ones((2, 3), ctx=mx.cpu(0))
    b = nd.full((2, 3), 2.0, ctx=mx.cpu(1))
    packer.stage(bucket, bucket.members[0], [a, b], defer=True)
    a[:] = 100
    assert packer.deferring() == []
    parts, _ = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(parts[0], np.full((2, 3), 3.0))


def test_the_two_buffers_take_turns_so_a_pull_never_lands_on_gradients_being_gathered():
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    other = packer.recv(bucket)                   # before any push: the one not being filled
    first, second = grads(base=1.0), grads(base=100.0)
    stage_all(plan, packer, first, defer=False)
    sent = packer.take(bucket)
    assert sent is not other and packer.recv(bucket) is sent
    packer.stage(bucket, bucket.members[0], second[0])           # the next step's gradient
    sent[:] = 7.0                                 # the pull lands in the array pushed last
    for m in bucket.members[1:]:
        packer.stage(bucket, m, second[m.key], defer=True)
    sent_again = packer.take(bucket)
    assert sent_again is other and packer.recv(bucket) is other
    parts, header = payload(bucket, sent_again)
    for k in SHAPES:
        np.testing.assert_array_equal(parts[k], second[k].asnumpy())
    np.testing.assert_array_equal(header, [1, 1, 1])


def test_scatter_copies_each_member_to_every_array_it_is_given():
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    recv = packer.recv(bucket)
    recv[:] = nd.arange(bucket.length)
    flat = recv.asnumpy()
    outs = {0: nd.zeros((2, 3)),
            1: [nd.zeros(4), nd.zeros(4, ctx=mx.cpu(1)), nd.zeros(4, dtype='float16')],
            2: nd.zeros((1, 2, 2))}
    packer.scatter(bucket, [(m, outs[m.key]) for m in bucket.members])
    for m in bucket.members:
        want = flat[m.offset:m.offset + m.size].reshape(m.shape)
        for o in (outs[m.key] if isinstance(outs[m.key], list) else [outs[m.key]]):
            np.testing.assert_array_equal(o.asnumpy(), want.astype(o.dtype))


@pytest.mark.parametrize('dtype', ['float16', 'float64'])
def test_a_float16_or_float64_bucket_scatters_too(dtype):
    plan, packer = make_packer(dtype)
    bucket = plan.buckets[0]
    packer.recv(bucket)[:] = 0.5
    outs = [nd.zeros(m.shape, dtype=dtype) for m in bucket.members]
    packer.scatter(bucket, list(zip(bucket.members, outs)))
    for o in outs:
        np.testing.assert_array_equal(o.asnumpy(), np.full(o.shape, 0.5, dtype))


# -- which callers' members may wait -------------------------------------------------------

class Recorder:
    """Takes a store's place in MXNet's loops and records what the store would see."""

    def __init__(self):
        self.seen = []

    def pushpull(self, key, value, out=None, priority=0):
        self.seen.append((key, _keys_pushed_by(sys._getframe(1))))

    def push(self, key, value, priority=0):
        self.seen.append((key, 'push'))

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        pass


def test_gluon_trainers_loop_is_known_with_the_indices_it_pushes():
    params = gluon.ParameterDict()
    for name, req in [('a', 'write'), ('b', 'null'), ('c', 'add'), ('d', 'write')]:
        p = params.get(name, shape=(2,), grad_req=req)
        p.initialize(ctx=mx.cpu())
    trainer = gluon.Trainer(params, 'sgd', kvstore=None)
    recorder = Recorder()
    trainer._kvstore, trainer._update_on_kvstore = recorder, True
    trainer._allreduce_grads()
    assert recorder.seen == [(0, {0, 2, 3}), (2, {0, 2, 3}), (3, {0, 2, 3})]


def test_modules_loop_is_known_with_the_names_it_pushes():
    recorder = Recorder()
    params = [[nd.zeros(2)], [nd.zeros(3)], [nd.zeros(1)]]
    grads = [[nd.zeros(2)], [None], [nd.zeros(1)]]
    mx.model._update_params_on_kvstore(params, grads, recorder, ['w', 'frozen', 'b'])
    assert recorder.seen == [('w', {'w', 'b'}), ('b', {'w', 'b'})]


def test_any_other_caller_is_not_a_known_loop():
    recorder = Recorder()
    for k in range(2):
        recorder.pushpull(k, nd.zeros(1))
    assert recorder.seen == [(0, None), (1, None)]
def test_weights_mxnet_keeps_in_its_own_layout_get_their_values(copies):
    """MXNet's CPU build (MKL-DNN) reorders a convolution's weight array in place, in its own
    blocked layout, at an inference pass: a copy must go through MXNet, which knows the
    layout.  A copy through the memory (NumPy on a pointer, tried on 2026-11-26) wrote
    NCHW values into blocked memory: scrambled weights after every evaluation."""
    net = gluon.nn.Conv2D(16, 3, in_channels=16)       # channels MKL-DNN blocks by
    net.initialize(mx.init.Xavier())
    weight = net.weight.data()
    shapes = {0: weight.shape, 1: (4,)}
    plan, packer = make_packer(shapes=shapes)
    bucket = plan.buckets[0]
    recv = packer.recv(bucket)
    recv[:] = nd.arange(bucket.length)
    bias = nd.zeros(4)
    for step in range(3):                # the layout changes at the first inference pass,
        if step:                         # after the copies were planned on the row-major one
            net(nd.ones((1, 16, 5, 5))).wait_to_read()
            nd.waitall()
            assert host_copy.in_mxnet_layout(weight)
        packer.scatter(bucket, [(m, weight if m.key == 0 else bias) for m in bucket.members])
        want = recv.asnumpy()
        np.testing.assert_array_equal(weight.asnumpy().ravel(), want[:weight.size])
        np.testing.assert_array_equal(bias.asnumpy(), want[weight.size:weight.size + 4])
        recv[:] = recv * 2 + 1
    host_out = [k for (side, _), route in packer.buffers(bucket)._routes.items()
                if side == 'out' for k in route.host_keys]
    # NumPy copies out of a bucket: the one-dimensional member only
    assert host_out == ([1] if copies else [])


def conv_in_mxnet_layout():
    """A convolution's weight array after an inference pass: in MKL-DNN's blocked layout."""
    net = gluon.nn.Conv2D(16, 3, in_channels=16)
    net.initialize(mx.init.Xavier())
    net(nd.ones((1, 16, 5, 5))).wait_to_read()
    weight = net.weight.data()
    nd.waitall()
    assert host_copy.in_mxnet_layout(weight)
    return net, weight


def test_a_gradient_in_mxnet_s_layout_when_first_seen_is_copied_by_mxnet(copies):
    net, weight = conv_in_mxnet_layout()
    plan, packer = make_packer(shapes={0: weight.shape, 1: (4,)})
    bucket = plan.buckets[0]
    bias = nd.arange(4)
    for m in bucket.members:
        packer.stage(bucket, m, weight if m.key == 0 else bias, defer=True)
    parts, header = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(parts[0], weight.asnumpy())
    np.testing.assert_array_equal(parts[1], np.arange(4))
    assert host_copy.in_mxnet_layout(weight)      # still blocked: nothing reordered it
    host_in = [k for (side, _), route in packer.buffers(bucket)._routes.items()
               if side == 'in' for k in route.host_keys]
    assert host_in == ([1] if copies else [])


def test_a_gradient_that_turns_to_mxnet_s_layout_later_stops_the_job_with_a_message(copies):
    """A source checked row-major when its copy was planned and found in MKL-DNN's layout in
    the copy's operation: not copied, and the next push says why (MXNet's copies know the
    layout and go on)."""
    net = gluon.nn.Conv2D(16, 3, in_channels=16)
    net.initialize(mx.init.Xavier())
    weight = net.weight.data()
    plan, packer = make_packer(shapes={0: weight.shape, 1: (4,)})
    bucket = plan.buckets[0]
    bias = nd.zeros(4)                            # copied after the weight, in the same plan

    def push_once(step):
        bias[:] = step
        for m in bucket.members:
            packer.stage(bucket, m, weight if m.key == 0 else bias, defer=True)
        return packer.take(bucket)

    parts, _ = payload(bucket, push_once(1))      # planned with the weight row-major
    np.testing.assert_array_equal(parts[0], weight.asnumpy())
    net(nd.ones((1, 16, 5, 5))).wait_to_read()    # an inference pass reorders it in place
    send = push_once(2)
    parts, _ = payload(bucket, send)
    np.testing.assert_array_equal(parts[1], np.full(4, 2.0))   # the others are copied
    if not copies:
        np.testing.assert_array_equal(parts[0], weight.asnumpy())
        return
    assert not np.array_equal(parts[0], weight.asnumpy())      # not copied: stale
    with pytest.raises(host_copy.LayoutChanged) as err:
        push_once(3)
    assert str(err.value) == (
        "the array for key(s) 0 was in MKL-DNN's own memory layout when its host copy ran (an "
        "MXNet operator wrote it so after its copies were planned): it was not copied, so what "
        "reads the copy has a stale value; set MXNET_SSP_HOST_COPIES=0 to copy through MXNet")
    assert err.value.keys == [0]


def test_a_one_element_list_is_its_array(copies):
    """gluon.Trainer hands the store a list per parameter (one array per device)."""
    plan, packer = make_packer()
    g = grads()
    bucket = plan.buckets[0]
    for defer in (True, False):
        for m in bucket.members:
            packer.stage(bucket, m, [g[m.key]], defer=defer)
        parts, _ = payload(bucket, packer.take(bucket))
        for k in SHAPES:
            np.testing.assert_array_equal(parts[k], g[k].asnumpy())


@pytest.mark.parametrize('dtype', ['float16', 'float32', 'float64'])
def test_buffers_and_header_take_the_bucket_s_type(dtype):
    plan, packer = make_packer(dtype)
    buf = packer.buffers(plan.buckets[0])
    assert [a.dtype for a in buf.arrays] == [np.dtype(dtype)] * 2
    assert [h.dtype for h in buf.headers] == [np.dtype(dtype)] * 2
    assert all(a.context == mx.cpu() for a in buf.arrays)


def test_new_array_objects_get_their_copies_and_the_old_ones_are_left_alone(copies):
    """The copies are planned once for the arrays a caller hands over and kept while the same
    objects come back; other objects (a Parameter re-initialized, another network) get a
    plan of their own."""
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    first, second = grads(base=1.0), grads(base=100.0)
    outs_a = {k: nd.zeros(s) for k, s in SHAPES.items()}
    outs_b = {k: nd.zeros(s) for k, s in SHAPES.items()}
    kept = {}
    for step, (g, outs) in enumerate([(first, outs_a), (first, outs_a), (second, outs_b),
                                      (first, outs_a)]):
        if step == 2:
            kept = dict(packer.buffers(bucket)._routes)
        for m in bucket.members:
            packer.stage(bucket, m, g[m.key], defer=True)
        parts, _ = payload(bucket, packer.take(bucket))
        for k in SHAPES:
            np.testing.assert_array_equal(parts[k], g[k].asnumpy(), err_msg='step %d' % step)
        packer.scatter(bucket, [(m, outs[m.key]) for m in bucket.members])
        for k in SHAPES:
            np.testing.assert_array_equal(outs[k].asnumpy(), g[k].asnumpy())
        if step == 2:            # the first outputs kept the first values
            for k in SHAPES:
                np.testing.assert_array_equal(outs_a[k].asnumpy(), first[k].asnumpy())
    routes = packer.buffers(bucket)._routes
    assert sorted(routes) == [('in', 0), ('in', 1), ('out', 0), ('out', 1)]
    keys = [m.key for m in bucket.members]     # the buffers take turns: 0, 1, 0, 1
    # the same arrays again: the routes made for them at steps 0 and 1, not new ones
    assert routes[('in', 1)] is kept[('in', 1)] and routes[('out', 1)] is kept[('out', 1)]
    assert routes[('in', 0)] is not kept[('in', 0)]
    if copies:                   # the gradients of two or more dimensions are checked
        checked = [c is not None for _, _, c in routes[('in', 1)].plan.copies]
        assert checked == [len(SHAPES[k]) > 1 for k in routes[('in', 1)].host_keys]
        assert routes[('in', 1)].host_keys == keys
        assert routes[('out', 1)].host_keys == [k for k in keys if len(SHAPES[k]) == 1]
    assert routes[('in', 1)].matches(keys, [first[k] for k in keys])
    assert routes[('out', 1)].matches(keys, [outs_a[k] for k in keys])
    assert routes[('in', 0)].matches(keys, [second[k] for k in keys])
    assert routes[('out', 0)].matches(keys, [outs_b[k] for k in keys])
    assert not routes[('out', 0)].matches(keys, [outs_a[k] for k in keys])


def test_a_bucket_expects_only_the_members_a_step_pushes(copies):
    """Once the store has learnt which keys a step pushes (a frozen parameter is never
    pushed), a bucket is complete without the others, which the push carries as zeros."""
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    packer.expect([0, 2, 99])                     # 99: not in this bucket
    assert packer.needs(bucket) == {0, 2}
    g = grads()
    members = {m.key: m for m in bucket.members}
    assert packer.stage(bucket, members[0], g[0], defer=True) is False
    assert packer.stage(bucket, members[2], g[2], defer=True) is True
    parts, header = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(header, [1, 0, 1])
    np.testing.assert_array_equal(parts[1], np.zeros(SHAPES[1]))
    np.testing.assert_array_equal(parts[2], g[2].asnumpy())
    packer.stage(bucket, members[1], g[1])        # one it does not wait for, before expect
    packer.expect([0, 1, 2])
    assert packer.stage(bucket, members[0], g[0]) is False
    assert packer.stage(bucket, members[2], g[2]) is True


def test_many_float32_copies_are_one_mxnet_operation(monkeypatch):
    from mxnet_ssp.worker import packer as packer_mod
    calls = []
    real = nd.amp_multicast
    monkeypatch.setattr(packer_mod.nd, 'amp_multicast',
                        lambda *a, **kw: calls.append(len(a)) or real(*a, **kw))
    for dtype, n, batched in (('float32', 2, [2]), ('float32', 1, []), ('float64', 3, [])):
        calls.clear()
        srcs = [nd.full((2,), i + 1, dtype=dtype) for i in range(n)]
        dsts = [nd.zeros((2,), dtype=dtype) for _ in range(n)]
        packer_mod._copy_many(srcs, dsts)
        assert calls == batched, (dtype, n)
        for i, d in enumerate(dsts):
            np.testing.assert_array_equal(d.asnumpy(), np.full(2, i + 1))


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16'])
def test_the_header_is_written_again_after_a_pull_overwrote_it(copies, dtype):
    """A pull lands in the buffer pushed last, header included (the server's copy of it):
    each full push writes its header of ones again, by one host copy where the buffer takes
    them, and a push that leaves a member out writes its 0 after them."""
    plan, packer = make_packer(dtype)
    bucket = plan.buckets[0]
    full = np.ones(len(bucket.members))
    for step in range(4):
        stage_all(plan, packer, grads(dtype, base=step), defer=True)
        send = packer.take(bucket)
        parts, header = payload(bucket, send)
        np.testing.assert_array_equal(header, full)
        np.testing.assert_array_equal(parts[1], grads(dtype, base=step)[1].asnumpy())
        packer.recv(bucket)[:] = -5               # the pull of the push just taken
    buf = packer.buffers(bucket)
    made = list(buf._header_plans)
    assert [p is not None for p in made] == [buf.host, buf.host]     # one plan per buffer
    stage_all(plan, packer, grads(dtype), defer=True)
    packer.take(bucket)
    assert all(a is b for a, b in zip(buf._header_plans, made))     # kept, not made again
    for m in bucket.members[:2]:                  # the last member left out
        packer.stage(bucket, m, grads(dtype)[m.key])
    parts, header = payload(bucket, packer.take(bucket))
    np.testing.assert_array_equal(header, [1, 1, 0])
    np.testing.assert_array_equal(parts[2], np.zeros(SHAPES[2]))
    stage_all(plan, packer, grads(dtype), defer=True)
    np.testing.assert_array_equal(payload(bucket, packer.take(bucket))[1], full)


_CPU_PRIORITIZED = 3        # MXNet's FnProperty::kCPUPrioritized: its own engine threads


def engine_op(reads, body, prioritized=False):
    """Push `body` onto MXNet's engine as an operation reading `reads`; returns what must
    stay alive until it ran."""
    from mxnet.base import _LIB, check_call
    fn = host_copy._SYNC_FN(lambda _ctx, _param: body())
    prop = ctypes.c_int(_CPU_PRIORITIZED if prioritized else 0)
    const = (ctypes.c_void_p * len(reads))(*[a.handle.value for a in reads])
    check_call(_LIB.MXEnginePushSyncND(fn, None, None, ctypes.byref(host_copy._CPU), const,
                                       len(reads), None, 0, ctypes.byref(prop), 0,
                                       b'test_op'))
    return fn, prop, const


@pytest.mark.parametrize('full', [True, False])
def test_a_bucket_s_push_waits_for_its_push_before(full):
    """MXNet's dist store orders a key's pushes only through the array it pulls into, and a
    bucket's two buffers take turns: so the second buffer, once taken, waits for everything
    still reading the first (its push), or a later step's gradient could reach the servers
    first.  Here the first push is an operation held on the engine's priority threads until
    the second has had a second to run (it ran at once before the order existed), with a
    full header and with a member missing."""
    plan, packer = make_packer()
    bucket = plan.buckets[0]
    stage_all(plan, packer, grads(), defer=False)
    first = packer.take(bucket)
    order, release, second_ran = [], threading.Event(), threading.Event()

    def first_push():
        release.wait(30)
        order.append('first')

    def second_push():
        order.append('second')
        second_ran.set()

    alive = [engine_op([first], first_push, prioritized=True)]
    g = grads(base=5.0)
    for m in bucket.members[:len(bucket.members) if full else 1]:
        packer.stage(bucket, m, g[m.key])
    second = packer.take(bucket)
    alive.append(engine_op([second], second_push))
    second_ran.wait(1.0)
    release.set()
    nd.waitall()
    assert order == ['first', 'second']
    parts, header = payload(bucket, second)
    assert list(header) == ([1, 1, 1] if full else [1, 0, 0])
    np.testing.assert_array_equal(parts[bucket.members[0].key],
                                  g[bucket.members[0].key].asnumpy())
    assert len(alive) == 2
