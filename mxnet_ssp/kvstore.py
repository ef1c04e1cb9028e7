"""The ``dist_ssp`` and ``dist_dssp`` KVStore types.

A :class:`SSPKVStore` wraps MXNet's native ``dist_async`` store: tensors travel
over MXNet's own ps-lite data path and the servers apply updates as in ASP.
What this class adds is *when a worker may go on*: at the end of every step
it waits until the step's pushes are applied on the servers, reports its clock
to the synchronization controller and holds the step's pulls until the
controller releases it (Algorithm 1 of the DSSP paper).

Worker-side contract
--------------------
* ``push`` and ``pushpull`` return without waiting, except the call that
  completes a step (see :mod:`mxnet_ssp.steps`), which blocks until the
  controller releases this worker.  Pulls of keys pushed in the current step
  are deferred to the release; all other pulls are issued at once.
* One decision per step: the pushes of the step are applied on the servers
  before the clock is reported, and its pulls are issued after the release,
  so a released worker reads every gradient that counted for its release.
* Not thread-safe: call it from one training thread, as MXNet's stores.

The controller lives in the server process that owns the discovery key (see
:mod:`mxnet_ssp.server`); workers find it through the store itself, so any
launcher that starts an MXNet parameter-server job works.
"""
import atexit
import json
import logging
import os
import sys
import time

import numpy as np
from mxnet import ndarray as nd
from mxnet.kvstore.base import KVStoreBase
from mxnet.kvstore.base import create as _native_create

from . import config as cfg
from .client import ControllerClient
from .protocol import ControllerError
from .server import (DISCOVERY_KEY, DISCOVERY_KEY_STR, DISCOVERY_LEN, ServerOptimizer,
                     decode_blob, encode_blob)
from .steps import StepTracker

__all__ = ['SSPKVStore', 'SSPError', 'create']

logger = logging.getLogger(__name__)


class SSPError(RuntimeError):
    """The SSP store cannot go on; the message says why and what to do."""


def _as_list(key):
    return list(key) if isinstance(key, (list, tuple)) else [key]


class SSPKVStore(KVStoreBase):
    """A KVStore of type ``dist_ssp`` (SSP) or ``dist_dssp`` (Dynamic SSP).

    Parameters
    ----------
    store : {'dist_ssp', 'dist_dssp'}
    **settings
        ``staleness`` (``s``, ``'s'``, ``(sL, sU)`` or ``'sL,sU'``), ``mode``
        (``'bounded'`` or ``'paper'``), ``timeout`` (seconds) and
        ``metrics_dir``; anything not given comes from the environment
        (``MXNET_SSP_*``, see :mod:`mxnet_ssp.config`).
    """

    store_type = None

    def __init__(self, store=None, **settings):
        store = store or self.store_type
        self._config = cfg.from_env(store, **settings)
        self._kv = _native_create('dist_async')
        self._rank = self._kv.rank
        self._num_workers = self._kv.num_workers
        self._tracker = StepTracker()
        self._step = None                 # the _Step in progress, None between steps
        self._next_guaranteed = self._config.s_lower >= 1   # is step 1 released for sure?
        self._next_visible = 0            # t_slowest the next fast step may rely on
        self._optimizer_set = False
        self._client = None
        self._clock = 0
        self._closed = False
        self._metrics = None
        self._stats = {'wait_s': 0.0, 'apply_s': 0.0, 'grants': 0, 'max_lead': 0, 'fast': 0,
                       'start': time.time()}
        self.last_release = None
        logger.info('worker[%d] %s', self._rank, self._config.describe())
        atexit.register(self.close)

    # -- identity ------------------------------------------------------------
    @property
    def type(self):
        """The store type: ``'dist_ssp'`` or ``'dist_dssp'``."""
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
        """Steps this worker has completed (pushes reported to the controller)."""
        return self._clock

    #: The :class:`~mxnet_ssp.sync.Release` of the last completed step (None before).
    last_release = None
    #: Every worker's gradients up to this clock are in the weights the last step pulled.
    visible_clock = 0

    @staticmethod
    def is_capable(capability):
        """Whether the store supports `capability`: optimizer, pushpull, broadcast."""
        return capability.lower() in (KVStoreBase.OPTIMIZER, 'pushpull', 'broadcast')

    # -- data path -------------------------------------------------------------
    def init(self, key, value):
        """Initialize `key` on the servers (collective, like the native store)."""
        self._tracker.on_init(_as_list(key))
        self._kv.init(key, value)

    def broadcast(self, key, value, out, priority=0):
        """Initialize `key` with `value` and pull it into `out` (collective)."""
        self._tracker.on_init(_as_list(key))
        self._kv.broadcast(key, value, out, priority=priority)

    def push(self, key, value, priority=0):
        """Push gradients; blocks only when this push completes a step."""
        keys = _as_list(key)
        step = self._begin(keys)
        self._kv.push(key, value, priority=priority)
        step.unpulled.update(keys)
        if self._tracker.on_push(keys):
            self._end_step()

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Pull weights; deferred to the release if `key` was pushed in this step."""
        keys = _as_list(key)
        step = self._step
        if step is None or not any(self._tracker.in_step(k) for k in keys):
            self._kv.pull(key, out=out, priority=priority, ignore_sparse=ignore_sparse)
        elif step.fast:
            self._kv.pull(key, out=out, priority=priority, ignore_sparse=ignore_sparse)
            step.pulled(keys, out)
        else:
            step.deferred.append((key, out, priority, ignore_sparse))

    def pushpull(self, key, value, out=None, priority=0):
        """Push `value` and pull the updated weights into `out` (or `value`)."""
        keys = _as_list(key)
        out = value if out is None else out
        step = self._begin(keys)
        if step.fast:
            self._kv.pushpull(key, value, out=out, priority=priority)
            step.pulled(keys, out)
        else:
            self._kv.push(key, value, priority=priority)
            step.deferred.append((key, out, priority, True))
        if self._tracker.on_push(keys):
            self._end_step()

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Not supported: SSP stores hold dense weights."""
        raise SSPError('%s does not support row_sparse_pull; use dense parameters or dist_async'
                       % self.type)

    # -- optimizer -------------------------------------------------------------
    def set_optimizer(self, optimizer):
        """Send `optimizer` to the servers, which apply every push with it.

        The optimizer is pickled and unpickled on every server, so its class
        must be importable there under the same module path.
        """
        self._kv.set_optimizer(ServerOptimizer(optimizer))
        self._optimizer_set = True

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Delegated to the native store (which refuses distributed stores)."""
        return self._kv.save_optimizer_states(fname, dump_optimizer=dump_optimizer)

    def load_optimizer_states(self, fname):
        """Delegated to the native store (which refuses distributed stores)."""
        return self._kv.load_optimizer_states(fname)

    def __getattr__(self, name):
        if name.startswith('__') or name == '_kv':
            raise AttributeError(name)
        return getattr(self._kv, name)

    # -- synchronization -------------------------------------------------------
    def _ensure_controller(self):
        if self._client is not None:
            return
        if self._closed:
            raise SSPError('worker[%d]: the %s store is closed' % (self._rank, self.type))
        if not self._optimizer_set:
            raise SSPError(
                'worker[%d]: %s needs an updater on the servers before the first push: '
                'call kv.set_optimizer(optimizer) (gluon.Trainer and Module.fit do this when '
                'they update on the kvstore); pushes without an optimizer cannot be applied'
                % (self._rank, self.type))
        request = {'v': 1, 'store': self._config.store, 'num_workers': self._num_workers,
                   's_lower': self._config.s_lower, 's_upper': self._config.s_upper,
                   'mode': self._config.mode, 'timeout': self._config.timeout,
                   'metrics_dir': self._config.metrics_dir}
        blob = nd.array(encode_blob(request), dtype=np.float32)
        # MXNet forbids mixing integer and string keys in one store
        key = DISCOVERY_KEY_STR if self._tracker.string_keys else DISCOVERY_KEY
        self._kv.init(key, nd.zeros(DISCOVERY_LEN, dtype=np.float32))
        self._kv.push(key, blob)
        reply = nd.zeros(DISCOVERY_LEN, dtype=np.float32)
        self._kv.pull(key, out=reply)
        answer = decode_blob(reply.asnumpy())
        if not answer or 'port' not in answer:
            raise SSPError('worker[%d]: no synchronization controller answered on the servers '
                           '(%r); is mxnet-ssp installed on every server host?'
                           % (self._rank, answer))
        if 'error' in answer:
            raise SSPError('worker[%d]: the servers refused to start the controller: %s'
                           % (self._rank, answer['error']))
        mine = (request['s_lower'], request['s_upper'], request['mode'])
        theirs = (answer['s_lower'], answer['s_upper'], answer['mode'])
        if mine != theirs:
            raise SSPError('worker[%d]: this worker was configured with staleness [%d, %d] '
                           'mode %s but the controller runs [%d, %d] mode %s: set %s and %s '
                           'the same for every worker'
                           % ((self._rank,) + mine + theirs
                              + (cfg.ENV_STALENESS, cfg.ENV_DSSP_MODE)))
        client = ControllerClient((answer['host'], answer['port']),
                                  bytes.fromhex(answer['secret']), self._rank,
                                  timeout=self._config.timeout)
        client.connect()
        self._client = client
        if self._config.metrics_dir:
            os.makedirs(self._config.metrics_dir, exist_ok=True)
            path = os.path.join(self._config.metrics_dir, 'worker-%d.jsonl' % self._rank)
            self._metrics = open(path, 'w', buffering=1)
        logger.info('worker[%d] connected to the %s controller at %s:%d',
                    self._rank, self.type, answer['host'], answer['port'])

    def _begin(self, keys):
        """Close a step that ended early, and open a step at its first push."""
        self._ensure_controller()
        if self._tracker.repeats(keys):
            self._tracker.close_early()
            self._end_step()
        if self._step is None:
            self._step = _Step(self._next_guaranteed)
        return self._step

    def _end_step(self):
        """Close the current step: wait for its pushes, report, wait for OK, pull.

        Slow path (the release is not certain): wait until every push of the
        step is applied, report the clock, block until RELEASE, then issue the
        deferred pulls.  Fast path (the previous release already implies this
        one, because the slowest clock never decreases): the pulls were issued
        with their pushes, as in ``dist_async``; wait until they are complete
        (so the pushes are applied), then report; RELEASE comes back at once.
        """
        step, self._step = self._step, None
        t0 = time.perf_counter()
        if step.fast:
            for arr in step.outs:
                arr.wait_to_read()        # each pull follows its push on the server
            if step.unpulled:
                nd.waitall()
        else:
            nd.waitall()                  # every push of this step is applied on the servers
        t1 = time.perf_counter()
        self._clock += 1
        reported_at = time.time()
        try:
            release = self._client.clock(self._clock)
        except ControllerError as err:
            self._fail(err)
        t2 = time.perf_counter()
        if step.fast:
            authorized_at, visible = step.authorized_at, self._next_visible
        else:
            for key, out, priority, ignore_sparse in step.deferred:
                self._kv.pull(key, out=out, priority=priority, ignore_sparse=ignore_sparse)
            authorized_at, visible = reported_at + (t2 - t1), release.t_slowest
        self.last_release = release
        self.visible_clock = visible
        # The slowest clock never decreases: the next push is released for sure
        # if it would be within sL of the slowest now, or holds a granted extra.
        self._next_guaranteed = (release.extra_left > 0
                                 or self._clock + 1 - release.t_slowest <= self._config.s_lower)
        self._next_visible = release.t_slowest
        stats = self._stats
        stats['apply_s'] += t1 - t0
        stats['wait_s'] += t2 - t1
        stats['grants'] += 1 if release.granted else 0
        stats['max_lead'] = max(stats['max_lead'], release.lead)
        stats['fast'] += 1 if step.fast else 0
        if self._metrics is not None:
            self._metrics.write(json.dumps({
                'rank': self._rank, 'clock': self._clock, 'reported_at': reported_at,
                'released_at': authorized_at, 'fast': step.fast,
                'push_s': round(t1 - step.started, 6), 'apply_wait_s': round(t1 - t0, 6),
                'wait_s': round(t2 - t1, 6), 'lead': release.lead,
                't_slowest': release.t_slowest, 'visible_clock': visible,
                'granted': release.granted, 'extra_left': release.extra_left}) + '\n')

    def _fail(self, err):
        """The job cannot go on: raise, and make sure the process will exit.

        MXNet's own shutdown waits in a barrier for every worker, which never
        comes when a peer died or hangs; so if the error is not handled, the
        exit hook ends this process with status 1 instead of hanging.
        """
        global _FATAL
        _FATAL = 'worker[%d]: %s' % (self._rank, err)
        raise SSPError(_FATAL) from err

    def close(self):
        """Leave the job: the controller stops counting this worker.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            self._step = None
            self._client.leave()
            self._client.close()
        if self._metrics is not None:
            self._metrics.close()
        stats = self._stats
        elapsed = max(time.time() - stats['start'], 1e-9)
        summary = ('worker[%d] %s summary: %d iterations, waited %.2f s for OK (%.1f%% of %.1f s), '
                   '%.2f s for pushes to apply, max lead %d, %d grants'
                   % (self._rank, self.type, self._clock, stats['wait_s'],
                      100.0 * stats['wait_s'] / elapsed, elapsed, stats['apply_s'],
                      stats['max_lead'], stats['grants']))
        if logger.isEnabledFor(logging.INFO) and logging.getLogger().handlers:
            logger.info(summary)
        else:   # the script configured no logging: the summary is still promised
            sys.stderr.write(summary + '\n')


_FATAL = None


@atexit.register
def _exit_after_fatal_error():
    # Registered at import, after mxnet's own hooks, so it runs before them (LIFO).
    if _FATAL is not None:
        logger.error('%s -- exiting without waiting for the other workers', _FATAL)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


class _Step:
    """Book-keeping of one step in progress (worker side)."""

    __slots__ = ('fast', 'started', 'authorized_at', 'deferred', 'outs', 'unpulled')

    def __init__(self, fast):
        self.fast = fast                  # released for sure: pull with the pushes
        self.started = time.perf_counter()
        self.authorized_at = time.time()
        self.deferred = []                # slow path: pulls to issue after RELEASE
        self.outs = []                    # fast path: arrays pulled, to wait for
        self.unpulled = set()             # keys pushed but not pulled in this step

    def pulled(self, keys, out):
        """Fast path: `keys` were pulled into `out` (an NDArray or a list of them)."""
        self.unpulled.difference_update(keys)
        self.outs.extend(out if isinstance(out, (list, tuple)) else [out])


def _store_class(name):
    klass = type(name, (SSPKVStore,), {'store_type': name,
                                       '__doc__': 'The %s KVStore type.' % name})
    return KVStoreBase.register(klass)


DistSSP = _store_class('dist_ssp')
DistDSSP = _store_class('dist_dssp')


def create(name, **settings):
    """Create a KVStore; like ``mx.kv.create`` but takes SSP settings.

    Parameters
    ----------
    name : str
        ``'dist_ssp'`` or ``'dist_dssp'`` (with settings), or any MXNet type.
    **settings
        ``staleness``, ``mode``, ``timeout``, ``metrics_dir`` (our types only).

    Examples
    --------
    >>> kv = mxnet_ssp.create('dist_dssp', staleness=(3, 15))   # doctest: +SKIP
    """
    if not isinstance(name, str):
        raise cfg.ConfigError('kvstore type must be a string, got %r' % (name,))
    lowered = name.lower()
    if lowered in cfg.STORE_TYPES:
        return SSPKVStore(lowered, **settings)
    if settings:
        raise cfg.ConfigError('settings %s are only accepted by %s, not by kvstore type %r'
                              % (', '.join(sorted(settings)), ', '.join(cfg.STORE_TYPES), name))
    cfg.check_kvstore_name(lowered)
    return _native_create(lowered)
