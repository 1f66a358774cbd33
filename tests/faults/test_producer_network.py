"""NetworkClient pieces against the fault broker: ApiVersions negotiation and fallback, correlation-id
checking, corrupt size prefixes, request timeouts, the in-flight limit and idle connections — driven
directly (no producer), with ``poll`` called by the test."""
from __future__ import annotations

import time

import pytest

from faultbroker import (FaultBroker, delay, no_response, oversized_size_prefix, split_frames,
                         wrong_correlation_id)
from fastkafka._net.cluster import Metadata
from fastkafka.config import ProducerConfig
from fastkafka.errors import (CorrelationIdMismatchError, CorruptFrameError, RequestTimedOutError,
                              UnsupportedVersionError)
from fastkafka._net.network import NetworkClient
from fastkafka._net.connection import State
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey

pytestmark = pytest.mark.faultbroker


def make_client(broker, **kw):
    cfg = ProducerConfig(bootstrap_servers=broker.bootstrap, **{
        "request_timeout_ms": 1000, "delivery_timeout_ms": 5000, "reconnect_backoff_ms": 10,
        "reconnect_backoff_max_ms": 50, **kw})
    md = Metadata(cfg.bootstrap_servers, cfg.metadata_max_age_ms, cfg.retry_backoff_ms)
    return NetworkClient(cfg, md, manage_metadata=False)


def connect(client, node=-1, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not client.ready(node, client.clock()):
        assert time.monotonic() < deadline, f"node {node} not ready: {client.connections.get(node)}"
        client.poll(20)
    return client.connections[node]


def metadata_body():
    return {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def send_and_wait(client, node, api_key, body, timeout=5.0):
    done = {}
    client.send(node, api_key, body, client.clock(), lambda b, e: done.update(body=b, error=e))
    deadline = time.monotonic() + timeout
    while not done:
        assert time.monotonic() < deadline, "no completion"
        client.poll(50)
    return done["body"], done["error"]


@pytest.mark.parametrize("their_range,expected", [((0, 2), [3, 2]), ((0, 0), [3, 0]), ((1, 1), [3, 1])])
def test_api_versions_error_35_falls_back(their_range, expected):
    versions = dict(SUPPORTED_VERSIONS)
    versions[ApiKey.API_VERSIONS] = their_range
    with FaultBroker(api_versions=versions) as b:
        c = make_client(b)
        try:
            conn = connect(c)
            assert [r.api_version for r in b.received(ApiKey.API_VERSIONS)] == expected
            assert conn.state is State.READY
            assert conn.versions[int(ApiKey.METADATA)] == SUPPORTED_VERSIONS[ApiKey.METADATA][1]
            body, err = send_and_wait(c, -1, ApiKey.METADATA, metadata_body())
            assert err is None and body["brokers"][0]["port"] == b.port
        finally:
            c.close()


def test_handshake_survives_split_frames(fb):
    c = make_client(fb)
    try:
        fb.script.on(ApiKey.API_VERSIONS, split_frames(3, 0))
        conn = connect(c)
        assert conn.state is State.READY
    finally:
        c.close()


def test_no_common_version_closes_with_unsupported_version():
    versions = dict(SUPPORTED_VERSIONS)
    versions[ApiKey.PRODUCE] = (0, 2)         # below the client's minimum (3)
    with FaultBroker(api_versions=versions) as b:
        c = make_client(b)
        try:
            connect(c)
            with pytest.raises(UnsupportedVersionError):
                c.send(-1, ApiKey.PRODUCE, {}, c.clock(), lambda b_, e: None, min_version=3)
        finally:
            c.close()


def test_correlation_id_mismatch_fails_in_flight_and_reconnects(fb):
    c = make_client(fb)
    try:
        connect(c)
        fb.script.on(ApiKey.METADATA, wrong_correlation_id(7))
        body, err = send_and_wait(c, -1, ApiKey.METADATA, metadata_body())
        assert body is None and isinstance(err, CorrelationIdMismatchError) and err.retriable
        assert c.connections[-1].state is State.DISCONNECTED and c.stats["disconnects"] == 1
        connect(c)
        body, err = send_and_wait(c, -1, ApiKey.METADATA, metadata_body())
        assert err is None and body["brokers"]
        assert fb.connections_opened == 2
    finally:
        c.close()


def test_pipelined_requests_all_fail_on_mismatch(fb):
    """A wrong correlation id on the first of three pipelined requests fails all three."""
    c = make_client(fb)
    try:
        connect(c)
        fb.script.on(ApiKey.METADATA, wrong_correlation_id())
        results = []
        for _ in range(3):
            c.send(-1, ApiKey.METADATA, metadata_body(), c.clock(), lambda b, e: results.append(e))
        deadline = time.monotonic() + 5
        while len(results) < 3 and time.monotonic() < deadline:
            c.poll(50)
        assert len(results) == 3 and all(isinstance(e, CorrelationIdMismatchError) for e in results)
        assert c.in_flight_count(-1) == 0
    finally:
        c.close()


@pytest.mark.parametrize("size", [2**31 - 1, -5])
def test_bad_size_prefix_is_corrupt_frame(fb, size):
    c = make_client(fb, max_response_size=1 << 20)
    try:
        connect(c)
        fb.script.on(ApiKey.METADATA, oversized_size_prefix(size))
        body, err = send_and_wait(c, -1, ApiKey.METADATA, metadata_body())
        assert isinstance(err, CorruptFrameError)
        assert c.connections[-1].sock is None
    finally:
        c.close()


def test_request_timeout_closes_connection(fb):
    c = make_client(fb, request_timeout_ms=300, delivery_timeout_ms=2000)
    try:
        connect(c)
        fb.script.on(ApiKey.METADATA, no_response())
        start = time.monotonic()
        body, err = send_and_wait(c, -1, ApiKey.METADATA, metadata_body())
        assert isinstance(err, RequestTimedOutError)
        assert time.monotonic() - start < 3
        assert c.stats["timeouts"] == 1 and c.connections[-1].sock is None
    finally:
        c.close()


def test_in_flight_limit_and_readiness(fb):
    c = make_client(fb, max_in_flight_requests_per_connection=2, enable_idempotence=False)
    try:
        connect(c)
        fb.script.on(ApiKey.METADATA, delay(0.2), times=2)
        done = []
        for _ in range(2):
            c.send(-1, ApiKey.METADATA, metadata_body(), c.clock(), lambda b, e: done.append(e))
        assert c.in_flight_count(-1) == 2 and not c.is_ready(-1)
        assert c.least_loaded_node(c.clock()) is None      # the only node is full
        deadline = time.monotonic() + 5
        while len(done) < 2 and time.monotonic() < deadline:
            c.poll(50)
        assert done == [None, None] and c.is_ready(-1)
    finally:
        c.close()


def test_idle_connection_closed(fb):
    c = make_client(fb, connections_max_idle_ms=100)
    try:
        connect(c)
        send_and_wait(c, -1, ApiKey.METADATA, metadata_body())
        deadline = time.monotonic() + 3
        while c.connections[-1].sock is not None and time.monotonic() < deadline:
            c.poll(1000)   # the poll must wake up for the idle deadline by itself
        assert c.connections[-1].sock is None
        assert time.monotonic() < deadline
    finally:
        c.close()
