# cython: language_level=3
# path:
#   keyed:  key_partition_c -> java_partition_c -> murmur2_c | crc32_c | fnv1a_c  (-1: sticky)
#   no key: StickyPartitioner.partition_c -> partition -> _choose -> xorshift32
#   keys of send_batch: partitions_for_keys -> arrow_get / column_get -> key_partition_c

from libc.stdint cimport int32_t, uint32_t, uint64_t


# How a record without an explicit partition is placed (Router._part_kind, partitions_for_keys);
# part_kind() maps a ``partitioner`` setting to one. "Sticky" is the accumulator's sticky partition
# of the topic (-1 from key_partition_c). Rules and librdkafka's names in docs/internals.md,
# "The router".
cdef enum:
    PART_MURMUR2 = 0            # (murmur2 & 0x7fffffff) % n, the Java client's; null keys sticky
    PART_RANDOM = 1             # sticky for every record
    PART_CALLABLE = 2           # partitioner(key, num_partitions, available_partitions)
    PART_CONSISTENT = 3         # CRC-32 % n; a null key hashed as no bytes (partition 0)
    PART_CONSISTENT_RANDOM = 4  # CRC-32 % n; null and empty keys sticky
    PART_FNV1A = 5              # |FNV-1a as int32| % n; a null key hashed as no bytes
    PART_FNV1A_RANDOM = 6       # |FNV-1a as int32| % n; null keys sticky
# The kinds from PART_CONSISTENT on are librdkafka's hashes (key_partition_c places them).


# The kind of a ``partitioner`` setting: one of the names of PARTITIONERS or a callable
# (PART_CALLABLE); ValueError naming the accepted names otherwise.
cdef int part_kind(object partitioner) except -1

# Java client's Utils.murmur2 over ``n`` bytes at ``data`` (signed int32 result).
# thread: any · lock: none · gil: any
cdef int32_t murmur2_c(const char *data, Py_ssize_t n) noexcept nogil

# (murmur2 & 0x7fffffff) % num_partitions; num_partitions must be > 0.
# thread: any · lock: none · gil: any
cdef int32_t java_partition_c(const char *data, Py_ssize_t n, int32_t num_partitions) noexcept nogil

# CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320; zlib's crc32) of ``n`` bytes at ``data``.
# thread: any · lock: none · gil: any
cdef uint32_t crc32_c(const char *data, Py_ssize_t n) noexcept nogil

# FNV-1a, 32 bits (offset basis 0x811C9DC5, prime 0x01000193), of ``n`` bytes at ``data``.
# thread: any · lock: none · gil: any
cdef uint32_t fnv1a_c(const char *data, Py_ssize_t n) noexcept nogil

# The partition of a key of ``n`` bytes at ``data`` (n < 0: a null key) under ``kind`` among
# ``num_partitions`` (> 0), or -1: the topic's sticky partition (also for PART_RANDOM and
# PART_CALLABLE, which this does not place).
# thread: any · lock: none · gil: any
cdef int32_t key_partition_c(int kind, const char *data, Py_ssize_t n,
                             int32_t num_partitions) noexcept nogil


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
