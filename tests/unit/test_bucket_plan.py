"""The bucket plan (mxnet_ssp.core.buckets): which arrays share a bucket, where each lies, and
the keys a store may give buckets.  Expected layouts are worked out by hand."""
import pytest

from mxnet_ssp.core.buckets import ArrayInfo, BucketPlan, int_keys_on, plan_buckets


def arr(key, size, group=(0, '<f4', 1.0, 1.0), itemsize=4, eligible=True, shape=None):
    return ArrayInfo(key, shape or (size,), size, itemsize, group, eligible)


def layout(plan):
    return [[(m.key, m.offset, m.size) for m in b.members] for b in plan.buckets]


def test_small_arrays_fill_buckets_in_push_order_with_a_header_each():
    # 1000 bytes per bucket = 250 float32 elements, header included
    plan = plan_buckets([arr(k, 60) for k in range(5)], 1000)
    # 60 + 60 + 60 + 3 header = 183; a fourth: 240 + 4 = 244 <= 250; a fifth: 300 + 5 > 250
    assert layout(plan) == [[(0, 0, 60), (1, 60, 60), (2, 120, 60), (3, 180, 60)]]
    # the fifth alone would be a bucket of one: it keeps its own key
    assert plan.bucket_of(4) is None
    b = plan.buckets[0]
    assert (b.payload, b.length, b.nbytes, b.number) == (240, 244, 976, 0)
    assert plan.bucket_of(2) == (b, b.members[2])


def test_arrays_above_half_a_bucket_keep_their_own_key():
    plan = plan_buckets([arr(0, 10), arr(1, 126), arr(2, 125), arr(3, 10)], 1000)
    # 126 * 4 = 504 > 500: own key; 125 * 4 = 500: in
    assert layout(plan) == [[(0, 0, 10), (2, 10, 125), (3, 135, 10)]]


def test_groups_never_share_a_bucket_and_each_fills_on_its_own():
    a, b = (0, '<f4', 1.0, 1.0), (0, '<f4', 1.0, 0.0)     # wd_mult 1 / 0
    plan = plan_buckets([arr(0, 10, a), arr(1, 5, b), arr(2, 10, a), arr(3, 5, b),
                         arr(4, 10, (1, '<f4', 1.0, 1.0))], 1000)
    assert layout(plan) == [[(0, 0, 10), (2, 10, 10)], [(1, 0, 5), (3, 5, 5)]]
    assert [bk.server for bk in plan.buckets] == [0, 0]
    assert plan.bucket_of(4) is None          # alone on server 1


def test_ineligible_and_empty_arrays_are_skipped():
    plan = plan_buckets([arr(0, 10), arr(1, 10, eligible=False), arr(2, 0), arr(3, 10)], 1000)
    assert layout(plan) == [[(0, 0, 10), (3, 10, 10)]]


def test_zero_bytes_means_no_buckets():
    plan = plan_buckets([arr(k, 10) for k in range(4)], 0)
    assert not plan and len(plan) == 0 and plan.bucket_of(0) is None


def test_a_bucket_stays_below_mxnets_bigarray_bound():
    # bound 100 elements: at most 99 per bucket, header included
    plan = plan_buckets([arr(k, 40) for k in range(4)], 10 ** 6, bigarray_bound=100)
    # 40 + 40 + 2 = 82; a third: 120 + 3 > 99
    assert layout(plan) == [[(0, 0, 40), (1, 40, 40)], [(2, 0, 40), (3, 40, 40)]]
    assert all(b.length < 100 for b in plan.buckets)
    assert [b.number for b in plan.buckets] == [0, 1]


def test_bytes_count_with_the_dtype():
    f16 = (0, '<f2', 1.0, 1.0)
    # 100 bytes per bucket: 50 float16 elements
    plan = plan_buckets([arr(k, 20, f16, itemsize=2) for k in range(3)], 100)
    assert layout(plan) == [[(0, 0, 20), (1, 20, 20)]]


def test_members_keep_their_shapes():
    plan = plan_buckets([arr(0, 6, shape=(2, 3)), arr(1, 4, shape=(4,))], 1000)
    assert [m.shape for m in plan.buckets[0].members] == [(2, 3), (4,)]


def test_describe_names_buckets_arrays_and_bytes_per_server():
    plan = plan_buckets([arr(0, 10), arr(1, 10), arr(2, 10, (1, '<f4', 1.0, 1.0)),
                         arr(3, 10, (1, '<f4', 1.0, 1.0))], 1000)
    assert plan.describe() == ('2 buckets holding 4 arrays (server 0: 0.1 kB, '
                               'server 1: 0.1 kB)')
    assert BucketPlan([]).describe().startswith('0 buckets holding 0 arrays')


def test_int_keys_on_a_server_from_the_top_skipping_taken_ones():
    def server_of(k):
        return k % 3
    assert int_keys_on(1, 3, 20, server_of, taken={19}) == [16, 13, 10]
    assert int_keys_on(2, 2, 20, server_of, taken=set()) == [20, 17]
    with pytest.raises(ValueError, match='no room for 3 bucket keys on server 0 below key 5'):
        int_keys_on(0, 3, 5, server_of, taken={0})
