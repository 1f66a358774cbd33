"""Options of Spark's Kafka data source on the ``fastkafka`` data source, on the driver (no Spark
job): source-only options and consumer settings are accepted with one WARNING naming them; the
producer settings Spark's sink honours reach the producer; key/value serializers are refused as
Spark refuses them; Overwrite is refused; JAAS and key stores pass through without showing secrets."""
from __future__ import annotations

import logging

import pytest
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from fastkafka.errors import ConfigError
from spark_sink.datasource import FastKafkaDataSource
from spark_sink.options import ignored_reason, settings_from_options

SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", StringType())])
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
SOURCE_OPTIONS = {
    "includeHeaders": "true", "failOnDataLoss": "false", "startingOffsets": "earliest",
    "endingOffsets": "latest", "subscribe": "a,b", "subscribePattern": "a.*",
    "assign": '{"a":[0]}', "maxOffsetsPerTrigger": "1000", "minPartitions": "4",
    "groupIdPrefix": "g", "kafkaConsumer.pollTimeoutMs": "512", "fetchOffset.numRetries": "3",
    "fetchOffset.retryIntervalMs": "10", "startingTimestamp": "1", "maxTriggerDelay": "15m",
}
CONSUMER_OPTIONS = {
    "kafka.group.id": "g", "kafka.auto.offset.reset": "earliest",
    "kafka.key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
    "kafka.value.deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
    "kafka.session.timeout.ms": "45000", "kafka.enable.auto.commit": "false",
    "kafka.max.poll.records": "500", "kafka.isolation.level": "read_committed",
}


def writer(options, overwrite=False):
    return FastKafkaDataSource(options).writer(SCHEMA, overwrite)


def test_source_and_consumer_options_are_ignored_with_one_warning(caplog):
    caplog.set_level(logging.WARNING, logger="spark_sink")
    w = writer({**BASE, **SOURCE_OPTIONS, **CONSUMER_OPTIONS})
    assert set(w.settings.ignored) == set(SOURCE_OPTIONS) | set(CONSUMER_OPTIONS)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    for name in [*SOURCE_OPTIONS, *CONSUMER_OPTIONS]:
        assert name in text
    assert "a sink reads nothing" in text and "consumer setting" in text
    # none of them reached the producer
    assert all(not k.startswith(("group", "auto", "session")) for k, _ in w.settings.producer_config)


def test_no_warning_without_ignored_options(caplog):
    caplog.set_level(logging.WARNING, logger="spark_sink")
    assert writer(BASE).settings.ignored == ()
    assert not caplog.records


@pytest.mark.parametrize("key", ["STARTINGOFFSETS", "kafka.GROUP.ID", "fetchoffset.NumRetries"])
def test_ignored_names_are_case_insensitive_like_spark_options(key):
    assert ignored_reason(key) is not None


def test_producer_settings_spark_honours_reach_the_producer():
    java = {"kafka.acks": "all", "kafka.linger.ms": "7", "kafka.batch.size": "65536",
            "kafka.compression.type": "zstd", "kafka.max.request.size": "2097152",
            "kafka.retries": "10", "kafka.enable.idempotence": "true", "kafka.client.id": "c",
            "kafka.security.protocol": "PLAINTEXT", "kafka.request.timeout.ms": "20000",
            "kafka.delivery.timeout.ms": "60000", "kafka.buffer.memory": "33554432",
            "kafka.max.block.ms": "10000"}
    s = settings_from_options({**BASE, **java})
    kw = s.producer_kwargs()
    assert kw["linger_ms"] == "7" and kw["compression_type"] == "zstd" and kw["acks"] == "all"
    assert kw["max_request_size"] == "2097152" and kw["enable_idempotence"] == "true"
    assert len(kw) == len(java) + 1 and s.ignored == ()


@pytest.mark.parametrize("which", ["key", "value"])
def test_serializers_are_refused_as_spark_refuses_them(which):
    with pytest.raises(ConfigError, match=f"'kafka.{which}.serializer' is not supported: {which}s "
                                          f"are written as the bytes of the '{which}' column"):
        settings_from_options({**BASE, f"kafka.{which}.serializer":
                               "org.apache.kafka.common.serialization.ByteArraySerializer"})


def test_overwrite_is_refused_with_the_reason_and_what_to_do():
    with pytest.raises(ConfigError, match="Save mode Overwrite not allowed for Kafka") as ei:
        writer(BASE, overwrite=True)
    assert 'mode("append")' in str(ei.value) and "cannot be truncated" in str(ei.value)


def test_complete_mode_streaming_is_accepted():
    # Spark calls streamWriter(overwrite=True) for outputMode("complete"): the whole result
    # table of each micro-batch is appended, as Spark's Kafka sink does.
    sw = FastKafkaDataSource(BASE).streamWriter(SCHEMA, True)
    assert sw.settings.topic == "t"


def test_unknown_option_still_fails_with_the_kafka_prefix_hint():
    with pytest.raises(ConfigError, match="unknown option 'lingerMs'"):
        settings_from_options({**BASE, "lingerMs": "5"})


def test_jaas_and_stores_through_options_never_show_secrets(tmp_path):
    secret = "jaas-secret-4471"
    line = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="bob" password="{secret}";')
    s = settings_from_options({**BASE, "kafka.security.protocol": "SASL_PLAINTEXT",
                               "kafka.sasl.mechanism": "SCRAM-SHA-512",
                               "kafka.sasl.jaas.config": line})
    assert dict(s.producer_config)["sasl_jaas_config"] == line    # the executors get it
    assert secret not in repr(s) and "***" in repr(s)
    with pytest.raises(ConfigError) as ei:
        settings_from_options({**BASE, "kafka.security.protocol": "SASL_PLAINTEXT",
                               "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": line})
    assert secret not in str(ei.value)
