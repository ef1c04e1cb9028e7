"""The lab on links without processes: a scenario with links makes a grid on the emulated
cluster (placement, the wrapped command, the testbed prefix, the machine's checks), the
suite's default leaves it out, and --arm-lr fixes per-paradigm rates."""
import pytest

from mxnet_ssp.lab.cluster_model.arms import parse_arm
from mxnet_ssp.lab.cluster_model.profiles import SCENARIOS
from mxnet_ssp.lab.reproduce import links as on_links
from mxnet_ssp.lab.reproduce.grid import UsageError, resolve_grid, run_command
from mxnet_ssp.lab.reproduce.presets import (PRESETS, SUITE_SCENARIOS,
                                                     lab_run_seconds)


from grid_args import Args  # noqa: E402  (tests/support)


def test_a_scenario_with_links_runs_each_process_on_its_host():
    grid = resolve_grid(Args(preset='emulated-link-4'))
    assert grid.links == (10 ** 9,) * 3 + (10 ** 8,)
    assert grid.testbed_prefix == on_links.DEFAULT_PREFIX == 'mxlab-'
    cmd = run_command(grid, parse_arm('asp'), 1, '/tmp/x')
    # the local launcher as for every lab run, on_host in front of the training command
    at = cmd.index('mxnet_ssp.lab.testbed.on_host')
    assert cmd[at - 1] == '-m' and cmd[cmd.index('--launcher') + 1] == 'local'
    assert cmd[at + 1:at + 5] == ['--prefix', 'mxlab-', '--', cmd[0]]
    assert cmd[at + 5:at + 7] == ['-m', 'mxnet_ssp.lab.train_cifar']
    assert cmd[cmd.index('--emulate') + 1] == 'link-4'
    assert on_links.placement(grid)[-1]['rate'] == '100mbit'
    # a prefix of one's own
    grid = resolve_grid(Args(preset='emulated-link-4', testbed_prefix='t1-'))
    assert 't1-' in run_command(grid, parse_arm('asp'), 1, '/tmp/x')


def test_a_scenario_without_links_runs_on_loopback_and_refuses_a_testbed_prefix():
    grid = resolve_grid(Args(preset='emulated-mixed-4'))
    assert grid.links == () and grid.testbed_prefix is None
    assert 'mxnet_ssp.lab.testbed.on_host' not in run_command(grid, parse_arm('asp'), 1, '/tmp/x')
    with pytest.raises(UsageError) as err:
        resolve_grid(Args(preset='emulated-mixed-4', testbed_prefix='t1-'))
    assert str(err.value).startswith("--testbed-prefix 't1-' is not valid: expected nothing "
                                     "with preset emulated-mixed-4: its jobs run on loopback")


def test_a_bad_testbed_prefix_is_named():
    with pytest.raises(UsageError) as err:
        resolve_grid(Args(preset='emulated-link-4', testbed_prefix='Lab_1'))
    assert str(err.value).startswith("--testbed-prefix 'Lab_1' is not a name prefix; accepted: "
                                     "1 to 10 characters")


def test_the_machine_must_be_able_to_build_the_cluster():
    grid = resolve_grid(Args(preset='emulated-link-4'))
    [problem] = on_links.check_machine(grid, euid=1000)
    assert problem.startswith('scenario link-4 runs on the emulated cluster (its workers have '
                              'links), which this machine cannot build: user: effective uid '
                              '1000; accepted: root')
    [problem] = on_links.check_machine(grid, euid=0,
                                       which=lambda name: None if name == 'tc' else '/bin/x')
    assert 'program tc: not found on PATH' in problem
    # no sshd, ssh or mount needed: the processes move with ip netns exec
    assert on_links.check_machine(grid, euid=0, which=lambda name: (
        '/bin/x' if name in ('ip', 'tc') else None)) == []
    assert on_links.check_machine(resolve_grid(Args(preset='emulated-mixed-4')), euid=1000) == []


def test_the_suite_leaves_the_link_scenarios_to_scenario():
    assert 'link-4' in SCENARIOS and 'link-4' not in SUITE_SCENARIOS
    assert set(SUITE_SCENARIOS) == {n for n, sc in SCENARIOS.items() if not sc.links}
    assert 'emulated-link-4' in PRESETS


def test_link_4_s_run_estimate_counts_worker_3_s_link():
    # 10 s + 800 x (20 ms + 157.4 ms + 10 ms)
    assert lab_run_seconds(SCENARIOS['link-4'], 800) == pytest.approx(10 + 800 * 0.1874, abs=0.5)


def test_arm_lr_fixes_each_named_paradigm_and_star_the_others():
    grid = resolve_grid(Args(preset='emulated-link-4', arm_lr='bsp=0.04, *=0.01'))
    assert grid.arm_lr == {name: (0.04 if name == 'bsp' else 0.01) for name in
                           PRESETS['emulated-link-4'].arms}
    cmd = run_command(grid, parse_arm('bsp'), 1, '/tmp/x')
    assert cmd[cmd.index('--lr') + 1] == '0.04'
    grid = resolve_grid(Args(preset='emulated-mixed-4', arm_lr='asp=0.02',
                             paradigms='bsp,asp'))
    assert grid.arm_lr == {'asp': 0.02}
    assert grid.lr_of(parse_arm('bsp')) == grid.lr        # not named: the preset's


@pytest.mark.parametrize('text', ['bsp', 'bsp=0', 'bsp=x', 'ssp99=0.1', 'bsp=0.1,bsp=0.2', ',',
                                  'bsp=10'])
def test_a_bad_arm_lr_names_the_flag_the_value_and_the_form(text):
    with pytest.raises(UsageError) as err:
        resolve_grid(Args(preset='emulated-mixed-4', arm_lr=text, paradigms='bsp,asp'))
    assert str(err.value) == (
        "--arm-lr %r is not valid: expected comma-separated ARM=LR items with ARM one of the "
        "grid's paradigms (bsp, asp) or * for every other one, each once, and LR in (0, 10), "
        "e.g. bsp=0.04,*=0.01" % text)


def test_arm_lr_and_tune_lr_are_exclusive():
    with pytest.raises(UsageError) as err:
        resolve_grid(Args(preset='emulated-mixed-4', arm_lr='bsp=0.04', tune_lr='0.01,0.02'))
    assert 'nothing with --tune-lr' in str(err.value)


def test_the_dry_run_names_the_placement(tmp_path, capsys):
    from mxnet_ssp.lab.reproduce.cli import main
    assert main(['--preset', 'emulated', '--scenario', 'link-4', '--out', str(tmp_path / 'l'),
                 '--paradigms', 'bsp,asp', '--trials', '1', '--dry-run']) == 0
    out = capsys.readouterr().out
    assert ('# on the emulated cluster (prefix mxlab-, up before the first run, down after the '
            'last): scheduler, server 0 on host0 (198.18.0.1, 10gbit); worker 0 on host4') in out
    assert out.count('mxnet_ssp.lab.testbed.on_host --prefix mxlab- --') == 2


class _FakeCluster:
    """What links.testbed calls of mxnet_ssp.lab.testbed.cluster, recorded (no namespaces)."""

    def __init__(self, monkeypatch, up_fails=False):
        from mxnet_ssp.lab.testbed import cluster
        self.calls = []
        self.up_fails = up_fails
        monkeypatch.setattr(cluster, 'up', self.up)
        monkeypatch.setattr(cluster, 'down', self.down)
        monkeypatch.setattr(cluster, 'load_state', self.load_state)

    def up(self, plan, sshd, measure_links=True, ssh=True):
        self.calls.append(('up', plan.prefix, [h.rate for h in plan.hosts], measure_links, ssh))
        if self.up_fails:
            raise RuntimeError('ip link add failed')
        return 0

    def down(self, prefix, quiet=False):
        self.calls.append(('down', prefix))
        return ['namespace %sh0' % prefix]

    def load_state(self, prefix):
        return {'hosts': [{'name': 'host0', 'rate': 10 ** 10, 'measured': None}]}


def test_the_testbed_is_up_for_the_block_and_down_after_it_however_it_ends(tmp_path,
                                                                           monkeypatch):
    fake = _FakeCluster(monkeypatch)
    grid = resolve_grid(Args(preset='emulated-link-4', testbed_prefix='t9-'))
    with on_links.testbed(grid, str(tmp_path)) as record:
        assert fake.calls == [('up', 't9-', [10 ** 10, 10 ** 8, 10 ** 9, 10 ** 9, 10 ** 9],
                               True, False)]
        assert record['placement'][-1]['process'] == 'worker 3'
    assert fake.calls[-1] == ('down', 't9-')
    assert (tmp_path / 'testbed.json').exists()
    fake.calls.clear()
    with pytest.raises(KeyboardInterrupt):
        with on_links.testbed(grid, str(tmp_path)):
            raise KeyboardInterrupt          # Ctrl-C (or the runner's Stop) during a run
    assert fake.calls[-1] == ('down', 't9-')


def test_a_testbed_that_does_not_come_up_is_one_error_and_nothing_is_left(tmp_path,
                                                                        monkeypatch):
    fake = _FakeCluster(monkeypatch, up_fails=True)
    grid = resolve_grid(Args(preset='emulated-link-4', testbed_prefix='t9-'))
    with pytest.raises(on_links.ClusterError) as err:
        with on_links.testbed(grid, str(tmp_path)):
            pytest.fail('the block ran without a cluster')
    assert str(err.value) == 'the emulated cluster did not come up: ip link add failed'
    assert fake.calls[-1] == ('down', 't9-')


def test_a_grid_without_links_brings_nothing_up(tmp_path, monkeypatch):
    fake = _FakeCluster(monkeypatch)
    with on_links.testbed(resolve_grid(Args(preset='emulated-mixed-4')), str(tmp_path)) as rec:
        assert rec is None
    assert fake.calls == [] and not (tmp_path / 'testbed.json').exists()


def test_the_lab_report_names_the_placement_of_a_scenario_with_links():
    from mxnet_ssp.lab.reproduce import lab_report
    [line] = lab_report._links(resolve_grid(Args(preset='emulated-link-4', testbed_prefix='t9-')))
    assert line.startswith('- **On links:** every run ran on the emulated cluster (prefix t9-): '
                           'scheduler, server 0 on host0 (198.18.0.1, 10gbit); worker 0 on '
                           'host4')
    assert 'worker 3 on host1 (198.18.0.2, 100mbit)' in line and 'netem' in line
    assert lab_report._links(resolve_grid(Args(preset='emulated-mixed-4'))) == []


def test_the_report_says_the_rates_were_fixed_by_arm_lr_not_tuned():
    from mxnet_ssp.lab.reproduce.report import _header
    grid = resolve_grid(Args(preset='emulated-mixed-4', arm_lr='bsp=0.04,*=0.01',
                             paradigms='bsp,asp'))
    text = '\n'.join(_header(grid, [], None))
    assert 'lr per paradigm, fixed by --arm-lr (bsp 0.04, asp 0.01)' in text
    assert '--tune-lr' not in text


def test_the_lab_s_simulator_check_adds_the_links_to_its_model():
    import dataclasses
    from mxnet_ssp.lab.reproduce.verdicts import simulated_rates
    link4 = SCENARIOS['link-4']
    loopback = dataclasses.replace(link4, links=())
    bsp = parse_arm('bsp')
    with_links, share = simulated_rates(bsp, link4, 42, 100)
    without, _ = simulated_rates(bsp, loopback, 42, 100)
    # BSP at worker 3's pace: 4 workers / (20 ms + 157 ms); on loopback about 4 / 27 ms
    assert with_links == pytest.approx(4 / 0.1774, rel=0.05) and without > 4 * with_links
    assert share > 0.7          # the fast workers (ranks 0-2) wait for rank 3's link
    # measured steps (ASP's, which hold the link's time) replace the link time, not add to it
    fixed, _ = simulated_rates(bsp, link4, 42, 100, step_samples=[0.0])
    assert fixed == pytest.approx(without, rel=0.01)
