# cython: language_level=3
"""The RecordAccumulator: one queue of open batches per partition, fed by user threads and drained
by the single sender thread (the Java ``RecordAccumulator`` responsibilities). The batches and their
completion objects are in :mod:`fastkafka._producer.batch` (re-exported here); ``send_batch`` columns
are read by :mod:`fastkafka._producer.columns`.

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
:class:`IdempotenceState` (``accumulator_idempotence.pxi``) keeps its partitions' state
there.

Appending
---------
Every record, from ``send``/``produce`` (one at a time) or ``send_batch`` (lists or Arrow columns),
goes through one path, ``append_record_locked``: into the partition's open batch if it has room,
else (sticky partitioning: after moving to another partition once) into a new batch whose memory
comes from the buffer pool, waiting for it without the lock when it is not free.

>>> from fastkafka._producer.bufferpool import BufferPool
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

from fastkafka._net.mutex cimport (pthread_mutex_init, pthread_mutex_destroy, pthread_mutex_lock,
                                    pthread_mutex_unlock, mutex_lock_gil)

from fastkafka._wire.records cimport (BatchBuilder, BuilderCore, EncodedHeaders, record_size_c,
                                      headers_encoded_size, get_view, BATCH_HEADER_SIZE,
                                      pooled_builder, builder_close_c, builder_close_plain_c,
                                      builder_stamp_c)
from fastkafka._producer.batch cimport (ProducerBatch, FutureRecordMetadata, BatchFuture, BatchListener,
                                    BatchState, done_acquire, done_release, init_batch,
                                    resolve_batch, record_owners, new_future, count_batch_record,
                                    set_builder, bs_full_c)
from fastkafka._producer.bufferpool cimport BufferPool
from fastkafka._producer.columns cimport (Column, COL_NULL, prepare_column, prepare_int32_column,
                                      column_get, TsColumn, prepare_timestamps, ts_get,
                                      HeaderColumn, prepare_headers_column, headers_size,
                                      headers_write)
from fastkafka._producer.partitioner cimport StickyPartitioner

import logging
import threading

from fastkafka._wire.records import BatchBuilder as _PyBatchBuilder
from fastkafka._wire.records import buffer_counters
from fastkafka._producer.bufferpool import pool_counters
from fastkafka._producer.batch import batch_counters
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

include "accumulator_diagnostics.pxi"


include "accumulator_ring.pxi"


include "accumulator_append.pxi"


include "accumulator_drain.pxi"


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
        pq.q.inflight = 0
        pq.q.inflight_node = -1
        pq.q.owner = <PyObject *>pq
        pq.q.next_sequence = 0
        pq.q.last_acked_end = -1
        pq.q.last_acked_offset = -1
        pq.q.rewrite_epoch = -1
        if self.sampled is not None:    # its topic's windowed statistics (java_metrics)
            pq.q.tm = self.sampled.topic_c(ts.topic)
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
                                         vl, headers, -1, now_ms, max_block_ms, NULL)
            return new_future(batch, timestamp, kl, vl, on_delivery, want_future)
        finally:
            self._release()

    def append_batch(self, str topic, partitions, values, keys, headers, int64_t timestamp_ms,
                     BatchFuture future, int64_t now_ms, int64_t max_block_ms,
                     list available_partitions=None, int64_t max_record_size=-1,
                     timestamps=None, record_headers=None):
        """append_batch(topic, partitions, values, keys, headers, timestamp_ms, future, now_ms,
        max_block_ms, available_partitions=None, max_record_size=-1, timestamps=None,
        record_headers=None) -> int appended

        ``values``/``keys``: lists of bytes-like/str/None or pyarrow binary/large_binary/string/
        large_string arrays (read straight from the Arrow buffers); ``keys`` may be None.
        ``partitions``: one int, or one int32 per record (list, array.array('i'), numpy int32,
        pyarrow int array), or ``PARTITION_STICKY`` (-1): the topic's sticky partition, switched
        to another of ``available_partitions`` each time a new batch is needed (null keys).
        ``headers``: None or one list for every record (after each record's own
        ``record_headers``: a pyarrow list<struct<key, value>> array or a list of per-record
        headers). ``timestamps``: one per record (pyarrow timestamp/integer array or a list of
        int/None; a null gets ``timestamp_ms``). ``max_record_size`` > 0: a record whose
        encoded size exceeds it raises ``RecordTooLargeError`` (before anything is appended). Everything is
        validated before the first record is appended (``InvalidRecordError`` names the index
        and type). ``future`` is sealed when this returns or raises; if the buffer pool times out
        part-way, the records appended so far stay queued and the error carries
        ``records_appended``."""
        return append_batch_c(self, topic, partitions, values, keys, headers, timestamp_ms, future, now_ms,
                              max_block_ms, available_partitions, max_record_size, timestamps,
                              record_headers)

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
        cdef NodeSlot *ns
        cdef DrainedBatch *out
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
        ns = <NodeSlot *>PyMem_RawMalloc(nn * sizeof(NodeSlot))
        out = <DrainedBatch *>PyMem_RawMalloc(cap * sizeof(DrainedBatch))
        try:
            if ns == NULL or out == NULL:
                raise MemoryError()
            i = 0
            for node in nodes:
                ns[i].node_id = node
                ns[i].room = 1
                ns[i].conn = NULL
                ns[i].rd = NULL
                ns[i].version = -1
                i += 1
            with nogil:
                got = drain_c(&self.st, ns, nn, max_request_size, force, False, now_ms, out, cap)
            for i in range(got):
                (<list>result[out[i].node_id]).append(take_drained_batch(&out[i]))
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

    def reenqueue(self, ProducerBatch batch, int64_t now_ms, bint backoff=True):
        """reenqueue(batch, now_ms, backoff=True): put a batch to retry back at the head of its
        deque, after retried batches with a lower base_sequence (so sequences stay in order). It
        is sendable again once retry_backoff_ms has passed; at once with ``backoff=False`` (its
        partition's leader moved since it was sent: the new leader has not refused it)."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._pq_locked(self._topic_locked(batch.topic), batch.partition)
            batch.s.attempts += 1
            batch.s.last_attempt_ms = now_ms if backoff else now_ms - self.st.retry_backoff_ms
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
        return split_and_reenqueue_c(self, batch, now_ms, parts)

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

    cpdef int landed(self, ProducerBatch batch) except -1:
        """A drained batch's attempt is over: acknowledged, failed, put back to be retried or
        split, or never sent. Its partition is unmuted and no longer has it in flight."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(batch.topic, batch.partition)
            if pq is not None:
                pq.q.muted = False
                if batch.s.in_flight:
                    pq.q.inflight -= 1
            batch.s.in_flight = False
        finally:
            self._release()
        return 0

    def unmute(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            if pq is not None:
                pq.q.muted = False
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

    def incomplete_batches(self):
        """incomplete_batches() -> list of the batches not completed now (what a flush awaits)."""
        self._acquire()
        snapshot = list(self._incomplete)
        self._release()
        return snapshot

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
                if b.settled:            # done, and its callbacks have run
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


include "accumulator_idempotence.pxi"
include "accumulator_split.pxi"
