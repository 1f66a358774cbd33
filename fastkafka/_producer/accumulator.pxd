# cython: language_level=3
# path:
#   record: append_c -> append_record_locked -> BatchBuilder.append_raw (a new batch: q_push_back)
#   send:   ready -> scan_c; drain -> drain_c -> take_head_c (GIL-free: -> stamp_for_send_c)
#   answer: reenqueue / split_and_reenqueue (a retry) or deallocate (done)

# Contract of fastkafka._producer.accumulator: the RecordAccumulator (the batches and futures it makes
# are declared in fastkafka._producer.batch).
cimport cython
from cpython.ref cimport PyObject, Py_XDECREF
from libc.stdint cimport int16_t, int32_t, int64_t

from fastkafka._wire.records cimport BatchBuilder
from fastkafka._producer.batch cimport ProducerBatch, FutureRecordMetadata, BatchState
from fastkafka._producer.bufferpool cimport BufferPool
from fastkafka._producer.partitioner cimport StickyPartitioner
from fastkafka._net.clock cimport clock_ms, monotonic_ms
from fastkafka._net.connection cimport ConnCore
from fastkafka._net.mutex cimport pthread_mutex_t
from fastkafka._net.transport cimport ReaderCore
from fastkafka._net.sampled cimport SampledRegistry, TopicSampled


# One row of a node table: a broker a drain may take batches for now and how many more requests
# it may take (scan_c, drain_c read these two). The GIL-free turn's table (gil_free_turn) also
# keeps there what it sends and reads with: the connection, its frame reader and the Produce
# version it speaks (NULL, NULL, -1 in the GIL turn's drain, which sends through the sender).
cdef struct NodeSlot:
    int32_t node_id
    int room
    ConnCore *conn
    ReaderCore *rd
    int16_t version


# A queued batch: an OWNED reference to a ProducerBatch and its BatchState (&batch.s).
cdef struct QEntry:
    PyObject *batch
    BatchState *bs


# One partition's queue and state, in C memory reachable without the GIL (through the
# accumulator's AccState.queues). Every field is read and written under the accumulator's lock,
# except the idempotence fields, which only the I/O thread touches (with or without the GIL).
cdef struct QueueState:
    # The queued batches, head first: ring[(head + i) % cap] for i < count. Storage from
    # PyMem_RawMalloc (never PyMem_Malloc). Only through the q_* helpers below.
    QEntry *ring
    Py_ssize_t head
    Py_ssize_t count
    Py_ssize_t cap
    bint muted
    bint txn_added                   # transactional: added to the current transaction
    int32_t partition
    int32_t leader                   # leader node id, -1 unknown (kept by RecordAccumulator._sync_leaders)
    # the batches drained and not yet landed (RecordAccumulator.landed), and the node the last of
    # them went to: with idempotence none goes to another node while any is in flight
    int32_t inflight
    int32_t inflight_node
    const char *topic                # the topic as UTF-8 (the _PartitionQueue keeps the bytes)
    int64_t last_batch_len           # bytes the last drained batch held (sizes the next buffer)
    Py_ssize_t topic_len
    # idempotence (IdempotenceState): the next sequence to give; the sequence after the last batch
    # acknowledged under the current epoch (-1: none acknowledged under it); that batch's last
    # offset (-1: unknown); the highest epoch whose sequence state for this partition is broken
    # (-1: none): batches stamped with it or an older one are re-stamped under the current epoch.
    int32_t next_sequence
    int32_t last_acked_end
    int64_t last_acked_offset
    int32_t rewrite_epoch
    # the list of partitions with queued batches (AccState.act_head), in drain order: a partition
    # joins at the tail when a batch is queued, goes back to the tail when its head is drained and
    # leaves when found empty (lock held)
    QueueState *act_prev
    QueueState *act_next
    bint active
    PyObject *owner                  # the _PartitionQueue holding this state (borrowed)
    TopicSampled *tm                 # its topic's windowed statistics (RecordAccumulator.sampled), or NULL


# The idempotent producer's id and epoch (IdempotenceState); the I/O thread's only.
cdef struct IdemState:
    int64_t producer_id              # -1 unknown
    int32_t producer_epoch
    bint bump_required
    bint transactional               # batches carry the transactional attribute bit


# What code without the GIL needs of the accumulator: its partitions and settings. ``lock`` guards
# the queues (take it without the GIL if need be; never take the GIL while holding it).
cdef struct AccState:
    QueueState **queues              # every partition's state (RawRealloc'ed), nqueues of them
    Py_ssize_t nqueues
    Py_ssize_t queues_cap
    int64_t linger_ms
    int64_t retry_backoff_ms
    int64_t delivery_timeout_ms
    bint ordered
    bint transactional               # drained only once added to the transaction
    bint closed
    int flushes                      # open begin_flush() calls: every batch is ready meanwhile
    pthread_mutex_t lock             # initialised when lock_ready (see fastkafka._net.mutex)
    bint lock_ready
    IdemState *idem                  # NULL without idempotence (set by IdempotenceState)
    QueueState *act_head             # the partitions with queued batches (QueueState.act_*)
    QueueState *act_tail
    Py_ssize_t nactive


# One batch drain_c took out: the batch (the queue's owned reference, moved here: the
# consumer owns it), its BatchState, its partition's QueueState, the node it goes to.
cdef struct DrainedBatch:
    PyObject *batch
    BatchState *bs
    QueueState *qs
    int32_t node_id


# With the GIL: the batch of a GIL-free entry as an object, taking over the entry's owned reference
# (e.batch becomes NULL; no net refcount change).
cdef inline object take_drained_batch(DrainedBatch *e):
    cdef object o = <object>e.batch     # a new reference...
    Py_XDECREF(e.batch)                 # ...and the entry's is dropped: it moved into ``o``
    e.batch = NULL
    return o


# ---- the ring (accumulator lock held) --------------------------------------------------------
# thread: app+io · lock: acc held · gil: held
cdef inline Py_ssize_t q_len(QueueState *q) noexcept nogil:
    return q.count

# Borrowed reference to the i-th queued batch (0: the head), and its BatchState.
# thread: app+io · lock: acc held · gil: held
cdef inline PyObject *q_get(QueueState *q, Py_ssize_t i) noexcept nogil:
    return q.ring[(q.head + i) % q.cap].batch

# thread: app+io · lock: acc held · gil: any
cdef inline BatchState *q_bs(QueueState *q, Py_ssize_t i) noexcept nogil:
    return q.ring[(q.head + i) % q.cap].bs

# Take the head out: its owned reference moves to the caller (batch NULL when empty); no refcount
# change.
# thread: app+io · lock: acc held · gil: any
cdef inline QEntry q_pop_front(QueueState *q) noexcept nogil:
    cdef QEntry e
    if q.count == 0:
        e.batch = NULL
        e.bs = NULL
        return e
    e = q.ring[q.head]
    q.ring[q.head].batch = NULL
    q.ring[q.head].bs = NULL
    q.head = (q.head + 1) % q.cap
    q.count -= 1
    return e

# Push back / insert at ``pos`` (0: push front) a NEW reference (INCREF'ed here: GIL held).
cdef int q_push_back(QueueState *q, ProducerBatch batch) except -1
cdef int q_insert(QueueState *q, Py_ssize_t pos, ProducerBatch batch) except -1
# Remove the i-th batch; its owned reference moves to the caller (NULL: no such index).
# thread: io · lock: acc held · gil: held
cdef PyObject *q_remove(QueueState *q, Py_ssize_t i) noexcept nogil
# Every queued batch as a list (head first); the queue is emptied when ``take`` (the references
# move into the list), else copied (new references).
cdef list q_list(QueueState *q, bint take)


@cython.final
cdef class _PartitionQueue:
    cdef QueueState q                # ring, muted, txn_added, leader, idempotence...
    cdef str topic
    cdef int32_t partition
    cdef bytes topic_utf8            # q.topic points into it
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
    WAKE_GIL = 3    # a batch started in a partition not added to the transaction yet: the GIL turn adds it


cdef class RecordAccumulator:
    # linger_ms, retry_backoff_ms, delivery_timeout_ms, ordered, transactional (a transactional
    # producer's partitions are drained only once added to the transaction), the closed flag, the
    # flush count, the lock and the partitions' states: in ``st`` (properties keep the names).
    cdef AccState st
    cdef readonly int64_t batch_size
    cdef readonly object compression_type
    cdef readonly object compression_level
    cdef readonly BufferPool buffer_pool
    cdef int _codec                  # compression_type as a codec code, for the builders
    cdef object _level               # compression_level as validated for that codec
    cdef bint _counted               # counted in accumulators_open (live_resources())
    # A batch filled up or was started since the last wakeup_needed(): the sender should look.
    # send()/produce() (sendpath) read and clear it after each record.
    # 0: nothing to tell the sender; 1: a batch started (the sender must run by
    # wake_deadline_ms, its linger deadline); 2: a batch filled (wake the sender now)
    cdef int wakeup_pending
    cdef int64_t wake_deadline_ms
    cdef dict _flush_threads         # thread ident -> open begin_flush() calls
    cdef dict _topics                # topic -> _TopicState
    cdef _TopicState _last_topic     # the one _topic_locked returned last
    cdef list _queues                # every _PartitionQueue
    cdef set _incomplete
    cdef object _leaders_of          # the cluster QueueState.leader was read from
    cdef Py_ssize_t _nresolved       # _queues[:_nresolved] have had their leader looked up
    cdef list _failed                # (batch, error): drained, not closable; see take_failed
    cdef StickyPartitioner _sticky
    cdef public SampledRegistry sampled   # the producer's windowed statistics, None: none kept

    cdef void _acquire(self) noexcept
    cdef void _release(self) noexcept
    cdef _TopicState _topic_locked(self, str topic)
    cdef _PartitionQueue _pq_locked(self, _TopicState ts, int32_t partition)
    cdef _PartitionQueue _find_locked(self, str topic, int32_t partition)
    # The partition's QueueState (made if need be), taking the lock.
    cdef QueueState *qstate(self, str topic, int32_t partition) except NULL
    cpdef int landed(self, ProducerBatch batch) except -1
    # QueueState.leader of every partition (``cluster`` not the last one) or of the new ones.
    cdef int _sync_leaders(self, cluster) except -1
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


# ---- the rules and steps of the GIL-free turn (also used by the GIL code: one path) ----------

# Stamp a drained, closed batch for sending (``bs`` of the batch, ``q`` its partition's state):
# with idempotence (st.idem set) the IdempotenceState.stamp rule (a first send, or a first send
# after an epoch bump, gets the partition's next sequence; a retry keeps its stamp; a resend under
# an older epoch keeps it too and is "stale"), else producer id / epoch / sequence -1. The builder's
# header and CRC are written (builder_stamp_c) whenever a stamp is given. Returns 1 when the
# partition must be muted (a stale resend, or no batch of the partition acknowledged under this
# epoch yet: IdempotenceState.awaiting_first_ack), 0 when not, -1 when it cannot stamp (no builder,
# or not closed; nothing changed). Mutes nothing itself: the caller sets q.muted under the
# accumulator lock (drain_c does, holding it). Takes no lock.
# thread: io · lock: none · gil: any
cdef int stamp_for_send_c(AccState *st, QueueState *q, BatchState *bs) noexcept nogil

# What scan_c answers (the one readiness scan; ``ready``/``ready_cap`` are set by the caller).
cdef struct Readiness:
    int32_t *ready          # the leaders with a head batch sendable now, distinct (NULL: not wanted)
    Py_ssize_t ready_cap
    Py_ssize_t nready       # how many there are (more than ready_cap: only ready_cap written)
    int64_t next_ready      # the earliest time a head not sendable now becomes sendable
    int64_t next_nogil      # the earliest time the GIL-free drain may take a head for ``nodes``
    int64_t next_gil        # the earliest time from ``after_ms`` on only the GIL turn can act on
    int64_t first_expiry    # the earliest delivery timeout of a head batch
    Py_ssize_t unknown      # drainable partitions with queued batches and no known leader

# The one readiness scan, over the partitions with queued batches only (it drops the ones found
# empty from that list). Takes the accumulator lock (call WITHOUT the GIL, or with nothing else
# able to hold that lock while waiting for the GIL). A head batch is sendable by head_sendable_at_c
# (``force``, closing or flushing: at once). Times are ms on the producer's monotonic clock,
# INT64_MAX for none. ``next_nogil``: heads nogil_sendable_c lets go without the GIL whose leader
# is one of ``nodes`` with room > 0 (0 when one may go now). ``next_gil``: a head the GIL-free
# turn leaves to the GIL turn (led by none of ``nodes``, or not nogil_sendable_c) becoming
# sendable (one sendable at once counts from its linger deadline), or any head reaching its
# delivery timeout; what was due before ``after_ms`` is not counted (the GIL turn that ran then
# saw it; ``after_ms`` itself is, since a whole millisecond cannot tell before from after its scan).
# thread: io · lock: takes acc · gil: no
cdef void scan_c(AccState *st, const NodeSlot *nodes, Py_ssize_t nnodes, bint force,
                 int64_t now_ms, int64_t after_ms, Readiness *r) noexcept nogil

# The one drain (both turns), under the accumulator lock (taken here: same rule as scan_c). For
# each of ``nodes`` with room > 0, in order: at most one batch per partition led by that node
# (QueueState.leader), partitions taken in the list's order (one drained goes to the tail, so the
# next drain starts with the ones left), stopping before ``max_request_size`` would be exceeded (a
# node's first batch is always taken). Only head batches sendable at ``now_ms`` (linger passed,
# full, retry backoff passed, or ``force``/closing/flushing) of unmuted partitions (transactional:
# added to the transaction) that have not reached delivery_timeout_ms. Each is popped (the queue's
# owned reference MOVES into ``out``), marked drained (take_head_c: drained_ms, full, muted when
# ``ordered``). ``nogil_only`` (the GIL-free turn): only what nogil_sendable_c allows, and each is
# closed (builder_close_plain_c; a compressed one by builder_close_c once the lock is let go, then
# stamped under it again) and stamped (stamp_for_send_c, muting as it says) here; otherwise
# (the GIL turn) the caller closes and stamps. ``out`` gets them grouped by node in ``nodes``
# order, at most ``out_cap``. Returns how many were written. Anything skipped is left as it was.
# thread: io · lock: takes acc · gil: no
cdef Py_ssize_t drain_c(AccState *st, const NodeSlot *nodes, Py_ssize_t nnodes,
                        int64_t max_request_size, bint force, bint nogil_only, int64_t now_ms,
                        DrainedBatch *out, Py_ssize_t out_cap) noexcept nogil

# The GIL path's stamp (Sender._send_produce): stamp_for_send_c on ``batch`` (its partition's
# QueueState looked up under the lock), muting the partition under the lock when it says so.
# Raises when the batch cannot be stamped.
cdef int stamp_batch_for_send(RecordAccumulator acc, ProducerBatch batch) except -1


# The idempotent producer's state (IdempotenceState, accumulator_idempotence.pxi): ``st`` is reached by
# the accumulator's AccState.idem; the partitions' sequence state is in their QueueState.
@cython.final
@cython.no_gc_clear
cdef class IdempotenceState:
    cdef IdemState st
    cdef readonly RecordAccumulator accumulator
    cdef public bint init_in_flight
    cdef readonly int64_t epoch_bumps

    # The QueueState of ``batch``'s partition (made if need be; takes the accumulator lock).
    cdef QueueState *_q(self, ProducerBatch batch) except NULL
