"""What runs inside MXNet's server processes for the SSP stores.

The worker-side store sends a :class:`ServerOptimizer` with
``kv.set_optimizer``; every server unpickles it (so ``mxnet_ssp`` must be
installed on every server host) and MXNet calls it, as the updater, for every
push.  It applies the user's optimizer unchanged, with one exception: pushes of a discovery
request (a vector of :data:`DISCOVERY_LEN` elements starting with
:data:`MAGIC`) to the reserved key (:data:`DISCOVERY_KEY`, or
:data:`DISCOVERY_KEY_STR` in stores that use string keys, which the worker
maps to an integer the server cannot predict).  That key is small, so ps-lite
places it on exactly one server; the first push to it starts the synchronization
controller (:class:`mxnet_ssp.controller.ControllerServer`) in that server
process, on a background thread, and every push to it writes the
controller's address and the job's secret into the key's value, which the
worker then pulls.  That is how workers find the controller with nothing but
the KVStore, under any launcher.

This module must import in a server process, where ``import mxnet`` has not
returned (the server loop runs inside it): it only touches MXNet submodules
that are loaded before the loop starts.
"""
import json
import logging
import os
import pickle
import secrets
import socket
import sys
import threading

import numpy as np

__all__ = ['DISCOVERY_KEY', 'DISCOVERY_KEY_STR', 'DISCOVERY_LEN', 'MAGIC', 'MAX_INT_KEY',
           'ServerOptimizer', 'Control', 'refresh_marker', 'server_rank', 'encode_blob',
           'decode_blob', 'advertised_host']

logger = logging.getLogger(__name__)

#: Reserved integer key for controller discovery.  MXNet places a small key on
#: server (key * 9973) % num_servers, computed in a C int: keep key * 9973 < 2**31.
DISCOVERY_KEY = 199999
#: The same key for stores whose keys are strings (MXNet forbids mixing the two).
DISCOVERY_KEY_STR = '__mxnet_ssp_discovery__'
#: Length (float32 elements) of the discovery value: a header of len(MAGIC) + 4
#: elements, then one byte per element.  An unusual (prime) size, so the server
#: only looks inside pushes of exactly this size.
DISCOVERY_LEN = 1031
#: First elements of every discovery message (exactly representable in float32).
MAGIC = (-8191.0, 131071.0, -524287.0)

_lock = threading.Lock()
_controller = None
_controller_answer = None


def encode_blob(obj):
    """Encode a JSON-able object as a float32 vector of DISCOVERY_LEN bytes."""
    raw = json.dumps(obj, sort_keys=True).encode('utf-8')
    head = len(MAGIC) + 4
    if len(raw) > DISCOVERY_LEN - head:
        raise ValueError('discovery message too long (%d bytes)' % len(raw))
    out = np.zeros(DISCOVERY_LEN, dtype=np.float32)
    out[:len(MAGIC)] = MAGIC
    out[len(MAGIC):head] = [len(raw) >> 24 & 255, len(raw) >> 16 & 255, len(raw) >> 8 & 255,
                            len(raw) & 255]
    out[head:head + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return out


def is_discovery(values):
    """True if `values` (NDArray) is a discovery message: right size and magic header."""
    if values.shape != (DISCOVERY_LEN,):
        return False
    return tuple(values[:len(MAGIC)].asnumpy().tolist()) == MAGIC


def decode_blob(values):
    """Inverse of :func:`encode_blob`; returns None if `values` is not a message."""
    values = np.asarray(values)
    if values.shape != (DISCOVERY_LEN,) or tuple(values[:len(MAGIC)].tolist()) != MAGIC:
        return None
    values = values.round().astype(np.int64)
    b = values[len(MAGIC):len(MAGIC) + 4]
    length = int(b[0]) << 24 | int(b[1]) << 16 | int(b[2]) << 8 | int(b[3])
    head = len(MAGIC) + 4
    if length <= 0 or length > DISCOVERY_LEN - head:
        return None
    raw = bytes(int(v) & 255 for v in values[head:head + length])
    return json.loads(raw.decode('utf-8'))


def advertised_host(environ=None):
    """The address of this host that workers can reach.

    ``DMLC_NODE_HOST`` if the launcher set it; otherwise the local address the
    kernel would use to reach the scheduler (``DMLC_PS_ROOT_URI``), which is on
    the network every worker already uses.
    """
    env = os.environ if environ is None else environ
    if env.get('DMLC_NODE_HOST'):
        return env['DMLC_NODE_HOST']
    root = env.get('DMLC_PS_ROOT_URI', '127.0.0.1')
    port = int(env.get('DMLC_PS_ROOT_PORT', '9000') or 9000)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((root, port))       # UDP: no packet is sent
        return probe.getsockname()[0]
    except OSError:
        return '127.0.0.1'
    finally:
        probe.close()


def _start_controller(request):
    """Start the controller for `request` once per process; return the answer dict."""
    global _controller, _controller_answer
    from .controller import ControllerServer      # imported lazily: workers never need it
    from .sync import SyncPolicy
    with _lock:
        if _controller is not None:
            return _controller_answer
        num_workers = int(request['num_workers'])
        policy = SyncPolicy(num_workers, int(request['s_lower']), int(request['s_upper']),
                            mode=request['mode'])
        metrics_path = None
        if request.get('metrics_dir'):
            os.makedirs(request['metrics_dir'], exist_ok=True)
            metrics_path = os.path.join(request['metrics_dir'], 'controller.jsonl')
        secret = secrets.token_bytes(32)
        host = advertised_host()
        server = ControllerServer(policy, secret, host=host, port=0,
                                  timeout=float(request['timeout']),
                                  metrics_path=metrics_path).start()
        _controller = server
        bound_host, bound_port = server.address
        _controller_answer = {'host': bound_host, 'port': bound_port, 'secret': secret.hex(),
                              's_lower': policy.s_lower, 's_upper': policy.s_upper,
                              'mode': policy.mode}
        logger.info('server: %s controller for %d workers, staleness [%d, %d] mode %s, at %s:%d',
                    request['store'], num_workers, policy.s_lower, policy.s_upper, policy.mode,
                    bound_host, bound_port)
        return _controller_answer


# -- worker-aware updates ------------------------------------------------------

#: Largest integer key MXNet can place on a server: it computes key * 9973 in a C int.
MAX_INT_KEY = (2 ** 31 - 1) // 9973
#: Bit pattern of the first element of a refresh push (a NaN no arithmetic produces).
REFRESH_BITS = 0x7FC5A1E5


def refresh_marker(shape):
    """A push value that asks the server to copy its latest weights into the sender's slot."""
    out = np.zeros(shape, dtype=np.float32)
    out.reshape(-1)[:1] = np.array([REFRESH_BITS], dtype=np.uint32).view(np.float32)
    return out


def _is_refresh(grad):
    head = grad.reshape((-1,))[0:1].asnumpy()
    return head.view(np.uint32)[0] == REFRESH_BITS


_LIVE = None          # the ServerOptimizer in use in this server process
_SERVER_RANK = None


def server_rank():
    """This server's ps-lite rank (found on MXNet's KVStoreServer object), or None."""
    global _SERVER_RANK
    if _SERVER_RANK is None:
        import gc
        for obj in gc.get_objects():
            if type(obj).__name__ == 'KVStoreServer' and hasattr(obj, 'kvstore'):
                _SERVER_RANK = obj.kvstore.rank
                break
    return _SERVER_RANK


class Control:
    """A command for the servers, sent where MXNet sends an optimizer.

    MXNet's server controller unpickles the command body and installs the
    result as its optimizer.  Unpickling a Control runs the command on the
    live :class:`ServerOptimizer` of that server and yields that same object,
    so the servers keep their optimizer and state.  Actions: ``set_lr``
    (float), ``save`` and ``load`` (a path prefix).
    """

    def __init__(self, action, payload):
        self.action = action
        self.payload = payload

    def __reduce__(self):
        return (_run_control, (self.action, self.payload))


#: Exit status of a server whose update or command failed.
SERVER_FAILED = 70


def _end_server(what):
    """Log the exception being handled and end this server process with SERVER_FAILED.

    MXNet calls our updater and commands from ctypes callbacks that print and
    *ignore* exceptions: the job would go on silently wrong.  Ending the server
    instead lets the launcher stop the job, naming this server.
    """
    logger.exception('server: %s failed; stopping this server', what)
    sys.stderr.write('mxnet-ssp: server %s failed (see above); exiting with status %d\n'
                     % (what, SERVER_FAILED))
    sys.stderr.flush()
    os._exit(SERVER_FAILED)


def _run_control(action, payload):
    # runs inside MXNet's server controller: see _end_server
    try:
        if _LIVE is None:
            raise RuntimeError('no mxnet-ssp optimizer on this server (set_optimizer first)')
        _LIVE.control(action, payload)
    except Exception:
        _end_server('command %s %r' % (action, payload))
    return _LIVE


def _to_numpy(obj):
    from mxnet import ndarray as nd
    if isinstance(obj, nd.NDArray):
        return ('nd', obj.asnumpy())
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [_to_numpy(o) for o in obj])
    return ('raw', obj)


def _from_numpy(obj):
    from mxnet import ndarray as nd
    kind, value = obj
    if kind == 'nd':
        return nd.array(value, dtype=value.dtype)
    if kind in ('list', 'tuple'):
        items = [_from_numpy(o) for o in value]
        return items if kind == 'list' else tuple(items)
    return value


class _KeyState:
    """Slot mode, per parameter k on this server: the one canonical weight and its book-keeping."""

    __slots__ = ('weight', 'version', 'pulled', 'state', 'acc', 'count', 'taus', 'restore',
                 'slot_refs')

    def __init__(self, weight, num_workers, state):
        self.weight = weight              # canonical weight (an NDArray owned by us)
        self.version = 0                  # updates applied to it
        self.pulled = [0] * num_workers   # version each worker's slot holds (= last pulled)
        self.state = state                # optimizer state (momentum, MeanSquare, ...)
        self.acc = None                   # n-softsync: sum of the gradients of this round
        self.count = 0
        self.taus = []
        self.restore = {}                 # worker -> saved backup to put in its slot
        self.slot_refs = {}               # worker -> its slot (MXNet's storage of key k*M+m)


class ServerOptimizer:
    """The updater object mxnet-ssp stores send to the servers.

    Parameters
    ----------
    optimizer : mxnet.optimizer.Optimizer
        The user's optimizer; pickled with this object.
    num_workers : int
        Workers in the job (M).
    slots : bool
        Slot mode: parameter k arrives as key ``k * M + m`` from worker m.
        The servers keep one canonical weight per k (updated by every
        worker's gradients) and after each push copy it into the sender's
        slot, which the sender pulls.  The server thus knows the sender of
        every gradient, its staleness ``tau = version(k) - version the sender
        last pulled`` and what the sender last pulled (its slot, DC-ASGD's
        backup).
    softsync_c : int
        Slot mode: apply one averaged update per `softsync_c` gradients of a
        parameter (Rudra's n-softsync with c = floor(M / n)); 1 applies each.
    metrics_dir : str or None
        Where the servers write staleness statistics.
    staleness_log : bool
        Also log every gradient (key, sender, tau, version) as JSON Lines.

    Notes
    -----
    Optimizer state lives in this object, not in MXNet's ``Updater``, so a
    learning-rate change or a state restore (which make MXNet build a new
    Updater around this object) keeps it.  Attribute access falls through to
    `optimizer`, so MXNet sees the user's optimizer (multi-precision flag,
    ...).  All methods run on the server's single update thread.
    """

    def __init__(self, optimizer, num_workers=1, slots=False, softsync_c=1,
                 metrics_dir=None, staleness_log=False):
        self.optimizer = optimizer
        # MXNet's Updater batches keys when aggregate_num > 0; the server calls
        # it with one key at a time anyway, and batching would hide the reserved key.
        self.aggregate_num = 0
        self.num_workers = num_workers
        self.slots = slots
        self.softsync_c = softsync_c
        self.metrics_dir = metrics_dir
        self.staleness_log = staleness_log
        self._init_runtime()

    def _init_runtime(self):
        self._states = {}                 # plain mode: key -> optimizer state
        self._keys = {}                   # slot mode: k -> _KeyState
        self._discovery_keys = set()
        self._hist = {}                   # staleness -> gradients
        self._seq = 0
        self._log = None
        self._pending_load = None

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith('_')
                or k == 'aggregate_num'}

    def __setstate__(self, state):
        global _LIVE
        self.__dict__.update(state)
        self._init_runtime()
        opt = self.optimizer
        if getattr(opt, 'lr_scheduler', None) is not None:
            # the workers drive the schedule with their own step counts (see the store)
            opt.lr = float(opt.lr_scheduler(1))
            opt.lr_scheduler = None
        _LIVE = self
        import atexit
        atexit.register(self._write_summary)

    def __getattr__(self, name):
        if name.startswith('__') or name == 'optimizer':
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    @property
    def worker_aware(self):
        """Whether the rule uses the sender's staleness and backup."""
        return hasattr(self.optimizer, 'prepare_grad') and hasattr(self.optimizer, 'apply')

    # -- MXNet's Updater interface ----------------------------------------------
    def create_state_multi_precision(self, index, weight):
        """No state in MXNet's Updater: it lives here (see Notes)."""
        return None

    def create_state(self, index, weight):
        """No state in MXNet's Updater: it lives here (see Notes)."""
        return None

    def update_multi_precision(self, index, weight, grad, state):
        """Apply one pushed gradient, or answer a discovery request."""
        self._guarded_update(index, weight, grad)

    def update(self, index, weight, grad, state):
        """Apply one pushed gradient, or answer a discovery request."""
        self._guarded_update(index, weight, grad)

    def _guarded_update(self, index, weight, grad):
        # runs inside MXNet's updater callback: see _end_server
        try:
            self._update(index, weight, grad)
        except Exception:
            _end_server('update of key %r' % (index,))

    # -- the update ----------------------------------------------------------------
    def _update(self, index, weight, grad):
        if index in self._discovery_keys or (grad.shape == (DISCOVERY_LEN,) and is_discovery(grad)):
            self._discovery_keys.add(index)
            self._answer_discovery(weight, grad)
            return
        if not self.slots:
            state = self._states.get(index)
            if index not in self._states:
                state = self._states[index] = self.optimizer.create_state_multi_precision(
                    index, weight)
            self.optimizer.update_multi_precision(index, weight, grad, state)
            return
        from mxnet import ndarray as nd
        k, m = divmod(index, self.num_workers)
        ks = self._keys.get(k)
        if ks is None:
            ks = self._new_key(k, weight)
        ks.slot_refs[m] = weight
        if m in ks.restore:               # a restored job: this worker's backup
            weight[:] = ks.restore.pop(m)
        if _is_refresh(grad):
            weight[:] = ks.weight
            ks.pulled[m] = ks.version
            self._record(k, m, None, ks.version, False)
            return
        opt = self.optimizer
        tau = ks.version - ks.pulled[m]
        if self.worker_aware:
            if getattr(opt, 'uses_grad_staleness', False):   # per-gradient alpha0 / tau
                g = opt.prepare_grad(k, ks.weight, grad, ks.state, weight, staleness=float(tau))
            else:
                g = opt.prepare_grad(k, ks.weight, grad, ks.state, weight)
        else:
            g = grad
        applied = False
        if self.softsync_c <= 1:
            self._apply(k, ks, g, float(tau))
            applied = True
        else:
            ks.acc = g.copy() if ks.acc is None else ks.acc + g
            ks.count += 1
            ks.taus.append(tau)
            if ks.count >= self.softsync_c:
                self._apply(k, ks, ks.acc / ks.count, float(sum(ks.taus)) / len(ks.taus))
                ks.acc, ks.count, ks.taus = None, 0, []
                applied = True
        weight[:] = ks.weight             # the sender's slot: what it pulls next
        ks.pulled[m] = ks.version
        # the receive buffer `grad` is MXNet's and must not be read after we return
        nd.waitall()
        self._record(k, m, tau, ks.version, applied)

    def _new_key(self, k, weight):
        ks = _KeyState(weight.copy(), self.num_workers, None)
        if self.worker_aware:
            ks.state = self.optimizer.create_state(k, ks.weight)
        else:
            ks.state = self.optimizer.create_state_multi_precision(k, ks.weight)
        self._keys[k] = ks
        if self._pending_load is not None and k in self._pending_load:
            self._restore_key(k, ks, self._pending_load.pop(k))
        return ks

    def _apply(self, k, ks, grad, staleness):
        if self.worker_aware:
            self.optimizer.apply(k, ks.weight, grad, ks.state, staleness)
        else:
            self.optimizer.update_multi_precision(k, ks.weight, grad, ks.state)
        ks.version += 1

    def _record(self, k, m, tau, version, applied):
        """Count a gradient's staleness (tau None: a refresh) and log it if asked."""
        if tau is not None:
            self._hist[tau] = self._hist.get(tau, 0) + 1
        self._seq += 1
        if self.staleness_log and self.metrics_dir:
            if self._log is None:
                os.makedirs(self.metrics_dir, exist_ok=True)
                path = os.path.join(self.metrics_dir, 'server-%s-staleness.jsonl' % self._tag())
                self._log = open(path, 'w', buffering=1)
            self._log.write(json.dumps({
                'seq': self._seq, 'key': k, 'sender': m,
                'event': 'refresh' if tau is None else 'gradient', 'tau': tau,
                'version': version, 'applied': applied}) + '\n')

    def _tag(self):
        rank = server_rank()
        return str(rank) if rank is not None else 'pid%d' % os.getpid()

    def staleness_histogram(self):
        """{tau: number of gradients} of the gradients this server received in slot mode."""
        return dict(self._hist)

    def _write_summary(self):
        if not (self.slots and self.metrics_dir and self._hist):
            return
        total = sum(self._hist.values())
        mean = sum(t * c for t, c in self._hist.items()) / float(total)
        path = os.path.join(self.metrics_dir, 'server-%s-staleness.json' % self._tag())
        try:
            with open(path, 'w') as f:
                json.dump({'gradients': total, 'mean_tau': mean, 'max_tau': max(self._hist),
                           'histogram': {str(t): c for t, c in sorted(self._hist.items())},
                           'softsync_c': self.softsync_c, 'num_workers': self.num_workers}, f)
        except OSError:
            logger.exception('server: cannot write %s', path)

    # -- commands ------------------------------------------------------------------
    def control(self, action, payload):
        """Run a :class:`Control` command (on the server's update thread)."""
        if action == 'set_lr':
            self.optimizer.lr = float(payload)
        elif action == 'save':
            self._save(payload)
        elif action == 'load':
            self._load(payload)
        else:
            raise ValueError('unknown mxnet-ssp server command %r' % (action,))
        logger.info('server: %s %s', action, payload)

    def _path(self, prefix):
        return '%s.server-%s' % (prefix, self._tag())

    def _save(self, prefix):
        from mxnet import ndarray as nd
        nd.waitall()
        keys = {}
        for k, ks in self._keys.items():
            keys[k] = {'weight': ks.weight.asnumpy(), 'version': ks.version,
                       'pulled': list(ks.pulled), 'state': _to_numpy(ks.state),
                       'acc': None if ks.acc is None else ks.acc.asnumpy(),
                       'count': ks.count, 'taus': list(ks.taus)}
        opt = self.optimizer
        blob = {'format': 1, 'slots': self.slots, 'num_workers': self.num_workers,
                'plain': {i: _to_numpy(st) for i, st in self._states.items()},
                'keys': keys, 'backups': self._backups(),
                'lr': opt.lr, 'num_update': opt.num_update,
                'index_update_count': dict(opt._index_update_count),
                'hist': dict(self._hist)}
        with open(self._path(prefix), 'wb') as f:
            pickle.dump(blob, f)

    def _backups(self):
        # what each worker last pulled: its slot (MXNet's storage, seen at its pushes)
        return {k: {m: ref.asnumpy() for m, ref in ks.slot_refs.items()}
                for k, ks in self._keys.items()}

    def _load(self, prefix):
        with open(self._path(prefix), 'rb') as f:
            blob = pickle.load(f)
        if blob.get('format') != 1 or blob['slots'] != self.slots or (
                self.slots and blob['num_workers'] != self.num_workers):
            raise ValueError('mxnet-ssp: %s was saved by a job with a different store set-up '
                             '(slot mode %s, %s workers)' % (self._path(prefix), blob['slots'],
                                                           blob['num_workers']))
        opt = self.optimizer
        opt.lr = blob['lr']
        opt.num_update = blob['num_update']
        # MXNet's Updater re-selects the counts of the weight's device before every
        # update (_set_current_context), so the restored counts must be that entry too
        counts = dict(blob['index_update_count'])
        opt._all_index_update_counts = {0: counts}
        opt._index_update_count = counts
        self._states = {i: _from_numpy(st) for i, st in blob['plain'].items()}
        self._hist = dict(blob['hist'])
        self._pending_load = {k: dict(saved, backups=blob['backups'].get(k, {}))
                              for k, saved in blob['keys'].items()}
        for k, ks in list(self._keys.items()):
            if k in self._pending_load:
                self._restore_key(k, ks, self._pending_load.pop(k))

    def _restore_key(self, k, ks, saved):
        from mxnet import ndarray as nd
        ks.weight[:] = nd.array(saved['weight'])
        ks.version = saved['version']
        ks.pulled = list(saved['pulled'])
        ks.state = _from_numpy(saved['state'])
        ks.acc = None if saved['acc'] is None else nd.array(saved['acc'])
        ks.count, ks.taus = saved['count'], list(saved['taus'])
        ks.restore = {m: nd.array(b) for m, b in saved.get('backups', {}).items()}

    # -- discovery -----------------------------------------------------------------
    @staticmethod
    def _answer_discovery(weight, grad):
        try:
            request = decode_blob(grad.asnumpy())
            if not request or request.get('v') != 1:
                answer = {'error': 'malformed discovery request'}
            else:
                answer = _start_controller(request)
        except Exception as err:  # reported to the worker, which fails with it
            logger.exception('server: cannot start the synchronization controller')
            answer = {'error': '%s: %s' % (type(err).__name__, err)}
        from mxnet import ndarray as nd
        weight[:] = nd.array(encode_blob(answer), dtype=weight.dtype, ctx=weight.context)
