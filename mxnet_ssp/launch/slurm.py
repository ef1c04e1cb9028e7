"""``--launcher slurm``: inside a Slurm allocation (sbatch or salloc), the scheduler here and
every server and worker as a job step of its own (``srun --overlap``) on a task slot of the
allocation; no ssh between nodes is needed (docs/launch.md, "Slurm").

Placement: the allocation's task slots (``SLURM_TASKS_PER_NODE`` over the nodes of
``SLURM_JOB_NODELIST``) are taken node by node in turns (one slot of each node, then a second
one of each node that has two, ...): the servers first, then the workers, so servers spread
over the nodes before any node gets a second one.  ``-s`` + ``-n`` must fit the allocation's
slots; the scheduler runs where the launcher runs (the batch host under sbatch) and takes no
slot.

This module must stay light: the standard library and :mod:`mxnet_ssp.config` only.
"""
import ipaddress
import re
import shutil
import socket
import subprocess
from typing import NamedTuple

from ..config import ENV_REJOIN
from .hosts import address_towards, free_port
from .job import Plan
from .settings import ENV_LAUNCH_INDEX, LaunchError, local_env, plural, say, task_env
from .supervisor import Spec
from ..core.env_names import DMLC_INTERFACE, DMLC_NODE_HOST

#: what srun needs to know the allocation: set by sbatch and salloc
JOB_ID = 'SLURM_JOB_ID'
NODELIST = 'SLURM_JOB_NODELIST'
TASKS_PER_NODE = 'SLURM_TASKS_PER_NODE'
#: set by slurmd in a job's processes: the node the batch script (and so the launcher) runs on
THIS_NODE = 'SLURMD_NODENAME'

_TASKS_ITEM = re.compile(r'^(\d+)(?:\(x(\d+)\))?$')


class Node(NamedTuple):
    name: str          # Slurm's node name (srun --nodelist)
    address: str       # its IPv4 address (NodeAddr, resolved)
    slots: int         # task slots of the allocation on it


class Allocation(NamedTuple):
    job_id: str
    nodes: list        # [Node], in SLURM_JOB_NODELIST's order

    def slots(self):
        return sum(n.slots for n in self.nodes)

    def describe(self):
        counts = sorted({n.slots for n in self.nodes})
        per = ('%s per node' % plural(counts[0], 'task slot') if len(counts) == 1 else
               'task slots %s' % ','.join('%s:%d' % (n.name, n.slots) for n in self.nodes))
        return 'job %s: %s (%s), %s' % (self.job_id, plural(len(self.nodes), 'node'),
                                        ','.join(n.name for n in self.nodes), per)


def parse_tasks_per_node(text):
    """``SLURM_TASKS_PER_NODE`` (``'2(x3),1'``) as a list of counts (``[2, 2, 2, 1]``)."""
    counts = []
    for item in (text or '').split(','):
        m = _TASKS_ITEM.match(item.strip())
        if not m:
            raise LaunchError('%s=%r is not valid: expected counts like 2(x3),1 (as sbatch and '
                              'salloc set it)' % (TASKS_PER_NODE, text))
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def _run(argv, what):
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise LaunchError('--launcher slurm: cannot %s (%s): %s'
                          % (what, ' '.join(argv), err)) from None
    if proc.returncode != 0:
        raise LaunchError('--launcher slurm: cannot %s (%s exited with code %d: %s)'
                          % (what, ' '.join(argv), proc.returncode, proc.stderr.strip()[-300:]))
    return proc.stdout


def _ipv4(name, addr):
    try:
        return str(ipaddress.IPv4Address(addr))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(addr)
    except OSError as err:
        raise LaunchError('--launcher slurm: node %s: cannot resolve its address %r: %s'
                          % (name, addr, err)) from None


def node_addresses(nodelist):
    """{node name: NodeAddr} of the nodes of `nodelist`, from ``scontrol -o show node``."""
    out = _run(['scontrol', '-o', 'show', 'node', nodelist], 'read the nodes\' addresses')
    addresses = {}
    for line in out.splitlines():
        fields = dict(f.split('=', 1) for f in line.split() if '=' in f)
        if 'NodeName' in fields:
            addresses[fields['NodeName']] = fields.get('NodeAddr') or fields['NodeName']
    return addresses


def read_allocation(environ):
    """The :class:`Allocation` this launcher runs in; raise LaunchError outside one."""
    job_id = environ.get(JOB_ID)
    if not job_id:
        raise LaunchError('--launcher slurm runs inside a Slurm allocation: %s is not set; '
                          'run it in an sbatch script or under salloc, e.g. sbatch --nodes=2 '
                          '--ntasks=4 job.sh (docs/launch.md, "Slurm")' % JOB_ID)
    for program in ('srun', 'scontrol'):
        if shutil.which(program, path=environ.get('PATH')) is None:
            raise LaunchError('--launcher slurm: %s is not installed here (%s is set: this is '
                              'allocation %s); load Slurm\'s client tools' % (program, JOB_ID,
                                                                             job_id))
    nodelist = environ.get(NODELIST) or environ.get('SLURM_NODELIST')
    if not nodelist:
        raise LaunchError('--launcher slurm: %s is not set in allocation %s' % (NODELIST, job_id))
    counts = parse_tasks_per_node(environ.get(TASKS_PER_NODE))
    names = _run(['scontrol', 'show', 'hostnames', nodelist], 'expand %s' % NODELIST).split()
    if len(names) != len(counts):
        raise LaunchError('--launcher slurm: %s=%s names %s but %s=%s counts %s'
                          % (NODELIST, nodelist, plural(len(names), 'node'), TASKS_PER_NODE,
                             environ.get(TASKS_PER_NODE), plural(len(counts), 'node')))
    addresses = node_addresses(nodelist)
    nodes = [Node(n, _ipv4(n, addresses.get(n, n)), c) for n, c in zip(names, counts)]
    return Allocation(job_id, nodes)


def place(allocation, num_servers, num_workers):
    """[(role, index, Node)]: the servers, then the workers, on the allocation's task slots
    taken node by node in turns; raise LaunchError when they do not fit."""
    wanted = num_servers + num_workers
    have = allocation.slots()
    if wanted > have:
        raise LaunchError('-s %d and -n %d need %s but the allocation (%s) has %d: ask sbatch '
                          'or salloc for --ntasks=%d (or more nodes), or start fewer processes'
                          % (num_servers, num_workers, plural(wanted, 'task slot'),
                             allocation.describe(), have, wanted))
    slots = []
    for turn in range(max(n.slots for n in allocation.nodes)):
        slots += [n for n in allocation.nodes if n.slots > turn]
    roles = [('server', i) for i in range(num_servers)] + \
            [('worker', i) for i in range(num_workers)]
    return [(role, i, node) for (role, i), node in zip(roles, slots)]


def srun_argv(node, command):
    """argv of the local srun that runs `command` as one task of a step of its own on `node`.

    ``--overlap``: the step shares the allocation's CPUs with the other steps (every process
    of the job runs at once); ``--input=none``: no step reads the launcher's stdin;
    ``--kill-on-bad-exit=1``: a failed task ends its own step (and srun) at once; what
    happens to the other steps, the launcher decides (as under ssh)."""
    return ['srun', '--overlap', '--nodes=1', '--ntasks=1', '--nodelist=%s' % node.name,
            '--input=none', '--kill-on-bad-exit=1', '--quiet',
            '--job-name=mxnet-ssp'] + list(command)


def scheduler_address(allocation, environ):
    """The address the other nodes reach the scheduler at: this node's (under sbatch the
    launcher runs on the allocation's first node), else the one towards the first node."""
    here = environ.get(THIS_NODE)
    for node in allocation.nodes:
        if node.name == here:
            return node.address
    return address_towards(allocation.nodes[0].address)


def plan_slurm(job, allocation=None):
    """The :class:`.job.Plan` of `job` on the Slurm allocation it runs in; raise LaunchError.

    `allocation` (tests) defaults to :func:`read_allocation` of the job's environment.
    """
    environ = job.environ
    for flag, value in (('-H/--hostfile', job.hostfile), ('--sync-dst-dir', job.sync_dst_dir)):
        if value:
            say('warning: %s is ignored by --launcher slurm: the nodes are the allocation\'s '
                'and the working directory is this one (a file system every node shares)'
                % flag)
    if allocation is None:
        allocation = read_allocation(environ)
    placed = place(allocation, job.num_servers, job.num_workers)
    uri = scheduler_address(allocation, environ)
    port = free_port('')
    specs = [job.scheduler_spec(uri, port)]
    for role, i, node in placed:
        dmlc = job.dmlc_env(role, uri, port)
        dmlc.update(task_env('slurm', role, i, job.num_workers))
        given = job.settings[role]
        if not (environ.get(DMLC_INTERFACE) or given.get(DMLC_INTERFACE)
                or DMLC_NODE_HOST in given):
            dmlc[DMLC_NODE_HOST] = node.address
        dmlc[ENV_LAUNCH_INDEX] = str(i)
        env = local_env(environ, given, dmlc)
        spec = Spec(role, i, srun_argv(node, job.command), env, host=node.name, via='srun')
        if role == 'worker' and job.max_restarts:      # its replacement, on the same node
            spec.restart = Spec(role, i, srun_argv(node, job.command),
                                dict(env, **{ENV_REJOIN: '1'}), host=node.name, via='srun')
        specs.append(spec)
    where = {}
    for role, i, node in placed:
        where.setdefault(node.name, []).append('%s%d' % (role[0], i))
    summary = ('slurm job: %s on %s; scheduler here at %s:%d; one srun step per process: %s'
               % (job.counts(), allocation.describe(), uri, port,
                  '; '.join('%s %s' % (n, ' '.join(w)) for n, w in where.items())))
    return Plan(specs, summary)
