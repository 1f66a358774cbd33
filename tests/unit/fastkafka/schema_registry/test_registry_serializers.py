"""AvroSerializer / JSONSerializer / FramedEncoder without a broker: confluent-kafka's conf keys and
their errors, the subject strategies, use.latest.version and use.schema.id, one registry call per
subject, pickling, and the bytes against confluent-kafka's serializers on the same registry."""
from __future__ import annotations

import io
import json
import pickle

import fastavro
import pyarrow as pa
import pytest

from fastkafka.errors import ConfigError
from fastkafka.schema_registry import (AvroSerializer, EncodeError, FramedEncoder, JSONSerializer,
                                       MessageField, SchemaMismatchError, SchemaRegistryClient,
                                       SchemaRegistryError, SerializationContext, ValidationError,
                                       clear_mock_registries, record_subject_name_strategy,
                                       topic_record_subject_name_strategy,
                                       topic_subject_name_strategy)
from fastkafka_tools.schema_registry_server import start_registry

USER = json.dumps({"type": "record", "name": "User", "namespace": "ex",
                   "fields": [{"name": "name", "type": "string"},
                              {"name": "age", "type": ["null", "int"], "default": None}]})
CTX = SerializationContext("users", MessageField.VALUE)


@pytest.fixture
def registry():
    clear_mock_registries()
    yield SchemaRegistryClient({"url": "mock://serializers"})
    clear_mock_registries()


def decode(payload: bytes, schema: str = USER):
    assert payload[0] == 0
    return fastavro.schemaless_reader(io.BytesIO(payload[5:]), fastavro.parse_schema(json.loads(schema)))


def test_avro_value_framed_with_the_registered_id(registry):
    ser = AvroSerializer(registry, USER)
    out = ser({"name": "ädä", "age": 3}, CTX)
    rs = registry.get_latest_version("users-value")
    assert out[:5] == b"\x00" + rs.schema_id.to_bytes(4, "big")
    assert decode(out) == {"name": "ädä", "age": 3}
    assert ser(None, CTX) is None


def test_strategies_give_confluent_subjects(registry):
    assert topic_subject_name_strategy(CTX, "ex.User") == "users-value"
    assert topic_record_subject_name_strategy(CTX, "ex.User") == "users-ex.User"
    assert record_subject_name_strategy(None, "ex.User") == "ex.User"
    for kind, subject in (("TOPIC", "users-value"), ("RECORD", "ex.User"),
                          ("TOPIC_RECORD", "users-ex.User")):
        AvroSerializer(registry, USER, conf={"subject.name.strategy.type": kind})({"name": "a"}, CTX)
        assert subject in registry.get_subjects()
    with pytest.raises(ConfigError, match="ASSOCIATED"):
        AvroSerializer(registry, USER, conf={"subject.name.strategy.type": "ASSOCIATED"})
    with pytest.raises(ValueError, match="SerializationContext"):
        AvroSerializer(registry, USER)({"name": "a"}, None)


@pytest.mark.parametrize("conf, match", [
    ({"auto.register.schema": True}, "auto.register.schema"),
    ({"auto.register.schemas": "yes"}, "bool"),
    ({"use.latest.version": True}, "auto.register.schemas"),
    ({"use.schema.id": -1}, "schema id"),
    ({"subject.name.strategy": "TOPIC"}, "callable"),
])
def test_conf_errors_name_the_setting(registry, conf, match):
    with pytest.raises(ConfigError, match=match):
        AvroSerializer(registry, USER, conf=conf)


def test_bad_schema_fails_at_construction(registry):
    from fastkafka.schema_registry import SchemaError

    with pytest.raises(SchemaError, match="strng"):
        AvroSerializer(registry, json.dumps({"type": "record", "name": "R",
                                             "fields": [{"name": "a", "type": "strng"}]}))
    with pytest.raises(SchemaError):
        JSONSerializer('{"type": "objekt"}', registry)


def test_lookup_without_auto_register_names_the_subject(registry):
    ser = AvroSerializer(registry, USER, conf={"auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError, match="users-value"):
        ser({"name": "a"}, CTX)
    AvroSerializer(registry, USER)({"name": "a"}, CTX)             # registers
    assert decode(ser({"name": "b"}, CTX)) == {"name": "b", "age": None}


def test_use_latest_version_and_use_schema_id(registry):
    from fastkafka.schema_registry import Schema

    sid = registry.register_schema("users-value", Schema(USER, "AVRO"))
    latest = AvroSerializer(registry, None, conf={"use.latest.version": True,
                                                 "auto.register.schemas": False})
    assert latest({"name": "x", "age": 1}, CTX)[1:5] == sid.to_bytes(4, "big")
    fixed = AvroSerializer(registry, None, conf={"use.schema.id": sid, "auto.register.schemas": False})
    out = fixed({"name": "y"}, SerializationContext("other", MessageField.VALUE))
    assert out[1:5] == sid.to_bytes(4, "big") and decode(out) == {"name": "y", "age": None}


def test_one_registry_call_per_subject_then_none():
    with start_registry() as server:
        client = SchemaRegistryClient({"url": server.url})
        ser = AvroSerializer(client, USER)
        for i in range(50):
            ser({"name": str(i)}, CTX)
            ser.encode_arrow(pa.table({"name": ["a"], "age": pa.array([1], pa.int32())}), CTX)
        ser({"name": "k"}, SerializationContext("users", MessageField.KEY))
        assert server.count("POST") == 2       # users-value and users-key, once each
        assert server.count("GET") == 0


def test_bytes_equal_confluent_kafkas_serializer():
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvro
    from confluent_kafka.serialization import MessageField as CField
    from confluent_kafka.serialization import SerializationContext as CContext

    with start_registry() as server:
        ours = AvroSerializer(SchemaRegistryClient({"url": server.url}), USER)
        theirs = ConfluentAvro(ConfluentClient({"url": server.url}), USER)
        for value in ({"name": "", "age": None}, {"name": "✓" * 100, "age": -2**31}):
            assert ours(value, CTX) == theirs(value, CContext("users", CField.VALUE))


def test_framed_encoder_pickles_and_encodes_the_same():
    enc = FramedEncoder("avro", 7, USER)
    copy = pickle.loads(pickle.dumps(enc))
    assert (copy.format, copy.schema_id, copy.schema_str) == ("avro", 7, USER)
    table = pa.table({"name": ["a", "b"], "age": pa.array([None, 5], pa.int32())})
    assert copy.encode_arrow(table).to_pylist() == enc.encode_arrow(table).to_pylist()
    assert copy.encode({"name": "a"}) == enc.encode({"name": "a"}) == enc.header + b"\x02a\x00"
    with pytest.raises(ConfigError, match="schema id"):
        FramedEncoder("avro", 2**31, USER)
    with pytest.raises(ConfigError, match="format"):
        FramedEncoder("protobuf", 1, USER)


def test_encode_arrow_checks_types_then_values(registry):
    ser = AvroSerializer(registry, USER)
    with pytest.raises(SchemaMismatchError, match="name"):
        ser.encode_arrow(pa.table({"name": pa.array([1, 2])}), CTX)
    with pytest.raises(EncodeError, match="row 1"):
        ser.encode_arrow(pa.table({"name": ["a", None]}), CTX)
    out = ser.encode_arrow(pa.StructArray.from_arrays([pa.array(["a", "b"]), pa.array([1, None], pa.int32())],
                                                      names=["name", "age"],
                                                      mask=pa.array([False, True])), CTX)
    assert out[1].as_py() is None                  # a null row: a null value (a tombstone)
    assert decode(out[0].as_py()) == {"name": "a", "age": 1}


JSON_SCHEMA = json.dumps({"title": "Item", "type": "object",
                          "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                         "qty": {"type": "integer", "minimum": 1},
                                         "note": {"type": ["string", "null"]}},
                          "required": ["sku", "qty"]})


def test_json_values_validated_and_arrow_nulls_checked(registry):
    ser = JSONSerializer(JSON_SCHEMA, registry)
    ok = ser({"sku": "ABC", "qty": 2, "note": None}, CTX)
    assert json.loads(ok[5:]) == {"sku": "ABC", "qty": 2, "note": None}
    with pytest.raises(ValidationError, match=r"\$\.sku"):
        ser({"sku": "abc", "qty": 2}, CTX)
    # pyarrow makes every field nullable: fine while there is no null where none is allowed
    good = pa.table({"sku": ["ABC", "XYZ"], "qty": pa.array([1, 9]), "note": [None, "ü"]})
    assert [json.loads(v[5:]) for v in ser.encode_arrow(good, CTX).to_pylist()] == good.to_pylist()
    with pytest.raises(SchemaMismatchError, match="qty"):
        ser.encode_arrow(pa.table({"sku": ["ABC"], "qty": pa.array([None], pa.int64()), "note": ["x"]}), CTX)
    with pytest.raises(ValidationError, match="row 1"):
        ser.encode_arrow(pa.table({"sku": ["ABC", "TOOLONG"], "qty": [1, 1], "note": ["", ""]}), CTX)
    with pytest.raises(ValidationError, match="qty"):
        ser.encode_arrow(pa.table({"sku": ["ABC"], "qty": [0], "note": [""]}), CTX)
    with pytest.raises(EncodeError):
        ser({"sku": "ABC", "qty": 1, "note": float("nan")}, CTX)


def test_derived_schema_registered_under_the_topic(registry):
    ser = AvroSerializer(registry)
    table = pa.table({"id": pa.array([1, 2], pa.int64()), "tags": [["a"], []]})
    out = ser.encode_arrow(table, CTX)
    schema = registry.get_latest_version("users-value").schema.schema_str
    assert [decode(v, schema) for v in out.to_pylist()] == table.to_pylist()
    with pytest.raises(ConfigError, match="no schema"):
        ser({"id": 1}, SerializationContext("fresh", MessageField.VALUE))


def test_json_null_rows_and_slices_judged_by_the_rows_sent():
    """A null row is a null value (its fields' nulls do not count); a slice is judged by its rows."""
    enc = FramedEncoder("json", 1, json.dumps({"type": "object", "properties": {"l": {"type": "integer"}},
                                               "required": ["l"]}))
    rows = pa.array([{"l": 1}, None, {"l": 3}], pa.struct([pa.field("l", pa.int64(), nullable=False)]))
    out = enc.encode_arrow(rows).to_pylist()
    assert out[1] is None and [json.loads(v[5:]) for v in (out[0], out[2])] == [{"l": 1}, {"l": 3}]
    nullable = pa.array([{"l": None}, {"l": 2}], pa.struct([pa.field("l", pa.int64())]))
    assert [json.loads(v[5:]) for v in enc.encode_arrow(nullable.slice(1)).to_pylist()] == [{"l": 2}]
    with pytest.raises(SchemaMismatchError, match=r"\$\.l"):
        enc.encode_arrow(nullable)
