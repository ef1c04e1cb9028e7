"""A real Slurm cluster on the testbed's hosts (``mxnet-ssp-testbed up --slurm``).

Debian's packages (``slurmctld slurmd slurm-client munge``, Slurm 22.05) run as: one munged for
all (its socket is a file, every namespace shares the file system), slurmctld on host0 (the
login host) and one slurmd on each other host, each in the host's network namespace and, through
a UTS namespace, with the host's own name (slurmctld refuses to start unless its host name is
``SlurmctldHost``'s).  Every file is in ``<state dir>/slurm``; clients find the cluster through
``SLURM_CONF`` (``mxnet-ssp-testbed run`` sets it).  What it takes, learnt the hard way:

* slurmd 22.05 always loads a cgroup plugin and needs a cgroup file system: each slurmd runs in
  a mount namespace of its own with a private tmpfs on /sys/fs/cgroup holding a named v1
  hierarchy (nothing of the machine's cgroups is touched);
* munged wants its directory mode 755, every directory above it enterable by all (the state
  directory becomes 0711) and its key 0400;
* a node declared with more CPUs than the machine has stays "inval" unless
  ``SlurmdParameters=config_overrides``;
* ``ProctrackType=proctrack/linuxproc`` (no cgroups): a step's processes are found by parentage,
  which follows the launcher's new sessions; ``KillWait=2`` so scancel ends a job in seconds.

Lab code: the product (:mod:`mxnet_ssp.launch.slurm`) never imports it.
"""
import os
import shutil
import subprocess
import time

SLURM_DIR = 'slurm'
SLURM_PROGRAMS = {'slurmctld': 'slurmctld', 'slurmd': 'slurmd', 'munged': 'munge',
                  'srun': 'slurm-client', 'sbatch': 'slurm-client', 'scontrol': 'slurm-client',
                  'sinfo': 'slurm-client', 'unshare': 'util-linux'}
INSTALL = 'apt-get install slurmctld slurmd slurm-client munge'
#: CPUs declared per compute host (config_overrides lets it exceed the machine's)
CPUS_PER_HOST = 4
#: how long up waits for every node to be idle
IDLE_WITHIN = 30.0

# slurmd's mount namespace: a cgroup file system of its own (see the module's docstring)
_CGROUP = ('mount -t tmpfs mxssp-cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/freezer && '
           'mount -t cgroup -o none,name=mxssp cgroup /sys/fs/cgroup/freezer')


def missing_programs(which=shutil.which):
    """The Debian packages of the programs ``up --slurm`` needs that are not on PATH."""
    return sorted({pkg for prog, pkg in SLURM_PROGRAMS.items() if which(prog) is None})


def slurm_dir(directory):
    return os.path.join(directory, SLURM_DIR)


def conf_path(directory):
    return os.path.join(slurm_dir(directory), 'slurm.conf')


def slurm_conf_text(plan, directory, cpus=CPUS_PER_HOST):
    d = slurm_dir(directory)
    login = plan.hosts[0]
    cluster = ''.join(c for c in plan.prefix.lower() if c.isalnum()) or 'testbed'
    lines = [
        '# mxnet-ssp-testbed (prefix %s): Slurm on the emulated hosts' % plan.prefix,
        'ClusterName=%s' % cluster,
        'SlurmctldHost=%s(%s)' % (login.name, login.address),
        'SlurmUser=root', 'SlurmdUser=root',
        'AuthType=auth/munge', 'CredType=cred/munge',
        'AuthInfo=socket=%s' % os.path.join(d, 'munge', 'munge.socket'),
        'SlurmctldPort=6817', 'SlurmdPort=6818',
        'StateSaveLocation=%s' % os.path.join(d, 'ctld'),
        'SlurmdSpoolDir=%s' % os.path.join(d, '%n'),
        'SlurmctldPidFile=%s' % os.path.join(d, 'ctld', 'slurmctld.pid'),
        'SlurmdPidFile=%s' % os.path.join(d, '%n', 'slurmd.pid'),
        'SlurmctldLogFile=%s' % os.path.join(d, 'ctld', 'slurmctld.log'),
        'SlurmdLogFile=%s' % os.path.join(d, '%n', 'slurmd.log'),
        'ProctrackType=proctrack/linuxproc', 'TaskPlugin=task/none',
        'JobAcctGatherType=jobacct_gather/none', 'AccountingStorageType=accounting_storage/none',
        'SchedulerType=sched/backfill', 'SelectType=select/cons_tres',
        'SelectTypeParameters=CR_CPU', 'SlurmdParameters=config_overrides',
        'ReturnToService=2', 'KillWait=2', 'MpiDefault=none', 'SwitchType=switch/none',
        'MailProg=/bin/true', 'SlurmctldTimeout=30', 'SlurmdTimeout=30',
    ]
    for h in plan.hosts[1:]:
        lines.append('NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN' % (h.name, h.address, cpus))
    lines.append('PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP')
    return '\n'.join(lines) + '\n'


def _write(path, text, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, 'w') as f:
        f.write(text)


def _in_namespace(namespace, script, log, env):
    """Start `script` (sh) in `namespace` with new UTS and mount namespaces, detached."""
    with open(log, 'ab') as out:
        return subprocess.Popen(['ip', 'netns', 'exec', namespace, 'unshare', '--uts', '--mount',
                                 '--propagation', 'private', 'sh', '-c', script],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)


def _tail(path, chars=800):
    try:
        with open(path, errors='replace') as f:
            return f.read()[-chars:].strip()
    except OSError as err:
        return '(no log: %s)' % err


def start(plan, directory, environ=None):
    """Bring Slurm up on the testbed's hosts (already up, with their state in `directory`);
    return the seconds until every node was idle.  Raise RuntimeError naming the daemon and
    its log's tail when one does not start."""
    d = slurm_dir(directory)
    os.makedirs(os.path.join(d, 'munge'), exist_ok=True)
    os.makedirs(os.path.join(d, 'ctld'), exist_ok=True)
    for h in plan.hosts[1:]:
        os.makedirs(os.path.join(d, h.name), exist_ok=True)
    # munged refuses a socket whose directories not everyone may enter: the state directory
    # becomes 0711 (entered, not listed), its own 0755
    os.chmod(directory, 0o711)
    for path in (d, os.path.join(d, 'munge')):
        os.chmod(path, 0o755)
    key = os.path.join(d, 'munge', 'munge.key')
    with open(key, 'wb') as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o400)
    _write(conf_path(directory), slurm_conf_text(plan, directory))
    _write(os.path.join(d, 'cgroup.conf'), 'CgroupPlugin=cgroup/v1\n'
           'CgroupMountpoint=/sys/fs/cgroup\n')
    env = dict(os.environ if environ is None else environ, SLURM_CONF=conf_path(directory))
    started = time.monotonic()
    m = os.path.join(d, 'munge')
    munge_log = os.path.join(m, 'munged.out')
    _in_namespace(plan.hosts[0].namespace,
                  'exec munged -F --socket=%s --key-file=%s --log-file=%s --pid-file=%s '
                  '--seed-file=%s --num-threads=4' % (
                      os.path.join(m, 'munge.socket'), key, os.path.join(m, 'munged.log'),
                      os.path.join(m, 'munged.pid'), os.path.join(m, 'munged.seed')),
                  munge_log, env)
    _wait_for(os.path.join(m, 'munge.socket'), 'munged', munge_log)
    login = plan.hosts[0]
    ctld_log = os.path.join(d, 'ctld', 'slurmctld.out')
    _in_namespace(login.namespace, 'hostname %s && exec slurmctld -D -i' % login.name,
                  ctld_log, env)
    _wait_for(os.path.join(d, 'ctld', 'slurmctld.pid'), 'slurmctld', ctld_log)
    for h in plan.hosts[1:]:
        _in_namespace(h.namespace, 'hostname %s && %s && exec slurmd -D -N %s'
                      % (h.name, _CGROUP, h.name), os.path.join(d, h.name, 'slurmd.out'), env)
    _wait_idle(plan, directory, env)
    return time.monotonic() - started


def daemon_pids(directory, compute_hosts):
    """{daemon: pid or None} from the pid files: munged, slurmctld, slurmd of each host."""
    d = slurm_dir(directory)
    files = {'munged': os.path.join(d, 'munge', 'munged.pid'),
             'slurmctld': os.path.join(d, 'ctld', 'slurmctld.pid')}
    files.update(('slurmd of %s' % h, os.path.join(d, h, 'slurmd.pid')) for h in compute_hosts)
    pids = {}
    for name, path in files.items():
        try:
            with open(path) as f:
                pids[name] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pids[name] = None
    return pids


def _wait_for(path, daemon, log, within=20.0):
    deadline = time.monotonic() + within
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError('%s did not start within %g s: %s' % (daemon, within, _tail(log)))
        time.sleep(0.01)            # polling a file with a deadline


def _wait_idle(plan, directory, env):
    names = [h.name for h in plan.hosts[1:]]
    deadline = time.monotonic() + IDLE_WITHIN
    states = {}
    while True:
        proc = subprocess.run(['ip', 'netns', 'exec', plan.hosts[0].namespace,
                               'sinfo', '-h', '-N', '-o', '%N %T'], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False)
        states = dict(line.split()[:2] for line in proc.stdout.splitlines() if ' ' in line)
        if all(states.get(n) == 'idle' for n in names):
            return
        if time.monotonic() > deadline:
            d = slurm_dir(directory)
            raise RuntimeError('Slurm nodes not idle within %g s: %s (sinfo: %s); slurmd of '
                               '%s: %s' % (IDLE_WITHIN, ', '.join('%s %s' % (n, states.get(
                                   n, 'unknown')) for n in names), proc.stderr.strip()[-300:],
                                   names[0],
                                  _tail(os.path.join(d, names[0], 'slurmd.out'))))
        time.sleep(0.05)            # polling sinfo with a deadline
