"""Heterogeneity-aware batch balancing (LB-BSP's idea, Chen et al., SoCC 2020).

Each worker measures its compute time per sample; every ``period`` iterations the
workers' rates give a new split of the fixed total batch ``B`` into per-worker
batches ``b_m`` (``min <= b_m <= max``, ``sum b_m = B``) such that all workers
finish an iteration together.  docs/balance.md has the API, the settings, the
hysteresis and what uneven batches do to BatchNorm and the learning rate.

Layers (top to bottom):

* :class:`BatchBalancer` (this module): the worker-side API (``batch_size()``,
  ``record()``, ``split``, ``offset``, ``step_batch``), usable with any distributed store,
  MXNet's own ``dist_sync`` included, and the glue that starts the service on worker 0
  and publishes its address through the store.
* :class:`~mxnet_ssp.controller.balance_service.BalanceService` and ``BalanceClient``: the
  service on a thread of worker 0 and each worker's connection to it, on the controller's
  transport (framed messages, the peer MAC under the service's own context).  Each worker
  reports its rate once per round; when every worker has reported, the service runs the
  policy (O(M log M) once per round, so O(log M) amortized per report, nothing per push).
  Lockstep stores (``dist_sync``, ``dist_ssp`` with s = 0) wait at each round for the
  decision, so every worker switches at the same iteration; the others take the newest
  decision and never wait.
* :class:`BalancePolicy` and :func:`solve_split`: pure decision logic, in
  :mod:`mxnet_ssp.core.split`.

Why worker 0 hosts the service: ``dist_sync`` has no controller and its servers
run MXNet's own updater, so nothing of ours runs on them.  Workers find the
service through the store itself: worker 0 initializes a reserved key with its
address and a fresh secret (packed by :func:`mxnet_ssp.ps.channel.encode_blob`; MXNet's
``init`` stores worker 0's value and ends in a barrier), and every worker pulls it.
"""
import logging
import os
import secrets
import time

from . import config as cfg
from .controller.balance_service import (BalanceClient, BalanceError, BalanceLost,
                                         BalanceService, BalanceTimeout)
from .core.split import (BalancePolicy, equal_split, fit_cost,  # noqa: F401 (re-exported)
                             predicted_time, solve_split)
from .ps.channel import BALANCE_KEY, BALANCE_KEY_STR, decode_blob, encode_blob

__all__ = ['BalanceError', 'solve_split', 'predicted_time', 'equal_split', 'BalancePolicy',
           'BalanceService', 'BatchBalancer', 'fit_cost', 'BALANCE_KEY', 'BALANCE_KEY_STR',
           'LOCKSTEP_TYPES']

logger = logging.getLogger(__name__)

#: Elements of the address vector (:func:`mxnet_ssp.ps.channel.encode_blob`).
ADDRESS_ELEMENTS = 512
#: Store types whose workers step in lockstep: every worker waits at a round for the decision.
LOCKSTEP_TYPES = ('dist_sync', 'dist_device_sync')


def _decode_address(vec):
    answer = decode_blob(vec)
    if not isinstance(answer, dict) or 'port' not in answer:
        raise BalanceError('the balance key holds no address (%r): did worker 0 start '
                           'balancing at the same iteration?' % (answer,))
    return answer


class BatchBalancer:
    """Per-worker batch sizes that make every worker finish an iteration together.

    Parameters
    ----------
    kv : KVStore
        The job's distributed store (any type: MXNet's ``dist_sync`` or one of
        mxnet-ssp's), or a local one (one worker: the whole batch, nothing to balance).
    total : int
        Samples per iteration over all workers, fixed for the whole run.
    min_batch, max_batch, period, threshold, smoothing
        Override ``MXNET_SSP_BALANCE_MIN`` / ``_MAX`` / ``_PERIOD`` / ``_THRESHOLD`` /
        ``_SMOOTHING`` (:func:`mxnet_ssp.config.balance_from_env`).
    initial : sequence of int, optional
        The split of the first rounds (default: equal).
    log_path : str, optional
        Worker 0 appends one JSON line per decision there.
    timeout : float, optional
        Seconds to wait for the service (default ``MXNET_SSP_TIMEOUT``, 300).

    Use, once per iteration::

        b = bal.batch_size()            # collective at round boundaries
        x, y = next_batch(b)            # or: BalancedLoader does both
        with bal.timed():               # or bal.record(seconds, b)
            forward / backward (summed loss)
        trainer.step(bal.step_batch)    # gradient = sum / (B / M)
    """

    def __init__(self, kv, total, min_batch=None, max_batch=None, period=None, threshold=None,
                 smoothing=None, initial=None, log_path=None, timeout=None, environ=None):
        self.kv = kv
        self.rank = int(getattr(kv, 'rank', 0))
        self.num_workers = int(getattr(kv, 'num_workers', 1))
        self.config = conf = cfg.balance_from_env(
            environ, num_workers=self.num_workers, total=total, min_batch=min_batch,
            max_batch=max_batch, period=period, threshold=threshold, smoothing=smoothing)
        self.total = conf.total
        lo, hi = conf.bounds()
        if initial is not None:
            initial = [int(b) for b in initial]
            if (len(initial) != self.num_workers or sum(initial) != self.total
                    or any(not lo <= b <= hi for b in initial)):
                raise cfg.ConfigError(
                    'initial split %r is not valid: expected %d integers in [%d, %d] summing '
                    'to %d' % (initial, self.num_workers, lo, hi, self.total))
        self._policy = BalancePolicy(self.num_workers, self.total, lo, hi, conf.threshold,
                                     initial)
        self.split = list(self._policy.sizes)
        self.version = 0
        self.iteration = 0                # batch_size() calls so far
        self.model = None                 # this worker's (a, c): seconds = a + c * batch
        self._points = {}                 # batch -> smoothed seconds per iteration (4 newest)
        self._measured, self._round = 0, {}
        self.switches = []                # (iteration, split) whenever the split changed
        store = getattr(kv, 'type', 'local')
        settings = getattr(kv, 'config', None)
        self.lockstep = store in LOCKSTEP_TYPES or bool(
            getattr(settings, 'synchronous', False) and settings.s_upper == 0)
        if timeout is None:
            timeout = getattr(settings, 'timeout', None) or cfg.parse_timeout(
                cfg.current(environ).get(cfg.ENV_TIMEOUT)
                or cfg.DEFAULT_TIMEOUT)
        self.timeout = float(timeout)
        self._log_path = log_path
        self._client = self._service = None
        self._closed = False

    # -- what the training loop reads ----------------------------------------
    @property
    def offset(self):
        """Where this worker's batch starts in the iteration's global batch."""
        return sum(self.split[:self.rank])

    @property
    def step_batch(self):
        """``B / M``: pass to ``trainer.step`` (or use ``rescale_grad = 1 / step_batch``).

        Each worker's gradient is then the sum of its per-sample gradients over
        ``B / M``: the sum over the workers (``dist_sync``) is exactly the sum a single
        process computes on all B samples with ``step(B / M)``; ``--sync-average``
        (dividing by M) gives the mean over B.  Asynchronous stores apply each push
        alone; each push then counts in proportion to its samples (docs/balance.md).
        """
        return self.total / float(self.num_workers)

    # -- once per iteration ---------------------------------------------------
    def batch_size(self):
        """This worker's batch for the iteration about to start.

        Every ``period`` iterations this reports the worker's rate; in lockstep
        stores it waits for the decision of the round (every worker switches at the
        same iteration), in the others it takes the newest decision at once.  The
        first report also connects (collective: every worker calls it at the same
        iteration, as it calls every other store operation).
        """
        if self._closed:
            raise BalanceError('worker[%d]: the batch balancer is closed' % self.rank)
        it = self.iteration
        self.iteration += 1
        if self.num_workers > 1 and it > 0 and it % self.config.period == 0:
            self._exchange()
        return self.split[self.rank]

    @property
    def rate(self):
        """This worker's compute seconds per sample (c of its model), None before a report."""
        return None if self.model is None else self.model[1]

    def record(self, seconds, samples):
        """This iteration's compute time (not time spent waiting for the store).

        The first iteration of the run is not counted (it pays MXNet's one-time setup).
        At each report, the round's mean time per iteration for each batch size goes
        into an exponential average per batch size (``smoothing``: the newest round's
        weight; the 4 sizes used last are kept), and :func:`fit_cost` fits
        ``seconds = a + c * batch`` to them.
        """
        if samples <= 0 or not seconds >= 0:
            return
        self._measured += 1
        if self._measured == 1:
            return
        total, count = self._round.get(int(samples), (0.0, 0))
        self._round[int(samples)] = (total + float(seconds), count + 1)

    def _close_round(self):
        alpha = self.config.smoothing
        for b, (total, count) in self._round.items():
            mean = total / count
            old = self._points.pop(b, None)
            self._points[b] = mean if old is None else alpha * mean + (1 - alpha) * old
        while len(self._points) > 4:
            self._points.pop(next(iter(self._points)))
        self._round = {}
        if self._points:
            self.model = fit_cost(self._points)

    def timed(self, samples=None):
        """Context manager: time the block (after ``nd.waitall()``) and :meth:`record` it."""
        balancer = self

        class _Timer:
            def __enter__(self):
                self.start = time.perf_counter()
                return self

            def __exit__(self, *exc):
                if exc[0] is None:
                    from mxnet import nd
                    nd.waitall()
                    balancer.record(time.perf_counter() - self.start,
                                    samples or balancer.split[balancer.rank])
                return False
        return _Timer()

    # -- the exchange ----------------------------------------------------------
    def _exchange(self):
        if self._client is None:
            self._connect()
        self._close_round()
        host, port = self._client.address
        try:
            answer = self._client.report(self.model)
        except BalanceTimeout:
            raise BalanceError(
                'worker[%d]: the balance service at %s:%d did not answer at iteration %d within '
                '%g s (%s): a worker may be stalled or dead'
                % (self.rank, host, port, self.iteration - 1, self.timeout,
                   cfg.ENV_TIMEOUT)) from None
        except BalanceLost as exc:
            if self.lockstep:
                raise BalanceError('worker[%d]: lost the balance service at %s:%d (%s)'
                                   % (self.rank, host, port, exc)) from None
            logger.warning('worker[%d]: balance service gone (%s): keeping the split %s',
                           self.rank, exc, self.split)
            self._closed_service()
            return
        self._adopt(answer)

    def _closed_service(self):
        # keep the split for the rest of the run: no more exchanges
        self.config = cfg.BalanceConfig(**dict(self.config.__dict__, period=1 << 62))

    def _adopt(self, answer):
        if 'error' in answer:
            raise BalanceError('worker[%d]: balance service refused: %s'
                               % (self.rank, answer['error']))
        if answer['version'] != self.version:
            self.version = answer['version']
            if answer['sizes'] != self.split:
                self.split = list(answer['sizes'])
                self.switches.append((self.iteration - 1, list(self.split)))
                logger.info('worker[%d] balance: from iteration %d the split is %s (this '
                            'worker: %d)', self.rank, self.iteration, self.split,
                            self.split[self.rank])

    def _connect(self):
        """Collective: worker 0 starts the service and publishes it in a reserved key."""
        from mxnet import nd
        if self.rank == 0:
            secret = secrets.token_bytes(32)
            from .ps.addresses import advertised_host
            self._service = BalanceService(self._policy, secret, host=advertised_host(),
                                           lockstep=self.lockstep,
                                           log_path=self._log_path).start()
            payload = {'host': self._service.address[0], 'port': self._service.address[1],
                       'secret': secret.hex()}
            vec = nd.array(encode_blob(payload, ADDRESS_ELEMENTS))
        else:
            vec = nd.zeros(ADDRESS_ELEMENTS)
        key = self._init_key(self.kv, vec)
        out = nd.zeros(ADDRESS_ELEMENTS)
        # mxnet-ssp's stores: on MXNet's store under them, outside their data path
        getattr(self.kv, 'pull_reserved', self.kv.pull)(key, out=out)
        answer = _decode_address(out.asnumpy())
        self._client = BalanceClient((answer['host'], int(answer['port'])),
                                     bytes.fromhex(answer['secret']), self.rank,
                                     timeout=self.timeout).connect()

    def _init_key(self, store, vec):
        """Init the reserved key in `store` with its key type (MXNet forbids mixing them):
        mxnet-ssp's stores say theirs and init it outside their data path."""
        from mxnet.base import MXNetError
        string_keys = getattr(store, 'string_keys', None)     # MXNet's stores: unknown
        init = getattr(store, 'init_reserved', store.init)
        order = ([BALANCE_KEY_STR] if string_keys else [BALANCE_KEY]) if string_keys is not None \
            else [BALANCE_KEY, BALANCE_KEY_STR]
        for key in order:
            try:
                init(key, vec)
            except MXNetError as err:
                if 'Mixed key types' not in str(err) or key == order[-1]:
                    raise
                continue
            return key
        raise AssertionError('unreachable')

    def close(self):
        """Leave: the others stop counting this worker.  On worker 0 the service it hosts
        ends once the last worker has left (its thread and port are released).  Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            self._client.leave()
            self._client = None
        if self._service is not None:       # worker 0: ends when the last worker has left
            self._service.finish()
            self._service = None
