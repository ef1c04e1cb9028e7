"""The folders are the layers (docs/design.md, "Map of the layers"): each folder of the
package imports only what the map puts below it, read from every module's import statements
(top-level and inside functions).  A new import that runs up a layer fails here."""
import ast
import os

import pytest

from conftest import ROOT, need_module

PACKAGE = os.path.join(ROOT, 'mxnet_ssp')

#: folder (or module) -> the parts of the package its modules may import
ALLOWED = {
    'core': {'core'},
    'config': {'core'},
    # cpu_record: what a controller process writes of its CPU when it ends (as schedulers
    # and servers do)
    'controller': {'controller', 'core', 'cpu_record'},
    'cpu_record': set(),
    'cluster_model': {'cluster_model', 'core', '_cli'},
    # training_flags: the launcher parses the training script's flags with the script's own
    # parser (launch/train_flags.py) before any process starts
    'launch': {'launch', 'config', 'core', '_cli', 'training_flags'},
    # the training script's flags: the launcher and the script both import them
    'training_flags': {'training_flags', 'config', 'core', '_cli', 'cluster_model',
                       '__version__'},
    # what every console script shares (--version, prog names, the help formatter)
    '_cli': {'__version__'},
    'ps': {'ps', 'core', 'config', 'controller', 'optim', 'host_kernels', '_hooks'},
    # the update rules (public API): the shared names and the host kernels they run
    'optim': {'optim', 'core', 'host_kernels'},
    # the emulated cluster: its settings and the lab's placement are pure; on_host reads the
    # launcher's name for a process's launch index
    'testbed': {'testbed', 'core', 'launch', '_cli'},
}
#: what stays outside the package whatever it imports: only the standard library and numpy
THIRD_PARTY = {
    'core': set(),
    'config': set(),
    'controller': set(),
    'cpu_record': set(),
    'cluster_model': {'numpy'},
    'launch': set(),
    '_cli': set(),
    'training_flags': {'gluoncv'},      # only to look up a model zoo name it cannot parse
    'testbed': set(),
}


def _modules(part):
    path = os.path.join(PACKAGE, part)
    if os.path.isfile(path + '.py'):
        yield path + '.py', 'mxnet_ssp.' + part
        return
    for name in sorted(os.listdir(path)):
        if name.endswith('.py'):
            mod = 'mxnet_ssp.%s.%s' % (part, name[:-3])
            yield os.path.join(path, name), mod[:-9] if name == '__init__.py' else mod


def _imports(path, module):
    """Absolute names of everything `path` (module `module`) imports."""
    tree = ast.parse(open(path, encoding='utf-8').read(), path)
    package = module if path.endswith('__init__.py') else module.rsplit('.', 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')
                base = base[:len(base) - node.level + 1]
                target = '.'.join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            if node.module is None or target == 'mxnet_ssp':
                for alias in node.names:        # from . import x: x may be a module
                    yield target + '.' + alias.name
            else:
                yield target


def _part(name):
    """'mxnet_ssp.ps.channel' -> 'ps'; 'mxnet_ssp.config' -> 'config'; None outside."""
    parts = name.split('.')
    if parts[0] != 'mxnet_ssp' or len(parts) < 2:
        return None
    return parts[1]


@pytest.mark.parametrize('part', sorted(ALLOWED))
def test_each_folder_imports_only_the_layers_below(part):
    wrong = []
    for path, module in _modules(part):
        for name in _imports(path, module):
            other = _part(name)
            if other is not None and other != part and other not in ALLOWED[part]:
                wrong.append('%s imports %s' % (module, name))
    assert not wrong, wrong


@pytest.mark.parametrize('part', sorted(THIRD_PARTY))
def test_the_lower_layers_need_neither_mxnet_nor_other_packages(part):
    import sys
    stdlib = sys.stdlib_module_names
    wrong = []
    for path, module in _modules(part):
        for name in _imports(path, module):
            top = name.split('.')[0]
            if top != 'mxnet_ssp' and top not in stdlib and top not in THIRD_PARTY[part]:
                wrong.append('%s imports %s' % (module, name))
    assert not wrong, wrong


def test_the_check_reads_relative_imports():
    """The reader itself: a relative import two levels up resolves to the package's name."""
    here = os.path.join(PACKAGE, 'ps', 'server.py')
    found = set(_imports(here, 'mxnet_ssp.ps.server'))
    assert 'mxnet_ssp.core.staleness' in found
    assert 'mxnet_ssp.ps.channel' in found
    assert 'mxnet_ssp.optim' in found           # a function-level import is read too


#: names that mxnet_ssp/core/names.py defines for every layer: no other module binds them
#: (MODES and PARADIGMS: the former second names of DSSP_MODES and of two different tables)
SHARED_NAMES = {'DSSP_MODES', 'MODES', 'DSSP_STALENESS', 'BUILTIN_MODELS', 'DATASETS',
                'TRAIN_LOG', 'STORE_METRICS', 'CONTROLLER_METRICS', 'PARADIGMS'}
#: the values that only core/names.py spells: the metrics files, the default DSSP mode and
#: thresholds ('paper' and 'threshold' are other things too: a DC-ASGD reading, a balance
#: setting)
SHARED_LITERALS = {'train-worker%d.jsonl', 'worker-%d.jsonl', 'controller.jsonl', 'bounded',
                   (3, 15)}


def _package_files():
    for folder, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.join(folder, name)


def test_names_that_must_agree_are_defined_once():
    """The DSSP modes and default thresholds, the built-in models, the datasets and the
    metrics files' names are bound only in mxnet_ssp/core/names.py (imports of them are
    fine), and their values are spelled nowhere else in the package."""
    home = os.path.join(PACKAGE, 'core', 'names.py')
    bound, spelled = [], []
    for path in _package_files():
        if path == home:
            continue
        tree = ast.parse(open(path, encoding='utf-8').read(), path)
        exported = {id(n) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == '__all__' for t in node.targets)
                    for n in ast.walk(node.value)}     # '__all__' names functions (bounded)
        for node in ast.walk(tree):
            if id(node) in exported:
                continue
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name) and target.id in SHARED_NAMES:
                    bound.append('%s:%d %s' % (path, node.lineno, target.id))
            if isinstance(node, ast.Constant) and node.value in SHARED_LITERALS:
                spelled.append('%s:%d %r' % (path, node.lineno, node.value))
            if (isinstance(node, ast.Tuple) and len(node.elts) == 2
                    and all(isinstance(e, ast.Constant) for e in node.elts)
                    and tuple(e.value for e in node.elts) in SHARED_LITERALS):
                spelled.append('%s:%d %r' % (path, node.lineno,
                                             tuple(e.value for e in node.elts)))
    assert not bound, bound
    assert not spelled, spelled


def test_the_layers_hold_the_shared_objects():
    from mxnet_ssp import config
    from mxnet_ssp.core import names
    from mxnet_ssp import training_flags as options
    assert config.STORE_TYPES['dist_dssp'] is names.DSSP_STALENESS
    assert options.STALENESS_LR is names.STALENESS_POLICIES
    assert set(options.OPTIMIZERS) >= {names.SASGD, names.DCASGD_PW}


def test_the_update_rules_register_the_shared_names():
    mx = need_module('mxnet')
    from mxnet_ssp import optim
    from mxnet_ssp.core import names
    assert optim.STALENESS_POLICIES is names.STALENESS_POLICIES
    assert optim.ADAPTIVE_READINGS is names.ADAPTIVE_READINGS
    assert isinstance(mx.optimizer.create(names.SASGD), optim.StalenessAwareSGD)
    assert isinstance(mx.optimizer.create(names.DCASGD_PW), optim.DCASGD)


#: docs/design.md ("Sizes"): a module that outgrows this holds more than one job
MAX_MODULE_LINES = 550
MAX_FUNCTION_LINES = 80


def test_no_module_or_function_outgrows_its_limit():
    too_long = []
    for path in _package_files():
        with open(path, encoding='utf-8') as f:
            source = f.read()
        name = os.path.relpath(path, ROOT)
        lines = source.count('\n')
        if lines > MAX_MODULE_LINES:
            too_long.append('%s: %d lines' % (name, lines))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append('%s: %s() %d lines' % (name, node.name, length))
    assert not too_long, ('over %d lines a module or %d a function (split it by job): %s'
                          % (MAX_MODULE_LINES, MAX_FUNCTION_LINES, '; '.join(too_long)))


def test_test_files_have_names_of_their_own():
    """pytest imports every test file by its base name (no __init__.py in tests/): two files
    with one name in different folders stop the whole run at collection."""
    seen = {}
    for folder, _, files in os.walk(os.path.join(ROOT, 'tests')):
        for name in files:
            if name.startswith('test_') and name.endswith('.py'):
                seen.setdefault(name, []).append(os.path.relpath(os.path.join(folder, name), ROOT))
    assert {n: p for n, p in seen.items() if len(p) > 1} == {}
