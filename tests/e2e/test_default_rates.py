"""The defaults of mxnet-ssp-train train: with --lr and --momentum left out, the digits MLP and
alexnet-small reach a sensible test accuracy with 2 and 4 workers under dist_async, dist_ssp
and dist_dssp (real MXNet jobs on loopback, worker 1 made 2.5x slower as in the docs).

Thresholds: 10 epochs (the default) of digits.  Chance is 0.10, and at one worker's rate 4
workers of alexnet-small stayed there (what these defaults fix).  At the defaults, 4 workers of
alexnet-small under dist_async ended at 0.84-0.96 over 10 runs here (2026-12-08; 6 of them two
jobs at once, as in CI), and a CI run gave 0.844; the MLP ended at 0.97; 2 workers see twice
the iterations.  The spread is the stale updates' (asynchronous timing differs from run to run),
well beyond one evaluation's +-0.015 on 360 images.  0.75 leaves room for it and still fails a
default that trains badly (0.50 after 3 epochs at one worker's rate / 4, 0.10 above it).

The 4-worker dist_dssp case is docs/train_scripts.md's example, read from the page and run in
full (test_docs_examples.py excuses it there instead of running it cut to 3 iterations).
"""
import json
import os
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

THRESHOLD = 0.75
STALENESS = {'dist_async': [], 'dist_ssp': ['--staleness', '3'], 'dist_dssp': ['--staleness', '3,15']}
#: the docs' example this file runs: (page, the start of its command)
DOCS_EXAMPLE = ('docs/train_scripts.md',
                'OMP_NUM_THREADS=1 mxnet-ssp-launch -n 4 -s 1 --launcher local')


def docs_example_argv():
    """The docs' example as the checkout's modules (its OMP_NUM_THREADS=1 is set anyway)."""
    from test_docs_examples import COMMANDS, examples
    found = [c for f, _, c in examples() if (f, c[:len(DOCS_EXAMPLE[1])]) == DOCS_EXAMPLE]
    assert len(found) == 1, found
    words = shlex.split(found[0])
    assert words.pop(0) == 'OMP_NUM_THREADS=1', found
    argv = [part for word in words for part in COMMANDS.get(word, [word])]
    launch = len(COMMANDS['mxnet-ssp-launch'])
    assert argv[:launch] == COMMANDS['mxnet-ssp-launch'], argv
    return argv[:launch] + ['--timeout', '240'] + argv[launch:]


def cases():
    for model in ('alexnet-small', 'mlp'):
        for workers in (4, 2):
            for store in STALENESS:
                # the default run: alexnet-small (the model the old defaults broke), 4 workers
                quick = model == 'alexnet-small' and workers == 4
                yield pytest.param(model, workers, store, id='%s-%dw-%s' % (model, workers, store),
                                   marks=() if quick else pytest.mark.slow)


@pytest.mark.integration
@pytest.mark.parametrize('model,workers,store', list(cases()))
def test_the_defaults_train(tmp_path, model, workers, store):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('DMLC_', 'MXNET_SSP_'))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    save = tmp_path / 'run'
    argv = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', str(workers), '-s', '1',
            '--launcher', 'local', '--timeout', '240', sys.executable, '-m',
            'mxnet_ssp.lab.train_cifar', '--kvstore', store, '--model', model,
            '--slowdown', '1:2.5'] + STALENESS[store]
    if (model, workers, store) == ('alexnet-small', 4, 'dist_dssp'):
        # the same job as the page writes it, which leaves --model at its default (the
        # stderr line below checks that it is alexnet-small)
        docs = docs_example_argv()
        assert sorted(docs) == sorted(a for a in argv if a not in ('--model', model)), docs
        argv = docs
    argv += ['--log-interval', '0', '--save-period', '0', '--save-dir', str(save)]
    proc = subprocess.run(argv, env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=270)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(save / 'summary.json') as f:
        summary = json.load(f)
    base = 0.05 if model == 'alexnet-small' else 0.1
    assert summary['lr'] == pytest.approx(base / workers) and summary['momentum'] == 0.9
    assert 'defaults for %s on digits: --lr %g' % (model, base / workers) in proc.stderr
    assert summary['final_accuracy'] >= THRESHOLD, (
        '%s, %d workers, %s: final test accuracy %.3f < %.2f at lr %g'
        % (model, workers, store, summary['final_accuracy'], THRESHOLD, summary['lr']))
