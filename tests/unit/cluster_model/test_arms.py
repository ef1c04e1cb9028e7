"""The paradigms a lab, the demo and the advisor compare (mxnet_ssp.lab.cluster_model.arms): the
names parse_arm accepts, their canonical names, labels and train_cifar.py flags, and the
simulator's policy of each (sim_policy)."""
import pytest

from mxnet_ssp.lab.cluster_model.arms import parse_arm, sim_policy


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


# -- every field of every form, the messages, flags and labels (the mutation run's survivors)

from mxnet_ssp.lab.cluster_model.arms import Arm  # noqa: E402


@pytest.mark.parametrize('name,arm', [
    ('bsp', Arm('bsp', 'bsp', 'dist_sync')),
    ('asp', Arm('asp', 'asp', 'dist_async')),
    ('  Asp-LrTau ', Arm('asp-lrtau', 'asp', 'dist_async', rule='lrtau')),
    ('ssp03', Arm('ssp3', 'ssp', 'dist_ssp', (3,))),
    ('ssp0', Arm('ssp0', 'ssp', 'dist_ssp', (0,))),
    ('dssp', Arm('dssp', 'dssp', 'dist_dssp', (3, 15), 'bounded')),
    ('dssp3-15', Arm('dssp', 'dssp', 'dist_dssp', (3, 15), 'bounded')),
    ('dssp3-15-paper', Arm('dssp-paper', 'dssp', 'dist_dssp', (3, 15), 'paper')),
    ('dssp2-10', Arm('dssp2-10', 'dssp', 'dist_dssp', (2, 10), 'bounded')),
    ('dssp4-4', Arm('dssp4-4', 'dssp', 'dist_dssp', (4, 4), 'bounded')),
    ('dssp02-010-threshold', Arm('dssp2-10-threshold', 'dssp', 'dist_dssp', (2, 10),
                                 'threshold')),
    ('dssp3-16', Arm('dssp3-16', 'dssp', 'dist_dssp', (3, 16), 'bounded')),
    ('dssp2-15', Arm('dssp2-15', 'dssp', 'dist_dssp', (2, 15), 'bounded')),
    ('bsp-balance', Arm('bsp-balance', 'bsp', 'dist_sync', balance=True)),
    (' SSP3-Balance', Arm('ssp3-balance', 'ssp', 'dist_ssp', (3,), balance=True)),
    ('dssp-paper-balance', Arm('dssp-paper-balance', 'dssp', 'dist_dssp', (3, 15), 'paper',
                               balance=True)),
    ('asp-lrtau-balance', Arm('asp-lrtau-balance', 'asp', 'dist_async', rule='lrtau',
                              balance=True)),
])
def test_parse_arm_fields(name, arm):
    assert parse_arm(name) == arm


@pytest.mark.parametrize('name,message', [
    ('hogwild', "'hogwild' is not a paradigm"),
    ('ssp', "'ssp' is not a paradigm"),
    ('-balance', "'-balance' is not a paradigm"),
    ('balance', "'balance' is not a paradigm"),
    ('xbsp', "'xbsp' is not a paradigm"),
    ('bspx', "'bspx' is not a paradigm"),
    ('dssp3-15-fast', "'dssp3-15-fast' is not a paradigm"),
    ('dssp15-3', "'dssp15-3' has sL 15 > sU 3"),
    ('DSSP4-3-paper', "'DSSP4-3-paper' has sL 4 > sU 3"),
    ('bsp-balance-balance', "'bsp-balance-balance' names -balance twice"),
    # the message names the value as given, also behind -balance (it named '' and 'dssp15-3')
    ('hogwild-balance', "'hogwild-balance' is not a paradigm"),
    (' DSSP15-3-Balance', "' DSSP15-3-Balance' has sL 15 > sU 3"),
])
def test_parse_arm_messages(name, message):
    with pytest.raises(ValueError) as err:
        parse_arm(name)
    assert str(err.value) == message


@pytest.mark.parametrize('name,label', [
    ('bsp', 'BSP'), ('asp', 'ASP'), ('asp-lrtau', 'ASP lr/tau'), ('ssp0', 'SSP s=0'),
    ('ssp15', 'SSP s=15'), ('dssp', 'DSSP [3,15]'), ('dssp2-10', 'DSSP [2,10]'),
    ('dssp2-10-paper', 'DSSP [2,10] paper'), ('bsp-balance', 'BSP + balance'),
    ('ssp3-balance', 'SSP s=3 + balance'), ('dssp-threshold-balance',
                                            'DSSP [3,15] threshold + balance'),
    ('asp-lrtau-balance', 'ASP lr/tau + balance'),
])
def test_labels(name, label):
    assert parse_arm(name).label == label


@pytest.mark.parametrize('name,average,flags', [
    ('bsp', True, ['--kvstore', 'dist_sync', '--sync-average']),
    ('bsp', False, ['--kvstore', 'dist_sync']),
    ('asp', False, ['--kvstore', 'dist_async']),
    ('ssp3', False, ['--kvstore', 'dist_ssp', '--staleness', '3']),
    ('ssp12', True, ['--kvstore', 'dist_ssp', '--staleness', '12']),
    ('dssp2-10-paper', True, ['--kvstore', 'dist_dssp', '--staleness', '2,10', '--dssp-mode',
                              'paper']),
    ('asp-lrtau', True, ['--kvstore', 'dist_async', '--optimizer', 'sasgd', '--staleness-lr',
                         'inverse']),
    ('bsp-balance', True, ['--kvstore', 'dist_sync', '--sync-average', '--balance']),
    ('bsp-balance', False, ['--kvstore', 'dist_sync', '--balance']),
    ('ssp3-balance', True, ['--kvstore', 'dist_ssp', '--staleness', '3', '--balance']),
    ('asp-lrtau-balance', True, ['--kvstore', 'dist_async', '--optimizer', 'sasgd',
                                 '--staleness-lr', 'inverse', '--balance']),
])
def test_train_flags(name, average, flags):
    assert parse_arm(name).train_flags(bsp_average=average) == flags


def test_train_flags_average_bsp_by_default():
    assert parse_arm('bsp').train_flags() == ['--kvstore', 'dist_sync', '--sync-average']


@pytest.mark.parametrize('name,policy', [
    ('ssp0', 'ssp:0'), ('ssp15', 'ssp:15'), ('dssp-paper', 'dssp:3:15:paper'),
    ('dssp2-10', 'dssp:2:10:bounded'), ('bsp-balance', 'ssp:0'), ('asp-balance', 'asp'),
    ('dssp4-9-threshold-balance', 'dssp:4:9:threshold'),
])
def test_sim_policy_more(name, policy):
    assert sim_policy(parse_arm(name)) == policy
