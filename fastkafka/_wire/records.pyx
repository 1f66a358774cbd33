"""RecordBatch v2 (magic 2) builder: one partition's records, encoded in place.

Contract: ``records.pxd`` (``BatchBuilder``, ``BatchView``, ``pooled_builder``, the close and stamp
callable without the GIL). The jobs are in ``records_buffers.pxi``, ``records_fields.pxi``,
``records_builder.pxi``, ``records_view.pxi`` and ``records_split.pxi``. How and why:
docs/internals.md#record-batches.

>>> b = BatchBuilder(16384)
>>> b.append(1700000000000, b"k", b"v")
True
>>> b.close(); b.stamp(-1, -1, -1)
>>> bytes(b.buffer()[16:17])  # magic
b'\\x02'
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyObject_CheckBuffer
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_Check, PyBytes_CheckExact,
                            PyBytes_FromStringAndSize)
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLong
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_AsUTF8String, PyUnicode_Check
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t, INT64_MIN
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy

from fastkafka._wire.ccodecs cimport codec_compress_c, codec_in_c
from fastkafka._wire.crc32c cimport fk_crc32c
from fastkafka._wire.varint cimport write_uvarint, zigzag64, size_uvarint

from fastkafka._wire.compression import compress_buffer as _compress_buffer
from fastkafka._wire.compression import codec_code as _codec_code
from fastkafka._wire.compression import validate_level as _validate_level
from fastkafka.errors import BufferExhaustedError, InvalidRecordError, MalformedRecordError

# fk_crc32c lives in crc32c_impl.c; this extension is built from records.pyx
# alone, so compile the implementation into it (symbols are hidden).
cdef extern from "crc32c_impl.c":
    pass

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)
    int PyBUF_READ
    PyObject *PySequence_Fast(object o, const char *m) except NULL
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    PyObject *PySequence_Fast_GET_ITEM(object o, Py_ssize_t i)
    bint PyBytes_CheckExact(object o)
    bint PyLong_CheckExact(object o)


cdef char *_FORMAT_B = "B"

cdef enum:
    _MIN_CAPACITY = 256
    _MAX_INITIAL_CAPACITY = 1 << 20   # grow past this only when records need it
    _NOGIL_COPY = 1 << 18             # memcpy of at least this many bytes drops the GIL
    _NOGIL_CRC = 1 << 20              # so does the CRC of a batch of at least this size
    _NOGIL_COMPRESS = 1 << 14         # and compressing (in C) records of at least this size


include "records_buffers.pxi"


# thread: any · lock: none · gil: any
cdef inline void _be16(char *p, uint16_t v) noexcept nogil:
    p[0] = <char>(v >> 8)
    p[1] = <char>v


# thread: any · lock: none · gil: any
cdef inline void _be32(char *p, uint32_t v) noexcept nogil:
    p[0] = <char>(v >> 24)
    p[1] = <char>(v >> 16)
    p[2] = <char>(v >> 8)
    p[3] = <char>v


# thread: any · lock: none · gil: any
cdef inline void _be64(char *p, uint64_t v) noexcept nogil:
    _be32(p, <uint32_t>(v >> 32))
    _be32(p + 4, <uint32_t>v)


cdef inline void _copy(char *dst, const char *src, Py_ssize_t n) noexcept:
    if n >= _NOGIL_COPY:
        with nogil:
            memcpy(dst, src, <size_t>n)
    elif n > 0:
        memcpy(dst, src, <size_t>n)


cdef inline Py_ssize_t _write_bytes_field(char *p, const char *data, Py_ssize_t n) noexcept:
    # varint length (-1: null) followed by the bytes
    cdef Py_ssize_t k = write_uvarint(p, zigzag64(n))
    if n > 0:
        _copy(p + k, data, n)
        return k + n
    return k


include "records_fields.pxi"
include "records_builder.pxi"
include "records_view.pxi"
include "records_split.pxi"
