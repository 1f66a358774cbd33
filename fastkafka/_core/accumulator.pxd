# cython: language_level=3
# Contract of fastkafka._core.accumulator: the RecordAccumulator (the batches and futures it makes
# are declared in fastkafka._core.batch).
cimport cython
from cpython.pythread cimport PyThread_type_lock
from libc.stdint cimport int32_t, int64_t

from fastkafka._wire.records cimport BatchBuilder
from fastkafka._core.batch cimport ProducerBatch, FutureRecordMetadata
from fastkafka._core.bufferpool cimport BufferPool
from fastkafka._core.partitioner cimport StickyPartitioner
from fastkafka._core.clock cimport clock_ms, monotonic_ms


@cython.final
cdef class _PartitionQueue:
    cdef str topic
    cdef int32_t partition
    cdef list batches
    cdef bint muted
    cdef bint txn_added              # transactional: added to the current transaction
    cdef object tp
    # scratch for ready()
    cdef bint _sendable
    cdef int64_t _time_left


@cython.final
cdef class _TopicState:
    cdef str topic
    cdef list parts                  # partition -> _PartitionQueue or None
    cdef list available              # last list passed to sticky_partition()


cdef enum:
    # RecordAccumulator.wakeup_pending
    WAKE_NONE = 0
    WAKE_BY = 1     # a batch started: the sender must run by wake_deadline_ms (its linger deadline)
    WAKE_NOW = 2    # a batch filled


cdef class RecordAccumulator:
    cdef readonly int64_t batch_size
    cdef readonly object compression_type
    cdef readonly object compression_level
    cdef readonly int64_t linger_ms
    cdef readonly int64_t retry_backoff_ms
    cdef readonly int64_t delivery_timeout_ms
    cdef readonly BufferPool buffer_pool
    cdef int _codec                  # compression_type as a codec code, for the builders
    cdef object _level               # compression_level as validated for that codec
    cdef readonly bint ordered
    # A transactional producer's partitions are drained only once added to the transaction.
    cdef public bint transactional
    cdef bint _closed
    cdef bint _counted               # counted in accumulators_open (live_resources())
    # A batch filled up or was started since the last wakeup_needed(): the sender should look.
    # send()/produce() (sendpath) read and clear it after each record.
    # 0: nothing to tell the sender; 1: a batch started (the sender must run by
    # wake_deadline_ms, its linger deadline); 2: a batch filled (wake the sender now)
    cdef int wakeup_pending
    cdef int64_t wake_deadline_ms
    cdef int _flushes
    cdef dict _flush_threads         # thread ident -> open begin_flush() calls
    cdef dict _topics                # topic -> _TopicState
    cdef _TopicState _last_topic     # the one _topic_locked returned last
    cdef list _queues                # every _PartitionQueue
    cdef set _incomplete
    cdef dict _drain_index           # node -> int
    cdef list _failed                # (batch, error): drained, not closable; see take_failed
    cdef PyThread_type_lock _lock
    cdef StickyPartitioner _sticky

    cdef void _acquire(self) noexcept
    cdef void _release(self) noexcept
    cdef _TopicState _topic_locked(self, str topic)
    cdef _PartitionQueue _pq_locked(self, _TopicState ts, int32_t partition)
    cdef _PartitionQueue _find_locked(self, str topic, int32_t partition)
    # A new batch whose builder takes over `reserved` bytes of the buffer pool and `buf` (a free
    # buffer of that size from the pool, or NULL), giving them back on failure.
    cdef ProducerBatch _new_batch(self, _PartitionQueue pq, int64_t now_ms, int64_t reserved,
                                  char *buf)
    # append() from C (send/produce in sendpath): the record's future, or None when not wanted
    # and there is no on_delivery.
    cdef FutureRecordMetadata append_c(self, str topic, int32_t partition, int64_t timestamp,
                                       const char *kp, Py_ssize_t kl, const char *vp,
                                       Py_ssize_t vl, object headers, object on_delivery,
                                       int64_t now_ms, int64_t max_block_ms, bint want_future)
