"""A size report of the package, printed at the end of a test run (tests/conftest.py).

Sizes are smells, not rules: a module of many lines or a long function may hold two jobs, and
the report names them so a reader can look.  Nothing fails on a count; a module is split when
it has two jobs (docs/design.md, "Sizes").
"""
import ast
import os

#: above these a module or a function is listed
MODULE_LINES = 550
FUNCTION_LINES = 80


def package_sizes(package):
    """(module lines, long modules, long functions) of every .py file under `package`:
    lists of (relative path, lines) and (relative path, function, lines), largest first."""
    modules, functions = [], []
    total = 0
    for folder, _, files in os.walk(package):
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(folder, name)
            source = open(path, encoding='utf-8').read()
            rel = os.path.relpath(path, os.path.dirname(package))
            lines = source.count('\n')
            total += lines
            if lines > MODULE_LINES:
                modules.append((rel, lines))
            for node in ast.walk(ast.parse(source, path)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > FUNCTION_LINES:
                        functions.append((rel, node.name, length))
    modules.sort(key=lambda m: -m[1])
    functions.sort(key=lambda f: -f[2])
    return total, modules, functions


def report_lines(package):
    """The report as lines of text."""
    total, modules, functions = package_sizes(package)
    out = ['%s: %d lines; modules over %d lines: %d, functions over %d lines: %d (smells, '
           'not failures)' % (os.path.basename(package), total, MODULE_LINES, len(modules),
                             FUNCTION_LINES, len(functions))]
    out += ['  %s: %d lines' % m for m in modules]
    out += ['  %s: %s() %d lines' % f for f in functions]
    return out
