# cython: language_level=3
# path:
#   keyed:  java_partition_c -> murmur2_c
#   no key: StickyPartitioner.partition_c -> partition -> _choose -> xorshift32
#   keys of send_batch: partitions_for_keys -> arrow_get / column_get -> java_partition_c

from libc.stdint cimport int32_t, uint32_t, uint64_t

# Java client's Utils.murmur2 over ``n`` bytes at ``data`` (signed int32 result).
# thread: any · lock: none · gil: any
cdef int32_t murmur2_c(const char *data, Py_ssize_t n) noexcept nogil

# (murmur2 & 0x7fffffff) % num_partitions; num_partitions must be > 0.
# thread: any · lock: none · gil: any
cdef int32_t java_partition_c(const char *data, Py_ssize_t n, int32_t num_partitions) noexcept nogil


# thread: any · lock: none · gil: any
cdef uint32_t xorshift32(uint32_t *state) noexcept nogil


cdef class StickyPartitioner:
    """Per-topic sticky partition for records without a key (KIP-480 behaviour)."""
    cdef dict _sticky            # topic -> int current sticky partition
    cdef uint32_t _rng
    cdef str _last_topic         # the topic of the last answer (the same object), and that answer:
    cdef int32_t _last_p         # kept equal to _sticky[_last_topic]

    cpdef int32_t partition(self, str topic, list available) except -2
    cpdef int32_t next_partition(self, str topic, list available, int32_t prev) except -2
    cdef int32_t _choose(self, list available, int32_t avoid) except -2

    # ``partition`` without a dict lookup when ``topic`` is the same object as last time (once
    # per record on the send path).
    cdef inline int32_t partition_c(self, str topic, list available) except -2:
        if topic is self._last_topic:
            return self._last_p
        return self.partition(topic, available)

    # The topic's sticky partition (an int) or None.
    cdef inline object current_c(self, str topic):
        return self._sticky.get(topic)
