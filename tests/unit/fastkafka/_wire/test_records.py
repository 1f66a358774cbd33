"""BatchBuilder (RecordBatch v2) against the pure-Python reference and independent decoders."""
import gc
import os
import struct

import crc32c as crc32c_pkg
import pytest
from hypothesis import given, settings, strategies as st

from fastkafka._wire.records import BatchBuilder, headers_size, record_size
import reference_records as ref

CODECS = [0, 1, 2, 3, 4]
TS0 = 1_700_000_000_000

header_key = st.one_of(st.text(max_size=8), st.text(max_size=8).map(lambda s: s.encode()))
header_value = st.one_of(st.none(), st.binary(max_size=16))
record = st.tuples(
    st.integers(-10**6, 10**6).map(lambda d: TS0 + d),        # negative deltas too
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.lists(st.tuples(header_key, header_value), max_size=3)),
)
records_st = st.lists(record, min_size=1, max_size=40)


def build(records, codec=0, pid=-1, epoch=-1, seq=-1, transactional=False, **kw):
    b = BatchBuilder(10**7, codec, **kw)
    for ts, k, v, h in records:
        assert b.append(ts, k, v, h) is True
    b.close()
    b.stamp(pid, epoch, seq, transactional)
    return b


def norm_headers(h):
    return [(k.decode() if isinstance(k, bytes) else k, v) for k, v in (h or [])]


def check_decoded(batch, records):
    assert batch.record_count == len(records)
    assert batch.last_offset_delta == len(records) - 1
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    got = [(r.timestamp, r.key, r.value, r.headers) for r in batch.records]
    assert got == [(ts, k, v, norm_headers(h)) for ts, k, v, h in records]


# ---- agreement with the reference ------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(records=records_st, pid=st.integers(-1, 2**63 - 1), epoch=st.integers(-1, 32767),
       seq=st.integers(-1, 2**31 - 1), transactional=st.booleans())
def test_uncompressed_bytes_equal_reference(records, pid, epoch, seq, transactional):
    b = build(records, 0, pid, epoch, seq, transactional)
    expected = ref.encode_batch(records, producer_id=pid, producer_epoch=epoch,
                                base_sequence=seq, transactional=transactional)
    assert bytes(b.buffer()) == expected
    assert b.size_in_bytes == len(expected)
    decoded = ref.decode_batch(b.buffer())
    check_decoded(decoded, records)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (pid, epoch, seq)
    assert decoded.is_transactional == transactional


@pytest.mark.parametrize("codec", CODECS[1:])
@settings(max_examples=40, deadline=None)
@given(records=records_st)
def test_compressed_content_equals_reference(codec, records):
    b = build(records, codec, 7, 3, 100)
    decoded = ref.decode_batch(b.buffer())
    assert decoded.compression_type == codec
    check_decoded(decoded, records)
    # the reference's own batch carries the same content
    other = ref.decode_batch(ref.encode_batch(records, compression=codec, producer_id=7,
                                              producer_epoch=3, base_sequence=100))
    assert other.records == decoded.records
    # the header fields are identical apart from length and CRC (codec output may differ)
    skip = {"batch_length", "crc", "records"}
    assert {k: v for k, v in vars(decoded).items() if k not in skip} == \
           {k: v for k, v in vars(other).items() if k not in skip}


@pytest.mark.parametrize("codec", CODECS)
def test_large_batch_every_codec(codec):
    # grows past the initial 1 MiB buffer; compressible and incompressible values
    records = [(TS0 + i, b"key-%d" % i, (os.urandom(500) if i % 2 else b"z" * 2000), None)
               for i in range(2000)]
    b = build(records, codec)
    decoded = ref.decode_batch(b.buffer())
    assert decoded.compression_type == codec
    check_decoded(decoded, records)
    assert b.size_in_bytes == len(b.buffer())
    if codec == 0:
        assert bytes(b.buffer()) == ref.encode_batch(records)
    else:   # half the values are 2000 identical bytes: every codec shrinks the batch
        assert b.size_in_bytes < len(ref.encode_batch(records))


def test_huge_single_record():
    v = os.urandom(3 * 1024 * 1024 + 5)
    b = BatchBuilder(1024)
    assert b.append(TS0, None, v) is True           # first record always fits
    assert b.append(TS0, None, b"x") is False
    b.close()
    b.stamp(-1, -1, -1)
    assert bytes(b.buffer()) == ref.encode_batch([(TS0, None, v, None)])


def test_explicit_base_timestamp():
    recs = [(TS0 + 5, b"a", b"b", None), (TS0 - 3, None, b"c", None)]
    b = BatchBuilder(1 << 16, base_timestamp=TS0)
    for r in recs:
        b.append(*r)
    b.close()
    b.stamp(-1, -1, -1)
    assert b.base_timestamp == TS0
    assert bytes(b.buffer()) == ref.encode_batch(recs, base_timestamp=TS0)


def test_empty_batch():
    b = BatchBuilder(1024)
    b.close()
    b.stamp(-1, -1, -1)
    d = ref.decode_batch(b.buffer())
    assert d.record_count == 0 and d.records == [] and d.last_offset_delta == -1
    assert b.base_timestamp is None and b.max_timestamp is None


# ---- stamping -----------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_restamp_after_epoch_change(codec):
    recs = [(TS0 + i, b"k", b"value %d" % i, [("h", b"1")]) for i in range(50)]
    b = build(recs, codec, pid=1000, epoch=1, seq=0)
    first = bytes(b.buffer())
    view = b.buffer()
    b.stamp(1000, 2, 50)
    second = bytes(b.buffer())
    assert bytes(view) == second                    # same memory, re-stamped in place
    assert first[61:] == second[61:]                # records untouched
    d = ref.decode_batch(second)                    # validates the CRC
    assert (d.producer_id, d.producer_epoch, d.base_sequence) == (1000, 2, 50)
    (crc,) = struct.unpack_from(">I", second, 17)
    assert crc == crc32c_pkg.crc32c(second[21:])
    assert crc != struct.unpack_from(">I", first, 17)[0]
    if codec == 0:
        assert second == ref.encode_batch(recs, producer_id=1000, producer_epoch=2,
                                          base_sequence=50)


def test_header_layout_fields():
    b = build([(TS0, b"k", b"v", None), (TS0 + 10, b"k", b"v", None)], 3, 42, 7, 9, True)
    buf = bytes(b.buffer())
    (base_offset, length, leader_epoch, magic, crc, attrs, lod, base_ts, max_ts,
     pid, epoch, seq, count) = ref.HEADER.unpack_from(buf)
    assert (base_offset, leader_epoch, magic) == (0, -1, 2)
    assert length == len(buf) - 12
    assert attrs == 3 | 0x10
    assert (lod, base_ts, max_ts, pid, epoch, seq, count) == (1, TS0, TS0 + 10, 42, 7, 9, 2)


# ---- fullness -------------------------------------------------------------------------

def test_batch_size_fullness():
    one = record_size(0, 0, 1, 100, None)
    limit = 61 + 3 * one
    b = BatchBuilder(limit)
    assert b.estimated_size == 61
    for i in range(3):
        assert b.has_room_for(record_size(0, i, 1, 100, None))
        assert b.append(TS0, b"k", b"v" * 100) is True
    assert b.estimated_size == limit == b.size_in_bytes    # exactly full is accepted
    assert not b.has_room_for(1)
    assert b.append(TS0, b"k", b"v") is False
    assert b.record_count == 3 and b.estimated_size == limit  # nothing appended
    assert b.append_many(TS0, None, [b"x"]) == 0
    b.close()
    b.stamp(-1, -1, -1)
    assert ref.decode_batch(b.buffer()).record_count == 3


def test_first_record_always_fits():
    b = BatchBuilder(10)
    assert b.has_room_for(10**6)
    assert b.append(TS0, None, b"x" * 5000) is True
    assert b.append(TS0, None, b"") is False


@settings(max_examples=200, deadline=None)
@given(ts_delta=st.integers(-2**63, 2**63 - 1), offset_delta=st.integers(0, 2**31 - 1),
       key=st.one_of(st.none(), st.binary(max_size=300)),
       value=st.one_of(st.none(), st.binary(max_size=300)),
       headers=st.one_of(st.none(), st.lists(st.tuples(header_key, header_value), max_size=3)))
def test_record_size_matches_reference(ts_delta, offset_delta, key, value, headers):
    expected = len(ref.encode_record(offset_delta, ts_delta, key, value, headers))
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    assert record_size(ts_delta, offset_delta, klen, vlen, headers) == expected
    assert headers_size(headers) == len(ref.encode_headers(headers))


@settings(max_examples=100, deadline=None)
@given(records=records_st)
def test_size_in_bytes_tracks_appends(records):
    b = BatchBuilder(10**7)
    total = 61
    base = records[0][0]
    for i, (ts, k, v, h) in enumerate(records):
        b.append(ts, k, v, h)
        total += len(ref.encode_record(i, ts - base, k, v, h))
        assert b.size_in_bytes == b.estimated_size == total


# ---- append_many --------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(records=records_st, single_ts=st.booleans(), null_keys=st.booleans())
def test_append_many_equals_append(records, single_ts, null_keys):
    recs = [(records[0][0] if single_ts else ts, None if null_keys else k, v, None)
            for ts, k, v, _ in records]
    b1 = BatchBuilder(10**7)
    ts_arg = recs[0][0] if single_ts else [r[0] for r in recs]
    keys_arg = None if null_keys else [r[1] for r in recs]
    assert b1.append_many(ts_arg, keys_arg, [r[2] for r in recs]) == len(recs)
    b1.close()
    b1.stamp(-1, -1, -1)
    assert bytes(b1.buffer()) == ref.encode_batch(recs)


def test_append_many_stops_when_full_and_resumes():
    values = [b"v" * 100] * 50
    per = record_size(0, 1, -1, 100, None)
    b = BatchBuilder(61 + 10 * per)
    n = b.append_many(TS0, None, values)
    assert 9 <= n <= 10 and b.record_count == n
    b2 = BatchBuilder(10**6)
    assert b2.append_many(TS0, None, values, start=n) == 50 - n
    b2.close()
    b2.stamp(-1, -1, -1)
    assert ref.decode_batch(b2.buffer()).record_count == 50 - n


def test_append_many_mixed_inputs_and_tuples():
    vals = (b"a", bytearray(b"bb"), memoryview(b"ccc"), None, b"")
    keys = [None, b"k", bytearray(b"k2"), memoryview(b"k3"), b""]
    b = BatchBuilder(1 << 16)
    assert b.append_many([TS0, TS0 + 1, TS0 - 1, TS0, TS0], keys, vals) == 5
    b.close()
    b.stamp(-1, -1, -1)
    got = [(r.key, r.value) for r in ref.decode_batch(b.buffer()).records]
    assert got == [(None, b"a"), (b"k", b"bb"), (b"k2", b"ccc"), (b"k3", None), (b"", b"")]


def test_append_many_errors():
    b = BatchBuilder(1 << 16)
    with pytest.raises(ValueError, match="keys has 1 items"):
        b.append_many(TS0, [b"k"], [b"a", b"b"])
    with pytest.raises(ValueError, match="timestamps has 3 items"):
        b.append_many([1, 2, 3], None, [b"a", b"b"])
    with pytest.raises(TypeError, match=r"value \(item 1\).*float"):
        b.append_many(TS0, None, [b"a", 1.5])
    assert b.record_count == 1                       # item 0 went in before the bad one
    with pytest.raises(TypeError, match=r"key \(item 0\).*int"):
        b.append_many(TS0, [5], [b"a"])
    with pytest.raises(IndexError):
        b.append_many(TS0, None, [b"a"], start=5)


# ---- input validation ----------------------------------------------------------------------

def test_accepts_bytes_like():
    b = BatchBuilder(1 << 16)
    b.append(TS0, bytearray(b"k1"), memoryview(b"xxv1")[2:], [(b"bk", bytearray(b"hv")),
                                                             ("sk", memoryview(b"mv"))])
    b.close()
    b.stamp(-1, -1, -1)
    r = ref.decode_batch(b.buffer()).records[0]
    assert (r.key, r.value, r.headers) == (b"k1", b"v1", [("bk", b"hv"), ("sk", b"mv")])


@pytest.mark.parametrize("key,value,pattern", [
    (1, b"v", r"key.*int"),
    (1.5, b"v", r"key.*float"),
    (b"k", object(), r"value.*object"),
    (b"k", 3.0, r"value.*float"),
    (b"k", [1], r"value.*list"),
])
def test_type_errors_name_the_field(key, value, pattern):
    b = BatchBuilder(1024)
    with pytest.raises(TypeError, match=pattern):
        b.append(TS0, key, value)
    assert b.record_count == 0 and b.size_in_bytes == 61


@pytest.mark.parametrize("headers,pattern", [
    ({"a"}, r"headers must be a list or tuple of \(key, value\) pairs or a dict.*set"),
    ([("a", b"b"), "oops"], r"header 1 must be a \(key, value\) pair.*str"),
    ([("a", b"b"), ("c",)], r"header 1 must be a \(key, value\) pair"),
    ([(1, b"b")], r"header 0: key must be str or bytes.*int"),
    ([("a", b"b"), ("b", b"c"), ("k", 5)], r"header 2: value must be .*int"),
    ([("k", 1.5)], r"header 0: value must be bytes, bytearray, memoryview, str or None.*float"),
    ({"k": b"v", "k2": [b"x"]}, r"header 1: value must be .*list"),
])
def test_header_errors_name_the_index(headers, pattern):
    b = BatchBuilder(1024)
    with pytest.raises(TypeError, match=pattern):
        b.append(TS0, None, b"v", headers)
    assert b.record_count == 0


def test_non_contiguous_value_is_type_error():
    b = BatchBuilder(1024)
    with pytest.raises(TypeError, match="value"):
        b.append(TS0, None, memoryview(b"abcdef")[::2])


def test_constructor_validation():
    with pytest.raises(ValueError, match="batch_size"):
        BatchBuilder(0)
    with pytest.raises(ValueError, match="codec"):
        BatchBuilder(1024, 9)
    with pytest.raises(ValueError, match="gzip"):
        BatchBuilder(1024, 1, compression_level=11)
    b = BatchBuilder(1024, "zstd", compression_level=5)
    assert (b.compression_type, b.compression_level, b.batch_size) == (4, 5, 1024)


# ---- lifecycle ---------------------------------------------------------------------------------

def test_lifecycle_errors_and_properties():
    b = BatchBuilder(1 << 16, 1)
    assert not b.is_closed and b.record_count == 0 and b.last_offset_delta == -1
    with pytest.raises(RuntimeError, match="close"):
        b.stamp(-1, -1, -1)
    with pytest.raises(RuntimeError, match="close"):
        b.buffer()
    with pytest.raises(BufferError):
        memoryview(b)
    b.append(TS0, None, b"a")
    b.append(TS0 - 50, None, b"b")
    b.append(TS0 + 70, None, b"c")
    assert (b.base_timestamp, b.max_timestamp, b.last_offset_delta) == (TS0, TS0 + 70, 2)
    raw = b.size_in_bytes
    b.close()
    b.close()                                        # idempotent
    assert b.is_closed
    assert b.size_in_bytes != raw                    # now the exact, compressed size
    with pytest.raises(RuntimeError, match="closed"):
        b.append(TS0, None, b"d")
    with pytest.raises(RuntimeError, match="stamp"):
        b.buffer()
    b.stamp(-1, -1, -1)
    assert b.is_stamped
    view = b.buffer()
    assert view.readonly and len(view) == b.size_in_bytes
    with pytest.raises(TypeError):
        view[0] = 1
    d = ref.decode_batch(view)
    assert [r.timestamp for r in d.records] == [TS0, TS0 - 50, TS0 + 70]


def test_buffer_keeps_builder_alive():
    b = build([(TS0, b"k", b"v" * 1000, None)])
    view = b.buffer()
    expected = bytes(view)
    del b
    gc.collect()
    _ = [os.urandom(1000) for _ in range(1000)]      # churn the allocator
    assert bytes(view) == expected
    assert ref.decode_batch(view).records[0].value == b"v" * 1000


# ---- independent decoders -------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [0, 1, 3])   # the codecs kafka-python can read here
def test_kafka_python_decodes_our_batches(codec):
    from kafka.record.default_records import DefaultRecordBatch
    recs = [(TS0 + i * 7 - 100, None if i % 3 == 0 else b"key%d" % i,
             None if i % 5 == 0 else os.urandom(i % 200),
             [("trace", b"x" * i), ("n", None)] if i % 4 == 0 else None) for i in range(300)]
    b = build(recs, codec, pid=77, epoch=4, seq=1234)
    kb = DefaultRecordBatch(bytes(b.buffer()))
    assert kb.validate_crc()
    assert kb.magic == 2 and kb.compression_type == codec
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence) == (77, 4, 1234)
    assert kb.last_offset_delta == 299
    assert kb.first_timestamp == TS0 - 100 and kb.max_timestamp == TS0 + 299 * 7 - 100
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kb]
    assert got == [(i, ts, k, v, norm_headers(h)) for i, (ts, k, v, h) in enumerate(recs)]


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_decodes_our_batches(codec):
    from aiokafka.record.default_records import DefaultRecordBatch
    recs = [(TS0 + i, b"k%d" % i, b"value-%d" % i * 20, [("h", b"%d" % i)]) for i in range(500)]
    b = build(recs, codec)
    ab = DefaultRecordBatch(bytes(b.buffer()))
    assert ab.validate_crc()
    assert ab.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in ab]
    assert got == [(i, ts, k, v, norm_headers(h)) for i, (ts, k, v, h) in enumerate(recs)]


def test_reference_decoder_rejects_bad_crc():
    b = build([(TS0, b"k", b"v", None)])
    buf = bytearray(b.buffer())
    buf[-1] ^= 0xFF
    with pytest.raises(ValueError, match="CRC"):
        ref.decode_batch(buf)
