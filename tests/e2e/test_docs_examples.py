"""The shell examples of the docs run: every ``mxnet-ssp-launch`` / ``mxnet-ssp-train`` command
in a code block of README.md or docs/*.md is extracted, shortened (one epoch, a few iterations)
and run as a real job in a scratch directory, or is listed in :data:`NOT_HERE` with the reason
it cannot run on this machine.  A new example that is neither fails
test_every_example_is_run_or_excused.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

#: the installed commands, as the checkout's modules (so the checkout's code runs)
COMMANDS = {'mxnet-ssp-launch': [sys.executable, '-m', 'mxnet_ssp.launch'],
            'mxnet-ssp-train': [sys.executable, '-m', 'mxnet_ssp.lab.train_cifar']}
_COMMAND = re.compile(r'^\s*(?:[A-Z_]+=\S+\s+)*(?:sudo\s+)?(?:mxnet-ssp-testbed run -- )?'
                      r'(?:mxnet-ssp-(?:launch|train)\s+-|\$L \$T )')

#: examples that cannot run here: (file, the start of the command) -> why
NOT_HERE = {
    ('docs/train_scripts.md', '$L $T'):
        'the DSSP paper\'s runs ($L $T: python -m mxnet_ssp.launch -H hosts.txt, '
        'mxnet-ssp-train --num-gpus 4 --num-epochs 300 on CIFAR): 4 GPU hosts and the CIFAR '
        'download; tests/e2e/test_resnet_job.py and the CIFAR-archive tests run the same '
        'script here, small',
    ('docs/train_scripts.md', 'OMP_NUM_THREADS=1 mxnet-ssp-launch -n 4 -s 1 --launcher local'):
        'runs in full (10 epochs, not cut to 3 iterations) as test_default_rates.py\'s '
        'alexnet-small-4w-dist_dssp case, which reads it from this page',
    ('docs/lab.md', 'mxnet-ssp-train --kvstore dist_async ...'):
        'an outline: "..." stands for the flags of the reader\'s own run',
    ('docs/launch.md', 'mxnet-ssp-launch -n 2 -s 1 --launcher local --gpu-map 0:0,1:1'):
        'needs 2 GPUs (the launcher checks them before it starts anything)',
    ('docs/launch.md', 'mxnet-ssp-launch -n 2 -s 1 --launcher local --gpus-per-worker 2'):
        'needs 4 GPUs, and "python train.py ..." is the reader\'s own script',
    ('docs/many_hosts.md', 'mxnet-ssp-launch -n 2 -s 1 --launcher ssh -H hostfile'):
        'needs hosts reachable over ssh (tests/testbed runs it on emulated hosts, as root)',
    ('docs/launch.md', 'mxnet-ssp-launch --launcher slurm -n 2 -s 2 python train.py'):
        'runs inside a Slurm allocation: tests/testbed/test_testbed_slurm.py runs that batch '
        'script under a real Slurm on emulated hosts, as root',
    ('docs/many_hosts.md', 'sudo mxnet-ssp-testbed run -- mxnet-ssp-launch'):
        'needs root and an emulated cluster (tests/testbed runs it)',
    ('docs/elastic.md', 'mxnet-ssp-launch -n 4 -s 2 --launcher ssh -H hosts --elastic 3 '
                        'python train.py --kvstore dist_dssp'):
        'needs hosts reachable over ssh; tests/integration/test_elastic.py runs elastic jobs '
        'locally',
    ('docs/elastic.md', 'mxnet-ssp-launch -n 4 -s 2 --launcher ssh -H hosts --elastic 3 '
                        '--max-restarts 1'):
        'needs hosts reachable over ssh; "..." stands for the reader\'s flags',
}

def readme_script():
    """The README's script ("Your script": its python block that sets kvstore='dist_dssp'),
    which the README's launcher example runs as ``train.py``: the examples' ``python train.py``
    runs what the README shows, so the snippet cannot drift from the API."""
    text = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    blocks = [b.split('\n', 1)[1] for b in text.split('```')[1::2] if b.startswith('python\n')]
    found = [b for b in blocks if "kvstore='dist_dssp'" in b and 'trainer.step' in b]
    assert found, "README.md has no python block with kvstore='dist_dssp' and trainer.step"
    return found[0]


def examples():
    """[(file, line, command)] of every launcher / training command in a code block (fenced,
    or indented by 4), continuation lines joined; output lines (``mxnet-ssp-launch: ...``) are
    not commands."""
    found = []
    for path in ['README.md'] + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md'))):
        name = os.path.relpath(os.path.join(ROOT, path), ROOT)
        lines = open(os.path.join(ROOT, name), encoding='utf-8').read().split('\n')
        fenced, i = False, 0
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith('```'):
                fenced = not fenced
            elif (fenced or line.startswith('    ')) and _COMMAND.match(line):
                start, cmd = i + 1, line
                while cmd.rstrip().endswith('\\') and i + 1 < len(lines):
                    i += 1
                    cmd = cmd.rstrip()[:-1].rstrip() + ' ' + lines[i].strip()
                found.append((name, start, re.sub(r'\s+#.*$', '', cmd.strip())))
            i += 1
    return found


def excuse(name, cmd):
    return next((why for (f, head), why in NOT_HERE.items()
                 if f == name and cmd.startswith(head)), None)


def shortened(cmd, tmp_path):
    """(argv, env): `cmd` with its leading settings moved to the environment, the commands
    as the checkout's modules, and the training script cut to one epoch of 3 iterations."""
    words = shlex.split(cmd)
    env = {k: v for k, v in os.environ.items() if not k.startswith(('DMLC_', 'MXNET_SSP_'))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    while '=' in words[0]:
        key, _, value = words.pop(0).partition('=')
        env[key] = value
    argv = []
    for word in words:
        argv += COMMANDS.get(word, [sys.executable] if word == 'python' else [word])
    if 'mxnet_ssp.lab.train_cifar' in argv:
        for flag in ('--num-epochs', '--num-iterations'):
            if flag in argv:
                del argv[argv.index(flag):argv.index(flag) + 2]
        argv += ['--num-epochs', '1', '--num-iterations', '3', '--save-period', '0']
    if 'train.py' in argv:
        (tmp_path / 'train.py').write_text(readme_script())
    return argv, env


RUN = [(f, n, c) for f, n, c in examples() if excuse(f, c) is None]


def test_every_example_is_run_or_excused():
    found = examples()
    assert len(found) >= 10, found            # the extraction still finds the docs' examples
    used = {key for key in NOT_HERE for f, _, c in found
            if key[0] == f and c.startswith(key[1])}
    assert sum(c.startswith('$L $T') for _, _, c in found) >= 6, found   # the paper's grid
    assert used == set(NOT_HERE), 'NOT_HERE names examples the docs no longer have: %s' % (
        set(NOT_HERE) - used)
    for name, line, cmd in RUN:               # what runs is a local job or one process
        assert '--launcher ssh' not in cmd and 'python train.py ...' not in cmd, (name, line)


@pytest.mark.integration
@pytest.mark.parametrize('name,line,cmd', [
    pytest.param(f, n, c, id='%s:%d' % (f, n),
                 marks=() if f in ('README.md', 'docs/train_scripts.md') else pytest.mark.slow)
    for f, n, c in RUN])
def test_the_example_runs(tmp_path, name, line, cmd):
    argv, env = shortened(cmd, tmp_path)
    if argv[:3] == COMMANDS['mxnet-ssp-launch']:
        argv[3:3] = ['--timeout', '150']
    proc = subprocess.run(argv, env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=200)
    assert proc.returncode == 0, '%s:%d %s\n%s' % (name, line, cmd, proc.stderr[-4000:])
