"""fastkafka.aio's fault paths on the in-process fault broker, under asyncio's loop and uvloop's: a
broker that never answers (buffer memory then runs out: the awaited send times out with the sync
API's error, the loop keeps running), a record that fails with nobody awaiting it (logged), and
close() with records the broker never acknowledges (every future resolved, the loop not blocked)."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from aioloops import LOOPS, Ticker, run
from faultbroker import delay, no_response, partition_error
from fastkafka.aio import AsyncProducer
from fastkafka.errors import BufferExhaustedError, ProducerClosedError
from fastkafka.protocol import ApiKey

pytestmark = pytest.mark.parametrize("loop_kind", LOOPS)

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=15000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2)

#: As in tests/integration/test_aio.py: the longest this process may hold the loop in one gap
#: while the producer waits (a blocking wait would hold it the whole 0.8 s or more); the fault
#: broker's threads run in this process, and count. aioloops.Ticker leaves out what the OS and
#: the hypervisor take. Measured, 5 runs under each loop: held at most 5.3 ms (median under
#: 1 ms), the longest gaps 6-42 ms.
MAX_STALL_MS = 10.0

INVALID_RECORD = 87          # not retriable: the record fails


def test_buffer_full_send_times_out_without_blocking_the_loop(fb, no_leaks, loop_kind):
    fb.create_topic("t", 1)
    fb.script.on(ApiKey.PRODUCE, no_response(), times=None)

    async def main():
        settings = {**FAST, "request_timeout_ms": 1000, "delivery_timeout_ms": 1500}
        async with AsyncProducer(bootstrap_servers=fb.bootstrap, buffer_memory=32 * 1024,
                                 batch_size=8 * 1024, max_block_ms=800, **settings) as p:
            futs = [p.send("t", b"v" * 1000) for _ in range(200)]    # 200 KB into 32 KiB
            async with Ticker() as t:
                start = time.monotonic()
                results = await asyncio.gather(*futs, return_exceptions=True)
                waited = time.monotonic() - start
            timeouts = [r for r in results if isinstance(r, BufferExhaustedError)]
            assert timeouts, results[:3]
            assert "max_block_ms=800" in str(timeouts[0])
            await p.close(0)
            return waited, t

    waited, t = run(loop_kind, main)
    assert 0.7 < waited < 10
    t.assert_held_under(MAX_STALL_MS, min_ticks=100)


def test_failed_record_nobody_awaits_is_logged(fb, no_leaks, loop_kind, caplog):
    fb.create_topic("t", 1)

    async def main():
        async with AsyncProducer(bootstrap_servers=fb.bootstrap, **FAST) as p:
            await p.send("t", b"ok")
            fb.script.on(ApiKey.PRODUCE, partition_error(INVALID_RECORD), times=1)
            p.produce("t", b"fire-and-forget")
            await p.flush(10)
            return p.metrics()

    caplog.set_level(logging.WARNING, logger="fastkafka")
    m = run(loop_kind, main)
    assert m["aio_unawaited_failures"] == 1
    assert any("failed and nobody awaits it" in r.getMessage() and "BrokerInvalidRecordError" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_close_with_unacknowledged_records_resolves_every_future(fb, no_leaks, loop_kind):
    fb.create_topic("t", 1)

    async def main():
        p = AsyncProducer(bootstrap_servers=fb.bootstrap, **FAST)
        await p.send("t", b"ok")
        fb.script.on(ApiKey.PRODUCE, no_response(), times=None)
        futs = [p.send("t", b"%d" % i) for i in range(20)]
        async with Ticker() as t:
            start = time.monotonic()
            await p.close(0.5)
            took = time.monotonic() - start
        assert all(f.done() for f in futs)
        errors = [f.exception() for f in futs]
        assert all(isinstance(e, ProducerClosedError) for e in errors), errors
        return took, t

    took, t = run(loop_kind, main)
    assert took < 0.5 + 2.0 + 1.0          # timeout, the close grace, headroom
    t.assert_held_under(MAX_STALL_MS)


def test_first_send_to_a_slow_then_absent_broker_does_not_hold_the_loop(fb, no_leaks, loop_kind):
    """The first send while the broker answers metadata late (0.3 s), then while it is gone for a
    moment (connections refused, reconnects backing off): the loop runs all along."""
    fb.create_topic("t", 1)
    fb.script.on(ApiKey.METADATA, delay(0.3), times=1)

    async def main():
        async with Ticker() as t:
            async with AsyncProducer(bootstrap_servers=fb.bootstrap, **FAST) as p:
                start = time.monotonic()
                md = await p.send("t", b"slow")
                slow = time.monotonic() - start
                fb.set_down()
                late = p.send("t2", b"late")           # a topic whose metadata it has not got
                await asyncio.sleep(0.3)
                fb.create_topic("t2", 1)
                fb.set_up()
                md_late = await late
        return t, md, md_late, slow

    t, md, md_late, slow = run(loop_kind, main)
    assert slow >= 0.3 and (md.offset, md_late.offset) == (0, 0)
    t.assert_held_under(MAX_STALL_MS, min_ticks=200)


def test_close_delivers_a_record_still_waiting_for_its_topics_metadata(fb, no_leaks, loop_kind):
    """A record sent just before the producer closes, while its topic's metadata is answered late
    (0.4 s, twice: the wait takes more than one round), is delivered by close(), not failed: close()
    delivers what is queued, including what waits for metadata."""
    fb.create_topic("t", 1)

    async def main():
        async with AsyncProducer(bootstrap_servers=fb.bootstrap, **FAST) as p:
            await p.send("t", b"first")              # connected, producer id known
            fb.script.on(ApiKey.METADATA, delay(0.4), times=2)
            fut = p.send("new", b"kept")             # a topic it has no metadata for
            got = []
            p.produce("new", b"kept too", on_delivery=lambda err, md: got.append((err, md)))
        # (the async with's close() has returned; the broker creates the topic when asked)
        return fut.result(), got

    md, got = run(loop_kind, main)
    assert (md.topic, md.offset) == ("new", 0)
    assert len(got) == 1 and got[0][0] is None and got[0][1].offset == 1
    assert sum(b.record_count for b in fb.batches("new", 0)) == 2


def test_close_past_its_timeout_fails_what_still_waits_for_metadata(fb, no_leaks, loop_kind):
    """close(timeout) while a record's topic has no metadata (every answer held 10 s) resolves its
    future before it returns: ProducerClosedError, not a wait for max_block_ms."""
    fb.create_topic("t", 1)

    async def main():
        p = AsyncProducer(bootstrap_servers=fb.bootstrap, max_block_ms=30000, **FAST)
        await p.send("t", b"first")
        fb.script.on(ApiKey.METADATA, delay(10), times=100)
        fut = p.send("held", b"v")
        start = time.monotonic()
        await p.close(0.3)
        took = time.monotonic() - start
        return fut, took

    fut, took = run(loop_kind, main)
    assert fut.done() and took < 5
    with pytest.raises(ProducerClosedError):
        fut.result()
