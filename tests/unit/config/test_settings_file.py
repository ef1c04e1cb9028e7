"""The job's settings file (mxnet_ssp.config: settings_environ and friends): parsing, validation, precedence, the
warning under ssh, and the agreement check (what a worker sends in its HELLO and how the
controller answers a worker whose settings differ), over real loopback sockets."""
import json
import os
import subprocess
import sys

import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.core import agreement
from mxnet_ssp.controller import protocol as P
from mxnet_ssp.controller.client import ControllerClient
from mxnet_ssp.controller.server import ControllerError, ControllerServer
from mxnet_ssp.core.sync import SyncPolicy

SECRET = b'settings-test-secret'


@pytest.fixture(autouse=True)
def fresh_cache():
    cfg.reset_settings_cache()
    yield
    cfg.reset_settings_cache()


def write(tmp_path, text, name=cfg.SETTINGS_FILE):
    path = tmp_path / name
    path.write_text(text)
    return path


def settings(tmp_path, base=None):
    return cfg.settings_environ({} if base is None else base, cwd=str(tmp_path))


# -- the format -----------------------------------------------------------------------------
def test_values_comments_export_quotes_and_line_numbers(tmp_path):
    path = write(tmp_path, '# job settings\n\n  MXNET_SSP_STALENESS = 2 \n'
                           'export MXNET_SSP_TIMEOUT="30"\nMXNET_SSP_DSSP_MODE=\'paper\'\n'
                           '   # indented comment\nMXNET_SSP_METRICS_DIR=\n')
    assert cfg.parse_settings_file(str(path)) == {
        'MXNET_SSP_STALENESS': ('2', 3), 'MXNET_SSP_TIMEOUT': ('30', 4),
        'MXNET_SSP_DSSP_MODE': ('paper', 5), 'MXNET_SSP_METRICS_DIR': ('', 7)}


@pytest.mark.parametrize('line', ['MXNET_SSP_STALENESS 2', 'just words', '=2',
                                  'MXNET SSP STALENESS=2', 'export'])
def test_a_line_that_is_not_name_equals_value_is_an_error_naming_file_and_line(tmp_path, line):
    path = write(tmp_path, '# ok\n%s\n' % line)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_settings_file(str(path))
    assert str(err.value).startswith('settings file %s, line 2: %r is not a setting: expected '
                                     'NAME=VALUE (e.g. MXNET_SSP_STALENESS=2)' % (path, line))


def test_an_unknown_setting_is_an_error_naming_it_and_every_accepted_name(tmp_path):
    path = write(tmp_path, 'MXNET_SSP_TIMEOUT=30\nMXNET_SSP_STALENES=2\n')
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_settings_file(str(path))
    assert str(err.value) == ('settings file %s, line 2: MXNET_SSP_STALENES is not a setting of '
                              'mxnet-ssp: expected one of %s' % (path, ', '.join(cfg.FILE_SETTINGS)))


def test_a_variable_that_is_not_ours_is_refused(tmp_path):
    path = write(tmp_path, 'OMP_NUM_THREADS=1\n')
    with pytest.raises(cfg.ConfigError, match=r'line 1: OMP_NUM_THREADS is not an mxnet-ssp '
                                              r'setting \(the file sets MXNET_SSP_\* settings '
                                              r'only'):
        cfg.parse_settings_file(str(path))


@pytest.mark.parametrize('name', sorted(cfg.NOT_IN_FILE))
def test_per_process_and_launcher_settings_are_refused_with_the_reason(tmp_path, name):
    path = write(tmp_path, '%s=1\n' % name)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_settings_file(str(path))
    assert str(err.value) == ('settings file %s, line 1: %s cannot be set in a settings file: %s'
                              % (path, name, cfg.NOT_IN_FILE[name]))


def test_a_setting_given_twice_is_an_error_naming_both_lines(tmp_path):
    path = write(tmp_path, 'MXNET_SSP_STALENESS=2\n\nMXNET_SSP_STALENESS=2\n')
    with pytest.raises(cfg.ConfigError, match=r'line 3: MXNET_SSP_STALENESS is set again '
                                              r'\(first on line 1\)'):
        cfg.parse_settings_file(str(path))


@pytest.mark.parametrize('line,accepted', [
    ('MXNET_SSP_TIMEOUT=-1', "MXNET_SSP_TIMEOUT='-1' is not valid: expected a number of seconds"),
    ('MXNET_SSP_STALENESS=5,1', "MXNET_SSP_STALENESS='5,1' is not valid for dist_dssp: sL=5 is "
                                "greater than sU=1"),
    ('MXNET_SSP_DSSP_MODE=fast', "MXNET_SSP_DSSP_MODE='fast' is not valid: expected one of"),
    ('MXNET_SSP_HOST_UPDATES=maybe', "MXNET_SSP_HOST_UPDATES='maybe' is not valid: expected"),
    ('MXNET_SSP_BUCKET_BYTES=-4', "MXNET_SSP_BUCKET_BYTES='-4' is not valid: expected a number"),
    ('MXNET_SSP_ELASTIC=x', "MXNET_SSP_ELASTIC='x' is not valid: expected the least number"),
    ('MXNET_SSP_CONTROLLER=gpu', "MXNET_SSP_CONTROLLER='gpu' is not valid: expected one of "
                                 "process, thread"),
    ('MXNET_SSP_FOLLOW_GRACE=0', "MXNET_SSP_FOLLOW_GRACE='0' is not valid: expected a number"),
    ('MXNET_SSP_BALANCE_PERIOD=0', "MXNET_SSP_BALANCE_PERIOD='0' is not valid: expected an "
                                   "integer >= 1"),
])
def test_a_bad_value_is_an_error_naming_file_line_setting_value_and_accepted(tmp_path, line,
                                                                             accepted):
    path = write(tmp_path, '\n%s\n' % line)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.parse_settings_file(str(path))
    assert str(err.value).startswith('settings file %s, line 2: %s' % (path, accepted)), err.value


def test_every_setting_the_package_names_is_accepted_or_refused_with_a_reason():
    """A new MXNET_SSP_* setting must be a row of the table, which a file may set (it is
    checked) or refuses with a reason; this catches a name added to mxnet_ssp.config alone."""
    names = {v for k, v in vars(cfg).items()
             if k.startswith('ENV_') and isinstance(v, str) and v.startswith('MXNET_SSP_')}
    names.add(cfg.ENV_SETTINGS)
    assert names <= set(cfg.TABLE), sorted(names - set(cfg.TABLE))
    assert set(cfg.FILE_SETTINGS) == {n for n, s in cfg.TABLE.items()
                                      if n.startswith('MXNET_SSP_') and not s.not_in_file}
    assert all(s.doc and s.concern and s.parse for s in cfg.TABLE.values())
    assert not set(cfg.FILE_SETTINGS) & set(cfg.NOT_IN_FILE)
    assert names <= set(cfg.FILE_SETTINGS) | set(cfg.NOT_IN_FILE), sorted(
        names - set(cfg.FILE_SETTINGS) - set(cfg.NOT_IN_FILE))


# -- where the file is, and precedence ------------------------------------------------------
def test_no_file_means_the_environment_alone(tmp_path):
    env = settings(tmp_path, {'MXNET_SSP_STALENESS': '4'})
    assert env.path is None and dict(env) == {'MXNET_SSP_STALENESS': '4'}
    assert env.origin('MXNET_SSP_STALENESS') == 'environment'
    assert env.origin('MXNET_SSP_TIMEOUT') == 'default'


def test_precedence_create_over_environment_over_file_over_default(tmp_path):
    path = write(tmp_path, 'MXNET_SSP_STALENESS=2,9\nMXNET_SSP_TIMEOUT=30\n'
                           'MXNET_SSP_DSSP_MODE=paper\n')
    env = settings(tmp_path, {'MXNET_SSP_TIMEOUT': '45', 'MXNET_SSP_DSSP_MODE': 'threshold'})
    conf = cfg.from_env('dist_dssp', environ=env, mode='bounded')
    assert (conf.s_lower, conf.s_upper, conf.timeout, conf.mode) == (2, 9, 45.0, 'bounded')
    origins = dict(conf.origins)
    assert origins['MXNET_SSP_STALENESS'] == '%s line 1' % path
    assert origins['MXNET_SSP_TIMEOUT'] == 'environment'
    assert origins['MXNET_SSP_DSSP_MODE'] == 'mxnet_ssp.create()'
    assert origins['MXNET_SSP_ELASTIC'] == 'default'
    assert env.overridden == {'MXNET_SSP_TIMEOUT': (2, '30'),
                              'MXNET_SSP_DSSP_MODE': (3, 'paper')}
    assert cfg.from_env('dist_dssp', environ=settings(tmp_path)).timeout == 30.0


def test_settings_path_names_another_file_relative_to_the_working_directory(tmp_path):
    write(tmp_path, 'MXNET_SSP_STALENESS=2\n')
    (tmp_path / 'conf').mkdir()
    other = write(tmp_path / 'conf', 'MXNET_SSP_STALENESS=5\n', 'job.env')
    env = settings(tmp_path, {cfg.ENV_SETTINGS: 'conf/job.env'})
    assert env.path == str(other) and env['MXNET_SSP_STALENESS'] == '5'
    assert settings(tmp_path, {cfg.ENV_SETTINGS: 'off'}).path is None
    with pytest.raises(cfg.ConfigError) as err:
        settings(tmp_path, {cfg.ENV_SETTINGS: 'missing.env'})
    assert str(err.value).startswith("MXNET_SSP_SETTINGS='missing.env' is not valid: expected "
                                     "the path of an existing settings file")


def test_a_value_that_fits_no_store_names_the_file_line(tmp_path):
    path = write(tmp_path, 'MXNET_SSP_STALENESS=1,5\n')
    with pytest.raises(cfg.ConfigError) as err:
        cfg.from_env('dist_ssp', environ=settings(tmp_path))
    assert str(err.value) == ("MXNET_SSP_STALENESS='1,5' is not valid for dist_ssp: expected one "
                              "integer s >= 0 (e.g. '3') (MXNET_SSP_STALENESS is set in %s line 1)"
                              % path)


def test_the_file_is_read_again_when_it_changes(tmp_path):
    path = write(tmp_path, 'MXNET_SSP_STALENESS=2\n')
    assert settings(tmp_path)['MXNET_SSP_STALENESS'] == '2'
    path.write_text('MXNET_SSP_STALENESS=7\nMXNET_SSP_TIMEOUT=9\n')
    assert settings(tmp_path)['MXNET_SSP_STALENESS'] == '7'


# -- a real process: the file in its working directory, the warning under ssh ---------------
PROBE = ('import json, mxnet_ssp.config as c; k = c.from_env("dist_ssp"); '
         'print(json.dumps([k.s_lower, k.timeout, c.bucket_bytes(), c.follow_grace()]))')


def probe(tmp_path, **env):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(('MXNET_SSP_', 'SSH_', 'DMLC_'))}
    base.update(env)
    return subprocess.run([sys.executable, '-c', PROBE], cwd=str(tmp_path), env=base,
                          capture_output=True, text=True, timeout=60)


def test_a_process_reads_the_file_in_its_working_directory(tmp_path):
    write(tmp_path, 'MXNET_SSP_STALENESS=2\nMXNET_SSP_BUCKET_BYTES=1024\n'
                    'MXNET_SSP_FOLLOW_GRACE=3\n')
    done = probe(tmp_path, MXNET_SSP_TIMEOUT='12')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [2, 12.0, 1024, 3.0]


def test_under_ssh_with_no_setting_anywhere_the_defaults_are_said_once(tmp_path):
    # a server says it at once (a worker holds it until its rank is known: rank 0 says it)
    done = probe(tmp_path, SSH_CONNECTION='127.0.0.1 5000 127.0.0.1 22', DMLC_ROLE='server')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[:2] == [3, 300.0]
    lines = [l for l in done.stderr.splitlines() if 'no MXNET_SSP_* setting reached it' in l]
    assert len(lines) == 1, done.stderr
    # one format for our lines in a job's process: the role and rank, then the message
    assert lines[0].startswith('mxnet-ssp: WARNING server['), lines[0]
    assert ("started over ssh on %s by MXNet's tools/launch.py --launcher ssh" % os.uname()[1]
            in lines[0]) and '; no MXNET_SSP_* setting reached it' in lines[0]
    assert ('there is no settings file (mxnet_ssp.env in %s, or MXNET_SSP_SETTINGS): using '
            'dist_ssp staleness=3 mode=bounded timeout=300s' % tmp_path) in lines[0]


@pytest.mark.parametrize('how', ['file', 'environment', 'not over ssh'])
def test_no_warning_when_a_setting_reached_the_process_or_not_over_ssh(tmp_path, how):
    env = {'SSH_CONNECTION': '127.0.0.1 5000 127.0.0.1 22'}
    if how == 'file':
        write(tmp_path, 'MXNET_SSP_TIMEOUT=300\n')
    elif how == 'environment':
        env['MXNET_SSP_TIMEOUT'] = '300'
    else:
        env = {'DMLC_JOB_CLUSTER': 'local'}
    done = probe(tmp_path, **env)
    assert done.returncode == 0 and 'no MXNET_SSP_* setting' not in done.stderr, done.stderr


def test_dmlc_job_cluster_ssh_counts_as_ssh():
    assert cfg.under_ssh({'DMLC_JOB_CLUSTER': 'ssh'}) and not cfg.under_ssh({})


# -- what must agree ------------------------------------------------------------------------
def test_job_settings_are_normal_forms_with_their_origins(tmp_path):
    path = write(tmp_path, 'MXNET_SSP_STALENESS=4\n')
    env = settings(tmp_path)
    conf = cfg.from_env('dist_dssp', environ=env)
    got = cfg.job_settings(conf, 4096, False, environ=env)
    assert got == {
        'kvstore type': ['dist_dssp', 'the script'],
        'MXNET_SSP_STALENESS': ['4,4', '%s line 1' % path],
        'MXNET_SSP_DSSP_MODE': ['bounded', 'default'],
        'MXNET_SSP_TIMEOUT': ['300', 'default'],
        'MXNET_SSP_ELASTIC': ['0', 'default'],
        'MXNET_SSP_BUCKET_BYTES': ['4096', 'mxnet_ssp.create()'],
        'MXNET_SSP_CHUNK_BYTES': ['%d' % cfg.DEFAULT_CHUNK_BYTES, 'default'],
        'MXNET_SSP_HOST_UPDATES': ['off', 'default'],
        'MXNET_SSP_STALENESS_LOG': ['off', 'default'],
        'MXNET_KVSTORE_BIGARRAY_BOUND': ['1000000', 'default']}
    same = cfg.from_env('dist_dssp', environ={'MXNET_SSP_STALENESS': '4,4'})
    other = cfg.job_settings(same, 4096, False, environ={})
    assert agreement.differences(got, other) == []     # '4' and '4,4' are one setting
    other['MXNET_SSP_TIMEOUT'] = ['60', 'environment']
    del other['MXNET_SSP_ELASTIC']
    assert agreement.differences(got, other) == ['MXNET_SSP_ELASTIC', 'MXNET_SSP_TIMEOUT']


# -- the wire -------------------------------------------------------------------------------
def test_hello_settings_round_trip_and_the_mac_covers_them():
    body = P.encode_settings('hostA', {'MXNET_SSP_STALENESS': ['2', 'environment']})
    nonce = b'n' * P.NONCE_BYTES
    mac = P.hello_mac(SECRET, nonce, 3, body)
    payload = P.encode_hello(3, mac, body=body)[4:]
    version, rank, got_mac, got_body, (host, values) = P.decode_hello_settings(payload)
    assert (version, rank, got_mac, got_body) == (P.VERSION, 3, mac, body)
    assert (host, values) == ('hostA', {'MXNET_SSP_STALENESS': ['2', 'environment']})
    assert mac != P.hello_mac(SECRET, nonce, 3)                  # no body, another MAC
    plain = P.encode_hello(3, P.hello_mac(SECRET, nonce, 3))[4:]
    assert P.decode_hello_settings(plain)[3:] == (b'', None)     # a HELLO without settings


def test_long_origins_are_shortened_to_fit_one_frame():
    values = {'MXNET_SSP_X%d' % i: ['1', '/very/long/path/' * 30 + 'mxnet_ssp.env line 1']
              for i in range(12)}
    body = P.encode_settings('h', values)
    assert len(body) + 39 <= P.MAX_FRAME
    _, got = P.decode_settings(body)
    assert all(v[0] == '1' and v[1].endswith('mxnet_ssp.env line 1') for v in got.values())


@pytest.mark.parametrize('body', [
    b'not json', b'\xff\xfe', b'[]', b'{"host": "h"}', b'{"host": 1, "settings": {}}',
    b'{"host": "h", "settings": []}', b'{"host": "h", "settings": {"A": ["1"]}}',
    b'{"host": "h", "settings": {"A": ["1", 2]}}', b'{"host": "h", "settings": {}, "x": 1}',
    b'{"host": "' + b'h' * 600 + b'", "settings": {}}'])
def test_malformed_hello_settings_are_refused(body):
    payload = P.encode_hello(0, b'm' * 32, body=body)[4:]
    with pytest.raises(P.ProtocolError):
        P.decode_hello_settings(payload)


def test_a_short_hello_is_refused():
    with pytest.raises(P.ProtocolError, match='HELLO has 10 bytes, expected at least 39'):
        P.decode_hello_settings(bytes([P.HELLO]) + b'x' * 9)


# -- the controller -------------------------------------------------------------------------
@pytest.fixture
def controller():
    started = []

    def make(num_workers=2, **kwargs):
        srv = ControllerServer(SyncPolicy(num_workers, 1, 1), SECRET, timeout=5.0,
                               **kwargs).start()
        started.append(srv)
        return srv
    yield make
    for srv in started:
        srv.stop()


def values(staleness='2', timeout='300'):
    return {'kvstore type': ['dist_ssp', 'the script'],
            'MXNET_SSP_STALENESS': [staleness, 'environment'],
            'MXNET_SSP_TIMEOUT': [timeout, '/job/mxnet_ssp.env line 2']}


def connect(srv, rank, **kwargs):
    return ControllerClient(srv.address, SECRET, rank, timeout=5.0, connect_timeout=2.0,
                            **kwargs).connect()


def test_a_worker_with_other_settings_fails_the_job_naming_setting_values_and_workers(
        controller):
    srv = controller(agree={'rank': 0, 'host': 'hostA', 'settings': values()})
    first = connect(srv, 0, settings=values(), host='hostA')
    with pytest.raises(ControllerError) as err:
        connect(srv, 1, settings=values(staleness='3', timeout='60'), host='hostB')
    expected = ("worker 1 on host hostB (connected from 127.0.0.1:%s) has settings that differ "
                "from the job's: MXNET_SSP_STALENESS=3 (from environment), but the job runs "
                "with MXNET_SSP_STALENESS=2 (from environment, as worker 0 on host hostA); "
                "MXNET_SSP_TIMEOUT=60 (from /job/mxnet_ssp.env line 2), but the job runs with "
                "MXNET_SSP_TIMEOUT=300 (from /job/mxnet_ssp.env line 2, as worker 0 on host "
                "hostA). Every process of a job must use the same MXNET_SSP_STALENESS, "
                "MXNET_SSP_TIMEOUT: set them in the settings file mxnet_ssp.env")
    text = str(err.value)
    assert 'refused the connection: ' in text
    port = text.split('connected from 127.0.0.1:')[1].split(')')[0]
    assert expected % port in text, text
    assert srv.failure.startswith(expected % port)
    with pytest.raises(ControllerError) as told:        # the accepted worker is told at once
        first.clock(1)
    assert str(told.value) == srv.failure
    with pytest.raises(ControllerError, match='the job already failed: worker 1 on host hostB'):
        connect(srv, 1, settings=values(), host='hostB')


def test_without_a_reference_the_first_worker_sets_the_job_settings(controller):
    srv = controller()
    first = connect(srv, 1, settings=values(staleness='5'), host='hostB')
    with pytest.raises(ControllerError, match=r'MXNET_SSP_STALENESS=2 \(from environment\), but '
                                              r'the job runs with MXNET_SSP_STALENESS=5 \(from '
                                              r'environment, as worker 1 on host hostB\)'):
        connect(srv, 0, settings=values(), host='hostA')
    first.close()


def test_equal_settings_and_a_hello_without_settings_are_admitted(controller):
    srv = controller(agree={'rank': 0, 'host': 'hostA', 'settings': values()})
    a = connect(srv, 0, settings=values(), host='hostB')
    b = connect(srv, 1)                                   # an mxnet-ssp that sends none
    assert srv.failure is None
    a.leave()
    b.leave()


# -- the launcher ---------------------------------------------------------------------------
def test_the_launcher_refuses_a_bad_settings_file_before_starting_anything(tmp_path):
    write(tmp_path, 'MXNET_SSP_TIMEOUT=30\nMXNET_SSP_STALENESS=1,5\n')
    marker = tmp_path / 'started'
    env = {k: v for k, v in os.environ.items() if not k.startswith(('MXNET_SSP_', 'DMLC_'))}
    done = subprocess.run([sys.executable, '-m', 'mxnet_ssp.launch', '-n', '1', '-s', '1',
                           '--launcher', 'local', sys.executable, '-c',
                           'open(%r, "w")' % str(marker), '--kvstore', 'dist_ssp'],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert ("mxnet-ssp-launch: error: MXNET_SSP_STALENESS='1,5' is not valid for dist_ssp: "
            "expected one integer s >= 0 (e.g. '3') (MXNET_SSP_STALENESS is set in %s line 2)"
            % (tmp_path / cfg.SETTINGS_FILE)) in done.stderr, done.stderr
    assert not marker.exists()
    write(tmp_path, 'MXNET_SSP_TIMEOUT=30\nMXNET_SSP_STALENES=1\n')
    done = subprocess.run(done.args, cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and ('error: settings file %s, line 2: MXNET_SSP_STALENES is '
                                     'not a setting of mxnet-ssp' % (tmp_path / cfg.SETTINGS_FILE)
                                     ) in done.stderr, done.stderr
    assert not marker.exists()


# -- the discovery request carries the job's settings in 1024 bytes -------------------------
def test_the_discovery_request_fits_the_settings_shortening_origins_as_needed():
    from mxnet_ssp.ps.channel import decode_blob, encode_blob
    from mxnet_ssp.worker.discovery import fit_agree
    request = {'v': 1, 'store': 'dist_dssp', 'metrics_dir': '/m'}
    short = {'rank': 0, 'host': 'a', 'settings': values()}
    assert fit_agree(request, short) == short
    deep = '/very/deep/directory/of/a/cluster/user/experiment/run-0001/mxnet_ssp.env line %d'
    long = {'rank': 0, 'host': 'a', 'settings': {'MXNET_SSP_X%d' % i: ['1', deep % i]
                                                 for i in range(9)}}
    fitted = fit_agree(request, long)
    assert fitted['settings'] == {'MXNET_SSP_X%d' % i: ['1', 'settings file line %d' % i]
                                  for i in range(9)}
    assert decode_blob(encode_blob(dict(request, agree=fitted)))['agree'] == fitted
    huge = {'rank': 0, 'host': 'h' * 2000, 'settings': {}}
    assert fit_agree(request, huge) is None


def test_a_server_compares_the_settings_sent_with_the_optimizer_where_no_controller_does():
    def sent(rank, store, bucket, elastic='0'):
        return cfg.sender(rank, {'kvstore type': [store, 'the script'],
                                 'MXNET_SSP_ELASTIC': [elastic, 'default'],
                                 'MXNET_SSP_BUCKET_BYTES': [bucket, 'environment']})
    cfg._updater_reference.clear()
    try:
        assert cfg.check_updater_settings(sent(0, 'dist_async', '0')) is None
        assert cfg.check_updater_settings(sent(1, 'dist_async', '0')) is None
        message = cfg.check_updater_settings(sent(1, 'dist_async', '64'))
        assert message.startswith(
            "worker 1 on host %s has settings that differ from the job's: "
            "MXNET_SSP_BUCKET_BYTES=64 (from environment), but the job runs with "
            "MXNET_SSP_BUCKET_BYTES=0 (from environment, as worker 0 on host %s)"
            % (cfg.this_host(), cfg.this_host())), message
        cfg._updater_reference.clear()          # a controller compares these: not here
        assert cfg.check_updater_settings(sent(0, 'dist_ssp', '0')) is None
        assert cfg.check_updater_settings(sent(1, 'dist_ssp', '64')) is None
        assert cfg.check_updater_settings(sent(1, 'dist_async', '0', elastic='1')) is None
        assert 'kvstore type=dist_async' in cfg.check_updater_settings(sent(1, 'dist_async', '0'))
    finally:
        cfg._updater_reference.clear()
