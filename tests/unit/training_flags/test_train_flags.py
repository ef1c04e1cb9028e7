"""The training script's flag rules, row by row (mxnet_ssp.lab.training_flags.CHECKS).

Every row of CHECKS has here at least one bad command line, which that very row must
refuse (it is the first to fail) with a message naming the flag and the value, and good
command lines, which every row accepts.  Values sit on the boundary of what is accepted
(``--batch-size 0`` refused, ``1`` accepted), so that a rule made looser or stricter by
one fails a test.  A row added to CHECKS without cases here fails
test_every_row_has_cases.  No MXNet, no job: the checks only read flags and a
dict standing for the worker's environment.
"""
import math

import pytest

from mxnet_ssp.lab import training_flags as options
from mxnet_ssp.lab.training_flags import rules
from mxnet_ssp.lab.training_flags import CHECKS, build_parser, find_problem, parse_args
from mxnet_ssp.lab.cluster_model.profiles import SCENARIOS
from mxnet_ssp.core import names

W4 = {'DMLC_ROLE': 'worker', 'DMLC_NUM_WORKER': '4'}      # a worker of a 4-worker job
W2 = dict(W4, DMLC_NUM_WORKER='2')
W8 = dict(W4, DMLC_NUM_WORKER='8')
LOCAL = {}                                                 # no job: --kvstore local only
NO_WRAP = dict(W4, MXNET_SSP_WRAP_ASYNC='0')
EL2 = dict(W4, MXNET_SSP_ELASTIC='2')                      # elastic, at least 2 workers


def balance_env(least):
    return dict(W4, MXNET_SSP_BALANCE_MIN=str(least))


def case(bad, good, words=()):
    """Bad and good command lines of one row; an entry is 'argv' or ('argv', environ).

    `argv` is split on spaces ('--flag=' gives an empty value); ``{tmp}`` stands for a
    scratch directory.  `words` must be in the refusal too (beyond the row's flag).
    """
    def norm(entries):
        return [e if isinstance(e, tuple) else (e, W4) for e in entries]
    return {'bad': norm(bad), 'good': norm(good), 'words': tuple(words)}


DA = '--kvstore dist_async '
TEACHER = '--dataset teacher '
SASGD = DA + '--optimizer sasgd '
DCASGD = DA + '--optimizer dcasgd_pw '

#: row id (see row_id) -> its cases
CASES = {
    '_check_model': case(['--model resnet9000', '--model resnet18'],
                         ['--model mlp', '--model resnet20', '--model alexnet-small'],
                         ['--model']),
    'Value --dataset': case(['--dataset mnist'], ['--dataset ' + d for d in names.DATASETS]),
    'Value --teacher-scale': case([TEACHER + '--teacher-scale 0', TEACHER + '--teacher-scale=-1',
                                   TEACHER + '--teacher-scale nan',
                                   TEACHER + '--teacher-scale inf'],
                                  [TEACHER + '--teacher-scale 1e-9',
                                   TEACHER + '--teacher-scale 8']),
    'Value --teacher-noise': case([TEACHER + '--teacher-noise 1.01',
                                   TEACHER + '--teacher-noise=-1e-9',
                                   TEACHER + '--teacher-noise nan'],
                                  [TEACHER + '--teacher-noise 0', TEACHER + '--teacher-noise 1']),
    'Value --teacher-dim': case([TEACHER + '--teacher-dim 0', TEACHER + '--teacher-dim=-16'],
                                [TEACHER + '--teacher-dim 1', TEACHER + '--teacher-dim 16']),
    'Value --teacher-hidden': case([TEACHER + '--teacher-hidden 0',
                                    TEACHER + '--teacher-hidden=-1'],
                                   [TEACHER + '--teacher-hidden 1',
                                    TEACHER + '--teacher-hidden 16']),
    'Value --teacher-train-size': case([TEACHER + '--teacher-train-size 0',
                                        TEACHER + '--teacher-train-size=-200000'],
                                       [TEACHER + '--teacher-train-size 1',
                                        TEACHER + '--teacher-train-size 200000']),
    '_check_teacher_knobs': case(['--dataset mnist5k --teacher-scale 4', '--teacher-noise 0.1',
                                  '--dataset mnist5k --teacher-dim 16',
                                  '--teacher-hidden 16', '--dataset digits --teacher-train-size 1'],
                                 [TEACHER + '--teacher-scale 4 --teacher-noise 0.1',
                                  TEACHER + '--teacher-dim 16 --teacher-hidden 16 '
                                  '--teacher-train-size 200000',
                                  '--dataset mnist5k --teacher-scale 2', '--dataset mnist5k',
                                  '--dataset mnist5k --teacher-dim 64 --teacher-hidden 64 '
                                  '--teacher-train-size 20000'],
                                 ['--dataset teacher']),
    'Value --kvstore': case(['--kvstore dist_fast', '--kvstore dist'],
                            ['--kvstore ' + k for k in options.KVSTORES]),
    'Value --optimizer': case(['--optimizer adam'],
                              [DA + '--optimizer ' + o for o in options.OPTIMIZERS]),
    'Value --mode': case(['--mode eager'], ['--mode hybrid', '--mode imperative']),
    'Value --batch-size': case(['--batch-size 0'], ['--batch-size 1']),
    'Value --num-epochs': case(['--num-epochs 0'], ['--num-epochs 1']),
    'Value --num-gpus': case(['--num-gpus -1'], ['--num-gpus 0']),
    'Value --num-data-workers': case(['-j -1'], ['-j 0']),
    'Value --save-period': case(['--save-period -1'], ['--save-period 0']),
    'Value --snapshot-every': case(['--snapshot-every 0.01', '--snapshot-every -1',
                                    '--snapshot-every 3601', '--snapshot-every nan'],
                                   ['--snapshot-every 0', '--snapshot-every 0.05',
                                    '--snapshot-every 3600']),
    'Value --log-interval': case(['--log-interval -1'], ['--log-interval 0']),
    'Value --lr-decay-period': case(['--lr-decay-period -1'], ['--lr-decay-period 0']),
    'Value --num-iterations': case(['--num-iterations 0'], ['--num-iterations 1']),
    'Value --seed': case(['--seed -1', '--seed %d' % 2 ** 32],
                         ['--seed 0', '--seed %d' % (2 ** 32 - 1)]),
    'Value --lr': case(['--lr 0', '--lr nan', '--lr inf'], ['--lr 1e-9', '--lr 5']),
    'Value --momentum': case(['--momentum 1', '--momentum=-1e-9', '--momentum nan'],
                             ['--momentum 0', '--momentum 0.999']),
    'Value --wd': case(['--wd=-1e-9', '--wd inf', '--wd nan'], ['--wd 0']),
    'Value --drop-rate': case(['--drop-rate 1', '--drop-rate=-1e-9', '--drop-rate nan'],
                              ['--drop-rate 0', '--drop-rate 0.5']),
    'Value --lr-decay': case(['--lr-decay 0', '--lr-decay nan', '--lr-decay inf'],
                             ['--lr-decay 1e-9', '--lr-decay 2']),
    'Parsed --lr-decay-epoch': case(['--lr-decay-epoch 200,x', '--lr-decay-epoch 250,200',
                                     '--lr-decay-epoch 0'],
                                    ['--lr-decay-epoch=', '--lr-decay-epoch 1',
                                     '--lr-decay-epoch 200,250'],
                                    ['increasing epochs >= 1']),
    '_check_one_decay_schedule': case(['--lr-decay-period 10 --lr-decay-epoch 20'],
                                      ['--lr-decay-period 10', '--lr-decay-epoch 20'],
                                      ['--lr-decay-period', '--lr-decay-epoch']),
    '_check_job': case([('--kvstore dist_sync', LOCAL), ('--kvstore dist_async', {'X': '1'})],
                       [('--kvstore local', LOCAL), ('--kvstore dist_sync', W4)],
                       ['--kvstore', 'DMLC_ROLE']),
    'Only --staleness': case(['--kvstore dist_async --staleness 3',
                              '--kvstore dist_sync --staleness 3',
                              ('--kvstore local --staleness 3', LOCAL)],
                             ['--kvstore dist_ssp --staleness 3',
                              '--kvstore dist_dssp --staleness 3'],
                             ['dist_ssp or dist_dssp']),
    '_check_staleness': case(['--kvstore dist_ssp --staleness 3,15',
                              '--kvstore dist_dssp --staleness 15,3'],
                             ['--kvstore dist_dssp --staleness 3,15',
                              '--kvstore dist_ssp --staleness 0'],
                             ['--staleness']),
    'Only --dssp-mode': case(['--kvstore dist_ssp --dssp-mode paper'],
                             ['--kvstore dist_dssp --dssp-mode paper'], ['dist_dssp']),
    'Value --dssp-mode': case(['--kvstore dist_dssp --dssp-mode eager'],
                              ['--kvstore dist_dssp --dssp-mode ' + m
                               for m in names.DSSP_MODES]),
    'Only --splits': case(['--kvstore dist_async --splits 2'],
                          ['--kvstore dist_softsync --splits 2'], ['dist_softsync']),
    '_check_splits': case(['--kvstore dist_softsync --splits 5',
                           '--kvstore dist_softsync --splits 0',
                           ('--kvstore dist_softsync --splits 3', W2)],
                          ['--kvstore dist_softsync --splits 4',
                           '--kvstore dist_softsync --splits 1'],
                          ['--splits', '1 <= n <= ']),
    'Only --sync-average': case(['--kvstore dist_async --sync-average'],
                                ['--kvstore dist_sync --sync-average'], ['dist_sync']),
    # 4 workers x 32 samples = 128 in all; MXNET_SSP_BALANCE_MIN=33 leaves no split
    '_check_balance': case([('--balance', balance_env(33)),
                            ('--balance --num-gpus 2', balance_env(65))],
                           [('--balance', balance_env(32)), ('--balance', W4),
                            ('--balance --num-gpus 2', balance_env(64)),
                            ('--balance --num-gpus 0', balance_env(32))],
                           ['--balance', 'MXNET_SSP_BALANCE_MIN']),
    '_check_elastic': case([('--kvstore dist_sync', EL2),
                            ('--kvstore dist_ssp', dict(W4, MXNET_SSP_ELASTIC='5')),
                            ('--kvstore dist_ssp --balance', EL2),
                            ('--kvstore dist_async', dict(EL2, MXNET_SSP_WRAP_ASYNC='0'))],
                           [('--kvstore dist_ssp', EL2), ('--kvstore dist_softsync', EL2),
                            ('--kvstore dist_sync', W4),
                            ('--kvstore dist_async', dict(W4, MXNET_SSP_ELASTIC='off'))],
                           ['MXNET_SSP_ELASTIC']),
    '_check_rule_store': case(['--kvstore dist_sync --optimizer sasgd',
                               ('--kvstore local --optimizer dcasgd_pw', LOCAL),
                               ('--kvstore dist_async --optimizer sasgd', NO_WRAP)],
                              ['--kvstore %s --optimizer sasgd' % k
                               for k in options.STALENESS_KVSTORES] +
                              [('--kvstore dist_ssp --optimizer dcasgd_pw', NO_WRAP)],
                              ['--optimizer', 'staleness of every gradient']),
    'Only --staleness-lr': case([DA + '--optimizer dcasgd_pw --staleness-lr inverse'],
                                [SASGD + '--staleness-lr inverse'], ['--optimizer sasgd']),
    'Only --staleness-window': case([DA + '--optimizer sgd --staleness-window 4'],
                                    [SASGD + '--staleness-window 4'], ['--optimizer sasgd']),
    'Only --lamda': case([SASGD + '--lamda 0'], [DCASGD + '--lamda 0'], ['--optimizer dcasgd_pw']),
    'Only --adaptive': case([SASGD + '--adaptive'], [DCASGD + '--adaptive'],
                            ['--optimizer dcasgd_pw']),
    'Only --mean-square-decay': case([DA + '--optimizer nag --mean-square-decay 0.9'],
                                     [DCASGD + '--adaptive --mean-square-decay 0.9'],
                                     ['--optimizer dcasgd_pw']),
    'Only --adaptive-reading': case([SASGD + '--adaptive-reading paper'],
                                    [DCASGD + '--adaptive --adaptive-reading paper'],
                                    ['--optimizer dcasgd_pw']),
    'Value --staleness-lr': case([SASGD + '--staleness-lr square'],
                                 [SASGD + '--staleness-lr ' + p for p in options.STALENESS_LR]),
    'Value --staleness-window': case([SASGD + '--staleness-window 0'],
                                     [SASGD + '--staleness-window 1']),
    'Value --lamda': case([DCASGD + '--lamda=-1e-9', DCASGD + '--lamda nan'],
                          [DCASGD + '--lamda 0', DCASGD + '--adaptive --lamda 2']),
    'Only --adaptive-reading needs --adaptive': case(
        [DCASGD + '--adaptive-reading paper'],
        [DCASGD + '--adaptive --adaptive-reading multiverso'], ['--adaptive (DC-ASGD-a)']),
    'Value --adaptive-reading': case([DCASGD + '--adaptive --adaptive-reading x'],
                                     [DCASGD + '--adaptive --adaptive-reading paper']),
    'Only --mean-square-decay needs --adaptive': case(
        [DCASGD + '--mean-square-decay 0.9'],
        [DCASGD + '--adaptive --mean-square-decay 0.9'], ['--adaptive (DC-ASGD-a)']),
    'Value --mean-square-decay': case([DCASGD + '--adaptive --mean-square-decay 1',
                                       DCASGD + '--adaptive --mean-square-decay=-1e-9',
                                       DCASGD + '--adaptive --mean-square-decay nan'],
                                      [DCASGD + '--adaptive --mean-square-decay 0',
                                       DCASGD + '--adaptive --mean-square-decay 0.999']),
    'Parsed --slowdown': case([DA + '--slowdown 1:x', DA + '--slowdown 1:0.5',
                               DA + '--slowdown=-1:2', DA + '--slowdown 1:2,1:3'],
                              [DA + '--slowdown 1:1', DA + '--slowdown 0:2.5,3:4',
                               DA + '--slowdown='],
                              ['RANK:FACTOR']),
    '_check_slowdown_ranks': case([DA + '--slowdown 5:2,4:2',
                                   ('--kvstore local --slowdown 1:2', LOCAL),
                                   (DA + '--slowdown 2:2', W2)],
                                  [DA + '--slowdown 3:2',
                                   ('--kvstore local --slowdown 0:2', LOCAL)],
                                  ['--slowdown', 'worker(s)']),
    'Parsed --emulate': case([DA + '--emulate nowhere', DA + '--emulate workers=1,base_ms=5',
                              DA + '--emulate {tmp}/missing.json'],
                             [(DA + '--emulate mixed-2', W2), (DA + '--emulate jitter-8', W8),
                              (DA + '--emulate workers=4,base_ms=15,factors=1:1.3:1.8:3,'
                                    'jitter=10%', W4)]),
    '_check_emulate_alone': case([(DA + '--emulate mixed-2 --slowdown 1:2', W2)],
                                 [(DA + '--emulate mixed-2 --slowdown=', W2)],
                                 ['--emulate', '--slowdown']),
    '_check_emulate_workers': case([DA + '--emulate mixed-2', (DA + '--emulate jitter-8', W2)],
                                   [(DA + '--emulate mixed-2', W2),
                                    ('--kvstore local --emulate jitter-8', LOCAL)],
                                   ['--emulate', 'workers', 'launch it with -n']),
    'Parsed --save-dir': case(['--save-dir {tmp}/file', '--save-dir {tmp}/file/sub'],
                              ['--save-dir {tmp}', '--save-dir {tmp}/new/deeper'],
                              ['not a directory']),
    'Value --resume-from': case(['--resume-from {tmp}/model-epoch003.params'],
                                ['--resume-from {tmp}/model-epoch007.params']),
    'Parsed --resume-from': case(['--resume-from {tmp}/weights.params'],
                                 ['--resume-from {tmp}/model-epoch007.params',
                                  '--resume-from {tmp}/weights-final.params'],
                                 ['epoch<N>']),
}


#: row id -> the exact refusal of its first bad command line ({tmp}: the scratch directory)
MESSAGES = {
    '_check_model':
        ('--model resnet9000 names a CIFAR ResNet of depth 9000, but CIFAR ResNets have depth 6n '
         '+ 2 with n >= 1 (20, 32, 44, 50, 56, 110, ...); expected mlp, alexnet-small, resnet<D> '
         '/ cifar_resnet<D>_v1|v2 with D = 6n + 2 (e.g. resnet20, resnet50, resnet56, resnet110), '
         'or a GluonCV model zoo name'),
    'Value --dataset':
        ("--dataset 'mnist' is not valid: expected one of digits, mnist5k, teacher, cifar10, "
         "cifar100"),
    'Value --teacher-scale': '--teacher-scale 0.0 is not valid: expected a number > 0',
    'Value --teacher-noise': '--teacher-noise 1.01 is not valid: expected a number in [0, 1]',
    'Value --teacher-dim': '--teacher-dim 0 is not valid: expected an integer >= 1',
    'Value --teacher-hidden': '--teacher-hidden 0 is not valid: expected an integer >= 1',
    'Value --teacher-train-size': '--teacher-train-size 0 is not valid: expected an integer >= 1',
    '_check_teacher_knobs':
        '--teacher-scale 4.0 is only accepted with --dataset teacher, not with --dataset mnist5k',
    'Value --kvstore':
        ("--kvstore 'dist_fast' is not valid: expected one of local, dist_sync, dist_async, "
         "dist_ssp, dist_dssp, dist_softsync"),
    'Value --optimizer':
        "--optimizer 'adam' is not valid: expected one of sgd, nag, sasgd, dcasgd_pw",
    'Value --mode': "--mode 'eager' is not valid: expected one of hybrid, imperative",
    'Value --batch-size': '--batch-size 0 is not valid: expected an integer >= 1',
    'Value --num-epochs': '--num-epochs 0 is not valid: expected an integer >= 1',
    'Value --num-gpus': '--num-gpus -1 is not valid: expected an integer >= 0',
    'Value --num-data-workers': '--num-data-workers -1 is not valid: expected an integer >= 0',
    'Value --save-period': '--save-period -1 is not valid: expected an integer >= 0',
    'Value --snapshot-every':
        '--snapshot-every 0.01 is not valid: expected 0 (off) or seconds in [0.05, 3600]',
    'Value --log-interval': '--log-interval -1 is not valid: expected an integer >= 0',
    'Value --lr-decay-period': '--lr-decay-period -1 is not valid: expected an integer >= 0',
    'Value --num-iterations':
        '--num-iterations 0 is not valid: expected an integer >= 1 (or omit it)',
    'Value --seed': '--seed -1 is not valid: expected an integer in [0, 2**32)',
    'Value --lr': '--lr 0.0 is not valid: expected a number > 0',
    'Value --momentum': '--momentum 1.0 is not valid: expected a number in [0, 1)',
    'Value --wd': '--wd -1e-09 is not valid: expected a number >= 0',
    'Value --drop-rate': '--drop-rate 1.0 is not valid: expected a number in [0, 1)',
    'Value --lr-decay':
        ('--lr-decay 0.0 is not valid: expected a number > 0 (the learning rate is multiplied by '
         'it)'),
    'Parsed --lr-decay-epoch':
        ("--lr-decay-epoch '200,x' is not valid: 'x' is not an integer; expected increasing "
         "epochs >= 1, comma-separated (e.g. '200,250'), or '' for none"),
    '_check_one_decay_schedule':
        "--lr-decay-period 10 and --lr-decay-epoch '20' both say when to decay: give one of them",
    '_check_job':
        ('--kvstore dist_sync needs a parameter-server job (DMLC_ROLE is not set): run under '
         '"mxnet-ssp-launch -n N -s S --launcher local mxnet-ssp-train ...", or use --kvstore '
         'local'),
    'Only --staleness':
        ('--staleness is only accepted with --kvstore dist_ssp or dist_dssp, not with --kvstore '
         'dist_async'),
    '_check_staleness':
        "--staleness='3,15' is not valid for dist_ssp: expected one integer s >= 0 (e.g. '3')",
    'Only --dssp-mode':
        '--dssp-mode is only accepted with --kvstore dist_dssp, not with --kvstore dist_ssp',
    'Value --dssp-mode':
        "--dssp-mode 'eager' is not valid: expected one of bounded, paper, threshold",
    'Only --splits':
        '--splits is only accepted with --kvstore dist_softsync, not with --kvstore dist_async',
    '_check_splits':
        ("--splits='5' is not valid for dist_softsync: expected an integer n with 1 <= n <= 4 "
         "(the server applies one update per floor(4 / n) gradients)"),
    'Only --sync-average':
        '--sync-average is only accepted with --kvstore dist_sync, not with --kvstore dist_async',
    '_check_balance':
        ('--balance: batch bounds [33, 128] per worker (MXNET_SSP_BALANCE_MIN, '
         'MXNET_SSP_BALANCE_MAX) admit no split of 128 samples over 4 workers: expected 4 * min '
         '<= 128 <= 4 * max'),
    '_check_elastic':
        ('MXNET_SSP_ELASTIC=2 (elastic mode) needs --kvstore dist_async, dist_ssp, dist_dssp, '
         'dist_softsync, not --kvstore dist_sync'),
    '_check_rule_store':
        ('--optimizer sasgd needs a store that reports the staleness of every gradient: --kvstore '
         'dist_async, dist_ssp, dist_dssp, dist_softsync, not --kvstore dist_sync'),
    'Only --staleness-lr':
        '--staleness-lr is only accepted with --optimizer sasgd, not with --optimizer dcasgd_pw',
    'Only --staleness-window':
        '--staleness-window is only accepted with --optimizer sasgd, not with --optimizer sgd',
    'Only --lamda':
        '--lamda is only accepted with --optimizer dcasgd_pw, not with --optimizer sasgd',
    'Only --adaptive':
        '--adaptive is only accepted with --optimizer dcasgd_pw, not with --optimizer sasgd',
    'Only --mean-square-decay':
        ('--mean-square-decay is only accepted with --optimizer dcasgd_pw, not with --optimizer '
         'nag'),
    'Only --adaptive-reading':
        ('--adaptive-reading is only accepted with --optimizer dcasgd_pw, not with --optimizer '
         'sasgd'),
    'Value --staleness-lr':
        "--staleness-lr 'square' is not valid: expected one of inverse, average, none",
    'Value --staleness-window': '--staleness-window 0 is not valid: expected an integer >= 1',
    'Value --lamda': '--lamda -1e-09 is not valid: expected a number >= 0',
    'Only --adaptive-reading needs --adaptive':
        '--adaptive-reading is only accepted with --adaptive (DC-ASGD-a)',
    'Value --adaptive-reading':
        "--adaptive-reading 'x' is not valid: expected paper or multiverso",
    'Only --mean-square-decay needs --adaptive':
        '--mean-square-decay is only accepted with --adaptive (DC-ASGD-a)',
    'Value --mean-square-decay':
        '--mean-square-decay 1.0 is not valid: expected a number in [0, 1)',
    'Parsed --slowdown':
        ("--slowdown '1:x' is not valid: '1:x' is not RANK:FACTOR; expected "
         "RANK:FACTOR[,RANK:FACTOR] with integer ranks >= 0 and factors >= 1 (e.g. 1:2.5)"),
    '_check_slowdown_ranks':
        "--slowdown '5:2,4:2' names rank 4 but the job has 4 worker(s) (ranks 0..3)",
    'Parsed --emulate':
        ("--emulate 'nowhere' is not valid: emulated scenario 'nowhere' is not known: expected "
         "one of mixed-2, mixed-4, straggler-8, transient-8, jitter-8, transient-4, link-4, a spec "
         "such as "
         "workers=4,base_ms=15,factors=1:1.3:1.8:3,jitter=10% (keys: name, workers, base_ms, "
         "factors, jitter, episode_rate, episode_factor, episode_length, links, pin, "
         "run_iterations, description), or a .json or .toml file with those keys"),
    '_check_emulate_alone':
        ("--emulate and --slowdown are exclusive: the scenario mixed-2 sets every worker's "
         "compute time"),
    '_check_emulate_workers':
        '--emulate mixed-2 is for 2 workers but the job has 4 (launch it with -n 2)',
    'Parsed --save-dir':
        ("--save-dir '{tmp}/file' is not valid: {tmp}/file exists and is not a directory; "
         "expected a directory that can be created or written"),
    'Value --resume-from':
        ("--resume-from '{tmp}/model-epoch003.params' is not valid: expected an existing "
         "checkpoint file (<save-dir>/model-epoch<N>.params or model-final.params)"),
    'Parsed --resume-from':
        ("--resume-from '{tmp}/weights.params' is not valid: {tmp}/weights.params has no "
         "weights.json next to it and no epoch<N> in its name, so the epoch to go on from is "
         "unknown"),
}


def row_id(row):
    """'Value --lr', 'Only --splits', 'Only --mean-square-decay needs --adaptive', or the
    name of a check function."""
    kind = type(row).__name__
    if kind == 'Only' and row.needs == '--adaptive':
        return 'Only %s needs --adaptive' % row.flag
    if kind in ('Value', 'Parsed', 'Only'):
        return '%s %s' % (kind, row.flag)
    return row.__name__


def entries(which):
    return [pytest.param(name, index, argv, env, id='%s: %s' % (name, argv))
            for name, cases in CASES.items() for index, (argv, env) in enumerate(cases[which])]


@pytest.fixture
def scratch(tmp_path):
    """A directory with a file, a checkpoint that names its epoch, and one with its JSON."""
    (tmp_path / 'file').write_text('x')
    (tmp_path / 'model-epoch007.params').write_bytes(b'')
    (tmp_path / 'weights.params').write_bytes(b'')
    (tmp_path / 'weights-final.params').write_bytes(b'')
    (tmp_path / 'weights-final.json').write_text('{"completed_epochs": 9}')
    return tmp_path


def argv_of(text, tmp):
    argv = text.format(tmp=tmp).split(' ')
    if '--save-dir' not in argv:
        argv += ['--save-dir', str(tmp / 'out')]
    if not any(a.startswith('--kvstore') for a in argv):
        argv += ['--kvstore', 'dist_async']
    return argv


def test_every_row_has_cases():
    ids = [row_id(row) for row in CHECKS]
    assert len(set(ids)) == len(ids), 'two rows share an id: %s' % ids
    assert sorted(ids) == sorted(CASES) == sorted(MESSAGES)
    for name, cases in CASES.items():
        assert cases['bad'] and cases['good'], name


@pytest.mark.parametrize('name,index,text,env', entries('bad'))
def test_the_row_refuses_its_bad_value(name, index, text, env, scratch, capsys):
    argv = argv_of(text, scratch)
    args = build_parser().parse_args(argv)
    row, message = find_problem(args, env)
    assert row is not None, '%s was accepted' % argv
    assert row_id(row) == name, message
    if index == 0:
        assert message == MESSAGES[name].format(tmp=scratch)
    flag = getattr(row, 'flag', None)
    if flag is not None:
        assert flag in message
    for word in CASES[name]['words']:
        assert word in message
    if type(row).__name__ in ('Value', 'Parsed'):
        assert repr(getattr(args, rules._attr(flag))) in message
    if type(row).__name__ == 'Value':
        assert message.endswith('expected %s' % row.accepted)
    # validate_args reports it the argparse way: usage, the same message, status 2
    with pytest.raises(SystemExit) as info:
        parse_args(argv, env)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert 'usage:' in err and err.rstrip().endswith('error: ' + message)


@pytest.mark.parametrize('name,index,text,env', entries('good'))
def test_every_row_accepts_a_good_value(name, index, text, env, scratch):
    argv = argv_of(text, scratch)
    assert find_problem(build_parser().parse_args(argv), env) == (None, None)
    assert parse_args(argv, env).kvstore in options.KVSTORES


def test_value_rows_name_the_flag_and_the_value():
    args = build_parser().parse_args(['--kvstore', 'local', '--lr', '-1'])
    assert find_problem(args, LOCAL)[1] == "--lr -1.0 is not valid: expected a number > 0"
    args = build_parser().parse_args(['--kvstore', 'local', '--dataset', 'svhn'])
    assert find_problem(args, LOCAL)[1] == (
        "--dataset 'svhn' is not valid: expected one of digits, mnist5k, teacher, cifar10, "
        "cifar100")


def test_the_first_failing_row_is_reported():
    """Two bad flags: the row that comes first in CHECKS wins, whatever the argv order."""
    args = build_parser().parse_args(['--lr', '0', '--batch-size', '0', '--kvstore', 'local'])
    row, message = find_problem(args, LOCAL)
    assert row_id(row) == 'Value --batch-size' and '--lr' not in message


@pytest.mark.parametrize('text,env,attr,expected', [
    ('--model mlp', W4, 'model_kind', ('builtin', 'mlp')),
    ('--lr-decay-epoch 200,250', W4, 'lr_decay_epochs', [200, 250]),
    ('--lr-decay-epoch=', W4, 'lr_decay_epochs', []),
    ('--kvstore dist_softsync --splits 4', W4, 'splits', 4),
    ('--kvstore dist_softsync', W4, 'splits', None),
    ('--slowdown 1:2.5,3:4', W4, 'slowdown_factors', {1: 2.5, 3: 4.0}),
    ('--slowdown=', W4, 'slowdown_factors', {}),
    ('--emulate mixed-2', W2, 'scenario', SCENARIOS['mixed-2']),
    ('--kvstore dist_async', W4, 'scenario', None),
    ('--resume-from {tmp}/model-epoch007.params', W4, 'resume_info',
     {'completed_epochs': 7, 'iteration': 0, 'states': None}),
    ('--resume-from {tmp}/weights-final.params', W4, 'resume_info',
     {'completed_epochs': 9, 'iteration': 0}),
    ('--kvstore dist_async', W4, 'resume_info', None),
])
def test_rows_store_what_they_parsed(text, env, attr, expected, scratch):
    args = parse_args(argv_of(text, scratch), env)
    assert getattr(args, attr) == expected


@pytest.mark.parametrize('env,workers', [(W4, 4), (W2, 2), (dict(W4, DMLC_NUM_WORKER='x'), 1),
                                         (dict(W4, DMLC_NUM_WORKER='0'), 1),
                                         ({'DMLC_ROLE': 'worker'}, 1)])
def test_the_job_has_the_workers_of_dmlc_num_worker(env, workers, scratch):
    """--splits n is accepted exactly up to the number of workers config.num_workers reads."""
    ok = parse_args(argv_of('--kvstore dist_softsync --splits %d' % workers, scratch), env)
    assert ok.splits == workers
    args = build_parser().parse_args(argv_of('--kvstore dist_softsync --splits %d'
                                             % (workers + 1), scratch))
    assert row_id(find_problem(args, env)[0]) == '_check_splits'


def test_a_local_job_has_one_worker_whatever_dmlc_num_worker_says(scratch):
    args = build_parser().parse_args(argv_of('--kvstore local --slowdown 1:2', scratch))
    assert '1 worker(s)' in find_problem(args, W4)[1]


def test_the_numeric_rows_refuse_infinities():
    for row in CHECKS:
        if type(row).__name__ == 'Value' and row.flag in ('--lr', '--wd', '--lr-decay',
                                                          '--momentum', '--drop-rate'):
            assert not row.ok(math.inf) and not row.ok(-math.inf) and not row.ok(math.nan)


def test_mxnets_own_dist_async_is_named_as_the_reason(scratch):
    args = build_parser().parse_args(argv_of('--optimizer sasgd', scratch))
    assert find_problem(args, NO_WRAP)[1] == (
        "--optimizer sasgd needs a store that reports the staleness of every gradient: "
        "--kvstore dist_ssp, dist_dssp, dist_softsync, not --kvstore dist_async "
        "(MXNET_SSP_WRAP_ASYNC=0 keeps MXNet's own dist_async, which does not)")
