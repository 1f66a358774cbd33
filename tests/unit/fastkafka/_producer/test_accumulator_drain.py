"""The accumulator's C side of the GIL-free turn: the partition queues as C rings of owned
references, and drain_gil_free_c / next_send_deadline_c through their test seam
(``fastkafka._producer.testing.drain_nogil``), each skip rule shown to hold a batch back."""
from __future__ import annotations

import gc
import sys

import pytest

from fastkafka._producer.accumulator import RecordAccumulator, IdempotenceState, live_resources
from fastkafka._producer.testing import drain_nogil
from fastkafka._producer.bufferpool import BufferPool
from fastkafka.errors import KafkaError
from fastkafka._producer import testing

from reference_records import decode_batch

LINGER = 10
BACKOFF = 100
DELIVERY = 1000
INT64_MAX = 2**63 - 1


from test_accumulator import Cluster   # leader_for over a fixed map


LEADERS = {("t", 0): 1, ("t", 1): 1, ("u", 0): 2}


def make(batch_size=1024, linger=LINGER, ordered=False, compression=0):
    return RecordAccumulator(batch_size, compression, None, linger, BACKOFF, DELIVERY,
                             BufferPool(1 << 20, batch_size), ordered)


def add(acc, topic="t", partition=0, value=b"v" * 100, now=0):
    return acc.append(topic, partition, 1000, None, value, None, None, now, 0)


def drain_gil_free(acc, nodes=((1, 1),), now=LINGER, max_size=1 << 20, out_cap=64):
    return drain_nogil(acc, [list(n) for n in nodes], max_size, now, out_cap)


def finish(acc, batches):
    for b in batches:
        b.complete(0, -1, None)
        acc.deallocate(b)


@pytest.fixture
def acc():
    made = []

    def _make(**kw):
        a = make(**kw)
        made.append(a)
        return a
    yield _make
    for a in made:
        finish(a, a.abort_undrained())
        a.close()


def with_leaders(a, now=0, leaders=LEADERS):
    a.ready(Cluster(leaders), now)     # ready() keeps the leaders in the partitions' states
    return a


# ---- the ring -------------------------------------------------------------------------------------

def test_ring_references_move_on_drain_and_come_back_to_baseline(acc):
    a = acc()
    for p in (0, 1):
        add(a, partition=p)
    b = a.queued("t", 0)[0]
    base = sys.getrefcount(b)           # the ring's, _incomplete's, ``b`` and the argument
    out = a.drain(Cluster(LEADERS), [1], 1 << 20, LINGER)[1]
    assert b in out and a.queued_batches("t", 0) == 0
    assert sys.getrefcount(b) == base   # the ring's reference moved into ``out``
    del out
    assert sys.getrefcount(b) == base - 1
    a.reenqueue(b, LINGER)
    assert sys.getrefcount(b) == base   # back in the ring
    expired = a.expired_batches(DELIVERY)
    assert expired == [b]
    assert sys.getrefcount(b) == base   # moved from the ring into ``expired``
    del expired
    a.deallocate(b)                      # out of _incomplete
    assert sys.getrefcount(b) == base - 2
    b.complete(-1, -1, KafkaError("x"))


def test_ring_gil_free_drain_moves_references(acc):
    a = acc()
    add(a, partition=0)
    with_leaders(a)
    b = a.queued("t", 0)[0]
    base = sys.getrefcount(b)
    _, got = drain_gil_free(a)
    assert got == [(1, b)]
    assert sys.getrefcount(b) == base   # ring -> the seam's output list, no count change
    del got
    finish(a, [b])
    assert sys.getrefcount(b) == base - 2   # neither the ring nor _incomplete holds it


def test_ring_grows_wraps_and_keeps_order(acc):
    a = acc(batch_size=128)
    cluster = Cluster({("t", 0): 1})
    made = []
    for round_ in range(5):
        for i in range(7):      # a batch each (128-byte batches, 100-byte values)
            add(a, value=b"%d" % (round_ * 100 + i) + b"x" * 100)
        q = a.queued("t", 0)
        made = q
        drained = []
        for _ in range(3):      # pop from the head: the ring's head moves around
            drained += a.drain(cluster, [1], 1, LINGER)[1]
        assert drained == q[:3] and a.queued("t", 0) == q[3:]
        finish(a, drained)
        finish(a, a.abort_undrained())
    assert a.queued_batches("t", 0) == 0
    assert made


def test_reenqueue_positions_by_sequence_in_the_ring(acc):
    a = acc(batch_size=128)
    for i in range(4):
        add(a, value=b"%d" % i + b"x" * 100)
    q = a.queued("t", 0)
    d = []
    for _ in range(3):
        d += a.drain(Cluster({("t", 0): 1}), [1], 1, LINGER)[1]
    for b, seq in zip(d, (0, 5, 9)):
        b.base_sequence = seq
    a.reenqueue(d[1], 20)                      # seq 5: at the head
    a.reenqueue(d[2], 20)                      # seq 9: after 5
    a.reenqueue(d[0], 20)                      # seq 0: before both
    assert a.queued("t", 0) == [d[0], d[1], d[2], q[3]]
    unseq = q[3]
    assert unseq.base_sequence == -1


def test_a_cycle_through_a_queued_batch_is_collected():
    before = live_resources()
    a = make()
    # the record's callback refers to the accumulator: accumulator -> queue -> (C ring) -> batch
    # -> future -> callback -> accumulator
    a.append("t", 0, 1000, None, b"v", None, lambda err, md, a=a: a, 0, 0)
    del a
    gc.collect()
    after = live_resources()
    assert after["accumulators_open"] == before["accumulators_open"]
    assert after["producer_batches"] == before["producer_batches"]


# ---- drain_gil_free_c: what it takes ---------------------------------------------------------------

def test_gil_free_takes_closes_and_stamps_a_lingered_batch(acc):
    a = acc()
    add(a, partition=0, value=b"hello")
    with_leaders(a)
    deadline, got = drain_gil_free(a, now=LINGER)
    assert deadline == LINGER                # its linger ends now
    [(node, b)] = got
    assert node == 1 and b.drained_ms == LINGER and b.is_full
    assert b.builder.is_closed and b.builder.is_stamped
    batch = decode_batch(b.builder.buffer())  # the CRC checks out
    assert batch.producer_id == -1 and batch.base_sequence == -1
    assert [r.value for r in batch.records] == [b"hello"]
    assert a.queued_batches("t", 0) == 0
    assert not testing.is_muted(a, "t", 0)
    finish(a, [b])


def test_gil_free_one_batch_per_partition_grouped_by_node(acc):
    a = acc(batch_size=128)
    for p, t in ((0, "t"), (1, "t"), (0, "u")):
        for _ in range(2):
            add(a, topic=t, partition=p)
    with_leaders(a)
    _, got = drain_gil_free(a, nodes=((2, 1), (1, 1)))
    assert [n for n, _ in got] == [2, 1, 1]
    assert sorted((b.topic, b.partition) for _, b in got) == [("t", 0), ("t", 1), ("u", 0)]
    assert all(a.queued_batches(*tp) == 1 for tp in LEADERS)
    finish(a, [b for _, b in got])


def test_gil_free_max_request_size_but_a_first_batch_always(acc):
    a = acc()
    add(a, partition=0)
    add(a, partition=1)
    with_leaders(a)
    _, got = drain_gil_free(a, max_size=1)
    assert len(got) == 1                      # the first, though larger than 1 byte
    _, got2 = drain_gil_free(a, max_size=1)
    assert len(got2) == 1 and got2[0][1] is not got[0][1]
    finish(a, [b for _, b in got + got2])


def test_gil_free_round_robin_start_moves(acc):
    a = acc()
    firsts = []
    for _ in range(4):
        add(a, partition=0)
        add(a, partition=1)
        with_leaders(a)
        _, got = drain_gil_free(a, max_size=1)
        firsts.append((got[0][1].topic, got[0][1].partition))
        finish(a, [b for _, b in got])
        finish(a, a.abort_undrained())
    assert len(set(firsts)) == 2


def test_gil_free_output_full_takes_fewer(acc):
    a = acc()
    add(a, partition=0)
    add(a, partition=1)
    with_leaders(a)
    _, got = drain_gil_free(a, out_cap=1)
    assert len(got) == 1
    assert a.queued_batches("t", 0) + a.queued_batches("t", 1) == 1
    finish(a, [b for _, b in got])


def test_gil_free_ordered_mutes(acc):
    a = acc(ordered=True)
    add(a, partition=0)
    with_leaders(a)
    _, got = drain_gil_free(a)
    assert len(got) == 1 and testing.is_muted(a, "t", 0)
    finish(a, [b for _, b in got])


def test_gil_free_full_or_flushing_or_closing_before_linger(acc):
    a = acc(batch_size=256)
    add(a, partition=0)
    add(a, partition=0)                      # the first refused it: full now
    with_leaders(a)
    d, got = drain_gil_free(a, now=1)
    assert len(got) == 1 and d == 0
    finish(a, [b for _, b in got])
    add(a, partition=1, now=1)
    with_leaders(a)
    d, got = drain_gil_free(a, now=2)
    # t-0's second batch and t-1's are not full: their linger runs
    assert got == [] and d == LINGER
    a.begin_flush()
    _, got = drain_gil_free(a, now=2)
    a.end_flush()
    assert len(got) == 2
    finish(a, [b for _, b in got])
    add(a, partition=0, now=3)
    a.close()
    _, got = drain_gil_free(a, now=3)
    assert len(got) == 1
    finish(a, [b for _, b in got])


# ---- drain_gil_free_c: each rule that holds a batch back --------------------------------------------

def test_gil_free_skip_linger_not_passed_and_deadline(acc):
    a = acc()
    add(a, partition=0, now=0)
    add(a, partition=1, now=3)
    with_leaders(a)
    d, got = drain_gil_free(a, now=5)
    assert got == [] and d == LINGER          # t-0's linger ends first
    d, got = drain_gil_free(a, now=LINGER)
    assert [b.partition for _, b in got] == [0] and d == LINGER
    d, got = drain_gil_free(a, now=LINGER + 1)
    assert got == [] and d == 3 + LINGER
    finish(a, [b for _, b in got])


def test_gil_free_skip_retry(acc):
    a = acc()
    add(a)
    with_leaders(a)
    [b] = a.drain(Cluster(LEADERS), [1], 1 << 20, LINGER)[1]
    a.reenqueue(b, LINGER)
    d, got = drain_gil_free(a, now=LINGER + 10 * BACKOFF)
    assert got == [] and d == INT64_MAX
    assert a.queued("t", 0) == [b]


def test_gil_free_skip_expired(acc):
    a = acc()
    add(a, now=0)
    with_leaders(a)
    d, got = drain_gil_free(a, now=DELIVERY)
    assert got == [] and d == INT64_MAX
    assert a.queued_batches("t", 0) == 1


def test_gil_free_skip_muted(acc):
    a = acc()
    add(a)
    with_leaders(a)
    testing.mute(a, "t", 0)
    d, got = drain_gil_free(a)
    assert got == [] and d == INT64_MAX
    a.unmute("t", 0)
    _, got = drain_gil_free(a)
    assert len(got) == 1
    finish(a, [b for _, b in got])


def test_gil_free_takes_a_transactional_batch_only_once_its_partition_is_in_the_transaction(acc):
    a = acc()
    add(a)
    with_leaders(a)
    a.transactional = True
    d, got = drain_gil_free(a)
    assert got == [] and d == INT64_MAX          # not added yet: the GIL turn adds it first
    a.txn_mark_added([("t", 0)])
    _, got = drain_gil_free(a)
    assert len(got) == 1
    finish(a, [b for _, b in got])


def test_gil_free_skip_compressed_without_its_c_library_left_open(acc):
    from fastkafka._wire import ccodecs
    assert ccodecs.use_c("gzip", False) is False
    try:
        a = acc(compression=1)
        add(a)                  # the builder is made here, without gzip in C
    finally:
        ccodecs.use_c("gzip", True)
    with_leaders(a)
    d, got = drain_gil_free(a)
    assert got == [] and d == INT64_MAX
    [b] = a.queued("t", 0)
    assert not b.builder.is_closed and not b.builder.is_stamped and b.drained_ms == -1


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("idempotent", [False, True])
def test_gil_free_compresses_in_c_and_stamps(acc, codec, idempotent):
    from fastkafka._wire import compression
    a = acc(compression=codec, batch_size=4096)
    if idempotent:
        idem = IdempotenceState(a)
        idem.set_producer_id(4000, 3)
    values = {}
    for p in (0, 1):
        values[p] = [b"value %d of %d " % (i, p) * 6 for i in range(30)]
        for v in values[p]:
            add(a, partition=p, value=v)
    with_leaders(a)
    before = compression.counters()
    d, got = drain_gil_free(a)
    assert d <= LINGER
    assert sorted(b.partition for _, b in got) == [0, 1]
    after = compression.counters()
    name = compression.CODEC_NAMES[codec]
    assert after["c"][name]["calls"] >= before["c"][name]["calls"] + 2
    assert after["python"][name] == before["python"][name]
    for _, b in got:
        assert b.builder.is_closed and b.builder.is_stamped and b.drained_ms == LINGER
        data = bytes(b.builder.buffer())
        batch = decode_batch(data)                  # the CRC checks out
        assert batch.compression_type == codec
        assert len(data) < sum(len(v) for v in values[b.partition])     # compressed
        assert [r.value for r in batch.records] == values[b.partition]
        if idempotent:
            assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4000, 3, 0)
            assert testing.is_muted(a, "t", b.partition)     # the first batch of the epoch: awaiting its ack
        else:
            assert batch.producer_id == -1 and batch.base_sequence == -1
    finish(a, [b for _, b in got])


def test_gil_free_skip_unknown_leader_other_node_or_no_room(acc):
    a = acc()
    add(a)
    d, got = drain_gil_free(a)                       # no leader known yet
    assert got == [] and d == INT64_MAX
    with_leaders(a)
    d, got = drain_gil_free(a, nodes=((2, 1),))     # led by node 1
    assert got == [] and d == INT64_MAX
    d, got = drain_gil_free(a, nodes=((1, 0),))     # no room
    assert got == [] and d == INT64_MAX
    _, got = drain_gil_free(a, nodes=((1, 1),))
    assert len(got) == 1
    finish(a, [b for _, b in got])


def test_gil_free_skip_split_pieces(acc):
    a = acc()
    for _ in range(4):
        add(a, value=b"x" * 10)
    [b] = a.drain(Cluster(LEADERS), [1], 1 << 20, LINGER)[1]
    pieces = a.split_and_reenqueue(b, LINGER)
    assert pieces and a.queued("t", 0) == pieces
    d, got = drain_gil_free(a)
    assert got == [] and d == INT64_MAX       # closed already: the GIL turn sends them
    finish(a, a.abort_undrained())
    b.complete(0, -1, None)
    a.deallocate(b)


def test_gil_free_idempotence_gates_stamps_and_mutes(acc):
    a = acc()
    idem = IdempotenceState(a)
    add(a, partition=0)
    add(a, partition=1)
    with_leaders(a)
    d, got = drain_gil_free(a)
    assert got == [] and d == INT64_MAX       # no producer id yet
    idem.set_producer_id(42, 3)
    idem.bump_required = True
    d, got = drain_gil_free(a)
    assert got == [] and d == INT64_MAX       # an epoch bump pending
    idem.bump_required = False
    _, got = drain_gil_free(a)
    assert len(got) == 2
    for _, b in got:
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (42, 3, 0)
        h = decode_batch(b.builder.buffer())
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 0)
        # the partition's first batch under this epoch: muted until it is acknowledged
        assert testing.is_muted(a, b.topic, b.partition)
    assert idem.sequence_state("t", 0) == (1, None, None, None)
    finish(a, [b for _, b in got])
    del idem


def test_refresh_leaders_moves_gil_free_to_the_new_leader(acc):
    a = acc()
    add(a, partition=0)
    with_leaders(a)
    a.refresh_leaders(Cluster({("t", 0): 2}))
    d, got = drain_gil_free(a, nodes=((1, 1),))
    assert got == [] and d == INT64_MAX
    a.refresh_leaders(Cluster({}))
    d, got = drain_gil_free(a, nodes=((2, 1),))
    assert got == [] and d == INT64_MAX        # unknown now
    a.refresh_leaders(Cluster({("t", 0): 2}))
    _, got = drain_gil_free(a, nodes=((2, 1),))
    assert [n for n, _ in got] == [2]
    finish(a, [b for _, b in got])


def test_gil_free_drain_concurrent_with_appends(acc):
    """The GIL-free drain (without the GIL, under the accumulator's lock) against a thread
    appending: every record ends up in exactly one batch, drained or still queued."""
    import threading
    a = acc(batch_size=512)
    add(a, partition=0)
    add(a, partition=1)
    with_leaders(a)
    n = 3000
    stop = threading.Event()

    def producer():
        for i in range(n):
            add(a, partition=i % 2, value=b"%06d" % i)
        stop.set()

    t = threading.Thread(target=producer)
    t.start()
    taken = []
    while not stop.is_set() or a.has_undrained():
        _, got = drain_gil_free(a, nodes=((1, 4),), now=LINGER, max_size=4096)
        taken += [b for _, b in got]
        if stop.is_set() and not got:
            a.begin_flush()
            _, got = drain_gil_free(a, nodes=((1, 4),), now=LINGER)
            a.end_flush()
            taken += [b for _, b in got]
    t.join()
    values = []
    for b in taken:
        values += [r.value for r in decode_batch(b.builder.buffer()).records]
    assert sorted(values) == sorted([b"v" * 100] * 2 + [b"%06d" % i for i in range(n)])
    finish(a, taken)


@pytest.mark.parametrize("codec", [2, 3, 4])
def test_gil_free_records_that_did_not_compress_and_do_not_fit_go_uncompressed(acc, codec):
    # one random record filling its 4 KiB pooled buffer to 6 bytes short of the end: the codec's
    # framing makes it larger, the GIL-free drain cannot ask the pool for more, so the batch goes
    # out uncompressed (codec 0), the record intact
    import os
    a = acc(compression=codec, batch_size=4096)
    value = os.urandom(4020)                     # 61 + 9 + 4020 = 4090 bytes
    add(a, value=value)
    with_leaders(a)
    _, got = drain_gil_free(a)
    [(_, b)] = got
    batch = decode_batch(b.builder.buffer())
    assert batch.compression_type == 0 and len(bytes(b.builder.buffer())) == 4090
    assert [r.value for r in batch.records] == [value]
    finish(a, [b])
