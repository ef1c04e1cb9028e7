"""Make ``dist_ssp`` / ``dist_dssp`` available to scripts that never import mxnet_ssp.

Installed at the root of site-packages together with ``mxnet_ssp_autoload.pth``,
which Python runs at every start-up.  It does nothing (and imports nothing
beyond ``os`` and ``sys``) unless the process has a role in an MXNet
parameter-server job (``DMLC_ROLE``) and ``MXNET_SSP_AUTOLOAD`` is not ``0``.
In a worker it imports ``mxnet_ssp``, which does not import MXNet but
registers the store types with ``mx.kv.create`` as soon as the script's own
``import mxnet`` finishes.  Scheduler and server processes need no patch to
work (servers load mxnet-ssp's updater when they unpickle the optimizer the
workers send); there ``import mxnet`` runs the server loop and exits, and no
code of the script runs after it.  There the hook does three things:

* it makes them end when their job has failed (a worker died, the controller
  failed the job), where MXNet's loop would wait for ever
  (:func:`mxnet_ssp.ps.job_watch.follow_job`: a thread that starts when
  ``import mxnet`` begins);
* it saves that import the second it spends loading scikit-learn, SciPy and OpenCV
  for features a server never uses, and setuptools for two version comparisons
  (:func:`mxnet_ssp._hooks.skip_optional_mxnet_imports`), and a scheduler's import the
  whole of MXNet's Python package, which a scheduler never uses (about 2 s of CPU): it makes
  the package's C calls from ``libmxnet.so`` directly (:mod:`mxnet_ssp.server.scheduler`);
* with ``MXNET_SSP_METRICS_DIR`` set, it writes the process's CPU time when it ends
  (:func:`mxnet_ssp.cpu_record.record_cpu`).

A worker imports MXNet as stock MXNet does, scikit-learn and SciPy included, unless
``MXNET_SSP_LEAN_WORKERS`` is on: then it skips them as servers do (about 1.2 s of CPU).
"""
import os
import sys

_ENV = 'MXNET_SSP_AUTOLOAD'      # mxnet_ssp.config.ENV_AUTOLOAD; read here, before the package
_OFF = ('0', 'false', 'no', 'off')  # the "no" spellings of mxnet_ssp.config.FLAG_VALUES
_LEAN = 'MXNET_SSP_LEAN_WORKERS'  # mxnet_ssp.config.ENV_LEAN_WORKERS
_ON = ('1', 'true', 'yes', 'on')    # its "yes" spellings


def _install():
    role = os.environ.get('DMLC_ROLE')
    if role not in ('worker', 'server', 'scheduler'):
        return
    if os.environ.get(_ENV, '1').strip().lower() in _OFF:
        return
    try:
        if role == 'worker':
            if os.environ.get(_LEAN, '').strip().lower() in _ON:
                from mxnet_ssp._hooks import skip_optional_mxnet_imports
                skip_optional_mxnet_imports()
            import mxnet_ssp  # noqa: F401
        else:
            from mxnet_ssp._hooks import skip_optional_mxnet_imports
            from mxnet_ssp.ps.job_watch import follow_job
            from mxnet_ssp.config import metrics_dir_if_set
            from mxnet_ssp.cpu_record import record_cpu
            skip_optional_mxnet_imports()
            follow_job(role)
            record_cpu(role, metrics_dir_if_set())
            if role == 'scheduler':
                from mxnet_ssp.server.scheduler import serve_at_import
                serve_at_import()
    except Exception as err:  # never break the start-up of the user's script
        sys.stderr.write('mxnet-ssp: autoload failed: %s: %s\n' % (type(err).__name__, err))


_install()
