"""benchmarks.bucket_copies on a small model: each way copies every gradient into its bucket
and every weight out (the job checks the bits), and the table lists the three ways."""
from benchmarks import bucket_copies


def test_every_way_copies_the_bits_and_is_reported(capsys):
    results = bucket_copies.main(['--model', 'cifar_resnet20_v1', '--reps', '2',
                                  '--trials', '2'])
    assert sorted(results) == sorted(bucket_copies.WAYS)
    assert all(len(v) == 2 and all(len(t) == 3 and min(t) >= 0 for t in v)
               for v in results.values())
    out = capsys.readouterr().out
    assert out.startswith('cifar_resnet20_v1: 65 arrays in ')
    rows = [line.split(' | ')[0] for line in out.splitlines() if line.startswith('| ')]
    assert rows == ['| copies', '| mxnet', '| package', '| numpy-all']


def test_the_numpy_all_way_is_undone_after_it():
    from mxnet_ssp.worker import packer
    with bucket_copies._way('numpy-all'):
        assert packer._HOST_OUT_MAX_NDIM > 5
    assert packer._HOST_OUT_MAX_NDIM == 1
    with bucket_copies._way('package'):
        assert packer._HOST_OUT_MAX_NDIM == 1
