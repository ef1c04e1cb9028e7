"""GPUs for the workers of a local job: ``--gpus-per-worker N`` and ``--gpu-map MAP``.

Worker ``i`` (its launch index, ``MXNET_SSP_LAUNCH_INDEX`` = ``DMLC_TASK_ID``; not the
ps-lite rank, which ps-lite assigns at registration) gets its own GPUs.  The launcher
checks the assignment against the number of GPUs MXNet sees in the launcher's environment
(``mx.context.num_gpus()``, asked in a child process so that this package never imports
mxnet) before any process starts, then gives each worker process:

* ``CUDA_VISIBLE_DEVICES``: its GPUs only, as the launcher's environment names them (the
  entries of the launcher's own ``CUDA_VISIBLE_DEVICES`` when that is set, else the ids);
* ``MXNET_SSP_GPUS``: the same GPUs as the worker's MXNet numbers them, ``0`` to ``k-1``.

The scheduler and the servers keep the launcher's environment.  See docs/launch.md.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import re
import subprocess
import sys

from ..config import ENV_GPUS
from .settings import LaunchError
from ..core.env_names import CUDA_VISIBLE_DEVICES


#: Variables the GPU flags set for each worker; --env / --env-worker may not set them too.
GPU_ENV = (CUDA_VISIBLE_DEVICES, ENV_GPUS)

#: Seconds `count_gpus` waits for ``import mxnet`` in the child process.
COUNT_TIMEOUT = 120.0

_ITEM = re.compile(r'^(\d+):(\d+(?:\+\d+)*)$')
MAP_FORM = "WORKER:GPU[+GPU...] items, comma-separated, one per worker (e.g. '0:0,1:1' or '0:0+1,1:2+3')"


def count_gpus(environ, python=None, timeout=COUNT_TIMEOUT):
    """The number of GPUs MXNet sees in `environ`: ``mx.context.num_gpus()`` in a child process.

    Parameters
    ----------
    environ : mapping
        The environment of the child (the launcher's: its ``CUDA_VISIBLE_DEVICES`` counts).
    python : str, optional
        The interpreter to ask (default: the launcher's own, ``sys.executable``).
    timeout : float
        Seconds to wait for it.

    Raises
    ------
    LaunchError
        If the child cannot import mxnet or does not answer.
    """
    code = 'import mxnet; print(mxnet.context.num_gpus())'
    argv = [python or sys.executable, '-c', code]
    try:
        proc = subprocess.run(argv, env=dict(environ), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise LaunchError('cannot count the GPUs MXNet sees (%s -c %r): %s'
                          % (argv[0], code, err)) from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].strip().isdigit():
        tail = (proc.stderr.strip().splitlines() or ['no output'])[-1]
        raise LaunchError('cannot count the GPUs MXNet sees (%s -c %r exited %d): %s'
                          % (argv[0], code, proc.returncode, tail))
    return int(lines[-1])


def parse_gpu_map(text, num_workers):
    """Parse ``--gpu-map``: ``{worker: (gpu, ...)}`` for workers 0 .. num_workers-1.

    Raises
    ------
    LaunchError
        Bad syntax, a worker outside the job, missing or given twice, a GPU given twice.
    """
    flag = '--gpu-map %r' % (text,)
    mapping = {}
    for item in str(text).split(','):
        match = _ITEM.match(item.strip())
        if match is None:
            raise LaunchError('%s is not valid: %r is not WORKER:GPU; expected %s'
                              % (flag, item, MAP_FORM))
        worker, gpus = int(match.group(1)), tuple(int(g) for g in match.group(2).split('+'))
        if worker >= num_workers:
            raise LaunchError('%s is not valid: worker %d is not in the job (-n %d: workers 0..%d)'
                              % (flag, worker, num_workers, num_workers - 1))
        if worker in mapping:
            raise LaunchError('%s is not valid: worker %d is given twice' % (flag, worker))
        mapping[worker] = gpus
    missing = [w for w in range(num_workers) if w not in mapping]
    if missing:
        raise LaunchError('%s is not valid: no GPU for worker %s; expected %s'
                          % (flag, ', '.join(map(str, missing)), MAP_FORM))
    owner = {}
    for worker in range(num_workers):
        for gpu in mapping[worker]:
            if gpu in owner:
                who = ('worker %d twice' % worker if owner[gpu] == worker
                       else 'workers %d and %d' % (owner[gpu], worker))
                raise LaunchError('%s is not valid: GPU %d is given to %s; each worker needs '
                                  'its own GPUs' % (flag, gpu, who))
            owner[gpu] = worker
    return mapping


def plan_gpus(gpus_per_worker, gpu_map, num_workers, environ, num_gpus=None):
    """The GPUs of each worker, checked against the GPUs MXNet sees; None without the flags.

    Parameters
    ----------
    gpus_per_worker : int or None
        ``--gpus-per-worker``: worker i gets GPUs ``i*N .. i*N+N-1``.
    gpu_map : str or None
        ``--gpu-map``.
    num_workers : int
    environ : mapping
        The launcher's environment.
    num_gpus : callable, optional
        ``num_gpus(environ) -> int``, the number of GPUs MXNet sees (default
        :func:`count_gpus`; tests inject a count here).

    Returns
    -------
    dict or None
        ``{worker: (gpu, ...)}`` in the launcher's numbering.

    Raises
    ------
    LaunchError
        Before anything starts, with the flag, its value and what is accepted.
    """
    if gpus_per_worker is None and gpu_map is None:
        return None
    if gpus_per_worker is not None and gpu_map is not None:
        raise LaunchError('--gpus-per-worker and --gpu-map are exclusive: give one of them')
    if gpus_per_worker is not None:
        if gpus_per_worker < 1:
            raise LaunchError('--gpus-per-worker %d is not valid: expected an integer >= 1 (for '
                              'CPU workers leave it out)' % gpus_per_worker)
        flag = '--gpus-per-worker %d' % gpus_per_worker
        mapping = {w: tuple(range(w * gpus_per_worker, (w + 1) * gpus_per_worker))
                   for w in range(num_workers)}
    else:
        flag = '--gpu-map %r' % (gpu_map,)
        mapping = parse_gpu_map(gpu_map, num_workers)
    seen = (count_gpus if num_gpus is None else num_gpus)(environ)
    visible = environ.get(CUDA_VISIBLE_DEVICES)
    where = ('' if visible is None else ' (with %s=%r in this environment)'
             % (CUDA_VISIBLE_DEVICES, visible))
    if seen < 1:
        raise LaunchError('%s needs GPUs, but MXNet sees none here%s: mx.context.num_gpus() '
                          'is 0 (a CPU build of mxnet, no CUDA driver, or no visible device)'
                          % (flag, where))
    needed = max(g for gpus in mapping.values() for g in gpus) + 1
    if visible is not None:
        seen = min(seen, len(visible.split(',')))
    if needed > seen:
        worker = min(w for w, gpus in mapping.items() if max(gpus) >= seen)
        raise LaunchError('%s gives worker %d GPU %d, but MXNet sees %d GPU(s) here%s: ids '
                          '0..%d' % (flag, worker, max(mapping[worker]), seen, where, seen - 1))
    return mapping


def worker_gpu_env(gpus, environ):
    """``CUDA_VISIBLE_DEVICES`` and ``MXNET_SSP_GPUS`` for a worker with GPUs `gpus`.

    `gpus` are in the launcher's numbering; when the launcher's environment has
    ``CUDA_VISIBLE_DEVICES``, id ``g`` is its ``g``-th entry (CUDA numbers the visible
    devices in that order).
    """
    visible = environ.get(CUDA_VISIBLE_DEVICES)
    entries = [e.strip() for e in visible.split(',')] if visible is not None else None
    names = [entries[g] if entries is not None else str(g) for g in gpus]
    return {CUDA_VISIBLE_DEVICES: ','.join(names),
            ENV_GPUS: ','.join(str(i) for i in range(len(gpus)))}


def describe(mapping, environ):
    """One line: which worker gets which GPUs."""
    return ', '.join('worker %d -> GPU %s' % (w, worker_gpu_env(g, environ)[CUDA_VISIBLE_DEVICES])
                     for w, g in sorted(mapping.items()))
