"""``partition_writer`` and ``batch_writer`` on Spark 3.5 (no Python Data Source API there).

pyspark 3.5 cannot share a process with the suite's pyspark 4.2: the job (tests/spark35/job35.py)
runs in a child process in the Spark 3.5 venv (``fastkafka_tools.spark35``, made by
scripts/setup.sh), one small JVM (``local[1]``, 512 MB heap), against the session's Apache Kafka
node. This process reads the topics back with confluent-kafka's consumer: every row exactly once
with its key, value and headers; the exactly_once topic with ``isolation.level=read_committed``.
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest

from brokers import read_all, read_back, unique_name

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
N = 400            # rows per write (two micro-batches of 200 for the streams)
NPART = 3


def expected_row(i: int):
    """Row i as job35.rows_sql makes it, as confluent-kafka reads it."""
    key = None if i % 7 == 3 else b"k%d" % i
    value = None if i % 13 == 5 else b"" if i % 11 == 4 else b"v%d" % i
    headers = [] if i % 3 != 2 else [("h", b"%d" % i), ("h", None)]
    return key, value, headers


REGISTRY_USER, REGISTRY_PASSWORD = "s35", "s35-secret"


@pytest.fixture(scope="module")
def registry35():
    """The project's test registry server (this process, a free port), which the Spark 3.5 job's
    driver registers its schemas with."""
    from fastkafka_tools.schema_registry_server import start_registry

    server = start_registry(users={REGISTRY_USER: REGISTRY_PASSWORD})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def spark35_run(kafka_broker, registry35, tmp_path_factory):
    from fastkafka_tools.spark35 import ensure_env

    py = ensure_env()
    topics = {name: unique_name("s35" + name[:3]) for name in
              ("rows", "stream_arrow", "stream_rows", "exactly_once")}
    reg_topics = {name: unique_name("s35r" + name[:3]) for name in
                  ("rows", "avro_arrow", "avro_rows", "json")}
    for t in [*topics.values(), *reg_topics.values()]:
        kafka_broker.create_topic(t, NPART)
    work = str(tmp_path_factory.mktemp("spark35"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK", "SPARK_", "PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = ROOT                    # fastkafka and spark_sink from the work tree
    proc = subprocess.run([py, os.path.join(HERE, "job35.py"), kafka_broker.bootstrap,
                           json.dumps({"rows": N, "topics": topics, "registry": {
                               "url": registry35.url, "topics": reg_topics,
                               "user_info": f"{REGISTRY_USER}:{REGISTRY_PASSWORD}"}}), work],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                          timeout=300, cwd=work)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"the Spark 3.5 job failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result["registry_topics"] = reg_topics
    return topics, result, proc.stderr


def test_spark35_environment(spark35_run):
    """The job ran on pyspark 3.5 without the data source API; register() says what to use."""
    _, result, _ = spark35_run
    assert result["pyspark"].startswith("3.5."), result["pyspark"]
    assert result["data_source_api"] is False
    assert result["datasource_imported"] is False
    assert result["arrow_tasks_available"] is True
    assert "partition_writer" in result["register_error"] and "batch_writer" in result["register_error"]


def _records(kafka_broker, topic):
    got = read_back(kafka_broker.bootstrap, topic, NPART, N, timeout=60)
    return [m for msgs in got.values() for m in msgs]


def _assert_rows(msgs, label, task_headers=False):
    want = collections.Counter((k, v, tuple(h)) for k, v, h in map(expected_row, range(N)))
    have = collections.Counter()
    for m in msgs:
        hs = list(m.headers)
        if task_headers:
            names = [h[0] for h in hs[-3:]]
            assert names == ["spark.partition", "spark.attempt", "spark.batch"], (label, hs)
            assert hs[-1][1] in (b"0", b"1"), (label, hs)      # the micro-batch id
            hs = hs[:-3]
        have[(m.key, m.value, tuple(hs))] += 1
    assert have == want, f"{label}: missing {want - have}, extra or repeated {have - want}"


def test_partition_writer_spark35(spark35_run, kafka_broker):
    """foreachPartition(partition_writer(...)): every row once, keys/values/headers exact."""
    topics, _, _ = spark35_run
    _assert_rows(_records(kafka_broker, topics["rows"]), "partition_writer")


def test_batch_writer_spark35_arrow_tasks(spark35_run, kafka_broker):
    """foreachBatch(batch_writer(...)), two micro-batches, tasks reading Arrow batches (mapInArrow),
    with the task headers (the micro-batch id in spark.batch)."""
    topics, result, _ = spark35_run
    assert result["batches_arrow"] == 2
    _assert_rows(_records(kafka_broker, topics["stream_arrow"]), "batch_writer (Arrow)", task_headers=True)


def test_batch_writer_spark35_row_tasks(spark35_run, kafka_broker):
    """The same through Rows (rdd.mapPartitions: the path where pandas is missing)."""
    topics, result, _ = spark35_run
    assert result["batches_rows"] == 2
    _assert_rows(_records(kafka_broker, topics["stream_rows"]), "batch_writer (Rows)")


def test_batch_writer_spark35_exactly_once(spark35_run, kafka_broker):
    """delivery_guarantee="exactly_once": the driver committed both micro-batches' transactions
    (its log records them); a read_committed consumer sees every value once, and every
    partition is at its end (no transaction left open)."""
    topics, result, _ = spark35_run
    assert result["batches_exactly_once"] == 2
    assert result["txlog"] == ["0.json", "1.json"]
    values = read_all(kafka_broker.bootstrap, topics["exactly_once"], NPART,
                      isolation_level="read_committed", timeout=60)
    want = collections.Counter(expected_row(i)[1] for i in range(N))
    assert collections.Counter(values) == want


def expected_record(i: int):
    """job35.record_sql's value of row i as confluent-kafka's AvroDeserializer gives it."""
    import datetime
    import decimal

    if i % 13 == 5:
        return None
    return {"n": i, "s": None if i % 5 == 0 else f"ü日{i}",
            "dec": decimal.Decimal(i) / 4 - 10,
            "dt": datetime.date(2000, 1, 1) + datetime.timedelta(days=i),
            "ts": datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
            + datetime.timedelta(microseconds=i * 1000003),
            "arr": [] if i % 4 == 0 else [i, -i],
            "m": {} if i % 3 == 0 else {"a": i},
            "inner": {"b": i % 2 == 0, "x": None if i % 7 == 0 else i / 2}}


def _json_form(v):
    """A value of expected_record as the JSON rules write it (dates and timestamps as text)."""
    import datetime
    import decimal

    if isinstance(v, dict):
        return {k: _json_form(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_form(x) for x in v]
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    return v


def _registry_client(registry35):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": registry35.url,
                                 "basic.auth.user.info": f"{REGISTRY_USER}:{REGISTRY_PASSWORD}"})


@pytest.mark.parametrize("name", ["rows", "avro_arrow", "avro_rows", "json"])
def test_registry_formats_spark35(spark35_run, kafka_broker, registry35, name):
    """Struct values as Schema Registry Avro (partition_writer's Rows; batch_writer's Arrow and
    Row tasks) and JSON (batch_writer) on Spark 3.5: confluent-kafka's deserializers read every
    row back equal; each topic's schema registered once by the driver, however many tasks and
    micro-batches."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    _, result, _ = spark35_run
    # the job's write: 1 (partition_writer) or the micro-batch count, or the failure's text
    assert result["registry"][name] == (1 if name == "rows" else 2), result["registry"][name]
    topic = result["registry_topics"][name]
    subject = f"{topic}-value"
    assert registry35.count("POST", f"/subjects/{subject}/versions") == 1
    client = _registry_client(registry35)
    latest = client.get_latest_version(subject)
    if name == "json":
        decode = JSONDeserializer(latest.schema.schema_str, schema_registry_client=client)
    else:
        decode = AvroDeserializer(client)
    got = {}
    for m in _records(kafka_broker, topic):
        k = int(m.key)
        assert k not in got, (name, k)
        if m.value is not None:
            assert m.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
        got[k] = None if m.value is None else decode(m.value, SerializationContext(topic, MessageField.VALUE))
    assert sorted(got) == list(range(N))
    for i in range(N):
        want = expected_record(i)
        if name == "json":
            want = None if want is None else _json_form(want)
        assert got[i] == want, (name, i, got[i], want)
