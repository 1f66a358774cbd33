"""Every bad argument of send / produce / send_batch raises one of the project's typed errors at
once, naming the argument (and the record index in a batch) and what was expected; nothing of the
call is queued, and the records sent before and after it are delivered.

InvalidRecordError (a TypeError) is a wrong type; MalformedRecordError (an InvalidRecordError and
a ValueError) an accepted type with an unusable value; UnknownPartitionError and
RecordTooLargeError keep their meaning. The producer runs against the in-process fault broker.
"""
from __future__ import annotations

import array
import pickle

import pyarrow as pa
import pytest

from faultbroker import FaultBroker
from fastkafka import Producer
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._wire.records import BatchBuilder
from fastkafka.errors import (InvalidRecordError, KafkaError, MalformedRecordError, RecordTooLargeError,
                              UnknownPartitionError, error_class_for_code, error_for_code)

pytestmark = pytest.mark.faultbroker

TOPIC = "t"


def released() -> memoryview:
    m = memoryview(b"abc")
    m.release()
    return m


STRIDED = memoryview(b"abcdef")[::2]          # not C-contiguous
LONE_SURROGATE = "\udc80"                      # cannot be encoded as UTF-8


def bad_then_good():
    yield b"ok"
    yield 7


@pytest.fixture(scope="module")
def broker():
    b = FaultBroker()
    b.create_topic(TOPIC, 2)
    yield b
    b.close()
    assert b.crashed == [] and b.handler_errors == []


@pytest.fixture(scope="module")
def producer(broker):
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=1, max_block_ms=5000,
                 request_timeout_ms=2000, max_request_size=100_000)
    p.send(TOPIC, b"warm-up").get(10)
    yield p
    p.close(5)


# (id, call, exact error class, parts the message must contain)
CASES = [
    # ---- send / produce: key and value
    ("value-released-memoryview", lambda p: p.send(TOPIC, released()),
     MalformedRecordError, ["value", "released", "bytes-like"]),
    ("key-released-memoryview", lambda p: p.send(TOPIC, b"v", key=released()),
     MalformedRecordError, ["key", "released"]),
    ("value-strided-memoryview", lambda p: p.send(TOPIC, STRIDED),
     MalformedRecordError, ["value", "C-contiguous", "bytes(...)"]),
    ("produce-value-released", lambda p: p.produce(TOPIC, released()),
     MalformedRecordError, ["value", "released"]),
    ("value-str-lone-surrogate", lambda p: p.send(TOPIC, LONE_SURROGATE),
     MalformedRecordError, ["value: str cannot be encoded as UTF-8", "surrogates not allowed"]),
    ("produce-key-str-lone-surrogate", lambda p: p.produce(TOPIC, b"v", LONE_SURROGATE),
     MalformedRecordError, ["key: str cannot be encoded as UTF-8"]),
    ("value-float", lambda p: p.send(TOPIC, 1.5),
     InvalidRecordError, ["value must be bytes-like (bytes, bytearray, memoryview", "str",
                          "not float"]),
    ("key-int", lambda p: p.send(TOPIC, b"v", key=7),
     InvalidRecordError, ["key must be bytes-like (bytes, bytearray, memoryview", "not int"]),
    ("value-list", lambda p: p.send(TOPIC, [b"v"]),
     InvalidRecordError, ["value must be bytes-like (bytes, bytearray, memoryview", "not list"]),
    # ---- headers
    ("header-key-lone-surrogate", lambda p: p.send(TOPIC, b"v", headers=[("a", b"1"), (LONE_SURROGATE, b"2")]),
     MalformedRecordError, ["headers", "header 1", "key", "UTF-8"]),
    ("header-value-released", lambda p: p.send(TOPIC, b"v", headers=[("a", released())]),
     MalformedRecordError, ["headers", "header 0", "released"]),
    ("produce-header-key-surrogate", lambda p: p.produce(TOPIC, b"v", headers=[(LONE_SURROGATE, None)]),
     MalformedRecordError, ["headers", "header 0", "UTF-8"]),
    # ---- topic, on_delivery, timestamp
    ("topic-empty", lambda p: p.send("", b"v"),
     MalformedRecordError, ["topic must be a non-empty string"]),
    ("on-delivery-not-callable", lambda p: p.send(TOPIC, b"v", on_delivery=5),
     InvalidRecordError, ["on_delivery", "callable", "int"]),
    ("produce-on-delivery-not-callable", lambda p: p.produce(TOPIC, b"v", on_delivery="cb"),
     InvalidRecordError, ["on_delivery", "callable", "str"]),
    ("timestamp-negative", lambda p: p.send(TOPIC, b"v", timestamp_ms=-1),
     MalformedRecordError, ["timestamp_ms must be >= 0"]),
    ("timestamp-beyond-64-bits", lambda p: p.send(TOPIC, b"v", timestamp_ms=2**64),
     MalformedRecordError, ["timestamp_ms must fit in 64 bits"]),
    # ---- send_batch: values
    ("batch-values-none", lambda p: p.send_batch(TOPIC, None),
     InvalidRecordError, ["values must be a list (or another iterable)", "NoneType"]),
    ("batch-values-int", lambda p: p.send_batch(TOPIC, 5),
     InvalidRecordError, ["values must be a list", "int"]),
    ("batch-values-bytes", lambda p: p.send_batch(TOPIC, b"abc"),
     InvalidRecordError, ["values must be a list", "bytes", "send()"]),
    ("batch-values-dict", lambda p: p.send_batch(TOPIC, {b"k": b"v"}),
     InvalidRecordError, ["values must be a list", "dict", "d.values()"]),
    ("batch-values-set", lambda p: p.send_batch(TOPIC, {b"a", b"b"}),
     InvalidRecordError, ["values must be a list", "set", "order"]),
    ("batch-values-item-released", lambda p: p.send_batch(TOPIC, [b"a", released(), b"c"]),
     MalformedRecordError, ["values[1]", "released"]),
    ("batch-values-item-strided", lambda p: p.send_batch(TOPIC, [b"a", b"b", b"c", STRIDED]),
     MalformedRecordError, ["values[3]", "C-contiguous"]),
    ("batch-values-item-int", lambda p: p.send_batch(TOPIC, [b"a", b"b", 3]),
     InvalidRecordError, ["values[2] must be bytes-like (bytes, bytearray, memoryview", "int"]),
    ("batch-values-generator-bad-item", lambda p: p.send_batch(TOPIC, bad_then_good()),
     InvalidRecordError, ["values[1] must be bytes-like", "int"]),
    # ---- send_batch: keys
    ("batch-keys-int", lambda p: p.send_batch(TOPIC, [b"a"], keys=5),
     InvalidRecordError, ["keys must be a list", "int"]),
    ("batch-keys-shorter", lambda p: p.send_batch(TOPIC, [b"a", b"b", b"c"], keys=[b"k"]),
     MalformedRecordError, ["keys has 1 entries but values has 3", "one key"]),
    ("batch-keys-generator-shorter", lambda p: p.send_batch(TOPIC, [b"a", b"b"], keys=(k for k in [b"k"])),
     MalformedRecordError, ["keys has 1 entries but values has 2"]),
    ("batch-keys-item-released", lambda p: p.send_batch(TOPIC, [b"a", b"b", b"c"], keys=[b"1", b"2", released()]),
     MalformedRecordError, ["keys[2]", "released"]),
    ("batch-keys-item-int", lambda p: p.send_batch(TOPIC, [b"a", b"b"], keys=[b"1", 2]),
     InvalidRecordError, ["keys[1] must be bytes-like (bytes, bytearray, memoryview", "int"]),
    ("batch-arrow-keys-wrong-length", lambda p: p.send_batch(TOPIC, [b"a", b"b"], keys=pa.array([b"k"])),
     MalformedRecordError, ["keys has 1 entries but values has 2"]),
    # ---- send_batch: partition
    ("batch-partition-str", lambda p: p.send_batch(TOPIC, [b"a"], partition="0"),
     InvalidRecordError, ["partition must be None, an int, or one int/None per record", "str"]),
    ("batch-partition-float", lambda p: p.send_batch(TOPIC, [b"a"], partition=1.0),
     InvalidRecordError, ["partition must be None, an int, or one int/None per record", "float"]),
    ("batch-partition-bool", lambda p: p.send_batch(TOPIC, [b"a"], partition=True),
     InvalidRecordError, ["partition must be None, an int", "bool"]),
    ("batch-partition-list-shorter", lambda p: p.send_batch(TOPIC, [b"a", b"b", b"c"], partition=[0]),
     MalformedRecordError, ["partition has 1 entries but values has 3", "one partition"]),
    # ---- send_batch: headers, timestamp, topic
    ("batch-header-key-surrogate", lambda p: p.send_batch(TOPIC, [b"a"], headers=[(LONE_SURROGATE, b"1")]),
     MalformedRecordError, ["headers", "header 0", "UTF-8"]),
    ("batch-header-value-released", lambda p: p.send_batch(TOPIC, [b"a"], headers=[("k", released())]),
     MalformedRecordError, ["headers", "header 0", "released"]),
    ("batch-timestamp-negative", lambda p: p.send_batch(TOPIC, [b"a"], timestamp_ms=-5),
     MalformedRecordError, ["timestamp_ms must be >= 0"]),
    ("batch-topic-empty", lambda p: p.send_batch("", [b"a"]),
     MalformedRecordError, ["topic must be a non-empty string"]),
]

# Inputs that already raised a typed error naming the argument: kept in the matrix so the whole
# surface of send/produce/send_batch is covered (they pass with or without this change).
ALREADY_TYPED = [
    ("headers-set", lambda p: p.send(TOPIC, b"v", headers={"k"}),
     InvalidRecordError, ["headers", "list or tuple", "or a dict", "set"]),
    ("header-value-int", lambda p: p.send(TOPIC, b"v", headers={"k": 5}),
     InvalidRecordError, ["header 0", "value must be bytes", "str", "int"]),
    ("header-value-str-lone-surrogate", lambda p: p.send(TOPIC, b"v", headers=[("k", LONE_SURROGATE)]),
     MalformedRecordError, ["header 0 ('k')", "str value cannot be encoded as UTF-8"]),
    ("header-not-a-pair", lambda p: p.send(TOPIC, b"v", headers=[("k", b"v", 1)]),
     InvalidRecordError, ["header 0 must be a (key, value) pair"]),
    ("header-key-none", lambda p: p.send(TOPIC, b"v", headers=[(None, b"v")]),
     InvalidRecordError, ["header 0: key must be str or bytes", "NoneType"]),
    ("topic-int", lambda p: p.send(5, b"v"), InvalidRecordError, ["topic must be a non-empty string"]),
    ("topic-bytes", lambda p: p.send(b"t", b"v"), InvalidRecordError, ["topic must be a non-empty string"]),
    ("partition-str", lambda p: p.send(TOPIC, b"v", partition="1"),
     InvalidRecordError, ["partition must be an int or None", "str"]),
    ("partition-bool", lambda p: p.send(TOPIC, b"v", partition=True),
     InvalidRecordError, ["partition must be an int or None", "bool"]),
    ("partition-negative", lambda p: p.send(TOPIC, b"v", partition=-1),
     UnknownPartitionError, ["partition -1 of topic 't' cannot exist", "0 to 2147483647"]),
    ("partition-too-big", lambda p: p.send(TOPIC, b"v", partition=2**70),
     UnknownPartitionError, ["cannot exist", "0 to 2147483647"]),
    ("partition-past-the-topic", lambda p: p.send(TOPIC, b"v", partition=2),
     UnknownPartitionError, ["partition 2 of topic 't' does not exist", "2 partitions"]),
    ("timestamp-float", lambda p: p.send(TOPIC, b"v", timestamp_ms=1.5),
     InvalidRecordError, ["timestamp_ms must be an int or None", "float"]),
    ("produce-timestamp-str", lambda p: p.produce(TOPIC, b"v", timestamp="1"),
     InvalidRecordError, ["timestamp_ms must be an int or None", "str"]),
    ("value-too-large", lambda p: p.send(TOPIC, b"x" * 200_000),
     RecordTooLargeError, ["max_request_size (100000)"]),
    ("batch-values-str", lambda p: p.send_batch(TOPIC, "abc"), InvalidRecordError, ["values", "str"]),
    ("batch-partition-list-item-str", lambda p: p.send_batch(TOPIC, [b"a", b"b"], partition=[0, "x"]),
     InvalidRecordError, ["partition[1] must be an int or None", "str"]),
    ("batch-partition-list-item-out-of-range", lambda p: p.send_batch(TOPIC, [b"a", b"b", b"c"], partition=[0, 1, 7]),
     UnknownPartitionError, ["partition[2] = 7 of topic 't' does not exist"]),
    ("batch-partition-single-out-of-range", lambda p: p.send_batch(TOPIC, [b"a"], partition=-3),
     UnknownPartitionError, ["partition -3", "cannot exist"]),
    ("batch-partition-single-past-the-topic", lambda p: p.send_batch(TOPIC, [b"a"], partition=5),
     UnknownPartitionError, ["partition 5", "does not exist", "2 partitions"]),
    ("batch-headers-set", lambda p: p.send_batch(TOPIC, [b"a"], headers={"k"}),
     InvalidRecordError, ["headers", "list or tuple", "set"]),
    ("batch-header-value-lone-surrogate", lambda p: p.send_batch(TOPIC, [b"a"], headers={"k": LONE_SURROGATE}),
     MalformedRecordError, ["header 0 ('k')", "cannot be encoded as UTF-8"]),
    ("batch-timestamp-str", lambda p: p.send_batch(TOPIC, [b"a"], timestamp_ms="1"),
     InvalidRecordError, ["timestamp_ms must be an int or None", "str"]),
    ("batch-topic-none", lambda p: p.send_batch(None, [b"a"]), InvalidRecordError, ["topic"]),
    ("batch-value-too-large", lambda p: p.send_batch(TOPIC, [b"a", b"x" * 200_000]),
     RecordTooLargeError, ["record 1 is"]),
    ("batch-arrow-values-int64", lambda p: p.send_batch(TOPIC, pa.array([1, 2])),
     InvalidRecordError, ["values", "Arrow type int64 is not supported"]),
    ("batch-arrow-values-list", lambda p: p.send_batch(TOPIC, pa.array([[b"x"]])),
     InvalidRecordError, ["values", "is not supported"]),
    ("batch-arrow-values-table", lambda p: p.send_batch(TOPIC, pa.table({"v": [b"x"]})),
     InvalidRecordError, ["values", "pyarrow Array", "Table"]),
    ("batch-arrow-keys-int64", lambda p: p.send_batch(TOPIC, [b"a", b"b"], keys=pa.array([1, 2])),
     InvalidRecordError, ["keys", "Arrow type int64"]),
    ("batch-arrow-partition-double", lambda p: p.send_batch(TOPIC, [b"a", b"b"], partition=pa.array([0.0, 1.0])),
     InvalidRecordError, ["partition must be an integer array", "double"]),
    ("batch-arrow-partition-out-of-range", lambda p: p.send_batch(TOPIC, [b"a", b"b"], partition=pa.array([0, 9])),
     UnknownPartitionError, ["partition[1] = 9"]),
]


def check_rejected(producer, broker, case):
    name, call, cls, parts = case
    tag = name.encode()
    stored_before = broker.cluster.record_count(TOPIC)
    before = producer.send(TOPIC, b"before-" + tag)
    assert before.get(10).topic == TOPIC
    assert producer.metrics()["records_queued"] == 0

    with pytest.raises(KafkaError) as ei:
        call(producer)
    err = ei.value
    assert type(err) is cls, f"{name}: {type(err).__name__}: {err}"
    # a wrong type is a TypeError, an unusable value a ValueError (MalformedRecordError: both)
    if isinstance(err, InvalidRecordError):
        assert isinstance(err, TypeError)
    if cls is MalformedRecordError or cls is UnknownPartitionError:
        assert isinstance(err, ValueError)
    for part in parts:
        assert part in str(err), f"{name}: {part!r} not in {str(err)!r}"
    # nothing of the rejected call was queued
    assert producer.metrics()["records_queued"] == 0
    assert getattr(err, "records_appended", 0) == 0

    after = producer.send(TOPIC, b"after-" + tag)
    assert after.get(10).topic == TOPIC
    assert producer.flush(10) == 0
    assert broker.cluster.record_count(TOPIC) == stored_before + 2


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_typed_named_and_queues_nothing(producer, broker, case):
    check_rejected(producer, broker, case)


@pytest.mark.parametrize("case", ALREADY_TYPED, ids=[c[0] for c in ALREADY_TYPED])
def test_inputs_already_typed_keep_their_errors(producer, broker, case):
    check_rejected(producer, broker, case)


def test_send_batch_reads_any_iterable_once(producer, broker):
    """Generators, tuples and other iterables of values, keys and partitions are read once into
    a list; any C-contiguous buffer is sent as its raw bytes (item size and shape do not matter)."""
    ints = array.array("i", [1, 2])
    grid = memoryview(bytearray(b"abcdef")).cast("B", (2, 3))
    values = (v for v in [b"plain", bytearray(b"ba"), memoryview(ints), grid, None])
    keys = (k for k in [b"k0", b"k1", b"k2", b"k3", b"k4"])
    partitions = (p for p in [0, 1, 0, 1, 0])
    before = {p: broker.cluster.record_count(TOPIC, p) for p in (0, 1)}
    assert producer.send_batch(TOPIC, values, keys=keys, partition=partitions).get(10) == 5
    assert producer.send_batch(TOPIC, (b"x", b"y")).get(10) == 2
    assert sum(broker.cluster.record_count(TOPIC, p) - before[p] for p in (0, 1)) == 7
    # the raw bytes of the int32 array and of the 2-D view were sent
    sent = [producer.send(TOPIC, memoryview(ints), partition=0).get(10),
            producer.send(TOPIC, grid, partition=0).get(10)]
    assert [m.serialized_value_size for m in sent] == [ints.itemsize * 2, 6]


def test_numpy_arrays(producer, broker):
    np = pytest.importorskip("numpy")
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert producer.send(TOPIC, a).get(10).serialized_value_size == 12
    for bad in (a[:, ::2], np.asfortranarray(a)):
        with pytest.raises(MalformedRecordError, match=r"value: ndarray is not one C-contiguous"):
            producer.send(TOPIC, bad)
        with pytest.raises(MalformedRecordError, match=r"values\[1\]: ndarray"):
            producer.send_batch(TOPIC, [b"ok", bad])
    assert producer.metrics()["records_queued"] == 0


# ----------------------------------------------------------------- the layers below the Producer
def test_batch_builder_and_accumulator_name_unusable_buffers():
    b = BatchBuilder(1024)
    with pytest.raises(MalformedRecordError, match="value: the memoryview has been released"):
        b.append(1_700_000_000_000, None, released())
    with pytest.raises(MalformedRecordError, match="key: memoryview is not one C-contiguous"):
        b.append(1_700_000_000_000, STRIDED, b"v")
    assert b.record_count == 0

    acc = RecordAccumulator(1024, 0, None, 5, 100, 120000, BufferPool(1 << 20, 1024), False)
    acc.sticky_partition(TOPIC, [0])

    def append_batch(values, keys=None, headers=None):
        fut = BatchFuture(None)
        with pytest.raises(InvalidRecordError) as ei:
            acc.append_batch(TOPIC, 0, values, keys, headers, 1, fut, 0, 0)
        assert ei.value.records_appended == 0 and fut.done() and fut.appended == 0
        return ei.value

    e = append_batch([b"a", released()])
    assert type(e) is MalformedRecordError and "values[1]" in str(e) and "released" in str(e)
    e = append_batch(None)
    assert type(e) is InvalidRecordError and "values must be a list" in str(e)
    e = append_batch(42)
    assert type(e) is InvalidRecordError and "values must be a list" in str(e) and "int" in str(e)
    e = append_batch([b"a"], keys=[b"k", b"k2"])
    assert type(e) is MalformedRecordError and "keys has 2 elements" in str(e)
    e = append_batch([b"a"], headers=[(LONE_SURROGATE, b"v")])
    assert type(e) is MalformedRecordError and "headers" in str(e)
    assert acc.incomplete_record_count() == 0


def test_malformed_record_error_class():
    assert issubclass(MalformedRecordError, InvalidRecordError)
    assert issubclass(MalformedRecordError, TypeError) and issubclass(MalformedRecordError, ValueError)
    assert MalformedRecordError.code <= -100 and not MalformedRecordError.retriable
    assert error_class_for_code(MalformedRecordError.code) is MalformedRecordError
    assert type(error_for_code(MalformedRecordError.code)) is MalformedRecordError
    e = MalformedRecordError("values[1]: the memoryview has been released")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is MalformedRecordError and str(back) == str(e)
    assert str(e).startswith("MALFORMED_RECORD_ARGUMENT (-130): values[1]")


@pytest.mark.parametrize("call", [
    lambda p: p.send("t", b"v", partition=2**40),
    lambda p: p.produce("t", b"v", partition=-1),
    lambda p: p.send_batch("t", [b"v"], partition=2**31),
], ids=["send-2**40", "produce--1", "send_batch-2**31"])
def test_a_partition_outside_int32_is_refused_without_waiting_for_metadata(call):
    """No topic has such a partition: the error comes before any metadata is asked for, so with no
    broker reachable it is still UnknownPartitionError, not the KafkaTimeoutError of a metadata
    wait (max_block_ms)."""
    p = Producer(bootstrap_servers="127.0.0.1:1", max_block_ms=2000, reconnect_backoff_ms=1000)
    try:
        with pytest.raises(UnknownPartitionError, match="cannot exist: Kafka numbers partitions"):
            call(p)
    finally:
        p.close(1)
