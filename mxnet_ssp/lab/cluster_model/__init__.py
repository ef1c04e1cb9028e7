"""The cluster model: how long training takes on a cluster, without MXNet's processes.

:mod:`~mxnet_ssp.lab.cluster_model.profiles` (emulated clusters: compute-time draws per worker),
:mod:`~mxnet_ssp.lab.cluster_model.simulate` (a discrete-event simulation of workers under BSP,
ASP, SSP and DSSP; ``python -m mxnet_ssp.lab.cluster_model.simulate``) and
:mod:`~mxnet_ssp.lab.cluster_model.advise` (``mxnet-ssp-advise``: fits a run's metrics to a
profile and predicts every paradigm with the simulator).  The emulated-cluster lab that runs
real jobs (docs/lab.md) is :mod:`mxnet_ssp.lab.reproduce`; it imports this model.
"""
