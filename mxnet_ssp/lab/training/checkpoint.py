"""Checkpoints: ``model-epoch<N>.{params,states,json,manifest.json}`` and ``model-final.*``.

The leader (worker 0; elastic: the lowest rank not lost) saves them; after
``mxnet-ssp-launch --job-restarts`` started the job again every worker finds the latest
complete one of this run (:func:`find_resume_point`).  Every worker restores the optimizer
state of one when the job can take it.  Nothing here imports MXNet.
"""
import json
import logging
import os
import time
import uuid

from ...checkpoint import atomic_write, latest_checkpoint, write_checkpoint
from ...config import num_servers
from ..training_flags.values import checkpoint_info

logger = logging.getLogger(__name__)

__all__ = ['checkpoint_info', 'states_kind', 'updates_on_servers', 'save_checkpoint',
           'restore_states', 'start_run', 'current_run', 'find_resume_point', 'RUN_FILE']


def states_kind(kv):
    """Where ``trainer.save_states`` puts the optimizer state on this job's store.

    'servers' (mxnet-ssp stores, its ``dist_sync`` included: every server writes
    ``<file>.server-<rank>``), 'file' (updates on the workers: ``local``, and MXNet's own
    ``dist_sync``, which this script runs with ``update_on_kvstore=False``), or None (MXNet's
    own ``dist_async`` cannot save it).
    """
    if kv.type == 'local' or (kv.type == 'dist_sync' and not updates_on_servers(kv)):
        return 'file'
    return 'servers' if hasattr(kv, 'slot_mode') else None


def updates_on_servers(kv):
    """Whether this script updates on the servers with store `kv`: every store but MXNet's
    own ``dist_sync``, whose servers never hear of a learning-rate change (apache/mxnet#15919);
    mxnet-ssp's ``dist_sync`` sends them, so its updates stay on the servers, in buckets."""
    return kv.type != 'dist_sync' or hasattr(kv, 'slot_mode')


def save_checkpoint(net, trainer, kv, save_dir, name, info):
    """The leader: ``<name>.params``, ``<name>.states`` (where the store allows),
    ``<name>.json`` and, written last, the manifest ``<name>.manifest.json``
    (:func:`mxnet_ssp.checkpoint.write_checkpoint`: every file atomic, so a kill during the
    save leaves the previous checkpoint the latest complete one)."""
    base = os.path.join(save_dir, name)
    kind = states_kind(kv)
    writers = {'params': ('.params', net.save_parameters)}
    external = {}
    if kind == 'file':
        writers['states'] = ('.states', trainer.save_states)
    elif kind == 'servers':
        # every server writes <base>.states.server-<rank> (atomically) before this returns
        trainer.save_states(base + '.states')
        external = {'states.server-%d' % r: '%s.states.server-%d' % (base, r)
                    for r in range(num_servers())}
    info = dict(info, params=base + '.params', states=base + '.states' if kind else None,
                states_kind=kind)

    def describe(tmp):
        with open(tmp, 'w') as f:
            json.dump(info, f, indent=2)
    writers['info'] = ('.json', describe)
    write_checkpoint(save_dir, name, writers, step=int(info.get('iteration') or 0), meta=info,
                     external=external)
    logger.info('saved checkpoint %s (weights%s)', base + '.params',
                ', optimizer state on the servers' if kind == 'servers'
                else ', optimizer state' if kind else '; this store cannot save optimizer state')


#: in save_dir: the id of the run whose checkpoints a restart may resume from
RUN_FILE = 'run.json'


def start_run(save_dir):
    """The leader of a fresh run (not a restart, not --resume-from): a new run id in
    ``run.json``, recorded in every checkpoint; a restart resumes only from checkpoints of
    the run named there, never from an earlier job's left in the same directory."""
    run_id = uuid.uuid4().hex

    def write(tmp):
        with open(tmp, 'w') as f:
            json.dump({'run_id': run_id, 'time': time.time()}, f)
    atomic_write(os.path.join(save_dir, RUN_FILE), write)
    return run_id


def current_run(save_dir):
    """The run id in ``run.json`` of `save_dir` (None if there is none)."""
    try:
        with open(os.path.join(save_dir, RUN_FILE)) as f:
            return str(json.load(f)['run_id'])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_resume_point(args, save_dir, restart):
    """Restart `restart` (> 0) of the job: the latest complete checkpoint of this run in
    `save_dir` that this job can take (same model, dataset, number of workers), as
    ``(params path, info)``, or None (said) to start from the beginning.  Torn checkpoints
    are skipped, naming the file."""
    run_id = current_run(save_dir)
    if run_id is None:
        logger.warning('restart %d: no %s in %s (the first start ended before any '
                       'checkpoint); starting from the beginning', restart, RUN_FILE, save_dir)
        return None
    expected = {'run_id': run_id, 'model': args.model, 'dataset': args.dataset}

    def accept(checkpoint):
        meta = checkpoint.meta
        for key, want in expected.items():
            if meta.get(key) != want:
                return '%s %r, this run has %r' % (key, meta.get(key), want)
        return None
    found = latest_checkpoint(save_dir, prefix='model-', accept=accept)
    if found is None:
        logger.warning('restart %d: no complete checkpoint of this run in %s; starting from '
                       'the beginning', restart, save_dir)
        return None
    info = dict(found.meta)
    info.setdefault('iteration', 0)
    logger.info('restart %d: resuming from %s (after epoch %d, iteration %d)', restart,
                found.files['params'], int(info['completed_epochs']), int(info['iteration']))
    return found.files['params'], info


def restore_states(trainer, kv, args, info):
    """Every worker: load the checkpoint's optimizer state when this job can take it."""
    kind = states_kind(kv)
    saved = info.get('states')
    why = None
    if not saved:
        why = 'the checkpoint has none'
    elif kind is None:
        why = '%s cannot restore optimizer state' % kv.type
    elif info.get('states_kind') != kind:
        why = 'it was saved by a %s store and this job uses %s' % (info.get('kvstore'), kv.type)
    elif kind == 'servers' and (info.get('num_workers') != kv.num_workers
                                or info.get('optimizer') != args.optimizer
                                or info.get('kvstore') != kv.type):
        why = ('it was saved by %s workers of %s with %s; this job has %d of %s with %s'
               % (info.get('num_workers'), info.get('kvstore'), info.get('optimizer'),
                  kv.num_workers, kv.type, args.optimizer))
    if why is not None:
        logger.warning('resuming with the weights of %s only, not its optimizer state: %s',
                       args.resume_from, why)
        return False
    trainer.load_states(saved)      # collective on mxnet-ssp stores
    logger.info('restored optimizer state from %s%s', saved,
                '.server-*' if kind == 'servers' else '')
    return True
