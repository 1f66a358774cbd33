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

from .errors import (DuplicateSequenceNumberError, InvalidProducerEpochError, OutOfOrderSequenceNumberError,
                     UnknownProducerIdError)

# The broker codes this module acts on, from fastkafka.errors' table (one source of truth).
OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceNumberError.code
DUPLICATE_SEQUENCE_NUMBER = DuplicateSequenceNumberError.code
UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code
INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code

SEQUENCE_MAX = 2**31 - 1


# The state itself is compiled (fastkafka._core.accumulator): the producer id and epoch in a C
# struct, each partition's sequence state in that partition's state in the RecordAccumulator, so
# the I/O thread's drain stamps batches without the GIL by the same rule as
# IdempotenceState.stamp. IdempotenceState(accumulator, transactional=False).
from ._core.accumulator import IdempotenceState  # noqa: E402

__all__ = ["IdempotenceState", "OUT_OF_ORDER_SEQUENCE_NUMBER", "DUPLICATE_SEQUENCE_NUMBER",
           "UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH", "SEQUENCE_MAX"]
