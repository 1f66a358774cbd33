"""Compiled Avro and JSON encoders: whole Arrow columns in C, the GIL released while the rows are
encoded, and single Python values (dicts) by the same precompiled schema program.

An :class:`AvroEncoder` compiles its schema once into a tree of ``_Op`` (one per Avro type, the
field names interned, enum symbols in a dict): ``encode`` walks it over a Python value. For Arrow
data, the Arrow type is checked against the schema first (``SchemaMismatchError`` naming the first
field that does not fit) and turned into a plan (``_APlan``); each chunk is exported through the
Arrow C data interface (no copy) and bound to the plan as a flat array of C structs (``Col``),
which the row loop walks without the GIL and without one Python object per row.

Rules of the Arrow path (documented in docs): a nullable Arrow field may feed a non-union Avro
type (a null met in a row is an :class:`EncodeError` naming the row and field); a union of
``null`` and one other type takes a nullable column; a union of several non-null types does not
take an Arrow column. An Arrow int64/uint32 column into an Avro ``int`` is checked per value;
nanosecond timestamps are floored to the Avro unit; the columns of an Arrow struct the record
lacks are ignored, and a record field missing from the Arrow struct is written as its default.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport INT64_MIN, INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free, calloc
from libc.string cimport memcpy, memcmp, memset

import datetime as _dt
import decimal as _decimal
import math as _math
import sys as _sys
import uuid as _uuid
from collections.abc import Mapping as _Mapping

from fastkafka.schema_registry._avro_schema import AvroNode, ParsedAvro, parse_avro_schema
from fastkafka.schema_registry._errors import EncodeError, SchemaMismatchError

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    PyObject* PyDict_GetItemWithError(object d, object k) except? NULL
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

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


# ------------------------------------------------------------------------------------------------
# the output buffer

cdef struct Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int buf_grow(Buf* b, Py_ssize_t n) noexcept nogil:
    """Room for ``n`` more bytes; -1 when memory runs out."""
    cdef Py_ssize_t cap = b.cap * 2
    if cap < b.len + n:
        cap = b.len + n
    if cap < 256:
        cap = 256
    cdef char* p = <char*>realloc(b.data, cap)
    if p == NULL:
        return -1
    b.data = p
    b.cap = cap
    return 0


cdef inline int reserve(Buf* b, Py_ssize_t n) noexcept nogil:
    if b.len + n <= b.cap:
        return 0
    return buf_grow(b, n)


cdef inline void put_long(Buf* b, int64_t v) noexcept nogil:
    """A zig-zag varint (the caller reserved 10 bytes)."""
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    while z >= 0x80:
        b.data[b.len] = <char>((z & 0x7f) | 0x80)
        b.len += 1
        z >>= 7
    b.data[b.len] = <char>z
    b.len += 1


cdef inline int w_long(Buf* b, int64_t v) noexcept nogil:
    if reserve(b, 10) < 0:
        return -1
    put_long(b, v)
    return 0


cdef inline int w_raw(Buf* b, const void* p, Py_ssize_t n) noexcept nogil:
    if reserve(b, n) < 0:
        return -1
    memcpy(b.data + b.len, p, n)
    b.len += n
    return 0


cdef inline int w_lenbytes(Buf* b, const void* p, Py_ssize_t n) noexcept nogil:
    if reserve(b, n + 10) < 0:
        return -1
    put_long(b, n)
    memcpy(b.data + b.len, p, n)
    b.len += n
    return 0


cdef inline int w_float(Buf* b, float f) noexcept nogil:
    if reserve(b, 4) < 0:
        return -1
    memcpy(b.data + b.len, &f, 4)        # little-endian hosts only (the project builds for them)
    b.len += 4
    return 0


cdef inline int w_double(Buf* b, double d) noexcept nogil:
    if reserve(b, 8) < 0:
        return -1
    memcpy(b.data + b.len, &d, 8)
    b.len += 8
    return 0


cdef int w_decimal(Buf* b, const uint8_t* le16, int fixed_size) noexcept nogil:
    """A 128-bit little-endian two's complement value as Avro's decimal: big-endian, minimal
    length for bytes (as Java's BigInteger.toByteArray), sign-extended to ``fixed_size`` for a
    fixed. -2 when the value needs more bytes than the fixed has."""
    cdef int n = 16
    while n > 1 and ((le16[n - 1] == 0 and (le16[n - 2] & 0x80) == 0) or
                     (le16[n - 1] == 0xff and (le16[n - 2] & 0x80) != 0)):
        n -= 1
    cdef int i
    cdef uint8_t ext
    if fixed_size < 0:
        if reserve(b, n + 10) < 0:
            return -1
        put_long(b, n)
    else:
        if n > fixed_size:
            return -2
        if reserve(b, fixed_size) < 0:
            return -1
        ext = 0xff if (le16[15] & 0x80) else 0
        for i in range(fixed_size - n):
            b.data[b.len] = <char>ext
            b.len += 1
    for i in range(n - 1, -1, -1):
        b.data[b.len] = <char>le16[i]
        b.len += 1
    return 0


# ------------------------------------------------------------------------------------------------
# the schema program (Python values)

cdef enum Kind:
    K_NULL = 0
    K_BOOL
    K_INT
    K_LONG
    K_FLOAT
    K_DOUBLE
    K_BYTES
    K_STRING
    K_RECORD
    K_ENUM
    K_ARRAY
    K_MAP
    K_UNION
    K_FIXED
    K_DECIMAL
    K_DATE
    K_TIME_MILLIS
    K_TIME_MICROS
    K_TS_MILLIS
    K_TS_MICROS
    K_TS_NANOS
    K_LTS_MILLIS
    K_LTS_MICROS
    K_LTS_NANOS
    K_UUID

_LOGICAL_KIND = {
    "date": K_DATE, "time-millis": K_TIME_MILLIS, "time-micros": K_TIME_MICROS,
    "timestamp-millis": K_TS_MILLIS, "timestamp-micros": K_TS_MICROS, "timestamp-nanos": K_TS_NANOS,
    "local-timestamp-millis": K_LTS_MILLIS, "local-timestamp-micros": K_LTS_MICROS,
    "local-timestamp-nanos": K_LTS_NANOS,
}
_PRIM_KIND = {"null": K_NULL, "boolean": K_BOOL, "int": K_INT, "long": K_LONG, "float": K_FLOAT,
              "double": K_DOUBLE, "bytes": K_BYTES, "string": K_STRING}

cdef object _EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
cdef object _EPOCH = _dt.datetime(1970, 1, 1)
cdef object _datetime = _dt.datetime
cdef object _date = _dt.date
cdef object _time = _dt.time
cdef object _Decimal = _decimal.Decimal
cdef object _UUID = _uuid.UUID
cdef object _intern = _sys.intern
cdef int _EPOCH_ORDINAL = 719163


cdef class _Op:
    """One Avro type of a compiled schema."""
    cdef int kind
    cdef int base                # for a logical type: K_INT/K_LONG/K_BYTES/K_FIXED/K_STRING
    cdef str path
    cdef str tname
    cdef object node
    cdef tuple names             # record: interned field names
    cdef list children           # record: field ops; union: branch ops
    cdef tuple defaults          # record: defaults (Python values)
    cdef tuple has_default
    cdef _Op child               # array items, map values
    cdef dict symbols            # enum: symbol -> index
    cdef Py_ssize_t size         # fixed size (-1 for a bytes decimal)
    cdef int precision, scale
    cdef int null_index          # union: the index of "null" or -1
    cdef int other_index         # union of null and one type: the other's index, else -1


cdef str _pathname(str p):
    return p if p else "<root>"


cdef _Op _compile(object node, dict memo):
    cdef _Op op
    key = id(node)
    if key in memo:
        return memo[key]
    op = _Op()
    memo[key] = op
    op.node = node
    op.path = node.path
    op.tname = node.type_name()
    op.size = -1
    op.null_index = -1
    op.other_index = -1
    k = node.kind
    if k in _PRIM_KIND:
        op.kind = _PRIM_KIND[k]
    elif k == "record":
        op.kind = K_RECORD
        op.names = tuple(_intern(f.name) for f in node.fields)
        op.children = [_compile(f.type, memo) for f in node.fields]
        op.defaults = tuple(f.default for f in node.fields)
        op.has_default = tuple(f.has_default for f in node.fields)
    elif k == "enum":
        op.kind = K_ENUM
        op.symbols = {s: i for i, s in enumerate(node.symbols)}
    elif k == "array":
        op.kind = K_ARRAY
        op.child = _compile(node.items, memo)
    elif k == "map":
        op.kind = K_MAP
        op.child = _compile(node.values, memo)
    elif k == "fixed":
        op.kind = K_FIXED
        op.size = node.size
    elif k == "union":
        op.kind = K_UNION
        op.children = [_compile(b, memo) for b in node.branches]
        for i, b in enumerate(node.branches):
            if b.kind == "null":
                op.null_index = i
        if op.null_index >= 0 and len(node.branches) == 2:
            op.other_index = 1 - op.null_index
    op.base = op.kind
    lt = node.logical
    if lt == "decimal":
        op.kind = K_DECIMAL
        op.precision, op.scale = node.precision, node.scale
        if k == "bytes":
            op.size = -1
    elif lt == "uuid":
        op.kind = K_UUID
    elif lt in _LOGICAL_KIND:
        op.kind = _LOGICAL_KIND[lt]
    return op


cdef object _bad(_Op op, object v, str why=None):
    msg = (f"field {_pathname(op.path)!r}: a value of type {type(v).__name__} does not fit "
           f"Avro type {op.tname}")
    if why:
        msg += f" ({why})"
    return EncodeError(msg)


cdef inline bint _is_int(object v):
    return isinstance(v, int) and not isinstance(v, bool)


cdef int64_t _as_long(_Op op, object v, int64_t lo, int64_t hi) except? -1:
    if not _is_int(v):
        raise _bad(op, v)
    if not (lo <= v <= hi):
        raise _bad(op, v, f"{v} is out of range")
    return v


cdef int64_t _micros_since_epoch(_Op op, object v, bint local) except? -1:
    if local:
        if v.tzinfo is not None:
            v = v.replace(tzinfo=None)
        d = v - _EPOCH
    elif v.tzinfo is not None:
        d = v - _EPOCH_UTC
    else:
        d = v - _EPOCH                       # a naive datetime is taken as UTC (as fastavro does)
    return (d.days * 86400 + d.seconds) * 1000000 + d.microseconds


cdef object _unscaled(_Op op, object v):
    """A Decimal as its unscaled integer at the schema's scale (checked against the precision)."""
    if not isinstance(v, _Decimal):
        raise _bad(op, v, "a decimal.Decimal is expected")
    sign, digits, exp = v.as_tuple()
    if not isinstance(exp, int):
        raise _bad(op, v, "NaN and Infinity have no Avro form")
    delta = exp + op.scale
    if delta < 0:
        raise _bad(op, v, f"it has more than {op.scale} decimal places")
    n = 0
    for d in digits:
        n = n * 10 + d
    n = n * 10 ** delta
    if n and len(str(n)) > op.precision:
        raise _bad(op, v, f"it has more than {op.precision} digits")
    return -n if sign else n


cdef int _write_decimal_obj(_Op op, object v, Buf* b) except -1:
    n = _unscaled(op, v)
    cdef Py_ssize_t size
    if n >= 0:
        size = (n.bit_length() + 8) // 8
    else:
        size = ((-n - 1).bit_length() + 8) // 8
    if op.size >= 0:
        if size > op.size:
            raise _bad(op, v, f"it does not fit {op.size} bytes")
        size = op.size
    data = n.to_bytes(size, "big", signed=True)
    if op.size >= 0:
        if w_raw(b, PyBytes_AS_STRING(data), size) < 0:
            raise MemoryError()
    elif w_lenbytes(b, PyBytes_AS_STRING(data), size) < 0:
        raise MemoryError()
    return 0


cdef bint _fits(_Op op, object v):
    """Whether ``v`` can be written as ``op`` (how a union picks its branch: the first that fits)."""
    cdef int k = op.kind
    if k == K_NULL:
        return v is None
    if k == K_BOOL:
        return isinstance(v, bool)
    if k == K_INT:
        return _is_int(v) and -0x80000000 <= v <= 0x7fffffff
    if k == K_LONG:
        return _is_int(v) and -0x8000000000000000 <= v <= 0x7fffffffffffffff
    if k == K_FLOAT or k == K_DOUBLE:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if k == K_BYTES:
        return isinstance(v, (bytes, bytearray, memoryview))
    if k == K_STRING:
        return isinstance(v, str)
    if k == K_UUID:
        return isinstance(v, (str, _UUID))
    if k == K_ENUM:
        return isinstance(v, str) and v in op.symbols
    if k == K_FIXED:
        return isinstance(v, (bytes, bytearray, memoryview)) and len(v) == op.size
    if k == K_ARRAY:
        return isinstance(v, (list, tuple))
    if k == K_MAP:
        return isinstance(v, _Mapping)
    if k == K_RECORD:
        if not isinstance(v, _Mapping):
            return False
        for name, hd in zip(op.names, op.has_default):
            if not hd and name not in v:
                return False
        for key in v:
            if key not in op.names:
                return False
        return True
    if k == K_DECIMAL:
        return isinstance(v, _Decimal)
    if k == K_DATE:
        return (isinstance(v, _date) and not isinstance(v, _datetime)) or _is_int(v)
    if k == K_TIME_MILLIS or k == K_TIME_MICROS:
        return isinstance(v, _time) or _is_int(v)
    if K_TS_MILLIS <= k <= K_LTS_NANOS:
        return isinstance(v, _datetime) or _is_int(v)
    return False


cdef int _write_obj(_Op op, object v, Buf* b) except -1:
    cdef int k = op.kind
    cdef Py_ssize_t n, i, count
    cdef const char* s
    cdef _Op child
    cdef PyObject* item
    cdef int64_t x
    cdef double d
    if k == K_STRING:
        if not isinstance(v, str):
            raise _bad(op, v)
        try:
            s = PyUnicode_AsUTF8AndSize(v, &n)
        except UnicodeError:
            raise _bad(op, v, "not encodable as UTF-8") from None
        if w_lenbytes(b, s, n) < 0:
            raise MemoryError()
    elif k == K_LONG:
        if w_long(b, _as_long(op, v, INT64_MIN, INT64_MAX)) < 0:
            raise MemoryError()
    elif k == K_INT:
        if w_long(b, _as_long(op, v, -0x80000000, 0x7fffffff)) < 0:
            raise MemoryError()
    elif k == K_RECORD:
        if type(v) is dict:
            for i in range(len(op.names)):
                item = PyDict_GetItemWithError(v, op.names[i])
                if item != NULL:
                    _write_obj(<_Op>op.children[i], <object>item, b)
                elif op.has_default[i]:
                    _write_default(<_Op>op.children[i], op.defaults[i], b)
                else:
                    raise _missing(op, i)
        elif isinstance(v, _Mapping):
            for i in range(len(op.names)):
                name = op.names[i]
                if name in v:
                    _write_obj(<_Op>op.children[i], v[name], b)
                elif op.has_default[i]:
                    _write_default(<_Op>op.children[i], op.defaults[i], b)
                else:
                    raise _missing(op, i)
        else:
            raise _bad(op, v, "a mapping of field names is expected")
    elif k == K_UNION:
        if v is None and op.null_index >= 0:
            if w_long(b, op.null_index) < 0:
                raise MemoryError()
        elif op.other_index >= 0:
            if w_long(b, op.other_index) < 0:
                raise MemoryError()
            _write_obj(<_Op>op.children[op.other_index], v, b)
        else:
            for i in range(len(op.children)):
                child = <_Op>op.children[i]
                if _fits(child, v):
                    if w_long(b, i) < 0:
                        raise MemoryError()
                    _write_obj(child, v, b)
                    return 0
            raise _bad(op, v, "no branch of the union takes it")
    elif k == K_DOUBLE:
        if isinstance(v, float):
            d = v
        elif _is_int(v):
            d = float(v)
        else:
            raise _bad(op, v)
        if w_double(b, d) < 0:
            raise MemoryError()
    elif k == K_FLOAT:
        if isinstance(v, float):
            d = v
        elif _is_int(v):
            d = float(v)
        else:
            raise _bad(op, v)
        if w_float(b, <float>d) < 0:
            raise MemoryError()
    elif k == K_BOOL:
        if v is True:
            x = 1
        elif v is False:
            x = 0
        else:
            raise _bad(op, v)
        if reserve(b, 1) < 0:
            raise MemoryError()
        b.data[b.len] = <char>x
        b.len += 1
    elif k == K_NULL:
        if v is not None:
            raise _bad(op, v)
    elif k == K_BYTES or k == K_FIXED:
        if isinstance(v, bytes):
            n = PyBytes_GET_SIZE(v)
            data = v
        elif isinstance(v, (bytearray, memoryview)):
            data = bytes(v)
            n = len(data)
        else:
            raise _bad(op, v)
        if k == K_FIXED:
            if n != op.size:
                raise _bad(op, v, f"{n} bytes, not {op.size}")
            if w_raw(b, PyBytes_AS_STRING(data), n) < 0:
                raise MemoryError()
        elif w_lenbytes(b, PyBytes_AS_STRING(data), n) < 0:
            raise MemoryError()
    elif k == K_ENUM:
        idx = op.symbols.get(v) if isinstance(v, str) else None
        if idx is None:
            if isinstance(v, str):
                raise EncodeError(f"field {_pathname(op.path)!r}: {v!r} is not a symbol of "
                                  f"Avro type {op.tname}")
            raise _bad(op, v)
        if w_long(b, idx) < 0:
            raise MemoryError()
    elif k == K_ARRAY:
        if not isinstance(v, (list, tuple)):
            raise _bad(op, v, "a list or tuple is expected")
        count = len(v)
        if count:
            if w_long(b, count) < 0:
                raise MemoryError()
            child = op.child
            for item_v in v:
                _write_obj(child, item_v, b)
        if w_long(b, 0) < 0:
            raise MemoryError()
    elif k == K_MAP:
        if not isinstance(v, _Mapping):
            raise _bad(op, v, "a mapping is expected")
        count = len(v)
        if count:
            if w_long(b, count) < 0:
                raise MemoryError()
            child = op.child
            for key, item_v in v.items():
                if not isinstance(key, str):
                    raise EncodeError(f"field {_pathname(op.path)!r}: a map key of type "
                                      f"{type(key).__name__} (Avro map keys are strings)")
                s = PyUnicode_AsUTF8AndSize(key, &n)
                if w_lenbytes(b, s, n) < 0:
                    raise MemoryError()
                _write_obj(child, item_v, b)
        if w_long(b, 0) < 0:
            raise MemoryError()
    elif k == K_DECIMAL:
        _write_decimal_obj(op, v, b)
    elif k == K_DATE:
        if isinstance(v, _date) and not isinstance(v, _datetime):
            x = v.toordinal() - _EPOCH_ORDINAL
        elif _is_int(v):
            x = _as_long(op, v, -0x80000000, 0x7fffffff)
        else:
            raise _bad(op, v)
        if w_long(b, x) < 0:
            raise MemoryError()
    elif k == K_TIME_MILLIS or k == K_TIME_MICROS:
        if isinstance(v, _time):
            x = ((v.hour * 60 + v.minute) * 60 + v.second) * 1000000 + v.microsecond
            if k == K_TIME_MILLIS:
                x //= 1000
        elif _is_int(v):
            x = _as_long(op, v, -0x80000000 if k == K_TIME_MILLIS else INT64_MIN,
                         0x7fffffff if k == K_TIME_MILLIS else 0x7fffffffffffffff)
        else:
            raise _bad(op, v)
        if w_long(b, x) < 0:
            raise MemoryError()
    elif K_TS_MILLIS <= k <= K_LTS_NANOS:
        if isinstance(v, _datetime):
            x = _micros_since_epoch(op, v, k >= K_LTS_MILLIS)
            if k == K_TS_MILLIS or k == K_LTS_MILLIS:
                x = x // 1000
            elif k == K_TS_NANOS or k == K_LTS_NANOS:
                x = x * 1000
        elif _is_int(v):
            x = _as_long(op, v, INT64_MIN, INT64_MAX)
        else:
            raise _bad(op, v)
        if w_long(b, x) < 0:
            raise MemoryError()
    elif k == K_UUID:
        if isinstance(v, _UUID):
            if op.base == K_FIXED:
                data = v.bytes
                if w_raw(b, PyBytes_AS_STRING(data), 16) < 0:
                    raise MemoryError()
                return 0
            v = str(v)
        if op.base == K_FIXED:
            if isinstance(v, str):
                try:
                    data = _UUID(v).bytes
                except ValueError:
                    raise _bad(op, v, "not a UUID") from None
                if w_raw(b, PyBytes_AS_STRING(data), 16) < 0:
                    raise MemoryError()
                return 0
            raise _bad(op, v)
        if not isinstance(v, str):
            raise _bad(op, v)
        s = PyUnicode_AsUTF8AndSize(v, &n)
        if w_lenbytes(b, s, n) < 0:
            raise MemoryError()
    else:
        raise _bad(op, v)
    return 0


cdef object _missing(_Op op, Py_ssize_t i):
    name = op.names[i]
    path = f"{op.path}.{name}" if op.path else name
    child = <_Op>op.children[i]
    return EncodeError(f"field {path!r}: missing, and Avro type {child.tname} has no default")


cdef int _write_default(_Op op, object d, Buf* b) except -1:
    """A field's default, given in the schema as JSON (bytes and fixed as a string of code
    points 0-255; a union's default is of its first branch)."""
    cdef int k = op.kind
    if k == K_UNION:
        if w_long(b, 0) < 0:
            raise MemoryError()
        return _write_default(<_Op>op.children[0], d, b)
    if op.base == K_BYTES or op.base == K_FIXED:
        if isinstance(d, str):
            d = d.encode("latin-1")
        if k == K_DECIMAL:
            if op.base == K_FIXED:
                return _write_obj_raw_fixed(op, d, b)
            if w_lenbytes(b, PyBytes_AS_STRING(d), len(d)) < 0:
                raise MemoryError()
            return 0
        if k == K_UUID:
            return _write_obj_raw_fixed(op, d, b)
    elif k == K_RECORD and isinstance(d, dict):
        for i in range(len(op.names)):
            if op.names[i] in d:
                _write_default(<_Op>op.children[i], d[op.names[i]], b)
            elif op.has_default[i]:
                _write_default(<_Op>op.children[i], op.defaults[i], b)
            else:
                raise _missing(op, i)
        return 0
    elif k == K_ARRAY and isinstance(d, list):
        if d:
            w_long(b, len(d))
            for x in d:
                _write_default(op.child, x, b)
        w_long(b, 0)
        return 0
    elif k == K_MAP and isinstance(d, dict):
        if d:
            w_long(b, len(d))
            for key, x in d.items():
                _write_obj_key(key, b)
                _write_default(op.child, x, b)
        w_long(b, 0)
        return 0
    elif k == K_FLOAT or k == K_DOUBLE:
        return _write_obj(op, float(d), b)
    elif K_DATE <= k <= K_LTS_NANOS and _is_int(d):
        return _write_obj(op, d, b)
    return _write_obj(op, d, b)


cdef int _write_obj_key(object key, Buf* b) except -1:
    cdef Py_ssize_t n
    cdef const char* s = PyUnicode_AsUTF8AndSize(key, &n)
    if w_lenbytes(b, s, n) < 0:
        raise MemoryError()
    return 0


cdef int _write_obj_raw_fixed(_Op op, object d, Buf* b) except -1:
    if len(d) != op.size:
        raise _bad(op, d, f"the default has {len(d)} bytes, not {op.size}")
    if w_raw(b, PyBytes_AS_STRING(d), len(d)) < 0:
        raise MemoryError()
    return 0


# ------------------------------------------------------------------------------------------------
# the Arrow path: plans (per Arrow type) and bound columns (per chunk)

cdef enum AKind:            # how a column's values are stored
    A_NULL = 0
    A_BOOL
    A_I8
    A_I16
    A_I32
    A_I64
    A_U8
    A_U16
    A_U32
    A_U64
    A_F32
    A_F64
    A_STR               # 32-bit offsets (string, binary)
    A_LSTR              # 64-bit offsets
    A_FIXED             # fixed_size_binary
    A_DEC128
    A_LIST
    A_LLIST
    A_FLIST
    A_MAP
    A_STRUCT
    A_DICT


cdef enum WOp:              # what is written
    W_NULL = 0
    W_BOOL
    W_LONG              # int, long and the integer logical types (with conversion)
    W_FLOAT
    W_DOUBLE
    W_BYTES             # bytes and string
    W_FIXED
    W_ENUM
    W_DECIMAL
    W_ARRAY
    W_MAP
    W_RECORD
    W_CONST             # a record field absent from the Arrow struct: its default's bytes
    W_UUID_FIXED16      # fixed_size_binary(16) as a uuid string
    W_STRING_JSON       # (JSON encoder)


cdef enum Err:
    E_OK = 0
    E_NOMEM
    E_NULL
    E_RANGE
    E_ENUM
    E_FIXED_SIZE
    E_DECIMAL
    E_OVERFLOW
    E_UTF8
    E_NAN
    E_DATE


cdef struct Col:
    int w                   # WOp
    int a                   # AKind
    int in_union            # 1: a ["null", T] union: null_idx / val_idx are written first
    int64_t null_idx
    int64_t val_idx
    const uint8_t* valid
    const uint8_t* data
    const void* offs
    int64_t offset
    int64_t width           # fixed size, fixed list size, enum symbol count
    int64_t mul             # unit conversion: value * mul // div
    int64_t div
    int64_t lo              # range of an Avro int
    int64_t hi
    int fixed_size          # decimal: -1 bytes, else the fixed's size; fixed: its size
    int check_prec          # decimal: check |v| < 10**precision
    int precision
    int32_t* enum_map       # dictionary index -> symbol index (-1: none)
    int64_t enum_map_len
    const char* syms        # plain string enum: the symbols, NUL-separated
    const int64_t* sym_offs
    int64_t nchildren
    Col** children
    Col* dict_values
    int path_id
    const char* const_data
    int64_t const_len


cdef class _APlan:
    """How one Arrow type is written as one Avro type (or as JSON)."""
    cdef int w
    cdef int a
    cdef int in_union
    cdef int64_t null_idx, val_idx
    cdef int64_t width, mul, div, lo, hi
    cdef int fixed_size, check_prec, precision
    cdef list children          # _APlan per written child (record fields in schema order)
    cdef list child_index       # record: Arrow child index per schema field (-1: const)
    cdef _APlan dict_values     # dictionary: the values' plan
    cdef object enum_symbols    # dict symbol -> index
    cdef bytes syms
    cdef bytes sym_offs
    cdef bytes const
    cdef str path
    cdef str avro
    cdef object arrow_type
    cdef int path_id

    def __cinit__(self):
        self.children = []
        self.child_index = []
        self.mul = 1
        self.div = 1
        self.fixed_size = -1


cdef object _pa = None
cdef object _pc = None


cdef _load_pa():
    global _pa, _pc
    if _pa is None:
        import pyarrow
        import pyarrow.compute
        _pa = pyarrow
        _pc = pyarrow.compute
    return _pa


_INT_KIND = None


cdef int _akind_int(t):
    pa = _pa
    ty = pa.types
    if ty.is_int8(t): return A_I8
    if ty.is_int16(t): return A_I16
    if ty.is_int32(t): return A_I32
    if ty.is_int64(t): return A_I64
    if ty.is_uint8(t): return A_U8
    if ty.is_uint16(t): return A_U16
    if ty.is_uint32(t): return A_U32
    if ty.is_uint64(t): return A_U64
    return -1


cdef object _normalized_type(t):
    """The Arrow type the encoders read: view types and float16 cast to their plain forms."""
    pa = _pa
    ty = pa.types
    s = str(t)
    if s == "string_view":
        return pa.string()
    if s == "binary_view":
        return pa.binary()
    if ty.is_float16(t):
        return pa.float32()
    if ty.is_struct(t):
        return pa.struct([f.with_type(_normalized_type(f.type)) for f in t])
    if ty.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_normalized_type(t.value_type)))
    if ty.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_normalized_type(t.value_type)), t.list_size)
    if ty.is_map(t):
        return pa.map_(t.key_field.with_type(_normalized_type(t.key_type)),
                       t.item_field.with_type(_normalized_type(t.item_type)))
    if ty.is_list(t):
        return pa.list_(t.value_field.with_type(_normalized_type(t.value_type)))
    if s.startswith("list_view") or s.startswith("large_list_view"):
        return pa.large_list(t.value_field.with_type(_normalized_type(t.value_type)))
    if ty.is_dictionary(t):
        return pa.dictionary(t.index_type, _normalized_type(t.value_type))
    return t


cdef object _mismatch(str path, object t, object node, str why=None):
    msg = (f"field {_pathname(path)!r}: Arrow type {t} does not fit Avro type "
           f"{node.type_name()}")
    if why:
        msg += f" ({why})"
    return SchemaMismatchError(msg)


_UNIT_NS = {"s": 1000000000, "ms": 1000000, "us": 1000, "ns": 1}
_LOGICAL_NS = {"timestamp-millis": 1000000, "timestamp-micros": 1000, "timestamp-nanos": 1,
               "local-timestamp-millis": 1000000, "local-timestamp-micros": 1000,
               "local-timestamp-nanos": 1, "time-millis": 1000000, "time-micros": 1000}


cdef void _unit(_APlan p, int64_t from_ns, int64_t to_ns):
    if from_ns >= to_ns:
        p.mul = from_ns // to_ns
        p.div = 1
    else:
        p.mul = 1
        p.div = to_ns // from_ns


cdef _APlan _plan(object node, object t, str path, object encoder):
    """The plan writing Arrow type ``t`` as Avro ``node``, or SchemaMismatchError."""
    pa = _pa
    ty = pa.types
    cdef _APlan p = _APlan()
    cdef _APlan c
    p.path = path
    p.arrow_type = t
    p.avro = node.type_name()
    k = node.kind
    if k == "union":
        nn = [i for i, b in enumerate(node.branches) if b.kind != "null"]
        ni = [i for i, b in enumerate(node.branches) if b.kind == "null"]
        if ty.is_null(t) and ni:
            p.w = W_NULL
            p.a = A_NULL
            p.in_union = 1
            p.null_idx = ni[0]
            p.val_idx = ni[0]
            return p
        if len(nn) != 1:
            raise _mismatch(path, t, node, "an Arrow column takes a union of null and one "
                                           "other type only")
        inner = _plan(node.branches[nn[0]], t, path, encoder)
        inner.in_union = 1
        inner.null_idx = ni[0] if ni else -1
        inner.val_idx = nn[0]
        inner.avro = node.type_name()
        return inner
    if ty.is_dictionary(t):
        vt = t.value_type
        if not (ty.is_string(vt) or ty.is_large_string(vt)):
            raise _mismatch(path, t, node, "only dictionaries of strings are read")
        if k not in ("string", "enum") or (node.logical == "uuid"):
            raise _mismatch(path, t, node)
        p.a = A_DICT
        p.w = W_ENUM if k == "enum" else W_BYTES
        p.width = _akind_int(t.index_type)
        p.dict_values = _plan(node if k == "string" else _string_node(), vt, path, encoder)
        if k == "enum":
            p.enum_symbols = {s: i for i, s in enumerate(node.symbols)}
        return p
    lt = node.logical
    if ty.is_null(t):
        if k == "null":
            p.w = W_NULL
            p.a = A_NULL
            return p
        p.w = W_NULL          # every value is null: an EncodeError at the first row
        p.a = A_NULL
        p.fixed_size = -2
        return p
    if k == "null":
        raise _mismatch(path, t, node)
    if k == "boolean":
        if not ty.is_boolean(t):
            raise _mismatch(path, t, node)
        p.w, p.a = W_BOOL, A_BOOL
        return p
    if k in ("int", "long"):
        p.w = W_LONG
        p.lo = -0x80000000 if k == "int" else -0x7fffffffffffffff - 1
        p.hi = 0x7fffffff if k == "int" else 0x7fffffffffffffff
        if lt == "date":
            if ty.is_date32(t):
                p.a = A_I32
            elif ty.is_date64(t):
                p.a = A_I64
                p.div = 86400000
            elif _akind_int(t) >= 0 and not ty.is_uint64(t):
                p.a = _akind_int(t)
            else:
                raise _mismatch(path, t, node)
            return p
        if lt in ("time-millis", "time-micros"):
            if ty.is_time32(t) or ty.is_time64(t):
                p.a = A_I32 if ty.is_time32(t) else A_I64
                _unit(p, _UNIT_NS[t.unit], _LOGICAL_NS[lt])
            elif _akind_int(t) >= 0 and not ty.is_uint64(t):
                p.a = _akind_int(t)
            else:
                raise _mismatch(path, t, node)
            return p
        if lt is not None and "timestamp" in lt:
            if ty.is_timestamp(t):
                p.a = A_I64
                _unit(p, _UNIT_NS[t.unit], _LOGICAL_NS[lt])
            elif _akind_int(t) >= 0 and not ty.is_uint64(t):
                p.a = _akind_int(t)
            else:
                raise _mismatch(path, t, node)
            return p
        ak = _akind_int(t)
        if ak < 0 or ak == A_U64:
            raise _mismatch(path, t, node, "uint64 has no Avro type; cast it to int64"
                            if ak == A_U64 else None)
        p.a = ak
        return p
    if k in ("float", "double"):
        if ty.is_float32(t):
            p.a = A_F32
        elif ty.is_float64(t):
            p.a = A_F64
        elif _akind_int(t) >= 0:
            p.a = _akind_int(t)
        else:
            raise _mismatch(path, t, node)
        p.w = W_FLOAT if k == "float" else W_DOUBLE
        return p
    if lt == "decimal":
        if not ty.is_decimal(t) or t.bit_width != 128:
            raise _mismatch(path, t, node, "a decimal128 column is expected"
                            if ty.is_decimal(t) else None)
        if t.scale != node.scale:
            raise _mismatch(path, t, node, f"scale {t.scale} is not {node.scale}")
        p.w, p.a = W_DECIMAL, A_DEC128
        p.fixed_size = node.size if k == "fixed" else -1
        p.precision = node.precision
        p.check_prec = 1 if t.precision > node.precision else 0
        return p
    if k == "string":
        if ty.is_string(t) or (lt != "uuid" and ty.is_binary(t)):
            p.a = A_STR
        elif ty.is_large_string(t) or (lt != "uuid" and ty.is_large_binary(t)):
            p.a = A_LSTR
        elif lt == "uuid" and ty.is_fixed_size_binary(t) and t.byte_width == 16:
            p.w, p.a, p.width = W_UUID_FIXED16, A_FIXED, 16
            return p
        else:
            raise _mismatch(path, t, node)
        p.w = W_BYTES
        return p
    if k == "bytes":
        if ty.is_binary(t):
            p.a = A_STR
        elif ty.is_large_binary(t):
            p.a = A_LSTR
        elif ty.is_fixed_size_binary(t) and not ty.is_decimal(t):
            p.a = A_FIXED
            p.width = t.byte_width
            p.fixed_size = -1
        else:
            raise _mismatch(path, t, node)
        p.w = W_BYTES
        return p
    if k == "fixed":
        p.w = W_FIXED
        p.fixed_size = node.size
        if ty.is_fixed_size_binary(t) and not ty.is_decimal(t):
            if t.byte_width != node.size:
                raise _mismatch(path, t, node, f"{t.byte_width} bytes, not {node.size}")
            p.a = A_FIXED
            p.width = t.byte_width
        elif ty.is_binary(t):
            p.a = A_STR
        elif ty.is_large_binary(t):
            p.a = A_LSTR
        else:
            raise _mismatch(path, t, node)
        return p
    if k == "enum":
        if ty.is_string(t):
            p.a = A_STR
        elif ty.is_large_string(t):
            p.a = A_LSTR
        else:
            raise _mismatch(path, t, node)
        p.w = W_ENUM
        enc = [s.encode() for s in node.symbols]
        offs = [0]
        pos = 0
        for s in enc:
            pos += len(s)
            offs.append(pos)
        p.syms = b"".join(enc)
        import array as _array
        p.sym_offs = _array.array("q", offs).tobytes()
        p.width = len(enc)
        return p
    if k == "array":
        if ty.is_list(t):
            p.a = A_LIST
        elif ty.is_large_list(t):
            p.a = A_LLIST
        elif ty.is_fixed_size_list(t):
            p.a = A_FLIST
            p.width = t.list_size
        else:
            raise _mismatch(path, t, node)
        p.w = W_ARRAY
        p.children = [_plan_field(node.items, t.value_field, path + "[]", encoder)]
        return p
    if k == "map":
        if not ty.is_map(t):
            raise _mismatch(path, t, node)
        kt = t.key_type
        if not (ty.is_string(kt) or ty.is_large_string(kt)):
            raise _mismatch(path, t, node, "map keys must be strings")
        p.w, p.a = W_MAP, A_MAP
        kp = _plan(_string_node(), kt, path + "{}", encoder)
        p.children = [kp, _plan_field(node.values, t.item_field, path + "{}", encoder)]
        return p
    if k == "record":
        if not ty.is_struct(t):
            raise _mismatch(path, t, node)
        p.w, p.a = W_RECORD, A_STRUCT
        index = {t.field(i).name: i for i in range(t.num_fields)}
        for f in node.fields:
            fp = f"{path}.{f.name}" if path else f.name
            if f.name in index:
                i = index[f.name]
                p.child_index.append(i)
                p.children.append(_plan_field(f.type, t.field(i), fp, encoder))
            elif f.has_default:
                c = _APlan()
                c.w = W_CONST
                c.path = fp
                c.const = encoder._default_bytes(f)
                p.child_index.append(-1)
                p.children.append(c)
            else:
                raise SchemaMismatchError(f"field {fp!r}: missing from the Arrow type, and Avro "
                                          f"type {f.type.type_name()} has no default")
        return p
    raise _mismatch(path, t, node)


cdef _APlan _plan_field(object node, object field, str path, object encoder):
    return _plan(node, field.type, path, encoder)


_STRING_NODE = None


cdef object _string_node():
    global _STRING_NODE
    if _STRING_NODE is None:
        _STRING_NODE = AvroNode("string")
    return _STRING_NODE


cdef class _Binding:
    """The Col structs of one chunk (freed with it), and what keeps its memory alive."""
    cdef Col* cols
    cdef Py_ssize_t n
    cdef Py_ssize_t used
    cdef list keep
    cdef list paths

    def __cinit__(self):
        self.cols = NULL
        self.keep = []
        self.paths = []

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.cols != NULL:
            for i in range(self.used):
                if self.cols[i].children != NULL:
                    free(self.cols[i].children)
                if self.cols[i].enum_map != NULL:
                    free(self.cols[i].enum_map)
            free(self.cols)


cdef Py_ssize_t _count(_APlan p):
    cdef Py_ssize_t n = 1
    for c in p.children:
        n += _count(<_APlan>c)
    if p.dict_values is not None:
        n += _count(p.dict_values)
    return n


cdef Col* _bind(_Binding bd, _APlan p, ArrowArray* a) except NULL:
    cdef Col* c = &bd.cols[bd.used]
    bd.used += 1
    memset(c, 0, sizeof(Col))
    c.w = p.w
    c.a = p.a
    c.in_union = p.in_union
    c.null_idx = p.null_idx
    c.val_idx = p.val_idx
    c.width = p.width
    c.mul = p.mul
    c.div = p.div
    c.lo = p.lo
    c.hi = p.hi
    c.fixed_size = p.fixed_size
    c.check_prec = p.check_prec
    c.precision = p.precision
    c.path_id = len(bd.paths)
    bd.paths.append(p)
    if p.const is not None:             # Avro: a default's bytes; JSON: a member's key
        c.const_data = PyBytes_AS_STRING(p.const)
        c.const_len = len(p.const)
    if p.w == W_CONST:
        return c
    if p.syms is not None:
        c.syms = PyBytes_AS_STRING(p.syms)
        c.sym_offs = <const int64_t*>PyBytes_AS_STRING(p.sym_offs)
    c.offset = a.offset
    if p.a == A_NULL:
        return c
    c.valid = <const uint8_t*>a.buffers[0] if a.n_buffers > 0 else NULL
    if a.null_count == 0:
        c.valid = NULL
    if p.a == A_STR or p.a == A_LSTR:
        c.offs = a.buffers[1]
        c.data = <const uint8_t*>a.buffers[2]
    elif p.a in (A_LIST, A_LLIST, A_MAP):
        c.offs = a.buffers[1]
    elif p.a != A_STRUCT and p.a != A_FLIST and p.a != A_DICT:
        c.data = <const uint8_t*>a.buffers[1]
    if p.a == A_DICT:
        c.data = <const uint8_t*>a.buffers[1]
        c.dict_values = _bind(bd, p.dict_values, a.dictionary)
        if p.enum_symbols is not None:
            _bind_enum_map(c, c.dict_values, a.dictionary, p.enum_symbols)
        return c
    cdef Py_ssize_t i, n = len(p.children)
    cdef int ci
    if n:
        c.children = <Col**>calloc(n, sizeof(Col*))
        if c.children == NULL:
            raise MemoryError()
        c.nchildren = n
    if p.a == A_STRUCT:
        for i in range(n):
            ci = p.child_index[i]
            c.children[i] = _bind(bd, <_APlan>p.children[i], a.children[ci] if ci >= 0 else NULL)
    elif p.a == A_MAP:
        entries = a.children[0]
        # the entries struct's own offset and validity apply between the map and its keys/values
        c.width = entries.offset
        c.children[0] = _bind(bd, <_APlan>p.children[0], entries.children[0])
        c.children[1] = _bind(bd, <_APlan>p.children[1], entries.children[1])
    elif n:
        c.children[0] = _bind(bd, <_APlan>p.children[0], a.children[0])
    return c


cdef int _bind_enum_map(Col* c, Col* vals, ArrowArray* d, dict symbols) except -1:
    cdef int64_t n = d.length, i, s, e
    c.enum_map = <int32_t*>malloc(sizeof(int32_t) * (n if n > 0 else 1))
    if c.enum_map == NULL:
        raise MemoryError()
    c.enum_map_len = n
    for i in range(n):
        if vals.valid != NULL and not (vals.valid[(i + vals.offset) >> 3] >> ((i + vals.offset) & 7)) & 1:
            c.enum_map[i] = -1
            continue
        if vals.a == A_STR:
            s = (<const int32_t*>vals.offs)[vals.offset + i]
            e = (<const int32_t*>vals.offs)[vals.offset + i + 1]
        else:
            s = (<const int64_t*>vals.offs)[vals.offset + i]
            e = (<const int64_t*>vals.offs)[vals.offset + i + 1]
        sym = PyUnicode_DecodeUTF8(<const char*>vals.data + s, e - s, "replace")
        c.enum_map[i] = symbols.get(sym, -1)
    return 0


cdef struct ECtx:
    int code
    int64_t row
    int path_id
    int64_t ival


cdef inline bint _is_null(Col* c, int64_t i) noexcept nogil:
    cdef int64_t j
    if c.a == A_NULL:
        return True
    if c.valid == NULL:
        return False
    j = i + c.offset
    return not ((c.valid[j >> 3] >> (j & 7)) & 1)


cdef inline int _fail(ECtx* e, Col* c, int code, int64_t ival) noexcept nogil:
    e.code = code
    e.path_id = c.path_id
    e.ival = ival
    return -1


cdef inline int64_t _get_int(Col* c, int64_t j) noexcept nogil:
    cdef int a = c.a
    if a == A_I64:
        return (<const int64_t*>c.data)[j]
    if a == A_I32:
        return (<const int32_t*>c.data)[j]
    if a == A_I16:
        return (<const int16_t*>c.data)[j]
    if a == A_I8:
        return (<const int8_t*>c.data)[j]
    if a == A_U8:
        return (<const uint8_t*>c.data)[j]
    if a == A_U16:
        return (<const uint16_t*>c.data)[j]
    if a == A_U32:
        return (<const uint32_t*>c.data)[j]
    return <int64_t>(<const uint64_t*>c.data)[j]


cdef inline void _span(Col* c, int64_t j, int64_t* start, int64_t* end) noexcept nogil:
    if c.a == A_STR or c.a == A_LIST or c.a == A_MAP:
        start[0] = (<const int32_t*>c.offs)[j]
        end[0] = (<const int32_t*>c.offs)[j + 1]
    else:
        start[0] = (<const int64_t*>c.offs)[j]
        end[0] = (<const int64_t*>c.offs)[j + 1]


cdef int _write_col(Col* c, int64_t i, Buf* b, ECtx* e) noexcept nogil:
    """Row ``i`` (a logical index: the array's offset is added here) of column ``c``."""
    cdef int w = c.w
    cdef int64_t j, s, t, x, q, n, k
    cdef double d
    cdef int r
    cdef Col* ch
    if w == W_CONST:
        return -1 if w_raw(b, c.const_data, c.const_len) < 0 else 0
    if _is_null(c, i):
        if c.in_union and c.null_idx >= 0:
            return -1 if w_long(b, c.null_idx) < 0 else 0
        if w == W_NULL and c.fixed_size != -2:
            return 0
        return _fail(e, c, E_NULL, 0)
    if c.in_union:
        if w_long(b, c.val_idx) < 0:
            return _fail(e, c, E_NOMEM, 0)
    j = i + c.offset
    if w == W_BYTES:
        if c.a == A_DICT:
            k = _get_int_kind(c, j)
            return _write_col(c.dict_values, k, b, e)
        if c.a == A_FIXED:
            if w_lenbytes(b, c.data + j * c.width, c.width) < 0:
                return _fail(e, c, E_NOMEM, 0)
            return 0
        _span(c, j, &s, &t)
        if w_lenbytes(b, c.data + s, t - s) < 0:
            return _fail(e, c, E_NOMEM, 0)
        return 0
    if w == W_LONG:
        x = _get_int(c, j)
        if c.div != 1:
            q = x // c.div
            if (x % c.div) != 0 and x < 0:
                q -= 1                     # floor: an instant before 1970 stays before
            x = q
        elif c.mul != 1:
            if fk_mul_overflow(x, c.mul, &x):
                return _fail(e, c, E_OVERFLOW, _get_int(c, j))
        if x < c.lo or x > c.hi:
            return _fail(e, c, E_RANGE, x)
        if w_long(b, x) < 0:
            return _fail(e, c, E_NOMEM, 0)
        return 0
    if w == W_DOUBLE or w == W_FLOAT:
        if c.a == A_F64:
            d = (<const double*>c.data)[j]
        elif c.a == A_F32:
            d = (<const float*>c.data)[j]
        else:
            d = <double>_get_int(c, j)
        if w == W_DOUBLE:
            r = w_double(b, d)
        else:
            r = w_float(b, <float>d)
        return _fail(e, c, E_NOMEM, 0) if r < 0 else 0
    if w == W_BOOL:
        if reserve(b, 1) < 0:
            return _fail(e, c, E_NOMEM, 0)
        b.data[b.len] = <char>((c.data[j >> 3] >> (j & 7)) & 1)
        b.len += 1
        return 0
    if w == W_RECORD:
        for k in range(c.nchildren):
            if _write_col(c.children[k], j, b, e) < 0:
                return -1
        return 0
    if w == W_ARRAY:
        ch = c.children[0]
        if c.a == A_FLIST:
            s = j * c.width
            t = s + c.width
        else:
            _span(c, j, &s, &t)
        n = t - s
        if n:
            if w_long(b, n) < 0:
                return _fail(e, c, E_NOMEM, 0)
            for k in range(s, t):
                if _write_col(ch, k, b, e) < 0:
                    return -1
        if w_long(b, 0) < 0:
            return _fail(e, c, E_NOMEM, 0)
        return 0
    if w == W_MAP:
        _span(c, j, &s, &t)
        n = t - s
        if n:
            if w_long(b, n) < 0:
                return _fail(e, c, E_NOMEM, 0)
            for k in range(s + c.width, t + c.width):
                if _write_col(c.children[0], k, b, e) < 0:
                    return -1
                if _write_col(c.children[1], k, b, e) < 0:
                    return -1
        if w_long(b, 0) < 0:
            return _fail(e, c, E_NOMEM, 0)
        return 0
    if w == W_ENUM:
        if c.a == A_DICT:
            k = _get_int_kind(c, j)
            if k < 0 or k >= c.enum_map_len or c.enum_map[k] < 0:
                return _fail(e, c, E_ENUM, k)
            return -1 if w_long(b, c.enum_map[k]) < 0 else 0
        _span(c, j, &s, &t)
        for k in range(c.width):
            if (c.sym_offs[k + 1] - c.sym_offs[k] == t - s and
                    memcmp(c.syms + c.sym_offs[k], c.data + s, t - s) == 0):
                return -1 if w_long(b, k) < 0 else 0
        return _fail(e, c, E_ENUM, j)
    if w == W_FIXED:
        if c.a == A_FIXED:
            return -1 if w_raw(b, c.data + j * c.width, c.width) < 0 else 0
        _span(c, j, &s, &t)
        if t - s != c.fixed_size:
            return _fail(e, c, E_FIXED_SIZE, t - s)
        return -1 if w_raw(b, c.data + s, t - s) < 0 else 0
    if w == W_DECIMAL:
        if c.check_prec and _dec_too_wide(c.data + 16 * j, c.precision):
            return _fail(e, c, E_DECIMAL, 0)
        r = w_decimal(b, c.data + 16 * j, c.fixed_size)
        if r == -2:
            return _fail(e, c, E_DECIMAL, 0)
        return _fail(e, c, E_NOMEM, 0) if r < 0 else 0
    if w == W_UUID_FIXED16:
        return -1 if _w_uuid(b, c.data + 16 * j) < 0 else 0
    if w == W_NULL:
        return 0
    return _fail(e, c, E_NULL, 0)


cdef inline int64_t _get_int_kind(Col* c, int64_t j) noexcept nogil:
    """A dictionary index (``c.width`` holds the index type's AKind)."""
    cdef int a = <int>c.width
    if a == A_I32:
        return (<const int32_t*>c.data)[j]
    if a == A_I8:
        return (<const int8_t*>c.data)[j]
    if a == A_I16:
        return (<const int16_t*>c.data)[j]
    if a == A_I64:
        return (<const int64_t*>c.data)[j]
    if a == A_U8:
        return (<const uint8_t*>c.data)[j]
    if a == A_U16:
        return (<const uint16_t*>c.data)[j]
    if a == A_U32:
        return (<const uint32_t*>c.data)[j]
    return <int64_t>(<const uint64_t*>c.data)[j]


cdef bint _dec_too_wide(const uint8_t* le16, int precision) noexcept nogil:
    cdef fk_i128 v
    memcpy(&v, le16, 16)
    if v < 0:
        v = -v
    cdef fk_i128 lim = 1
    cdef int i
    for i in range(precision):
        lim *= 10
    return v >= lim


cdef int _w_uuid(Buf* b, const uint8_t* p) noexcept nogil:
    cdef const char* hexd = b"0123456789abcdef"
    cdef int i
    if reserve(b, 37) < 0:
        return -1
    put_long(b, 36)
    for i in range(16):
        if i == 4 or i == 6 or i == 8 or i == 10:
            b.data[b.len] = b'-'
            b.len += 1
        b.data[b.len] = hexd[p[i] >> 4]
        b.data[b.len + 1] = hexd[p[i] & 15]
        b.len += 2
    return 0


cdef int _encode_rows(Col* root, int64_t length, const char* hdr, Py_ssize_t hlen, Buf* out,
                      int64_t* offsets, uint8_t* valid, int64_t base_row, int nullable_rows,
                      int json, ECtx* e) noexcept nogil:
    """Every row of one chunk: header + datum, its end in ``offsets``; a null row (a null struct
    or value at the top) is a null entry."""
    cdef int64_t i
    for i in range(length):
        if nullable_rows and _is_null(root, i):
            offsets[i] = out.len
            continue
        valid[(base_row + i) >> 3] |= <uint8_t>(1 << ((base_row + i) & 7))
        if w_raw(out, hdr, hlen) < 0:
            e.code = E_NOMEM
            e.row = base_row + i
            return -1
        if (_write_json(root, i, out, e) if json else _write_col(root, i, out, e)) < 0:
            if e.code == E_OK:
                e.code = E_NOMEM
            e.row = base_row + i
            return -1
        offsets[i] = out.len
    return 0


_ERR_TEXT = {
    E_NULL: "a null, and the Avro type {avro} takes none",
    E_RANGE: "{ival} is out of the range of Avro type {avro}",
    E_ENUM: "a value that is not a symbol of Avro type {avro}",
    E_FIXED_SIZE: "a value of {ival} bytes for Avro type {avro}",
    E_DECIMAL: "a decimal that does not fit Avro type {avro}",
    E_OVERFLOW: "{ival} overflows a 64-bit value when converted to Avro type {avro}",
    E_NAN: "NaN or Infinity, which JSON cannot represent",
    E_DATE: "a date or time outside the years 0001-9999, which RFC 3339 cannot write",
    E_UTF8: "text that is not valid UTF-8",
}


cdef object _error_from(ECtx* e, list paths, str prefix=None):
    if e.code == E_NOMEM:
        return MemoryError()
    p = <_APlan>paths[e.path_id]
    text = _ERR_TEXT.get(e.code, "an invalid value").format(avro=p.avro, ival=e.ival)
    if p.avro is None:                   # the JSON encoder
        return EncodeError(f"row {e.row}, field {_pathname(p.path)!r}: {text} "
                           f"(Arrow type {p.arrow_type})")
    return EncodeError(f"row {e.row}, field {_pathname(p.path)!r}: {text} "
                       f"(Arrow type {p.arrow_type})")


# ------------------------------------------------------------------------------------------------
# chunks of the input

cdef list _chunks(object data):
    """``data`` as a list of Arrow arrays (a RecordBatch as its struct array)."""
    pa = _load_pa()
    if isinstance(data, pa.Table):
        return [pa.StructArray.from_arrays(b.columns, fields=list(b.schema)) if b.num_columns
                else pa.array([{}] * b.num_rows, pa.struct([])) for b in data.to_batches()] \
            if data.num_rows else [pa.array([], pa.struct(list(data.schema)))]
    if isinstance(data, pa.RecordBatch):
        return [pa.StructArray.from_arrays(data.columns, fields=list(data.schema))]
    if isinstance(data, pa.ChunkedArray):
        return list(data.chunks) if data.num_chunks else [pa.array([], data.type)]
    if isinstance(data, pa.Array):
        return [data]
    if hasattr(data, "__arrow_c_stream__"):
        return _chunks(pa.table(data))
    if hasattr(data, "__arrow_c_array__"):
        return [pa.array(data)]
    raise TypeError(f"encode_arrow takes a pyarrow Table, RecordBatch, StructArray, ChunkedArray "
                    f"or Array, or an object with __arrow_c_stream__/__arrow_c_array__, not "
                    f"{type(data).__name__}")


cdef object _arrow_type_of(object data):
    pa = _pa
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return pa.struct(list(data.schema))
    return data.type


cdef object _run(object encoder_plan_of, object data, bytes header, int json=0):
    """Encode every chunk of ``data`` with the plan for its type; a BinaryArray (or a
    LargeBinaryArray past 2**31-1 bytes)."""
    pa = _load_pa()
    chunks = _chunks(data)
    t = chunks[0].type if chunks else None
    nt = _normalized_type(t)
    if nt != t:
        chunks = [c.cast(nt) for c in chunks]
    cdef _APlan plan = encoder_plan_of(nt)
    cdef int64_t total = 0
    for ch in chunks:
        total += len(ch)
    cdef Buf out
    out.data = NULL
    out.len = 0
    out.cap = 0
    cdef int64_t* offsets = <int64_t*>malloc(sizeof(int64_t) * (total + 1))
    cdef uint8_t* valid = <uint8_t*>calloc((total + 8) // 8 + 1, 1)
    cdef ECtx e
    cdef _Binding bd
    cdef ArrowArray* arr
    cdef int64_t base = 0, length
    cdef int rc = 0
    cdef const char* hdr = PyBytes_AS_STRING(header)
    cdef Py_ssize_t hlen = PyBytes_GET_SIZE(header)
    cdef int nullable_rows = 1
    if offsets == NULL or valid == NULL:
        free(offsets)
        free(valid)
        raise MemoryError()
    try:
        offsets[0] = 0
        if buf_grow(&out, total * (hlen + 16) + 64) < 0:
            raise MemoryError()
        for ch in chunks:
            length = len(ch)
            if length == 0:
                continue
            caps = ch.__arrow_c_array__()
            arr = <ArrowArray*>PyCapsule_GetPointer(caps[1], "arrow_array")
            bd = _Binding()
            bd.n = _count(plan)
            bd.cols = <Col*>calloc(bd.n, sizeof(Col))
            if bd.cols == NULL:
                raise MemoryError()
            root = _bind(bd, plan, arr)
            memset(&e, 0, sizeof(ECtx))
            with nogil:
                rc = _encode_rows(root, length, hdr, hlen, &out, offsets + base + 1, valid,
                                  base, nullable_rows, json, &e)
            if rc < 0:
                raise _error_from(&e, bd.paths)
            base += length
            del caps
        nulls = 0
        for i in range(total):
            if not (valid[i >> 3] >> (i & 7)) & 1:
                nulls += 1
        large = out.len > 0x7fffffff
        data_buf = pa.py_buffer(PyBytes_FromStringAndSize(out.data, out.len))
        if large:
            off_buf = pa.py_buffer(PyBytes_FromStringAndSize(<char*>offsets, (total + 1) * 8))
        else:
            off_bytes = PyBytes_FromStringAndSize(NULL, (total + 1) * 4)
            _narrow(offsets, <int32_t*>PyBytes_AS_STRING(off_bytes), total + 1)
            off_buf = pa.py_buffer(off_bytes)
        valid_buf = (pa.py_buffer(PyBytes_FromStringAndSize(<char*>valid, (total + 7) // 8))
                     if nulls else None)
        return pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), total,
                                     [valid_buf, off_buf, data_buf], null_count=nulls)
    finally:
        free(out.data)
        free(offsets)
        free(valid)


cdef void _narrow(const int64_t* src, int32_t* dst, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        dst[i] = <int32_t>src[i]


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


# ------------------------------------------------------------------------------------------------
# JSON text from Arrow columns

cdef enum JOp:
    J_NULL = 100
    J_BOOL
    J_INT
    J_UINT64
    J_DOUBLE
    J_DECIMAL
    J_STRING
    J_BASE64
    J_DATE
    J_TS
    J_TIME
    J_LIST
    J_MAP
    J_STRUCT
    J_DICT


cdef _APlan _jplan(object t, str path):
    """The plan writing Arrow type ``t`` as JSON (the rules in JsonEncoder's docstring)."""
    pa = _pa
    ty = pa.types
    cdef _APlan p = _APlan()
    p.path = path
    p.arrow_type = t
    p.avro = None
    if ty.is_null(t):
        p.w, p.a = J_NULL, A_NULL
    elif ty.is_boolean(t):
        p.w, p.a = J_BOOL, A_BOOL
    elif ty.is_uint64(t):
        p.w, p.a = J_UINT64, A_U64
    elif _akind_int(t) >= 0:
        p.w, p.a = J_INT, _akind_int(t)
    elif ty.is_float32(t) or ty.is_float64(t):
        p.w, p.a = J_DOUBLE, (A_F32 if ty.is_float32(t) else A_F64)
    elif ty.is_decimal(t):
        if t.bit_width != 128:
            raise SchemaMismatchError(f"field {_pathname(path)!r}: Arrow type {t} is not written "
                                      f"as JSON (decimal128 is)")
        p.w, p.a = J_DECIMAL, A_DEC128
        p.precision = t.scale
    elif ty.is_string(t):
        p.w, p.a = J_STRING, A_STR
    elif ty.is_large_string(t):
        p.w, p.a = J_STRING, A_LSTR
    elif ty.is_binary(t):
        p.w, p.a = J_BASE64, A_STR
    elif ty.is_large_binary(t):
        p.w, p.a = J_BASE64, A_LSTR
    elif ty.is_fixed_size_binary(t):
        p.w, p.a, p.width = J_BASE64, A_FIXED, t.byte_width
    elif ty.is_date32(t):
        p.w, p.a = J_DATE, A_I32
    elif ty.is_date64(t):
        p.w, p.a, p.div = J_DATE, A_I64, 86400000
    elif ty.is_timestamp(t):
        p.w, p.a = J_TS, A_I64
        p.width = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
    elif ty.is_time32(t) or ty.is_time64(t):
        p.w, p.a = J_TIME, (A_I32 if ty.is_time32(t) else A_I64)
        p.width = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
    elif ty.is_list(t) or ty.is_large_list(t) or ty.is_fixed_size_list(t):
        p.w = J_LIST
        if ty.is_fixed_size_list(t):
            p.a, p.width = A_FLIST, t.list_size
        else:
            p.a = A_LIST if ty.is_list(t) else A_LLIST
        p.children = [_jplan(t.value_type, path + "[]")]
    elif ty.is_map(t):
        kt = t.key_type
        if not (ty.is_string(kt) or ty.is_large_string(kt)):
            raise SchemaMismatchError(f"field {_pathname(path)!r}: Arrow type {t} is not written "
                                      f"as JSON (an object's keys are strings)")
        p.w, p.a = J_MAP, A_MAP
        p.children = [_jplan(kt, path + "{}"), _jplan(t.item_type, path + "{}")]
    elif ty.is_struct(t):
        p.w, p.a = J_STRUCT, A_STRUCT
        for i in range(t.num_fields):
            f = t.field(i)
            c = _jplan(f.type, f"{path}.{f.name}" if path else f.name)
            c.const = (b"," if i else b"") + _json_str(f.name) + b":"
            p.children.append(c)
            p.child_index.append(i)
    elif ty.is_dictionary(t):
        p.w, p.a = J_DICT, A_DICT
        p.width = _akind_int(t.index_type)
        p.dict_values = _jplan(t.value_type, path)
    else:
        raise SchemaMismatchError(f"field {_pathname(path)!r}: Arrow type {t} has no JSON form "
                                  f"here")
    return p


cdef bytes _json_str(str s):
    cdef Buf b
    b.data = NULL
    b.len = 0
    b.cap = 0
    cdef Py_ssize_t n
    cdef const char* p = PyUnicode_AsUTF8AndSize(s, &n)
    try:
        if _w_jstr(&b, <const uint8_t*>p, n) < 0:
            raise MemoryError()
        return PyBytes_FromStringAndSize(b.data, b.len)
    finally:
        free(b.data)


cdef int _w_jstr(Buf* b, const uint8_t* p, int64_t n) noexcept nogil:
    """A JSON string: '"', '\\\\' and the control characters escaped (\\\\uXXXX), the rest (UTF-8)
    as is."""
    cdef const char* hexd = b"0123456789abcdef"
    cdef int64_t i, start = 0
    cdef uint8_t ch
    if reserve(b, n + 2) < 0:
        return -1
    b.data[b.len] = b'"'
    b.len += 1
    for i in range(n):
        ch = p[i]
        if ch >= 0x20 and ch != b'"' and ch != b'\\':
            continue
        if w_raw(b, p + start, i - start) < 0 or reserve(b, 6) < 0:
            return -1
        start = i + 1
        b.data[b.len] = b'\\'
        if ch == b'"' or ch == b'\\':
            b.data[b.len + 1] = <char>ch
            b.len += 2
        else:
            b.data[b.len + 1] = b'u'
            b.data[b.len + 2] = b'0'
            b.data[b.len + 3] = b'0'
            b.data[b.len + 4] = hexd[ch >> 4]
            b.data[b.len + 5] = hexd[ch & 15]
            b.len += 6
    if w_raw(b, p + start, n - start) < 0 or reserve(b, 1) < 0:
        return -1
    b.data[b.len] = b'"'
    b.len += 1
    return 0


cdef extern from "stdio.h":
    int snprintf(char* s, size_t n, const char* fmt, ...) nogil
cdef extern from "stdlib.h":
    double strtod(const char* s, char** end) nogil


cdef int _w_double_text(Buf* b, double d) noexcept nogil:
    """The shortest of %.15g, %.16g, %.17g that reads back as ``d`` (so every value round-trips);
    '.0' added to an integral value, as Python writes floats."""
    cdef char tmp[40]
    cdef int n = 0, prec, i
    cdef bint plain = True
    for prec in range(15, 18):
        n = snprintf(tmp, 40, "%.*g", prec, d)
        if strtod(tmp, NULL) == d:
            break
    for i in range(n):
        if tmp[i] == b'.' or tmp[i] == b'e' or tmp[i] == b'n' or tmp[i] == b'i':
            plain = False
    if plain:
        tmp[n] = b'.'
        tmp[n + 1] = b'0'
        n += 2
    return w_raw(b, tmp, n)


cdef int _w_int_text(Buf* b, int64_t v) noexcept nogil:
    cdef char tmp[24]
    cdef int n = snprintf(tmp, 24, "%lld", <long long>v)
    return w_raw(b, tmp, n)


cdef int _w_decimal_text(Buf* b, const uint8_t* le16, int scale) noexcept nogil:
    """An unscaled 128-bit value and its scale as exact decimal text (-123.4500)."""
    cdef fk_i128 v
    memcpy(&v, le16, 16)
    cdef bint neg = v < 0
    cdef char digits[48]
    cdef int n = 0, i
    # work on the negative value (the most negative one has no positive counterpart); C's
    # division truncates, so the remainders of a value <= 0 are <= 0
    if not neg:
        v = -v
    while True:
        digits[n] = <char>(48 - <int>(v % 10))
        n += 1
        v = v / 10
        if v == 0:
            break
    if reserve(b, n + scale + 4) < 0:
        return -1
    if neg:
        b.data[b.len] = b'-'
        b.len += 1
    if scale <= 0:
        for i in range(n - 1, -1, -1):
            b.data[b.len] = digits[i]
            b.len += 1
        for i in range(-scale):
            b.data[b.len] = b'0'
            b.len += 1
        return 0
    if n <= scale:
        b.data[b.len] = b'0'
        b.data[b.len + 1] = b'.'
        b.len += 2
        for i in range(scale - n):
            b.data[b.len] = b'0'
            b.len += 1
        for i in range(n - 1, -1, -1):
            b.data[b.len] = digits[i]
            b.len += 1
        return 0
    for i in range(n - 1, -1, -1):
        b.data[b.len] = digits[i]
        b.len += 1
        if i == scale:
            b.data[b.len] = b'.'
            b.len += 1
    return 0


cdef int _w_base64(Buf* b, const uint8_t* p, int64_t n) noexcept nogil:
    cdef const char* alpha = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    cdef int64_t i = 0
    cdef uint32_t x
    if reserve(b, (n + 2) // 3 * 4 + 2) < 0:
        return -1
    b.data[b.len] = b'"'
    b.len += 1
    while i + 3 <= n:
        x = (<uint32_t>p[i] << 16) | (<uint32_t>p[i + 1] << 8) | p[i + 2]
        b.data[b.len] = alpha[(x >> 18) & 63]
        b.data[b.len + 1] = alpha[(x >> 12) & 63]
        b.data[b.len + 2] = alpha[(x >> 6) & 63]
        b.data[b.len + 3] = alpha[x & 63]
        b.len += 4
        i += 3
    if n - i == 1:
        x = <uint32_t>p[i] << 16
        b.data[b.len] = alpha[(x >> 18) & 63]
        b.data[b.len + 1] = alpha[(x >> 12) & 63]
        b.data[b.len + 2] = b'='
        b.data[b.len + 3] = b'='
        b.len += 4
    elif n - i == 2:
        x = (<uint32_t>p[i] << 16) | (<uint32_t>p[i + 1] << 8)
        b.data[b.len] = alpha[(x >> 18) & 63]
        b.data[b.len + 1] = alpha[(x >> 12) & 63]
        b.data[b.len + 2] = alpha[(x >> 6) & 63]
        b.data[b.len + 3] = b'='
        b.len += 4
    b.data[b.len] = b'"'
    b.len += 1
    return 0


cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a // b
    if (a % b) != 0 and ((a < 0) != (b < 0)):
        q -= 1
    return q


cdef int _w_digits(char* out, int64_t v, int width) noexcept nogil:
    cdef int i
    for i in range(width - 1, -1, -1):
        out[i] = <char>(48 + v % 10)
        v //= 10
    return width


cdef int _civil(int64_t days, int64_t* y, int* m, int* d) noexcept nogil:
    """The proleptic Gregorian date of a day count from 1970-01-01."""
    cdef int64_t z = days + 719468
    cdef int64_t era = (z if z >= 0 else z - 146096) // 146097
    cdef int64_t doe = z - era * 146097
    cdef int64_t yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    cdef int64_t doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    cdef int64_t mp = (5 * doy + 2) // 153
    d[0] = <int>(doy - (153 * mp + 2) // 5 + 1)
    m[0] = <int>(mp + 3 if mp < 10 else mp - 9)
    y[0] = yoe + era * 400 + (1 if m[0] <= 2 else 0)
    return 0


cdef int _w_date_parts(Buf* b, int64_t days, bint quote_close) noexcept nogil:
    cdef int64_t y
    cdef int m, d
    if days < -719162 or days > 2932896:        # 0001-01-01 .. 9999-12-31
        return -2
    _civil(days, &y, &m, &d)
    if reserve(b, 12) < 0:
        return -1
    cdef char* o = b.data + b.len
    o[0] = b'"'
    _w_digits(o + 1, y, 4)
    o[5] = b'-'
    _w_digits(o + 6, m, 2)
    o[8] = b'-'
    _w_digits(o + 9, d, 2)
    b.len += 11
    if quote_close:
        b.data[b.len] = b'"'
        b.len += 1
    return 0


cdef int64_t _POW10[10]
_POW10[0] = 1
for _i in range(1, 10):
    _POW10[_i] = _POW10[_i - 1] * 10


cdef int _w_clock(Buf* b, int64_t sod, int64_t frac, int digits) noexcept nogil:
    """HH:MM:SS[.fraction] of a second of the day and its fraction (``digits`` long)."""
    if reserve(b, 20) < 0:
        return -1
    cdef char* o = b.data + b.len
    _w_digits(o, sod // 3600, 2)
    o[2] = b':'
    _w_digits(o + 3, (sod // 60) % 60, 2)
    o[5] = b':'
    _w_digits(o + 6, sod % 60, 2)
    b.len += 8
    if digits:
        b.data[b.len] = b'.'
        _w_digits(b.data + b.len + 1, frac, digits)
        b.len += 1 + digits
    return 0


cdef int _write_json(Col* c, int64_t i, Buf* b, ECtx* e) noexcept nogil:
    """Row ``i`` of column ``c`` as JSON text."""
    cdef int w = c.w
    cdef int64_t j, s, t, k, x, per, secs, frac, days
    cdef double d
    cdef int r
    if c.const_len:                      # a struct member: its key first
        if w_raw(b, c.const_data, c.const_len) < 0:
            return _fail(e, c, E_NOMEM, 0)
    if _is_null(c, i):
        return _fail(e, c, E_NOMEM, 0) if w_raw(b, b"null", 4) < 0 else 0
    j = i + c.offset
    if w == J_STRING:
        _span(c, j, &s, &t)
        r = _w_jstr(b, c.data + s, t - s)
    elif w == J_INT:
        r = _w_int_text(b, _get_int(c, j))
    elif w == J_DOUBLE:
        d = (<const double*>c.data)[j] if c.a == A_F64 else (<const float*>c.data)[j]
        if d != d or d - d != 0:
            return _fail(e, c, E_NAN, 0)
        r = _w_double_text(b, d)
    elif w == J_BOOL:
        if (c.data[j >> 3] >> (j & 7)) & 1:
            r = w_raw(b, b"true", 4)
        else:
            r = w_raw(b, b"false", 5)
    elif w == J_STRUCT:
        r = w_raw(b, b"{", 1)
        for k in range(c.nchildren):
            if r < 0:
                break
            if _write_json(c.children[k], j, b, e) < 0:
                return -1
        if r == 0:
            r = w_raw(b, b"}", 1)
    elif w == J_LIST:
        if c.a == A_FLIST:
            s = j * c.width
            t = s + c.width
        else:
            _span(c, j, &s, &t)
        r = w_raw(b, b"[", 1)
        for k in range(s, t):
            if r < 0:
                break
            if k > s:
                r = w_raw(b, b",", 1)
            if _write_json(c.children[0], k, b, e) < 0:
                return -1
        if r == 0:
            r = w_raw(b, b"]", 1)
    elif w == J_MAP:
        _span(c, j, &s, &t)
        r = w_raw(b, b"{", 1)
        for k in range(s + c.width, t + c.width):
            if r < 0:
                break
            if k > s + c.width:
                r = w_raw(b, b",", 1)
            if _is_null(c.children[0], k):
                return _fail(e, c.children[0], E_NULL, 0)
            if _write_json(c.children[0], k, b, e) < 0:
                return -1
            r = w_raw(b, b":", 1)
            if _write_json(c.children[1], k, b, e) < 0:
                return -1
        if r == 0:
            r = w_raw(b, b"}", 1)
    elif w == J_DICT:
        k = _get_int_kind(c, j)
        return _write_json(c.dict_values, k, b, e)
    elif w == J_BASE64:
        if c.a == A_FIXED:
            r = _w_base64(b, c.data + j * c.width, c.width)
        else:
            _span(c, j, &s, &t)
            r = _w_base64(b, c.data + s, t - s)
    elif w == J_DECIMAL:
        r = _w_decimal_text(b, c.data + 16 * j, c.precision)
    elif w == J_UINT64:
        r = _w_uint_text(b, (<const uint64_t*>c.data)[j])
    elif w == J_DATE:
        x = _get_int(c, j)
        if c.div != 1:
            x = _floordiv(x, c.div)
        r = _w_date_parts(b, x, True)
        if r == -2:
            return _fail(e, c, E_DATE, 0)
    elif w == J_TS:
        x = _get_int(c, j)
        per = _POW10[c.width]
        secs = _floordiv(x, per)
        frac = x - secs * per
        days = _floordiv(secs, 86400)
        r = _w_date_parts(b, days, False)
        if r == -2:
            return _fail(e, c, E_DATE, 0)
        if r == 0 and reserve(b, 1) == 0:
            b.data[b.len] = b'T'
            b.len += 1
            r = _w_clock(b, secs - days * 86400, frac, <int>c.width)
            if r == 0:
                r = w_raw(b, b"Z\"", 2)
        else:
            r = -1
    elif w == J_TIME:
        x = _get_int(c, j)
        per = _POW10[c.width]
        secs = _floordiv(x, per)
        if secs < 0 or secs >= 86400:
            return _fail(e, c, E_DATE, 0)
        r = w_raw(b, b"\"", 1)
        if r == 0:
            r = _w_clock(b, secs, x - secs * per, <int>c.width)
        if r == 0:
            r = w_raw(b, b"\"", 1)
    else:                                # J_NULL
        r = w_raw(b, b"null", 4)
    return _fail(e, c, E_NOMEM, 0) if r < 0 else 0


cdef int _w_uint_text(Buf* b, uint64_t v) noexcept nogil:
    cdef char tmp[24]
    cdef int n = snprintf(tmp, 24, "%llu", <unsigned long long>v)
    return w_raw(b, tmp, n)


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
