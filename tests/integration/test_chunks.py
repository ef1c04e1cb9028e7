"""Chunks on real MXNet jobs: the same training with arrays whole and held as chunks.

tests/support/jobs/buckets_job.py trains a small network; a chunk size of a few dozen bytes
(or a kilobyte with ``--conv``) splits its larger arrays into chunks.  With one worker the
servers see the same gradients in the same order either way and the rules are element-wise,
so the final weights must be the same bits.  Each job writes how many arrays it held as
chunks, so a test also fails if chunks were silently not used.
"""
import numpy as np
import pytest

from test_buckets import assert_same_bits, train

pytestmark = pytest.mark.integration


CASES = [   # (api, store, rule, servers, chunk bytes); the default run takes one of each kind
    ('trainer', 'dist_async', 'sgd', 1, 64),
    pytest.param('trainer', 'dist_ssp', 'sgd', 2, 64, marks=pytest.mark.slow),
    ('module', 'dist_ssp', 'sgd', 2, 64),        # string keys: chunks move MXNet's numbering
    pytest.param('module', 'dist_async', 'sgd', 1, 64, marks=pytest.mark.slow),
    ('trainer', 'dist_sync', 'sgd', 2, 64),
    ('trainer', 'dist_async', 'dcasgd-a', 2, 64),  # slot mode: per-worker backups per chunk
    pytest.param('module', 'dist_async', 'dcasgd-a', 2, 64, marks=pytest.mark.slow),
    pytest.param('trainer', 'dist_dssp', 'adam', 2, 64, marks=pytest.mark.slow),
    pytest.param('raw', 'dist_async', 'sgd', 2, 64, marks=pytest.mark.slow),
    pytest.param('module', 'dist_sync', 'sgd', 2, 64, marks=pytest.mark.slow),
    pytest.param('trainer', 'dist_softsync', 'sgd', 2, 64, marks=pytest.mark.slow),
    pytest.param('trainer', 'dist_ssp', 'sasgd', 2, 64, marks=pytest.mark.slow),  # lr/staleness
]


@pytest.mark.parametrize('api,store,rule,servers,chunk', CASES)
def test_chunks_give_the_bits_of_whole_arrays(tmp_path, api, store, rule, servers, chunk):
    args = ['--api', api, '--store', store, '--rule', rule, '--steps', '5']
    (off_info, off, _), = train(tmp_path, 'off', 4 << 20, args, servers=servers,
                                MXNET_SSP_CHUNK_BYTES='0')
    # with a window (the default across hosts; on loopback none): the pipeline's waits must
    # not change a bit
    (on_info, on, _), = train(tmp_path, 'on', 4 << 20, args, servers=servers,
                              MXNET_SSP_CHUNK_BYTES=str(chunk), MXNET_SSP_CHUNK_WINDOW='2')
    assert off_info['chunked'] == 0
    # dense0_weight (120 bytes) and dense1_weight (96 bytes) are above 64 bytes (the frozen
    # weight too, but a frozen weight is never pushed: chunks or whole, it stays)
    assert on_info['chunked'] >= 2 and on_info['chunks'] >= 4, on_info
    # the gradients of one CPU array each go into their chunks by one NumPy copy (the
    # staging copy is for lists of per-device arrays: the next test)
    assert on_info['chunk_host_fills'] == on_info['chunked'], on_info
    # and a fast step (Trainer's pushpull) gathers the pulled chunks by one NumPy copy
    if api == 'trainer':
        assert on_info['chunk_host_gathers'] == on_info['chunked'], on_info
    assert on_info['clock'] == off_info['clock'] == 5
    assert_same_bits(off, on)
    if api == 'trainer':
        # the multipliers reach the chunks' keys (a zero-lr bias stays zero)
        assert not on['dense0_bias'].any()


def test_chunks_of_a_convolution_and_two_devices_give_the_bits_of_whole_arrays(tmp_path):
    args = ['--conv', '--devices', '2', '--rule', 'sgd', '--steps', '4']
    (_, off, _), = train(tmp_path, 'off', 4 << 20, args, servers=2, MXNET_SSP_CHUNK_BYTES='0')
    (info, on, _), = train(tmp_path, 'on', 4 << 20, args, servers=2,
                           MXNET_SSP_CHUNK_BYTES='1024', MXNET_SSP_CHUNK_WINDOW='3')
    assert info['chunked'] >= 3 and info['chunks'] >= 12, info
    assert info['chunk_host_fills'] == 0, info        # two devices: through the staging copy
    assert info['chunk_host_gathers'] == 0, info
    assert_same_bits(off, on)


@pytest.mark.parametrize('api,saved_with,loaded_with', [   # (the job saves through Trainer)
    ('trainer', '64', ('0', '40')),
    pytest.param('trainer', '0', ('64',), marks=pytest.mark.slow),
])
def test_states_saved_with_one_chunk_size_resume_with_another_or_none(
        tmp_path, api, saved_with, loaded_with):
    """Adam (its update counts matter), two servers: states saved mid-run with one chunk size
    (a chunk's state is saved as a piece of its array's, maybe in another server's file) and
    loaded with another, or with arrays whole: the run ends where the uninterrupted run ends."""
    args = ['--api', api, '--rule', 'adam', '--steps', '6', '--store', 'dist_async']
    (info, whole, _), = train(tmp_path, 'whole', 4 << 20, args + ['--save-at', '3'],
                              servers=2, MXNET_SSP_CHUNK_BYTES=saved_with)
    assert (info['chunked'] > 0) == (saved_with != '0'), info
    states = str(tmp_path / 'whole' / 'states')
    for chunk in loaded_with:
        (rinfo, resumed, _), = train(tmp_path, 'resumed-%s' % chunk, 4 << 20,
                                     args + ['--save-at', '3', '--resume', states],
                                     servers=2, MXNET_SSP_CHUNK_BYTES=chunk)
        assert (rinfo['chunked'] > 0) == (chunk != '0'), rinfo
        for key in whole:
            np.testing.assert_array_equal(resumed[key], whole[key],
                                          err_msg='chunks %s -> %s: %s' % (saved_with, chunk, key))


@pytest.mark.parametrize('store,staleness,bound', [
    ('dist_ssp', '2', 2), pytest.param('dist_dssp', '1,3', 3, marks=pytest.mark.slow)])
def test_leads_stay_within_the_bound_and_reads_see_every_chunk(marker_job, tmp_path, store,
                                                                staleness, bound):
    """tests/support/jobs/marker_job.py with its marker array (3 workers x 12 steps: 144
    bytes) in 3 chunks on 2 servers and one worker slow: every release within the bound, and
    every pulled weight holds each gradient its release counts, in every chunk."""
    from test_integration import _check_bound_from_clocks, _check_read_guarantee, _metrics
    from conftest import fail_msg, job_env
    iters = 12
    proc, steps = marker_job(workers=3, servers=2, store=store, staleness=staleness,
                             iters=iters, slow_rank=0, slow_seconds=0.05, base_seconds=0.005,
                             env=job_env(tmp_path, MXNET_SSP_CHUNK_BYTES='64'))
    assert proc.returncode == 0, fail_msg(proc)
    assert '1 array in 3 chunks' in proc.stderr, fail_msg(proc)
    _check_read_guarantee(steps, iters)
    assert _check_bound_from_clocks(_metrics(tmp_path), bound) <= bound


def _train_digits(tmp_path, name, chunk_bytes):
    """mxnet-ssp-train's alexnet-small on digits, 1 worker, 2 servers, 2 epochs."""
    import json
    import os
    import subprocess
    import sys
    from conftest import ROOT
    env = {k: v for k, v in os.environ.items() if not k.startswith(('DMLC_', 'MXNET_SSP_'))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS='1', MXNET_SSP_CHUNK_BYTES=chunk_bytes)
    save = tmp_path / name
    argv = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', '1', '-s', '2', '--launcher',
            'local', '--timeout', '120', sys.executable, '-m', 'mxnet_ssp.lab.train_cifar',
            '--kvstore', 'dist_ssp', '--model', 'alexnet-small', '--num-epochs', '2',
            '--log-interval', '0', '--save-period', '0', '--save-dir', str(save)]
    proc = subprocess.run(argv, env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(save / 'summary.json') as f:
        return json.load(f), proc


def test_training_with_chunks_gives_the_accuracy_of_whole_arrays(tmp_path):
    """A real training run (convolutions and dense layers, whose arrays MKL-DNN keeps in its
    own layout after a forward pass, where a view of the flat elements is not the array):
    chunks read gradients and write weights whole, so one worker ends where arrays whole
    end, and the final pull of the servers' weights works."""
    whole, _ = _train_digits(tmp_path, 'whole', '0')
    chunked, proc = _train_digits(tmp_path, 'chunked', '16384')
    assert 'in 7 chunks' in proc.stderr or ' chunks (' in proc.stderr, proc.stderr[-3000:]
    assert chunked['final_accuracy'] == whole['final_accuracy'], (chunked, whole)
