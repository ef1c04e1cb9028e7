"""Settings of a launch: constants, the checks made before anything starts, and the
environment each process gets (see docs/launch.md).

This module must stay light: the standard library, :mod:`mxnet_ssp.config` and
:mod:`mxnet_ssp.core` only.
"""
import difflib
import re
import shlex
import sys

from ..config import (ENV_CONTROLLER, ENV_DSSP_MODE, ENV_SOFTSYNC_SPLITS, ENV_STALENESS,
                      ENV_TIMEOUT, NATIVE_DIST_TYPES, STORE_TYPES, TABLE, ConfigError,
                      check_kvstore_name, check_setting, from_env, balance_from_env, follow_grace,
                      liveness_timeout)
from ..config.table import Setting, declare, text
from ..core.env_names import (DMLC_INTERFACE, DMLC_JOB_CLUSTER, DMLC_NUM_ATTEMPT, DMLC_NUM_SERVER,
                              DMLC_NUM_WORKER, DMLC_PS_ROOT_PORT, DMLC_PS_ROOT_URI,
                              DMLC_PS_VAN_TYPE, DMLC_PS_WATER_MARK, DMLC_ROLE, DMLC_TASK_ID)


PROG = 'mxnet-ssp-launch'

#: The launcher's own settings (rows of mxnet_ssp.config's table; their names start with
#: mxnet_ssp.config.table.LAUNCHER_PREFIX): never passed to the processes of the job.
ENV_SSH_ARGS = 'MXNET_SSP_LAUNCH_SSH_ARGS'
ENV_MPIRUN = 'MXNET_SSP_LAUNCH_MPIRUN'
ENV_LAUNCH_INDEX = 'MXNET_SSP_LAUNCH_INDEX'
_OWN = "it is the launcher's own; set it in the launcher's environment"
LAUNCHER_ONLY_ENV = tuple(setting.name for setting in declare(
    Setting(ENV_SSH_ARGS, 'launcher', "Extra ssh options, split like a shell would, put after "
            "ssh (and in rsync's -e), e.g. '-F ./ssh_config' or '-i key -l user'.", text,
            default='', accepted='ssh options, as a shell would split them', not_in_file=_OWN),
    Setting(ENV_MPIRUN, 'launcher', 'The mpirun program to use.', text, default='mpirun',
            accepted='a program name or path', not_in_file=_OWN),
    Setting(ENV_LAUNCH_INDEX, 'launcher', "Set by the launcher in every process: its launch "
            "index within its role (worker #1 has 1); not the ps-lite rank.", text,
            not_in_file='the launcher sets it per process'),
))


#: Set by the launcher for each process; --env* may not set them.
RESERVED_ENV = (DMLC_ROLE, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT,
                DMLC_NUM_SERVER, DMLC_NUM_WORKER, DMLC_TASK_ID, DMLC_JOB_CLUSTER,
                DMLC_NUM_ATTEMPT)


#: Passed to remote (ssh / mpi) processes when set here, besides MXNET_SSP_*: what MXNet's
#: dmlc tracker forwards over ssh (but AWS credentials: pass them with --env), and PS_VERBOSE.
FORWARDED_ENV = ('OMP_NUM_THREADS', 'PS_VERBOSE', DMLC_INTERFACE, 'KMP_AFFINITY',
                 'LD_LIBRARY_PATH')


FORWARDED_PREFIX = 'MXNET_SSP_'


P3_ENV = ((DMLC_PS_VAN_TYPE, 'p3'), (DMLC_PS_WATER_MARK, '10'))


KVSTORE_FLAGS = ('--kvstore', '--kv-store', '--kv_store')


KILL_GRACE = 5.0         # seconds between SIGTERM and SIGKILL


REMOTE_GRACE = 2.0       # the same on a remote host (ssh), shorter so it ends within KILL_GRACE


FINISH_TIMEOUT = 60.0    # seconds the scheduler and servers get to exit after the last worker


EXIT_FAILED = 1


EXIT_USAGE = 2


EXIT_TIMEOUT = 124


#: every ssh the launcher runs: no prompt (a password or passphrase asked for would hang the
#: job); host keys are checked as the user's ssh configuration says (StrictHostKeyChecking=no
#: in MXNET_SSP_LAUNCH_SSH_ARGS turns that off)
SSH_BASE = ('ssh', '-o', 'BatchMode=yes')


#: seconds ssh waits for each host's connection (and banner) before the job starts
SSH_CONNECT_TIMEOUT = 10


_ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


class LaunchError(Exception):
    """Bad usage or setting found before anything started (exit code 2)."""


def say(msg, stream=None):
    """Write ``mxnet-ssp-launch: MSG`` to `stream` (default stderr); a closed stream is ignored."""
    stream = sys.stderr if stream is None else stream
    try:
        stream.write('%s: %s\n' % (PROG, msg))
        stream.flush()
    except (OSError, ValueError):
        pass


def plural(n, word):
    """``'1 worker'``, ``'2 workers'``."""
    return '%d %s%s' % (n, word, '' if n == 1 else 's')


def parse_env_items(items, flag):
    """Parse ``K:V`` (or ``K=V``) items of `flag` into a dict, checking names."""
    out = {}
    for item in items:
        cut = min((i for i in (item.find(':'), item.find('=')) if i >= 0), default=-1)
        if cut < 0:
            raise LaunchError('%s %r is not valid: expected NAME:VALUE (e.g. OMP_NUM_THREADS:4)'
                              % (flag, item))
        key, value = item[:cut], item[cut + 1:]
        _check_env_name(key, flag, item)
        out[key] = value
    return out


def _check_env_name(key, flag, item):
    if not _ENV_NAME.match(key):
        raise LaunchError('%s %r is not valid: %r is not an environment variable name'
                          % (flag, item, key))
    if key in RESERVED_ENV:
        raise LaunchError('%s %r is not allowed: %s is set by %s for each process (%s)'
                          % (flag, item, key, PROG, ', '.join(RESERVED_ENV)))


def parse_env_pass(items, environ):
    """Parse ``--env`` items: ``K`` (value from `environ`) or ``K:V`` / ``K=V``."""
    out = {}
    for item in items:
        if ':' in item or '=' in item:
            out.update(parse_env_items([item], '--env'))
            continue
        _check_env_name(item, '--env', item)
        if item in environ:
            out[item] = environ[item]
        else:
            say('warning: --env %s: %s is not set here; not passed' % (item, item))
    return out


def _command_tokens(command):
    for arg in command:
        if any(c.isspace() for c in arg):        # e.g. sh -c "python train.py --kvstore x"
            try:
                yield from shlex.split(arg)
            except ValueError:
                yield from arg.split()
        else:
            yield arg


def find_kvstore_names(command):
    """kvstore names given by ``--kvstore X``, ``--kv-store X`` or ``--kvstore=X`` in `command`."""
    tokens = list(_command_tokens(command))
    names = []
    for i, tok in enumerate(tokens):
        if tok in KVSTORE_FLAGS:
            if i + 1 < len(tokens):
                names.append((tok, tokens[i + 1]))
            else:
                names.append((tok, ''))
        else:
            flag, eq, value = tok.partition('=')
            if eq and flag in KVSTORE_FLAGS:
                names.append((flag, value))
    return names


#: MXNET_SSP_* names that are not settings of a job's processes but are not typos either:
#: setup.py's choice of MXNet build, the testbed's (mxnet_ssp/lab/testbed/settings.py)
OTHER_NAMES = ('MXNET_SSP_MXNET_PACKAGE', 'MXNET_SSP_TESTBED_PREFIX',
               'MXNET_SSP_TESTBED_STATE_ROOT')


def unknown_settings(environ):
    """``(name, close name or None)`` of each ``MXNET_SSP_*`` name in `environ` that no part
    of mxnet-ssp reads (a misspelt setting is silently ignored by the processes)."""
    known = {n for n in TABLE if n.startswith(FORWARDED_PREFIX)} | set(OTHER_NAMES)
    found = []
    for name in sorted(environ):
        if name.startswith(FORWARDED_PREFIX) and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
            found.append((name, close[0] if close else None))
    return found


def check_every_setting(environ, num_workers=None, flag=None, softsync=True):
    """Check each ``MXNET_SSP_*`` setting of `environ` the processes read (the elastic
    minimum against `num_workers`, and the softsync splits too when the job may run
    ``dist_softsync``: `softsync`); raise LaunchError naming the setting, its value, what is
    accepted and, when it is not the environment, where it was set (the settings file's line,
    or `flag`, e.g. ``--env-worker``)."""
    for name in sorted(environ):
        if not name.startswith(FORWARDED_PREFIX) or name in LAUNCHER_ONLY_ENV:
            continue
        bound = num_workers if softsync or name != ENV_SOFTSYNC_SPLITS else None
        try:
            check_setting(name, environ[name], bound)
        except ConfigError as err:
            where = getattr(environ, 'from_file', {})
            if name in where:
                raise LaunchError('%s (set in %s)' % (err, environ.origin(name))) from None
            if flag is not None:
                raise LaunchError('%s (set with %s)' % (err, flag)) from None
            raise LaunchError(str(err)) from None


def validate_settings(command, environ, role_extras=(), num_workers=None):
    """Check the command's kvstore names and the MXNET_SSP_* settings.

    Parameters
    ----------
    command : list of str
    environ : mapping
        The launcher's environment.
    role_extras : iterable of (str, dict)
        ``(flag, values)`` set on top of `environ` for some processes, e.g.
        ``('--env-worker', {'MXNET_SSP_STALENESS': '3'})``.
    num_workers : int, optional
        The job's workers: the settings bounded by them are checked against them.

    Returns
    -------
    list of str
        The kvstore types found in the command.

    Raises
    ------
    LaunchError
        With one line naming the setting, its value and the accepted forms.
    """
    stores = []
    for flag, value in find_kvstore_names(command):
        try:
            stores.append(check_kvstore_name(value))
        except ConfigError as err:
            if not value:
                raise LaunchError('%s without a value in the command: expected one of %s'
                                  % (flag, ', '.join(tuple(STORE_TYPES) + NATIVE_DIST_TYPES))
                                  ) from None
            raise LaunchError('%s %s in the command: %s' % (flag, value, err)) from None
    ours = [s for s in dict.fromkeys(stores) if s in STORE_TYPES] or ['dist_dssp']
    settings = (ENV_STALENESS, ENV_DSSP_MODE, ENV_TIMEOUT, ENV_CONTROLLER)
    for store in ours:
        try:
            from_env(store, environ=environ)
        except ConfigError as err:
            raise LaunchError(str(err)) from None
        for flag, extra in role_extras:
            given = {k: v for k, v in extra.items() if k in settings}
            if not given:
                continue
            try:
                from_env(store, environ=dict(environ, **given))
            except ConfigError as err:
                raise LaunchError('%s (set with %s)' % (err, flag)) from None
    # the splits against the workers only where they count: a job that may run dist_softsync
    softsync = not stores or 'dist_softsync' in stores
    check_every_setting(environ, num_workers, softsync=softsync)
    for flag, extra in role_extras:
        check_every_setting(extra, num_workers, flag, softsync=softsync)
    for extra in [{}] + [dict(e) for _, e in role_extras]:
        try:
            balance_from_env(dict(environ, **extra))
            follow_grace(dict(environ, **extra))
            liveness_timeout(dict(environ, **extra))
        except ConfigError as err:
            raise LaunchError(str(err)) from None
    return stores


def dmlc_env(role, root_uri, root_port, num_workers, num_servers):
    """The DMLC_* variables that make a process `role` of the job."""
    return {DMLC_ROLE: role, DMLC_PS_ROOT_URI: root_uri,
            DMLC_PS_ROOT_PORT: str(root_port), DMLC_NUM_SERVER: str(num_servers),
            DMLC_NUM_WORKER: str(num_workers)}


def task_env(cluster, role, index, num_workers):
    """What MXNet's dmlc tracker adds for a server or worker (see docs/launch.md).

    ``DMLC_JOB_CLUSTER`` names the launcher; ``DMLC_TASK_ID`` numbers the
    workers 0 .. n-1, then the servers n .. n+s-1, as the tracker's local
    mode (scripts shard their data by it before any store exists);
    ``DMLC_NUM_ATTEMPT`` is 0 (the tracker's local mode counts retries in it;
    this launcher never retries).  Under mpi one mpirun starts every process
    of a role, so no task id can be given here: MPI's own rank variables
    (``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``) stand in, as with the tracker.
    """
    env = {DMLC_JOB_CLUSTER: cluster, DMLC_NUM_ATTEMPT: '0'}
    if cluster != 'mpi':
        env[DMLC_TASK_ID] = str(index if role == 'worker' else num_workers + index)
    return env


def role_settings(common, extra, environ, p3=False):
    """Variables the launcher sets explicitly for one role.

    `common` (``--env``), then `extra` (``--env-server`` / ``--env-worker``);
    P3 variables with ``--p3``; ``OMP_NUM_THREADS`` = its value here, else 1.
    """
    env = dict(common)
    env.update(extra)
    if p3:
        for k, v in P3_ENV:
            env.setdefault(k, v)
    if 'OMP_NUM_THREADS' not in env:
        env['OMP_NUM_THREADS'] = environ.get('OMP_NUM_THREADS') or '1'
    return env


def forwarded_env(environ):
    """Variables of this environment passed to remote processes."""
    return {k: v for k, v in environ.items()
            if (k.startswith(FORWARDED_PREFIX) and k not in LAUNCHER_ONLY_ENV)
            or k in FORWARDED_ENV}


def local_env(environ, settings, dmlc):
    """Full environment of a process on this machine."""
    env = {k: v for k, v in environ.items()
           if k not in RESERVED_ENV and k not in LAUNCHER_ONLY_ENV}
    env.update(settings)
    env.update(dmlc)
    return env
