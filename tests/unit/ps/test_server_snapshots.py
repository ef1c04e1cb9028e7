"""The servers' weights on a wall clock (mxnet_ssp/server/snapshots.py) and their evaluation's
pure parts (mxnet_ssp/lab/reproduce/server_eval.py), without MXNet."""
import numpy as np
import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.lab.reproduce.server_eval import extend_to_end, merge_servers
from mxnet_ssp.server.snapshots import (ServerSnapshots, SnapshotClock, read_snapshots,
                                    snapshots_from_env)


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class Bucket:
    def __init__(self, members):
        self.members = members


def test_clock_lists_every_point_passed_since_the_last_update():
    clock = SnapshotClock(0.25)
    assert clock.passed(10.0) == []                 # the first update sets the origin
    assert clock.passed(10.1) == []
    assert clock.passed(10.3) == [10.25]
    assert clock.passed(10.45) == []
    # a long pause (every worker held): each point passed stands for the same weights
    assert clock.passed(11.05) == pytest.approx([10.5, 10.75, 11.0])
    assert clock.passed(11.25) == pytest.approx([11.25])


def test_clock_refuses_a_period_that_is_not_positive():
    with pytest.raises(ValueError, match='snapshot period'):
        SnapshotClock(0)


def test_copies_are_the_weights_before_the_update_and_split_buckets(tmp_path):
    now = FakeClock()
    snaps = ServerSnapshots(0.5, str(tmp_path), '0', clock=now)
    weights = {0: np.zeros(3, np.float32), 7: np.arange(6, dtype=np.float32)}
    buckets = {7: Bucket([(1, 0, 2, (2,)), (2, 2, 3, (3,))])}      # + one flag after payload
    snaps.before_update(weights, buckets)            # origin
    weights[0] += 1
    now.t = 100.6
    snaps.before_update(weights, buckets)            # passes 100.5: copies the weights now
    weights[0] += 1                                  # the update after the copy
    now.t = 101.7
    snaps.before_update(weights, buckets)            # passes 101.0 and 101.5
    snaps.close()
    got = read_snapshots(str(tmp_path / 'server-0-snapshots.jsonl'))
    assert [t for t, _ in got] == pytest.approx([100.5, 101.0, 101.5])
    assert got[0][1][0].tolist() == [1, 1, 1]
    assert got[1][1][0].tolist() == [2, 2, 2] and got[2][1][0].tolist() == [2, 2, 2]
    assert got[0][1][1].tolist() == [0, 1] and got[0][1][2].tolist() == [2, 3, 4]
    assert 7 not in got[0][1]


def test_a_truncated_data_file_ends_the_list(tmp_path):
    now = FakeClock()
    snaps = ServerSnapshots(0.5, str(tmp_path), '0', clock=now)
    weights = {0: np.ones(4, np.float32)}
    for t in (100.0, 100.6, 101.1):
        now.t = t
        snaps.before_update(weights, {})
    snaps.close()
    data = tmp_path / 'server-0-snapshots.bin'
    data.write_bytes(data.read_bytes()[:-4])
    assert len(read_snapshots(str(tmp_path / 'server-0-snapshots.jsonl'))) == 1


def test_setting_is_checked_and_off_by_default(tmp_path):
    assert snapshots_from_env(str(tmp_path), '0', environ={}) is None
    assert snapshots_from_env(str(tmp_path), '0',
                              environ={cfg.ENV_SERVER_SNAPSHOTS: '0.25'}) is not None
    with pytest.raises(cfg.ConfigError, match='MXNET_SSP_SERVER_SNAPSHOTS.*0.01 to 3600'):
        cfg.check_setting(cfg.ENV_SERVER_SNAPSHOTS, 'fast')
    with pytest.raises(cfg.ConfigError):
        cfg.check_setting(cfg.ENV_SERVER_SNAPSHOTS, '0.001')


def test_merge_takes_each_other_servers_latest_copy():
    a = [(1.0, {0: 'a1'}), (2.0, {0: 'a2'})]
    b = [(0.9, {1: 'b1'}), (1.9, {1: 'b2'}), (2.5, {1: 'b3'})]
    assert merge_servers([a, b]) == [(1.0, {0: 'a1', 1: 'b1'}), (2.0, {0: 'a2', 1: 'b2'})]


def test_the_final_accuracy_holds_after_the_last_update():
    points = extend_to_end([(0.5, 0.2), (0.75, 0.4)], 0.25, 1.3, 0.5)
    assert points == [(0.5, 0.2), (0.75, 0.4), (1.0, 0.5), (1.25, 0.5)]
