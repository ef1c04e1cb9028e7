"""What a job's synchronization controller runs with, and its one wire form.

The same settings travel twice, as one JSON object (pure: no I/O, standard library only):

1. worker -> servers, in the discovery request (:mod:`mxnet_ssp.worker.discovery`, packed by
   :func:`mxnet_ssp.ps.channel.encode_blob`): the worker's settings;
2. server -> controller process, on its stdin (:mod:`mxnet_ssp.controller.process`): the same,
   plus the address to listen on, the job's secret and the metrics file.

=============  =====  ==========================================================  =========
key            type   meaning                                                     absent
=============  =====  ==========================================================  =========
v              int    the form's version (1)                                      (refused)
store          str    the worker's store type (``dist_dssp``, ...)                None
num_workers    int    workers of the job (``DMLC_NUM_WORKER``)                    required
s_lower        int    the staleness thresholds [sL, sU] (MXNET_SSP_STALENESS;     required
s_upper        int    :data:`UNBOUNDED_STALENESS` for an elastic async store)     required
mode           str    the DSSP mode (``bounded``, ``paper``, ``threshold``)       required
timeout        float  seconds a wait may last (MXNET_SSP_TIMEOUT)                 required
elastic        int    the least number of workers; 0: fail-fast                   0
liveness       float  seconds of silence before a host counts as lost; 0: never   10
metrics_dir    str    where the controller writes controller.jsonl, or null       null
controller     str    where it runs: ``process`` or ``thread`` (its placement)    process
agree          dict   the first worker's settings that every worker must share    null
host           str    (2 only) the address the controller listens on              null
secret         str    (2 only) the job's secret, in hex                           null
metrics_path   str    (2 only) the controller's metrics file, or null             null
=============  =====  ==========================================================  =========

A value absent from a request (a worker of an older mxnet-ssp) gets the default in the last
column.  The answer to a worker (:meth:`ControllerSettings.answer`) is ``{host, port, secret,
s_lower, s_upper, mode, elastic}``.
"""
from dataclasses import asdict, dataclass, field, fields, replace

from .liveness import DEFAULT_BOUND

__all__ = ['ControllerSettings', 'WIRE_VERSION', 'PLACEMENTS', 'DEFAULT_PLACEMENT',
           'UNBOUNDED_STALENESS']

WIRE_VERSION = 1
#: Where the controller runs on its server's host (``MXNET_SSP_CONTROLLER``): a process of its
#: own beside that server (the default), or a thread of the server process.
PLACEMENTS = ('process', 'thread')
DEFAULT_PLACEMENT = PLACEMENTS[0]
#: The staleness bound of the asynchronous stores' controller in elastic mode: it only counts
#: clocks and members, it never holds a worker.
UNBOUNDED_STALENESS = 2 ** 31 - 1
_TYPES = {'num_workers': int, 's_lower': int, 's_upper': int, 'timeout': float,
          'elastic': int, 'liveness': float}


@dataclass(frozen=True)
class ControllerSettings:
    """The settings of one job's controller (the table above)."""
    num_workers: int
    s_lower: int
    s_upper: int
    mode: str
    timeout: float
    elastic: int = 0
    liveness: float = DEFAULT_BOUND
    store: str = None
    metrics_dir: str = None
    controller: str = DEFAULT_PLACEMENT
    agree: dict = field(default=None, compare=False)
    host: str = None
    secret: str = None
    metrics_path: str = None

    @classmethod
    def from_config(cls, config, num_workers, agree=None):
        """A worker's: from its :class:`mxnet_ssp.config.SyncConfig` (an asynchronous store
        in elastic mode reports to a controller that never holds anyone: unbounded)."""
        bound = ((config.s_lower, config.s_upper) if config.synchronous
                 else (UNBOUNDED_STALENESS, UNBOUNDED_STALENESS))
        return cls(num_workers=int(num_workers), s_lower=bound[0], s_upper=bound[1],
                   mode=config.mode, timeout=config.timeout, elastic=config.elastic,
                   liveness=config.liveness, store=config.store,
                   metrics_dir=config.metrics_dir, controller=config.controller, agree=agree)

    def to_wire(self):
        """The JSON object (a dict) of the table above; unset optional keys are left out."""
        wire = {'v': WIRE_VERSION}
        wire.update((k, v) for k, v in asdict(self).items()
                    if v is not None or k in ('metrics_dir',))
        return wire

    @classmethod
    def from_wire(cls, wire):
        """Read :meth:`to_wire`'s form: typed, with the defaults for the absent keys.

        Raises
        ------
        KeyError, TypeError, ValueError
            A required key is missing or a value has the wrong type.
        """
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in wire.items() if k in known and v is not None}
        for key, kind in _TYPES.items():
            if key in values:
                values[key] = kind(values[key])
        return cls(**values)

    def started(self, host, secret, metrics_path=None):
        """These settings with where the controller listens, the job's secret and its
        metrics file (the server that starts it fills them in)."""
        return replace(self, host=host, secret=secret, metrics_path=metrics_path)

    def answer(self, host, port):
        """The discovery answer for a worker: the controller's address, the secret and the
        settings in effect."""
        return {'host': host, 'port': port, 'secret': self.secret, 's_lower': self.s_lower,
                's_upper': self.s_upper, 'mode': self.mode, 'elastic': self.elastic}
