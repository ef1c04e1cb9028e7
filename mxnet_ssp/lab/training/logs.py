"""Logging with role and rank, worker 0's progress bar, and the JSON Lines metrics files."""
import glob
import json
import logging
import os
import sys

from ...core.jsonl import read_jsonl
from ...core.names import STORE_METRICS, TRAIN_LOG
from ...core.env_names import DMLC_ROLE


class _RankFilter(logging.Filter):
    """Adds ``role`` and ``rank`` to every record.

    A worker's rank is '?' until its store exists; a server's is looked up
    once mxnet-ssp's server module runs in it.
    """

    def __init__(self, role=None):
        super().__init__()
        self.role = role or os.environ.get(DMLC_ROLE, 'worker')
        self.rank = 0 if self.role == 'scheduler' else '?'

    def filter(self, record):
        if self.rank == '?' and self.role == 'server':
            server = sys.modules.get('mxnet_ssp.server.updater')
            rank = server.server_rank() if server is not None else None
            if rank is not None:
                self.rank = rank
        record.role = self.role
        record.rank = self.rank
        return True


class _Handler(logging.StreamHandler):
    """stderr, through tqdm while worker 0's progress bar is on screen."""

    bar = None

    def emit(self, record):
        if self.bar is None:
            return super().emit(record)
        try:
            self.bar.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def setup_logging(role=None):
    """Log to stderr as ``<time> <role>[<rank>] <level> <message>``, mxnet-ssp's own lines
    included (:func:`mxnet_ssp._log.detach`); returns the filter."""
    from ... import _log
    _log.detach()
    rank_filter = _RankFilter(role)
    handler = _Handler()
    handler.addFilter(rank_filter)
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(role)s[%(rank)s] %(levelname)s %(message)s'))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return rank_filter


def make_progress(rank, total, initial=0, disabled=False, stream=None):
    """Worker 0's tqdm progress bar over `total` iterations, or None.

    None on other ranks, with ``--no-progress``, when `stream` (stderr) is not
    a terminal, or when tqdm is not installed.
    """
    stream = sys.stderr if stream is None else stream
    if rank != 0 or disabled or not getattr(stream, 'isatty', lambda: False)():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, file=stream, unit='it', dynamic_ncols=True,
                desc='worker[0]', leave=True)


class JsonLines:
    """JSON Lines file, one flushed line per record (appended to with `append`)."""

    def __init__(self, path, append=False):
        self.path = path
        self._file = open(path, 'a' if append else 'w', buffering=1)

    def write(self, **record):
        self._file.write(json.dumps(record) + '\n')

    def close(self):
        self._file.close()


def clear_earlier_job(save_dir, num_workers):
    """Worker 0 of a fresh (not resumed) run: remove what an earlier job left in `save_dir`
    that this job would not overwrite and a reader would mix with this job's files: the CPU
    records (``cpu-<role>-<pid>.json``, written at a process's exit, so none of this job's
    exists yet) and the per-rank files of ranks this job does not have.  Returns the paths
    removed."""
    gone = []
    for pattern in ('cpu-*.json', TRAIN_LOG.replace('%d', '*'), STORE_METRICS.replace('%d', '*')):
        for path in glob.glob(os.path.join(save_dir, pattern)):
            rank = os.path.basename(path).rsplit('.', 1)[0].rsplit('-', 1)[-1]
            rank = rank[len('worker'):] if rank.startswith('worker') else rank
            if pattern.startswith('cpu-') or (rank.isdigit() and int(rank) >= num_workers):
                try:
                    os.remove(path)
                    gone.append(path)
                except OSError:
                    pass
    return sorted(gone)


def count_iterations(save_dir):
    """``{rank: iterations}`` from the ``train-worker<rank>.jsonl`` files in `save_dir`."""
    counts = {}
    for path in glob.glob(os.path.join(save_dir, TRAIN_LOG.replace('%d', '*'))):
        records = read_jsonl(path)
        last = max((int(rec['iteration']) for rec in records), default=0)
        if last:
            counts[int(records[-1]['rank'])] = last
    return dict(sorted(counts.items()))


def show_progress(bar):
    """Write log lines through worker 0's progress `bar` while it is on screen (None: plain
    stderr again)."""
    _Handler.bar = bar

