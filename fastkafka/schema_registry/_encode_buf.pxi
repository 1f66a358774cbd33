# _encode_buf.pxi: the growable output buffer and the Avro primitive writers (zig-zag varints,
# little-endian floats, length-prefixed bytes, decimals as big-endian two's complement).
# Included by _encode.pyx (one compiled unit: these are called inline by every writer).

# ------------------------------------------------------------------------------------------------
# the output buffer

cdef struct Buf:
    char* data
    Py_ssize_t len
    Py_ssize_t cap


# thread: any · lock: none · gil: no
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


# thread: any · lock: none · gil: no
cdef inline int reserve(Buf* b, Py_ssize_t n) noexcept nogil:
    if b.len + n <= b.cap:
        return 0
    return buf_grow(b, n)


# thread: any · lock: none · gil: no
cdef inline void put_long(Buf* b, int64_t v) noexcept nogil:
    """A zig-zag varint (the caller reserved 10 bytes)."""
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    while z >= 0x80:
        b.data[b.len] = <char>((z & 0x7f) | 0x80)
        b.len += 1
        z >>= 7
    b.data[b.len] = <char>z
    b.len += 1


# thread: any · lock: none · gil: no
cdef inline int w_long(Buf* b, int64_t v) noexcept nogil:
    if reserve(b, 10) < 0:
        return -1
    put_long(b, v)
    return 0


# thread: any · lock: none · gil: no
cdef inline int w_raw(Buf* b, const void* p, Py_ssize_t n) noexcept nogil:
    if reserve(b, n) < 0:
        return -1
    memcpy(b.data + b.len, p, n)
    b.len += n
    return 0


# thread: any · lock: none · gil: no
cdef inline int w_lenbytes(Buf* b, const void* p, Py_ssize_t n) noexcept nogil:
    if reserve(b, n + 10) < 0:
        return -1
    put_long(b, n)
    memcpy(b.data + b.len, p, n)
    b.len += n
    return 0


# thread: any · lock: none · gil: no
cdef inline int w_float(Buf* b, float f) noexcept nogil:
    if reserve(b, 4) < 0:
        return -1
    memcpy(b.data + b.len, &f, 4)        # little-endian hosts only (the project builds for them)
    b.len += 4
    return 0


# thread: any · lock: none · gil: no
cdef inline int w_double(Buf* b, double d) noexcept nogil:
    if reserve(b, 8) < 0:
        return -1
    memcpy(b.data + b.len, &d, 8)
    b.len += 8
    return 0


# thread: any · lock: none · gil: no
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
