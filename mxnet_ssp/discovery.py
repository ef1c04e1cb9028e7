"""The servers' side of discovery: start the controller, answer with its address.

A worker-side store finds the synchronization controller with nothing but the
KVStore (so under any launcher): it pushes a discovery request (encoded by
:mod:`mxnet_ssp.channel`) to a reserved key and pulls the answer back.  The key
is small, so ps-lite places it on exactly one server, whose updater
(:class:`mxnet_ssp.server.ServerOptimizer`) hands the push to
:func:`answer_discovery`.  The first request starts the controller
(:class:`mxnet_ssp.controller.ControllerServer`) in that server process, on a
background thread; every request is answered with the controller's address
and the job's secret, written into the key's value, which the worker then
pulls.

Runs in a server process, where ``import mxnet`` has not returned: MXNet is
imported lazily, and only submodules loaded before the server loop starts.
"""
import logging
import os
import secrets
import socket
import threading

from .channel import decode_blob, encode_blob

__all__ = ['answer_discovery', 'advertised_host']

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_controller = None
_controller_answer = None


def advertised_host(environ=None):
    """The address of this host that workers can reach.

    ``DMLC_NODE_HOST`` if the launcher set it; otherwise the local address the
    kernel would use to reach the scheduler (``DMLC_PS_ROOT_URI``), which is on
    the network every worker already uses.
    """
    env = os.environ if environ is None else environ
    if env.get('DMLC_NODE_HOST'):
        return env['DMLC_NODE_HOST']
    root = env.get('DMLC_PS_ROOT_URI', '127.0.0.1')
    port = int(env.get('DMLC_PS_ROOT_PORT', '9000') or 9000)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((root, port))       # UDP: no packet is sent
        return probe.getsockname()[0]
    except OSError:
        return '127.0.0.1'
    finally:
        probe.close()


def start_controller(request):
    """Start the controller for `request` once per process; return the answer dict."""
    global _controller, _controller_answer
    from .controller import ControllerServer      # imported lazily: workers never need it
    from .sync import SyncPolicy
    with _lock:
        if _controller is not None:
            return _controller_answer
        num_workers = int(request['num_workers'])
        policy = SyncPolicy(num_workers, int(request['s_lower']), int(request['s_upper']),
                            mode=request['mode'])
        metrics_path = None
        if request.get('metrics_dir'):
            os.makedirs(request['metrics_dir'], exist_ok=True)
            metrics_path = os.path.join(request['metrics_dir'], 'controller.jsonl')
        secret = secrets.token_bytes(32)
        host = advertised_host()
        server = ControllerServer(policy, secret, host=host, port=0,
                                  timeout=float(request['timeout']),
                                  metrics_path=metrics_path).start()
        _controller = server
        bound_host, bound_port = server.address
        _controller_answer = {'host': bound_host, 'port': bound_port, 'secret': secret.hex(),
                              's_lower': policy.s_lower, 's_upper': policy.s_upper,
                              'mode': policy.mode}
        logger.info('server: %s controller for %d workers, staleness [%d, %d] mode %s, at %s:%d',
                    request['store'], num_workers, policy.s_lower, policy.s_upper, policy.mode,
                    bound_host, bound_port)
        return _controller_answer


def answer_discovery(weight, grad):
    """Answer the discovery request `grad` in `weight` (the reserved key's value).

    Errors (a malformed request, a controller that cannot start) are answered too, so the
    worker fails with them instead of waiting.
    """
    try:
        request = decode_blob(grad.asnumpy())
        if not request or request.get('v') != 1:
            answer = {'error': 'malformed discovery request'}
        else:
            answer = start_controller(request)
    except Exception as err:  # reported to the worker, which fails with it
        logger.exception('server: cannot start the synchronization controller')
        answer = {'error': '%s: %s' % (type(err).__name__, err)}
    from mxnet import ndarray as nd
    weight[:] = nd.array(encode_blob(answer), dtype=weight.dtype, ctx=weight.context)
