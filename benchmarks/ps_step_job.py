"""Benchmark job for ``benchmarks.ps_step``: parameter-server steps with no forward pass.

Run as every role of a job (scheduler, server, workers) by ``python -m
mxnet_ssp.launch``.  Each worker builds float32 CPU Parameters with the
shapes of one model (``--shapes FILE --model NAME``; ``--one-array`` makes a
single 1-D Parameter of the same total size instead), gives them fixed random
gradients once, and times ``trainer.step(batch_size)`` followed by
``mx.nd.waitall()`` (so a step ends when every pulled weight has arrived).

Outputs, in ``--out``:

- ``server-<launch index>.pid``: written by each server process before
  ``import mxnet`` starts its server loop, so a worker on the same machine
  can read the server's CPU time from ``/proc/<pid>/stat``;
- ``worker-<rank>.json``: per-step wall times (s) of the timed steps, this
  worker's CPU time over them, the servers' CPU time over the same window
  (None where ``/proc`` or the pid file is missing), the scheduler address it
  was given and the number and bytes of the arrays; and the bytes received and
  sent over the same window by this worker's network namespace (``net_self``)
  and by each server's (``net_servers``, from ``/proc/<pid>/net/dev``, which
  shows the namespace of that process: on the emulated cluster, each server's
  own link), loopback left out.

``--compression 2bit`` (with ``--threshold``) passes MXNet's gradient compression
to the Trainer (``compression_params``), or with ``--api kv`` to the store itself, which
the job then drives directly (push and pull per array, as Module does); a store that
refuses it ends the job.
"""
import argparse
import glob
import json
import os
import time

def proc_cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (all its threads), from /proc; None if unreadable."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b')') + 2:].split()    # fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')  # utime, stime


def net_bytes(pid='self'):
    """(received, sent) bytes of every interface but loopback in the network namespace of
    process `pid`, from /proc/<pid>/net/dev; None if unreadable."""
    try:
        with open('/proc/%s/net/dev' % pid) as f:
            lines = f.read().splitlines()[2:]
    except OSError:
        return None
    rx = tx = 0
    for line in lines:
        name, _, fields = line.partition(':')
        if name.strip() == 'lo':
            continue
        values = fields.split()
        rx, tx = rx + int(values[0]), tx + int(values[8])
    return rx, tx


def net_delta(before, after):
    if before is None or after is None:
        return None
    return {'rx': after[0] - before[0], 'tx': after[1] - before[1]}


def servers_cpu_seconds(pids):
    values = [proc_cpu_seconds(p) for p in pids]
    return None if not pids or None in values else sum(values)


def build_params(args, mx, gluon):
    """The job's gluon Parameters (float32, CPU), wd_mult 0 where the shapes file says no_wd."""
    with open(args.shapes) as f:
        entries = json.load(f)[args.model]['params']
    if args.one_array:
        entries = [['one_array_weight', [sum(_size(shape) for _, shape, _ in entries)], False]]
    params = []
    for name, shape, no_wd in entries:
        p = gluon.Parameter(name, shape=tuple(shape), dtype='float32')
        p.initialize(mx.init.Normal(0.01), ctx=mx.cpu())
        if no_wd:
            p.wd_mult = 0.0
        params.append(p)
    return params


def kv_steps(args, mx, params, compression):
    """(step function, store) driving the store directly, as Module.fit does: the
    optimizer on the servers, then per step a push of each gradient and a pull of each
    weight (highest priority first)."""
    kv = mx.kv.create(args.kvstore)
    if compression is not None:
        kv.set_gradient_compression(compression)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01, momentum=0.9, wd=1e-4,
                                      rescale_grad=1.0 / args.batch_size))
    keys = list(range(len(params)))
    kv.init(keys, [p.data() for p in params])
    kv.pull(keys, out=[p.data() for p in params])

    def step_once():
        for i, p in enumerate(params):
            kv.push(i, p.grad(), priority=-i)
        for i, p in enumerate(params):
            kv.pull(i, out=p.data(), priority=-i)
    return step_once, kv


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--kvstore', required=True)
    p.add_argument('--shapes', required=True)
    p.add_argument('--model', required=True)
    p.add_argument('--one-array', action='store_true')
    p.add_argument('--steps', type=int, required=True)
    p.add_argument('--warmup', type=int, required=True)
    p.add_argument('--batch-size', type=int, default=128)
    p.add_argument('--out', required=True)
    p.add_argument('--compression', default=None, help="MXNet's gradient compression type")
    p.add_argument('--threshold', type=float, default=0.5)
    p.add_argument('--api', choices=('trainer', 'kv'), default='trainer',
                   help='trainer: gluon.Trainer.step; kv: the KVStore\'s push and pull per '
                   'array, as Module does (MXNet 1.9.1\'s Trainer uses pushpull, which '
                   'MXNet\'s dist stores refuse with gradient compression)')
    args = p.parse_args()
    role = os.environ.get('DMLC_ROLE')
    if role == 'server':
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, 'server-%s.pid' % os.environ.get('MXNET_SSP_LAUNCH_INDEX', '0'))
        with open(path, 'w') as f:
            f.write(str(os.getpid()))
    import mxnet as mx            # scheduler and servers run their loop inside this import
    import mxnet_ssp  # noqa: F401
    from mxnet import gluon
    params = build_params(args, mx, gluon)
    compression = (None if args.compression is None else
                   {'type': args.compression, 'threshold': args.threshold})
    mx.random.seed(17)
    if args.api == 'kv':
        step_once, kv = kv_steps(args, mx, params, compression)
    else:
        trainer = gluon.Trainer(params, 'sgd', {'learning_rate': 0.01, 'momentum': 0.9,
                                                'wd': 1e-4},
                                kvstore=args.kvstore, compression_params=compression)
        kv = None
        # the gradients are set once, never by backward: the stale-gradient check must not
        # refuse them
        step_once = lambda: trainer.step(args.batch_size, ignore_stale_grad=True)  # noqa: E731
    for param in params:
        param.grad()[:] = mx.nd.random.normal(0, 1e-3, shape=param.shape)
    mx.nd.waitall()
    times, first = [], []
    cpu0 = srv0 = None
    server_pids = []
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            server_pids = [int(open(f).read()) for f in
                           sorted(glob.glob(os.path.join(args.out, 'server-*.pid')))]
            cpu0, srv0 = time.process_time(), servers_cpu_seconds(server_pids)
            thread0 = time.thread_time()
            net0 = net_bytes()
            net_srv0 = [net_bytes(pid) for pid in server_pids]
        t0 = time.perf_counter()
        step_once()
        # the first layer's weights back: what the next forward pass needs first
        params[0].data().wait_to_read()
        t1 = time.perf_counter()
        mx.nd.waitall()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
            first.append(t1 - t0)
    cpu = time.process_time() - cpu0
    thread_cpu = time.thread_time() - thread0      # this (the training) thread alone
    srv1 = servers_cpu_seconds(server_pids)
    net_self = net_delta(net0, net_bytes())
    net_servers = [net_delta(b, net_bytes(pid)) for b, pid in zip(net_srv0, server_pids)]
    kv = kv if kv is not None else trainer._kvstore
    with open(os.path.join(args.out, 'worker-%d.json' % kv.rank), 'w') as f:
        json.dump({'rank': kv.rank, 'kvstore': args.kvstore, 'model': args.model,
                   'one_array': args.one_array, 'arrays': len(params),
                   'bytes': 4 * sum(p.data().size for p in params),
                   'root_uri': os.environ.get('DMLC_PS_ROOT_URI'),
                   'step_s': times, 'first_layer_s': first, 'worker_cpu_s': cpu, 'thread_cpu_s': thread_cpu,
                   'server_cpu_s': None if srv0 is None or srv1 is None else srv1 - srv0,
                   'server_pids': server_pids, 'net_self': net_self,
                   'net_servers': net_servers, 'compression': compression,
                   'node_host': os.environ.get('DMLC_NODE_HOST'), 'api': args.api}, f)


if __name__ == '__main__':
    main()
