"""The worker's exit hook (mxnet_ssp.worker.shutdown): a copy into a bucket that failed after the
job's last push, which no later push can report, ends the worker with status 1 and a message."""
import pytest

mx = pytest.importorskip('mxnet')

from mxnet_ssp.worker import shutdown  # noqa: E402
from mxnet_ssp.worker import host_copy  # noqa: E402


class Store:
    rank = 3

    def __init__(self):
        self.calls = []

    def close(self):
        self.calls.append('close')

    def free_native(self):
        self.calls.append('free_native')


@pytest.fixture
def exiting(monkeypatch):
    """_at_exit with fake stores; `died` records what _die was given instead of exiting."""
    died = []
    monkeypatch.setattr(shutdown, '_die', died.append)
    monkeypatch.setattr(shutdown, '_stores', [])
    monkeypatch.setattr(shutdown, '_fatal', None)
    monkeypatch.setattr(host_copy, '_errors', [])
    return died


def test_a_layout_change_after_the_last_push_ends_the_worker_with_a_message(exiting):
    store = Store()
    shutdown._stores.append(store)
    host_copy._errors.append(host_copy.LayoutChanged([7]))
    shutdown._at_exit()
    assert store.calls == ['close', 'free_native']            # the stores are freed first
    assert len(exiting) == 1
    assert exiting[0].startswith("worker[3]: the last step's copies into its buckets: the "
                                 "array for key(s) 7 was in MKL-DNN's own memory layout")
    assert exiting[0].endswith('set MXNET_SSP_HOST_COPIES=0 to copy through MXNet')
    assert shutdown._fatal == exiting[0]
    assert host_copy._errors == []                            # reported once


def test_any_failure_of_a_copy_is_reported_and_a_clean_exit_says_nothing(exiting):
    shutdown._stores.append(Store())
    shutdown._at_exit()
    assert exiting == [] and shutdown._fatal is None
    host_copy._errors.append(ValueError('could not broadcast'))
    assert shutdown.copy_error_left() == (
        "the last step's copies into its buckets: a host copy failed on MXNet's engine "
        "thread: ValueError: could not broadcast")
    assert shutdown.copy_error_left(5) is None                # forgotten once reported


def test_without_host_copies_loaded_there_is_nothing_to_report(monkeypatch):
    import sys
    monkeypatch.delitem(sys.modules, 'mxnet_ssp.worker.host_copy')
    assert shutdown.copy_error_left(0) is None
