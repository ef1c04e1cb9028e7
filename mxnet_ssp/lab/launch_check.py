"""The training script's flags, checked by the launcher before it starts any process.

Registered in the entry-point group ``mxnet_ssp.launch_checks`` (setup.py), which the
launcher reads (:mod:`mxnet_ssp.launch.command_checks`): the launcher itself imports
nothing of the lab.

When the command is mxnet-ssp's training script (``mxnet-ssp-train``, ``python -m
mxnet_ssp.lab.train_cifar`` or ``python train_scripts/train_cifar.py``), its flags are
parsed by the script's own parser and checked by its own rules
(:func:`mxnet_ssp.lab.training_flags.find_problem`) in the environment a worker
will have, so ``--lr -0.1`` is one message from the launcher (exit 2), not one usage per
worker.  Neither MXNet nor GluonCV is imported.
"""
import os

from ..core.env_names import DMLC_NUM_WORKER, DMLC_ROLE

TRAIN_COMMAND = 'mxnet-ssp-train'
TRAIN_MODULE = 'mxnet_ssp.lab.train_cifar'
TRAIN_SCRIPT = os.path.join('train_scripts', 'train_cifar.py')
#: python options that take a value as the next argument
_PYTHON_VALUE_OPTIONS = ('-W', '-X', '-Q')
#: flags of another host's files: not checked here under ssh / mpi
REMOTE_FILE_FLAGS = ('--save-dir', '--resume-from')


def training_flags(command, cwd=None):
    """The training script's flags when `command` runs it, else None."""
    if not command:
        return None
    first = os.path.basename(command[0])
    if first == TRAIN_COMMAND:
        return list(command[1:])
    if not first.startswith('python'):
        return None
    i = 1
    while i < len(command):
        tok = command[i]
        if tok == '-m':
            if i + 1 < len(command) and command[i + 1] == TRAIN_MODULE:
                return list(command[i + 2:])
            return None
        if tok.startswith('-m'):
            return list(command[i + 1:]) if tok[2:] == TRAIN_MODULE else None
        if tok in ('-c', '-'):
            return None
        if tok in _PYTHON_VALUE_OPTIONS:
            i += 2
            continue
        if tok.startswith('-'):
            i += 1
            continue
        path = os.path.normpath(os.path.join(cwd or os.getcwd(), tok))
        return list(command[i + 1:]) if path.endswith(os.sep + TRAIN_SCRIPT) else None
    return None


class _Refused(Exception):
    pass


def check_training_flags(command, worker_environ, num_workers, local=True, cwd=None):
    """Check the training script's flags in `command` as a worker of a job of `num_workers`
    workers with `worker_environ` would; return the message naming the flag, its value and
    what is accepted, or None.  None when `command` is not the training script, or when it
    asks for ``--help`` / ``--version`` (every process prints those).

    With `local` False (ssh, mpi) the rows of :data:`REMOTE_FILE_FLAGS` are skipped: the
    workers' files are on other hosts.
    """
    flags = training_flags(command, cwd)
    if flags is None or any(f in ('-h', '--help', '--version') for f in flags):
        return None
    from . import training_flags as rules  # imports neither MXNet nor GluonCV

    parser = rules.build_parser()

    def refuse(message):
        raise _Refused(message)

    parser.error = refuse
    try:
        args = parser.parse_args(flags)
    except _Refused as err:
        return str(err)
    env = dict(worker_environ)
    env.update({DMLC_ROLE: 'worker', DMLC_NUM_WORKER: str(num_workers)})
    _, message = rules.find_problem(args, env, skip=() if local else REMOTE_FILE_FLAGS)
    return message or None
