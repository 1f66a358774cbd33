"""The producer's I/O thread never waits on application work.

Delivery callbacks run on the I/O thread, the thread that sends batches and so frees buffer memory
and fetches metadata. A send made there must not wait for either: with the buffer full it raises
BufferExhaustedError at once (saying it was called on the I/O thread), and for a topic whose
metadata is not known yet KafkaTimeoutError at once. A slow callback only delays delivery.
"""
from __future__ import annotations

import threading
import time

import pytest

from fastkafka import Producer
from fastkafka.errors import BufferExhaustedError, KafkaTimeoutError

pytestmark = pytest.mark.faultbroker

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=30000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2)

#: A send on the I/O thread that takes longer than this has waited (it should take microseconds).
AT_ONCE_S = 0.5


def wait_for(condition, timeout=10.0) -> bool:
    """True once ``condition()`` is; False after ``timeout`` s (flush() returns once the batches
    are complete, possibly before the I/O thread has run their last callbacks)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def timed(call, error_type) -> tuple:
    """(call's result, or the ``error_type`` it raised; seconds it took)."""
    start = time.monotonic()
    try:
        outcome = call()
    except error_type as e:
        outcome = e
    return outcome, time.monotonic() - start


class FollowUps:
    """What the follow-up sends made from delivery callbacks did. Once one of them has waited,
    the callbacks stop sending (so a producer that waits fails the test quickly, not after
    max_block_ms per callback)."""

    def __init__(self, producer, topic, value=b"f" * 100):
        self.p, self.topic, self.value = producer, topic, value
        self.lock = threading.Lock()
        self.accepted, self.rejected, self.other = [], [], []
        self.slowest = 0.0
        self.waited = False
        self.thread_names = set()

    def send(self):
        if self.waited:
            return
        self.thread_names.add(threading.current_thread().name)
        start = time.monotonic()
        try:
            fut = self.p.send(self.topic, self.value)
            outcome = (self.accepted, fut)
        except BufferExhaustedError as e:
            outcome = (self.rejected, e)
        except Exception as e:  # noqa: BLE001 - recorded and asserted on
            outcome = (self.other, e)
        took = time.monotonic() - start
        with self.lock:
            outcome[0].append(outcome[1])
            self.slowest = max(self.slowest, took)
            if took > AT_ONCE_S:
                self.waited = True


def test_send_from_a_callback_with_the_buffer_full_never_waits(fb, make_producer):
    """The deadlock seen: 64 KiB of buffer, every delivery callback sends a follow-up while the
    main thread keeps the buffer full. The I/O thread must never wait for memory only it frees."""
    fb.create_topic("t", 2)
    p = make_producer(fb, buffer_memory=65536, batch_size=16384, max_block_ms=10000)
    p.send("t", b"warm-up").get(10)
    fu = FollowUps(p, "t")
    originals = {"ok": 0, "err": []}
    lock = threading.Lock()

    def on_delivery(err, md):
        with lock:
            if err is None:
                originals["ok"] += 1
            else:
                originals["err"].append(err)
        fu.send()

    n = 5000
    start = time.monotonic()
    for i in range(n):  # the main thread: any error here fails the test
        p.send("t", b"o%05d" % i + b"." * 94, on_delivery=on_delivery)
    main_took = time.monotonic() - start
    assert p.flush(20) == 0
    assert wait_for(lambda: len(fu.accepted) + len(fu.rejected) + len(fu.other) == n or fu.waited)
    assert p.flush(20) == 0  # the follow-ups queued by the callbacks
    took = time.monotonic() - start

    assert fu.other == []
    assert not fu.waited, f"a send on the I/O thread waited {fu.slowest:.2f} s"
    assert fu.thread_names == {p._sender._thread.name}
    assert originals == {"ok": n, "err": []}
    assert len(fu.accepted) + len(fu.rejected) == n
    assert fu.rejected, "the buffer was never full when a callback sent: the test proves nothing"
    for e in fu.rejected[:20]:
        assert "I/O thread" in str(e) and "delivery callback" in str(e) and "deadlock" in str(e)
    for f in fu.accepted:  # (a flush can return before the last callbacks have run)
        assert f.get(10).topic == "t"
    assert main_took < 30 and took < 45
    assert p.metrics()["records_queued"] == 0
    assert p._pool.io_thread_refusals == len(fu.rejected)
    # every original and every accepted follow-up is stored once (plus the warm-up)
    assert fb.cluster.record_count("t") == 1 + n + len(fu.accepted)


def test_send_batch_from_a_callback_beyond_the_buffer_raises_at_once(fb, make_producer):
    """12 records of 8 KB need 6 batches of 16 KiB: more than the whole 64 KiB buffer, so a
    send_batch made in a callback must run out of memory part-way; it raises at once, and the
    records it had appended (``records_appended``) are delivered like any others."""
    fb.create_topic("t", 1)
    p = make_producer(fb, buffer_memory=65536, batch_size=16384, max_block_ms=10000)
    results = []

    def on_delivery(err, md):
        results.extend(timed(lambda: p.send_batch("t", [b"b" * 8000] * 12), BufferExhaustedError))

    p.send("t", b"first", on_delivery=on_delivery).get(10)
    assert wait_for(lambda: len(results) == 2, 15)
    err, took = results
    assert took < AT_ONCE_S, f"send_batch on the I/O thread waited {took:.2f} s"
    assert isinstance(err, BufferExhaustedError) and "I/O thread" in str(err)
    assert 0 <= err.records_appended < 12
    assert p.flush(15) == 0
    assert fb.cluster.record_count("t") == 1 + err.records_appended
    # the main thread is not bound by the rule: the same call waits for memory and succeeds
    assert p.send_batch("t", [b"b" * 8000] * 12).get(15) == 12


def test_send_from_a_callback_to_a_topic_without_metadata_never_waits(fb, make_producer):
    fb.create_topic("t", 1)
    fb.create_topic("other", 3)
    p = make_producer(fb, max_block_ms=10000)
    seen = []

    def on_delivery(err, md):
        seen.extend(timed(lambda: p.send("other", b"from-callback"), KafkaTimeoutError))

    p.send("t", b"first", on_delivery=on_delivery).get(10)
    assert wait_for(lambda: len(seen) == 2, 15)
    err, took = seen
    assert took < AT_ONCE_S, f"the send on the I/O thread waited {took:.2f} s for metadata"
    assert type(err) is KafkaTimeoutError
    assert "'other'" in str(err) and "I/O thread" in str(err) and "deadlock" in str(err)
    # the metadata was asked for: the main thread's send finds it
    assert p.send("other", b"from-main").get(10).topic == "other"
    # and now a callback's send to that topic goes through
    again = []
    p.send("t", b"second", on_delivery=lambda e, m: again.append(p.send("other", b"cb-2"))).get(10)
    assert wait_for(lambda: again)
    assert again[0].get(10).topic == "other"
    assert fb.cluster.record_count("other") == 2


def test_slow_callbacks_delay_delivery_but_never_deadlock(fb, make_producer):
    """Every callback sleeps 0.2 s and sends a follow-up while the main thread keeps the buffer
    full: delivery is slower, but everything is delivered, the main thread's sends all succeed,
    and no send on the I/O thread waits."""
    fb.create_topic("t", 1)
    p = make_producer(fb, buffer_memory=65536, batch_size=16384, max_block_ms=10000)
    p.send("t", b"warm-up").get(10)
    fu = FollowUps(p, "t", value=b"f" * 8000)
    delivered, errors = [], []

    def slow(err, md):
        time.sleep(0.2)
        (errors if err else delivered).append(md)
        fu.send()

    n = 24  # 8 KB records, two per 16 KiB batch: 12 batches through a 4-batch buffer
    start = time.monotonic()
    for i in range(n):
        p.send("t", b"%02d" % i + b"s" * 7998, on_delivery=slow)
    assert p.flush(30) == 0
    assert wait_for(lambda: len(fu.accepted) + len(fu.rejected) + len(fu.other) == n or fu.waited)
    assert p.flush(30) == 0  # the follow-ups queued by the callbacks
    took = time.monotonic() - start

    assert not fu.waited, f"a send on the I/O thread waited {fu.slowest:.2f} s"
    assert fu.other == []
    assert errors == [] and len(delivered) == n
    assert len(fu.accepted) + len(fu.rejected) == n
    for f in fu.accepted:  # (a flush can return before the last callbacks have run)
        assert f.get(10).topic == "t"
    assert fu.rejected, "no callback found the buffer full: the test proves nothing"
    assert n * 0.2 <= took < 30
    assert fb.cluster.record_count("t") == 1 + n + len(fu.accepted)


def test_waiting_on_a_future_in_a_callback_raises_instead_of_deadlocking(fb, make_producer):
    """future.get() / BatchFuture.get() inside a delivery callback would wait for the thread it runs
    on: IllegalStateError at once; a future already done is read as usual; delivery goes on."""
    from fastkafka.errors import IllegalStateError

    fb.create_topic("t", 1)
    p = make_producer(fb, linger_ms=50)
    seen = []
    pending_batch = []

    def on_first(err, md):
        later = p.send("t", b"queued-behind")            # not delivered yet: a wait would deadlock
        start = time.monotonic()
        for fut in (later, pending_batch[0]):
            try:
                fut.get(5)
                seen.append("no error")
            except IllegalStateError as e:
                seen.append(str(e))
        seen.append(time.monotonic() - start)
        seen.append(first.get(0).offset)                 # its own future is done: readable

    first = p.send("t", b"first", on_delivery=on_first)
    pending_batch.append(p.send_batch("t", [b"b1", b"b2"]))
    p.flush(10)
    assert wait_for(lambda: len(seen) == 4)
    assert "on the producer's I/O thread" in seen[0] and "future.get()" in seen[0]
    assert "BatchFuture.get()" in seen[1] or seen[1] == "no error"   # the batch may be done already
    assert seen[2] < AT_ONCE_S
    assert seen[3] == 0
    assert p.flush(10) == 0
    assert fb.cluster.record_count("t") == 4
