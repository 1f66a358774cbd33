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
``flush.timeout.ms``
    How long a task waits at its end for its records (default: the producer's
    ``delivery_timeout_ms`` plus 5 s; records cannot stay undelivered longer than that anyway).

Input columns follow Spark's own Kafka sink: ``value`` (required; binary or string), ``key``
(binary or string), ``topic`` (string), ``partition`` (int), ``headers``
(array<struct<key: string, value: binary>>). Other columns are ignored, as Spark's sink does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from fastkafka.config import SECRET_SETTINGS, ProducerConfig, canonical_name
from fastkafka.errors import ConfigError

#: options of the sink itself (``kafka.*`` ones go to the producer)
SINK_OPTIONS = ("topic", "task.headers", "flush.timeout.ms", "summary.path", "batch.id")
#: options Spark itself may pass to a data source; accepted and ignored
SPARK_OPTIONS = ("path", "checkpointlocation", "__partition_columns")


class SchemaError(ValueError):
    """The DataFrame's columns do not fit the sink (missing ``value``, a wrong type, no topic)."""


@dataclass(frozen=True)
class SinkSettings:
    """Everything a task needs; picklable (it travels to the executors)."""

    producer_config: tuple            # sorted (key, value) pairs of the producer settings
    topic: str | None = None
    task_headers: bool = False
    flush_timeout_s: float | None = None
    batch_id: int = -1
    summary_path: str | None = None
    columns: tuple = field(default=())  # the input columns found in the schema (names)

    def producer_kwargs(self) -> dict:
        return dict(self.producer_config)

    def __repr__(self) -> str:
        # A password (SECRET_SETTINGS) never shows: these settings appear in Spark's plans and logs.
        shown = tuple((k, "***" if k in SECRET_SETTINGS and v is not None else v)
                      for k, v in self.producer_config)
        return (f"SinkSettings(producer_config={shown!r}, topic={self.topic!r}, "
                f"task_headers={self.task_headers!r}, flush_timeout_s={self.flush_timeout_s!r}, "
                f"batch_id={self.batch_id!r}, summary_path={self.summary_path!r}, "
                f"columns={self.columns!r})")

    def with_columns(self, columns) -> "SinkSettings":
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
    for raw_key, value in options.items():
        key = raw_key.lower()
        if key.startswith("kafka."):
            producer[key[len("kafka."):]] = value
        elif key == "topic":
            topic = str(value)
        elif key == "task.headers":
            task_headers = _bool(raw_key, value)
        elif key == "flush.timeout.ms":
            flush_timeout_s = _positive_ms(raw_key, value) / 1000.0
        elif key == "batch.id":
            batch_id = _int(raw_key, value)
        elif key == "summary.path":
            summary_path = str(value)
        elif key in SPARK_OPTIONS:
            continue
        else:
            raise ConfigError(
                f"unknown option {raw_key!r}: producer settings take the prefix 'kafka.' "
                f"(e.g. 'kafka.{raw_key}'); the sink's own options are {', '.join(SINK_OPTIONS[:4])}")
    return dataclasses.replace(_settings(producer, topic, task_headers, flush_timeout_s, batch_id),
                               summary_path=summary_path)


def settings_from_kwargs(topic: str | None, task_headers: bool, flush_timeout_ms: int | None,
                         config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> SinkSettings:
    """``partition_writer`` / ``batch_writer`` arguments: producer settings as keyword arguments
    (``bootstrap_servers=...``) and/or a mapping with dotted keys."""
    producer = dict(config or {})
    producer.update(kwargs)
    flush_timeout_s = None if flush_timeout_ms is None else _positive_ms("flush_timeout_ms", flush_timeout_ms) / 1000
    return _settings(producer, topic, bool(task_headers), flush_timeout_s, -1)


def _settings(producer: dict, topic, task_headers, flush_timeout_s, batch_id) -> SinkSettings:
    cfg = ProducerConfig(producer)          # raises ConfigError naming a bad setting, on the driver
    if not cfg.is_explicit("bootstrap_servers"):
        raise ConfigError("the producer setting bootstrap.servers is required "
                          "(option 'kafka.bootstrap.servers')")
    if topic is not None and not topic:
        raise ConfigError("option 'topic' is empty")
    # the settings as given (canonical names), so each executor builds the same ProducerConfig
    given = tuple(sorted(((canonical_name(k), v) for k, v in producer.items()), key=lambda kv: kv[0]))
    return SinkSettings(given, topic, task_headers, flush_timeout_s, batch_id)


def _int(name: str, value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(f"option {name!r} must be an integer, got {value!r}") from None


def _positive_ms(name: str, value: Any) -> int:
    ms = _int(name, value)
    if ms <= 0:
        raise ConfigError(f"option {name!r} must be > 0, got {value!r}")
    return ms


# ------------------------------------------------------------------------------ schema check
def check_schema(schema, settings: SinkSettings) -> SinkSettings:
    """Check a Spark ``StructType`` against the sink's input columns; SchemaError naming the
    problem. Returns the settings with the columns that will be read."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    fields = {f.name.lower(): f for f in schema.fields}
    found = []

    def bin_or_str(name: str, required: bool) -> None:
        f = fields.get(name)
        if f is None:
            if required:
                raise SchemaError(
                    f"the DataFrame has no '{name}' column (columns: "
                    f"{', '.join(x.name for x in schema.fields) or 'none'}); the sink needs "
                    f"'{name}' as binary or string")
            return
        if not isinstance(f.dataType, (BinaryType, StringType)):
            raise SchemaError(f"column '{f.name}' must be binary or string, not "
                              f"{f.dataType.simpleString()}")
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
    return settings.with_columns(found)
