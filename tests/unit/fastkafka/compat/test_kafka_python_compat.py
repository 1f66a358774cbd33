"""fastkafka.compat.kafka_python.KafkaProducer: kafka-python's arguments (each works or is a
ConfigError naming what to use), its future and RecordMetadata, its partitioner signature, its
serializers; on librdkafka's mock cluster where a broker is needed."""
from __future__ import annotations

import json
import logging
import threading

import pytest

from fastkafka.compat.kafka_python import (FutureRecordMetadata, KafkaConfigurationError,
                                           KafkaProducer, KafkaTimeoutError, RecordMetadata,
                                           TopicPartition, kafka_python_metrics)
from fastkafka.errors import ConfigError, SerializationError, UnknownPartitionError


def make(**kw):
    kw.setdefault("bootstrap_servers", "127.0.0.1:1")
    return KafkaProducer(**kw)


def test_kafka_python_defaults_where_they_differ_from_fastkafka():
    p = make()
    try:
        c = p.config
        assert (c["linger_ms"], c["batch_size"], c["buffer_memory"]) == (0, 16384, 32 * 1024 * 1024)
        assert c["reconnect_backoff_max_ms"] == 30000
        assert c["acks"] == -1 and c["enable_idempotence"] is True and c["compression_type"] == "none"
    finally:
        p.close(0)


@pytest.mark.parametrize("servers,expected", [
    ("broker1", [("broker1", 9092)]), (["a:1", "b"], [("a", 1), ("b", 9092)]),
    ("a:1,b:2", [("a", 1), ("b", 2)]),
])
def test_bootstrap_servers_as_kafka_python_takes_them(servers, expected):
    p = make(bootstrap_servers=servers)
    try:
        assert p.config["bootstrap_servers"] == expected
    finally:
        p.close(0)


@pytest.mark.parametrize("kw,check", [
    ({"acks": "all"}, ("acks", -1)), ({"acks": 1}, ("acks", 1)), ({"acks": 0}, ("acks", 0)),
    ({"compression_type": None}, ("compression_type", "none")),
    ({"compression_type": "gzip"}, ("compression_type", "gzip")),
    ({"compression_type": "zstd"}, ("compression_type", "zstd")),
    ({"retries": float("inf")}, ("retries", 2**31 - 1)), ({"retries": 3}, ("retries", 3)),
    ({"linger_ms": 7}, ("linger_ms", 7)), ({"client_id": "app"}, ("client_id", "app")),
    ({"max_in_flight_requests_per_connection": 1},
     ("max_in_flight_requests_per_connection", 1)),
    ({"receive_message_max_bytes": 5_000_000}, ("max_response_size", 5_000_000)),
    ({"metadata_max_age_ms": 1000}, ("metadata_max_age_ms", 1000)),
])
def test_arguments_that_work_the_same(kw, check):
    p = make(**kw)
    try:
        assert p.config[check[0]] == check[1]
    finally:
        p.close(0)


@pytest.mark.parametrize("api_version", [None, (0, 10), (2, 6, 0), "0.10", "auto"])
def test_api_version_is_accepted_and_logged_at_debug(api_version, caplog):
    with caplog.at_level(logging.DEBUG, logger="fastkafka"):
        p = make(api_version=api_version, api_version_auto_timeout_ms=2000)
    p.close(0)
    if api_version is not None:
        assert any("negotiates API versions" in r.getMessage() and r.levelno == logging.DEBUG
                   for r in caplog.records)
    # nothing about api_version above DEBUG (the dead bootstrap address gets its own ALL_BROKERS_DOWN)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "api_version" in r.getMessage()]


def test_a_bad_api_version_is_a_config_error():
    with pytest.raises(ConfigError, match=r"api_version must be None, a tuple such as \(2, 6\)"):
        make(api_version=10)


@pytest.mark.parametrize("kw,instead", [
    ({"send_buffer_bytes": 131072}, "autotuned socket buffers"),
    ({"ssl_ciphers": "HIGH"}, "set_ciphers) and pass ssl_context"),
    ({"ssl_crlfile": "/crl.pem"}, "VERIFY_CRL_CHECK_LEAF"),
    ({"sasl_kerberos_service_name": "other"}, "GSSAPI"),
    ({"metric_reporters": [object]}, "call metrics()"),
    ({"allow_auto_create_topics": False}, "auto.create.topics.enable"),
    ({"proxy_url": "socks5://p:1"}, "SOCKS5"),
])
def test_arguments_without_equivalent_fail_at_construction_naming_what_to_do(kw, instead):
    with pytest.raises(KafkaConfigurationError) as exc:
        make(**kw)
    name = next(iter(kw))
    assert f"{name}=" in str(exc.value) and instead in str(exc.value)


@pytest.mark.parametrize("kw", [
    {"send_buffer_bytes": None}, {"socket_options": [(6, 1, 1)]}, {"metric_reporters": []},
    {"sasl_kerberos_service_name": "kafka"}, {"metrics_enabled": True},
    {"sock_chunk_bytes": 4096}, {"bootstrap_timeout_ms": 30000}, {"allow_auto_create_topics": True},
])
def test_defaults_of_arguments_without_equivalent_are_accepted(kw):
    make(**kw).close(0)


def test_an_unknown_argument_is_a_config_error_with_a_suggestion():
    with pytest.raises(ConfigError, match="lingr_ms.*did you mean linger_ms"):
        make(lingr_ms=5)


def test_java_serializer_names_are_refused_naming_the_callable():
    with pytest.raises(ConfigError, match=r"value_serializer=callable\(obj\) -> bytes"):
        make(value_serializer="org.apache.kafka.common.serialization.StringSerializer")


def test_the_kafka_python_partitioner_signature_is_adapted():
    calls = []

    def partitioner(key_bytes, all_partitions, available):
        calls.append((key_bytes, all_partitions, sorted(available)))
        return all_partitions[-1]

    p = make(partitioner=partitioner)
    try:
        fn = p.fastkafka.config.partitioner
        assert fn(b"k", 4, [0, 1, 2, 3]) == 3
        assert calls == [(b"k", [0, 1, 2, 3], [0, 1, 2, 3])]
    finally:
        p.close(0)


def test_kafka_pythons_own_partitioners_mean_murmur2():
    from kafka.partitioner import DefaultPartitioner, StickyPartitioner

    for part in (DefaultPartitioner(), StickyPartitioner()):
        p = make(partitioner=part)
        assert p.fastkafka.config.partitioner == "murmur2"
        p.close(0)


def test_send_get_callbacks_and_record_metadata(mock_cluster):
    mock_cluster.create_topic("kp", 4)
    p = KafkaProducer(bootstrap_servers=mock_cluster.bootstraps.split(","),
                      value_serializer=lambda v: json.dumps(v).encode(),
                      key_serializer=lambda k: None if k is None else k.encode(),
                      partitioner=lambda kb, allp, avail: allp[len(kb) % len(allp)])
    seen, threads = [], []
    try:
        f = p.send("kp", {"n": 1}, key="abc", headers=[("h", b"xy")])
        assert isinstance(f, FutureRecordMetadata)
        f.add_callback(lambda tag, md, extra=None: (seen.append((tag, md, extra)),
                                                    threads.append(threading.current_thread())),
                       "cb", extra=1)
        f.add_errback(lambda e: seen.append(("err", e)))
        md = f.get(timeout=10)
        p.flush()
        assert isinstance(md, RecordMetadata)
        assert md.partition == 3 and md.topic_partition == TopicPartition("kp", 3)
        assert (md.serialized_key_size, md.serialized_value_size, md.serialized_header_size) == (
            3, len(b'{"n": 1}'), 3)
        assert md.log_start_offset == -1 and md.checksum is None and md.offset >= 0
        assert f.is_done and f.succeeded() and not f.failed() and f.value == md
        assert f.exception is None
        assert seen == [("cb", md, 1)] and threads[0] is not threading.current_thread()
        late = []
        f.add_both(lambda *a: late.append(a), "both")      # done: runs at once, here
        assert late == [("both", md)]
        assert p.partitions_for("kp") == {0, 1, 2, 3}
        assert p.bootstrap_connected() is True
        m = p.metrics()
        assert m["producer-metrics"]["record-send-total"] >= 1.0
        assert m["producer-topic-metrics.kp"]["record-send-total"] >= 1.0
        assert any(g.startswith("producer-node-metrics.node-") for g in m)
        assert p.metrics(raw=True)["records_sent"] >= 1
    finally:
        p.close()


def test_errbacks_see_the_delivery_error(mock_cluster):
    mock_cluster.create_topic("kp-err", 1)
    mock_cluster.push_request_errors(0, [87] * 3)      # INVALID_RECORD: not retriable
    p = KafkaProducer(bootstrap_servers=mock_cluster.bootstraps, enable_idempotence=False, acks=1)
    errs = []
    try:
        f = p.send("kp-err", b"v")
        f.add_errback(lambda tag, e: errs.append((tag, e)), "eb")
        f.add_callback(lambda md: errs.append(("callback", md)))
        with pytest.raises(Exception) as exc:
            f.get(timeout=10)
        p.flush()
        assert f.failed() and not f.succeeded() and f.value is None
        assert f.exception is exc.value and errs == [("eb", exc.value)]
        assert f.retriable() is False
    finally:
        p.close()


def test_serializer_failures_and_kafka_python_serializer_objects(mock_cluster):
    from kafka.serializer import Serializer

    class Upper(Serializer):
        def serialize(self, topic, headers, data):
            return None if data is None else f"{topic}:{data}".upper().encode()

    mock_cluster.create_topic("kp-ser", 1)
    p = KafkaProducer(bootstrap_servers=mock_cluster.bootstraps, value_serializer=Upper(),
                      key_serializer=lambda k: k.encode())
    try:
        md = p.send("kp-ser", "v", key="k").get(10)
        assert md.serialized_value_size == len(b"KP-SER:V")
        with pytest.raises(SerializationError) as exc:
            p.send("kp-ser", "v")                  # key None: str.encode fails, as in kafka-python
        assert exc.value.field == "key" and isinstance(exc.value.__cause__, AttributeError)
    finally:
        p.close()


def test_a_kafka_python_partitioner_object_places_records(mock_cluster):
    from kafka.partitioner import Partitioner

    class Last(Partitioner):
        def partition(self, topic, key, serialized_key, value, serialized_value, cluster):
            return max(cluster.partitions_for_topic(topic))

    class Bad(Partitioner):
        def partition(self, *args):
            return 99

    mock_cluster.create_topic("kp-part", 3)
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstraps, partitioner=Last()) as p:
        assert p.send("kp-part", b"v", key=b"k").get(10).partition == 2
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstraps, partitioner=Bad()) as p:
        with pytest.raises(UnknownPartitionError, match="partitioner returned 99"):
            p.send("kp-part", b"v")


def test_flush_timeout_raises_kafka_timeout_error():
    p = make(max_block_ms=100)
    try:
        with pytest.raises(KafkaTimeoutError):
            p.send("never", b"v")                  # no broker: the metadata wait times out
    finally:
        p.close(0)


def test_metrics_in_kafka_pythons_shape():
    java = {"producer-metrics": {"record-send-rate": 2.5, "record-send-total": 10,
                                 "batch-size-avg": None, "batch-size-max": None,
                                 "metadata-age": None, "buffer-total-bytes": 100},
            "producer-node-metrics": {"node-1": {"request-latency-avg": 1.5},
                                      "node--1": {"request-total": 2}},
            "producer-topic-metrics": {"a.b": {"byte-rate": 4.0}}}
    m = kafka_python_metrics(java)
    assert m == {"producer-metrics": {"record-send-rate": 2.5, "record-send-total": 10.0,
                                      "batch-size-avg": 0.0, "batch-size-max": float("-inf"),
                                      "metadata-age": None, "buffer-total-bytes": 100.0},
                 "producer-node-metrics.node-1": {"request-latency-avg": 1.5},
                 "producer-node-metrics.node--1": {"request-total": 2.0},
                 "producer-topic-metrics.a.b": {"byte-rate": 4.0}}
    assert type(m["producer-metrics"]["record-send-total"]) is float


def test_metrics_windows_are_settings():
    p = make(metrics_num_samples=5, metrics_sample_window_ms=1000)
    try:
        assert (p.fastkafka.config.metrics_num_samples,
                p.fastkafka.config.metrics_sample_window_ms) == (5, 1000)
        m = p.metrics()
        assert m["producer-metrics"]["record-send-total"] == 0.0
        assert m["producer-metrics"]["request-latency-max"] == float("-inf")
    finally:
        p.close(0)
