"""The servers' model on a wall clock: copies of a server's weights at fixed times.

``MXNET_SSP_SERVER_SNAPSHOTS=SECONDS`` (the lab sets 0.25) makes every server keep, for each
point of a fixed grid of wall-clock times (the first update's time plus every multiple of
SECONDS), the weights it held at that time, whatever the workers do: a worker held by the
controller stops nobody's snapshots.  The copy is made lazily, on the server's update thread,
just *before* the first update after a grid point: nothing changed the weights between that
point and this update, so the copy is exactly the model at the point (and at every other point
passed since the last update).  After the last update the weights do not change any more: the
final model (worker 0's final evaluation) holds from there on.

Files, in the metrics directory (``MXNET_SSP_METRICS_DIR``):

``server-<rank>-snapshots.jsonl``
    One line per copy: ``times`` (the grid points it stands for, seconds since the epoch),
    ``taken`` (when it was copied), ``offset`` (bytes into the ``.bin`` file) and ``keys``:
    ``[key, size, members]`` in the order of the data, members ``[[index, offset, size,
    shape], ...]`` for a bucket (:mod:`mxnet_ssp.server.buckets`), else None.
``server-<rank>-snapshots.bin``
    The copies' float32 data end to end.

:func:`read_snapshots` reads them back as ``{parameter index: array}`` per grid point
(:mod:`mxnet_ssp.lab.reproduce.server_eval` evaluates them).  Plain data and NumPy
here: the class is driven by :class:`mxnet_ssp.server.updater.ServerOptimizer`, which passes the
weights it holds.
"""
import json
import logging
import math
import os
import time

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ['SnapshotClock', 'ServerSnapshots', 'read_snapshots', 'snapshots_from_env',
           'SNAPSHOT_FILES']

SNAPSHOT_FILES = ('server-%s-snapshots.jsonl', 'server-%s-snapshots.bin')


def period_number(seconds, period):
    """The number of the `period`-second period that `seconds` (from the origin) falls in, 1
    from `period` on; a time on a grid point counts in the period it starts. Not
    ``int(seconds / period)``: 0.6 / 0.2 is 2.999...96 in floats, and a time written as 0.6
    would count in the period before. Worker 0's ``--snapshot-every`` copies count the same."""
    return int(math.floor(seconds / period + 1e-9))


class SnapshotClock:
    """Which grid points an update at time `now` passes (pure logic, no I/O).

    The grid is ``origin + k * period`` for k = 1, 2, ...; the origin is the first update's
    time.  :meth:`passed` returns the grid points in ``(last update, now]``: the weights held
    at each of them are the weights just before this update.
    """

    __slots__ = ('period', 'origin', 'next_k')

    def __init__(self, period):
        if not (period > 0 and math.isfinite(period)):
            raise ValueError('snapshot period must be a number of seconds > 0, not %r' % period)
        self.period = float(period)
        self.origin = None
        self.next_k = 1

    def passed(self, now):
        """The grid points passed since the previous call (a list, often empty)."""
        if self.origin is None:
            self.origin = now
            return []
        last_k = period_number(now - self.origin, self.period)
        if last_k < self.next_k:
            return []
        points = [self.origin + k * self.period for k in range(self.next_k, last_k + 1)]
        self.next_k = last_k + 1
        return points


class ServerSnapshots:
    """One server's snapshot files (see the module's docstring).

    Not thread-safe: called on the server's single update thread only.  `directory` must exist
    or be creatable; a failure to write stops the snapshots with one logged error (the job goes
    on without them).
    """

    def __init__(self, period, directory, tag, clock=time.time):
        self.clock = SnapshotClock(period)
        self.now = clock
        self.paths = [os.path.join(directory, name % tag) for name in SNAPSHOT_FILES]
        self.directory = directory
        self.files = None
        self.offset = 0
        self.failed = False

    def before_update(self, weights, buckets):
        """Call before applying an update: copy `weights` ({key: array-like with
        ``asnumpy()`` or an ndarray}) if a grid point passed since the last update.
        `buckets` maps a bucket's key to its :class:`ServerBucket` (members)."""
        if self.failed:
            return
        points = self.clock.passed(self.now())
        if not points or not weights:
            return
        try:
            self._write(points, weights, buckets)
        except OSError as err:
            self.failed = True
            logger.error('server: snapshots stopped, cannot write %s: %s', self.paths[1], err)

    def _write(self, points, weights, buckets):
        if self.files is None:
            os.makedirs(self.directory, exist_ok=True)
            self.files = (open(self.paths[0], 'w', buffering=1), open(self.paths[1], 'wb'))
        keys = []
        start = self.offset
        for key in sorted(weights):
            value = weights[key]
            data = np.ascontiguousarray(
                (value.asnumpy() if hasattr(value, 'asnumpy') else np.asarray(value))
                .reshape(-1), dtype=np.float32)
            bucket = buckets.get(key)
            members = None if bucket is None else [list(m[:3]) + [list(m[3])]
                                                   for m in bucket.members]
            self.files[1].write(data.tobytes())
            self.offset += data.nbytes
            keys.append([key, int(data.size), members])
        self.files[1].flush()
        self.files[0].write(json.dumps({'times': [round(p, 6) for p in points],
                                        'taken': round(self.now(), 6), 'offset': start,
                                        'keys': keys}) + '\n')

    def close(self):
        if self.files is not None:
            for f in self.files:
                f.close()
            self.files = None


def snapshots_from_env(metrics_dir, tag, environ=None):
    """A server's :class:`ServerSnapshots` when ``MXNET_SSP_SERVER_SNAPSHOTS`` is set above 0,
    in `metrics_dir` (else the server's ``MXNET_SSP_METRICS_DIR``); None otherwise, or with a
    warning when there is no metrics directory to write to."""
    from .. import config as cfg
    env = os.environ if environ is None else environ
    period = cfg.parse_snapshot_period(env.get(cfg.ENV_SERVER_SNAPSHOTS))
    if not period:
        return None
    directory = metrics_dir or env.get(cfg.ENV_METRICS_DIR)
    if not directory:
        logger.warning('server: %s is set but %s is not: no snapshots are written',
                       cfg.ENV_SERVER_SNAPSHOTS, cfg.ENV_METRICS_DIR)
        return None
    return ServerSnapshots(period, directory, tag)


def read_snapshots(jsonl_path, bin_path=None):
    """The snapshots of one server: a list of (grid time, {parameter index: flat float32
    array}) in time order, a bucket split into its members (the header of flags after a
    bucket's payload dropped).  A copy listed in the index whose data is missing (a server
    killed mid-write) ends the list."""
    bin_path = bin_path or jsonl_path[:-len('.jsonl')] + '.bin'
    out = []
    with open(jsonl_path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    data = np.fromfile(bin_path, dtype=np.float32) if lines else np.zeros(0, np.float32)
    for entry in lines:
        at = entry['offset'] // 4
        params = {}
        for key, size, members in entry['keys']:
            if at + size > data.size:
                return out
            flat = data[at:at + size]
            at += size
            if members is None:
                params[int(key)] = flat
            else:
                for index, offset, length, _ in members:
                    params[int(index)] = flat[offset:offset + length]
        for t in entry['times']:
            out.append((float(t), params))
    return out
