"""RecordAccumulator, ProducerBatch and the futures, driven with explicit ``now_ms`` values."""
from __future__ import annotations

import array
import itertools
import logging
import pickle
import threading
import time

import pytest

from fastkafka._producer.accumulator import NO_DEADLINE, PARTITION_STICKY, RecordAccumulator
from fastkafka._producer.batch import BatchFuture, FutureRecordMetadata, RecordMetadata
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer import testing
from fastkafka._producer.partitioner import java_partition, partitions_for_keys
from fastkafka.errors import (
    BufferExhaustedError, DeliveryTimeoutError, InvalidRecordError, KafkaError, KafkaTimeoutError,
    MalformedRecordError, ProducerClosedError, RecordTooLargeError, UnknownPartitionError,
)

import pyarrow as pa

from reference_records import decode_batch

LINGER = 10
BACKOFF = 100
DELIVERY = 1000


class Cluster:
    """leader_for over a fixed {(topic, partition): leader} map."""

    def __init__(self, leaders):
        self.leaders = dict(leaders)

    def leader_for(self, topic, partition):
        return self.leaders.get((topic, partition), -1)


def make(batch_size=1024, memory=1 << 20, linger=LINGER, ordered=False, compression=0):
    pool = BufferPool(memory, batch_size)
    return RecordAccumulator(batch_size, compression, None, linger, BACKOFF, DELIVERY, pool, ordered)


def add(acc, topic="t", partition=0, value=b"v" * 100, key=None, now=0, cb=None, ts=1000,
        headers=None, block=0):
    return acc.append(topic, partition, ts, key, value, headers, cb, now, block)


def decode(batch):
    b = batch.builder
    b.close()
    b.stamp(-1, -1, -1)
    return decode_batch(b.buffer())


def drain_all(acc, cluster, now, max_size=1 << 30):
    ready, _, _ = acc.ready(cluster, now)
    return acc.drain(cluster, sorted(ready), max_size, now)


# ---- append / batches ---------------------------------------------------------------------------

def test_append_fills_batch_then_starts_new_one_and_records_decode_in_order():
    acc = make(batch_size=1024)
    futs = [add(acc, value=b"%03d" % i + b"x" * 97, key=b"k%d" % i, ts=1000 + i) for i in range(25)]
    batches = acc.queued("t", 0)
    assert len(batches) >= 2
    assert sum(b.record_count for b in batches) == 25
    assert all(b.size_in_bytes <= 1024 for b in batches)
    assert [f.index for f in futs[:batches[0].record_count]] == list(range(batches[0].record_count))
    assert futs[batches[0].record_count].index == 0 and futs[batches[0].record_count].batch is batches[1]
    drained = acc.drain(Cluster({("t", 0): 1}), [1], 1 << 20, 0)[1]
    assert drained == [batches[0]]
    recs = decode(drained[0]).records
    assert [r.value[:3] for r in recs] == [b"%03d" % i for i in range(len(recs))]
    assert [r.key for r in recs] == [b"k%d" % i for i in range(len(recs))]
    assert [r.timestamp for r in recs] == [1000 + i for i in range(len(recs))]


def test_record_larger_than_batch_size_gets_its_own_batch():
    acc = make(batch_size=1024)
    add(acc, value=b"a" * 10)
    big = add(acc, value=b"B" * 5000)
    add(acc, value=b"c" * 10)
    batches = acc.queued("t", 0)
    assert [b.record_count for b in batches] == [1, 1, 1]
    assert big.batch is batches[1]
    assert batches[1].reserved >= 5000       # memory accounted for the whole record
    assert acc.buffer_pool.available_memory == acc.buffer_pool.total - sum(b.reserved for b in batches)


def test_append_types_and_headers():
    acc = make()
    f = acc.append("t", 0, 5, bytearray(b"key"), memoryview(b"value"), [("h", b"1"), ("n", None)],
                   None, 0, 0)
    assert isinstance(f, FutureRecordMetadata)
    with pytest.raises(InvalidRecordError):
        add(acc, value=1.5)
    with pytest.raises(MalformedRecordError, match="value: str cannot be encoded as UTF-8"):
        add(acc, value="\udc80")                     # a str is its UTF-8; a lone surrogate has none
    with pytest.raises(InvalidRecordError):
        add(acc, key=12)
    [batch] = acc.queued("t", 0)
    assert batch.record_count == 1    # the bad records were not appended
    rec = decode(batch).records[0]
    assert (rec.key, rec.value) == (b"key", b"value")
    assert [(k, v) for k, v in rec.headers] == [("h", b"1"), ("n", None)]


def test_bad_headers_do_not_take_memory_or_append():
    acc = make()
    with pytest.raises(TypeError, match=r"header 0: value must be bytes.*got int"):
        add(acc, headers=[("h", 5)])
    assert acc.queued_batches("t", 0) == 0
    assert acc.buffer_pool.available_memory == acc.buffer_pool.total


# ---- ready / linger / next check ----------------------------------------------------------------

def test_ready_by_linger_and_next_ready_check():
    acc = make(linger=10)
    cluster = Cluster({("t", 0): 1, ("t", 1): 2})
    add(acc, partition=0, now=100)
    add(acc, partition=1, now=104)
    assert acc.ready(cluster, 100) == (set(), 10, set())
    assert acc.ready(cluster, 103) == (set(), 7, set())
    assert acc.ready(cluster, 109) == (set(), 1, set())
    assert acc.ready(cluster, 110) == ({1}, 4, set())
    assert acc.ready(cluster, 113) == ({1}, 1, set())
    assert acc.ready(cluster, 114) == ({1, 2}, NO_DEADLINE, set())


def test_ready_by_size_without_waiting_for_linger():
    acc = make(batch_size=1024, linger=10_000)
    cluster = Cluster({("t", 0): 1})
    add(acc, value=b"x" * 600)
    assert acc.ready(cluster, 0)[0] == set()
    add(acc, value=b"x" * 600)     # does not fit: a second batch -> the head is full
    assert acc.ready(cluster, 0)[0] == {1}


def test_ready_unknown_leader_and_empty_queue():
    acc = make()
    add(acc, topic="a", now=0)
    add(acc, topic="b", now=0)
    ready, nxt, unknown = acc.ready(Cluster({("a", 0): 3}), 50)
    assert ready == {3} and unknown == {"b"} and nxt == NO_DEADLINE
    assert make().ready(Cluster({}), 0) == (set(), NO_DEADLINE, set())


def test_flush_close_and_pool_waiters_make_everything_ready():
    cluster = Cluster({("t", 0): 1})
    acc = make(linger=10_000)
    add(acc)
    assert acc.ready(cluster, 0)[0] == set()
    acc.begin_flush()
    assert testing.flush_in_progress(acc)
    assert acc.ready(cluster, 0)[0] == {1}
    acc.end_flush()
    assert not testing.flush_in_progress(acc)
    assert acc.ready(cluster, 0)[0] == set()
    acc.close()
    assert acc.ready(cluster, 0)[0] == {1}
    with pytest.raises(ProducerClosedError):
        add(acc)

    # a thread waiting for buffer memory makes everything ready (the sender should free memory)
    acc = make(batch_size=1024, memory=2048, linger=10_000)
    add(acc, partition=0)
    add(acc, partition=1)
    assert acc.ready(Cluster({("t", 0): 1, ("t", 1): 1}), 0)[0] == set()
    outcome = []

    def waiter():
        try:
            add(acc, partition=2, block=2000)
            outcome.append("appended")
        except BaseException as e:          # reported to the test thread below
            outcome.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    deadline = time.monotonic() + 5
    while acc.buffer_pool.queued == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert acc.ready(Cluster({("t", 0): 1, ("t", 1): 1}), 0)[0] == {1}
    t.join(5)
    assert not t.is_alive()
    # nothing freed memory: the waiter gave up after max_block_ms with the buffer-pool error
    assert len(outcome) == 1 and type(outcome[0]) is BufferExhaustedError, outcome


# ---- drain ------------------------------------------------------------------------------------------

def test_drain_respects_max_request_size_and_rotates():
    acc = make(batch_size=1024, linger=0)
    parts = 4
    cluster = Cluster({("t", p): 1 for p in range(parts)})
    for rnd in range(3):
        for p in range(parts):
            for _ in range(4):
                add(acc, partition=p, value=b"x" * 200)   # ~1 batch (4 x ~210 bytes) per partition
    sizes = [b.size_in_bytes for b in acc.queued("t", 0)]
    one = sizes[0]
    # room for two batches per request
    first = acc.drain(cluster, [1], 2 * one + 10, 0)[1]
    assert [b.partition for b in first] == [0, 1]
    second = acc.drain(cluster, [1], 2 * one + 10, 0)[1]
    assert [b.partition for b in second] == [2, 3]          # continues where it stopped
    third = acc.drain(cluster, [1], 2 * one + 10, 0)[1]
    assert [b.partition for b in third] == [0, 1]
    # at most one batch per partition, but always at least one even if it is too big
    assert [b.partition for b in acc.drain(cluster, [1], 1, 0)[1]] == [2]
    everything = acc.drain(cluster, [1], 1 << 30, 0)[1]
    assert sorted(b.partition for b in everything) == [0, 1, 2, 3]
    assert all(b.builder.is_closed and b.drained_ms == 0 for b in first + everything)


def test_drain_takes_the_partitions_drained_least_recently_first():
    # A request with room for one batch: the partitions take turns while they all have batches,
    # and one that had nothing and gets a batch waits behind those drained before it.
    acc = make(linger=0)
    cluster = Cluster({("t", p): 1 for p in range(4)})
    for p in range(3):
        for _ in range(3):
            add(acc, partition=p, value=b"x" * 900)        # one record per batch
    order = [acc.drain(cluster, [1], 1, 0)[1][0].partition for _ in range(4)]
    assert order == [0, 1, 2, 0]
    add(acc, partition=3, value=b"x" * 900)
    order = [acc.drain(cluster, [1], 1, 0)[1][0].partition for _ in range(4)]
    assert order == [1, 2, 0, 3]
    # a full round takes every partition once, and the next round starts again with the oldest
    for p in range(4):
        add(acc, partition=p, value=b"x" * 900)
    assert sorted(b.partition for b in acc.drain(cluster, [1], 1 << 30, 0)[1]) == [0, 1, 2, 3]


def test_drain_groups_by_node_and_closes_with_compression():
    acc = make(batch_size=16384, linger=0, compression=1)
    cluster = Cluster({("t", 0): 1, ("t", 1): 2, ("u", 0): 2})
    for tp in cluster.leaders:
        for i in range(20):
            add(acc, topic=tp[0], partition=tp[1], value=b"z" * 100)
    out = acc.drain(cluster, [1, 2], 1 << 20, 7)
    assert sorted(b.topic_partition for b in out[1]) == [("t", 0)]
    assert sorted(b.topic_partition for b in out[2]) == [("t", 1), ("u", 0)]
    b = out[1][0]
    assert b.builder.is_closed and b.size_in_bytes < 20 * 100   # compressed
    decoded = decode(b)
    assert decoded.compression_type == 1
    assert [r.value for r in decoded.records] == [b"z" * 100] * 20


# ---- mute / ordered --------------------------------------------------------------------------------

def test_ordered_mutes_partition_until_unmuted():
    acc = make(linger=0, ordered=True)
    cluster = Cluster({("t", 0): 1, ("t", 1): 1})
    add(acc, partition=0)
    out = drain_all(acc, cluster, 0)[1]
    assert len(out) == 1 and testing.is_muted(acc, "t", 0)
    add(acc, partition=0)
    add(acc, partition=1)
    assert acc.ready(cluster, 10)[0] == {1}       # thanks to partition 1 only
    out = acc.drain(cluster, [1], 1 << 20, 10)[1]
    assert [b.partition for b in out] == [1]      # partition 0 is muted
    acc.unmute("t", 0)
    acc.unmute("t", 1)
    assert not testing.is_muted(acc, "t", 0)
    out = drain_all(acc, cluster, 10)[1]
    assert [b.partition for b in out] == [0]


def test_unordered_does_not_mute_and_manual_mute_works():
    acc = make(linger=0, ordered=False)
    cluster = Cluster({("t", 0): 1})
    add(acc)
    drain_all(acc, cluster, 0)
    assert not testing.is_muted(acc, "t", 0)
    testing.mute(acc, "t", 0)
    add(acc)
    assert acc.ready(cluster, 100) == (set(), NO_DEADLINE, set())
    assert acc.drain(cluster, [1], 1 << 20, 100)[1] == []


# ---- retries -------------------------------------------------------------------------------------------

def test_reenqueue_at_head_and_retry_backoff():
    acc = make(linger=0)
    cluster = Cluster({("t", 0): 1})
    add(acc, value=b"first")
    [b] = drain_all(acc, cluster, 0)[1]
    add(acc, value=b"second", now=1)
    acc.reenqueue(b, 50)
    assert b.attempts == 1 and b.in_retry and b.last_attempt_ms == 50
    assert acc.queued("t", 0)[0] is b
    # backing off: not ready, next check when the backoff ends, not drained
    assert acc.ready(cluster, 60) == (set(), BACKOFF - 10, set())
    assert acc.drain(cluster, [1], 1 << 20, 60)[1] == []
    assert acc.ready(cluster, 50 + BACKOFF)[0] == {1}
    [again] = acc.drain(cluster, [1], 1 << 20, 50 + BACKOFF)[1]
    assert again is b
    assert [r.value for r in decode(again).records] == [b"first"]


def test_reenqueue_without_backoff_is_sendable_at_once():
    """A batch whose partition's leader moved since it was sent (a leader hint) is retried at the
    new leader without the retry backoff, also when it was made just before (the backoff counts
    from its last attempt, not from its creation)."""
    acc = make(linger=0)
    cluster = Cluster({("t", 0): 1})
    add(acc, value=b"first", now=40)
    [b] = drain_all(acc, cluster, 40)[1]
    moved = Cluster({("t", 0): 2})
    acc.reenqueue(b, 50, False)
    assert b.attempts == 1 and b.in_retry
    assert acc.ready(moved, 50)[0] == {2}
    [again] = acc.drain(moved, [2], 1 << 20, 50)[2]
    assert again is b


def test_reenqueue_keeps_sequence_order():
    acc = make(linger=0)
    cluster = Cluster({("t", 0): 1})
    batches = []
    for i in range(4):
        add(acc, value=b"%d" % i)
        [b] = drain_all(acc, cluster, 0)[1]
        b.base_sequence = i * 10
        batches.append(b)
    add(acc, value=b"fresh")
    for i in (2, 0, 3, 1):          # responses come back in any order
        acc.reenqueue(batches[i], 5)
    q = acc.queued("t", 0)
    assert [b.base_sequence for b in q] == [0, 10, 20, 30, -1]


# ---- expiry / completion -----------------------------------------------------------------------------

def test_expired_batches_only_queued_and_at_deadline():
    acc = make(linger=0)
    cluster = Cluster({("t", 0): 1, ("t", 1): 1})
    add(acc, partition=0, now=0)
    add(acc, partition=1, now=500)
    inflight = acc.drain(cluster, [1], 1 << 20, 500)[1]  # both partitions drained
    assert len(inflight) == 2
    add(acc, partition=0, now=100)
    add(acc, partition=1, now=600)
    assert acc.expired_batches(DELIVERY + 99) == []
    exp = acc.expired_batches(DELIVERY + 100)
    assert [(b.partition, b.created_ms) for b in exp] == [(0, 100)]
    assert acc.queued_batches("t", 0) == 0 and acc.queued_batches("t", 1) == 1
    assert testing.has_incomplete(acc)
    err = DeliveryTimeoutError("expired")
    exp[0].complete(-1, -1, err)
    acc.deallocate(exp[0])
    assert exp[0].error is err


def test_complete_sets_metadata_runs_callbacks_in_order_and_logs_raising_ones(caplog):
    acc = make(linger=0)
    seen = []

    def ok(tag):
        return lambda err, md: seen.append((tag, err, md))

    def boom(err, md):
        raise RuntimeError("callback failure")

    f0 = add(acc, key=b"kk", value=b"v" * 7, cb=ok(0), ts=111)
    f1 = add(acc, value=None, cb=boom, ts=112)
    f2 = add(acc, value=b"x", cb=ok(2), ts=113)
    f3 = add(acc, value=b"y")          # no callback
    [b] = drain_all(acc, Cluster({("t", 0): 1}), 0)[1]
    assert not f0.done()
    with pytest.raises(KafkaTimeoutError):
        f0.get(timeout=0.01)
    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        assert b.complete(500, -1, None) is True
    assert b.complete(600, -1, None) is False          # only once
    assert [s[0] for s in seen] == [0, 2]
    assert seen[0][2] == RecordMetadata("t", 0, 500, 111, 2, 7)
    assert seen[1][2].offset == 502
    assert any("callback failure" in (r.exc_text or "") or r.exc_info for r in caplog.records)
    assert f1.get() == RecordMetadata("t", 0, 501, 112, -1, -1)
    assert f3.get().offset == 503 and f3.done() and f3.exception() is None
    # log append time replaces the record timestamp
    g = add(acc, ts=5)
    [b2] = drain_all(acc, Cluster({("t", 0): 1}), 0)[1]
    b2.complete(10, 99999, None)
    assert g.get().timestamp == 99999 and g.get().offset == 10


def test_failure_propagates_to_get_exception_and_callbacks():
    acc = make(linger=0)
    got = []
    f = add(acc, cb=lambda e, md: got.append((e, md.offset)))
    [b] = drain_all(acc, Cluster({("t", 0): 1}), 0)[1]
    err = KafkaError("broker said no")
    b.complete(-1, -1, err)
    assert got == [(err, -1)]
    assert f.exception() is err
    with pytest.raises(KafkaError, match="broker said no"):
        f.get()
    late = []
    f.add_callback(lambda e, md: late.append(e))
    assert late == [err]


def test_get_wakes_when_completed_from_another_thread():
    acc = make(linger=0)
    f = add(acc)
    [b] = drain_all(acc, Cluster({("t", 0): 1}), 0)[1]
    t = threading.Timer(0.05, b.complete, args=(7, -1, None))
    t.start()
    t0 = time.monotonic()
    assert f.get(timeout=5).offset == 7
    assert 0.03 < time.monotonic() - t0 < 4
    assert b.wait(0) is True


def test_record_metadata_value_object():
    md = RecordMetadata("t", 3, 42, 1000, 1, 2)
    assert pickle.loads(pickle.dumps(md)) == md
    assert hash(md) == hash(RecordMetadata("t", 3, 42, 1000, 1, 2))
    assert "offset=42" in repr(md) and "partition=3" in repr(md)
    assert (md.topic, md.partition, md.offset, md.timestamp, md.serialized_key_size,
            md.serialized_value_size) == ("t", 3, 42, 1000, 1, 2)
    with pytest.raises(AttributeError):
        md.offset = 1


# ---- buffer pool interplay --------------------------------------------------------------------------

def test_append_blocks_for_memory_then_succeeds():
    acc = make(batch_size=1024, memory=2048, linger=0)
    cluster = Cluster({("t", 0): 1, ("t", 1): 1, ("t", 2): 1})
    add(acc, partition=0)
    add(acc, partition=1)
    assert acc.buffer_pool.available_memory == 0
    result = []
    t = threading.Thread(target=lambda: result.append(add(acc, partition=2, value=b"late",
                                                          block=5000)))
    t.start()
    deadline = time.monotonic() + 5
    while acc.buffer_pool.queued == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert acc.buffer_pool.queued == 1 and not result
    [b0, b1] = acc.drain(cluster, [1], 1 << 20, 0)[1]
    b0.complete(0, -1, None)
    acc.deallocate(b0)
    t.join(5)
    assert len(result) == 1 and result[0].batch.partition == 2
    assert acc.queued_batches("t", 2) == 1


def test_append_raises_after_max_block_and_appends_nothing():
    acc = make(batch_size=1024, memory=1024, linger=0)
    add(acc, partition=0, value=b"x" * 900)
    before = acc.stats()
    t0 = time.monotonic()
    with pytest.raises(BufferExhaustedError, match="buffer_memory"):
        add(acc, partition=0, value=b"y" * 900, block=30)
    assert time.monotonic() - t0 >= 0.025
    assert acc.stats() == before
    assert [b.record_count for b in acc.queued("t", 0)] == [1]


def test_memory_returned_on_deallocate_and_idempotent():
    acc = make(batch_size=1024, memory=4096, linger=0)
    add(acc)
    [b] = drain_all(acc, Cluster({("t", 0): 1}), 0)[1]
    assert acc.buffer_pool.available_memory == 3072
    acc.deallocate(b)
    acc.deallocate(b)
    assert acc.buffer_pool.available_memory == 4096 and not testing.has_incomplete(acc)


# ---- flush / abort ------------------------------------------------------------------------------------

def test_flush_waits_for_incomplete_batches():
    acc = make(linger=10_000)
    cluster = Cluster({("t", 0): 1})
    for _ in range(3):
        add(acc)
    acc.begin_flush()
    assert acc.incomplete_record_count() == 3
    # not delivered within the timeout
    assert acc.await_flush_completion(0.02) == 3
    assert not testing.flush_in_progress(acc)
    acc.begin_flush()
    [b] = drain_all(acc, cluster, 0)[1]
    threading.Timer(0.05, lambda: (b.complete(0, -1, None), acc.deallocate(b))).start()
    t0 = time.monotonic()
    assert acc.await_flush_completion(5) == 0
    assert time.monotonic() - t0 >= 0.03
    assert not testing.flush_in_progress(acc) and not testing.has_incomplete(acc)
    acc.end_flush()     # harmless after await_flush_completion ended it
    assert not testing.flush_in_progress(acc)


def test_abort_undrained_returns_the_queued_batches_and_completes_none():
    acc = make(linger=0)
    futs = [add(acc, partition=p) for p in (0, 1, 1)]
    [inflight] = acc.drain(Cluster({("t", 0): 1}), [1], 1 << 20, 0)[1]
    assert acc.has_undrained()
    aborted = acc.abort_undrained()
    assert [b.partition for b in aborted] == [1]
    assert not acc.has_undrained()
    assert not any(f.done() for f in futs)     # the caller (the sender) completes them
    err = ProducerClosedError("closing")
    for b in aborted:
        b.complete(-1, -1, err)
        acc.deallocate(b)
    for f in futs[1:]:
        assert f.exception() is err
    assert not futs[0].done()                  # in flight: untouched
    assert acc.incomplete_record_count() == 1
    assert acc.buffer_pool.available_memory == acc.buffer_pool.total - inflight.reserved


@pytest.fixture
def python_codecs():
    """The Python codecs of fastkafka._wire.compression for the builders made in the test (their C
    libraries turned off meanwhile): a codec that raises."""
    from fastkafka._wire import ccodecs
    names = ("gzip", "snappy", "lz4", "zstd")
    was = {c: ccodecs.in_c(c) for c in names}
    for c in names:
        ccodecs.use_c(c, False)
    yield
    for c, on in was.items():
        ccodecs.use_c(c, on)


def test_a_batch_that_cannot_be_closed_goes_to_take_failed(monkeypatch, python_codecs):
    from fastkafka._wire import records

    def broken(*_a):
        raise RuntimeError("codec broke")

    monkeypatch.setattr(records, "_compress_buffer", broken)
    acc = make(linger=0, ordered=True, compression=1)
    bad = add(acc, partition=0)
    good = add(acc, partition=1, value=b"")        # empty section: still compressed, so also fails
    drained = acc.drain(Cluster({("t", 0): 1, ("t", 1): 1}), [1], 1 << 20, 0)[1]
    assert drained == []
    failed = acc.take_failed()
    assert sorted(b.partition for b, _ in failed) == [0, 1]
    assert all(isinstance(e, RuntimeError) for _, e in failed)
    assert acc.take_failed() == []
    assert not bad.done() and not good.done()   # completed by the sender, not here
    add(acc, partition=0)                       # still muted (the sender unmutes it):
    assert acc.drain(Cluster({("t", 0): 1, ("t", 1): 1}), [1], 1 << 20, 0)[1] == []
    assert acc.take_failed() == []              # ... so nothing was drained to fail


# ---- sticky ---------------------------------------------------------------------------------------------

def test_sticky_partition_switches_when_its_batch_fills():
    acc = make(batch_size=1024)
    avail = [0, 1, 2, 3]
    p = acc.sticky_partition("t", avail)
    for _ in range(8):                         # fills less than one batch
        assert acc.sticky_partition("t", avail) == p
        add(acc, partition=p, value=b"x" * 100)
    while acc.queued_batches("t", p) < 2:      # the append that starts a new batch
        add(acc, partition=p, value=b"x" * 100)
    q = acc.sticky_partition("t", avail)
    assert q != p and q in avail


def test_sticky_mode_append_spreads_whole_batches():
    acc = make(batch_size=1024)
    acc.sticky_partition("t", [0, 1, 2, 3, 4])
    futs = [add(acc, partition=PARTITION_STICKY, value=b"x" * 100) for _ in range(200)]
    per_batch = {}
    for f in futs:
        per_batch.setdefault(id(f.batch), f.batch)
    batches = list(per_batch.values())
    # every batch but the last one open is full: no single-record batches left behind
    assert all(b.is_full or b.record_count >= 8 for b in batches[:-1])
    assert len({b.partition for b in batches}) > 1
    parts = [f.batch.partition for f in futs]
    switches = sum(1 for a, b in zip(parts, parts[1:]) if a != b)
    assert switches == len(batches) - 1


def test_sticky_mode_keeps_each_topics_partition_when_appends_alternate():
    # the accumulator remembers the last topic's sticky partition; a record of the other topic
    # must still go to that topic's own sticky partition, and each topic switches on its own
    acc = make(batch_size=1024)
    avail = list(range(8))
    acc.sticky_partition("a", avail)
    acc.sticky_partition("b", avail)
    parts = {"a": [], "b": []}
    for i in range(400):
        t = "ab"[i % 2]
        parts[t].append(add(acc, topic=t, partition=PARTITION_STICKY, value=b"x" * 100).batch.partition)
    for t, seq in parts.items():
        switches = sum(1 for x, y in zip(seq, seq[1:]) if x != y)
        runs = [len(list(g)) for _, g in itertools.groupby(seq)]
        assert switches >= 10, (t, seq)
        assert all(n >= 8 for n in runs[:-1]), (t, runs)   # whole batches, not single records
        assert seq[-1] == acc.sticky_partition(t, avail)


def test_sticky_mode_without_available_partitions():
    acc = make()
    with pytest.raises(UnknownPartitionError):
        add(acc, partition=PARTITION_STICKY)


# ---- append_batch -----------------------------------------------------------------------------------

def drained_records(acc, topic="t", partitions=range(8)):
    cluster = Cluster({(topic, p): 1 for p in partitions})
    acc.begin_flush()
    out = {}
    while acc.has_undrained():
        for b in acc.drain(cluster, [1], 1 << 30, 0)[1]:
            out.setdefault(b.partition, []).extend(decode(b).records)
    acc.end_flush()
    return out


def test_append_batch_list_single_partition_and_future():
    acc = make(batch_size=1024)
    values = [b"v%04d" % i for i in range(500)]
    keys = [None if i % 3 == 0 else b"k%d" % i for i in range(500)]
    fut = BatchFuture(500)
    assert acc.append_batch("t", 2, values, keys, [("h", b"x")], 777, fut, 0, 0) == 500
    assert fut.appended == 500 and not fut.done()
    batches = acc.queued("t", 2)
    assert len(batches) > 1 and sum(b.record_count for b in batches) == 500
    recs = drained_records(acc)[2]
    assert [r.value for r in recs] == values
    assert [r.key for r in recs] == keys
    assert all(r.timestamp == 777 and r.headers == [("h", b"x")] for r in recs)
    # completion of every batch resolves the future
    for i, b in enumerate(batches):
        assert not fut.done()
        b.complete(i * 1000, -1, None)
    assert fut.done() and fut.get(0) == 500 and fut.delivered == 500 and fut.failed == 0


def test_append_batch_future_reports_first_error_after_all_done():
    acc = make(batch_size=1024)
    fut = BatchFuture()
    acc.append_batch("t", [0, 1] * 50, [b"x" * 50] * 100, None, None, 0, fut, 0, 0)
    b0 = acc.queued("t", 0)
    b1 = acc.queued("t", 1)
    err = KafkaError("partition 1 failed")
    for b in b1:
        b.complete(-1, -1, err)
    assert not fut.done()
    with pytest.raises(KafkaTimeoutError):
        fut.get(0.01)
    for b in b0:
        b.complete(0, -1, None)
    assert fut.done() and fut.delivered == 50 and fut.failed == 50 and fut.first_error is err
    with pytest.raises(KafkaError, match="partition 1 failed"):
        fut.get()


def test_append_batch_per_record_partitions_all_forms():
    n = 300
    keys = [b"key-%d" % i for i in range(n)]
    expected = [java_partition(k, 5) for k in keys]
    for parts in (expected, array.array("i", expected), pa.array(expected, pa.int32()),
                  pa.array(expected, pa.int64()), partitions_for_keys(keys, 5)):
        acc = make(batch_size=2048)
        acc.append_batch("t", parts, [b"v-%d" % i for i in range(n)], keys, None, 1, BatchFuture(),
                         0, 0)
        out = drained_records(acc, partitions=range(5))
        for p, recs in out.items():
            for r in recs:
                i = int(r.key[4:])
                assert expected[i] == p
                assert r.value == b"v-%d" % i
        # order within a partition is the input order
        for recs in out.values():
            idx = [int(r.key[4:]) for r in recs]
            assert idx == sorted(idx)
        assert sum(len(r) for r in out.values()) == n


def test_append_batch_validates_everything_before_appending():
    acc = make()
    fut = BatchFuture()
    with pytest.raises(InvalidRecordError, match=r"values\[3\].*float"):
        acc.append_batch("t", 0, [b"a", b"b", None, 1.5, b"e"], None, None, 0, fut, 0, 0)
    with pytest.raises(InvalidRecordError, match=r"keys\[1\].*int"):
        acc.append_batch("t", 0, [b"a", b"b"], [b"k", 5], None, 0, BatchFuture(), 0, 0)
    with pytest.raises(InvalidRecordError, match="keys has 1"):
        acc.append_batch("t", 0, [b"a", b"b"], [b"k"], None, 0, BatchFuture(), 0, 0)
    with pytest.raises(InvalidRecordError, match="Arrow type int64"):
        acc.append_batch("t", 0, pa.array([1, 2]), None, None, 0, BatchFuture(), 0, 0)
    with pytest.raises(UnknownPartitionError, match=r"partition\[1\] = -3 of topic .t. cannot exist"):
        acc.append_batch("t", [0, -3], [b"a", b"b"], None, None, 0, BatchFuture(), 0, 0)
    with pytest.raises(InvalidRecordError, match="headers"):
        acc.append_batch("t", 0, [b"a"], None, [("h", 1)], 0, BatchFuture(), 0, 0)
    with pytest.raises(RecordTooLargeError, match="record 1"):
        acc.append_batch("t", 0, [b"a", b"b" * 5000], None, None, 0, BatchFuture(), 0, 0,
                         None, 1000)
    assert not acc.has_undrained() and not testing.has_incomplete(acc)
    assert acc.buffer_pool.available_memory == acc.buffer_pool.total
    assert fut.done() and fut.appended == 0 and fut.get() == 0


def test_append_batch_arrow_binary_with_nulls_and_slice_offset():
    vals = [b"val-%d" % i if i % 7 else None for i in range(1000)]
    keys = [b"k%d" % i if i % 5 else None for i in range(1000)]
    varr = pa.array(vals, pa.binary())[123:623]       # offset != 0
    karr = pa.array(keys, pa.binary())[123:623]
    assert varr.offset == 123
    acc = make(batch_size=4096)
    fut = BatchFuture()
    assert acc.append_batch("t", 0, varr, karr, None, 5, fut, 0, 0) == 500
    recs = drained_records(acc)[0]
    assert [r.value for r in recs] == vals[123:623]
    assert [r.key for r in recs] == keys[123:623]


@pytest.mark.parametrize("typ", [pa.large_binary(), pa.string(), pa.large_string()])
def test_append_batch_arrow_other_types(typ):
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        vals = ["välue-%d" % i if i % 4 else None for i in range(300)]
        expect = [v.encode() if v is not None else None for v in vals]
    else:
        vals = [b"v\x00%d" % i if i % 4 else None for i in range(300)]
        expect = vals
    arr = pa.array(vals, typ)[10:]
    acc = make(batch_size=2048)
    acc.append_batch("t", 1, arr, None, None, 5, BatchFuture(), 0, 0)
    recs = drained_records(acc)[1]
    assert [r.value for r in recs] == expect[10:]
    assert all(r.key is None for r in recs)


def test_append_batch_chunked_array_and_null_type():
    ch = pa.chunked_array([[b"a", b"b"], [b"c"]], pa.binary())
    acc = make()
    acc.append_batch("t", 0, ch, pa.nulls(3), None, 0, BatchFuture(), 0, 0)
    recs = drained_records(acc)[0]
    assert [(r.key, r.value) for r in recs] == [(None, b"a"), (None, b"b"), (None, b"c")]


def test_append_batch_sticky_spreads_batches():
    acc = make(batch_size=1024)
    fut = BatchFuture()
    acc.append_batch("t", PARTITION_STICKY, [b"x" * 100] * 100, None, None, 0, fut, 0, 0,
                     [0, 1, 2, 3])
    counts = {p: sum(b.record_count for b in acc.queued("t", p)) for p in range(4)}
    assert sum(counts.values()) == 100
    assert sum(1 for c in counts.values() if c) > 1
    all_batches = [b for p in range(4) for b in acc.queued("t", p)]
    assert sum(1 for b in all_batches if not b.is_full) <= 1   # only the open one is not full


def test_append_batch_buffer_timeout_midway_keeps_appended_records_consistent():
    acc = make(batch_size=1024, memory=3 * 1024)
    fut = BatchFuture()
    values = [b"%04d" % i + b"x" * 196 for i in range(100)]   # ~20 batches needed, room for 3
    with pytest.raises(BufferExhaustedError) as ei:
        acc.append_batch("t", 0, values, None, None, 0, fut, 0, 20)
    n = ei.value.records_appended
    assert 0 < n < 100 and fut.appended == n
    batches = acc.queued("t", 0)
    assert len(batches) == 3 and sum(b.record_count for b in batches) == n
    recs = drained_records(acc)[0]
    assert [r.value for r in recs] == values[:n]               # no gap, no half record
    for b in batches:
        b.complete(0, -1, None)
    assert fut.done() and fut.get() == n


def test_append_batch_concurrent_with_append_from_other_thread():
    acc = make(batch_size=4096, memory=64 << 20)
    n = 20000
    stop = threading.Event()
    singles = []
    other_errors = []

    def other():
        i = 0
        try:
            while not stop.is_set() and i < 5000:
                singles.append(acc.append("t", 0, 0, b"S", b"s%d" % i, None, None, 0, 1000))
                i += 1
        except BaseException as e:          # reported to the test thread below
            other_errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    fut = BatchFuture()
    acc.append_batch("t", 0, [b"b%d" % i for i in range(n)], None, None, 0, fut, 0, 1000)
    stop.set()
    t.join(10)
    assert not t.is_alive() and other_errors == []
    recs = drained_records(acc)[0]
    batch_vals = [r.value for r in recs if r.key is None]
    single_vals = [r.value for r in recs if r.key == b"S"]
    assert batch_vals == [b"b%d" % i for i in range(n)]
    assert single_vals == [b"s%d" % i for i in range(len(singles))]
    # the BatchFuture counts only its own records in batches shared with send()
    assert fut.appended == n and len(singles) > 0


def test_concurrent_appends_lose_nothing():
    acc = make(batch_size=2048, memory=64 << 20)
    per_thread = 3000

    def worker(tid):
        for i in range(per_thread):
            acc.append("t", i % 3, 0, b"%d" % tid, b"%d" % i, None, None, 0, 1000)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    out = drained_records(acc, partitions=range(3))
    assert sum(len(v) for v in out.values()) == 4 * per_thread
    for p, recs in out.items():
        for tid in range(4):
            mine = [int(r.value) for r in recs if r.key == b"%d" % tid]
            assert mine == [i for i in range(per_thread) if i % 3 == p]


def test_stats_and_queued():
    acc = make(batch_size=1024)
    for p in (0, 0, 1):
        add(acc, partition=p)
    s = acc.stats()
    assert s["batches_queued"] == 2 and s["records_queued"] == 3
    assert s["buffer_total"] - s["buffer_available"] == 2048
    assert s["incomplete_batches"] == 2 and s["partitions_muted"] == 0
    assert acc.queued_batches("t", 0) == 1 and acc.queued_batches("nope", 0) == 0
