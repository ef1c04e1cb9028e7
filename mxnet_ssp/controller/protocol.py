"""Wire format of the synchronization controller (stdlib only, no MXNet).

One TCP connection per worker rank to the controller
(:class:`mxnet_ssp.controller.server.ControllerServer`).  Every message is a frame::

    +----------------------+---------+-----------------------------+
    | length: uint32, BE   | type: B | body (fixed layout by type) |
    +----------------------+---------+-----------------------------+

``length`` counts the payload (type byte + body); a frame with length 0 or
more than :data:`MAX_FRAME` bytes is malformed and the receiver closes the
connection.  All integers are big-endian (``struct`` format ``>``).

========  ====  =========================  ===================================
message   type  body                       direction and meaning
========  ====  =========================  ===================================
CHALLENGE 1     ``H`` version, ``32s``     server -> client on connect; fresh
                nonce                      random nonce per connection
HELLO     2     ``H`` version, ``I`` rank, client -> server; ``mac`` is
                ``32s`` mac, then          :func:`hello_mac` of the nonce (and
                optionally UTF-8 JSON      the settings); the settings are
                ``{"host", "settings"}``   the worker's host and those that
                                           must agree (:func:`encode_hello`)
WELCOME   3     ``I`` num_workers,         server -> client: authenticated;
                ``I`` s_lower, ``I``       echoes the job's settings and the
                s_upper, ``B`` mode,       controller's hold timeout
                ``d`` timeout (s)
CLOCK     4     ``Q`` t                    client -> server: this worker has
                                           completed push number ``t``
RELEASE   5     ``Q`` clock, ``q`` lead,   server -> client: the OK for push
                ``Q`` t_slowest, ``I``     ``clock``; mirrors
                granted, ``I`` extra_left  :class:`mxnet_ssp.core.sync.Release`
LEAVE     6     (none)                     client -> server: worker finished
BYE       7     (none), or UTF-8 JSON      server -> client: LEAVE processed;
                ``{"lost": [...]}``        in elastic mode the workers lost so
                                           far (:func:`encode_bye`)
ERROR     8     UTF-8 text                 server -> client: the job failed
                                           (or, before WELCOME, this
                                           connection was refused); the text
                                           says why
LOST      9     UTF-8 JSON ``{"rank",      server -> client, elastic mode: a
                "clock", "after_s"}``      worker was dropped (sent to every
                                           connected worker, and each loss
                                           so far right after WELCOME and
                                           REJOINED; read with the next
                                           answer it waits for)
BARRIER   10    (none)                     client -> server: wait until every
                                           worker neither lost nor left is
                                           at the barrier
PASSED    11    (none)                     server -> client: the barrier
                                           passed
REJOINED  12    UTF-8 JSON ``{"clock"}``   server -> client, elastic mode, right
                                           after WELCOME to a rank that was
                                           lost: it is back, at this clock
========  ====  =========================  ===================================

The HELLO ``mac`` is ``HMAC-SHA256(secret, b'mxnet-ssp-v1' + nonce +
rank.to_bytes(4, 'big') + settings)``, ``settings`` being the JSON bytes after the fixed
fields (none in a HELLO without settings, which is a HELLO of an mxnet-ssp that sends none
and still accepted); the secret never crosses the wire, a captured HELLO is useless on another
connection because the nonce differs, and the settings cannot be altered on the way.  The
settings body is ``{"host": str, "settings": {name: [value, origin], ...}}`` (strings only,
:func:`mxnet_ssp.config.job_settings`); anything else after the fixed fields is malformed.

The batch-balancing service (:mod:`mxnet_ssp.controller.balance_service`) speaks the same
frames on its own port: the same CHALLENGE, HELLO and ERROR, a HELLO ``mac`` under its own
context ``b'mxnet-ssp-balance-v1'`` (:data:`BALANCE_MAC_CONTEXT`, so a MAC made for one
service is refused by the other), and its own types, whose body is compact UTF-8 JSON
(:func:`encode_json`); a service refuses the other's types.

=========  ====  =========================  ==================================
message    type  body (JSON)                direction and meaning
=========  ====  =========================  ==================================
B_WELCOME  17    ``{"sizes", "version"}``   service -> worker: authenticated;
                                            the split in force
REPORT     18    ``{"model": [a, c]}`` or   worker -> service: this worker's
                 ``{"model": null}``        cost model for the round
DECISION   19    ``{"sizes", "version",     service -> worker: the split after
                 "round"}``                 the report (lockstep: the round's)
B_LEAVE    20    (none)                     worker -> service: worker finished
=========  ====  =========================  ==================================

Frames from the service may be longer than :data:`MAX_FRAME` (a split of many workers):
a balancing client reads up to :data:`MAX_JSON_FRAME`.
"""
import hashlib
import hmac
import json
import struct

from ..core.names import DSSP_MODES
from ..core.sync import Release

__all__ = ['ControllerError', 'ProtocolError', 'VERSION', 'MAX_FRAME', 'NONCE_BYTES',
           'CHALLENGE', 'HELLO', 'WELCOME', 'CLOCK', 'RELEASE', 'LEAVE', 'BYE', 'ERROR',
           'peer_mac', 'hello_mac', 'frame', 'FrameReader', 'encode_challenge',
           'decode_challenge', 'encode_hello', 'decode_hello', 'decode_hello_settings',
           'encode_settings', 'decode_settings', 'encode_welcome',
           'decode_welcome', 'encode_clock', 'decode_clock', 'encode_release',
           'decode_release', 'encode_error', 'decode_error', 'LEAVE_FRAME', 'BYE_FRAME',
           'encode_bye', 'decode_bye', 'LOST', 'BARRIER', 'PASSED', 'encode_lost',
           'decode_lost', 'describe_losses', 'BARRIER_FRAME', 'PASSED_FRAME', 'REJOINED',
           'encode_rejoined', 'decode_rejoined',
           'message_name', 'BALANCE_MAC_CONTEXT', 'MAX_JSON_FRAME', 'B_WELCOME', 'REPORT',
           'DECISION', 'B_LEAVE', 'B_LEAVE_FRAME', 'encode_json', 'decode_json']

VERSION = 1
MAX_FRAME = 4096
NONCE_BYTES = 32
MAC_CONTEXT = b'mxnet-ssp-v1'
#: The balancing service's HELLO context (see the module docstring).
BALANCE_MAC_CONTEXT = b'mxnet-ssp-balance-v1'
#: Longest frame a balancing client accepts from the service.
MAX_JSON_FRAME = 1 << 20

(CHALLENGE, HELLO, WELCOME, CLOCK, RELEASE, LEAVE, BYE, ERROR, LOST, BARRIER, PASSED,
 REJOINED) = range(1, 13)
B_WELCOME, REPORT, DECISION, B_LEAVE = range(17, 21)
_NAMES = {CHALLENGE: 'CHALLENGE', HELLO: 'HELLO', WELCOME: 'WELCOME', CLOCK: 'CLOCK',
          RELEASE: 'RELEASE', LEAVE: 'LEAVE', BYE: 'BYE', ERROR: 'ERROR', LOST: 'LOST',
          BARRIER: 'BARRIER', PASSED: 'PASSED', REJOINED: 'REJOINED',
          B_WELCOME: 'B_WELCOME', REPORT: 'REPORT', DECISION: 'DECISION', B_LEAVE: 'B_LEAVE'}

_HEADER = struct.Struct('>I')
_CHALLENGE = struct.Struct('>BH%ds' % NONCE_BYTES)
_HELLO = struct.Struct('>BHI32s')
_WELCOME = struct.Struct('>BIIIBd')
_CLOCK = struct.Struct('>BQ')
_RELEASE = struct.Struct('>BQqQII')
_CLOCK_FRAME = struct.Struct('>IBQ')
_RELEASE_FRAME = struct.Struct('>IBQqQII')


class ControllerError(RuntimeError):
    """The synchronization controller failed or could not be reached.

    The message names the controller address and the worker rank involved,
    or is the controller's own job-failure message.
    """


class ProtocolError(ValueError):
    """A peer sent bytes that are not a valid message at this point."""


def message_name(kind):
    """Name of message type `kind` for error messages."""
    return _NAMES.get(kind, 'unknown type %d' % kind)


def peer_mac(secret, context, nonce, rank, body=b''):
    """HMAC-SHA256 of ``context + nonce + rank (4 bytes, big-endian) + body`` under `secret`:
    how a peer proves it knows the job's secret without sending it.  Each service names its
    own `context`, so a MAC made for one is useless for another; `body` is the HELLO's
    settings (empty: the MAC of a HELLO without them)."""
    return hmac.new(secret, context + nonce + int(rank).to_bytes(4, 'big') + bytes(body),
                    hashlib.sha256).digest()


def hello_mac(secret, nonce, rank, body=b''):
    """The controller's HELLO MAC: :func:`peer_mac` with :data:`MAC_CONTEXT`."""
    return peer_mac(secret, MAC_CONTEXT, nonce, rank, body)


def frame(payload):
    """`payload` with its length header."""
    return _HEADER.pack(len(payload)) + payload


class FrameReader:
    """Split a byte stream into payloads.

    Not thread-safe.  :meth:`feed` raises :class:`ProtocolError` on a length
    of 0 or above `max_frame` (default :data:`MAX_FRAME`); the connection must then
    be dropped.
    """

    __slots__ = ('_buf', '_max')

    def __init__(self, max_frame=MAX_FRAME):
        self._buf = b''
        self._max = max_frame

    def feed(self, data):
        """Add received bytes; return the list of complete payloads."""
        buf = self._buf + data if self._buf else data
        out = []
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = _HEADER.unpack_from(buf, pos)
            if size == 0 or size > self._max:
                self._buf = b''
                raise ProtocolError('frame length %d outside 1..%d' % (size, self._max))
            if end - pos - 4 < size:
                break
            out.append(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
        self._buf = buf[pos:] if pos < end else b''
        return out

    @property
    def pending(self):
        """Bytes of an incomplete frame held back."""
        return len(self._buf)


def _unpack(st, payload, kind):
    if len(payload) != st.size:
        raise ProtocolError('%s has %d bytes, expected %d'
                            % (message_name(kind), len(payload), st.size))
    return st.unpack(payload)


def encode_challenge(nonce):
    """CHALLENGE frame carrying `nonce`."""
    return frame(_CHALLENGE.pack(CHALLENGE, VERSION, nonce))


def decode_challenge(payload):
    """Return ``(version, nonce)``."""
    _, version, nonce = _unpack(_CHALLENGE, payload, CHALLENGE)
    return version, nonce


#: Longest host name and setting text a HELLO's settings may carry.
MAX_SETTING_TEXT = 512


def _shortened(origin, keep):
    """`origin` (a file path and line) cut from the left to ``'...'`` and its last `keep`
    characters if it is longer; ``''`` for `keep` 0."""
    if not keep:
        return ''
    return '...' + origin[-keep:] if len(origin) > keep else origin


def encode_settings(host, settings):
    """The HELLO's settings body: compact UTF-8 JSON ``{"host", "settings"}``.

    The host is cut to :data:`MAX_SETTING_TEXT` characters, and so is every origin (a file
    path, from the left, as ``'...'`` and its end); origins are shortened further from the left
    if the HELLO would not fit one frame.  ValueError for a setting's name or value longer than
    :data:`MAX_SETTING_TEXT` (:func:`decode_settings` would refuse it) or settings that do not
    fit one frame even without their origins.
    """
    settings = {str(k): [str(v[0]), str(v[1])] for k, v in settings.items()}
    too_long = sorted(k for k, v in settings.items()
                      if len(k) > MAX_SETTING_TEXT or len(v[0]) > MAX_SETTING_TEXT)
    if too_long:
        raise ValueError('setting %.80s has a name or value longer than the %d characters a '
                         'HELLO carries' % (too_long[0], MAX_SETTING_TEXT))
    settings = {k: [v[0], _shortened(v[1], MAX_SETTING_TEXT - 3)
                    if len(v[1]) > MAX_SETTING_TEXT else v[1]]
                for k, v in settings.items()}
    for keep in (None, 120, 40, 0):
        if keep is not None:
            settings = {k: [v[0], _shortened(v[1], keep)] for k, v in settings.items()}
        body = json.dumps({'host': str(host)[:MAX_SETTING_TEXT], 'settings': settings},
                          separators=(',', ':'), sort_keys=True).encode('utf-8')
        if _HELLO.size + len(body) <= MAX_FRAME:
            return body
    raise ValueError('the settings do not fit one HELLO frame (%d bytes)' % len(body))


def decode_settings(body):
    """``(host, settings)`` of a HELLO's settings body; ProtocolError if it is not one."""
    try:
        obj = json.loads(body.decode('utf-8'))
    except ValueError as exc:
        raise ProtocolError('HELLO settings are not JSON: %s' % exc) from None
    if not isinstance(obj, dict) or set(obj) != {'host', 'settings'}:
        raise ProtocolError('HELLO settings are not {"host", "settings"}: %.80r' % (obj,))
    host, settings = obj['host'], obj['settings']
    if not isinstance(host, str) or len(host) > MAX_SETTING_TEXT:
        raise ProtocolError('HELLO settings name no valid host: %.80r' % (host,))
    if not isinstance(settings, dict) or not all(
            isinstance(k, str) and len(k) <= MAX_SETTING_TEXT and isinstance(v, list)
            and len(v) == 2 and all(isinstance(x, str) and len(x) <= MAX_SETTING_TEXT
                                    for x in v)
            for k, v in settings.items()):
        raise ProtocolError('HELLO settings are not {name: [value, origin]} strings: %.80r'
                            % (settings,))
    return host, settings


def encode_hello(rank, mac, version=VERSION, body=b''):
    """HELLO frame for `rank`; `body`: :func:`encode_settings`'s bytes, or empty (the MAC
    must cover the same `body`)."""
    return frame(_HELLO.pack(HELLO, version, rank, mac) + bytes(body))


def decode_hello(payload):
    """Return ``(version, rank, mac)`` of a HELLO without settings.  A HELLO with settings
    is refused here; see :func:`decode_hello_settings`."""
    _, version, rank, mac = _unpack(_HELLO, payload, HELLO)
    return version, rank, mac


def decode_hello_settings(payload):
    """Return ``(version, rank, mac, body, settings)``: `body` the raw settings bytes the
    MAC covers (``b''`` if none) and `settings` ``(host, {name: [value, origin]})`` or None.
    ProtocolError for a short HELLO or a settings body that is not valid."""
    if len(payload) < _HELLO.size:
        raise ProtocolError('HELLO has %d bytes, expected at least %d'
                            % (len(payload), _HELLO.size))
    _, version, rank, mac = _HELLO.unpack_from(payload)
    body = bytes(payload[_HELLO.size:])
    return version, rank, mac, body, (decode_settings(body) if body else None)


def encode_welcome(num_workers, s_lower, s_upper, mode, timeout):
    """WELCOME frame with the job settings."""
    return frame(_WELCOME.pack(WELCOME, num_workers, s_lower, s_upper,
                               DSSP_MODES.index(mode), float(timeout)))


def decode_welcome(payload):
    """Return ``(num_workers, s_lower, s_upper, mode, timeout)``."""
    _, num_workers, s_lower, s_upper, mode, timeout = _unpack(_WELCOME, payload, WELCOME)
    if mode >= len(DSSP_MODES):
        raise ProtocolError('WELCOME names unknown mode %d' % mode)
    return num_workers, s_lower, s_upper, DSSP_MODES[mode], timeout


def encode_clock(t):
    """CLOCK frame for push number `t`."""
    return _CLOCK_FRAME.pack(_CLOCK.size, CLOCK, t)


def decode_clock(payload):
    """Return t."""
    return _unpack(_CLOCK, payload, CLOCK)[1]


def encode_release(rel):
    """RELEASE frame mirroring :class:`~mxnet_ssp.core.sync.Release` `rel`."""
    return _RELEASE_FRAME.pack(_RELEASE.size, RELEASE, rel.clock, rel.lead, rel.t_slowest,
                               rel.granted, rel.extra_left)


def decode_release(payload, rank):
    """Return the :class:`~mxnet_ssp.core.sync.Release` for `rank`."""
    _, clock, lead, t_slowest, granted, extra_left = _unpack(_RELEASE, payload, RELEASE)
    return Release(rank, clock, lead, t_slowest, granted, extra_left)   # positional: faster


def encode_error(text):
    """ERROR frame with `text` (truncated to fit one frame)."""
    data = text.encode('utf-8', 'replace')[:MAX_FRAME - 1]
    return frame(bytes((ERROR,)) + data)


def decode_error(payload):
    """Return the text of an ERROR payload."""
    return payload[1:].decode('utf-8', 'replace')


LEAVE_FRAME = frame(bytes((LEAVE,)))
BYE_FRAME = frame(bytes((BYE,)))


def encode_bye(lost=()):
    """BYE frame; with `lost` (elastic mode: dicts ``{"rank", "clock", "after_s"}``, in the
    order they were lost) its body lists them, as many as fit one frame."""
    if not lost:
        return BYE_FRAME
    lost = list(lost)
    while True:
        payload = bytes((BYE,)) + json.dumps({'lost': lost}, separators=(',', ':')).encode()
        if len(payload) <= MAX_FRAME or not lost:
            return frame(payload)
        lost.pop()


def decode_bye(payload):
    """The lost workers a BYE payload lists (an empty list for a bare BYE)."""
    if len(payload) == 1:
        return []
    obj = decode_json(payload, BYE)
    lost = obj.get('lost')
    if not isinstance(lost, list) or not all(_is_loss(x) for x in lost):
        raise ProtocolError('BYE body has no valid "lost" list: %.80r' % (obj,))
    return lost


def _is_loss(x):
    return (isinstance(x, dict) and type(x.get('rank')) is int and
            type(x.get('clock')) is int and isinstance(x.get('after_s', 0), (int, float)))


def describe_losses(lost):
    """``'worker 1 at clock 40 (12.3 s after the controller started), ...'`` for the lost
    workers of a BYE or of LOST notices."""
    return ', '.join('worker %d at clock %d (%.1f s after the controller started)%s'
                     % (x['rank'], x['clock'], x.get('after_s', 0),
                        ' on %s' % x['host'] if isinstance(x.get('host'), str) else '')
                     for x in lost)


def encode_lost(loss):
    """LOST frame for one dropped worker, a dict ``{"rank", "clock", "after_s"}``."""
    return encode_json(LOST, loss, MAX_FRAME)


def decode_lost(payload):
    """The dict of a LOST payload; ProtocolError if it is not one."""
    obj = decode_json(payload, LOST)
    if not _is_loss(obj):
        raise ProtocolError('LOST body is not a lost worker: %.80r' % (obj,))
    return obj


def encode_rejoined(clock):
    """REJOINED frame: the clock a rejoining worker starts at."""
    return encode_json(REJOINED, {'clock': int(clock)}, MAX_FRAME)


def decode_rejoined(payload):
    """The clock of a REJOINED payload; ProtocolError if it has none."""
    clock = decode_json(payload, REJOINED).get('clock')
    if type(clock) is not int or clock < 0:
        raise ProtocolError('REJOINED body has no valid clock: %.80r' % (payload[1:],))
    return clock


BARRIER_FRAME = frame(bytes((BARRIER,)))
PASSED_FRAME = frame(bytes((PASSED,)))


def encode_json(kind, obj, max_frame=MAX_JSON_FRAME):
    """Frame of type `kind` whose body is `obj` as compact UTF-8 JSON (balancing service).

    Raises ValueError if the frame's payload would exceed `max_frame` bytes.
    """
    payload = bytes((kind,)) + json.dumps(obj, separators=(',', ':')).encode('utf-8')
    if len(payload) > max_frame:
        raise ValueError('%s of %d bytes exceeds %d' % (message_name(kind), len(payload),
                                                        max_frame))
    return frame(payload)


def decode_json(payload, kind):
    """The JSON object (a dict) in a payload of type `kind`; ProtocolError if it is none."""
    if payload[0] != kind:
        raise ProtocolError('expected %s, got %s' % (message_name(kind), message_name(payload[0])))
    try:
        obj = json.loads(payload[1:].decode('utf-8'))
    except ValueError as exc:        # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ProtocolError('%s body is not JSON: %s' % (message_name(kind), exc)) from None
    if not isinstance(obj, dict):
        raise ProtocolError('%s body is not a JSON object: %.80r' % (message_name(kind), obj))
    return obj


B_LEAVE_FRAME = frame(bytes((B_LEAVE,)))
