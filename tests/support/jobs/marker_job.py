"""A worker script for integration tests: every gradient is a visible marker.

Each worker p, at its step t (1-based), pushes for key 0 a gradient that is -1
at position p * T + (t - 1) and 0 elsewhere; the servers run plain SGD with
learning rate 1, so the weight at that position becomes exactly 1 once the
gradient is applied.  After each step the worker reads the weights it pulled
and records which of every worker's markers it sees, with the release the
controller gave.  Other keys carry ordinary gradients so a step has several
keys, as under gluon.Trainer.

Run as every role of a job (scheduler and servers never get past
``import mxnet``).  Writes ``<out>/steps-<rank>.jsonl``.
"""
import argparse
import json
import os
import signal
import sys
import time


def die(args, rank, t, where):
    sys.stderr.write('worker %d dying on purpose (%s) %s step %d\n' % (rank, args.die_by, where, t))
    sys.stderr.flush()
    if args.die_by == 'sigkill':
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(7)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--store', default='dist_ssp')
    p.add_argument('--staleness', default=None)
    p.add_argument('--mode', default=None)
    p.add_argument('--iters', type=int, default=10)
    p.add_argument('--keys', type=int, default=3)
    p.add_argument('--slow-rank', type=int, default=-1)
    p.add_argument('--slow-seconds', type=float, default=0.0)
    p.add_argument('--base-seconds', type=float, default=0.0)
    p.add_argument('--devices', type=int, default=1)
    p.add_argument('--import-order', type=_import_orders, default=['ssp-first'],
                   help='ssp-first: mxnet_ssp, then MXNet without its optional sklearn/scipy '
                        'imports; ssp-first-plain, mxnet-first, none (the autoload hook registers '
                        'the stores): plain imports, as a user\'s script. A comma-separated '
                        'list gives the process of launch index i the order i modulo its length')
    p.add_argument('--die-rank', type=int, default=-1)
    p.add_argument('--die-at', type=int, default=-1)
    p.add_argument('--die-by', choices=['exit', 'sigkill'], default='exit',
                   help='exit: os._exit(7); sigkill: kill -9 of itself')
    p.add_argument('--die-mid-step', action='store_true',
                   help='die after pushing key 0 of step --die-at (the push may or may not '
                        'reach the servers), not before the step')
    p.add_argument('--stall-rank', type=int, default=-1)
    p.add_argument('--stall-at', type=int, default=-1)
    p.add_argument('--await-replacement-at', type=int, default=-1, metavar='STEP',
                   help='a worker that is no replacement waits before STEP until the replacement '
                        'of a lost worker (mxnet-ssp-launch --max-restarts, local launcher) has '
                        'done its first step or ended: the test\'s order, not a race between '
                        'its start and the survivors\' end')
    p.add_argument('--record-modules', default=None, metavar='DIR',
                   help='at exit, write DIR/modules-<role>-<pid>.json: whether MXNet\'s Python '
                        'package ran in this process (mxnet.ndarray loaded)')
    p.add_argument('--out', required=True)
    return p.parse_args()


REPLACEMENT_PID, REPLACEMENT_STEPPED = 'replacement.pid', 'replacement.stepped'
AWAIT_REPLACEMENT_S = 120
IMPORT_ORDERS = ('ssp-first', 'ssp-first-plain', 'mxnet-first', 'none')


def _ended(pid):
    """Whether process `pid` has ended (gone, or a zombie its launcher has not reaped yet)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def await_replacement(out, rank, t):
    """Wait until the replacement (REPLACEMENT_PID in `out`) did a step or ended; exit 3 if
    neither happens within AWAIT_REPLACEMENT_S."""
    deadline = time.monotonic() + AWAIT_REPLACEMENT_S
    pid_file = os.path.join(out, REPLACEMENT_PID)
    while time.monotonic() < deadline:
        if os.path.exists(os.path.join(out, REPLACEMENT_STEPPED)):
            return
        if os.path.exists(pid_file):
            with open(pid_file) as f:
                text = f.read().strip()
            if text and _ended(int(text)):
                return
        time.sleep(0.05)                           # the poll's interval; the deadline bounds it
    sys.stderr.write('worker %d: no replacement did a step or ended within %d s (step %d)\n'
                     % (rank, AWAIT_REPLACEMENT_S, t))
    os._exit(3)


def record_modules_at_exit(directory):
    """Registered before ``import mxnet``, so it runs in a scheduler or server too (their
    ``import mxnet`` ends with sys.exit, which runs the exit handlers)."""
    import atexit
    role = os.environ.get('DMLC_ROLE', 'none')

    def write():
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, 'modules-%s-%d.json' % (role, os.getpid())), 'w') as f:
            json.dump({'role': role, 'mxnet_package_ran': 'mxnet.ndarray' in sys.modules}, f)
    atexit.register(write)


def _import_orders(text):
    """--import-order: one order, or a comma-separated list of them."""
    orders = text.split(',')
    bad = [o for o in orders if o not in IMPORT_ORDERS]
    if bad:
        raise argparse.ArgumentTypeError('%s: expected %s, or a comma-separated list of them'
                                         % (', '.join(bad), ', '.join(IMPORT_ORDERS)))
    return orders


def main():
    args = parse_args()
    replacement = (os.environ.get('MXNET_SSP_REJOIN') == '1'
                   and os.environ.get('DMLC_ROLE') == 'worker')
    if replacement and args.await_replacement_at > 0:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, REPLACEMENT_PID), 'w') as f:
            f.write('%d\n' % os.getpid())
    if args.record_modules:
        record_modules_at_exit(args.record_modules)
    order = args.import_order[int(os.environ.get('MXNET_SSP_LAUNCH_INDEX', '0'))
                              % len(args.import_order)]
    if order == 'ssp-first':
        # the suite's default: mxnet-ssp first, and MXNet without its optional scikit-learn and
        # SciPy imports, as in mxnet-ssp's training script (about 1.3 s of CPU less per worker;
        # the other orders are a user's plain imports)
        import mxnet_ssp  # noqa: F401
        from mxnet_ssp._hooks import skip_optional_mxnet_imports
        skip_optional_mxnet_imports()
        import mxnet as mx
    elif order == 'ssp-first-plain':
        import mxnet_ssp  # noqa: F401
        import mxnet as mx
    elif order == 'mxnet-first':
        import mxnet as mx
        import mxnet_ssp  # noqa: F401
    else:
        import mxnet as mx        # registration comes from the autoload .pth
    settings = {}
    if args.staleness is not None:
        settings['staleness'] = args.staleness
    if args.mode is not None:
        settings['mode'] = args.mode
    if settings:
        import mxnet_ssp
        kv = mxnet_ssp.create(args.store, **settings)
    else:
        kv = mx.kv.create(args.store)
    rank, nworkers, T = kv.rank, kv.num_workers, args.iters
    size = nworkers * T
    ctxs = [mx.cpu(i) for i in range(args.devices)]
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0, rescale_grad=1.0, wd=0.0))
    weights = {}
    for key in range(args.keys):
        n = size if key == 0 else 16
        weights[key] = [mx.nd.zeros(n, ctx=c) for c in ctxs]
        kv.broadcast(key, mx.nd.zeros(n), out=weights[key])
    os.makedirs(args.out, exist_ok=True)
    # a replacement of a lost worker (mxnet-ssp-launch --max-restarts) appends to the dead one's
    # records and goes on from the clock the controller gives it, to the same last step
    rejoining = os.environ.get('MXNET_SSP_REJOIN') == '1'
    log = open(os.path.join(args.out, 'steps-%d.jsonl' % rank), 'a' if rejoining else 'w',
               buffering=1)
    dying = rank == args.die_rank and not rejoining
    t = 0
    while True:
        t = kv.clock + 1 if rejoining else t + 1
        if t > T:
            break
        if t == args.await_replacement_at and not rejoining:
            await_replacement(args.out, rank, t)
        if rank == args.stall_rank and t == args.stall_at:
            sys.stderr.write('worker %d stalling on purpose at step %d\n' % (rank, t))
            time.sleep(600)                        # a hung worker; the job must not wait for it
        delay = args.base_seconds + (args.slow_seconds if rank == args.slow_rank else 0.0)
        if delay:
            time.sleep(delay)                      # emulated compute time, not synchronization
        if dying and t == args.die_at and not args.die_mid_step:
            die(args, rank, t, 'at')
        for key in range(args.keys):
            grads = []
            for c in ctxs:
                g = mx.nd.zeros(weights[key][0].shape, ctx=c)
                if key == 0:
                    g[rank * T + t - 1] = -1.0 / len(ctxs)   # summed over devices: -1
                else:
                    g[:] = 0.001
                grads.append(g)
            kv.pushpull(key, grads, out=weights[key], priority=-key)
            if dying and t == args.die_at and args.die_mid_step:
                die(args, rank, t, 'in the middle of')
        seen = weights[0][0].asnumpy()
        release = getattr(kv, 'last_release', None)
        record = {'rank': rank, 'clock': t, 'time': time.time(), 'rejoined': rejoining,
                  'import_order': order,
                  'kv_clock': getattr(kv, 'clock', None),
                  'seen': [[int(round(v)) for v in seen[q * T:(q + 1) * T]] for q in range(nworkers)],
                  'devices_equal': all((w.asnumpy() == seen).all() for w in weights[0])}
        if release is not None:
            record.update(lead=release.lead, t_slowest=kv.visible_clock,
                          granted=release.granted)
        log.write(json.dumps(record) + '\n')
        if rejoining and args.await_replacement_at > 0:
            open(os.path.join(args.out, REPLACEMENT_STEPPED), 'a').close()
    log.close()


if __name__ == '__main__':
    main()
