"""The table of settings (mxnet_ssp/config/table.py) and the controller's one wire form
(mxnet_ssp/core/controller_settings.py): every setting declared once, read by one function
with one precedence, and the same settings on both sides of the discovery exchange."""
import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.config import table
from mxnet_ssp.core.controller_settings import (DEFAULT_PLACEMENT, UNBOUNDED_STALENESS,
                                                ControllerSettings)


def test_every_row_says_what_it_is_and_the_launcher_rows_join_the_same_table():
    from mxnet_ssp.launch import settings as launch
    concerns = {s.concern for s in cfg.TABLE.values()}
    assert {'sync', 'data path', 'lifetime', 'topology', 'balance', 'settings file',
            'launcher', 'autoload'} <= concerns
    for name in launch.LAUNCHER_ONLY_ENV:
        assert cfg.TABLE[name].concern == 'launcher' and not cfg.TABLE[name].in_file
        assert name in cfg.NOT_IN_FILE
    with pytest.raises(ValueError, match='declared twice'):
        table.declare(table.Setting(cfg.ENV_TIMEOUT, 'sync', 'again', table.text))


def test_a_launcher_setting_is_refused_in_a_file_even_where_the_launcher_is_not_loaded():
    reason = cfg.not_in_file('MXNET_SSP_LAUNCH_SOMETHING_NEW')
    assert reason and "launcher's own" in reason
    assert cfg.not_in_file(cfg.ENV_TIMEOUT) is None


@pytest.mark.parametrize('name,value,accepted', [
    (cfg.ENV_FOLLOW_GRACE, '0', 'a number of seconds from 1 to 600 (default 10)'),
    (cfg.ENV_BUCKET_BYTES, '-1', 'a number of bytes, an integer >= 0'),
    (cfg.ENV_CONTROLLER, 'gpu', 'one of process, thread'),
    (cfg.ENV_HOST_COPIES, 'maybe', 'one of 1, true, yes, on (yes) or 0, false, no, off (no)'),
    (cfg.ENV_BALANCE_SMOOTHING, '0', 'a weight in (0, 1]'),
])
def test_read_names_the_setting_the_value_and_what_is_accepted(name, value, accepted):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.read(name, {name: value})
    assert str(err.value).startswith('%s=%r is not valid: expected %s' % (name, value, accepted))


def test_read_takes_python_over_the_environment_over_the_default():
    name = cfg.ENV_BUCKET_BYTES
    assert cfg.read(name, {}) == cfg.DEFAULT_BUCKET_BYTES
    assert cfg.read(name, {name: ' '}) == cfg.DEFAULT_BUCKET_BYTES        # blank: unset
    assert cfg.read(name, {name: '64'}) == 64
    assert cfg.read(name, {name: '64'}, given=128) == 128
    with pytest.raises(cfg.ConfigError, match=r"^bucket_bytes=-2 is not valid"):
        cfg.read(name, {name: '64'}, given=-2)          # from Python: named by its keyword


def test_a_required_setting_that_is_unset_says_so():
    with pytest.raises(cfg.ConfigError, match='DMLC_NUM_SERVER is not set'):
        cfg.read(cfg.ENV_NUM_SERVER, {})


def test_the_wire_form_round_trips_and_fills_in_what_an_older_worker_leaves_out():
    conf = cfg.from_env('dist_dssp', environ={cfg.ENV_STALENESS: '2,7', cfg.ENV_ELASTIC: '1'})
    sent = ControllerSettings.from_config(conf, 3)
    wire = sent.to_wire()
    assert wire['v'] == 1 and (wire['s_lower'], wire['s_upper'], wire['mode']) == (2, 7, 'bounded')
    assert ControllerSettings.from_wire(wire) == sent
    old = ControllerSettings.from_wire({'num_workers': '2', 's_lower': 0, 's_upper': 0,
                                        'mode': 'bounded', 'timeout': 30})
    assert (old.elastic, old.liveness, old.controller) == (0, cfg.DEFAULT_LIVENESS,
                                                           DEFAULT_PLACEMENT)
    assert old.num_workers == 2 and isinstance(old.timeout, float)
    started = sent.started('127.0.0.1', 'ab')
    assert ControllerSettings.from_wire(started.to_wire()).secret == 'ab'
    assert started.answer('127.0.0.1', 9) == {'host': '127.0.0.1', 'port': 9, 'secret': 'ab',
                                               's_lower': 2, 's_upper': 7, 'mode': 'bounded',
                                               'elastic': 1}


def test_an_elastic_asynchronous_store_asks_for_a_controller_that_holds_no_one():
    conf = cfg.from_env('dist_async', environ={cfg.ENV_ELASTIC: '1'})
    sent = ControllerSettings.from_config(conf, 2)
    assert (sent.s_lower, sent.s_upper) == (UNBOUNDED_STALENESS, UNBOUNDED_STALENESS)
    assert cfg.UNBOUNDED_STALENESS == UNBOUNDED_STALENESS
