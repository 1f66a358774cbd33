"""The Avro type matrix, Python values and Arrow columns: enum, fixed, arrays, maps, nested records
(of records, arrays of records, maps of arrays), decimal (bytes and fixed), date, time,
timestamp-millis/micros, uuid; each payload is fastavro's ``schemaless_writer`` output for the same
values and reads back equal with its ``schemaless_reader``; and the errors of each type."""

from __future__ import annotations

import datetime
import io
import uuid
from decimal import Decimal as D

import pytest

import fastavro
import pyarrow as pa

from fastkafka.schema_registry._encode import AvroEncoder  # noqa: E402
from fastkafka.schema_registry._errors import EncodeError, SchemaMismatchError  # noqa: E402

UTC = datetime.timezone.utc


def fa_write(schema, value) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def fa_read(schema, payload: bytes):
    parsed = fastavro.parse_schema(schema)
    return fastavro.schemaless_reader(io.BytesIO(payload), parsed, parsed)


COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
SCHEMA = {"type": "record", "name": "All", "namespace": "m", "fields": [
    {"name": "e", "type": COLOR},
    {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
    {"name": "arr", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "string"}}},
    {"name": "sub", "type": {"type": "record", "name": "Sub", "fields": [
        {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "Color"]},
        {"name": "inner", "type": ["null", {"type": "record", "name": "In", "fields": [
            {"name": "z", "type": "string"}]}]}]}},
    {"name": "subs", "type": {"type": "array", "items": "Sub"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 4}},
    {"name": "decf", "type": {"type": "fixed", "name": "DF", "size": 8, "logicalType": "decimal",
                              "precision": 18, "scale": 2}},
    {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "nm", "type": ["null", {"type": "map", "values": "double"}], "default": None},
]}

ROWS = [
    {"e": "RED", "fx": b"abcd", "arr": [], "m": {}, "sub": {"x": 1, "y": None, "inner": None}, "subs": [],
     "dec": D("0.0000"), "decf": D("0.00"), "dt": datetime.date(1969, 12, 31),
     "tsm": datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
     "tsu": datetime.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=UTC), "tm": datetime.time(0, 0),
     "tu": datetime.time(23, 59, 59, 999999), "u": uuid.UUID(int=0), "nm": None},
    {"e": "BLUE", "fx": b"\0\0\0\0", "arr": [1, -1, 2**63 - 1, -2**63], "m": {"k": ["a", "ü"], "": []},
     "sub": {"x": -1, "y": "GREEN", "inner": {"z": "日本"}},
     "subs": [{"x": 1, "y": "RED", "inner": None}, {"x": 2, "y": None, "inner": {"z": ""}}],
     "dec": D("-9999999999999999999999999999999999.9999"), "decf": D("-128.00"),
     "dt": datetime.date(2038, 1, 20), "tsm": datetime.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=UTC),
     "tsu": datetime.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC), "tm": datetime.time(12, 30, 15, 500000),
     "tu": datetime.time(1, 2, 3, 4), "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
     "nm": {"nan": float("nan"), "inf": float("-inf"), "z": -0.0}},
    {"e": "GREEN", "fx": b"\xff\xff\xff\xff", "arr": [0], "m": {"x": ["1"]},
     "sub": {"x": 2**31 - 1, "y": None, "inner": None}, "subs": [{"x": -2**31, "y": "BLUE", "inner": None}],
     "dec": D("9999999999999999999999999999999999.9999"), "decf": D("1.28"), "dt": datetime.date(1, 1, 1),
     "tsm": datetime.datetime(2000, 1, 1, tzinfo=UTC), "tsu": datetime.datetime(9999, 12, 31, tzinfo=UTC),
     "tm": datetime.time(0, 0, 0, 999), "tu": datetime.time(0, 0),
     "u": uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff"), "nm": {}},
]

SUB = pa.struct([pa.field("x", pa.int32(), False), pa.field("y", pa.string()),
                 pa.field("inner", pa.struct([pa.field("z", pa.string(), False)]))])
ARROW = pa.schema([
    pa.field("e", pa.dictionary(pa.int8(), pa.string()), False),
    pa.field("fx", pa.binary(4), False),
    pa.field("arr", pa.list_(pa.field("item", pa.int64(), False)), False),
    pa.field("m", pa.map_(pa.string(), pa.field("v", pa.list_(pa.field("i", pa.string(), False)), False)), False),
    pa.field("sub", SUB, False),
    pa.field("subs", pa.list_(pa.field("item", SUB, False)), False),
    pa.field("dec", pa.decimal128(38, 4), False),
    pa.field("decf", pa.decimal128(18, 2), False),
    pa.field("dt", pa.date32(), False),
    pa.field("tsm", pa.timestamp("ms", tz="UTC"), False),
    pa.field("tsu", pa.timestamp("us", tz="UTC"), False),
    pa.field("tm", pa.time32("ms"), False),
    pa.field("tu", pa.time64("us"), False),
    pa.field("u", pa.string(), False),
    pa.field("nm", pa.map_(pa.string(), pa.float64())),
])


def arrow_rows(rows):
    return [dict(r, m=list(r["m"].items()), u=str(r["u"]),
                 nm=None if r["nm"] is None else list(r["nm"].items())) for r in rows]


def expected(rows):
    return [fa_write(SCHEMA, dict(r, u=str(r["u"]))) for r in rows]


def test_python_values_equal_fastavro_bytes_and_read_back():
    enc = AvroEncoder(SCHEMA)
    for row, want in zip(ROWS, expected(ROWS)):
        got = enc.encode(row)
        assert got == want
        back = fa_read(SCHEMA, got)
        assert back["sub"] == row["sub"] and back["dec"] == row["dec"] and back["tsu"] == row["tsu"]
        assert str(back["u"]) == str(row["u"])


def test_arrow_columns_equal_fastavro_bytes():
    enc = AvroEncoder(SCHEMA)
    table = pa.Table.from_pylist(arrow_rows(ROWS), schema=ARROW)
    assert enc.encode_arrow(table).to_pylist() == expected(ROWS)


def test_arrow_sliced_nested_and_chunked():
    enc = AvroEncoder(SCHEMA)
    rows = ROWS * 5
    table = pa.Table.from_pylist(arrow_rows(rows), schema=ARROW)
    sa = table.to_struct_array().combine_chunks()
    want = expected(rows)
    assert enc.encode_arrow(sa.slice(4, 7)).to_pylist() == want[4:11]
    chunked = pa.chunked_array([sa.slice(0, 2), sa.slice(2, 0), sa.slice(2, 13)])
    assert enc.encode_arrow(chunked).to_pylist() == want
    # every column a slice of a longer one (their own offsets, lists' child offsets too)
    cols = [c.combine_chunks().slice(3, 9) for c in table.columns]
    assert enc.encode_arrow(pa.StructArray.from_arrays(cols, fields=list(ARROW))).to_pylist() == want[3:12]


def test_enum_from_plain_and_large_string_columns():
    enc = AvroEncoder(SCHEMA)
    table = pa.Table.from_pylist(arrow_rows(ROWS), schema=ARROW)
    syms = [r["e"] for r in ROWS]
    for t in (pa.string(), pa.large_string()):
        t2 = table.set_column(0, pa.field("e", t, False), pa.array(syms, t))
        assert enc.encode_arrow(t2).to_pylist() == expected(ROWS)


def test_decimal_bytes_minimal_twos_complement_at_byte_boundaries():
    schema = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 0}
    values = [D(v) for v in (0, 1, -1, 127, 128, -128, -129, 255, 256, -256, 32767, -32768, 9999999999,
                             -9999999999)]
    enc = AvroEncoder(schema)
    col = pa.array(values, pa.decimal128(10, 0))
    got = enc.encode_arrow(col).to_pylist()
    for v, g in zip(values, got):
        assert enc.encode(v) == g
        assert fa_read(schema, g) == v
        unscaled = int(v)
        n = (unscaled.bit_length() + 8) // 8 if unscaled >= 0 else ((-unscaled - 1).bit_length() + 8) // 8
        assert len(g) == 1 + n           # the length varint (one byte here) and the minimal bytes


def test_decimal_errors():
    enc = AvroEncoder({"type": "record", "name": "R", "fields": [
        {"name": "p", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}}]})
    with pytest.raises(EncodeError, match=r"field 'p'.*more than 2 decimal places"):
        enc.encode({"p": D("1.234")})
    with pytest.raises(EncodeError, match=r"field 'p'.*more than 5 digits"):
        enc.encode({"p": D("1234.5")})
    with pytest.raises(EncodeError, match=r"field 'p'.*float"):
        enc.encode({"p": 1.5})
    assert fa_read({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
                   enc.encode({"p": D("-1.5")})) == D("-1.50")
    # a wider Arrow decimal is checked per value
    ok = pa.table({"p": pa.array([D("999.99"), D("-999.99")], pa.decimal128(20, 2))})
    assert len(enc.encode_arrow(ok)) == 2
    bad = pa.table({"p": pa.array([D("1.00"), D("1000.00")], pa.decimal128(20, 2))})
    with pytest.raises(EncodeError, match=r"row 1, field 'p': a decimal that does not fit"):
        enc.encode_arrow(bad)
    with pytest.raises(SchemaMismatchError, match=r"field 'p'.*scale 3 is not 2"):
        enc.check_arrow(pa.struct([("p", pa.decimal128(5, 3))]))


def test_enum_errors_name_symbol_row_and_field():
    enc = AvroEncoder({"type": "record", "name": "R", "fields": [{"name": "c", "type": COLOR}]})
    with pytest.raises(EncodeError, match=r"field 'c': 'PINK' is not a symbol"):
        enc.encode({"c": "PINK"})
    with pytest.raises(EncodeError, match=r"row 2, field 'c': a value that is not a symbol"):
        enc.encode_arrow(pa.table({"c": ["RED", "BLUE", "PINK"]}))
    with pytest.raises(EncodeError, match=r"row 1, field 'c'"):
        enc.encode_arrow(pa.table({"c": pa.array(["RED", "PINK", "RED"]).dictionary_encode()}))
    # a dictionary with an unknown symbol that no row uses is fine
    d = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), pa.array(["GREEN", "PINK"]))
    out = enc.encode_arrow(pa.table({"c": d}))
    assert [fa_read({"type": "record", "name": "R", "fields": [{"name": "c", "type": COLOR}]}, x)
            for x in out.to_pylist()] == [{"c": "GREEN"}, {"c": "GREEN"}]


def test_fixed_errors():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "f", "type": {"type": "fixed", "name": "F3", "size": 3}}]}
    enc = AvroEncoder(schema)
    with pytest.raises(EncodeError, match=r"field 'f'.*2 bytes, not 3"):
        enc.encode({"f": b"ab"})
    assert enc.encode_arrow(pa.table({"f": [b"abc", b"xyz"]})).to_pylist() == [
        fa_write(schema, {"f": b"abc"}), fa_write(schema, {"f": b"xyz"})]
    with pytest.raises(EncodeError, match=r"row 1, field 'f': a value of 4 bytes"):
        enc.encode_arrow(pa.table({"f": [b"abc", b"abcd"]}))
    with pytest.raises(SchemaMismatchError, match=r"field 'f'.*4 bytes, not 3"):
        enc.check_arrow(pa.struct([("f", pa.binary(4))]))


def test_null_in_nested_non_nullable_field_names_path():
    enc = AvroEncoder(SCHEMA)
    rows = arrow_rows(ROWS)
    rows[1] = dict(rows[1], subs=[{"x": None, "y": "RED", "inner": None}])
    loose = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string()),
                       pa.field("inner", pa.struct([pa.field("z", pa.string(), False)]))])
    schema = pa.schema([f if f.name != "subs" else pa.field("subs", pa.list_(loose), False) for f in ARROW])
    with pytest.raises(EncodeError, match=r"row 1, field 'subs\[\]\.x': a null"):
        enc.encode_arrow(pa.Table.from_pylist(rows, schema=schema))
    with pytest.raises(EncodeError, match=r"field 'sub\.x'"):
        enc.encode(dict(ROWS[0], sub={"x": None, "y": None, "inner": None}))


def test_timestamp_units_converted_and_floored():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
    enc = AvroEncoder(schema)
    for unit, raw in (("s", [-1, 0, 1]), ("ms", [-1, 0, 1500]), ("us", [-1, 1, 1_500_000]),
                      ("ns", [-1, 999, 1_500_000_001])):
        col = pa.array(raw, pa.timestamp(unit))
        out = enc.encode_arrow(pa.table({"ms": col, "us": col}))
        per_ns = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
        for r, payload in zip(raw, out.to_pylist()):
            ns = r * per_ns
            assert payload == fa_write(schema, {"ms": ns // 10**6, "us": ns // 10**3}), (unit, r)
    with pytest.raises(EncodeError, match=r"row 0, field 'us'.*overflows"):
        enc.encode_arrow(pa.table({"ms": pa.array([0], pa.timestamp("s")),
                                   "us": pa.array([2**62], pa.timestamp("s"))}))
    naive = datetime.datetime(2020, 5, 17, 1, 2, 3, 456789)
    assert enc.encode({"ms": naive, "us": naive}) == enc.encode(
        {"ms": naive.replace(tzinfo=UTC), "us": naive.replace(tzinfo=UTC)})
    assert enc.encode({"ms": 5, "us": -7}) == fa_write(schema, {"ms": 5, "us": -7})


def test_date64_and_date_before_1970():
    schema = {"type": "int", "logicalType": "date"}
    enc = AvroEncoder(schema)
    days = [-719162, -1, 0, 1, 2932896]
    out = enc.encode_arrow(pa.array([d * 86400000 for d in days], pa.date64()))
    assert out.to_pylist() == [fa_write("int", d) for d in days]
    assert enc.encode(datetime.date(1969, 12, 31)) == fa_write("int", -1)
    with pytest.raises(EncodeError, match=r"<root>.*datetime"):
        enc.encode(datetime.datetime(2020, 1, 1))


def test_uuid_from_fixed16_arrow_column():
    enc = AvroEncoder({"type": "string", "logicalType": "uuid"})
    us = [uuid.UUID(int=0), uuid.UUID("12345678-9abc-def0-1234-56789abcdef0"), uuid.uuid4()]
    out = enc.encode_arrow(pa.array([u.bytes for u in us], pa.binary(16)))
    assert out.to_pylist() == [fa_write("string", str(u)) for u in us]
    assert [enc.encode(u) for u in us] == out.to_pylist()


def test_union_of_several_types_python_values_and_arrow_refusal():
    schema = ["null", "int", "string", {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]},
              {"type": "record", "name": "B", "fields": [{"name": "b", "type": "string"}]},
              {"type": "array", "items": "int"}, {"type": "map", "values": "string"}]
    enc = AvroEncoder(schema)
    for v in (None, 5, "x", {"a": 1}, [1, 2]):
        assert enc.encode(v) == fa_write(schema, v), v
    # a dict goes to the first record whose fields it has (fastavro may pick the map), else the map
    assert enc.encode({"b": "q"})[:1] == b"\x08" and fa_read(schema, enc.encode({"b": "q"})) == {"b": "q"}
    assert enc.encode({"k": "v"})[:1] == b"\x0c" and fa_read(schema, enc.encode({"k": "v"})) == {"k": "v"}
    with pytest.raises(EncodeError, match=r"no branch of the union takes it"):
        enc.encode(1.5)
    with pytest.raises(SchemaMismatchError, match=r"union of null and one other type"):
        enc.check_arrow(pa.int32())


def test_map_and_array_errors():
    enc = AvroEncoder({"type": "record", "name": "R", "fields": [
        {"name": "m", "type": {"type": "map", "values": "int"}},
        {"name": "a", "type": {"type": "array", "items": "int"}}]})
    with pytest.raises(EncodeError, match=r"field 'm'.*map key of type int"):
        enc.encode({"m": {1: 2}, "a": []})
    with pytest.raises(EncodeError, match=r"field 'a\[\]'.*str.*int"):
        enc.encode({"m": {}, "a": [1, "2"]})
    with pytest.raises(EncodeError, match=r"field 'a'.*set"):
        enc.encode({"m": {}, "a": {1}})
    with pytest.raises(SchemaMismatchError, match=r"field 'm'.*map keys must be strings"):
        enc.check_arrow(pa.struct([("m", pa.map_(pa.int32(), pa.int32())), ("a", pa.list_(pa.int32()))]))


def test_recursive_schema_python_values():
    schema = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    enc = AvroEncoder(schema)
    value = {"v": 1, "next": {"v": 2, "next": {"v": 3, "next": None}}}
    assert enc.encode(value) == fa_write(schema, value)


def test_defaults_of_every_kind_for_absent_fields():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "k", "type": "long"},
        {"name": "b", "type": "bytes", "default": "\u00ff\u0000"},
        {"name": "f", "type": {"type": "fixed", "name": "F2", "size": 2}, "default": "ab"},
        {"name": "e", "type": COLOR, "default": "BLUE"},
        {"name": "a", "type": {"type": "array", "items": "int"}, "default": [1, 2]},
        {"name": "m", "type": {"type": "map", "values": "string"}, "default": {"x": "y"}},
        {"name": "d", "type": "double", "default": 1},
        {"name": "u", "type": ["string", "null"], "default": "dflt"},
        {"name": "r", "type": {"type": "record", "name": "S", "fields": [{"name": "q", "type": "int"}]},
         "default": {"q": 7}}]}
    enc = AvroEncoder(schema)
    want = fa_read(schema, fa_write(schema, {"k": 1, "b": b"\xff\x00", "f": b"ab", "e": "BLUE", "a": [1, 2],
                                             "m": {"x": "y"}, "d": 1.0, "u": "dflt", "r": {"q": 7}}))
    assert fa_read(schema, enc.encode({"k": 1})) == want
    assert [fa_read(schema, x) for x in enc.encode_arrow(pa.table({"k": [1]})).to_pylist()] == [want]


def test_uuid_extension_type_and_wider_decimals():
    from fastkafka.schema_registry._avro_schema import avro_schema_from_arrow
    us = [uuid.UUID(int=1), uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")]
    table = pa.table({"u": pa.array([u.bytes for u in us], pa.uuid()),
                      "d": pa.array([D("-1.25"), D("3.50")], pa.decimal256(20, 2))})
    schema = avro_schema_from_arrow(table.schema)
    assert schema["fields"][0]["type"] == ["null", {"type": "string", "logicalType": "uuid"}]
    out = AvroEncoder(schema).encode_arrow(table).to_pylist()
    back = [fa_read(schema, x) for x in out]
    assert [str(r["u"]) for r in back] == [str(u) for u in us]
    assert [r["d"] for r in back] == [D("-1.25"), D("3.50")]


def test_output_past_the_binary_limit_is_large_binary(monkeypatch):
    from fastkafka.schema_registry import _encode
    enc = AvroEncoder("string")
    col = pa.array(["abc", None, "défg"] * 10)
    small = enc.encode_arrow(col)
    monkeypatch.setattr(_encode, "_BINARY_LIMIT", 20)
    large = enc.encode_arrow(col)
    assert small.type == pa.binary() and large.type == pa.large_binary()
    assert large.to_pylist() == small.to_pylist() and large.null_count == 10


def test_dictionary_index_outside_its_dictionary_refused():
    from fastkafka.schema_registry._encode import JsonEncoder
    bad = pa.DictionaryArray.from_arrays(pa.array([0, 5], pa.int8()), pa.array(["a", "b"]), safe=False)
    with pytest.raises(EncodeError, match=r"row 1, field 's': a dictionary index 5 outside"):
        AvroEncoder({"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}).encode_arrow(
            pa.table({"s": bad}))
    with pytest.raises(EncodeError, match=r"row 1, field 's': a dictionary index 5 outside"):
        JsonEncoder().encode_arrow(pa.table({"s": bad}))
