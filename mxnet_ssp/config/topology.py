"""Settings of the job's topology: its numbers of servers and workers (ps-lite's own
variables, which every launcher sets) and the GPUs of one worker process."""
import os
import socket

from ..core.env_names import (DMLC_JOB_CLUSTER, DMLC_NUM_SERVER, DMLC_NUM_WORKER,
                              SSH_CONNECTION)
from .table import TABLE, Setting, declare, read

__all__ = ['ENV_NUM_SERVER', 'ENV_NUM_WORKER', 'ENV_GPUS', 'parse_num_servers', 'num_servers',
           'parse_num_workers', 'num_workers', 'parse_gpus', 'worker_gpus', 'under_ssh',
           'this_host']

ENV_NUM_SERVER = DMLC_NUM_SERVER
ENV_NUM_WORKER = DMLC_NUM_WORKER
ENV_GPUS = 'MXNET_SSP_GPUS'


def _count(value, source, setting, **_):
    try:
        count = int(str(value).strip())
    except ValueError:
        count = None
    if count is None or isinstance(value, bool) or count < 1:
        raise setting.invalid(source, value)
    return count


def _lenient_count(value, source, setting, **_):
    try:
        count = int(value)
    except ValueError:
        return 1
    return max(1, count)


def _gpus(value, source, setting, **_):
    given = str(value).strip()
    if not given:
        return ()
    try:
        ids = tuple(int(part) for part in given.split(','))
    except ValueError:
        ids = None
    if ids is None or any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise setting.invalid(source, value)
    return ids


declare(
    Setting(ENV_NUM_SERVER, 'topology', "ps-lite's number of servers (set by every launcher); "
            'slot mode lays out keys with it.', _count,
            accepted='the number of parameter servers of the job, an integer >= 1 (the '
                     'launcher sets it)',
            required='%s is not set: a distributed store needs the number of parameter '
                     'servers of the job (the launcher sets it)' % ENV_NUM_SERVER),
    Setting(ENV_NUM_WORKER, 'topology', "ps-lite's number of workers (set by every launcher); "
            'the training script checks --splits, --slowdown, --emulate and --balance against '
            'it. Read leniently: a value that is not an integer >= 1 counts as 1.',
            _lenient_count, default=1, blank=False, accepted='an integer >= 1'),
    Setting(ENV_GPUS, 'topology', "The GPUs of one worker process, as its MXNet numbers them "
            "('0', '0,1'): set by mxnet-ssp-launch --gpus-per-worker / --gpu-map, read by the "
            'training loop.', _gpus, default=(), checked=True,
            accepted="distinct GPU ids >= 0, comma-separated (e.g. '0' or '0,1')",
            not_in_file='it differs per worker (mxnet-ssp-launch --gpu-map sets it)'),
)


def parse_gpus(value, source=ENV_GPUS):
    """Parse a list of GPU ids: distinct integers >= 0, comma-separated (``'0'``, ``'0,1'``).

    Returns
    -------
    tuple of int
        In the given order; empty for an empty or blank value.
    """
    return _gpus(value, source, TABLE[ENV_GPUS])


def worker_gpus(environ=None):
    """The GPU ids :data:`ENV_GPUS` gives this process (empty tuple if it is not set)."""
    return read(ENV_GPUS, os.environ if environ is None else environ)


def parse_num_servers(value, source=ENV_NUM_SERVER):
    """Parse a number of servers: an integer >= 1."""
    return TABLE[ENV_NUM_SERVER].value(value, source)


def num_servers(environ=None):
    """The job's number of servers (``DMLC_NUM_SERVER``, which ps-lite itself requires)."""
    return read(ENV_NUM_SERVER, os.environ if environ is None else environ)


def parse_num_workers(value):
    """Parse a number of workers leniently: an integer, and at least 1.

    Unlike the other parsers here it refuses nothing: a value that is not an
    integer (``'two'``, ``''``, ``'2.0'``) counts as 1 worker, and so does one below 1.
    This is how the training script has always read :data:`ENV_NUM_WORKER`, kept so
    that its behaviour does not change; ps-lite itself refuses such a job later.
    """
    return TABLE[ENV_NUM_WORKER].value(value)


def num_workers(environ=None):
    """The job's number of workers (``DMLC_NUM_WORKER``); 1 when it is not set.

    Lenient like :func:`parse_num_workers`: never raises for a bad value.
    """
    return read(ENV_NUM_WORKER, os.environ if environ is None else environ)


def under_ssh(environ=None):
    """Whether this process was started over ssh (``SSH_CONNECTION``, or ``DMLC_JOB_CLUSTER``
    = ``ssh`` as mxnet-ssp-launch sets it): where MXNet's stock launcher passes no setting."""
    env = os.environ if environ is None else environ
    return bool(env.get(SSH_CONNECTION)) or env.get(DMLC_JOB_CLUSTER) == 'ssh'


def this_host():
    """This host's name, as the messages give it."""
    return socket.gethostname()

