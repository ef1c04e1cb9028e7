"""Start-up code of the test run's MXNet processes (tests/conftest.py ``job_env`` puts this
folder on their PYTHONPATH; Python imports ``sitecustomize`` after the .pth files, so after
mxnet-ssp's start-up hook and before the script imports MXNet).

With ``TESTS_MXNET_OP_CODE_CACHE`` set to a directory, servers and workers take MXNet's
compiled operator functions from a file there (:mod:`mxnet_ssp_test_op_code`), which the first
of them writes: about 1 s of CPU per process in a run bound by CPU.  Test speed only, never
part of the package.  It does nothing in other processes and never breaks a start-up.
"""
import os
import sys


def _install():
    directory = os.environ.get('TESTS_MXNET_OP_CODE_CACHE', '').strip()
    if directory.lower() in ('', '0', 'false', 'no', 'off', 'none') or os.environ.get('DMLC_ROLE') not in ('worker', 'server'):
        return
    if os.environ.get('MXNET_SSP_AUTOLOAD', '1').strip().lower() in ('0', 'false', 'no', 'off'):
        return
    try:
        from mxnet_ssp_test_op_code import cache_op_code
        cache_op_code(directory)
    except Exception as err:      # a start-up the tests made must still start
        sys.stderr.write('tests: operator code cache not used: %s: %s\n'
                         % (type(err).__name__, err))


_install()
