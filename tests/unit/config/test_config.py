"""Configuration parsing and validation (no MXNet processes)."""
import importlib.util
import os

import pytest

from conftest import ROOT
from mxnet_ssp import config as cfg


@pytest.mark.parametrize('store,value,expected', [
    ('dist_ssp', '3', (3, 3)), ('dist_ssp', ' 0 ', (0, 0)), ('dist_ssp', 5, (5, 5)),
    ('dist_dssp', '3,15', (3, 15)), ('dist_dssp', '4', (4, 4)), ('dist_dssp', (2, 9), (2, 9)),
    ('dist_dssp', '0, 0', (0, 0)),
])
def test_parse_staleness_accepts(store, value, expected):
    assert cfg.parse_staleness(value, store) == expected


@pytest.mark.parametrize('store,value,fragment', [
    ('dist_ssp', '-1', 'cannot be negative'),
    ('dist_dssp', '5,3', 'sL=5 is greater than sU=3'),
    ('dist_dssp', 'abc', "'sL,sU'"),
    ('dist_dssp', '1,2,3', "'sL,sU'"),
    ('dist_ssp', '3,15', 'one integer s'),
    ('dist_dssp', '', "'sL,sU'"),
    ('dist_dssp', 2.5, "'sL,sU'"),
    ('dist_ssp', True, 'one integer'),
])
def test_parse_staleness_rejects_with_a_message_naming_setting_value_and_form(store, value,
                                                                               fragment):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_staleness(value, store)
    text = str(err.value)
    assert cfg.ENV_STALENESS in text and repr(value) in text and fragment in text


def test_from_env_defaults_and_overrides():
    conf = cfg.from_env('dist_dssp', environ={})
    assert (conf.s_lower, conf.s_upper, conf.mode, conf.timeout) == (3, 15, 'bounded', 300.0)
    assert cfg.from_env('dist_ssp', environ={}).s_upper == 3
    env = {cfg.ENV_STALENESS: '2,6', cfg.ENV_DSSP_MODE: 'PAPER', cfg.ENV_TIMEOUT: '12',
           cfg.ENV_METRICS_DIR: 'off'}
    conf = cfg.from_env('dist_dssp', environ=env)
    assert (conf.s_lower, conf.s_upper, conf.mode, conf.timeout, conf.metrics_dir) == (
        2, 6, 'paper', 12.0, None)
    conf = cfg.from_env('dist_dssp', environ=env, staleness=(1, 1), mode='bounded')
    assert (conf.s_lower, conf.s_upper, conf.mode) == (1, 1, 'bounded')
    assert 'staleness=1' in conf.describe()


@pytest.mark.parametrize('env,fragment', [
    ({cfg.ENV_DSSP_MODE: 'fast'}, 'bounded, paper'),
    ({cfg.ENV_TIMEOUT: '0'}, 'seconds > 0'),
    ({cfg.ENV_TIMEOUT: 'nan'}, 'seconds > 0'),
    ({cfg.ENV_STALENESS: '-3'}, 'negative'),
])
def test_from_env_rejects(env, fragment):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.from_env('dist_dssp', environ=env)
    name = next(iter(env))
    assert name in str(err.value) and fragment in str(err.value)


def test_unknown_store_names_the_accepted_ones():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.check_kvstore_name('dist_sspp')
    assert 'dist_sspp' in str(err.value) and 'dist_dssp' in str(err.value)
    with pytest.raises(cfg.ConfigError):
        cfg.from_env('dist_device_sync', environ={})
    with pytest.raises(TypeError):
        cfg.from_env('dist_ssp', environ={}, stalenes=3)


def test_create_rejects_bad_input_before_starting_anything():
    import mxnet_ssp
    with pytest.raises(cfg.ConfigError) as err:
        mxnet_ssp.create('dist_sspp')
    assert 'dist_sspp' in str(err.value)
    with pytest.raises(cfg.ConfigError) as err:
        mxnet_ssp.create('dist_dssp', staleness='9,2')
    assert 'staleness' in str(err.value) and "'9,2'" in str(err.value)
    with pytest.raises(cfg.ConfigError) as err:
        mxnet_ssp.create('dist_device_sync', staleness=3)
    assert 'only accepted by' in str(err.value)
    with pytest.raises(cfg.ConfigError) as err:
        mxnet_ssp.create('dist_sync', staleness=3)
    assert 'not a setting of dist_sync' in str(err.value)
    with pytest.raises(cfg.ConfigError) as err:
        mxnet_ssp.create('dist_async', staleness=3)
    assert 'not a setting of dist_async' in str(err.value)


def test_async_store_settings():
    conf = cfg.from_env('dist_softsync', environ={cfg.ENV_SOFTSYNC_SPLITS: '4'})
    assert conf.splits == 4 and not conf.synchronous and 'splits=4' in conf.describe()
    assert cfg.from_env('dist_softsync', environ={}).splits == 1
    assert cfg.from_env('dist_async', environ={}).splits is None
    for bad in ('0', '-2', 'x', '1.5'):
        with pytest.raises(cfg.ConfigError) as err:
            cfg.from_env('dist_softsync', environ={cfg.ENV_SOFTSYNC_SPLITS: bad})
        assert cfg.ENV_SOFTSYNC_SPLITS in str(err.value) and repr(bad) in str(err.value)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_splits(5, num_workers=4, source='splits')
    assert '1 <= n <= 4' in str(err.value)
    with pytest.raises(cfg.ConfigError):
        cfg.from_env('dist_async', environ={}, staleness=3)
    with pytest.raises(cfg.ConfigError):
        cfg.from_env('dist_ssp', environ={}, splits=2)


@pytest.mark.parametrize('value,expected', [('1', True), ('YES', True), (' on ', True),
                                            ('0', False), ('False', False), ('off', False),
                                            ('', True), (None, True)])
def test_parse_flag_accepts_every_spelling(value, expected):
    assert cfg.parse_flag(value, 'MXNET_SSP_X', True) is expected


@pytest.mark.parametrize('variable,reader', [
    (cfg.ENV_WRAP_ASYNC, lambda env: cfg.wrap_async(env)),
    (cfg.ENV_WRAP_SYNC, lambda env: cfg.wrap_sync(env)),
    (cfg.ENV_HOST_COPIES, lambda env: cfg.host_copies(env)),
    (cfg.ENV_HOST_UPDATES, lambda env: cfg.host_updates(env)),
    (cfg.ENV_STALENESS_LOG, lambda env: cfg.from_env('dist_async', env).staleness_log)])
def test_flags_reject_unknown_values_naming_the_variable(variable, reader):
    with pytest.raises(cfg.ConfigError) as err:
        reader({variable: 'maybe'})
    assert variable in str(err.value) and "'maybe'" in str(err.value)
    assert 'true' in str(err.value) and 'off' in str(err.value)


def test_staleness_log_flag_is_parsed_like_the_others():
    assert cfg.from_env('dist_async', {cfg.ENV_STALENESS_LOG: 'Yes'}).staleness_log is True
    assert cfg.from_env('dist_async', {cfg.ENV_STALENESS_LOG: 'off'}).staleness_log is False


def test_autoload_hook_reads_the_same_no_values():
    path = os.path.join(ROOT,
                        'kvstore_patches', 'mxnet_ssp_autoload.py')
    spec = importlib.util.spec_from_file_location('_autoload_under_test', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)        # does nothing here: not a worker process
    assert module._ENV == cfg.ENV_AUTOLOAD
    assert set(module._OFF) == {k for k, v in cfg.FLAG_VALUES.items() if not v}
    assert module._LEAN == cfg.ENV_LEAN_WORKERS
    assert set(module._ON) == {k for k, v in cfg.FLAG_VALUES.items() if v}


def test_our_store_types_are_the_ssp_and_async_ones():
    assert sorted(cfg.OUR_STORE_TYPES) == sorted(tuple(cfg.STORE_TYPES) + cfg.ASYNC_STORE_TYPES)


def test_num_servers_is_read_from_dmlc_num_server_and_validated():
    assert cfg.num_servers({'DMLC_NUM_SERVER': '3'}) == 3
    assert cfg.num_servers({'DMLC_NUM_SERVER': ' 1 '}) == 1
    for bad in ('0', '-2', 'two', '1.5'):
        with pytest.raises(cfg.ConfigError, match=r"DMLC_NUM_SERVER='%s' is not valid" % bad):
            cfg.num_servers({'DMLC_NUM_SERVER': bad})
    with pytest.raises(cfg.ConfigError, match='DMLC_NUM_SERVER is not set'):
        cfg.num_servers({})


@pytest.mark.parametrize('value,expected', [(None, 'process'), ('', 'process'),
                                            ('process', 'process'), (' Thread ', 'thread')])
def test_controller_placement_is_read_from_the_environment(value, expected):
    env = {} if value is None else {cfg.ENV_CONTROLLER: value}
    assert cfg.controller_placement(env) == expected
    assert cfg.from_env('dist_ssp', environ=env).controller == expected


def test_bad_controller_placement_names_the_setting_and_the_choices():
    with pytest.raises(cfg.ConfigError,
                       match=r"MXNET_SSP_CONTROLLER='fiber' is not valid: expected one of "
                             r"process, thread"):
        cfg.from_env('dist_dssp', environ={cfg.ENV_CONTROLLER: 'fiber'})


# -- elastic mode ---------------------------------------------------------------------

@pytest.mark.parametrize('value, expected', [
    (None, 0), ('', 0), (' 0 ', 0), ('off', 0), ('NO', 0), ('false', 0), ('1', 1), (' 3', 3)])
def test_parse_elastic_accepts_off_and_a_least_number(value, expected):
    assert cfg.parse_elastic(value, num_workers=3) == expected


@pytest.mark.parametrize('value', ['4', '-1', 'on', 'yes', '1.5', 'two'])
def test_parse_elastic_refuses_naming_setting_value_and_range(value):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_elastic(value, num_workers=3)
    text = str(err.value)
    assert text.startswith('MXNET_SSP_ELASTIC=%r is not valid' % value), text
    assert '1 <= n <= the number of workers (3)' in text and '0/off' in text


def test_elastic_reaches_every_store_config_and_its_description():
    env = {'MXNET_SSP_ELASTIC': '2', 'DMLC_NUM_WORKER': '3'}
    for store in cfg.OUR_STORE_TYPES:
        config = cfg.from_env(store, environ=env)
        assert config.elastic == 2 and config.reports_clock
        assert 'elastic(min 2 workers)' in config.describe()
    async_off = cfg.from_env('dist_async', environ={})
    assert async_off.elastic == 0 and not async_off.reports_clock
    assert cfg.from_env('dist_ssp', environ={}).reports_clock
    with pytest.raises(cfg.ConfigError, match=r"MXNET_SSP_ELASTIC='4'.*\(3\)"):
        cfg.from_env('dist_ssp', environ=dict(env, MXNET_SSP_ELASTIC='4'))
