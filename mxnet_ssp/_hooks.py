"""Import hooks: run code right after a module finishes importing; skip MXNet's optional imports."""
import importlib.util
import sys

__all__ = ['when_imported', 'when_importing', 'when_done_importing', 'module_done',
           'skip_optional_mxnet_imports', 'forget_stdlib_distutils']


class _AfterImport:
    """Meta-path finder: wraps the loader of `name` so its `callbacks` run after it, in the
    order they came."""

    def __init__(self, name, callback):
        self.name = name
        self.callbacks = [callback]

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        exec_module = spec.loader.exec_module
        callbacks = self.callbacks

        def exec_then_callback(module):
            exec_module(module)
            for callback in callbacks:
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
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            if callback not in finder.callbacks:      # a callback asked for twice runs once
                finder.callbacks.append(callback)
            return
    sys.meta_path.insert(0, _AfterImport(name, callback))


def _importing(names):
    """Those of `names` whose import is under way (their code not all run yet)."""
    return [n for n in names
            if getattr(getattr(sys.modules.get(n), '__spec__', None), '_initializing', False)]


_waiting = []      # (chain, callback) of when_done_importing, until module_done runs them


def when_done_importing(chain, callback):
    """Call `callback()` now, or, if a module named in `chain` is still importing (a module
    whose own imports led here), when the last of them calls :func:`module_done`.

    For code that must import names from those modules: run from inside one of them it
    would meet the module half defined (an ImportError naming a circular import).
    """
    if _importing(chain):
        _waiting.append((chain, callback))
    else:
        callback()


def module_done(name):
    """The last line of each module of a `chain` given to :func:`when_done_importing`."""
    for chain, callback in list(_waiting):
        if not [n for n in _importing(chain) if n != name]:
            _waiting.remove((chain, callback))
            callback()


class _BeforeImport:
    """Meta-path finder: calls `callback` when `name` is first looked for, then finds nothing.

    It stays in ``sys.meta_path`` (inert) once it has fired: importlib iterates the live
    list, and a finder removing itself there would make it skip the next finder.
    """

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback
        self.pending = True

    def find_spec(self, name, path=None, target=None):
        if self.pending and name == self.name:
            self.pending = False
            self.callback()
        return None


def when_importing(name, callback, last=False):
    """Call `callback()` once, when module `name` starts to import: now if it already has.

    Unlike :func:`when_imported` this runs in MXNet's scheduler and server processes
    too, where ``import mxnet`` never returns: the callback runs before any of the
    module's code.  Callbacks for the same import run newest first; with `last` this one
    runs after every hook of this module's already registered (for a callback that does
    not return).
    """
    if name in sys.modules:
        callback()
        return
    hook = _BeforeImport(name, callback)
    if not last:
        sys.meta_path.insert(0, hook)
        return
    ours = (_BeforeImport, _AfterImport, _SkipOptionalMxnetImports)
    after = [i + 1 for i, finder in enumerate(sys.meta_path) if isinstance(finder, ours)]
    sys.meta_path.insert(max(after, default=0), hook)


# (module of MXNet, optional import it tries and goes on without), each in a try/except
# ImportError there, for features a parameter server never uses: mxnet.model imports
# sklearn.base for the deprecated FeedForward's base class; mxnet.ndarray.sparse,
# mxnet.ndarray.utils, mxnet.contrib.quantization and mxnet.test_utils import scipy to convert
# SciPy matrices, to calibrate quantized models and for test helpers.  (requests is imported
# unguarded by mxnet.gluon.utils: it has to load.)  mxnet.image.image and mxnet.recordio
# import OpenCV (cv2, installed with GluonCV) for recordio's unpack_img and pack_img, the
# images of .rec files, which neither a server nor mxnet-ssp's training script reads.
OPTIONAL_MXNET_IMPORTS = frozenset([('mxnet.model', 'sklearn'), ('mxnet.ndarray.sparse', 'scipy'),
                                    ('mxnet.ndarray.utils', 'scipy'), ('mxnet.test_utils', 'scipy'),
                                    ('mxnet.contrib.quantization', 'scipy'),
                                    ('mxnet.image.image', 'cv2'), ('mxnet.recordio', 'cv2')])

# The modules of MXNet that compare NumPy's version with distutils.version at import.  Where
# setuptools is installed (every virtual environment of Python 3.11), its finder makes
# ``import distutils`` load setuptools' own copy, which imports all of setuptools and
# pkg_resources: about 0.3 s of CPU, against 0.02 s for the standard library's distutils,
# whose LooseVersion and StrictVersion compare as the copy's do.
DISTUTILS_IMPORTERS = frozenset(['mxnet.numpy_dispatch_protocol', 'mxnet.numpy_op_fallback'])


def _importer(frame):
    """The module whose code runs the import statement: the first frame outside importlib."""
    while frame is not None and frame.f_code.co_filename.startswith('<frozen importlib'):
        frame = frame.f_back
    return None if frame is None else frame.f_globals.get('__name__')


_stdlib_distutils_dirs = []     # where the distutils loaded for MXNet's import came from


def _stdlib_distutils_spec():
    """The standard library's distutils (None where Python has none, as 3.12), loading
    without Python's warning that it is deprecated."""
    import importlib.machinery
    spec = importlib.machinery.PathFinder.find_spec('distutils')
    if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module') \
            or not spec.submodule_search_locations:
        return None
    exec_module = spec.loader.exec_module

    def exec_quietly(module):
        import warnings
        with warnings.catch_warnings():
            warnings.filterwarnings('ignore', 'The distutils package is deprecated',
                                    DeprecationWarning)
            exec_module(module)
        _stdlib_distutils_dirs.extend(spec.submodule_search_locations)

    spec.loader.exec_module = exec_quietly
    return spec


def forget_stdlib_distutils():
    """Once MXNet is imported: take the standard library's distutils loaded for it out of
    ``sys.modules`` (MXNet keeps the classes it took), so that the process's next
    ``import distutils`` or ``import setuptools`` finds none loaded and goes as without
    mxnet-ssp (setuptools warns when it finds the standard library's loaded)."""
    import os
    dirs = tuple(os.path.join(d, '') for d in _stdlib_distutils_dirs)
    if not dirs:
        return
    for name, module in list(sys.modules.items()):
        if (name == 'distutils' or name.startswith('distutils.')) and \
                (getattr(module, '__file__', None) or '').startswith(dirs):
            del sys.modules[name]
    del _stdlib_distutils_dirs[:]


class _SkipOptionalMxnetImports:
    """Meta-path finder: the imports in OPTIONAL_MXNET_IMPORTS fail, the modules in
    DISTUTILS_IMPORTERS get the standard library's distutils; any other is untouched."""

    names = frozenset(name for _, name in OPTIONAL_MXNET_IMPORTS)

    def find_spec(self, name, path=None, target=None):
        if name == 'distutils':
            if path is None and _importer(sys._getframe(1)) in DISTUTILS_IMPORTERS:
                return _stdlib_distutils_spec()
            return None
        if name not in self.names:
            return None
        if (_importer(sys._getframe(1)), name) not in OPTIONAL_MXNET_IMPORTS:
            return None
        raise ModuleNotFoundError('mxnet-ssp: %s is not loaded for MXNet in this process' % name,
                                  name=name)


def skip_optional_mxnet_imports():
    """Let ``import mxnet`` run without scikit-learn, SciPy, OpenCV and setuptools (about
    1.2 s of CPU).

    MXNet 1.9.1 imports scikit-learn, SciPy and OpenCV where installed, each in a
    ``try``, for features a parameter server never uses (OPTIONAL_MXNET_IMPORTS).
    With scikit-learn installed, which brings SciPy and pandas, they are over a
    third of ``import mxnet``: 3.1 s -> 1.9 s of CPU here (median of 8).  After
    this call those imports, made by those MXNet modules, fail as if the package
    were missing, and MXNet goes on without the feature.  MXNet's version
    comparisons take the standard library's distutils instead of setuptools'
    copy, out of ``sys.modules`` again once MXNet is imported
    (DISTUTILS_IMPORTERS; 1.23-1.39 s -> 1.02-1.12 s of CPU for a lean
    import with MXNET_SSP_OP_CODE_CACHE, with OpenCV's share, 3 each, alternated).
    The same packages imported by anything else, before or after, load as usual.  Used where no
    code of the user's runs after ``import mxnet``: scheduler and server
    processes (``mxnet_ssp_autoload``), and every process of mxnet-ssp's own
    training script.
    """
    if 'mxnet' in sys.modules:
        return
    if not any(isinstance(f, _SkipOptionalMxnetImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _SkipOptionalMxnetImports())
        # a server's import never returns: it runs nothing of the user's after it
        when_imported('mxnet', forget_stdlib_distutils)
