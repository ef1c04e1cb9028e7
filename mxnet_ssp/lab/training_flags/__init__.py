"""The flags of ``mxnet-ssp-train``: the table and its parser (:mod:`.flags`), the values
(:mod:`.values`), the model names (:mod:`.models`), the defaults that depend on the model and
the job (:mod:`.defaults`) and the rules (:mod:`.rules`).

Nothing here imports MXNet or GluonCV: both the training script (``mxnet_ssp.lab``)
and the launcher (``mxnet_ssp.launch``, which checks the flags before it starts any process)
import it.
"""
from .defaults import BASE_RATES, fill_defaults, worker_scale
from .flags import (DEFAULT_LAMDA, FLAGS, KVSTORES, OPTIMIZERS, SSP_KVSTORES,
                    STALENESS_KVSTORES, STALENESS_LR, TRAIN_MODES, build_parser)
from .rules import CHECKS, check_args, find_problem, parse_args, validate_args
from .values import (check_save_dir, checkpoint_info, choose_gpus, expected_num_workers,
                     learning_rate_at, parse_decay_epochs, parse_slowdown, wraps_async)

__all__ = ['BASE_RATES', 'fill_defaults', 'worker_scale', 'DEFAULT_LAMDA', 'FLAGS',
           'KVSTORES', 'OPTIMIZERS', 'SSP_KVSTORES', 'STALENESS_KVSTORES', 'STALENESS_LR',
           'TRAIN_MODES', 'build_parser', 'CHECKS', 'check_args', 'find_problem', 'parse_args',
           'validate_args', 'check_save_dir', 'checkpoint_info', 'choose_gpus', 'expected_num_workers',
           'learning_rate_at', 'parse_decay_epochs', 'parse_slowdown', 'wraps_async']
