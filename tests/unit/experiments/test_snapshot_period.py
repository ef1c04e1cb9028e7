"""Worker 0's fixed-time copies (--snapshot-every) and the servers' snapshots: which period
a written time belongs to."""
import pytest

from mxnet_ssp.server.snapshots import period_number


@pytest.mark.parametrize('elapsed, every, expected', [
    (0.0, 0.2, 0), (0.1999, 0.2, 0), (0.2, 0.2, 1), (0.3999, 0.2, 1), (0.4, 0.2, 2),
    (0.6, 0.2, 3), (0.5999, 0.2, 2), (1.4, 0.2, 7), (0.75, 0.25, 3), (0.7499, 0.25, 2)])
def test_a_written_time_counts_in_the_period_it_names(elapsed, every, expected):
    # 0.6 / 0.2 is 2.999...96 in floats: int() would put 0.6 in period 2 and, with the copy
    # taken at 0.45, give two copies in one period (the race seen in CI on 7657bec)
    assert period_number(elapsed, every) == expected


def test_every_written_time_on_a_fine_grid_is_in_its_own_decimal_period():
    for k in range(1, 3000):
        t = round(k * 0.2, 4)
        assert period_number(t, 0.2) == k
        assert period_number(round(t - 0.0001, 4), 0.2) == k - 1
