# accumulator_idempotence.pxi: the idempotent producer's stamping rule in C and IdempotenceState,
# its Python face.
# Included by accumulator.pyx; the contract is in accumulator.pxd, the explanation in
# docs/internals.md.
#
# Idempotent-producer state: producer id and epoch, per-partition sequence numbers.
#
# Used only by the sender thread. A batch gets its base sequence when it is first drained and keeps it
# across retries, so the broker can drop a duplicate of a batch it already wrote.
#
# A partition's sequence state can break: the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER on the batch
# that should be next, or UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_EPOCH, or a sequenced batch fails for
# good (a fatal error, or its delivery timeout) and leaves a gap the broker will never see filled. The
# partition is then marked for *rewrite* and the producer bumps its epoch: it waits until nothing is in
# flight, asks for the next epoch with InitProducerId (v3+, carrying the current id/epoch), and the
# rewritten partitions' unacknowledged batches are re-stamped under the new epoch from sequence 0.
#
# Batches of the *other* partitions that were sent under the old epoch but not acknowledged (a lost
# response) keep their old epoch and sequence when resent, so the broker still recognises a duplicate;
# :meth:`IdempotenceState.stamp` reports them as stale and the sender lets nothing else of that partition
# go out until they are resolved, after which the partition continues under the new epoch from 0.
# Nothing acknowledged is sent again, and nothing unacknowledged is dropped.
#
# A batch the broker refuses as too large (MESSAGE_TOO_LARGE) was not written, and is split
# (:meth:`RecordAccumulator.split_and_reenqueue`). Its pieces take over its sequence range as it is:
# piece k is stamped with the batch's producer id and epoch and ``base_sequence`` + the index of its
# first record, so ``next_sequence`` does not move and :meth:`IdempotenceState.stamp` treats the pieces
# like retries of sequenced batches. Batches in flight behind the refused one get
# OUT_OF_ORDER_SEQUENCE_NUMBER for a sequence past the last acknowledged one, which
# :meth:`IdempotenceState.on_sequence_error` does not take for a lost state (no bump); they are retried
# behind the pieces. A record refused on its own fails for good: :meth:`IdempotenceState.unresolved`.


# ---------------------------------------------------------------------------------------------
# Idempotence, in C (IdempotenceState wraps these)
# ---------------------------------------------------------------------------------------------

cdef enum:
    SEQUENCE_MAX = 0x7fffffff

cdef int _OUT_OF_ORDER = OutOfOrderSequenceNumberError.code
cdef int _UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code
cdef int _INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code


# thread: io · lock: none · gil: any
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


# thread: io · lock: none · gil: any
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


# thread: io · lock: none · gil: held
cdef inline void _idem_break(QueueState *q, BatchState *bs) noexcept nogil:
    if bs.producer_epoch > q.rewrite_epoch:
        q.rewrite_epoch = bs.producer_epoch



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


# ---------------------------------------------------------------------------------------------
# IdempotenceState
# ---------------------------------------------------------------------------------------------

@cython.final
@cython.no_gc_clear
cdef class IdempotenceState:
    """IdempotenceState(accumulator, transactional=False): the idempotent producer's id, epoch and
    per-partition sequence state (the rules: accumulator_idempotence.pxi).

    The producer id / epoch are in a C struct the accumulator reaches (its drain stamps batches
    without the GIL); each partition's next sequence, last acknowledged sequence end and offset,
    and rewrite epoch are in that partition's state in ``accumulator``. The I/O thread's only.

    >>> from fastkafka._producer.bufferpool import BufferPool
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

    def overtaken(self, ProducerBatch batch, int code):
        """True when ``code`` is OUT_OF_ORDER_SEQUENCE_NUMBER for a batch of the current epoch
        whose sequences lie before the partition's last acknowledged one: the broker accepted a
        later batch, which it does only in sequence order, so this one was most likely written,
        yet too long ago for the broker to recognise it as a duplicate. Retrying it can never
        succeed; resending it under a new epoch would write it twice."""
        cdef QueueState *q
        cdef int32_t behind
        if code != _OUT_OF_ORDER or batch.s.base_sequence < 0 \
                or batch.s.producer_id != self.st.producer_id \
                or batch.s.producer_epoch != self.st.producer_epoch:
            return False
        q = self._q(batch)
        if q.last_acked_end < 0:
            return False
        # how far the batch's end lies behind the acknowledged end, modulo the sequence space
        behind = (q.last_acked_end - batch.s.base_sequence - batch.s.record_count) & SEQUENCE_MAX
        return behind < (SEQUENCE_MAX >> 1)

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
