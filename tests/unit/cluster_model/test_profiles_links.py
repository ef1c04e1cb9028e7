"""A scenario's links (``links=``): per-worker link rates in tc's units, their parsing and
refusals, their round trip through spec() and files, link-4, and the link time a step of the
lab's task costs on each link."""
import json

import pytest

from mxnet_ssp.lab.cluster_model.profiles import (LAB_STEP_BYTES, SCENARIOS, ScenarioError,
                                              get_scenario)

FORMS = ("a number and a unit kbit, mbit or gbit (tc's units: 1mbit = 10^6 bit/s), e.g. "
         "100mbit, 1gbit, 2.5gbit; from 1mbit to 10gbit")


def test_a_spec_gives_each_worker_a_link_and_reads_back_from_its_canonical_form():
    sc = get_scenario('workers=3,base_ms=20,links=1gbit:2.5GBIT:100mbit')
    assert sc.links == (10 ** 9, 25 * 10 ** 8, 10 ** 8)
    assert sc.spec() == ('name=custom,workers=3,base_ms=20.0,factors=1.0:1.0:1.0,'
                         'links=1gbit:2.5gbit:100mbit')
    assert get_scenario(sc.spec()) == sc
    assert sc.summary() == '3 workers, base 20 ms, jitter 0%, links 1gbit:2.5gbit:100mbit'
    # the compute draws are the same with or without links: only the network differs
    plain = get_scenario('workers=3,base_ms=20')
    assert ([sc.stream(2, 5).next() for _ in range(4)]
            == [plain.stream(2, 5).next() for _ in range(4)])


def test_no_links_is_the_default_and_costs_nothing():
    sc = get_scenario('workers=2,base_ms=20')
    assert sc.links == () and sc.link_times() == [0.0, 0.0]
    assert 'links' not in sc.spec() and 'links' not in sc.summary()


def test_a_file_gives_the_links_as_a_list(tmp_path):
    path = tmp_path / 'edge.json'
    path.write_text(json.dumps({'workers': 2, 'base_ms': 20, 'links': ['1gbit', '10mbit']}))
    sc = get_scenario(str(path))
    assert sc.links == (10 ** 9, 10 ** 7) and sc.name == 'edge'
    assert get_scenario(sc.spec()) == sc


@pytest.mark.parametrize('value,message', [
    ('workers=2,base_ms=5,links=1gbit',
     "scenario spec: links = ['1gbit']: expected 2 rates (one per worker), each " + FORMS),
    ('workers=2,base_ms=5,links=',
     'scenario spec: links = []: expected 2 rates (one per worker), each ' + FORMS),
    ('workers=2,base_ms=5,links=1gbit:1gigabit',
     "scenario spec: links = '1gbit:1gigabit': worker 1's rate '1gigabit' is not a rate; "
     "accepted: " + FORMS),
    ('workers=2,base_ms=5,links=500kbit:1gbit',
     "scenario spec: links = '500kbit:1gbit': worker 0's rate '500kbit' is out of range; "
     "accepted: " + FORMS),
    ('workers=2,base_ms=5,links=1gbit:20gbit',
     "scenario spec: links = '1gbit:20gbit': worker 1's rate '20gbit' is out of range; "
     "accepted: " + FORMS),
])
def test_a_bad_link_names_the_setting_the_value_and_what_is_accepted(value, message):
    with pytest.raises(ScenarioError) as err:
        get_scenario(value)
    assert str(err.value) == message


def test_a_file_s_links_must_be_a_list_of_rates(tmp_path):
    path = tmp_path / 'x.json'
    path.write_text(json.dumps({'workers': 2, 'base_ms': 5, 'links': '1gbit:1gbit'}))
    with pytest.raises(ScenarioError) as err:
        get_scenario(str(path))
    assert str(err.value).startswith("scenario file %s: links = '1gbit:1gbit': expected 2 "
                                     "rates (one per worker)" % path)
    path.write_text(json.dumps({'workers': 2, 'base_ms': 5, 'links': ['1gbit', 100]}))
    with pytest.raises(ScenarioError) as err:
        get_scenario(str(path))
    assert "worker 1's rate 100 is not a rate" in str(err.value)


def test_the_lab_task_moves_its_mlp_each_way_per_step():
    # 784-256-128-10 with biases, float32
    assert LAB_STEP_BYTES == 940584


def test_link_4_makes_worker_3_the_slow_one_by_its_link_alone():
    sc = SCENARIOS['link-4']
    assert (sc.workers, sc.base_s, sc.jitter, sc.slow) == (4, 0.020, 0.10, ())
    assert sc.links == (10 ** 9,) * 3 + (10 ** 8,)
    assert sc.spec() == 'link-4' and get_scenario('link-4') is sc
    links = sc.link_times()
    # 2 x 940,584 bytes at 1448/1514 of the rate: 15.7 ms at 1 Gbit/s, 157 ms at 100 Mbit/s
    assert links[:3] == [pytest.approx(0.01574, abs=1e-5)] * 3
    assert links[3] == pytest.approx(0.1574, abs=1e-4)
    per_iteration = [t + link for t, link in zip(sc.times(), links)]
    assert per_iteration[3] / per_iteration[0] == pytest.approx(5.0, abs=0.05)
    # a smaller model would not make it the slow one: the bytes decide
    assert sc.link_times(step_bytes=10000)[3] < 0.1 * sc.base_s


def test_the_lab_step_bytes_are_the_lab_models_parameters():
    from conftest import need_module
    need_module('mxnet')
    from mxnet_ssp.lab.training.models import get_model
    net = get_model('mlp', 10, (1, 28, 28))
    net.initialize()
    import mxnet as mx
    net(mx.nd.zeros((1, 1, 28, 28)))
    assert 4 * sum(p.data().size for p in net.collect_params().values()) == LAB_STEP_BYTES
