"""mxnet_ssp.worker.host_copy: copies done by NumPy inside one operation of MXNet's engine, on real
NDArrays: ordered after the writes to their sources and before later reads of their
destinations, each storage chunk named once (MXNet's engine waits for ever on an operation
that names one twice), errors raised at the next push, and the path refused where MXNet's
layout is not the one it reads."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from mxnet import nd

from conftest import ROOT
from mxnet_ssp.worker import host_copy


def test_mxnet_1_9_1_has_what_the_path_needs():
    assert host_copy.available()
    base = nd.zeros((6, 2))
    other = nd.zeros((6, 2))
    chunk = host_copy.chunk_of(base)
    assert host_copy.chunk_of(base[1:3]) == chunk == host_copy.chunk_of(base.reshape((12,)))
    assert host_copy.chunk_of(other) != chunk


def test_the_path_is_checked_once_per_process(monkeypatch):
    monkeypatch.setitem(host_copy._state, 'available', None)
    assert host_copy.available() is True and host_copy._state['available'] is True
    monkeypatch.setattr(host_copy, '_layout_holds', lambda: 1 / 0)    # not asked again
    assert host_copy.available() is True


def test_the_path_is_off_when_the_layout_does_not_hold(monkeypatch):
    monkeypatch.setitem(host_copy._state, 'available', None)
    monkeypatch.setattr(host_copy, 'chunk_of', lambda array: id(array))    # every view apart
    assert host_copy.available() is False


def test_the_path_is_off_without_the_engine_call(monkeypatch):
    from mxnet import base

    class Lib:                                     # MXNet's library without the call
        def __getattr__(self, name):
            if name == 'MXEnginePushSyncND':
                raise AttributeError(name)
            return getattr(base._LIB, name)

    monkeypatch.setitem(host_copy._state, 'available', None)
    monkeypatch.setattr(base, '_LIB', Lib())
    assert host_copy.available() is False


def test_a_failing_check_turns_the_path_off_with_a_log_line(monkeypatch, caplog):
    def broken():
        raise RuntimeError('boom')
    monkeypatch.setitem(host_copy._state, 'available', None)
    monkeypatch.setattr(host_copy, '_layout_holds', broken)
    with caplog.at_level('INFO', logger='mxnet_ssp.worker.host_copy'):
        assert host_copy.available() is False
    assert caplog.messages == ['mxnet-ssp: host copies are off (RuntimeError: boom)']


def slow_write(into, value):
    """Queue a write of `value` into `into` behind a matrix product of some 10 ms, so that
    what is pushed next finds it pending."""
    a = nd.ones((700, 700)) / 700.0
    into[:] = nd.dot(a, a).reshape(-1)[0:into.size].reshape(into.shape) * 0 + value


def test_copies_run_after_pending_writes_and_before_later_reads():
    big = nd.zeros((300, 300))
    dst = nd.zeros((2, 300, 300))
    plan = host_copy.CopyPlan([(host_copy.host_view(dst)[0], host_copy.host_view(big))],
                              [big], [dst])
    want = np.arange(90000, dtype=np.float32).reshape(300, 300)
    slow_write(big, nd.array(want))                # queued: the copy must wait for it
    other = big * 0 + 7                            # reads big, writes elsewhere
    plan.push()
    after = dst[0] + 1                             # queued after: must see the copy
    np.testing.assert_array_equal(after.asnumpy(), want + 1)
    np.testing.assert_array_equal(dst[1].asnumpy(), np.zeros((300, 300)))
    assert other.asnumpy()[0, 0] == 7


def test_plans_pushed_one_after_the_other_each_run_their_own_copies():
    """Two operations pushed before either ran (the first waits for a pending write)."""
    a, b = nd.zeros(1000), nd.zeros(1000)
    dst_a, dst_b = nd.zeros(1000), nd.zeros(1000)
    first = host_copy.CopyPlan([(host_copy.host_view(dst_a), host_copy.host_view(a))],
                               [a], [dst_a])
    second = host_copy.CopyPlan([(host_copy.host_view(dst_b), host_copy.host_view(b))],
                                [b], [dst_b])
    slow_write(a, nd.arange(1000) * 2)
    b[:] = 5
    first.push()
    second.push()
    np.testing.assert_array_equal(dst_a.asnumpy(), np.arange(1000) * 2)
    np.testing.assert_array_equal(dst_b.asnumpy(), np.full(1000, 5.0))


def test_a_plan_keeps_the_arrays_it_checks_alive():
    """The operation's body checks an array by its handle: the plan holds the array, even a
    view that the reads leave out (another view of its chunk stands for it there)."""
    base = nd.zeros(8)
    check = base[0:4]
    plan = host_copy.CopyPlan([(host_copy.host_view(nd.zeros(4)), host_copy.host_view(check),
                                check), (host_copy.host_view(nd.zeros(4)),
                                         host_copy.host_view(base[4:8]), None)],
                              [base, check], [nd.zeros(1)])
    assert len(plan._checked) == 1 and plan._checked[0] is check
    assert [c[2] and c[2].value for c in plan.copies] == [check.handle.value, None]
    assert plan.reads == [base]


def test_each_storage_chunk_is_named_once_and_never_both_read_and_written():
    base, other, third = nd.zeros((6, 2)), nd.zeros((6, 2)), nd.zeros(3)
    view = host_copy.host_view
    plan = host_copy.CopyPlan(
        [(view(base[0:2]), view(other[0:2])), (view(base[2:4]), view(third[0:2]))],
        [other[0:2], other[2:4], third, base[4:6]], [base[0:2], base[2:4]])
    assert [host_copy.chunk_of(a) for a in plan.writes] == [host_copy.chunk_of(base)]
    assert [host_copy.chunk_of(a) for a in plan.reads] == [host_copy.chunk_of(other),
                                                           host_copy.chunk_of(third)]


def test_a_plan_pushed_again_copies_the_sources_as_they_are_then():
    src, dst = nd.ones(5), nd.zeros(5)
    plan = host_copy.CopyPlan([(host_copy.host_view(dst), host_copy.host_view(src))],
                              [src], [dst])
    for value in (1.0, 2.0, 3.0):
        src[:] = value                             # queued write, then the copy, then a read
        plan.push()
        np.testing.assert_array_equal(dst.asnumpy(), np.full(5, value))


def test_an_operation_naming_one_chunk_many_times_still_runs():
    """Views of one array as destinations and as sources (one engine variable): named once.
    Run in a process of its own: a deadlocked engine would hang this one."""
    script = textwrap.dedent('''
        import numpy as np
        from mxnet import nd
        from mxnet_ssp.worker import host_copy
        src = nd.arange(8)
        dst = nd.zeros(8)
        halves = [dst[0:4], dst[4:8]]
        copies = [(host_copy.host_view(h), host_copy.host_view(s))
                  for h, s in zip(halves, [src[4:8], src[0:4]])]
        plan = host_copy.CopyPlan(copies, [src[4:8], src[0:4], dst[0:4]], halves)
        assert len(plan.writes) == 1 and len(plan.reads) == 1, (plan.writes, plan.reads)
        plan.push()
        print(dst.asnumpy().tolist())
    ''')
    proc = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split('\n')[-2] == str([4.0, 5.0, 6.0, 7.0, 0.0, 1.0, 2.0, 3.0])


def test_an_error_in_the_body_is_raised_by_the_next_push(capfd):
    src, dst = nd.ones(4), nd.zeros(5)
    bad = host_copy.CopyPlan([(host_copy.host_view(dst), host_copy.host_view(src))],
                             [src], [dst])
    bad.push()
    dst.wait_to_read()                             # the operation ran (and failed)
    good = host_copy.CopyPlan([(host_copy.host_view(dst)[:4], host_copy.host_view(src))],
                              [src], [dst])
    with pytest.raises(RuntimeError, match=r'^a host copy failed on MXNet\'s engine thread: '
                                           r'ValueError: could not broadcast'):
        good.push()
    err = capfd.readouterr().err
    assert err.startswith("mxnet-ssp: a host copy failed on MXNet's engine thread:\n"
                          "Traceback (most recent call last):\n"), err
    assert '\nValueError: could not broadcast' in err and 'dst[...] = src' in err
    good.push()                                    # reported once; the next ones run
    np.testing.assert_array_equal(dst.asnumpy(), [1, 1, 1, 1, 0])


def test_the_layout_message_names_the_keys_or_says_it_does_not_know_them():
    assert str(host_copy.LayoutChanged([3, 'w'])).startswith(
        "the array for key(s) 3, w was in MKL-DNN's own memory layout when its host copy ran")
    assert str(host_copy.LayoutChanged([])).startswith("the array for key(s) ? was in")


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_a_view_shows_the_array_s_memory_with_its_type_and_shape(dtype):
    array = nd.arange(6, dtype=dtype).reshape((2, 3))
    view = host_copy.host_view(array)
    assert view.dtype == np.dtype(dtype) and view.shape == (2, 3)
    np.testing.assert_array_equal(view, np.arange(6).reshape(2, 3))
    view[1, 2] = 9                                 # the same memory
    assert array.asnumpy()[1, 2] == 9


def test_a_push_mxnet_refuses_leaves_nothing_behind(monkeypatch):
    src, dst = nd.ones(3), nd.zeros(3)
    plan = host_copy.CopyPlan([(host_copy.host_view(dst), host_copy.host_view(src))],
                              [src], [dst])

    class Lib:                                     # MXNet's library refusing the push
        def MXEnginePushSyncND(self, *args):
            raise RuntimeError('refused')

    from mxnet import base
    monkeypatch.setattr(base, '_LIB', Lib())
    before = dict(host_copy._jobs)
    with pytest.raises(RuntimeError, match='refused'):
        plan.push()
    assert host_copy._jobs == before


def test_the_layout_check_finds_mxnets_functions_at_its_first_use(monkeypatch):
    monkeypatch.setattr(host_copy, '_API', [])
    assert host_copy.in_mxnet_layout(nd.zeros(3)) is False
    from mxnet.base import _LIB
    assert host_copy._API == [_LIB.MXNDArrayToDLPack, _LIB.MXNDArrayCallDLPackDeleter]
    assert host_copy.in_mxnet_layout(nd.zeros((2, 2))) is False
