"""Link rates in tc's units, and what a step's bytes cost on a link (no I/O).

One parser for every place that takes a rate: ``mxnet-ssp-testbed --rate`` /
``--rate-of`` (:mod:`mxnet_ssp.lab.testbed.settings`) and a scenario's ``links=``
(:mod:`mxnet_ssp.lab.cluster_model.profiles`), so that a rate the testbed accepts is the rate a
scenario accepts and the other way round.

Units: ``kbit``, ``mbit``, ``gbit`` are 10^3, 10^6, 10^9 bit/s (tc's, not 2^10).  A rate is
what tbf lets through *on the wire*, whole Ethernet frames counted: at MTU 1500 a TCP
segment carries 1448 payload bytes in a 1514-byte frame, so the payload rate is
:data:`PAYLOAD_SHARE` of the setting (95.6%; what the testbed measures at ``up``).
"""
import re

__all__ = ['parse_rate', 'format_rate', 'link_seconds', 'RateError', 'RATE_FORMS',
           'MIN_RATE', 'MAX_RATE', 'PAYLOAD_SHARE']

MIN_RATE, MAX_RATE = 10 ** 6, 10 ** 10          # 1mbit .. 10gbit
#: payload bytes per 1514-byte frame (MTU 1500, TCP timestamps on): payload rate / wire rate
PAYLOAD_SHARE = 1448 / 1514
RATE_FORMS = ('a number and a unit kbit, mbit or gbit (tc\'s units: 1mbit = 10^6 bit/s), '
              'e.g. 100mbit, 1gbit, 2.5gbit; from 1mbit to 10gbit')

_UNITS = {'kbit': 10 ** 3, 'mbit': 10 ** 6, 'gbit': 10 ** 9}
_RATE = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*(kbit|mbit|gbit)\s*$', re.IGNORECASE)


class RateError(ValueError):
    """A rate that cannot be read; the message names the setting, the value and
    :data:`RATE_FORMS`."""


def parse_rate(value, setting='--rate'):
    """Bits per second (int) of a rate such as ``100mbit`` / ``1gbit`` / ``2.5gbit``; raise
    :class:`RateError` naming `setting` otherwise."""
    match = _RATE.match(value if isinstance(value, str) else '')
    if not match:
        raise RateError('%s %r is not a rate; accepted: %s' % (setting, value, RATE_FORMS))
    bits = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not MIN_RATE <= bits <= MAX_RATE:
        raise RateError('%s %r is out of range; accepted: %s' % (setting, value, RATE_FORMS))
    return int(round(bits))


def format_rate(bits):
    """``1gbit``, ``100mbit``, ``2.5gbit``: the shortest of tc's units for `bits` per second
    (:func:`parse_rate` reads it back)."""
    for unit, scale in (('gbit', 10 ** 9), ('mbit', 10 ** 6), ('kbit', 10 ** 3)):
        if bits >= scale:
            return ('%.3f' % (bits / scale)).rstrip('0').rstrip('.') + unit
    return '%dbit' % bits


def link_seconds(step_bytes, bits):
    """Seconds one step's traffic takes on a link of `bits` per second: `step_bytes` up
    (the gradients) and then as many down (the weights), each at the link's TCP payload
    rate (``bits * PAYLOAD_SHARE``).  The push and the pull of a step follow each other, so
    the two directions add up although the link carries both at once."""
    return 2.0 * 8.0 * step_bytes / (bits * PAYLOAD_SHARE)
