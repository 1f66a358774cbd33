# The LoopSink of fastkafka._producer.batch (included there; its declaration is in batch.pxd):
# how fastkafka.aio's completions reach an event loop, one call_soon_threadsafe per drain.

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
        self._call_soon_threadsafe = loop.call_soon_threadsafe
        self._is_closed = loop.is_closed
        self._drain = self.drain

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
        cdef list items
        cdef FutureRecordMetadata f
        cdef ProducerBatch b
        cdef int32_t i
        self._scheduled = False
        items = self._items
        self._items = []
        for item in items:
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
