"""The pilot's criteria (mxnet_ssp.lab.reproduce.pilot) on runs made up here: each criterion
met and not met, and the reading of a run directory as the runner writes it."""
import json
import math

import pytest

from mxnet_ssp.lab.reproduce import pilot


def run(arm, curve, rate=40.0, duration=90.0, status='ok', n_test=10000, workers=4):
    """A run whose workers each do `rate` iterations per second from worker 0's start (0)."""
    end = curve[-1][0] if curve else 10.0
    logs = {r: [k / rate for k in range(1, int(end * rate) + 1)] for r in range(workers)}
    return {'arm': arm, 'trial': 'trial1', 'status': status, 'curve': curve, 'start': 0.0,
            'logs': logs, 'duration_s': duration, 'eval_s': 5.0, 'n_test': n_test}


def linear(end, top, step=0.25):
    """Accuracy rising linearly from 0.1 to `top` over `end` seconds."""
    n = int(end / step)
    return [(k * step, 0.1 + (top - 0.1) * k / n) for k in range(n + 1)]


def test_a_task_still_learning_at_the_end_meets_c1_and_one_that_plateaus_does_not():
    late = [run(a, linear(60, 0.9)) for a in ('bsp', 'asp', 'ssp15', 'dssp')]
    reading = pilot.criteria(late)
    assert reading['budget_s'] == 60
    # the median curve holds 0.1 + 0.8 * 0.8 = 0.74 at 80% of the budget (48 s)
    assert reading['target'] == pytest.approx(0.74)
    assert reading['c1']['met'] and reading['c1']['share_of_budget'] > 0.75
    # a plateau from 6 s on: the target is held from early on
    flat = [run(a, [(t, p) for t, p in linear(6, 0.9)] + [(6 + k * 0.25, 0.9)
                                                          for k in range(1, 217)])
            for a in ('bsp', 'asp')]
    reading = pilot.criteria(flat)
    assert reading['target'] == pytest.approx(0.9)
    assert not reading['c1']['met'] and reading['c1']['share_of_budget'] < 0.2


def test_c2_compares_gradients_to_target_not_seconds():
    # asp runs twice as fast (gradients per second) but needs as long to the target: twice
    # BSP's gradients
    runs = [run('bsp', linear(60, 0.9), rate=20.0), run('asp', linear(60, 0.9), rate=40.0)]
    c2 = pilot.criteria(runs)['c2']
    assert c2['ratio_to_bsp']['asp'] == pytest.approx(2.0, rel=0.02) and c2['met']
    same = [run('bsp', linear(60, 0.9), rate=40.0), run('asp', linear(60, 0.9), rate=48.0),
            run('ssp15', linear(60, 0.9), rate=40.0)]
    c2 = pilot.criteria(same)['c2']
    assert c2['ratio_to_bsp']['asp'] == pytest.approx(1.2, rel=0.02) and not c2['met']
    # a stale arm that never gets there costs infinitely much
    never = [run('bsp', linear(60, 0.9)), run('bsp', linear(60, 0.9)),
             run('asp', linear(60, 0.3))]
    c2 = pilot.criteria(never)['c2']
    assert math.isinf(c2['median']['asp']) and c2['met']


def test_c3_and_c4_follow_the_test_set_and_the_run_times():
    runs = [run(a, linear(60, 0.9), n_test=1000) for a in ('bsp', 'asp')]
    reading = pilot.criteria(runs)
    assert not reading['c3']['met']                    # sqrt(.74 * .26 / 1000) = 0.0139
    assert reading['c4']['met']                        # 126 runs of 95 s: 3.3 h
    slow = [run(a, linear(60, 0.9), duration=170.0) for a in ('bsp', 'asp')]
    reading = pilot.criteria(slow)
    assert reading['c3']['met'] and not reading['c4']['met']
    assert not reading['met']


def test_the_reader_takes_the_runner_s_files(tmp_path):
    d = tmp_path / 'runs' / 'asp' / 'trial1'
    d.mkdir(parents=True)
    (d / 'run.json').write_text(json.dumps({'status': 'ok', 'duration_s': 80.0,
                                            'server_eval': {'seconds': 4.0}}))
    (d / 'eval.jsonl').write_text(json.dumps({'time': 1000.0, 'elapsed_s': 2.0,
                                              'accuracy': 0.2}) + '\n')
    (d / 'eval_server.jsonl').write_text(''.join(
        json.dumps({'elapsed_s': t, 'accuracy': a}) + '\n' for t, a in linear(20, 0.8)))
    (d / 'train-worker0.jsonl').write_text(''.join(
        json.dumps({'rank': 0, 'iteration': k, 'time': 998.0 + k * 0.1}) + '\n'
        for k in range(1, 201)))
    (d / 'summary.json').write_text(json.dumps({'data_options': {'test_size': 5000}}))
    (tmp_path / 'runs' / 'asp' / 'tune').mkdir()           # tuning runs are not read
    (runs,) = pilot.read_runs(str(tmp_path))
    assert runs['arm'] == 'asp' and runs['start'] == 998.0 and runs['n_test'] == 5000
    assert len(runs['curve']) == 81 and runs['duration_s'] == 80.0 and runs['eval_s'] == 4.0
    assert pilot.gradients_by(runs, 5.0) == 50
    assert pilot.main([str(tmp_path), '--json', str(tmp_path / 'r.json')]) == 0
    assert json.loads((tmp_path / 'r.json').read_text())['finished'] == 1


def test_c1_strict_tells_a_curve_still_learning_from_a_late_noisy_hold():
    # rising to the end: 0.74 held at 80% of the budget, 0.50 at half, 0.90 at the end
    late = [run(a, linear(60, 0.9)) for a in ('bsp', 'asp', 'ssp15', 'dssp')]
    c1s = pilot.criteria(late)['c1_strict']
    assert c1s['held_at_half'] == pytest.approx(0.5) and c1s['held_at_end'] == pytest.approx(0.9)
    assert c1s['median_final_accuracy'] == pytest.approx(0.9) and c1s['met']
    # a plateau at 0.62 from 10 s whose evaluations dip by 0.005 until late: C1 is met (the
    # hold comes late), C1' is not (no gain in the second half, T on the plateau)
    wobble = [(t, 0.1 + 0.052 * t) for t in (k * 0.25 for k in range(41))]
    wobble += [(10 + k * 0.25, 0.62 if k % 7 == 3 and k < 150 else 0.625)
               for k in range(1, 201)]
    reading = pilot.criteria([run('bsp', wobble), run('asp', wobble, rate=80.0)])
    assert reading['c1']['met'] and not reading['c1_strict']['met']
    assert reading['c1_strict']['gain'] < 0.01 and reading['c1_strict']['margin'] < 0.02
    assert reading['met'] and not reading['met_with_c1_strict']
