"""send_batch's per-record ``timestamps`` and ``record_headers`` on Apache Kafka, read back by
confluent-kafka's consumer (CRCs checked): each record's headers exactly (order, duplicate keys,
null values, the call's headers after them) and its timestamp exactly, on the Arrow path (sliced
arrays, large types, compressed batches, several batches per partition) and on the list path,
through Producer and AsyncProducer.
"""
from __future__ import annotations

import asyncio
import time

import pyarrow as pa
import pytest

from brokers import read_back, unique_name
from fastkafka import Producer
from fastkafka.aio import AsyncProducer
from fastkafka.errors import MalformedRecordError

pytestmark = pytest.mark.broker

NPART = 3
# recent: Kafka's default retention (7 days) deletes records with older timestamps
BASE_MS = (time.time_ns() // 1_000_000) - 3_600_000


def headers_of(i):
    """Record i's own headers: none (null list), none (empty list), or several with duplicates."""
    if i % 6 == 0:
        return None
    if i % 6 == 1:
        return []
    return [("dup", b"1"), ("id", b"%d" % i), ("dup", b"2" * (i % 40)), ("null", None)][: 2 + i % 3]


def arrow_headers(n, key=pa.string(), value=pa.binary(), large=False):
    st = pa.struct([("key", key), ("value", value)])
    return pa.array([None if headers_of(i) is None else
                     [{"key": k, "value": v} for k, v in headers_of(i)] for i in range(n)],
                    pa.large_list(st) if large else pa.list_(st))


def ts_of(i):
    return None if i % 9 == 4 else BASE_MS + i * 7


def check(msgs, n, start, before, after, tail=()):
    assert sorted(int(m.key) for m in msgs) == list(range(start, start + n))
    for m in msgs:
        i = int(m.key)
        assert m.value == b"v%d" % i
        assert m.headers == list(headers_of(i) or []) + list(tail), (i, m.headers)
        if ts_of(i) is None:
            assert before <= m.timestamp <= after, (i, m.timestamp)
        else:
            assert m.timestamp == ts_of(i), (i, m.timestamp)


@pytest.mark.parametrize("compression,large", [("none", False), ("lz4", True), ("zstd", False)])
def test_arrow_columns_sliced_are_read_back_exactly(kafka_broker, compression, large):
    topic = unique_name("rc")
    kafka_broker.create_topic(topic, NPART)
    n, start = 5000, 37
    total = n + start + 11
    values = pa.array([b"v%d" % i for i in range(total)], pa.large_binary() if large else pa.binary())
    keys = pa.array(["%d" % i for i in range(total)])
    tss = pa.array([None if ts_of(i) is None else ts_of(i) * 1000 + 999 for i in range(total)],
                   pa.timestamp("us", tz="UTC"))
    hdrs = arrow_headers(total, pa.large_string() if large else pa.string(),
                         pa.large_binary() if large else pa.binary(), large)
    tail = [("task", b"t1")]
    before = int(time.time() * 1000)
    with Producer(bootstrap_servers=kafka_broker.bootstrap, compression_type=compression,
                  batch_size=4096, linger_ms=5) as p:
        fut = p.send_batch(topic, values.slice(start, n), keys=keys.slice(start, n),
                           headers=tail, timestamps=tss.slice(start, n),
                           record_headers=hdrs.slice(start, n))
        assert fut.get(60) == n
    after = int(time.time() * 1000)
    got = read_back(kafka_broker.bootstrap, topic, NPART, n, timeout=60)
    check([m for ms in got.values() for m in ms], n, start, before, after, tail)


def test_list_path_and_a_bad_key_that_queues_nothing(kafka_broker):
    topic = unique_name("rl")
    kafka_broker.create_topic(topic, NPART)
    n = 500
    before = int(time.time() * 1000)
    with Producer(bootstrap_servers=kafka_broker.bootstrap) as p:
        bad = arrow_headers(3).to_pylist()
        bad[2] = [{"key": None, "value": b"x"}]
        with pytest.raises(MalformedRecordError, match=r"record_headers\[2\]: header 0 has a null key"):
            p.send_batch(topic, [b"bad0", b"bad1", b"bad2"], record_headers=pa.array(
                bad, arrow_headers(1).type))
        fut = p.send_batch(topic, [b"v%d" % i for i in range(n)],
                           keys=["%d" % i for i in range(n)],
                           timestamps=[ts_of(i) for i in range(n)],
                           record_headers=[headers_of(i) for i in range(n)])
        assert fut.get(60) == n
    after = int(time.time() * 1000)
    got = read_back(kafka_broker.bootstrap, topic, NPART, n, timeout=60)
    msgs = [m for ms in got.values() for m in ms]
    assert not [m for m in msgs if m.value.startswith(b"bad")]
    check(msgs, n, 0, before, after)


def test_async_producer_passes_the_columns_through(kafka_broker):
    topic = unique_name("ra")
    kafka_broker.create_topic(topic, NPART)
    n = 1000

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap) as p:
            return await p.send_batch(topic, pa.array([b"v%d" % i for i in range(n)]),
                                      keys=pa.array(["%d" % i for i in range(n)]),
                                      timestamps=pa.array([ts_of(i) for i in range(n)], pa.int64()),
                                      record_headers=arrow_headers(n))

    before = int(time.time() * 1000)
    assert asyncio.run(main()) == n
    after = int(time.time() * 1000)
    got = read_back(kafka_broker.bootstrap, topic, NPART, n, timeout=60)
    check([m for ms in got.values() for m in ms], n, 0, before, after)
