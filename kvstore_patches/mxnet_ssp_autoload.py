"""Make ``dist_ssp`` / ``dist_dssp`` available to scripts that never import mxnet_ssp.

Installed at the root of site-packages together with ``mxnet_ssp_autoload.pth``,
which Python runs at every start-up.  It does nothing (and imports nothing
beyond ``os`` and ``sys``) unless the process is a worker of an MXNet
parameter-server job (``DMLC_ROLE=worker``) and ``MXNET_SSP_AUTOLOAD`` is not
``0``.  In a worker, it waits for the script's own ``import mxnet`` to finish
and then imports ``mxnet_ssp``, which registers the store types with
``mx.kv.create``.  Scheduler and server processes need no patch: servers load
mxnet-ssp's updater when they unpickle the optimizer the workers send.
"""
import os
import sys

_ENV = 'MXNET_SSP_AUTOLOAD'


class _AfterMXNet:
    """A meta-path finder that runs ``import mxnet_ssp`` right after ``mxnet`` loads."""

    def find_spec(self, name, path=None, target=None):
        if name != 'mxnet':
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            try:
                import mxnet_ssp  # noqa: F401  (registers the store types)
            except Exception as err:  # never break the user's import of mxnet
                sys.stderr.write('mxnet-ssp: autoload failed: %s: %s\n' % (type(err).__name__, err))

        spec.loader.exec_module = exec_then_register
        return spec


def _install():
    if os.environ.get('DMLC_ROLE') != 'worker':
        return
    if os.environ.get(_ENV, '1').strip().lower() in ('0', 'false', 'no', 'off'):
        return
    if 'mxnet' in sys.modules:
        return
    sys.meta_path.insert(0, _AfterMXNet())


_install()
