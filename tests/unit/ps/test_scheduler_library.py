"""The scheduler run from libmxnet.so (mxnet_ssp.server.scheduler): where the library is, the hook's
place among the others at ``import mxnet``, its failures (the job watch seeing its loop:
test_follow.py).

Jobs that use it: tests/integration/test_scheduler_jobs.py."""
import sys
import types

import pytest

from mxnet_ssp import _hooks
from mxnet_ssp.server import scheduler


def test_library_path_is_mxnets_variable_when_it_names_a_file(tmp_path):
    lib = tmp_path / 'libmxnet.so'
    lib.write_bytes(b'')
    assert scheduler.library_path({'MXNET_LIBRARY_PATH': str(lib)}) == str(lib)
    # a variable naming nothing: not guessed past (MXNet's own path then says what is wrong)
    assert scheduler.library_path({'MXNET_LIBRARY_PATH': str(tmp_path / 'no.so')}) is None


def test_library_path_is_the_file_beside_the_mxnet_package(tmp_path, monkeypatch):
    package = tmp_path / 'mxnet'
    package.mkdir()
    spec = types.SimpleNamespace(submodule_search_locations=[str(package)])
    monkeypatch.setattr(scheduler.PathFinder, 'find_spec',
                        lambda name: spec if name == 'mxnet' else None)
    assert scheduler.library_path({}) is None               # a package without the library
    (package / 'libmxnet.so').write_bytes(b'')
    assert scheduler.library_path({}) == str(package / 'libmxnet.so')
    assert scheduler.library_path({'MXNET_LIBRARY_PATH': ''}) == str(package / 'libmxnet.so')


@pytest.mark.parametrize('found', [None, types.SimpleNamespace(submodule_search_locations=None),
                                   ImportError('broken'), ValueError('no spec')])
def test_library_path_without_an_mxnet_package_is_none(monkeypatch, found):
    def find_spec(name):
        if isinstance(found, Exception):
            raise found
        return found
    monkeypatch.setattr(scheduler.PathFinder, 'find_spec', find_spec)
    assert scheduler.library_path({}) is None


def test_library_path_of_the_installed_mxnet_is_its_wheels_library():
    pytest.importorskip('mxnet')
    path = scheduler.library_path({})
    assert path is not None and path.endswith('/mxnet/libmxnet.so')


def test_finding_the_library_does_not_fire_the_hooks_waiting_for_import_mxnet(monkeypatch):
    monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
    calls = []
    # what when_importing('mxnet', ...) puts there in a process that has not imported mxnet
    sys.meta_path.insert(0, _hooks._BeforeImport('mxnet', lambda: calls.append('fired')))
    scheduler.library_path({})
    assert calls == []


def test_a_hook_asked_to_run_last_runs_after_those_before_and_after_it(monkeypatch):
    monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
    calls = []
    _hooks.when_importing('last_probe_mod', lambda: calls.append('first'))
    _hooks.when_importing('last_probe_mod', lambda: calls.append('last'), last=True)
    _hooks.when_importing('last_probe_mod', lambda: calls.append('newest'))
    with pytest.raises(ImportError):
        __import__('last_probe_mod')
    assert calls == ['newest', 'first', 'last']


def test_a_hook_asked_to_run_last_with_no_other_hook_goes_first_in_the_path(monkeypatch):
    monkeypatch.setattr(sys, 'meta_path', [f for f in sys.meta_path
                                           if not isinstance(f, (_hooks._BeforeImport,
                                                                 _hooks._AfterImport,
                                                                 _hooks._SkipOptionalMxnetImports))])
    _hooks.when_importing('last_probe_mod', lambda: None, last=True)
    assert isinstance(sys.meta_path[0], _hooks._BeforeImport)


def test_serve_at_import_arranges_nothing_without_a_library(monkeypatch):
    monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
    before = list(sys.meta_path)
    monkeypatch.setattr(scheduler, 'library_path', lambda environ=None: None)
    assert scheduler.serve_at_import({}) is False
    assert sys.meta_path == before


def test_serve_at_import_serves_when_the_import_begins_and_exits(monkeypatch):
    monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
    monkeypatch.setattr(scheduler, 'library_path', lambda environ=None: '/lib/x.so')
    served = []
    monkeypatch.setattr(scheduler, 'serve', served.append)
    monkeypatch.setattr(scheduler, 'when_importing',
                        lambda name, callback, last: served.append((name, last)) or callback())
    with pytest.raises(SystemExit) as exc:
        scheduler.serve_at_import({})
    assert served == [('mxnet', True), '/lib/x.so']
    assert exc.value.code is None                     # sys.exit(), as MXNet's package ends


def test_a_failed_call_ends_the_scheduler_with_status_1_and_mxnets_message(monkeypatch, capsys):
    def serve(path):
        raise scheduler.SchedulerError('MXKVStoreRunServer failed: Check notnull: DMLC_NUM_WORKER')
    monkeypatch.setattr(scheduler, 'serve', serve)
    with pytest.raises(SystemExit) as exc:
        scheduler._serve_and_exit('/lib/x.so')
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith('mxnet-ssp: scheduler (pid ')
    assert 'MXKVStoreRunServer failed: Check notnull: DMLC_NUM_WORKER' in err


class _Lib:
    def __init__(self, message):
        self.message = message

    def MXGetLastError(self):
        return self.message


def test_check_passes_status_0_and_names_the_call_and_mxnets_message_otherwise():
    scheduler._check(_Lib(b'unused'), 0, 'MXKVStoreCreate("dist")')
    with pytest.raises(scheduler.SchedulerError,
                       match=r'^MXKVStoreCreate\("dist"\) failed: bad \ufffd$'):
        scheduler._check(_Lib(b'bad \xff'), -1, 'MXKVStoreCreate("dist")')
    with pytest.raises(scheduler.SchedulerError, match=r'^MXKVStoreRunServer failed: no message$'):
        scheduler._check(_Lib(None), -1, 'MXKVStoreRunServer')


def test_the_controller_ignores_commands():
    assert scheduler._ignore_command(0, b'anything', None) is None
