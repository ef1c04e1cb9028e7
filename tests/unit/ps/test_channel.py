"""The worker/server channel: the worker's side never imports the server's code."""
import os
import pickle
import subprocess
import sys

import pytest

from conftest import ROOT, need_module  # noqa: E402  (the checkout)


def test_worker_store_does_not_import_the_server_module():
    code = ('import sys, mxnet, mxnet_ssp.kvstore, pickle\n'
            'from mxnet_ssp.ps.commands import UpdaterSpec\n'
            'pickle.dumps(UpdaterSpec(mxnet.optimizer.SGD(), num_workers=2), 0)\n'
            'print(sorted(m for m in sys.modules if m.startswith("mxnet_ssp.")))\n')
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    env = {k: v for k, v in env.items() if not k.startswith('DMLC_')}
    proc = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = proc.stdout.strip().splitlines()[-1]
    assert 'mxnet_ssp.kvstore' in modules, modules
    for server_side in ('mxnet_ssp.server.updater', 'mxnet_ssp.server.state',
                        'mxnet_ssp.server.door', 'mxnet_ssp.controller.server'):
        assert server_side not in modules, modules


def test_updater_spec_unpickles_as_the_door_around_the_server_optimizer():
    mx = need_module('mxnet')
    from mxnet_ssp.ps.commands import UpdaterSpec
    from mxnet_ssp.server.door import Door
    from mxnet_ssp.server.updater import ServerOptimizer
    opt = mx.optimizer.SGD(learning_rate=0.25, multi_precision=False)
    spec = UpdaterSpec(opt, num_workers=3, slots=True, num_servers=2, softsync_c=2)
    assert spec.multi_precision is False
    door = pickle.loads(pickle.dumps(spec, 0))
    assert isinstance(door, Door)
    server_side = door.rule
    assert isinstance(server_side, ServerOptimizer)
    assert door.multi_precision is False       # what MXNet's Updater reads: the rule's
    assert (server_side.num_workers, server_side.slots, server_side.num_servers,
            server_side.softsync_c) == (3, True, 2, 2)
    assert server_side.optimizer.lr == 0.25


def mxnet_server_of(key, num_servers):
    """Server of a small array's integer key in MXNet 1.9.1 (KVStoreDist::EncodeDefaultKey):
    ``int server = (key * 9973) % num_servers;``, computed in a 32-bit C int."""
    product = key * 9973
    assert product <= 2 ** 31 - 1, 'key %d overflows MXNet\'s placement' % key
    return product % num_servers


@pytest.mark.parametrize('servers', [1, 2, 3, 4])
@pytest.mark.parametrize('workers', range(1, 9))
def test_every_slot_of_a_parameter_is_on_one_server(workers, servers):
    from mxnet_ssp.ps.channel import MAX_INT_KEY, slot_key, slot_of
    params = list(range(40)) + [MAX_INT_KEY // (workers * servers) - 1]
    seen = set()
    for k in params:
        slots = [slot_key(k, m, workers, servers) for m in range(workers)]
        assert len({mxnet_server_of(x, servers) for x in slots}) == 1, (k, slots)
        for m, x in enumerate(slots):
            assert 0 <= x <= MAX_INT_KEY and x not in seen
            seen.add(x)
            assert slot_of(x, workers, servers) == (k, m)
    # consecutive parameters are spread over every server
    assert {mxnet_server_of(slot_key(k, 0, workers, servers), servers)
            for k in range(servers)} == set(range(servers))
    if servers == 1:            # one server: the keys of before, k * M + m
        assert all(slot_key(k, m, workers, 1) == k * workers + m
                   for k in params for m in range(workers))


def test_slot_of_refuses_a_key_of_another_layout():
    from mxnet_ssp.ps.channel import slot_key, slot_of
    assert slot_of(slot_key(5, 1, 3, 2), 3, 2) == (5, 1)
    with pytest.raises(ValueError, match='not a slot key for 3 workers and 2 servers'):
        slot_of(1 * 3 + 0, 3, 2)     # worker 0's slot of key 1 in the single-server layout


def test_saved_server_state_refuses_another_number_of_servers(tmp_path):
    mx = need_module('mxnet')
    from mxnet_ssp.server.updater import ServerOptimizer
    prefix = str(tmp_path / 'state')
    ServerOptimizer(mx.optimizer.SGD(), num_workers=2, slots=True,
                    num_servers=2).control('save', prefix)
    ServerOptimizer(mx.optimizer.SGD(), num_workers=2, slots=True,
                    num_servers=2).control('load', prefix)
    with pytest.raises(ValueError, match=r'2 servers\); this job has .* 3 servers'):
        ServerOptimizer(mx.optimizer.SGD(), num_workers=2, slots=True,
                        num_servers=3).control('load', prefix)


@pytest.mark.parametrize('length', [512, 1031])
def test_one_json_packing_for_every_length(length):
    """encode_blob is the one JSON-in-float32 codec (discovery: 1031 elements, the balancing
    service's address: 512); decode_blob reads any length and refuses what is not one."""
    import numpy as np
    from mxnet_ssp.ps.channel import MAGIC, decode_blob, encode_blob
    obj = {'host': '10.0.0.7', 'port': 65535, 'secret': 'ab' * 32, 'é': [1, None]}
    vec = encode_blob(obj, length)
    assert vec.dtype == np.float32 and vec.shape == (length,)
    assert tuple(vec[:3]) == MAGIC and decode_blob(vec) == obj
    assert decode_blob(vec.astype(np.float64)) == obj          # what asnumpy() may give
    assert decode_blob(np.zeros(length, dtype=np.float32)) is None     # an unset key
    assert decode_blob(vec[:5]) is None and decode_blob(vec.reshape(-1, 1)) is None
    short = vec.copy()
    short[3] = 1                    # a byte count (2**24 + ...) beyond the vector
    assert decode_blob(short) is None
    with pytest.raises(ValueError, match=r'too long for 16 elements \(\d+ bytes of JSON, '
                                         r'at most 9\)'):
        encode_blob(obj, 16)


def test_abort_message_names_the_reason_and_the_worker():
    from mxnet_ssp.ps.commands import abort_message
    assert abort_message('worker[1]: the training script raised ValueError: x') == (
        'server: the job failed: the training script raised ValueError: x (worker[1] said so; '
        'ending this server)')
    assert abort_message('odd') == 'server: the job failed: odd; ending this server'
    assert len(abort_message('worker[0]: ' + 'y' * 5000)) < 2100
