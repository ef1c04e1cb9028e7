"""The checked job, and the plan each launcher makes of it.

:func:`.cli.check_job` turns the flags and this environment into a :class:`Job`
(every check that does not depend on the launcher); :func:`.local.plan_local`,
:func:`.ssh.plan_ssh` and :func:`.mpi.plan_mpi` turn a Job into a :class:`Plan`,
making their own launcher's checks.  Nothing here starts a process.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
from typing import NamedTuple

from .settings import ENV_LAUNCH_INDEX, dmlc_env, local_env, plural
from .supervisor import Spec


class Job(NamedTuple):
    """A job whose launcher-independent flags and settings have been checked.

    `environ` is the launcher's own environment (read, never changed).
    `settings` maps each role (``'scheduler'``, ``'server'``, ``'worker'``) to the
    variables the launcher sets explicitly for it: ``--env``, then ``--env-server`` /
    ``--env-worker``, the ``--p3`` variables and ``OMP_NUM_THREADS``
    (see :func:`.settings.role_settings`).  The other fields are the flags as given.
    """
    launcher: str                 # 'local', 'ssh', 'mpi' or 'slurm'
    command: list                 # what every process runs (a leading '--' removed)
    num_workers: int
    num_servers: int
    environ: dict
    settings: dict
    hostfile: str = None
    sync_dst_dir: str = None
    gpus_per_worker: int = None
    gpu_map: str = None
    elastic: int = 0              # --elastic: least workers; 0 fail-fast
    max_restarts: int = 0         # --max-restarts
    restart_delay: int = None     # seconds from a death to its restart (heartbeat timeout...)
    job_restarts: int = 0         # --job-restarts: starts of the whole job after a failure
    hosts: list = None            # ssh: the hosts to use (None: the hostfile's), see .restarts

    def counts(self):
        """``'1 scheduler, S servers, N workers'``, for the plan's summary."""
        return '1 scheduler, %s, %s' % (plural(self.num_servers, 'server'),
                                        plural(self.num_workers, 'worker'))

    def dmlc_env(self, role, uri, port):
        """The ``DMLC_*`` variables that make a process `role` of this job."""
        return dmlc_env(role, uri, port, self.num_workers, self.num_servers)

    def scheduler_spec(self, uri, port):
        """The scheduler: always run here, with this machine's whole environment."""
        dmlc = self.dmlc_env('scheduler', uri, port)
        dmlc[ENV_LAUNCH_INDEX] = '0'
        return Spec('scheduler', 0, self.command,
                    local_env(self.environ, self.settings['scheduler'], dmlc))


class Plan(NamedTuple):
    """What a launcher will do for a job; returned by every planner, run by :func:`.cli.main`."""
    specs: list                   # one Spec per process (per mpirun under mpi), scheduler first
    summary: str                  # the line said before the job starts
    syncs: list = ()              # ssh --sync-dst-dir: (Host, rsync argv) per host, run first
