"""With the Python codecs (a codec whose C library is missing), a compressed batch goes out as two pieces: the 61-byte header in the builder's buffer and the
compressor's output as it came (never copied back). The CRC covers both; the Produce encoder sends
both by reference; splitting and re-stamping read the payload piece; its memory is the pool's."""
from __future__ import annotations

import struct

import crc32c as crc32c_pkg
import pytest

import fastkafka._wire.records as records_mod
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.bufferpool import BufferPool
from fastkafka.protocol.produce_codec import ProduceCodec
from fastkafka._wire.compression import decompress
from fastkafka._wire.records import BatchBuilder, BatchView

import reference_records as ref

HEADER = 61
TS0 = 1_700_000_000_000
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(autouse=True)
def python_codecs():
    """The Python codecs of fastkafka._wire.compression for the builders made in the test (their C
    libraries turned off meanwhile): a payload kept apart is what the Python codecs return (the C codecs write after the header, tests/unit/fastkafka/_wire/test_ccodecs.py)."""
    from fastkafka._wire import ccodecs
    names = ("gzip", "snappy", "lz4", "zstd")
    was = {c: ccodecs.in_c(c) for c in names}
    for c in names:
        ccodecs.use_c(c, False)
    yield
    for c, on in was.items():
        ccodecs.use_c(c, on)


def make_records(n=200):
    return [(TS0 + i * 3, b"key-%d" % i, b"value %d " % (i % 7) * 30, [("h", b"%d" % i)])
            for i in range(n)]


def build(recs, codec, pid=-1, epoch=-1, seq=-1):
    b = BatchBuilder(1 << 20, codec)
    for ts, k, v, h in recs:
        assert b.append(ts, k, v, h)
    b.close()
    b.stamp(pid, epoch, seq)
    return b


def joined(b):
    return b"".join(bytes(p) for p in b.buffers())


def aiokafka_records(data, codec):
    from aiokafka.record.default_records import DefaultRecordBatch
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert batch.compression_type == codec
    return [(r.timestamp, r.key, r.value, r.headers) for r in batch]


def expected(recs):
    return [(ts, k, v, [(hk, hv) for hk, hv in h]) for ts, k, v, h in recs]


@pytest.mark.parametrize("name", CODECS)
def test_two_pieces_decode_with_an_independent_decoder_and_a_valid_crc(name):
    codec = CODECS[name]
    recs = make_records()
    b = build(recs, codec, pid=42, epoch=3, seq=100)
    pieces = b.buffers()
    assert len(pieces) == 2 and len(pieces[0]) == HEADER
    data = joined(b)
    assert len(data) == b.size_in_bytes
    (batch_length,) = struct.unpack_from(">i", data, 8)
    assert batch_length == len(data) - 12                    # the payload's size is counted
    (crc,) = struct.unpack_from(">I", data, 17)
    assert crc == crc32c_pkg.crc32c(data[21:])               # header after the CRC + payload
    assert aiokafka_records(data, codec) == expected(recs)
    assert ref.decode_batch(data).record_count == len(recs)
    # buffer() is the same batch, joined on demand
    view = b.buffer()
    assert isinstance(view, BatchView) and len(view) == len(data) and view.readonly
    assert bytes(view) == data and bytes(view[16:17]) == b"\x02"
    view.release()


@pytest.mark.parametrize("name", CODECS)
def test_the_payload_is_the_compressors_output_not_a_copy_in_the_builder(name, monkeypatch):
    codec = CODECS[name]
    outputs = []
    real = records_mod._compress_buffer

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        outputs.append(out)
        return out

    monkeypatch.setattr(records_mod, "_compress_buffer", spy)
    recs = make_records()
    b = build(recs, codec)
    assert len(outputs) == 1
    header, payload = b.buffers()
    assert payload is outputs[0]                             # the very object, not a copy
    assert len(memoryview(b)) == HEADER                      # the builder's own bytes: the header
    assert len(header) == HEADER and bytes(header) == bytes(memoryview(b))
    raw = ref.encode_batch(recs)[HEADER:]                    # the uncompressed records section
    assert decompress(codec, payload) == raw


@pytest.mark.parametrize("name", CODECS)
def test_the_produce_encoder_sends_both_pieces_by_reference(name):
    codec = CODECS[name]
    recs = make_records()
    b = build(recs, codec)
    header, payload = b.buffers()
    frame = ProduceCodec().encode(9, 1, "c", (None, -1, 30000, [("t", 0, b.buffer())]))
    assert any(p is payload for p in frame)                  # by reference, not joined
    data = joined(b)
    wire = b"".join(bytes(p) for p in frame)
    assert data in wire
    # the builder's header is referenced too: a view of its buffer
    assert any(isinstance(p, memoryview) and p.obj is b for p in frame)


@pytest.mark.parametrize("name", CODECS)
def test_restamp_keeps_the_payload_and_fixes_the_crc(name):
    codec = CODECS[name]
    recs = make_records(50)
    b = build(recs, codec, pid=7, epoch=1, seq=0)
    first = joined(b)
    payload = b.buffers()[1]
    b.stamp(7, 2, 50)                                        # a retry under a new epoch
    second = joined(b)
    assert b.buffers()[1] is payload
    assert first[HEADER:] == second[HEADER:] and first[:HEADER] != second[:HEADER]
    d = ref.decode_batch(second)                             # validates the CRC
    assert (d.producer_epoch, d.base_sequence) == (2, 50)


@pytest.mark.parametrize("name", CODECS)
def test_split_of_a_compressed_batch_gives_the_same_records(name):
    codec = CODECS[name]
    recs = make_records(120)
    b = build(recs, codec)
    assert len(b.buffers()) == 2
    parts = b.split(3)
    got = []
    for p in parts:
        p.close()
        p.stamp(-1, -1, -1)
        assert len(p.buffers()) == 2
        got += aiokafka_records(joined(p), codec)
    assert got == expected(recs)


class _Cluster:
    def leader_for(self, topic, partition):
        return 1


def _pooled(codec, memory, batch_size=64 * 1024):
    pool = BufferPool(memory, batch_size)
    acc = RecordAccumulator(batch_size, codec, None, 0, 100, 120000, pool, False)
    return acc, pool


@pytest.mark.parametrize("name", CODECS)
def test_pooled_payload_is_counted_in_the_pool_and_split_passes_it_on(name):
    codec = CODECS[name]
    acc, pool = _pooled(codec, 1 << 20)
    values = [b"record %d " % (i % 9) * 40 for i in range(100)]
    for i, v in enumerate(values):
        acc.append("t", 0, TS0 + i, None, v, None, None, 0, 0)
    [b] = acc.drain(_Cluster(), [1], 1 << 30, 0)[1]
    b.builder.stamp(-1, -1, -1)
    header, payload = b.builder.buffers()
    del header
    assert pool.held_bytes == b.builder.capacity + len(payload)   # both pieces are the pool's
    del payload
    pieces = acc.split_and_reenqueue(b, 0, 2)
    got = []
    for p in pieces:
        p.builder.close()
        p.builder.stamp(-1, -1, -1)
        got += [r[2] for r in aiokafka_records(joined(p.builder), codec)]
    assert got == values
    assert pool.held_bytes == sum(p.builder.capacity + len(p.builder.buffers()[-1])
                                  for p in pieces)
    for p in pieces:
        p.complete(0, -1, None)
        acc.deallocate(p)
    acc.deallocate(b)
    del b, pieces, p
    assert pool.held_bytes == 0 and pool.available_memory == pool.total
    acc.close()


@pytest.mark.parametrize("name", CODECS)
def test_pool_without_room_for_the_payload_copies_it_after_the_header(name):
    codec = CODECS[name]
    acc, pool = _pooled(codec, 4096, batch_size=4096)        # the batch's buffer is all there is
    values = [b"record %d " % (i % 9) * 20 for i in range(15)]
    for i, v in enumerate(values):
        acc.append("t", 0, TS0 + i, None, v, None, None, 0, 0)
    [b] = acc.drain(_Cluster(), [1], 1 << 30, 0)[1]
    b.builder.stamp(-1, -1, -1)
    assert len(b.builder.buffers()) == 1                     # one piece, as before
    assert b.builder.compression_type == codec
    assert pool.held_bytes == b.builder.capacity == 4096
    assert [r[2] for r in aiokafka_records(bytes(b.builder.buffer()), codec)] == values
    b.complete(0, -1, None)
    acc.deallocate(b)
    del b
    assert pool.held_bytes == 0
    acc.close()
