"""The testbed's settings: rates, host counts, host names, the prefix, and the plan of names
and addresses they give.  Pure functions (no system calls), so they are unit-tested anywhere.

Every refusal is a :class:`TestbedError` whose message names the setting, the value given and
what is accepted; the command line turns it into one line on stderr and exit code 2.
"""
import ipaddress
import os
import re
from dataclasses import dataclass, field

from ...core import rates as core_rates
from ...core.rates import MAX_RATE, MIN_RATE, RATE_FORMS, format_rate  # noqa: F401 (re-exported)

PROG = 'mxnet-ssp-testbed'

EXIT_USAGE = 2

#: The only addresses the testbed uses: RFC 2544's benchmarking range.
NETWORK = ipaddress.ip_network('198.18.0.0/15')

#: Host i gets FIRST_HOST + i; the bridge's own address (the far end of each link when the
#: links are measured) is the last usable address of the range.
FIRST_HOST = ipaddress.ip_address('198.18.0.1')
BRIDGE_ADDRESS = ipaddress.ip_address('198.19.255.254')

DEFAULT_PREFIX = 'mxssp-'
ENV_PREFIX = 'MXNET_SSP_TESTBED_PREFIX'
#: Where the state directories live: STATE_ROOT/<prefix>testbed
STATE_ROOT = '/run'
ENV_STATE_ROOT = 'MXNET_SSP_TESTBED_STATE_ROOT'

MIN_HOSTS, MAX_HOSTS = 2, 64
DEFAULT_RATE = '1gbit'

#: The interface of every emulated host has this name after the prefix (the same in every
#: host, so DMLC_INTERFACE=<prefix>eth names it on all of them).
HOST_IFNAME = 'eth'

_PREFIX = re.compile(r'^[a-z][a-z0-9]*-?$')
MAX_PREFIX = 10      # + 'eth' / 'b63' / 'net' / 'testbed' keeps names within IFNAMSIZ (15)


class TestbedError(Exception):
    """A setting the testbed refuses, or something it needs that is missing (exit code 2)."""

    __test__ = False     # not a pytest test class


def parse_rate(value, setting='--rate'):
    """bits per second of a rate such as ``100mbit`` / ``1gbit`` / ``2.5gbit``
    (:func:`mxnet_ssp.core.rates.parse_rate`, refused as a :class:`TestbedError`)."""
    try:
        return core_rates.parse_rate(value, setting)
    except core_rates.RateError as err:
        raise TestbedError(str(err)) from None


def parse_hosts(value):
    """The host count of ``--hosts``."""
    text = str(value).strip()
    if not text.isdigit() or not MIN_HOSTS <= int(text) <= MAX_HOSTS:
        raise TestbedError('--hosts %r is not a host count; accepted: an integer from %d to %d'
                           % (value, MIN_HOSTS, MAX_HOSTS))
    return int(text)


def host_name(index):
    return 'host%d' % index


def host_index(name, count, setting):
    """The index of host `name` (``host3``, or its address ``198.18.0.4``) among `count`."""
    text = (name or '').strip()
    match = re.match(r'^host(0|[1-9]\d*)$', text)
    index = int(match.group(1)) if match else None
    if index is None:
        try:
            index = int(ipaddress.ip_address(text)) - int(FIRST_HOST)
        except ValueError:
            index = None
    if index is None or not 0 <= index < count:
        raise TestbedError('%s %r is not a host of this testbed; accepted: host0 .. host%d '
                           'or their addresses %s .. %s'
                           % (setting, name, count - 1, host_address(0), host_address(count - 1)))
    return index


def parse_rate_of(items, count, default_bits):
    """Per-host rates: ``--rate-of host3=100mbit`` items -> a list of bits/s, one per host."""
    rates = [default_bits] * count
    seen = set()
    for item in items or ():
        name, sep, rate = item.partition('=')
        if not sep:
            raise TestbedError('--rate-of %r is not HOST=RATE; accepted: e.g. host3=100mbit '
                               '(host0 .. host%d)' % (item, count - 1))
        index = host_index(name, count, '--rate-of %s: host' % item)
        if index in seen:
            raise TestbedError('--rate-of %r gives %s a second rate; accepted: one --rate-of '
                               'per host' % (item, host_name(index)))
        seen.add(index)
        rates[index] = parse_rate(rate, '--rate-of %s: rate' % item)
    return rates


def check_prefix(value, setting='--prefix'):
    """The prefix of every name the testbed creates (namespaces, links, bridge, state dir)."""
    text = value or ''
    if not _PREFIX.match(text) or len(text) > MAX_PREFIX:
        raise TestbedError('%s %r is not a name prefix; accepted: 1 to %d characters, a '
                           'lower-case letter, then letters and digits, optionally ending in '
                           '"-" (e.g. mxssp-)' % (setting, value, MAX_PREFIX))
    return text


def prefix_from(arg, environ=None):
    environ = os.environ if environ is None else environ
    if arg is not None:
        return check_prefix(arg)
    if environ.get(ENV_PREFIX):
        return check_prefix(environ[ENV_PREFIX], ENV_PREFIX)
    return DEFAULT_PREFIX


def state_dir(prefix, environ=None):
    environ = os.environ if environ is None else environ
    root = environ.get(ENV_STATE_ROOT) or STATE_ROOT
    if not os.path.isabs(root):
        raise TestbedError('%s %r is not an absolute directory; accepted: an absolute path '
                           '(default %s)' % (ENV_STATE_ROOT, root, STATE_ROOT))
    return os.path.join(root, prefix + 'testbed')


def host_address(index):
    return FIRST_HOST + index


@dataclass
class HostPlan:
    index: int
    name: str            # host3
    address: str         # 198.18.0.4
    namespace: str       # <prefix>h3
    link: str            # the bridge's end of its link, in the bridge namespace: <prefix>b3
    ifname: str          # its own end, in its namespace: <prefix>eth
    rate: int            # bits/s, both directions


@dataclass
class Plan:
    prefix: str
    bridge_namespace: str
    bridge: str
    hosts: list = field(default_factory=list)

    def host(self, index):
        return self.hosts[index]

    def names(self):
        """Every namespace name the plan creates."""
        return [self.bridge_namespace] + [h.namespace for h in self.hosts]


def plan(prefix, rates):
    """Names and addresses of a testbed of len(rates) hosts."""
    hosts = [HostPlan(i, host_name(i), str(host_address(i)), '%sh%d' % (prefix, i),
                      '%sb%d' % (prefix, i), prefix + HOST_IFNAME, rate)
             for i, rate in enumerate(rates)]
    return Plan(prefix, prefix + 'net', prefix + 'br', hosts)


def owned_namespace(name, prefix):
    """Whether namespace `name` is one a testbed of `prefix` creates (exactly: not a longer
    prefix's, so ``down`` of one prefix never removes another testbed's namespaces)."""
    return re.match(r'^%s(net|h(0|[1-9]\d*))$' % re.escape(prefix), name) is not None


def tbf_burst(bits):
    """tbf's bucket in bytes for a rate: 5 ms of traffic, at least 16 KiB (a few frames of
    1514 bytes and room for the timer's granularity)."""
    return max(bits // 8 // 200, 16384)
