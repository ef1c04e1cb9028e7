"""The size report (tests/support/sizes.py) names long modules and functions without failing."""
import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, 'tests', 'support'))
from sizes import FUNCTION_LINES, MODULE_LINES, package_sizes, report_lines  # noqa: E402


def test_it_lists_what_is_long_and_nothing_else(tmp_path):
    package = tmp_path / 'pkg'
    package.mkdir()
    body = ''.join('    x%d = %d\n' % (i, i) for i in range(FUNCTION_LINES))
    (package / 'long.py').write_text('def long_one():\n' + body + '\n' * MODULE_LINES)
    (package / 'short.py').write_text('def short():\n    return 1\n')
    total, modules, functions = package_sizes(str(package))
    assert [m[0] for m in modules] == [os.path.join('pkg', 'long.py')]
    assert [(f[1], f[2]) for f in functions] == [('long_one', FUNCTION_LINES + 1)]
    assert total == FUNCTION_LINES + 1 + MODULE_LINES + 2
    lines = report_lines(str(package))
    assert 'modules over %d lines: 1' % MODULE_LINES in lines[0]
    assert any('long_one()' in line for line in lines)
