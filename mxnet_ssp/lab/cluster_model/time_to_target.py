"""Time to a target accuracy: what staleness costs, fitted on the lab's runs, as plain data.

The advisor (:mod:`.advise`) ranks the paradigms by when each reaches a target accuracy, not
by throughput.  A paradigm's time to the target is the gradients the model needs to reach it
divided by the gradients per second the cluster applies (the throughput), and the gradients
needed grow with the staleness of each gradient (others' updates between its pull and its
push):

    updates(s) = updates0 * (1 + cost * s)        time = updates(s) / throughput

``updates0`` (gradients to the target without staleness: BSP) and ``cost`` (the extra share
of gradients per unit of mean staleness) are fitted on the lab's runs by
:mod:`mxnet_ssp.lab.reproduce.staleness_cost`, which also measures the error of the whole
prediction (simulated throughput and staleness included) against every lab scenario, out of
sample: its calibration table.  This module holds the model and reads the committed fit
(:data:`FIT_FILE`); it imports nothing outside the cluster model.
"""
import json
import math
import os
from dataclasses import dataclass

__all__ = ['StalenessCost', 'FIT_FILE', 'load_cost', 'updates_needed', 'time_to_target',
           'reached_at', 'quantile']

#: The fit and calibration of the lab's runs (``python -m mxnet_ssp.lab.reproduce.
#: staleness_cost --write`` regenerates it from docs/lab_runs/*/results.json).
FIT_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'time_to_target.json')


@dataclass(frozen=True)
class StalenessCost:
    """The fitted model and its measured error.

    Attributes
    ----------
    target : float
        The accuracy the fit's times refer to (the lab's task).
    metric : str
        How a run's time to the target was read (``sustained``: held for 2 s).
    updates0 : float
        Gradients (of all workers) to the target at staleness 0, pooled over the lab's BSP
        trials.
    cost : float
        Extra share of gradients per unit of mean gradient staleness.
    error_low, error_high : float
        The ratio measured / predicted time to the target: its 10th and 90th percentiles over
        the calibration rows (out of sample).  An interval is [predicted * low, predicted *
        high].
    rows : int
        Calibration rows the error comes from.
    coverage : float
        The share of those rows whose ratio lies in [error_low, error_high].
    staleness_max : float
        The largest mean gradient staleness of a fitted trial: beyond it the cost is
        extrapolated.
    """
    target: float
    metric: str
    updates0: float
    cost: float
    error_low: float
    error_high: float
    rows: int = 0
    coverage: float = 0.0
    staleness_max: float = math.inf

    def updates(self, staleness, updates0=None):
        return updates_needed(self.updates0 if updates0 is None else updates0, self.cost,
                              staleness)


def updates_needed(updates0, cost, staleness):
    """Gradients to the target at mean gradient staleness `staleness` (at least `updates0` x
    0.1: a negative cost fitted on noise never predicts free progress)."""
    return updates0 * max(0.1, 1.0 + cost * staleness)


def time_to_target(updates0, cost, staleness, throughput):
    """Seconds to the target: :func:`updates_needed` / `throughput` (gradients per second,
    all workers); infinite for a cluster that applies none."""
    if not throughput > 0:
        return math.inf
    return updates_needed(updates0, cost, staleness) / throughput


def reached_at(pushes, updates0, cost, wall_time):
    """When a simulated run reaches the target: ``(seconds, reached)``.

    `pushes` are the run's gradients in time order, ``(push time, staleness)``
    (:func:`.simulate.simulate` with ``record=True``).  The target is reached at the first
    push ``k`` with ``k >= updates_needed(updates0, cost, mean staleness of the first k)``:
    the fitted model, applied to the run as it goes, so a slow episode before the target
    delays it and one after it does not.  A run that ends (at `wall_time`) short of the target
    is extrapolated at its mean pace, with ``reached`` False."""
    total = 0
    for k, (seconds, stale) in enumerate(pushes, 1):
        total += stale
        if k >= updates_needed(updates0, cost, total / float(k)):
            return seconds, True
    if not pushes:
        return math.inf, False
    need = updates_needed(updates0, cost, total / float(len(pushes)))
    return wall_time * need / len(pushes), False


def quantile(values, q):
    """The `q` quantile of `values` (linear between order statistics)."""
    xs = sorted(values)
    if not xs:
        raise ValueError('quantile of no values')
    pos = q * (len(xs) - 1)
    low = int(math.floor(pos))
    high = min(low + 1, len(xs) - 1)
    return xs[low] + (xs[high] - xs[low]) * (pos - low)


class CostFileError(ValueError):
    """The fit file is missing or malformed: the message names the file and the key."""


def load_cost(path=FIT_FILE):
    """The :class:`StalenessCost` in `path` (default the committed fit)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise CostFileError('the staleness cost fit %s cannot be read: %s (regenerate it with '
                            'python -m mxnet_ssp.lab.reproduce.staleness_cost --write)'
                            % (path, err)) from None
    model = data.get('model') if isinstance(data, dict) else None
    keys = ('target', 'metric', 'updates0', 'cost', 'error_low', 'error_high', 'rows')
    if not isinstance(model, dict) or any(k not in model for k in keys):
        raise CostFileError('the staleness cost fit %s has no "model" with %s'
                            % (path, ', '.join(keys)))
    return StalenessCost(*(model[k] for k in keys), coverage=model.get('coverage', 0.0),
                         staleness_max=model.get('staleness_max', math.inf))
