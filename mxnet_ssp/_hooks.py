"""Run code right after a module finishes importing, without importing it first."""
import importlib.util
import sys

__all__ = ['when_imported']


class _AfterImport:
    """Meta-path finder: wraps the loader of `name` so `callback` runs after it."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        exec_module = spec.loader.exec_module
        callback = self.callback

        def exec_then_callback(module):
            exec_module(module)
            callback()

        spec.loader.exec_module = exec_then_callback
        return spec


def when_imported(name, callback):
    """Call `callback()` once module `name` is imported: now if it already is.

    In MXNet's scheduler and server processes ``import mxnet`` never returns
    (the server loop runs inside it); the callback then never runs from the
    hook, but runs at once for code imported while the loop is running,
    because ``mxnet`` is already in ``sys.modules``.
    """
    if name in sys.modules:
        callback()
        return
    if not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))
