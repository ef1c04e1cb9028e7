"""The one place that reads mxnet-ssp configuration.

Every environment variable the package understands is one row of one table
(:data:`~.table.TABLE`: name, parser, default, accepted values, concern, one line of doc),
declared by the module of its concern and read by one function, :func:`~.table.read`:

================  ===========================================================================
:mod:`.sync`      the store types, staleness, DSSP mode, timeout, metrics, controller
                  placement; :class:`SyncConfig` and :func:`from_env`
:mod:`.data_path` MXNet's names served by mxnet-ssp, buckets, host copies and updates
:mod:`.lifetime`  elastic mode, rejoining, the follow grace, lost-host detection, autoload
:mod:`.topology`  ps-lite's numbers of servers and workers, a worker's GPUs
:mod:`.balance`   batch balancing; :class:`BalanceConfig` and :func:`balance_from_env`
:mod:`.file`      the job's settings file (``mxnet_ssp.env`` / ``MXNET_SSP_SETTINGS``)
:mod:`.agree`     what every worker of a job must share (:func:`job_settings`)
================  ===========================================================================

The launcher's own settings are declared beside it (:mod:`mxnet_ssp.launch.settings`), in
the same table.  Nothing else in the package reads ``os.environ`` for these settings; each
bad value raises :class:`ConfigError` naming the variable, the value and the accepted form.

A reader called without an explicit `environ` reads this process's settings: ``os.environ``
over the job's settings file (``mxnet_ssp.env`` in the working directory, or
``MXNET_SSP_SETTINGS``; see :mod:`.file`), which reaches every host whatever the launcher.
Precedence: ``mxnet_ssp.create()`` arguments > environment > file > defaults.
"""
from . import file as _file
from .agree import *             # noqa: F401,F403
from .agree import _updater_reference  # noqa: F401  (tests reset it)
from .balance import *           # noqa: F401,F403
from .data_path import *         # noqa: F401,F403
from .file import *              # noqa: F401,F403
from .lifetime import *          # noqa: F401,F403
from .sync import *              # noqa: F401,F403
from .table import *             # noqa: F401,F403
from .topology import *          # noqa: F401,F403
from . import agree, balance, data_path, file, lifetime, sync, table, topology

#: The settings a file may set (those every process of a job reads from its environment).
FILE_SETTINGS = _file.FILE_SETTINGS = _file.file_settings()

__all__ = sorted(set(agree.__all__ + balance.__all__ + data_path.__all__ + file.__all__
                     + lifetime.__all__ + sync.__all__ + table.__all__ + topology.__all__))
