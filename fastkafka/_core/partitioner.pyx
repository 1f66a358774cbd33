# cython: language_level=3
"""Java-compatible key partitioning and the sticky partitioner for null keys.

``murmur2`` reproduces ``org.apache.kafka.common.utils.Utils.murmur2`` bit for bit (32-bit
wrapping arithmetic, little-endian 4-byte blocks, the trailing 1-3 bytes folded in the order
the Java ``switch`` falls through), so keyed records land in the same partition as with the
Java client, librdkafka's ``murmur2_random`` and every other compatible client.

>>> murmur2(b"foobar")
-790332482
>>> java_partition(b"foobar", 10)
6
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
import array
import os

DEF SEED = 0x9747b28c
DEF M = 0x5bd1e995
DEF R = 24


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


cdef int32_t java_partition_c(const char *data, Py_ssize_t n, int32_t num_partitions) noexcept nogil:
    return <int32_t>((<uint32_t>murmur2_c(data, n) & 0x7fffffff) % <uint32_t>num_partitions)


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
            return <int32_t>cur
        p = self._choose(available, -1)
        self._sticky[topic] = p
        return p

    cpdef int32_t next_partition(self, str topic, list available, int32_t prev) except -2:
        """Switch away from ``prev`` if it is still the sticky one; return the sticky partition."""
        cdef object cur = self._sticky.get(topic)
        cdef int32_t p
        if cur is None or <int32_t>cur == prev:
            p = self._choose(available, prev)
            self._sticky[topic] = p
            return p
        return <int32_t>cur

    def current(self, str topic):
        """The sticky partition of ``topic`` or None."""
        return self._sticky.get(topic)


cdef object _pa = None


def partitions_for_keys(keys, int32_t num_partitions, int32_t null_partition=-1):
    """partitions_for_keys(keys, num_partitions, null_partition=-1) -> array.array('i')

    One partition per key for ``send_batch``: ``java_partition(key, num_partitions)`` for a
    non-null key, ``null_partition`` for a null one. ``keys`` is a list of bytes-like/None or a
    pyarrow binary/large_binary/string/large_string array (read from its buffers, slices
    honoured). The hashing loop runs without the GIL for Arrow input.

    >>> list(partitions_for_keys([b"foobar", None], 10, 3))
    [6, 3]
    """
    global _pa
    cdef Py_ssize_t n, i, j
    cdef object out, col, bufs, x
    cdef int32_t[::1] res
    cdef const uint8_t *validity = NULL
    cdef const int32_t *off32 = NULL
    cdef const int64_t *off64 = NULL
    cdef const char *data = NULL
    cdef Py_ssize_t base
    cdef int64_t a, b
    cdef bint large
    cdef Py_buffer view
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if type(keys).__module__.startswith("pyarrow"):
        if _pa is None:
            import pyarrow
            _pa = pyarrow
        pa = _pa
        col = keys
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        t = col.type
        n = len(col)
        out = array.array("i", bytes(4 * n))
        if n == 0:
            return out
        res = out
        if pa.types.is_null(t):
            for i in range(n):
                res[i] = null_partition
            return out
        if pa.types.is_binary(t) or pa.types.is_string(t):
            large = False
        elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            large = True
        else:
            from fastkafka.errors import InvalidRecordError
            raise InvalidRecordError(f"keys: Arrow type {t} is not supported (use binary, "
                                     f"large_binary, string or large_string)")
        bufs = col.buffers()
        base = col.offset
        if bufs[0] is not None and col.null_count > 0:
            validity = <const uint8_t *><uintptr_t>bufs[0].address
        if large:
            off64 = <const int64_t *><uintptr_t>bufs[1].address
        else:
            off32 = <const int32_t *><uintptr_t>bufs[1].address
        if bufs[2] is not None:
            data = <const char *><uintptr_t>bufs[2].address
        with nogil:
            for i in range(n):
                j = base + i
                if validity != NULL and not ((validity[j >> 3] >> (j & 7)) & 1):
                    res[i] = null_partition
                    continue
                if large:
                    a = off64[j]
                    b = off64[j + 1]
                else:
                    a = off32[j]
                    b = off32[j + 1]
                res[i] = java_partition_c(data + a, <Py_ssize_t>(b - a), num_partitions)
        return out
    if type(keys) is not list:
        keys = list(keys)
    n = len(keys)
    out = array.array("i", bytes(4 * n))
    if n == 0:
        return out
    res = out
    for i in range(n):
        x = keys[i]
        if x is None:
            res[i] = null_partition
        elif PyBytes_CheckExact(x):
            res[i] = java_partition_c(PyBytes_AS_STRING(x), PyBytes_GET_SIZE(x), num_partitions)
        else:
            if isinstance(x, str) or not PyObject_CheckBuffer(x):
                from fastkafka.errors import InvalidRecordError
                raise InvalidRecordError(f"keys[{i}] must be bytes-like or None, not {type(x).__name__}")
            PyObject_GetBuffer(x, &view, PyBUF_SIMPLE)
            res[i] = java_partition_c(<const char *>view.buf, view.len, num_partitions)
            PyBuffer_Release(&view)
    return out
