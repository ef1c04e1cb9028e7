"""How MXNet's scheduler and server processes end when their job has failed.

In a scheduler or server process MXNet runs ps-lite's loop inside ``import mxnet``
(``KVStoreServer.run`` in ``mxnet/kvstore/kvstore_server.py``) and leaves it only through
ps-lite's finalize barrier, which needs every node of the job.  Once a node died, or a worker
ended because the job failed, that barrier never completes: under a launcher that stops
nothing (MXNet's own ``tools/launch.py``, whose tracker returns when the scheduler does) the
scheduler and the servers would wait for ever.  No code of the script runs there after
``import mxnet``; what does run is the start-up hook (``mxnet_ssp_autoload``), which calls
:func:`follow_job` before the import.  It starts a daemon thread at the first ``import
mxnet``; the servers also follow their controller (:func:`follow_controller_process`,
:func:`controller_failed`):

=========================  =========================================  ========================
process                    follows                                    and ends when
=========================  =========================================  ========================
the server hosting the     the synchronization controller (its        the controller failed
controller                 process's stdout, or a callback when it    the job, told the
                           runs on a thread of the server)            workers, and they hung up
                                                                      (at most 5 s: its
                                                                      ``drain``)
the scheduler              the ps-lite connections of the other       fewer than before stay
                           nodes to it (``DMLC_NUM_WORKER`` +         open for GRACE_S
                           ``DMLC_NUM_SERVER`` expected)
every server, and every    its ps-lite connection to the scheduler    it stays closed for
worker of an mxnet-ssp     (a worker: :func:`follow_scheduler`)       GRACE_S
store
=========================  =========================================  ========================

Each ends the process with :data:`mxnet_ssp.ps.process_exit.FATAL_EXIT` (1) and a message saying
what it saw (:func:`mxnet_ssp.ps.process_exit.end_job`).  After a worker died the chain is: the
controller fails the job and the surviving workers exit 1 naming the dead rank; the server
hosting the controller ends as soon as they hung up; the scheduler sees the workers' (and
servers') connections close and ends :data:`GRACE_S` later; any other server sees the
scheduler's connection close and ends :data:`GRACE_S` after that, and so does a worker that
nothing else told (the asynchronous stores have no controller).  A scheduler or server is
only ever ended while its main thread is inside MXNet's server loop (:func:`in_server_loop`),
a worker only between its native store's creation and the start of its finalize
(:func:`leaving`): once past that (the job finished) the thread stands down, so a healthy
job ends as before.

Elastic mode (``MXNET_SSP_ELASTIC``, docs/elastic.md) changes two rules, since a worker may
be lost and the survivors leave without ps-lite's finalize barrier.  A server ends, with
status 0, once it has had no connection to or from a worker for :data:`ELASTIC_GRACE_S`
(every worker ended: finished or lost; :func:`server_links` counts what is left besides the
scheduler's two connections); the scheduler ends, with status 0, once no node is connected
to it for :data:`ELASTIC_GRACE_S` (the servers ended), or once only the servers are, for
3 x :data:`ELASTIC_GRACE_S` (a server that cannot follow).  So under MXNet's stock
launch.py, which returns with its scheduler, the scheduler ends last.  Whether the job
succeeded is the workers' exit statuses' to say (and the launcher's, ``mxnet-ssp-launch
--elastic``); the server hosting the
controller still ends with status 1 when the controller fails the job (more workers lost than
the job can lose).  A server that died leaves the workers' pushes unanswered: they end at the
job's timeout, and the scheduler with them.

Why the grace: in a job that ends normally no ps-lite connection closes before every node
has passed the finalize barrier, and each process leaves the loop milliseconds after it (a
server has drained its update queue before it enters the barrier: the stop command the
workers send comes after every push); during start-up ps-lite may replace a node's
connection to the scheduler (close, then connect again).  Both last far less than
:data:`GRACE_S`; a server still inside the loop :data:`GRACE_S` after the scheduler left
at a normal end would be ended with status 1 (not seen).

Lost hosts (``MXNET_SSP_LIVENESS_TIMEOUT``, :mod:`mxnet_ssp.core.liveness`): a host that goes
down or is cut off closes no connection.  Each look also turns TCP keepalive on for the
connections it judges and reads how long each has been silent (:class:`LinkLiveness`); one
silent for the bound counts as closed.  A scheduler or server judges all of its connections
(all are the job's), so the rules above see a lost host's nodes gone; a worker judges those
to the scheduler's address and to the peers that connected to its ps-lite port (the
servers), and ends at once when one is silent (:func:`_cut_off`): a server's or the
scheduler's host is lost, or its own host is cut off.

The connections are this process's own sockets (:mod:`mxnet_ssp.ps.tcp_links`): Linux only.
Elsewhere the thread logs once that it cannot follow the job, and the process behaves as
without mxnet-ssp.

Contracts: :func:`follow_job` returns at once and starts nothing until ``import mxnet``
begins; :class:`LinkFollower` is pure logic (no I/O, no clock of its own); nothing here
imports MXNet.
"""
import json
import logging
import os
import sys
import threading
import time

from . import process_exit
from .. import config as cfg
from ..controller import liveness as live
from ..core.env_names import DMLC_PS_ROOT_PORT, DMLC_PS_ROOT_URI
from .tcp_links import (LinkLiveness, host_addresses, links_to, scheduler_links, server_links,
                        tcp_links)

__all__ = ['follow_job', 'follow_scheduler', 'leaving', 'follow_controller_process',
           'controller_failed', 'in_server_loop',
           'LinkFollower', 'DrainFollower', 'GRACE_S', 'ELASTIC_GRACE_S', 'POLL_S']

logger = logging.getLogger(__name__)

#: Seconds a ps-lite connection must stay closed before the process ends (see the docstring);
#: ``MXNET_SSP_FOLLOW_GRACE`` sets another.
GRACE_S = cfg.DEFAULT_FOLLOW_GRACE
#: Elastic mode: seconds the scheduler waits once only the servers are connected, and a
#: server once the scheduler's connection closed (the end of the job, not a fault).
ELASTIC_GRACE_S = 1.5
#: Seconds before a process ends once every connection of the job was seen and none is
#: left (:class:`LinkFollower`): the rest of the job is gone, not reconnecting.
GONE_GRACE_S = 2.0
#: Seconds between two looks at this process's connections.
POLL_S = 0.5
#: The same before every connection of the job was seen once (a look costs well under 1 ms).
STARTUP_POLL_S = 0.02

# the functions that call MXKVStoreRunServer, (name, end of file path): MXNet's
# KVStoreServer.run, and the scheduler run from the library (mxnet_ssp.server.scheduler.serve)
_LOOPS = (('run', os.path.join('kvstore', 'kvstore_server.py')),
          ('serve', os.path.join('mxnet_ssp', 'server', 'scheduler.py')))


def in_server_loop():
    """Whether the main thread is inside MXNet's server loop (``KVStoreServer.run``, or
    :func:`mxnet_ssp.server.scheduler.serve` in a scheduler).

    True in a scheduler or server process from ps-lite's start-up until its finalize
    barrier has passed; False before ``import mxnet`` gets there, after the loop returned,
    and in any other process.
    """
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        code = frame.f_code
        if any(code.co_name == name and code.co_filename.endswith(tail) for name, tail in _LOOPS):
            return True
        frame = frame.f_back
    return False


# ---------------------------------------------------------------------------
# The decision: pure logic
# ---------------------------------------------------------------------------

class _Lasting:
    """The grace timer both followers share: how long a condition has held."""

    def _lasting(self, holds, now):
        """Seconds `holds` has been true up to `now`, once that reached ``grace``; else None
        (and a false `holds` starts the count again)."""
        if not holds:
            self.since = None
            return None
        if self.since is None:
            self.since = now
        lasted = now - self.since
        return lasted if lasted >= self.grace else None


class LinkFollower(_Lasting):
    """Decides when a process's ps-lite connections say that the job has failed.

    Feed it :meth:`observe` with the number of connections open now; it returns the
    seconds they have been fewer than before once that has lasted `grace` seconds (then
    the process should end), else None.  "Before" is the most seen so far, up to
    `expected` (ps-lite may open a replacement before the old one is closed, so more than
    `expected` may be seen for a moment).  Before the first connection nothing is decided.

    Parameters
    ----------
    expected : int
        Connections of a complete job (the scheduler: workers + servers; a server: 1).
    grace : float
        Seconds the count must stay below the most seen.
    """

    def __init__(self, expected, grace=GRACE_S, gone_grace=GONE_GRACE_S):
        if expected < 1:
            raise ValueError('expected must be >= 1, got %r' % (expected,))
        self.expected = expected
        self.grace = float(grace)
        self.gone_grace = min(float(gone_grace), self.grace)
        self.peak = 0           # most connections seen at once, at most `expected`
        self.since = None       # when the count fell below `peak` (None: it is not below)

    def observe(self, count, now):
        """`count` connections are open at time `now` (seconds): None, or seconds lost.

        Once every connection of a complete job was open, none left decides after
        `gone_grace` seconds instead of `grace`: every other node ended without ps-lite's
        finalize (a normal end leaves the loop milliseconds after the last one closes)."""
        self.peak = max(self.peak, min(count, self.expected))
        lost = self._lasting(count < self.peak, now)
        if (lost is None and count == 0 and self.peak == self.expected
                and now - self.since >= self.gone_grace):
            return now - self.since
        return lost


class DrainFollower(_Lasting):
    """Elastic mode, the scheduler: decides when only the servers' connections are left.

    :meth:`observe` returns the seconds the count has been at most `floor` (the servers)
    once that has lasted `grace` seconds, after it was above `floor` (a worker had joined);
    else None.

    Parameters
    ----------
    floor : int
        Connections that stay to the end (the servers'); >= 0.
    grace : float
        Seconds the count must stay at or below `floor`.
    joined : callable, optional
        ``joined()``: whether a worker is known to have joined even if no look saw it
        connected (a short job may come and go between two looks; a server knows it has
        applied a push).
    """

    def __init__(self, floor, grace=ELASTIC_GRACE_S, joined=lambda: False):
        if floor < 0:
            raise ValueError('floor must be >= 0, got %r' % (floor,))
        self.floor = floor
        self.grace = float(grace)
        self.joined = joined
        self.peak = 0
        self.since = None

    def observe(self, count, now, joined=None):
        """`count` connections are open at time `now` (seconds): None, or seconds drained.

        `joined` overrides the ``joined()`` given at construction."""
        self.peak = max(self.peak, count)
        if joined is None:
            joined = self.joined()
        return self._lasting(count <= self.floor and (self.peak > self.floor or joined), now)


_server = {'pushed': False}


def note_push():
    """A server applied a push (called by its updater): workers have joined the job."""
    if not _server['pushed']:
        _server['pushed'] = True


class _Either:
    """Two followers fed the same counts: the first one's decision."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    @property
    def peak(self):
        return self.first.peak

    def observe(self, count, now):
        a, b = self.first.observe(count, now), self.second.observe(count, now)
        return a if a is not None else b


# ---------------------------------------------------------------------------
# The threads
# ---------------------------------------------------------------------------

def _scheduler_watch(environ, watch=None):
    port = int(environ[DMLC_PS_ROOT_PORT])
    expected = cfg.num_workers(environ) + cfg.num_servers(environ)

    def count():
        return len(scheduler_links(tcp_links(watch), port))

    if cfg.elastic_min_workers(environ):
        servers = cfg.num_servers(environ)
        gone = DrainFollower(0, ELASTIC_GRACE_S)
        stay = DrainFollower(servers, 3 * ELASTIC_GRACE_S)

        def drained(n, follower, lost):
            return ('scheduler: every worker of the job has ended (elastic mode; for %.1f s '
                    '%d connection(s) are left, of the %d server(s)); ending the scheduler'
                    % (lost, n, servers))
        return expected, count, drained, _Either(gone, stay)

    def message(n, follower, lost):
        return ('scheduler: %d of the %d workers and servers of the job were connected; for '
                '%.1f s now only %d: a node ended without ps-lite\'s finalize (it died, or it '
                'ended because the job failed: see its log); ending the scheduler, whose loop '
                'would wait for it for ever' % (follower.peak, expected, lost, n))
    return expected, count, message, None


def _node_watch(environ, who, ending, elastic=False, watch=None):
    host, port = environ[DMLC_PS_ROOT_URI], int(environ[DMLC_PS_ROOT_PORT])
    addresses = host_addresses(host)

    def count():
        return len(links_to(tcp_links(watch), addresses, port))

    if elastic:
        def count_workers():
            return len(server_links(tcp_links(watch), addresses, port))

        def message(n, follower, lost):
            return ('%s: no worker has been connected for %.1f s (elastic mode: every worker '
                    'has ended); ending this server' % (who, lost))
        return 1, count_workers, message, DrainFollower(1, ELASTIC_GRACE_S,
                                                        joined=lambda: _server['pushed'])

    def message(n, follower, lost):
        return ('%s: the scheduler at %s:%d closed its connection %.1f s ago (it ended: the '
                'job failed or was stopped); %s' % (who, host, port, lost, ending))
    return 1, count, message, None


def _watch(role, environ, poll=POLL_S, grace=None, active=in_server_loop, who=None):
    """The thread: follow this process's ps-lite connections while ``active()``.

    It waits until ``active()`` is first true (the loop runs, the store exists) and
    stands down when it is false again (the loop returned, the store is being freed).
    """
    try:
        if grace is None:
            grace = cfg.follow_grace(environ)
        elastic = role != 'worker' and cfg.elastic_min_workers(environ) > 0
        watch = _liveness(role, environ)
        if role == 'scheduler':
            expected, count, message, follower = _scheduler_watch(environ, watch)
        elif role == 'server':
            expected, count, message, follower = _node_watch(
                environ, 'server (pid %d)' % os.getpid(),
                'ending this server, whose loop would wait for it for ever', elastic, watch)
        else:
            expected, count, message, follower = _node_watch(
                environ, who or 'worker', 'exiting: the job cannot finish (no pull or push '
                'would be answered, ps-lite\'s finalize never completes)', watch=watch)
    except (KeyError, ValueError) as err:       # cfg.ConfigError is a ValueError
        logger.warning('mxnet-ssp: this %s cannot follow its job (%s: %s); a failed job '
                       'will not end it', role, type(err).__name__, err)
        return
    status = 0 if elastic else process_exit.FATAL_EXIT
    follower = follower or LinkFollower(expected, grace)
    entered = complete = False
    while True:
        # a period between looks, not a synchronization; short until every connection of
        # the job was seen once: a worker that fails right after joining may otherwise come
        # and go between two looks, and the scheduler would never miss it
        time.sleep(poll if complete else min(poll, STARTUP_POLL_S))
        if not active():
            if entered:         # the loop returned: the job ended, this process is exiting
                return
            continue
        entered = True
        try:
            n = count()
        except OSError as err:
            logger.warning('mxnet-ssp: this %s cannot follow its job (%s); a failed job will '
                           'not end it', role, err)
            return
        if role == 'worker' and watch is not None and watch.silent and active():
            process_exit.end_job(_cut_off(who or 'worker', watch))
        lost = follower.observe(n, time.monotonic())
        if not complete and follower.peak == expected:
            complete = True
            logger.info('mxnet-ssp: this %s follows its %d ps-lite connection(s) of the job; it '
                        'ends %g s after one closes for good', role, expected, grace)
        if lost is not None and active():
            said = message(n, follower, lost)
            if watch is not None and watch.silent:
                said += ('; silent for the liveness bound (%s=%g s: a host down or cut off): %s'
                         % (cfg.ENV_LIVENESS, watch.bound, watch.describe_silent()))
            process_exit.end_job(said, status)


def _liveness(role, environ):
    """The :class:`LinkLiveness` of a process of `role`, or None (off, or not Linux)."""
    bound = cfg.liveness_timeout(environ)
    if not bound or not live.SUPPORTED:
        return None
    if role == 'worker':
        return LinkLiveness(bound, job_hosts=host_addresses(environ[DMLC_PS_ROOT_URI]))
    return LinkLiveness(bound)


def _cut_off(who, watch):
    """What a worker says when a connection to a server or the scheduler went silent."""
    return ('%s: nothing arrived, not even the answer to a TCP keepalive probe, for the '
            'liveness bound (%s=%g s) on its connection(s) to %s: that host (a server\'s or the '
            'scheduler\'s) is down or cut off from this one; exiting: the job cannot finish '
            '(no pull or push would be answered)'
            % (who, cfg.ENV_LIVENESS, watch.bound, watch.describe_silent()))


def follow_job(role, environ=None):
    """In a scheduler or server process: end it when its job has failed (module docstring).

    Returns at once; the thread starts when ``import mxnet`` begins (a process with this
    role that never imports MXNet starts nothing).  Called by the start-up hook.
    """
    if role not in ('scheduler', 'server'):
        raise ValueError('role must be scheduler or server, got %r' % (role,))
    env = dict(_settings() if environ is None else environ)
    from .._hooks import when_importing

    def start():
        threading.Thread(target=_watch, args=(role, env), daemon=True,
                         name='mxnet-ssp-follow-job').start()
    when_importing('mxnet', start)


def _settings():
    """This process's settings: os.environ over the job's settings file; os.environ alone
    if the file cannot be read (the worker or the start-up hook reports that)."""
    try:
        return cfg.current(None)
    except cfg.ConfigError:
        return os.environ


_worker = {'following': False, 'leaving': False}


def follow_scheduler(rank, environ=None):
    """In a worker of an mxnet-ssp store: end it when the scheduler's connection closes.

    That happens when the job failed (the scheduler ends as its other nodes' connections
    close) or the scheduler was killed.  It matters where nothing else tells the worker:
    the asynchronous stores (``dist_async``, ``dist_softsync``) have no controller, and a
    worker killed under them leaves the others training until their exit.  Call once the
    native store exists; :func:`leaving` before it is freed (ps-lite's finalize, after
    which the scheduler closes its connections).  Idempotent; returns at once.
    """
    if _worker['following']:
        return
    _worker['following'] = True
    env = dict(_settings() if environ is None else environ)
    threading.Thread(target=_watch, args=('worker', env),
                     kwargs={'active': lambda: not _worker['leaving'],
                             'who': 'worker[%d]' % rank},
                     daemon=True, name='mxnet-ssp-follow-scheduler').start()


def leaving():
    """This worker enters ps-lite's finalize: the scheduler may close its connection now."""
    _worker['leaving'] = True


def controller_failed(message):
    """The controller failed the job with `message` and the workers know: end this server.

    Called on the controller's thread (controller on a thread of this server) or on the
    thread following its process.  Does nothing once MXNet's loop has returned.
    """
    if in_server_loop():
        process_exit.end_job('server (pid %d): the job failed: %s; ending this server, whose loop '
                         'would wait for the workers for ever' % (os.getpid(), message))


def follow_controller_process(proc):
    """Start a daemon thread that ends this server when the controller process `proc` says
    the job failed (a ``{"failed": message}`` line on its stdout) or ends by itself."""
    def follow():
        for line in proc.stdout:
            try:
                said = json.loads(line)
            except ValueError:
                continue
            if isinstance(said, dict) and 'failed' in said:
                controller_failed(said['failed'])
                return
        status = proc.wait()    # end of file: it exited (it never does while this runs)
        controller_failed('the synchronization controller process (pid %d) ended with status '
                          '%s' % (proc.pid, status))
    threading.Thread(target=follow, daemon=True, name='mxnet-ssp-follow-controller').start()
