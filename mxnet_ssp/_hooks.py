"""Import hooks: run code right after a module finishes importing; skip MXNet's optional imports;
keep the compiled code of MXNet's operator functions between processes."""
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
import types

__all__ = ['when_imported', 'when_importing', 'when_done_importing', 'module_done',
           'skip_optional_mxnet_imports', 'cache_op_code', 'OpCodeCache', 'op_code_cache_file']


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
# unguarded by mxnet.gluon.utils: it has to load.)
OPTIONAL_MXNET_IMPORTS = frozenset([('mxnet.model', 'sklearn'), ('mxnet.ndarray.sparse', 'scipy'),
                                    ('mxnet.ndarray.utils', 'scipy'), ('mxnet.test_utils', 'scipy'),
                                    ('mxnet.contrib.quantization', 'scipy')])


def _importer(frame):
    """The module whose code runs the import statement: the first frame outside importlib."""
    while frame is not None and frame.f_code.co_filename.startswith('<frozen importlib'):
        frame = frame.f_back
    return None if frame is None else frame.f_globals.get('__name__')


class _SkipOptionalMxnetImports:
    """Meta-path finder: the imports in OPTIONAL_MXNET_IMPORTS fail; any other is untouched."""

    names = frozenset(name for _, name in OPTIONAL_MXNET_IMPORTS)

    def find_spec(self, name, path=None, target=None):
        if name not in self.names:
            return None
        if (_importer(sys._getframe(1)), name) not in OPTIONAL_MXNET_IMPORTS:
            return None
        raise ModuleNotFoundError('mxnet-ssp: %s is not loaded for MXNet in this process' % name,
                                  name=name)


def skip_optional_mxnet_imports():
    """Let ``import mxnet`` run without scikit-learn and SciPy (about a second of CPU).

    MXNet 1.9.1 imports both where installed, each in a ``try``, for features
    a parameter server never uses (OPTIONAL_MXNET_IMPORTS).  With scikit-learn
    installed, which brings SciPy and pandas, they are over a third of
    ``import mxnet``: 3.1 s -> 1.9 s of CPU here (median of 8).  After this
    call those imports, made by those MXNet modules, fail as if the package
    were missing, and MXNet goes on without the feature.  The same packages
    imported by anything else, before or after, load as usual.  Used where no
    code of the user's runs after ``import mxnet``: scheduler and server
    processes (``mxnet_ssp_autoload``), and every process of mxnet-ssp's own
    training script.
    """
    if 'mxnet' in sys.modules:
        return
    if not any(isinstance(f, _SkipOptionalMxnetImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _SkipOptionalMxnetImports())


# ---------------------------------------------------------------------------------------------
# The compiled code of MXNet's operator functions, kept between processes
# ---------------------------------------------------------------------------------------------
#: The modules whose functions build MXNet's operator functions at import: for each of about
#: 2,500 operators (mx.nd, mx.sym, mx.np, mx.npx and their internal modules) they generate the
#: function's source text and compile it with ``exec(code, None, local)``.
OP_REGISTER_MODULES = ('mxnet.ndarray.register', 'mxnet.symbol.register')
# The one part of that text that differs between processes: the operator's handle, an address
# in libmxnet.so, written as a number into the call the function makes.
_OP_HANDLE = re.compile(r'\b(_imperative_invoke|_symbol_creator)\((\d+),')
# What stands for the handle in the kept code: a number of as many digits (the code records
# the columns of what follows it); a text that holds that number as well is compiled as is.
def _standin(digits):
    return '7' * len(digits)


_CACHE_FORMAT = 1


def op_code_cache_file(directory):
    """The file in `directory` that holds the compiled code for this Python (marshal's format
    and the bytecode change with it)."""
    tag = '%s-%s' % (sys.implementation.cache_tag, importlib.util.MAGIC_NUMBER.hex())
    return os.path.join(directory, 'mxnet-op-code-%s-v%d.marshal' % (tag, _CACHE_FORMAT))


def _with_handle(code, standin, handle):
    consts = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            const = _with_handle(const, standin, handle)
        elif type(const) is int and const == standin:
            const = handle
        consts.append(const)
    return code.replace(co_consts=tuple(consts))


class OpCodeCache:
    """Compiles the source texts MXNet's operator modules execute, from a file of their
    compiled code when it has them (:func:`cache_op_code`).

    A text is looked up by the SHA-256 of its words with the operator's handle replaced by a
    stand-in (the handle is an address that differs between processes); the code kept for it
    gets this process's handle back in its constants, so each function is the one
    ``compile`` would have made of the text.  Texts are the keys: a cache written by another
    MXNet never gives a function for a text it does not hold.
    """

    def __init__(self, directory):
        self.directory = directory
        self.path = op_code_cache_file(directory)
        self.kept = self._load()
        self.used = {}          # what this process needed: the next file holds just that
        self.hits = self.compiled = 0
        self.saved = False
        self.active = True      # until MXNet's import has made its operator functions

    def _load(self):
        """The file's code, or nothing when it is missing, unreadable, not this user's own or
        writable by others (its code would run here, as a .pyc file's does)."""
        try:
            with open(self.path, 'rb') as f:
                info = os.fstat(f.fileno())
                if info.st_uid != os.geteuid() or info.st_mode & 0o022:
                    return {}
                kept = marshal.load(f)
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if not isinstance(kept, dict):
            return {}
        return {k: v for k, v in kept.items()
                if isinstance(k, bytes) and isinstance(v, types.CodeType)}

    def code_for(self, source):
        """The code object of `source`, a text of MXNet's operator modules."""
        found = _OP_HANDLE.findall(source)
        if len(found) == 1 and _standin(found[0][1]) not in source:
            handle, standin = int(found[0][1]), _standin(found[0][1])
            text = _OP_HANDLE.sub(r'\g<1>(%s,' % standin, source)
        else:
            handle, text = None, source
        key = hashlib.sha256(text.encode('utf-8')).digest()
        code = self.kept.get(key)
        if code is None:
            code = compile(text, '<string>', 'exec')
            self.compiled += 1
        else:
            self.hits += 1
        self.used[key] = code
        return code if handle is None else _with_handle(code, int(standin), handle)

    def exec(self, source, globals=None, locals=None):
        """``exec`` as MXNet's operator modules call it (their own globals when `globals` is
        None), with `source` compiled by :meth:`compile`."""
        if globals is None:
            frame = sys._getframe(1)
            globals = frame.f_globals
            if locals is None:
                locals = frame.f_locals
        if isinstance(source, str):
            source = self.code_for(source)
        return exec(source, globals, locals)

    def find_spec(self, name, path=None, target=None):
        """Meta-path finder: the operator modules run with :meth:`exec` as their ``exec``."""
        if not self.active or name not in OP_REGISTER_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return None
        exec_module, cached_exec = spec.loader.exec_module, self.exec

        def exec_with_cache(module):
            module.__dict__['exec'] = cached_exec
            exec_module(module)

        spec.loader.exec_module = exec_with_cache
        return spec

    def done(self):
        """MXNet's operator functions are all made: leave its modules as stock MXNet has them
        and write the file when this process compiled something.  The finder stays in
        ``sys.meta_path``, inert (importlib may be going through that list)."""
        self.active = False
        for name in OP_REGISTER_MODULES:
            module = sys.modules.get(name)
            if module is not None and module.__dict__.get('exec') == self.exec:
                del module.__dict__['exec']
        if self.compiled and not self.saved:
            self.saved = self._save()

    def _save(self):
        import tempfile
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix='.mxnet-op-code-', dir=self.directory)
        except OSError:
            return False
        try:
            with os.fdopen(fd, 'wb') as f:
                marshal.dump(self.used, f)
            os.replace(tmp, self.path)     # whole or not at all, for the processes reading it
            return True
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False


_op_code_cache = None


def cache_op_code(directory):
    """Let ``import mxnet`` take its operator functions' compiled code from `directory`.

    MXNet 1.9.1 compiles about 2,500 generated functions at every ``import mxnet``: about
    0.6 s of CPU here, a third of the import.  After this call (before MXNet is imported) the
    first process compiles them and writes their code to a file in `directory` (created with
    mode 0700; the file is the user's own, 0600), and the next ones load it.  The functions
    are the ones MXNet makes; its modules are left as they are once its import has made them.
    ``MXNET_SSP_OP_CODE_CACHE`` sets the directory for a job's servers and workers
    (``mxnet_ssp_autoload``).  Returns the cache (None when MXNet is already imported).
    """
    global _op_code_cache
    if 'mxnet' in sys.modules:
        return None
    if _op_code_cache is None:
        _op_code_cache = OpCodeCache(directory)
        sys.meta_path.insert(0, _op_code_cache)
        # before a server's loop starts inside ``import mxnet`` (kvstore_server runs it as it
        # is imported, after every operator module), and once a worker's import is done
        when_importing('mxnet.kvstore.kvstore_server', _op_code_cache.done)
        when_imported('mxnet', _op_code_cache.done)
    return _op_code_cache
