"""Comparing the settings that every worker of a job must share (pure: no I/O, stdlib only).

A worker's settings are a dict ``{name: [value, origin]}`` of strings
(:func:`mxnet_ssp.config.job_settings` builds them; the origin says where the value came from:
``'environment'``, ``'<settings file> line N'``, ``'mxnet_ssp.create()'``, ``'default'``).
The controller compares each worker's (its HELLO carries them) with the job's, and so does
each server for the stores without a controller (:mod:`mxnet_ssp.ps.channel`).
"""

__all__ = ['KVSTORE', 'SETTINGS_FILE', 'differences', 'mismatch_message', 'compact_origin']

#: The name of the store type in the compared settings.
KVSTORE = 'kvstore type'
#: The job's settings file, read from the working directory (mxnet_ssp.config).
SETTINGS_FILE = 'mxnet_ssp.env'


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


def mismatch_message(names, worker_settings, worker_who, job_settings, job_who):
    """The job failure for a worker whose settings differ from the job's.

    ``worker_who`` / ``job_who``: e.g. ``'worker 1 on host a (connected from
    127.0.0.1:5123)'`` and ``'worker 0 on host b'``.
    """
    parts = []
    for n in names:
        mine, theirs = _entry(worker_settings, n), _entry(job_settings, n)
        parts.append('%s=%s (from %s), but the job runs with %s=%s (from %s, as %s)'
                     % (n, mine[0], mine[1], n, theirs[0], theirs[1], job_who))
    return ('%s has settings that differ from the job\'s: %s. Every process of a job must '
            'use the same %s: set %s in the settings file %s in the job\'s working directory '
            '(read on every host, whatever the launcher) or the same in every process\'s '
            'environment (MXNet\'s tools/launch.py passes no MXNET_SSP_* variable over ssh)'
            % (worker_who, '; '.join(parts), ', '.join(names),
               'them' if len(names) > 1 else 'it', SETTINGS_FILE))
