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
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from libc.stdint cimport int32_t, uint32_t

from fastkafka._producer.columns cimport Column, COL_LIST, prepare_column, arrow_get, column_get
import array
import os

DEF SEED = 0x9747b28c
DEF M = 0x5bd1e995
DEF R = 24


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


def partitions_for_keys(keys, int32_t num_partitions, int32_t null_partition=-1):
    """partitions_for_keys(keys, num_partitions, null_partition=-1) -> array.array('i')

    One partition per key for ``send_batch``: ``java_partition(key, num_partitions)`` for a
    non-null key, ``null_partition`` for a null one. ``keys`` is a list of bytes-like/None or a
    pyarrow binary/large_binary/string/large_string array, read by the column reader
    ``send_batch`` uses (:mod:`fastkafka._producer.columns`: Arrow buffers read in place, slices
    honoured). The hashing loop runs without the GIL for Arrow input.

    >>> list(partitions_for_keys([b"foobar", None], 10, 3))
    [6, 3]
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
            for i in range(n):
                arrow_get(&ac, i, &p, &kl)
                res[i] = null_partition if kl < 0 else java_partition_c(p, kl, num_partitions)
        return out
    for i in range(n):
        column_get(&c, i, &p, &kl, &view, &release)
        res[i] = null_partition if kl < 0 else java_partition_c(p, kl, num_partitions)
        if release:
            PyBuffer_Release(&view)
            release = False
    return out
