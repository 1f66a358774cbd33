"""Errors that belong to no single record reach ``on_error`` (alias ``error_cb``), typed, once per
transition and rate-limited: against the in-process fault broker (every broker down and back, a
failed SASL authentication, ApiVersions without Produce) and librdkafka's mock cluster (a fenced
transactional producer, a transaction that must be aborted, InitProducerId refused). The rate limit
and the transitions with time passed in: tests/unit/fastkafka/_producer/test_error_reports.py.

Waits are bounded polls for a state (never a sleep that asserts speed)."""
from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

from faultbroker import FaultBroker, SaslServer
from fastkafka import Producer
from fastkafka.errors import (ClusterAuthorizationFailedError, ProducerFencedError,
                              SaslAuthenticationError, TlsAuthenticationError,
                              TopicAuthorizationFailedError, TransactionAbortableError,
                              UnsupportedVersionError)
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey
from mockcluster import ApiKeys

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=20000, retry_backoff_ms=20,
            retry_backoff_max_ms=200, reconnect_backoff_ms=20, reconnect_backoff_max_ms=200,
            linger_ms=2, max_block_ms=10000)
SECRET = "WRONG-pass-9"


def wait_until(cond, what, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def kinds(got):
    return [type(e).__name__ for e in got]


# ---- the fault broker -------------------------------------------------------------------------

@pytest.mark.faultbroker
def test_every_broker_down_is_reported_once_per_outage_and_its_end_once(fb, make_producer, caplog):
    fb.create_topic("t", 1)
    got = []

    def on_error(error):
        got.append(error)
        raise RuntimeError("a bug of the hook")        # logged; the I/O thread goes on

    # no rate limit: once per outage is the transitions' doing
    p = make_producer(fb, error_cb=on_error, error_report_interval_ms=0)
    assert p.send("t", b"a").get(10).offset == 0
    for outage in (1, 2):
        fb.set_down()
        wait_until(lambda: kinds(got).count("AllBrokersDownError") == outage, "the outage")
        failed = p.metrics()["net_disconnects"]
        wait_until(lambda: p.metrics()["net_disconnects"] >= failed + 3, "three more failed attempts")
        fb.set_up()
        wait_until(lambda: kinds(got).count("BrokersRecovered") == outage, "the recovery")
    assert kinds(got) == ["AllBrokersDownError", "BrokersRecovered"] * 2
    down, up = got[0], got[1]
    assert list(down.brokers) == [fb.bootstrap] and down.retriable
    assert (up.host, up.port) == ("127.0.0.1", fb.port) and up.down_ms >= 0
    assert p.send("t", b"b").get(10).offset == 1
    assert p._sender._thread.is_alive()
    assert p.metrics()["errors_reported"] == 4
    assert "on_error hook raised" in caplog.text


@pytest.mark.faultbroker
def test_a_failed_authentication_is_reported_naming_the_broker_never_the_password(no_leaks):
    got = []
    with FaultBroker(sasl=SaslServer({"PLAIN": {"alice": "right-pass-1"}})) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="alice",
                      sasl_plain_password=SECRET, on_error=got.append, **FAST) as p:
            wait_until(lambda: p.metrics()["net_authentication_failures"] >= 3,
                       "three failed authentications")
            wait_until(lambda: p.metrics()["errors_suppressed"] >= 2, "the repeats held back")
            m = p.metrics()
    auth = [e for e in got if isinstance(e, SaslAuthenticationError)]
    assert len(auth) == 1                      # the default interval (60 s) holds the repeats
    e = auth[0]
    assert (e.host, e.port, e.mechanism, e.retriable) == ("127.0.0.1", b.port, "PLAIN", False)
    assert e.node is not None and e.code == -150
    for text in (str(e), repr(e), *(str(x) for x in got)):
        assert SECRET not in text
    assert kinds(got).count("AllBrokersDownError") == 1     # its only broker cannot be used
    assert m["errors_reported"] == len(got)


@pytest.mark.faultbroker
def test_an_untrusted_broker_certificate_is_reported_naming_the_broker(pki, no_leaks):
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(pki.expired)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve():             # a TLS listener whose certificate has expired
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.settimeout(5)
            try:
                server_ctx.wrap_socket(conn, server_side=True).close()
            except (ssl.SSLError, OSError):
                conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    got = []
    try:
        with Producer(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SSL",
                      ssl_cafile=pki.ca, on_error=got.append, **FAST):
            wait_until(lambda: "TlsAuthenticationError" in kinds(got), "the report")
    finally:
        stop.set()
        t.join(5)
        listener.close()
    e = next(x for x in got if isinstance(x, TlsAuthenticationError))
    assert (e.node, e.host, e.port, e.code, e.retriable) == (-1, "127.0.0.1", port, -141, False)
    assert "expired" in str(e) and f"127.0.0.1:{port}" in str(e)


@pytest.mark.faultbroker
def test_a_broker_without_produce_in_its_api_versions_is_reported(make_producer, no_leaks):
    versions = {k: v for k, v in SUPPORTED_VERSIONS.items() if k != ApiKey.PRODUCE}
    got = []
    with FaultBroker(api_versions=versions) as b:
        make_producer(b, on_error=got.append)
        wait_until(lambda: "UnsupportedVersionError" in kinds(got), "the report")
    e = next(x for x in got if isinstance(x, UnsupportedVersionError))
    assert (e.code, e.port, e.missing) == (35, b.port, ("PRODUCE",))
    assert f"127.0.0.1:{b.port}" in str(e) and "supports no version of PRODUCE" in str(e)


# ---- librdkafka's mock cluster: the producer's fatal and abortable states ------------------------

TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_PRODUCER_EPOCH = 47


@pytest.fixture
def mc(mock_cluster):
    mock_cluster.create_topic("u", 1)
    return mock_cluster


@pytest.mark.mock
def test_a_fenced_producer_is_reported_once(mc, no_leaks):
    got = []
    with Producer(bootstrap_servers=mc.bootstraps, transactional_id="obs-1", on_error=got.append,
                  **FAST) as p:
        p.init_transactions()
        p.begin_transaction()
        mc.push_request_errors(ApiKeys.PRODUCE, [INVALID_PRODUCER_EPOCH])
        with pytest.raises(ProducerFencedError):
            p.send("u", b"x", partition=0).get(10)
        wait_until(lambda: got, "the report")
        assert kinds(got) == ["ProducerFencedError"]
        assert isinstance(got[0], ProducerFencedError) and "obs-1" in str(got[0])


@pytest.mark.mock
def test_a_transaction_that_must_be_aborted_is_reported_once_per_transaction(mc, no_leaks):
    got = []
    with Producer(bootstrap_servers=mc.bootstraps, transactional_id="obs-2", on_error=got.append,
                  **FAST) as p:
        p.init_transactions()
        p.begin_transaction()
        mc.push_request_errors(ApiKeys.PRODUCE, [TOPIC_AUTHORIZATION_FAILED])
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("u", b"x", partition=0).get(10)
        wait_until(lambda: got, "the report")
        p.abort_transaction()
        p.begin_transaction()
        assert p.send("u", b"y", partition=0).get(10).offset >= 0
        p.commit_transaction()
    [e] = got
    assert isinstance(e, TransactionAbortableError) and e.code == 120
    assert isinstance(e.cause, TopicAuthorizationFailedError) and "abort_transaction()" in str(e)


@pytest.mark.mock
def test_an_idempotent_producer_refused_its_producer_id_reports_it_rate_limited(mc, no_leaks):
    got = []
    mc.push_request_errors(ApiKeys.INIT_PRODUCER_ID, [CLUSTER_AUTHORIZATION_FAILED] * 3)
    with Producer(bootstrap_servers=mc.bootstraps, on_error=got.append, **FAST) as p:
        assert p.send("u", b"x", partition=0).get(15).offset == 0   # the fourth InitProducerId
        m = p.metrics()
    assert kinds(got) == ["ClusterAuthorizationFailedError"]
    assert isinstance(got[0], ClusterAuthorizationFailedError)
    assert m["init_producer_id_failures"] == 3 and m["errors_suppressed"] == 2
