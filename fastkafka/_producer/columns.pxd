# cython: language_level=3
# path:
#   send_batch: prepare_column -> column_get (lists) / arrow_get (Arrow) -> append_record_locked

# Contract of fastkafka._producer.columns: the one reader of send_batch columns (lists of
# bytes-like/str/None and Arrow binary/string arrays, read straight from their buffers), shared by the accumulator's
# append_batch and the partitioner's partitions_for_keys.
from cpython.buffer cimport PyObject_GetBuffer, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_CheckExact
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_Check
from libc.stdint cimport int32_t, int64_t, uint8_t

cdef enum:
    COL_NULL = 0      # every element null
    COL_LIST = 1      # Python list of bytes-like / str / None
    COL_ARROW32 = 2   # Arrow binary/string: int32 offsets
    COL_ARROW64 = 3   # Arrow large_binary/large_string: int64 offsets


cdef struct Column:
    int kind
    Py_ssize_t offset              # Arrow array offset (slices)
    const uint8_t *validity        # NULL: no nulls
    const int32_t *off32
    const int64_t *off64
    const char *data
    PyObject *lst                  # borrowed; the caller keeps the list alive (in ``keep``)


# True for an object of pyarrow (an Array, ChunkedArray, ...).
cdef bint is_arrow(object obj)

# The pyarrow module, imported on first use.
cdef object pyarrow_module()

# Fill ``c`` for ``col`` (a list of bytes-like/str/None, any other iterable of them, or a pyarrow
# binary/large_binary/string/large_string/null array or chunked array); every element is checked
# (InvalidRecordError / MalformedRecordError naming ``name[index]``). Returns the length; the
# objects ``c`` points into are appended to ``keep``, which the caller keeps alive.
cdef Py_ssize_t prepare_column(object col, Column *c, str name, list keep) except -1

# An int32 per record from ``partitions`` (a pyarrow integer array, or anything exporting an int32
# buffer, or a sequence of ints), of length ``n``, no nulls; kept alive in ``keep``. NULL for n == 0.
cdef const int32_t *prepare_int32_column(object partitions, Py_ssize_t n, list keep) except? NULL


# Element ``i`` of an Arrow (or all-null) column: pointer and length, length -1 for null.
# thread: app · lock: none · gil: any
cdef inline void arrow_get(const Column *c, Py_ssize_t i, const char **p,
                           Py_ssize_t *n) noexcept nogil:
    cdef Py_ssize_t j
    cdef int64_t a, b
    if c.kind == COL_NULL:
        p[0] = NULL
        n[0] = -1
        return
    j = c.offset + i
    if c.validity != NULL and not ((c.validity[j >> 3] >> (j & 7)) & 1):
        p[0] = NULL
        n[0] = -1
        return
    if c.kind == COL_ARROW32:
        a = c.off32[j]
        b = c.off32[j + 1]
    else:
        a = c.off64[j]
        b = c.off64[j + 1]
    p[0] = c.data + a
    n[0] = <Py_ssize_t>(b - a)


# Element ``i`` of any column: pointer and length (-1: null). A str element gives its UTF-8 (made
# and kept in the str by prepare_column's check; the list, kept alive by the caller, holds the str).
# For a list element that is neither bytes, bytearray nor str, ``view`` is filled and
# ``release[0]`` set: the caller releases it.
cdef inline int column_get(Column *c, Py_ssize_t i, const char **p, Py_ssize_t *n,
                           Py_buffer *view, bint *release) except -1:
    cdef object x
    if c.kind != COL_LIST:
        arrow_get(c, i, p, n)
        return 0
    if i >= PyList_GET_SIZE(<object>c.lst):
        raise RuntimeError("the list passed to send_batch changed size while being appended")
    x = <object>PyList_GET_ITEM(<object>c.lst, i)
    if x is None:
        p[0] = NULL
        n[0] = -1
    elif PyBytes_CheckExact(x):
        p[0] = PyBytes_AS_STRING(x)
        n[0] = PyBytes_GET_SIZE(x)
    elif PyByteArray_CheckExact(x):
        p[0] = PyByteArray_AS_STRING(x)
        n[0] = PyByteArray_GET_SIZE(x)
    elif PyUnicode_Check(x):
        p[0] = PyUnicode_AsUTF8AndSize(x, n)
    else:
        PyObject_GetBuffer(x, view, PyBUF_SIMPLE)
        release[0] = True
        p[0] = <const char *>view.buf
        n[0] = view.len
    return 0
