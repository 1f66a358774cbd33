# cython: language_level=3
"""The reader of ``send_batch`` columns: lists of bytes-like/str/None (a str as its UTF-8) and
pyarrow binary/large_binary/string/large_string arrays read straight from their Arrow buffers
(slices and nulls honoured); per-record timestamps (Arrow timestamp/integer arrays) and per-record
headers (Arrow list<struct<key, value>> arrays: list offsets, the struct's children and validity
bitmaps) read the same way, with no Python object per record.

:func:`prepare_column` checks a column once and describes it in a ``Column`` struct; the inline
``column_get`` / ``arrow_get`` (``columns.pxd``) then give element ``i`` as pointer and length with no
Python object per element. The accumulator's ``append_batch`` and the partitioner's
``partitions_for_keys`` both read their columns this way.

>>> column_lengths([b"a", None], None)
(2, 0)
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_CheckExact
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t, uintptr_t, INT64_MAX
from libc.string cimport memcpy

from fastkafka._wire.records cimport EncodedHeaders, _len_field_size, str_utf8, unusable_buffer
from fastkafka._wire.varint cimport read_uvarint, unzigzag64

import array

from fastkafka.errors import InvalidRecordError, MalformedRecordError, UnknownPartitionError

cdef object _pa = None


cdef object pyarrow_module():
    global _pa
    if _pa is None:
        import pyarrow
        _pa = pyarrow
    return _pa


cdef bint is_arrow(object obj):
    cdef str mod = type(obj).__module__
    return mod is not None and mod.startswith("pyarrow")


cdef inline uintptr_t _addr(object buf):
    return 0 if buf is None else <uintptr_t>buf.address


cdef Py_ssize_t prepare_column(object col, Column *c, str name, list keep) except -1:
    """Fill ``c`` for ``col``; validate it; return its length. Keeps needed objects in ``keep``."""
    cdef Py_ssize_t n, i, sl
    cdef const char *sp
    cdef object x, t, bufs
    cdef Py_buffer view
    c.kind = COL_NULL
    c.offset = 0
    c.validity = NULL
    c.off32 = NULL
    c.off64 = NULL
    c.data = NULL
    c.lst = NULL
    if is_arrow(col):
        pa = pyarrow_module()
        if isinstance(col, pa.ChunkedArray):
            col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if not isinstance(col, pa.Array):
            raise InvalidRecordError(f"{name}: expected a pyarrow Array, got {type(col).__name__}")
        keep.append(col)
        t = col.type
        n = len(col)
        if pa.types.is_null(t):
            return n
        if pa.types.is_binary(t) or pa.types.is_string(t):
            c.kind = COL_ARROW32
        elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            c.kind = COL_ARROW64
        else:
            raise InvalidRecordError(
                f"{name}: Arrow type {t} is not supported (use binary, large_binary, string "
                f"or large_string)")
        bufs = col.buffers()
        keep.append(bufs)
        c.offset = col.offset
        if bufs[0] is not None and col.null_count > 0:
            c.validity = <const uint8_t *>_addr(bufs[0])
        if c.kind == COL_ARROW32:
            c.off32 = <const int32_t *>_addr(bufs[1])
        else:
            c.off64 = <const int64_t *>_addr(bufs[1])
        c.data = <const char *>_addr(bufs[2])
        if n > 0 and c.off32 == NULL and c.off64 == NULL:
            raise InvalidRecordError(f"{name}: Arrow array without an offsets buffer")
        return n
    if type(col) is not list:
        if col is None or isinstance(col, (str, bytes, bytearray, memoryview)):
            raise InvalidRecordError(f"{name} must be a list of bytes-like/str/None or an Arrow "
                                     f"array, not {type(col).__name__}")
        try:
            col = iter(col)
        except TypeError:
            raise InvalidRecordError(f"{name} must be a list of bytes-like/str/None or an Arrow "
                                     f"array, not {type(col).__name__}") from None
        col = list(col)
    keep.append(col)
    n = PyList_GET_SIZE(col)
    for i in range(n):
        x = <object>PyList_GET_ITEM(col, i)
        if x is None or PyBytes_CheckExact(x) or PyByteArray_CheckExact(x):
            continue
        if PyUnicode_Check(x):
            str_utf8(x, name, i, &sp, &sl)   # checked, and its UTF-8 kept in it for column_get
            continue
        if isinstance(x, (int, float)) or not PyObject_CheckBuffer(x):
            raise InvalidRecordError(f"{name}[{i}] must be bytes-like (bytes, bytearray, memoryview "
                                     f"or another C-contiguous buffer), str (sent as UTF-8) or "
                                     f"None, not {type(x).__name__}")
        try:
            PyObject_GetBuffer(x, &view, PyBUF_SIMPLE)
        except (BufferError, ValueError, TypeError) as e:
            raise unusable_buffer(x, f"{name}[{i}]", e) from None
        PyBuffer_Release(&view)
    c.kind = COL_LIST
    c.lst = <PyObject *>col
    return n


cdef const int32_t *prepare_int32_column(object partitions, Py_ssize_t n,
                                         list keep) except? NULL:
    cdef const int32_t[::1] pview
    cdef const int32_t *pp = NULL
    cdef object pbufs
    if is_arrow(partitions):
        pa = pyarrow_module()
        if isinstance(partitions, pa.ChunkedArray):
            partitions = partitions.combine_chunks()
        if not isinstance(partitions, pa.Array):
            raise InvalidRecordError(f"partitions: expected a pyarrow Array, got "
                                     f"{type(partitions).__name__}")
        if not pa.types.is_integer(partitions.type):
            raise InvalidRecordError(f"partitions must be a pyarrow integer array, got "
                                     f"{partitions.type}")
        if partitions.null_count:
            raise UnknownPartitionError("partitions contains nulls")
        if partitions.type != pa.int32():
            try:
                partitions = partitions.cast(pa.int32())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise InvalidRecordError(f"partitions must be int32 values: {e}") from None
        keep.append(partitions)
        if len(partitions) != n:
            raise InvalidRecordError(f"partitions has {len(partitions)} elements "
                                     f"but values has {n}")
        if n:
            pbufs = partitions.buffers()
            keep.append(pbufs)
            pp = <const int32_t *>_addr(pbufs[1])
            pp += <Py_ssize_t>partitions.offset
        return pp
    try:
        pview = partitions
    except (TypeError, ValueError, BufferError):
        try:
            pview = array.array("i", partitions)
        except (TypeError, OverflowError) as e:
            raise InvalidRecordError(f"partitions must be int32 values: {e}") from None
    keep.append(pview)
    if pview.shape[0] != n:
        raise InvalidRecordError(f"partitions has {pview.shape[0]} elements but values has {n}")
    if n:
        pp = &pview[0]
    return pp


include "columns_records.pxi"


def column_lengths(values, keys):
    """column_lengths(values, keys) -> (len(values), len(keys) or 0 for None): both columns read
    and checked as ``send_batch`` reads them (the errors it raises for a bad column)."""
    cdef Column c
    cdef list keep = []
    return (prepare_column(values, &c, "values", keep),
            0 if keys is None else prepare_column(keys, &c, "keys", keep))
