"""NetworkClient (fastkafka._net.network) for its generic requests (ApiVersions, Metadata): the
connection state machine, version negotiation, answers matched by correlation id (split frames,
several frames in one read), request timeouts, disconnects, reconnect back-off, idle connections,
contained failures, the acks=0 write confirmation, throttling, metadata refresh and rebootstrap.

Driven by a :class:`~unit.fastkafka.fakes.FakeClock` (the client's ``clock=``: every deadline is
judged by it, so nothing here waits for time to pass) and a :class:`~unit.fastkafka.fakes.ScriptedBroker`
the test answers request by request on the loopback. The reconnect jitter (±20 %) is pinned to
its middle so delays are exact. The Produce path has its own tests (the sender's, and
test_gil_free_connection.py); the fault broker's tests (tests/faults/test_producer_network.py) cover
the ApiVersions error-35 fallback, corrupt size prefixes and the in-flight limit against a threaded
broker.
"""
from __future__ import annotations

import logging
import random
import socket
import time

import pytest

from fastkafka._net.cluster import Metadata
from fastkafka._net.connection import State
from fastkafka._net import failpoints, network
from fastkafka._net.network import NetworkClient
from fastkafka.config import ProducerConfig
from fastkafka.errors import (CorrelationIdMismatchError, DisconnectedError,
                              InvalidBrokerResponseError, NetworkError, RequestTimedOutError)
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey

from unit.fastkafka.fakes import (FakeClock, ScriptedBroker, api_versions_body, make_cluster,
                                  metadata_body, wait_for)

REQUEST_TIMEOUT = 5_000
BACKOFF = 100
BACKOFF_MAX = 800
IDLE = 60_000
SETUP = 2_000
MAX_AGE = 10_000


def make_client(bootstrap, clock, manage_metadata=False, metadata=None, **kw):
    settings = {"request_timeout_ms": REQUEST_TIMEOUT, "delivery_timeout_ms": 120_000,
                "reconnect_backoff_ms": BACKOFF, "reconnect_backoff_max_ms": BACKOFF_MAX,
                "connections_max_idle_ms": IDLE, "socket_connection_setup_timeout_ms": SETUP,
                "metadata_max_age_ms": MAX_AGE, "retry_backoff_ms": 100,
                "metadata_recovery_strategy": "none", **kw}
    cfg = ProducerConfig(bootstrap_servers=bootstrap, **settings)
    if metadata is None:
        metadata = Metadata(cfg.bootstrap_servers, cfg.metadata_max_age_ms, cfg.retry_backoff_ms)
    return NetworkClient(cfg, metadata, clock=clock, manage_metadata=manage_metadata)


@pytest.fixture
def pinned_jitter(monkeypatch):
    """The reconnect back-off's jitter factor is 1.0 (the middle of 0.8..1.2)."""
    monkeypatch.setattr(random, "uniform", lambda a, b: (a + b) / 2)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def broker():
    with ScriptedBroker() as b:
        yield b


@pytest.fixture
def client(broker, clock, pinned_jitter):
    c = make_client(broker.bootstrap, clock)
    try:
        yield c
    finally:
        c.close()


def pump(client):
    return lambda: client.poll(0)


def handshake(client, broker, clock, node=-1, versions=None):
    """Connect ``node`` through its ApiVersions exchange; returns the broker's end."""
    assert client.ready(node, clock()) is False      # starts connecting
    peer = broker.accept()
    req = peer.read_request(pump(client))
    assert req.api_key == ApiKey.API_VERSIONS
    peer.answer(req, api_versions_body(versions))
    wait_for(lambda: client.ready(node, clock()), pump(client), f"node {node} ready")
    return peer


def md_request_body():
    return {"topics": [], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}


class Results:
    """Completion callbacks that record (tag, body, error) in the order they ran."""

    def __init__(self):
        self.got = []

    def cb(self, tag):
        return lambda body, error: self.got.append((tag, body, error))

    def tags(self):
        return [g[0] for g in self.got]

    def errors(self):
        return [g[2] for g in self.got]


def send_md(client, clock, results, tag, node=-1, **kw):
    return client.send(node, ApiKey.METADATA, md_request_body(), clock(), results.cb(tag), **kw)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- the connection state machine -------------------------------------------------------------

def test_a_connection_goes_connecting_handshake_ready_and_refuses_requests_until_ready(
        client, broker, clock):
    assert client.connections == {} and not client.is_ready(-1)
    assert client.ready(-1, clock()) is False
    conn = client.connections[-1]
    assert conn.state in (State.CONNECTING, State.HANDSHAKE)
    assert client.connection_delay(-1, clock()) == REQUEST_TIMEOUT   # not disconnected: wait
    with pytest.raises(NetworkError, match="not ready"):
        send_md(client, clock, Results(), "early")
    peer = broker.accept()
    req = peer.read_request(pump(client))
    assert conn.state is State.HANDSHAKE
    assert (req.api_key, req.api_version) == (ApiKey.API_VERSIONS,
                                              SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1])
    assert req.body["client_software_name"] == "fastkafka"
    assert not client.ready(-1, clock())           # still waiting for the answer
    peer.answer(req, api_versions_body())
    wait_for(lambda: conn.state is State.READY, pump(client))
    assert client.is_ready(-1) and client.ready(-1, clock())
    assert conn.failures == 0
    assert client.metadata.connection_errors() == {}
    assert client.api_version(-1, ApiKey.METADATA) == SUPPORTED_VERSIONS[ApiKey.METADATA][1]


def test_versions_are_the_highest_both_sides_speak_and_the_request_goes_in_it(
        client, broker, clock):
    versions = dict(SUPPORTED_VERSIONS)
    versions[ApiKey.METADATA] = (1, 5)
    peer = handshake(client, broker, clock, versions=versions)
    assert client.api_version(-1, ApiKey.METADATA) == 5
    res = Results()
    send_md(client, clock, res, "a")
    send_md(client, clock, res, "b", max_version=4)
    a = peer.read_request(pump(client))
    b = peer.read_request(pump(client))
    assert (a.api_version, b.api_version) == (5, 4)
    peer.answer(a, metadata_body({7: ("h", 1)}, controller_id=7))
    peer.answer(b, metadata_body({8: ("h", 2)}, controller_id=8))
    wait_for(lambda: len(res.got) == 2, pump(client))
    assert [(t, body["controller_id"], e) for t, body, e in res.got] == [("a", 7, None), ("b", 8, None)]


def test_a_broker_without_a_required_api_is_closed_and_retried_after_the_longest_backoff(
        client, broker, clock):
    versions = {k: v for k, v in SUPPORTED_VERSIONS.items() if k != ApiKey.METADATA}
    assert client.ready(-1, clock()) is False
    peer = broker.accept()
    req = peer.read_request(pump(client))
    peer.answer(req, api_versions_body(versions))
    conn = client.connections[-1]
    wait_for(lambda: conn.state is State.DISCONNECTED, pump(client))
    t = clock()
    assert conn.next_attempt_ms == t + BACKOFF_MAX
    [reason] = client.metadata.connection_errors().values()
    assert "METADATA" in reason and "cannot be used" in reason
    assert peer.closed_by_client()
    clock.advance(BACKOFF_MAX - 1)
    assert client.ready(-1, clock()) is False and not broker.pending_connection(0.05)
    clock.advance(1)
    assert client.ready(-1, clock()) is False and broker.pending_connection(5.0)


def test_an_api_versions_error_closes_the_connection_as_a_failed_attempt(client, broker, clock):
    assert client.ready(-1, clock()) is False
    peer = broker.accept()
    req = peer.read_request(pump(client))
    peer.answer(req, api_versions_body(error_code=2))      # CORRUPT_MESSAGE
    conn = client.connections[-1]
    wait_for(lambda: conn.state is State.DISCONNECTED, pump(client))
    [reason] = client.metadata.connection_errors().values()
    assert "ApiVersions failed" in reason and "error 2" in reason
    assert conn.failures == 1 and conn.next_attempt_ms == clock() + BACKOFF


def test_a_broker_that_never_answers_api_versions_is_given_up_at_the_request_timeout(
        client, broker, clock):
    assert client.ready(-1, clock()) is False
    peer = broker.accept()
    peer.read_request(pump(client))
    conn = client.connections[-1]
    clock.advance(REQUEST_TIMEOUT)
    client.poll(0)
    assert conn.state is State.HANDSHAKE                  # at the deadline, not past it
    clock.advance(1)
    client.poll(0)
    assert conn.state is State.DISCONNECTED and client.stats["timeouts"] == 1
    [reason] = client.metadata.connection_errors().values()
    assert reason.startswith("handshake failed") and "API_VERSIONS" in reason
    assert peer.closed_by_client()


# ---- answers and correlation ids --------------------------------------------------------------

def test_several_answers_in_one_read_complete_their_requests_in_order(client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "m1")
    send_md(client, clock, res, "m2")
    client.send(-1, ApiKey.API_VERSIONS, {"client_software_name": "x",
                                          "client_software_version": "1"},
                clock(), res.cb("av"))
    reqs = [peer.read_request(pump(client)) for _ in range(3)]
    ids = [r.correlation_id for r in reqs]
    assert ids == sorted(ids) and len(set(ids)) == 3
    before = client.stats["responses"]
    peer.send(peer.frame(reqs[0], metadata_body({}, controller_id=1))
              + peer.frame(reqs[1], metadata_body({}, controller_id=2))
              + peer.frame(reqs[2], api_versions_body()))
    client.poll(1000)       # ends as soon as the bytes are readable: one read, three frames
    assert res.tags() == ["m1", "m2", "av"]
    assert [res.got[0][1]["controller_id"], res.got[1][1]["controller_id"]] == [1, 2]
    assert res.got[2][1]["error_code"] == 0 and res.errors() == [None, None, None]
    assert client.stats["responses"] == before + 3 and client.in_flight_count(-1) == 0


def test_an_answer_split_into_pieces_completes_once_it_is_whole(client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "m")
    req = peer.read_request(pump(client))
    data = peer.frame(req, metadata_body({3: ("h", 3)}, controller_id=3))
    cuts = [1, 4, 6, 9, len(data) - 1]                 # inside the size prefix, the header, the body
    start = 0
    for cut in cuts:
        peer.send(data[start:cut])
        start = cut
        for _ in range(3):
            client.poll(0)
        assert res.got == [] and client.in_flight_count(-1) == 1
    peer.send(data[start:])
    wait_for(lambda: res.got, pump(client))
    for _ in range(3):
        client.poll(0)
    assert len(res.got) == 1 and res.got[0][1]["controller_id"] == 3 and res.got[0][2] is None
    assert client.connections[-1].state is State.READY


def test_an_answer_out_of_order_fails_every_request_in_flight(client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "first")
    send_md(client, clock, res, "second")
    first = peer.read_request(pump(client))
    second = peer.read_request(pump(client))
    peer.answer(second, metadata_body({}))             # the second's answer comes first
    wait_for(lambda: len(res.got) == 2, pump(client))
    assert res.tags() == ["first", "second"]
    assert all(isinstance(e, CorrelationIdMismatchError) for e in res.errors())
    assert str(first.correlation_id) in str(res.errors()[0])
    assert client.connections[-1].state is State.DISCONNECTED
    assert client.connections[-1].next_attempt_ms == clock() + BACKOFF


def test_an_answer_with_nothing_in_flight_closes_the_connection(client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "m")
    req = peer.read_request(pump(client))
    peer.answer(req, metadata_body({}))
    wait_for(lambda: res.got, pump(client))
    disconnects = client.stats["disconnects"]
    peer.answer(req, metadata_body({}))                # once more: nobody asked
    conn = client.connections[-1]
    wait_for(lambda: conn.state is State.DISCONNECTED, pump(client))
    assert client.stats["disconnects"] == disconnects + 1
    assert res.errors() == [None]                      # the answered request is untouched


def test_correlation_ids_keep_increasing_across_reconnects(client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "a")
    a = peer.read_request(pump(client))
    peer.close()
    wait_for(lambda: res.got, pump(client))
    clock.advance(BACKOFF)
    peer2 = handshake(client, broker, clock)
    send_md(client, clock, res, "b")
    b = peer2.read_request(pump(client))
    assert b.correlation_id > a.correlation_id


# ---- time: request timeouts, idle connections ---------------------------------------------------

def test_a_request_times_out_by_the_clock_and_fails_everything_on_its_connection(
        client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "old")
    clock.advance(1_000)
    send_md(client, clock, res, "young")
    peer.read_request(pump(client))
    peer.read_request(pump(client))
    clock.advance(REQUEST_TIMEOUT - 1_000)             # the old one's deadline: not yet late
    client.poll(0)
    assert res.got == [] and client.stats["timeouts"] == 0
    clock.advance(1)
    client.poll(0)
    assert res.tags() == ["old", "young"]
    assert all(isinstance(e, RequestTimedOutError) for e in res.errors())
    assert "METADATA" in str(res.errors()[0]) and f"{REQUEST_TIMEOUT} ms" in str(res.errors()[0])
    assert client.stats["timeouts"] == 1 and client.in_flight_count() == 0
    assert client.connections[-1].state is State.DISCONNECTED
    assert peer.closed_by_client()


def test_an_idle_connection_is_closed_by_the_clock_but_not_while_a_request_waits(
        broker, clock, pinned_jitter):
    idle = 3_000                                       # shorter than the request timeout
    client = make_client(broker.bootstrap, clock, connections_max_idle_ms=idle)
    try:
        peer = handshake(client, broker, clock)
        conn = client.connections[-1]
        res = Results()
        send_md(client, clock, res, "m")
        req = peer.read_request(pump(client))
        clock.advance(idle + 1)
        client.poll(0)
        assert conn.state is State.READY               # a request is waiting: not idle
        peer.answer(req, metadata_body({}))
        wait_for(lambda: res.got, pump(client))
        clock.advance(idle)
        client.poll(0)
        assert conn.state is State.READY
        clock.advance(1)
        client.poll(0)
        assert conn.state is State.DISCONNECTED and res.errors() == [None]
        assert conn.next_attempt_ms == clock() + BACKOFF
        assert peer.closed_by_client()
    finally:
        client.close()


# ---- disconnects and reconnecting ------------------------------------------------------------------

def test_a_disconnect_fails_every_request_in_flight_in_order(client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    for tag in ("a", "b", "c"):
        send_md(client, clock, res, tag)
    for _ in range(3):
        peer.read_request(pump(client))
    assert client.in_flight_count(-1) == 3
    peer.close()
    wait_for(lambda: res.got, pump(client))
    assert res.tags() == ["a", "b", "c"]             # all in the same poll, oldest first
    assert all(isinstance(e, DisconnectedError) and "closed the connection" in str(e)
               for e in res.errors())
    conn = client.connections[-1]
    assert conn.state is State.DISCONNECTED and client.in_flight_count() == 0
    assert client.stats["disconnects"] == 1
    # a connection that worked is tried again after the base back-off, with no jitter
    assert conn.next_attempt_ms == clock() + BACKOFF
    assert client.connection_delay(-1, clock()) == BACKOFF
    clock.advance(BACKOFF - 1)
    assert client.ready(-1, clock()) is False and not broker.pending_connection(0.05)
    clock.advance(1)
    handshake(client, broker, clock)
    assert client.is_ready(-1)


def test_refused_connections_back_off_exponentially_up_to_the_cap(clock, pinned_jitter):
    port = free_port()
    client = make_client(f"127.0.0.1:{port}", clock)
    try:
        delays = []
        for _ in range(6):
            assert client.ready(-1, clock()) is False
            conn = client.connections[-1]
            wait_for(lambda: conn.state is State.DISCONNECTED, pump(client))
            delays.append(conn.next_attempt_ms - clock())
            assert client.connection_delay(-1, clock()) == delays[-1]
            clock.advance(delays[-1] - 1)
            assert client.ready(-1, clock()) is False and conn.state is State.DISCONNECTED
            clock.advance(1)
        assert delays == [100, 200, 400, 800, 800, 800]
        assert client.metadata.connection_errors() == {f"127.0.0.1:{port}": "connection refused"}
    finally:
        client.close()


def test_the_reconnect_jitter_stays_within_twenty_percent(clock):
    port = free_port()
    client = make_client(f"127.0.0.1:{port}", clock)
    try:
        seen = set()
        for _ in range(20):
            conn = client.connections.get(-1)
            if conn is not None:
                conn.failures = 0                      # every attempt is a first failure
            client.ready(-1, clock())
            conn = client.connections[-1]
            wait_for(lambda: conn.state is State.DISCONNECTED, pump(client))
            d = conn.next_attempt_ms - clock()
            assert 0.8 * BACKOFF <= d <= 1.2 * BACKOFF
            seen.add(d)
            clock.advance(d)
        assert len(seen) > 1                           # jittered, not fixed
    finally:
        client.close()


def test_a_connection_that_worked_is_retried_at_the_base_backoff_however_often_it_drops(
        client, broker, clock):
    for _ in range(4):
        peer = handshake(client, broker, clock)
        peer.close()
        conn = client.connections[-1]
        wait_for(lambda: conn.state is State.DISCONNECTED, pump(client))
        assert conn.failures == 0 and conn.next_attempt_ms == clock() + BACKOFF
        clock.advance(BACKOFF)
    assert client.stats["disconnects"] == 4


def test_closing_one_node_fails_its_requests_and_records_no_connection_failure(
        client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "m")
    client.close(-1)
    assert res.tags() == ["m"] and isinstance(res.errors()[0], DisconnectedError)
    assert "closed" in str(res.errors()[0])
    assert client.metadata.connection_errors() == {}
    assert client.connections[-1].state is State.DISCONNECTED
    assert peer.closed_by_client()
    client.close()
    assert client.poller.closed


def test_a_raising_completion_handler_does_not_stop_the_others(client, broker, clock, caplog):
    peer = handshake(client, broker, clock)
    res = Results()

    def boom(body, error):
        raise RuntimeError("handler bug")

    client.send(-1, ApiKey.METADATA, md_request_body(), clock(), boom)
    send_md(client, clock, res, "after")
    reqs = [peer.read_request(pump(client)) for _ in range(2)]
    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        peer.send(b"".join(peer.frame(r, metadata_body({})) for r in reqs))
        wait_for(lambda: res.got, pump(client))
    assert res.tags() == ["after"] and res.errors() == [None]
    assert any("completion handler raised" in r.getMessage() for r in caplog.records)
    assert client.connections[-1].state is State.READY


def test_a_failure_while_handling_a_connection_closes_only_that_connection(
        client, broker, clock, caplog):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "a")
    send_md(client, clock, res, "b")
    a = peer.read_request(pump(client))
    peer.read_request(pump(client))

    def fail(stage, _client, conn):
        if stage == "read":
            raise RuntimeError("decoder bug")

    failpoints.set_network_failpoint(fail)
    try:
        with caplog.at_level(logging.ERROR, logger="fastkafka"):
            peer.answer(a, metadata_body({}))
            wait_for(lambda: len(res.got) == 2, pump(client))
    finally:
        failpoints.set_network_failpoint(None)
    assert res.tags() == ["a", "b"]
    assert all(isinstance(e, InvalidBrokerResponseError) and "RuntimeError: decoder bug" in str(e)
               for e in res.errors())
    assert client.stats["contained_failures"] == 1
    assert client.connections[-1].state is State.DISCONNECTED
    assert any("unexpected failure" in r.getMessage() for r in caplog.records)
    clock.advance(BACKOFF)
    handshake(client, broker, clock)                   # the client goes on


def test_a_host_name_no_resolver_takes_is_a_failed_attempt(clock, pinned_jitter):
    client = make_client("a" * 64 + ".example:9092", clock)
    try:
        assert client.ready(-1, clock()) is False
        conn = client.connections[-1]
        assert conn.state is State.DISCONNECTED and conn.next_attempt_ms == clock() + BACKOFF
        [reason] = client.metadata.connection_errors().values()
        assert reason.startswith("name resolution failed: the host name cannot be encoded")
    finally:
        client.close()


def test_confirm_writes_asks_only_connections_with_unanswered_writes_and_waits_for_them(
        client, broker, clock):
    peer = handshake(client, broker, clock)
    assert client.confirm_writes(clock()) == set()      # nothing written without an answer
    res = Results()
    send_md(client, clock, res, "no-answer", expect_response=False)
    peer.read_request(pump(client))
    assert res.got == [("no-answer", None, None)]       # complete once written
    assert client.connections[-1].unconfirmed
    waiting = client.confirm_writes(clock())
    assert waiting == {-1}
    req = peer.read_request(pump(client))
    assert req.api_key == ApiKey.API_VERSIONS
    client.poll(0)
    assert waiting == {-1}
    peer.answer(req, api_versions_body())
    wait_for(lambda: not waiting, pump(client))
    assert not client.connections[-1].unconfirmed
    assert client.confirm_writes(clock()) == set()
    # a connection lost meanwhile is waited for no longer either
    send_md(client, clock, res, "again", expect_response=False)
    peer.read_request(pump(client))
    waiting = client.confirm_writes(clock())
    assert waiting == {-1}
    peer.close()
    wait_for(lambda: not waiting, pump(client))
    assert client.connections[-1].state is State.DISCONNECTED


# ---- throttling (KIP-219) -----------------------------------------------------------------------

def test_a_throttled_answer_holds_new_requests_until_the_throttle_ends(client, broker, clock):
    peer = handshake(client, broker, clock)
    res = Results()
    send_md(client, clock, res, "a")
    send_md(client, clock, res, "b")
    a = peer.read_request(pump(client))
    b = peer.read_request(pump(client))
    peer.answer(a, metadata_body({}, throttle_ms=700))
    wait_for(lambda: res.got, pump(client))
    assert not client.is_ready(-1) and not client.ready(-1, clock())
    assert client.connection_delay(-1, clock()) == 700
    clock.advance(300)
    peer.answer(b, metadata_body({}, throttle_ms=100))  # answers in flight are still read
    wait_for(lambda: len(res.got) == 2, pump(client))
    assert res.errors() == [None, None]
    assert client.connection_delay(-1, clock()) == 400  # the later end of the two throttles
    assert client.stats["throttled_responses"] == 2
    assert client.stats["throttle_time_ms_total"] == 800
    clock.advance(399)
    assert not client.is_ready(-1)
    clock.advance(1)
    assert client.is_ready(-1) and client.ready(-1, clock())


# ---- metadata refresh ---------------------------------------------------------------------------

@pytest.fixture
def managed(broker, clock, pinned_jitter):
    md = Metadata([broker.address], MAX_AGE, 100, 1_000)
    md.add_topic("t")
    c = make_client(broker.bootstrap, clock, manage_metadata=True, metadata=md)
    try:
        yield c
    finally:
        c.close()


def test_metadata_is_fetched_at_once_then_refreshed_at_its_max_age(managed, broker, clock):
    client, md = managed, managed.metadata
    client.poll(0)                                   # due at once: connects to the bootstrap
    peer = broker.accept()
    av = peer.read_request(pump(client))
    peer.answer(av, api_versions_body())
    req = peer.read_request(pump(client))
    assert req.api_key == ApiKey.METADATA and [t["name"] for t in req.body["topics"]] == ["t"]
    peer.answer(req, metadata_body({1: broker.address}, {"t": [1, 1]}))
    wait_for(lambda: md.version == 1, pump(client))
    assert md.cluster.leader_for("t", 1) == 1 and md.cluster.broker(1).port == broker.port
    for _ in range(5):                               # one request until the next is due
        clock.advance(MAX_AGE // 10)
        assert not peer.has_request(pump(client))
    clock.advance(MAX_AGE - 5 * (MAX_AGE // 10))
    client.poll(0)
    # the next goes to a broker of the metadata (node 1), on a connection of its own
    peer1 = broker.accept()
    av = peer1.read_request(pump(client))
    peer1.answer(av, api_versions_body())
    req = peer1.read_request(pump(client))
    assert req.api_key == ApiKey.METADATA
    assert set(client.connections) == {-1, 1}
    peer1.answer(req, metadata_body({1: broker.address}, {"t": [1, 1, 1]}))
    wait_for(lambda: md.version == 2, pump(client))
    assert md.cluster.partition_count("t") == 3


def test_one_metadata_request_at_a_time_and_a_new_one_after_it_failed(managed, broker, clock):
    client, md = managed, managed.metadata
    client.poll(0)
    peer = broker.accept()
    peer.answer(peer.read_request(pump(client)), api_versions_body())
    req = peer.read_request(pump(client))
    assert req.api_key == ApiKey.METADATA
    md.request_update()                              # asked for again while one is in flight
    for _ in range(3):
        clock.advance(1_000)
        assert not peer.has_request(pump(client))
    peer.close()                                     # the request fails with the connection
    wait_for(lambda: md.last_error is not None, pump(client))
    assert isinstance(md.last_error, DisconnectedError) and md.version == 0
    assert md.time_to_next_update(clock()) > 0        # a failed refresh backs off
    clock.advance(BACKOFF + md.time_to_next_update(clock()))
    client.poll(0)
    peer2 = broker.accept()
    peer2.answer(peer2.read_request(pump(client)), api_versions_body())
    req = peer2.read_request(pump(client))
    assert req.api_key == ApiKey.METADATA
    peer2.answer(req, metadata_body({1: broker.address}, {"t": [1]}))
    wait_for(lambda: md.version == 1, pump(client))
    assert md.last_error is None


def test_a_metadata_answer_without_a_usable_broker_is_a_failed_refresh(managed, broker, clock):
    client, md = managed, managed.metadata
    client.poll(0)
    peer = broker.accept()
    peer.answer(peer.read_request(pump(client)), api_versions_body())
    req = peer.read_request(pump(client))
    peer.answer(req, metadata_body({-5: ("h", 1), 2: ("", 9092)}, {"t": [2]}))
    wait_for(lambda: md.last_error is not None, pump(client))
    assert isinstance(md.last_error, InvalidBrokerResponseError)
    assert "no usable broker" in str(md.last_error)
    assert md.version == 0 and md.cluster.brokers.keys() == {-1}   # still the bootstrap view


def test_least_loaded_node_is_the_ready_one_with_fewest_requests(broker, clock, pinned_jitter):
    md = Metadata([broker.address], MAX_AGE, 100, 1_000)
    md.update(make_cluster({}, brokers={1: broker.address, 2: broker.address}), clock())
    client = make_client(broker.bootstrap, clock, metadata=md)
    try:
        # nothing connected yet: a node that may be connected to
        assert client.least_loaded_node(clock()) in (1, 2)
        handshake(client, broker, clock, node=1)
        handshake(client, broker, clock, node=2)
        res = Results()
        send_md(client, clock, res, "x", node=1)
        send_md(client, clock, res, "y", node=1)
        send_md(client, clock, res, "z", node=2)
        for _ in range(10):                            # whatever the shuffle's order
            assert client.least_loaded_node(clock()) == 2
        send_md(client, clock, res, "w", node=2)
        send_md(client, clock, res, "v", node=2)
        for _ in range(10):
            assert client.least_loaded_node(clock()) == 1
    finally:
        client.close()


def test_rebootstrap_after_every_known_broker_failed_for_the_trigger_time(broker, clock,
                                                                           pinned_jitter):
    trigger = 3_000
    md = Metadata([broker.address], MAX_AGE, 100, 1_000)
    client = make_client(broker.bootstrap, clock, manage_metadata=True, metadata=md,
                         metadata_recovery_strategy="rebootstrap",
                         metadata_recovery_rebootstrap_trigger_ms=trigger)
    try:
        client.poll(0)
        peer = broker.accept()
        peer.answer(peer.read_request(pump(client)), api_versions_body())
        req = peer.read_request(pump(client))
        dead = free_port()
        peer.answer(req, metadata_body({1: ("127.0.0.1", dead)}, {"t": [1]}))
        wait_for(lambda: md.version == 1, pump(client))
        assert md.cluster.brokers.keys() == {1}
        clock.advance(MAX_AGE)                         # the refresh is for node 1: unreachable
        client.poll(0)
        wait_for(lambda: 1 in client.connections and client.connections[1].failures > 0,
                 pump(client))
        for _ in range(3):
            client.poll(0)                             # every broker failing since now
        clock.advance(trigger - 1)
        client.poll(0)
        assert client.stats["rebootstraps"] == 0 and md.cluster.brokers.keys() == {1}
        assert not peer.has_request(pump(client))
        clock.advance(1)
        client.poll(0)
        assert client.stats["rebootstraps"] == 1
        req = peer.read_request(pump(client))          # asked on the bootstrap's connection
        assert req.api_key == ApiKey.METADATA
        peer.answer(req, metadata_body({1: broker.address}, {"t": [1]}))
        wait_for(lambda: md.version == 2, pump(client))
        assert md.cluster.broker(1).port == broker.port
    finally:
        client.close()


def test_a_network_failpoint_is_a_callable_or_none():
    with pytest.raises(TypeError, match="a failpoint is a callable"):
        failpoints.set_network_failpoint(42)
    failpoints.set_network_failpoint(None)


def test_call_soon_from_another_thread_runs_on_the_polling_thread_and_wakes_it(client):
    """A handshake step whose work may block (GSSAPI's KDC step) runs it on a thread of its own
    and hands the outcome back with call_soon: the callback runs on the thread that polls, at
    the end of its turn, and a poll waiting for a long time is woken for it."""
    import threading

    ran_on = []
    done = threading.Event()

    def callback(body, error):
        ran_on.append((threading.get_ident(), body, error))
        done.set()

    def worker():
        time.sleep(0.2)
        client.call_soon(callback)

    t = threading.Thread(target=worker)
    t.start()
    t0 = time.monotonic()
    while not done.is_set() and time.monotonic() - t0 < 5:
        client.poll(10_000)           # would wait 10 s without the wake-up
    t.join()
    assert ran_on == [(threading.get_ident(), None, None)]
    assert time.monotonic() - t0 < 3
