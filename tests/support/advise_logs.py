"""Train logs as mxnet-ssp-train writes them, for the advisor's tests (test_advise*.py)."""
import json
import random


def write_train_logs(directory, compute, step, n=200, jitter=0.0, seed=1, waits=None):
    """train-worker<rank>.jsonl as mxnet-ssp-train writes them: worker r computes compute[r]
    (x (1 + jitter * N(0, 1))) then steps step s (+ waits[r] s of waiting)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for rank, c in enumerate(compute):
        t = 1000.0
        with open(str(directory / ('train-worker%d.jsonl' % rank)), 'w') as f:
            for i in range(1, n + 1):
                real = c * max(0.05, 1 + jitter * rng.gauss(0, 1))
                s = step + (waits[rank] if waits else 0.0)
                t += real + s
                f.write(json.dumps({'rank': rank, 'iteration': i, 'time': t,
                                    'compute_s': 0.002, 'sleep_s': real - 0.002,
                                    'step_s': s, 'batch': 32}) + '\n')
