"""The command line: the flags, the checks every launcher shares, and main().

:func:`check_job` checks the flags and settings into a :class:`.job.Job`; :func:`plan`
hands it to its launcher's planner (:mod:`.local`, :mod:`.ssh`, :mod:`.mpi`), whose
:class:`.job.Plan` :func:`main` runs under a :class:`.supervisor.Supervisor` (and starts
again after a failure with ``--job-restarts``, :mod:`.restarts`).

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import argparse
import os
import signal

#: ps-lite's heartbeats (read by the stock wheel, docs/elastic.md): set by --max-restarts
HEARTBEAT_INTERVAL = 'PS_HEARTBEAT_INTERVAL'
HEARTBEAT_TIMEOUT = 'PS_HEARTBEAT_TIMEOUT'

from .._cli import add_version
from ..config import ENV_ELASTIC, ENV_RESTART, ConfigError, parse_elastic, settings_environ
from .gpus import GPU_ENV
from .job import Job
from .local import plan_local
from .mpi import plan_mpi
from .slurm import plan_slurm
from .settings import (ENV_LAUNCH_INDEX, ENV_MPIRUN, ENV_SSH_ARGS, EXIT_USAGE, PROG, LaunchError,
                       parse_env_items, parse_env_pass, role_settings, say, unknown_settings,
                       validate_settings)
from .ssh import check_hosts, plan_ssh, run_syncs
from .command_checks import check_command as run_command_checks
from .restarts import MAX_JOB_RESTARTS, attempt_job, run_job
from .supervisor import Supervisor


def build_parser():
    """The argument parser (flags of MXNet's tools/launch.py, plus --timeout)."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description='Launch an MXNet parameter-server job (1 scheduler, S servers, N workers) '
                    'running COMMAND in every process, and supervise it.',
        epilog='Exit codes: 0 all processes exited 0; 1 a process failed (ssh: or a host '
               'took no login, nothing started); 2 bad usage or '
               'setting (nothing started); 124 --timeout expired; 130/143 stopped by '
               'SIGINT/SIGTERM.  Extra ssh options: %s (e.g. "-F ssh_config"); mpirun '
               'program: %s.' % (ENV_SSH_ARGS, ENV_MPIRUN))
    add_version(p)
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
    p.add_argument('--launcher', default='ssh',
                   choices=('local', 'ssh', 'mpi', 'slurm', 'sge', 'yarn'),
                   help='how to start processes (default: ssh); slurm: inside an sbatch or '
                        'salloc allocation, one srun step per process; sge and yarn are not '
                        'supported')
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
    p.add_argument('--elastic', metavar='MIN_WORKERS',
                   help='elastic mode (docs/elastic.md): a lost worker does not end the job '
                        'while at least MIN_WORKERS workers are left; sets %s in every '
                        'process (default: that variable here, else off: fail-fast)'
                        % ENV_ELASTIC)
    p.add_argument('--max-restarts', type=int, default=0, metavar='N',
                   help='with --elastic: restart a lost worker N times in the whole job (0 or '
                        '1: MXNet 1.9.1\'s ps-lite takes back one replacement per job); it '
                        'takes the dead worker\'s rank and rejoins (docs/elastic.md)')
    p.add_argument('--job-restarts', type=int, default=0, metavar='N',
                   help='when a server, the scheduler or (outside --elastic) a worker fails, '
                        'stop every process and start the whole job again, at most N times '
                        '(default 0); every process gets %s (0, 1, ...) and mxnet-ssp-train '
                        'resumes from its latest checkpoint (docs/faults.md); ssh: an '
                        'unreachable host is left out for a spare of the hostfile'
                        % ENV_RESTART)
    p.add_argument('--timeout', type=float, metavar='SECONDS',
                   help='stop the whole job if it runs longer than this, all its starts '
                        'together (exit code 124)')
    p.add_argument('command', nargs=argparse.REMAINDER,
                   help='the command every process runs, e.g. python train.py --kvstore '
                        'dist_ssp (run directly, not by a shell; %s tells each process its '
                        'launch index within its role)' % ENV_LAUNCH_INDEX)
    return p


def check_job(args, environ):
    """The :class:`.job.Job` of parsed `args` in `environ`; raise LaunchError.

    Every check that does not depend on the launcher, in this order: the launcher is
    supported, a command is given, the counts, ``--timeout``, the ``--env*`` items, the
    settings (:func:`.settings.validate_settings`), the GPU flags.  Each launcher's
    planner makes its own checks after these.  Nothing is started.
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
    if not 0 <= args.job_restarts <= MAX_JOB_RESTARTS:
        raise LaunchError('--job-restarts %d is not valid: expected an integer from 0 to %d'
                          % (args.job_restarts, MAX_JOB_RESTARTS))
    if args.timeout is not None and not (args.timeout > 0 and args.timeout < float('inf')):
        raise LaunchError('--timeout %s is not valid: expected a number of seconds > 0'
                          % args.timeout)
    common = parse_env_pass(args.env, environ)
    env_server = parse_env_items(args.env_server, '--env-server')
    env_worker = parse_env_items(args.env_worker, '--env-worker')
    elastic = _elastic(args, n, common, env_server, env_worker, environ)
    validate_settings(command, environ, [('--env', common), ('--env-server', env_server),
                                         ('--env-worker', env_worker)], n)
    settings = {'scheduler': role_settings(common, {}, environ, args.p3),
                'server': role_settings(common, env_server, environ, args.p3),
                'worker': role_settings(common, env_worker, environ, args.p3)}
    if args.p3:
        say('--p3: DMLC_PS_VAN_TYPE=p3 DMLC_PS_WATER_MARK=10 set in every process, as '
            "MXNet's launcher does (P3 is untested with dist_ssp / dist_dssp)")
    if elastic:
        for role in settings.values():
            role[ENV_ELASTIC] = str(elastic)
    restart_delay = _restarts(args, elastic, settings, environ)
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
    return Job(args.launcher, command, n, s, environ, settings, args.hostfile,
               args.sync_dst_dir, args.gpus_per_worker, args.gpu_map, elastic,
               args.max_restarts, restart_delay, args.job_restarts)


def _restarts(args, elastic, settings, environ):
    """--max-restarts: checked; ps-lite's heartbeats set in every process (they let the
    scheduler see the dead worker and take its replacement); returns the seconds to wait
    after a death before the restart (None without restarts)."""
    n = args.max_restarts
    if n == 0:
        return None
    if not 0 <= n <= 1:
        raise LaunchError('--max-restarts %d is not valid: expected 0 or 1 (MXNet 1.9.1\'s '
                          'ps-lite takes back one replacement per job; a second one aborts its '
                          'scheduler, docs/elastic.md)' % n)
    if not elastic:
        raise LaunchError('--max-restarts %d needs --elastic MIN_WORKERS: without it a lost '
                          'worker ends the job' % n)
    values = {}
    for name, default in ((HEARTBEAT_INTERVAL, '1'), (HEARTBEAT_TIMEOUT, '5')):
        given = settings['worker'].get(name, environ.get(name, default))
        try:
            values[name] = int(given)
        except ValueError:
            values[name] = 0
        if values[name] < 1:
            raise LaunchError('%s=%r is not valid with --max-restarts: expected whole seconds '
                              '>= 1' % (name, given))
    if values[HEARTBEAT_INTERVAL] >= values[HEARTBEAT_TIMEOUT]:
        raise LaunchError('%s=%d must be below %s=%d, or ps-lite counts live nodes as dead'
                          % (HEARTBEAT_INTERVAL, values[HEARTBEAT_INTERVAL], HEARTBEAT_TIMEOUT,
                             values[HEARTBEAT_TIMEOUT]))
    for role in settings.values():
        for name, value in values.items():
            role[name] = str(value)
    # the scheduler counts a node dead once its last heartbeat is older than the timeout
    # (whole seconds); a replacement registering earlier is ignored by ps-lite for ever
    return values[HEARTBEAT_TIMEOUT] + values[HEARTBEAT_INTERVAL] + 2


def _elastic(args, num_workers, common, env_server, env_worker, environ):
    """The job's least number of workers (``--elastic``, else ``MXNET_SSP_ELASTIC``), 0 if off."""
    for flag, given in (('--env-server', env_server), ('--env-worker', env_worker)):
        if ENV_ELASTIC in given:
            raise LaunchError('%s %s: elastic mode must be the same in every process; use '
                              '--elastic MIN_WORKERS' % (flag, ENV_ELASTIC))
    if args.elastic is not None:
        value, source = args.elastic, '--elastic'
    else:
        value, source = common.get(ENV_ELASTIC, environ.get(ENV_ELASTIC)), ENV_ELASTIC
    try:
        least = parse_elastic(value, num_workers, source=source)
    except ConfigError as err:
        raise LaunchError(str(err)) from None
    if least and args.launcher == 'mpi':
        raise LaunchError('%s %s is not supported with --launcher mpi: one mpirun runs every '
                          'worker and ends them all when one fails; use --launcher ssh or local'
                          % (source, value))
    return least


def plan(args, environ=None, num_gpus=None):
    """The :class:`.job.Plan` of parsed `args`: :func:`check_job`, then the launcher's
    planner; raise LaunchError.  Nothing is started (ssh syncs are only planned).

    `environ` defaults to a copy of ``os.environ``; `num_gpus` goes to
    :func:`.local.plan_local` (tests inject a GPU count there).
    """
    return plan_job(check_job(args, dict(os.environ) if environ is None else environ), num_gpus)


def plan_job(job, num_gpus=None):
    """The :class:`.job.Plan` of a checked `job` by its launcher's planner; raise LaunchError."""
    if job.launcher == 'local':
        return plan_local(job, num_gpus)
    if job.launcher == 'ssh':
        return plan_ssh(job)
    if job.launcher == 'slurm':
        return plan_slurm(job)
    return plan_mpi(job)


def check_settings_file(job):
    """The job's settings file (:func:`mxnet_ssp.config.settings_environ`: ``mxnet_ssp.env`` in this
    directory, or ``MXNET_SSP_SETTINGS``), checked like every process of the job will read
    it; raise LaunchError.  Its values are not passed on: each process reads the file.
    Returns the environment over the file (a :class:`mxnet_ssp.config.SettingsView`)."""
    try:
        merged = settings_environ(job.environ)
    except ConfigError as err:
        raise LaunchError(str(err)) from None
    if merged.path is not None:
        validate_settings(job.command, merged, num_workers=job.num_workers)
        for name in sorted(merged.overridden):
            line, value = merged.overridden[name]
            say('note: %s=%s from the environment overrides %s=%s (%s line %d) in the '
                'processes that get this environment' % (name, job.environ[name], name,
                                                         value, merged.path, line))
    return merged


def warn_unknown_settings(job):
    """One warning for each MXNET_SSP_* name of the job's environment or --env* that
    mxnet-ssp does not read (with the setting it may be a misspelling of)."""
    names = dict(job.environ)
    for role in job.settings.values():
        names.update(role)
    for name, close in unknown_settings(names):
        say('warning: %s is not a setting of mxnet-ssp; the processes ignore it%s'
            % (name, ' (did you mean %s?)' % close if close else ''))


def check_command(job, merged=None):
    """When the job runs mxnet-ssp's training script, check its flags as each worker will
    (the checks registered for it, :mod:`.command_checks`, in a worker's environment: `merged`, the
    environment over the settings file, with ``--env`` / ``--env-worker``); raise
    LaunchError."""
    env = dict(job.environ if merged is None else merged)
    env.update(job.settings['worker'])
    run_command_checks(job.command, env, job.num_workers, local=job.launcher == 'local')


def main(argv=None, num_gpus=None):
    """Entry point of ``mxnet-ssp-launch``; returns the exit code.

    `num_gpus` is passed to :func:`plan` (tests inject a GPU count there).
    """
    args = build_parser().parse_args(argv)
    environ = dict(os.environ)
    try:
        job = check_job(args, environ)
        warn_unknown_settings(job)
        merged = check_settings_file(job)
        check_command(job, merged)
        if job.job_restarts:
            job = attempt_job(job, 0)
        job_plan = plan_job(job, num_gpus)
        rc = check_hosts(job) if job.launcher == 'ssh' else 0
        if rc != 0:
            return rc
        rc = run_syncs(job_plan.syncs, os.getcwd(), args.sync_dst_dir, environ)
        if rc != 0:
            return rc
    except LaunchError as err:
        say('error: %s' % err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        say('interrupted before the job started')
        return 128 + signal.SIGINT
    say(job_plan.summary)
    if job.elastic:
        say('elastic: a lost worker does not end the job while at least %d of the %d workers '
            'are left (%s=%d in every process)' % (job.elastic, job.num_workers, ENV_ELASTIC,
                                                  job.elastic))
    if job.max_restarts:
        say('elastic: a lost worker is restarted %d s after it died, %d time(s) in the job; it '
            'takes the dead worker\'s rank and rejoins' % (job.restart_delay, job.max_restarts))
    if job.job_restarts:
        say('job restarts: when a process fails, the whole job starts again, at most %d '
            'time(s) (%s=0, 1, ... in every process)' % (job.job_restarts, ENV_RESTART))
    plans = iter([job_plan])      # the first start runs the plan made above

    def plan_start(attempt):
        first = next(plans, None)
        return first if first is not None else plan_job(attempt, num_gpus)
    return run_job(job, plan_start, timeout=args.timeout, supervisor=Supervisor)
