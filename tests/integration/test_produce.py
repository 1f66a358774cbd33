"""End-to-end produce tests against the real brokers (noida = faithful, tansu = lenient).

Every produced record is read back with an independent reader (confluent-kafka's Consumer, CRCs
checked) and compared byte for byte: keys, values, headers, timestamps, per-partition order, and the
partition/offset the producer reported in its RecordMetadata.
"""
from __future__ import annotations

import random
import time
import uuid

import pytest

from brokers import read_back, unique_name
from fastkafka import Producer
from fastkafka._wire import compression
from fastkafka.errors import (InvalidRecordError, KafkaError, ProducerClosedError, RecordTooLargeError,
                              UnknownPartitionError, error_class_for_code)

pytestmark = pytest.mark.broker

# Explicit timestamps, but recent ones: noida applies Kafka's default retention (7 days) to record
# timestamps and deletes older records within seconds, which would look like lost data.
BASE_TS = (time.time_ns() // 1_000_000 // 1000) * 1000 - 3_600_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
NPART = 6

# Full codec x acks matrix on Apache Kafka (the reference) and tansu; on noida (a stand-in that
# validates CRCs, sizes and sequences) every codec with acks=all plus acks 0 and 1 with a few codecs.
MATRIX = ([("kafka", c, a) for c in CODECS for a in (0, 1, "all")]
          + [("tansu", c, a) for c in CODECS for a in (0, 1, "all")]
          + [("noida", c, "all") for c in CODECS]
          + [("noida", "none", 0), ("noida", "lz4", 1), ("noida", "gzip", 1), ("noida", "zstd", 0)])


def _broker(request, kind):
    b = request.getfixturevalue(f"{kind}_broker")
    assert b.running, b.last_output()
    return b


def _topic(broker, partitions=NPART, prefix="p"):
    name = unique_name(prefix)
    broker.create_topic(name, partitions)
    return name


def make_records(n: int, seed: int = 0) -> list[dict]:
    """A varied record mix. Header ``i`` (first) carries the record's index so every record, even
    one with a null or empty value, can be identified when read back."""
    rnd = random.Random(seed)
    recs = []
    for i in range(n):
        if i % 5 == 0:
            key = None
        elif i % 13 == 1:
            key = b""
        else:
            key = b"key-%d" % (i % 40)           # repeated keys: several records per key
        kind = i % 9
        if kind == 3:
            value = None
        elif kind == 4:
            value = b""
        elif kind == 5:
            value = bytes([i % 256]) * rnd.randrange(50, 3000)   # compressible
        else:
            value = rnd.randbytes(rnd.randrange(1, 400))
        headers = [("i", b"%d" % i)]
        if i % 3 == 0:
            headers.append(("null-header", None))
        if i % 4 == 1:
            headers += [("bin", bytes(range(256))[i % 200:]), ("ünïcode", b""), ("dup", b"1"), ("dup", b"2")]
        partition = (i * 7) % NPART if i % 11 == 0 else None
        recs.append({"key": key, "value": value, "headers": headers, "timestamp_ms": BASE_TS + i * 13,
                     "partition": partition})
    return recs


def _index(msg) -> int:
    assert msg.headers and msg.headers[0][0] == "i", msg.headers
    return int(msg.headers[0][1])


def send_all(producer: Producer, topic: str, recs: list[dict]):
    return [producer.send(topic, r["value"], key=r["key"], partition=r["partition"],
                          timestamp_ms=r["timestamp_ms"], headers=r["headers"]) for r in recs]


def verify(bootstrap: str, topic: str, recs: list[dict], mds, check_offsets: bool, partitions=NPART):
    """Read everything back and compare with what was sent and what the producer reported."""
    got = read_back(bootstrap, topic, partitions, len(recs))
    seen = []
    for part, msgs in got.items():
        indices = [_index(m) for m in msgs]
        # Per-partition order: one thread sent them, so they must appear in send order.
        assert indices == sorted(indices), f"partition {part} out of order: {indices}"
        # Offsets are dense from 0 (a fresh topic).
        assert [m.offset for m in msgs] == list(range(len(msgs)))
        for m, i in zip(msgs, indices):
            r = recs[i]
            assert m.key == r["key"], i
            assert m.value == r["value"], i
            assert m.headers == [(k, v) for k, v in r["headers"]], i
            assert m.timestamp == r["timestamp_ms"] and m.timestamp_type == 1, i   # CreateTime
            if r["partition"] is not None:
                assert part == r["partition"], i
            md = mds[i]
            assert md.topic == topic and md.partition == part, (i, md)
            if check_offsets:
                assert md.offset == m.offset, (i, md.offset, m.offset)
        seen.extend(indices)
    assert sorted(seen) == list(range(len(recs))), "records lost or duplicated"
    return got


@pytest.mark.parametrize("kind,codec,acks", MATRIX, ids=[f"{k}-{c}-acks{a}" for k, c, a in MATRIX])
def test_codec_acks_roundtrip(request, kind, codec, acks):
    broker = _broker(request, kind)
    topic = _topic(broker)
    recs = make_records(240, seed=hash((codec, str(acks))) & 0xFFFF)
    before = compression.counters()
    with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks=acks,
                  linger_ms=2, batch_size=16 * 1024) as p:
        assert p.config.enable_idempotence is (acks == "all")
        futs = send_all(p, topic, recs)
        assert p.flush(30) == 0
        mds = [f.get(10) for f in futs]
        m = p.metrics()
        assert m["records_sent"] == len(recs) and m["errors"] == 0
        if acks != "all":
            assert m["producer_id"] == -1           # no InitProducerId without idempotence
    if codec != "none":
        # every batch was compressed in C (the libraries are on the test machine), none by Python
        after = compression.counters()
        assert compression.in_c(codec), compression.counters()["libraries"]
        assert after["c"][codec]["calls"] - before["c"][codec]["calls"] >= m["batches_sent"] > 0
        assert after["python"][codec] == before["python"][codec]
    for r, md in zip(recs, mds):
        assert md.timestamp == r["timestamp_ms"]
        if acks == 0:
            assert md.offset == -1                  # nothing to report without an ack
        else:
            assert md.offset >= 0
    verify(broker.bootstrap, topic, recs, mds, check_offsets=acks != 0)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_codecs_in_c_on_the_gil_free_turn(kafka_broker, codec):
    """On Apache Kafka, a producer whose codec is compressed in C sends on the GIL-free turn; what it
    sent reads back with CRCs checked."""
    topic = _topic(kafka_broker)
    recs = make_records(600, seed=31)
    before = compression.counters()
    with Producer(bootstrap_servers=kafka_broker.bootstrap, compression_type=codec, linger_ms=2,
                  batch_size=16 * 1024) as p:
        futs = []
        for k in range(0, len(recs), 100):            # in waves: linger deadlines on the I/O thread
            futs += send_all(p, topic, recs[k:k + 100])
            time.sleep(0.02)
        assert p.flush(30) == 0
        mds = [f.get(10) for f in futs]
        m = p.metrics()
        assert m["errors"] == 0
    after = compression.counters()
    assert after["c"][codec]["calls"] - before["c"][codec]["calls"] >= m["batches_sent"] > 0
    assert after["python"][codec] == before["python"][codec]
    verify(kafka_broker.bootstrap, topic, recs, mds, check_offsets=True)
    assert m["gil_free_requests"] > 0


def test_idempotent_default_exactly_once(broker):
    topic = _topic(broker)
    recs = make_records(300, seed=7)
    with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4",
                  batch_size=8 * 1024) as p:
        assert p.config.enable_idempotence is True and p.config.acks == -1
        futs = send_all(p, topic, recs)
        assert p.flush(30) == 0
        mds = [f.get(10) for f in futs]
        m = p.metrics()
        assert m["producer_id"] >= 0 and m["producer_epoch"] >= 0 and m["epoch_bumps"] == 0
        assert m["errors"] == 0 and m["retries"] == 0
    got = verify(broker.bootstrap, topic, recs, mds, check_offsets=True)
    # Exactly once: the producer's offsets per partition are dense, and nothing lies beyond them.
    for part, msgs in got.items():
        mine = sorted(md.offset for md in mds if md.partition == part)
        assert mine == list(range(len(msgs)))
    per_part = {p: len(v) for p, v in got.items()}
    assert _end_offsets(broker.bootstrap, topic, per_part) == per_part


def _end_offsets(bootstrap, topic, expected: dict) -> dict:
    """Records per partition as a consumer sees them, reading until partition EOF *after* at least
    the expected count (an early EOF before the first fetch is not the end): duplicates beyond the
    expected records are counted. By consuming, so valid on tansu (whose ListOffsets is wrong)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError as CKError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eof-" + uuid.uuid4().hex,
                  "enable.partition.eof": True, "enable.auto.commit": False, "log_level": 3,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
    counts = {p: 0 for p in expected}
    done = set()
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in expected])
        for _ in range(120):
            for m in c.consume(10000, 0.5):
                p = m.partition()
                if m.error():
                    assert m.error().code() == CKError._PARTITION_EOF, m.error()
                    if counts[p] >= expected[p]:
                        done.add(p)
                else:
                    counts[p] += 1
                    done.discard(p)
            if len(done) == len(expected):
                return counts
    finally:
        c.close()
    raise AssertionError(f"{topic}: counts {counts}, expected {expected}")


def test_keyed_placement_matches_confluent_murmur2_random(broker):
    from confluent_kafka import Producer as CKProducer

    topic = _topic(broker, prefix="keys")
    keys = [b"user-%d" % i for i in range(280)] + [uuid.UUID(int=i).bytes for i in range(20)]
    reference = {}

    def on_delivery(err, msg):
        assert err is None, err
        reference[msg.key()] = msg.partition()

    ck = CKProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                     "linger.ms": 5, "log_level": 0})
    for k in keys:
        ck.produce(topic, b"ck", key=k, on_delivery=on_delivery)
    assert ck.flush(20) == 0
    assert len(reference) == len(keys)
    assert len(set(reference.values())) == NPART          # the keys do spread over all partitions

    with Producer(bootstrap_servers=broker.bootstrap) as p:
        mds = [f.get(10) for f in [p.send(topic, b"fk", key=k) for k in keys]]
        # send_batch with a key list places keys the same way.
        batch = p.send_batch(topic, [b"fkb"] * len(keys), keys=keys)
        assert batch.get(20) == len(keys)
    mismatches = {k: (reference[k], md.partition) for k, md in zip(keys, mds) if reference[k] != md.partition}
    assert mismatches == {}
    got = read_back(broker.bootstrap, topic, NPART, 3 * len(keys))
    for part, msgs in got.items():
        for m in msgs:
            assert reference[m.key] == part, (m.key, m.value, part)
    assert sum(1 for msgs in got.values() for m in msgs if m.value == b"fkb") == len(keys)


def test_send_batch_lists_and_arrow(broker):
    import pyarrow as pa

    topic = _topic(broker, prefix="batch")
    expected: list[tuple] = []          # (key, value, headers, timestamp)
    hdrs = [("src", b"batch"), ("nul", None)]
    with Producer(bootstrap_servers=broker.bootstrap, compression_type="zstd", batch_size=4096) as p:
        futs = []

        def add(values, keys=None, ts=BASE_TS, headers=None, py_values=None, py_keys=None):
            fut = p.send_batch(topic, values, keys=keys, headers=headers, timestamp_ms=ts)
            vs = py_values if py_values is not None else list(values)
            ks = py_keys if py_keys is not None else (list(keys) if keys is not None else [None] * len(vs))
            for k, v in zip(ks, vs):
                expected.append((k, v, headers or [], ts))
            futs.append((fut, len(vs)))

        # Plain lists: bytes, bytearray, memoryview, None and empty values; keys with None.
        vals = [b"list-%d" % i if i % 6 else None for i in range(120)]
        vals[7] = b""
        vals[8] = bytearray(b"ba")
        vals[9] = memoryview(b"mv")
        add(vals, keys=[None if i % 4 == 0 else b"lk%d" % i for i in range(120)], ts=BASE_TS + 1,
            py_values=[None if v is None else bytes(v) for v in vals], headers=hdrs)
        add([b"x" * 500] * 50, ts=BASE_TS + 2)
        # pyarrow: binary with nulls, large_binary, string, a slice with a non-zero offset, keys array.
        b = pa.array([None if i % 5 == 2 else b"bin-%d" % i for i in range(100)], type=pa.binary())
        add(b, ts=BASE_TS + 3, py_values=b.to_pylist())
        lb = pa.array([b"large-%d" % i for i in range(80)] + [None, b""], type=pa.large_binary())
        add(lb, ts=BASE_TS + 4, py_values=lb.to_pylist(), headers=hdrs)
        s = pa.array(["strïng-%d" % i if i % 7 else None for i in range(90)], type=pa.string())
        add(s, ts=BASE_TS + 5, py_values=[None if x is None else x.encode() for x in s.to_pylist()])
        full = pa.array([b"slice-%d" % i for i in range(200)], type=pa.binary())
        sl = full.slice(37, 60)
        assert sl.offset == 37
        add(sl, ts=BASE_TS + 6, py_values=sl.to_pylist())
        ks = pa.array([None if i % 9 == 0 else "ak-%d" % i for i in range(70)], type=pa.string())
        vs = pa.array([b"keyed-%d" % i for i in range(70)], type=pa.large_binary())
        add(vs, keys=ks, ts=BASE_TS + 7, py_values=vs.to_pylist(),
            py_keys=[None if k is None else k.encode() for k in ks.to_pylist()])
        kslice = pa.array([b"sk-%d" % i for i in range(100)], type=pa.binary()).slice(10, 40)
        vslice = pa.array([b"sv-%d" % i for i in range(100)], type=pa.binary()).slice(50, 40)
        add(vslice, keys=kslice, ts=BASE_TS + 8, py_values=vslice.to_pylist(), py_keys=kslice.to_pylist())
        assert p.flush(30) == 0
        for fut, n in futs:
            assert fut.get(10) == n
            assert fut.done() and fut.delivered == n and fut.failed == 0 and fut.first_error is None
    got = read_back(broker.bootstrap, topic, NPART, len(expected))
    read = sorted(((m.key, m.value, m.headers, m.timestamp) for msgs in got.values() for m in msgs),
                  key=repr)
    want = sorted(((k, v, list(h), ts) for k, v, h, ts in expected), key=repr)
    assert read == want
    # Keyed records of send_batch follow the Java partitioner, like send() does.
    from fastkafka._producer.partitioner import java_partition
    for part, msgs in got.items():
        for m in msgs:
            if m.key is not None:
                assert part == java_partition(m.key, NPART), m.key


def test_bad_records_raise_at_once_and_good_ones_arrive(broker):
    topic = _topic(broker, prefix="bad")
    good = []
    with Producer(bootstrap_servers=broker.bootstrap, max_request_size=100_000, linger_ms=20) as p:
        def ok(i):
            good.append((p.send(topic, b"good-%d" % i, key=b"k%d" % i, headers=[("i", b"%d" % i)],
                                timestamp_ms=BASE_TS + i), i))
        ok(0)
        with pytest.raises(InvalidRecordError):
            p.send(topic, "a str value with a lone surrogate \udc80")   # a str is its UTF-8
        ok(1)
        with pytest.raises(InvalidRecordError):
            p.send(topic, b"v", key=12345)
        with pytest.raises(InvalidRecordError, match="value must be bytes-like") as ei:
            p.send(topic, 3.5)
        assert isinstance(ei.value, TypeError)         # InvalidRecordError is also a TypeError
        ok(2)
        with pytest.raises(UnknownPartitionError):
            p.send(topic, b"v", partition=NPART)
        with pytest.raises(UnknownPartitionError):
            p.send(topic, b"v", partition=1000)
        ok(3)
        # Malformed headers and timestamps are InvalidRecordError too (headers were a bare TypeError,
        # and negative / float timestamps were accepted by send_batch).
        for bad_headers in ([("k", "str \udc80")], [(1, b"x")], ["ab"], "ab", {"k": 5}):
            with pytest.raises(InvalidRecordError):
                p.send(topic, b"v", headers=bad_headers)
        for bad_ts in (-5, 1.5, True):
            with pytest.raises(InvalidRecordError):
                p.send(topic, b"v", timestamp_ms=bad_ts)
            with pytest.raises(InvalidRecordError):
                p.send_batch(topic, [b"v"], timestamp_ms=bad_ts)
        with pytest.raises(InvalidRecordError):
            p.send(topic, b"v", partition=True)
        with pytest.raises(UnknownPartitionError):
            p.send(topic, b"v", partition=-1)
        with pytest.raises(RecordTooLargeError):
            p.send(topic, b"x" * 200_000)
        with pytest.raises(InvalidRecordError):
            p.send_batch(topic, [b"ok", 1.5])
        with pytest.raises(InvalidRecordError):
            p.send_batch(topic, [b"a", b"b"], keys=[b"k"])
        with pytest.raises(InvalidRecordError):
            p.send_batch(topic, [b"a"], headers=[("k", "str \udc80")])
        for i in range(4, 40):
            ok(i)
        assert p.flush(30) == 0
        mds = {i: f.get(10) for f, i in good}
        assert p.metrics()["records_sent"] == 40     # nothing of the rejected calls was queued
    got = read_back(broker.bootstrap, topic, NPART, 40)
    seen = {}
    for part, msgs in got.items():
        for m in msgs:
            i = int(m.headers[0][1])
            assert (m.key, m.value, m.timestamp) == (b"k%d" % i, b"good-%d" % i, BASE_TS + i)
            assert (mds[i].partition, mds[i].offset) == (part, m.offset)
            seen[i] = m
    assert sorted(seen) == list(range(40))


@pytest.mark.parametrize("kind", ["kafka", "noida"])
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_broker_rejects_oversized_record_others_arrive(request, kind, idempotent):
    """Apache Kafka and noida reject a batch over 1,048,588 bytes (the default max.message.bytes)
    with MESSAGE_TOO_LARGE (10): only that record's future fails; records in other batches (other
    partitions, and the same partition later) arrive."""
    broker = _broker(request, kind)
    topic = _topic(broker, prefix="big")
    kwargs = {} if idempotent else {"enable_idempotence": False}
    with Producer(bootstrap_servers=broker.bootstrap, max_request_size=3_000_000, linger_ms=5,
                  **kwargs) as p:
        before = [p.send(topic, b"before-%d" % i, partition=i % NPART) for i in range(30)]
        assert p.flush(30) == 0
        big = p.send(topic, b"B" * 2_000_000, partition=0)
        others = [p.send(topic, b"other-%d" % i, partition=1 + i % (NPART - 1)) for i in range(30)]
        assert p.flush(30) == 0
        err = big.exception(10)
        assert isinstance(err, KafkaError) and err.code == 10, repr(err)
        assert isinstance(err, error_class_for_code(10)) and type(err).__name__ == "MessageTooLargeError"
        with pytest.raises(error_class_for_code(10)):
            big.get(1)
        # The same partition keeps working after the rejection.
        after = [p.send(topic, b"after-%d" % i, partition=0) for i in range(10)]
        assert p.flush(30) == 0
        mds = [f.get(10) for f in before + others + after]
    got = read_back(broker.bootstrap, topic, NPART, len(mds))
    values = {(m.partition, m.offset): m.value for msgs in got.values() for m in msgs}
    assert len(values) == len(mds)
    for md, v in zip(mds, [b"before-%d" % i for i in range(30)] + [b"other-%d" % i for i in range(30)]
                     + [b"after-%d" % i for i in range(10)]):
        assert values[(md.partition, md.offset)] == v
    assert b"B" * 2_000_000 not in values.values()


def test_flush_close_context_manager_metadata(broker):
    topic = _topic(broker, prefix="life")
    p = Producer(bootstrap_servers=broker.bootstrap)
    assert p.partitions_for(topic) == list(range(NPART))
    assert p.flush() == 0                                   # nothing queued
    futs = [p.send(topic, b"v%d" % i, key=b"k%d" % i) for i in range(50)]
    assert p.flush(30) == 0
    assert all(f.done() for f in futs)
    m = p.metrics()
    for key in ("records_sent", "batches_sent", "errors", "retries", "buffer_total_bytes",
                "buffer_available_bytes", "records_queued", "in_flight_batches", "connections",
                "metadata_version", "producer_id", "producer_epoch"):
        assert key in m, key
    assert m["records_sent"] == 50 and m["errors"] == 0 and m["records_queued"] == 0
    assert m["in_flight_batches"] == 0 and m["connections"] >= 1 and m["metadata_version"] >= 1
    assert m["buffer_available_bytes"] == m["buffer_total_bytes"]     # every batch's memory came back
    assert m["producer_id"] >= 0
    p.close()
    p.close()                                                # idempotent
    with pytest.raises(ProducerClosedError):
        p.send(topic, b"late")
    with pytest.raises(ProducerClosedError):
        p.send_batch(topic, [b"late"])
    with pytest.raises(ProducerClosedError):
        p.partitions_for(topic)
    assert p.flush() == 0

    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1000) as q:
        lingering = q.send(topic, b"delivered-by-close", partition=3)
    assert "closed" in repr(q)
    with pytest.raises(ProducerClosedError):
        q.send(topic, b"late")
    md = lingering.get(1)                                    # close() delivered it
    got = read_back(broker.bootstrap, topic, NPART, 51)
    assert got[3][md.offset].value == b"delivered-by-close"


def test_linger_zero_sends_every_record(broker):
    """linger_ms=0: each record is due the moment its batch starts. Records sent one at a time,
    each awaited, then a burst: every one is delivered (a past deadline armed the I/O thread's
    timer, which fired before its arming was recorded, and later deadlines were then never armed;
    and a batch started in the millisecond of the I/O thread's last scan was not looked at)."""
    topic = unique_name("linger0")
    broker.create_topic(topic, 2)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        offsets = [p.send(topic, b"one-%d" % i, partition=0).get(10).offset for i in range(200)]
        assert offsets == list(range(200))
        futs = [p.send(topic, b"burst-%d" % i, partition=1) for i in range(2000)]
        assert p.flush(30) == 0
        assert [f.get(0).offset for f in futs] == list(range(2000))
    got = read_back(broker.bootstrap, topic, 2, 2200)
    assert [m.value for m in got[0]] == [b"one-%d" % i for i in range(200)]
    assert [m.value for m in got[1]] == [b"burst-%d" % i for i in range(2000)]
