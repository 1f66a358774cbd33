"""A batch the broker refuses as too large (MESSAGE_TOO_LARGE) is split, not failed.

The fault broker enforces a per-topic ``max.message.bytes`` like Kafka (the compressed batch, header
included, checked before the sequence) and checks idempotent sequences like Kafka. Checked here:
every record that fits is stored once, in send order, at the offset its future reported; a record
too large on its own fails alone with MessageTooLargeError; every callback and send_batch count sees
exactly one outcome per record; the split pieces carry valid sequences under pipelining (the only
OUT_OF_ORDER_SEQUENCE_NUMBER answers are for batches in flight behind a refused one, whose sequence
is ahead of what the broker expects; never a duplicate, never an epoch bump for a split alone); the
compressed size decides. The first tests drive ``RecordAccumulator.split_and_reenqueue`` directly.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import pytest

from faultbroker import delay, parse_batches, partition_error
from fastkafka import Producer
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.bufferpool import BufferPool
from fastkafka.errors import KafkaError, MessageTooLargeError, RecordListTooLargeError
from fastkafka.protocol import ApiKey
from fastkafka._producer import testing

from reference_records import decode_batch

pytestmark = pytest.mark.faultbroker

LIMIT = 20000                       # the topic's max.message.bytes
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

FAST = dict(request_timeout_ms=5000, delivery_timeout_ms=30000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, max_block_ms=5000)


# ------------------------------------------------------------------------------------- fixtures
def limited_topic(fb, name="t", partitions=1, limit=LIMIT):
    fb.create_topic(name, partitions)
    fb.cluster.set_max_message_bytes(name, limit)
    return name


@dataclass
class Check:
    topic: str
    partition: int
    epoch: int
    base_sequence: int
    record_count: int
    error: int
    duplicate: bool
    expected: int | None     # the sequence the broker expected from this epoch, None: no state yet


class SequenceLog:
    """Every idempotent sequence check the fault broker makes, with what it expected."""

    def __init__(self, cluster):
        self.checks: list[Check] = []
        check = cluster._check_sequence

        def logged(log, info):
            state = log.producers.get(info.producer_id)
            expected = None
            if state is not None and info.producer_epoch == state[0]:
                expected = 0 if state[1] == 2**31 - 1 else state[1] + 1
            err, dup = check(log, info)
            if info.producer_id >= 0:
                self.checks.append(Check(log.topic, log.partition, info.producer_epoch, info.base_sequence,
                                         info.record_count, err, dup is not None, expected))
            return err, dup

        cluster._check_sequence = logged

    def assert_sound(self):
        """No duplicate, no stale epoch; an OUT_OF_ORDER answer only for a batch whose sequence is
        ahead of the expected one (an earlier batch was refused): never one behind or repeated."""
        assert self.checks, "no sequenced batch reached the broker"
        for c in self.checks:
            assert not c.duplicate, f"a sequence was sent twice: {c}"
            assert c.error != INVALID_PRODUCER_EPOCH, c
            if c.error == OUT_OF_ORDER_SEQUENCE_NUMBER:
                assert c.expected is not None and c.base_sequence > c.expected, c
            else:
                assert c.error == 0, c

    def out_of_order(self):
        return [c for c in self.checks if c.error == OUT_OF_ORDER_SEQUENCE_NUMBER]


def stored(cluster, topic, partition=0):
    """[(offset, value)] the broker stored (CRC, lengths and offset deltas checked), and the sizes
    of its batches."""
    out, sizes = [], []
    for sb in cluster.batches(topic, partition):
        b = decode_batch(sb.data)
        assert b.record_count == sb.record_count
        out.extend((sb.base_offset + i, r.value) for i, r in enumerate(b.records))
        sizes.append(len(sb.data))
    return out, sizes


def answers(fb, code):
    return [pr for r in fb.received(ApiKey.PRODUCE) if r.response
            for t in r.response["responses"] for pr in t["partition_responses"] if pr["error_code"] == code]


def incompressible(n, size=100, tag=b"r"):
    return [tag + b"%06d" % i + os.urandom(size - 7 - len(tag) + 1) for i in range(n)]


# ------------------------------------------------------------------ the accumulator, directly
class OneNode:
    def leader_for(self, topic, partition):
        return 1


def accumulator(batch_size=1 << 16, codec=0):
    pool = BufferPool(1 << 22, batch_size)
    return RecordAccumulator(batch_size, codec, None, 0, 100, 60000, pool, False), pool


def drain_one(acc, now=10):
    ready, _, _ = acc.ready(OneNode(), now)
    (batch,) = acc.drain(OneNode(), sorted(ready), 1 << 30, now)[1]
    return batch


def leaves(batch, first=0):
    """[(leaf batch, index of its first record in ``batch``)], in record order."""
    if batch.split_into is None:
        return [(batch, first)]
    out = []
    for piece in batch.split_into:
        out += leaves(piece, first)
        first += piece.record_count
    return out


def test_split_hands_every_record_over_to_its_piece():
    """Records of two send_batch calls (in runs: A, B, A again) and of send() with callbacks, in one
    batch, split and split again: each record's future, callback and BatchFuture count follow the
    piece that holds it, whatever outcome each piece gets; the split batch completes last; sequences
    follow the split batch's; the memory goes back whole."""
    acc, pool = accumulator()
    free = pool.available_memory
    calls = {}

    def cb(name):
        return lambda err, md: calls.setdefault(name, []).append((err, md))

    a, b = BatchFuture(), BatchFuture()
    acc.append_batch("t", 0, [b"a0", b"a1", b"a2"], None, None, 1000, a, 0, 0)
    fs0 = acc.append("t", 0, 1001, None, b"s0", None, cb("s0"), 0, 0)
    acc.append_batch("t", 0, [b"b0", b"b1"], None, None, 1002, b, 0, 0)
    acc.append_batch("t", 0, [b"a3", b"a4"], None, None, 1003, a, 0, 0)
    fs1 = acc.append("t", 0, 1004, None, b"s1", None, cb("s1"), 0, 0)
    names = [b"a0", b"a1", b"a2", b"s0", b"b0", b"b1", b"a3", b"a4", b"s1"]
    batch = drain_one(acc)
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 2, 100
    batch.builder.stamp(7, 2, 100)

    pieces = acc.split_and_reenqueue(batch, 20)
    assert [p.record_count for p in pieces] == [4, 5] and batch.split_into == tuple(pieces)
    assert acc.queued("t", 0) == pieces
    assert acc.incomplete_record_count() == 9
    assert drain_one(acc, now=20) is pieces[0]
    again = acc.split_and_reenqueue(pieces[0], 30)                     # a piece refused again
    assert [p.record_count for p in again] == [2, 2]
    assert acc.queued("t", 0) == [*again, pieces[1]]
    fs1.add_callback(cb("s1-late"))                                     # added after the split

    parts = leaves(batch)
    assert [(leaf.record_count, first) for leaf, first in parts] == [(2, 0), (2, 2), (5, 4)]
    for leaf, first in parts:
        assert leaf.attempts == 0 and leaf.created_ms == batch.created_ms
        assert leaf.base_sequence == 100 + first and leaf.producer_epoch == 2
        (info,) = parse_batches(bytes(leaf.builder.buffer()))
        assert (info.producer_id, info.producer_epoch, info.base_sequence, info.record_count) == \
            (7, 2, 100 + first, leaf.record_count)
        assert [r.value for r in decode_batch(leaf.builder.buffer()).records] == \
            names[first:first + leaf.record_count]

    # outcomes: the piece holding b0 fails, the others are written at offsets far apart
    failing = MessageTooLargeError("too large")
    outcome, results = {}, []
    for n, (leaf, first) in enumerate(parts):
        err = failing if first <= names.index(b"b0") < first + leaf.record_count else None
        base = -1 if err else 1000 * (n + 1)
        results.append((leaf, base, err))
        for i in range(leaf.record_count):
            outcome[names[first + i]] = (err, -1 if err else base + i)
    for leaf, base, err in reversed(results):       # completion order does not matter
        assert not batch.is_done
        assert leaf.complete(base, -1, err)
        acc.deallocate(leaf)
    assert batch.is_done and batch.wait(0)

    a_failed = sum(1 for k in (b"a0", b"a1", b"a2", b"a3", b"a4") if outcome[k][0])
    b_failed = sum(1 for k in (b"b0", b"b1") if outcome[k][0])
    assert (a.delivered, a.failed, a.done()) == (5 - a_failed, a_failed, True)
    assert (b.delivered, b.failed, b.done()) == (2 - b_failed, b_failed, True)
    assert b_failed >= 1
    for name, fut in ((b"s0", fs0), (b"s1", fs1)):
        err, offset = outcome[name]
        key = name.decode()
        assert len(calls[key]) == 1 and calls[key][0][0] is err
        assert calls[key][0][1].offset == offset
        if err:
            with pytest.raises(MessageTooLargeError):
                fut.get(0)
        else:
            assert fut.get(0).offset == offset and fut.done() and fut.exception(0) is None
    assert len(calls["s1-late"]) == 1 and calls["s1-late"][0][1].offset == outcome[b"s1"][1]
    assert pool.available_memory == free
    assert not testing.has_incomplete(acc)


def test_split_records_without_callbacks_and_waiters():
    """send()/produce() records with no callback (only counted by their batch) split fine when no
    send_batch record shares the batch; a get() already waiting when the split happens returns the
    record's own outcome."""
    acc, _ = accumulator()
    futs = [acc.append("t", 0, 1000 + i, None, b"v%d" % i, None, None, 0, 0) for i in range(6)]
    batch = drain_one(acc)
    got = {}
    waiter = threading.Thread(target=lambda: got.update(md=futs[5].get(5)))
    waiter.start()
    pieces = acc.split_and_reenqueue(batch, 20)
    assert pieces and batch.base_sequence == -1 and all(p.base_sequence == -1 for p in pieces)
    for p in pieces:
        p.complete(500 if p is pieces[0] else 900, -1, None)
    waiter.join(5)
    first_of_last = pieces[0].record_count
    assert got["md"].offset == 900 + 5 - first_of_last
    assert [f.get(0).offset for f in futs] == \
        [500 + i for i in range(first_of_last)] + [900 + i for i in range(6 - first_of_last)]


def test_split_refused_when_records_cannot_be_told_apart():
    """send_batch records and a send() record without a callback in one batch: the batch counts
    the BatchFuture's records but not where they are, so it is not split (it fails as a whole, as
    before); a batch of one record is not split either."""
    acc, _ = accumulator()
    acc.append_batch("t", 0, [b"a0", b"a1"], None, None, 1000, BatchFuture(), 0, 0)
    acc.append("t", 0, 1001, None, b"plain", None, None, 0, 0)
    acc.append_batch("t", 0, [b"a2"], None, None, 1002, BatchFuture(), 0, 0)
    batch = drain_one(acc)
    assert acc.split_and_reenqueue(batch, 20) is None
    assert batch.split_into is None and acc.queued("t", 0) == [] and batch.builder is not None
    acc.append("t", 0, 1003, None, b"alone", None, None, 0, 0)
    single = drain_one(acc, now=30)
    assert acc.split_and_reenqueue(single, 40) is None


def test_pieces_queue_in_sequence_order():
    """The pieces go after a retried batch with a lower sequence and before new batches."""
    acc, _ = accumulator(batch_size=1000)
    for i in range(5):
        acc.append("t", 0, 1000, None, os.urandom(100), None, None, 0, 0)
    big = drain_one(acc, now=10)
    for i in range(3):
        acc.append("t", 0, 1000, None, os.urandom(100), None, None, 0, 0)
    earlier = drain_one(acc, now=20)
    acc.append("t", 0, 1000, None, b"new", None, None, 30, 0)
    earlier.base_sequence, big.base_sequence = 50, 100
    earlier.builder.stamp(1, 0, 50)
    big.producer_id = earlier.producer_id = 1
    big.producer_epoch = earlier.producer_epoch = 0
    big.builder.stamp(1, 0, 100)
    acc.reenqueue(earlier, 30)
    newest = acc.queued("t", 0)[-1]
    pieces = acc.split_and_reenqueue(big, 40)
    assert acc.queued("t", 0) == [earlier, *pieces, newest]
    assert [p.base_sequence for p in pieces] == [100, 100 + pieces[0].record_count]


@pytest.mark.parametrize("codec", range(5))
def test_pieces_are_compressed_again(codec):
    acc, _ = accumulator(codec=codec)
    values = incompressible(40, 300)
    bf = BatchFuture()
    acc.append_batch("t", 0, values, None, None, 1000, bf, 0, 0)
    batch = drain_one(acc)
    pieces = acc.split_and_reenqueue(batch, 20, 3)
    assert len(pieces) == 3
    out = []
    for p in pieces:
        assert p.builder.is_closed and p.builder.compression_type == codec
        decoded = decode_batch(p.builder.buffer())
        assert decoded.compression_type == codec
        out += [r.value for r in decoded.records]
    assert out == values


# ------------------------------------------------------------------------- on the fault broker
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("codec", CODECS)
def test_batch_too_large_is_split_and_only_the_record_too_large_alone_fails(fb, make_producer, codec,
                                                                           idempotent):
    topic = limited_topic(fb)
    seqs = SequenceLog(fb.cluster)
    kw = dict(compression_type=codec, linger_ms=300, batch_size=1 << 20)
    if not idempotent:  # without idempotence, order across retries needs one request in flight
        kw.update(enable_idempotence=False, max_in_flight_requests_per_connection=1)
    p = make_producer(fb, **kw)
    values = incompressible(300)
    big = b"BIG" + os.urandom(25000)
    sent = values[:150] + [big] + values[150:]
    outcomes = {}

    def record(v):
        return lambda err, md: outcomes.setdefault(v, []).append((err, md))

    futs = [p.send(topic, v, partition=0, on_delivery=record(v)) for v in sent]
    with pytest.raises(MessageTooLargeError):
        futs[150].get(20)
    offsets = {v: f.get(20).offset for v, f in zip(sent, futs) if v is not big}
    log, sizes = stored(fb.cluster, topic)
    assert [v for _, v in log] == values                       # each once, in send order
    assert all(offsets[v] == off for off, v in log)
    assert max(sizes) <= LIMIT
    assert all(len(o) == 1 for o in outcomes.values()) and len(outcomes) == len(sent)
    assert isinstance(outcomes[big][0][0], MessageTooLargeError)
    assert all(outcomes[v][0][0] is None and outcomes[v][0][1].offset == offsets[v] for v in values)
    m = p.metrics()
    assert m["batches_split"] >= 2 and m["errors"] == 1
    if idempotent:
        seqs.assert_sound()
        assert m["epoch_bumps"] == 1    # the record refused alone leaves a gap: one bump
    else:
        assert seqs.checks == []


def carries_too_large_batch(header, body):
    for td in body["topic_data"]:
        for pd in td["partition_data"]:
            recs = pd["records"]
            raw = b"".join(bytes(x) for x in recs) if isinstance(recs, list) else bytes(recs)
            if any(info.size > LIMIT for info in parse_batches(raw)):
                return True
    return False


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_split_under_pipelining_keeps_sequences_valid(fb, make_producer, codec):
    """Waves of records that fill a batch too large for the topic, plus a few that follow it in a
    small batch, sent while the big one is in flight (the broker holds back its answers to requests
    with a batch too large). The big batch is refused, the small one behind it is refused
    OUT_OF_ORDER_SEQUENCE_NUMBER (a gap) and retried behind the pieces, which take the refused batch's
    sequences. No epoch bump, no duplicate, nothing reordered."""
    topic = limited_topic(fb)
    seqs = SequenceLog(fb.cluster)
    fb.script.on(ApiKey.PRODUCE, delay(0.05), times=None, match=carries_too_large_batch)
    p = make_producer(fb, compression_type=codec, linger_ms=10, batch_size=48 * 1024,
                      max_in_flight_requests_per_connection=5)
    values, futs = [], []
    for wave in range(8):
        chunk = incompressible(450, tag=b"w%d-" % wave)
        values += chunk
        futs += [p.send(topic, v, partition=0) for v in chunk]
        time.sleep(0.04)
    offsets = [f.get(30).offset for f in futs]
    log, sizes = stored(fb.cluster, topic)
    assert [v for _, v in log] == values
    assert [off for off, _ in log] == offsets
    assert max(sizes) <= LIMIT
    m = p.metrics()
    assert m["batches_split"] >= 8 and m["epoch_bumps"] == 0 and m["errors"] == 0
    seqs.assert_sound()
    assert seqs.out_of_order(), "no batch was in flight behind a refused one"
    assert answers(fb, MESSAGE_TOO_LARGE)


def test_records_too_large_alone_under_pipelining_with_send_batch(fb, make_producer):
    """A few records too large on their own inside a pipelined send_batch stream: each fails alone
    (the BatchFuture counts exactly them as failed), every other record is stored once, in order."""
    topic = limited_topic(fb)
    seqs = SequenceLog(fb.cluster)
    fb.script.on(ApiKey.PRODUCE, delay(0.05), times=6)
    p = make_producer(fb, linger_ms=50, batch_size=48 * 1024, compression_type="lz4")
    values = incompressible(3000)
    bigs = {500, 1401, 2999}
    for i in bigs:
        values[i] = b"BIG%04d" % i + os.urandom(25000)
    bf = p.send_batch(topic, values, partition=0)
    with pytest.raises(MessageTooLargeError):
        bf.get(60)
    assert (bf.delivered, bf.failed, bf.appended) == (len(values) - len(bigs), len(bigs), len(values))
    good = [v for i, v in enumerate(values) if i not in bigs]
    log, sizes = stored(fb.cluster, topic)
    assert [v for _, v in log] == good
    assert max(sizes) <= LIMIT
    m = p.metrics()
    assert m["batches_split"] >= len(bigs) and m["errors"] == len(bigs)
    assert 1 <= m["epoch_bumps"] <= len(bigs)
    seqs.assert_sound()


@pytest.mark.parametrize("code,error", [(MESSAGE_TOO_LARGE, MessageTooLargeError),
                                        (RECORD_LIST_TOO_LARGE, RecordListTooLargeError)],
                         ids=["message", "record_list"])
def test_scripted_too_large_answer_splits_that_partition_only(fb, make_producer, code, error):
    """One Produce answer refuses partition 0 as too large (the request also carries partition 1,
    which is stored): partition 0's batch is split and delivered with valid sequences."""
    fb.create_topic("t", 2)
    seqs = SequenceLog(fb.cluster)
    rule = fb.script.on(ApiKey.PRODUCE, partition_error(code, [0]), times=1,
                        match=lambda header, body: any(pd["index"] == 0 for td in body["topic_data"]
                                                       for pd in td["partition_data"]))
    p = make_producer(fb, linger_ms=100)
    futs = {part: [p.send("t", b"p%d-%03d" % (part, i), partition=part) for i in range(20)] for part in (0, 1)}
    for part in (0, 1):
        assert [f.get(20).offset for f in futs[part]] == list(range(20))
        assert [v for _, v in stored(fb.cluster, "t", part)[0]] == [b"p%d-%03d" % (part, i) for i in range(20)]
    assert rule.fired == 1 and len(answers(fb, code)) == 1
    m = p.metrics()
    assert m["batches_split"] == 1 and m["epoch_bumps"] == 0 and m["errors"] == 0
    seqs.assert_sound()
    assert issubclass(error, KafkaError)


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_size_decides(fb, make_producer, codec):
    """300 records of 100 compressible bytes (about 33 KB): over the limit uncompressed, far under
    it compressed. Only the uncompressed batch is split."""
    topic = limited_topic(fb)
    p = make_producer(fb, compression_type=codec, linger_ms=300, batch_size=1 << 20)
    values = [b"%05d" % i + b"x" * 95 for i in range(300)]
    futs = [p.send(topic, v, partition=0) for v in values]
    assert [f.get(20).offset for f in futs] == list(range(300))
    log, sizes = stored(fb.cluster, topic)
    assert [v for _, v in log] == values and max(sizes) <= LIMIT
    split = p.metrics()["batches_split"]
    if codec == "none":
        assert split >= 1 and len(sizes) >= 2
    else:
        assert split == 0 and len(sizes) == 1
