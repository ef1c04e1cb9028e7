"""The controller's settings and their one wire form (mxnet_ssp/core/controller_settings.py):
every field a worker's SyncConfig gives, what to_wire leaves out, what started fills in.
Pure tests: no processes."""
from dataclasses import fields

from mxnet_ssp.config import SyncConfig
from mxnet_ssp.core.controller_settings import (DEFAULT_PLACEMENT, UNBOUNDED_STALENESS,
                                                WIRE_VERSION, ControllerSettings)
from mxnet_ssp.core.liveness import DEFAULT_BOUND

CONF = SyncConfig(store='dist_ssp', s_lower=4, s_upper=4, mode='paper', timeout=12.5,
                  metrics_dir='/runs/m', controller='thread', elastic=2, liveness=30.0)


def test_from_config_takes_every_setting_of_the_worker_s_config():
    agree = {'rank': 0, 'host': 'h', 'settings': {}}
    got = ControllerSettings.from_config(CONF, '3', agree=agree)
    assert got == ControllerSettings(num_workers=3, s_lower=4, s_upper=4, mode='paper',
                                     timeout=12.5, elastic=2, liveness=30.0, store='dist_ssp',
                                     metrics_dir='/runs/m', controller='thread')
    assert (got.store, got.metrics_dir, got.controller, got.liveness) == (
        'dist_ssp', '/runs/m', 'thread', 30.0)
    assert got.agree is agree                       # not compared by ==: checked here
    assert (got.host, got.secret, got.metrics_path) == (None, None, None)
    assert ControllerSettings.from_config(CONF, 3).agree is None


def test_an_asynchronous_store_reports_to_an_unbounded_controller():
    conf = SyncConfig(store='dist_async', s_lower=0, s_upper=0, elastic=1)
    got = ControllerSettings.from_config(conf, 2)
    assert (got.s_lower, got.s_upper, got.store) == (UNBOUNDED_STALENESS, UNBOUNDED_STALENESS,
                                                     'dist_async')


def test_to_wire_leaves_out_unset_keys_but_keeps_a_null_metrics_dir():
    settings = ControllerSettings(num_workers=2, s_lower=1, s_upper=3, mode='bounded',
                                  timeout=5.0)
    assert settings.to_wire() == {
        'v': WIRE_VERSION, 'num_workers': 2, 's_lower': 1, 's_upper': 3, 'mode': 'bounded',
        'timeout': 5.0, 'elastic': 0, 'liveness': DEFAULT_BOUND, 'metrics_dir': None,
        'controller': DEFAULT_PLACEMENT}
    full = ControllerSettings.from_config(CONF, 3, agree={'a': 1}).started('198.18.0.1', 'ab',
                                                                           '/m/c.jsonl')
    wire = full.to_wire()
    assert set(wire) == {'v'} | {f.name for f in fields(ControllerSettings)}
    assert ControllerSettings.from_wire(wire) == full


def test_started_fills_in_the_address_the_secret_and_the_metrics_file():
    settings = ControllerSettings.from_config(CONF, 3)
    started = settings.started('198.18.0.1', 'c0ffee', '/runs/m/controller.jsonl')
    assert (started.host, started.secret, started.metrics_path) == (
        '198.18.0.1', 'c0ffee', '/runs/m/controller.jsonl')
    assert (settings.host, settings.secret, settings.metrics_path) == (None, None, None)
    plain = settings.started('198.18.0.2', 'beef')
    assert (plain.host, plain.secret, plain.metrics_path) == ('198.18.0.2', 'beef', None)
    assert plain.num_workers == 3 and plain.s_lower == 4 and plain.controller == 'thread'
