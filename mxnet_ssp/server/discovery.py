"""Discovery, the server's side: the first request starts the synchronization controller,
and every request is answered with its address and the job's secret.

A worker's store pushes a request (:mod:`mxnet_ssp.worker.discovery`, encoded by
:mod:`mxnet_ssp.ps.channel`) to a reserved key; the server's door
(:mod:`mxnet_ssp.server.door`) sorts it out of the gradients and hands it to
:func:`answer_discovery`, which starts the controller
(:class:`mxnet_ssp.controller.server.ControllerServer`) once per server process (a process of
its own or a background thread) and writes the answer into the key's value, which the worker
pulls.

This runs where ``import mxnet`` has not returned: MXNet is imported lazily, and only
submodules loaded before the server loop starts.  Importing this module does not import the
controller (the first request does).
"""
import json
import logging
import os
import secrets
import threading
from dataclasses import replace

from ..core.controller_settings import ControllerSettings
from ..core.env_names import DMLC_PREFIX
from ..core.names import CONTROLLER_METRICS
from ..ps.addresses import advertised_host
from ..ps.channel import decode_blob, encode_blob
from ..ps.job_watch import controller_failed, follow_controller_process

__all__ = ['answer_discovery', 'start_controller']

logger = logging.getLogger(__name__)

# one controller per server process, started by the first request
_lock = threading.Lock()
_controller = None
_controller_answer = None


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
