"""tests/conftest.py's need(): a missing tool skips a test, and fails it under CI.

In this process for the message and the reading of CI; then pytest itself, in a
subprocess, on a generated test file that uses every form (need_program,
need_module, the ``need`` mark, a fixture, module level), with CI set and unset.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import ROOT, in_ci, need, need_module, need_program, require_autoload_hook

MISSING_PROGRAM = 'mxnet-ssp-no-such-program'
MISSING_MODULE = 'mxnet_ssp_no_such_module'


@pytest.mark.parametrize('value, expected', [
    ('true', True), ('TRUE', True), ('True', True), ('1', True), (' true\n', True),
    ('false', False), ('0', False), ('', False), ('yes', False), ('truth', False),
    ('10', False), (None, False)])
def test_in_ci_reads_the_ci_variable(value, expected):
    environ = {} if value is None else {'CI': value}
    assert in_ci(environ) is expected


def test_in_ci_reads_os_environ_by_default(monkeypatch):
    monkeypatch.setenv('CI', 'True')
    assert in_ci() is True
    monkeypatch.delenv('CI')
    assert in_ci() is False


def outcome(function, *args):
    """('skip' or 'fail', message) of function(*args), which must stop the test.

    Catches both outcomes, so that a helper that skips where it should fail (or the
    reverse) fails these tests instead of skipping them.
    """
    try:
        function(*args)
    except pytest.skip.Exception as err:
        return 'skip', str(err)
    except pytest.fail.Exception as err:
        return 'fail', str(err)
    pytest.fail('%s%r returned instead of stopping the test' % (function.__name__, args))


@pytest.mark.parametrize('ci', [None, 'false', '0'])
def test_need_skips_outside_ci_naming_what_and_the_command(monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv('CI', raising=False)
    else:
        monkeypatch.setenv('CI', ci)
    assert outcome(need, 'the program frob', 'apt-get install frobnicator') == (
        'skip', 'the program frob is missing; to install it: apt-get install frobnicator')


@pytest.mark.parametrize('ci', ['true', 'TRUE', '1'])
def test_need_fails_under_ci_naming_what_and_the_command(monkeypatch, ci):
    monkeypatch.setenv('CI', ci)
    assert outcome(need, 'the program frob', 'apt-get install frobnicator') == (
        'fail', 'the program frob is missing; to install it: apt-get install frobnicator '
        '(CI=%s: a test that cannot run fails in CI instead of being skipped)' % ci)


def test_need_program_and_module(monkeypatch):
    monkeypatch.delenv('CI', raising=False)
    assert os.path.basename(need_program('sh', 'x')) == 'sh'
    assert need_program(sys.executable, 'x') == sys.executable
    assert need_module('json', 'x') is sys.modules['json']
    assert outcome(need_program, MISSING_PROGRAM, 'apt-get install it') == (
        'skip', 'the program %s (not on PATH) is missing; to install it: apt-get install it'
        % MISSING_PROGRAM)
    assert outcome(need_program, '/' + MISSING_PROGRAM, 'x') == (
        'skip', 'the program /%s (not executable) is missing; to install it: x'
        % MISSING_PROGRAM)
    kind, message = outcome(need_module, MISSING_MODULE, 'pip install it')
    assert kind == 'skip' and message.startswith('the Python module %s (%s: No module named '
                                                 % (MISSING_MODULE, sys.executable))
    assert message.endswith(') is missing; to install it: pip install it')
    monkeypatch.setenv('CI', 'true')
    kind, message = outcome(need_module, MISSING_MODULE, 'pip install it')
    assert kind == 'fail' and message.startswith('the Python module %s (' % MISSING_MODULE)
    assert 'is missing; to install it: pip install it (CI=true: ' in message
    kind, message = outcome(need_program, MISSING_PROGRAM, 'apt-get install it')
    assert kind == 'fail' and message.startswith(
        'the program %s (not on PATH) is missing; to install it: apt-get install it (CI=true: '
        % MISSING_PROGRAM)


def test_require_autoload_hook_needs_the_hook(monkeypatch):
    monkeypatch.delitem(sys.modules, 'mxnet_ssp_autoload', raising=False)
    monkeypatch.setenv('CI', '1')
    kind, message = outcome(require_autoload_hook)
    assert kind == 'fail' and message.startswith(
        'the start-up hook mxnet_ssp_autoload.pth of %s (looked in ' % sys.executable)
    assert 'is missing; to install it: python -m pip install . in the checkout' in message
    monkeypatch.delenv('CI')
    assert outcome(require_autoload_hook)[0] == 'skip'
    monkeypatch.setitem(sys.modules, 'mxnet_ssp_autoload', sys)
    assert require_autoload_hook() is None


# ---------------------------------------------------------------------------
# pytest on a generated test file
# ---------------------------------------------------------------------------
GENERATED = '''
import pytest
from conftest import need, need_module, need_program

MISSING_PROGRAM, MISSING_MODULE = %r, %r


def test_program_missing():
    need_program(MISSING_PROGRAM, 'apt-get install prog-pkg')


def test_module_missing():
    need_module(MISSING_MODULE, 'pip install mod-pkg')


@pytest.mark.need(program=MISSING_PROGRAM, install='apt-get install mark-prog-pkg')
def test_mark_program_missing():
    pass


@pytest.mark.need(module=MISSING_MODULE, install='pip install mark-mod-pkg')
def test_mark_module_missing():
    pass


@pytest.fixture
def server():
    need('a server', 'apt-get install server-pkg')


def test_fixture_missing(server):
    pass


def test_present():
    assert need_program('sh', 'x').endswith('sh')
    assert need_module('json', 'x').dumps(1) == '1'


@pytest.mark.need(program='sh', module='json', install='x')
def test_mark_present():
    pass


def test_fails_by_itself():
    assert 1 == 2
''' % (MISSING_PROGRAM, MISSING_MODULE)

GENERATED_MODULE_LEVEL = '''
from conftest import need_module

need_module(%r, 'pip install whole-module-pkg')


def test_never_runs():
    pass
''' % MISSING_MODULE

#: test -> the install command its message must name
COMMANDS = {
    'test_program_missing': 'apt-get install prog-pkg',
    'test_module_missing': 'pip install mod-pkg',
    'test_mark_program_missing': 'apt-get install mark-prog-pkg',
    'test_mark_module_missing': 'pip install mark-mod-pkg',
    'test_fixture_missing': 'apt-get install server-pkg',
}
WHAT = {
    'test_program_missing': 'the program %s (not on PATH) is missing' % MISSING_PROGRAM,
    'test_module_missing': 'the Python module %s (' % MISSING_MODULE,
    'test_mark_program_missing': 'the program %s (not on PATH) is missing' % MISSING_PROGRAM,
    'test_mark_module_missing': 'the Python module %s (' % MISSING_MODULE,
    'test_fixture_missing': 'a server is missing',
}


def run_generated(tmp_path, ci):
    """pytest on the generated files with CI=`ci` (None: unset); returns ({test: (outcome,
    message)}, {file: (outcome, message)} of collection errors and skips, exit status)."""
    d = tmp_path / ('ci-%s' % ci)
    d.mkdir()
    (d / 'pytest.ini').write_text('[pytest]\n')
    # this directory's conftest is the checkout's tests/conftest.py (its hook handles the mark)
    (d / 'conftest.py').write_text(
        'import importlib.util\n'
        'spec = importlib.util.spec_from_file_location("conftest_under_test", %r)\n'
        'module = importlib.util.module_from_spec(spec)\n'
        'spec.loader.exec_module(module)\n'
        'globals().update((k, v) for k, v in vars(module).items() if not k.startswith("__"))\n'
        % os.path.join(ROOT, 'tests', 'conftest.py'))
    (d / 'test_generated.py').write_text(GENERATED)
    (d / 'test_generated_module.py').write_text(GENERATED_MODULE_LEVEL)
    env = {k: v for k, v in os.environ.items() if k not in ('CI', 'PYTEST_ADDOPTS')}
    if ci is not None:
        env['CI'] = ci
    env['PYTHONPATH'] = ROOT
    proc = subprocess.run(
        # a collection error stops pytest before any test runs; here both files must run
        [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-rA',
         '--continue-on-collection-errors', '--junitxml', str(d / 'junit.xml'), '.'],
        cwd=str(d), env=env, capture_output=True, text=True, timeout=120)
    tests, files = {}, {}
    for case in ET.parse(str(d / 'junit.xml')).getroot().iter('testcase'):
        outcome, message = 'passed', ''
        for kind in ('failure', 'error', 'skipped'):
            node = case.find(kind)
            if node is not None:
                outcome, message = kind, (node.get('message') or '') + (node.text or '')
        if case.get('classname'):
            tests[case.get('name')] = (outcome, message)
        else:       # a module that did not collect: no class, the module as its name
            files[case.get('name')] = (outcome, message)
    return tests, files, proc


@pytest.mark.parametrize('ci', [None, '0'])
def test_generated_tests_skip_outside_ci(tmp_path, ci):
    tests, files, proc = run_generated(tmp_path, ci)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out           # test_fails_by_itself
    assert tests['test_present'][0] == tests['test_mark_present'][0] == 'passed', out
    assert tests['test_fails_by_itself'][0] == 'failure', out
    for name, command in COMMANDS.items():
        outcome, message = tests[name]
        assert outcome == 'skipped', (name, out)
        assert WHAT[name] in message and 'to install it: ' + command in message, (name, message)
        assert 'CI=' not in message
    # the module-level need skips the whole module; its test never runs
    assert 'test_never_runs' not in tests, out
    assert list(files) == ['test_generated_module'], (files, out)
    outcome, message = files['test_generated_module']
    assert outcome == 'skipped' and 'the Python module %s (' % MISSING_MODULE in message, files
    assert 'to install it: pip install whole-module-pkg' in message and 'CI=' not in message
    assert 'SKIPPED' in out and 'ERROR' not in out, out


@pytest.mark.parametrize('ci', ['True', '1'])
def test_generated_tests_fail_under_ci(tmp_path, ci):
    tests, files, proc = run_generated(tmp_path, ci)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert tests['test_present'][0] == tests['test_mark_present'][0] == 'passed', out
    assert tests['test_fails_by_itself'][0] == 'failure', out
    for name, command in COMMANDS.items():
        outcome, message = tests[name]
        # in the test's body: failure; in set-up (the mark, a fixture): error; never a skip
        assert outcome == ('failure' if name in ('test_program_missing', 'test_module_missing')
                           else 'error'), (name, out)
        assert WHAT[name] in message and 'to install it: ' + command in message, (name, message)
        assert 'CI=%s: a test that cannot run fails in CI' % ci in message, (name, message)
    # the module-level need: the module's collection errors, naming the package
    assert 'test_never_runs' not in tests, out
    assert list(files) == ['test_generated_module'], (files, out)
    outcome, message = files['test_generated_module']
    assert outcome == 'error' and 'the Python module %s (' % MISSING_MODULE in message, files
    assert 'to install it: pip install whole-module-pkg (CI=%s: ' % ci in message, files
    assert 'SKIPPED' not in out and 'skipped' not in out.splitlines()[-1], out
