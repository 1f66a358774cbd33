# cython: language_level=3
"""Record-batch compression in C, called without the GIL (the contract: ``ccodecs.pxd``; why and
what still needs the GIL: ``docs/internals.md``, "Compression without the GIL").

The codecs' shared libraries are opened at import with ``dlopen`` (zlib ``libz.so.1``, LZ4
``liblz4.so.1``, zstd ``libzstd.so.1``, snappy ``libsnappy.so.1``); the extension links none of
them. A codec whose library is missing (or too old) is not compressed here: its batches go through
the Python codecs of :mod:`fastkafka._wire.compression`, with the GIL, as before. The environment
variable ``FASTKAFKA_C_CODECS`` (read once, at import) names the codecs to try, comma-separated
(``"lz4,zstd"``; empty: none), for diagnosis and tests; unset, all four are loaded and gzip,
snappy and lz4 are used, and zstd is used when its library is libzstd 1.5.7 or newer
(:data:`ZSTD_C_FROM`; ``use_c("zstd")`` or naming zstd in ``FASTKAFKA_C_CODECS`` turns it on for any
loaded version). The Python package's zstd (cramjam bundles zstd 1.5.7) and the system's libzstd
1.5.7 cost the same per byte on full batches of text-like records, and the C path frees the GIL
turn; Debian 12's libzstd 1.5.4 took 10-30 % longer per byte on 16-256 KiB batches (the producer's
batches are mostly full, 256 KiB) and cost ``send()`` and ``send_batch`` more CPU per record than
the Python codec, so an older libzstd leaves zstd to the Python codec unless asked.

>>> set(available()) >= {c for c in ("gzip", "snappy", "lz4", "zstd") if in_c(c)}
True
"""
import os

from libc.stdint cimport uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize

cdef extern from "ccodecs_impl.h":
    int fk_codecs_load(const char *only)
    int fk_codec_in_c(int code) nogil
    const char *fk_codec_library(int code)
    unsigned fk_codec_version(int code)
    int fk_codec_use(int code, int on)
    Py_ssize_t fk_codec_compress(int code, int level, const char *src, size_t n,
                                 const char **out) nogil
    void fk_codec_counters(int code, uint64_t *calls, uint64_t *bytes_in, uint64_t *bytes_out,
                           uint64_t *failures)

cdef const char *_EMPTY = ""

_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
_CODES = {n: i for i, n in enumerate(_NAMES)}

#: The oldest libzstd (as ZSTD_versionNumber gives it: 1.5.7 is 10507) that compresses zstd batches
#: in C by default: measured as cheap per byte as the Python package's zstd (see above); 1.5.4 was
#: not, and the versions between were not measured.
ZSTD_C_FROM = 10507


def zstd_c_by_default(version) -> bool:
    """zstd_c_by_default(version) -> whether a libzstd of ``version`` (ZSTD_versionNumber's
    number; 0 or None: not loaded) compresses zstd batches in C when ``FASTKAFKA_C_CODECS`` is
    unset.

    >>> zstd_c_by_default(10507), zstd_c_by_default(10504), zstd_c_by_default(0)
    (True, False, False)
    """
    return bool(version) and version >= ZSTD_C_FROM


def _load():
    only = os.environ.get("FASTKAFKA_C_CODECS")
    if only is None:
        fk_codecs_load(NULL)
        # loaded; used by default only from ZSTD_C_FROM on (see above)
        fk_codec_use(_CODES["zstd"], zstd_c_by_default(fk_codec_version(_CODES["zstd"])))
    else:
        b = only.strip().lower().encode("ascii", "replace")
        fk_codecs_load(<const char *>b)


_load()


# thread: any · lock: none · gil: any
cdef int codec_in_c(int code) noexcept nogil:
    return 1 if code == 0 else fk_codec_in_c(code)


# thread: any · lock: none · gil: any
cdef Py_ssize_t codec_compress_c(int code, int level, const char *src, Py_ssize_t n,
                                 const char **out) noexcept nogil:
    if n < 0:
        return -1
    return fk_codec_compress(code, level, src, <size_t>n, out)


cdef int _code(codec) except -1:
    if isinstance(codec, str):
        if codec.lower() not in _CODES:
            raise ValueError(f"unknown compression codec {codec!r}")
        return _CODES[codec.lower()]
    if isinstance(codec, int) and not isinstance(codec, bool) and 0 <= codec < len(_NAMES):
        return codec
    raise ValueError(f"unknown compression codec {codec!r}")


def in_c(codec) -> bool:
    """in_c(codec) -> True when batches of ``codec`` (code or name) are compressed in C, without
    the GIL (always True for "none", which needs no compression)."""
    return bool(codec_in_c(_code(codec)))


def use_c(codec, bint on=True) -> bool:
    """use_c(codec, on=True) -> whether ``codec`` is now compressed in C: turn its C library on or
    off for the batch builders made from now on (a builder made before keeps its choice). Only a
    library that was loaded can be turned on. For diagnosis (and the tests of the Python path);
    ``FASTKAFKA_C_CODECS`` does the same before import, without loading the library."""
    cdef int code = _code(codec)
    if code == 0:
        return True
    return bool(fk_codec_use(code, on))


def available() -> dict:
    """available() -> {codec name: library file} for the codecs whose C library was loaded
    (turned off or not: see in_c)."""
    cdef int k
    cdef const char *lib
    out = {}
    for k in range(1, len(_NAMES)):
        lib = fk_codec_library(k)
        if lib != NULL:
            out[_NAMES[k]] = lib.decode()
    return out


def versions() -> dict:
    """versions() -> {codec name: "major.minor.release"} for the loaded libraries that number their
    versions (lz4, zstd), turned off or not."""
    cdef int k
    cdef unsigned v
    out = {}
    for k in range(1, len(_NAMES)):
        v = fk_codec_version(k)
        if v:
            out[_NAMES[k]] = f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    return out


def counters() -> dict:
    """counters() -> {codec name: {"calls", "bytes_in", "bytes_out", "failures"}}: what was
    compressed in C since the process started (a failure falls back: see docs/internals.md)."""
    cdef int k
    cdef uint64_t calls, bin_, bout, fails
    out = {}
    for k in range(1, len(_NAMES)):
        fk_codec_counters(k, &calls, &bin_, &bout, &fails)
        out[_NAMES[k]] = {"calls": calls, "bytes_in": bin_, "bytes_out": bout, "failures": fails}
    return out


def compress(codec, data, int level=0) -> bytes:
    """compress(codec, data, level=0) -> bytes: ``data`` (any C-contiguous buffer) compressed in C
    (the GIL released), in the format of :func:`fastkafka._wire.compression.compress`; ``level``
    must be one :func:`~fastkafka._wire.compression.validate_level` accepts. RuntimeError when the
    codec is not available in C or its library fails."""
    cdef int code = _code(codec)
    cdef const unsigned char[::1] view
    cdef const char *src = _EMPTY
    cdef const char *out = NULL
    cdef Py_ssize_t n = 0, r
    if code == 0:
        return bytes(data)
    if not codec_in_c(code):
        raise RuntimeError(f"compression codec {_NAMES[code]!r} is not available in C here")
    view = memoryview(data).cast("B")
    n = view.shape[0]
    if n > 0:
        src = <const char *>&view[0]
    with nogil:
        r = codec_compress_c(code, level, src, n, &out)
    if r < 0:
        raise RuntimeError(f"the {_NAMES[code]} library failed to compress {n} bytes")
    return PyBytes_FromStringAndSize(out, r)
