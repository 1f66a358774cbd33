"""AvroEncoder against fastavro: the bytes of ``encode`` (a Python value) and of ``encode_arrow``
(Arrow columns) are fastavro's ``schemaless_writer`` output for the same values, and fastavro's
``schemaless_reader`` reads them back equal."""

from __future__ import annotations

import io
import math

import pytest

import fastavro
import pyarrow as pa

from fastkafka.schema_registry._encode import AvroEncoder  # noqa: E402
from fastkafka.schema_registry._errors import EncodeError, SchemaMismatchError  # noqa: E402

HEADER = b"\x00\x00\x00\x01\x02"


def fa_write(schema, value) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def fa_read(schema, payload: bytes):
    parsed = fastavro.parse_schema(schema)
    return fastavro.schemaless_reader(io.BytesIO(payload), parsed, parsed)


def same(a, b) -> bool:
    """Equality where NaN equals NaN (and -0.0 is told from 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


FLAT = {"type": "record", "name": "Flat", "namespace": "t", "fields": [
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "b", "type": "boolean"},
    {"name": "s", "type": "string"},
    {"name": "y", "type": "bytes"},
    {"name": "ns", "type": ["null", "string"], "default": None},
    {"name": "nl", "type": ["null", "long"], "default": None},
    {"name": "sn", "type": ["string", "null"]},
]}

FLAT_ROWS = [
    {"i": 0, "l": 0, "f": 0.0, "d": 0.0, "b": False, "s": "", "y": b"", "ns": None, "nl": None, "sn": None},
    {"i": -2**31, "l": -2**63, "f": -1.5, "d": -0.0, "b": True, "s": "héllo wörld ✓ 𝄞", "y": b"\x00\xff",
     "ns": "", "nl": -1, "sn": "x"},
    {"i": 2**31 - 1, "l": 2**63 - 1, "f": float("inf"), "d": float("nan"), "b": True, "s": "a" * 300,
     "y": bytes(range(256)), "ns": "ümlaut", "nl": 2**40, "sn": ""},
    {"i": 1, "l": 63, "f": float("-inf"), "d": 1e308, "b": False, "s": "\x00\n\"", "y": b"x" * 200,
     "ns": None, "nl": 64, "sn": None},
]

FLAT_ARROW = pa.schema([
    pa.field("i", pa.int32(), False), pa.field("l", pa.int64(), False), pa.field("f", pa.float32(), False),
    pa.field("d", pa.float64(), False), pa.field("b", pa.bool_(), False), pa.field("s", pa.string(), False),
    pa.field("y", pa.binary(), False), pa.field("ns", pa.string()), pa.field("nl", pa.int64()),
    pa.field("sn", pa.string()),
])


def test_encode_flat_records_equal_fastavro_bytes():
    enc = AvroEncoder(FLAT)
    for row in FLAT_ROWS:
        out = enc.encode(row, HEADER)
        assert out[:5] == HEADER
        assert out[5:] == fa_write(FLAT, row)
        assert same(fa_read(FLAT, out[5:]), row)


def test_encode_without_header_and_from_json_text():
    import json
    enc = AvroEncoder(json.dumps(FLAT))
    assert enc.encode(FLAT_ROWS[1]) == fa_write(FLAT, FLAT_ROWS[1])


def test_encode_missing_field_takes_default():
    enc = AvroEncoder(FLAT)
    row = dict(FLAT_ROWS[1])
    del row["ns"], row["nl"]
    assert fa_read(FLAT, enc.encode(row))["ns"] is None


def test_encode_arrow_flat_equals_fastavro_bytes():
    enc = AvroEncoder(FLAT)
    table = pa.Table.from_pylist(FLAT_ROWS, schema=FLAT_ARROW)
    out = enc.encode_arrow(table, HEADER)
    assert out.type == pa.binary() and len(out) == len(FLAT_ROWS) and out.null_count == 0
    for row, payload in zip(FLAT_ROWS, out.to_pylist()):
        assert payload[:5] == HEADER
        f32 = dict(row, f=float(pa.scalar(row["f"], pa.float32()).as_py()))
        assert payload[5:] == fa_write(FLAT, f32)
        assert same(fa_read(FLAT, payload[5:]), f32)


@pytest.mark.parametrize("form", ["table", "batch", "struct", "chunked", "sliced", "chunked_sliced"])
def test_encode_arrow_input_forms(form):
    enc = AvroEncoder(FLAT)
    rows = FLAT_ROWS * 3
    table = pa.Table.from_pylist(rows, schema=FLAT_ARROW)
    expect = [HEADER + fa_write(FLAT, dict(r, f=float(pa.scalar(r["f"], pa.float32()).as_py())))
              for r in rows]
    if form == "table":
        data = pa.concat_tables([table.slice(0, 5), table.slice(5)])
    elif form == "batch":
        data = table.to_batches()[0]
    elif form == "struct":
        data = table.to_struct_array().combine_chunks()
    elif form == "chunked":
        data = pa.chunked_array([table.slice(0, 3).to_struct_array().combine_chunks(),
                                 table.slice(3).to_struct_array().combine_chunks()])
    elif form == "sliced":
        data = table.to_struct_array().combine_chunks().slice(3, 6)
        expect = expect[3:9]
    else:
        sa = table.to_struct_array().combine_chunks()
        data = pa.chunked_array([sa.slice(1, 4), sa.slice(7, 3)])
        expect = expect[1:5] + expect[7:10]
    assert enc.encode_arrow(data, HEADER).to_pylist() == expect


def test_encode_arrow_sliced_children_and_nulls():
    # columns that are slices themselves (their own offsets), with nulls in them
    enc = AvroEncoder(FLAT)
    table = pa.Table.from_pylist(FLAT_ROWS * 4, schema=FLAT_ARROW)
    cols = [c.combine_chunks().slice(2, 9) for c in table.columns]
    sa = pa.StructArray.from_arrays(cols, fields=list(FLAT_ARROW))
    expect = [fa_write(FLAT, dict(r, f=float(pa.scalar(r["f"], pa.float32()).as_py())))
              for r in (FLAT_ROWS * 4)[2:11]]
    assert enc.encode_arrow(sa).to_pylist() == expect


def test_null_struct_row_is_a_null_entry():
    enc = AvroEncoder(FLAT)
    table = pa.Table.from_pylist(FLAT_ROWS[:2], schema=FLAT_ARROW)
    sa = table.to_struct_array().combine_chunks()
    with_null = pa.StructArray.from_arrays(sa.flatten(), fields=list(FLAT_ARROW),
                                           mask=pa.array([True, False]))
    out = enc.encode_arrow(with_null, HEADER)
    assert out.null_count == 1 and out[0].as_py() is None
    assert out[1].as_py()[5:] == fa_write(FLAT, dict(FLAT_ROWS[1]))


def test_primitive_schema_from_a_plain_array():
    enc = AvroEncoder('"string"')
    out = enc.encode_arrow(pa.array(["a", None, "ü"]))
    assert out.to_pylist() == [fa_write("string", "a"), None, fa_write("string", "ü")]
    assert enc.encode("ü") == fa_write("string", "ü")
    assert AvroEncoder('"long"').encode_arrow(pa.array([-1, 2**62])).to_pylist() == [
        fa_write("long", -1), fa_write("long", 2**62)]


def test_non_null_field_with_a_null_names_row_and_field():
    enc = AvroEncoder(FLAT)
    rows = [dict(FLAT_ROWS[0]), dict(FLAT_ROWS[1]), dict(FLAT_ROWS[2])]
    schema = pa.schema([f.with_nullable(True) for f in FLAT_ARROW])
    rows[2]["s"] = None
    with pytest.raises(EncodeError, match=r"row 2, field 's'.*null.*string"):
        enc.encode_arrow(pa.Table.from_pylist(rows, schema=schema))
    # the first rows alone are fine: the error left nothing behind
    assert len(enc.encode_arrow(pa.Table.from_pylist(rows[:2], schema=schema))) == 2


def test_encode_errors_name_field_type_and_value_type():
    enc = AvroEncoder(FLAT)
    row = dict(FLAT_ROWS[1])
    with pytest.raises(EncodeError, match=r"field 'i'.*str.*int"):
        enc.encode(dict(row, i="1"))
    with pytest.raises(EncodeError, match=r"field 'i'.*out of range"):
        enc.encode(dict(row, i=2**31))
    with pytest.raises(EncodeError, match=r"field 'i'.*bool"):
        enc.encode(dict(row, i=True))
    with pytest.raises(EncodeError, match=r"field 's'.*NoneType.*string"):
        enc.encode(dict(row, s=None))
    with pytest.raises(EncodeError, match=r"field 'y'.*str.*bytes"):
        enc.encode(dict(row, y="text"))
    with pytest.raises(EncodeError, match=r"field 'nl'.*str"):
        enc.encode(dict(row, nl="5"))
    missing = dict(row)
    del missing["s"]
    with pytest.raises(EncodeError, match=r"field 's': missing"):
        enc.encode(missing)
    with pytest.raises(EncodeError, match=r"<root>.*list"):
        enc.encode([1, 2])
    secret = "hunter2-do-not-log"
    with pytest.raises(EncodeError) as info:
        enc.encode(dict(row, i=secret))
    assert secret not in str(info.value)


def test_arrow_type_mismatch_names_the_first_field():
    enc = AvroEncoder(FLAT)
    bad = pa.schema([f if f.name != "l" else pa.field("l", pa.string()) for f in FLAT_ARROW])
    with pytest.raises(SchemaMismatchError, match=r"field 'l': Arrow type string does not fit Avro type long"):
        enc.check_arrow(bad)
    with pytest.raises(SchemaMismatchError, match=r"field 'l'"):
        enc.encode_arrow(pa.Table.from_pylist([], schema=bad))
    missing = pa.schema([f for f in FLAT_ARROW if f.name != "s"])
    with pytest.raises(SchemaMismatchError, match=r"field 's': missing from the Arrow type"):
        enc.check_arrow(missing)
    enc.check_arrow(FLAT_ARROW)


def test_arrow_int64_into_avro_int_checked_per_value():
    enc = AvroEncoder({"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]})
    ok = pa.table({"n": pa.array([-2**31, 2**31 - 1], pa.int64())})
    assert [fa_read({"type": "record", "name": "R", "fields": [{"name": "n", "type": "int"}]}, x)["n"]
            for x in enc.encode_arrow(ok).to_pylist()] == [-2**31, 2**31 - 1]
    with pytest.raises(EncodeError, match=r"row 1, field 'n': 2147483648 is out of the range"):
        enc.encode_arrow(pa.table({"n": pa.array([0, 2**31], pa.int64())}))
    with pytest.raises(SchemaMismatchError, match=r"uint64"):
        enc.check_arrow(pa.struct([("n", pa.uint64())]))


def test_absent_arrow_field_with_default_is_written_as_default():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": "dflt"},
        {"name": "c", "type": ["null", "int"], "default": None}]}
    enc = AvroEncoder(schema)
    out = enc.encode_arrow(pa.table({"a": [1, 2], "extra": ["ignored", "too"]}))
    assert [fa_read(schema, x) for x in out.to_pylist()] == [
        {"a": 1, "b": "dflt", "c": None}, {"a": 2, "b": "dflt", "c": None}]


def test_other_rows_not_corrupted_and_encoder_reusable_after_error():
    enc = AvroEncoder(FLAT)
    with pytest.raises(EncodeError):
        enc.encode(dict(FLAT_ROWS[1], i="x"))
    assert enc.encode(FLAT_ROWS[1]) == fa_write(FLAT, FLAT_ROWS[1])


def test_arrow_c_stream_and_c_array_objects():
    enc = AvroEncoder(FLAT)
    table = pa.Table.from_pylist(FLAT_ROWS, schema=FLAT_ARROW)
    want = enc.encode_arrow(table).to_pylist()

    class Stream:                        # a foreign frame exporting an Arrow C stream (Polars, ...)
        def __arrow_c_stream__(self, requested_schema=None):
            return table.__arrow_c_stream__(requested_schema)

    class OneArray:                      # ... or one Arrow C array
        def __arrow_c_array__(self, requested_schema=None):
            return table.to_struct_array().combine_chunks().__arrow_c_array__(requested_schema)

    assert enc.encode_arrow(Stream()).to_pylist() == want
    assert enc.encode_arrow(OneArray()).to_pylist() == want
    with pytest.raises(TypeError, match=r"encode_arrow takes a pyarrow Table.*not list"):
        enc.encode_arrow([1, 2])


def test_empty_inputs():
    enc = AvroEncoder(FLAT)
    empty = pa.Table.from_pylist([], schema=FLAT_ARROW)
    for data in (empty, pa.RecordBatch.from_pylist([], schema=FLAT_ARROW),
                 pa.chunked_array([], pa.struct(list(FLAT_ARROW)))):
        out = enc.encode_arrow(data, HEADER)
        assert out.type == pa.binary() and len(out) == 0
    assert AvroEncoder("string").encode_arrow(pa.array([""] * 3)).to_pylist() == [b"\x00"] * 3


def test_encoders_pickle_and_rebuild():
    import pickle
    from fastkafka.schema_registry._encode import JsonEncoder
    enc = pickle.loads(pickle.dumps(AvroEncoder(FLAT)))
    assert enc.encode(FLAT_ROWS[1]) == fa_write(FLAT, FLAT_ROWS[1])
    js = pickle.loads(pickle.dumps(JsonEncoder(pa.struct([("a", pa.int64())]))))
    assert js.encode_arrow(pa.table({"a": [1]})).to_pylist() == [b'{"a":1}']


def test_reentrant_encode_from_a_mapping_uses_its_own_buffer():
    from collections.abc import Mapping
    enc = AvroEncoder(FLAT)
    inner = []

    class Sneaky(Mapping):               # a value whose own code encodes with the same encoder
        def __init__(self, d):
            self.d = d

        def __getitem__(self, k):
            if k == "s" and not inner:
                inner.append(enc.encode(FLAT_ROWS[2]))
            return self.d[k]

        def __iter__(self):
            return iter(self.d)

        def __len__(self):
            return len(self.d)

    assert enc.encode(Sneaky(FLAT_ROWS[1])) == fa_write(FLAT, FLAT_ROWS[1])
    assert inner == [fa_write(FLAT, FLAT_ROWS[2])]


def test_numpy_numbers_and_huge_ints():
    import numpy as np
    enc = AvroEncoder(FLAT)
    row = dict(FLAT_ROWS[1], i=np.int32(-7), l=np.int64(2**40), f=np.float32(1.5), d=np.float64(2.5))
    assert enc.encode(row) == fa_write(FLAT, dict(FLAT_ROWS[1], i=-7, l=2**40, f=1.5, d=2.5))
    with pytest.raises(EncodeError, match=r"field 'd'.*too large for a double"):
        enc.encode(dict(FLAT_ROWS[1], d=10**400))
    with pytest.raises(EncodeError, match=r"field 'l'.*float"):
        enc.encode(dict(FLAT_ROWS[1], l=1.0))
    with pytest.raises(EncodeError, match=r"field 'd'.*bool"):
        enc.encode(dict(FLAT_ROWS[1], d=True))
