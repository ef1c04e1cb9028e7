"""The pilot's rate check (mxnet_ssp.lab.reproduce.rate_check): one process, no parameter
server; its data are the lab's, normalized as the lab's loader does, and its curves learn."""
import json

import numpy as np
import pytest

from mxnet_ssp.lab.reproduce import rate_check
from mxnet_ssp.lab.training_flags.generated_knobs import load_options


def test_the_data_are_the_lab_s_normalized_per_channel():
    x_train, y_train, x_test, y_test, classes = rate_check.load_arrays(
        'teacher', {'train_size': 3000, 'test_size': 500, 'scale': 1.0})
    assert x_train.shape == (3000, 1, 8, 8) and x_test.shape == (500, 1, 8, 8)
    assert classes == 10 and set(np.unique(y_train)) <= set(range(10))
    assert abs(float(x_train.mean())) < 1e-3 and abs(float(x_train.std()) - 1.0) < 1e-2
    # the knobs as the command line gives them (strings), through load_options
    options = load_options('teacher', {'dim': '16', 'hidden': '16', 'train_size': '2000'})
    x_train, _, x_test, _, _ = rate_check.load_arrays('teacher', options)
    assert x_train.shape == (2000, 1, 4, 4) and x_test.shape[1:] == (1, 4, 4)


def test_a_curve_learns_and_is_read_at_every_step(tmp_path):
    arrays = rate_check.load_arrays('teacher', {'train_size': 4000, 'test_size': 1000,
                                                'scale': 0.5})
    curve, seconds = rate_check.rate_curve(arrays, 'mlp', 0.01, 300, 100)
    assert [it for it, _ in curve] == [100, 200, 300] and seconds > 0
    # scale 0.5 is nearly linear: 300 batches get well past chance (0.10)
    assert curve[-1][1] > 0.5
    out = tmp_path / 'r.json'
    assert rate_check.main(['--teacher-scale', '0.5',
                            '--lrs', '0.01', '--iterations', '20', '--every', '10',
                            '--json', str(out)]) == 0
    assert [it for it, _ in json.loads(out.read_text())['curves']['0.01']] == [10, 20]


@pytest.mark.parametrize('argv,message', [
    (['--lrs', '0.01,-1'], "--lrs '0.01,-1' is not valid"),
    (['--iterations', '0'], '--iterations 0 is not valid'),
    (['--dataset', 'digits', '--teacher-scale', '2'], 'only accepted with --dataset teacher'),
])
def test_bad_options_are_refused_naming_them(capsys, argv, message):
    with pytest.raises(SystemExit):
        rate_check.main(argv)
    assert message in capsys.readouterr().err
