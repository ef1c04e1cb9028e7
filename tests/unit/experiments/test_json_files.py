"""A run directory's JSON files: written atomically, indented or (a lab's results.json) compact."""
import json

from mxnet_ssp.lab.reproduce.json_files import read_json, write_json


def test_compact_and_indented_files_read_back_the_same(tmp_path):
    obj = {'grid': {'arms': ['bsp', 'asp'], 'lr': 0.003}, 'rows': [[1, 2.5], [3, None]]}
    write_json(str(tmp_path / 'a.json'), obj)
    write_json(str(tmp_path / 'b.json'), obj, compact=True)
    indented = (tmp_path / 'a.json').read_text()
    compact = (tmp_path / 'b.json').read_text()
    assert read_json(str(tmp_path / 'a.json')) == read_json(str(tmp_path / 'b.json')) == obj
    assert compact == json.dumps(obj, separators=(',', ':')) + '\n'
    assert '\n  ' in indented and len(compact) < len(indented)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['a.json', 'b.json']   # no temporaries


def test_an_unreadable_file_reads_as_none(tmp_path):
    (tmp_path / 'torn.json').write_text('{"grid": ')
    assert read_json(str(tmp_path / 'torn.json')) is None
    assert read_json(str(tmp_path / 'missing.json')) is None
