"""The live-resource counters (``fastkafka._producer.accumulator.live_resources``) and the teardown check
built on them (``tests/live_resources.py``): the check must fail a test that leaks, naming the
counter, and pass one that closes what it opened (also with a producer shared by a module)."""
from __future__ import annotations

import os
import pathlib
import textwrap

import pytest

from fastkafka import Producer
from fastkafka._producer.accumulator import LIVE_COUNTERS, RecordAccumulator, live_resources
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.bufferpool import BufferPool, pool_counters
from fastkafka._wire.records import BatchBuilder, buffer_counters
from live_resources import LiveResourceLeak, check_released

# tests/ (this file is tests/unit/fastkafka/_producer/test_live_resources.py) and the repository
TESTS = next(str(p) for p in pathlib.Path(__file__).resolve().parents if p.name == "tests")
ROOT = os.path.dirname(TESTS)


def new_acc(pool=None):
    pool = pool or BufferPool(1 << 20, 16384)
    return RecordAccumulator(16384, 0, None, 5, 100, 120000, pool, False), pool


def test_counters_are_named_and_start_balanced():
    now = live_resources()
    assert sorted(now) == sorted(LIVE_COUNTERS)
    assert all(v >= 0 for v in now.values())
    assert now["buffer_pool_overflow"] == 0
    assert buffer_counters()["batch_buffers"] == now["batch_buffers"]


def test_counters_follow_a_batch_from_append_to_deallocate():
    before = live_resources()
    acc, pool = new_acc()
    acc.append("t", 0, 1000, b"k", b"v", None, None, 0, 1000)
    fut = BatchFuture()
    acc.append_batch("t", 1, [b"a", b"b"], None, None, 1000, fut, 0, 1000)
    now = live_resources()
    assert now["accumulators_open"] == before["accumulators_open"] + 1
    assert now["buffer_pools"] == before["buffer_pools"] + 1
    assert now["producer_batches"] == before["producer_batches"] + 2
    assert now["batch_buffers"] == before["batch_buffers"] + 2
    # two batches of a few bytes: two buffers of the pool's smallest size class
    assert now["buffer_pool_bytes"] == before["buffer_pool_bytes"] + 2 * pool.class_for(1)
    assert pool_counters()["buffer_pool_bytes"] == now["buffer_pool_bytes"]
    for b in acc.abort_undrained():
        acc.deallocate(b)
    assert live_resources()["buffer_pool_bytes"] == before["buffer_pool_bytes"]
    acc.close()
    assert live_resources()["accumulators_open"] == before["accumulators_open"]
    del acc, pool, b, fut
    assert check_released(before, settle_s=0) is not None


def test_builder_buffers_are_counted_while_they_grow():
    before = live_resources()
    b = BatchBuilder(1 << 20)
    start = live_resources()["batch_buffer_bytes"]
    assert live_resources()["batch_buffers"] == before["batch_buffers"] + 1
    b.append(0, None, b"x" * (3 << 20))          # a record larger than the initial buffer
    assert live_resources()["batch_buffer_bytes"] > start
    del b
    check_released(before, settle_s=0)


def test_check_names_a_batch_not_deallocated():
    """A batch removed from its accumulator but never deallocated keeps its pool memory."""
    before = live_resources()
    acc, pool = new_acc()
    acc.append("t", 0, 1000, None, b"v", None, None, 0, 1000)
    kept = acc.abort_undrained()           # taken out, memory not given back
    acc.close()
    del acc
    with pytest.raises(LiveResourceLeak) as e:
        check_released(before, settle_s=0.1)
    assert set(e.value.counters) == {"producer_batches", "batch_buffers", "batch_buffer_bytes",
                                     "buffer_pools", "buffer_pool_bytes"}
    assert "buffer_pool_bytes: " in str(e.value) and "never deallocated" in str(e.value)
    del kept, pool      # the batch's builder gives its buffer and bytes back as it is freed
    check_released(before, settle_s=0)


def test_check_names_a_producer_never_closed():
    before = live_resources()
    p = Producer(bootstrap_servers="127.0.0.1:1", linger_ms=10_000, reconnect_backoff_ms=1000)
    with pytest.raises(LiveResourceLeak) as e:
        check_released(before, settle_s=0.2)
    assert {"accumulators_open", "io_threads", "buffer_pools"} <= set(e.value.counters)
    assert "accumulators_open: " in str(e.value) and "not closed" in str(e.value)
    p.close(1)
    del p
    check_released(before)


def test_allowed_counters_are_not_checked():
    before = live_resources()
    acc, pool = new_acc()
    check_released(before, settle_s=0, allowed=("accumulators_open", "buffer_pools"))
    del acc, pool


PLUGIN_CASES = '''
    import pytest
    from fastkafka._producer.accumulator import RecordAccumulator
    from fastkafka._producer.bufferpool import BufferPool

    KEPT = []


    def new_acc():
        return RecordAccumulator(16384, 0, None, 5, 100, 120000, BufferPool(1 << 20, 16384), False)


    @pytest.fixture(scope="module")
    def shared():
        acc = new_acc()
        yield acc
        acc.close()


    @pytest.fixture
    def closed_after():
        acc = new_acc()
        yield acc
        acc.close()


    def test_clean():
        acc = new_acc()
        acc.append("t", 0, 1, None, b"v", None, None, 0, 1000)
        acc.close()


    def test_uses_shared_1(shared):
        shared.append("t", 0, 1, None, b"v", None, None, 0, 1000)
        for b in shared.abort_undrained():
            shared.deallocate(b)


    def test_uses_shared_2(shared, closed_after):
        closed_after.append("t", 0, 1, None, b"v", None, None, 0, 1000)


    def test_leaks_an_open_accumulator():
        KEPT.append(new_acc())


    def test_leaks_a_batch():
        acc = new_acc()
        acc.append("t", 0, 1, None, b"v", None, None, 0, 1000)
        KEPT.append((acc.abort_undrained(), acc.buffer_pool))   # memory never given back
        acc.close()


    @pytest.mark.keeps_live_resources("accumulators_open", "buffer_pools", reason="a test of it")
    def test_keeps_on_purpose():
        KEPT.append(new_acc())


    def test_fails_and_leaks():
        KEPT.append(new_acc())
        assert False, "its own failure"
'''


def test_plugin_fails_leaking_tests_at_teardown(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([TESTS, ROOT]))
    pytester.makeconftest('pytest_plugins = ["live_resources"]\n')
    pytester.makepyfile(test_cases=textwrap.dedent(PLUGIN_CASES))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "timeout=60")
    result.assert_outcomes(passed=6, failed=1, errors=2)
    out = result.stdout.str()
    assert "ERROR at teardown of test_leaks_an_open_accumulator" in out
    assert "ERROR at teardown of test_leaks_a_batch" in out
    assert "accumulators_open: 1 -> 2" in out   # the shared one is in the baseline
    assert "producer_batches: " in out and "buffer_pool_bytes: " in out
    for name in ("test_clean", "test_uses_shared_1", "test_uses_shared_2", "test_keeps_on_purpose",
                 "test_fails_and_leaks"):
        assert f"ERROR at teardown of {name}" not in out
