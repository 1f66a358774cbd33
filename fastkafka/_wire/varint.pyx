"""Zigzag varints as used by the Kafka record format (RecordBatch v2).

``varint`` is the 32-bit flavour (Java ``ByteUtils.writeVarint``), ``varlong``
the 64-bit one. Encoded values are zigzag-mapped, so small negative numbers are
short too.

>>> encode_varint(-1), encode_varint(300)
(b'\\x01', b'\\xd8\\x04')
>>> decode_varint(b'\\xd8\\x04', 0)
(300, 2)
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint64_t, INT32_MIN, INT32_MAX

from fastkafka._wire.varint cimport (
    zigzag64, unzigzag64, size_uvarint, write_uvarint, read_uvarint,
)


cdef int64_t _as_int64(object n, str what) except? -1:
    if not isinstance(n, int):
        raise TypeError(f"{what} needs an int, got {type(n).__name__}")
    if not (-0x8000000000000000 <= n <= 0x7FFFFFFFFFFFFFFF):
        raise ValueError(f"{what}: {n} is outside the int64 range")
    return n


cdef int32_t _as_int32(object n, str what) except? -1:
    if not isinstance(n, int):
        raise TypeError(f"{what} needs an int, got {type(n).__name__}")
    if not (INT32_MIN <= n <= INT32_MAX):
        raise ValueError(f"{what}: {n} is outside the int32 range")
    return n


cdef bytes _encode(int64_t n):
    cdef char tmp[10]
    cdef int k = write_uvarint(tmp, zigzag64(n))
    return PyBytes_FromStringAndSize(tmp, k)


cdef tuple _decode(object buf, Py_ssize_t pos, int max_bytes, str what):
    cdef Py_buffer view
    cdef uint64_t raw = 0
    cdef int k
    cdef int64_t value
    cdef unsigned char last = 0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or pos > view.len:
            raise ValueError(f"{what}: position {pos} is outside the buffer (length {view.len})")
        k = read_uvarint(<const char *>view.buf + pos, <const char *>view.buf + view.len,
                         max_bytes, &raw)
        if k > 0:
            last = (<const unsigned char *>view.buf)[pos + k - 1]
    finally:
        PyBuffer_Release(&view)
    if k == 0:
        raise ValueError(f"{what}: truncated input at position {pos}")
    if k < 0:
        raise ValueError(f"{what}: too long (more than {max_bytes} bytes) at position {pos}")
    if max_bytes == 5:
        if raw > 0xFFFFFFFF:
            raise ValueError(f"{what}: value does not fit in 32 bits at position {pos}")
    elif k == 10 and last > 1:
        # A 10th byte may only carry the top bit; anything more overflowed.
        raise ValueError(f"{what}: value does not fit in 64 bits at position {pos}")
    value = unzigzag64(raw)
    return value, pos + k


def encode_varint(n):
    """encode_varint(n: int) -> bytes: zigzag varint of an int32 (1-5 bytes)."""
    return _encode(_as_int32(n, "varint"))


def encode_varlong(n):
    """encode_varlong(n: int) -> bytes: zigzag varint of an int64 (1-10 bytes)."""
    return _encode(_as_int64(n, "varlong"))


def decode_varint(buf, Py_ssize_t pos=0):
    """decode_varint(buf, pos=0) -> (value, new_pos): read an int32 zigzag varint.

    Raises ValueError for a truncated varint or one longer than 5 bytes.
    """
    return _decode(buf, pos, 5, "varint")


def decode_varlong(buf, Py_ssize_t pos=0):
    """decode_varlong(buf, pos=0) -> (value, new_pos): read an int64 zigzag varint.

    Raises ValueError for a truncated varlong or one longer than 10 bytes.
    """
    return _decode(buf, pos, 10, "varlong")


def size_of_varint(n):
    """size_of_varint(n: int) -> int: encoded size of an int32 zigzag varint."""
    return size_uvarint(zigzag64(_as_int32(n, "varint")))


def size_of_varlong(n):
    """size_of_varlong(n: int) -> int: encoded size of an int64 zigzag varint."""
    return size_uvarint(zigzag64(_as_int64(n, "varlong")))
