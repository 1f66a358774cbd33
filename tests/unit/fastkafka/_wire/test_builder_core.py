"""BatchBuilder.close() (codec 0) and stamp() go through the C functions the GIL-free turn calls
(builder_close_plain_c, builder_stamp_c on the builder's BuilderCore): the batches they make are
the reference's bytes, with a CRC-32C checked by an independent implementation, on every path
(small, large enough to drop the GIL, a payload apart, re-stamped, empty)."""
from __future__ import annotations

import struct

import crc32c as crc32c_pkg
import pytest

from fastkafka._wire.records import BatchBuilder

import reference_records as ref

TS0 = 1_700_000_000_000


def records(n, size=20):
    return [(TS0 + (i * 7) % 11, b"k%d" % i if i % 3 else None, bytes([i % 251]) * size,
             [("h", b"%d" % i)] if i % 4 == 0 else None) for i in range(n)]


def crc_ok(data):
    (crc,) = struct.unpack_from(">I", data, 17)
    return crc == crc32c_pkg.crc32c(bytes(data[21:]))


@pytest.mark.parametrize("n,size", [(1, 0), (5, 20), (300, 4000)])   # the last: over 1 MiB
@pytest.mark.parametrize("pid,epoch,seq,txn", [(-1, -1, -1, False), (4242, 7, 1000, True),
                                                (2**63 - 1, 32767, 2**31 - 1, False)])
def test_plain_close_and_stamp_match_the_reference(n, size, pid, epoch, seq, txn):
    recs = records(n, size)
    b = BatchBuilder(1 << 24)
    for ts, k, v, h in recs:
        assert b.append(ts, k, v, h)
    size_open = b.estimated_size
    b.close()
    assert b.is_closed and not b.is_stamped and b.size_in_bytes == size_open
    b.close()                                   # closed already: nothing changes
    assert b.size_in_bytes == size_open
    b.stamp(pid, epoch, seq, txn)
    data = bytes(b.buffer())
    assert data == ref.encode_batch(recs, producer_id=pid, producer_epoch=epoch,
                                    base_sequence=seq, transactional=txn)
    assert crc_ok(data) and b.is_stamped


def test_restamp_rewrites_the_header_and_the_crc():
    recs = records(10)
    b = BatchBuilder(1 << 16)
    for ts, k, v, h in recs:
        b.append(ts, k, v, h)
    b.close()
    b.stamp(1, 0, 0)
    first = bytes(b.buffer())
    b.stamp(1, 1, 50, True)                     # an epoch bump
    again = bytes(b.buffer())
    assert again != first and crc_ok(again) and crc_ok(first)
    assert again == ref.encode_batch(recs, producer_id=1, producer_epoch=1, base_sequence=50,
                                     transactional=True)


def test_empty_batch_with_and_without_a_base_timestamp():
    for kw, base in (({}, -1), ({"base_timestamp": TS0}, TS0)):
        b = BatchBuilder(1024, **kw)
        b.close()
        b.stamp(-1, -1, -1)
        data = bytes(b.buffer())
        assert len(data) == 61 and crc_ok(data)
        assert struct.unpack_from(">iqq", data, 23) == (-1, base, base)


@pytest.fixture
def python_codecs():
    """The Python codecs of fastkafka._wire.compression for the builders made in the test (their C
    libraries turned off meanwhile): the payload kept apart."""
    from fastkafka._wire import ccodecs
    names = ("gzip", "snappy", "lz4", "zstd")
    was = {c: ccodecs.in_c(c) for c in names}
    for c in names:
        ccodecs.use_c(c, False)
    yield
    for c, on in was.items():
        ccodecs.use_c(c, on)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_payload_apart_is_what_the_crc_covers(codec, python_codecs):
    recs = records(200, 100)
    b = BatchBuilder(1 << 20, codec)
    for ts, k, v, h in recs:
        b.append(ts, k, v, h)
    b.close()
    b.stamp(9, 1, 5)
    pieces = b.buffers()
    assert len(pieces) == 2
    data = b"".join(bytes(p) for p in pieces)
    assert crc_ok(data) and len(data) == b.size_in_bytes
    assert ref.decode_batch(data).record_count == len(recs)
    # the pieces split from it close and stamp on their own
    for p in b.split(2):
        p.close()
        p.stamp(9, 1, 5)
        assert crc_ok(b"".join(bytes(x) for x in p.buffers()))


def test_stamp_before_close_is_refused_and_writes_nothing():
    b = BatchBuilder(1024)
    b.append(TS0, None, b"v")
    with pytest.raises(RuntimeError, match=r"stamp\(\) needs close\(\) first"):
        b.stamp(-1, -1, -1)
    assert not b.is_stamped and not b.is_closed
    with pytest.raises(BufferError):
        memoryview(b)
