"""The folders are the layers (docs/design.md, "Map of the layers"): each folder of the
package imports only what the map puts below it, read from every module's import statements
(top-level and inside functions).  A new import that runs up a layer fails here."""
import ast
import os

import pytest

from conftest import ROOT, need_module

PACKAGE = os.path.join(ROOT, 'mxnet_ssp')

#: The product (what a training script imports: stores, server rules, controller, config, core,
#: launcher) and the lab (mxnet_ssp/lab: training script and demo, reproduction, statistics,
#: cluster model and advisor, testbed) are two rooms: nothing outside the lab imports it
#: (test_the_product_never_imports_the_lab).  Inside each room the folders are layers.
#: A lab folder is named 'lab.<folder>'; the lab's own modules outside those folders, 'lab'.
#: folder (or module) -> the parts of the package its modules may import
ALLOWED = {
    'core': {'core'},
    'config': {'core'},
    # cpu_record: what a controller process writes of its CPU when it ends (as schedulers
    # and servers do)
    'controller': {'controller', 'core', 'cpu_record'},
    'cpu_record': set(),
    'lab.cluster_model': {'lab.cluster_model', 'core', '_cli'},
    # the training script's checks reach the launcher through an entry point
    # (launch/command_checks.py), never an import
    'launch': {'launch', 'config', 'core', '_cli'},
    # the training script's flags: the script and its launch check import them
    'lab.training_flags': {'lab.training_flags', 'config', 'core', '_cli', 'lab.cluster_model',
                           '__version__'},
    # what every console script shares (--version, prog names, the help formatter)
    '_cli': {'__version__'},
    # what a worker and a server share: the channel's formats, the commands, how a process
    # ends, its links and address (ps/commands.py reaches server/door.py by name only, where
    # a server unpickles a command)
    'ps': {'ps', 'core', 'config', 'controller', '_hooks'},
    # the worker's data path and the server's: neither imports the other
    'worker': {'worker', 'ps', 'core', 'config', 'controller', 'optim', 'host_kernels',
               '_hooks'},
    'server': {'server', 'ps', 'core', 'config', 'controller', 'optim', 'host_kernels',
               '_hooks'},
    # the update rules (public API): the shared names and the host kernels they run
    'optim': {'optim', 'core', 'host_kernels'},
    # the emulated cluster: its settings and the lab's placement are pure; on_host reads the
    # launcher's name for a process's launch index
    'lab.testbed': {'lab.testbed', 'core', 'launch', '_cli'},
}
#: what stays outside the package whatever it imports: only the standard library and numpy
THIRD_PARTY = {
    'core': set(),
    'config': set(),
    'controller': set(),
    'cpu_record': set(),
    'lab.cluster_model': {'numpy'},
    # launch/stock.py runs MXNet's own launcher: the tracker that ships inside the mxnet wheel
    'launch': {'dmlc_tracker'},
    '_cli': set(),
    'lab.training_flags': {'gluoncv'},      # only to look up a model zoo name it cannot parse
    'lab.testbed': set(),
}
#: the worker's side of the product: the stores users create and the worker's data path
WORKER_SIDE = ('worker', 'store', 'kvstore', 'stock_names', 'balance')
#: the server's side: the door, the update rule, its state, snapshots, the scheduler
SERVER_SIDE = ('server',)


def _modules(part):
    path = os.path.join(PACKAGE, *part.split('.'))
    if os.path.isfile(path + '.py'):
        yield path + '.py', 'mxnet_ssp.' + part
        return
    for name in sorted(os.listdir(path)):
        if name.endswith('.py'):
            mod = 'mxnet_ssp.%s.%s' % (part, name[:-3])
            if part == 'lab' and os.path.isdir(os.path.join(path, name[:-3])):
                continue
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


#: the lab's folders that are layers of their own
LAB_FOLDERS = ('cluster_model', 'testbed', 'training_flags')


def _part(name):
    """'mxnet_ssp.ps.channel' -> 'ps'; 'mxnet_ssp.config' -> 'config';
    'mxnet_ssp.lab.testbed.cli' -> 'lab.testbed'; 'mxnet_ssp.lab.data' -> 'lab'; None outside."""
    parts = name.split('.')
    if parts[0] != 'mxnet_ssp' or len(parts) < 2:
        return None
    if parts[1] == 'lab' and len(parts) > 2 and parts[2] in LAB_FOLDERS:
        return 'lab.' + parts[2]
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
    here = os.path.join(PACKAGE, 'server', 'updater.py')
    found = set(_imports(here, 'mxnet_ssp.server.updater'))
    assert 'mxnet_ssp.core.staleness' in found
    assert 'mxnet_ssp.ps.channel' in found
    assert 'mxnet_ssp.optim' in found           # a function-level import is read too
    assert _part('mxnet_ssp.lab.testbed.cli') == 'lab.testbed'
    assert _part('mxnet_ssp.lab.reproduce.cli') == 'lab'


def _product_files():
    """Every module of the package outside the lab, with its module name."""
    for path in _package_files():
        rel = os.path.relpath(path, PACKAGE)
        if rel.split(os.sep)[0] == 'lab':
            continue
        module = 'mxnet_ssp.' + rel[:-3].replace(os.sep, '.')
        yield path, module[:-9] if module.endswith('.__init__') else module


def _named_imports(path):
    """Modules `path` imports by name: the literal (or module-level constant) first argument of
    ``importlib.import_module`` / ``__import__``."""
    tree = ast.parse(open(path, encoding='utf-8').read(), path)
    constants = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', '')
        if name not in ('import_module', '__import__'):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            yield arg.value
        elif isinstance(arg, ast.Name) and arg.id in constants:
            yield constants[arg.id]


def test_the_product_never_imports_the_lab():
    """No module outside mxnet_ssp/lab (nor the start-up hook) imports the lab, by an import
    statement or by name."""
    wrong = []
    hook = os.path.join(ROOT, 'kvstore_patches', 'mxnet_ssp_autoload.py')
    for path, module in list(_product_files()) + [(hook, 'mxnet_ssp_autoload')]:
        names = list(_imports(path, module)) + list(_named_imports(path))
        wrong += ['%s imports %s' % (module, n) for n in names
                  if n == 'mxnet_ssp.lab' or n.startswith('mxnet_ssp.lab.')]
    assert not wrong, wrong


def test_the_checks_see_a_lab_import_by_name(tmp_path):
    """The reader of names finds a constant passed to import_module (so the test above can
    fail)."""
    bad = tmp_path / 'bad.py'
    bad.write_text("import importlib\nLAB = 'mxnet_ssp.lab.data'\n"
                   "def f():\n    return importlib.import_module(LAB)\n"
                   "def g():\n    return __import__('mxnet_ssp.lab.splits')\n")
    assert list(_named_imports(str(bad))) == ['mxnet_ssp.lab.data', 'mxnet_ssp.lab.splits']


def _side(module):
    parts = module.split('.')
    top = parts[1] if len(parts) > 1 else ''
    return 'worker' if top in WORKER_SIDE else 'server' if top in SERVER_SIDE else None


def test_the_worker_and_the_server_never_import_each_other():
    """No module of the worker's side (the stores and mxnet_ssp/worker) imports the server's
    (mxnet_ssp/server) or the other way round, by statement or by name."""
    wrong = []
    for path, module in _product_files():
        mine = _side(module)
        if mine is None:
            continue
        for name in list(_imports(path, module)) + list(_named_imports(path)):
            theirs = _side(name) if name.startswith('mxnet_ssp.') else None
            if theirs is not None and theirs != mine:
                wrong.append('%s (%s side) imports %s' % (module, mine, name))
    assert not wrong, wrong


def test_the_server_sorts_its_control_messages_in_one_module():
    """Discovery, refresh markers and commands are told apart from gradients only in
    server/door.py: no other server module reads the channel's tests of a push."""
    sorting = ('is_discovery', 'is_refresh', 'DISCOVERY_LEN')
    found = []
    for path, module in _product_files():
        if _side(module) != 'server' or module == 'mxnet_ssp.server.door':
            continue
        source = open(path, encoding='utf-8').read()
        found += ['%s uses %s' % (module, n) for n in sorting if n in source]
    assert not found, found


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
    from mxnet_ssp.lab import training_flags as options
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


def test_test_files_have_names_of_their_own():
    """pytest imports every test file by its base name (no __init__.py in tests/): two files
    with one name in different folders stop the whole run at collection."""
    seen = {}
    for folder, _, files in os.walk(os.path.join(ROOT, 'tests')):
        for name in files:
            if name.startswith('test_') and name.endswith('.py'):
                seen.setdefault(name, []).append(os.path.relpath(os.path.join(folder, name), ROOT))
    assert {n: p for n, p in seen.items() if len(p) > 1} == {}
