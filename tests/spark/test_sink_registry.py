"""Struct (and other) columns written as Schema Registry Avro / JSON by the sink
(``value.format``, ``key.format``, ``schema.registry.*``), read back by independent readers:

* Spark's own ``from_avro`` (spark-avro, on the session's classpath) on the values with their 5-byte
  header cut (``substring(value, 6)``), with the schema the registry holds, against the source
  DataFrame (both collected);
* confluent-kafka's consumer with its ``AvroDeserializer`` / ``JSONDeserializer`` and its own
  ``SchemaRegistryClient`` against the same registry;
* the JSON text parsed with exact decimals.

The registry is the project's test server (fastkafka_tools.schema_registry_server), in this process
on a free port, with basic authentication: the data source's driver code runs in Spark's Python
workers, other processes, so ``mock://`` (per process) cannot serve. Its request log proves that a
write registers its schema exactly once, however many tasks it has.
"""
from __future__ import annotations

import base64
import datetime
import decimal
import json
import time

import pytest

import spark_sink
from brokers import read_back, unique_name

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.timeout(300)]

USER, PASSWORD = "sink", "registry-s3cret"
N = 240

#: the value column: a struct holding every type of the matrix, nulls, extremes, non-ASCII text,
#: empty arrays and maps; a null row every 17th (a tombstone)
MATRIX_SQL = """
CASE WHEN id % 17 = 5 THEN NULL ELSE named_struct(
  'i', CASE WHEN id = 0 THEN 2147483647 WHEN id = 1 THEN -2147483648 WHEN id % 11 = 1 THEN NULL
            ELSE cast(id * 7 - 700 AS int) END,
  'l', CASE WHEN id = 0 THEN 9223372036854775807 WHEN id = 1 THEN -9223372036854775807 - 1
            ELSE id * 1000003 - 50000000 END,
  'f', CASE WHEN id % 11 = 2 THEN NULL ELSE cast(id / 4.0 - 20 AS float) END,
  'd', CASE WHEN id = 2 THEN cast('1.7976931348623157E308' AS double)
            WHEN id = 3 THEN cast('-4.9E-324' AS double) ELSE cast(id / 8.0 - 7 AS double) END,
  'b', id % 2 = 0,
  'nb', CASE WHEN id % 3 = 0 THEN NULL ELSE id % 3 = 1 END,
  's', CASE WHEN id % 5 = 0 THEN '' WHEN id % 13 = 7 THEN NULL
            ELSE concat('naïve café 日本語 🎉 ', cast(id AS string)) END,
  'bin', CASE WHEN id % 6 = 0 THEN cast('' AS binary) WHEN id % 6 = 1 THEN NULL
              ELSE unhex(concat('00ff', hex(id * 77777))) END,
  'dec', CASE WHEN id = 4 THEN cast('9999999999999999999999999999.9999999999' AS decimal(38,10))
              WHEN id = 5 THEN cast('-9999999999999999999999999999.9999999999' AS decimal(38,10))
              WHEN id % 9 = 0 THEN NULL
              ELSE cast(id * 1234567.0123456789 - 99999 AS decimal(38,10)) END,
  'dec_small', cast(id / 8.0 - 3 AS decimal(9,2)),
  'dt', CASE WHEN id % 10 = 9 THEN NULL ELSE date_add(DATE'1970-01-01', cast(id * 37 - 3000 AS int)) END,
  'ts', CASE WHEN id % 10 = 8 THEN NULL ELSE timestamp_micros(id * 1234567891 - 50000000000) END,
  'arr', CASE WHEN id % 4 = 0 THEN cast(array() AS array<int>)
              WHEN id % 4 = 1 THEN array(1, NULL, cast(id AS int))
              WHEN id % 4 = 2 THEN NULL
              ELSE sequence(0, cast(id % 5 AS int)) END,
  'm', CASE WHEN id % 3 = 0 THEN cast(map() AS map<string, bigint>)
            WHEN id % 3 = 1 THEN map(concat('k', cast(id AS string)), id, 'ž', cast(NULL AS bigint))
            ELSE NULL END,
  'nested', named_struct('x', cast(id % 3 AS int),
                         'inner', CASE WHEN id % 7 = 6 THEN NULL
                                  ELSE named_struct('y', concat('y', cast(id AS string)),
                                                    'z', CASE WHEN id % 2 = 0 THEN NULL
                                                         ELSE cast(id AS double) END) END),
  'structs', array(named_struct('n', id, 'tag', 'a'), named_struct('n', -id, 'tag', cast(NULL AS string)))
) END AS value"""


@pytest.fixture(scope="module")
def registry():
    from fastkafka_tools.schema_registry_server import start_registry

    server = start_registry(users={USER: PASSWORD})
    yield server
    server.stop()


def _auth(server) -> dict:
    return {"schema.registry.url": server.url,
            "schema.registry.basic.auth.credentials.source": "USER_INFO",
            "schema.registry.basic.auth.user.info": f"{USER}:{PASSWORD}"}


def _confluent_client(server):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": server.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"})


def _topic(broker, partitions=3):
    name = unique_name("sr")
    broker.create_topic(name, partitions)
    return name


def _matrix(spark, n=N, partitions=4):
    return spark.range(0, n, 1, partitions).selectExpr("id AS key", MATRIX_SQL)


def _registrations(server, subject: str) -> int:
    return server.count("POST", f"/subjects/{subject}/versions")


def _write(df, broker, topic, server, **options):
    w = (df.write.format("fastkafka").mode("append")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic))
    for k, v in {**_auth(server), **options}.items():
        w = w.option(k, v)
    w.save()


def _messages(broker, topic, count, partitions=3):
    got = read_back(broker.bootstrap, topic, partitions, count, timeout=60)
    return [m for msgs in got.values() for m in msgs]


def _py(v):
    """A collected Spark value as confluent-kafka's AvroDeserializer gives it: Rows as dicts,
    timestamps (pyspark: naive local time) as UTC-aware datetimes, bytearray as bytes."""
    from pyspark.sql import Row

    if isinstance(v, Row):
        return {k: _py(x) for k, x in zip(v.__fields__, v)}
    if isinstance(v, list):
        return [_py(x) for x in v]
    if isinstance(v, dict):
        return {k: _py(x) for k, x in v.items()}
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, datetime.datetime):
        return v.astimezone(datetime.timezone.utc)
    return v


def _json_expected(v):
    """A collected Spark value as the JSON rules write it (binary base64, date ISO, timestamps
    RFC 3339 in UTC with microseconds and Z)."""
    from pyspark.sql import Row

    if isinstance(v, Row):
        return {k: _json_expected(x) for k, x in zip(v.__fields__, v)}
    if isinstance(v, list):
        return [_json_expected(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_expected(x) for k, x in v.items()}
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, datetime.datetime):
        return v.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    return v


def _same_json(got, want, path="value", exact=True):
    """``got`` equals ``want``: numbers compared exactly (a float against the float its text reads
    as), or, with ``exact=False`` (a reader that parses every number as a float), a decimal as the
    float its text reads as."""
    if isinstance(want, dict):
        # key sets: a map's entries have no order (a struct's field order is checked apart)
        assert isinstance(got, dict) and set(got) == set(want), (path, got, want)
        for k in want:
            _same_json(got[k], want[k], f"{path}.{k}", exact)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (path, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            _same_json(g, w, f"{path}[{i}]", exact)
    elif isinstance(want, decimal.Decimal) and not exact:
        assert float(got) == float(want), (path, got, want)
    elif isinstance(want, bool) or want is None or isinstance(want, str):
        assert got == want and type(got) is type(want), (path, got, want)
    elif isinstance(want, float):
        assert float(got) == want, (path, got, want)
    elif isinstance(want, (int, decimal.Decimal)):
        assert decimal.Decimal(got) == decimal.Decimal(want), (path, got, want)
    else:
        raise AssertionError(f"{path}: unexpected {type(want).__name__}")


# ------------------------------------------------------------------------------ Avro
def test_avro_type_matrix_read_back_by_spark_and_confluent(spark, kafka_broker, registry):
    """The data source (Arrow path), value.format=avro and key.format=avro (a bigint key: a
    non-record schema), four tasks: Spark's from_avro and confluent-kafka's AvroDeserializer read
    every row back equal; the key and value schemas are each registered exactly once."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import expr

    topic = _topic(kafka_broker)
    df = _matrix(spark)
    source = {r.key: r.value for r in df.collect()}
    assert len(source) == N
    _write(df, kafka_broker, topic, registry, **{"value.format": "avro", "key.format": "avro"})

    assert _registrations(registry, f"{topic}-value") == 1
    assert _registrations(registry, f"{topic}-key") == 1
    client = _confluent_client(registry)
    latest = client.get_latest_version(f"{topic}-value")
    schema = json.loads(latest.schema.schema_str)
    assert schema["type"] == "record" and schema["name"] == "topLevelRecord"
    assert [f["name"] for f in schema["fields"]] == list(df.schema["value"].dataType.fieldNames())
    key_schema = client.get_latest_version(f"{topic}-key").schema.schema_str
    assert json.loads(key_schema) == "long"

    # Spark's own reader
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    header = raw.selectExpr("substring(value, 1, 5) AS h").where("h IS NOT NULL").distinct().collect()
    assert [bytes(r.h) for r in header] == [b"\x00" + latest.schema_id.to_bytes(4, "big")]
    back = raw.select(from_avro(expr("substring(key, 6)"), key_schema).alias("k"),
                      from_avro(expr("substring(value, 6)"), latest.schema.schema_str).alias("v")
                      ).collect()
    assert len(back) == N
    got = {r.k: r.v for r in back}
    assert set(got) == set(source)
    for k in source:
        assert got[k] == source[k], (k, got[k], source[k])
    assert sum(v is None for v in got.values()) == sum(1 for i in range(N) if i % 17 == 5)

    # confluent-kafka's consumer and AvroDeserializer
    values = AvroDeserializer(client)
    keys = AvroDeserializer(client)
    msgs = _messages(kafka_broker, topic, N)
    seen = {}
    for m in msgs:
        k = keys(m.key, SerializationContext(topic, MessageField.KEY))
        seen[k] = None if m.value is None else values(m.value, SerializationContext(topic, MessageField.VALUE))
    assert set(seen) == set(source)
    for k, row in source.items():
        assert seen[k] == _py(row), (k, seen[k], _py(row))

    # fastavro (a third reader) decodes the payloads with the registered schema too
    import io

    import fastavro

    parsed = fastavro.parse_schema(schema)
    for m in msgs[:20]:
        if m.value is not None:
            k = keys(m.key, SerializationContext(topic, MessageField.KEY))
            assert fastavro.schemaless_reader(io.BytesIO(m.value[5:]), parsed) == _py(source[k])

    # a second write of the same DataFrame finds the schema registered: the same id, no new version
    _write(df.limit(10), kafka_broker, topic, registry, **{"value.format": "avro", "key.format": "avro"})
    assert client.get_versions(f"{topic}-value") == [latest.version]
    assert _registrations(registry, f"{topic}-value") <= 2


def test_avro_explicit_schema_record_name_strategy_and_topic_column(spark, kafka_broker, registry):
    """Rows with a 'topic' column and no 'topic' option: RecordNameStrategy names the subject after
    the record (value.record.name / value.record.namespace), the schema registered once for both
    topics; an explicit value.schema is used as given."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    t1, t2 = _topic(kafka_broker, 2), _topic(kafka_broker, 2)
    df = spark.range(0, 60, 1, 3).selectExpr(
        f"CASE WHEN id % 2 = 0 THEN '{t1}' ELSE '{t2}' END AS topic",
        "cast(id AS string) AS key",
        "named_struct('n', id, 'label', concat('é', cast(id AS string))) AS value")
    name = unique_name("Rec").replace("-", "_")
    w = (df.write.format("fastkafka").mode("append")
         .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
         .option("value.format", "avro").option("value.record.name", name)
         .option("value.record.namespace", "com.example")
         .option("value.subject.name.strategy",
                 "io.confluent.kafka.serializers.subject.RecordNameStrategy"))
    for k, v in _auth(registry).items():
        w = w.option(k, v)
    w.save()
    subject = f"com.example.{name}"
    assert _registrations(registry, f"{subject}") == 1
    client = _confluent_client(registry)
    assert json.loads(client.get_latest_version(subject).schema.schema_str)["name"] == name
    d = AvroDeserializer(client)
    for t in (t1, t2):
        for m in _messages(kafka_broker, t, 30, 2):
            i = int(m.key)
            assert d(m.value, SerializationContext(t, MessageField.VALUE)) == {"n": i, "label": f"é{i}"}

    # without a topic option TopicNameStrategy has no topic: the driver says what to do
    with pytest.raises(Exception) as ei:
        w2 = (df.write.format("fastkafka").mode("append")
              .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("value.format", "avro"))
        for k, v in _auth(registry).items():
            w2 = w2.option(k, v)
        w2.save()
    assert "RecordNameStrategy" in str(ei.value) and "'topic'" in str(ei.value)

    # an explicit schema: a field the column's type does not fit is named on the driver, at once
    topic = _topic(kafka_broker, 1)
    before = len(registry.requests)
    bad = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "long"}, {"name": "label", "type": "int"}]})
    with pytest.raises(Exception) as ei:
        _write(df.drop("topic"), kafka_broker, topic, registry,
               **{"value.format": "avro", "value.schema": bad})
    text = str(ei.value)
    assert "SchemaMismatchError" in text or "SCHEMA_MISMATCH" in text, text[-2000:]
    assert "label" in text, text[-2000:]
    assert not [r for r in registry.requests[before:] if r[0] == "POST"]   # nothing registered
    from brokers import read_all
    assert read_all(kafka_broker.bootstrap, topic, 1, timeout=5) == []     # nothing written

    good = json.dumps({"type": "record", "name": "R", "namespace": "x.y", "fields": [
        {"name": "n", "type": "long"}, {"name": "label", "type": ["null", "string"]}]})
    _write(df.drop("topic"), kafka_broker, topic, registry,
           **{"value.format": "avro", "value.schema": good})
    assert json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str)["namespace"] == "x.y"
    got = {int(m.key): d(m.value, SerializationContext(topic, MessageField.VALUE))
           for m in _messages(kafka_broker, topic, 60, 1)}
    assert got == {i: {"n": i, "label": f"é{i}"} for i in range(60)}


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_partition_writer_row_path(spark, kafka_broker, registry, fmt):
    """partition_writer (Rows, foreachPartition) with schema=df.schema: the schema derived and
    registered on the driver once, each Row encoded by the same encoder; read back equal (JSON:
    decimals exact, as the Arrow path writes them)."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = _topic(kafka_broker)
    df = (_matrix(spark, n=120, partitions=3).selectExpr("cast(key AS string) AS key", "value")
          .where("value IS NULL OR value.d < 1e300 AND value.d > -1e300"))
    source = {int(r.key): r.value for r in df.collect()}
    df.foreachPartition(spark_sink.partition_writer(
        topic, bootstrap_servers=kafka_broker.bootstrap, value_format=fmt, schema=df.schema,
        schema_registry={"url": registry.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"}))
    assert _registrations(registry, f"{topic}-value") == 1
    msgs = _messages(kafka_broker, topic, len(source))
    assert {int(m.key) for m in msgs} == source.keys()
    if fmt == "avro":
        d = AvroDeserializer(_confluent_client(registry))
        for m in msgs:
            got = None if m.value is None else d(m.value, SerializationContext(topic, MessageField.VALUE))
            assert got == _py(source[int(m.key)]), (m.key, got)
        return
    for m in msgs:
        want = _json_expected(source[int(m.key)])
        if want is None:
            assert m.value is None
        else:
            _same_json(json.loads(m.value[5:], parse_float=decimal.Decimal), want)


# ------------------------------------------------------------------------------ JSON
def test_json_type_matrix_read_back_equal(spark, kafka_broker, registry):
    """value.format=json on the data source: every row's JSON text equals the JSON rules' value
    (exact decimals), confluent-kafka's JSONDeserializer reads it with the registered JSON Schema;
    one registration."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = _topic(kafka_broker)
    df = (_matrix(spark).selectExpr("cast(key AS string) AS key", "value")
          .where("value IS NULL OR value.d < 1e300 AND value.d > -1e300"))
    source = {int(r.key): r.value for r in df.collect()}
    _write(df, kafka_broker, topic, registry, **{"value.format": "json"})
    assert _registrations(registry, f"{topic}-value") == 1
    client = _confluent_client(registry)
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON"
    msgs = _messages(kafka_broker, topic, len(source))
    deserializer = JSONDeserializer(latest.schema.schema_str, schema_registry_client=client)
    for m in msgs:
        k = int(m.key)
        want = _json_expected(source[k])
        if want is None:
            assert m.value is None
            continue
        assert m.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
        text = json.loads(m.value[5:], parse_float=decimal.Decimal)
        assert list(text) == list(want) and list(text["nested"]) == ["x", "inner"]   # field order
        _same_json(text, want)
        _same_json(deserializer(m.value, SerializationContext(topic, MessageField.VALUE)), want,
                   exact=False)


# ------------------------------------------------------------------------------ streaming
@pytest.mark.parametrize("how", ["data_source", "batch_writer"])
def test_streaming_avro_registered_once(spark, kafka_broker, registry, tmp_path, how):
    """A streaming query (the data source, or foreachBatch with batch_writer) over several
    micro-batches: every value framed with the one schema id, one version under the subject, the
    schema registered by the driver at most once per micro-batch (never by the tasks)."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = _topic(kafka_broker)
    sdf = (spark.readStream.format("rate").option("rowsPerSecond", 500).load()
           .selectExpr("cast(value AS string) AS key",
                       "named_struct('n', value, 's', concat('r', cast(value AS string)), "
                       "'at', timestamp) AS value"))
    if how == "data_source":
        w = sdf.writeStream.format("fastkafka").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        for k, v in {**_auth(registry), "topic": topic, "value.format": "avro"}.items():
            w = w.option(k, v)
    else:
        w = sdf.writeStream.foreachBatch(spark_sink.batch_writer(
            topic=topic, bootstrap_servers=kafka_broker.bootstrap, value_format="avro",
            schema_registry={"url": registry.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"}))
    q = (w.option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while len([p for p in q.recentProgress if p["numInputRows"] > 0]) < 3:
            if q.exception() is not None:
                raise q.exception()
            assert time.monotonic() < deadline, "3 micro-batches did not complete in 120 s"
            time.sleep(0.2)
    finally:
        q.stop()
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    posts = _registrations(registry, f"{topic}-value")
    # the driver registers when Spark plans the writer (the query's start for the data source,
    # each micro-batch for foreachBatch; Spark may plan a stream's writer again in another
    # Python worker): never per task
    batches = len(q.recentProgress)
    assert 1 <= posts <= batches, (posts, batches)
    client = _confluent_client(registry)
    assert len(client.get_versions(f"{topic}-value")) == 1
    schema_id = client.get_latest_version(f"{topic}-value").schema_id
    d = AvroDeserializer(client)
    msgs = _messages(kafka_broker, topic, rows)
    assert {m.value[:5] for m in msgs} == {b"\x00" + schema_id.to_bytes(4, "big")}
    for m in msgs:
        v = d(m.value, SerializationContext(topic, MessageField.VALUE))
        assert v["n"] == int(m.key) and v["s"] == f"r{int(m.key)}"
        assert isinstance(v["at"], datetime.datetime) and v["at"].tzinfo is not None


# ------------------------------------------------------------------------------ driver errors
def test_registry_errors_on_the_driver_name_the_problem_never_the_secret(spark, kafka_broker, registry):
    """A wrong password: the registry's 401 on the driver, before any task, without the password;
    auto.register.schemas=false on a subject that does not exist: the error names the subject;
    use.latest.version=true takes the subject's latest schema (no registration)."""
    from brokers import read_all

    topic = _topic(kafka_broker, 1)
    df = spark.range(0, 10, 1, 2).selectExpr("cast(id AS string) AS key",
                                             "named_struct('n', id) AS value")
    wrong = "not-the-password-4711"
    with pytest.raises(Exception) as ei:
        _write(df, kafka_broker, topic, registry, **{
            "value.format": "avro", "schema.registry.basic.auth.user.info": f"{USER}:{wrong}"})
    text = str(ei.value)
    assert "401" in text and wrong not in text, text[-3000:]

    with pytest.raises(Exception) as ei:
        _write(df, kafka_broker, topic, registry,
               **{"value.format": "avro", "auto.register.schemas": "false"})
    text = str(ei.value)
    assert f"{topic}-value" in text and PASSWORD not in text, text[-3000:]
    assert read_all(kafka_broker.bootstrap, topic, 1, timeout=5) == []

    _write(df, kafka_broker, topic, registry, **{"value.format": "avro"})       # registers
    posts = _registrations(registry, f"{topic}-value")
    _write(df, kafka_broker, topic, registry, **{
        "value.format": "avro", "auto.register.schemas": "false", "use.latest.version": "true"})
    assert _registrations(registry, f"{topic}-value") == posts
    client = _confluent_client(registry)
    schema_id = client.get_latest_version(f"{topic}-value").schema_id
    values = [v for v in read_all(kafka_broker.bootstrap, topic, 1, timeout=30) if v is not None]
    assert len(values) == 20 and {v[:5] for v in values} == {b"\x00" + schema_id.to_bytes(4, "big")}
