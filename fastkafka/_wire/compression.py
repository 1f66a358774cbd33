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

Without the GIL. When a producer closes a batch, its records are compressed in C by
:mod:`fastkafka._wire.ccodecs`, which calls the codecs' own C libraries, opened with ``dlopen`` at
import: zlib (gzip), libsnappy (snappy, xerial framing written in C), liblz4 (its frame API) and
libzstd. Those batches need no Python, so a producer with such a codec can send on the I/O
thread's GIL-free turn (``in_c(code)``, the condition the sender uses). What still needs the GIL:
a codec whose library is missing or too old on the machine (or left out with the environment
variable ``FASTKAFKA_C_CODECS``; zstd also with a libzstd older than 1.5.7, slower than cramjam's
own zstd, unless asked: :mod:`~fastkafka._wire.ccodecs`) is compressed by the Python code below (zlib, cramjam, lz4.frame,
which release the GIL only inside the library call), so its batches take the GIL turn, and so do
decompression (only tests and a batch split after a refusal) and a library failure (the batch is
then compressed here). :func:`counters` tells which path compressed what. The formats are the same
either way; the bytes may differ (library versions), never what they decompress to.

>>> data = b"kafka " * 1000
>>> decompress(CODECS["snappy"], compress(CODECS["snappy"], data)) == data
True
>>> validate_level("zstd", 3)
3
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import cramjam

try:                    # a dependency except on CPython 3.15+, where lz4 publishes no wheel yet
    import lz4.frame as _lz4_frame
except ImportError:     # then lz4 batches need the system's liblz4 (ccodecs); see need_python_lz4
    _lz4_frame = None

from fastkafka._wire import ccodecs
from fastkafka.errors import ConfigError

__all__ = [
    "CodecSpec",
    "CODEC_SPECS",
    "CODECS",
    "CODEC_NAMES",
    "DEFAULT_LEVELS",
    "LEVEL_RANGES",
    "compress",
    "decompress",
    "validate_level",
    "codec_code",
    "in_c",
    "counters",
]


@dataclass(frozen=True)
class CodecSpec:
    """One codec: its name, its code in the batch attributes, the compression levels it takes, and
    the lowest Produce version that may carry its batches.

    ``min_level``/``max_level`` are inclusive; all three level fields are None for a codec that
    takes no level. ``min_produce_version``: 3 (the first with record batches, the only format
    written here) unless the codec came later (zstd: 7); a broker that speaks no Produce version
    from it up cannot take the producer's batches. This is the one table of levels: :mod:`fastkafka.config` checks
    ``compression_level`` with :func:`validate_level` too, so every level the configuration accepts
    is one the compressor accepts.
    """

    name: str
    code: int
    min_level: int | None = None
    max_level: int | None = None
    default_level: int | None = None
    min_produce_version: int = 3

    @property
    def takes_level(self) -> bool:
        return self.min_level is not None

    def level_range(self) -> str:
        return f"{self.min_level}..{self.max_level}" if self.takes_level else "none"


#: Every codec, by code. Level ranges are those the libraries used here accept: zlib's 1-9 for gzip,
#: lz4.frame's 0-16 (0-2 fast, 3-16 high compression), and zstd's -131072 (fastest) to 22
#: (0 is zstd's own default level).
CODEC_SPECS: tuple[CodecSpec, ...] = (
    CodecSpec("none", 0),
    CodecSpec("gzip", 1, 1, 9, 6),
    CodecSpec("snappy", 2),
    CodecSpec("lz4", 3, 0, 16, 0),
    CodecSpec("zstd", 4, -(1 << 17), 22, 3, min_produce_version=7),
)

assert all(s.code == i for i, s in enumerate(CODEC_SPECS))  # CODEC_SPECS[code] is that codec

CODECS = {s.name: s.code for s in CODEC_SPECS}
CODEC_NAMES = {s.code: s.name for s in CODEC_SPECS}

#: Level used when ``level`` is None (None: the codec takes no level).
DEFAULT_LEVELS = {s.code: s.default_level for s in CODEC_SPECS}
#: Inclusive (min, max) level per codec name, for the codecs that take a level.
LEVEL_RANGES = {s.name: (s.min_level, s.max_level) for s in CODEC_SPECS if s.takes_level}

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


def _lz4_missing_message() -> str:
    return ("compression_type 'lz4' needs the system's LZ4 library (liblz4.so.1; Debian/Ubuntu: "
            "apt-get install liblz4-1, RHEL: dnf install lz4-libs) or the Python package lz4 "
            "(pip install lz4), and this environment has neither")


def _require_lz4() -> None:
    if _lz4_frame is None:
        raise ConfigError(_lz4_missing_message())


def check_available(codec) -> None:
    """Raise :class:`~fastkafka.errors.ConfigError` when ``codec`` cannot compress here: only lz4
    can be missing (no liblz4 on the machine and no ``lz4`` package, possible on CPython 3.15+)."""
    if codec_code(codec) == 3 and _lz4_frame is None and not ccodecs.in_c(3):
        raise ConfigError(_lz4_missing_message())


def validate_level(codec, level):
    """Check ``level`` for ``codec``; return the level to use (the codec default for None).

    The ranges are those of :data:`CODEC_SPECS` (gzip 1..9, lz4 0..16, zstd -131072..22); none and
    snappy take no level. Raises :class:`~fastkafka.errors.ConfigError` (a ValueError) naming
    ``compression_level``, the codec, the level and the valid range.

    >>> validate_level("gzip", None)
    6
    >>> validate_level(2, None) is None
    True
    """
    spec = CODEC_SPECS[codec_code(codec)]
    if level is None:
        return spec.default_level
    if not spec.takes_level:
        raise ConfigError(
            f"compression_level is not supported for compression_type {spec.name!r} "
            f"(it takes no level), got {level!r}")
    if isinstance(level, bool) or not isinstance(level, int):
        raise ConfigError(
            f"compression_level for compression_type {spec.name!r} must be an integer, got {level!r}")
    if not spec.min_level <= level <= spec.max_level:
        raise ConfigError(
            f"compression_level {level!r} is out of range for compression_type {spec.name!r}: "
            f"valid {spec.level_range()} (default {spec.default_level})")
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


# Compressions done by the Python codecs here, by code (counters()).
_python_calls = [0] * len(CODEC_SPECS)


def in_c(codec) -> bool:
    """True when batches of ``codec`` (code or name) need no Python to be closed: "none", or a
    codec compressed in C (:mod:`fastkafka._wire.ccodecs`, its library loaded). Such batches may
    take the I/O thread's GIL-free turn.

    >>> in_c("none")
    True
    """
    return ccodecs.in_c(codec_code(codec))


def counters() -> dict:
    """counters() -> ``{"c": {codec: {"calls", "bytes_in", "bytes_out", "failures"}},
    "python": {codec: calls}, "libraries": {codec: library file}}``: which path compressed how
    much since the process started (C without the GIL, or the Python codecs here)."""
    return {"c": ccodecs.counters(),
            "python": {s.name: _python_calls[s.code] for s in CODEC_SPECS if s.code},
            "libraries": ccodecs.available()}


def compress_buffer(codec, data, level=None):
    """Like :func:`compress` but may return any buffer-protocol object (saves a copy)."""
    code = codec_code(codec)
    level = validate_level(code, level)
    if code == 0:
        return data
    _python_calls[code] += 1
    if code == 1:
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if code == 2:
        return _snappy_xerial(data)
    if code == 3:
        _require_lz4()
        return _lz4_frame.compress(
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
        _require_lz4()
        return _lz4_frame.decompress(data)
    return bytes(cramjam.zstd.decompress(data))
