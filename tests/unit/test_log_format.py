"""mxnet-ssp's own lines in a job: ``mxnet-ssp: <role>[<rank>] <message>`` (mxnet_ssp._log)."""
import logging

import pytest

from mxnet_ssp import _log


def line(role, message, level=logging.INFO):
    record = logging.LogRecord('mxnet_ssp.x', level, __file__, 1, message, (), None)
    return _log.LineFormat(role).format(record)


@pytest.mark.parametrize('role,message,expected', [
    ('worker', 'worker[2] dist_ssp summary: 5 iterations',
     'mxnet-ssp: worker[2] dist_ssp summary: 5 iterations'),
    ('server', 'server: 4 arrays in 1 bucket', 'mxnet-ssp: server[?]: 4 arrays in 1 bucket'),
    ('scheduler', 'mxnet-ssp: this scheduler follows its 3 ps-lite connection(s)',
     'mxnet-ssp: scheduler[0] this scheduler follows its 3 ps-lite connection(s)'),
    ('worker', 'connected', 'mxnet-ssp: worker[?] connected'),
])
def test_one_format_whoever_logs(role, message, expected):
    assert line(role, message) == expected


def test_warnings_say_so():
    assert line('worker', 'worker[1] slow', logging.WARNING) == \
        'mxnet-ssp: WARNING worker[1] slow'


def test_attach_only_in_a_job():
    assert _log.attach({}) is _log._handler      # outside a job: nothing attached here
    if _log._handler is None:
        assert logging.getLogger('mxnet_ssp').propagate


def test_an_entry_point_that_configures_logging_takes_our_lines_back():
    env = {'DMLC_ROLE': 'worker'}
    ours = logging.getLogger('mxnet_ssp')
    before = (_log._handler, ours.propagate, list(ours.handlers), ours.level)
    try:
        _log.detach()
        handler = _log.attach(env)
        assert handler in ours.handlers and not ours.propagate
        assert _log.attach(env) is handler                       # once per process
        _log.detach()
        assert handler not in ours.handlers and ours.propagate and _log._handler is None
    finally:
        _log._handler, ours.propagate, ours.handlers[:], ours.level = (
            before[0], before[1], before[2], before[3])
