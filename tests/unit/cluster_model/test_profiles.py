"""The emulated compute streams pinned draw by draw against their documented formula.

A stream of (scenario, seed, rank) must give the same times in every release: the lab
continues a grid where it stopped and the simulator replays the lab's draws.  The expected
values here are computed from the formula in mxnet_ssp.lab.cluster_model.profiles' docstrings, written out
again with the standard library, not by calling the stream.
"""
import random

import pytest

from mxnet_ssp.lab.cluster_model.profiles import SCENARIOS, Scenario, ScenarioError, get_scenario


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
        "straggler-8, transient-8, jitter-8, transient-4, link-4, a spec such as "
        "workers=4,base_ms=15,factors=1:1.3:1.8:3,"
        "jitter=10% (keys: name, workers, base_ms, factors, jitter, episode_rate, "
        "episode_factor, episode_length, links, pin, run_iterations, description), or a .json or .toml file with "
        "those keys")
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


# -- the user's own cluster: defaults, edges and the exact messages ------------------------

ACCEPTED = {    # what each setting accepts, as docs and SPEC_KEYS state it
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
    'episode_length': "the range of an episode's length in iterations, 1 <= A <= B <= "
                      '100000 (spec: A-B; file: [A, B])',
    'links': "each rank's link rate, one per worker, each a number and a unit kbit, mbit or "
             "gbit (tc's units: 1mbit = 10^6 bit/s), e.g. 100mbit, 1gbit, 2.5gbit; from 1mbit "
             "to 10gbit (spec: 1gbit:1gbit:1gbit:100mbit; file: a list); default none (the "
             "job on loopback)",
    'pin': 'episodes pinned to a worker, RANK:FACTOR:SHARE or RANK:FACTOR:START-END, each '
           'a share of the run (a fraction or a percentage): 3:4:30% (worker 3 4x slower for '
           'the middle 30% of the run) or 3:4:10%-40%; several separated by ";" (file: a '
           'string or a list of them); RANK < workers, FACTOR in [1, 100], 0 <= START < END '
           '<= 1',
    'run_iterations': "the iterations per worker of the run that pin's shares refer to, an "
                      'integer from 10 to 10000000 (default 2000)',
    'description': 'free text for reports (file only)',
}
KEYS = ('name, workers, base_ms, factors, jitter, episode_rate, episode_factor, '
        'episode_length, links, pin, run_iterations, description')


def test_the_accepted_settings_are_documented_in_order():
    from mxnet_ssp.lab.cluster_model.profiles import SPEC_EXAMPLE, SPEC_KEYS
    assert SPEC_KEYS == ACCEPTED and ', '.join(SPEC_KEYS) == KEYS
    assert SPEC_EXAMPLE == 'workers=4,base_ms=15,factors=1:1.3:1.8:3,jitter=10%'


def test_a_minimal_spec_takes_every_default():
    sc = get_scenario('workers=2,base_ms=5')
    assert sc == Scenario('custom', 'your cluster', 2, 0.005, slow=(), jitter=0.0,
                          episode_rate=0.0, episode_factor=1.0, episode_length=(0, 0))
    assert (type(sc.workers), type(sc.episode_factor), type(sc.episode_length)) == (
        int, float, tuple)
    assert sc.spec() == 'name=custom,workers=2,base_ms=5.0,factors=1.0:1.0'


def test_a_spec_passes_through_a_scenario_and_ignores_case_blanks_and_empty_items():
    sc = SCENARIOS['mixed-4']
    assert get_scenario(sc) is sc
    assert get_scenario('  mixed-4\n') is sc
    got = get_scenario(',, Workers = 3 ,BASE_MS=7,, Factors = 1 : 2 : 1 ,')
    assert (got.workers, got.base_s, got.slow) == (3, 0.007, ((1, 2.0),))


@pytest.mark.parametrize('spec,field,value', [
    ('workers=2,base_ms=5', 'workers', 2),
    ('workers=16,base_ms=5', 'workers', 16),
    ('workers=2,base_ms=60000', 'base_s', 60.0),
    ('workers=2,base_ms=0.001', 'base_s', 1e-6),
    ('workers=2,base_ms=5,factors=0.1:100', 'slow', ((0, 0.1), (1, 100.0))),
    ('workers=2,base_ms=5,jitter=0', 'jitter', 0.0),
    ('workers=2,base_ms=5,jitter=0%', 'jitter', 0.0),
    ('workers=2,base_ms=5,jitter=99%', 'jitter', 0.99),
    ('workers=2,base_ms=5,jitter=0.999', 'jitter', 0.999),
    ('workers=2,base_ms=5,episode_rate=0', 'episode_rate', 0.0),
    ('workers=2,base_ms=5,episode_rate=0.999,episode_length=1-1', 'episode_rate', 0.999),
    ('workers=2,base_ms=5,episode_rate=0.5,episode_length=1-1,episode_factor=1',
     'episode_factor', 1.0),
    ('workers=2,base_ms=5,episode_rate=0.5,episode_length=1-1,episode_factor=100',
     'episode_factor', 100.0),
    ('workers=2,base_ms=5,episode_rate=0.5,episode_length=1-1', 'episode_length', (1, 1)),
    ('workers=2,base_ms=5,episode_rate=0.5,episode_length=100000-100000', 'episode_length',
     (100000, 100000)),
    ('workers=2,base_ms=5,episode_rate=0.5,episode_length= 3 - 9 ', 'episode_length', (3, 9)),
    ('workers=2,base_ms=5,name=' + 'a' * 40, 'name', 'a' * 40),
    ('workers=2,base_ms=5,name=A.b_c-9', 'name', 'A.b_c-9'),
])
def test_the_edges_of_every_setting_are_accepted(spec, field, value):
    assert getattr(get_scenario(spec), field) == value


def test_episode_settings_default_to_a_factor_of_one():
    sc = get_scenario('workers=2,base_ms=5,episode_rate=0.25,episode_length=2-3')
    assert (sc.episode_rate, sc.episode_factor, sc.episode_length) == (0.25, 1.0, (2, 3))


def spec_error(value):
    with pytest.raises(ScenarioError) as err:
        get_scenario(value)
    return str(err.value)


@pytest.mark.parametrize('value,message', [
    ('workers=1,base_ms=5', "workers = '1': expected " + ACCEPTED['workers']),
    ('workers= 17 ,base_ms=5', "workers = '17': expected " + ACCEPTED['workers']),
    ('workers=x,base_ms=5', "workers = 'x': expected " + ACCEPTED['workers']),
    ('workers=2,base_ms=-1', "base_ms = '-1': expected " + ACCEPTED['base_ms']),
    ('workers=2,base_ms=0', "base_ms = '0': expected " + ACCEPTED['base_ms']),
    ('workers=2,base_ms=60000.5', "base_ms = '60000.5': expected " + ACCEPTED['base_ms']),
    ('workers=2,base_ms=inf', "base_ms = 'inf': expected " + ACCEPTED['base_ms']),
    ('workers=2,base_ms=5%', "base_ms = '5%': expected " + ACCEPTED['base_ms']),
    ('workers=2,base_ms=5,factors=1:100.5', "factors = '100.5': expected "
     + ACCEPTED['factors']),
    ('workers=2,base_ms=5,factors=0.09:1', "factors = '0.09': expected " + ACCEPTED['factors']),
    ('workers=2,base_ms=5,jitter=100%', "jitter = '100%': expected " + ACCEPTED['jitter']),
    ('workers=2,base_ms=5,jitter=-0.1', "jitter = '-0.1': expected " + ACCEPTED['jitter']),
    ('workers=2,base_ms=5,jitter=1.5', "jitter = '1.5': expected " + ACCEPTED['jitter']),
    ('workers=2,base_ms=5,jitter=%', "jitter = '%': expected " + ACCEPTED['jitter']),
    ('workers=2,base_ms=5,episode_rate=-0.1', "episode_rate = '-0.1': expected "
     + ACCEPTED['episode_rate']),
    ('workers=2,base_ms=5,episode_rate=1.5', "episode_rate = '1.5': expected "
     + ACCEPTED['episode_rate']),
    ('workers=2,base_ms=5,episode_rate=1%', "episode_rate = '1%': expected "
     + ACCEPTED['episode_rate']),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=1-2,episode_factor=101',
     "episode_factor = '101': expected " + ACCEPTED['episode_factor']),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=1-100001',
     "episode_length = '100001': expected " + ACCEPTED['episode_length']),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=9-8',
     'episode_length = 9-8: expected ' + ACCEPTED['episode_length']),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=4',
     "episode_length = ['4']: expected %s (required with episode_rate)"
     % ACCEPTED['episode_length']),
    ('workers=2,base_ms=5,episode_rate=0.1,episode_length=1-2-3',
     "episode_length = ['1', '2', '3']: expected %s (required with episode_rate)"
     % ACCEPTED['episode_length']),
    ('workers=2,base_ms=5,episode_rate=0.1',
     'episode_length = None: expected %s (required with episode_rate)'
     % ACCEPTED['episode_length']),
    ('workers=2,base_ms=5,episode_length=1-2',
     'episode_factor and episode_length need episode_rate > 0'),
    ('workers=2,base_ms=5,episode_rate=0,episode_factor=2',
     'episode_factor and episode_length need episode_rate > 0'),
    ('workers=3,base_ms=5,factors=1:2',
     "factors = ['1', '2']: expected 3 values (one per worker), each in [0.1, 100]"),
    ('workers=2,base_ms=5,factors=',
     'factors = []: expected 2 values (one per worker), each in [0.1, 100]'),
    ('workers=2,base_ms=5,name=' + 'a' * 41, "name = '%s': expected %s"
     % ('a' * 41, ACCEPTED['name'])),
    ('workers=2,base_ms=5,name=', "name = '': expected " + ACCEPTED['name']),
    ('workers=2,base_ms=5,name=straggler-8', "name = 'straggler-8': expected "
     + ACCEPTED['name']),
    ('workers=2,base_ms=5,speed=3,Zoom=1', 'unknown settings speed, zoom; accepted: ' + KEYS),
    ('workers=2,base_ms=5,speed=3', 'unknown setting speed; accepted: ' + KEYS),
    ('workers=2', 'base_ms is required (%s)' % ACCEPTED['base_ms']),
    ('base_ms=2', 'workers is required (%s)' % ACCEPTED['workers']),
    ('workers=2,base_ms=5,Workers=3', 'workers is given twice'),
    ('workers=2,base_ms=5,description=x',
     'description is accepted in a file only (a spec splits at commas)'),
])
def test_a_bad_spec_gives_the_whole_message(value, message):
    assert spec_error(value) == 'scenario spec: ' + message


def test_an_item_without_equals_names_the_spec_the_item_and_the_keys():
    assert spec_error('workers=2, fast ,base_ms=5') == (
        "scenario spec 'workers=2, fast ,base_ms=5': 'fast' is not key=value (keys: %s)"
        % KEYS)


def test_parse_spec_names_where_the_spec_came_from():
    from mxnet_ssp.lab.cluster_model.profiles import parse_spec
    with pytest.raises(ScenarioError) as err:
        parse_spec('workers=1,base_ms=5', where='--emulate')
    assert str(err.value) == "--emulate: workers = '1': expected " + ACCEPTED['workers']
    assert parse_spec('workers=2,base_ms=5').name == 'custom'


def file_error(path):
    with pytest.raises(ScenarioError) as err:
        get_scenario(str(path))
    return str(err.value)


@pytest.mark.parametrize('text,message', [
    ('{"workers": 2, "base_ms": true}', 'base_ms = True: expected ' + ACCEPTED['base_ms']),
    ('{"workers": 2.0, "base_ms": 3}', 'workers = 2.0: expected ' + ACCEPTED['workers']),
    ('{"workers": "3", "base_ms": 3, "factors": [1, 2]}',
     "factors = [1, 2]: expected 3 values (one per worker), each in [0.1, 100]"),
    ('{"workers": 2, "base_ms": 3, "factors": [1, "x"]}',
     "factors = 'x': expected " + ACCEPTED['factors']),
    ('{"workers": 2, "base_ms": 3, "factors": [1, null]}',
     'factors = None: expected ' + ACCEPTED['factors']),
    ('{"workers": 2, "base_ms": 3, "name": 7}', 'name = 7: expected ' + ACCEPTED['name']),
    ('{"workers": 2, "base_ms": 3, "episode_rate": 0.1, "episode_length": 5}',
     'episode_length = 5: expected %s (required with episode_rate)'
     % ACCEPTED['episode_length']),
    ('{"workers": 2, "base_ms": 3, "episode_rate": 0.1, "episode_length": [1.0, 2]}',
     'episode_length = 1.0: expected ' + ACCEPTED['episode_length']),
    ('{"workers": 2, "base_ms": 3, "episode_rate": 0.1, "episode_length": [true, 2]}',
     'episode_length = True: expected ' + ACCEPTED['episode_length']),
    ('{"workers": 2, "base_ms": 3, "description": ["x"]}',
     "description = ['x']: expected " + ACCEPTED['description']),
    ('{"workers": 2, "base_ms": 3, "speed": 1}', 'unknown setting speed; accepted: ' + KEYS),
    ('"workers"', 'expected a table of settings (%s), got str' % KEYS),
    ('[1]', 'expected a table of settings (%s), got list' % KEYS),
])
def test_a_bad_json_file_gives_the_whole_message(tmp_path, text, message):
    path = tmp_path / 'lab.json'
    path.write_text(text)
    assert file_error(path) == 'scenario file %s: %s' % (path, message)


def test_a_file_takes_every_default_and_its_name_from_the_file(tmp_path):
    path = tmp_path / 'my.lab.json'
    path.write_text('{"workers": " 3 ", "base_ms": " 2.5 ", "factors": ["1", 1, "2"], '
                    '"jitter": " 20% "}')
    assert get_scenario(str(path)) == Scenario(
        'my.lab', 'your cluster', 3, 0.0025, slow=((2, 2.0),), jitter=0.2, episode_rate=0.0,
        episode_factor=1.0, episode_length=(0, 0))


def test_a_file_with_episodes_and_a_name(tmp_path):
    path = tmp_path / 'Lab.TOML'
    path.write_text('name = "shared"\nworkers = 2\nbase_ms = 10\nepisode_rate = 0.01\n'
                    'episode_factor = 3\nepisode_length = [5, 7]\n')
    sc = get_scenario(str(path))
    assert (sc.name, sc.description, sc.episode_rate, sc.episode_factor, sc.episode_length) == (
        'shared', 'your cluster', 0.01, 3.0, (5, 7))


def test_a_json_file_needs_no_extension_when_it_exists(tmp_path):
    path = tmp_path / 'cluster'
    path.write_text('{"workers": 2, "base_ms": 4}')
    sc = get_scenario(str(path))
    assert (sc.name, sc.workers, sc.base_s) == ('cluster', 2, 0.004)
    upper = tmp_path / 'BIG.JSON'
    upper.write_text('{"workers": 2, "base_ms": 4}')
    assert get_scenario(str(upper)).name == 'BIG'


def test_a_file_that_is_not_text_or_not_valid_is_named(tmp_path):
    import json
    import tomllib
    for name, kind in (('bin.json', 'JSON'), ('bin.toml', 'TOML')):
        path = tmp_path / name
        path.write_bytes(b'\xff\xfe')
        message = file_error(path)
        assert message.startswith('scenario file %s is not valid %s: ' % (path, kind))
        assert "'utf-8' codec can't decode byte 0xff" in message
    path = tmp_path / 'bad.json'
    path.write_text('{"workers": 2')
    try:
        json.loads('{"workers": 2')
    except ValueError as err:
        why = str(err)
    assert file_error(path) == 'scenario file %s is not valid JSON: %s' % (path, why)
    path = tmp_path / 'bad.toml'
    path.write_text('workers = ')
    try:
        tomllib.loads('workers = ')
    except ValueError as err:
        why = str(err)
    assert file_error(path) == 'scenario file %s is not valid TOML: %s' % (path, why)


def test_a_missing_or_unreadable_file_gives_the_reason(tmp_path):
    path = tmp_path / 'nope.json'
    assert file_error(path) == 'scenario file %s cannot be read: No such file or directory' % path
    folder = tmp_path / 'dir.json'
    folder.mkdir()
    assert file_error(folder) == 'scenario file %s cannot be read: Is a directory' % folder


def test_an_unknown_value_that_is_not_a_file_is_not_read(tmp_path):
    message = spec_error(str(tmp_path / 'absent'))
    assert message.startswith("emulated scenario '%s' is not known" % (tmp_path / 'absent'))


def test_a_value_may_not_hold_a_second_equals_sign():
    # the key ends at the first '=': the rest, '=' included, is the value
    assert spec_error('workers=2,base_ms=5,name=a=b') == (
        "scenario spec: name = 'a=b': expected " + ACCEPTED['name'])


def test_toml_without_tomllib_asks_for_json(tmp_path, monkeypatch):
    import sys
    path = tmp_path / 'lab.toml'
    path.write_text('workers = 2\nbase_ms = 5\n')
    monkeypatch.setitem(sys.modules, 'tomllib', None)       # as on Python < 3.11
    assert file_error(path) == ('scenario file %s: reading TOML needs Python 3.11 or later; '
                                'write the same keys as JSON' % path)
    json_path = tmp_path / 'lab.json'
    json_path.write_text('{"workers": 2, "base_ms": 5}')
    assert get_scenario(str(json_path)).workers == 2


def test_a_file_s_text_values_are_stripped_of_any_whitespace(tmp_path):
    # str.strip() removes every whitespace character, also the separators U+001C..U+001F
    # that int() and float() alone reject
    assert '\x1c3\x1f'.strip() == '3'
    path = tmp_path / 'lab.json'
    path.write_text('{"workers": "\\u001c3\\u001f", "base_ms": "\\u001c5\\u001f", '
                    '"episode_rate": "\\u001d0.5", "episode_length": ["\\u001e2", 4]}')
    sc = get_scenario(str(path))
    assert (sc.workers, sc.base_s, sc.episode_rate, sc.episode_length) == (3, 0.005, 0.5, (2, 4))
