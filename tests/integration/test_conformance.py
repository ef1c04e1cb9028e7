"""Conformance with MXNet of the stores mxnet-ssp registers under MXNet's own names.

tests/jobs/conformance_job.py runs the themes of MXNet 1.9.1's nightly distributed KVStore
tests (written anew) as a real job under MXNet's stock tools/launch.py, 2 workers and 2
servers (big arrays split over both).  Each worker asserts what MXNet determines (values
after a barrier, exact sums) and records every outcome.  Here:

* the default run (mxnet-ssp's store under the name) must pass every case, record the
  outcomes MXNet gives (which Trainer configurations raise, which exceptions invalid
  operations raise), serve the data-path cases itself (its buckets on the servers), and
  hand the row_sparse and compression cases to MXNet's own store with one log line per
  worker;
* ``test_mxnet_reference`` (slow) runs the same jobs on MXNet's own store
  (``MXNET_SSP_WRAP_ASYNC=0``) and compares every record of the two runs: the expectations
  here are MXNet's, not ours.
"""
import json
import os
import re
import sys

import pytest

from conftest import JOBS, fail_msg, job_env, run_stock_launch

pytestmark = pytest.mark.integration

WORKERS, SERVERS = 2, 2
CASES = {'data_path': ['sgd_buckets', 'multi_precision', 'dense', 'invalid'],
         'handed_off': ['trainer', 'row_sparse', 'compression']}
#: What MXNet 1.9.1 does (checked by test_mxnet_reference against MXNet's own store).
TRAINER = {   # gluon.Trainer(kvstore=<dist_async store>, update_on_kvstore=...)
    'default/False': {'raised': 'ValueError'},
    'default/True': {'initialized': True, 'update_on_kvstore': True},
    'default/None': {'initialized': True, 'update_on_kvstore': True},
    'row_sparse/False': {'raised': 'ValueError'},
    'row_sparse/True': {'initialized': True, 'update_on_kvstore': True},
    'row_sparse/None': {'initialized': True, 'update_on_kvstore': True},
    'is_mxnet_kvstore': True, 'type': 'dist_async'}
INVALID = {'str_key_after_int': 'MXNetError', 'pull_without_out': 'AssertionError',
           'init_key_list_length': 'AssertionError', 'type_of_store': 'TypeError'}


def _job(tmp_path, store, group, wrap):
    out = tmp_path / ('out-%s-%s' % (group, wrap))
    env = job_env(tmp_path, MXNET_SSP_WRAP_ASYNC=wrap)
    proc = run_stock_launch(tmp_path, [sys.executable, os.path.join(JOBS, 'conformance_job.py'),
                                       '--kvstore', store, '--group', group, '--out', str(out)],
                            workers=WORKERS, servers=SERVERS, env=env, timeout=150)
    for rank in range(WORKERS):
        for case in CASES[group]:
            assert 'worker %d passed %s' % (rank, case) in proc.stdout, fail_msg(proc)
    records = []
    for rank in range(WORKERS):
        with open(os.path.join(str(out), 'conformance-%d.json' % rank)) as f:
            records.append(json.load(f))
    return proc, records


@pytest.mark.parametrize('group', sorted(CASES))
def test_dist_async_answers_as_mxnet(tmp_path, group):
    proc, records = _job(tmp_path, 'dist_async', group, '1')
    for rec in records:
        assert rec['store_class'] == 'mxnet_ssp.stock_names.dist_async', rec
        if group == 'handed_off':
            assert rec['cases']['trainer'] == TRAINER, rec['cases']['trainer']
            assert 'row_sparse' in rec['handed_off'], rec
        else:
            assert rec['cases']['invalid'] == INVALID, rec['cases']['invalid']
            assert rec['handed_off'] is None, rec
    handed = re.findall(r"worker\[(\d)\] dist_async: .*MXNet's own dist_async store serves "
                        r"this job from here on", proc.stderr)
    if group == 'handed_off':
        assert sorted(handed) == [str(r) for r in range(WORKERS)], fail_msg(proc)
        assert 'KVStore with row_sparse parameters' not in proc.stderr, fail_msg(proc)
    else:
        assert handed == [], fail_msg(proc)
        # the small arrays of the SGD case travelled in mxnet-ssp's buckets
        assert re.search(r'server: buckets \d+ buckets holding 6 arrays', proc.stderr), \
            fail_msg(proc)


@pytest.mark.slow
@pytest.mark.parametrize('group', sorted(CASES))
def test_mxnet_reference(tmp_path, group):
    """The same job on MXNet's own store gives the same records, case by case."""
    _, ours = _job(tmp_path, 'dist_async', group, '1')
    _, mxnet = _job(tmp_path, 'dist_async', group, '0')
    for a, b in zip(ours, mxnet):
        assert b['store_class'] == 'mxnet.kvstore.kvstore.KVStore', b
        assert a['cases'] == b['cases']


@pytest.mark.parametrize('store', ['dist_ssp'])
def test_a_store_the_user_named_refuses_what_it_does_not_serve(tmp_path, store):
    """row_sparse arrays and gradient compression: a clear error naming the store and what
    to use instead (not MXNet's TypeError, not a silent approximation)."""
    out = tmp_path / 'out'
    proc = run_stock_launch(tmp_path, [sys.executable, os.path.join(JOBS, 'conformance_job.py'),
                                       '--kvstore', store, '--group', 'refusals', '--out',
                                       str(out)], workers=WORKERS, servers=1, timeout=150)
    for rank in range(WORKERS):
        assert 'worker %d passed refusals' % rank in proc.stdout, fail_msg(proc)
        with open(os.path.join(str(out), 'conformance-%d.json' % rank)) as f:
            got = json.load(f)['cases']['refusals']
        assert got['row_sparse_init'].startswith('SSPError: worker[%d]: %s: key 700 holds '
                                                 'row_sparse arrays' % (rank, store)), got
        assert 'use dense parameters' in got['row_sparse_init'], got
        assert 'dist_async' in got['row_sparse_init'], got
        assert got['compression'].startswith('SSPError: worker[%d]: %s does not support '
                                             'gradient compression' % (rank, store)), got
