"""The sender (fastkafka._producer.sender) on its own: driven turn by turn with a fake clock,
against a real network client whose connection is READY without a socket (tests/sockless.py):
what the sender queues is taken as bytes and decoded, answers are fed back as frames. No broker,
no sleeping: every time is passed in."""
from __future__ import annotations

import struct
import types

import pytest

from fastkafka import errors
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer.sender import Sender
from faultbroker.protocol import decode_request, encode_response
from fastkafka.protocol import ApiKey
from sockless import SocklessClient

LINGER, BACKOFF, DELIVERY = 5, 100, 10_000
VERSION = 9


class Clock:
    """The fake clock: a time that moves only when the test says."""

    def __init__(self, t=1000):
        self.t = t

    def __call__(self):
        return self.t


class Cluster:
    def __init__(self, leaders):
        self.leaders = leaders

    def leader_for(self, topic, partition):
        return self.leaders.get((topic, partition), -1)


def answer_frame(version, body, corr):
    return encode_response(ApiKey.PRODUCE, version, corr, body)[4:]


def ok(topic, *partitions, code=0, base=0):
    return {"name": topic, "partition_responses": [
        {"index": p, "error_code": code, "base_offset": base + i, "log_append_time_ms": -1,
         "log_start_offset": 0, "record_errors": [], "error_message": None}
        for i, p in enumerate(partitions)]}


class Rig:
    def __init__(self, leaders=None, acks=-1, retries=5, batch_size=16384, max_request_size=1 << 20):
        self.clock = Clock()
        self.client = SocklessClient(VERSION, answer_frame, clock=self.clock)
        cfg = types.SimpleNamespace(
            transactional_id=None, enable_idempotence=False, acks=acks, compression_code=0,
            retry_backoff_ms=BACKOFF, retry_backoff_max_ms=1000, on_error=None,
            request_timeout_ms=30_000, delivery_timeout_ms=DELIVERY, retries=retries,
            max_request_size=max_request_size, gil_free_io=False)
        self.acc = RecordAccumulator(batch_size, 0, None, LINGER, BACKOFF, DELIVERY,
                                     BufferPool(1 << 22, batch_size), False)
        self.metadata = types.SimpleNamespace(
            cluster=Cluster(leaders or {("a", 0): 1, ("a", 1): 1, ("b", 0): 1}),
            request_update=lambda: None, add_topic=lambda t: None)
        self.sender = Sender(cfg, self.acc, self.metadata, self.client.net, clock=self.clock)

    def send(self, topic, partition, value=b"v"):
        return self.acc.append(topic, partition, 0, None, value, None, None, self.clock.t, 0)

    def turn(self, at=None):
        """One turn of the I/O thread at ``at`` (the poll returns at once: woken first)."""
        if at is not None:
            self.clock.t = at
        self.client.net.wakeup()
        self.sender.run_once()

    def requests(self):
        """The Produce requests written since the last call: (correlation id, decoded body)."""
        frames, _ = self.client.take()
        out = []
        for f in frames:
            api, version, corr = struct.unpack(">hhi", f[:8])
            assert api == ApiKey.PRODUCE and version == VERSION
            header, body = decode_request(f)
            assert header["correlation_id"] == corr and header["client_id"] == "unit"
            out.append((corr, body))
        return out

    def answer(self, corr, *topics, throttle=0):
        r, body, _ = self.client.conn.receive(
            answer_frame(VERSION, {"throttle_time_ms": throttle, "responses": list(topics)}, corr),
            self.clock.t)
        r.handler = self.client.net.produce_handler
        r(body, None)

    def close(self):
        self.client.conn.reset()
        for b in self.acc.abort_undrained():
            b.complete(-1, -1, errors.ProducerClosedError("test over"))
        self.acc.close()


@pytest.fixture
def rig():
    made = []

    def make(**kw):
        r = Rig(**kw)
        made.append(r)
        return r
    yield make
    for r in made:
        r.close()


def parts(body):
    return sorted((t["name"], p["index"]) for t in body["topic_data"] for p in t["partition_data"])


def test_a_young_batch_waits_for_its_linger_then_goes_in_one_request_per_node(rig):
    r = rig()
    f = [r.send("a", 0), r.send("a", 1), r.send("b", 0)]
    r.turn(at=r.clock.t + LINGER - 1)
    assert r.requests() == [] and r.client.conn.in_flight_count() == 0
    r.turn(at=r.clock.t + 1)
    (corr, body), = r.requests()
    assert parts(body) == [("a", 0), ("a", 1), ("b", 0)] and body["acks"] == -1
    assert r.sender.in_flight_batches == 3 and r.client.conn.produce_count == 1
    r.answer(corr, ok("a", 0, 1, base=10), ok("b", 0, base=20))
    assert [x.get(0).offset for x in f] == [10, 11, 20]
    assert r.sender.in_flight_batches == 0 and r.client.conn.in_flight_count() == 0
    assert r.sender.stats["produce_requests"] == 1 and r.sender.stats["batches_sent"] == 3


def test_a_retriable_error_resends_after_the_backoff_only(rig):
    r = rig()
    f = r.send("a", 0)
    r.turn(at=r.clock.t + LINGER)
    (corr, _), = r.requests()
    t0 = r.clock.t
    r.answer(corr, ok("a", 0, code=errors.NotLeaderOrFollowerError.code))
    assert not f.done() and r.sender.stats["retries"] == 1
    r.turn(at=t0 + BACKOFF - 1)
    assert r.requests() == []
    r.turn(at=t0 + BACKOFF)
    (corr2, body), = r.requests()
    assert corr2 != corr and parts(body) == [("a", 0)]
    r.answer(corr2, ok("a", 0, base=7))
    assert f.get(0).offset == 7


def test_a_non_retriable_error_fails_only_its_partition(rig):
    r = rig()
    fa, fb = r.send("a", 0), r.send("b", 0)
    r.turn(at=r.clock.t + LINGER)
    (corr, _), = r.requests()
    r.answer(corr, ok("a", 0, code=errors.InvalidRecordError.code), ok("b", 0, base=3))
    with pytest.raises(errors.InvalidRecordError):
        fa.get(0)
    assert fb.get(0).offset == 3


def test_message_too_large_splits_the_batch_and_sends_the_pieces(rig):
    r = rig()
    fs = [r.send("a", 0, b"x" * 100) for _ in range(4)]
    r.turn(at=r.clock.t + LINGER)
    (corr, _), = r.requests()
    r.answer(corr, ok("a", 0, code=errors.MessageTooLargeError.code))
    assert r.sender.stats["batches_split"] == 1 and not any(f.done() for f in fs)
    offsets = {}
    for _ in range(4):           # the pieces go one at a time or together; answer what comes
        r.turn(at=r.clock.t + BACKOFF)
        for c, body in r.requests():
            n = sum(1 for t in body["topic_data"] for _ in t["partition_data"])
            assert n == 1
            r.answer(c, ok("a", 0, base=100 + len(offsets)))
            offsets[c] = True
        if all(f.done() for f in fs):
            break
    assert all(f.done() and f.exception(0) is None for f in fs)
    assert len(offsets) >= 2


def test_a_batch_that_waits_past_delivery_timeout_fails_without_being_sent(rig):
    r = rig(leaders={("a", 0): 7})           # node 7: no connection, never ready
    f = r.send("a", 0)
    t0 = r.clock.t
    r.turn(at=t0 + DELIVERY - 1)
    assert not f.done()
    r.turn(at=t0 + DELIVERY + 1)
    with pytest.raises(errors.DeliveryTimeoutError):
        f.get(0)
    assert r.sender.stats["batches_expired"] == 1 and r.requests() == []


def test_fail_everything_fails_the_batches_in_the_connections_rings(rig):
    r = rig()
    queued = r.send("a", 0)
    r.turn(at=r.clock.t + LINGER)
    assert r.client.conn.produce_count == 1
    later = r.send("b", 0)                   # queued, not sent
    r.sender.fail_everything(errors.ProducerClosedError("gone"))
    for f in (queued, later):
        with pytest.raises(errors.ProducerClosedError):
            f.get(0)


def test_a_request_is_not_sent_to_a_node_without_room(rig):
    r = rig()
    conn = r.client.conn
    f = []
    for i in range(6):                       # max_in_flight is 5: the sixth waits
        f.append(r.send("a", 0))
        r.turn(at=r.clock.t + LINGER)
    sent = r.requests()
    assert len(sent) == 5 and conn.in_flight_count() == 5
    r.answer(sent[0][0], ok("a", 0, base=0))
    r.turn(at=r.clock.t + 1)
    (corr, _), = r.requests()
    assert corr not in [c for c, _ in sent]
