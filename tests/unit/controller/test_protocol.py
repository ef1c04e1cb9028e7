"""The controller's wire format (mxnet_ssp/controller/protocol.py) byte for byte.

Every expected frame below is written out from the table in the module's docstring
(length uint32 BE, type byte, body big-endian), not produced by the module itself, so a
changed constant, field order or struct code fails here before it reaches a socket.
"""
import hashlib
import json
import hmac
import struct

import pytest

from mxnet_ssp.controller import protocol as p
from mxnet_ssp.core.sync import Release

U64 = 2 ** 64 - 1
U32 = 2 ** 32 - 1
I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1


# ----------------------------------------------------------------------------- constants

def test_constants_are_the_documented_wire_values():
    assert p.VERSION == 1
    assert p.MAX_FRAME == 4096
    assert p.NONCE_BYTES == 32
    assert p.MAC_CONTEXT == b'mxnet-ssp-v1'
    assert (p.CHALLENGE, p.HELLO, p.WELCOME, p.CLOCK, p.RELEASE, p.LEAVE, p.BYE,
            p.ERROR) == (1, 2, 3, 4, 5, 6, 7, 8)
    # the codes of the modes are on the wire: their order may only be appended to
    assert p.DSSP_MODES == ('bounded', 'paper', 'threshold')     # a WELCOME's mode index


@pytest.mark.parametrize('kind, name', [(1, 'CHALLENGE'), (2, 'HELLO'), (3, 'WELCOME'),
                                        (4, 'CLOCK'), (5, 'RELEASE'), (6, 'LEAVE'),
                                        (7, 'BYE'), (8, 'ERROR'), (9, 'LOST'),
                                        (10, 'BARRIER'), (11, 'PASSED'), (12, 'REJOINED')])
def test_message_name_of_each_type(kind, name):
    assert p.message_name(kind) == name


@pytest.mark.parametrize('kind', [0, 13, 255])
def test_message_name_of_an_unknown_type(kind):
    assert p.message_name(kind) == 'unknown type %d' % kind


def test_leave_and_bye_frames_are_one_type_byte():
    assert p.LEAVE_FRAME == b'\x00\x00\x00\x01\x06'
    assert p.BYE_FRAME == b'\x00\x00\x00\x01\x07'


def test_errors_are_the_documented_classes():
    assert issubclass(p.ProtocolError, ValueError)
    assert issubclass(p.ControllerError, RuntimeError)


# ----------------------------------------------------------------------------- frame

@pytest.mark.parametrize('payload', [b'\x01', b'abc', bytes(range(256)) * 16])
def test_frame_prefixes_the_big_endian_length(payload):
    assert p.frame(payload) == len(payload).to_bytes(4, 'big') + payload


# ----------------------------------------------------------------------------- HMAC

def test_hello_mac_is_hmac_sha256_of_context_nonce_and_rank():
    secret, nonce = b'k' * 32, bytes(range(32))
    for rank in (0, 1, 258, U32):
        want = hmac.new(secret, b'mxnet-ssp-v1' + nonce + struct.pack('>I', rank),
                        hashlib.sha256).digest()
        assert p.hello_mac(secret, nonce, rank) == want
        assert len(want) == 32


def test_peer_mac_is_one_construction_with_a_context_per_service():
    secret, nonce = b's' * 32, bytes(range(32, 64))
    by_hand = hmac.new(secret, b'ctx' + nonce + b'\x00\x00\x01\x02', hashlib.sha256).digest()
    assert p.peer_mac(secret, b'ctx', nonce, 258) == by_hand
    assert p.hello_mac(secret, nonce, 258) == p.peer_mac(secret, b'mxnet-ssp-v1', nonce, 258)
    # the balancing service signs with its own context: a controller MAC is useless there
    from mxnet_ssp.controller.balance_service import BalanceClient, BalanceService
    assert BalanceService.mac_context == BalanceClient.mac_context == p.BALANCE_MAC_CONTEXT
    want = hmac.new(secret, b'mxnet-ssp-balance-v1' + nonce + b'\x00\x00\x00\x03',
                    hashlib.sha256).digest()
    assert p.peer_mac(secret, p.BALANCE_MAC_CONTEXT, nonce, 3) == want
    assert want != p.hello_mac(secret, nonce, 3)


def test_hello_mac_depends_on_secret_nonce_and_rank():
    secret, nonce = b'secret', b'\x00' * 32
    base = p.hello_mac(secret, nonce, 3)
    assert p.hello_mac(b'secreT', nonce, 3) != base
    assert p.hello_mac(secret, b'\x00' * 31 + b'\x01', 3) != base
    assert p.hello_mac(secret, nonce, 4) != base


# ----------------------------------------------------------------------------- messages

def test_challenge_bytes_and_round_trip():
    nonce = bytes(range(100, 132))
    data = p.encode_challenge(nonce)
    assert data == b'\x00\x00\x00\x23' + b'\x01' + b'\x00\x01' + nonce
    assert p.decode_challenge(data[4:]) == (1, nonce)


def test_hello_bytes_and_round_trip_at_the_extremes():
    mac = bytes(range(32))
    for rank in (0, 1, U32):
        for version in (0, 1, 65535):
            data = p.encode_hello(rank, mac, version=version)
            assert data == (b'\x00\x00\x00\x27\x02' + struct.pack('>H', version)
                            + struct.pack('>I', rank) + mac)
            assert p.decode_hello(data[4:]) == (version, rank, mac)
    assert p.encode_hello(5, mac)[5:7] == b'\x00\x01'     # the default version is VERSION


@pytest.mark.parametrize('mode, code', [('bounded', 0), ('paper', 1), ('threshold', 2)])
def test_welcome_bytes_and_round_trip(mode, code):
    data = p.encode_welcome(7, 3, 15, mode, 2.5)
    body = (b'\x03' + (7).to_bytes(4, 'big') + (3).to_bytes(4, 'big')
            + (15).to_bytes(4, 'big') + bytes((code,)) + struct.pack('>d', 2.5))
    assert data == len(body).to_bytes(4, 'big') + body
    assert len(body) == 22
    assert p.decode_welcome(data[4:]) == (7, 3, 15, mode, 2.5)


def test_welcome_round_trip_at_the_extremes():
    for workers, low, high, timeout in [(1, 0, 0, 0), (U32, U32, U32, 1e300),
                                        (2, 0, U32, 0.001)]:
        data = p.encode_welcome(workers, low, high, 'paper', timeout)
        got = p.decode_welcome(data[4:])
        assert got == (workers, low, high, 'paper', float(timeout))
        assert type(got[4]) is float


def test_welcome_takes_an_integer_timeout_as_float():
    assert p.decode_welcome(p.encode_welcome(2, 1, 2, 'bounded', 3)[4:])[4] == 3.0


def test_welcome_refuses_an_unknown_mode_by_name():
    with pytest.raises(ValueError):
        p.encode_welcome(2, 1, 2, 'soft', 1.0)


@pytest.mark.parametrize('code', [3, 4, 255])
def test_decode_welcome_refuses_an_unknown_mode_code(code):
    body = struct.pack('>BIIIBd', 3, 2, 1, 2, code, 1.0)
    with pytest.raises(p.ProtocolError, match=r'^WELCOME names unknown mode %d$' % code):
        p.decode_welcome(body)


def test_decode_welcome_accepts_the_last_mode_code():
    assert p.decode_welcome(struct.pack('>BIIIBd', 3, 2, 1, 2, 2, 1.0))[3] == 'threshold'


@pytest.mark.parametrize('t', [0, 1, 2 ** 32, U64])
def test_clock_bytes_and_round_trip(t):
    data = p.encode_clock(t)
    assert data == b'\x00\x00\x00\x09\x04' + t.to_bytes(8, 'big')
    assert p.decode_clock(data[4:]) == t


@pytest.mark.parametrize('rel', [
    Release(0, 0, 0, 0, 0, 0),
    Release(3, U64, I64_MAX, U64, U32, U32),
    Release(1, 5, I64_MIN, 9, 2, 1),
    Release(2, 12, -3, 15, 1, 0),
])
def test_release_bytes_and_round_trip(rel):
    data = p.encode_release(rel)
    body = (b'\x05' + rel.clock.to_bytes(8, 'big') + rel.lead.to_bytes(8, 'big', signed=True)
            + rel.t_slowest.to_bytes(8, 'big') + rel.granted.to_bytes(4, 'big')
            + rel.extra_left.to_bytes(4, 'big'))
    assert data == b'\x00\x00\x00\x21' + body
    # the rank is not on the wire: the receiver knows whose connection it is
    for rank in (rel.rank, rel.rank + 7):
        got = p.decode_release(data[4:], rank)
        assert got == Release(rank, rel.clock, rel.lead, rel.t_slowest, rel.granted,
                              rel.extra_left)
        assert got.rank == rank


def test_release_fields_are_not_swapped():
    rel = Release(4, 11, -22, 33, 44, 55)
    got = p.decode_release(p.encode_release(rel)[4:], 4)
    assert (got.rank, got.clock, got.lead, got.t_slowest, got.granted, got.extra_left) == \
        (4, 11, -22, 33, 44, 55)


@pytest.mark.parametrize('text', ['', 'worker 3 died', 'r\u00e9sum\u00e9 \u2713'])
def test_error_bytes_and_round_trip(text):
    data = p.encode_error(text)
    raw = text.encode('utf-8')
    assert data == (len(raw) + 1).to_bytes(4, 'big') + b'\x08' + raw
    assert p.decode_error(data[4:]) == text


def test_error_text_is_truncated_to_one_frame():
    data = p.encode_error('x' * 10000)
    assert len(data) == 4 + 4096
    assert data[:5] == b'\x00\x00\x10\x00\x08'
    assert p.decode_error(data[4:]) == 'x' * 4095
    exact = p.encode_error('y' * 4095)          # just fits: not cut
    assert p.decode_error(exact[4:]) == 'y' * 4095
    reader = p.FrameReader()
    assert reader.feed(data) == [data[4:]]      # the longest ERROR is still a valid frame


def test_error_text_that_cannot_be_encoded_is_replaced_not_raised():
    data = p.encode_error('bad \udc80 surrogate')
    assert data[5:] == b'bad ? surrogate'


def test_error_text_cut_inside_a_character_decodes_with_a_replacement():
    text = 'a' * 4094 + '\u00e9'                # 2 bytes, the second one cut off
    data = p.encode_error(text)
    assert len(data) == 4 + 4096
    assert p.decode_error(data[4:]) == 'a' * 4094 + '\ufffd'


def test_decode_error_of_invalid_utf8_replaces():
    assert p.decode_error(b'\x08ok\xff') == 'ok\ufffd'


# ----------------------------------------------------------------------------- sizes

@pytest.mark.parametrize('decode, kind, name, size', [
    (p.decode_challenge, 1, 'CHALLENGE', 35),
    (p.decode_hello, 2, 'HELLO', 39),
    (p.decode_welcome, 3, 'WELCOME', 22),
    (p.decode_clock, 4, 'CLOCK', 9),
])
def test_a_payload_of_the_wrong_size_names_the_message_and_both_sizes(decode, kind, name,
                                                                      size):
    for wrong in (1, size - 1, size + 1):
        payload = bytes((kind,)) + b'\x00' * (wrong - 1)
        with pytest.raises(p.ProtocolError,
                           match=r'^%s has %d bytes, expected %d$' % (name, wrong, size)):
            decode(payload)


def test_a_release_of_the_wrong_size_names_both_sizes():
    for wrong in (32, 34):
        with pytest.raises(p.ProtocolError,
                           match=r'^RELEASE has %d bytes, expected 33$' % wrong):
            p.decode_release(b'\x05' + b'\x00' * (wrong - 1), 0)


def test_clock_message_named_in_a_three_byte_payload():
    with pytest.raises(p.ProtocolError, match=r'^CLOCK has 3 bytes, expected 9$'):
        p.decode_clock(b'\x04ab')


# ----------------------------------------------------------------------------- FrameReader

def test_reader_returns_each_payload_once_whole():
    reader = p.FrameReader()
    stream = p.encode_clock(5) + p.LEAVE_FRAME + p.encode_error('why')
    assert reader.feed(stream) == [p.encode_clock(5)[4:], b'\x06', b'\x08why']
    assert reader.pending == 0
    assert reader.feed(b'') == []


def test_reader_fed_one_byte_at_a_time():
    reader = p.FrameReader()
    stream = p.encode_clock(U64) + p.encode_release(Release(0, 1, -1, 0, 2, 3)) + p.BYE_FRAME
    got, pending = [], []
    for i in range(len(stream)):
        got += reader.feed(stream[i:i + 1])
        pending.append(reader.pending)
    assert got == [p.encode_clock(U64)[4:], p.encode_release(Release(0, 1, -1, 0, 2, 3))[4:],
                   b'\x07']
    assert reader.pending == 0
    # held back: 1..12 bytes of the 13-byte CLOCK frame, then 0 once it completes
    assert pending[:13] == list(range(1, 13)) + [0]


def test_reader_holds_back_an_incomplete_header_and_body():
    reader = p.FrameReader()
    data = p.encode_clock(7)
    assert reader.feed(data[:3]) == []
    assert reader.pending == 3
    assert reader.feed(data[3:6]) == []
    assert reader.pending == 6
    assert reader.feed(data[6:] + data[:2]) == [data[4:]]
    assert reader.pending == 2
    assert reader.feed(data[2:]) == [data[4:]]
    assert reader.pending == 0


@pytest.mark.parametrize('size', [1, 4095, 4096])
def test_reader_takes_frames_up_to_max_frame(size):
    reader = p.FrameReader()
    payload = b'\x08' + b'z' * (size - 1)
    assert reader.feed(size.to_bytes(4, 'big') + payload) == [payload]
    assert reader.pending == 0


@pytest.mark.parametrize('size', [0, 4097, U32])
def test_reader_refuses_a_length_of_zero_or_above_max_frame(size):
    reader = p.FrameReader()
    with pytest.raises(p.ProtocolError,
                       match=r'^frame length %d outside 1\.\.4096$' % size):
        reader.feed(size.to_bytes(4, 'big') + b'\x04')
    assert reader.pending == 0      # nothing held: the connection is to be dropped


def test_reader_refuses_a_bad_length_after_good_frames_and_starts_clean():
    reader = p.FrameReader()
    with pytest.raises(p.ProtocolError):
        reader.feed(p.LEAVE_FRAME + b'\x00\x00\x00\x00')
    assert reader.pending == 0
    assert reader.feed(p.BYE_FRAME) == [b'\x07']


def test_reader_refuses_an_oversized_length_as_soon_as_the_header_is_whole():
    reader = p.FrameReader()
    assert reader.feed(b'\x00\x01') == []
    with pytest.raises(p.ProtocolError, match='frame length 65536 outside'):
        reader.feed(b'\x00\x00')           # no body yet: the header alone is enough


def test_readers_do_not_share_state():
    a, b = p.FrameReader(), p.FrameReader()
    a.feed(p.encode_clock(1)[:5])
    assert a.pending == 5
    assert b.pending == 0
    assert b.feed(p.BYE_FRAME) == [b'\x07']


def test_reader_holds_back_a_body_that_follows_a_whole_frame():
    """A whole frame, then the next one's header and part of its body in the same read: only
    the first comes out; the second waits for the rest of its body."""
    reader = p.FrameReader()
    first, second = p.encode_clock(1), p.encode_clock(2)
    assert reader.feed(first + second[:6]) == [first[4:]]
    assert reader.pending == 6
    assert reader.feed(second[6:]) == [second[4:]]
    assert reader.pending == 0


# ----------------------------------------------------------------------------- balancing frames

def test_balancing_types_are_distinct_from_the_controller_s():
    controller = {p.CHALLENGE, p.HELLO, p.WELCOME, p.CLOCK, p.RELEASE, p.LEAVE, p.BYE, p.ERROR}
    balancing = {p.B_WELCOME, p.REPORT, p.DECISION, p.B_LEAVE}
    assert balancing == {17, 18, 19, 20} and not balancing & controller
    assert [p.message_name(k) for k in sorted(balancing)] == ['B_WELCOME', 'REPORT',
                                                               'DECISION', 'B_LEAVE']
    assert p.B_LEAVE_FRAME == b'\x00\x00\x00\x01\x14'


def test_json_frames_bytes_and_round_trip():
    data = p.encode_json(p.REPORT, {'model': [0.5, 0.001]})
    assert data == b'\x00\x00\x00\x16\x12{"model":[0.5,0.001]}'
    assert p.decode_json(p.FrameReader().feed(data)[0], p.REPORT) == {'model': [0.5, 0.001]}
    big = p.encode_json(p.DECISION, {'sizes': [1] * 3000})      # more than MAX_FRAME
    assert len(big) - 4 > p.MAX_FRAME
    with pytest.raises(p.ProtocolError, match='outside 1..4096'):
        p.FrameReader().feed(big)
    assert p.FrameReader(p.MAX_JSON_FRAME).feed(big)[0][0] == p.DECISION
    with pytest.raises(ValueError, match='REPORT of 22 bytes exceeds 21'):
        p.encode_json(p.REPORT, {'model': [0.5, 0.001]}, 21)


@pytest.mark.parametrize('payload,why', [
    (b'\x13{}', 'expected REPORT, got DECISION'),
    (b'\x12{"model": [1,', 'REPORT body is not JSON'),
    (b'\x12\xff\xfe', 'REPORT body is not JSON'),
    (b'\x12', 'REPORT body is not JSON'),
    (b'\x12[1, 2]', 'REPORT body is not a JSON object'),
])
def test_decode_json_refuses_what_is_not_an_object_of_its_type(payload, why):
    with pytest.raises(p.ProtocolError, match=why):
        p.decode_json(payload, p.REPORT)


def test_bye_lists_the_lost_workers_and_a_bare_bye_lists_none():
    assert p.encode_bye([]) == p.BYE_FRAME
    assert p.decode_bye(p.BYE_FRAME[4:]) == []
    lost = [{'rank': 2, 'clock': 7, 'after_s': 1.5}, {'rank': 0, 'clock': 9, 'after_s': 3.0}]
    payload = p.FrameReader().feed(p.encode_bye(lost))[0]
    assert payload[0] == p.BYE and p.decode_bye(payload) == lost


def test_bye_with_more_losses_than_fit_keeps_the_first_ones():
    lost = [{'rank': r, 'clock': 10 ** 9, 'after_s': 123456.789} for r in range(1000)]
    payload = p.FrameReader().feed(p.encode_bye(lost))[0]
    kept = p.decode_bye(payload)
    assert 0 < len(kept) < len(lost) and kept == lost[:len(kept)]
    assert len(payload) <= p.MAX_FRAME


@pytest.mark.parametrize('body', [b'nope', b'[]', b'{"lost": 3}', b'{"lost": [{"rank": "a"}]}',
                                  b'{"lost": [{"rank": 1}]}', b'\xff\xfe'])
def test_malformed_bye_bodies_are_protocol_errors(body):
    with pytest.raises(p.ProtocolError):
        p.decode_bye(bytes((p.BYE,)) + body)


def test_rejoined_carries_a_clock():
    payload = p.FrameReader().feed(p.encode_rejoined(42))[0]
    assert payload[0] == p.REJOINED and p.decode_rejoined(payload) == 42
    for body in (b'{}', b'{"clock": -1}', b'{"clock": "3"}', b'{"clock": 1.5}', b'x'):
        with pytest.raises(p.ProtocolError):
            p.decode_rejoined(bytes((p.REJOINED,)) + body)


def test_lost_notices_round_trip_and_refuse_junk():
    loss = {'rank': 3, 'clock': 17, 'after_s': 2.5}
    payload = p.FrameReader().feed(p.encode_lost(loss))[0]
    assert p.decode_lost(payload) == loss
    for body in (b'[]', b'{"rank": 1}', b'{"rank": true, "clock": 1}'):
        with pytest.raises(p.ProtocolError):
            p.decode_lost(bytes((p.LOST,)) + body)


# ----------------------------------------------------------------------------- JSON frames' limits

def test_encode_json_takes_a_payload_of_exactly_max_frame_and_names_one_byte_more():
    data = p.encode_json(p.REPORT, {'model': [0.5, 0.001]}, 22)         # 22 bytes of payload
    assert data == b'\x00\x00\x00\x16\x12{"model":[0.5,0.001]}'
    with pytest.raises(ValueError) as info:
        p.encode_json(p.REPORT, {'model': [0.5, 0.001]}, 21)
    assert str(info.value) == 'REPORT of 22 bytes exceeds 21'


def test_lost_and_rejoined_frames_are_held_to_max_frame():
    """What a worker's FrameReader (MAX_FRAME) would refuse is refused when it is made."""
    loss = {'rank': 1, 'clock': 2, 'after_s': 0.5, 'host': 'h' * 4100}
    with pytest.raises(ValueError) as info:
        p.encode_lost(loss)
    assert str(info.value) == 'LOST of %d bytes exceeds 4096' % (1 + len(
        '{"rank":1,"clock":2,"after_s":0.5,"host":""}') + 4100)
    fits = dict(loss, host='h' * (4096 - 1 - len('{"rank":1,"clock":2,"after_s":0.5,"host":""}')))
    payload = p.FrameReader().feed(p.encode_lost(fits))[0]
    assert len(payload) == p.MAX_FRAME and p.decode_lost(payload) == fits
    with pytest.raises(ValueError, match='^REJOINED of 4212 bytes exceeds 4096$'):
        p.encode_rejoined(10 ** 4200)                 # 4201 digits


def test_decode_lost_says_what_it_got():
    with pytest.raises(p.ProtocolError) as info:
        p.decode_lost(bytes((p.LOST,)) + b'{"rank": 1}')
    assert str(info.value) == "LOST body is not a lost worker: {'rank': 1}"
    obj = {'rank': 'one', 'clock': 3, 'pad': 'x' * 100}
    with pytest.raises(p.ProtocolError) as info:
        p.decode_lost(bytes((p.LOST,)) + json.dumps(obj).encode())
    assert str(info.value) == 'LOST body is not a lost worker: %s' % repr(obj)[:80]


def test_rejoined_at_clock_zero_and_the_refusal_s_message():
    payload = p.FrameReader().feed(p.encode_rejoined(0))[0]
    assert payload == b'\x0c{"clock":0}' and p.decode_rejoined(payload) == 0
    assert p.decode_rejoined(b'\x0c{"clock": 7, "x": 1}') == 7
    with pytest.raises(p.ProtocolError) as info:
        p.decode_rejoined(b'\x0c{"clock": -1}')
    assert str(info.value) == "REJOINED body has no valid clock: b'{\"clock\": -1}'"
    body = b'{"clock": "' + b'9' * 100 + b'"}'
    with pytest.raises(p.ProtocolError) as info:
        p.decode_rejoined(b'\x0c' + body)
    assert str(info.value) == 'REJOINED body has no valid clock: %s' % repr(body)[:80]


def test_bye_bytes_and_a_body_of_exactly_max_frame():
    lost = [{'rank': 2, 'clock': 7, 'after_s': 1.5}]
    assert p.encode_bye(lost) == (b'\x00\x00\x00\x2e\x07'
                                  b'{"lost":[{"rank":2,"clock":7,"after_s":1.5}]}')
    bare = len(b'\x07{"lost":[{"rank":2,"clock":7,"after_s":1.5,"host":""}]}')
    whole = [dict(lost[0], host='h' * (p.MAX_FRAME - bare))]
    payload = p.FrameReader().feed(p.encode_bye(whole))[0]
    assert len(payload) == p.MAX_FRAME and p.decode_bye(payload) == whole
    one_more = whole + [{'rank': 3, 'clock': 7, 'after_s': 1.5}]
    assert p.decode_bye(p.FrameReader().feed(p.encode_bye(one_more))[0]) == whole


def test_json_refusals_name_the_message_and_what_came():
    def refused(decode, payload, *args):
        with pytest.raises(p.ProtocolError) as info:
            decode(payload, *args)
        return str(info.value)
    assert refused(p.decode_json, b'\x13{}', p.REPORT) == 'expected REPORT, got DECISION'
    assert refused(p.decode_json, b'\x12{"a": ', p.REPORT) == \
        'REPORT body is not JSON: Expecting value: line 1 column 7 (char 6)'
    assert refused(p.decode_json, b'\x12[1, 2]', p.REPORT) == \
        'REPORT body is not a JSON object: [1, 2]'
    assert refused(p.decode_json, b'\x12[' + b'1, ' * 40 + b'1]', p.REPORT) == \
        'REPORT body is not a JSON object: %s' % repr([1] * 41)[:80]
    assert refused(p.decode_bye, b'\x07{"lost": 3}') == 'BYE body has no valid "lost" list: ' \
                                                      "{'lost': 3}"
    obj = {'lost': [{'rank': 'r%d' % i} for i in range(10)]}
    assert refused(p.decode_bye, b'\x07' + json.dumps(obj).encode()) == \
        'BYE body has no valid "lost" list: %s' % repr(obj)[:80]
