"""mxnet-ssp-advise's readers, fit, prediction and lab check (mxnet_ssp.lab.cluster_model.advise), on inputs
whose content is known exactly: hand-written metric files, runs with chosen compute times,
step times, jitter and slow iterations, and clusters whose simulation can be done by hand
(iteration times that are exact binary fractions, no jitter)."""
import json
import os
import statistics

import pytest

from mxnet_ssp.lab.cluster_model import advise
from mxnet_ssp.lab.cluster_model.advise import AdviseError, Fit, check_lab, fit_run, predict
from mxnet_ssp.lab.cluster_model.profiles import get_scenario
from mxnet_ssp.lab.cluster_model.simulate import simulate
from advise_logs import write_train_logs


def write_jsonl(path, rows):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), 'w') as f:
        for row in rows:
            f.write(json.dumps(row) + '\n')


def write_cycled_logs(directory, compute, steps, cycles, n=35):
    """train-worker<rank>.jsonl where worker r's compute cycles through
    compute[r] * cycles[r][k] and its step is steps[r] (all in compute_s, no sleep_s)."""
    for rank, c in enumerate(compute):
        t = 0.0
        rows = []
        for i in range(n):
            x = c * cycles[rank][i % len(cycles[rank])]
            t += x + steps[rank]
            rows.append({'time': t, 'compute_s': x, 'step_s': steps[rank]})
        write_jsonl(directory / ('train-worker%d.jsonl' % rank), rows)


# -- readers ---------------------------------------------------------------------------------

def test_read_run_refuses_what_is_not_a_directory(tmp_path):
    for path in (tmp_path / 'missing', tmp_path / 'file.jsonl'):
        if path.name == 'file.jsonl':
            path.write_text('{}\n')
        with pytest.raises(AdviseError) as err:
            advise.read_run(str(path))
        assert str(err.value) == '%s is not a directory' % path


def test_read_run_without_metrics_says_where_they_come_from(tmp_path):
    (tmp_path / 'train-worker0.jsonl.bak').write_text('{}\n')
    (tmp_path / 'xworker-0.jsonl').write_text('{}\n')
    (tmp_path / 'train-workerA.jsonl').write_text('{}\n')
    with pytest.raises(AdviseError) as err:
        advise.read_run(str(tmp_path))
    assert str(err.value) == (
        "%s has no train-worker<rank>.jsonl (mxnet-ssp-train's --save-dir) and no "
        "worker-<rank>.jsonl (MXNET_SSP_METRICS_DIR of a dist_ssp or dist_dssp job)" % tmp_path)


def test_read_run_prefers_train_logs_and_keys_records_by_numeric_rank(tmp_path):
    write_jsonl(tmp_path / 'train-worker10.jsonl', [{'x': 10}])
    write_jsonl(tmp_path / 'train-worker2.jsonl', [{'x': 2}, {'x': 22}])
    write_jsonl(tmp_path / 'worker-0.jsonl', [{'x': 'store'}])
    (tmp_path / 'notes.txt').write_text('not metrics')
    source, per_rank = advise.read_run(str(tmp_path))
    assert source == 'train log'
    assert list(per_rank.items()) == [(2, [{'x': 2}, {'x': 22}]), (10, [{'x': 10}])]


def test_read_run_falls_back_to_store_metrics(tmp_path):
    write_jsonl(tmp_path / 'worker-1.jsonl', [{'clock': 1}])
    write_jsonl(tmp_path / 'worker-0.jsonl', [{'clock': 0}])
    source, per_rank = advise.read_run(str(tmp_path))
    assert source == 'store metrics'
    assert list(per_rank.items()) == [(0, [{'clock': 0}]), (1, [{'clock': 1}])]


# -- one worker's samples --------------------------------------------------------------------

def test_train_log_samples_leave_out_the_warm_up_and_add_the_padding():
    rows = [{'compute_s': 100.0 + i, 'step_s': 200.0 + i} for i in range(5)]   # warm-up
    rows.insert(2, {'compute_s': 1.0})            # no step: not an iteration, not counted
    rows += [{'compute_s': 1.0, 'sleep_s': 0.5, 'step_s': 0.25},
             {'step_s': 9.0},                     # no compute: left out
             {'compute_s': 2.0, 'step_s': 0.5},   # no sleep_s: nothing added
             {'compute_s': 9.0},                  # no step: left out
             {'compute_s': 3.0, 'sleep_s': 1.0, 'step_s': 0.75, 'time': 5.0}]
    compute, steps = advise._samples('train log', rows)
    assert compute == [1.5, 2.0, 4.0]
    assert steps == [0.25, 0.5, 0.75]


def test_store_metric_samples_are_the_time_from_a_release_to_the_next_push():
    def row(clock, released, push=None):
        r = {'clock': clock, 'reported_at': 10.0 * clock, 'released_at': released}
        if push is not None:
            r['push_s'] = push
        return r
    rows = [row(k, 10.0 * k + 1.0, 0.5) for k in range(1, 6)]       # the warm-up: clocks 1-5
    rows += [row(8, 81.0, 0.25), row(6, 61.0, 0.5),               # out of clock order
             {'clock': 7, 'reported_at': 70.0},                   # not released: left out
             row(7, 71.0, 1.0), row(9, 91.0),                     # no push time: 0
             row(11, 111.0, 0.5),                                 # after a gap: no pair
             row(12, 120.5, 0.5),
             row(13, 131.0, 9.75)]                                # pushed before release: 0
    rows.reverse()
    compute, steps = advise._samples('store metrics', rows)
    # pairs (6,7) (7,8) (8,9) (11,12) (12,13): reported_at(b) - push_s(b) - released_at(a)
    assert compute == [70 - 1.0 - 61, 80 - 0.25 - 71, 90 - 0.0 - 81, 120 - 0.5 - 111, 0.0]
    assert steps == [1.0, 0.25, 0.0, 0.5, 0.5, 9.75]


# -- the fit ---------------------------------------------------------------------------------

def test_twenty_usable_iterations_are_enough(tmp_path):
    write_train_logs(tmp_path, [0.01, 0.02], 0.001, n=25)
    fit = fit_run(str(tmp_path))
    assert fit.iterations == [20, 20]


def test_too_few_iterations_name_the_worker_and_the_minimum(tmp_path):
    write_train_logs(tmp_path, [0.01, 0.02], 0.001, n=30)
    write_jsonl(tmp_path / 'train-worker1.jsonl',
                [{'compute_s': 0.02, 'step_s': 0.001, 'time': i} for i in range(22)])
    with pytest.raises(AdviseError) as err:
        fit_run(str(tmp_path))
    assert str(err.value) == ('%s: worker 1 has 17 usable iterations; the fit needs at least '
                              '20 after the first 5' % tmp_path)


@pytest.mark.parametrize('ranks', [[0], [1, 2], [0, 2]])
def test_ranks_must_be_0_to_w_minus_1_with_two_or_more(tmp_path, ranks):
    for r in ranks:
        write_jsonl(tmp_path / ('train-worker%d.jsonl' % r),
                    [{'compute_s': 0.01, 'step_s': 0.001}] * 30)
    with pytest.raises(AdviseError) as err:
        fit_run(str(tmp_path))
    assert str(err.value) == ('%s: expected the metrics of ranks 0..W-1 with W >= 2, found '
                              'ranks %s' % (tmp_path, ranks))


def test_a_worker_with_no_compute_cannot_be_fitted(tmp_path):
    write_train_logs(tmp_path, [0.01], 0.001, n=30)
    write_jsonl(tmp_path / 'train-worker1.jsonl',
                [{'compute_s': 0.0, 'step_s': 0.001}] * 30)
    with pytest.raises(AdviseError) as err:
        fit_run(str(tmp_path))
    assert str(err.value) == "%s: a worker's median compute is 0 s" % tmp_path


def test_the_jitter_is_the_median_workers_relative_mad_scaled_to_a_deviation(tmp_path):
    # 30 iterations after the warm-up, each worker's compute cycles c(1-a), c, c(1+a): median
    # c, MAD a*c; relative MADs 0.1, 0.2, 0.4 -> jitter 1.4826 * 0.2 (the median worker's)
    cycles = [[1 - a, 1.0, 1 + a] for a in (0.1, 0.2, 0.4)]
    write_cycled_logs(tmp_path, [0.04, 0.01, 0.02], [0.003, 0.002, 0.005], cycles)
    fit = fit_run(str(tmp_path))
    assert fit.source == 'train log'
    assert fit.compute_s == pytest.approx([0.04, 0.01, 0.02], rel=1e-12)
    assert fit.jitter == pytest.approx(1.4826 * 0.2, rel=1e-9)
    assert fit.iterations == [30, 30, 30]
    # the worker whose median step is smallest (rank 1) gives the overhead and the samples
    assert fit.overhead_s == 0.002 and fit.step_samples == [0.002] * 30
    assert fit.slow_share == 0.0


def test_the_slow_share_counts_iterations_over_twice_their_workers_median(tmp_path):
    # worker 0: 3 iterations at 2.5x and 2 at exactly 2x its median (not over); worker 1: 1
    # at 4x; 30 iterations each after the warm-up -> 4 of 60
    cycles = [[1.0] * 5 + [2.5, 1.0, 2.5, 1.0, 2.5, 2.0, 1.0, 2.0] + [1.0] * 17,
              [1.0] * 10 + [4.0] + [1.0] * 19]
    write_cycled_logs(tmp_path, [0.125, 0.25], [0.001, 0.001], cycles, n=35)
    fit = fit_run(str(tmp_path))
    assert fit.compute_s == [0.125, 0.25]
    assert fit.slow_share == pytest.approx(4 / 60.0)
    assert fit.jitter == 0.0


def test_store_metrics_fit_takes_the_median_push_of_the_worker_that_pushed_fastest(tmp_path):
    for rank, (compute, push) in enumerate([(0.25, 0.125), (0.5, 0.0625)]):
        t = 0.0
        rows = []
        for clock in range(1, 31):
            t += compute + push
            rows.append({'clock': clock, 'reported_at': t, 'released_at': t, 'push_s': push})
        write_jsonl(tmp_path / ('worker-%d.jsonl' % rank), rows)
    fit = fit_run(str(tmp_path))
    assert fit.source == 'store metrics'
    assert fit.compute_s == pytest.approx([0.25, 0.5], rel=1e-12)
    assert fit.iterations == [24, 24]               # 25 after the warm-up: 24 pairs
    assert fit.overhead_s == 0.0625 and fit.step_samples == [0.0625] * 24


# -- the fitted scenario and the simulator's draws -------------------------------------------

def test_the_scenario_has_the_fitted_compute_relative_to_the_fastest_worker():
    fit = Fit('train log', [0.02, 0.01, 0.04, 0.01], 0.3, 0.001, [30] * 4, 0.0)
    sc = fit.scenario()
    assert (sc.name, sc.description, sc.workers) == ('fitted', 'fitted from a run', 4)
    assert sc.base_s == 0.01 and sc.slow == ((0, 2.0), (2, 4.0)) and sc.jitter == 0.3
    assert sc.times() == [0.02, 0.01, 0.04, 0.01]
    assert fit.scenario(name='other').name == 'other'
    assert fit.workers == 4


def test_a_balanced_scenario_gives_every_worker_the_harmonic_mean():
    fit = Fit('train log', [0.0625, 0.1875], 0.05, 0.001, [30] * 2, 0.0)
    sc = fit.scenario(balanced=True)
    assert sc.base_s == pytest.approx(0.09375, rel=1e-12)     # 2 / (16 + 16/3)
    assert sc.slow == () and sc.workers == 2 and sc.jitter == 0.05


@pytest.mark.parametrize('jitter,kept', [(0.99, 0.99), (1.5, 0.99), (0.98, 0.98)])
def test_the_scenario_jitter_is_capped_below_one(jitter, kept):
    fit = Fit('train log', [0.01, 0.02], jitter, 0.001, [30] * 2, 0.0)
    assert fit.scenario().jitter == kept


def test_the_simulated_cluster_adds_a_step_drawn_from_the_samples():
    fit = Fit('train log', [0.0625, 0.1875], 0.0, 0.5, [30] * 2, 0.0,
              [0.125, 0.0625, 0.25])
    drawn = advise._WithSteps(fit)
    assert drawn.name == 'fitted' and drawn.workers == 2 and drawn.jitter == 0.0
    assert drawn.steps == [0.125, 0.0625, 0.25]
    assert drawn.times() == [0.1875, 0.3125]               # + the median step
    stream = drawn.stream(1, 4)
    draws = [stream.next() for _ in range(300)]
    assert set(draws) == {0.1875 + s for s in (0.125, 0.0625, 0.25)}
    again = drawn.stream(1, 4)
    assert [again.next() for _ in range(300)] == draws      # seeded by (seed, rank)
    other_rank = drawn.stream(0, 4)
    assert [other_rank.next() - 0.0625 for _ in range(300)] != [d - 0.1875 for d in draws]
    other_seed = drawn.stream(1, 5)
    assert [other_seed.next() for _ in range(300)] != draws
    balanced = advise._WithSteps(fit, balanced=True)
    assert balanced.times() == pytest.approx([0.09375 + 0.125] * 2, rel=1e-12)


def test_without_step_samples_every_iteration_pays_the_fitted_overhead():
    fit = Fit('train log', [0.0625, 0.1875], 0.2, 0.125, [30] * 2, 0.0)
    drawn = advise._WithSteps(fit)
    assert drawn.steps == [0.125]
    compute = fit.scenario().stream(0, 3)
    stream = drawn.stream(0, 3)
    assert [stream.next() for _ in range(50)] == [compute.next() + 0.125 for _ in range(50)]


# -- predictions -----------------------------------------------------------------------------

EXACT = Fit('train log', [0.0625, 0.1875], 0.0, 0.0625, [30] * 2, 0.0, [0.0625])
# iterations of 0.125 s and 0.25 s: in 10 s, 80 and 40 of them


def test_predictions_of_an_exact_cluster_follow_by_hand():
    paradigms = (('free', 'asp', False), ('lock-step', 'ssp:0', False),
                 ('even', 'ssp:0', True))
    free, lock, even = predict(EXACT, wall_time=10.0, seeds=2, paradigms=paradigms)
    assert (free.label, free.policy, free.balanced) == ('free', 'asp', False)
    assert (even.label, even.policy, even.balanced) == ('even', 'ssp:0', True)
    assert free.throughput == 12.0 and free.throughput_range == (12.0, 12.0)
    # free: worker 0's k-th push leads worker 1 by ceil(k / 2) (1, 1, 2, 2, ..., 40, 40),
    # worker 1's 40 pushes lead by 0: mean 2 * (1 + ... + 40) / 120; the 114th of the 120
    # leads in order (95%) is 37
    assert free.fast_wait == 0.0 and free.mean_lead == pytest.approx(41 / 3.0)
    assert free.p95_lead == 37
    # lock-step: both workers at the slow one's 0.25 s, the fast one waiting half of it
    assert lock.throughput == 8.0 and lock.fast_wait == pytest.approx(0.5, abs=0.02)
    assert lock.mean_lead == 0.0 and lock.p95_lead == 0
    # balanced: both 0.09375 + 0.0625 s, nobody waits: floor(10 / 0.15625) = 64 each
    assert even.throughput == pytest.approx(12.8) and even.fast_wait == pytest.approx(0.0)


def test_by_default_the_wall_time_is_2000_iterations_of_the_slowest_worker():
    fit = Fit('train log', [0.02, 0.03], 0.2, 0.5, [30] * 2, 0.0, [0.001, 0.004, 0.002])
    paradigms = (('ASP', 'asp', False),)
    assert predict(fit, seeds=1, paradigms=paradigms) == predict(
        fit, wall_time=2000 * 0.032, seeds=1, paradigms=paradigms)


def test_the_default_wall_time_runs_the_slowest_worker_2000_iterations():
    # workers of 1000 s + a 1 s step, no jitter: in 2000 x 1001 s each does 2000 iterations
    fit = Fit('train log', [1000.0, 1000.0], 0.0, 1.0, [30] * 2, 0.0, [1.0])
    free, = predict(fit, seeds=1, paradigms=(('ASP', 'asp', False),))
    assert free.throughput == pytest.approx(4000 / (2000 * 1001.0), rel=1e-12)


def test_the_least_waiting_worker_is_the_one_with_the_smallest_median_step(tmp_path):
    # worker 0's steps begin lower than worker 1's but their median is higher
    write_cycled_logs(tmp_path / 'a', [0.01, 0.01], [0.004, 0.002], [[1.0], [1.0]], n=30)
    rows = [json.loads(line) for line in open(str(tmp_path / 'a' / 'train-worker0.jsonl'))]
    rows[5]['step_s'] = 0.001
    write_jsonl(tmp_path / 'a' / 'train-worker0.jsonl', rows)
    fit = fit_run(str(tmp_path / 'a'))
    assert fit.overhead_s == 0.002 and fit.step_samples == [0.002] * 25


def test_predictions_are_medians_over_the_seeds_given():
    fit = Fit('train log', [0.01, 0.03, 0.02], 0.3, 0.5, [30] * 3, 0.0, [0.001, 0.004])
    paradigms = (('SSP', 'ssp:1', False), ('balanced', 'ssp:0', True),
                 ('ASP', 'asp', False))
    got = predict(fit, wall_time=3.0, seeds=3, paradigms=paradigms)
    assert advise.DEFAULT_SEEDS == 10 and len(predict(fit, wall_time=3.0,
                                                      paradigms=paradigms)[0].rates) == 10
    for p, (label, policy, balanced) in zip(got, paradigms):
        runs = [simulate(None, policy, wall_time=3.0, scenario=advise._WithSteps(fit, balanced),
                         seed=s) for s in range(3)]
        rates = sorted(r.iterations_per_second for r in runs)
        assert p.throughput == rates[1] and p.throughput_range == (rates[0], rates[2])
        assert sorted(p.rates) == rates and p.times == () and p.reached == ()
        assert rates[0] < rates[2]
        if balanced:      # every worker is as fast: the mean wait of all of them
            waits = sorted(sum(r.wait) / 3 / 3.0 for r in runs)
        else:
            waits = sorted(r.wait[0] / 3.0 for r in runs)       # worker 0 is the fastest
        assert p.fast_wait == pytest.approx(waits[1], rel=1e-9)
        assert (p.fast_wait > 0) == (policy != 'asp')          # nobody waits under ASP
        assert p.mean_lead == sorted(r.mean_lead for r in runs)[1]
        assert p.p95_lead == sorted(r.lead_quantile(0.95) for r in runs)[1]
    assert got[0].p95_lead == 1 and got[0].mean_lead > 0
    assert 0 < got[2].p95_lead < max(r.max_lead for r in runs)


def test_predicted_finish_times_of_an_exact_cluster():
    finish = advise.predicted_finish_times
    assert finish(EXACT, 'asp', 8, 0) == [1.0, 2.0]
    # lock-step: the fast worker waits 0.125 s for each of the slow one's first 7 pushes
    assert finish(EXACT, 'ssp:0', 8, 0) == [1.875, 2.0]
    assert finish(EXACT, 'ssp:0', 8, 0, balanced=True) == pytest.approx([1.25, 1.25])


def test_predicted_finish_times_use_the_seeds_draws():
    fit = Fit('train log', [0.01, 0.03], 0.3, 0.5, [30] * 2, 0.0, [0.001, 0.004])
    drawn = advise._WithSteps(fit)
    for seed in (0, 1):
        streams = [drawn.stream(r, seed) for r in range(2)]
        alone = [sum(s.next() for _ in range(50)) for s in streams]
        assert advise.predicted_finish_times(fit, 'asp', 50, seed) == pytest.approx(alone)
        # under BSP the last worker finishes with the simulation's last push
        bsp = advise.predicted_finish_times(fit, 'ssp:0', 50, seed)
        last = simulate(None, 'ssp:0', iterations=50, scenario=drawn, seed=seed).wall_time
        assert max(bsp) == pytest.approx(last, rel=1e-12) and min(bsp) < last
    assert advise.predicted_finish_times(fit, 'asp', 50, 0) != advise.predicted_finish_times(
        fit, 'asp', 50, 1)


# -- a lab's measured finish times and the check ---------------------------------------------

def test_finish_times_count_from_the_first_start_of_any_worker(tmp_path):
    write_jsonl(tmp_path / 'train-worker0.jsonl',
                [{'time': 10.0, 'compute_s': 1.0, 'sleep_s': 0.5, 'step_s': 0.25},
                 {'time': 15.0}, {'time': 20.0}])
    write_jsonl(tmp_path / 'train-worker1.jsonl',        # no timings: started at its time
                [{'time': 9.0}, {'time': 12.0}, {'time': 25.0}, {'time': 30.0}])
    assert advise._finish_times(str(tmp_path)) == ([11.75, 21.75], 3)
    write_jsonl(tmp_path / 'train-worker1.jsonl',
                [{'time': 9.0, 'compute_s': 0.25, 'sleep_s': 0.5, 'step_s': 0.125},
                 {'time': 31.0}])
    assert advise._finish_times(str(tmp_path)) == ([11.875, 22.875], 2)


@pytest.mark.parametrize('key', ['compute_s', 'sleep_s', 'step_s'])
def test_each_timing_of_the_first_iteration_moves_the_start(tmp_path, key):
    write_jsonl(tmp_path / 'train-worker0.jsonl', [{'time': 10.0}, {'time': 20.0}])
    write_jsonl(tmp_path / 'train-worker1.jsonl', [{'time': 9.5, key: 0.25}, {'time': 30.0}])
    assert advise._finish_times(str(tmp_path)) == ([10.75, 20.75], 2)


def test_check_lab_without_asp_runs_says_so(tmp_path):
    (tmp_path / 'runs' / 'bsp').mkdir(parents=True)
    with pytest.raises(AdviseError) as err:
        check_lab(str(tmp_path))
    assert str(err.value) == ("%s has no runs/asp: run the lab's asp paradigm first"
                              % tmp_path)
    (tmp_path / 'runs' / 'asp').mkdir()
    with pytest.raises(AdviseError) as err:
        check_lab(str(tmp_path))
    assert str(err.value) == '%s has no ASP trial' % (tmp_path / 'runs' / 'asp')


def test_check_lab_fits_the_median_asp_trial_and_pools_the_step_samples(tmp_path):
    runs = tmp_path / 'runs'
    # three ASP trials: compute medians (0.0625, 0.25), (0.125, 0.375), (0.25, 0.5) and
    # steps 0.03125 / 0.0625 / 0.125 -> the fit: compute (0.125, 0.375), every step a draw
    # of the three, 0.072917 s on average
    for name, compute, step in (('t1', [0.0625, 0.25], 0.03125), ('t2', [0.125, 0.375], 0.0625),
                                ('t3', [0.25, 0.5], 0.125)):
        write_cycled_logs(runs / 'asp' / name, compute, [step, step], [[1.0], [1.0]], n=25)
    write_cycled_logs(runs / 'bsp-balance' / 'b', [0.125, 0.375], [0.0625] * 2,
                      [[1.0], [1.0]], n=200)
    write_cycled_logs(runs / 'ssp3' / 'a', [0.125, 0.375], [0.0625] * 2, [[1.0], [1.0]], n=30)
    (runs / 'ssp3' / 'b-empty').mkdir()                           # no metrics: AdviseError
    write_jsonl(runs / 'ssp3' / 'c-no-rows' / 'train-worker0.jsonl', [])       # IndexError
    write_jsonl(runs / 'ssp3' / 'c-no-rows' / 'train-worker1.jsonl', [{'time': 1.0}])
    write_jsonl(runs / 'ssp3' / 'd-no-time' / 'train-worker0.jsonl', [{'x': 1}])  # KeyError
    write_jsonl(runs / 'ssp3' / 'd-no-time' / 'train-worker1.jsonl', [{'x': 1}])
    write_cycled_logs(runs / 'ssp3' / 'e', [0.125, 0.375], [0.0625] * 2, [[1.0], [1.0]], n=40)
    write_cycled_logs(runs / 'asp-lrtau' / 'a', [0.125, 0.375], [0.0625] * 2, [[1.0], [1.0]])
    (runs / 'notes').mkdir()
    rows = check_lab(str(tmp_path), seeds=1)
    assert [(arm, trial) for arm, trial, _, _ in rows] == [
        ('asp', 't1'), ('asp', 't2'), ('asp', 't3'), ('bsp-balance', 'b'), ('ssp3', 'a'),
        ('ssp3', 'e')]
    step = (0.03125 + 0.0625 + 0.125) / 3
    by_run = {(arm, trial): (m, p) for arm, trial, m, p in rows}
    measured, predicted = by_run[('asp', 't2')]
    assert measured == pytest.approx([25 * 0.1875, 25 * 0.4375])
    assert predicted == pytest.approx([25 * (0.125 + step), 25 * (0.375 + step)], rel=0.15)
    # 200 lock-step rounds at the balanced 0.1875 s plus the larger of two drawn steps:
    # 0.125 with probability 5/9, 0.0625 3/9, 0.03125 1/9 -> 0.09375 on average
    measured, predicted = by_run[('bsp-balance', 'b')]
    assert measured == pytest.approx([200 * 0.1875, 200 * 0.4375])
    assert predicted == pytest.approx([200 * (0.1875 + 0.09375)] * 2, rel=0.02)
    assert len(by_run[('ssp3', 'a')][1]) == 2
    # exactly the model the fit stands for (the medians, the pooled samples)
    fit = Fit('train log', [0.125, 0.375], 0.0, 0.0625, [20] * 2, 0.0,
              [0.03125] * 20 + [0.0625] * 20 + [0.125] * 20)
    assert by_run[('ssp3', 'e')][1] == pytest.approx(
        advise.predicted_finish_times(fit, 'ssp:3', 40, 0))
    assert by_run[('bsp-balance', 'b')][1] == pytest.approx(
        advise.predicted_finish_times(fit, 'ssp:0', 200, 0, balanced=True))


def test_check_lab_takes_the_median_jitter_and_the_median_over_its_seeds(tmp_path):
    runs = tmp_path / 'runs'
    # ASP trials with relative MADs (0.1, 0.1), (0.2, 0.4), (0.3, 0.3): per-trial jitters
    # 1.4826 x 0.1 / 0.3 / 0.3 -> median 1.4826 x 0.3
    for name, (a, b) in (('t1', (0.1, 0.1)), ('t2', (0.2, 0.4)), ('t3', (0.3, 0.3))):
        write_cycled_logs(runs / 'asp' / name, [0.125, 0.25], [0.0625] * 2,
                          [[1 - a, 1.0, 1 + a], [1 - b, 1.0, 1 + b]])
    write_cycled_logs(runs / 'ssp1' / 'x', [0.125, 0.25], [0.0625] * 2, [[1.0], [1.0]], n=60)
    fit = Fit('train log', [0.125, 0.25], 1.4826 * 0.3, 0.0625, [30] * 2, 0.0, [0.0625])
    per_seed = [advise.predicted_finish_times(fit, 'ssp:1', 60, s) for s in range(3)]
    median = [statistics.median(p[r] for p in per_seed) for r in range(2)]
    assert median != per_seed[0] and median != per_seed[2]
    rows = {(arm, trial): p for arm, trial, _, p in check_lab(str(tmp_path))}
    assert rows[('ssp1', 'x')] == pytest.approx(median, rel=1e-9)
    two = [statistics.median(p[r] for p in per_seed[:2]) for r in range(2)]
    rows = {(arm, trial): p for arm, trial, _, p in check_lab(str(tmp_path), seeds=2)}
    assert rows[('ssp1', 'x')] == pytest.approx(two, rel=1e-9)


def test_the_default_wall_time_counts_the_slowest_workers_link():
    # 100 ms of compute + the cluster's 3 ms overhead per step; worker 1's link adds 1.57 s
    # (the lab MLP's step at 10 Mbit/s): 2000 of its iterations are the default wall time
    sc = get_scenario('workers=2,base_ms=100,links=1gbit:10mbit')
    fit = advise.fit_cluster(sc)
    asp = (('ASP', 'asp', False),)
    slowest = 0.1 + 0.003 + sc.link_times()[1]
    assert sc.link_times()[1] == pytest.approx(1.5735, rel=1e-4)
    assert predict(fit, seeds=1, paradigms=asp) == predict(
        fit, wall_time=2000 * slowest, seeds=1, paradigms=asp)
