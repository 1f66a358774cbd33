"""A ``format("kafka")`` job moved to ``format("fastkafka")`` with its options, on Spark 4.2 and
Apache Kafka (read back with confluent-kafka):

* save modes: Spark refuses ErrorIfExists (the default) and Ignore for every Python data source
  (UNSUPPORTED_DATA_SOURCE_SAVE_MODE, before the sink runs; docs/spark.md quotes it); Overwrite is
  refused by the sink, as Spark's Kafka sink refuses it; Append writes;
* the options of Spark's Kafka source and consumer settings are ignored (named in the summary),
  the rows arrive;
* output modes: append and complete write; Spark refuses update for a Python data source when the
  query runs (the error docs/spark.md quotes); foreachBatch with spark_sink.batch_writer is the way
  to write an update-mode query.
"""
from __future__ import annotations

import collections
import json

import pytest

import spark_sink
from brokers import read_back, unique_name

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.timeout(300)]

IGNORED = {"failOnDataLoss": "false", "startingOffsets": "earliest", "includeHeaders": "true",
           "kafka.group.id": "old-group", "kafka.auto.offset.reset": "earliest",
           "kafka.session.timeout.ms": "45000"}


def _df(spark, n=50):
    return spark.range(n).selectExpr("cast(concat('k', id % 7) AS binary) AS key",
                                     "cast(id AS string) AS value").coalesce(2)


def _base(df, bootstrap, topic):
    return (df.write.format("fastkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic))


@pytest.mark.parametrize("mode, shown", [(None, "ErrorIfExists"), ("errorifexists", "ErrorIfExists"),
                                         ("ignore", "Ignore")])
def test_spark_refuses_errorifexists_and_ignore_for_python_data_sources(spark, mode, shown):
    from pyspark.errors import AnalysisException

    w = _base(_df(spark), "127.0.0.1:9", "never-written")
    if mode is not None:
        w = w.mode(mode)
    with pytest.raises(AnalysisException) as ei:
        w.save()
    text = str(ei.value)
    assert ei.value.getCondition() == "UNSUPPORTED_DATA_SOURCE_SAVE_MODE"
    assert (f'The data source "fastkafka" cannot be written in the "{shown}" mode. Please use '
            f'either the "Append" or "Overwrite" mode instead.') in text


def test_overwrite_is_refused_before_any_row_is_written(spark, kafka_broker):
    topic = unique_name("spark-overwrite")
    kafka_broker.create_topic(topic, 1)
    with pytest.raises(Exception) as ei:
        _base(_df(spark), kafka_broker.bootstrap, topic).mode("overwrite").save()
    text = str(ei.value)
    assert "fastkafka.errors.ConfigError" in text or "ConfigError" in type(ei.value).__name__
    assert "Save mode Overwrite not allowed for Kafka" in text and 'mode("append")' in text
    got = read_back(kafka_broker.bootstrap, topic, 1, 0, timeout=5)
    assert got[0] == []


def test_spark_kafka_options_are_ignored_and_named_and_the_rows_arrive(spark, kafka_broker, tmp_path):
    topic = unique_name("spark-ignored")
    kafka_broker.create_topic(topic, 2)
    summary = tmp_path / "summary.jsonl"
    w = (_base(_df(spark), kafka_broker.bootstrap, topic).mode("append")
         .option("kafka.acks", "all").option("kafka.linger.ms", "5")
         .option("summary.path", str(summary)).options(**IGNORED))
    w.save()
    got = read_back(kafka_broker.bootstrap, topic, 2, 50, timeout=60)
    assert sorted(int(m.value) for p in got.values() for m in p) == list(range(50))
    [s] = spark_sink.read_summaries(str(summary))
    # (Spark hands a data source its option names in lower case)
    assert sorted(s["ignored_options"]) == sorted(k.lower() for k in IGNORED) and s["rows"] == 50


# ------------------------------------------------------------------------------- output modes
def _stream(spark, tmp_path, n=60):
    """A finite stream (a JSON file source read with availableNow): ids 0..n-1."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "part-0.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(n)))
    return spark.readStream.schema("id long").json(str(src))


def _counts(sdf):
    return (sdf.groupBy((sdf.id % 3).alias("g")).count()
            .selectExpr("cast(g AS string) AS key", "cast(`count` AS string) AS value"))


def test_append_and_complete_modes_write(spark, kafka_broker, tmp_path):
    topic = unique_name("spark-modes")
    kafka_broker.create_topic(topic, 1)
    opts = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic}
    sdf = _stream(spark, tmp_path)
    q = (sdf.selectExpr("cast(id AS string) AS value").writeStream.format("fastkafka")
         .outputMode("append").options(**opts).option("checkpointLocation", str(tmp_path / "c1"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    q = (_counts(sdf).writeStream.format("fastkafka").outputMode("complete").options(**opts)
         .option("checkpointLocation", str(tmp_path / "c2")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = read_back(kafka_broker.bootstrap, topic, 1, 63, timeout=60)[0]
    assert sorted(int(m.value) for m in got[:60]) == list(range(60))
    assert {(m.key, m.value) for m in got[60:]} == {(b"0", b"20"), (b"1", b"20"), (b"2", b"20")}


def test_update_mode_is_refused_by_spark_and_batch_writer_is_the_way(spark, kafka_broker, tmp_path):
    from pyspark.errors import StreamingQueryException

    topic = unique_name("spark-update")
    kafka_broker.create_topic(topic, 1)
    sdf = _stream(spark, tmp_path)
    q = (_counts(sdf).writeStream.format("fastkafka").outputMode("update")
         .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
         .option("checkpointLocation", str(tmp_path / "c1")).trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as ei:
        q.awaitTermination(120)
    assert "requirement failed: fastkafka does not support Update mode." in str(ei.value)
    # the workaround documented in docs/spark.md
    q = (_counts(sdf).writeStream.outputMode("update")
         .foreachBatch(spark_sink.batch_writer(topic=topic, bootstrap_servers=kafka_broker.bootstrap))
         .option("checkpointLocation", str(tmp_path / "c2")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = read_back(kafka_broker.bootstrap, topic, 1, 3, timeout=60)[0]
    assert collections.Counter((m.key, m.value) for m in got) == collections.Counter(
        {(b"0", b"20"): 1, (b"1", b"20"): 1, (b"2", b"20"): 1})
