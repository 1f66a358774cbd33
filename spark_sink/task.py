"""The Spark task: its column rules and the code that writes its rows.

Column rules (:func:`check_schema`, on the driver before any task runs; :func:`row_columns` for the
Rows of ``partition_writer``) follow Spark's own Kafka sink: ``value`` (required; binary or
string), ``key`` (binary or string), any type for a column with ``value.format`` / ``key.format``
(encoded for a Schema Registry by the encoder the driver resolved, :mod:`spark_sink.formats`), ``topic`` (string), ``partition`` (int), ``headers``
(array<struct<key: string, value: binary>>), ``timestamp`` (timestamp, or bigint as ms since the
epoch). Other columns are ignored.

Writing (:func:`run_task`, :class:`TaskWriter`): one producer per Python worker process, created on
first use after the fork and cached by (settings, pid): Spark reuses its Python workers across tasks
and micro-batches, so later tasks find the producer connected, with metadata and a producer id. Idle
workers are killed without warning, so every task flushes before it returns; a task whose records
are not all acknowledged raises (the first delivery error, or a timeout) and Spark retries it.
Delivery is therefore at-least-once.

With ``delivery.guarantee=exactly_once`` a task has a transactional producer of its own instead
(transactional id ``<prefix>-<partition>-<attempt>``), prepares its transaction at the end and
reports it to the driver, which commits it (:mod:`spark_sink.exactly_once`).

The data source's tasks (:mod:`spark_sink.datasource`), ``partition_writer``'s and, on Spark 3.5,
``batch_writer``'s (:mod:`spark_sink.batch_job`) all run :func:`run_task`.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from fastkafka import BatchFuture, EncodedHeaders, Producer, RecordMetadata
from fastkafka.errors import ConfigError, IllegalStateError, InvalidRecordError, KafkaError, KafkaTimeoutError

from .metrics import read_totals, task_snapshot
from .options import SinkSettings

if TYPE_CHECKING:
    from pyspark.sql import Row
    from pyspark.sql.types import StructType

_producers: dict[tuple[str, int], Producer] = {}
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
    transaction: tuple[str, int, int] | None = None
    # the producer's metrics during the task (spark_sink/metrics.py): Java names, totals as the
    # task's deltas, windowed averages and maxima as they are at its end
    producer_metrics: dict[str, Any] | None = None


def _task_context() -> Any:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is there whenever Spark runs us
        return None
    return TaskContext.get()


class DeliveryError(KafkaError):
    """Records of a Spark task were not delivered; Spark retries the task."""


class SchemaError(ValueError):
    """The DataFrame's columns do not fit the sink (missing ``value``, a wrong type, no topic)."""


# ------------------------------------------------------------------------------ column rules
def check_schema(schema: StructType, settings: SinkSettings) -> SinkSettings:
    """Check a Spark ``StructType`` against the sink's input columns; SchemaError naming the
    problem. Returns the settings with the columns that will be read."""
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                                   StructType, TimestampType)

    fields = {f.name.lower(): f for f in schema.fields}
    found: list[str] = []

    formats = settings.formats

    def bin_or_str(name: str, required: bool) -> None:
        f = fields.get(name)
        formatted = formats is not None and getattr(formats, name) is not None
        if f is None:
            if required:
                raise SchemaError(
                    f"the DataFrame has no '{name}' column (columns: "
                    f"{', '.join(x.name for x in schema.fields) or 'none'}); the sink needs "
                    f"'{name}' as binary or string"
                    + (" (or any type with the option 'value.format')" if name == "value" else ""))
            return
        if not formatted and not isinstance(f.dataType, (BinaryType, StringType)):
            raise SchemaError(f"column '{f.name}' must be binary or string, not "
                              f"{f.dataType.simpleString()}; to write a "
                              f"{f.dataType.typeName()} column for a Schema Registry set the option "
                              f"'{name}.format' to avro or json (with 'schema.registry.url')")
        found.append(f.name)

    bin_or_str("value", True)
    bin_or_str("key", False)
    f = fields.get("topic")
    if f is not None:
        if not isinstance(f.dataType, StringType):
            raise SchemaError(f"column '{f.name}' must be string, not {f.dataType.simpleString()}")
        if settings.topic is None:
            found.append(f.name)
    elif settings.topic is None:
        raise SchemaError("no topic: set the option 'topic' (topic=...) or give the DataFrame a "
                          "string 'topic' column")
    f = fields.get("partition")
    if f is not None:
        if not isinstance(f.dataType, IntegerType):
            raise SchemaError(f"column '{f.name}' must be int, not {f.dataType.simpleString()}")
        found.append(f.name)
    f = fields.get("headers")
    if f is not None:
        t = f.dataType
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [x.name for x in t.elementType.fields] == ["key", "value"]
              and isinstance(t.elementType.fields[0].dataType, StringType)
              and isinstance(t.elementType.fields[1].dataType, BinaryType))
        if not ok:
            raise SchemaError(f"column '{f.name}' must be array<struct<key:string,value:binary>>, "
                              f"not {t.simpleString()}")
        found.append(f.name)
    f = fields.get("timestamp")
    if f is not None:
        if type(f.dataType) not in (TimestampType, LongType):
            raise SchemaError(f"column '{f.name}' must be timestamp (or bigint: ms since the epoch), "
                              f"not {f.dataType.simpleString()}; rename or cast it (e.g. "
                              f"cast({f.name} AS timestamp))")
        found.append(f.name)
    settings = settings.with_columns(found)
    if formats is not None:
        # the schemas registered (or looked up) once, here on the driver; the tasks get the ids
        from .formats import resolve_encoders

        value, key = fields.get("value"), fields.get("key")
        settings = resolve_encoders(settings, value.dataType if value is not None else None,
                                    key.dataType if key is not None else None)
    return settings


def row_columns(fields: Sequence[str], settings: SinkSettings) -> list[str]:
    """The columns a task reads from Rows with these field names (``partition_writer``, which
    sees no schema before its first row): SchemaError without ``value`` or a topic."""
    lower = {f.lower(): f for f in fields}
    if "value" not in lower:
        raise SchemaError(f"the rows have no 'value' column (columns: {', '.join(fields)})")
    if settings.topic is None and "topic" not in lower:
        raise SchemaError("no topic: pass topic=... or give the rows a 'topic' column")
    wanted = (["value", "key", "partition", "headers", "timestamp"]
              + ([] if settings.topic else ["topic"]))
    return [lower[c] for c in wanted if c in lower]


# ------------------------------------------------------------------------------ the task
def run_task(settings: SinkSettings, items: Iterable[Any], arrow: bool) -> TaskReport:
    """One Spark task: write ``items`` (pyarrow RecordBatches when ``arrow``, else pyspark Rows),
    flush and return the report; on any failure abort (exactly_once: leave no open transaction
    behind) and raise, so that Spark retries the task."""
    writer = TaskWriter(settings)
    write = writer.write_arrow if arrow else writer.write_row
    try:
        for item in items:
            write(item)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def run_partition(settings: SinkSettings, rows: Iterable[Row]) -> TaskReport:
    """The body of a ``partition_writer`` task (also usable on its own): the columns are read from
    the first Row's fields; returns the report."""
    it = iter(rows)
    first = next(it, None)
    if first is None:
        return TaskReport()
    settings = settings.with_columns(row_columns(list(first.__fields__), settings))

    def all_rows() -> Iterable[Row]:
        yield first
        yield from it

    return run_task(settings, all_rows(), arrow=False)


class TaskWriter:
    """Send one task's rows (Arrow batches or Rows) and settle them in :meth:`finish`."""

    def __init__(self, settings: SinkSettings) -> None:
        self.settings = settings
        self.report = TaskReport()
        self._start = time.monotonic()
        self._futures: list[BatchFuture] = []
        self._failed = 0
        self._first_error: BaseException | None = None
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
        self.producer: Producer | None = (self._transactional_producer() if self._transactional
                         else get_producer(settings))
        self._metrics_start = _read_totals(self.producer)
        self.headers: list[tuple[str, bytes]] | None = None
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
        self._row_index: tuple[int | None, ...] | None = None   # positions of those columns in a Row (row path)
        # value.format / key.format: the driver's encoders (spark_sink.formats), else None
        self._value_encoder = settings.value_encoder
        self._key_encoder = settings.key_encoder if self._key is not None else None
        if settings.formats is not None:
            for part, encoder in (("value", self._value_encoder), ("key", self._key_encoder)):
                if getattr(settings.formats, part) is not None and encoder is None and (
                        part == "value" or self._key is not None):
                    raise ConfigError(f"option '{part}.format' is set but the driver resolved no "
                                      f"encoder for the '{part}' column")

    def _transactional_producer(self) -> Producer:
        """exactly_once: a producer of this task attempt's own, in a transaction."""
        from .exactly_once import transactional_id

        prefix = self.settings.transactional_id_prefix
        if not prefix:
            raise ConfigError("delivery.guarantee=exactly_once needs the option "
                              "'transactional.id.prefix'")
        tid = transactional_id(prefix, self.report.partition_id, self.report.attempt)
        p = Producer({**self.settings.producer_kwargs(), "transactional_id": tid})
        try:
            p.init_transactions()
            p.begin_transaction()
        except BaseException:
            p.close(0)
            raise
        return p

    def _live(self) -> Producer:
        p = self.producer
        if p is None:
            raise IllegalStateError("the task has ended (finished or aborted): its producer is closed")
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
    def write_arrow(self, batch: Any) -> None:
        """Queue one pyarrow RecordBatch, read straight from its buffers (no object per row):
        values, keys, partitions, the per-row ``headers`` (list<struct<key, value>>) and
        ``timestamp`` (a null: the producer's current time) columns."""
        import pyarrow.compute as pc

        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names

        def col(name: str | None) -> Any:
            return batch.column(names.index(name)) if name else None

        value, key, part = col(self._value), col(self._key), col(self._partition)
        if self._value_encoder is not None:
            value = self._value_encoder.encode_arrow(value)     # one framed value per row
        if self._key_encoder is not None and key is not None:
            key = self._key_encoder.encode_arrow(key)
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

    def _send_batch(self, topic: str, value: Any, key: Any, part: Any, timestamps: Any,
                    headers: Any) -> None:
        # per-row headers first, then the task's (as on the row path)
        self._futures.append(self._live().send_batch(
            topic, value, keys=key, partition=part, headers=self._encoded_headers,
            timestamps=timestamps, record_headers=headers))

    # -- row path --------------------------------------------------------------------------
    def _on_delivery(self, err: KafkaError | None, md: RecordMetadata) -> None:
        if err is not None:
            with self._lock:
                self._failed += 1
                if self._first_error is None:
                    self._first_error = err

    def write_row_values(self, value: bytes | str | None, key: bytes | str | None = None,
                         topic: str | None = None, partition: int | None = None,
                         headers: Sequence[Any] | None = None,
                         timestamp: datetime.datetime | int | None = None) -> None:
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
        hs: EncodedHeaders | list[tuple[str, bytes]] | None = self._encoded_headers
        if headers:
            row_headers: list[tuple[str, bytes]] = [
                (h["key"], h["value"]) if isinstance(h, dict) else (h[0], h[1]) for h in headers]
            hs = row_headers + self.headers if self.headers else row_headers
        if timestamp is not None and not isinstance(timestamp, int):
            timestamp = _datetime_ms(timestamp)
        self._live().produce(t, value, key, partition, self._on_delivery, timestamp, hs)
        self.report.rows += 1
        self.report.bytes += (len(value) if value is not None else 0) + (len(key) if key is not None else 0)

    def write_row(self, row: Row) -> None:
        """Queue one pyspark Row (read by position: the column positions are looked up once)."""
        idx = self._row_index
        if idx is None:
            fields = list(row.__fields__)
            idx = self._row_index = tuple(
                None if c is None else fields.index(c)
                for c in (self._value, self._key, self._topic_col, self._partition, self._headers_col,
                          self._timestamp_col))
        values = [None if i is None else row[i] for i in idx]
        if self._value_encoder is not None:
            values[0] = self._value_encoder.encode_value(values[0])
        if self._key_encoder is not None:
            values[1] = self._key_encoder.encode_value(values[1])
        try:
            self.write_row_values(*values)
        except InvalidRecordError as e:
            for part, v in (("value", values[0]), ("key", values[1])):
                if v is not None and not isinstance(v, (bytes, bytearray, memoryview, str)):
                    raise InvalidRecordError(
                        f"{e}; to write a {type(v).__name__} {part} for a Schema Registry pass "
                        f"{part}_format='avro' or 'json' (with schema_registry={{'url': ...}})") from e
            raise

    # -- end of the task -------------------------------------------------------------------
    def finish(self) -> TaskReport:
        """Flush; raise DeliveryError with the first error if any record failed or is still
        undelivered at the deadline; otherwise return the report."""
        p = self._live()
        timeout = self.settings.flush_timeout_s
        if timeout is None:
            timeout = int(p.config.as_dict()["delivery_timeout_ms"]) / 1000.0 + 5.0
        left = p.flush(timeout)
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
        self.report.producer_metrics = _snapshot(p, self._metrics_start)
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


def _read_totals(producer: Producer) -> dict[str, Any] | None:
    try:
        return read_totals(producer)
    except Exception as e:      # metrics never fail a task
        print(f"fastkafka sink: reading the producer's metrics failed: {e!r}", file=sys.stderr)
        return None


def _snapshot(producer: Producer, start: dict[str, Any] | None) -> dict[str, Any] | None:
    if start is None:
        return None
    try:
        return task_snapshot(producer, start)
    except Exception as e:
        print(f"fastkafka sink: reading the producer's metrics failed: {e!r}", file=sys.stderr)
        return None


def _datetime_ms(dt: datetime.datetime) -> int:
    """ms since the epoch of a datetime (naive: local time, as pyspark makes them), truncated."""
    try:
        return int(dt.replace(microsecond=0).timestamp()) * 1000 + dt.microsecond // 1000
    except (AttributeError, TypeError):
        raise InvalidRecordError(f"a timestamp must be a datetime or an int (ms since the epoch), "
                                 f"not {type(dt).__name__}") from None


def _byte_count(arr: Any) -> int:
    """Bytes of a binary/string Arrow array's values (nulls count 0), from its offsets buffer:
    the values of a (sliced) array are one contiguous run of its data buffer."""
    import pyarrow as pa

    n = len(arr)
    if n == 0:
        return 0
    t = arr.type
    raw = memoryview(arr.buffers()[1]).cast("B")
    if pa.types.is_binary(t) or pa.types.is_string(t):
        offsets = raw.cast("i")
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        offsets = raw.cast("q")
    else:
        raise InvalidRecordError(f"a key or value column must be binary or string, got {t}")
    first: int = arr.offset
    return offsets[first + n] - offsets[first]
