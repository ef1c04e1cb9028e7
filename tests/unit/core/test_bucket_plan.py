"""The bucket plan (mxnet_ssp.core.buckets): which arrays share a bucket, where each lies, and
the keys a store may give buckets.  Expected layouts are worked out by hand."""
import pytest

from mxnet_ssp.core.buckets import ArrayInfo, Bucket, BucketPlan, Member, int_keys_on, plan_buckets


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
    assert plan and len(plan) == 1
    assert (b.payload, b.length, b.nbytes, b.number) == (240, 244, 976, 0)
    assert b.group == (0, '<f4', 1.0, 1.0) and b.server == 0
    assert b.key is None and b.index is None             # the store gives keys
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
    with pytest.raises(ValueError, match='^no room for 3 bucket keys on server 0 below key 5$'):
        int_keys_on(0, 3, 5, server_of, taken={0})
    # key 0 is a key like any other
    assert int_keys_on(0, 3, 2, lambda k: 0, taken=set()) == [2, 1, 0]


def test_a_bucket_may_fill_exactly_to_its_size_and_not_one_element_more():
    # 1000 bytes: 250 float32 elements, header included
    exact = plan_buckets([arr(0, 100), arr(1, 100), arr(2, 47)], 1000)
    assert layout(exact) == [[(0, 0, 100), (1, 100, 100), (2, 200, 47)]]      # 247 + 3 = 250
    over = plan_buckets([arr(0, 100), arr(1, 100), arr(2, 48)], 1000)
    assert layout(over) == [[(0, 0, 100), (1, 100, 100)]]                     # 248 + 3 > 250


def test_a_bucket_stays_exactly_below_the_bigarray_bound():
    fits = plan_buckets([arr(0, 48), arr(1, 49)], 10 ** 6, bigarray_bound=100)
    assert layout(fits) == [[(0, 0, 48), (1, 48, 49)]]                       # 97 + 2 = 99
    too_big = plan_buckets([arr(0, 48), arr(1, 50)], 10 ** 6, bigarray_bound=100)
    assert layout(too_big) == []                                              # 98 + 2 = 100


def test_describe_sums_each_server_and_names_a_single_bucket():
    one = plan_buckets([arr(0, 12500), arr(1, 12498)], 10 ** 6)
    assert one.describe() == '1 bucket holding 2 arrays (server 0: 100.0 kB)'
    a, b = (0, '|i1', 1.0, 1.0), (0, '|i1', 1.0, 0.0)      # one-byte elements
    two = plan_buckets([arr(0, 500, a, 1), arr(1, 500, a, 1), arr(2, 270, b, 1),
                        arr(3, 275, b, 1)], 10 ** 6)
    # 1002 + 547 = 1549 bytes, both on server 0: 1.5 kB (1550 would read 1.6)
    assert two.describe() == '2 buckets holding 4 arrays (server 0: 1.5 kB)'


def test_repr_names_key_members_elements_and_server():
    b = Bucket([Member(7, (3,), 0, 3), Member(8, (2,), 3, 2)], (1, '<f4', 1.0, 1.0), 4)
    b.key = 42
    assert repr(b) == 'Bucket(42, 2 members, 5 elements, server 1)'


def test_carriers_name_each_bucket_once_in_the_order_asked():
    plan = plan_buckets([arr(k, 60) for k in range(5)], 1000)   # 0-3 in one bucket, 4 alone
    plan.buckets[0].key = 'b0'
    assert plan.carriers([2, 4, 0, 3]) == ['b0', 4]
    assert plan.carriers([4, 1]) == [4, 'b0']
    assert plan.carriers(['b0', 5]) == ['b0', 5]         # a bucket's key, an unknown key
    assert plan.carriers([]) == []


def test_fitted_bucket_bytes_gives_a_pipeline_of_buckets_within_its_bounds():
    from mxnet_ssp.core.buckets import (MIN_PIPELINE_BUCKET_BYTES as low, PIPELINE_BUCKETS,
                                        fitted_bucket_bytes)
    cap = 256 << 10
    # 8 MB of small arrays: more than PIPELINE_BUCKETS buckets of the cap, so the cap
    many = [arr(k, 16 << 10) for k in range(128)]            # 64 KiB each
    assert fitted_bucket_bytes(many, cap) == cap
    # 2 MiB of small arrays: 2 MiB / 16 = 128 KiB
    some = [arr(k, 4 << 10) for k in range(128)]             # 16 KiB each
    assert fitted_bucket_bytes(some, cap) == (2 << 20) // PIPELINE_BUCKETS == 128 << 10
    # a tiny model: not below the floor
    assert fitted_bucket_bytes([arr(k, 100) for k in range(10)], cap) == low
    # arrays too large for a bucket of the cap, and ineligible ones, count for nothing
    big = [arr('big', cap)] + [arr(k, 4 << 10, eligible=False) for k in range(512)]
    assert fitted_bucket_bytes(big + some, cap) == 128 << 10
    # a cap under the floor stays the cap
    assert fitted_bucket_bytes(some, 4096) == 4096
    # and the plan made with it has at least PIPELINE_BUCKETS buckets
    plan = plan_buckets(some, fitted_bucket_bytes(some, cap))
    assert len(plan.buckets) >= PIPELINE_BUCKETS
