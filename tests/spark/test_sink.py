"""spark_sink against a real broker, read back by confluent-kafka's consumer (CRC checks on).

Small data (10k-100k rows), one session-scoped SparkSession on ``local[2,4]`` (see conftest.py).
"""
from __future__ import annotations

import collections
import time

import pytest
from pyspark.errors import AnalysisException, PythonException

import spark_sink
from brokers import read_back, unique_name
from fastkafka._producer.partitioner import java_partition
from fastkafka.errors import ConfigError

pytestmark = pytest.mark.spark

NPART = 6


def _topic(broker, partitions=NPART, prefix="s"):
    name = unique_name(prefix)
    broker.create_topic(name, partitions)
    return name


def _read_all(broker, topic, count, partitions=NPART):
    got = read_back(broker.bootstrap, topic, partitions, count, timeout=60)
    return [m for msgs in got.values() for m in msgs]


# The rows of the batch test, computed the same way in Spark (SQL) and here (Python).
BATCH_SQL = [
    "id",
    "CASE WHEN id % 10 = 3 THEN NULL ELSE cast(concat('k', id) AS binary) END AS key",
    "CASE WHEN id % 97 = 5 THEN NULL ELSE cast(concat('v', id, repeat('x', id % 50)) AS binary) END AS value",
    "CASE WHEN id % 7 = 0 THEN cast(id % 4 AS int) ELSE NULL END AS partition",
]


def _expected_row(i):
    key = None if i % 10 == 3 else b"k%d" % i
    value = None if i % 97 == 5 else b"v%d" % i + b"x" * (i % 50)
    partition = i % 4 if i % 7 == 0 else None
    return key, value, partition


def test_batch_write_arrow_path_topics_keys_nulls_partitions(spark, kafka_broker):
    """~100k rows through the data source's Arrow path to two topics (a topic column), with null
    keys and values, explicit partitions for some rows and task headers; read back exactly."""
    n = 100_000
    topics = [_topic(kafka_broker, prefix="sa"), _topic(kafka_broker, prefix="sb")]
    df = spark.range(n).selectExpr(
        *BATCH_SQL, f"CASE WHEN id % 3 = 0 THEN '{topics[0]}' ELSE '{topics[1]}' END AS topic",
        "'ignored' AS other").repartition(4)
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
       .option("kafka.linger.ms", "5").option("kafka.compression.type", "lz4")
       .option("task.headers", "true").save())
    expected = {t: collections.Counter() for t in topics}
    placed = {}
    for i in range(n):
        key, value, partition = _expected_row(i)
        expected[topics[0] if i % 3 == 0 else topics[1]][(key, value)] += 1
        if value is not None:
            placed[value] = partition if partition is not None else (
                java_partition(key, NPART) if key is not None else None)
    for t in topics:
        msgs = _read_all(kafka_broker, t, sum(expected[t].values()))
        assert collections.Counter((m.key, m.value) for m in msgs) == expected[t]
        for m in msgs:
            want = placed.get(m.value)
            if want is not None:
                assert m.partition == want, (m.value[:12], m.partition, want)
            names = [h[0] for h in m.headers]
            assert names == ["spark.partition", "spark.attempt", "spark.batch"]
            assert m.headers[2][1] == b"-1"                  # a batch write has no micro-batch id
        # bytes: what was read is what was sent, byte for byte (the Counter above), and in size
        assert sum(len(m.value or b"") + len(m.key or b"") for m in msgs) == sum(
            (len(k or b"") + len(v or b"")) * c for (k, v), c in expected[t].items())


def test_headers_column_and_string_columns(spark, kafka_broker):
    """A headers column (array<struct<key,value>>) and string key/value columns."""
    n = 10_000
    topic = _topic(kafka_broker)
    df = spark.range(n).selectExpr(
        "cast(id AS string) AS key", "concat('välue-', id) AS value",
        "CASE WHEN id % 4 = 0 THEN array() ELSE array(named_struct('key', 'i', 'value', "
        "cast(cast(id AS string) AS binary)), named_struct('key', 'n', 'value', cast(NULL AS binary))) "
        "END AS headers")
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic).save())
    msgs = _read_all(kafka_broker, topic, n)
    assert len(msgs) == n
    for m in msgs:
        i = int(m.key)
        assert m.value == ("välue-%d" % i).encode()
        assert m.headers == ([] if i % 4 == 0 else [("i", b"%d" % i), ("n", None)])
        assert m.partition == java_partition(m.key, NPART)


def test_row_path_and_arrow_path_write_identical_topics(spark, kafka_broker):
    n = 20_000
    df = spark.range(n).selectExpr(*BATCH_SQL).repartition(3).cache()
    a, b = _topic(kafka_broker, prefix="arrow"), _topic(kafka_broker, prefix="rows")
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", a).save())
    df.foreachPartition(spark_sink.partition_writer(topic=b, bootstrap_servers=kafka_broker.bootstrap))
    got_a = _read_all(kafka_broker, a, n)
    got_b = _read_all(kafka_broker, b, n)
    # Keyed rows land in the same partitions; a null-key row goes to its explicit partition or
    # to a sticky one (which differs between runs by design), so those are compared without it.
    def contents(msgs):
        out = collections.Counter()
        for m in msgs:
            out[(m.partition if m.key is not None else None, m.key, m.value)] += 1
        return out
    assert contents(got_a) == contents(got_b)
    assert len(got_a) == len(got_b) == n
    df.unpersist()


def _fail_once_after_half(writer):
    """A foreachPartition function that sends half of partition 1's rows, flushed, then fails
    its first attempt; the retry sends them all."""
    def run(rows):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        rows = list(rows)
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
            writer(iter(rows[: len(rows) // 2]))
            raise RuntimeError("injected failure after sending half of the rows")
        writer(iter(rows))
    return run


def test_task_failing_once_is_retried_every_row_at_least_once(spark, kafka_broker):
    n = 8_000
    topic = _topic(kafka_broker)
    df = spark.range(n).selectExpr("cast(concat('k', id) AS binary) AS key",
                                   "cast(concat('v', id) AS binary) AS value").repartition(4)
    writer = spark_sink.partition_writer(topic=topic, bootstrap_servers=kafka_broker.bootstrap,
                                         task_headers=True)
    df.foreachPartition(_fail_once_after_half(writer))
    per_part = df.rdd.mapPartitionsWithIndex(lambda i, it: [(i, sum(1 for _ in it))]).collectAsMap()
    expected = n + per_part[1] // 2                 # the first attempt's half comes twice
    msgs = _read_all(kafka_broker, topic, expected)
    counts = collections.Counter(m.value for m in msgs)
    assert set(counts) == {b"v%d" % i for i in range(n)}
    assert sum(counts.values()) == expected
    attempts = {dict(m.headers)["spark.attempt"] for m in msgs if counts[m.value] == 2}
    assert attempts == {b"0", b"1"}                 # the duplicates are told apart by attempt


def test_data_source_task_failing_mid_write_is_retried(spark, kafka_broker, tmp_path):
    """An upstream failure in the middle of a data source task (after some Arrow batches were
    sent): Spark retries the task and every row arrives at least once."""
    from pyspark.sql.functions import udf

    n = 20_000
    topic = _topic(kafka_broker)

    @udf("binary", useArrow=False)
    def fail_late(v):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        if ctx.attemptNumber() == 0 and v.endswith(b"-late"):
            raise RuntimeError("injected failure late in the task")
        return v

    df = (spark.range(n).repartition(2)
          .selectExpr("id", "cast(concat('v', id, CASE WHEN id = 19000 THEN '-late' ELSE '' END) "
                      "AS binary) AS raw")
          .sortWithinPartitions("id")
          .select(fail_late("raw").alias("value")))
    summary = tmp_path / "summary.jsonl"
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
       .option("task.headers", "true").option("summary.path", str(summary)).save())
    [s] = spark_sink.read_summaries(str(summary))
    assert s["rows"] == n and s["errors"] == 0 and not s["aborted"]
    assert s["bytes"] == sum(len(b"v%d" % i) for i in range(n)) + len(b"-late")
    assert sorted(r["attempt"] for r in s["reports"]) == [0, 1]   # one partition committed on a retry
    msgs = _read_all(kafka_broker, topic, n)
    values = {m.value for m in msgs}
    missing = [i for i in range(n) if (b"v%d" % i) not in values and i != 19000]
    assert missing == [] and b"v19000-late" in values


def test_always_failing_delivery_makes_save_raise(spark, noida_broker):
    """noida rejects a batch over ~1 MiB with MESSAGE_TOO_LARGE: the task fails on every attempt
    and save() raises with that delivery error."""
    topic = _topic(noida_broker, partitions=1)
    df = spark.range(3).selectExpr("cast(repeat('B', 2000000) AS binary) AS value").coalesce(1)
    start = time.monotonic()
    with pytest.raises(PythonException, match="MESSAGE_TOO_LARGE") as ei:
        (df.write.format("fastkafka").mode("append")
           .option("kafka.bootstrap.servers", noida_broker.bootstrap).option("topic", topic)
           .option("kafka.max.request.size", "8000000").save())
    assert "DeliveryError: " in str(ei.value)        # the task's own error, from the Python worker
    assert time.monotonic() - start < 120


@pytest.mark.parametrize("select,options,error,message", [
    (["cast(cast(id AS string) AS binary) AS key"], {"topic": "t"}, "SchemaError", "no 'value' column"),
    (["id AS value"], {"topic": "t"}, "SchemaError", "column 'value' must be binary or string, not bigint"),
    (["cast(cast(id AS string) AS binary) AS value"], {}, "SchemaError", "no topic"),
    (["cast(cast(id AS string) AS binary) AS value", "id AS partition"], {"topic": "t"}, "SchemaError",
     "column 'partition' must be int"),
    (["cast(cast(id AS string) AS binary) AS value"], {"topic": "t", "kafka.linger.ms": "soon"}, "ConfigError",
     "linger_ms must be an integer"),
    (["cast(cast(id AS string) AS binary) AS value"], {"topic": "t", "linger.ms": "5"}, "ConfigError",
     "unknown option 'linger.ms'"),
    (["cast(cast(id AS string) AS binary) AS value"], {"topic": "t", "kafka.lingerr.ms": "5"}, "ConfigError",
     "unknown config key 'lingerr.ms'"),
], ids=["no-value", "value-type", "no-topic", "partition-type", "bad-value", "no-prefix", "unknown-key"])
def test_schema_and_option_errors_on_the_driver(spark, select, options, error, message):
    """Raised on the driver before any task runs (the bootstrap address is never contacted): Spark
    reports the data source's SchemaError / ConfigError as an AnalysisException."""
    df = spark.range(5).selectExpr(*select)
    w = df.write.format("fastkafka").mode("append").option("kafka.bootstrap.servers", "127.0.0.1:1")
    for k, v in options.items():
        w = w.option(k, v)
    start = time.monotonic()
    with pytest.raises(AnalysisException, match=message) as ei:
        w.save()
    assert f"{error}: " in str(ei.value)
    assert time.monotonic() - start < 30


def test_unreachable_broker_fails_in_bounded_time(spark):
    df = spark.range(10).selectExpr("cast(cast(id AS string) AS binary) AS value").coalesce(1)
    start = time.monotonic()
    with pytest.raises(PythonException, match="not present in metadata after 1000 ms") as ei:
        (df.write.format("fastkafka").mode("append")
           .option("kafka.bootstrap.servers", "127.0.0.1:1").option("topic", "nowhere")
           .option("kafka.max.block.ms", "1000").save())
    assert "KafkaTimeoutError: " in str(ei.value)
    assert time.monotonic() - start < 60


def test_partition_writer_checks_settings_on_the_driver():
    with pytest.raises(ConfigError, match="unknown config key 'lingerms'"):
        spark_sink.partition_writer(topic="t", bootstrap_servers="h:1", lingerms=5)
    with pytest.raises(ConfigError, match="bootstrap.servers is required"):
        spark_sink.batch_writer(topic="t")


def _run_stream(query, batches: int, timeout: float = 90):
    """Let ``query`` run until ``batches`` micro-batches with rows have completed; stop it and
    return the number of rows of the completed micro-batches (the rate source's values start at
    0, so those rows are the values 0..rows-1)."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            done = [p for p in query.recentProgress if p["numInputRows"] > 0]
            if len(done) >= batches:
                break
            if query.exception() is not None:
                raise query.exception()
            time.sleep(0.2)
        else:
            raise AssertionError(f"{batches} micro-batches did not complete in {timeout} s")
    finally:
        query.stop()
    return sum(p["numInputRows"] for p in query.recentProgress)


@pytest.mark.parametrize("how", ["data_source", "batch_writer"])
def test_streaming_rate_source_several_micro_batches(spark, kafka_broker, tmp_path, how):
    topic = _topic(kafka_broker)
    sdf = (spark.readStream.format("rate").option("rowsPerSecond", 2000).load()
           .selectExpr("cast(cast(value AS string) AS binary) AS value",
                       "cast(cast(value % 100 AS string) AS binary) AS key"))
    if how == "data_source":
        q = (sdf.writeStream.format("fastkafka")
             .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
             .option("task.headers", "true")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="500 milliseconds")
             .start())
    else:
        q = (sdf.writeStream.foreachBatch(spark_sink.batch_writer(
                topic=topic, bootstrap_servers=kafka_broker.bootstrap, task_headers=True))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="500 milliseconds")
             .start())
    rows = _run_stream(q, 3)
    assert rows > 0
    msgs = _read_all(kafka_broker, topic, rows)
    values = {int(m.value) for m in msgs}
    assert set(range(rows)) <= values              # every committed row, at least once
    batch_ids = {int(dict(m.headers)["spark.batch"]) for m in msgs}
    assert len(batch_ids) >= 3 and min(batch_ids) >= 0
