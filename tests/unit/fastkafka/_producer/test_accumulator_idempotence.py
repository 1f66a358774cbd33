"""IdempotenceState with its state in C (the producer id/epoch in a struct, each partition's sequence
state in the accumulator's partition state): the semantics accumulator_idempotence.pxi documents."""
from __future__ import annotations

import pytest

from fastkafka._producer.accumulator import IdempotenceState, RecordAccumulator
from fastkafka._producer.bufferpool import BufferPool
from fastkafka.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError, UnknownProducerIdError
from fastkafka._producer import testing

INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code
OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceNumberError.code
UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code

from reference_records import decode_batch


from test_accumulator import Cluster   # leader_for over a fixed map


CLUSTER = Cluster({("t", 0): 1, ("t", 1): 1})


@pytest.fixture
def rig():
    accs = []

    def make(transactional=False):
        acc = RecordAccumulator(16384, 0, None, 0, 100, 120000, BufferPool(1 << 20, 16384), False)
        accs.append(acc)
        return acc, IdempotenceState(acc, transactional)
    yield make
    for acc in accs:
        for b in acc.abort_undrained():
            b.complete(-1, -1, None)
            acc.deallocate(b)
        acc.close()


def drained(acc, partition=0, n=1):
    """A closed batch of ``n`` records of t-``partition``, drained."""
    for i in range(n):
        acc.append("t", partition, 1000, None, b"v%d" % i, None, None, 0, 0)
    [b] = [b for b in acc.drain(CLUSTER, [1], 1 << 20, 0)[1] if b.partition == partition]
    return b


def done(acc, *batches):
    for b in batches:
        b.complete(0, -1, None)
        acc.deallocate(b)


def test_producer_id_and_epoch(rig):
    acc, idem = rig()
    assert not idem.has_producer_id() and idem.producer_id == -1 and idem.producer_epoch == -1
    idem.set_producer_id(5, 0)
    assert idem.has_producer_id() and idem.epoch_bumps == 0
    idem.bump_required = True
    assert not idem.has_producer_id()
    assert idem.init_request_body()["producer_id"] == 5
    idem.set_producer_id(5, 1)
    assert idem.has_producer_id() and not idem.bump_required and idem.epoch_bumps == 1
    idem.init_in_flight = True
    assert idem.init_in_flight
    assert not idem.transactional and rig(True)[1].transactional


def test_stamp_gives_sequences_and_writes_the_header(rig):
    acc, idem = rig(transactional=True)
    idem.set_producer_id(9, 2)
    b1 = drained(acc, n=3)
    assert idem.stamp(b1) is False and idem.awaiting_first_ack(b1)
    assert (b1.producer_id, b1.producer_epoch, b1.base_sequence) == (9, 2, 0)
    h = decode_batch(b1.builder.buffer())
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 2, 0)
    assert h.attributes & 0x10            # transactional
    b2 = drained(acc, n=2)
    idem.stamp(b2)
    assert b2.base_sequence == 3
    assert idem.sequence_state("t", 0) == (5, None, None, None)
    assert idem.stamp(b1) is False and b1.base_sequence == 0   # a retry keeps its sequence
    idem.acked(b1, 100)
    assert not idem.awaiting_first_ack(b2)
    assert idem.sequence_state("t", 0) == (5, 3, 102, None)
    assert idem.sequence_state("t", 1) == (0, None, None, None)   # per partition
    done(acc, b1, b2)


def test_stamp_of_a_batch_without_builder_raises(rig):
    acc, idem = rig()
    idem.set_producer_id(1, 0)
    b = drained(acc)
    done(acc, b)
    with pytest.raises(ValueError):
        idem.stamp(b)


def test_data_loss_only_on_the_batch_after_the_last_ack(rig):
    acc, idem = rig()
    idem.set_producer_id(1, 0)
    b1, b2 = drained(acc, n=2), drained(acc, n=1)
    idem.stamp(b1)
    idem.stamp(b2)
    assert idem.data_loss(b2, OUT_OF_ORDER_SEQUENCE_NUMBER) is None   # nothing acked yet
    idem.acked(b1, 40)
    assert idem.data_loss(b2, OUT_OF_ORDER_SEQUENCE_NUMBER) == (2, 41)
    assert idem.data_loss(b2, UNKNOWN_PRODUCER_ID) is None
    assert idem.data_loss(b1, OUT_OF_ORDER_SEQUENCE_NUMBER) is None    # not the next one
    idem.set_producer_id(1, 1)
    assert idem.data_loss(b2, OUT_OF_ORDER_SEQUENCE_NUMBER) is None    # another epoch
    done(acc, b1, b2)


def test_acked_without_offset_and_other_epoch(rig):
    acc, idem = rig()
    idem.set_producer_id(1, 0)
    b = drained(acc, n=2)
    idem.stamp(b)
    idem.acked(b)                          # acks=... without a base offset
    assert idem.sequence_state("t", 0) == (2, 2, None, None)
    idem.set_producer_id(1, 1)             # a new epoch forgets the acknowledgements
    assert idem.sequence_state("t", 0) == (0, None, None, None)
    idem.acked(b, 7)                       # stamped under the old epoch: ignored
    assert idem.sequence_state("t", 0) == (0, None, None, None)
    done(acc, b)


def test_unresolved_rewrites_the_partition_and_requires_a_bump(rig):
    acc, idem = rig()
    idem.set_producer_id(1, 0)
    lost, p0_inflight, p1_inflight = drained(acc, 0), drained(acc, 0), drained(acc, 1)
    for b in (lost, p0_inflight, p1_inflight):
        idem.stamp(b)
    idem.unresolved(lost)
    assert idem.bump_required and idem.sequence_state("t", 0)[3] == 0
    idem.set_producer_id(1, 1)             # the bump: same id, next epoch
    assert idem.sequence_state("t", 0)[3] == 0   # the rewrite mark survives an epoch bump
    # t-0 was rewritten: its old-epoch batch is re-stamped under the new epoch from 0
    assert idem.stamp(p0_inflight) is False
    assert (p0_inflight.producer_epoch, p0_inflight.base_sequence) == (1, 0)
    # t-1 was not: its old-epoch batch is a stale resend, sent as it was
    assert testing.is_stale(idem, p1_inflight)
    assert idem.stamp(p1_inflight) is True
    assert (p1_inflight.producer_epoch, p1_inflight.base_sequence) == (0, 0)
    idem.set_producer_id(2, 0)             # a new id clears the rewrite marks
    assert idem.sequence_state("t", 0) == (0, None, None, None)
    done(acc, lost, p0_inflight, p1_inflight)


def test_unresolved_ignores_unsequenced_and_other_ids(rig):
    acc, idem = rig()
    b = drained(acc)
    idem.unresolved(b)                     # no producer id yet, not stamped
    assert not idem.bump_required
    idem.set_producer_id(3, 0)
    idem.stamp(b)
    idem.set_producer_id(4, 0)
    idem.unresolved(b)                     # stamped under another id
    assert not idem.bump_required and idem.sequence_state("t", 0)[3] is None
    done(acc, b)


def test_on_sequence_error(rig):
    acc, idem = rig()
    idem.set_producer_id(1, 0)
    b1, b2, b3 = drained(acc, n=2), drained(acc), drained(acc)
    for b in (b1, b2, b3):
        idem.stamp(b)
    # the first batch (sequence 0, nothing acked): the broker lost our state
    assert idem.on_sequence_error(b1, OUT_OF_ORDER_SEQUENCE_NUMBER) is True
    assert idem.sequence_state("t", 0)[3] == 0
    idem.acked(b1)
    # a later batch: only a gap behind a retried one
    assert idem.on_sequence_error(b3, OUT_OF_ORDER_SEQUENCE_NUMBER) is False
    assert idem.on_sequence_error(b3, UNKNOWN_PRODUCER_ID) is True
    assert idem.on_sequence_error(b2, INVALID_PRODUCER_EPOCH) is True
    idem.set_producer_id(1, 1)
    fresh = drained(acc, 1)
    assert idem.on_sequence_error(fresh, OUT_OF_ORDER_SEQUENCE_NUMBER) is False  # not sequenced
    idem.stamp(fresh)
    # a batch of the old epoch: marked for rewrite, no bump
    idem2_state = idem.sequence_state("t", 1)
    assert idem.on_sequence_error(b2, OUT_OF_ORDER_SEQUENCE_NUMBER) is False
    assert idem.sequence_state("t", 0)[3] == 0 and idem.sequence_state("t", 1) == idem2_state
    done(acc, b1, b2, b3, fresh)


def _idempotent_sender(rig):
    """An idempotent Sender (producer id 8, epoch 0) over ``rig``'s accumulator and a socketless
    network client; returns (accumulator, sender, client)."""
    from fastkafka._producer.sender import Sender
    import types
    from sockless import SocklessClient
    acc, _ = rig()
    client = SocklessClient(9)
    cfg = types.SimpleNamespace(
        transactional_id=None, enable_idempotence=True, acks=-1, compression_code=0,
        retry_backoff_ms=100, retry_backoff_max_ms=1000, on_error=None, request_timeout_ms=30000,
        delivery_timeout_ms=120000, retries=3, max_request_size=1 << 20, gil_free_io=False)
    s = Sender(cfg, acc, types.SimpleNamespace(cluster=CLUSTER), client.net, clock=lambda: 0)
    s.idem.set_producer_id(8, 0)
    return acc, s, client


def test_sender_path_mutes_first_batch_and_stale_resend(rig):
    """_send_produce's rule (stamp_for_send_c): the partition's first batch under an epoch, and a
    stale resend, mute the partition."""
    acc, s, client = _idempotent_sender(rig)
    b1 = drained(acc, 0)
    s._send_produce(1, [b1], 0)
    assert testing.is_muted(acc, "t", 0) and b1.base_sequence == 0
    s.idem.acked(b1, 0)
    acc.unmute("t", 0)
    b2 = drained(acc, 0)
    s._send_produce(1, [b2], 0)
    assert not testing.is_muted(acc, "t", 0) and b2.base_sequence == 1
    s.idem.set_producer_id(8, 1)           # b2's answer was lost; the epoch moved on
    s._send_produce(1, [b2], 0)            # resent under its old stamp: muted
    assert testing.is_muted(acc, "t", 0) and (b2.producer_epoch, b2.base_sequence) == (0, 1)
    assert client.conn.in_flight_count() == 3 and client.conn.produce_batches() == [b1, b2, b2]
    client.conn.reset()                    # the connection's requests go (unanswered)
    done(acc, b1, b2)


def test_overtaken_only_behind_the_acknowledged_end(rig):
    """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch whose sequences lie before the partition's last
    acknowledged end: the broker took a later batch, so retrying this one can never succeed."""
    acc, idem = rig()
    idem.set_producer_id(3, 0)
    b1, b2, b3 = drained(acc, n=3), drained(acc, n=2), drained(acc, n=1)
    for b in (b1, b2, b3):
        idem.stamp(b)
    assert not idem.overtaken(b1, OUT_OF_ORDER_SEQUENCE_NUMBER)    # nothing acknowledged yet
    idem.acked(b2)                                                  # b1 is behind it now
    assert idem.overtaken(b1, OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert not idem.overtaken(b1, UNKNOWN_PRODUCER_ID)
    assert not idem.overtaken(b3, OUT_OF_ORDER_SEQUENCE_NUMBER)     # the next one: not behind
    idem.set_producer_id(3, 1)
    assert not idem.overtaken(b1, OUT_OF_ORDER_SEQUENCE_NUMBER)     # stamped under another epoch
    done(acc, b1, b2, b3)


@pytest.mark.parametrize("idempotent", [True, False])
def test_no_batch_to_a_new_leader_while_one_is_in_flight_to_the_old(rig, idempotent):
    """With idempotence a partition's batches are in flight to one node at a time: after a leader
    move, nothing of it goes to the new leader until the old one answered for every batch sent to
    it (RecordAccumulator.landed). Without idempotence the rule does not apply."""
    from test_accumulator import Cluster as Leaders
    if idempotent:
        acc, idem = rig()
        idem.set_producer_id(4, 0)
    else:
        acc = RecordAccumulator(16384, 0, None, 0, 100, 120000, BufferPool(1 << 20, 16384), False)
    old = drained(acc)                                  # in flight to node 1
    if idempotent:
        idem.stamp(old)
        idem.acked(old)                                 # not the partition's first batch
        acc.landed(old)
        old = drained(acc)
        idem.stamp(old)
    acc.append("t", 0, 1000, None, b"next", None, None, 0, 0)
    moved = Leaders({("t", 0): 2, ("t", 1): 2})
    taken = acc.drain(moved, [2], 1 << 20, 0).get(2, [])
    if idempotent:
        assert taken == []
        acc.landed(old)                                 # the old leader answered
        [taken] = acc.drain(moved, [2], 1 << 20, 0)[2]
    else:
        [taken] = taken
    assert taken.partition == 0 and taken is not old
    acc.landed(taken)
    done(acc, old, taken)
    if not idempotent:
        for b in acc.abort_undrained():
            b.complete(-1, -1, None)
            acc.deallocate(b)
        acc.close()


def test_sender_fails_an_overtaken_batch_at_once(rig, caplog):
    """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch behind the last acknowledged sequence: failed at once
    with an error saying it was most likely written, not retried, and no epoch bump."""
    acc, s, client = _idempotent_sender(rig)
    b0 = drained(acc, 0)
    s._send_produce(1, [b0], 0)
    s.idem.acked(b0, 0)
    acc.landed(b0)
    done(acc, b0)
    b1, b2 = drained(acc, 0, n=2), drained(acc, 0)
    s._send_produce(1, [b1, b2], 0)
    s.idem.acked(b2, 3)                     # acknowledged before b1's retry came back
    acc.landed(b2)
    done(acc, b2)
    with caplog.at_level("ERROR", logger="fastkafka"):
        s._retry_or_fail(b1, OutOfOrderSequenceNumberError("refused"), 0, 1)
    assert b1.is_done and isinstance(b1.error, OutOfOrderSequenceNumberError)
    assert "most likely written" in str(b1.error) and "t-0" in str(b1.error)
    assert acc.queued("t", 0) == [] and not s.idem.bump_required
    assert s.stats["retries"] == 0 and s.stats["errors"] == 1
    assert any("most likely written" in r.getMessage() for r in caplog.records)
    client.conn.reset()
