"""Defaults of ``--lr`` and ``--momentum`` that train: one worker's rate per model and
dataset (:data:`BASE_RATES`), scaled to the job (:func:`worker_scale`).

Why scale: with N workers the servers of every dist store but one apply N gradients' worth
of steps per round of one gradient from each worker.  ``dist_sync`` sums the N gradients
(gluon.Trainer's convention) and the asynchronous stores (``dist_async``, ``dist_ssp``,
``dist_dssp``) apply each of them at the full rate, and with stale weights: at one worker's
rate, 4 workers of the small digits networks ended at chance (test accuracy 0.10, loss stuck
at 2.30 after a first epoch at 3.5).  So a job's rate is one worker's divided by N
(``dist_sync --sync-average`` applies the mean: not divided; ``dist_softsync`` with n splits
applies n averaged updates per round: times n / N).

An explicit ``--lr`` / ``--momentum`` is never changed.  Standard library only.
"""
from collections import namedtuple

__all__ = ['BASE_RATES', 'Rate', 'base_rate', 'worker_scale', 'fill_defaults']

#: One row of :data:`BASE_RATES`: the models and datasets it covers (``'*'``: any), one
#: worker's learning rate and momentum, and where the numbers come from.
Rate = namedtuple('Rate', 'models datasets lr momentum source')

#: One worker's defaults, first matching row wins.
BASE_RATES = (
    Rate(('mlp',), ('digits', 'mnist5k'), 0.1, 0.9,
         'measured on digits, 10 epochs, worker 1 2.5x slower: 4 workers of dist_dssp at '
         '0.025 reached test accuracy 0.97, 8 of dist_async at 0.0125 0.975'),
    Rate(('mlp',), ('teacher',), 0.1, 0.9,
         "not tuned: mnist5k's mlp rate, taken over for the generated teacher task "
         "(issue 57's pilot chooses the lab's rates on it)"),
    Rate(('alexnet-small',), ('digits', 'mnist5k'), 0.05, 0.9,
         'measured on digits, 10 epochs, worker 1 2.5x slower: 4 workers of dist_ssp at '
         '0.0125 reached 0.95, while at 0.025 dist_ssp stayed at chance (0.10) and at 0.05 '
         'dist_dssp too; 1 worker at 0.1 reached 0.94'),
    Rate('*', ('cifar10', 'cifar100'), 0.1, 0.9,
         "GluonCV's train_cifar10.py (lr 0.1, momentum 0.9)"),
    Rate('*', '*', 0.1, 0.9, "GluonCV's classification scripts"),
)


def _covers(names, value):
    return names == '*' or value in names


def base_rate(model, dataset):
    """The :class:`Rate` row of `model` on `dataset` (the catch-all row when none is named)."""
    for row in BASE_RATES:
        if _covers(row.models, model) and _covers(row.datasets, dataset):
            return row
    raise AssertionError('BASE_RATES ends with a catch-all row')


def worker_scale(kvstore, num_workers, splits=None, sync_average=False):
    """``(factor, why)``: what one worker's learning rate is multiplied by in a job of
    `num_workers` workers on `kvstore`, and a few words saying why."""
    n = max(1, int(num_workers))
    if kvstore == 'local' or n == 1:
        return 1.0, 'one worker'
    if kvstore == 'dist_sync':
        if sync_average:
            return 1.0, "dist_sync --sync-average applies the mean of the workers' gradients"
        return 1.0 / n, "dist_sync applies the sum of the %d workers' gradients" % n
    if kvstore == 'dist_softsync':
        k = max(1, int(splits or 1))
        return (float(k) / n, 'dist_softsync applies %d averaged update(s) per %d gradients'
                % (k, n))
    return 1.0 / n, '%s applies each of the %d workers\' gradients' % (kvstore, n)


def fill_defaults(args, job):
    """Set ``args.lr`` and ``args.momentum`` where they were not given (None), and
    ``args.defaults_note`` to one line saying what was chosen and why (None when both were
    given).  `job` is the ``Job(environ, num_workers)`` of :mod:`.rules`, whose
    :func:`~.rules.find_problem` calls this once every check has passed.
    """
    args.defaults_note = None
    if args.lr is not None and args.momentum is not None:
        return
    row = base_rate(args.model, args.dataset)
    workers = job.num_workers if args.kvstore != 'local' else 1
    factor, why = worker_scale(args.kvstore, workers, getattr(args, 'splits', None),
                               getattr(args, 'sync_average', False))
    said = []
    if args.lr is None:
        args.lr = float('%.6g' % (row.lr * factor))
        said.append('--lr %g' % args.lr if factor == 1 else
                    '--lr %g (%g for one worker x %.4g: %s)' % (args.lr, row.lr, factor, why))
    if args.momentum is None:
        args.momentum = row.momentum
        said.append('--momentum %g' % args.momentum)
    args.defaults_note = 'defaults for %s on %s: %s' % (args.model, args.dataset,
                                                        ', '.join(said))
