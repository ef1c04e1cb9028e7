"""mxnet_ssp.lab.testbed.place and on_host: where a lab job's processes run on the emulated
cluster and how each one moves there (pure; nothing is brought up, nothing is executed)."""
import pytest

from mxnet_ssp.lab.testbed import on_host, place

LINK_4 = (10 ** 9,) * 3 + (10 ** 8,)


def test_the_scheduler_and_servers_share_host0_and_each_worker_has_its_own_host():
    assert [place.host_of('scheduler', 0), place.host_of('server', 0),
            place.host_of('server', 1)] == [0, 0, 0]
    assert [place.host_of('worker', i) for i in range(4)] == [1, 2, 3, 4]
    for role, index in (('client', 0), ('worker', -1), ('worker', '1')):
        with pytest.raises(ValueError):
            place.host_of(role, index)


def test_ps_lite_numbers_the_workers_by_their_addresses_descending_as_strings():
    # 4 workers on host1 .. host4 (198.18.0.2 .. .5): host4's worker gets rank 0
    assert [place.rank_of_host(h, 4) for h in (1, 2, 3, 4)] == [3, 2, 1, 0]
    # as strings: 198.18.0.9 > 198.18.0.11 > 198.18.0.10 > 198.18.0.2
    assert [place.rank_of_host(h, 10) for h in range(1, 11)] == [7, 6, 5, 4, 3, 2, 1, 0, 9, 8]
    for host in (0, 5):
        with pytest.raises(ValueError):
            place.rank_of_host(host, 4)


def test_host0_gets_the_fastest_link_and_each_worker_host_the_rate_of_its_rank():
    assert place.host_rates(LINK_4) == [10 ** 10, 10 ** 8, 10 ** 9, 10 ** 9, 10 ** 9]
    assert place.host_rates((1, 2, 3)) == [10 ** 10, 3, 2, 1]
    plan = place.testbed_plan('lab-', LINK_4)
    assert [(h.name, h.address, h.namespace, h.rate) for h in plan.hosts] == [
        ('host0', '198.18.0.1', 'lab-h0', 10 ** 10), ('host1', '198.18.0.2', 'lab-h1', 10 ** 8),
        ('host2', '198.18.0.3', 'lab-h2', 10 ** 9), ('host3', '198.18.0.4', 'lab-h3', 10 ** 9),
        ('host4', '198.18.0.5', 'lab-h4', 10 ** 9)]
    with pytest.raises(ValueError):
        place.host_rates(())


def test_the_placement_names_every_process_its_host_address_and_link():
    places = place.placement('lab-', LINK_4, servers=2)
    assert [p['process'] for p in places] == ['scheduler', 'server 0', 'server 1', 'worker 0',
                                              'worker 1', 'worker 2', 'worker 3']
    # workers by rank: rank 3 (the scenario's worker 3) is worker #0, on host1
    assert places[-1] == {'process': 'worker 3', 'host': 'host1', 'address': '198.18.0.2',
                          'namespace': 'lab-h1', 'rate': '100mbit', 'launch_index': 0}
    assert [p.get('launch_index') for p in places] == [None, None, None, 3, 2, 1, 0]
    assert place.describe(places) == (
        'scheduler, server 0, server 1 on host0 (198.18.0.1, 10gbit); worker 0 on host4 '
        '(198.18.0.5, 1gbit); worker 1 on host3 (198.18.0.4, 1gbit); worker 2 on host2 '
        '(198.18.0.3, 1gbit); worker 3 on host1 (198.18.0.2, 100mbit)')


def test_each_process_finds_the_scheduler_on_host0_and_binds_its_own_address():
    assert place.process_env('lab-', 'worker', 3) == (
        'lab-h4', 'host4', {'DMLC_PS_ROOT_URI': '198.18.0.1', 'DMLC_NODE_HOST': '198.18.0.5'})
    assert place.process_env('lab-', 'scheduler', 0) == (
        'lab-h0', 'host0', {'DMLC_PS_ROOT_URI': '198.18.0.1', 'DMLC_NODE_HOST': '198.18.0.1'})


def test_on_host_moves_the_process_into_its_namespace_with_its_addresses(capsys):
    calls = []
    environ = {'DMLC_ROLE': 'worker', 'MXNET_SSP_LAUNCH_INDEX': '2', 'DMLC_PS_ROOT_URI':
               '127.0.0.1', 'DMLC_NODE_HOST': '127.0.0.1', 'KEEP': 'x'}
    rc = on_host.main(['--prefix', 'lab-', '--', 'python', '-c', 'pass'], environ,
                      lambda *a: calls.append(a))
    assert rc == 127 and len(calls) == 1            # a real execvpe does not return
    program, argv, env = calls[0]
    assert (program, argv) == ('ip', ['ip', 'netns', 'exec', 'lab-h3', 'python', '-c', 'pass'])
    assert (env['DMLC_PS_ROOT_URI'], env['DMLC_NODE_HOST'], env['KEEP']) == (
        '198.18.0.1', '198.18.0.4', 'x')
    assert capsys.readouterr().err == (
        'testbed: worker #2 on host3 (198.18.0.4, namespace lab-h3)\n')


@pytest.mark.parametrize('argv,environ,words', [
    (['--prefix', 'lab-', '--', 'true'], {}, "DMLC_ROLE=None"),
    (['--prefix', 'lab-', '--', 'true'], {'DMLC_ROLE': 'worker'},
     "MXNET_SSP_LAUNCH_INDEX=None: accepted: a process of a job started by mxnet_ssp.launch"),
    (['--prefix', 'Lab', '--', 'true'], {'DMLC_ROLE': 'scheduler'}, "--prefix 'Lab' is not"),
    (['--prefix', 'lab-'], {'DMLC_ROLE': 'scheduler'}, 'command: none given'),
])
def test_on_host_refuses_with_one_line_and_exit_2(argv, environ, words, capsys):
    calls = []
    assert on_host.main(argv, environ, lambda *a: calls.append(a)) == 2
    err = capsys.readouterr().err
    assert not calls and err.startswith('python -m mxnet_ssp.lab.testbed.on_host: ') and words in err
    assert err.count('\n') == 1
