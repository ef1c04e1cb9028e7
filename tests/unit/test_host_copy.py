"""mxnet_ssp.ps.host_copy: copies done by NumPy inside one operation of MXNet's engine, on real
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
from mxnet_ssp.ps import host_copy


def test_mxnet_1_9_1_has_what_the_path_needs():
    assert host_copy.available()
    base = nd.zeros((6, 2))
    other = nd.zeros((6, 2))
    chunk = host_copy.chunk_of(base)
    assert host_copy.chunk_of(base[1:3]) == chunk == host_copy.chunk_of(base.reshape((12,)))
    assert host_copy.chunk_of(other) != chunk


def test_the_path_is_off_when_the_layout_does_not_hold(monkeypatch):
    monkeypatch.setitem(host_copy._state, 'available', None)
    monkeypatch.setattr(host_copy, 'chunk_of', lambda array: id(array))    # every view apart
    assert host_copy.available() is False
    assert host_copy.eligible([nd.zeros(2)]) is False


def test_copies_run_after_pending_writes_and_before_later_reads():
    src = nd.random.uniform(shape=(300, 300))
    big = src * 3                                  # queued: the copy must wait for it
    dst = nd.zeros((2, 300, 300))
    want = (src * 3).asnumpy()
    plan = host_copy.CopyPlan([(host_copy.host_view(dst)[0], host_copy.host_view(big))],
                              [big], [dst], [big])
    big2 = big * 0 + 7                             # writes elsewhere: no effect on the copy
    plan.push()
    after = dst[0] + 1                             # queued after: sees the copy
    np.testing.assert_array_equal(after.asnumpy(), want + 1)
    np.testing.assert_array_equal(dst[1].asnumpy(), np.zeros((300, 300)))
    assert big2.asnumpy()[0, 0] == 7
    assert plan.same([big]) and not plan.same([big2]) and not plan.same([big, big])


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
        from mxnet_ssp.ps import host_copy
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
    assert 'mxnet-ssp: a host copy failed on MXNet\'s engine thread' in capfd.readouterr().err
    good.push()                                    # reported once; the next ones run
    np.testing.assert_array_equal(dst.asnumpy(), [1, 1, 1, 1, 0])
