"""The command: ``mxnet-ssp-train``, ``python -m mxnet_ssp.experiments.train_cifar`` (:func:`main`)."""
import os

from ..._hooks import skip_optional_mxnet_imports
from .logs import setup_logging
from .loop import Training
from .options import parse_args


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


def main(argv=None):
    """Run the role of this process (``DMLC_ROLE``): a worker trains; returns the exit code.

    A scheduler or server never returns: ``import mxnet`` serves and exits.
    """
    skip_optional_mxnet_imports()   # a second of CPU per process: no sklearn/scipy features of MXNet
    role = os.environ.get('DMLC_ROLE')
    if role in ('scheduler', 'server'):
        return run_server_role(role)
    args = parse_args(argv)
    rank_filter = setup_logging()
    save_dir = make_save_dir(args)
    return Training(args, save_dir, rank_filter).run()
