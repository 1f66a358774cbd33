"""BufferPool: accounting, FIFO blocking with the GIL released, timeouts, close."""
from __future__ import annotations

import threading
import time

import pytest

from fastkafka._producer.bufferpool import BufferPool
from fastkafka.errors import BufferExhaustedError, ProducerClosedError, RecordTooLargeError


def wait_until(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.001)
    return pred()


def test_accounting():
    pool = BufferPool(1000, 100)
    assert pool.total == 1000 and pool.batch_size == 100
    assert pool.available_memory == 1000 and pool.queued == 0
    pool.allocate(100, 0)
    pool.allocate(250, 0)
    assert pool.available_memory == 650
    pool.deallocate(250)
    assert pool.available_memory == 900
    assert pool.try_allocate(900)
    assert not pool.try_allocate(1)
    assert pool.available_memory == 0
    pool.deallocate(1000)
    assert pool.available_memory == 1000
    with pytest.raises(ValueError, match=r"deallocate\(1\) would exceed buffer_memory=1000"):
        pool.deallocate(1)  # given back twice


def test_larger_than_pool_fails_at_once():
    pool = BufferPool(1000, 100)
    t0 = time.monotonic()
    with pytest.raises(RecordTooLargeError) as ei:
        pool.allocate(1001, 10_000)
    assert time.monotonic() - t0 < 1.0
    assert "buffer_memory" in str(ei.value) and "1001" in str(ei.value)
    assert pool.available_memory == 1000


def test_raises_after_max_block_ms_with_clear_message():
    pool = BufferPool(1000, 100)
    pool.allocate(950, 0)
    t0 = time.monotonic()
    with pytest.raises(BufferExhaustedError) as ei:
        pool.allocate(100, 50)
    waited = time.monotonic() - t0
    assert 0.045 <= waited < 2.0
    msg = str(ei.value)
    for part in ("buffer_memory=1000", "100 bytes", "50 available", "max_block_ms=50"):
        assert part in msg, msg
    assert pool.queued == 0 and pool.available_memory == 50   # nothing leaked


def test_zero_max_block_fails_immediately():
    pool = BufferPool(100, 100)
    pool.allocate(100, 0)
    with pytest.raises(BufferExhaustedError):
        pool.allocate(1, 0)
    assert pool.queued == 0


def test_blocks_then_succeeds_when_memory_is_freed_and_calls_wakeup():
    pool = BufferPool(1000, 100)
    woken = []
    pool.wakeup = lambda: woken.append(threading.get_ident())
    pool.allocate(1000, 0)
    got = []

    def worker():
        pool.allocate(300, 5000)
        got.append(time.monotonic())

    t = threading.Thread(target=worker)
    t.start()
    assert wait_until(lambda: pool.queued == 1)
    assert woken == [t.ident]
    # the GIL is released while waiting: this thread keeps running Python code
    spins = sum(1 for _ in range(100_000))
    assert spins == 100_000 and not got
    pool.deallocate(200)     # not enough yet
    time.sleep(0.02)
    assert not got and pool.queued == 1
    freed_at = time.monotonic()
    pool.deallocate(100)
    t.join(5)
    assert got and got[0] >= freed_at
    assert pool.available_memory == 0 and pool.queued == 0
    assert pool.blocked_count == 1


def test_fifo_first_waiter_served_first_even_if_later_one_is_smaller():
    pool = BufferPool(1000, 100)
    pool.allocate(1000, 0)
    order = []
    lock = threading.Lock()

    def worker(name, size):
        pool.allocate(size, 5000)
        with lock:
            order.append(name)

    big = threading.Thread(target=worker, args=("big", 500))
    big.start()
    assert wait_until(lambda: pool.queued == 1)
    small = threading.Thread(target=worker, args=("small", 100))
    small.start()
    assert wait_until(lambda: pool.queued == 2)
    pool.deallocate(200)              # enough for "small", but "big" is first in line
    time.sleep(0.05)
    assert order == [] and pool.queued == 2
    # a new non-blocking request does not jump the queue either
    assert not pool.try_allocate(100)
    pool.deallocate(300)              # 500 free: exactly what "big" asked for
    big.join(5)
    assert order == ["big"] and pool.queued == 1 and pool.available_memory == 0
    pool.deallocate(100)
    small.join(5)
    assert order == ["big", "small"]
    assert pool.available_memory == 0 and pool.queued == 0


def test_timed_out_head_waiter_lets_the_next_one_through():
    pool = BufferPool(1000, 100)
    pool.allocate(900, 0)
    results = {}

    def worker(name, size, block):
        try:
            pool.allocate(size, block)
            results[name] = "ok"
        except BufferExhaustedError:
            results[name] = "timeout"

    head = threading.Thread(target=worker, args=("head", 500, 60))
    head.start()
    assert wait_until(lambda: pool.queued == 1)
    tail = threading.Thread(target=worker, args=("tail", 150, 5000))
    tail.start()
    assert wait_until(lambda: pool.queued == 2)
    pool.deallocate(100)   # 200 free: fits "tail" but the head blocks it until it times out
    head.join(5)
    tail.join(5)
    assert results == {"head": "timeout", "tail": "ok"}
    assert pool.available_memory == 50 and pool.queued == 0


def test_close_wakes_waiters_and_rejects_new_requests():
    pool = BufferPool(100, 100)
    pool.allocate(100, 0)
    errors = []

    def worker():
        try:
            pool.allocate(50, 10_000)
        except ProducerClosedError as e:
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    assert wait_until(lambda: pool.queued == 1)
    t0 = time.monotonic()
    pool.close()
    t.join(5)
    assert time.monotonic() - t0 < 1.0
    assert len(errors) == 1 and pool.queued == 0
    with pytest.raises(ProducerClosedError):
        pool.allocate(1, 0)
    pool.deallocate(100)       # in-flight batches still give memory back after close
    assert pool.available_memory == 100


def test_wakeup_that_raises_is_logged_and_wait_continues(caplog):
    pool = BufferPool(100, 100)
    pool.allocate(100, 0)

    def bad():
        raise RuntimeError("boom")

    pool.wakeup = bad
    done = []
    t = threading.Thread(target=lambda: (pool.allocate(10, 5000), done.append(1)))
    with caplog.at_level("ERROR", logger="fastkafka"):
        t.start()
        assert wait_until(lambda: pool.queued == 1)
        pool.deallocate(10)
        t.join(5)
    assert done == [1]
    assert any("wakeup" in r.getMessage() for r in caplog.records)


def test_many_threads_conserve_memory():
    pool = BufferPool(10_000, 100)
    n_threads, rounds = 8, 300
    completed, errors = [], []

    def worker():
        try:
            for i in range(rounds):
                size = 100 + (i % 7) * 300
                pool.allocate(size, 10_000)
                pool.deallocate(size)
            completed.append(rounds)
        except BaseException as e:          # reported to the test thread below
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts)
    # every round of every thread ran (a thread that died early also leaves the memory balanced)
    assert errors == [] and completed == [rounds] * n_threads
    assert pool.available_memory == 10_000 and pool.queued == 0
