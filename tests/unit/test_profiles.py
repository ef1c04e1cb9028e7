"""The emulated compute streams pinned draw by draw against their documented formula.

A stream of (scenario, seed, rank) must give the same times in every release: the lab
continues a grid where it stopped and the simulator replays the lab's draws.  The expected
values here are computed from the formula in mxnet_ssp.lab.profiles' docstrings, written out
again with the standard library, not by calling the stream.
"""
import random

import pytest

from mxnet_ssp.lab.profiles import SCENARIOS, Scenario, get_scenario


def documented(scenario, seed, rank, n, scale=1.0):
    """Times from ``random.Random('<name>:<seed>:<rank>')``: an episode starts when the worker
    is outside one and ``random() < episode_rate``, lasting ``randint(lo, hi)`` iterations at
    ``episode_factor``; then ``* max(0.05, 1 + jitter * gauss(0, 1))``."""
    rng = random.Random('%s:%s:%d' % (scenario.name, seed, rank))
    base = scenario.base_s * dict(scenario.slow).get(rank, 1.0)
    left, out = 0, []
    for _ in range(n):
        t = base
        if scenario.episode_rate:
            if left == 0 and rng.random() < scenario.episode_rate:
                left = rng.randint(*scenario.episode_length)
            if left:
                left -= 1
                t *= scenario.episode_factor
        if scenario.jitter:
            t *= max(0.05, 1.0 + scenario.jitter * rng.gauss(0.0, 1.0))
        out.append(t * scale)
    return out


@pytest.mark.parametrize('name', sorted(SCENARIOS))
@pytest.mark.parametrize('rank', [0, 1])
def test_each_scenario_stream_follows_the_documented_draws(name, rank):
    sc = SCENARIOS[name]
    stream = sc.stream(rank, 11)
    assert stream.rank == rank and stream.scenario is sc
    assert [stream.next() for _ in range(3000)] == documented(sc, 11, rank, 3000)


def test_the_slow_rank_and_the_episodes_follow_the_formula():
    sc = Scenario('t', 'test', workers=3, base_s=0.5, slow=((2, 3.0),), jitter=0.2,
                  episode_rate=0.2, episode_factor=5.0, episode_length=(2, 4))
    for rank in range(3):
        stream = sc.stream(rank, 'seed')
        assert stream.base == 0.5 * (3.0 if rank == 2 else 1.0)
        got = [stream.next(2.0) for _ in range(500)]
        assert got == documented(sc, 'seed', rank, 500, scale=2.0)
    assert max(got) > 5 * 0.5 * 3.0     # an episode did happen on the slow rank


def test_jitter_is_floored_at_five_percent_of_the_base():
    sc = Scenario('wild', 'test', workers=1, base_s=1.0, jitter=5.0)
    stream = sc.stream(0, 1)
    values = [stream.next() for _ in range(400)]
    assert values == documented(sc, 1, 0, 400)
    assert min(values) == 0.05 and max(values) > 2.0


def test_no_jitter_no_episode_is_exactly_the_base_times_the_scale():
    sc = Scenario('flat', 'test', workers=2, base_s=0.25, slow=((1, 4.0),))
    stream = sc.stream(1, 0)
    assert [stream.next(), stream.next(3.0)] == [1.0, 3.0]
    assert sc.times() == [0.25, 1.0]


@pytest.mark.parametrize('rank', [-1, 2, 8])
def test_a_rank_outside_the_scenario_is_named(rank):
    with pytest.raises(ValueError) as err:
        SCENARIOS['mixed-2'].stream(rank, 0)
    assert str(err.value) == 'scenario mixed-2 has ranks 0..1, not %r' % rank


def test_an_unknown_scenario_names_the_known_ones():
    with pytest.raises(ValueError) as err:
        get_scenario('mixed-4')
    assert str(err.value) == ("emulated scenario 'mixed-4' is not known: expected one of "
                              "mixed-2, straggler-8, transient-8, jitter-8")
    assert get_scenario('jitter-8') is SCENARIOS['jitter-8']


def test_summary_names_every_part_of_the_scenario():
    assert SCENARIOS['transient-8'].summary() == (
        '8 workers, base 60 ms, jitter 5%, episodes x4 for 20-60 iterations, started with '
        'probability 0.003 per iteration')
    assert SCENARIOS['mixed-2'].summary() == '2 workers, base 15 ms, worker 1 x2.5, jitter 1%'
