"""The training job of benchmarks/faults.py: a long gluon.Trainer job that reports itself.

Run as every role of a 2-worker 1-server job (under MXNet's tools/launch.py or
mxnet-ssp-launch).  Each copy is two processes:

* a *reaper* (this script, started by the launcher; it never imports mxnet):
  it runs the job as its child with ``FAULT_JOB_INNER=1``, the child's
  stdout and stderr going to ``<out>/log-<reaper pid>.txt``; it writes
  ``<out>/proc-<child pid>.json`` (role, log path) at once and
  ``<out>/exit-<child pid>.json`` (exit status, monotonic time) when the
  child ends, then ends the same way (same code, or the same signal) so the
  launcher sees what it would have seen without it.  SIGINT/SIGTERM/SIGHUP
  are ignored by the reaper (a launcher signals the whole process group, so
  the child gets them; the reaper outlives it to record its status).
* the *job* (the child): scheduler and server never get past ``import
  mxnet``; a worker trains a small MLP through ``gluon.Trainer(kvstore=...)``
  for ``--steps`` steps, writes ``<out>/rank-<pid>.json`` once its store
  exists and appends one line per step to ``<out>/progress-<rank>.txt``.

The reaper exists only because a process's exit status can be read by its
parent alone, and the parent here is the launcher (or a shell it started).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--kvstore', default='dist_dssp')
    p.add_argument('--steps', type=int, default=100000)
    p.add_argument('--step-seconds', type=float, default=0.05,
                   help='emulated compute per step (keeps the CPU free on a shared machine)')
    p.add_argument('--out', required=True)
    return p.parse_args()


def _write_json(path, obj):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def reaper(args):
    os.makedirs(args.out, exist_ok=True)
    for name in ('SIGINT', 'SIGTERM', 'SIGHUP'):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    role = os.environ.get('DMLC_ROLE', '?')
    log_path = os.path.join(args.out, 'log-%d.txt' % os.getpid())
    log = open(log_path, 'wb')
    env = dict(os.environ, FAULT_JOB_INNER='1')
    child = subprocess.Popen([sys.executable] + sys.argv, env=env, stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL,
                             # the job gets the default dispositions back
                             preexec_fn=lambda: [signal.signal(getattr(signal, n), signal.SIG_DFL)
                                                 for n in ('SIGINT', 'SIGTERM', 'SIGHUP')])
    _write_json(os.path.join(args.out, 'proc-%d.json' % child.pid),
                {'pid': child.pid, 'reaper': os.getpid(), 'role': role, 'log': log_path})
    rc = child.wait()
    _write_json(os.path.join(args.out, 'exit-%d.json' % child.pid),
                {'pid': child.pid, 'role': role, 'rc': rc, 'time': time.monotonic()})
    log.close()
    if rc < 0:
        if -rc not in (signal.SIGKILL, signal.SIGSTOP):   # those cannot be caught or reset
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
        time.sleep(1)                 # not reached for a fatal signal
    sys.exit(rc if rc >= 0 else 128 - rc)


def job(args):
    import mxnet as mx                 # scheduler and server stay in here until the job ends
    import mxnet_ssp  # noqa: F401     (registers dist_ssp / dist_dssp / ...)
    import numpy as np
    from mxnet import autograd, gluon

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(64, activation='relu', in_units=32), gluon.nn.Dense(1, in_units=64))
    net.initialize(mx.init.Xavier())
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.01},
                            kvstore=args.kvstore)
    trainer._init_kvstore()
    kv = trainer._kvstore
    rank = kv.rank
    _write_json(os.path.join(args.out, 'rank-%d.json' % os.getpid()),
                {'pid': os.getpid(), 'rank': rank, 'store': kv.type})
    rng = np.random.RandomState(rank)
    truth = np.random.RandomState(0).randn(32, 1).astype('float32')
    progress = open(os.path.join(args.out, 'progress-%d.txt' % rank), 'w', buffering=1)
    for step in range(1, args.steps + 1):
        if args.step_seconds:
            time.sleep(args.step_seconds)      # emulated compute, not synchronization
        x = rng.randn(16, 32).astype('float32')
        xs, ys = mx.nd.array(x), mx.nd.array(x.dot(truth))
        with autograd.record():
            loss = ((net(xs) - ys) ** 2).mean()
        loss.backward()
        trainer.step(1)
        progress.write('%d %.6f %.4f\n' % (step, time.monotonic(), float(loss.asscalar())))
    progress.close()
    sys.stderr.write('worker %d finished %d steps\n' % (rank, args.steps))


def main():
    args = parse_args()
    if os.environ.get('FAULT_JOB_INNER') == '1':
        job(args)
    else:
        reaper(args)


if __name__ == '__main__':
    main()
