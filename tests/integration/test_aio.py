"""fastkafka.aio on Apache Kafka, under asyncio's event loop and uvloop's: what is sent is read back
by confluent-kafka's consumer (CRC checked), the loop keeps running while the producer waits for
metadata or buffer memory, outcomes reach the loop in batches, and the documented semantics
(cancelling, closing, another loop or thread, transactions) hold."""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from aioloops import LOOPS, Ticker, run
from brokers import read_all, read_back, read_back_flat, unique_name
from fastkafka.aio import AsyncProducer
from fastkafka.errors import (IllegalStateError, InvalidRecordError, KafkaTimeoutError,
                              ProducerClosedError, UnknownPartitionError)

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.parametrize("loop_kind", LOOPS)

#: The longest this process may hold the loop in one gap while the producer works or waits (ms):
#: the first send's metadata wait (the producer constructed on the loop), a wait for buffer
#: memory, flush(), close() with records in flight, a transaction's commit. What it guards
#: against: a wait done by blocking (the waits here last up to a second), Python work of the
#: producer's on the loop (the first AsyncProducer used to import the SASL, JAAS and TLS modules
#: there: 60-130 ms), the I/O thread holding the GIL. aioloops.Ticker tells the process's holds
#: from the machine's: on this 2-core virtual machine, shared with the broker's JVM, the loop
#: also goes 20-120 ms without running while the OS runs other processes or the hypervisor takes
#: the CPU, nothing of this process running meanwhile; those gaps are reported, not counted.
#: Measured, 5 runs of this module under each loop on that machine: held at most 5 ms (median
#: under 2 ms) while the longest gaps, the machine's, were 8-66 ms.
MAX_STALL_MS = 10.0


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_ticker_counts_what_holds_the_loop(loop_kind):
    """The measure the loop-hold tests rely on: a loop blocked in a sleep, held by a lock, or
    busy in Python code is counted as held (the machine's own gaps are not: see Ticker)."""
    async def main():
        held = []
        for hold in ("sleep", "lock", "busy"):
            async with Ticker() as t:
                await asyncio.sleep(0.01)
                if hold == "sleep":
                    time.sleep(0.06)
                elif hold == "lock":
                    lock = threading.Lock()
                    lock.acquire()
                    threading.Timer(0.06, lock.release).start()
                    lock.acquire()
                else:
                    end = time.perf_counter() + 0.06
                    while time.perf_counter() < end:
                        pass
                await asyncio.sleep(0.01)
            held.append((hold, t.max_held_ms, t.gaps))
        return held

    for hold, ms, gaps in run(loop_kind, main):
        assert ms >= MAX_STALL_MS, (hold, gaps)


def test_gathered_sends_are_read_back_exactly(kafka_broker, loop_kind):
    topic = unique_name("aio")
    kafka_broker.create_topic(topic, 3)
    n = 3000

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=2) as p:
            futs = [p.send(topic, b"v%d" % i, key=b"k%d" % (i % 17),
                           headers=[("h", b"%d" % i)]) for i in range(n)]
            mds = await asyncio.gather(*futs)
            return mds, p.metrics()

    mds, m = run(loop_kind, main)
    got = read_back(kafka_broker.bootstrap, topic, 3, n)
    by_value = {msg.value: (part, msg) for part, msgs in got.items() for msg in msgs}
    assert len(by_value) == n
    for i, md in enumerate(mds):
        part, msg = by_value[b"v%d" % i]
        assert (md.topic, md.partition, md.offset) == (topic, part, msg.offset)
        assert msg.key == b"k%d" % (i % 17)
        assert msg.headers == [("h", b"%d" % i)]
    assert m["aio_records_completed"] == n
    # one wake-up of the loop per drain, not per record
    assert m["aio_loop_wakeups"] * 10 <= n, m["aio_loop_wakeups"]


def test_records_keep_the_order_of_the_calls_while_metadata_is_awaited(kafka_broker, loop_kind):
    topic = unique_name("aio-order")
    kafka_broker.create_topic(topic, 1)

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap) as p:
            # the topic is unknown to the producer: the first calls wait for its metadata, and
            # every later call queues behind them
            futs = [p.send(topic, b"%05d" % i) for i in range(500)]
            assert p.metrics()["aio_backlog"] > 0
            mds = await asyncio.gather(*futs)
            return [md.offset for md in mds]

    offsets = run(loop_kind, main)
    assert offsets == list(range(500))
    assert [m.value for m in read_back_flat(kafka_broker.bootstrap, topic, 1, 500)] == \
        [b"%05d" % i for i in range(500)]


def test_send_batch_lists_and_arrow(kafka_broker, loop_kind):
    pa = pytest.importorskip("pyarrow")
    topic = unique_name("aio-batch")
    kafka_broker.create_topic(topic, 2)

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap) as p:
            a = await p.send_batch(topic, [b"a%d" % i for i in range(1000)],
                                   keys=[b"k%d" % i for i in range(1000)])
            b = await p.send_batch(topic, pa.array([b"b%d" % i for i in range(1000)], pa.binary()),
                                   partition=1)
            with pytest.raises(InvalidRecordError):
                await p.send_batch(topic, [b"ok", 5])
            return a, b

    assert run(loop_kind, main) == (1000, 1000)
    got = read_back(kafka_broker.bootstrap, topic, 2, 2000)
    assert sorted(m.value for msgs in got.values() for m in msgs) == sorted(
        [b"a%d" % i for i in range(1000)] + [b"b%d" % i for i in range(1000)])
    assert [m.value for m in got[1] if m.value.startswith(b"b")] == [b"b%d" % i for i in range(1000)]


def test_send_batch_that_runs_out_of_memory_part_way_waits_and_finishes(kafka_broker, loop_kind):
    topic = unique_name("aio-batch-mem")
    kafka_broker.create_topic(topic, 1)
    values = [b"%06d" % i + b"x" * 994 for i in range(3000)]   # 3 MB through 64 KiB of memory

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, buffer_memory=64 * 1024,
                                 batch_size=16 * 1024, linger_ms=1) as p:
            await p.send(topic, b"first")
            async with Ticker() as t:
                n = await p.send_batch(topic, values)
            return n, t

    n, t = run(loop_kind, main)
    assert n == 3000
    t.assert_held_under(MAX_STALL_MS)
    got = read_back_flat(kafka_broker.bootstrap, topic, 1, 3001)
    assert [m.value for m in got] == [b"first"] + values


def test_produce_callbacks_run_on_the_loop_thread(kafka_broker, loop_kind):
    topic = unique_name("aio-produce")
    kafka_broker.create_topic(topic, 1)

    async def main():
        seen = []
        loop_thread = threading.get_ident()
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap) as p:
            for i in range(100):
                cb = (lambda err, md, i=i: seen.append(
                    (i, err, md.offset, threading.get_ident() == loop_thread)))
                if i % 2:
                    p.produce(topic, b"%d" % i, on_delivery=cb)
                else:
                    p.produce(topic, b"%d" % i, callback=cb)       # confluent-kafka's name
            with pytest.raises(InvalidRecordError, match="on_delivery and callback given"):
                p.produce(topic, b"x", on_delivery=cb, callback=cb)
            assert await p.flush(10) == 0
        return seen

    seen = run(loop_kind, main)
    assert sorted(seen) == [(i, None, i, True) for i in range(100)]


def test_loop_keeps_running_while_metadata_is_awaited(loop_kind):
    port = _closed_port()

    async def main():
        async with AsyncProducer(bootstrap_servers=f"127.0.0.1:{port}", max_block_ms=1000) as p:
            async with Ticker() as t:
                with pytest.raises(KafkaTimeoutError, match="'absent' not present in metadata after "
                                                            "1000 ms.*connection refused"):
                    await p.send("absent", b"x")
            await p.close(1)
            return t

    t = run(loop_kind, main)
    t.assert_held_under(MAX_STALL_MS, min_ticks=100)    # it ran all along (1 ms period, 1 s wait)


def test_loop_keeps_running_while_buffer_memory_is_awaited(kafka_broker, loop_kind):
    topic = unique_name("aio-mem")
    kafka_broker.create_topic(topic, 1)

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, buffer_memory=64 * 1024,
                                 batch_size=16 * 1024, linger_ms=1) as p:
            await p.send(topic, b"warm")
            most_waiting = 0
            chunks = []
            async with Ticker() as t:
                # gathered by 50 (asyncio.gather of all 3,000 futures would itself hold the loop
                # 5 ms, twice: once to register its callbacks, once to collect their results)
                for _ in range(60):
                    chunks.append(asyncio.gather(*[p.send(topic, b"v" * 1000) for _ in range(50)]))
                    most_waiting = max(most_waiting, p.metrics()["aio_backlog"])
                    await asyncio.sleep(0)
                for chunk in chunks:
                    await chunk
            return t, most_waiting

    t, most_waiting = run(loop_kind, main)
    assert most_waiting > 0       # sends did wait for memory (3 MB through 64 KiB)
    t.assert_held_under(MAX_STALL_MS)
    assert len(read_back_flat(kafka_broker.bootstrap, topic, 1, 3001)) == 3001


def test_first_sends_do_not_hold_the_loop(kafka_broker, loop_kind):
    """The producer made on the running loop, its first send to a topic the broker creates on
    the way, then to one that exists but whose metadata the producer has not asked for yet: the
    connection, the metadata waits, the first batches."""
    created = unique_name("aio-first")
    kafka_broker.create_topic(created, 3)
    auto = unique_name("aio-auto")

    async def main():
        async with Ticker() as t:
            async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap) as p:
                md_auto = await p.send(auto, b"a")
                md = await p.send(created, b"c", key=b"k")
        return t, md_auto, md

    t, md_auto, md = run(loop_kind, main)
    t.assert_held_under(MAX_STALL_MS)
    assert (md_auto.topic, md_auto.offset, md.topic, md.offset) == (auto, 0, created, 0)


def test_first_producer_imports_nothing_on_the_loop(kafka_broker, loop_kind):
    """A fresh interpreter: constructing the first AsyncProducer on the loop, its first send and
    its close import no module (an import there held the loop 60-130 ms)."""
    code = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {TESTS!r})
        from aioloops import run
        from fastkafka.aio import AsyncProducer

        async def main():
            before = set(sys.modules)
            async with AsyncProducer(bootstrap_servers={kafka_broker.bootstrap!r}) as p:
                await p.send({unique_name("aio-imports")!r}, b"x")
            print(sorted(set(sys.modules) - before))

        run({loop_kind!r}, main)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(TESTS))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_flush_and_close_with_records_in_flight_do_not_hold_the_loop(kafka_broker, loop_kind):
    topic = unique_name("aio-close")
    kafka_broker.create_topic(topic, 2)

    async def main():
        p = AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=20)
        await p.partitions_for(topic)
        delivered = []

        def on_delivery(err, md):
            delivered.append(err)

        for i in range(20):
            for j in range(100):
                p.produce(topic, b"f%d" % (i * 100 + j), on_delivery=on_delivery)
            await asyncio.sleep(0)
        async with Ticker() as t_flush:
            assert await p.flush(30) == 0
        for i in range(20):
            for j in range(100):
                p.produce(topic, b"c%d" % (i * 100 + j), on_delivery=on_delivery)
            await asyncio.sleep(0)
        async with Ticker() as t_close:
            await p.close(30)
        return t_flush, t_close, delivered

    t_flush, t_close, delivered = run(loop_kind, main)
    t_flush.assert_held_under(MAX_STALL_MS)
    t_close.assert_held_under(MAX_STALL_MS)
    assert delivered == [None] * 4000
    assert sum(len(v) for v in read_back(kafka_broker.bootstrap, topic, 2, 4000).values()) == 4000


def test_cancelling_the_awaiting_task_does_not_unsend_the_record(kafka_broker, loop_kind):
    topic = unique_name("aio-cancel")
    kafka_broker.create_topic(topic, 1)

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=50) as p:
            task = asyncio.ensure_future(p.send(topic, b"kept"))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return p.metrics()

    m = run(loop_kind, main)
    assert m["aio_records_completed"] == 1 and m["aio_records_pending"] == 0
    assert [x.value for x in read_back_flat(kafka_broker.bootstrap, topic, 1, 1)] == [b"kept"]


def test_errors_at_the_call_and_in_the_future(kafka_broker, loop_kind):
    topic = unique_name("aio-err")
    kafka_broker.create_topic(topic, 2)

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap) as p:
            with pytest.raises(InvalidRecordError, match="value"):
                p.send(topic, 12)
            with pytest.raises(InvalidRecordError):
                p.produce(topic, b"x", on_delivery="not callable")
            with pytest.raises(UnknownPartitionError, match="partition 7"):
                await p.send(topic, b"x", partition=7)
            assert await p.partitions_for(topic) == [0, 1]
        with pytest.raises(ProducerClosedError):
            p.send(topic, b"late")

    run(loop_kind, main)


def test_used_from_another_loop_or_thread_is_refused(kafka_broker, loop_kind):
    topic = unique_name("aio-loops")
    kafka_broker.create_topic(topic, 1)
    errors = []

    async def main():
        p = AsyncProducer(bootstrap_servers=kafka_broker.bootstrap)
        await p.send(topic, b"a")

        def other_thread():
            try:
                p.send(topic, b"b")
            except IllegalStateError as e:
                errors.append(str(e))
            try:
                run(loop_kind, lambda: p.flush())
            except IllegalStateError as e:
                errors.append(str(e))

        th = threading.Thread(target=other_thread)
        th.start()
        while th.is_alive():
            await asyncio.sleep(0.01)
        await p.close()

    run(loop_kind, main)
    assert len(errors) == 2
    assert "no event loop running in this thread" in errors[0] and "fastkafka.Producer" in errors[0]
    assert "another event loop" in errors[1]


def test_loop_closed_with_records_in_flight_logs_them(kafka_broker, loop_kind, caplog):
    topic = unique_name("aio-loopclosed")
    kafka_broker.create_topic(topic, 1)
    held = []

    async def main():
        p = AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=300)
        held.append(p)
        await p.partitions_for(topic)
        for i in range(10):
            p.produce(topic, b"%d" % i)
        # returns, and the loop closes, with the ten records lingering in the producer

    caplog.set_level(logging.WARNING, logger="fastkafka")
    run(loop_kind, main)
    p = held[0]
    assert p._p.flush(10) == 0             # the records still go, through the sync producer
    p._p.close(10)
    assert any("after their event loop was closed" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    assert len(read_back_flat(kafka_broker.bootstrap, topic, 1, 10)) == 10


def test_transactions_as_coroutines_read_committed(kafka_broker, loop_kind):
    topic = unique_name("aio-txn")
    kafka_broker.create_topic(topic, 2)

    async def main():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap,
                                 transactional_id=unique_name("aio-tid")) as p:
            async with Ticker() as t_init:
                await p.init_transactions()
            p.begin_transaction()
            futs = [p.send(topic, b"committed-%d" % i) for i in range(50)]
            async with Ticker() as t_commit:     # flushes the 50 records, then commits
                await p.commit_transaction()
            assert all(f.done() and f.exception() is None for f in futs)
            p.begin_transaction()
            p.produce(topic, b"aborted")
            await p.send_batch(topic, [b"aborted"] * 10)
            await p.abort_transaction()
            assert p.transaction_state == "READY"
        return t_init, t_commit

    t_init, t_commit = run(loop_kind, main)
    t_init.assert_held_under(MAX_STALL_MS)
    t_commit.assert_held_under(MAX_STALL_MS)
    values = read_all(kafka_broker.bootstrap, topic, 2, isolation_level="read_committed")
    assert sorted(values) == sorted(b"committed-%d" % i for i in range(50))
