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

Schema Registry formats (:mod:`spark_sink.formats`)
---------------------------------------------------
``value.format`` / ``key.format``
    ``avro`` or ``json``: the column (a struct, or any type) is encoded as Avro binary or JSON
    text in Confluent's wire format (byte 0, the schema id as 4 bytes big-endian, the payload).
    Without it the column must be binary or string, as for Spark's Kafka sink.
``schema.registry.url``
    Required with a format. Every ``schema.registry.<key>`` option is given to
    :class:`fastkafka.schema_registry.SchemaRegistryClient` as ``<key>``
    (``basic.auth.user.info``, ``basic.auth.credentials.source``, ``bearer.auth.token``,
    ``ssl.ca.location``, ...); the secrets among them never show in the settings' repr.
``value.schema`` / ``key.schema``
    The schema's text (Avro or JSON Schema); default: derived from the column's Spark type
    (through its Arrow type), a record named by ``value.record.name`` / ``value.record.namespace``
    (``key.record.*``; default ``topLevelRecord`` and no namespace, as Spark's ``to_avro``).
``value.subject.name.strategy`` / ``key.subject.name.strategy``
    ``TopicNameStrategy`` (default: ``<topic>-value``), ``RecordNameStrategy``,
    ``TopicRecordNameStrategy`` (or the Java class names ``io.confluent.kafka.serializers.subject.*``).
``auto.register.schemas`` (default true), ``use.latest.version`` (default false), ``normalize.schemas`` (default false)
    As confluent-kafka's serializers take them.

The driver registers (or looks up) each schema once per write, before any task runs, and the tasks
get the schema id with it: they never call the registry.

Options of Spark's Kafka source (``startingOffsets``, ``subscribe``, ``failOnDataLoss``, ...,
:data:`IGNORED_OPTIONS`) and Kafka consumer settings (``kafka.group.id``, ...,
:data:`CONSUMER_SETTINGS`) are accepted and ignored, with one WARNING per write naming them.
``kafka.key.serializer`` / ``kafka.value.serializer`` are refused, as Spark's Kafka sink refuses them.

Input columns follow Spark's own Kafka sink: ``value`` (required; binary or string, or any type
with ``value.format``), ``key`` (binary or string, or any type with ``key.format``), ``topic`` (string), ``partition`` (int), ``headers``
(array<struct<key: string, value: binary>>; per-row headers first, then the task's), ``timestamp``
(timestamp, or bigint as ms since the epoch: the record's timestamp, truncated to ms; a null: the
producer's current time). Other columns are ignored, as Spark's sink does. The rules are checked
by :func:`spark_sink.task.check_schema` on the driver.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from fastkafka.config import SECRET_SETTINGS, ProducerConfig, canonical_name
from fastkafka.errors import ConfigError

#: the Schema Registry formats a key or value column can be written in
FORMATS = ("avro", "json")
#: options of the Schema Registry formats (besides ``schema.registry.<key>``)
FORMAT_OPTIONS = ("value.format", "key.format", "value.schema", "key.schema", "value.record.name",
                  "value.record.namespace", "key.record.name", "key.record.namespace",
                  "value.subject.name.strategy", "key.subject.name.strategy",
                  "auto.register.schemas", "use.latest.version", "normalize.schemas")
REGISTRY_PREFIX = "schema.registry."
#: SchemaRegistryClient settings that are secrets: never shown in a repr
REGISTRY_SECRETS = frozenset(("basic.auth.user.info", "bearer.auth.token",
                              "bearer.auth.client.secret", "ssl.key.password"))
#: Spark's ``to_avro`` names the record of a struct this way (and gives it no namespace)
DEFAULT_RECORD_NAME = "topLevelRecord"

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


def _hidden(key: str, value: Any) -> Any:
    """A SchemaRegistryClient setting as a repr may show it: secrets as ``***``, a URL without the
    user info it may carry (``https://user:password@host``)."""
    if value is None:
        return None
    low = key.lower()
    if low in REGISTRY_SECRETS or "password" in low or "secret" in low or "token" in low:
        return "***"
    if low == "url":
        return re.sub(r"(?<=://)[^/@,]*@", "***@", str(value))
    return value


@dataclass(frozen=True)
class FieldFormat:
    """How the ``value`` (or ``key``) column is encoded for the registry."""

    format: str                         # "avro" | "json"
    schema: str | None = None           # explicit schema text; None: derived from the column's type
    record_name: str = DEFAULT_RECORD_NAME
    record_namespace: str = ""
    subject_name_strategy: str = "TopicNameStrategy"


@dataclass(frozen=True)
class RegistryFormats:
    """The Schema Registry options of a write: the formats of value and key, the registry client's
    settings (``schema.registry.<key>`` as ``<key>``) and the serializers' settings."""

    value: FieldFormat | None = None
    key: FieldFormat | None = None
    registry: tuple[tuple[str, Any], ...] = ()
    auto_register_schemas: bool = True
    use_latest_version: bool = False
    normalize_schemas: bool = False

    def registry_conf(self) -> dict[str, Any]:
        return dict(self.registry)

    def __repr__(self) -> str:
        shown = tuple((k, _hidden(k, v)) for k, v in self.registry)
        return (f"RegistryFormats(value={self.value!r}, key={self.key!r}, registry={shown!r}, "
                f"auto_register_schemas={self.auto_register_schemas!r}, "
                f"use_latest_version={self.use_latest_version!r}, "
                f"normalize_schemas={self.normalize_schemas!r})")


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
    formats: RegistryFormats | None = None   # value.format / key.format and the registry's settings
    # the driver's encoders (spark_sink.formats.ColumnEncoder: a FramedEncoder, i.e. schema id and
    # text, and the column's Arrow type), resolved once per write by
    # spark_sink.formats.resolve_encoders; None: the column's bytes as they are
    value_encoder: Any = None
    key_encoder: Any = None

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
                f"progress={self.progress!r}"
                + ("" if self.formats is None else
                   f", formats={self.formats!r}, value_encoder={_encoder_text(self.value_encoder)}, "
                   f"key_encoder={_encoder_text(self.key_encoder)}")
                + ")")

    def with_columns(self, columns: Iterable[str]) -> SinkSettings:
        return dataclasses.replace(self, columns=tuple(columns))


def _encoder_text(encoder: Any) -> str:
    if encoder is None:
        return "None"
    return f"<{getattr(encoder, 'format', '?')} schema id {getattr(encoder, 'schema_id', '?')}>"


def formats_from_options(options: Mapping[str, Any]) -> RegistryFormats | None:
    """The Schema Registry options (``value.format``, ``key.format``, ``schema.registry.<key>``,
    ...; keys as dotted option names, any case) as :class:`RegistryFormats`, or None when none is
    given. ConfigError for a bad one: a format other than avro/json, no ``schema.registry.url``,
    an option of a field whose format is not set, an unknown subject name strategy."""
    from .formats import strategy_of

    given: dict[str, tuple[str, Any]] = {}
    registry: dict[str, Any] = {}
    for raw_key, value in options.items():
        low = raw_key.lower()
        if low.startswith(REGISTRY_PREFIX):
            if len(low) == len(REGISTRY_PREFIX):
                raise ConfigError(f"option {raw_key!r} names no registry setting "
                                  f"(e.g. 'schema.registry.url')")
            registry[raw_key[len(REGISTRY_PREFIX):]] = value
        elif low in FORMAT_OPTIONS:
            given[low] = (raw_key, value)
    if not given and not registry:
        return None

    def field_format(part: str) -> FieldFormat | None:
        fmt = given.get(f"{part}.format")
        if fmt is None or fmt[1] is None or str(fmt[1]).strip() == "":
            stray = [given[k][0] for k in given if k.startswith(part + ".") and given[k][1] is not None]
            if stray:
                raise ConfigError(f"option {stray[0]!r} is set but '{part}.format' is not: set "
                                  f"{part}.format to avro or json to write the '{part}' column for "
                                  f"the Schema Registry")
            return None
        name = str(fmt[1]).strip().lower()
        if name not in FORMATS:
            raise ConfigError(f"option {fmt[0]!r} must be avro or json, got {fmt[1]!r}")
        kw: dict[str, Any] = {"format": name}
        for option, attr in ((f"{part}.schema", "schema"), (f"{part}.record.name", "record_name"),
                             (f"{part}.record.namespace", "record_namespace"),
                             (f"{part}.subject.name.strategy", "subject_name_strategy")):
            if option in given and given[option][1] is not None:
                kw[attr] = str(given[option][1])
        if "schema" in kw and not kw["schema"].strip():
            raise ConfigError(f"option {given[part + '.schema'][0]!r} is empty")
        if not kw.get("record_name", DEFAULT_RECORD_NAME):
            raise ConfigError(f"option {given[part + '.record.name'][0]!r} is empty")
        strategy_of(kw.get("subject_name_strategy", "TopicNameStrategy"),
                    f"{part}.subject.name.strategy")     # ConfigError for an unknown name
        return FieldFormat(**kw)

    value, key = field_format("value"), field_format("key")
    if value is None and key is None:
        stray = next(iter(given.values()), None)
        raise ConfigError(f"option {(stray[0] if stray else 'schema.registry.' + next(iter(registry)))!r}"
                          f" is set but neither 'value.format' nor 'key.format' is: set one "
                          f"to avro or json")
    url = registry.get("url")
    if url is None or not str(url).strip():
        raise ConfigError(f"option '{'value' if value is not None else 'key'}.format' needs the "
                          f"option 'schema.registry.url' (the Schema Registry's URL, e.g. "
                          f"http://registry:8081)")
    flags = {}
    for option in ("auto.register.schemas", "use.latest.version", "normalize.schemas"):
        if option in given and given[option][1] is not None:
            flags[option.replace(".", "_")] = _bool(given[option][0], given[option][1])
    return RegistryFormats(value=value, key=key,
                           registry=tuple(sorted(registry.items(), key=lambda kv: kv[0])), **flags)


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
    formats = formats_from_options(options)
    for raw_key, value in options.items():
        key = raw_key.lower()
        if key in FORMAT_OPTIONS or key.startswith(REGISTRY_PREFIX):
            continue                        # formats_from_options took them
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
                               progress=progress, formats=formats)


def settings_from_kwargs(topic: str | None, task_headers: bool, flush_timeout_ms: int | None,
                         config: Mapping[str, Any] | None, kwargs: Mapping[str, Any],
                         **sink: Any) -> SinkSettings:
    """``partition_writer`` / ``batch_writer`` arguments: producer settings as keyword arguments
    (``bootstrap_servers=...``) and/or a mapping with dotted keys; ``sink`` holds the sink's own
    (``delivery_guarantee``, ``transactional_id_prefix``, ``transaction_log_path``, ``progress``,
    ``schema_registry``). The Schema Registry options come as keyword arguments
    (``value_format="avro"``, ``value_schema=...``, ``auto_register_schemas=False``, ...) or dotted
    keys of ``config`` (``"value.format"``, ``"schema.registry.url"``), and ``schema_registry``
    holds the registry client's settings (``{"url": ..., "basic.auth.user.info": ...}``)."""
    producer = dict(config or {})
    producer.update(kwargs)
    from .formats import take_format_kwargs

    formats = take_format_kwargs(producer, sink.pop("schema_registry", None))
    flush_timeout_s = None if flush_timeout_ms is None else _positive("flush_timeout_ms", flush_timeout_ms) / 1000
    settings = _settings(producer, topic, bool(task_headers), flush_timeout_s, -1,
                         **{k: v for k, v in sink.items() if v is not None})
    return settings if formats is None else dataclasses.replace(settings, formats=formats)


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
