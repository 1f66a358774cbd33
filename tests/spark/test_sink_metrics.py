"""The producer's metrics per Spark task in the data source's summary (TaskReport.producer_metrics)
and their aggregate on the driver, on Apache Kafka: two writes in a row through the cached producer
of each Python worker report each write's own records, not the worker's running totals."""
from __future__ import annotations

import pytest

import spark_sink
from brokers import read_back, unique_name

pytestmark = pytest.mark.spark


def _write(spark, kafka_broker, topic, n, summary):
    df = spark.range(n).selectExpr("cast(concat('v', id) AS binary) AS value").repartition(3)
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
       .option("kafka.linger.ms", "5").option("summary.path", str(summary)).save())


def test_each_task_reports_its_producers_metrics_and_the_driver_aggregates(spark, kafka_broker,
                                                                           tmp_path):
    topic = unique_name("sm")
    kafka_broker.create_topic(topic, 3)
    summary = tmp_path / "summary.jsonl"
    sizes = (3_000, 1_200)
    for n in sizes:
        _write(spark, kafka_broker, topic, n, summary)
    read_back(kafka_broker.bootstrap, topic, 3, sum(sizes), timeout=60)
    summaries = spark_sink.read_summaries(str(summary))
    assert [s["rows"] for s in summaries] == list(sizes)
    for n, s in zip(sizes, summaries):
        tasks = [r["producer_metrics"] for r in s["reports"]]
        assert len(tasks) == 3 and all(t is not None for t in tasks)
        for r, t in zip(s["reports"], tasks):
            # a task's records, not the cached producer's total since it was made
            assert t["record-send-total"] == r["rows"]
            assert t["record-error-total"] == 0 and t["record-retry-total"] == 0
            assert t["batches"] >= 1 and 1 <= t["produce-requests"] <= t["batches"]
            assert t["batch-size-avg"] > 61 and t["records-per-request-avg"] >= 1
            assert 0 < t["request-latency-avg"] <= t["request-latency-max"]
            assert t["produce-throttle-time-max"] == 0 and t["bufferpool-wait-time-ns-total"] >= 0
        agg = s["producer_metrics"]
        assert agg["record-send-total"] == n
        assert agg["batches"] == sum(t["batches"] for t in tasks)
        assert agg["request-latency-max"] == max(t["request-latency-max"] for t in tasks)
        lo = min(t["batch-size-avg"] for t in tasks)
        hi = max(t["batch-size-avg"] for t in tasks)
        assert lo <= agg["batch-size-avg"] <= hi


def test_the_tasks_metrics_reach_the_drivers_accumulators(spark, kafka_broker, tmp_path):
    accs = spark_sink.register(spark)         # replaces the session's registration
    assert isinstance(accs, spark_sink.SinkAccumulators)
    before = accs.value()
    assert before["rows"] == 0 and before["request-latency-max"] is None
    topic = unique_name("sma")
    kafka_broker.create_topic(topic, 3)
    summary = tmp_path / "summary.jsonl"
    _write(spark, kafka_broker, topic, 2_000, summary)
    _write(spark, kafka_broker, topic, 500, summary)
    got = accs.value()
    summaries = spark_sink.read_summaries(str(summary))
    assert got["rows"] == 2_500 and got["record-send-total"] == 2_500
    assert got["bytes"] == sum(s["bytes"] for s in summaries)
    assert got["batches"] == sum(s["producer_metrics"]["batches"] for s in summaries)
    assert got["record-error-total"] == 0
    assert got["request-latency-max"] == max(s["producer_metrics"]["request-latency-max"]
                                             for s in summaries)
    accs.reset()
    assert accs.value()["rows"] == 0 and accs.value()["request-latency-max"] is None
    # without accumulators the data source works as before
    assert spark_sink.register(spark, accumulators=False) is None
    _write(spark, kafka_broker, topic, 100, summary)
    assert accs.value()["rows"] == 0
    read_back(kafka_broker.bootstrap, topic, 3, 2_600, timeout=60)
