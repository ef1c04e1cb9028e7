"""The product and the lab are two rooms: a job's scheduler, servers and workers load no module
of the lab (mxnet_ssp/lab), a worker loads none of the server's (mxnet_ssp/server) and a server
none of the worker's (mxnet_ssp/worker), and the job runs with none of the lab's extra packages
importable.  A gluon.Trainer job and a Module.fit job on dist_dssp, real processes on loopback;
every process records what it loads (tests/support/rooms_startup/sitecustomize.py)."""
import os
import sys

import pytest

from conftest import ROOT, job_env, run_job

pytestmark = pytest.mark.integration

JOBS = os.path.join(ROOT, 'tests', 'support', 'jobs')
ROOMS_STARTUP = os.path.join(ROOT, 'tests', 'support', 'rooms_startup')


def _loaded(records):
    """role -> list of (pid, set of mxnet_ssp modules) from the record files."""
    out = {}
    for name in sorted(os.listdir(records)):
        role, pid = name[:-4].rsplit('-', 1)
        with open(os.path.join(records, name)) as f:
            out.setdefault(role, []).append((int(pid), set(f.read().split())))
    return out


@pytest.mark.parametrize('api', ['trainer', 'module'])
def test_a_jobs_processes_load_no_lab_module_and_stay_on_their_side(tmp_path, api):
    records = tmp_path / 'records'
    records.mkdir()
    env = job_env(tmp_path, ROOMS_RECORD_DIR=str(records))
    env['PYTHONPATH'] = os.pathsep.join([ROOT, ROOMS_STARTUP])
    env.pop('TESTS_MXNET_OP_CODE_CACHE', None)
    proc = run_job(tmp_path, [sys.executable, os.path.join(JOBS, 'gluon_job.py'), '--api', api,
                              '--kvstore', 'dist_dssp', '--steps', '6',
                              '--out', str(tmp_path / 'out')],
                   workers=2, servers=1, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = _loaded(str(records))
    assert {'scheduler', 'server', 'worker'} <= set(loaded), sorted(loaded)
    assert len(loaded['worker']) == 2 and len(loaded['server']) == 1, loaded.keys()
    # the controller's process (a server starts it) is held to the same; the launcher is not
    # a process of the job (it loads the checks packages register for their scripts)
    others = [(pid, m) for pid, m in loaded.get('other', ()) if 'mxnet_ssp.launch' not in m]
    assert any('mxnet_ssp.controller.process' in m for _, m in others), others
    for role, processes in list(loaded.items()) + [('controller', others)]:
        if role == 'other':
            continue
        for pid, modules in processes:
            lab = sorted(m for m in modules if m == 'mxnet_ssp.lab' or m.startswith('mxnet_ssp.lab.'))
            assert not lab, '%s (pid %d) loaded %s' % (role, pid, lab)
    for pid, modules in loaded['worker']:
        assert 'mxnet_ssp.store' in modules and 'mxnet_ssp.worker.clock_sync' in modules
        server = sorted(m for m in modules if m.startswith('mxnet_ssp.server'))
        assert not server, 'worker (pid %d) loaded %s' % (pid, server)
    for pid, modules in loaded['server']:
        # every push went through the door to the rule
        assert {'mxnet_ssp.server.door', 'mxnet_ssp.server.updater'} <= modules, sorted(modules)
        worker = sorted(m for m in modules if m.startswith('mxnet_ssp.worker')
                        or m in ('mxnet_ssp.store', 'mxnet_ssp.kvstore'))
        assert not worker, 'server (pid %d) loaded %s' % (pid, worker)


def test_the_record_sees_a_lab_import(tmp_path):
    """The recorder itself: a process that imports the lab is seen doing so (the test above
    can fail), and a blocked package is missing there."""
    import subprocess
    records = tmp_path / 'records'
    records.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, ROOMS_STARTUP]),
               ROOMS_RECORD_DIR=str(records), DMLC_ROLE='worker', MXNET_SSP_AUTOLOAD='0')
    code = ('import mxnet_ssp.lab.splits\n'
            'try:\n    import sklearn\nexcept ImportError:\n    print("blocked")\n')
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'blocked'
    (pid, modules), = _loaded(str(records))['worker']
    assert 'mxnet_ssp.lab.splits' in modules
