"""``--launcher mpi``: the scheduler here, then one mpirun for the servers and one for
the workers (Open MPI or MPICH / Intel MPI, told apart by ``mpirun --version``).

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import os
import subprocess

from .hosts import address_towards, free_port, parse_hostfile
from .job import Plan
from ..config import read
from .settings import ENV_MPIRUN, LaunchError, forwarded_env, local_env, say, task_env
from .supervisor import Spec
from ..core.env_names import DMLC_NODE_HOST


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


def plan_mpi(job):
    """The :class:`.job.Plan` of `job` under mpirun; raise LaunchError.

    Runs ``mpirun --version`` (see :func:`mpi_flavor`); ``-H`` is passed on to mpirun,
    whose hosts the scheduler is reached from (the first one picks the address).
    """
    environ = job.environ
    if job.sync_dst_dir:
        say('warning: --sync-dst-dir is ignored by --launcher mpi')
    mpirun = read(ENV_MPIRUN, environ)
    if job.hostfile:
        hosts = parse_hostfile(job.hostfile)
        uri = address_towards(hosts[0].address)
    else:
        uri = '127.0.0.1'
    flavor = mpi_flavor(mpirun)
    port = free_port('127.0.0.1' if uri.startswith('127.') else '')
    specs = [job.scheduler_spec(uri, port)]
    base = forwarded_env(environ)
    for role, count in (('server', job.num_servers), ('worker', job.num_workers)):
        env = dict(base)
        env.update(job.settings[role])
        env.update(job.dmlc_env(role, uri, port))
        env.update(task_env('mpi', role, 0, job.num_workers))
        if uri.startswith('127.') and DMLC_NODE_HOST not in env:
            env[DMLC_NODE_HOST] = '127.0.0.1'
        argv = mpi_argv(flavor, count, job.command, env, job.hostfile, mpirun,
                        as_root=hasattr(os, 'geteuid') and os.geteuid() == 0)
        specs.append(Spec(role, 0, argv, local_env(environ, {}, {}), mpirun=count))
    where = 'hosts of %s' % job.hostfile if job.hostfile else 'this machine'
    return Plan(specs, 'mpi job (%s): %s on %s; scheduler here at %s:%d' % (
        flavor, job.counts(), where, uri, port))
