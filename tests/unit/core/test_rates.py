"""mxnet_ssp.core.rates: the one rate parser (the testbed's --rate, a scenario's links=) and
a step's time on a link."""
import pytest

from mxnet_ssp.core.rates import (PAYLOAD_SHARE, RateError, format_rate, link_seconds,
                                  parse_rate)


@pytest.mark.parametrize('text, bits', [('100mbit', 10 ** 8), ('1gbit', 10 ** 9),
                                        ('2.5GBIT', 25 * 10 ** 8), (' 1500kbit ', 15 * 10 ** 5)])
def test_parse_rate_reads_tc_units(text, bits):
    assert parse_rate(text) == bits
    assert parse_rate(format_rate(bits)) == bits


@pytest.mark.parametrize('value', ['1gigabit', '100', '', None, 3, '500kbit', '11gbit'])
def test_parse_rate_names_the_setting_the_value_and_the_forms(value):
    with pytest.raises(RateError) as err:
        parse_rate(value, 'links[3]')
    text = str(err.value)
    assert text.startswith('links[3] %r ' % (value,)), text
    assert 'kbit, mbit or gbit' in text and 'from 1mbit to 10gbit' in text, text


def test_link_seconds_is_both_directions_at_the_payload_rate():
    # 1 MB up and 1 MB down at 100 Mbit/s of frames: 16 Mbit over 95.6 Mbit/s of payload
    assert link_seconds(10 ** 6, 10 ** 8) == pytest.approx(16e6 / (1e8 * 1448 / 1514))
    assert PAYLOAD_SHARE == pytest.approx(0.9564, abs=1e-4)
    assert link_seconds(10 ** 6, 10 ** 9) == pytest.approx(link_seconds(10 ** 6, 10 ** 8) / 10)
