# cython: language_level=3
"""One partition's batch (:class:`ProducerBatch`) and its completion: :class:`RecordMetadata`, the
per-record :class:`FutureRecordMetadata`, the aggregate :class:`BatchFuture` of a ``send_batch``
and the per-batch listeners that feed it.

Completion
----------
One completion per batch: :meth:`ProducerBatch.complete` sets the result, runs the per-record
``on_delivery(err, RecordMetadata)`` callbacks in record order and the aggregate
:class:`BatchFuture` listeners, then wakes waiters (``flush()`` returns after the callbacks). A record's :class:`FutureRecordMetadata` is (batch, index). Callbacks
run on the thread that completes the batch (the sender's I/O thread); one that raises is logged to
the ``fastkafka`` logger and does not stop the others. A batch split by the accumulator hands its
records over to the pieces (``children``); it completes once every piece has.

>>> b = ProducerBatch("t", 0)
>>> b.complete(41, -1, None)
True
>>> b.is_done, b.base_offset
(True, 41)
"""
cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_acquire_lock, PyThread_release_lock,
    NOWAIT_LOCK, WAIT_LOCK, PyThread_get_thread_ident,
)
from libc.stdint cimport int32_t, int64_t

from fastkafka._wire.records cimport BatchBuilder

import logging
import threading

from fastkafka.errors import KafkaTimeoutError, IllegalStateError

_log = logging.getLogger("fastkafka")


# Guards completion state (ProducerBatch.done/_event/thunks/listeners, BatchFuture counters). A leaf
# lock: nothing else is acquired and no Python callback runs while it is held.
cdef PyThread_type_lock _done_lock = PyThread_allocate_lock()


cdef void done_acquire() noexcept:
    if not PyThread_acquire_lock(_done_lock, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(_done_lock, WAIT_LOCK)


cdef void done_release() noexcept:
    PyThread_release_lock(_done_lock)


# Live-resource counter (GIL held): ProducerBatch objects alive. See batch_counters().
cdef int64_t _live_batches = 0


def batch_counters():
    """batch_counters() -> dict: ``producer_batches`` (ProducerBatch objects alive in the process)
    and ``io_threads`` (producer I/O threads registered with :func:`register_io_thread`).

    >>> sorted(batch_counters())
    ['io_threads', 'producer_batches']
    """
    return {"producer_batches": _live_batches, "io_threads": len(_io_threads)}


# ---------------------------------------------------------------------------------------------
# Waiting on the I/O thread
# ---------------------------------------------------------------------------------------------

# Idents of the producers' I/O threads: waiting there for a delivery would deadlock, since that
# thread is the one that completes deliveries (a delivery callback calling future.get()).
_io_threads = set()


def register_io_thread(ident):
    """register_io_thread(ident): ``ident`` (threading.get_ident()) is a producer's I/O thread,
    where waiting for a delivery is refused (IllegalStateError) since it would wait for itself."""
    _io_threads.add(ident)


def unregister_io_thread(ident):
    """unregister_io_thread(ident): that I/O thread ended."""
    _io_threads.discard(ident)


cdef inline int _refuse_wait_on_io_thread(str what) except -1:
    if _io_threads and threading.get_ident() in _io_threads:
        raise IllegalStateError(
            f"cannot {what} on the producer's I/O thread (in a delivery callback): that thread "
            f"completes deliveries, so it would wait for itself. Use on_delivery/add_callback, or "
            f"wait from an application thread")
    return 0


# ---------------------------------------------------------------------------------------------
# RecordMetadata
# ---------------------------------------------------------------------------------------------

@cython.final
@cython.no_gc              # holds a str and numbers: never part of a reference cycle
@cython.freelist(256)      # one per delivered record
cdef class RecordMetadata:
    """Where a record landed: ``topic, partition, offset, timestamp, serialized_key_size,
    serialized_value_size``. ``offset`` is -1 when unknown (acks=0 or failed); ``timestamp`` is the
    broker's log-append time when the topic uses it, else the record's own timestamp; sizes are -1
    for a null key/value."""

    def __init__(self, str topic, int32_t partition, int64_t offset, int64_t timestamp,
                 int32_t serialized_key_size=-1, int32_t serialized_value_size=-1):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size

    def __reduce__(self):
        return (RecordMetadata, (self.topic, self.partition, self.offset, self.timestamp,
                                 self.serialized_key_size, self.serialized_value_size))

    def _astuple(self):
        return (self.topic, self.partition, self.offset, self.timestamp,
                self.serialized_key_size, self.serialized_value_size)

    def __eq__(self, other):
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        return self._astuple() == (<RecordMetadata>other)._astuple()

    def __hash__(self):
        return hash(self._astuple())

    def __getattr__(self, name):
        # only for names the class does not have: confluent-kafka's Message methods get a pointer
        if name in _CONFLUENT_MESSAGE:
            raise AttributeError(
                f"'RecordMetadata' object has no attribute {name!r}: a delivery callback here gets "
                f"(err, RecordMetadata), whose topic, partition, offset and timestamp are "
                f"attributes; {_CONFLUENT_MESSAGE[name]} (fastkafka.compat.confluent.Producer passes "
                f"confluent-kafka's message objects)")
        raise AttributeError(f"'RecordMetadata' object has no attribute {name!r}")

    def __await__(self):
        # aiokafka's idiom on fastkafka.aio.AsyncProducer (``fut = await p.send(...)``, then ``await
        # fut`` or ``gather(*futs)``): the first await gave this metadata; say so, not asyncio's
        # "an awaitable is required" once every record has waited for its delivery in turn
        raise TypeError(_AWAITED)

    def __repr__(self):
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, "
                f"serialized_key_size={self.serialized_key_size}, "
                f"serialized_value_size={self.serialized_value_size})")


_AWAITED = (
    "a RecordMetadata is not awaitable: it is the outcome of a send that was awaited already. "
    "With fastkafka.aio.AsyncProducer, 'await p.send(...)' waits for the record's delivery and "
    "returns its RecordMetadata: aiokafka's idiom 'fut = await producer.send(...)' followed by "
    "'await fut' or 'asyncio.gather(*futs)' waited for each record in turn. Keep the futures "
    "without awaiting them ('futs = [p.send(...) for ...]; await asyncio.gather(*futs)'), or run "
    "aiokafka's code unchanged on fastkafka.compat.aiokafka.AIOKafkaProducer")


#: confluent-kafka's Message methods that RecordMetadata has no counterpart for, and what to use
_CONFLUENT_MESSAGE = {
    "error": "the error is the callback's first argument",
    "key": "keep the key in a closure (the callback is not given it back)",
    "value": "keep the value in a closure (the callback is not given it back)",
    "headers": "keep the headers in a closure (the callback is not given them back)",
    "latency": "measure it from the send time kept in a closure",
    "len": "serialized_value_size is the value's size",
    "timestamp_type": "timestamp is the broker's log-append time when the topic uses it",
}

cdef str _callback_hint(BaseException e):
    """A pointer for a confluent-kafka style callback (msg.topic()) given a RecordMetadata."""
    if isinstance(e, TypeError) and ("'str' object is not callable" in str(e)
                                     or "'int' object is not callable" in str(e)):
        return (" (a confluent-kafka style callback? here the callback gets (err, RecordMetadata) "
                "and md.topic, md.partition, md.offset, md.timestamp are attributes, not methods; "
                "fastkafka.compat.confluent.Producer passes confluent-kafka's message objects)")
    return ""


cdef void _callback_failed(object fn, BaseException e) noexcept:
    try:
        _log.error("delivery callback %r raised%s", fn, _callback_hint(e), exc_info=e)
    except BaseException:
        pass


cdef inline RecordMetadata _make_metadata(str topic, int32_t partition, int64_t offset,
                                          int64_t timestamp, int32_t ks, int32_t vs):
    cdef RecordMetadata md = RecordMetadata.__new__(RecordMetadata)
    md.topic = topic
    md.partition = partition
    md.offset = offset
    md.timestamp = timestamp
    md.serialized_key_size = ks
    md.serialized_value_size = vs
    return md


# ---------------------------------------------------------------------------------------------
# ProducerBatch
# ---------------------------------------------------------------------------------------------

@cython.final
cdef class BatchListener:
    """How many of a batch's records belong to one ``send_batch`` (its :class:`BatchFuture`)."""


@cython.final
cdef class ProducerBatch:
    """One partition's records (a ``BatchBuilder``) plus their completion.

    ``producer_id`` / ``producer_epoch`` / ``base_sequence`` stay -1 until the sender stamps the
    batch. ``attempts`` counts retries (0 for the first send); ``in_retry`` is set by
    :meth:`RecordAccumulator.reenqueue`.
    """

    def __cinit__(self, *args, **kwargs):
        global _live_batches
        _live_batches += 1

    def __dealloc__(self):
        global _live_batches
        _live_batches -= 1

    def __init__(self, str topic=None, int32_t partition=-1, BatchBuilder builder=None,
                 int64_t created_ms=0):
        init_batch(self, topic, partition, builder, created_ms)

    cpdef bint complete(self, int64_t base_offset, int64_t log_append_time, object error) except -1:
        """complete(base_offset, log_append_time, error) -> bool

        Set the result once (False if already completed), run the per-record callbacks and the
        BatchFuture listeners, then wake waiters. Call it with no lock held."""
        cdef list thunks, listeners
        cdef object ev
        cdef FutureRecordMetadata f
        cdef BatchListener l
        done_acquire()
        if self.done:
            done_release()
            return False
        self.done = True
        self.completer = PyThread_get_thread_ident()
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        ev = self._event
        thunks = self.thunks
        listeners = self.listeners
        self.thunks = None
        self.listeners = None
        self.last_listener = None
        done_release()
        try:
            if thunks is not None:
                for f in thunks:
                    f._fire(error)
                if f is not None and type(f.callback) is LoopSink:
                    (<LoopSink>f.callback).batch_end_c()
            if listeners is not None:
                for l in listeners:
                    l.future._batch_done(l.count, error)
        finally:
            # waiters (flush(), wait()) wake once the callbacks have run, as the Java client's
            # flush() returns after them: what a callback recorded is there when flush() returns
            done_acquire()
            self.settled = True
            ev = self._event
            done_release()
            if ev is not None:
                ev.set()
        if self.parent is not None:
            _piece_done(self.parent, error)
        return True

    # The fields kept in the C struct ``s`` (BatchState), under their Python names.
    @property
    def created_ms(self):
        return self.s.created_ms

    @created_ms.setter
    def created_ms(self, int64_t v):
        self.s.created_ms = v

    @property
    def attempts(self):
        return self.s.attempts

    @attempts.setter
    def attempts(self, int32_t v):
        self.s.attempts = v

    @property
    def last_attempt_ms(self):
        return self.s.last_attempt_ms

    @last_attempt_ms.setter
    def last_attempt_ms(self, int64_t v):
        self.s.last_attempt_ms = v

    @property
    def drained_ms(self):
        return self.s.drained_ms

    @drained_ms.setter
    def drained_ms(self, int64_t v):
        self.s.drained_ms = v

    @property
    def record_count(self):
        return self.s.record_count

    @property
    def producer_id(self):
        return self.s.producer_id

    @producer_id.setter
    def producer_id(self, int64_t v):
        self.s.producer_id = v

    @property
    def producer_epoch(self):
        return self.s.producer_epoch

    @producer_epoch.setter
    def producer_epoch(self, int32_t v):
        self.s.producer_epoch = v

    @property
    def base_sequence(self):
        return self.s.base_sequence

    @base_sequence.setter
    def base_sequence(self, int32_t v):
        self.s.base_sequence = v

    @property
    def in_retry(self):
        return self.s.in_retry

    @in_retry.setter
    def in_retry(self, bint v):
        self.s.in_retry = v

    @property
    def is_done(self):
        return self.done

    @property
    def split_into(self):
        """The batches this one was split into (a tuple, in record order), or None."""
        return None if self.children is None else tuple(self.children)

    def wait(self, timeout=None):
        """wait(timeout=None) -> bool: block (GIL released) until completed and its callbacks and
        listeners have run, or ``timeout`` s.
        Raises IllegalStateError on a producer's I/O thread (a delivery callback), which is the
        thread that would complete it."""
        cdef object ev
        if self.settled:
            return True
        if self.done and self.completer == PyThread_get_thread_ident():
            return True             # a callback of this batch, on the thread running them
        _refuse_wait_on_io_thread("wait for a record's delivery (future.get())")
        done_acquire()
        if self.settled:
            done_release()
            return True
        ev = self._event
        if ev is None:
            ev = self._event = threading.Event()
        done_release()
        return ev.wait(timeout)

    @property
    def is_full(self):
        return self.is_full_c()

    @property
    def size_in_bytes(self):
        """Uncompressed estimate while open, exact after the builder is closed."""
        return self.builder.estimated_size_c() if self.builder is not None else 0

    def __repr__(self):
        return (f"ProducerBatch({self.topic!r}, {self.partition}, records={self.s.record_count}, "
                f"attempts={self.s.attempts}, done={self.done})")


cdef ProducerBatch init_batch(ProducerBatch b, str topic, int32_t partition, BatchBuilder builder,
                              int64_t created_ms):
    b.topic = topic
    b.partition = partition
    b.topic_partition = (topic, partition)
    set_builder(b, builder)
    b.s.created_ms = created_ms
    b.s.last_attempt_ms = created_ms
    b.s.drained_ms = -1
    b.s.attempts = 0
    b.s.record_count = 0
    b.reserved = 0
    b.s.producer_id = -1
    b.s.producer_epoch = -1
    b.s.base_sequence = -1
    b.s.in_retry = False
    b.s.full = False
    b.s.in_flight = False
    b.base_offset = -1
    b.log_append_time = -1
    b.error = None
    return b


# ---------------------------------------------------------------------------------------------
# Split batches (RecordAccumulator.split_and_reenqueue)
# ---------------------------------------------------------------------------------------------

cdef ProducerBatch resolve_batch(ProducerBatch b, int32_t *index):
    """The batch that holds record ``index[0]`` of ``b`` now: ``b`` itself unless it was split,
    else the piece (of the piece...) that took the record over; ``index[0]`` becomes the record's
    index there."""
    cdef list pieces
    cdef Py_ssize_t k
    cdef ProducerBatch c
    while b.children is not None:
        pieces = b.children
        k = PyList_GET_SIZE(pieces) - 1
        while k > 0 and (<ProducerBatch>PyList_GET_ITEM(pieces, k)).first_index > index[0]:
            k -= 1
        c = <ProducerBatch>PyList_GET_ITEM(pieces, k)
        index[0] -= c.first_index
        b = c
    return b


cdef void _piece_done(ProducerBatch parent, object error) noexcept:
    """A piece of ``parent`` completed. ``parent`` (which has no callbacks or listeners of its own
    any more) is done when all its pieces are: its waiters wake, and so on up a split of a split.
    Its ``error`` is the first error of a piece (each record's own outcome is its piece's)."""
    cdef object ev
    while parent is not None:
        done_acquire()
        parent.children_left -= 1
        if error is not None and parent.error is None:
            parent.error = error
        if parent.children_left > 0 or parent.done:
            done_release()
            return
        parent.done = True
        parent.settled = True            # its callbacks are its pieces', run before this
        ev = parent._event
        error = parent.error
        done_release()
        if ev is not None:
            ev.set()
        parent = parent.parent


cdef list record_owners(ProducerBatch b):
    """Per record of ``b`` (call with the done lock held): the index in ``b.listeners`` of the
    ``send_batch`` listener that counts it, or -1 for a record of ``send``/``produce``. None when
    that cannot be told: listeners only count their records, appended in runs; the records between
    runs are known only when each has a callback (it is then in ``_thunks`` with its index)."""
    cdef list listeners = b.listeners
    cdef list owners
    cdef Py_ssize_t n = b.s.record_count, j = 0, li, c, total = 0, others = 0
    cdef int32_t i
    cdef FutureRecordMetadata f
    cdef BatchListener l
    owners = [-2] * n
    if b.thunks is not None:
        for f in b.thunks:
            i = f.index
            if resolve_batch(f.batch, &i) is not b or i < 0 or i >= n:
                return None
            if owners[i] != -1:
                owners[i] = -1
                others += 1
    if not listeners:
        return [-1] * n
    for l in listeners:
        total += l.count
    if total + others != n:
        return None
    for li in range(len(listeners)):
        c = (<BatchListener>listeners[li]).count
        while c > 0:
            while owners[j] == -1:
                j += 1
            owners[j] = li
            j += 1
            c -= 1
    return owners


# ---------------------------------------------------------------------------------------------
# Futures
# ---------------------------------------------------------------------------------------------

@cython.final
@cython.freelist(4096)      # one per record in flight: a batch of ~1,000 filling while one is sent
cdef class FutureRecordMetadata:
    """The result of one ``send``: ``get(timeout=None) -> RecordMetadata``.

    Backed by the record's batch and its index in it; no lock or event per record."""

    cdef RecordMetadata _metadata(self):
        cdef int32_t i = self.index
        cdef ProducerBatch b = resolve_batch(self.batch, &i)
        cdef int64_t offset = -1
        cdef int64_t ts = self.timestamp_ms
        if b.done and b.error is None and b.base_offset >= 0:
            offset = b.base_offset + i
        if b.log_append_time != -1:
            ts = b.log_append_time
        return _make_metadata(b.topic, b.partition, offset, ts, self.key_size, self.value_size)

    cdef void _fire(self, object error) noexcept:
        cdef RecordMetadata md
        cdef bint to_loop = type(self.callback) is LoopSink
        if to_loop and self.extra_callbacks is None:
            # fastkafka.aio: the event loop builds the metadata and resolves the waiter
            (<LoopSink>self.callback).push_c(self)
            return
        try:
            md = self._metadata()
        except BaseException:
            _log.exception("building RecordMetadata failed")
            if to_loop:
                (<LoopSink>self.callback).push_c(self)
            return
        if self.callback is not None and not to_loop:
            try:
                self.callback(error, md)
            except Exception as e:
                _callback_failed(self.callback, e)
        if self.extra_callbacks is not None:
            # (a record sent to a LoopSink with interceptors: their on_acknowledgement, here on
            # the I/O thread, before the record is handed to the loop)
            for fn in self.extra_callbacks:
                try:
                    fn(error, md)
                except Exception as e:
                    _callback_failed(fn, e)
        if to_loop:
            (<LoopSink>self.callback).push_c(self)

    def done(self):
        cdef int32_t i = self.index
        return resolve_batch(self.batch, &i).done

    def get(self, timeout=None):
        """get(timeout=None) -> RecordMetadata; raises the delivery error, or
        ``KafkaTimeoutError`` if not completed within ``timeout`` seconds."""
        cdef int32_t i = self.index
        cdef ProducerBatch b = resolve_batch(self.batch, &i)
        if not b.settled and not b.wait(timeout):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s "
                                    f"(topic {b.topic!r}, partition {b.partition})")
        if b.children is not None:  # split while we waited; done means every piece is
            i = self.index
            b = resolve_batch(self.batch, &i)
        if b.error is not None:
            raise b.error
        return self._metadata()

    def exception(self, timeout=None):
        """exception(timeout=None) -> the delivery error or None (waits like ``get``)."""
        cdef int32_t i = self.index
        cdef ProducerBatch b = resolve_batch(self.batch, &i)
        if not b.settled and not b.wait(timeout):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s")
        if b.children is not None:
            i = self.index
            b = resolve_batch(self.batch, &i)
        return b.error

    def add_callback(self, fn):
        """add_callback(fn): call ``fn(err, RecordMetadata)`` on completion (at once if done)."""
        cdef ProducerBatch b
        cdef int32_t i = self.index
        cdef bint now = False
        done_acquire()
        b = resolve_batch(self.batch, &i)   # under the lock: a split moves callbacks to the pieces
        if b.done:
            now = True
        else:
            if self.extra_callbacks is None:
                self.extra_callbacks = []
                if self.callback is None:
                    if b.thunks is None:
                        b.thunks = []
                    b.thunks.append(self)
            self.extra_callbacks.append(fn)
        done_release()
        if now:
            try:
                fn(b.error, self._metadata())
            except Exception as e:
                _callback_failed(fn, e)

    @property
    def metadata(self):
        """The RecordMetadata as far as known now (offset -1 until delivered)."""
        return self._metadata()

    def __repr__(self):
        cdef int32_t i = self.index
        cdef ProducerBatch b = resolve_batch(self.batch, &i)   # its piece, if the batch was split
        return (f"<FutureRecordMetadata {b.topic!r}[{b.partition}] "
                f"#{self.index} done={b.done}>")


@cython.final
cdef class BatchFuture:
    """Aggregate result of one ``send_batch`` across every batch its records went into.

    ``get(timeout=None) -> int`` (records delivered) once all are done, raising the first delivery
    error if any failed; ``delivered``, ``failed``, ``appended``, ``first_error``, ``done()``.
    """

    def __cinit__(self, expected=None):
        self._event = threading.Event()
        self.expected = expected

    cdef bint _check_done_locked(self) noexcept:
        if not self._finished and self._sealed and self._delivered + self._failed >= self._appended:
            self._finished = True
            return True
        return False

    cdef void _batch_done(self, int64_t count, object error) noexcept:
        cdef bint fire
        done_acquire()
        if error is None:
            self._delivered += count
        else:
            self._failed += count
            if self._first_error is None:
                self._first_error = error
        fire = self._check_done_locked()
        done_release()
        if fire:
            self._finish()

    cdef void seal(self, int64_t appended) noexcept:
        cdef bint fire
        done_acquire()
        self._appended += appended
        self._sealed = not self._held
        fire = self._check_done_locked()
        done_release()
        if fire:
            self._finish()

    def hold_seal(self):
        """hold_seal(): until :meth:`release_seal`, appends only add to ``appended`` (one
        ``send_batch`` made of several appends, as fastkafka.aio's when it awaits memory)."""
        done_acquire()
        self._held = True
        done_release()

    def release_seal(self):
        """release_seal(): no more appends; done once every record appended is."""
        cdef bint fire
        done_acquire()
        self._held = False
        self._sealed = True
        fire = self._check_done_locked()
        done_release()
        if fire:
            self._finish()

    def _finish(self):
        self._event.set()
        cbs = self._callbacks
        self._callbacks = None
        if cbs:
            for fn in cbs:
                try:
                    fn(self)
                except Exception:
                    _log.exception("BatchFuture callback %r raised", fn)

    def done(self):
        return self._finished

    def get(self, timeout=None):
        """get(timeout=None) -> int delivered; raises the first error after all batches are done."""
        if not self._finished:
            _refuse_wait_on_io_thread("wait for a send_batch's delivery (BatchFuture.get())")
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(f"batch not delivered within {timeout} s "
                                    f"({self._delivered + self._failed} of {self._appended} done)")
        if self._first_error is not None:
            raise self._first_error
        return self._delivered

    def add_callback(self, fn):
        """add_callback(fn): call ``fn(batch_future)`` once everything is done (at once if done);
        one that raises is logged, wherever it runs."""
        cdef bint now
        done_acquire()
        now = self._finished
        if not now:
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(fn)
        done_release()
        if now:
            try:
                fn(self)
            except Exception:
                _log.exception("BatchFuture callback %r raised", fn)

    @property
    def delivered(self):
        return self._delivered

    @property
    def failed(self):
        return self._failed

    @property
    def appended(self):
        """Records accepted by ``append_batch`` (all of them unless it raised part-way)."""
        return self._appended

    @property
    def first_error(self):
        return self._first_error

    def __repr__(self):
        return (f"<BatchFuture appended={self._appended} delivered={self._delivered} "
                f"failed={self._failed} done={self._finished}>")




# Completions handed to an asyncio event loop (fastkafka.aio): LoopSink.
include "batch_loopsink.pxi"
