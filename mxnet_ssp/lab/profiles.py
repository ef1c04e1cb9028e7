"""Emulated compute: per-worker profiles of iteration times (no MXNet).

A :class:`Scenario` describes a cluster by how long each worker's iteration
computes: a base time, a persistent slowdown per rank, a jitter, and transient
slow episodes.  :meth:`Scenario.stream` gives one worker's sequence of compute
times.  The training script (``--emulate NAME``) pads each real forward/backward
pass to the next time of its stream by sleeping; :mod:`mxnet_ssp.lab.simulate`
(``--scenario NAME``) draws the same sequences for the same seed, so the lab
and the simulator see identical compute times, iteration by iteration.

Only the compute is emulated: the parameter-server traffic, the store types,
the staleness of every gradient and the accuracy stay real.
"""
import random
from dataclasses import dataclass

__all__ = ['Scenario', 'ComputeStream', 'SCENARIOS', 'get_scenario']


@dataclass(frozen=True)
class Scenario:
    """A named emulated cluster.

    Attributes
    ----------
    name : str
    description : str
    workers : int
        The number of workers the scenario is defined for.
    base_s : float
        Compute seconds of one iteration of a normal worker at the nominal batch.
    slow : tuple of (rank, factor)
        Persistent slowdowns: worker `rank` computes `factor` times longer.
    jitter : float
        Relative standard deviation: an iteration takes ``t * max(0.05, 1 + jitter * N(0, 1))``.
    episode_rate : float
        Per iteration, the probability that a worker outside an episode starts a
        slow episode (0: none).
    episode_factor : float
        Slowdown during an episode.
    episode_length : (int, int)
        An episode lasts a uniformly drawn number of iterations in this range.
    """
    name: str
    description: str
    workers: int
    base_s: float
    slow: tuple = ()
    jitter: float = 0.0
    episode_rate: float = 0.0
    episode_factor: float = 1.0
    episode_length: tuple = (0, 0)

    def factor(self, rank):
        """The persistent slowdown of worker `rank` (1.0 for a normal worker)."""
        return dict(self.slow).get(rank, 1.0)

    def times(self):
        """Base compute time of every rank (seconds), without jitter or episodes."""
        return [self.base_s * self.factor(r) for r in range(self.workers)]

    def stream(self, rank, seed):
        """The compute times of worker `rank` in trial `seed` (a :class:`ComputeStream`)."""
        if not 0 <= rank < self.workers:
            raise ValueError('scenario %s has ranks 0..%d, not %r'
                             % (self.name, self.workers - 1, rank))
        return ComputeStream(self, rank, seed)

    def summary(self):
        """One line for reports and logs."""
        parts = ['%d workers' % self.workers, 'base %g ms' % (1e3 * self.base_s)]
        parts += ['worker %d x%g' % (r, f) for r, f in self.slow]
        parts.append('jitter %g%%' % (100 * self.jitter))
        if self.episode_rate:
            parts.append('episodes x%g for %d-%d iterations, started with probability %g per '
                         'iteration' % ((self.episode_factor,) + tuple(self.episode_length)
                                        + (self.episode_rate,)))
        return ', '.join(parts)


class ComputeStream:
    """One worker's emulated compute times, drawn from (scenario, seed, rank) alone.

    ``next(scale)`` returns the compute seconds of the next iteration; `scale`
    multiplies it (e.g. a batch of a different size than the nominal one).
    """

    def __init__(self, scenario, rank, seed):
        self.scenario = scenario
        self.rank = rank
        self.base = scenario.base_s * scenario.factor(rank)
        self._rng = random.Random('%s:%s:%d' % (scenario.name, seed, rank))
        self.episode_left = 0          # iterations left in the current slow episode

    def next(self, scale=1.0):
        sc, rng = self.scenario, self._rng
        t = self.base
        if sc.episode_rate:
            if self.episode_left == 0 and rng.random() < sc.episode_rate:
                self.episode_left = rng.randint(*sc.episode_length)
            if self.episode_left:
                self.episode_left -= 1
                t *= sc.episode_factor
        if sc.jitter:
            t *= max(0.05, 1.0 + sc.jitter * rng.gauss(0.0, 1.0))
        return t * scale


#: The lab's clusters.  The real forward/backward of the lab's task (an MLP on 28x28
#: MNIST, batch 32) takes 2-5 ms here and a step's traffic about 10 ms with 2 workers, so
#: 15 ms of emulated compute (37.5 ms for the slow worker) paces a 2-worker job.  With 8
#: workers the 2 cores are shared by 8 training loops, so their base is 60 ms.
SCENARIOS = {s.name: s for s in (
    Scenario('mixed-2', "the paper's Table I: 2 workers, worker 1 2.5x slower (a GTX 1060 "
             "next to a 1080 Ti), GPU-like jitter 1%", workers=2, base_s=0.015,
             slow=((1, 2.5),), jitter=0.01),
    Scenario('straggler-8', '8 workers, worker 7 2.5x slower, jitter 5%', workers=8,
             base_s=0.060, slow=((7, 2.5),), jitter=0.05),
    Scenario('transient-8', '8 equal workers; any of them, at random, computes 4x slower '
             'for 20-60 iterations (a shared cluster); jitter 5%', workers=8, base_s=0.060,
             jitter=0.05, episode_rate=0.003, episode_factor=4.0, episode_length=(20, 60)),
    Scenario('jitter-8', '8 equal workers, jitter 30%', workers=8, base_s=0.060, jitter=0.30),
)}


def get_scenario(name):
    """The scenario called `name`; ValueError naming the accepted ones otherwise."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError('emulated scenario %r is not known: expected one of %s'
                         % (name, ', '.join(SCENARIOS))) from None
