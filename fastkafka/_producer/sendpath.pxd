# cython: language_level=3
# path:
#   record: send / produce -> _send -> check_timestamp -> _TopicInfo -> java_partition_c / sticky
#           -> RecordAccumulator.append_c -> wake_at / wake_gil_free / wakeup -> give_way

# Contract of fastkafka._producer.sendpath: the compiled half of fastkafka.Producer (send() and
# produce() as one C call).
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastkafka._producer.accumulator cimport RecordAccumulator
from fastkafka._net.cells cimport VersionCell
from fastkafka._net.ioloop cimport Poller


# A record's timestamp: now (wall clock, ms) for None; a typed error for anything but an int >= 0.
cdef int64_t check_timestamp(object timestamp_ms) except -1


# send()'s cache entry for one topic.
@cython.final
cdef class _TopicInfo:
    cdef int64_t version
    cdef int32_t partitions
    cdef list available


# Base class of fastkafka.Producer: the state send() touches per record. The Python subclass
# provides _topic_info, _call_partitioner and _too_large (the rare paths).
cdef class ProducerCore:
    cdef RecordAccumulator _acc
    cdef VersionCell _meta_version        # the metadata's version, bumped on every update
    cdef object _last_topic               # the topic of the previous send() and its info
    cdef _TopicInfo _last_info
    cdef Poller _poller                   # the I/O thread's: wake-ups and linger timers
    cdef object _partitioner              # "murmur2", "random" or a callable
    cdef int _part_kind
    cdef readonly Py_ssize_t _max_record_size
    cdef public bint _closed
    # A transactional producer outside a transaction: send() raises _closed_error() (the subclass
    # names the transaction state), at the cost of one flag test per record.
    cdef public bint _txn_blocked
    cdef public int64_t _max_block_ms
    cdef dict _topics                     # topic -> _TopicInfo

    cdef _TopicInfo _refresh_topic(self, object topic, object partition)
    cdef object _send(self, object topic, object value, object key, object partition,
                      object timestamp_ms, object headers, object on_delivery, bint want_future)
