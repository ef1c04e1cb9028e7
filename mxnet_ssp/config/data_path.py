"""Settings of the data path: which of MXNet's store names mxnet-ssp serves, the buckets of
small arrays, and where the copies and the servers' update run (docs/stores.md)."""
from ..core.env_names import MXNET_KVSTORE_BIGARRAY_BOUND
from .table import Setting, declare, flag, integer, read

__all__ = ['ENV_WRAP_ASYNC', 'ENV_WRAP_SYNC', 'WRAP_SETTINGS', 'ENV_BUCKET_BYTES',
           'DEFAULT_BUCKET_BYTES', 'ENV_HOST_COPIES', 'ENV_HOST_UPDATES', 'ENV_BIGARRAY_BOUND',
           'wrap_async', 'wrap_sync', 'bucket_bytes', 'host_copies', 'host_updates',
           'bigarray_bound', 'ENV_CHUNK_BYTES', 'DEFAULT_CHUNK_BYTES', 'chunk_bytes',
           'ENV_CHUNK_WINDOW', 'DEFAULT_CHUNK_WINDOW', 'chunk_window']

ENV_WRAP_ASYNC = 'MXNET_SSP_WRAP_ASYNC'
ENV_WRAP_SYNC = 'MXNET_SSP_WRAP_SYNC'
#: MXNet's store types mxnet-ssp serves under their own names, and the setting that keeps
#: MXNet's store instead.
WRAP_SETTINGS = {'dist_async': ENV_WRAP_ASYNC, 'dist_sync': ENV_WRAP_SYNC}
ENV_BUCKET_BYTES = 'MXNET_SSP_BUCKET_BYTES'
#: Its default (docs/stores.md, "Buckets", gives the measurements behind it).
DEFAULT_BUCKET_BYTES = 4 << 20
ENV_CHUNK_BYTES = 'MXNET_SSP_CHUNK_BYTES'
#: Its default: off (docs/benchmarks.md, "Chunks": 512 KiB chunks make ResNet-50's step on
#: 1 Gbit/s links 13% shorter but on loopback, where the CPU is the bound, 2x longer)
DEFAULT_CHUNK_BYTES = 0
ENV_CHUNK_WINDOW = 'MXNET_SSP_CHUNK_WINDOW'
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
            '(mxnet_ssp.core.buckets); 0 turns bucketing off.', integer(0),
            default=DEFAULT_BUCKET_BYTES, arg='bucket_bytes',
            accepted='a number of bytes, an integer >= 0 (0 turns bucketing off; default %d)'
                     % DEFAULT_BUCKET_BYTES),
    Setting(ENV_CHUNK_BYTES, 'data path', 'Bytes per chunk: dense arrays larger than this are '
            'held as chunks spread over the servers and pushed and pulled as a pipeline '
            '(mxnet_ssp.core.chunks); 0 (the default) keeps every array whole; 524288 (512 KiB) '
            'is the size measured best for jobs across hosts.', integer(0),
            default=DEFAULT_CHUNK_BYTES, arg='chunk_bytes',
            accepted='a number of bytes, an integer >= 0 (0 keeps arrays whole; default %d)'
                     % DEFAULT_CHUNK_BYTES),
    Setting(ENV_CHUNK_WINDOW, 'data path', "How many chunks a worker's fast step keeps between "
            'push and pulled back (later pushes wait), so that a pull is not queued behind the '
            "whole model's pushes; 0: no limit.", integer(0), default=DEFAULT_CHUNK_WINDOW,
            accepted='a number of chunks, an integer >= 0 (0: no limit; default %d)'
                     % DEFAULT_CHUNK_WINDOW),
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


def bucket_bytes(environ=None, value=None):
    """Bytes per bucket: `value` (from Python) or ``MXNET_SSP_BUCKET_BYTES``, an integer >= 0
    (0: every array keeps its own key), default :data:`DEFAULT_BUCKET_BYTES`."""
    return read(ENV_BUCKET_BYTES, environ, given=value)


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
    (0: every array stays whole), default :data:`DEFAULT_CHUNK_BYTES`."""
    return read(ENV_CHUNK_BYTES, environ, given=value)


def chunk_window(environ=None):
    """``MXNET_SSP_CHUNK_WINDOW``: chunks in flight per worker in a fast step, an integer >= 0
    (0: no limit), default :data:`DEFAULT_CHUNK_WINDOW`."""
    return read(ENV_CHUNK_WINDOW, environ)
