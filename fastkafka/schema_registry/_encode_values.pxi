# _encode_values.pxi: the schema program for Python values: one _Op per Avro type, compiled once
# from a ParsedAvro, and the writer that walks it over a value (AvroEncoder.encode).
# Included by _encode.pyx.

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
    cdef int overflow = 0
    cdef long long x
    if type(v) is not int:
        # other integers (numpy's, for one) through __index__; bool and floats refused
        if isinstance(v, (bool, float)) or not hasattr(type(v), "__index__"):
            raise _bad(op, v)
        v = _operator_index(v)
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or x < lo or x > hi:
        raise _bad(op, v, f"{v} is out of range")
    return x


cdef double _as_double(_Op op, object v) except? -1.0:
    """A float or an integer (numpy's too) as a double; bool refused."""
    if isinstance(v, bool) or not isinstance(v, _Real):
        raise _bad(op, v)
    try:
        return float(v)
    except OverflowError:
        raise _bad(op, v, "too large for a double") from None


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
        if type(v) is float:
            d = v
        else:
            d = _as_double(op, v)
        if w_double(b, d) < 0:
            raise MemoryError()
    elif k == K_FLOAT:
        if type(v) is float:
            d = v
        else:
            d = _as_double(op, v)
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
                shown = repr(v) if len(v) <= 40 else repr(v[:40]) + "..."   # a symbol, short
                raise EncodeError(f"field {_pathname(op.path)!r}: {shown} is not a symbol of "
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
