"""What a parameter-server job does when one of its processes fails: measured.

For each (fault, store, launcher) it starts a 2-worker job with ``--servers``
servers (default 1) on 127.0.0.1 running benchmarks/fault_job.py, waits until both workers have
made ``--warmup`` steps (read from the progress files the job writes), injects
the fault, and records, per process of the job: its exit status, the time
from the fault to its exit (or that it was still running at the bound), the
steps each worker made after the fault, and what the survivors printed after
the fault (and whether that names the dead process).  Then every process of
the trial is killed (found by a token in its environment), so nothing is left
behind whatever happened.

Faults: ``worker-kill`` (SIGKILL to worker rank 1), ``worker-stop`` (SIGSTOP
to worker rank 1; SIGKILL at the end), ``server-kill`` (SIGKILL to the
server, which also hosts mxnet-ssp's controller), ``scheduler-kill``.
Launchers: ``stock`` (MXNet 1.9.1's tools/launch.py through
mxnet-ssp-stock-launch, the tracker pinned to 127.0.0.1) and ``ours``
(mxnet-ssp-launch ``--launcher local --timeout``).

    python -m benchmarks.faults --out docs/faults.md
    python -m benchmarks.faults --faults worker-kill --stores dist_dssp --launchers stock \\
        --json /tmp/r.json

Exit code 0 once every trial ran and was cleaned up (whatever the job did); 1
if processes of a trial could not be removed.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid

#: the job and the stock launcher's shim, by module: every process starts in the checkout
JOB = ['-m', 'benchmarks.fault_job']
STOCK = ['-m', 'mxnet_ssp.launch.stock']
TOKEN_VAR = 'MXNET_SSP_FAULTS_TRIAL'

FAULTS = ('worker-kill', 'worker-stop', 'server-kill', 'scheduler-kill')
STORES = ('dist_dssp', 'dist_sync')
LAUNCHERS = ('stock', 'ours')
DEAD_RANK = 1


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

def _environ(pid):
    try:
        with open('/proc/%d/environ' % pid, 'rb') as f:
            data = f.read()
    except OSError:
        return None
    out = {}
    for item in data.split(b'\0'):
        k, eq, v = item.partition(b'=')
        if eq:
            out[k.decode(errors='replace')] = v.decode(errors='replace')
    return out


def _state(pid):
    """Process state letter ('R', 'S', 'T', 'Z', ...) or None if gone."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            data = f.read()
        return data[data.rindex(b')') + 2:].split()[0].decode()
    except (OSError, ValueError, IndexError):
        return None


def alive(pid):
    return _state(pid) not in (None, 'Z', 'X')


def trial_pids(token):
    """Every live process whose environment carries this trial's token."""
    pids = []
    for name in os.listdir('/proc'):
        if name.isdigit() and int(name) != os.getpid():
            env = _environ(int(name))
            if env and env.get(TOKEN_VAR) == token and alive(int(name)):
                pids.append(int(name))
    return pids


def cleanup(token, launcher, deadline_s=15.0):
    """SIGKILL (then SIGCONT) every process of the trial until none is left; [] if done."""
    try:
        os.killpg(launcher.pid, signal.SIGKILL)
    except OSError:
        pass
    end = time.monotonic() + deadline_s
    left = trial_pids(token)
    while left and time.monotonic() < end:
        for pid in left:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        time.sleep(0.1)          # polling /proc for the kills to land, not synchronization
        left = trial_pids(token)
    try:
        launcher.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return left


# ---------------------------------------------------------------------------
# One trial
# ---------------------------------------------------------------------------

def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _steps(out, rank):
    try:
        with open(os.path.join(out, 'progress-%d.txt' % rank)) as f:
            return sum(1 for line in f if line.endswith('\n'))
    except OSError:
        return 0


def job_processes(out):
    """{pid: {'role', 'rank', 'log', 'reaper'}} of the job processes that reported themselves."""
    procs = {}
    for path in glob.glob(os.path.join(out, 'proc-*.json')):
        info = _read_json(path)
        if not info:
            continue
        rank_info = _read_json(os.path.join(out, 'rank-%d.json' % info['pid']))
        info['rank'] = rank_info['rank'] if rank_info else None
        procs[info['pid']] = info
    return procs


def _label(info):
    if info['role'] == 'worker':
        return 'worker %s' % info['rank']
    return info['role']


def launcher_argv(launcher, store, out, timeout, servers=1, elastic=0, steps=None):
    job = [sys.executable] + JOB + ['--kvstore', store, '--out', out]
    if steps:
        job += ['--steps', str(steps)]
    sizes = ['-n', '2', '-s', str(servers), '--launcher', 'local']
    if launcher == 'stock':       # elastic: MXNET_SSP_ELASTIC in the environment (run_trial)
        return [sys.executable] + STOCK + sizes + job
    flags = ['--timeout', '%g' % timeout] + (['--elastic', str(elastic)] if elastic else [])
    return [sys.executable, '-m', 'mxnet_ssp.launch'] + sizes + flags + job


def _tail(path, offset, n, width=220):
    """The last `n` non-empty lines of `path` written after byte `offset`, shortened."""
    try:
        with open(path, 'rb') as f:
            f.seek(offset)
            text = f.read().decode(errors='replace')
    except OSError:
        return []
    lines = [_clean(l) for l in text.splitlines() if l.strip()]
    return [l if len(l) <= width else l[:width] + ' [...]' for l in lines][-n:]


def _clean(line):
    # dmlc tracker's RuntimeError dumps the whole environment: keep the command only
    m = re.match(r"(.*?Get nonzero return code(=-?\d+)?)", line)
    if m:
        return m.group(1) + ' on [...] (environment elided)'
    return line.rstrip()


def names_dead(lines, fault):
    """Does this text name the failed process?"""
    text = '\n'.join(lines)
    if fault.startswith('worker'):
        pat = r'(worker|rank)\s*\[?#?\s*%d\b' % DEAD_RANK
    elif fault == 'server-kill':
        pat = r'\bserver\b|controller'
    else:
        pat = r'scheduler'
    return bool(re.search(pat, text, re.I))


def run_trial(fault, store, launcher, args, workdir):
    token = uuid.uuid4().hex
    out = os.path.join(workdir, 'job')
    os.makedirs(out)
    env = {k: v for k, v in os.environ.items() if not k.startswith('DMLC_')}
    env.update({TOKEN_VAR: token, 'OMP_NUM_THREADS': '1', 'STOCK_LAUNCH_HOST_IP': '127.0.0.1',
                'MXNET_SSP_TIMEOUT': '%g' % args.ssp_timeout, 'MXNET_SSP_METRICS_DIR': 'off'})
    steps = None
    if args.elastic:              # the survivor must finish: a finite job
        env['MXNET_SSP_ELASTIC'] = str(args.elastic)
        steps = args.warmup + args.elastic_steps
    argv = launcher_argv(launcher, store, out, args.launcher_timeout, args.servers,
                         args.elastic, steps)
    lout = open(os.path.join(workdir, 'launcher.out'), 'wb')
    lerr_path = os.path.join(workdir, 'launcher.err')
    lerr = open(lerr_path, 'wb')
    result = {'fault': fault, 'store': store, 'launcher': launcher, 'bound_s': args.bound,
              'elastic': args.elastic,
              'command': ' '.join(shlex.quote(a) for a in argv)}
    t_start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=os.getcwd(), stdin=subprocess.DEVNULL, stdout=lout,
                            stderr=lerr, start_new_session=True)
    try:
        # -- wait until training is under way ------------------------------
        deadline = t_start + args.startup
        while True:
            procs = job_processes(out)
            ranks = {i['rank']: pid for pid, i in procs.items() if i['role'] == 'worker'}
            if (len(procs) == 3 + args.servers and set(ranks) == {0, 1}
                    and min(_steps(out, 0), _steps(out, 1)) >= args.warmup):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                result['error'] = ('training not under way after %.0f s (launcher rc %s): %d '
                                   'processes reported, steps %d/%d'
                                   % (time.monotonic() - t_start, proc.poll(), len(procs),
                                      _steps(out, 0), _steps(out, 1)))
                return result
            time.sleep(0.1)          # polling progress files with a deadline
        result['startup_s'] = round(time.monotonic() - t_start, 1)
        # -- the target, checked against /proc/<pid>/environ --------------
        role = {'worker-kill': 'worker', 'worker-stop': 'worker', 'server-kill': 'server',
                'scheduler-kill': 'scheduler'}[fault]
        if role == 'worker':
            target = ranks[DEAD_RANK]
        else:
            target = [pid for pid, i in procs.items() if i['role'] == role][0]
        penv = _environ(target) or {}
        if penv.get('DMLC_ROLE') != role or penv.get(TOKEN_VAR) != token:
            result['error'] = 'pid %d is not this trial\'s %s' % (target, role)
            return result
        offsets = {pid: os.path.getsize(i['log']) for pid, i in procs.items()}
        offsets['launcher'] = os.path.getsize(lerr_path)
        steps_at = {r: _steps(out, r) for r in (0, 1)}
        sig = signal.SIGSTOP if fault == 'worker-stop' else signal.SIGKILL
        t_fault = time.monotonic()
        os.kill(target, sig)
        result['target'] = {'pid': target, 'label': _label(procs[target]),
                            'signal': signal.Signals(sig).name}
        # -- watch until everything exited or the bound -------------------
        others = [pid for pid in procs if pid != target]
        end = t_fault + args.bound
        launcher_exit = None
        while time.monotonic() < end:
            if launcher_exit is None and proc.poll() is not None:
                launcher_exit = time.monotonic()
            if (launcher_exit is not None and not any(alive(p) for p in others)
                    and not set(trial_pids(token)) - {target, procs[target]['reaper']}):
                break
            time.sleep(0.1)          # polling exit records with a deadline
        t_end = time.monotonic()
        if launcher_exit is None and proc.poll() is not None:
            launcher_exit = t_end
        # -- record ----------------------------------------------------------
        rows = []
        servers = 0
        for pid, info in sorted(procs.items(), key=lambda kv: (kv[1]['role'], kv[1]['rank'] or 0,
                                                               kv[0])):
            ex = _read_json(os.path.join(out, 'exit-%d.json' % pid))
            label = _label(info)
            if info['role'] == 'server' and args.servers > 1:
                label += ' #%d (pid order)' % servers
                servers += 1
            row = {'process': label, 'pid': pid, 'target': pid == target}
            if ex is not None:
                row['rc'] = ex['rc']
                row['exit_s'] = round(ex['time'] - t_fault, 2)
            else:
                row['rc'] = None
                row['state'] = {'T': 'stopped', 't': 'stopped', None: 'gone (no exit record)',
                                'Z': 'gone (no exit record)', 'X': 'gone (no exit record)'}.get(
                    _state(pid), 'running')
            if info['role'] == 'worker':
                row['steps_at_fault'] = steps_at[info['rank']]
                row['steps_after_fault'] = _steps(out, info['rank']) - steps_at[info['rank']]
            if pid != target:
                row['printed'] = _tail(info['log'], offsets[pid], args.lines)
                row['names_dead'] = names_dead(row['printed'], fault)
            rows.append(row)
        lrow = {'process': 'launcher (%s)' % launcher, 'pid': proc.pid, 'target': False,
                'rc': proc.returncode,
                'printed': _tail(lerr_path, offsets['launcher'], args.lines)}
        lrow['names_dead'] = names_dead(lrow['printed'], fault)
        if launcher_exit is not None:
            lrow['exit_s'] = round(launcher_exit - t_fault, 2)
        else:
            lrow['state'] = 'running'
        rows.append(lrow)
        result['processes'] = rows
        result['watched_s'] = round(t_end - t_fault, 1)
        return result
    finally:
        left = cleanup(token, proc)
        lout.close()
        lerr.close()
        if left:
            result['leftover'] = left
            sys.stderr.write('faults: could not remove processes %s of trial %s/%s/%s\n'
                             % (left, fault, store, launcher))


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def _fate(row, bound):
    if row.get('target'):
        if row.get('rc') is None:
            return '%s (target)' % row.get('state', '?')
        return 'target: rc %s after %.1f s' % (_rc(row['rc']), row['exit_s'])
    if row.get('rc') is None:
        return '**still %s at %g s**' % (row.get('state', 'running'), bound)
    return 'rc %s after %.1f s' % (_rc(row['rc']), row['exit_s'])


def _rc(rc):
    if rc < 0:
        return signal.Signals(-rc).name
    return str(rc)


def markdown(results, args, argv):
    lines = []
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    dirty = subprocess.run(['git', 'status', '--porcelain', '--', 'mxnet_ssp'],
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    lines += ['## Run of %s' % datetime.date.today().isoformat(), '',
              '* command: `%s`' % ' '.join(shlex.quote(a) for a in argv),
              '* code: commit `%s`%s' % (commit, ' (mxnet_ssp/ modified)' if dirty else ''),
              '* machine: %s, %d cores, Python %s, load average at start %s' % (
                  platform.machine(), os.cpu_count(), platform.python_version(),
                  ' '.join('%.1f' % x for x in os.getloadavg())),
              '* job: 1 scheduler, %d server(s), 2 workers (benchmarks/fault_job.py, '
              'gluon.Trainer, ~%g s emulated compute per step); fault after both workers made '
              '%d steps; `MXNET_SSP_TIMEOUT=%g` for our stores; mxnet-ssp-launch with '
              '`--timeout %g` (counted from the job start); each trial watched for %g s after '
              'the fault, then every process of it killed'
              % (args.servers, 0.05, args.warmup, args.ssp_timeout, args.launcher_timeout,
                 args.bound)]
    if args.elastic:
        lines += ['* elastic mode: `MXNET_SSP_ELASTIC=%d` (mxnet-ssp-launch `--elastic %d`); each '
                  'worker runs %d steps, so the survivor finishes %d steps after the fault'
                  % (args.elastic, args.elastic, args.warmup + args.elastic_steps,
                     args.elastic_steps)]
    lines += ['']
    lines += ['| fault | store | launcher | survivor worker(s) | server | scheduler | launcher '
              '| survivor worker names the dead? | worker steps after fault |',
              '|---|---|---|---|---|---|---|---|---|']
    for r in results:
        head = '| %s | %s | %s ' % (r['fault'], r['store'], r['launcher'])
        if 'processes' not in r:
            lines.append(head + '| trial failed: %s | | | | | |' % r.get('error'))
            continue
        by = {}
        for row in r['processes']:
            by.setdefault(row['process'].split(' ')[0], []).append(row)
        workers = [w for w in by.get('worker', []) if not w['target']]
        wtxt = '; '.join('%s: %s' % (w['process'], _fate(w, r['bound_s'])) for w in workers)

        def one(role):
            return '; '.join(_fate(x, r['bound_s']) for x in by.get(role, []))
        named = ', '.join('%s %s' % (w['process'], 'yes' if w['names_dead'] else 'no')
                          for w in workers)
        steps = ', '.join('%s: %s' % (w['process'], w['steps_after_fault'])
                          for w in by.get('worker', []))
        lines.append(head + '| %s | %s | %s | %s | %s | %s |' % (
            wtxt, one('server'), one('scheduler'), one('launcher'), named, steps))
        if r.get('leftover'):
            lines.append('|  |  |  | **processes left behind: %s** | | | | | |' % r['leftover'])
    lines += ['', 'rc: exit status (a signal name: killed by it); times are seconds from the '
              'fault to the exit.', '']
    lines += ['### What the survivors printed after the fault', '']
    for r in results:
        if 'processes' not in r:
            continue
        lines.append('#### %s, %s, %s launcher (target: %s, %s)' % (
            r['fault'], r['store'], r['launcher'], r['target']['label'], r['target']['signal']))
        lines.append('')
        for row in r['processes']:
            if row['target']:
                continue
            lines.append('* %s — %s; last lines after the fault:%s' % (
                row['process'], _fate(row, r['bound_s']), '' if row['printed'] else ' (nothing)'))
            if row['printed']:
                lines.append('')
                lines.append('  ```')
                lines += ['  ' + l.replace('`', "'") for l in row['printed']]
                lines.append('  ```')
        lines.append('')
    return '\n'.join(lines) + '\n'


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--faults', nargs='+', choices=FAULTS, default=list(FAULTS))
    p.add_argument('--stores', nargs='+', default=list(STORES),
                   help='kvstore types (default: %s)' % ' '.join(STORES))
    p.add_argument('--launchers', nargs='+', choices=LAUNCHERS, default=list(LAUNCHERS))
    p.add_argument('--trials', type=int, default=1, help='trials per cell')
    p.add_argument('--servers', type=int, default=1, help='servers of the job (default 1)')
    p.add_argument('--bound', type=float, default=60.0,
                   help='seconds each trial is watched after the fault (default 60)')
    p.add_argument('--launcher-timeout', type=float, default=45.0,
                   help='mxnet-ssp-launch --timeout, from the job start (default 45)')
    p.add_argument('--ssp-timeout', type=float, default=10.0,
                   help='MXNET_SSP_TIMEOUT for our stores (default 10)')
    p.add_argument('--warmup', type=int, default=20, help='steps per worker before the fault')
    p.add_argument('--elastic', type=int, default=0, metavar='MIN_WORKERS',
                   help='elastic mode (MXNET_SSP_ELASTIC; ours: --elastic): the job goes on '
                        'while MIN_WORKERS are left; each worker then runs --warmup + '
                        '--elastic-steps steps (default 0: fail-fast, an endless job)')
    p.add_argument('--elastic-steps', type=int, default=60,
                   help='elastic mode: steps after the warm-up (default 60)')
    p.add_argument('--startup', type=float, default=120.0,
                   help='seconds allowed for the job to get under way')
    p.add_argument('--lines', type=int, default=6, help='lines of output kept per survivor')
    p.add_argument('--out', help='write the markdown report here (appended if it exists '
                                 'and --append)')
    p.add_argument('--append', action='store_true')
    p.add_argument('--json', help='write the raw results here')
    p.add_argument('--keep', help='keep the trial directories (logs) under this directory')
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)

    results = []
    stop = []

    def on_signal(signum, frame):
        stop.append(signum)
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    base = args.keep or tempfile.mkdtemp(prefix='faults-')
    os.makedirs(base, exist_ok=True)
    try:
        n = 0
        for fault in args.faults:
            for store in args.stores:
                for launcher in args.launchers:
                    for trial in range(args.trials):
                        n += 1
                        wd = os.path.join(base, '%s-%s-%s-%d' % (fault, store, launcher, trial))
                        os.makedirs(wd)
                        t0 = time.monotonic()
                        r = run_trial(fault, store, launcher, args, wd)
                        r['trial'] = trial
                        results.append(r)
                        sys.stderr.write('faults: %s %s %s #%d: %s (%.0f s)\n' % (
                            fault, store, launcher, trial,
                            r.get('error') or '; '.join('%s %s' % (x['process'], _fate(
                                x, args.bound)) for x in r['processes']),
                            time.monotonic() - t0))
    except KeyboardInterrupt:
        sys.stderr.write('faults: interrupted; trials done so far are reported\n')
    finally:
        if not args.keep:
            subprocess.run(['rm', '-rf', base])
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    report = markdown(results, args, ['python', '-m', 'benchmarks.faults'] +
                      list(sys.argv[1:] if argv is None else argv))
    if args.out:
        mode = 'a' if args.append else 'w'
        with open(args.out, mode) as f:
            f.write(report)
    else:
        sys.stdout.write(report)
    return 1 if any(r.get('leftover') for r in results) else (130 if stop else 0)


if __name__ == '__main__':
    sys.exit(main())
