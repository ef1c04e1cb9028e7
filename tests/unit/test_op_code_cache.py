"""The test run's operator code cache (TESTS_MXNET_OP_CODE_CACHE, tests/support/startup):
MXNet's operator functions from kept compiled code (mxnet_ssp_test_op_code.cache_op_code) are
the functions MXNet compiles itself, so the test jobs that use it run MXNet's own code."""
import ctypes
import json
import marshal
import os
import stat
import subprocess
import sys
import types

import pytest

from tests.conftest import OP_CODE_CACHE_ENV, ROOT, STARTUP, python_c

sys.path.insert(0, STARTUP)
from mxnet_ssp_test_op_code import OpCodeCache, build_of, op_code_cache_file  # noqa: E402

# the two shapes of text MXNet's operator modules generate, with the handle as a number
NDARRAY_TEXT = ('\ndef relu(data=None, out=None, name=None, **kwargs):\n'
                '    """doc"""\n    ndargs = []\n    keys = list(kwargs.keys())\n'
                '    vals = list(kwargs.values())\n'
                '    return _imperative_invoke(%d, ndargs, keys, vals, out, False, False)')
SYMBOL_TEXT = ('\ndef relu(*data, **kwargs):\n    sym_args = []\n'
               '    return _symbol_creator(%d, sym_args, kwargs, [], [], None, False, False)')


def _consts(code):
    """Every constant of `code` and of the code in it."""
    for const in code.co_consts:
        if hasattr(const, 'co_code'):
            yield from _consts(const)
        else:
            yield const


@pytest.mark.parametrize('text', [NDARRAY_TEXT, SYMBOL_TEXT])
def test_kept_code_gets_each_processs_own_handle(tmp_path, text):
    first = OpCodeCache(str(tmp_path))
    code = first.code_for(text % 94011234567890)
    assert code == compile(text % 94011234567890, '<string>', 'exec')
    assert (first.compiled, first.hits) == (1, 0)
    first.done()
    assert first.saved and stat.S_IMODE(os.stat(first.path).st_mode) == 0o600
    # another process: another address for the same operator, the kept code
    second = OpCodeCache(str(tmp_path))
    code = second.code_for(text % 13991234567890)
    assert (second.compiled, second.hits) == (0, 1)
    assert code == compile(text % 13991234567890, '<string>', 'exec')
    assert 13991234567890 in _consts(code) and 94011234567890 not in _consts(code)
    # a text that differs in anything but the handle is not that code
    assert second.code_for((text % 1399123) + '\n') == \
        compile((text % 1399123) + '\n', '<string>', 'exec')
    assert second.compiled == 1


def test_texts_without_exactly_one_handle_are_kept_whole(tmp_path):
    cache = OpCodeCache(str(tmp_path))
    plain = 'def f(x):\n    return x + 1\n'
    two = (NDARRAY_TEXT % 11111111) + '\n' + (SYMBOL_TEXT % 22222222).replace('relu', 'g')
    standin = (NDARRAY_TEXT % 33333333) + "\nX = 77777777\n"
    for text in (plain, two, standin):
        assert cache.code_for(text) == compile(text, '<string>', 'exec')
    cache.done()
    again = OpCodeCache(str(tmp_path))
    for text in (plain, two, standin):
        assert again.code_for(text) == compile(text, '<string>', 'exec')
    assert (again.hits, again.compiled) == (3, 0)
    # the handle of a text kept whole is not rewritten: another one is another text
    assert again.code_for(two.replace('11111111', '44444444')) == \
        compile(two.replace('11111111', '44444444'), '<string>', 'exec')
    assert again.compiled == 1


@pytest.mark.parametrize('damage', ['truncated', 'not a dict', 'writable by others', 'garbage'])
def test_a_file_it_cannot_trust_or_read_is_not_used_and_is_written_anew(tmp_path, damage):
    text = NDARRAY_TEXT % 1234567890
    cache = OpCodeCache(str(tmp_path))
    cache.code_for(text)
    cache.done()
    path = op_code_cache_file(str(tmp_path))
    if damage == 'truncated':
        data = open(path, 'rb').read()
        open(path, 'wb').write(data[:len(data) // 2])
    elif damage == 'not a dict':
        open(path, 'wb').write(marshal.dumps([1, 2]))
    elif damage == 'writable by others':
        os.chmod(path, 0o666)
    else:
        open(path, 'wb').write(b'\x00garbage' * 10)
    again = OpCodeCache(str(tmp_path))
    assert again.kept == {}
    assert again.code_for(text) == compile(text, '<string>', 'exec') and again.compiled == 1
    again.done()
    assert again.saved and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert OpCodeCache(str(tmp_path)).kept.keys() == again.used.keys()


# A register module as MXNet's are made: `_make` generates a function's text from the
# operator (here: its handle and names) and executes it with the module's `exec`.
FAKE_REGISTER = r'''
generated = []
def _generate(handle, op_name, func_name):
    generated.append(op_name)
    doc = 'the %s operator' % op_name
    text = ('\ndef %s(data=None, out=None, scale=%s, **kwargs):\n    """%s"""\n'
            '    return _imperative_invoke(%d, [data, scale], [], [], out, False, False)'
            % (func_name, SCALE, doc, handle.value))
    return text, doc
def _make(handle, name, func_name):
    code, doc = _generate(handle, name, func_name)
    local = {}
    exec(code, None, local)
    function = local[func_name]
    function.__name__ = func_name
    function.__doc__ = doc
    function.__module__ = 'fake.ndarray'
    return function
'''


def _register(cache, scale='1.5'):
    """A fresh fake register module whose `exec` is `cache`'s, as MXNet's get it."""
    module = types.ModuleType('fake_register')
    module.__dict__.update(exec=cache.exec, SCALE=scale)
    exec(FAKE_REGISTER, module.__dict__)
    return module


def _stock(handle, name, func_name, scale='1.5'):
    """The function the fake module makes with Python's own exec."""
    module = types.ModuleType('fake_register')
    module.SCALE = scale
    exec(FAKE_REGISTER, module.__dict__)
    return module._make(ctypes.c_void_p(handle), name, func_name)


def _same(made, stock):
    assert made.__code__ == stock.__code__
    assert [made.__name__, made.__qualname__, made.__doc__, made.__module__, made.__defaults__,
            made.__kwdefaults__, made.__dict__] == \
        [stock.__name__, stock.__qualname__, stock.__doc__, stock.__module__, stock.__defaults__,
         stock.__kwdefaults__, stock.__dict__]


def test_a_kept_operator_makes_its_function_without_generating_the_text(tmp_path):
    cold = OpCodeCache(str(tmp_path))
    cold.for_build('build 1')
    register = _register(cold)
    made = cold.make_function(register._make, ctypes.c_void_p(94011234567890), '_contrib_x', 'x')
    _same(made, _stock(94011234567890, '_contrib_x', 'x'))
    assert (cold.compiled, cold.made, register.generated) == (1, 0, ['_contrib_x'])
    cold.done()
    assert cold.saved
    # another process of the same MXNet, another address with as many digits
    warm = OpCodeCache(str(tmp_path))
    assert warm.for_build('build 1') and warm.kept_build == 'build 1'
    register = _register(warm)
    made = warm.make_function(register._make, ctypes.c_void_p(13991234567890), '_contrib_x', 'x')
    _same(made, _stock(13991234567890, '_contrib_x', 'x'))
    assert 13991234567890 in _consts(made.__code__)
    assert (warm.compiled, warm.hits, warm.made, register.generated) == (0, 0, 1, [])
    assert made.__globals__ is register.__dict__
    warm.done()
    assert not warm.saved               # nothing new: the file stays as it is
    # the same operator under another function name is another entry
    again = OpCodeCache(str(tmp_path))
    again.for_build('build 1')
    register = _register(again)
    made = again.make_function(register._make, ctypes.c_void_p(13991234567890), '_contrib_x',
                               '_contrib_x')
    _same(made, _stock(13991234567890, '_contrib_x', '_contrib_x'))
    assert register.generated == ['_contrib_x'] and again.made == 0


def test_another_mxnet_or_handle_width_generates_the_text(tmp_path):
    cold = OpCodeCache(str(tmp_path))
    cold.for_build('build 1')
    cold.make_function(_register(cold)._make, ctypes.c_void_p(94011234567890), 'relu', 'relu')
    cold.done()
    # another MXNet: its texts may differ (here a default), so nothing kept serves it
    other = OpCodeCache(str(tmp_path))
    assert other.for_build('build 2') and other.kept_ops == {}
    register = _register(other, scale='2.5')
    made = other.make_function(register._make, ctypes.c_void_p(94011234567890), 'relu', 'relu')
    _same(made, _stock(94011234567890, 'relu', 'relu', scale='2.5'))
    assert made.__defaults__ == (None, None, 2.5) and register.generated == ['relu']
    # an unknown build keeps no entries at all
    unknown = OpCodeCache(str(tmp_path))
    assert not unknown.for_build(None) and unknown.kept_ops == {}
    # the same MXNet, a handle of other width: the kept code's columns would differ
    narrow = OpCodeCache(str(tmp_path))
    narrow.for_build('build 1')
    register = _register(narrow)
    made = narrow.make_function(register._make, ctypes.c_void_p(1234567), 'relu', 'relu')
    _same(made, _stock(1234567, 'relu', 'relu'))
    assert register.generated == ['relu'] and narrow.made == 0


@pytest.mark.parametrize('path', [(0, 99), (0,), (5, 0), (0, 0, 0)])
def test_an_entry_whose_handle_is_not_where_it_says_makes_mxnet_generate_it(tmp_path, path):
    cold = OpCodeCache(str(tmp_path))
    cold.for_build('build 1')
    cold.make_function(_register(cold)._make, ctypes.c_void_p(94011234567890), 'relu', 'relu')
    cold.done()
    (entry,) = cold.used_ops.values()
    assert entry[5] is not None and entry[5] != path
    kept = marshal.loads(open(cold.path, 'rb').read())
    kept['ops'] = {k: v[:5] + (path,) for k, v in kept['ops'].items()}
    with open(cold.path, 'wb') as f:
        marshal.dump(kept, f)
    warm = OpCodeCache(str(tmp_path))
    warm.for_build('build 1')
    assert len(warm.kept_ops) == 1
    register = _register(warm)
    made = warm.make_function(register._make, ctypes.c_void_p(13991234567890), 'relu', 'relu')
    _same(made, _stock(13991234567890, 'relu', 'relu'))
    assert register.generated == ['relu'] and warm.made == 0


def test_kept_code_that_fails_to_run_makes_mxnet_generate_the_function(tmp_path,
                                                                        monkeypatch):
    cold = OpCodeCache(str(tmp_path))
    cold.for_build('build 1')
    cold.make_function(_register(cold)._make, ctypes.c_void_p(94011234567890), 'relu', 'relu')
    cold.done()
    warm = OpCodeCache(str(tmp_path))
    warm.for_build('build 1')

    def fails(*args):
        raise NameError("name '_Null' is not defined")
    monkeypatch.setattr(OpCodeCache, '_function', staticmethod(fails))
    register = _register(warm)
    made = warm.make_function(register._make, ctypes.c_void_p(13991234567890), 'relu', 'relu')
    _same(made, _stock(13991234567890, 'relu', 'relu'))
    assert register.generated == ['relu'] and warm.made == 0


def test_an_operator_whose_text_holds_the_handle_twice_is_not_kept(tmp_path):
    cache = OpCodeCache(str(tmp_path))
    cache.for_build('build 1')
    register = _register(cache, scale='94011234567890')     # the handle in the text again
    made = cache.make_function(register._make, ctypes.c_void_p(94011234567890), 'relu', 'relu')
    _same(made, _stock(94011234567890, 'relu', 'relu', scale='94011234567890'))
    assert cache.used_ops == {} and cache.compiled == 1


def test_the_build_is_the_library_and_the_files_making_the_texts(tmp_path):
    files = {}
    for name in ('libmxnet.so', 'base.py', 'libinfo.py', 'ndarray_doc.py', 'symbol_doc.py',
                 'ndarray/register.py', 'symbol/register.py'):
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(name)
        files[name] = path
    base = types.SimpleNamespace(__file__=str(files['base.py']), __version__='1.9.1',
                                 _LIB=types.SimpleNamespace(_name=str(files['libmxnet.so'])))
    first = build_of(base)
    assert first is not None and first.startswith('1.9.1|') and build_of(base) == first
    for name, path in files.items():
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1000))
        changed = build_of(base)
        assert changed != first, name
        first = changed
    files['symbol/register.py'].unlink()
    assert build_of(base) is None


def test_a_directory_it_cannot_write_leaves_compiling_as_is(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('not a directory')
    cache = OpCodeCache(str(blocker / 'cache'))
    assert cache.code_for('x = 1\n') == compile('x = 1\n', '<string>', 'exec')
    cache.done()
    assert not cache.saved and list(tmp_path.iterdir()) == [blocker]


# Each generated function of MXNet (the functions whose code comes from '<string>', in every
# module of mxnet), as a digest of its code, doc and defaults, with each operator's handle
# (an address that differs between processes) written as the operator's name.
DIGESTS = r'''
import ctypes, hashlib, json, sys, time, types
start = time.process_time()
if len(sys.argv) > 1:
    from mxnet_ssp_test_op_code import cache_op_code
    cache = cache_op_code(sys.argv[1])
import mxnet
cpu = time.process_time() - start
from mxnet.base import _LIB, OpHandle, c_str, check_call, py_str
size, names = ctypes.c_uint(), ctypes.POINTER(ctypes.c_char_p)()
check_call(_LIB.MXListAllOpNames(ctypes.byref(size), ctypes.byref(names)))
ops = {}
for i in range(size.value):
    handle = OpHandle()
    check_call(_LIB.NNGetOpHandle(c_str(py_str(names[i])), ctypes.byref(handle)))
    ops[handle.value] = py_str(names[i])

def canon(code):
    consts = tuple(canon(c) if isinstance(c, types.CodeType) else
                   ('op', ops[c]) if type(c) is int and c in ops else repr(c)
                   for c in code.co_consts)
    return repr((code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars,
                 code.co_cellvars, code.co_linetable, code.co_exceptiontable,
                 code.co_firstlineno, code.co_filename, code.co_name, code.co_qualname,
                 code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                 code.co_flags, code.co_stacksize))

out = {}
for name, module in list(sys.modules.items()):
    if name.split('.')[0] != 'mxnet':
        continue
    for attr, value in list(vars(module).items()):
        if isinstance(value, types.FunctionType) and value.__code__.co_filename == '<string>':
            out[name + '.' + attr] = hashlib.sha256(repr((
                canon(value.__code__), value.__doc__, value.__defaults__,
                value.__kwdefaults__)).encode()).hexdigest()
left = [n for n in ('mxnet.ndarray.register', 'mxnet.symbol.register')
        if 'exec' in vars(sys.modules[n])]
base = sys.modules['mxnet.base']
left += ['%s.%s' % (name, attr) for name, module in list(sys.modules.items())
         if name.split('.')[0] == 'mxnet'
         for attr in ('_init_op_module', '_init_np_op_module')
         if attr in vars(module) and (vars(module)[attr].__module__ != 'mxnet.base'
                                      or vars(module)[attr] is not vars(base)[attr])]
stats = None if len(sys.argv) == 1 else [cache.hits, cache.compiled, cache.made, cache.saved]
# what a plain import mxnet loads as stock (the lean import of servers skips or swaps them)
shim = any(type(f).__module__ == '_distutils_hack' for f in sys.meta_path)
plain = {'cv2': 'cv2' in sys.modules, 'setuptools distutils':
         'setuptools' in sys.modules['distutils'].__file__, 'shim': shim}
print(json.dumps({'functions': out, 'stats': stats, 'left': left, 'cpu': cpu, 'plain': plain}))
'''


def _digests(*args):
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=os.pathsep.join([ROOT, STARTUP]))
    env.pop('DMLC_ROLE', None)
    env.pop(OP_CODE_CACHE_ENV, None)
    proc = subprocess.run([sys.executable, '-c', DIGESTS] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_mxnets_operator_functions_from_the_kept_code_are_the_ones_mxnet_compiles(tmp_path):
    cache = str(tmp_path / 'op-code')
    stock = _digests()
    cold = _digests(cache)                   # compiles and writes the file
    warm = _digests(cache)                   # reads it
    assert len(stock['functions']) > 2000, len(stock['functions'])
    assert cold['functions'] == stock['functions']
    assert warm['functions'] == stock['functions']
    hits, compiled, made, saved = cold['stats']
    assert hits == 0 and compiled > 2000 and made == 0 and saved
    # the warm import generated no text: every function came from its operator's entry
    hits, compiled, made, saved = warm['stats']
    assert (hits, compiled, made, saved) == (0, 0, cold['stats'][1], False)
    # MXNet's modules are left as MXNet has them once the functions are made
    assert cold['left'] == warm['left'] == stock['left'] == []
    # a plain import mxnet (no lean import) loads OpenCV and setuptools' distutils as stock
    import importlib.util
    plain = stock['plain']
    assert cold['plain'] == warm['plain'] == plain
    assert plain['cv2'] == (importlib.util.find_spec('cv2') is not None)
    assert plain['setuptools distutils'] == plain['shim'], plain
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


@pytest.mark.parametrize('role,autoload,directory,installed', [
    ('server', None, '{tmp}', 1), ('worker', None, '{tmp}', 1), ('scheduler', None, '{tmp}', 0),
    ('server', None, None, 0), ('worker', None, 'off', 0), ('worker', None, '', 0),
    ('server', '0', '{tmp}', 0), (None, None, '{tmp}', 0)])
def test_the_test_jobs_start_up_keeps_the_code_only_where_it_is_asked_to(tmp_path, role,
                                                                          autoload, directory,
                                                                          installed):
    """Unset, MXNet compiles its functions at every import as stock MXNet does; a scheduler
    never imports MXNet's Python package."""
    env = {key: value.format(tmp=tmp_path) for key, value in
           (('DMLC_ROLE', role), ('MXNET_SSP_AUTOLOAD', autoload),
            (OP_CODE_CACHE_ENV, directory)) if value is not None}
    env['PYTHONPATH'] = os.pathsep.join([ROOT, STARTUP])
    out = python_c('import sys\n'
                   'print("finders", [type(f).__name__ for f in sys.meta_path].count('
                   '"OpCodeCache"))\n', env, timeout=60)
    assert 'finders %d' % installed in out, out
