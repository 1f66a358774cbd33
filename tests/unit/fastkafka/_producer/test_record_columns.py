"""The per-record columns of send_batch (fastkafka/_producer/columns_records.pxi): ``timestamps``
(Arrow timestamp/integer/date64 arrays, lists of int/None) and ``record_headers`` (Arrow
list<struct<key, value>> arrays read from their buffers: list offsets, the struct's children,
validity bitmaps; lists of per-record headers), through the C readers themselves
(``read_timestamps``, ``read_record_headers``: each record's encoded headers section, compared
with an encoder written here from the record format) and through ``append_batch`` (records
decoded back from the batches by tests/reference_records.py).

Arrays are built here: slices at several offsets (the list, and a struct child with an offset of
its own), nulls at every level, empty lists, string/large_string keys, binary/large_binary/string
values, list and large_list, chunked arrays; and the bad ones: a null key, a null entry, wrong
types and lengths.
"""
from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.columns import read_record_headers, read_timestamps
from fastkafka.errors import InvalidRecordError, MalformedRecordError, RecordTooLargeError

from unit.fastkafka._producer.test_columns import make_acc, records_of

HDR = pa.struct([("key", pa.string()), ("value", pa.binary())])


def zz(n: int) -> bytes:
    """A zigzag varint, as the record format writes lengths and counts."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def section(pairs) -> bytes:
    """The encoded headers section of ``pairs`` [(str, bytes | None)], count first."""
    out = zz(len(pairs))
    for k, v in pairs:
        kb = k.encode()
        out += zz(len(kb)) + kb
        out += zz(-1) if v is None else zz(len(v)) + v
    return out


ROWS = [
    [("a", b"1")],
    [("b", b"2"), ("c", None)],
    None,
    [],
    [("dup", b"x"), ("dup", b"y"), ("dup", b"")],
    [("ü-key", b"\x00\xff" * 100)],
    None,
    [("e", None)],
    [("f", b"3"), ("g", b"4")],
    [],
]


def expected(rows, tail=()):
    return [section(list(r or []) + list(tail)) for r in rows]


def as_arrow(rows, key=pa.string(), value=pa.binary(), large_list=False):
    st = pa.struct([("key", key), ("value", value)])
    typ = pa.large_list(st) if large_list else pa.list_(st)
    if pa.types.is_string(value) or pa.types.is_large_string(value):
        rows = [None if r is None else [(k, None if v is None else v.decode("latin-1"))
                                        for k, v in r] for r in rows]
    return pa.array([None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows],
                    typ)


# ---- headers: the C reader ------------------------------------------------------------------

@pytest.mark.parametrize("key,value,large_list", [
    (pa.string(), pa.binary(), False),
    (pa.large_string(), pa.binary(), False),
    (pa.string(), pa.large_binary(), False),
    (pa.large_string(), pa.large_binary(), True),
    (pa.string(), pa.binary(), True),
])
def test_every_key_value_and_list_type_gives_the_records_own_headers(key, value, large_list):
    col = as_arrow(ROWS, key, value, large_list)
    assert read_record_headers(col, len(ROWS)) == expected(ROWS)


def test_string_values_are_sent_as_their_utf8():
    rows = [[("k", "välue".encode())], [("n", None)]]
    col = pa.array([[{"key": "k", "value": "välue"}], [{"key": "n", "value": None}]],
                   pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])))
    assert read_record_headers(col, 2) == expected(rows)


@pytest.mark.parametrize("start", range(0, 10))
def test_slices_of_the_list_read_their_own_rows(start):
    col = as_arrow(ROWS * 3)
    for length in (0, 1, 7, 13):
        part = col.slice(start, length)
        assert read_record_headers(part, length) == expected((ROWS * 3)[start:start + length])


def test_a_struct_child_with_an_offset_of_its_own():
    entries = [("pad", b"0")] * 5 + [("a", b"1"), ("b", None), ("c", b"3"), ("d", b"4")]
    st = pa.array([{"key": k, "value": v} for k, v in entries], HDR).slice(5)
    col = pa.ListArray.from_arrays(pa.array([0, 2, 2, 4], pa.int32()), st)
    want = [[("a", b"1"), ("b", None)], [], [("c", b"3"), ("d", b"4")]]
    assert read_record_headers(col, 3) == expected(want)
    assert read_record_headers(col.slice(1), 2) == expected(want[1:])


def test_chunked_arrays_are_read_as_one_column():
    chunks = [as_arrow(ROWS[:3]), as_arrow(ROWS[3:]).slice(1), as_arrow(ROWS[:1])]
    col = pa.chunked_array(chunks)
    assert read_record_headers(col, len(col)) == expected(ROWS[:3] + ROWS[4:] + ROWS[:1])


def test_the_calls_headers_follow_each_records_own():
    tail = [("spark.partition", b"3"), ("n", None)]
    assert read_record_headers(as_arrow(ROWS), len(ROWS), tail) == expected(ROWS, tail)
    assert read_record_headers(ROWS, len(ROWS), tail) == expected(ROWS, tail)


def test_per_record_lists_and_dicts_on_the_list_path():
    rows = [[("a", b"1")], None, {"x": b"2", "y": None}, [], [("s", "str")]]
    want = [[("a", b"1")], [], [("x", b"2"), ("y", None)], [], [("s", b"str")]]
    assert read_record_headers(rows, 5) == expected(want)
    assert read_record_headers(iter(rows), 5) == expected(want)


@pytest.mark.parametrize("rows,bad_row,what", [
    ([[("a", b"1")], [("b", b"2"), (None, b"3")]], 1, "header 1 has a null key"),
    ([[(None, None)]], 0, "header 0 has a null key"),
])
def test_a_null_key_is_refused_naming_the_record(rows, bad_row, what):
    col = pa.array([[{"key": k, "value": v} for k, v in r] for r in rows], pa.list_(HDR))
    with pytest.raises(MalformedRecordError, match=rf"record_headers\[{bad_row}\]: {what}"):
        read_record_headers(col, len(rows))


def test_a_null_key_in_a_slice_is_named_by_its_row_in_the_slice_and_outside_it_is_ignored():
    rows = [[("a", b"1")], [(None, b"x")], [("b", b"2")], [("c", b"3"), (None, None)]]
    col = pa.array([[{"key": k, "value": v} for k, v in r] for r in rows], pa.list_(HDR))
    with pytest.raises(MalformedRecordError, match=r"record_headers\[0\]: header 0 has a null key"):
        read_record_headers(col.slice(1), 3)
    with pytest.raises(MalformedRecordError, match=r"record_headers\[1\]: header 1 has a null key"):
        read_record_headers(col.slice(2), 2)
    assert read_record_headers(col.slice(2, 1), 1) == expected([rows[2]])


def test_a_null_header_entry_is_refused_naming_the_record():
    col = pa.array([[{"key": "a", "value": b"1"}], [{"key": "b", "value": b"2"}, None]],
                   pa.list_(HDR))
    with pytest.raises(MalformedRecordError, match=r"record_headers\[1\]: header 1 is null"):
        read_record_headers(col, 2)


@pytest.mark.parametrize("col,match", [
    (pa.array([[1, 2]]), r"got list<item: int64>"),
    (pa.array([{"key": "a", "value": b"1"}], HDR), "struct"),
    (pa.array([[{"key": b"a", "value": b"1"}]]), "its key is binary"),
    (pa.array([[{"key": "a", "value": 1}]]), "its value is int64"),
    (pa.array([[{"key": "a", "value": b"1", "x": 1}]]), r"fields \['key', 'value', 'x'\]"),
    (pa.array([[{"name": "a", "value": b"1"}]]), r"fields \['name', 'value'\]"),
])
def test_wrong_arrow_types_are_refused_by_name(col, match):
    with pytest.raises(InvalidRecordError, match=match):
        read_record_headers(col, len(col))


@pytest.mark.parametrize("col,error,match", [
    ([[("a", b"1")], 5], InvalidRecordError, r"record_headers\[1\]"),
    ([[("a", 5)]], InvalidRecordError, r"record_headers\[0\]: header 0: value"),
    ([[("\udcff", b"1")]], MalformedRecordError, r"record_headers\[0\]"),
    ("abc", InvalidRecordError, "not str"),
    (5, InvalidRecordError, "not int"),
])
def test_bad_list_headers_are_refused_naming_the_record(col, error, match):
    with pytest.raises(error, match=match):
        read_record_headers(col, len(col) if isinstance(col, list) else 3)


def test_a_length_other_than_the_values_is_refused():
    with pytest.raises(MalformedRecordError, match="record_headers has 10 elements but values has 9"):
        read_record_headers(as_arrow(ROWS), 9)
    with pytest.raises(MalformedRecordError, match="record_headers has 10 elements but values has 11"):
        read_record_headers(ROWS, 11)


# ---- timestamps: the C reader ---------------------------------------------------------------

MS = [0, 1, 1_700_000_000_123, None, 999, 86_400_000, None, 2_000_000_000_000]


@pytest.mark.parametrize("unit,scale", [("s", None), ("ms", 1), ("us", 1000), ("ns", 1_000_000)])
def test_timestamp_units_are_converted_to_ms(unit, scale):
    if scale is None:      # seconds: whole seconds only
        secs = [None if m is None else m // 1000 for m in MS]
        col = pa.array(secs, pa.timestamp("s", tz="UTC"))
        want = [-7 if s is None else s * 1000 for s in secs]
    else:
        col = pa.array([None if m is None else m * scale + (scale - 1) for m in MS],
                       pa.timestamp(unit, tz="Europe/Paris"))
        want = [-7 if m is None else m for m in MS]        # sub-ms parts truncated
    assert read_timestamps(col, len(MS), -7) == want


def test_integer_and_date64_arrays_are_ms():
    want = [5 if m is None else m for m in MS]
    assert read_timestamps(pa.array(MS, pa.int64()), len(MS), 5) == want
    assert read_timestamps(pa.array([1, None, 3], pa.int32()), 3, 5) == [1, 5, 3]
    assert read_timestamps(pa.array([1, None, 3], pa.uint16()), 3, 5) == [1, 5, 3]
    assert read_timestamps(pa.array(MS, pa.date64()), len(MS), 5) == want


@pytest.mark.parametrize("start", range(0, 9))
def test_timestamp_slices_read_their_own_values_and_nulls(start):
    vals = [None if i % 3 == 1 else i * 1000 for i in range(40)]
    col = pa.array(vals, pa.timestamp("us"))
    part = col.slice(start, 20)
    assert read_timestamps(part, 20, 42) == [42 if v is None else v // 1000
                                              for v in vals[start:start + 20]]
    chunked = pa.chunked_array([col.slice(start, 5), col.slice(30, 7)])
    assert read_timestamps(chunked, 12, 42) == [42 if v is None else v // 1000
                                                 for v in vals[start:start + 5] + vals[30:37]]


def test_lists_of_int_or_none():
    assert read_timestamps([3, None, 1_700_000_000_000], 3, 9) == [3, 9, 1_700_000_000_000]
    assert read_timestamps((x for x in [1, 2]), 2, 9) == [1, 2]
    assert read_timestamps([], 0, 9) == []


@pytest.mark.parametrize("col,error,match", [
    ([1, -1], MalformedRecordError, r"timestamps\[1\]: -1"),
    (pa.array([5, -3]), MalformedRecordError, r"timestamps\[1\]: -3"),
    (pa.array([datetime.datetime(1969, 12, 31, 23, 59)], pa.timestamp("us")), MalformedRecordError,
     r"timestamps\[0\]"),
    (pa.array([2**62], pa.timestamp("s")), MalformedRecordError, r"timestamps\[0\]"),
    (pa.array([2**63 + 5], pa.uint64()), MalformedRecordError, "timestamps: not ms since the epoch"),
    ([1, 2.5], InvalidRecordError, r"timestamps\[1\] must be an int"),
    ([True, 1], InvalidRecordError, r"timestamps\[0\] must be an int"),
    (pa.array([1.5, 2.5]), InvalidRecordError, "Arrow type double is not supported"),
    (pa.array(["1", "2"]), InvalidRecordError, "Arrow type string is not supported"),
    ("12", InvalidRecordError, "not str"),
    ([1, 2, 3], MalformedRecordError, "timestamps has 3 elements but values has 2"),
    (pa.array([1, 2, 3]), MalformedRecordError, "timestamps has 3 elements but values has 2"),
])
def test_bad_timestamps_are_refused_naming_the_record(col, error, match):
    n = 2 if isinstance(col, str) or len(col) == 3 else len(col)
    with pytest.raises(error, match=match):
        read_timestamps(col, n, 0)


# ---- through append_batch -------------------------------------------------------------------

def test_append_batch_gives_each_record_its_timestamp_and_headers():
    acc = make_acc(batch_size=512)         # several batches: the headers cross batch boundaries
    n = 60
    rows = (ROWS * 6)[:n]
    ts = pa.array([None if i % 7 == 0 else 1_600_000_000_000 + i * 1000 for i in range(n)],
                  pa.timestamp("us", tz="UTC"))
    ts_ms = [4242 if i % 7 == 0 else 1_600_000_000 + i for i in range(n)]
    values = pa.array([b"v%d" % i for i in range(n)])
    acc.append_batch("t", 0, values, None, [("task", b"1")], 4242, BatchFuture(), 0, 0,
                     timestamps=ts, record_headers=as_arrow(rows))
    recs = records_of(acc)[0]
    assert [v for _, v, _, _ in recs] == [b"v%d" % i for i in range(n)]
    assert [t for _, _, t, _ in recs] == ts_ms
    assert [h for _, _, _, h in recs] == [list(r or []) + [("task", b"1")] for r in rows]


def test_append_batch_with_sliced_columns_and_sticky_partitions():
    acc = make_acc(batch_size=256)
    n = 40
    rows = (ROWS * 5)[:n + 3]
    hdrs = as_arrow(rows).slice(3)
    ts = pa.array(range(100, 100 + n + 3), pa.int64()).slice(3)
    acc.append_batch("t", -1, pa.array([b"x%d" % i for i in range(n)]), None, None, 1,
                     BatchFuture(), 0, 0, [0, 1, 2, 3], timestamps=ts, record_headers=hdrs)
    got = sorted((r for recs in records_of(acc).values() for r in recs), key=lambda r: r[2])
    assert [(v, t, h) for _, v, t, h in got] == [
        (b"x%d" % i, 103 + i, list(rows[3 + i] or [])) for i in range(n)]


def test_a_bad_key_leaves_every_record_of_the_call_unqueued():
    acc = make_acc()
    col = pa.array([[{"key": "a", "value": b"1"}], [{"key": None, "value": b"2"}]], pa.list_(HDR))
    fut = BatchFuture()
    with pytest.raises(MalformedRecordError, match=r"record_headers\[1\]"):
        acc.append_batch("t", 0, pa.array([b"a", b"b"]), None, None, 1, fut, 0, 0,
                         record_headers=col)
    assert not acc.has_undrained()
    assert fut.appended == 0


def test_the_record_size_limit_counts_each_records_headers():
    acc = make_acc()
    rows = [[("k", b"x" * 10)], [("k", b"x" * 5000)]]
    with pytest.raises(RecordTooLargeError, match="record 1 is"):
        acc.append_batch("t", 0, pa.array([b"a", b"b"]), None, None, 1, BatchFuture(), 0, 0,
                         None, 2000, record_headers=as_arrow(rows))
    assert not acc.has_undrained()


def test_list_path_timestamps_and_headers_through_append_batch():
    acc = make_acc()
    acc.append_batch("t", 0, [b"a", b"b", b"c"], None, {"t": b"1"}, 77, BatchFuture(), 0, 0,
                     timestamps=[5, None, 6], record_headers=[None, [("x", None)], {"y": b"2"}])
    assert [(v, t, h) for _, v, t, h in records_of(acc)[0]] == [
        (b"a", 5, [("t", b"1")]), (b"b", 77, [("x", None), ("t", b"1")]),
        (b"c", 6, [("y", b"2"), ("t", b"1")])]
