"""The GPU flags' pure logic (mxnet_ssp/launch/gpus.py): ``--gpu-map`` parsing, the plan
checked against an injected GPU count, each worker's environment, the one-line summary and
``count_gpus`` with ``subprocess.run`` replaced (no process starts here).  The launcher's
real jobs and the real count are in tests/integration/test_launch_gpus.py."""
import subprocess
import sys

import pytest

from conftest import fake_gpu_counter
from mxnet_ssp import config
from mxnet_ssp.launch import gpus
from mxnet_ssp.launch import LaunchError, count_gpus, parse_gpu_map, plan_gpus, worker_gpu_env
from mxnet_ssp.launch.gpus import describe

FORM = "WORKER:GPU[+GPU...] items, comma-separated, one per worker (e.g. '0:0,1:1' or " \
       "'0:0+1,1:2+3')"


# ---------------------------------------------------------------------------
# parse_gpu_map
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('text, workers, expected', [
    ('0:0,1:1', 2, {0: (0,), 1: (1,)}),
    ('1:0, 0:1', 2, {0: (1,), 1: (0,)}),
    ('0:0+1,1:2+3', 2, {0: (0, 1), 1: (2, 3)}),
    ('0:3', 1, {0: (3,)}),
    # every accepted form, edge by edge
    (' 0:0 ,\t1:1\n', 2, {0: (0,), 1: (1,)}),             # blanks around items
    ('0:2+0+1', 1, {0: (2, 0, 1)}),                       # a worker's GPUs in the given order
    ('0:10,1:11', 2, {0: (10,), 1: (11,)}),               # ids of several digits
    ('00:07,01:010', 2, {0: (7,), 1: (10,)}),             # decimal, leading zeros dropped
    ('2:0,0:1,1:2', 3, {0: (1,), 1: (2,), 2: (0,)}),      # workers in any order
    ('0:0,1:1,2:2,3:3', 4, {0: (0,), 1: (1,), 2: (2,), 3: (3,)}),
])
def test_parse_gpu_map(text, workers, expected):
    assert parse_gpu_map(text, workers) == expected


def test_parse_gpu_map_gives_integers():
    mapping = parse_gpu_map('0:1+2,1:0', 2)
    assert all(type(w) is int and type(g) is int for w, gs in mapping.items() for g in gs)
    assert all(type(gs) is tuple for gs in mapping.values())


@pytest.mark.parametrize('text, words', [
    ('0=0,1:1', ["'0=0' is not WORKER:GPU", 'WORKER:GPU[+GPU...]']),
    ('0:a,1:1', ["'0:a' is not WORKER:GPU"]),
    ('', ["'' is not WORKER:GPU"]),
    ('0:0,2:1', ['worker 2 is not in the job (-n 2: workers 0..1)']),
    ('0:0,0:1', ['worker 0 is given twice']),
    ('0:0', ['no GPU for worker 1']),
    ('0:0,1:0', ['GPU 0 is given to workers 0 and 1', 'its own GPUs']),
    ('0:1+1,1:0', ['GPU 1 is given to worker 0 twice']),
])
def test_parse_gpu_map_rejects(text, words):
    with pytest.raises(LaunchError) as info:
        parse_gpu_map(text, 2)
    message = str(info.value)
    assert message.startswith('--gpu-map %r is not valid' % text)
    assert all(w in message for w in words), message


@pytest.mark.parametrize('text, item', [
    ('0:0,1:1,', ''),               # a trailing comma: an empty item
    (',0:0,1:1', ''),
    ('0:0,,1:1', ''),
    ('0:0, ', ' '),                 # the item as given (blanks kept) in the message
    ('0 : 0,1:1', '0 : 0'),         # no blanks inside an item
    ('0:0 + 1,1:2', '0:0 + 1'),
    ('0:0 1,1:2', '0:0 1'),         # GPUs are joined by + only
    ('0:0;1:1', '0:0;1:1'),         # items are separated by commas only
    ('0:0 1:1', '0:0 1:1'),
    ('0:,1:1', '0:'),               # no GPU
    (':0,1:1', ':0'),               # no worker
    ('0:0+,1:1', '0:0+'),           # a dangling +
    ('0:+1,1:2', '0:+1'),
    ('0:0++1,1:2', '0:0++1'),
    ('-1:0,1:1', '-1:0'),           # no signs
    ('0:-1,1:1', '0:-1'),
    ('0:+1,1:1', '0:+1'),
    ('0:1.0,1:2', '0:1.0'),
    ('0:0:1,1:2', '0:0:1'),
    ('0:0,1', '1'),
    ('w0:0,1:1', 'w0:0'),
    ('0:gpu0,1:1', '0:gpu0'),
])
def test_parse_gpu_map_rejects_every_other_syntax_naming_the_item(text, item):
    with pytest.raises(LaunchError) as info:
        parse_gpu_map(text, 2)
    assert str(info.value) == '--gpu-map %r is not valid: %r is not WORKER:GPU; expected %s' \
        % (text, item, FORM)


def test_parse_gpu_map_names_the_flag_with_the_text_of_a_non_string():
    with pytest.raises(LaunchError) as info:
        parse_gpu_map(5, 1)
    assert str(info.value) == "--gpu-map 5 is not valid: '5' is not WORKER:GPU; expected %s" \
        % FORM


@pytest.mark.parametrize('text, workers, message', [
    # the highest worker of the job is in, the next one is not
    ('0:0,1:1,2:2', 3, None),
    ('0:0,1:1,3:2', 3, 'worker 3 is not in the job (-n 3: workers 0..2)'),
    ('0:0', 1, None),
    ('1:0', 1, 'worker 1 is not in the job (-n 1: workers 0..0)'),
    ('0:0,1:1,9:2', 2, 'worker 9 is not in the job (-n 2: workers 0..1)'),
    ('0:0', 0, 'worker 0 is not in the job (-n 0: workers 0..-1)'),
])
def test_parse_gpu_map_workers_at_the_edge_of_the_job(text, workers, message):
    if message is None:
        assert sorted(parse_gpu_map(text, workers)) == list(range(workers))
        return
    with pytest.raises(LaunchError) as info:
        parse_gpu_map(text, workers)
    assert str(info.value) == '--gpu-map %r is not valid: %s' % (text, message)


@pytest.mark.parametrize('text, workers, message', [
    ('0:0', 3, 'no GPU for worker 1, 2; expected ' + FORM),
    ('1:0', 3, 'no GPU for worker 0, 2; expected ' + FORM),
    ('0:0,2:1', 4, 'no GPU for worker 1, 3; expected ' + FORM),
    ('0:0,1:1,0:2', 2, 'worker 0 is given twice'),
    ('1:0,0:1,1:2', 2, 'worker 1 is given twice'),
    # the lower worker is named first, whatever the order of the items
    ('1:0,0:0', 2, 'GPU 0 is given to workers 0 and 1; each worker needs its own GPUs'),
    ('0:0,1:1,2:1', 3, 'GPU 1 is given to workers 1 and 2; each worker needs its own GPUs'),
    ('0:0+2,1:1,2:2', 3, 'GPU 2 is given to workers 0 and 2; each worker needs its own GPUs'),
    ('0:0,1:3+1+3', 2, 'GPU 3 is given to worker 1 twice; each worker needs its own GPUs'),
])
def test_parse_gpu_map_rejection_messages(text, workers, message):
    with pytest.raises(LaunchError) as info:
        parse_gpu_map(text, workers)
    assert str(info.value) == '--gpu-map %r is not valid: %s' % (text, message)


# ---------------------------------------------------------------------------
# plan_gpus
# ---------------------------------------------------------------------------
def test_plan_gpus_counts_once_with_the_launchers_environment():
    counter = fake_gpu_counter(4)
    env = {'PATH': '/bin'}
    assert plan_gpus(2, None, 2, env, counter) == {0: (0, 1), 1: (2, 3)}
    assert plan_gpus(None, '0:3,1:0', 2, env, counter) == {0: (3,), 1: (0,)}
    assert counter.asked == [env, env]
    assert plan_gpus(None, None, 2, env, counter) is None     # no flag: no GPUs, no count
    assert len(counter.asked) == 2


@pytest.mark.parametrize('per_worker, workers, count, expected', [
    (1, 1, 1, {0: (0,)}),
    (1, 3, 3, {0: (0,), 1: (1,), 2: (2,)}),                   # exactly as many as seen
    (3, 2, 6, {0: (0, 1, 2), 1: (3, 4, 5)}),
    (2, 2, 9, {0: (0, 1), 1: (2, 3)}),                        # more seen than needed
])
def test_plan_gpus_per_worker_gives_consecutive_blocks(per_worker, workers, count, expected):
    assert plan_gpus(per_worker, None, workers, {}, fake_gpu_counter(count)) == expected


@pytest.mark.parametrize('per_worker, gpu_map, count, env, words', [
    (1, None, 0, {}, ['--gpus-per-worker 1 needs GPUs, but MXNet sees none here',
                      'mx.context.num_gpus() is 0']),
    (None, '0:0,1:1', 0, {'CUDA_VISIBLE_DEVICES': ''},
     ["--gpu-map '0:0,1:1' needs GPUs", "CUDA_VISIBLE_DEVICES=''"]),
    (1, None, 1, {}, ['--gpus-per-worker 1 gives worker 1 GPU 1', 'MXNet sees 1 GPU(s) here',
                      'ids 0..0']),
    (2, None, 3, {}, ['--gpus-per-worker 2 gives worker 1 GPU 3', 'sees 3 GPU(s)']),
    (None, '0:0,1:2', 2, {}, ["--gpu-map '0:0,1:2' gives worker 1 GPU 2", 'ids 0..1']),
    # a fake count above what CUDA_VISIBLE_DEVICES lists: the list bounds the ids
    (None, '0:0,1:1', 8, {'CUDA_VISIBLE_DEVICES': '6'},
     ['gives worker 1 GPU 1', 'sees 1 GPU(s)', "CUDA_VISIBLE_DEVICES='6'"]),
    (0, None, 2, {}, ['--gpus-per-worker 0 is not valid', '>= 1']),
    (1, '0:0,1:1', 2, {}, ['--gpus-per-worker and --gpu-map are exclusive']),
])
def test_plan_gpus_rejects(per_worker, gpu_map, count, env, words):
    with pytest.raises(LaunchError) as info:
        plan_gpus(per_worker, gpu_map, 2, env, fake_gpu_counter(count))
    assert all(w in str(info.value) for w in words), str(info.value)


@pytest.mark.parametrize('per_worker, gpu_map, message', [
    (0, None, '--gpus-per-worker 0 is not valid: expected an integer >= 1 (for CPU workers '
              'leave it out)'),
    (-1, None, '--gpus-per-worker -1 is not valid: expected an integer >= 1 (for CPU workers '
               'leave it out)'),
    (1, '0:0,1:1', '--gpus-per-worker and --gpu-map are exclusive: give one of them'),
    (None, '0:0', "--gpu-map '0:0' is not valid: no GPU for worker 1; expected " + FORM),
])
def test_plan_gpus_refuses_bad_flags_before_counting(per_worker, gpu_map, message):
    counter = fake_gpu_counter(8)
    with pytest.raises(LaunchError) as info:
        plan_gpus(per_worker, gpu_map, 2, {}, counter)
    assert str(info.value) == message
    assert counter.asked == []


@pytest.mark.parametrize('per_worker, gpu_map, env, message', [
    (1, None, {}, '--gpus-per-worker 1 needs GPUs, but MXNet sees none here: '
                  'mx.context.num_gpus() is 0 (a CPU build of mxnet, no CUDA driver, or no '
                  'visible device)'),
    (None, '0:0,1:1', {'CUDA_VISIBLE_DEVICES': '3'},
     "--gpu-map '0:0,1:1' needs GPUs, but MXNet sees none here (with "
     "CUDA_VISIBLE_DEVICES='3' in this environment): mx.context.num_gpus() is 0 (a CPU build "
     "of mxnet, no CUDA driver, or no visible device)"),
])
def test_plan_gpus_with_no_gpu_seen(per_worker, gpu_map, env, message):
    with pytest.raises(LaunchError) as info:
        plan_gpus(per_worker, gpu_map, 2, env, fake_gpu_counter(0))
    assert str(info.value) == message


@pytest.mark.parametrize('per_worker, gpu_map, workers, count, env, message', [
    # one GPU short of --gpus-per-worker 2 for 2 workers (4 needed)
    (2, None, 2, 3, {}, '--gpus-per-worker 2 gives worker 1 GPU 3, but MXNet sees 3 GPU(s) '
                        'here: ids 0..2'),
    # the lowest worker past the count is named, with its highest GPU
    (None, '0:0,1:3,2:4', 3, 2, {},
     "--gpu-map '0:0,1:3,2:4' gives worker 1 GPU 3, but MXNet sees 2 GPU(s) here: ids 0..1"),
    (None, '0:0+3,1:1', 2, 2, {},
     "--gpu-map '0:0+3,1:1' gives worker 0 GPU 3, but MXNet sees 2 GPU(s) here: ids 0..1"),
    (None, '1:5,0:1', 2, 2, {},
     "--gpu-map '1:5,0:1' gives worker 1 GPU 5, but MXNet sees 2 GPU(s) here: ids 0..1"),
    # CUDA_VISIBLE_DEVICES lists fewer devices than the count: the list bounds the ids
    (2, None, 2, 8, {'CUDA_VISIBLE_DEVICES': '4,5,6'},
     "--gpus-per-worker 2 gives worker 1 GPU 3, but MXNet sees 3 GPU(s) here (with "
     "CUDA_VISIBLE_DEVICES='4,5,6' in this environment): ids 0..2"),
    # and the count bounds them when it is the smaller
    (2, None, 2, 3, {'CUDA_VISIBLE_DEVICES': '4,5,6,7'},
     "--gpus-per-worker 2 gives worker 1 GPU 3, but MXNet sees 3 GPU(s) here (with "
     "CUDA_VISIBLE_DEVICES='4,5,6,7' in this environment): ids 0..2"),
])
def test_plan_gpus_refuses_gpus_beyond_those_seen(per_worker, gpu_map, workers, count, env,
                                                  message):
    with pytest.raises(LaunchError) as info:
        plan_gpus(per_worker, gpu_map, workers, env, fake_gpu_counter(count))
    assert str(info.value) == message


@pytest.mark.parametrize('per_worker, gpu_map, count, env, expected', [
    (2, None, 4, {}, {0: (0, 1), 1: (2, 3)}),                  # the highest id is count - 1
    (None, '0:1,1:0', 2, {}, {0: (1,), 1: (0,)}),
    (2, None, 8, {'CUDA_VISIBLE_DEVICES': '4,5,6,7'}, {0: (0, 1), 1: (2, 3)}),
    (None, '0:0,1:1', 2, {'CUDA_VISIBLE_DEVICES': 'GPU-a,GPU-b'}, {0: (0,), 1: (1,)}),
])
def test_plan_gpus_accepts_exactly_the_gpus_seen(per_worker, gpu_map, count, env, expected):
    assert plan_gpus(per_worker, gpu_map, 2, env, fake_gpu_counter(count)) == expected


def test_plan_gpus_counts_with_count_gpus_by_default(monkeypatch):
    asked = []
    monkeypatch.setattr(gpus, 'count_gpus', lambda environ: asked.append(environ) or 2)
    env = {'CUDA_VISIBLE_DEVICES': '0,1'}
    assert plan_gpus(1, None, 2, env) == {0: (0,), 1: (1,)}
    assert asked == [env]


# ---------------------------------------------------------------------------
# each worker's environment and the summary line
# ---------------------------------------------------------------------------
def test_worker_gpu_env():
    assert worker_gpu_env((2, 3), {}) == {'CUDA_VISIBLE_DEVICES': '2,3', 'MXNET_SSP_GPUS': '0,1'}
    assert worker_gpu_env((1,), {}) == {'CUDA_VISIBLE_DEVICES': '1', 'MXNET_SSP_GPUS': '0'}
    # the launcher's own CUDA_VISIBLE_DEVICES: id g is its g-th entry (UUIDs too)
    env = {'CUDA_VISIBLE_DEVICES': '5, 7,GPU-8f2a'}
    assert worker_gpu_env((2,), env) == {'CUDA_VISIBLE_DEVICES': 'GPU-8f2a',
                                         'MXNET_SSP_GPUS': '0'}
    assert worker_gpu_env((1, 0), env)['CUDA_VISIBLE_DEVICES'] == '7,5'


@pytest.mark.parametrize('gpu_ids, env, expected', [
    ((0,), {}, ('0', '0')),
    ((3, 1, 2), {}, ('3,1,2', '0,1,2')),                      # MXNet's numbers: 0 .. k-1
    ((10, 11), {}, ('10,11', '0,1')),
    ((0,), {'CUDA_VISIBLE_DEVICES': '4,5'}, ('4', '0')),      # the first entry
    ((1,), {'CUDA_VISIBLE_DEVICES': '4,5'}, ('5', '0')),      # the last entry
    ((1, 0), {'CUDA_VISIBLE_DEVICES': ' 4 , 5 '}, ('5,4', '0,1')),
    ((0,), {'CUDA_VISIBLE_DEVICES': '7'}, ('7', '0')),
    ((), {}, ('', '')),
])
def test_worker_gpu_env_edges(gpu_ids, env, expected):
    assert worker_gpu_env(gpu_ids, env) == {'CUDA_VISIBLE_DEVICES': expected[0],
                                            'MXNET_SSP_GPUS': expected[1]}


def test_gpu_env_names_the_variables_the_flags_set():
    assert gpus.GPU_ENV == ('CUDA_VISIBLE_DEVICES', 'MXNET_SSP_GPUS')


@pytest.mark.parametrize('mapping, env, expected', [
    ({1: (0,), 0: (1,)}, {}, 'worker 0 -> GPU 1, worker 1 -> GPU 0'),      # sorted by worker
    ({0: (0, 1), 1: (2, 3)}, {}, 'worker 0 -> GPU 0,1, worker 1 -> GPU 2,3'),
    ({0: (1, 0)}, {'CUDA_VISIBLE_DEVICES': '6,7'}, 'worker 0 -> GPU 7,6'),
    ({}, {}, ''),
])
def test_describe(mapping, env, expected):
    assert describe(mapping, env) == expected


# ---------------------------------------------------------------------------
# count_gpus, with subprocess.run replaced: no process starts
# ---------------------------------------------------------------------------
CODE = 'import mxnet; print(mxnet.context.num_gpus())'


class FakeRun:
    """Stands for subprocess.run: records its call, answers or raises what it is given."""

    def __init__(self, stdout='', stderr='', returncode=0, raises=None):
        self.answer = (stdout, stderr, returncode)
        self.raises = raises
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        if self.raises is not None:
            raise self.raises
        stdout, stderr, returncode = self.answer
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)


@pytest.fixture
def fake_run(monkeypatch):
    def install(**kwargs):
        run = FakeRun(**kwargs)
        monkeypatch.setattr(gpus.subprocess, 'run', run)
        return run
    return install


def test_count_gpus_asks_mxnet_in_a_child_with_the_given_environment(fake_run):
    run = fake_run(stdout='2\n')
    env = {'CUDA_VISIBLE_DEVICES': '0,1', 'PATH': '/bin'}
    assert count_gpus(env) == 2
    (argv, kwargs), = run.calls
    assert argv == [sys.executable, '-c', CODE]
    assert kwargs == {'env': env, 'stdin': subprocess.DEVNULL, 'capture_output': True,
                      'text': True, 'timeout': 120.0, 'check': False}
    assert kwargs['env'] is not env                           # a copy of the mapping
    count_gpus(env, python='/opt/py/bin/python3', timeout=7)
    assert run.calls[1][0][0] == '/opt/py/bin/python3' and run.calls[1][1]['timeout'] == 7


@pytest.mark.parametrize('stdout, expected', [
    ('0\n', 0),
    ('8', 8),
    ('  3  \n\n', 3),
    ('[12:00:00] src/base.cc: a warning from mxnet\n4\n', 4),    # the last line counts
])
def test_count_gpus_reads_the_last_line(fake_run, stdout, expected):
    fake_run(stdout=stdout)
    assert count_gpus({}) == expected


@pytest.mark.parametrize('stdout, stderr, rc, tail', [
    ('', 'Traceback ...\nModuleNotFoundError: No module named mxnet\n', 1,
     "exited 1): ModuleNotFoundError: No module named mxnet"),
    ('2\n', 'killed\n', -9, 'exited -9): killed'),                # a count, but a failure
    ('', '', 0, 'exited 0): no output'),
    ('two\n', '', 0, 'exited 0): no output'),
    ('-1\n', 'odd\n', 0, 'exited 0): odd'),
    ('2\nbye\n', '', 0, 'exited 0): no output'),
])
def test_count_gpus_failures_are_launch_errors(fake_run, stdout, stderr, rc, tail):
    fake_run(stdout=stdout, stderr=stderr, returncode=rc)
    with pytest.raises(LaunchError) as info:
        count_gpus({}, python='py')
    assert str(info.value) == 'cannot count the GPUs MXNet sees (py -c %r %s' % (CODE, tail)


@pytest.mark.parametrize('error', [
    FileNotFoundError(2, 'No such file or directory'),
    subprocess.TimeoutExpired(['py'], 120.0),
])
def test_count_gpus_that_cannot_run_or_hangs_is_a_launch_error(fake_run, error):
    fake_run(raises=error)
    with pytest.raises(LaunchError) as info:
        count_gpus({}, python='py')
    assert str(info.value) == 'cannot count the GPUs MXNet sees (py -c %r): %s' % (CODE, error)
    assert info.value.__cause__ is None and info.value.__suppress_context__


# ---------------------------------------------------------------------------
# the worker's side: MXNET_SSP_GPUS and the training loop's choice
# ---------------------------------------------------------------------------
def test_config_parse_gpus():
    assert config.parse_gpus(' 0, 2 ') == (0, 2) and config.parse_gpus('') == ()
    assert config.worker_gpus({}) == () and config.worker_gpus({'MXNET_SSP_GPUS': '1'}) == (1,)
    for bad in ('x', '0,0', '-1', '0;1'):
        with pytest.raises(config.ConfigError, match="MXNET_SSP_GPUS=%r is not valid" % bad):
            config.parse_gpus(bad)


def test_choose_gpus():
    from mxnet_ssp.lab.training_flags import choose_gpus
    assert choose_gpus(0, {}, visible=0) == []
    assert choose_gpus(2, {}, visible=2) == [0, 1]
    env = {'MXNET_SSP_GPUS': '0,1'}
    assert choose_gpus(0, env, visible=2) == [0, 1]
    assert choose_gpus(2, env, visible=2) == [0, 1]
    with pytest.raises(ValueError, match=r"--num-gpus 1 is not valid with MXNET_SSP_GPUS='0,1' "
                                         r'\(set by the launcher\): this worker has 2 GPU\(s\)'):
        choose_gpus(1, env, visible=2)
    with pytest.raises(ValueError, match=r"MXNET_SSP_GPUS='0,1' is not valid here: MXNet sees 1 "
                                         r"GPU\(s\) in this worker \(CUDA_VISIBLE_DEVICES='3'\)"):
        choose_gpus(0, dict(env, CUDA_VISIBLE_DEVICES='3'), visible=1)
    with pytest.raises(ValueError, match='--num-gpus 3 is not valid: this MXNet build sees 2'):
        choose_gpus(3, {}, visible=2)
    with pytest.raises(ValueError, match="MXNET_SSP_GPUS='a' is not valid"):
        choose_gpus(0, {'MXNET_SSP_GPUS': 'a'}, visible=2)
