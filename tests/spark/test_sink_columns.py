"""The sink's per-row ``headers`` and ``timestamp`` columns, through the data source's Arrow path
(format("fastkafka"): send_batch reads them from the Arrow buffers) and through partition_writer
(the row path), read back exactly by confluent-kafka's consumer from Apache Kafka.

Small data: a few thousand rows, computed the same way in Spark (SQL) and here (Python).
"""
from __future__ import annotations

import time

import pytest
from pyspark.errors import AnalysisException, PythonException

import spark_sink
from brokers import read_back, unique_name

pytestmark = pytest.mark.spark

NPART = 4
N = 3000
BASE_MS = 1_700_000_000_000

# Row i: a timestamp (null for i % 11 == 0; sub-ms micros that must be truncated), and headers:
# none (null list) for i % 5 == 0, an empty list for i % 5 == 1, else duplicates, a null value
# and the row's number, in this order.
SQL = [
    "cast(id AS string) AS key",
    "concat('v', id) AS value",
    f"CASE WHEN id % 11 = 0 THEN NULL ELSE timestamp_micros({BASE_MS * 1000} + id * 1000003) END "
    "AS timestamp",
    "CASE WHEN id % 5 = 0 THEN NULL WHEN id % 5 = 1 THEN array() ELSE array("
    "named_struct('key', 'dup', 'value', cast('a' AS binary)), "
    "named_struct('key', 'n', 'value', cast(NULL AS binary)), "
    "named_struct('key', 'dup', 'value', cast(concat('b', id) AS binary)), "
    "named_struct('key', 'ü', 'value', cast(cast(id AS string) AS binary))) END AS headers",
]


def expected_ms(i):
    return None if i % 11 == 0 else BASE_MS + (i * 1000003) // 1000


def expected_headers(i, task=()):
    own = [] if i % 5 in (0, 1) else [("dup", b"a"), ("n", None), ("dup", b"b%d" % i),
                                      ("ü", b"%d" % i)]
    return own + list(task)


def check(msgs, before_ms, after_ms, task_names=()):
    assert len(msgs) == N
    seen = set()
    for m in msgs:
        i = int(m.key)
        seen.add(i)
        assert m.value == b"v%d" % i
        want = expected_ms(i)
        if want is None:                     # null: the producer's current time
            assert before_ms <= m.timestamp <= after_ms, (i, m.timestamp)
        else:
            assert m.timestamp == want, (i, m.timestamp, want)
        own = expected_headers(i)
        assert m.headers[:len(own)] == own, (i, m.headers)
        assert [h[0] for h in m.headers[len(own):]] == list(task_names)
    assert seen == set(range(N))


def _topic(broker):
    name = unique_name("sc")
    broker.create_topic(name, NPART)
    return name


def test_data_source_writes_each_rows_headers_and_timestamp(spark, kafka_broker):
    topic = _topic(kafka_broker)
    df = spark.range(N).selectExpr(*SQL).repartition(3)
    before = int(time.time() * 1000)
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
       .option("kafka.linger.ms", "5").option("task.headers", "true").save())
    after = int(time.time() * 1000)
    got = read_back(kafka_broker.bootstrap, topic, NPART, N, timeout=60)
    check([m for ms in got.values() for m in ms], before, after,
          ("spark.partition", "spark.attempt", "spark.batch"))


def test_data_source_with_a_topic_column_splits_the_columns_with_the_rows(spark, kafka_broker):
    topics = [_topic(kafka_broker), _topic(kafka_broker)]
    df = spark.range(N).selectExpr(
        *SQL, f"CASE WHEN id % 3 = 0 THEN '{topics[0]}' ELSE '{topics[1]}' END AS topic"
    ).repartition(2)
    before = int(time.time() * 1000)
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).save())
    after = int(time.time() * 1000)
    msgs = []
    for k, t in enumerate(topics):
        count = sum(1 for i in range(N) if (i % 3 == 0) == (k == 0))
        got = read_back(kafka_broker.bootstrap, t, NPART, count, timeout=60)
        part = [m for ms in got.values() for m in ms]
        assert all((int(m.key) % 3 == 0) == (k == 0) for m in part)
        msgs += part
    check(msgs, before, after)


def test_partition_writer_writes_each_rows_headers_and_timestamp(spark, kafka_broker):
    topic = _topic(kafka_broker)
    df = spark.range(N).selectExpr(*SQL).repartition(2)
    before = int(time.time() * 1000)
    df.foreachPartition(spark_sink.partition_writer(topic=topic,
                                                    bootstrap_servers=kafka_broker.bootstrap))
    after = int(time.time() * 1000)
    got = read_back(kafka_broker.bootstrap, topic, NPART, N, timeout=60)
    check([m for ms in got.values() for m in ms], before, after)


def test_a_bigint_timestamp_column_is_ms_since_the_epoch(spark, kafka_broker):
    topic = _topic(kafka_broker)
    df = spark.range(200).selectExpr("concat('v', id) AS value", "cast(id AS string) AS key",
                                     f"CASE WHEN id = 7 THEN NULL ELSE {BASE_MS} + id END AS timestamp")
    before = int(time.time() * 1000)
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic).save())
    got = read_back(kafka_broker.bootstrap, topic, NPART, 200, timeout=60)
    for m in (m for ms in got.values() for m in ms):
        i = int(m.key)
        if i == 7:
            assert before <= m.timestamp <= int(time.time() * 1000)
        else:
            assert m.timestamp == BASE_MS + i


@pytest.mark.parametrize("expr,type_name", [
    ("cast(id AS string) AS timestamp", "string"),
    ("cast(id AS int) AS timestamp", "int"),
    ("cast(id AS double) AS timestamp", "double"),
])
def test_a_timestamp_column_of_another_type_is_refused_on_the_driver(spark, expr, type_name):
    df = spark.range(3).selectExpr("cast(cast(id AS string) AS binary) AS value", expr)
    with pytest.raises(AnalysisException, match=f"column 'timestamp' must be timestamp .*not {type_name}"):
        (df.write.format("fastkafka").mode("append")
           .option("kafka.bootstrap.servers", "127.0.0.1:1").option("topic", "t").save())


def test_a_header_with_a_null_key_fails_the_task_naming_the_row(spark, kafka_broker):
    topic = _topic(kafka_broker)
    df = spark.range(10).coalesce(1).selectExpr(
        "cast(cast(id AS string) AS binary) AS value",
        "CASE WHEN id = 6 THEN array(named_struct('key', cast(NULL AS string), 'value', "
        "cast('x' AS binary))) ELSE array() END AS headers")
    with pytest.raises(PythonException, match=r"record_headers\[6\]: header 0 has a null key"):
        (df.write.format("fastkafka").mode("append")
           .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic).save())
