"""mxnet-ssp-advise's command line and what it prints (mxnet_ssp.lab.cluster_model.advise: main,
format_advice, format_check).

The formatters get hand-built fits, predictions and lab rows whose printed numbers are worked
out here from the inputs; main gets argv lists, tiny synthetic runs
(tests/support/advise_logs.py writes them as mxnet-ssp-train does, like
tests/unit/cluster_model/test_advise.py) and, where only its wiring is
checked, stand-ins for the fit and the simulation that record what main passed them."""
import math

import pytest

from mxnet_ssp.lab.cluster_model import advise
from mxnet_ssp.lab.cluster_model.advise import AdviseError, Fit, Prediction
from advise_logs import write_train_logs


# -- format_advice ---------------------------------------------------------------------------

HEADER = ('| paradigm | iterations/s (all workers) | charged error | charged / best | fastest '
          'workers waiting | lead at release: mean / p95 | gradient staleness: mean / p95 |')
RULE = '|---|---:|---:|---:|---:|---:|---:|'


def advice_inputs(slow_share=0.0):
    # 350 ms and 1.2 s of compute, 60% jitter, 250 ms of step: large enough that a 1% error in
    # a scale factor shows in the printed digits
    fit = Fit('store metrics', [0.35, 1.2], 0.6, 0.25, [21, 23], slow_share, [0.25])
    bsp = Prediction('BSP', 'ssp:0', False, 2.6, (2.2, 2.8), 0.6, 0.0, 0, 0.0, 0, 0.05)
    asp = Prediction('ASP', 'asp', False, 4.0, (3.5, 4.5), 0.0, 1.5, 4, 1.0, 2, 0.0)
    ssp1 = Prediction('SSP s=1', 'ssp:1', False, 3.8, (3.6, 3.9), 0.2, 0.5, 1, 0.5, 1, 0.035)
    return fit, [bsp, asp, ssp1], advise.recommend([bsp, asp, ssp1])


def test_format_advice_prints_the_fit_a_row_per_paradigm_and_the_recommendation():
    fit, predictions, choice = advice_inputs()
    assert choice.label == 'ASP'          # SSP s=1: 3.8 x 0.965 = 3.67, inside; ASP simpler
    lines = advise.format_advice('RUN', fit, predictions, choice).split('\n')
    assert lines[:9] == [
        'RUN: 2 workers, store metrics, 21/23 iterations per worker fitted',
        'compute per iteration (median outside slow episodes): 350.0, 1200.0 ms; jitter 60%; '
        'step overhead 250.0 ms per iteration',
        "no slow episodes (runs of 2+ iterations over 2x their worker's median)",
        '',
        HEADER,
        RULE,
        # charged: 2.6 x 0.95 = 2.47 -> 0.62 of ASP's 4.0
        '| BSP | 2.6 [2.2-2.8] | 5% | 0.62 | 60% | 0.00 / 0 | 0.00 / 0 |',
        '| ASP (recommended) | 4.0 [3.5-4.5] | 0% | 1.00 | 0% | 1.50 / 4 | 1.00 / 2 |',
        '| SSP s=1 | 3.8 [3.6-3.9] | 4% | 0.92 | 20% | 0.50 / 1 | 0.50 / 1 |']
    assert lines[10].startswith('Recommended: ASP. Inside the decision window (charged '
                                'throughput within 10% of the best, 4.0 iterations/s: ASP, '
                                'SSP s=1) the simplest paradigm wins')
    assert lines[11] == ('If staleness costs your model accuracy (this cannot be known from '
                         'timings): SSP s=1, the least stale inside the window (gradient '
                         'staleness 0.50 against 1.00).')
    assert 'How to apply it:' in lines and '- mxnet-ssp-train flags: --kvstore dist_async' in lines


def test_format_advice_marks_the_chosen_object_whatever_its_position():
    fit, predictions, _ = advice_inputs()
    text = advise.format_advice('RUN', fit, predictions, predictions[0])
    rows = [line for line in text.split('\n') if line.startswith('| ') and 'paradigm' not in line]
    assert [r.split(' | ')[0] for r in rows] == ['| BSP (recommended)', '| ASP', '| SSP s=1']
    assert 'Recommended: BSP. ' in text


@pytest.mark.parametrize('share,note', [
    (0.0, ''),
    (0.0099, ''),                 # under 1%: not worth a mention
    (0.01, ' (1.0% of its iterations took over twice their worker\'s median)'),
    (0.2, ' (20.0% of its iterations took over twice their worker\'s median)'),
])
def test_format_advice_mentions_the_slow_iterations_from_one_percent_on(share, note):
    fit, predictions, choice = advice_inputs(slow_share=share)
    text = advise.format_advice('RUN', fit, predictions, choice)
    assert text.split('\n')[-1].endswith('slow episodes the run did not show%s; how the '
                                         'overhead grows with more workers or servers.' % note)


# -- format_check ----------------------------------------------------------------------------

CHECK_HEADER = ['LAB: fitted on runs/asp only; when each worker finished, predicted', '',
                '| paradigm | trial | finish s per worker, measured | predicted | error per '
                'worker |',
                '|---|---|---|---|---|']


def test_format_check_prints_each_run_and_the_error_of_the_paradigms_other_than_asp():
    rows = [('asp', 't1', [10.0, 20.0], [11.0, 18.0]),        # +10%, -10%: fitted on, left out
            ('bsp', 't1', [40.0, 50.0], [30.0, 60.0]),        # -25%, +20%
            ('ssp3', 't2', [30.0, 25.0], [33.0, 25.0])]       # +10%, 0%
    text = advise.format_check('LAB', rows)
    # |errors| outside ASP: 0.25, 0.20, 0.10, 0.00 -> median 15%, max 25%, 4 finish times
    assert text.split('\n') == CHECK_HEADER + [
        '| asp | t1 | 10.0, 20.0 | 11.0, 18.0 | +10.0%, -10.0% |',
        '| bsp | t1 | 40.0, 50.0 | 30.0, 60.0 | -25.0%, +20.0% |',
        '| ssp3 | t2 | 30.0, 25.0 | 33.0, 25.0 | +10.0%, +0.0% |',
        '',
        'paradigms other than ASP: median |error| 15.0%, max 25.0% (4 worker finish times)']


def test_format_check_without_other_paradigms_has_no_summary():
    rows = [('asp', 't1', [10.0, 20.0], [12.5, 20.0]), ('asp', 't2', [8.0], [6.0])]
    assert advise.format_check('LAB', rows).split('\n') == CHECK_HEADER + [
        '| asp | t1 | 10.0, 20.0 | 12.5, 20.0 | +25.0%, +0.0% |',
        '| asp | t2 | 8.0 | 6.0 | -25.0% |']
    assert advise.format_check('LAB', []).split('\n') == CHECK_HEADER


def test_format_check_summary_counts_every_worker_of_every_other_run():
    rows = [('ssp3', 't1', [10.0], [13.0]), ('asp', 't1', [10.0], [20.0]),
            ('bsp', 't1', [10.0, 10.0, 10.0], [10.0, 5.0, 10.0])]
    # other than ASP: 0.3, 0, 0.5, 0 -> median 0.15, max 0.5 (ASP's +100% is not counted)
    assert advise.format_check('LAB', rows).split('\n')[-1] == (
        'paradigms other than ASP: median |error| 15.0%, max 50.0% (4 worker finish times)')


# -- main ------------------------------------------------------------------------------------

@pytest.fixture
def wide(monkeypatch):
    """argparse wraps its help at the terminal's width: make it one line per paragraph."""
    monkeypatch.setenv('COLUMNS', '1000')


def help_text(capsys):
    with pytest.raises(SystemExit) as stop:
        advise.main(['--help'])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_help_names_the_command_its_options_and_their_defaults(wide, capsys):
    out = help_text(capsys)
    lines = out.split('\n')
    assert lines[0] == ('usage: mxnet-ssp-advise [-h] [--version] [--cluster SPEC|FILE] '
                        '[--overhead-ms OVERHEAD_MS] [--wall-time WALL_TIME] [--seeds SEEDS] '
                        '[--updates-to-target N] [--staleness-cost C] [--by-throughput] '
                        '[--check-lab] [RUN_DIR]')
    flat = ' '.join(out.split())
    for option, words in [
            ('RUN_DIR', "a job's mxnet-ssp-train --save-dir (train-worker<rank>.jsonl), or the "
                        'MXNET_SSP_METRICS_DIR of a dist_ssp/dist_dssp job (worker-<rank>.jsonl)'),
            ('--cluster SPEC|FILE', 'instead of RUN_DIR: the cluster as data'),
            ('--overhead-ms OVERHEAD_MS', 'with --cluster: push and pull per iteration '
                                          '(default 3 ms)'),
            ('--wall-time WALL_TIME',
             'simulated seconds (default: 2,000 iterations of the slowest worker)'),
            ('--seeds SEEDS', 'compute draws per paradigm; the advice reports the spread over '
                              'all of them (default 10)'),
            ('--updates-to-target N', 'gradients (all workers) your model needs to the target '
                                      'accuracy under BSP'),
            ('--by-throughput', 'rank by throughput charged its measured error'),
            ('--check-lab', 'RUN_DIR is a lab scenario directory (<out>/<scenario> of '
                            'mxnet-ssp-reproduce --preset emulated): fit on its ASP runs and '
                            'report how far the predicted duration of every other run is')]:
        assert ' %s %s' % (option, words) in flat + ' ', option


@pytest.mark.parametrize('argv,words', [
    ([], 'give RUN_DIR'),
    (['run', '--cluster', 'mixed-4'], 'one of them'),
    (['--cluster', 'workers=1,base_ms=5'], '--cluster: scenario spec: workers'),
    (['--cluster', 'mixed-4', '--overhead-ms', '-1'], '--overhead-ms -1.0 is not valid'),
    (['run', '--overhead-ms', '2'], 'with --cluster'),
])
def test_main_refuses_a_bad_cluster_or_both_inputs(argv, words, capsys):
    with pytest.raises(SystemExit) as stop:
        advise.main(argv)
    assert stop.value.code == 2 and words in capsys.readouterr().err


def test_main_advises_on_a_cluster_given_as_data(capsys):
    assert advise.main(['--cluster', 'workers=3,base_ms=20,factors=1:1:4,jitter=5%',
                        '--seeds', '1', '--wall-time', '5']) == 0
    out = capsys.readouterr().out
    assert out.startswith('cluster custom: 3 workers (3 workers, base 20 ms, worker 2 x4, '
                          'jitter 5%), the cluster as given; step overhead 3.0 ms')
    assert '| ASP (recommended) |' in out and 'How to apply it:' in out


class Recorder:
    """Stand-ins for fit_run, predict and check_lab that record how main called them."""

    def __init__(self, monkeypatch, tmp_path):
        self.calls = []
        self.fit, self.predictions, _ = advice_inputs()
        self.rows = [('asp', 't1', [10.0], [11.0]), ('bsp', 't1', [10.0], [9.0])]
        monkeypatch.setattr(advise, 'fit_run', self.fit_run)
        monkeypatch.setattr(advise, 'predict', self.predict)
        monkeypatch.setattr(advise, 'check_lab', self.check_lab)

    def fit_run(self, *args):
        self.calls.append(('fit_run',) + args)
        return self.fit

    def predict(self, *args):
        self.calls.append(('predict',) + args)
        return self.predictions

    def check_lab(self, *args):
        self.calls.append(('check_lab',) + args)
        return self.rows


@pytest.fixture
def recorder(monkeypatch, tmp_path):
    return Recorder(monkeypatch, tmp_path)


def test_main_by_throughput_simulates_the_default_wall_time_with_ten_seeds(recorder, capsys):
    assert advise.main(['somewhere', '--by-throughput']) == 0
    assert recorder.calls == [('fit_run', 'somewhere'), ('predict', recorder.fit, None, 10)]
    out, err = capsys.readouterr()
    # inside the window (ASP, SSP s=1) the simpler: ASP
    expected = advise.format_advice('somewhere', recorder.fit, recorder.predictions,
                                    recorder.predictions[1])
    assert out == expected + '\n' and err == ''
    assert '| ASP (recommended) |' in out


@pytest.mark.parametrize('argv,wall_time,seeds', [
    (['--wall-time', '12.5', '--seeds', '2'], 12.5, 2),
    (['--seeds', '1'], None, 1),                    # the smallest accepted
    (['--wall-time', '1e-9'], 1e-9, 10),            # any positive time
    (['--wall-time', '7'], 7.0, 10),
])
def test_main_passes_the_wall_time_and_seeds_on(recorder, capsys, argv, wall_time, seeds):
    assert advise.main(['run', '--by-throughput'] + argv) == 0
    assert recorder.calls == [('fit_run', 'run'), ('predict', recorder.fit, wall_time, seeds)]
    assert isinstance(recorder.calls[1][2], (float, type(None)))
    assert isinstance(recorder.calls[1][3], int)
    assert capsys.readouterr().out.startswith('run: 2 workers, store metrics, 21/23 iterations')


def test_main_check_lab_prints_the_check_and_fits_nothing_else(recorder, capsys):
    assert advise.main(['lab', '--check-lab']) == 0
    assert recorder.calls == [('check_lab', 'lab', 10)]
    out, err = capsys.readouterr()
    assert out == advise.format_check('lab', recorder.rows) + '\n' and err == ''
    assert out.split('\n')[-2] == ('paradigms other than ASP: median |error| 10.0%, max 10.0% '
                                   '(1 worker finish times)')
    assert advise.main(['--check-lab', '--seeds', '2', 'lab2']) == 0
    assert recorder.calls[-1] == ('check_lab', 'lab2', 2)


@pytest.mark.parametrize('argv,message', [
    (['--seeds', '0'], '--seeds 0 is not valid: expected an integer >= 1'),
    (['--seeds', '-3'], '--seeds -3 is not valid: expected an integer >= 1'),
    (['--wall-time', '0'], '--wall-time 0.0 is not valid: expected seconds > 0'),
    (['--wall-time', '-2.5'], '--wall-time -2.5 is not valid: expected seconds > 0'),
    (['--wall-time', 'inf'], '--wall-time inf is not valid: expected seconds > 0'),
    (['--wall-time', 'nan'], '--wall-time nan is not valid: expected seconds > 0'),
])
def test_main_refuses_bad_settings_naming_the_setting_value_and_what_is_accepted(
        recorder, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        advise.main(['run'] + argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == '' and err.split('\n')[-2] == 'mxnet-ssp-advise: error: ' + message
    assert err.startswith('usage: mxnet-ssp-advise ')
    assert recorder.calls == []                      # refused before reading anything


def test_main_reports_an_unreadable_run_on_stderr_with_status_2(tmp_path, capsys):
    missing = str(tmp_path / 'nope')
    assert advise.main([missing]) == 2
    out, err = capsys.readouterr()
    assert out == '' and err == 'mxnet-ssp-advise: error: %s is not a directory\n' % missing
    assert advise.main([str(tmp_path), '--check-lab']) == 2
    out, err = capsys.readouterr()
    assert out == '' and err == ('mxnet-ssp-advise: error: %s has no runs/asp: run the lab\'s '
                                 'asp paradigm first\n' % tmp_path)


def test_main_reports_a_fit_error_raised_by_the_fit(recorder, monkeypatch, capsys):
    def refuse(run_dir):
        raise AdviseError('%s: not enough' % run_dir)
    monkeypatch.setattr(advise, 'fit_run', refuse)
    assert advise.main(['run']) == 2
    assert capsys.readouterr() == ('', 'mxnet-ssp-advise: error: run: not enough\n')
    assert recorder.calls == []


def test_main_advises_on_a_real_run(tmp_path, capsys):
    # worker 1 computes 2.5x longer than worker 0; 26 iterations each, 21 fitted
    write_train_logs(tmp_path, [0.02, 0.05], 0.002, n=26, jitter=0.01)
    assert advise.main([str(tmp_path), '--seeds', '1', '--wall-time', '2',
                        '--by-throughput']) == 0
    out, err = capsys.readouterr()
    lines = out.split('\n')
    assert err == '' and lines[0] == '%s: 2 workers, train log, 21/21 iterations per worker ' \
                                     'fitted' % tmp_path
    assert lines[1].startswith('compute per iteration (median outside slow episodes): 20.')
    assert ', 50.' in lines[1] or ', 49.' in lines[1]
    assert lines[1].endswith('step overhead 2.0 ms per iteration')
    rows = lines[6:6 + len(advise.ADVISED)]
    labels = [row.split(' | ')[0][2:] for row in rows]
    assert [label.replace(' (recommended)', '') for label in labels] == [
        label for label, _, _ in advise.ADVISED]
    chosen = [label for label in labels if label.endswith(' (recommended)')]
    assert len(chosen) == 1 and lines[len(rows) + 7].startswith(
        'Recommended: %s. ' % chosen[0][:-len(' (recommended)')])
    assert out.count('(recommended)') == 1
    # the same as the functions main strings together, with its settings
    fit = advise.fit_run(str(tmp_path))
    predictions = advise.predict(fit, 2.0, 1)
    assert out == advise.format_advice(str(tmp_path), fit, predictions,
                                       advise.recommend(predictions)) + '\n'


def test_main_checks_a_real_lab_with_the_seeds_given(tmp_path, capsys):
    runs = tmp_path / 'runs'
    write_train_logs(runs / 'asp' / 't1', [0.02, 0.05], 0.002, n=26, jitter=0.2)
    write_train_logs(runs / 'bsp' / 't1', [0.02, 0.05], 0.002, n=26, waits=[0.03, 0.0],
                     seed=2)
    assert advise.main([str(tmp_path), '--check-lab', '--seeds', '1']) == 0
    out = capsys.readouterr().out
    assert out == advise.format_check(str(tmp_path), advise.check_lab(str(tmp_path), 1)) + '\n'
    lines = out.split('\n')
    assert lines[0] == '%s: fitted on runs/asp only; when each worker finished, predicted' % (
        tmp_path)
    assert [line.split(' | ')[:2] for line in lines[4:6]] == [['| asp', 't1'], ['| bsp', 't1']]
    assert lines[-2].endswith('(2 worker finish times)')


# -- non-finite numbers (json reads Infinity/NaN in a log, and nothing refuses them) ---------

def test_format_advice_prints_an_infinite_compute_time_as_python_does():
    fit, predictions, choice = advice_inputs()
    fit.compute_s = [0.35, math.inf]
    line = advise.format_advice('RUN', fit, predictions, choice).split('\n')[1]
    assert line.startswith('compute per iteration (median outside slow episodes): 350.0, inf ms; ')


def test_format_check_prints_non_finite_times_and_errors_as_python_does():
    rows = [('bsp', 't1', [10.0, math.inf], [math.inf, 5.0])]
    # errors: inf / 10 - 1 = +inf; 5 / inf - 1 = -100%
    assert advise.format_check('LAB', rows).split('\n')[4] == (
        '| bsp | t1 | 10.0, inf | inf, 5.0 | +inf%, -100.0% |')
