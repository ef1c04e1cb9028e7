"""The update rule and the parameter-server store of a job (these import MXNet)."""
import os

from ..training_flags import DEFAULT_LAMDA, STALENESS_KVSTORES, wraps_async


def make_optimizer(args, batch_size):
    """The update rule of ``args.optimizer``, normalizing gradients by `batch_size`
    (``rescale_grad = 1 / batch_size``).

    ``rescale_grad`` is fixed here (and the script calls ``trainer.step(1)``)
    rather than set by ``trainer.step(batch_size)``: a resumed run sends the
    optimizer to the servers in ``trainer.load_states``, before the first step.
    """
    import mxnet as mx
    common = {'learning_rate': args.lr, 'wd': args.wd, 'rescale_grad': 1.0 / batch_size}
    if args.optimizer == 'sgd':
        return mx.optimizer.SGD(momentum=args.momentum, **common)
    if args.optimizer == 'nag':
        return mx.optimizer.NAG(momentum=args.momentum, **common)
    from ... import optim  # imports MXNet
    if args.optimizer == 'sasgd':
        return optim.StalenessAwareSGD(
            momentum=args.momentum, staleness_lr=args.staleness_lr or 'inverse',
            staleness_window=args.staleness_window or 1, **common)
    lamda = DEFAULT_LAMDA[bool(args.adaptive)] if args.lamda is None else args.lamda
    extra = {} if args.mean_square_decay is None else {'mean_square_decay': args.mean_square_decay}
    if args.adaptive_reading is not None:
        extra['adaptive_reading'] = args.adaptive_reading
    return optim.DCASGD(lamda=lamda, adaptive=bool(args.adaptive), momentum=args.momentum,
                        **extra, **common)


def uses_mxnet_ssp_store(args, environ=None):
    """Whether ``args.kvstore`` is one of mxnet-ssp's stores (servers keep optimizer state
    and take learning-rate changes)."""
    return args.kvstore in STALENESS_KVSTORES and (args.kvstore != 'dist_async'
                                                   or wraps_async(environ))


def make_kvstore(args):
    """Create the store for ``args.kvstore``; mxnet-ssp's get the settings and save-dir."""
    if uses_mxnet_ssp_store(args):
        import mxnet_ssp
        settings = {'metrics_dir': os.path.abspath(args.save_dir)}
        if args.staleness is not None:
            settings['staleness'] = args.staleness
        if args.dssp_mode is not None:
            settings['mode'] = args.dssp_mode
        if args.splits is not None:
            settings['splits'] = args.splits
        return mxnet_ssp.create(args.kvstore, **settings)
    import mxnet as mx
    return mx.kv.create(args.kvstore)


def read_server_weights(kv, params):
    """Pull the servers' current weights into `params` (after every worker is done): the
    parameters in the order the store's keys number them (the list given to gluon.Trainer;
    a Trainer given a dict numbers them in the order of their sorted names).

    In slot mode a plain pull returns what this worker last pulled, so each
    key is refreshed first (the server copies its latest weights into the slot).
    """
    import mxnet as mx
    for i, param in enumerate(params):
        if param.grad_req == 'null':     # e.g. BatchNorm statistics: never pushed
            continue
        if getattr(kv, 'slot_mode', False):
            kv.refresh_slots(i)
        kv.pull(i, out=param.list_data())
    mx.nd.waitall()
