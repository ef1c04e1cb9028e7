"""Unit tests of mxnet-ssp-testbed's settings and refusals (mxnet_ssp/lab/testbed/): no root, no
namespaces, nothing started; they run anywhere."""
import ipaddress
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from mxnet_ssp.lab.testbed import cli, cluster, measure
from mxnet_ssp.lab.testbed.settings import (BRIDGE_ADDRESS, DEFAULT_PREFIX, ENV_PREFIX,
                                        ENV_STATE_ROOT, MAX_HOSTS, NETWORK, TestbedError,
                                        check_prefix, format_rate, host_index, owned_namespace,
                                        parse_hosts, parse_rate, parse_rate_of, plan,
                                        prefix_from, state_dir, tbf_burst)


@pytest.mark.parametrize('text, bits', [
    ('1gbit', 10 ** 9), ('100mbit', 10 ** 8), ('2.5gbit', 25 * 10 ** 8), ('1mbit', 10 ** 6),
    ('10gbit', 10 ** 10), ('1000kbit', 10 ** 6), ('100MBIT', 10 ** 8), (' 50mbit ', 5 * 10 ** 7),
])
def test_parse_rate_accepts_tc_units(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize('text', ['1gigabit', '1g', '100', 'mbit', '-1mbit', '1e3mbit',
                                  '1 gbps', '', '1gbit/s', '100mibit'])
def test_parse_rate_refuses_what_is_not_a_rate(text):
    with pytest.raises(TestbedError) as err:
        parse_rate(text)
    msg = str(err.value)
    assert msg.startswith('--rate %r is not a rate; accepted: ' % text), msg
    assert 'kbit, mbit or gbit' in msg and 'from 1mbit to 10gbit' in msg


@pytest.mark.parametrize('text', ['999kbit', '0mbit', '10.5gbit', '20gbit'])
def test_parse_rate_refuses_rates_out_of_range(text):
    with pytest.raises(TestbedError, match=r"^--rate '%s' is out of range; accepted: .*"
                                           r"from 1mbit to 10gbit$" % text.replace('.', r'\.')):
        parse_rate(text)


def test_parse_rate_names_the_setting_it_checks():
    with pytest.raises(TestbedError, match=r"^--rate-of host1=x: rate 'x' is not a rate"):
        parse_rate('x', '--rate-of host1=x: rate')


@pytest.mark.parametrize('bits, text', [(10 ** 9, '1gbit'), (10 ** 8, '100mbit'),
                                        (25 * 10 ** 8, '2.5gbit'), (1500 * 10 ** 3, '1.5mbit'),
                                        (999, '999bit')])
def test_format_rate_round_trips(bits, text):
    assert format_rate(bits) == text
    if bits >= 10 ** 6:
        assert parse_rate(text) == bits


@pytest.mark.parametrize('text, count', [('2', 2), ('3', 3), (' 64 ', 64), (4, 4)])
def test_parse_hosts(text, count):
    assert parse_hosts(text) == count


@pytest.mark.parametrize('text', ['1', '0', '65', 'x', '-3', '2.0', '', 'three'])
def test_parse_hosts_refuses_bad_counts(text):
    with pytest.raises(TestbedError) as err:
        parse_hosts(text)
    assert str(err.value) == ("--hosts %r is not a host count; accepted: an integer from 2 to "
                              "64" % text)


def test_host_index_by_name_and_address():
    assert host_index('host0', 3, '--host') == 0
    assert host_index('host2', 3, '--host') == 2
    assert host_index('198.18.0.1', 3, '--host') == 0
    assert host_index('198.18.0.3', 3, '--host') == 2
    for bad in ('host3', 'host01', 'host-1', 'h1', '198.18.0.4', '198.18.0.0', '10.0.0.1', '',
                'HOST1'):
        with pytest.raises(TestbedError) as err:
            host_index(bad, 3, '--host')
        assert str(err.value) == ("--host %r is not a host of this testbed; accepted: host0 .. "
                                  "host2 or their addresses 198.18.0.1 .. 198.18.0.3" % bad)


def test_parse_rate_of_sets_one_host_and_keeps_the_default_for_the_others():
    assert parse_rate_of([], 3, 10 ** 9) == [10 ** 9] * 3
    assert parse_rate_of(['host2=100mbit', '198.18.0.1=2gbit'], 3, 10 ** 9) == [
        2 * 10 ** 9, 10 ** 9, 10 ** 8]


@pytest.mark.parametrize('items, message', [
    (['host1'], "--rate-of 'host1' is not HOST=RATE; accepted: e.g. host3=100mbit "
                "(host0 .. host2)"),
    (['host3=1gbit'], "--rate-of host3=1gbit: host 'host3' is not a host of this testbed; "
                      "accepted: host0 .. host2 or their addresses 198.18.0.1 .. 198.18.0.3"),
    (['host1=1gigabit'], "--rate-of host1=1gigabit: rate '1gigabit' is not a rate; accepted: "),
    (['host1=1gbit', '198.18.0.2=2gbit'], "--rate-of '198.18.0.2=2gbit' gives host1 a second "
                                          "rate; accepted: one --rate-of per host"),
])
def test_parse_rate_of_refusals(items, message):
    with pytest.raises(TestbedError) as err:
        parse_rate_of(items, 3, 10 ** 9)
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize('prefix', ['mxssp-', 'a', 't1234567-', 'abcdefghij'])
def test_check_prefix_accepts(prefix):
    assert check_prefix(prefix) == prefix


@pytest.mark.parametrize('prefix', ['', '-a', 'Mx-', '1a', 'a_b', 'a--', 'a-b-', 'abcdefghijk',
                                    'a b', 'a/'])
def test_check_prefix_refuses(prefix):
    with pytest.raises(TestbedError, match=r"^--prefix %r is not a name prefix; accepted: 1 to "
                                           r"10 characters" % prefix):
        check_prefix(prefix)


def test_prefix_from_flag_environment_and_default(tmp_path):
    assert prefix_from(None, {}) == DEFAULT_PREFIX
    assert prefix_from(None, {ENV_PREFIX: 'tb7-'}) == 'tb7-'
    assert prefix_from('tb8-', {ENV_PREFIX: 'tb7-'}) == 'tb8-'
    with pytest.raises(TestbedError, match='^%s \'X\' is not a name prefix' % ENV_PREFIX):
        prefix_from(None, {ENV_PREFIX: 'X'})
    assert state_dir('tb7-', {}) == '/run/tb7-testbed'
    assert state_dir('tb7-', {ENV_STATE_ROOT: str(tmp_path)}) == str(tmp_path / 'tb7-testbed')
    with pytest.raises(TestbedError, match="^%s 'rel' is not an absolute directory"
                                           % ENV_STATE_ROOT):
        state_dir('tb7-', {ENV_STATE_ROOT: 'rel'})


def test_plan_names_carry_the_prefix_fit_ifnamsiz_and_addresses_stay_in_the_range():
    longest = 'abcdefghi-'
    p = plan(longest, [10 ** 9] * MAX_HOSTS)
    assert p.bridge_namespace == longest + 'net' and p.bridge == longest + 'br'
    addresses = set()
    for h in p.hosts:
        for name in (h.namespace, h.link, h.ifname):
            assert name.startswith(longest) and len(name) <= 15, name
        assert owned_namespace(h.namespace, longest)
        address = ipaddress.ip_address(h.address)
        assert address in NETWORK
        addresses.add(address)
    assert len(addresses) == MAX_HOSTS and BRIDGE_ADDRESS in NETWORK
    assert BRIDGE_ADDRESS not in addresses
    assert len(set(h.link for h in p.hosts)) == MAX_HOSTS
    assert [h.name for h in plan('a-', [1, 2, 3]).hosts] == ['host0', 'host1', 'host2']
    assert [h.rate for h in plan('a-', [1, 2, 3]).hosts] == [1, 2, 3]
    assert owned_namespace('a-net', 'a-')


@pytest.mark.parametrize('name', ['mxssp-h', 'mxssp-h01', 'mxssp-hx', 'mxssp-x-h0', 'mxssp-',
                                  'xmxssp-h0', 'mxssp-h0x', 'mxssp-netx', 'other'])
def test_owned_namespace_matches_exactly(name):
    """down of one prefix never removes a name it did not create (another prefix's)."""
    assert not owned_namespace(name, 'mxssp-')


def test_tbf_burst_and_transfer_size():
    assert tbf_burst(10 ** 9) == 625000        # 5 ms at 1gbit
    assert tbf_burst(10 ** 6) == 16384
    total, skip = measure.transfer_size(10 ** 9)
    assert skip == 2 * 625000 + 65536 and total == skip + int(10 ** 9 / 8 * measure.SECONDS)
    assert measure.within(0.956e9, 10 ** 9) and not measure.within(0.89e9, 10 ** 9)
    assert not measure.within(1.11e9, 10 ** 9)


def test_ssh_config_and_sshd_config_text():
    p = plan('tb-', [10 ** 9, 10 ** 8])
    text = cluster.ssh_config_text(p, '/run/tb-testbed')
    assert 'Host host1 tb-h1\n    HostName 198.18.0.2\n' in text
    assert '    IdentityFile /run/tb-testbed/id_ed25519\n' in text
    assert '    GlobalKnownHostsFile /run/tb-testbed/known_hosts\n' in text
    sshd = cluster.sshd_config_text(p.host(1), '/run/tb-testbed')
    assert 'ListenAddress 198.18.0.2\n' in sshd
    assert 'PasswordAuthentication no\n' in sshd
    assert 'AuthorizedKeysFile /run/tb-testbed/authorized_keys\n' in sshd
    assert cluster.in_host('/c', 'tb-h1', ['echo', 'a b']) == [
        'ip', 'netns', 'exec', 'tb-h1', 'sh', '-c',
        'mount --bind "$0" /etc/ssh/ssh_config && exec "$@"', '/c', 'echo', 'a b']


def _which(missing):
    return lambda name: None if name == missing else '/usr/bin/' + name


def test_preflight_refuses_without_root():
    with pytest.raises(TestbedError) as err:
        cluster.preflight('up', euid=1000, which=_which(None), sshd='/usr/sbin/sshd')
    assert str(err.value).startswith('user: effective uid 1000; accepted: root (uid 0)')


@pytest.mark.parametrize('verb, missing', [('up', 'ip'), ('up', 'tc'), ('up', 'ssh'),
                                           ('up', 'ssh-keygen'), ('down', 'ip'), ('run', 'ip'),
                                           ('status', 'ip')])
def test_preflight_refuses_missing_programs(verb, missing):
    with pytest.raises(TestbedError) as err:
        cluster.preflight(verb, euid=0, which=_which(missing), sshd='/usr/sbin/sshd')
    assert str(err.value).startswith('program %s: not found on PATH; accepted: an installed %s '
                                     '(apt-get install ' % (missing, missing)), str(err.value)


def test_preflight_refuses_missing_sshd_and_client_config(tmp_path):
    with pytest.raises(TestbedError, match='^program sshd: not found on PATH nor in '):
        cluster.preflight('up', euid=0, which=_which(None), sshd='')
    cluster.preflight('down', euid=0, which=_which('tc'), sshd='')     # down needs only ip
    with pytest.raises(TestbedError, match='^ssh client configuration %s: missing; accepted: '
                                           % (tmp_path / 'none')):
        cluster.preflight('up', euid=0, which=_which(None), sshd='/usr/sbin/sshd',
                          client_config=str(tmp_path / 'none'))


@pytest.mark.parametrize('argv, message', [
    (['up', '--rate', '1gigabit'], "--rate '1gigabit' is not a rate"),
    (['up', '--hosts', '1'], "--hosts '1' is not a host count"),
    (['up', '--hosts', '3', '--rate-of', 'host3=1gbit'], "--rate-of host3=1gbit: host 'host3'"),
    (['--prefix', 'Bad', 'down'], "--prefix 'Bad' is not a name prefix"),
    (['status', '--prefix', 'Bad'], "--prefix 'Bad' is not a name prefix"),
    (['run'], 'run: command: none given; accepted: run [--host NAME] -- COMMAND'),
    (['run', '--'], 'run: command: none given'),
    (['frob'], "argument {up,down,status,run}: invalid choice: 'frob'"),
])
def test_command_line_refusals_exit_2_with_one_line(argv, message):
    """Checked before anything else (as any user: no root needed to be told a value is bad)."""
    proc = subprocess.run([sys.executable, '-m', 'mxnet_ssp.lab.testbed'] + argv, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith('mxnet-ssp-testbed: ' + message), proc.stderr
    assert 'accepted' in lines[0]
    assert proc.stdout == ''


def test_command_line_check_builds_the_plan():
    args = cli.build_parser().parse_args(['--prefix', 'tb-', 'up', '--hosts', '3', '--rate',
                                          '200mbit', '--rate-of', 'host1=50mbit'])
    prefix, p = cli.check(args, {})
    assert prefix == 'tb-' and [h.rate for h in p.hosts] == [2 * 10 ** 8, 5 * 10 ** 7, 2 * 10 ** 8]
    args = cli.build_parser().parse_args(['run', '--host', 'host2', '--', 'env', '-0'])
    assert cli.check(args, {ENV_PREFIX: 'tb9-'}) == ('tb9-', None)
    assert args.command == ['env', '-0'] and args.host == 'host2'
    json.dumps(vars(p.hosts[0]))        # what up writes into testbed.json


@pytest.mark.parametrize('verb', [['up'], ['down'], ['status'], ['run', '--', 'true']])
def test_main_refuses_a_user_that_is_not_root(verb, monkeypatch, capsys):
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    assert cli.main(['--prefix', 'tb-'] + verb) == 2
    out, err = capsys.readouterr()
    assert out == '' and err == (
        'mxnet-ssp-testbed: user: effective uid 1000; accepted: root (uid 0), since network '
        'namespaces, links and tbf need CAP_SYS_ADMIN and CAP_NET_ADMIN (run: sudo '
        'mxnet-ssp-testbed %s ...)\n' % verb[0])


def test_main_refuses_when_a_program_is_missing(monkeypatch, capsys, tmp_path):
    """As root with an empty PATH: `ip` is named first (before anything is changed)."""
    monkeypatch.setattr(os, 'geteuid', lambda: 0)
    monkeypatch.setenv('PATH', str(tmp_path))
    assert cli.main(['--prefix', 'tb-', 'up', '--hosts', '2']) == 2
    assert capsys.readouterr().err == ('mxnet-ssp-testbed: program ip: not found on PATH; '
                                       'accepted: an installed ip (apt-get install iproute2)\n')
    (tmp_path / 'ip').write_text('#!/bin/sh\nexit 99\n')     # never run: tc is missing
    (tmp_path / 'ip').chmod(0o755)
    assert cli.main(['--prefix', 'tb-', 'up', '--hosts', '2']) == 2
    assert capsys.readouterr().err.startswith('mxnet-ssp-testbed: program tc: not found on PATH')


def test_run_and_status_of_a_testbed_that_is_not_up(monkeypatch, capsys, tmp_path):
    """run refuses (exit 2) naming the prefix and the state file it looked for; nothing runs
    (the fake ip and mount on PATH would exit 99)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    for name in ('ip', 'mount'):
        (bin_dir / name).write_text('#!/bin/sh\nexit 99\n')
        (bin_dir / name).chmod(0o755)
    monkeypatch.setattr(os, 'geteuid', lambda: 0)
    monkeypatch.setenv('PATH', str(bin_dir))
    monkeypatch.setenv(ENV_STATE_ROOT, str(tmp_path))
    assert cli.main(['--prefix', 'tb-', 'run', '--host', 'host1', '--', 'true']) == 2
    assert capsys.readouterr().err == (
        'mxnet-ssp-testbed: testbed tb-: not up (no %s/tb-testbed/testbed.json); accepted: a '
        'prefix whose testbed is up (start one with mxnet-ssp-testbed up --prefix tb-)\n'
        % tmp_path)


@pytest.mark.parametrize('readings, best, transfers', [
    ([0.956e9], 0.956e9, 1),                     # within 10% at once
    ([0.5e9, 0.95e9, 0.7e9], 0.95e9, 2),         # short, then within: stops
    ([0.5e9, 0.6e9, 0.7e9], 0.7e9, 3),           # short every time: the fastest, after 3
    ([1.3e9, 0.95e9], 1.3e9, 1),                 # over the setting: shaping failed, no retry
])
def test_best_of_measures_again_only_while_short(monkeypatch, readings, best, transfers):
    calls = []

    def fake(receiver_ns, address, sender_ns, bits, python=None):
        calls.append((receiver_ns, address, sender_ns, bits))
        return readings[len(calls) - 1]
    monkeypatch.setattr(measure, 'measure', fake)
    assert measure.best_of('r', '198.18.0.2', 's', 10 ** 9) == (best, transfers)
    assert calls == [('r', '198.18.0.2', 's', 10 ** 9)] * transfers
