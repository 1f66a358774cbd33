"""Compression codecs: round trips, framing details, level validation."""
import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
from hypothesis import given, settings, strategies as st

from fastkafka._wire import compression
from fastkafka._wire.compression import (
    CODEC_SPECS, CODECS, compress, decompress, validate_level, XERIAL_MAGIC,
)
from fastkafka._wire.records import BatchBuilder
from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError
import reference_records as ref

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
    ("zstd", -7, -7), (1, 5, 5), ("zstd", 0, 0), ("zstd", -131072, -131072), ("lz4", 0, 0),
])
def test_validate_level_ok(codec, level, expected):
    assert validate_level(codec, level) == expected


@pytest.mark.parametrize("codec,level", [
    ("gzip", 0), ("gzip", 10), ("lz4", -1), ("lz4", 17), ("zstd", -131073), ("zstd", 23),
    ("snappy", 1), ("none", 1), ("gzip", "5"), ("zstd", True),
])
def test_validate_level_rejects(codec, level):
    with pytest.raises(ConfigError) as exc:     # also a ValueError
        validate_level(codec, level)
    msg = str(exc.value)
    assert codec in msg and repr(level) in msg and "compression_level" in msg


# ---- one table of codecs and levels, shared by the configuration and the compressor ------------
LEVELLED = [s for s in CODEC_SPECS if s.takes_level]
LEVEL_DATA = b"kafka record batch " * 3000 + os.urandom(3000)


def _levels(spec):
    return sorted({spec.min_level, spec.max_level, spec.default_level})


@pytest.mark.parametrize("spec,level", [(s, lv) for s in LEVELLED for lv in _levels(s)],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_every_codec_level_at_min_max_default_compresses_and_round_trips(spec, level):
    out = compress(spec.name, LEVEL_DATA, level=level)
    assert decompress(spec.code, out) == LEVEL_DATA
    # A level the configuration accepts goes all the way through a producer's batch builder.
    cfg = ProducerConfig(bootstrap_servers="h:1", compression_type=spec.name, compression_level=level)
    b = BatchBuilder(1 << 20, cfg.compression_code, cfg.compression_level)
    records = [(1_700_000_000_000 + i, b"k%d" % i, LEVEL_DATA[i * 100:(i + 1) * 100 + 5000], None)
               for i in range(20)]
    for ts, k, v, h in records:
        assert b.append(ts, k, v, h)
    b.close()
    b.stamp(-1, -1, -1)
    decoded = ref.decode_batch(b.buffer())
    assert decoded.compression_type == spec.code
    assert [(r.key, r.value) for r in decoded.records] == [(k, v) for _, k, v, _ in records]


@pytest.mark.parametrize("spec", CODEC_SPECS, ids=lambda s: s.name)
def test_config_and_compressor_agree_on_every_level(spec):
    """Anything the configuration accepts, the compressor accepts; the rest is a ConfigError from
    both, naming the setting and the valid range."""
    if spec.takes_level:
        candidates = range(spec.min_level - 3, spec.max_level + 4) if spec.min_level > -100 else \
            [*range(spec.min_level - 2, spec.min_level + 3), *range(-3, spec.max_level + 4)]
    else:
        candidates = [-1, 0, 1, 3, 9]
    for level in candidates:
        kw = dict(bootstrap_servers="h:1", compression_type=spec.name, compression_level=level)
        valid = spec.takes_level and spec.min_level <= level <= spec.max_level
        if valid:
            assert ProducerConfig(**kw).compression_level == level
            assert decompress(spec.code, compress(spec.code, b"abc" * 50, level)) == b"abc" * 50
            continue
        with pytest.raises(ConfigError) as from_config:
            ProducerConfig(**kw)
        with pytest.raises(ConfigError) as from_compressor:
            compress(spec.code, b"abc", level)
        for exc in (from_config.value, from_compressor.value):
            msg = str(exc)
            assert "compression_level" in msg and repr(spec.name) in msg
            if spec.takes_level:
                assert f"valid {spec.min_level}..{spec.max_level}" in msg
            else:
                assert "not supported" in msg


def test_zstd_level_zero_is_accepted_everywhere():
    # zstd's level 0 means its own default: the configuration and the compressor both take it.
    cfg = ProducerConfig(bootstrap_servers="h:1", compression_type="zstd", compression_level=0)
    out = compress(cfg.compression_code, b"z" * 1000, cfg.compression_level)
    assert decompress("zstd", out) == b"z" * 1000


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


# ---- lz4 without the lz4 package (CPython 3.15, where lz4 publishes no wheel: not a dependency there)
def test_lz4_without_package_or_library_is_refused_at_construction(monkeypatch):
    """No liblz4 (C path) and no lz4 package: a Producer asked for lz4 fails at once with a
    ConfigError naming both ways to get it; other codecs are unaffected."""
    from fastkafka import Producer
    from fastkafka._wire import ccodecs
    from fastkafka.errors import ConfigError

    monkeypatch.setattr(compression, "_lz4_frame", None)
    monkeypatch.setattr(ccodecs, "in_c", lambda codec: False)
    with pytest.raises(ConfigError) as e:
        Producer(bootstrap_servers="127.0.0.1:9", compression_type="lz4")
    assert "liblz4" in str(e.value) and "pip install lz4" in str(e.value), str(e.value)
    with pytest.raises(ConfigError):
        compression.compress("lz4", b"x" * 100)
    assert compression.decompress(compression.CODECS["zstd"], compression.compress("zstd", b"abc")) == b"abc"


def test_lz4_without_package_uses_the_c_library(monkeypatch):
    """No lz4 package but liblz4 loaded: lz4 is accepted (batches are compressed in C)."""
    from fastkafka._wire import ccodecs

    if not ccodecs.in_c("lz4"):
        pytest.fail("liblz4 is not loaded on this machine (scripts/setup.sh installs liblz4-1)")
    monkeypatch.setattr(compression, "_lz4_frame", None)
    compression.check_available("lz4")          # no error
