"""The lab on links: a scenario whose workers have link rates runs on the emulated cluster
(:mod:`mxnet_ssp.lab.testbed`), brought up before the grid's first run and down after its last,
on every exit path.

Each run is started as every lab run is (the local launcher, its time limit and exit
codes), with :mod:`mxnet_ssp.lab.testbed.on_host` in front of the training command: each
process moves into its host's network namespace (:mod:`mxnet_ssp.lab.testbed.place`: the
scheduler and the servers on host0, worker i on host i + 1 behind its link).  The testbed
has no sshd (nothing logs in), only the hosts, their links (tbf, both directions) and the
measurement of every link at ``up``, which ``<out>/testbed.json`` keeps with the placement.
"""
import contextlib
import logging
import os

from ..testbed import place
from ..testbed.settings import TestbedError, check_prefix
from .json_files import write_json

logger = logging.getLogger(__name__)

#: --testbed-prefix's default: the names of the lab's testbed (namespaces <prefix>h0 ..,
#: state in /run/<prefix>testbed); another one lets two labs, or a lab and a test, run side
#: by side
DEFAULT_PREFIX = 'mxlab-'
TESTBED_FILE = 'testbed.json'
ON_HOST_MODULE = 'mxnet_ssp.lab.testbed.on_host'


class ClusterError(RuntimeError):
    """The emulated cluster did not come up (nothing of it is left)."""


def check_prefix_option(value):
    """--testbed-prefix's value checked (the testbed's rule); raise ValueError naming it."""
    try:
        return check_prefix(DEFAULT_PREFIX if value is None else value, '--testbed-prefix')
    except TestbedError as err:
        raise ValueError(str(err)) from None


def wrap(grid, train_argv, python):
    """The training command of a run: on links, behind :mod:`.on_host`."""
    if not grid.links:
        return list(train_argv)
    return [python, '-m', ON_HOST_MODULE, '--prefix', grid.testbed_prefix, '--'] + list(
        train_argv)


def placement(grid):
    """Every process's host, address, namespace and link (:func:`.place.placement`)."""
    return place.placement(grid.testbed_prefix, grid.links, grid.servers)


def check_machine(grid, euid=None, which=None):
    """Problems that stop a grid on links before anything starts: not root, no ip or tc
    (a list of messages; empty when the grid has no links or the machine has them)."""
    if not grid.links:
        return []
    from ..testbed import cluster
    kwargs = {} if which is None else {'which': which}
    try:
        cluster.preflight('up', euid=euid, ssh=False, **kwargs)
    except TestbedError as err:
        return ['scenario %s runs on the emulated cluster (its workers have links), which '
                'this machine cannot build: %s' % (grid.emulate, err)]
    return []


@contextlib.contextmanager
def testbed(grid, out):
    """Bring the grid's testbed up (removing a leftover of its prefix first) and measure its
    links, write ``<out>/testbed.json``; take it down when the block ends, however it ends.
    A grid without links: nothing."""
    if not grid.links:
        yield None
        return
    from ..testbed import cluster
    the_plan = place.testbed_plan(grid.testbed_prefix, grid.links)
    logger.info('the emulated cluster (prefix %s): %s', grid.testbed_prefix,
                place.describe(placement(grid)))
    try:
        try:
            rc = cluster.up(the_plan, None, measure_links=True, ssh=False)
        except (RuntimeError, TestbedError) as err:
            raise ClusterError('the emulated cluster did not come up: %s' % err) from None
        state = cluster.load_state(grid.testbed_prefix)
        record = {'prefix': grid.testbed_prefix, 'placement': placement(grid),
                  'hosts': [{k: h.get(k) for k in ('name', 'address', 'namespace', 'rate',
                                                     'measured')} for h in state['hosts']]}
        write_json(os.path.join(out, TESTBED_FILE), record)
        if rc:
            logger.warning('a link measured more than 10%% off its setting (%s): the runs go '
                           'on; the measured rates are in %s', ', '.join(
                               '%s up %.0f / down %.0f Mbit/s' % (
                                   h['name'], h['measured']['up'] / 1e6,
                                   h['measured']['down'] / 1e6)
                               for h in record['hosts'] if h.get('measured')),
                           os.path.join(out, TESTBED_FILE))
        yield record
    finally:
        try:
            removed = cluster.down(grid.testbed_prefix, quiet=True)
            logger.info('the emulated cluster (prefix %s) is down: %d namespace(s) removed',
                        grid.testbed_prefix, sum(1 for r in removed
                                                 if r.startswith('namespace ')))
        except RuntimeError as err:
            logger.error('the emulated cluster (prefix %s) was not removed: %s; run python -m '
                         'mxnet_ssp.lab.testbed --prefix %s down', grid.testbed_prefix, err,
                         grid.testbed_prefix)
