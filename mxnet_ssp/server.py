"""What runs inside MXNet's server processes for the SSP stores.

The worker-side store sends a :class:`ServerOptimizer` with
``kv.set_optimizer``; every server unpickles it (so ``mxnet_ssp`` must be
installed on every server host) and MXNet calls it, as the updater, for every
push.  It applies the user's optimizer unchanged, with one exception: pushes of a discovery
request (a vector of :data:`DISCOVERY_LEN` elements starting with
:data:`MAGIC`) to the reserved key (:data:`DISCOVERY_KEY`, or
:data:`DISCOVERY_KEY_STR` in stores that use string keys, which the worker
maps to an integer the server cannot predict).  That key is small, so ps-lite
places it on exactly one server; the first push to it starts the synchronization
controller (:class:`mxnet_ssp.controller.ControllerServer`) in that server
process, on a background thread, and every push to it writes the
controller's address and the job's secret into the key's value, which the
worker then pulls.  That is how workers find the controller with nothing but
the KVStore, under any launcher.

This module must import in a server process, where ``import mxnet`` has not
returned (the server loop runs inside it): it only touches MXNet submodules
that are loaded before the loop starts.
"""
import json
import logging
import os
import secrets
import socket
import threading

import numpy as np

__all__ = ['DISCOVERY_KEY', 'DISCOVERY_KEY_STR', 'DISCOVERY_LEN', 'MAGIC', 'ServerOptimizer', 'encode_blob',
           'decode_blob', 'advertised_host']

logger = logging.getLogger(__name__)

#: Reserved integer key for controller discovery.  MXNet places a small key on
#: server (key * 9973) % num_servers, computed in a C int: keep key * 9973 < 2**31.
DISCOVERY_KEY = 199999
#: The same key for stores whose keys are strings (MXNet forbids mixing the two).
DISCOVERY_KEY_STR = '__mxnet_ssp_discovery__'
#: Length (float32 elements) of the discovery value: a header of len(MAGIC) + 4
#: elements, then one byte per element.  An unusual (prime) size, so the server
#: only looks inside pushes of exactly this size.
DISCOVERY_LEN = 1031
#: First elements of every discovery message (exactly representable in float32).
MAGIC = (-8191.0, 131071.0, -524287.0)

_lock = threading.Lock()
_controller = None
_controller_answer = None


def encode_blob(obj):
    """Encode a JSON-able object as a float32 vector of DISCOVERY_LEN bytes."""
    raw = json.dumps(obj, sort_keys=True).encode('utf-8')
    head = len(MAGIC) + 4
    if len(raw) > DISCOVERY_LEN - head:
        raise ValueError('discovery message too long (%d bytes)' % len(raw))
    out = np.zeros(DISCOVERY_LEN, dtype=np.float32)
    out[:len(MAGIC)] = MAGIC
    out[len(MAGIC):head] = [len(raw) >> 24 & 255, len(raw) >> 16 & 255, len(raw) >> 8 & 255,
                            len(raw) & 255]
    out[head:head + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return out


def is_discovery(values):
    """True if `values` (NDArray) is a discovery message: right size and magic header."""
    if values.shape != (DISCOVERY_LEN,):
        return False
    return tuple(values[:len(MAGIC)].asnumpy().tolist()) == MAGIC


def decode_blob(values):
    """Inverse of :func:`encode_blob`; returns None if `values` is not a message."""
    values = np.asarray(values)
    if values.shape != (DISCOVERY_LEN,) or tuple(values[:len(MAGIC)].tolist()) != MAGIC:
        return None
    values = values.round().astype(np.int64)
    b = values[len(MAGIC):len(MAGIC) + 4]
    length = int(b[0]) << 24 | int(b[1]) << 16 | int(b[2]) << 8 | int(b[3])
    head = len(MAGIC) + 4
    if length <= 0 or length > DISCOVERY_LEN - head:
        return None
    raw = bytes(int(v) & 255 for v in values[head:head + length])
    return json.loads(raw.decode('utf-8'))


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


def _start_controller(request):
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


class ServerOptimizer:
    """The updater object the SSP stores send to the servers.

    Applies `optimizer` to every push except discovery requests.  Attribute
    access falls through to `optimizer`, so MXNet's ``Updater`` sees the
    user's optimizer (learning rate, multi-precision flag, ...).

    Parameters
    ----------
    optimizer : mxnet.optimizer.Optimizer
        The user's optimizer; pickled with this object.
    """

    def __init__(self, optimizer):
        self.optimizer = optimizer
        # MXNet's Updater batches keys when aggregate_num > 0; the server calls
        # it with one key at a time anyway, and batching would hide the reserved key.
        self.aggregate_num = 0
        self._discovery_keys = set()

    def __getattr__(self, name):
        if name.startswith('__') or name == 'optimizer':
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    def create_state_multi_precision(self, index, weight):
        """Optimizer state for `index`; none for the discovery key."""
        if weight.shape == (DISCOVERY_LEN,) and is_discovery(weight):
            self._discovery_keys.add(index)
            return None
        return self.optimizer.create_state_multi_precision(index, weight)

    def create_state(self, index, weight):
        """Optimizer state for `index`; none for the discovery key."""
        return self.create_state_multi_precision(index, weight)

    def update_multi_precision(self, index, weight, grad, state):
        """Apply one pushed gradient, or answer a discovery request."""
        if self._take_discovery(index, weight, grad):
            return
        self.optimizer.update_multi_precision(index, weight, grad, state)

    def update(self, index, weight, grad, state):
        """Apply one pushed gradient, or answer a discovery request."""
        if self._take_discovery(index, weight, grad):
            return
        self.optimizer.update(index, weight, grad, state)

    def _take_discovery(self, index, weight, grad):
        if index not in self._discovery_keys and not (
                grad.shape == (DISCOVERY_LEN,) and is_discovery(grad)):
            return False
        self._discovery_keys.add(index)
        self._answer_discovery(weight, grad)
        return True

    @staticmethod
    def _answer_discovery(weight, grad):
        try:
            request = decode_blob(grad.asnumpy())
            if not request or request.get('v') != 1:
                answer = {'error': 'malformed discovery request'}
            else:
                answer = _start_controller(request)
        except Exception as err:  # reported to the worker, which fails with it
            logger.exception('server: cannot start the synchronization controller')
            answer = {'error': '%s: %s' % (type(err).__name__, err)}
        from mxnet import ndarray as nd
        weight[:] = nd.array(encode_blob(answer), dtype=weight.dtype, ctx=weight.context)
