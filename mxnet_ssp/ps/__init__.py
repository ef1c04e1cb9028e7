"""What runs inside MXNet's own processes: the worker side of the stores and the servers.

==================================  ==========================================================
:mod:`~mxnet_ssp.worker.native_store`         MXNet's native ``dist_*`` store under ours (ctypes)
:mod:`~mxnet_ssp.ps.channel`        what travels to the servers besides tensors (commands,
                                    discovery, refresh markers) and its codec
:mod:`~mxnet_ssp.worker.discovery`      how a worker finds the controller (a push to a server)
:mod:`~mxnet_ssp.worker.slots`          slot mode's key layout on the worker
:mod:`~mxnet_ssp.worker.steps`          where a training step ends and what it measures
:mod:`~mxnet_ssp.server.updater`         the updater installed in MXNet's server processes
:mod:`~mxnet_ssp.server.state`   saving and restoring a server's update-rule state
:mod:`~mxnet_ssp.ps.process_exit`       process-wide state: watchdog, fatal exit, cleanup order
:mod:`~mxnet_ssp.ps.job_watch`         how the scheduler and the servers end when the job failed
:mod:`~mxnet_ssp.server.scheduler`      MXNet's scheduler run from ``libmxnet.so`` (no Python package)
:mod:`~mxnet_ssp.ps.tcp_links`      this process's TCP connections and their liveness (Linux)
==================================  ==========================================================

The store users create (:mod:`mxnet_ssp.kvstore`) and the update rules they pickle
(:mod:`mxnet_ssp.optim`) stay at the package's top level, where their import paths are
public.
"""
