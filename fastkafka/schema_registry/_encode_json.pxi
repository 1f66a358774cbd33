# _encode_json.pxi: JSON text from Arrow columns: the plan per Arrow type and the writer (strings
# escaped, exact numbers, base64, RFC 3339 dates). Included by _encode.pyx.

# ------------------------------------------------------------------------------------------------
# JSON text from Arrow columns

cdef int64_t _POW10[10]
_POW10[0] = 1
for _i in range(1, 10):
    _POW10[_i] = _POW10[_i - 1] * 10


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
    J_UUID


cdef _APlan _jplan(object t, str path):
    """The plan writing Arrow type ``t`` as JSON (the rules in JsonEncoder's docstring)."""
    pa = _pa
    ty = pa.types
    cdef _APlan p = _APlan()
    p.path = path
    p.arrow_type = t
    p.avro = None
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.uuid":
            p.w, p.a, p.width = J_UUID, A_FIXED, 16
            return p
        inner = _jplan(t.storage_type, path)
        inner.arrow_type = t
        return inner
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


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
cdef int _w_double_text(Buf* b, double d) noexcept nogil:
    """The shortest decimal text that reads back as ``d``, as Python's repr writes it in the
    common cases ('.0' after an integral value).

    Fast path, for 1e-4 <= |d| < 1e15: the smallest k <= 8 such that m = round(d * 10**k) gives
    m / 10**k == d. m < 2**53 and 10**k are exact doubles, so that division is correctly rounded:
    it is the double the text "m * 10**-k" reads back as. Otherwise the shortest of %.15g, %.16g
    and %.17g that reads back as ``d``."""
    cdef char tmp[40]
    cdef int n = 0, prec, i, k
    cdef bint plain = True
    cdef double a = -d if d < 0 else d
    cdef double scaled
    cdef int64_t m
    if 1e-4 <= a < 1e15:
        for k in range(9):
            scaled = a * <double>_POW10[k]
            if scaled >= 9007199254740992.0:
                break
            m = <int64_t>(scaled + 0.5)
            if <double>m / <double>_POW10[k] == a:
                return _w_fixed_point(b, m, k, d < 0)
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


# thread: any · lock: none · gil: no
cdef int _w_fixed_point(Buf* b, int64_t m, int k, bint neg) noexcept nogil:
    """``m * 10**-k`` (m >= 0) as text: k decimals, or '.0' when k is 0."""
    cdef char digits[24]
    cdef int n = 0, i
    while True:
        digits[n] = <char>(48 + m % 10)
        n += 1
        m //= 10
        if m == 0:
            break
    while n <= k:                        # at least one digit before the point
        digits[n] = b'0'
        n += 1
    if reserve(b, n + 3) < 0:
        return -1
    if neg:
        b.data[b.len] = b'-'
        b.len += 1
    for i in range(n - 1, -1, -1):
        b.data[b.len] = digits[i]
        b.len += 1
        if i == k and k:
            b.data[b.len] = b'.'
            b.len += 1
    if k == 0:
        b.data[b.len] = b'.'
        b.data[b.len + 1] = b'0'
        b.len += 2
    return 0


# thread: any · lock: none · gil: no
cdef int _w_int_text(Buf* b, int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>0 - <uint64_t>v) if v < 0 else <uint64_t>v
    if v < 0:
        if reserve(b, 1) < 0:
            return -1
        b.data[b.len] = b'-'
        b.len += 1
    return _w_uint_text(b, u)


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a // b
    if (a % b) != 0 and ((a < 0) != (b < 0)):
        q -= 1
    return q


# thread: any · lock: none · gil: no
cdef int _w_digits(char* out, int64_t v, int width) noexcept nogil:
    cdef int i
    for i in range(width - 1, -1, -1):
        out[i] = <char>(48 + v % 10)
        v //= 10
    return width


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
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




# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
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
        if k < 0 or k >= c.enum_map_len:
            return _fail(e, c, E_INDEX, k)
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
    elif w == J_UUID:
        r = w_raw(b, b"\"", 1)
        if r == 0 and _w_uuid(b, c.data + 16 * j) == 0:
            b.len -= 37
            memmove(b.data + b.len, b.data + b.len + 1, 36)   # the text without its varint
            b.len += 36
            r = w_raw(b, b"\"", 1)
        else:
            r = -1
    else:                                # J_NULL
        r = w_raw(b, b"null", 4)
    return _fail(e, c, E_NOMEM, 0) if r < 0 else 0


# thread: any · lock: none · gil: no
cdef int _w_uint_text(Buf* b, uint64_t v) noexcept nogil:
    cdef char tmp[24]
    cdef int n = 24
    while True:
        n -= 1
        tmp[n] = <char>(48 + v % 10)
        v //= 10
        if v == 0:
            break
    return w_raw(b, tmp + n, 24 - n)
