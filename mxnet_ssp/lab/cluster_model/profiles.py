"""Emulated compute: per-worker profiles of iteration times (no MXNet).

A :class:`Scenario` describes a cluster by how long each worker's iteration
computes: a base time, a persistent slowdown per rank, a jitter, and transient
slow episodes.  :meth:`Scenario.stream` gives one worker's sequence of compute
times.  The training script (``--emulate NAME``) pads each real forward/backward
pass to the next time of its stream by sleeping; :mod:`mxnet_ssp.lab.cluster_model.simulate`
(``--scenario NAME``) draws the same sequences for the same seed, so the lab
and the simulator see identical compute times, iteration by iteration.

Only the compute is emulated: the parameter-server traffic, the store types,
the staleness of every gradient and the accuracy stay real.  A scenario may also give each
worker a link rate (``links``): the lab then runs the job on the emulated cluster
(:mod:`mxnet_ssp.lab.testbed`), each worker on a host of its own behind a link shaped to that
rate, so a worker can be slow because of its link; the simulator adds each worker's link
time (:meth:`Scenario.link_times`) to its iterations.

Besides the lab's named clusters (:data:`SCENARIOS`), a user describes their own
(:func:`get_scenario`): a one-line spec such as
``workers=4,base_ms=15,factors=1:1.3:1.8:3,jitter=10%``, or a JSON or TOML file with the
same keys (:data:`SPEC_KEYS`).
"""
import json
import math
import os
import random
import re
from dataclasses import dataclass

from ...core.rates import RATE_FORMS, RateError, format_rate, link_seconds, parse_rate

__all__ = ['Scenario', 'ComputeStream', 'SCENARIOS', 'SPEC_KEYS', 'SPEC_EXAMPLE',
           'get_scenario', 'parse_spec', 'load_file', 'ScenarioError', 'LAB_STEP_BYTES']

#: The run (iterations per worker) that a pinned episode's share refers to, unless a spec says
#: (``run_iterations``): the advisor's default run, 2,000 iterations of the slowest worker.
DEFAULT_RUN_ITERATIONS = 2000

#: Bytes one worker sends up (its gradients) and receives down (the weights) per step in
#: the lab's task: the MLP 784-256-128-10 (mxnet_ssp/lab/training/models.py) has
#: 784 x 256 + 256 + 256 x 128 + 128 + 128 x 10 + 10 = 235,146 float32 parameters.  What
#: a scenario's links cost the simulator per iteration (:meth:`Scenario.link_times`).
LAB_STEP_BYTES = 4 * (784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10)


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
    links : tuple of int
        Each rank's link rate in bits/s (one per worker), or () for none: the lab's jobs
        then run on loopback.  With links, the lab runs each worker on an emulated host of
        its own behind a link of that rate (both directions, tbf), the scheduler and the
        servers on a host of their own (:mod:`mxnet_ssp.lab.testbed.place`).
    pins : tuple of (rank, factor, start, end)
        Episodes pinned to a worker: worker `rank` computes `factor` times longer from
        iteration ``start * run_iterations`` to before ``end * run_iterations`` (start and end
        are shares of the run, 0 <= start < end <= 1), e.g. ``(3, 4.0, 0.35, 0.65)``: worker
        3 is 4x slower for the middle 30% of its iterations.
    run_iterations : int
        The run's iterations per worker that the pins' shares refer to.
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
    links: tuple = ()
    pins: tuple = ()
    run_iterations: int = DEFAULT_RUN_ITERATIONS

    def factor(self, rank):
        """The persistent slowdown of worker `rank` (1.0 for a normal worker)."""
        return dict(self.slow).get(rank, 1.0)

    def times(self):
        """Base compute time of every rank (seconds), without jitter or episodes."""
        return [self.base_s * self.factor(r) for r in range(self.workers)]

    def link_times(self, step_bytes=LAB_STEP_BYTES):
        """Seconds each rank's link adds to every iteration: `step_bytes` up and as many
        down at its link's payload rate (:func:`mxnet_ssp.core.rates.link_seconds`); zeros
        without links (loopback, whose time the step overhead already holds)."""
        if not self.links:
            return [0.0] * self.workers
        return [link_seconds(step_bytes, bits) for bits in self.links]

    def stream(self, rank, seed):
        """The compute times of worker `rank` in trial `seed` (a :class:`ComputeStream`)."""
        if not 0 <= rank < self.workers:
            raise ValueError('scenario %s has ranks 0..%d, not %r'
                             % (self.name, self.workers - 1, rank))
        return ComputeStream(self, rank, seed)

    @property
    def max_factor(self):
        """The largest persistent slowdown (1.0 if none)."""
        return max([1.0] + [f for _, f in self.slow])

    def pinned_factor(self, rank, iteration):
        """The slowdown of the pinned episodes (:attr:`pins`) of worker `rank` at its
        `iteration` (counted from 0); 1.0 outside them."""
        factor = 1.0
        for r, f, start, end in self.pins:
            if r == rank and start * self.run_iterations <= iteration < end * self.run_iterations:
                factor *= f
        return factor

    def pinned_mean(self, rank):
        """The mean slowdown that worker `rank`'s pinned episodes add over the run."""
        return 1.0 + sum((f - 1.0) * (end - start) for r, f, start, end in self.pins
                         if r == rank)

    @property
    def mean_episode_factor(self):
        """The long-run mean slowdown that episodes add (1.0 without them): the share of
        iterations in an episode, times its factor."""
        if not self.episode_rate:
            return 1.0
        length = (self.episode_length[0] + self.episode_length[1]) / 2.0
        share = self.episode_rate * length / (1.0 + self.episode_rate * length)
        return 1.0 + share * (self.episode_factor - 1.0)

    def spec(self):
        """The one-line form that :func:`get_scenario` reads back into this scenario: the
        name of a built-in one, else every setting (what a job's processes are given)."""
        if SCENARIOS.get(self.name) == self:
            return self.name
        parts = ['name=%s' % self.name, 'workers=%d' % self.workers,
                 'base_ms=%r' % (1e3 * self.base_s),
                 'factors=%s' % ':'.join('%r' % self.factor(r) for r in range(self.workers))]
        if self.jitter:
            parts.append('jitter=%r' % self.jitter)
        if self.episode_rate:
            parts += ['episode_rate=%r' % self.episode_rate,
                      'episode_factor=%r' % self.episode_factor,
                      'episode_length=%d-%d' % tuple(self.episode_length)]
        if self.links:
            parts.append('links=%s' % ':'.join(format_rate(b) for b in self.links))
        if self.pins:
            parts.append('pin=%s' % ';'.join(_pin_text(p) for p in self.pins))
            parts.append('run_iterations=%d' % self.run_iterations)
        return ','.join(parts)

    def summary(self):
        """One line for reports and logs."""
        parts = ['%d workers' % self.workers, 'base %g ms' % (1e3 * self.base_s)]
        parts += ['worker %d x%g' % (r, f) for r, f in self.slow]
        parts.append('jitter %g%%' % (100 * self.jitter))
        if self.episode_rate:
            parts.append('episodes x%g for %d-%d iterations, started with probability %g per '
                         'iteration' % ((self.episode_factor,) + tuple(self.episode_length)
                                        + (self.episode_rate,)))
        if self.links:
            parts.append('links %s' % ':'.join(format_rate(b) for b in self.links))
        for rank, factor, start, end in self.pins:
            parts.append('worker %d x%g for iterations %d-%d of %d (%g%%-%g%% of the run)' % (
                rank, factor, int(math.ceil(start * self.run_iterations)),
                int(math.ceil(end * self.run_iterations)) - 1, self.run_iterations,
                100 * start, 100 * end))
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
        self.iteration = 0             # iterations drawn so far (the pinned episodes' clock)

    def next(self, scale=1.0):
        sc, rng = self.scenario, self._rng
        t = self.base
        if sc.pins:
            t *= sc.pinned_factor(self.rank, self.iteration)
        self.iteration += 1
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
#: workers the 2 cores are shared by 8 training loops, so their base is 60 ms; ASP still
#: needs about 2.3 cores there (24 ms of CPU per iteration at ~95 iterations/s), so the lab's
#: multi-worker scenario is mixed-4, whose 20 ms base keeps ASP near 0.8 cores (measured:
#: about 7 ms of CPU per iteration, worker and server, at ~110 iterations/s; docs/lab.md).
SCENARIOS = {s.name: s for s in (
    Scenario('mixed-2', "the paper's Table I: 2 workers, worker 1 2.5x slower (a GTX 1060 "
             "next to a 1080 Ti), GPU-like jitter 1%", workers=2, base_s=0.015,
             slow=((1, 2.5),), jitter=0.01),
    Scenario('mixed-4', '4 workers of mixed speeds, 1 : 1.3 : 1.8 : 3 (e.g. three GPU '
             'generations and a shared card), jitter 10%; sized for 2 cores: ASP, the '
             'busiest paradigm, keeps about 0.8 of them busy', workers=4, base_s=0.020,
             slow=((1, 1.3), (2, 1.8), (3, 3.0)), jitter=0.10),
    Scenario('straggler-8', '8 workers, worker 7 2.5x slower, jitter 5%', workers=8,
             base_s=0.060, slow=((7, 2.5),), jitter=0.05),
    Scenario('transient-8', '8 equal workers; any of them, at random, computes 4x slower '
             'for 20-60 iterations (a shared cluster); jitter 5%', workers=8, base_s=0.060,
             jitter=0.05, episode_rate=0.003, episode_factor=4.0, episode_length=(20, 60)),
    Scenario('jitter-8', '8 equal workers, jitter 30%', workers=8, base_s=0.060, jitter=0.30),
    Scenario('transient-4', '4 equal workers; any of them, at random, computes 5x slower for '
             '5-15 iterations (about 17% of its iterations: stragglers that come and go); '
             'jitter 10%', workers=4, base_s=0.020, jitter=0.10, episode_rate=0.02,
             episode_factor=5.0, episode_length=(5, 15)),
    # A straggler by its link, not its compute: 4 equal workers at mixed-4's 20 ms and 10%
    # jitter, worker 3 behind 100 Mbit/s, the others behind 1 Gbit/s.  A step of the lab's
    # MLP moves LAB_STEP_BYTES = 940,584 bytes up and as many down: 15.05 Mbit, over the TCP
    # payload rate (1448/1514 of the setting) 15.7 ms at 1 Gbit/s and 157 ms at 100 Mbit/s.
    # So worker 3's iteration is about 20 + 157 = 177 ms against 20 + 16 = 36 ms for the
    # others: 5.0x slower, by its link alone (mixed-4's worker 3 is 3x, by its compute).
    # ASP then makes about 3 / 0.036 + 1 / 0.177 = 89 iterations per second, fewer than
    # mixed-4's measured 111, so the 2 cores stay inside mixed-4's sizing.
    Scenario('link-4', '4 equal workers (20 ms, jitter 10%), worker 3 behind a 100 Mbit/s '
             'link, the others behind 1 Gbit/s: a straggler by its link (a step of the lab\'s '
             'MLP takes about 157 ms on it, 16 ms on the others)', workers=4, base_s=0.020,
             jitter=0.10, links=(10 ** 9, 10 ** 9, 10 ** 9, 10 ** 8)),
)}


# ---------------------------------------------------------------- the user's own cluster

class ScenarioError(ValueError):
    """A scenario that cannot be read: the message names the setting, the value and what
    is accepted."""


#: The settings of a scenario spec or file, and what each accepts.
SPEC_KEYS = {
    'name': 'letters, digits, ".", "_" or "-", at most 40 (default: the file name, or '
            '"custom"); not the name of a built-in scenario',
    'workers': 'an integer from 2 to 16',
    'base_ms': 'the compute milliseconds of one iteration of a normal worker, > 0 and '
               '<= 60000',
    'factors': "each rank's compute time relative to base_ms, one per worker, each in "
               "[0.1, 100] (spec: 1:1.3:1.8:3; file: a list); default all 1",
    'jitter': 'the relative standard deviation of an iteration, in [0, 1): a fraction or a '
              'percentage (0.1 or 10%); default 0',
    'episode_rate': 'the probability per iteration that a worker starts a slow episode, in '
                    '[0, 1); default 0 (none)',
    'episode_factor': 'the slowdown during an episode, in [1, 100]; default 1',
    'episode_length': 'the range of an episode\'s length in iterations, 1 <= A <= B <= '
                      '100000 (spec: A-B; file: [A, B])',
    'links': "each rank's link rate, one per worker, each " + RATE_FORMS + " (spec: "
             "1gbit:1gbit:1gbit:100mbit; file: a list); default none (the job on loopback)",
    'pin': 'episodes pinned to a worker, RANK:FACTOR:SHARE or RANK:FACTOR:START-END, each '
           'a share of the run (a fraction or a percentage): 3:4:30% (worker 3 4x slower for '
           'the middle 30% of the run) or 3:4:10%-40%; several separated by ";" (file: a '
           'string or a list of them); RANK < workers, FACTOR in [1, 100], 0 <= START < END '
           '<= 1',
    'run_iterations': 'the iterations per worker of the run that pin\'s shares refer to, an '
                      'integer from 10 to 10000000 (default %d)' % DEFAULT_RUN_ITERATIONS,
    'description': 'free text for reports (file only)',
}
SPEC_EXAMPLE = 'workers=4,base_ms=15,factors=1:1.3:1.8:3,jitter=10%'
NAME_RE = re.compile(r'^[A-Za-z0-9._-]{1,40}$')


def get_scenario(value):
    """The scenario `value` names or describes: a built-in name (:data:`SCENARIOS`), a
    one-line spec (``key=value`` pairs separated by commas, :data:`SPEC_KEYS`), or the path
    of a ``.json`` or ``.toml`` file with the same keys.  Raises :class:`ScenarioError`
    (a ValueError) naming what is wrong and what is accepted."""
    if isinstance(value, Scenario):
        return value
    text = str(value).strip()
    if text in SCENARIOS:
        return SCENARIOS[text]
    if '=' in text:
        return parse_spec(text)
    if text.lower().endswith(('.json', '.toml')) or os.path.isfile(text):
        return load_file(text)
    raise ScenarioError('emulated scenario %r is not known: expected one of %s, a spec '
                        'such as %s (keys: %s), or a .json or .toml file with those keys'
                        % (text, ', '.join(SCENARIOS), SPEC_EXAMPLE, ', '.join(SPEC_KEYS)))


def parse_spec(text, where='scenario spec'):
    """The scenario of a one-line spec, e.g. :data:`SPEC_EXAMPLE`."""
    settings = {}
    for item in text.split(','):
        item = item.strip()
        if not item:
            continue
        key, sep, raw = item.partition('=')
        key = key.strip().lower()
        if not sep:
            raise ScenarioError('%s %r: %r is not key=value (keys: %s)'
                                % (where, text, item, ', '.join(SPEC_KEYS)))
        if key == 'description':
            raise ScenarioError('%s: description is accepted in a file only (a spec splits '
                                'at commas)' % where)
        if key in settings:
            raise ScenarioError('%s: %s is given twice' % (where, key))
        raw = raw.strip()
        if key == 'pin':
            settings[key] = raw
        elif key in ('factors', 'links'):
            settings[key] = raw.split(':') if raw else []
        elif key == 'episode_length':
            settings[key] = raw.split('-')
        else:
            settings[key] = raw
    return _build(settings, where, default_name='custom')


def load_file(path):
    """The scenario of a JSON or TOML file (a table of :data:`SPEC_KEYS`)."""
    where = 'scenario file %s' % path
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as err:
        raise ScenarioError('%s cannot be read: %s' % (where, err.strerror or err)) from None
    if path.lower().endswith('.toml'):
        try:
            import tomllib
        except ImportError:                     # Python < 3.11
            raise ScenarioError('%s: reading TOML needs Python 3.11 or later; write the same '
                                'keys as JSON' % where) from None
        try:
            settings = tomllib.loads(data.decode('utf-8'))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise ScenarioError('%s is not valid TOML: %s' % (where, err)) from None
    else:
        try:
            settings = json.loads(data.decode('utf-8'))
        except (UnicodeDecodeError, ValueError) as err:
            raise ScenarioError('%s is not valid JSON: %s' % (where, err)) from None
    if not isinstance(settings, dict):
        raise ScenarioError('%s: expected a table of settings (%s), got %s'
                            % (where, ', '.join(SPEC_KEYS), type(settings).__name__))
    stem = os.path.splitext(os.path.basename(path))[0]
    return _build(settings, where, default_name=stem)


def _number(where, key, raw, low, high, low_open=False, high_open=False, percent=False):
    text = raw.strip() if isinstance(raw, str) else raw
    scale = 1.0
    if percent and isinstance(text, str) and text.endswith('%'):
        text, scale = text[:-1], 0.01
    try:
        if isinstance(text, bool):
            raise ValueError
        value = float(text) * scale
    except (TypeError, ValueError):
        value = None
    if (value is None or not math.isfinite(value) or value < low or value > high
            or (low_open and value == low) or (high_open and value == high)):
        raise ScenarioError('%s: %s = %r: expected %s' % (where, key, raw, SPEC_KEYS[key]))
    return value


def _integer(where, key, raw, low, high):
    try:
        if isinstance(raw, (bool, float)):
            raise ValueError
        value = int(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        value = None
    if value is None or not low <= value <= high:
        raise ScenarioError('%s: %s = %r: expected %s' % (where, key, raw, SPEC_KEYS[key]))
    return value


def _build(settings, where, default_name):
    unknown = sorted(set(settings) - set(SPEC_KEYS))
    if unknown:
        raise ScenarioError('%s: unknown setting%s %s; accepted: %s'
                            % (where, 's' if len(unknown) > 1 else '', ', '.join(unknown),
                               ', '.join(SPEC_KEYS)))
    for key in ('workers', 'base_ms'):
        if key not in settings:
            raise ScenarioError('%s: %s is required (%s)' % (where, key, SPEC_KEYS[key]))
    name = settings.get('name', default_name)
    if not isinstance(name, str) or not NAME_RE.match(name) or name in SCENARIOS:
        raise ScenarioError('%s: name = %r: expected %s' % (where, name, SPEC_KEYS['name']))
    workers = _integer(where, 'workers', settings['workers'], 2, 16)
    base_ms = _number(where, 'base_ms', settings['base_ms'], 0.0, 60000.0, low_open=True)
    factors = settings.get('factors', [1.0] * workers)
    if not isinstance(factors, (list, tuple)) or len(factors) != workers:
        raise ScenarioError('%s: factors = %r: expected %d values (one per worker), each %s'
                            % (where, factors, workers, 'in [0.1, 100]'))
    factors = [_number(where, 'factors', f, 0.1, 100.0) for f in factors]
    jitter = _number(where, 'jitter', settings.get('jitter', 0), 0.0, 1.0, high_open=True,
                     percent=True)
    rate = _number(where, 'episode_rate', settings.get('episode_rate', 0), 0.0, 1.0,
                   high_open=True)
    factor = _number(where, 'episode_factor', settings.get('episode_factor', 1), 1.0, 100.0)
    length = settings.get('episode_length', (0, 0) if not rate else None)
    if rate:
        if not isinstance(length, (list, tuple)) or len(length) != 2:
            raise ScenarioError('%s: episode_length = %r: expected %s (required with '
                                'episode_rate)' % (where, length, SPEC_KEYS['episode_length']))
        length = tuple(_integer(where, 'episode_length', x, 1, 100000) for x in length)
        if length[0] > length[1]:
            raise ScenarioError('%s: episode_length = %d-%d: expected %s'
                                % ((where,) + length + (SPEC_KEYS['episode_length'],)))
    elif 'episode_factor' in settings or 'episode_length' in settings:
        raise ScenarioError('%s: episode_factor and episode_length need episode_rate > 0'
                            % where)
    links = _links(where, settings.get('links'), workers)
    pins = _pins(where, settings.get('pin'), workers)
    run_iterations = _integer(where, 'run_iterations',
                              settings.get('run_iterations', DEFAULT_RUN_ITERATIONS), 10,
                              10 ** 7)
    description = settings.get('description', '')
    if not isinstance(description, str):
        raise ScenarioError('%s: description = %r: expected %s'
                            % (where, description, SPEC_KEYS['description']))
    scenario = Scenario(name, description or 'your cluster', workers, base_ms / 1e3,
                        slow=tuple((r, f) for r, f in enumerate(factors) if f != 1.0),
                        jitter=jitter, episode_rate=rate, episode_factor=factor,
                        episode_length=tuple(length), links=links, pins=pins,
                        run_iterations=run_iterations)
    return scenario


def _pin_text(pin):
    rank, factor, start, end = pin
    return '%d:%r:%r-%r' % (rank, factor, start, end)


def _share(where, text, raw):
    """A share of the run: a fraction or a percentage, in [0, 1]."""
    text = text.strip()
    scale = 0.01 if text.endswith('%') else 1.0
    try:
        value = float(text[:-1] if scale != 1.0 else text) * scale
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ScenarioError('%s: pin = %r: %r is not a share of the run; expected %s'
                            % (where, raw, text, SPEC_KEYS['pin']))
    return value


def _pins(where, raw, workers):
    """The pinned episodes ((rank, factor, start, end), ...) of a pin setting."""
    if raw is None:
        return ()
    items = raw.split(';') if isinstance(raw, str) else raw
    if not isinstance(items, (list, tuple)) or not items:
        raise ScenarioError('%s: pin = %r: expected %s' % (where, raw, SPEC_KEYS['pin']))
    pins = []
    for item in items:
        if not isinstance(item, str) or item.count(':') != 2:
            raise ScenarioError('%s: pin = %r: %r is not RANK:FACTOR:SHARE or '
                                'RANK:FACTOR:START-END; expected %s'
                                % (where, raw, item, SPEC_KEYS['pin']))
        rank_text, factor_text, window = item.split(':')
        try:
            rank = int(rank_text.strip())
        except ValueError:
            rank = None
        if rank is None or not 0 <= rank < workers:
            raise ScenarioError('%s: pin = %r: rank %r is not a worker of %d (0..%d)'
                                % (where, raw, rank_text.strip(), workers, workers - 1))
        try:
            factor = float(factor_text)
        except ValueError:
            factor = None
        if factor is None or not 1.0 <= factor <= 100.0:
            raise ScenarioError('%s: pin = %r: factor %r is not in [1, 100]'
                                % (where, raw, factor_text.strip()))
        if '-' in window:
            start, end = (_share(where, x, raw) for x in window.split('-', 1))
        else:
            share = _share(where, window, raw)
            start, end = (1.0 - share) / 2.0, (1.0 + share) / 2.0
        if not start < end:
            raise ScenarioError('%s: pin = %r: the window %r is empty; expected START < END'
                                % (where, raw, window.strip()))
        pins.append((rank, factor, start, end))
    return tuple(pins)


def _links(where, raw, workers):
    """The bits/s of each rank's link, or () when `raw` is None (no links)."""
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)) or len(raw) != workers:
        raise ScenarioError('%s: links = %r: expected %d rates (one per worker), each %s'
                            % (where, raw, workers, RATE_FORMS))
    try:
        return tuple(parse_rate(rate, "worker %d's rate" % rank)
                     for rank, rate in enumerate(raw))
    except RateError as err:
        raise ScenarioError('%s: links = %r: %s' % (where, ':'.join(map(str, raw)), err)) \
            from None
