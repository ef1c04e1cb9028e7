"""Slot mode's key layout on the worker (mxnet_ssp/worker/slots.py): worker m's slot of parameter k
is ``(k * M + m) * S + k % S`` (``k * M + m`` on one server), integer or string keys, at the
first and last worker, the first and last key that fit MXNet's 32-bit placement, and the
keys refused.  Expected keys are worked out by hand in each test."""
import pytest

from mxnet_ssp.ps.channel import MAX_INT_KEY, slot_key, slot_of
from mxnet_ssp.worker.slots import KeyLayout, SlotKeyError, as_list, as_values, has_row_sparse
from test_channel import mxnet_server_of

PAD = [0.0]       # stands for the 1-element padding array
V = object()      # a value, compared by identity


def pad(i):
    return '__mxnet_ssp_pad_%d__' % i


def test_the_largest_integer_key_mxnet_places_without_overflow():
    # 9973 * 215329 = 2147476117 <= 2**31 - 1 = 2147483647 < 9973 * 215330 = 2147486090
    assert MAX_INT_KEY == 215329


def test_slot_mode_is_set_by_the_number_of_workers():
    plain = KeyLayout(3, 2)
    assert plain.slot_mode is False
    assert (plain.rank, plain.num_servers, plain.workers, plain.str_ids) == (3, 2, None, 0)
    assert KeyLayout(0, 1, 1).slot_mode is True


@pytest.mark.parametrize('key', [5, 0, 'w', [1, 2], ('a', 'b')])
def test_without_slot_mode_every_worker_uses_the_key_itself(key):
    assert KeyLayout(2, 3).mine(key) is key


# (rank, servers, workers, key, slot) worked out by hand
SINGLE_SERVER = [
    (0, 1, 3, 0, 0),                # first worker, first key
    (2, 1, 3, 0, 2),                # last worker, first key: M - 1
    (0, 1, 3, 1, 3),                # first worker, next key: right after the last worker
    (1, 1, 3, 1, 4),
    (2, 1, 3, 5, 17),               # 5 * 3 + 2
    (0, 1, 1, 7, 7),                # one worker: the key itself
    (1, 1, 3, 71775, 215326),       # the last key that fits 3 workers: 71776 * 3 <= 215329
    (2, 1, 3, 71775, 215327),
    (0, 1, 1, 215328, 215328),      # the last key that fits one worker
]
SEVERAL_SERVERS = [                 # (k * M + m) * S + k % S
    (0, 2, 3, 0, 0),                # (0 + 0) * 2 + 0
    (2, 2, 3, 0, 4),                # (0 + 2) * 2 + 0
    (0, 2, 3, 1, 7),                # (3 + 0) * 2 + 1
    (2, 2, 3, 1, 11),               # (3 + 2) * 2 + 1
    (1, 2, 3, 5, 33),               # (15 + 1) * 2 + 1
    (0, 3, 2, 2, 14),               # (4 + 0) * 3 + 2
    (1, 3, 2, 4, 28),               # (8 + 1) * 3 + 1
    (0, 3, 4, 17943, 215316),       # the last key that fits 4 workers and 3 servers:
    (3, 3, 4, 17943, 215325),       # (71772 + 3) * 3 + 0; 17944 * 12 = 215328 <= 215329
]


@pytest.mark.parametrize('rank, servers, workers, key, expected',
                         SINGLE_SERVER + SEVERAL_SERVERS)
def test_integer_slot_keys(rank, servers, workers, key, expected):
    kv = KeyLayout(rank, servers, workers)
    assert kv.mine(key) == expected
    assert kv.slot(key) == expected
    assert slot_key(key, rank, workers, servers) == expected
    assert slot_of(expected, workers, servers) == (key, rank)      # and back


@pytest.mark.parametrize('index, workers, servers', [
    (32, 3, 2),         # 32 // 2 = 16 = 5 * 3 + 1, but 32 % 2 = 0 is not 5 % 2 = 1
    (3, 3, 2),          # 3 // 2 = 1: key 0, yet 3 % 2 = 1 is not 0 % 2
    (1, 1, 3),          # key 0 lives at residue 0 of 3
])
def test_a_key_of_another_layout_does_not_decode(index, workers, servers):
    with pytest.raises(ValueError) as info:
        slot_of(index, workers, servers)
    assert str(info.value) == 'key %d is not a slot key for %d workers and %d servers' \
        % (index, workers, servers)


def test_slot_of_another_rank():
    kv = KeyLayout(2, 1, 3)
    assert kv.slot(5) == 17 and kv.slot(5, 0) == 15 and kv.slot(5, 1) == 16
    assert kv.slot('w') == 'w@2' and kv.slot('w', 0) == 'w@0'      # rank 0 is a rank


@pytest.mark.parametrize('rank, key, expected', [
    (1, [0, 3], [1, 7]),                    # M = 2, S = 1: k * 2 + 1
    (1, (0, 3), [1, 7]),                    # a tuple gives a list
    (0, ['a', 'b'], ['a@0', 'b@0']),
    (1, [0, 'a'], [1, 'a@1']),
    (1, 'fc1_weight', 'fc1_weight@1'),
    (1, 'w@0', 'w@0@1'),
    (0, [], []),
])
def test_mine_maps_each_key_to_this_worker_s_slot(rank, key, expected):
    got = KeyLayout(rank, 1, 2).mine(key)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize('servers, workers, key, expected', [
    (1, 3, 5, [15, 16, 17]),                # every worker's slot, not only this one's
    (1, 3, 0, [0, 1, 2]),
    (2, 3, 1, [7, 9, 11]),
    (3, 4, 0, [0, 3, 6, 9]),
    (3, 4, 17943, [215316, 215319, 215322, 215325]),    # the last key that fits
    (1, 1, 215328, [215328]),
])
def test_block_of_an_integer_key(servers, workers, key, expected):
    kv = KeyLayout(1, servers, workers)
    keys, values = kv.block(key, V, PAD)
    assert keys == expected
    assert len(values) == workers and all(v is V for v in values)
    assert kv.str_ids == 0


@pytest.mark.parametrize('servers, workers, key', [
    (3, 4, 17944),          # 17945 * 12 = 215340 > 215329
    (1, 1, 215329),         # 215330 > 215329
    (1, 2, 107664),         # 107665 * 2 = 215330 > 215329 (107663 still fits)
    (3, 4, -1),
    (1, 1, -1),
])
def test_block_refuses_an_integer_key_beyond_the_layout(servers, workers, key):
    kv = KeyLayout(1, servers, workers)
    with pytest.raises(SlotKeyError) as info:
        kv.block(key, V, PAD)
    assert str(info.value) == (
        'worker[1]: key %d is too large for slot mode with %d workers and %d servers: integer '
        'keys must satisfy (key + 1) * workers * servers <= 215329 (MXNet places keys on '
        'servers with 32-bit arithmetic); use smaller keys or string keys'
        % (key, workers, servers))


def test_block_takes_the_largest_integer_key_of_two_workers():
    assert KeyLayout(0, 1, 2).block(107663, V, PAD)[0] == [215326, 215327]


@pytest.mark.parametrize('servers, workers, str_ids, keys', [
    # one server: no padding; parameter i takes ids i * M .. i * M + M - 1
    (1, 2, 0, ['w@0', 'w@1']),
    (1, 3, 3, ['w@0', 'w@1', 'w@2']),
    # two servers, two workers: a block of 4 ids, slots at the residue of the block
    (2, 2, 0, ['w@0', pad(1), 'w@1', pad(3)]),                  # ids 0, 2 = slot_key(0, m)
    (2, 2, 4, [pad(4), 'w@0', pad(6), 'w@1']),                  # ids 5, 7 = slot_key(1, m)
    # ids already taken (the discovery key): the next whole block, padded up to it
    (2, 2, 1, [pad(1), pad(2), pad(3), pad(4), 'w@0', pad(6), 'w@1']),
    (2, 2, 3, [pad(3), pad(4), 'w@0', pad(6), 'w@1']),
    # one worker, three servers
    (3, 1, 0, ['w@0', pad(1), pad(2)]),                         # id 0 = slot_key(0, 0, 1, 3)
    (3, 1, 3, [pad(3), 'w@0', pad(5)]),                         # id 4 = (1 * 1 + 0) * 3 + 1
])
def test_block_of_a_string_key(servers, workers, str_ids, keys):
    kv = KeyLayout(0, servers, workers)
    kv.str_ids = str_ids
    got, values = kv.block('w', V, PAD)
    assert got == keys
    assert [v is V for v in values] == [not k.startswith('__mxnet_ssp_pad_') for k in keys]
    assert all(v is PAD for k, v in zip(got, values) if k.startswith('__mxnet_ssp_pad_'))
    assert kv.str_ids == str_ids              # block() counts nothing itself


def test_block_of_the_last_string_parameter_that_fits():
    """4 workers, 3 servers: blocks of 12 ids; block 17943 (ids 215316 .. 215327) is the
    last, since 17944 * 12 = 215328 <= 215329.  Its slots are the ids with residue
    17943 % 3 = 0: 215316, 215319, 215322, 215325, i.e. slot_key(17943, m, 4, 3)."""
    kv = KeyLayout(0, 3, 4)
    kv.str_ids = 215316
    keys, _ = kv.block('w', V, PAD)
    expected = []
    for i in range(215316, 215328):
        expected.append('w@%d' % ((i - 215316) // 3) if i % 3 == 0 else pad(i))
    assert keys == expected and len(keys) == 12


def test_block_of_the_last_string_id_of_one_worker_and_one_server():
    """Blocks of 1 id: id 215328 is the last (215329 * 1 <= 215329), 215329 is past it."""
    kv = KeyLayout(0, 1, 1)
    kv.str_ids = 215328
    assert kv.block('w', V, PAD) == (['w@0'], [V])
    kv.str_ids = 215329
    with pytest.raises(SlotKeyError, match=r'so at most 215329 parameters fit$'):
        kv.block('w', V, PAD)


@pytest.mark.parametrize('str_ids', [215317, 215328, 215329, 300000])
def test_block_refuses_a_string_parameter_past_the_last_block(str_ids):
    kv = KeyLayout(2, 3, 4)
    kv.str_ids = str_ids
    with pytest.raises(SlotKeyError) as info:
        kv.block('w', V, PAD)
    assert str(info.value) == (
        'worker[2]: too many string keys for slot mode with 4 workers and 3 servers: MXNet '
        'numbers string keys from 0 and places them with 32-bit arithmetic, and each parameter '
        'takes workers * servers numbers, so at most 17944 parameters fit')


def test_count_string_keys_counts_strings_only():
    kv = KeyLayout(0, 1, 2)
    kv.count_string_keys(['a', 1, 'b'])
    assert kv.str_ids == 2
    kv.count_string_keys('a')
    assert kv.str_ids == 3
    kv.count_string_keys(7)
    kv.count_string_keys([])
    assert kv.str_ids == 3
    kv.count_string_keys(('c', 'd', 'e'))
    assert kv.str_ids == 6


def test_init_block_of_several_string_keys_takes_consecutive_blocks():
    va, vb = object(), object()
    kv = KeyLayout(0, 2, 2)
    keys, values = kv.init_block(['a', 'b'], [va, vb], PAD)
    assert keys == ['a@0', pad(1), 'a@1', pad(3), pad(4), 'b@0', pad(6), 'b@1']
    assert values == [va, PAD, va, PAD, PAD, vb, PAD, vb]
    assert kv.str_ids == 8                     # padding keys are numbered too


def test_init_block_on_one_server():
    va, vb = object(), object()
    kv = KeyLayout(1, 1, 2)
    assert kv.init_block(('a', 'b'), (va, vb), PAD) == (['a@0', 'a@1', 'b@0', 'b@1'],
                                                         [va, va, vb, vb])
    assert kv.str_ids == 4
    assert kv.init_block([3, 4], [va, vb], PAD) == ([6, 7, 8, 9], [va, va, vb, vb])
    assert kv.str_ids == 4                     # integer keys are not numbered by MXNet


def test_init_block_takes_the_first_of_a_list_of_values():
    v0, v1 = object(), object()
    for key, value in (('a', [v0, v1]),         # one key, a value per device: the first
                       ('a', (v0, v1)),
                       (['a'], [[v0, v1]])):    # a list of keys, each with a list
        keys, values = KeyLayout(0, 1, 2).init_block(key, value, PAD)
        assert keys == ['a@0', 'a@1'] and values[0] is v0 and values[1] is v0


@pytest.mark.parametrize('key, expected', [
    (3, [3]),
    ('abc', ['abc']),                          # a string is one key, not its characters
    ((1, 2), [1, 2]),
    ([1, 'a'], [1, 'a']),
    ([], []),
])
def test_as_list(key, expected):
    got = as_list(key)
    assert got == expected and type(got) is list


def test_as_list_copies_a_list():
    keys = [1, 2]
    got = as_list(keys)
    got.append(3)
    assert keys == [1, 2]


@pytest.mark.parametrize('key, value, expected', [
    (3, 'v', ['v']),
    (3, ['v0', 'v1'], [['v0', 'v1']]),         # one key: its value whole, even a list
    ('a', ('v0', 'v1'), [('v0', 'v1')]),
    ([1, 2], ['v1', 'v2'], ['v1', 'v2']),      # a list of keys: one value each
    ((1, 2), ('v1', 'v2'), ['v1', 'v2']),
])
def test_as_values(key, value, expected):
    got = as_values(key, value)
    assert got == expected and type(got) is list


def _arrays():
    import mxnet as mx
    return (mx.nd.zeros((3, 2)), mx.nd.sparse.zeros('row_sparse', (3, 2)),
            mx.nd.sparse.zeros('csr', (3, 2)))


def test_has_row_sparse_of_one_array():
    dense, rsp, csr = _arrays()
    assert (dense.stype, rsp.stype, csr.stype) == ('default', 'row_sparse', 'csr')
    assert has_row_sparse(rsp) is True
    assert has_row_sparse(dense) is False and has_row_sparse(csr) is False


def test_has_row_sparse_of_something_without_a_storage_type():
    import numpy as np
    assert has_row_sparse(np.zeros(3)) is False
    assert has_row_sparse(None) is False
    assert has_row_sparse('row_sparse') is False


def test_has_row_sparse_of_lists_tuples_and_lists_of_lists():
    dense, rsp, csr = _arrays()
    assert has_row_sparse([dense, rsp]) is True              # one is enough
    assert has_row_sparse([rsp, dense]) is True
    assert has_row_sparse((dense, rsp)) is True
    assert has_row_sparse([[dense], [csr, rsp]]) is True     # one value per device, per key
    assert has_row_sparse(([dense], (csr, rsp))) is True
    assert has_row_sparse([dense, csr]) is False
    assert has_row_sparse(([dense], [csr, dense])) is False
    assert has_row_sparse([]) is False and has_row_sparse(()) is False
    assert has_row_sparse([[]]) is False


def test_slot_key_error_is_a_value_error():
    assert issubclass(SlotKeyError, ValueError)


# ---------------------------------------------------------------------------
# string keys land on the ids of the integer layout (moved from test_channel.py)
# ---------------------------------------------------------------------------
def _string_layout_store(workers, servers):
    """The key layout of a store in slot mode (what SSPKVStore uses, no job)."""
    from mxnet_ssp.worker.slots import KeyLayout
    return KeyLayout(0, servers, workers)


@pytest.mark.parametrize('servers', [1, 2, 3, 4])
@pytest.mark.parametrize('workers', [1, 2, 3, 5, 8])
def test_string_slots_get_ids_of_the_integer_layout(workers, servers):
    """MXNet numbers string keys 0, 1, ... in init order (kvstore_local.h, next_str_key_):
    parameter number i (in init order) must get the ids slot_key(i, m); after a string
    key outside slot blocks (the discovery key) was numbered, the next parameter takes
    the next whole block."""
    from mxnet_ssp.ps.channel import slot_key, slot_of
    kv = _string_layout_store(workers, servers)
    ids = {}

    def native_init(keys):              # what MXNet's Init(str_keys, ...) does
        for key in keys:
            assert key not in ids, 'duplicate init of key %s' % key
            ids[key] = len(ids)
        kv.str_ids += len(keys)

    names = ['fc%d_weight' % i for i in range(6)]
    value = object()
    for i, name in enumerate(names):
        if i == 3:
            native_init(['__mxnet_ssp_discovery__'])
        keys, values = kv.block(name, value, PAD)
        assert len(keys) == len(values)
        slots = [k for k, v in zip(keys, values) if v is value]
        padding = [(k, v) for k, v in zip(keys, values) if v is not value]
        assert slots == ['%s@%d' % (name, m) for m in range(workers)]
        native_init(keys)
        block = i if i < 3 else i + 1
        for m in range(workers):
            assert ids['%s@%d' % (name, m)] == slot_key(block, m, workers, servers)
            assert slot_of(ids['%s@%d' % (name, m)], workers, servers) == (block, m)
        assert all(k.startswith('__mxnet_ssp_pad_') and v is PAD for k, v in padding)
        # the padding of a parameter's block: M * (S - 1) keys (+ M * S - 1 after the discovery)
        assert len(padding) == workers * (servers - 1) + (workers * servers - 1 if i == 3 else 0)
    used = {i: {mxnet_server_of(ids['%s@%d' % (n, m)], servers) for m in range(workers)}
            for i, n in enumerate(names)}
    assert all(len(s) == 1 for s in used.values()), used


def test_too_many_slot_keys_are_refused_naming_workers_and_servers():
    from mxnet_ssp.ps.channel import MAX_INT_KEY
    from mxnet_ssp.worker.slots import SlotKeyError
    kv = _string_layout_store(4, 3)
    with pytest.raises(SlotKeyError,
                       match=r'\(key \+ 1\) \* workers \* servers <= %d' % MAX_INT_KEY):
        kv.block(MAX_INT_KEY // 12, 'v', PAD)
    assert len(kv.block(MAX_INT_KEY // 12 - 1, 'v', PAD)[0]) == 4
    kv.str_ids = MAX_INT_KEY - 5
    with pytest.raises(SlotKeyError, match='too many string keys for slot mode with 4 workers '
                                           'and 3 servers'):
        kv.block('w', 'v', PAD)
