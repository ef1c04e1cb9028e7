"""A worker's clock, kept in step with the others' by the synchronization controller.

At the end of every step the store hands its :class:`~mxnet_ssp.worker.steps.Step` to
:meth:`ClockSync.end_step`, which (SSP/DSSP) waits until the step's pushes are applied,
reports the clock and blocks until the controller's RELEASE (Algorithm 1,
:mod:`mxnet_ssp.core.sync`); asynchronous stores only count the step (and, in elastic mode,
tell the controller, which never holds them).  It also says whether the next step's release is
already certain (the fast path: its pulls go with its pushes), and holds what elastic mode
asks of the controller: the lost workers, the leader, a barrier of the workers still in the job.

Contracts
---------
* Not thread-safe; called by the store from the one training thread.
* :meth:`connect`, :meth:`end_step` and :meth:`barrier` block, each bounded by the store's
  ``MXNET_SSP_TIMEOUT``; a failure raises the store's error after marking the process to
  exit with status 1 (:func:`mxnet_ssp.worker.shutdown.fatal`), since MXNet's own shutdown would
  wait for a peer that died.
* :meth:`leave` never blocks: the other workers are released at once.
"""
import logging
import time

from mxnet import ndarray as nd

from ..ps import process_exit
from . import shutdown
from . import discovery
from .. import config as cfg
from .._hooks import module_done
from ..controller.client import ControllerClient
from ..controller.protocol import ControllerError, describe_losses
from ..ps.channel import DISCOVERY_KEY, DISCOVERY_KEY_STR
from .steps import Step, StepLog

__all__ = ['ClockSync', 'elastic_summary']

logger = logging.getLogger(__name__)


class ClockSync:
    """This worker's clock and its releases.

    Parameters
    ----------
    config : :class:`~mxnet_ssp.config.SyncConfig`
    rank, num_workers : int
    error : exception class
        What a failure raises (the store's :class:`~mxnet_ssp.store.SSPError`).

    Attributes
    ----------
    clock : int
        Steps this worker has completed (a rejoiner starts at the clock it rejoined at).
    start_clock : int
        The clock this process started at.
    last_release : :class:`~mxnet_ssp.core.sync.Release` or None
        The release of the last completed step.
    visible_clock : int
        Every worker's gradients up to this clock are in the weights the last step pulled.
    client : :class:`~mxnet_ssp.controller.client.ControllerClient` or None
        None until :meth:`connect`.
    """

    def __init__(self, config, rank, num_workers, error):
        self._config, self._rank, self._num_workers = config, rank, num_workers
        self._error = error
        self.clock = self.start_clock = 0
        self.last_release = None
        self.visible_clock = 0
        self.client = None
        self._next_guaranteed = config.s_lower >= 1   # is step 1 released for sure?
        self._next_visible = 0            # t_slowest the next fast step may rely on
        self._log = StepLog(rank, config.metrics_dir)

    def connect(self, native, keys, string_keys, agree, rejoining, store_type):
        """Find the controller through MXNet's store `native` (collective: every worker's
        first push) and join it.  `keys`: the store's key layout, told of the discovery key."""
        # MXNet forbids mixing integer and string keys in one store.  One key, so one
        # server, for every worker (also in slot mode: the servers answer a discovery
        # push before decoding slots, and a later string key skips to a whole block)
        key = DISCOVERY_KEY_STR if string_keys else DISCOVERY_KEY
        try:
            answer = discovery.request_controller(native, key, self._config, self._num_workers,
                                                  self._rank, agree)
        except discovery.DiscoveryError as err:
            raise self._error(str(err)) from err
        finally:
            keys.count_string_keys(key)
        client = ControllerClient((answer['host'], answer['port']),
                                  bytes.fromhex(answer['secret']), self._rank,
                                  timeout=self._config.timeout, rejoin=rejoining,
                                  settings=agree, liveness=self._config.liveness)
        try:
            client.connect()
        except ControllerError as err:
            self.fail(err)
        self.client = client
        if rejoining:
            self.clock = self.start_clock = client.start_clock
            logger.warning('worker[%d] rejoined the job at clock %d: this first step only '
                           'learns the layout of the keys; its gradients are not pushed',
                           self._rank, self.clock)
        self._log.open()
        logger.info('worker[%d] connected to the %s controller at %s:%d',
                    self._rank, store_type, answer['host'], answer['port'])

    def new_step(self):
        """The book-keeping of the next step; ``fast`` when its release is certain
        (asynchronous stores never hold a worker: every step is "released for sure")."""
        return Step(self._next_guaranteed or not self._config.synchronous)

    def end_step(self, step, pull_released):
        """Close `step`.

        Asynchronous stores only count the step.  SSP/DSSP, slow path (the
        release is not certain): wait until every push of the step is
        applied, report the clock, block until RELEASE, then issue the
        deferred pulls (``pull_released(step.deferred)``).  Fast path
        (the previous release already implies this one, because the slowest
        clock never decreases): the pulls were issued with their pushes, as
        in ``dist_async``; wait until they are complete (so the pushes are
        applied), then report; RELEASE comes back at once.
        """
        if not self._config.synchronous:
            self.clock += 1
            if self.client is not None:       # elastic: the controller counts, never holds
                try:
                    self.last_release = self.client.clock(self.clock)
                except ControllerError as err:
                    self.fail(err)
            return
        t0 = time.perf_counter()
        with process_exit.bounded(self._config.timeout, self._no_apply_message()):
            if step.fast:
                for arr in step.outs:
                    arr.wait_to_read()        # each pull follows its push on the server
                if step.unpulled:
                    nd.waitall()
            else:
                nd.waitall()                  # every push of this step is applied on the servers
        t1 = time.perf_counter()
        self.clock += 1
        reported_at = time.time()
        try:
            release = self.client.clock(self.clock)
        except ControllerError as err:
            self.fail(err)
        t2 = time.perf_counter()
        if step.fast:
            authorized_at, visible = step.authorized_at, self._next_visible
        else:
            pull_released(step.deferred)
            authorized_at, visible = reported_at + (t2 - t1), release.t_slowest
        self.last_release = release
        self.visible_clock = visible
        # The slowest clock never decreases: the next push is released for sure
        # if it would be within sL of the slowest now, or holds a granted extra.
        self._next_guaranteed = (release.extra_left > 0
                                 or self.clock + 1 - release.t_slowest <= self._config.s_lower)
        self._next_visible = release.t_slowest
        self._log.record(self.clock, step, release, (t0, t1, t2), reported_at, authorized_at,
                         visible)

    def wait_applied(self):
        """Block until this worker's pushes so far are applied on the servers (bounded)."""
        with process_exit.bounded(self._config.timeout, self._no_apply_message()):
            nd.waitall()

    def _no_apply_message(self):
        return ('worker[%d]: the servers did not apply the pushes of step %d within %g s (%s): '
                'a server process died or is stopped'
                % (self._rank, self.clock + 1, self._config.timeout, cfg.ENV_TIMEOUT))

    # -- elastic mode ------------------------------------------------------------------------
    @property
    def lost(self):
        """The workers the controller dropped so far, as this worker has heard (dicts
        ``rank``, ``clock``, ``after_s``)."""
        return list(self.client.lost) if self.client is not None else []

    @property
    def leader(self):
        """0, or in elastic mode the lowest rank not lost."""
        if self.client is None or not self.client.lost:
            return 0
        lost = {x['rank'] for x in self.client.lost}
        return min(r for r in range(self._num_workers) if r not in lost)

    def barrier(self):
        """Wait for every worker neither lost nor finished, through the controller."""
        try:
            self.client.barrier()
        except ControllerError as err:
            self.fail(err)

    def leave(self, store_type):
        """Leave the job (the controller stops counting this worker) and close the metrics.
        Returns the lines to print: the step summary (SSP/DSSP) and the elastic summary."""
        lost = []
        if self.client is not None:
            lost = self.client.leave()
            self.client.close()
        self._log.close()
        lines = []
        if self._config.synchronous:
            lines.append(self._log.summary(store_type, self.clock - self.start_clock))
        if self._config.elastic:
            lines.append(elastic_summary(self._rank, store_type, self.clock, lost))
        return lines

    def fail(self, err):
        """The job cannot go on: raise, and make sure the process will exit.

        MXNet's own shutdown waits in a barrier for every worker, which never
        comes when a peer died or hangs; so if the error is not handled, the
        exit hook ends this process with status 1 instead of hanging.
        """
        raise self._error(shutdown.fatal('worker[%d]: %s' % (self._rank, err))) from err


def elastic_summary(rank, store, clock, lost):
    """The line an elastic worker prints when it leaves: its clock and the workers lost."""
    if not lost:
        return 'worker[%d] %s elastic: finished at clock %d; no worker was lost' % (
            rank, store, clock)
    return 'worker[%d] %s elastic: finished at clock %d; lost %s' % (
        rank, store, clock, describe_losses(lost))


# the store types are registered now if MXNet's import finished inside this module's import
module_done(__name__)   # (mxnet_ssp/__init__.py: _STORE_CHAIN)
