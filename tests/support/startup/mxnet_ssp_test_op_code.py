"""The compiled code of MXNet's operator functions, kept between the processes of the test
run (``TESTS_MXNET_OP_CODE_CACHE``, loaded by this folder's ``sitecustomize``, which the
test jobs find on their PYTHONPATH: tests/conftest.py ``job_env``).  Test speed only: about
1 s of CPU per server or worker of a run bound by CPU.  The functions are MXNet's own
(tests/unit/test_op_code_cache.py); no user process loads this module."""
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
import types

from mxnet_ssp._hooks import when_imported, when_importing

__all__ = ['cache_op_code', 'OpCodeCache', 'op_code_cache_file', 'OP_REGISTER_MODULES',
           'OP_INIT_FUNCTIONS']

#: The modules whose functions build MXNet's operator functions at import: for each of about
#: 2,500 operators (mx.nd, mx.sym, mx.np, mx.npx and their internal modules) they generate the
#: function's source text and compile it with ``exec(code, None, local)``.
OP_REGISTER_MODULES = ('mxnet.ndarray.register', 'mxnet.symbol.register')
# The one part of that text that differs between processes: the operator's handle, an address
# in libmxnet.so, written as a number into the call the function makes.
_OP_HANDLE = re.compile(r'\b(_imperative_invoke|_symbol_creator)\((\d+),')
#: MXNet's functions (in mxnet.base) that make each operator module's functions, calling
#: ``make_op_func(handle, name, func_name)`` once per function; that call first generates the
#: function's text from the operator's description in libmxnet.so (ctypes calls and string
#: building, about a third of the time the functions take), then executes it
OP_INIT_FUNCTIONS = ('_init_op_module', '_init_np_op_module')
_CACHE_FORMAT = 3


def op_code_cache_file(directory):
    """The file in `directory` that holds the compiled code for this Python (marshal's format
    and the bytecode change with it)."""
    tag = '%s-%s' % (sys.implementation.cache_tag, importlib.util.MAGIC_NUMBER.hex())
    return os.path.join(directory, 'mxnet-op-code-%s-v%d.marshal' % (tag, _CACHE_FORMAT))


def build_of(base):
    """What identifies the MXNet that generates the operator functions' texts, from its
    module `base` (``mxnet.base``): its version, and the path, size and modification time
    (as a .pyc file is checked) of libmxnet.so, whose operator descriptions the texts are
    made from, and of the Python files that make them (the register modules, the docs'
    builders ndarray_doc.py and symbol_doc.py, base.py, libinfo.py).  None when one cannot
    be read."""
    here = os.path.dirname(getattr(base, '__file__', None) or '')
    paths = (getattr(getattr(base, '_LIB', None), '_name', None), getattr(base, '__file__', None),
             os.path.join(here, 'libinfo.py'), os.path.join(here, 'ndarray_doc.py'),
             os.path.join(here, 'symbol_doc.py'), os.path.join(here, 'ndarray', 'register.py'),
             os.path.join(here, 'symbol', 'register.py'))
    parts = [str(getattr(base, '__version__', None))]
    for path in paths:
        try:
            info = os.stat(path)
        except (OSError, TypeError, ValueError):
            return None
        parts.append('%s:%d:%d' % (path, info.st_size, info.st_mtime_ns))
    return '|'.join(parts)


def _handle_paths(code, standin, path=()):
    """Where the constant `standin` is in `code` and the code in it: index paths into the
    constants."""
    for i, const in enumerate(code.co_consts):
        if isinstance(const, types.CodeType):
            yield from _handle_paths(const, standin, path + (i,))
        elif type(const) is int and const == standin:
            yield path + (i,)


def _put_handle(code, path, standin, handle):
    """`code` with `handle` for the constant `standin` at `path` (one of :func:`_handle_paths`);
    None when that constant is not there."""
    consts = code.co_consts
    i = path[0]
    if i >= len(consts):
        return None
    if len(path) == 1:
        if not (type(consts[i]) is int and consts[i] == standin):
            return None
        const = handle
    elif isinstance(consts[i], types.CodeType):
        const = _put_handle(consts[i], path[1:], standin, handle)
        if const is None:
            return None
    else:
        return None
    return code.replace(co_consts=consts[:i] + (const,) + consts[i + 1:])


def _valid_op(entry):
    """An operator entry: (code, doc, stand-in or None, module, text key, path or None)."""
    return (isinstance(entry, tuple) and len(entry) == 6
            and isinstance(entry[0], types.CodeType)
            and (entry[1] is None or isinstance(entry[1], str))
            and (entry[2] is None or type(entry[2]) is int)
            and isinstance(entry[3], str) and isinstance(entry[4], bytes)
            and (entry[5] is None) == (entry[2] is None)
            and (entry[5] is None or (isinstance(entry[5], tuple) and len(entry[5]) > 0
                                      and all(type(i) is int and i >= 0 for i in entry[5]))))


class OpCodeCache:
    """Compiles the source texts MXNet's operator modules execute, from a file of their
    compiled code when it has them (:func:`cache_op_code`).

    A text is looked up by the SHA-256 of its words with the operator's handle replaced by a
    stand-in (the handle is an address that differs between processes); the code kept for it
    gets this process's handle back in its constants, so each function is the one
    ``compile`` would have made of the text.  Texts are the keys: a cache written by another
    MXNet never gives a function for a text it does not hold.

    Generating the texts costs time too.  So the file also keeps, per operator function
    (the module making it, the operator's and the function's names), the code its text
    compiled to, its doc and module: for the same MXNet (:func:`build_of`: the same
    libmxnet.so and the same Python files generating the texts) the function is made from
    them without generating the text, as :meth:`make_function` describes.
    """

    def __init__(self, directory):
        self.directory = directory
        self.path = op_code_cache_file(directory)
        self.kept, self.kept_build, self.kept_ops = self._load()
        self.used = {}          # what this process needed: the next file holds just that
        self.used_ops = {}
        self.hits = self.compiled = 0
        self.made = 0           # functions made from kept operator entries, with no text
        self.saved = False
        self.active = True      # until MXNet's import has made its operator functions
        self.build = None       # build_of(mxnet.base), once it is imported
        self.inits = {}         # MXNet's own OP_INIT_FUNCTIONS, name -> (function, ours)
        self._texts = None      # while MXNet makes one function: what its texts compiled to

    def _load(self):
        """The file's texts, build and operator entries, or nothing when it is missing,
        unreadable, not this user's own or writable by others (its code would run here, as a
        .pyc file's does)."""
        nothing = {}, None, {}
        try:
            with open(self.path, 'rb') as f:
                info = os.fstat(f.fileno())
                if info.st_uid != os.geteuid() or info.st_mode & 0o022:
                    return nothing
                kept = marshal.load(f)
        except (OSError, EOFError, ValueError, TypeError):
            return nothing
        if not isinstance(kept, dict) or not isinstance(kept.get('texts'), dict):
            return nothing
        texts = {k: v for k, v in kept['texts'].items()
                 if isinstance(k, bytes) and isinstance(v, types.CodeType)}
        build, ops = kept.get('build'), kept.get('ops')
        if not isinstance(build, str) or not isinstance(ops, dict):
            return texts, None, {}
        return texts, build, {k: v for k, v in ops.items()
                              if isinstance(k, str) and _valid_op(v)}

    def code_for(self, source):
        """The code object of `source`, a text of MXNet's operator modules."""
        found = _OP_HANDLE.findall(source)
        # what stands for the handle in the kept code: a number of as many digits (the code
        # records the columns of what follows it); a text that holds it as well is kept whole
        standin = '7' * len(found[0][1]) if len(found) == 1 else None
        if standin is not None and standin not in source:
            handle = int(found[0][1])
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
        paths = [] if handle is None else list(_handle_paths(code, int(standin)))
        if self._texts is not None:
            # reusable for the operator without its text where the handle, if any, was swapped
            self._texts.append((text, code, None if handle is None else int(standin), key, paths)
                               if handle is not None or not found else None)
        for path in paths:
            code = _put_handle(code, path, int(standin), handle)
        return code

    def exec(self, source, globals=None, locals=None):
        """``exec`` as MXNet's operator modules call it (their own globals when `globals` is
        None), with `source` compiled by :meth:`code_for`."""
        if globals is None:
            frame = sys._getframe(1)
            globals = frame.f_globals
            if locals is None:
                locals = frame.f_locals
        if isinstance(source, str):
            source = self.code_for(source)
        return exec(source, globals, locals)

    def make_function(self, make_op_func, handle, name, func_name):
        """``make_op_func(handle, name, func_name)``, one of MXNet's operator functions.

        With an entry kept for it by the same MXNet, the function is made from the entry:
        the kept code with this process's handle (when it has as many digits as the one the
        code was kept with: the code records columns), executed in `make_op_func`'s globals
        as MXNet executes the text, then given the name, doc and module MXNet gives it.
        Otherwise MXNet makes it, and the entry is kept when its text compiled to one code
        holding the handle at most once (:meth:`code_for`)."""
        value = getattr(handle, 'value', handle)
        key = '%s %s %s' % (getattr(make_op_func, '__module__', None), name, func_name)
        entry = self.kept_ops.get(key)
        if entry is not None:
            try:
                function = self._function(entry, value, make_op_func.__globals__, func_name)
            except Exception:      # noqa: BLE001  (kept code that does not run: MXNet's way)
                function = None
            if function is not None:
                self.made += 1
                self.used_ops[key] = entry
                self.used[entry[4]] = entry[0]
                return function
        self._texts = []
        try:
            function = make_op_func(handle, name, func_name)
        finally:
            texts, self._texts = self._texts, None
        self._remember(key, function, value, texts)
        return function

    @staticmethod
    def _function(entry, handle, globals, func_name):
        code, doc, standin, module, _, path = entry
        if standin is not None:
            if type(handle) is not int or len(str(handle)) != len(str(standin)):
                return None
            code = _put_handle(code, path, standin, handle)
            if code is None:
                return None
        local = {}
        exec(code, globals, local)
        function = local.get(func_name)
        if not isinstance(function, types.FunctionType):
            return None
        function.__name__ = func_name
        function.__doc__ = doc
        function.__module__ = module
        return function

    def _remember(self, key, function, handle, texts):
        """Keep an entry for `function`, made by MXNet from the one text in `texts`
        (:meth:`code_for`'s record of each text it compiled meanwhile)."""
        if len(texts) != 1 or texts[0] is None or not isinstance(function, types.FunctionType):
            return
        text, code, standin, text_key, paths = texts[0]
        if (str(handle) in text or function.__code__.co_filename != '<string>'
                or function.__closure__ or function.__dict__):
            return          # the handle written another way, or more than the text made
        path = None
        if standin is not None:
            if len(paths) != 1:
                return      # the stand-in's value is a constant of the text's own as well
            path = paths[0]
        self.used_ops[key] = (code, function.__doc__, standin, function.__module__, text_key,
                              path)

    def for_build(self, build):
        """Make functions for the MXNet `build` (:func:`build_of`): the kept operator entries
        serve only the build that wrote them.  False when `build` is None (unknown)."""
        self.build = build
        if build is None or build != self.kept_build:
            self.kept_ops = {}
        return build is not None

    def _wrap_inits(self):
        """Once ``mxnet.base`` is imported: MXNet's OP_INIT_FUNCTIONS make each function with
        :meth:`make_function` (the register modules take them from mxnet.base as they
        import)."""
        base = sys.modules.get('mxnet.base')
        if base is None or not self.active or self.inits:
            return
        if not self.for_build(build_of(base)):
            return
        for name in OP_INIT_FUNCTIONS:
            original = getattr(base, name, None)
            code = getattr(original, '__code__', None)
            if code is None or 'make_op_func' not in code.co_varnames[:code.co_argcount]:
                continue
            ours = self._init_with(original, code.co_varnames.index('make_op_func'))
            self.inits[name] = original, ours
            setattr(base, name, ours)

    def _init_with(self, original, position):
        cache = self

        def init_op_module(*args, **kwargs):
            def make(handle, name, func_name):
                if not cache.active:
                    return make_op_func(handle, name, func_name)
                return cache.make_function(make_op_func, handle, name, func_name)
            if 'make_op_func' in kwargs:
                make_op_func = kwargs['make_op_func']
                kwargs['make_op_func'] = make
            elif len(args) > position:
                make_op_func = args[position]
                args = args[:position] + (make,) + args[position + 1:]
            return original(*args, **kwargs)

        init_op_module.__wrapped__ = original
        return init_op_module

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
        ``sys.meta_path``, inert (importlib may be going through that list).  Called twice in
        a worker (see :func:`cache_op_code`); the second call finds it done."""
        if not self.active:
            return
        self.active = False
        for name in OP_REGISTER_MODULES:
            module = sys.modules.get(name)
            if module is not None and module.__dict__.get('exec') == self.exec:
                del module.__dict__['exec']
        for name, (original, ours) in self.inits.items():
            # mxnet.base and every module that took ours from it (mxnet.library among them)
            for module_name, module in list(sys.modules.items()):
                if module_name.split('.')[0] == 'mxnet' and \
                        getattr(module, '__dict__', {}).get(name) is ours:
                    setattr(module, name, original)
        new_ops = any(self.kept_ops.get(k) is not v for k, v in self.used_ops.items())
        if self.compiled or new_ops:
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
                marshal.dump({'texts': self.used, 'build': self.build,
                              'ops': self.used_ops if self.build is not None else {}}, f)
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

    MXNet 1.9.1 generates and compiles about 2,500 functions at every ``import mxnet``:
    about 1 s of CPU here, the larger part of a lean import.  After this call (before MXNet
    is imported) the first process compiles them and writes their code, and what makes each
    operator's function without its text, to a file in `directory` (created with mode 0700;
    the file is the user's own, 0600), and the next ones load it.  The functions are the
    ones MXNet makes; its modules are left as they are once its import has made them.
    ``TESTS_MXNET_OP_CODE_CACHE`` sets the directory for a job's servers and workers
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
        when_imported('mxnet.base', _op_code_cache._wrap_inits)
        when_importing('mxnet.kvstore.kvstore_server', _op_code_cache.done)
        when_imported('mxnet', _op_code_cache.done)
    return _op_code_cache
