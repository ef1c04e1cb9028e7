"""The compiled code of MXNet's operator functions, kept between processes
(``MXNET_SSP_OP_CODE_CACHE``; imported by the start-up hook only where that is set)."""
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
import types

from ._hooks import when_imported, when_importing

__all__ = ['cache_op_code', 'OpCodeCache', 'op_code_cache_file', 'OP_REGISTER_MODULES']

#: The modules whose functions build MXNet's operator functions at import: for each of about
#: 2,500 operators (mx.nd, mx.sym, mx.np, mx.npx and their internal modules) they generate the
#: function's source text and compile it with ``exec(code, None, local)``.
OP_REGISTER_MODULES = ('mxnet.ndarray.register', 'mxnet.symbol.register')
# The one part of that text that differs between processes: the operator's handle, an address
# in libmxnet.so, written as a number into the call the function makes.
_OP_HANDLE = re.compile(r'\b(_imperative_invoke|_symbol_creator)\((\d+),')
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
        return code if handle is None else _with_handle(code, int(standin), handle)

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
        if self.compiled:
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
