"""Every console script: ``--version``, its installed name in ``usage:``, each default once
in ``--help`` (issue 38, part 7)."""
import os
import subprocess
import sys

import pytest

import mxnet_ssp
from mxnet_ssp._cli import DefaultsOnce, prog_name

BIN = os.path.dirname(sys.executable)
SCRIPTS = ('mxnet-ssp-launch', 'mxnet-ssp-train', 'mxnet-ssp-compare', 'mxnet-ssp-reproduce',
           'mxnet-ssp-advise', 'mxnet-ssp-testbed')


def run_script(name, *args):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        pytest.skip('%s is not installed next to %s (pip install -e .)' % (name, sys.executable))
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    env.update(COLUMNS='1000', OMP_NUM_THREADS='1')     # one line per option in --help
    return subprocess.run([path] + list(args), capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize('name', SCRIPTS)
def test_version_prints_the_name_and_the_package_version(name):
    proc = run_script(name, '--version')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == '%s %s\n' % (name, mxnet_ssp.__version__)


@pytest.mark.parametrize('name', SCRIPTS)
def test_help_names_the_installed_command_and_shows_each_default_once(name):
    proc = run_script(name, '--help')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('usage: %s ' % name), proc.stdout[:200]
    for line in proc.stdout.splitlines():
        assert line.count('(default') <= 1, line
        assert '(default: None)' not in line and '(default: False)' not in line, line


def test_the_version_is_the_one_setup_py_installs():
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, 'setup.py', '--version'], cwd=here,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == mxnet_ssp.__version__


@pytest.mark.parametrize('argv0,expected', [
    ('/venv/bin/mxnet-ssp-train', 'mxnet-ssp-train'),
    ('mxnet-ssp-train', 'mxnet-ssp-train'),
    ('/src/mxnet_ssp/lab/train_cifar.py', 'python -m mxnet_ssp.lab.train_cifar'),
    ('/src/train_scripts/train_cifar.py', 'train_cifar.py'),
    ('', 'mxnet-ssp-train'),
    ('/venv/lib/python3.11/site-packages/pytest/__main__.py', 'mxnet-ssp-train'),
    ('/src/mxnet_ssp/lab/train_cifar/__main__.py',
     'python -m mxnet_ssp.lab.train_cifar'),
])
def test_prog_name(argv0, expected):
    assert prog_name('mxnet-ssp-train', 'mxnet_ssp.lab.train_cifar', argv0) == expected


def test_the_formatter_adds_a_default_only_where_the_help_has_none():
    import argparse
    p = argparse.ArgumentParser(prog='x', formatter_class=DefaultsOnce)
    p.add_argument('--cap', type=int, default=None, help='a cap (default: no cap)')
    p.add_argument('--lr', type=float, default=0.1, help='learning rate')
    p.add_argument('--said', default=3, help='said here (default 3)')
    p.add_argument('--off', action='store_true', help='a switch')
    p.add_argument('--none', default=None, help='nothing by default')
    text = ' '.join(p.format_help().split())
    assert 'a cap (default: no cap) --lr' in text
    assert 'learning rate (default: 0.1)' in text
    assert 'said here (default 3) --off' in text
    assert 'a switch --none' in text
    assert text.endswith('nothing by default')
