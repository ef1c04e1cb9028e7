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
from dataclasses import replace

from .. import config as cfg
from ..core.controller_settings import ControllerSettings
from ..core.names import CONTROLLER_METRICS
from .channel import DISCOVERY_LEN, decode_blob, encode_blob
from .job_watch import controller_failed, follow_controller_process
from ..core.env_names import (DMLC_INTERFACE, DMLC_NODE_HOST, DMLC_PREFIX, DMLC_PS_ROOT_PORT,
                              DMLC_PS_ROOT_URI)

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
    if env.get(DMLC_NODE_HOST):
        return env[DMLC_NODE_HOST]
    if env.get(DMLC_INTERFACE):
        address = interface_address(env[DMLC_INTERFACE])
        if address is not None:
            return address
        logger.warning('DMLC_INTERFACE=%s: no such interface with an IPv4 address on this '
                       'host; advertising the address towards the scheduler instead',
                       env[DMLC_INTERFACE])
    root = env.get(DMLC_PS_ROOT_URI, '127.0.0.1')
    port = int(env.get(DMLC_PS_ROOT_PORT, '9000') or 9000)
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
        settings = ControllerSettings.from_wire(request).started(
            advertised_host(), secrets.token_hex(32))
        if settings.metrics_dir:
            os.makedirs(settings.metrics_dir, exist_ok=True)
            settings = replace(settings, metrics_path=os.path.join(settings.metrics_dir,
                                                                   CONTROLLER_METRICS))
        # this server ends when the controller fails the job (mxnet_ssp.ps.job_watch)
        if settings.controller == 'process':
            _controller, (host, port) = _start_process(settings.to_wire())
            follow_controller_process(_controller)
        else:   # imported lazily: workers never need the controller
            from ..controller.process import start
            _controller = start(settings.to_wire(), on_failed=controller_failed)
            host, port = _controller.address
        _controller_answer = settings.answer(host, port)
        low, high = settings.s_lower, settings.s_upper
        logger.info('server: %s controller for %d workers, staleness %s%s, in a %s, at %s:%d',
                    settings.store, settings.num_workers,
                    low if low == high else '[%d, %d]' % (low, high),
                    '' if low == high else ' mode %s' % settings.mode, settings.controller,
                    host, port)
        return _controller_answer


def _start_process(settings):
    """Start :mod:`mxnet_ssp.controller.process` with `settings` (the wire form of
    :class:`~mxnet_ssp.core.controller_settings.ControllerSettings`); return (Popen, (host, port)).

    Its stdin stays open for the life of this process: closing it (this process ending, in
    any way) stops the controller.  It is not a node of the job: no ``DMLC_*`` variables.
    """
    import select
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith(DMLC_PREFIX)}
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
    from . import process_exit
    # in elastic mode the asynchronous stores report their clocks to a controller that never
    # holds anyone: it keeps the members, their clocks and the lost ones
    request = ControllerSettings.from_config(config, num_workers).to_wire()
    if agree is not None:
        fitting = fit_agree(request, cfg.sender(rank, agree))
        if fitting is not None:
            request['agree'] = fitting
    native.init(key, nd.zeros(DISCOVERY_LEN, dtype=np.float32))
    native.push(key, nd.array(encode_blob(request), dtype=np.float32))
    reply = nd.zeros(DISCOVERY_LEN, dtype=np.float32)
    native.pull(key, out=reply)
    with process_exit.bounded(config.timeout,
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
