"""``--job-restarts N``: start the whole job again when one of its processes failed.

MXNet's parameter server keeps each key on one server, with no replica, so a lost server
(or the scheduler, or outside elastic mode a worker) ends the job.  As TorchElastic's
``--max-restarts`` does, the launcher then stops every process (bounded, as always), and
starts the whole job again, at most N times; the training script resumes from its latest
complete checkpoint (:mod:`mxnet_ssp.checkpoint`).  Every process of start number k
(0 for the first) has ``MXNET_SSP_RESTART=k`` in its environment (with ``--job-restarts 0``
it is not set, and the job runs as without this module).

Each restart is one line naming its cause.  Under ``--launcher ssh`` the hosts of the failed
start are probed first (``ssh ... true`` with a connect timeout); a host that cannot be
reached is left out and the hostfile's spare host (one the job did not use) takes its
place; the line names both.  The launcher's exit code is the last start's.

Not restarted: a job stopped by a signal or ``--timeout`` (which bounds all the starts
together), a process that could not be started, or a job whose workers all finished.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import shlex
import time

from ..config import ENV_RESTART, read
from .hosts import parse_hostfile
from .settings import ENV_SSH_ARGS, EXIT_FAILED, EXIT_TIMEOUT, LaunchError, say
from .ssh import reach_hosts
from .supervisor import Supervisor

__all__ = ['MAX_JOB_RESTARTS', 'PROBE_TIMEOUT', 'attempt_job', 'probe_hosts', 'replace_hosts',
           'run_job']

#: --job-restarts accepts 0 .. this many
MAX_JOB_RESTARTS = 100

#: seconds an ssh probe of a host may take to connect (ssh ConnectTimeout) before the host
#: counts as unreachable; the whole probe is bounded by twice this
PROBE_TIMEOUT = 10


def attempt_job(job, number):
    """`job` with ``MXNET_SSP_RESTART=number`` in every role's settings."""
    settings = {role: dict(values, **{ENV_RESTART: str(number)})
                for role, values in job.settings.items()}
    return job._replace(settings=settings)


def probe_hosts(hosts, environ, timeout=PROBE_TIMEOUT):
    """{host name: None if ssh reached it, else why not} for the :class:`.hosts.Host` list
    `hosts`, probed at once in parallel (``ssh -o ConnectTimeout=T HOST true``, the hosts'
    check of :func:`.ssh.reach_hosts`); blocking, at most about `timeout` + 5 seconds."""
    try:
        ssh_args = shlex.split(read(ENV_SSH_ARGS, environ))
    except ValueError:
        ssh_args = []
    out = {}
    for name, result in reach_hosts(hosts, ssh_args, 'true', timeout).items():
        if result is None:
            out[name] = None
        else:
            code, why = result
            out[name] = why if code is None else (
                'ssh exited with code %d%s' % (code, ': ' + why if why else ''))
    return out


def replace_hosts(hosts, used, unreachable):
    """The hosts for the next start, and what was done, in words.

    `hosts`: the :class:`.hosts.Host` list of the failed start, `used`: how many of its first
    hosts the job ran on, `unreachable`: {name: why}.  An unreachable host is left out and
    the next spare (a host past `used`) moves into its place; without a spare the job runs on
    the hosts left (several processes to a host), and with none left on the same hosts.
    """
    if not unreachable:
        return hosts, ''
    kept = [h for h in hosts if h.name not in unreachable]
    gone = ', '.join('%s (%s)' % (name, why) for name, why in unreachable.items())
    if not kept:
        return hosts, ('; no host of the hostfile can be reached: %s; trying the same hosts '
                       'again' % gone)
    lost = [h for h in hosts[:used] if h.name in unreachable]
    spares = [h.name for h in hosts[used:] if h.name not in unreachable][:len(lost)]
    if not lost:
        return kept, '; unreachable spare %s left out' % gone
    if len(spares) == len(lost):
        return kept, ("; left out unreachable %s; the hostfile's spare %s takes %s place"
                      % (gone, ', '.join(spares), 'its' if len(lost) == 1 else 'their'))
    return kept, ('; left out unreachable %s; the hostfile has no spare host left, so the job '
                  'runs on the %d host(s) left' % (gone, len(kept)))


def _used_hosts(job, hosts):
    """How many of `hosts` a job places processes on (round robin from the first)."""
    return min(len(hosts), max(job.num_servers, job.num_workers))


def run_job(job, plan_job, timeout=None, stream=None, probe=probe_hosts, supervisor=Supervisor):
    """Run `job` (its first start, restarts after a failure); return the last start's exit code.

    `plan_job(job) -> Plan` plans each start (fresh ports); `timeout`: seconds for all the
    starts together (``--timeout``); `probe`: :func:`probe_hosts` and `supervisor`: the
    :class:`.supervisor.Supervisor` class (tests put their own).
    """
    started = time.monotonic()
    number = 0
    hosts = None
    if job.launcher == 'ssh' and job.job_restarts:
        hosts = list(job.hosts) if job.hosts is not None else parse_hostfile(job.hostfile)
    while True:
        current = job._replace(hosts=hosts) if hosts is not None else job
        if job.job_restarts:
            current = attempt_job(current, number)
        try:
            plan = plan_job(current)
        except LaunchError as err:
            say('cannot plan start %d of the job: %s' % (number, err), stream)
            return EXIT_FAILED
        if number:
            say(plan.summary, stream)
        left = None
        if timeout:
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                say('--timeout %g s spent before restart %d — not restarting' % (timeout, number),
                    stream)
                return EXIT_TIMEOUT
        sup = supervisor(plan.specs, timeout=left, min_workers=job.elastic,
                         restarts=job.max_restarts, restart_delay=job.restart_delay,
                         stream=stream)
        code = sup.run()
        if code != EXIT_FAILED or sup.failure is None:
            return code
        if number >= job.job_restarts:
            if job.job_restarts:
                say('no restart left: the job failed after %d restart(s) (--job-restarts %d)'
                    % (number, job.job_restarts), stream)
            return code
        number += 1
        note = ''
        if hosts is not None:
            used = _used_hosts(job, hosts)
            reach = probe(hosts, job.environ)
            hosts, note = replace_hosts(hosts, used, {n: why for n, why in reach.items() if why})
        say('restart %d of %d: %s%s — starting the whole job again (%s=%d)'
            % (number, job.job_restarts, sup.failure, note, ENV_RESTART, number), stream)
