"""Train an image classifier with a parameter-server KVStore: BSP, ASP, SSP or DSSP.

Every process of a job runs this same command; MXNet reads the role from
``DMLC_ROLE``.  In scheduler and server processes ``import mxnet`` runs the
parameter-server loop and exits, so all work is inside :func:`main`::

    python -m mxnet_ssp.launch -n 4 -s 1 --launcher local \\
        python train_scripts/train_cifar.py --kvstore dist_dssp --staleness 3,15

Without a launcher (no ``DMLC_ROLE``) use ``--kvstore local``::

    python train_scripts/train_cifar.py --kvstore local --num-epochs 2

Each worker trains on its own shard of the training set.  Every worker writes
``<save-dir>/train-worker<rank>.jsonl`` (one JSON object per iteration);
worker 0 also evaluates the test set at the end of every epoch and at the end
(``eval.jsonl``), saves checkpoints (``model-epoch<N>.params``,
``model-final.params``) and writes ``summary.json``.
"""
import argparse
import glob
import importlib
import importlib.util
import json
import logging
import math
import os
import sys
import time
import warnings

# The package is used from a checkout as well as installed: make the checkout
# importable before ``import mxnet``, because MXNet server processes unpickle
# the SSP stores' updater (mxnet_ssp.server) inside ``import mxnet``.
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if (importlib.util.find_spec('mxnet_ssp') is None
        and os.path.isdir(os.path.join(_REPO, 'mxnet_ssp'))):
    sys.path.insert(0, _REPO)

import numpy as np  # noqa: E402
import mxnet as mx  # noqa: E402  (never returns in scheduler/server processes)
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

MODELS = ('mlp', 'alexnet-small')
DATASETS = ('digits', 'cifar10', 'cifar100')
KVSTORES = ('local', 'dist_sync', 'dist_async', 'dist_ssp', 'dist_dssp')
SSP_KVSTORES = ('dist_ssp', 'dist_dssp')
DSSP_MODES = ('bounded', 'paper')

logger = logging.getLogger('train_cifar')


def _ssp_module(name):
    """Import ``mxnet_ssp.<name>``; a standalone module loads even if the package cannot.

    ``mxnet_ssp.data`` and ``mxnet_ssp.config`` import nothing else from the
    package, so local, dist_sync and dist_async runs keep working while the
    SSP stores are broken or missing.
    """
    try:
        return importlib.import_module('mxnet_ssp.' + name)
    except Exception as err:
        path = os.path.join(_REPO, 'mxnet_ssp', name + '.py')
        if not os.path.isfile(path):
            raise
        warnings.warn('import mxnet_ssp failed (%s: %s); loading %s on its own, so only '
                      'local, dist_sync and dist_async will work' % (type(err).__name__, err, path))
    spec = importlib.util.spec_from_file_location('_mxnet_ssp_' + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------
def build_parser():
    """The command-line parser (flags only; :func:`validate_args` checks values)."""
    p = argparse.ArgumentParser(
        description='Train an image classifier on an MXNet parameter server with '
                    'BSP (dist_sync), ASP (dist_async), SSP (dist_ssp) or DSSP (dist_dssp).',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--model', default='alexnet-small',
                   help='network: %s' % ', '.join(MODELS))
    p.add_argument('--dataset', default='digits',
                   help='dataset: %s (digits is bundled with scikit-learn, no download)'
                        % ', '.join(DATASETS))
    p.add_argument('--data-dir', default=os.path.join('~', '.mxnet', 'datasets', 'cifar'),
                   help='directory with the CIFAR archives (downloaded there if missing)')
    p.add_argument('--batch-size', type=int, default=32, help='batch size per worker')
    p.add_argument('--num-epochs', type=int, default=10, help='passes over each worker\'s shard')
    p.add_argument('--num-iterations', type=int, default=None,
                   help='stop each worker after this many iterations (default: no cap)')
    p.add_argument('--lr', type=float, default=0.1, help='learning rate')
    p.add_argument('--momentum', type=float, default=0.9, help='SGD momentum')
    p.add_argument('--wd', type=float, default=1e-4, help='weight decay')
    p.add_argument('--kvstore', default='dist_sync',
                   help='kvstore type: %s' % ', '.join(KVSTORES))
    p.add_argument('--staleness', default=None,
                   help="dist_ssp: s (e.g. 3); dist_dssp: 'sL,sU' (e.g. 3,15) "
                        '(default: the store\'s, or MXNET_SSP_STALENESS)')
    p.add_argument('--dssp-mode', default=None,
                   help='dist_dssp only: %s (default: bounded, or MXNET_SSP_DSSP_MODE)'
                        % ', '.join(DSSP_MODES))
    p.add_argument('--slowdown', default=None, metavar='RANK:FACTOR[,RANK:FACTOR]',
                   help='make worker RANK sleep (FACTOR-1) x its compute time every '
                        'iteration, to emulate a slower device (FACTOR >= 1)')
    p.add_argument('--seed', type=int, default=42, help='random seed')
    p.add_argument('--save-dir', default=os.path.join('.', 'results', 'run'),
                   help='directory for metrics and checkpoints')
    p.add_argument('--log-interval', type=int, default=20,
                   help='log every this many iterations (0: only epoch summaries)')
    return p


def _fail(parser, flag, value, accepted):
    parser.error('%s %r is not valid: expected %s' % (flag, value, accepted))


def parse_slowdown(text):
    """Parse ``RANK:FACTOR[,RANK:FACTOR]`` into ``{rank: factor}``.

    Raises
    ------
    ValueError
        With a message saying what is wrong (the caller names the flag).
    """
    result = {}
    if text is None or not text.strip():
        return result
    for item in text.split(','):
        rank_text, sep, factor_text = item.strip().partition(':')
        try:
            if not sep:
                raise ValueError
            rank, factor = int(rank_text), float(factor_text)
        except ValueError:
            raise ValueError('%r is not RANK:FACTOR' % item.strip()) from None
        if rank < 0:
            raise ValueError('rank %d is negative' % rank)
        if not (math.isfinite(factor) and factor >= 1.0):
            raise ValueError('factor %s of rank %d is not a number >= 1' % (factor_text, rank))
        if rank in result:
            raise ValueError('rank %d is given twice' % rank)
        result[rank] = factor
    return result


def expected_num_workers(kvstore, environ=None):
    """Workers the job will have: 1 for local, else ``DMLC_NUM_WORKER``."""
    env = os.environ if environ is None else environ
    if kvstore == 'local':
        return 1
    try:
        return max(1, int(env.get('DMLC_NUM_WORKER', '1')))
    except ValueError:
        return 1


def validate_args(args, parser, environ=None):
    """Check every flag; on error print usage and the reason and exit with status 2."""
    env = os.environ if environ is None else environ
    if args.model not in MODELS:
        _fail(parser, '--model', args.model, 'one of %s' % ', '.join(MODELS))
    if args.dataset not in DATASETS:
        _fail(parser, '--dataset', args.dataset, 'one of %s' % ', '.join(DATASETS))
    if args.kvstore not in KVSTORES:
        _fail(parser, '--kvstore', args.kvstore, 'one of %s' % ', '.join(KVSTORES))
    for flag, value in (('--batch-size', args.batch_size), ('--num-epochs', args.num_epochs)):
        if value < 1:
            _fail(parser, flag, value, 'an integer >= 1')
    if args.num_iterations is not None and args.num_iterations < 1:
        _fail(parser, '--num-iterations', args.num_iterations, 'an integer >= 1 (or omit it)')
    if not (math.isfinite(args.lr) and args.lr > 0):
        _fail(parser, '--lr', args.lr, 'a number > 0')
    if not (math.isfinite(args.momentum) and 0 <= args.momentum < 1):
        _fail(parser, '--momentum', args.momentum, 'a number in [0, 1)')
    if not (math.isfinite(args.wd) and args.wd >= 0):
        _fail(parser, '--wd', args.wd, 'a number >= 0')
    if args.log_interval < 0:
        _fail(parser, '--log-interval', args.log_interval, 'an integer >= 0')
    if args.kvstore.startswith('dist') and not env.get('DMLC_ROLE'):
        parser.error('--kvstore %s needs a parameter-server job (DMLC_ROLE is not set): run '
                     'under "python -m mxnet_ssp.launch -n N -s S --launcher local python ...", '
                     'or use --kvstore local' % args.kvstore)
    if args.staleness is not None:
        if args.kvstore not in SSP_KVSTORES:
            parser.error('--staleness is only accepted with --kvstore %s, not with --kvstore %s'
                         % (' or '.join(SSP_KVSTORES), args.kvstore))
        config = _ssp_module('config')
        try:
            config.parse_staleness(args.staleness, args.kvstore, source='--staleness')
        except ValueError as err:
            parser.error(str(err))
    if args.dssp_mode is not None:
        if args.kvstore != 'dist_dssp':
            parser.error('--dssp-mode is only accepted with --kvstore dist_dssp, not with '
                         '--kvstore %s' % args.kvstore)
        if args.dssp_mode not in DSSP_MODES:
            _fail(parser, '--dssp-mode', args.dssp_mode, 'one of %s' % ', '.join(DSSP_MODES))
    try:
        args.slowdown_factors = parse_slowdown(args.slowdown)
    except ValueError as err:
        parser.error('--slowdown %r is not valid: %s; expected RANK:FACTOR[,RANK:FACTOR] with '
                     'integer ranks >= 0 and factors >= 1 (e.g. 1:2.5)' % (args.slowdown, err))
    num_workers = expected_num_workers(args.kvstore, env)
    too_high = sorted(r for r in args.slowdown_factors if r >= num_workers)
    if too_high:
        parser.error('--slowdown %r names rank %d but the job has %d worker(s) '
                     '(ranks 0..%d)' % (args.slowdown, too_high[0], num_workers, num_workers - 1))
    return args


def parse_args(argv=None, environ=None):
    """Parse and validate the command line; exits with status 2 on a bad flag."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.parser = parser
    return validate_args(args, parser, environ)


# ---------------------------------------------------------------------------
# model, store, data
# ---------------------------------------------------------------------------
def get_model(name, num_classes, image_shape):
    """Build the network `name` for images of `image_shape` ``(C, H, W)``.

    ``alexnet-small`` is the downsized AlexNet of the SSP/DSSP experiments:
    three 'conv-relu-pool' blocks (32, 32, 64 channels; max pooling after
    the first, average pooling after the others) and two fully connected
    layers (128 hidden units).  It follows the input size: for CIFAR's 32x32,
    5x5 convolutions and three overlapping 3x3/2 poolings (cuda-convnet's
    layout); for smaller images, 3x3 convolutions and as many 2x2/2 poolings
    as keep the feature map at least 2x2 (two for the 8x8 digits; overlapping
    padded poolings of such small maps train badly).
    """
    if name == 'mlp':
        net = nn.HybridSequential(prefix='mlp_')
        with net.name_scope():
            net.add(nn.Flatten(), nn.Dense(256, activation='relu'),
                    nn.Dense(128, activation='relu'), nn.Dense(num_classes))
        return net
    if name == 'alexnet-small':
        size = min(image_shape[1:])
        large = size >= 24
        kernel = 5 if large else 3
        pools = 3 if large else max(0, min(3, int(math.log2(size)) - 1))
        net = nn.HybridSequential(prefix='alexnet_small_')
        with net.name_scope():
            for i, channels in enumerate((32, 32, 64)):
                net.add(nn.Conv2D(channels, kernel, padding=kernel // 2, activation='relu'))
                if i < pools:
                    pool = nn.MaxPool2D if i == 0 else nn.AvgPool2D
                    net.add(pool(pool_size=3, strides=2, padding=1) if large
                            else pool(pool_size=2, strides=2))
            net.add(nn.Flatten(), nn.Dense(128, activation='relu'), nn.Dense(num_classes))
        return net
    raise ValueError('unknown model %r' % name)


def make_kvstore(args):
    """Create the store for ``args.kvstore``; SSP settings go to mxnet_ssp.create."""
    if args.kvstore in SSP_KVSTORES:
        import mxnet_ssp
        settings = {'metrics_dir': os.path.abspath(args.save_dir)}
        if args.staleness is not None:
            settings['staleness'] = args.staleness
        if args.dssp_mode is not None:
            settings['mode'] = args.dssp_mode
        return mxnet_ssp.create(args.kvstore, **settings)
    return mx.kv.create(args.kvstore)


def load_data(args):
    """Load ``args.dataset``; a missing CIFAR archive exits with status 2 and the reason."""
    data = _ssp_module('data')
    try:
        return data.load(args.dataset, os.path.expanduser(args.data_dir))
    except FileNotFoundError as err:
        args.parser.error(str(err))


def normalize(dataset):
    """Standardize every channel with the training set's mean and std (in place).

    The statistics come from the whole training set, so every worker applies
    the same transform whatever its shard.
    """
    axes = (0, 2, 3)
    mean = dataset.train_data.mean(axis=axes, keepdims=True)
    std = dataset.train_data.std(axis=axes, keepdims=True) + 1e-6
    dataset.train_data = ((dataset.train_data - mean) / std).astype(np.float32)
    dataset.test_data = ((dataset.test_data - mean) / std).astype(np.float32)
    return dataset


def evaluate(net, images, labels, batch_size=500):
    """Top-1 accuracy of `net` on numpy `images`/`labels`."""
    correct = 0
    for start in range(0, len(images), batch_size):
        out = net(mx.nd.array(images[start:start + batch_size]))
        pred = out.argmax(axis=1).asnumpy().astype(np.int64)
        correct += int((pred == labels[start:start + batch_size]).sum())
    return correct / float(len(images))


# ---------------------------------------------------------------------------
# logging and metrics
# ---------------------------------------------------------------------------
class _RankFilter(logging.Filter):
    """Adds ``role`` and ``rank`` to every record (rank is '?' until the store exists)."""

    def __init__(self):
        super().__init__()
        self.role = os.environ.get('DMLC_ROLE', 'worker')
        self.rank = '?'

    def filter(self, record):
        record.role = self.role
        record.rank = self.rank
        return True


def setup_logging():
    """Log to stderr as ``<time> worker[<rank>] <level> <message>``; returns the filter."""
    rank_filter = _RankFilter()
    handler = logging.StreamHandler()
    handler.addFilter(rank_filter)
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(role)s[%(rank)s] %(levelname)s %(message)s'))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return rank_filter


class JsonLines:
    """Append-only JSON Lines file, one flushed line per record."""

    def __init__(self, path):
        self.path = path
        self._file = open(path, 'w', buffering=1)

    def write(self, **record):
        self._file.write(json.dumps(record) + '\n')

    def close(self):
        self._file.close()


def count_iterations(save_dir):
    """``{rank: iterations}`` from the ``train-worker<rank>.jsonl`` files in `save_dir`."""
    counts = {}
    for path in glob.glob(os.path.join(save_dir, 'train-worker*.jsonl')):
        last = 0
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rec = json.loads(line)
                    last = max(last, int(rec['iteration']))
                    rank = int(rec['rank'])
        if last:
            counts[rank] = last
    return dict(sorted(counts.items()))


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------
def main(argv=None):
    args = parse_args(argv)
    rank_filter = setup_logging()
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    save_dir = os.path.abspath(args.save_dir)
    os.makedirs(save_dir, exist_ok=True)

    dataset = load_data(args)
    normalize(dataset)
    num_workers = expected_num_workers(args.kvstore)
    shard_size = len(dataset.train_data) // num_workers
    iters_per_epoch = shard_size // args.batch_size
    if iters_per_epoch < 1:
        args.parser.error('--batch-size %d is larger than a worker\'s shard (%d images of %s '
                          'over %d workers): expected at most %d'
                          % (args.batch_size, shard_size, args.dataset, num_workers, shard_size))

    kv = make_kvstore(args)
    rank, num_workers = kv.rank, kv.num_workers
    rank_filter.rank = rank
    iters_per_epoch = (len(dataset.train_data) // num_workers) // args.batch_size
    shard_index = _ssp_module('data').shard(len(dataset.train_data), rank, num_workers,
                                            seed=args.seed)
    train_x, train_y = dataset.train_data[shard_index], dataset.train_label[shard_index]
    slowdown = args.slowdown_factors.get(rank, 1.0)
    total_iters = args.num_epochs * iters_per_epoch
    if args.num_iterations is not None:
        total_iters = min(total_iters, args.num_iterations)
    num_epochs = int(math.ceil(total_iters / float(iters_per_epoch)))
    logger.info('%s on %s (%s), kvstore %s, %d worker(s); shard of %d images, %d iterations '
                'of %d per epoch, %d epoch(s)%s', args.model, args.dataset, dataset.source,
                kv.type, num_workers, len(train_x), iters_per_epoch, args.batch_size, num_epochs,
                ', slowdown x%g' % slowdown if slowdown != 1.0 else '')

    net = get_model(args.model, dataset.num_classes, dataset.image_shape)
    net.initialize(mx.init.Xavier(rnd_type='gaussian', factor_type='in', magnitude=2))
    net.hybridize(static_alloc=True, static_shape=True)
    # A list, so that the store key of a parameter is its index in `params`.
    params = list(net.collect_params().values())
    trainer = gluon.Trainer(params, 'sgd',
                            {'learning_rate': args.lr, 'momentum': args.momentum,
                             'wd': args.wd},
                            kvstore=kv)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    train_log = JsonLines(os.path.join(save_dir, 'train-worker%d.jsonl' % rank))
    eval_log = JsonLines(os.path.join(save_dir, 'eval.jsonl')) if rank == 0 else None
    rng = np.random.RandomState(args.seed + 1000 * (rank + 1))
    start = time.time()

    def record_eval(epoch, iteration):
        accuracy = evaluate(net, dataset.test_data, dataset.test_label)
        now = time.time()
        eval_log.write(time=now, elapsed_s=round(now - start, 4), epoch=epoch,
                       iteration=iteration, accuracy=accuracy)
        return accuracy

    iteration = 0
    accuracy = None
    for epoch in range(1, num_epochs + 1):
        order = rng.permutation(len(train_x))
        epoch_loss, epoch_start, epoch_iters = 0.0, time.time(), 0
        for batch in range(iters_per_epoch):
            if iteration >= total_iters:
                break
            idx = order[batch * args.batch_size:(batch + 1) * args.batch_size]
            x, y = mx.nd.array(train_x[idx]), mx.nd.array(train_y[idx])
            t0 = time.perf_counter()
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            loss_value = float(loss.mean().asscalar())   # waits for the backward pass
            compute_s = time.perf_counter() - t0
            sleep_s = (slowdown - 1.0) * compute_s
            if sleep_s > 0:
                time.sleep(sleep_s)
            t1 = time.perf_counter()
            trainer.step(args.batch_size)
            mx.nd.waitall()                               # the new weights are here
            step_s = time.perf_counter() - t1
            iteration += 1
            epoch_iters += 1
            epoch_loss += loss_value
            train_log.write(rank=rank, iteration=iteration, epoch=epoch, time=time.time(),
                            compute_s=round(compute_s, 6), step_s=round(step_s, 6),
                            loss=round(loss_value, 6), sleep_s=round(sleep_s, 6))
            if args.log_interval and iteration % args.log_interval == 0:
                logger.info('epoch %d iteration %d loss %.4f compute %.1f ms step %.1f ms',
                            epoch, iteration, loss_value, 1e3 * compute_s, 1e3 * step_s)
        if epoch_iters == 0:
            break
        msg = 'epoch %d done: %d iterations in %.2f s, mean loss %.4f' % (
            epoch, epoch_iters, time.time() - epoch_start, epoch_loss / epoch_iters)
        if rank == 0:
            accuracy = record_eval(epoch, iteration)
            net.save_parameters(os.path.join(save_dir, 'model-epoch%03d.params' % epoch))
            msg += ', test accuracy %.4f' % accuracy
        logger.info(msg)
    train_log.close()

    # Wait for every worker, then read the weights on the servers: under ASP/SSP
    # the others may still have pushed after worker 0's last pull.
    distributed = kv.type.startswith('dist')
    if distributed:
        kv._barrier()
    if rank == 0:
        if distributed:
            for i, param in enumerate(params):
                kv.pull(i, out=param.list_data())
            mx.nd.waitall()
        accuracy = record_eval(num_epochs, iteration)
        net.save_parameters(os.path.join(save_dir, 'model-final.params'))
        eval_log.close()
        wall = time.time() - start
        staleness, mode = args.staleness, args.dssp_mode
        config = getattr(kv, 'config', None)       # our stores: the settings in effect
        if config is not None and hasattr(config, 's_lower'):
            staleness = (str(config.s_lower) if config.s_lower == config.s_upper
                         else '%d,%d' % (config.s_lower, config.s_upper))
            mode = config.mode if kv.type == 'dist_dssp' else None
        summary = {
            'kvstore': kv.type, 'staleness': staleness, 'dssp_mode': mode,
            'num_workers': num_workers, 'model': args.model, 'dataset': args.dataset,
            'batch_size': args.batch_size, 'slowdown': args.slowdown,
            'iterations_per_worker': {str(r): n for r, n in count_iterations(save_dir).items()},
            'final_accuracy': accuracy, 'wall_time_s': round(wall, 3),
        }
        with open(os.path.join(save_dir, 'summary.json'), 'w') as f:
            json.dump(summary, f, indent=2)
        logger.info('done: final test accuracy %.4f, %d iterations, %.1f s; metrics in %s',
                    accuracy, iteration, wall, save_dir)
    else:
        logger.info('done: %d iterations in %.1f s', iteration, time.time() - start)
    return 0


if __name__ == '__main__':
    sys.exit(main())
