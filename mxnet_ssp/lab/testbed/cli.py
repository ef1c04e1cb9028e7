"""``mxnet-ssp-testbed``: an emulated cluster on this machine (see docs/many_hosts.md).

    mxnet-ssp-testbed up --hosts 4 --rate 1gbit [--rate-of host3=100mbit ...] [--slurm]
    mxnet-ssp-testbed status
    mxnet-ssp-testbed run [--host host2] -- COMMAND ...
    mxnet-ssp-testbed down

Exit codes: 0 done; 1 failed (or, for up, a link measured more than 10% off its setting;
for status, not up); 2 a refused setting or a missing tool (one line naming the setting,
the value and what is accepted); run: the command's own code.
"""
import argparse
import os
import signal
import sys

from ..._cli import add_version
from .settings import (DEFAULT_PREFIX, DEFAULT_RATE, ENV_PREFIX, ENV_STATE_ROOT, EXIT_USAGE,
                       MAX_HOSTS, MIN_HOSTS, PROG, STATE_ROOT, TestbedError, parse_hosts,
                       parse_rate, parse_rate_of, plan, prefix_from)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, '%s: %s; accepted: see %s --help\n' % (PROG, message, PROG))


def build_parser():
    p = _Parser(prog=PROG, description='An emulated cluster on this machine: N hosts as '
                'network namespaces with addresses in 198.18.0.0/15, joined by shaped links '
                '(tbf) to a bridge, each with an sshd; see docs/many_hosts.md.',
                epilog='Every name created starts with the prefix (--prefix, or %s; default '
                '%s); the state (keys, hostfile, ssh config) is in %s/<prefix>testbed '
                '(%s moves it).  Needs root, iproute2 (ip, tc) and OpenSSH.'
                % (ENV_PREFIX, DEFAULT_PREFIX, STATE_ROOT, ENV_STATE_ROOT))
    add_version(p)
    p.add_argument('--prefix', help='prefix of every name (default: $%s or %s)'
                   % (ENV_PREFIX, DEFAULT_PREFIX))
    verbs = p.add_subparsers(dest='verb', metavar='{up,down,status,run}')
    verbs.required = True
    u = verbs.add_parser('up', help='bring the hosts up (removing an earlier testbed first)')
    u.add_argument('--hosts', default='4', help='number of hosts, %d to %d (default 4); host0 '
                   'is the login host' % (MIN_HOSTS, MAX_HOSTS))
    u.add_argument('--rate', default=DEFAULT_RATE, help='rate of every link, each direction '
                   '(default %s): kbit, mbit or gbit' % DEFAULT_RATE)
    u.add_argument('--rate-of', action='append', default=[], metavar='HOST=RATE',
                   help='the rate of one host\'s link, e.g. host3=100mbit (repeatable)')
    u.add_argument('--slurm', action='store_true',
                   help='also run a Slurm cluster: slurmctld on host0, a slurmd on every other '
                        'host (needs %s); run sets SLURM_CONF' % 'apt-get install slurmctld '
                        'slurmd slurm-client munge')
    u.add_argument('--no-measure', action='store_true',
                   help='do not measure the links\' rates after bringing them up')
    verbs.add_parser('down', help='remove every namespace, process and file of the testbed '
                     '(safe to repeat)')
    verbs.add_parser('status', help='print the hosts and whether their sshd runs '
                     '(exit 1 when the testbed is not up)')
    r = verbs.add_parser('run', help='run a command on one host with this environment')
    r.add_argument('--host', default='host0', help='host name or address (default host0, the '
                   'login host)')
    r.add_argument('command', nargs=argparse.REMAINDER, help='-- COMMAND ...')
    for sub in (u, r):
        sub.add_argument('--prefix', dest='sub_prefix', help=argparse.SUPPRESS)
    verbs.choices['down'].add_argument('--prefix', dest='sub_prefix', help=argparse.SUPPRESS)
    verbs.choices['status'].add_argument('--prefix', dest='sub_prefix', help=argparse.SUPPRESS)
    return p


def check(args, environ=None):
    """The checked settings of `args`: (prefix, plan or None); raise TestbedError."""
    prefix = prefix_from(getattr(args, 'sub_prefix', None) or args.prefix, environ)
    if args.verb == 'up':
        count = parse_hosts(args.hosts)
        rate = parse_rate(args.rate)
        return prefix, plan(prefix, parse_rate_of(args.rate_of, count, rate))
    if args.verb == 'run':
        command = list(args.command)
        if command[:1] == ['--']:
            command = command[1:]
        if not command:
            raise TestbedError('run: command: none given; accepted: run [--host NAME] -- '
                               'COMMAND [ARGS...]')
        args.command = command
    return prefix, None


def _exit_on_signal(signum, frame):
    sys.stderr.write('%s: stopped by %s; removing what up made\n'
                     % (PROG, signal.Signals(signum).name))
    raise SystemExit(128 + signum)


def main(argv=None):
    args = build_parser().parse_args(argv)
    from . import cluster
    try:
        prefix, the_plan = check(args)
        cluster.preflight(args.verb)
        sshd = cluster.find_sshd() if args.verb == 'up' else None
        if args.verb == 'up' and args.slurm:
            from .slurm import INSTALL, missing_programs
            missing = missing_programs()
            if missing:
                raise TestbedError('--slurm: the packages %s are not installed; accepted: an '
                                   'installed Slurm (%s)' % (', '.join(missing), INSTALL))
        if args.verb == 'up':
            # stopped half-way (SIGTERM, SIGHUP, Ctrl-C), up removes what it made
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, _exit_on_signal)
            return cluster.up(the_plan, sshd, measure_links=not args.no_measure,
                              slurm=args.slurm)
        if args.verb == 'down':
            removed = cluster.down(prefix)
            cluster.say('testbed %s: %s' % (prefix, 'removed ' + ', '.join(removed)
                                            if removed else 'nothing to remove'))
            return 0
        if args.verb == 'status':
            return cluster.status(prefix)
        argv_run = cluster.run_argv(prefix, args.host, args.command, os.environ)
    except TestbedError as err:
        sys.stderr.write('%s: %s\n' % (PROG, err))
        return EXIT_USAGE
    except RuntimeError as err:
        sys.stderr.write('%s: %s\n' % (PROG, err))
        return 1
    sys.stdout.flush()
    os.execvp(argv_run[0], argv_run)
