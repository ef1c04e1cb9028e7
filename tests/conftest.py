"""Shared helpers for tests that start real MXNet jobs on loopback."""
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What tests use but do not collect: the oracles, the log and archive writers, and jobs/.
SUPPORT = os.path.join(ROOT, 'tests', 'support')
JOBS = os.path.join(SUPPORT, 'jobs')
# ``import oracle_sync`` (and the other support modules) from any test folder
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)


# ---------------------------------------------------------------------------
# What a test needs from this machine: skipped without it, failed under CI
# ---------------------------------------------------------------------------
#: The README's install of everything tests/ imports (the package, MXNet and the [test] extra).
INSTALL_TEST = 'python -m pip install ".[test]"'
#: sshd, ssh and ssh-keygen for the launcher's ssh tests (.ci/run installs them).
INSTALL_SSH = 'apt-get install openssh-server openssh-client'
#: mpirun (Open MPI) for the launcher's mpi tests (.ci/run installs it).
INSTALL_MPI = 'apt-get install openmpi-bin'


def in_ci(environ=None):
    """Whether this is a CI run: the environment variable CI is 'true' or '1' (any case)."""
    value = (os.environ if environ is None else environ).get('CI', '')
    return value.strip().lower() in ('true', '1')


def need(what, install):
    """Stop the calling test: `what` is missing here and the command `install` installs it.

    Under CI (``in_ci()``) the test FAILS, since there a missing tool means the CI set-up
    is wrong and a skip would hide that the test never ran; anywhere else it is SKIPPED.
    Both messages name what is missing and the command.  Call it in a test, in a fixture
    (the test then errors under CI), or at module level: there, under CI, the module's
    collection errors, and a collection error stops pytest before it runs any test, so
    prefer ``@pytest.mark.need`` (also as a module's ``pytestmark``) where the module
    itself is not needed to import the test file.
    """
    message = '%s is missing; to install it: %s' % (what, install)
    if in_ci():
        pytest.fail('%s (CI=%s: a test that cannot run fails in CI instead of being skipped)'
                    % (message, os.environ.get('CI')), pytrace=False)
    pytest.skip(message, allow_module_level=True)


def need_module(name, install=INSTALL_TEST):
    """Import and return module `name`, or `need` it (like pytest.importorskip)."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        why = str(err)
    need('the Python module %s (%s: %s)' % (name, sys.executable, why), install)


def need_program(name, install):
    """The path of program `name` (a name looked up on PATH, or a path), or `need` it."""
    path = shutil.which(name)
    if path is None:
        need('the program %s (not %s)' % (name, 'executable' if os.sep in name
                                          else 'on PATH'), install)
    return path


def _dist_given(config):
    """Whether --dist was given on the command line or in PYTEST_ADDOPTS."""
    words = list(config.invocation_params.args) + os.environ.get('PYTEST_ADDOPTS', '').split()
    return any(str(w).startswith('--dist') for w in words)


#: One directory for the whole run (shared by pytest-xdist's processes, which inherit the
#: environment): the test jobs' MXNET_SSP_OP_CODE_CACHE, so that each MXNet process of the run
#: after the first few makes MXNet's operator functions from the kept code (about 1 s of CPU each)
OP_CODE_DIR_ENV = 'TESTS_MXNET_OP_CODE_DIR'
#: what the test jobs' start-up code reads (tests/support/startup/sitecustomize.py, on the
#: jobs' PYTHONPATH): test speed only, not a setting of the package
OP_CODE_CACHE_ENV = 'TESTS_MXNET_OP_CODE_CACHE'
STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'support', 'startup')


def pytest_configure(config):
    if not hasattr(config, 'workerinput') and not os.environ.get(OP_CODE_DIR_ENV):
        os.environ[OP_CODE_DIR_ENV] = tempfile.mkdtemp(prefix='mxnet-ssp-tests-op-code-')
        config._mxnet_ssp_op_code_dir = os.environ[OP_CODE_DIR_ENV]
    # pytest-xdist's worksteal (an idle process takes tests queued for a busy one; the run was
    # 11 min against 15.6 with its default, load) unless --dist was given; set here, not in
    # pytest.ini's addopts, so that `-p no:xdist` still runs
    if getattr(config.option, 'dist', None) == 'load' and not _dist_given(config):
        config.option.dist = 'worksteal'
    config.addinivalue_line(
        'markers', 'need(program=None, module=None, install=...): the test needs the program '
        '(on PATH) or the Python module (found, not imported); without it the test is '
        'skipped, and fails under CI=true (see tests/conftest.py need)')


def pytest_unconfigure(config):
    made = getattr(config, '_mxnet_ssp_op_code_dir', None)
    if made:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(OP_CODE_DIR_ENV, None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """``@pytest.mark.need(program=..., module=..., install=...)``: `need` before the test."""
    for mark in item.iter_markers(name='need'):
        unknown = set(mark.kwargs) - {'program', 'module', 'install'}
        if mark.args or unknown or 'install' not in mark.kwargs:
            raise TypeError('pytest.mark.need takes program= and/or module=, and install=; '
                            'got %r %r' % (mark.args, mark.kwargs))
        install = mark.kwargs['install']
        if mark.kwargs.get('program'):
            need_program(mark.kwargs['program'], install)
        module = mark.kwargs.get('module')
        if module and importlib.util.find_spec(module) is None:
            need('the Python module %s (%s)' % (module, sys.executable), install)


def job_env(tmp_path, **extra):
    """Environment for a job: this checkout first on the path, metrics into tmp_path."""
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([ROOT, STARTUP] + ([env['PYTHONPATH']]
                                                          if env.get('PYTHONPATH') else []))
    env['MXNET_SSP_METRICS_DIR'] = str(tmp_path / 'metrics')
    env['OMP_NUM_THREADS'] = '1'
    env.setdefault('MXNET_SSP_TIMEOUT', '60')
    # a failed job's scheduler and servers end 4 s after a connection closed for good, not
    # the default 10 (test_faults.py keeps the default); start-up reconnects take milliseconds
    env.setdefault('MXNET_SSP_FOLLOW_GRACE', '4')
    # workers import MXNet without its optional scikit-learn and SciPy imports, as servers do
    # (about 1 s of CPU per worker; the test run is bound by CPU): the store's code is the
    # same either way; the tests of the stock import (test_hooks, test_import_order_and_
    # autoload) and the README's demo keep them
    env.setdefault('MXNET_SSP_LEAN_WORKERS', '1')
    # and take MXNet's compiled operator functions from the run's directory (the functions
    # are MXNet's own: tests/unit/test_op_code_cache.py; STARTUP's sitecustomize loads them)
    if os.environ.get(OP_CODE_DIR_ENV):
        env.setdefault(OP_CODE_CACHE_ENV, os.environ[OP_CODE_DIR_ENV])
    env['STOCK_LAUNCH_HOST_IP'] = '127.0.0.1'   # mxnet-ssp-stock-launch: the tracker on loopback
    for key in [k for k in env if k.startswith('DMLC_')]:
        del env[key]
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_job(tmp_path, command, workers=2, servers=1, timeout=180, env=None, launcher_args=()):
    """Run `command` as every role of a local job through mxnet-ssp-launch.

    On timeout the launcher gets SIGINT (it then stops the whole job) before
    the test fails, so no process of the job outlives the test.
    """
    argv = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', str(workers), '-s', str(servers),
            '--launcher', 'local'] + list(launcher_args) + list(command)
    proc = subprocess.Popen(argv, env=env or job_env(tmp_path), cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        pytest.fail('job did not finish within %d s:\n%s\n%s' % (timeout, out[-3000:], err[-6000:]))
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


#: How the stock dmlc tracker reports a process that exited non-zero (the message line; the
#: traceback above it also quotes the source line that formats it).
def tracker_reports(stderr, code=None):
    """How many non-zero exits (of status `code`, or any) the stock tracker reported.

    Counted by the number in "Get nonzero return code=N on", not by the whole line: the
    processes of a job share the launcher's stderr, and another one's write can land in the
    middle of the tracker's ("RuntimeErrorowner, kv = ...: Get nonzero return code=1 on").
    The traceback's source line (``code=%d``) has no number, so it does not count.
    """
    pattern = r'Get nonzero return code=%s on ' % (re.escape(str(code)) if code is not None
                                                    else r'-?\d+')
    return len(re.findall(pattern, stderr))


def session_pids(session, role=None):
    """Pids of the live processes of process session `session` (zombies, which exited and
    wait for their parent, left out), only those with ``DMLC_ROLE=role`` if given."""
    want = None if role is None else ('DMLC_ROLE=%s' % role).encode()
    pids = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            if os.getsid(int(name)) != session:
                continue
            with open('/proc/%s/stat' % name) as f:
                if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                    continue
            if want is not None:
                with open('/proc/%s/environ' % name, 'rb') as f:
                    if want not in f.read().split(b'\0'):
                        continue
        except (OSError, ProcessLookupError, IndexError):
            continue
        pids.append(int(name))
    return pids


def pids_with_env(wanted):
    """Pids of the processes whose environment holds every NAME=VALUE of `wanted` (a dict),
    read from /proc (a process that ended while it was read is left out)."""
    items = [('%s=%s' % kv).encode() for kv in wanted.items()]
    pids = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/environ' % name, 'rb') as f:
                env = set(f.read().split(b'\0'))
        except OSError:
            continue
        if all(item in env for item in items):
            pids.append(int(name))
    return pids


def run_stock_launch(tmp_path, command, workers=2, servers=1, timeout=180, env=None,
                     until='launcher', workers_left=0, reported=0):
    """Run `command` under MXNet's stock tools/launch.py (mxnet-ssp-stock-launch) on loopback.

    ``until='launcher'`` waits for the launcher to exit; ``until='workers'``
    only until no more than `workers_left` worker processes are alive (after a
    failure the stock launcher keeps MXNet's scheduler and servers, and
    itself, running for ever; a stalled worker stays too), and then until the
    stock tracker has reported `reported` non-zero exits (its threads print
    "Get nonzero return code=N" after the process ends).  The
    stock launcher stops none of its children, so it runs in a session of its
    own and the whole session is killed at the end, and if `timeout` passes
    first (the test then fails).  The returned ``returncode`` is the
    launcher's, or None when it was still running.
    """
    argv = [sys.executable, '-m', 'mxnet_ssp.launch.stock', '-n', str(workers), '-s',
            str(servers), '--launcher', 'local'] + list(command)
    out_path, err_path = tmp_path / 'stock-launch.out', tmp_path / 'stock-launch.err'
    env = dict(env or job_env(tmp_path))
    if ROOT not in env.get('PYTHONPATH', '').split(os.pathsep):      # the entry of this checkout
        env['PYTHONPATH'] = os.pathsep.join(p for p in (ROOT, env.get('PYTHONPATH')) if p)
    with open(out_path, 'w') as out, open(err_path, 'w') as err:
        proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path),
                                start_new_session=True, stdout=out, stderr=err)
    deadline = time.monotonic() + timeout
    finished = False
    try:
        if until == 'launcher':
            try:
                proc.wait(timeout=timeout)
                finished = True
            except subprocess.TimeoutExpired:
                pass
        else:
            started = False
            while not finished and time.monotonic() < deadline:
                alive = session_pids(proc.pid, 'worker')
                started = started or len(alive) == workers
                finished = proc.poll() is not None or (
                    started and len(alive) <= workers_left and
                    tracker_reports(err_path.read_text()) >= reported)
                if not finished:
                    time.sleep(0.2)     # polling a condition with a deadline, not a synchronization
    finally:
        try:        # a clean job leaves nothing; a failed one leaves MXNet's processes
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    result = subprocess.CompletedProcess(argv, proc.returncode if until == 'launcher' else None,
                                         out_path.read_text(), err_path.read_text())
    if not finished:
        pytest.fail('stock launch.py job did not finish (%s) within %d s:\n%s\n%s'
                    % (until, timeout, result.stdout[-3000:], result.stderr[-6000:]))
    return result


def fail_msg(proc):
    """What a failed job printed, for an assertion message."""
    return 'exit %s\nstdout:\n%s\nstderr:\n%s' % (proc.returncode, proc.stdout[-3000:],
                                                  proc.stderr[-6000:])


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(autouse=True)
def _root_logging_as_found():
    """Each test leaves the root logger's handlers and level as it found them.  The training
    script's setup_logging, run in this process by some tests, replaces them with a handler
    on the stderr of that moment (pytest's capture, closed when the test ends); a controller
    thread logging later then printed "--- Logging error --- I/O operation on closed file"."""
    import logging
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def marker_job(tmp_path):
    """Run tests/support/jobs/marker_job.py; returns (completed process, {rank: [records]})."""
    def run(workers=2, servers=1, env=None, launcher_args=(), **flags):
        out = tmp_path / 'steps'
        cmd = [sys.executable, os.path.join(JOBS, 'marker_job.py'), '--out', str(out)]
        for name, value in flags.items():
            cmd += ['--' + name.replace('_', '-')] + ([] if value is True else [str(value)])
        proc = run_job(tmp_path, cmd, workers=workers, servers=servers, env=env,
                       launcher_args=launcher_args)
        steps = {}
        if out.exists():
            for name in sorted(n for n in os.listdir(out) if n.startswith('steps-')):
                rank = int(name.split('-')[1].split('.')[0])
                steps[rank] = read_jsonl(out / name)
        return proc, steps
    return run


def require_autoload_hook():
    """`need` mxnet-ssp's start-up hook in this Python (skip, or fail under CI, without it).

    The hook (kvstore_patches/mxnet_ssp_autoload.{pth,py}) is put at the root
    of site-packages by ``pip install .`` and, with setuptools >= 64, by
    ``pip install -e .``; the .pth imports ``mxnet_ssp_autoload`` at every
    start-up, so it is in ``sys.modules`` exactly when the hook is in place.
    """
    if 'mxnet_ssp_autoload' not in sys.modules:
        import site
        need('the start-up hook mxnet_ssp_autoload.pth of %s (looked in %s)'
             % (sys.executable, ', '.join(site.getsitepackages())),
             'python -m pip install . in the checkout (or pip install -e . with '
             'setuptools >= 64), which puts it there')


#: what the start-up hook reads from the environment (kvstore_patches/mxnet_ssp_autoload.py)
HOOK_SETTINGS = ('DMLC_ROLE', 'MXNET_SSP_AUTOLOAD', 'MXNET_SSP_LEAN_WORKERS',
                 OP_CODE_CACHE_ENV)


def python_c(code, env=None, timeout=120):
    """Run ``python -c code`` in a process of its own, with none of HOOK_SETTINGS but those
    in `env`; its output (stdout and stderr), after checking that it exited with 0."""
    import subprocess
    environ = dict(os.environ, OMP_NUM_THREADS='1')
    for key in HOOK_SETTINGS:
        environ.pop(key, None)
    environ.update(env or {})
    proc = subprocess.run([sys.executable, '-c', code], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout, env=environ)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


def fake_gpu_counter(count):
    """A GPU counter that sees `count` GPUs and records the environments it was asked about."""
    def num_gpus(environ):
        num_gpus.asked.append(dict(environ))
        return count
    num_gpus.asked = []
    return num_gpus


def same_interval(interval, expected):
    """Two intervals (tuples of numbers) equal, nan equal to nan, floats approximately."""
    assert interval is not None and len(interval) == len(expected)
    for got, want in zip(interval, expected):
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got), (interval, expected)
        else:
            assert got == pytest.approx(want), (interval, expected)


def pytest_terminal_summary(terminalreporter):
    """The package's size report (tests/support/sizes.py): smells, never a failure."""
    if hasattr(terminalreporter.config, 'workerinput'):
        return
    sys.path.insert(0, os.path.join(ROOT, 'tests', 'support'))
    try:
        from sizes import report_lines
    finally:
        sys.path.pop(0)
    terminalreporter.section('sizes')
    for line in report_lines(os.path.join(ROOT, 'mxnet_ssp')):
        terminalreporter.write_line(line)
