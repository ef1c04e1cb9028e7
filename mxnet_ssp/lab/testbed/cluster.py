"""Bringing an emulated cluster up and down: network namespaces, veth pairs, a bridge, tbf
shaping and one sshd per host (see docs/many_hosts.md).

Nothing here touches the root network namespace: the bridge lives in a namespace of its
own (``<prefix>net``), each host in ``<prefix>h<i>``, and every link is created with its
two ends already in those namespaces.  The files are the machine's own (namespaces share
the file system); the only thing each host sees differently is /etc/ssh/ssh_config, over
which the testbed's own config is bind-mounted in a mount namespace private to the host's
processes (``ip netns exec`` makes one; sshd and its sessions inherit it).
"""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

from . import measure
from .settings import (BRIDGE_ADDRESS, NETWORK, PROG, TestbedError, format_rate, host_index,
                       owned_namespace, state_dir, tbf_burst)

SSH_CLIENT_CONFIG = '/etc/ssh/ssh_config'
STATE_FILE = 'testbed.json'
SSHD_CANDIDATES = ('/usr/sbin/sshd', '/usr/local/sbin/sshd')
#: tbf's queue: packets waiting longer than this are dropped
TBF_LATENCY = '50ms'

INSTALL = {'ip': 'apt-get install iproute2', 'tc': 'apt-get install iproute2',
           'sshd': 'apt-get install openssh-server', 'ssh': 'apt-get install openssh-client',
           'ssh-keygen': 'apt-get install openssh-client', 'mount': 'apt-get install mount'}


def say(msg):
    sys.stdout.write(msg + '\n')
    sys.stdout.flush()


def sh(argv, check=True, **kwargs):
    """Run `argv`; raise RuntimeError with its stderr when it fails and `check`."""
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          **kwargs)
    if check and proc.returncode != 0:
        raise RuntimeError('%s failed (exit %d): %s' % (' '.join(shlex.quote(a) for a in argv),
                                                        proc.returncode, proc.stderr.strip()))
    return proc


# ---------------------------------------------------------------------------
# what the machine must have
# ---------------------------------------------------------------------------

def find_sshd(environ=None):
    path = shutil.which('sshd', path=(environ or os.environ).get('PATH'))
    if path:
        return os.path.abspath(path)         # sshd re-executes itself: an absolute path
    for candidate in SSHD_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def preflight(verb, euid=None, which=shutil.which, sshd=None, client_config=SSH_CLIENT_CONFIG,
              ssh=True):
    """Refuse (TestbedError) when the machine lacks what `verb` needs; `ssh` False: an
    ``up`` without sshds (:func:`up`'s ``ssh=False``) needs only ip and tc."""
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        raise TestbedError('user: effective uid %d; accepted: root (uid 0), since network '
                           'namespaces, links and tbf need CAP_SYS_ADMIN and CAP_NET_ADMIN '
                           '(run: sudo %s %s ...)' % (euid, PROG, verb))
    programs = ['ip'] + ((['tc', 'ssh', 'ssh-keygen', 'mount'] if ssh else ['tc'])
                         if verb == 'up' else ['mount'] if verb == 'run' else [])
    for name in programs:
        if which(name) is None:
            raise TestbedError('program %s: not found on PATH; accepted: an installed %s (%s)'
                               % (name, name, INSTALL[name]))
    if verb == 'up' and ssh:
        if (sshd if sshd is not None else find_sshd()) in (None, ''):
            raise TestbedError('program sshd: not found on PATH nor in %s; accepted: an '
                               'installed sshd (%s)' % (', '.join(SSHD_CANDIDATES),
                                                        INSTALL['sshd']))
        if not os.path.isfile(client_config):
            raise TestbedError('ssh client configuration %s: missing; accepted: an existing '
                               'file (openssh-client installs it), over which the testbed '
                               'mounts its own inside the emulated hosts' % client_config)


# ---------------------------------------------------------------------------
# down
# ---------------------------------------------------------------------------

def namespaces():
    out = sh(['ip', 'netns', 'list']).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(name):
    proc = sh(['ip', 'netns', 'pids', name], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit() and int(p) != os.getpid()]


def _alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError):
        return False


def _stop(pids, grace=3.0):
    """SIGTERM `pids`, poll (with a deadline) until they are gone, then SIGKILL the rest."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.02)          # polling process exit with a deadline
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return []
    return pids


def down(prefix, quiet=False):
    """Remove every namespace and the state directory of `prefix`; return what was removed.

    Safe to run any number of times; the processes still running in those namespaces (the
    sshds, jobs started on the hosts) are stopped first.
    """
    removed = []
    mine = [n for n in namespaces() if owned_namespace(n, prefix)]
    for name in mine:
        # again until none is left: a process may fork while the others are stopped (an sshd
        # that daemonizes), and its child would outlive the namespace's name
        deadline = time.monotonic() + 20
        while True:
            pids = namespace_pids(name)
            left = _stop(pids) if pids else []
            if not pids or left or time.monotonic() > deadline:
                break
        if left and not quiet:
            say('%s: processes %s in namespace %s did not end' % (PROG, left, name))
    failed = []
    for name in mine:
        proc = sh(['ip', 'netns', 'delete', name], check=False)
        if proc.returncode == 0:
            removed.append('namespace ' + name)
        else:
            failed.append('namespace %s (%s)' % (name, proc.stderr.strip()))
    directory = state_dir(prefix)
    if os.path.lexists(directory):
        if os.path.isdir(directory) and not os.path.islink(directory):
            shutil.rmtree(directory)
        else:
            os.unlink(directory)
        removed.append('state directory ' + directory)
    if failed:
        raise RuntimeError('could not remove %s%s' % (', '.join(failed), '; removed ' +
                                                       ', '.join(removed) if removed else ''))
    return removed


# ---------------------------------------------------------------------------
# up
# ---------------------------------------------------------------------------

def _write(path, text, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, 'w') as f:
        f.write(text)


def _keygen(path, comment):
    sh(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', path])
    with open(path + '.pub') as f:
        return f.read().strip()


def ssh_config_text(plan, directory):
    lines = ['# %s (prefix %s): mounted over %s inside the emulated hosts'
             % (PROG, plan.prefix, SSH_CLIENT_CONFIG)]
    for h in plan.hosts:
        lines += ['Host %s %s' % (h.name, h.namespace), '    HostName %s' % h.address]
    lines += ['Host *',
              '    IdentityFile %s' % os.path.join(directory, 'id_ed25519'),
              '    IdentitiesOnly yes',
              '    UserKnownHostsFile %s' % os.path.join(directory, 'known_hosts'),
              '    GlobalKnownHostsFile %s' % os.path.join(directory, 'known_hosts'),
              '    StrictHostKeyChecking yes',
              '    LogLevel ERROR', '']
    return '\n'.join(lines)


def sshd_config_text(host, directory):
    hdir = os.path.join(directory, host.name)
    return '\n'.join([
        '# %s: the sshd of %s (%s)' % (PROG, host.name, host.address),
        'ListenAddress %s' % host.address, 'Port 22',
        'HostKey %s' % os.path.join(hdir, 'ssh_host_ed25519_key'),
        'AuthorizedKeysFile %s' % os.path.join(directory, 'authorized_keys'),
        'PidFile %s' % os.path.join(hdir, 'sshd.pid'),
        'UsePAM no', 'PasswordAuthentication no', 'KbdInteractiveAuthentication no',
        'PubkeyAuthentication yes', 'PermitRootLogin prohibit-password',
        'MaxStartups 200', 'MaxSessions 200', 'LogLevel INFO', ''])


def in_host(ssh_config, namespace, argv):
    """argv running `argv` in `namespace` with the testbed's ssh client config in place."""
    return ['ip', 'netns', 'exec', namespace, 'sh', '-c',
            'mount --bind "$0" %s && exec "$@"' % SSH_CLIENT_CONFIG, ssh_config] + list(argv)


#: run in each new namespace before its links exist: no IPv6 (no link-local fe80:: addresses,
#: no neighbour discovery), so the only addresses are the testbed's IPv4 ones and loopback
NO_IPV6 = ('if [ -d /proc/sys/net/ipv6 ]; then echo 1 > /proc/sys/net/ipv6/conf/default/'
           'disable_ipv6 && echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; fi')


def _add_namespace(name):
    sh(['ip', 'netns', 'add', name])
    sh(['ip', 'netns', 'exec', name, 'sh', '-c', NO_IPV6])
    sh(['ip', '-n', name, 'link', 'set', 'lo', 'up'])


def _make_network(plan):
    br, bridge = plan.bridge_namespace, plan.bridge
    prefix_len = NETWORK.prefixlen
    _add_namespace(br)
    sh(['ip', '-n', br, 'link', 'add', bridge, 'type', 'bridge'])
    sh(['ip', '-n', br, 'addr', 'add', '%s/%d' % (BRIDGE_ADDRESS, prefix_len), 'dev', bridge])
    sh(['ip', '-n', br, 'link', 'set', bridge, 'up'])
    for h in plan.hosts:
        burst = tbf_burst(h.rate)
        tbf = ['root', 'tbf', 'rate', '%dbit' % h.rate, 'burst', str(burst),
               'latency', TBF_LATENCY]
        _add_namespace(h.namespace)
        sh(['ip', '-n', br, 'link', 'add', h.link, 'type', 'veth', 'peer', 'name', h.ifname,
            'netns', h.namespace])
        sh(['ip', '-n', br, 'link', 'set', h.link, 'master', bridge])
        sh(['ip', '-n', br, 'link', 'set', h.link, 'up'])
        sh(['ip', '-n', h.namespace, 'addr', 'add', '%s/%d' % (h.address, prefix_len),
            'dev', h.ifname])
        sh(['ip', '-n', h.namespace, 'link', 'set', h.ifname, 'up'])
        # both directions: the host's end shapes what it sends, the bridge's end what it gets
        sh(['tc', '-n', h.namespace, 'qdisc', 'add', 'dev', h.ifname] + tbf)
        sh(['tc', '-n', br, 'qdisc', 'add', 'dev', h.link] + tbf)


def _start_sshds(plan, directory, sshd):
    ssh_config = os.path.join(directory, 'ssh_config')
    os.makedirs('/run/sshd', mode=0o755, exist_ok=True)   # sshd's privilege separation dir
    for h in plan.hosts:
        hdir = os.path.join(directory, h.name)
        _write(os.path.join(hdir, 'sshd_config'), sshd_config_text(h, directory))
        sh(in_host(ssh_config, h.namespace, [sshd, '-f', os.path.join(hdir, 'sshd_config'),
                                             '-E', os.path.join(hdir, 'sshd.log')]))
    # sshd writes its pid file after it listens; poll for it with a deadline
    deadline = time.monotonic() + 20
    for h in plan.hosts:
        pidfile = os.path.join(directory, h.name, 'sshd.pid')
        while not os.path.exists(pidfile):
            if time.monotonic() > deadline:
                log = os.path.join(directory, h.name, 'sshd.log')
                raise RuntimeError('the sshd of %s did not start within 20 s: %s'
                                   % (h.name, _tail(log)))
            time.sleep(0.01)           # polling a file with a deadline


def _tail(path, chars=600):
    try:
        with open(path, errors='replace') as f:
            return f.read()[-chars:].strip()
    except OSError as err:
        return '(no log: %s)' % err


def check_ssh(plan, directory, source=0):
    """ssh from host `source` to every host (including itself), in parallel; raise on failure."""
    ssh_config = os.path.join(directory, 'ssh_config')
    src = plan.host(source)
    procs = [(h, subprocess.Popen(in_host(ssh_config, src.namespace,
                                          ['ssh', '-o', 'BatchMode=yes', '-o',
                                           'ConnectTimeout=10', h.address,
                                           'ip -o -4 addr show']),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
             for h in plan.hosts]
    failures = []
    for h, proc in procs:
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += ' (no answer within 60 s)'
        if proc.returncode != 0 or (' %s/' % h.address) not in out:
            failures.append('%s (%s): exit %d %s' % (h.name, h.address, proc.returncode,
                                                     err.strip()[-300:]))
    if failures:
        raise RuntimeError('ssh from %s failed: %s' % (src.name, '; '.join(failures)))


def up(plan, sshd, measure_links=True, ssh=True, slurm=False):
    """Bring the testbed of `plan` up (after removing any earlier one of its prefix).

    `ssh` False: the hosts and links only, no keys, sshds or hostfiles (the lab runs its
    processes in the hosts' namespaces with ``ip netns exec``, :mod:`.on_host`); `sshd` is
    then not used.

    `slurm`: also a real Slurm cluster on the hosts (:mod:`.slurm`): slurmctld on host0,
    a slurmd on every other host.

    Return 0, or 1 when a link's measured rate is more than 10% off its setting (the testbed
    stays up).  Raises RuntimeError after removing what it made when a step fails.
    """
    stale = down(plan.prefix, quiet=True)
    if stale:
        say('removed an earlier testbed of prefix %s: %s' % (plan.prefix, ', '.join(stale)))
    directory = state_dir(plan.prefix)
    try:
        os.makedirs(directory, mode=0o700)
        if not ssh:
            return _up_without_ssh(plan, directory, measure_links)
        key = _keygen(os.path.join(directory, 'id_ed25519'), '%stestbed' % plan.prefix)
        _write(os.path.join(directory, 'authorized_keys'), key + '\n')
        known = []
        for h in plan.hosts:
            os.makedirs(os.path.join(directory, h.name), mode=0o700)
            pub = _keygen(os.path.join(directory, h.name, 'ssh_host_ed25519_key'),
                          '%s %s' % (h.name, h.address))
            known.append('%s,%s,%s %s' % (h.address, h.name, h.namespace,
                                          ' '.join(pub.split()[:2])))
        _write(os.path.join(directory, 'known_hosts'), '\n'.join(known) + '\n', 0o644)
        _write(os.path.join(directory, 'ssh_config'), ssh_config_text(plan, directory), 0o644)
        workers = [h.address for h in plan.hosts[1:]]
        # addresses only, no comment: MXNet's stock launcher takes every line for a host
        _write(os.path.join(directory, 'hostfile'), '\n'.join(workers) + '\n', 0o644)
        _write(os.path.join(directory, 'hostfile.all'),
               '\n'.join(h.address for h in plan.hosts) + '\n', 0o644)
        _make_network(plan)
        _start_sshds(plan, directory, sshd)
        check_ssh(plan, directory)
        extra = {}
        if slurm:
            from . import slurm as slurm_cluster
            took = slurm_cluster.start(plan, directory)
            extra['slurm_conf'] = slurm_cluster.conf_path(directory)
        state = _save_state(plan, directory, **extra)
        say('%d hosts up (prefix %s), network %s, state in %s'
            % (len(plan.hosts), plan.prefix, NETWORK, directory))
        for h in plan.hosts:
            say('  %-7s %-15s namespace %-12s link %s both ways%s'
                % (h.name, h.address, h.namespace, format_rate(h.rate),
                   '  (login host)' if h.index == 0 else ''))
        say('ssh from host0 to every host: ok (key %s)' % os.path.join(directory, 'id_ed25519'))
        last = len(plan.hosts) - 1
        say('hostfile: %s (%s; %s.all: every host)'
            % (os.path.join(directory, 'hostfile'),
               'host1' if last == 1 else 'host1 .. host%d' % last,
               os.path.join(directory, 'hostfile')))
        say('ssh config: %s' % os.path.join(directory, 'ssh_config'))
        if slurm:
            say('slurm: slurmctld on host0, slurmd on %s, every node idle %.1f s after the '
                'start; SLURM_CONF=%s (set by %s run)'
                % ('host1' if last == 1 else 'host1 .. host%d' % last, took,
                   extra['slurm_conf'], PROG))
        rc = 0
        if measure_links:
            rc = _measure_all(plan, directory, state)
        say('run a command on the login host: %s run -- COMMAND; remove it all: %s down%s'
            % (PROG, PROG, '' if plan.prefix == 'mxssp-' else ' --prefix ' + plan.prefix))
        return rc
    except BaseException:
        try:
            down(plan.prefix, quiet=True)
        except RuntimeError as err:        # the first error is the one to report
            say('%s: %s' % (PROG, err))
        raise


def _save_state(plan, directory, **extra):
    """Write the testbed's state file (what `down`, `run` and `status` read); return it."""
    state = dict({'prefix': plan.prefix, 'bridge_namespace': plan.bridge_namespace,
                  'bridge': plan.bridge, 'bridge_address': str(BRIDGE_ADDRESS),
                  'network': str(NETWORK), 'state_dir': directory}, **extra)
    state['hosts'] = [dict(vars(h)) for h in plan.hosts]
    _write(os.path.join(directory, STATE_FILE), json.dumps(state, indent=1) + '\n', 0o644)
    return state


def _up_without_ssh(plan, directory, measure_links):
    """:func:`up`'s hosts and links, its state file and measurement; no sshd."""
    _make_network(plan)
    state = _save_state(plan, directory, ssh=False)
    say('%d hosts up without sshd (prefix %s), network %s, state in %s'
        % (len(plan.hosts), plan.prefix, NETWORK, directory))
    for h in plan.hosts:
        say('  %-7s %-15s namespace %-12s link %s both ways'
            % (h.name, h.address, h.namespace, format_rate(h.rate)))
    return _measure_all(plan, directory, state) if measure_links else 0


def _measure_all(plan, directory, state):
    say('link rates measured (TCP payload, %.2f s each way against the bridge, again up to %d '
        'times while more than %d%% short; tbf counts frames, so about %.1f%% under the '
        'setting is exact):' % (measure.SECONDS, measure.ATTEMPTS, int(100 * measure.TOLERANCE),
                                100 * (1 - measure.PAYLOAD_SHARE)))
    off = []
    for h in plan.hosts:
        got = measure.measure_host(plan, h)
        state['hosts'][h.index]['measured'] = got
        parts = []
        for direction, label in (('up', '%s -> bridge' % h.name),
                                 ('down', 'bridge -> %s' % h.name)):
            ratio = got[direction] / h.rate
            tries = got['transfers'][direction]
            parts.append('%s %.1f Mbit/s (%.1f%%%s)' % (
                label, got[direction] / 1e6, 100 * ratio,
                '' if tries == 1 else ', best of %d transfers' % tries))
            if not measure.within(got[direction], h.rate):
                off.append('%s %s' % (label, format_rate(int(got[direction]))))
        say('  %-7s setting %-8s %s' % (h.name, format_rate(h.rate), '; '.join(parts)))
    _write(os.path.join(directory, STATE_FILE), json.dumps(state, indent=1) + '\n', 0o644)
    if off:
        say('%s: measured rate more than %d%% off its setting: %s; the testbed is up, but this '
            'machine may be too busy for these rates' % (PROG, int(measure.TOLERANCE * 100),
                                                         ', '.join(off)))
        return 1
    return 0


# ---------------------------------------------------------------------------
# status and run
# ---------------------------------------------------------------------------

def load_state(prefix):
    directory = state_dir(prefix)
    path = os.path.join(directory, STATE_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise TestbedError('testbed %s: not up (no %s); accepted: a prefix whose testbed is up '
                           '(start one with %s up%s)'
                           % (prefix, path, PROG,
                              '' if prefix == 'mxssp-' else ' --prefix ' + prefix)) from None


def status(prefix):
    """Print the state of testbed `prefix`; 0 when it is up and every sshd runs (every host's
    namespace, for a testbed brought up without sshds: the lab's), else 1."""
    present = [n for n in namespaces() if owned_namespace(n, prefix)]
    directory = state_dir(prefix)
    if not os.path.exists(os.path.join(directory, STATE_FILE)):
        if present:
            say('testbed %s: incomplete (namespaces %s, no state in %s); run %s down'
                % (prefix, ', '.join(present), directory, PROG))
        else:
            say('testbed %s: down' % prefix)
        return 1
    state = load_state(prefix)
    healthy = state['bridge_namespace'] in present
    say('testbed %s: %d hosts, network %s, state in %s'
        % (prefix, len(state['hosts']), state['network'], directory))
    ssh = state.get('ssh', True)
    for h in state['hosts']:
        pid = None
        try:
            with open(os.path.join(directory, h['name'], 'sshd.pid')) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            pass
        running = (pid is not None and _alive(pid) or not ssh) and h['namespace'] in present
        healthy = healthy and running
        measured = h.get('measured')
        say('  %-7s %-15s namespace %-12s %-8s %s%s'
            % (h['name'], h['address'], h['namespace'], format_rate(h['rate']),
               ('namespace up (no sshd)' if running else 'NAMESPACE MISSING') if not ssh else
               'sshd running (pid %d)' % pid if running else 'sshd NOT RUNNING',
               '; measured up %.1f / down %.1f Mbit/s' % (measured['up'] / 1e6,
                                                         measured['down'] / 1e6)
               if measured else ''))
    if ssh:
        say('hostfile %s; ssh config %s' % (os.path.join(directory, 'hostfile'),
                                            os.path.join(directory, 'ssh_config')))
    if state.get('slurm_conf'):
        from .slurm import daemon_pids
        daemons = daemon_pids(directory, [h['name'] for h in state['hosts'][1:]])
        down_ones = [name for name, pid in daemons.items() if pid is None or not _alive(pid)]
        healthy = healthy and not down_ones
        say('slurm: %s; SLURM_CONF=%s' % ('%s NOT RUNNING' % ', '.join(down_ones) if down_ones
                                          else 'munged, slurmctld and %d slurmd running'
                                          % (len(daemons) - 2), state['slurm_conf']))
    return 0 if healthy else 1


def run_argv(prefix, host, command, environ=None):
    """argv that runs `command` on emulated host `host` (a name or an address); with Slurm up
    (``up --slurm``) `environ` (a dict, changed) gets its ``SLURM_CONF``."""
    state = load_state(prefix)
    if state.get('slurm_conf') and environ is not None:
        environ['SLURM_CONF'] = state['slurm_conf']
    index = host_index(host, len(state['hosts']), '--host')
    namespace = state['hosts'][index]['namespace']
    if namespace not in namespaces():
        raise TestbedError('--host %s: namespace %s is gone; accepted: a host of a testbed '
                           'that is up (run %s up again)' % (host, namespace, PROG))
    return in_host(os.path.join(state['state_dir'], 'ssh_config'), namespace, command)
