"""``--launcher ssh``: the scheduler here, servers and workers through ssh on the
hostfile's hosts, after an optional rsync of this directory to every host.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import math
import os
import shlex
import shutil
import subprocess
import sys
import time

from ..config import ENV_REJOIN, liveness_timeout, read
from .hosts import address_towards, free_port, parse_hostfile
from .job import Plan
from .settings import (ENV_LAUNCH_INDEX, ENV_SSH_ARGS, EXIT_FAILED, REMOTE_GRACE, SSH_BASE,
                       SSH_CONNECT_TIMEOUT, LaunchError, forwarded_env, plural, say, task_env)
from .supervisor import Spec, describe_exit
from ..core.env_names import DMLC_INTERFACE, DMLC_NODE_HOST


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


def alive_args(liveness):
    """ssh options that end the local ssh process (exit 255) when its host stops answering:
    ``ServerAliveInterval`` = ceil(`liveness` / 3) s, 3 unanswered, so about 4/3 of the
    liveness bound (``MXNET_SSP_LIVENESS_TIMEOUT``) after the host went silent, later than
    the job's own processes decide (docs/elastic.md, "Lost hosts").  None for 0 (off)."""
    if not liveness:
        return []
    return ['-o', 'ServerAliveInterval=%d' % max(1, math.ceil(liveness / 3)),
            '-o', 'ServerAliveCountMax=3']


def ssh_argv(host, command, env, workdir, port=None, ssh_args=(), alive=()):
    """argv of the local ssh process that runs `command` on `host`.

    ``ssh -o BatchMode=yes [SSH_ARGS] [ALIVE] [-p PORT]
    HOST 'sh -c <script>'`` where the script (see :func:`remote_script`) does
    ``cd WORKDIR; export K=V ...; COMMAND`` with everything shell-quoted; `alive`: see
    :func:`alive_args`.
    """
    argv = list(SSH_BASE) + list(ssh_args) + list(alive)
    if port:
        argv += ['-p', str(port)]
    return argv + [host, 'sh -c ' + shlex.quote(remote_script(command, env, workdir))]


def rsync_argv(host, src, dst, port=None, ssh_args=()):
    """argv of ``rsync -az`` copying directory `src` to `host`:`dst` (created if missing)."""
    rsh = list(SSH_BASE) + list(ssh_args) + (['-p', str(port)] if port else [])
    return ['rsync', '-az', '-e', ' '.join(shlex.quote(a) for a in rsh),
            '--rsync-path', 'mkdir -p %s && rsync' % shlex.quote(dst),
            src.rstrip('/') + '/', '%s:%s/' % (host, dst.rstrip('/') or '/')]


PYTHONS = ('python', 'python3')


def remote_python(command, environ):
    """The interpreter that runs a command starting with a bare ``python`` / ``python3`` on the
    other hosts: the active virtual environment's (``VIRTUAL_ENV``'s, else the launcher's own
    when it runs in one), by absolute path, since over ssh ``python`` is the host's system
    one; None for any other command or without a virtual environment."""
    if not command or command[0] not in PYTHONS:
        return None
    venv = environ.get('VIRTUAL_ENV')
    if venv:
        path = os.path.join(venv, 'bin', command[0])
        if os.access(path, os.X_OK):
            return path
    if sys.prefix != sys.base_prefix and os.access(sys.executable, os.X_OK):
        return sys.executable
    return None


def ssh_settings(job):
    """(hosts, extra ssh options) of an ssh `job`; raise LaunchError."""
    if not job.hostfile:
        raise LaunchError('--launcher ssh (the default) needs -H/--hostfile with one host '
                          'per line; use --launcher local to run every process here')
    environ = job.environ
    hosts = parse_hostfile(job.hostfile) if job.hosts is None else list(job.hosts)
    try:
        ssh_args = shlex.split(read(ENV_SSH_ARGS, environ))
    except ValueError as err:
        raise LaunchError('%s=%r is not valid: %s' % (ENV_SSH_ARGS, environ[ENV_SSH_ARGS],
                                                      err)) from None
    if shutil.which('ssh', path=environ.get('PATH')) is None:
        raise LaunchError('--launcher ssh: the ssh program is not installed here')
    return hosts, ssh_args


def reach_hosts(hosts, ssh_args, command='true', timeout=SSH_CONNECT_TIMEOUT):
    """Run `command` on every :class:`.hosts.Host` of `hosts` over ssh, all at once
    (``ConnectTimeout`` `timeout`, after the user's `ssh_args`: ssh takes the first value
    given, so theirs wins).  Returns {host name: None if it exited 0, else (ssh's exit code,
    its last line of stderr)}; a host that takes no connection is given up `timeout` + 5 s
    after the start (code None, 'no answer within ... s')."""
    procs = []
    for host in {h.name: h for h in hosts}.values():
        argv = list(SSH_BASE) + list(ssh_args) + ['-o', 'ConnectTimeout=%d' % timeout]
        if host.port:
            argv += ['-p', str(host.port)]
        try:
            procs.append((host, subprocess.Popen(argv + [host.name, command],
                                                 stdin=subprocess.DEVNULL,
                                                 stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.PIPE, text=True,
                                                 start_new_session=True)))
        except OSError as err:
            procs.append((host, err))
    deadline = time.monotonic() + timeout + 5
    out = {}
    for host, proc in procs:
        if isinstance(proc, OSError):
            out[host.name] = (None, 'cannot run ssh: %s' % proc)
            continue
        try:
            _, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[host.name] = (None, 'no answer within %d s' % (timeout + 5))
            continue
        lines = [line for line in (err or '').strip().splitlines() if line.strip()]
        out[host.name] = None if proc.returncode == 0 else (
            proc.returncode, lines[-1] if lines else '')
    return out


def check_hosts(job, timeout=SSH_CONNECT_TIMEOUT, stream=None):
    """Before anything starts: ssh to every host of an ssh `job` at once (``ConnectTimeout``
    `timeout`) and run ``true`` there (``test -x`` of the interpreter :func:`remote_python`
    picked).  Return 0, or EXIT_FAILED after one line per host that failed, naming it and
    ssh's error; a host that takes no connection is given up `timeout` + 5 s after the start.
    """
    hosts, ssh_args = ssh_settings(job)
    python = remote_python(job.command, job.environ)
    probe = 'test -x %s' % shlex.quote(python) if python else 'true'
    failed = []
    for name, result in reach_hosts(hosts, ssh_args, probe, timeout).items():
        if result is None:
            continue
        code, why = result
        if code is None or code == 255 or code < 0:
            failed.append('host %s takes no ssh connection: %s' % (name, why or
                                                              'ssh exited with code 255'))
        elif python:
            failed.append('host %s has no %s (the interpreter "%s" stands for over ssh: give '
                          'the one to use by its path)' % (name, python, job.command[0]))
        else:
            failed.append('host %s: ssh ran "true" there and it exited with code %d: %s'
                          % (name, code, why))
    for line in failed:
        say('%s — nothing started' % line, stream)
    return EXIT_FAILED if failed else 0


def plan_ssh(job):
    """The :class:`.job.Plan` of `job` over ssh; raise LaunchError.

    Servers and workers go round-robin over the hostfile's hosts; each Spec is a
    local ssh process (see :func:`ssh_argv`) with a pipe on its stdin.  With
    ``--sync-dst-dir`` the plan's syncs copy the current directory to each distinct
    host (see :func:`run_syncs`); nothing is copied here.
    """
    environ = job.environ
    hosts, ssh_args = ssh_settings(job)
    command = list(job.command)
    python = remote_python(command, environ)
    if python:
        say('ssh: "%s" runs %s on every host (the active virtual environment\'s); to run '
            'another, give its path, e.g. /usr/bin/python3' % (command[0], python))
        command[0] = python
    uri, port = address_towards(hosts[0].address), free_port('')
    alive = alive_args(liveness_timeout(environ))
    workdir = job.sync_dst_dir or os.getcwd()
    specs = [job.scheduler_spec(uri, port)]
    base = forwarded_env(environ)
    for role, count in (('server', job.num_servers), ('worker', job.num_workers)):
        for i in range(count):
            host = hosts[i % len(hosts)]
            env = dict(base)
            env.update(job.settings[role])
            env.update(job.dmlc_env(role, uri, port))
            env.update(task_env('ssh', role, i, job.num_workers))
            if not env.get(DMLC_INTERFACE):
                # ps-lite binds and advertises DMLC_NODE_HOST before DMLC_INTERFACE: with
                # DMLC_INTERFACE given, each host's address on that interface is used
                env.setdefault(DMLC_NODE_HOST, host.address)
            env[ENV_LAUNCH_INDEX] = str(i)
            spec = Spec(role, i, ssh_argv(host.name, command, env, workdir, host.port,
                                          ssh_args, alive), host=host.name, stdin_pipe=True)
            if role == 'worker' and job.max_restarts:     # its replacement, on the same host
                spec.restart = Spec(role, i, ssh_argv(host.name, command,
                                                      dict(env, **{ENV_REJOIN: '1'}), workdir,
                                                      host.port, ssh_args, alive),
                                    host=host.name, stdin_pipe=True)
            specs.append(spec)
    summary = 'ssh job: %s on %s; scheduler here at %s:%d; working directory %s' % (
        job.counts(), plural(len(hosts), 'host'), uri, port, workdir)
    syncs = []
    if job.sync_dst_dir:
        syncs = [(h, rsync_argv(h.name, os.getcwd(), job.sync_dst_dir, h.port, ssh_args))
                 for h in {h.name: h for h in hosts}.values()]
    return Plan(specs, summary, syncs)


def run_syncs(syncs, src, dst, environ):
    """Run a plan's rsync steps one host after another, before any process starts.

    Blocking.  Return 0, or EXIT_FAILED once an rsync fails (the ones after it are
    not run); raise LaunchError when rsync is not installed.  `src` and `dst` only
    name the directories in the messages.
    """
    for host, rsync in syncs:
        if shutil.which('rsync', path=environ.get('PATH')) is None:
            raise LaunchError('--sync-dst-dir needs rsync, which is not installed here')
        say('syncing %s to %s:%s' % (src, host.name, dst))
        rc = subprocess.run(rsync, stdin=subprocess.DEVNULL, check=False).returncode
        if rc != 0:
            say('rsync to %s %s — nothing started' % (host.name, describe_exit(rc)))
            return EXIT_FAILED
    return 0
