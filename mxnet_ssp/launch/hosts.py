"""Hosts, and the command lines that start processes on them (ssh, rsync, mpirun).

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import shlex
import socket
import subprocess
from dataclasses import dataclass

from .settings import (ENV_MPIRUN, REMOTE_GRACE, SSH_BASE, LaunchError, say)


@dataclass
class Host:
    """A hostfile entry."""
    name: str                  # as given to ssh (may be user@host)
    port: int = None           # ssh port, from host:port

    @property
    def address(self):
        return self.name.rpartition('@')[2]


def parse_hostfile(path):
    """Read a hostfile: ``host``, ``user@host``, ``host:sshport`` or MPI-style
    ``host slots=N`` per line; blank lines and ``#`` comments are skipped."""
    if not path:
        raise LaunchError('no hostfile: give -H/--hostfile with one host per line')
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise LaunchError('hostfile %r does not exist' % path) from None
    except OSError as err:
        raise LaunchError('cannot read hostfile %r: %s' % (path, err.strerror)) from None
    hosts = []
    for num, line in enumerate(lines, 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        entry = line.split()[0]
        port = None
        if entry.count(':') == 1:
            entry, port_s = entry.split(':')
            if not port_s.isdigit() or not 0 < int(port_s) < 65536:
                raise LaunchError('hostfile %r line %d: %r is not HOST or HOST:PORT'
                                  % (path, num, line))
            port = int(port_s)
        if not entry or entry.startswith('-'):
            raise LaunchError('hostfile %r line %d: %r is not a host name' % (path, num, line))
        hosts.append(Host(entry, port))
    if not hosts:
        raise LaunchError('hostfile %r lists no hosts (one host per line expected)' % path)
    return hosts


def free_port(bind_host='127.0.0.1'):
    """An ephemeral TCP port that is free now (bound to port 0, read, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((bind_host, 0))
        return s.getsockname()[1]


def address_towards(host):
    """This machine's IPv4 address that the kernel would use to reach `host`."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))           # UDP connect: picks a route, sends nothing
            return s.getsockname()[0]
    except OSError as err:
        raise LaunchError('cannot find a route from this machine to host %r: %s'
                          % (host, err.strerror or err)) from None


def remote_script(command, env, workdir, kill_grace=REMOTE_GRACE):
    """POSIX sh script run on a remote host for one process.

    It exports `env`, runs `command` in `workdir`, and watches its stdin (a
    pipe from the launcher, through ssh): when that closes because the
    launcher stopped the job or died, the command gets SIGTERM, then SIGKILL.
    """
    cmd = ' '.join(shlex.quote(a) for a in command)
    lines = ['cd %s || exit 1' % shlex.quote(workdir)]
    if env:
        lines.append('export ' + ' '.join('%s=%s' % (k, shlex.quote(str(v)))
                                          for k, v in env.items()))
    lines += [
        'exec 3<&0',
        '%s 3<&- &' % cmd,
        'pid=$!',
        '{ while read -r _; do :; done; kill -TERM $pid; sleep %g; '
        'kill -0 $pid && kill -KILL $pid; } <&3 >/dev/null 2>&1 &' % kill_grace,
        'watch=$!',
        'exec 3<&-',
        'wait $pid 2>/dev/null; rc=$?',      # 2>/dev/null: no 'Terminated' from sh
        'kill $watch 2>/dev/null',
        'exit $rc',
    ]
    return '\n'.join(lines)


def ssh_argv(host, command, env, workdir, port=None, ssh_args=()):
    """argv of the local ssh process that runs `command` on `host`.

    ``ssh -o StrictHostKeyChecking=no -o BatchMode=yes [SSH_ARGS] [-p PORT]
    HOST 'sh -c <script>'`` where the script (see :func:`remote_script`) does
    ``cd WORKDIR; export K=V ...; COMMAND`` with everything shell-quoted.
    """
    argv = list(SSH_BASE) + list(ssh_args)
    if port:
        argv += ['-p', str(port)]
    return argv + [host, 'sh -c ' + shlex.quote(remote_script(command, env, workdir))]


def rsync_argv(host, src, dst, port=None, ssh_args=()):
    """argv of ``rsync -az`` copying directory `src` to `host`:`dst` (created if missing)."""
    rsh = list(SSH_BASE) + list(ssh_args) + (['-p', str(port)] if port else [])
    return ['rsync', '-az', '-e', ' '.join(shlex.quote(a) for a in rsh),
            '--rsync-path', 'mkdir -p %s && rsync' % shlex.quote(dst),
            src.rstrip('/') + '/', '%s:%s/' % (host, dst.rstrip('/') or '/')]


def mpi_flavor(mpirun='mpirun'):
    """'openmpi' or 'mpich' (MPICH, Intel MPI, MVAPICH: Hydra), from ``mpirun --version``."""
    try:
        out = subprocess.run([mpirun, '--version'], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             timeout=30, check=False).stdout.decode(errors='replace')
    except FileNotFoundError:
        raise LaunchError('--launcher mpi: %r not found; install MPI or set %s'
                          % (mpirun, ENV_MPIRUN)) from None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise LaunchError('--launcher mpi: cannot run %r --version: %s' % (mpirun, err)) from None
    low = out.lower()
    if 'open mpi' in low or 'open-mpi' in low or 'openrte' in low:
        return 'openmpi'
    if 'hydra' in low or 'mpich' in low or 'intel' in low:
        return 'mpich'
    say('warning: cannot tell the MPI flavour from "%s --version"; using Open MPI options'
         % mpirun)
    return 'openmpi'


def mpi_argv(flavor, nproc, command, env, hostfile=None, mpirun='mpirun', as_root=False):
    """argv of one mpirun that starts `nproc` copies of `command` with `env`.

    Open MPI: ``mpirun -n N --bind-to none [--allow-run-as-root] [--hostfile F]
    -x K=V ... COMMAND`` (``--bind-to none``: Open MPI would otherwise pin each
    process to one core).  MPICH / Intel MPI (Hydra): ``mpirun -n N [-f F]
    -genv K V ... COMMAND``.
    """
    argv = [mpirun, '-n', str(nproc)]
    if flavor == 'openmpi':
        argv += ['--bind-to', 'none']
        if as_root:
            argv.append('--allow-run-as-root')
        if hostfile:
            argv += ['--hostfile', hostfile]
        for k, v in env.items():
            argv += ['-x', '%s=%s' % (k, v)]
    elif flavor == 'mpich':
        if hostfile:
            argv += ['-f', hostfile]
        for k, v in env.items():
            argv += ['-genv', k, str(v)]
    else:
        raise ValueError('unknown MPI flavour %r: expected openmpi or mpich' % flavor)
    return argv + list(command)
