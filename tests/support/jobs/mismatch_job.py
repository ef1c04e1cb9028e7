"""Integration-test worker: one worker is configured with another staleness.

The worker launched as ``--odd-index`` (``MXNET_SSP_LAUNCH_INDEX``, set by the
launcher for each process before anything runs; the ps-lite rank is known
only once the store exists) sets ``MXNET_SSP_STALENESS`` to ``--odd-staleness``
(and each ``--odd-env NAME=VALUE``) in its own environment before the store reads
its settings.  Each worker
writes ``<out>/who-<launch index>.json`` (its rank and staleness) once its
store exists, then pushes: the first push meets the controller, which must
refuse the worker whose settings differ from its own.
"""
import argparse
import json
import os


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument('--store', default='dist_ssp')
    p.add_argument('--odd-index', type=int, default=1)
    p.add_argument('--odd-staleness', default=None)
    p.add_argument('--odd-env', action='append', default=[], metavar='NAME=VALUE',
                   help='another setting for the odd worker (repeatable)')
    p.add_argument('--iters', type=int, default=2)
    p.add_argument('--out', required=True)
    return p.parse_args()


def main():
    args = parse_args()
    index = os.environ.get('MXNET_SSP_LAUNCH_INDEX')
    if os.environ.get('DMLC_ROLE') == 'worker' and index == str(args.odd_index):
        if args.odd_staleness is not None:
            os.environ['MXNET_SSP_STALENESS'] = args.odd_staleness
        for item in args.odd_env:
            name, _, value = item.partition('=')
            os.environ[name] = value
    import mxnet as mx
    import mxnet_ssp
    kv = mxnet_ssp.create(args.store)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'who-%s.json' % index), 'w') as f:
        json.dump({'index': int(index), 'rank': kv.rank,
                   'staleness': [kv.config.s_lower, kv.config.s_upper],
                   'mode': kv.config.mode}, f)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1))
    w = mx.nd.zeros(4)
    kv.broadcast(0, mx.nd.zeros(4), out=w)
    for _ in range(args.iters):
        kv.pushpull(0, mx.nd.ones(4), out=w)
    w.wait_to_read()


if __name__ == '__main__':
    main()
