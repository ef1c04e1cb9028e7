"""Where a job's processes run on the emulated cluster, and each host's link: the lab's
placement for a scenario with links (pure: no system calls).

One rule, so the runner, the processes and the reports cannot disagree:

| process | host | its link |
|---|---|---|
| the scheduler and every server | host0 | :data:`SERVER_RATE` (the testbed's fastest) |
| the worker of launch index i (``worker #i``) | host i + 1 | the scenario's rate for the ps-lite rank it gets there |

**Ranks.**  A scenario gives each worker *rank* (``kv.rank``: what the compute profile,
the logs and the reports are keyed on) its link, but the launcher places processes by
launch index, before ps-lite numbers them.  ps-lite's scheduler numbers the workers once
all have registered, in the order of its sort of their addresses: descending as strings
(the comparator ``(a.hostname.compare(b.hostname) | (a.port < b.port)) > 0`` of
``Van::ProcessAddNodeCommandAtScheduler``; the ports only order processes of one host).
With one worker per host the rank of each host's worker is therefore known before the job
starts (:func:`rank_of_host`: with 4 workers, host4 198.18.0.5 gets rank 0 and host1
198.18.0.2 rank 3), and each host's link is given the rate of that rank.

Every worker reaches the servers through its own link and the servers' link, and the
servers' link is never the slower of the two, so a worker's own link sets its step's time
as the scenario says.  Host names, namespaces and addresses are the testbed's
(:func:`mxnet_ssp.lab.testbed.settings.plan`): host i at 198.18.0.(i+1), in namespace
``<prefix>h<i>``.
"""
from ...core.env_names import DMLC_NODE_HOST, DMLC_PS_ROOT_URI
from ...core.rates import MAX_RATE, format_rate
from .settings import host_address, plan

__all__ = ['SERVER_HOST', 'SERVER_RATE', 'host_of', 'rank_of_host', 'host_rates',
           'testbed_plan', 'placement', 'describe', 'process_env']

#: the host of the scheduler and the servers
SERVER_HOST = 0
#: the servers' link: the testbed's fastest rate (10gbit), so that it is never the
#: bottleneck (the servers' host carries every worker's traffic)
SERVER_RATE = MAX_RATE

ROLES = ('scheduler', 'server', 'worker')


def host_of(role, index):
    """The index of the host that runs process `index` of `role`."""
    if role not in ROLES:
        raise ValueError('role %r: expected one of %s' % (role, ', '.join(ROLES)))
    if not isinstance(index, int) or index < 0:
        raise ValueError('index %r: expected an integer >= 0' % (index,))
    return index + 1 if role == 'worker' else SERVER_HOST


def rank_of_host(host, workers):
    """The ps-lite rank of the worker on host `host` (1 .. `workers`) of a job with one
    worker per host: its address's place among the workers' addresses sorted as strings,
    descending (ps-lite's scheduler; see the module's docstring)."""
    if not 1 <= host <= workers:
        raise ValueError('host %r: expected a worker host, 1 to %d' % (host, workers))
    addresses = sorted((str(host_address(h)) for h in range(1, workers + 1)), reverse=True)
    return addresses.index(str(host_address(host)))


def host_rates(links, server_rate=SERVER_RATE):
    """The testbed's link rates (bits/s), one per host: the servers' host, then on each
    worker host the rate of the rank its worker gets (``links[rank]``)."""
    if not links:
        raise ValueError('links: none given; expected one rate per worker')
    workers = len(links)
    return [server_rate] + [links[rank_of_host(h, workers)] for h in range(1, workers + 1)]


def testbed_plan(prefix, links):
    """The testbed (:class:`~mxnet_ssp.lab.testbed.settings.Plan`) a job with these worker
    links runs on."""
    return plan(prefix, host_rates(links))


def placement(prefix, links, servers=1):
    """Every process of a job with ``len(links)`` workers and `servers` servers: the
    scheduler, the servers, then the workers by rank (``worker 3``: rank 3, the name the
    logs and reports use; ``launch_index``: the launcher's ``worker #i``), as ``[{'process',
    'host', 'address', 'namespace', 'rate'}]`` (the rate in tc's units).  What run.json
    and testbed.json record."""
    hosts = testbed_plan(prefix, links).hosts
    workers = len(links)
    out = []

    def add(name, host, **extra):
        h = hosts[host]
        out.append(dict({'process': name, 'host': h.name, 'address': h.address,
                         'namespace': h.namespace, 'rate': format_rate(h.rate)}, **extra))

    add('scheduler', host_of('scheduler', 0))
    for i in range(servers):
        add('server %d' % i, host_of('server', i))
    by_rank = sorted(range(workers), key=lambda i: rank_of_host(host_of('worker', i), workers))
    for rank, index in enumerate(by_rank):
        add('worker %d' % rank, host_of('worker', index), launch_index=index)
    return out


def describe(places):
    """One line of a :func:`placement`: ``scheduler, server 0 on host0 (198.18.0.1, 10gbit);
    worker 0 on host1 (198.18.0.2, 1gbit); ...``."""
    groups = []
    for p in places:
        if groups and groups[-1][0]['host'] == p['host']:
            groups[-1].append(p)
        else:
            groups.append([p])
    return '; '.join('%s on %s (%s, %s)' % (', '.join(p['process'] for p in g), g[0]['host'],
                                           g[0]['address'], g[0]['rate']) for g in groups)


def process_env(prefix, role, index):
    """(namespace, host name, the variables to set) for process `index` of `role`: the
    scheduler's address is host0's, and the process binds and advertises its own host's
    address (``DMLC_NODE_HOST``; the synchronization controller advertises it too)."""
    host = host_of(role, index)
    hosts = plan(prefix, [0] * (max(host, SERVER_HOST) + 1)).hosts
    mine = hosts[host]
    return mine.namespace, mine.name, {DMLC_PS_ROOT_URI: hosts[SERVER_HOST].address,
                                       DMLC_NODE_HOST: mine.address}
