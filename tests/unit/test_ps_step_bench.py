"""benchmarks.ps_step: the shipped parameter shapes and the table formatting (no job is started).

The expected counts are GluonCV 0.10.5's (``--regenerate-shapes``): trainable parameters
(``grad_req != 'null'``), float32.
"""
import pytest

from benchmarks import ps_step


@pytest.mark.parametrize('model,arrays,elements,no_wd', [
    ('cifar_resnet20_v1', 65, 272474, 43),
    ('cifar_resnet110_v1', 335, 1730714, 223),
    ('resnet50_v1', 193, 25575912, 139),
])
def test_shipped_shapes_match_gluoncv_counts(model, arrays, elements, no_wd):
    entries = ps_step.load_shapes()[model]['params']
    assert ps_step.summarize_shapes(entries) == (arrays, elements, 4 * elements, no_wd)
    names = [name for name, _, _ in entries]
    assert len(set(names)) == len(names), model + ': parameter names repeat'
    # no_wd is exactly the BN gamma/beta and the biases, as the regenerator marks them
    assert all(flag == bool(ps_step.NO_WD.search(name)) for name, _, flag in entries)


def test_fmt_stat():
    assert ps_step.fmt_stat([]) == '-'
    assert ps_step.fmt_stat([None]) == '-'
    assert ps_step.fmt_stat([12.345]) == '12.3'
    assert ps_step.fmt_stat([3.0, 1.0, 2.0, None]) == '2.0 [1.0-3.0]'
    assert ps_step.fmt_stat([1.234, 1.0], 2) == '1.12 [1.00-1.23]'   # median of two: their mean


def test_table_ratios_and_floor_rows():
    fig = lambda ms, cpu: {'ms': ms, 'server_cpu_ms': cpu, 'worker_cpu_ms': 1.0}
    cells = {(1, key): [] for key in ps_step.CONFIG_KEYS}
    cells[(1, 'native_async')] = [fig(20.0, 10.0)]
    cells[(1, 'ours_ssp_off')] = [fig(10.0, None)]
    cells[(1, 'floor_one_array')] = [fig(5.0, 2.0)]
    text = ps_step.table('m', (2, 10, 40, 1), cells, [0.002], [1])
    rows = {line.split(' | ')[1]: line for line in text.splitlines() if line.startswith('| 1 |')}
    assert rows['native dist_async'] == \
        '| 1 | native dist_async | 20.0 | 1.00 | - | 4.00 | 10.0 | 1.0 |'
    assert rows['ours dist_ssp s=3, bucketing off'] == \
        '| 1 | ours dist_ssp s=3, bucketing off | 10.0 | 2.00 | - | 2.00 | - | 1.0 |'
    assert rows['native dist_sync'] == '| 1 | native dist_sync | - | - | - | - | - | - |'
    # BSP rows: the ratio to MXNet's own dist_sync
    cells[(1, 'native_sync')] = [fig(40.0, 30.0)]
    cells[(1, 'ours_sync_default')] = [fig(10.0, 3.0)]
    text = ps_step.table('m', (2, 10, 40, 1), cells, [0.002], [1])
    rows = {line.split(' | ')[1]: line for line in text.splitlines() if line.startswith('| 1 |')}
    assert rows['ours dist_sync (BSP), bucketing default'] == (
        '| 1 | ours dist_sync (BSP), bucketing default | 10.0 | 2.00 | 4.00 | 2.00 | 3.0 | 1.0 |')
    assert rows['floor (b): bare TCP push + pull, 1 connection'].split(' | ')[2] == '2.0'


def test_the_configurations_order_turns_by_one_place_per_trial():
    configs = ['a', 'b', 'c']
    assert [ps_step.rotated(configs, t) for t in range(4)] == [
        ['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b'], ['a', 'b', 'c']]
    assert ps_step.rotated([], 2) == []
