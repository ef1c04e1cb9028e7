"""Checkpoints: ``model-epoch<N>.{params,states,json}`` and ``model-final.*``.

Worker 0 saves them; every worker restores the optimizer state of one when
the job can take it.  Nothing here imports MXNet.
"""
import json
import logging
import os

from ..training_flags.values import checkpoint_info

logger = logging.getLogger(__name__)

__all__ = ['checkpoint_info', 'states_kind', 'updates_on_servers', 'save_checkpoint',
           'restore_states']


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
    """Worker 0: ``<name>.params``, ``<name>.states`` (where the store allows), ``<name>.json``."""
    base = os.path.join(save_dir, name)
    net.save_parameters(base + '.params')
    kind = states_kind(kv)
    if kind is not None:
        trainer.save_states(base + '.states')
    info = dict(info, params=base + '.params', states=base + '.states' if kind else None,
                states_kind=kind)
    with open(base + '.json', 'w') as f:
        json.dump(info, f, indent=2)
    logger.info('saved checkpoint %s (weights%s)', base + '.params',
                ', optimizer state on the servers' if kind == 'servers'
                else ', optimizer state' if kind else '; this store cannot save optimizer state')


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
