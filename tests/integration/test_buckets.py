"""Buckets on real MXNet jobs: the same training with one key per array and with buckets.

tests/support/jobs/buckets_job.py trains a small network (a dozen arrays, all small enough for
buckets; per-parameter multipliers; one frozen weight) on data fixed by the worker's rank.
With one worker the servers see the same gradients in the same order either way, so the final
weights must be the same bits (the rules are element-wise and each element gets the same
operations: see mxnet_ssp/server/buckets.py).  Each job writes how many buckets it used,
so a test also fails if buckets were silently not used.
"""
import json
import os
import sys

import numpy as np
import pytest

from conftest import JOBS, fail_msg, job_env, run_job

pytestmark = pytest.mark.integration

JOB = os.path.join(JOBS, 'buckets_job.py')


def train(tmp_path, name, bucket_bytes, args, workers=1, servers=1, **env_extra):
    out = tmp_path / name
    env = job_env(tmp_path, MXNET_SSP_BUCKET_BYTES=bucket_bytes, **env_extra)
    proc = run_job(tmp_path, [sys.executable, JOB, '--out', str(out)] + list(args),
                   workers=workers, servers=servers, env=env)
    assert proc.returncode == 0, fail_msg(proc)
    results = []
    for rank in range(workers):
        with open(str(out / ('info-%d.json' % rank))) as f:
            info = json.load(f)
        with np.load(str(out / ('params-%d.npz' % rank))) as params:
            results.append((info, {k: params[k] for k in params.files}, proc))
    return results


def assert_same_bits(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


CASES = [   # (api, store, rule, servers); the default run takes one of each kind
    ('trainer', 'dist_async', 'sgd', 1),
    ('trainer', 'dist_async', 'dcasgd-a', 1),            # slot mode
    ('module', 'dist_ssp', 'sgd', 2),                     # string keys, two servers
    ('raw', 'dist_async', 'sgd', 1),                      # push/pull, arrays reused at once
    pytest.param('trainer', 'dist_ssp', 'adam', 1, marks=pytest.mark.slow),
    pytest.param('trainer', 'dist_async', 'sasgd', 2, marks=pytest.mark.slow),
    pytest.param('trainer', 'dist_dssp', 'rmsprop', 2, marks=pytest.mark.slow),
    pytest.param('module', 'dist_async', 'adam', 1, marks=pytest.mark.slow),
]


@pytest.mark.parametrize('api,store,rule,servers', CASES)
def test_buckets_give_the_bits_of_one_key_per_array(tmp_path, api, store, rule, servers):
    """With 'sgd' the job with one key per array also runs MXNet's own SGD operator on the
    servers (MXNET_SSP_HOST_UPDATES=0), the job with buckets the servers' NumPy passes
    (the default): the same bits, so both paths are MXNet's."""
    args = ['--api', api, '--store', store, '--rule', rule, '--steps', '5']
    (off_info, off, off_proc), = train(tmp_path, 'off', 0, args, servers=servers,
                                       MXNET_SSP_HOST_UPDATES='0' if rule == 'sgd' else '1')
    assert ('worker[0] data path on one host: buckets of off, chunks off, window off'
            in off_proc.stdout + off_proc.stderr), off_proc.stderr[-3000:]
    # a window of one key (across hosts the default is 4; on loopback none): every push
    # waits for the previous key's pull, and not a bit changes
    (on_info, on, on_proc), = train(tmp_path, 'on', 4 << 20, args, servers=servers,
                                    MXNET_SSP_CHUNK_WINDOW='1')
    assert ('worker[0] data path on one host: buckets of 4194304 bytes, chunks off, window 1'
            in on_proc.stdout + on_proc.stderr), on_proc.stderr[-3000:]
    assert off_info['buckets'] == 0
    # every trained array is small: all but the frozen one and a lone lr_mult 0.5 weight
    # (with 2 servers the groups are split by server, and one more array is alone in its own)
    assert on_info['buckets'] >= 1 and on_info['bucketed'] >= 6 - servers, on_info
    if api == 'raw':
        assert on_info['bucketed'] == 6, on_info
    assert on_info['clock'] == off_info['clock'] == 5
    assert_same_bits(off, on)
    if api == 'trainer':
        # gluon Parameters' multipliers reach the servers (MXNet's pickling drops them)
        assert not on['dense0_bias'].any() and not off['dense0_bias'].any()


def test_weights_mxnet_reorders_at_inference_passes_get_the_bits_of_one_key_per_array(tmp_path):
    """A convolution's and the dense layers' weights go into MKL-DNN's own layout at every
    inference pass between steps (the job checks it); the copies out of buckets must write
    them through MXNet (NumPy copies scrambled them once: docs/benchmarks.md)."""
    args = ['--conv', '--rule', 'sgd', '--steps', '5']
    (_, off, _), = train(tmp_path, 'off', 0, args)
    (info, on, _), = train(tmp_path, 'on', 4 << 20, args)
    assert info['buckets'] >= 1 and info['bucketed'] >= 4, info
    assert_same_bits(off, on)


@pytest.mark.slow
def test_two_devices_per_worker_give_the_bits_of_one_key_per_array(tmp_path):
    args = ['--devices', '2', '--rule', 'sgd', '--steps', '4']
    (_, off, _), = train(tmp_path, 'off', 0, args)
    (info, on, _), = train(tmp_path, 'on', 4 << 20, args)
    assert info['buckets'] >= 1
    assert_same_bits(off, on)


def test_a_rule_not_known_to_be_elementwise_keeps_one_key_per_array(tmp_path):
    (info, _, proc), = train(tmp_path, 'lamb', 4 << 20, ['--rule', 'lamb', '--steps', '3'])
    assert info['buckets'] == 0
    assert 'one key per array: LAMB is not known to be element-wise' in proc.stderr, \
        fail_msg(proc)


@pytest.mark.parametrize('api,servers', [   # raw push/pull: also tests/integration/test_conformance
    ('trainer', 1), ('module', 2), pytest.param('raw', 1, marks=pytest.mark.slow)])
def test_bucketed_dist_sync_gives_the_bits_of_mxnets_own(tmp_path, api, servers):
    """BSP: mxnet-ssp's dist_sync (buckets, the servers' SGD by NumPy) against MXNet's own
    dist_sync (MXNET_SSP_WRAP_SYNC=0: one key per array, MXNet's SGD operator), one worker
    (the servers' sum has one term, so its order is fixed): the same bits.  Without the
    Parameters' lr_mult/wd_mult: MXNet's own dist stores drop them on the servers (the
    optimizer's pickle loses them), mxnet-ssp's apply them (docs/stores.md)."""
    args = ['--api', api, '--store', 'dist_sync', '--rule', 'sgd', '--steps', '5',
            '--no-multipliers']
    (mx_info, mxnet, _), = train(tmp_path, 'mxnet', 4 << 20, args, servers=servers,
                                 MXNET_SSP_WRAP_SYNC='0')
    (info, ours, _), = train(tmp_path, 'ours', 4 << 20, args, servers=servers)
    assert mx_info['store_class'] == 'mxnet.kvstore.kvstore.KVStore', mx_info
    assert info['store_class'] == 'mxnet_ssp.stock_names.dist_sync', info
    assert info['buckets'] >= 1 and info['bucketed'] >= 6 - servers, info
    assert info['clock'] == 5
    assert_same_bits(mxnet, ours)


@pytest.mark.parametrize('store', ['dist_async', 'dist_sync'])
def test_resume_from_states_saved_with_buckets_with_and_without_them(tmp_path, store):
    """Save the optimizer states mid-run with buckets; resume from them with buckets and
    with one key per array: both end where the uninterrupted run ends (the file lists the
    bucket's members as the format before buckets did)."""
    args = ['--rule', 'adam', '--steps', '6', '--store', store]
    (info, whole, _), = train(tmp_path, 'whole', 4 << 20, args + ['--save-at', '3'])
    assert info['buckets'] >= 1
    states = str(tmp_path / 'whole' / 'states')
    for name, bucket_bytes in (('resumed-on', 4 << 20), ('resumed-off', 0)):
        (_, resumed, _), = train(tmp_path, name, bucket_bytes,
                                 args + ['--save-at', '3', '--resume', states])
        for key in ('dense0_weight', 'dense1_weight', 'batchnorm0_gamma', 'dense2_weight'):
            np.testing.assert_array_equal(resumed[key], whole[key], err_msg='%s %s' % (name, key))


def test_two_workers_with_buckets_finish_every_step(tmp_path):
    """Two workers, SSP: the first step learns the plan at a barrier both reach; every step
    after it is counted by both, and the weights they end with are finite."""
    results = train(tmp_path, 'two', 4 << 20, ['--store', 'dist_ssp', '--steps', '4'],
                    workers=2)
    for info, params, _ in results:
        assert info['buckets'] >= 1 and info['clock'] == 4
        assert all(np.isfinite(v).all() for v in params.values())
