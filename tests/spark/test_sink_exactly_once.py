"""The sink's exactly_once mode: tasks write in transactions the driver commits (two-phase commit).

Read back by confluent-kafka with ``isolation.level=read_committed`` (what an exactly-once consumer
sees) and, as proof that the tests have teeth, ``read_uncommitted`` (which also shows the rows of
aborted attempts). On Apache Kafka and noida-db (tansu does not hide aborted records). Small data,
the session's SparkSession on ``local[2,4]`` (a failed task is retried).
"""
from __future__ import annotations

import collections
import json
import os
import time

import pytest
from pyspark.errors import PythonException

import spark_sink
from brokers import read_all, unique_name

pytestmark = pytest.mark.spark

TXN_BROKERS = ["kafka_broker", "noida_broker"]


def _topic(broker, partitions):
    name = unique_name("eo")
    broker.create_topic(name, partitions)
    return name


def _watermarks(bootstrap, topic, partitions, isolation_level):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("wm"),
                  "isolation.level": isolation_level, "log_level": 3})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)]
    finally:
        c.close()


def _no_open_transaction(bootstrap, topic, partitions, within=15.0):
    """Every partition's last stable offset (the end read_committed consumers see) reaches its
    high watermark within ``within`` seconds: no transaction of the write is left open to hold
    read_committed consumers back until the transaction timeout (15 minutes for the sink). A
    commit or abort returns once decided; the brokers write the markers just after."""
    deadline = time.monotonic() + within
    while True:
        out = {iso: _watermarks(bootstrap, topic, partitions, iso)
               for iso in ("read_committed", "read_uncommitted")}
        if out["read_committed"] == out["read_uncommitted"] or time.monotonic() > deadline:
            return out["read_committed"] == out["read_uncommitted"], out
        time.sleep(0.3)


def _failing_udf(always: bool):
    from pyspark.sql.functions import udf

    @udf("binary", useArrow=False)
    def fail_late(v):
        from pyspark import TaskContext
        if v.endswith(b"-late") and (always or TaskContext.get().attemptNumber() == 0):
            raise RuntimeError("injected failure late in the task")
        return v
    return fail_late


def _late_failing_df(spark, n, always=False):
    """Two partitions; the task of the partition holding row 19000 fails there, after most of its
    rows were sent (Arrow batches of 2,000 rows)."""
    return (spark.range(n).repartition(2)
            .selectExpr("id", "cast(concat('v', id, CASE WHEN id = 19000 THEN '-late' ELSE '' END) "
                        "AS binary) AS raw")
            .sortWithinPartitions("id")
            .select(_failing_udf(always)("raw").alias("value")))


def _eo_write(df, broker, topic, prefix, **options):
    w = (df.write.format("fastkafka").mode("append")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
         .option("delivery.guarantee", "exactly_once").option("transactional.id.prefix", prefix))
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


@pytest.mark.parametrize("broker_fixture", TXN_BROKERS, ids=["kafka", "noida"])
def test_retried_task_every_row_exactly_once(spark, request, broker_fixture, tmp_path):
    broker = request.getfixturevalue(broker_fixture)
    n = 20_000
    topic = _topic(broker, 3)
    summary = tmp_path / "summary.jsonl"
    _eo_write(_late_failing_df(spark, n), broker, topic, unique_name("eo"),
              **{"summary.path": str(summary), "task.headers": "true"})
    [s] = spark_sink.read_summaries(str(summary))
    assert not s["aborted"] and s["delivery_guarantee"] == "exactly_once"
    assert sorted(r["attempt"] for r in s["reports"]) == [0, 1]     # one task was retried
    assert all(r["transaction"] is not None for r in s["reports"])

    committed = read_all(broker.bootstrap, topic, 3, "read_committed")
    counts = collections.Counter(committed)
    expected = {b"v%d" % i for i in range(n) if i != 19000} | {b"v19000-late"}
    assert set(counts) == expected and max(counts.values()) == 1 and len(committed) == n
    # The failed attempt's partial rows are in the log, aborted: read_uncommitted sees them twice.
    uncommitted = read_all(broker.bootstrap, topic, 3, "read_uncommitted")
    assert len(uncommitted) > n and set(uncommitted) == expected
    ok, offsets = _no_open_transaction(broker.bootstrap, topic, 3)
    assert ok, offsets


@pytest.mark.parametrize("broker_fixture", TXN_BROKERS, ids=["kafka", "noida"])
def test_failed_job_leaves_nothing_visible_and_nothing_open(spark, request, broker_fixture):
    broker = request.getfixturevalue(broker_fixture)
    n = 20_000
    topic = _topic(broker, 3)
    start = time.monotonic()
    with pytest.raises(Exception, match="injected failure late in the task"):
        _eo_write(_late_failing_df(spark, n, always=True), broker, topic, unique_name("eo"))
    assert time.monotonic() - start < 120
    assert read_all(broker.bootstrap, topic, 3, "read_committed") == []
    # the partition that did not fail wrote (and prepared) its rows, and every attempt of the
    # failing one sent most of its rows: all of it aborted
    assert len(read_all(broker.bootstrap, topic, 3, "read_uncommitted")) >= n // 2
    ok, offsets = _no_open_transaction(broker.bootstrap, topic, 3)
    assert ok, offsets


def test_exactly_once_option_errors_on_the_driver(spark, kafka_broker):
    df = spark.range(3).selectExpr("cast(id AS string) AS value")
    base = df.write.format("fastkafka").mode("append").option(
        "kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", "t")
    with pytest.raises(Exception, match="transactional.id.prefix"):
        base.option("delivery.guarantee", "exactly_once").save()
    with pytest.raises(Exception, match="at_least_once or exactly_once"):
        base.option("delivery.guarantee", "twice").save()
    with pytest.raises(Exception, match="each task gets its own transactional id"):
        (base.option("delivery.guarantee", "exactly_once").option("transactional.id.prefix", "p")
         .option("kafka.transactional.id", "x").save())
    with pytest.raises(Exception, match="needs transaction_log_path"):
        spark_sink.batch_writer(topic="t", bootstrap_servers=kafka_broker.bootstrap,
                                delivery_guarantee="exactly_once", transactional_id_prefix="p")


# ------------------------------------------------------------------------------------- streaming
def _stream(spark, broker, topic, prefix, ckpt, fail_value=None, crash=None, summary=None):
    """A rate source (value = row index, deterministic per offset range, so a replayed batch has
    the same rows) into the sink with exactly_once."""
    sdf = spark.readStream.format("rate").option("rowsPerSecond", 1000).option("numPartitions", 2).load()
    if fail_value is not None:
        from pyspark.sql.functions import udf

        @udf("binary", useArrow=False)
        def fail_once(v):
            from pyspark import TaskContext
            if v == b"%d" % fail_value and TaskContext.get().attemptNumber() == 0:
                raise RuntimeError("injected task failure")
            return v
        sdf = sdf.select(fail_once(sdf.value.cast("string").cast("binary")).alias("value"))
    else:
        sdf = sdf.selectExpr("cast(cast(value AS string) AS binary) AS value")
    w = (sdf.writeStream.format("fastkafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
         .option("delivery.guarantee", "exactly_once").option("transactional.id.prefix", prefix)
         .option("checkpointLocation", str(ckpt)).trigger(processingTime="700 milliseconds"))
    if crash is not None:
        w = w.option("test.crash", crash)
    if summary is not None:
        w = w.option("summary.path", str(summary))
    return w.start()


def _committed_batches(ckpt) -> set:
    d = os.path.join(str(ckpt), "commits")
    return {int(f) for f in os.listdir(d) if f.isdigit()} if os.path.isdir(d) else set()


def _run_until(q, ckpt, batches, timeout=120):
    deadline = time.monotonic() + timeout
    try:
        while len(_committed_batches(ckpt)) < batches:
            if q.exception() is not None:
                raise q.exception()
            if time.monotonic() > deadline:
                raise AssertionError(f"{batches} micro-batches not committed in {timeout} s")
            time.sleep(0.2)
    finally:
        q.stop()


def _expect_each_row_once(broker, topic):
    """The rate source numbers its rows 0, 1, 2, ... and micro-batches commit in order: what
    read_committed shows must be 0..N-1, each exactly once (nothing twice, nothing missing)."""
    committed = read_all(broker.bootstrap, topic, 2, "read_committed")
    counts = collections.Counter(int(v) for v in committed)
    assert [v for v, c in counts.items() if c > 1] == []
    assert sorted(counts) == list(range(len(counts)))
    return len(committed)


@pytest.mark.parametrize("broker_fixture", TXN_BROKERS, ids=["kafka", "noida"])
def test_streaming_task_failure_every_row_exactly_once(spark, request, broker_fixture, tmp_path):
    broker = request.getfixturevalue(broker_fixture)
    topic = _topic(broker, 2)
    ckpt = tmp_path / "ckpt"
    summary = tmp_path / "summary.jsonl"
    _run_until(_stream(spark, broker, topic, unique_name("eo"), ckpt, fail_value=1500,
                       summary=summary), ckpt, 4)
    assert _expect_each_row_once(broker, topic) > 1500
    # the micro-batch holding row 1500 was committed from a retried task
    reports = [r for line in spark_sink.read_summaries(str(summary)) for r in line["reports"]]
    assert any(r["attempt"] == 1 for r in reports)


@pytest.mark.parametrize("broker_fixture,crash", [
    ("kafka_broker", "after_commit"), ("kafka_broker", "after_log"),
    ("kafka_broker", "after_first_commit"), ("noida_broker", "after_log")],
    ids=["kafka-after_commit", "kafka-after_log", "kafka-after_first_commit", "noida-after_log"])
def test_streaming_driver_failure_around_the_commit_writes_no_row_twice(spark, request, broker_fixture,
                                                                         tmp_path, crash):
    """The driver fails at batch 1 after committing to Kafka (or after recording the commit, or
    half-way through it) and before Spark records the batch; the query restarts from its
    checkpoint and replays batch 1. No row twice, none missing."""
    broker = request.getfixturevalue(broker_fixture)
    topic = _topic(broker, 2)
    ckpt = tmp_path / "ckpt"
    prefix = unique_name("eo")
    q = _stream(spark, broker, topic, prefix, ckpt, crash=f"{crash}@1")
    deadline = time.monotonic() + 90
    while q.isActive and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not q.isActive and "test crash" in str(q.exception())
    assert _committed_batches(ckpt) == {0}          # Spark did not record batch 1
    before = len(read_all(broker.bootstrap, topic, 2, "read_committed"))
    log_dir = ckpt / "fastkafka-transactions"
    state = json.loads((log_dir / "1.json").read_text())["state"]
    assert state == ("committed" if crash == "after_commit" else "committing")
    if crash != "after_commit":   # nothing (after_log) or part (after_first_commit) is visible yet
        assert len(read_all(broker.bootstrap, topic, 2, "read_committed")) < \
            len(read_all(broker.bootstrap, topic, 2, "read_uncommitted"))

    _run_until(_stream(spark, broker, topic, prefix, ckpt), ckpt, 4)
    assert json.loads((log_dir / "1.json").read_text())["state"] == "committed"
    assert _expect_each_row_once(broker, topic) > before
    # the replayed batch 1 wrote its rows again, and they were aborted
    assert len(read_all(broker.bootstrap, topic, 2, "read_uncommitted")) > \
        len(read_all(broker.bootstrap, topic, 2, "read_committed"))


def test_batch_writer_exactly_once_micro_batches(spark, kafka_broker, tmp_path):
    """foreachBatch through batch_writer(delivery_guarantee="exactly_once"): each micro-batch is a
    batch write with its batch id, committed by the driver and recorded in the log directory."""
    topic = _topic(kafka_broker, 2)
    ckpt = tmp_path / "ckpt"
    log_dir = tmp_path / "txnlog"
    sdf = (spark.readStream.format("rate").option("rowsPerSecond", 1000).option("numPartitions", 2)
           .load().selectExpr("cast(cast(value AS string) AS binary) AS value"))
    q = (sdf.writeStream.foreachBatch(spark_sink.batch_writer(
            topic=topic, bootstrap_servers=kafka_broker.bootstrap, delivery_guarantee="exactly_once",
            transactional_id_prefix=unique_name("eo"), transaction_log_path=str(log_dir)))
         .option("checkpointLocation", str(ckpt)).trigger(processingTime="700 milliseconds").start())
    _run_until(q, ckpt, 3)
    rows = _expect_each_row_once(kafka_broker, topic)
    assert rows > 0
    entries = [json.loads((log_dir / f).read_text()) for f in os.listdir(log_dir) if f.endswith(".json")]
    assert entries and all(e["state"] == "committed" for e in entries)
    assert {e["batch_id"] for e in entries} <= _committed_batches(ckpt) | {max(_committed_batches(ckpt)) + 1}
