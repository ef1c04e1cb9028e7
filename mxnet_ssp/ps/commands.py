"""What a worker's store sends where MXNet sends an optimizer: the updater and the commands.

==============  ======================================================  ======================
what            how it travels                                          on the server
==============  ======================================================  ======================
updater         ``kv.set_optimizer(UpdaterSpec(...))``: MXNet pickles   the door is built
                it on the worker and unpickles it on every server       around the update rule
command         ``kv._send_command_to_servers(0, pickle of Control)``   the door runs it on
                                                                        the live rule
==============  ======================================================  ======================

Unpickling either calls :func:`at_server`, which hands it to the server's one door,
:mod:`mxnet_ssp.server.door`; that import, by name and only in a server process, is the one
place where the shared layer reaches the server's code, so a worker never imports it.

This module must import in a server process, where ``import mxnet`` has not returned (the
server loop runs inside it): it imports nothing from MXNet.
"""
import importlib
import re

__all__ = ['UpdaterSpec', 'Control', 'ABORT', 'abort_message', 'at_server']

#: The server's door (imported by name where MXNet unpickles a command: on a server)
DOOR = 'mxnet_ssp.server.door'


class UpdaterSpec:
    """What a worker's store sends with ``set_optimizer``: the user's optimizer and its settings.

    MXNet pickles it on the worker and unpickles it on every server, where it becomes the
    server's door (:class:`mxnet_ssp.server.door.Door`) around a
    :class:`mxnet_ssp.server.updater.ServerOptimizer` (the worker never imports the server's
    code).  `settings` are ServerOptimizer's keyword arguments.
    """

    def __init__(self, optimizer, **settings):
        self.optimizer = optimizer
        self.settings = settings

    @property
    def multi_precision(self):
        """Read by MXNet's ``set_optimizer`` after sending: the user's optimizer's flag."""
        return self.optimizer.multi_precision

    def __reduce__(self):
        return (at_server, ('updater', self.optimizer, self.settings))


class Control:
    """A command for the servers, sent where MXNet sends an optimizer.

    MXNet's server controller unpickles the command body and installs the result as its
    optimizer.  Unpickling a Control runs the command at the server's door, which hands it to
    the live :class:`mxnet_ssp.server.updater.ServerOptimizer` and yields the same door, so
    the servers keep their optimizer and state.  Actions: ``set_lr`` (float), ``save`` and
    ``load`` (a path prefix), ``buckets`` (the workers' plan) and :data:`ABORT` (a message:
    the server ends, with or without an optimizer).
    """

    def __init__(self, action, payload):
        self.action = action
        self.payload = payload

    def __reduce__(self):
        return (at_server, ('command', self.action, self.payload))


#: The :class:`Control` action a failing worker sends every server: end now, naming it (the
#: payload: the worker's message).  Served before, and without, an optimizer.
ABORT = 'abort'


def abort_message(payload):
    """What a server says when it ends on a worker's abort notice (`payload`: the worker's
    message, ``'worker[R]: why'``): ``server: the job failed: why (worker[R] ...)``."""
    text = str(payload)[:2000]
    match = re.match(r'worker\[(\d+)\]: (.*)$', text, re.S)
    if match is None:
        return 'server: the job failed: %s; ending this server' % text
    return ('server: the job failed: %s (worker[%s] said so; ending this server)'
            % (match.group(2), match.group(1)))


def at_server(kind, *args):
    """Where MXNet unpickles an :class:`UpdaterSpec` or a :class:`Control`: in a server
    process.  Returns what MXNet installs as the server's optimizer (the door)."""
    return importlib.import_module(DOOR).receive(kind, *args)
