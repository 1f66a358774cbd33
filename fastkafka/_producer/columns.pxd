# cython: language_level=3
# path:
#   send_batch: prepare_column -> column_get (lists) / arrow_get (Arrow) -> append_record_locked
#   per-record: prepare_timestamps -> ts_get; prepare_headers_column -> headers_size / headers_write

# Contract of fastkafka._producer.columns: the one reader of send_batch columns (lists of
# bytes-like/str/None and Arrow binary/string arrays, read straight from their buffers), shared by the accumulator's
# append_batch and the partitioner's partitions_for_keys.
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_CheckExact
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_Check
from libc.stdint cimport int32_t, int64_t, uint8_t

from fastkafka._wire.varint cimport size_uvarint, write_uvarint, zigzag64

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


# ---- per-record timestamps ------------------------------------------------------------------
# ``send_batch(timestamps=...)``: an int64 per record (an Arrow timestamp or integer array read
# from its buffer, or a list of int/None made into one), converted to ms here: ``value * mul``
# (s) or ``value / div`` (us, ns; truncated toward zero, as Spark's Kafka sink does); a null
# record (validity bit 0) gets the call's timestamp.
cdef struct TsColumn:
    const int64_t *vals            # element 0 of the column (its offset applied)
    const uint8_t *validity        # NULL: no nulls
    Py_ssize_t offset              # the array's offset (bit index of element 0 in validity)
    int64_t mul
    int64_t div


# Fill ``t`` for ``col`` (an Arrow timestamp/date64/integer array or chunked array, or a list or
# other iterable of int/None) of ``n`` elements; nulls (None) get ``default`` (the list path
# writes it in). InvalidRecordError for a wrong type, MalformedRecordError naming
# ``timestamps[index]`` for a length that differs or a negative time. Keeps what ``t`` points
# into in ``keep``.
cdef int prepare_timestamps(object col, TsColumn *t, Py_ssize_t n, int64_t default,
                            list keep) except -1


# The timestamp (ms) of record ``i``; ``default`` for a null.
# thread: app · lock: none · gil: any
@cython.cdivision(True)
cdef inline int64_t ts_get(const TsColumn *t, Py_ssize_t i, int64_t default) noexcept nogil:
    cdef Py_ssize_t j = t.offset + i
    cdef int64_t v
    if t.validity != NULL and not ((t.validity[j >> 3] >> (j & 7)) & 1):
        return default
    v = t.vals[i]
    if t.mul != 1:
        return v * t.mul
    if t.div != 1:
        return v / t.div           # C division: truncated toward zero, as Spark's sink does
    return v


# ---- per-record headers ---------------------------------------------------------------------
cdef enum:
    HDR_ARROW = 1     # Arrow list<struct<key, value>> (or large_list), read from its buffers
    HDR_LIST = 2      # per-record header lists, encoded at prepare time into one buffer

# ``send_batch(record_headers=...)``: a headers section per record, the call's ``headers``
# (``tail``: their encoded pairs, ``tail_count`` of them) after the record's own.
cdef struct HeaderColumn:
    int kind
    Py_ssize_t offset              # the list array's offset (slices)
    const uint8_t *validity        # the list's validity (NULL: no nulls); a null list: no headers
    const int32_t *loff32          # list offsets (one of the two)
    const int64_t *loff64
    Column keys                    # the struct's key and value children (the struct's offset
    Column values                  # applied), indexed by the list offsets
    const char *ldata              # HDR_LIST: every record's encoded pairs (no count), one
    const int64_t *lcount          # after the other (loff64[i]..loff64[i + 1]); their counts
    const char *tail               # the call's headers, encoded, without their count
    Py_ssize_t tail_len
    Py_ssize_t tail_count


# Fill ``h`` for ``col`` (an Arrow list<struct<key: string|large_string, value: binary|
# large_binary|string|large_string>> or large_list of it, or a list or other iterable of
# per-record headers: None or pairs or a dict each) of ``n`` records, with the call's
# ``call_headers`` (None, or anything EncodedHeaders takes) after each record's own. Every record
# is checked: a null key or a null header entry raises MalformedRecordError naming
# ``record_headers[row]``; a wrong type InvalidRecordError. Keeps what ``h`` points into in
# ``keep``.
cdef int prepare_headers_column(object col, HeaderColumn *h, Py_ssize_t n, object call_headers,
                                list keep) except -1

# Encoded size of record ``i``'s headers section (count varint included).
# thread: app · lock: none · gil: any
cdef Py_ssize_t headers_size(const HeaderColumn *h, Py_ssize_t i) noexcept nogil

# Write record ``i``'s headers section at ``p`` (headers_size bytes); returns that size.
# thread: app · lock: none · gil: any
cdef Py_ssize_t headers_write(const HeaderColumn *h, Py_ssize_t i, char *p) noexcept nogil
