"""Integration tests of mxnet-ssp-testbed: real network namespaces, tbf links and sshds.

They need root, iproute2 (ip, tc) and OpenSSH (sshd, ssh, ssh-keygen); without them they
are skipped (and fail under CI=true, tests/conftest.py need).  Each test run uses a prefix of
its own, so parallel runs do not collide, and every testbed is removed on every exit path
(fixtures with finally).  No sleeps: the tool waits for its sshds by polling their pid files
with a deadline, and the checks here are the outcomes (addresses, ssh logins, rates).
"""
import ipaddress
import json
import os
import re
import secrets
import subprocess
import sys
import time

import pytest

from conftest import INSTALL_SSH, ROOT, need, need_program
from mxnet_ssp.lab.testbed import cluster, measure
from mxnet_ssp.lab.testbed.settings import NETWORK, owned_namespace

INSTALL_IPROUTE = 'apt-get install iproute2'
PY = sys.executable

pytestmark = [pytest.mark.integration, pytest.mark.ssh]


def need_link_tools():
    """`need` what hosts and shaped links need here: root, ip and tc."""
    if os.geteuid() != 0:
        need('root (effective uid %d): network namespaces need CAP_SYS_ADMIN' % os.geteuid(),
             'run the tests as root (.ci/run does)')
    need_program('ip', INSTALL_IPROUTE)
    need_program('tc', INSTALL_IPROUTE)


def need_testbed_tools():
    """`need` what a testbed needs here: root, ip netns, tc, sshd, ssh, ssh-keygen."""
    need_link_tools()
    need_program('ssh', INSTALL_SSH)
    need_program('ssh-keygen', INSTALL_SSH)
    if cluster.find_sshd() is None:
        need('the program sshd (not on PATH nor in %s)' % ', '.join(cluster.SSHD_CANDIDATES),
             INSTALL_SSH)
    probe = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True)
    if probe.returncode != 0:
        need('network namespaces (ip netns list: %s)' % probe.stderr.strip(),
             '%s, on a kernel with network namespaces' % INSTALL_IPROUTE)


def new_prefix():
    """A prefix of this run only: 't' + 6 random hex digits + '-'."""
    return 't%s-' % secrets.token_hex(3)


def tb(prefix, *args, env=None, timeout=120, **kwargs):
    """Run ``python -m mxnet_ssp.lab.testbed --prefix PREFIX ARGS...``."""
    environ = dict(os.environ if env is None else env)
    environ['PYTHONPATH'] = ROOT + (os.pathsep + environ['PYTHONPATH']
                                    if environ.get('PYTHONPATH') else '')
    environ['OMP_NUM_THREADS'] = '1'
    return subprocess.run([PY, '-m', 'mxnet_ssp.lab.testbed', '--prefix', prefix] + list(args),
                          env=environ, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, **kwargs)



def four_hosts():
    """A generator for a fixture: 4 emulated hosts at 1gbit (host0: the login host), up with
    a prefix of its own; yields the testbed's state and removes it on every exit path."""
    need_testbed_tools()
    prefix = new_prefix()
    try:
        proc = tb(prefix, 'up', '--hosts', '4', '--rate', '1gbit', '--no-measure')
        assert proc.returncode == 0, fail(proc)
        with open('/run/%stestbed/testbed.json' % prefix) as f:
            state = json.load(f)
        yield state
    finally:
        down = tb(prefix, 'down')
        assert down.returncode == 0, fail(down)

def root_namespace_view():
    """The root namespace's interfaces, addresses and routes (must not change)."""
    return {what: subprocess.run(['ip', '-o'] + what.split(), capture_output=True, text=True,
                                 check=True).stdout
            for what in ('link show', 'addr show', 'route show', '-6 route show')}


def prefix_processes(prefix):
    """'pid: command line' of the live processes whose command line names the testbed's state
    directory (its sshds), in any namespace: one whose namespace lost its name counts too."""
    found = []
    marker = ('/run/%stestbed/' % prefix).encode()
    for name in os.listdir('/proc'):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open('/proc/%s/cmdline' % name, 'rb') as f:
                    cmdline = f.read()
            except OSError:
                continue
            if marker in cmdline and cluster._alive(int(name)):
                found.append('%s: %s' % (name, cmdline.replace(b'\0', b' ').decode(
                    errors='replace')))
    return found


def left_over(prefix):
    """Everything with `prefix` that exists: namespaces, the state directory, processes."""
    names = [n for n in cluster.namespaces() if n.startswith(prefix)]
    state = os.path.join('/run', prefix + 'testbed')
    return names + ([state] if os.path.lexists(state) else []) + prefix_processes(prefix)


def fail(proc):
    return 'exit %s\nstdout:\n%s\nstderr:\n%s' % (proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope='module')
def bed():
    """A 3-host testbed (1gbit, host2 at 200mbit), brought up over the leftovers of a crashed
    one of the same prefix (a namespace <prefix>h5 and a state directory)."""
    need_testbed_tools()
    prefix = new_prefix()
    before = root_namespace_view()
    try:
        subprocess.run(['ip', 'netns', 'add', prefix + 'h5'], check=True)
        os.makedirs('/run/%stestbed' % prefix)
        with open('/run/%stestbed/testbed.json' % prefix, 'w') as f:
            f.write('{"stale": true')
        proc = tb(prefix, 'up', '--hosts', '3', '--rate', '1gbit',
                       '--rate-of', 'host2=200mbit')
        state = None
        if proc.returncode == 0:
            with open('/run/%stestbed/testbed.json' % prefix) as f:
                state = json.load(f)
        yield {'prefix': prefix, 'up': proc, 'state': state, 'root_before': before}
    finally:
        down = tb(prefix, 'down')
        assert down.returncode == 0, fail(down)
        assert left_over(prefix) == []


@pytest.fixture
def up(bed):
    assert bed['up'].returncode == 0, fail(bed['up'])
    return bed


def in_ns(namespace, *argv):
    return subprocess.run(['ip', 'netns', 'exec', namespace] + list(argv), capture_output=True,
                          text=True, timeout=60)


def test_up_removes_a_crashed_run_and_measures_each_link_both_ways(up):
    prefix, out = up['prefix'], up['up'].stdout
    assert ('removed an earlier testbed of prefix %s: namespace %sh5, state directory '
            '/run/%stestbed' % (prefix, prefix, prefix)) in out, out
    assert sorted(n for n in cluster.namespaces() if n.startswith(prefix)) == [
        prefix + 'h0', prefix + 'h1', prefix + 'h2', prefix + 'net']
    settings = {'host0': 10 ** 9, 'host1': 10 ** 9, 'host2': 2 * 10 ** 8}
    for host in up['state']['hosts']:
        assert host['rate'] == settings[host['name']]
        for direction in ('up', 'down'):
            got = host['measured'][direction]
            assert abs(got - host['rate']) <= 0.10 * host['rate'], (host, direction)
        # the printed line names both directions with the measured values
        line = re.search(r'^  %s +setting (\S+) +%s -> bridge ([\d.]+) Mbit/s .*; bridge -> %s '
                         r'([\d.]+) Mbit/s' % (host['name'], host['name'], host['name']),
                         out, re.M)
        assert line, out
        assert line.group(1) == {10 ** 9: '1gbit', 2 * 10 ** 8: '200mbit'}[host['rate']]
        assert float(line.group(2)) == pytest.approx(host['measured']['up'] / 1e6, abs=0.06)
        assert float(line.group(3)) == pytest.approx(host['measured']['down'] / 1e6, abs=0.06)


def test_each_host_has_its_own_address_only_and_the_root_namespace_is_untouched(up):
    prefix = up['prefix']
    for i, host in enumerate(up['state']['hosts']):
        assert host['address'] == '198.18.0.%d' % (i + 1)
        addrs = in_ns(host['namespace'], 'ip', '-o', '-4', 'addr', 'show').stdout
        found = sorted(re.findall(r' (\S+) +inet (\S+) ', addrs))
        assert found == [('lo', '127.0.0.1/8'), (prefix + 'eth', host['address'] + '/15')], addrs
        assert ipaddress.ip_interface(found[1][1]).network == NETWORK
        assert in_ns(host['namespace'], 'ip', '-6', 'addr', 'show').stdout == ''   # no fe80::
        routes = in_ns(host['namespace'], 'ip', '-4', 'route', 'show').stdout.splitlines()
        assert [r.split()[:3] for r in routes] == [['198.18.0.0/15', 'dev', prefix + 'eth']], routes
    bridge = in_ns(prefix + 'net', 'ip', '-o', '-4', 'addr', 'show').stdout
    assert sorted(re.findall(r' inet (\S+) ', bridge)) == ['127.0.0.1/8', '198.19.255.254/15']
    assert in_ns(prefix + 'net', 'ip', '-6', 'addr', 'show').stdout == ''
    assert root_namespace_view() == up['root_before']


def test_both_ends_of_each_link_are_shaped_with_tbf(up):
    prefix = up['prefix']
    for i, (host, text) in enumerate(zip(up['state']['hosts'], ('1Gbit', '1Gbit', '200Mbit'))):
        own = subprocess.run(['tc', '-n', host['namespace'], 'qdisc', 'show', 'dev',
                              prefix + 'eth'], capture_output=True, text=True).stdout
        far = subprocess.run(['tc', '-n', prefix + 'net', 'qdisc', 'show', 'dev',
                              '%sb%d' % (prefix, i)], capture_output=True, text=True).stdout
        for qdisc in (own, far):
            assert re.search(r'^qdisc tbf \S+ root .*rate %s ' % text, qdisc), qdisc


def test_a_transfer_between_two_hosts_runs_at_the_slower_link(up):
    """host0 (1gbit) -> host2 (200mbit) goes through host2's shaped downlink; host2 -> host1
    through host2's uplink; host0 -> host1 at 1gbit.  Host to host, not against the bridge."""
    hosts = up['state']['hosts']
    cases = [(0, 2, 2 * 10 ** 8), (2, 1, 2 * 10 ** 8), (0, 1, 10 ** 9)]
    for src, dst, bits in cases:
        got, transfers = measure.best_of(hosts[dst]['namespace'], hosts[dst]['address'],
                                         hosts[src]['namespace'], bits)
        assert measure.within(got, bits), (src, dst, got, bits, transfers)


def test_ssh_between_hosts_with_the_testbed_key_only(up):
    prefix = up['prefix']
    proc = tb(prefix, 'run', '--host', 'host1', '--', 'sh', '-c',
                   'ssh 198.18.0.3 ip -o -4 addr show && ssh host0 ip -o -4 addr show && '
                   'ssh -o PubkeyAuthentication=no -o BatchMode=yes 198.18.0.1 true; '
                   'echo "no key: $?"')
    assert proc.returncode == 0, fail(proc)
    shown = re.findall(r' inet (198\.\S+) ', proc.stdout)
    assert shown == ['198.18.0.3/15', '198.18.0.1/15'], proc.stdout
    assert 'no key: 255' in proc.stdout, fail(proc)
    for host in up['state']['hosts']:      # each sshd listens on its host's address only
        listening = in_ns(host['namespace'], 'ss', '-Hltn').stdout.split('\n')
        assert [line.split()[3] for line in listening if line.strip()] == [
            host['address'] + ':22'], listening


def test_run_keeps_the_environment_the_directory_and_the_exit_code(up, tmp_path):
    env = dict(os.environ, TESTBED_MARK='mark %s' % secrets.token_hex(4))
    proc = tb(up['prefix'], 'run', '--host', '198.18.0.2', '--', 'sh', '-c',
                   'echo "$TESTBED_MARK"; pwd; ip -o -4 addr show; echo here > seen; exit 3',
                   env=env, cwd=str(tmp_path))
    assert proc.returncode == 3, fail(proc)
    lines = proc.stdout.splitlines()
    assert lines[:2] == [env['TESTBED_MARK'], str(tmp_path)], proc.stdout
    assert ' inet 198.18.0.2/15 ' in proc.stdout
    assert (tmp_path / 'seen').read_text() == 'here\n'    # the machine's own files
    default = tb(up['prefix'], 'run', '--', 'ip', '-o', '-4', 'addr', 'show')
    assert ' inet 198.18.0.1/15 ' in default.stdout, fail(default)     # host0 by default


def test_status_lists_every_host_with_its_sshd(up):
    proc = tb(up['prefix'], 'status')
    assert proc.returncode == 0, fail(proc)
    for host in up['state']['hosts']:
        assert re.search(r'^  %s +%s +namespace %s .*sshd running \(pid \d+\)'
                         % (host['name'], re.escape(host['address']), host['namespace']),
                         proc.stdout, re.M), proc.stdout


def test_up_again_replaces_it_and_down_twice_leaves_nothing():
    """A second up replaces the first; down removes its namespaces (and a stray one of a
    bigger crashed testbed), its sshds and its state directory, and leaves another prefix's
    namespace alone; a second down has nothing to remove."""
    need_testbed_tools()
    prefix = new_prefix()
    other = prefix + 'h0x'         # not a name of this prefix: down must keep it
    try:
        subprocess.run(['ip', 'netns', 'add', other], check=True)
        first = tb(prefix, 'up', '--hosts', '2', '--no-measure')
        assert first.returncode == 0, fail(first)
        again = tb(prefix, 'up', '--hosts', '2', '--no-measure')
        assert again.returncode == 0, fail(again)
        assert 'removed an earlier testbed of prefix %s: namespace ' % prefix in again.stdout
        sshds = []
        for name in ('host0', 'host1'):
            with open('/run/%stestbed/%s/sshd.pid' % (prefix, name)) as f:
                sshds.append(int(f.read()))
        assert all(cluster._alive(pid) for pid in sshds)
        os.kill(sshds[1], 9)            # status notices a dead sshd
        deadline = time.monotonic() + 10
        while cluster._alive(sshds[1]) and time.monotonic() < deadline:
            time.sleep(0.01)            # polling its exit, with a deadline
        status = tb(prefix, 'status')
        assert status.returncode == 1, fail(status)
        assert re.search(r'^  host1 .* sshd NOT RUNNING$', status.stdout, re.M), fail(status)
        assert re.search(r'^  host0 .* sshd running \(pid %d\)$' % sshds[0], status.stdout,
                         re.M), fail(status)
        subprocess.run(['ip', 'netns', 'add', prefix + 'h7'], check=True)
        down = tb(prefix, 'down')
        assert down.returncode == 0, fail(down)
        for name in ('net', 'h0', 'h1', 'h7'):
            assert 'namespace %s%s' % (prefix, name) in down.stdout, down.stdout
        assert left_over(prefix) == [other]
        assert not any(cluster._alive(pid) for pid in sshds)
        second = tb(prefix, 'down')
        assert (second.returncode, second.stdout) == (
            0, 'testbed %s: nothing to remove\n' % prefix), fail(second)
        status = tb(prefix, 'status')
        assert (status.returncode, status.stdout) == (1, 'testbed %s: down\n' % prefix)
    finally:
        tb(prefix, 'down')
        subprocess.run(['ip', 'netns', 'delete', other])
    assert left_over(prefix) == []
    assert not owned_namespace(other, prefix)


def test_up_stopped_half_way_removes_what_it_made():
    """SIGTERM once host0's sshd runs (its pid file exists; the ssh check and the measurement
    are still to come): up exits 143 and leaves nothing of its prefix."""
    need_testbed_tools()
    prefix = new_prefix()
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    proc = subprocess.Popen([PY, '-m', 'mxnet_ssp.lab.testbed', '--prefix', prefix, 'up',
                             '--hosts', '2'], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pidfile = '/run/%stestbed/host0/sshd.pid' % prefix
        deadline = time.monotonic() + 60
        while not os.path.exists(pidfile) and proc.poll() is None:
            assert time.monotonic() < deadline, 'no %s within 60 s' % pidfile
            time.sleep(0.005)           # polling a file, with a deadline
        assert proc.poll() is None, proc.communicate()
        with open(pidfile) as f:
            sshd = int(f.read() or 0)
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 143, (out, err)
        assert 'stopped by SIGTERM; removing what up made' in err
        assert left_over(prefix) == []
        assert sshd == 0 or not cluster._alive(sshd)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        tb(prefix, 'down')
    assert left_over(prefix) == []
