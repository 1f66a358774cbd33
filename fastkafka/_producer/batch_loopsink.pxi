# The LoopSink of fastkafka._producer.batch (included there; its declaration is in batch.pxd):
# how fastkafka.aio's completions reach an event loop, one call_soon_threadsafe per drain.

from cpython.contextvars cimport PyContext_CopyCurrent, PyContext_Enter, PyContext_Exit
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from asyncio import CancelledError as _CancelledError, InvalidStateError as _InvalidStateError
from asyncio import current_task as _current_task

cdef enum:
    _PENDING = 0
    _FINISHED = 1
    _FAILED = 2
    _CANCELLED = 3

cdef tuple _STATE_NAMES = ("pending", "finished", "finished", "cancelled")

# The longest one drain of a LoopSink runs on the loop before it leaves the rest to the loop's
# next turn (ns): what a batch of completions (and the tasks they wake) may hold the loop.
cdef int64_t DRAIN_SLICE_NS = 2_000_000


# thread: any · lock: none · gil: any
cdef inline int64_t _mono_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


# ---------------------------------------------------------------------------------------------
# The future of fastkafka.aio's send()
# ---------------------------------------------------------------------------------------------

@cython.final
cdef class LoopFuture:
    """The future ``AsyncProducer.send()`` returns: ``await`` it for the record's
    :class:`RecordMetadata` (or its error).

    It has :class:`asyncio.Future`'s methods (``done``, ``result``, ``exception``, ``cancel``,
    ``cancelled``, ``add_done_callback``, ``remove_done_callback``, ``get_loop``, ``set_result``,
    ``set_exception``) and ``asyncio.isfuture()`` is true for it, so ``await``,
    ``asyncio.gather``, ``wait``, ``wait_for``, ``shield``, ``as_completed`` and
    ``loop.run_until_complete`` take it as they take a future; it is not an instance of
    :class:`asyncio.Future`. What differs is how it completes: the producer's drain on the loop
    (:class:`LoopSink`) runs its done-callbacks at once, in the drain, where an
    :class:`asyncio.Future` would hand each to ``loop.call_soon`` (a handle and a trip through
    the loop's ready queue per record). A callback added once it is done, and the callbacks of
    one completed by ``cancel()``, ``set_result()`` or ``set_exception()``, go through
    ``call_soon`` as an asyncio future's do. A failure nobody looked at is logged when the
    future is dropped (as asyncio does for its futures)."""

    def __init__(self, loop):
        self._loop = loop

    # -- completion (the drain, or the asyncio methods below) ----------------------------------
    cdef int _settle(self, int state, object value, object tb) except -1:
        """Its outcome: ``value`` (a result, an error, cancel()'s message); ``tb`` the error's
        traceback as it failed, raised with it each time (a batch's records share one error)."""
        self._state = state
        self._value = value
        self._tb = tb
        return 0

    cdef void _run_callbacks(self, bint now) noexcept:
        """Run the done-callbacks (``now``: here, each in its context, as the loop's handles
        do; else one ``loop.call_soon`` each). A callback that raises goes to the loop's
        exception handler; KeyboardInterrupt and SystemExit are re-raised from the loop's next
        turn (the callbacks after it still run)."""
        cdef list more = self._more
        cb, ctx = self._cb0, self._ctx0
        self._cb0 = self._ctx0 = self._more = None
        if cb is None:
            return
        self._call(cb, ctx, now)
        if more is not None:
            for cb, ctx in more:
                self._call(cb, ctx, now)

    cdef void _call(self, object cb, object ctx, bint now) noexcept:
        if now:
            try:
                PyContext_Enter(ctx)
            except BaseException:       # that context is in use on this thread: by the loop
                now = False
        if not now:
            try:
                self._loop.call_soon(cb, self, context=ctx)
            except BaseException as e:
                _log.error("a done-callback of a send() future could not be scheduled: %r", e)
            return
        try:
            cb(self)
        except (KeyboardInterrupt, SystemExit) as e:
            try:
                self._loop.call_soon(_reraise, e)
            except BaseException:
                pass
        except BaseException as e:
            try:
                self._loop.call_exception_handler({
                    "message": f"Exception in callback {cb!r}", "exception": e, "future": self})
            except BaseException:
                _log.exception("done-callback %r of a send() future raised", cb)
        try:
            PyContext_Exit(ctx)
        except BaseException:
            _log.exception("leaving a done-callback's context failed")

    # -- asyncio.Future's interface ----------------------------------------------------------
    def get_loop(self):
        return self._loop

    def done(self):
        return self._state != _PENDING

    def cancelled(self):
        return self._state == _CANCELLED

    def result(self):
        if self._state == _FINISHED:
            return self._value
        if self._state == _FAILED:
            self._retrieved = True
            # the traceback it had when it failed: one error object is shared by the records of
            # a batch, and each raise would otherwise add the awaiting task's frames to it
            raise self._value.with_traceback(self._tb)
        if self._state == _CANCELLED:
            raise _cancelled_error(self._value)
        raise _InvalidStateError("Result is not ready.")

    def _make_cancelled_error(self):
        """The CancelledError of a cancelled future (asyncio.gather and others ask for it)."""
        return _cancelled_error(self._value if self._state == _CANCELLED else None)

    @property
    def _cancel_message(self):
        return self._value if self._state == _CANCELLED else None

    def exception(self):
        if self._state == _CANCELLED:
            raise _cancelled_error(self._value)
        if self._state == _PENDING:
            raise _InvalidStateError("Exception is not set.")
        if self._state == _FAILED:
            self._retrieved = True
            return self._value
        return None

    def add_done_callback(self, fn, *, context=None):
        if context is None:
            context = PyContext_CopyCurrent()
        if self._state != _PENDING:
            self._loop.call_soon(fn, self, context=context)
        elif self._cb0 is None:
            self._cb0, self._ctx0 = fn, context
        else:
            if self._more is None:
                self._more = []
            self._more.append((fn, context))

    def remove_done_callback(self, fn):
        cdef int removed = 0
        if self._cb0 is not None and self._cb0 == fn:
            removed += 1
            self._cb0 = self._ctx0 = None
        if self._more is not None:
            kept = [(cb, ctx) for cb, ctx in self._more if not cb == fn]
            removed += len(self._more) - len(kept)
            self._more = kept or None
        if self._cb0 is None and self._more is not None:
            (self._cb0, self._ctx0), self._more = self._more[0], (self._more[1:] or None)
        return removed

    def cancel(self, msg=None):
        """Stop awaiting: the future is cancelled (the record is sent all the same; its failure,
        if it fails, is logged, since nobody awaits it)."""
        if self._state != _PENDING:
            return False
        self._settle(_CANCELLED, msg, None)
        self._run_callbacks(False)
        return True

    def set_result(self, result):
        if self._state != _PENDING:
            raise _InvalidStateError(f"invalid state: {_STATE_NAMES[self._state]}")
        self._settle(_FINISHED, result, None)
        self._run_callbacks(False)

    def set_exception(self, exception):
        if self._state != _PENDING:
            raise _InvalidStateError(f"invalid state: {_STATE_NAMES[self._state]}")
        if isinstance(exception, type):
            exception = exception()
        if isinstance(exception, StopIteration):
            raise TypeError("StopIteration interacts badly with generators and cannot be raised "
                            "into a Future")
        self._settle(_FAILED, exception, exception.__traceback__)
        self._run_callbacks(False)

    def __await__(self):
        # A generator: Cython's implement am_send, so the awaiting coroutine takes the result
        # without a StopIteration made per await.
        if self._state == _PENDING:
            self._asyncio_future_blocking = True
            yield self
            if self._state == _PENDING:
                raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    def __repr__(self):
        if self._state == _FINISHED:
            return f"<LoopFuture finished result={self._value!r}>"
        if self._state == _FAILED:
            return f"<LoopFuture finished exception={self._value!r}>"
        return f"<LoopFuture {_STATE_NAMES[self._state]}>"

    def __del__(self):
        if self._state == _FAILED and not self._retrieved:
            try:
                _log.warning("send() future failed and its error was never retrieved: %r",
                             self._value)
            except BaseException:
                pass


def _reraise(exc):
    raise exc


cdef object _cancelled_error(object msg):
    return _CancelledError() if msg is None else _CancelledError(msg)



# ---------------------------------------------------------------------------------------------
# Completions handed to an asyncio event loop (fastkafka.aio)
# ---------------------------------------------------------------------------------------------

@cython.final
cdef class LoopSink:
    """LoopSink(loop): completions handed to one event loop, a drain per wake-up.

    The I/O thread appends what completed (:meth:`push_c`, :meth:`push`); the first append since
    the last drain makes one ``call_soon_threadsafe(drain)``. :meth:`drain` runs on the loop: a
    record's waiter, an asyncio future, gets its RecordMetadata or error (a cancelled one, whose
    task stopped awaiting, only has a failure logged: the record was sent all the same), a
    callable waiter is called ``waiter(err, metadata)``; a pushed ``(fn, arg)`` pair is called
    ``fn(arg)``. Once the loop is closed, outcomes are logged on the pushing thread instead."""

    def __cinit__(self, loop):
        self._items = []
        self._loop = loop
        self._call_soon_threadsafe = loop.call_soon_threadsafe
        self._call_soon = getattr(loop, "call_soon", None)    # (an event loop's: slices)
        self._is_closed = loop.is_closed
        self._drain = self._drain_slice

    # Any thread, with the GIL (the I/O thread's completions, the loop's own calls).
    cdef void push_c(self, object item) noexcept:
        self._items.append(item)
        if self._scheduled or self._dead:
            # A drain scheduled just before the loop closed never runs: looked for now and then.
            if not self._dead and (len(self._items) & 255) == 2:
                try:
                    self._dead = self._is_closed()
                except BaseException:
                    pass
            return
        self._scheduled = True
        self.wakeups += 1
        try:
            self._call_soon_threadsafe(self._drain)
        except RuntimeError:          # the loop is closed
            self._dead = True
        except BaseException:
            _log.exception("handing completions to the event loop failed")

    # Any thread, with the GIL: after a batch pushed its records (ProducerBatch.complete).
    cdef void batch_end_c(self) noexcept:
        if self._dead:
            self._orphans()             # one log line per batch, not per record

    def push(self, fn, arg=None):
        """push(fn, arg=None): call ``fn(arg)`` on the loop at its next drain (any thread)."""
        self.push_c((fn, arg))
        if self._dead:
            self._orphans()

    cdef void _orphans(self) noexcept:
        """The loop is closed: log what completed with nobody left to tell."""
        cdef list items = self._items
        cdef FutureRecordMetadata f
        cdef ProducerBatch b
        cdef int32_t i
        cdef Py_ssize_t failed = 0, n = 0
        first = None
        self._items = []
        for item in items:
            if type(item) is FutureRecordMetadata:
                f = <FutureRecordMetadata>item
                f.waiter = None
                n += 1
                i = f.index
                b = resolve_batch(f.batch, &i)
                if b.error is not None:
                    failed += 1
                    if first is None:
                        first = b.error
        if failed:
            self.unawaited_failures += failed
            try:
                _log.error("%d record(s) failed after their event loop was closed, with nobody to "
                           "tell (first error: %r); close the AsyncProducer before its loop", failed,
                           first)
            except BaseException:
                pass
        elif n:
            try:
                _log.warning("%d record(s) delivered after their event loop was closed; close the "
                             "AsyncProducer before its loop", n)
            except BaseException:
                pass

    def drain(self):
        """drain(): on the loop, resolve everything handed over since the last drain."""
        self._drain_items(False)

    def _drain_slice(self):
        """The drain the I/O thread schedules on the loop: at most DRAIN_SLICE_NS of it per loop
        turn (with its futures' done-callbacks, the awaiting tasks' steps), the rest at the
        loop's next turn, so that other tasks and timers are not held back by a large batch."""
        self._drain_items(self._call_soon is not None)

    cdef void _drain_items(self, bint sliced) except *:
        cdef list items
        cdef FutureRecordMetadata f
        cdef ProducerBatch b
        cdef LoopFuture lf
        cdef int32_t i
        cdef bint now
        cdef Py_ssize_t k = 0, n
        cdef int64_t until = 0
        cdef object last_err = None, last_tb = None
        self._scheduled = False
        items = self._items
        self._items = []
        n = len(items)
        if sliced:
            until = _mono_ns() + DRAIN_SLICE_NS
        # A send() future's done-callbacks run here, in the drain, when it runs as the loop's
        # own callback; in a task (close() drains what the stopped I/O thread left), a task's
        # wake-up cannot run inside another's step: they go through call_soon.
        try:
            now = _current_task(self._loop) is None
        except BaseException:
            now = False
        while k < n:
            item = items[k]
            k += 1
            if sliced and (k & 15) == 0 and k < n and _mono_ns() > until:
                # the rest at the loop's next turn, before what was handed over since
                self._items = items[k - 1:] + self._items
                self._scheduled = True
                self.slices += 1
                try:
                    self._call_soon(self._drain)
                except BaseException:       # the loop is closing: drained here after all
                    self._scheduled = False
                    items, self._items = self._items, []
                    n, k = len(items), 0
                    sliced = False
                    continue
                return          # (on_drain after the last slice: flush() then finds all done)
            if type(item) is not FutureRecordMetadata:
                self.calls += 1
                fn, arg = <tuple>item
                try:
                    fn(arg)
                except BaseException:
                    _log.exception("completion handler %r raised on the event loop", fn)
                continue
            f = <FutureRecordMetadata>item
            self.records += 1
            self.pending -= 1
            w = f.waiter
            f.waiter = None
            i = f.index
            b = resolve_batch(f.batch, &i)
            err = b.error
            if type(w) is LoopFuture:
                lf = <LoopFuture>w
                if lf._state != _PENDING:       # cancelled: nobody awaits it
                    if err is not None:
                        self.unawaited_failures += 1
                        _log.warning("record to %s[%d] failed and nobody awaits it: %r",
                                     b.topic, b.partition, err)
                elif err is None:
                    lf._settle(_FINISHED, f._metadata(), None)
                    lf._run_callbacks(now)
                else:                           # (nobody looks at it: logged when dropped)
                    # The records of a batch share its error: each future keeps the traceback
                    # it had when the batch failed, not what an earlier await added to it.
                    if err is not last_err:
                        last_err, last_tb = err, err.__traceback__
                    lf._settle(_FAILED, err, last_tb)
                    lf._run_callbacks(now)
                continue
            if w is None or not callable(w):
                if w is None or w.done():        # nobody awaits it (fire and forget, cancelled)
                    if err is not None:
                        self.unawaited_failures += 1
                        _log.warning("record to %s[%d] failed and nobody awaits it: %r",
                                     b.topic, b.partition, err)
                elif err is None:
                    w.set_result(f._metadata())
                else:
                    w.set_exception(err)
            else:
                try:
                    w(err, f._metadata())
                except BaseException:
                    _log.exception("delivery callback %r raised", w)
        if self.on_drain is not None:
            try:
                self.on_drain()
            except BaseException:
                _log.exception("event-loop drain hook raised")
