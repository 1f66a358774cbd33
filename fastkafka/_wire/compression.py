"""Kafka record-batch compression codecs.

Codec codes are the values of the batch attributes' low three bits:

====  ======  =================================================================
code  name    format
====  ======  =================================================================
0     none    identity
1     gzip    deflate with a gzip wrapper (zlib, wbits=31)
2     snappy  xerial framing: magic + version + compat, then 32 KiB blocks each
              as [int32 big-endian length][raw snappy block]
3     lz4     LZ4 *frame* format, independent blocks
4     zstd    zstd frame (needs Produce v7+)
====  ======  =================================================================

All libraries used (zlib, cramjam, lz4) release the GIL while they work.

>>> data = b"kafka " * 1000
>>> decompress(CODECS["snappy"], compress(CODECS["snappy"], data)) == data
True
>>> validate_level("zstd", 3)
3
"""
from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame

__all__ = [
    "CODECS",
    "CODEC_NAMES",
    "DEFAULT_LEVELS",
    "compress",
    "decompress",
    "validate_level",
    "codec_code",
]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODEC_NAMES = {v: k for k, v in CODECS.items()}

#: Level used when ``level`` is None (None: the codec takes no level).
DEFAULT_LEVELS = {0: None, 1: 6, 2: None, 3: 0, 4: 3}

_ZSTD_MIN_LEVEL = -(1 << 17)  # zstd's "fast" negative levels go down to -131072

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")


def codec_code(codec) -> int:
    """Return the numeric code for a codec given by code (0-4) or name ("gzip", ...)."""
    if isinstance(codec, str):
        try:
            return CODECS[codec.lower()]
        except KeyError:
            raise ValueError(
                f"unknown compression codec {codec!r}; expected one of {sorted(CODECS)}"
            ) from None
    if isinstance(codec, int) and not isinstance(codec, bool) and codec in CODEC_NAMES:
        return codec
    raise ValueError(f"unknown compression codec {codec!r}; expected 0-4 or one of {sorted(CODECS)}")


def validate_level(codec, level):
    """Check ``level`` for ``codec``; return the level to use (the codec default for None).

    gzip 1-9, lz4 0-16, zstd 1-22 or negative (fast modes); none and snappy take no level.
    Raises ValueError naming the codec and the level.

    >>> validate_level("gzip", None)
    6
    >>> validate_level(2, None) is None
    True
    """
    code = codec_code(codec)
    name = CODEC_NAMES[code]
    if level is None:
        return DEFAULT_LEVELS[code]
    if isinstance(level, bool) or not isinstance(level, int):
        raise ValueError(f"compression level for {name} must be an int, got {level!r}")
    if code in (0, 2):
        raise ValueError(f"codec {name} takes no compression level (got {level!r})")
    if code == 1:
        ok = 1 <= level <= 9
        rng = "1-9"
    elif code == 3:
        ok = 0 <= level <= 16
        rng = "0-16"
    else:
        ok = 1 <= level <= 22 or _ZSTD_MIN_LEVEL <= level < 0
        rng = f"1-22 or {_ZSTD_MIN_LEVEL}..-1"
    if not ok:
        raise ValueError(f"invalid compression level {level!r} for {name} (valid: {rng})")
    return level


def _snappy_xerial(data) -> bytes:
    view = memoryview(data).cast("B")
    n = len(view)
    out = [_XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, n, XERIAL_BLOCK):
        block = compress_raw(view[start:start + XERIAL_BLOCK])
        out.append(_I32.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decode(data) -> bytes:
    view = memoryview(data).cast("B")
    if len(view) < 16 or bytes(view[:8]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    pos, n = 16, len(view)
    out = []
    decompress_raw = cramjam.snappy.decompress_raw
    while pos < n:
        if pos + 4 > n:
            raise ValueError("snappy (xerial): truncated block length")
        (size,) = _I32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > n:
            raise ValueError(f"snappy (xerial): block of {size} bytes overruns the input")
        out.append(bytes(decompress_raw(view[pos:pos + size])))
        pos += size
    return b"".join(out)


def compress_buffer(codec, data, level=None):
    """Like :func:`compress` but may return any buffer-protocol object (saves a copy)."""
    code = codec_code(codec)
    level = validate_level(code, level)
    if code == 0:
        return data
    if code == 1:
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if code == 2:
        return _snappy_xerial(data)
    if code == 3:
        return lz4.frame.compress(
            data, compression_level=level, block_linked=False, store_size=False
        )
    return cramjam.zstd.compress(data, level=level)


def compress(codec, data, level=None) -> bytes:
    """compress(codec, data, level=None) -> bytes

    Compress ``data`` (any buffer) for a record batch with ``codec`` (code or name).
    ``level`` None means the codec default (see DEFAULT_LEVELS).

    >>> compress(0, b"abc")
    b'abc'
    """
    out = compress_buffer(codec, data, level)
    return out if type(out) is bytes else bytes(out)


def decompress(codec, data) -> bytes:
    """decompress(codec, data) -> bytes

    Inverse of :func:`compress`. Snappy also accepts a plain raw snappy block;
    gzip accepts concatenated members.
    """
    code = codec_code(codec)
    if code == 0:
        return bytes(data)
    if code == 1:
        out = []
        rest = bytes(data)
        while rest:
            d = zlib.decompressobj(31)
            out.append(d.decompress(rest))
            out.append(d.flush())
            if not d.eof:
                raise ValueError("gzip: truncated stream")
            rest = d.unused_data
        return b"".join(out)
    if code == 2:
        return _snappy_decode(data)
    if code == 3:
        return lz4.frame.decompress(data)
    return bytes(cramjam.zstd.decompress(data))
