"""One worker's training (:class:`Training`): the data, network, store and trainer, every
epoch, and the end (final test accuracy, ``model-final``, ``summary.json``).
"""
import json
import logging
import math
import os
import time

import numpy as np

from ...controller.protocol import describe_losses
from ...core.names import TRAIN_LOG
from .diverge import Diverged, DivergenceGuard, chance_loss, divergence_message
from .checkpoint import (current_run, restore_states, save_checkpoint, start_run,
                         updates_on_servers)
from .logs import (JsonLines, clear_earlier_job, count_iterations, make_progress,
                   show_progress)
from .models import describe_model, get_model
from ...server.snapshots import period_number
from ..training_flags import choose_gpus, expected_num_workers, learning_rate_at
from .store import make_kvstore, make_optimizer, read_server_weights
from ...core.env_names import CUDA_VISIBLE_DEVICES
from ...config import restart_number

logger = logging.getLogger(__name__)


def data_options(args):
    """The keyword arguments of ``data.load`` for ``args.dataset``: the generated task's knobs
    (``--teacher-scale``, ``--teacher-noise``, ``--teacher-dim``, ``--teacher-hidden``,
    ``--teacher-train-size``; :func:`..training_flags.generated_knobs.load_options`, each as its
    type), {} for the other datasets.  ``summary.json`` records them as ``data_options``, and
    the servers' evaluation after a lab run loads its test set from that record."""
    from ..training_flags.generated_knobs import TEACHER_KNOBS, load_options
    return load_options(args.dataset, {knob: getattr(args, flag[2:].replace('-', '_'), None)
                                       for knob, flag in TEACHER_KNOBS})


def load_data(args):
    """Load ``args.dataset`` (an :class:`~mxnet_ssp.lab.data.ImageData`) with its knobs
    (:func:`data_options`); a missing CIFAR archive exits with status 2 and the reason."""
    from .. import data
    try:
        return data.load(args.dataset, os.path.expanduser(args.data_dir), **data_options(args))
    except (FileNotFoundError, ImportError) as err:
        args.parser.error('--dataset %s: %s' % (args.dataset, err)
                          if isinstance(err, ImportError) else str(err))


def evaluate(net, batches, ctx=None):
    """Top-1 accuracy of `net` on `batches` of ``(x, y)`` NDArrays (a ``DataLoader``)."""
    import mxnet as mx
    ctx = ctx or mx.cpu()
    correct = total = 0
    for x, y in batches:
        pred = net(x.as_in_context(ctx)).argmax(axis=1).asnumpy().astype(np.int64)
        correct += int((pred == y.asnumpy()).sum())
        total += len(pred)
    return correct / float(total)


def lost_text(kv):
    """'' or, in elastic mode after a loss, '; lost worker 1 at clock 40 (...)' and so on."""
    lost = getattr(kv, 'lost_workers', None)
    return '; lost ' + describe_losses(lost) if lost else ''


class Training:
    """One worker's run of the training script, step by step (:meth:`run`).

    The steps share what they make as attributes: the devices and the shard,
    the network, store and trainer, the position (``epoch``, ``completed``
    epochs, ``iteration``, ``lr``), the metrics files and worker 0's last
    test ``accuracy``.  Every step but the constructor imports MXNet.
    """

    def __init__(self, args, save_dir, rank_filter):
        self.args = args
        self.save_dir = save_dir
        self.rank_filter = rank_filter
        self.guard = DivergenceGuard()

    def run(self):
        """Set up, train every epoch, then finish; returns the exit code (0)."""
        self.choose_devices()
        self.load_dataset()
        self.build_network()
        self.connect()
        self.plan()
        self.log_start()
        self.make_trainer()
        self.open_logs()
        self.train()
        self.finish()
        return 0

    def choose_devices(self):
        """The devices, the batch size over them, and the seeds."""
        import mxnet as mx
        args = self.args
        try:
            self.gpus = choose_gpus(args.num_gpus, os.environ, mx.context.num_gpus())
        except ValueError as err:
            args.parser.error(str(err))
        args.num_gpus = len(self.gpus)
        self.ctx = [mx.gpu(i) for i in self.gpus] if self.gpus else [mx.cpu()]
        self.batch_size = args.batch_size * max(1, args.num_gpus)
        mx.random.seed(args.seed)
        np.random.seed(args.seed)

    def load_dataset(self):
        """Load the dataset and normalize it with the training set's per-channel mean and
        std (the same on every worker); a batch larger than a shard exits with status 2."""
        from .. import data, loader
        args, batch_size = self.args, self.batch_size
        self.dataset = dataset = load_data(args)
        mean, std = loader.channel_stats(data.arrays(dataset.train)[0])
        self.train_set = loader.normalized(dataset.train, mean, std)
        self.test_set = loader.normalized(dataset.test, mean, std)
        num_workers = expected_num_workers(args.kvstore)
        shard_size = len(self.train_set) // num_workers
        if shard_size // batch_size < 1:
            args.parser.error('--batch-size %d is larger than a worker\'s shard (%d images of %s '
                              'over %d workers): expected at most %d'
                              % (batch_size, shard_size, args.dataset, num_workers, shard_size))

    def build_network(self):
        """The network of ``--model`` for the dataset; failing to build it exits with status 2."""
        args, dataset = self.args, self.dataset
        try:
            self.net = get_model(args.model, dataset.num_classes, dataset.image_shape,
                                 args.drop_rate)
        except Exception as err:
            args.parser.error('--model %s: cannot build it for %s (%s classes, images %s): %s: %s'
                              % (args.model, args.dataset, dataset.num_classes,
                                 'x'.join(map(str, dataset.image_shape)), type(err).__name__,
                                 err))

    def connect(self):
        """Create the store; this worker's rank picks its shard (the loaders) and its slowdown."""
        from .. import loader
        args = self.args
        self.kv = make_kvstore(args)
        self.rank, self.num_workers = self.kv.rank, self.kv.num_workers
        self.rank_filter.rank = self.rank
        self.iters_per_epoch = (len(self.train_set) // self.num_workers) // self.batch_size
        self.augment = args.dataset.startswith('cifar') and not args.no_augment
        self.loader = loader.TrainLoader(self.train_set, self.batch_size, self.rank,
                                         self.num_workers, args.seed, augment=self.augment,
                                         loader_workers=args.num_data_workers)
        self.shard_size = len(self.loader.sampler)
        self.eval_loader = (loader.eval_loader(self.test_set, loader_workers=args.num_data_workers)
                            if self.rank == 0 else None)
        self.slowdown = args.slowdown_factors.get(self.rank, 1.0)
        self.compute = args.scenario.stream(self.rank, args.seed) if args.scenario else None
        self.balancer = None
        if args.balance:
            self.make_balanced_loader()

    def make_balanced_loader(self):
        """--balance: batches sized by a BatchBalancer (total: workers x batch size); an epoch
        is one pass of the job over the whole set.  rescale_grad stays 1 / --batch-size, which
        is M / total, what :attr:`BatchBalancer.step_batch` asks for."""
        from ... import balance
        from .. import loader
        args = self.args
        total = self.num_workers * self.batch_size
        self.balancer = balance.BatchBalancer(
            self.kv, total, log_path=os.path.join(self.save_dir, 'balance.jsonl')
            if self.rank == 0 else None)
        self.loader = loader.BalancedLoader(self.train_set, self.balancer, args.seed,
                                            augment=self.augment,
                                            loader_workers=args.num_data_workers)
        self.iters_per_epoch = len(self.loader)
        self.shard_size = len(self.train_set)

    def record_balance(self, compute_s, samples):
        """--balance: this iteration's compute time (with the emulated slowdown), not waiting."""
        if self.balancer is not None:
            self.balancer.record(compute_s, samples)

    def plan(self):
        """Iterations and epochs in all, and where to start (after a resumed checkpoint)."""
        args, iters_per_epoch = self.args, self.iters_per_epoch
        total_iters = args.num_epochs * iters_per_epoch
        if args.num_iterations is not None:
            total_iters = min(total_iters, args.num_iterations)
        self.total_iters = total_iters
        self.num_epochs = int(math.ceil(total_iters / float(iters_per_epoch)))
        resume = self.resume = args.resume_info
        self.start_epoch = int(resume['completed_epochs']) + 1 if resume else 1
        self.iteration = int(resume.get('iteration')
                             or (self.start_epoch - 1) * iters_per_epoch) if resume else 0
        for _ in range(self.iteration if self.compute else 0):
            self.compute.next()          # a resumed run goes on with the same compute times
        if resume:
            # a trained model's first loss can be tiny: measure growth from at least chance
            self.guard = DivergenceGuard(floor=chance_loss(int(self.dataset.num_classes)))

    def log_start(self):
        """Log the options and what this worker is about to do."""
        args = self.args
        logger.info('options: %s', ' '.join('%s=%s' % kv for kv in args.options))
        if args.defaults_note:
            logger.info('%s', args.defaults_note)
        about = describe_model(args.model)
        logger.info('%s on %s (%s), kvstore %s, %d worker(s), optimizer %s; shard of %d '
                    'images, %d iterations of %d per epoch, %d epoch(s)%s%s%s',
                    args.model if about == args.model else '%s [%s]' % (args.model, about),
                    args.dataset, self.dataset.source, self.kv.type, self.num_workers,
                    args.optimizer, self.shard_size, self.iters_per_epoch, self.batch_size,
                    self.num_epochs,
                    ', augmented' if self.augment else '',
                    ', slowdown x%g' % self.slowdown if self.slowdown != 1.0 else
                    ', emulated compute %s (rank %d: %g ms)' % (
                        args.emulate, self.rank, 1e3 * self.compute.base) if self.compute else '',
                    ', resuming after epoch %d (iteration %d) from %s'
                    % (self.start_epoch - 1, self.iteration, args.resume_from)
                    if self.resume else '')
        visible = os.environ.get(CUDA_VISIBLE_DEVICES)
        logger.info('devices: %s%s', ', '.join(str(c) for c in self.ctx),
                    '' if not self.gpus or visible is None
                    else ' (CUDA_VISIBLE_DEVICES=%s)' % visible)

    def make_trainer(self):
        """Initialize or load the weights, make the trainer, set the first epoch's learning
        rate and restore the optimizer state of a resumed checkpoint."""
        import mxnet as mx
        from mxnet import gluon
        args, net, kv, ctx = self.args, self.net, self.kv, self.ctx
        if self.resume:
            net.load_parameters(args.resume_from, ctx=ctx)
        else:
            net.initialize(mx.init.Xavier(rnd_type='gaussian', factor_type='in', magnitude=2),
                           ctx=ctx)
        if args.mode == 'hybrid':
            net.hybridize(static_alloc=True, static_shape=True)
        # A list, so that the store key of a parameter is its index in `params`.
        self.params = list(net.collect_params().values())
        # dist_sync sums the workers' gradients; --sync-average makes it their mean
        optimizer = make_optimizer(args, self.batch_size
                                   * (self.num_workers if args.sync_average else 1))
        # MXNet's own dist_sync: the servers sum the gradients and every worker applies the
        # same update, so learning-rate changes need no server (MXNet's servers ignore them,
        # #15919); mxnet-ssp's dist_sync sends them, and updates on the servers
        update_on_kvstore = None if updates_on_servers(kv) else False
        self.trainer = trainer = gluon.Trainer(self.params, optimizer, kvstore=kv,
                                               update_on_kvstore=update_on_kvstore)
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        # before the store gets the optimizer (first step, or load_states): a resumed run's
        # servers start with the learning rate of its first epoch
        self.lr = lr = self.lr_of(self.start_epoch)
        trainer.set_learning_rate(lr)
        if self.resume:
            logger.info('epoch %d: learning rate %g', self.start_epoch, lr)
            if restore_states(trainer, kv, args, self.resume):
                # MXNet's own stores replace the optimizer by the one saved with the state
                trainer.set_learning_rate(lr)

    def lr_of(self, epoch):
        """The learning rate of `epoch` under the flags' schedule."""
        args = self.args
        return learning_rate_at(epoch, args.lr, args.lr_decay, args.lr_decay_epochs,
                                args.lr_decay_period)

    def open_logs(self):
        """The metrics files (appended to when resuming), the clock and the progress bar."""
        appending = self.resume is not None
        if self.rank == 0 and not appending:     # one job's files in save_dir, not two mixed
            clear_earlier_job(self.save_dir, self.num_workers)
        if self.rank == 0 and not restart_number():
            start_run(self.save_dir)              # a restart resumes from this run's only
        self.train_log = JsonLines(os.path.join(self.save_dir, TRAIN_LOG % self.rank),
                                   appending)
        self.eval_log = (JsonLines(os.path.join(self.save_dir, 'eval.jsonl'), appending)
                         if self.rank == 0 else None)
        self.start = time.time()
        self.snapshots = []               # --snapshot-every: (elapsed s, iteration, weights)
        self.snapshot_bytes = 0
        self.next_snapshot = 1 if self.args.snapshot_every else 0   # period number; 0: off
        self.progress = make_progress(self.rank, self.total_iters,
                                      min(self.iteration, self.total_iters),
                                      self.args.no_progress)
        show_progress(self.progress)

    def record_eval(self, epoch, final=False):
        """Worker 0: the test accuracy now, also written to ``eval.jsonl``."""
        accuracy = evaluate(self.net, self.eval_loader, ctx=self.ctx[0])
        now = time.time()
        self.eval_log.write(time=now, elapsed_s=round(now - self.start, 4), epoch=epoch,
                            iteration=self.iteration, accuracy=accuracy, lr=self.lr,
                            final=final)
        return accuracy

    def checkpoint_meta(self, epoch):
        """What a checkpoint saved now says about itself (see :func:`.checkpoint_info`)."""
        args = self.args
        return {'completed_epochs': self.completed, 'epoch': epoch,
                'iteration': self.iteration, 'lr': self.lr, 'kvstore': self.kv.type,
                'num_workers': self.num_workers, 'optimizer': args.optimizer,
                'model': args.model, 'dataset': args.dataset, 'time': time.time(),
                'run_id': current_run(self.save_dir), 'restart': restart_number()}

    def train(self):
        """Every epoch from the start epoch on, until the iterations are done."""
        args, rank = self.args, self.rank
        self.accuracy = None
        self.epoch = self.completed = self.start_epoch - 1
        for epoch in range(self.start_epoch, self.num_epochs + 1):
            self.epoch = epoch
            if self.iteration >= self.total_iters:
                break
            new_lr = self.lr_of(epoch)
            if new_lr != self.lr:
                logger.info('epoch %d: learning rate %g', epoch, new_lr)
                # mxnet-ssp stores pass it on to the servers
                self.trainer.set_learning_rate(new_lr)
                self.lr = new_lr
            epoch_iters, epoch_loss, epoch_correct, epoch_start = self.train_epoch(epoch)
            if epoch_iters == 0:
                self.epoch = epoch - 1
                break
            if epoch_iters == self.iters_per_epoch:
                self.completed = epoch
            msg = ('epoch %d done: %d iterations in %.2f s, mean loss %.4f, train accuracy %.4f'
                   % (epoch, epoch_iters, time.time() - epoch_start, epoch_loss / epoch_iters,
                      epoch_correct / float(max(1, self.epoch_samples))))
            if rank == 0:
                self.accuracy = self.record_eval(epoch)
                msg += ', test accuracy %.4f' % self.accuracy
            logger.info(msg)
            # the leader (elastic: the lowest rank not lost) saves: only its request
            # reaches the servers (mxnet-ssp stores)
            if rank == getattr(self.kv, 'leader', 0) and args.save_period \
                    and epoch % args.save_period == 0:
                save_checkpoint(self.net, self.trainer, self.kv, self.save_dir,
                                'model-epoch%03d' % epoch, self.checkpoint_meta(epoch))
        if self.progress is not None:
            self.progress.close()
            show_progress(None)
        self.train_log.close()
        if self.balancer is not None:
            self.balancer.close()

    def train_epoch(self, epoch):
        """One pass over the shard (or what is left of the iterations).

        Returns (iterations, sum of the batch losses, correct predictions, start time).
        """
        batches = self.loader.epoch(epoch)
        epoch_loss, epoch_correct, epoch_start, epoch_iters = 0.0, 0, time.time(), 0
        self.epoch_samples = 0
        for xb, yb in batches:
            if self.iteration >= self.total_iters:
                break
            loss_value, correct = self.train_batch(epoch, xb, yb)
            self.epoch_samples += len(yb)
            epoch_iters += 1
            epoch_loss += loss_value
            epoch_correct += correct
        batches.close()
        return epoch_iters, epoch_loss, epoch_correct, epoch_start

    def train_batch(self, epoch, xb, yb):
        """One iteration on the NDArrays `xb`, `yb`: forward/backward, the emulated slowdown,
        the store's step, and its line in ``train-worker<rank>.jsonl``.  Returns (mean loss,
        correct predictions)."""
        import mxnet as mx
        from mxnet import autograd, gluon
        args, ctx, net = self.args, self.ctx, self.net
        t0 = time.perf_counter()
        xs = gluon.utils.split_and_load(xb, ctx, even_split=False)
        ys = gluon.utils.split_and_load(yb, ctx, even_split=False)
        with autograd.record():
            outs = [net(x) for x in xs]
            losses = [self.loss_fn(out, y) for out, y in zip(outs, ys)]
        for loss in losses:
            loss.backward()
        # waits for the backward pass
        loss_value = sum(float(loss.sum().asscalar()) for loss in losses) / len(yb)
        correct = sum(int((out.argmax(axis=1) == y.astype(out.dtype)).sum().asscalar())
                      for out, y in zip(outs, ys))
        compute_s = time.perf_counter() - t0
        emulated_s = None
        if self.compute is not None:     # pad the real pass to the profile's compute time
            emulated_s = self.compute.next(len(yb) / float(self.batch_size))
            sleep_s = max(0.0, emulated_s - compute_s)
        else:
            sleep_s = (self.slowdown - 1.0) * compute_s
        late_s = 0.0
        if sleep_s > 0:
            t_sleep = time.perf_counter()
            time.sleep(sleep_s)
            # how late the sleep woke: CPU contention shows here first
            late_s = max(0.0, time.perf_counter() - t_sleep - sleep_s)
        t1 = time.perf_counter()
        self.record_balance(t1 - t0, len(yb))
        self.trainer.step(1)                 # rescale_grad = 1 / batch_size already
        mx.nd.waitall()                      # the new weights are here
        step_s = time.perf_counter() - t1
        self.iteration += 1
        iteration = self.iteration
        self.train_log.write(rank=self.rank, iteration=iteration, epoch=epoch, time=time.time(),
                             compute_s=round(compute_s, 6), step_s=round(step_s, 6),
                             batch=len(yb),
                             loss=round(loss_value, 6), sleep_s=round(sleep_s, 6),
                             lr=self.lr, train_accuracy=round(correct / float(len(yb)), 6),
                             sleep_late_s=round(late_s, 6),
                             cpu_s=round(time.process_time(), 4),
                             **({} if emulated_s is None else
                                {'emulated_s': round(emulated_s, 6)}))
        self.check_divergence(loss_value, epoch)
        if self.rank == 0 and self.next_snapshot:
            self.take_snapshot()
        if self.progress is not None:
            self.progress.update(1)
            self.progress.set_postfix(epoch=epoch, loss='%.3f' % loss_value, refresh=False)
        if args.log_interval and iteration % args.log_interval == 0:
            logger.info('epoch %d iteration %d loss %.4f compute %.1f ms step %.1f ms',
                        epoch, iteration, loss_value, 1e3 * compute_s, 1e3 * step_s)
        return loss_value, correct

    def check_divergence(self, loss_value, epoch):
        """Raise :class:`.diverge.Diverged` once this worker's loss is NaN/inf or has grown
        past :data:`.diverge.GROWTH` times its first value."""
        reason = self.guard.check(loss_value)
        if reason is not None:
            self.train_log.close()
            self.leave_job()
            raise Diverged(divergence_message(
                reason, self.args.lr, self.args.kvstore, self.iteration, epoch, self.rank,
                self.num_workers, self.guard.first))

    def leave_job(self):
        """Tell the controller of mxnet-ssp's store that this worker leaves (its ``close``),
        so the other workers are not failed with "disconnected without leaving" while the
        launcher stops the job.  MXNet's own stores have no ``close``; a failure to leave is
        logged, never raised (the divergence is the message)."""
        close = getattr(self.kv, 'close', None)
        if close is None:
            return
        try:
            close()
        except Exception as err:       # noqa: BLE001  (the divergence is what to report)
            logger.warning('could not leave the job cleanly: %s', err)

    #: --snapshot-every keeps at most this many bytes of weights (then stops, with a warning)
    SNAPSHOT_BYTES = 512 << 20

    def take_snapshot(self):
        """Worker 0, --snapshot-every: at the first iteration end past the next multiple of
        the period, keep a copy of the weights (evaluated at the end: :meth:`eval_snapshots`)."""
        # decided on the time that is written, by period number, as the servers' snapshots
        elapsed = round(time.time() - self.start, 4)
        period_no = period_number(elapsed, self.args.snapshot_every)
        if period_no < self.next_snapshot:
            return
        weights = [p.data(self.ctx[0]).asnumpy() for p in self.params]
        self.snapshot_bytes += sum(w.nbytes for w in weights)
        if self.snapshot_bytes > self.SNAPSHOT_BYTES:
            logger.warning('--snapshot-every: the copies would pass %d MB; no more are taken '
                           'after %.1f s', self.SNAPSHOT_BYTES >> 20, elapsed)
            self.next_snapshot = 0
            return
        self.snapshots.append((elapsed, self.iteration, weights))
        self.next_snapshot = period_no + 1

    def eval_snapshots(self):
        """Worker 0: the test accuracy of every snapshot, into ``eval_fixed.jsonl``; the
        network gets its final weights back."""
        if not self.snapshots:
            return
        final = [p.data(self.ctx[0]).copy() for p in self.params]
        log = JsonLines(os.path.join(self.save_dir, 'eval_fixed.jsonl'))
        try:
            for elapsed, iteration, weights in self.snapshots:
                # written into the arrays (Parameter.set_data would reset a dist store)
                for p, w in zip(self.params, weights):
                    for array in p.list_data():
                        array[:] = w
                log.write(elapsed_s=elapsed, iteration=iteration,
                          accuracy=evaluate(self.net, self.eval_loader, ctx=self.ctx[0]))
        finally:
            log.close()
        for p, w in zip(self.params, final):
            for array in p.list_data():
                array[:] = w
        self.snapshots = []

    def finish(self):
        """Wait for every worker; worker 0 then reads the final weights, evaluates them,
        saves ``model-final`` and writes ``summary.json``."""
        kv = self.kv
        # Wait for every worker, then read the weights on the servers: under ASP/SSP
        # the others may still have pushed after worker 0's last pull.  (dist_sync keeps
        # summed gradients, not weights, on its servers: its workers all hold the weights.)
        distributed = kv.type.startswith('dist')
        if distributed:
            kv._barrier()             # elastic: every worker not lost (the controller's)
        # elastic: the lowest rank not lost evaluates, and saves (kv.leader; 0 otherwise)
        if self.rank != getattr(kv, 'leader', 0):
            logger.info('done: %d iterations in %.1f s', self.iteration, time.time() - self.start)
            return
        if self.eval_loader is None:          # worker 0 was lost: this one takes over
            from .. import loader
            self.eval_loader = loader.eval_loader(self.test_set,
                                                  loader_workers=self.args.num_data_workers)
            self.eval_log = JsonLines(os.path.join(self.save_dir, 'eval.jsonl'), True)
        if distributed and kv.type != 'dist_sync':
            read_server_weights(kv, self.params)
        self.accuracy = self.record_eval(self.epoch, final=True)
        self.eval_snapshots()
        save_checkpoint(self.net, self.trainer, kv, self.save_dir, 'model-final',
                        self.checkpoint_meta(self.epoch))
        self.eval_log.close()
        wall = time.time() - self.start
        with open(os.path.join(self.save_dir, 'summary.json'), 'w') as f:
            json.dump(self.summary(wall), f, indent=2)
        logger.info('done: final test accuracy %.4f, %d iterations, %.1f s; metrics in %s%s',
                    self.accuracy, self.iteration, wall, self.save_dir, lost_text(kv))

    def balance_summary(self):
        """--balance: the total batch, the last split and when it changed (None without)."""
        bal = self.balancer
        if bal is None:
            return None
        return {'total': bal.total, 'split': bal.split, 'switches': bal.switches,
                'period': bal.config.period, 'threshold': bal.config.threshold}

    def summary(self, wall):
        """What ``summary.json`` holds: the settings in effect and the results."""
        args, kv = self.args, self.kv
        staleness, mode = args.staleness, args.dssp_mode
        settings = getattr(kv, 'config', None)       # our stores: the settings in effect
        if settings is not None and settings.synchronous:
            staleness = (str(settings.s_lower) if settings.s_lower == settings.s_upper
                         else '%d,%d' % (settings.s_lower, settings.s_upper))
            mode = settings.mode if kv.type == 'dist_dssp' else None
        return {
            'kvstore': kv.type, 'staleness': staleness, 'dssp_mode': mode,
            'splits': getattr(settings, 'splits', None) if kv.type == 'dist_softsync' else None,
            'num_workers': self.num_workers, 'model': args.model,
            'model_description': describe_model(args.model), 'dataset': args.dataset,
            'data_options': data_options(args),
            'augment': self.augment, 'batch_size': args.batch_size, 'num_gpus': args.num_gpus,
            'devices': [str(c) for c in self.ctx],
            'sync_average': args.sync_average,
            'optimizer': args.optimizer, 'lr': args.lr, 'momentum': args.momentum,
            'wd': args.wd, 'lr_decay': args.lr_decay, 'lr_decay_epoch': args.lr_decay_epochs,
            'lr_decay_period': args.lr_decay_period, 'final_lr': self.lr,
            'num_parameters': int(sum(p.data(self.ctx[0]).size for p in self.params)),
            'slowdown': args.slowdown, 'emulate': args.emulate, 'seed': args.seed,
            'balance': self.balance_summary(), 'resumed_from': args.resume_from,
            'iterations_per_worker': {str(r): n for r, n in
                                      count_iterations(self.save_dir).items()},
            'final_accuracy': self.accuracy, 'wall_time_s': round(wall, 3),
            'elastic': getattr(settings, 'elastic', 0) or None,
            'lost_workers': getattr(kv, 'lost_workers', []),
            'data_path': data_path(kv),
        }


def data_path(kv):
    """Which data path a store is (every arm of a comparison records it): its class, and
    for mxnet-ssp's stores the buckets and whether MXNet's own store took over."""
    if hasattr(kv, 'data_path'):
        return kv.data_path
    return {'store_class': '%s.%s' % (type(kv).__module__, type(kv).__name__), 'buckets': 0,
            'arrays_in_buckets': 0, 'handed_off': None}
