"""The paradigms a lab, the demo and the advisor compare (mxnet_ssp.cluster_model.arms): the
names parse_arm accepts, their canonical names, labels and train_cifar.py flags, and the
simulator's policy of each (sim_policy)."""
import pytest

from mxnet_ssp.cluster_model.arms import parse_arm, sim_policy


@pytest.mark.parametrize('name,canonical,label,flags', [
    ('bsp', 'bsp', 'BSP', ['--kvstore', 'dist_sync', '--sync-average']),
    ('ASP', 'asp', 'ASP', ['--kvstore', 'dist_async']),
    ('ssp3', 'ssp3', 'SSP s=3', ['--kvstore', 'dist_ssp', '--staleness', '3']),
    ('dssp', 'dssp', 'DSSP [3,15]',
     ['--kvstore', 'dist_dssp', '--staleness', '3,15', '--dssp-mode', 'bounded']),
    ('dssp3-15-bounded', 'dssp', 'DSSP [3,15]', None),
    ('dssp-paper', 'dssp-paper', 'DSSP [3,15] paper',
     ['--kvstore', 'dist_dssp', '--staleness', '3,15', '--dssp-mode', 'paper']),
    ('dssp2-10-paper', 'dssp2-10-paper', 'DSSP [2,10] paper', None),
    ('dssp-threshold', 'dssp-threshold', 'DSSP [3,15] threshold',
     ['--kvstore', 'dist_dssp', '--staleness', '3,15', '--dssp-mode', 'threshold']),
    ('DSSP2-10-Threshold', 'dssp2-10-threshold', 'DSSP [2,10] threshold', None),
])
def test_parse_arm(name, canonical, label, flags):
    arm = parse_arm(name)
    assert arm.name == canonical and arm.label == label
    if flags is not None:
        assert arm.train_flags() == flags
    assert parse_arm(arm.name) == arm


@pytest.mark.parametrize('name', ['hogwild', 'ssp', 'ssp-3', 'dssp15-3', 'dssp3', 'dssp-fast'])
def test_parse_arm_rejects(name):
    with pytest.raises(ValueError):
        parse_arm(name)


@pytest.mark.parametrize('name,policy', [
    ('bsp', 'ssp:0'), ('asp', 'asp'), ('asp-lrtau', 'asp'), ('ssp6', 'ssp:6'),
    ('dssp', 'dssp:3:15:bounded'), ('dssp2-10-threshold', 'dssp:2:10:threshold'),
    ('ssp3-balance', 'ssp:3')])
def test_sim_policy(name, policy):
    assert sim_policy(parse_arm(name)) == policy
