"""Idempotent-producer state: producer id and epoch, per-partition sequence numbers.

Used only by the sender thread. A batch gets its base sequence when it is first drained and keeps it
across retries, so the broker can drop a duplicate of a batch it already wrote. When the broker and
the producer disagree about a partition's sequence (OUT_OF_ORDER_SEQUENCE_NUMBER on the batch that
should be next, or UNKNOWN_PRODUCER_ID), the producer bumps its epoch: it waits until nothing is in
flight, asks for the next epoch with InitProducerId, restarts every partition's sequence at 0 and
re-stamps the batches still queued. Nothing acknowledged is sent again, and nothing unacknowledged is
dropped.
"""

from __future__ import annotations

import logging

log = logging.getLogger("fastkafka")

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
UNKNOWN_PRODUCER_ID = 59
INVALID_PRODUCER_EPOCH = 47

SEQUENCE_MAX = 2**31 - 1


class IdempotenceState:
    def __init__(self):
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_sequence: dict[tuple, int] = {}
        self.last_acked_end: dict[tuple, int] = {}  # sequence after the last acknowledged batch
        self.bump_required = False
        self.init_in_flight = False
        self.epoch_bumps = 0

    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and not self.bump_required

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        if producer_id != self.producer_id or epoch != self.producer_epoch:
            self.next_sequence.clear()
            self.last_acked_end.clear()
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

    def stamp(self, batch) -> None:
        """Give a drained batch its sequence (first send, or first send after an epoch bump)."""
        if batch.producer_id == self.producer_id and batch.producer_epoch == self.producer_epoch \
                and batch.base_sequence >= 0:
            return  # a retry of an already sequenced batch keeps its sequence
        tp = (batch.topic, batch.partition)
        seq = self.next_sequence.get(tp, 0)
        batch.builder.stamp(self.producer_id, self.producer_epoch, seq)
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.producer_epoch
        batch.base_sequence = seq
        self.next_sequence[tp] = (seq + batch.record_count) & SEQUENCE_MAX

    def acked(self, batch) -> None:
        if batch.producer_epoch == self.producer_epoch and batch.producer_id == self.producer_id:
            tp = (batch.topic, batch.partition)
            self.last_acked_end[tp] = (batch.base_sequence + batch.record_count) & SEQUENCE_MAX

    def sequence_error_needs_bump(self, batch, code: int) -> bool:
        """True when a sequence error means the broker lost our state (bump the epoch); False when
        it only reflects an earlier batch of the partition that failed and is being retried."""
        if code == UNKNOWN_PRODUCER_ID or code == INVALID_PRODUCER_EPOCH:
            return True
        if batch.producer_epoch != self.producer_epoch or batch.producer_id != self.producer_id:
            return False  # stamped under an older epoch: it is re-stamped on its next drain
        tp = (batch.topic, batch.partition)
        expected = self.last_acked_end.get(tp, 0)
        return batch.base_sequence == expected
