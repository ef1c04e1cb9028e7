"""Reading a run's marker: which runs diverged (a result) and which failed (run again)."""
from mxnet_ssp.lab.reproduce.collect import diverged_run, log_tail
from mxnet_ssp.lab.training.diverge import DIVERGED_AT

MESSAGE = 'train_cifar.py: error: worker 1' + DIVERGED_AT + '25 (epoch 1): the loss grew'


def test_a_run_diverged_by_its_status_its_reason_or_its_log(tmp_path):
    assert not diverged_run(None, str(tmp_path))
    assert not diverged_run({'status': 'ok', 'reason': MESSAGE}, str(tmp_path))
    assert diverged_run({'status': 'diverged'}, str(tmp_path))
    # markers written before the status existed: the training script's words decide
    assert diverged_run({'status': 'failed', 'reason': 'exit code 1: ' + MESSAGE}, str(tmp_path))
    crash = {'status': 'failed', 'reason': 'exit code 1: worker 1: simulated crash'}
    assert not diverged_run(crash, str(tmp_path))
    (tmp_path / 'job.log').write_text('$ launch\n' + MESSAGE + '\n' + 'x\n' * 398)
    assert diverged_run(crash, str(tmp_path))
    # only the last 400 lines are read
    (tmp_path / 'job.log').write_text(MESSAGE + '\n' + 'x\n' * 400)
    assert not diverged_run(crash, str(tmp_path))


def test_log_tail_reads_the_last_lines_or_nothing(tmp_path):
    path = tmp_path / 'job.log'
    assert log_tail(str(path)) == []
    path.write_text(''.join('%d\n' % i for i in range(20)))
    assert log_tail(str(path)) == [str(i) for i in range(8, 20)]
    assert log_tail(str(path), 3) == ['17', '18', '19']
    path.write_bytes(b'ok\n\xff\n')
    assert log_tail(str(path)) == ['ok', '\ufffd']
