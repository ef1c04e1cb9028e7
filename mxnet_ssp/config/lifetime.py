"""Settings of a process's lifetime: when a lost worker or host ends the job, how a process
ends once its job failed, and whether the start-up hook loads mxnet-ssp at all."""
from ..core.controller_settings import UNBOUNDED_STALENESS
from ..core.liveness import DEFAULT_BOUND, MAX_BOUND, MIN_BOUND
from .table import FLAG_VALUES, TABLE, Setting, declare, flag, integer, number, read
from .topology import ENV_NUM_WORKER, parse_num_workers

__all__ = ['ENV_ELASTIC', 'ENV_REJOIN', 'ENV_RESTART', 'restart_number', 'ENV_FOLLOW_GRACE', 'DEFAULT_FOLLOW_GRACE',
           'ENV_LIVENESS', 'DEFAULT_LIVENESS', 'ENV_AUTOLOAD', 'ENV_LEAN_WORKERS',
           'UNBOUNDED_STALENESS',
           'parse_elastic', 'elastic_min_workers', 'rejoining', 'follow_grace',
           'parse_liveness', 'liveness_timeout']

ENV_ELASTIC = 'MXNET_SSP_ELASTIC'
ENV_REJOIN = 'MXNET_SSP_REJOIN'
ENV_RESTART = 'MXNET_SSP_RESTART'
ENV_FOLLOW_GRACE = 'MXNET_SSP_FOLLOW_GRACE'
DEFAULT_FOLLOW_GRACE = 10.0
ENV_LIVENESS = 'MXNET_SSP_LIVENESS_TIMEOUT'
DEFAULT_LIVENESS = DEFAULT_BOUND
ENV_AUTOLOAD = 'MXNET_SSP_AUTOLOAD'
ENV_LEAN_WORKERS = 'MXNET_SSP_LEAN_WORKERS'


def _elastic(value, source, setting, num_workers=None, **_):
    word = '' if value is None else str(value).strip().lower()
    if word in ('', '0', 'off', 'no', 'false'):
        return 0
    try:
        least = int(word)
    except ValueError:
        least = None
    bound = 'the number of workers (%d)' % num_workers if num_workers else 'the number of workers'
    if least is None or isinstance(value, bool) or least < 1 or (
            num_workers is not None and least > num_workers):
        raise setting.invalid(source, value, setting.accepted.format(bound=bound))
    return least


#: what turns a directory setting off: empty, 'none' and the "no" words of a flag
_NO_DIRECTORY = frozenset(['', 'none'] + [word for word, yes in FLAG_VALUES.items() if not yes])


def _directory_or_off(value, source, setting, **_):
    return None if str(value).strip().lower() in _NO_DIRECTORY else str(value).strip()


def _liveness(value, source, setting, **_):
    if str(value).strip().lower() in ('0', 'off', 'no', 'false'):
        return 0.0
    return number(lambda x: MIN_BOUND <= x <= MAX_BOUND)(value, source, setting)


declare(
    Setting(ENV_ELASTIC, 'lifetime', 'Elastic mode (docs/elastic.md): the least number of workers '
            'the job needs; a lost worker is dropped while at least that many are left. Unset, '
            'empty, 0 or off: fail-fast (a lost worker fails the job).', _elastic, default=0,
            accepted='the least number of workers the job needs to go on, an integer '
                     '1 <= n <= {bound}, or 0/off for fail-fast'),
    Setting(ENV_REJOIN, 'lifetime', 'Set by mxnet-ssp-launch --max-restarts in a worker it '
            "restarted: the process replaces a lost worker (it gets the dead worker's rank) and "
            'rejoins the job.', flag, default=False,
            not_in_file='the launcher sets it in a restarted worker'),
    Setting(ENV_RESTART, 'lifetime', 'Set by mxnet-ssp-launch in every process of a job: which '
            'start of the whole job this is, 0 for the first, 1 after the first restart '
            '(--job-restarts, docs/faults.md); a script resumes from its latest checkpoint '
            'when it is above 0 (mxnet_ssp.checkpoint).', integer(0), default=0,
            accepted='an integer >= 0',
            not_in_file='the launcher sets it in every process'),
    Setting(ENV_FOLLOW_GRACE, 'lifetime', 'Seconds a scheduler, server or worker waits, once '
            'one of its ps-lite connections closed for good, before it ends itself because the '
            'job failed (mxnet_ssp.ps.job_watch).', number(lambda x: 1 <= x <= 600),
            default=DEFAULT_FOLLOW_GRACE,
            accepted='a number of seconds from 1 to 600 (default %g)' % DEFAULT_FOLLOW_GRACE),
    Setting(ENV_LIVENESS, 'lifetime', 'Seconds a connection of the job may stay silent (not '
            'even answering a TCP keepalive probe) before its peer host counts as lost '
            '(docs/elastic.md "Lost hosts"); 0/off: never.', _liveness, default=DEFAULT_LIVENESS,
            accepted='a number of seconds from %g to %g (default %g), or 0/off to turn lost-host '
                     'detection off' % (MIN_BOUND, MAX_BOUND, DEFAULT_LIVENESS)),
    Setting(ENV_AUTOLOAD, 'autoload', 'Whether the start-up hook (kvstore_patches/'
            'mxnet_ssp_autoload.py) loads mxnet-ssp into the processes of a job; it reads it '
            'itself, before this package is imported.', flag, default=True,
            not_in_file='the start-up hook reads it before any file is read; set it in the '
                        'environment'),
    Setting(ENV_LEAN_WORKERS, 'autoload', 'Whether workers, too, import MXNet without its '
            'optional imports of scikit-learn, SciPy and OpenCV, and with the standard '
            "library's distutils, as schedulers and servers always do (about 1.2 s of CPU per "
            'worker): mx.model.FeedForward then has no scikit-learn base class, mx.nd.sparse '
            'cannot convert SciPy matrices and mx.recordio cannot decode images, unless the '
            'script imports them before MXNet. mxnet-ssp-train always does so. The start-up hook reads it '
            'itself.', flag, default=False,
            not_in_file='the start-up hook reads it before any file is read; set it in the '
                        'environment'),
)


def parse_elastic(value, num_workers=None, source=ENV_ELASTIC):
    """Parse the elastic setting: the least number of workers the job needs, or 0 (off).

    Accepted: unset, empty, ``0``, ``off``, ``no`` or ``false`` (off: a lost worker fails the
    job), or an integer ``1 <= n`` (at most `num_workers` when given).
    """
    return TABLE[ENV_ELASTIC].value(value, source, num_workers=num_workers)


def elastic_min_workers(environ=None):
    """The job's elastic setting (:data:`ENV_ELASTIC`): least workers, or 0 (off); checked
    against ``DMLC_NUM_WORKER`` when that is set."""
    from .file import current
    env = current(environ)
    workers = env.get(ENV_NUM_WORKER)
    return read(ENV_ELASTIC, env, num_workers=parse_num_workers(workers) if workers else None)


def rejoining(environ=None):
    """Whether this worker replaces a lost one (:data:`ENV_REJOIN`, a yes/no flag)."""
    return read(ENV_REJOIN, environ)


def restart_number(environ=None):
    """Which start of the whole job this process belongs to (:data:`ENV_RESTART`): 0 for the
    first, N after the launcher's N-th ``--job-restarts`` restart; 0 when unset."""
    return read(ENV_RESTART, environ)


def follow_grace(environ=None):
    """``MXNET_SSP_FOLLOW_GRACE``: seconds, a number in [1, 600], default
    :data:`DEFAULT_FOLLOW_GRACE` (shorter would take ps-lite's reconnects at start-up for a
    failed job)."""
    return read(ENV_FOLLOW_GRACE, environ)


def parse_liveness(value, source=ENV_LIVENESS):
    """Parse the liveness bound: seconds from 2 to 3600, or ``0``/``off`` (never judge a
    host lost; a lost host is then a stall, failed at ``MXNET_SSP_TIMEOUT``)."""
    return TABLE[ENV_LIVENESS].value(value, source)


def liveness_timeout(environ=None):
    """``MXNET_SSP_LIVENESS_TIMEOUT`` (:func:`parse_liveness`); unset or empty: the default
    :data:`DEFAULT_LIVENESS`."""
    return read(ENV_LIVENESS, environ)
