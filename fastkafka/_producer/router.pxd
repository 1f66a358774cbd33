# cython: language_level=3
# path:
#   send:       send / produce -> route_c -> topic_c -> explicit | murmur2(key) | key_partition_c
#               (librdkafka's hashes) | -1 sticky | partitioner
#   send_batch: _route_batch -> topic_c -> one int | -1 sticky | one int32 per record
#   refuse:     append_batch -> refuse_partition (what it is given and cannot place)
#   (topic_c: a cache per metadata version; a miss waits in _topic_info)

# Contract of fastkafka._producer.router: the one router. Which partition a record goes to, for
# send(), produce() and send_batch() (lists and Arrow), and the one maker of UnknownPartitionError.
#
# -1 means "the topic's sticky partition": the accumulator picks it under its lock and moves it
# when a batch fills (fastkafka/_producer/accumulator_append.pxi). Rules in docs/internals.md,
# "The router".
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastkafka._net.cells cimport VersionCell
from fastkafka._producer.partitioner cimport (
    PART_CALLABLE, PART_CONSISTENT, PART_MURMUR2, PART_RANDOM, java_partition_c, key_partition_c)


# Why refuse_partition refuses a partition (its message says so).
cdef enum:
    NO_SUCH_PARTITION = 0  # not below the topic's partition count n
    CANNOT_EXIST = 1       # outside 0..MAX_PARTITION: no topic has it (no metadata wait)
    ON_IO_THREAD = 2       # not below n as known, and on the I/O thread, which does not wait
    BAD_PARTITIONER = 3    # a user partitioner answered something not in 0..n-1
    NONE_AVAILABLE = 4     # sticky placement without available partitions

# The highest partition number Kafka can have (an int32 on the wire).
cdef enum:
    MAX_PARTITION_C = 2147483647


# Raise the UnknownPartitionError for ``partition`` of ``topic``: ``why`` above, ``n`` the topic's
# partition count (when known), ``index`` the record's index in a send_batch call (-1: none).
# The only place the library raises it.
cdef int refuse_partition(int why, object topic, object partition, int64_t n,
                          Py_ssize_t index) except -1

# An explicit partition (send's ``partition``) as an int64 in 0..MAX_PARTITION: InvalidRecordError
# for what is not an int, refuse_partition(CANNOT_EXIST) outside the range.
cdef int64_t explicit_partition(object topic, object partition) except -1


# One topic's entry in the router's cache.
@cython.final
cdef class TopicRoute:
    cdef int64_t version          # the metadata version it was read at
    cdef int32_t partitions       # the partition count (> 0)
    cdef list available           # partitions with a leader (sticky placement chooses among them)


cdef class Router:
    cdef VersionCell _meta_version        # the metadata's version, bumped on every update
    cdef object _last_topic               # the topic of the previous record and its entry
    cdef TopicRoute _last_info
    cdef dict _topics                     # topic -> TopicRoute
    cdef object _partitioner              # a name of partitioner.PARTITIONERS or a callable
    cdef int _part_kind                   # its PART_* (partitioner.pxd)
    cdef public int64_t _max_block_ms

    # Hooks: what the router needs from the producer (fastkafka.Producer and
    # fastkafka._producer.sendpath.ProducerCore provide them; the unit test a fake cluster).
    # (metadata version, partition count, available partitions) of ``topic``, waiting up to
    # ``max_wait_ms`` for its metadata (or for ``partition`` to be below the count).
    cpdef tuple _topic_info(self, object topic, object partition, int64_t max_wait_ms)
    # The topic's sticky partition now (the accumulator's, under its lock).
    cpdef int32_t _sticky_partition(self, str topic, list available) except -2
    # The monotonic clock (ms), read only around a metadata wait.
    cpdef int64_t _now_ms(self) except? -1

    cdef TopicRoute _refresh_c(self, object topic, object partition, int64_t *max_block)
    cdef int32_t _topic_slow_c(self, object topic, int64_t partition, object partition_obj,
                               int64_t *max_block) except -1
    cdef int32_t _call_partitioner_c(self, object topic, object key, TopicRoute info) except -2
    cdef object _record_partitions(self, object topic, object partition, object keys,
                                   Py_ssize_t n_records, TopicRoute info)
    cdef object _default_partitions(self, object topic, object keys, Py_ssize_t n_records,
                                    TopicRoute info, bint concrete)

    # The topic's partition count, its entry fresh for the current metadata and holding
    # ``partition`` (an explicit one, or -1) and left in ``_last_topic``/``_last_info``;
    # ``max_block`` gets what is left of max_block_ms after any wait. The same topic as the last
    # record's, still fresh: no reference taken, nothing stored.
    cdef inline int32_t topic_c(self, object topic, int64_t partition, object partition_obj,
                                int64_t *max_block) except -1:
        if (topic is self._last_topic and self._last_info.version == self._meta_version.value
                and partition < self._last_info.partitions):
            max_block[0] = self._max_block_ms
            return self._last_info.partitions
        return self._topic_slow_c(topic, partition, partition_obj, max_block)

    # The partition of one record (send / produce): explicit, murmur2 of the key at ``kp`` (``kl``
    # bytes, -1 null) or librdkafka's hash of it, -1 (sticky), or the user partitioner's answer.
    # Checks before any wait. The default (murmur2) is the first branch.
    cdef inline int32_t route_c(self, object topic, object partition, object key, const char *kp,
                                Py_ssize_t kl, int64_t *max_block) except -2:
        cdef int64_t p = -1
        cdef int32_t n
        if partition is not None:
            p = explicit_partition(topic, partition)
        n = self.topic_c(topic, p, partition, max_block)
        if p >= 0:
            if p >= n:
                refuse_partition(NO_SUCH_PARTITION, topic, partition, n, -1)
            return <int32_t>p
        if self._part_kind == PART_MURMUR2:
            return -1 if kl < 0 else java_partition_c(kp, kl, n)
        if self._part_kind >= PART_CONSISTENT:
            return key_partition_c(self._part_kind, kp, kl, n)
        if self._part_kind == PART_RANDOM:
            return -1
        return self._call_partitioner_c(topic, key, self._last_info)
