"""Conformance with MXNet of the stores mxnet-ssp registers under MXNet's own names.

tests/support/jobs/conformance_job.py runs the themes of MXNet 1.9.1's nightly distributed KVStore
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
         'handed_off': ['trainer', 'row_sparse', 'compression'],
         'allreduce': ['allreduce']}
#: The groups each store runs (update_on_kvstore=False exists for dist_sync only).
GROUPS = {'dist_async': ['data_path', 'handed_off'],
          'dist_sync': ['data_path', 'handed_off', 'allreduce']}
WRAP = {'dist_async': 'MXNET_SSP_WRAP_ASYNC', 'dist_sync': 'MXNET_SSP_WRAP_SYNC'}
#: What MXNet 1.9.1 does (checked by test_mxnet_reference against MXNet's own store):
#: gluon.Trainer(kvstore=<store>, update_on_kvstore=...) with dense and row_sparse weights.
UPDATES = {'dist_async': {'default/False': {'raised': 'ValueError'}},
           'dist_sync': {'default/False': {'initialized': True, 'update_on_kvstore': False}}}


def _trainer(store):
    want = {'default/True': {'initialized': True, 'update_on_kvstore': True},
            'default/None': {'initialized': True, 'update_on_kvstore': True},
            'row_sparse/False': {'raised': 'ValueError'},
            'row_sparse/True': {'initialized': True, 'update_on_kvstore': True},
            'row_sparse/None': {'initialized': True, 'update_on_kvstore': True},
            'is_mxnet_kvstore': True, 'type': store}
    want.update(UPDATES[store])
    return want


INVALID = {'str_key_after_int': 'MXNetError', 'pull_without_out': 'AssertionError',
           'init_key_list_length': 'AssertionError', 'type_of_store': 'TypeError'}


def _job(tmp_path, store, group, wrap):
    out = tmp_path / ('out-%s-%s' % (group, wrap))
    env = job_env(tmp_path, **{WRAP[store]: wrap})
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


STORE_GROUPS = [(store, group) for store in sorted(GROUPS) for group in GROUPS[store]]


@pytest.mark.parametrize('store,group', STORE_GROUPS)
def test_the_store_answers_as_mxnet(tmp_path, store, group):
    proc, records = _job(tmp_path, store, group, '1')
    for rec in records:
        assert rec['store_class'] == 'mxnet_ssp.stock_names.%s' % store, rec
        if group == 'handed_off':
            assert rec['cases']['trainer'] == _trainer(store), rec['cases']['trainer']
            assert 'row_sparse' in rec['handed_off'], rec
        elif group == 'allreduce':
            # MXNet's own store takes this case over at the first push; its weights are
            # recorded, not compared (docs/stores.md: MXNet's own dist_sync is not
            # deterministic here)
            assert rec['cases']['allreduce']['update_on_kvstore'] is False, rec
            assert 'set_optimizer' in rec['handed_off'], rec
        else:
            assert rec['cases']['invalid'] == INVALID, rec['cases']['invalid']
            assert rec['handed_off'] is None, rec
    handed = re.findall(r"worker\[(\d)\] %s: .*MXNet's own %s store serves this job from "
                        r"here on" % (store, store), proc.stderr)
    if group in ('handed_off', 'allreduce'):
        assert sorted(handed) == [str(r) for r in range(WORKERS)], fail_msg(proc)
        assert 'KVStore with row_sparse parameters' not in proc.stderr, fail_msg(proc)
    else:
        assert handed == [], fail_msg(proc)
        # the small arrays of the SGD case travelled in mxnet-ssp's buckets
        assert re.search(r'server\[0\]: 6 arrays in \d+ buckets?', proc.stderr), \
            fail_msg(proc)


@pytest.mark.slow
@pytest.mark.parametrize('store,group', STORE_GROUPS)
def test_mxnet_reference(tmp_path, store, group):
    """The same job on MXNet's own store gives the same records, case by case."""
    if group == 'allreduce':
        pytest.skip('MXNet\'s own dist_sync with update_on_kvstore=False is not deterministic '
                    'here: 4 of 6 runs ended with weights that differ between the workers '
                    '(docs/stores.md, "BSP: dist_sync"); mxnet-ssp\'s hands this case to the '
                    'same native store, and test_the_store_answers_as_mxnet checks it')
    _, ours = _job(tmp_path, store, group, '1')
    _, mxnet = _job(tmp_path, store, group, '0')
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
