"""mxnet-ssp-launch: start and supervise an MXNet parameter-server job.

One command is run for every process of the job; the ``DMLC_*`` variables
tell each copy whether it is the scheduler, a server or a worker::

    mxnet-ssp-launch -n 2 -s 1 --launcher local python train.py --kvstore dist_dssp
    mxnet-ssp-launch -n 4 -H hosts.txt python train.py --kvstore dist_ssp
    mxnet-ssp-launch -n 4 -H hosts.txt --launcher mpi python train.py

The flags are those of MXNet's ``tools/launch.py``; this launcher does not use
``dmlc_tracker`` (which fails on Python >= 3.9).  What it adds:

* settings are checked before anything starts: ``MXNET_SSP_STALENESS``,
  ``MXNET_SSP_DSSP_MODE`` and ``MXNET_SSP_TIMEOUT`` (from this environment and
  ``--env*``) and a ``--kvstore X`` / ``--kv-store X`` found in the command;
  a bad value ends the launcher with exit code 2 and one line naming it;
* supervision: when any process fails, or the launcher gets SIGINT / SIGTERM /
  SIGHUP, every process group of the job is sent SIGTERM, then SIGKILL after
  a grace period, and the launcher says which process ended the job.

Launchers:

* ``local``: every process here, each in its own session, with
  ``DMLC_PS_ROOT_URI=127.0.0.1``, a free ephemeral port, ``DMLC_NODE_HOST=127.0.0.1``
  and the launcher's whole environment.
* ``ssh``: the scheduler here; servers and workers round-robin over the
  hostfile's hosts, each through ``ssh -o StrictHostKeyChecking=no -o
  BatchMode=yes HOST 'sh -c SCRIPT'``.  The script cd's to ``--sync-dst-dir``
  (after ``rsync -az`` of the current directory to every host) or to the
  current directory, exports the variables (ssh does not carry the
  environment: ``DMLC_*``, ``DMLC_NODE_HOST=HOST``, ``MXNET_SSP_*``,
  ``OMP_NUM_THREADS``, ``PS_VERBOSE``, ``DMLC_INTERFACE``, ``--env*``) and runs
  the command; when ssh's stdin (a pipe from the launcher) closes, because the
  launcher stops the job or dies, the script stops the command.
  ``DMLC_PS_ROOT_URI`` is the address this machine uses to reach the first host.
* ``mpi``: the scheduler here, then one ``mpirun`` for the servers and one for
  the workers, with the variables passed by ``-x K=V`` (Open MPI) or ``-genv K V``
  (MPICH / Intel MPI), told apart by ``mpirun --version``; ``-H`` is passed on.

Exit codes: 0 every process exited 0; 1 a process failed (or the scheduler or
a server did not exit within 60 s of the last worker); 2 bad usage or
setting, nothing started; 124 ``--timeout`` expired; 128+N stopped by signal N
(130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

Limits: a launcher killed with SIGKILL cannot stop its local processes (ssh
ones still stop, through the closed pipe).  With MXNet's own ``dist_*``
stores a worker that fails after creating its kvstore may hang in ps-lite's
shutdown barrier instead of exiting, so the launcher cannot see it fail:
``--timeout`` bounds such jobs.

This module must stay light: it imports :mod:`mxnet_ssp.config` and the
standard library only, never mxnet.
"""
import argparse
import collections
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from mxnet_ssp.config import (ENV_DSSP_MODE, ENV_STALENESS, ENV_TIMEOUT, NATIVE_DIST_TYPES,
                              STORE_TYPES, ConfigError, check_kvstore_name, from_env)

__all__ = ['main', 'build_parser', 'parse_env_items', 'find_kvstore_names', 'validate_settings',
           'parse_hostfile', 'remote_script', 'ssh_argv', 'rsync_argv', 'mpi_argv',
           'mpi_flavor', 'Spec', 'Supervisor', 'LaunchError']

PROG = 'mxnet-ssp-launch'

#: Launcher-only setting: extra ssh options, split like a shell would, put
#: after ``ssh`` (and in rsync's ``-e``), e.g. ``'-F ./ssh_config'`` or ``'-i key -l user'``.
ENV_SSH_ARGS = 'MXNET_SSP_LAUNCH_SSH_ARGS'
#: Launcher-only setting: the mpirun program to use (default ``mpirun``).
ENV_MPIRUN = 'MXNET_SSP_LAUNCH_MPIRUN'
#: Set by the launcher in every process: its launch index within its role
#: (``worker #1`` has 1).  Not the ps-lite rank, which ps-lite assigns itself.
ENV_LAUNCH_INDEX = 'MXNET_SSP_LAUNCH_INDEX'
LAUNCHER_ONLY_ENV = (ENV_SSH_ARGS, ENV_MPIRUN, ENV_LAUNCH_INDEX)

#: Set by the launcher for each process; --env* may not set them.
RESERVED_ENV = ('DMLC_ROLE', 'DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT',
                'DMLC_NUM_SERVER', 'DMLC_NUM_WORKER', 'DMLC_TASK_ID', 'DMLC_JOB_CLUSTER',
                'DMLC_NUM_ATTEMPT')
#: Passed to remote (ssh / mpi) processes when set here, besides MXNET_SSP_*: what MXNet's
#: dmlc tracker forwards over ssh (but AWS credentials: pass them with --env), and PS_VERBOSE.
FORWARDED_ENV = ('OMP_NUM_THREADS', 'PS_VERBOSE', 'DMLC_INTERFACE', 'KMP_AFFINITY',
                 'LD_LIBRARY_PATH')
FORWARDED_PREFIX = 'MXNET_SSP_'
P3_ENV = (('DMLC_PS_VAN_TYPE', 'p3'), ('DMLC_PS_WATER_MARK', '10'))
KVSTORE_FLAGS = ('--kvstore', '--kv-store', '--kv_store')

KILL_GRACE = 5.0         # seconds between SIGTERM and SIGKILL
REMOTE_GRACE = 2.0       # the same on a remote host (ssh), shorter so it ends within KILL_GRACE
FINISH_TIMEOUT = 60.0    # seconds the scheduler and servers get to exit after the last worker
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 124
SSH_BASE = ('ssh', '-o', 'StrictHostKeyChecking=no', '-o', 'BatchMode=yes')

_ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


class LaunchError(Exception):
    """Bad usage or setting found before anything started (exit code 2)."""


def _say(msg, stream=None):
    stream = sys.stderr if stream is None else stream
    try:
        stream.write('%s: %s\n' % (PROG, msg))
        stream.flush()
    except (OSError, ValueError):
        pass


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def build_parser():
    """The argument parser (flags of MXNet's tools/launch.py, plus --timeout)."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description='Launch an MXNet parameter-server job (1 scheduler, S servers, N workers) '
                    'running COMMAND in every process, and supervise it.',
        epilog='Exit codes: 0 all processes exited 0; 1 a process failed; 2 bad usage or '
               'setting (nothing started); 124 --timeout expired; 130/143 stopped by '
               'SIGINT/SIGTERM.  Extra ssh options: %s (e.g. "-F ssh_config"); mpirun '
               'program: %s.' % (ENV_SSH_ARGS, ENV_MPIRUN))
    p.add_argument('-n', '--num-workers', type=int, required=True,
                   help='number of worker processes')
    p.add_argument('-s', '--num-servers', type=int,
                   help='number of server processes (default: NUM_WORKERS)')
    p.add_argument('-H', '--hostfile',
                   help='file with one host per line (blank lines and # comments skipped); '
                        'needed by --launcher ssh; passed to mpirun by --launcher mpi')
    p.add_argument('--sync-dst-dir',
                   help='ssh launcher: rsync the current directory to this directory on '
                        'every host and run there')
    p.add_argument('--launcher', default='ssh', choices=('local', 'ssh', 'mpi', 'sge', 'yarn'),
                   help='how to start processes (default: ssh); sge and yarn are not supported')
    p.add_argument('--env-server', action='append', default=[], metavar='K:V',
                   help='set K=V for the server processes (repeatable)')
    p.add_argument('--env-worker', action='append', default=[], metavar='K:V',
                   help='set K=V for the worker processes (repeatable)')
    p.add_argument('--env', action='append', default=[], metavar='K[:V]',
                   help='pass variable K (its value here, or V) to every process (repeatable); '
                        'local processes inherit the whole environment anyway')
    p.add_argument('--p3', action='store_true',
                   help='use MXNet\'s P3 van: sets DMLC_PS_VAN_TYPE=p3 DMLC_PS_WATER_MARK=10 '
                        'in every process, as MXNet\'s launcher does')
    p.add_argument('--timeout', type=float, metavar='SECONDS',
                   help='stop the whole job if it runs longer than this (exit code 124)')
    p.add_argument('command', nargs=argparse.REMAINDER,
                   help='the command every process runs, e.g. python train.py --kvstore '
                        'dist_ssp (run directly, not by a shell; %s tells each process its '
                        'launch index within its role)' % ENV_LAUNCH_INDEX)
    return p


def parse_env_items(items, flag):
    """Parse ``K:V`` (or ``K=V``) items of `flag` into a dict, checking names."""
    out = {}
    for item in items:
        cut = min((i for i in (item.find(':'), item.find('=')) if i >= 0), default=-1)
        if cut < 0:
            raise LaunchError('%s %r is not valid: expected NAME:VALUE (e.g. OMP_NUM_THREADS:4)'
                              % (flag, item))
        key, value = item[:cut], item[cut + 1:]
        _check_env_name(key, flag, item)
        out[key] = value
    return out


def _check_env_name(key, flag, item):
    if not _ENV_NAME.match(key):
        raise LaunchError('%s %r is not valid: %r is not an environment variable name'
                          % (flag, item, key))
    if key in RESERVED_ENV:
        raise LaunchError('%s %r is not allowed: %s is set by %s for each process (%s)'
                          % (flag, item, key, PROG, ', '.join(RESERVED_ENV)))


def parse_env_pass(items, environ):
    """Parse ``--env`` items: ``K`` (value from `environ`) or ``K:V`` / ``K=V``."""
    out = {}
    for item in items:
        if ':' in item or '=' in item:
            out.update(parse_env_items([item], '--env'))
            continue
        _check_env_name(item, '--env', item)
        if item in environ:
            out[item] = environ[item]
        else:
            _say('warning: --env %s: %s is not set here; not passed' % (item, item))
    return out


# ---------------------------------------------------------------------------
# Validation of settings (before anything starts)
# ---------------------------------------------------------------------------

def _command_tokens(command):
    for arg in command:
        if any(c.isspace() for c in arg):        # e.g. sh -c "python train.py --kvstore x"
            try:
                yield from shlex.split(arg)
            except ValueError:
                yield from arg.split()
        else:
            yield arg


def find_kvstore_names(command):
    """kvstore names given by ``--kvstore X``, ``--kv-store X`` or ``--kvstore=X`` in `command`."""
    tokens = list(_command_tokens(command))
    names = []
    for i, tok in enumerate(tokens):
        if tok in KVSTORE_FLAGS:
            if i + 1 < len(tokens):
                names.append((tok, tokens[i + 1]))
            else:
                names.append((tok, ''))
        else:
            flag, eq, value = tok.partition('=')
            if eq and flag in KVSTORE_FLAGS:
                names.append((flag, value))
    return names


def validate_settings(command, environ, role_extras=()):
    """Check the command's kvstore names and the MXNET_SSP_* settings.

    Parameters
    ----------
    command : list of str
    environ : mapping
        The launcher's environment.
    role_extras : iterable of (str, dict)
        ``(flag, values)`` set on top of `environ` for some processes, e.g.
        ``('--env-worker', {'MXNET_SSP_STALENESS': '3'})``.

    Returns
    -------
    list of str
        The kvstore types found in the command.

    Raises
    ------
    LaunchError
        With one line naming the setting, its value and the accepted forms.
    """
    stores = []
    for flag, value in find_kvstore_names(command):
        try:
            stores.append(check_kvstore_name(value))
        except ConfigError as err:
            if not value:
                raise LaunchError('%s without a value in the command: expected one of %s'
                                  % (flag, ', '.join(tuple(STORE_TYPES) + NATIVE_DIST_TYPES))
                                  ) from None
            raise LaunchError('%s %s in the command: %s' % (flag, value, err)) from None
    ours = [s for s in dict.fromkeys(stores) if s in STORE_TYPES] or ['dist_dssp']
    settings = (ENV_STALENESS, ENV_DSSP_MODE, ENV_TIMEOUT)
    for store in ours:
        try:
            from_env(store, environ=environ)
        except ConfigError as err:
            raise LaunchError(str(err)) from None
        for flag, extra in role_extras:
            given = {k: v for k, v in extra.items() if k in settings}
            if not given:
                continue
            try:
                from_env(store, environ=dict(environ, **given))
            except ConfigError as err:
                raise LaunchError('%s (set with %s)' % (err, flag)) from None
    return stores


# ---------------------------------------------------------------------------
# Process specs, hosts, argv builders (pure functions)
# ---------------------------------------------------------------------------

@dataclass
class Spec:
    """One process the launcher starts."""
    role: str                  # scheduler, server or worker
    index: int                 # launch index within the role (not the ps-lite rank)
    argv: list
    env: dict = None           # full environment for Popen; None = inherit
    host: str = None           # ssh: the remote host
    stdin_pipe: bool = False   # ssh: keep a pipe on stdin so the remote side sees EOF if we die
    mpirun: int = 0            # mpi: this is one mpirun starting that many processes of the role

    def label(self):
        if self.mpirun:
            return '%ss (mpirun of %d)' % (self.role, self.mpirun)
        if self.role == 'scheduler':
            return 'scheduler'
        return '%s #%d' % (self.role, self.index)

    def describe(self, pid):
        if self.mpirun:
            return '%ss (mpirun of %d; pid %d)' % (self.role, self.mpirun, pid)
        if self.role == 'scheduler':
            return 'scheduler (pid %d)' % pid
        if self.host:
            return '%s #%d (launch index) on %s (local ssh pid %d)' % (self.role, self.index,
                                                                      self.host, pid)
        return '%s #%d (launch index; pid %d)' % (self.role, self.index, pid)


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


def session_pids(sids):
    """{sid: [pid, ...]}: the running (not zombie) processes of the sessions `sids`.

    Read from /proc; None where there is no /proc (then only process groups
    are used to find a job's processes).
    """
    try:
        names = os.listdir('/proc')
    except OSError:
        return None
    if 'self' not in names:
        return None
    out = {sid: [] for sid in sids}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name, 'rb') as f:
                data = f.read()
            fields = data[data.rindex(b')') + 2:].split()   # state ppid pgrp session ...
            state, sid = fields[0], int(fields[3])
        except (OSError, ValueError, IndexError):
            continue
        if sid in out and state not in (b'Z', b'X'):
            out[sid].append(int(name))
    return out


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
    _say('warning: cannot tell the MPI flavour from "%s --version"; using Open MPI options'
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


def dmlc_env(role, root_uri, root_port, num_workers, num_servers):
    """The DMLC_* variables that make a process `role` of the job."""
    return {'DMLC_ROLE': role, 'DMLC_PS_ROOT_URI': root_uri,
            'DMLC_PS_ROOT_PORT': str(root_port), 'DMLC_NUM_SERVER': str(num_servers),
            'DMLC_NUM_WORKER': str(num_workers)}


def task_env(cluster, role, index, num_workers):
    """What MXNet's dmlc tracker adds for a server or worker (see docs/launch.md).

    ``DMLC_JOB_CLUSTER`` names the launcher; ``DMLC_TASK_ID`` numbers the
    workers 0 .. n-1, then the servers n .. n+s-1, as the tracker's local
    mode (scripts shard their data by it before any store exists);
    ``DMLC_NUM_ATTEMPT`` is 0 (the tracker's local mode counts retries in it;
    this launcher never retries).  Under mpi one mpirun starts every process
    of a role, so no task id can be given here: MPI's own rank variables
    (``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``) stand in, as with the tracker.
    """
    env = {'DMLC_JOB_CLUSTER': cluster, 'DMLC_NUM_ATTEMPT': '0'}
    if cluster != 'mpi':
        env['DMLC_TASK_ID'] = str(index if role == 'worker' else num_workers + index)
    return env


def role_settings(common, extra, environ, p3=False):
    """Variables the launcher sets explicitly for one role.

    `common` (``--env``), then `extra` (``--env-server`` / ``--env-worker``);
    P3 variables with ``--p3``; ``OMP_NUM_THREADS`` = its value here, else 1.
    """
    env = dict(common)
    env.update(extra)
    if p3:
        for k, v in P3_ENV:
            env.setdefault(k, v)
    if 'OMP_NUM_THREADS' not in env:
        env['OMP_NUM_THREADS'] = environ.get('OMP_NUM_THREADS') or '1'
    return env


def forwarded_env(environ):
    """Variables of this environment passed to remote processes."""
    return {k: v for k, v in environ.items()
            if (k.startswith(FORWARDED_PREFIX) and k not in LAUNCHER_ONLY_ENV)
            or k in FORWARDED_ENV}


def local_env(environ, settings, dmlc):
    """Full environment of a process on this machine."""
    env = {k: v for k, v in environ.items()
           if k not in RESERVED_ENV and k not in LAUNCHER_ONLY_ENV}
    env.update(settings)
    env.update(dmlc)
    return env


# ---------------------------------------------------------------------------
# Supervision
# ---------------------------------------------------------------------------

@dataclass(eq=False)          # hashable by identity
class _Proc:
    spec: Spec
    popen: subprocess.Popen
    rc: int = None
    thread: threading.Thread = field(default=None, repr=False)

    @property
    def pid(self):
        return self.popen.pid


def describe_exit(rc, spec=None):
    """'exited with code 3' or 'was killed by signal SIGKILL'."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = 'signal %d' % -rc
        return 'was killed by signal %s' % name
    text = 'exited with code %d' % rc
    if spec is not None and spec.host:
        if rc == 255:
            text += ' (ssh could not connect to %s, or the connection broke)' % spec.host
        elif rc > 128:
            try:
                text += ' (the remote shell\'s code for signal %s)' % signal.Signals(rc - 128).name
            except ValueError:
                pass
    return text


class Supervisor:
    """Start processes, watch them, stop them all when one fails or we are signalled.

    Every process is started as the leader of a new session (so of its own
    process group too); stopping it means SIGTERM to everything running in
    that session, then SIGKILL after `grace` seconds (see :meth:`_stop_all`).
    Waiting is event driven: one thread per child blocks in ``wait()`` and
    writes a byte to a pipe; signals reach the same pipe through
    :func:`signal.set_wakeup_fd`; the main thread blocks in ``select``.
    """

    SIGNALS = ('SIGINT', 'SIGTERM', 'SIGHUP')

    def __init__(self, specs, timeout=None, finish_timeout=FINISH_TIMEOUT, grace=KILL_GRACE,
                 stream=None):
        self.specs = list(specs)
        self.timeout = timeout
        self.finish_timeout = finish_timeout
        self.grace = grace
        self.stream = stream
        self.procs = []
        self._exits = collections.deque()
        self._rfd = self._wfd = None
        self._signals = []

    def _say(self, msg):
        _say(msg, self.stream)

    # -- events -------------------------------------------------------------
    def _waiter(self, proc):
        rc = proc.popen.wait()
        self._exits.append((proc, rc))
        try:
            os.write(self._wfd, b'\0')
        except OSError:
            pass

    def _read_events(self, timeout):
        """Wait up to `timeout` seconds (None: forever) for events; collect them."""
        try:
            ready, _, _ = select.select([self._rfd], [], [], timeout)
        except InterruptedError:         # pragma: no cover - PEP 475 retries
            ready = [self._rfd]
        if ready:
            try:
                data = os.read(self._rfd, 4096)
            except BlockingIOError:
                data = b''
            self._signals.extend(b for b in data if b)
        exited = []
        while self._exits:
            proc, rc = self._exits.popleft()
            proc.rc = rc
            exited.append(proc)
        return bool(ready), exited

    def _install_signals(self):
        self._old = {}
        if threading.current_thread() is not threading.main_thread():
            return
        self._old['wakeup'] = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
        for name in self.SIGNALS:
            signum = getattr(signal, name, None)
            if signum is not None:
                self._old[signum] = signal.signal(signum, lambda *a: None)

    def _restore_signals(self):
        for key, old in self._old.items():
            if key == 'wakeup':
                signal.set_wakeup_fd(old)
            else:
                signal.signal(key, old)
        self._old = {}

    # -- running ------------------------------------------------------------
    def run(self):
        """Run the job; return the launcher's exit code."""
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._install_signals()
        try:
            code = self._start()
            if code is None:
                code = self._watch()
            return code
        finally:
            try:
                self._stop_all()
            except BaseException:
                for p in self.procs:          # never leave the job running
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
                raise
            finally:
                self._restore_signals()
                os.close(self._rfd)
                os.close(self._wfd)

    def _start(self):
        for spec in self.specs:
            self._read_events(0)
            code = self._check(())
            if code is not None:
                return code
            try:
                popen = subprocess.Popen(
                    spec.argv, env=spec.env, start_new_session=True,
                    stdin=subprocess.PIPE if spec.stdin_pipe else None)
            except OSError as err:
                self._say('cannot start %s: %s — stopping the job' % (spec.label(), err))
                return EXIT_FAILED
            proc = _Proc(spec, popen)
            proc.thread = threading.Thread(target=self._waiter, args=(proc,), daemon=True,
                                           name='wait-%s-%d' % (spec.role, spec.index))
            self.procs.append(proc)
            proc.thread.start()
        return None

    def _check(self, exited):
        """Exit code if the job must stop now (signal or failure), else None."""
        if self._signals:
            signum = self._signals[0]
            try:
                name = signal.Signals(signum).name
            except ValueError:
                name = 'signal %d' % signum
            self._say('received %s — stopping the job' % name)
            return 128 + signum
        for proc in exited:
            if proc.rc != 0:
                self._say('%s %s — stopping the job'
                          % (proc.spec.describe(proc.pid), describe_exit(proc.rc, proc.spec)))
                return EXIT_FAILED
        return None

    def _watch(self):
        start = time.monotonic()
        deadline = start + self.timeout if self.timeout else None
        finish_deadline = None
        while True:
            running = [p for p in self.procs if p.rc is None]
            if not running:
                self._say('all %d processes exited with code 0' % len(self.procs))
                return 0
            now = time.monotonic()
            limits = [d for d in (deadline, finish_deadline) if d is not None]
            wait = max(0.0, min(limits) - now) if limits else None
            ready, exited = self._read_events(wait)
            code = self._check(exited)
            if code is not None:
                return code
            workers = [p for p in self.procs if p.spec.role == 'worker']
            if finish_deadline is None and all(p.rc == 0 for p in workers):
                finish_deadline = time.monotonic() + self.finish_timeout
            now = time.monotonic()
            if ready or exited:
                continue
            running = [p for p in self.procs if p.rc is None]
            if deadline is not None and now >= deadline:
                self._say('job still running after %g s (--timeout): %s — stopping the job'
                          % (self.timeout, ', '.join(p.spec.describe(p.pid) for p in running)))
                return EXIT_TIMEOUT
            if finish_deadline is not None and now >= finish_deadline and running:
                self._say('all workers exited with code 0 but %s still running %g s later '
                          '— stopping it' % (', '.join(p.spec.describe(p.pid) for p in running),
                                             self.finish_timeout))
                return EXIT_FAILED

    # -- stopping -----------------------------------------------------------
    @staticmethod
    def _signal(proc, members, signum):
        """Send `signum` to `proc`'s process group and to the members of its session
        outside that group (each process gets it once); True if any was sent."""
        sent = False
        targets = [(os.killpg, proc.pid)]
        for pid in members:
            try:
                if os.getpgid(pid) != proc.pid:
                    targets.append((os.kill, pid))
            except OSError:
                pass
        for kill, target in targets:
            try:
                kill(target, signum)
                sent = True
            except (ProcessLookupError, PermissionError):
                pass
        return sent

    def _leftovers(self, procs):
        """{proc: [pids]} of `procs` whose session (or, without /proc, group) still has
        running processes: the child itself or descendants that stayed in its session,
        such as Open MPI's ranks, which mpirun puts in process groups of their own."""
        sessions = session_pids({p.pid for p in procs})
        if sessions is None:
            return {p: [] for p in procs if p.rc is None or self._signal(p, (), 0)}
        return {p: sessions[p.pid] for p in procs if p.rc is None or sessions.get(p.pid)}

    def _wait_children(self, deadline):
        """Wait for the direct children until `deadline`; False if a signal came."""
        while any(p.rc is None for p in self.procs):
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            nsig = len(self._signals)
            self._read_events(left)
            if len(self._signals) > nsig:      # a second Ctrl-C: no more grace
                return False
        return True

    def _wait_leftovers(self, procs, deadline):
        """Poll until no process is left in the sessions of `procs` or `deadline`."""
        left = self._leftovers(procs)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = self._leftovers(left)
        return left

    def _stop_all(self):
        """Stop every process of the job still running.

        Each child was started as the leader of a new session; everything
        still running in those sessions gets SIGTERM (to the process group and
        to each session member; an ssh child instead gets EOF on its stdin,
        see :func:`remote_script`), then SIGKILL if still there after the
        grace, or at once if another signal comes meanwhile.  Processes a
        finished job left behind in its sessions are stopped the same way.
        """
        if not self.procs:
            return
        targets = self._leftovers(self.procs)
        if not targets:
            return
        for p, members in targets.items():
            if p.popen.stdin is not None and p.rc is None:
                # ssh: EOF on its stdin makes the remote script stop the command (SIGTERM,
                # SIGKILL after REMOTE_GRACE) and exit, so ssh ends once the remote side is gone
                self._close_stdin(p)
            else:
                self._signal(p, members, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        patient = self._wait_children(deadline)
        # descendants left in the sessions (mpirun's ranks, a shell's children) get the rest
        left = self._wait_leftovers(targets, deadline if patient else 0)
        killed = [p for p, members in left.items() if self._signal(p, members, signal.SIGKILL)]
        if killed:
            why = ('still running %g s after SIGTERM' % self.grace if patient
                   else 'signalled again while stopping')
            self._say('sent SIGKILL to %s (%s)' % (', '.join(p.spec.label() for p in killed), why))
        self._wait_children(time.monotonic() + 10.0)
        self._wait_leftovers(killed, time.monotonic() + 5.0)
        for p in self.procs:
            self._close_stdin(p)

    @staticmethod
    def _close_stdin(proc):
        if proc.popen.stdin is not None:
            try:
                proc.popen.stdin.close()
            except OSError:
                pass


# ---------------------------------------------------------------------------
# Building the job
# ---------------------------------------------------------------------------

def _plural(n, word):
    return '%d %s%s' % (n, word, '' if n == 1 else 's')


def _scheduler_spec(command, environ, settings, uri, port, n, s):
    """The scheduler always runs here, with this machine's whole environment."""
    dmlc = dmlc_env('scheduler', uri, port, n, s)
    dmlc[ENV_LAUNCH_INDEX] = '0'
    return Spec('scheduler', 0, command, local_env(environ, settings['scheduler'], dmlc))


def _plan(args, environ):
    """Check everything; return (specs, summary line, rsync jobs); raise LaunchError."""
    if args.launcher in ('sge', 'yarn'):
        raise LaunchError('--launcher %s is not supported by %s; use --launcher ssh (with '
                          '-H HOSTFILE), --launcher mpi, or --launcher local, or start the '
                          'processes yourself with DMLC_ROLE, DMLC_PS_ROOT_URI, '
                          'DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER and DMLC_NUM_WORKER set'
                          % (args.launcher, PROG))
    command = list(args.command)
    if command and command[0] == '--':
        command = command[1:]
    if not command:
        raise LaunchError('no command given: put the command every process runs after the '
                          'options, e.g. %s -n 2 --launcher local python train.py' % PROG)
    n = args.num_workers
    s = n if args.num_servers is None else args.num_servers
    if n < 1:
        raise LaunchError('-n/--num-workers %d is not valid: expected at least 1' % n)
    if s < 1:
        raise LaunchError('-s/--num-servers %d is not valid: expected at least 1' % s)
    if args.timeout is not None and not (args.timeout > 0 and args.timeout < float('inf')):
        raise LaunchError('--timeout %s is not valid: expected a number of seconds > 0'
                          % args.timeout)
    common = parse_env_pass(args.env, environ)
    env_server = parse_env_items(args.env_server, '--env-server')
    env_worker = parse_env_items(args.env_worker, '--env-worker')
    validate_settings(command, environ, [('--env', common), ('--env-server', env_server),
                                         ('--env-worker', env_worker)])
    settings = {'scheduler': role_settings(common, {}, environ, args.p3),
                'server': role_settings(common, env_server, environ, args.p3),
                'worker': role_settings(common, env_worker, environ, args.p3)}
    if args.p3:
        _say('--p3: DMLC_PS_VAN_TYPE=p3 DMLC_PS_WATER_MARK=10 set in every process, as '
             "MXNet's launcher does (P3 is untested with dist_ssp / dist_dssp)")
    counts = '1 scheduler, %s, %s' % (_plural(s, 'server'), _plural(n, 'worker'))

    if args.launcher == 'local':
        for flag, value in (('-H/--hostfile', args.hostfile),
                            ('--sync-dst-dir', args.sync_dst_dir)):
            if value:
                _say('warning: %s is ignored by --launcher local' % flag)
        if shutil.which(command[0], path=environ.get('PATH')) is None:
            hint = ('; the command is run directly, not by a shell: for shell syntax use '
                    "sh -c '...'" if '=' in command[0] else '')
            raise LaunchError('command %r not found or not executable (PATH of this '
                              'environment)%s' % (command[0], hint))
        uri, port = '127.0.0.1', free_port('127.0.0.1')
        specs = [_scheduler_spec(command, environ, settings, uri, port, n, s)]
        for role, count in (('server', s), ('worker', n)):
            for i in range(count):
                dmlc = dmlc_env(role, uri, port, n, s)
                dmlc.update(task_env('local', role, i, n))
                if 'DMLC_NODE_HOST' not in environ and 'DMLC_NODE_HOST' not in settings[role]:
                    dmlc['DMLC_NODE_HOST'] = '127.0.0.1'
                dmlc[ENV_LAUNCH_INDEX] = str(i)
                specs.append(Spec(role, i, command, local_env(environ, settings[role], dmlc)))
        return specs, 'local job: %s; scheduler at %s:%d' % (counts, uri, port), []

    if args.launcher == 'ssh':
        if not args.hostfile:
            raise LaunchError('--launcher ssh (the default) needs -H/--hostfile with one host '
                              'per line; use --launcher local to run every process here')
        hosts = parse_hostfile(args.hostfile)
        try:
            ssh_args = shlex.split(environ.get(ENV_SSH_ARGS, ''))
        except ValueError as err:
            raise LaunchError('%s=%r is not valid: %s' % (ENV_SSH_ARGS, environ[ENV_SSH_ARGS],
                                                          err)) from None
        if shutil.which('ssh', path=environ.get('PATH')) is None:
            raise LaunchError('--launcher ssh: the ssh program is not installed here')
        uri, port = address_towards(hosts[0].address), free_port('')
        workdir = args.sync_dst_dir or os.getcwd()
        specs = [_scheduler_spec(command, environ, settings, uri, port, n, s)]
        base = forwarded_env(environ)
        for role, count in (('server', s), ('worker', n)):
            for i in range(count):
                host = hosts[i % len(hosts)]
                env = dict(base)
                env.update(settings[role])
                env.update(dmlc_env(role, uri, port, n, s))
                env.update(task_env('ssh', role, i, n))
                env.setdefault('DMLC_NODE_HOST', host.address)
                env[ENV_LAUNCH_INDEX] = str(i)
                specs.append(Spec(role, i, ssh_argv(host.name, command, env, workdir,
                                                    host.port, ssh_args),
                                  host=host.name, stdin_pipe=True))
        plan = 'ssh job: %s on %s; scheduler here at %s:%d; working directory %s' % (
            counts, _plural(len(hosts), 'host'), uri, port, workdir)
        return (specs, plan, [(h, rsync_argv(h.name, os.getcwd(), args.sync_dst_dir, h.port,
                                             ssh_args))
                              for h in {h.name: h for h in hosts}.values()]
                if args.sync_dst_dir else [])

    # mpi
    if args.sync_dst_dir:
        _say('warning: --sync-dst-dir is ignored by --launcher mpi')
    mpirun = environ.get(ENV_MPIRUN) or 'mpirun'
    if args.hostfile:
        hosts = parse_hostfile(args.hostfile)
        uri = address_towards(hosts[0].address)
    else:
        uri = '127.0.0.1'
    flavor = mpi_flavor(mpirun)
    port = free_port('127.0.0.1' if uri.startswith('127.') else '')
    specs = [_scheduler_spec(command, environ, settings, uri, port, n, s)]
    base = forwarded_env(environ)
    for role, count in (('server', s), ('worker', n)):
        env = dict(base)
        env.update(settings[role])
        env.update(dmlc_env(role, uri, port, n, s))
        env.update(task_env('mpi', role, 0, n))
        if uri.startswith('127.') and 'DMLC_NODE_HOST' not in env:
            env['DMLC_NODE_HOST'] = '127.0.0.1'
        argv = mpi_argv(flavor, count, command, env, args.hostfile, mpirun,
                        as_root=hasattr(os, 'geteuid') and os.geteuid() == 0)
        specs.append(Spec(role, 0, argv, local_env(environ, {}, {}), mpirun=count))
    where = 'hosts of %s' % args.hostfile if args.hostfile else 'this machine'
    return specs, 'mpi job (%s): %s on %s; scheduler here at %s:%d' % (
        flavor, counts, where, uri, port), []


def main(argv=None):
    """Entry point of ``mxnet-ssp-launch``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    environ = dict(os.environ)
    try:
        specs, summary, syncs = _plan(args, environ)
        for host, rsync in syncs:
            if shutil.which('rsync', path=environ.get('PATH')) is None:
                raise LaunchError('--sync-dst-dir needs rsync, which is not installed here')
            _say('syncing %s to %s:%s' % (os.getcwd(), host.name, args.sync_dst_dir))
            rc = subprocess.run(rsync, stdin=subprocess.DEVNULL, check=False).returncode
            if rc != 0:
                _say('rsync to %s %s — nothing started' % (host.name, describe_exit(rc)))
                return EXIT_FAILED
    except LaunchError as err:
        _say('error: %s' % err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say('interrupted before the job started')
        return 128 + signal.SIGINT
    _say(summary)
    return Supervisor(specs, timeout=args.timeout).run()


if __name__ == '__main__':
    sys.exit(main())
