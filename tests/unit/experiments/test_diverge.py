"""The training loop's divergence guard (issue 38, part 1): the pure decision and its message."""
import math

import pytest

from mxnet_ssp.lab.training.diverge import (GROWTH, DivergenceGuard, chance_loss,
                                                    divergence_message, lower_lr)


def run(losses, growth=GROWTH, floor=None):
    guard = DivergenceGuard(growth, floor)
    for i, loss in enumerate(losses):
        reason = guard.check(loss)
        if reason is not None:
            return i, reason
    return None, None


def test_a_falling_or_noisy_loss_is_fine():
    assert run([2.3, 2.1, 2.5, 1.0, 0.01, 0.0, 3.0]) == (None, None)


@pytest.mark.parametrize('bad,word', [(float('nan'), 'nan'), (float('inf'), 'inf'),
                                      (-float('inf'), '-inf')])
def test_a_non_finite_loss_diverges_at_once(bad, word):
    index, reason = run([2.3, 2.0, bad, 1.0])
    assert index == 2 and reason == 'the loss is %s' % word


def test_a_non_finite_first_loss_diverges():
    assert run([float('nan')]) == (0, 'the loss is nan')


def test_growth_past_100x_of_the_first_loss_diverges_and_100x_does_not():
    assert run([2.0, 200.0, 150.0]) == (None, None)          # exactly 100x: still fine
    index, reason = run([2.0, 1.0, 200.5])
    assert index == 2
    assert reason == 'the loss grew to 200.5, over 100x its first value 2'


def test_the_reference_is_the_first_loss_not_the_smallest():
    # a loss that fell to 0.01 and climbs back to 10 has not grown 100x over its first value
    assert run([2.0, 0.01, 10.0]) == (None, None)


def test_a_first_loss_of_zero_only_checks_for_non_finite_values():
    assert run([0.0, 1e9]) == (None, None)
    assert run([0.0, float('nan')])[0] == 1


def test_a_resumed_run_measures_growth_from_chance_not_from_its_tiny_first_loss():
    # the CI failure of 2026-11-29: a resumed digits model's first loss 0.0035, then 0.40
    chance = chance_loss(10)
    assert chance == pytest.approx(2.302585, abs=1e-6)
    assert run([0.003511, 0.4038, 5.0, 100 * chance], floor=chance) == (None, None)
    assert run([0.003511, 0.4038], floor=None)[0] == 1     # the same losses without the floor
    index, reason = run([0.003511, 0.5, 231.0], floor=chance)
    assert index == 2
    assert reason == ('the loss grew to 231, over 100x the loss of chance guessing 2.303 '
                      '(its first value 0.003511 came from a resumed model)')
    assert run([0.003511, float('nan')], floor=chance) == (1, 'the loss is nan')


def test_a_first_loss_above_the_floor_stays_the_reference():
    assert run([3.0, 299.0], floor=chance_loss(10)) == (None, None)
    assert run([3.0, 301.0], floor=chance_loss(10))[1] == \
        'the loss grew to 301, over 100x its first value 3'


@pytest.mark.parametrize('floor', [0.0, -1.0, float('nan'), float('inf')])
def test_the_floor_must_be_a_positive_number(floor):
    with pytest.raises(ValueError, match='floor'):
        DivergenceGuard(GROWTH, floor)


@pytest.mark.parametrize('classes', [1, 0, 2.0, '10'])
def test_chance_loss_needs_two_classes_or_more(classes):
    with pytest.raises(ValueError, match='num_classes'):
        chance_loss(classes)


@pytest.mark.parametrize('growth', [1.0, 0.5, float('nan'), float('inf')])
def test_the_growth_must_be_above_one(growth):
    with pytest.raises(ValueError, match='growth'):
        DivergenceGuard(growth)


def test_the_message_names_what_happened_the_lr_the_store_and_what_to_try():
    msg = divergence_message('the loss is nan', 5.0, 'dist_async', 12, 1, rank=1,
                             num_workers=2, first=2.3)
    assert msg == ('worker 1 diverged at iteration 12 (epoch 1): the loss is nan (first loss '
                   '2.3), with --lr 5 and --kvstore dist_async (2 workers); try a lower --lr, '
                   'e.g. --lr 0.5')
    assert '\n' not in msg


def test_a_single_worker_run_says_training():
    msg = divergence_message('the loss grew to 500, over 100x its first value 2', 1000.0,
                             'local', 2, 1)
    assert msg.startswith('training diverged at iteration 2 (epoch 1): the loss grew to 500')
    assert '(first loss' not in msg and '(1 worker)' in msg and '--lr 100' in msg


@pytest.mark.parametrize('lr,lower', [(1.0, 0.1), (0.1, 0.01), (3.0, 0.3), (1000, 100.0),
                                      (0.07, 0.007)])
def test_lower_lr(lr, lower):
    assert math.isclose(lower_lr(lr), lower)


@pytest.mark.parametrize('error,code', [('diverged', 3), ('config', 2)])
def test_the_command_ends_a_stopped_run_with_one_line(monkeypatch, tmp_path, capsys, error,
                                                      code):
    """mxnet-ssp-train's main: a diverged run (exit 3) or a bad setting found while training
    (exit 2) is one line on stderr, not a traceback (outside a job: the code is returned)."""
    from mxnet_ssp.config import ConfigError
    from mxnet_ssp.lab.training import cli
    from mxnet_ssp.lab.training.diverge import Diverged

    def run(self):
        if error == 'diverged':
            raise Diverged('training diverged at iteration 2 (epoch 1): the loss is nan')
        raise ConfigError("MXNET_SSP_BUCKET_BYTES='x' is not valid: expected an integer >= 0")

    monkeypatch.delenv('DMLC_ROLE', raising=False)
    monkeypatch.setattr(cli.Training, 'run', run)
    monkeypatch.setattr(cli, 'setup_logging', lambda *a: None)
    assert cli.main(['--kvstore', 'local', '--save-dir', str(tmp_path)]) == code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and 'Traceback' not in err
    assert err.startswith('mxnet-ssp-train: error: ')      # pytest's argv[0] is not ours
    assert ('the loss is nan' if error == 'diverged' else "MXNET_SSP_BUCKET_BYTES='x'") in err


@pytest.mark.parametrize('resume,floor', [(None, None),
                                          ({'completed_epochs': 4, 'iteration': 88},
                                           math.log(10))])
def test_the_training_loop_floors_the_guard_only_of_a_resumed_run(resume, floor):
    from types import SimpleNamespace

    from mxnet_ssp.lab.training.loop import Training
    args = SimpleNamespace(num_epochs=5, num_iterations=None, resume_info=resume)
    training = Training(args, save_dir=None, rank_filter=None)
    training.iters_per_epoch, training.compute = 22, None
    training.dataset = SimpleNamespace(num_classes=10)
    training.plan()
    assert training.guard.floor == floor and training.guard.first is None
    assert training.start_epoch == (5 if resume else 1)
