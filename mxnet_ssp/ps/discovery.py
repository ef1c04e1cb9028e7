"""Discovery: how a worker finds the controller, and how a server answers.

A worker-side store finds the synchronization controller with nothing but the
KVStore (so under any launcher): :func:`request_controller` pushes a request
(encoded by :mod:`mxnet_ssp.ps.channel`) to a reserved key and pulls the answer
back.  The key is small, so ps-lite places it on exactly one server, whose
updater (:class:`mxnet_ssp.ps.server.ServerOptimizer`) hands the push to
:func:`answer_discovery`.  The first request starts the controller
(:class:`mxnet_ssp.controller.server.ControllerServer`) in that server process, on a
background thread; every request is answered with the controller's address
and the job's secret, written into the key's value.

The server side runs where ``import mxnet`` has not returned: MXNet is imported lazily, and
only submodules loaded before the server loop starts.  Importing this module does not import
the controller (the server side imports it on the first request).
"""
import json
import logging
import os
import secrets
import socket
import threading

from .. import config as cfg
from ..core.names import CONTROLLER_METRICS
from .channel import DISCOVERY_LEN, decode_blob, encode_blob
from .follow import controller_failed, follow_controller_process

__all__ = ['request_controller', 'DiscoveryError', 'answer_discovery', 'advertised_host']

logger = logging.getLogger(__name__)

# one controller per server process, started by the first request
_lock = threading.Lock()
_controller = None
_controller_answer = None


def advertised_host(environ=None):
    """The address of this host that workers can reach.

    What ps-lite binds and advertises, in its order: ``DMLC_NODE_HOST`` if the launcher set
    it; else the IPv4 address of the interface ``DMLC_INTERFACE`` names (a host with several
    networks: the one the job's traffic should take); otherwise the local address the
    kernel would use to reach the scheduler (``DMLC_PS_ROOT_URI``), which is on the network
    every worker already uses.
    """
    env = os.environ if environ is None else environ
    if env.get('DMLC_NODE_HOST'):
        return env['DMLC_NODE_HOST']
    if env.get('DMLC_INTERFACE'):
        address = interface_address(env['DMLC_INTERFACE'])
        if address is not None:
            return address
        logger.warning('DMLC_INTERFACE=%s: no such interface with an IPv4 address on this '
                       'host; advertising the address towards the scheduler instead',
                       env['DMLC_INTERFACE'])
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


def interface_address(name):
    """The IPv4 address of network interface `name` (Linux: SIOCGIFADDR), or None."""
    import fcntl
    import struct
    SIOCGIFADDR = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(probe.fileno(), SIOCGIFADDR,
                                 struct.pack('256s', name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def start_controller(request):
    """Start the controller for `request` once per process; return the answer dict.

    ``request['controller']`` (the workers' ``MXNET_SSP_CONTROLLER``) says where: a process
    of its own (:mod:`mxnet_ssp.controller.process`, default) or a thread of this one.
    """
    global _controller, _controller_answer
    with _lock:
        if _controller is not None:
            return _controller_answer
        num_workers = int(request['num_workers'])
        settings = {'num_workers': num_workers, 's_lower': int(request['s_lower']),
                    's_upper': int(request['s_upper']), 'mode': request['mode'],
                    'timeout': float(request['timeout']), 'host': advertised_host(),
                    'secret': secrets.token_hex(32), 'metrics_path': None,
                    'elastic': int(request.get('elastic') or 0),
                    'agree': request.get('agree'),
                    # a request without it (an older worker) gets the default
                    'liveness': float(request.get('liveness', cfg.DEFAULT_LIVENESS))}
        if request.get('metrics_dir'):
            os.makedirs(request['metrics_dir'], exist_ok=True)
            settings['metrics_path'] = os.path.join(request['metrics_dir'],
                                                   CONTROLLER_METRICS)
        # a request without the setting (a worker of an older mxnet-ssp) gets config's default
        placement = request.get('controller', cfg.DEFAULT_CONTROLLER)
        # this server ends when the controller fails the job (mxnet_ssp.ps.follow)
        if placement == 'process':
            _controller, (host, port) = _start_process(settings)
            follow_controller_process(_controller)
        else:   # imported lazily: workers never need the controller
            from ..controller.process import start
            _controller = start(settings, on_failed=controller_failed)
            host, port = _controller.address
        _controller_answer = {'host': host, 'port': port, 'secret': settings['secret'],
                              's_lower': settings['s_lower'], 's_upper': settings['s_upper'],
                              'mode': settings['mode'], 'elastic': settings['elastic']}
        logger.info('server: %s controller for %d workers, staleness [%d, %d] mode %s, in a %s, '
                    'at %s:%d', request['store'], num_workers, settings['s_lower'],
                    settings['s_upper'], settings['mode'], placement, host, port)
        return _controller_answer


def _start_process(settings):
    """Start :mod:`mxnet_ssp.controller.process`; return (Popen, (host, port)).

    Its stdin stays open for the life of this process: closing it (this process ending, in
    any way) stops the controller.  It is not a node of the job: no ``DMLC_*`` variables.
    """
    import select
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    proc = subprocess.Popen([sys.executable, '-m', 'mxnet_ssp.controller.process'],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    proc.stdin.write((json.dumps(settings) + '\n').encode())
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], settings['timeout'])
    line = proc.stdout.readline() if ready else b''
    try:
        answer = json.loads(line.decode() or 'null')
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or 'port' not in answer:
        proc.kill()
        proc.wait()
        why = answer.get('error') if isinstance(answer, dict) else (
            'no answer within %g s (exit status %s)' % (settings['timeout'], proc.returncode))
        raise RuntimeError('the controller process did not start: %s' % why)
    return proc, (answer['host'], answer['port'])


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


def fit_agree(request, sent):
    """`sent` (:func:`mxnet_ssp.config.sender`) in a form that fits the discovery request
    (:data:`~mxnet_ssp.ps.channel.DISCOVERY_LEN`): as it is, else with each settings file's
    path left out of the origins (``'settings file line 3'``), else with no origins; None if
    even that does not fit (the controller then takes the first worker's HELLO as the job's
    settings)."""
    from ..core.agreement import compact_origin
    settings = sent['settings']
    for origin in (None, compact_origin, lambda text: ''):
        attempt = dict(sent)
        if origin is not None:
            attempt['settings'] = {k: [v[0], origin(v[1])] for k, v in settings.items()}
        try:
            encode_blob(dict(request, agree=attempt))
        except ValueError:
            continue
        return attempt
    return None


def request_controller(native, key, config, num_workers, rank, agree=None):
    """Worker side: ask the servers for the controller of this job; return the answer dict.

    Initializes `key` on `native` (MXNet's store; collective), pushes the request, pulls the
    answer, and checks it: an error the servers reported or no answer at all (mxnet-ssp not
    installed on the servers) raise :class:`DiscoveryError`.  The servers answering is
    bounded by ``config.timeout``.  `agree`: this worker's settings that must agree
    (:func:`mxnet_ssp.config.job_settings`); the first request to reach the servers
    makes them the job's, and the controller refuses a worker whose settings differ (its
    HELLO carries them) with a message naming the setting, both values and both workers.
    Without `agree`, a controller running another staleness, mode or elastic setting than
    this worker's raises :class:`DiscoveryError` here.
    """
    from mxnet import ndarray as nd
    import numpy as np
    from . import _process
    # in elastic mode the asynchronous stores report their clocks to a controller that never
    # holds anyone: it keeps the members, their clocks and the lost ones
    bound = ((config.s_lower, config.s_upper) if config.synchronous
             else (cfg.UNBOUNDED_STALENESS, cfg.UNBOUNDED_STALENESS))
    request = {'v': 1, 'store': config.store, 'num_workers': num_workers,
               's_lower': bound[0], 's_upper': bound[1],
               'mode': config.mode, 'timeout': config.timeout,
               'metrics_dir': config.metrics_dir, 'controller': config.controller,
               'elastic': config.elastic, 'liveness': config.liveness}
    if agree is not None:
        fitting = fit_agree(request, cfg.sender(rank, agree))
        if fitting is not None:
            request['agree'] = fitting
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
    if agree is not None:         # the controller compares them all (it names both workers)
        return answer
    if answer.get('elastic', 0) != config.elastic:
        raise DiscoveryError('worker[%d]: this worker was configured with %s=%d but the '
                             'controller runs with %d: set it the same for every process'
                             % (rank, cfg.ENV_ELASTIC, config.elastic, answer.get('elastic', 0)))
    mine = (request['s_lower'], request['s_upper'], request['mode'])
    theirs = (answer['s_lower'], answer['s_upper'], answer['mode'])
    if mine != theirs:
        raise DiscoveryError('worker[%d]: this worker was configured with staleness [%d, %d] '
                             'mode %s but the controller runs [%d, %d] mode %s: set %s and %s '
                             'the same for every worker'
                             % ((rank,) + mine + theirs + (cfg.ENV_STALENESS, cfg.ENV_DSSP_MODE)))
    return answer
