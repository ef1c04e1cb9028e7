"""How mxnet-ssp's own log lines look in the processes of a job: one format,
``mxnet-ssp: <role>[<rank>] <message>`` on stderr, whatever the script or MXNet configured.

In a process of a parameter-server job (``DMLC_ROLE`` set), :func:`attach` gives the
``mxnet_ssp`` logger its own stderr handler (level INFO) and stops its records from reaching
the root logger: a server's root logger has MXNet's ``<time> Server[<rank>]`` format, a
worker's whatever the script chose (or nothing, which used to print only warnings).  The lines
of the fatal path (``mxnet-ssp: worker[1]: ...``, written straight to stderr) read the same.
A script that wants these lines elsewhere adds a handler to ``logging.getLogger('mxnet_ssp')``;
an entry point of ours that configures logging itself (``mxnet-ssp-train``) calls
:func:`detach`, and every line of its processes then has its format.

Standard library only; nothing is imported to learn a rank (the modules that know it are
looked up in ``sys.modules``).
"""
import logging
import os
import re
import sys

__all__ = ['PREFIX', 'attach', 'detach', 'LineFormat']

#: What every line of ours starts with.
PREFIX = 'mxnet-ssp: '
_SAYS_WHO = re.compile(r'^(worker|server|scheduler)\[[^\]]*\]')
_handler = None


def _rank(role):
    """This process's rank when a module of ours knows it, else '?'."""
    if role == 'server':
        server = sys.modules.get('mxnet_ssp.server.updater')
        rank = server.server_rank() if server is not None else None
        return '?' if rank is None else rank
    if role == 'worker':
        process = sys.modules.get('mxnet_ssp.worker.shutdown')
        stores = getattr(process, '_stores', None)
        if stores:
            return getattr(stores[0], 'rank', '?')
    return 0 if role == 'scheduler' else '?'


class LineFormat(logging.Formatter):
    """``mxnet-ssp: <role>[<rank>] <message>``; a message that already names its role and rank
    (``worker[2] ...``) keeps it, and a server's ``server: ...`` becomes ``server[<rank>]: ...``.
    Warnings and errors say so after the role (``WARNING``, ``ERROR``)."""

    def __init__(self, role=None):
        super().__init__()
        self.role = role or os.environ.get('DMLC_ROLE') or 'worker'

    def format(self, record):
        text = super().format(record)
        if text.startswith(PREFIX):         # said once
            text = text[len(PREFIX):]
        level = '' if record.levelno < logging.WARNING else record.levelname + ' '
        if _SAYS_WHO.match(text):
            return PREFIX + level + text
        who = '%s[%s]' % (self.role, _rank(self.role))
        if text.startswith(self.role + ': '):
            return PREFIX + level + who + text[len(self.role):]
        return PREFIX + level + who + ' ' + text


def attach(environ=None):
    """In a process of a job (``DMLC_ROLE`` set), give the ``mxnet_ssp`` logger its stderr
    handler of :class:`LineFormat` (once per process); elsewhere do nothing.  Returns the
    handler, or None."""
    global _handler
    env = os.environ if environ is None else environ
    if _handler is not None or not env.get('DMLC_ROLE'):
        return _handler
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(LineFormat(env.get('DMLC_ROLE')))
    ours = logging.getLogger('mxnet_ssp')
    ours.addHandler(_handler)
    if ours.level == logging.NOTSET:
        ours.setLevel(logging.INFO)
    ours.propagate = False
    return _handler


def detach():
    """Undo :func:`attach`: the ``mxnet_ssp`` logger's records go to the root logger again
    (for an entry point that configures logging for every line of its process)."""
    global _handler
    if _handler is not None:
        ours = logging.getLogger('mxnet_ssp')
        ours.removeHandler(_handler)
        ours.propagate = True
        _handler = None
