"""Settings of batch balancing (docs/balance.md): the smallest and largest batch of one
worker, iterations between two decisions, the predicted gain below which the split stays
(hysteresis) and the weight of the newest measurement in the rate average (EMA)."""
from dataclasses import dataclass

from .file import current
from .table import TABLE, ConfigError, Setting, declare, integer, number, read

__all__ = ['ENV_BALANCE_MIN', 'ENV_BALANCE_MAX', 'ENV_BALANCE_PERIOD', 'ENV_BALANCE_THRESHOLD',
           'ENV_BALANCE_SMOOTHING', 'BALANCE_ENV', 'BalanceConfig', 'balance_from_env']

ENV_BALANCE_MIN = 'MXNET_SSP_BALANCE_MIN'
ENV_BALANCE_MAX = 'MXNET_SSP_BALANCE_MAX'
ENV_BALANCE_PERIOD = 'MXNET_SSP_BALANCE_PERIOD'
ENV_BALANCE_THRESHOLD = 'MXNET_SSP_BALANCE_THRESHOLD'
ENV_BALANCE_SMOOTHING = 'MXNET_SSP_BALANCE_SMOOTHING'
BALANCE_ENV = declare(
    Setting(ENV_BALANCE_MIN, 'balance', "The smallest batch of one worker (default 1).",
            integer(1), arg='min_batch',
            accepted="an integer >= 1 (one worker's batch, in samples)"),
    Setting(ENV_BALANCE_MAX, 'balance', 'The largest batch of one worker (default: the total).',
            integer(1), arg='max_batch',
            accepted="an integer >= 1 (one worker's batch, in samples)"),
    Setting(ENV_BALANCE_PERIOD, 'balance', 'Iterations between two decisions (K).', integer(1),
            default=10, arg='period', accepted='an integer >= 1 (iterations between two '
                                               'decisions)'),
    Setting(ENV_BALANCE_THRESHOLD, 'balance', 'The split changes only when the predicted '
            'iteration time drops by more than this fraction (hysteresis).',
            number(lambda x: 0 <= x < 1), default=0.05, arg='threshold',
            accepted='a fraction in [0, 1): the predicted gain below which the split stays '
                     '(e.g. 0.05)'),
    Setting(ENV_BALANCE_SMOOTHING, 'balance', "Weight of the newest round's compute time per "
            "sample in each worker's average (EMA).", number(lambda x: 0 < x <= 1),
            default=0.5, arg='smoothing',
            accepted='a weight in (0, 1]: how much the newest measurement counts (1: no '
                     'averaging)'),
)
BALANCE_ENV = tuple(setting.name for setting in BALANCE_ENV)
_TOTAL = Setting('total', 'balance', 'Samples per iteration over all workers (from Python '
                 'only).', integer(1), accepted='an integer >= 1 (samples per iteration over '
                                                'all workers)')


@dataclass(frozen=True)
class BalanceConfig:
    """Settings of batch balancing (docs/balance.md).

    Attributes
    ----------
    total : int or None
        Samples per iteration over all workers (fixed; None until the caller gives it).
    min_batch, max_batch : int or None
        Bounds of one worker's batch (None: 1, and the total).
    period : int
        Iterations between two decisions (K).
    threshold : float
        The split changes only when the predicted iteration time drops by more than this
        fraction (hysteresis).
    smoothing : float
        Weight of the newest round's compute time per sample in each worker's average (EMA).
    """
    total: int = None
    min_batch: int = TABLE[ENV_BALANCE_MIN].default
    max_batch: int = TABLE[ENV_BALANCE_MAX].default
    period: int = TABLE[ENV_BALANCE_PERIOD].default
    threshold: float = TABLE[ENV_BALANCE_THRESHOLD].default
    smoothing: float = TABLE[ENV_BALANCE_SMOOTHING].default

    def bounds(self):
        """``(lo, hi)`` of one worker's batch with the defaults filled in."""
        lo = 1 if self.min_batch is None else self.min_batch
        hi = self.total if self.max_batch is None else self.max_batch
        return lo, hi


def balance_from_env(environ=None, num_workers=None, **overrides):
    """Build the :class:`BalanceConfig` from the environment and overrides (Python wins).

    Parameters
    ----------
    environ : mapping, optional
        Defaults to ``os.environ``.
    num_workers : int, optional
        With ``total``, checks that the bounds admit a split:
        ``num_workers * min <= total <= num_workers * max``.
    **overrides
        ``total``, ``min_batch``, ``max_batch``, ``period``, ``threshold``, ``smoothing``.

    Raises
    ------
    ConfigError
        Naming the setting, its value and what is accepted.
    """
    env = current(environ)
    args = {TABLE[name].arg: name for name in BALANCE_ENV}
    unknown = set(overrides) - set(args) - {'total'}
    if unknown:
        raise TypeError('unknown balancing settings %s: expected %s'
                        % (', '.join(sorted(unknown)), ', '.join(sorted(set(args) | {'total'}))))
    total = overrides.get('total')
    conf = BalanceConfig(total=None if total is None else _TOTAL.value(total),
                         **{arg: read(name, env, overrides.get(arg))
                            for arg, name in args.items()})

    def source(arg):
        return args[arg] if overrides.get(arg) is None else arg
    if conf.min_batch is not None and conf.max_batch is not None \
            and conf.min_batch > conf.max_batch:
        raise ConfigError('%s=%d is greater than %s=%d: expected min <= max'
                          % (source('min_batch'), conf.min_batch, source('max_batch'),
                             conf.max_batch))
    if conf.total is not None and num_workers is not None:
        lo, hi = conf.bounds()
        if not num_workers * lo <= conf.total <= num_workers * hi:
            raise ConfigError(
                'batch bounds [%d, %d] per worker (%s, %s) admit no split of %d samples over '
                '%d workers: expected %d * min <= %d <= %d * max'
                % (lo, hi, ENV_BALANCE_MIN, ENV_BALANCE_MAX, conf.total, num_workers,
                   num_workers, conf.total, num_workers))
    return conf
