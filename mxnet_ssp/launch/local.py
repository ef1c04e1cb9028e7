"""``--launcher local``: every process of the job on this machine.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import shutil

from .gpus import describe as describe_gpus, plan_gpus, worker_gpu_env
from .hosts import free_port
from .job import Plan
from ..config import ENV_REJOIN
from .settings import ENV_LAUNCH_INDEX, LaunchError, local_env, say, task_env
from .supervisor import Spec
from ..core.env_names import DMLC_NODE_HOST


def plan_local(job, num_gpus=None):
    """The :class:`.job.Plan` of `job` on this machine; raise LaunchError.

    Every process gets the launcher's whole environment, ``DMLC_PS_ROOT_URI`` and
    ``DMLC_NODE_HOST`` 127.0.0.1 and a port free now.  `num_gpus`
    (``num_gpus(environ) -> int``) counts the GPUs MXNet sees, for ``--gpus-per-worker``
    / ``--gpu-map``; default :func:`.gpus.count_gpus`, asked only when a GPU flag is given.
    """
    environ, command = job.environ, job.command
    for flag, value in (('-H/--hostfile', job.hostfile), ('--sync-dst-dir', job.sync_dst_dir)):
        if value:
            say('warning: %s is ignored by --launcher local' % flag)
    if shutil.which(command[0], path=environ.get('PATH')) is None:
        hint = ('; the command is run directly, not by a shell: for shell syntax use '
                "sh -c '...'" if '=' in command[0] else '')
        raise LaunchError('command %r not found or not executable (PATH of this '
                          'environment)%s' % (command[0], hint))
    gpus = plan_gpus(job.gpus_per_worker, job.gpu_map, job.num_workers, environ, num_gpus)
    uri, port = '127.0.0.1', free_port('127.0.0.1')
    specs = [job.scheduler_spec(uri, port)]
    for role, count in (('server', job.num_servers), ('worker', job.num_workers)):
        for i in range(count):
            dmlc = job.dmlc_env(role, uri, port)
            dmlc.update(task_env('local', role, i, job.num_workers))
            if DMLC_NODE_HOST not in environ and DMLC_NODE_HOST not in job.settings[role]:
                dmlc[DMLC_NODE_HOST] = '127.0.0.1'
            dmlc[ENV_LAUNCH_INDEX] = str(i)
            role_env = job.settings[role]
            if role == 'worker' and gpus is not None:
                role_env = dict(role_env, **worker_gpu_env(gpus[i], environ))
            spec = Spec(role, i, command, local_env(environ, role_env, dmlc))
            if role == 'worker' and job.max_restarts:     # its replacement, if it is lost
                spec.restart = Spec(role, i, command, local_env(
                    environ, dict(role_env, **{ENV_REJOIN: '1'}), dmlc))
            specs.append(spec)
    where = '' if gpus is None else '; %s' % describe_gpus(gpus, environ)
    return Plan(specs, 'local job: %s; scheduler at %s:%d%s' % (job.counts(), uri, port, where))
