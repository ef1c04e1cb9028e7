"""A job whose workers fail on purpose after a few steps (tests/integration/test_fail_paths.py).

Every worker creates the store, sets SGD, trains ``--steps`` steps of pushpull over four
keys, and then the ranks in ``--fail-ranks`` fail as ``--how`` says: ``raise`` (the
script raises, unhandled) or ``kill`` (SIGKILL).  Before failing, a worker prints
``FAILING rank R at T`` (T: time.time()) on stderr.  The other workers train on for ever:
the job's failure handling has to end them.
"""
import argparse
import os
import signal
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--kvstore', required=True)
    p.add_argument('--how', choices=['raise', 'kill'], required=True)
    p.add_argument('--fail-ranks', required=True, help="comma-separated ranks, or 'all'")
    p.add_argument('--steps', type=int, default=3)
    args = p.parse_args()
    import mxnet as mx
    kv = mx.kv.create(args.kvstore)
    failing = (set(range(kv.num_workers)) if args.fail_ranks == 'all'
               else {int(r) for r in args.fail_ranks.split(',')})
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01))
    weights = [mx.nd.ones((16,)) * k for k in range(4)]
    for k, w in enumerate(weights):
        kv.init(k, w)
    step = 0
    while True:
        if step == args.steps and kv.rank in failing:
            sys.stderr.write('FAILING rank %d at %.3f\n' % (kv.rank, time.time()))
            sys.stderr.flush()
            if args.how == 'kill':
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError('worker %d fails on purpose at step %d' % (kv.rank, step))
        for k, w in enumerate(weights):
            kv.pushpull(k, mx.nd.ones(w.shape) * 0.01, out=w, priority=-k)
        mx.nd.waitall()
        step += 1


if __name__ == '__main__':
    main()
