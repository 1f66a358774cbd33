"""Registry-framed Avro and JSON Schema values through every producer on Apache Kafka, read back by
independent readers: confluent-kafka's consumer (CRCs checked) with confluent-kafka's own
``AvroDeserializer`` / ``JSONDeserializer`` against the same registry (the project's registry
server, which confluent-kafka's client is proven against in tests/unit/fastkafka_tools), and
fastavro, whose writer must give the very bytes we send. The main round trips run twice: on that
server and on Apicurio Registry (a real registry server the project did not write, through its
Confluent-compatible API).

The type matrix: every Avro type the encoders take (primitives, enum, fixed, arrays, maps, nested
records, nullable unions, decimal, date, timestamp-millis/micros, uuid) with nulls, non-ASCII
text, empty arrays and maps and extreme numbers, sent one value at a time (``send``) and as a
pyarrow Table (``send_batch``).
"""
from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import io
import json
import uuid

import fastavro
import pyarrow as pa
import pytest

from brokers import read_back, unique_name
from fastkafka import Producer
from fastkafka.aio import AsyncProducer
from fastkafka.errors import SerializationError
from fastkafka.schema_registry import (AvroSerializer, EncodeError, JSONSerializer, MessageField,
                                       SchemaRegistryClient, SerializationContext)

pytestmark = pytest.mark.broker


@pytest.fixture(params=["project-server", "apicurio"])
def any_registry(request):
    """The URL of a Schema Registry: the project's test server, or Apicurio Registry."""
    return request.getfixturevalue("schema_registry" if request.param == "project-server"
                                   else "apicurio_registry")

UTC = dt.timezone.utc

SCHEMA = {
    "type": "record", "name": "Matrix", "namespace": "fastkafka.test",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "fields": [
            {"name": "x", "type": "int"},
            {"name": "names", "type": {"type": "array", "items": "string"}}]}},
        {"name": "maybe", "type": ["null", "string"], "default": None},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}
SCHEMA_STR = json.dumps(SCHEMA)

ARROW = pa.struct([
    pa.field("i", pa.int32(), nullable=False), pa.field("l", pa.int64(), nullable=False),
    pa.field("f", pa.float32(), nullable=False), pa.field("d", pa.float64(), nullable=False),
    pa.field("b", pa.bool_(), nullable=False), pa.field("s", pa.string(), nullable=False),
    pa.field("raw", pa.binary(), nullable=False),
    pa.field("color", pa.dictionary(pa.int8(), pa.string()), nullable=False),
    pa.field("fx", pa.binary(4), nullable=False),
    pa.field("tags", pa.list_(pa.field("item", pa.string(), nullable=False)), nullable=False),
    pa.field("counts", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)), nullable=False),
    pa.field("inner", pa.struct([pa.field("x", pa.int32(), nullable=False),
                                 pa.field("names", pa.list_(pa.field("item", pa.string(), nullable=False)),
                                          nullable=False)]), nullable=False),
    pa.field("maybe", pa.string()),
    pa.field("price", pa.decimal128(20, 4), nullable=False),
    pa.field("day", pa.date32(), nullable=False),
    pa.field("at_ms", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("at_us", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("id", pa.string(), nullable=False),
])


def rows() -> list[dict]:
    """The matrix: extremes, nulls, non-ASCII, empties."""
    out = []
    extremes = [
        (2**31 - 1, 2**63 - 1, 3.4028234663852886e38, 1.7976931348623157e308, "ünïcödé ✓ 𝄞"),
        (-2**31, -2**63, -1.5, -0.0, ""),
        (0, 0, 0.0, 5e-324, "\x00\x01\n\t\"\\"),
        (7, -1, float("inf"), float("-inf"), "日本語のテキスト"),
    ]
    for k, (i, l, f, d, s) in enumerate(extremes * 3):
        out.append({
            "i": i, "l": l, "f": f, "d": d, "b": k % 2 == 0, "s": s,
            "raw": bytes(range(k * 7 % 256)) if k % 3 else b"",
            "color": ["RED", "GREEN", "BLUE"][k % 3],
            "fx": bytes([k, 255 - k, 0, 128]),
            "tags": [] if k % 4 == 0 else [f"t{j}é" for j in range(k % 5)],
            "counts": {} if k % 3 == 0 else {f"k{j}": j * -(10**15) for j in range(k % 4)},
            "inner": {"x": -k, "names": [] if k % 2 else ["ä", ""]},
            "maybe": None if k % 2 else f"maybe {k} ✓",
            "price": [decimal.Decimal("9999999999999999.9999"), decimal.Decimal("-0.0001"),
                      decimal.Decimal("0.0000"), decimal.Decimal("-9999999999999999.9999"),
                      decimal.Decimal("123.4500")][k % 5],
            "day": [dt.date(1969, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31),
                    dt.date(2024, 2, 29)][k % 4],
            "at_ms": dt.datetime(2024, 1, 1, 12, 0, 0, 123000, tzinfo=UTC) + dt.timedelta(days=k),
            "at_us": dt.datetime(1960, 5, 6, 7, 8, 9, 123456, tzinfo=UTC) + dt.timedelta(microseconds=k),
            "id": str(uuid.UUID(int=k * 0x1234567890ABCDEF)),
        })
    return out


def table() -> pa.Table:
    data = rows()
    return pa.Table.from_struct_array(pa.array(data, ARROW))


PARSED = fastavro.parse_schema(SCHEMA)


def fastavro_payload(row: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED, row)
    return buf.getvalue()


def expected_values() -> list:
    """What confluent-kafka's deserializer must give: fastavro's writer, then its reader."""
    return [fastavro.schemaless_reader(io.BytesIO(fastavro_payload(r)), PARSED) for r in rows()]


def confluent_registry(url: str):
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

    return ConfluentClient({"url": url})


def read_values(bootstrap: str, topic: str, n: int) -> list:
    msgs = read_back(bootstrap, topic, [0], n)[0]
    return [m.value for m in msgs]


def deserialize_avro(url: str, topic: str, payloads: list) -> list:
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

    de = AvroDeserializer(confluent_registry(url))
    return [de(p, CContext(topic, CField.VALUE)) for p in payloads]


def same(a, b) -> bool:
    """Equality that takes NaN and -0.0 as equal to themselves."""
    return json.dumps(a, default=repr, sort_keys=True) == json.dumps(b, default=repr, sort_keys=True)


def check_avro_topic(bootstrap, url, topic, n_copies=1):
    want = expected_values() * n_copies
    payloads = read_values(bootstrap, topic, len(want))
    # the bytes: the 5-byte header, then exactly what fastavro's writer gives
    schema_id = int.from_bytes(payloads[0][1:5], "big")
    assert all(p[:5] == b"\x00" + schema_id.to_bytes(4, "big") for p in payloads)
    assert [p[5:] for p in payloads] == [fastavro_payload(r) for r in rows()] * n_copies
    got = deserialize_avro(url, topic, payloads)
    assert same(got, want)
    return schema_id


def test_avro_send_and_send_batch_read_back_by_confluent_kafka(kafka_broker, any_registry):
    schema_registry = any_registry
    topic = unique_name("sr-avro")
    registry = SchemaRegistryClient({"url": schema_registry})
    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=5,
                  value_serializer=AvroSerializer(registry, SCHEMA_STR)) as p:
        for row in rows():
            p.send(topic, row, partition=0)
        p.flush(30)
        p.send_batch(topic, table(), partition=0).get(timeout=30)
        p.send_batch(topic, table().to_batches()[0], partition=0).get(timeout=30)
        p.send_batch(topic, table().to_struct_array(), partition=0).get(timeout=30)
    schema_id = check_avro_topic(kafka_broker.bootstrap, schema_registry, topic, n_copies=4)
    registered = registry.get_latest_version(f"{topic}-value")
    assert registered.schema_id == schema_id


def test_avro_registers_once_for_many_sends(kafka_broker):
    from fastkafka_tools.schema_registry_server import start_registry

    topic = unique_name("sr-once")
    with start_registry() as server:
        registry = SchemaRegistryClient({"url": server.url})
        with Producer(bootstrap_servers=kafka_broker.bootstrap,
                      value_serializer=AvroSerializer(registry, SCHEMA_STR)) as p:
            for row in rows() * 5:
                p.send(topic, row, partition=0)
            for _ in range(5):
                p.send_batch(topic, table(), partition=0)
            p.flush(30)
        assert server.count("POST", f"/subjects/{topic}-value/versions") == 1
        assert server.count("POST") == 1          # no look-up either: the id came back from it
        check_avro_topic(kafka_broker.bootstrap, server.url, topic, n_copies=10)


def test_bad_row_fails_the_call_and_sends_nothing(kafka_broker, schema_registry):
    topic = unique_name("sr-bad")
    registry = SchemaRegistryClient({"url": schema_registry})
    good = table()
    bad_rows = rows()
    bad_rows[5]["color"] = "PURPLE"          # not a symbol of the enum
    bad = pa.Table.from_struct_array(pa.array(bad_rows, ARROW))
    with Producer(bootstrap_servers=kafka_broker.bootstrap,
                  value_serializer=AvroSerializer(registry, SCHEMA_STR)) as p:
        with pytest.raises(SerializationError) as info:
            p.send_batch(topic, bad, partition=0)
        assert isinstance(info.value.__cause__, EncodeError)
        assert "color" in str(info.value) and "5" in str(info.value)
        with pytest.raises(SerializationError) as info:
            p.send(topic, bad_rows[5], partition=0)
        assert "color" in str(info.value)
        p.send_batch(topic, good, partition=0).get(timeout=30)
    check_avro_topic(kafka_broker.bootstrap, schema_registry, topic)


def test_async_producer_and_every_compat_layer(kafka_broker, schema_registry):
    from fastkafka.compat.aiokafka import AIOKafkaProducer
    from fastkafka.compat.confluent import SerializingProducer
    from fastkafka.compat.kafka_python import KafkaProducer

    registry = SchemaRegistryClient({"url": schema_registry})
    bootstrap = kafka_broker.bootstrap

    t_async = unique_name("sr-aio")

    async def with_async_producer():
        async with AsyncProducer(bootstrap_servers=bootstrap,
                                 value_serializer=AvroSerializer(registry, SCHEMA_STR)) as p:
            for row in rows():
                await p.send(t_async, row, partition=0)
            await p.send_batch(t_async, table(), partition=0)

    asyncio.run(with_async_producer())
    check_avro_topic(bootstrap, schema_registry, t_async, n_copies=2)

    t_kp = unique_name("sr-kafka-python")
    kp = KafkaProducer(bootstrap_servers=bootstrap,
                       value_serializer=AvroSerializer(registry, SCHEMA_STR))
    for row in rows():
        kp.send(t_kp, row, partition=0)
    kp.flush()
    kp.close()
    check_avro_topic(bootstrap, schema_registry, t_kp)

    t_aio = unique_name("sr-aiokafka")

    async def with_aiokafka():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                             value_serializer=AvroSerializer(registry, SCHEMA_STR))
        await p.start()
        try:
            for row in rows():
                await p.send_and_wait(t_aio, row, partition=0)
        finally:
            await p.stop()

    asyncio.run(with_aiokafka())
    check_avro_topic(bootstrap, schema_registry, t_aio)

    t_sp = unique_name("sr-serializing")
    sp = SerializingProducer({"bootstrap.servers": bootstrap,
                              "value.serializer": AvroSerializer(registry, SCHEMA_STR)})
    for row in rows():
        sp.produce(t_sp, value=row, partition=0)
    assert sp.flush(30) == 0
    check_avro_topic(bootstrap, schema_registry, t_sp)


def test_confluent_kafkas_own_serializer_as_value_serializer(kafka_broker, schema_registry):
    """confluent-kafka's AvroSerializer object given to fastkafka.Producer: called with the topic's
    SerializationContext, as SerializingProducer calls it."""
    from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvro

    topic = unique_name("sr-confluent-ser")
    ser = ConfluentAvro(confluent_registry(schema_registry), SCHEMA_STR)
    with Producer(bootstrap_servers=kafka_broker.bootstrap, value_serializer=ser) as p:
        for row in rows():
            p.send(topic, row, partition=0)
    check_avro_topic(kafka_broker.bootstrap, schema_registry, topic)


JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string", "minLength": 1},
        "price": {"type": "number", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"type": ["string", "null"]},
        "when": {"type": "string", "format": "date-time"},
    },
    "required": ["id", "name", "price"],
}

JSON_ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False),
                        pa.field("name", pa.string(), nullable=False),
                        pa.field("price", pa.float64(), nullable=False),
                        pa.field("tags", pa.list_(pa.string())),
                        pa.field("note", pa.string()),
                        pa.field("when", pa.timestamp("us", tz="UTC"))])


def json_rows() -> list[dict]:
    return [{"id": i, "name": f"naïve ✓ {i}", "price": i * 1.25, "tags": [] if i % 2 else ["a", "é"],
             "note": None if i % 3 else "line\nbreak \"quoted\"",
             "when": f"2024-0{1 + i % 9}-0{1 + i % 9}T10:11:12.{i:06d}Z"} for i in range(20)]


def test_json_schema_send_and_send_batch_read_back_by_confluent_kafka(kafka_broker, any_registry):
    schema_registry = any_registry
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

    topic = unique_name("sr-json")
    registry = SchemaRegistryClient({"url": schema_registry})
    data = json_rows()
    arrow_rows = [{**r, "when": dt.datetime.fromisoformat(r["when"].replace("Z", "+00:00"))}
                  for r in data]
    tbl = pa.Table.from_pylist(arrow_rows, schema=JSON_ARROW)
    with Producer(bootstrap_servers=kafka_broker.bootstrap,
                  value_serializer=JSONSerializer(json.dumps(JSON_SCHEMA), registry)) as p:
        for row in data:
            p.send(topic, row, partition=0)
        p.send_batch(topic, tbl, partition=0).get(timeout=30)
        with pytest.raises(SerializationError) as info:      # minLength 1: validated, not sent
            p.send(topic, {**data[0], "name": ""}, partition=0)
        assert "$.name" in str(info.value)
        bad = tbl.set_column(2, "price", pa.array([-1.0] * len(data)))
        with pytest.raises(SerializationError) as info:      # minimum 0, on the Arrow path too
            p.send_batch(topic, bad, partition=0)
        assert "price" in str(info.value)
    payloads = read_values(kafka_broker.bootstrap, topic, 2 * len(data))
    de = JSONDeserializer(None, schema_registry_client=confluent_registry(schema_registry))
    got = [de(v, CContext(topic, CField.VALUE)) for v in payloads]
    assert got == data + data


def test_subject_strategies_and_keys(kafka_broker, schema_registry):
    """A key serializer too, and the record-name strategy: subjects as Confluent names them."""
    topic = unique_name("sr-keys")
    registry = SchemaRegistryClient({"url": schema_registry})
    key_schema = json.dumps({"type": "record", "name": "Key", "namespace": "fastkafka.test",
                             "fields": [{"name": "k", "type": "long"}]})
    with Producer(bootstrap_servers=kafka_broker.bootstrap,
                  key_serializer=AvroSerializer(registry, key_schema,
                                                conf={"subject.name.strategy.type": "RECORD"}),
                  value_serializer=AvroSerializer(registry, SCHEMA_STR)) as p:
        for k, row in enumerate(rows()):
            p.send(topic, row, key={"k": k}, partition=0)
        keys = pa.table({"k": pa.array(range(len(rows())), pa.int64())})
        p.send_batch(topic, table(), keys=keys, partition=0).get(timeout=30)
    assert "fastkafka.test.Key" in registry.get_subjects()
    msgs = read_back(kafka_broker.bootstrap, topic, [0], 2 * len(rows()))[0]
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

    de = AvroDeserializer(confluent_registry(schema_registry))
    assert [de(m.key, CContext(topic, CField.KEY)) for m in msgs] == \
        [{"k": k} for k in range(len(rows()))] * 2
    assert same([de(m.value, CContext(topic, CField.VALUE)) for m in msgs], expected_values() * 2)


def test_derived_schema_from_arrow(kafka_broker, schema_registry):
    """No schema given: derived from the table's Arrow type, registered, read back."""
    topic = unique_name("sr-derived")
    registry = SchemaRegistryClient({"url": schema_registry})
    tbl = pa.table({"name": pa.array(["ä", None, ""]), "n": pa.array([1, 2, None], pa.int64()),
                    "xs": pa.array([[1.5], [], None], pa.list_(pa.float64()))})
    with Producer(bootstrap_servers=kafka_broker.bootstrap,
                  value_serializer=AvroSerializer(registry)) as p:
        p.send_batch(topic, tbl, partition=0).get(timeout=30)
        with pytest.raises(SerializationError, match="schema"):   # a dict has no Arrow type
            p.send(topic, {"name": "x"}, partition=0)
    payloads = read_values(kafka_broker.bootstrap, topic, 3)
    assert deserialize_avro(schema_registry, topic, payloads) == tbl.to_pylist()


def test_context_shapes_match_confluent_kafka(schema_registry):
    """The serializer called as confluent-kafka's is called gives confluent-kafka's bytes."""
    from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvro
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

    topic = unique_name("sr-shape")
    ours = AvroSerializer(SchemaRegistryClient({"url": schema_registry}), SCHEMA_STR)
    theirs = ConfluentAvro(confluent_registry(schema_registry), SCHEMA_STR)
    for row in rows():
        assert ours(row, SerializationContext(topic, MessageField.VALUE)) == \
            theirs(row, CContext(topic, CField.VALUE))
    assert ours(None, SerializationContext(topic, MessageField.VALUE)) is None
