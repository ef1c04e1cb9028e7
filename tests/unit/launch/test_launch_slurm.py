"""--launcher slurm's checks and placement, without Slurm (the jobs under a real Slurm are in
tests/testbed/test_testbed_slurm.py)."""
import pytest

from mxnet_ssp.launch import cli, slurm
from mxnet_ssp.launch.settings import LaunchError


@pytest.mark.parametrize('text, counts', [('1', [1]), ('3,1', [3, 1]),
                                          ('2(x3),1', [2, 2, 2, 1]), ('4(x2)', [4, 4])])
def test_tasks_per_node_is_expanded(text, counts):
    assert slurm.parse_tasks_per_node(text) == counts


@pytest.mark.parametrize('text', ['', '2(x)', 'two', '2,,1', '(x2)'])
def test_a_malformed_tasks_per_node_is_refused_naming_it(text):
    with pytest.raises(LaunchError, match=r"SLURM_TASKS_PER_NODE='.*' is not valid: expected "
                                          r'counts like 2\(x3\),1'):
        slurm.parse_tasks_per_node(text)


def allocation(*slots):
    return slurm.Allocation('42', [slurm.Node('n%d' % i, '10.0.0.%d' % (i + 1), s)
                                   for i, s in enumerate(slots)])


def test_servers_then_workers_take_the_slots_node_by_node_in_turns():
    placed = slurm.place(allocation(3, 1, 2), 2, 4)
    assert [(role, i, node.name) for role, i, node in placed] == [
        ('server', 0, 'n0'), ('server', 1, 'n1'), ('worker', 0, 'n2'),
        ('worker', 1, 'n0'), ('worker', 2, 'n2'), ('worker', 3, 'n0')]


def test_more_processes_than_slots_is_refused_in_one_line_before_anything_starts():
    with pytest.raises(LaunchError) as err:
        slurm.place(allocation(2, 2), 2, 3)
    assert str(err.value) == (
        '-s 2 and -n 3 need 5 task slots but the allocation (job 42: 2 nodes (n0,n1), 2 task '
        'slots per node) has 4: ask sbatch or salloc for --ntasks=5 (or more nodes), or start '
        'fewer processes')


def test_outside_an_allocation_the_launcher_says_how_to_run_it(monkeypatch, capsys):
    monkeypatch.delenv('SLURM_JOB_ID', raising=False)
    monkeypatch.setattr(cli, 'Supervisor', None)
    assert cli.main(['-n', '1', '--launcher', 'slurm', 'true']) == 2
    err = capsys.readouterr().err
    assert ('error: --launcher slurm runs inside a Slurm allocation: SLURM_JOB_ID is not set; '
            'run it in an sbatch script or under salloc' in err), err


def test_the_plan_gives_each_process_its_node_address_and_an_srun_step():
    args = cli.build_parser().parse_args(['-n', '2', '-s', '1', '--launcher', 'slurm',
                                          'python', 'train.py'])
    job = cli.check_job(args, {'PATH': '/usr/bin', 'SLURMD_NODENAME': 'n1',
                               'SLURM_JOB_ID': '42'})
    plan = slurm.plan_slurm(job, allocation(1, 2))
    scheduler, *others = plan.specs
    assert scheduler.env['DMLC_PS_ROOT_URI'] == '10.0.0.2'      # the node it runs on
    got = [(s.role, s.index, s.host, s.env['DMLC_NODE_HOST'], s.env['DMLC_JOB_CLUSTER'],
            s.argv[:5], s.argv[-2:]) for s in others]
    step = ['srun', '--overlap', '--nodes=1', '--ntasks=1']
    assert got == [
        ('server', 0, 'n0', '10.0.0.1', 'slurm', step + ['--nodelist=n0'], ['python', 'train.py']),
        ('worker', 0, 'n1', '10.0.0.2', 'slurm', step + ['--nodelist=n1'], ['python', 'train.py']),
        ('worker', 1, 'n1', '10.0.0.2', 'slurm', step + ['--nodelist=n1'], ['python', 'train.py'])]
    assert [s.env['MXNET_SSP_LAUNCH_INDEX'] for s in others] == ['0', '0', '1']
    assert others[1].describe(77) == 'worker #0 (launch index) on n1 (local srun pid 77)'


def test_srun_exit_codes_of_killed_tasks_are_explained():
    spec = slurm.Spec('worker', 0, ['srun'], host='n1', via='srun')
    assert slurm_describe(137, spec) == ("exited with code 137 (srun's code for its task "
                                         'killed by signal SIGKILL)')


def slurm_describe(rc, spec):
    from mxnet_ssp.launch.supervisor import describe_exit
    return describe_exit(rc, spec)
