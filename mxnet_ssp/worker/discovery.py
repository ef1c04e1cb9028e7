"""Discovery, the worker's side: how a worker's store finds the synchronization controller.

With nothing but the KVStore (so under any launcher): :func:`request_controller` pushes a
request (encoded by :mod:`mxnet_ssp.ps.channel`) to a reserved key and pulls the answer back.
The key is small, so ps-lite places it on exactly one server, whose door answers it
(:mod:`mxnet_ssp.server.discovery`: the first request starts the controller there) with the
controller's address and the job's secret.
"""
import logging

from .. import config as cfg
from ..core.controller_settings import ControllerSettings
from ..ps.channel import DISCOVERY_LEN, decode_blob, encode_blob

__all__ = ['request_controller', 'DiscoveryError', 'fit_agree']

logger = logging.getLogger(__name__)


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
    from ..ps import process_exit
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
