"""The simulator and the advisor see a scenario's links: each worker's link time (the
step's bytes up and down at its payload rate) is added to every one of its iterations."""
import pytest

from mxnet_ssp.lab.cluster_model import advise
from mxnet_ssp.lab.cluster_model.profiles import SCENARIOS, get_scenario
from mxnet_ssp.lab.cluster_model.simulate import main, simulate


def test_a_link_adds_its_time_to_every_iteration_of_its_worker():
    # no jitter: worker 1's iteration is 10 ms of compute + 2 x 125,000 bytes at 10 Mbit/s
    sc = get_scenario('workers=2,base_ms=10,links=1gbit:10mbit')
    res = simulate(None, 'asp', iterations=20, scenario=sc, step_bytes=125000)
    link = 2 * 8 * 125000 / (10 ** 7 * 1448 / 1514)
    fast = 0.010 + link / 100
    assert res.times == pytest.approx([fast, 0.010 + link])
    assert res.finish == pytest.approx([20 * fast, 20 * (0.010 + link)])
    assert res.fast_workers() == [0]
    # without links the two workers are equal
    plain = simulate(None, 'asp', iterations=20, scenario=get_scenario('workers=2,base_ms=10'))
    assert plain.finish == pytest.approx([0.2, 0.2])


def test_link_4_bounded_paradigms_run_at_worker_3s_pace():
    sc = SCENARIOS['link-4']
    asp = simulate(None, 'asp', iterations=200, scenario=sc)
    bsp = simulate(None, 'ssp:0', iterations=200, scenario=sc)
    assert asp.fast_workers() == [0, 1, 2]
    # worker 3: about 20 + 157 ms per iteration; the others about 36 ms
    assert asp.finish[3] / 200 == pytest.approx(0.1774, rel=0.03)
    assert asp.finish[0] / 200 == pytest.approx(0.0357, rel=0.05)
    assert bsp.finish[0] == pytest.approx(bsp.finish[3], rel=0.01)
    assert bsp.fast_wait_fraction > 0.7 and asp.fast_wait_fraction == 0
    # the step's size decides: a tiny model would leave worker 3 about as fast as the others
    small = simulate(None, 'asp', iterations=200, scenario=sc, step_bytes=1000)
    assert small.finish[3] / small.finish[0] == pytest.approx(1.0, abs=0.15)


def test_the_command_line_prints_the_link_times(capsys):
    assert main(['--scenario', 'link-4', '--iterations', '50', '--step-bytes', '940584',
                 'asp']) == 0
    out = capsys.readouterr().out
    assert ('link time per iteration (940584 bytes up and down at the payload rate): '
            '15.7, 15.7, 15.7, 157.4 ms') in out
    assert 'links 1gbit:1gbit:1gbit:100mbit' in out


def test_the_advisor_sees_link_4s_slow_worker():
    fit = advise.fit_cluster(SCENARIOS['link-4'])
    predictions = {p.label: p for p in advise.predict(fit, seeds=1)}
    # every bounded paradigm runs at worker 3's pace: about 4 / 0.18 = 22 iterations/s
    assert predictions['BSP'].throughput == pytest.approx(4 / 0.1804, rel=0.05)
    assert predictions['ASP'].throughput == pytest.approx(3 / 0.0387 + 1 / 0.1804, rel=0.05)
    assert predictions['BSP'].fast_wait > 0.7
    # balancing the compute leaves the links: the fast workers still wait for worker 3
    assert predictions['BSP + balance'].fast_wait == pytest.approx(
        predictions['BSP'].fast_wait, abs=0.05)


def test_the_help_names_the_step_bytes(capsys):
    with pytest.raises(SystemExit):
        main(['--help'])
    flat = ' '.join(capsys.readouterr().out.split())
    assert ("--step-bytes STEP_BYTES with a scenario's links: bytes a worker sends up (and "
            "receives down) per step (default: 940584, the lab's MLP)") in flat


def _table(out):
    return [line for line in out.splitlines() if line.startswith('|')]


def test_the_command_line_takes_the_lab_mlps_step_by_default_and_another_when_given(capsys):
    assert main(['--scenario', 'link-4', '--iterations', '50', 'asp']) == 0
    default = capsys.readouterr().out
    assert ('link time per iteration (940584 bytes up and down at the payload rate): '
            '15.7, 15.7, 15.7, 157.4 ms') in default.splitlines()
    # a tenth of the bytes: a tenth of every link's time, and the simulation uses it
    assert main(['--scenario', 'link-4', '--iterations', '50', '--step-bytes', '94058',
                 'asp']) == 0
    small = capsys.readouterr().out
    assert ('link time per iteration (94058 bytes up and down at the payload rate): '
            '1.6, 1.6, 1.6, 15.7 ms') in small.splitlines()
    assert _table(small) and _table(small) != _table(default)


class _WithoutLinkTimes:
    """A scenario as an older caller may hand one: everything but link_times."""

    def __init__(self, scenario):
        self._scenario = scenario

    def __getattr__(self, name):
        if name == 'link_times':
            raise AttributeError(name)
        return getattr(self._scenario, name)


def test_a_scenario_without_link_times_adds_nothing_to_an_iteration():
    sc = _WithoutLinkTimes(get_scenario('workers=2,base_ms=10'))
    res = simulate(None, 'asp', iterations=20, scenario=sc)
    assert res.times == pytest.approx([0.010, 0.010])
    assert res.finish == pytest.approx([0.2, 0.2])
