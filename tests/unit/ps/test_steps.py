"""Unit tests of :class:`mxnet_ssp.worker.steps.StepTracker`: where a training step ends.

No MXNet: the tracker is driven the way :class:`mxnet_ssp.kvstore.SSPKVStore`
drives it (``init``/``broadcast`` -> ``on_init``; before every push
``repeats`` -> ``close_early``; then ``on_push``), by the call orders of
gluon.Trainer (``pushpull`` per parameter, in index order), Module (``push``
of every parameter, then ``pull`` of every parameter) and the raw API
(lists of keys, any order).  A step must end exactly once per training step,
after its last push and before any of its pulls.
"""
import numpy as np
import pytest

from mxnet_ssp.worker.steps import StepTracker


class Caller:
    """Calls the tracker as SSPKVStore does and records where steps end.

    ``ends`` lists, per step end, the index (in ``calls``) of the push call
    that ended it and how: ``'complete'`` (its last expected key) or
    ``'early'`` (the next step's first push revealed the end).
    """

    def __init__(self):
        self.tracker = StepTracker()
        self.calls = []
        self.ends = []

    def init(self, keys, values=None):
        self.tracker.on_init(list(keys), values)

    def push(self, keys):
        keys = list(keys) if isinstance(keys, (list, tuple)) else [keys]
        self.calls.append(('push', keys))
        if self.tracker.repeats(keys):
            self.tracker.close_early()
            self.ends.append((len(self.calls) - 1, 'early'))
        if self.tracker.on_push(keys):
            self.ends.append((len(self.calls) - 1, 'complete'))

    def pull(self, keys):
        """Whether the pull would be deferred (its key was pushed in the open step)."""
        keys = list(keys) if isinstance(keys, (list, tuple)) else [keys]
        self.calls.append(('pull', keys))
        return any(self.tracker.in_step(k) for k in keys)


def trainer_steps(caller, grad_keys, steps):
    """gluon.Trainer: ``pushpull(i, ...)`` for each parameter with a gradient."""
    for _ in range(steps):
        for k in grad_keys:
            caller.push(k)


def test_every_key_pushed_ends_each_step_at_its_last_push():
    c = Caller()
    c.init([0, 1, 2])
    trainer_steps(c, [0, 1, 2], steps=4)
    assert c.ends == [(2, 'complete'), (5, 'complete'), (8, 'complete'), (11, 'complete')]
    assert c.tracker.expected == {0, 1, 2} and not c.tracker.learned


def test_never_pushed_keys_are_learned_after_the_first_step():
    """BatchNorm's running mean / var are initialized but never get gradients."""
    c = Caller()
    c.init([0, 1, 2, 3, 4])            # 1 and 3 are frozen (grad_req='null')
    trainer_steps(c, [0, 2, 4], steps=4)
    # step 1 cannot end at its last push (1 and 3 are still expected): it ends when
    # step 2 pushes key 0 again; from then on each step ends at its last push
    assert c.ends == [(3, 'early'), (5, 'complete'), (8, 'complete'), (11, 'complete')]
    assert c.tracker.learned and c.tracker.expected == {0, 2, 4}
    # one end per step, the last step included: none ends twice or before its last push
    assert len(c.ends) == 4


def test_only_the_first_step_is_closed_late():
    c = Caller()
    c.init(range(10))
    trainer_steps(c, [1, 4, 7], steps=6)
    kinds = [kind for _, kind in c.ends]
    assert kinds == ['early'] + ['complete'] * 5


def test_a_step_pushing_nothing_new_is_not_counted():
    c = Caller()
    c.init([0, 1])
    c.tracker.close_early()            # nothing pushed yet: nothing learned
    assert not c.tracker.learned and c.tracker.expected == {0, 1}


def test_several_devices_one_key_per_call_and_shapes_of_the_first_device():
    """pushpull(i, [g_dev0, g_dev1]): one key, a list of per-device arrays."""
    c = Caller()
    c.init([0, 1], [[np.zeros((3, 2)), np.zeros((3, 2))], [np.zeros(5), np.zeros(5)]])
    assert c.tracker.shapes == {0: (3, 2), 1: (5,)}
    trainer_steps(c, [0, 1], steps=3)
    assert c.ends == [(1, 'complete'), (3, 'complete'), (5, 'complete')]


def test_raw_api_module_order_pushes_then_pulls():
    """Module: push every parameter, then pull every parameter.  The step ends at the
    last push, so none of the pulls is deferred (they come after the decision)."""
    c = Caller()
    c.init([0, 1, 2])
    for step in range(3):
        for k in (0, 1, 2):
            c.push(k)
        assert c.ends[-1] == (len(c.calls) - 1, 'complete')
        assert [c.pull(k) for k in (0, 1, 2)] == [False, False, False]
    assert len(c.ends) == 3


def test_raw_api_pushpull_pulls_are_in_the_open_step():
    """Trainer's order: the pull of a key pushed earlier in the same step is deferred
    (it must wait for the release); a key not yet pushed in this step is not."""
    c = Caller()
    c.init([0, 1, 2])
    c.push(0)
    assert c.pull(0) is True
    assert c.pull(1) is False
    c.push(1)
    assert c.pull([1, 2]) is True       # one of the keys is in the step
    c.push(2)                           # completes the step
    assert c.pull(0) is False


def test_raw_api_lists_of_keys_and_any_order():
    c = Caller()
    c.init([0, 1, 2, 3])
    c.push([2, 0])
    c.push([3, 1])                      # step 1 complete
    c.push(1)
    c.push([3, 0])
    c.push(2)                           # step 2 complete (another order)
    c.push([0, 1, 2, 3])                # step 3 in one call
    assert c.ends == [(1, 'complete'), (4, 'complete'), (5, 'complete')]


def test_a_list_with_a_repeated_key_starts_a_new_step():
    c = Caller()
    c.init([0, 1])
    assert c.tracker.repeats([0, 0])
    c.push(0)
    assert c.tracker.repeats([0])
    assert not c.tracker.repeats([1])


def test_learned_set_with_frozen_keys_and_lists():
    """Frozen keys and list pushes together: the learned set is what was pushed."""
    c = Caller()
    c.init(['a', 'b', 'c', 'd'])
    assert c.tracker.string_keys
    c.push(['a', 'c'])
    c.push(['a', 'c'])                  # step 1 ends early, step 2 complete at once
    c.push(['c', 'a'])
    assert c.ends == [(1, 'early'), (1, 'complete'), (2, 'complete')]
    assert c.tracker.expected == {'a', 'c'}


@pytest.mark.parametrize('grad_keys', [[0], [0, 3], [1, 2, 3], [0, 1, 2, 3]])
@pytest.mark.parametrize('order', ['trainer', 'module'])
def test_trainer_and_module_orders_give_one_end_per_step(grad_keys, order):
    """Whatever subset of the initialized keys has gradients, every step but a first
    one with frozen keys ends exactly at its last push, so Module's pulls come after it."""
    steps = 5
    c = Caller()
    c.init([0, 1, 2, 3])
    deferred = []
    for _ in range(steps):
        for k in grad_keys:
            c.push(k)
        if order == 'module':
            deferred.append([c.pull(k) for k in grad_keys])
    pushes = [i for i, call in enumerate(c.calls) if call[0] == 'push']
    n = len(grad_keys)
    last_push_of_step = pushes[n - 1::n]
    complete = [i for i, kind in c.ends if kind == 'complete']
    if len(grad_keys) == 4:
        assert c.ends == [(i, 'complete') for i in last_push_of_step]
        late = 0
    else:
        # step 1 ends early at step 2's first push; steps 2.. end at their last push
        assert c.ends[0] == (pushes[n], 'early')
        assert complete == last_push_of_step[1:]
        late = 1
    if order == 'module':
        assert deferred == [[True] * n] * late + [[False] * n] * (steps - late)
