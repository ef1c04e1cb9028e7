"""The command line: flags, the plan of processes for each launcher mode, and main().

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import argparse
import os
import shlex
import shutil
import signal
import subprocess

from .settings import (ENV_LAUNCH_INDEX, ENV_MPIRUN, ENV_SSH_ARGS, EXIT_FAILED, EXIT_USAGE, PROG,
                       LaunchError, dmlc_env, forwarded_env, local_env, parse_env_items,
                       parse_env_pass, plural, role_settings, say, task_env, validate_settings)
from .hosts import (address_towards, free_port, mpi_argv, mpi_flavor, parse_hostfile, rsync_argv,
                     ssh_argv)
from .supervisor import Spec, Supervisor, describe_exit
from .gpus import GPU_ENV, describe as describe_gpus, plan_gpus, worker_gpu_env


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
    p.add_argument('--gpus-per-worker', type=int, metavar='N',
                   help='local launcher: worker i gets GPUs i*N .. i*N+N-1 (checked against '
                        'mx.context.num_gpus() before anything starts; each worker gets '
                        'CUDA_VISIBLE_DEVICES and MXNET_SSP_GPUS, see docs/launch.md)')
    p.add_argument('--gpu-map', metavar='MAP',
                   help="local launcher: each worker's GPUs, WORKER:GPU[+GPU...] comma-separated "
                        "(e.g. '0:0,1:1'); WORKER is the launch index (MXNET_SSP_LAUNCH_INDEX)")
    p.add_argument('--timeout', type=float, metavar='SECONDS',
                   help='stop the whole job if it runs longer than this (exit code 124)')
    p.add_argument('command', nargs=argparse.REMAINDER,
                   help='the command every process runs, e.g. python train.py --kvstore '
                        'dist_ssp (run directly, not by a shell; %s tells each process its '
                        'launch index within its role)' % ENV_LAUNCH_INDEX)
    return p


def _scheduler_spec(command, environ, settings, uri, port, n, s):
    """The scheduler always runs here, with this machine's whole environment."""
    dmlc = dmlc_env('scheduler', uri, port, n, s)
    dmlc[ENV_LAUNCH_INDEX] = '0'
    return Spec('scheduler', 0, command, local_env(environ, settings['scheduler'], dmlc))


def _plan(args, environ, num_gpus=None):
    """Check everything; return (specs, summary line, rsync jobs); raise LaunchError.

    `num_gpus` (``num_gpus(environ) -> int``) counts the GPUs MXNet sees, for
    ``--gpus-per-worker`` / ``--gpu-map``; default :func:`.gpus.count_gpus`.
    """
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
        say('--p3: DMLC_PS_VAN_TYPE=p3 DMLC_PS_WATER_MARK=10 set in every process, as '
             "MXNet's launcher does (P3 is untested with dist_ssp / dist_dssp)")
    counts = '1 scheduler, %s, %s' % (plural(s, 'server'), plural(n, 'worker'))
    gpu_flags = args.gpus_per_worker is not None or args.gpu_map is not None
    if gpu_flags and args.launcher != 'local':
        raise LaunchError('--gpus-per-worker and --gpu-map are for --launcher local: with '
                          '--launcher %s the GPUs are on other hosts; set CUDA_VISIBLE_DEVICES '
                          'and MXNET_SSP_GPUS there (see docs/launch.md)' % args.launcher)
    if gpu_flags:
        for flag, given in (('--env', common), ('--env-worker', env_worker)):
            clash = [k for k in GPU_ENV if k in given]
            if clash:
                raise LaunchError('%s %s clashes with --gpus-per-worker / --gpu-map, which set '
                                  '%s for each worker' % (flag, clash[0], ' and '.join(GPU_ENV)))

    if args.launcher == 'local':
        for flag, value in (('-H/--hostfile', args.hostfile),
                            ('--sync-dst-dir', args.sync_dst_dir)):
            if value:
                say('warning: %s is ignored by --launcher local' % flag)
        if shutil.which(command[0], path=environ.get('PATH')) is None:
            hint = ('; the command is run directly, not by a shell: for shell syntax use '
                    "sh -c '...'" if '=' in command[0] else '')
            raise LaunchError('command %r not found or not executable (PATH of this '
                              'environment)%s' % (command[0], hint))
        gpus = plan_gpus(args.gpus_per_worker, args.gpu_map, n, environ, num_gpus)
        uri, port = '127.0.0.1', free_port('127.0.0.1')
        specs = [_scheduler_spec(command, environ, settings, uri, port, n, s)]
        for role, count in (('server', s), ('worker', n)):
            for i in range(count):
                dmlc = dmlc_env(role, uri, port, n, s)
                dmlc.update(task_env('local', role, i, n))
                if 'DMLC_NODE_HOST' not in environ and 'DMLC_NODE_HOST' not in settings[role]:
                    dmlc['DMLC_NODE_HOST'] = '127.0.0.1'
                dmlc[ENV_LAUNCH_INDEX] = str(i)
                role_env = settings[role]
                if role == 'worker' and gpus is not None:
                    role_env = dict(role_env, **worker_gpu_env(gpus[i], environ))
                specs.append(Spec(role, i, command, local_env(environ, role_env, dmlc)))
        where = '' if gpus is None else '; %s' % describe_gpus(gpus, environ)
        return specs, 'local job: %s; scheduler at %s:%d%s' % (counts, uri, port, where), []

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
            counts, plural(len(hosts), 'host'), uri, port, workdir)
        return (specs, plan, [(h, rsync_argv(h.name, os.getcwd(), args.sync_dst_dir, h.port,
                                             ssh_args))
                              for h in {h.name: h for h in hosts}.values()]
                if args.sync_dst_dir else [])

    # mpi
    if args.sync_dst_dir:
        say('warning: --sync-dst-dir is ignored by --launcher mpi')
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


def main(argv=None, num_gpus=None):
    """Entry point of ``mxnet-ssp-launch``; returns the exit code.

    `num_gpus` is passed to :func:`_plan` (tests inject a GPU count there).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    environ = dict(os.environ)
    try:
        specs, summary, syncs = _plan(args, environ, num_gpus)
        for host, rsync in syncs:
            if shutil.which('rsync', path=environ.get('PATH')) is None:
                raise LaunchError('--sync-dst-dir needs rsync, which is not installed here')
            say('syncing %s to %s:%s' % (os.getcwd(), host.name, args.sync_dst_dir))
            rc = subprocess.run(rsync, stdin=subprocess.DEVNULL, check=False).returncode
            if rc != 0:
                say('rsync to %s %s — nothing started' % (host.name, describe_exit(rc)))
                return EXIT_FAILED
    except LaunchError as err:
        say('error: %s' % err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        say('interrupted before the job started')
        return 128 + signal.SIGINT
    say(summary)
    return Supervisor(specs, timeout=args.timeout).run()
