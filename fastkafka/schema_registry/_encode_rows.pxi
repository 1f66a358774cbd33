# _encode_rows.pxi: a chunk bound to its plan (Col structs over the Arrow C data interface), the
# row loop without the GIL, its errors, and the BinaryArray built from the output.
# Included by _encode.pyx.

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
        c.enum_map_len = a.dictionary.length          # the indices are checked against it
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


# thread: any · lock: none · gil: no
cdef inline bint _is_null(Col* c, int64_t i) noexcept nogil:
    cdef int64_t j
    if c.a == A_NULL:
        return True
    if c.valid == NULL:
        return False
    j = i + c.offset
    return not ((c.valid[j >> 3] >> (j & 7)) & 1)


# thread: any · lock: none · gil: no
cdef inline int _fail(ECtx* e, Col* c, int code, int64_t ival) noexcept nogil:
    e.code = code
    e.path_id = c.path_id
    e.ival = ival
    return -1


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
cdef inline void _span(Col* c, int64_t j, int64_t* start, int64_t* end) noexcept nogil:
    if c.a == A_STR or c.a == A_LIST or c.a == A_MAP:
        start[0] = (<const int32_t*>c.offs)[j]
        end[0] = (<const int32_t*>c.offs)[j + 1]
    else:
        start[0] = (<const int64_t*>c.offs)[j]
        end[0] = (<const int64_t*>c.offs)[j + 1]


# thread: any · lock: none · gil: no
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
            if k < 0 or k >= c.enum_map_len:
                return _fail(e, c, E_INDEX, k)
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


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
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
    E_INDEX: "a dictionary index {ival} outside its dictionary",
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
        nulls = _count_nulls(valid, total)
        large = out.len > _BINARY_LIMIT
        data_buf = _owned_buffer(pa, out.data, out.len)      # no copy: the buffer owns it now
        out.data = NULL
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


# The most bytes a BinaryArray (32-bit offsets) holds; past it the output is a LargeBinaryArray.
# A module attribute so that the tests can lower it.
_BINARY_LIMIT = 0x7fffffff


cdef class _Owned:
    """A malloc'd block handed to a pyarrow Buffer (its ``base``): freed when the buffer is."""
    cdef char* data

    def __dealloc__(self):
        free(self.data)


cdef object _owned_buffer(object pa, char* data, Py_ssize_t size):
    cdef _Owned owner = _Owned()
    owner.data = data
    if data == NULL:
        return pa.py_buffer(b"")
    return pa.foreign_buffer(<size_t>data, size, base=owner)


# thread: any · lock: none · gil: no
cdef int64_t _count_nulls(const uint8_t* valid, int64_t n) noexcept nogil:
    cdef int64_t i, nulls = 0
    for i in range(n):
        if not (valid[i >> 3] >> (i & 7)) & 1:
            nulls += 1
    return nulls


# thread: any · lock: none · gil: no
cdef void _narrow(const int64_t* src, int32_t* dst, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        dst[i] = <int32_t>src[i]
