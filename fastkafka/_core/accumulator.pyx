# cython: language_level=3
"""The RecordAccumulator: one deque of open batches per partition, fed by user threads and drained
by the single sender thread (the Java ``RecordAccumulator`` responsibilities). The batches and their
completion objects are in :mod:`fastkafka._core.batch` (re-exported here); ``send_batch`` columns
are read by :mod:`fastkafka._core.columns`.

Threading
---------
``append`` / ``append_batch`` / ``sticky_partition`` run on user threads; everything else on the
sender thread. Shared state is guarded by one lock that is never held while blocking on the buffer
pool, while closing (compressing) a batch, while calling into ``cluster``, or while running a user
callback. Every time-dependent method takes ``now_ms`` (integer milliseconds, any monotonic origin).

Appending
---------
Every record, from ``send``/``produce`` (one at a time) or ``send_batch`` (lists or Arrow columns),
goes through one path, ``append_record_locked``: into the partition's open batch if it has room,
else (sticky partitioning: after moving to another partition once) into a new batch whose memory
comes from the buffer pool, waiting for it without the lock when it is not free.

>>> from fastkafka._core.bufferpool import BufferPool
>>> acc = RecordAccumulator(16384, 0, None, 5, 100, 120000, BufferPool(1 << 20, 16384), False)
>>> fut = acc.append("t", 0, 1000, b"k", b"v", None, None, 0, 1000)
>>> acc.queued_batches("t", 0)
1
"""
cimport cython
from cpython.buffer cimport PyBuffer_Release
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock, PyThread_acquire_lock,
    PyThread_release_lock, NOWAIT_LOCK, WAIT_LOCK,
)
from libc.stdint cimport int32_t, int64_t
from posix.time cimport CLOCK_MONOTONIC

from fastkafka._wire.records cimport (BatchBuilder, EncodedHeaders, record_size_c, headers_encoded_size, get_view,
                                      BATCH_HEADER_SIZE, pooled_builder)
from fastkafka._core.batch cimport (ProducerBatch, FutureRecordMetadata, BatchFuture, BatchListener,
                                    done_acquire, done_release, init_batch, resolve_batch,
                                    record_owners, new_future, count_batch_record)
from fastkafka._core.bufferpool cimport BufferPool
from fastkafka._core.columns cimport (Column, COL_NULL, prepare_column, prepare_int32_column,
                                      column_get)
from fastkafka._core.partitioner cimport StickyPartitioner

import logging
import threading

from fastkafka._wire.records import BatchBuilder as _PyBatchBuilder
from fastkafka._wire.records import buffer_counters
from fastkafka._core.bufferpool import pool_counters
from fastkafka._core.batch import batch_counters
import fastkafka._core.batch as _batch_module
from fastkafka.errors import (
    InvalidRecordError, MalformedRecordError, ProducerClosedError, RecordTooLargeError,
    UnknownPartitionError)

_log = logging.getLogger("fastkafka")

#: ``next_ready_check_ms`` when nothing is waiting to become sendable.
NO_DEADLINE = 9223372036854775807
#: Pass as ``partition`` to :meth:`RecordAccumulator.append` to use the topic's sticky partition.
PARTITION_STICKY = -1

cdef int64_t _NO_DEADLINE = 9223372036854775807

# The completion objects and the I/O-thread registry live in fastkafka._core.batch; they are
# re-exported here, where the producer, the sender and the tests import them from.
for _name in ("RecordMetadata", "ProducerBatch", "FutureRecordMetadata", "BatchFuture",
              "register_io_thread", "unregister_io_thread"):
    globals()[_name] = getattr(_batch_module, _name)
del _name

# Live-resource counter (touched with the GIL held): RecordAccumulators alive and not closed. The
# other counters are kept where their resources are made. See live_resources().
cdef int64_t _open_accumulators = 0

#: The counters :func:`live_resources` reports that must come back to where they were once
#: everything a piece of code opened is closed and collected (what the tests' teardown check reads).
LIVE_COUNTERS = ("accumulators_open", "io_threads", "producer_batches", "buffer_pools",
                 "buffer_pool_bytes", "batch_buffers", "batch_buffer_bytes",
                 "buffer_pool_overflow")


def live_resources():
    """live_resources() -> dict[str, int]: the compiled core's live resources in this process.

    * ``accumulators_open``: RecordAccumulators alive and not closed (one per open producer);
    * ``io_threads``: producer I/O threads running (registered with ``register_io_thread``);
    * ``producer_batches``: ProducerBatch objects alive (queued, in flight, or still referenced);
    * ``buffer_pools`` / ``buffer_pool_bytes``: BufferPools alive and the bytes they have handed
      to batches and not had back;
    * ``batch_buffers`` / ``batch_buffer_bytes``: batch buffers owned by live BatchBuilders (from
      a pool or not);
    * ``buffer_pool_overflow``: bytes of free batch buffers a pool keeps beyond its
      ``buffer_memory`` (always 0: the bytes held by live builders plus the free buffers never
      exceed it; ``pool_counters()`` has the free buffers themselves).

    Each comes back to its earlier value once everything opened in between is closed and garbage
    collected (the tests check this after every test: ``tests/live_resources.py``).

    >>> sorted(live_resources()) == sorted(LIVE_COUNTERS)
    True
    """
    cdef dict pools = pool_counters()
    cdef dict bufs = buffer_counters()
    cdef dict batches = batch_counters()
    return {
        "accumulators_open": _open_accumulators,
        "io_threads": batches["io_threads"],
        "producer_batches": batches["producer_batches"],
        "buffer_pools": pools["buffer_pools"],
        "buffer_pool_bytes": pools["buffer_pool_bytes"],
        "batch_buffers": bufs["batch_buffers"],
        "batch_buffer_bytes": bufs["batch_buffer_bytes"],
        "buffer_pool_overflow": pools["buffer_pool_overflow"],
    }


# ---------------------------------------------------------------------------------------------
# Per-partition state
# ---------------------------------------------------------------------------------------------

@cython.final
cdef class _PartitionQueue:
    pass


@cython.final
cdef class _TopicState:
    pass


# ---------------------------------------------------------------------------------------------
# RecordAccumulator
# ---------------------------------------------------------------------------------------------
cdef Py_ssize_t _retry_position(list batches, int32_t base_sequence):
    """Where a batch to retry goes in its partition's deque: at the head, after the retried batches
    with a lower sequence (so sequences stay in order); at the very head without a sequence."""
    cdef Py_ssize_t i = 0, n = PyList_GET_SIZE(batches)
    cdef ProducerBatch b
    if base_sequence < 0:
        return 0
    while i < n:
        b = <ProducerBatch>PyList_GET_ITEM(batches, i)
        if b.base_sequence >= 0 and b.base_sequence < base_sequence:
            i += 1
        else:
            break
    return i



# ---------------------------------------------------------------------------------------------
# The append path: one for send(), produce() and send_batch() (lists and Arrow)
# ---------------------------------------------------------------------------------------------

cdef inline ProducerBatch _append_to_tail(RecordAccumulator acc, _PartitionQueue pq,
                                          int64_t timestamp, const char *kp, Py_ssize_t kl,
                                          const char *vp, Py_ssize_t vl, object headers):
    """Append the record to the partition's open (last) batch: that batch, or None when there is
    none or it has no room (it is then closed for appends and the sender is to be woken)."""
    cdef ProducerBatch batch
    cdef Py_ssize_t nb = PyList_GET_SIZE(pq.batches)
    if nb:
        batch = <ProducerBatch>PyList_GET_ITEM(pq.batches, nb - 1)
        if not batch.full:
            if batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers):
                return batch
            batch.full = True
            acc.wakeup_pending = WAKE_NOW
    return None


cdef ProducerBatch append_record_locked(RecordAccumulator acc, _TopicState ts, int32_t partition,
                                        bint sticky, bint move_sticky, int64_t timestamp,
                                        const char *kp, Py_ssize_t kl, const char *vp,
                                        Py_ssize_t vl, object headers, Py_ssize_t hsize,
                                        int64_t now_ms, int64_t max_block_ms):
    """Append one record of ``ts.topic`` to ``partition``; return the batch it went into. Called
    with the accumulator's lock held, which is held again when this returns or raises (it is
    released while waiting for buffer memory).

    1. The partition's open batch, if it has room.
    2. ``sticky`` (``partition`` is the topic's sticky partition): the first time a new batch would
       be needed, the sticky partition moves to another of ``ts.available`` (the Java "abort on new
       batch") and its open batch is tried. Otherwise, with ``move_sticky``, a full batch in the
       current sticky partition moves it anyway (keyed records filled it).
    3. A new batch: its memory (the batch size, or the record's size when larger: ``hsize`` is the
       headers' encoded size, -1 to compute it here) from the buffer pool, waiting up to
       ``max_block_ms`` without the lock when it is not free; then the open batch is tried once
       more, since another thread may have started one meanwhile (the memory goes back then).
    ``now_ms`` < 0: the monotonic clock, read only when a batch is started."""
    cdef _PartitionQueue pq
    cdef ProducerBatch batch
    cdef bint switched = False
    cdef int32_t np
    cdef int64_t size
    cdef object cur
    cdef char *buf = NULL
    while True:
        pq = acc._pq_locked(ts, partition)
        batch = _append_to_tail(acc, pq, timestamp, kp, kl, vp, vl, headers)
        if batch is not None:
            return batch
        if sticky:
            if not switched:
                switched = True
                np = acc._sticky.next_partition(ts.topic, ts.available, partition)
                if np != partition:
                    partition = np
                    continue
        elif move_sticky and ts.available and PyList_GET_SIZE(pq.batches):
            cur = acc._sticky.current_c(ts.topic)
            if cur is not None and <int32_t>cur == partition:
                acc._sticky.next_partition(ts.topic, ts.available, partition)
        break
    # headers are validated here (TypeError naming the index) before memory is taken
    if hsize < 0:
        hsize = headers_encoded_size(headers) if headers is not None else 1
    size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl, hsize)
    if size < acc.batch_size:
        size = acc.batch_size
    # the bytes and (when one is free) the buffer, in one round of the pool's lock
    if not acc.buffer_pool.try_take_c(size, &buf):
        acc._release()
        try:
            acc.buffer_pool.allocate_buffer_c(size, max_block_ms, &buf)
        finally:
            acc._acquire()
        if acc._closed:
            acc.buffer_pool.give_back(buf, size)
            raise ProducerClosedError("the producer was closed while waiting for memory")
        batch = _append_to_tail(acc, pq, timestamp, kp, kl, vp, vl, headers)
        if batch is not None:
            acc.buffer_pool.give_back(buf, size)
            return batch
    if now_ms < 0:
        now_ms = clock_ms(CLOCK_MONOTONIC)
    # from here the builder owns the bytes and the buffer (and gives them back when freed)
    batch = acc._new_batch(pq, now_ms, size, buf)
    try:
        if not batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers):
            raise RuntimeError("BatchBuilder refused the first record of a new batch")
    except BaseException:
        batch.builder = None
        raise
    pq.batches.append(batch)
    acc._incomplete.add(batch)
    if acc.wakeup_pending == WAKE_NONE or (acc.wakeup_pending == WAKE_BY
                                           and batch.created_ms + acc.linger_ms < acc.wake_deadline_ms):
        acc.wakeup_pending = WAKE_BY
        acc.wake_deadline_ms = batch.created_ms + acc.linger_ms
    return batch


cdef class RecordAccumulator:
    """RecordAccumulator(batch_size, compression_type, compression_level, linger_ms,
    retry_backoff_ms, delivery_timeout_ms, buffer_pool, ordered)

    ``ordered=True`` mutes a partition from the moment one of its batches is drained until the
    sender calls :meth:`unmute` (after handling that batch's response), so at most one batch per
    partition is in flight.
    """

    def __cinit__(self, int64_t batch_size, compression_type, compression_level, int64_t linger_ms,
                  int64_t retry_backoff_ms, int64_t delivery_timeout_ms, BufferPool buffer_pool,
                  bint ordered):
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if buffer_pool is None:
            raise ValueError("buffer_pool is required")
        # validates the codec and level once, here, rather than on the first append
        _check = _PyBatchBuilder(batch_size, compression_type, compression_level)
        self._codec = _check.compression_type
        self._level = _check.compression_level
        del _check
        self.batch_size = batch_size
        self.compression_type = compression_type
        self.compression_level = compression_level
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.buffer_pool = buffer_pool
        self.ordered = ordered
        self._topics = {}
        self._queues = []
        self._incomplete = set()
        self._drain_index = {}
        self._failed = []
        self._flush_threads = {}
        self._sticky = StickyPartitioner()
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()
        global _open_accumulators
        _open_accumulators += 1
        self._counted = True

    def __dealloc__(self):
        global _open_accumulators
        if self._counted:
            self._counted = False
            _open_accumulators -= 1
        if self._lock != NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef void _acquire(self) noexcept:
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)

    cdef void _release(self) noexcept:
        PyThread_release_lock(self._lock)

    cdef _TopicState _topic_locked(self, str topic):
        cdef object ts
        cdef _TopicState t = self._last_topic
        if t is not None and t.topic is topic:  # the common case: the same topic object again
            return t
        ts = self._topics.get(topic)
        if ts is not None:
            self._last_topic = <_TopicState>ts
            return <_TopicState>ts
        t = _TopicState.__new__(_TopicState)
        t.topic = topic
        t.parts = []
        t.available = None
        self._topics[topic] = t
        return t

    cdef _PartitionQueue _pq_locked(self, _TopicState ts, int32_t partition):
        cdef object o
        cdef _PartitionQueue pq
        if partition < 0:
            raise UnknownPartitionError(f"invalid partition {partition} for topic {ts.topic!r}")
        if partition < PyList_GET_SIZE(ts.parts):
            o = <object>PyList_GET_ITEM(ts.parts, partition)
            if o is not None:
                return <_PartitionQueue>o
        else:
            ts.parts.extend([None] * (partition + 1 - len(ts.parts)))
        pq = _PartitionQueue.__new__(_PartitionQueue)
        pq.topic = ts.topic
        pq.partition = partition
        pq.batches = []
        pq.muted = False
        pq.tp = (ts.topic, partition)
        ts.parts[partition] = pq
        self._queues.append(pq)
        return pq

    cdef _PartitionQueue _find_locked(self, str topic, int32_t partition):
        cdef object ts = self._topics.get(topic)
        cdef object o
        if ts is None or partition < 0 or partition >= PyList_GET_SIZE((<_TopicState>ts).parts):
            return None
        o = <object>PyList_GET_ITEM((<_TopicState>ts).parts, partition)
        return <_PartitionQueue>o if o is not None else None

    cdef ProducerBatch _new_batch(self, _PartitionQueue pq, int64_t now_ms, int64_t reserved,
                                  char *buf):
        cdef BatchBuilder builder = pooled_builder(self.buffer_pool, buf, reserved,
                                                   self.batch_size, self._codec, self._level)
        cdef ProducerBatch b = ProducerBatch.__new__(ProducerBatch)
        init_batch(b, pq.topic, pq.partition, builder, now_ms)
        b.topic_partition = pq.tp
        b.reserved = reserved
        return b

    # -- appends (user threads) ---------------------------------------------------------------

    def sticky_partition(self, str topic, list available_partitions):
        """sticky_partition(topic, available_partitions) -> int

        The topic's current sticky partition for records without a key; it moves to another
        random available partition once its open batch is full (noticed by ``append``). The list
        is remembered for ``append(..., partition=PARTITION_STICKY, ...)``."""
        cdef _TopicState ts
        self._acquire()
        try:
            ts = self._topic_locked(topic)
            ts.available = available_partitions
            return self._sticky.partition(topic, available_partitions)
        finally:
            self._release()

    def append(self, str topic, int32_t partition, int64_t timestamp_ms, key, value, headers,
               on_delivery, int64_t now_ms, int64_t max_block_ms):
        """append(topic, partition, timestamp_ms, key, value, headers, on_delivery, now_ms,
        max_block_ms) -> FutureRecordMetadata

        Copy one record into the last open batch of the partition, or into a new batch whose
        memory comes from the buffer pool (waiting up to ``max_block_ms``; on failure nothing is
        appended). ``partition=PARTITION_STICKY`` (-1) uses the topic's sticky partition and, when
        that one needs a new batch, switches first (the Java "abort on new batch")."""
        cdef Py_buffer kview, vview
        cdef const char *kp = NULL
        cdef const char *vp = NULL
        cdef Py_ssize_t kl = -1, vl = -1
        cdef int krel = 0, vrel = 0
        krel = get_view(key, "key", &kview, &kp, &kl)
        try:
            vrel = get_view(value, "value", &vview, &vp, &vl)
            try:
                return self.append_c(topic, partition, timestamp_ms, kp, kl, vp, vl, headers,
                                     on_delivery, now_ms, max_block_ms, True)
            finally:
                if vrel:
                    PyBuffer_Release(&vview)
        finally:
            if krel:
                PyBuffer_Release(&kview)

    cdef FutureRecordMetadata append_c(self, str topic, int32_t partition, int64_t timestamp,
                                       const char *kp, Py_ssize_t kl, const char *vp,
                                       Py_ssize_t vl, object headers, object on_delivery,
                                       int64_t now_ms, int64_t max_block_ms, bint want_future):
        """``append`` from C (``send``/``produce``): the record's future, or None when
        ``want_future`` is false and there is no ``on_delivery`` (the record is still counted in
        its batch). ``partition`` < 0: the topic's sticky partition. ``now_ms`` < 0: the clock is
        read if a batch is started."""
        cdef _TopicState ts
        cdef ProducerBatch batch
        cdef bint sticky = partition < 0
        self._acquire()
        try:
            if self._closed:
                raise ProducerClosedError("the producer is closed")
            ts = self._topic_locked(topic)
            if sticky:
                if not ts.available:
                    raise UnknownPartitionError(
                        f"no available partitions known for topic {topic!r} "
                        f"(call sticky_partition() first)")
                partition = self._sticky.partition(topic, ts.available)
            batch = append_record_locked(self, ts, partition, sticky, True, timestamp, kp, kl, vp,
                                         vl, headers, -1, now_ms, max_block_ms)
            return new_future(batch, timestamp, kl, vl, on_delivery, want_future)
        finally:
            self._release()

    def append_batch(self, str topic, partitions, values, keys, headers, int64_t timestamp_ms,
                     BatchFuture future, int64_t now_ms, int64_t max_block_ms,
                     list available_partitions=None, int64_t max_record_size=-1):
        """append_batch(topic, partitions, values, keys, headers, timestamp_ms, future, now_ms,
        max_block_ms, available_partitions=None, max_record_size=-1) -> int appended

        ``values``/``keys``: lists of bytes-like/None or pyarrow binary/large_binary/string/
        large_string arrays (read straight from the Arrow buffers); ``keys`` may be None.
        ``partitions``: one int, or one int32 per record (list, array.array('i'), numpy int32,
        pyarrow int array), or ``PARTITION_STICKY`` (-1): the topic's sticky partition, switched
        to another of ``available_partitions`` each time a new batch is needed (null keys).
        ``headers``: None or one list for every record. ``max_record_size`` > 0: a record whose
        encoded size exceeds it raises ``RecordTooLargeError`` (before anything is appended). Everything is
        validated before the first record is appended (``InvalidRecordError`` names the index
        and type). ``future`` is sealed when this returns or raises; if the buffer pool times out
        part-way, the records appended so far stay queued and the error carries
        ``records_appended``."""
        cdef Column vc, kc
        cdef list keep = []
        cdef Py_ssize_t n, nk, i
        cdef int32_t single = 0
        cdef const int32_t *pp = NULL
        cdef Py_ssize_t hsize = 1
        cdef int32_t p, cur_p
        cdef const char *kp
        cdef const char *vp
        cdef Py_ssize_t kl, vl
        cdef Py_buffer kview, vview
        cdef bint krel = False, vrel = False, locked = False
        cdef int64_t size, appended = 0
        cdef _TopicState ts
        cdef _PartitionQueue pq = None
        cdef ProducerBatch batch
        cdef object err = None
        cdef bint sticky = False

        if future is None:
            raise ValueError("append_batch needs a BatchFuture")
        try:
            # ---- validation: nothing is appended if any of this fails ----
            n = prepare_column(values, &vc, "values", keep)
            if keys is None:
                kc.kind = COL_NULL
            else:
                nk = prepare_column(keys, &kc, "keys", keep)
                if nk != n:
                    raise MalformedRecordError(f"keys has {nk} elements but values has {n}")
            if headers is not None:
                try:
                    # encoded once for every record of the call (each record copies the bytes)
                    headers = EncodedHeaders(headers)
                    hsize = headers_encoded_size(headers)
                except TypeError as e:
                    raise InvalidRecordError(f"headers: {e}") from None
                except (ValueError, BufferError) as e:  # a lone surrogate, a released memoryview
                    raise MalformedRecordError(f"headers: {e}") from None
            if isinstance(partitions, int):
                single = partitions
                if single == PARTITION_STICKY:
                    sticky = True
                    if not available_partitions:
                        raise UnknownPartitionError(
                            f"no available partitions given for the sticky partitioning of "
                            f"topic {topic!r}")
                elif single < 0:
                    raise UnknownPartitionError(f"invalid partition {single}")
            else:
                pp = prepare_int32_column(partitions, n, keep)
                for i in range(n):
                    if pp[i] < 0:
                        raise UnknownPartitionError(f"partitions[{i}] = {pp[i]} is not a valid "
                                                    f"partition")

            if max_record_size > 0:
                for i in range(n):
                    column_get(&kc, i, &kp, &kl, &kview, &krel)
                    column_get(&vc, i, &vp, &vl, &vview, &vrel)
                    if krel:
                        PyBuffer_Release(&kview)
                        krel = False
                    if vrel:
                        PyBuffer_Release(&vview)
                        vrel = False
                    size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl, hsize)
                    if size > max_record_size:
                        raise RecordTooLargeError(
                            f"record {i} is {size} bytes when serialized, larger than the "
                            f"{max_record_size} bytes max_request_size allows")

            # ---- the loop ----
            self._acquire()
            locked = True
            if self._closed:
                raise ProducerClosedError("the producer is closed")
            ts = self._topic_locked(topic)
            if sticky:
                ts.available = available_partitions
                single = self._sticky.partition(topic, available_partitions)
            cur_p = -1
            for i in range(n):
                column_get(&kc, i, &kp, &kl, &kview, &krel)
                column_get(&vc, i, &vp, &vl, &vview, &vrel)
                p = pp[i] if pp != NULL else single
                if p != cur_p:
                    pq = self._pq_locked(ts, p)
                    cur_p = p
                # the open batch inline (most records), else the whole append path
                batch = _append_to_tail(self, pq, timestamp_ms, kp, kl, vp, vl, headers)
                if batch is None:
                    batch = append_record_locked(self, ts, p, sticky, False, timestamp_ms, kp, kl,
                                                 vp, vl, headers, hsize, now_ms, max_block_ms)
                    if batch.partition != cur_p:  # the sticky partition moved
                        cur_p = batch.partition
                        pq = self._pq_locked(ts, cur_p)
                        single = cur_p
                count_batch_record(batch, future)
                appended += 1
                if krel:
                    PyBuffer_Release(&kview)
                    krel = False
                if vrel:
                    PyBuffer_Release(&vview)
                    vrel = False
                if (i & 4095) == 4095:
                    # let other producer threads and the sender in
                    self._release()
                    locked = False
                    self._acquire()
                    locked = True
                    if self._closed:
                        raise ProducerClosedError("the producer was closed during send_batch")
        except BaseException as e:
            err = e
        finally:
            if krel:
                PyBuffer_Release(&kview)
            if vrel:
                PyBuffer_Release(&vview)
            if locked:
                self._release()
        future.seal(appended)
        if err is not None:
            try:
                err.records_appended = appended
            except Exception:
                pass
            raise err
        return appended

    # -- sender side ----------------------------------------------------------------------------

    def ready(self, cluster, int64_t now_ms):
        """ready(cluster, now_ms) -> (ready_nodes: set, next_ready_check_ms: int,
        unknown_leader_topics: set)

        ``next_ready_check_ms`` is a delay: the time until the first not-yet-sendable head batch
        becomes sendable (``NO_DEADLINE`` if none)."""
        cdef list cands = []
        cdef _PartitionQueue pq
        cdef ProducerBatch head
        cdef int64_t waited, time_to_wait, since, next_check = _NO_DEADLINE
        cdef bint backing_off, full, sendable, always
        cdef set ready_nodes = set()
        cdef set unknown = set()
        cdef object leader
        always = self.buffer_pool.has_waiters_c()
        self._acquire()
        try:
            always = always or self._closed or self._flushes > 0
            for pq in self._queues:
                if pq.muted or not pq.batches or (self.transactional and not pq.txn_added):
                    continue
                head = <ProducerBatch>PyList_GET_ITEM(pq.batches, 0)
                since = head.last_attempt_ms if head.last_attempt_ms > head.created_ms \
                    else head.created_ms
                waited = now_ms - since
                if head.attempts > 0:
                    backing_off = waited < self.retry_backoff_ms
                    time_to_wait = self.retry_backoff_ms
                else:
                    backing_off = False
                    time_to_wait = self.linger_ms
                full = PyList_GET_SIZE(pq.batches) > 1 or head.is_full_c()
                sendable = (full or waited >= time_to_wait or always) and not backing_off
                pq._sendable = sendable
                pq._time_left = time_to_wait - waited if time_to_wait > waited else 0
                cands.append(pq)
        finally:
            self._release()
        for pq in cands:
            leader = cluster.leader_for(pq.topic, pq.partition)
            if leader is None or leader < 0:
                unknown.add(pq.topic)
            elif leader in ready_nodes:
                continue
            elif pq._sendable:
                ready_nodes.add(leader)
            elif pq._time_left < next_check:
                next_check = pq._time_left
        return ready_nodes, next_check, unknown

    def drain(self, cluster, nodes, int64_t max_request_size, int64_t now_ms):
        """drain(cluster, nodes, max_request_size, now_ms) -> dict[node, list[ProducerBatch]]

        Per node: at most one batch per partition, partitions visited round-robin from where the
        previous drain of that node stopped, stopping before ``max_request_size`` would be
        exceeded (a first batch is always taken). Drained batches are closed (compressed)
        outside the lock; with ``ordered`` their partitions are muted."""
        cdef dict result = {}
        cdef list parts, out, closed_ok
        cdef Py_ssize_t n, start, idx, k
        cdef int64_t size, bsize
        cdef _PartitionQueue pq
        cdef ProducerBatch first
        cdef object tp
        for node in nodes:
            parts = list(cluster.partitions_for_node(node))
            n = len(parts)
            out = []
            if n == 0:
                result[node] = out
                continue
            start = self._drain_index.get(node, 0) % n
            idx = start
            size = 0
            self._acquire()
            try:
                for k in range(n):
                    tp = parts[idx]
                    idx = (idx + 1) % n
                    pq = self._find_locked(tp[0], tp[1])
                    if pq is None or pq.muted or not pq.batches or (
                            self.transactional and not pq.txn_added):
                        continue
                    first = <ProducerBatch>PyList_GET_ITEM(pq.batches, 0)
                    if first.attempts > 0 and now_ms - first.last_attempt_ms < self.retry_backoff_ms:
                        continue
                    bsize = first.builder.estimated_size_c()
                    if out and size + bsize > max_request_size:
                        idx = (idx + n - 1) % n     # start with this one next time
                        break
                    del pq.batches[0]
                    first.full = True
                    first.drained_ms = now_ms
                    size += bsize
                    out.append(first)
                    if self.ordered:
                        pq.muted = True
                else:
                    idx = (start + 1) % n           # full round: rotate the start
                self._drain_index[node] = idx
            finally:
                self._release()
            # compress outside the lock (the codec releases the GIL)
            closed_ok = []
            for first in out:
                try:
                    first.builder.close()
                except Exception as e:
                    # Completed by the sender (the one owner of batch outcomes): take_failed().
                    _log.exception("closing batch %r failed", first)
                    self._failed.append((first, e))
                    continue
                closed_ok.append(first)
            result[node] = closed_ok
        return result

    def reenqueue(self, ProducerBatch batch, int64_t now_ms):
        """reenqueue(batch, now_ms): put a batch to retry back at the head of its deque, after
        retried batches with a lower base_sequence (so sequences stay in order)."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._pq_locked(self._topic_locked(batch.topic), batch.partition)
            batch.attempts += 1
            batch.last_attempt_ms = now_ms
            batch.in_retry = True
            pq.batches.insert(_retry_position(pq.batches, batch.base_sequence), batch)
        finally:
            self._release()

    def split_and_reenqueue(self, ProducerBatch batch, int64_t now_ms, int parts=2):
        """split_and_reenqueue(batch, now_ms, parts=2) -> list[ProducerBatch] or None

        For a drained batch the broker refused as too large (MESSAGE_TOO_LARGE): its records,
        re-encoded and compressed again into up to ``parts`` batches balanced by size
        (``BatchBuilder.split``), go to the head of the partition's queue in record order (after
        retried batches with a lower sequence), and the pieces are returned. They take the
        records over: a record's future and callback, and its count in its ``send_batch``
        future, follow the piece that holds it; ``batch`` completes once every piece has. The
        pieces keep ``created_ms`` (the delivery timeout runs on) and the sequence range: piece k
        carries the producer id and epoch of ``batch`` and ``base_sequence`` + the index of its
        first record (stamped), so batches sequenced after ``batch`` stay valid. They are sent
        without a retry backoff. Each piece's buffer is exactly its size, from the buffer pool:
        the bytes of ``batch`` pass to them when no view of its buffer is alive (more taken, or the
        rest given back, without waiting), else they are taken anew without waiting
        (``BufferExhaustedError`` when the pool has not them free).

        None (nothing changed) for a batch of one record, a completed or already split one, or
        one whose records cannot be told apart by ``send_batch`` future (its records mixed with
        ``send``/``produce`` records without a callback, which the batch only counts)."""
        cdef list builders, pieces, owners, listeners, thunks, lists
        cdef ProducerBatch c
        cdef BatchBuilder nb
        cdef FutureRecordMetadata f
        cdef BatchListener l, src
        cdef _PartitionQueue pq
        cdef int32_t first, i, k
        cdef Py_ssize_t j, last, li
        if (batch.done or batch.children is not None or batch.builder is None
                or batch.record_count < 2 or batch.builder.count_c() != batch.record_count):
            return None
        done_acquire()
        owners = record_owners(batch)
        done_release()
        if owners is None:
            return None
        # re-encode and compress outside every lock (the codecs release the GIL)
        builders = batch.builder.split(parts)
        pieces = []
        first = 0
        for nb in builders:
            nb.close()
            c = ProducerBatch.__new__(ProducerBatch)
            init_batch(c, batch.topic, batch.partition, nb, batch.created_ms)
            c.topic_partition = batch.topic_partition
            c.record_count = nb.count_c()
            c.full = True
            c.parent = batch
            c.first_index = first
            if batch.base_sequence >= 0:
                c.producer_id = batch.producer_id
                c.producer_epoch = batch.producer_epoch
                c.base_sequence = (batch.base_sequence + first) & 0x7fffffff
            nb.stamp(c.producer_id, c.producer_epoch, c.base_sequence, self.transactional)
            first += nb.count_c()
            pieces.append(c)
        # hand callbacks and send_batch counts over to the pieces
        done_acquire()
        try:
            owners = record_owners(batch)   # again: add_callback may have run meanwhile
            if owners is None or batch.done:
                return None
            listeners = batch.listeners
            thunks = batch.thunks
            k = 0
            for c in pieces:
                last = -1
                l = None
                for j in range(c.first_index, c.first_index + c.record_count):
                    li = <Py_ssize_t>owners[j]
                    if li < 0:
                        continue
                    if li != last:
                        src = <BatchListener>listeners[li]
                        l = BatchListener.__new__(BatchListener)
                        l.future = src.future
                        l.count = 0
                        if c.listeners is None:
                            c.listeners = [l]
                        else:
                            c.listeners.append(l)
                        last = li
                    l.count += 1
            if thunks is not None:
                for f in thunks:
                    i = f.index
                    resolve_batch(f.batch, &i)
                    k = len(pieces) - 1
                    while k > 0 and (<ProducerBatch>pieces[k]).first_index > i:
                        k -= 1
                    c = <ProducerBatch>pieces[k]
                    if c.thunks is None:
                        c.thunks = [f]
                    else:
                        c.thunks.append(f)
            batch.thunks = None
            batch.listeners = None
            batch.last_listener = None
            batch.children_left = len(pieces)
            batch.children = pieces
        finally:
            done_release()
        # queue them where the batch would be retried; the batch's memory went to the pieces
        # (BatchBuilder.split), or goes back once its builder is freed
        self._acquire()
        try:
            pq = self._pq_locked(self._topic_locked(batch.topic), batch.partition)
            j = _retry_position(pq.batches, batch.base_sequence)
            pq.batches[j:j] = pieces
            for c in pieces:
                c.reserved = c.builder._cap
                self._incomplete.add(c)
            self._incomplete.discard(batch)
            batch.reserved = 0
            nb = batch.builder
            batch.builder = None
        finally:
            self._release()
        nb = None       # freed outside the lock: its buffer goes back to the pool
        return pieces

    # -- transactions ------------------------------------------------------------------------------

    def txn_pending_partitions(self):
        """txn_pending_partitions() -> list of (topic, partition): the partitions holding queued
        batches that are not yet part of the current transaction (AddPartitionsToTxn first)."""
        cdef list out = []
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for pq in self._queues:
                if pq.batches and not pq.txn_added:
                    out.append(pq.tp)
        finally:
            self._release()
        return out

    def txn_mark_added(self, partitions):
        """txn_mark_added(partitions): these (topic, partition) pairs joined the transaction; their
        batches may be drained from now on."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for topic, partition in partitions:
                self._pq_locked(self._topic_locked(topic), partition).txn_added = True
        finally:
            self._release()

    def txn_reset(self):
        """txn_reset(): the transaction ended; no partition is part of the next one yet."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for pq in self._queues:
                pq.txn_added = False
        finally:
            self._release()

    def mute(self, str topic, int32_t partition):
        self._acquire()
        try:
            self._pq_locked(self._topic_locked(topic), partition).muted = True
        finally:
            self._release()

    def unmute(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            if pq is not None:
                pq.muted = False
        finally:
            self._release()

    def is_muted(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return pq is not None and pq.muted
        finally:
            self._release()

    def expired_batches(self, int64_t now_ms):
        """expired_batches(now_ms) -> list: remove and return queued batches with
        ``created_ms + delivery_timeout_ms <= now_ms``; the caller completes them with
        ``DeliveryTimeoutError`` and deallocates them."""
        cdef list out = []
        cdef _PartitionQueue pq
        cdef ProducerBatch b
        cdef Py_ssize_t i, nb
        self._acquire()
        try:
            for pq in self._queues:
                nb = PyList_GET_SIZE(pq.batches)
                if not nb:
                    continue
                i = 0
                while i < nb:
                    b = <ProducerBatch>PyList_GET_ITEM(pq.batches, i)
                    if b.created_ms + self.delivery_timeout_ms <= now_ms:
                        b.full = True
                        out.append(b)
                        del pq.batches[i]
                        nb -= 1
                    else:
                        i += 1
        finally:
            self._release()
        return out

    def deallocate(self, ProducerBatch batch):
        """deallocate(batch): forget the batch and drop its builder, whose buffer and bytes go back
        to the pool as it is freed: at once, or when the last view of its bytes (a request still
        being written) is released (idempotent)."""
        cdef BatchBuilder builder
        self._acquire()
        try:
            self._incomplete.discard(batch)
            batch.reserved = 0
            builder = batch.builder
            batch.builder = None
        finally:
            self._release()
        builder = None      # freed outside the lock

    # -- flush / close -----------------------------------------------------------------------------

    def begin_flush(self):
        """Make every queued batch ready until this thread's flush ends."""
        cdef object me = threading.get_ident()
        self._acquire()
        self._flushes += 1
        self._flush_threads[me] = self._flush_threads.get(me, 0) + 1
        self._release()

    def end_flush(self):
        """End this thread's flush if ``await_flush_completion`` has not already done so."""
        self._acquire()
        try:
            self._end_flush_locked()
        finally:
            self._release()

    def _end_flush_locked(self):
        cdef object me = threading.get_ident()
        cdef object k = self._flush_threads.get(me)
        if k is None:
            return
        if k <= 1:
            del self._flush_threads[me]
        else:
            self._flush_threads[me] = k - 1
        if self._flushes > 0:
            self._flushes -= 1

    def wakeup_needed(self):
        """True (once) when an append filled a batch or started one since the last call: the
        sender should be woken to look at it."""
        cdef bint w = self.wakeup_pending != WAKE_NONE
        if w:
            self.wakeup_pending = WAKE_NONE
        return w

    def flush_in_progress(self):
        return self._flushes > 0

    def await_flush_completion(self, timeout_s=None):
        """await_flush_completion(timeout_s=None) -> int: wait for the batches incomplete now;
        return the number of their records still undelivered at the deadline. Ends the flush
        started by ``begin_flush``."""
        cdef list snapshot
        cdef ProducerBatch b
        cdef int64_t left = 0
        cdef double deadline = 0, remaining
        self._acquire()
        snapshot = list(self._incomplete)
        self._release()
        try:
            if timeout_s is not None:
                deadline = monotonic_ms() + timeout_s * 1000.0
            for b in snapshot:
                if b.done:
                    continue
                if timeout_s is None:
                    b.wait(None)
                else:
                    remaining = (deadline - monotonic_ms()) / 1000.0
                    if remaining <= 0 or not b.wait(remaining):
                        break
        finally:
            self._acquire()
            try:
                self._end_flush_locked()
            finally:
                self._release()
        for b in snapshot:
            if not b.done:
                left += b.record_count
        return left

    def has_undrained(self):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for pq in self._queues:
                if pq.batches:
                    return True
            return False
        finally:
            self._release()

    def has_incomplete(self):
        return len(self._incomplete) > 0

    def incomplete_record_count(self):
        cdef ProducerBatch b
        cdef int64_t n = 0
        self._acquire()
        try:
            for b in self._incomplete:
                if not b.done:
                    n += b.record_count
        finally:
            self._release()
        return n

    def take_failed(self):
        """take_failed() -> list[(ProducerBatch, Exception)]: the batches ``drain`` took out but
        could not close (encode or compress), still muted when ``ordered``; the sender completes
        them (it is the one owner of batch outcomes). Empties the list."""
        if not self._failed:
            return self._failed    # the common case, every turn: empty, and no list made
        out, self._failed = self._failed, []
        return out

    def abort_undrained(self):
        """abort_undrained() -> list[ProducerBatch]: remove every queued batch and return them
        (the caller completes them and gives their memory back)."""
        cdef list out = []
        cdef _PartitionQueue pq
        cdef ProducerBatch b
        self._acquire()
        try:
            for pq in self._queues:
                if pq.batches:
                    for b in pq.batches:
                        b.full = True
                    out.extend(pq.batches)
                    pq.batches = []
        finally:
            self._release()
        return out

    def close(self):
        """No more appends (``ProducerClosedError``); every queued batch becomes ready."""
        global _open_accumulators
        self._acquire()
        self._closed = True
        self._release()
        if self._counted:
            self._counted = False
            _open_accumulators -= 1

    @property
    def closed(self):
        return self._closed

    # -- stats -------------------------------------------------------------------------------------

    def queued_batches(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return 0 if pq is None else len(pq.batches)
        finally:
            self._release()

    def queued(self, str topic, int32_t partition):
        """The queued (undrained) batches of a partition, head first (a copy)."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return [] if pq is None else list(pq.batches)
        finally:
            self._release()

    def stats(self):
        """dict: batches_queued, records_queued, bytes_queued (uncompressed estimate),
        partitions_muted, incomplete_batches, buffer_total, buffer_available, buffer_waiters."""
        cdef _PartitionQueue pq
        cdef ProducerBatch b
        cdef int64_t nb = 0, nr = 0, nbytes = 0, muted = 0
        self._acquire()
        try:
            for pq in self._queues:
                if pq.muted:
                    muted += 1
                for b in pq.batches:
                    nb += 1
                    nr += b.record_count
                    if b.builder is not None:
                        nbytes += b.builder.estimated_size_c()
            inc = len(self._incomplete)
        finally:
            self._release()
        return {
            "batches_queued": nb,
            "records_queued": nr,
            "bytes_queued": nbytes,
            "partitions_muted": muted,
            "incomplete_batches": inc,
            "buffer_total": self.buffer_pool.total,
            "buffer_available": self.buffer_pool.available_memory,
            "buffer_waiters": self.buffer_pool.queued,
        }
