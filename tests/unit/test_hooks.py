"""Import hooks: skip_optional_mxnet_imports, and where the start-up hook uses it; when_done_importing."""
import sys
import types

import pytest

from tests.conftest import INSTALL_TEST, python_c, require_autoload_hook

pytestmark = pytest.mark.need(module='sklearn', install=INSTALL_TEST)

FINDER = '_SkipOptionalMxnetImports'


def _python(code, **env):
    return python_c(code, env)


def test_mxnet_imports_without_sklearn_and_scipy_which_still_import_afterwards():
    out = _python(
        'import sys\n'
        'from mxnet_ssp._hooks import skip_optional_mxnet_imports\n'
        'skip_optional_mxnet_imports()\n'
        'import mxnet\n'
        'print("loaded", sorted(m for m in ("sklearn", "scipy", "pandas", "cv2", "setuptools",\n'
        '                                   "pkg_resources") if m in sys.modules))\n'
        'print("without", mxnet.model.BASE_ESTIMATOR is object, mxnet.ndarray.sparse.spsp,\n'
        '      mxnet.recordio.cv2, mxnet.image.image.cv2)\n'
        'import sysconfig\n'
        'StrictVersion = mxnet.numpy_op_fallback.StrictVersion\n'
        'print("distutils from the standard library", StrictVersion.__init__.__code__\n'
        '      .co_filename.startswith(sysconfig.get_paths()["stdlib"]))\n'
        'print("compares", StrictVersion("1.23.5") >= StrictVersion("1.6.0"))\n'
        'from sklearn.base import BaseEstimator\n'
        'import scipy.sparse, cv2\n'
        'print("after", BaseEstimator.__module__, scipy.sparse.__name__, cv2.__name__)\n',
        PYTHONWARNINGS='default')
    assert 'loaded []' in out
    assert 'without True None None None' in out
    assert 'distutils from the standard library True' in out and 'compares True' in out
    assert 'after sklearn.base scipy.sparse cv2' in out
    # Python's warning that distutils is deprecated is not shown for MXNet's import
    assert 'distutils package is deprecated' not in out, out


def test_a_later_import_of_setuptools_finds_no_distutils_of_the_lean_import():
    """The standard library's distutils loaded for MXNet's import leaves sys.modules once
    MXNet is imported: setuptools, imported after, warns of nothing (warnings are errors
    here) and distutils is then what it is without mxnet-ssp."""
    out = _python(
        'import sys, warnings\n'
        'from mxnet_ssp._hooks import skip_optional_mxnet_imports\n'
        'skip_optional_mxnet_imports()\n'
        'import mxnet\n'
        'print("left", sorted(m for m in sys.modules if m.split(".")[0] == "distutils"))\n'
        'shim = any(type(f).__module__ == "_distutils_hack" for f in sys.meta_path)\n'
        'warnings.simplefilter("error")\n'
        'import setuptools, distutils\n'
        'print("setuptools distutils", "setuptools" in distutils.__file__ or not shim)\n'
        'op = mxnet.numpy_op_fallback.EmptyLike("float32", "C", True, None)\n'
        'print("compares", mxnet.numpy_op_fallback.StrictVersion("1.23.5") >= "1.6.0")\n')
    assert 'left []' in out and 'setuptools distutils True' in out, out
    assert 'compares True' in out, out


@pytest.mark.slow        # a whole import mxnet with scikit-learn, for a cached module
def test_mxnet_keeps_sklearn_imported_before_it():
    out = _python(
        'import sklearn.base\n'
        'from mxnet_ssp._hooks import skip_optional_mxnet_imports\n'
        'skip_optional_mxnet_imports()\n'
        'import mxnet\n'
        'print("base", mxnet.model.BASE_ESTIMATOR is sklearn.base.BaseEstimator)\n')
    assert 'base True' in out


@pytest.mark.parametrize('role,autoload,lean,installed,at_import', [
    ('server', None, None, 1, ['follow_job']),
    ('scheduler', None, None, 1, ['follow_job', 'serve_at_import']),
    ('scheduler', '0', None, 0, []), ('server', '0', None, 0, []), ('worker', None, None, 0, []),
    ('worker', None, 'Yes', 1, []), ('worker', None, 'off', 0, []), ('worker', '0', '1', 0, []),
    (None, None, '1', 0, [])])
def test_the_start_up_hook_skips_them_in_server_and_scheduler_processes_and_lean_workers(
        role, autoload, lean, installed, at_import):
    """No mxnet is imported here: with DMLC_ROLE=server that would start a server.  A worker
    skips them only with MXNET_SSP_LEAN_WORKERS on (it imports MXNet as stock otherwise)."""
    require_autoload_hook()
    env = {}
    if role is not None:
        env['DMLC_ROLE'] = role
    if autoload is not None:
        env['MXNET_SSP_AUTOLOAD'] = autoload
    if lean is not None:
        env['MXNET_SSP_LEAN_WORKERS'] = lean
    out = _python('import sys\n'
                  'print("finders", [type(f).__name__ for f in sys.meta_path].count(%r))\n'
                  'print("at import", [f.callback.__qualname__.split(".")[0]\n'
                  '                     for f in sys.meta_path\n'
                  '                     if type(f).__name__ == "_BeforeImport" and f.name == "mxnet"])\n'
                  % FINDER, **env)
    assert 'finders %d' % installed in out
    # and, at import mxnet, in this order: the thread that ends a scheduler or server of a
    # failed job starts; a scheduler then serves from libmxnet.so (and never returns)
    assert 'at import %r' % (at_import,) in out


def test_when_imported_runs_every_callback_of_a_module_once_in_order(tmp_path, monkeypatch):
    from mxnet_ssp import _hooks
    (tmp_path / 'after_probe_mod.py').write_text('VALUE = 1\n')
    monkeypatch.setattr(sys, 'path', [str(tmp_path)] + sys.path)
    monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
    monkeypatch.delitem(sys.modules, 'after_probe_mod', raising=False)
    calls = []

    def first():
        calls.append(('first', sys.modules['after_probe_mod'].VALUE))

    def second():
        calls.append(('second', sys.modules['after_probe_mod'].VALUE))
    _hooks.when_imported('after_probe_mod', first)
    _hooks.when_imported('after_probe_mod', second)
    _hooks.when_imported('after_probe_mod', first)        # asked twice: runs once
    import after_probe_mod  # noqa: F401
    assert calls == [('first', 1), ('second', 1)]
    _hooks.when_imported('after_probe_mod', second)       # imported: runs at once
    assert calls[-1] == ('second', 1) and len(calls) == 3


def test_when_done_importing_waits_for_the_last_module_of_the_chain_that_is_importing(
        tmp_path, monkeypatch):
    """A chain a.py -> b.py (a imports b); the callback asked for from inside b's import runs
    at a's last line, once, not at b's (a is still half done there) and not twice."""
    from mxnet_ssp import _hooks
    calls = []
    monkeypatch.setattr(_hooks, '_waiting', [])
    monkeypatch.setattr(sys, 'path', [str(tmp_path)] + sys.path)
    hooks = 'from mxnet_ssp._hooks import module_done, when_done_importing\n'
    (tmp_path / 'chain_b.py').write_text(
        hooks + 'import chain_calls\n'
        'when_done_importing(("chain_a", "chain_b"), lambda: chain_calls.calls.append('
        '"ran, a has X=%s" % getattr(__import__("chain_a"), "X", None)))\n'
        'chain_calls.calls.append("b done")\nmodule_done(__name__)\n')
    (tmp_path / 'chain_a.py').write_text(
        hooks + 'import chain_calls\nimport chain_b\nX = 1\nchain_calls.calls.append("a done")\n'
        'module_done(__name__)\n')
    module = types.ModuleType('chain_calls')
    module.calls = calls
    monkeypatch.setitem(sys.modules, 'chain_calls', module)
    for name in ('chain_a', 'chain_b'):
        monkeypatch.delitem(sys.modules, name, raising=False)
    __import__('chain_a')
    assert calls == ['b done', 'a done', 'ran, a has X=1']
    assert _hooks._waiting == []


def test_when_done_importing_runs_at_once_when_no_module_of_the_chain_is_importing(monkeypatch):
    from mxnet_ssp import _hooks
    monkeypatch.setattr(_hooks, '_waiting', [])
    calls = []
    _hooks.when_done_importing(('json', 'no_such_module_here'), lambda: calls.append(1))
    _hooks.module_done('json')
    assert calls == [1] and _hooks._waiting == []
