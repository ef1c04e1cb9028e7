"""mxnet_ssp.checkpoint: atomic checkpoints, the latest complete one, the restart count
(issue 58).  No MXNet: plain files, and one real kill -9 during a write."""
import json
import logging
import os
import signal
import subprocess
import sys

import pytest

from mxnet_ssp import checkpoint as ck
from mxnet_ssp.config import ConfigError


def _writer(data):
    def write(path):
        with open(path, 'wb') as f:
            f.write(data)
    return write


def _save(directory, name, step, payload=b'w' * 100):
    return ck.write_checkpoint(directory, name, {'params': ('.params', _writer(payload)),
                                                 'info': ('.txt', _writer(b'info'))},
                               step, meta={'epoch': step})


def test_the_latest_complete_checkpoint_is_found_with_its_files_and_meta(tmp_path):
    _save(tmp_path, 'model-epoch001', 10)
    two = _save(tmp_path, 'model-epoch002', 20, b'x' * 50)
    found = ck.latest_checkpoint(str(tmp_path), prefix='model-')
    assert found == two and found.meta == {'epoch': 20} and found.step == 20
    assert open(found.files['params'], 'rb').read() == b'x' * 50
    assert found.manifest == str(tmp_path / 'model-epoch002.manifest.json')
    assert not [n for n in os.listdir(tmp_path) if n.endswith('.tmp')]    # no temporaries


def test_a_torn_checkpoint_is_skipped_naming_the_file_and_the_previous_one_taken(tmp_path,
                                                                                   caplog):
    _save(tmp_path, 'model-epoch001', 10)
    torn = _save(tmp_path, 'model-epoch002', 20)
    with open(torn.files['params'], 'r+b') as f:
        f.truncate(7)
    # a checkpoint whose manifest was never written does not count at all
    (tmp_path / 'model-epoch003.params').write_bytes(b'half')
    with caplog.at_level(logging.WARNING, logger='mxnet_ssp.checkpoint'):
        found = ck.latest_checkpoint(str(tmp_path))
    assert found.name == 'model-epoch001'
    assert ('skipping a torn checkpoint: %s lists %s, which differs from what was written '
            '(size 100, now 7 bytes)' % (torn.manifest, torn.files['params'])) in caplog.text
    os.remove(torn.files['params'])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger='mxnet_ssp.checkpoint'):
        assert ck.latest_checkpoint(str(tmp_path)).name == 'model-epoch001'
    assert '%s, which is missing' % torn.files['params'] in caplog.text


def test_accept_refuses_a_checkpoint_with_its_reason(tmp_path, caplog):
    _save(tmp_path, 'a', 1)
    _save(tmp_path, 'b', 2)
    with caplog.at_level(logging.WARNING, logger='mxnet_ssp.checkpoint'):
        found = ck.latest_checkpoint(str(tmp_path), accept=lambda c: 'other run'
                                     if c.name == 'b' else None)
    assert found.name == 'a' and 'skipping checkpoint %s: other run' % (
        tmp_path / 'b.manifest.json') in caplog.text
    assert ck.latest_checkpoint(str(tmp_path / 'none')) is None


def test_an_unreadable_manifest_is_skipped(tmp_path, caplog):
    _save(tmp_path, 'a', 1)
    (tmp_path / 'b.manifest.json').write_text('{"format": 1, "name": "b", "st')
    with caplog.at_level(logging.WARNING, logger='mxnet_ssp.checkpoint'):
        assert ck.latest_checkpoint(str(tmp_path)).name == 'a'
    assert 'b.manifest.json is not a readable checkpoint manifest' in caplog.text


def test_external_files_are_checked_when_visible_and_trusted_when_not(tmp_path):
    server = tmp_path / 'm.states.server-0'
    server.write_bytes(b'state')
    c = ck.write_checkpoint(str(tmp_path), 'm', {}, 5,
                            external={'s0': str(server), 's1': '/nonexistent/host/file'})
    assert ck.latest_checkpoint(str(tmp_path)) == c
    server.write_bytes(b'other')
    assert ck.latest_checkpoint(str(tmp_path)) is None


def test_a_writer_that_fails_leaves_nothing_and_the_old_file_untouched(tmp_path):
    target = tmp_path / 'f'
    target.write_bytes(b'old')

    def bad(path):
        open(path, 'wb').write(b'partial')
        raise RuntimeError('disk full')
    with pytest.raises(RuntimeError, match='disk full'):
        ck.atomic_write(str(target), bad)
    assert target.read_bytes() == b'old' and os.listdir(tmp_path) == ['f']


KILLED_WRITER = '''\
import os, sys
from mxnet_ssp import checkpoint as ck
directory, ready = sys.argv[1], int(sys.argv[2])
def write(path):
    with open(path, 'wb') as f:
        f.write(b'half of the new weights')
        f.flush()
        os.write(ready, b'1')          # the test kills this process now
        os.read(0, 1)                  # blocks until killed
ck.write_checkpoint(directory, 'model-epoch002', {'params': ('.params', write)}, 20)
'''


def test_a_kill_during_a_checkpoint_write_leaves_the_previous_one_the_latest(tmp_path):
    _save(tmp_path, 'model-epoch001', 10)
    rfd, wfd = os.pipe()
    proc = subprocess.Popen([sys.executable, '-c', KILLED_WRITER, str(tmp_path), str(wfd)],
                            pass_fds=(wfd,), stdin=subprocess.PIPE)
    os.close(wfd)
    try:
        assert os.read(rfd, 1) == b'1', 'the writer died before writing'
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        os.close(rfd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (tmp_path / 'model-epoch002.params').exists()
    assert not (tmp_path / 'model-epoch002.manifest.json').exists()
    assert ck.latest_checkpoint(str(tmp_path)).name == 'model-epoch001'


def test_restart_count_reads_the_launchers_variable():
    assert ck.restart_count({}) == 0 and not ck.is_restart({})
    assert ck.restart_count({'MXNET_SSP_RESTART': '2'}) == 2
    assert ck.is_restart({'MXNET_SSP_RESTART': '1'})
    with pytest.raises(ConfigError, match=r"MXNET_SSP_RESTART='-1' is not valid: expected an "
                                          r"integer >= 0"):
        ck.restart_count({'MXNET_SSP_RESTART': '-1'})


def test_the_product_module_imports_nothing_from_the_lab():
    code = ('import sys, mxnet_ssp.checkpoint; bad = [m for m in sys.modules if m.split(".")[1:2]'
            ' and m.split(".")[1] in ("experiments", "cluster_model", "testbed", '
            '"training_flags") and m.startswith("mxnet_ssp.")]; print(json.dumps(bad))')
    out = subprocess.run([sys.executable, '-c', 'import json; ' + code], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == [] and 'mxnet' not in out
