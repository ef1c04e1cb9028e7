"""mxnet_ssp.config's settings added with buckets and elastic mode: bucket bytes, MXNet's
big-array bound, a rejoining worker, the elastic minimum and the environment they are read
from.  Written against the mutants the 2026-11-26 mutation run found alive or untested in
these functions (docs/testing.md)."""
import pytest

from mxnet_ssp import config as cfg

FLAGS = 'expected one of 1, true, yes, on (yes) or 0, false, no, off (no)'
BUCKET_FORM = ('a number of bytes, an integer >= 0 (0 turns bucketing off; default %d on one '
               'host, %d across hosts)' % (cfg.DEFAULT_BUCKET_BYTES, cfg.NETWORK_BUCKET_BYTES))
BOUND_FORM = ("an integer >= 1 (MXNet's own setting: arrays of at least this many elements "
              "are split over all servers)")
NAMES = (cfg.ENV_BUCKET_BYTES, cfg.ENV_BIGARRAY_BOUND, cfg.ENV_REJOIN, cfg.ENV_ELASTIC,
         cfg.ENV_NUM_WORKER, cfg.ENV_FOLLOW_GRACE, cfg.ENV_METRICS_DIR)


@pytest.fixture
def env(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def message(fn, *args, **kwargs):
    with pytest.raises(cfg.ConfigError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def test_bucket_bytes_default_environment_and_python_value(env):
    assert cfg.DEFAULT_BUCKET_BYTES == 4 << 20
    assert cfg.bucket_bytes() == cfg.DEFAULT_BUCKET_BYTES
    assert cfg.bucket_bytes({cfg.ENV_BUCKET_BYTES: '  '}) == cfg.DEFAULT_BUCKET_BYTES
    assert cfg.bucket_bytes({cfg.ENV_BUCKET_BYTES: '0'}) == 0
    assert cfg.bucket_bytes({cfg.ENV_BUCKET_BYTES: ' 65536 '}) == 65536
    env.setenv(cfg.ENV_BUCKET_BYTES, '1024')
    assert cfg.bucket_bytes() == 1024                        # os.environ by default
    assert cfg.bucket_bytes({}) == cfg.DEFAULT_BUCKET_BYTES  # the mapping given, not os.environ
    assert cfg.bucket_bytes(value=0) == 0                    # Python's value wins
    assert cfg.bucket_bytes({cfg.ENV_BUCKET_BYTES: '7'}, value=2048) == 2048


def test_bucket_bytes_refuses_naming_the_setting_and_the_form(env):
    assert message(cfg.bucket_bytes, {cfg.ENV_BUCKET_BYTES: '-1'}) == (
        "MXNET_SSP_BUCKET_BYTES='-1' is not valid: expected " + BUCKET_FORM)
    assert message(cfg.bucket_bytes, {cfg.ENV_BUCKET_BYTES: '4MB'}) == (
        "MXNET_SSP_BUCKET_BYTES='4MB' is not valid: expected " + BUCKET_FORM)
    assert message(cfg.bucket_bytes, value=-5) == (
        "bucket_bytes=-5 is not valid: expected " + BUCKET_FORM)
    assert message(cfg.bucket_bytes, value=1.5) == (
        "bucket_bytes=1.5 is not valid: expected " + BUCKET_FORM)


def test_bigarray_bound_as_mxnet_reads_it(env):
    assert cfg.bigarray_bound() == 1000000
    assert cfg.bigarray_bound({cfg.ENV_BIGARRAY_BOUND: ''}) == 1000000
    assert cfg.bigarray_bound({cfg.ENV_BIGARRAY_BOUND: '1'}) == 1
    env.setenv(cfg.ENV_BIGARRAY_BOUND, '200000')
    assert cfg.bigarray_bound() == 200000
    assert cfg.bigarray_bound({}) == 1000000
    assert message(cfg.bigarray_bound, {cfg.ENV_BIGARRAY_BOUND: '0'}) == (
        "MXNET_KVSTORE_BIGARRAY_BOUND='0' is not valid: expected " + BOUND_FORM)


def test_rejoining_is_a_flag_off_by_default(env):
    assert cfg.rejoining() is False
    assert cfg.rejoining({cfg.ENV_REJOIN: 'yes'}) is True
    env.setenv(cfg.ENV_REJOIN, '1')
    assert cfg.rejoining() is True and cfg.rejoining({}) is False
    assert message(cfg.rejoining, {cfg.ENV_REJOIN: 'later'}) == (
        "MXNET_SSP_REJOIN='later' is not valid: " + FLAGS)


def test_the_elastic_minimum_names_the_bound_in_its_message(env):
    form = ("is not valid: expected the least number of workers the job needs to go on, an "
            "integer 1 <= n <= %s, or 0/off for fail-fast")
    assert message(cfg.parse_elastic, '5', 4) == (
        "MXNET_SSP_ELASTIC='5' " + form % 'the number of workers (4)')
    assert message(cfg.parse_elastic, 'x') == (
        "MXNET_SSP_ELASTIC='x' " + form % 'the number of workers')
    assert cfg.parse_elastic('3', 4) == 3 and cfg.parse_elastic('off', 4) == 0
    env.setenv(cfg.ENV_ELASTIC, '2')
    env.setenv(cfg.ENV_NUM_WORKER, '3')
    assert cfg.elastic_min_workers() == 2                    # os.environ by default
    assert cfg.elastic_min_workers({}) == 0


def test_the_start_up_line_names_elastic_mode(env):
    conf = cfg.from_env('dist_async', {cfg.ENV_ELASTIC: '2', cfg.ENV_NUM_WORKER: '3',
                                       cfg.ENV_METRICS_DIR: 'off'})
    assert conf.describe() == 'dist_async elastic(min 2 workers) metrics=off'
    plain = cfg.from_env('dist_async', {cfg.ENV_METRICS_DIR: 'off'})
    assert plain.describe() == 'dist_async metrics=off'


def test_follow_grace_and_metrics_dir_read_os_environ_by_default(env):
    env.setenv(cfg.ENV_FOLLOW_GRACE, '30')
    env.setenv(cfg.ENV_METRICS_DIR, '/tmp/m')
    assert cfg.follow_grace() == 30.0 and cfg.follow_grace({}) == cfg.DEFAULT_FOLLOW_GRACE
    assert cfg.metrics_dir_if_set() == '/tmp/m' and cfg.metrics_dir_if_set({}) is None


# -- the sizes' defaults follow where the job's bytes travel (issue 56) ---------------------
@pytest.mark.parametrize('uri, one_host', [
    (None, True), ('', True), ('127.0.0.1', True), ('127.3.2.1', True), ('localhost', True),
    ('::1', True), ('[::1]', True), ('198.18.0.1', False), ('10.0.0.5', False),
    ('node-7', False), ('fe80::1', False)])
def test_a_job_is_on_one_host_only_with_a_loopback_scheduler(uri, one_host):
    env = {} if uri is None else {'DMLC_PS_ROOT_URI': uri}
    assert cfg.job_on_one_host(env) is one_host
    assert cfg.bucket_bytes(env) == (cfg.DEFAULT_BUCKET_BYTES if one_host
                                     else cfg.NETWORK_BUCKET_BYTES)
    assert cfg.chunk_bytes(env) == (cfg.DEFAULT_CHUNK_BYTES if one_host
                                    else cfg.NETWORK_CHUNK_BYTES)
    assert cfg.buckets_fit_model(env) is (not one_host)
    assert cfg.chunk_window(env) == (0 if one_host else cfg.DEFAULT_CHUNK_WINDOW)
    assert cfg.chunk_window(dict(env, **{cfg.ENV_CHUNK_WINDOW: '2'})) == 2


def test_sizes_set_by_the_user_win_over_the_defaults_across_hosts():
    env = {'DMLC_PS_ROOT_URI': '198.18.0.1', cfg.ENV_BUCKET_BYTES: '1048576',
           cfg.ENV_CHUNK_BYTES: '0'}
    assert cfg.bucket_bytes(env) == 1048576 and cfg.chunk_bytes(env) == 0
    assert not cfg.buckets_fit_model(env)
    across = {'DMLC_PS_ROOT_URI': '198.18.0.1'}
    assert cfg.bucket_bytes(across, value=8192) == 8192
    assert not cfg.buckets_fit_model(across, value=8192)
    assert cfg.chunk_bytes(across, value=0) == 0
    # a blank value reads as unset
    assert cfg.bucket_bytes(dict(across, **{cfg.ENV_BUCKET_BYTES: ' '})) == \
        cfg.NETWORK_BUCKET_BYTES
    with pytest.raises(cfg.ConfigError, match=cfg.ENV_CHUNK_BYTES):
        cfg.chunk_bytes(dict(across, **{cfg.ENV_CHUNK_BYTES: '-1'}))
