"""The tools work from the installed package alone, away from any checkout.

The test runs from ``tmp_path`` (outside the checkout) with no checkout on
PYTHONPATH, so nothing can find ``train_scripts/`` or the checkout's package.
It uses

* the package installed in this Python and its console scripts, resolved in
  the directory of ``sys.executable``, when that install is a regular (not
  editable) copy of this checkout, as in CI's fresh virtual environment after
  ``pip install ".[test]"``;
* otherwise (a development environment with an older or an editable install)
  this checkout's ``mxnet_ssp/`` alone, copied into a directory of ``tmp_path``
  that is put on PYTHONPATH, with the tools run as ``python -m <module>``.

It runs the reproduction's dry run (which reads the training script's flags
from its ``--help``) and a short local training run.
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys

from conftest import ROOT  # noqa: E402  (the checkout)
PACKAGE = os.path.join(ROOT, 'mxnet_ssp')
BIN = os.path.dirname(sys.executable)
#: console script -> the module it runs
TOOLS = {
    'mxnet-ssp-train': 'mxnet_ssp.lab.train_cifar',
    'mxnet-ssp-compare': 'mxnet_ssp.lab.compare_paradigms',
    'mxnet-ssp-reproduce': 'mxnet_ssp.lab.reproduce',
    'mxnet-ssp-launch': 'mxnet_ssp.launch',
    'mxnet-ssp-stock-launch': 'mxnet_ssp.launch.stock',
    'mxnet-ssp-advise': 'mxnet_ssp.lab.cluster_model.advise',
    'mxnet-ssp-testbed': 'mxnet_ssp.lab.testbed',
}


def clean_env(pythonpath=None):
    """This environment without DMLC_*, without the checkout on PYTHONPATH, one thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    keep = [p for p in env.pop('PYTHONPATH', '').split(os.pathsep)
            if p and os.path.abspath(p) != ROOT]
    if pythonpath:
        keep.insert(0, pythonpath)
    if keep:
        env['PYTHONPATH'] = os.pathsep.join(keep)
    env['OMP_NUM_THREADS'] = '1'
    env['MXNET_SSP_METRICS_DIR'] = 'off'
    return env


def package_differences(installed):
    """Source files of this checkout's package that `installed` lacks or holds otherwise."""
    different = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith('.py'):
                continue
            source = os.path.join(folder, name)
            target = os.path.join(installed, os.path.relpath(source, PACKAGE))
            if not (os.path.isfile(target) and filecmp.cmp(source, target, shallow=False)):
                different.append(os.path.relpath(source, ROOT))
    return different


def installed_tools(tmp_path):
    """argv prefix per tool of the installed package, or (None, why) unless it is a regular
    install of this checkout."""
    proc = subprocess.run([sys.executable, '-c', 'import mxnet_ssp; print(mxnet_ssp.__file__)'],
                          env=clean_env(), cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        return None, 'mxnet_ssp is not installed for %s' % sys.executable
    installed = os.path.dirname(os.path.abspath(proc.stdout.strip()))
    if installed == PACKAGE:
        return None, 'mxnet_ssp is installed in editable mode'
    different = package_differences(installed)
    if different:
        return None, 'the mxnet_ssp installed in %s is not this checkout\'s (%s differ)' % (
            installed, ', '.join(different[:3]))
    assert not os.path.exists(os.path.join(os.path.dirname(installed), 'train_scripts'))
    tools = {}
    for script in TOOLS:
        path = os.path.join(BIN, script)
        assert os.access(path, os.X_OK), '%s: not installed next to %s' % (script, sys.executable)
        tools[script] = [path]
    return tools, clean_env()


def copied_tools(tmp_path):
    """argv prefix per tool of a copy of this checkout's package alone."""
    site = tmp_path / 'site'
    shutil.copytree(PACKAGE, str(site / 'mxnet_ssp'),
                    ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    return ({script: [sys.executable, '-m', module] for script, module in TOOLS.items()},
            clean_env(str(site)))


def test_tools_run_outside_the_checkout(tmp_path):
    work = tmp_path / 'work'
    work.mkdir()
    tools, env = installed_tools(tmp_path)
    if tools is None:             # (pip install . to test the installed console scripts)
        print('%s: testing a copy of the package instead' % env)
        tools, env = copied_tools(tmp_path)

    def run(script, *args, timeout=120):
        proc = subprocess.run(tools[script] + list(args), env=env, cwd=str(work),
                              capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, '%s %s: exit %d\n%s\n%s' % (
            script, ' '.join(args), proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
        return proc

    assert 'usage:' in run('mxnet-ssp-launch', '--help').stdout
    # MXNet's own launch.py, from the installed wheel, on this Python
    assert '--num-workers' in run('mxnet-ssp-stock-launch', '--help').stdout

    # the reproduction finds the training script as a module and reads its flags
    # (--no-progress is passed only when its --help lists it)
    text = run('mxnet-ssp-reproduce', '--preset', 'tiny', '--out', str(work / 'grid'),
               '--dry-run', '--no-plots').stdout
    commands = [line for line in text.splitlines() if line.startswith('OMP_NUM_THREADS=1')]
    assert commands and '# warning' not in text, text
    for command in commands:
        assert ' -m mxnet_ssp.lab.train_cifar ' in command, command
        assert ' --no-progress ' in command and 'train_scripts' not in command, command
    assert not (work / 'grid').exists()

    assert '--ssp-staleness' in run('mxnet-ssp-compare', '--help').stdout
    assert '--kvstore' in run('mxnet-ssp-train', '--help').stdout
    assert 'RUN_DIR' in run('mxnet-ssp-advise', '--help').stdout
    assert '{up,down,status,run}' in run('mxnet-ssp-testbed', '--help').stdout

    # a short training run, in one process
    save = work / 'run'
    proc = run('mxnet-ssp-train', '--kvstore', 'local', '--model', 'mlp', '--num-iterations', '5',
               '--log-interval', '0', '--save-dir', str(save))
    with open(save / 'summary.json') as f:
        summary = json.load(f)
    assert summary['iterations_per_worker'] == {'0': 5}, proc.stderr[-2000:]
    assert summary['final_accuracy'] is not None and (save / 'model-final.params').is_file()
    assert sorted(os.listdir(work)) == ['run']          # nothing written beside it
