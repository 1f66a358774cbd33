# cython: language_level=3
"""Key partitioning (the Java client's and librdkafka's) and the sticky partitioner for null keys.

``murmur2`` reproduces ``org.apache.kafka.common.utils.Utils.murmur2`` bit for bit (32-bit
wrapping arithmetic, little-endian 4-byte blocks, the trailing 1-3 bytes folded in the order
the Java ``switch`` falls through), so keyed records land in the same partition as with the
Java client, librdkafka's ``murmur2_random`` and every other compatible client.
``crc32`` (zlib's CRC-32) and ``fnv1a`` (FNV-1a, 32 bits) are the hashes of librdkafka's
``consistent*`` and ``fnv1a*`` partitioners; ``key_partition`` places a key as each
``partitioner`` name does (the rules: docs/internals.md, "The router").

>>> murmur2(b"foobar")
-790332482
>>> java_partition(b"foobar", 10)
6
>>> key_partition(b"foobar", 10, "consistent_random")   # zlib.crc32(b"foobar") % 10
9
>>> key_partition(None, 10, "consistent_random") is None   # the sticky partition
True
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from libc.stdint cimport int32_t, uint32_t

from fastkafka._producer.columns cimport Column, COL_LIST, prepare_column, arrow_get, column_get
import array
import os

DEF SEED = 0x9747b28c
DEF M = 0x5bd1e995
DEF R = 24
DEF CRC32_POLY = 0xEDB88320     # 0x04C11DB7 bit-reversed: the CRC-32 of zlib, Ethernet, PNG
DEF FNV_OFFSET = 0x811C9DC5
DEF FNV_PRIME = 0x01000193

#: The ``partitioner`` names and how each places a record without an explicit partition (the
#: names and placements of librdkafka, whose default is ``consistent_random``; ``murmur2`` is the
#: Java client's placement, null keys sticky, as librdkafka's ``murmur2_random``).
PARTITIONERS = {
    "murmur2": PART_MURMUR2,
    "murmur2_random": PART_MURMUR2,
    "consistent_random": PART_CONSISTENT_RANDOM,
    "consistent": PART_CONSISTENT,
    "fnv1a": PART_FNV1A,
    "fnv1a_random": PART_FNV1A_RANDOM,
    "random": PART_RANDOM,
}


cdef int part_kind(object partitioner) except -1:
    if isinstance(partitioner, str):
        kind = PARTITIONERS.get(partitioner)
        if kind is not None:
            return kind
    elif callable(partitioner):
        return PART_CALLABLE
    names = ", ".join(repr(name) for name in PARTITIONERS)
    raise ValueError(f"partitioner must be one of {names} or a callable, got {partitioner!r}")


# The CRC-32 tables, generated at import: _crc32_tables[0][b] is the CRC register after byte b,
# _crc32_tables[k][b] after byte b followed by k zero bytes, so that 8 bytes are folded in at once
# (slicing by 8).
cdef uint32_t _crc32_tables[8][256]


cdef void _fill_crc32_table():
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = <uint32_t>i
        for k in range(8):
            c = (c >> 1) ^ (<uint32_t>CRC32_POLY if c & 1 else 0)
        _crc32_tables[0][i] = c
    for k in range(1, 8):
        for i in range(256):
            c = _crc32_tables[k - 1][i]
            _crc32_tables[k][i] = (c >> 8) ^ _crc32_tables[0][c & 0xFF]


_fill_crc32_table()


# thread: any · lock: none · gil: any
cdef int32_t murmur2_c(const char *data, Py_ssize_t n) noexcept nogil:
    cdef const unsigned char *p = <const unsigned char *>data
    cdef uint32_t m = M
    cdef uint32_t h = (<uint32_t>SEED) ^ <uint32_t>n
    cdef uint32_t k
    cdef Py_ssize_t nblocks = n >> 2
    cdef Py_ssize_t i, tail
    for i in range(nblocks):
        k = (<uint32_t>p[0]) | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)
        k *= m
        k ^= k >> R
        k *= m
        h *= m
        h ^= k
        p += 4
    tail = n & 3
    # Java: case 3 falls through to case 2 and case 1; only case 1 multiplies.
    if tail == 3:
        h ^= (<uint32_t>p[2]) << 16
    if tail >= 2:
        h ^= (<uint32_t>p[1]) << 8
    if tail >= 1:
        h ^= <uint32_t>p[0]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


# thread: any · lock: none · gil: any
cdef int32_t java_partition_c(const char *data, Py_ssize_t n, int32_t num_partitions) noexcept nogil:
    return <int32_t>((<uint32_t>murmur2_c(data, n) & 0x7fffffff) % <uint32_t>num_partitions)


# thread: any · lock: none · gil: any
cdef uint32_t crc32_c(const char *data, Py_ssize_t n) noexcept nogil:
    cdef const unsigned char *p = <const unsigned char *>data
    cdef uint32_t c = <uint32_t>0xFFFFFFFF
    cdef uint32_t lo, hi
    while n >= 8:
        lo = c ^ ((<uint32_t>p[0]) | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
                  | (<uint32_t>p[3] << 24))
        hi = (<uint32_t>p[4]) | (<uint32_t>p[5] << 8) | (<uint32_t>p[6] << 16) | (<uint32_t>p[7] << 24)
        c = (_crc32_tables[7][lo & 0xFF] ^ _crc32_tables[6][(lo >> 8) & 0xFF]
             ^ _crc32_tables[5][(lo >> 16) & 0xFF] ^ _crc32_tables[4][lo >> 24]
             ^ _crc32_tables[3][hi & 0xFF] ^ _crc32_tables[2][(hi >> 8) & 0xFF]
             ^ _crc32_tables[1][(hi >> 16) & 0xFF] ^ _crc32_tables[0][hi >> 24])
        p += 8
        n -= 8
    while n > 0:
        c = _crc32_tables[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return c ^ <uint32_t>0xFFFFFFFF


# thread: any · lock: none · gil: any
cdef uint32_t fnv1a_c(const char *data, Py_ssize_t n) noexcept nogil:
    cdef const unsigned char *p = <const unsigned char *>data
    cdef uint32_t h = <uint32_t>FNV_OFFSET
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * <uint32_t>FNV_PRIME
    return h


# thread: any · lock: none · gil: any
cdef int32_t key_partition_c(int kind, const char *data, Py_ssize_t n,
                             int32_t num_partitions) noexcept nogil:
    cdef uint32_t h
    if n < 0:
        # A null key: librdkafka's consistent and fnv1a hash it as no bytes; every other kind
        # places it on the sticky partition.
        if kind != PART_CONSISTENT and kind != PART_FNV1A:
            return -1
        n = 0
    if kind == PART_MURMUR2:
        return java_partition_c(data, n, num_partitions)
    if kind == PART_CONSISTENT or kind == PART_CONSISTENT_RANDOM:
        if n == 0 and kind == PART_CONSISTENT_RANDOM:
            return -1                          # an empty key is sticky too
        return <int32_t>(crc32_c(data, n) % <uint32_t>num_partitions)
    if kind == PART_FNV1A or kind == PART_FNV1A_RANDOM:
        h = fnv1a_c(data, n)
        if h & (<uint32_t>1 << 31):
            h = 0 - h      # librdkafka's absolute value of the hash as an int32 (0x80000000 stays)
        return <int32_t>(h % <uint32_t>num_partitions)
    return -1


# thread: any · lock: none · gil: any
cdef uint32_t xorshift32(uint32_t *state) noexcept nogil:
    cdef uint32_t x = state[0]
    x ^= x << 13
    x ^= x >> 17
    x ^= x << 5
    state[0] = x
    return x


def murmur2(data):
    """``Utils.murmur2`` of the Java client: a signed 32-bit int of any bytes-like object."""
    cdef Py_buffer view
    cdef int32_t h
    if PyBytes_CheckExact(data):
        return murmur2_c(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    if isinstance(data, str):
        raise TypeError("murmur2() needs bytes-like data, not str (encode it first)")
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        h = murmur2_c(<const char *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return h


def java_partition(key, int num_partitions):
    """The Java default partitioner for a non-null key: ``(murmur2(key) & 0x7fffffff) % n``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7fffffff) % num_partitions


def crc32(data):
    """CRC-32 of any bytes-like object as an unsigned int, equal to ``zlib.crc32(data)``: the hash
    of librdkafka's ``consistent`` and ``consistent_random`` partitioners.

    >>> hex(crc32(b"123456789"))
    '0xcbf43926'
    """
    cdef Py_buffer view
    cdef uint32_t h
    _get_buffer(data, &view, "crc32")
    h = crc32_c(<const char *>view.buf, view.len)
    PyBuffer_Release(&view)
    return h


def fnv1a(data):
    """FNV-1a, 32 bits, of any bytes-like object as an unsigned int: the hash of librdkafka's
    ``fnv1a`` and ``fnv1a_random`` partitioners (which take its absolute value as an int32).

    >>> hex(fnv1a(b"a"))
    '0xe40c292c'
    """
    cdef Py_buffer view
    cdef uint32_t h
    _get_buffer(data, &view, "fnv1a")
    h = fnv1a_c(<const char *>view.buf, view.len)
    PyBuffer_Release(&view)
    return h


def key_partition(key, int num_partitions, partitioner="murmur2"):
    """key_partition(key, num_partitions, partitioner="murmur2") -> int | None

    The partition ``partitioner`` (one of :data:`PARTITIONERS`) gives a record with ``key`` (bytes-
    like or None) and no explicit partition, or None where it takes the topic's sticky partition.

    >>> key_partition(b"foobar", 10)
    6
    >>> key_partition(None, 10, "consistent"), key_partition(None, 10)
    (0, None)
    """
    cdef Py_buffer view
    cdef int kind = part_kind(partitioner)
    cdef int32_t p
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if kind == PART_CALLABLE:
        raise ValueError("key_partition places the built-in partitioners, not a callable")
    if key is None:
        p = key_partition_c(kind, NULL, -1, num_partitions)
    else:
        _get_buffer(key, &view, "key_partition")
        p = key_partition_c(kind, <const char *>view.buf, view.len, num_partitions)
        PyBuffer_Release(&view)
    return None if p < 0 else p


cdef int _get_buffer(object data, Py_buffer *view, str fn) except -1:
    if isinstance(data, str):
        raise TypeError(f"{fn}() needs bytes-like data, not str (encode it first)")
    PyObject_GetBuffer(data, view, PyBUF_SIMPLE)
    return 0


@cython.final
cdef class StickyPartitioner:
    """Sticky partition choice for records without a key.

    ``partition(topic, available)`` keeps returning the same partition until
    ``next_partition(topic, available, prev)`` is called for it (the accumulator does that when
    the sticky partition's open batch is full and a new one would start), which switches to
    another random partition of ``available``.

    >>> sp = StickyPartitioner(seed=1)
    >>> p = sp.partition("t", [0, 1, 2])
    >>> sp.partition("t", [0, 1, 2]) == p
    True
    >>> sp.next_partition("t", [0, 1, 2], p) != p
    True
    """

    def __cinit__(self, seed=None):
        self._sticky = {}
        if seed is None:
            seed = int.from_bytes(os.urandom(4), "little")
        self._rng = <uint32_t>(seed & 0xffffffff) or 0x9e3779b9

    cdef int32_t _choose(self, list available, int32_t avoid) except -2:
        cdef Py_ssize_t n = len(available)
        cdef Py_ssize_t i
        cdef int32_t p
        if n == 0:
            raise ValueError("no available partitions to choose from")
        if n == 1:
            return available[0]
        i = xorshift32(&self._rng) % <uint32_t>n
        p = available[i]
        if p == avoid:
            # pick uniformly among the others
            i = (i + 1 + xorshift32(&self._rng) % <uint32_t>(n - 1)) % n
            p = available[i]
        return p

    cpdef int32_t partition(self, str topic, list available) except -2:
        """The topic's current sticky partition (chosen at random on first use)."""
        cdef object cur = self._sticky.get(topic)
        cdef int32_t p
        if cur is not None:
            p = <int32_t>cur
        else:
            p = self._choose(available, -1)
            self._sticky[topic] = p
        self._last_topic = topic
        self._last_p = p
        return p

    cpdef int32_t next_partition(self, str topic, list available, int32_t prev) except -2:
        """Switch away from ``prev`` if it is still the sticky one; return the sticky partition."""
        cdef object cur = self._sticky.get(topic)
        cdef int32_t p
        if cur is None or <int32_t>cur == prev:
            p = self._choose(available, prev)
            self._sticky[topic] = p
        else:
            p = <int32_t>cur
        self._last_topic = topic
        self._last_p = p
        return p

    def current(self, str topic):
        """The sticky partition of ``topic`` or None."""
        return self._sticky.get(topic)


def partitions_for_keys(keys, int32_t num_partitions, int32_t null_partition=-1,
                        partitioner="murmur2"):
    """partitions_for_keys(keys, num_partitions, null_partition=-1, partitioner="murmur2") -> array.array('i')

    One partition per key for ``send_batch``: ``key_partition(key, num_partitions, partitioner)``
    (for the default, ``java_partition`` of a non-null key), ``null_partition`` where that is the
    sticky partition (a null key; for ``consistent_random`` an empty one too). ``keys`` is a list
    of bytes-like/str/None or a pyarrow binary/large_binary/string/large_string array, read by the
    column reader ``send_batch`` uses (:mod:`fastkafka._producer.columns`: Arrow buffers read in
    place, slices honoured). The hashing loop runs without the GIL for Arrow input.

    >>> list(partitions_for_keys([b"foobar", None], 10, 3))
    [6, 3]
    >>> list(partitions_for_keys([b"foobar", None, b""], 10, 3, "consistent"))
    [9, 0, 0]
    """
    cdef Column c, ac
    cdef list keep = []
    cdef Py_ssize_t n, i
    cdef int32_t[::1] res
    cdef const char *p
    cdef Py_ssize_t kl
    cdef Py_buffer view
    cdef bint release = False
    cdef object out
    cdef int kind = part_kind(partitioner)
    cdef int32_t q
    if kind == PART_CALLABLE:
        raise ValueError("partitions_for_keys places the built-in partitioners, not a callable")
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    n = prepare_column(keys, &c, "keys", keep)
    out = array.array("i", bytes(4 * n))
    if n == 0:
        return out
    res = out
    if c.kind != COL_LIST:
        ac = c      # a copy whose address never escaped: its fields stay in registers
        with nogil:
            if kind == PART_MURMUR2:            # the default: murmur2 alone in its loop
                for i in range(n):
                    arrow_get(&ac, i, &p, &kl)
                    res[i] = null_partition if kl < 0 else java_partition_c(p, kl, num_partitions)
            else:
                for i in range(n):
                    arrow_get(&ac, i, &p, &kl)
                    q = key_partition_c(kind, p, kl, num_partitions)
                    res[i] = null_partition if q < 0 else q
        return out
    for i in range(n):
        column_get(&c, i, &p, &kl, &view, &release)
        q = key_partition_c(kind, p, kl, num_partitions)
        res[i] = null_partition if q < 0 else q
        if release:
            PyBuffer_Release(&view)
            release = False
    return out
