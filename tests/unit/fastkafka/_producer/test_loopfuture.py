"""LoopFuture (fastkafka._producer.batch): the future ``AsyncProducer.send()`` returns.

No broker: records are appended to a RecordAccumulator with a LoopSink as their callback, each
given a LoopFuture as its waiter (``testing.set_waiter``, as ``send()`` does), and their batches
are completed by hand (``ProducerBatch.complete``). On a real event loop (asyncio's and uvloop's)
the sink's ``call_soon_threadsafe`` then schedules the drain that resolves the futures.

What is checked: the asyncio.Future interface (await, gather, wait, wait_for, shield,
as_completed, run_until_complete, cancel, callbacks, contextvars, errors, repr); that the drain
runs done-callbacks at once when it runs as the loop's own callback and through ``call_soon``
inside a task; that failures nobody awaits or retrieves are logged."""
from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import threading
import time

import pytest

from aioloops import LOOPS, new_loop, run
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import LoopFuture, LoopSink, RecordMetadata
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer.testing import set_waiter
from fastkafka.errors import KafkaTimeoutError

pytestmark = pytest.mark.parametrize("kind", LOOPS)

TIMEOUT = 10.0          # bound of each test's coroutine (run())


def _acc():
    return RecordAccumulator(1024, 0, None, 0, 100, 120000, BufferPool(1 << 20, 1024), False)


def _sends(loop, sink, acc, n, topic="t", partition=0, waiter=LoopFuture):
    """``n`` records appended with ``sink`` as their callback, each with a ``waiter(loop)`` as
    send() gives it: (waiters, records, batches)."""
    futs, recs, batches = [], [], []
    for i in range(n):
        f = acc.append(topic, partition, 0, None, b"v%d" % i, None, sink, 0, 0)
        w = waiter(loop) if waiter is LoopFuture else loop.create_future()
        set_waiter(f, sink, w)
        futs.append(w)
        recs.append(f)
        if not batches or batches[-1] is not f.batch:
            batches.append(f.batch)
    return futs, recs, batches


async def _await(fut):
    return await fut


async def _until(cond, turns=200):
    """Let the loop turn until ``cond()`` (bounded)."""
    for _ in range(turns):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"not reached within {turns} loop turns")


def _handler_errors(loop):
    """Record what reaches the loop's exception handler."""
    errors = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    return errors


# ---------------------------------------------------------------------------------------------
# 1. await
# ---------------------------------------------------------------------------------------------

def test_await_gives_the_record_metadata_or_raises_the_batch_error(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        ok, ok_recs, ok_batches = _sends(loop, sink, acc, 3, topic="ta", partition=2)
        bad, _, bad_batches = _sends(loop, sink, acc, 2, topic="tb", partition=1)
        assert asyncio.isfuture(ok[0]) and not isinstance(ok[0], asyncio.Future)
        assert ok[0].get_loop() is loop
        tasks = [loop.create_task(_await(f)) for f in ok + bad]
        await asyncio.sleep(0)
        assert not any(t.done() for t in tasks)      # they wait on their futures
        err = KafkaTimeoutError("expired in the accumulator")
        ok_batches[0].complete(500, -1, None)
        bad_batches[0].complete(-1, -1, err)
        done, pending = await asyncio.wait(tasks, timeout=TIMEOUT)
        assert not pending
        for t, rec in zip(tasks[:3], ok_recs):
            md = t.result()
            assert isinstance(md, RecordMetadata)
            assert (md.topic, md.partition, md.offset) == ("ta", 2, 500 + rec.index)
        for t in tasks[3:]:
            assert t.exception() is err
        assert sink.records == 5 and sink.pending == 0 and sink.unawaited_failures == 0

    run(kind, body, TIMEOUT)


def test_awaiting_failed_futures_of_one_batch_does_not_grow_its_error_traceback(kind):
    """The records of a failed batch share its error: each await raises that one object, and
    must not chain its traceback onto those of the earlier awaits (asyncio.Future restores the
    traceback it was given on each raise): else the error keeps every awaiting coroutine's frame
    alive and each task's traceback shows all the others'."""
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 20)
        assert len(batches) == 1
        err = KafkaTimeoutError("expired")
        seen = []

        async def waiter(fut):
            try:
                await fut
            except KafkaTimeoutError as e:
                frames, tb = 0, e.__traceback__
                while tb is not None:
                    frames += tb.tb_frame.f_code is waiter.__code__
                    tb = tb.tb_next
                seen.append((e is err, frames))

        tasks = [loop.create_task(waiter(f)) for f in futs]
        await asyncio.sleep(0)
        batches[0].complete(-1, -1, err)
        await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
        assert seen == [(True, 1)] * 20

    run(kind, body, TIMEOUT)


def test_awaiting_a_done_future_does_not_yield_to_the_loop(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, recs, batches = _sends(loop, sink, acc, 1)
        batches[0].complete(40, -1, None)
        await _until(futs[0].done)
        md = futs[0].result()
        turns = []
        loop.call_soon(turns.append, "loop turn")
        assert await futs[0] is md
        assert turns == []                         # no trip through the loop
        # driven by hand: the first send() already finishes the coroutine
        coro = _await(futs[0])
        with pytest.raises(StopIteration) as stop:
            coro.send(None)
        assert stop.value.value is md

    run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 2. gather, and where the done-callbacks run
# ---------------------------------------------------------------------------------------------

def test_gather_of_1000_records_over_several_batches(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, recs, batches = _sends(loop, sink, acc, 1000)
        assert len(batches) > 5
        bases, base = [], 0
        for b in batches:
            bases.append(base)
            base += sum(1 for r in recs if r.batch is b)
        gathered = asyncio.gather(*futs)
        # completed from another thread, as the producer's I/O thread does
        t = threading.Thread(target=lambda: [b.complete(o, -1, None) for b, o in zip(batches, bases)])
        t.start()
        results = await asyncio.wait_for(gathered, TIMEOUT)
        t.join()
        assert len(results) == 1000
        assert [md.offset for md in results] == list(range(1000))
        assert all(md.topic == "t" and md.partition == 0 for md in results)
        # woken per drain, not per record: a batch's records are handed over one by one, and the
        # loop may drain between two of them when the GIL changes hands, so not one per batch
        assert sink.records == 1000 and sink.wakeups <= 100, sink.wakeups

    run(kind, body, TIMEOUT)


def test_done_callbacks_run_inside_the_drain_not_through_call_soon(kind):
    """The drain, run as a plain loop callback, has run every LoopFuture's callbacks when it
    returns; an asyncio.Future resolved in the same drain has only scheduled its own."""
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, recs, batches = _sends(loop, sink, acc, 4)
        afuts, _, abatches = _sends(loop, sink, acc, 1, partition=1, waiter=asyncio.Future)
        seen = []
        for lf in futs:
            lf.add_done_callback(lambda f: seen.append(("loopfuture", f.result().offset)))
        afuts[0].add_done_callback(lambda f: seen.append(("asyncio", f.result().offset)))

        async def waiter():
            md = await futs[0]
            seen.append(("task resumed", md.offset))

        task = loop.create_task(waiter())
        await asyncio.sleep(0)
        at_return = loop.create_future()

        def plain():
            assert asyncio.current_task(loop) is None
            for b in batches + abatches:
                b.complete(10, -1, None)
            sink.drain()
            at_return.set_result(list(seen))

        loop.call_soon(plain)
        # the waiting task's step ran in the drain too (its wake-up is a done-callback)
        assert await asyncio.wait_for(at_return, TIMEOUT) == [
            ("loopfuture", 10 + recs[0].index), ("task resumed", 10 + recs[0].index)] + [
            ("loopfuture", 10 + r.index) for r in recs[1:]]
        await _until(lambda: len(seen) == 6)
        assert seen[-1] == ("asyncio", 10) and task.done()
        assert errors == []

    run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 3. drain inside a task
# ---------------------------------------------------------------------------------------------

def test_drain_inside_a_task_defers_callbacks_and_awaiting_tasks_wake(kind):
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, recs, batches = _sends(loop, sink, acc, 5)
        waiters = [loop.create_task(_await(f)) for f in futs[:4]]
        flag = []
        futs[4].add_done_callback(lambda f: flag.append(f.result().offset))
        await asyncio.sleep(0)
        for b in batches:
            b.complete(0, -1, None)
        sink.drain()                                # here, in this task (as close() does)
        assert all(f.done() for f in futs)
        assert flag == [] and not any(t.done() for t in waiters)   # deferred to call_soon
        done, pending = await asyncio.wait(waiters, timeout=TIMEOUT)
        assert not pending
        assert [t.result().offset for t in waiters] == [r.index for r in recs[:4]]
        await _until(lambda: flag)
        assert flag == [recs[4].index]
        assert errors == []

    run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 4. cancel
# ---------------------------------------------------------------------------------------------

def test_cancelled_waiter_later_success_is_quiet_and_failure_is_logged(kind, caplog):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        ok, _, ok_batches = _sends(loop, sink, acc, 1, partition=0)
        bad, _, bad_batches = _sends(loop, sink, acc, 1, partition=1)
        tasks = [loop.create_task(_await(ok[0])), loop.create_task(_await(bad[0]))]
        await asyncio.sleep(0)
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks, timeout=TIMEOUT)
        assert all(t.cancelled() for t in tasks)
        assert ok[0].cancelled() and bad[0].cancelled()
        ok_batches[0].complete(0, -1, None)
        bad_batches[0].complete(-1, -1, KafkaTimeoutError("expired late"))
        await _until(lambda: sink.records == 2)
        assert ok[0].cancelled() and bad[0].cancelled()      # unchanged by the outcome
        assert sink.unawaited_failures == 1

    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        run(kind, body, TIMEOUT)
    msgs = [r.getMessage() for r in caplog.records if r.name.startswith("fastkafka")]
    assert len(msgs) == 1, msgs
    assert "failed and nobody awaits it" in msgs[0] and "expired late" in msgs[0]
    assert "t[1]" in msgs[0]


def test_cancel_result_and_message(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 3)
        plain, with_msg, done = futs
        assert plain.cancel() is True and plain.cancelled() and plain.done()
        assert plain.cancel() is False                      # once is enough
        with pytest.raises(asyncio.CancelledError):
            plain.result()
        with pytest.raises(asyncio.CancelledError):
            plain.exception()
        assert with_msg.cancel("stop waiting") is True
        with pytest.raises(asyncio.CancelledError) as e:
            with_msg.result()
        assert e.value.args == ("stop waiting",)
        batches[0].complete(0, -1, None)
        await _until(done.done)
        assert done.cancel() is False and not done.cancelled()
        assert done.result().offset == 2

    run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 5. asyncio's combinators
# ---------------------------------------------------------------------------------------------

def test_wait_for_timeout_cancels_the_future(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 1)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(futs[0], 0.05)
        assert futs[0].cancelled()
        batches[0].complete(0, -1, None)            # the record lands all the same: quietly
        await _until(lambda: sink.records == 1)
        assert futs[0].cancelled() and sink.unawaited_failures == 0

    run(kind, body, TIMEOUT)


def test_wait_and_as_completed(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        a, _, ab = _sends(loop, sink, acc, 1, partition=0)
        b, _, bb = _sends(loop, sink, acc, 1, partition=1)
        c, _, cb = _sends(loop, sink, acc, 1, partition=2)
        waiting = loop.create_task(asyncio.wait([a[0], b[0]], return_when=asyncio.FIRST_COMPLETED))
        await asyncio.sleep(0)
        bb[0].complete(20, -1, None)
        done, pending = await asyncio.wait_for(waiting, TIMEOUT)
        assert done == {b[0]} and pending == {a[0]}
        order = asyncio.as_completed([a[0], c[0]], timeout=TIMEOUT)
        cb[0].complete(30, -1, None)
        assert (await next(order)).offset == 30
        ab[0].complete(10, -1, None)
        assert (await next(order)).offset == 10

    run(kind, body, TIMEOUT)


def test_shield_cancelling_the_outer_leaves_the_future_pending(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 1)
        outer = asyncio.shield(futs[0])
        outer.cancel()
        await asyncio.sleep(0)
        assert outer.cancelled() and not futs[0].done()
        batches[0].complete(5, -1, None)
        await _until(futs[0].done)
        assert futs[0].result().offset == 5

    run(kind, body, TIMEOUT)


def test_run_until_complete_takes_the_future(kind):
    loop = new_loop(kind)
    try:
        sink, acc = LoopSink(loop), _acc()
        ok, recs, ok_batches = _sends(loop, sink, acc, 2, partition=0)
        bad, _, bad_batches = _sends(loop, sink, acc, 1, partition=1)
        loop.call_later(TIMEOUT, loop.stop)     # (bounded: a future never resolved fails the test)
        loop.call_soon(ok_batches[0].complete, 7, -1, None)
        md = loop.run_until_complete(ok[1])
        assert md.offset == 7 + recs[1].index and ok[0].done()
        err = KafkaTimeoutError("expired")
        loop.call_soon(bad_batches[0].complete, -1, -1, err)
        with pytest.raises(KafkaTimeoutError) as e:
            loop.run_until_complete(bad[0])
        assert e.value is err
    finally:
        loop.close()


# ---------------------------------------------------------------------------------------------
# 5b. gather with a cancelled future (gather reads asyncio.Future's private cancel members)
# ---------------------------------------------------------------------------------------------

def test_gather_fails_with_cancelled_error_when_one_future_is_cancelled(kind):
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 2)
        gathered = asyncio.gather(*futs)
        futs[1].cancel()
        done, _ = await asyncio.wait([gathered], timeout=0.5)
        batches[0].complete(0, -1, None)
        assert gathered in done, f"gather never completed; exception handler got {errors!r}"
        with pytest.raises(asyncio.CancelledError):
            gathered.result()
        assert errors == []

    run(kind, body, TIMEOUT)


def test_gather_return_exceptions_with_a_cancelled_future(kind):
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 2)
        gathered = asyncio.gather(*futs, return_exceptions=True)
        futs[1].cancel("no longer wanted")
        batches[0].complete(0, -1, None)
        done, _ = await asyncio.wait([gathered], timeout=0.5)
        assert gathered in done, f"gather never completed; exception handler got {errors!r}"
        md, cancelled = gathered.result()
        assert md.offset == 0
        assert isinstance(cancelled, asyncio.CancelledError)
        assert cancelled.args == ("no longer wanted",)
        assert errors == []

    run(kind, body, TIMEOUT)


def test_cancelling_a_task_awaiting_gather_of_futures(kind):
    """What an application does on shutdown: cancel the task that awaits gather(*sends)."""
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 3)

        async def send_all():
            return await asyncio.gather(*futs)

        task = loop.create_task(send_all())
        await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=0.5)
        batches[0].complete(0, -1, None)
        assert task in done, f"the task never finished; exception handler got {errors!r}"
        assert task.cancelled() and all(f.cancelled() for f in futs)
        assert errors == []

    run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 6. contextvars
# ---------------------------------------------------------------------------------------------

VAR = contextvars.ContextVar("VAR", default="unset")


def test_contextvars_of_awaiting_tasks_and_done_callbacks(kind):
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, recs, batches = _sends(loop, sink, acc, 2)

        async def waiter(fut):
            VAR.set("task's own")
            md = await fut
            return VAR.get(), md.offset

        task = loop.create_task(waiter(futs[0]))
        await asyncio.sleep(0)
        seen = []
        explicit = contextvars.copy_context()
        explicit.run(VAR.set, "explicit")

        def leaky(f):
            seen.append(("leaky", VAR.get()))
            VAR.set("leaked")                       # stays in this callback's context

        VAR.set("at add")
        futs[1].add_done_callback(leaky)
        futs[1].add_done_callback(lambda f: seen.append(("copied", VAR.get())))
        VAR.set("changed after add")
        futs[1].add_done_callback(lambda f: seen.append(("given", VAR.get())), context=explicit)
        in_drain = loop.create_future()

        def plain():
            VAR.set("drain's")
            for b in batches:
                b.complete(0, -1, None)
            sink.drain()
            in_drain.set_result((list(seen), VAR.get()))

        loop.call_soon(plain)
        seen_at_return, var_after_drain = await asyncio.wait_for(in_drain, TIMEOUT)
        assert seen_at_return == [("leaky", "at add"), ("copied", "at add"), ("given", "explicit")]
        assert var_after_drain == "drain's"
        assert await asyncio.wait_for(task, TIMEOUT) == ("task's own", recs[0].index)
        assert VAR.get() == "changed after add"
        assert explicit[VAR] == "explicit"
        assert errors == []

    run(kind, body, TIMEOUT)


def test_callback_whose_context_is_the_drains_own_still_runs_in_it(kind):
    """A callback added with the very context the drain runs in cannot enter it again: it still
    runs (on the loop's next turn), in that context."""
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 1)
        ctx = contextvars.copy_context()
        ctx.run(VAR.set, "shared")
        seen = []
        futs[0].add_done_callback(lambda f: seen.append(VAR.get()), context=ctx)

        def plain():
            batches[0].complete(0, -1, None)
            sink.drain()

        loop.call_soon(plain, context=ctx)
        await _until(lambda: seen)
        assert seen == ["shared"] and errors == []

    run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 7. raising callbacks
# ---------------------------------------------------------------------------------------------

def test_raising_callback_goes_to_the_exception_handler_and_the_rest_run(kind):
    async def body():
        loop = asyncio.get_running_loop()
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 2)
        ran = []
        boom = ValueError("callback bug")

        def raiser(f):
            ran.append("raiser")
            raise boom

        futs[0].add_done_callback(raiser)
        futs[0].add_done_callback(lambda f: ran.append("same future"))
        futs[1].add_done_callback(lambda f: ran.append("later future"))
        returned = loop.create_future()

        def plain():
            batches[0].complete(0, -1, None)
            sink.drain()
            returned.set_result(list(ran))

        loop.call_soon(plain)
        assert await asyncio.wait_for(returned, TIMEOUT) == ["raiser", "same future", "later future"]
        assert len(errors) == 1
        assert errors[0]["exception"] is boom and errors[0]["future"] is futs[0]

    run(kind, body, TIMEOUT)


def test_keyboard_interrupt_in_a_callback_is_raised_by_the_loop_next_turn(kind):
    loop = new_loop(kind)
    try:
        errors = _handler_errors(loop)
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 2)
        ran = []

        def interrupt(f):
            raise KeyboardInterrupt

        futs[0].add_done_callback(interrupt)
        futs[0].add_done_callback(lambda f: ran.append("same future"))
        futs[1].add_done_callback(lambda f: ran.append("later future"))
        at_return = []

        def plain():
            batches[0].complete(0, -1, None)
            sink.drain()                              # does not raise here ...
            at_return.append(list(ran))

        loop.call_soon(plain)
        never = loop.create_future()
        loop.call_later(TIMEOUT, never.set_result, None)     # (bounded, should it not raise)
        with pytest.raises(KeyboardInterrupt):        # ... but from the loop's next turn
            loop.run_until_complete(never)
        assert at_return == [["same future", "later future"]]
        assert all(f.done() for f in futs) and errors == []
    finally:
        loop.close()


# ---------------------------------------------------------------------------------------------
# 8. the rest of asyncio.Future's interface
# ---------------------------------------------------------------------------------------------

def test_remove_done_callback_returns_the_count_removed(kind):
    async def body():
        loop = asyncio.get_running_loop()
        ran = []

        def a(f):
            ran.append("a")

        def b(f):
            ran.append("b")

        def c(f):
            ran.append("c")

        fut = LoopFuture(loop)
        for cb in (a, b, a, c, a):
            fut.add_done_callback(cb)
        assert fut.remove_done_callback(a) == 3
        assert fut.remove_done_callback(a) == 0
        assert fut.remove_done_callback(lambda f: None) == 0
        fut.set_result(1)
        await _until(lambda: len(ran) == 2)
        await asyncio.sleep(0)
        assert ran == ["b", "c"]
        # removing the first one of two keeps the second
        other = LoopFuture(loop)
        other.add_done_callback(a)
        other.add_done_callback(b)
        assert other.remove_done_callback(a) == 1
        other.set_result(2)
        await _until(lambda: len(ran) == 3)
        assert ran == ["b", "c", "b"]
        assert other.remove_done_callback(b) == 0          # done: nothing left to remove

    run(kind, body, TIMEOUT)


def test_callback_added_after_done_runs_on_the_next_turn(kind):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 1)
        batches[0].complete(0, -1, None)
        await _until(futs[0].done)
        ran = []
        futs[0].add_done_callback(ran.append)
        assert ran == []
        await asyncio.sleep(0)
        assert ran == [futs[0]]

    run(kind, body, TIMEOUT)


def test_completion_by_hand_and_invalid_states(kind):
    async def body():
        loop = asyncio.get_running_loop()
        fut = LoopFuture(loop)
        assert repr(fut) == "<LoopFuture pending>"
        with pytest.raises(asyncio.InvalidStateError):
            fut.exception()
        with pytest.raises(asyncio.InvalidStateError):
            fut.result()
        with pytest.raises(TypeError):
            fut.set_exception(StopIteration())
        assert not fut.done()
        ran = []
        fut.add_done_callback(ran.append)
        fut.set_result("value")
        assert ran == []                              # set_result goes through call_soon
        await asyncio.sleep(0)
        assert ran == [fut] and fut.result() == "value" and fut.exception() is None
        assert repr(fut) == "<LoopFuture finished result='value'>"
        with pytest.raises(asyncio.InvalidStateError):
            fut.set_result("again")
        with pytest.raises(asyncio.InvalidStateError):
            fut.set_exception(ValueError("again"))

        failed = LoopFuture(loop)
        failed.set_exception(KafkaTimeoutError)       # a class: instantiated
        assert isinstance(failed.exception(), KafkaTimeoutError)
        assert repr(failed).startswith("<LoopFuture finished exception=KafkaTimeoutError(")
        with pytest.raises(asyncio.InvalidStateError):
            failed.set_result(1)

        cancelled = LoopFuture(loop)
        cancelled.cancel()
        assert repr(cancelled) == "<LoopFuture cancelled>"
        with pytest.raises(asyncio.InvalidStateError):
            cancelled.set_exception(ValueError())

    run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 9. a failure nobody retrieved
# ---------------------------------------------------------------------------------------------

def _never_retrieved(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("fastkafka") and r.levelno == logging.WARNING
            and "never retrieved" in r.getMessage()]


def test_unretrieved_failure_is_logged_when_the_future_is_dropped(kind, caplog):
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 4)
        batches[0].complete(-1, -1, KafkaTimeoutError("lost record"))
        await _until(lambda: sink.records == 4)
        unread, read_exc, read_result, awaited = futs
        futs.clear()
        assert read_exc.exception() is not None
        with pytest.raises(KafkaTimeoutError):
            read_result.result()
        with pytest.raises(KafkaTimeoutError):
            await awaited
        del read_exc, read_result, awaited
        gc.collect()
        assert _never_retrieved(caplog) == []        # those were looked at
        del unread
        gc.collect()
        logged = _never_retrieved(caplog)
        assert len(logged) == 1 and "lost record" in logged[0]

    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        run(kind, body, TIMEOUT)


def test_every_dropped_unretrieved_failure_is_logged(kind, caplog):
    """Futures are made and dropped all the time: each failed one nobody looked at is logged,
    the fifth as the first (whether its memory is new or reused)."""
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        for i in range(5):
            futs, _, batches = _sends(loop, sink, acc, 1, partition=i)
            batches[0].complete(-1, -1, KafkaTimeoutError(f"lost record {i}"))
            await _until(futs[0].done)
            del futs
            by_hand = LoopFuture(loop)
            by_hand.set_exception(ValueError(f"set by hand {i}"))
            del by_hand
        gc.collect()
        logged = _never_retrieved(caplog)
        for i in range(5):
            assert sum(f"lost record {i}'" in m for m in logged) == 1, logged
            assert sum(f"set by hand {i}'" in m for m in logged) == 1, logged
        assert len(logged) == 10, logged

    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        run(kind, body, TIMEOUT)


# ---------------------------------------------------------------------------------------------
# 10. the loop closed before the records completed
# ---------------------------------------------------------------------------------------------

def test_after_the_loop_closed_outcomes_are_logged_and_futures_stay_pending(kind, caplog):
    loop = new_loop(kind)
    sink, acc = LoopSink(loop), _acc()
    ok, _, ok_batches = _sends(loop, sink, acc, 3, partition=0)
    bad, _, bad_batches = _sends(loop, sink, acc, 2, partition=1)
    loop.close()
    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        ok_batches[0].complete(0, -1, None)
        bad_batches[0].complete(-1, -1, KafkaTimeoutError("expired"))
        assert not any(f.done() for f in ok + bad)  # nobody could await them any more
        del ok, bad
        gc.collect()
    msgs = [r.getMessage() for r in caplog.records if r.name.startswith("fastkafka")]
    assert any("3 record(s) delivered after their event loop was closed" in m for m in msgs), msgs
    assert any("2 record(s) failed after their event loop was closed" in m and "expired" in m
               for m in msgs), msgs
    assert not any("never retrieved" in m for m in msgs), msgs
    assert len(msgs) == 2, msgs
    assert sink.unawaited_failures == 2 and sink.records == 0


def test_a_long_drain_leaves_its_rest_to_the_loops_next_turn(kind):
    """A drain whose callbacks take more than its slice (2 ms) stops there and lets the loop run
    what is ready (here a callback scheduled by the first done-callback) before the rest; every
    future is still resolved once, in order, and ``slices`` counts the interruptions."""
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 60, partition=3)
        order = []

        def slow(fut, i):
            order.append(i)
            if i == 0:
                loop.call_soon(order.append, "other")
            t = time.perf_counter()
            while time.perf_counter() - t < 0.0005:     # 0.5 ms of work per callback
                pass

        for i, f in enumerate(futs):
            f.add_done_callback(lambda fut, i=i: slow(fut, i))
        for b in batches:
            b.complete(0, -1, None)
        await asyncio.wait_for(asyncio.gather(*futs), TIMEOUT)
        await _until(lambda: len(order) == 61)
        records = [x for x in order if x != "other"]
        assert records == list(range(60))
        # the loop ran the other callback before the drain was over
        assert 0 < order.index("other") < 60, order
        assert sink.slices >= 1 and sink.records == 60

    run(kind, body, TIMEOUT)


def test_drain_called_directly_is_not_sliced(kind):
    """``drain()`` called by the code that needs every outcome now (close(), the confluent-kafka
    layer's poll()) resolves everything in one go, however long it takes."""
    async def body():
        loop = asyncio.get_running_loop()
        sink, acc = LoopSink(loop), _acc()
        futs, _, batches = _sends(loop, sink, acc, 30, partition=4)
        ran = []

        def slow(fut):
            ran.append(fut)
            time.sleep(0.0005)

        for f in futs:
            f.add_done_callback(slow)
        for b in batches:
            b.complete(0, -1, None)
        sink.drain()            # in a task: the callbacks go through call_soon, all of them
        assert all(f.done() for f in futs) and sink.slices == 0
        await _until(lambda: len(ran) == 30)
        assert len(ran) == 30

    run(kind, body, TIMEOUT)
