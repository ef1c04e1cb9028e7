"""SSPKVStore: the class of every store type of :mod:`mxnet_ssp.kvstore`.

The store itself follows the calls of gluon.Trainer, Module or a script: it opens and
closes steps, sends the optimizer and the job's commands to the servers, and hands each
part of the work to the module that does it:

* :mod:`~mxnet_ssp.worker.bucketing` (:class:`~mxnet_ssp.worker.bucketing.Buckets`): every key's way
  to the servers, on its own key or packed in a bucket (the plan, the buffers and each
  bucket's state); the store hands it each key once per call;
* :mod:`~mxnet_ssp.worker.clock_sync` (:class:`~mxnet_ssp.worker.clock_sync.ClockSync`): this
  worker's clock and its releases by the controller, at each step's end;
* :mod:`~mxnet_ssp.worker.steps` (where a step ends; what it measures),
  :mod:`~mxnet_ssp.worker.slots` (the key layout of slot mode), :mod:`~mxnet_ssp.worker.native_store`
  (MXNet's store under it), :mod:`~mxnet_ssp.ps.channel` (what travels to the servers),
  :mod:`~mxnet_ssp.worker.shutdown` (when it shuts down).

Worker-side contract
--------------------
* ``push`` and ``pushpull`` return without waiting, except, in SSP/DSSP, the
  call that completes a step (see :mod:`mxnet_ssp.worker.steps`), which blocks
  until the controller releases this worker.  Pulls of keys pushed in the
  current step are deferred to the release unless the release is already
  certain; all other pulls are issued at once.
* One decision per step: the pushes of the step are applied on the servers
  before the clock is reported, and its pulls read weights the decision
  allowed, so a released worker reads every gradient that counted for its
  release.
* Learning-rate changes (``Trainer.set_learning_rate``, the optimizer's
  ``lr_scheduler`` called with this worker's step number, as MXNet counts
  updates) reach the servers before the first push of the next step (rank 0
  sends them, after its earlier pushes are applied).
* Not thread-safe: call it from one training thread, as MXNet's stores.
"""
import logging
import os
import pickle
import sys
from types import SimpleNamespace

from mxnet import ndarray as nd
from mxnet.base import py_str
from mxnet.kvstore.base import KVStoreBase

from .worker import shutdown
from . import config as cfg
from .config import job_settings, sender
from .ps.commands import ABORT, Control, UpdaterSpec
from .worker.native_store import FreedNative, create_native, free_native
from .worker.slots import KeyLayout, as_list, as_values, has_row_sparse
from .worker.clock_sync import ClockSync
from .worker.steps import StepTracker
from .worker.bucketing import Buckets
from ._hooks import module_done

__all__ = ['SSPKVStore', 'SSPError']

logger = logging.getLogger(__name__)


class SSPError(RuntimeError):
    """The store cannot go on; the message says why and what to do."""


class SSPKVStore(KVStoreBase):
    """A distributed KVStore of one of the types above.

    Parameters
    ----------
    store : {'dist_ssp', 'dist_dssp', 'dist_async', 'dist_softsync'}
    **settings
        ``staleness`` (``s``, ``'s'``, ``(sL, sU)`` or ``'sL,sU'``), ``mode``
        (``'bounded'``, ``'paper'`` or ``'threshold'``, see :mod:`mxnet_ssp.core.sync`)
        and ``timeout`` (seconds) for SSP/DSSP;
        ``splits`` (n) for ``dist_softsync``; ``metrics_dir`` and
        ``staleness_log`` for all.  Anything not given comes from the
        environment (``MXNET_SSP_*``, see :mod:`mxnet_ssp.config`).
    """

    store_type = None

    def __init__(self, store=None, **settings):
        store = store or self.store_type
        given_bucket_bytes = settings.pop('bucket_bytes', None)
        self._bucket_bytes = cfg.bucket_bytes(value=given_bucket_bytes)
        self._fit_buckets = cfg.buckets_fit_model(value=given_bucket_bytes)
        self._chunk_bytes = cfg.chunk_bytes(value=settings.pop('chunk_bytes', None))
        self._host_updates = cfg.host_updates()
        self._config = cfg.from_env(store, **settings)
        self._rejoining = cfg.rejoining()   # a replacement of a lost worker (elastic mode)
        if self._rejoining and not self._config.elastic:
            raise SSPError('%s=1 (a restarted worker rejoining the job) needs elastic mode: '
                           'set %s in every process' % (cfg.ENV_REJOIN, cfg.ENV_ELASTIC))
        if self._config.store in cfg.SERVER_SYNC_TYPES and self._config.elastic:
            raise SSPError('%s (BSP) cannot go on without a lost worker: MXNet\'s servers wait '
                           'for every worker\'s push of each key; unset %s, or use dist_ssp, '
                           'dist_dssp or dist_async for elastic training'
                           % (self._config.store, cfg.ENV_ELASTIC))
        self._kv = create_native(self._config.timeout,
                                 'dist_sync' if self._config.store in cfg.SERVER_SYNC_TYPES
                                 else 'dist_async')
        self._rank = self._kv.rank
        cfg.note_worker_defaults(self._rank)     # a note held until the rank is known: rank 0's
        if self._rejoining and self._rank == 0:
            # MXNet's own free of the native store would wait in ps-lite's barrier for ever
            free_native(self._kv, self._config.timeout, 0, barrier=False)
            raise SSPError('worker 0 cannot rejoin: MXNet\'s init on rank 0 pushes its initial '
                           'values, which the servers would apply as a gradient to the trained '
                           'weights; the job goes on without it (docs/elastic.md)')
        self._rejoin_pulls = []           # rejoining, first step: (key, out) to pull after it
        self._num_workers = self._kv.num_workers
        self._num_servers = cfg.num_servers()     # ps-lite read the same variable
        if self._config.store == 'dist_softsync':
            cfg.parse_splits(self._config.splits, self._num_workers,
                             source='splits' if 'splits' in settings else cfg.ENV_SOFTSYNC_SPLITS)
        self._tracker = StepTracker()
        self._step = None                 # the Step in progress, None between steps
        # this worker's clock and releases, through the controller (mxnet_ssp.worker.clock_sync)
        self._sync = ClockSync(self._config, self._rank, self._num_workers, SSPError)
        self._optimizer = None
        self._keys = KeyLayout(self._rank, self._num_servers)   # M workers in slot mode
        self._lr_sent = None
        self._closed = False
        self._sent_optimizer = None
        # every key's way to the servers: its own key, or a bucket (mxnet_ssp.worker.bucketing)
        self._buckets = Buckets(self._kv, self._keys, self._tracker, self._num_servers,
                                self._bucket_bytes, cfg.host_copies(), self._config.timeout,
                                SSPError, chunk_bytes=self._chunk_bytes,
                                fit_buckets=self._fit_buckets)
        logger.info('worker[%d] %s', self._rank, self._config.describe())
        if self._rank == 0:
            logger.info('worker[0] data path %s: buckets of %s, chunks %s, window %s',
                        'on one host' if cfg.job_on_one_host() else 'across hosts',
                        ('up to %d bytes, fitted to the model' % self._bucket_bytes
                         if self._fit_buckets else '%d bytes' % self._bucket_bytes)
                        if self._bucket_bytes else 'off',
                        'above %d bytes' % self._chunk_bytes if self._chunk_bytes else 'off',
                        self._buckets.window or 'off')
        shutdown.adopt(self)      # closed and freed at exit in the same phase on every worker

    # -- identity ------------------------------------------------------------
    @property
    def type(self):
        """The store type, e.g. ``'dist_dssp'``."""
        return self._config.store

    @property
    def rank(self):
        """This worker's rank, as assigned by ps-lite."""
        return self._rank

    @property
    def num_workers(self):
        """Number of workers in the job."""
        return self._num_workers

    @property
    def config(self):
        """The :class:`~mxnet_ssp.config.SyncConfig` in effect."""
        return self._config

    @property
    def clock(self):
        """Steps this worker has completed."""
        return self._sync.clock

    @property
    def slot_mode(self):
        """True when every worker pushes and pulls through its own key slots."""
        return self._keys.slot_mode

    @property
    def data_path(self):
        """What this store's traffic travels as: its class, the buckets of its plan (0 before
        the first step ends, or with one key per array), the arrays they hold, and why MXNet's
        own store serves every call (None: it does not)."""
        return dict({'store_class': '%s.%s' % (type(self).__module__, type(self).__name__)},
                    **self._buckets.describe(), handed_off=self.handed_off)

    @property
    def _updater(self):
        """What gluon.Trainer reads as ``kvstore._updater.optimizer`` after load_states."""
        return SimpleNamespace(optimizer=self._optimizer)

    @property
    def last_release(self):
        """The :class:`~mxnet_ssp.core.sync.Release` of the last completed step (None before)."""
        return self._sync.last_release

    @property
    def visible_clock(self):
        """Every worker's gradients up to this clock are in the weights the last step pulled."""
        return self._sync.visible_clock

    @property
    def lost_workers(self):
        """Elastic mode: the workers the controller dropped so far, as this worker has heard
        (dicts ``rank``, ``clock``, ``after_s``; complete after :meth:`close`)."""
        return self._sync.lost

    @property
    def leader(self):
        """The rank that sends the job's commands to the servers (learning rate, save, load):
        0, or in elastic mode the lowest rank not lost."""
        return self._sync.leader

    def _barrier(self):
        """Wait for every worker (MXNet's ``kv._barrier()``).  Elastic mode, once connected to
        the controller: every worker neither lost nor finished, through the controller (ps-lite's
        barrier would wait for lost workers for ever)."""
        if self._config.elastic and self._sync.client is not None and not self._closed:
            self._sync.barrier()
        else:
            self._kv._barrier()

    @staticmethod
    def is_capable(capability):
        """Whether the store supports `capability`: optimizer, pushpull, broadcast."""
        return capability.lower() in (KVStoreBase.OPTIMIZER, 'pushpull', 'broadcast')

    # -- reserved keys: outside the data path ------------------------------------------
    @property
    def string_keys(self):
        """Whether this store's keys are strings (MXNet forbids mixing them with integers)."""
        return self._tracker.string_keys

    def init_reserved(self, key, value):
        """Initialize `key` with `value` on MXNet's store under this one, outside the data
        path: a key that another part of mxnet-ssp reserves (the balance service's address).
        Collective, like :meth:`init`; MXNet's numbering of string keys counts it."""
        self._kv.init(key, value)
        self._keys.count_string_keys(key)

    def pull_reserved(self, key, out):
        """Pull a key of :meth:`init_reserved` into `out` (returns without waiting)."""
        self._kv.pull(key, out=out)

    # -- data path -------------------------------------------------------------
    def init(self, key, value):
        """Initialize `key` on the servers (collective, like the native store)."""
        if has_row_sparse(value):
            self._sparse_case('key %r' % (key,))
        self._tracker.on_init(as_list(key), as_values(key, value))
        self._buckets.init(key, value)

    def broadcast(self, key, value, out, priority=0):
        """Initialize `key` with `value` and pull it into `out` (collective)."""
        if has_row_sparse(value) or has_row_sparse(out):
            self._sparse_case('key %r' % (key,))
        self._tracker.on_init(as_list(key), as_values(key, value))
        self._buckets.broadcast(key, value, out, priority)

    def push(self, key, value, priority=0):
        """Push gradients; in SSP/DSSP blocks only when this push completes a step."""
        if self._buckets.plan is None and has_row_sparse(value):
            self._sparse_case('a push of key %r' % (key,))
        keys = as_list(key)
        step = self._begin(keys)
        if self._buckets.learning:
            value = self._buckets.first_step(key, keys, value)
            if self._rejoining:
                self._rejoin_step(keys, None, priority)
                return
        self._buckets.push(key, value, step, priority)
        step.unpulled.update(keys)
        if self._tracker.on_push(keys):
            self._finish_step(priority)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Pull weights; deferred to the release if `key` was pushed in this SSP step."""
        keys = as_list(key)
        step = self._step
        in_step = step is not None and any(self._tracker.in_step(k) for k in keys)
        if in_step and self._rejoining:
            self._rejoin_pulls.append((key, out))
            return
        if in_step and not step.fast:
            step.deferred.append((key, out, priority, ignore_sparse))
            return
        self._buckets.pull(key, out, priority, ignore_sparse, step if in_step else None)

    def pushpull(self, key, value, out=None, priority=0):
        """Push `value` and pull the updated weights into `out` (or `value`)."""
        step = self._step
        if (step is not None and not self._closed
                and self._buckets.pushpull_one(key, value, out, step, priority,
                                               sys._getframe(1))):
            # one bucketed key in a step in progress, as gluon.Trainer and Module push every
            # step (335 calls per ResNet-110 step): what _begin does for it, without its
            # other cases
            if self._tracker.on_push((key,)):
                self._finish_step(priority)
            return
        if self.handed_off is not None or (self._buckets.plan is None and (
                (has_row_sparse(value) and self._sparse_case('a push of key %r' % (key,)))
                or (self._optimizer is None and self._no_optimizer_case()))):
            return self._kv.pushpull(key, value, out=out, priority=priority)
        keys = as_list(key)
        out = value if out is None else out
        step = self._begin(keys)
        if self._buckets.learning:
            value = self._buckets.first_step(key, keys, value)
            if self._rejoining:
                self._rejoin_step(keys, (key, out), priority)
                return
        self._buckets.pushpull(key, value, out, step, priority, sys._getframe(1))
        if self._tracker.on_push(keys):
            self._finish_step(priority)

    def refresh_slots(self, key, priority=0):
        """Slot mode: make the servers copy their latest weights into this worker's slots of
        `key` (or a list), so that the next pull of it reads them (a plain pull returns what
        this worker last pulled).  Returns without waiting; not ordered after an earlier push
        (docs/stores.md, "Slot mode")."""
        self._buckets.refresh(key, priority)

    # -- a step's end; a rejoining worker's first step (elastic mode) ------------------
    def _rejoin_step(self, keys, pull, priority):
        """A rejoining worker's first step: note the keys (the bucket plan is learnt from
        them at the step's end, as every worker did at its first step), push nothing (the
        servers have taken the small arrays' weights into buckets: a push to their own keys
        would update copies nobody reads), pull after the step."""
        if pull is not None:
            self._rejoin_pulls.append(pull)
        if self._tracker.on_push(keys):
            self._finish_step(priority)

    def _rejoined(self):
        """After a rejoiner's first step: pull the current weights into every array the step
        asked for (through the buckets, refreshed in slot mode), then train as any worker."""
        pulls, self._rejoin_pulls, self._rejoining = self._rejoin_pulls, [], False
        self._buckets.pull_released([(key, out, 0, True) for key, out in pulls])
        self._sync.wait_applied()

    def _finish_step(self, priority):
        """The step's last push: push the buckets still holding gradients, then end it."""
        self._buckets.end_step(self._step, priority)
        step, self._step = self._step, None
        self._sync.end_step(step, self._buckets.pull_released)
        if self._buckets.learning:
            self._buckets.learn(self._optimizer, self._sent_optimizer, self._rejoining,
                                self._send_control)
        if self._rejoining:
            self._rejoined()

    # -- what the data path does not serve: refused, or handed to MXNet (stock_names) ---
    #: Set by :class:`mxnet_ssp.stock_names.StockNames` once MXNet's own store serves
    #: every call; the stores named by mxnet-ssp never hand off.
    handed_off = None

    def _sparse_case(self, what):
        """`what` holds row_sparse arrays, which this store's data path does not serve."""
        raise SSPError('worker[%d]: %s: %s holds row_sparse arrays, which mxnet-ssp\'s stores '
                       'do not serve; use dense parameters (e.g. Embedding(sparse_grad=False)), '
                       'or dist_async, which hands them to MXNet\'s own store'
                       % (self._rank, self.type, what))

    def _no_optimizer_case(self):
        """A push before set_optimizer: False here (the push is refused, naming the call)."""
        return False

    def _refuse(self, message):
        raise SSPError(message)

    def set_gradient_compression(self, compression_params):
        """Refused: the buckets and the servers' update rules of this store are not shown to
        keep MXNet's compression exact."""
        raise SSPError('worker[%d]: %s does not support gradient compression (%r); use '
                       'dist_async or dist_sync, which hand it to MXNet\'s own store, or train '
                       'without it' % (self._rank, self.type, compression_params))

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Passed to MXNet's store for ``dist_async`` with a plain optimizer; else refused."""
        if self._config.synchronous or self._keys.slot_mode:
            raise SSPError('%s%s does not support row_sparse_pull; use dense parameters, or '
                           'dist_async with a plain optimizer'
                           % (self.type, ' in slot mode' if self._keys.slot_mode else ''))
        return self._kv.row_sparse_pull(key, out=out, priority=priority, row_ids=row_ids)

    # -- the optimizer on the servers, and the job's commands ---------------------------
    def set_optimizer(self, optimizer):
        """Send `optimizer` to the servers, which apply every push with it.

        The optimizer is pickled and unpickled on every server, so its class
        must be importable there under the same module path.  Call it before
        the first ``init``/``broadcast`` (gluon.Trainer and Module do): rules
        that need the sender of each gradient switch the store to slot mode.
        """
        module = type(optimizer).__module__
        if module == '__main__':
            raise SSPError('optimizer class %s is defined in the script (__main__); the servers '
                           'unpickle it and cannot import it from there: define it in a module '
                           'that every server host can import' % type(optimizer).__name__)
        # imported here: `import mxnet_ssp.optim` before mxnet imports this module while
        # optim is half-initialized (its `import mxnet` runs the store registration)
        from .optim import STORES_THAT_REPORT, StalenessRequiredError, is_worker_aware
        if self._config.store in cfg.SERVER_SYNC_TYPES and is_worker_aware(optimizer):
            raise StalenessRequiredError(
                '%s needs a store that reports the staleness of each gradient: use one of %s '
                '(in %s every gradient is fresh: MXNet\'s servers sum a step\'s gradients)'
                % (type(optimizer).__name__, STORES_THAT_REPORT, self._config.store))
        slots = is_worker_aware(optimizer) or self._config.store == 'dist_softsync'
        if slots and self._tracker.expected and not self._keys.slot_mode:
            raise SSPError('worker[%d]: %s needs the sender of every gradient, so set the '
                           'optimizer before the first init/broadcast of this store'
                           % (self._rank, type(optimizer).__name__))
        self._keys.workers = self._num_workers if slots else None
        softsync_c = 1
        if self._config.store == 'dist_softsync':
            softsync_c = max(1, self._num_workers // self._config.splits)
        from .optim import with_parameter_multipliers
        self._sent_optimizer = with_parameter_multipliers(optimizer)
        spec = UpdaterSpec(self._sent_optimizer, num_workers=self._num_workers, slots=bool(slots),
                           num_servers=self._num_servers, softsync_c=softsync_c,
                           metrics_dir=self._config.metrics_dir,
                           staleness_log=self._config.staleness_log,
                           host_updates=self._host_updates,
                           agree=sender(self._rank, job_settings(
                               self._config, self._bucket_bytes, self._host_updates,
                               bytes_per_chunk=self._chunk_bytes)))
        if not self._rejoining:           # the servers have it, with the job's optimizer state
            self._kv.set_optimizer(spec)
        self._optimizer = optimizer
        self._lr_sent = self._current_lr()
        # chunks (mxnet_ssp.worker.chunking) carry their array's multipliers to the servers
        from .optim import server_multipliers
        sent = self._sent_optimizer
        self._buckets.chunks.multipliers = lambda index: server_multipliers(sent, index)
        self._buckets.chunks.send_control = self._send_control

    def _current_lr(self):
        opt = self._optimizer
        if opt is None:
            return None
        if opt.lr_scheduler is not None:
            # MXNet counts the update being made: step t uses lr_scheduler(t)
            return float(opt.lr_scheduler(self._sync.clock + 1))
        return float(opt.lr)

    def _send_control(self, action, payload):
        """Run a command on every server, after this worker's pushes so far are applied."""
        body = py_str(pickle.dumps(Control(action, payload), 0))
        nd.waitall()        # commands do not queue behind pushes still in MXNet's engine
        self._kv._send_command_to_servers(0, body)

    def _sync_learning_rate(self):
        """The leader tells the servers about a learning-rate change (MXNet never does, #15919)."""
        if self._optimizer is None or self._rank != self.leader:
            return
        lr = self._current_lr()
        if lr != self._lr_sent:
            self._send_control('set_lr', lr)
            self._lr_sent = lr

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Ask every server to save its optimizer state to ``fname + '.server-<rank>'``.

        Only the leader (rank 0; elastic: the lowest rank not lost) sends the request; each
        server writes on its own host.  The state is the optimizer's per-key
        state (momentum, MeanSquare, ...), its counters and learning rate, and
        in slot mode the canonical weights, versions and per-worker backups.
        """
        if self._optimizer is None:
            raise SSPError('save_optimizer_states before set_optimizer: nothing to save')
        if self._rank == self.leader:
            self._send_control('save', os.path.abspath(fname))

    def load_optimizer_states(self, fname):
        """Restore what :meth:`save_optimizer_states` wrote (collective: every worker calls it)."""
        if self._optimizer is None:
            raise SSPError('load_optimizer_states before set_optimizer: set the optimizer first')
        if self._rank == self.leader:
            self._send_control('load', os.path.abspath(fname))
        self._barrier()

    def __getattr__(self, name):
        if name.startswith('__') or name == '_kv':
            raise AttributeError(name)
        return getattr(self._kv, name)

    # -- opening a step ----------------------------------------------------------------
    def _check_ready(self):
        if self._closed:
            raise SSPError('worker[%d]: the %s store is closed' % (self._rank, self.type))
        if self._optimizer is None:
            raise SSPError(
                'worker[%d]: %s needs an updater on the servers before the first push: '
                'call kv.set_optimizer(optimizer) (gluon.Trainer and Module.fit do this when '
                'they update on the kvstore); pushes without an optimizer cannot be applied'
                % (self._rank, self.type))

    def _ensure_controller(self):
        if self._sync.client is not None:
            return
        self._check_ready()
        self._sync.connect(self._kv, self._keys, self._tracker.string_keys,
                           job_settings(self._config, self._bucket_bytes, self._host_updates,
                                        bytes_per_chunk=self._chunk_bytes),
                           self._rejoining, self.type)

    def _begin(self, keys):
        """Close a step that ended early, and open a step at its first push."""
        if self._config.reports_clock:
            self._ensure_controller()
        else:
            self._check_ready()
        if self._tracker.repeats(keys):
            self._tracker.close_early()
            self._buckets.keys_learned()
            self._finish_step(0)
        if self._step is None:
            self._sync_learning_rate()    # a change made since the last step applies to this one
            self._step = self._sync.new_step()
        return self._step

    # -- leaving the job -------------------------------------------------------------
    def abort_servers(self, message):
        """The job failed on this worker (`message`): make every server end now.  Returns
        whether the notice was sent: only by the stores without a controller (the
        asynchronous ones and BSP outside elastic mode).  Where a controller runs, it fails the
        job itself and tells every worker which rank failed; in elastic mode the job goes on
        without this worker.  Called by the exit hook of :mod:`mxnet_ssp.worker.shutdown`."""
        if (self._config.elastic or self._sync.client is not None
                or isinstance(self._kv, FreedNative)):
            return False
        body = py_str(pickle.dumps(Control(ABORT, message), 0))
        self._kv._send_command_to_servers(0, body)
        return True

    def free_native(self):
        """Free MXNet's native store: ps-lite's finalize barrier, so it waits for every node.

        Called at exit by :mod:`mxnet_ssp.worker.shutdown`, after :meth:`close`, on
        every worker in the same phase (before MXNet's own exit hook stops the
        engine).  Blocks until every worker of the job gets there; later uses
        of the store raise :class:`SSPError`.  Idempotent.
        """
        native = self._kv
        if isinstance(native, FreedNative):
            return
        self._kv = self._buckets.native = FreedNative(self._rank, self.type, SSPError)
        # elastic: ps-lite's finalize barrier would wait for lost workers for ever
        free_native(native, self._config.timeout, self._rank,
                    barrier=not self._config.elastic)

    def close(self):
        """Leave the job: the controller stops counting this worker.  Idempotent.

        Never blocks: the other workers are released at once.  MXNet's native
        store stays allocated until exit, where every worker frees it in the
        same phase (see :mod:`mxnet_ssp.worker.shutdown`); until then the store
        refuses pushes and pulls.
        """
        if self._closed:
            return
        self._closed = True
        if self._sync.client is not None:
            self._step = None
        for line in self._sync.leave(self.type):
            self._say(line)

    def _say(self, summary):
        if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
            logger.info(summary)
        else:   # the script configured no logging: the summary is still promised
            sys.stderr.write(summary + '\n')


# the store types are registered now if MXNet's import finished inside this module's import
module_done(__name__)   # (mxnet_ssp/__init__.py: _STORE_CHAIN)
