# cython: language_level=3
"""The compiled half of :class:`fastkafka.Producer`: ``send()`` and ``produce()`` as one C call.

Per record, everything the Python layer used to do in several frames happens here without leaving C
on the common path: type checks of key and value (bytes take no buffer request, a str gives the
UTF-8 CPython keeps in it), the wall clock for
the timestamp, the partition (the router, the base class: per-topic cache, murmur2 or sticky;
fastkafka/_producer/router.pyx), the size check against ``max_request_size``, the append into the
accumulator, and the sender wake-up when a batch filled or started.

Rare paths call back into the Python subclass through the hooks declared in sendpath.pxd and
router.pxd: ``_topic_info`` (metadata missing or stale, may block), ``_closed_error`` and
``_too_large`` (the error messages).
"""
cimport cython
from cpython.buffer cimport PyBuffer_Release, PyObject_CheckBuffer
from libc.stdint cimport int32_t, int64_t
from posix.time cimport CLOCK_REALTIME

from fastkafka._producer.accumulator cimport WAKE_GIL, WAKE_NONE, WAKE_NOW, RecordAccumulator
from fastkafka._producer.batch cimport BatchFuture, FutureRecordMetadata, LoopFuture, LoopSink
from fastkafka._net.cells cimport VersionCell
from fastkafka._net.clock cimport clock_ms
from fastkafka._net.ioloop cimport Poller, give_way
from fastkafka._producer.router cimport Router
from fastkafka._wire.records cimport get_view, headers_encoded_size, record_size_c

from asyncio import _get_running_loop

from fastkafka.errors import (BufferExhaustedError, InvalidRecordError, MalformedRecordError,
                              ProducerClosedError, RecordTooLargeError, SerializationError)

#: Batch header (61 bytes) plus the Produce request framing around one batch, with margin.
REQUEST_OVERHEAD = 61 + 256
cdef Py_ssize_t _REQUEST_OVERHEAD = REQUEST_OVERHEAD


cdef int64_t check_timestamp(object timestamp_ms) except -1:
    """The record timestamp: now (wall clock, ms) for None; InvalidRecordError for a non-int or a
    negative one."""
    if timestamp_ms is None:
        return clock_ms(CLOCK_REALTIME)
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
        raise InvalidRecordError(
            f"timestamp_ms must be an int or None, got {type(timestamp_ms).__name__}")
    if timestamp_ms < 0:
        raise MalformedRecordError(f"timestamp_ms must be >= 0, got {timestamp_ms}")
    if timestamp_ms > 9223372036854775807:
        raise MalformedRecordError(f"timestamp_ms must fit in 64 bits, got {timestamp_ms}")
    return <int64_t>timestamp_ms


def validate_timestamp(timestamp_ms):
    """validate_timestamp(timestamp_ms) -> int: ``timestamp_ms``, or now for None (see send)."""
    return check_timestamp(timestamp_ms)


def validate_field(obj, str name):
    """validate_field(obj, name) -> None: raises what ``send`` raises for ``obj`` as its key or
    value called ``name`` (bytes-like, str or None)."""
    cdef Py_buffer view
    cdef const char *p
    cdef Py_ssize_t n
    if get_view(obj, name, &view, &p, &n):
        PyBuffer_Release(&view)


cdef object delivery_alias(object on_delivery, object callback):
    """``on_delivery`` for a send given ``callback`` (confluent-kafka's other name for it):
    InvalidRecordError when both are given or ``callback`` is not callable."""
    if on_delivery is not None:
        raise InvalidRecordError(
            "on_delivery and callback given: callback is another name for on_delivery (as in "
            "confluent-kafka); pass one of them")
    if not callable(callback):
        raise InvalidRecordError(
            f"callback must be a callable(err, metadata) or None, got {type(callback).__name__}")
    return callback


cdef Py_ssize_t check_headers(object headers) except -1:
    """The encoded size of ``headers`` (a list or tuple of (key, value) pairs, or a dict);
    InvalidRecordError naming the header for a wrong type, MalformedRecordError for a str key or
    value that is not valid Unicode (a lone surrogate cannot be encoded as UTF-8)."""
    try:
        return headers_encoded_size(headers)
    except TypeError as e:  # the same error type as every other bad field
        raise InvalidRecordError(f"headers: {e}") from None
    except (ValueError, BufferError) as e:  # a lone surrogate in a key, a released memoryview
        raise _header_error(headers, e) from None


def validate_headers(headers):
    """validate_headers(headers) -> int: the encoded size of ``headers`` (1 for None or none);
    raises what ``send`` raises for them."""
    return 1 if headers is None else check_headers(headers)


cdef object _header_error(object headers, object exc):
    """The MalformedRecordError naming the header whose key or value could not be read."""
    cdef Py_ssize_t i
    for i, item in enumerate(headers.items() if isinstance(headers, dict) else headers):
        key, value = item
        if isinstance(key, str):
            try:
                key.encode("utf-8")
            except UnicodeEncodeError as e:
                return MalformedRecordError(
                    f"headers: header {i}: key {key!r} cannot be encoded as UTF-8 ({e.reason} at "
                    f"position {e.start}); a header key must be str of valid Unicode or bytes")
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                return MalformedRecordError(
                    f"headers: header {i} ({key!r}): the str value cannot be encoded as UTF-8 "
                    f"({e.reason} at position {e.start}); a header value must be bytes-like, str "
                    f"of valid Unicode or None")
        elif value is not None and not isinstance(value, bytes):
            try:
                bytes(value)
            except (ValueError, BufferError) as e:
                if isinstance(value, memoryview) and isinstance(e, ValueError):
                    return MalformedRecordError(
                        f"headers: header {i}: the value's memoryview has been released; "
                        f"expected bytes, bytearray, memoryview or None")
                return MalformedRecordError(f"headers: header {i}: the value cannot be read ({e})")
    return MalformedRecordError(f"headers: {exc}")


cdef object _put(ProducerCore self, object topic, object value, object key, object partition,
                 object timestamp_ms, object headers, object on_delivery, bint want_future,
                 bint serialize, object ack):
    """send()'s checks and append of one record, and the I/O thread's wake-up. ``ack`` (a
    RecordAck, or None): the first of the record's extra callbacks, which _fire runs on the I/O
    thread before handing the record to its LoopSink."""
    cdef int w
    cdef Py_buffer kview, vview
    cdef const char *kp = NULL
    cdef const char *vp = NULL
    cdef Py_ssize_t kl = -1, vl = -1, hsize = 1, size
    cdef int krel = 0, vrel = 0
    cdef int64_t ts, max_block
    cdef int32_t p
    cdef object o
    if self._closed or self._txn_blocked:
        raise self._closed_error()
    if not isinstance(topic, str) or len(<str>topic) == 0:
        if isinstance(topic, str):
            raise MalformedRecordError("topic must be a non-empty string, got ''")
        raise InvalidRecordError(f"topic must be a non-empty string, got {topic!r}")
    if on_delivery is not None and not callable(on_delivery) and type(on_delivery) is not LoopSink:
        raise InvalidRecordError(
            f"on_delivery must be a callable(err, metadata) or None, got "
            f"{type(on_delivery).__name__}")
    if self._serializing and serialize:
        if self._value_serializer is not None:
            value = self._serialized(self._value_serializer, "value", topic, value, -1)
        if self._key_serializer is not None:
            key = self._serialized(self._key_serializer, "key", topic, key, -1)
    krel = get_view(key, "key", &kview, &kp, &kl)
    try:
        vrel = get_view(value, "value", &vview, &vp, &vl)
        try:
            ts = check_timestamp(timestamp_ms)
            p = self.route_c(topic, partition, key, kp, kl, &max_block)  # -1: sticky
            if headers is not None:
                hsize = check_headers(headers)
            size = record_size_c(0, 0, kl, vl, hsize) + _REQUEST_OVERHEAD
            if size > self._max_record_size:
                raise self._too_large(size)
            # now_ms -1: the accumulator reads the clock only if it starts a batch
            o = self._acc.append_c(topic, p, ts, kp, kl, vp, vl, headers, on_delivery, -1,
                                   max_block, want_future)
        finally:
            if vrel:
                PyBuffer_Release(&vview)
    finally:
        if krel:
            PyBuffer_Release(&kview)
    if ack is not None:     # set before give_way(): no completion can run in between
        (<FutureRecordMetadata>o).extra_callbacks = [ack]
    w = self._acc.wakeup_pending
    if w != WAKE_NONE:
        self._acc.wakeup_pending = WAKE_NONE
        if w == WAKE_GIL:
            self._poller.wakeup()       # a partition to add to the transaction
        elif w == WAKE_NOW:
            self._poller.wake_gil_free()   # a full batch: the GIL-free turn can send it
        else:
            self._poller.wake_at(self._acc.wake_deadline_ms)   # a new batch: at its linger deadline
    # An I/O thread waiting to take the GIL back gets it now, not after the switch interval.
    give_way()
    return o


@cython.final
cdef class _CountInto:
    """The records of one send_batch with interceptors, counted one at a time into its
    BatchFuture (each record's RecordAck calls it after the interceptors)."""
    cdef BatchFuture future

    def __call__(self, error, metadata):
        self.future._batch_done(1, error)


cdef class ProducerCore(Router):
    """Base class of :class:`fastkafka.Producer` holding the state ``send()`` touches per record.

    The subclass calls :meth:`_init_core` once its accumulator, metadata and sender exist, and
    provides the hooks ``_topic_info``, ``_closed_error`` and ``_too_large``. Its fields and hooks
    are declared in sendpath.pxd, the router's (its base class) in router.pxd."""

    def __cinit__(self, *args, **kwargs):
        self._closed = True               # until _init_core: a half-built producer is closed

    def _init_core(self, RecordAccumulator acc not None, VersionCell metadata_version not None,
                   Poller poller not None, partitioner, Py_ssize_t max_record_size, int64_t max_block_ms,
                   key_serializer=None, value_serializer=None, interceptors=None,
                   bint key_takes_topic=False, bint value_takes_topic=False):
        self._init_router(metadata_version, partitioner, max_block_ms)
        self._interceptors = interceptors     # an InterceptorChain (fastkafka/interceptors.py) or None
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._key_takes_topic = key_takes_topic and key_serializer is not None
        self._value_takes_topic = value_takes_topic and value_serializer is not None
        self._serializing = key_serializer is not None or value_serializer is not None
        self._acc = acc
        self._poller = poller
        self._max_record_size = max_record_size
        self._closed = False

    cpdef object _closed_error(self):
        """The error a send on a closed producer raises (a subclass says why it is closed)."""
        return ProducerClosedError("cannot send: the producer is closed")

    cpdef object _too_large(self, Py_ssize_t size):
        """The error for a record of ``size`` bytes (with batch overhead) over the limit."""
        return RecordTooLargeError(f"record of {size} bytes is larger than {self._max_record_size}")

    cpdef int32_t _sticky_partition(self, str topic, list available) except -2:
        """The router's hook: the accumulator's sticky partition of ``topic``."""
        return self._acc.sticky_partition(topic, available)

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
             on_delivery=None, callback=None):
        """send(topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
        on_delivery=None, callback=None) -> FutureRecordMetadata

        Queue one record; returns a future of its :class:`RecordMetadata`.

        ``value`` and ``key`` are bytes-like, str or None (any C-contiguous buffer, taken as its
        raw bytes; a str as its UTF-8); ``headers`` a list of (str|bytes, bytes-like|str|None)
        pairs or a dict of them (in its order). ``on_delivery(err, metadata)`` runs on the I/O
        thread once the record is acknowledged or has failed; ``callback`` is another name for it
        (confluent-kafka's), not to be given with it. Raises
        at once (sending nothing) for a record of the wrong type (InvalidRecordError) or an
        unusable value (MalformedRecordError, also a ValueError), too large, or for a partition
        that does not exist; the message names the argument. Blocks up to ``max_block_ms`` for
        metadata and buffer memory, except on the producer's I/O thread (from a delivery
        callback), which never waits: BufferExhaustedError (KafkaTimeoutError for metadata)
        at once instead, since waiting there would stop the thread that frees memory.
        """
        if callback is not None:
            on_delivery = delivery_alias(on_delivery, callback)
        return self._send(topic, value, key, partition, timestamp_ms, headers, on_delivery, True,
                          True)

    def produce(self, topic, value=None, key=None, partition=None, on_delivery=None,
                timestamp=None, headers=None, callback=None):
        """produce(topic, value=None, key=None, partition=None, on_delivery=None, timestamp=None,
        headers=None, callback=None) -> None

        confluent-kafka-style :meth:`send` that returns nothing and, without ``on_delivery``,
        allocates no future: the fastest way to queue one record. Same checks and errors as
        :meth:`send` (``callback``: confluent-kafka's other name for ``on_delivery``); delivery
        failures are seen through ``on_delivery``, ``flush()`` and ``metrics()``."""
        if callback is not None:
            on_delivery = delivery_alias(on_delivery, callback)
        self._send(topic, value, key, partition, timestamp, headers, on_delivery, False, True)

    def _send_waiter(self, LoopSink sink not None, waiter, topic, value=None, key=None,
                    partition=None, timestamp_ms=None, headers=None, waiter_ack=None):
        """_send_waiter(sink, waiter, topic, value=None, key=None, partition=None,
        timestamp_ms=None, headers=None, waiter_ack=None) -> None

        :meth:`send` for fastkafka.aio: the record's outcome goes to ``sink``, whose drain on the
        event loop resolves ``waiter`` (an asyncio future, a callable(err, metadata), or None).
        Call it on the sink's loop thread. ``value`` and ``key`` are taken as serialized:
        fastkafka.aio applies the serializers first (:meth:`_serialize`), once per record even
        when the record then waits for metadata or memory. With interceptors, ``on_send`` is not
        called here (fastkafka.aio calls it once per record, :meth:`InterceptorChain.intercept`):
        ``waiter_ack`` (its RecordAck) runs on the I/O thread before the outcome goes to the sink."""
        # With interceptors, fastkafka.aio ran on_send once already (a record may be tried again
        # after waiting for metadata or memory): only the acknowledgement is added here.
        cdef FutureRecordMetadata f = _put(self, topic, value, key, partition, timestamp_ms,
                                           headers, sink, True, False,
                                           None if self._interceptors is None else waiter_ack)
        f.waiter = waiter
        sink.pending += 1

    cdef object _serialized(self, object serializer, str field, object topic, object obj,
                            Py_ssize_t index):
        cdef object out
        cdef str which = (f"the {field} of a record" if index < 0 else
                          f"the {field} of record {index} (of send_batch's {field}s)")
        try:
            if ((serializer is self._value_serializer and self._value_takes_topic)
                    or (serializer is self._key_serializer and self._key_takes_topic)):
                out = serializer(topic, obj)
            else:
                out = serializer(obj)
        except Exception as e:
            raise SerializationError(
                f"{field}_serializer failed on {which} for topic {topic!r} "
                f"({type(e).__name__}: {e}); nothing was sent", field=field, topic=topic) from e
        if out is None or type(out) is bytes or isinstance(out, str) or PyObject_CheckBuffer(out):
            return out
        raise SerializationError(
            f"{field}_serializer returned {type(out).__name__} for {which} for topic {topic!r}: "
            f"expected bytes, bytearray, memoryview, str or None; nothing was sent",
            field=field, topic=topic)

    def _serialize(self, topic, value=None, key=None):
        """_serialize(topic, value=None, key=None) -> (value, key)

        ``value`` and ``key`` through the producer's ``value_serializer`` and ``key_serializer``
        (each left as it is when its serializer is not set), as :meth:`send` does before placing
        the record: SerializationError for a failure or an unusable output."""
        if self._value_serializer is not None:
            value = self._serialized(self._value_serializer, "value", topic, value, -1)
        if self._key_serializer is not None:
            key = self._serialized(self._key_serializer, "key", topic, key, -1)
        return value, key

    def _serialize_column(self, topic, list column, str field):
        """_serialize_column(topic, column, field) -> list: send_batch's ``values`` or ``keys``
        (``field`` "value" or "key") through that serializer, a new list; the column itself when
        it has none. A SerializationError names the record's index."""
        cdef object serializer = (self._value_serializer if field == "value" else
                                  self._key_serializer)
        cdef Py_ssize_t i
        if serializer is None:
            return column
        return [self._serialized(serializer, field, topic, column[i], i)
                for i in range(len(column))]

    cdef object _send(self, object topic, object value, object key, object partition,
                      object timestamp_ms, object headers, object on_delivery, bint want_future,
                      bint serialize):
        if self._interceptors is not None:
            return self._send_intercepted(topic, value, key, partition, timestamp_ms, headers,
                                          on_delivery, want_future, serialize)
        return _put(self, topic, value, key, partition, timestamp_ms, headers, on_delivery,
                    want_future, serialize, None)

    cdef object _send_intercepted(self, object topic, object value, object key, object partition,
                                  object timestamp_ms, object headers, object on_delivery,
                                  bint want_future, bint serialize):
        cdef object ack, rec
        if self._closed or self._txn_blocked:
            raise self._closed_error()        # refused before any interceptor sees the record
        ack = self._interceptors.intercept(topic, value, key, partition, timestamp_ms, headers)
        rec = ack.record
        try:
            if type(on_delivery) is LoopSink:   # fastkafka.compat.confluent: the sink stays
                return _put(self, rec.topic, rec.value, rec.key, rec.partition, rec.timestamp_ms,
                            rec.headers or None, on_delivery, want_future, serialize, ack)
            if on_delivery is not None:
                if not callable(on_delivery):
                    raise InvalidRecordError(
                        f"on_delivery must be a callable(err, metadata) or None, got "
                        f"{type(on_delivery).__name__}")
                ack.cb = on_delivery          # run after the interceptors' on_acknowledgement
            return _put(self, rec.topic, rec.value, rec.key, rec.partition, rec.timestamp_ms,
                        rec.headers or None, ack, want_future, serialize, None)
        except BaseException as e:
            ack.fail(e)
            raise

    def _append_acked(self, batch, BatchFuture future not None, Py_ssize_t start, list acks):
        """_append_acked(batch, future, start, acks) -> None

        send_batch with interceptors: the records of ``batch`` (a PreparedBatch) from ``start``
        on, one at a time as :meth:`send` places them, each with its RecordAck of ``acks``
        (on_acknowledgement, then counted in ``future``). Records already serialized. An error
        part-way carries ``records_appended`` (those of this call queued), as the accumulator's."""
        cdef Py_ssize_t i, appended = 0
        cdef object parts = batch.parts, keys = batch.keys, tss = batch.timestamps
        cdef object rhs = batch.record_headers, p, ts, a
        cdef _CountInto counter = _CountInto.__new__(_CountInto)
        counter.future = future
        if start == 0:      # every record checked before the first is queued
            for i in range(batch.n_records):
                ts = None if tss is None else tss[i]
                check_timestamp(batch.timestamp_ms if ts is None else ts)
                if rhs is not None and rhs[i] is not None:
                    check_headers(rhs[i])
                validate_field(batch.values[i], "value")
                if keys is not None:
                    validate_field(keys[i], "key")
        try:
            for i in range(start, batch.n_records):
                p = parts if isinstance(parts, int) else parts[i]
                ts = None if tss is None else tss[i]
                a = acks[i]
                a.cb = counter
                _put(self, batch.topic, batch.values[i], None if keys is None else keys[i],
                     None if p == -1 else p, batch.timestamp_ms if ts is None else ts,
                     None if rhs is None else rhs[i], a, False, False, None)
                appended += 1
        except BaseException as e:
            try:
                e.records_appended = appended
            except Exception:
                pass
            raise
        finally:
            future.seal(appended)


# ---------------------------------------------------------------------------------------------
# fastkafka.aio: send() and produce() on the event loop
# ---------------------------------------------------------------------------------------------

class MustWait(Exception):
    """A send on the event loop found no metadata for its topic: fastkafka.aio awaits an update
    (``version`` is the one requested), then tries again."""

    def __init__(self, version):
        super().__init__()
        self.version = version


cdef class LoopSender:
    """Base class of :class:`fastkafka.aio.AsyncProducer`: its ``send()`` and ``produce()`` on the
    common path (the producer's loop running, no interceptors or serializers, nothing waiting
    before them) as one C call: the record checked and appended (:func:`_put`), its outcome sent
    to the loop's :class:`LoopSink`, and for ``send()`` a :class:`LoopFuture`. Every other case
    goes to the subclass's ``_send_general`` / ``_produce_general``, and a record that must wait
    for metadata (:class:`MustWait`) or, for ``send()``, buffer memory to its ``_park``."""

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None):
        """Queue one record now; returns a future of its :class:`RecordMetadata` (``md = await
        p.send(...)``), or of its delivery error.

        Arguments and errors as :meth:`fastkafka.Producer.send`. A record of the wrong type, too
        large, or for a partition that does not exist raises here, queuing nothing. Waiting for
        metadata or buffer memory happens on the loop, bounded by ``max_block_ms``; its timeout
        is the future's error.

        The future has :class:`asyncio.Future`'s methods and ``asyncio.isfuture()`` is true for
        it (``await``, ``gather``, ``wait_for``, ``shield`` take it), though it is not an
        instance of :class:`asyncio.Future`: its done-callbacks run as the producer hands the
        outcome to the loop, without a ``call_soon`` each.

        Not aiokafka's shape: ``fut = await p.send(...)`` already waits for the delivery and gives
        the RecordMetadata, which is not awaitable (a TypeError saying so); aiokafka's code runs
        unchanged on :class:`fastkafka.compat.aiokafka.AIOKafkaProducer`."""
        cdef LoopFuture fut
        cdef FutureRecordMetadata f
        loop = _get_running_loop()
        if (loop is not self._loop or loop is None or self._chain is not None or self._serializing
                or self._closing or self._backlog):
            return self._send_general(topic, value, key, partition, timestamp_ms, headers)
        fut = LoopFuture.__new__(LoopFuture)
        fut._loop = loop
        try:
            f = _put(self._p, topic, value, key, partition, timestamp_ms, headers, self._sink,
                     True, False, None)
        except (MustWait, BufferExhaustedError) as e:
            self._park("send", (topic, value, key, partition, timestamp_ms, headers), fut, e)
            return fut
        f.waiter = fut
        self._sink.pending += 1
        return fut

    def produce(self, topic, value=None, key=None, partition=None, on_delivery=None,
                timestamp=None, headers=None, callback=None):
        """Queue one record and return; ``on_delivery(err, metadata)``, if given, runs on the loop
        once it is delivered or failed (a failure without ``on_delivery`` is logged; ``callback``
        is another name for it, as for :meth:`fastkafka.Producer.produce`). Never waits:
        when buffer memory is not free it raises BufferExhaustedError at once (``await
        p.send(...)`` waits for it instead); a record for a topic whose metadata is not known
        yet is queued until it is (bounded by ``max_block_ms``)."""
        cdef FutureRecordMetadata f
        loop = _get_running_loop()
        if (loop is not self._loop or loop is None or callback is not None
                or (on_delivery is not None and not callable(on_delivery))
                or self._chain is not None or self._serializing or self._closing or self._backlog):
            return self._produce_general(topic, value, key, partition, on_delivery, timestamp,
                                         headers, callback)
        try:
            f = _put(self._p, topic, value, key, partition, timestamp, headers, self._sink,
                     True, False, None)
        except MustWait as e:
            self._park("produce", (topic, value, key, partition, timestamp, headers), on_delivery, e)
            return
        f.waiter = on_delivery
        self._sink.pending += 1
