# cython: language_level=3
"""The compiled half of :class:`fastkafka.compat.confluent.Producer`: ``produce()``, ``poll(0)``
and ``len()`` as C calls, and confluent-kafka's delivered :class:`Message` as a C type.

Per record, ``produce()`` makes one :class:`Message` holding what the report needs from the
caller (key, value, headers, callback, the produce time) and sends the record with a
:class:`~fastkafka._producer.batch.LoopSink` as its outcome's destination (the machinery of
fastkafka.aio): when the record's batch completes, the I/O thread only appends the record's future
to the sink's list (no metadata object, no Python call per record); the first append since
``poll()`` last took the list wakes a ``poll()`` that sleeps (:class:`_Waker`, the sink's "event
loop"). ``poll()`` takes the whole list in one go and, per record, fills its Message from the
future's batch (partition, offset, timestamp, error) and calls the callback on the caller's thread.

Counters need no lock: ``produce()`` counts what was produced and ``poll()`` what was served, each
under the GIL; ``len()`` is their difference, as in confluent-kafka (delivered or not, a record
counts until its report is served).
"""
cimport cython
from libc.stdint cimport int32_t, int64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from fastkafka._producer.batch cimport FutureRecordMetadata, LoopSink, ProducerBatch, resolve_batch


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)
    void PyObject_GC_Track(void *op)
    bint PyFunction_Check(object o)
    void *PyFunction_GET_CLOSURE(object o)
    void *PyFunction_GET_DEFAULTS(object o)
    void *PyFunction_GET_KW_DEFAULTS(object o)
from fastkafka._producer.sendpath cimport ProducerCore

#: confluent-kafka's timestamp types (``Message.timestamp()[0]``).
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2
#: confluent-kafka's offset of a record that has none (failed, or acks=0).
OFFSET_INVALID = -1001

cdef int64_t _OFFSET_INVALID = -1001
cdef object _NO_REPORT = object()       # the waiter of a record served without a callback
cdef list _EMPTY = []                   # never appended to


cdef inline bint _leads_nowhere(object cb) noexcept:
    """Whether ``cb`` holds nothing that can lead back to a producer but its module's globals: a
    function without closure or defaults. (A module whose globals hold the producer keeps it
    alive anyway; a closure or bound method may be the only path back to a dropped one.)"""
    return (PyFunction_Check(cb) and PyFunction_GET_CLOSURE(cb) == NULL
            and PyFunction_GET_DEFAULTS(cb) == NULL and PyFunction_GET_KW_DEFAULTS(cb) == NULL)


cdef inline int64_t _now_ns() noexcept:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <int64_t>t.tv_sec * 1000000000 + t.tv_nsec


cdef inline object _as_bytes(object v):
    """What librdkafka hands back for a key or value given to produce(): bytes (str: UTF-8)."""
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, str):
        return (<str>v).encode("utf-8")
    return bytes(v)


@cython.final
@cython.freelist(4096)
cdef class Message:
    """Message(topic, partition, offset, key, value, headers, ts_type, ts, error, latency)

    A delivered (or failed) record as confluent-kafka's delivery callbacks receive it:
    ``topic()``, ``partition()`` and ``offset()`` (None when it has none), ``key()``, ``value()`` (the objects given to produce()), ``headers()``,
    ``timestamp()`` (``(type, ms)``), ``len()``, ``error()`` (a KafkaError or None) and
    ``latency()`` (seconds from produce() to the report being taken by poll()/flush())."""


    def __init__(self, topic, partition, offset, key, value, headers, ts_type, ts, error,
                 latency):
        self._topic, self._key, self._value, self._headers = topic, key, value, headers
        self._partition, self._offset, self._ts_type, self._ts = partition, offset, ts_type, ts
        self._error = error
        self._latency = -1.0 if latency is None else latency

    def topic(self):
        return self._topic

    def partition(self):
        """The record's partition; None when it has none (it failed before one was chosen), as
        confluent-kafka's."""
        return None if self._partition < 0 else self._partition

    def offset(self):
        """The record's offset; None when it has none (failed, or acks=0), as confluent-kafka's."""
        return None if self._offset < 0 else self._offset

    def key(self):
        """The key as bytes (a str given is its UTF-8, as librdkafka's copy), or None."""
        return _as_bytes(self._key)

    def value(self):
        """The value as bytes (a str given is its UTF-8, as librdkafka's copy), or None."""
        return _as_bytes(self._value)

    def headers(self):
        """The headers as a list of pairs, or None: a delivery report has none, as
        confluent-kafka's (librdkafka does not hand them back); a Message made with headers
        returns them (a dict as its list of items)."""
        h = self._headers
        if isinstance(h, dict):
            return list(h.items())
        return None if h is None else list(h)

    def timestamp(self):
        return (self._ts_type, self._ts)

    def len(self):
        return 0 if self._value is None else len(_as_bytes(self._value))

    def __len__(self):
        return 0 if self._value is None else len(_as_bytes(self._value))

    def error(self):
        return self._error

    def latency(self):
        """Seconds from produce() to the delivery report (taken by poll()/flush()), or None."""
        return None if self._latency < 0 else self._latency

    def __repr__(self):
        return (f"<Message {self._topic} [{self._partition}] @{self._offset}"
                f"{' error ' + self._error.name() if self._error is not None else ''}>")


@cython.final
cdef class _Waker:
    """The poll sink's "event loop": the I/O thread calls :meth:`call_soon_threadsafe` at the
    first completion since poll() last took the list; it wakes a poll()/flush() that sleeps."""


    def __cinit__(self, event):
        self._set = event.set

    def call_soon_threadsafe(self, fn, *args):
        if self._detached:
            # nobody will take the list: empty it (its futures refer to the sink: a cycle the
            # collector cannot see through untracked futures)
            self._sink._items = []
            self._sink._scheduled = False
        elif self.sleeping:
            self._set()

    def is_closed(self):
        return False

    def wake(self):
        """wake(): what an event besides a report (an error_cb event) calls."""
        if self.sleeping:
            self._set()


cdef class PollCore:
    """Base class of :class:`fastkafka.compat.confluent.Producer`: ``produce()``, ``poll()``'s
    report serving and ``len()``. The subclass calls :meth:`_init_poll` once its
    :class:`fastkafka.Producer` exists, and provides ``_hold`` (a record that waits for its
    topic's metadata), ``_metadata_known`` (with ``_metadata_first``), ``_produce_failed`` (the
    errors of a
    refused record) and ``_poll`` (a poll that waits, or serves more than reports)."""


    def __cinit__(self, *args, **kwargs):
        self._taken = _EMPTY
        self._failed = []
        self._held = {}

    def _init_poll(self, ProducerCore core not None, wake_event, default_cb, bint only_error,
                   int64_t max_messages, events, to_error, bint fast_poll):
        self._core = core
        self._waker = _Waker(wake_event)
        self._sink = LoopSink(self._waker)
        self._waker._sink = self._sink
        self._default_cb = default_cb
        self._only_error = only_error
        self._max_messages = max_messages
        self._events = events
        self._to_error = to_error
        self._fast_poll = fast_poll

    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None, callback=None,
                timestamp=0, headers=None):
        """produce(topic, [value], [key], [partition], [on_delivery], [timestamp], [headers])

        Queue one record (confluent-kafka's arguments: ``partition=-1`` lets the partitioner
        choose, ``timestamp=0`` is now, ``callback`` is another name for ``on_delivery``). The
        delivery report ``on_delivery(err, msg)`` runs in a later ``poll()`` or ``flush()``.
        Raises ``BufferError`` when ``queue.buffering.max.messages`` records wait (call
        ``poll()`` and retry), ``KafkaException`` for a record that cannot be sent (too large:
        ``MSG_SIZE_TOO_LARGE``; a partition that does not exist: ``_UNKNOWN_PARTITION``),
        ``TypeError`` for a value of the wrong type, ``RuntimeError`` after ``close()``. Never
        blocks: a record of a topic whose metadata is not known yet waits in the queue (and the
        topic's later records behind it) until it is, or fails with ``_MSG_TIMED_OUT`` through
        its delivery report once ``message.timeout.ms`` passed, as in confluent-kafka."""
        cdef Message m = None
        cdef FutureRecordMetadata f
        cb = on_delivery if on_delivery is not None else callback
        if cb is None:
            cb = self._default_cb
        elif not callable(cb):
            raise TypeError(f"on_delivery must be a callable(err, msg), got {type(cb).__name__}")
        if partition is None or partition == -1:
            partition = None
        if timestamp is None or timestamp == 0:
            timestamp = None                # the core's clock: the create time of the record
        if self._core is None:
            raise TypeError("Producer.__init__ was not called")
        if self._closed:
            raise RuntimeError("Producer has been closed")
        if self._max_messages and self._produced - self._served >= self._max_messages:
            raise BufferError(
                f"Local: Queue full ({self._produced - self._served} messages waiting, "
                f"queue.buffering.max.messages={self._max_messages}): call poll() to serve "
                f"delivery reports, then produce again")
        if cb is not None:
            m = Message.__new__(Message)
            m._cb = cb
            m._key = key
            m._value = value
            m._t0 = _now_ns()           # (no headers: a delivery report has none, as librdkafka's)
        self._produced += 1                 # before the send: a poll() on another thread may serve it
        if (self._holding and topic in self._held) or (
                self._metadata_first and not self._metadata_known(topic)):
            # records of this topic wait for its metadata: this one waits behind them (order)
            try:
                self._hold(topic, value, key, partition, timestamp, headers, m)
            except BaseException:
                self._produced -= 1
                raise
            return
        try:
            f = <FutureRecordMetadata>self._core._send(topic, value, key, partition, timestamp,
                                                       headers, self._sink, True, True)
        except BaseException as e:
            self._produced -= 1
            self._produce_failed(e, m, (topic, value, key, partition, timestamp, headers))
            return
        self._track(f, m)

    cdef int _track(self, FutureRecordMetadata f, Message m) except -1:
        """Attach the record's Message (or _NO_REPORT) to its future, set after the send: a
        report taken before this (another thread's poll) waits for it. Left out of the cyclic
        garbage collector while in flight (it would otherwise scan them again and again when
        many wait, e.g. flush() only at the end), unless the callback may be the only way back
        to this producer: a cycle through an untracked object is never collected, and a dropped
        producer would stay open."""
        if m is None:
            f.waiter = _NO_REPORT
            PyObject_GC_UnTrack(<void *>f)
        else:
            f.waiter = m
            if _leads_nowhere(m._cb):
                PyObject_GC_UnTrack(<void *>f)
                PyObject_GC_UnTrack(<void *>m)
                m._untracked = True
        return 0

    def _send_held(self, topic, value, key, partition, timestamp, headers, Message m):
        """Send a record that waited for its topic's metadata (counted as produced already);
        raises what the core raises (metadata still missing: KafkaTimeoutError)."""
        cdef FutureRecordMetadata f = <FutureRecordMetadata>self._core._send(
            topic, value, key, partition, timestamp, headers, self._sink, True, True)
        self._track(f, m)

    def _message_deadline_ns(self, Message m):
        """produce()'s time of a record with a Message (CLOCK_MONOTONIC ns), or now."""
        return m._t0 if m is not None else _now_ns()

    def _queue_failed(self, Message m, topic, err, bint counted=False):
        """Queue the report of a record that failed before it reached a batch (its topic's
        error, or no metadata within message.timeout.ms), counted as produced (``counted``:
        it is already); served by the next poll()."""
        if not counted:
            self._produced += 1
        if m is not None:
            m._topic = topic
            m._partition = -1
            m._offset = _OFFSET_INVALID
            m._ts_type = 0              # TIMESTAMP_NOT_AVAILABLE, -1: as librdkafka's
            m._ts = -1
            m._error = self._to_error(err)
            m._latency = (_now_ns() - m._t0) / 1e9
        self._failed.append(m)
        self._waker.wake()

    def _detach(self):
        """The producer is being dropped: forget the reports waiting, and those to come."""
        if self._waker is not None:
            self._waker._detached = True
            self._sink._items = []
            self._sink._scheduled = False
        self._taken = _EMPTY
        self._pos = 0
        del self._failed[:]

    def __len__(self):
        """Records produced whose delivery report has not been served by poll()/flush() yet
        (delivered or not): confluent-kafka's ``len(producer)``; 0 once closed."""
        if self._closed:
            return 0
        return self._produced - self._served

    def _has_reports(self):
        """Whether a report waits to be served."""
        return bool(self._failed) or self._pos < len(self._taken) or bool(self._sink._items)

    def poll(self, timeout=None):
        """poll(timeout=None) -> int

        Serve the delivery reports, error_cb and stats_cb events queued, waiting up to
        ``timeout`` seconds (None or -1: forever) for the first; returns how many were served."""
        if self._closed:
            raise RuntimeError("Producer has been closed")
        if ((type(timeout) is int or type(timeout) is float) and timeout == 0 and self._fast_poll
                and not self._events and not self._holding):
            return self._serve_reports()
        return self._poll(timeout)

    cpdef Py_ssize_t _serve_reports(self) except -1:
        """Serve the delivery reports queued now, in order; returns how many. A callback's
        exception propagates, the reports after it stay queued."""
        cdef Py_ssize_t n = 0
        cdef FutureRecordMetadata f
        cdef Message m
        cdef ProducerBatch b
        cdef int32_t i
        cdef int64_t t1 = 0
        cdef list taken
        cdef LoopSink sink = self._sink
        cdef object last_exc = None, last_err = None
        while self._failed:
            w = self._failed.pop(0)
            self._served += 1
            n += 1
            if w is not None and (<Message>w)._cb is not None:
                m = <Message>w
                cb = m._cb
                m._cb = None
                cb(m._error, m)
        while True:
            taken = self._taken
            if self._pos >= len(taken):
                if not sink._items:
                    if taken is not _EMPTY:
                        self._taken = _EMPTY       # let the served futures (and batches) go
                        self._pos = 0
                    break
                # no Python code runs between these: the I/O thread appends with the GIL
                taken = sink._items
                sink._items = []
                sink._scheduled = False
                self._taken = taken
                self._pos = 0
                t1 = 0
            item = taken[self._pos]
            if type(item) is not FutureRecordMetadata:
                self._pos += 1
                continue
            f = <FutureRecordMetadata>item
            w = f.waiter
            if w is None:
                break           # its produce() (another thread) has not returned yet
            self._pos += 1
            self._served += 1
            n += 1
            f.waiter = None
            if w is _NO_REPORT:
                continue
            m = <Message>w
            if m._untracked:                    # the user may keep it: the GC sees it again
                m._untracked = False
                PyObject_GC_Track(<void *>m)
            i = f.index
            b = resolve_batch(f.batch, &i)
            exc = b.error
            if exc is None:
                if self._only_error:
                    m._cb = None
                    continue
                m._error = None
                m._offset = b.base_offset + i if b.base_offset >= 0 else _OFFSET_INVALID
                if b.log_append_time != -1:
                    m._ts_type = 2
                    m._ts = b.log_append_time
                else:
                    m._ts_type = 1
                    m._ts = f.timestamp_ms
            else:
                if exc is not last_exc:         # one KafkaError per failed batch
                    last_err = self._to_error(exc)
                    last_exc = exc
                m._error = last_err
                m._offset = _OFFSET_INVALID
                m._ts_type = 1
                m._ts = f.timestamp_ms
            m._topic = b.topic
            m._partition = b.partition
            if t1 == 0:
                t1 = _now_ns()
            m._latency = (t1 - m._t0) / 1e9 if t1 > m._t0 else 0.0
            cb = m._cb
            m._cb = None
            cb(m._error, m)
        return n
