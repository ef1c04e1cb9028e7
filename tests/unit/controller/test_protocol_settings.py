"""The HELLO's settings body (mxnet_ssp/controller/protocol.py: encode_settings,
decode_settings, decode_hello_settings): its bytes, the origins shortened when a HELLO would
not fit one frame (each tier at its boundary), the limits of MAX_SETTING_TEXT on both sides,
and every malformed body refused with its message.

The first test pins the format byte for byte; the others build their expected bodies with
``body()``, that format (compact, keys sorted)."""
import json

import pytest

from mxnet_ssp.controller import protocol as p

FIT = p.MAX_FRAME - 39          # longest settings body: a HELLO's fixed fields are 39 bytes
TEXT = p.MAX_SETTING_TEXT       # 512


def body(host, settings):
    return json.dumps({'host': host, 'settings': settings}, separators=(',', ':'),
                      sort_keys=True).encode('utf-8')


def raw(host, settings):
    """A body as another sender may write it: keys in the order given."""
    return json.dumps({'host': host, 'settings': settings}).encode('utf-8')


def round_trip(host, settings):
    return p.decode_settings(p.encode_settings(host, settings))


# ----------------------------------------------------------------------------- the bytes

def test_settings_body_bytes_compact_sorted_and_strings():
    got = p.encode_settings('hostA', {'B': ['2', 'environment'], 'A': [3, None],
                                      7: ['x', 'default']})
    assert got == (b'{"host":"hostA","settings":{"7":["x","default"],"A":["3","None"],'
                   b'"B":["2","environment"]}}')
    assert type(got) is bytes
    assert p.encode_settings(42, {}) == b'{"host":"42","settings":{}}'
    assert p.decode_settings(got) == ('hostA', {'7': ['x', 'default'], 'A': ['3', 'None'],
                                                'B': ['2', 'environment']})


def test_settings_body_is_utf8_json():
    got = p.encode_settings('h\u00f4te', {'A': ['\u00e9t\u00e9', '/r\u00e9p line 1']})
    assert p.decode_settings(got) == ('h\u00f4te', {'A': ['\u00e9t\u00e9', '/r\u00e9p line 1']})
    raw = '{"host":"h\u00f4te","settings":{"A":["\u00e9t\u00e9","o"]}}'.encode('utf-8')
    assert p.decode_settings(raw) == ('h\u00f4te', {'A': ['\u00e9t\u00e9', 'o']})


def test_the_settings_given_are_not_changed():
    settings = {'A': ['1', 'x' * 600]}
    p.encode_settings('h', settings)
    assert settings == {'A': ['1', 'x' * 600]}


# ----------------------------------------------------------------------------- MAX_SETTING_TEXT

def test_a_host_is_cut_to_max_setting_text():
    assert TEXT == 512
    assert round_trip('h' * 512, {}) == ('h' * 512, {})
    assert round_trip('h' * 511 + 'xyz', {}) == ('h' * 511 + 'x', {})


def test_an_origin_longer_than_max_setting_text_is_cut_from_the_left():
    """Bug fixed with this test: an origin (a settings file's path and line) of more than 512
    characters went out whole when the HELLO fit, and the controller refused the HELLO as
    malformed."""
    long_origin = '/d' * 300 + '/mxnet_ssp.env line 4'             # 621 characters
    exactly = 'p' * 511 + 'q'
    one_more = 'r' + 'p' * 511 + 'q'
    host, got = round_trip('h', {'A': ['1', long_origin], 'B': ['2', exactly],
                                 'C': ['3', one_more]})
    assert got == {'A': ['1', '...' + long_origin[-509:]], 'B': ['2', exactly],
                   'C': ['3', '...' + one_more[-509:]]}
    assert len(got['A'][1]) == len(got['C'][1]) == TEXT


@pytest.mark.parametrize('name, value', [('N' * 513, '1'), ('A', 'v' * 513)])
def test_a_name_or_value_longer_than_max_setting_text_is_refused_on_encode(name, value):
    with pytest.raises(ValueError) as info:
        p.encode_settings('h', {'Z': ['1', 'o'], name: [value, 'default']})
    assert str(info.value) == ('setting %s has a name or value longer than the 512 characters a '
                               'HELLO carries' % name[:80])


def test_the_refusal_names_the_first_setting_by_name():
    with pytest.raises(ValueError, match='^setting B has a name'):
        p.encode_settings('h', {'C': ['v' * 600, 'o'], 'B': ['v' * 513, 'o'], 'A': ['1', 'o']})


def test_a_name_and_value_of_max_setting_text_go_through():
    name, value = 'N' * 512, 'v' * 512
    assert round_trip('h', {name: [value, 'o']}) == ('h', {name: [value, 'o']})


# ----------------------------------------------------------------------------- fitting one frame

def _origins(got):
    return {k: v[1] for k, v in got.items()}


def test_a_body_of_exactly_one_frame_goes_whole_and_one_byte_more_is_shortened():
    settings = {'S%d' % i: ['1', 'o' * 500] for i in range(7)}
    n = FIT - len(body('', settings))
    assert 0 < n < TEXT                                    # the premise: the host fills it up
    assert p.encode_settings('h' * n, settings) == body('h' * n, settings)
    assert len(body('h' * n, settings)) == FIT
    host, got = round_trip('h' * (n + 1), settings)
    assert host == 'h' * (n + 1)
    assert got == {k: ['1', '...' + 'o' * 120] for k in settings}


def test_origins_are_cut_to_120_characters_first():
    settings = {'S%02d' % i: ['1', 'o' * 300 + '%02d' % i] for i in range(12)}
    settings.update({'E120': ['2', 'e' * 120], 'E121': ['3', 'f' * 121], 'D': ['4', 'default']})
    assert len(body('h', settings)) > FIT                                 # the premise
    got = p.encode_settings('h', settings)
    expected = {k: ['1', '...' + 'o' * 118 + k[1:]] for k in settings if k.startswith('S')}
    expected.update({'E120': ['2', 'e' * 120], 'E121': ['3', '...' + 'f' * 120],
                     'D': ['4', 'default']})
    assert got == body('h', expected)


def test_origins_are_cut_to_40_characters_when_120_do_not_fit():
    settings = {'S%02d' % i: ['1', 'o' * 150 + '%02d' % i] for i in range(30)}
    settings.update({'E40': ['2', 'e' * 40], 'E41': ['3', 'f' * 41], 'D': ['4', 'default']})
    at_120 = {k: [v[0], '...' + v[1][-120:] if len(v[1]) > 120 else v[1]]
              for k, v in settings.items()}
    assert len(body('h', at_120)) > FIT                                   # the premise
    got = p.encode_settings('h', settings)
    expected = {k: ['1', '...' + 'o' * 38 + k[1:]] for k in settings if k.startswith('S')}
    expected.update({'E40': ['2', 'e' * 40], 'E41': ['3', '...' + 'f' * 40],
                     'D': ['4', 'default']})
    assert got == body('h', expected)


def test_origins_are_dropped_when_40_characters_do_not_fit():
    settings = {'S%02d' % i: ['%d' % i, 'o' * 100] for i in range(70)}
    settings['D'] = ['x', 'default']
    at_40 = {k: [v[0], '...' + v[1][-40:] if len(v[1]) > 40 else v[1]]
             for k, v in settings.items()}
    assert len(body('h', at_40)) > FIT                                    # the premise
    got = p.encode_settings('h', settings)
    assert got == body('h', {k: [v[0], ''] for k, v in settings.items()})
    assert p.decode_settings(got)[1]['S69'] == ['69', '']


def test_settings_that_do_not_fit_even_without_origins_are_refused():
    settings = {'MXNET_SSP_SETTING_%03d' % i: ['1', 'default'] for i in range(300)}
    bare = body('h', {k: ['1', ''] for k in settings})
    assert len(bare) > FIT
    with pytest.raises(ValueError) as info:
        p.encode_settings('h', settings)
    assert str(info.value) == 'the settings do not fit one HELLO frame (%d bytes)' % len(bare)


def test_settings_that_fit_only_without_origins_at_the_boundary():
    """The body without origins of exactly one frame is sent; one byte more is refused."""
    settings = {'MXNET_SSP_SETTING_%03d' % i: ['1', 'default'] for i in range(120)}
    bare = {k: ['1', ''] for k in settings}
    n = FIT - len(body('', bare))
    assert 0 < n < TEXT
    assert p.encode_settings('h' * n, settings) == body('h' * n, bare)
    with pytest.raises(ValueError, match=r'\(%d bytes\)' % (FIT + 1)):
        p.encode_settings('h' * (n + 1), settings)


# ----------------------------------------------------------------------------- decode_settings

def _refused(raw):
    with pytest.raises(p.ProtocolError) as info:
        p.decode_settings(raw)
    return str(info.value)


def test_decode_settings_of_a_body_that_is_not_json():
    assert _refused(b'{"host": ') == ('HELLO settings are not JSON: Expecting value: line 1 '
                                      'column 10 (char 9)')
    assert _refused(b'\xff{}').startswith("HELLO settings are not JSON: 'utf-8' codec can't "
                                          "decode byte 0xff in position 0")


@pytest.mark.parametrize('obj', [[], 'x', None, {'host': 'h'}, {'settings': {}},
                                 {'host': 'h', 'settings': {}, 'x': 1},
                                 {'Host': 'h', 'settings': {}}])
def test_decode_settings_of_another_object(obj):
    assert _refused(json.dumps(obj).encode()) == \
        'HELLO settings are not {"host", "settings"}: %r' % (obj,)


def test_decode_settings_cuts_the_object_in_its_message_to_80_characters():
    obj = {'host': 'h', 'settings': {}, 'extra': 'x' * 200}
    assert _refused(json.dumps(obj).encode()) == \
        'HELLO settings are not {"host", "settings"}: %s' % repr(obj)[:80]


@pytest.mark.parametrize('host', [1, None, ['h'], 'h' * 513])
def test_decode_settings_refuses_a_host_that_is_not_a_short_string(host):
    assert _refused(raw(host, {})) == 'HELLO settings name no valid host: %s' % repr(host)[:80]


def test_decode_settings_takes_a_host_of_max_setting_text():
    assert p.decode_settings(body('h' * 512, {})) == ('h' * 512, {})
    assert p.decode_settings(body('', {})) == ('', {})


@pytest.mark.parametrize('settings', [
    [], 'ab', None, 3,
    {'A': 'ab'},                    # a string of two characters is not [value, origin]
    {'A': {'v': 1, 'o': 2}},        # nor a dict of two keys
    {'A': ['1']}, {'A': ['1', 'o', 'x']}, {'A': []},
    {'A': ['1', 2]}, {'A': [1, 'o']}, {'A': ['1', None]},
    {'N' * 513: ['1', 'o']}, {'A': ['v' * 513, 'o']}, {'A': ['1', 'o' * 513]},
    {'A': ['1', 'o'], 'B': ['1']},  # one bad setting among good ones
    {'B': ['1'], 'A': ['1', 'o']},
])
def test_decode_settings_refuses_what_is_not_name_value_origin_strings(settings):
    assert _refused(raw('h', settings)) == \
        'HELLO settings are not {name: [value, origin]} strings: %s' % repr(settings)[:80]


def test_decode_settings_takes_names_values_and_origins_of_max_setting_text():
    settings = {'N' * 512: ['v' * 512, 'o' * 512], 'A': ['', '']}
    assert p.decode_settings(raw('h', settings)) == ('h', settings)


# ----------------------------------------------------------------------------- HELLO

def test_a_hello_of_exactly_its_fixed_fields_has_no_settings():
    payload = p.encode_hello(7, b'm' * 32)[4:]
    assert len(payload) == 39
    assert p.decode_hello_settings(payload) == (p.VERSION, 7, b'm' * 32, b'', None)
    with pytest.raises(p.ProtocolError) as info:
        p.decode_hello_settings(payload[:38])
    assert str(info.value) == 'HELLO has 38 bytes, expected at least 39'


def test_a_hello_s_settings_body_comes_back_as_bytes():
    raw = p.encode_settings('h', {'A': ['1', 'o']})
    payload = bytearray(p.encode_hello(2, b'm' * 32, version=5, body=raw)[4:])
    version, rank, mac, got, settings = p.decode_hello_settings(memoryview(payload))
    assert (version, rank, mac, got, settings) == (5, 2, b'm' * 32, raw, ('h', {'A': ['1', 'o']}))
    assert type(got) is bytes
