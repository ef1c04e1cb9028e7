"""The pure core: decisions with no I/O, no threads and no MXNet.

:mod:`~mxnet_ssp.core.sync` (when a worker may go on: SSP and DSSP),
:mod:`~mxnet_ssp.core.staleness` (the per-parameter clock that measures a gradient's
staleness) and :mod:`~mxnet_ssp.core.split` (how a global batch is split among workers of
different speeds) and :mod:`~mxnet_ssp.core.buckets` (which small arrays share a server key).  Everything else builds on these; they import only the standard library.
"""
