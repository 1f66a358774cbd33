"""Differential test: one DataFrame written by Spark's own Kafka sink (``format("kafka")``, the JVM
connector with the Java client) and by fastkafka's sinks (the data source ``fastkafka`` and
``partition_writer``), to fresh topics of the same partition count on Apache Kafka, read back with
confluent-kafka's consumer. The records must be the same: key, value, headers (in order, with
duplicates, empty and null values), topic and partition.

Partitions: a row's ``partition`` wins in both sinks; a keyed row without one goes to
``toPositive(murmur2(key)) % partitions`` in both (the Java client's built-in partitioner, which
Spark's sink uses; fastkafka's default is the same). A row with neither is placed by each client's
sticky partitioning, so only its presence is compared.

Timestamps: Spark 4.2's Kafka sink does not read a ``timestamp`` column (its writer takes topic,
key, value, headers and partition only): every record it writes gets the Java client's send time
(CreateTime), whatever the DataFrame says; the first test checks that by reading back. fastkafka's
sinks use the column: a record's timestamp is the row's, and the send time where it is null.
"""
from __future__ import annotations

import collections
import datetime
import time

import pytest

from brokers import read_back, unique_name
from fastkafka._producer.partitioner import java_partition

import spark_sink

pytestmark = pytest.mark.spark

NPART = 4
N = 600
SLICES = 2
BASE_MS = 1_600_000_000_000       # 2020-09-13: far from "now", so a send time cannot pass for it
SCHEMA = ("key binary, value binary, "
          "headers array<struct<key: string, value: binary>>, partition int, "
          "timestamp timestamp, topic string")


def _make_rows():
    """Row i: null, empty and repeated keys; null (tombstone) and empty values; headers null,
    empty, duplicated, with empty and null values; an explicit partition on some rows (keyed or
    not); a timestamp on most; the second topic on some. Every row's (key, value, headers) is
    unique, so that a record read back names its row: a row whose would repeat an earlier one's
    gets a header with its index instead."""
    rows, seen = [], set()
    for i in range(N):
        key = None if i % 7 == 3 else b"" if i % 11 == 4 else b"k%d" % (i % 50)
        value = None if i % 13 == 5 else b"" if i % 13 == 6 else b"v%d-" % i + b"x" * (i % 17)
        headers = [None, [], [("h", b"x")], [("dup", b"1"), ("dup", b"2"), ("z", b"")],
                   [("n", None), ("a", b"%d" % i)]][i % 5]
        if repr((key, value, headers or [])) in seen:
            headers = [("row", b"%d" % i)]
        seen.add(repr((key, value, headers or [])))
        partition = i % NPART if i % 6 == 0 else None
        ts_ms = None if i % 4 == 1 else BASE_MS + i * 1001
        rows.append((key, value, headers, partition, ts_ms, i % 9 == 0))
    return rows


ROWS = _make_rows()


def _row(i: int):
    return ROWS[i]


def _frame(spark, topics):
    rows = []
    for i in range(N):
        key, value, headers, partition, ts_ms, second = _row(i)
        ts = None if ts_ms is None else datetime.datetime.fromtimestamp(ts_ms / 1000, datetime.timezone.utc)
        rows.append((key, value, headers, partition, ts, topics[1] if second else topics[0]))
    # contiguous slices in row order: each task sends its rows in the DataFrame's order
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, SLICES), SCHEMA)


def _expected(topics):
    """{topic: [(row index, key, value, headers, partition or None, timestamp ms or None)]}."""
    out = {t: [] for t in topics}
    for i in range(N):
        key, value, headers, partition, ts_ms, second = _row(i)
        if partition is None and key is not None:
            partition = java_partition(key, NPART)
        out[topics[1] if second else topics[0]].append(
            (i, key, value, [(k, v) for k, v in headers or []], partition, ts_ms))
    return out


def _topics(kafka_broker, prefix):
    names = [unique_name(prefix + "a"), unique_name(prefix + "b")]
    for t in names:
        kafka_broker.create_topic(t, NPART)
    return names


def _read(kafka_broker, topics, expected):
    return {t: read_back(kafka_broker.bootstrap, t, NPART, len(expected[t]), timeout=60)
            for t in topics}


def _content(rec):
    return rec.key, rec.value, list(rec.headers)


def _check_records(got, expected, label):
    """Every expected row exactly once with its key, value and headers (order kept); its partition
    where it is determined; per partition, each slice's rows in the DataFrame's order. Returns
    {row index: the record read}."""
    by_content = collections.defaultdict(list)
    for part, msgs in got.items():
        for m in msgs:
            by_content[repr(_content(m))].append(m)
    want = collections.Counter(repr((k, v, h)) for _, k, v, h, _, _ in expected)
    assert max(want.values()) == 1           # rows are told apart by their contents
    have = collections.Counter({c: len(ms) for c, ms in by_content.items()})
    assert have == want, f"{label}: records differ: missing {want - have}, extra {have - want}"
    matched = {}
    for i, k, v, h, part, _ in expected:
        m = by_content[repr((k, v, h))].pop(0)
        matched[i] = m
        if part is not None:
            assert m.partition == part, f"{label}: row {i} (key {k!r}) in partition {m.partition}, not {part}"
    # order: rows with a unique value, within one slice and one partition, keep the row order
    unique = {i: m for i, m in matched.items() if m.value and m.value.startswith(b"v")}
    per = collections.defaultdict(list)
    for i, m in unique.items():
        per[(i * SLICES // N, m.partition)].append((m.offset, i))
    for (s, p), pairs in per.items():
        rows = [i for _, i in sorted(pairs)]
        assert rows == sorted(rows), f"{label}: slice {s}'s rows out of order in partition {p}"
    return matched


def _check_fastkafka_timestamps(matched, expected, window, label):
    start_ms, end_ms = window
    for i, _, _, _, _, ts_ms in expected:
        m = matched[i]
        if ts_ms is None:
            assert start_ms <= m.timestamp <= end_ms, (
                f"{label}: row {i} has no timestamp: its record's {m.timestamp} is not the send time "
                f"({start_ms}..{end_ms})")
        else:
            assert m.timestamp == ts_ms, f"{label}: row {i}'s record has timestamp {m.timestamp}, not the row's {ts_ms}"


def _window(t0, t1):
    return int(t0 * 1000) - 1000, int(t1 * 1000) + 1000


@pytest.fixture(scope="module")
def spark_written(spark, kafka_broker):
    """The DataFrame written once by Spark's own Kafka sink, read back."""
    topics = _topics(kafka_broker, "dj")
    expected = _expected(topics)
    t0 = time.time()
    (_frame(spark, topics).write.format("kafka")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).save())
    window = _window(t0, time.time())
    return topics, expected, _read(kafka_broker, topics, expected), window


def test_spark_kafka_sink_reference(spark_written):
    """Spark's own sink writes the expected records (the reference the other tests compare with),
    and its record timestamps are its send times: the ``timestamp`` column is not used."""
    topics, expected, got, (start_ms, end_ms) = spark_written
    for t in topics:
        matched = _check_records(got[t], expected[t], f"spark kafka sink, {t}")
        stamps = [m.timestamp for m in matched.values()]
        assert all(start_ms <= s <= end_ms for s in stamps), (
            f"Spark's sink wrote timestamps outside its write ({start_ms}..{end_ms}): it now uses the "
            f"timestamp column? {sorted(stamps)[:3]} .. {sorted(stamps)[-3:]}")


def _same_as_spark(spark_written, got, label):
    """The records of a fastkafka sink against Spark's, row by row; partitions equal wherever the
    row determines one."""
    topics, expected, spark_got, _ = spark_written
    out = {}
    for t, mine in zip(topics, got):
        matched = _check_records(got[mine], expected[t], f"{label}, {mine}")
        theirs = _check_records(spark_got[t], expected[t], f"spark kafka sink, {t}")
        for i, _, _, _, part, _ in expected[t]:
            assert _content(matched[i]) == _content(theirs[i])
            if part is not None:
                assert matched[i].partition == theirs[i].partition
        out[mine] = matched
    return out


def test_fastkafka_data_source_matches_spark_kafka_sink(spark, kafka_broker, spark_written):
    """format("fastkafka") writes what format("kafka") writes, and keeps the rows' timestamps."""
    topics = _topics(kafka_broker, "df")
    expected = _expected(topics)
    t0 = time.time()
    (_frame(spark, topics).write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).save())
    window = _window(t0, time.time())
    matched = _same_as_spark(spark_written, _read(kafka_broker, topics, expected), "fastkafka data source")
    for t in topics:
        _check_fastkafka_timestamps(matched[t], expected[t], window, f"fastkafka data source, {t}")


def test_partition_writer_matches_spark_kafka_sink(spark, kafka_broker, spark_written):
    """foreachPartition(partition_writer(...)) writes what format("kafka") writes, and keeps the
    rows' timestamps."""
    topics = _topics(kafka_broker, "dp")
    expected = _expected(topics)
    t0 = time.time()
    _frame(spark, topics).foreachPartition(
        spark_sink.partition_writer(bootstrap_servers=kafka_broker.bootstrap))
    window = _window(t0, time.time())
    matched = _same_as_spark(spark_written, _read(kafka_broker, topics, expected), "partition_writer")
    for t in topics:
        _check_fastkafka_timestamps(matched[t], expected[t], window, f"partition_writer, {t}")
