"""The chunk plan (mxnet_ssp.core.chunks): which arrays are split, into what, on which server."""
import pytest

from mxnet_ssp.core.chunks import ChunkPlan, chunk_parts, plan_chunks

MB = 1 << 20


def test_only_arrays_above_the_chunk_size_are_split_into_pieces_of_half_to_one_chunk():
    assert chunk_parts(1000, 4, 4000, 10 ** 6) == []            # exactly one chunk: whole
    assert chunk_parts(0, 4, 4000, 10 ** 6) == []
    assert chunk_parts(10, 4, 0, 10 ** 6) == []                  # chunks off
    parts = chunk_parts(1001, 4, 4000, 10 ** 6)
    assert parts == [(0, 501), (501, 500)]
    parts = chunk_parts(2359296, 4, 512 * 1024, 10 ** 6)        # a 3x3x512x512 conv: 9 MB
    assert len(parts) == 18
    sizes = [n for _, n in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 2359296
    assert all(512 * 1024 // 2 <= 4 * n <= 512 * 1024 for n in sizes)
    offsets = [o for o, _ in parts]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert all(o + n == o2 for (o, n), (o2, _) in zip(parts, parts[1:]))


def test_a_chunk_stays_below_the_big_array_bound():
    parts = chunk_parts(10000, 4, 20000, 999)      # a chunk of 20000 bytes: 5000 elements
    assert len(parts) == 11 and all(n <= 999 for _, n in parts)
    assert sum(n for _, n in parts) == 10000


def test_chunks_go_to_the_least_loaded_server_and_small_arrays_stay_whole():
    # a small model: the arrays below the chunk size are never split to balance the servers
    arrays = [('a', (100, 100), 4, True, 0), ('b', (100,), 4, True, 0)]
    plan = plan_chunks(arrays, 512 * 1024, 2, 10 ** 6 - 1)
    assert not plan and plan.load == [40400, 0]
    assert plan.imbalance() == 1.0          # the goal is not met, and the plan says so
    # a large array fills the empty server first
    plan = plan_chunks(arrays + [('fc', (1000, 1000), 4, True, 1)], 512 * 1024, 2,
                       10 ** 6 - 1)
    fc = plan.get('fc')
    assert len(fc.chunks) == 8
    assert plan.imbalance() < 0.05
    assert sum(plan.load) == 40400 + 4 * 10 ** 6
    assert plan.get('a') is None and plan.get('b') is None


def test_ineligible_and_big_arrays_counted_where_mxnet_puts_them():
    plan = ChunkPlan(1 * MB, 4, 10 ** 6 - 1)
    assert plan.add('sparse', (10 ** 6,), 4, eligible=False, server=None) is None
    assert plan.load == [10 ** 6] * 4
    array = plan.add(7, (2 * 10 ** 6,), 4, server=3)
    assert [c.server for c in array.chunks] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert plan.imbalance() == 0.0
    assert 'servers within 0.0%' in plan.describe()


def test_every_worker_gets_the_same_plan_from_the_same_arrays():
    arrays = [(i, (i * 70001 % 900001 + 1,), 4, i % 5 != 0, i % 3) for i in range(60)]
    one = plan_chunks(arrays, 256 * 1024, 3, 10 ** 6 - 1)
    two = plan_chunks(arrays, 256 * 1024, 3, 10 ** 6 - 1)
    assert {k: a.chunks for k, a in one.arrays.items()} == \
        {k: a.chunks for k, a in two.arrays.items()}
    assert one.load == two.load
    assert one.imbalance() < 0.05


def test_bad_server_count_is_refused():
    with pytest.raises(ValueError, match='num_servers'):
        ChunkPlan(1024, 0, 10)
