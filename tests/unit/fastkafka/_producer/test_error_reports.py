"""Errors that belong to no single record, on their way to ``on_error``: the rate limit
(fastkafka/_producer/error_reports.py) with time passed in, and the network client's transitions
(fastkafka/_net/network_setup.pxi: every known broker down, a connection ready again, a broker
lacking a needed API) driven by a :class:`~unit.fastkafka.fakes.FakeClock` and a scripted broker
on the loopback, so nothing waits for time to pass. The producer end to end: tests/faults/
test_error_reports_faults.py (fault broker, librdkafka's mock cluster) and
tests/kafka/test_error_reports_kafka.py (Apache Kafka, a node killed and started)."""
from __future__ import annotations

import logging
import pickle
import random
import socket

import pytest

from fastkafka._net.cluster import Metadata
from fastkafka._net.connection import State
from fastkafka._net.network import NetworkClient
from fastkafka._producer.error_reports import ErrorReporter
from fastkafka.config import ProducerConfig
from fastkafka.errors import (AllBrokersDownError, BrokerDataLossError, BrokersRecovered,
                              SaslAuthenticationError, UnsupportedVersionError)
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey

from unit.fastkafka.fakes import FakeClock, ScriptedBroker, api_versions_body, wait_for


# ---- the rate limit ----------------------------------------------------------------------------

def auth_error(node):
    return SaslAuthenticationError(f"node {node}: SASL_AUTHENTICATION_FAILED", node=node,
                                   host="h", port=9092, mechanism="PLAIN")


def test_one_report_per_kind_and_broker_per_interval_the_held_back_counted_on_the_next():
    got, stats = [], {}
    r = ErrorReporter(got.append, 1_000, stats)
    assert r.report(auth_error(1), 0) is True
    assert r.report(auth_error(1), 500) is False          # same kind, same broker
    assert r.report(auth_error(2), 500) is True           # another broker
    assert r.report(auth_error(1), 999) is False
    e = auth_error(1)
    assert r.report(e, 1_000) is True                     # the interval has passed
    assert [x.node for x in got] == [1, 2, 1]
    assert [x.suppressed for x in got] == [0, 0, 2]
    assert stats == {"errors_reported": 3, "errors_suppressed": 2}
    assert r.report(auth_error(1), 2_000) is True and got[-1].suppressed == 0


def test_each_partition_of_data_loss_is_its_own_key():
    got = []
    r = ErrorReporter(got.append, 60_000, {})
    for p in (0, 1, 0):
        r.report(BrokerDataLossError("lost", node=1, topic="t", partition=p), 10)
    assert [e.partition for e in got] == [0, 1]


def test_an_interval_of_zero_delivers_every_report():
    got, stats = [], {}
    r = ErrorReporter(got.append, 0, stats)
    for _ in range(3):
        r.report(auth_error(1), 5)
    assert len(got) == 3 and stats["errors_suppressed"] == 0


def test_a_recovery_is_delivered_exactly_when_its_outage_was():
    got, stats = [], {}
    r = ErrorReporter(got.append, 1_000, stats)
    assert r.report(BrokersRecovered("up"), 0) is False   # no outage reported: nothing to end
    assert r.report(AllBrokersDownError("down"), 10) is True
    assert r.report(BrokersRecovered("up", down_ms=5), 15) is True
    assert r.report(AllBrokersDownError("down"), 20) is False   # flapping: held back...
    assert r.report(BrokersRecovered("up"), 30) is False        # ...and so is its end
    assert r.report(AllBrokersDownError("down"), 1_010) is True
    assert r.report(BrokersRecovered("up"), 1_020) is True
    assert [type(e).__name__ for e in got] == ["AllBrokersDownError", "BrokersRecovered"] * 2
    assert got[2].suppressed == 1
    assert stats == {"errors_reported": 4, "errors_suppressed": 3}


def test_a_hook_that_raises_is_logged_and_later_reports_still_go_out(caplog):
    calls = []

    def hook(error):
        calls.append(error)
        raise RuntimeError("application bug")

    r = ErrorReporter(hook, 0, {})
    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        assert r.report(auth_error(1), 0) is True
        assert r.report(auth_error(2), 0) is True
    assert len(calls) == 2
    assert [rec.getMessage() for rec in caplog.records] == [
        "on_error hook raised (on SASL_AUTHENTICATION_ERROR)"] * 2


def test_without_a_hook_reports_are_only_counted():
    stats = {"errors_reported": 7}
    r = ErrorReporter(None, 1_000, stats)
    r.report(auth_error(1), 0)
    r.report(auth_error(1), 1)
    assert stats == {"errors_reported": 8, "errors_suppressed": 1}


def test_the_new_errors_have_stable_codes_and_pickle_with_their_fields():
    down = AllBrokersDownError("all 1 known broker down", brokers={"h:1": "connection refused"})
    up = BrokersRecovered("back", node=1, host="h", port=1, down_ms=1500)
    assert (down.code, down.name, down.retriable) == (-170, "ALL_BROKERS_DOWN", True)
    assert (up.code, up.name, up.retriable) == (-171, "BROKERS_RECOVERED", False)
    assert str(down) == "ALL_BROKERS_DOWN (-170): all 1 known broker down"
    down.suppressed = 3
    again = pickle.loads(pickle.dumps(down))
    assert again.brokers == {"h:1": "connection refused"} and again.suppressed == 3
    assert pickle.loads(pickle.dumps(up)).down_ms == 1500
    assert AllBrokersDownError().brokers == {} and AllBrokersDownError().suppressed == 0


# ---- the network client's transitions -----------------------------------------------------------

BACKOFF = 100


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture(autouse=True)
def pinned_jitter(monkeypatch):
    monkeypatch.setattr(random, "uniform", lambda a, b: (a + b) / 2)


def make_client(servers, clock, required_apis=(ApiKey.METADATA,)):
    cfg = ProducerConfig(bootstrap_servers=servers, reconnect_backoff_ms=BACKOFF,
                         reconnect_backoff_max_ms=800, metadata_recovery_strategy="none")
    md = Metadata(cfg.bootstrap_servers, cfg.metadata_max_age_ms, cfg.retry_backoff_ms)
    client = NetworkClient(cfg, md, clock=clock, manage_metadata=False, required_apis=required_apis)
    got = []
    client.error_hook = lambda now, error: got.append((now, error))
    return client, got


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fail_attempt(client, clock, node):
    """Start an attempt on ``node`` and poll until it has failed."""
    client.ready(node, clock())
    conn = client.connections[node]
    wait_for(lambda: conn.state is State.DISCONNECTED, lambda: client.poll(0), f"node {node} failed")
    client.poll(0)      # the reports run with the completions


def test_every_known_broker_down_is_reported_once_when_the_last_one_fails(clock):
    a, b = closed_port(), closed_port()
    client, got = make_client(f"127.0.0.1:{a},127.0.0.1:{b}", clock)
    try:
        fail_attempt(client, clock, -1)
        assert got == []                       # -2 not tried yet: not known to be down
        fail_attempt(client, clock, -2)
        [(when, error)] = got
        assert when == clock() and type(error) is AllBrokersDownError
        assert error.brokers == {f"127.0.0.1:{a}": "connection refused",
                                 f"127.0.0.1:{b}": "connection refused"}
        assert f"127.0.0.1:{a} (connection refused)" in str(error)
        for _ in range(3):                     # the retries change nothing
            clock.advance(1_000)
            fail_attempt(client, clock, -1)
            fail_attempt(client, clock, -2)
        assert len(got) == 1
    finally:
        client.close()


def test_a_ready_connection_ends_the_outage_once(clock):
    dead = closed_port()
    with ScriptedBroker() as broker:
        client, got = make_client(f"127.0.0.1:{dead},{broker.bootstrap}", clock)
        try:
            fail_attempt(client, clock, -1)
            client.ready(-2, clock())          # reaches the broker, whose ApiVersions fails
            peer = broker.accept()
            peer.answer(peer.read_request(lambda: client.poll(0)), api_versions_body(error_code=2))
            conn = client.connections[-2]
            wait_for(lambda: conn.state is State.DISCONNECTED, lambda: client.poll(0))
            client.poll(0)
            [(t_down, down)] = got
            assert "ApiVersions failed" in down.brokers[broker.bootstrap]
            clock.advance(1_500)
            client.ready(-2, clock())
            peer = broker.accept()
            peer.answer(peer.read_request(lambda: client.poll(0)), api_versions_body())
            wait_for(lambda: conn.state is State.READY, lambda: client.poll(0))
            client.poll(0)
            assert [type(e) for _, e in got] == [AllBrokersDownError, BrokersRecovered]
            up = got[1][1]
            assert (up.node, up.port, up.down_ms) == (-2, broker.port, 1_500)
            fail_attempt(client, clock, -1)    # one broker failing again is no outage
            assert len(got) == 2
        finally:
            client.close()


def test_a_broker_lacking_an_api_the_producer_needs_is_reported_naming_it(clock):
    versions = {k: v for k, v in SUPPORTED_VERSIONS.items() if k != ApiKey.PRODUCE}
    with ScriptedBroker() as broker:
        client, got = make_client(broker.bootstrap, clock,
                                  required_apis=(ApiKey.METADATA, ApiKey.PRODUCE))
        try:
            client.ready(-1, clock())
            peer = broker.accept()
            peer.answer(peer.read_request(lambda: client.poll(0)), api_versions_body(versions))
            conn = client.connections[-1]
            wait_for(lambda: conn.state is State.DISCONNECTED, lambda: client.poll(0))
            client.poll(0)
            assert [type(e) for _, e in got] == [UnsupportedVersionError, AllBrokersDownError]
            err = got[0][1]
            assert (err.code, err.node, err.port, err.missing) == (35, -1, broker.port, ("PRODUCE",))
            assert "supports no version of PRODUCE" in str(err)
        finally:
            client.close()


def test_closing_the_client_while_connecting_reports_nothing(clock):
    with ScriptedBroker() as broker:
        client, got = make_client(broker.bootstrap, clock)
        client.ready(-1, clock())
        broker.accept()
        client.close()
        assert got == []


def test_without_a_hook_no_outage_is_tracked(clock):
    client, got = make_client(f"127.0.0.1:{closed_port()}", clock)
    hook, client.error_hook = client.error_hook, None     # the admin client's case
    try:
        fail_attempt(client, clock, -1)
        client.error_hook = hook
        clock.advance(1_000)
        fail_attempt(client, clock, -1)        # the outage starts when someone listens
        assert [type(e) for _, e in got] == [AllBrokersDownError]
    finally:
        client.close()
