"""Clean shutdown: every job exits 0, in bounded time, whatever the script does with its store.

Freeing MXNet's native distributed store waits in ps-lite's finalize barrier
for every node; mxnet-ssp frees it at exit, on every worker, in one phase:
after closing every store and before MXNet's own exit hook stops the engine
(see :mod:`mxnet_ssp.worker.shutdown`).  The fast tests check that phase in each
shape of script (store local to a function, global, closed, created by the
framework from its name) with Module.fit, gluon.Trainer and the raw API; the
slow soak runs many jobs of every shape under every store type, under our
launcher and MXNet's stock tools/launch.py, and requires zero hangs.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import (JOBS, fail_msg, job_env, read_jsonl, run_job, tracker_reports,
                      run_stock_launch)

pytestmark = pytest.mark.integration

BOUND_S = 120       # a clean 2-worker job of shutdown_job.py takes ~5 s here
SYNCHRONOUS = ('dist_ssp', 'dist_dssp')


def _command(out, api, shape, store, phase=True):
    cmd = [sys.executable, os.path.join(JOBS, 'shutdown_job.py'), '--api', api, '--shape', shape,
           '--kvstore', store, '--out', str(out)]
    return cmd + (['--phase'] if phase else [])


def _check_job(tmp_path, proc, out, store, steps):
    """Every worker finished its script, exited 0, and flushed its metrics."""
    assert proc.returncode == 0, fail_msg(proc)
    for rank in (0, 1):
        with open(out / ('done-%d.json' % rank)) as f:
            assert json.load(f)['type'] == store
        if store in SYNCHRONOUS:
            metrics = read_jsonl(tmp_path / 'metrics' / ('worker-%d.jsonl' % rank))
            assert [m['clock'] for m in metrics] == list(range(1, steps + 1)), (rank, metrics[-3:])
            assert ('worker[%d] %s summary: %d iterations' % (rank, store, steps)) in proc.stderr


def _check_phase(out):
    """Between mxnet-ssp's exit hook and MXNet's, every worker had closed and freed its store."""
    for rank in (0, 1):
        with open(out / ('phase-%d.json' % rank)) as f:
            phase = json.load(f)
        assert phase['exit_counts'] == {'close': 1, 'free_native': 1}, (rank, phase)
        if phase['store_alive']:        # the script still holds the store: it is unusable now
            assert phase['native_freed'] and phase['closed'], (rank, phase)


@pytest.mark.parametrize('api,shape,store', [
    # MXNet's fit.py, the store dying with fit(): by default under stock launch.py (below)
    pytest.param('module', 'local', 'dist_ssp', marks=pytest.mark.slow),
    ('module', 'string', 'dist_dssp'),      # Module.fit(kvstore='dist_dssp'), 2 epochs
    pytest.param('trainer', 'global', 'dist_softsync', marks=pytest.mark.slow),
    pytest.param('raw', 'closed', 'dist_async', marks=pytest.mark.slow),
])
def test_store_freed_on_every_worker_before_mxnet_exit_hook(tmp_path, api, shape, store):
    out = tmp_path / 'out'
    proc = run_job(tmp_path, _command(out, api, shape, store), timeout=BOUND_S)
    _check_job(tmp_path, proc, out, store, steps=12)
    _check_phase(out)


def test_store_freed_before_mxnet_exit_hook_under_stock_launch_py(tmp_path):
    out = tmp_path / 'out'
    proc = run_stock_launch(tmp_path, _command(out, 'module', 'local', 'dist_dssp'),
                            timeout=BOUND_S)
    _check_job(tmp_path, proc, out, 'dist_dssp', steps=12)
    _check_phase(out)


def test_a_worker_whose_script_raises_fails_the_job_under_stock_launch_py(tmp_path):
    """Nobody stops the survivors under stock launch.py: the raising worker exits 1 at once
    (not in ps-lite's barrier), the controller fails the other worker, naming it, and the
    server and the scheduler end by themselves (so does the launcher)."""
    out = tmp_path / 'out'
    cmd = _command(out, 'raw', 'global', 'dist_ssp', phase=False) + [
        '--batches', '400', '--epochs', '1', '--raise-rank', '1', '--raise-at', '5']
    env = job_env(tmp_path, MXNET_SSP_TIMEOUT='60')
    proc = run_stock_launch(tmp_path, cmd, env=env, timeout=BOUND_S)
    err = proc.stderr
    assert 'worker 1 fails on purpose at step 5' in err, fail_msg(proc)
    assert 'worker[1]: the training script raised ValueError' in err, fail_msg(proc)
    # worker 0 learns it from the controller: rank 1 left the job without LEAVE
    lines = [line for line in err.splitlines() if line.startswith('worker[0]') or
             'worker[0]:' in line]
    assert any('worker 1' in line or 'rank 1' in line for line in lines), fail_msg(proc)
    assert not (out / 'done-0.json').exists()
    # the stock tracker reports the exit status of each worker and of the server
    assert tracker_reports(err, 1) == 3, fail_msg(proc)
    assert 'mxnet-ssp: scheduler: ' in err, fail_msg(proc)


SHAPES = [('module', 'local'), ('module', 'global'), ('module', 'string'), ('module', 'closed'),
          ('trainer', 'local'), ('trainer', 'global'), ('trainer', 'string'),
          ('raw', 'local'), ('raw', 'closed'), ('raw', 'global')]


@pytest.mark.slow
@pytest.mark.parametrize('store', ['dist_ssp', 'dist_dssp', 'dist_softsync', 'dist_async'])
def test_soak_every_shape_exits_cleanly(tmp_path, store):
    """10 jobs per store type, one per shape; the last two under stock launch.py."""
    times = []
    for i, (api, shape) in enumerate(SHAPES):
        run_dir = tmp_path / ('%s-%s' % (api, shape))
        run_dir.mkdir()
        out = run_dir / 'out'
        started = time.monotonic()
        if i >= len(SHAPES) - 2:
            proc = run_stock_launch(run_dir, _command(out, api, shape, store, phase=False),
                                    timeout=BOUND_S)
        else:
            proc = run_job(run_dir, _command(out, api, shape, store, phase=False),
                           timeout=BOUND_S)
        times.append(time.monotonic() - started)
        _check_job(run_dir, proc, out, store, steps=12)
    sys.stderr.write('%s: %d jobs, exit times %.1f-%.1f s\n'
                     % (store, len(times), min(times), max(times)))


def test_worker_whose_scheduler_never_answers_exits_within_the_timeout(tmp_path):
    """ps-lite waits for the scheduler for ever (seen under stock launch.py when the scheduler
    could not bind its port): the store bounds that wait by MXNET_SSP_TIMEOUT."""
    import socket
    holder = socket.socket()            # bound, never listening: nobody answers on this port
    holder.bind(('127.0.0.1', 0))
    try:
        env = job_env(tmp_path, DMLC_ROLE='worker', DMLC_PS_ROOT_URI='127.0.0.1',
                      DMLC_PS_ROOT_PORT=holder.getsockname()[1], DMLC_NUM_SERVER=1,
                      DMLC_NUM_WORKER=1, DMLC_NODE_HOST='127.0.0.1', MXNET_SSP_TIMEOUT=3)
        code = 'import mxnet as mx, mxnet_ssp\nmx.kv.create("dist_ssp")\nprint("joined")\n'
        started = time.monotonic()
        proc = subprocess.run([sys.executable, '-c', code], env=env, cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=BOUND_S)
        elapsed = time.monotonic() - started
    finally:
        holder.close()
    assert proc.returncode == 1, fail_msg(proc)
    assert 'joined' not in proc.stdout
    assert 'could not join the job within 3 s (MXNET_SSP_TIMEOUT)' in proc.stderr, fail_msg(proc)
    assert '127.0.0.1:%s' % env['DMLC_PS_ROOT_PORT'] in proc.stderr
    assert elapsed < BOUND_S / 2, elapsed
