"""Cost of one parameter-server step on the DSSP paper's models, with no forward pass.

For each model (the trainable parameter shapes of GluonCV's ``cifar_resnet20_v1``,
``cifar_resnet110_v1`` and ``resnet50_v1``, shipped in
``benchmarks/param_shapes.json``) and each worker count W, runs a job of one
scheduler, one server and W workers on 127.0.0.1 (``python -m mxnet_ssp.launch
--launcher local``, running ``benchmarks/ps_step_job.py``) per store
configuration.  Each worker gives its Parameters fixed gradients and times
``gluon.Trainer.step`` (SGD, momentum 0.9, wd 1e-4, wd_mult 0 on BN gamma/beta
and biases, updates on the server) plus ``mx.nd.waitall()``.

Configurations (one job each):

- ``native dist_async`` (``MXNET_SSP_WRAP_ASYNC=0``) and ``native dist_sync``
  (``MXNET_SSP_WRAP_SYNC=0``);
- mxnet-ssp's bucketed ``dist_sync`` (BSP), bucketing off and default;
- mxnet-ssp's ``dist_async`` wrapper and ``dist_ssp`` (``MXNET_SSP_STALENESS=3``),
  each with ``MXNET_SSP_BUCKET_BYTES=0`` ("bucketing off") and with the
  variable unset ("bucketing default");
- floor (a): the same bytes as ONE array through native ``dist_async`` (and, BSP's own
  floor, through native ``dist_sync``);
- floor (b): a bare loopback TCP push + pull of the same bytes (send to a sink
  process, receive the same number of bytes back), no MXNet.

Figures: ms/step = median over a worker's timed steps, then the mean over the
workers; server CPU ms/step = the server process's CPU time (``/proc``) during
rank 0's timed steps divided by their number (with W workers that window also
carries the other workers' steps); worker CPU ms/step likewise for the
workers' own processes (mean over workers).  ``--trials T`` repeats the whole
set, the configurations taking turns within each trial (in an order turned by
one place per trial: :func:`rotated`), and prints
median [min-max].  The scheduler address the workers saw (``DMLC_PS_ROOT_URI``,
127.0.0.1 under the local launcher) and the load average before each job are
printed and kept in ``<out>/results.json``; each job's log is
``<out>/trial<t>/<model>/w<W>/<config>/job.log``.

    OMP_NUM_THREADS=1 python -m benchmarks.ps_step --trials 1 --out ps_step_out
    python -m benchmarks.ps_step --regenerate-shapes     # needs gluoncv
"""
import argparse
import json
import multiprocessing
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

SHAPES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'param_shapes.json')
MODELS = ('cifar_resnet20_v1', 'cifar_resnet110_v1', 'resnet50_v1')
# (timed steps, warm-up steps) per model: ResNet-50 moves ~100 MB each way per step
DEFAULT_STEPS = {'cifar_resnet20_v1': (40, 5), 'cifar_resnet110_v1': (20, 3), 'resnet50_v1': (5, 2)}
QUICK_STEPS = {'cifar_resnet20_v1': (10, 2), 'cifar_resnet110_v1': (6, 2), 'resnet50_v1': (2, 1)}
NO_WD = re.compile(r'(gamma|beta|bias)$')   # what GluonCV's scripts exempt from weight decay
JOB_TIMEOUT = 600      # seconds; the launcher stops the job at this, we kill it a little later


class Config:
    """One store configuration: the store name given to Trainer and its environment."""

    def __init__(self, key, label, store, env, one_array=False):
        self.key, self.label, self.store, self.env, self.one_array = key, label, store, env, one_array


CONFIGS = [
    Config('native_async', 'native dist_async', 'dist_async', {'MXNET_SSP_WRAP_ASYNC': '0'}),
    Config('native_sync', 'native dist_sync', 'dist_sync', {'MXNET_SSP_WRAP_SYNC': '0'}),
    Config('ours_sync_off', 'ours dist_sync (BSP), bucketing off', 'dist_sync',
           {'MXNET_SSP_WRAP_SYNC': '1', 'MXNET_SSP_BUCKET_BYTES': '0'}),
    Config('ours_sync_default', 'ours dist_sync (BSP), bucketing default', 'dist_sync',
           {'MXNET_SSP_WRAP_SYNC': '1'}),
    Config('ours_async_off', 'ours dist_async, bucketing off', 'dist_async',
           {'MXNET_SSP_WRAP_ASYNC': '1', 'MXNET_SSP_BUCKET_BYTES': '0'}),
    Config('ours_async_default', 'ours dist_async, bucketing default', 'dist_async',
           {'MXNET_SSP_WRAP_ASYNC': '1'}),
    Config('ours_ssp_off', 'ours dist_ssp s=3, bucketing off', 'dist_ssp',
           {'MXNET_SSP_STALENESS': '3', 'MXNET_SSP_BUCKET_BYTES': '0'}),
    Config('ours_ssp_default', 'ours dist_ssp s=3, bucketing default', 'dist_ssp',
           {'MXNET_SSP_STALENESS': '3'}),
    Config('floor_one_array', 'floor (a): one array, native dist_async', 'dist_async',
           {'MXNET_SSP_WRAP_ASYNC': '0'}, one_array=True),
    Config('floor_one_array_sync', 'floor (a, BSP): one array, native dist_sync', 'dist_sync',
           {'MXNET_SSP_WRAP_SYNC': '0'}, one_array=True),
]
CONFIG_KEYS = [c.key for c in CONFIGS]
# on request only (--stores): elastic mode's cost (docs/elastic.md)
CONFIGS += [
    Config('ours_async_elastic', 'ours dist_async, bucketing default, elastic', 'dist_async',
           {'MXNET_SSP_WRAP_ASYNC': '1', 'MXNET_SSP_ELASTIC': '1'}),
    Config('ours_ssp_elastic', 'ours dist_ssp s=3, bucketing default, elastic', 'dist_ssp',
           {'MXNET_SSP_STALENESS': '3', 'MXNET_SSP_ELASTIC': '1'}),
    # the bucket copies by MXNet alone (MXNET_SSP_HOST_COPIES=0; docs/stores.md)
    Config('ours_async_mxnet_copies', "ours dist_async, bucketing default, MXNet's copies",
           'dist_async', {'MXNET_SSP_WRAP_ASYNC': '1', 'MXNET_SSP_HOST_COPIES': '0'}),
    Config('ours_ssp_mxnet_copies', "ours dist_ssp s=3, bucketing default, MXNet's copies",
           'dist_ssp', {'MXNET_SSP_STALENESS': '3', 'MXNET_SSP_HOST_COPIES': '0'}),
    # the servers' SGD by MXNet's operator (MXNET_SSP_HOST_UPDATES=0; docs/stores.md)
    Config('ours_async_mxnet_updates', "ours dist_async, bucketing default, MXNet's SGD",
           'dist_async', {'MXNET_SSP_WRAP_ASYNC': '1', 'MXNET_SSP_HOST_UPDATES': '0'}),
    Config('ours_ssp_mxnet_updates', "ours dist_ssp s=3, bucketing default, MXNet's SGD",
           'dist_ssp', {'MXNET_SSP_STALENESS': '3', 'MXNET_SSP_HOST_UPDATES': '0'}),
]
EXTRA_KEYS = ['ours_async_elastic', 'ours_ssp_elastic', 'ours_async_mxnet_copies',
              'ours_ssp_mxnet_copies', 'ours_async_mxnet_updates', 'ours_ssp_mxnet_updates']
OURS = ('ours_async_off', 'ours_async_default', 'ours_ssp_off', 'ours_ssp_default')


# ---------------------------------------------------------------- parameter shapes

def regenerate_shapes(path=SHAPES_FILE, models=MODELS):
    """Write the trainable parameter shapes of `models` from GluonCV's model zoo to `path`.

    Trainable = ``grad_req != 'null'`` (BN running mean/var are left out);
    ``no_wd`` marks the BN gamma/beta and biases.  Needs gluoncv.
    """
    import mxnet as mx
    from gluoncv import model_zoo
    out = {}
    for name in models:
        net = model_zoo.get_model(name)
        net.initialize()
        side = 32 if name.startswith('cifar') else 224
        net(mx.nd.zeros((1, 3, side, side)))     # infers the deferred shapes
        params = [[p.name, list(p.shape), bool(NO_WD.search(p.name))]
                  for p in net.collect_params().values() if p.grad_req != 'null']
        out[name] = {'source': 'gluoncv.model_zoo.get_model(%r), input 1x3x%dx%d' % (name, side, side),
                     'params': params}
    with open(path, 'w') as f:
        f.write('{\n')
        for i, name in enumerate(out):
            f.write('%s: {"source": %s, "params": [\n' % (json.dumps(name), json.dumps(out[name]['source'])))
            f.write(',\n'.join('  ' + json.dumps(e) for e in out[name]['params']))
            f.write(']}%s\n' % (',' if i < len(out) - 1 else ''))
        f.write('}\n')
    return out


def load_shapes(path=SHAPES_FILE):
    """{model: {'source': str, 'params': [[name, shape, no_wd], ...]}} from the shipped JSON."""
    with open(path) as f:
        return json.load(f)


def summarize_shapes(entries):
    """(arrays, float32 elements, bytes, arrays exempt from weight decay) of a params list."""
    elements = 0
    for _, shape, _ in entries:
        n = 1
        for d in shape:
            n *= d
        elements += n
    return len(entries), elements, 4 * elements, sum(1 for e in entries if e[2])


# ---------------------------------------------------------------- floor (b): bare TCP

def _sink(listener, nbytes):
    """Child process: per connection, read `nbytes`, then send `nbytes` back."""
    buf = bytearray(nbytes)
    conn, _ = listener.accept()
    with conn:
        view = memoryview(buf)
        while True:
            got = 0
            while got < nbytes:
                n = conn.recv_into(view[got:])
                if n == 0:
                    return
                got += n
            conn.sendall(view)


def tcp_floor(nbytes, reps):
    """Median seconds to send `nbytes` to a sink process over 127.0.0.1 and receive `nbytes` back."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    addr = listener.getsockname()
    ctx = multiprocessing.get_context('fork')
    child = ctx.Process(target=_sink, args=(listener, nbytes), daemon=True)
    child.start()
    listener.close()
    times = []
    try:
        with socket.create_connection(addr, timeout=60) as s:
            data = memoryview(bytearray(nbytes))
            back = memoryview(bytearray(nbytes))
            for _ in range(reps + 1):           # the first round trip is warm-up
                t0 = time.perf_counter()
                s.sendall(data)
                got = 0
                while got < nbytes:
                    n = s.recv_into(back[got:])
                    if n == 0:
                        raise RuntimeError('TCP floor: the sink closed the connection')
                    got += n
                times.append(time.perf_counter() - t0)
    finally:
        child.terminate()
        child.join(10)
    return statistics.median(times[1:])


# ---------------------------------------------------------------- one job

def run_job(config, model, workers, steps, warmup, out, shapes_file=SHAPES_FILE):
    """Run one job; returns the list of worker result dicts (see ps_step_job)."""
    env = dict(os.environ, OMP_NUM_THREADS='1', MXNET_SSP_METRICS_DIR='off')
    env.pop('MXNET_SSP_BUCKET_BYTES', None)
    env.pop('MXNET_SSP_STALENESS', None)
    env.pop('MXNET_SSP_HOST_COPIES', None)
    env.pop('MXNET_SSP_HOST_UPDATES', None)
    env.update(config.env)
    cmd = [sys.executable, '-m', 'mxnet_ssp.launch', '-n', str(workers), '-s', '1',
           '--launcher', 'local', '--timeout', str(JOB_TIMEOUT),
           sys.executable, '-m', 'benchmarks.ps_step_job', '--kvstore', config.store,
           '--shapes', shapes_file, '--model', model, '--steps', str(steps),
           '--warmup', str(warmup), '--out', out]
    if config.one_array:
        cmd.append('--one-array')
    os.makedirs(out, exist_ok=True)
    log_path = os.path.join(out, 'job.log')
    with open(log_path, 'w') as log:
        # every process starts in this directory (the checkout), so imports come from it
        proc = subprocess.Popen(cmd, env=env, cwd=os.getcwd(), stdout=log, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait(timeout=JOB_TIMEOUT + 60)
        finally:
            if proc.poll() is None:       # the launcher stops its job's processes on SIGTERM
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    if rc != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError('%s %s W=%d: launcher exited %d; log %s:\n%s'
                           % (model, config.label, workers, rc, log_path, tail))
    return worker_results(out, workers, '%s %s W=%d' % (model, config.label, workers))


def job_figures(results):
    """ms/step (median per worker, mean over workers), server and worker CPU ms/step."""
    steps = len(results[0]['step_s'])
    ms = statistics.mean(1e3 * statistics.median(r['step_s']) for r in results)
    rank0 = min(results, key=lambda r: r['rank'])
    server = None if rank0['server_cpu_s'] is None else 1e3 * rank0['server_cpu_s'] / steps
    worker = statistics.mean(1e3 * r['worker_cpu_s'] / len(r['step_s']) for r in results)
    return {'ms': ms, 'server_cpu_ms': server, 'worker_cpu_ms': worker,
            'root_uri': sorted({r['root_uri'] for r in results}), 'arrays': results[0]['arrays'],
            'bytes': results[0]['bytes']}


# ---------------------------------------------------------------- tables

def worker_results(out, workers, what):
    """The ``worker-*.json`` results of one job in `out`, one per worker (RuntimeError naming
    `what` otherwise)."""
    results = []
    for name in sorted(os.listdir(out)):
        if name.startswith('worker-') and name.endswith('.json'):
            with open(os.path.join(out, name)) as f:
                results.append(json.load(f))
    if len(results) != workers:
        raise RuntimeError('%s: %d worker results in %s' % (what, len(results), out))
    return results


def fmt_stat(values, digits=1):
    """'12.3' for one value, 'median [min-max]' for several, '-' for none."""
    values = [v for v in values if v is not None]
    if not values:
        return '-'
    f = '%%.%df' % digits
    if len(values) == 1:
        return f % values[0]
    return (f + ' [' + f + '-' + f + ']') % (statistics.median(values), min(values), max(values))


def rotated(configs, trial):
    """The order the configurations run in at trial `trial`: turned by one place per trial,
    so that no configuration always follows the same one (the job before leaves the machine
    warm or busy: native dist_async's steps are ten times longer than the others')."""
    k = trial % len(configs) if configs else 0
    return configs[k:] + configs[:k]


def ratios(num, den):
    return [a / b for a, b in zip(num, den) if a is not None and b]


def table(model, shapes_summary, cells, tcp, workers_list):
    """Markdown table for one model.

    `cells[(workers, key)]` is the list over trials of job_figures dicts;
    `tcp` the list over trials of floor (b) in seconds.
    """
    arrays, elements, nbytes, no_wd = shapes_summary
    lines = ['### %s: %d arrays, %.2fM float32 parameters, %.1f MB (%d with wd_mult 0)'
             % (model, arrays, elements / 1e6, nbytes / 1e6, no_wd), '',
             '| W | configuration | ms/step | native dist_async / this '
             '| native dist_sync / this | this / floor (a) '
             '| server CPU ms/step | worker CPU ms/step |',
             '|---:|---|---:|---:|---:|---:|---:|---:|']
    for w in workers_list:
        base = [c['ms'] for c in cells[(w, 'native_async')]]
        base_sync = [c['ms'] for c in cells.get((w, 'native_sync'), [])]
        floor = [c['ms'] for c in cells[(w, 'floor_one_array')]]
        for config in CONFIGS:
            if (w, config.key) not in cells:       # not asked for
                continue
            runs = cells[(w, config.key)]
            ms = [c['ms'] for c in runs]
            lines.append('| %d | %s | %s | %s | %s | %s | %s | %s |' % (
                w, config.label, fmt_stat(ms),
                fmt_stat(ratios(base, ms), 2), fmt_stat(ratios(base_sync, ms), 2),
                fmt_stat(ratios(ms, floor), 2),
                fmt_stat([c['server_cpu_ms'] for c in runs]),
                fmt_stat([c['worker_cpu_ms'] for c in runs])))
        lines.append('| %d | floor (b): bare TCP push + pull, 1 connection | %s | | | | | |'
                     % (w, fmt_stat([1e3 * t for t in tcp])))
    return '\n'.join(lines)


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--models', default=','.join(MODELS), help='comma-separated, from %s' % (MODELS,))
    p.add_argument('--workers', default='1,2', help='comma-separated worker counts')
    p.add_argument('--stores', default=','.join(CONFIG_KEYS),
                   help='comma-separated configurations, from %s (and on request %s); '
                        'native_async and floor_one_array are always run (the ratios need '
                        'them)' % (CONFIG_KEYS, EXTRA_KEYS))
    p.add_argument('--steps', type=int, default=None,
                   help='timed steps per worker for every model (default per model: %s)'
                        % {m: s for m, (s, _) in DEFAULT_STEPS.items()})
    p.add_argument('--warmup', type=int, default=None, help='warm-up steps (default per model)')
    p.add_argument('--trials', type=int, default=1)
    p.add_argument('--tcp-reps', type=int, default=7)
    p.add_argument('--quick', action='store_true', help='few steps per job (%s)' % QUICK_STEPS)
    p.add_argument('--out', default='ps_step_out', help='job outputs and results.json go here')
    p.add_argument('--regenerate-shapes', action='store_true',
                   help='rewrite %s from GluonCV (needs gluoncv) and exit' % os.path.basename(SHAPES_FILE))
    p.add_argument('--bucket-bytes', default='',
                   help='comma-separated MXNET_SSP_BUCKET_BYTES values: one more configuration '
                        '(ours dist_async) for each')
    args = p.parse_args(argv)
    for n in [int(b) for b in args.bucket_bytes.split(',') if b]:
        key = 'ours_async_b%d' % n
        if key not in CONFIG_KEYS:
            CONFIGS.append(Config(key, 'ours dist_async, %d-byte buckets' % n, 'dist_async',
                                  {'MXNET_SSP_WRAP_ASYNC': '1', 'MXNET_SSP_BUCKET_BYTES': str(n)}))
            CONFIG_KEYS.append(key)
        args.stores += ',' + key
    args.models = [m for m in args.models.split(',') if m]
    args.workers = [int(w) for w in args.workers.split(',') if w]
    keys = set(args.stores.split(',')) | {'native_async', 'floor_one_array'}
    unknown = keys - set(CONFIG_KEYS) - set(EXTRA_KEYS)
    if unknown:
        p.error('--stores: unknown %s; known: %s' % (sorted(unknown),
                                                     ','.join(CONFIG_KEYS + EXTRA_KEYS)))
    args.configs = [c for c in CONFIGS if c.key in keys]
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.regenerate_shapes:
        for name, d in regenerate_shapes().items():
            print('%s: %d arrays, %d elements, %d bytes, %d no_wd' % ((name,) + summarize_shapes(d['params'])))
        return 0
    print('options: %s' % {k: v for k, v in vars(args).items() if k != 'configs'}, file=sys.stderr)
    # SIGTERM as an exception, so run_job's cleanup (stop the launcher, hence its job) runs
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    shapes = load_shapes()
    for m in args.models:
        if m not in shapes:
            sys.exit('--models: %s is not in %s (run --regenerate-shapes with it in MODELS)' % (m, SHAPES_FILE))
    steps_of = QUICK_STEPS if args.quick else DEFAULT_STEPS
    cells = {}
    tcp = {m: [] for m in args.models}
    t_start = time.time()
    for trial in range(args.trials):
        for model in args.models:
            steps, warmup = steps_of[model]
            steps = args.steps or steps
            warmup = warmup if args.warmup is None else args.warmup
            nbytes = summarize_shapes(shapes[model]['params'])[2]
            tcp[model].append(tcp_floor(nbytes, args.tcp_reps))
            print('trial %d %s floor (b) TCP: %.2f ms' % (trial, model, 1e3 * tcp[model][-1]), file=sys.stderr)
            for w in args.workers:
                for config in rotated(args.configs, trial):
                    out = os.path.join(args.out, 'trial%d' % trial, model, 'w%d' % w, config.key)
                    load = os.getloadavg()[0]   # other work on the machine shows here
                    fig = job_figures(run_job(config, model, w, steps, warmup, out))
                    fig['steps'] = steps
                    fig['load_before'] = load
                    cells.setdefault((model, w, config.key), []).append(fig)
                    print('trial %d %s W=%d %s: %.2f ms/step, server CPU %s ms/step (%.0f s so far)'
                          % (trial, model, w, config.label, fig['ms'], fmt_stat([fig['server_cpu_ms']]),
                             time.time() - t_start), file=sys.stderr)
    uris = sorted({u for figs in cells.values() for f in figs for u in f['root_uri']})
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump({'options': {k: v for k, v in vars(args).items() if k != 'configs'},
                   'configs': [c.key for c in args.configs], 'root_uris': uris,
                   'tcp_floor_s': tcp,
                   'cells': [{'model': m, 'workers': w, 'config': k, 'trials': v}
                             for (m, w, k), v in sorted(cells.items())]}, f, indent=1)
    loads = [f['load_before'] for figs in cells.values() for f in figs]
    print('DMLC_PS_ROOT_URI seen by the workers: %s' % ', '.join(uris))
    print('1-minute load average before each job: median %.1f, range %.1f-%.1f (%d cores)'
          % (statistics.median(loads), min(loads), max(loads), os.cpu_count()))
    for model in args.models:
        per_model = {(w, k): v for (m, w, k), v in cells.items() if m == model}
        for w in args.workers:
            for c in args.configs:
                per_model.setdefault((w, c.key), [])
        print()
        print(table(model, summarize_shapes(shapes[model]['params']), per_model, tcp[model], args.workers))
    print('\n%d trial(s); total %.0f s' % (args.trials, time.time() - t_start))
    return 0


if __name__ == '__main__':
    sys.exit(main())
