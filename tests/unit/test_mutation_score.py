"""tests/mutation/score.py: the per-module mutation score and the equivalent-mutant list."""
import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    'mutation_score', os.path.join(HERE, '..', 'mutation', 'score.py'))
score = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(score)


@pytest.mark.parametrize('name, module', [
    ('mxnet_ssp.core.sync.x_make__mutmut_1', 'mxnet_ssp/core/sync.py'),
    ('mxnet_ssp.core.sync.x\u01c1SyncPolicy\u01c1on_push__mutmut_12', 'mxnet_ssp/core/sync.py'),
    ('mxnet_ssp.lab.reproduce.stats.x_time_to_target__mutmut_3',
     'mxnet_ssp/lab/reproduce/stats.py'),
])
def test_module_of_a_mutant_name(name, module):
    assert score.module_of(name) == module


def test_module_of_refuses_what_is_not_a_mutant_name():
    with pytest.raises(ValueError, match='not a mutmut mutant name'):
        score.module_of('mxnet_ssp.core.sync.make')


def test_equivalent_list_needs_a_reason_for_every_line(tmp_path):
    good = tmp_path / 'good.txt'
    good.write_text('# header\n\nmxnet_ssp.a.x_f__mutmut_1  # same value either way\n')
    assert score.read_equivalent(str(good)) == {'mxnet_ssp.a.x_f__mutmut_1': 'same value either way'}
    bad = tmp_path / 'bad.txt'
    bad.write_text('mxnet_ssp.a.x_f__mutmut_1\n')
    with pytest.raises(SystemExit, match='bad.txt:1: every equivalent mutant needs'):
        score.read_equivalent(str(bad))


def test_score_counts_timeouts_and_segfaults_as_killed_and_leaves_equivalents_out():
    results = {'m.a.x_f__mutmut_1': 'killed', 'm.a.x_f__mutmut_2': 'timeout',
               'm.a.x_f__mutmut_6': 'segfault', 'm.a.x_f__mutmut_7': 'suspicious',
               'm.a.x_f__mutmut_3': 'survived', 'm.a.x_f__mutmut_4': 'survived',
               'm.a.x_f__mutmut_5': 'no tests', 'm.b.x_g__mutmut_1': 'killed'}
    rows, problems = score.score(results, {'m.a.x_f__mutmut_4': 'why'})
    assert problems == []
    assert dict(rows['m/a.py']) == {'mutants': 7, 'killed': 3, 'timeout': 1, 'survived': 1,
                                    'equivalent': 1, 'no tests': 1, 'suspicious': 1}
    text, below = score.table(rows, 90.0)
    assert '| m/a.py | 7 | 3 | 1 | 1 | 1 | 2 | 50.0% |' in text.splitlines()
    assert '| m/b.py | 1 | 1 | 0 | 0 | 0 | 0 | 100.0% |' in text.splitlines()
    assert below == ['m/a.py']
    assert score.table(rows, 50.0)[1] == []


def test_a_stale_equivalent_entry_is_a_problem():
    results = {'m.a.x_f__mutmut_1': 'killed'}
    _, problems = score.score(results, {'m.a.x_f__mutmut_1': 'why', 'm.a.x_f__mutmut_9': 'why'})
    assert problems == ['m.a.x_f__mutmut_1 is listed as equivalent but was killed',
                        'm.a.x_f__mutmut_9 is listed as equivalent but no longer exists']


def test_the_project_equivalent_list_parses():
    listed = score.read_equivalent()
    assert all(score.module_of(name) for name in listed)
