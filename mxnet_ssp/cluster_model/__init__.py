"""The lab: models of training that run without MXNet's processes.

:mod:`~mxnet_ssp.lab.simulate` (a discrete-event simulation of workers under BSP, ASP, SSP
and DSSP; ``python -m mxnet_ssp.lab.simulate``), :mod:`~mxnet_ssp.lab.profiles` (emulated
clusters: compute-time draws per worker) and :mod:`~mxnet_ssp.lab.reference` (the update
rules in NumPy, the oracle the servers' rules are tested against).
"""
