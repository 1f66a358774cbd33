"""Zigzag varints: edge values, sizes, errors, agreement with the reference."""
import pytest
from hypothesis import given, strategies as st

from fastkafka._wire.varint import (
    decode_varint, decode_varlong, encode_varint, encode_varlong,
    size_of_varint, size_of_varlong,
)
from reference_records import read_varint, write_varint

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def ref_encode(n):
    out = bytearray()
    write_varint(out, n)
    return bytes(out)


@pytest.mark.parametrize("n,encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"),
    (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"), (-65, b"\x81\x01"),
    (300, b"\xd8\x04"),
    (I32_MAX, b"\xfe\xff\xff\xff\x0f"), (I32_MIN, b"\xff\xff\xff\xff\x0f"),
])
def test_varint_known(n, encoded):
    assert encode_varint(n) == encoded
    assert decode_varint(encoded, 0) == (n, len(encoded))
    assert decode_varint(b"junk" + encoded + b"tail", 4) == (n, 4 + len(encoded))
    assert size_of_varint(n) == len(encoded)


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, -65, 127, 128, -128, 8191, 8192,
                               I32_MIN, I32_MAX, I64_MIN, I64_MAX, 2**62, -(2**62) - 1])
def test_varlong_edges(n):
    enc = encode_varlong(n)
    assert enc == ref_encode(n)
    assert decode_varlong(enc) == (n, len(enc))
    assert size_of_varlong(n) == len(enc)


def test_127_128_boundaries():
    # zigzag(63)=126, zigzag(64)=128: the one-byte limit sits at 63 / -64
    assert len(encode_varint(63)) == 1 and len(encode_varint(64)) == 2
    assert len(encode_varint(-64)) == 1 and len(encode_varint(-65)) == 2
    # unsigned 127 vs 128 as raw encodings
    assert decode_varint(b"\x7f") == (-64, 1)
    assert decode_varint(b"\x80\x01") == (64, 2)
    assert len(encode_varlong(I64_MAX)) == 10 and len(encode_varlong(I64_MIN)) == 10


def test_range_errors():
    with pytest.raises(ValueError, match="int32"):
        encode_varint(I32_MAX + 1)
    with pytest.raises(ValueError, match="int32"):
        encode_varint(I32_MIN - 1)
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(I64_MAX + 1)
    with pytest.raises(ValueError, match="int32"):
        size_of_varint(2**40)
    with pytest.raises(TypeError, match="int"):
        encode_varint(1.5)


@pytest.mark.parametrize("decode", [decode_varint, decode_varlong])
def test_truncated(decode):
    with pytest.raises(ValueError, match="truncated"):
        decode(b"")
    with pytest.raises(ValueError, match="truncated"):
        decode(b"\x80")
    with pytest.raises(ValueError, match="truncated"):
        decode(b"\xd8\x04", 2)
    with pytest.raises(ValueError, match="truncated"):
        decode(encode_varint(I32_MAX)[:-1])


def test_too_long():
    with pytest.raises(ValueError, match="too long"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(ValueError, match="too long"):
        decode_varlong(b"\x80" * 10 + b"\x01")
    # five bytes but more than 32 bits
    with pytest.raises(ValueError, match="32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x1f")
    # ten bytes but more than 64 bits
    with pytest.raises(ValueError, match="64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x03")


def test_position_out_of_range():
    with pytest.raises(ValueError, match="position"):
        decode_varint(b"\x00", 5)
    with pytest.raises(ValueError, match="position"):
        decode_varint(b"\x00", -1)


def test_accepts_buffers():
    assert decode_varint(bytearray(b"\xd8\x04")) == (300, 2)
    assert decode_varlong(memoryview(b"\x00\xd8\x04")[1:]) == (300, 2)


@given(st.integers(I32_MIN, I32_MAX))
def test_varint_roundtrip(n):
    enc = encode_varint(n)
    assert enc == ref_encode(n)
    assert decode_varint(enc) == (n, len(enc))
    assert read_varint(enc, 0) == (n, len(enc))
    assert size_of_varint(n) == len(enc)


@given(st.integers(I64_MIN, I64_MAX))
def test_varlong_roundtrip(n):
    enc = encode_varlong(n)
    assert enc == ref_encode(n)
    assert decode_varlong(enc) == (n, len(enc))
    assert size_of_varlong(n) == len(enc)
