"""Lost hosts: the liveness decision (mxnet_ssp.core.liveness), its setting
(MXNET_SSP_LIVENESS_TIMEOUT) and the socket half's reading of the kernel's counters."""
import math
import socket

import pytest

from mxnet_ssp import config as cfg
from mxnet_ssp.controller import liveness as live
from mxnet_ssp.controller.protocol import describe_losses
from mxnet_ssp.core.liveness import (IDLE_SHARE, MAX_BOUND, MIN_BOUND, SilenceWatch,
                                     keepalive_plan, silence_s)


@pytest.mark.parametrize('bound, idle, count', [
    (2, 1, 3), (2.5, 1, 4), (5, 1, 6), (10, 2, 6), (11, 2, 7), (60, 12, 6), (3600, 720, 6)])
def test_keepalive_plan(bound, idle, count):
    plan = keepalive_plan(bound)
    assert (plan.idle, plan.interval, plan.count) == (idle, idle, count)
    # a live peer is heard from at least IDLE_SHARE times within the bound (idle >= 1 s)
    assert plan.idle <= max(1, bound / IDLE_SHARE)
    # the kernel's own abort comes after mxnet-ssp's decision, with a margin of 2 probes
    assert plan.idle + plan.count * plan.interval >= bound + 2 * plan.interval


@pytest.mark.parametrize('bound', [0, 1.99, -5, float('nan'), float('inf'), None, '10'])
def test_keepalive_plan_refuses_what_the_kernel_cannot_do(bound):
    with pytest.raises(ValueError, match='liveness bound must be a number of seconds >= 2'):
        keepalive_plan(bound)


def test_silence_is_the_newest_of_data_and_ack():
    assert silence_s(12000, 300) == 0.3          # an answered keepalive probe
    assert silence_s(250, 9000) == 0.25          # data
    assert silence_s(10500, 10400) == 10.4       # nothing at all


def test_silence_watch_counts_only_from_the_first_look():
    w = SilenceWatch(10)
    assert w.observe('a', 500.0, now=100.0) is None     # idle for long before keepalive was on
    assert not w.first_seen('a', 101.0)
    assert w.observe('a', 509.9, now=109.9) is None     # 9.9 s since the first look
    assert w.observe('a', 510.0, now=110.0) == 10.0     # the bound: lost
    assert w.observe('a', 0.4, now=111.0) is None       # something arrived: alive again


def test_silence_watch_judges_by_the_kernels_silence_once_watched():
    w = SilenceWatch(4)
    assert w.first_seen('b', 0.0)
    assert w.observe('b', 3.9, now=50.0) is None        # answers every few seconds
    assert w.observe('b', 4.2, now=51.0) == 4.2


def test_silence_watch_forgets_closed_connections():
    w = SilenceWatch(4)
    w.observe('a', 0, 0.0)
    w.observe('b', 0, 0.0)
    w.keep(['b'])
    assert len(w) == 1
    assert w.first_seen('a', 10.0)                      # a new connection with an old key
    assert w.observe('a', 100.0, now=13.0) is None      # counts from 10.0 again


@pytest.mark.parametrize('bound', [0, -1, float('nan')])
def test_silence_watch_needs_a_positive_bound(bound):
    with pytest.raises(ValueError):
        SilenceWatch(bound)


# -- the setting ----------------------------------------------------------------------------

@pytest.mark.parametrize('value, bound', [
    (None, 10.0), ('', 10.0), ('  ', 10.0), ('10', 10.0), ('2', 2.0), ('3600', 3600.0),
    ('4.5', 4.5), ('0', 0.0), ('off', 0.0), ('OFF', 0.0), ('no', 0.0), ('false', 0.0)])
def test_liveness_timeout_accepted_values(value, bound, monkeypatch):
    monkeypatch.setenv(cfg.ENV_LIVENESS, 'bogus')           # read from `environ` only
    env = {} if value is None else {cfg.ENV_LIVENESS: value}
    assert cfg.liveness_timeout(env) == bound


@pytest.mark.parametrize('value', ['1', '1.9', '3601', '-3', 'ten', 'nan', 'inf', '1e9', '10s'])
def test_liveness_timeout_refusal_names_setting_value_and_range(value):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.liveness_timeout({cfg.ENV_LIVENESS: value})
    text = str(err.value)
    assert text.startswith('MXNET_SSP_LIVENESS_TIMEOUT=%r is not valid' % value), text
    assert 'from 2 to 3600' in text and '0/off' in text, text


def test_the_stores_config_carries_the_setting_and_refuses_a_bad_one():
    assert cfg.from_env('dist_ssp', {}).liveness == cfg.DEFAULT_LIVENESS
    assert cfg.from_env('dist_async', {cfg.ENV_LIVENESS: '4'}).liveness == 4.0
    assert cfg.from_env('dist_dssp', {cfg.ENV_LIVENESS: 'off'}).liveness == 0.0
    with pytest.raises(cfg.ConfigError, match='MXNET_SSP_LIVENESS_TIMEOUT'):
        cfg.from_env('dist_ssp', {cfg.ENV_LIVENESS: '1'})


def test_the_launcher_refuses_a_bad_setting_before_starting_anything(monkeypatch):
    from mxnet_ssp.launch import settings
    from mxnet_ssp.launch.settings import LaunchError
    with pytest.raises(LaunchError, match=r"MXNET_SSP_LIVENESS_TIMEOUT='0.5' is not valid"):
        settings.validate_settings(['python', 'train.py'], {cfg.ENV_LIVENESS: '0.5'})


# -- the socket half ------------------------------------------------------------------------

@pytest.mark.skipif(not live.SUPPORTED, reason='Linux TCP keepalive and TCP_INFO')
def test_enable_sets_the_plans_timers_and_tcp_info_reads_the_counters():
    srv = socket.create_server(('127.0.0.1', 0))
    with srv, socket.create_connection(srv.getsockname()) as c:
        a, _ = srv.accept()
        with a:
            assert live.enable(a, 10)
            plan = keepalive_plan(10)
            assert a.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert a.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == plan.idle
            assert a.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == plan.interval
            assert a.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == plan.count
            c.sendall(b'x')
            assert a.recv(1) == b'x'
            state, data_ms, ack_ms = live.tcp_info(a)
            assert state == 1                             # ESTABLISHED
            quiet = live.silence(a)
            assert 0 <= quiet < 5 and quiet == pytest.approx(min(data_ms, ack_ms) / 1000, abs=1)


def test_a_closed_socket_has_no_silence():
    s = socket.socket()
    s.close()
    assert live.silence(s) is None and not live.enable(s, 10)


def test_describe_losses_names_the_host_when_known():
    assert describe_losses([{'rank': 1, 'clock': 4, 'after_s': 2.0, 'host': '198.18.0.3'},
                            {'rank': 2, 'clock': 5}]) == (
        'worker 1 at clock 4 (2.0 s after the controller started) on 198.18.0.3, '
        'worker 2 at clock 5 (0.0 s after the controller started)')


def test_bounds_are_the_documented_ones():
    assert (MIN_BOUND, MAX_BOUND, cfg.DEFAULT_LIVENESS) == (2.0, 3600.0, 10.0)
    assert math.isclose(keepalive_plan(cfg.DEFAULT_LIVENESS).idle, 2)


# -- a process's ps-lite connections (mxnet_ssp.ps.tcp_links.LinkLiveness) -------------------

@pytest.fixture
def sockets():
    """A 'ps-lite port' on 127.0.0.1 with one connection in (from 127.0.0.1), and one
    connection out to an unrelated service on 127.0.0.2 (a training script's own)."""
    opened = []

    def keep(s):
        opened.append(s)
        return s
    ps_port = keep(socket.create_server(('127.0.0.1', 0)))
    other = keep(socket.create_server(('127.0.0.2', 0)))
    keep(socket.create_connection(ps_port.getsockname()))
    incoming = keep(ps_port.accept()[0])
    out = keep(socket.create_connection(other.getsockname()))
    keep(other.accept()[0])
    yield {'incoming': incoming.getpeername()[:2], 'own': out.getpeername()[:2]}
    for s in opened:
        s.close()


def _ours(links, peers):
    return {peer: up for _, peer, up in links if peer in peers}


def _heard(monkeypatch, last_data_ms, last_ack_ms):
    """The kernel's counters of every socket read as given (its state as it is)."""
    real = live.tcp_info

    def fake(sock):
        info = real(sock)
        return None if info is None else (info[0], last_data_ms, last_ack_ms)
    monkeypatch.setattr(live, 'tcp_info', fake)


@pytest.mark.skipif(not live.SUPPORTED, reason='Linux TCP keepalive and TCP_INFO')
def test_link_liveness_of_a_worker_judges_only_the_jobs_hosts(sockets, monkeypatch):
    from mxnet_ssp.ps import tcp_links
    peers = set(sockets.values())
    watch = tcp_links.LinkLiveness(4, job_hosts={'127.0.0.9'})     # the scheduler's address
    assert set(_ours(watch.links(now=100.0), peers).values()) == {True}
    _heard(monkeypatch, 10 ** 7, 10 ** 7)                      # nothing heard for hours
    assert set(_ours(watch.links(now=103.9), peers).values()) == {True}     # < 4 s watched
    links = _ours(watch.links(now=104.0), peers)
    # the connection into the ps-lite port is the job's: silent, so no longer established;
    # the script's own connection to 127.0.0.2 is not judged
    assert links == {sockets['incoming']: False, sockets['own']: True}, links
    assert (sockets['incoming'], 4.0) in watch.silent
    assert '%s:%d (silent 4.0 s)' % sockets['incoming'] in watch.describe_silent()


@pytest.mark.skipif(not live.SUPPORTED, reason='Linux TCP keepalive and TCP_INFO')
def test_link_liveness_of_a_scheduler_or_server_judges_every_connection(sockets, monkeypatch):
    from mxnet_ssp.ps import tcp_links
    peers = set(sockets.values())
    watch = tcp_links.LinkLiveness(4)
    watch.links(now=0.0)
    _heard(monkeypatch, 10 ** 7, 10 ** 7)
    assert set(_ours(watch.links(now=5.0), peers).values()) == {False}
    _heard(monkeypatch, 10 ** 7, 300)                           # a probe was answered
    assert set(_ours(watch.links(now=6.0), peers).values()) == {True}
    assert watch.silent == [] or all(p not in peers for p, _ in watch.silent)


@pytest.mark.skipif(not live.SUPPORTED, reason='Linux TCP keepalive and TCP_INFO')
def test_link_liveness_turns_keepalive_on_for_the_connections_it_judges(sockets):
    from mxnet_ssp.ps import tcp_links
    watch = tcp_links.LinkLiveness(10, job_hosts=set())
    watch.links()
    # fds of this process: the incoming connection's socket has keepalive on now (a
    # duplicate of its descriptor was given the options: the same socket)
    found = {}
    for fd, _ in tcp_links._socket_fds():
        sock = tcp_links._open_socket(fd)
        if sock is None:
            continue
        with sock:
            try:
                found[sock.getpeername()[:2]] = sock.getsockopt(socket.SOL_SOCKET,
                                                                socket.SO_KEEPALIVE)
            except OSError:
                continue
    assert found[sockets['incoming']] == 1 and found[sockets['own']] == 0, found


def test_liveness_of_a_process_follows_the_setting():
    from mxnet_ssp.ps import job_watch
    assert job_watch._liveness('scheduler', {cfg.ENV_LIVENESS: 'off'}) is None
    if live.SUPPORTED:
        w = job_watch._liveness('worker', {'DMLC_PS_ROOT_URI': '127.0.0.1'})
        assert w.bound == cfg.DEFAULT_LIVENESS and '127.0.0.1' in w.job_hosts
        assert job_watch._liveness('server', {cfg.ENV_LIVENESS: '3'}).job_hosts is None
