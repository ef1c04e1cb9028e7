"""Mutation score of the pure core, module by module (mutmut 3, against tests/unit only).

Run from the checkout's root, in an environment with the test extra and mutmut::

    python -m pip install ".[test]" mutmut==3.8.1
    OMP_NUM_THREADS=1 python tests/mutation/score.py

What is mutated, and with which tests, is setup.cfg's ``[mutmut]`` section.  This
script runs ``mutmut run`` (results are cached in ``mutants/``: a second run only tries
mutants whose function changed), reads ``mutmut results``, takes away the mutants
listed in tests/mutation/equivalent.txt (each with the reason it cannot change
behaviour), and prints one row per module: mutants, killed, survived, equivalent,
timeouts, and the score = killed / (mutants - equivalent).  A timeout counts as
killed (the mutant made the tests hang; mutmut stops them), and so does a segfault (the
mutant crashed the test process).  It exits 1 when a
module scores below ``--goal`` (default 90%), when a listed equivalent mutant no longer
exists or was killed (the list is stale), or when mutmut fails.

``--no-run`` only reads the last results; ``--show`` prints the diff of every surviving
mutant that is not listed as equivalent.
"""
import argparse
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EQUIVALENT = os.path.join(HERE, 'equivalent.txt')
#: statuses that mean the tests noticed the mutant: they failed, hung (mutmut stops them) or
#: crashed the test process (SIGSEGV/SIGKILL: a host kernel mutant writing out of bounds)
KILLED = ('killed', 'timeout', 'segfault')
_LINE = re.compile(r'^\s*(\S+__mutmut_\d+): (.+?)\s*$')


def module_of(name):
    """'mxnet_ssp.core.sync.xǁSyncPolicyǁon_push__mutmut_3' -> 'mxnet_ssp/core/sync.py'."""
    parts = name.split('.')
    for i, part in enumerate(parts):
        if part.startswith('x_') or part.startswith('x\u01c1'):
            return '/'.join(parts[:i]) + '.py'
    raise ValueError('not a mutmut mutant name: %r' % (name,))


def read_equivalent(path=EQUIVALENT):
    """{mutant name: reason} from lines 'NAME  # reason' (blank lines and '#' lines skipped)."""
    found = {}
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            name, sep, reason = line.partition('#')
            if not sep or not reason.strip():
                raise SystemExit('%s:%d: every equivalent mutant needs "# reason": %r'
                                 % (path, number, line))
            found[name.strip()] = reason.strip()
    return found


def mutmut(*args, capture=False):
    cmd = [sys.executable, '-m', 'mutmut'] + list(args)
    return subprocess.run(cmd, cwd=ROOT, check=True, text=True,
                          stdout=subprocess.PIPE if capture else None)


def read_results():
    """{mutant name: status} from ``mutmut results --all true``."""
    out = mutmut('results', '--all', 'true', capture=True).stdout
    return {m.group(1): m.group(2) for m in map(_LINE.match, out.splitlines()) if m}


def score(results, equivalent):
    """Rows per module and the problems found: ({module: Counter}, [problem])."""
    rows = defaultdict(Counter)
    problems = []
    for name, status in results.items():
        row = rows[module_of(name)]
        row['mutants'] += 1
        if name in equivalent:
            row['equivalent'] += 1
            if status in KILLED:
                problems.append('%s is listed as equivalent but was %s' % (name, status))
            continue
        row['killed' if status in KILLED else status] += 1
        row['timeout'] += status == 'timeout'
    problems += ['%s is listed as equivalent but no longer exists' % name
                 for name in equivalent if name not in results]
    return rows, problems


def table(rows, goal):
    lines = ['| module | mutants | killed | survived | equivalent | timeout | other | score |',
             '|---|---:|---:|---:|---:|---:|---:|---:|']
    below = []
    for module in sorted(rows):
        row = rows[module]
        live = row['mutants'] - row['equivalent']
        other = live - row['killed'] - row['survived']
        pct = 100.0 * row['killed'] / live if live else 100.0
        if pct < goal:
            below.append(module)
        lines.append('| %s | %d | %d | %d | %d | %d | %d | %.1f%% |' % (
            module, row['mutants'], row['killed'], row['survived'], row['equivalent'],
            row['timeout'], other, pct))
    return '\n'.join(lines), below


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--no-run', action='store_true', help='only read the last results')
    parser.add_argument('--show', action='store_true',
                        help='print the diff of each surviving mutant not listed as equivalent')
    parser.add_argument('--goal', type=float, default=90.0,
                        help='lowest acceptable score per module, in percent (default 90)')
    args = parser.parse_args(argv)
    try:
        import mutmut as _  # noqa: F401
    except ImportError:
        raise SystemExit('mutmut is not installed: python -m pip install mutmut==3.8.1')
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    if not args.no_run:
        mutmut('run')
    results = read_results()
    if not results:
        raise SystemExit('no mutants found: run without --no-run first (from %s)' % ROOT)
    equivalent = read_equivalent()
    rows, problems = score(results, equivalent)
    text, below = table(rows, args.goal)
    print(text)
    if args.show:
        for name, status in sorted(results.items()):
            if status not in KILLED and name not in equivalent:
                print()
                mutmut('show', name)
    for problem in problems:
        print('stale equivalent list: ' + problem, file=sys.stderr)
    for module in below:
        print('%s scores below the goal of %g%%' % (module, args.goal), file=sys.stderr)
    return 1 if problems or below else 0


if __name__ == '__main__':
    sys.exit(main())
