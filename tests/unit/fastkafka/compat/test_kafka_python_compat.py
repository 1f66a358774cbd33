"""fastkafka.compat.kafka_python.KafkaProducer: kafka-python's arguments (each works or is a
ConfigError naming what to use), its future and RecordMetadata, its partitioner signature, its
serializers; on librdkafka's mock cluster where a broker is needed."""
from __future__ import annotations

import gc
import json
import logging
import pickle
import subprocess
import sys
import threading

import pytest

from fastkafka.compat.kafka_python import (FutureRecordMetadata, KafkaConfigurationError,
                                           KafkaProducer, KafkaTimeoutError, RecordMetadata,
                                           TopicPartition, kafka_python_metrics)
from fastkafka.errors import ConfigError, UnknownPartitionError


def make(**kw):
    kw.setdefault("bootstrap_servers", "127.0.0.1:1")
    kw.setdefault("api_version", (2, 6))           # no bootstrap wait in the constructor
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


@pytest.mark.parametrize("api_version", [(0, 11), (2, 6, 0), (4, 1)])
def test_api_version_is_accepted_and_logged_at_debug(api_version, caplog):
    with caplog.at_level(logging.DEBUG, logger="fastkafka"):
        p = make(api_version=api_version, api_version_auto_timeout_ms=2000)
    p.close(0)
    assert any("negotiates API versions" in r.getMessage() and r.levelno == logging.DEBUG
               for r in caplog.records)
    # nothing about api_version above DEBUG (the dead bootstrap address gets its own ALL_BROKERS_DOWN)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "api_version" in r.getMessage()]


@pytest.mark.parametrize("given,parsed", [("2.6", (2, 6)), ("0.11.0", (0, 11, 0))])
def test_a_string_api_version_is_parsed_with_kafka_pythons_deprecation_warning(given, parsed, caplog):
    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        make(api_version=given).close(0)
    assert any(f'use api_version={parsed} [tuple] -- "{given}" as str is deprecated'
               in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("kw,instead", [
    ({"send_buffer_bytes": 131072}, "autotuned socket buffers"),
    ({"ssl_ciphers": "HIGH"}, "set_ciphers) and pass ssl_context"),
    ({"ssl_crlfile": "/crl.pem"}, "VERIFY_CRL_CHECK_LEAF"),
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
    # linger_ms: the record cannot be answered before add_callback below (with linger 0 it was, once
    # in a full run on 3.14: the callback then runs at once, on this thread, as kafka-python's does)
    p = KafkaProducer(bootstrap_servers=mock_cluster.bootstraps.split(","), linger_ms=300,
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
        from kafka.producer.future import RecordMetadata as KafkaPythonRecordMetadata

        assert type(md) is KafkaPythonRecordMetadata       # the installed kafka-python's tuple
        assert md.checksum is None and md.offset >= 0
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

    closed = []

    class Upper(Serializer):
        def serialize(self, topic, headers, data):
            return None if data is None else f"{topic}:{data}".upper().encode()

        def close(self):
            closed.append(True)

    mock_cluster.create_topic("kp-ser", 1)
    p = KafkaProducer(bootstrap_servers=mock_cluster.bootstraps, value_serializer=Upper(),
                      key_serializer=lambda k: k.encode())
    try:
        md = p.send("kp-ser", "v", key="k").get(10)
        assert md.serialized_value_size == len(b"KP-SER:V")
        with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'encode'"):
            p.send("kp-ser", "v")      # key None: str.encode's own error, as kafka-python raises it
    finally:
        p.close()
    assert closed == [True]            # close() closes Serializer objects, as kafka-python's


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


# -- side by side with kafka-python itself, no broker needed -----------------------------------
# Each test runs the same code on kafka.KafkaProducer and on the layer (only the class differs)
# and asserts the same observable result: the kafka.errors class caught, the message's words.

import kafka.errors as kafka_errors  # noqa: E402
from kafka import KafkaProducer as KafkaPythonProducer  # noqa: E402

BOTH = pytest.mark.parametrize("Producer", [KafkaPythonProducer, KafkaProducer],
                               ids=["kafka-python", "fastkafka"])
DEAD = "127.0.0.1:1"


def offline(Producer, **kw):
    """A producer with nowhere to connect; api_version given, so neither waits in __init__."""
    kw.setdefault("bootstrap_servers", DEAD)
    kw.setdefault("api_version", (2, 6))
    return Producer(**kw)


@BOTH
@pytest.mark.parametrize("kw,message", [
    ({"acks": 1, "enable_idempotence": True},
     "enable_idempotence=True is incompatible with user-provided acks=1"),
    ({"acks": 0, "retries": 0, "enable_idempotence": True},
     "enable_idempotence=True is incompatible with user-provided acks=0, retries=0"),
    ({"retries": 0, "transactional_id": "t"},
     "enable_idempotence=True is incompatible with user-provided retries=0"),
    ({"max_in_flight_requests_per_connection": 6, "enable_idempotence": True},
     "incompatible with user-provided max_in_flight_requests_per_connection=6"),
    ({"transactional_id": "t", "enable_idempotence": False},
     "Cannot set transactional_id without enable_idempotence."),
    ({"enable_idempotence": True, "api_version": (0, 10)},
     "Idempotent/Transactional producer requires broker >= 0.11 (got api_version=(0, 10"),
])
def test_idempotence_conflicts_are_kafka_pythons_configuration_error(Producer, kw, message):
    with pytest.raises(kafka_errors.KafkaConfigurationError) as exc:
        offline(Producer, **kw)
    assert message in str(exc.value)


@BOTH
@pytest.mark.parametrize("kw,conflict", [
    ({"acks": 1}, "acks=1"), ({"acks": 0}, "acks=0"), ({"retries": 0}, "retries=0"),
    ({"max_in_flight_requests_per_connection": 10}, "max_in_flight_requests_per_connection=10"),
])
def test_a_conflict_with_default_idempotence_turns_it_off_with_a_warning(Producer, kw, conflict,
                                                                          caplog, monkeypatch):
    import kafka.producer.kafka as kp_module

    # kafka-python's close(null_logger=True), run by __del__ of any earlier producer, replaces
    # its module logger with a NullLogger for good: give it back its logger for this test, after
    # the earlier tests' unreachable producers are collected (on 3.14, whose collector runs in
    # increments, one was collected in the middle of this test and took the logger away again)
    gc.collect()
    monkeypatch.setattr(kp_module, "log", logging.getLogger(kp_module.__name__))
    with caplog.at_level(logging.WARNING):
        p = offline(Producer, **kw)
    try:
        assert p.config["enable_idempotence"] is False
        assert any("Idempotence will be disabled because user-provided config conflicts with "
                   "idempotent defaults: " + conflict in r.getMessage() for r in caplog.records)
    finally:
        p.close(0)


@BOTH
def test_idempotence_stays_on_with_acks_all(Producer):
    p = offline(Producer, acks="all", retries=5)
    try:
        assert p.config["enable_idempotence"] is True and p.config["acks"] == -1
    finally:
        p.close(0)


@BOTH
@pytest.mark.parametrize("kw,exc_class,message", [
    ({"compression_type": "brotli"}, ValueError, "Not supported codec: brotli"),
    ({"compression_type": "zstd", "api_version": (2, 0)}, ValueError,
     "Zstd Requires >= Kafka 2.1 Brokers"),
    ({"no_such_setting": 1}, ValueError, "no_such_setting"),
])
def test_refused_settings_raise_what_kafka_python_raises(Producer, kw, exc_class, message):
    with pytest.raises(exc_class, match=message):
        offline(Producer, **kw)


@BOTH
@pytest.mark.parametrize("args,kw,exc_class,message", [
    (("t",), {}, ValueError, "Need at least one: key or value"),
    (("t", b"v"), {"headers": (("h", b"v"),)}, TypeError, "headers must be list-type"),
    (("t", b"v"), {"headers": [("h", "v")]}, TypeError,
     r"All headers items must be \(str, bytes\) tuples"),
    (("t", b"v"), {"headers": [(b"h", b"v")]}, TypeError,
     r"All headers items must be \(str, bytes\) tuples"),
    (("t", b"v"), {"headers": [("h", b"v", b"x")]}, TypeError,
     r"All headers items must be \(str, bytes\) tuples"),
    (("t", "text"), {}, TypeError, "Unsupported type for serialized value: <class 'str'>"),
    (("t", b"v"), {"key": 5}, TypeError, "Unsupported type for serialized key: <class 'int'>"),
])
def test_send_checks_its_arguments_before_anything_else(Producer, args, kw, exc_class, message):
    p = offline(Producer, max_block_ms=100)
    try:
        with pytest.raises(exc_class, match=message):
            p.send(*args, **kw)
    finally:
        p.close(0)


@BOTH
def test_no_metadata_within_max_block_ms_is_kafka_timeout_error(Producer):
    p = offline(Producer, max_block_ms=300)
    try:
        with pytest.raises(kafka_errors.KafkaTimeoutError):
            p.send("t", b"v")
        with pytest.raises(kafka_errors.KafkaTimeoutError):
            p.partitions_for("t")
        assert p.flush(timeout=1) is None               # nothing was queued
    finally:
        p.close(0)


@BOTH
def test_without_api_version_the_constructor_waits_for_a_broker(Producer):
    with pytest.raises(kafka_errors.KafkaTimeoutError, match="Unable to bootstrap from"):
        Producer(bootstrap_servers=DEAD, bootstrap_timeout_ms=300)


@BOTH
def test_close_is_idempotent_and_checks_its_timeout(Producer):
    p = offline(Producer)
    with pytest.raises(ValueError, match="Invalid timeout: -1"):
        p.close(timeout=-1)
    p.close(timeout=1)
    p.close()                                           # again: nothing
    with pytest.raises(kafka_errors.IllegalStateError):
        p.send("t", b"v")


@BOTH
@pytest.mark.parametrize("call", [
    lambda p: p.init_transactions(), lambda p: p.begin_transaction(),
    lambda p: p.commit_transaction(), lambda p: p.abort_transaction(),
], ids=["init", "begin", "commit", "abort"])
def test_transaction_calls_without_transactional_id_are_illegal_state(Producer, call):
    p = offline(Producer)
    try:
        with pytest.raises(kafka_errors.IllegalStateError):
            call(p)
    finally:
        p.close(0)


@BOTH
def test_metrics_disabled_gives_none(Producer):
    p = offline(Producer, metrics_enabled=False)
    try:
        assert p.metrics() is None
    finally:
        p.close(0)


@BOTH
def test_a_failing_serializer_raises_its_own_exception(Producer):
    def to_bytes(v):
        raise LookupError(f"no encoding for {v!r}")

    p = offline(Producer, value_serializer=to_bytes, max_block_ms=100)
    try:
        with pytest.raises(LookupError, match="no encoding for 'x'"):
            p.send("t", "x")
    finally:
        p.close(0)


# -- the error classes -----------------------------------------------------------------------
from fastkafka import errors as fk_errors  # noqa: E402
from fastkafka.compat import kafka_python as layer  # noqa: E402


@pytest.mark.parametrize("fk_error,kp_class", [
    (fk_errors.ConfigError("acks=1"), kafka_errors.KafkaConfigurationError),
    (fk_errors.KafkaTimeoutError("t"), kafka_errors.KafkaTimeoutError),
    (fk_errors.DeliveryTimeoutError("t"), kafka_errors.KafkaTimeoutError),
    (fk_errors.BufferExhaustedError("t"), kafka_errors.KafkaTimeoutError),
    (fk_errors.RecordTooLargeError("big"), kafka_errors.MessageSizeTooLargeError),
    (fk_errors.ProducerClosedError("closed"), kafka_errors.IllegalStateError),
    (fk_errors.IllegalStateError("state"), kafka_errors.IllegalStateError),
    (fk_errors.DisconnectedError("gone"), kafka_errors.KafkaConnectionError),
    (fk_errors.CorrelationIdMismatchError("id"), kafka_errors.CorrelationIdError),
    (fk_errors.CorruptFrameError("frame"), kafka_errors.KafkaProtocolError),
    (fk_errors.SaslAuthenticationError("no"), kafka_errors.SaslAuthenticationFailedError),
    (fk_errors.TransactionAbortedError("aborted"), kafka_errors.TransactionAbortedError),
    (fk_errors.UnsupportedVersionError("v"), kafka_errors.UnsupportedVersionError),
    (fk_errors.BrokerDataLossError("lost"), kafka_errors.KafkaError),
])
def test_each_fastkafka_error_is_raised_as_kafka_pythons_class_too(fk_error, kp_class):
    fk_error.extra = "kept"
    out = layer.kafka_python_error(fk_error)
    assert isinstance(out, kp_class) and isinstance(out, type(fk_error))
    assert out.args == fk_error.args and out.message == fk_error.message and out.extra == "kept"
    assert out.retriable == fk_error.retriable and hash(out) == hash(out)
    assert type(out).__name__ == kp_class.__name__
    assert layer.kafka_python_error(out) is out
    back = pickle.loads(pickle.dumps(out))
    assert type(back) is type(out) and back.args == out.args and back.extra == "kept"


def test_every_broker_error_code_gets_kafka_pythons_class_and_errno():
    for code in fk_errors.ERROR_TABLE:
        err = fk_errors.error_for_code(code)
        out = layer.kafka_python_error(err)
        kp_class = kafka_errors.for_code(code)
        assert isinstance(out, kp_class) and isinstance(out, type(err)), code
        assert out.errno == code and out.code == code


def test_the_public_classes_are_both_and_the_layers_names():
    for name in ("KafkaConfigurationError", "KafkaTimeoutError", "MessageSizeTooLargeError",
                 "IllegalStateError", "UnsupportedVersionError", "KafkaConnectionError",
                 "TransactionAbortedError"):
        cls = getattr(layer, name)
        assert issubclass(cls, getattr(kafka_errors, name)) and issubclass(cls, fk_errors.KafkaError)
    assert issubclass(layer.KafkaConfigurationError, ValueError)
    assert layer.KafkaError is fk_errors.KafkaError


def test_other_exceptions_pass_through_and_a_serializer_error_is_its_cause():
    plain = ValueError("x")
    assert layer.kafka_python_error(plain) is plain
    cause = LookupError("enc")
    wrapped = fk_errors.SerializationError("value_serializer failed", field="value", topic="t")
    wrapped.__cause__ = cause
    assert layer.kafka_python_error(wrapped) is cause


def test_without_kafka_python_the_layers_own_classes_of_the_same_names():
    code = """
import sys
sys.modules["kafka"] = None                  # as if kafka-python were not installed
from fastkafka import errors as fk
from fastkafka.compat import kafka_python as layer
assert layer.KafkaConfigurationError.__bases__ == (fk.ConfigError,)
assert layer.KafkaTimeoutError.__bases__ == (fk.KafkaTimeoutError,)
assert layer.RecordMetadata._fields[:4] == ("topic", "partition", "topic_partition", "offset")
e = layer.kafka_python_error(fk.ConfigError("acks=1"))
assert type(e) is layer.KafkaConfigurationError and str(e).endswith("acks=1"), e
e = layer.kafka_python_error(fk.DeliveryTimeoutError("late"))
assert isinstance(e, layer.KafkaTimeoutError) and isinstance(e, fk.DeliveryTimeoutError)
broker = fk.error_for_code(6)
assert layer.kafka_python_error(broker) is broker      # no kafka-python class to add
try:
    layer.KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 6), acks=1,
                        enable_idempotence=True)
except layer.KafkaConfigurationError as exc:
    assert "incompatible with user-provided acks=1" in str(exc)
else:
    raise AssertionError("no error")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@BOTH
def test_batch_size_zero_is_accepted(Producer):
    # kafka-python: "a batch size of zero will disable batching entirely"
    offline(Producer, batch_size=0).close(0)


def test_batch_size_zero_means_one_record_a_batch():
    p = make(batch_size=0)
    try:
        assert p.config["batch_size"] == 1
    finally:
        p.close(0)


def test_builtin_typed_errors_stay_builtin():
    # kafka-python raises a plain ValueError for a partition that cannot exist: not a KafkaError
    err = fk_errors.UnknownPartitionError("partition -1")
    assert layer.kafka_python_error(err) is err and not isinstance(err, kafka_errors.KafkaError)
    bad = fk_errors.InvalidRecordError("value must be bytes")
    assert layer.kafka_python_error(bad) is bad


@pytest.mark.parametrize("kw", [
    {"sasl_plain_pasword": "s3cr3t-A"},                         # a typo'd key
    {"sasl_plain_password": 12345678, "sasl_plain_username": "u", "sasl_mechanism": "PLAIN",
     "security_protocol": "SASL_PLAINTEXT"},                  # a wrong type
    {"ssl_password": 98765432},
])
def test_secrets_are_never_in_error_messages(kw):
    with pytest.raises(KafkaConfigurationError) as exc:
        make(**kw)
    assert not any(str(v) in str(exc.value) for k, v in kw.items() if "pas" in k)


def test_secrets_are_never_in_config_or_repr():
    p = make(sasl_plain_username="u", sasl_plain_password="s3cr3t-B", sasl_mechanism="PLAIN",
             security_protocol="SASL_PLAINTEXT")
    try:
        assert p.config["sasl_plain_password"] == "***"
        assert "s3cr3t-B" not in repr(p) and "s3cr3t-B" not in str(p.config)
    finally:
        p.close(0)
