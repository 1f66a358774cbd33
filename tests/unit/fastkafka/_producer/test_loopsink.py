"""LoopSink (fastkafka._producer.batch): how fastkafka.aio's completions reach an event loop.

A fake loop counts ``call_soon_threadsafe`` calls, so the wake-ups are counted exactly: one per
drain however many records completed, from however many batches and threads; none after the loop
closed (the outcomes are logged instead); the memory and metadata listeners the async producer
waits with fire once."""
from __future__ import annotations

import logging
import threading

import pytest

from fastkafka._net.cluster import Cluster, Metadata
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import LoopSink
from fastkafka._producer.bufferpool import BufferPool
from fastkafka.errors import KafkaTimeoutError


class FakeLoop:
    """What LoopSink uses of an event loop: call_soon_threadsafe (recorded, run by run_ready) and
    is_closed; closing makes call_soon_threadsafe raise as asyncio's does."""

    def __init__(self):
        self.scheduled = []
        self.calls = 0
        self.closed = False

    def call_soon_threadsafe(self, fn, *args):
        if self.closed:
            raise RuntimeError("Event loop is closed")
        self.calls += 1
        self.scheduled.append((fn, args))

    def is_closed(self):
        return self.closed

    def run_ready(self):
        ready, self.scheduled = self.scheduled, []
        for fn, args in ready:
            fn(*args)


def _acc():
    return RecordAccumulator(1024, 0, None, 0, 100, 120000, BufferPool(1 << 20, 1024), False)


def _records(acc, sink, n, topic="t", partition=0):
    """``n`` records appended with ``sink`` as their callback; their batches."""
    batches = []
    for i in range(n):
        f = acc.append(topic, partition, 0, None, b"v%d" % i, None, sink, 0, 0)
        if not batches or batches[-1] is not f.batch:
            batches.append(f.batch)
    return batches


def test_one_wakeup_per_drain_however_many_records_complete():
    loop = FakeLoop()
    sink = LoopSink(loop)
    acc = _acc()
    batches = _records(acc, sink, 300)            # 1 KiB batches: several of them
    assert len(batches) > 3
    for b in batches:
        b.complete(100, -1, None)
    assert loop.calls == 1 and sink.wakeups == 1
    loop.run_ready()
    assert sink.records == 300 and sink.wakeups == 1
    # the next completion after a drain wakes the loop again, once
    more = _records(acc, sink, 5, partition=1)
    for b in more:
        b.complete(400, -1, None)
    assert loop.calls == 2
    loop.run_ready()
    assert sink.records == 305


def test_completions_from_several_threads_coalesce():
    loop = FakeLoop()
    sink = LoopSink(loop)
    acc = _acc()
    batches = _records(acc, sink, 400)
    threads = [threading.Thread(target=lambda bs=batches[i::4]: [b.complete(0, -1, None) for b in bs])
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loop.calls == 1
    loop.run_ready()
    assert sink.records == 400


def test_pushed_calls_run_on_drain_in_order_and_errors_are_logged(caplog):
    loop = FakeLoop()
    sink = LoopSink(loop)
    seen = []
    drained = []
    sink.on_drain = lambda: drained.append(len(seen))
    sink.push(seen.append, 1)
    sink.push(lambda _arg: 1 / 0, None)
    sink.push(seen.append, 2)
    assert loop.calls == 1 and seen == []
    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        loop.run_ready()
    assert seen == [1, 2] and drained == [2] and sink.calls == 3
    assert any("raised on the event loop" in r.getMessage() for r in caplog.records)


def test_after_the_loop_closed_outcomes_are_logged_not_lost(caplog):
    loop = FakeLoop()
    sink = LoopSink(loop)
    acc = _acc()
    loop.closed = True
    ok = _records(acc, sink, 3, partition=0)
    bad = _records(acc, sink, 2, partition=1)
    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        for b in ok:
            b.complete(0, -1, None)
        for b in bad:
            b.complete(-1, -1, KafkaTimeoutError("expired"))
    msgs = [r.getMessage() for r in caplog.records]
    assert any("3 record(s) delivered after their event loop was closed" in m for m in msgs), msgs
    assert any("2 record(s) failed after their event loop was closed" in m and "expired" in m
               for m in msgs), msgs
    assert sink.unawaited_failures == 2 and loop.calls == 0


def test_a_drain_scheduled_just_before_the_loop_closed_is_noticed(caplog):
    loop = FakeLoop()
    sink = LoopSink(loop)
    acc = _acc()
    first = _records(acc, sink, 1, partition=0)
    first[0].complete(0, -1, None)               # schedules a drain ...
    loop.closed = True                           # ... that the closing loop never runs
    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        for b in _records(acc, sink, 1, partition=1):
            b.complete(0, -1, KafkaTimeoutError("late"))
    assert sink.unawaited_failures == 1
    assert any("failed after their event loop was closed" in r.getMessage() for r in caplog.records)


def test_buffer_pool_listener_fires_once_memory_is_back():
    pool = BufferPool(4096, 1024)
    pool.allocate(4096, 0)
    fired = []
    pool.add_listener(1024, lambda: fired.append("a"))
    pool.add_listener(8192, lambda: fired.append("big"))
    assert fired == [] and pool.queued == 0
    pool.deallocate(1024)
    assert fired == ["a"]
    pool.deallocate(3072)
    assert fired == ["a"]                         # 8 KiB never fit: it waits until close
    pool.add_listener(512, lambda: fired.append("now"))
    assert fired == ["a", "now"]                  # free already: at once
    pool.close()
    assert fired == ["a", "now", "big"]


def test_metadata_listener_fires_after_the_next_update_or_at_once_if_one_came():
    md = Metadata([("127.0.0.1", 9092)])
    fired = []
    v = md.request_update()
    md.add_listener(lambda: fired.append("next"), after=v)
    assert fired == []
    md.update(Cluster.bootstrap([("127.0.0.1", 9092)]), 1)
    assert fired == ["next"]
    md.add_listener(lambda: fired.append("past"), after=v)       # an update came since v
    assert fired == ["next", "past"]
    md.add_listener(lambda: fired.append("close"))
    md.close()
    assert fired == ["next", "past", "close"]


@pytest.mark.parametrize("loop_closed", [False, True])
def test_sink_is_not_a_callable_user_callback(loop_closed):
    """A LoopSink given as on_delivery to Producer.send is refused: only fastkafka.aio hands one
    over (_send_waiter); as a callable check it would pass silently otherwise."""
    loop = FakeLoop()
    loop.closed = loop_closed
    assert not callable(LoopSink(loop))
