"""The in-process fault broker, proven with independent clients: confluent-kafka (librdkafka) and a
raw socket speaking hand-framed requests. Stored batches are decoded with kafka-python."""
from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from faultbroker import (Cluster, FaultBroker, delay, disconnect_before_response, disconnect_mid_response,
                         no_response, oversized_size_prefix, partition_error, slow_read, split_frames,
                         wrong_correlation_id)
from fastkafka.protocol import ApiKey, decode_response, encode_request

pytestmark = pytest.mark.faultbroker

NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
CORRUPT_MESSAGE = 2
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46


# ------------------------------------------------------------------------------------ helpers
class RawClient:
    """A blocking socket client writing frames with fastkafka.protocol, reading them by hand."""

    def __init__(self, broker: FaultBroker, timeout: float = 5.0):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=timeout)
        self.corr = 0
        self.recv_calls = 0

    def send(self, api_key, version, body, corr=None) -> int:
        self.corr += 1
        corr = self.corr if corr is None else corr
        frame = encode_request(api_key, version, corr, "raw-client", body)
        self.sock.sendall(b"".join(bytes(p) for p in frame))
        return corr

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            self.recv_calls += 1
            if not chunk:
                raise EOFError(f"EOF after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exact(4))
        return self.recv_exact(size)

    def call(self, api_key, version, body):
        corr = self.send(api_key, version, body)
        got_corr, resp = decode_response(api_key, version, self.recv_frame())
        assert got_corr == corr
        return resp

    def read_until_eof(self) -> bytes:
        buf = bytearray()
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return bytes(buf)
            buf += chunk

    def close(self):
        self.sock.close()


@pytest.fixture
def raw(fb):
    clients = []

    def make():
        c = RawClient(fb)
        clients.append(c)
        return c
    yield make
    for c in clients:
        c.close()


def build_batch(values, producer_id=-1, epoch=-1, base_sequence=-1, timestamp=1_000) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, 0, producer_id, epoch, base_sequence, 1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp + i, key=None, value=v, headers=[])
    return bytes(b.build())


def produce_body(topic, partition, records, acks=-1):
    return {"acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def partition_result(resp):
    return resp["responses"][0]["partition_responses"][0]


def stored_records(broker, topic, partition):
    out = []
    for sb in broker.batches(topic, partition):
        batch = DefaultRecordBatch(sb.data)
        assert batch.validate_crc()
        assert batch.base_offset == sb.base_offset
        out.extend(batch)
    return out


def producer(broker, **extra):
    conf = {"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "retry.backoff.ms": 20, "log_level": 0}
    conf.update(extra)
    return Producer(conf)


def deliver(p, topic, values, partition=None, timeout=15.0):
    reports = []
    for v in values:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, v, on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset())), **kw)
    assert p.flush(timeout) == 0, "delivery reports missing"
    return reports


# ------------------------------------------------------------------- basics with confluent-kafka
def test_confluent_round_trip_stores_exact_records(fb):
    admin = AdminClient({"bootstrap.servers": fb.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(10)
    assert fb.cluster.topics["orders"] == 3
    p = producer(fb)
    reports = []
    for i in range(60):
        p.produce("orders", b"value-%d" % i, key=b"key-%d" % i, headers=[("n", b"%d" % i)],
                  timestamp=1_700_000_000_000 + i,
                  on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset(), msg.value())))
    assert p.flush(15) == 0
    assert [r for r in reports if r[0] is not None] == []
    assert fb.cluster.record_count("orders") == 60
    seen = {}
    for part in range(3):
        recs = stored_records(fb, "orders", part)
        assert [r.offset for r in recs] == list(range(len(recs)))          # dense offsets from 0
        for r in recs:
            i = int(r.value.split(b"-")[1])
            assert r.key == b"key-%d" % i and r.headers == [("n", b"%d" % i)]
            assert r.timestamp == 1_700_000_000_000 + i
            seen[i] = (part, r.offset)
    assert sorted(seen) == list(range(60))
    # delivery reports name exactly where the broker stored each record
    for _err, part, off, value in reports:
        assert seen[int(value.split(b"-")[1])] == (part, off)
    apis = {r.api_key for r in fb.received()}
    assert {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.CREATE_TOPICS} <= apis


def test_confluent_idempotent_producer(fb):
    fb.create_topic("idem", 1)
    p = producer(fb, **{"enable.idempotence": True})
    reports = deliver(p, "idem", [b"a%d" % i for i in range(20)], partition=0)
    assert [r[0] for r in reports] == [None] * 20
    assert sorted(r[2] for r in reports) == list(range(20))
    assert len(fb.received(ApiKey.INIT_PRODUCER_ID)) == 1
    batches = fb.batches("idem", 0)
    assert {b.producer_id for b in batches} == {1000} and {b.producer_epoch for b in batches} == {0}
    seq = 0
    for b in batches:                          # sequences continue batch after batch
        assert b.base_sequence == seq
        seq += b.record_count
    assert seq == 20


def test_auto_create_and_delete_topics(fb):
    admin = AdminClient({"bootstrap.servers": fb.bootstrap, "log_level": 0})
    p = producer(fb)
    assert deliver(p, "auto-created", [b"x"])[0][0] is None
    assert fb.cluster.topics["auto-created"] == 1
    admin.create_topics([NewTopic("doomed", 2, 1)])["doomed"].result(10)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS") as ei:
        admin.create_topics([NewTopic("doomed", 2, 1)])["doomed"].result(10)
    assert ei.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    admin.delete_topics(["doomed"])["doomed"].result(10)
    assert "doomed" not in fb.cluster.topics


# ----------------------------------------------------------- per-partition errors seen by librdkafka
def test_message_too_large_fails_delivery(fb):
    fb.create_topic("big", 1)
    rule = fb.script.on(ApiKey.PRODUCE, partition_error(MESSAGE_TOO_LARGE))
    p = producer(fb)
    (err, _, _), = deliver(p, "big", [b"too big"], partition=0)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert rule.fired == 1 and fb.cluster.record_count("big") == 0
    assert deliver(p, "big", [b"fits"], partition=0)[0][0] is None      # one-shot rule
    assert fb.cluster.record_count("big") == 1


def test_not_leader_is_retried_then_succeeds(fb):
    fb.create_topic("moving", 2)
    rule = fb.script.on(ApiKey.PRODUCE, partition_error(NOT_LEADER_OR_FOLLOWER, partitions=[1]), times=2)
    p = producer(fb)
    metadata_before = len(fb.received(ApiKey.METADATA))
    reports = deliver(p, "moving", [b"m"], partition=1)
    assert reports[0][0] is None and reports[0][1:] == (1, 0)
    assert rule.fired == 2
    assert len(fb.received(ApiKey.PRODUCE)) == 3
    assert len(fb.received(ApiKey.METADATA)) > metadata_before          # NOT_LEADER refreshed metadata
    assert [r.value for r in stored_records(fb, "moving", 1)] == [b"m"]


def test_match_and_unlimited_rules(fb):
    fb.create_topic("m", 1)
    rule = fb.script.on(ApiKey.PRODUCE, partition_error(CORRUPT_MESSAGE), times=None,
                        match=lambda h, body: h["client_id"] == "never-this-client")
    p = producer(fb)
    assert deliver(p, "m", [b"1", b"2"], partition=0)[0][0] is None
    assert rule.fired == 0 and fb.script.pending() == [rule]
    fb.script.clear()
    assert fb.script.pending() == []


# ------------------------------------------------------------------------------ multi-node cluster
def test_shared_cluster_leader_move(no_leaks):
    cluster = Cluster()
    with FaultBroker(cluster) as b1, FaultBroker(cluster) as b2:
        assert (b1.node_id, b2.node_id) == (1, 2)
        b1.create_topic("two", 2)
        assert cluster.leader("two", 0) == 1 and cluster.leader("two", 1) == 2
        p = producer(b1)
        assert [r[0] for r in deliver(p, "two", [b"p0"], partition=0)] == [None]
        assert [r[0] for r in deliver(p, "two", [b"p1"], partition=1)] == [None]
        assert [b.node_id for b in cluster.batches("two", 0)] == [1]
        assert [b.node_id for b in cluster.batches("two", 1)] == [2]   # librdkafka followed Metadata
        cluster.set_leader("two", 0, 2)
        reports = deliver(p, "two", [b"moved"], partition=0)
        assert reports[0][0] is None and reports[0][2] == 1
        assert [b.node_id for b in cluster.batches("two", 0)] == [1, 2]
        # broker 1 turned the stale-leader produce away; the client then found broker 2
        codes = [pr["error_code"] for r in b1.received(ApiKey.PRODUCE) if r.response
                 for t in r.response["responses"] for pr in t["partition_responses"]]
        assert codes == [0, NOT_LEADER_OR_FOLLOWER]
        del p


# ------------------------------------------------------------ scripted faults at the socket level
def test_split_frames_reassemble(fb, raw):
    c = raw()
    plain = c.call(ApiKey.METADATA, 12, {"topics": None})
    fb.script.on(ApiKey.METADATA, split_frames(chunk=1, pause=0.001))
    before = c.recv_calls
    split = c.call(ApiKey.METADATA, 12, {"topics": None})
    assert split == plain
    assert c.recv_calls - before >= 20, "response arrived in one piece; split_frames had no effect"


def test_split_frames_chunked_with_pauses(fb, raw):
    c = raw()
    fb.script.on(ApiKey.API_VERSIONS, split_frames(chunk=7, pause=0.02))
    t0 = time.monotonic()
    resp = c.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw", "client_software_version": "1"})
    elapsed = time.monotonic() - t0
    assert resp["error_code"] == 0 and len(resp["api_keys"]) >= 7   # a frame of > 50 bytes
    assert elapsed >= 0.1                     # >= 8 chunks of 7 bytes, 20 ms apart


def test_wrong_correlation_id(fb, raw):
    c = raw()
    fb.script.on(ApiKey.METADATA, wrong_correlation_id(delta=1000))
    corr = c.send(ApiKey.METADATA, 12, {"topics": []})
    payload = c.recv_frame()
    got, _ = decode_response(ApiKey.METADATA, 12, payload)
    assert got == corr + 1000
    assert c.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]   # next one is correct again


@pytest.mark.parametrize("size", [2**31 - 1, -1])
def test_oversized_size_prefix(fb, raw, size):
    c = raw()
    fb.script.on(ApiKey.METADATA, oversized_size_prefix(size))
    c.send(ApiKey.METADATA, 12, {"topics": []})
    (got,) = struct.unpack(">i", c.recv_exact(4))
    assert got == size


def test_disconnect_before_response(fb, raw):
    c = raw()
    fb.script.on(ApiKey.METADATA, disconnect_before_response())
    c.send(ApiKey.METADATA, 12, {"topics": []})
    assert c.read_until_eof() == b""
    assert len(fb.received(ApiKey.METADATA)) == 1     # it was received, then the connection dropped


def test_disconnect_mid_response(fb, raw):
    c = raw()
    fb.script.on(ApiKey.METADATA, disconnect_mid_response(10))
    c.send(ApiKey.METADATA, 12, {"topics": None})
    got = c.read_until_eof()
    assert len(got) == 10
    (size,) = struct.unpack_from(">i", got)
    assert size > 6                                   # a real frame, cut short


def test_delay_and_no_response_keep_order(fb, raw):
    c = raw()
    fb.script.on(ApiKey.METADATA, no_response())
    fb.script.on(ApiKey.API_VERSIONS, delay(0.3))
    c1 = c.send(ApiKey.METADATA, 12, {"topics": []})           # dropped
    t0 = time.monotonic()
    c2 = c.send(ApiKey.API_VERSIONS, 3, {"client_software_name": "r", "client_software_version": "1"})
    c3 = c.send(ApiKey.METADATA, 12, {"topics": []})           # pipelined behind the delayed one
    got2, _ = decode_response(ApiKey.API_VERSIONS, 3, c.recv_frame())
    assert time.monotonic() - t0 >= 0.28
    got3, _ = decode_response(ApiKey.METADATA, 12, c.recv_frame())
    assert (got2, got3) == (c2, c3) and c1 not in (got2, got3)


def test_pipelined_requests_answered_in_order(fb, raw):
    c = raw()
    fb.script.on(ApiKey.METADATA, delay(0.05), times=3)
    sent = [c.send(ApiKey.METADATA if i % 2 else ApiKey.API_VERSIONS, 12 if i % 2 else 3,
                   {"topics": []} if i % 2 else {"client_software_name": "r", "client_software_version": "1"})
            for i in range(8)]
    got = []
    for i in range(8):
        api, ver = (ApiKey.METADATA, 12) if i % 2 else (ApiKey.API_VERSIONS, 3)
        got.append(decode_response(api, ver, c.recv_frame())[0])
    assert got == sent


def test_slow_read(fb, raw):
    fb.create_topic("slow", 1)
    c = raw()
    fb.script.on(ApiKey.PRODUCE, slow_read(0.05, chunk=16384))
    records = build_batch([b"x" * 1000 for _ in range(200)])     # ~200 KB: >= 12 slow reads
    t0 = time.monotonic()
    resp = c.call(ApiKey.PRODUCE, 9, produce_body("slow", 0, records))
    assert partition_result(resp)["error_code"] == 0
    assert time.monotonic() - t0 >= 0.5
    assert fb.cluster.record_count("slow") == 200


def test_unsupported_api_versions_version_answers_35_in_v0(fb, raw):
    c = raw()
    body = struct.pack(">hhih", 18, 9, 77, 3) + b"raw" + b"\x00\x00\x00\x00"   # ApiVersions v9
    c.sock.sendall(struct.pack(">i", len(body)) + body)
    payload = c.recv_frame()
    corr, err, n = struct.unpack_from(">ihi", payload)
    assert (corr, err, n) == (77, 35, 1)
    assert struct.unpack_from(">hhh", payload, 10) == (18, 0, 3)


def test_garbage_size_closes_connection(fb, raw):
    c = raw()
    c.sock.sendall(struct.pack(">i", -5))
    assert c.read_until_eof() == b""
    assert fb.protocol_errors and "bad request size -5" in fb.protocol_errors[-1][1]


def test_set_down_and_up(fb, raw):
    c = raw()
    assert c.call(ApiKey.METADATA, 12, {"topics": []})
    fb.set_down()
    assert c.read_until_eof() == b""                     # existing connection dropped
    c2 = raw()                                           # a new one is accepted, then closed at once
    assert c2.read_until_eof() == b""
    fb.set_up()
    assert raw().call(ApiKey.METADATA, 12, {"topics": []})["brokers"][0]["node_id"] == fb.node_id


# ------------------------------------------------------------- log, offsets and idempotence rules
def test_acks_zero_has_no_response(fb, raw):
    fb.create_topic("fire", 1)
    c = raw()
    c.send(ApiKey.PRODUCE, 9, produce_body("fire", 0, build_batch([b"a", b"b"]), acks=0))
    corr = c.send(ApiKey.METADATA, 12, {"topics": []})
    got, _ = decode_response(ApiKey.METADATA, 12, c.recv_frame())
    assert got == corr                                   # the next frame is the Metadata answer
    assert fb.cluster.record_count("fire") == 2


def test_list_offsets(fb, raw):
    fb.create_topic("lo", 1)
    c = raw()
    for base in (0, 3):
        r = c.call(ApiKey.PRODUCE, 9, produce_body("lo", 0, build_batch([b"a", b"b", b"c"], timestamp=1000 + base * 10)))
        assert partition_result(r)["error_code"] == 0 and partition_result(r)["base_offset"] == base

    def lookup(ts):
        body = {"replica_id": -1, "isolation_level": 0,
                "topics": [{"name": "lo", "partitions": [{"partition_index": 0, "timestamp": ts}]}]}
        p = c.call(ApiKey.LIST_OFFSETS, 7, body)["topics"][0]["partitions"][0]
        assert p["error_code"] == 0
        return p["offset"], p["timestamp"]
    assert lookup(-1)[0] == 6                 # latest = log end
    assert lookup(-2)[0] == 0                 # earliest
    assert lookup(1001) == (1, 1001)          # first record with timestamp >= 1001
    assert lookup(1030) == (3, 1030)
    assert lookup(-3) == (5, 1032)            # max timestamp
    assert lookup(5000) == (-1, -1)


def test_corrupt_batch_is_rejected(fb, raw):
    fb.create_topic("crc", 1)
    c = raw()
    bad = bytearray(build_batch([b"payload"]))
    bad[-1] ^= 0xFF
    r = c.call(ApiKey.PRODUCE, 9, produce_body("crc", 0, bytes(bad)))
    assert partition_result(r)["error_code"] == CORRUPT_MESSAGE
    r = c.call(ApiKey.PRODUCE, 9, produce_body("nope", 5, build_batch([b"x"])))
    assert partition_result(r)["error_code"] == 3            # UNKNOWN_TOPIC_OR_PARTITION
    assert fb.cluster.record_count("crc") == 0


@pytest.mark.parametrize("mode", ["offset", "error"])
def test_idempotence_duplicates_and_gaps(no_leaks, mode):
    with FaultBroker(Cluster(duplicate_mode=mode)) as b:
        b.create_topic("seq", 1)
        c = RawClient(b)
        try:
            pid = c.call(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1000})
            assert pid["error_code"] == 0
            producer_id, epoch = pid["producer_id"], pid["producer_epoch"]

            def send(seq, n=2):
                r = c.call(ApiKey.PRODUCE, 9, produce_body(
                    "seq", 0, build_batch([b"v"] * n, producer_id, epoch, seq)))
                pr = partition_result(r)
                return pr["error_code"], pr["base_offset"]

            assert send(0) == (0, 0)
            assert send(2) == (0, 2)
            dup = send(2)                                  # a retry of the batch above
            assert dup == ((0, 2) if mode == "offset" else (DUPLICATE_SEQUENCE_NUMBER, -1))
            assert send(7)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER   # gap: 4 expected
            assert send(4) == (0, 4)
            assert b.cluster.record_count("seq") == 6      # duplicates and gaps stored nothing
            stored = b.batches("seq", 0)
            assert [(s.producer_id, s.base_sequence) for s in stored] == [(producer_id, 0), (producer_id, 2),
                                                                         (producer_id, 4)]
        finally:
            c.close()


def test_close_joins_all_threads():
    b = FaultBroker(num_processors=3, num_handlers=4)
    names = [t.name for t in b.threads]
    assert len(names) == 1 + 3 + 4 and all(t.is_alive() for t in b.threads)
    c = RawClient(b)
    assert c.call(ApiKey.METADATA, 12, {"topics": []})
    b.close()
    assert not any(t.is_alive() for t in b.threads)
    assert c.read_until_eof() == b""          # client connections closed by the processors
    c.close()
    with pytest.raises(ConnectionRefusedError):       # the listening socket is closed too
        socket.create_connection((b.host, b.port), timeout=1).close()


def test_connections_spread_round_robin(fb, raw):
    clients = [raw() for _ in range(4)]
    for c in clients:
        assert c.call(ApiKey.METADATA, 12, {"topics": []})
    per_processor = [len(p.conns) for p in fb.processors]
    assert per_processor == [2, 2]
