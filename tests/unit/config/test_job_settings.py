"""What every worker of a job must share (mxnet_ssp/config/agree.py): each value of
job_settings in its normal form with where it came from, for every store type, read from the
mapping given (never os.environ then), and the servers' own comparison where no controller
compares.  Pure tests: no processes."""
import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.core.agreement import KVSTORE

EVERY_SETTING = {
    cfg.ENV_STALENESS: '2,6', cfg.ENV_DSSP_MODE: 'paper', cfg.ENV_TIMEOUT: '45',
    cfg.ENV_ELASTIC: '1', cfg.ENV_SOFTSYNC_SPLITS: '2', cfg.ENV_BUCKET_BYTES: '8192',
    cfg.ENV_HOST_UPDATES: 'yes', cfg.ENV_STALENESS_LOG: 'on', cfg.ENV_BIGARRAY_BOUND: '5000',
    'DMLC_NUM_WORKER': '2',
}


@pytest.fixture(autouse=True)
def other_process_settings(monkeypatch):
    """os.environ with other values: job_settings given a mapping must not look there."""
    for name, value in {cfg.ENV_BUCKET_BYTES: '128', cfg.ENV_BIGARRAY_BOUND: '7',
                        cfg.ENV_HOST_UPDATES: '0', cfg.ENV_TIMEOUT: '9'}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(cfg.ENV_SETTINGS, raising=False)
    cfg.reset_settings_cache()
    yield
    cfg.reset_settings_cache()


def test_every_value_of_a_dssp_worker_set_in_its_environment():
    conf = cfg.from_env('dist_dssp', environ=EVERY_SETTING)
    assert cfg.job_settings(conf, 8192, True, environ=EVERY_SETTING) == {
        KVSTORE: ['dist_dssp', 'the script'],
        cfg.ENV_STALENESS: ['2,6', 'environment'],
        cfg.ENV_DSSP_MODE: ['paper', 'environment'],
        cfg.ENV_TIMEOUT: ['45', 'environment'],
        cfg.ENV_ELASTIC: ['1', 'environment'],
        cfg.ENV_BUCKET_BYTES: ['8192', 'environment'],
        cfg.ENV_CHUNK_BYTES: ['%d' % cfg.DEFAULT_CHUNK_BYTES, 'default'],
        cfg.ENV_HOST_UPDATES: ['on', 'environment'],
        cfg.ENV_STALENESS_LOG: ['on', 'environment'],
        cfg.ENV_BIGARRAY_BOUND: ['5000', 'environment']}


def test_a_softsync_worker_shares_its_splits_and_no_staleness():
    conf = cfg.from_env('dist_softsync', environ=EVERY_SETTING)
    got = cfg.job_settings(conf, 8192, False, environ=EVERY_SETTING)
    assert got == {
        KVSTORE: ['dist_softsync', 'the script'],
        cfg.ENV_TIMEOUT: ['45', 'environment'],
        cfg.ENV_ELASTIC: ['1', 'environment'],
        cfg.ENV_SOFTSYNC_SPLITS: ['2', 'environment'],
        cfg.ENV_BUCKET_BYTES: ['8192', 'environment'],
        cfg.ENV_CHUNK_BYTES: ['%d' % cfg.DEFAULT_CHUNK_BYTES, 'default'],
        cfg.ENV_HOST_UPDATES: ['off', 'environment'],
        cfg.ENV_STALENESS_LOG: ['on', 'environment'],
        cfg.ENV_BIGARRAY_BOUND: ['5000', 'environment']}
    default = cfg.from_env('dist_softsync', environ={})
    assert cfg.job_settings(default, 0, False, environ={})[cfg.ENV_SOFTSYNC_SPLITS] == [
        '1', 'default']


@pytest.mark.parametrize('store', ['dist_ssp', 'dist_async', 'dist_sync'])
def test_only_dist_dssp_shares_its_mode_and_only_softsync_its_splits(store):
    conf = cfg.from_env(store, environ={})
    got = cfg.job_settings(conf, 0, False, environ={})
    assert cfg.ENV_DSSP_MODE not in got and cfg.ENV_SOFTSYNC_SPLITS not in got
    assert (cfg.ENV_STALENESS in got) == (store == 'dist_ssp')


def test_values_given_from_python_say_so():
    conf = cfg.from_env('dist_dssp', environ=EVERY_SETTING, staleness=(1, 3), mode='threshold',
                        timeout=0.00001, staleness_log=False)
    got = cfg.job_settings(conf, 4096, False, environ=EVERY_SETTING)
    assert got[cfg.ENV_STALENESS] == ['1,3', 'mxnet_ssp.create()']
    assert got[cfg.ENV_DSSP_MODE] == ['threshold', 'mxnet_ssp.create()']
    assert got[cfg.ENV_TIMEOUT] == ['1e-05', 'mxnet_ssp.create()']        # '%g'
    assert got[cfg.ENV_STALENESS_LOG] == ['off', 'mxnet_ssp.create()']
    assert got[cfg.ENV_BUCKET_BYTES] == ['4096', 'mxnet_ssp.create()']     # not the 8192 read


def test_unset_values_are_defaults_and_a_bucket_size_equal_to_the_default_is_not_from_python():
    conf = cfg.from_env('dist_dssp', environ={})
    got = cfg.job_settings(conf, cfg.DEFAULT_BUCKET_BYTES, True, environ={})
    assert got[cfg.ENV_BUCKET_BYTES] == ['%d' % cfg.DEFAULT_BUCKET_BYTES, 'default']
    assert got[cfg.ENV_BIGARRAY_BOUND] == ['1000000', 'default']
    assert got[cfg.ENV_HOST_UPDATES] == ['on', 'default']
    assert got[cfg.ENV_TIMEOUT] == ['300', 'default']


def test_origins_the_config_does_not_hold_are_read_from_the_mapping():
    """A SyncConfig made by hand has no origins: each then comes from the mapping."""
    conf = cfg.SyncConfig(store='dist_dssp', s_lower=1, s_upper=2, timeout=2.5, elastic=3)
    env = {cfg.ENV_DSSP_MODE: 'bounded', cfg.ENV_TIMEOUT: '2.5', cfg.ENV_ELASTIC: '3'}
    got = cfg.job_settings(conf, 64, False, environ=env)
    assert got[cfg.ENV_STALENESS] == ['1,2', 'default']
    assert got[cfg.ENV_DSSP_MODE] == ['bounded', 'environment']
    assert got[cfg.ENV_TIMEOUT] == ['2.5', 'environment']
    assert got[cfg.ENV_ELASTIC] == ['3', 'environment']
    assert got[cfg.ENV_BUCKET_BYTES] == ['64', 'mxnet_ssp.create()']


def test_without_a_mapping_the_process_settings_are_read(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    conf = cfg.from_env('dist_async', environ={})
    got = cfg.job_settings(conf, 128, False)
    assert got[cfg.ENV_BUCKET_BYTES] == ['128', 'environment']
    assert got[cfg.ENV_BIGARRAY_BOUND] == ['7', 'environment']
    assert got[cfg.ENV_HOST_UPDATES] == ['off', 'environment']


# -- the servers' comparison --------------------------------------------------------------------
@pytest.fixture
def fresh_reference():
    cfg._updater_reference.clear()
    yield
    cfg._updater_reference.clear()


def sent(rank, settings):
    return {'rank': rank, 'host': 'h%d' % rank, 'settings': settings}


def test_what_is_not_a_worker_s_settings_is_ignored_and_not_kept(fresh_reference):
    for junk in (None, 'text', {'rank': 0}, {'rank': 0, 'settings': ['x']}):
        assert cfg.check_updater_settings(junk) is None
    assert cfg._updater_reference == []
    first = sent(0, {KVSTORE: ['dist_async', 'the script']})
    assert cfg.check_updater_settings(first) is None
    assert cfg._updater_reference == [first]


def test_a_worker_that_sends_no_elastic_setting_has_no_controller(fresh_reference):
    """An older worker's settings without MXNET_SSP_ELASTIC: fail-fast, so the server
    compares."""
    old = {KVSTORE: ['dist_async', 'the script'], cfg.ENV_TIMEOUT: ['300', 'default']}
    assert cfg.check_updater_settings(sent(0, old)) is None
    message = cfg.check_updater_settings(sent(1, dict(old, **{cfg.ENV_TIMEOUT: ['60', 'x']})))
    assert message is not None and message.startswith(
        "worker 1 on host h1 has settings that differ from the job's: MXNET_SSP_TIMEOUT=60")
