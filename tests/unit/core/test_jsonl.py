"""The one JSON Lines reader (mxnet_ssp.core.jsonl.read_jsonl) that the advisor, the lab's
collect and the trainer's resume count share: blank lines, a torn last line, a bad line."""
import pytest

from mxnet_ssp.lab.cluster_model.advise import AdviseError
from mxnet_ssp.core.jsonl import read_jsonl


def test_rows_skip_blank_lines_and_keep_their_order(tmp_path):
    path = tmp_path / 'm.jsonl'
    path.write_text('{"a": 1}\n\n   \n{"a": 2}\n\n{"a": 3}')
    assert read_jsonl(str(path)) == [{'a': 1}, {'a': 2}, {'a': 3}]


def test_a_missing_file_has_no_records(tmp_path):
    assert read_jsonl(str(tmp_path / 'missing.jsonl')) == []


@pytest.mark.parametrize('tail', ['{"a": 3', '{"a"', 'x', '{"a": 3}}'])
def test_a_torn_last_line_is_dropped(tmp_path, tail):
    """A last line without a newline that is not JSON: a writer killed mid-record."""
    path = tmp_path / 'm.jsonl'
    path.write_text('{"a": 1}\n{"a": 2}\n' + tail)
    assert read_jsonl(str(path)) == [{'a': 1}, {'a': 2}]


def test_a_whole_last_line_that_is_not_json_is_an_error(tmp_path):
    path = tmp_path / 'm.jsonl'
    path.write_text('{"a": 1}\n{"a": 2\n')
    with pytest.raises(ValueError) as err:
        read_jsonl(str(path))
    assert str(err.value) == '%s line 2 is not JSON' % path


def test_a_malformed_line_is_named_by_its_number_counting_blank_lines(tmp_path):
    path = tmp_path / 'm.jsonl'
    path.write_text('{"a": 1}\n\n{"a": 2\n{"a": 3}\n')
    with pytest.raises(AdviseError) as err:
        read_jsonl(str(path), AdviseError)
    assert str(err.value) == '%s line 3 is not JSON' % path
    assert isinstance(err.value, ValueError) and err.value.__cause__ is None
