"""Every worker of a job runs with the same settings, or the job fails before its first step.

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
import socket

from . import config as cfg
from .settings_file import DEFAULT_FILE, origin

__all__ = ['KVSTORE', 'job_settings', 'differences', 'mismatch_message', 'this_host', 'sender',
           'check_updater_settings', 'compact_origin']

#: The name of the store type in the compared settings.
KVSTORE = 'kvstore type'


def _flag(value):
    return 'on' if value else 'off'


def this_host():
    """This host's name, as the messages give it."""
    return socket.gethostname()


def job_settings(config, bucket_bytes, host_updates, environ=None):
    """The settings of a worker that must agree across the job.

    Parameters
    ----------
    config : mxnet_ssp.config.SyncConfig
        The worker's (its :attr:`~mxnet_ssp.config.SyncConfig.origins` say where each came
        from).
    bucket_bytes : int
        Its bytes per bucket (``MXNET_SSP_BUCKET_BYTES`` or ``create(bucket_bytes=...)``).
    host_updates : bool
        Its ``MXNET_SSP_HOST_UPDATES``.
    environ : mapping, optional
        Where the other values are read (default: the process's settings).

    Returns
    -------
    dict
        name -> ``[value, origin]``, both strings: values in one normal form (``'3,15'``,
        ``'300'``, ``'on'``), so equal settings spelt differently compare equal.
    """
    env = cfg._environ(environ)
    origins = dict(config.origins)

    def where(name):
        return origins.get(name) or origin(env, name)

    out = {KVSTORE: [config.store, 'the script']}
    if config.synchronous:
        value = ('%d' % config.s_lower if config.store == 'dist_ssp'
                 else '%d,%d' % (config.s_lower, config.s_upper))
        out[cfg.ENV_STALENESS] = [value, where(cfg.ENV_STALENESS)]
        if config.store == 'dist_dssp':
            out[cfg.ENV_DSSP_MODE] = [config.mode, where(cfg.ENV_DSSP_MODE)]
    out[cfg.ENV_TIMEOUT] = ['%g' % config.timeout, where(cfg.ENV_TIMEOUT)]
    out[cfg.ENV_ELASTIC] = ['%d' % config.elastic, where(cfg.ENV_ELASTIC)]
    if config.store == 'dist_softsync':
        out[cfg.ENV_SOFTSYNC_SPLITS] = ['%d' % config.splits, where(cfg.ENV_SOFTSYNC_SPLITS)]
    env_bytes = cfg.bucket_bytes(env)
    out[cfg.ENV_BUCKET_BYTES] = ['%d' % bucket_bytes, where(cfg.ENV_BUCKET_BYTES)
                                 if bucket_bytes == env_bytes else 'mxnet_ssp.create()']
    out[cfg.ENV_HOST_UPDATES] = [_flag(host_updates), where(cfg.ENV_HOST_UPDATES)]
    out[cfg.ENV_STALENESS_LOG] = [_flag(config.staleness_log), where(cfg.ENV_STALENESS_LOG)]
    out[cfg.ENV_BIGARRAY_BOUND] = ['%d' % cfg.bigarray_bound(env),
                                   'environment' if cfg.ENV_BIGARRAY_BOUND in env else 'default']
    return out


def differences(job, worker):
    """Names whose values differ between two settings dicts (a name missing in one counts),
    in a stable order: the store type first."""
    names = sorted(set(job) | set(worker), key=lambda n: (n != KVSTORE, n))
    return [n for n in names
            if (job.get(n) or [None])[0] != (worker.get(n) or [None])[0]]


def _entry(settings, name):
    entry = settings.get(name)
    if not entry:
        return 'not set', 'an mxnet-ssp that does not send it'
    return entry[0], entry[1] or 'an origin not sent'


def compact_origin(origin):
    """`origin` without a settings file's path: ``'settings file line 3'``."""
    if origin in ('environment', 'default', 'mxnet_ssp.create()', 'the script'):
        return origin
    head, sep, line = origin.rpartition(' line ')
    return 'settings file line %s' % line if sep else origin


def mismatch_message(names, worker_settings, worker_who, job_settings_, job_who):
    """The job failure for a worker whose settings differ from the job's.

    ``worker_who`` / ``job_who``: e.g. ``'worker 1 on host a (127.0.0.1:5123)'`` and
    ``'worker 0 on host b'``.
    """
    parts = []
    for n in names:
        mine, theirs = _entry(worker_settings, n), _entry(job_settings_, n)
        parts.append('%s=%s (from %s), but the job runs with %s=%s (from %s, as %s)'
                     % (n, mine[0], mine[1], n, theirs[0], theirs[1], job_who))
    return ('%s has settings that differ from the job\'s: %s. Every process of a job must '
            'use the same %s: set %s in the settings file %s in the job\'s working directory '
            '(read on every host, whatever the launcher) or the same in every process\'s '
            'environment (MXNet\'s tools/launch.py passes no MXNET_SSP_* variable over ssh)'
            % (worker_who, '; '.join(parts), ', '.join(names),
               'them' if len(names) > 1 else 'it', DEFAULT_FILE))


def sender(rank, settings):
    """What a worker sends: its rank, its host and its :func:`job_settings`."""
    return {'rank': int(rank), 'host': this_host(), 'settings': settings}


def _has_controller(settings):
    store = (settings.get(KVSTORE) or [None])[0]
    elastic = (settings.get(cfg.ENV_ELASTIC) or ['0'])[0]
    return store in cfg.STORE_TYPES or elastic not in ('0', None)


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
