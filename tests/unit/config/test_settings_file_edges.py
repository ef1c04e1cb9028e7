"""Edges of the job's settings file (mxnet_ssp/config/file.py): which file is read (also when
the working directory is gone), quotes, values holding '=', the text given instead of the
file, files that cannot be read, every error message in full, and where a setting of a plain
mapping comes from.  Pure tests: no processes; os.environ and the working directory are only
changed through monkeypatch."""
import os

import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.config import file as settings_file

ACCEPTED = ', '.join(cfg.FILE_SETTINGS)


@pytest.fixture(autouse=True)
def fresh_cache():
    cfg.reset_settings_cache()
    yield
    cfg.reset_settings_cache()


def message(fn, *args, **kwargs):
    with pytest.raises(cfg.ConfigError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def parse(tmp_path, text):
    path = tmp_path / cfg.SETTINGS_FILE
    path.write_text(text)
    return str(path), cfg.parse_settings_file(str(path))


# -- which file -----------------------------------------------------------------------------
def test_settings_path_reads_os_environ_when_given_no_mapping(tmp_path, monkeypatch):
    chosen = tmp_path / 'job.env'
    chosen.write_text('')
    monkeypatch.setenv(cfg.ENV_SETTINGS, str(chosen))
    assert cfg.settings_path(cwd=str(tmp_path)) == str(chosen)
    monkeypatch.setenv(cfg.ENV_SETTINGS, 'off')
    assert cfg.settings_path(cwd=str(tmp_path)) is None


def test_a_missing_file_named_by_the_variable_is_an_error_saying_what_is_expected(tmp_path):
    assert message(cfg.settings_path, {cfg.ENV_SETTINGS: 'nope.env'}, str(tmp_path)) == (
        "MXNET_SSP_SETTINGS='nope.env' is not valid: expected the path of an existing "
        'settings file (NAME=VALUE lines; relative to the working directory %s), or off to '
        'read none' % tmp_path)


@pytest.fixture
def cwd_removed(tmp_path, monkeypatch):
    """The process's working directory is a directory that was removed since."""
    gone = tmp_path / 'gone'
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(OSError):
        os.getcwd()
    return tmp_path


def test_with_the_working_directory_gone_there_is_no_default_file(cwd_removed):
    assert cfg.settings_path({}) is None
    assert cfg.settings_path({cfg.ENV_SETTINGS: ''}) is None
    assert cfg.settings_path({cfg.ENV_SETTINGS: 'off'}) is None


def test_with_the_working_directory_gone_an_absolute_path_is_still_read(cwd_removed):
    chosen = cwd_removed / 'job.env'
    chosen.write_text('MXNET_SSP_TIMEOUT=30\n')
    assert cfg.settings_path({cfg.ENV_SETTINGS: str(chosen)}) == str(chosen)
    missing = str(cwd_removed / 'missing.env')
    assert message(cfg.settings_path, {cfg.ENV_SETTINGS: missing}) == (
        "MXNET_SSP_SETTINGS=%r is not valid: expected the path of an existing settings file "
        '(NAME=VALUE lines; relative to the working directory /), or off to read none'
        % missing)


@pytest.mark.parametrize('given', ['job.env', './job.env', 'conf/job.env'])
def test_with_the_working_directory_gone_a_relative_path_is_an_error(cwd_removed, given):
    assert message(cfg.settings_path, {cfg.ENV_SETTINGS: given}) == (
        "MXNET_SSP_SETTINGS=%r is not valid here: it is relative to the working directory, "
        'which no longer exists; expected an absolute path, or off' % given)


# -- quotes, '=' in values, the text given ------------------------------------------------------
@pytest.mark.parametrize('written,value', [
    ('""', ''), ("''", ''), ('"/runs/a"', '/runs/a'), ("'/runs/a'", '/runs/a'),
    ('"', '"'), ('"/runs/a\'', '"/runs/a\''), ('XrunsX', 'XrunsX'), ('/runs"', '/runs"'),
    ('""/runs""', '"/runs"'),
])
def test_one_pair_of_matching_quotes_is_dropped_and_nothing_else(tmp_path, written, value):
    path, values = parse(tmp_path, 'MXNET_SSP_METRICS_DIR=%s\n' % written)
    assert values == {cfg.ENV_METRICS_DIR: (value, 1)}


def test_an_empty_quoted_value_means_the_default(tmp_path):
    path, values = parse(tmp_path, 'MXNET_SSP_TIMEOUT=""\nMXNET_SSP_DSSP_MODE=\'\'\n')
    assert values == {cfg.ENV_TIMEOUT: ('', 1), cfg.ENV_DSSP_MODE: ('', 2)}
    view = cfg.settings_environ({}, cwd=str(tmp_path))
    conf = cfg.from_env('dist_dssp', environ=view)
    assert (conf.timeout, conf.mode) == (cfg.DEFAULT_TIMEOUT, 'bounded')


def test_a_value_may_hold_equals_signs(tmp_path):
    path, values = parse(tmp_path, 'MXNET_SSP_METRICS_DIR=/runs/lr=0.1,bs=64\n'
                                   'export MXNET_SSP_STALENESS = 2 \n')
    assert values == {cfg.ENV_METRICS_DIR: ('/runs/lr=0.1,bs=64', 1),
                      cfg.ENV_STALENESS: ('2', 2)}


def test_the_text_given_is_parsed_instead_of_the_file(tmp_path):
    missing = str(tmp_path / 'never-written.env')
    assert cfg.parse_settings_file(missing, 'MXNET_SSP_TIMEOUT=5\n') == {
        cfg.ENV_TIMEOUT: ('5', 1)}
    existing, _ = parse(tmp_path, 'MXNET_SSP_TIMEOUT=7\n')
    assert cfg.parse_settings_file(existing, '# nothing\n') == {}


def test_a_file_that_cannot_be_read_is_an_error_naming_it_and_why(tmp_path):
    missing = str(tmp_path / 'missing.env')
    assert message(cfg.parse_settings_file, missing) == (
        "settings file %s cannot be read: [Errno 2] No such file or directory: %r"
        % (missing, missing))
    binary = tmp_path / 'binary.env'
    binary.write_bytes(b'MXNET_SSP_TIMEOUT=5\n\xff\xfe\n')
    assert message(cfg.parse_settings_file, str(binary)) == (
        "settings file %s cannot be read: 'utf-8' codec can't decode byte 0xff in position 20: "
        'invalid start byte' % binary)


def test_the_file_is_read_as_utf8(tmp_path):
    path, values = parse(tmp_path, 'MXNET_SSP_METRICS_DIR=/runs/d\u00e9j\u00e0-vu\n')
    assert values == {cfg.ENV_METRICS_DIR: ('/runs/d\u00e9j\u00e0-vu', 1)}


# -- every error in full ------------------------------------------------------------------------
def test_a_line_that_is_not_name_equals_value_says_every_accepted_form(tmp_path):
    path = tmp_path / cfg.SETTINGS_FILE
    path.write_text('MXNET_SSP_TIMEOUT 30\n')
    assert message(cfg.parse_settings_file, str(path)) == (
        "settings file %s, line 1: 'MXNET_SSP_TIMEOUT 30' is not a setting: expected "
        'NAME=VALUE (e.g. MXNET_SSP_STALENESS=2), a comment starting with #, or an empty line'
        % path)


def test_a_variable_that_is_not_ours_is_an_error_saying_where_to_set_it(tmp_path):
    path = tmp_path / cfg.SETTINGS_FILE
    path.write_text('OMP_NUM_THREADS=1\n')
    assert message(cfg.parse_settings_file, str(path)) == (
        'settings file %s, line 1: OMP_NUM_THREADS is not an mxnet-ssp setting (the file sets '
        "MXNET_SSP_* settings only; set other variables in the processes' environment): "
        'expected one of %s' % (path, ACCEPTED))


def test_a_misspelt_setting_of_ours_is_an_error_listing_every_accepted_name(tmp_path):
    path = tmp_path / cfg.SETTINGS_FILE
    path.write_text('\nMXNET_SSP_TIMEOUTS=1\n')
    assert message(cfg.parse_settings_file, str(path)) == (
        'settings file %s, line 2: MXNET_SSP_TIMEOUTS is not a setting of mxnet-ssp: expected '
        'one of %s' % (path, ACCEPTED))


def test_a_setting_given_twice_is_an_error_naming_both_lines(tmp_path):
    path = tmp_path / cfg.SETTINGS_FILE
    path.write_text('MXNET_SSP_TIMEOUT=1\n# again\nMXNET_SSP_TIMEOUT=1\n')
    assert message(cfg.parse_settings_file, str(path)) == (
        'settings file %s, line 3: MXNET_SSP_TIMEOUT is set again (first on line 1): expected '
        'each setting once' % path)


def test_a_setting_a_file_may_not_set_says_why(tmp_path):
    path = tmp_path / cfg.SETTINGS_FILE
    path.write_text('MXNET_SSP_GPUS=0\n')
    assert message(cfg.parse_settings_file, str(path)) == (
        'settings file %s, line 1: MXNET_SSP_GPUS cannot be set in a settings file: it differs '
        'per worker (mxnet-ssp-launch --gpu-map sets it)' % path)


# -- the table's side: what a file may not set, where a value comes from, the launcher's check --
def test_not_in_file_is_a_mapping_whose_missing_keys_are_named():
    assert cfg.NOT_IN_FILE[cfg.ENV_GPUS].startswith('it differs per worker')
    with pytest.raises(KeyError) as err:
        cfg.NOT_IN_FILE[cfg.ENV_TIMEOUT]
    assert err.value.args == (cfg.ENV_TIMEOUT,)


def test_the_origin_of_a_setting_in_a_plain_mapping():
    assert settings_file.settings_origin({cfg.ENV_TIMEOUT: '5'}, cfg.ENV_TIMEOUT) == 'environment'
    assert settings_file.settings_origin({cfg.ENV_TIMEOUT: ''}, cfg.ENV_TIMEOUT) == 'environment'
    assert settings_file.settings_origin({'OTHER': '5'}, cfg.ENV_TIMEOUT) == 'default'


def test_the_origin_of_a_setting_in_a_settings_view(tmp_path):
    path, _ = parse(tmp_path, 'MXNET_SSP_TIMEOUT=5\nMXNET_SSP_DSSP_MODE=paper\n')
    view = cfg.settings_environ({cfg.ENV_DSSP_MODE: 'bounded'}, cwd=str(tmp_path))
    assert settings_file.settings_origin(view, cfg.ENV_TIMEOUT) == '%s line 1' % path
    assert settings_file.settings_origin(view, cfg.ENV_DSSP_MODE) == 'environment'
    assert settings_file.settings_origin(view, cfg.ENV_STALENESS) == 'default'


def test_check_setting_says_whether_it_checked_the_setting():
    assert cfg.check_setting(cfg.ENV_TIMEOUT, '5') is True
    assert cfg.check_setting(cfg.ENV_GPUS, '0,1') is True               # checked=True
    assert cfg.check_setting('OMP_NUM_THREADS', 'anything') is False    # not a setting
    assert cfg.check_setting(cfg.ENV_SETTINGS, 'anything') is False     # not launch-checked
    assert cfg.check_setting(cfg.ENV_REJOIN, 'bogus') is False          # the launcher's to set
    with pytest.raises(cfg.ConfigError):
        cfg.check_setting(cfg.ENV_TIMEOUT, '0')
