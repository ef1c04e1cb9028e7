"""The buckets of a worker's store (moved from mxnet_ssp.kvstore; the class follows)."""


def _keys_pushed_by(frame):
    """The keys that `frame`'s loop pushes in one pass, if `frame` runs a loop of MXNet 1.9.1
    known to call the store's ``pushpull`` once per parameter with nothing between the calls
    that writes to an array: ``gluon.Trainer._allreduce_grads`` (keys: the parameters'
    indices) and ``model._update_params_on_kvstore`` (Module; keys: the parameters' names).
    Otherwise None."""
    if not _LOOPS:
        # looked up at the first use: this module is imported while MXNet is importing
        from mxnet.gluon.trainer import Trainer
        from mxnet import model
        _LOOPS.update({Trainer._allreduce_grads.__code__: 'trainer',
                       model._update_params_on_kvstore.__code__: 'module'})
    kind = _LOOPS.get(frame.f_code)
    if kind == 'trainer':
        trainer = frame.f_locals['self']
        return {i for i, p in enumerate(trainer._params) if p.grad_req != 'null'}
    if kind == 'module':
        local = frame.f_locals
        return {name for name, grads in zip(local['param_names'], local['grad_arrays'])
                if grads[0] is not None}
    return None


_LOOPS = {}      # code object -> which loop of MXNet's it is
