"""The table's building blocks (mxnet_ssp/config/table.py) called as a module declaring its
settings calls them: the parser factories (integer, number, choice), declare and the reader
the table looks up unset environs with.  The rows of the table are made when the package is
imported; these tests make their own parsers, so they pin the factories themselves.
Pure tests: no processes."""
import os

import pytest

from mxnet_ssp.config import table

ROW = table.Setting('TEST_ONLY_SETTING', 'test', 'A row made by this test.', table.text,
                    accepted='what this row accepts')


def message(fn, *args, **kwargs):
    with pytest.raises(table.ConfigError) as err:
        fn(*args, **kwargs)
    return str(err.value)


# -- integer(least) -------------------------------------------------------------------------
@pytest.mark.parametrize('value,expected', [('1', 1), (' 7 ', 7), (7, 7), ('+3', 3),
                                            ('100000000000', 100000000000)])
def test_integer_reads_an_integer_at_least_its_bound(value, expected):
    assert table.integer(1)(value, 'N', ROW) == expected


def test_integer_accepts_its_bound_itself_and_any_bound_given():
    assert table.integer(0)('0', 'N', ROW) == 0
    assert table.integer(5)('5', 'N', ROW) == 5
    assert table.integer(-2)(' -2', 'N', ROW) == -2


@pytest.mark.parametrize('least,value', [(1, '0'), (1, '-1'), (5, '4'), (1, 'two'), (1, ''),
                                         (1, '2.0'), (1, 2.0), (1, True), (0, False),
                                         (1, ' 1 1')])
def test_integer_refuses_naming_the_source_the_value_and_what_is_accepted(least, value):
    assert message(table.integer(least), value, 'MY_SOURCE', ROW) == (
        'MY_SOURCE=%r is not valid: expected what this row accepts' % (value,))


# -- number(ok, bools) ----------------------------------------------------------------------
def test_number_reads_a_finite_number_that_ok_accepts():
    parse = table.number(lambda x: x > 0)
    assert parse('2.5', 'N', ROW) == 2.5 and parse(' 3 ', 'N', ROW) == 3.0
    assert parse(4, 'N', ROW) == 4.0 and isinstance(parse(4, 'N', ROW), float)


@pytest.mark.parametrize('value', ['0', '-1', 'nan', 'inf', '-inf', 'x', '', None, [1]])
def test_number_refuses_what_ok_refuses_and_what_is_not_a_finite_number(value):
    assert message(table.number(lambda x: x > 0), value, 'MY_SOURCE', ROW) == (
        'MY_SOURCE=%r is not valid: expected what this row accepts' % (value,))


def test_number_refuses_a_bool_unless_told_to_take_one():
    assert message(table.number(lambda x: True), True, 'MY_SOURCE', ROW) == (
        'MY_SOURCE=True is not valid: expected what this row accepts')
    assert message(table.number(lambda x: True, bools=False), False, 'S', ROW).startswith(
        'S=False is not valid')
    assert table.number(lambda x: True, bools=True)(True, 'N', ROW) == 1.0
    assert table.number(lambda x: True, bools=True)(False, 'N', ROW) == 0.0


# -- choice(values) -------------------------------------------------------------------------
@pytest.mark.parametrize('value,expected', [('fast', 'fast'), (' SLOW ', 'slow'),
                                            ('Fast', 'fast')])
def test_choice_reads_one_of_its_values_in_any_case(value, expected):
    assert table.choice(('fast', 'slow'))(value, 'N', ROW) == expected


@pytest.mark.parametrize('value', ['medium', '', 'fast,slow', 7])
def test_choice_refuses_naming_the_source_the_value_and_every_value(value):
    assert message(table.choice(('fast', 'slow')), value, 'MY_SOURCE', ROW) == (
        'MY_SOURCE=%r is not valid: expected one of fast, slow' % (value,))


# -- declare ----------------------------------------------------------------------------------
@pytest.fixture
def scratch_rows():
    """Names this test adds to the table, taken out again afterwards."""
    added = []
    yield added
    for name in added:
        table.TABLE.pop(name, None)


def test_declare_adds_a_new_row_and_returns_what_it_was_given(scratch_rows):
    scratch_rows.append(ROW.name)
    other = table.Setting('TEST_ONLY_OTHER', 'test', 'Another row.', table.text)
    scratch_rows.append(other.name)
    assert ROW.name not in table.TABLE
    assert table.declare(ROW, other) == (ROW, other)
    assert table.TABLE[ROW.name] is ROW and table.TABLE[other.name] is other
    assert list(table.TABLE)[-2:] == [ROW.name, other.name]        # in the order declared
    assert table.read(ROW.name, {ROW.name: 'as is'}) == 'as is'


def test_declare_takes_the_same_row_again_but_not_another_under_its_name(scratch_rows):
    scratch_rows.append(ROW.name)
    table.declare(ROW)
    assert table.declare(ROW) == (ROW,)                     # the same row: no change
    with pytest.raises(ValueError) as err:
        table.declare(table.Setting(ROW.name, 'test', 'Another doc.', table.text))
    assert str(err.value) == 'setting TEST_ONLY_SETTING is declared twice'
    assert table.TABLE[ROW.name] is ROW


# -- where read looks when it is given no environ ---------------------------------------------
def test_before_the_file_reader_is_installed_the_table_reads_os_environ_or_the_given_one():
    given = {'A': '1'}
    assert table._process_settings(given) is given
    assert table._process_settings(None) is os.environ


def test_read_settings_with_makes_read_look_where_it_says(scratch_rows):
    scratch_rows.append(ROW.name)
    table.declare(ROW)
    installed = table._SOURCE[0]
    seen = []

    def source(environ):
        seen.append(environ)
        return {ROW.name: 'from the source'}
    try:
        table.read_settings_with(source)
        assert table._SOURCE == [source]
        assert table.read(ROW.name) == 'from the source'
        assert table.read(ROW.name, {'X': '1'}) == 'from the source'
        assert seen == [None, {'X': '1'}]
    finally:
        table.read_settings_with(installed)
    assert table._SOURCE == [installed]
