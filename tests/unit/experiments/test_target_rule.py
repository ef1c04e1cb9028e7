"""mxnet_ssp.lab.reproduce.target_rule: rule 3 of the lab's design (the trials' target
from the tuning runs), on tuning folders laid out as the runner writes them."""
import json
import math

import pytest

from mxnet_ssp.lab.reproduce import target_rule as R


def _run(root, arm, key, k, status='ok', curve=()):
    d = root / 'runs' / arm / 'tune' / key / ('trial%d' % k)
    d.mkdir(parents=True)
    (d / 'run.json').write_text(json.dumps({'arm': arm, 'trial': k, 'status': status}))
    with open(d / 'eval_server.jsonl', 'w') as f:
        for t, a in curve:
            f.write(json.dumps({'elapsed_s': t, 'accuracy': a}) + '\n')
    return d


def _ramp(rise_at, top=0.95, end=20.0):
    """0.5 until `rise_at`, then `top`, every 0.25 s to `end`."""
    return [(i * 0.25, 0.5 if i * 0.25 < rise_at else top) for i in range(int(end / 0.25) + 1)]


def _tuned(chosen):
    return {arm: {'chosen': lr, 'momentum': 0.9, 'candidates': {
        'lr%g-m0.9' % lr: {'lr': lr, 'momentum': 0.9},
        'lr%g-m0.9' % (2 * lr): {'lr': 2 * lr, 'momentum': 0.9}}}
        for arm, lr in chosen.items()}


@pytest.fixture
def scenario(tmp_path):
    """Two paradigms. a (chosen 0.01): holds 0.93 from 3, 4 and 5 s, 0.94 from 10, 11 and
    never. b (chosen 0.02): holds 0.93 from 4 s, 0.94 from 5 s, once diverged. A run at a
    setting not chosen is the shortest (16 s): it sets the budget, not the pool."""
    for k, (rise93, rise94) in enumerate([(3, 10), (4, 11), (5, None)], 1):
        curve = [(t, 0.5 if t < rise93 else (0.93 if rise94 is None or t < rise94 else 0.94))
                 for t, _ in _ramp(0)]
        _run(tmp_path, 'a', 'lr0.01-m0.9', k, curve=curve)
    for k in (1, 2):
        curve = [(t, 0.5 if t < 4 else (0.93 if t < 5 else 0.94)) for t, _ in _ramp(0)]
        _run(tmp_path, 'b', 'lr0.02-m0.9', k, curve=curve)
    _run(tmp_path, 'b', 'lr0.02-m0.9', 3, status='diverged')
    _run(tmp_path, 'a', 'lr0.02-m0.9', 1, curve=_ramp(1, end=16.0))
    (tmp_path / 'tuned_lr.json').write_text(json.dumps(_tuned({'a': 0.01, 'b': 0.02})))
    return tmp_path


def test_the_pool_is_the_runs_at_each_chosen_setting(scenario):
    pool = R.chosen_runs(str(scenario), _tuned({'a': 0.01, 'b': 0.02}))
    assert sorted((arm, len(runs)) for arm, runs in pool.items()) == [('a', 3), ('b', 3)]
    assert [status for status, _ in pool['b']] == ['ok', 'ok', 'diverged']
    assert R.tuning_budget(str(scenario)) == 16.0


def test_the_target_is_the_highest_step_the_pooled_median_holds_in_time(scenario):
    pool = R.chosen_runs(str(scenario), _tuned({'a': 0.01, 'b': 0.02}))
    # 30% of 16 s is 4.8 s: at 0.93 the pooled times are 3, 4, 5, 4, 4, never -> median 4
    reading = R.read_rule(pool, 16.0)
    rows = {r['target']: r for r in reading['rows']}
    assert reading['limit_s'] == pytest.approx(4.8)
    assert rows[0.93]['pooled_median_s'] == 4.0 and rows[0.93]['holds']
    # at 0.94: 10, 11, never, 5, 5, never -> median 10.5, over
    assert rows[0.94]['pooled_median_s'] == 10.5 and not rows[0.94]['holds']
    assert rows[0.935]['pooled_median_s'] == 10.5 and math.isinf(rows[0.945]['pooled_median_s'])
    assert reading['target'] == 0.93
    # per paradigm at 0.93: a's median 4, b's 4 (4, 4, never): both within
    assert rows[0.93]['per_arm'] == {'a': 4.0, 'b': 4.0} and reading['per_arm_target'] == 0.93
    # a tighter fraction: 20% of 16 s = 3.2 s; nothing holds
    assert R.read_rule(pool, 16.0, fraction=0.2)['target'] is None


def test_the_per_paradigm_reading_is_reported_beside_the_pooled_one(scenario):
    pool = R.chosen_runs(str(scenario), _tuned({'a': 0.01, 'b': 0.02}))
    # 30% of 36 s = 10.8 s: pooled 0.94 median 10.5 holds; a's own median (11) does not
    reading = R.read_rule(pool, 36.0)
    assert reading['target'] == 0.94 and reading['per_arm_target'] == 0.93


def test_the_command_prints_the_reading_and_writes_it(scenario, tmp_path, capsys):
    out = tmp_path / 'rule.json'
    assert R.main([str(scenario), '--json', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'common budget 16.00 s' in text and 'target by the rule (pooled median): 0.93' in text
    assert '0.940: pooled median 10.50 s; per paradigm: a 11.00 b 5.00' in text
    assert json.loads(out.read_text())['target'] == 0.93


def test_a_folder_without_tuned_lr_json_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        R.main([str(tmp_path)])
    assert exc.value.code == 2
    assert 'tuned_lr.json' in capsys.readouterr().err


def test_task_c_s_reading_takes_the_fraction_and_the_lowest_level(scenario, capsys):
    # 80% of 16 s = 12.8 s: 0.94's pooled median (10.5 s) holds; 0.5 is read too (lowest 0.005)
    assert R.main([str(scenario), '--fraction', str(R.TASK_C['fraction']),
                   '--lowest', str(R.TASK_C['lowest'])]) == 0
    text = capsys.readouterr().out
    assert '80% of it: 12.80 s' in text and 'target by the rule (pooled median): 0.94' in text
    assert '0.500: pooled median 0.00 s (holds)' in text


@pytest.mark.parametrize('argv,message', [(['--fraction', '0'], '--fraction 0.0 is not valid'),
                                          (['--lowest', '1.5'], '--lowest 1.5 is not valid')])
def test_a_bad_fraction_or_level_is_refused_by_name(scenario, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        R.main([str(scenario)] + argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err
