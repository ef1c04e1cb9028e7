"""Edges of the synchronization settings (mxnet_ssp/config/sync.py): the one line a process
started over ssh with no setting writes (issue 41), where each setting of a SyncConfig came
from, the staleness's normal form, the snapshot period and the origins added to an error.
Pure tests: no processes; os.environ and the working directory only change through
monkeypatch."""
import logging
import os

import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.config import sync

SSH = {'SSH_CONNECTION': '198.18.0.1 50000 198.18.0.2 22'}


@pytest.fixture(autouse=True)
def fresh_cache():
    cfg.reset_settings_cache()
    yield
    cfg.reset_settings_cache()


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def messages(self):
        return [r.getMessage() for r in self.records]


@pytest.fixture
def notes(monkeypatch):
    """The records of the 'mxnet_ssp' logger, with the note not yet written in this process."""
    monkeypatch.setattr(sync, '_noted', [])
    monkeypatch.setattr(sync, '_held', [])
    handler = Records()
    ours = logging.getLogger('mxnet_ssp')
    ours.addHandler(handler)
    yield handler
    ours.removeHandler(handler)


def expected_note(conf, by='an ssh session'):
    return ('mxnet-ssp: started over ssh on %s by %s; no MXNET_SSP_* setting reached it and '
            'there is no settings file (mxnet_ssp.env in %s, or MXNET_SSP_SETTINGS): using %s, '
            'all of them defaults (mxnet-ssp-launch passes the settings of its environment; '
            'docs/launch.md)' % (cfg.this_host(), by, os.getcwd(), conf.describe()))


STOCK = ("MXNet's tools/launch.py --launcher ssh (or another launcher that passes no "
         'MXNET_SSP_* setting over ssh)')


@pytest.fixture
def bare_ssh_process(tmp_path, monkeypatch):
    """os.environ of a process started by stock ssh: no MXNET_SSP_* setting, no file."""
    for name in list(os.environ):
        if name.startswith('MXNET_SSP_') or name in ('DMLC_JOB_CLUSTER', 'SSH_CONNECTION'):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('SSH_CONNECTION', SSH['SSH_CONNECTION'])
    return monkeypatch


# -- the note under ssh -----------------------------------------------------------------------
def test_a_process_reading_its_own_settings_over_ssh_with_none_says_so_once(bare_ssh_process,
                                                                           notes):
    conf = cfg.from_env('dist_ssp')
    assert [(r.name, r.levelno) for r in notes.records] == [('mxnet_ssp', logging.WARNING)]
    assert notes.messages() == [expected_note(conf)]
    assert 'dist_ssp staleness=3 mode=bounded timeout=300s metrics=off' in notes.messages()[0]
    cfg.from_env('dist_dssp')
    assert len(notes.records) == 1                          # once per process


def test_settings_given_as_a_mapping_write_no_note(bare_ssh_process, notes):
    cfg.from_env('dist_ssp', environ=dict(SSH))
    cfg.from_env('dist_ssp', environ={})
    assert notes.records == []


def test_the_note_reads_the_settings_it_is_given(notes, monkeypatch):
    for name in ('SSH_CONNECTION', 'DMLC_JOB_CLUSTER'):
        monkeypatch.delenv(name, raising=False)
    conf = cfg.from_env('dist_dssp', environ={})
    sync._note_defaults_once(conf, dict(SSH))
    assert notes.messages() == [expected_note(conf)]


@pytest.mark.parametrize('env', [
    {}, {'DMLC_JOB_CLUSTER': 'local'},                                  # not over ssh
    dict(SSH, MXNET_SSP_TIMEOUT='300'),                                 # a setting reached it
    dict(SSH, MXNET_SSP_METRICS_DIR=''),                                # even an empty one
    {'DMLC_JOB_CLUSTER': 'ssh', 'MXNET_SSP_STALENESS': '3'},
])
def test_no_note_off_ssh_or_when_a_setting_reached_the_process(notes, env, monkeypatch):
    for name in ('SSH_CONNECTION', 'DMLC_JOB_CLUSTER'):
        monkeypatch.delenv(name, raising=False)
    sync._note_defaults_once(cfg.from_env('dist_ssp', environ={}), env)
    assert notes.records == []


@pytest.mark.parametrize('env', [
    dict(SSH), dict(SSH, MXNET_SSP_GPUS='0'), dict(SSH, MXNET_SSP_REJOIN='1'),
    dict(SSH, MXNET_SSP_AUTOLOAD='1', PATH='/usr/bin', DMLC_ROLE='worker'),
    {'DMLC_JOB_CLUSTER': 'ssh'},
])
def test_the_note_is_written_when_only_settings_no_file_may_hold_reached_it(notes, env):
    """The launcher's per-process settings (MXNET_SSP_GPUS, ...) and other variables do not
    say that the job's settings reached the process."""
    conf = cfg.from_env('dist_ssp', environ={})
    sync._note_defaults_once(conf, env)
    if env.get('DMLC_ROLE') == 'worker':              # held until the rank is known
        assert notes.messages() == []
        cfg.note_worker_defaults(0)
    by = ('a launcher that set DMLC_JOB_CLUSTER=ssh' if 'DMLC_JOB_CLUSTER' in env else
          STOCK if 'DMLC_ROLE' in env else 'an ssh session')
    expected = expected_note(conf, by)
    if env.get('DMLC_ROLE') == 'worker':
        expected = expected.replace('mxnet-ssp: ', 'worker[0] ', 1)
    assert notes.messages() == [expected]


@pytest.mark.parametrize('rank', [0, 1, 2])
def test_a_workers_note_is_said_by_worker_0_only_naming_the_stock_launcher(notes, rank):
    """Once per job, not once per worker: every worker of a stock ssh job holds the note
    until its store knows its rank, and only rank 0 says it."""
    env = dict(SSH, DMLC_ROLE='worker')
    conf = cfg.from_env('dist_ssp', environ={})
    sync._note_defaults_once(conf, env)
    cfg.note_worker_defaults(rank)
    said = expected_note(conf, STOCK).replace('mxnet-ssp: ', 'worker[0] ', 1)
    assert notes.messages() == ([said] if rank == 0 else [])
    cfg.note_worker_defaults(0)                        # nothing more in this process
    sync._note_defaults_once(conf, env)
    assert len(notes.messages()) == (1 if rank == 0 else 0)


@pytest.mark.parametrize('role', ['worker', 'server', 'scheduler'])
def test_no_note_under_mxnet_ssp_launch_which_passed_its_settings(notes, role):
    env = dict(SSH, DMLC_ROLE=role, DMLC_JOB_CLUSTER='ssh', MXNET_SSP_LAUNCH_INDEX='0')
    sync._note_defaults_once(cfg.from_env('dist_ssp', environ={}), env)
    cfg.note_worker_defaults(0)
    assert notes.messages() == []


def test_no_note_when_a_settings_file_was_read_even_an_empty_one(notes, tmp_path):
    (tmp_path / cfg.SETTINGS_FILE).write_text('# nothing set\n')
    view = cfg.settings_environ(dict(SSH), cwd=str(tmp_path))
    assert view.path == str(tmp_path / cfg.SETTINGS_FILE)
    sync._note_defaults_once(cfg.from_env('dist_ssp', environ={}), view)
    assert notes.records == []
    sync._note_defaults_once(cfg.from_env('dist_ssp', environ={}),
                             cfg.SettingsView(dict(SSH)))      # no file: the note
    assert len(notes.records) == 1


# -- origins ------------------------------------------------------------------------------------
def test_a_setting_given_as_none_from_python_is_not_given_but_metrics_dir_none_is():
    conf = cfg.from_env('dist_dssp', environ={cfg.ENV_TIMEOUT: '30'}, staleness=None,
                        mode=None, timeout=None, metrics_dir=None, staleness_log=None)
    origins = dict(conf.origins)
    assert origins[cfg.ENV_STALENESS] == 'default'
    assert origins[cfg.ENV_DSSP_MODE] == 'default'
    assert origins[cfg.ENV_TIMEOUT] == 'environment'
    assert origins[cfg.ENV_STALENESS_LOG] == 'default'
    assert origins[cfg.ENV_METRICS_DIR] == 'mxnet_ssp.create()'     # None: turned off there
    assert conf.metrics_dir is None and conf.timeout == 30.0


def test_an_error_notes_where_the_settings_it_names_were_set(tmp_path):
    (tmp_path / cfg.SETTINGS_FILE).write_text('MXNET_SSP_STALENESS=2,4\nMXNET_SSP_TIMEOUT=9\n'
                                              'MXNET_SSP_STALENESS_LOG=1\n')
    view = cfg.settings_environ({}, cwd=str(tmp_path))
    path = view.path
    assert sync._with_origins('MXNET_SSP_TIMEOUT and MXNET_SSP_STALENESS disagree', view) == (
        'MXNET_SSP_TIMEOUT and MXNET_SSP_STALENESS disagree (MXNET_SSP_STALENESS is set in %s '
        'line 1; MXNET_SSP_TIMEOUT is set in %s line 2)' % (path, path))
    assert sync._with_origins("MXNET_SSP_STALENESS_LOG='x' is bad", view) == (
        "MXNET_SSP_STALENESS_LOG='x' is bad (MXNET_SSP_STALENESS_LOG is set in %s line 3)"
        % path)
    assert sync._with_origins('MXNET_SSP_DSSP_MODE is bad', view) == 'MXNET_SSP_DSSP_MODE is bad'
    assert sync._with_origins('MXNET_SSP_TIMEOUT is bad', {}) == 'MXNET_SSP_TIMEOUT is bad'
    with pytest.raises(cfg.ConfigError) as err:
        cfg.from_env('dist_ssp', environ=view)
    assert str(err.value) == (
        "MXNET_SSP_STALENESS='2,4' is not valid for dist_ssp: expected one integer s >= 0 "
        "(e.g. '3') (MXNET_SSP_STALENESS is set in %s line 1)" % path)


# -- normal forms and the snapshot period ---------------------------------------------------
@pytest.mark.parametrize('store,lower,upper,text', [
    ('dist_ssp', 3, 3, '3'), ('dist_ssp', 0, 0, '0'), ('dist_ssp', 12, 12, '12'),
    ('dist_dssp', 3, 15, '3,15'), ('dist_dssp', 4, 4, '4,4'), ('dist_async', 0, 0, '0,0'),
])
def test_format_staleness_is_the_one_normal_form(store, lower, upper, text):
    assert cfg.format_staleness(store, lower, upper) == text


@pytest.mark.parametrize('value', [None, '', '  ', '\t'])
def test_an_unset_or_blank_snapshot_period_is_off(value):
    assert cfg.parse_snapshot_period(value) == 0.0


@pytest.mark.parametrize('value,expected', [('0', 0.0), ('0.01', 0.01), (' 2.5 ', 2.5),
                                            ('3600', 3600.0), (60, 60.0)])
def test_the_snapshot_period_accepted(value, expected):
    assert cfg.parse_snapshot_period(value) == expected


@pytest.mark.parametrize('value', ['0.005', '3601', '-1', 'often', 'nan'])
def test_a_bad_snapshot_period_names_its_source_the_value_and_the_range(value):
    form = "expected seconds between the servers' weight copies, 0 (off) or a number from 0.01 to 3600"
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_snapshot_period(value)
    assert str(err.value) == 'MXNET_SSP_SERVER_SNAPSHOTS=%r is not valid: %s' % (value, form)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_snapshot_period(value, source='--snapshots')
    assert str(err.value) == '--snapshots=%r is not valid: %s' % (value, form)
