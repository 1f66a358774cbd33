"""asyncio: :class:`AsyncProducer`, the producer for code running on an event loop.

::

    from fastkafka.aio import AsyncProducer

    async with AsyncProducer(bootstrap_servers="127.0.0.1:9092") as p:
        md = await p.send("events", b"hello", key=b"k")
        await asyncio.gather(*(p.send("events", v) for v in values))

It takes the same settings and raises the same errors as :class:`fastkafka.Producer`, and uses the
same compiled send path and I/O thread. What differs:

- **It never blocks the loop.** A send that must wait for the topic's metadata or for buffer
  memory is awaited (other tasks run meanwhile), up to ``max_block_ms``, then fails with the error
  ``Producer.send`` raises. No thread pool is used; the records keep the order of the calls
  (a record that waits holds back the ones sent after it).
- **Outcomes reach the loop in batches.** The I/O thread hands completed records to the loop with
  one ``call_soon_threadsafe`` per drain, however many completed; the loop resolves the futures
  and runs ``on_delivery`` callbacks (so callbacks run on the loop, not on the I/O thread), at
  most 2 ms of them per loop turn.
  ``metrics()["aio_loop_wakeups"]`` counts those wake-ups.
- ``send()`` queues the record when it is called and returns a future of the producer's own
  (:class:`~fastkafka._producer.batch.LoopFuture`: :class:`asyncio.Future`'s methods,
  ``asyncio.isfuture()`` true, not an instance of it), whose done-callbacks, an awaiting task's
  wake-up among them, run in that drain rather than one ``call_soon`` each. Cancelling a task
  that awaits it does not un-send the record, whose failure, if it fails, is logged (WARNING,
  logger ``fastkafka``) since nobody awaits it.

One producer belongs to one event loop (the loop it is first used on): using it from another loop
or another thread raises :class:`~fastkafka.errors.IllegalStateError`; use
:class:`fastkafka.Producer` there. Close it (``await p.close()`` or ``async with``) before its
loop closes; records that complete after the loop closed are logged.
"""

from __future__ import annotations

import asyncio
import copy
from asyncio import _get_running_loop
import functools
import logging
from collections import deque
from typing import Any, Callable, Mapping, Sequence

# What a Producer's construction and first connection would otherwise import lazily (the
# settings' SASL/JAAS/TLS checks, the IDNA codec of a host name's resolution): imported with this
# module, not on a running loop, where the first AsyncProducer or its I/O thread would hold the
# loop for the import (tens of milliseconds).
import encodings.idna  # noqa: F401
import fastkafka._net.jaas  # noqa: F401
import fastkafka._net.sasl  # noqa: F401
import fastkafka._net.tls  # noqa: F401
from fastkafka._net.cluster import topic_error
from fastkafka._producer.aio_pending import Pending as _Pending
from fastkafka._producer.aio_pending import batch_done as _batch_done
from fastkafka._producer.aio_pending import batch_failed_part as _batch_failed_part
from fastkafka._producer.aio_pending import records_of as _records_of
from fastkafka._producer.aio_pending import resolve as _resolve
from fastkafka._producer.aio_pending import size_of as _size_of
from fastkafka._producer.batch import LoopFuture, LoopSink
from fastkafka._producer.sendpath import (LoopSender, MustWait, validate_field, validate_headers,
                                          validate_timestamp)
from fastkafka.errors import (BufferExhaustedError, IllegalStateError, InvalidRecordError,
                              KafkaError, KafkaTimeoutError, ProducerClosedError)
from fastkafka.producer import (BatchFuture, CLOSE_GRACE_S, GroupMetadata, PreparedTransaction,
                                Producer, RecordMetadata, _weak_method)

log = logging.getLogger("fastkafka")

__all__ = ["AsyncProducer"]

_Bytes = bytes | bytearray | memoryview | str    # a str is sent as its UTF-8
_Headers = Sequence[tuple[str | bytes, _Bytes | None]] | Mapping[str | bytes, _Bytes | None]
#: ``on_delivery(err, metadata)``: ``err`` None once delivered, else the record's KafkaError;
#: ``metadata`` None for a record that failed before it was queued (it has no partition yet).
_Callback = Callable[[KafkaError | None, RecordMetadata | None], object]

#: The longest the backlog sends calls in a row before letting the loop run its other tasks (s).
_BACKLOG_TURN_S = 0.001

#: How often ``close()`` looks whether the I/O thread has stopped (seconds; it does not block).
_STOP_POLL_S = 0.002


#: A send found no metadata for its topic: await an update (its ``version``), then try again.
_MustWait = MustWait


class _LoopProducer(Producer):
    """The Producer an AsyncProducer drives: its sends never wait. Missing metadata raises
    _MustWait (the update requested); memory not free at once raises BufferExhaustedError."""

    def __init__(self, config, kwargs):
        super().__init__(config, **kwargs)
        self._max_block_ms = 0          # the router's, what appends wait for memory: not at all
        self._seen_version = -1         # a retry after this metadata version: no second wait

    def _wait_on_metadata(self, topic, partition, max_wait_ms):
        md = self._metadata
        cluster = md.cluster
        n = cluster.partition_count(topic)
        if n > 0 and (partition is None or partition < n or md.version > self._seen_version >= 0):
            return cluster              # (a partition still past n: the router refuses it)
        if not isinstance(topic, str) or not topic:
            raise InvalidRecordError(f"topic must be a non-empty string, got {topic!r}")
        if self._closed:
            raise ProducerClosedError("producer is closed")
        err = topic_error(cluster, topic)
        if n <= 0 and err is not None and not err.retriable:
            raise err
        if n <= 0:
            unknown = md.unknown_topic_error(topic)   # unknown past topic_metadata_propagation_max_ms
            if unknown is not None:
                raise unknown
        md.add_topic(topic)
        version = md.request_update()
        self._sender.wakeup()
        raise _MustWait(version)


class AsyncProducer(LoopSender):
    """An asyncio Kafka producer; see :mod:`fastkafka.aio`.

    ``AsyncProducer(config=None, **settings)`` takes what :class:`fastkafka.Producer` takes. It can
    be created outside a running loop; it is bound to the loop it is first used on.
    """

    def __init__(self, config: dict | None = None, **kwargs: Any):
        self._p = _LoopProducer(config, kwargs)
        self._send_waiter = self._p._send_waiter
        # key_serializer / value_serializer: applied here, once per record (_send_waiter takes
        # serialized records, also when one waits for metadata or memory and is tried again)
        self._serializing = (self._p.config.key_serializer is not None
                             or self._p.config.value_serializer is not None)
        self.config = self._p.config
        # interceptors (fastkafka/interceptors.py): on_send runs here, once per record (a record
        # may be tried again after a wait); its RecordAck rides at the end of the call's args
        self._chain = self._p._interceptors
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poke_fd = -1
        self._sink: LoopSink | None = None
        self._backlog: deque[_Pending] = deque()
        self._backlog_task: asyncio.Task | None = None
        self._backlog_waiters: list[asyncio.Future] = []   # flush() calls awaiting the backlog
        self._drain_waiters: list[asyncio.Future] = []     # flush() calls awaiting the next drain
        self._closing = False
        try:
            self._bind(asyncio.get_running_loop())
        except RuntimeError:
            pass                        # bound at first use

    # -- the loop ----------------------------------------------------------------------------
    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._sink = LoopSink(loop)
        # Weakly: the sink is referenced by every record not yet completed, and must not keep a
        # dropped AsyncProducer (and its producer) alive (see __del__).
        self._sink.on_drain = _weak_method(self._after_drain)
        # The I/O thread pokes this loop when it takes the GIL back, and the loop hands the GIL
        # over: a loop polling its selector with a zero timeout between Python work (a busy
        # loop) would otherwise keep the I/O thread waiting (fastkafka/_net/ioloop.pyx).
        poller = self._p._client.poller
        self._poke_fd = poller.gil_poke_fd()
        loop.add_reader(self._poke_fd, poller.gil_poked)

    def _check_loop(self, what: str) -> asyncio.AbstractEventLoop:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise IllegalStateError(
                f"AsyncProducer.{what}() was called with no event loop running in this thread: "
                f"call it from a coroutine on the producer's loop, or use fastkafka.Producer "
                f"from other threads") from None
        if loop is not self._loop:
            if self._loop is None:
                self._bind(loop)
            else:
                raise IllegalStateError(
                    f"AsyncProducer.{what}() was called from another event loop than the one it "
                    f"belongs to (its first loop): one AsyncProducer per loop; create another "
                    f"for this loop, or use fastkafka.Producer from other threads")
        return loop

    def _deadline(self, timeout: float | None) -> float | None:
        return None if timeout is None else self._loop.time() + timeout

    async def _wake_on(self, register: Callable[[Callable[[], None]], None],
                       deadline: float | None) -> bool:
        """Await until the callback given to ``register`` runs (on any thread: the sink hands it
        to the loop); False when ``deadline`` (loop time) passes first."""
        fut = self._loop.create_future()
        register(functools.partial(self._sink.push, _resolve, fut))
        return await self._await_until(fut, deadline)

    async def _await_until(self, fut: asyncio.Future, deadline: float | None) -> bool:
        """Await ``fut`` (a future only ever resolved with None); False when ``deadline`` (loop
        time) passes first."""
        if deadline is None or fut.done():
            await fut
            return True
        remaining = deadline - self._loop.time()
        if remaining <= 0:
            return False
        handle = self._loop.call_later(remaining, _resolve, fut)
        try:
            await fut
        finally:
            handle.cancel()
        return self._loop.time() < deadline

    async def start(self) -> None:
        """Bind the producer to the running loop (aiokafka's ``await producer.start()``). Nothing
        else to do: the connection is made in the background from the constructor on."""
        self._check_loop("start")

    async def stop(self, timeout: float | None = None) -> None:
        """:meth:`close` under aiokafka's name."""
        await self.close(timeout)

    # -- context manager -----------------------------------------------------------------------
    async def __aenter__(self) -> "AsyncProducer":
        self._check_loop("__aenter__")
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __enter__(self):
        raise TypeError("AsyncProducer is an asynchronous context manager: use 'async with "
                        "AsyncProducer(...) as p:' (or fastkafka.Producer with 'with')")

    def __exit__(self, *exc):   # pragma: no cover - __enter__ always raises
        return None

    def __del__(self):
        # Dropped without close(): nothing of the I/O thread or the loop keeps an AsyncProducer
        # or its _LoopProducer alive (the sink's on_drain is weak; the loop's poke reader holds
        # the poller only), so this runs once the application lets go of it, and the
        # _LoopProducer's own finalizer then closes it as a dropped Producer is closed (bounded
        # by exit_flush_timeout_ms, a WARNING naming the records that failed). Here the poke
        # reader is taken off the loop while the loop is open: it would keep the poller and its
        # descriptors alive and be called for nothing. On another thread while the loop runs,
        # the removal is handed to the loop. The poke descriptor stays open as long as the
        # poller does, which the reader holds, so its number cannot be reused meanwhile.
        loop = getattr(self, "_loop", None)
        if loop is None or getattr(self, "_closing", True) or loop.is_closed():
            return
        try:
            if loop.is_running() and _get_running_loop() is not loop:
                loop.call_soon_threadsafe(loop.remove_reader, self._poke_fd)
            else:
                loop.remove_reader(self._poke_fd)
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<fastkafka.aio.AsyncProducer {self._p._name} {'closed' if self._p._closed else 'open'}>"

    # -- sending -------------------------------------------------------------------------------
    # send() and produce() are LoopSender's (fastkafka/_producer/sendpath.pyx): one C call on the
    # common path; the other cases come here.
    def _send_general(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                      headers=None) -> LoopFuture:
        """send() off its common path: binding to the loop (or the error of another loop),
        interceptors, serializers, calls waiting before it, a closing producer."""
        loop = _get_running_loop()
        if loop is not self._loop or loop is None:
            loop = self._check_loop("send")
        fut = LoopFuture(loop)
        if self._chain is not None:
            return self._intercepted("send", fut, topic, value, key, partition, timestamp_ms,
                                     headers)
        if self._serializing:
            value, key = self._p._serialize(topic, value, key)
        if self._backlog or self._closing:
            self._submit("send", (topic, value, key, partition, timestamp_ms, headers), fut)
            return fut
        try:    # the common case: one C call (fastkafka/_producer/sendpath.pyx)
            self._send_waiter(self._sink, fut, topic, value, key, partition, timestamp_ms, headers)
        except (_MustWait, BufferExhaustedError) as e:
            self._park("send", (topic, value, key, partition, timestamp_ms, headers), fut, e)
        return fut

    def _intercepted(self, kind: str, waiter, topic, value, key, partition, timestamp, headers):
        """send()/produce() with interceptors: on_send once, then the record (with its RecordAck
        last in the call's args); a call that raises is acknowledged to them with its error."""
        ack = self._chain.intercept(topic, value, key, partition, timestamp, headers)
        r = ack.record
        value, key = r.value, r.key
        try:
            if self._serializing:
                value, key = self._p._serialize(topic, value, key)
            self._submit(kind, (topic, value, key, r.partition, r.timestamp_ms, r.headers or None,
                                ack), waiter)
        except BaseException as e:
            ack.fail(e)
            raise
        return waiter

    async def send_and_wait(self, topic: str, value: _Bytes | None = None, key: _Bytes | None = None,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: _Headers | None = None) -> RecordMetadata:
        """``await p.send(...)`` under the name aiokafka users know."""
        return await self.send(topic, value, key, partition, timestamp_ms, headers)

    def _produce_general(self, topic, value=None, key=None, partition=None, on_delivery=None,
                         timestamp=None, headers=None, callback=None) -> None:
        """produce() off its common path (as :meth:`_send_general`, and ``callback`` or an
        ``on_delivery`` that is not callable)."""
        loop = _get_running_loop()
        if loop is not self._loop or loop is None:
            self._check_loop("produce")
        if callback is not None:
            if on_delivery is not None:
                raise InvalidRecordError(
                    "on_delivery and callback given: callback is another name for on_delivery (as "
                    "in confluent-kafka); pass one of them")
            on_delivery, what = callback, "callback"
        else:
            what = "on_delivery"
        if on_delivery is not None and not callable(on_delivery):
            raise InvalidRecordError(f"{what} must be a callable(err, metadata) or None, got "
                                     f"{type(on_delivery).__name__}")
        if self._chain is not None:
            self._intercepted("produce", on_delivery, topic, value, key, partition, timestamp,
                              headers)
            return
        if self._serializing:
            value, key = self._p._serialize(topic, value, key)
        if self._backlog or self._closing:
            self._submit("produce", (topic, value, key, partition, timestamp, headers), on_delivery)
            return
        try:
            self._send_waiter(self._sink, on_delivery, topic, value, key, partition, timestamp,
                              headers)
        except _MustWait as e:
            self._park("produce", (topic, value, key, partition, timestamp, headers), on_delivery, e)

    async def send_batch(self, topic: str, values, keys=None, partition=None,
                         headers: _Headers | None = None, timestamp_ms: int | None = None, *,
                         timestamps=None, record_headers=None) -> int:
        """Queue many records at once (lists or pyarrow arrays, per-record ``timestamps`` and
        ``record_headers`` as :meth:`fastkafka.Producer.send_batch`); returns the number delivered once all are done,
        raising the first delivery error if one failed. Invalid input raises before any record is
        queued. When buffer memory runs out part-way, the rest waits on the loop for it."""
        loop = self._check_loop("send_batch")
        fut = loop.create_future()
        args, acks = (topic, values, keys, partition, headers, timestamp_ms, timestamps,
                      record_headers), None
        if self._chain is not None:     # on_send per record, once; the RecordAcks go last
            if self._closing or self._p._closed:
                raise self._p._closed_error()
            args, acks = self._chain.intercept_batch(*args)
            args += (acks,)
        try:
            self._submit("batch", args, fut)
        except BaseException as e:
            if acks is not None:
                self._chain.fail_all(acks, e, getattr(e, "records_appended", 0))
            raise
        return await fut

    def _submit(self, kind: str, args: tuple, waiter) -> None:
        """A call by the general path: refused when closing, queued behind waiting calls, else
        tried now and queued if it must wait."""
        if self._closing or self._p._closed:
            raise self._p._closed_error()
        if not self._backlog:
            try:
                self._attempt(kind, args, waiter, None)
            except (_MustWait, BufferExhaustedError) as e:
                self._park(kind, args, waiter, e)
        else:
            self._check_args(kind, args)
            self._enqueue(_Pending(kind, args, waiter,
                                   self._loop.time() + self.config.max_block_ms / 1000))

    def _park(self, kind: str, args: tuple, waiter, exc: Exception) -> None:
        """The call must wait (``exc``: _MustWait for metadata, BufferExhaustedError for memory):
        into the backlog, its deadline max_block_ms from now. produce() does not wait for
        memory: it raises."""
        item = _Pending(kind, args, waiter, self._loop.time() + self.config.max_block_ms / 1000)
        if isinstance(exc, _MustWait):
            item.seen = exc.version
        else:
            if kind == "produce":
                raise exc
            item.seen = -2
            self._batch_partial(item, exc)
        self._enqueue(item)

    def _check_args(self, kind: str, args: tuple) -> None:
        """What must fail at once even for a call that waits behind others: the argument types
        the router and the accumulator would refuse without a metadata wait."""
        topic = args[0]
        if not isinstance(topic, str) or not topic:
            raise InvalidRecordError(f"topic must be a non-empty string, got {topic!r}")
        if kind == "batch":
            return
        _topic, value, key, _partition, timestamp, headers = args[:6]
        for name, x in (("value", value), ("key", key)):
            if x is not None and type(x) is not bytes:
                validate_field(x, name)
        validate_timestamp(timestamp)
        validate_headers(headers)

    def _attempt(self, kind: str, args: tuple, waiter, item: _Pending | None) -> None:
        p = self._p
        if kind != "batch":     # send and produce: the same arguments, in the same order
            p._send_waiter(self._sink, waiter, *args)
        else:
            batch = item.batch if item is not None else None
            if batch is None:
                batch = p._prepare_batch(*args)
                bf = BatchFuture(batch.n_records)
                bf.hold_seal()
                if item is not None:
                    item.batch, item.bfuture = batch, bf
            else:
                bf = item.bfuture
            try:
                p._append_prepared(batch, bf, item.appended if item is not None else 0)
            except BufferExhaustedError as e:
                e.prepared = (batch, bf)
                raise
            except BaseException:
                bf.release_seal()
                raise
            bf.release_seal()
            bf.add_callback(lambda bf, push=self._sink.push: push(_batch_done, (bf, waiter)))

    def _batch_partial(self, item: _Pending, exc: BufferExhaustedError) -> None:
        """A send_batch ran out of memory part-way: the item resumes after the appended records."""
        prepared = getattr(exc, "prepared", None)
        if prepared is not None:
            item.batch, item.bfuture = prepared
            item.appended += getattr(exc, "records_appended", 0)

    def _enqueue(self, item: _Pending) -> None:
        self._backlog.append(item)
        if self._backlog_task is None or self._backlog_task.done():
            self._backlog_task = self._loop.create_task(self._run_backlog())

    async def _run_backlog(self) -> None:
        """Send the waiting calls in order, each awaiting metadata or memory up to its deadline."""
        loop = self._loop
        turn_ends = loop.time() + _BACKLOG_TURN_S
        try:
            while self._backlog:
                item = self._backlog[0]
                try:
                    if loop.time() >= turn_ends:
                        # Calls that need no wait (memory freed, or their deadline passed, when
                        # hundreds waited) go one after the other without an await: the loop's
                        # other tasks get their turn between slices of this one.
                        await asyncio.sleep(0)
                        turn_ends = loop.time() + _BACKLOG_TURN_S
                    await self._send_pending(item)
                except asyncio.CancelledError:
                    # the loop is shutting down (asyncio.run cancels what is left): nothing waiting
                    # can be sent any more; each call gets an error instead of silence
                    err = ProducerClosedError(
                        "the event loop cancelled the AsyncProducer's waiting sends (it is shutting "
                        "down) before they could be queued: close the producer before its loop")
                    while self._backlog:
                        self._end_pending(self._backlog.popleft(), err)
                    raise
                except BaseException as e:          # the call's outcome: its error
                    self._end_pending(self._backlog.popleft(), e)
                    continue
                self._backlog.popleft()
        finally:
            if not self._backlog:
                waiters, self._backlog_waiters = self._backlog_waiters, []
                for w in waiters:
                    _resolve(w)

    def _end_pending(self, item: _Pending, exc: BaseException) -> None:
        if self._chain is not None:     # the records not queued: their error to the interceptors
            if item.kind == "batch":
                self._chain.fail_all(item.args[8] if len(item.args) > 8 else None, exc,
                                     item.appended)
            elif len(item.args) > 6:
                item.args[6].fail(exc)
        bf = item.bfuture
        if bf is not None:
            bf.release_seal()
            if item.appended:       # its first records are queued: they end it, then this error
                bf.add_callback(lambda bf, push=self._sink.push, w=item.waiter:
                                push(_batch_failed_part, (bf, w, exc)))
                return
        self._fail(item, exc)

    async def _send_pending(self, item: _Pending) -> None:
        p = self._p
        md = p._metadata
        while True:
            # (not self._closing: close() delivers what waits here too, up to its timeout; what
            # is still waiting once the I/O thread has stopped fails then, _fail_backlog)
            if p._closed:
                raise p._closed_error()
            if item.seen >= 0:
                version = item.seen
                ok = await self._wake_on(functools.partial(md.add_listener, after=version),
                                         item.deadline)
                if not ok:
                    raise p._metadata_timeout(item.args[0], self.config.max_block_ms)
                fatal = md.fatal_error
                if fatal is not None:
                    raise copy.copy(fatal)
                p._seen_version = version
            elif item.seen == -2:
                size = min(p._pool.total, max(self.config.batch_size, _size_of(item)))
                if not await self._wake_on(functools.partial(p._pool.add_listener, size),
                                           item.deadline):
                    raise BufferExhaustedError(
                        f"failed to allocate memory within max_block_ms={self.config.max_block_ms}: "
                        f"buffer_memory={p._pool.total} bytes, {p._pool.available_memory} "
                        f"available; the producer is sending slower than records are produced")
            try:
                self._attempt(item.kind, item.args, item.waiter, item)
                return
            except _MustWait as e:
                item.seen = e.version
            except BufferExhaustedError as e:
                item.seen = -2
                self._batch_partial(item, e)
            finally:
                p._seen_version = -1

    def _fail(self, item: _Pending, exc: BaseException) -> None:
        w = item.waiter
        if w is None:
            log.warning("record to %r was not sent and nobody awaits it: %r", item.args[0], exc)
        elif isinstance(w, (LoopFuture, asyncio.Future)):
            if not w.done():
                w.set_exception(exc)
            else:
                log.warning("record to %r was not sent and nobody awaits it: %r", item.args[0], exc)
        else:
            try:
                w(exc, None)
            except Exception:
                log.exception("delivery callback %r raised", w)

    # -- flush / close -------------------------------------------------------------------------
    async def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now and await it (other tasks run meanwhile); returns the
        records still undelivered after ``timeout`` seconds (0 when all were delivered or failed;
        failures are reported through the futures and callbacks)."""
        self._check_loop("flush")
        p = self._p
        if p._forked:
            raise p._closed_error()
        deadline = self._deadline(timeout)
        if self._backlog:
            fut = self._loop.create_future()
            self._backlog_waiters.append(fut)
            if not await self._await_until(fut, deadline):
                return sum(_records_of(i) for i in self._backlog) + p._acc.incomplete_record_count()
        p._acc.begin_flush()
        p._sender.wakeup()
        try:
            # Every record of these batches was sent through the sink (send, produce) or belongs
            # to a send_batch whose last batch pushes its outcome: the last batch to complete
            # makes a drain, after which this looks again.
            batches = p._acc.incomplete_batches()
            while True:
                batches = [b for b in batches if not b.is_done]
                if not batches:
                    return 0
                fut = self._loop.create_future()
                self._drain_waiters.append(fut)
                if not await self._await_until(fut, deadline):
                    return sum(b.record_count for b in batches if not b.is_done)
        finally:
            p._acc.end_flush()

    def _after_drain(self) -> None:
        """After each drain of the sink: flush() calls look again at the batches they await."""
        if self._drain_waiters:
            waiters, self._drain_waiters = self._drain_waiters, []
            for f in waiters:
                _resolve(f)

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (awaiting up to ``timeout`` seconds, forever when None), stop
        the I/O thread and resolve every outstanding future; records undelivered at the deadline
        fail with ProducerClosedError. Does not block the loop."""
        self._check_loop("close")
        p = self._p
        if self._closing:
            return
        self._closing = True
        if p._forked:
            p._closed = True
            return
        deadline = self._deadline(timeout)
        try:
            await self.flush(timeout)
            await self._stop(timeout, deadline)
        finally:
            self._fail_backlog(p._closed_error())
            self._loop.remove_reader(self._poke_fd)

    def _fail_backlog(self, exc: BaseException) -> None:
        """close() past its deadline: the calls still waiting for metadata or memory fail with
        ``exc`` now (close() resolves every future before it returns), their task stopped."""
        if not self._backlog:
            return
        while self._backlog:
            self._end_pending(self._backlog.popleft(), exc)
        task = self._backlog_task
        if task is not None and not task.done():
            task.cancel()
        waiters, self._backlog_waiters = self._backlog_waiters, []
        for w in waiters:
            _resolve(w)

    async def _stop(self, timeout: float | None, deadline: float | None) -> None:
        p = self._p
        if not p._stop_io_thread():
            return
        thread = p._sender._thread
        if not await self._until_stopped(thread, deadline):
            p._sender.force_close = True
            p._sender.wakeup()
            if not await self._until_stopped(thread, None if timeout is None
                                             else self._loop.time() + CLOSE_GRACE_S):
                p._abandon_io_thread(timeout)
        p._release_after_close()
        # The I/O thread has stopped: every record has its outcome, and what it handed over last
        # (failures of a forced close) is resolved now, before close() returns.
        self._sink.drain()
        if self._sink.pending:
            log.error("AsyncProducer.close(): %d record(s) without an outcome after the I/O thread "
                      "stopped", self._sink.pending)

    async def _until_stopped(self, thread, deadline: float | None) -> bool:
        while thread.is_alive():
            if deadline is not None and self._loop.time() >= deadline:
                return False
            await asyncio.sleep(_STOP_POLL_S)
        return True

    # -- metadata ----------------------------------------------------------------------------
    async def partitions_for(self, topic: str) -> list[int]:
        """The partition numbers of ``topic``, awaiting its metadata up to max_block_ms."""
        self._check_loop("partitions_for")
        p = self._p
        if p._closed:       # (not _check_open: a transactional producer may look outside a transaction)
            raise p._closed_error()
        deadline = self._loop.time() + self.config.max_block_ms / 1000
        while True:
            try:
                cluster = p._wait_on_metadata(topic, None, 0)
                return list(range(cluster.partition_count(topic)))
            except _MustWait as e:
                if not await self._wake_on(functools.partial(p._metadata.add_listener,
                                                             after=e.version), deadline):
                    raise p._metadata_timeout(topic, self.config.max_block_ms) from None
                fatal = p._metadata.fatal_error
                if fatal is not None:
                    raise copy.copy(fatal)

    # -- transactions --------------------------------------------------------------------------
    async def _await_txn(self, result, timeout: float | None, what: str, txn=None, key=None):
        try:
            if not result.done():
                deadline = self._deadline(self._p._timeout(timeout))
                register = lambda fn: result.add_done_callback(lambda _r: fn())  # noqa: E731
                if not await self._wake_on(register, deadline):
                    raise KafkaTimeoutError(
                        f"{what} did not finish within {self._p._timeout(timeout)} s; it goes on in "
                        f"the background: call {what} again to wait for it")
            return result.wait(0, what)
        finally:
            if txn is not None and result.done():
                txn.pending_result.pop(key, None)

    async def init_transactions(self, timeout: float | None = None) -> None:
        """As :meth:`fastkafka.Producer.init_transactions`, awaited."""
        self._check_loop("init_transactions")
        txn, result = self._p._init_transactions_start()
        await self._await_txn(result, timeout, "init_transactions()", txn, "init")

    def begin_transaction(self) -> None:
        """As :meth:`fastkafka.Producer.begin_transaction` (nothing to await: it sends nothing)."""
        self._check_loop("begin_transaction")
        self._p.begin_transaction()

    async def send_offsets_to_transaction(self, offsets, group_metadata,
                                          timeout: float | None = None) -> None:
        """As :meth:`fastkafka.Producer.send_offsets_to_transaction`, awaited."""
        self._check_loop("send_offsets_to_transaction")
        result = self._p._send_offsets_start(offsets, group_metadata)
        await self._await_txn(result, timeout, "send_offsets_to_transaction()")

    async def _flush_transaction(self, txn, what: str, timeout: float | None) -> None:
        left = await self.flush(self._p._timeout(timeout))
        self._p._check_transaction_flushed(txn, what, timeout, left)

    async def _await_backlog_of_transaction(self, what: str, timeout: float | None) -> None:
        """Sends still waiting for metadata or memory belong to the open transaction: queued
        before it is committed or prepared, which refuses records from then on (their futures
        would fail with IllegalStateError). Past ``timeout``, KafkaTimeoutError, the transaction
        still open: call ``what`` again to keep waiting."""
        if not self._backlog:
            return
        fut = self._loop.create_future()
        self._backlog_waiters.append(fut)
        if not await self._await_until(fut, self._deadline(self._p._timeout(timeout))):
            raise KafkaTimeoutError(
                f"{what}: {sum(_records_of(i) for i in self._backlog)} record(s) of the "
                f"transaction still waiting for metadata or buffer memory after "
                f"{self._p._timeout(timeout)} s; call {what} again to keep waiting, or "
                f"abort_transaction()")

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """As :meth:`fastkafka.Producer.commit_transaction`, awaited (sends still waiting for
        metadata or memory are queued first: they belong to the transaction)."""
        self._check_loop("commit_transaction")
        await self._await_backlog_of_transaction("commit_transaction()", timeout)
        txn, result = self._p._commit_start()
        if result is None:
            await self._flush_transaction(txn, "commit_transaction()", timeout)
            result = self._p._commit_enqueue(txn)
        await self._await_txn(result, timeout, "commit_transaction()", txn, "commit")

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """As :meth:`fastkafka.Producer.abort_transaction`, awaited."""
        self._check_loop("abort_transaction")
        txn, result = self._p._abort_start()
        await self._await_txn(result, timeout, "abort_transaction()", txn, "abort")

    async def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction | None:
        """As :meth:`fastkafka.Producer.prepare_transaction`, awaited."""
        self._check_loop("prepare_transaction")
        await self._await_backlog_of_transaction("prepare_transaction()", timeout)
        txn = self._p._prepare_start()
        await self._flush_transaction(txn, "prepare_transaction()", timeout)
        return self._p._prepare_finish(txn)

    @property
    def transaction_state(self) -> str | None:
        return self._p.transaction_state

    # -- introspection -------------------------------------------------------------------------
    def metrics(self) -> dict:
        """:meth:`fastkafka.Producer.metrics`, plus the loop's side: ``aio_loop_wakeups`` (times
        the I/O thread woke the loop), ``aio_records_completed`` (record outcomes handed to it),
        ``aio_drain_slices`` (drains that left the rest of their records to the loop's next turn,
        after 2 ms),
        ``aio_backlog`` (calls waiting for metadata or memory) and ``aio_unawaited_failures``."""
        m = self._p.metrics()
        sink = self._sink
        poller = self._p._client.poller
        m.update({
            "aio_loop_wakeups": sink.wakeups if sink is not None else 0,
            "aio_records_completed": sink.records if sink is not None else 0,
            "aio_drain_slices": sink.slices if sink is not None else 0,
            "aio_records_pending": sink.pending if sink is not None else 0,
            "aio_backlog": len(self._backlog),
            "aio_unawaited_failures": sink.unawaited_failures if sink is not None else 0,
            "aio_gil_pokes": poller.gil_pokes,
            "aio_turn_handovers": poller.turn_handovers,
        })
        return m

    def java_metrics(self) -> dict:
        """:meth:`fastkafka.Producer.java_metrics`: the Java producer's metrics, with its names
        (docs/observability.md). Does not wait: no ``await``."""
        return self._p.java_metrics()
