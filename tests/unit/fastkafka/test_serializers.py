"""``key_serializer`` / ``value_serializer`` on fastkafka.Producer: applied by send, produce and
send_batch (lists), before the partition is chosen; failures and unusable outputs are a
SerializationError raised before anything is queued; Java class names keep their refusal.

Against the in-process fault broker, whose stored batches are decoded by the reference decoder;
partitions are checked with kafka-python's own murmur2 (an independent implementation).
"""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

import reference_records as ref
from faultbroker import FaultBroker
from fastkafka import Producer
from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, InvalidRecordError, SerializationError

TOPIC = "serialized"
PARTS = 5


def to_json(v):
    return json.dumps(v, sort_keys=True).encode()


def key_bytes(k):
    return None if k is None else str(k).encode()


def java_partition(key: bytes, n: int) -> int:
    from kafka.partitioner.default import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % n


@pytest.fixture(scope="module")
def broker():
    b = FaultBroker()
    b.create_topic(TOPIC, PARTS)
    yield b
    b.close()
    assert b.crashed == [] and b.handler_errors == []


@pytest.fixture(scope="module")
def producer(broker):
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=1, max_block_ms=5000,
                 value_serializer=to_json, key_serializer=key_bytes)
    p.send(TOPIC, {"warm": "up"}).get(10)
    yield p
    p.close(5)


def stored(broker):
    """{(partition, offset): (key, value)} of every record the broker holds for TOPIC."""
    out = {}
    for part in range(PARTS):
        for b in broker.cluster.batches(TOPIC, part):
            for i, r in enumerate(ref.decode_batch(b.data).records):
                out[(part, b.base_offset + i)] = (r.key, r.value)
    return out


def test_send_produce_and_send_batch_serialize_keys_and_values(producer, broker):
    seen = []
    md = producer.send(TOPIC, {"n": 1}, key=42).get(10)
    producer.produce(TOPIC, {"n": 2}, key="user-7",
                     on_delivery=lambda err, md: seen.append((err, md.partition, md.offset)))
    bf = producer.send_batch(TOPIC, [{"n": 3}, [4], None], keys=[1, None, "x"])
    assert bf.get(10) == 3 and producer.flush(10) == 0
    recs = stored(broker)
    assert recs[(md.partition, md.offset)] == (b"42", b'{"n": 1}')
    assert md.serialized_key_size == 2 and md.serialized_value_size == len(b'{"n": 1}')
    assert md.partition == java_partition(b"42", PARTS)    # placed by the serialized key
    (err, part, off), = seen
    assert err is None and part == java_partition(b"user-7", PARTS)
    assert recs[(part, off)] == (b"user-7", b'{"n": 2}')
    # the serializers are called for None too (as kafka-python, aiokafka and confluent-kafka's
    # SerializingProducer do): json.dumps(None) is "null"; key_bytes keeps a null key
    for rec in [(b"1", b'{"n": 3}'), (None, b"[4]"), (b"x", b"null")]:
        assert rec in recs.values()


def test_a_serializer_may_return_str_bytearray_memoryview_or_none(broker):
    outs = iter(["text \u00e9", bytearray(b"ba"), memoryview(b"mv"), None])
    with Producer(bootstrap_servers=broker.bootstrap, value_serializer=lambda v: next(outs),
                  key_serializer=lambda k: b"k") as p:
        mds = [p.send(TOPIC, object()).get(10) for _ in range(4)]
    recs = stored(broker)
    assert [recs[(md.partition, md.offset)][1] for md in mds] == [
        "text \u00e9".encode(), b"ba", b"mv", None]


@pytest.mark.parametrize("call", ["send", "produce"])
@pytest.mark.parametrize("field", ["key", "value"])
def test_a_failing_serializer_is_a_serialization_error_and_nothing_is_queued(producer, broker,
                                                                             call, field):
    before = broker.cluster.record_count(TOPIC)
    bad = {"x": object()} if field == "value" else {"not": "a str key"}
    kwargs = {"value": bad, "key": "k"} if field == "value" else {"value": b"1", "key": bad}
    if field == "key":   # key_bytes would str() a dict: use a key serializer that fails instead
        p = Producer(bootstrap_servers=broker.bootstrap, key_serializer=lambda k: k.encode())
    else:
        p = producer
    try:
        with pytest.raises(SerializationError) as exc:
            getattr(p, call)(TOPIC, **kwargs)
        e = exc.value
        assert e.field == field and e.topic == TOPIC
        assert isinstance(e.__cause__, (TypeError, AttributeError))
        assert isinstance(e, InvalidRecordError) and e.code == -131
        msg = str(e)
        assert f"{field}_serializer failed on the {field} of a record for topic '{TOPIC}'" in msg
        assert type(e.__cause__).__name__ in msg
        # the next record is unaffected
        p.send(TOPIC, {"after": 1} if p is producer else b"after", key="fine").get(10)
        assert p.flush(10) == 0
    finally:
        if p is not producer:
            p.close(5)
    assert broker.cluster.record_count(TOPIC) == before + 1


@pytest.mark.parametrize("out", [7, 1.5, {"a": 1}, ["l"], object()])
def test_a_serializer_returning_an_unusable_type_names_it(broker, out):
    with Producer(bootstrap_servers=broker.bootstrap, value_serializer=lambda v: out) as p:
        with pytest.raises(SerializationError,
                           match=rf"value_serializer returned {type(out).__name__} for the value "
                                 rf"of a record for topic '{TOPIC}': expected bytes, bytearray, "
                                 rf"memoryview, str or None") as exc:
            p.send(TOPIC, "v")
        assert exc.value.__cause__ is None and exc.value.field == "value"


def test_send_batch_fails_whole_naming_the_record_index(producer, broker):
    before = broker.cluster.record_count(TOPIC)
    with pytest.raises(SerializationError, match=r"value_serializer failed on the value of "
                                                 r"record 2 \(of send_batch's values\)"):
        producer.send_batch(TOPIC, [{"a": 1}, {"b": 2}, {"c": object()}, {"d": 4}])
    with pytest.raises(SerializationError, match=r"key_serializer returned int for the key of "
                                                 r"record 1"):
        with Producer(bootstrap_servers=broker.bootstrap,
                      key_serializer=lambda k: b"" if k is None else len(k)) as p:
            p.send_batch(TOPIC, [b"a", b"b"], keys=[None, "xy"])
    assert producer.flush(10) == 0
    assert broker.cluster.record_count(TOPIC) == before


def test_send_batch_refuses_an_arrow_column_whose_serializer_is_set(broker):
    before = broker.cluster.record_count(TOPIC)
    with Producer(bootstrap_servers=broker.bootstrap, value_serializer=to_json) as p:
        with pytest.raises(InvalidRecordError, match="send_batch got a pyarrow values column but "
                                                     "value_serializer is set"):
            p.send_batch(TOPIC, pa.array([b"a", b"b"]))
        # keys without a key_serializer may be Arrow: they are written as they are
        assert p.send_batch(TOPIC, [1, 2], keys=pa.array(["k1", None])).get(10) == 2
    assert broker.cluster.record_count(TOPIC) == before + 2


def test_without_serializers_nothing_changes(broker):
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        with pytest.raises(InvalidRecordError, match="value"):
            p.send(TOPIC, {"not": "bytes"})
        md = p.send(TOPIC, b"raw", key=b"k").get(10)
    assert stored(broker)[(md.partition, md.offset)] == (b"k", b"raw")


def test_serializer_settings_in_every_spelling():
    cfg = ProducerConfig({"bootstrap.servers": "h:1", "value.serializer": to_json})
    assert cfg.value_serializer is to_json and cfg.key_serializer is None
    assert ProducerConfig(bootstrap_servers="h:1", key_serializer=str.encode).key_serializer \
        is str.encode


@pytest.mark.parametrize("key", ["key.serializer", "value_serializer"])
@pytest.mark.parametrize("name", ["org.apache.kafka.common.serialization.ByteArraySerializer",
                                  "ByteArraySerializer"])
def test_byte_array_serializer_of_a_java_config_is_accepted_and_changes_nothing(key, name):
    cfg = ProducerConfig({"bootstrap.servers": "h:1", key: name})
    assert cfg.as_dict() == ProducerConfig({"bootstrap.servers": "h:1"}).as_dict()


@pytest.mark.parametrize("key", ["key.serializer", "value.serializer", "key_serializer"])
def test_other_java_serializers_are_refused_naming_the_callable_to_pass(key):
    java = "org.apache.kafka.common.serialization.StringSerializer"
    with pytest.raises(ConfigError) as exc:
        ProducerConfig({"bootstrap.servers": "h:1", key: java})
    msg = str(exc.value)
    name = key.replace(".", "_")
    assert msg.startswith(f"CONFIG_ERROR (-100): {name}={java!r} is not supported: a Java class "
                          f"cannot run here")
    assert f"{name}=callable(obj) -> bytes" in msg and "ByteArraySerializer" in msg


@pytest.mark.parametrize("bad", [42, b"bytes", ["list"]])
def test_a_serializer_that_is_not_callable_is_a_config_error(bad):
    with pytest.raises(ConfigError, match=r"value_serializer must be a callable\(obj\) -> bytes "
                                          rf"or None, got {type(bad).__name__}"):
        ProducerConfig(bootstrap_servers="h:1", value_serializer=bad)
