"""fastkafka.protocol against real brokers (Apache Kafka, noida-db and tansu), over a blocking socket.

The brokers are the session's brokers of every kind, through the ``broker`` fixture of
tests/conftest.py (started and stopped like every other broker of the suite). The tests negotiate
versions with ApiVersions and then speak Metadata, CreateTopics, Produce (a hand-built RecordBatch
v2), ListOffsets, InitProducerId and DeleteTopics at the highest version both sides support,
decoding every reply with the codec.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid

import crc32c
import pytest

from fastkafka import protocol as P
from fastkafka.errors import error_for_code
from fastkafka.protocol import ApiKey, codec

LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15

class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.corr = 0
        self.versions = {}

    def close(self):
        self.sock.close()

    def _recv_exact(self, n):
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "broker closed the connection"
            out += chunk
        return bytes(out)

    def send_raw(self, frame_parts):
        self.sock.sendmsg(frame_parts)  # the gathered write the producer uses
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def call(self, api, body, version=None):
        if version is None:
            version = P.pick_version(api, *self.versions[api])
        self.corr += 1
        frame = P.encode_request(api, version, self.corr, "fastkafka-wire-test", body)
        total = sum(memoryview(p).nbytes for p in frame)
        assert struct.unpack(">i", bytes(frame[0][:4]))[0] == total - 4
        payload = self.send_raw(frame)
        corr, decoded = P.decode_response(api, version, payload)
        assert corr == self.corr
        return version, decoded

    def negotiate(self):
        _, body = self.call(ApiKey.API_VERSIONS, {"client_software_name": "fastkafka",
                                                  "client_software_version": "0.1.0"}, version=3)
        assert body["error_code"] == 0
        self.versions = {e["api_key"]: (e["min_version"], e["max_version"]) for e in body["api_keys"]}
        return body


@pytest.fixture()
def conn(broker):
    c = Conn(broker.port)
    try:
        yield c
    finally:
        c.close()


def _record_batch(value: bytes, ts: int) -> bytes:
    """One uncompressed RecordBatch v2 with a single record (built here, independent of _wire)."""
    rec = bytearray()
    rec.append(0)  # attributes
    codec.write_varlong(rec, 0)  # timestamp delta
    codec.write_varint(rec, 0)  # offset delta
    codec.write_varint(rec, -1)  # null key
    codec.write_varint(rec, len(value))
    rec += value
    codec.write_varint(rec, 0)  # no headers
    records = bytearray()
    codec.write_varint(records, len(rec))
    records += rec
    after_crc = struct.pack(">hiqqqhii", 0, 0, ts, ts, -1, -1, -1, 1) + bytes(records)
    crc = crc32c.crc32c(after_crc)
    body = struct.pack(">ibI", -1, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(body)) + body


def test_api_versions_v3_and_v0(conn, broker):
    body3 = conn.negotiate()
    keys3 = {e["api_key"]: (e["min_version"], e["max_version"]) for e in body3["api_keys"]}
    # ListTransactions is the admin client's alone (the Spark sink's exactly-once committer asks
    # for it, and says so when a broker lacks it); every other API is the producer's
    for api in ApiKey:
        assert api in keys3 or api is ApiKey.LIST_TRANSACTIONS, f"{broker.kind} does not list {api.name}"
    assert keys3[ApiKey.API_VERSIONS][1] >= 3
    assert isinstance(body3["supported_features"], list) and isinstance(body3["zk_migration_ready"], bool)
    _, body0 = conn.call(ApiKey.API_VERSIONS, {}, version=0)
    assert body0["error_code"] == 0
    assert {e["api_key"]: (e["min_version"], e["max_version"]) for e in body0["api_keys"]} == keys3
    assert body0["throttle_time_ms"] == 0 and body0["supported_features"] == []  # not in v0
    # every API we speak has a common version
    for api in (a for a in ApiKey if a in keys3):
        v = P.pick_version(api, *keys3[api])
        assert P.SUPPORTED_VERSIONS[api][0] <= v <= P.SUPPORTED_VERSIONS[api][1]


def test_api_versions_unsupported_version_fallback(conn, broker):
    """A too-new ApiVersions version gets error 35 in a v0 body; decode_response handles it.

    (noida-db answers 35 as Kafka does; tansu ignores the version and answers normally.)"""
    head = struct.pack(">hhi", 18, 127, 4242) + struct.pack(">h", 4) + b"test" + b"\x00"
    body = b"\x03fk" + b"\x021" + b"\x00"
    payload = conn.send_raw([struct.pack(">i", len(head) + len(body)) + head, body])
    corr, decoded = P.decode_response(ApiKey.API_VERSIONS, 3, payload)
    assert corr == 4242
    if broker.kind == "tansu":
        assert decoded["error_code"] == 0 and decoded["api_keys"]
        return
    assert decoded["error_code"] == 35
    assert isinstance(error_for_code(decoded["error_code"]), P.UnsupportedVersionError)
    entry = [e for e in decoded["api_keys"] if e["api_key"] == ApiKey.API_VERSIONS]
    version = P.pick_version(ApiKey.API_VERSIONS, entry[0]["min_version"], entry[0]["max_version"]) \
        if entry else 0
    assert version >= 0
    # the retry on the same connection works
    conn.corr = 0
    _, again = conn.call(ApiKey.API_VERSIONS, {"client_software_name": "fastkafka",
                                               "client_software_version": "0.1.0"}, version=version)
    assert again["error_code"] == 0 and again["api_keys"]


def test_metadata_create_produce_list_offsets_delete(conn, broker):
    conn.negotiate()
    mv, meta = conn.call(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})
    assert mv == P.pick_version(ApiKey.METADATA, *conn.versions[ApiKey.METADATA])
    assert len(meta["brokers"]) == 1
    node = meta["brokers"][0]
    assert node["host"] == "127.0.0.1" and node["port"] == broker.port

    topic = f"wire-{uuid.uuid4().hex[:10]}"
    _, created = conn.call(ApiKey.CREATE_TOPICS, {
        "topics": [{"name": topic, "num_partitions": 3, "replication_factor": 1,
                    "configs": [{"name": "retention.ms", "value": "3600000"}]}],
        "timeout_ms": 10000})
    assert [(t["name"], t["error_code"]) for t in created["topics"]] == [(topic, 0)]
    _, again = conn.call(ApiKey.CREATE_TOPICS, {"topics": [{"name": topic, "num_partitions": 3,
                                                            "replication_factor": 1}]})
    assert again["topics"][0]["error_code"] == 36  # TOPIC_ALREADY_EXISTS

    _, meta = conn.call(ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    (t,) = meta["topics"]
    assert t["name"] == topic and t["error_code"] == 0
    assert sorted(p["partition_index"] for p in t["partitions"]) == [0, 1, 2]
    assert all(p["leader_id"] == node["node_id"] for p in t["partitions"])

    ts = int(time.time() * 1000)
    batches = [memoryview(_record_batch(b"hello-%d" % i, ts)) for i in range(2)]
    # Apache Kafka lists a new partition's leader before that broker has loaded the partition and
    # answers Produce with NOT_LEADER_OR_FOLLOWER (or LEADER_NOT_AVAILABLE) for a moment: those
    # partitions (nothing was appended) are sent again, as a client would.
    pending = {0: batches[0], 2: [batches[1]]}        # one partition's records as a list of buffers
    parts = {}
    deadline = time.monotonic() + 15
    while pending:
        pv, produced = conn.call(ApiKey.PRODUCE, {
            "acks": -1, "timeout_ms": 10000, "transactional_id": None,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": i, "records": recs} for i, recs in pending.items()]}]})
        (r,) = produced["responses"]
        assert r["name"] == topic
        got = {p["index"]: p for p in r["partition_responses"]}
        assert set(got) == set(pending)
        for i, p in got.items():
            if p["error_code"] in (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE) and time.monotonic() < deadline:
                continue
            assert p["error_code"] == 0, error_for_code(p["error_code"], p["error_message"])
            parts[i] = p
            del pending[i]
        if pending:
            time.sleep(0.05)
    assert set(parts) == {0, 2}
    for p in parts.values():
        assert p["base_offset"] == 0

    # Partition 1 got no Produce: Apache Kafka may still be loading it and answer ListOffsets with
    # NOT_LEADER_OR_FOLLOWER (offset -1) for a moment; asked again, as a client would.
    deadline = time.monotonic() + 15
    while True:
        _, offsets = conn.call(ApiKey.LIST_OFFSETS, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": i, "timestamp": -1} for i in range(3)]}]})
        answers = offsets["topics"][0]["partitions"]
        loading = [p for p in answers if p["error_code"] in (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE)]
        if not loading or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    assert [p["error_code"] for p in answers] == [0, 0, 0]
    latest = {p["partition_index"]: p["offset"] for p in answers}
    assert latest == {0: 1, 1: 0, 2: 1}

    # a fresh Apache Kafka answers COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE for a while
    deadline = time.monotonic() + 30
    while True:
        _, pid = conn.call(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000})
        if pid["error_code"] not in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert pid["error_code"] == 0, error_for_code(pid["error_code"])
    assert pid["producer_id"] >= 0 and pid["producer_epoch"] >= 0

    dv = P.pick_version(ApiKey.DELETE_TOPICS, *conn.versions[ApiKey.DELETE_TOPICS])
    body = {"topics": [{"name": topic}], "timeout_ms": 10000} if dv >= 6 else \
        {"topic_names": [topic], "timeout_ms": 10000}
    _, deleted = conn.call(ApiKey.DELETE_TOPICS, body, version=dv)
    assert [(d["name"], d["error_code"]) for d in deleted["responses"]] == [(topic, 0)]


@pytest.mark.parametrize("metadata_version", [1, 4, 8, 9, 10, 12])
def test_metadata_every_version_family(conn, metadata_version):
    conn.negotiate()
    lo, hi = conn.versions[ApiKey.METADATA]
    assert lo <= metadata_version <= hi
    v, meta = conn.call(ApiKey.METADATA, {"topics": None}, version=metadata_version)
    assert meta["brokers"] and all(b["port"] > 0 for b in meta["brokers"])
    assert meta["controller_id"] >= -1
