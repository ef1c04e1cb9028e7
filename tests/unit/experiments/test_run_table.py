"""mxnet_ssp.lab.reproduce.run_table: a lab archive's per-run table, from run folders
laid out as the runner writes them."""
import json

import pytest

from mxnet_ssp.lab.reproduce import run_table as T


def _run(directory, started, status='ok', curve=(), summary=None, load=(1.25, 2.0)):
    directory.mkdir(parents=True)
    (directory / 'run.json').write_text(json.dumps(
        {'status': status, 'started': started, 'load_avg': list(load)}))
    if summary is not None:
        (directory / 'summary.json').write_text(json.dumps(summary))
    with open(directory / 'eval_server.jsonl', 'w') as f:
        for t, a in curve:
            f.write(json.dumps({'elapsed_s': t, 'accuracy': a}) + '\n')
    return str(directory)


def test_rows_in_start_order_with_both_crossings(tmp_path, capsys):
    # a lucky point at 1 s, held from 2 s on: first 1.00, sustained 2.00
    curve = [(0.5, 0.5), (1.0, 0.93), (1.5, 0.9), (2.0, 0.95), (3.0, 0.95), (4.5, 0.96)]
    late = _run(tmp_path / 'runs' / 'ssp3' / 'tune' / 'lr0.01-m0.9' / 'trial2', 200.0,
                curve=curve, summary={'final_accuracy': 0.9512, 'wall_time_s': 57.04})
    early = _run(tmp_path / 'runs' / 'asp' / 'trial3', 100.0, status='diverged', load=())
    none = tmp_path / 'runs' / 'asp' / 'trial4'
    none.mkdir(parents=True)
    assert T.main(['--target', '0.92', late, early, str(none)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith('| arm | setting | trial | status | final acc | training s | '
                               '0.92 first (s) | 0.92 sustained (s) |')
    assert lines[2:] == ['| asp | - | 3 | diverged | - | - | never | never | - |',
                         '| ssp3 | lr0.01-m0.9 | 2 | ok | 0.951 | 57.0 | 1.00 | 2.00 | '
                         '1.2 / 2.0 |']
    assert 'trial4: no run.json' in err


def test_another_target_moves_the_crossings(tmp_path):
    curve = [(1.0, 0.93), (2.0, 0.95), (4.5, 0.96)]
    run = _run(tmp_path / 'runs' / 'bsp' / 'trial1', 1.0, curve=curve)
    text, missing = T.table([run], 0.95)
    assert missing == [] and text.splitlines()[-1].split(' | ')[6:8] == ['2.00', '2.00']
    assert '0.95 first (s)' in text


def test_a_target_outside_0_1_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        T.main(['--target', '92', str(tmp_path)])
    assert exc.value.code == 2
    assert '--target 92: expected an accuracy in (0, 1]' in capsys.readouterr().err
