# cython: language_level=3
# Contract of fastkafka._core.accumulator: batches, futures and the RecordAccumulator.
cimport cython
from cpython.pythread cimport PyThread_type_lock
from libc.stdint cimport int32_t, int64_t
from posix.time cimport clock_gettime, timespec

from fastkafka._wire.records cimport BatchBuilder
from fastkafka._core.bufferpool cimport BufferPool
from fastkafka._core.partitioner cimport StickyPartitioner


# Milliseconds of a POSIX clock: CLOCK_MONOTONIC is the clock of time.monotonic(), the one every
# ``now_ms`` of the accumulator and the sender is read from; CLOCK_REALTIME gives record timestamps.
cdef inline int64_t clock_ms(int clock) noexcept nogil:
    cdef timespec t
    clock_gettime(clock, &t)
    return <int64_t>t.tv_sec * 1000 + t.tv_nsec // 1000000


@cython.final
cdef class RecordMetadata:
    cdef readonly str topic
    cdef readonly int32_t partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int32_t serialized_key_size
    cdef readonly int32_t serialized_value_size


@cython.final
cdef class _Listener:
    cdef BatchFuture future
    cdef int64_t count


@cython.final
cdef class ProducerBatch:
    cdef readonly str topic
    cdef readonly int32_t partition
    cdef readonly object topic_partition      # cached (topic, partition)
    cdef readonly BatchBuilder builder        # None after deallocate()
    cdef public int64_t created_ms
    cdef public int32_t attempts
    cdef public int64_t last_attempt_ms
    cdef public int64_t drained_ms
    cdef readonly int32_t record_count
    cdef public int64_t reserved              # bytes held in the buffer pool
    cdef public int64_t producer_id
    cdef public int32_t producer_epoch
    cdef public int32_t base_sequence
    cdef public bint in_retry
    cdef bint _full                           # an append was refused: closed for appends
    cdef bint _done
    cdef readonly int64_t base_offset
    cdef readonly int64_t log_append_time
    cdef readonly object error
    cdef list _thunks                         # FutureRecordMetadata with callbacks, or None
    cdef list _listeners                      # _Listener per BatchFuture, or None
    cdef _Listener _last_listener
    cdef object _event                        # threading.Event
    # split (RecordAccumulator.split_and_reenqueue): the pieces that took over the records, in
    # order; a piece's split batch and the index there of its first record
    cdef list _children
    cdef ProducerBatch _parent
    cdef int32_t _first_index
    cdef int32_t _children_left

    cpdef bint complete(self, int64_t base_offset, int64_t log_append_time, object error) except -1
    cdef inline bint _is_full(self) noexcept


@cython.final
cdef class FutureRecordMetadata:
    cdef readonly ProducerBatch batch
    cdef readonly int32_t index
    cdef int64_t _timestamp
    cdef int32_t _key_size
    cdef int32_t _value_size
    cdef object _callback
    cdef list _extra

    cdef RecordMetadata _metadata(self)
    cdef void _fire(self, object error) noexcept


@cython.final
cdef class BatchFuture:
    cdef int64_t _appended
    cdef int64_t _delivered
    cdef int64_t _failed
    cdef bint _sealed
    cdef bint _finished
    cdef readonly object expected     # record count the caller announced (informational)
    cdef object _first_error
    cdef object _event
    cdef list _callbacks

    cdef void _batch_done(self, int64_t count, object error) noexcept
    cdef void _seal(self, int64_t appended) noexcept
    cdef bint _check_done_locked(self) noexcept


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


cdef class RecordAccumulator:
    cdef readonly int64_t batch_size
    cdef readonly object compression_type
    cdef readonly object compression_level
    cdef readonly int64_t linger_ms
    cdef readonly int64_t retry_backoff_ms
    cdef readonly int64_t delivery_timeout_ms
    cdef readonly BufferPool buffer_pool
    cdef readonly bint ordered
    # A transactional producer's partitions are drained only once added to the transaction.
    cdef public bint transactional
    cdef bint _closed
    cdef bint _counted               # counted in accumulators_open (live_resources())
    cdef bint _wakeup                # a batch filled up or was started since wakeup_needed()
    cdef int _flushes
    cdef dict _flush_threads         # thread ident -> open begin_flush() calls
    cdef dict _topics                # topic -> _TopicState
    cdef _TopicState _last_topic     # the one _topic_locked returned last
    cdef list _queues                # every _PartitionQueue
    cdef set _incomplete
    cdef dict _drain_index           # node -> int
    cdef PyThread_type_lock _lock
    cdef StickyPartitioner _sticky

    cdef void _acquire(self) noexcept
    cdef void _release(self) noexcept
    cdef _TopicState _topic_locked(self, str topic)
    cdef _PartitionQueue _pq_locked(self, _TopicState ts, int32_t partition)
    cdef _PartitionQueue _find_locked(self, str topic, int32_t partition)
    cdef ProducerBatch _new_batch(self, _PartitionQueue pq, int64_t now_ms, int64_t reserved)
    cdef FutureRecordMetadata _append(self, str topic, int32_t partition, int64_t timestamp,
                                      const char *kp, Py_ssize_t kl, const char *vp,
                                      Py_ssize_t vl, object headers, object on_delivery,
                                      int64_t now_ms, int64_t max_block_ms, bint want_future)
