"""Update rules of mxnet_ssp.optim against the NumPy reference (single process, fast)."""
import pickle
import re

import numpy as np
import pytest

from conftest import ROOT, need_module  # noqa: E402

mx = need_module('mxnet')
from mxnet_ssp import optim  # noqa: E402
from mxnet_ssp.optim import DCASGD, StalenessAwareSGD, StalenessRequiredError  # noqa: E402
from oracle_optim import (DCASGDRule, Received, Reference, SASGDRule,  # noqa: E402
                                 rule_from_optimizer)

RTOL, ATOL = 2e-6, 1e-7          # float32 rules vs float32 reference, same order of operations


class MXServer:
    """What the servers of an mxnet-ssp store do with a WorkerAwareOptimizer, in one process.

    Per key: the canonical weight, its version, the optimizer state, each worker's pulled
    version and backup; `c` prepared gradients are averaged into one update (n-softsync).
    `grad_staleness`: pass each gradient's tau to prepare_grad (see StalenessAwareSGD).
    """

    def __init__(self, opt, num_workers, c=1, grad_staleness=True, one_call=False):
        self.opt, self.num_workers, self.c = opt, num_workers, c
        self.grad_staleness = grad_staleness
        self.one_call = one_call          # ASP through opt.apply_one, as the servers do
        self.w, self.state, self.version, self.pulled, self.backup = {}, {}, {}, {}, {}
        self.acc = {}
        self.taus = []

    def init(self, key, weight):
        w = mx.nd.array(weight, dtype='float32')
        self.w[key] = w
        self.state[key] = self.opt.create_state(key, w)
        self.version[key] = 0
        self.pulled[key] = [0] * self.num_workers
        self.backup[key] = [w.copy() for _ in range(self.num_workers)]
        self.acc[key] = []

    def pull(self, m, key):
        self.pulled[key][m] = self.version[key]
        self.backup[key][m] = self.w[key].copy()
        return self.w[key].asnumpy()

    def push(self, m, key, grad):
        tau = self.version[key] - self.pulled[key][m]
        self.taus.append(Received(key, m, tau))
        g = mx.nd.array(grad, dtype='float32')
        kwargs = {'staleness': tau} if self.grad_staleness else {}
        if getattr(self.opt, 'uses_sender', False):
            kwargs['sender'] = m
        backup = self.backup[key][m] if self.opt.needs_backup else None
        if self.one_call and self.c == 1:
            self.opt.apply_one(key, self.w[key], g, self.state[key], backup, float(tau), m)
            g[:] = 1e6
            self.version[key] += 1
            return tau
        prepared = self.opt.prepare_grad(key, self.w[key], g, self.state[key], backup, **kwargs)
        g[:] = 1e6                    # MXNet reuses its receive buffer: nothing may refer to it
        self.acc[key].append((prepared, tau))
        if len(self.acc[key]) == self.c:
            grads, taus = zip(*self.acc[key])
            self.acc[key] = []
            total = grads[0].copy()
            for x in grads[1:]:
                total += x
            total /= self.c
            self.opt.apply(key, self.w[key], total, self.state[key], float(np.mean(taus)))
            self.version[key] += 1
        return tau

    def play(self, script):
        for event in script:
            if event[0] == 'push':
                self.push(*event[1:])
            elif event[0] == 'pull':
                self.pull(*event[1:])
            else:
                self.opt.set_learning_rate(event[1])
            yield event, {k: v.asnumpy() for k, v in self.w.items()}


SHAPES = {0: (7,), 3: (2, 3)}


def random_script(seed, num_workers=3, events=80, shapes=SHAPES, lr_change_at=None):
    """A random interleaving: each worker alternates pulling and pushing keys at random.

    Gradients are random (they need not depend on the weights for an equivalence test);
    their scale differs per worker so mixing them up would show.
    """
    rng = np.random.RandomState(seed)
    keys = sorted(shapes)
    script = []
    for i in range(events):
        if lr_change_at is not None and i == lr_change_at:
            script.append(('lr', 0.03))
        m = int(rng.randint(num_workers))
        key = keys[int(rng.randint(len(keys)))]
        if rng.rand() < 0.35:
            script.append(('pull', m, key))
        else:
            g = (rng.randn(*shapes[key]) * (1 + m)).astype(np.float32)
            script.append(('push', m, key, g))
    return script


def initial(shapes=SHAPES, seed=100):
    rng = np.random.RandomState(seed)
    return {k: rng.randn(*s).astype(np.float32) for k, s in shapes.items()}


def compare(opt, rule, script, num_workers=3, c=1, grad_staleness=True, shapes=SHAPES,
            one_call=False):
    """Drive the optimizer and the reference with `script`; weights must agree after every event."""
    init = initial(shapes)
    ref = Reference(rule, num_workers, softsync_c=c)
    srv = MXServer(opt, num_workers, c=c, grad_staleness=grad_staleness, one_call=one_call)
    for key in sorted(init):
        ref.init(key, init[key])
        srv.init(key, init[key])
    for event, weights in srv.play(script):
        ref.play([event])
        for key, w in ref.weights.items():
            np.testing.assert_allclose(weights[key], w, rtol=RTOL, atol=ATOL,
                                       err_msg='after %r' % (event[:3],))
    assert srv.taus == ref.log
    moved = [np.abs(ref.weights[k] - init[k]).max() for k in init]
    assert min(moved) > 1e-2                      # the script really updated every key
    return ref, srv


COMMON = dict(wd=1e-3, rescale_grad=0.5)

SASGD_CASES = [
    dict(staleness_lr=p, momentum=mom, **extra)
    for p in ('inverse', 'average', 'none')
    for mom in (0.0, 0.9)
    for extra in ({}, {'clip_gradient': 0.8})
] + [dict(staleness_lr='average', staleness_window=4, momentum=mom) for mom in (0.0, 0.9)]

DCASGD_CASES = [
    dict(adaptive=a, momentum=mom, lamda=lam, **extra)
    for a, lam in ((False, 0.5), (True, 2.0))
    for mom in (0.0, 0.9)
    for extra in ({}, {'clip_gradient': 0.8})
] + [dict(adaptive=True, lamda=0.3, mean_square_decay=0.0, momentum=0.5)]


def ident(case):
    return ','.join('%s=%s' % kv for kv in sorted(case.items()))


@pytest.mark.parametrize('c', [1, 3])
@pytest.mark.parametrize('case', SASGD_CASES, ids=ident)
def test_sasgd_matches_reference(case, c):
    opt = StalenessAwareSGD(0.05, **case, **COMMON)
    rule = SASGDRule(0.05, **case, **COMMON)
    ref, _ = compare(opt, rule, random_script(1 + c), c=c)
    assert max(r.tau for r in ref.log) >= 3       # the script has real staleness


@pytest.mark.parametrize('c', [1, 3])
@pytest.mark.parametrize('case', DCASGD_CASES, ids=ident)
def test_dcasgd_matches_reference(case, c):
    opt = DCASGD(0.05, **case, **COMMON)
    rule = DCASGDRule(0.05, **case, **COMMON)
    compare(opt, rule, random_script(7 + c), c=c)


@pytest.mark.parametrize('momentum', [0.0, 0.9])
def test_inverse_without_per_gradient_staleness_divides_by_the_mean(momentum):
    """Servers that do not pass tau to prepare_grad get alpha0 / max(1, mean tau)."""
    opt = StalenessAwareSGD(0.05, momentum=momentum, **COMMON)
    rule = SASGDRule(0.05, momentum=momentum, per_gradient_staleness=False, **COMMON)
    compare(opt, rule, random_script(4), c=3, grad_staleness=False)
    # ... which is not Eq. 2 of Zhang et al. when the taus of a batch differ
    exact = SASGDRule(0.05, momentum=momentum, **COMMON)
    a = Reference.run(rule, 3, initial(), random_script(4), softsync_c=3).weights
    b = Reference.run(exact, 3, initial(), random_script(4), softsync_c=3).weights
    assert not np.allclose(a[0], b[0], rtol=1e-4)


def test_rule_from_optimizer_and_lr_changes():
    """lr_mult / wd_mult per key, and set_learning_rate in the middle of the script."""
    for opt in (StalenessAwareSGD(0.05, momentum=0.9, **COMMON),
                DCASGD(0.05, lamda=1.0, adaptive=True, momentum=0.9, **COMMON)):
        opt.set_lr_mult({3: 0.5})
        opt.set_wd_mult({0: 0.0})
        rule = rule_from_optimizer(opt)
        assert rule.lr_mult == {3: 0.5} and rule.wd_mult == {0: 0.0}
        compare(opt, rule, random_script(5, lr_change_at=40))


def test_update_count_and_scheduler():
    sched = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=0.1)
    opt = StalenessAwareSGD(staleness_lr='none', lr_scheduler=sched)
    srv = MXServer(opt, 1)
    srv.init(0, np.zeros(2, np.float32))
    steps = []
    for _ in range(5):
        before = srv.w[0].asnumpy().copy()
        srv.push(0, 0, np.ones(2, np.float32))
        steps.append(float(before[0] - srv.w[0].asnumpy()[0]))
    assert opt.num_update == 5
    # FactorScheduler halves the rate once num_update exceeds 2, 4, ...
    np.testing.assert_allclose(steps, [0.1, 0.1, 0.05, 0.05, 0.025], rtol=1e-6)


# -- the formulas, by hand -----------------------------------------------------------------

def nd(x):
    return mx.nd.array(np.asarray(x, dtype=np.float32))


@pytest.mark.parametrize('tau, factor', [(0, 1.0), (1, 1.0), (3, 1 / 3.0), (2.5, 0.4),
                                         (0.5, 1.0)])
def test_inverse_learning_rate(tau, factor):
    opt = StalenessAwareSGD(0.3)
    w, g = nd([1.0, -2.0]), nd([0.5, 1.0])
    state = opt.create_state(0, w)
    opt.apply(0, w, opt.prepare_grad(0, w, g, state, None), state, tau)
    np.testing.assert_allclose(w.asnumpy(), [1.0 - 0.3 * factor * 0.5, -2.0 - 0.3 * factor],
                               rtol=1e-6)


def test_inverse_per_gradient_scaling_is_eq2():
    """c = 2 gradients with tau 1 and 4: update = alpha0 * (g1/1 + g2/4) / 2."""
    opt = StalenessAwareSGD(0.2)
    w = nd([0.0, 0.0])
    state = opt.create_state(0, w)
    g1 = opt.prepare_grad(0, w, nd([1.0, 2.0]), state, None, staleness=1)
    g2 = opt.prepare_grad(0, w, nd([4.0, 8.0]), state, None, staleness=4)
    opt.apply(0, w, (g1 + g2) / 2, state, 2.5)
    np.testing.assert_allclose(w.asnumpy(), [-0.2 * (1 + 1) / 2, -0.2 * (2 + 2) / 2], rtol=1e-6)


def test_average_window():
    opt = StalenessAwareSGD(1.0, staleness_lr='average', staleness_window=2)
    w = nd([0.0])
    state = opt.create_state(0, w)
    steps = []
    for tau in (4.0, 2.0, 8.0, 0.0):
        before = w.asnumpy()[0]
        opt.apply(0, w, opt.prepare_grad(0, w, nd([1.0]), state, None), state, tau)
        steps.append(before - w.asnumpy()[0])
    # <sigma> over the last two updates: 4, 3, 5, 4
    np.testing.assert_allclose(steps, [1 / 4.0, 1 / 3.0, 1 / 5.0, 1 / 4.0], rtol=1e-6)


def test_order_rescale_clip_wd():
    """prepared = clip(rescale * grad) + wd * weight (MXNet's SGD order)."""
    opt = StalenessAwareSGD(1.0, rescale_grad=2.0, clip_gradient=1.5, wd=0.1)
    w, g = nd([1.0, 10.0, -3.0]), nd([0.5, 3.0, -3.0])
    p = opt.prepare_grad(0, w, g, opt.create_state(0, w), None)
    np.testing.assert_allclose(p.asnumpy(), [1.0 + 0.1, 1.5 + 1.0, -1.5 - 0.3], rtol=1e-6)
    np.testing.assert_array_equal(g.asnumpy(), [0.5, 3.0, -3.0])       # not modified


def test_prepare_grad_returns_a_new_array():
    for opt in (StalenessAwareSGD(0.1), DCASGD(0.1, lamda=0.0)):
        w, g = nd([1.0, 2.0]), nd([3.0, 4.0])
        p = opt.prepare_grad(0, w, g, opt.create_state(0, w), w.copy())
        assert p is not g
        g[:] = 0
        np.testing.assert_array_equal(p.asnumpy(), [3.0, 4.0])


def test_dcasgd_c_by_hand():
    lam, lr, wd = 0.5, 0.1, 0.01
    w0, wb, g = np.array([1.0, 2.0, -1.0]), np.array([0.5, 2.5, -1.0]), np.array([2.0, -1.0, 3.0])
    opt = DCASGD(lr, lamda=lam, wd=wd)
    w = nd(w0)
    state = opt.create_state(0, w)
    opt.apply(0, w, opt.prepare_grad(0, w, nd(g), state, nd(wb)), state, 7.0)
    expected = w0 - lr * (g + lam * g * g * (w0 - wb) + wd * w0)
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-6)


def test_dcasgd_a_by_hand():
    """lambda_t = lambda0 / (sqrt(MeanSquare(t)) + eps), MeanSquare(0) = 0, eps outside the sqrt."""
    lam0, m, eps, lr = 2.0, 0.95, 1e-7, 0.1
    w0, wb = np.array([1.0, 2.0, 0.0]), np.array([0.0, 2.5, 1.0])
    g1, g2 = np.array([2.0, -1.0, 0.0]), np.array([1.0, 1.0, 0.5])
    opt = DCASGD(lr, lamda=lam0, adaptive=True)
    w = nd(w0)
    state = opt.create_state(0, w)
    ms = np.zeros(3)
    expected = w0.copy()
    for g in (g1, g2):
        ms = m * ms + (1 - m) * g * g
        lam_t = lam0 / (np.sqrt(ms) + eps)
        expected = expected - lr * (g + lam_t * g * g * (expected - wb))
        p = opt.prepare_grad(0, w, nd(g), state, nd(wb))
        opt.apply(0, w, p, state, 1.0)
    np.testing.assert_allclose(state[1].asnumpy(), ms, rtol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-5)


def test_any_shape():
    for opt in (StalenessAwareSGD(0.1, momentum=0.9), DCASGD(0.1, adaptive=True, momentum=0.9)):
        w = mx.nd.ones((2, 3, 4))
        state = opt.create_state(1, w)
        p = opt.prepare_grad(1, w, mx.nd.ones((2, 3, 4)), state, mx.nd.zeros((2, 3, 4)))
        opt.apply(1, w, p, state, 2.0)
        assert w.shape == (2, 3, 4) and np.all(w.asnumpy() < 1)


# -- n-softsync and staleness semantics of the reference -------------------------------------

def test_softsync_batching_in_the_reference():
    """lambda = 4 workers, n = 2 -> c = 2: one update per two gradients."""
    rule = SASGDRule(1.0, staleness_lr='average')
    ref = Reference(rule, num_workers=4, softsync_c=2)
    ref.init('w', np.zeros(1))
    one = np.ones(1)
    assert [ref.pull(m, 'w')[0] for m in range(4)] == [0.0] * 4
    assert ref.push(0, 'w', one) == 0 and ref.pending('w') == 1 and ref.version('w') == 0
    assert ref.pull(0, 'w')[0] == 0.0                 # nothing applied yet
    assert ref.push(1, 'w', one) == 0                 # second gradient: update 1, tau 0
    assert ref.version('w') == 1 and ref.weights['w'][0] == pytest.approx(-1.0)
    assert ref.push(2, 'w', 3 * one) == 1             # pulled version 0, now 1
    assert ref.push(0, 'w', 3 * one) == 1             # worker 0 pulled before update 1
    # mean tau 1 -> alpha0 / 1; mean gradient 3
    assert ref.weights['w'][0] == pytest.approx(-4.0)
    ref.pull(1, 'w')                                  # version 2
    assert ref.push(3, 'w', 4 * one) == 2 and ref.push(1, 'w', 4 * one) == 0
    # <sigma> = (2 + 0) / 2 = 1; Eq. 2 would have used 4/2 and 4/1 instead
    assert ref.weights['w'][0] == pytest.approx(-8.0)
    assert [u.taus for u in ref.updates] == [(0, 0), (1, 1), (2, 0)]
    assert [u.senders for u in ref.updates] == [(0, 1), (2, 0), (3, 1)]


def test_softsync_inverse_is_eq2():
    """c = 2: each gradient gets its own alpha0 / max(1, tau) (Zhang et al. Eq. 2)."""
    one = np.ones(1)
    script = [('push', 0, 'w', one), ('push', 1, 'w', one),            # taus 0, 0 -> v1
              ('push', 0, 'w', one), ('push', 1, 'w', one),            # taus 1, 1 -> v2
              ('pull', 1, 'w'),
              ('push', 0, 'w', 6 * one), ('push', 1, 'w', 6 * one)]    # taus 2, 0 -> v3
    ref = Reference.run(SASGDRule(1.0, staleness_lr='inverse'), 2, {'w': np.zeros(1)}, script,
                        softsync_c=2)
    assert [r.tau for r in ref.log] == [0, 0, 1, 1, 2, 0]
    assert ref.weights['w'][0] == pytest.approx(-1.0 - 1.0 - (6 / 2 + 6 / 1) / 2)
    avg = Reference.run(SASGDRule(1.0, staleness_lr='average'), 2, {'w': np.zeros(1)}, script,
                        softsync_c=2)
    assert avg.weights['w'][0] == pytest.approx(-1.0 - 1.0 - 6 / 1)     # <sigma> = 1
    assert [u.mean_tau for u in avg.updates] == [0.0, 1.0, 1.0]
    # and the optimizer, given each gradient's tau, does the same
    srv = MXServer(StalenessAwareSGD(1.0), 2, c=2)
    srv.init('w', np.zeros(1))
    list(srv.play(script))
    assert srv.w['w'].asnumpy()[0] == pytest.approx(ref.weights['w'][0])


def test_reference_history_and_errors():
    ref = Reference(DCASGDRule(0.1, lamda=1.0), 2)
    ref.init(0, np.ones(2))
    ref.pull(1, 0)
    ref.push(1, 0, np.ones(2))
    assert [e for e, _ in ref.history] == [('init', 0), ('pull', 1, 0), ('push', 1, 0)]
    np.testing.assert_allclose(ref.history[-1][1][0], [0.9, 0.9])
    with pytest.raises(ValueError, match='worker 2'):
        ref.pull(2, 0)
    with pytest.raises(KeyError, match='not initialized'):
        ref.push(0, 1, np.ones(2))
    with pytest.raises(ValueError, match='shape'):
        ref.push(0, 0, np.ones(3))
    with pytest.raises(ValueError, match='unknown event'):
        ref.play([('pop', 0, 0)])


# -- MXNet's own DCASGD --------------------------------------------------------------------

def test_mxnet_dcasgd_uses_the_previous_weight_of_the_key_not_the_senders_backup():
    """Worker 1 pushes twice on fresh weights (tau 0), then worker 0 a gradient of w0 (tau 2).

    Paper (Algorithm 2): compensation with w - w_bak(m): zero for worker 1's fresh gradients,
    w2 - w0 for worker 0.  MXNet keeps one previous weight per key (the weight before the
    last update), so it compensates worker 1's fresh gradient with w1 - w0 and worker 0's with
    w2 - w1: it assumes every gradient is exactly one update old.
    """
    lam, lr = 1.0, 0.5
    w0 = np.array([1.0, -1.0, 0.5], np.float32)
    ga, gb, gc = (np.array(v, np.float32) for v in ([1.0, 2.0, -1.0], [0.5, -1.0, 2.0],
                                                    [2.0, 1.0, 1.0]))
    script = [('pull', 0, 0), ('pull', 1, 0),
              ('push', 1, 0, ga), ('pull', 1, 0), ('push', 1, 0, gb),
              ('push', 0, 0, gc)]
    ours = DCASGD(lr, lamda=lam)
    srv = MXServer(ours, 2)
    srv.init(0, w0)
    list(srv.play(script))
    ref = Reference.run(DCASGDRule(lr, lamda=lam), 2, {0: w0}, script)
    assert [r.tau for r in ref.log] == [0, 0, 2]
    np.testing.assert_allclose(srv.w[0].asnumpy(), ref.weights[0], rtol=RTOL)
    # by hand, the paper
    w1 = w0 - lr * ga
    w2 = w1 - lr * gb
    w3 = w2 - lr * (gc + lam * gc * gc * (w2 - w0))
    np.testing.assert_allclose(ref.weights[0], w3, rtol=1e-6)

    theirs = mx.optimizer.create('dcasgd', learning_rate=lr, lamda=lam)
    assert type(theirs) is mx.optimizer.DCASGD
    w = nd(w0)
    state = theirs.create_state(0, w)
    for g in (ga, gb, gc):
        theirs.update(0, w, nd(g), state)
    m1 = w0 - lr * ga
    m2 = m1 - lr * (gb + lam * gb * gb * (m1 - w0))
    m3 = m2 - lr * (gc + lam * gc * gc * (m2 - m1))
    np.testing.assert_allclose(w.asnumpy(), m3, rtol=1e-6)
    assert np.abs(w.asnumpy() - w3).max() > 0.1


def test_mxnet_dcasgd_with_momentum_fails_ours_works():
    """apache/mxnet#11965: `if mom:` on the momentum NDArray.  In 1.9.1 a weight of more than
    one element raises ValueError at the first update; a one-element weight has a zero
    momentum at first, so `if mom:` is False and `assert self.momentum == 0.0` fails."""
    theirs = mx.optimizer.create('dcasgd', learning_rate=0.1, momentum=0.9)
    w = mx.nd.ones(4)
    with pytest.raises(ValueError, match='truth value of an NDArray'):
        theirs.update(0, w, mx.nd.ones(4), theirs.create_state(0, w))
    w1 = mx.nd.ones(1)
    with pytest.raises(AssertionError):
        theirs.update(0, w1, mx.nd.ones(1), theirs.create_state(0, w1))

    for adaptive in (False, True):
        ours = DCASGD(0.1, momentum=0.9, adaptive=adaptive)
        compare(ours, DCASGDRule(0.1, momentum=0.9, adaptive=adaptive), random_script(11),
                c=1)


# -- DC-ASGD: the servers' one-call path, and the two readings of DC-ASGD-a -----------------

READINGS = ('paper', 'multiverso')
DCASGD_ONE_CALL_CASES = [dict(case, adaptive_reading=r) for case in DCASGD_CASES
                         for r in (READINGS if case['adaptive'] else ('paper',))] + [
    dict(adaptive=False, lamda=0.0, momentum=0.9),                    # nothing to compensate
    dict(adaptive=True, lamda=1.5, momentum=0.9, rescale_grad=0.3, clip_gradient=0.9),
    dict(adaptive=True, lamda=1.5, rescale_grad=0.3, adaptive_reading='multiverso'),
]


def kernels_only(opt):
    opt.host_kernels = False
    return opt


@pytest.mark.parametrize('case', DCASGD_ONE_CALL_CASES, ids=ident)
def test_dcasgd_apply_one_is_prepare_grad_then_apply(case):
    """ASP on the servers goes through apply_one (work buffers, no new array): the same
    operations as prepare_grad + apply, so the same bits, and the reference's weights.
    On CPU both take the NumPy passes (mxnet_ssp.host_kernels); the MXNet kernels, which
    other devices take, must give the same bits too."""
    case = dict(COMMON, **case)
    script = random_script(21)
    _, one = compare(DCASGD(0.05, **case), DCASGDRule(0.05, **case), script, one_call=True)
    _, two = compare(kernels_only(DCASGD(0.05, **case)), DCASGDRule(0.05, **case), script)
    for key in SHAPES:
        np.testing.assert_array_equal(one.w[key].asnumpy(), two.w[key].asnumpy())


@pytest.mark.parametrize('c', [1, 3])
@pytest.mark.parametrize('case', [c for c in DCASGD_CASES if c['adaptive']], ids=ident)
def test_dcasgd_multiverso_reading_matches_reference(case, c):
    opt = DCASGD(0.05, adaptive_reading='multiverso', **case, **COMMON)
    rule = DCASGDRule(0.05, adaptive_reading='multiverso', **case, **COMMON)
    _, srv = compare(opt, rule, random_script(7 + c), c=c)
    for key in SHAPES:                      # one MeanSquare per worker that pushed the key
        assert sorted(srv.state[key][1]) == sorted({e[1] for e in random_script(7 + c)
                                                    if e[0] == 'push' and e[2] == key})


def dcasgd_a_by_hand(reading, turns, lam0=2.0, m=0.9, eps=1e-3, lr=0.1, w0=(1.0, -2.0, 0.5)):
    """DC-ASGD-a in float64, from the formulas: the workers push in `turns` ([(m, g)]), each
    pulling right after its push (its backup is then the weight after its update)."""
    w = np.array(w0)
    backup, ms = {}, {}
    for sender, g in turns:
        g = np.asarray(g, dtype=np.float64)
        owner = sender if reading == 'multiverso' else 'key'
        ms[owner] = m * ms.get(owner, 0.0) + (1 - m) * g * g
        if reading == 'multiverso':
            lam_t = lam0 / np.sqrt(ms[owner] + eps)
        else:
            lam_t = lam0 / (np.sqrt(ms[owner]) + eps)
        w = w - lr * (g + lam_t * g * g * (w - backup.get(sender, np.array(w0))))
        backup[sender] = w.copy()
    return w, ms


TURNS = [(0, [0.5, -1.0, 2.0]), (1, [1.5, 0.2, -0.3]), (2, [-0.4, 0.8, 0.1]),
         (0, [0.3, -0.6, 1.0]), (1, [2.0, 0.1, 0.4]), (2, [-1.2, 0.9, 0.2]),
         (0, [0.1, 0.3, -0.5])]


@pytest.mark.parametrize('reading', READINGS)
@pytest.mark.parametrize('one_call', [False, True], ids=['two-step', 'one-call'])
def test_dcasgd_a_readings_by_hand_three_workers_in_turns(reading, one_call):
    """Three workers push in turns, each pulling after its push: the optimizer (both server
    paths) and the reference against the formulas of each reading, computed in float64."""
    kwargs = dict(lamda=2.0, adaptive=True, mean_square_decay=0.9, epsilon=1e-3,
                  adaptive_reading=reading)
    w0 = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    script = []
    for sender, g in TURNS:
        script += [('push', sender, 0, np.array(g, dtype=np.float32)), ('pull', sender, 0)]
    expected, ms = dcasgd_a_by_hand(reading, TURNS)
    ref = Reference.run(DCASGDRule(0.1, **kwargs), 3, {0: w0}, script)
    srv = MXServer(DCASGD(0.1, **kwargs), 3, one_call=one_call)
    srv.init(0, w0)
    list(srv.play(script))
    np.testing.assert_allclose(ref.weights[0], expected, rtol=1e-5)
    np.testing.assert_allclose(srv.w[0].asnumpy(), expected, rtol=1e-5)
    state = srv.state[0][1]
    if reading == 'multiverso':
        assert sorted(state) == [0, 1, 2]
        for sender in range(3):
            np.testing.assert_allclose(state[sender].asnumpy(), ms[sender], rtol=1e-6)
    else:
        np.testing.assert_allclose(state.asnumpy(), ms['key'], rtol=1e-6)


def test_dcasgd_a_readings_differ():
    """The same pushes give other weights under the other reading; with one worker and a
    tiny epsilon (MeanSquare is then the same, and epsilon hardly matters) they agree."""
    weights = {r: dcasgd_a_by_hand(r, TURNS)[0] for r in READINGS}
    assert np.abs(weights['paper'] - weights['multiverso']).max() > 1e-2
    script = []
    for sender, g in TURNS:
        script += [('push', sender, 0, np.array(g, dtype=np.float32)), ('pull', sender, 0)]
    w0 = {0: np.array([1.0, -2.0, 0.5], dtype=np.float32)}
    runs = {}
    for reading in READINGS:
        rule = DCASGDRule(0.1, lamda=2.0, adaptive=True, mean_square_decay=0.9, epsilon=1e-3,
                          adaptive_reading=reading)
        runs[reading] = Reference.run(rule, 3, w0, script).weights[0]
        np.testing.assert_allclose(runs[reading], weights[reading], rtol=1e-5)
    one_worker = [(0, g) for _, g in TURNS]
    alone = {r: dcasgd_a_by_hand(r, one_worker, eps=1e-12)[0] for r in READINGS}
    np.testing.assert_allclose(alone['paper'], alone['multiverso'], rtol=1e-6)
    assert np.abs(alone['paper'] - np.array([1.0, -2.0, 0.5])).max() > 0.1


@pytest.mark.parametrize('value', ['Paper', 'mv', None, 1, ('paper',)])
def test_dcasgd_bad_adaptive_reading(value):
    pattern = (r"adaptive_reading=%s is not accepted: it must be 'paper' \(.*\) or "
               r"'multiverso' \(.*\)" % re.escape(repr(value)))
    with pytest.raises(ValueError, match=pattern):
        DCASGD(0.1, adaptive=True, adaptive_reading=value)


def test_dcasgd_multiverso_needs_the_sender():
    opt = DCASGD(0.1, adaptive=True, adaptive_reading='multiverso')
    assert opt.uses_sender and not DCASGD(0.1, adaptive=True).uses_sender
    assert not DCASGD(0.1, adaptive_reading='multiverso').uses_sender     # -c: no MeanSquare
    w = mx.nd.ones(2)
    state = opt.create_state(0, w)
    with pytest.raises(ValueError, match=r"adaptive_reading='multiverso'.*sender"):
        opt.prepare_grad(0, w, mx.nd.ones(2), state, w.copy())
    with pytest.raises(ValueError, match=r"adaptive_reading='multiverso'.*sender"):
        opt.apply_one(0, w, mx.nd.ones(2), state, w.copy(), 0.0)
    assert state[1] == {}


def test_dcasgd_multiverso_travels_like_the_other_arguments():
    """set_optimizer's pickling keeps the reading; the per-worker MeanSquare state pickles
    midway (server state save/restore) and the run continues as if uninterrupted."""
    from mxnet_ssp.server.state import _from_numpy, _to_numpy
    make = lambda: DCASGD(0.05, lamda=0.7, adaptive=True, mean_square_decay=0.9,  # noqa: E731
                          momentum=0.5, adaptive_reading='multiverso', **COMMON)
    back = mxnet_pickle_round_trip(make())
    assert back.adaptive_reading == 'multiverso' and back.uses_sender
    compare(back, rule_from_optimizer(back), random_script(3), c=2)
    script = random_script(9, events=120)
    init = initial()
    full, part = MXServer(make(), 3), MXServer(make(), 3)
    for srv in (full, part):
        for key in sorted(init):
            srv.init(key, init[key])
    list(full.play(script))
    list(part.play(script[:61]))
    assert all(len(part.state[key][1]) >= 2 for key in init)
    part.opt = pickle.loads(pickle.dumps(part.opt))
    part.state = {k: _from_numpy(_to_numpy(st)) for k, st in part.state.items()}
    list(part.play(script[61:]))
    for key in init:
        np.testing.assert_array_equal(part.w[key].asnumpy(), full.w[key].asnumpy())


@pytest.mark.parametrize('c', [1, 2])
@pytest.mark.parametrize('reading', READINGS)
def test_server_slot_mode_runs_dcasgd_a_as_the_reference(reading, c):
    """mxnet-ssp's server updater in slot mode, called as MXNet's server calls it: one-call
    path in ASP, prepare_grad with the sender in n-softsync; every weight as the reference."""
    from mxnet_ssp.ps.channel import slot_key
    from mxnet_ssp.server.updater import ServerOptimizer
    kwargs = dict(lamda=1.0, adaptive=True, momentum=0.5, adaptive_reading=reading, **COMMON)
    server = ServerOptimizer(DCASGD(0.05, **kwargs), num_workers=3, slots=True, softsync_c=c)
    assert (server._apply_one is not None) and server.worker_aware
    init = initial()
    slots = {(k, m): mx.nd.array(init[k]) for k in init for m in range(3)}
    ref = Reference(DCASGDRule(0.05, **kwargs), 3, softsync_c=c)
    for k in sorted(init):
        ref.init(k, init[k])
    for event in random_script(5, events=60):
        if event[0] != 'push':
            continue
        _, m, k, g = event
        received = mx.nd.array(g)
        server.update_key(slot_key(k, m, 3, 1), slots[(k, m)], received)
        ref.push(m, k, g)
        expected = ref.pull(m, k)             # the server left the sender's pull in its slot
        np.testing.assert_allclose(slots[(k, m)].asnumpy(), expected, rtol=RTOL, atol=ATOL)
    assert [r.sender for r in ref.log] == [e[1] for e in random_script(5, events=60)
                                           if e[0] == 'push']
    for k in init:
        np.testing.assert_allclose(server._keys[k].weight.asnumpy(), ref.weights[k],
                                   rtol=RTOL, atol=ATOL)


def test_one_call_update_respects_wrappers_and_overrides():
    from mxnet_ssp.optim import one_call_update
    sasgd, dc = StalenessAwareSGD(0.1), DCASGD(0.1)
    assert one_call_update(sasgd) == sasgd.apply_one           # the generic one calls the two
    assert one_call_update(dc) == dc.apply_one
    dc.prepare_grad = lambda *a, **k: None                      # a wrapper on the instance
    assert one_call_update(dc) is None

    class MyDCASGD(DCASGD):
        def prepare_grad(self, *args, **kwargs):  # pylint: disable=useless-parent-delegation
            return super().prepare_grad(*args, **kwargs)

    assert one_call_update(MyDCASGD(0.1)) is None               # DCASGD's apply_one would skip it
    assert one_call_update(mx.optimizer.SGD()) is None


# -- bad input, the plain MXNet path, pickling, registration ---------------------------------

@pytest.mark.parametrize('kwargs, pattern', [
    (dict(lamda=-0.1), r"lamda=-0\.1 .*\[0\.0, inf\)"),
    (dict(lamda=float('nan')), r'lamda=nan'),
    (dict(lamda='2'), r"lamda='2'"),
    (dict(mean_square_decay=1.0), r'mean_square_decay=1\.0 .*\[0\.0, 1\.0\)'),
    (dict(mean_square_decay=-0.5), r'mean_square_decay=-0\.5'),
    (dict(epsilon=0.0), r'epsilon=0\.0 .*\(0\.0, inf\)'),
    (dict(momentum=1.0), r'momentum=1\.0 .*\[0\.0, 1\.0\)'),
    (dict(momentum=-0.9), r'momentum=-0\.9'),
    (dict(adaptive='yes'), r"adaptive='yes'"),
])
def test_dcasgd_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        DCASGD(0.1, **kwargs)


@pytest.mark.parametrize('kwargs, pattern', [
    (dict(staleness_lr='inv'), r"staleness_lr='inv' .*'inverse', 'average', 'none'"),
    (dict(staleness_window=0), r'staleness_window=0 .*integer >= 1'),
    (dict(staleness_window=2.5), r'staleness_window=2\.5'),
    (dict(momentum=1.5), r'momentum=1\.5'),
])
def test_sasgd_bad_arguments(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        StalenessAwareSGD(0.1, **kwargs)


def test_bad_calls():
    opt = StalenessAwareSGD(0.1)
    w = mx.nd.ones(2)
    state = opt.create_state(0, w)
    for tau in (None, -1, float('nan')):
        with pytest.raises(ValueError, match='staleness='):
            opt.apply(0, w, mx.nd.ones(2), state, tau)
    with pytest.raises(ValueError, match='staleness=-2'):
        opt.prepare_grad(0, w, mx.nd.ones(2), state, None, staleness=-2)
    # some gradients of one update scaled by their tau, some not
    opt.prepare_grad(0, w, mx.nd.ones(2), state, None, staleness=2)
    opt.prepare_grad(0, w, mx.nd.ones(2), state, None)
    with pytest.raises(ValueError, match='for all of them or for none'):
        opt.apply(0, w, mx.nd.ones(2), state, 1.0)
    dc = DCASGD(0.1)
    with pytest.raises(ValueError, match='needs backup'):
        dc.prepare_grad(0, w, mx.nd.ones(2), dc.create_state(0, w), None)
    with pytest.raises(ValueError, match='shape'):
        dc.prepare_grad(0, w, mx.nd.ones(2), dc.create_state(0, w), mx.nd.ones(3))
    # 'none' ignores staleness entirely
    StalenessAwareSGD(0.1, staleness_lr='none').apply(0, w, mx.nd.ones(2), (None, None), None)


MESSAGE = (r'{} needs an mxnet-ssp store that reports staleness \(dist_async with mxnet_ssp '
           r'imported, dist_ssp, dist_dssp, dist_softsync\); it was used on a store that updates '
           r'locally')


@pytest.mark.parametrize('opt', [StalenessAwareSGD(0.1), DCASGD(0.1, momentum=0.9)],
                         ids=['sasgd', 'dcasgd'])
def test_plain_update_path_raises_clear_error(opt):
    msg = MESSAGE.format(type(opt).__name__)
    w = mx.nd.ones(3)
    with pytest.raises(StalenessRequiredError, match=msg):
        opt.update(0, w, mx.nd.ones(3), opt.create_state(0, w))
    updater = mx.optimizer.get_updater(opt)
    with pytest.raises(StalenessRequiredError, match=msg):
        updater(0, mx.nd.ones(3), w)
    np.testing.assert_array_equal(w.asnumpy(), [1, 1, 1])


def test_gluon_trainer_on_a_local_store_raises_clear_error():
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    trainer = mx.gluon.Trainer(net.collect_params(), 'sasgd', {'learning_rate': 0.1},
                               kvstore='local')
    assert isinstance(trainer._optimizer, StalenessAwareSGD)
    with mx.autograd.record():
        loss = net(mx.nd.ones((4, 3))).sum()
    loss.backward()
    with pytest.raises(StalenessRequiredError, match=MESSAGE.format('StalenessAwareSGD')):
        trainer.step(4)


def mxnet_pickle_round_trip(opt):
    """What KVStore.set_optimizer and the server do: ASCII protocol 0, then bytes again."""
    text = mx.base.py_str(pickle.dumps(opt, 0))
    assert '\x00' not in text               # goes through a C string
    return pickle.loads(text.encode('utf-8'))


@pytest.mark.parametrize('make, rule', [
    (lambda: StalenessAwareSGD(0.05, momentum=0.9, staleness_lr='average',
                               staleness_window=3, clip_gradient=0.8, **COMMON),
     lambda: SASGDRule(0.05, momentum=0.9, staleness_lr='average', staleness_window=3,
                       clip_gradient=0.8, **COMMON)),
    (lambda: DCASGD(0.05, lamda=0.7, adaptive=True, mean_square_decay=0.9, epsilon=1e-6,
                    momentum=0.5, **COMMON),
     lambda: DCASGDRule(0.05, lamda=0.7, adaptive=True, mean_square_decay=0.9, epsilon=1e-6,
                        momentum=0.5, **COMMON)),
], ids=['sasgd', 'dcasgd'])
def test_pickle_round_trip(make, rule):
    opt = make()
    opt.set_lr_mult({3: 0.5})
    back = mxnet_pickle_round_trip(opt)
    assert type(back) is type(opt)
    for name in ('lr', 'momentum', 'wd', 'rescale_grad', 'clip_gradient', 'lr_mult',
                 'needs_backup', 'uses_grad_staleness'):
        assert getattr(back, name) == getattr(opt, name), name
    for name in ('staleness_lr', 'staleness_window', 'lamda', 'adaptive', 'mean_square_decay',
                 'epsilon'):
        assert getattr(back, name, None) == getattr(opt, name, None), name
    r = rule()
    r.lr_mult = {3: 0.5}
    compare(back, r, random_script(3), c=2)


@pytest.mark.parametrize('make', [
    lambda: DCASGD(0.05, adaptive=True, momentum=0.9),
    lambda: StalenessAwareSGD(0.05, momentum=0.9),
    lambda: StalenessAwareSGD(0.05, staleness_lr='average', staleness_window=3),
], ids=['dcasgd-a', 'sasgd-inverse', 'sasgd-average'])
def test_states_pickle_round_trip_midway(make):
    """Server state save/restore: optimizer and per-key states pickled after half a script,
    in the middle of a softsync batch (c = 3) for at least one key."""
    script = random_script(9, events=120)
    half = 61
    init = initial()
    full, part = MXServer(make(), 3, c=3), MXServer(make(), 3, c=3)
    for srv in (full, part):
        for key in sorted(init):
            srv.init(key, init[key])
    list(full.play(script))
    list(part.play(script[:half]))
    assert any(part.acc[key] for key in init)
    part.opt, part.state = pickle.loads(pickle.dumps((part.opt, part.state)))
    list(part.play(script[half:]))
    for key in init:
        np.testing.assert_array_equal(part.w[key].asnumpy(), full.w[key].asnumpy())


def test_registered_names():
    create = mx.optimizer.create
    assert type(create('sasgd', learning_rate=0.1)) is StalenessAwareSGD
    assert type(create('SASGD', learning_rate=0.1, staleness_lr='none')) is StalenessAwareSGD
    assert type(create('stalenessawaresgd', learning_rate=0.1)) is StalenessAwareSGD
    dc = create('dcasgd_pw', learning_rate=0.1, lamda=0.04, momentum=0.9)
    assert type(dc) is DCASGD and dc.lamda == 0.04 and dc.needs_backup
    assert type(create('dcasgd')) is mx.optimizer.DCASGD       # MXNet's own is untouched
    assert not StalenessAwareSGD(0.1).needs_backup
    assert StalenessAwareSGD(0.1).uses_grad_staleness
    assert not StalenessAwareSGD(0.1, staleness_lr='average').uses_grad_staleness
    assert optim.STALENESS_POLICIES == ('inverse', 'average', 'none')


def test_reference_does_not_import_mxnet():
    import os
    import subprocess
    import sys
    code = ('import sys, oracle_optim; '
            'assert "mxnet" not in sys.modules, sorted(m for m in sys.modules if "mxnet" in m)')
    # from the root, as every other test's process (mutmut's mutants read its setup.cfg there)
    path = os.pathsep.join([os.path.join(ROOT, 'tests', 'support'), ROOT])
    subprocess.run([sys.executable, '-c', code], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=path))


@pytest.mark.parametrize('first', [
    'from mxnet_ssp.optim import DCASGD',
    pytest.param('import mxnet_ssp.optim', marks=pytest.mark.slow),
    pytest.param('import mxnet_ssp.kvstore', marks=pytest.mark.slow),
    # the store's own chain (mxnet_ssp._STORE_CHAIN): each raised ImportError (a circular
    # import: kvstore took names the half-imported module did not define yet) until the
    # registration waited for the module's last line
    'from mxnet_ssp.store import SSPKVStore', 'import mxnet_ssp.worker.native_store',
    'import mxnet_ssp.worker.bucketing', 'import mxnet_ssp.worker.clock_sync'])
def test_importing_a_submodule_before_mxnet_registers_everything(first):
    """A script whose first import is one of ours (before mxnet's) gets the store types and
    the rules: optim's own `import mxnet` runs the registration while optim is half done."""
    import subprocess
    import sys
    code = ('%s\nimport mxnet as mx\nfrom mxnet.kvstore.base import KVStoreBase\n'
            'assert {"dist_ssp", "dist_dssp", "dist_softsync"} <= set(KVStoreBase.kv_registry)\n'
            'assert {"dcasgd_pw", "sasgd"} <= set(mx.optimizer.Optimizer.opt_registry)\n'
            % first)
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_native_dist_store_refuses_worker_aware_rules_before_sending():
    """MXNet's own dist stores pickle the optimizer for their servers, which cannot report
    staleness: their set_optimizer refuses, naming the stores that can."""
    import types
    import mxnet as mx
    from mxnet.kvstore.kvstore import KVStore
    from mxnet_ssp import optim

    # MXNet's set_optimizer, unbound, on an object of its type: the refusal comes before
    # the store is used at all (a real dist_sync job refusing it: test_slots.py)
    for opt in (optim.StalenessAwareSGD(learning_rate=0.1), optim.DCASGD(learning_rate=0.1)):
        for store_type in ('dist_sync', 'dist_async', 'dist_device_sync'):
            with pytest.raises(optim.StalenessRequiredError) as err:
                KVStore.set_optimizer(types.SimpleNamespace(type=store_type), opt)
            assert 'dist_ssp' in str(err.value) and type(opt).__name__ in str(err.value)
            assert store_type in str(err.value)
        # any other pickling (our stores, Trainer.save_states) still works
        assert pickle.loads(pickle.dumps(opt, 0)).lr == opt.lr
    # plain rules still reach MXNet's own code; local stores get worker-aware rules too
    # (their update raises, see test_gluon_trainer_on_a_local_store_raises_clear_error)
    local = mx.kv.create('local')
    local.set_optimizer(mx.optimizer.SGD(learning_rate=0.1))
    local.set_optimizer(optim.StalenessAwareSGD(learning_rate=0.1))
    # installing it twice does not wrap twice
    from mxnet_ssp.worker.native_store import refuse_worker_aware_rules
    refuse_worker_aware_rules()
    assert KVStore.set_optimizer.__wrapped__.__module__ == 'mxnet.kvstore.kvstore'
    assert isinstance(mx.optimizer.create('sasgd'), optim.StalenessAwareSGD)


def test_host_views_wait_for_queued_kernels_and_share_memory():
    from mxnet_ssp.host_kernels import host_views, on_host
    a = mx.nd.zeros((64, 33))
    for _ in range(5):
        a += 1.0                                  # queued on MXNet's engine
    view, = host_views(a)
    assert view.shape == (64, 33) and (view == 5.0).all()
    view[3, 4] = -2.0                             # written through to the NDArray
    assert a[3, 4].asscalar() == -2.0
    b = a[2:4]                                    # a view with an offset
    assert (host_views(b)[0][1, 4] == -2.0)
    assert on_host(a, b)
    assert not on_host(a, mx.nd.zeros(3, dtype='float16'))
    assert not on_host(mx.nd.zeros(3).tostype('row_sparse'))
    from mxnet_ssp.host_kernels import copy_into
    for dtype in ('float32', 'float16'):           # a memcpy, or MXNet's copy
        dst, src = mx.nd.zeros((4, 3), dtype=dtype), mx.nd.arange(12).reshape((4, 3))
        src = src.astype(dtype) * 2                 # queued
        copy_into(dst, src)
        np.testing.assert_array_equal(dst.asnumpy(), np.arange(12).reshape((4, 3)) * 2)


def test_dcasgd_float16_keeps_the_mxnet_kernels():
    opt = DCASGD(0.1, lamda=1.0, adaptive=True, multi_precision=False)
    w = mx.nd.array([1.0, 2.0], dtype='float16')
    state = opt.create_state(0, w)
    g = mx.nd.array([0.5, -1.0], dtype='float16')
    b = mx.nd.array([0.5, 2.5], dtype='float16')
    p = opt.prepare_grad(0, w, g, state, backup=b)
    ms = 0.05 * np.array([0.25, 1.0])
    expected = np.array([0.5, -1.0]) + 1.0 * np.array([0.25, 1.0]) * np.array([0.5, -0.5]) \
        / (np.sqrt(ms) + 1e-7)
    assert p.dtype == np.float16
    np.testing.assert_allclose(p.asnumpy(), expected, rtol=2e-3)
