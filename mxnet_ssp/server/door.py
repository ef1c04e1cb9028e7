"""The server's one door: every message that reaches a server of an mxnet-ssp store is sorted
here, before any gradient reaches an update rule.

MXNet gives a server two ways in, and both arrive here:

* where MXNet sends an optimizer (``set_optimizer`` and its command channel), the worker's
  store sends an updater or a command (:mod:`mxnet_ssp.ps.commands`); unpickling either calls
  :func:`receive`.  The updater becomes a :class:`Door` around the update rule
  (:class:`~mxnet_ssp.server.updater.ServerOptimizer`), which MXNet installs as the server's
  optimizer; a command runs on the rule (or, :data:`~mxnet_ssp.ps.commands.ABORT`, ends the
  server) and MXNet gets the same door back;
* every push reaches :meth:`Door.update`, which sorts it (:func:`sort_push`): a discovery
  request (:mod:`mxnet_ssp.ps.channel`'s reserved key and shape) is answered
  (:mod:`mxnet_ssp.server.discovery`), a refresh marker (slot mode) goes to
  :meth:`ServerOptimizer.refresh`, and only a gradient goes to :meth:`ServerOptimizer.update`.

This module must import in a server process, where ``import mxnet`` has not returned (the
server loop runs inside it): it imports nothing from MXNet at its top.
"""
from ..ps.channel import DISCOVERY_LEN, is_discovery, is_refresh
from ..ps.commands import ABORT, abort_message
from ..ps.job_watch import note_push
from ..ps.process_exit import end_job, end_server

__all__ = ['Door', 'receive', 'sort_push', 'DISCOVERY', 'REFRESH', 'GRADIENT']

DISCOVERY, REFRESH, GRADIENT = 'discovery', 'refresh', 'gradient'

_door = None        # this server's door, once the workers' updater arrived
# the workers' ``chunks`` commands so far (their tables merged): every worker's set_optimizer
# reaches every server and the last one installs the updater, possibly after rank 0's first
# command, so each new updater gets them again
_chunk_tables = {}


def sort_push(index, grad, slots, discovery_keys):
    """What a push of `grad` to key `index` is: :data:`DISCOVERY`, :data:`REFRESH` (slot mode
    only) or :data:`GRADIENT`.  `discovery_keys`: the keys seen carrying a discovery request
    (a key that did is never a gradient's)."""
    if index in discovery_keys or (grad.shape == (DISCOVERY_LEN,) and is_discovery(grad)):
        return DISCOVERY
    if slots and is_refresh(grad):
        return REFRESH
    return GRADIENT


class Door:
    """What MXNet installs as a server's optimizer: MXNet's Updater calls it for every push.

    It holds no update state of its own: the rule (`rule`, a ServerOptimizer) keeps it, and
    every attribute MXNet's Updater reads (``aggregate_num``, ``multi_precision``, ...) is the
    rule's.
    """

    def __init__(self, rule):
        self.rule = rule
        self.discovery_keys = set()

    def __getattr__(self, name):
        if name.startswith('__') or name in ('rule', 'discovery_keys'):
            raise AttributeError(name)
        return getattr(self.rule, name)

    # -- MXNet's Updater interface ----------------------------------------------
    def create_state_multi_precision(self, index, weight):
        """No state in MXNet's Updater: the rule keeps it."""
        return None

    def create_state(self, index, weight):
        """No state in MXNet's Updater: the rule keeps it."""
        return None

    def update_multi_precision(self, index, weight, grad, state):
        """One push: sorted, then answered or applied."""
        self.push(index, weight, grad)

    def update(self, index, weight, grad, state):
        """One push: sorted, then answered or applied."""
        self.push(index, weight, grad)

    # -- the sorting -------------------------------------------------------------
    def push(self, index, weight, grad):
        """Runs inside MXNet's updater callback: a failure ends the server (end_server)."""
        try:
            note_push()
            kind = sort_push(index, grad, self.rule.slots, self.discovery_keys)
            if kind == DISCOVERY:
                self.discovery_keys.add(index)
                from .discovery import answer_discovery
                answer_discovery(weight, grad)
            elif kind == REFRESH:
                self.rule.refresh(index, weight)
            else:
                self.rule.update_key(index, weight, grad)
        except Exception:
            end_server('update of key %r' % (index,))

    def command(self, action, payload):
        """A :class:`mxnet_ssp.ps.commands.Control` command, run on the rule; a failure ends
        the server."""
        try:
            self.rule.control(action, payload)
        except Exception:
            end_server('command %s %r' % (action, payload))
        return self


def receive(kind, *args):
    """An updater or a command, unpickled where MXNet sends an optimizer; returns the door."""
    global _door
    if kind == 'updater':
        optimizer, settings = args
        settings = dict(settings)
        sent = settings.pop('agree', None)      # the sender's settings that must agree
        if sent is not None:
            from ..config import check_updater_settings
            message = check_updater_settings(sent)
            if message:
                end_job('server: the job failed: %s' % message)
        from .updater import ServerOptimizer
        _door = Door(ServerOptimizer(optimizer, **settings).activate())
        if _chunk_tables:
            _door.command('chunks', {k: dict(v) for k, v in _chunk_tables.items()})
        return _door
    if kind == 'command':
        action, payload = args
        if action == ABORT:
            # a worker is exiting because the job failed (its script raised, a peer died):
            # this server's loop would wait in ps-lite's finalize barrier for it for ever
            end_job(abort_message(payload))
        if action == 'chunks':
            for table, entries in payload.items():
                _chunk_tables.setdefault(table, {}).update(entries)
        if _door is None:
            try:
                raise RuntimeError('no mxnet-ssp optimizer on this server (set_optimizer first)')
            except RuntimeError:
                end_server('command %s %r' % (action, payload))
        return _door.command(action, payload)
    raise ValueError('unknown message for the server door: %r' % (kind,))
