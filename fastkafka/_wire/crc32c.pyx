"""CRC-32C (Castagnoli) over any buffer-protocol object.

>>> from fastkafka._wire.crc32c import crc32c
>>> hex(crc32c(b"123456789"))
'0xe3069283'
>>> crc32c(b"6789", crc32c(b"12345")) == crc32c(b"123456789")
True
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint32_t

from fastkafka._wire.crc32c cimport fk_crc32c, fk_crc32c_impl


cdef extern from "crc32c_impl.h":
    uint32_t fk_crc32c_table(uint32_t crc, const unsigned char *buf, size_t length) nogil
    uint32_t fk_crc32c_hw(uint32_t crc, const unsigned char *buf, size_t length) nogil
    int fk_crc32c_hw_available() nogil


# Below this many bytes the GIL round trip costs more than the CRC itself.
cdef enum:
    _NOGIL_THRESHOLD = 32768

ctypedef uint32_t (*_crc_fn)(uint32_t, const unsigned char *, size_t) noexcept nogil


cdef uint32_t _run(_crc_fn fn, object data, uint32_t value) except? 0xFFFFFFFF:
    # except? with a sentinel: 0xFFFFFFFF is a legal CRC, Cython re-checks
    # PyErr_Occurred() when it sees it.
    cdef Py_buffer view
    cdef uint32_t crc
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= _NOGIL_THRESHOLD:
            with nogil:
                crc = fn(value, <const unsigned char *>view.buf, <size_t>view.len)
        else:
            crc = fn(value, <const unsigned char *>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc


def crc32c(data, uint32_t value=0):
    """crc32c(data, value=0) -> int

    CRC-32C of the bytes of ``data`` (any contiguous buffer), continuing from
    ``value`` (the CRC of the preceding bytes), like the ``crc32c`` package.
    The GIL is released for inputs of 32 KiB and more.

    >>> crc32c(b"")
    0
    """
    return _run(fk_crc32c, data, value)


def crc32c_table(data, uint32_t value=0):
    """Same as :func:`crc32c`, always on the portable slicing-by-8 table path (tests)."""
    return _run(fk_crc32c_table, data, value)


def crc32c_hw(data, uint32_t value=0):
    """Same as :func:`crc32c` on the hardware path (SSE4.2 on x86_64, the ARMv8 CRC32 instructions on
    aarch64) when the CPU has it (see :func:`hw_available`), else on the table path."""
    return _run(fk_crc32c_hw, data, value)


def hw_available():
    """True when the CPU has CRC-32C instructions this build uses: SSE4.2 on x86_64, CRC32 on aarch64
    (whether or not FASTKAFKA_CRC32C=table forces the table)."""
    return fk_crc32c_hw_available() != 0


def implementation():
    """``"sse4.2"``, ``"armv8-crc"`` or ``"table"``: the path :func:`crc32c` uses in this process."""
    return fk_crc32c_impl().decode("ascii")
