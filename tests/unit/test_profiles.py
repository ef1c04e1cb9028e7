"""The emulated compute streams pinned draw by draw against their documented formula.

A stream of (scenario, seed, rank) must give the same times in every release: the lab
continues a grid where it stopped and the simulator replays the lab's draws.  The expected
values here are computed from the formula in mxnet_ssp.lab.profiles' docstrings, written out
again with the standard library, not by calling the stream.
"""
import random

import pytest

from mxnet_ssp.lab.profiles import SCENARIOS, Scenario, ScenarioError, get_scenario


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
        get_scenario('mixed-3')
    assert str(err.value) == (
        "emulated scenario 'mixed-3' is not known: expected one of mixed-2, mixed-4, "
        "straggler-8, transient-8, jitter-8, a spec such as "
        "workers=4,base_ms=15,factors=1:1.3:1.8:3,"
        "jitter=10% (keys: name, workers, base_ms, factors, jitter, episode_rate, "
        "episode_factor, episode_length, description), or a .json or .toml file with those "
        "keys")
    assert get_scenario('jitter-8') is SCENARIOS['jitter-8']


# -- the user's own cluster ----------------------------------------------------------------

def test_a_spec_describes_a_cluster_and_reads_back_from_its_canonical_form():
    sc = get_scenario(' workers=4, base_ms=15, factors=1:1.3:1.8:3, jitter=10% ')
    assert (sc.name, sc.workers, sc.base_s, sc.jitter) == ('custom', 4, 0.015, 0.1)
    assert sc.times() == pytest.approx([0.015, 0.0195, 0.027, 0.045])
    assert sc.slow == ((1, 1.3), (2, 1.8), (3, 3.0))
    assert sc.max_factor == 3.0 and sc.mean_episode_factor == 1.0
    assert get_scenario(sc.spec()) == sc
    assert SCENARIOS['mixed-2'].spec() == 'mixed-2'
    # the same settings draw the same compute times in every process
    again = get_scenario(sc.spec())
    assert ([sc.stream(3, 7).next() for _ in range(5)]
            == [again.stream(3, 7).next() for _ in range(5)])


def test_episodes_in_a_spec_and_their_mean_slowdown():
    sc = get_scenario('name=shared,workers=3,base_ms=40,episode_rate=0.01,episode_factor=4,'
                      'episode_length=20-60')
    assert (sc.name, sc.episode_rate, sc.episode_factor, sc.episode_length) == (
        'shared', 0.01, 4.0, (20, 60))
    # an episode of 40 iterations on average starts after 100 normal ones: 40/140 of the time
    assert sc.mean_episode_factor == pytest.approx(1 + 3 * 40 / 140.0)
    assert get_scenario(sc.spec()) == sc
    assert sc.stream(2, 0).next() > 0


def test_a_json_and_a_toml_file_give_the_same_cluster(tmp_path):
    (tmp_path / 'lab4.json').write_text(
        '{"workers": 4, "base_ms": 15, "factors": [1, 1.3, 1.8, 3], "jitter": 0.1, '
        '"description": "our 4 boxes"}')
    (tmp_path / 'lab4.toml').write_text(
        'workers = 4\nbase_ms = 15\nfactors = [1, 1.3, 1.8, 3]\njitter = "10%"\n'
        'description = "our 4 boxes"\n')
    a = get_scenario(str(tmp_path / 'lab4.json'))
    b = get_scenario(str(tmp_path / 'lab4.toml'))
    assert a == b and a.name == 'lab4' and a.description == 'our 4 boxes'
    assert a.times() == pytest.approx([0.015, 0.0195, 0.027, 0.045])
    assert get_scenario(a.spec()).times() == a.times()


@pytest.mark.parametrize('value,words', [
    ('workers=1,base_ms=5', "workers = '1': expected an integer from 2 to 16"),
    ('workers=17,base_ms=5', "workers = '17': expected an integer from 2 to 16"),
    ('workers=2.5,base_ms=5', "workers = '2.5'"),
    ('workers=2,base_ms=0', "base_ms = '0': expected the compute milliseconds"),
    ('workers=2,base_ms=nan', "base_ms = 'nan'"),
    ('workers=2,base_ms=60001', "base_ms = '60001'"),
    ('workers=2', 'base_ms is required'),
    ('base_ms=2', 'workers is required'),
    ('workers=2,base_ms=5,factors=1', "factors = ['1']: expected 2 values (one per worker)"),
    ('workers=2,base_ms=5,factors=1:0.05', "factors = '0.05': expected each rank's compute"),
    ('workers=2,base_ms=5,jitter=1', "jitter = '1': expected the relative standard deviation"),
    ('workers=2,base_ms=5,jitter=-1%', "jitter = '-1%'"),
    ('workers=2,base_ms=5,episode_rate=1', "episode_rate = '1'"),
    ('workers=2,base_ms=5,episode_rate=0.1', 'episode_length = None'),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=5-2', 'episode_length = 5-2'),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=0-2', "episode_length = '0'"),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=1-2,episode_factor=0.5',
     "episode_factor = '0.5'"),
    ('workers=2,base_ms=5,episode_factor=3', 'episode_factor and episode_length need'),
    ('workers=2,base_ms=5,speed=3', 'unknown setting speed; accepted: name, workers'),
    ('workers=2,base_ms=5,workers=3', 'workers is given twice'),
    ('workers=2,base_ms=5,fast', "'fast' is not key=value"),
    ('workers=2,base_ms=5,name=mixed-2', "name = 'mixed-2': expected letters"),
    ('workers=2,base_ms=5,name=a b', "name = 'a b'"),
    ('workers=2,base_ms=5,description=x', 'description is accepted in a file only'),
])
def test_a_bad_spec_names_the_setting_the_value_and_what_is_accepted(value, words):
    with pytest.raises(ScenarioError) as err:
        get_scenario(value)
    assert words in str(err.value)
    assert str(err.value).startswith('scenario spec')


@pytest.mark.parametrize('name,text,words', [
    ('a.json', '{"workers": 2', 'is not valid JSON'),
    ('a.json', '[2, 3]', 'expected a table of settings'),
    ('a.json', '{"workers": true, "base_ms": 3}', 'workers = True'),
    ('a.json', '{"workers": 2, "base_ms": 3, "factors": "1:2"}', "factors = '1:2'"),
    ('a.json', '{"workers": 2, "base_ms": 3, "description": 5}', 'description = 5'),
    ('a.toml', 'workers = ', 'is not valid TOML'),
    ('mixed-2.json', '{"workers": 2, "base_ms": 3}', "name = 'mixed-2'"),
])
def test_a_bad_file_names_the_file_and_the_setting(tmp_path, name, text, words):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        get_scenario(str(path))
    assert str(err.value).startswith('scenario file %s' % path) and words in str(err.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ScenarioError) as err:
        get_scenario(str(tmp_path / 'nope.toml'))
    assert 'nope.toml cannot be read' in str(err.value)


def test_summary_names_every_part_of_the_scenario():
    assert SCENARIOS['transient-8'].summary() == (
        '8 workers, base 60 ms, jitter 5%, episodes x4 for 20-60 iterations, started with '
        'probability 0.003 per iteration')
    assert SCENARIOS['mixed-2'].summary() == '2 workers, base 15 ms, worker 1 x2.5, jitter 1%'
