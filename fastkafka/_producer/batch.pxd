# cython: language_level=3
# path:
#   record:     new_future -> (batch, index) -> ProducerBatch.complete -> _fire (futures, callbacks)
#   send_batch: BatchFuture -> one BatchListener per batch -> _batch_done -> the aggregate
#   asyncio:    _fire -> LoopSink.push_c (I/O thread) -> one call_soon_threadsafe -> drain (loop)

# Contract of fastkafka._producer.batch: one partition's batch and the completion objects (the record
# metadata, the per-record future, the send_batch aggregate future and its per-batch listeners).
# The accumulator cimports these and fills the fields declared here.
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastkafka._wire.records cimport BatchBuilder, BuilderCore


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)


@cython.final
cdef class RecordMetadata:
    cdef readonly str topic
    cdef readonly int32_t partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int32_t serialized_key_size
    cdef readonly int32_t serialized_value_size


# How many records of one batch belong to one send_batch future (the records of a send_batch call
# are appended in runs: one listener per run and batch).
@cython.final
cdef class BatchListener:
    cdef BatchFuture future
    cdef int64_t count


# The fields of a ProducerBatch that code without the GIL reads or writes (the I/O thread's
# GIL-free turn: drain, close, stamp), in one C struct reached through ``&batch.s`` (the pointer is
# taken with the GIL while the batch is known alive). The Python properties of the same names
# (created_ms, attempts, ...) read and write these.
cdef struct BatchState:
    int64_t created_ms
    int64_t drained_ms                        # -1 until drained
    int64_t last_attempt_ms
    int32_t attempts                          # 0 for the first send
    int32_t record_count
    int64_t producer_id                       # -1 until stamped
    int32_t producer_epoch
    int32_t base_sequence
    bint in_retry
    bint full                                 # an append was refused: closed for appends
    bint in_flight                            # drained and not yet landed (QueueState.inflight)
    BuilderCore *bc                           # &builder.c, NULL once the builder is gone


# Closed for appends (ProducerBatch.is_full_c without the GIL): refused an append, or its builder
# is gone, closed or at batch_size.
# thread: io · lock: acc held · gil: any
cdef inline bint bs_full_c(BatchState *s) noexcept nogil:
    return s.full or s.bc == NULL or s.bc.closed or s.bc.len >= s.bc.batch_size


@cython.final
cdef class ProducerBatch:
    cdef readonly str topic
    cdef readonly int32_t partition
    cdef readonly object topic_partition      # cached (topic, partition)
    cdef readonly BatchBuilder builder        # None after deallocate(); set with set_builder()
    cdef BatchState s                         # created_ms, attempts, ... (see BatchState)
    cdef public int64_t reserved              # bytes the builder holds in the buffer pool (it gives them back)
    cdef bint done                            # completed (guarded by done_acquire())
    cdef bint settled                         # done and its callbacks and listeners have run
    cdef unsigned long completer              # the thread running its callbacks (until settled)
    cdef readonly int64_t base_offset
    cdef readonly int64_t log_append_time
    cdef readonly object error
    cdef list thunks                          # FutureRecordMetadata with callbacks, or None
    cdef list listeners                       # BatchListener per send_batch run, or None
    cdef BatchListener last_listener
    cdef object _event                        # threading.Event
    # split (RecordAccumulator.split_and_reenqueue): the pieces that took over the records, in
    # order; a piece's split batch and the index there of its first record
    cdef list children
    cdef ProducerBatch parent
    cdef int32_t first_index
    cdef int32_t children_left

    cpdef bint complete(self, int64_t base_offset, int64_t log_append_time, object error) except -1

    # Nothing more goes in: refused an append, closed, or at batch_size.
    cdef inline bint is_full_c(self) noexcept:
        return bs_full_c(&self.s)


# Give ``b`` the builder ``builder`` (None: drop it); keeps ``b.s.bc`` in step. Every assignment
# of ProducerBatch.builder goes through here.
cdef inline void set_builder(ProducerBatch b, BatchBuilder builder) noexcept:
    b.builder = builder
    b.s.bc = NULL if builder is None else &builder.c



@cython.final
cdef class FutureRecordMetadata:
    cdef readonly ProducerBatch batch
    cdef readonly int32_t index
    cdef int64_t timestamp_ms
    cdef int32_t key_size
    cdef int32_t value_size
    cdef object callback
    cdef list extra_callbacks
    # fastkafka.aio: what the LoopSink (``callback``) resolves on the event loop, an asyncio
    # future or a callable(err, metadata); set by the event loop's thread, read by it in drain.
    cdef object waiter

    cdef RecordMetadata _metadata(self)
    cdef void _fire(self, object error) noexcept


@cython.final
cdef class BatchFuture:
    cdef int64_t _appended
    cdef int64_t _delivered
    cdef int64_t _failed
    cdef bint _sealed
    cdef bint _finished
    cdef readonly object expected     # record count the caller announced (informational)
    cdef object _first_error
    cdef object _event
    cdef list _callbacks

    cdef bint _held                   # seal() only counts until release_seal() (fastkafka.aio)

    cdef void _batch_done(self, int64_t count, object error) noexcept
    # No more records will be added: ``appended`` were; done once that many are (while held,
    # only counts them).
    cdef void seal(self, int64_t appended) noexcept
    cdef bint _check_done_locked(self) noexcept


# The lock guarding completion state (ProducerBatch.done/_event/thunks/listeners, BatchFuture
# counters): a leaf lock, no Python callback runs while it is held.
cdef void done_acquire() noexcept
cdef void done_release() noexcept

# Fill a new ProducerBatch (from ProducerBatch.__new__) for ``topic``/``partition``.
cdef ProducerBatch init_batch(ProducerBatch b, str topic, int32_t partition, BatchBuilder builder,
                              int64_t created_ms)

# The batch holding record ``index[0]`` of ``b`` now (``b`` unless it was split); ``index[0]``
# becomes the record's index there.
cdef ProducerBatch resolve_batch(ProducerBatch b, int32_t *index)

# Per record of ``b`` (done lock held): the index in ``b.listeners`` of the listener counting it,
# -1 for a send()/produce() record; None when that cannot be told.
cdef list record_owners(ProducerBatch b)


# Count one more record in ``batch``; its future, or None when not wanted and without a callback.
# Inline: it runs once per record on the send path.
cdef inline FutureRecordMetadata new_future(ProducerBatch batch, int64_t ts, Py_ssize_t kl,
                                            Py_ssize_t vl, object cb, bint want):
    cdef FutureRecordMetadata f
    if not want and cb is None:
        batch.s.record_count += 1
        return None
    f = FutureRecordMetadata.__new__(FutureRecordMetadata)
    f.batch = batch
    f.index = batch.s.record_count
    batch.s.record_count += 1
    f.timestamp_ms = ts
    f.key_size = <int32_t>kl
    f.value_size = <int32_t>vl
    if cb is not None:
        f.callback = cb
        if batch.thunks is None:
            batch.thunks = [f]
        else:
            batch.thunks.append(f)
    if not want:
        # produce(): the caller never sees this future; only the batch's thunks hold it, and the
        # batch drops them when it completes (which frees it and its callback). Left out of the
        # cyclic garbage collector, which would otherwise count and scan one more object per
        # record while its batch is in flight.
        PyObject_GC_UnTrack(<void *>f)
    return f


# Count one more record of ``future`` (a send_batch) in ``batch``. Inline: once per record.
cdef inline void count_batch_record(ProducerBatch batch, BatchFuture future):
    cdef BatchListener lst = batch.last_listener
    batch.s.record_count += 1
    if lst is None or lst.future is not future:
        lst = BatchListener.__new__(BatchListener)
        lst.future = future
        lst.count = 0
        if batch.listeners is None:
            batch.listeners = [lst]
        else:
            batch.listeners.append(lst)
        batch.last_listener = lst
    lst.count += 1


# Hands completions from the I/O thread to one asyncio event loop (fastkafka.aio). The I/O thread
# appends (a record's future whose callback is the sink, or a (callable, argument) pair); the first
# append since the loop last drained schedules one drain with call_soon_threadsafe, so the loop
# wakes once per drain however many records completed meanwhile. The drain runs on the loop:
# futures resolved, callbacks called, then ``on_drain``.
# fastkafka.aio's send() future: awaitable on an asyncio loop (asyncio.isfuture() is True; the
# methods of asyncio.Future), resolved by the LoopSink's drain, which runs its done-callbacks (the
# awaiting task's wake-up, gather's) right there rather than one loop.call_soon each.
@cython.final
cdef class LoopFuture:
    cdef object _loop
    cdef int _state                    # _PENDING, _FINISHED, _FAILED, _CANCELLED
    cdef object _value                 # the RecordMetadata, the error, or cancel()'s message
    cdef object _tb                    # the error's traceback when it failed
    cdef object _cb0                   # the first done-callback and its context (most have one)
    cdef object _ctx0
    cdef list _more                    # further (callback, context) pairs, or None
    cdef public bint _asyncio_future_blocking
    cdef bint _retrieved               # the error was looked at (else logged when dropped)

    cdef int _settle(self, int state, object value, object tb) except -1
    cdef void _run_callbacks(self, bint now) noexcept
    cdef void _call(self, object cb, object ctx, bint now) noexcept


@cython.final
cdef class LoopSink:
    cdef list _items
    cdef bint _scheduled
    cdef bint _dead                    # the loop is closed: outcomes are logged here instead
    cdef object _loop
    cdef object _call_soon_threadsafe
    cdef object _call_soon             # the loop's call_soon (a drain's rest), or None
    cdef readonly int64_t slices       # drains that left their rest to the loop's next turn
    cdef object _is_closed
    cdef object _drain
    cdef public object on_drain        # callable() run on the loop after each drain, or None
    cdef readonly int64_t wakeups      # call_soon_threadsafe calls made
    cdef readonly int64_t records      # record outcomes handed to the loop
    cdef readonly int64_t calls        # (callable, argument) pairs handed to the loop
    cdef public int64_t pending        # records sent through the sink and not yet drained
    cdef readonly int64_t unawaited_failures   # failed records nobody awaited (logged)

    cdef void push_c(self, object item) noexcept
    cdef void batch_end_c(self) noexcept
    cdef void _drain_items(self, bint sliced) except *
    cdef void _orphans(self) noexcept
