"""A parameter-server step where bytes cost time: ``ps_step`` on the emulated cluster.

Brings up an emulated cluster (``mxnet-ssp-testbed``, docs/many_hosts.md) of 1 + S + W
hosts whose links run at ``--rate`` (each direction), and runs ``benchmarks/ps_step_job.py``
(no forward pass: fixed gradients, ``gluon.Trainer.step`` + ``waitall`` timed, SGD with
momentum on the servers) with the scheduler on host0, server i on host 1+i and worker j on
host 1+S+j: every process on a host of its own, so every byte between a worker and a server
crosses two shaped links.  The processes are started directly in the hosts' namespaces
(``ip netns exec``, the testbed's ``run``) with the ``DMLC_*`` variables a launcher gives.

**The wire floor** of a configuration is the most bytes any one link must carry in one
direction in one step, divided by the link's payload rate (the setting times 1448/1514: tbf
counts Ethernet frames, TCP carries 1448 payload bytes in each 1514-byte frame; links are
full duplex, so the two directions do not add).  With B the model's bytes:

- a worker's link carries B up (its gradients) and B down (the weights it pulls);
- server i's link carries W * share_i * B each way (its share of every worker's push and
  pull), share_i = 1/S when the keys are spread evenly by bytes.

floor = max(B, W * B / S) / payload rate.  A worker's step in the asynchronous stores can
overlap another worker's, but the server's link carries every worker's bytes, so W steps
(one per worker) take at least W * B / S at the server: the floor per step of each worker.

Reported per configuration (median [min-max] over ``--trials``, the configurations taking
turns within each trial in an order turned by one place per trial): ms/step (median over a
worker's timed steps, mean over workers), step / floor, MXNet's own dist_async / this, and
the bytes each server's link received and sent during rank 0's timed steps (from
``/proc/<server pid>/net/dev``: each server's own namespace), with the largest / smallest
server's bytes when S = 2.  ``results.json`` in ``--out`` keeps every figure and the host
placement the workers saw.

    sudo OMP_NUM_THREADS=1 python -m benchmarks.wire_step --trials 3 --out wire_out
    sudo python -m benchmarks.wire_step --quick --models cifar_resnet20_v1 --layouts 2x1 \\
        --stores native_async,ours_async --trials 1      # the smallest run
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from benchmarks.ps_step import (SHAPES_FILE, fmt_stat, load_shapes, rotated, summarize_shapes,
                               worker_results)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: TCP payload bytes per Ethernet frame byte at MTU 1500 (mxnet_ssp.lab.testbed.measure)
PAYLOAD_SHARE = 1448 / 1514
MODELS = ('resnet50_v1', 'cifar_resnet110_v1', 'cifar_resnet20_v1', 'alexnet')
LAYOUTS = ('2x1', '2x2', '4x1', '4x2')       # workers x servers
# (timed steps, warm-up steps) per model
DEFAULT_STEPS = {'cifar_resnet20_v1': (10, 2), 'cifar_resnet110_v1': (8, 2),
                 'resnet50_v1': (3, 1), 'alexnet': (3, 1)}
QUICK_STEPS = {'cifar_resnet20_v1': (2, 1), 'cifar_resnet110_v1': (3, 1),
               'resnet50_v1': (2, 1), 'alexnet': (2, 1)}
JOB_TIMEOUT = 420          # seconds per job
#: a job starts when the 1-minute load average is below this (waiting up to LOAD_WAIT s), and
#: one that started above it is run again.  The load after the job is printed, not used: on a
#: 2-core machine a ResNet-50 job of 5 processes by itself lifts the 1-minute load to 3-4.5.
LOAD_LIMIT = 3.0
LOAD_WAIT = 90
#: how many times a job is run again for load before its figures are kept, marked
LOAD_RETRIES = 2


def settled_load(limit=LOAD_LIMIT, wait=LOAD_WAIT):
    """The 1-minute load average, once below `limit` or after `wait` seconds."""
    deadline = time.monotonic() + wait
    load = os.getloadavg()[0]
    while load > limit and time.monotonic() < deadline:
        time.sleep(5)              # waiting for the machine to settle, not synchronization
        load = os.getloadavg()[0]
    return load
COMPRESSION = {'type': '2bit', 'threshold': 0.5}


class Config:
    def __init__(self, key, label, store, env, compression=False, ours=False, api='trainer'):
        self.key, self.label, self.store, self.env = key, label, store, env
        self.compression, self.ours, self.api = compression, ours, api


CONFIGS = [
    Config('native_async', "MXNet's dist_async", 'dist_async', {'MXNET_SSP_WRAP_ASYNC': '0'}),
    Config('ours_async', 'ours dist_async', 'dist_async', {'MXNET_SSP_WRAP_ASYNC': '1'},
           ours=True),
    Config('ours_ssp', 'ours dist_ssp s=3', 'dist_ssp', {'MXNET_SSP_STALENESS': '3'}, ours=True),
    Config('ours_sync', 'ours dist_sync (BSP, bucketed)', 'dist_sync',
           {'MXNET_SSP_WRAP_SYNC': '1'}, ours=True),
    # on request
    Config('native_sync', "MXNet's dist_sync", 'dist_sync', {'MXNET_SSP_WRAP_SYNC': '0'}),
    # gradient compression: MXNet 1.9.1's gluon.Trainer sends pushpull, which MXNet's dist
    # stores refuse with compression, so these drive the store as Module does (push, pull;
    # ps_step_job --api kv), each beside the same without compression
    Config('native_async_kv', "MXNet's dist_async, push+pull", 'dist_async',
           {'MXNET_SSP_WRAP_ASYNC': '0'}, api='kv'),
    Config('native_async_2bit', "MXNet's dist_async, push+pull, 2bit", 'dist_async',
           {'MXNET_SSP_WRAP_ASYNC': '0'}, compression=True, api='kv'),
    Config('ours_async_2bit', 'dist_async (our name, handed to MXNet), push+pull, 2bit',
           'dist_async', {'MXNET_SSP_WRAP_ASYNC': '1'}, compression=True, api='kv'),
    Config('native_sync_kv', "MXNet's dist_sync, push+pull", 'dist_sync',
           {'MXNET_SSP_WRAP_SYNC': '0'}, api='kv'),
    Config('native_sync_2bit', "MXNet's dist_sync, push+pull, 2bit", 'dist_sync',
           {'MXNET_SSP_WRAP_SYNC': '0'}, compression=True, api='kv'),
    Config('ours_sync_2bit', 'dist_sync (our name, handed to MXNet), push+pull, 2bit',
           'dist_sync', {'MXNET_SSP_WRAP_SYNC': '1'}, compression=True, api='kv'),
]
# the sizes a job on one host gets (4 MiB buckets, no chunks, no window: the data path before
# the pipeline), each beside its store with the defaults it gets across hosts (every host here
# is another address: the three settings unset, buckets fitted to the model and 512 KiB
# chunks through a window of 4); --env sets others
for _c in [c for c in CONFIGS if c.ours and not c.compression]:
    CONFIGS.append(Config(_c.key + '_one_host', _c.label + ", one host's sizes", _c.store,
                          dict(_c.env, MXNET_SSP_CHUNK_BYTES='0', MXNET_SSP_CHUNK_WINDOW='0',
                               MXNET_SSP_BUCKET_BYTES=str(4 << 20)), ours=True))
del _c
BY_KEY = {c.key: c for c in CONFIGS}
DEFAULT_STORES = ('native_async', 'ours_async', 'ours_ssp', 'ours_sync')


# ---------------------------------------------------------------- the floor

def wire_floor(nbytes, workers, servers, rate_bits):
    """{'worker_bytes', 'server_bytes', 'bottleneck', 's'}: the wire floor of one step."""
    server_bytes = workers * nbytes / servers
    worst = max(nbytes, server_bytes)
    return {'worker_bytes': nbytes, 'server_bytes': server_bytes,
            'bottleneck': 'server link' if server_bytes > nbytes else 'worker link',
            's': 8.0 * worst / (rate_bits * PAYLOAD_SHARE)}


def parse_layout(text):
    """'4x2' -> (4 workers, 2 servers)."""
    w, sep, s = text.partition('x')
    if not sep or not w.isdigit() or not s.isdigit() or int(w) < 1 or int(s) < 1:
        raise ValueError('--layouts: %r is not WORKERSxSERVERS (e.g. 4x2)' % text)
    return int(w), int(s)


# ---------------------------------------------------------------- the cluster

def testbed(prefix, *args, timeout=300):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    return subprocess.run([sys.executable, '-m', 'mxnet_ssp.lab.testbed', '--prefix', prefix]
                          + list(args), env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def free_port_in(namespace):
    """A TCP port free now in `namespace` (bound to port 0 there, read, closed)."""
    code = ('import socket; s = socket.socket(); s.bind(("", 0)); '
            'print(s.getsockname()[1])')
    out = subprocess.run(['ip', 'netns', 'exec', namespace, sys.executable, '-c', code],
                         capture_output=True, text=True, check=True, timeout=60)
    return int(out.stdout.strip())


def placement(workers, servers):
    """[(role, index, host index)]: scheduler on host0, servers, then workers, one per host."""
    return ([('scheduler', 0, 0)] + [('server', i, 1 + i) for i in range(servers)]
            + [('worker', j, 1 + servers + j) for j in range(workers)])


def _stop_all(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


def run_job(state, config, model, workers, servers, steps, warmup, out, extra_env=None):
    """One job on the cluster of `state`; the list of worker result dicts (ps_step_job)."""
    from mxnet_ssp.launch.settings import dmlc_env, task_env
    hosts = state['hosts']
    port = free_port_in(hosts[0]['namespace'])
    root_uri = hosts[0]['address']
    base = dict(os.environ, OMP_NUM_THREADS='1', MXNET_SSP_METRICS_DIR='off', PYTHONPATH=ROOT)
    for k in ('MXNET_SSP_BUCKET_BYTES', 'MXNET_SSP_CHUNK_BYTES', 'MXNET_SSP_CHUNK_WINDOW',
              'MXNET_SSP_STALENESS', 'MXNET_SSP_WRAP_ASYNC', 'MXNET_SSP_WRAP_SYNC',
              'DMLC_NODE_HOST', 'DMLC_INTERFACE'):
        base.pop(k, None)
    base.update(config.env)
    if config.ours and extra_env:
        base.update(extra_env)
    cmd = [sys.executable, '-m', 'benchmarks.ps_step_job', '--kvstore', config.store,
           '--shapes', SHAPES_FILE, '--model', model, '--steps', str(steps),
           '--warmup', str(warmup), '--out', out]
    if config.api != 'trainer':
        cmd += ['--api', config.api]
    if config.compression:
        cmd += ['--compression', COMPRESSION['type'], '--threshold', str(COMPRESSION['threshold'])]
    os.makedirs(out, exist_ok=True)
    procs, logs = [], []
    try:
        for role, index, h in placement(workers, servers):
            host = hosts[h]
            env = dict(base)
            env.update(dmlc_env(role, root_uri, port, workers, servers))
            if role != 'scheduler':
                env.update(task_env('ssh', role, index, workers))
            env['DMLC_NODE_HOST'] = host['address']
            env['MXNET_SSP_LAUNCH_INDEX'] = str(index)
            log = open(os.path.join(out, '%s-%d.log' % (role, index)), 'w')
            logs.append(log)
            procs.append(subprocess.Popen(['ip', 'netns', 'exec', host['namespace']] + cmd,
                                          env=env, cwd=ROOT, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True))
        deadline = time.monotonic() + JOB_TIMEOUT
        failed = None
        for (role, index, _), p in zip(placement(workers, servers), procs):
            try:
                rc = p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                failed = '%s %d still running after %d s' % (role, index, JOB_TIMEOUT)
                break
            if rc != 0:
                failed = '%s %d exited %d' % (role, index, rc)
                break
        if failed:
            _stop_all(procs)
            tails = []
            for role, index, _ in placement(workers, servers):
                with open(os.path.join(out, '%s-%d.log' % (role, index)), errors='replace') as f:
                    tails.append('--- %s %d:\n%s' % (role, index, f.read()[-1500:]))
            raise RuntimeError('%s %s %dx%d: %s\n%s' % (model, config.label, workers, servers,
                                                         failed, '\n'.join(tails)))
    finally:
        _stop_all(procs)
        for log in logs:
            log.close()
    return worker_results(out, workers, '%s %s %dx%d' % (model, config.label, workers, servers))


def job_figures(results, floor_s):
    """One job's figures: ms/step, step / floor, bytes per server over rank 0's window."""
    ms = statistics.mean(1e3 * statistics.median(r['step_s']) for r in results)
    first_ms = statistics.mean(1e3 * statistics.median(r['first_layer_s']) for r in results
                               ) if all(r.get('first_layer_s') for r in results) else None
    rank0 = min(results, key=lambda r: r['rank'])
    steps = len(rank0['step_s'])
    per_server = [None if n is None else {'rx': n['rx'] / steps, 'tx': n['tx'] / steps}
                  for n in rank0['net_servers']]
    totals = [None if n is None else n['rx'] + n['tx'] for n in per_server]
    spread = (max(totals) / min(totals) if len(totals) > 1 and None not in totals
              and min(totals) > 0 else None)
    workers_net = [r['net_self'] for r in results if r.get('net_self')]
    return {'ms': ms, 'first_ms': first_ms, 'over_floor': ms / (1e3 * floor_s),
            'server_bytes_per_step': per_server, 'server_spread': spread,
            'worker_bytes_per_step': [{'rx': n['rx'] / len(r['step_s']),
                                       'tx': n['tx'] / len(r['step_s'])}
                                      for r, n in zip(results, workers_net)],
            'worker_cpu_ms': statistics.mean(1e3 * r['worker_cpu_s'] / len(r['step_s'])
                                             for r in results),
            'node_hosts': sorted(r.get('node_host') or '' for r in results),
            'root_uri': sorted({r['root_uri'] for r in results}),
            'bytes': rank0['bytes'], 'arrays': rank0['arrays'], 'steps': steps}


# ---------------------------------------------------------------- report

def table(model, summary, rate, cells, layouts, configs):
    arrays, elements, nbytes, _ = summary
    lines = ['### %s at %s: %d arrays, %.1f MB' % (model, rate, arrays, nbytes / 1e6), '',
             '| W x S | configuration | ms/step | first layer back ms | wire floor ms '
             "| step / floor | MXNet's dist_async / this | MB per step per server (in + out) "
             '| largest / smallest server |', '|---|---|---:|---:|---:|---:|---:|---:|---:|']
    for w, s in layouts:
        base = [c['ms'] for c in cells.get((w, s, 'native_async'), [])]
        for config in configs:
            runs = cells.get((w, s, config.key))
            if not runs:
                continue
            ms = [c['ms'] for c in runs]
            per_server = []
            for i in range(s):
                vals = [(c['server_bytes_per_step'][i]['rx'] + c['server_bytes_per_step'][i]['tx'])
                        / 1e6 for c in runs if c['server_bytes_per_step'][i] is not None]
                per_server.append(fmt_stat(vals, 1))
            firsts = [c['first_ms'] for c in runs if c.get('first_ms') is not None]
            lines.append('| %dx%d | %s | %s | %s | %.0f | %s | %s | %s | %s |' % (
                w, s, config.label, fmt_stat(ms, 0), fmt_stat(firsts, 0) if firsts else '',
                1e3 * runs[0]['floor_s'],
                fmt_stat([c['over_floor'] for c in runs], 2),
                fmt_stat([b / m for b, m in zip(base, ms)], 2) if config.key != 'native_async'
                else '', ' / '.join(per_server),
                fmt_stat([c['server_spread'] for c in runs if c['server_spread']], 3)
                if s > 1 else ''))
    return '\n'.join(lines)


#: issue 56's goals for one (model, layout, rate): (step / floor at most, MXNet's own /
#: this at least), from the medians
GOALS = {('resnet50_v1', 2, 2, 1e9): (1.15, 1.15), ('cifar_resnet110_v1', 2, 2, 1e9): (1.6, None)}


def goals(cells, layouts, configs, models, rate_bits=1e9):
    """Lines marking each goal met / not met: every row of ours not slower than MXNet's own
    store of its kind (dist_sync against MXNet's dist_sync when it ran, else dist_async)
    beyond the trials' spread (the fastest trial of ours slower than the slowest of
    MXNet's), and :data:`GOALS`."""
    out = []
    for model in models:
        for w, s in layouts:
            for config in configs:
                runs = cells.get((model, w, s, config.key))
                if not runs or not config.ours:
                    continue
                ratio = statistics.median(c['over_floor'] for c in runs)
                out.append('%s %dx%d %s: step / floor %.2f' % (model, w, s, config.label, ratio))
                mine = 'native_sync' if config.store == 'dist_sync' else 'native_async'
                base = cells.get((model, w, s, mine)) or cells.get((model, w, s, 'native_async'))
                if base:
                    name = BY_KEY[mine].label if cells.get((model, w, s, mine)) else \
                        BY_KEY['native_async'].label
                    vs = statistics.median(b['ms'] for b in base) / statistics.median(
                        c['ms'] for c in runs)
                    slower = min(c['ms'] for c in runs) > max(b['ms'] for b in base)
                    out.append('%s %dx%d %s: %s / this %.2f (goal: not slower beyond the '
                               'spread): %s' % (model, w, s, config.label, name, vs,
                                                'NOT met' if slower else 'met'))
                goal = GOALS.get((model, w, s, rate_bits))
                if goal is None:
                    continue
                floor_goal, speed_goal = goal
                out.append('%s %dx%d %s: step / floor %.2f (goal <= %g): %s'
                           % (model, w, s, config.label, ratio, floor_goal,
                              'met' if ratio <= floor_goal else 'NOT met'))
                native = cells.get((model, w, s, 'native_async'))
                if speed_goal is not None and native and config.store != 'dist_sync':
                    vs = statistics.median(b['ms'] for b in native) / statistics.median(
                        c['ms'] for c in runs)
                    out.append("%s %dx%d %s: MXNet's dist_async / this %.2f (goal >= %g): %s"
                               % (model, w, s, config.label, vs, speed_goal,
                                  'met' if vs >= speed_goal else 'NOT met'))
    return out


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--models', default=','.join(MODELS))
    p.add_argument('--layouts', default=','.join(LAYOUTS), help='WORKERSxSERVERS, comma-separated')
    p.add_argument('--stores', default=','.join(DEFAULT_STORES),
                   help='comma-separated, from %s' % ','.join(BY_KEY))
    p.add_argument('--rate', default='1gbit', help='every link, each direction (tc units)')
    p.add_argument('--trials', type=int, default=3)
    p.add_argument('--steps', type=int, default=None)
    p.add_argument('--warmup', type=int, default=None)
    p.add_argument('--quick', action='store_true')
    p.add_argument('--prefix', default='wst-', help='the testbed prefix (default wst-)')
    p.add_argument('--out', default='wire_step_out')
    p.add_argument('--env', action='append', default=[], metavar='NAME=VALUE',
                   help='a setting for every configuration of ours (after its own; repeatable)')
    args = p.parse_args(argv)
    args.models = [m for m in args.models.split(',') if m]
    try:
        args.layouts = [parse_layout(t) for t in args.layouts.split(',') if t]
    except ValueError as err:
        p.error(str(err))
    keys = [k for k in args.stores.split(',') if k]
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown:
        p.error('--stores: unknown %s; accepted: %s' % (unknown, ','.join(BY_KEY)))
    args.configs = [BY_KEY[k] for k in keys]
    args.extra_env = {}
    for item in args.env:
        name, sep, value = item.partition('=')
        if not sep or not name.startswith('MXNET_SSP_'):
            p.error('--env: %r is not MXNET_SSP_NAME=VALUE' % item)
        args.extra_env[name] = value
    from mxnet_ssp.lab.testbed.settings import TestbedError, check_prefix, parse_rate
    try:
        args.rate_bits = parse_rate(args.rate)
        check_prefix(args.prefix)
    except TestbedError as err:
        p.error(str(err))
    shapes = load_shapes()
    for m in args.models:
        if m not in shapes:
            p.error('--models: %s is not in %s; accepted: %s' % (m, SHAPES_FILE, ','.join(shapes)))
    return args


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    shapes = load_shapes()
    hosts = 1 + max(w + s for w, s in args.layouts)
    os.makedirs(args.out, exist_ok=True)
    steps_of = QUICK_STEPS if args.quick else DEFAULT_STEPS
    up = testbed(args.prefix, 'up', '--hosts', str(hosts), '--rate', args.rate)
    sys.stderr.write(up.stdout)
    state_file = '/run/%stestbed/testbed.json' % args.prefix
    if up.returncode == 1 and os.path.exists(state_file):
        # up, but a link measured more than 10% off: on a busy machine the measuring
        # processes, not the link, fall short; the figures are kept in results.json
        sys.stderr.write('wire_step: going on; the measured rates are in results.json\n')
    elif up.returncode != 0:
        sys.stderr.write(up.stderr)
        testbed(args.prefix, 'down')
        sys.exit('wire_step: the testbed did not come up (exit %d)' % up.returncode)
    cells, failures, t_start = {}, [], time.time()
    state = None
    try:
        with open(state_file) as f:
            state = json.load(f)
        for trial in range(args.trials):
            for model in args.models:
                steps, warmup = steps_of.get(model, (3, 1))
                steps = args.steps or steps
                warmup = warmup if args.warmup is None else args.warmup
                nbytes = summarize_shapes(shapes[model]['params'])[2]
                for w, s in args.layouts:
                    floor = wire_floor(nbytes, w, s, args.rate_bits)
                    for config in rotated(args.configs, trial):
                        out = os.path.join(args.out, 'trial%d' % trial, model, '%dx%d' % (w, s),
                                           config.key)
                        try:
                            for attempt in range(LOAD_RETRIES + 1):
                                load = settled_load()
                                results = run_job(state, config, model, w, s, steps, warmup,
                                                  out, args.extra_env)
                                load_after = os.getloadavg()[0]
                                if load <= LOAD_LIMIT:
                                    break
                                sys.stderr.write('trial %d %s %dx%d %s: load %.1f / %.1f '
                                                 'passed %g: run again\n'
                                                 % (trial, model, w, s, config.label, load,
                                                    load_after, LOAD_LIMIT))
                        except RuntimeError as err:      # said, kept, and the run goes on
                            failures.append({'trial': trial, 'model': model, 'workers': w,
                                             'servers': s, 'config': config.key,
                                             'error': str(err)[:4000]})
                            sys.stderr.write('trial %d %s %dx%d %s: FAILED: %s\n'
                                             % (trial, model, w, s, config.label,
                                                str(err)[:2000]))
                            continue
                        fig = job_figures(results, floor['s'])
                        fig.update(load_before=load, load_after=load_after,
                                   load_passed=load > LOAD_LIMIT,
                                   floor_s=floor['s'], floor=floor)
                        cells.setdefault((model, w, s, config.key), []).append(fig)
                        sys.stderr.write('trial %d %s %dx%d %s: %.0f ms/step, first layer '
                                         'back %s ms, %.2f x floor (%.0f ms), load %.1f before, '
                                         '%.1f after (%.0f s so far)\n'
                                         % (trial, model, w, s, config.label, fig['ms'],
                                            '%.0f' % fig['first_ms'] if fig['first_ms'] else '-',
                                            fig['over_floor'], 1e3 * floor['s'], load,
                                            load_after, time.time() - t_start))
    finally:
        down = testbed(args.prefix, 'down')
        if down.returncode != 0:
            sys.stderr.write(down.stdout + down.stderr)
    measured = {h['name']: h.get('measured') for h in (state or {}).get('hosts', [])}
    report = {'options': {k: v for k, v in vars(args).items() if k != 'configs'},
              'configs': [c.key for c in args.configs], 'links_measured': measured,
              'cells': [{'model': m, 'workers': w, 'servers': s, 'config': k, 'trials': v}
                        for (m, w, s, k), v in sorted(cells.items())],
              'goals': goals(cells, args.layouts, args.configs, args.models, args.rate_bits),
              'failures': failures}
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump(report, f, indent=1)
    loads = [f['load_before'] for figs in cells.values() for f in figs] or [float('nan')]
    afters = [f['load_after'] for figs in cells.values() for f in figs] or [float('nan')]
    passed = sum(f['load_passed'] for figs in cells.values() for f in figs)
    print('links: %s each way; scheduler on host0, server i on host 1+i, worker j on host '
          '1+S+j' % args.rate)
    print('1-minute load average before each job: median %.1f, range %.1f-%.1f (%d cores)'
          % (statistics.median(loads), min(loads), max(loads), os.cpu_count()))
    print('1-minute load average after each job: median %.1f, range %.1f-%.1f; %d job(s) kept '
          'that started with a load above %g after %d reruns' % (statistics.median(afters), min(afters),
                                                   max(afters), passed, LOAD_LIMIT,
                                                   LOAD_RETRIES))
    for model in args.models:
        per_model = {(w, s, k): v for (m, w, s, k), v in cells.items() if m == model}
        print()
        print(table(model, summarize_shapes(shapes[model]['params']), args.rate, per_model,
                    args.layouts, args.configs))
    print()
    for line in report['goals']:
        print(line)
    for f in failures:
        print('FAILED: trial %(trial)d %(model)s %(workers)dx%(servers)d %(config)s: ' % f
              + f['error'].splitlines()[0])
    print('\n%d trial(s); total %.0f s' % (args.trials, time.time() - t_start))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
