# path:
#   encode: size_uvarint -> zigzag64 -> write_uvarint
#   decode: read_uvarint -> unzigzag64

# C-level varint helpers for the Kafka record format (zigzag + LEB128-style
# unsigned varints). All inline, noexcept nogil: usable from records.pyx and
# other compiled modules with `from fastkafka._wire.varint cimport ...`.
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


# thread: any · lock: none · gil: any
cdef inline uint64_t zigzag64(int64_t n) noexcept nogil:
    """Zigzag-encode a signed 64-bit value (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...)."""
    return (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)


# thread: any · lock: none · gil: any
cdef inline uint32_t zigzag32(int32_t n) noexcept nogil:
    return (<uint32_t>n << 1) ^ <uint32_t>(n >> 31)


# thread: any · lock: none · gil: any
cdef inline int64_t unzigzag64(uint64_t v) noexcept nogil:
    return <int64_t>((v >> 1) ^ (0 - (v & 1)))


# thread: any · lock: none · gil: any
cdef inline int size_uvarint(uint64_t v) noexcept nogil:
    """Bytes needed to encode ``v`` as an unsigned varint (1..10)."""
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


# thread: any · lock: none · gil: any
cdef inline int size_varlong(int64_t n) noexcept nogil:
    """Bytes of the zigzag varint encoding of a signed value."""
    return size_uvarint(zigzag64(n))


# thread: any · lock: none · gil: any
cdef inline int write_uvarint(char *p, uint64_t v) noexcept nogil:
    """Write ``v`` as an unsigned varint at ``p`` (room for 10 bytes); return bytes written."""
    cdef int n = 0
    while v >= 0x80:
        p[n] = <char>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    p[n] = <char>v
    return n + 1


# thread: any · lock: none · gil: any
cdef inline int write_varlong(char *p, int64_t n) noexcept nogil:
    """Write the zigzag varint of a signed value; return bytes written."""
    return write_uvarint(p, zigzag64(n))


# thread: any · lock: none · gil: any
cdef inline int read_uvarint(const char *p, const char *end, int max_bytes,
                             uint64_t *out) noexcept nogil:
    """Read an unsigned varint of at most ``max_bytes`` bytes from [p, end).

    Returns the bytes consumed (> 0), 0 when the input ends inside the varint
    (truncated), or -1 when it runs past ``max_bytes`` (too long).
    """
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef int i = 0
    cdef unsigned char b
    while True:
        if i >= max_bytes:
            return -1
        if p + i >= end:
            return 0
        b = <unsigned char>p[i]
        result |= (<uint64_t>(b & 0x7F)) << shift
        i += 1
        if not (b & 0x80):
            out[0] = result
            return i
        shift += 7
