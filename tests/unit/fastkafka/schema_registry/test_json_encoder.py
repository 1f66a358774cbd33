"""JsonEncoder: every entry is compact JSON that ``json.loads`` reads back as the row's value by the
documented rules (bytes as base64, dates and timestamps as RFC 3339 text, decimals as exact
numbers), strings escaped per RFC 8259, NaN/Infinity refused naming the row and field."""

from __future__ import annotations

import base64
import datetime
import json
import math
from decimal import Decimal

import pytest

import pyarrow as pa

from fastkafka.schema_registry._encode import JsonEncoder  # noqa: E402
from fastkafka.schema_registry._errors import EncodeError, SchemaMismatchError  # noqa: E402

UTC = datetime.timezone.utc


def as_json_value(v, t):
    """What the documented rules make of a Python value of Arrow type ``t``."""
    if v is None:
        return None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64encode(v).decode()
    if pa.types.is_timestamp(t):
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        text = f"{v.year:04d}-" + v.replace(tzinfo=None).strftime("%m-%dT%H:%M:%S")
        if digits:
            text += "." + f"{v.microsecond:06d}{'000' if digits == 9 else ''}"[:digits]
        return text + "Z"
    if pa.types.is_date(t):
        return v.isoformat()
    if pa.types.is_struct(t):
        return {f.name: as_json_value(v[f.name], f.type) for f in t}
    if pa.types.is_map(t):
        return {k: as_json_value(x, t.item_type) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [as_json_value(x, t.value_type) for x in v]
    return v


SCHEMA = pa.schema([
    pa.field("b", pa.bool_()), pa.field("i8", pa.int8()), pa.field("i64", pa.int64()),
    pa.field("u64", pa.uint64()), pa.field("f32", pa.float32()), pa.field("f64", pa.float64()),
    pa.field("dec", pa.decimal128(38, 4)), pa.field("s", pa.string()), pa.field("ls", pa.large_string()),
    pa.field("y", pa.binary()), pa.field("fx", pa.binary(2)), pa.field("d", pa.date32()),
    pa.field("tms", pa.timestamp("ms", tz="UTC")), pa.field("tus", pa.timestamp("us")),
    pa.field("ts", pa.timestamp("s")), pa.field("l", pa.list_(pa.int32())),
    pa.field("m", pa.map_(pa.string(), pa.float64())),
    pa.field("st", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.list_(pa.string()))])),
    pa.field("dict", pa.dictionary(pa.int16(), pa.string())),
])

ROWS = [
    {"b": True, "i8": -128, "i64": -2**63, "u64": 2**64 - 1, "f32": 0.1, "f64": 0.1, "dec": Decimal("-123.4500"),
     "s": "héllo ✓ 𝄞 \"q\" \\ /", "ls": "", "y": b"", "fx": b"\x00\xff", "d": datetime.date(1969, 12, 31),
     "tms": datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
     "tus": datetime.datetime(1, 1, 1, 0, 0, 0, 1), "ts": datetime.datetime(9999, 12, 31, 23, 59, 59),
     "l": [], "m": [], "st": {"x": None, "y": []}, "dict": "a"},
    {"b": False, "i8": 127, "i64": 2**63 - 1, "u64": 0, "f32": -1.5, "f64": -0.0, "dec": Decimal("0.0001"),
     "s": "日本語", "ls": "x" * 1000, "y": b"\x00\x01\x02\x03", "fx": b"ab", "d": datetime.date(2024, 2, 29),
     "tms": datetime.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=UTC),
     "tus": datetime.datetime(2024, 2, 29, 12, 0, 0, 123456), "ts": datetime.datetime(1970, 1, 1),
     "l": [1, None, -3], "m": [("k", 1.5), ("ü\n", None)], "st": {"x": 7, "y": ["a", None]}, "dict": "b"},
    {k: None for k in SCHEMA.names},
    {"b": None, "i8": 0, "i64": 0, "u64": 1, "f32": 3.4028234663852886e38, "f64": 1e-300,
     "dec": Decimal("9999999999999999999999999999999999.9999"), "s": "\u2028\u2029", "ls": None, "y": b"abcde",
     "fx": None, "d": datetime.date(1, 1, 1), "tms": None, "tus": None, "ts": None, "l": None,
     "m": None, "st": None, "dict": None},
]


def test_every_entry_reads_back_as_the_row():
    table = pa.Table.from_pylist(ROWS, schema=SCHEMA)
    out = JsonEncoder(SCHEMA).encode_arrow(table, b"\x00\x00\x00\x00\x07")
    assert out.type == pa.binary() and len(out) == len(ROWS)
    for row, raw in zip(table.to_pylist(), out.to_pylist()):
        assert raw[:5] == b"\x00\x00\x00\x00\x07"
        text = raw[5:].decode("utf-8")
        assert ": " not in text and ", " not in text.replace('"\u2028\u2029"', "")  # compact
        back = json.loads(text, parse_float=Decimal)
        assert list(back) == SCHEMA.names                    # keys in field order
        for f in SCHEMA:
            want = as_json_value(row[f.name], f.type)
            got = back[f.name]
            if isinstance(want, float):
                assert float(got) == want and math.copysign(1, float(got)) == math.copysign(1, want)
            elif isinstance(want, dict) and f.name == "m":
                assert {k: (None if x is None else float(x)) for k, x in got.items()} == want
            else:
                assert got == want, f.name
    first = out[0].as_py()[5:].decode()
    assert '"dec":-123.4500,' in first and '"f64":0.1,' in first and '"f32":0.10000000149011612,' in first
    assert '"tms":"1969-12-31T23:59:59.999Z"' in first and '"ts":"9999-12-31T23:59:59Z"' in first
    assert '"tus":"0001-01-01T00:00:00.000001Z"' in first


def test_floats_round_trip_exactly():
    import random
    rnd = random.Random(7)
    values = [rnd.uniform(-1e10, 1e10) for _ in range(300)] + [2.0**-1074, 1.7976931348623157e308, 5e-324,
                                                                 0.3, 1 / 3, 123456789.0, -2.5e-8]
    out = JsonEncoder().encode_arrow(pa.array(values))
    assert [json.loads(x) for x in out.to_pylist()] == values


def test_every_control_character_and_non_ascii_escaped_per_rfc8259():
    text = "".join(chr(c) for c in range(0x20)) + '"\\/\x7f é€𝄞'
    raw = JsonEncoder().encode_arrow(pa.array([text]))[0].as_py()
    assert json.loads(raw) == text
    body = raw.decode("utf-8")
    assert all(chr(c) not in body for c in range(0x20))
    for c in range(0x20):
        assert f"\\u{c:04x}" in body
    assert '\\"' in body and "\\\\" in body and "é€𝄞" in body     # non-ASCII as UTF-8, not escaped


def test_nan_and_infinity_refused_with_row_and_field():
    table = pa.table({"a": [1.0, 2.0, 3.0], "x": [0.0, 1.0, float("nan")]})
    with pytest.raises(EncodeError, match=r"row 2, field 'x': NaN or Infinity"):
        JsonEncoder().encode_arrow(table)
    with pytest.raises(EncodeError, match=r"row 0, field 's\.v\[\]'"):
        JsonEncoder().encode_arrow(pa.table({"s": pa.array([{"v": [1.0, float("-inf")]}],
                                                           pa.struct([("v", pa.list_(pa.float32()))]))}))


def test_null_struct_row_is_a_null_entry_and_slices():
    sa = pa.array([{"a": 1}, None, {"a": 3}, {"a": None}], pa.struct([("a", pa.int64())]))
    out = JsonEncoder().encode_arrow(sa)
    assert out.to_pylist() == [b'{"a":1}', None, b'{"a":3}', b'{"a":null}']
    assert JsonEncoder().encode_arrow(sa.slice(1, 2)).to_pylist() == [None, b'{"a":3}']
    chunked = pa.chunked_array([sa.slice(2), sa.slice(0, 1)])
    assert JsonEncoder().encode_arrow(chunked).to_pylist() == [b'{"a":3}', b'{"a":null}', b'{"a":1}']


def test_unsupported_arrow_type_names_the_field():
    with pytest.raises(SchemaMismatchError, match=r"field 'a\.d': Arrow type duration"):
        JsonEncoder(pa.struct([("a", pa.struct([("d", pa.duration("s"))]))]))
    with pytest.raises(SchemaMismatchError, match=r"field 'm'.*keys are strings"):
        JsonEncoder().encode_arrow(pa.table({"m": pa.array([[(1, 2)]], pa.map_(pa.int32(), pa.int32()))}))


def test_dates_outside_rfc3339_years_refused():
    with pytest.raises(EncodeError, match=r"row 1, field 'd': a date or time outside"):
        JsonEncoder().encode_arrow(pa.table({"d": pa.array([0, 2932897], pa.date32())}))


def test_doubles_written_as_python_repr_writes_them():
    import random
    rnd = random.Random(11)
    values = [round(rnd.uniform(-10.0 ** e, 10.0 ** e), k) for e in range(-3, 15) for k in range(0, 10)
              for _ in range(5)]
    values += [0.1, 0.2, 0.3, 0.7, 1e-4, -1e-4, 0.00011, 99999999999999.9, 123456.789, 2.5, -0.5, 1.0, 100.0,
               9007199254740991.0, 4503599627370497.0, 1e15 - 0.5, 0.1 + 0.2]
    values = [v for v in values if v != 0]
    out = JsonEncoder().encode_arrow(pa.array(values)).to_pylist()
    for v, raw in zip(values, out):
        assert json.loads(raw) == v
        if 1e-4 <= abs(v) < 1e16:
            assert raw.decode() == repr(v), v


def test_uuid_extension_as_text():
    import uuid
    us = [uuid.UUID(int=0), uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")]
    out = JsonEncoder().encode_arrow(pa.table({"u": pa.array([u.bytes for u in us] + [None], pa.uuid())}))
    assert [json.loads(x) for x in out.to_pylist()] == [{"u": str(u)} for u in us] + [{"u": None}]
