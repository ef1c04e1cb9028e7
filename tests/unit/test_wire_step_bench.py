"""benchmarks.wire_step: the wire floor, the layouts and the goal lines (no job is started)."""
import pytest

from benchmarks import wire_step

GBIT = 10 ** 9
PAYLOAD = GBIT * 1448 / 1514          # TCP payload bits/s through a 1gbit tbf


def test_the_floor_is_the_busiest_link_one_way_at_the_payload_rate():
    mb100 = 100 * 10 ** 6
    one = wire_step.wire_floor(mb100, workers=2, servers=1, rate_bits=GBIT)
    # the server's link carries both workers' pushes (in) and pulls (out): 200 MB each way
    assert one['server_bytes'] == 2 * mb100 and one['bottleneck'] == 'server link'
    assert one['s'] == pytest.approx(8 * 2 * mb100 / PAYLOAD)
    # 2 workers, 2 servers: every link carries 100 MB each way
    two = wire_step.wire_floor(mb100, workers=2, servers=2, rate_bits=GBIT)
    assert two['server_bytes'] == mb100 and two['bottleneck'] == 'worker link'
    assert two['s'] == pytest.approx(8 * mb100 / PAYLOAD)
    four = wire_step.wire_floor(mb100, workers=4, servers=2, rate_bits=GBIT)
    assert four['s'] == pytest.approx(2 * two['s'])
    assert wire_step.wire_floor(mb100, 4, 2, GBIT // 10)['s'] == pytest.approx(20 * two['s'])


def test_layouts_and_placement_one_process_per_host():
    assert wire_step.parse_layout('4x2') == (4, 2)
    for bad in ('4', '0x1', 'ax2', '2x', '2x0'):
        with pytest.raises(ValueError, match='WORKERSxSERVERS'):
            wire_step.parse_layout(bad)
    assert wire_step.placement(2, 2) == [('scheduler', 0, 0), ('server', 0, 1),
                                         ('server', 1, 2), ('worker', 0, 3), ('worker', 1, 4)]


def test_refused_options_name_the_setting(capsys):
    for argv, words in ((['--stores', 'native_async,mine'], "--stores: unknown ['mine']"),
                        (['--rate', '1gigabit'], "--rate '1gigabit' is not a rate"),
                        (['--layouts', '4by2'], "--layouts: '4by2' is not WORKERSxSERVERS"),
                        (['--models', 'vgg'], '--models: vgg is not in')):
        with pytest.raises(SystemExit) as exc:
            wire_step.parse_args(argv)
        assert exc.value.code == 2
        assert words in capsys.readouterr().err, argv


def fig(ms, floor_ms, spread=None):
    return {'ms': ms, 'over_floor': ms / floor_ms, 'server_spread': spread}


def test_goal_lines_from_the_medians():
    """Every row of ours against MXNet's own store of its kind (not slower beyond the trials'
    spread), and issue 56's goals for the pairs it names."""
    cells = {('m', 2, 2, 'native_async'): [fig(200, 100), fig(220, 100), fig(210, 100)],
             ('m', 2, 2, 'ours_async'): [fig(120, 100), fig(125, 100), fig(500, 100)],
             # slower than MXNet's slowest in every trial: NOT met
             ('m', 2, 2, 'ours_ssp'): [fig(230, 100)] * 3,
             # dist_sync against MXNet's dist_sync when it ran
             ('m', 2, 2, 'native_sync'): [fig(100, 100)] * 3,
             ('m', 2, 2, 'ours_sync'): [fig(105, 100), fig(99, 100), fig(110, 100)]}
    configs = [wire_step.BY_KEY[k]
               for k in ('native_async', 'ours_async', 'ours_ssp', 'native_sync', 'ours_sync')]
    lines = wire_step.goals(cells, [(2, 2)], configs, ['m'])
    assert lines == [
        'm 2x2 ours dist_async: step / floor 1.25',
        "m 2x2 ours dist_async: MXNet's dist_async / this 1.68 (goal: not slower beyond the "
        'spread): met',
        'm 2x2 ours dist_ssp s=3: step / floor 2.30',
        "m 2x2 ours dist_ssp s=3: MXNet's dist_async / this 0.91 (goal: not slower beyond the "
        'spread): NOT met',
        'm 2x2 ours dist_sync (BSP, bucketed): step / floor 1.05',
        "m 2x2 ours dist_sync (BSP, bucketed): MXNet's dist_sync / this 0.95 (goal: not slower "
        'beyond the spread): met',
    ]
    # the named goals: ResNet-50 2x2 at 1 Gbit/s
    cells = {('resnet50_v1', 2, 2, k): v for (_, _, _, k), v in cells.items()}
    lines = wire_step.goals(cells, [(2, 2)], configs, ['resnet50_v1'], rate_bits=1e9)
    assert 'resnet50_v1 2x2 ours dist_async: step / floor 1.25 (goal <= 1.15): NOT met' in lines
    assert ("resnet50_v1 2x2 ours dist_async: MXNet's dist_async / this 1.68 (goal >= 1.15): "
            'met') in lines
    assert not any('goal >= 1.15' in line and 'dist_sync' in line for line in lines)
    # at another rate the named goals are not asked
    lines = wire_step.goals(cells, [(2, 2)], configs, ['resnet50_v1'], rate_bits=1e8)
    assert not any('goal <=' in line for line in lines)
