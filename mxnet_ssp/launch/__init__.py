"""mxnet-ssp-launch: start and supervise an MXNet parameter-server job.

One command is run for every process of the job; the ``DMLC_*`` variables
tell each copy whether it is the scheduler, a server or a worker::

    mxnet-ssp-launch -n 2 -s 1 --launcher local python train.py --kvstore dist_dssp
    mxnet-ssp-launch -n 4 -H hosts.txt python train.py --kvstore dist_ssp
    mxnet-ssp-launch -n 4 -H hosts.txt --launcher mpi python train.py
    mxnet-ssp-launch -n 2 -s 2 --launcher slurm python train.py   # in an sbatch script

The flags are those of MXNet's ``tools/launch.py``; this launcher does not use
``dmlc_tracker`` (which fails on Python >= 3.9).  What it adds:

* settings are checked before anything starts: ``MXNET_SSP_STALENESS``,
  ``MXNET_SSP_DSSP_MODE`` and ``MXNET_SSP_TIMEOUT`` (from this environment and
  ``--env*``) and a ``--kvstore X`` / ``--kv-store X`` found in the command;
  a bad value ends the launcher with exit code 2 and one line naming it;
* GPUs for local jobs: ``--gpus-per-worker N`` or ``--gpu-map 0:0,1:1`` give each
  worker its own GPUs (``CUDA_VISIBLE_DEVICES`` and ``MXNET_SSP_GPUS``), checked
  against ``mx.context.num_gpus()`` (asked in a child process) before anything starts;
* supervision: when any process fails, or the launcher gets SIGINT / SIGTERM /
  SIGHUP, every process group of the job is sent SIGTERM, then SIGKILL after
  a grace period, and the launcher says which process ended the job.

Launchers:

* ``local``: every process here, each in its own session, with
  ``DMLC_PS_ROOT_URI=127.0.0.1``, a free ephemeral port, ``DMLC_NODE_HOST=127.0.0.1``
  and the launcher's whole environment.
* ``ssh``: the scheduler here; servers and workers round-robin over the
  hostfile's hosts, each through ``ssh -o BatchMode=yes HOST 'sh -c SCRIPT'`` (host keys
  checked as the user's ssh configuration says).  Before anything starts every host is
  logged in to at once (``ConnectTimeout=10``): one that takes no connection ends the
  launch within 15 s, naming it.  A command starting with a bare ``python`` / ``python3``
  runs the active virtual environment's interpreter on every host.  The script cd's to
  ``--sync-dst-dir``
  (after ``rsync -az`` of the current directory to every host) or to the
  current directory, exports the variables (ssh does not carry the
  environment: ``DMLC_*``, ``DMLC_NODE_HOST=HOST``, ``MXNET_SSP_*``,
  ``OMP_NUM_THREADS``, ``PS_VERBOSE``, ``DMLC_INTERFACE``, ``--env*``) and runs
  the command; when ssh's stdin (a pipe from the launcher) closes, because the
  launcher stops the job or dies, the script stops the command.
  ``DMLC_PS_ROOT_URI`` is the address this machine uses to reach the first host.
* ``slurm``: inside a Slurm allocation (sbatch, salloc), the scheduler here and every
  server and worker as an ``srun --overlap`` step of its own on the allocation's task
  slots, taken node by node in turns (:mod:`.slurm`); no ssh between nodes.
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

Layout: :mod:`.cli` (the flags, :func:`check_job` for the checks every launcher
shares, :func:`plan`, ``main``), :mod:`.job` (the checked :class:`Job` and the
:class:`Plan` every launcher returns), one module per launcher, each with its planner and
its command lines: :mod:`.local` (:func:`plan_local`), :mod:`.ssh` (:func:`plan_ssh`;
ssh, the remote script, rsync, the hosts' check), :mod:`.mpi` (:func:`plan_mpi`; mpirun and
its flavour), :mod:`.slurm` (:func:`plan_slurm`; the allocation, placement, srun),
:mod:`.stock` (``mxnet-ssp-stock-launch``: MXNet's own launch.py on Python 3.9+),
then :mod:`.hosts` (the hostfile, addresses, ports), :mod:`.gpus` (the GPU flags),
:mod:`.settings` (constants, checks before anything starts, each process's environment),
:mod:`.supervisor` (running and stopping the processes).  The package stays light: it
imports :mod:`mxnet_ssp.config` and the standard library only, never mxnet.
"""
from .cli import build_parser, check_job, main, plan
from .gpus import count_gpus, parse_gpu_map, plan_gpus, worker_gpu_env
from .hosts import Host, parse_hostfile
from .job import Job, Plan
from .local import plan_local
from .mpi import mpi_argv, mpi_flavor, plan_mpi
from .slurm import plan_slurm
from .settings import (ENV_LAUNCH_INDEX, ENV_MPIRUN, ENV_SSH_ARGS, EXIT_FAILED, EXIT_TIMEOUT,
                       EXIT_USAGE, PROG, SSH_BASE, LaunchError, find_kvstore_names,
                       parse_env_items, role_settings, validate_settings)
from .ssh import plan_ssh, remote_script, rsync_argv, ssh_argv
from .supervisor import Spec, Supervisor

__all__ = ['main', 'build_parser', 'check_job', 'plan', 'Job', 'Plan', 'plan_local', 'plan_ssh',
           'plan_mpi', 'plan_slurm', 'parse_env_items', 'find_kvstore_names', 'validate_settings',
           'parse_hostfile', 'remote_script', 'ssh_argv', 'rsync_argv', 'mpi_argv',
           'mpi_flavor', 'Spec', 'Supervisor', 'LaunchError', 'Host', 'role_settings', 'PROG',
           'ENV_LAUNCH_INDEX', 'ENV_MPIRUN', 'ENV_SSH_ARGS', 'EXIT_FAILED', 'EXIT_USAGE',
           'EXIT_TIMEOUT', 'SSH_BASE', 'count_gpus', 'parse_gpu_map', 'plan_gpus',
           'worker_gpu_env']
