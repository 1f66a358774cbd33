# cython: language_level=3
"""The RecordAccumulator: one deque of open batches per partition, fed by user threads and drained
by the single sender thread (the Java ``RecordAccumulator`` / ``ProducerBatch`` responsibilities).

Threading
---------
``append`` / ``append_batch`` / ``sticky_partition`` run on user threads; everything else on the
sender thread. Shared state is guarded by one lock that is never held while blocking on the buffer
pool, while closing (compressing) a batch, while calling into ``cluster``, or while running a user
callback. Every time-dependent method takes ``now_ms`` (integer milliseconds, any monotonic origin).

Completion
----------
One completion per batch: :meth:`ProducerBatch.complete` sets the result, wakes waiters, then runs
the per-record ``on_delivery(err, RecordMetadata)`` callbacks in record order and the aggregate
:class:`BatchFuture` listeners. A record's :class:`FutureRecordMetadata` is (batch, index). Callbacks
run on the thread that completes the batch (the sender's I/O thread); one that raises is logged to
the ``fastkafka`` logger and does not stop the others.

>>> from fastkafka._core.bufferpool import BufferPool
>>> acc = RecordAccumulator(16384, 0, None, 5, 100, 120000, BufferPool(1 << 20, 16384), False)
>>> fut = acc.append("t", 0, 1000, b"k", b"v", None, None, 0, 1000)
>>> acc.queued_batches("t", 0)
1
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_CheckExact
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock, PyThread_acquire_lock,
    PyThread_release_lock, NOWAIT_LOCK, WAIT_LOCK,
)
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t
from posix.time cimport CLOCK_MONOTONIC

from fastkafka._wire.records cimport (BatchBuilder, record_size_c, headers_encoded_size, get_view,
                                      unusable_buffer, BATCH_HEADER_SIZE)
from fastkafka._core.bufferpool cimport BufferPool
from fastkafka._core.partitioner cimport StickyPartitioner

import array
import logging
import threading
import time

from fastkafka._wire.records import BatchBuilder as _PyBatchBuilder
from fastkafka._wire.records import buffer_counters
from fastkafka._core.bufferpool import pool_counters
from fastkafka.errors import (
    InvalidRecordError, KafkaTimeoutError, MalformedRecordError, ProducerClosedError,
    RecordTooLargeError, UnknownPartitionError, IllegalStateError)

_log = logging.getLogger("fastkafka")

#: ``next_ready_check_ms`` when nothing is waiting to become sendable.
NO_DEADLINE = 9223372036854775807
#: Pass as ``partition`` to :meth:`RecordAccumulator.append` to use the topic's sticky partition.
PARTITION_STICKY = -1

cdef int64_t _NO_DEADLINE = 9223372036854775807

# Live-resource counters (touched with the GIL held): ProducerBatch objects alive, and
# RecordAccumulators alive and not closed. See live_resources().
cdef int64_t _live_batches = 0
cdef int64_t _open_accumulators = 0

#: The counters :func:`live_resources` reports that must come back to where they were once
#: everything a piece of code opened is closed and collected (what the tests' teardown check reads).
LIVE_COUNTERS = ("accumulators_open", "io_threads", "producer_batches", "buffer_pools",
                 "buffer_pool_bytes", "batch_buffers", "batch_buffer_bytes",
                 "buffer_cache_overflow")


def live_resources():
    """live_resources() -> dict[str, int]: the compiled core's live resources in this process.

    * ``accumulators_open``: RecordAccumulators alive and not closed (one per open producer);
    * ``io_threads``: producer I/O threads running (registered with ``register_io_thread``);
    * ``producer_batches``: ProducerBatch objects alive (queued, in flight, or still referenced);
    * ``buffer_pools`` / ``buffer_pool_bytes``: BufferPools alive and the bytes they have handed
      to batches and not had back;
    * ``batch_buffers`` / ``batch_buffer_bytes``: batch buffers owned by live BatchBuilders;
    * ``buffer_cache_overflow``: buffers kept in the process-wide batch buffer cache beyond its
      bound (``fastkafka._wire.records.buffer_counters()`` has the cache's size and bound).

    Each comes back to its earlier value once everything opened in between is closed and garbage
    collected (the tests check this after every test: ``tests/live_resources.py``).

    >>> sorted(live_resources()) == sorted(LIVE_COUNTERS)
    True
    """
    cdef dict pools = pool_counters()
    cdef dict bufs = buffer_counters()
    return {
        "accumulators_open": _open_accumulators,
        "io_threads": len(_io_threads),
        "producer_batches": _live_batches,
        "buffer_pools": pools["buffer_pools"],
        "buffer_pool_bytes": pools["buffer_pool_bytes"],
        "batch_buffers": bufs["batch_buffers"],
        "batch_buffer_bytes": bufs["batch_buffer_bytes"],
        "buffer_cache_overflow": bufs["buffer_cache_overflow"],
    }


# Guards completion state (ProducerBatch._done/_event/_thunks, BatchFuture counters). A leaf lock:
# nothing else is acquired and no Python callback runs while it is held.
cdef PyThread_type_lock _done_lock = PyThread_allocate_lock()


cdef inline void _done_acquire() noexcept:
    if not PyThread_acquire_lock(_done_lock, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(_done_lock, WAIT_LOCK)


cdef inline void _done_release() noexcept:
    PyThread_release_lock(_done_lock)


# ---------------------------------------------------------------------------------------------
# RecordMetadata
# ---------------------------------------------------------------------------------------------

# Idents of the producers' I/O threads: waiting there for a delivery would deadlock, since that
# thread is the one that completes deliveries (a delivery callback calling future.get()).
_io_threads = set()


def register_io_thread(ident):
    _io_threads.add(ident)


def unregister_io_thread(ident):
    _io_threads.discard(ident)


cdef inline int _refuse_wait_on_io_thread(str what) except -1:
    if _io_threads and threading.get_ident() in _io_threads:
        raise IllegalStateError(
            f"cannot {what} on the producer's I/O thread (in a delivery callback): that thread "
            f"completes deliveries, so it would wait for itself. Use on_delivery/add_callback, or "
            f"wait from an application thread")
    return 0


@cython.final
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

    def __repr__(self):
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, "
                f"serialized_key_size={self.serialized_key_size}, "
                f"serialized_value_size={self.serialized_value_size})")


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
cdef class _Listener:
    pass


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
        _init_batch(self, topic, partition, builder, created_ms)

    cdef inline bint _is_full(self) noexcept:
        cdef BatchBuilder b = self.builder
        return self._full or b is None or b._closed or b._len >= b._batch_size

    cpdef bint complete(self, int64_t base_offset, int64_t log_append_time, object error) except -1:
        """complete(base_offset, log_append_time, error) -> bool

        Set the result once (False if already completed), wake waiters, then run the per-record
        callbacks and the BatchFuture listeners. Call it with no lock held."""
        cdef list thunks, listeners
        cdef object ev
        cdef FutureRecordMetadata f
        cdef _Listener l
        _done_acquire()
        if self._done:
            _done_release()
            return False
        self._done = True
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        ev = self._event
        thunks = self._thunks
        listeners = self._listeners
        self._thunks = None
        self._listeners = None
        self._last_listener = None
        _done_release()
        if ev is not None:
            ev.set()
        if thunks is not None:
            for f in thunks:
                f._fire(error)
        if listeners is not None:
            for l in listeners:
                l.future._batch_done(l.count, error)
        if self._parent is not None:
            _piece_done(self._parent, error)
        return True

    @property
    def is_done(self):
        return self._done

    @property
    def split_into(self):
        """The batches this one was split into (a tuple, in record order), or None."""
        return None if self._children is None else tuple(self._children)

    def wait(self, timeout=None):
        """wait(timeout=None) -> bool: block (GIL released) until completed or ``timeout`` s.
        Raises IllegalStateError on a producer's I/O thread (a delivery callback), which is the
        thread that would complete it."""
        cdef object ev
        if self._done:
            return True
        _refuse_wait_on_io_thread("wait for a record's delivery (future.get())")
        _done_acquire()
        if self._done:
            _done_release()
            return True
        ev = self._event
        if ev is None:
            ev = self._event = threading.Event()
        _done_release()
        return ev.wait(timeout)

    @property
    def is_full(self):
        return self._is_full()

    @property
    def size_in_bytes(self):
        """Uncompressed estimate while open, exact after the builder is closed."""
        return self.builder.estimated_size_c() if self.builder is not None else 0

    def __repr__(self):
        return (f"ProducerBatch({self.topic!r}, {self.partition}, records={self.record_count}, "
                f"attempts={self.attempts}, done={self._done})")


cdef inline ProducerBatch _init_batch(ProducerBatch b, str topic, int32_t partition,
                                      BatchBuilder builder, int64_t created_ms):
    b.topic = topic
    b.partition = partition
    b.topic_partition = (topic, partition)
    b.builder = builder
    b.created_ms = created_ms
    b.last_attempt_ms = created_ms
    b.drained_ms = -1
    b.attempts = 0
    b.record_count = 0
    b.reserved = 0
    b.producer_id = -1
    b.producer_epoch = -1
    b.base_sequence = -1
    b.in_retry = False
    b.base_offset = -1
    b.log_append_time = -1
    b.error = None
    return b


# ---------------------------------------------------------------------------------------------
# Split batches (RecordAccumulator.split_and_reenqueue)
# ---------------------------------------------------------------------------------------------

cdef ProducerBatch _resolve(ProducerBatch b, int32_t *index):
    """The batch that holds record ``index[0]`` of ``b`` now: ``b`` itself unless it was split,
    else the piece (of the piece...) that took the record over; ``index[0]`` becomes the record's
    index there."""
    cdef list pieces
    cdef Py_ssize_t k
    cdef ProducerBatch c
    while b._children is not None:
        pieces = b._children
        k = PyList_GET_SIZE(pieces) - 1
        while k > 0 and (<ProducerBatch>PyList_GET_ITEM(pieces, k))._first_index > index[0]:
            k -= 1
        c = <ProducerBatch>PyList_GET_ITEM(pieces, k)
        index[0] -= c._first_index
        b = c
    return b


cdef void _piece_done(ProducerBatch parent, object error) noexcept:
    """A piece of ``parent`` completed. ``parent`` (which has no callbacks or listeners of its own
    any more) is done when all its pieces are: its waiters wake, and so on up a split of a split.
    Its ``error`` is the first error of a piece (each record's own outcome is its piece's)."""
    cdef object ev
    while parent is not None:
        _done_acquire()
        parent._children_left -= 1
        if error is not None and parent.error is None:
            parent.error = error
        if parent._children_left > 0 or parent._done:
            _done_release()
            return
        parent._done = True
        ev = parent._event
        error = parent.error
        _done_release()
        if ev is not None:
            ev.set()
        parent = parent._parent


cdef list _record_owners(ProducerBatch b):
    """Per record of ``b`` (call with ``_done_lock`` held): the index in ``b._listeners`` of the
    ``send_batch`` listener that counts it, or -1 for a record of ``send``/``produce``. None when
    that cannot be told: listeners only count their records, appended in runs; the records between
    runs are known only when each has a callback (it is then in ``_thunks`` with its index)."""
    cdef list listeners = b._listeners
    cdef list owners
    cdef Py_ssize_t n = b.record_count, j = 0, li, c, total = 0, others = 0
    cdef int32_t i
    cdef FutureRecordMetadata f
    cdef _Listener l
    owners = [-2] * n
    if b._thunks is not None:
        for f in b._thunks:
            i = f.index
            if _resolve(f.batch, &i) is not b or i < 0 or i >= n:
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
        c = (<_Listener>listeners[li]).count
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
@cython.freelist(1024)
cdef class FutureRecordMetadata:
    """The result of one ``send``: ``get(timeout=None) -> RecordMetadata``.

    Backed by the record's batch and its index in it; no lock or event per record."""

    cdef RecordMetadata _metadata(self):
        cdef int32_t i = self.index
        cdef ProducerBatch b = _resolve(self.batch, &i)
        cdef int64_t offset = -1
        cdef int64_t ts = self._timestamp
        if b._done and b.error is None and b.base_offset >= 0:
            offset = b.base_offset + i
        if b.log_append_time != -1:
            ts = b.log_append_time
        return _make_metadata(b.topic, b.partition, offset, ts, self._key_size, self._value_size)

    cdef void _fire(self, object error) noexcept:
        cdef RecordMetadata md
        try:
            md = self._metadata()
        except BaseException:
            _log.exception("building RecordMetadata failed")
            return
        if self._callback is not None:
            try:
                self._callback(error, md)
            except Exception:
                _log.exception("delivery callback %r raised", self._callback)
        if self._extra is not None:
            for fn in self._extra:
                try:
                    fn(error, md)
                except Exception:
                    _log.exception("delivery callback %r raised", fn)

    def done(self):
        cdef int32_t i = self.index
        return _resolve(self.batch, &i)._done

    def get(self, timeout=None):
        """get(timeout=None) -> RecordMetadata; raises the delivery error, or
        ``KafkaTimeoutError`` if not completed within ``timeout`` seconds."""
        cdef int32_t i = self.index
        cdef ProducerBatch b = _resolve(self.batch, &i)
        if not b._done and not b.wait(timeout):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s "
                                    f"(topic {b.topic!r}, partition {b.partition})")
        if b._children is not None:  # split while we waited; done means every piece is
            i = self.index
            b = _resolve(self.batch, &i)
        if b.error is not None:
            raise b.error
        return self._metadata()

    def exception(self, timeout=None):
        """exception(timeout=None) -> the delivery error or None (waits like ``get``)."""
        cdef int32_t i = self.index
        cdef ProducerBatch b = _resolve(self.batch, &i)
        if not b._done and not b.wait(timeout):
            raise KafkaTimeoutError(f"record not delivered within {timeout} s")
        if b._children is not None:
            i = self.index
            b = _resolve(self.batch, &i)
        return b.error

    def add_callback(self, fn):
        """add_callback(fn): call ``fn(err, RecordMetadata)`` on completion (at once if done)."""
        cdef ProducerBatch b
        cdef int32_t i = self.index
        cdef bint now = False
        _done_acquire()
        b = _resolve(self.batch, &i)   # under the lock: a split moves callbacks to the pieces
        if b._done:
            now = True
        else:
            if self._extra is None:
                self._extra = []
                if self._callback is None:
                    if b._thunks is None:
                        b._thunks = []
                    b._thunks.append(self)
            self._extra.append(fn)
        _done_release()
        if now:
            try:
                fn(b.error, self._metadata())
            except Exception:
                _log.exception("delivery callback %r raised", fn)

    @property
    def metadata(self):
        """The RecordMetadata as far as known now (offset -1 until delivered)."""
        return self._metadata()

    def __repr__(self):
        return (f"<FutureRecordMetadata {self.batch.topic!r}[{self.batch.partition}] "
                f"#{self.index} done={self.batch._done}>")


cdef inline FutureRecordMetadata _new_future(ProducerBatch batch, int64_t ts, Py_ssize_t kl,
                                             Py_ssize_t vl, object cb, bint want=True):
    """Count one more record in ``batch``; its future (None if not wanted and no callback)."""
    cdef FutureRecordMetadata f
    if not want and cb is None:
        batch.record_count += 1
        return None
    f = FutureRecordMetadata.__new__(FutureRecordMetadata)
    f.batch = batch
    f.index = batch.record_count
    batch.record_count += 1
    f._timestamp = ts
    f._key_size = <int32_t>kl
    f._value_size = <int32_t>vl
    if cb is not None:
        f._callback = cb
        if batch._thunks is None:
            batch._thunks = [f]
        else:
            batch._thunks.append(f)
    return f


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
        _done_acquire()
        if error is None:
            self._delivered += count
        else:
            self._failed += count
            if self._first_error is None:
                self._first_error = error
        fire = self._check_done_locked()
        _done_release()
        if fire:
            self._finish()

    cdef void _seal(self, int64_t appended) noexcept:
        cdef bint fire
        _done_acquire()
        self._appended += appended
        self._sealed = True
        fire = self._check_done_locked()
        _done_release()
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
        """add_callback(fn): call ``fn(batch_future)`` once everything is done (at once if done)."""
        cdef bint now
        _done_acquire()
        now = self._finished
        if not now:
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(fn)
        _done_release()
        if now:
            fn(self)

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


# ---------------------------------------------------------------------------------------------
# Columns for append_batch
# ---------------------------------------------------------------------------------------------

cdef enum:
    COL_NULL = 0      # every element null
    COL_LIST = 1      # Python list of bytes-like / None
    COL_ARROW32 = 2   # Arrow binary/string: int32 offsets
    COL_ARROW64 = 3   # Arrow large_binary/large_string: int64 offsets


cdef struct _Col:
    int kind
    Py_ssize_t offset              # Arrow array offset (slices)
    const uint8_t *validity        # NULL: no nulls
    const int32_t *off32
    const int64_t *off64
    const char *data
    PyObject *lst                  # borrowed; the caller keeps the list alive


cdef object _pa = None


cdef object _pyarrow():
    global _pa
    if _pa is None:
        import pyarrow
        _pa = pyarrow
    return _pa


cdef inline bint _is_arrow(object obj):
    cdef str mod = type(obj).__module__
    return mod is not None and mod.startswith("pyarrow")


cdef inline uintptr_t _addr(object buf):
    return 0 if buf is None else <uintptr_t>buf.address


cdef Py_ssize_t _prepare_col(object col, _Col *c, str name, list keep) except -1:
    """Fill ``c`` for ``col``; validate it; return its length. Keeps needed objects in ``keep``."""
    cdef Py_ssize_t n, i
    cdef object x, t, bufs
    cdef Py_buffer view
    c.kind = COL_NULL
    c.offset = 0
    c.validity = NULL
    c.off32 = NULL
    c.off64 = NULL
    c.data = NULL
    c.lst = NULL
    if _is_arrow(col):
        pa = _pyarrow()
        if isinstance(col, pa.ChunkedArray):
            col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if not isinstance(col, pa.Array):
            raise InvalidRecordError(f"{name}: expected a pyarrow Array, got {type(col).__name__}")
        keep.append(col)
        t = col.type
        n = len(col)
        if pa.types.is_null(t):
            return n
        if pa.types.is_binary(t) or pa.types.is_string(t):
            c.kind = COL_ARROW32
        elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            c.kind = COL_ARROW64
        else:
            raise InvalidRecordError(
                f"{name}: Arrow type {t} is not supported (use binary, large_binary, string "
                f"or large_string)")
        bufs = col.buffers()
        keep.append(bufs)
        c.offset = col.offset
        if bufs[0] is not None and col.null_count > 0:
            c.validity = <const uint8_t *>_addr(bufs[0])
        if c.kind == COL_ARROW32:
            c.off32 = <const int32_t *>_addr(bufs[1])
        else:
            c.off64 = <const int64_t *>_addr(bufs[1])
        c.data = <const char *>_addr(bufs[2])
        if n > 0 and c.off32 == NULL and c.off64 == NULL:
            raise InvalidRecordError(f"{name}: Arrow array without an offsets buffer")
        return n
    if type(col) is not list:
        if col is None or isinstance(col, (str, bytes, bytearray, memoryview)):
            raise InvalidRecordError(f"{name} must be a list of bytes-like/None or an Arrow array, "
                                     f"not {type(col).__name__}")
        try:
            col = iter(col)
        except TypeError:
            raise InvalidRecordError(f"{name} must be a list of bytes-like/None or an Arrow array, "
                                     f"not {type(col).__name__}") from None
        col = list(col)
    keep.append(col)
    n = PyList_GET_SIZE(col)
    for i in range(n):
        x = <object>PyList_GET_ITEM(col, i)
        if x is None or PyBytes_CheckExact(x) or PyByteArray_CheckExact(x):
            continue
        if isinstance(x, (str, int, float)) or not PyObject_CheckBuffer(x):
            raise InvalidRecordError(f"{name}[{i}] must be bytes-like (bytes, bytearray, memoryview "
                                     f"or another C-contiguous buffer) or None, not "
                                     f"{type(x).__name__}")
        try:
            PyObject_GetBuffer(x, &view, PyBUF_SIMPLE)
        except (BufferError, ValueError, TypeError) as e:
            raise unusable_buffer(x, f"{name}[{i}]", e) from None
        PyBuffer_Release(&view)
    c.kind = COL_LIST
    c.lst = <PyObject *>col
    return n


cdef inline int _col_get(_Col *c, Py_ssize_t i, const char **p, Py_ssize_t *n,
                         Py_buffer *view, bint *release) except -1:
    cdef Py_ssize_t j
    cdef int64_t a, b
    cdef object x
    if c.kind == COL_ARROW32 or c.kind == COL_ARROW64:
        j = c.offset + i
        if c.validity != NULL and not ((c.validity[j >> 3] >> (j & 7)) & 1):
            p[0] = NULL
            n[0] = -1
            return 0
        if c.kind == COL_ARROW32:
            a = c.off32[j]
            b = c.off32[j + 1]
        else:
            a = c.off64[j]
            b = c.off64[j + 1]
        p[0] = c.data + a
        n[0] = <Py_ssize_t>(b - a)
        return 0
    if c.kind == COL_NULL:
        p[0] = NULL
        n[0] = -1
        return 0
    if i >= PyList_GET_SIZE(<object>c.lst):
        raise RuntimeError("the list passed to send_batch changed size while being appended")
    x = <object>PyList_GET_ITEM(<object>c.lst, i)
    if x is None:
        p[0] = NULL
        n[0] = -1
    elif PyBytes_CheckExact(x):
        p[0] = PyBytes_AS_STRING(x)
        n[0] = PyBytes_GET_SIZE(x)
    elif PyByteArray_CheckExact(x):
        p[0] = PyByteArray_AS_STRING(x)
        n[0] = PyByteArray_GET_SIZE(x)
    else:
        PyObject_GetBuffer(x, view, PyBUF_SIMPLE)
        release[0] = True
        p[0] = <const char *>view.buf
        n[0] = view.len
    return 0


# ---------------------------------------------------------------------------------------------
# Per-partition state
# ---------------------------------------------------------------------------------------------

@cython.final
cdef class _PartitionQueue:
    pass


@cython.final
cdef class _TopicState:
    pass


# ---------------------------------------------------------------------------------------------
# RecordAccumulator
# ---------------------------------------------------------------------------------------------
cdef Py_ssize_t _retry_position(list batches, int32_t base_sequence):
    """Where a batch to retry goes in its partition's deque: at the head, after the retried batches
    with a lower sequence (so sequences stay in order); at the very head without a sequence."""
    cdef Py_ssize_t i = 0, n = PyList_GET_SIZE(batches)
    cdef ProducerBatch b
    if base_sequence < 0:
        return 0
    while i < n:
        b = <ProducerBatch>PyList_GET_ITEM(batches, i)
        if b.base_sequence >= 0 and b.base_sequence < base_sequence:
            i += 1
        else:
            break
    return i



cdef class RecordAccumulator:
    """RecordAccumulator(batch_size, compression_type, compression_level, linger_ms,
    retry_backoff_ms, delivery_timeout_ms, buffer_pool, ordered)

    ``ordered=True`` mutes a partition from the moment one of its batches is drained until the
    sender calls :meth:`unmute` (after handling that batch's response), so at most one batch per
    partition is in flight.
    """

    def __cinit__(self, int64_t batch_size, compression_type, compression_level, int64_t linger_ms,
                  int64_t retry_backoff_ms, int64_t delivery_timeout_ms, BufferPool buffer_pool,
                  bint ordered):
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if buffer_pool is None:
            raise ValueError("buffer_pool is required")
        # validates the codec and level once, here, rather than on the first append
        _PyBatchBuilder(batch_size, compression_type, compression_level)
        self.batch_size = batch_size
        self.compression_type = compression_type
        self.compression_level = compression_level
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.buffer_pool = buffer_pool
        self.ordered = ordered
        self._topics = {}
        self._queues = []
        self._incomplete = set()
        self._drain_index = {}
        self._flush_threads = {}
        self._sticky = StickyPartitioner()
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()
        global _open_accumulators
        _open_accumulators += 1
        self._counted = True

    def __dealloc__(self):
        global _open_accumulators
        if self._counted:
            self._counted = False
            _open_accumulators -= 1
        if self._lock != NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef void _acquire(self) noexcept:
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)

    cdef void _release(self) noexcept:
        PyThread_release_lock(self._lock)

    cdef _TopicState _topic_locked(self, str topic):
        cdef object ts
        cdef _TopicState t = self._last_topic
        if t is not None and t.topic is topic:  # the common case: the same topic object again
            return t
        ts = self._topics.get(topic)
        if ts is not None:
            self._last_topic = <_TopicState>ts
            return <_TopicState>ts
        t = _TopicState.__new__(_TopicState)
        t.topic = topic
        t.parts = []
        t.available = None
        self._topics[topic] = t
        return t

    cdef _PartitionQueue _pq_locked(self, _TopicState ts, int32_t partition):
        cdef object o
        cdef _PartitionQueue pq
        if partition < 0:
            raise UnknownPartitionError(f"invalid partition {partition} for topic {ts.topic!r}")
        if partition < PyList_GET_SIZE(ts.parts):
            o = <object>PyList_GET_ITEM(ts.parts, partition)
            if o is not None:
                return <_PartitionQueue>o
        else:
            ts.parts.extend([None] * (partition + 1 - len(ts.parts)))
        pq = _PartitionQueue.__new__(_PartitionQueue)
        pq.topic = ts.topic
        pq.partition = partition
        pq.batches = []
        pq.muted = False
        pq.tp = (ts.topic, partition)
        ts.parts[partition] = pq
        self._queues.append(pq)
        return pq

    cdef _PartitionQueue _find_locked(self, str topic, int32_t partition):
        cdef object ts = self._topics.get(topic)
        cdef object o
        if ts is None or partition < 0 or partition >= PyList_GET_SIZE((<_TopicState>ts).parts):
            return None
        o = <object>PyList_GET_ITEM((<_TopicState>ts).parts, partition)
        return <_PartitionQueue>o if o is not None else None

    cdef ProducerBatch _new_batch(self, _PartitionQueue pq, int64_t now_ms, int64_t reserved):
        cdef ProducerBatch b = ProducerBatch.__new__(ProducerBatch)
        cdef BatchBuilder builder = BatchBuilder(self.batch_size, self.compression_type,
                                                 self.compression_level)
        _init_batch(b, pq.topic, pq.partition, builder, now_ms)
        b.topic_partition = pq.tp
        b.reserved = reserved
        return b

    # -- appends (user threads) ---------------------------------------------------------------

    def sticky_partition(self, str topic, list available_partitions):
        """sticky_partition(topic, available_partitions) -> int

        The topic's current sticky partition for records without a key; it moves to another
        random available partition once its open batch is full (noticed by ``append``). The list
        is remembered for ``append(..., partition=PARTITION_STICKY, ...)``."""
        cdef _TopicState ts
        self._acquire()
        try:
            ts = self._topic_locked(topic)
            ts.available = available_partitions
            return self._sticky.partition(topic, available_partitions)
        finally:
            self._release()

    def append(self, str topic, int32_t partition, int64_t timestamp_ms, key, value, headers,
               on_delivery, int64_t now_ms, int64_t max_block_ms):
        """append(topic, partition, timestamp_ms, key, value, headers, on_delivery, now_ms,
        max_block_ms) -> FutureRecordMetadata

        Copy one record into the last open batch of the partition, or into a new batch whose
        memory comes from the buffer pool (waiting up to ``max_block_ms``; on failure nothing is
        appended). ``partition=PARTITION_STICKY`` (-1) uses the topic's sticky partition and, when
        that one needs a new batch, switches first (the Java "abort on new batch")."""
        cdef Py_buffer kview, vview
        cdef const char *kp = NULL
        cdef const char *vp = NULL
        cdef Py_ssize_t kl = -1, vl = -1
        cdef int krel = 0, vrel = 0
        krel = get_view(key, "key", &kview, &kp, &kl)
        try:
            vrel = get_view(value, "value", &vview, &vp, &vl)
            try:
                return self._append(topic, partition, timestamp_ms, kp, kl, vp, vl, headers,
                                    on_delivery, now_ms, max_block_ms, True)
            finally:
                if vrel:
                    PyBuffer_Release(&vview)
        finally:
            if krel:
                PyBuffer_Release(&kview)

    cdef FutureRecordMetadata _append(self, str topic, int32_t partition, int64_t timestamp,
                                      const char *kp, Py_ssize_t kl, const char *vp,
                                      Py_ssize_t vl, object headers, object on_delivery,
                                      int64_t now_ms, int64_t max_block_ms, bint want_future):
        """The record's future, or None when ``want_future`` is false and there is no
        ``on_delivery`` (the record is still counted in its batch)."""
        cdef _TopicState ts
        cdef _PartitionQueue pq
        cdef ProducerBatch batch
        cdef FutureRecordMetadata fut
        cdef object cur
        cdef bint sticky = partition < 0
        cdef bint switched = False, tail_full, have_mem = False
        cdef int32_t np
        cdef int64_t size
        cdef Py_ssize_t nb

        # 1. fast path: the partition's open batch has room
        self._acquire()
        try:
            if self._closed:
                raise ProducerClosedError("the producer is closed")
            ts = self._topic_locked(topic)
            if sticky:
                if not ts.available:
                    raise UnknownPartitionError(
                        f"no available partitions known for topic {topic!r} "
                        f"(call sticky_partition() first)")
                partition = self._sticky.partition(topic, ts.available)
            while True:
                pq = self._pq_locked(ts, partition)
                tail_full = False
                nb = PyList_GET_SIZE(pq.batches)
                if nb:
                    batch = <ProducerBatch>PyList_GET_ITEM(pq.batches, nb - 1)
                    if not batch._full:
                        if batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers):
                            return _new_future(batch, timestamp, kl, vl, on_delivery, want_future)
                        batch._full = True
                        self._wakeup = True
                    tail_full = True
                if sticky:
                    if not switched:
                        switched = True
                        np = self._sticky.next_partition(topic, ts.available, partition)
                        if np != partition:
                            partition = np
                            continue
                elif tail_full and ts.available:
                    cur = self._sticky._sticky.get(topic)
                    if cur is not None and <int32_t>cur == partition:
                        self._sticky.next_partition(topic, ts.available, partition)
                break
            # headers are validated here (TypeError naming the index) before memory is taken
            size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl,
                                                     headers_encoded_size(headers)
                                                     if headers is not None else 1)
            if size < self.batch_size:
                size = self.batch_size
            have_mem = self.buffer_pool.try_allocate(size)
        finally:
            self._release()

        # 2. wait for memory without holding the lock
        if not have_mem:
            self.buffer_pool.allocate(size, max_block_ms)

        # 3. another thread may have started a batch meanwhile
        if now_ms < 0:
            now_ms = clock_ms(CLOCK_MONOTONIC)
        self._acquire()
        try:
            if self._closed:
                self.buffer_pool.deallocate(size)
                raise ProducerClosedError("the producer was closed while waiting for memory")
            nb = PyList_GET_SIZE(pq.batches)
            if nb:
                batch = <ProducerBatch>PyList_GET_ITEM(pq.batches, nb - 1)
                if not batch._full:
                    if batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers):
                        self.buffer_pool.deallocate(size)
                        return _new_future(batch, timestamp, kl, vl, on_delivery, want_future)
                    batch._full = True
            try:
                batch = self._new_batch(pq, now_ms, size)
                if not batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers):
                    raise RuntimeError("BatchBuilder refused the first record of a new batch")
            except BaseException:
                self.buffer_pool.deallocate(size)
                raise
            fut = _new_future(batch, timestamp, kl, vl, on_delivery, want_future)
            pq.batches.append(batch)
            self._incomplete.add(batch)
            self._wakeup = True
            return fut
        finally:
            self._release()

    def append_batch(self, str topic, partitions, values, keys, headers, int64_t timestamp_ms,
                     BatchFuture future, int64_t now_ms, int64_t max_block_ms,
                     list available_partitions=None, int64_t max_record_size=-1):
        """append_batch(topic, partitions, values, keys, headers, timestamp_ms, future, now_ms,
        max_block_ms, available_partitions=None, max_record_size=-1) -> int appended

        ``values``/``keys``: lists of bytes-like/None or pyarrow binary/large_binary/string/
        large_string arrays (read straight from the Arrow buffers); ``keys`` may be None.
        ``partitions``: one int, or one int32 per record (list, array.array('i'), numpy int32,
        pyarrow int array), or ``PARTITION_STICKY`` (-1): the topic's sticky partition, switched
        to another of ``available_partitions`` each time a new batch is needed (null keys).
        ``headers``: None or one list for every record. ``max_record_size`` > 0: a record whose
        encoded size exceeds it raises ``RecordTooLargeError`` (before anything is appended). Everything is
        validated before the first record is appended (``InvalidRecordError`` names the index
        and type). ``future`` is sealed when this returns or raises; if the buffer pool times out
        part-way, the records appended so far stay queued and the error carries
        ``records_appended``."""
        cdef _Col vc, kc
        cdef list keep = []
        cdef Py_ssize_t n, nk, i, nb
        cdef int32_t single = 0
        cdef const int32_t *pp = NULL
        cdef const int32_t[::1] pview
        cdef Py_ssize_t hsize = 1
        cdef int32_t p, cur_p
        cdef const char *kp
        cdef const char *vp
        cdef Py_ssize_t kl, vl
        cdef Py_buffer kview, vview
        cdef bint krel = False, vrel = False, locked = False
        cdef int r
        cdef int64_t size, appended = 0
        cdef _TopicState ts
        cdef _PartitionQueue pq = None
        cdef ProducerBatch batch = None
        cdef _Listener lst
        cdef object err = None
        cdef bint sticky = False, switched
        cdef int32_t np
        cdef object pbufs

        if future is None:
            raise ValueError("append_batch needs a BatchFuture")
        try:
            # ---- validation: nothing is appended if any of this fails ----
            n = _prepare_col(values, &vc, "values", keep)
            if keys is None:
                kc.kind = COL_NULL
            else:
                nk = _prepare_col(keys, &kc, "keys", keep)
                if nk != n:
                    raise MalformedRecordError(f"keys has {nk} elements but values has {n}")
            if headers is not None:
                try:
                    hsize = headers_encoded_size(headers)
                except TypeError as e:
                    raise InvalidRecordError(f"headers: {e}") from None
                except (ValueError, BufferError) as e:  # a lone surrogate, a released memoryview
                    raise MalformedRecordError(f"headers: {e}") from None
            if isinstance(partitions, int):
                single = partitions
                if single == PARTITION_STICKY:
                    sticky = True
                    if not available_partitions:
                        raise UnknownPartitionError(
                            f"no available partitions given for the sticky partitioning of "
                            f"topic {topic!r}")
                elif single < 0:
                    raise UnknownPartitionError(f"invalid partition {single}")
            else:
                if _is_arrow(partitions):
                    pa = _pyarrow()
                    if isinstance(partitions, pa.ChunkedArray):
                        partitions = partitions.combine_chunks()
                    if partitions.null_count:
                        raise UnknownPartitionError("partitions contains nulls")
                    if partitions.type != pa.int32():
                        try:
                            partitions = partitions.cast(pa.int32())
                        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                            raise InvalidRecordError(
                                f"partitions must be int32 values: {e}") from None
                    keep.append(partitions)
                    if len(partitions) != n:
                        raise InvalidRecordError(f"partitions has {len(partitions)} elements "
                                                 f"but values has {n}")
                    if n:
                        pbufs = partitions.buffers()
                        keep.append(pbufs)
                        pp = <const int32_t *>_addr(pbufs[1])
                        pp += <Py_ssize_t>partitions.offset
                else:
                    try:
                        pview = partitions
                    except (TypeError, ValueError, BufferError):
                        try:
                            pview = array.array("i", partitions)
                        except (TypeError, OverflowError) as e:
                            raise InvalidRecordError(
                                f"partitions must be int32 values: {e}") from None
                    keep.append(pview)
                    if pview.shape[0] != n:
                        raise InvalidRecordError(f"partitions has {pview.shape[0]} elements but "
                                                 f"values has {n}")
                    if n:
                        pp = &pview[0]
                for i in range(n):
                    if pp[i] < 0:
                        raise UnknownPartitionError(f"partitions[{i}] = {pp[i]} is not a valid "
                                                    f"partition")

            if max_record_size > 0:
                for i in range(n):
                    _col_get(&kc, i, &kp, &kl, &kview, &krel)
                    _col_get(&vc, i, &vp, &vl, &vview, &vrel)
                    if krel:
                        PyBuffer_Release(&kview)
                        krel = False
                    if vrel:
                        PyBuffer_Release(&vview)
                        vrel = False
                    size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl, hsize)
                    if size > max_record_size:
                        raise RecordTooLargeError(
                            f"record {i} is {size} bytes when serialized, larger than the "
                            f"{max_record_size} bytes max_request_size allows")

            # ---- the loop ----
            self._acquire()
            locked = True
            if self._closed:
                raise ProducerClosedError("the producer is closed")
            ts = self._topic_locked(topic)
            if sticky:
                ts.available = available_partitions
                single = self._sticky.partition(topic, available_partitions)
            cur_p = -1
            for i in range(n):
                _col_get(&kc, i, &kp, &kl, &kview, &krel)
                _col_get(&vc, i, &vp, &vl, &vview, &vrel)
                p = pp[i] if pp != NULL else single
                if p != cur_p:
                    pq = self._pq_locked(ts, p)
                    cur_p = p
                r = 0
                switched = False
                while True:
                    nb = PyList_GET_SIZE(pq.batches)
                    if nb:
                        batch = <ProducerBatch>PyList_GET_ITEM(pq.batches, nb - 1)
                        if not batch._full:
                            r = batch.builder.append_raw(timestamp_ms, kp, kl, vp, vl, headers)
                            if not r:
                                batch._full = True
                    if r or not sticky or switched:
                        break
                    # the sticky partition needs a new batch: move to another partition first
                    switched = True
                    np = self._sticky.next_partition(topic, available_partitions, p)
                    single = np
                    if np == p:
                        break
                    p = np
                    pq = self._pq_locked(ts, p)
                    cur_p = p
                if not r:
                    size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl, hsize)
                    if size < self.batch_size:
                        size = self.batch_size
                    if not self.buffer_pool.try_allocate(size):
                        self._release()
                        locked = False
                        self.buffer_pool.allocate(size, max_block_ms)
                        self._acquire()
                        locked = True
                        if self._closed:
                            self.buffer_pool.deallocate(size)
                            raise ProducerClosedError("the producer was closed while waiting "
                                                      "for memory")
                        nb = PyList_GET_SIZE(pq.batches)
                        if nb:
                            batch = <ProducerBatch>PyList_GET_ITEM(pq.batches, nb - 1)
                            if not batch._full:
                                r = batch.builder.append_raw(timestamp_ms, kp, kl, vp, vl, headers)
                                if r:
                                    self.buffer_pool.deallocate(size)
                                else:
                                    batch._full = True
                    if not r:
                        try:
                            batch = self._new_batch(pq, now_ms, size)
                            if not batch.builder.append_raw(timestamp_ms, kp, kl, vp, vl, headers):
                                raise RuntimeError("BatchBuilder refused the first record of a "
                                                   "new batch")
                        except BaseException:
                            self.buffer_pool.deallocate(size)
                            raise
                        pq.batches.append(batch)
                        self._incomplete.add(batch)
                        self._wakeup = True
                # the record is in `batch`
                batch.record_count += 1
                lst = batch._last_listener
                if lst is None or lst.future is not future:
                    lst = _Listener.__new__(_Listener)
                    lst.future = future
                    lst.count = 0
                    if batch._listeners is None:
                        batch._listeners = [lst]
                    else:
                        batch._listeners.append(lst)
                    batch._last_listener = lst
                lst.count += 1
                appended += 1
                if krel:
                    PyBuffer_Release(&kview)
                    krel = False
                if vrel:
                    PyBuffer_Release(&vview)
                    vrel = False
                if (i & 4095) == 4095:
                    # let other producer threads and the sender in
                    self._release()
                    locked = False
                    self._acquire()
                    locked = True
                    if self._closed:
                        raise ProducerClosedError("the producer was closed during send_batch")
        except BaseException as e:
            err = e
        finally:
            if krel:
                PyBuffer_Release(&kview)
            if vrel:
                PyBuffer_Release(&vview)
            if locked:
                self._release()
        future._seal(appended)
        if err is not None:
            try:
                err.records_appended = appended
            except Exception:
                pass
            raise err
        return appended

    # -- sender side ----------------------------------------------------------------------------

    def ready(self, cluster, int64_t now_ms):
        """ready(cluster, now_ms) -> (ready_nodes: set, next_ready_check_ms: int,
        unknown_leader_topics: set)

        ``next_ready_check_ms`` is a delay: the time until the first not-yet-sendable head batch
        becomes sendable (``NO_DEADLINE`` if none)."""
        cdef list cands = []
        cdef _PartitionQueue pq
        cdef ProducerBatch head
        cdef int64_t waited, time_to_wait, since, next_check = _NO_DEADLINE
        cdef bint backing_off, full, sendable, always
        cdef set ready_nodes = set()
        cdef set unknown = set()
        cdef object leader
        always = len(self.buffer_pool._waiters) > 0
        self._acquire()
        try:
            always = always or self._closed or self._flushes > 0
            for pq in self._queues:
                if pq.muted or not pq.batches or (self.transactional and not pq.txn_added):
                    continue
                head = <ProducerBatch>PyList_GET_ITEM(pq.batches, 0)
                since = head.last_attempt_ms if head.last_attempt_ms > head.created_ms \
                    else head.created_ms
                waited = now_ms - since
                if head.attempts > 0:
                    backing_off = waited < self.retry_backoff_ms
                    time_to_wait = self.retry_backoff_ms
                else:
                    backing_off = False
                    time_to_wait = self.linger_ms
                full = PyList_GET_SIZE(pq.batches) > 1 or head._is_full()
                sendable = (full or waited >= time_to_wait or always) and not backing_off
                pq._sendable = sendable
                pq._time_left = time_to_wait - waited if time_to_wait > waited else 0
                cands.append(pq)
        finally:
            self._release()
        for pq in cands:
            leader = cluster.leader_for(pq.topic, pq.partition)
            if leader is None or leader < 0:
                unknown.add(pq.topic)
            elif leader in ready_nodes:
                continue
            elif pq._sendable:
                ready_nodes.add(leader)
            elif pq._time_left < next_check:
                next_check = pq._time_left
        return ready_nodes, next_check, unknown

    def drain(self, cluster, nodes, int64_t max_request_size, int64_t now_ms):
        """drain(cluster, nodes, max_request_size, now_ms) -> dict[node, list[ProducerBatch]]

        Per node: at most one batch per partition, partitions visited round-robin from where the
        previous drain of that node stopped, stopping before ``max_request_size`` would be
        exceeded (a first batch is always taken). Drained batches are closed (compressed)
        outside the lock; with ``ordered`` their partitions are muted."""
        cdef dict result = {}
        cdef list parts, out, closed_ok
        cdef Py_ssize_t n, start, idx, k
        cdef int64_t size, bsize
        cdef _PartitionQueue pq
        cdef ProducerBatch first
        cdef object tp
        for node in nodes:
            parts = list(cluster.partitions_for_node(node))
            n = len(parts)
            out = []
            if n == 0:
                result[node] = out
                continue
            start = self._drain_index.get(node, 0) % n
            idx = start
            size = 0
            self._acquire()
            try:
                for k in range(n):
                    tp = parts[idx]
                    idx = (idx + 1) % n
                    pq = self._find_locked(tp[0], tp[1])
                    if pq is None or pq.muted or not pq.batches or (
                            self.transactional and not pq.txn_added):
                        continue
                    first = <ProducerBatch>PyList_GET_ITEM(pq.batches, 0)
                    if first.attempts > 0 and now_ms - first.last_attempt_ms < self.retry_backoff_ms:
                        continue
                    bsize = first.builder.estimated_size_c()
                    if out and size + bsize > max_request_size:
                        idx = (idx + n - 1) % n     # start with this one next time
                        break
                    del pq.batches[0]
                    first._full = True
                    first.drained_ms = now_ms
                    size += bsize
                    out.append(first)
                    if self.ordered:
                        pq.muted = True
                else:
                    idx = (start + 1) % n           # full round: rotate the start
                self._drain_index[node] = idx
            finally:
                self._release()
            # compress outside the lock (the codec releases the GIL)
            closed_ok = []
            for first in out:
                try:
                    first.builder.close()
                except Exception as e:
                    _log.exception("closing batch %r failed", first)
                    first.complete(-1, -1, e)
                    self.deallocate(first)
                    if self.ordered:
                        self.unmute(first.topic, first.partition)
                    continue
                closed_ok.append(first)
            result[node] = closed_ok
        return result

    def reenqueue(self, ProducerBatch batch, int64_t now_ms):
        """reenqueue(batch, now_ms): put a batch to retry back at the head of its deque, after
        retried batches with a lower base_sequence (so sequences stay in order)."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._pq_locked(self._topic_locked(batch.topic), batch.partition)
            batch.attempts += 1
            batch.last_attempt_ms = now_ms
            batch.in_retry = True
            pq.batches.insert(_retry_position(pq.batches, batch.base_sequence), batch)
        finally:
            self._release()

    def split_and_reenqueue(self, ProducerBatch batch, int64_t now_ms, int parts=2):
        """split_and_reenqueue(batch, now_ms, parts=2) -> list[ProducerBatch] or None

        For a drained batch the broker refused as too large (MESSAGE_TOO_LARGE): its records,
        re-encoded and compressed again into up to ``parts`` batches balanced by size
        (``BatchBuilder.split``), go to the head of the partition's queue in record order (after
        retried batches with a lower sequence), and the pieces are returned. They take the
        records over: a record's future and callback, and its count in its ``send_batch``
        future, follow the piece that holds it; ``batch`` completes once every piece has. The
        pieces keep ``created_ms`` (the delivery timeout runs on) and the sequence range: piece k
        carries the producer id and epoch of ``batch`` and ``base_sequence`` + the index of its
        first record (stamped), so batches sequenced after ``batch`` stay valid. They are sent
        without a retry backoff. The buffer-pool reservation of ``batch`` is shared among them.

        None (nothing changed) for a batch of one record, a completed or already split one, or
        one whose records cannot be told apart by ``send_batch`` future (its records mixed with
        ``send``/``produce`` records without a callback, which the batch only counts)."""
        cdef list builders, pieces, owners, listeners, thunks, lists
        cdef ProducerBatch c
        cdef BatchBuilder nb
        cdef FutureRecordMetadata f
        cdef _Listener l, src
        cdef _PartitionQueue pq
        cdef int32_t first, i, k
        cdef Py_ssize_t j, last, li
        cdef int64_t share, reserved
        if (batch._done or batch._children is not None or batch.builder is None
                or batch.record_count < 2 or batch.builder._count != batch.record_count):
            return None
        _done_acquire()
        owners = _record_owners(batch)
        _done_release()
        if owners is None:
            return None
        # re-encode and compress outside every lock (the codecs release the GIL)
        builders = batch.builder.split(parts)
        pieces = []
        first = 0
        for nb in builders:
            nb.close()
            c = ProducerBatch.__new__(ProducerBatch)
            _init_batch(c, batch.topic, batch.partition, nb, batch.created_ms)
            c.topic_partition = batch.topic_partition
            c.record_count = nb._count
            c._full = True
            c._parent = batch
            c._first_index = first
            if batch.base_sequence >= 0:
                c.producer_id = batch.producer_id
                c.producer_epoch = batch.producer_epoch
                c.base_sequence = (batch.base_sequence + first) & 0x7fffffff
            nb.stamp(c.producer_id, c.producer_epoch, c.base_sequence, self.transactional)
            first += nb._count
            pieces.append(c)
        # hand callbacks and send_batch counts over to the pieces
        _done_acquire()
        try:
            owners = _record_owners(batch)   # again: add_callback may have run meanwhile
            if owners is None or batch._done:
                return None
            listeners = batch._listeners
            thunks = batch._thunks
            k = 0
            for c in pieces:
                last = -1
                l = None
                for j in range(c._first_index, c._first_index + c.record_count):
                    li = <Py_ssize_t>owners[j]
                    if li < 0:
                        continue
                    if li != last:
                        src = <_Listener>listeners[li]
                        l = _Listener.__new__(_Listener)
                        l.future = src.future
                        l.count = 0
                        if c._listeners is None:
                            c._listeners = [l]
                        else:
                            c._listeners.append(l)
                        last = li
                    l.count += 1
            if thunks is not None:
                for f in thunks:
                    i = f.index
                    _resolve(f.batch, &i)
                    k = len(pieces) - 1
                    while k > 0 and (<ProducerBatch>pieces[k])._first_index > i:
                        k -= 1
                    c = <ProducerBatch>pieces[k]
                    if c._thunks is None:
                        c._thunks = [f]
                    else:
                        c._thunks.append(f)
            batch._thunks = None
            batch._listeners = None
            batch._last_listener = None
            batch._children_left = len(pieces)
            batch._children = pieces
        finally:
            _done_release()
        # queue them where the batch would be retried, and move the memory over
        self._acquire()
        try:
            pq = self._pq_locked(self._topic_locked(batch.topic), batch.partition)
            j = _retry_position(pq.batches, batch.base_sequence)
            pq.batches[j:j] = pieces
            reserved = batch.reserved
            share = reserved // len(pieces)
            for c in pieces:
                c.reserved = share
                self._incomplete.add(c)
            (<ProducerBatch>pieces[len(pieces) - 1]).reserved += reserved - share * len(pieces)
            self._incomplete.discard(batch)
            batch.reserved = 0
            batch.builder = None
        finally:
            self._release()
        return pieces

    # -- transactions ------------------------------------------------------------------------------

    def txn_pending_partitions(self):
        """txn_pending_partitions() -> list of (topic, partition): the partitions holding queued
        batches that are not yet part of the current transaction (AddPartitionsToTxn first)."""
        cdef list out = []
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for pq in self._queues:
                if pq.batches and not pq.txn_added:
                    out.append(pq.tp)
        finally:
            self._release()
        return out

    def txn_mark_added(self, partitions):
        """txn_mark_added(partitions): these (topic, partition) pairs joined the transaction; their
        batches may be drained from now on."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for topic, partition in partitions:
                self._pq_locked(self._topic_locked(topic), partition).txn_added = True
        finally:
            self._release()

    def txn_reset(self):
        """txn_reset(): the transaction ended; no partition is part of the next one yet."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for pq in self._queues:
                pq.txn_added = False
        finally:
            self._release()

    def mute(self, str topic, int32_t partition):
        self._acquire()
        try:
            self._pq_locked(self._topic_locked(topic), partition).muted = True
        finally:
            self._release()

    def unmute(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            if pq is not None:
                pq.muted = False
        finally:
            self._release()

    def is_muted(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return pq is not None and pq.muted
        finally:
            self._release()

    def expired_batches(self, int64_t now_ms):
        """expired_batches(now_ms) -> list: remove and return queued batches with
        ``created_ms + delivery_timeout_ms <= now_ms``; the caller completes them with
        ``DeliveryTimeoutError`` and deallocates them."""
        cdef list out = []
        cdef _PartitionQueue pq
        cdef ProducerBatch b
        cdef Py_ssize_t i, nb
        self._acquire()
        try:
            for pq in self._queues:
                nb = PyList_GET_SIZE(pq.batches)
                if not nb:
                    continue
                i = 0
                while i < nb:
                    b = <ProducerBatch>PyList_GET_ITEM(pq.batches, i)
                    if b.created_ms + self.delivery_timeout_ms <= now_ms:
                        b._full = True
                        out.append(b)
                        del pq.batches[i]
                        nb -= 1
                    else:
                        i += 1
        finally:
            self._release()
        return out

    def deallocate(self, ProducerBatch batch):
        """deallocate(batch): give its memory back to the pool, forget it (idempotent)."""
        cdef int64_t size
        self._acquire()
        try:
            self._incomplete.discard(batch)
            size = batch.reserved
            batch.reserved = 0
            batch.builder = None
        finally:
            self._release()
        if size:
            self.buffer_pool.deallocate(size)

    # -- flush / close -----------------------------------------------------------------------------

    def begin_flush(self):
        """Make every queued batch ready until this thread's flush ends."""
        cdef object me = threading.get_ident()
        self._acquire()
        self._flushes += 1
        self._flush_threads[me] = self._flush_threads.get(me, 0) + 1
        self._release()

    def end_flush(self):
        """End this thread's flush if ``await_flush_completion`` has not already done so."""
        self._acquire()
        try:
            self._end_flush_locked()
        finally:
            self._release()

    def _end_flush_locked(self):
        cdef object me = threading.get_ident()
        cdef object k = self._flush_threads.get(me)
        if k is None:
            return
        if k <= 1:
            del self._flush_threads[me]
        else:
            self._flush_threads[me] = k - 1
        if self._flushes > 0:
            self._flushes -= 1

    def wakeup_needed(self):
        """True (once) when an append filled a batch or started one since the last call: the
        sender should be woken to look at it."""
        cdef bint w = self._wakeup
        if w:
            self._wakeup = False
        return w

    def flush_in_progress(self):
        return self._flushes > 0

    def await_flush_completion(self, timeout_s=None):
        """await_flush_completion(timeout_s=None) -> int: wait for the batches incomplete now;
        return the number of their records still undelivered at the deadline. Ends the flush
        started by ``begin_flush``."""
        cdef list snapshot
        cdef ProducerBatch b
        cdef int64_t left = 0
        cdef double deadline = 0, remaining
        self._acquire()
        snapshot = list(self._incomplete)
        self._release()
        try:
            if timeout_s is not None:
                deadline = time.monotonic() + timeout_s
            for b in snapshot:
                if b._done:
                    continue
                if timeout_s is None:
                    b.wait(None)
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not b.wait(remaining):
                        break
        finally:
            self._acquire()
            try:
                self._end_flush_locked()
            finally:
                self._release()
        for b in snapshot:
            if not b._done:
                left += b.record_count
        return left

    def has_undrained(self):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            for pq in self._queues:
                if pq.batches:
                    return True
            return False
        finally:
            self._release()

    def has_incomplete(self):
        return len(self._incomplete) > 0

    def incomplete_record_count(self):
        cdef ProducerBatch b
        cdef int64_t n = 0
        self._acquire()
        try:
            for b in self._incomplete:
                if not b._done:
                    n += b.record_count
        finally:
            self._release()
        return n

    def abort_undrained(self, error=None):
        """abort_undrained(error) -> list[ProducerBatch]: remove every queued batch; with an
        ``error``, also complete them with it and give their memory back (outside the lock)."""
        cdef list out = []
        cdef _PartitionQueue pq
        cdef ProducerBatch b
        self._acquire()
        try:
            for pq in self._queues:
                if pq.batches:
                    for b in pq.batches:
                        b._full = True
                    out.extend(pq.batches)
                    pq.batches = []
        finally:
            self._release()
        if error is not None:
            for b in out:
                b.complete(-1, -1, error)
                self.deallocate(b)
        return out

    def close(self):
        """No more appends (``ProducerClosedError``); every queued batch becomes ready."""
        global _open_accumulators
        self._acquire()
        self._closed = True
        self._release()
        if self._counted:
            self._counted = False
            _open_accumulators -= 1

    @property
    def closed(self):
        return self._closed

    # -- stats -------------------------------------------------------------------------------------

    def queued_batches(self, str topic, int32_t partition):
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return 0 if pq is None else len(pq.batches)
        finally:
            self._release()

    def queued(self, str topic, int32_t partition):
        """The queued (undrained) batches of a partition, head first (a copy)."""
        cdef _PartitionQueue pq
        self._acquire()
        try:
            pq = self._find_locked(topic, partition)
            return [] if pq is None else list(pq.batches)
        finally:
            self._release()

    def stats(self):
        """dict: batches_queued, records_queued, bytes_queued (uncompressed estimate),
        partitions_muted, incomplete_batches, buffer_total, buffer_available, buffer_waiters."""
        cdef _PartitionQueue pq
        cdef ProducerBatch b
        cdef int64_t nb = 0, nr = 0, nbytes = 0, muted = 0
        self._acquire()
        try:
            for pq in self._queues:
                if pq.muted:
                    muted += 1
                for b in pq.batches:
                    nb += 1
                    nr += b.record_count
                    if b.builder is not None:
                        nbytes += b.builder.estimated_size_c()
            inc = len(self._incomplete)
        finally:
            self._release()
        return {
            "batches_queued": nb,
            "records_queued": nr,
            "bytes_queued": nbytes,
            "partitions_muted": muted,
            "incomplete_batches": inc,
            "buffer_total": self.buffer_pool.total,
            "buffer_available": self.buffer_pool.available_memory,
            "buffer_waiters": self.buffer_pool.queued,
        }
