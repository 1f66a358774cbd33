"""EncodedHeaders: a headers section encoded once and copied into every record that uses it."""

import pytest

from fastkafka import EncodedHeaders
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer.sendpath import validate_headers
from fastkafka._wire.records import BatchBuilder, headers_size
from fastkafka.errors import InvalidRecordError

import reference_records as ref

TS = 1_700_000_000_000
HEADERS = [("spark.partition", b"3"), (b"raw", None), ("\u00e9t\u00e9", bytearray(b"x" * 300))]


def batch_bytes(headers_per_record):
    b = BatchBuilder(1 << 20)
    for i, h in enumerate(headers_per_record):
        assert b.append(TS + i, b"k%d" % i, b"v%d" % i, h)
    b.close()
    b.stamp(-1, -1, -1)
    return bytes(b.buffer())


def test_encoded_headers_give_the_same_bytes_as_the_list():
    enc = EncodedHeaders(HEADERS)
    assert len(enc) == headers_size(HEADERS) == validate_headers(enc)
    assert batch_bytes([enc] * 5) == batch_bytes([HEADERS] * 5)
    d = ref.decode_batch(batch_bytes([enc, None, enc]))
    assert [r.headers for r in d.records][1] == []
    assert [(k, v) for k, v in d.records[0].headers] == [
        ("spark.partition", b"3"), ("raw", None), ("\u00e9t\u00e9", b"x" * 300)]


def test_empty_and_rewrapped():
    assert len(EncodedHeaders([])) == 1 and EncodedHeaders(()).data == b"\x00"
    enc = EncodedHeaders(HEADERS)
    assert EncodedHeaders(enc).data is enc.data
    assert "bytes" in repr(enc)


@pytest.mark.parametrize("bad, pattern", [
    ("k=v", "list or tuple"), ([("k",)], "header 0"), ([("k", 1)], "header 0: value"),
    ([(1, b"v")], "header 0: key")])
def test_bad_headers_are_refused_when_encoded(bad, pattern):
    with pytest.raises(TypeError, match=pattern):
        EncodedHeaders(bad)


def test_send_batch_headers_are_encoded_once_and_reach_every_record():
    pool = BufferPool(1 << 22, 1 << 16)
    acc = RecordAccumulator(1 << 16, 0, None, 0, 100, 120_000, pool, False)
    fut = BatchFuture(3)
    assert acc.append_batch("t", 0, [b"a", b"b", b"c"], None, HEADERS, TS, fut, 0, 0) == 3
    [batch] = acc.abort_undrained()
    d = ref.decode_batch(batch_bytes_of(batch))
    assert [[(k, v) for k, v in r.headers] for r in d.records] == [
        [("spark.partition", b"3"), ("raw", None), ("\u00e9t\u00e9", b"x" * 300)]] * 3
    batch.complete(-1, -1, RuntimeError("test over"))
    acc.deallocate(batch)
    assert fut.done()
    with pytest.raises(InvalidRecordError, match="headers: header 0"):
        acc.append_batch("t", 0, [b"a"], None, [("k", 1)], TS, BatchFuture(1), 0, 0)
    acc.close()


def batch_bytes_of(batch):
    batch.builder.close()
    batch.builder.stamp(-1, -1, -1)
    return bytes(batch.builder.buffer())
