"""A server's updater (mxnet_ssp.server.updater.ServerOptimizer) driven in one process, as MXNet's
server drives it (every key's weight flat, as KVStoreDistServer stores it): the same pushes through per-array keys and through buckets must leave the
same bits in every weight and state, in plain mode and in slot mode (lr / tau, DC-ASGD-a,
n-softsync), with pushes that leave members out, and across a save and a load."""
import numpy as np
import pytest

mx = pytest.importorskip('mxnet')

from mxnet_ssp import optim  # noqa: E402
from mxnet_ssp.ps.channel import slot_key  # noqa: E402
from mxnet_ssp.server.updater import ServerOptimizer  # noqa: E402

SHAPES = {0: (6, 5), 1: (6,), 2: (4, 6), 3: (4,)}
BUCKET = 900                               # the bucket's index on the server


def spec(members, index=BUCKET, lr_mult=1.0, wd_mult=1.0):
    ms, off = [], 0
    for k in members:
        n = int(np.prod(SHAPES[k]))
        ms.append((k, off, n, SHAPES[k]))
        off += n
    return {'index': index, 'payload': off, 'length': off + len(ms), 'members': ms,
            'lr_mult': lr_mult, 'wd_mult': wd_mult}


def flat_values(rs):
    return {k: rs.uniform(-1, 1, int(np.prod(s))).astype(np.float32) for k, s in SHAPES.items()}


def grads(seed, steps, workers=1):
    rs = np.random.RandomState(seed)
    return [[flat_values(rs)
             for _ in range(workers)] for _ in range(steps)]


def packed(sp, g, carried=None):
    """A bucket push: the members' gradients end to end, then the header."""
    parts, flags = [], []
    for k, _, n, _ in sp['members']:
        on = carried is None or k in carried
        parts.append(g[k].ravel() if on else np.zeros(n, np.float32))
        flags.append(1.0 if on else 0.0)
    return mx.nd.array(np.concatenate(parts + [np.array(flags, np.float32)]))


def unpacked(sp, value):
    v = value.asnumpy()
    return {k: v[off:off + n] for k, off, n, _ in sp['members']}


RULES = {
    'sgd-momentum': lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01,
                                             rescale_grad=0.5),
    'adam': lambda: mx.optimizer.Adam(learning_rate=0.01, wd=0.01),
    'rmsprop': lambda: mx.optimizer.RMSProp(learning_rate=0.01, wd=0.01, centered=True),
}


def plain_pair(rule):
    servers = []
    for _ in range(2):
        opt = RULES[rule]()
        opt.set_wd_mult({1: 0.0, 3: 0.0})
        servers.append(ServerOptimizer(opt, num_workers=1))
    return servers


@pytest.mark.parametrize('rule', sorted(RULES))
def test_plain_mode_bucket_gives_the_bits_of_per_array_keys(rule):
    """Step 1 per array on both servers; then one server gets buckets (members with
    wd_mult 1, members with wd_mult 0) and takes over the momentum / moments; one push
    leaves member 2 out, so its update count falls behind (Adam's bias correction reads it)."""
    rs = np.random.RandomState(3)
    w0 = flat_values(rs)
    g = grads(5, 5)
    ref, srv = plain_pair(rule)
    wr = {k: mx.nd.array(v) for k, v in w0.items()}
    wb = {k: mx.nd.array(v) for k, v in w0.items()}
    for k in SHAPES:
        ref.update_key(k, wr[k], mx.nd.array(g[0][0][k]))
        srv.update_key(k, wb[k], mx.nd.array(g[0][0][k]))
    specs = [spec([0, 2], 900, wd_mult=1.0), spec([1, 3], 901, wd_mult=0.0)]
    srv.control('buckets', specs)
    stored = {sp['index']: mx.nd.array(np.concatenate(
        [wb[k].asnumpy().ravel() for k, _, _, _ in sp['members']]
        + [np.zeros(len(sp['members']), np.float32)])) for sp in specs}
    for t in range(1, 5):
        carried = {0, 1, 3} if t == 2 else None
        for k in SHAPES:
            if carried is None or k in carried:
                ref.update_key(k, wr[k], mx.nd.array(g[t][0][k]))
        for sp in specs:
            srv.update_key(sp['index'], stored[sp['index']], packed(sp, g[t][0], carried))
    for sp in specs:
        for k, value in unpacked(sp, stored[sp['index']]).items():
            np.testing.assert_array_equal(value, wr[k].asnumpy(), err_msg='key %d' % k)
    counts = srv.optimizer._index_update_count
    assert counts[2] == 4 and counts[0] == 5 and ref.optimizer._index_update_count == \
        {k: c for k, c in counts.items() if k in SHAPES}


def test_a_saved_bucket_lists_its_members_and_loads_without_buckets(tmp_path):
    """A file saved by a server with buckets loads into a server without (the format of
    before buckets), and both go on to the same bits."""
    rs = np.random.RandomState(4)
    w0 = flat_values(rs)
    g = grads(6, 4)
    _, srv = plain_pair('sgd-momentum')
    wb = {k: mx.nd.array(v) for k, v in w0.items()}
    for k in SHAPES:
        srv.update_key(k, wb[k], mx.nd.array(g[0][0][k]))
    sp = spec([0, 2])                       # the keys with wd_mult 1; 1 and 3 keep theirs
    srv.control('buckets', [sp])
    stored = mx.nd.array(np.concatenate([wb[k].asnumpy().ravel() for k in (0, 2)]
                                        + [np.zeros(2, np.float32)]))
    srv.update_key(BUCKET, stored, packed(sp, g[1][0]))
    for k in (1, 3):
        srv.update_key(k, wb[k], mx.nd.array(g[1][0][k]))
    prefix = str(tmp_path / 'states')
    srv.control('save', prefix)
    import pickle
    with open(prefix + '.server-pid%d' % __import__('os').getpid(), 'rb') as f:
        blob = pickle.load(f)
    assert sorted(blob['plain']) == [0, 1, 2, 3] and BUCKET not in blob['index_update_count']
    assert blob['index_update_count'] == {0: 2, 1: 2, 2: 2, 3: 2}
    assert blob['plain'][0][1].shape == (30,)      # ('nd', momentum): flat, as the key's own
    fresh, _ = plain_pair('sgd-momentum')
    fresh.control('load', prefix)
    wf = {**unpacked(sp, stored), **{k: wb[k].asnumpy() for k in (1, 3)}}
    wf = {k: mx.nd.array(v) for k, v in wf.items()}
    for t in (2, 3):
        srv.update_key(BUCKET, stored, packed(sp, g[t][0]))
        for k in SHAPES:
            if k in (1, 3):
                srv.update_key(k, wb[k], mx.nd.array(g[t][0][k]))
            fresh.update_key(k, wf[k], mx.nd.array(g[t][0][k]))
    for k, value in {**unpacked(sp, stored), **{k: wb[k].asnumpy() for k in (1, 3)}}.items():
        np.testing.assert_array_equal(value, wf[k].asnumpy(), err_msg=str(k))


SLOT_RULES = {
    'sasgd': lambda: optim.StalenessAwareSGD(learning_rate=0.1, momentum=0.9, wd=0.01),
    'dcasgd-a-multiverso': lambda: optim.DCASGD(learning_rate=0.1, lamda=0.5, adaptive=True,
                                                momentum=0.9, adaptive_reading='multiverso'),
    'softsync-sgd': lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01),
}


@pytest.mark.parametrize('rule', sorted(SLOT_RULES))
def test_slot_mode_bucket_gives_the_bits_of_per_array_slots(rule):
    """Two workers in slot mode, taking turns, the second pushing its first step late (so
    staleness is not all zero); from step 2 on one server gets a bucket of all four keys and
    takes over canonical weights, states, clocks and each worker's slot.  (A bucket has one
    clock: a push that leaves members out would give them the bucket's staleness, not
    theirs; docs/stores.md says so, and gluon.Trainer and Module push every key each step.)"""
    M = 2
    softsync = 2 if rule == 'softsync-sgd' else 1
    rs = np.random.RandomState(8)
    w0 = flat_values(rs)
    g = grads(9, 4, workers=M)
    pair = [ServerOptimizer(SLOT_RULES[rule](), num_workers=M, slots=True, softsync_c=softsync)
            for _ in range(2)]
    ref, srv = pair
    slots = [{(k, m): mx.nd.array(w0[k]) for k in SHAPES for m in range(M)} for _ in pair]
    order = [(0, 0), (1, 0), (0, 1), (1, 1)]              # (worker, step) after step 1
    for server, slot in zip(pair, slots):
        for m in (0, 1):
            for k in SHAPES:
                server.update_key(slot_key(k, m, M, 1), slot[(k, m)], mx.nd.array(g[0][m][k]))
    sp = spec([0, 1, 2, 3], index=BUCKET)
    srv.control('buckets', [sp])
    # MXNet initializes the bucket's slots with rank 0's values; the server fixes them
    init = np.concatenate([slots[1][(k, 0)].asnumpy().ravel() for k in SHAPES]
                          + [np.zeros(4, np.float32)])
    bucket_slot = {m: mx.nd.array(init) for m in range(M)}
    for t, (m, step) in enumerate(order, start=1):
        carried = None
        for k in SHAPES:
            if carried is None or k in carried:
                ref.update_key(slot_key(k, m, M, 1), slots[0][(k, m)],
                            mx.nd.array(g[step + 1][m][k]))
        srv.update_key(slot_key(BUCKET, m, M, 1), bucket_slot[m],
                    packed(sp, g[step + 1][m], carried))
        # what worker m pulls next: its slot
        for k, value in unpacked(sp, bucket_slot[m]).items():
            if carried is None or k in carried:
                np.testing.assert_array_equal(value, slots[0][(k, m)].asnumpy(),
                                              err_msg='push %d, key %d' % (t, k))
    canonical = srv._keys[BUCKET].weight
    for k, value in unpacked(sp, canonical).items():
        np.testing.assert_array_equal(value, ref._keys[k].weight.asnumpy(), err_msg=str(k))
    assert set(srv._keys) == {BUCKET}                       # the members' keys were taken over
    assert sum(srv.staleness_histogram().values()) == sum(ref.staleness_histogram().values())
