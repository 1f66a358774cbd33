"""The public Producer.

``send`` and ``send_batch`` run on the caller's thread: they wait for the topic's metadata (bounded by
``max_block_ms``), choose partitions, and append the records to the accumulator, copying their bytes
once into a batch buffer. A background sender thread does all network work. Delivery is reported
through futures and ``on_delivery(err, metadata)`` callbacks; callbacks run on the sender thread, so
they must be quick; ``flush`` or ``close`` called from one raises ``IllegalStateError`` and changes
nothing.
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Set as AbstractSet
from typing import TYPE_CHECKING, Any, Sequence

from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture, FutureRecordMetadata, RecordMetadata
from fastkafka._producer.batch_args import PreparedBatch as _PreparedBatch, column as _column, per_record as _per_record
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._net.ioloop import yield_to_io
from fastkafka._net.cells import monotonic_ms
from fastkafka._producer.router import IO_THREAD, unknown_partition
from fastkafka._producer.sendpath import REQUEST_OVERHEAD, ProducerCore, validate_headers, validate_timestamp
from fastkafka._net.cluster import Metadata, topic_error
from fastkafka._habits import OtherClientsHabits
from fastkafka.config import ProducerConfig
from fastkafka.interceptors import InterceptorChain
from fastkafka.errors import (IllegalStateError, InvalidBrokerResponseError, ProducerForkedError, InvalidRecordError,
                              KafkaTimeoutError, MalformedRecordError, ProducerClosedError, RecordTooLargeError,
                              SerializationError)
from fastkafka._net.network import NetworkClient
from fastkafka.protocol import ApiKey
from fastkafka._producer.sender import Sender
from fastkafka.observability._counters import producer_counters
from fastkafka.observability._java_metrics import java_metrics as _java_metrics
from fastkafka._producer.transactions import (TRANSACTION, GroupMetadata, PreparedTransaction, State as TxnState,
                                              offsets_by_topic)
from fastkafka.errors import TransactionAbortableError

if TYPE_CHECKING:
    from fastkafka._wire.records import EncodedHeaders

log = logging.getLogger("fastkafka")

_producer_seq = 0
_producer_seq_lock = threading.Lock()

#: Extra seconds close(timeout) allows the I/O thread after ``timeout`` before it fails every record
#: without an outcome itself and returns.
CLOSE_GRACE_S = 2.0

# Producers of this process: after a fork, the child's copies are marked unusable (their I/O thread
# was not copied), so they fail at once with ProducerForkedError instead of hanging.
_live_producers: "weakref.WeakSet[Producer]" = weakref.WeakSet()


def _mark_forked_producers() -> None:
    for p in list(_live_producers):
        p._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked_producers)


def _close_at_exit() -> None:
    """The producers still open at interpreter exit deliver what is queued for up to their
    ``exit_flush_timeout_ms``, all at once (not one after the other), then stop; what is left
    fails with ProducerClosedError and a WARNING names how many.

    Why this runs at all: the I/O thread is a daemon thread (Sender.start). CPython's exit first
    joins the non-daemon threads (threading._shutdown), then runs the atexit hooks, then stops the
    daemon threads where they stand. A non-daemon I/O thread would only stop when told, so an
    unclosed producer would hang the exit before this hook could tell it; as a daemon thread it is
    still running here, and without this hook the records it still held would be dropped silently.
    The one non-daemon thread of ours is the short-lived one a finalizer starts to close a dropped
    producer (Producer.__del__): its close is bounded, so the exit waits for it, bounded too."""
    pid = os.getpid()
    started = time.monotonic()
    stopping = []
    for p in list(_live_producers):
        if p._pid == pid and not p._forked and not p._on_io_thread() and p._stop_io_thread():
            stopping.append(p)
    for p in stopping:
        try:
            p._close_unattended("still open at interpreter exit", started)
        except Exception:   # one producer's failure must not keep the others from closing
            log.exception("closing producer %s at interpreter exit failed", p._name)


atexit.register(_close_at_exit)


def _weak_method(method):
    """A callable that calls the bound ``method`` through a weak reference to its object, and does
    nothing once that object is gone. The hooks a Producer gives its I/O thread are made so: the
    running thread must not keep the Producer alive, or a producer dropped without close() is
    never collected and its thread and sockets live on (its finalizer closes it)."""
    ref = weakref.WeakMethod(method)

    def call(*args):
        m = ref()
        if m is not None:
            return m(*args)
    return call


class Producer(OtherClientsHabits, ProducerCore):
    """A thread-safe Kafka producer.

    Example::

        from fastkafka import Producer
        with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5, compression_type="lz4") as p:
            md = p.send("events", value=b"hello", key=b"k").get(timeout=10)
            print(md.partition, md.offset)

    Settings may be given as keyword arguments or as a mapping with Java/librdkafka-style dotted keys
    (``Producer({"bootstrap.servers": "host:9092", "linger.ms": 5})``); see
    :mod:`fastkafka.config` for the list. Wrong settings raise ``ConfigError`` here.
    """

    def __init__(self, config: dict | None = None, **kwargs: Any):
        self.config = cfg = ProducerConfig(config, **kwargs)
        global _producer_seq
        with _producer_seq_lock:
            _producer_seq += 1
            self._name = f"{cfg.client_id}-{_producer_seq}"
        self._partitioner = cfg.partitioner
        self._metadata = Metadata(cfg.bootstrap_servers, cfg.metadata_max_age_ms, cfg.retry_backoff_ms,
                                  cfg.retry_backoff_max_ms, cfg.topic_metadata_propagation_max_ms)
        self._pool = BufferPool(cfg.buffer_memory, cfg.batch_size)
        self._acc = RecordAccumulator(cfg.batch_size, cfg.compression_code, cfg.compression_level,
                                      cfg.linger_ms, cfg.retry_backoff_ms, cfg.delivery_timeout_ms,
                                      self._pool, cfg.ordered)
        self._client = NetworkClient(cfg, self._metadata,
                                     required_apis=(ApiKey.METADATA, ApiKey.PRODUCE))
        self._sender = Sender(cfg, self._acc, self._metadata, self._client)
        self._pool.wakeup = self._sender.wakeup
        self._acc.sampled = self._client.sampled      # per-topic statistics (java_metrics)
        self._sender.stats_source = _weak_method(self._stats_document)
        # send()/produce() are compiled (fastkafka/_producer/sendpath.pyx) and place records with
        # the router (fastkafka/_producer/router.pyx), as send_batch does; they use this state.
        # A Schema Registry serializer (fastkafka.schema_registry, or confluent-kafka's) is called
        # with the topic: serialize(topic, obj), bound to its field.
        key_ser, key_topic, value_ser, value_topic = cfg.key_serializer, False, cfg.value_serializer, False
        if key_ser is not None or value_ser is not None:
            from fastkafka.schema_registry._serializers import bound_serializer

            key_ser, key_topic = bound_serializer(key_ser, "key")
            value_ser, value_topic = bound_serializer(value_ser, "value")
        self._init_core(self._acc, self._metadata.version_cell, self._client.poller, cfg.partitioner,
                        min(cfg.max_request_size, cfg.buffer_memory), cfg.max_block_ms,
                        key_ser, value_ser, InterceptorChain.of(cfg.interceptors),
                        key_topic, value_topic)
        # send_batch of Arrow data: a schema serializer encodes the whole column (in C)
        self._column_encoders = {field: getattr(ser, "schema_serializer", None)
                                 for field, ser in (("key", key_ser), ("value", value_ser))}
        self._close_lock = threading.Lock()
        self._close_started = False
        # If the I/O thread dies (a bug), sends are refused at once, naming the failure. The I/O
        # thread's hooks hold the producer weakly (_weak_method).
        self._sender.on_fatal = _weak_method(self._on_io_thread_failed)
        self._pid = os.getpid()
        self._forked = False
        if self._sender.txn is not None:
            self._txn_blocked = True   # until begin_transaction()
            self._sender.txn.on_state_change = _weak_method(self._on_txn_state)
        self._sender.start(f"fastkafka-sender-{self._name}")
        _live_producers.add(self)

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<fastkafka.Producer {self._name} {'closed' if self._closed else 'open'}>"

    # -- metadata --------------------------------------------------------------------------
    def _wait_on_metadata(self, topic: str, partition: int | None, max_wait_ms: int):
        """The cluster view once ``topic`` is known and, when ``partition`` is past its partitions
        as known, after one metadata update (the router then refuses a partition still past them);
        bounded by max_wait_ms."""
        cluster = self._metadata.cluster
        n = cluster.partition_count(topic)
        if n > 0 and (partition is None or partition < n):
            return cluster
        if not isinstance(topic, str) or not topic:
            raise InvalidRecordError(f"topic must be a non-empty string, got {topic!r}")
        self._metadata.add_topic(topic)
        if self._on_io_thread():
            raise self._io_thread_metadata_error(topic, partition, n)
        deadline = monotonic_ms() + max_wait_ms
        # A broker's authentication error from before this call fails it only if the next attempt
        # fails too (the credentials may be accepted by now); a new one fails it at once.
        stale = self._metadata.fatal_error
        while True:
            if self._closed:
                raise ProducerClosedError("producer is closed")
            version = self._metadata.request_update()
            self._sender.wakeup()
            remaining = (deadline - monotonic_ms()) / 1000.0
            try:   # (UnknownTopicOrPartitionError sooner, see topic_metadata_propagation_max_ms)
                self._metadata.await_update(version, max(remaining, 0), stale, topic)
            except KafkaTimeoutError:
                raise self._metadata_timeout(topic, max_wait_ms) from None
            cluster = self._metadata.cluster
            if cluster.partition_count(topic) > 0:
                return cluster
            err = topic_error(cluster, topic)
            if err is not None and not err.retriable:
                raise err

    def _metadata_timeout(self, topic: str, max_wait_ms: int) -> KafkaTimeoutError:
        """The error of a send that waited ``max_wait_ms`` for ``topic``'s metadata in vain."""
        err = topic_error(self._metadata.cluster, topic)
        # Brokers that could not be reached are the usual cause: name each with its last
        # connection error (refused, name resolution, timeout, ...).
        unreachable = self._metadata.describe_connection_errors()
        meta_err = self._metadata.last_error
        exc = KafkaTimeoutError(
            f"topic {topic!r} not present in metadata after {max_wait_ms} ms"
            + (f" (broker says: {err})" if err else "")
            + (f" (last metadata answer: {meta_err})"
               if isinstance(meta_err, InvalidBrokerResponseError) and not err else "")
            + (f": {unreachable}" if unreachable else ""))
        exc.connection_errors = self._metadata.connection_errors()
        return exc

    def _io_thread_metadata_error(self, topic: str, partition, n: int) -> Exception:
        """What a send on the I/O thread raises instead of waiting for metadata: that thread is
        the one that fetches it. The update is requested, so a later send may find it."""
        self._metadata.request_update()
        if n > 0:
            return unknown_partition(IO_THREAD, topic, partition, n)
        return KafkaTimeoutError(
            f"metadata for topic {topic!r} is not known yet and this call was made on the "
            f"producer's I/O thread (e.g. in a delivery callback): it does not wait there "
            f"(max_block_ms is not applied), since that thread is the one that fetches metadata "
            f"and waiting would deadlock it. The metadata was requested, so a later send may "
            f"succeed; or send from an application thread")

    def partitions_for(self, topic: str) -> list[int]:
        """The partition numbers of ``topic`` (waits for metadata up to max_block_ms)."""
        self._check_open()
        cluster = self._wait_on_metadata(topic, None, self.config.max_block_ms)
        return list(range(cluster.partition_count(topic)))

    # -- sending ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed or self._txn_blocked:
            raise self._closed_error()

    def _too_large(self, size: int) -> RecordTooLargeError:
        return RecordTooLargeError(
            f"record of {size} bytes (serialized, with batch overhead) is larger than "
            f"max_request_size ({self.config.max_request_size}) or buffer_memory "
            f"({self.config.buffer_memory})")

    def _topic_info(self, topic: str, partition: int | None, max_wait_ms: int) -> tuple:
        """(metadata version, partition count, available partitions) of ``topic``; waits for
        metadata (bounded by ``max_wait_ms``) when it is missing. The router's hook
        (fastkafka/_producer/router.pxd): it caches the answer per metadata version."""
        version = self._metadata.version  # read first: an update racing with us only makes it older
        thread = getattr(self._sender, "_thread", None)
        # The I/O thread's allocations never wait (BufferPool); compared only when memory is short.
        self._pool.io_thread_ident = (thread.ident or 0) if thread is not None else 0
        cluster = self._wait_on_metadata(topic, partition, max_wait_ms)
        n = cluster.partition_count(topic)
        available = cluster.available_partitions(topic) or list(range(n))
        self._acc.sticky_partition(topic, available)  # the partitions sticky appends may use
        return version, n, available

    def send_batch(self, topic: str, values, keys=None, partition: int | None = None,
                   headers: Sequence | Mapping | EncodedHeaders | None = None,
                   timestamp_ms: int | None = None, *, timestamps=None,
                   record_headers=None) -> BatchFuture:
        """Queue many records at once; returns a future of the number delivered.

        ``values`` (and ``keys``) are lists of bytes-like/str/None (a str is sent as its UTF-8), or
        pyarrow ``binary``/``large_binary``/``string``/``large_string`` arrays (nulls and sliced
        arrays included), read straight from the Arrow buffers. Any other iterable of
        bytes-like/str/None (a tuple, a generator, ...) is read
        once into a list first; a str, bytes, mapping or set is rejected. ``partition`` is None, one
        int for every record, or one per record (a list or other iterable of int/None, or a pyarrow
        integer array; a null entry is partitioned as if it were None). ``headers`` (as for
        :meth:`send`: a list of pairs or a dict) apply to every record; ``timestamp_ms`` (default:
        now) is every record's timestamp. ``get()`` raises the first delivery error.
        ``key_serializer``/``value_serializer`` apply to list columns. A Schema Registry serializer
        (:mod:`fastkafka.schema_registry`'s ``AvroSerializer``/``JSONSerializer``) also takes Arrow
        data whole: ``values`` (or ``keys``) may then be a pyarrow Table, RecordBatch, StructArray
        or any Array, or a Polars/pandas frame, one record per row, encoded in C with the GIL
        released. Any other serializer with an Arrow column is an InvalidRecordError (Arrow
        entries are bytes already).

        Per record (same length as ``values``; slices honoured, no Python object per record on the
        Arrow path):

        - ``timestamps``: a pyarrow ``timestamp`` array (any unit, converted to ms; a time zone
          changes nothing: the values are UTC), a pyarrow integer array (ms since the epoch), or a
          list of int/None. A null gets ``timestamp_ms`` (now when that is None).
        - ``record_headers``: a pyarrow ``list<struct<key: string, value: binary>>`` array (key
          ``string``/``large_string``; value ``binary``/``large_binary``/``string``/
          ``large_string``; ``list`` or ``large_list``), the layout of Spark's ``headers`` column,
          or a list of per-record headers (None, or pairs or a dict as for :meth:`send`). A null
          or empty list gives the record no headers of its own; a null value is a header with a
          null value; a null key (or a null entry) raises MalformedRecordError naming the record.
          The call's ``headers`` follow each record's own.

        Invalid input raises before any record of the call is queued: InvalidRecordError for a
        wrong type, MalformedRecordError (an InvalidRecordError and a ValueError) for an unusable
        value (lengths that differ, a released memoryview, ...), naming the argument and the
        record index. On the producer's I/O thread (in a delivery callback) it never waits: see
        :meth:`send`.
        """
        if self._interceptors is not None:  # on_send per record (fastkafka/interceptors.py)
            return self._interceptors.send_batch(self, topic, values, keys, partition, headers,
                                                 timestamp_ms, timestamps, record_headers)
        batch = self._prepare_batch(topic, values, keys, partition, headers, timestamp_ms,
                                    timestamps, record_headers)
        fut = BatchFuture(batch.n_records)
        self._append_prepared(batch, fut)
        return fut

    def _prepare_batch(self, topic, values, keys, partition, headers, timestamp_ms,
                       timestamps=None, record_headers=None, acks=None) -> "_PreparedBatch":
        """send_batch's checks and placement, nothing appended (shared with fastkafka.aio);
        ``acks``: the records' RecordAcks when there are interceptors."""
        self._check_open()
        if not isinstance(topic, str) or not topic:
            raise (MalformedRecordError if isinstance(topic, str) else InvalidRecordError)(
                f"topic must be a non-empty string, got {topic!r}")
        values = self._field_column(topic, values, "value")
        n_records = len(values)
        if keys is not None:
            keys = self._field_column(topic, keys, "key")
            if len(keys) != n_records:
                raise MalformedRecordError(
                    f"keys has {len(keys)} entries but values has {n_records}: expected one key "
                    f"(bytes-like, str or None) per value, or keys=None")
        timestamp_ms = validate_timestamp(timestamp_ms)
        validate_headers(headers)
        if timestamps is not None:
            timestamps = _per_record(timestamps, "timestamps", n_records)
        if record_headers is not None:
            record_headers = _per_record(record_headers, "record_headers", n_records)
        # the router (fastkafka/_producer/router.pyx), as for send(): the metadata wait, the checks
        # and the partition of every record
        parts, available, remaining = self._route_batch(topic, partition, keys, n_records)
        return _PreparedBatch(topic, values, keys, parts, available, remaining, headers,
                              timestamp_ms, n_records, timestamps, record_headers, acks)

    def _field_column(self, topic: str, data, field: str):
        """send_batch's ``values`` (``field`` "value") or ``keys`` as a column of bytes: Arrow data
        given to a Schema Registry serializer is encoded whole (one compiled call, the GIL
        released); lists go through the serializer one entry at a time."""
        encoder = self._column_encoders[field]
        if encoder is not None and type(data) is not list and encoder.takes_arrow(data):
            try:
                return encoder.encode_arrow(data, encoder.context(topic, field))
            except Exception as e:
                raise SerializationError(
                    f"{field}_serializer failed on send_batch's {field}s for topic {topic!r} "
                    f"({type(e).__name__}: {e}); nothing was sent", field=field,
                    topic=topic) from e
        return self._serialized_column(topic, _column(data, f"{field}s"), field)

    def _serialized_column(self, topic, col, field: str):
        """A list column through the serializer of ``field`` (send_batch); an Arrow column with
        that serializer set is refused: its entries are bytes already, and are written as such."""
        if getattr(self.config, f"{field}_serializer") is not None:
            if type(col) is not list:
                raise InvalidRecordError(
                    f"send_batch got a pyarrow {field}s column but {field}_serializer is set: Arrow "
                    f"columns are written as their bytes, never serialized; pass a list of objects "
                    f"to serialize, use a producer without {field}_serializer for Arrow data, or "
                    f"a fastkafka.schema_registry serializer, which encodes Arrow rows")
            return self._serialize_column(topic, col, field)
        return col

    def _append_prepared(self, b: "_PreparedBatch", fut: BatchFuture, start: int = 0) -> None:
        """Append the records of ``b`` from index ``start`` on, counted in ``fut``."""
        if b.acks is not None:   # with interceptors: one at a time, each acknowledged to them
            return self._append_acked(b, fut, start, b.acks)
        values, keys, parts = b.values, b.keys, b.parts
        tss, rhs = b.timestamps, b.record_headers
        if start:
            values = values[start:]
            keys = None if keys is None else keys[start:]
            parts = parts if isinstance(parts, int) else parts[start:]
            tss = None if tss is None else tss[start:]
            rhs = None if rhs is None else rhs[start:]
        self._acc.append_batch(b.topic, parts, values, keys, b.headers, b.timestamp_ms, fut,
                               monotonic_ms(), b.max_block_ms, b.available,
                               self._max_record_size - REQUEST_OVERHEAD, tss, rhs)
        self._sender.wakeup()
        yield_to_io()   # as send(): an I/O thread waiting for the GIL gets it now

    # -- flush / close ---------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now and wait for it; returns the records still undelivered
        (0 when all were delivered or failed — failures are reported through futures/callbacks).

        Raises IllegalStateError, changing nothing, when called from a delivery callback: those run
        on the I/O thread, which would then wait for itself."""
        self._check_not_io_thread("flush")
        if self._forked:
            raise self._closed_error()
        if self._closed:
            return 0
        self._acc.begin_flush()
        self._sender.wakeup()
        try:
            return self._acc.await_flush_completion(timeout)
        finally:
            self._acc.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (waiting up to ``timeout`` seconds, forever when None), then stop
        the I/O thread. Records still undelivered at the deadline fail with ProducerClosedError.

        With a ``timeout``, close returns within ``timeout`` + :data:`CLOSE_GRACE_S` seconds in
        every case: if the I/O thread has not stopped by then (a delivery callback that does not
        return), every record without an outcome is failed from this thread and close returns.

        Raises IllegalStateError when called from a delivery callback (the I/O thread cannot wait
        for itself to stop); the producer is left as it was, open, and a later close() from an
        application thread closes it. In a process forked after the producer was created, close()
        only marks it closed: its I/O thread does not exist there."""
        self._check_not_io_thread("close")
        if self._stop_io_thread():
            self._finish_close(timeout)

    def _stop_io_thread(self) -> bool:
        """close(), first half: refuse sends and tell the I/O thread to deliver what is queued and
        stop. False when there is nothing more to do (closed already, or a forked copy)."""
        with self._close_lock:
            if self._close_started:
                return False
            self._close_started = True
            self._closed = True
        if self._forked:
            return False
        self._acc.close()
        self._sender.running = False
        self._sender.wakeup()
        return True

    def _finish_close(self, timeout: float | None) -> int:
        """close(), second half: wait for the I/O thread (see close), then release the rest.
        Returns the records that had no outcome at the deadline and were failed by the close."""
        left = 0
        if not self._sender.join(timeout):
            # Counted at the deadline, less those delivered while the thread stops.
            queued = self._acc.incomplete_record_count()
            sent = self._sender.stats["records_sent"]
            self._sender.force_close = True
            self._sender.wakeup()
            if not self._sender.join(None if timeout is None else CLOSE_GRACE_S):
                self._abandon_io_thread(timeout)
            left = max(0, queued - (self._sender.stats["records_sent"] - sent))
        self._release_after_close()
        return left

    def _close_unattended(self, why: str, started: float | None = None) -> None:
        """The close nobody called (at interpreter exit, of a dropped producer), after
        _stop_io_thread (at time.monotonic() ``started``, default now): deliver for up to
        exit_flush_timeout_ms from then, fail the rest, and say so."""
        timeout_ms = self.config.exit_flush_timeout_ms
        if started is None:
            started = time.monotonic()
        left = self._finish_close(max(0.0, started + timeout_ms / 1000.0 - time.monotonic()))
        if left:
            log.warning("producer %s %s: %d record(s) not delivered within exit_flush_timeout_ms="
                        "%d failed with ProducerClosedError (call close() or flush() to wait for "
                        "them)", self._name, why, left, timeout_ms)

    def _abandon_io_thread(self, timeout) -> None:
        """The I/O thread did not stop within the close timeout and the grace after it."""
        log.error("the producer's I/O thread did not stop within %.1f s of close(%s) "
                  "(a delivery callback that does not return?): failing every record "
                  "without an outcome", CLOSE_GRACE_S, timeout)
        self._sender.fail_everything(ProducerClosedError(
            f"producer closed (close timeout {timeout} s passed, and the I/O thread did not "
            f"stop within {CLOSE_GRACE_S} s more) before these records were delivered"))

    def _release_after_close(self) -> None:
        self._metadata.close()
        self._pool.close()
        if self._interceptors is not None:
            self._interceptors.close()

    # -- transactions ----------------------------------------------------------------------
    def _txn_manager(self, what: str):
        txn = self._sender.txn
        if txn is None:
            raise IllegalStateError(f"{what}() needs a transactional producer: set transactional_id")
        self._check_not_io_thread(what)
        if self._closed:
            raise self._closed_error()
        return txn

    def _on_txn_state(self, state) -> None:
        # send() is allowed only inside a transaction (one flag test per record in send()).
        self._txn_blocked = state is not TxnState.IN_TRANSACTION

    def _timeout(self, timeout: float | None) -> float:
        return self.config.max_block_ms / 1000.0 if timeout is None else timeout

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional_id`` with its transaction coordinator and get the producer id
        and epoch: an older producer with the same id is fenced (its later requests fail with
        ProducerFencedError) and the transaction it left open is aborted. Call once, before the
        first ``begin_transaction()``. Waits up to ``timeout`` seconds (default max_block_ms);
        on KafkaTimeoutError it goes on in the background and may be called again."""
        txn, result = self._init_transactions_start()
        self._wait_txn(txn, "init", result, timeout, "init_transactions()")

    # Each transaction call is split into steps that do not wait, shared with fastkafka.aio,
    # whose coroutines await where these methods block.
    def _init_transactions_start(self):
        txn = self._txn_manager("init_transactions")
        with txn.lock:
            txn.check_not_fatal()
            if txn.state is TxnState.UNINITIALIZED:
                txn._set_state(TxnState.INITIALIZING)
                txn.pending_result["init"] = txn.enqueue(
                    "init", ApiKey.INIT_PRODUCER_ID, (TRANSACTION, txn.transactional_id))
            elif txn.state is not TxnState.INITIALIZING:
                raise IllegalStateError(f"init_transactions() was already called (transaction state "
                                        f"{txn.state.value})")
            return txn, txn.pending_result["init"]

    def _wait_txn(self, txn, key: str, result, timeout, what: str):
        try:
            return result.wait(self._timeout(timeout), what)
        finally:
            if result.done():
                txn.pending_result.pop(key, None)

    def begin_transaction(self) -> None:
        """Open a transaction: every record sent until ``commit_transaction()`` or
        ``abort_transaction()`` belongs to it. Local; nothing is sent until the first record."""
        txn = self._txn_manager("begin_transaction")
        with txn.lock:
            txn.check_not_fatal()
            if txn.state is not TxnState.READY:
                raise IllegalStateError(
                    "begin_transaction() needs init_transactions() first" if txn.state in (
                        TxnState.UNINITIALIZED, TxnState.INITIALIZING) else
                    f"begin_transaction() while a transaction is {txn.state.value}: commit or abort "
                    f"it first")
            txn.error = None
            txn._set_state(TxnState.IN_TRANSACTION)

    def _check_open_transaction(self, txn, what: str, allowed=(TxnState.IN_TRANSACTION,)) -> None:
        txn.check_not_fatal()
        if txn.state is TxnState.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"{what}: the transaction cannot be committed ({txn.error}); call "
                f"abort_transaction()", cause=txn.error)
        if txn.state not in allowed:
            raise IllegalStateError(f"{what} needs an open transaction (begin_transaction()); the "
                                    f"transaction state is {txn.state.value}")

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout: float | None = None) -> None:
        """Commit consumer offsets as part of the current transaction (consume-transform-produce):
        they become visible together with the transaction's records, or not at all.

        ``offsets``: ``{(topic, partition): next_offset}`` (or ``(next_offset, metadata)``), or an
        iterable of objects with ``topic``, ``partition`` and ``offset`` (e.g. another library's
        TopicPartition). ``group_metadata``: the group id, a mapping with ``group_id`` (and
        ``generation_id``, ``member_id``, ``group_instance_id`` of a group member), or an object
        with those attributes."""
        result = self._send_offsets_start(offsets, group_metadata)
        result.wait(self._timeout(timeout), "send_offsets_to_transaction()")

    def _send_offsets_start(self, offsets, group_metadata):
        by_topic = offsets_by_topic(offsets)
        group = GroupMetadata.of(group_metadata)
        txn = self._txn_manager("send_offsets_to_transaction")
        with txn.lock:
            self._check_open_transaction(txn, "send_offsets_to_transaction()")
            return txn.enqueue("add_offsets", ApiKey.ADD_OFFSETS_TO_TXN,
                               (TRANSACTION, txn.transactional_id),
                               {"group": group, "offsets": by_topic})

    def _flush_transaction(self, txn, what: str, timeout) -> None:
        """Deliver every record of the transaction (COMMITTING blocks new sends); raise if one
        failed (the transaction must be aborted) or if records are left after ``timeout``."""
        self._check_transaction_flushed(txn, what, timeout, self.flush(self._timeout(timeout)))

    def _check_transaction_flushed(self, txn, what: str, timeout, left: int) -> None:
        if left:
            raise KafkaTimeoutError(
                f"{what}: {left} record(s) of the transaction not yet delivered after "
                f"{self._timeout(timeout)} s; call {what} again to keep waiting, or abort_transaction()")
        with txn.lock:
            txn.check_not_fatal()
            if txn.state is TxnState.ABORTABLE_ERROR:
                raise TransactionAbortableError(
                    f"{what}: the transaction cannot be committed, a record or step of it failed "
                    f"({txn.error}); call abort_transaction()", cause=txn.error)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it: its records (and offsets)
        become visible to read_committed consumers. Raises TransactionAbortableError (call
        ``abort_transaction()``) when a record failed, the fatal error when the producer was
        fenced, KafkaTimeoutError when ``timeout`` passed first (call it again to keep waiting)."""
        txn, result = self._commit_start()
        if result is None:
            self._flush_transaction(txn, "commit_transaction()", timeout)
            result = self._commit_enqueue(txn)
        self._wait_txn(txn, "commit", result, timeout, "commit_transaction()")

    def _commit_start(self):
        """(txn, the commit's result when already sent, else None: flush, then _commit_enqueue)."""
        txn = self._txn_manager("commit_transaction")
        with txn.lock:
            self._check_open_transaction(txn, "commit_transaction()", (
                TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.PREPARED))
            txn._set_state(TxnState.COMMITTING)
            return txn, txn.pending_result.get("commit")

    def _commit_enqueue(self, txn):
        with txn.lock:
            result = txn.pending_result.get("commit")
            if result is None:
                result = txn.pending_result["commit"] = txn.enqueue(
                    "end", ApiKey.END_TXN, (TRANSACTION, txn.transactional_id), {"committed": True})
            return result

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError, records
        already written are never visible to read_committed consumers. The producer is then
        ready for ``begin_transaction()``."""
        txn, result = self._abort_start()
        self._wait_txn(txn, "abort", result, timeout, "abort_transaction()")

    def _abort_start(self):
        txn = self._txn_manager("abort_transaction")
        with txn.lock:
            txn.check_not_fatal()
            result = txn.pending_result.get("abort")
            if result is None:
                if txn.state is TxnState.COMMITTING and "commit" in txn.pending_result:
                    raise IllegalStateError("abort_transaction() after commit_transaction() sent the "
                                            "commit: call commit_transaction() again to wait for it")
                if txn.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR,
                                     TxnState.COMMITTING, TxnState.PREPARED):
                    raise IllegalStateError(f"abort_transaction() with no open transaction (state "
                                            f"{txn.state.value})")
                txn._set_state(TxnState.ABORTING)
                result = txn.pending_result["abort"] = txn.enqueue(
                    "end", ApiKey.END_TXN, (TRANSACTION, txn.transactional_id), {"committed": False})
            return txn, result

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction | None:
        """First phase of a two-phase commit: deliver every record of the transaction and leave
        it open. Returns its :class:`PreparedTransaction` (transactional id, producer id, epoch),
        with which any process commits or aborts it (``Admin.commit_transaction`` /
        ``Admin.abort_transaction``), or None when the transaction holds nothing (no record, no
        offsets: there is nothing to commit). This producer then only commits, aborts or closes
        (close() leaves a prepared transaction open). The broker aborts a prepared transaction
        that is not finished within ``transaction_timeout_ms``."""
        txn = self._prepare_start()
        self._flush_transaction(txn, "prepare_transaction()", timeout)
        return self._prepare_finish(txn)

    def _prepare_start(self):
        txn = self._txn_manager("prepare_transaction")
        with txn.lock:
            self._check_open_transaction(txn, "prepare_transaction()",
                                         (TxnState.IN_TRANSACTION, TxnState.COMMITTING))
            txn._set_state(TxnState.COMMITTING)
        return txn

    def _prepare_finish(self, txn) -> PreparedTransaction | None:
        idem = self._sender.idem
        with txn.lock:
            if not txn.started:
                txn._set_state(TxnState.READY)
                return None
            txn._set_state(TxnState.PREPARED)
            return PreparedTransaction(txn.transactional_id, idem.producer_id, idem.producer_epoch)

    @property
    def transaction_state(self) -> str | None:
        """The transaction state (``"READY"``, ``"IN_TRANSACTION"``, ...), None when the producer
        is not transactional."""
        txn = self._sender.txn
        return None if txn is None else txn.state.value

    def _txn_send_error(self) -> Exception:
        txn = self._sender.txn
        state = txn.state
        if state is TxnState.FATAL_ERROR:
            return copy.copy(txn.error)
        if state is TxnState.ABORTABLE_ERROR:
            return TransactionAbortableError(
                f"cannot send: the transaction must be aborted ({txn.error}); call "
                f"abort_transaction()", cause=txn.error)
        if state in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
            return IllegalStateError("cannot send before init_transactions() and "
                                     "begin_transaction(): the producer is transactional")
        if state is TxnState.READY:
            return IllegalStateError("cannot send outside a transaction: call begin_transaction() "
                                     "first (the producer is transactional)")
        return IllegalStateError(f"cannot send while the transaction is {state.value}")

    def _closed_error(self) -> Exception:
        if not self._closed and self._txn_blocked:
            return self._txn_send_error()
        if self._forked:
            return ProducerForkedError(
                f"producer {self._name} was created in process {self._pid} and cannot be used in "
                f"this forked child (process {os.getpid()}): its I/O thread exists only in the "
                f"parent. Create a new Producer in the child")
        fatal = self._sender.fatal_error
        if fatal is not None:
            return ProducerClosedError(f"cannot send: {fatal.message}")
        return ProducerClosedError("cannot send: the producer is closed")

    def _on_io_thread_failed(self) -> None:
        self._closed = True

    def _after_fork_in_child(self) -> None:
        self._forked = True
        self._closed = True       # send()/produce() refuse at once (with _closed_error)

    def _on_io_thread(self) -> bool:
        sender = getattr(self, "_sender", None)
        return sender is not None and threading.current_thread() is sender._thread

    def _check_not_io_thread(self, what: str) -> None:
        if self._on_io_thread():
            raise IllegalStateError(
                f"{what}() called from a delivery callback: callbacks run on the producer's I/O "
                f"thread, which cannot wait for its own deliveries or stop itself. Call {what}() "
                f"from an application thread; the producer was left unchanged")

    def __del__(self):
        # Dropped without close(): no reference of the I/O thread keeps a producer alive
        # (_weak_method), so this runs once the application lets go of it. The close is the one
        # of interpreter exit, bounded by exit_flush_timeout_ms, on a thread of its own: a
        # finalizer runs on whatever thread dropped the last reference or ran the garbage
        # collector (an event loop's, or the I/O thread itself, which cannot join itself), and
        # must not block it. That thread keeps the producer alive until it is closed. It is not
        # a daemon thread, so an exit waits for it (bounded); if no thread can be started (the
        # interpreter is shutting down), the close runs here, or, on the I/O thread, the thread
        # is only told to finish what is queued and stop.
        if getattr(self, "_forked", False) or getattr(self, "_close_started", True):
            return
        try:
            if not self._stop_io_thread():
                return
            try:
                threading.Thread(target=self._close_unattended, args=("dropped without close()",),
                                 name=f"fastkafka-close-{self._name}", daemon=False).start()
            except RuntimeError:
                if not self._on_io_thread():
                    self._close_unattended("dropped without close()")
        except Exception:
            pass

    # -- introspection ---------------------------------------------------------------------
    def metrics(self) -> dict:
        """Counters of the producer: records and batches sent, retries, errors, bytes, buffer use."""
        return producer_counters(self._sender, self._client, self._pool, self._acc, self._metadata)

    def java_metrics(self) -> dict:
        """The Java producer's metrics, with its names and meanings (docs/observability.md):
        ``{"producer-metrics": {...}, "producer-node-metrics": {"node-1": {...}},
        "producer-topic-metrics": {"topic": {...}}}``; rates, averages and maxima over the last
        ``metrics_num_samples`` windows of ``metrics_sample_window_ms``; None where Java has NaN
        (no event in the windows). JSON-serialisable. E.g.
        ``producer.java_metrics()["producer-metrics"]["batch-size-avg"]``."""
        return _java_metrics(self._client, self._pool, self._metadata)

    def _stats_document(self) -> dict:
        # what stats_cb gets: java_metrics() and, under "fastkafka-metrics", metrics()
        doc = self.java_metrics()
        doc["fastkafka-metrics"] = self.metrics()
        return doc


__all__ = ["Producer", "RecordMetadata", "FutureRecordMetadata", "BatchFuture"]

