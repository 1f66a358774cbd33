"""GIL-free requests: Produce requests queued the way the I/O thread's GIL-free turn queues them
(raw segments on the send queue, an in-flight C entry owning the batches), answered and failed
beside the Python requests of the same connection.

Against the in-process fault broker (tests/faultbroker) for answers, disconnects, timeouts,
correlation mismatches and throttling; against a socketpair "broker" the test drives byte by byte
for partial writes and garbled answers."""
from __future__ import annotations

import gc
import socket
import struct
import sys
import time

import pytest

from faultbroker import (FaultBroker, disconnect_before_response, no_response, rewrite_response,
                         wrong_correlation_id)
from faultbroker.protocol import encode_response
from fastkafka.protocol.produce_codec import ProduceCodec, ProduceResult
from fastkafka._producer.testing import send_produce
from fastkafka._net.transport import SendQueue
from fastkafka._net.cluster import Metadata
from fastkafka.config import ProducerConfig
from fastkafka.errors import (CorrelationIdMismatchError, CorruptFrameError, DisconnectedError,
                              RequestTimedOutError)
from fastkafka._net.connection import Connection, ProduceRequest, State
from fastkafka._net.network import NetworkClient
from fastkafka.protocol import ApiKey

pytestmark = pytest.mark.faultbroker

CODEC = ProduceCodec()
TOPIC = "no-such-topic"     # the broker answers UNKNOWN_TOPIC_OR_PARTITION without parsing records


class Batch:
    """Stands for a producer batch: the network layer only holds references to it."""

    def __init__(self, n):
        self.n = n


def make_client(bootstrap, **kw):
    cfg = ProducerConfig(bootstrap_servers=bootstrap, **{
        "request_timeout_ms": 2000, "delivery_timeout_ms": 5000, "reconnect_backoff_ms": 10,
        "reconnect_backoff_max_ms": 50, **kw})
    md = Metadata(cfg.bootstrap_servers, cfg.metadata_max_age_ms, cfg.retry_backoff_ms)
    return NetworkClient(cfg, md, manage_metadata=False)


def connect(client, node=-1, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not client.ready(node, client.clock()):
        assert time.monotonic() < deadline, f"node {node} not ready"
        client.poll(20)
    return client.connections[node]


def produce_frame(version, records=b"r" * 64, acks=-1):
    parts = [(TOPIC, 0, records)]
    return b"".join(bytes(b) for b in CODEC.encode(version, 0, "gil-free-test", (None, acks, 30000, parts)))


def metadata_body():
    return {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def poll_until(client, cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met"
        client.poll(20)


class Recorder:
    def __init__(self):
        self.events = []

    def gil_free(self, node, batches, body, error):
        self.events.append(("gil_free", node, batches, body, error))

    def python(self, tag):
        return lambda body, error: self.events.append(("python", tag, body, error))


@pytest.fixture
def fbroker():
    b = FaultBroker()
    try:
        yield b
    finally:
        b.close()
    assert b.crashed == [] and b.handler_errors == []


@pytest.fixture
def client(fbroker):
    c = make_client(fbroker.bootstrap)
    try:
        yield c
    finally:
        c.close()


# -- against the fault broker ---------------------------------------------------------------------

def test_interleaved_gil_free_and_python_requests_reach_their_handlers_in_order(fbroker, client):
    conn = connect(client)
    version = conn.produce_version
    assert version >= 3
    rec = Recorder()
    client.produce_handler = rec.gil_free
    b1, b2 = [Batch(1), Batch(2)], [Batch(3)]
    before = [sys.getrefcount(b) for b in b1 + b2]
    client.send(-1, ApiKey.METADATA, metadata_body(), client.clock(), rec.python("m1"))
    c1 = send_produce(client, -1, list(b1), produce_frame(version), version, client.clock())
    client.send(-1, ApiKey.METADATA, metadata_body(), client.clock(), rec.python("m2"))
    c2 = send_produce(client, -1, list(b2), produce_frame(version), version, client.clock())
    assert c2 == c1 + 2                      # one correlation counter for both kinds
    assert conn.produce_count == 2 and client.in_flight_count(-1) == 4
    poll_until(client, lambda: len(rec.events) == 4)
    kinds = [(e[0], e[1] if e[0] == "python" else None) for e in rec.events]
    assert kinds == [("python", "m1"), ("gil_free", None), ("python", "m2"), ("gil_free", None)]
    _, node, batches, body, error = rec.events[1]
    assert node == -1 and error is None and batches == b1
    assert all(x is y for x, y in zip(batches, b1))
    assert isinstance(body, ProduceResult) and body.correlation_id == c1
    assert body.partitions[0].topic == TOPIC and body.partitions[0].error_code == 3
    assert rec.events[3][3].correlation_id == c2 and rec.events[3][2] == b2
    # the broker saw the whole request, with the correlation id the client allocated
    produced = fbroker.received(ApiKey.PRODUCE)
    assert [r.correlation_id for r in produced] == [c1, c2]
    assert produced[0].body["topic_data"][0]["partition_data"][0]["records"] == b"r" * 64
    assert conn.produce_count == 0 and client.in_flight_count(-1) == 0
    assert client.stats["requests"] >= 4 and client.stats["responses"] >= 4
    rec.events.clear()
    del batches, body
    gc.collect()
    assert [sys.getrefcount(b) for b in b1 + b2] == before   # the references moved, none leaked


def test_disconnect_fails_gil_free_entries_in_order_and_leaks_nothing(fbroker, client):
    conn = connect(client)
    version = conn.produce_version
    rec = Recorder()
    client.produce_handler = rec.gil_free
    batches = [Batch(i) for i in range(3)]
    before = [sys.getrefcount(b) for b in batches]
    fbroker.script.on(ApiKey.PRODUCE, disconnect_before_response())
    send_produce(client, -1, batches[:2], produce_frame(version), version, client.clock())
    client.send(-1, ApiKey.METADATA, metadata_body(), client.clock(), rec.python("m"))
    send_produce(client, -1, batches[2:], produce_frame(version), version, client.clock())
    assert [sys.getrefcount(b) for b in batches] == [n + 1 for n in before]
    poll_until(client, lambda: len(rec.events) == 3)
    assert [e[0] for e in rec.events] == ["gil_free", "python", "gil_free"]
    assert rec.events[0][2] == batches[:2] and rec.events[2][2] == batches[2:]
    assert all(isinstance(e[-1], DisconnectedError) for e in rec.events)
    assert conn.state is State.DISCONNECTED and conn.produce_count == 0
    assert conn.send_queue.pending_bytes == 0 and conn.send_queue.held_exports == 0
    rec.events.clear()
    gc.collect()
    assert [sys.getrefcount(b) for b in batches] == before


def test_request_timeout_fails_an_gil_free_request(fbroker):
    c = make_client(fbroker.bootstrap, request_timeout_ms=300)
    try:
        conn = connect(c)
        version = conn.produce_version
        rec = Recorder()
        c.produce_handler = rec.gil_free
        fbroker.script.on(ApiKey.PRODUCE, no_response())
        t0 = c.clock()
        send_produce(c, -1, [Batch(0)], produce_frame(version), version, t0)
        assert conn.due(t0 + 301, 10_000, 300, 10**9) is not None     # judged by the GIL-free head
        assert conn.due(t0 + 299, 10_000, 300, 10**9) is None
        assert "ProduceRequest" in conn.oldest_request()
        poll_until(c, lambda: rec.events)
        _, _, batches, body, error = rec.events[0]
        assert body is None and isinstance(error, RequestTimedOutError)
        assert "ProduceRequest" in str(error) and len(batches) == 1
        assert c.stats["timeouts"] == 1
    finally:
        c.close()


def test_correlation_mismatch_on_an_gil_free_answer_fails_everything_in_flight(fbroker, client):
    conn = connect(client)
    version = conn.produce_version
    rec = Recorder()
    client.produce_handler = rec.gil_free
    fbroker.script.on(ApiKey.PRODUCE, wrong_correlation_id(5))
    send_produce(client, -1, [Batch(0)], produce_frame(version), version, client.clock())
    client.send(-1, ApiKey.METADATA, metadata_body(), client.clock(), rec.python("m"))
    poll_until(client, lambda: len(rec.events) == 2)
    assert [e[0] for e in rec.events] == ["gil_free", "python"]
    assert all(isinstance(e[-1], CorrelationIdMismatchError) for e in rec.events)
    assert conn.state is State.DISCONNECTED


def test_throttle_of_an_gil_free_answer_is_accounted_as_for_any_answer(fbroker, client):
    conn = connect(client)
    version = conn.produce_version
    rec = Recorder()
    client.produce_handler = rec.gil_free

    def throttle(result, header, body):
        result["throttle_time_ms"] = 700

    fbroker.script.on(ApiKey.PRODUCE, rewrite_response(throttle), times=1)
    now = client.clock()
    send_produce(client, -1, [Batch(0)], produce_frame(version), version, now)
    poll_until(client, lambda: rec.events)
    assert rec.events[0][3].throttle_time_ms == 700 and rec.events[0][4] is None
    assert client.stats["throttled_responses"] == 1 and client.stats["throttle_time_ms_total"] == 700
    assert conn.throttle_until_ms >= now + 700
    assert not conn.can_send(client.clock(), 5)
    assert client.connection_delay(-1, client.clock()) > 0


def test_send_produce_checks_its_arguments(fbroker, client):
    conn = connect(client)
    version = conn.produce_version
    with pytest.raises(ValueError, match="produce_handler"):
        send_produce(client, -1, [], produce_frame(version), version, client.clock())
    client.produce_handler = Recorder().gil_free
    with pytest.raises(ValueError, match="Produce"):
        send_produce(client, -1, [], produce_frame(version), version - 1, client.clock())
    with pytest.raises(Exception, match="not ready"):
        send_produce(client, 99, [], produce_frame(version), version, client.clock())
    assert conn.produce_count == 0 and conn.send_queue.pending_bytes == 0


# -- against a socketpair the test drives ------------------------------------------------------

VERSION = 9


@pytest.fixture
def pair():
    """A NetworkClient with a READY plaintext connection to node 7 whose other end is ``peer``."""
    c = make_client("127.0.0.1:9")
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn = Connection(7, "peer", 0, 1 << 20)
    conn.sock = ours
    conn.fd = ours.fileno()
    conn.status = int(State.READY)
    conn.last_activity_ms = c.clock()
    c.connections[7] = conn
    rec = Recorder()
    c.produce_handler = rec.gil_free
    try:
        yield c, conn, peer, rec
    finally:
        c.close()
        peer.close()


def read_frame(peer, timeout=5.0):
    peer.settimeout(timeout)
    head = b""
    while len(head) < 4:
        head += peer.recv(4 - len(head))
    size = struct.unpack(">i", head)[0]
    body = b""
    while len(body) < size:
        body += peer.recv(size - len(body))
    return head + body


def produce_answer(corr, throttle=0):
    body = {"responses": [{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1,
         "log_start_offset": 0, "record_errors": [], "error_message": None}]}],
        "throttle_time_ms": throttle}
    return encode_response(ApiKey.PRODUCE, VERSION, corr, body)


def test_partial_write_finishes_later_and_the_answer_completes_it(pair):
    c, conn, peer, rec = pair
    frame = produce_frame(VERSION, records=bytes(range(256)) * 4096)     # 1 MiB of records
    batches = [Batch(0)]
    before = sys.getrefcount(batches[0])
    corr = send_produce(c, 7, batches, frame, VERSION, c.clock())
    left = conn.send_queue.pending_bytes
    assert 0 < left < len(frame)           # the socket took part of it
    got = peer.recv(100000)
    c.poll(0)                              # writes more of it
    assert conn.send_queue.pending_bytes < left
    while len(got) < len(frame):
        peer.settimeout(5)
        got += peer.recv(1 << 20)
        c.poll(0)
    assert conn.send_queue.pending_bytes == 0
    assert got[:8] == frame[:8] and struct.unpack(">i", got[8:12])[0] == corr and got[12:] == frame[12:]
    peer.sendall(produce_answer(corr))
    poll_until(c, lambda: rec.events)
    _, node, out, body, error = rec.events[0]
    same = [id(x) for x in out] == [id(x) for x in batches]
    offset = body.partitions[0].base_offset
    rec.events.clear()
    del out, body
    assert node == 7 and error is None and same and offset == 42
    gc.collect()
    after = sys.getrefcount(batches[0])    # (outside the assert: its rewriting holds operands)
    assert after == before


def test_acks_zero_request_between_gil_free_requests_completes_once_written(pair):
    """A request expecting no answer completes when its bytes are on the socket, between GIL-free
    requests written by the same writev path; the answers then go to the GIL-free requests."""
    c, conn, peer, rec = pair
    conn.versions = {int(ApiKey.PRODUCE): VERSION}
    e1 = send_produce(c, 7, [Batch(1)], produce_frame(VERSION), VERSION, c.clock())
    c.send(7, ApiKey.PRODUCE, (None, 0, 30000, [(TOPIC, 0, b"z" * 64)]), c.clock(),
           rec.python("acks0"), expect_response=False, min_version=VERSION, max_version=VERSION,
           codec=CODEC)
    e2 = send_produce(c, 7, [Batch(2)], produce_frame(VERSION), VERSION, c.clock())
    assert conn.in_flight_count() == 3 and conn.unacked_writes == 1
    poll_until(c, lambda: rec.events)
    assert rec.events == [("python", "acks0", None, None)] and conn.unacked_writes == 0
    frames = [read_frame(peer) for _ in range(3)]
    assert [struct.unpack(">i", f[8:12])[0] for f in frames] == [e1, e1 + 1, e2]
    peer.sendall(produce_answer(e1) + produce_answer(e2))
    poll_until(c, lambda: len(rec.events) == 3)
    assert [(e[0], e[2][0].n, e[4]) for e in rec.events[1:]] == [("gil_free", 1, None), ("gil_free", 2, None)]
    assert conn.in_flight_count() == 0 and conn.send_queue.held_exports == 0


def test_garbled_gil_free_answer_closes_the_connection_and_fails_the_request(pair):
    c, conn, peer, rec = pair
    batches = [Batch(0), Batch(1)]
    before = [sys.getrefcount(b) for b in batches]
    corr = send_produce(c, 7, batches, produce_frame(VERSION), VERSION, c.clock())
    c.poll(0)
    read_frame(peer)
    answer = produce_answer(corr)
    garbled = answer[:4 + 4 + 3]           # the correlation id, then 3 bytes of a body
    peer.sendall(struct.pack(">i", len(garbled) - 4) + garbled[4:])
    poll_until(c, lambda: rec.events)
    _, _, out, body, error = rec.events[0]
    assert body is None and isinstance(error, CorruptFrameError)
    assert [id(x) for x in out] == [id(x) for x in batches]
    assert conn.state is State.DISCONNECTED and conn.produce_count == 0
    rec.events.clear()
    del out
    gc.collect()
    assert [sys.getrefcount(b) for b in batches] == before


def test_an_answer_before_the_request_is_fully_written_is_refused(pair):
    c, conn, peer, rec = pair
    frame = produce_frame(VERSION, records=b"x" * (1 << 20))
    corr = send_produce(c, 7, [Batch(0)], frame, VERSION, c.clock())
    assert conn.send_queue.pending_bytes > 0
    peer.sendall(produce_answer(corr))     # answered while its bytes still wait: a hostile peer
    poll_until(c, lambda: rec.events)
    assert isinstance(rec.events[0][4], CorruptFrameError)
    assert "fully written" in str(rec.events[0][4])


def test_connection_freed_with_gil_free_entries_releases_the_batches():
    c = make_client("127.0.0.1:9")
    ours, peer = socket.socketpair()
    try:
        ours.setblocking(False)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        conn = Connection(7, "peer", 0, 1 << 20)
        conn.sock, conn.fd, conn.status = ours, ours.fileno(), int(State.READY)
        c.connections[7] = conn
        c.produce_handler = Recorder().gil_free
        batches = [Batch(0), Batch(1)]
        before = [sys.getrefcount(b) for b in batches]
        send_produce(c, 7, batches, produce_frame(VERSION, records=b"x" * (1 << 20)), VERSION,
                       c.clock())
        assert [sys.getrefcount(b) for b in batches] == [n + 1 for n in before]
        q = conn.send_queue
        assert q.pending_bytes > 0             # raw segments still point into the glue
        del c.connections[7]
        del conn
        gc.collect()
        assert [sys.getrefcount(b) for b in batches] == before
        assert q.pending_bytes == 0 and q.segments == 0   # cleared before the glue was freed
    finally:
        c.close()
        ours.close()
        peer.close()


def test_reset_returns_both_kinds_in_correlation_order():
    conn = Connection(3, "h", 0, 1 << 20)
    c = make_client("127.0.0.1:9")
    try:
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        conn.sock, conn.fd, conn.status = ours, ours.fileno(), int(State.READY)
        conn.versions = {int(ApiKey.METADATA): 9}
        c.connections[3] = conn
        c.produce_handler = Recorder().gil_free
        c.send(3, ApiKey.METADATA, metadata_body(), c.clock(), lambda b, e: None)
        e1 = send_produce(c, 3, [Batch(0)], produce_frame(VERSION), VERSION, c.clock())
        e2 = send_produce(c, 3, [Batch(1)], produce_frame(VERSION), VERSION, c.clock())
        c.send(3, ApiKey.METADATA, metadata_body(), c.clock(), lambda b, e: None)
        assert conn.in_flight_count() == 4
        pending = conn.reset()
        assert [type(r).__name__ for r in pending] == ["InFlightRequest", "ProduceRequest",
                                                       "ProduceRequest", "InFlightRequest"]
        assert [r.correlation_id for r in pending] == sorted(r.correlation_id for r in pending)
        assert [r.correlation_id for r in pending if isinstance(r, ProduceRequest)] == [e1, e2]
        assert pending[1].batches[0].n == 0 and pending[1].version == VERSION
        assert conn.in_flight_count() == 0 and conn.send_queue.pending_bytes == 0
        del c.connections[3]
        ours.close()
        peer.close()
    finally:
        c.close()


# -- the send queue's raw segments -------------------------------------------------------------

def test_send_queue_raw_and_python_segments_write_and_complete_tokens():
    q = SendQueue()
    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        q.push([b"head", bytearray(b"x" * 300000)], "t1")
        q.push_raw_copy(b"raw" * 100000)
        q.push([b"tail"], "t2")
        assert q.held_exports == 3
        total = q.pending_bytes
        done = q.write_to(a.fileno())
        assert done == [] and 0 < q.pending_bytes < total
        got = b""
        tokens = []
        while q.has_pending():
            b.settimeout(5)
            got += b.recv(1 << 20)
            tokens += q.write_to(a.fileno())
        b.settimeout(5)
        while len(got) < total:
            got += b.recv(1 << 20)
        assert got == b"head" + b"x" * 300000 + b"raw" * 100000 + b"tail"
        assert tokens == ["t1", "t2"] and q.held_exports == 0 and q.segments == 0
    finally:
        a.close()
        b.close()


def test_send_queue_clear_forgets_raw_segments():
    q = SendQueue()
    q.push([b"abc"], "t")
    q.push_raw_copy(b"defg")
    assert q.pending_bytes == 7 and q.segments == 2
    assert q.pop_bytes(5) == (b"abcde", ["t"])
    assert q.clear() == [] and q.pending_bytes == 0 and q.segments == 0 and q.held_exports == 0
