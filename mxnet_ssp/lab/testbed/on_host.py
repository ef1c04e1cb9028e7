"""Run one process of a local job on its emulated host: ``python -m
mxnet_ssp.lab.testbed.on_host --prefix PREFIX -- COMMAND ...``.

The lab's runner starts a scenario with links as it starts every job, with the local
launcher (its supervision, time limit and exit codes unchanged), and puts this in front of
the training command.  Each process reads its role (``DMLC_ROLE``) and launch index
(``MXNET_SSP_LAUNCH_INDEX``), finds its host by :mod:`.place`'s rule, points
``DMLC_PS_ROOT_URI`` at the scheduler's host and ``DMLC_NODE_HOST`` at its own host, says
where it runs on stderr (``testbed: worker #3 on host4 (198.18.0.5, namespace lab-h4)``,
in the job's log), and replaces itself with ``ip netns exec NAMESPACE COMMAND``: the same
process id, so the launcher's signals and time limit reach it, now in the host's network
namespace.  Needs root, like the testbed; the testbed of `PREFIX` must be up.

Exit codes: 2 a missing or wrong setting (one line naming it); otherwise the command's.
"""
import argparse
import os
import sys

from ...core.env_names import DMLC_ROLE
from ...launch.settings import ENV_LAUNCH_INDEX
from .place import process_env
from .settings import check_prefix, TestbedError

PROG = 'python -m mxnet_ssp.lab.testbed.on_host'


def target(prefix, environ):
    """(namespace, the environment to run with, the line that says where)."""
    role = environ.get(DMLC_ROLE)
    raw = environ.get(ENV_LAUNCH_INDEX, '0' if role == 'scheduler' else None)
    try:
        index = int(raw)
    except (TypeError, ValueError):
        index = None
    if role not in ('scheduler', 'server', 'worker') or index is None or index < 0:
        raise TestbedError('%s=%r, %s=%r: accepted: a process of a job started by '
                           'mxnet_ssp.launch (role scheduler, server or worker and its index)'
                           % (DMLC_ROLE, role, ENV_LAUNCH_INDEX, raw))
    namespace, host, updates = process_env(prefix, role, index)
    env = dict(environ, **updates)
    who = role if role == 'scheduler' else '%s #%d' % (role, index)      # a launch index
    return namespace, env, 'testbed: %s on %s (%s, namespace %s)' % (
        who, host, updates['DMLC_NODE_HOST'], namespace)


def main(argv=None, environ=None, execvpe=os.execvpe):
    p = argparse.ArgumentParser(prog=PROG, description='run one process of a local job on '
                                'its host of the emulated cluster (docs/lab.md)')
    p.add_argument('--prefix', required=True, help='the testbed\'s prefix')
    p.add_argument('command', nargs=argparse.REMAINDER, help='-- COMMAND ...')
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    try:
        prefix = check_prefix(args.prefix)
        if not command:
            raise TestbedError('command: none given; accepted: --prefix PREFIX -- COMMAND ...')
        namespace, env, line = target(prefix, os.environ if environ is None else environ)
    except TestbedError as err:
        sys.stderr.write('%s: %s\n' % (PROG, err))
        return 2
    sys.stderr.write(line + '\n')
    sys.stderr.flush()
    execvpe('ip', ['ip', 'netns', 'exec', namespace] + list(command), env)
    return 127                       # only a test's execvpe returns


if __name__ == '__main__':
    sys.exit(main())
