"""The command: ``mxnet-ssp-train``, ``python -m mxnet_ssp.lab.train_cifar`` (:func:`main`)."""
import os
import sys

from ..._cli import prog_name
from ..._hooks import skip_optional_mxnet_imports
from ...config import ConfigError, restart_number
from .checkpoint import find_resume_point
from .diverge import EXIT_DIVERGED, Diverged
from .logs import setup_logging
from .loop import Training
from ..training_flags import parse_args
from ...core.env_names import DMLC_ROLE


def run_server_role(role):
    """Scheduler or server: log with the role, then let ``import mxnet`` serve (and exit)."""
    setup_logging(role)
    import mxnet  # noqa: F401  (runs the parameter server and calls sys.exit)
    return 0


def make_save_dir(args):
    """Create ``--save-dir``; a failure exits with status 2 and the reason."""
    save_dir = os.path.abspath(os.path.expanduser(args.save_dir))
    try:
        os.makedirs(save_dir, exist_ok=True)
    except OSError as err:
        args.parser.error('--save-dir %r is not valid: %s' % (args.save_dir, err))
    return save_dir


def resume_after_restart(args, save_dir):
    """After ``mxnet-ssp-launch --job-restarts`` started the job again (``MXNET_SSP_RESTART``
    above 0): resume from this run's latest complete checkpoint in `save_dir` (over
    ``--resume-from``, which the run started from), saying from where."""
    try:
        restart = restart_number()
    except ConfigError as err:
        args.parser.error(str(err))
    if not restart:
        return
    found = find_resume_point(args, save_dir, restart)
    if found is not None:
        args.resume_from, args.resume_info = found


def main(argv=None):
    """Run the role of this process (``DMLC_ROLE``): a worker trains; returns the exit code.

    A scheduler or server never returns: ``import mxnet`` serves and exits.
    """
    skip_optional_mxnet_imports()   # a second of CPU per process: no sklearn/scipy features of MXNet
    role = os.environ.get(DMLC_ROLE)
    if role in ('scheduler', 'server'):
        return run_server_role(role)
    args = parse_args(argv)
    rank_filter = setup_logging()
    save_dir = make_save_dir(args)
    resume_after_restart(args, save_dir)
    training = Training(args, save_dir, rank_filter)
    try:
        return training.run()
    except Diverged as err:
        return stop(err, EXIT_DIVERGED, args.kvstore)
    except ConfigError as err:       # a setting the launcher did not see (e.g. set by hand)
        return stop(err, 2, args.kvstore)


def stop(err, code, kvstore):
    """Print ``<prog>: error: <err>`` (one line) and end with `code`.

    In a parameter-server job the process ends at once (``os._exit``): MXNet's exit would wait
    in ps-lite's final barrier for workers that go on; the launcher then ends the job.
    """
    prog = prog_name('mxnet-ssp-train', 'mxnet_ssp.lab.train_cifar')
    sys.stderr.write('%s: error: %s\n' % (prog, err))
    sys.stderr.flush()
    if kvstore.startswith('dist') and os.environ.get(DMLC_ROLE):
        sys.stdout.flush()
        os._exit(code)
    return code
