"""MXNET_SSP_OP_CODE_CACHE: MXNet's operator functions from kept compiled code
(mxnet_ssp._op_code.cache_op_code) are the functions MXNet compiles itself."""
import json
import marshal
import os
import stat
import subprocess
import sys

import pytest

from mxnet_ssp._op_code import OpCodeCache, op_code_cache_file
from tests.conftest import require_autoload_hook

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
    from mxnet_ssp._op_code import cache_op_code
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
stats = None if len(sys.argv) == 1 else [cache.hits, cache.compiled, cache.saved]
print(json.dumps({'functions': out, 'stats': stats, 'left': left, 'cpu': cpu}))
'''


def _digests(*args):
    env = dict(os.environ, OMP_NUM_THREADS='1')
    env.pop('DMLC_ROLE', None)
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
    hits, compiled, saved = cold['stats']
    assert hits == 0 and compiled > 2000 and saved
    hits, compiled, saved = warm['stats']
    assert (hits, compiled, saved) == (cold['stats'][1], 0, False)
    # MXNet's modules are left as MXNet has them once the functions are made
    assert cold['left'] == warm['left'] == stock['left'] == []
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


@pytest.mark.parametrize('role,autoload,directory,installed', [
    ('server', None, '{tmp}', 1), ('worker', None, '{tmp}', 1), ('scheduler', None, '{tmp}', 0),
    ('server', None, None, 0), ('worker', None, 'off', 0), ('worker', None, '', 0),
    ('server', '0', '{tmp}', 0), (None, None, '{tmp}', 0)])
def test_the_start_up_hook_keeps_the_code_only_where_it_is_asked_to(tmp_path, role, autoload,
                                                                     directory, installed):
    """Unset (the default), MXNet compiles its functions at every import as stock MXNet does;
    a scheduler never imports MXNet's Python package."""
    require_autoload_hook()
    env = dict(os.environ, OMP_NUM_THREADS='1')
    for key in ('DMLC_ROLE', 'MXNET_SSP_AUTOLOAD', 'MXNET_SSP_OP_CODE_CACHE',
                'MXNET_SSP_LEAN_WORKERS'):
        env.pop(key, None)
    for key, value in (('DMLC_ROLE', role), ('MXNET_SSP_AUTOLOAD', autoload),
                       ('MXNET_SSP_OP_CODE_CACHE', directory)):
        if value is not None:
            env[key] = value.format(tmp=tmp_path)
    code = ('import sys\n'
            'print("finders", [type(f).__name__ for f in sys.meta_path].count("OpCodeCache"))\n')
    proc = subprocess.run([sys.executable, '-c', code], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and 'finders %d' % installed in proc.stdout, proc.stdout
