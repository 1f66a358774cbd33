"""The column reader of send_batch (fastkafka._producer.columns): lists of bytes-like/None and
Arrow binary/large_binary/string/large_string/null arrays read from their buffers, through its
three readers: ``column_lengths`` (the check alone), ``RecordAccumulator.append_batch`` (records
decoded back from the batches) and ``partitions_for_keys`` (the partitioner's hashing loop).

Covered: null handling in every form, slices at every bit offset of the validity bitmap, chunked
arrays (one chunk, several, none, sliced chunks), empty values against nulls (also with an empty data
buffer), large values, the int32 partitions column in each accepted form (Arrow
slices and casts, chunked, numpy, array.array, strided views), and the types refused with a typed
error. Already covered elsewhere and not repeated: test_accumulator.py (validation before any
append, Arrow binary slices with nulls at offset 123, large_binary/string/large_string, a chunked
array and a null-typed key column, partitions as list/array/pyarrow/int64) and
tests/unit/fastkafka/test_bad_input.py (each bad argument of Producer.send_batch named and typed).
"""
from __future__ import annotations

import array

import numpy as np
import pyarrow as pa
import pytest

from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer.columns import column_lengths
from fastkafka._producer.partitioner import java_partition, partitions_for_keys
from fastkafka.errors import InvalidRecordError, MalformedRecordError, UnknownPartitionError

from reference_records import decode_batch
from unit.fastkafka.fakes import FakeClock, make_cluster

clock = FakeClock(0)


def make_acc(batch_size=4096, memory=64 << 20):
    return RecordAccumulator(batch_size, 0, None, 0, 100, 120_000, BufferPool(memory, batch_size),
                             False)


def records_of(acc, partitions=range(4)):
    """{partition: [(key, value, timestamp, headers)]} of everything queued, in order."""
    cluster = make_cluster({"t": [1] * (max(partitions) + 1)})
    out = {}
    acc.begin_flush()
    try:
        while acc.has_undrained():
            for b in acc.drain(cluster, [1], 1 << 30, clock()).get(1, []):
                b.builder.close()
                b.builder.stamp(-1, -1, -1)
                recs = decode_batch(b.builder.buffer()).records
                out.setdefault(b.partition, []).extend(
                    (r.key, r.value, r.timestamp, r.headers) for r in recs)
                b.complete(0, -1, None)
                acc.deallocate(b)
    finally:
        acc.end_flush()
    return out


def send(values, keys=None, partitions=0, headers=None, ts=5, batch_size=4096):
    """append_batch into a fresh accumulator; returns (appended, {partition: [(key, value)]})."""
    acc = make_acc(batch_size)
    fut = BatchFuture()
    n = acc.append_batch("t", partitions, values, keys, headers, ts, fut, clock(), 0)
    assert fut.appended == n
    got = {p: [(k, v) for k, v, _, _ in recs] for p, recs in records_of(acc).items()}
    return n, got


def pairs(values, keys=None):
    """The (key, value) pairs a reader should produce for plain Python lists."""
    keys = [None] * len(values) if keys is None else keys
    return list(zip(keys, values))


# ---- lists ------------------------------------------------------------------------------------------

def test_list_elements_of_every_bytes_like_kind_are_read_as_their_bytes():
    values = [b"bytes", bytearray(b"bytearray"), memoryview(b"view"), array.array("B", b"arr"),
              np.frombuffer(b"numpy", dtype=np.uint8), None, b"", bytearray()]
    n, got = send(values)
    assert n == 8
    assert got[0] == pairs([b"bytes", b"bytearray", b"view", b"arr", b"numpy", None, b"", b""])


def test_any_iterable_is_read_once_into_a_list():
    seen = []

    def gen():
        for i in range(3):
            seen.append(i)
            yield b"g%d" % i

    assert column_lengths(gen(), (b"k%d" % i for i in range(3))) == (3, 3)
    assert seen == [0, 1, 2]
    n, got = send((b"a", None, b"c"), keys=iter([b"1", b"2", None]))
    assert got[0] == [(b"1", b"a"), (b"2", None), (None, b"c")]


@pytest.mark.parametrize("column, error, match", [
    (None, InvalidRecordError, "values must be a list"),
    ("text", InvalidRecordError, "not str"),
    (b"raw", InvalidRecordError, "not bytes"),
    (memoryview(b"raw"), InvalidRecordError, "not memoryview"),
    (17, InvalidRecordError, "not int"),
    ([b"a", "b", "\udc80"], MalformedRecordError, r"values\[2\]: str cannot be encoded as UTF-8"),
    ([b"a", b"b", True], InvalidRecordError, r"values\[2\].*not bool"),
    ([1.5], InvalidRecordError, r"values\[0\].*not float"),
    ([b"a", object()], InvalidRecordError, r"values\[1\].*not object"),
    ([memoryview(b"abcdef")[::2]], MalformedRecordError, r"values\[0\]"),
])
def test_bad_list_columns_are_refused_naming_the_element(column, error, match):
    with pytest.raises(error, match=match):
        column_lengths(column, None)


def test_keys_are_checked_as_values_are_and_none_means_no_keys():
    assert column_lengths([b"a", b"b"], None) == (2, 0)
    assert column_lengths([], []) == (0, 0)
    with pytest.raises(InvalidRecordError, match=r"keys\[0\]"):
        column_lengths([b"a"], [5])


# ---- Arrow arrays: nulls, slices, chunks -------------------------------------------------------------

VALUES = [None if i % 3 == 0 else b"v%d" % i + b"\x00" * (i % 4) for i in range(40)]
KEYS = [None if i % 5 == 1 else "k\u00e9%d" % i for i in range(40)]     # string, non-ASCII


@pytest.mark.parametrize("start", range(0, 17))
def test_slices_at_every_bit_offset_read_their_own_elements_and_nulls(start):
    stop = start + 19
    v = pa.array(VALUES, pa.binary())[start:stop]
    k = pa.array(KEYS, pa.string())[start:stop]
    expect_k = [None if x is None else x.encode() for x in KEYS[start:stop]]
    assert v.offset == start and column_lengths(v, k) == (19, 19)
    n, got = send(v, keys=k)
    assert got[0] == pairs(VALUES[start:stop], expect_k)
    assert list(partitions_for_keys(k, 7, -9)) == \
        [-9 if x is None else java_partition(x, 7) for x in expect_k]


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()])
def test_chunked_arrays_of_several_sliced_chunks_with_nulls(typ):
    text = pa.types.is_string(typ) or pa.types.is_large_string(typ)
    raw = [None if i % 4 == 2 else ("s%d" % i if text else b"b%d" % i) for i in range(30)]
    arr = pa.array(raw, typ)
    chunked = pa.chunked_array([arr[1:9], arr[9:9], arr[13:30]], typ)
    expect = [None if x is None else (x.encode() if text else x) for x in raw[1:9] + raw[13:30]]
    assert chunked.num_chunks == 3
    n, got = send(chunked)
    assert n == len(expect) and got[0] == pairs(expect)
    single = pa.chunked_array([arr[5:20]], typ)             # one chunk: read in place, sliced
    n, got = send(single)
    assert got[0] == pairs([None if x is None else (x.encode() if text else x) for x in raw[5:20]])


def test_a_chunked_array_without_chunks_is_an_empty_column():
    empty = pa.chunked_array([], pa.binary())
    assert column_lengths(empty, None) == (0, 0)
    assert send(empty)[0] == 0


def test_null_columns_in_each_form_give_null_values_and_keys():
    forms = [pa.nulls(4), pa.nulls(4, pa.binary()), pa.nulls(4, pa.large_string()),
             pa.chunked_array([pa.nulls(1), pa.nulls(3)]), [None] * 4]
    for values in forms:
        for keys in forms:
            n, got = send(values, keys=keys)
            assert n == 4 and got[0] == [(None, None)] * 4, (values, keys)


def test_empty_values_are_not_nulls_even_with_an_empty_data_buffer():
    arr = pa.array([b"", None, b"x", b""], pa.binary())
    n, got = send(arr, keys=pa.array(["", "", None, "k"]))
    assert got[0] == [(b"", b""), (b"", None), (None, b"x"), (b"k", b"")]
    only_empty = pa.array([b"", b""], pa.large_binary())
    assert only_empty.buffers()[2].size == 0
    n, got = send(only_empty, keys=only_empty)
    assert got[0] == [(b"", b""), (b"", b"")]


def test_large_values_from_arrow_and_lists_arrive_whole():
    big = bytes(range(256)) * (3 * 4096 + 7)                  # about 3 MiB
    for values in ([big, b"small", big[::-1]],
                   pa.array([big, b"small", big[::-1]], pa.large_binary()),
                   pa.array([big, b"small", big[::-1]], pa.binary())[0:3]):
        n, got = send(values, keys=[b"k1", None, b"k3"], batch_size=16_384)
        assert got[0] == [(b"k1", big), (None, b"small"), (b"k3", big[::-1])]


@pytest.mark.parametrize("column", [
    pa.array([1, 2], pa.int64()),
    pa.array([1.0], pa.float64()),
    pa.array([True]),
    pa.array([[b"x"]]),
    pa.array([{"a": b"x"}]),
    pa.array(["a", "b"]).dictionary_encode(),
    pa.array([b"abcd"], pa.binary(4)),                      # fixed_size_binary
    pa.array([b"x"], pa.binary_view()),
    pa.array(["x"], pa.string_view()),
    pa.array([1], pa.timestamp("ms")),
], ids=lambda c: str(c.type))
def test_arrow_types_other_than_binary_and_string_are_refused_by_name(column):
    with pytest.raises(InvalidRecordError, match=r"values: Arrow type .* is not supported"):
        column_lengths(column, None)
    with pytest.raises(InvalidRecordError, match=r"keys: Arrow type"):
        column_lengths(pa.array([b"v"] * len(column)), column)


@pytest.mark.parametrize("thing", [pa.table({"v": [b"x"]}), pa.record_batch({"v": [b"x"]}),
                                   pa.scalar(b"x")], ids=["table", "record_batch", "scalar"])
def test_arrow_objects_that_are_not_arrays_are_refused(thing):
    with pytest.raises(InvalidRecordError, match="expected a pyarrow Array, got"):
        column_lengths(thing, None)


def test_arrow_and_list_columns_mix_and_their_lengths_must_agree():
    n, got = send([b"a", b"b"], keys=pa.array([b"k", None]))
    assert got[0] == [(b"k", b"a"), (None, b"b")]
    n, got = send(pa.array(["a", "b"]), keys=[None, b"k"])
    assert got[0] == [(None, b"a"), (b"k", b"b")]
    acc = make_acc()
    with pytest.raises(MalformedRecordError, match="keys has 3 elements but values has 2"):
        acc.append_batch("t", 0, pa.array([b"a", b"b"]), pa.array([b"1", b"2", b"3"])[0:3],
                         None, 0, BatchFuture(), 0, 0)
    assert not acc.has_undrained()


def test_every_record_carries_the_calls_timestamp_and_headers():
    acc = make_acc()
    acc.append_batch("t", 0, pa.array([b"a", None, b"c"]), None, [("h", b"1"), ("n", None)], 4242,
                     BatchFuture(), 0, 0)
    recs = records_of(acc)[0]
    assert [(v, ts, h) for _, v, ts, h in recs] == \
        [(x, 4242, [("h", b"1"), ("n", None)]) for x in (b"a", None, b"c")]


# ---- the partitions column ----------------------------------------------------------------------------

PARTS = [i % 4 for i in range(7, 27)]                    # 20 records over partitions 0..3


def placed(partitions, n=20):
    values = [b"r%d" % i for i in range(n)]
    _, got = send(values, partitions=partitions)
    return {p: [v for _, v in recs] for p, recs in got.items()}


EXPECTED = {p: [b"r%d" % i for i in range(20) if PARTS[i] == p] for p in range(4)}


@pytest.mark.parametrize("partitions", [
    pa.array([9, 9, 9] + PARTS, pa.int32())[3:],                         # sliced int32: offset
    pa.array([9] + PARTS, pa.int64())[1:],                               # sliced, cast
    pa.array(PARTS, pa.uint8()),
    pa.chunked_array([PARTS[:5], PARTS[5:12], PARTS[12:]], pa.int32()),
    np.array(PARTS, dtype=np.int32),
    np.array([x for p in PARTS for x in (p, 9)], dtype=np.int32)[::2],   # not contiguous
    np.array(PARTS, dtype=np.int64),
    memoryview(array.array("i", PARTS)),
    tuple(PARTS),
    (p for p in PARTS),
], ids=["arrow-int32-slice", "arrow-int64-slice", "arrow-uint8", "arrow-chunked", "numpy-int32",
        "numpy-int32-strided", "numpy-int64", "memoryview-i", "tuple", "generator"])
def test_each_form_of_the_partitions_column_places_every_record(partitions):
    assert placed(partitions) == EXPECTED


@pytest.mark.parametrize("partitions, error, match", [
    (pa.array([0, None] + [0] * 18, pa.int32()), UnknownPartitionError, "contains nulls"),
    (pa.array([2**31] + [0] * 19, pa.int64()), InvalidRecordError, "int32 values"),
    (pa.array([0.5] * 20), InvalidRecordError, "integer array, got double"),
    (pa.array([0.0] * 20), InvalidRecordError, "integer array, got double"),
    (pa.array(["0"] * 20), InvalidRecordError, "integer array, got string"),
    (pa.scalar(1, pa.int32()), InvalidRecordError, "expected a pyarrow Array, got Int32Scalar"),
    (pa.table({"p": [0] * 20}), InvalidRecordError, "expected a pyarrow Array, got Table"),
    (pa.array([0] * 21, pa.int32())[1:21][0:19], InvalidRecordError, "has 19 elements"),
    ([0] * 19 + [2**31], InvalidRecordError, "int32 values"),
    ([0] * 19 + ["1"], InvalidRecordError, "int32 values"),
    ([0] * 19 + [-2], UnknownPartitionError, r"partition\[19\] = -2 of topic .t. cannot exist"),
    (np.array([0] * 19 + [-1], dtype=np.int32), UnknownPartitionError, r"partition\[19\] = -1 of topic .t. cannot exist"),
    (array.array("i", [0] * 21), InvalidRecordError, "has 21 elements but values has 20"),
])
def test_bad_partitions_columns_are_refused_before_any_record(partitions, error, match):
    acc = make_acc()
    fut = BatchFuture()
    with pytest.raises(error, match=match):
        acc.append_batch("t", partitions, [b"x"] * 20, None, None, 0, fut, 0, 0)
    assert not acc.has_undrained() and fut.done() and fut.appended == 0


def test_partitions_for_keys_reads_lists_and_arrow_alike():
    keys = [b"key-%d" % i if i % 6 else None for i in range(50)]
    expect = [-1 if k is None else java_partition(k, 12) for k in keys]
    for form in (keys, tuple(keys), pa.array(keys, pa.binary()), pa.array(keys, pa.large_binary()),
                 pa.chunked_array([keys[:20], keys[20:]], pa.binary())):
        assert list(partitions_for_keys(form, 12, -1)) == expect
    with pytest.raises(InvalidRecordError, match=r"keys\[1\]"):
        partitions_for_keys([b"a", 2], 3)
