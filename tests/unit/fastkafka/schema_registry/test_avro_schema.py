"""Avro schema parsing (errors naming the place), the Parsing Canonical Form, and the Avro schema
derived from an Arrow type."""

from __future__ import annotations

import io
import json

import pytest

from fastkafka.schema_registry._avro_schema import avro_schema_from_arrow, canonical_avro, parse_avro_schema
from fastkafka.schema_registry._errors import SchemaError, SchemaMismatchError

import pyarrow as pa


@pytest.mark.parametrize("schema, message", [
    ({"type": "record", "name": "R", "fields": [{"name": "address", "type": {"type": "record", "name": "A",
      "fields": [{"name": "zip", "type": "strng"}]}}]}, r"field 'address\.zip': unknown type 'strng'"),
    ("not json {", r"schema: not JSON"),
    ({"type": "record", "name": "R"}, r"record 'R' needs a list 'fields'"),
    ({"type": "record", "name": "1R", "fields": []}, r"invalid name '1R'"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]},
     r"field 'a': record 'R' has the field twice"),
    ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, r"enum 'E' has a symbol twice"),
    ({"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}, r"default 'B' is not one of its symbols"),
    ({"type": "fixed", "name": "F"}, r"fixed 'F' needs a 'size'"),
    ({"type": "array"}, r"an array without 'items'"),
    (["int", "int"], r"the union has 'int' twice"),
    (["int", ["string"]], r"a union may not contain a union"),
    ([], r"an empty union"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]},
     r"field 'a': default \"x\" is not a value of type int"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 3}, r"decimal needs"),
    ({"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "record", "name": "R",
      "fields": []}}]}, r"the name 'R' is defined twice"),
])
def test_invalid_schemas_name_the_place(schema, message):
    with pytest.raises(SchemaError, match=message):
        parse_avro_schema(schema)


def test_named_types_namespaces_and_references():
    parsed = parse_avro_schema({"type": "record", "name": "Outer", "namespace": "com.x", "fields": [
        {"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
        {"name": "b", "type": "E"},
        {"name": "c", "type": "com.x.E"},
        {"name": "d", "type": {"type": "record", "name": "In", "namespace": "other", "fields": [
            {"name": "e", "type": "com.x.E"}, {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}}]}},
        {"name": "g", "type": "other.F"},
    ]})
    assert set(parsed.named) == {"com.x.Outer", "com.x.E", "other.In", "other.F"}
    fields = parsed.root.fields
    assert fields[0].type is fields[1].type is fields[2].type
    assert fields[4].type is parsed.named["other.F"]


def test_unknown_logical_type_is_ignored():
    parsed = parse_avro_schema({"type": "string", "logicalType": "no-such"})
    assert parsed.root.kind == "string" and parsed.root.logical is None
    assert parse_avro_schema({"type": "string", "logicalType": "date"}).root.logical is None


def test_canonical_form_matches_fastavro():
    import fastavro
    schema = {"type": "record", "name": "User", "namespace": "com.x", "doc": "ignored", "fields": [
        {"name": "id", "type": {"type": "long", "logicalType": "timestamp-millis"}, "doc": "d"},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"], "aliases": ["K"]}},
        {"name": "again", "type": ["null", "Kind"], "default": None},
        {"name": "f", "type": {"type": "fixed", "name": "F", "namespace": "n", "size": 16}},
        {"name": "m", "type": {"type": "map", "values": {"type": "int"}}},
    ]}
    expect = fastavro.schema.to_parsing_canonical_form(fastavro.parse_schema(schema))
    assert canonical_avro(schema) == expect
    assert canonical_avro(json.dumps(schema, indent=2)) == expect
    assert canonical_avro('"int"') == '"int"' == canonical_avro({"type": "int"})


ARROW = pa.schema([
    pa.field("i8", pa.int8(), False), pa.field("u16", pa.uint16()), pa.field("i64", pa.int64(), False),
    pa.field("u32", pa.uint32(), False), pa.field("f16", pa.float16(), False), pa.field("f32", pa.float32()),
    pa.field("f64", pa.float64(), False), pa.field("b", pa.bool_(), False), pa.field("s", pa.string()),
    pa.field("ls", pa.large_string(), False), pa.field("sv", pa.string_view(), False),
    pa.field("y", pa.binary(), False), pa.field("fx", pa.binary(3), False),
    pa.field("ds", pa.dictionary(pa.int32(), pa.string()), False),
    pa.field("l", pa.list_(pa.int32()), False), pa.field("fl", pa.list_(pa.int32(), 2), False),
    pa.field("m", pa.map_(pa.string(), pa.string()), False),
    pa.field("st", pa.struct([pa.field("x", pa.int32(), False),
                              pa.field("inner", pa.struct([pa.field("z", pa.string())]))])),
    pa.field("dec", pa.decimal128(10, 3), False), pa.field("d", pa.date32(), False),
    pa.field("tms", pa.timestamp("ms"), False), pa.field("tus", pa.timestamp("us", tz="UTC"), False),
    pa.field("tns", pa.timestamp("ns"), False), pa.field("t32", pa.time32("ms"), False),
    pa.field("t64", pa.time64("us"), False),
])


def test_avro_schema_from_arrow_rules():
    s = avro_schema_from_arrow(ARROW, name="Row", namespace="com.x")
    types = {f["name"]: f["type"] for f in s["fields"]}
    assert s["name"] == "Row" and s["namespace"] == "com.x"
    assert types["i8"] == "int" and types["u16"] == ["null", "int"] and types["i64"] == "long"
    assert types["u32"] == "long" and types["f16"] == "float" and types["f32"] == ["null", "float"]
    assert types["f64"] == "double" and types["b"] == "boolean" and types["s"] == ["null", "string"]
    assert types["ls"] == types["sv"] == types["ds"] == "string" and types["y"] == "bytes"
    assert types["fx"] == {"type": "fixed", "name": "fx", "size": 3}
    assert types["l"] == {"type": "array", "items": ["null", "int"]}
    assert types["fl"] == {"type": "array", "items": ["null", "int"]}
    assert types["m"] == {"type": "map", "values": ["null", "string"]}
    st = types["st"][1]
    assert st["type"] == "record" and st["fields"][0] == {"name": "x", "type": "int"}
    assert st["fields"][1]["type"][1]["name"] == "st_inner" and st["fields"][1]["default"] is None
    assert types["dec"] == {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}
    assert types["d"] == {"type": "int", "logicalType": "date"}
    assert types["tms"]["logicalType"] == "timestamp-millis"
    assert types["tus"]["logicalType"] == types["tns"]["logicalType"] == "timestamp-micros"
    assert types["t32"] == {"type": "int", "logicalType": "time-millis"}
    assert types["t64"] == {"type": "long", "logicalType": "time-micros"}
    nullable = [f for f in s["fields"] if isinstance(f["type"], list)]
    assert nullable and all(f["default"] is None for f in nullable)
    parse_avro_schema(s)                 # valid, and fastavro agrees
    import fastavro
    fastavro.parse_schema(s)


def test_derived_schema_encodes_its_own_arrow_data():
    import fastavro
    from fastkafka.schema_registry._encode import AvroEncoder
    import datetime
    from decimal import Decimal
    row = {"i8": -8, "u16": None, "i64": 2**40, "u32": 2**32 - 1, "f16": 1.5, "f32": None, "f64": -0.5,
           "b": True, "s": "ü", "ls": "large", "sv": "view", "y": b"\x00", "fx": b"abc", "ds": "dict",
           "l": [1, None], "fl": [3, 4], "m": [("k", "v")], "st": {"x": 1, "inner": {"z": None}},
           "dec": Decimal("-1.250"), "d": datetime.date(1999, 12, 31), "tms": datetime.datetime(2001, 1, 1),
           "tus": datetime.datetime(2001, 1, 1, 0, 0, 0, 1), "tns": datetime.datetime(2001, 1, 1, 0, 0, 0, 2),
           "t32": datetime.time(1, 2, 3), "t64": datetime.time(4, 5, 6, 7)}
    table = pa.Table.from_pylist([row], schema=ARROW)
    s = avro_schema_from_arrow(ARROW)
    payload = AvroEncoder(s).encode_arrow(table)[0].as_py()
    parsed = fastavro.parse_schema(s)
    back = fastavro.schemaless_reader(io.BytesIO(payload), parsed, parsed)
    assert back["ds"] == "dict" and back["sv"] == "view" and back["m"] == {"k": "v"}
    assert back["dec"] == Decimal("-1.250") and back["l"] == [1, None] and back["st"]["inner"] == {"z": None}
    assert back["tns"].replace(tzinfo=None) == datetime.datetime(2001, 1, 1, 0, 0, 0, 2)
    assert back["t64"] == datetime.time(4, 5, 6, 7) and back["fl"] == [3, 4] and back["u16"] is None


def test_uint64_and_unsupported_types_refused_with_the_field():
    with pytest.raises(SchemaMismatchError, match=r"field 'a\.n': Arrow type uint64"):
        avro_schema_from_arrow(pa.struct([("a", pa.struct([("n", pa.uint64())]))]))
    with pytest.raises(SchemaMismatchError, match=r"field 'm'.*map key type int32"):
        avro_schema_from_arrow(pa.schema([("m", pa.map_(pa.int32(), pa.int32()))]))
