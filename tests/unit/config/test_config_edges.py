"""Edges of mxnet_ssp.config: every accepted value and boundary, every default, and every error
message in full (the README: "The error names the variable, the value and the forms it
accepts").  Pure tests: no processes; os.environ is only touched through monkeypatch."""
import pytest

from mxnet_ssp import config as cfg

SSP_FORM = "one integer s >= 0 (e.g. '3')"
DSSP_FORM = ("'sL,sU' with integers 0 <= sL <= sU (e.g. '3,15'), or one integer s meaning "
             "[s, s]")
OURS = 'dist_ssp, dist_dssp, dist_async, dist_softsync'
ALL_STORES = (OURS + ', local, device, nccl, dist_sync, dist_device_sync, dist_device_async, '
              'dist, horovod')
FLAGS = 'expected one of 1, true, yes, on (yes) or 0, false, no, off (no)'
OVERRIDES = 'metrics_dir, mode, splits, staleness, staleness_log, timeout'
BALANCE_OVERRIDES = 'max_batch, min_batch, period, smoothing, threshold, total'
TIMEOUT_FORM = 'expected a number of seconds > 0 (e.g. 300)'
INT_TOTAL = 'an integer >= 1 (samples per iteration over all workers)'
INT_BATCH = "an integer >= 1 (one worker's batch, in samples)"
INT_PERIOD = 'an integer >= 1 (iterations between two decisions)'
THRESHOLD_FORM = ('a fraction in [0, 1): the predicted gain below which the split stays '
                  '(e.g. 0.05)')
SMOOTHING_FORM = 'a weight in (0, 1]: how much the newest measurement counts (1: no averaging)'
ALL_ENV = (cfg.ENV_STALENESS, cfg.ENV_DSSP_MODE, cfg.ENV_TIMEOUT, cfg.ENV_METRICS_DIR,
           cfg.ENV_SOFTSYNC_SPLITS, cfg.ENV_STALENESS_LOG, cfg.ENV_WRAP_ASYNC, cfg.ENV_CONTROLLER,
           cfg.ENV_GPUS, cfg.ENV_NUM_SERVER, cfg.ENV_NUM_WORKER, cfg.ENV_HOST_COPIES,
           cfg.ENV_HOST_UPDATES) + cfg.BALANCE_ENV


def message(exc_type, fn, *args, **kwargs):
    """The text of the `exc_type` that fn(*args, **kwargs) raises (exactly that type)."""
    with pytest.raises(exc_type) as err:
        fn(*args, **kwargs)
    assert type(err.value) is exc_type
    return str(err.value)


@pytest.fixture
def clean_env(monkeypatch):
    """os.environ without any setting this module reads."""
    for name in ALL_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def hostile_env(clean_env):
    """os.environ with a bad value for every setting: a reader given `environ` must not look."""
    for name in ALL_ENV:
        clean_env.setenv(name, 'bogus')
    return clean_env


# ---------------------------------------------------------------------------
# names and constants
# ---------------------------------------------------------------------------
def test_the_variable_names_and_accepted_values_are_the_documented_ones():
    assert (cfg.ENV_STALENESS, cfg.ENV_DSSP_MODE, cfg.ENV_TIMEOUT, cfg.ENV_METRICS_DIR,
            cfg.ENV_SOFTSYNC_SPLITS, cfg.ENV_STALENESS_LOG, cfg.ENV_WRAP_ASYNC,
            cfg.ENV_CONTROLLER, cfg.ENV_GPUS, cfg.ENV_AUTOLOAD, cfg.ENV_NUM_SERVER,
            cfg.ENV_NUM_WORKER) == (
        'MXNET_SSP_STALENESS', 'MXNET_SSP_DSSP_MODE', 'MXNET_SSP_TIMEOUT',
        'MXNET_SSP_METRICS_DIR', 'MXNET_SSP_SOFTSYNC_SPLITS', 'MXNET_SSP_STALENESS_LOG',
        'MXNET_SSP_WRAP_ASYNC', 'MXNET_SSP_CONTROLLER', 'MXNET_SSP_GPUS', 'MXNET_SSP_AUTOLOAD',
        'DMLC_NUM_SERVER', 'DMLC_NUM_WORKER')
    assert cfg.BALANCE_ENV == ('MXNET_SSP_BALANCE_MIN', 'MXNET_SSP_BALANCE_MAX',
                               'MXNET_SSP_BALANCE_PERIOD', 'MXNET_SSP_BALANCE_THRESHOLD',
                               'MXNET_SSP_BALANCE_SMOOTHING')
    assert cfg.STORE_TYPES == {'dist_ssp': (3, 3), 'dist_dssp': (3, 15)}
    assert cfg.parse_mode('Paper') == 'paper'
    assert cfg.CONTROLLER_PLACEMENTS == ('process', 'thread')
    assert cfg.DEFAULT_TIMEOUT == 300.0 and cfg.DEFAULT_METRICS_DIR is None
    assert cfg.FLAG_VALUES == {'1': True, 'true': True, 'yes': True, 'on': True,
                               '0': False, 'false': False, 'no': False, 'off': False}
    assert issubclass(cfg.ConfigError, ValueError)


# ---------------------------------------------------------------------------
# SyncConfig
# ---------------------------------------------------------------------------
def test_sync_config_defaults_and_derived_properties():
    conf = cfg.SyncConfig()
    assert (conf.store, conf.s_lower, conf.s_upper, conf.mode, conf.timeout, conf.metrics_dir,
            conf.splits, conf.staleness_log, conf.controller) == (
        'dist_dssp', 3, 15, 'bounded', 300.0, None, None, False, 'process')
    assert conf.synchronous is True and conf.r_max == 12
    assert cfg.SyncConfig(store='dist_ssp', s_lower=3, s_upper=3).r_max == 0
    assert cfg.SyncConfig(s_lower=2, s_upper=9).r_max == 7
    for store in ('dist_async', 'dist_softsync'):
        assert cfg.SyncConfig(store=store).synchronous is False


@pytest.mark.parametrize('conf,text', [
    (cfg.SyncConfig(), 'dist_dssp staleness=[3, 15] mode=bounded timeout=300s '
                       'metrics=off'),
    (cfg.SyncConfig(store='dist_ssp', s_lower=3, s_upper=3),
     'dist_ssp staleness=3 mode=bounded timeout=300s metrics=off'),
    (cfg.SyncConfig(s_lower=0, s_upper=0, mode='paper', timeout=0.5, metrics_dir=None),
     'dist_dssp staleness=0 mode=paper timeout=0.5s metrics=off'),
    (cfg.SyncConfig(s_lower=2, s_upper=6, mode='threshold', timeout=12.25, metrics_dir=''),
     'dist_dssp staleness=[2, 6] mode=threshold timeout=12.25s metrics=off'),
    (cfg.SyncConfig(timeout=1e-7, metrics_dir='/tmp/m'),
     'dist_dssp staleness=[3, 15] mode=bounded timeout=1e-07s metrics=/tmp/m'),
    (cfg.SyncConfig(timeout=1234567.0), 'dist_dssp staleness=[3, 15] mode=bounded '
                                        'timeout=1.23457e+06s metrics=off'),
    (cfg.SyncConfig(store='dist_softsync', splits=4), 'dist_softsync splits=4 '
                                                     'metrics=off'),
    (cfg.SyncConfig(store='dist_softsync', splits=1, metrics_dir=None),
     'dist_softsync splits=1 metrics=off'),
    (cfg.SyncConfig(store='dist_async'), 'dist_async metrics=off'),
    (cfg.SyncConfig(store='dist_async', splits=3, metrics_dir=''), 'dist_async metrics=off'),
])
def test_describe_is_one_exact_line(conf, text):
    assert conf.describe() == text


def test_with_store_changes_only_the_store(clean_env):
    conf = cfg.SyncConfig(store='dist_dssp', s_lower=2, s_upper=7, mode='paper', timeout=9.0,
                          metrics_dir=None, splits=None, staleness_log=True,
                          controller='thread')
    assert cfg.with_store(conf, 'dist_ssp') == cfg.SyncConfig(
        store='dist_ssp', s_lower=2, s_upper=7, mode='paper', timeout=9.0, metrics_dir=None,
        splits=None, staleness_log=True, controller='thread')
    assert cfg.with_store(conf, 'DIST_Async').store == 'dist_async'
    assert cfg.with_store(conf, 'dist_softsync').store == 'dist_softsync'
    assert conf.store == 'dist_dssp'                       # frozen: a new object
    for bad in ('dist_sync', 'local', 'dist_sspp'):
        assert message(cfg.ConfigError, cfg.with_store, conf, bad) == (
            'kvstore type %r is not known: expected one of %s' % (bad, OURS))


# ---------------------------------------------------------------------------
# check_kvstore_name
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('name', ['dist_ssp', 'dist_dssp', 'dist_async', 'dist_softsync',
                                  'local', 'device', 'nccl', 'dist_sync', 'dist_device_sync',
                                  'dist_device_async', 'dist', 'horovod'])
def test_check_kvstore_name_accepts_every_store_in_any_case(name):
    assert cfg.check_kvstore_name(name) == name
    assert cfg.check_kvstore_name(name.upper()) == name
    if name in cfg.OUR_STORE_TYPES:
        assert cfg.check_kvstore_name(name.title(), ours_only=True) == name
    else:
        assert message(cfg.ConfigError, cfg.check_kvstore_name, name, ours_only=True) == (
            'kvstore type %r is not known: expected one of %s' % (name, OURS))


@pytest.mark.parametrize('name', ['dist_sspp', '', ' dist_ssp', None, 3])
def test_check_kvstore_name_rejects_naming_every_accepted_store(name):
    assert message(cfg.ConfigError, cfg.check_kvstore_name, name) == (
        'kvstore type %r is not known: expected one of %s' % (name, ALL_STORES))
    assert message(cfg.ConfigError, cfg.check_kvstore_name, name, True) == (
        'kvstore type %r is not known: expected one of %s' % (name, OURS))


# ---------------------------------------------------------------------------
# parse_staleness
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('store,value,expected', [
    ('dist_ssp', '0', (0, 0)), ('dist_ssp', 0, (0, 0)), ('dist_ssp', '3', (3, 3)),
    ('dist_ssp', '\t7 ', (7, 7)), ('dist_ssp', (4,), (4, 4)), ('dist_ssp', [1], (1, 1)),
    ('dist_ssp', 1000000, (1000000, 1000000)), ('dist_ssp', '+2', (2, 2)),
    ('dist_dssp', '0', (0, 0)), ('dist_dssp', 0, (0, 0)), ('dist_dssp', '0,0', (0, 0)),
    ('dist_dssp', '0,1', (0, 1)), ('dist_dssp', ' 3 , 15 ', (3, 15)), ('dist_dssp', '5,5', (5, 5)),
    ('dist_dssp', (2, 9), (2, 9)), ('dist_dssp', [2, 9], (2, 9)), ('dist_dssp', (6,), (6, 6)),
    ('dist_dssp', 8, (8, 8)), ('dist_dssp', (0, 0), (0, 0)),
])
def test_parse_staleness_accepts(store, value, expected):
    result = cfg.parse_staleness(value, store)
    assert result == expected and type(result) is tuple
    assert all(type(s) is int for s in result)


def test_parse_staleness_defaults_to_dist_dssp_and_the_environment_variable():
    assert cfg.parse_staleness('3,15') == (3, 15)
    assert message(cfg.ConfigError, cfg.parse_staleness, 'x') == (
        "MXNET_SSP_STALENESS='x' is not valid for dist_dssp: expected " + DSSP_FORM)


@pytest.mark.parametrize('store,value,reason', [
    # not integers / not the right form
    ('dist_dssp', 'abc', ''), ('dist_dssp', '', ''), ('dist_dssp', '3,', ''),
    ('dist_dssp', '1.5', ''), ('dist_dssp', '1,2,3', ''), ('dist_dssp', 2.5, ''),
    ('dist_dssp', None, ''), ('dist_dssp', True, ''), ('dist_dssp', False, ''),
    ('dist_dssp', (True, 3), ''), ('dist_dssp', (1, 2.0), ''), ('dist_dssp', ('1', '2'), ''),
    ('dist_dssp', (), ''), ('dist_dssp', (1, 2, 3), ''), ('dist_dssp', {1, 2}, ''),
    ('dist_ssp', '3,15', ''), ('dist_ssp', '3,3', ''), ('dist_ssp', (3, 3), ''),
    ('dist_ssp', [3, 15], ''), ('dist_ssp', True, ''), ('dist_ssp', 'three', ''),
    ('dist_ssp', '', ''),
    # negative
    ('dist_ssp', '-1', 'staleness cannot be negative; '), ('dist_ssp', -1, 'staleness cannot be '
                                                                         'negative; '),
    ('dist_dssp', '-1', 'staleness cannot be negative; '),
    ('dist_dssp', '-1,2', 'staleness cannot be negative; '),
    ('dist_dssp', '2,-1', 'staleness cannot be negative; '),
    ('dist_dssp', (0, -1), 'staleness cannot be negative; '),
    ('dist_dssp', '-3,-1', 'staleness cannot be negative; '),
    # reversed
    ('dist_dssp', '5,3', 'sL=5 is greater than sU=3; '),
    ('dist_dssp', '1,0', 'sL=1 is greater than sU=0; '),
    ('dist_dssp', (16, 15), 'sL=16 is greater than sU=15; '),
])
def test_parse_staleness_rejects_with_the_full_message(store, value, reason):
    form = SSP_FORM if store == 'dist_ssp' else DSSP_FORM
    expected = 'MXNET_SSP_STALENESS=%r is not valid for %s: %sexpected %s' % (value, store,
                                                                              reason, form)
    assert message(cfg.ConfigError, cfg.parse_staleness, value, store) == expected
    assert message(cfg.ConfigError, cfg.parse_staleness, value, store, source='staleness') == (
        expected.replace('MXNET_SSP_STALENESS=', 'staleness=', 1))


@pytest.mark.parametrize('store', ['dist_async', 'dist_softsync', 'DIST_ASYNC'])
def test_parse_staleness_is_refused_for_the_async_stores(store):
    assert message(cfg.ConfigError, cfg.parse_staleness, '3', store) == (
        'staleness is not a setting of %s: only dist_ssp and dist_dssp take one' % store)


@pytest.mark.parametrize('store', ['dist_sync', 'local', 'dist_sspp'])
def test_parse_staleness_rejects_unknown_or_native_stores(store):
    assert message(cfg.ConfigError, cfg.parse_staleness, '3', store) == (
        'kvstore type %r is not known: expected one of %s' % (store, OURS))


# ---------------------------------------------------------------------------
# parse_mode, parse_timeout
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('value,expected', [
    ('bounded', 'bounded'), ('paper', 'paper'), ('threshold', 'threshold'),
    ('PAPER', 'paper'), (' Threshold\n', 'threshold'), ('  bounded', 'bounded'),
])
def test_parse_mode_accepts(value, expected):
    assert cfg.parse_mode(value) == expected


@pytest.mark.parametrize('value', ['fast', '', 'bound', None, 3, 'paper,bounded'])
def test_parse_mode_rejects_with_the_full_message(value):
    assert message(cfg.ConfigError, cfg.parse_mode, value) == (
        'MXNET_SSP_DSSP_MODE=%r is not valid: expected one of bounded, paper, threshold' % (value,))
    assert message(cfg.ConfigError, cfg.parse_mode, value, source='mode') == (
        'mode=%r is not valid: expected one of bounded, paper, threshold' % (value,))


@pytest.mark.parametrize('value,expected', [
    ('300', 300.0), (' 12 ', 12.0), ('0.5', 0.5), ('1e-9', 1e-9), (7, 7.0), (2.5, 2.5),
    ('5e-324', 5e-324), ('1e308', 1e308),
])
def test_parse_timeout_accepts(value, expected):
    result = cfg.parse_timeout(value)
    assert result == expected and type(result) is float


@pytest.mark.parametrize('value', ['0', 0, '-1', -0.5, '-0', 'nan', 'inf', '-inf', float('inf'),
                                   'abc', '', None, '1e309', [1]])
def test_parse_timeout_rejects_with_the_full_message(value):
    assert message(cfg.ConfigError, cfg.parse_timeout, value) == (
        'MXNET_SSP_TIMEOUT=%r is not valid: %s' % (value, TIMEOUT_FORM))
    assert message(cfg.ConfigError, cfg.parse_timeout, value, 'timeout') == (
        'timeout=%r is not valid: %s' % (value, TIMEOUT_FORM))


# ---------------------------------------------------------------------------
# parse_splits
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('value,num_workers,expected', [
    ('1', None, 1), (1, None, 1), (' 4 ', None, 4), ('1000', None, 1000), (3, 3, 3),
    ('1', 1, 1), ('2', 8, 2), (5, 5, 5),
])
def test_parse_splits_accepts_1_to_num_workers(value, num_workers, expected):
    result = cfg.parse_splits(value, num_workers)
    assert result == expected and type(result) is int


@pytest.mark.parametrize('value,num_workers', [
    ('0', None), (0, None), ('-2', None), ('x', None), ('1.5', None), (2.0, None), ('', None),
    (None, None), (True, None), (False, None), ('5', 4), (2, 1), ('0', 4), ('1,2', 4), (3, 0),
])
def test_parse_splits_rejects_with_the_full_message(value, num_workers):
    bound = 'num_workers' if num_workers is None else str(num_workers)
    text = ('%%s=%r is not valid for dist_softsync: expected an integer n with 1 <= n <= %s '
            '(the server applies one update per floor(%s / n) gradients)' % (value, bound, bound))
    assert message(cfg.ConfigError, cfg.parse_splits, value, num_workers) == (
        text % 'MXNET_SSP_SOFTSYNC_SPLITS')
    assert message(cfg.ConfigError, cfg.parse_splits, value, num_workers, 'splits') == (
        text % 'splits')


def test_parse_splits_checks_the_upper_bound_only_when_it_is_known():
    assert cfg.parse_splits('64') == 64
    assert cfg.parse_splits('64', num_workers=64) == 64
    with pytest.raises(cfg.ConfigError):
        cfg.parse_splits('65', num_workers=64)


# ---------------------------------------------------------------------------
# parse_flag, wrap_async
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('value,expected', [
    ('1', True), ('true', True), ('yes', True), ('on', True), ('TRUE', True), (' Yes ', True),
    ('ON', True), (1, True), (True, True),
    ('0', False), ('false', False), ('no', False), ('off', False), ('OFF', False),
    ('\tNo\n', False), (0, False), (False, False),
])
def test_parse_flag_accepts_every_spelling(value, expected):
    assert cfg.parse_flag(value, 'MXNET_SSP_X', not expected) is expected


@pytest.mark.parametrize('value', [None, '', '   '])
@pytest.mark.parametrize('default', [True, False, 'whatever'])
def test_parse_flag_unset_or_blank_gives_the_default(value, default):
    assert cfg.parse_flag(value, 'MXNET_SSP_X', default) is default


@pytest.mark.parametrize('value', ['maybe', 'y', 'n', '2', 'enabled', 'tru e', 2, 'yes,no'])
def test_parse_flag_rejects_with_the_full_message(value):
    assert message(cfg.ConfigError, cfg.parse_flag, value, 'MXNET_SSP_X', True) == (
        'MXNET_SSP_X=%r is not valid: %s' % (value, FLAGS))


ON_BY_DEFAULT = [(cfg.ENV_WRAP_ASYNC, cfg.wrap_async), (cfg.ENV_WRAP_SYNC, cfg.wrap_sync),
                 (cfg.ENV_HOST_COPIES, cfg.host_copies), (cfg.ENV_HOST_UPDATES, cfg.host_updates)]


@pytest.mark.parametrize('name,reader', ON_BY_DEFAULT)
def test_flags_on_by_default_read_the_given_mapping(hostile_env, name, reader):
    assert reader({}) is True
    assert reader({name: ''}) is True and reader({name: ' '}) is True
    assert reader({name: '0'}) is False and reader({name: 'No'}) is False
    assert reader({name: 'Yes'}) is True
    assert message(cfg.ConfigError, reader, {name: 'nope'}) == (
        "%s='nope' is not valid: %s" % (name, FLAGS))


@pytest.mark.parametrize('name,reader', ON_BY_DEFAULT)
def test_flags_on_by_default_read_os_environ_by_default(clean_env, name, reader):
    assert reader() is True
    clean_env.setenv(name, 'off')
    assert reader() is False
    clean_env.setenv(name, '0')
    assert reader() is False
    for bad in ('x', '2'):
        clean_env.setenv(name, bad)
        assert message(cfg.ConfigError, reader) == (
            "%s=%r is not valid: %s" % (name, bad, FLAGS))


# ---------------------------------------------------------------------------
# parse_gpus, worker_gpus
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('value,expected', [
    ('0', (0,)), ('0,1', (0, 1)), ('1,0', (1, 0)), (' 3 ', (3,)), ('0, 1 ,2', (0, 1, 2)),
    ('7,3,5', (7, 3, 5)), (2, (2,)), (0, (0,)), ('', ()), ('  ', ()), ('\n', ()),
])
def test_parse_gpus_accepts_distinct_ids_in_the_given_order(value, expected):
    result = cfg.parse_gpus(value)
    assert result == expected and type(result) is tuple


@pytest.mark.parametrize('value', ['-1', '0,-1', '0,0', '1,2,1', 'a', '0,', ',0', '0,,1',
                                   '0;1', '1.0', '0 1', -1, None, 'gpu0'])
def test_parse_gpus_rejects_with_the_full_message(value):
    text = ("%%s=%r is not valid: expected distinct GPU ids >= 0, comma-separated "
            "(e.g. '0' or '0,1')" % (value,))
    assert message(cfg.ConfigError, cfg.parse_gpus, value) == text % 'MXNET_SSP_GPUS'
    assert message(cfg.ConfigError, cfg.parse_gpus, value, '--gpus') == text % '--gpus'


def test_worker_gpus_reads_the_given_mapping(hostile_env):
    assert cfg.worker_gpus({}) == ()
    assert cfg.worker_gpus({cfg.ENV_GPUS: ''}) == ()
    assert cfg.worker_gpus({cfg.ENV_GPUS: '2,0'}) == (2, 0)
    assert cfg.worker_gpus({'CUDA_VISIBLE_DEVICES': '1'}) == ()
    assert message(cfg.ConfigError, cfg.worker_gpus, {cfg.ENV_GPUS: '0,0'}) == (
        "MXNET_SSP_GPUS='0,0' is not valid: expected distinct GPU ids >= 0, comma-separated "
        "(e.g. '0' or '0,1')")


def test_worker_gpus_reads_os_environ_by_default(clean_env):
    assert cfg.worker_gpus() == ()
    clean_env.setenv(cfg.ENV_GPUS, '1,3')
    assert cfg.worker_gpus() == (1, 3)
    clean_env.setenv(cfg.ENV_GPUS, '-1')
    assert message(cfg.ConfigError, cfg.worker_gpus) == (
        "MXNET_SSP_GPUS='-1' is not valid: expected distinct GPU ids >= 0, comma-separated "
        "(e.g. '0' or '0,1')")


# ---------------------------------------------------------------------------
# parse_num_servers, num_servers, controller_placement
# ---------------------------------------------------------------------------
NUM_SERVERS_FORM = ('expected the number of parameter servers of the job, an integer >= 1 '
                    '(the launcher sets it)')


@pytest.mark.parametrize('value,expected', [('1', 1), (' 2 ', 2), (3, 3), ('16', 16)])
def test_parse_num_servers_accepts(value, expected):
    result = cfg.parse_num_servers(value)
    assert result == expected and type(result) is int


@pytest.mark.parametrize('value', ['0', 0, '-1', 'two', '1.5', 2.0, '', None, True])
def test_parse_num_servers_rejects_with_the_full_message(value):
    assert message(cfg.ConfigError, cfg.parse_num_servers, value) == (
        'DMLC_NUM_SERVER=%r is not valid: %s' % (value, NUM_SERVERS_FORM))
    assert message(cfg.ConfigError, cfg.parse_num_servers, value, 'servers') == (
        'servers=%r is not valid: %s' % (value, NUM_SERVERS_FORM))


def test_num_servers_reads_the_given_mapping_or_os_environ(hostile_env):
    assert cfg.num_servers({cfg.ENV_NUM_SERVER: '4'}) == 4
    for env in ({}, {cfg.ENV_NUM_SERVER: ''}, {cfg.ENV_NUM_SERVER: '  '}):
        assert message(cfg.ConfigError, cfg.num_servers, env) == (
            'DMLC_NUM_SERVER is not set: a distributed store needs the number of parameter '
            'servers of the job (the launcher sets it)')
    assert message(cfg.ConfigError, cfg.num_servers) == (
        "DMLC_NUM_SERVER='bogus' is not valid: " + NUM_SERVERS_FORM)
    hostile_env.setenv(cfg.ENV_NUM_SERVER, '2')
    assert cfg.num_servers() == 2
    hostile_env.delenv(cfg.ENV_NUM_SERVER)
    with pytest.raises(cfg.ConfigError, match='DMLC_NUM_SERVER is not set'):
        cfg.num_servers()


# parse_num_workers and num_workers are lenient on purpose (the training script has always
# read DMLC_NUM_WORKER this way): a value that is not an integer >= 1 counts as 1 worker.
@pytest.mark.parametrize('value,expected', [('1', 1), (' 2 ', 2), (3, 3), ('16', 16),
                                            ('0', 1), ('-3', 1), (0, 1),
                                            ('two', 1), ('', 1), ('2.0', 1), ('1.5', 1)])
def test_parse_num_workers_counts_a_bad_value_as_one(value, expected):
    result = cfg.parse_num_workers(value)
    assert result == expected and type(result) is int


def test_num_workers_reads_the_given_mapping_or_os_environ(hostile_env):
    assert cfg.num_workers({cfg.ENV_NUM_WORKER: '4'}) == 4
    assert cfg.num_workers({cfg.ENV_NUM_WORKER: ' 2 '}) == 2
    for env in ({}, {cfg.ENV_NUM_WORKER: ''}, {cfg.ENV_NUM_WORKER: 'x'},
                {cfg.ENV_NUM_WORKER: '0'}, {'DMLC_NUM_SERVER': '4'}):
        assert cfg.num_workers(env) == 1
    hostile_env.setenv(cfg.ENV_NUM_WORKER, '5')
    assert cfg.num_workers() == 5
    assert cfg.num_workers({}) == 1                # the mapping given, not os.environ
    hostile_env.delenv(cfg.ENV_NUM_WORKER)
    assert cfg.num_workers() == 1


@pytest.mark.parametrize('value,expected', [(None, 'process'), ('', 'process'),
                                            ('  ', 'process'), ('process', 'process'),
                                            ('thread', 'thread'), (' THREAD\n', 'thread'),
                                            ('Process', 'process')])
def test_controller_placement_accepts(value, expected, hostile_env):
    assert cfg.controller_placement({} if value is None else {cfg.ENV_CONTROLLER: value}) == (
        expected)


@pytest.mark.parametrize('value', ['fiber', 'threads', 'process,thread'])
def test_controller_placement_rejects_with_the_full_message(value):
    assert message(cfg.ConfigError, cfg.controller_placement, {cfg.ENV_CONTROLLER: value}) == (
        'MXNET_SSP_CONTROLLER=%r is not valid: expected one of process, thread' % value)


def test_controller_placement_reads_os_environ_by_default(clean_env):
    assert cfg.controller_placement() == 'process'
    clean_env.setenv(cfg.ENV_CONTROLLER, 'thread')
    assert cfg.controller_placement() == 'thread'


# ---------------------------------------------------------------------------
# from_env: SSP / DSSP
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('store,lower,upper', [('dist_ssp', 3, 3), ('dist_dssp', 3, 15),
                                               ('DIST_SSP', 3, 3), ('Dist_Dssp', 3, 15)])
def test_from_env_defaults(store, lower, upper, hostile_env):
    conf = cfg.from_env(store, environ={})
    assert conf == cfg.SyncConfig(store=store.lower(), s_lower=lower, s_upper=upper,
                                  mode='bounded', timeout=300.0,
                                  metrics_dir=None, splits=None,
                                  staleness_log=False, controller='process')
    assert type(conf.timeout) is float and conf.staleness_log is False


def test_from_env_reads_os_environ_by_default(clean_env):
    assert cfg.from_env('dist_dssp') == cfg.SyncConfig()
    for name, value in ((cfg.ENV_STALENESS, '1,4'), (cfg.ENV_DSSP_MODE, 'threshold'),
                        (cfg.ENV_TIMEOUT, '9'), (cfg.ENV_METRICS_DIR, 'mdir'),
                        (cfg.ENV_STALENESS_LOG, 'on'), (cfg.ENV_CONTROLLER, 'thread')):
        clean_env.setenv(name, value)
    assert cfg.from_env('dist_dssp') == cfg.SyncConfig(
        store='dist_dssp', s_lower=1, s_upper=4, mode='threshold', timeout=9.0,
        metrics_dir='mdir', staleness_log=True, controller='thread')


def test_from_env_reads_every_variable_of_the_given_mapping(hostile_env):
    env = {cfg.ENV_STALENESS: ' 2, 6 ', cfg.ENV_DSSP_MODE: 'PAPER', cfg.ENV_TIMEOUT: '12.5',
           cfg.ENV_METRICS_DIR: ' /tmp/m ', cfg.ENV_STALENESS_LOG: 'yes',
           cfg.ENV_CONTROLLER: 'Thread', cfg.ENV_SOFTSYNC_SPLITS: 'ignored here'}
    conf = cfg.from_env('dist_dssp', environ=env)
    assert conf == cfg.SyncConfig(store='dist_dssp', s_lower=2, s_upper=6, mode='paper',
                                  timeout=12.5, metrics_dir=' /tmp/m ', splits=None,
                                  staleness_log=True, controller='thread')
    assert conf.staleness_log is True
    ssp = cfg.from_env('dist_ssp', environ={cfg.ENV_STALENESS: '0'})
    assert (ssp.s_lower, ssp.s_upper) == (0, 0)


def test_from_env_empty_variables_give_the_defaults(hostile_env):
    env = {name: '' for name in (cfg.ENV_STALENESS, cfg.ENV_DSSP_MODE, cfg.ENV_TIMEOUT,
                                 cfg.ENV_STALENESS_LOG, cfg.ENV_CONTROLLER)}
    assert cfg.from_env('dist_dssp', environ=env) == cfg.SyncConfig()
    env = {name: ' \t ' for name in (cfg.ENV_STALENESS, cfg.ENV_STALENESS_LOG,
                                     cfg.ENV_CONTROLLER)}
    assert cfg.from_env('dist_dssp', environ=env) == cfg.SyncConfig()


def test_from_env_blank_mode_or_timeout(hostile_env):
    assert cfg.from_env('dist_dssp', environ={cfg.ENV_STALENESS: '   '}) == cfg.SyncConfig()
    assert cfg.from_env('dist_ssp', environ={cfg.ENV_STALENESS: ' \t'}).s_upper == 3
    assert message(cfg.ConfigError, cfg.from_env, 'dist_dssp', {cfg.ENV_DSSP_MODE: ' '}) == (
        "MXNET_SSP_DSSP_MODE=' ' is not valid: expected one of bounded, paper, threshold")
    assert message(cfg.ConfigError, cfg.from_env, 'dist_dssp', {cfg.ENV_TIMEOUT: ' '}) == (
        "MXNET_SSP_TIMEOUT=' ' is not valid: " + TIMEOUT_FORM)


@pytest.mark.parametrize('value', ['', ' ', 'off', 'OFF', ' Off ', 'none', 'None', '0', ' 0 '])
def test_from_env_metrics_dir_off_spellings(value, hostile_env):
    assert cfg.from_env('dist_ssp', environ={cfg.ENV_METRICS_DIR: value}).metrics_dir is None
    assert cfg.from_env('dist_async', environ={cfg.ENV_METRICS_DIR: value}).metrics_dir is None


@pytest.mark.parametrize('value', ['metrics', 'offf', 'no', '00', 'false', './none'])
def test_from_env_metrics_dir_other_values_are_directories(value, hostile_env):
    assert cfg.from_env('dist_ssp', environ={cfg.ENV_METRICS_DIR: value}).metrics_dir == value


def test_from_env_python_settings_win_over_the_environment(hostile_env):
    env = {cfg.ENV_STALENESS: '2,6', cfg.ENV_DSSP_MODE: 'paper', cfg.ENV_TIMEOUT: '12',
           cfg.ENV_METRICS_DIR: 'from_env', cfg.ENV_STALENESS_LOG: '1'}
    conf = cfg.from_env('dist_dssp', environ=env, staleness=(1, 5), mode='Threshold',
                        timeout=7, metrics_dir='mine', staleness_log=False)
    assert conf == cfg.SyncConfig(store='dist_dssp', s_lower=1, s_upper=5, mode='threshold',
                                  timeout=7.0, metrics_dir='mine', staleness_log=False)
    assert type(conf.timeout) is float and conf.staleness_log is False
    conf = cfg.from_env('dist_ssp', environ=env, staleness='4', timeout='0.25')
    assert (conf.s_lower, conf.s_upper, conf.mode, conf.timeout) == (4, 4, 'paper', 0.25)
    assert cfg.from_env('dist_ssp', environ={}, staleness=0).s_upper == 0


def test_from_env_none_overrides_mean_not_given(hostile_env):
    env = {cfg.ENV_STALENESS: '2,6', cfg.ENV_DSSP_MODE: 'paper', cfg.ENV_TIMEOUT: '12',
           cfg.ENV_STALENESS_LOG: '1'}
    conf = cfg.from_env('dist_dssp', environ=env, staleness=None, mode=None, timeout=None,
                        splits=None, staleness_log=None)
    assert conf == cfg.SyncConfig(s_lower=2, s_upper=6, mode='paper', timeout=12.0,
                                  staleness_log=True)


@pytest.mark.parametrize('given,expected', [('mine', 'mine'), ('', None), (None, None)])
def test_from_env_metrics_dir_from_python(given, expected, hostile_env):
    env = {cfg.ENV_METRICS_DIR: 'from_env'}
    assert cfg.from_env('dist_dssp', environ=env, metrics_dir=given).metrics_dir == expected
    assert cfg.from_env('dist_softsync', environ=env, metrics_dir=given).metrics_dir == expected


@pytest.mark.parametrize('given,expected', [(True, True), (1, True), (False, False),
                                            (0, False)])
def test_from_env_staleness_log_from_python_is_a_bool(given, expected, hostile_env):
    for store in ('dist_ssp', 'dist_async', 'dist_softsync'):
        conf = cfg.from_env(store, environ={cfg.ENV_STALENESS_LOG: 'on'}, staleness_log=given)
        assert conf.staleness_log is expected


@pytest.mark.parametrize('store', ['dist_ssp', 'dist_dssp', 'dist_async', 'dist_softsync'])
def test_from_env_staleness_log_from_the_environment_is_a_bool(store, hostile_env):
    assert cfg.from_env(store, environ={cfg.ENV_STALENESS_LOG: 'TRUE'}).staleness_log is True
    assert cfg.from_env(store, environ={cfg.ENV_STALENESS_LOG: '0'}).staleness_log is False
    assert cfg.from_env(store, environ={}).staleness_log is False
    assert message(cfg.ConfigError, cfg.from_env, store, {cfg.ENV_STALENESS_LOG: 'sometimes'}) \
        == "MXNET_SSP_STALENESS_LOG='sometimes' is not valid: " + FLAGS


@pytest.mark.parametrize('store,env,overrides,text', [
    ('dist_dssp', {cfg.ENV_STALENESS: '9,2'}, {},
     "MXNET_SSP_STALENESS='9,2' is not valid for dist_dssp: sL=9 is greater than sU=2; "
     "expected " + DSSP_FORM),
    ('dist_ssp', {cfg.ENV_STALENESS: '3,15'}, {},
     "MXNET_SSP_STALENESS='3,15' is not valid for dist_ssp: expected " + SSP_FORM),
    ('DIST_SSP', {cfg.ENV_STALENESS: '3,15'}, {},
     "MXNET_SSP_STALENESS='3,15' is not valid for dist_ssp: expected " + SSP_FORM),
    ('dist_dssp', {}, {'staleness': '9,2'},
     "staleness='9,2' is not valid for dist_dssp: sL=9 is greater than sU=2; expected "
     + DSSP_FORM),
    ('dist_ssp', {}, {'staleness': (1, 2)},
     "staleness=(1, 2) is not valid for dist_ssp: expected " + SSP_FORM),
    ('dist_dssp', {cfg.ENV_DSSP_MODE: 'fast'}, {},
     "MXNET_SSP_DSSP_MODE='fast' is not valid: expected one of bounded, paper, threshold"),
    ('dist_dssp', {}, {'mode': 'fast'},
     "mode='fast' is not valid: expected one of bounded, paper, threshold"),
    ('dist_dssp', {}, {'mode': ''},
     "mode='' is not valid: expected one of bounded, paper, threshold"),
    ('dist_dssp', {cfg.ENV_TIMEOUT: '0'}, {},
     "MXNET_SSP_TIMEOUT='0' is not valid: " + TIMEOUT_FORM),
    ('dist_ssp', {}, {'timeout': -1},
     "timeout=-1 is not valid: " + TIMEOUT_FORM),
    ('dist_ssp', {}, {'timeout': 0},
     "timeout=0 is not valid: " + TIMEOUT_FORM),
    ('dist_dssp', {cfg.ENV_CONTROLLER: 'fiber'}, {},
     "MXNET_SSP_CONTROLLER='fiber' is not valid: expected one of process, thread"),
    ('dist_ssp', {}, {'splits': 2}, 'splits is a setting of dist_softsync, not of dist_ssp'),
    ('dist_dssp', {}, {'splits': 0}, 'splits is a setting of dist_softsync, not of dist_dssp'),
    ('dist_async', {}, {'splits': 2},
     'splits is a setting of dist_softsync, not of dist_async'),
    ('dist_async', {}, {'staleness': 3},
     'staleness is not a setting of dist_async: only dist_ssp and dist_dssp take one'),
    ('dist_async', {}, {'staleness': 0},
     'staleness is not a setting of dist_async: only dist_ssp and dist_dssp take one'),
    ('dist_softsync', {}, {'mode': 'paper'},
     'mode is not a setting of dist_softsync: only dist_ssp and dist_dssp take one'),
    ('Dist_Async', {}, {'mode': 'bounded'},
     'mode is not a setting of dist_async: only dist_ssp and dist_dssp take one'),
    ('dist_softsync', {}, {'staleness': 1, 'mode': 'paper'},
     'staleness is not a setting of dist_softsync: only dist_ssp and dist_dssp take one'),
    ('dist_softsync', {cfg.ENV_SOFTSYNC_SPLITS: '0'}, {},
     "MXNET_SSP_SOFTSYNC_SPLITS='0' is not valid for dist_softsync: expected an integer n with "
     "1 <= n <= num_workers (the server applies one update per floor(num_workers / n) "
     "gradients)"),
    ('dist_softsync', {}, {'splits': 'x'},
     "splits='x' is not valid for dist_softsync: expected an integer n with "
     "1 <= n <= num_workers (the server applies one update per floor(num_workers / n) "
     "gradients)"),
    ('dist_softsync', {}, {'splits': 0},
     "splits=0 is not valid for dist_softsync: expected an integer n with "
     "1 <= n <= num_workers (the server applies one update per floor(num_workers / n) "
     "gradients)"),
    ('dist_async', {cfg.ENV_TIMEOUT: 'never'}, {},
     "MXNET_SSP_TIMEOUT='never' is not valid: " + TIMEOUT_FORM),
    ('dist_device_sync', {}, {},
     "kvstore type 'dist_device_sync' is not known: expected one of " + OURS),
    ('horovod', {}, {}, "kvstore type 'horovod' is not known: expected one of " + OURS),
    (None, {}, {}, "kvstore type None is not known: expected one of " + OURS),
])
def test_from_env_rejects_with_the_full_message(store, env, overrides, text, hostile_env):
    assert message(cfg.ConfigError, cfg.from_env, store, env, **overrides) == text


@pytest.mark.parametrize('store', ['dist_ssp', 'dist_async', 'dist_softsync'])
def test_from_env_unknown_python_settings_are_a_type_error(store, hostile_env):
    assert message(TypeError, cfg.from_env, store, {}, stalenes=3) == (
        'unknown settings stalenes: expected ' + OVERRIDES)
    assert message(TypeError, cfg.from_env, store, {}, b=1, a=2, mode='paper') == (
        'unknown settings a, b: expected ' + OVERRIDES)
    assert message(TypeError, cfg.from_env, store, {}, controller='thread') == (
        'unknown settings controller: expected ' + OVERRIDES)


def test_from_env_checks_the_store_before_the_settings(hostile_env):
    assert message(cfg.ConfigError, cfg.from_env, 'dist_device_sync', {}, bogus=1) == (
        "kvstore type 'dist_device_sync' is not known: expected one of " + OURS)


# ---------------------------------------------------------------------------
# from_env: asynchronous stores
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('store,splits', [('dist_async', None), ('dist_softsync', 1),
                                          ('DIST_SOFTSYNC', 1)])
def test_from_env_async_defaults(store, splits, hostile_env):
    conf = cfg.from_env(store, environ={})
    assert conf == cfg.SyncConfig(store=store.lower(), s_lower=0, s_upper=0, mode='bounded',
                                  timeout=300.0, metrics_dir=None, splits=splits,
                                  staleness_log=False, controller='process')
    assert type(conf.timeout) is float and conf.synchronous is False and conf.r_max == 0


def test_from_env_async_reads_its_variables_and_ignores_the_ssp_ones(hostile_env):
    # the controller's placement is read: in elastic mode these stores start one too
    env = {cfg.ENV_STALENESS: 'not checked', cfg.ENV_DSSP_MODE: 'not checked',
           cfg.ENV_CONTROLLER: 'thread', cfg.ENV_TIMEOUT: ' 4.5 ',
           cfg.ENV_METRICS_DIR: 'm', cfg.ENV_STALENESS_LOG: 'true',
           cfg.ENV_SOFTSYNC_SPLITS: ' 3 '}
    assert cfg.from_env('dist_softsync', environ=env) == cfg.SyncConfig(
        store='dist_softsync', s_lower=0, s_upper=0, mode='bounded', timeout=4.5,
        metrics_dir='m', splits=3, staleness_log=True, controller='thread')
    assert cfg.from_env('dist_async', environ=env) == cfg.SyncConfig(
        store='dist_async', s_lower=0, s_upper=0, mode='bounded', timeout=4.5,
        metrics_dir='m', splits=None, staleness_log=True, controller='thread')
    assert cfg.from_env('dist_async', environ={cfg.ENV_TIMEOUT: ''}).timeout == 300.0


def test_from_env_softsync_splits(hostile_env):
    def splits(env, **given):
        return cfg.from_env('dist_softsync', environ=env, **given).splits
    assert splits({}) == 1
    assert splits({cfg.ENV_SOFTSYNC_SPLITS: ''}) == 1
    assert splits({cfg.ENV_SOFTSYNC_SPLITS: '   '}) == 1
    assert splits({cfg.ENV_SOFTSYNC_SPLITS: '4'}) == 4
    assert splits({cfg.ENV_SOFTSYNC_SPLITS: '4'}, splits=2) == 2
    assert splits({cfg.ENV_SOFTSYNC_SPLITS: 'bad'}, splits='6') == 6
    assert splits({cfg.ENV_SOFTSYNC_SPLITS: '4'}, splits=None) == 4
    assert cfg.from_env('dist_async', environ={cfg.ENV_SOFTSYNC_SPLITS: '4'}).splits is None
    assert cfg.from_env('dist_async', environ={}, splits=None).splits is None


def test_from_env_async_none_overrides_are_not_given(hostile_env):
    conf = cfg.from_env('dist_async', environ={}, staleness=None, mode=None)
    assert (conf.s_lower, conf.s_upper, conf.mode) == (0, 0, 'bounded')


# ---------------------------------------------------------------------------
# BalanceConfig, balance_from_env
# ---------------------------------------------------------------------------
def test_balance_config_defaults_and_bounds():
    conf = cfg.BalanceConfig()
    assert (conf.total, conf.min_batch, conf.max_batch, conf.period, conf.threshold,
            conf.smoothing) == (None, None, None, 10, 0.05, 0.5)
    assert conf.bounds() == (1, None)
    assert cfg.BalanceConfig(total=64).bounds() == (1, 64)
    assert cfg.BalanceConfig(total=64, min_batch=4).bounds() == (4, 64)
    assert cfg.BalanceConfig(total=64, max_batch=40).bounds() == (1, 40)
    assert cfg.BalanceConfig(total=64, min_batch=2, max_batch=40).bounds() == (2, 40)


def test_balance_from_env_defaults(hostile_env):
    conf = cfg.balance_from_env({})
    assert conf == cfg.BalanceConfig(total=None, min_batch=None, max_batch=None, period=10,
                                     threshold=0.05, smoothing=0.5)
    blank = {name: ' ' for name in cfg.BALANCE_ENV}
    assert cfg.balance_from_env(blank) == conf
    assert cfg.balance_from_env({name: '' for name in cfg.BALANCE_ENV}) == conf
    assert cfg.balance_from_env({}, num_workers=4) == conf
    none = dict(total=None, min_batch=None, max_batch=None, period=None, threshold=None,
                smoothing=None)
    assert cfg.balance_from_env({}, **none) == conf


def test_balance_from_env_reads_os_environ_by_default(clean_env):
    assert cfg.balance_from_env() == cfg.BalanceConfig()
    for name, value in zip(cfg.BALANCE_ENV, ('2', '30', '5', '0.1', '1')):
        clean_env.setenv(name, value)
    assert cfg.balance_from_env(total=32, num_workers=2) == cfg.BalanceConfig(
        total=32, min_batch=2, max_batch=30, period=5, threshold=0.1, smoothing=1.0)


def test_balance_from_env_reads_every_variable_of_the_given_mapping(hostile_env):
    env = dict(zip(cfg.BALANCE_ENV, (' 3 ', '40', '7', ' 0.25 ', '0.75')))
    conf = cfg.balance_from_env(env)
    assert conf == cfg.BalanceConfig(total=None, min_batch=3, max_batch=40, period=7,
                                     threshold=0.25, smoothing=0.75)
    assert all(type(v) is int for v in (conf.min_batch, conf.max_batch, conf.period))
    assert type(conf.threshold) is float and type(conf.smoothing) is float


def test_balance_from_env_python_settings_win(hostile_env):
    env = dict(zip(cfg.BALANCE_ENV, ('3', '40', '7', '0.25', '0.75')))
    conf = cfg.balance_from_env(env, total=64, min_batch=8, max_batch=33, period=2,
                                threshold=0, smoothing=1)
    assert conf == cfg.BalanceConfig(total=64, min_batch=8, max_batch=33, period=2,
                                     threshold=0.0, smoothing=1.0)
    assert type(conf.threshold) is float and type(conf.smoothing) is float
    conf = cfg.balance_from_env(env, total='12', min_batch=' 1 ', period='3', threshold='0.5',
                                smoothing='0.5')
    assert conf == cfg.BalanceConfig(total=12, min_batch=1, max_batch=40, period=3,
                                     threshold=0.5, smoothing=0.5)


def test_balance_from_env_total_is_python_only(hostile_env):
    assert cfg.balance_from_env({'MXNET_SSP_BALANCE_TOTAL': '64'}).total is None
    assert cfg.balance_from_env({}, total=1).total == 1


@pytest.mark.parametrize('name,value,expected', [
    ('threshold', '0', 0.0), ('threshold', 0.0, 0.0), ('threshold', '0.999999', 0.999999),
    ('threshold', '1e-12', 1e-12), ('smoothing', '1', 1.0), ('smoothing', 1, 1.0),
    ('smoothing', '1e-12', 1e-12), ('smoothing', 0.000001, 0.000001),
    ('period', '1', 1), ('min_batch', 1, 1), ('max_batch', '1', 1),
    ('period', 1000000, 1000000),
])
def test_balance_from_env_boundaries_accepted(name, value, expected, hostile_env):
    assert getattr(cfg.balance_from_env({}, **{name: value}), name) == expected


def bad_balance_cases():
    cases = []
    for name, variable, form in (('min_batch', cfg.ENV_BALANCE_MIN, INT_BATCH),
                                 ('max_batch', cfg.ENV_BALANCE_MAX, INT_BATCH),
                                 ('period', cfg.ENV_BALANCE_PERIOD, INT_PERIOD)):
        for value in ('0', '-1', 'x', '1.5', '2.0', '1e3', '2,3'):
            cases.append((name, variable, value, form))
        for value in (0, -3, 2.0, 1.5, True, False, float('nan')):
            cases.append((name, None, value, form))
    for value in ('-0.01', '1', '1.0', '2', 'nan', 'inf', '-inf', 'x', '0,1'):
        cases.append(('threshold', cfg.ENV_BALANCE_THRESHOLD, value, THRESHOLD_FORM))
    for value in (1, 1.0, -0.5, float('nan'), True, False, [0.1]):
        cases.append(('threshold', None, value, THRESHOLD_FORM))
    for value in ('0', '0.0', '-0.1', '1.0001', '2', 'nan', 'inf', 'x'):
        cases.append(('smoothing', cfg.ENV_BALANCE_SMOOTHING, value, SMOOTHING_FORM))
    for value in (0, 0.0, 1.5, float('inf'), True, False, 'one'):
        cases.append(('smoothing', None, value, SMOOTHING_FORM))
    for value in (0, -1, 1.5, 64.0, True, False, 'x', '0', ''):
        cases.append(('total', None, value, INT_TOTAL))
    return cases


@pytest.mark.parametrize('name,variable,value,form', bad_balance_cases())
def test_balance_from_env_rejects_with_the_full_message(name, variable, value, form,
                                                        hostile_env):
    if variable is None:        # given from Python: named as the keyword
        text = message(cfg.ConfigError, cfg.balance_from_env, {}, **{name: value})
        assert text == '%s=%r is not valid: expected %s' % (name, value, form)
    else:
        text = message(cfg.ConfigError, cfg.balance_from_env, {variable: value})
        assert text == '%s=%r is not valid: expected %s' % (variable, value, form)


def test_balance_from_env_rejects_an_empty_python_value(hostile_env):
    # an empty string from Python is a value (only None means "not given")
    assert message(cfg.ConfigError, cfg.balance_from_env, {}, period='') == (
        "period='' is not valid: expected " + INT_PERIOD)
    assert message(cfg.ConfigError, cfg.balance_from_env, {}, threshold='') == (
        "threshold='' is not valid: expected " + THRESHOLD_FORM)


@pytest.mark.parametrize('env,overrides,text', [
    ({cfg.ENV_BALANCE_MIN: '9', cfg.ENV_BALANCE_MAX: '8'}, {},
     'MXNET_SSP_BALANCE_MIN=9 is greater than MXNET_SSP_BALANCE_MAX=8: expected min <= max'),
    ({cfg.ENV_BALANCE_MAX: '8'}, {'min_batch': 9},
     'min_batch=9 is greater than MXNET_SSP_BALANCE_MAX=8: expected min <= max'),
    ({cfg.ENV_BALANCE_MIN: '9'}, {'max_batch': 2},
     'MXNET_SSP_BALANCE_MIN=9 is greater than max_batch=2: expected min <= max'),
    ({cfg.ENV_BALANCE_MIN: '1', cfg.ENV_BALANCE_MAX: '100'}, {'min_batch': 5, 'max_batch': 4},
     'min_batch=5 is greater than max_batch=4: expected min <= max'),
])
def test_balance_from_env_min_above_max_names_both_settings(env, overrides, text, hostile_env):
    assert message(cfg.ConfigError, cfg.balance_from_env, env, **overrides) == text


def test_balance_from_env_min_equal_to_max_is_accepted(hostile_env):
    conf = cfg.balance_from_env({cfg.ENV_BALANCE_MIN: '8', cfg.ENV_BALANCE_MAX: '8'},
                                total=16, num_workers=2)
    assert (conf.min_batch, conf.max_batch, conf.bounds()) == (8, 8, (8, 8))
    assert cfg.balance_from_env({}, min_batch=5).min_batch == 5        # no max: no check
    assert cfg.balance_from_env({}, max_batch=1).max_batch == 1        # no min: no check


@pytest.mark.parametrize('total,num_workers,lo,hi', [
    (8, 2, 4, 4), (8, 2, 1, 4), (8, 2, 4, None), (8, 8, 1, None), (1, 1, 1, None),
    (10, 3, 3, 4), (9, 3, 3, 3), (12, 3, 3, 4), (100, 4, None, 25), (16, 4, 4, None),
])
def test_balance_from_env_bounds_that_admit_a_split(total, num_workers, lo, hi, hostile_env):
    conf = cfg.balance_from_env({}, num_workers=num_workers, total=total, min_batch=lo,
                                max_batch=hi)
    assert conf == cfg.BalanceConfig(total=total, min_batch=lo, max_batch=hi)


@pytest.mark.parametrize('total,num_workers,lo,hi,blo,bhi', [
    (7, 2, 4, None, 4, 7), (9, 2, 1, 4, 1, 4), (3, 4, None, None, 1, 3),
    (10, 3, 4, 5, 4, 5), (13, 3, 3, 4, 3, 4), (5, 2, 3, 3, 3, 3), (1, 2, 1, 1, 1, 1),
    (99, 4, None, 24, 1, 24),
])
def test_balance_from_env_bounds_that_admit_no_split(total, num_workers, lo, hi, blo, bhi,
                                                     hostile_env):
    text = message(cfg.ConfigError, cfg.balance_from_env, {}, num_workers=num_workers,
                   total=total, min_batch=lo, max_batch=hi)
    assert text == ('batch bounds [%d, %d] per worker (MXNET_SSP_BALANCE_MIN, '
                    'MXNET_SSP_BALANCE_MAX) admit no split of %d samples over %d workers: '
                    'expected %d * min <= %d <= %d * max'
                    % (blo, bhi, total, num_workers, num_workers, total, num_workers))


def test_balance_from_env_checks_the_split_only_with_total_and_workers(hostile_env):
    env = {cfg.ENV_BALANCE_MIN: '4', cfg.ENV_BALANCE_MAX: '4'}
    assert cfg.balance_from_env(env, total=9).total == 9                 # no num_workers
    assert cfg.balance_from_env(env, num_workers=3).total is None        # no total
    with pytest.raises(cfg.ConfigError, match=r'admit no split of 9 samples over 3 workers'):
        cfg.balance_from_env(env, total=9, num_workers=3)


def test_balance_from_env_unknown_python_settings_are_a_type_error(hostile_env):
    assert message(TypeError, cfg.balance_from_env, {}, batch=3) == (
        'unknown balancing settings batch: expected ' + BALANCE_OVERRIDES)
    assert message(TypeError, cfg.balance_from_env, {}, zeta=1, alpha=2, period=3) == (
        'unknown balancing settings alpha, zeta: expected ' + BALANCE_OVERRIDES)


# ---------------------------------------------------------------------------
# MXNET_SSP_FOLLOW_GRACE
# ---------------------------------------------------------------------------
GRACE_FORM = 'expected a number of seconds from 1 to 600 (default 10)'


@pytest.mark.parametrize('value,grace', [
    (None, 10.0), ('', 10.0), ('  ', 10.0), ('1', 1.0), ('2.5', 2.5), (' 600 ', 600.0)])
def test_follow_grace_default_and_accepted_values(value, grace, monkeypatch):
    monkeypatch.setenv(cfg.ENV_FOLLOW_GRACE, 'bogus')      # read from `environ` only
    env = {} if value is None else {cfg.ENV_FOLLOW_GRACE: value}
    assert cfg.follow_grace(env) == grace
    assert cfg.ENV_FOLLOW_GRACE == 'MXNET_SSP_FOLLOW_GRACE' and cfg.DEFAULT_FOLLOW_GRACE == 10.0


@pytest.mark.parametrize('value', ['0', '0.99', '600.5', '-3', 'nan', 'inf', 'ten', '1,5'])
def test_follow_grace_refuses_naming_the_setting_value_and_range(value):
    assert message(cfg.ConfigError, cfg.follow_grace, {cfg.ENV_FOLLOW_GRACE: value}) == (
        'MXNET_SSP_FOLLOW_GRACE=%r is not valid: %s' % (value, GRACE_FORM))


def test_the_launcher_checks_the_follow_grace_before_starting_anything():
    from mxnet_ssp.launch.settings import LaunchError, validate_settings
    with pytest.raises(LaunchError, match=r"^MXNET_SSP_FOLLOW_GRACE='0' is not valid"):
        validate_settings(['t', '--kvstore', 'dist_sync'], {cfg.ENV_FOLLOW_GRACE: '0'})
    with pytest.raises(LaunchError, match=r"^MXNET_SSP_FOLLOW_GRACE='x' is not valid"):
        validate_settings(['t'], {}, [('--env-server', {cfg.ENV_FOLLOW_GRACE: 'x'})])
    assert validate_settings(['t'], {cfg.ENV_FOLLOW_GRACE: '3'}) == []


def test_dist_sync_takes_no_staleness_and_no_controller(hostile_env):
    conf = cfg.from_env('dist_sync', {})
    assert conf.store == 'dist_sync' and not conf.synchronous and not conf.reports_clock
    assert message(cfg.ConfigError, cfg.from_env, 'dist_sync', {}, staleness=2) == (
        'staleness is not a setting of dist_sync: only dist_ssp and dist_dssp take one')
    assert message(cfg.ConfigError, cfg.from_env, 'dist_sync', {}, splits=2) == (
        'splits is a setting of dist_softsync, not of dist_sync')


def test_bsp_refuses_elastic_mode_before_joining_any_job(monkeypatch):
    """dist_sync cannot lose a worker (MXNet's servers wait for every push of a key): the
    store says so before it creates MXNet's store (no job is joined, nothing waits)."""
    from mxnet_ssp.kvstore import SSPError, SSPKVStore
    monkeypatch.setenv(cfg.ENV_ELASTIC, '1')
    monkeypatch.setenv('MXNET_SSP_SETTINGS', 'off')
    with pytest.raises(SSPError) as err:
        SSPKVStore('dist_sync')
    assert str(err.value).startswith('dist_sync (BSP) cannot go on without a lost worker')
    assert cfg.ENV_ELASTIC in str(err.value)
