"""Compiled Avro and JSON encoders: whole Arrow columns in C, the GIL released while the rows are
encoded, and single Python values (dicts) by the same precompiled schema program.

An :class:`AvroEncoder` compiles its schema once into a tree of ``_Op`` (one per Avro type, the
field names interned, enum symbols in a dict): ``encode`` walks it over a Python value. For Arrow
data, the Arrow type is checked against the schema first (``SchemaMismatchError`` naming the first
field that does not fit) and turned into a plan (``_APlan``); each chunk is exported through the
Arrow C data interface (no copy) and bound to the plan as a flat array of C structs (``Col``),
which the row loop walks without the GIL and without one Python object per row.

Rules of the Arrow path: a nullable Arrow field may feed a non-union Avro type (a null met in a
row is an :class:`EncodeError` naming the row and field); a union of ``null`` and one other type
takes a nullable column; a union of several non-null types does not take an Arrow column. An
Arrow int64/uint32 column into an Avro ``int`` is checked per value; uint64 is refused;
timestamps are converted to the Avro unit, nanoseconds floored (an instant before 1970 stays
before), the time zone ignored (values are UTC); a dictionary of strings feeds a string or an
enum (symbols looked up once per dictionary); the columns of an Arrow struct the record lacks are
ignored, and a record field missing from the Arrow struct is written as its default.

Rules of Python values (as fastavro takes them, stricter where it would write nonsense): int and
long from an int (numpy's too; bool refused, the range checked); float and double from an int or
a float (bool refused); string from str; bytes from bytes, bytearray or memoryview; enum from a
symbol; fixed from bytes of its size; decimal from a decimal.Decimal (more places than the scale
or more digits than the precision refused); date from a datetime.date or an int; time-* from a
datetime.time or an int; timestamp-* from a datetime (a naive one taken as UTC) or an int; uuid
from a uuid.UUID or a str; a record from a mapping (a missing field takes its default); an array
from a list or tuple; a map from a mapping with str keys; a union takes the first branch the value
fits (None -> "null"; a dict -> the first record whose required fields it has and whose keys are
all fields, else a map).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport INT64_MIN, INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memcpy, memcmp, memmove, memset

import datetime as _dt
import decimal as _decimal
import math as _math
import sys as _sys
import uuid as _uuid
from collections.abc import Mapping as _Mapping
from numbers import Real as _Real
from operator import index as _operator_index

from fastkafka.schema_registry._avro_schema import AvroNode, ParsedAvro, parse_avro_schema
from fastkafka.schema_registry._errors import EncodeError, SchemaMismatchError

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    PyObject* PyDict_GetItemWithError(object d, object k) except? NULL
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    long long PyLong_AsLongLongAndOverflow(object v, int* overflow) except? -1

cdef extern from *:
    """
    #ifndef ARROW_C_DATA_INTERFACE
    #define ARROW_C_DATA_INTERFACE
    struct ArrowSchema {
      const char* format; const char* name; const char* metadata; int64_t flags;
      int64_t n_children; struct ArrowSchema** children; struct ArrowSchema* dictionary;
      void (*release)(struct ArrowSchema*); void* private_data;
    };
    struct ArrowArray {
      int64_t length; int64_t null_count; int64_t offset; int64_t n_buffers; int64_t n_children;
      const void** buffers; struct ArrowArray** children; struct ArrowArray* dictionary;
      void (*release)(struct ArrowArray*); void* private_data;
    };
    #endif
    static inline int fk_mul_overflow(int64_t a, int64_t b, int64_t* r) {
        return __builtin_mul_overflow(a, b, r);
    }
    typedef __int128 fk_i128;
    """
    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children
        ArrowArray* dictionary
    int fk_mul_overflow(int64_t a, int64_t b, int64_t* r) noexcept nogil
    ctypedef long long fk_i128     # declared as a 128-bit integer in C; Cython sees an integer

include "_encode_buf.pxi"
include "_encode_values.pxi"
include "_encode_plan.pxi"
include "_encode_rows.pxi"
include "_encode_json.pxi"


# ------------------------------------------------------------------------------------------------
# the encoders

cdef class AvroEncoder:
    """Avro binary from one schema, compiled once: ``encode`` for one Python value,
    ``encode_arrow`` for every row of Arrow data (the GIL released while rows are encoded)."""

    cdef readonly object parsed
    cdef _Op op
    cdef dict plans
    cdef Buf buf
    cdef bint busy

    def __cinit__(self):
        self.buf.data = NULL
        self.buf.len = 0
        self.buf.cap = 0

    def __init__(self, schema):
        self.parsed = parse_avro_schema(schema)
        self.op = _compile(self.parsed.root, {})
        self.plans = {}

    def __dealloc__(self):
        free(self.buf.data)

    def __reduce__(self):
        return (AvroEncoder, (self.parsed.schema,))

    def encode(self, obj, bytes header=b""):
        """One datum (a dict for a record schema; a field missing from it takes the schema's
        default) as ``header`` + its Avro binary. EncodeError names the field path, the Avro
        type and the bad value's type."""
        cdef Buf local
        cdef Buf* b
        if self.busy:                 # re-entered (from a value's own code): a buffer of its own
            local.data = NULL
            local.len = 0
            local.cap = 0
            b = &local
        else:
            b = &self.buf
            self.busy = True
        b.len = 0
        try:
            if w_raw(b, PyBytes_AS_STRING(header), PyBytes_GET_SIZE(header)) < 0:
                raise MemoryError()
            _write_obj(self.op, obj, b)
            return PyBytes_FromStringAndSize(b.data, b.len)
        finally:
            if b == &self.buf:
                self.busy = False
                if b.cap > 1 << 20:      # keep no huge buffer after one huge record
                    free(b.data)
                    b.data = NULL
                    b.cap = 0
            else:
                free(local.data)

    def _default_bytes(self, field):
        """A record field's default as Avro binary."""
        cdef Buf b
        b.data = NULL
        b.len = 0
        b.cap = 0
        try:
            _write_default(_compile(field.type, {}), field.default, &b)
            return PyBytes_FromStringAndSize(b.data, b.len)
        finally:
            free(b.data)

    def _plan_for(self, arrow_type):
        p = self.plans.get(arrow_type)
        if p is None:
            p = _plan(self.parsed.root, arrow_type, "", self)
            if len(self.plans) > 64:
                self.plans.clear()
            self.plans[arrow_type] = p
        return p

    def check_arrow(self, arrow_type):
        """SchemaMismatchError naming the first field of ``arrow_type`` (a DataType, Schema or
        Field) that does not fit the schema; nothing when it fits."""
        pa = _load_pa()
        if isinstance(arrow_type, pa.Schema):
            arrow_type = pa.struct(list(arrow_type))
        elif isinstance(arrow_type, pa.Field):
            arrow_type = arrow_type.type
        self._plan_for(_normalized_type(arrow_type))

    def encode_arrow(self, data, bytes header=b""):
        """Every row of ``data`` (Table, RecordBatch, StructArray, ChunkedArray, an Array for a
        non-record schema, or an object exporting Arrow data) as ``header`` + Avro binary: a
        BinaryArray (LargeBinaryArray past 2**31-1 bytes), a null row as a null entry."""
        return _run(self._plan_for, data, header)


cdef class JsonEncoder:
    """JSON text from Arrow columns: one compact JSON value per row (an object for a struct row,
    keys in field order, no spaces, UTF-8), the GIL released while rows are written.

    The rules (the same as the JSON Schema derived from an Arrow type): bool -> true/false;
    integers (uint64 too) -> integers; float/double -> numbers that read back as the same double
    (NaN and Infinity are an EncodeError naming the row and field: JSON has none); decimal128 ->
    a number written exactly (``-123.4500``); string -> string ('"', backslash and the control
    characters escaped, as ``\\u00XX`` for the latter; other characters as UTF-8); binary,
    large_binary and fixed_size_binary -> a base64 string (standard alphabet, padded); date32 and
    date64 -> ``"YYYY-MM-DD"``; timestamp of any unit (its time zone ignored: values are UTC) ->
    ``"YYYY-MM-DDTHH:MM:SS[.fff|.ffffff|.fffffffff]Z"``, the fraction's digits those of the unit;
    time32/time64 -> ``"HH:MM:SS[.fraction]"``; list, large_list, fixed_size_list -> array;
    struct -> object; map<string, T> -> object; dictionary -> its value; a null -> null, and a
    null row (a null struct) -> a null entry."""

    cdef object arrow_type
    cdef dict plans

    def __init__(self, arrow_type=None):
        self.plans = {}
        self.arrow_type = arrow_type
        if arrow_type is not None:
            pa = _load_pa()
            if isinstance(arrow_type, pa.Schema):
                arrow_type = pa.struct(list(arrow_type))
            self._plan_for(_normalized_type(arrow_type))

    def __reduce__(self):
        return (JsonEncoder, (self.arrow_type,))

    def _plan_for(self, arrow_type):
        p = self.plans.get(arrow_type)
        if p is None:
            p = _jplan(arrow_type, "")
            if len(self.plans) > 64:
                self.plans.clear()
            self.plans[arrow_type] = p
        return p

    def encode_arrow(self, data, bytes header=b""):
        """Every row of ``data`` (as AvroEncoder.encode_arrow takes) as ``header`` + JSON text:
        a BinaryArray (LargeBinaryArray past 2**31-1 bytes), a null row as a null entry."""
        return _run(self._plan_for, data, header, 1)
