"""Checkpoints a job can resume from after ``mxnet-ssp-launch --job-restarts`` started it again.

A training script asks two things at its start: whether this is a restart
(:func:`restart_count`, from ``MXNET_SSP_RESTART``, which the launcher sets in every process:
0 for the first start, N after the N-th restart) and, if so, where the latest complete
checkpoint is (:func:`latest_checkpoint`).  It saves checkpoints with :func:`write_checkpoint`
(any files) or :func:`save_gluon` (a Gluon network and, where the store can, its trainer's
optimizer state), and loads one with :func:`load_gluon`.  See docs/faults.md for an example.

A checkpoint is a set of files ``<directory>/<name><suffix>`` and, written last, its manifest
``<name>.manifest.json``, which lists every file with its size and SHA-256.  Every file is
written under a temporary name, flushed to disk (``fsync``) and renamed into place, and the
directory is flushed after the rename, so a process killed at any point leaves either a
complete checkpoint or one without a manifest, which :func:`latest_checkpoint` never returns.
A checkpoint whose manifest names a file that is missing or differs (a disk that lost data,
a file changed by hand) is skipped with a warning naming the file, and the one before it is
taken.

Files written by other processes (the servers' optimizer state, ``<prefix>.server-<rank>``,
which every mxnet-ssp server writes atomically on its own host) are listed as ``external``:
checked when this host can see them, trusted otherwise.

Nothing here imports MXNet until :func:`save_gluon` / :func:`load_gluon` are called.
Thread-safety: none needed; one process (the job's leader) writes, any may read.
"""
import hashlib
import json
import logging
import os
import tempfile
from typing import NamedTuple

from .config import num_servers, restart_number

logger = logging.getLogger(__name__)

__all__ = ['Checkpoint', 'MANIFEST_SUFFIX', 'restart_count', 'is_restart', 'atomic_write',
           'write_checkpoint', 'latest_checkpoint', 'read_checkpoint', 'save_gluon',
           'load_gluon']

#: the manifest of checkpoint NAME is NAME + this, in the checkpoint's directory
MANIFEST_SUFFIX = '.manifest.json'

_FORMAT = 1


class Checkpoint(NamedTuple):
    """A complete checkpoint (every file checked when it was found)."""
    name: str             # e.g. 'model-epoch003'
    directory: str        # absolute
    step: int             # its position, by which the latest is chosen (e.g. iterations done)
    meta: dict            # what the writer said about it (epoch, learning rate, ...)
    files: dict           # key -> absolute path of each file written here
    external: dict        # key -> absolute path of each file written by another process

    @property
    def manifest(self):
        return os.path.join(self.directory, self.name + MANIFEST_SUFFIX)


def restart_count(environ=None):
    """0 in the job's first start, N after ``mxnet-ssp-launch --job-restarts`` started it
    again the N-th time (``MXNET_SSP_RESTART``; 0 when unset, e.g. outside the launcher).
    Raises :class:`mxnet_ssp.config.ConfigError` for a value that is not an integer >= 0."""
    return restart_number(environ)


def is_restart(environ=None):
    """Whether this process belongs to a restarted job (:func:`restart_count` > 0)."""
    return restart_count(environ) > 0


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, write):
    """Write file `path` so that it is either absent/old or complete, never torn.

    `write(tmp_path)` writes the content to `tmp_path` (a new name in the same directory,
    e.g. ``net.save_parameters``); it is then flushed to disk, renamed to `path` and the
    directory flushed.  Blocking.  On an exception from `write` the temporary file is removed
    and the exception raised; `path` is untouched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(path), suffix='.tmp',
                               dir=directory)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, 'rb+') as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _digest(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return os.path.getsize(path), h.hexdigest()


def write_checkpoint(directory, name, writers, step, meta=None, external=None):
    """Write checkpoint `name` in `directory`; return its :class:`Checkpoint`.

    Parameters
    ----------
    writers : dict
        ``{key: (suffix, write)}``: file ``<name><suffix>`` is written by ``write(tmp_path)``
        (see :func:`atomic_write`), in the dict's order.
    step : int
        The checkpoint's position (e.g. iterations done): :func:`latest_checkpoint` takes the
        highest.
    meta : dict
        JSON-serialisable, kept in the manifest.
    external : dict
        ``{key: path}`` of files other processes wrote for this checkpoint before this call
        (e.g. each server's optimizer state); listed, and checked where this host sees them.

    Blocking; the manifest is written last, so a kill before it returns leaves no checkpoint.
    """
    directory = os.path.abspath(directory)
    files = {}
    for key, (suffix, write) in writers.items():
        path = os.path.join(directory, name + suffix)
        atomic_write(path, write)
        size, sha = _digest(path)
        files[key] = {'file': name + suffix, 'size': size, 'sha256': sha}
    outside = {}
    for key, path in (external or {}).items():
        path = os.path.abspath(path)
        outside[key] = {'path': path}
        if os.path.isfile(path):
            outside[key]['size'], outside[key]['sha256'] = _digest(path)
    manifest = {'format': _FORMAT, 'name': name, 'step': int(step), 'meta': dict(meta or {}),
                'files': files, 'external': outside}

    def dump(tmp):
        with open(tmp, 'w') as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
    atomic_write(os.path.join(directory, name + MANIFEST_SUFFIX), dump)
    return read_checkpoint(os.path.join(directory, name + MANIFEST_SUFFIX), verify=False)


def read_checkpoint(manifest_path, verify=True):
    """The :class:`Checkpoint` of a manifest; raise ValueError naming the file when the
    manifest cannot be read or (`verify`) a file it lists is missing or differs."""
    directory = os.path.dirname(os.path.abspath(manifest_path))
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
        if manifest.get('format') != _FORMAT:
            raise ValueError('format %r, expected %d' % (manifest.get('format'), _FORMAT))
        name, step = str(manifest['name']), int(manifest['step'])
        files = {k: (os.path.join(directory, v['file']), v['size'], v['sha256'])
                 for k, v in manifest['files'].items()}
        external = {k: (v['path'], v.get('size'), v.get('sha256'))
                    for k, v in manifest.get('external', {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError('%s is not a readable checkpoint manifest: %s'
                         % (manifest_path, err)) from None
    if verify:
        for key, (path, size, sha) in list(files.items()) + list(external.items()):
            if key in external and not os.path.exists(path):
                if sha is None:
                    continue        # written on another host: cannot be checked here
            if not os.path.isfile(path):
                raise ValueError('%s lists %s, which is missing' % (manifest_path, path))
            if sha is not None and _digest(path) != (size, sha):
                raise ValueError('%s lists %s, which differs from what was written (size %d, '
                                 'now %d bytes)' % (manifest_path, path, size,
                                                    os.path.getsize(path)))
    return Checkpoint(name, directory, step, manifest.get('meta', {}),
                      {k: v[0] for k, v in files.items()},
                      {k: v[0] for k, v in external.items()})


def latest_checkpoint(directory, prefix='', accept=None):
    """The complete checkpoint with the highest step in `directory`, or None.

    Only names starting with `prefix` are considered; `accept(checkpoint) -> str or None`
    may refuse one (the reason is logged).  A checkpoint that is torn (a file missing or
    different from what its manifest says) or refused is skipped with a warning naming the
    file, and the next one down is tried.  Blocking (reads and hashes the files).
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    found = []
    for entry in names:
        if entry.startswith(prefix) and entry.endswith(MANIFEST_SUFFIX) \
                and not entry.startswith('.'):
            path = os.path.join(directory, entry)
            try:
                with open(path) as f:
                    step = int(json.load(f)['step'])
            except (OSError, ValueError, KeyError, TypeError) as err:
                logger.warning('skipping a torn checkpoint: %s is not a readable checkpoint '
                               'manifest: %s', path, err)
                continue
            found.append((step, entry, path))
    for _, _, path in sorted(found, reverse=True):
        try:
            checkpoint = read_checkpoint(path)
        except ValueError as err:
            logger.warning('skipping a torn checkpoint: %s', err)
            continue
        why = accept(checkpoint) if accept is not None else None
        if why:
            logger.warning('skipping checkpoint %s: %s', checkpoint.manifest, why)
            continue
        return checkpoint
    return None


def save_gluon(directory, name, net, step, trainer=None, meta=None):
    """Save a Gluon network's weights (``<name>.params``) and, with `trainer`, its optimizer
    state (``<name>.states``) as checkpoint `name`; return its :class:`Checkpoint`.

    Call it in one process (the leader: rank 0, or ``kv.leader`` of an mxnet-ssp store in
    elastic mode).  With an mxnet-ssp store that updates on the servers, every server writes
    its own state, ``<name>.states.server-<rank>`` (collective: only the leader asks); with a
    store that updates on the workers (``local``) the state is a file here.  MXNet's own
    ``dist_*`` stores cannot save the servers' state (apache/mxnet#15923): pass no trainer.
    """
    directory = os.path.abspath(directory)
    writers = {'params': ('.params', net.save_parameters)}
    external = {}
    on_servers = trainer is not None and _on_servers(trainer)
    if trainer is not None and not on_servers:
        writers['states'] = ('.states', trainer.save_states)
    if on_servers:
        prefix = os.path.join(directory, name + '.states')
        trainer.save_states(prefix)           # blocks until every server has written
        for rank in range(num_servers()):
            external['states.server-%d' % rank] = '%s.server-%d' % (prefix, rank)
        meta = dict(meta or {}, states_prefix=prefix)
    return write_checkpoint(directory, name, writers, step, meta, external)


def _on_servers(trainer):
    if getattr(trainer, '_kv_initialized', True) is False:
        trainer._init_kvstore()
    return bool(getattr(trainer, '_update_on_kvstore', False)) and \
        getattr(trainer, '_kvstore', None) is not None


def load_gluon(checkpoint, net, trainer=None, ctx=None):
    """Load `checkpoint`'s weights into `net` and, with `trainer`, its optimizer state (every
    worker calls it: with an mxnet-ssp store the load is collective)."""
    net.load_parameters(checkpoint.files['params'], ctx=ctx)
    if trainer is None:
        return
    if 'states' in checkpoint.files:
        trainer.load_states(checkpoint.files['states'])
    elif 'states_prefix' in checkpoint.meta:
        trainer.load_states(checkpoint.meta['states_prefix'])
