"""The test accuracy of the servers' model on a wall clock (``eval_server.jsonl``).

A lab run's servers copy their weights at fixed wall-clock times (``MXNET_SSP_SERVER_SNAPSHOTS``,
:mod:`mxnet_ssp.server.snapshots`): the model the servers held at each time, whatever the workers
were doing.  After the run, :func:`evaluate_run` evaluates every copy on the test set with the
run's own network (built as the training script builds it, its shapes from ``model-final``),
writes ``eval_server.jsonl`` (``elapsed_s`` on worker 0's clock, as ``eval.jsonl``) and deletes
the copies' data (about 1 MB per copy for the lab's MLP).  After the servers' last update the
weights do not change: the grid goes on with the final accuracy up to worker 0's final
evaluation.

This runs in the reproduce process, after the job: it costs the job nothing but the copies
themselves (measured in docs/lab.md).  The test set is the one the run used: the dataset and
its knobs that the run's ``summary.json`` records (:func:`run_data`).
"""
import glob
import json
import os

from ...core.jsonl import read_jsonl
from ...server.snapshots import SNAPSHOT_FILES, read_snapshots
from .json_files import read_json

__all__ = ['SERVER_EVAL', 'evaluate_run', 'merge_servers', 'extend_to_end', 'run_data']

SERVER_EVAL = 'eval_server.jsonl'


def merge_servers(per_server):
    """One list of (time, {index: array}) from each server's list: at every grid time of the
    first server, each other server's latest copy at or before it (a key on no copy yet is left
    out; :func:`evaluate_run` then keeps the final weights' value).  One server: its list."""
    if not per_server:
        return []
    first, others = per_server[0], per_server[1:]
    out = []
    for t, params in first:
        merged = dict(params)
        for snaps in others:
            before = [p for s, p in snaps if s <= t + 1e-9]
            if before:
                merged.update(before[-1])
        out.append((t, merged))
    return out


def extend_to_end(points, period, end, final_accuracy):
    """`points` [(elapsed s, accuracy)] continued every `period` seconds up to `end` with
    `final_accuracy` (the model after the servers' last update)."""
    points = list(points)
    if not points or final_accuracy is None or end is None:
        return points
    t = points[-1][0] + period
    while t <= end + 1e-9:
        points.append((round(t, 4), final_accuracy))
        t += period
    return points


def _worker0_clock(directory):
    """(start time on worker 0's clock, final evaluation record) from ``eval.jsonl``."""
    evals = read_jsonl(os.path.join(directory, 'eval.jsonl'))
    if not evals:
        raise ValueError('%s has no eval.jsonl: no clock to put the snapshots on' % directory)
    start = float(evals[0]['time']) - float(evals[0]['elapsed_s'])
    final = [e for e in evals if e.get('final')] or evals[-1:]
    return start, final[-1]


def run_data(directory, dataset, options=None):
    """``(dataset, load options)`` of the run in `directory`: what its ``summary.json``
    records (the training script writes ``dataset`` and ``data_options``, the generated task's
    knobs, e.g. ``{'scale': 2.0, 'noise': 0.0, 'dim': 16, 'hidden': 16, 'train_size':
    200000}``), each knob as its type (``generated_knobs.knob_value``: int for the sizes;
    other keys as recorded).  A summary from before ``data_options`` ran its dataset with no knobs
    or their defaults: ``{}``; one from before a knob ran it at its default, which the loader
    fills in.  Without a summary that names a dataset: `dataset` and `options` (the grid's),
    or ``{}``."""
    from ..training_flags.generated_knobs import KNOB_TYPES, knob_value, load_options
    summary = read_json(os.path.join(directory, 'summary.json'))
    if not isinstance(summary, dict) or not summary.get('dataset'):
        return dataset, load_options(dataset, dict(options or {}))
    recorded = summary.get('data_options') or {}
    if not isinstance(recorded, dict):
        raise ValueError('%s: summary.json\'s data_options is %r, not a mapping'
                         % (directory, recorded))
    try:
        return summary['dataset'], {key: knob_value(key, value) if key in KNOB_TYPES else value
                                    for key, value in recorded.items()}
    except ValueError as err:
        raise ValueError('%s: summary.json\'s data_options: %s' % (directory, err)) from None


def _network(directory, model, dataset, data_dir, options=None):
    import mxnet as mx
    from .. import data as datasets, loader
    from ..training.loop import evaluate
    from ..training.models import get_model
    full = datasets.load(dataset, data_dir, **(options or {}))
    mean, std = loader.channel_stats(datasets.arrays(full.train)[0])
    # read once, as one batch: the loader's batching costs more than the MLP's pass
    batches = list(loader.eval_loader(loader.normalized(full.test, mean, std)))
    batches = [(mx.nd.concat(*[x for x, _ in batches], dim=0),
                mx.nd.concat(*[y for _, y in batches], dim=0))]
    net = get_model(model, full.num_classes, full.image_shape)
    net.load_parameters(os.path.join(directory, 'model-final.params'), ctx=mx.cpu())
    params = list(net.collect_params().values())
    return net, params, (lambda: evaluate(net, batches))


def evaluate_run(directory, model, dataset, data_dir='.', keep_data=False, data_options=None):
    """Evaluate the servers' copies of the run in `directory`; write and return its
    ``eval_server.jsonl`` points [(elapsed s, accuracy)], or None when the run has no copies.
    The test set: the dataset and knobs the run recorded (:func:`run_data`; `dataset` and
    `data_options` when it recorded none).

    Raises ValueError when a copy does not fit the network (a different model, or a store
    that spreads a parameter over several keys)."""
    indexes = sorted(glob.glob(os.path.join(directory, SNAPSHOT_FILES[0] % '*')))
    if not indexes:
        return None
    snaps = merge_servers([read_snapshots(path) for path in indexes])
    start, final = _worker0_clock(directory)
    dataset, options = run_data(directory, dataset, data_options)
    net, params, accuracy = _network(directory, model, dataset, data_dir, options)
    del net
    final_values = [p.data().copy() for p in params]
    points = []
    for t, values in snaps:
        for index, value in values.items():
            if index >= len(params) or value.size != params[index].data().size:
                raise ValueError('%s: the servers\' key %d (%d values) is no parameter of %s'
                                 % (directory, index, value.size, model))
            params[index].data()[:] = value.reshape(params[index].shape)
        points.append((round(t - start, 4), accuracy()))
        for p, w in zip(params, final_values):
            p.data()[:] = w
    period = (snaps[1][0] - snaps[0][0]) if len(snaps) > 1 else None
    if period:
        points = extend_to_end(points, period, float(final['elapsed_s']),
                               float(final['accuracy']))
    with open(os.path.join(directory, SERVER_EVAL), 'w') as f:
        for elapsed, acc in points:
            f.write(json.dumps({'elapsed_s': elapsed, 'accuracy': acc}) + '\n')
    if not keep_data:
        for path in indexes:
            data = path[:-len('.jsonl')] + '.bin'
            if os.path.exists(data):
                os.remove(data)
    return points
