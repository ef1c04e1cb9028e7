"""Edge cases of :mod:`mxnet_ssp.lab.cluster_model.simulate`: the command line, argument checks, messages.

Every expected table row below is worked out by hand from the event rules of the module
docstring (the derivation is in the comments); jittered compute times are redrawn here from
the documented contract (``times[i] * max(0.05, 1 + jitter * g)``, ``g`` the k-th
``gauss(0, 1)`` of ``random.Random('<seed>:<i>')``; for a scenario, the stream of
``random.Random('<name>:<seed>:<rank>')``), never by calling the simulator.
"""
import random
from collections import Counter

import pytest

from mxnet_ssp.lab.cluster_model.simulate import SimResult, format_table, main, make_policy, simulate
from mxnet_ssp.core.sync import SyncPolicy

PROG = 'python -m mxnet_ssp.lab.cluster_model.simulate'
FULL_HEADER = ('| policy | iters fastest / slowest | total it/s | max lead | mean lead at release '
               '| gradient staleness mean / p95 | fast workers waiting |')
FULL_RULE = '|---|---:|---:|---:|---:|---:|---:|'
#: The table without its gradient-staleness column, as the tests of the other columns read it
#: (the column has its own hand-worked case: test_main_two_workers_by_hand).
HEADER = ('| policy | iters fastest / slowest | total it/s | max lead | mean lead at release '
          '| fast workers waiting |')
RULE = '|---|---:|---:|---:|---:|---:|'
HIST_HEADER = '| policy | releases | lead p50 | lead p90 | lead p99 | max |'


def run_main(capsys, argv, staleness=False):
    """main's output; without the gradient-staleness column of its first table unless
    `staleness`."""
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ''
    if staleness:
        return captured.out
    lines = captured.out.split('\n')
    for n, line in enumerate(lines):
        cells = line.split('|')
        if len(cells) == 9:            # 7 columns: drop the 6th
            lines[n] = '|'.join(cells[:6] + cells[7:])
    return '\n'.join(lines)


def main_error(capsys, argv):
    """The last line argparse writes to stderr (``prog: error: message``); exit status 2."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ''
    return captured.err.rstrip('\n').splitlines()[-1]


def value_error(**kwargs):
    with pytest.raises(ValueError) as exc:
        simulate(**kwargs)
    return str(exc.value)


def jittered_wall(seed, base, n, jitter):
    """Time of the n-th push of a lone worker (never held) with jittered compute times."""
    rng = random.Random('%s:%d' % (seed, 0))
    now = 0.0
    for _ in range(n):
        now = now + base * max(0.05, 1.0 + jitter * rng.gauss(0.0, 1.0))
    return now


# -- the command line: a small case by hand ------------------------------------------------

def test_main_two_workers_by_hand(capsys):
    # times 1 and 2, 10 s, no jitter.  At an equal time the push scheduled first pops first,
    # so at t = 2k worker 1's push (scheduled at 2k-2) comes before worker 0's (at 2k-1).
    # asp: worker 0 pushes at 1..10, worker 1 at 2, 4, .., 10.  Lead of worker 0 at t:
    #   t - clock(worker 1) = 1,1,2,2,3,3,4,4,5,5; worker 1 always 0 (5 pushes).
    #   15 releases, sum 30 -> mean 2.00, max 5; 15 it / 10 s; nobody waits.
    #   quantiles: cumulative 0:5 1:7 2:9 3:11 4:13 5:15 -> p50 2 (>= 7.5), p90 5 (>= 13.5).
    # ssp:0: worker 0 pushes at 2k-1 and is held until worker 1's push at 2k releases both
    #   at lead 0; 5 rounds in 10 s (the resume at 10 still counts), worker 0 idle 1 s a
    #   round: 5 / 10 = 50 %.  10 releases at lead 0.
    # ssp:1: worker 0 pushes at 1 (lead 1, released), at 2 after worker 1 (lead 1), at 3
    #   (lead 2: held until worker 1's push at 4), then at 5, 7, 9, each held 1 s.
    #   Iterations 6 and 5 -> 1.100 it/s; releases: worker 0 at lead 1 six times, worker 1
    #   at lead 0 five times -> mean 6/11 = 0.545; worker 0 waited 4 s of 10.
    # gradient staleness (updates applied between a worker's pull and its push):
    # asp: worker 0 at odd t 0 (5x), at even t 1 (after worker 1's push; 5x); worker 1 at
    #   t=2 1, then 2 (4x): 15 gradients, sum 14 -> mean 0.93; cumulative 0:5 1:11 2:15 ->
    #   p95 2.  ssp:0 sums a round's gradients: 0.  ssp:1: worker 0 1 at t=2, else 0 (6
    #   gradients); worker 1 1 at each of its 5 pushes: sum 6 of 11 -> 0.55, p95 1.
    out = run_main(capsys, ['--times', '1,2', '--wall-time', '10', '--hist',
                            'asp', 'ssp:0', 'ssp:1'], staleness=True)
    assert out == '\n'.join([
        '2 workers, compute times 1, 2 s, jitter 0, latency 0 s, 10 s, seed 0',
        '',
        FULL_HEADER,
        FULL_RULE,
        '| asp | 10 / 5 | 1.500 | 5 | 2.00 | 0.93 / 2 | 0.0 % |',
        '| ssp:0 | 5 / 5 | 1.000 | 0 | 0.00 | 0.00 / 0 | 50.0 % |',
        '| ssp:1 | 6 / 5 | 1.100 | 1 | 0.55 | 0.55 / 1 | 40.0 % |',
        '',
        HIST_HEADER,
        RULE,
        '| asp | 15 | 2 | 5 | 5 | 5 |',
        '| ssp:0 | 10 | 0 | 0 | 0 | 0 |',
        '| ssp:1 | 11 | 1 | 1 | 1 | 1 |',
        '',
    ])


def test_main_without_hist_prints_one_table(capsys):
    out = run_main(capsys, ['--times', '1,2', '--wall-time', '10', 'ssp:0'])
    assert out == '\n'.join([
        '2 workers, compute times 1, 2 s, jitter 0, latency 0 s, 10 s, seed 0',
        '',
        HEADER,
        RULE,
        '| ssp:0 | 5 / 5 | 1.000 | 0 | 0.00 | 50.0 % |',
        '',
    ])


def test_main_hist_quantiles_are_distinct(capsys):
    # worker 1 never pushes within 200 s: worker 0's lead at its k-th push is k, 1..200
    # once each.  p50: cumulative >= 100 -> 100; p90: >= 180 -> 180; p99: >= 198 -> 198.
    # mean lead 20100 / 200 = 100.5.
    out = run_main(capsys, ['--times', '1,1000', '--wall-time', '200', '--hist', 'asp'])
    lines = out.splitlines()
    assert lines[0] == '2 workers, compute times 1, 1000 s, jitter 0, latency 0 s, 200 s, seed 0'
    assert lines[4] == '| asp | 200 / 0 | 1.000 | 200 | 100.50 | 0.0 % |'
    assert lines[6:] == [HIST_HEADER, RULE, '| asp | 200 | 100 | 180 | 198 | 200 |']


def test_main_no_push_before_the_limit(capsys):
    # a 1 s iteration never ends within 0.5 s: no push, no release, all zero
    out = run_main(capsys, ['--times', '1', '--wall-time', '0.5', '--hist', 'asp'])
    assert out.splitlines()[4:] == [
        '| asp | 0 / 0 | 0.000 | 0 | 0.00 | 0.0 % |', '', HIST_HEADER, RULE,
        '| asp | 0 | 0 | 0 | 0 | 0 |']


def test_main_defaults(capsys):
    # no limit: 300 s; one worker of 1 s: 300 pushes, all at lead 0
    out = run_main(capsys, ['--times', '1', 'asp'])
    assert out == '\n'.join([
        '1 workers, compute times 1 s, jitter 0, latency 0 s, 300 s, seed 0', '',
        HEADER, RULE, '| asp | 300 / 300 | 1.000 | 0 | 0.00 | 0.0 % |', ''])


def test_main_default_times(capsys):
    # times 1, 1, 1, 2.5 over 10 s under ASP: the fast workers push at k = 1..10, the slow
    # one at 2.5, 5, 7.5, 10 (first at equal times).  A fast worker's lead is k minus the
    # slow worker's clock: 1,2,2,3,3,4,5,5,6,6 (sum 37, three workers: 111); the slow
    # worker's 4 leads are 0.  34 releases: mean 111 / 34 = 3.26, max 6.
    out = run_main(capsys, ['--wall-time', '10', 'asp'])
    assert out == '\n'.join([
        '4 workers, compute times 1, 1, 1, 2.5 s, jitter 0, latency 0 s, 10 s, seed 0', '',
        HEADER, RULE, '| asp | 10 / 4 | 3.400 | 6 | 3.26 | 0.0 % |', ''])


def test_main_latency(capsys):
    # ssp:0, latency 0.5: a round is 2 s of the slow worker + 0.5 s for the OK: rounds
    # start at 0, 2.5, 5, 7.5; the one starting at 10 has no push by 10.  4 rounds,
    # worker 0 idle 1 + 0.5 s each: 6 / 10 = 60 %.
    out = run_main(capsys, ['--times', '1,2', '--wall-time', '10', '--latency', '0.5', 'ssp:0'])
    assert out == '\n'.join([
        '2 workers, compute times 1, 2 s, jitter 0, latency 0.5 s, 10 s, seed 0', '',
        HEADER, RULE, '| ssp:0 | 4 / 4 | 0.800 | 0 | 0.00 | 60.0 % |', ''])


def test_main_iterations_jitter_and_seed(capsys):
    wall = jittered_wall(4, 1.0, 3, 0.3)
    out = run_main(capsys, ['--times', '1', '--iterations', '3', '--jitter', '0.3',
                            '--seed', '4', 'asp'])
    assert out == '\n'.join([
        '1 workers, compute times 1 s, jitter 0.3, latency 0 s, 3 iterations per worker, '
        'seed 4', '',
        HEADER, RULE, '| asp | 3 / 3 | %.3f | 0 | 0.00 | 0.0 %% |' % (3 / wall), ''])
    assert '%.3f' % (3 / wall) == '1.089'


def test_main_default_seed_is_0(capsys):
    wall = jittered_wall(0, 1.0, 3, 0.3)
    out = run_main(capsys, ['--times', '1', '--iterations', '3', '--jitter', '0.3', 'asp'])
    assert out.splitlines()[0].endswith(', seed 0')
    assert out.splitlines()[4] == '| asp | 3 / 3 | %.3f | 0 | 0.00 | 0.0 %% |' % (3 / wall)
    assert '%.3f' % (3 / wall) == '1.278'


def test_main_exponent_times(capsys):
    # %g writes 1e-05 (lower case); a single iteration of 1e-05 s: 100000 it/s
    out = run_main(capsys, ['--times', '0.00001', '--iterations', '1', 'asp'])
    assert out.splitlines()[0] == ('1 workers, compute times 1e-05 s, jitter 0, latency 0 s, '
                                   '1 iterations per worker, seed 0')
    assert out.splitlines()[4] == '| asp | 1 / 1 | 100000.000 | 0 | 0.00 | 0.0 % |'


def test_main_stall_factor_is_passed(capsys):
    # times 1 and 3, dssp:0:5.  Worker 0 pushes 1 s after worker 1's push every round; with
    # stall_factor 1e-6 worker 1 (interval 3 s) counts as stalled at each of worker 0's
    # pushes, so no grant: lockstep like ssp:0.  Rounds of 3 s: 10 pushes each in 30 s,
    # worker 0 idle 2 s a round: 20 / 30 = 66.7 %; every release at lead 0.
    out = run_main(capsys, ['--times', '1,3', '--wall-time', '30', '--stall-factor', '1e-6',
                            'dssp:0:5'])
    assert out.splitlines()[4:] == ['| dssp:0:5:bounded | 10 / 10 | 0.667 | 0 | 0.00 | 66.7 % |']


def test_simulate_passes_stall_factor_to_a_spec():
    r = simulate([1.0, 3.0], 'dssp:0:5', wall_time=30.0, stall_factor=1e-6)
    assert r.iterations == [10, 10]
    assert r.lead_hist == Counter({0: 20}) and r.max_lead == 0
    assert r.wait == [pytest.approx(20.0), pytest.approx(0.0)]


def test_main_default_stall_factor_is_2(capsys):
    argv = ['--times', '1,2,5', '--wall-time', '60', '--latency', '0.5', 'dssp:0:5']
    default = run_main(capsys, argv)
    two = run_main(capsys, argv + ['--stall-factor', '2'])
    three = run_main(capsys, argv + ['--stall-factor', '3'])
    assert default == two
    assert three != two          # the case tells 2 from 3


def test_main_scenario(capsys):
    # mixed-2: worker 0 computes ~15 ms, worker 1 ~37.5 ms (1 % jitter).  ASP, 3 iterations:
    # worker 0 pushes at ~15 and ~30 ms (leads 1, 2), worker 1 at ~37.5 ms (lead 0; the
    # slowest clock becomes 1), worker 0 at ~45 ms (clock 3, lead 2) and leaves; worker 1's
    # next pushes (the last one sets the time) are at lead 0.  6 releases: 5/6 = 0.83, max 2.
    # Throughput counts each worker over its own span (its 3 iterations up to its last push):
    # 3 / (worker 0's last push) + 3 / (worker 1's last push, which sets the time).
    def last_push(rank, base):
        rng = random.Random('mixed-2:0:%d' % rank)
        t = 0.0
        for _ in range(3):
            t = t + base * max(0.05, 1.0 + 0.01 * rng.gauss(0.0, 1.0))
        return t
    rate = 3 / last_push(0, 0.015) + 3 / last_push(1, 0.015 * 2.5)
    out = run_main(capsys, ['--scenario', 'mixed-2', '--iterations', '3', 'asp'])
    assert out == '\n'.join([
        'scenario mixed-2: 2 workers, base 15 ms, worker 1 x2.5, jitter 1%; latency 0 s, '
        '3 iterations per worker, seed 0', '',
        HEADER, RULE, '| asp | 3 / 3 | %.3f | 2 | 0.83 | 0.0 %% |' % rate, ''])
    assert '%.3f' % rate == '93.496'      # about 3 / 0.045 + 3 / 0.1125


def test_simulate_scenario_by_name():
    r = simulate(None, 'asp', iterations=3, scenario='mixed-2')
    assert r.times == [0.015, 0.0375]
    assert r.iterations == [3, 3]
    assert r.lead_hist == Counter({0: 3, 1: 1, 2: 2}) and r.max_lead == 2
    # the scenario's own base times may be given as well
    assert simulate([0.015, 0.0375], 'asp', iterations=3, scenario='mixed-2') == r


# -- the command line: --help and errors ---------------------------------------------------

def test_main_help(capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '250')       # no wrapping inside a help text
    with pytest.raises(SystemExit) as exc:
        main(['--help'])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: python -m mxnet_ssp.lab.cluster_model.simulate [-h] [--times TIMES] '
                          '[--scenario SCENARIO] ')
    flat = ' '.join(out.split())
    for text in [
            '\nDiscrete-event simulation of ASP / SSP / DSSP workers (no MXNet).\n',
            'per-iteration compute time of each worker, comma-separated (default: 1,1,1,2.5)',
            "an emulated cluster instead of --times (the compute times train_cifar.py's "
            "--emulate sleeps to): mixed-2, mixed-4, straggler-8, transient-8, jitter-8, "
            "transient-4, link-4, a spec such as "
            "workers=4,base_ms=15,factors=1:1.3:1.8:3,jitter=10%, or a .json/.toml file of the "
            "same keys (docs/lab.md)",
            '--wall-time WALL_TIME simulated seconds (default: 300 unless --iterations)',
            '--iterations ITERATIONS run every worker for this many iterations instead',
            '--latency LATENCY push->release control latency in seconds (default: 0)',
            '--jitter JITTER relative std-dev of compute times (default: 0)',
            '--seed SEED jitter seed (default: 0)',
            '--stall-factor STALL_FACTOR SyncPolicy stall_factor (default: 2.0)',
            '--hist also print quantiles of the lead at release',
            "policies 'asp', 'ssp:S', 'dssp:SL:SU[:bounded|paper|threshold]' (default: asp "
            'ssp:3 ssp:15 dssp:3:15:bounded dssp:3:15:paper dssp:3:15:threshold)']:
        assert text in (out if text.startswith('\n') else flat), text


@pytest.mark.parametrize('argv, message', [
    (['--times', '1,x'], "argument --times: expected comma-separated seconds, got '1,x'"),
    (['--times', ','], 'times must be a non-empty list of positive numbers, got []'),
    (['--times', '1,0'], 'times must be a non-empty list of positive numbers, got [1.0, 0.0]'),
    (['--wall-time', '0'], 'wall_time must be > 0, got 0.0'),
    (['--iterations', '0'], 'iterations must be a positive integer, got 0'),
    (['--latency', '-1'], 'latency and jitter must be >= 0'),
    (['--jitter', '-0.5'], 'latency and jitter must be >= 0'),
    (['--times', '1,2', '--scenario', 'mixed-2'],
     '--times and --scenario are exclusive: give one of them'),
    (['--scenario', 'mixed-2', '--jitter', '0.1'],
     'scenario mixed-2 has its own jitter (0.01); jitter must be 0'),
    (['--wall-time', '5', 'bsp'],
     "bad policy 'bsp': expected 'asp', 'ssp:S' or 'dssp:SL:SU[:bounded|paper|threshold]'"),
    (['--wall-time', '5', 'dssp:5:3'],
     "bad policy 'dssp:5:3': need 0 <= s_lower <= s_upper, got 5, 3"),
])
def test_main_errors(capsys, argv, message):
    assert main_error(capsys, argv) == '%s: error: %s' % (PROG, message)


def test_main_scenario_choices(capsys):
    line = main_error(capsys, ['--scenario', 'bogus'])
    assert line.startswith("%s: error: argument --scenario: emulated scenario 'bogus' is not "
                           "known: expected one of mixed-2, mixed-4, straggler-8" % PROG)
    line = main_error(capsys, ['--scenario', 'workers=2,base_ms=-3'])
    assert line.startswith("%s: error: argument --scenario: scenario spec: base_ms = '-3'"
                           % PROG)


def test_main_scenario_of_the_users_own_cluster(capsys):
    """A spec runs as the built-in scenario with the same settings would, under its own
    name (which seeds the draws): the same table as mixed-2 when named mixed-2's way."""
    spec = 'name=duo,workers=2,base_ms=15,factors=1:2.5,jitter=1%'
    out = run_main(capsys, ['--scenario', spec, '--iterations', '20', 'asp', 'ssp:1'])
    assert out.startswith('scenario duo: 2 workers, base 15 ms, worker 1 x2.5, jitter 1%; '
                          'latency 0 s, 20 iterations per worker, seed 0')
    assert '| asp | 20 / 20 |' in out and '| ssp:1 | 20 / 20 |' in out
    r = simulate(None, 'asp', iterations=20, scenario=spec)
    assert r.times == [0.015, 0.0375] and r.iterations == [20, 20]


# -- simulate(): argument checks, each message in full -------------------------------------

@pytest.mark.parametrize('kwargs, message', [
    (dict(times=[], wall_time=1.0), 'times must be a non-empty list of positive numbers, got []'),
    (dict(times=[1, -2], wall_time=1.0),
     'times must be a non-empty list of positive numbers, got [1.0, -2.0]'),
    (dict(times=[1.0]), 'give exactly one of wall_time and iterations'),
    (dict(times=[1.0], wall_time=1.0, iterations=1),
     'give exactly one of wall_time and iterations'),
    (dict(times=[1.0], wall_time=0.0), 'wall_time must be > 0, got 0.0'),
    (dict(times=[1.0], wall_time=-3), 'wall_time must be > 0, got -3'),
    (dict(times=[1.0], iterations=0), 'iterations must be a positive integer, got 0'),
    (dict(times=[1.0], iterations=2.5), 'iterations must be a positive integer, got 2.5'),
    (dict(times=[1.0], wall_time=1.0, latency=-0.1), 'latency and jitter must be >= 0'),
    (dict(times=[1.0], wall_time=1.0, jitter=-0.1), 'latency and jitter must be >= 0'),
    (dict(times=[1.0, 2.0], wall_time=1.0, scenario='mixed-2'),
     'give times or a scenario, not both (scenario mixed-2 has times [0.015, 0.0375])'),
    (dict(times=None, wall_time=1.0, scenario='mixed-2', jitter=0.2),
     'scenario mixed-2 has its own jitter (0.01); jitter must be 0'),
    (dict(times=[1.0] * 4, wall_time=1.0, policy=SyncPolicy(3, 0, 0)),
     'policy is for 3 workers, times has 4'),
    (dict(times=[1.0], wall_time=1.0, policy='ssp'),
     "bad policy 'ssp': expected 'asp', 'ssp:S' or 'dssp:SL:SU[:bounded|paper|threshold]'"),
])
def test_simulate_error_messages(kwargs, message):
    kwargs.setdefault('policy', 'asp')
    assert value_error(**kwargs) == message


def test_policy_must_be_fresh():
    pushed = SyncPolicy(2, 1, 1)
    pushed.on_push(0, 1.0)
    left = SyncPolicy(2, 1, 1)
    left.on_leave(1)                 # no clock moved, nobody waits, but one worker left
    for policy in (pushed, left):
        assert (value_error(times=[1.0, 1.0], policy=policy, wall_time=5.0)
                == 'policy must be fresh (no push or leave yet)')


def test_smallest_valid_arguments():
    # one worker, one iteration, a wall time below 1 s
    r = simulate([2.0], 'asp', iterations=1)
    assert (r.iterations, r.wall_time, r.max_lead) == ([1], 2.0, 0)
    r = simulate([1.0, 2.0], 'ssp:0', iterations=1)
    assert (r.iterations, r.wall_time) == ([1, 1], 2.0)
    r = simulate([0.25], 'asp', wall_time=0.5)
    assert (r.iterations, r.wall_time, r.lead_hist) == ([2], 0.5, Counter({0: 2}))


def test_single_worker_asp_lead_is_zero():
    r = simulate([1.0], None, wall_time=5.0)
    assert r.iterations == [5] and r.max_lead == 0 and r.lead_hist == Counter({0: 5})
    r = simulate([1.0, 1.0], 'asp', wall_time=0.5)
    assert r.iterations == [0, 0] and r.max_lead == 0 and r.lead_hist == Counter()


def test_simulate_default_seed_is_0():
    r = simulate([1.0], 'asp', iterations=3, jitter=0.3)
    assert r.wall_time == pytest.approx(jittered_wall(0, 1.0, 3, 0.3))
    r = simulate([1.0], 'asp', iterations=3, jitter=0.3, seed=4)
    assert r.wall_time == pytest.approx(jittered_wall(4, 1.0, 3, 0.3))
    assert jittered_wall(0, 1.0, 3, 0.3) != pytest.approx(jittered_wall(1, 1.0, 3, 0.3))


# -- make_policy ---------------------------------------------------------------------------

def test_make_policy_stall_factor():
    assert make_policy('dssp:3:15', 2).stall_factor == 2.0
    assert make_policy('ssp:4', 2).stall_factor == 2.0
    assert make_policy('ssp:4', 2, stall_factor=5.0).stall_factor == 5.0
    assert make_policy('dssp:1:2:threshold', 2, stall_factor=0.5).stall_factor == 0.5


@pytest.mark.parametrize('spec, message', [
    ('bsp', "bad policy 'bsp': expected 'asp', 'ssp:S' or 'dssp:SL:SU[:bounded|paper|threshold]'"),
    ('dssp:1:2:3:4',
     "bad policy 'dssp:1:2:3:4': expected 'asp', 'ssp:S' or "
     "'dssp:SL:SU[:bounded|paper|threshold]'"),
    ('ssp:x', "bad policy 'ssp:x': invalid literal for int() with base 10: 'x'"),
    ('dssp:5:3', "bad policy 'dssp:5:3': need 0 <= s_lower <= s_upper, got 5, 3"),
    ('dssp:1:2:fast',
     "bad policy 'dssp:1:2:fast': mode must be one of bounded, paper, threshold, got 'fast'"),
])
def test_make_policy_messages(spec, message):
    with pytest.raises(ValueError) as exc:
        make_policy(spec, 2)
    assert str(exc.value) == message


# -- SimResult helpers and format_table ----------------------------------------------------

def result(wait, wall_time, hist=()):
    r = SimResult(label='x', times=[1.0] * len(wait), iterations=[1] * len(wait), wait=wait,
                  wall_time=wall_time, max_lead=max(hist, default=0))
    r.lead_hist.update(dict(hist))
    return r


def test_wait_fraction():
    assert result([0.25], 0.5).wait_fraction(0) == 0.5
    assert result([0.25], 1.0).wait_fraction(0) == 0.25
    assert result([0.5, 3.0], 4.0).wait_fraction(1) == 0.75
    assert result([0.0], 0.0).wait_fraction(0) == 0.0       # no time: no fraction


def test_lead_quantile():
    assert result([0.0], 1.0).lead_quantile(0.5) == 0      # no release
    assert result([0.0], 1.0).lead_quantile(0.0) == 0
    r = result([0.0], 1.0, {1: 1, 3: 2, 7: 1})             # cumulative 1:1 3:3 7:4
    assert [r.lead_quantile(q) for q in (0.0, 0.25, 0.26, 0.75, 0.76, 1.0)] == [1, 1, 3, 3, 7, 7]
    assert r.lead_quantile(2.0) == 7                       # beyond every release: the max


def test_format_table_columns():
    # iterations 7 and 3 in 4 s: 2.500 it/s; leads 0 twice and 3 once: mean 1.00; the
    # fastest worker (time 0.5) waited 1 s of 4 = 25.0 %; the other one is not counted.
    r = SimResult(label='ssp:9', times=[0.5, 2.0], iterations=[7, 3], wait=[1.0, 2.0],
                  wall_time=4.0, max_lead=3)
    r.lead_hist.update({0: 2, 3: 1})
    # gradients: staleness 0 twice, 2 once: mean 0.67, p95 2
    r.stale_hist.update({0: 2, 2: 1})
    assert format_table([r, r]) == '\n'.join([FULL_HEADER, FULL_RULE] + [
        '| ssp:9 | 7 / 3 | 2.500 | 3 | 1.00 | 0.67 / 2 | 25.0 % |'] * 2)
    assert format_table([]) == FULL_HEADER + '\n' + FULL_RULE


def test_format_table_p95_staleness_is_not_the_max():
    # 96 gradients at staleness 0, 4 at 5: p95 is 0 (96% had at most 0), the max 5
    r = SimResult(label='asp', times=[1.0, 1.0], iterations=[50, 50], wait=[0.0, 0.0],
                  wall_time=10.0, max_lead=1)
    r.lead_hist.update({1: 100})
    r.stale_hist.update({0: 96, 5: 4})
    assert format_table([r]).split('\n')[2] == '| asp | 50 / 50 | 10.000 | 1 | 1.00 | 0.20 / 0 | 0.0 % |'
