"""Edges of the NumPy reference (the NumPy oracle ``tests/support/oracle_optim.py``): defaults,
states, dtypes,
error messages, what :func:`rule_from_optimizer` reads, and one or two updates of each rule
against values worked out by hand.  Pure NumPy, except the last test (real optimizers)."""
import re

import numpy as np
import pytest

from oracle_optim import (DCASGDRule, Received, Reference, SASGDRule, Update, _Rule,
                                 rule_from_optimizer)

f32 = np.float32


def full(message):
    """A `match` pattern for exactly `message`."""
    return '^%s$' % re.escape(message)


def a32(*values):
    return np.array(values, dtype=np.float32)


# -- defaults and states ---------------------------------------------------------------------

def test_defaults_of_the_rules():
    base = _Rule(0.5)
    assert (base.learning_rate, base.momentum, base.wd, base.rescale_grad) == (0.5, 0.0, 0.0, 1.0)
    assert base.clip_gradient is None and base.lr_mult == {} and base.wd_mult == {}
    assert base.dtype == np.float32 and base.needs_backup is False
    sa = SASGDRule(0.5)
    assert (sa.momentum, sa.staleness_lr, sa.staleness_window, sa.per_gradient_staleness) == \
        (0.0, 'inverse', 1, True)
    dc = DCASGDRule(0.5)
    assert (dc.momentum, dc.lamda, dc.adaptive, dc.mean_square_decay, dc.epsilon,
            dc.adaptive_reading, dc.needs_backup) == (0.0, 2.0, False, 0.95, 1e-7, 'paper', True)


def test_states_without_momentum_hold_no_buffer():
    w = np.ones(2, np.float32)
    assert _Rule(0.5).create_state(0, w) == {'mom': None}
    assert SASGDRule(0.5).create_state(0, w) == {'mom': None, 'recent': []}
    assert DCASGDRule(0.5).create_state(0, w) == {'mom': None, 'mean_square': None}
    assert DCASGDRule(0.5, adaptive=True, adaptive_reading='multiverso').create_state(0, w) == \
        {'mom': None, 'mean_square': {}}


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_state_buffers_are_zeros_like_the_weight(dtype):
    w = np.ones((2, 3), dtype)
    for rule in (_Rule(0.5, momentum=0.5, dtype=dtype), SASGDRule(0.5, momentum=0.5, dtype=dtype),
                 DCASGDRule(0.5, momentum=0.5, dtype=dtype)):
        mom = rule.create_state('k', w)['mom']
        assert isinstance(mom, np.ndarray) and mom.shape == (2, 3) and mom.dtype == dtype
        assert (mom == 0).all()
    ms = DCASGDRule(0.5, adaptive=True, dtype=dtype).create_state('k', w)['mean_square']
    assert isinstance(ms, np.ndarray) and ms.shape == (2, 3) and ms.dtype == dtype
    assert (ms == 0).all()


# -- gradient preparation ----------------------------------------------------------------------

def test_loss_grad_is_in_the_rules_dtype():
    g = SASGDRule(0.5).loss_grad(np.array([0.1, 2.0]))          # float64 in
    assert g.dtype == np.float32 and g.tolist() == [float(f32(0.1)), 2.0]
    assert SASGDRule(0.5).loss_grad([1, 2]).dtype == np.float32
    g = DCASGDRule(0.5, dtype=np.float64).loss_grad(a32(0.1))    # float32 in
    assert g.dtype == np.float64 and g[0] == float(f32(0.1))
    p = SASGDRule(0.5, wd=0.5).prepare(0, a32(1.0), np.array([0.1]), {}, None, 0)
    assert p.dtype == np.float32


def test_rescale_then_clip_and_no_clipping_at_zero_or_below():
    grad = np.array([1.0, -3.0, 0.5])
    clipped = SASGDRule(0.5, rescale_grad=2.0, clip_gradient=2.5).loss_grad(grad)
    assert clipped.tolist() == [2.0, -2.5, 1.0]
    for clip in (0, 0.0, -1.0, None):
        assert SASGDRule(0.5, rescale_grad=2.0, clip_gradient=clip).loss_grad(grad).tolist() == \
            [2.0, -6.0, 1.0]


def test_weight_decay_of_zero_leaves_the_gradient_alone():
    rule = SASGDRule(0.5)
    g = a32(2.0, -0.0)
    assert rule.add_wd(0, a32(1.0, 1.0), g) is g
    # not even 0 * w: an infinite weight does not turn the gradient into nan
    p = rule.prepare(0, a32(np.inf, 1.0), a32(2.0, -0.0), rule.create_state(0, a32(1, 1)), None, 0)
    assert p[0] == 2.0 and np.signbit(p[1])


def test_weight_decay_of_one_and_wd_mult():
    """wd = 1: prepared = g + w = 2 + 1 = 3; w = 1 - 0.5 * 3 = -0.5."""
    rule = SASGDRule(0.5, staleness_lr='none', wd=1.0)
    assert rule.prepare('k', a32(1.0), a32(2.0), {}, None, 0).tolist() == [3.0]
    ref = Reference(rule, 1)
    ref.init('k', [1.0])
    ref.push(0, 'k', [2.0])
    assert ref.weights['k'].tolist() == [-0.5]
    # wd 0.5 times a wd_mult of 2 for key 'k' only
    rule = SASGDRule(0.5, staleness_lr='none', wd=0.5, wd_mult={'k': 2.0})
    assert rule.prepare('k', a32(1.0), a32(2.0), {}, None, 0).tolist() == [3.0]
    assert rule.prepare('j', a32(1.0), a32(2.0), {}, None, 0).tolist() == [2.5]


# -- updates by hand ----------------------------------------------------------------------------

def test_sgd_and_momentum_two_steps():
    """lr 0.5, g 2, w 1.  SGD: 1 -> 0 -> -1.  Momentum 0.5: mom -1, w 0; mom -1.5, w -1.5."""
    for momentum, expected in ((0.0, [[0.0], [-1.0]]), (0.5, [[0.0], [-1.5]])):
        ref = Reference(SASGDRule(0.5, momentum=momentum, staleness_lr='none'), 1)
        ref.init('w', [1.0])
        got = []
        for _ in range(2):
            ref.push(0, 'w', [2.0])
            got.append(ref.weights['w'].tolist())
        assert got == expected


def test_inverse_with_the_mean_tau_ignores_the_window():
    """'inverse' without per-gradient taus: alpha0 / max(1, tau) per update, whatever the window
    ('average' with a window of 2 would divide the second step by 3)."""
    rule = SASGDRule(1.0, staleness_lr='inverse', staleness_window=2, per_gradient_staleness=False)
    state = rule.create_state(0, a32(0.0))
    w = rule.update(0, a32(0.0), state, [a32(4.0)], [4])        # 0 - 4 / 4
    assert w.tolist() == [-1.0]
    w = rule.update(0, w, state, [a32(2.0)], [2])               # -1 - 2 / 2
    assert w.tolist() == [-2.0] and state['recent'] == []
    avg = SASGDRule(1.0, staleness_lr='average', staleness_window=2)
    state = avg.create_state(0, a32(0.0))
    w = avg.update(0, a32(0.0), state, [a32(4.0)], [4])
    w = avg.update(0, w, state, [a32(3.0)], [2])                # <sigma> = (4 + 2) / 2
    assert w.tolist() == [-2.0] and state['recent'] == [4.0, 2.0]


def test_dcasgd_c_two_workers_by_hand():
    """lr 0.5, lamda 0.25, w0 1, g 2.  Worker 1 (backup 1 = w): w = 1 - 0.5 * 2 = 0.  Worker 0
    (backup 1, w 0): g_c = 2 + 0.25 * 4 * (0 - 1) = 1, w = 0 - 0.5 * 1 = -0.5."""
    ref = Reference(DCASGDRule(0.5, lamda=0.25), 2)
    ref.init('w', [1.0])
    assert ref.push(1, 'w', [2.0]) == 0 and ref.weights['w'].tolist() == [0.0]
    assert ref.push(0, 'w', [2.0]) == 1 and ref.weights['w'].tolist() == [-0.5]


def test_weights_keep_the_rules_dtype_whatever_update_returns():
    class ListRule(SASGDRule):
        def update(self, key, weight, state, prepared, taus):
            return [float(x) for x in super().update(key, weight, state, prepared, taus)]

    ref = Reference(ListRule(0.5, staleness_lr='none'), 1)
    ref.init('w', [1.0, 3.0])
    ref.push(0, 'w', [2.0, 2.0])
    assert ref.weights['w'].dtype == np.float32 and ref.weights['w'].tolist() == [0.0, 2.0]


# -- the simulator ------------------------------------------------------------------------------

def test_one_worker_and_the_update_records():
    ref = Reference(SASGDRule(0.5, staleness_lr='none'), num_workers=1)
    ref.init('w', [1.0])
    assert ref.play([('push', 0, 'w', [2.0]), ('pull', 0, 'w'), ('push', 0, 'w', [2.0])]) == \
        [0, [0.0], 0]
    assert ref.log == [Received('w', 0, 0), Received('w', 0, 0)]
    assert ref.updates == [Update('w', 1, (0,), (0,), 0.0), Update('w', 2, (0,), (0,), 0.0)]
    assert ref.version('w') == 2 and ref.weights['w'].tolist() == [-1.0]


def test_run_initializes_in_key_order_then_plays_with_softsync():
    script = [('push', 0, 'a', [2.0]), ('push', 1, 'a', [4.0]), ('pull', 1, 'b')]
    ref = Reference.run(SASGDRule(0.5, staleness_lr='none'), 2, {'b': [1.0], 'a': [1.0]}, script,
                        softsync_c=2)
    assert [event for event, _ in ref.history] == \
        [('init', 'a'), ('init', 'b'), ('push', 0, 'a'), ('push', 1, 'a'), ('pull', 1, 'b')]
    assert (ref.num_workers, ref.softsync_c, ref.keep_history) == (2, 2, True)
    # one update with the mean of the two gradients: 1 - 0.5 * 3
    weights = {key: w.tolist() for key, w in ref.weights.items()}
    assert weights == {'a': [-0.5], 'b': [1.0]}
    assert ref.updates == [Update('a', 1, (0, 1), (0, 0), 0.0)]
    assert Reference.run(SASGDRule(0.5), 3, {}, []).softsync_c == 1
    quiet = Reference(SASGDRule(0.5), 1, keep_history=False)
    quiet.init('a', [1.0])
    assert quiet.history == [] and quiet.pending('a') == 0


def test_init_converts_and_copies_the_weight():
    ref = Reference(SASGDRule(0.5), 2)
    ref.init('i', [1, 2])
    ref.init('d', np.array([0.1]))
    assert ref.weights['i'].dtype == np.float32 and ref.weights['i'].tolist() == [1.0, 2.0]
    pulled = ref.pull(0, 'd')
    assert pulled.dtype == np.float32 and pulled[0] == f32(0.1)
    w0 = np.zeros(2, np.float32)
    ref.init('z', w0)
    w0[:] = 5.0                                     # the caller's array is not the weight
    assert ref.weights['z'].tolist() == [0.0, 0.0] and ref.pull(1, 'z').tolist() == [0.0, 0.0]


def test_learning_rate_changes_are_events():
    ref = Reference(SASGDRule(0.5, staleness_lr='none'), 1)
    ref.init('w', [1.0])
    assert ref.play([('lr', 0.25), ('push', 0, 'w', [2.0])]) == [None, 0]
    assert ref.rule.learning_rate == 0.25 and ref.weights['w'].tolist() == [0.5]
    assert [event for event, _ in ref.history] == [('init', 'w'), ('lr', 0.25), ('push', 0, 'w')]
    assert ref.history[1][1]['w'].tolist() == [1.0]


# -- errors, with their whole message -------------------------------------------------------------

def test_rule_argument_errors():
    with pytest.raises(ValueError, match=full("staleness_lr='bogus' is not accepted")):
        SASGDRule(0.5, staleness_lr='bogus')
    with pytest.raises(ValueError, match=full("adaptive_reading='book' is not accepted")):
        DCASGDRule(0.5, adaptive_reading='book')
    rule = DCASGDRule(0.5, adaptive=True, adaptive_reading='multiverso')
    w = a32(1.0)
    with pytest.raises(ValueError, match=full("adaptive_reading='multiverso' needs the sender")):
        rule.prepare(0, w, a32(2.0), rule.create_state(0, w), w.copy(), 0)


def test_simulator_errors():
    rule = SASGDRule(0.5)
    with pytest.raises(ValueError, match=full('num_workers=0: need at least one worker')):
        Reference(rule, 0)
    with pytest.raises(ValueError,
                       match=full('softsync_c=0: need at least one gradient per update')):
        Reference(rule, 2, softsync_c=0)
    ref = Reference(rule, 2)
    ref.init('w', np.zeros(2))
    with pytest.raises(ValueError, match=full("key 'w' is already initialized")):
        ref.init('w', np.zeros(2))
    with pytest.raises(ValueError, match=full("gradient of shape (3,) for key 'w' of shape (2,)")):
        ref.push(0, 'w', np.ones(3))
    with pytest.raises(ValueError, match=full('worker 2 out of range 0..1')):
        ref.pull(2, 'w')
    with pytest.raises(ValueError, match=full('worker -1 out of range 0..1')):
        ref.push(-1, 'w', np.ones(2))
    with pytest.raises(KeyError) as info:
        ref.pull(0, 'x')
    assert info.value.args == ("key 'x' was not initialized",)
    with pytest.raises(ValueError,
                       match=full("unknown event ('pop', 0, 'w') (expected push, pull or lr)")):
        ref.play([('pop', 0, 'w')])
    assert ref.log == [] and ref.version('w') == 0


# -- rule_from_optimizer --------------------------------------------------------------------------

def fake_optimizer(kind, **options):
    """An object of a class named `kind` (module 'fake.optim') with `options` as attributes."""
    cls = type(kind, (), {'__module__': 'fake.optim'})
    opt = cls()
    common = dict(lr=0.5, momentum=0.25, wd=0.125, rescale_grad=2.0, clip_gradient=3.0,
                  lr_mult={0: 0.5, 'fc_weight': 9.0}, wd_mult={1: 0.0, 'fc_bias': 3.0})
    common.update(options)
    vars(opt).update(common)
    return opt


def common_options(rule):
    return (rule.learning_rate, rule.momentum, rule.wd, rule.rescale_grad, rule.clip_gradient,
            rule.lr_mult, rule.wd_mult)


COMMON = (0.5, 0.25, 0.125, 2.0, 3.0, {0: 0.5}, {1: 0.0})


def test_rule_from_a_staleness_aware_sgd():
    opt = fake_optimizer('StalenessAwareSGD', staleness_lr='average', staleness_window=3)
    rule = rule_from_optimizer(opt)
    assert type(rule) is SASGDRule and common_options(rule) == COMMON
    assert (rule.staleness_lr, rule.staleness_window, rule.per_gradient_staleness, rule.dtype) == \
        ('average', 3, True, np.float32)
    rule = rule_from_optimizer(opt, dtype=np.float64, per_gradient_staleness=False)
    assert (rule.dtype, rule.per_gradient_staleness) == (np.float64, False)
    rule = rule_from_optimizer(opt, np.float64, True)
    assert (rule.dtype, rule.per_gradient_staleness) == (np.float64, True)


def test_rule_from_a_dcasgd():
    opt = fake_optimizer('DCASGD', lamda=0.5, adaptive=True, mean_square_decay=0.75,
                         epsilon=0.25, adaptive_reading='multiverso')
    rule = rule_from_optimizer(opt, dtype=np.float64)
    assert type(rule) is DCASGDRule and common_options(rule) == COMMON
    assert (rule.lamda, rule.adaptive, rule.mean_square_decay, rule.epsilon,
            rule.adaptive_reading, rule.dtype) == (0.5, True, 0.75, 0.25, 'multiverso', np.float64)
    # an optimizer without adaptive_reading (older pickles) reads as 'paper'
    opt = fake_optimizer('DCASGD', lamda=0.5, adaptive=False, mean_square_decay=0.75,
                         epsilon=0.25, clip_gradient=None)
    rule = rule_from_optimizer(opt)
    assert (rule.adaptive_reading, rule.adaptive, rule.clip_gradient) == ('paper', False, None)


def test_rule_from_other_optimizers_is_a_type_error():
    # MXNet's own DCASGD has no `adaptive`; an SGD with an `adaptive` attribute is no DC-ASGD
    for opt in (fake_optimizer('DCASGD', lamda=0.5),
                fake_optimizer('SGD', lamda=0.5, adaptive=True, mean_square_decay=0.5,
                               epsilon=0.5)):
        kind = type(opt).__name__
        with pytest.raises(TypeError, match=full('no reference rule for fake.optim.%s' % kind)):
            rule_from_optimizer(opt)


def test_rule_from_real_optimizers_reads_their_options_and_defaults():
    from conftest import need_module
    mx = need_module('mxnet')
    from mxnet_ssp.optim import DCASGD, StalenessAwareSGD
    opt = StalenessAwareSGD(learning_rate=0.5, momentum=0.25, wd=0.125, rescale_grad=2.0,
                            clip_gradient=3.0, staleness_lr='none', staleness_window=4)
    opt.set_lr_mult({0: 0.5})
    opt.set_wd_mult({1: 0.0})
    rule = rule_from_optimizer(opt)
    assert (rule.learning_rate, rule.momentum, rule.wd, rule.rescale_grad,
            rule.clip_gradient) == (0.5, 0.25, 0.125, 2.0, 3.0)
    assert rule.lr_mult[0] == 0.5 and rule.wd_mult[1] == 0.0
    assert (rule.staleness_lr, rule.staleness_window) == ('none', 4)
    rule = rule_from_optimizer(DCASGD())
    assert type(rule) is DCASGDRule and common_options(rule) == \
        (0.01, 0.0, 0.0, 1.0, None, {}, {})
    assert (rule.lamda, rule.adaptive, rule.mean_square_decay, rule.epsilon,
            rule.adaptive_reading) == (2.0, False, 0.95, 1e-7, 'paper')
    with pytest.raises(TypeError,
                       match=full('no reference rule for mxnet.optimizer.optimizer.DCASGD')):
        rule_from_optimizer(mx.optimizer.DCASGD(learning_rate=0.1))
