"""The compiled Produce codec (fastkafka.protocol.produce_codec) against the generic schema codec.

The generic codec (``protocol.encode_request`` / ``decode_response``) is the reference: for every
Produce version the client sends, the compiled encoder must write the same bytes, and the compiled
decoder must read the same values out of the same frame, or refuse it with CorruptFrameError where
the reference refuses it. Then the sender on top of it, through a fake network client that encodes
and decodes as NetworkClient does.
"""
from __future__ import annotations

import random
import struct
import types

import pytest

from faultbroker.protocol import encode_response
from fastkafka import errors
from sockless import SocklessClient
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.bufferpool import BufferPool
from fastkafka.protocol.produce_codec import ProduceCodec, ProduceResult
from fastkafka.errors import CorruptFrameError, UnsupportedVersionError
from fastkafka.protocol import (SUPPORTED_VERSIONS, ApiKey, codec, decode_response, encode_request,
                                messages)
from fastkafka.protocol.schema import Field as F

CODEC = ProduceCodec()
LO, HI = SUPPORTED_VERSIONS[ApiKey.PRODUCE]
VERSIONS = list(range(LO, HI + 1))


def test_versions_are_those_the_client_sends():
    assert (CODEC.min_version, CODEC.max_version) == (LO, HI) == (3, 11)


# ===================================================================================== requests
def nested(transactional_id, acks, timeout_ms, parts) -> dict:
    """The generic codec's body for the compact body: partitions grouped by topic, in the order
    each topic first appears (what the sender's dict grouping made)."""
    topics: dict = {}
    for topic, partition, records in parts:
        topics.setdefault(topic, []).append({"index": partition, "records": records})
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}


def as_bytes(frame) -> list:
    return [bytes(p) for p in frame]


BIG = memoryview(bytes(range(256)) * 4096)          # 1 MiB
PARTS = {
    "one": [("t", 0, memoryview(b"batch-0"))],
    "several topics, interleaved": [
        ("orders", 0, memoryview(b"a" * 70)), ("payments", 3, memoryview(b"b" * 10)),
        ("orders", 7, memoryview(b"c" * 300)), ("payments", 1, b"d"), ("audit", 2, bytearray(b"e" * 5))],
    "empty and null records": [("t", 0, b""), ("t", 1, None), ("u", 2, memoryview(b"")), ("t", 3, b"x")],
    "large batch": [("big", 0, BIG), ("big", 1, memoryview(b"small"))],
    "unicode topic names": [("topic-é", 0, b"1"), ("主题", 1, b"22"), ("topic-é", 2, b"333"),
                            ("🙂" * 40, 0, b"4444")],
    "records as a list of buffers": [("t", 0, [b"ab", b"", memoryview(b"cd")]), ("t", 1, (b"ef",)),
                                     ("t", 2, [])],
    "no partitions": [],
    "equal topics that are different str objects": [("".join(["to", "pic"]), 0, b"1"),
                                                    ("".join(["top", "ic"]), 1, b"2")],
    "many partitions": [(f"t{i % 7}", i, memoryview(b"r%d" % i)) for i in range(300)],
}


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_equals_generic_encoder(version):
    for case, parts in sorted(PARTS.items()):
        for transactional_id in (None, "txn-1", "trans-ü"):
            for acks in (0, 1, -1):
                body = (transactional_id, acks, 30000, parts)
                got = CODEC.encode(version, 123456, "client-é", body)
                want = encode_request(ApiKey.PRODUCE, version, 123456, "client-é", nested(*body))
                assert as_bytes(got) == as_bytes(want), (case, transactional_id, acks)
                # the same element boundaries: glue (bytes) where the reference has glue
                assert [type(p) for p in got] == [type(p) for p in want], case
                size = struct.unpack_from(">i", got[0])[0]
                assert size == sum(len(p) for p in as_bytes(got)) - 4


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_client_id_forms(version):
    body = (None, 1, 1500, [("t", 0, b"x")])
    for client_id in (None, "", "app", b"raw-bytes"):
        got = CODEC.encode(version, -7, client_id, body)
        assert as_bytes(got) == as_bytes(encode_request(ApiKey.PRODUCE, version, -7, client_id, nested(*body)))


def test_records_go_by_reference():
    a, b, c = memoryview(bytearray(b"A" * 50)), bytes(b"B" * 20), bytearray(b"C" * 9)
    parts = [("t", 0, a), ("u", 1, b), ("t", 2, [c, b""])]
    for version in VERSIONS:
        frame = CODEC.encode(version, 1, "c", (None, -1, 100, parts))
        # topic t (partitions 0 and 2) first, then u: a, c, b
        externals = [p for p in frame if p is a or p is b or p is c]
        assert len(externals) == 3
        assert externals[0] is a and externals[1] is c and externals[2] is b
        # only glue was made here: every other element is a small bytes object
        assert all(type(p) is bytes and len(p) < 64 for p in frame if p not in externals)
        assert frame.index(a) == 1


def test_records_are_never_copied_into_glue():
    big = memoryview(b"z" * 100_000)
    frame = CODEC.encode(11, 1, None, (None, -1, 100, [("t", 0, big)]))
    assert frame[1] is big
    assert sum(len(p) for p in frame if p is not big) < 100


def test_encode_errors_name_the_problem():
    ok = (None, -1, 100, [("t", 0, b"x")])
    with pytest.raises(UnsupportedVersionError, match="version 2"):
        CODEC.encode(2, 1, "c", ok)
    with pytest.raises(UnsupportedVersionError, match="version 12"):
        CODEC.encode(12, 1, "c", ok)
    with pytest.raises(TypeError, match="tuple"):
        CODEC.encode(9, 1, "c", {"acks": -1})
    with pytest.raises(TypeError, match="parts"):
        CODEC.encode(9, 1, "c", (None, -1, 100, ("t", 0, b"x")))
    with pytest.raises(TypeError, match=r"parts\[0\]"):
        CODEC.encode(9, 1, "c", (None, -1, 100, [("t", 0)]))
    with pytest.raises(TypeError, match="topic must be a str"):
        CODEC.encode(9, 1, "c", (None, -1, 100, [(b"t", 0, b"x")]))
    with pytest.raises(ValueError, match="acks"):
        CODEC.encode(9, 1, "c", (None, 40000, 100, [("t", 0, b"x")]))
    with pytest.raises(ValueError, match="partition"):
        CODEC.encode(9, 1, "c", (None, -1, 100, [("t", 2**31, b"x")]))
    with pytest.raises(TypeError, match="partition"):
        CODEC.encode(9, 1, "c", (None, -1, 100, [("t", "0", b"x")]))
    with pytest.raises(TypeError, match="records"):
        CODEC.encode(9, 1, "c", (None, -1, 100, [("t", 0, "text")]))
    with pytest.raises(TypeError, match="transactional_id"):
        CODEC.encode(9, 1, "c", (5, -1, 100, [("t", 0, b"x")]))
    with pytest.raises(ValueError, match="32767"):
        CODEC.encode(9, 1, "c", (None, -1, 100, [("t" * 40000, 0, b"x")]))


# ==================================================================================== responses
def partition(index, error_code=0, base_offset=0, **kw) -> dict:
    d = {"index": index, "error_code": error_code, "base_offset": base_offset,
         "log_append_time_ms": -1, "log_start_offset": 0}
    d.update(kw)
    return d


RESPONSE = {
    "throttle_time_ms": 250,
    "responses": [
        {"name": "orders", "partition_responses": [
            partition(0, 0, 1000, log_append_time_ms=1_700_000_000_000, log_start_offset=12),
            partition(7, 87, -1, error_message="INVALID_RECORD: one record is bad",
                      record_errors=[{"batch_index": 0, "batch_index_error_message": "bad key"},
                                     {"batch_index": 5, "batch_index_error_message": None}]),
            partition(3, 6, -1, current_leader={"leader_id": 2, "leader_epoch": 17})]},
        {"name": "主题-é", "partition_responses": [partition(1, 45, -1, error_message=None)]},
        {"name": "empty", "partition_responses": []},
        {"name": "orders", "partition_responses": [partition(0, 10, -1, error_message="too big")]},
    ],
    "node_endpoints": [{"node_id": 2, "host": "broker-2.example", "port": 9093, "rack": "r1"},
                       {"node_id": 5, "host": "b5", "port": 19092, "rack": None}],
}


def generic_values(version, frame):
    _, body = decode_response(ApiKey.PRODUCE, version, frame)
    parts = [(t["name"], p["index"], p["error_code"], p["base_offset"], p["log_append_time_ms"],
              p["log_start_offset"], p["error_message"],
              [(r["batch_index"], r["batch_index_error_message"]) for r in p["record_errors"]],
              p["current_leader"]["leader_id"], p["current_leader"]["leader_epoch"])
             for t in body["responses"] for p in t["partition_responses"]]
    nodes = [(e["node_id"], e["host"], e["port"], e["rack"]) for e in body["node_endpoints"]]
    return body["throttle_time_ms"], parts, nodes


def compiled_values(version, frame):
    r = CODEC.decode(version, frame)
    parts = [(p.topic, p.partition, p.error_code, p.base_offset, p.log_append_time_ms,
              p.log_start_offset, p.error_message, list(p.record_errors), p.leader_id, p.leader_epoch)
             for p in r.partitions]
    return r.throttle_time_ms, parts, list(r.node_endpoints)


def response_frame(version, body=RESPONSE, correlation_id=77) -> bytes:
    return encode_response(ApiKey.PRODUCE, version, correlation_id, body)[4:]


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_equals_generic_decoder(version):
    frame = response_frame(version)
    got = compiled_values(version, frame)
    assert got == generic_values(version, frame)
    throttle, parts, nodes = got
    assert throttle == 250
    assert len(parts) == 5
    assert parts[0][:5] == ("orders", 0, 0, 1000, 1_700_000_000_000)
    assert parts[0][5] == (12 if version >= 5 else -1)
    assert parts[3][0] == "主题-é"
    if version >= 8:
        assert parts[1][6:8] == ("INVALID_RECORD: one record is bad", [(0, "bad key"), (5, None)])
    else:
        assert parts[1][6:8] == (None, [])
    if version >= 10:
        assert parts[2][8:] == (2, 17)
        assert nodes == [(2, "broker-2.example", 9093, "r1"), (5, "b5", 19092, None)]
    else:
        assert parts[2][8:] == (-1, -1)
        assert nodes == []
    r = CODEC.decode(version, frame)
    assert r.correlation_id == 77
    assert isinstance(r, ProduceResult) and len(r) == 5
    # what the network layer reads for KIP-219 throttling
    assert getattr(r, "throttle_time_ms", 0) == 250


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_reads_any_buffer_in_place(version):
    frame = response_frame(version)
    want = compiled_values(version, frame)
    assert compiled_values(version, memoryview(frame)) == want
    assert compiled_values(version, bytearray(frame)) == want
    # trailing bytes are ignored, as decode_response ignores them
    assert compiled_values(version, frame + b"\x00\x01\x02") == want


@pytest.mark.parametrize("version", VERSIONS)
def test_lookup_by_topic_partition(version):
    r = CODEC.decode(version, response_frame(version))
    # orders-0 is answered twice: the last answer counts, as with the dict the sender used to build
    assert r.get(("orders", 0)).error_code == 10
    assert r.get(("orders", 7)).error_code == 87
    assert r.get(("主题-é", 1)).error_code == 45
    assert r.get(("orders", 1)) is None
    assert r.get(("nope", 0), "default") == "default"


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_extremes(version):
    body = {"throttle_time_ms": -1, "responses": [{"name": "", "partition_responses": [
        partition(2**31 - 1, -1, 2**63 - 1, log_append_time_ms=-2**63, log_start_offset=2**63 - 1,
                  error_message="", record_errors=[{"batch_index": -2**31, "batch_index_error_message": ""}],
                  current_leader={"leader_id": -2**31, "leader_epoch": 2**31 - 1}),
        partition(-2**31, 32767, -2**63)]}]}
    frame = response_frame(version, body, correlation_id=-2**31)
    assert compiled_values(version, frame) == generic_values(version, frame)
    assert CODEC.decode(version, frame).correlation_id == -2**31


# Unknown tagged fields at every level (a newer broker's): the compiled decoder skips them like the
# generic one. Written with the generic encoder from an extended copy of the response schema.
def _extended_response_fields():
    def extend(fields, extra):
        return [F(f.name, f.type, _vs(f.versions), nullable=_vs(f.nullable), default=f.default, tag=f.tag,
                  fields=extend(f.fields, extra.get(f.name, {})) if f.fields else None)
                for f in fields] + extra.get(None, [])
    extra = {
        None: [F("future_body", "bytes", "9+", tag=7, default=b"")],
        "responses": {None: [F("future_topic", "string", "9+", tag=3, default="")],
                      "partition_responses": {
                          None: [F("future_partition", "int64", "9+", tag=1, default=0),
                                 F("future_partition_2", "bytes", "9+", tag=200, default=b"")],
                          "current_leader": {None: [F("future_leader", "int32", "10+", tag=4, default=0)]},
                          "record_errors": {None: [F("future_error", "int8", "9+", tag=2, default=0)]}}},
        "node_endpoints": {None: [F("future_node", "string", "10+", tag=9, default="")]},
    }
    return extend(messages.PRODUCE_RESPONSE.fields, extra)


def _vs(rng):
    if rng is None:
        return None
    lo, hi = rng
    return f"{lo}+" if hi >= 1 << 30 else f"{lo}-{hi}"


def _unknown_tags_frame(version):
    body = {
        "throttle_time_ms": 9, "future_body": b"\x01" * 300,
        "responses": [{"name": "t", "future_topic": "later", "partition_responses": [
            partition(0, 87, 55, error_message="m", future_partition=2**40, future_partition_2=b"\xff" * 130,
                      record_errors=[{"batch_index": 1, "batch_index_error_message": "x", "future_error": 3}],
                      current_leader={"leader_id": 4, "leader_epoch": 5, "future_leader": 6})]}],
        "node_endpoints": [{"node_id": 4, "host": "h", "port": 1, "rack": None, "future_node": "n"}],
    }
    data = codec.encode_struct(_extended_response_fields(), version, True, body)
    # response header v1 with two unknown tagged fields of its own
    header = struct.pack(">i", 5) + bytes([2, 0, 1, 0xAA, 6, 2, 0xBB, 0xCC])
    return header + data


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 9])
def test_unknown_tagged_fields_are_skipped(version):
    frame = _unknown_tags_frame(version)
    got = compiled_values(version, frame)
    assert got == generic_values(version, frame)
    assert got[0] == 9
    assert got[1][0][:3] == ("t", 0, 87)
    assert got[1][0][7] == [(1, "x")]
    if version >= 10:
        assert got[1][0][8:] == (4, 5)
        assert got[2] == [(4, "h", 1, None)]


# ================================================================================ corrupt input
def _decoded_or_corrupt(fn, version, frame):
    try:
        return fn(version, frame)
    except CorruptFrameError:
        return CorruptFrameError


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_at_every_cut_point(version):
    frames = [response_frame(version)]
    if version >= 9:
        frames.append(_unknown_tags_frame(version))
    for frame in frames:
        for cut in range(len(frame)):
            with pytest.raises(CorruptFrameError, match=f"PRODUCE \\(0\\) v{version} response"):
                CODEC.decode(version, frame[:cut])
            # the reference refuses the same frames
            with pytest.raises(CorruptFrameError):
                decode_response(ApiKey.PRODUCE, version, frame[:cut])


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_frames_decode_like_the_reference(version):
    """Bytes overwritten at random in valid frames: the compiled decoder refuses exactly the frames
    the reference refuses, and reads the same values from the others (no misparse)."""
    rnd = random.Random(version)
    frames = [response_frame(version)]
    if version >= 9:
        frames.append(_unknown_tags_frame(version))
    outcomes = {True: 0, False: 0}
    for _ in range(1500):
        frame = bytearray(rnd.choice(frames))
        for _ in range(rnd.choice((1, 1, 2, 3))):
            i = rnd.randrange(len(frame))
            frame[i] = rnd.choice((0, 1, 0x7F, 0x80, 0xFF, rnd.randrange(256), frame[i] ^ 1))
        frame = bytes(frame)
        got = _decoded_or_corrupt(compiled_values, version, frame)
        want = _decoded_or_corrupt(generic_values, version, frame)
        assert got == want, frame.hex()
        outcomes[got is CorruptFrameError] += 1
    assert outcomes[True] > 100 and outcomes[False] > 100   # both kinds were exercised


@pytest.mark.parametrize("version", VERSIONS)
def test_garbage_is_refused_not_crashed_on(version):
    rnd = random.Random(1000 + version)
    for _ in range(2000):
        frame = bytes(rnd.randrange(256) for _ in range(rnd.randrange(60)))
        got = _decoded_or_corrupt(compiled_values, version, frame)
        assert got == _decoded_or_corrupt(generic_values, version, frame), frame.hex()


@pytest.mark.parametrize("version", VERSIONS)
def test_counts_from_garbage_size_nothing(version):
    """Counts claiming billions of elements are refused against the bytes left, not allocated."""
    flexible = version >= 9
    head = struct.pack(">i", 1) + (b"\x00" if flexible else b"")
    huge_count = b"\xff\xff\xff\xff\x0f" if flexible else struct.pack(">i", 2**31 - 1)
    frames = [
        head + huge_count + b"\x00" * 32,                                  # topics
        head + (b"\x02\x02t" if flexible else struct.pack(">ih", 1, 1) + b"t") + huge_count + b"\x00" * 32,
        head + (b"\x02\xff\xff\xff\xff\x0f" if flexible else struct.pack(">ih", 1, 30000)) + b"t" * 20,
        head + (b"\x02\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01" if flexible
                else struct.pack(">ih", 1, -2)) + b"t" * 20,   # an over-long varint / a bad length
    ]
    for frame in frames:
        with pytest.raises(CorruptFrameError):
            CODEC.decode(version, frame)
    with pytest.raises(CorruptFrameError):
        CODEC.decode(version, b"")
    if flexible:
        # a header tagged field claiming more bytes than the frame has
        with pytest.raises(CorruptFrameError, match="tagged field"):
            CODEC.decode(version, struct.pack(">i", 1) + b"\x01\x00\xff\xff\xff\xff\x07")


def test_tagged_current_leader_must_fill_its_size():
    body = {"throttle_time_ms": 0, "responses": [{"name": "t", "partition_responses": [
        partition(0, 6, -1, current_leader={"leader_id": 1, "leader_epoch": 2})]}]}
    frame = bytearray(response_frame(10, body))
    # the partition's tagged section: count 1, tag 0, size 9 (8 bytes of ints + empty tags)
    at = bytes(frame).index(bytes([1, 0, 9]))
    frame[at + 2] = 10   # claims one more byte than current_leader uses
    with pytest.raises(CorruptFrameError, match="current_leader"):
        CODEC.decode(10, bytes(frame))
    with pytest.raises(CorruptFrameError):
        decode_response(ApiKey.PRODUCE, 10, bytes(frame))
    # in v9 the same tag is unknown, skipped by size
    assert CODEC.decode(9, response_frame(9, body)).partitions[0].leader_id == -1


def test_invalid_utf8_is_corrupt():
    frame = bytearray(response_frame(3, {"throttle_time_ms": 0, "responses": [
        {"name": "tt", "partition_responses": [partition(0)]}]}))
    at = bytes(frame).index(b"tt")
    frame[at] = 0xFF
    with pytest.raises(CorruptFrameError, match="UTF-8"):
        CODEC.decode(3, bytes(frame))


def test_decode_version_checked():
    with pytest.raises(UnsupportedVersionError):
        CODEC.decode(2, response_frame(3))
    with pytest.raises(UnsupportedVersionError):
        CODEC.decode(12, response_frame(11))


# =================================================================================== the sender
class Cluster:
    def __init__(self, leaders):
        self.leaders = leaders

    def leader_for(self, topic, partition):
        return self.leaders.get((topic, partition), -1)


@pytest.fixture
def sender_rig():
    from fastkafka._producer.sender import Sender
    made = []

    def make(version=9, acks=-1, retries=0, leaders=None):
        leaders = leaders or {("a", 0): 1, ("b", 1): 1, ("a", 2): 1}
        cfg = types.SimpleNamespace(
            transactional_id=None, enable_idempotence=False, acks=acks, compression_code=0,
            retry_backoff_ms=100, retry_backoff_max_ms=1000, on_error=None, request_timeout_ms=30000,
            delivery_timeout_ms=120000, retries=retries, max_request_size=1 << 20, gil_free_io=False)
        acc = RecordAccumulator(16384, 0, None, 0, 100, 120000, BufferPool(1 << 20, 16384), False)
        client = SocklessClient(version, response_frame)
        metadata = types.SimpleNamespace(cluster=Cluster(leaders), request_update=lambda: None)
        s = Sender(cfg, acc, metadata, client.net, clock=lambda: 20)
        futures = {tp: acc.append(tp[0], tp[1], 1000, None, b"v%d" % tp[1], None, None, 0, 0)
                   for tp in leaders}
        batches = acc.drain(metadata.cluster, [1], 1 << 20, 10)[1]
        s._send_produce(1, batches, 10)
        made.append((acc, batches))
        return s, client, futures, batches

    yield make
    for acc, batches in made:
        for b in acc.abort_undrained():
            b.complete(-1, -1, errors.ProducerClosedError("test over"))
            acc.deallocate(b)
        acc.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_sender_request_is_the_nested_body_encoded(sender_rig, version):
    s, client, futures, batches = sender_rig(version)
    (frame,), tokens = client.take()
    assert tokens == []                  # awaits its answer in the in-flight ring
    assert client.conn.produce_count == 1
    assert client.conn.produce_batches() == sorted(batches, key=lambda b: b.topic)   # by topic
    corr = struct.unpack(">i", frame[4:8])[0]
    parts = [(b.topic, b.partition, b.builder.buffer()) for b in batches]
    want = encode_request(ApiKey.PRODUCE, version, corr, "unit", nested(None, -1, 30000, parts))
    assert frame == b"".join(as_bytes(want))[4:]
    client.answer({"throttle_time_ms": 0, "responses": [
        {"name": "a", "partition_responses": [partition(0, base_offset=5), partition(2, base_offset=9)]},
        {"name": "b", "partition_responses": [partition(1, base_offset=7)]}]})
    assert futures[("a", 0)].get(0).offset == 5
    assert futures[("a", 2)].get(0).offset == 9
    assert futures[("b", 1)].get(0).offset == 7


@pytest.mark.parametrize("version", [8, 9, 11])
def test_sender_error_message_carries_record_errors(sender_rig, version):
    s, client, futures, batches = sender_rig(version)
    client.answer({"throttle_time_ms": 0, "responses": [
        {"name": "a", "partition_responses": [
            partition(0, 87, -1, error_message="bad batch",
                      record_errors=[{"batch_index": 0, "batch_index_error_message": "bad key"},
                                     {"batch_index": 3, "batch_index_error_message": None}]),
            partition(2, 87, -1, record_errors=[{"batch_index": 1, "batch_index_error_message": "x"}])]},
        {"name": "b", "partition_responses": [partition(1, 87, -1, error_message="plain")]}]})
    e0 = futures[("a", 0)].exception(0)
    assert isinstance(e0, errors.BrokerInvalidRecordError)
    assert e0.message == "bad batch record 0: bad key; record 3: None"
    assert futures[("a", 2)].exception(0).message == " record 1: x"
    assert futures[("b", 1)].exception(0).message == "plain"


def test_sender_partition_missing_from_the_answer_fails_or_retries(sender_rig):
    s, client, futures, batches = sender_rig(9, retries=0)
    client.answer({"throttle_time_ms": 0, "responses": [
        {"name": "a", "partition_responses": [partition(0, base_offset=1), partition(0, 6, -1)]}]})
    # a-0 answered twice: the last answer (NOT_LEADER_OR_FOLLOWER, retriable but no retries left)
    assert isinstance(futures[("a", 0)].exception(0), errors.NotLeaderOrFollowerError)
    e = futures[("a", 2)].exception(0)
    assert type(e) is errors.KafkaError and "no result for a-2" in e.message
    assert "no result for b-1" in futures[("b", 1)].exception(0).message


def test_sender_partition_missing_from_the_answer_is_not_retried(sender_rig):
    # The error for a partition the broker left out is a plain KafkaError (not retriable): it
    # fails even with retries left, as before the compiled codec.
    s, client, futures, batches = sender_rig(9, retries=3)
    client.answer({"throttle_time_ms": 0, "responses": [
        {"name": "b", "partition_responses": [partition(1, base_offset=3), partition(1, 6, -1)]},
        {"name": "b", "partition_responses": [partition(1, base_offset=4)]}]})
    assert futures[("b", 1)].get(0).offset == 4     # answered three times: the last answer counts
    assert "no result for a-0" in futures[("a", 0)].exception(0).message
    assert "no result for a-2" in futures[("a", 2)].exception(0).message
    assert s.stats["retries"] == 0


def test_sender_retries_a_retriable_partition_error(sender_rig):
    s, client, futures, batches = sender_rig(11, retries=3)
    client.answer({"throttle_time_ms": 0, "responses": [
        {"name": "a", "partition_responses": [partition(0, 6, -1), partition(2, base_offset=8)]},
        {"name": "b", "partition_responses": [partition(1, 46, 3)]}]})   # DUPLICATE_SEQUENCE_NUMBER
    assert not futures[("a", 0)].done() and s.acc.queued_batches("a", 0) == 1
    assert s.stats["retries"] == 1
    assert futures[("a", 2)].get(0).offset == 8
    assert futures[("b", 1)].get(0).offset == 3


def test_sender_acks_zero_completes_without_an_answer(sender_rig):
    s, client, futures, batches = sender_rig(7, acks=0)
    assert client.conn.produce_count == 0 and client.conn.unacked_writes == 1
    (frame,), tokens = client.take()
    corr = struct.unpack(">i", frame[4:8])[0]
    parts = [(b.topic, b.partition, b.builder.buffer()) for b in batches]
    assert frame == b"".join(as_bytes(encode_request(ApiKey.PRODUCE, 7, corr, "unit",
                                                     nested(None, 0, 30000, parts))))[4:]
    assert not any(f.done() for f in futures.values())
    (token,) = client.conn.written(tokens, 0)   # what NetworkClient does once the bytes are written
    token.handler = client.net.produce_handler
    token(None, None)
    assert all(f.get(0).offset == -1 for f in futures.values())


def test_error_codes_come_from_the_error_table():
    from fastkafka._producer import sender, transactions
    assert sender.MESSAGE_TOO_LARGE == errors.MessageTooLargeError.code == 10
    assert sender.RECORD_LIST_TOO_LARGE == errors.RecordListTooLargeError.code == 18
    assert sender.PRODUCER_FENCED == errors.ProducerFencedError.code == 90
    assert sender.OUT_OF_ORDER_SEQUENCE_NUMBER == 45 and sender.DUPLICATE_SEQUENCE_NUMBER == 46
    assert sender.UNKNOWN_PRODUCER_ID == 59 and sender.INVALID_PRODUCER_EPOCH == 47
    for name in ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
                 "CONCURRENT_TRANSACTIONS", "OPERATION_NOT_ATTEMPTED", "UNKNOWN_TOPIC_OR_PARTITION",
                 "REQUEST_TIMED_OUT", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE",
                 "INVALID_TRANSACTION_TIMEOUT", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                 "GROUP_AUTHORIZATION_FAILED", "PRODUCER_FENCED", "UNSUPPORTED_VERSION",
                 "UNSUPPORTED_FOR_MESSAGE_FORMAT"):
        code = getattr(transactions, name)
        assert errors.ERROR_TABLE[code][0] == name
