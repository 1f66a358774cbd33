# _encode_plan.pxi: the Arrow side: how each Arrow type is written as each Avro type (_APlan, one
# tree per Arrow type, built and checked before any row) and the C struct a plan is bound to.
# Included by _encode.pyx.

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
    E_INDEX


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
    if ty.is_decimal(t) and t.bit_width != 128 and t.precision <= 38:
        return pa.decimal128(t.precision, t.scale)      # decimal32/64/256 read as decimal128
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
    if isinstance(t, pa.BaseExtensionType):
        # its C data is its storage's (a uuid is a fixed_size_binary(16))
        inner = _plan(node, t.storage_type, path, encoder)
        inner.arrow_type = t
        return inner
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
