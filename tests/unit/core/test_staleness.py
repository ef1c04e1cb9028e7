"""The per-parameter clock the servers and the NumPy reference share (pure Python)."""
import pytest

from mxnet_ssp.core.staleness import KeyClock


def test_asp_every_gradient_is_an_update_and_tau_counts_updates_since_the_pull():
    clock = KeyClock(num_workers=2)
    assert clock.receive(0) == (0, True)
    assert clock.advance() == ((0,), (0,)) and clock.version == 1
    clock.pulled_by(0)
    assert clock.receive(1) == (1, True)        # worker 1 still holds version 0
    clock.advance()
    assert clock.receive(0) == (1, True) and clock.pulled == [1, 0]


def test_softsync_round_gathers_per_update_gradients_in_arrival_order():
    clock = KeyClock(num_workers=3, per_update=2)
    assert clock.receive(2) == (0, False) and clock.waiting == 1 and clock.version == 0
    assert clock.receive(0) == (0, True)
    assert clock.advance() == ((2, 0), (0, 0)) and clock.waiting == 0 and clock.version == 1
    assert clock.receive(1) == (1, False)
    assert clock.receive(1) == (1, True)
    senders, taus = clock.advance()
    assert senders == (1, 1) and KeyClock.mean(taus) == 1.0 and clock.version == 2


def test_state_round_trip_mid_round_and_older_saves_without_senders():
    clock = KeyClock(num_workers=2, per_update=3)
    clock.receive(0)
    clock.advance()
    clock.pulled_by(1)
    clock.receive(0)
    saved = clock.state()
    other = KeyClock(num_workers=2, per_update=3)
    other.restore(saved)
    assert other.state() == saved and other.receive(1) == clock.receive(1)
    old = {k: v for k, v in saved.items() if k != 'senders'}
    other.restore(old)
    assert other.taus == saved['taus'] and other.waiting == 1


def test_per_update_must_be_positive():
    with pytest.raises(ValueError, match='per_update=0'):
        KeyClock(2, per_update=0)


def test_per_update_error_message_in_full():
    with pytest.raises(ValueError) as info:
        KeyClock(3, per_update=-2)
    assert str(info.value) == 'per_update=-2: need at least one gradient per update'
