"""Compression codecs: round trips, framing details, level validation."""
import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
from hypothesis import given, settings, strategies as st

from fastkafka._wire.compression import (
    CODECS, compress, decompress, validate_level, XERIAL_MAGIC,
)

SAMPLES = [b"", b"a", b"kafka " * 10000, os.urandom(5000), bytes(200_000)]


def test_codec_table():
    assert CODECS == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", sorted(CODECS.values()))
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"len{len(d)}")
def test_roundtrip(codec, data):
    out = compress(codec, data)
    assert isinstance(out, bytes)
    assert decompress(codec, out) == data
    assert decompress(codec, compress(codec, memoryview(data))) == data
    assert decompress(codec, compress(codec, bytearray(data))) == data


@pytest.mark.parametrize("name", sorted(CODECS))
def test_names_accepted(name):
    data = b"xyz" * 100
    assert decompress(name, compress(name, data)) == data


def test_none_is_identity():
    assert compress(0, b"abc") == b"abc"


def test_gzip_is_a_gzip_stream():
    data = b"hello gzip " * 100
    out = compress("gzip", data, level=9)
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == data
    # concatenated members are accepted like Java's GZIPInputStream does
    assert decompress(1, out + gzip.compress(b"!")) == data + b"!"


def test_snappy_xerial_framing_of_large_input():
    data = bytes(range(256)) * 400 + os.urandom(20000)     # 122,400 bytes: 3 blocks + tail
    out = compress("snappy", data)
    assert out[:8] == XERIAL_MAGIC == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", out[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert pos == len(out)
    assert [len(b) for b in blocks] == [32768, 32768, 32768, len(data) - 3 * 32768]
    assert b"".join(blocks) == data
    assert decompress("snappy", out) == data


def test_snappy_accepts_plain_raw():
    data = b"raw snappy block " * 50
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(2, raw) == data


def test_snappy_truncated_xerial_raises():
    out = compress("snappy", os.urandom(40000))
    with pytest.raises(ValueError, match="snappy"):
        decompress(2, out[:-10])


def test_lz4_is_frame_with_independent_blocks():
    data = os.urandom(1000) * 300
    out = compress("lz4", data)
    assert out[:4] == b"\x04\x22\x4d\x18"              # LZ4 frame magic
    flg = out[4]
    assert flg & 0x20, "block independence flag must be set"
    assert not flg & 0x08, "content size is not stored"
    assert lz4.frame.decompress(out) == data


def test_zstd_is_a_zstd_frame():
    data = b"zstd " * 1000
    out = compress("zstd", data, level=-5)
    assert out[:4] == b"\x28\xb5\x2f\xfd"
    assert bytes(cramjam.zstd.decompress(out)) == data


@pytest.mark.parametrize("codec,level,expected", [
    ("none", None, None), ("gzip", None, 6), ("snappy", None, None), ("lz4", None, 0),
    ("zstd", None, 3), ("gzip", 1, 1), ("gzip", 9, 9), ("lz4", 16, 16), ("zstd", 22, 22),
    ("zstd", -7, -7), (1, 5, 5),
])
def test_validate_level_ok(codec, level, expected):
    assert validate_level(codec, level) == expected


@pytest.mark.parametrize("codec,level", [
    ("gzip", 0), ("gzip", 10), ("lz4", -1), ("lz4", 17), ("zstd", 0), ("zstd", 23),
    ("snappy", 1), ("none", 1), ("gzip", "5"), ("zstd", True),
])
def test_validate_level_rejects(codec, level):
    with pytest.raises(ValueError) as exc:
        validate_level(codec, level)
    msg = str(exc.value)
    assert codec in msg and repr(level) in msg


def test_compress_validates_level():
    with pytest.raises(ValueError, match="gzip"):
        compress("gzip", b"x", level=12)


@pytest.mark.parametrize("codec", [5, -1, "brotli", None, True])
def test_unknown_codec(codec):
    with pytest.raises(ValueError, match="codec"):
        compress(codec, b"x")


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=70000), codec=st.sampled_from([0, 1, 2, 3, 4]))
def test_roundtrip_property(data, codec):
    assert decompress(codec, compress(codec, data)) == data
