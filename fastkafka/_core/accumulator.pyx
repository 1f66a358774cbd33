# cython: language_level=3
"""The RecordAccumulator: one queue of open batches per partition, fed by user threads and drained
by the single sender thread (the Java ``RecordAccumulator`` responsibilities). The batches and their
completion objects are in :mod:`fastkafka._core.batch` (re-exported here); ``send_batch`` columns
are read by :mod:`fastkafka._core.columns`.

Threading
---------
``append`` / ``append_batch`` / ``sticky_partition`` run on user threads; everything else on the
sender thread. Shared state is guarded by one lock that is never held while blocking on the buffer
pool, while closing (compressing) a batch, while calling into ``cluster``, or while running a user
callback. Every time-dependent method takes ``now_ms`` (integer milliseconds, any monotonic origin).

C state
-------
What the I/O thread's GIL-free turn needs is in C memory (``accumulator.pxd``): the settings in
``AccState``, each partition's queue as a ring of owned batch references plus its leader, topic and
idempotence sequence state in a ``QueueState``, each batch's fields in its ``BatchState``. Both
turns of the I/O thread use the one readiness scan ``scan_c`` and the one drain ``drain_c``
(``accumulator_drain.pxi``; docs/internals.md, "One send pipeline").
:class:`IdempotenceState` (re-exported by :mod:`fastkafka.idempotence`) keeps its partitions' state
there.

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
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.mem cimport PyMem_RawMalloc, PyMem_RawRealloc, PyMem_RawFree
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF, Py_XDECREF
from libc.stdint cimport int16_t, int32_t, int64_t, INT64_MAX, INT64_MIN
from posix.time cimport CLOCK_MONOTONIC

from fastkafka._core.mutex cimport (pthread_mutex_init, pthread_mutex_destroy, pthread_mutex_lock,
                                    pthread_mutex_unlock, mutex_lock_gil)

from fastkafka._wire.records cimport (BatchBuilder, BuilderCore, EncodedHeaders, record_size_c,
                                      headers_encoded_size, get_view, BATCH_HEADER_SIZE,
                                      pooled_builder, builder_close_plain_c, builder_stamp_c)
from fastkafka._core.batch cimport (ProducerBatch, FutureRecordMetadata, BatchFuture, BatchListener,
                                    BatchState, done_acquire, done_release, init_batch,
                                    resolve_batch, record_owners, new_future, count_batch_record,
                                    set_builder, bs_full_c)
from fastkafka._core.express cimport ExpressNode
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
    UnknownPartitionError, OutOfOrderSequenceNumberError, UnknownProducerIdError,
    InvalidProducerEpochError)

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

cdef int _q_grow(QueueState *q) except -1:
    """Double the ring (at least 4 slots), keeping the order; the head moves to slot 0."""
    cdef Py_ssize_t ncap = q.cap * 2 if q.cap else 4, i
    cdef QEntry *nr = <QEntry *>PyMem_RawMalloc(ncap * sizeof(QEntry))
    if nr == NULL:
        raise MemoryError()
    for i in range(q.count):
        nr[i] = q.ring[(q.head + i) % q.cap]
    PyMem_RawFree(q.ring)
    q.ring = nr
    q.cap = ncap
    q.head = 0
    return 0


cdef int q_push_back(QueueState *q, ProducerBatch batch) except -1:
    cdef QEntry *e
    if q.count == q.cap:
        _q_grow(q)
    Py_INCREF(batch)
    e = &q.ring[(q.head + q.count) % q.cap]
    e.batch = <PyObject *>batch
    e.bs = &batch.s
    q.count += 1
    return 0


cdef int q_insert(QueueState *q, Py_ssize_t pos, ProducerBatch batch) except -1:
    cdef Py_ssize_t i
    cdef QEntry *e
    if pos < 0 or pos > q.count:
        raise IndexError(pos)
    if q.count == q.cap:
        _q_grow(q)
    Py_INCREF(batch)
    if pos == 0:                                # push front: nothing moves
        q.head = (q.head + q.cap - 1) % q.cap
        e = &q.ring[q.head]
    else:
        i = q.count
        while i > pos:
            q.ring[(q.head + i) % q.cap] = q.ring[(q.head + i - 1) % q.cap]
            i -= 1
        e = &q.ring[(q.head + pos) % q.cap]
    e.batch = <PyObject *>batch
    e.bs = &batch.s
    q.count += 1
    return 0


cdef PyObject *q_remove(QueueState *q, Py_ssize_t i) noexcept nogil:
    cdef PyObject *o
    if i < 0 or i >= q.count:
        return NULL
    if i == 0:
        return q_pop_front(q).batch
    o = q.ring[(q.head + i) % q.cap].batch
    while i < q.count - 1:
        q.ring[(q.head + i) % q.cap] = q.ring[(q.head + i + 1) % q.cap]
        i += 1
    q.ring[(q.head + q.count - 1) % q.cap].batch = NULL
    q.ring[(q.head + q.count - 1) % q.cap].bs = NULL
    q.count -= 1
    return o


cdef extern from "Python.h":
    # PyList_SET_ITEM taking the reference to steal as a pointer (no temporary object reference)
    void _list_set_owned "PyList_SET_ITEM" (object lst, Py_ssize_t i, PyObject *o)


cdef list q_list(QueueState *q, bint take):
    cdef list out = PyList_New(q.count)
    cdef Py_ssize_t i
    cdef QEntry *e
    for i in range(q.count):
        e = &q.ring[(q.head + i) % q.cap]
        if not take:
            Py_INCREF(<object>e.batch)
        _list_set_owned(out, i, e.batch)           # steals: the reference moves into the list
        if take:
            e.batch = NULL
            e.bs = NULL
    if take:
        q.count = 0
        q.head = 0
    return out


@cython.final
cdef class _PartitionQueue:
    """One partition's queue: its C state ``q`` (the ring of batches and the rest) and the Python
    objects that state points into (the topic's UTF-8 bytes)."""

    def __dealloc__(self):
        while self.q.count:
            Py_XDECREF(q_pop_front(&self.q).batch)
        PyMem_RawFree(self.q.ring)
        self.q.ring = NULL
        self.q.cap = 0


@cython.final
cdef class _TopicState:
    pass


# The ring holds its references in C memory, which the cyclic garbage collector does not see: a
# cycle through a queued batch (an error's traceback holding a frame that holds the producer...)
# would never be collected. So the queue's type visits (tp_traverse) and clears (tp_clear) the
# ring's references too, around what Cython generated for its object fields.
cdef extern from "Python.h":
    ctypedef int (*visitproc)(PyObject *, void *)
    ctypedef int (*traverseproc)(PyObject *, visitproc, void *)
    ctypedef int (*inquiry)(PyObject *)
    ctypedef struct _TypeGCSlots "PyTypeObject":
        traverseproc tp_traverse
        inquiry tp_clear

cdef traverseproc _pq_base_traverse = NULL
cdef inquiry _pq_base_clear = NULL


cdef int _pq_traverse(PyObject *o, visitproc visit, void *arg) noexcept:
    cdef QueueState *q = &(<_PartitionQueue>o).q
    cdef Py_ssize_t i
    cdef PyObject *b
    cdef int r
    for i in range(q.count):
        b = q.ring[(q.head + i) % q.cap].batch
        if b != NULL:
            r = visit(b, arg)
            if r:
                return r
    if _pq_base_traverse != NULL:
        return _pq_base_traverse(o, visit, arg)
    return 0


cdef int _pq_clear(PyObject *o) noexcept:
    cdef QueueState *q = &(<_PartitionQueue>o).q
    while q.count:
        Py_XDECREF(q_pop_front(q).batch)
    if _pq_base_clear != NULL:
        return _pq_base_clear(o)
    return 0


cdef _TypeGCSlots *_pq_type = <_TypeGCSlots *><PyObject *>_PartitionQueue
_pq_base_traverse = _pq_type.tp_traverse
_pq_base_clear = _pq_type.tp_clear
_pq_type.tp_traverse = _pq_traverse
_pq_type.tp_clear = _pq_clear


# ---------------------------------------------------------------------------------------------
# RecordAccumulator
# ---------------------------------------------------------------------------------------------
cdef Py_ssize_t _retry_position(QueueState *q, int32_t base_sequence) noexcept:
    """Where a batch to retry goes in its partition's queue: at the head, after the retried batches
    with a lower sequence (so sequences stay in order); at the very head without a sequence."""
    cdef Py_ssize_t i = 0, n = q_len(q)
    cdef BatchState *s
    if base_sequence < 0:
        return 0
    while i < n:
        s = &(<ProducerBatch>q_get(q, i)).s
        if s.base_sequence >= 0 and s.base_sequence < base_sequence:
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
    cdef Py_ssize_t nb = q_len(&pq.q)
    if nb:
        batch = <ProducerBatch>q_get(&pq.q, nb - 1)
        if not batch.s.full:
            if batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers):
                return batch
            batch.s.full = True
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
    cdef int64_t size, hint
    cdef BatchState *bs
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
        elif move_sticky and ts.available and q_len(&pq.q):
            cur = acc._sticky.current_c(ts.topic)
            if cur is not None and <int32_t>cur == partition:
                acc._sticky.next_partition(ts.topic, ts.available, partition)
        break
    # headers are validated here (TypeError naming the index) before memory is taken
    if hsize < 0:
        hsize = headers_encoded_size(headers) if headers is not None else 1
    size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl, hsize)
    # The buffer: the pool's size class for what the partition's last batch held (the one just
    # filled, else the last one drained), at least this record; it grows while records come
    # (BufferPool.grow_buffer). Memory then follows what the batches hold, not partitions x
    # batch_size.
    hint = pq.q.last_batch_len
    if q_len(&pq.q):
        bs = &(<ProducerBatch>q_get(&pq.q, q_len(&pq.q) - 1)).s
        if bs.bc != NULL and bs.bc.len > hint:
            hint = bs.bc.len
    size = acc.buffer_pool.class_for_c(hint if hint > size else size)
    # the bytes and (when one is free) the buffer, in one round of the pool's lock
    if not acc.buffer_pool.try_take_c(size, &buf):
        acc._release()
        try:
            acc.buffer_pool.allocate_buffer_c(size, max_block_ms, &buf)
        finally:
            acc._acquire()
        if acc.st.closed:
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
        set_builder(batch, None)
        raise
    q_push_back(&pq.q, batch)
    act_join(&acc.st, &pq.q)
    acc._incomplete.add(batch)
    if acc.wakeup_pending == WAKE_NONE or (acc.wakeup_pending == WAKE_BY
                                           and batch.s.created_ms + acc.st.linger_ms < acc.wake_deadline_ms):
        acc.wakeup_pending = WAKE_BY
        acc.wake_deadline_ms = batch.s.created_ms + acc.st.linger_ms
    return batch


# ---------------------------------------------------------------------------------------------
# Idempotence, in C (IdempotenceState wraps these; see fastkafka.idempotence)
# ---------------------------------------------------------------------------------------------

cdef enum:
    SEQUENCE_MAX = 0x7fffffff

cdef int _OUT_OF_ORDER = OutOfOrderSequenceNumberError.code
cdef int _UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code
cdef int _INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code


cdef int idem_stamp_c(IdemState *idem, QueueState *q, BatchState *bs) noexcept nogil:
    """IdempotenceState.stamp: 1 for a stale resend (it keeps its stamp), 0 when stamped or a retry
    keeping its stamp, -1 when the builder cannot be stamped (nothing changed)."""
    cdef int32_t seq
    if bs.base_sequence >= 0 and bs.producer_id == idem.producer_id:
        if bs.producer_epoch == idem.producer_epoch:
            return 0        # a retry of an already sequenced batch keeps its sequence
        if bs.producer_epoch > q.rewrite_epoch:
            return 1        # stale but intact: resent as it was, the broker deduplicates it
    seq = q.next_sequence
    if bs.bc == NULL or builder_stamp_c(bs.bc, idem.producer_id, <int16_t>idem.producer_epoch, seq,
                                        idem.transactional) != 0:
        return -1
    bs.producer_id = idem.producer_id
    bs.producer_epoch = idem.producer_epoch
    bs.base_sequence = seq
    q.next_sequence = (seq + bs.record_count) & SEQUENCE_MAX
    return 0


cdef int stamp_for_send_c(AccState *st, QueueState *q, BatchState *bs) noexcept nogil:
    cdef int r
    if st.idem == NULL:
        # header fields and CRC; no sequence without idempotence
        if bs.bc == NULL or builder_stamp_c(bs.bc, -1, -1, -1, False) != 0:
            return -1
        return 0
    r = idem_stamp_c(st.idem, q, bs)
    if r < 0:
        return -1
    # a stale resend, or the partition's first batch under this epoch (awaiting_first_ack): nothing
    # else of the partition goes out until it is resolved
    return 1 if r == 1 or q.last_acked_end < 0 else 0


cdef inline void _idem_break(QueueState *q, BatchState *bs) noexcept nogil:
    if bs.producer_epoch > q.rewrite_epoch:
        q.rewrite_epoch = bs.producer_epoch


include "accumulator_drain.pxi"


cdef int stamp_batch_for_send(RecordAccumulator acc, ProducerBatch batch) except -1:
    cdef QueueState *q = acc.qstate(batch.topic, batch.partition)
    cdef int r = stamp_for_send_c(&acc.st, q, &batch.s)
    if r < 0:
        raise ValueError(f"{batch!r} cannot be stamped (no builder, or not closed)")
    if r > 0:
        acc._acquire()
        q.muted = True
        acc._release()
    return 0


cdef int _grow_queues(AccState *st) except -1:
    cdef Py_ssize_t ncap = st.queues_cap * 2 if st.queues_cap else 16
    cdef QueueState **nq = <QueueState **>PyMem_RawRealloc(st.queues, ncap * sizeof(QueueState *))
    if nq == NULL:
        raise MemoryError()
    st.queues = nq
    st.queues_cap = ncap
    return 0


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
        self.st.linger_ms = linger_ms
        self.st.retry_backoff_ms = retry_backoff_ms
        self.st.delivery_timeout_ms = delivery_timeout_ms
        self.buffer_pool = buffer_pool
        self.st.ordered = ordered
        self._topics = {}
        self._queues = []
        self._incomplete = set()
        self._failed = []
        self._flush_threads = {}
        self._sticky = StickyPartitioner()
        if pthread_mutex_init(&self.st.lock, NULL) != 0:
            raise MemoryError("the accumulator's lock could not be created")
        self.st.lock_ready = True
        global _open_accumulators
        _open_accumulators += 1
        self._counted = True

    def __dealloc__(self):
        global _open_accumulators
        if self._counted:
            self._counted = False
            _open_accumulators -= 1
        if self.st.lock_ready:
            pthread_mutex_destroy(&self.st.lock)
            self.st.lock_ready = False
        # the queues' states are members of the _PartitionQueue objects (freed with them)
        PyMem_RawFree(self.st.queues)
        self.st.queues = NULL
        self.st.nqueues = 0

    # The settings kept in ``st`` (AccState), under their Python names.
    @property
    def linger_ms(self):
        return self.st.linger_ms

    @property
    def retry_backoff_ms(self):
        return self.st.retry_backoff_ms

    @property
    def delivery_timeout_ms(self):
        return self.st.delivery_timeout_ms

    @property
    def ordered(self):
        return self.st.ordered

    @property
    def transactional(self):
        return self.st.transactional

    @transactional.setter
    def transactional(self, bint v):
        self.st.transactional = v

    cdef void _acquire(self) noexcept:
        mutex_lock_gil(&self.st.lock)

    cdef void _release(self) noexcept:
        pthread_mutex_unlock(&self.st.lock)

    cdef QueueState *qstate(self, str topic, int32_t partition) except NULL:
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._pq_locked(self._topic_locked(topic), partition)
        finally:
            self._release()
        return &pq.q

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
        pq.topic_utf8 = ts.topic.encode("utf-8")
        pq.q.topic = pq.topic_utf8
        pq.q.topic_len = len(pq.topic_utf8)
        pq.q.partition = partition
        pq.q.leader = -1
        pq.q.owner = <PyObject *>pq
        pq.q.next_sequence = 0
        pq.q.last_acked_end = -1
        pq.q.last_acked_offset = -1
        pq.q.rewrite_epoch = -1
        pq.tp = (ts.topic, partition)
        if self.st.nqueues == self.st.queues_cap:
            _grow_queues(&self.st)
        ts.parts[partition] = pq
        self._queues.append(pq)         # keeps it (and its QueueState) alive
        self.st.queues[self.st.nqueues] = &pq.q
        self.st.nqueues += 1
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
            if self.st.closed:
                raise ProducerClosedError("the producer is closed")
            ts = self._topic_locked(topic)
            if sticky:
                if not ts.available:
                    raise UnknownPartitionError(
                        f"no available partitions known for topic {topic!r} "
                        f"(call sticky_partition() first)")
                partition = self._sticky.partition_c(topic, ts.available)
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
            if self.st.closed:
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
                    if self.st.closed:
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

    cdef int _sync_leaders(self, cluster) except -1:
        """Each partition's leader (QueueState.leader, what scan_c and drain_c go by) from
        ``cluster.leader_for`` (-1 when unknown): every partition's when ``cluster`` is not the one
        they were read from (metadata changed), else those of partitions made since. Calls into
        ``cluster`` outside the lock."""
        cdef list pqs
        cdef list leaders
        cdef Py_ssize_t i, n
        cdef object leader
        self._acquire()
        n = len(self._queues)
        if cluster is self._leaders_of:
            pqs = self._queues[self._nresolved:n] if self._nresolved < n else None
        else:
            pqs = self._queues[:n]
        self._release()
        if pqs is None:
            return 0
        leaders = [cluster.leader_for((<_PartitionQueue>pq).topic, (<_PartitionQueue>pq).partition)
                   for pq in pqs]
        self._acquire()
        for i in range(len(pqs)):
            leader = leaders[i]
            (<_PartitionQueue>pqs[i]).q.leader = -1 if leader is None or leader < 0 else leader
        self._leaders_of = cluster
        self._nresolved = n
        self._release()
        return 0

    def ready(self, cluster, int64_t now_ms):
        """ready(cluster, now_ms) -> (ready_nodes: set, next_ready_check_ms: int,
        unknown_leader_topics: set)

        scan_c for the GIL turn: the leaders with a sendable head batch; ``next_ready_check_ms`` is
        a delay, the time until the first not-yet-sendable head batch becomes sendable
        (``NO_DEADLINE`` if none); the topics of partitions with batches and no known leader."""
        cdef Readiness r
        cdef int32_t small[16]
        cdef int32_t *buf = small
        cdef Py_ssize_t cap = 16, i
        cdef bint force = self.buffer_pool.has_waiters_c()
        cdef set unknown = set()
        cdef QueueState *q
        self._sync_leaders(cluster)
        try:
            while True:
                r.ready = buf
                r.ready_cap = cap
                with nogil:
                    scan_c(&self.st, NULL, 0, force, now_ms, now_ms, &r)
                if r.nready <= cap:
                    break
                if buf != small:
                    PyMem_RawFree(buf)
                cap = r.nready * 2
                buf = <int32_t *>PyMem_RawMalloc(cap * sizeof(int32_t))
                if buf == NULL:
                    raise MemoryError()
            ready_nodes = {buf[i] for i in range(r.nready)}
        finally:
            if buf != small:
                PyMem_RawFree(buf)
        if r.unknown:
            self._acquire()
            q = self.st.act_head
            while q != NULL:
                if q.leader < 0 and queue_drainable_c(&self.st, q):
                    unknown.add((<_PartitionQueue>q.owner).topic)
                q = q.act_next
            self._release()
        return (ready_nodes, r.next_ready - now_ms if r.next_ready != INT64_MAX else _NO_DEADLINE,
                unknown)

    def refresh_leaders(self, cluster):
        """refresh_leaders(cluster): every partition's leader (QueueState.leader) from
        ``cluster.leader_for`` (-1 when unknown). ready() and drain() do it when given another
        cluster than the last one."""
        self._leaders_of = None
        self._sync_leaders(cluster)

    def drain(self, cluster, nodes, int64_t max_request_size, int64_t now_ms):
        """drain(cluster, nodes, max_request_size, now_ms) -> dict[node, list[ProducerBatch]]

        drain_c for the GIL turn: per node, at most one sendable batch per partition it leads, the
        partitions drained least recently first, stopping before ``max_request_size`` would be
        exceeded (a first batch is always taken). Drained batches are closed (compressed) outside
        the lock; with ``ordered`` their partitions are muted."""
        cdef dict result = {}
        cdef list closed_ok
        cdef Py_ssize_t nn = len(nodes), i, got, cap
        cdef ExpressNode *ns
        cdef ExpressBatch *out
        cdef ProducerBatch first
        cdef bint force = self.buffer_pool.has_waiters_c()
        for node in nodes:
            result[node] = []
        if nn == 0:
            return result
        self._sync_leaders(cluster)
        self._acquire()
        cap = self.st.nactive
        self._release()
        if cap <= 0:
            return result
        ns = <ExpressNode *>PyMem_RawMalloc(nn * sizeof(ExpressNode))
        out = <ExpressBatch *>PyMem_RawMalloc(cap * sizeof(ExpressBatch))
        try:
            if ns == NULL or out == NULL:
                raise MemoryError()
            i = 0
            for node in nodes:
                ns[i].node_id = node
                ns[i].room = 1
                i += 1
            with nogil:
                got = drain_c(&self.st, ns, nn, max_request_size, force, False, now_ms, out, cap)
            for i in range(got):
                (<list>result[out[i].node_id]).append(express_take_batch(&out[i]))
        finally:
            PyMem_RawFree(ns)
            PyMem_RawFree(out)
        # compress outside the lock (the codec releases the GIL)
        for node in result:
            closed_ok = []
            for first in result[node]:
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
            batch.s.attempts += 1
            batch.s.last_attempt_ms = now_ms
            batch.s.in_retry = True
            q_insert(&pq.q, _retry_position(&pq.q, batch.s.base_sequence), batch)
            act_join(&self.st, &pq.q)
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
                or batch.s.record_count < 2 or batch.builder.count_c() != batch.s.record_count):
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
            init_batch(c, batch.topic, batch.partition, nb, batch.s.created_ms)
            c.topic_partition = batch.topic_partition
            c.s.record_count = nb.count_c()
            c.s.full = True
            c.parent = batch
            c.first_index = first
            if batch.s.base_sequence >= 0:
                c.s.producer_id = batch.s.producer_id
                c.s.producer_epoch = batch.s.producer_epoch
                c.s.base_sequence = (batch.s.base_sequence + first) & 0x7fffffff
            nb.stamp(c.s.producer_id, c.s.producer_epoch, c.s.base_sequence, self.st.transactional)
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
                for j in range(c.first_index, c.first_index + c.s.record_count):
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
            j = _retry_position(&pq.q, batch.s.base_sequence)
            for c in pieces:
                q_insert(&pq.q, j, c)
                act_join(&self.st, &pq.q)
                j += 1
                c.reserved = c.builder.c.cap
                self._incomplete.add(c)
            self._incomplete.discard(batch)
            batch.reserved = 0
            nb = batch.builder
            set_builder(batch, None)
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
                if q_len(&pq.q) and not pq.q.txn_added:
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
                self._pq_locked(self._topic_locked(topic), partition).q.txn_added = True
        finally:
            self._release()

    def txn_reset(self):
        """txn_reset(): the transaction ended; no partition is part of the next one yet."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for pq in self._queues:
                pq.q.txn_added = False
        finally:
            self._release()

    def mute(self, str topic, int32_t partition):
        self._acquire()
        try:
            self._pq_locked(self._topic_locked(topic), partition).q.muted = True
        finally:
            self._release()

    def unmute(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            if pq is not None:
                pq.q.muted = False
        finally:
            self._release()

    def is_muted(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return pq is not None and pq.q.muted
        finally:
            self._release()

    def expired_batches(self, int64_t now_ms):
        """expired_batches(now_ms) -> list: remove and return queued batches with
        ``created_ms + delivery_timeout_ms <= now_ms``; the caller completes them with
        ``DeliveryTimeoutError`` and deallocates them."""
        cdef list out = []
        cdef QueueState *q
        cdef BatchState *bs
        cdef PyObject *o
        cdef Py_ssize_t i, nb
        self._acquire()
        try:
            q = self.st.act_head       # only partitions with queued batches
            while q != NULL:
                nb = q_len(q)
                i = 0
                while i < nb:
                    bs = q_bs(q, i)
                    if bs.created_ms + self.st.delivery_timeout_ms <= now_ms:
                        bs.full = True
                        o = q_remove(q, i)
                        out.append(<object>o)
                        Py_XDECREF(o)           # the queue's reference moved into ``out``
                        nb -= 1
                    else:
                        i += 1
                q = q.act_next
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
            set_builder(batch, None)
        finally:
            self._release()
        builder = None      # freed outside the lock

    # -- flush / close -----------------------------------------------------------------------------

    def begin_flush(self):
        """Make every queued batch ready until this thread's flush ends."""
        cdef object me = threading.get_ident()
        self._acquire()
        self.st.flushes += 1
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
        if self.st.flushes > 0:
            self.st.flushes -= 1

    def wakeup_needed(self):
        """True (once) when an append filled a batch or started one since the last call: the
        sender should be woken to look at it."""
        cdef bint w = self.wakeup_pending != WAKE_NONE
        if w:
            self.wakeup_pending = WAKE_NONE
        return w

    def flush_in_progress(self):
        return self.st.flushes > 0

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
                left += b.s.record_count
        return left

    def has_undrained(self):
        cdef QueueState *q
        self._acquire()
        q = self.st.act_head
        while q != NULL and q.count == 0:
            q = q.act_next
        self._release()
        return q != NULL

    def has_incomplete(self):
        return len(self._incomplete) > 0

    def incomplete_record_count(self):
        cdef ProducerBatch b
        cdef int64_t n = 0
        self._acquire()
        try:
            for b in self._incomplete:
                if not b.done:
                    n += b.s.record_count
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
        cdef Py_ssize_t i
        self._acquire()
        try:
            for pq in self._queues:
                if q_len(&pq.q):
                    for i in range(q_len(&pq.q)):
                        q_bs(&pq.q, i).full = True
                    out.extend(q_list(&pq.q, True))
        finally:
            self._release()
        return out

    def close(self):
        """No more appends (``ProducerClosedError``); every queued batch becomes ready."""
        global _open_accumulators
        self._acquire()
        self.st.closed = True
        self._release()
        if self._counted:
            self._counted = False
            _open_accumulators -= 1

    @property
    def closed(self):
        return self.st.closed

    # -- stats -------------------------------------------------------------------------------------

    def queued_batches(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return 0 if pq is None else q_len(&pq.q)
        finally:
            self._release()

    def queued(self, str topic, int32_t partition):
        """The queued (undrained) batches of a partition, head first (a copy)."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return [] if pq is None else q_list(&pq.q, False)
        finally:
            self._release()

    def stats(self):
        """dict: batches_queued, records_queued, bytes_queued (uncompressed estimate),
        partitions_muted, incomplete_batches, buffer_total, buffer_available, buffer_waiters."""
        cdef _PartitionQueue pq
        cdef ProducerBatch b
        cdef Py_ssize_t i
        cdef int64_t nb = 0, nr = 0, nbytes = 0, muted = 0
        self._acquire()
        try:
            for pq in self._queues:
                if pq.q.muted:
                    muted += 1
                for i in range(q_len(&pq.q)):
                    b = <ProducerBatch>q_get(&pq.q, i)
                    nb += 1
                    nr += b.s.record_count
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


# ---------------------------------------------------------------------------------------------
# IdempotenceState
# ---------------------------------------------------------------------------------------------

@cython.final
@cython.no_gc_clear
cdef class IdempotenceState:
    """IdempotenceState(accumulator, transactional=False): the idempotent producer's id, epoch and
    per-partition sequence state (see :mod:`fastkafka.idempotence`, which re-exports it).

    The producer id / epoch are in a C struct the accumulator reaches (its drain stamps batches
    without the GIL); each partition's next sequence, last acknowledged sequence end and offset,
    and rewrite epoch are in that partition's state in ``accumulator``. The I/O thread's only.

    >>> from fastkafka._core.bufferpool import BufferPool
    >>> acc = RecordAccumulator(16384, 0, None, 5, 100, 120000, BufferPool(1 << 20, 16384), False)
    >>> idem = IdempotenceState(acc)
    >>> idem.has_producer_id()
    False
    >>> idem.set_producer_id(7, 0); idem.has_producer_id()
    True
    """

    def __cinit__(self, RecordAccumulator accumulator, bint transactional=False):
        if accumulator is None:
            raise ValueError("IdempotenceState needs the producer's RecordAccumulator")
        self.accumulator = accumulator
        self.st.producer_id = -1
        self.st.producer_epoch = -1
        self.st.bump_required = False
        self.st.transactional = transactional
        self.init_in_flight = False
        self.epoch_bumps = 0
        accumulator.st.idem = &self.st     # the newest one is the accumulator's (its drain's)

    def __dealloc__(self):
        if self.accumulator is not None and self.accumulator.st.idem == &self.st:
            self.accumulator.st.idem = NULL

    # -- the producer's id and epoch ---------------------------------------------------------------

    @property
    def transactional(self):
        """Batches carry the transactional attribute bit."""
        return self.st.transactional

    @property
    def producer_id(self):
        return self.st.producer_id

    @producer_id.setter
    def producer_id(self, int64_t v):
        self.st.producer_id = v

    @property
    def producer_epoch(self):
        return self.st.producer_epoch

    @producer_epoch.setter
    def producer_epoch(self, int32_t v):
        self.st.producer_epoch = v

    @property
    def bump_required(self):
        return self.st.bump_required

    @bump_required.setter
    def bump_required(self, bint v):
        self.st.bump_required = v

    def has_producer_id(self):
        return self.st.producer_id >= 0 and not self.st.bump_required

    def set_producer_id(self, int64_t producer_id, int32_t epoch):
        cdef AccState *a = &self.accumulator.st
        cdef QueueState *q
        cdef Py_ssize_t i
        cdef bint new_id = producer_id != self.st.producer_id
        if new_id or epoch != self.st.producer_epoch:
            self.accumulator._acquire()
            for i in range(a.nqueues):
                q = a.queues[i]
                q.next_sequence = 0
                q.last_acked_end = -1
                q.last_acked_offset = -1
                if new_id:
                    q.rewrite_epoch = -1  # a new id: every unacknowledged batch is re-stamped anyway
            self.accumulator._release()
        if self.st.producer_id >= 0:
            self.epoch_bumps += 1
            _log.info("idempotent producer id %d epoch %d -> id %d epoch %d",
                      self.st.producer_id, self.st.producer_epoch, producer_id, epoch)
        self.st.producer_id = producer_id
        self.st.producer_epoch = epoch
        self.st.bump_required = False

    def init_request_body(self):
        """InitProducerId body: v3+ carries the current id/epoch so the broker bumps the epoch."""
        return {"transactional_id": None, "transaction_timeout_ms": 2**31 - 1,
                "producer_id": self.st.producer_id, "producer_epoch": self.st.producer_epoch}

    # -- per batch ---------------------------------------------------------------------------------

    cdef QueueState *_q(self, ProducerBatch batch) except NULL:
        return self.accumulator.qstate(batch.topic, batch.partition)

    def stamp(self, ProducerBatch batch):
        """stamp(batch) -> bool: give a drained (closed) batch its sequence (first send, or first
        send after an epoch bump). True when the batch goes out with the stamp of an older epoch (a
        resend the broker may already have): nothing else of its partition may be sent until it
        completes. The same rule as the drain's (stamp_for_send_c)."""
        cdef int r = idem_stamp_c(&self.st, self._q(batch), &batch.s)
        if r < 0:
            raise ValueError(f"{batch!r} cannot be stamped (no builder, or not closed)")
        return r == 1

    def awaiting_first_ack(self, ProducerBatch batch):
        """True while no batch of ``batch``'s partition was acknowledged under the current epoch.

        A broker that holds no state for this producer on a partition accepts *any* first sequence
        (Apache Kafka does). If the first batch failed with a retriable error while a later one was
        in flight behind it, the later one would be written first and the first could never follow
        it. So until the first acknowledgement, a partition has one batch in flight."""
        return self._q(batch).last_acked_end < 0

    def is_stale(self, ProducerBatch batch):
        return (batch.s.base_sequence >= 0 and batch.s.producer_id == self.st.producer_id
                and batch.s.producer_epoch != self.st.producer_epoch)

    def acked(self, ProducerBatch batch, int64_t base_offset=-1):
        cdef QueueState *q
        if batch.s.producer_epoch == self.st.producer_epoch and batch.s.producer_id == self.st.producer_id:
            q = self._q(batch)
            q.last_acked_end = (batch.s.base_sequence + batch.s.record_count) & SEQUENCE_MAX
            if base_offset >= 0:
                q.last_acked_offset = base_offset + batch.s.record_count - 1

    def data_loss(self, ProducerBatch batch, int code):
        """``(acked_sequence_end, acked_offset)`` when ``code`` on ``batch`` means the broker lost
        records it acknowledged: OUT_OF_ORDER_SEQUENCE_NUMBER on the very batch that follows the
        last acknowledged one, under the current epoch, after at least one acknowledgement (the
        broker then had this producer's sequence, and no longer has it). Else None."""
        cdef QueueState *q
        if code != _OUT_OF_ORDER or batch.s.producer_id != self.st.producer_id \
                or batch.s.producer_epoch != self.st.producer_epoch:
            return None
        q = self._q(batch)
        if q.last_acked_end < 0 or batch.s.base_sequence != q.last_acked_end:
            return None
        return q.last_acked_end, q.last_acked_offset

    def unresolved(self, ProducerBatch batch):
        """A sequenced batch failed for good: the broker may or may not have it, and either way the
        partition's next sequence no longer follows. Re-stamp the partition under a new epoch."""
        if batch.s.base_sequence < 0 or batch.s.producer_id != self.st.producer_id \
                or self.st.producer_id < 0:
            return
        _idem_break(self._q(batch), &batch.s)
        if batch.s.producer_epoch == self.st.producer_epoch:
            self.st.bump_required = True

    def on_sequence_error(self, ProducerBatch batch, int code):
        """A sequence error for ``batch`` (which is retried). True when it requires an epoch bump;
        False when it only reflects an earlier batch of the partition that failed and is being
        retried, or when the batch is re-stamped under the current epoch on its next drain."""
        cdef QueueState *q
        cdef int32_t end
        if batch.s.base_sequence < 0 or batch.s.producer_id != self.st.producer_id:
            return False    # stamped under another producer id: re-stamped on its next drain
        q = self._q(batch)
        if batch.s.producer_epoch != self.st.producer_epoch:
            _idem_break(q, &batch.s)   # a stale resend the broker no longer accepts: re-stamp it
            return False
        end = q.last_acked_end if q.last_acked_end >= 0 else 0
        if code == _UNKNOWN_PRODUCER_ID or code == _INVALID_PRODUCER_EPOCH \
                or batch.s.base_sequence == end:
            _idem_break(q, &batch.s)
            return True
        return False

    def sequence_state(self, str topic, int32_t partition):
        """sequence_state(topic, partition) -> (next_sequence, last_acked_end, last_acked_offset,
        rewrite_epoch): a partition's sequence state (None for "none"), for tests and debugging."""
        cdef QueueState *q = self.accumulator.qstate(topic, partition)
        return (q.next_sequence, None if q.last_acked_end < 0 else q.last_acked_end,
                None if q.last_acked_offset < 0 else q.last_acked_offset,
                None if q.rewrite_epoch < 0 else q.rewrite_epoch)


# ---------------------------------------------------------------------------------------------
# Test seam
# ---------------------------------------------------------------------------------------------

def _drain_express_for_test(RecordAccumulator acc, nodes, int64_t max_request_size,
                            int64_t now_ms, Py_ssize_t out_cap=64):
    """FOR TESTS ONLY: run drain_c in its GIL-free mode (without the GIL) for ``nodes`` (a list
    of (node_id, room)) and return its output as a list of (node_id, batch); the batches' owned
    references move into the list. Also returns scan_c's ``next_nogil`` for the same nodes before
    the drain: ``(deadline, [(node_id, batch), ...])``."""
    cdef Py_ssize_t n = len(nodes), i, got
    cdef ExpressNode *ns = <ExpressNode *>PyMem_RawMalloc((n if n else 1) * sizeof(ExpressNode))
    cdef ExpressBatch *out = <ExpressBatch *>PyMem_RawMalloc((out_cap if out_cap > 0 else 1)
                                                             * sizeof(ExpressBatch))
    cdef int64_t deadline
    cdef Readiness r
    cdef list res = []
    if ns == NULL or out == NULL:
        PyMem_RawFree(ns)
        PyMem_RawFree(out)
        raise MemoryError()
    try:
        for i in range(n):
            ns[i].node_id = nodes[i][0]
            ns[i].room = nodes[i][1]
        r.ready = NULL
        r.ready_cap = 0
        with nogil:
            scan_c(&acc.st, ns, n, False, now_ms, now_ms, &r)
            got = drain_c(&acc.st, ns, n, max_request_size, False, True, now_ms, out, out_cap)
        deadline = r.next_nogil
        for i in range(got):
            res.append((out[i].node_id, express_take_batch(&out[i])))
    finally:
        PyMem_RawFree(ns)
        PyMem_RawFree(out)
    return deadline, res
