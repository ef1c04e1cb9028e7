"""The synchronization controller and the network it shares: standard library only.

The controller runs in a process of its own (:mod:`~mxnet_ssp.controller.process`, or on a
thread of a server process) and answers every worker's "may I go on?" with the decisions of
:class:`mxnet_ssp.core.sync.SyncPolicy`.  The batch-balancing service (on a thread of worker
0) runs on the same transport with its own messages and MAC context.

==============================================  ===============================================
:mod:`~mxnet_ssp.controller.protocol`           the wire format: frames, messages, the peer MAC
:mod:`~mxnet_ssp.controller.transport`          ``FrameServer``: one selector loop, sockets,
                                                buffers, authentication
:mod:`~mxnet_ssp.controller.server`             :class:`ControllerServer`: the policy behind
                                                the loop
:mod:`~mxnet_ssp.controller.server_faults`      the server's faults: the job's failure, lost
                                                workers and hosts
:mod:`~mxnet_ssp.controller.process`            the controller as a process (``python -m``)
:mod:`~mxnet_ssp.controller.client`             ``FrameClient`` and a worker's connection to
                                                the controller
:mod:`~mxnet_ssp.controller.balance_service`    the batch-balancing service and its client
                                                (:class:`mxnet_ssp.core.split.BalancePolicy`)
==============================================  ===============================================
"""
__all__ = ['ControllerError', 'ControllerServer']


def __getattr__(name):
    # ``mxnet_ssp.controller.ControllerServer`` was a module's name before this package; it
    # is loaded on first use so that a worker (which needs only the client) never imports
    # the server side
    if name == 'ControllerServer':
        from .server import ControllerServer
        return ControllerServer
    if name == 'ControllerError':
        from .protocol import ControllerError
        return ControllerError
    raise AttributeError('module %r has no attribute %r' % (__name__, name))
