"""Edges of the topology and lifetime settings (mxnet_ssp/config/topology.py, lifetime.py):
the readers of ps-lite's variables and of a worker's GPUs look in the process's environment
only (a settings file cannot set them, so a broken one does not stop them), whether a process
runs over ssh, and the parsers' error messages naming the source they are given.
Pure tests: no processes; os.environ is only changed through monkeypatch."""
import pytest

from mxnet_ssp import config as cfg

LIVENESS_FORM = ('expected a number of seconds from 2 to 3600 (default 10), or 0/off to turn '
                 'lost-host detection off')


@pytest.fixture
def broken_settings_file(monkeypatch):
    """The process's settings name a file that does not exist: reading them fails."""
    monkeypatch.setenv(cfg.ENV_SETTINGS, '/nonexistent/mxnet_ssp.env')
    cfg.reset_settings_cache()
    with pytest.raises(cfg.ConfigError):
        cfg.settings_environ()
    yield monkeypatch
    cfg.reset_settings_cache()


def test_the_topology_readers_look_only_at_the_environment(broken_settings_file):
    broken_settings_file.setenv('DMLC_NUM_WORKER', '3')
    broken_settings_file.setenv('DMLC_NUM_SERVER', '2')
    broken_settings_file.setenv(cfg.ENV_GPUS, '1,0')
    assert cfg.num_workers() == 3
    assert cfg.num_servers() == 2
    assert cfg.worker_gpus() == (1, 0)


@pytest.mark.parametrize('env,expected', [
    ({'SSH_CONNECTION': '198.18.0.1 50000 198.18.0.2 22'}, True),
    ({'DMLC_JOB_CLUSTER': 'ssh'}, True),
    ({'SSH_CONNECTION': '198.18.0.1 50000 198.18.0.2 22', 'DMLC_JOB_CLUSTER': 'local'}, True),
    ({'SSH_CONNECTION': ''}, False),
    ({'DMLC_JOB_CLUSTER': 'mpi'}, False),
    ({}, False),
])
def test_under_ssh(env, expected):
    assert cfg.under_ssh(env) is expected


def test_under_ssh_reads_os_environ_by_default(monkeypatch):
    monkeypatch.delenv('DMLC_JOB_CLUSTER', raising=False)
    monkeypatch.setenv('SSH_CONNECTION', '198.18.0.1 50000 198.18.0.2 22')
    assert cfg.under_ssh() is True
    monkeypatch.delenv('SSH_CONNECTION')
    assert cfg.under_ssh() is False
    monkeypatch.setenv('DMLC_JOB_CLUSTER', 'ssh')
    assert cfg.under_ssh() is True


# -- lifetime parsers ---------------------------------------------------------------------------
@pytest.mark.parametrize('value,expected', [('0', 0.0), ('off', 0.0), (' OFF ', 0.0),
                                            ('no', 0.0), ('false', 0.0), ('2', 2.0),
                                            ('30', 30.0), ('3600', 3600.0), (12.5, 12.5)])
def test_parse_liveness_accepts(value, expected):
    assert cfg.parse_liveness(value) == expected


@pytest.mark.parametrize('value', ['1', '3601', 'never', '', '-5', 'nan'])
def test_parse_liveness_refuses_naming_its_source_the_value_and_the_range(value):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_liveness(value)
    assert str(err.value) == 'MXNET_SSP_LIVENESS_TIMEOUT=%r is not valid: %s' % (value,
                                                                                   LIVENESS_FORM)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_liveness(value, source='--liveness')
    assert str(err.value) == '--liveness=%r is not valid: %s' % (value, LIVENESS_FORM)


def test_parse_elastic_names_the_source_it_is_given():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_elastic('5', num_workers=4, source='--elastic')
    assert str(err.value) == (
        "--elastic='5' is not valid: expected the least number of workers the job needs to go "
        'on, an integer 1 <= n <= the number of workers (4), or 0/off for fail-fast')
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_elastic('some')
    assert str(err.value).startswith("MXNET_SSP_ELASTIC='some' is not valid: expected the least")
    assert cfg.parse_elastic('4', num_workers=4, source='--elastic') == 4
