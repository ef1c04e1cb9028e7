"""Discovery: how a worker finds the controller, and how a server answers.

A worker-side store finds the synchronization controller with nothing but the
KVStore (so under any launcher): :func:`request_controller` pushes a request
(encoded by :mod:`mxnet_ssp.channel`) to a reserved key and pulls the answer
back.  The key is small, so ps-lite places it on exactly one server, whose
updater (:class:`mxnet_ssp.server.ServerOptimizer`) hands the push to
:func:`answer_discovery`.  The first request starts the controller
(:class:`mxnet_ssp.controller.ControllerServer`) in that server process, on a
background thread; every request is answered with the controller's address
and the job's secret, written into the key's value.

The server side runs where ``import mxnet`` has not returned: MXNet is imported lazily, and
only submodules loaded before the server loop starts.  Importing this module does not import
the controller (the server side imports it on the first request).
"""
import logging
import os
import secrets
import socket
import threading

from .channel import DISCOVERY_LEN, decode_blob, encode_blob

__all__ = ['request_controller', 'DiscoveryError', 'answer_discovery', 'advertised_host']

logger = logging.getLogger(__name__)

# one controller per server process, started by the first request
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


class DiscoveryError(RuntimeError):
    """The servers did not give a usable controller address (the message says why)."""


def request_controller(native, key, config, num_workers, rank):
    """Worker side: ask the servers for the controller of this job; return the answer dict.

    Initializes `key` on `native` (MXNet's store; collective), pushes the request, pulls the
    answer, and checks it: an error the servers reported, no answer at all (mxnet-ssp not
    installed on the servers), or a controller running other settings than this worker's
    raise :class:`DiscoveryError`.  The servers answering is bounded by ``config.timeout``.
    """
    from mxnet import ndarray as nd
    import numpy as np
    from . import _process
    from . import config as cfg
    request = {'v': 1, 'store': config.store, 'num_workers': num_workers,
               's_lower': config.s_lower, 's_upper': config.s_upper,
               'mode': config.mode, 'timeout': config.timeout,
               'metrics_dir': config.metrics_dir}
    native.init(key, nd.zeros(DISCOVERY_LEN, dtype=np.float32))
    native.push(key, nd.array(encode_blob(request), dtype=np.float32))
    reply = nd.zeros(DISCOVERY_LEN, dtype=np.float32)
    native.pull(key, out=reply)
    with _process.bounded(config.timeout,
                          'worker[%d]: the servers did not answer the controller discovery '
                          'within %g s (%s): a server process died or is stopped'
                          % (rank, config.timeout, cfg.ENV_TIMEOUT)):
        answer = decode_blob(reply.asnumpy())
    if not answer or 'port' not in answer and 'error' not in answer:
        raise DiscoveryError('worker[%d]: no synchronization controller answered on the servers '
                             '(%r); is mxnet-ssp installed on every server host?'
                             % (rank, answer))
    if 'error' in answer:
        raise DiscoveryError('worker[%d]: the servers refused to start the controller: %s'
                             % (rank, answer['error']))
    mine = (request['s_lower'], request['s_upper'], request['mode'])
    theirs = (answer['s_lower'], answer['s_upper'], answer['mode'])
    if mine != theirs:
        raise DiscoveryError('worker[%d]: this worker was configured with staleness [%d, %d] '
                             'mode %s but the controller runs [%d, %d] mode %s: set %s and %s '
                             'the same for every worker'
                             % ((rank,) + mine + theirs + (cfg.ENV_STALENESS, cfg.ENV_DSSP_MODE)))
    return answer
