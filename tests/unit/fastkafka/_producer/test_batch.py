"""ProducerBatch and its completion objects (fastkafka._producer.batch): a batch's fields and
their types, completion once only (also from racing threads), the per-record futures and
callbacks, RecordMetadata before and after completion, the send_batch aggregate BatchFuture, the
split pieces as seen through a record's future, the waits refused on a producer's I/O thread, and
the batch after close and after its builder is gone.

Batches with records come from a RecordAccumulator (the only maker of record futures), with its
``now_ms`` read from a FakeClock. Already covered elsewhere, and not repeated here:
test_accumulator.py (callbacks in record order, a raising callback logged, get() timing out and
waking from another thread, a failure reaching get/exception/late callbacks, RecordMetadata as a
value object, a BatchFuture's first error) and tests/faults/test_split_faultbroker.py (every
record's future, callback and BatchFuture count following its piece through a split of a split).
"""
from __future__ import annotations

import gc
import logging
import threading

import pytest

from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.batch import (FutureRecordMetadata, ProducerBatch, RecordMetadata,
                                       batch_counters, register_io_thread, unregister_io_thread)
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._wire.records import BatchBuilder, record_size
from fastkafka.errors import (IllegalStateError, KafkaError, KafkaTimeoutError,
                              ProducerClosedError)

from unit.fastkafka.fakes import FakeClock, make_cluster

HEADER = 61          # RecordBatch v2 header bytes


def make_acc(batch_size=1024, memory=1 << 20, linger=0):
    pool = BufferPool(memory, batch_size)
    return RecordAccumulator(batch_size, 0, None, linger, 100, 120_000, pool, False)


def add(acc, clock, value=b"v" * 10, key=None, cb=None, ts=1_000, partition=0, topic="t"):
    return acc.append(topic, partition, ts, key, value, None, cb, clock(), 0)


def drain_one(acc, clock, topic="t", partition=0):
    cluster = make_cluster({topic: [1] * (partition + 1)})
    acc.begin_flush()
    try:
        out = acc.drain(cluster, [1], 1 << 30, clock()).get(1, [])
    finally:
        acc.end_flush()
    [b] = [x for x in out if x.partition == partition]
    return b


@pytest.fixture
def clock():
    return FakeClock(50_000)


# ---- the batch's own fields -------------------------------------------------------------------

def test_a_new_batch_is_open_empty_unstamped_and_not_done():
    builder = BatchBuilder(1024)
    b = ProducerBatch("t", 3, builder, 500)
    assert (b.topic, b.partition, b.topic_partition, b.builder) == ("t", 3, ("t", 3), builder)
    assert (b.created_ms, b.last_attempt_ms, b.drained_ms, b.attempts) == (500, 500, -1, 0)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)
    assert (b.record_count, b.in_retry, b.reserved) == (0, False, 0)
    assert (b.is_done, b.base_offset, b.log_append_time, b.error) == (False, -1, -1, None)
    assert b.split_into is None and not b.is_full
    assert b.size_in_bytes == builder.size_in_bytes == HEADER
    assert repr(b) == "ProducerBatch('t', 3, records=0, attempts=0, done=False)"


def test_a_batch_without_a_builder_is_full_and_holds_no_bytes():
    b = ProducerBatch()
    assert (b.topic, b.partition, b.builder) == (None, -1, None)
    assert b.is_full and b.size_in_bytes == 0


def test_the_settable_fields_keep_what_is_set_within_their_c_types():
    b = ProducerBatch("t", 0, None, 0)
    b.attempts, b.last_attempt_ms, b.drained_ms = 3, 2**40, 7
    b.producer_id, b.producer_epoch, b.base_sequence, b.in_retry = 2**50, 32767, 2**31 - 1, True
    b.created_ms, b.reserved = 11, 4096
    assert (b.attempts, b.last_attempt_ms, b.drained_ms, b.producer_id, b.producer_epoch,
            b.base_sequence, b.in_retry, b.created_ms, b.reserved) == \
        (3, 2**40, 7, 2**50, 32767, 2**31 - 1, True, 11, 4096)
    with pytest.raises(OverflowError):
        b.attempts = 2**31
    with pytest.raises(OverflowError):
        b.producer_id = 2**63
    with pytest.raises(TypeError):
        b.created_ms = "soon"
    for name in ("topic", "partition", "builder", "base_offset", "error", "record_count",
                 "is_done"):
        with pytest.raises(AttributeError):
            setattr(b, name, None)


@pytest.mark.parametrize("args, error", [
    ((5,), TypeError),                           # topic must be str
    (("t", 2**31), OverflowError),               # partition is an int32
    (("t", 0, b"not a builder"), TypeError),
    (("t", 0, None, "now"), TypeError),          # created_ms is an int64
])
def test_bad_constructor_arguments_raise_typed_errors(args, error):
    with pytest.raises(error):
        ProducerBatch(*args)


def test_live_batches_are_counted_and_the_count_comes_back():
    gc.collect()
    before = batch_counters()["producer_batches"]
    batches = [ProducerBatch("t", i, None, 0) for i in range(5)]
    assert batch_counters()["producer_batches"] == before + 5
    del batches
    gc.collect()
    assert batch_counters()["producer_batches"] == before


# ---- completion --------------------------------------------------------------------------------

def test_completion_happens_once_and_keeps_the_first_outcome():
    b = ProducerBatch("t", 0, None, 0)
    err = KafkaError("late failure")
    assert b.complete(41, 1234, None) is True
    assert b.complete(99, 5, err) is False
    assert (b.is_done, b.base_offset, b.log_append_time, b.error) == (True, 41, 1234, None)
    f = ProducerBatch("t", 0, None, 0)
    assert f.complete(-1, -1, err) is True and f.complete(7, -1, None) is False
    assert (f.base_offset, f.error) == (-1, err)


def test_racing_completions_have_exactly_one_winner():
    for _ in range(20):
        b = ProducerBatch("t", 0, None, 0)
        start = threading.Barrier(6)
        wins = []

        def racer(offset):
            start.wait()
            if b.complete(offset, -1, None):
                wins.append(offset)

        threads = [threading.Thread(target=racer, args=(k * 100,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(wins) == 1 and b.base_offset == wins[0]


def test_wait_returns_at_once_when_done_and_wakes_every_waiter():
    b = ProducerBatch("t", 0, None, 0)
    assert b.wait(0) is False
    results = []
    waiters = [threading.Thread(target=lambda: results.append(b.wait(10))) for _ in range(3)]
    for w in waiters:
        w.start()
    b.complete(0, -1, None)
    for w in waiters:
        w.join(10)
    assert results == [True, True, True] and b.wait(0) is True


# ---- per-record futures and metadata ------------------------------------------------------------

def test_each_record_is_counted_and_its_future_is_the_batch_and_its_index(clock):
    acc = make_acc()
    futs = [add(acc, clock, value=b"x" * i) for i in range(5)]
    [b] = acc.queued("t", 0)
    assert b.record_count == 5
    assert [f.index for f in futs] == [0, 1, 2, 3, 4]
    assert all(f.batch is b and isinstance(f, FutureRecordMetadata) for f in futs)
    assert b.size_in_bytes > HEADER + sum(range(5))
    assert repr(futs[2]) == "<FutureRecordMetadata 't'[0] #2 done=False>"


def test_sizes_grow_by_each_records_encoded_size_and_a_full_batch_takes_no_more(clock):
    acc = make_acc(batch_size=1024)
    expected = HEADER
    first = None
    for i in range(12):
        key, value = b"k" * (i % 3), b"v" * (90 + i)
        f = add(acc, clock, key=key or None, value=value, ts=1_000 + 2 * i)
        first = first or f.batch
        if f.batch is not first:
            break
        expected += record_size(2 * i, i, len(key) if key else -1, len(value), None)
        assert first.size_in_bytes == expected and first.record_count == i + 1
    assert f.batch is not first and f.index == 0                 # the record that did not fit
    assert expected + record_size(2 * i, i, len(key) if key else -1, len(value), None) > 1024
    assert first.is_full and first.size_in_bytes <= 1024 and not f.batch.is_full
    assert [b.record_count for b in acc.queued("t", 0)] == [i, 1]


def test_metadata_before_and_after_completion(clock):
    acc = make_acc()
    f0 = add(acc, clock, key=b"kk", value=b"vvv", ts=111)
    f1 = add(acc, clock, key=None, value=None, ts=112)
    assert f0.metadata == RecordMetadata("t", 0, -1, 111, 2, 3)      # offset unknown yet
    assert f1.metadata == RecordMetadata("t", 0, -1, 112, -1, -1)    # null key and value
    assert not f0.done()
    f0.batch.complete(500, -1, None)
    assert f0.done() and f1.done()
    assert f0.get(0) == RecordMetadata("t", 0, 500, 111, 2, 3)
    assert f1.get(0).offset == 501 and f1.exception(0) is None
    assert repr(f1) == "<FutureRecordMetadata 't'[0] #1 done=True>"


def test_no_offset_without_one_from_the_broker_or_after_a_failure(clock):
    acc = make_acc()
    f = add(acc, clock)
    f.batch.complete(-1, -1, None)                       # acks=0: delivered, offset unknown
    assert f.get(0).offset == -1
    g = add(acc, clock, partition=1)
    err = KafkaError("refused")
    g.batch.complete(700, 900, err)                      # an offset next to an error means nothing
    assert g.metadata.offset == -1 and g.metadata.timestamp == 900
    assert g.exception(0) is err


def test_a_callback_runs_once_when_its_batch_completes_and_sees_it_done(clock):
    acc = make_acc()
    seen = []

    def cb(err, md):
        seen.append((err, md.offset, f.done(), f.get(0).offset))

    f = add(acc, clock, cb=cb)
    assert seen == []
    f.batch.complete(10, -1, None)
    f.batch.complete(20, -1, None)
    assert seen == [(None, 10, True, 10)]


def test_added_callbacks_run_after_the_records_own_in_the_order_added(clock):
    acc = make_acc()
    order = []
    own = add(acc, clock, cb=lambda e, md: order.append(("own", md.offset)))
    bare = add(acc, clock)
    own.add_callback(lambda e, md: order.append(("own+1", md.offset)))
    own.add_callback(lambda e, md: order.append(("own+2", md.offset)))
    bare.add_callback(lambda e, md: order.append(("bare+1", md.offset)))
    bare.add_callback(lambda e, md: order.append(("bare+2", md.offset)))
    assert order == []
    own.batch.complete(0, -1, None)
    assert order == [("own", 0), ("own+1", 0), ("own+2", 0), ("bare+1", 1), ("bare+2", 1)]
    own.batch.complete(5, -1, None)
    assert len(order) == 5


def test_a_callback_added_after_completion_runs_at_once_and_a_raise_is_only_logged(clock, caplog):
    acc = make_acc()
    f = add(acc, clock)
    err = KafkaError("no")
    f.batch.complete(-1, -1, err)
    got = []
    f.add_callback(lambda e, md: got.append((e, md.offset)))
    assert got == [(err, -1)]

    def boom(e, md):
        raise RuntimeError("callback bug")

    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        f.add_callback(boom)                             # does not raise into the caller
    assert any("raised" in r.getMessage() for r in caplog.records)


def test_get_and_exception_time_out_naming_the_partition(clock):
    acc = make_acc()
    f = add(acc, clock, topic="orders", partition=4)
    with pytest.raises(KafkaTimeoutError, match=r"'orders', partition 4"):
        f.get(timeout=0)
    with pytest.raises(KafkaTimeoutError):
        f.exception(timeout=0)
    assert not f.done()


# ---- the I/O thread may not wait --------------------------------------------------------------------

def test_waiting_on_an_io_thread_is_refused_but_a_done_result_is_returned(clock):
    acc = make_acc()
    f = add(acc, clock)
    done = add(acc, clock, partition=1)
    done.batch.complete(3, -1, None)
    fut = BatchFuture()
    acc.append_batch("t", 2, [b"a"], None, None, 0, fut, clock(), 0)
    me = threading.get_ident()
    before = batch_counters()["io_threads"]
    register_io_thread(me)
    try:
        assert batch_counters()["io_threads"] == before + 1
        with pytest.raises(IllegalStateError, match="I/O thread"):
            f.get(timeout=1)
        with pytest.raises(IllegalStateError):
            f.exception(timeout=1)
        with pytest.raises(IllegalStateError):
            f.batch.wait(1)
        with pytest.raises(IllegalStateError):
            fut.get(1)
        assert done.get(5).offset == 3                   # nothing to wait for: fine
    finally:
        unregister_io_thread(me)
    assert batch_counters()["io_threads"] == before
    with pytest.raises(KafkaTimeoutError):
        f.get(timeout=0)                                 # an application thread again


# ---- BatchFuture ---------------------------------------------------------------------------------

def test_a_batch_future_with_nothing_appended_is_done_at_once(clock):
    acc = make_acc()
    fut = BatchFuture(expected=0)
    assert not fut.done() and fut.expected == 0
    assert acc.append_batch("t", 0, [], None, None, 0, fut, clock(), 0) == 0
    assert fut.done() and fut.get(0) == 0 and (fut.appended, fut.delivered, fut.failed) == (0, 0, 0)
    got = []
    fut.add_callback(got.append)
    assert got == [fut]


def test_batch_futures_and_single_records_sharing_a_batch_each_count_their_own(clock):
    acc = make_acc()
    f1, f2 = BatchFuture(expected=3), BatchFuture()
    single = []
    acc.append_batch("t", 0, [b"a", b"b", b"c"], None, None, 0, f1, clock(), 0)
    add(acc, clock, cb=lambda e, md: single.append(e))
    acc.append_batch("t", 0, [b"d", b"e"], None, None, 0, f2, clock(), 0)
    [b] = acc.queued("t", 0)
    assert b.record_count == 6 and (f1.appended, f2.appended) == (3, 2)
    finished = []
    f1.add_callback(lambda bf: finished.append(("f1", bf.delivered, bf.failed)))
    f2.add_callback(lambda bf: finished.append(("f2", bf.delivered, bf.failed)))
    err = KafkaError("partition gone")
    b.complete(-1, -1, err)
    assert finished == [("f1", 0, 3), ("f2", 0, 2)] and single == [err]
    assert f1.first_error is err and f2.first_error is err
    with pytest.raises(KafkaError, match="partition gone"):
        f2.get(0)
    assert repr(f1) == "<BatchFuture appended=3 delivered=0 failed=3 done=True>"


def test_a_batch_future_waits_for_every_batch_and_callbacks_run_once(clock, caplog):
    acc = make_acc(batch_size=256)
    fut = BatchFuture()
    acc.append_batch("t", [0, 1] * 20, [b"x" * 40] * 40, None, None, 0, fut, clock(), 0)
    batches = acc.queued("t", 0) + acc.queued("t", 1)
    assert len(batches) > 2
    calls = []

    def boom(bf):
        raise RuntimeError("aggregate callback bug")

    fut.add_callback(boom)
    fut.add_callback(lambda bf: calls.append(bf.delivered))
    for b in batches[:-1]:
        b.complete(0, -1, None)
        assert not fut.done() and calls == []
    with pytest.raises(KafkaTimeoutError, match=r"\(\d+ of 40 done\)"):
        fut.get(0)
    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        batches[-1].complete(0, -1, None)
    assert fut.done() and calls == [40] and fut.get(0) == 40
    assert any("BatchFuture callback" in r.getMessage() for r in caplog.records)
    batches[-1].complete(0, -1, None)                    # once only: counted once
    assert (fut.delivered, fut.failed, calls) == (40, 0, [40])
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        fut.add_callback(boom)          # added after it finished: runs at once, logged likewise
    fut.add_callback(lambda bf: calls.append(-bf.delivered))
    assert calls == [40, -40]
    assert any("BatchFuture callback" in r.getMessage() for r in caplog.records)


# ---- split pieces, seen through a record ------------------------------------------------------

def split_batch(acc, clock, n=6):
    futs = [add(acc, clock, value=b"%d" % i + b"x" * 50) for i in range(n)]
    b = drain_one(acc, clock)
    pieces = acc.split_and_reenqueue(b, clock(), 2)
    assert pieces is not None and len(pieces) == 2 and b.split_into == tuple(pieces)
    return futs, b, pieces


def test_a_record_of_a_split_batch_is_done_with_its_piece_and_the_batch_with_the_last(clock):
    acc = make_acc()
    futs, b, (p0, p1) = split_batch(acc, clock)
    n0 = p0.record_count
    late = []
    futs[-1].add_callback(lambda e, md: late.append(md.offset))      # after the split: on p1
    assert not futs[0].done()
    p0.complete(100, -1, None)
    assert futs[0].done() and futs[0].get(0).offset == 100
    assert futs[n0 - 1].get(0).offset == 100 + n0 - 1
    assert not futs[-1].done() and not b.is_done and late == []
    assert repr(futs[0]).endswith("done=True>")                     # the record's own state
    with pytest.raises(KafkaTimeoutError):
        futs[-1].get(0)
    err = KafkaError("second piece failed")
    p1.complete(-1, -1, err)
    assert b.is_done and b.wait(0) and b.error is err                 # its first piece error
    assert late == [-1] and futs[-1].exception(0) is err
    assert futs[0].exception(0) is None                               # each record its piece's


def test_a_split_batch_takes_the_first_piece_error_whatever_the_order(clock):
    acc = make_acc()
    _, b, (p0, p1) = split_batch(acc, clock)
    e1, e0 = KafkaError("p1"), KafkaError("p0")
    p1.complete(-1, -1, e1)
    p0.complete(-1, -1, e0)
    assert b.error is e1


def test_a_done_or_split_or_single_record_batch_is_not_split(clock):
    acc = make_acc()
    _, b, pieces = split_batch(acc, clock)
    assert acc.split_and_reenqueue(b, clock(), 2) is None            # already split
    for p in pieces:
        p.complete(0, -1, None)
    add(acc, clock)
    add(acc, clock)
    done = drain_one(acc, clock)
    done.complete(0, -1, None)
    assert acc.split_and_reenqueue(done, clock(), 2) is None          # already done
    assert done.split_into is None
    add(acc, clock)
    one = drain_one(acc, clock)
    assert acc.split_and_reenqueue(one, clock(), 2) is None           # one record
    assert one.split_into is None and one.builder is not None


# ---- close, and after the builder is gone ---------------------------------------------------------

def test_after_close_appends_fail_and_the_queued_batches_complete_as_before(clock):
    acc = make_acc()
    f = add(acc, clock)
    acc.close()
    with pytest.raises(ProducerClosedError):
        add(acc, clock)
    [b] = acc.queued("t", 0)
    assert b.record_count == 1                           # nothing half-appended
    [aborted] = acc.abort_undrained()
    err = ProducerClosedError("closing")
    assert aborted.complete(-1, -1, err) and f.exception(0) is err


def test_a_closed_builder_makes_the_batch_full_and_its_size_exact(clock):
    acc = make_acc()
    add(acc, clock, value=b"y" * 100)
    b = drain_one(acc, clock)
    assert b.is_full and b.builder.is_closed                  # drained: closed for appends
    assert b.size_in_bytes == b.builder.size_in_bytes > HEADER + 100
    nxt = add(acc, clock)
    assert nxt.batch is not b                                 # a new batch takes the record


def test_a_batch_whose_builder_is_gone_still_answers_its_futures(clock):
    acc = make_acc()
    f = add(acc, clock, key=b"k", value=b"vv", ts=77)
    b = drain_one(acc, clock)
    b.complete(9, -1, None)
    acc.deallocate(b)
    assert b.builder is None and b.is_full and b.size_in_bytes == 0
    assert f.get(0) == RecordMetadata("t", 0, 9, 77, 1, 2)
    assert b.complete(10, -1, None) is False
