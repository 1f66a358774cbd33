"""Sink settings: the options of the ``fastkafka`` data source (or the keyword arguments of
``partition_writer`` / ``batch_writer``), checked on the driver before any task starts.

Options
-------
``kafka.<setting>``
    Passed to :class:`fastkafka.Producer` with the prefix removed (``kafka.bootstrap.servers``,
    ``kafka.linger.ms``, ``kafka.compression.type``, ...), with the producer's own checking: an
    unknown setting or a wrong value raises ``ConfigError`` naming it. ``kafka.bootstrap.servers`` is
    required.
``topic``
    The topic of every row; wins over a ``topic`` column.
``task.headers``
    ``true`` adds three headers to every record: ``spark.partition``, ``spark.attempt`` (the task's
    partition id and attempt number) and ``spark.batch`` (the micro-batch id, -1 for a batch write),
    so consumers can recognise the rows of a retried task.
``summary.path``
    A file the driver appends one JSON line to per committed (or aborted) write or micro-batch:
    rows, bytes, task seconds, errors and every task's report (``spark_sink.read_summaries``).
``progress``
    ``true`` (default): the driver prints one line per committed or aborted write or micro-batch
    to its stderr (``fastkafka sink committed: <rows> rows, <bytes> bytes from <tasks> tasks``);
    ``false`` leaves it out (``summary.path`` and the accumulators are not affected).
``flush.timeout.ms``
    How long a task waits at its end for its records (default: the producer's
    ``delivery_timeout_ms`` plus 5 s; records cannot stay undelivered longer than that anyway).
``delivery.guarantee``
    ``at_least_once`` (default) or ``exactly_once``: every task writes in a Kafka transaction that
    the driver commits once every task succeeded (:mod:`spark_sink.exactly_once`). Needs
    ``transactional.id.prefix``; consumers read with ``isolation.level=read_committed``.
``transactional.id.prefix``
    Attempt ``a`` of task ``i`` uses the transactional id ``<prefix>-<i>-<a>``. Unique per
    concurrently running write or query (two writes with the same prefix fence each other).
``max.task.attempts``
    exactly_once: how many attempts Spark makes of a task (``spark.task.maxFailures``, default 4):
    an aborted write takes over the transactional ids of that many attempts per partition.
``transaction.log.path``
    The directory of the driver's log of committed micro-batches (exactly-once streaming; default:
    ``<checkpointLocation>/fastkafka-transactions``). Needed by ``batch_writer`` with
    ``exactly_once``, where the data source sees no checkpoint.

Options of Spark's Kafka source (``startingOffsets``, ``subscribe``, ``failOnDataLoss``, ...,
:data:`IGNORED_OPTIONS`) and Kafka consumer settings (``kafka.group.id``, ...,
:data:`CONSUMER_SETTINGS`) are accepted and ignored, with one WARNING per write naming them.
``kafka.key.serializer`` / ``kafka.value.serializer`` are refused, as Spark's Kafka sink refuses them.

Input columns follow Spark's own Kafka sink: ``value`` (required; binary or string), ``key``
(binary or string), ``topic`` (string), ``partition`` (int), ``headers``
(array<struct<key: string, value: binary>>; per-row headers first, then the task's), ``timestamp``
(timestamp, or bigint as ms since the epoch: the record's timestamp, truncated to ms; a null: the
producer's current time). Other columns are ignored, as Spark's sink does. The rules are checked
by :func:`spark_sink.task.check_schema` on the driver.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from fastkafka.config import SECRET_SETTINGS, ProducerConfig, canonical_name
from fastkafka.errors import ConfigError

#: options of the sink itself (``kafka.*`` ones go to the producer)
SINK_OPTIONS = ("topic", "task.headers", "flush.timeout.ms", "summary.path", "progress", "batch.id",
                "delivery.guarantee", "transactional.id.prefix", "transaction.log.path", "test.crash",
                "max.task.attempts")
GUARANTEES = ("at_least_once", "exactly_once")
#: A sink transaction must outlive the write's slowest task plus the driver's commit: the producer's
#: 60 s default is raised to Kafka's default cap (transaction.max.timeout.ms, 15 minutes).
SINK_TRANSACTION_TIMEOUT_MS = 900_000
#: options Spark itself may pass to a data source; accepted and ignored
SPARK_OPTIONS = ("path", "checkpointlocation", "__partition_columns")

_READER = "an option of Spark's Kafka source (reading): a sink reads nothing"
#: Options of Spark's Kafka data source (Structured Streaming + Kafka Integration Guide) that mean
#: nothing to a sink, lower case -> why. Accepted with one WARNING per write naming them, so a
#: job moved from ``format("kafka")`` keeps its options.
IGNORED_OPTIONS = {
    **{k: _READER for k in (
        "assign", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets",
        "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
        "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "failondataloss",
        "kafkaconsumer.polltimeoutms", "maxoffsetspertrigger", "minoffsetspertrigger",
        "maxtriggerdelay", "minpartitions", "maxrecordsperpartition", "groupidprefix")},
    "includeheaders": ("an option of Spark's Kafka source: the sink writes the headers of a "
                       "'headers' column whenever the DataFrame has one"),
}
#: prefixes of ignored source options (``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``)
IGNORED_PREFIXES = {"fetchoffset.": _READER}
_CONSUMER = "a Kafka consumer setting: the sink only produces"
#: Java consumer settings (``kafka.<name>``) that mean nothing to a producer: ignored with the
#: WARNING. Settings both clients have (security, ssl.*, sasl.*, client.id, ...) go to the producer.
CONSUMER_SETTINGS = frozenset((
    "group.id", "group.instance.id", "group.protocol", "group.remote.assignor", "auto.offset.reset",
    "enable.auto.commit", "auto.commit.interval.ms", "key.deserializer", "value.deserializer",
    "session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy",
    "max.poll.records", "max.poll.interval.ms", "fetch.min.bytes", "fetch.max.bytes",
    "fetch.max.wait.ms", "max.partition.fetch.bytes", "isolation.level", "exclude.internal.topics",
    "allow.auto.create.topics", "client.rack", "default.api.timeout.ms",
    "internal.leave.group.on.close", "internal.throw.on.fetch.stable.offset.unsupported",
    "enable.metrics.push"))
#: producer settings Spark's sink refuses, and so does this one (the same reason)
REFUSED_SETTINGS = {
    "key.serializer": ("Kafka option 'kafka.key.serializer' is not supported: keys are written as "
                       "the bytes of the 'key' column (binary, or a string as UTF-8), as Spark's "
                       "Kafka sink writes them with ByteArraySerializer; serialize the key in the "
                       "DataFrame (e.g. to_json, to_avro, cast) and drop the option"),
    "value.serializer": ("Kafka option 'kafka.value.serializer' is not supported: values are "
                         "written as the bytes of the 'value' column (binary, or a string as "
                         "UTF-8), as Spark's Kafka sink writes them with ByteArraySerializer; "
                         "serialize the value in the DataFrame (e.g. to_json, to_avro, cast) and "
                         "drop the option"),
}


def ignored_reason(key: str) -> str | None:
    """Why option ``key`` (as given) is ignored by the sink, or None when it is not."""
    low = key.lower()
    if low in IGNORED_OPTIONS:
        return IGNORED_OPTIONS[low]
    for prefix, why in IGNORED_PREFIXES.items():
        if low.startswith(prefix):
            return why
    if low.startswith("kafka.") and low[len("kafka."):] in CONSUMER_SETTINGS:
        return _CONSUMER
    return None


def ignored_warning(ignored: Iterable[str]) -> str:
    """The one WARNING line of a write that got ignored options."""
    return ("fastkafka sink: ignoring " + "; ".join(f"{k} ({ignored_reason(k)})" for k in ignored)
            + ". Remove them to silence this warning")


@dataclass(frozen=True)
class SinkSettings:
    """Everything a task needs; picklable (it travels to the executors)."""

    producer_config: tuple[tuple[str, Any], ...]   # sorted (key, value) pairs of the producer settings
    topic: str | None = None
    task_headers: bool = False
    flush_timeout_s: float | None = None
    batch_id: int = -1
    summary_path: str | None = None
    columns: tuple[str, ...] = field(default=())  # the input columns found in the schema (names)
    delivery_guarantee: str = "at_least_once"
    transactional_id_prefix: str | None = None
    transaction_log_path: str | None = None
    test_crash: str | None = None       # fault injection for tests (exactly_once.py)
    max_attempts: int = 4               # spark.task.maxFailures (exactly_once: ids to take over)
    ignored: tuple[str, ...] = field(default=())  # options of Spark's Kafka source / consumer, ignored
    progress: bool = True               # the driver's stderr line per write or micro-batch

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == "exactly_once"

    def producer_kwargs(self) -> dict[str, Any]:
        return dict(self.producer_config)

    def __repr__(self) -> str:
        # A password (SECRET_SETTINGS) never shows: these settings appear in Spark's plans and logs.
        shown = tuple((k, "***" if k in SECRET_SETTINGS and v is not None else v)
                      for k, v in self.producer_config)
        return (f"SinkSettings(producer_config={shown!r}, topic={self.topic!r}, "
                f"task_headers={self.task_headers!r}, flush_timeout_s={self.flush_timeout_s!r}, "
                f"batch_id={self.batch_id!r}, summary_path={self.summary_path!r}, "
                f"columns={self.columns!r}, delivery_guarantee={self.delivery_guarantee!r}, "
                f"transactional_id_prefix={self.transactional_id_prefix!r}, "
                f"transaction_log_path={self.transaction_log_path!r}, ignored={self.ignored!r}, "
                f"progress={self.progress!r})")

    def with_columns(self, columns: Iterable[str]) -> SinkSettings:
        return dataclasses.replace(self, columns=tuple(columns))


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name!r} must be true or false, got {value!r}")


def settings_from_options(options: Mapping[str, Any]) -> SinkSettings:
    """Parse data source options (``kafka.*`` plus the sink's own); ConfigError for a bad one."""
    producer: dict[str, Any] = {}
    topic = None
    task_headers = False
    flush_timeout_s = None
    batch_id = -1
    summary_path = None
    extra: dict[str, Any] = {}
    checkpoint = None
    ignored: list[str] = []
    progress = True
    for raw_key, value in options.items():
        key = raw_key.lower()
        if ignored_reason(raw_key) is not None:
            ignored.append(raw_key)
        elif key.startswith("kafka.") and key[len("kafka."):] in REFUSED_SETTINGS:
            raise ConfigError(REFUSED_SETTINGS[key[len("kafka."):]])
        elif key.startswith("kafka."):
            producer[key[len("kafka."):]] = value
        elif key == "topic":
            topic = str(value)
        elif key == "task.headers":
            task_headers = _bool(raw_key, value)
        elif key == "flush.timeout.ms":
            flush_timeout_s = _positive(raw_key, value) / 1000.0
        elif key == "batch.id":
            batch_id = _int(raw_key, value)
        elif key == "summary.path":
            summary_path = str(value)
        elif key == "progress":
            progress = _bool(raw_key, value)
        elif key == "delivery.guarantee":
            extra["delivery_guarantee"] = str(value).strip().lower()
        elif key == "transactional.id.prefix":
            extra["transactional_id_prefix"] = str(value)
        elif key == "transaction.log.path":
            extra["transaction_log_path"] = str(value)
        elif key == "test.crash":
            extra["test_crash"] = str(value)
        elif key == "max.task.attempts":
            extra["max_attempts"] = _positive(raw_key, value)
        elif key == "checkpointlocation":
            checkpoint = str(value)
        elif key in SPARK_OPTIONS:
            continue
        else:
            raise ConfigError(
                f"unknown option {raw_key!r}: producer settings take the prefix 'kafka.' "
                f"(e.g. 'kafka.{raw_key}'); the sink's own options are {', '.join(SINK_OPTIONS[:4])}")
    if checkpoint is not None and "transaction_log_path" not in extra:
        extra["transaction_log_path"] = checkpoint.rstrip("/") + "/fastkafka-transactions"
    return dataclasses.replace(_settings(producer, topic, task_headers, flush_timeout_s, batch_id, **extra),
                               summary_path=summary_path, ignored=tuple(sorted(ignored)),
                               progress=progress)


def settings_from_kwargs(topic: str | None, task_headers: bool, flush_timeout_ms: int | None,
                         config: Mapping[str, Any] | None, kwargs: Mapping[str, Any],
                         **sink: Any) -> SinkSettings:
    """``partition_writer`` / ``batch_writer`` arguments: producer settings as keyword arguments
    (``bootstrap_servers=...``) and/or a mapping with dotted keys; ``sink`` holds the sink's own
    (``delivery_guarantee``, ``transactional_id_prefix``, ``transaction_log_path``, ``progress``)."""
    producer = dict(config or {})
    producer.update(kwargs)
    flush_timeout_s = None if flush_timeout_ms is None else _positive("flush_timeout_ms", flush_timeout_ms) / 1000
    return _settings(producer, topic, bool(task_headers), flush_timeout_s, -1,
                     **{k: v for k, v in sink.items() if v is not None})


def _settings(producer: dict[str, Any], topic: str | None, task_headers: bool,
              flush_timeout_s: float | None, batch_id: int,
              delivery_guarantee: str = "at_least_once", **txn: Any) -> SinkSettings:
    if delivery_guarantee not in GUARANTEES:
        raise ConfigError(f"option 'delivery.guarantee' must be at_least_once or exactly_once, got "
                          f"{delivery_guarantee!r}")
    if delivery_guarantee == "exactly_once":
        producer = _transactional_producer(producer, txn)
    elif txn.get("transactional_id_prefix"):
        raise ConfigError("option 'transactional.id.prefix' is set but 'delivery.guarantee' is "
                          "at_least_once: set delivery.guarantee=exactly_once to write in transactions")
    cfg = ProducerConfig(producer)          # raises ConfigError naming a bad setting, on the driver
    if not cfg.is_explicit("bootstrap_servers"):
        raise ConfigError("the producer setting bootstrap.servers is required "
                          "(option 'kafka.bootstrap.servers')")
    if topic is not None and not topic:
        raise ConfigError("option 'topic' is empty")
    # the settings as given (canonical names), so each executor builds the same ProducerConfig
    given = tuple(sorted(((canonical_name(k), v) for k, v in producer.items()), key=lambda kv: kv[0]))
    return SinkSettings(given, topic, task_headers, flush_timeout_s, batch_id,
                        delivery_guarantee=delivery_guarantee, **txn)


def _transactional_producer(producer: dict[str, Any], txn: dict[str, Any]) -> dict[str, Any]:
    """The producer settings of an exactly-once write: checked, with the sink's transaction
    timeout unless one is given. The transactional ids come from the prefix, per task."""
    prefix = txn.get("transactional_id_prefix")
    if not prefix:
        raise ConfigError("delivery.guarantee=exactly_once needs the option 'transactional.id.prefix' "
                          "(task i writes with the transactional id <prefix>-i)")
    names = {canonical_name(k): k for k in producer}
    if "transactional_id" in names:
        raise ConfigError(f"{names['transactional_id']!r} cannot be set for the sink: each task gets "
                          f"its own transactional id from 'transactional.id.prefix'")
    if "transaction_timeout_ms" not in names:
        producer = {**producer, "transaction_timeout_ms": SINK_TRANSACTION_TIMEOUT_MS}
    return producer


def _int(name: str, value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(f"option {name!r} must be an integer, got {value!r}") from None


def _positive(name: str, value: Any) -> int:
    ms = _int(name, value)
    if ms <= 0:
        raise ConfigError(f"option {name!r} must be > 0, got {value!r}")
    return ms


def __getattr__(name: str) -> Any:
    # The column rules live with the task's code (spark_sink.task); these names stay importable
    # from here.
    if name in ("check_schema", "SchemaError"):
        from . import task
        return getattr(task, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
