"""The Schema Registry options of the sink (``value.format``, ``key.format``,
``schema.registry.<key>``, ...) as the driver parses them: what they become, the errors that name
the option, and the secrets the settings' repr never shows. No SparkSession, no registry."""
from __future__ import annotations

import pickle

import pytest

from fastkafka.errors import ConfigError
from spark_sink.formats import format_options, strategy_of, take_format_kwargs
from spark_sink.options import (DEFAULT_RECORD_NAME, FieldFormat, formats_from_options,
                                settings_from_kwargs, settings_from_options)
from spark_sink.task import SchemaError, check_schema

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "users"}
URL = {"schema.registry.url": "http://127.0.0.1:1"}


def test_no_format_options_no_formats():
    assert settings_from_options(BASE).formats is None


def test_value_format_avro_defaults():
    s = settings_from_options({**BASE, **URL, "value.format": "AVRO"})
    f = s.formats
    assert f.value == FieldFormat("avro")
    assert f.value.record_name == DEFAULT_RECORD_NAME == "topLevelRecord"
    assert f.value.record_namespace == ""
    assert f.value.subject_name_strategy == "TopicNameStrategy"
    assert f.key is None
    assert f.registry_conf() == {"url": "http://127.0.0.1:1"}
    assert (f.auto_register_schemas, f.use_latest_version, f.normalize_schemas) == (True, False, False)
    assert s.producer_kwargs() == {"bootstrap_servers": "127.0.0.1:9"}   # nothing leaked to the producer


def test_every_option_is_taken():
    s = settings_from_options({
        **BASE, "value.format": "json", "key.format": "avro", "value.schema": '{"type":"object"}',
        "key.schema": '"string"', "Value.Record.Name": "User", "value.record.namespace": "com.acme",
        "key.record.name": "K", "key.record.namespace": "com.acme.k",
        "value.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        "key.subject.name.strategy": "TopicRecordNameStrategy", "auto.register.schemas": "false",
        "use.latest.version": "true", "normalize.schemas": "true",
        "schema.registry.url": "https://r:8081", "schema.registry.basic.auth.user.info": "u:pw",
        "schema.registry.basic.auth.credentials.source": "USER_INFO",
        "schema.registry.ssl.ca.location": "ca.pem"})
    f = s.formats
    assert f.value == FieldFormat("json", '{"type":"object"}', "User", "com.acme",
                                  "io.confluent.kafka.serializers.subject.RecordNameStrategy")
    assert f.key == FieldFormat("avro", '"string"', "K", "com.acme.k", "TopicRecordNameStrategy")
    assert f.registry_conf() == {"url": "https://r:8081", "basic.auth.user.info": "u:pw",
                                 "basic.auth.credentials.source": "USER_INFO",
                                 "ssl.ca.location": "ca.pem"}
    assert (f.auto_register_schemas, f.use_latest_version, f.normalize_schemas) == (False, True, True)
    # batch_writer hands the same options to the data source: they parse back to the same
    assert settings_from_options({**BASE, **format_options(f)}).formats == f


@pytest.mark.parametrize("options, words", [
    ({"value.format": "protobuf", **URL}, ["'value.format'", "avro or json", "protobuf"]),
    ({"value.format": "avro"}, ["schema.registry.url", "value.format"]),
    ({"key.format": "json", "schema.registry.url": " "}, ["schema.registry.url", "key.format"]),
    ({"value.schema": '"long"', **URL}, ["'value.schema'", "value.format"]),
    ({"value.format": "avro", "key.record.name": "K", **URL}, ["'key.record.name'", "key.format"]),
    ({**URL}, ["schema.registry.url", "value.format", "key.format"]),
    ({"value.format": "avro", "value.subject.name.strategy": "TopicNamer", **URL},
     ["value.subject.name.strategy", "TopicNamer", "RecordNameStrategy"]),
    ({"value.format": "avro", "auto.register.schemas": "maybe", **URL},
     ["auto.register.schemas", "true or false"]),
    ({"value.format": "avro", "value.schema": "", **URL}, ["'value.schema'", "empty"]),
    ({"value.format": "avro", "schema.registry.": "x", **URL}, ["schema.registry."]),
])
def test_bad_options_raise_config_error_naming_them(options, words):
    with pytest.raises(ConfigError) as ei:
        settings_from_options({**BASE, **options})
    for w in words:
        assert w in str(ei.value), (w, str(ei.value))


@pytest.mark.parametrize("name, kind", [
    ("TopicNameStrategy", "topic"), ("RecordNameStrategy", "record"),
    ("TopicRecordNameStrategy", "topic_record"), ("topicnamestrategy", "topic"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "topic_record"),
    ("RECORD", "record")])
def test_strategy_names(name, kind):
    assert strategy_of(name, "x") == kind


def test_registry_secrets_never_in_repr():
    s = settings_from_options({
        **BASE, "value.format": "avro",
        "schema.registry.url": "https://alice:url-secret@r:8081,https://bob:other-secret@r2:8081",
        "schema.registry.basic.auth.user.info": "alice:the-password",
        "schema.registry.bearer.auth.token": "the-token", "schema.registry.ssl.key.password": "kpw",
        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.plain.username": "u", "kafka.sasl.plain.password": "sasl-pw"})
    text = repr(s)
    for secret in ("url-secret", "other-secret", "the-password", "the-token", "kpw", "sasl-pw"):
        assert secret not in text, (secret, text)
    assert "r:8081" in text and "r2:8081" in text and "***" in text
    assert "https://***@r:8081" in text
    # the settings still carry them (the driver's client needs them) and pickle
    back = pickle.loads(pickle.dumps(s))
    assert back.formats.registry_conf()["basic.auth.user.info"] == "alice:the-password"


def test_partition_writer_kwargs_and_config_keys():
    producer = {"bootstrap_servers": "h:1", "value_format": "avro", "value_schema": '"long"',
                "value_subject_name_strategy": "RecordNameStrategy", "key.format": "json",
                "auto_register_schemas": False, "linger_ms": 5}
    formats = take_format_kwargs(producer, {"url": "http://r:1", "basic.auth.user.info": "a:b"})
    assert producer == {"bootstrap_servers": "h:1", "linger_ms": 5}
    assert formats.value == FieldFormat("avro", '"long"', subject_name_strategy="RecordNameStrategy")
    assert formats.key == FieldFormat("json")
    assert formats.auto_register_schemas is False
    assert formats.registry_conf() == {"url": "http://r:1", "basic.auth.user.info": "a:b"}

    s = settings_from_kwargs("t", False, None, {"bootstrap.servers": "h:1", "value.format": "json",
                                                "schema.registry.url": "http://r:1"}, {})
    assert s.formats.value == FieldFormat("json") and s.formats.registry_conf() == {"url": "http://r:1"}
    with pytest.raises(ConfigError, match="schema.registry.url"):
        settings_from_kwargs("t", False, None, None, {"bootstrap_servers": "h:1", "value_format": "avro"})


def test_without_a_format_a_struct_value_names_value_format():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("value", StructType([StructField("a", LongType())])),
                         StructField("key", StringType())])
    with pytest.raises(SchemaError) as ei:
        check_schema(schema, settings_from_options(BASE))
    assert "column 'value' must be binary or string, not struct<a:bigint>" in str(ei.value)
    assert "value.format" in str(ei.value) and "schema.registry.url" in str(ei.value)
    key_schema = StructType([StructField("value", StringType()), StructField("key", LongType())])
    with pytest.raises(SchemaError, match="'key.format'"):
        check_schema(key_schema, settings_from_options(BASE))


def test_topic_name_strategy_needs_the_topic_option():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("value", StructType([StructField("a", LongType())])),
                         StructField("topic", StringType())])
    options = {"kafka.bootstrap.servers": "127.0.0.1:9", "value.format": "avro", **URL}
    with pytest.raises(ConfigError) as ei:
        check_schema(schema, settings_from_options(options))
    text = str(ei.value)
    assert "'topic'" in text and "RecordNameStrategy" in text and "value" in text


def test_json_value_without_an_arrow_type():
    """partition_writer with an explicit JSON Schema and no DataFrame schema: Python values in the
    JSON rules' form."""
    import datetime
    import decimal

    from spark_sink.formats import json_value

    utc = datetime.timezone.utc
    assert json_value({"b": b"\x00\xff", "d": datetime.date(1969, 12, 31),
                       "t": datetime.datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=utc),
                       "n": [decimal.Decimal("12.000"), decimal.Decimal("-0.25")], "s": "é"}) == {
        "b": "AP8=", "d": "1969-12-31", "t": "2024-02-29T23:59:58.123456Z", "n": [12, -0.25],
        "s": "é"}


def test_row_path_struct_without_a_format_names_value_format():
    """partition_writer's Rows (no schema on the driver): a Row value without value_format fails
    naming the way, before anything is sent."""
    from pyspark.sql import Row

    from fastkafka.errors import InvalidRecordError
    from spark_sink.task import TaskWriter

    settings = settings_from_kwargs("t", False, None, None, {"bootstrap_servers": "127.0.0.1:9"})
    writer = TaskWriter(settings.with_columns(["value", "key"]))
    try:
        with pytest.raises(InvalidRecordError) as ei:
            writer.write_row(Row(value=Row(a=1), key="k"))
        assert "value_format='avro'" in str(ei.value) and "Row" in str(ei.value)
        assert writer.report.rows == 0
    finally:
        import os

        from spark_sink import task

        writer.producer.close(0)
        task._producers.pop((repr(settings.producer_config), os.getpid()), None)   # the cached one


def test_partition_writer_without_a_schema_says_how_to_give_one():
    import spark_sink

    with pytest.raises(ConfigError) as ei:
        spark_sink.partition_writer("t", bootstrap_servers="127.0.0.1:9", value_format="avro",
                                    schema_registry={"url": "http://127.0.0.1:1"})
    text = str(ei.value)
    assert "schema=df.schema" in text and "value_schema" in text and "use_latest_version" in text


def test_driver_resolution_with_the_mock_registry():
    """check_schema on the driver (in this process, mock://): the schema derived from the Spark
    type and registered once; the settings pickle with the encoders (no registry client in them)
    and encode Arrow columns and Rows alike; an unknown registry setting is a ConfigError."""
    import pyarrow as pa
    from pyspark.sql import Row
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from fastkafka.schema_registry import SchemaRegistryClient
    from spark_sink.formats import ColumnEncoder

    scope = "mock://spark-sink-unit"
    schema = StructType([StructField("value", StructType([StructField("n", LongType(), False),
                                                          StructField("s", StringType())])),
                         StructField("key", StringType())])
    options = {**BASE, "value.format": "avro", "schema.registry.url": scope}
    s1 = check_schema(schema, settings_from_options(options))
    s2 = check_schema(schema, settings_from_options(options))
    client = SchemaRegistryClient({"url": scope})
    assert client.get_versions("users-value") == [1]
    enc = s1.value_encoder
    assert isinstance(enc, ColumnEncoder) and s1.key_encoder is None
    assert enc.schema_id == s2.value_encoder.schema_id
    assert "value_encoder=<avro schema id" in repr(s1)
    back = pickle.loads(pickle.dumps(s1))
    col = pa.array([{"n": 1, "s": "é"}, None, {"n": -2, "s": None}],
                   type=pa.struct([("n", pa.int64()), ("s", pa.string())]))
    framed = back.value_encoder.encode_arrow(col).to_pylist()
    header = b"\x00" + enc.schema_id.to_bytes(4, "big")
    assert framed[1] is None and framed[0].startswith(header) and framed[2].startswith(header)
    assert back.value_encoder.encode_value(Row(n=1, s="é")) == framed[0]
    assert back.value_encoder.encode_value(None) is None

    with pytest.raises(ConfigError, match="no.such.setting"):
        check_schema(schema, settings_from_options({**options, "schema.registry.no.such.setting": "1"}))
