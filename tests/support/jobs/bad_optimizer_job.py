"""Integration-test worker: optimizer set-ups that must fail before training, clearly."""
import argparse

import mxnet as mx


class ScriptOptimizer(mx.optimizer.SGD):
    """Defined in the script: the servers cannot import it."""


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--case', required=True, choices=['native-store', 'main-class', 'splits'])
    args = p.parse_args()
    import mxnet_ssp
    from mxnet_ssp import optim
    if args.case == 'native-store':
        kv = mx.kv.create('dist_sync')           # MXNet's own: cannot report staleness
        kv.set_optimizer(optim.StalenessAwareSGD(learning_rate=0.1))
    elif args.case == 'main-class':
        kv = mxnet_ssp.create('dist_async')
        kv.set_optimizer(ScriptOptimizer(learning_rate=0.1))
    else:
        mxnet_ssp.create('dist_softsync', splits=5)   # 2 workers in the test
    raise SystemExit('no error was raised')


if __name__ == '__main__':
    main()
