"""The settings every worker of a job must share, and where they are compared.

Every worker of a job runs with the same settings, or the job fails before its first step.

Each worker sends the settings that must agree, with where each came from, in its HELLO to
the controller (:func:`mxnet_ssp.controller.protocol.encode_hello`); the controller compares
them with the job's (those of the worker whose discovery request started it) and fails the
job, naming the setting, both values, where each came from and both workers' rank and host,
when they differ (:meth:`mxnet_ssp.controller.server.ControllerServer`).

What must agree, and why (:func:`job_settings`):

========================  =================================================================
kvstore type              the workers would follow different synchronization rules
MXNET_SSP_STALENESS       the controller enforces one bound; a worker configured with a
                          larger sL would skip waits it believes unneeded (its fast path)
MXNET_SSP_DSSP_MODE       ``dist_dssp``: what a grant means
MXNET_SSP_TIMEOUT         when a wait counts as a failure: one worker would give up, or
                          report a stall, long before another
MXNET_SSP_ELASTIC         whether a lost worker ends the job
MXNET_SSP_SOFTSYNC_SPLITS ``dist_softsync``: how many gradients make one update
MXNET_SSP_BUCKET_BYTES    the layout of the server keys: workers with different buckets
                          push and pull different keys
MXNET_SSP_HOST_UPDATES,   sent to the servers with the optimizer: the last worker's would win
MXNET_SSP_STALENESS_LOG   silently on every server
MXNET_SSP_CHUNK_BYTES     which arrays are held as chunks, and their keys (the key layout)
MXNET_KVSTORE_BIGARRAY_   MXNet's own: which arrays are split over all servers (the key
BOUND                     layout again)
========================  =================================================================

The asynchronous stores outside elastic mode have no controller: there each server compares
the settings every worker sends with its optimizer (:func:`check_updater_settings`; MXNet
sends every worker's ``set_optimizer`` to every server) and ends, failing the job, at the
first worker whose settings differ.

Not compared: ``MXNET_SSP_METRICS_DIR`` (a path on each host), ``MXNET_SSP_HOST_COPIES``
(how one worker copies, the same bits either way), ``MXNET_SSP_CONTROLLER`` (only the worker
that starts the controller's counts), ``MXNET_SSP_FOLLOW_GRACE`` (how fast each process ends
after a failure) and the batch-balancing settings (read by the balancing service).
"""
from ..core.agreement import KVSTORE, differences, mismatch_message
from .data_path import (ENV_BIGARRAY_BOUND, ENV_BUCKET_BYTES, ENV_CHUNK_BYTES, chunk_bytes,
                        ENV_HOST_UPDATES, bigarray_bound,
                        bucket_bytes)
from .file import current, settings_origin
from .lifetime import ENV_ELASTIC
from .sync import (ENV_DSSP_MODE, ENV_SOFTSYNC_SPLITS, ENV_STALENESS, ENV_STALENESS_LOG,
                   ENV_TIMEOUT, STORE_TYPES)
from .topology import this_host

__all__ = ['job_settings', 'sender', 'check_updater_settings']


def _flag(value):
    return 'on' if value else 'off'


def job_settings(config, bytes_per_bucket, updates_on_host, environ=None, bytes_per_chunk=None):
    """The settings of a worker that must agree across the job.

    Parameters
    ----------
    config : mxnet_ssp.config.SyncConfig
        The worker's (its :attr:`~mxnet_ssp.config.SyncConfig.origins` say where each came
        from).
    bytes_per_bucket : int
        Its bytes per bucket (``MXNET_SSP_BUCKET_BYTES`` or ``create(bucket_bytes=...)``).
    updates_on_host : bool
        Its ``MXNET_SSP_HOST_UPDATES``.
    environ : mapping, optional
        Where the other values are read (default: the process's settings).
    bytes_per_chunk : int, optional
        Its bytes per chunk (``MXNET_SSP_CHUNK_BYTES`` or ``create(chunk_bytes=...)``);
        default: read from `environ`.

    Returns
    -------
    dict
        name -> ``[value, origin]``, both strings: values in one normal form (``'3,15'``,
        ``'300'``, ``'on'``), so equal settings spelt differently compare equal.
    """
    env = current(environ)
    origins = dict(config.origins)

    def where(name):
        return origins.get(name) or settings_origin(env, name)

    out = {KVSTORE: [config.store, 'the script']}
    if config.synchronous:
        out[ENV_STALENESS] = [config.staleness_text, where(ENV_STALENESS)]
        if config.store == 'dist_dssp':
            out[ENV_DSSP_MODE] = [config.mode, where(ENV_DSSP_MODE)]
    out[ENV_TIMEOUT] = ['%g' % config.timeout, where(ENV_TIMEOUT)]
    out[ENV_ELASTIC] = ['%d' % config.elastic, where(ENV_ELASTIC)]
    if config.store == 'dist_softsync':
        out[ENV_SOFTSYNC_SPLITS] = ['%d' % config.splits, where(ENV_SOFTSYNC_SPLITS)]
    from_env_bytes = bucket_bytes(env)
    out[ENV_BUCKET_BYTES] = ['%d' % bytes_per_bucket, where(ENV_BUCKET_BYTES)
                             if bytes_per_bucket == from_env_bytes else 'mxnet_ssp.create()']
    from_env_chunk = chunk_bytes(env)
    if bytes_per_chunk is None:
        bytes_per_chunk = from_env_chunk
    out[ENV_CHUNK_BYTES] = ['%d' % bytes_per_chunk, where(ENV_CHUNK_BYTES)
                            if bytes_per_chunk == from_env_chunk else 'mxnet_ssp.create()']
    out[ENV_HOST_UPDATES] = [_flag(updates_on_host), where(ENV_HOST_UPDATES)]
    out[ENV_STALENESS_LOG] = [_flag(config.staleness_log), where(ENV_STALENESS_LOG)]
    out[ENV_BIGARRAY_BOUND] = ['%d' % bigarray_bound(env),
                               'environment' if ENV_BIGARRAY_BOUND in env else 'default']
    return out


def sender(rank, settings):
    """What a worker sends: its rank, its host and its :func:`job_settings`."""
    return {'rank': int(rank), 'host': this_host(), 'settings': settings}


def _has_controller(settings):
    store = (settings.get(KVSTORE) or [None])[0]
    elastic = (settings.get(ENV_ELASTIC) or ['0'])[0]
    return store in STORE_TYPES or elastic not in ('0', None)


_updater_reference = []      # a server's first sender (:func:`check_updater_settings`)


def check_updater_settings(sent):
    """Server side: compare a worker's settings sent with its optimizer (:func:`sender`)
    with the first worker's; return the failure message, or None.

    Only where the controller cannot compare them: when either worker's store has no
    controller (an asynchronous store outside elastic mode).  With a controller it compares
    them at the worker's first step and its message reaches every worker.
    """
    if not isinstance(sent, dict) or not isinstance(sent.get('settings'), dict):
        return None
    if not _updater_reference:
        _updater_reference.append(sent)
        return None
    first = _updater_reference[0]
    if _has_controller(first['settings']) and _has_controller(sent['settings']):
        return None
    names = differences(first['settings'], sent['settings'])
    if not names:
        return None
    return mismatch_message(names, sent['settings'],
                            'worker %s on host %s' % (sent.get('rank'), sent.get('host')),
                            first['settings'],
                            'worker %s on host %s' % (first.get('rank'), first.get('host')))
