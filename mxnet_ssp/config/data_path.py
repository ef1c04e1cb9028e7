"""Settings of the data path: which of MXNet's store names mxnet-ssp serves, the buckets of
small arrays, and where the copies and the servers' update run (docs/stores.md)."""
from ..core.env_names import MXNET_KVSTORE_BIGARRAY_BOUND
from .table import _SOURCE, Setting, declare, flag, integer, read

__all__ = ['ENV_WRAP_ASYNC', 'ENV_WRAP_SYNC', 'WRAP_SETTINGS', 'ENV_BUCKET_BYTES',
           'DEFAULT_BUCKET_BYTES', 'ENV_HOST_COPIES', 'ENV_HOST_UPDATES', 'ENV_BIGARRAY_BOUND',
           'wrap_async', 'wrap_sync', 'bucket_bytes', 'host_copies', 'host_updates',
           'bigarray_bound', 'ENV_CHUNK_BYTES', 'DEFAULT_CHUNK_BYTES', 'chunk_bytes',
           'ENV_CHUNK_WINDOW', 'DEFAULT_CHUNK_WINDOW', 'chunk_window', 'NETWORK_BUCKET_BYTES',
           'NETWORK_CHUNK_BYTES', 'job_on_one_host', 'buckets_fit_model']

ENV_WRAP_ASYNC = 'MXNET_SSP_WRAP_ASYNC'
ENV_WRAP_SYNC = 'MXNET_SSP_WRAP_SYNC'
#: MXNet's store types mxnet-ssp serves under their own names, and the setting that keeps
#: MXNet's store instead.
WRAP_SETTINGS = {'dist_async': ENV_WRAP_ASYNC, 'dist_sync': ENV_WRAP_SYNC}
ENV_BUCKET_BYTES = 'MXNET_SSP_BUCKET_BYTES'
ENV_CHUNK_BYTES = 'MXNET_SSP_CHUNK_BYTES'
ENV_CHUNK_WINDOW = 'MXNET_SSP_CHUNK_WINDOW'
# The defaults of the bucket and chunk sizes depend on where the job's bytes travel
# (:func:`job_on_one_host`; docs/benchmarks.md, "Pipeline", gives the measurements):
# - on one host the links are memory and the CPU is the bound: few large buckets (a server
#   spends about half a millisecond per key and push), no chunks (their copies doubled
#   ResNet-50's step on loopback);
# - across hosts the link is the bound: a step must keep both directions of it busy, so
#   buckets and chunks of a few hundred KiB go through the window as a pipeline (CIFAR
#   ResNet-110 at 100 Mbit/s: 4 MiB buckets 2.0x the wire floor, 256 KiB buckets 1.25x).
#: Bytes per bucket on one host.
DEFAULT_BUCKET_BYTES = 4 << 20
#: Bytes per bucket across hosts.
NETWORK_BUCKET_BYTES = 256 << 10
#: Bytes per chunk on one host: off.
DEFAULT_CHUNK_BYTES = 0
#: Bytes per chunk across hosts.
NETWORK_CHUNK_BYTES = 512 << 10
#: Keys between push and pulled back in a fast step across hosts (on one host: no limit,
#: which measured CIFAR ResNet-110's step on loopback 20-30% shorter than a window of 4).
DEFAULT_CHUNK_WINDOW = 4
ENV_HOST_COPIES = 'MXNET_SSP_HOST_COPIES'
ENV_HOST_UPDATES = 'MXNET_SSP_HOST_UPDATES'
ENV_BIGARRAY_BOUND = MXNET_KVSTORE_BIGARRAY_BOUND

declare(
    Setting(ENV_WRAP_ASYNC, 'data path', "Whether mxnet-ssp registers its own dist_async "
            "(off: MXNet's).", flag, default=True),
    Setting(ENV_WRAP_SYNC, 'data path', "Whether mxnet-ssp serves MXNet's dist_sync (BSP) with "
            "its bucketed data path (off: MXNet's).", flag, default=True),
    Setting(ENV_BUCKET_BYTES, 'data path', 'Bytes per bucket of small arrays '
            '(mxnet_ssp.core.buckets); 0 turns bucketing off.  Default: %d on one host '
            '(DMLC_PS_ROOT_URI a loopback address), %d across hosts.'
            % (DEFAULT_BUCKET_BYTES, NETWORK_BUCKET_BYTES), integer(0),
            default=DEFAULT_BUCKET_BYTES, arg='bucket_bytes',
            accepted='a number of bytes, an integer >= 0 (0 turns bucketing off; default %d '
                     'on one host, %d across hosts)' % (DEFAULT_BUCKET_BYTES,
                                                         NETWORK_BUCKET_BYTES)),
    Setting(ENV_CHUNK_BYTES, 'data path', 'Bytes per chunk: dense arrays larger than this are '
            'held as chunks spread over the servers and pushed and pulled as a pipeline '
            '(mxnet_ssp.core.chunks); 0 keeps every array whole.  Default: %d on one host '
            '(DMLC_PS_ROOT_URI a loopback address), %d across hosts.'
            % (DEFAULT_CHUNK_BYTES, NETWORK_CHUNK_BYTES), integer(0),
            default=DEFAULT_CHUNK_BYTES, arg='chunk_bytes',
            accepted='a number of bytes, an integer >= 0 (0 keeps arrays whole; default %d on '
                     'one host, %d across hosts)' % (DEFAULT_CHUNK_BYTES, NETWORK_CHUNK_BYTES)),
    Setting(ENV_CHUNK_WINDOW, 'data path', "How many buckets, chunks and arrays a worker's "
            'fast step keeps between push and pulled back (later pushes wait), so that a pull '
            "is not queued behind the whole model's pushes; 0: no limit.  Default: 0 on one "
            'host (DMLC_PS_ROOT_URI a loopback address), %d across hosts.'
            % DEFAULT_CHUNK_WINDOW, integer(0), default=0,
            accepted='a number of keys, an integer >= 0 (0: no limit; default 0 on one host, '
                     '%d across hosts)' % DEFAULT_CHUNK_WINDOW),
    Setting(ENV_HOST_COPIES, 'data path', "Whether a worker's batched copies into and out of "
            "buckets run as NumPy copies inside one operation of MXNet's engine (off: MXNet's "
            'own copies).', flag, default=True),
    Setting(ENV_HOST_UPDATES, 'data path', "Whether the servers run MXNet's own SGD as NumPy "
            "passes with the same bits (off: through MXNet's operator).", flag, default=True),
    Setting(ENV_BIGARRAY_BOUND, 'data path', "MXNet's own setting: arrays of at least this many "
            'elements are split over all servers (read as MXNet reads it).', integer(1),
            default=1000000, accepted="an integer >= 1 (MXNet's own setting: arrays of at least "
                                      'this many elements are split over all servers)'),
)


def wrap_async(environ=None):
    """Whether mxnet-ssp registers its own ``dist_async`` (``MXNET_SSP_WRAP_ASYNC``, default on)."""
    return read(ENV_WRAP_ASYNC, environ)


def wrap_sync(environ=None):
    """Whether mxnet-ssp serves ``dist_sync`` with its bucketed data path
    (``MXNET_SSP_WRAP_SYNC``, default on)."""
    return read(ENV_WRAP_SYNC, environ)


def job_on_one_host(environ=None):
    """Whether every process of the job runs on this host: the scheduler's address
    (``DMLC_PS_ROOT_URI``, the same in every process of a job) is a loopback address, which
    only processes of its own host can reach, or is not set (no distributed job).  A job on
    one host whose launcher gives the scheduler another of the host's addresses (MXNet's
    launch.py does) reads as across hosts: set the sizes to choose."""
    import ipaddress
    import os
    env = os.environ if environ is None else environ
    uri = str(env.get('DMLC_PS_ROOT_URI', '') or '').strip().strip('[]')
    if not uri or uri.lower() in ('localhost', 'ip6-localhost'):
        return True
    try:
        return ipaddress.ip_address(uri).is_loopback
    except ValueError:
        return False                  # a host name


def _network_default(name, environ, value=None):
    """Whether setting `name` takes its across-hosts default: no `value` from Python, the
    setting unset (or blank), and a job across hosts (:func:`job_on_one_host`)."""
    if value is not None:
        return False
    text = _SOURCE[0](environ).get(name)
    return (text is None or not str(text).strip()) and not job_on_one_host(environ)


def bucket_bytes(environ=None, value=None):
    """Bytes per bucket: `value` (from Python) or ``MXNET_SSP_BUCKET_BYTES``, an integer >= 0
    (0: every array keeps its own key), default :data:`DEFAULT_BUCKET_BYTES` on one host
    (:func:`job_on_one_host`), :data:`NETWORK_BUCKET_BYTES` across hosts."""
    if _network_default(ENV_BUCKET_BYTES, environ, value):
        return NETWORK_BUCKET_BYTES
    return read(ENV_BUCKET_BYTES, environ, given=value)


def buckets_fit_model(environ=None, value=None):
    """Whether a store's bucket size is the default across hosts, which the store fits to the
    model (:func:`mxnet_ssp.core.buckets.fitted_bucket_bytes`): no `value` from Python, no
    ``MXNET_SSP_BUCKET_BYTES``, and a job across hosts (:func:`job_on_one_host`)."""
    return _network_default(ENV_BUCKET_BYTES, environ, value)


def host_copies(environ=None):
    """``MXNET_SSP_HOST_COPIES``: whether bucket copies may run as NumPy copies on MXNet's
    engine (default on; a yes/no value as :func:`parse_flag` reads it)."""
    return read(ENV_HOST_COPIES, environ)


def host_updates(environ=None):
    """``MXNET_SSP_HOST_UPDATES``: whether the servers may run MXNet's SGD as NumPy passes
    (default on; a yes/no value as :func:`parse_flag` reads it)."""
    return read(ENV_HOST_UPDATES, environ)


def bigarray_bound(environ=None):
    """MXNet's ``MXNET_KVSTORE_BIGARRAY_BOUND`` as MXNet reads it (default 1000000)."""
    return read(ENV_BIGARRAY_BOUND, environ)


def chunk_bytes(environ=None, value=None):
    """Bytes per chunk: `value` (from Python) or ``MXNET_SSP_CHUNK_BYTES``, an integer >= 0
    (0: every array stays whole), default :data:`DEFAULT_CHUNK_BYTES` (0) on one host
    (:func:`job_on_one_host`), :data:`NETWORK_CHUNK_BYTES` across hosts."""
    if _network_default(ENV_CHUNK_BYTES, environ, value):
        return NETWORK_CHUNK_BYTES
    return read(ENV_CHUNK_BYTES, environ, given=value)


def chunk_window(environ=None):
    """``MXNET_SSP_CHUNK_WINDOW``: buckets, chunks and arrays in flight per worker in a fast
    step, an integer >= 0 (0: no limit), default 0 on one host (:func:`job_on_one_host`),
    :data:`DEFAULT_CHUNK_WINDOW` across hosts."""
    if _network_default(ENV_CHUNK_WINDOW, environ):
        return DEFAULT_CHUNK_WINDOW
    return read(ENV_CHUNK_WINDOW, environ)
