"""Idempotent-producer state: producer id and epoch, per-partition sequence numbers.

Used only by the sender thread. A batch gets its base sequence when it is first drained and keeps it
across retries, so the broker can drop a duplicate of a batch it already wrote.

A partition's sequence state can break: the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER on the batch
that should be next, or UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_EPOCH, or a sequenced batch fails for
good (a fatal error, or its delivery timeout) and leaves a gap the broker will never see filled. The
partition is then marked for *rewrite* and the producer bumps its epoch: it waits until nothing is in
flight, asks for the next epoch with InitProducerId (v3+, carrying the current id/epoch), and the
rewritten partitions' unacknowledged batches are re-stamped under the new epoch from sequence 0.

Batches of the *other* partitions that were sent under the old epoch but not acknowledged (a lost
response) keep their old epoch and sequence when resent, so the broker still recognises a duplicate;
:meth:`IdempotenceState.stamp` reports them as stale and the sender lets nothing else of that partition
go out until they are resolved, after which the partition continues under the new epoch from 0.
Nothing acknowledged is sent again, and nothing unacknowledged is dropped.

A batch the broker refuses as too large (MESSAGE_TOO_LARGE) was not written, and is split
(:meth:`RecordAccumulator.split_and_reenqueue`). Its pieces take over its sequence range as it is:
piece k is stamped with the batch's producer id and epoch and ``base_sequence`` + the index of its
first record, so ``next_sequence`` does not move and :meth:`IdempotenceState.stamp` treats the pieces
like retries of sequenced batches. Batches in flight behind the refused one get
OUT_OF_ORDER_SEQUENCE_NUMBER for a sequence past the last acknowledged one, which
:meth:`IdempotenceState.on_sequence_error` does not take for a lost state (no bump); they are retried
behind the pieces. A record refused on its own fails for good: :meth:`IdempotenceState.unresolved`.
"""

from __future__ import annotations

import logging

from .errors import (DuplicateSequenceNumberError, InvalidProducerEpochError, OutOfOrderSequenceNumberError,
                     UnknownProducerIdError)

log = logging.getLogger("fastkafka")

# The broker codes this module acts on, from fastkafka.errors' table (one source of truth).
OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceNumberError.code
DUPLICATE_SEQUENCE_NUMBER = DuplicateSequenceNumberError.code
UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code
INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code

SEQUENCE_MAX = 2**31 - 1


class IdempotenceState:
    def __init__(self, transactional: bool = False):
        self.transactional = transactional   # batches carry the transactional attribute bit
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_sequence: dict[tuple, int] = {}
        self.last_acked_end: dict[tuple, int] = {}  # sequence after the last acknowledged batch
        self.last_acked_offset: dict[tuple, int] = {}  # offset of that batch's last record
        # partition -> highest epoch whose sequence state for it is broken: batches of the partition
        # stamped with that epoch or an older one are re-stamped under the current epoch.
        self.rewrite: dict[tuple, int] = {}
        self.bump_required = False
        self.init_in_flight = False
        self.epoch_bumps = 0

    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and not self.bump_required

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        if producer_id != self.producer_id or epoch != self.producer_epoch:
            self.next_sequence.clear()
            self.last_acked_end.clear()
            self.last_acked_offset.clear()
        if producer_id != self.producer_id:
            self.rewrite.clear()  # a new id: every unacknowledged batch is re-stamped anyway
        if self.producer_id >= 0:
            self.epoch_bumps += 1
            log.info("idempotent producer id %d epoch %d -> id %d epoch %d",
                     self.producer_id, self.producer_epoch, producer_id, epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.bump_required = False

    def init_request_body(self) -> dict:
        """InitProducerId body: v3+ carries the current id/epoch so the broker bumps the epoch."""
        return {"transactional_id": None, "transaction_timeout_ms": 2**31 - 1,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch}

    def stamp(self, batch) -> bool:
        """Give a drained batch its sequence (first send, or first send after an epoch bump).

        Returns True when the batch goes out with the stamp of an older epoch (a resend the broker
        may already have): the caller must send nothing else of its partition until it completes."""
        tp = (batch.topic, batch.partition)
        if batch.base_sequence >= 0 and batch.producer_id == self.producer_id:
            if batch.producer_epoch == self.producer_epoch:
                return False  # a retry of an already sequenced batch keeps its sequence
            if batch.producer_epoch > self.rewrite.get(tp, -1):
                return True   # stale but intact: resend as it was, the broker deduplicates it
        seq = self.next_sequence.get(tp, 0)
        batch.builder.stamp(self.producer_id, self.producer_epoch, seq, self.transactional)
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.producer_epoch
        batch.base_sequence = seq
        self.next_sequence[tp] = (seq + batch.record_count) & SEQUENCE_MAX
        return False

    def awaiting_first_ack(self, batch) -> bool:
        """True while no batch of ``batch``'s partition was acknowledged under the current epoch.

        A broker that holds no state for this producer on a partition accepts *any* first sequence
        (Apache Kafka does). If the first batch failed with a retriable error while a later one was in
        flight behind it, the later one would be written first and the first could never follow it.
        So until the first acknowledgement, a partition has one batch in flight."""
        return (batch.topic, batch.partition) not in self.last_acked_end

    def is_stale(self, batch) -> bool:
        return (batch.base_sequence >= 0 and batch.producer_id == self.producer_id
                and batch.producer_epoch != self.producer_epoch)

    def acked(self, batch, base_offset: int = -1) -> None:
        if batch.producer_epoch == self.producer_epoch and batch.producer_id == self.producer_id:
            tp = (batch.topic, batch.partition)
            self.last_acked_end[tp] = (batch.base_sequence + batch.record_count) & SEQUENCE_MAX
            if base_offset >= 0:
                self.last_acked_offset[tp] = base_offset + batch.record_count - 1

    def data_loss(self, batch, code: int):
        """``(acked_sequence_end, acked_offset)`` when ``code`` on ``batch`` means the broker lost
        records it acknowledged: OUT_OF_ORDER_SEQUENCE_NUMBER on the very batch that follows the
        last acknowledged one, under the current epoch, after at least one acknowledgement (the
        broker then had this producer's sequence, and no longer has it). Else None."""
        if code != OUT_OF_ORDER_SEQUENCE_NUMBER or batch.producer_id != self.producer_id \
                or batch.producer_epoch != self.producer_epoch:
            return None
        tp = (batch.topic, batch.partition)
        end = self.last_acked_end.get(tp)
        if end is None or batch.base_sequence != end:
            return None
        return end, self.last_acked_offset.get(tp, -1)

    def _break(self, batch) -> None:
        tp = (batch.topic, batch.partition)
        self.rewrite[tp] = max(self.rewrite.get(tp, -1), batch.producer_epoch)

    def unresolved(self, batch) -> None:
        """A sequenced batch failed for good: the broker may or may not have it, and either way the
        partition's next sequence no longer follows. Re-stamp the partition under a new epoch."""
        if batch.base_sequence < 0 or batch.producer_id != self.producer_id or self.producer_id < 0:
            return
        self._break(batch)
        if batch.producer_epoch == self.producer_epoch:
            self.bump_required = True

    def on_sequence_error(self, batch, code: int) -> bool:
        """A sequence error for ``batch`` (which is retried). True when it requires an epoch bump;
        False when it only reflects an earlier batch of the partition that failed and is being
        retried, or when the batch is re-stamped under the current epoch on its next drain."""
        if batch.base_sequence < 0 or batch.producer_id != self.producer_id:
            return False  # stamped under another producer id: re-stamped on its next drain
        if batch.producer_epoch != self.producer_epoch:
            self._break(batch)  # a stale resend the broker no longer accepts: re-stamp it
            return False
        tp = (batch.topic, batch.partition)
        if code == UNKNOWN_PRODUCER_ID or code == INVALID_PRODUCER_EPOCH \
                or batch.base_sequence == self.last_acked_end.get(tp, 0):
            self._break(batch)
            return True
        return False
