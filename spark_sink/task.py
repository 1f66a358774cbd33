"""What one Spark task does: feed its rows to the process's producer, flush, report.

One producer per Python worker process, created on first use after the fork and cached by (settings,
pid): Spark reuses its Python workers across tasks and micro-batches, so later tasks find the producer
connected, with metadata and a producer id. Idle workers are killed without warning, so every task
flushes before it returns; a task whose records are not all acknowledged raises (the first delivery
error, or a timeout) and Spark retries it. Delivery is therefore at-least-once.

With ``delivery.guarantee=exactly_once`` a task has a transactional producer of its own instead
(transactional id ``<prefix>-<partition>``), prepares its transaction at the end and reports it to the
driver, which commits it (:mod:`spark_sink.exactly_once`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass

from fastkafka import EncodedHeaders, Producer
from fastkafka.errors import InvalidRecordError, KafkaError, KafkaTimeoutError

from .metrics import read_totals, task_snapshot
from .options import SinkSettings

_producers: dict = {}
_producers_lock = threading.Lock()


def get_producer(settings: SinkSettings) -> Producer:
    """The process's producer for these settings (made on first use in this process)."""
    key = (repr(settings.producer_config), os.getpid())
    p = _producers.get(key)
    if p is None:
        with _producers_lock:
            p = _producers.get(key)
            if p is None:
                for stale in [k for k in _producers if k[1] != os.getpid()]:
                    del _producers[stale]  # inherited through a fork: its thread did not survive
                p = _producers[key] = Producer(settings.producer_kwargs())
    return p


@dataclass
class TaskReport:
    """What one task did; Spark hands these to the driver as commit messages."""

    partition_id: int = -1
    attempt: int = 0
    rows: int = 0
    bytes: int = 0              # key and value bytes
    seconds: float = 0.0
    errors: int = 0             # records that failed (the task raised if > 0)
    first_error: str | None = None
    # exactly_once: the prepared transaction (transactional id, producer id, epoch), or None when
    # the task wrote nothing
    transaction: tuple | None = None
    # the producer's metrics during the task (spark_sink/metrics.py): Java names, totals as the
    # task's deltas, windowed averages and maxima as they are at its end
    producer_metrics: dict | None = None


def _task_context():
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is there whenever Spark runs us
        return None
    return TaskContext.get()


class DeliveryError(KafkaError):
    """Records of a Spark task were not delivered; Spark retries the task."""


class TaskWriter:
    """Send one task's rows (Arrow batches or Rows) and settle them in :meth:`finish`."""

    def __init__(self, settings: SinkSettings):
        self.settings = settings
        self.report = TaskReport()
        self._start = time.monotonic()
        self._futures = []
        self._failed = 0
        self._first_error = None
        self._lock = threading.Lock()
        ctx = _task_context()
        batch_id = settings.batch_id
        if ctx is not None:
            self.report.partition_id = ctx.partitionId()
            self.report.attempt = ctx.attemptNumber()
            if batch_id < 0:
                prop = ctx.getLocalProperty("streaming.sql.batchId")
                if prop is not None:
                    batch_id = int(prop)
        self._transactional = settings.exactly_once
        self.producer = (self._transactional_producer() if self._transactional
                         else get_producer(settings))
        self._metrics_start = _read_totals(self.producer)
        self.headers = None
        if settings.task_headers:
            self.headers = [("spark.partition", b"%d" % self.report.partition_id),
                            ("spark.attempt", b"%d" % self.report.attempt),
                            ("spark.batch", b"%d" % batch_id)]
        # encoded once: rows without headers of their own copy these bytes
        self._encoded_headers = EncodedHeaders(self.headers) if self.headers else None
        cols = {c.lower(): c for c in settings.columns}
        self._value = cols["value"]
        self._key = cols.get("key")
        self._topic_col = cols.get("topic")
        self._partition = cols.get("partition")
        self._headers_col = cols.get("headers")
        self._timestamp_col = cols.get("timestamp")
        self._row_index = None        # positions of those columns in a Row (row path)

    def _transactional_producer(self) -> Producer:
        """exactly_once: a producer of this task attempt's own, in a transaction."""
        from .exactly_once import transactional_id

        tid = transactional_id(self.settings.transactional_id_prefix, self.report.partition_id,
                               self.report.attempt)
        p = Producer({**self.settings.producer_kwargs(), "transactional_id": tid})
        try:
            p.init_transactions()
            p.begin_transaction()
        except BaseException:
            p.close(0)
            raise
        return p

    def abort(self) -> None:
        """The task failed: abort its transaction (exactly_once) so that it holds nothing back.
        Best effort: a later attempt's init_transactions, or the driver's abort, does it anyway."""
        if not self._transactional or self.producer is None:
            return
        p, self.producer = self.producer, None
        try:
            if p.transaction_state in ("IN_TRANSACTION", "ABORTABLE_ERROR", "COMMITTING", "PREPARED"):
                p.abort_transaction(10)
        except Exception as e:
            print(f"fastkafka sink: aborting the task's transaction failed: {e}", file=sys.stderr)
        finally:
            p.close(5)

    # -- Arrow path ------------------------------------------------------------------------
    def write_arrow(self, batch) -> None:
        """Queue one pyarrow RecordBatch, read straight from its buffers (no object per row):
        values, keys, partitions, the per-row ``headers`` (list<struct<key, value>>) and
        ``timestamp`` (a null: the producer's current time) columns."""
        import pyarrow.compute as pc

        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names

        def col(name):
            return batch.column(names.index(name)) if name else None

        value, key, part = col(self._value), col(self._key), col(self._partition)
        cols = (value, key, part, col(self._timestamp_col), col(self._headers_col))
        self.report.rows += n
        self.report.bytes += _byte_count(value) + (0 if key is None else _byte_count(key))
        if self.settings.topic is not None:
            self._send_batch(self.settings.topic, *cols)
            return
        topics = batch.column(names.index(self._topic_col))
        if topics.null_count:
            i = pc.index(pc.is_null(topics), True).as_py()
            raise InvalidRecordError(f"row {i} of the batch has a null topic and no 'topic' option is set")
        uniq = pc.unique(topics)
        if len(uniq) == 1:
            self._send_batch(uniq[0].as_py(), *cols)
            return
        for t in uniq.to_pylist():
            mask = pc.equal(topics, t)
            self._send_batch(t, *(None if c is None else c.filter(mask) for c in cols))

    def _send_batch(self, topic, value, key, part, timestamps, headers) -> None:
        # per-row headers first, then the task's (as on the row path)
        self._futures.append(self.producer.send_batch(
            topic, value, keys=key, partition=part, headers=self._encoded_headers,
            timestamps=timestamps, record_headers=headers))

    # -- row path --------------------------------------------------------------------------
    def _on_delivery(self, err, md) -> None:
        if err is not None:
            with self._lock:
                self._failed += 1
                if self._first_error is None:
                    self._first_error = err

    def write_row_values(self, value, key=None, topic=None, partition=None, headers=None,
                         timestamp=None) -> None:
        """Queue one record given as Python values (str is sent as UTF-8). ``timestamp``: a
        datetime (a naive one in the local time zone, as pyspark gives TimestampType values), an
        int (ms since the epoch) or None (the producer's current time)."""
        if isinstance(value, str):
            value = value.encode()
        if isinstance(key, str):
            key = key.encode()
        t = self.settings.topic or topic
        if t is None:
            raise InvalidRecordError("a row has a null topic and no 'topic' option is set")
        hs = self._encoded_headers
        if headers:
            hs = [(h["key"], h["value"]) if isinstance(h, dict) else (h[0], h[1]) for h in headers]
            if self.headers:
                hs = hs + self.headers
        if timestamp is not None and not isinstance(timestamp, int):
            timestamp = _datetime_ms(timestamp)
        self.producer.produce(t, value, key, partition, self._on_delivery, timestamp, hs)
        self.report.rows += 1
        self.report.bytes += (len(value) if value is not None else 0) + (len(key) if key is not None else 0)

    def write_row(self, row) -> None:
        """Queue one pyspark Row (read by position: the column positions are looked up once)."""
        idx = self._row_index
        if idx is None:
            fields = list(row.__fields__)
            idx = self._row_index = tuple(
                None if c is None else fields.index(c)
                for c in (self._value, self._key, self._topic_col, self._partition, self._headers_col,
                          self._timestamp_col))
        self.write_row_values(*[None if i is None else row[i] for i in idx])

    # -- end of the task -------------------------------------------------------------------
    def finish(self) -> TaskReport:
        """Flush; raise DeliveryError with the first error if any record failed or is still
        undelivered at the deadline; otherwise return the report."""
        timeout = self.settings.flush_timeout_s
        if timeout is None:
            timeout = self.producer.config.delivery_timeout_ms / 1000.0 + 5.0
        left = self.producer.flush(timeout)
        failed = self._failed
        first = self._first_error
        for f in self._futures:
            if f.done():
                failed += f.failed
                if first is None and f.first_error is not None:
                    first = f.first_error
            elif first is None:
                first = KafkaTimeoutError(f"records still undelivered after {timeout:.0f} s")
        self.report.seconds = time.monotonic() - self._start
        self.report.errors = failed
        self.report.producer_metrics = _snapshot(self.producer, self._metrics_start)
        if left and first is None:
            first = KafkaTimeoutError(f"{left} records still undelivered after flush({timeout:.0f} s)")
        if first is not None:
            self.report.first_error = repr(first)
            self.abort()
            raise DeliveryError(
                f"Spark task (partition {self.report.partition_id}, attempt {self.report.attempt}): "
                f"{failed} of {self.report.rows} records failed"
                + (f", {left} undelivered" if left else "")
                + f"; first error: {type(first).__name__}: {first}") from first
        if self._transactional:
            p = self.producer
            try:
                prepared = p.prepare_transaction(timeout)
            except BaseException:
                self.abort()
                raise
            self.producer = None
            p.close(5)    # a prepared transaction stays open: the driver commits it
            if prepared is not None:
                self.report.transaction = (prepared.transactional_id, prepared.producer_id,
                                           prepared.producer_epoch)
        return self.report


def _read_totals(producer) -> dict | None:
    try:
        return read_totals(producer)
    except Exception as e:      # metrics never fail a task
        print(f"fastkafka sink: reading the producer's metrics failed: {e!r}", file=sys.stderr)
        return None


def _snapshot(producer, start) -> dict | None:
    if start is None:
        return None
    try:
        return task_snapshot(producer, start)
    except Exception as e:
        print(f"fastkafka sink: reading the producer's metrics failed: {e!r}", file=sys.stderr)
        return None


def _datetime_ms(dt) -> int:
    """ms since the epoch of a datetime (naive: local time, as pyspark makes them), truncated."""
    try:
        return int(dt.replace(microsecond=0).timestamp()) * 1000 + dt.microsecond // 1000
    except (AttributeError, TypeError):
        raise InvalidRecordError(f"a timestamp must be a datetime or an int (ms since the epoch), "
                                 f"not {type(dt).__name__}") from None


def _byte_count(arr) -> int:
    """Bytes of a binary/string Arrow array's values (nulls count 0), from its offsets buffer:
    the values of a (sliced) array are one contiguous run of its data buffer."""
    import pyarrow as pa

    n = len(arr)
    if n == 0:
        return 0
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        code = "i"
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        code = "q"
    else:
        raise InvalidRecordError(f"a key or value column must be binary or string, got {t}")
    offsets = memoryview(arr.buffers()[1]).cast("B").cast(code)
    return offsets[arr.offset + n] - offsets[arr.offset]
