"""Key and value columns written for a Schema Registry (``value.format`` / ``key.format`` = avro
or json; the options are described in :mod:`spark_sink.options`).

The driver resolves each column's encoder once per write, before any task runs
(:func:`resolve_encoders`, called by :func:`spark_sink.task.check_schema`): the schema is the
option ``value.schema`` (``key.schema``) or derived from the column's Spark type through its Arrow
type; it is checked against that type (a :class:`~fastkafka.schema_registry.SchemaMismatchError`
naming the first field that does not fit, on the driver), registered or looked up under its subject,
and kept with its id in a :class:`~fastkafka.schema_registry.FramedEncoder`. The settings carry the
encoders to the tasks (they pickle as schema text and id), which encode Arrow columns
(``encode_arrow``) or Python values (``encode``) in Confluent's wire format and never call the
registry.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping

from fastkafka.errors import ConfigError

from .options import DEFAULT_RECORD_NAME, FieldFormat, RegistryFormats, SinkSettings

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

#: subject name strategies by the names the options take (Confluent's and the Java class names)
STRATEGY_NAMES = {
    "topicnamestrategy": "topic", "topic": "topic",
    "recordnamestrategy": "record", "record": "record",
    "topicrecordnamestrategy": "topic_record", "topic_record": "topic_record",
}
_JAVA_PACKAGE = "io.confluent.kafka.serializers.subject."


def strategy_of(name: str, option: str) -> str:
    """``topic``, ``record`` or ``topic_record`` for a strategy name as an option gives it
    (``TopicNameStrategy``, ``io.confluent.kafka.serializers.subject.RecordNameStrategy``, ...);
    ConfigError naming the option otherwise."""
    text = str(name).strip()
    if text.startswith(_JAVA_PACKAGE):
        text = text[len(_JAVA_PACKAGE):]
    found = STRATEGY_NAMES.get(text.lower())
    if found is None:
        raise ConfigError(f"option {option!r} must be TopicNameStrategy, RecordNameStrategy or "
                          f"TopicRecordNameStrategy (or the class names "
                          f"{_JAVA_PACKAGE}<name>), got {name!r}")
    return found


def _strategy_function(kind: str) -> Callable[..., Any]:
    from fastkafka.schema_registry import (record_subject_name_strategy,
                                           topic_record_subject_name_strategy,
                                           topic_subject_name_strategy)

    found: Callable[..., Any] = {"topic": topic_subject_name_strategy,
                                 "record": record_subject_name_strategy,
                                 "topic_record": topic_record_subject_name_strategy}[kind]
    return found


# -- partition_writer / batch_writer arguments ------------------------------------------------------
#: keyword arguments of partition_writer / batch_writer -> the option they stand for
KWARG_OPTIONS = {o.replace(".", "_"): o for o in (
    "value.format", "key.format", "value.schema", "key.schema", "value.record.name",
    "value.record.namespace", "key.record.name", "key.record.namespace",
    "value.subject.name.strategy", "key.subject.name.strategy", "auto.register.schemas",
    "use.latest.version", "normalize.schemas")}


def take_format_kwargs(producer: dict[str, Any], schema_registry: Mapping[str, Any] | None
                       ) -> RegistryFormats | None:
    """The Schema Registry arguments of ``partition_writer`` / ``batch_writer``, taken out of the
    producer settings they arrive with (``value_format="avro"`` as a keyword argument, or
    ``"value.format"`` / ``"schema.registry.url"`` in ``config``), plus ``schema_registry``: the
    SchemaRegistryClient settings (``{"url": ..., "basic.auth.user.info": ...}``)."""
    from .options import FORMAT_OPTIONS, REGISTRY_PREFIX, formats_from_options

    options: dict[str, Any] = {}
    for k in list(producer):
        low = k.lower()
        if low in KWARG_OPTIONS:
            options[KWARG_OPTIONS[low]] = producer.pop(k)
        elif low in FORMAT_OPTIONS or low.startswith(REGISTRY_PREFIX):
            options[k] = producer.pop(k)
    for k, v in (schema_registry or {}).items():
        options[REGISTRY_PREFIX + str(k)] = v
    return formats_from_options({k: v for k, v in options.items() if v is not None})


def format_options(formats: RegistryFormats) -> dict[str, str]:
    """The data source options that give ``formats`` (``batch_writer`` on Spark 4 writes through
    the data source)."""
    out: dict[str, str] = {}
    for part, f in (("value", formats.value), ("key", formats.key)):
        if f is None:
            continue
        out[f"{part}.format"] = f.format
        if f.schema is not None:
            out[f"{part}.schema"] = f.schema
        out[f"{part}.record.name"] = f.record_name
        if f.record_namespace:
            out[f"{part}.record.namespace"] = f.record_namespace
        out[f"{part}.subject.name.strategy"] = f.subject_name_strategy
    for k, v in formats.registry:
        out["schema.registry." + k] = "true" if v is True else "false" if v is False else str(v)
    out["auto.register.schemas"] = str(formats.auto_register_schemas).lower()
    out["use.latest.version"] = str(formats.use_latest_version).lower()
    out["normalize.schemas"] = str(formats.normalize_schemas).lower()
    return out


# -- the driver: one encoder per column and write ---------------------------------------------------
_clients: dict[tuple[str, int], Any] = {}
_clients_lock = threading.Lock()


def registry_client(formats: RegistryFormats) -> Any:
    """The process's SchemaRegistryClient for these settings (made once per process, so that its
    cache of registered schemas serves every write and micro-batch of the process)."""
    from fastkafka.schema_registry import SchemaRegistryClient

    key = (repr(formats.registry), os.getpid())
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = SchemaRegistryClient(formats.registry_conf())
    return client


def arrow_type_of(data_type: DataType) -> Any:
    """The Arrow type Spark gives a column of this Spark type (timestamps as UTC instants)."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(data_type, timezone="UTC")
    except TypeError:       # pyspark 3.5: to_arrow_type(dt) only
        return to_arrow_type(data_type)


def schema_text(fmt: FieldFormat, arrow_type: Any, part: str) -> str | None:
    """The schema of a column: ``value.schema`` as given, else derived from its Arrow type (None
    when the type is not known: ``partition_writer``, where only ``use.latest.version`` can do
    without a schema)."""
    if fmt.schema is not None:
        return fmt.schema
    if arrow_type is None:
        return None
    if fmt.format == "avro":
        from fastkafka.schema_registry._avro_schema import avro_schema_from_arrow

        return json.dumps(avro_schema_from_arrow(arrow_type, name=fmt.record_name,
                                                 namespace=fmt.record_namespace or None))
    from fastkafka.schema_registry._json_arrow import json_schema_from_arrow

    # the title is the record name of RecordNameStrategy / TopicRecordNameStrategy for JSON Schema
    full = f"{fmt.record_namespace}.{fmt.record_name}" if fmt.record_namespace else fmt.record_name
    return json.dumps(json_schema_from_arrow(arrow_type, title=full))


def _serializer(fmt: FieldFormat, formats: RegistryFormats, schema: str | None) -> Any:
    from fastkafka.schema_registry import AvroSerializer, JSONSerializer

    conf = {"auto.register.schemas": formats.auto_register_schemas,
            "use.latest.version": formats.use_latest_version,
            "normalize.schemas": formats.normalize_schemas,
            "subject.name.strategy": _strategy_function(
                strategy_of(fmt.subject_name_strategy, "subject.name.strategy"))}
    client = registry_client(formats)
    if fmt.format == "avro":
        return AvroSerializer(client, schema, conf=conf)
    return JSONSerializer(schema, client, conf=conf)


def resolve_encoders(settings: SinkSettings, value_type: DataType | None,
                     key_type: DataType | None, *, known_types: bool = True) -> SinkSettings:
    """The settings with the encoders of the formatted columns (``value_encoder``,
    ``key_encoder``), each registered or looked up once here, on the driver. ``value_type`` /
    ``key_type``: the columns' Spark types (None for a column that is not there);
    ``known_types=False`` for ``partition_writer``, which sees no DataFrame: the schema must then
    be given (``value_schema``) or taken from the registry (``use_latest_version``).

    ConfigError when the subject needs a topic that is not known (TopicNameStrategy without the
    option ``topic``); SchemaMismatchError (naming the field) when the column's type does not fit
    the schema."""
    formats = settings.formats
    if formats is None:
        return settings
    from fastkafka.schema_registry import MessageField, SerializationContext

    encoders: dict[str, Any] = {}
    for part, fmt, spark_type in (("value", formats.value, value_type),
                                  ("key", formats.key, key_type)):
        if fmt is None or (known_types and spark_type is None):
            continue
        kind = strategy_of(fmt.subject_name_strategy, f"{part}.subject.name.strategy")
        if kind != "record" and settings.topic is None:
            raise ConfigError(
                f"{fmt.subject_name_strategy} names the subject of the {part} schema after the "
                f"topic, and the option 'topic' is not set (the rows' 'topic' column is only known "
                f"in the tasks, which never call the registry): set the option 'topic', or "
                f"'{part}.subject.name.strategy' to RecordNameStrategy (the subject is then the "
                f"record's full name, whatever the topic)")
        arrow_type = arrow_type_of(spark_type) if spark_type is not None else None
        # use.latest.version without a schema: the subject's latest (checked against the type)
        schema = (None if formats.use_latest_version and fmt.schema is None
                  else schema_text(fmt, arrow_type, part))
        if schema is None and not formats.use_latest_version:
            raise ConfigError(
                f"option '{part}.format' without a DataFrame schema on the driver "
                f"(partition_writer sees only the tasks' rows) needs the schema: give "
                f"schema=df.schema (the schema is then derived from the column's type), or "
                f"{part}_schema=... (the schema's text), or use_latest_version=True with "
                f"auto_register_schemas=False (the subject's latest schema)")
        if schema is not None and arrow_type is not None:
            # the column's type against the schema before the registry is asked: a schema that
            # does not fit is never registered
            from fastkafka.schema_registry import FramedEncoder

            FramedEncoder(fmt.format, 0, schema).check_arrow(arrow_type)
        serializer = _serializer(fmt, formats, schema)
        ctx = SerializationContext(settings.topic or "",
                                   MessageField.VALUE if part == "value" else MessageField.KEY)
        encoders[f"{part}_encoder"] = ColumnEncoder(serializer.encoder_for(ctx, arrow_type=arrow_type),
                                                    arrow_type)
    return dataclasses.replace(settings, **encoders)


class ColumnEncoder:
    """What the tasks get for one formatted column: the driver's
    :class:`~fastkafka.schema_registry.FramedEncoder` (schema id and text; it never calls the
    registry) and the column's Arrow type (None when the driver did not see it:
    ``partition_writer`` without ``schema=``). Picklable."""

    __slots__ = ("framed", "arrow_type")

    def __init__(self, framed: Any, arrow_type: Any = None) -> None:
        self.framed = framed
        self.arrow_type = arrow_type

    def __getstate__(self) -> tuple[Any, Any]:
        return self.framed, self.arrow_type

    def __setstate__(self, state: tuple[Any, Any]) -> None:
        self.framed, self.arrow_type = state

    @property
    def format(self) -> str:
        return str(self.framed.format)

    @property
    def schema_id(self) -> int:
        return int(self.framed.schema_id)

    def __repr__(self) -> str:
        return f"<ColumnEncoder {self.format} schema id {self.schema_id}>"

    def encode_arrow(self, column: Any) -> Any:
        """An Arrow column (a task's batch): one framed value per row, null for a null row."""
        return self.framed.encode_arrow(column)

    def encode_value(self, value: Any) -> bytes | None:
        """One pyspark value (a Row, a list, a number, ...): framed, None for None. JSON goes
        through the column's Arrow type when it is known, so a Row is written exactly as the
        Arrow path writes it (decimals as exact numbers, binary as base64, dates and timestamps
        as text)."""
        if value is None:
            return None
        obj = python_value(value)
        if self.framed.format == "json":
            if self.arrow_type is not None:
                import pyarrow as pa

                one: bytes | None = self.framed.encode_arrow(
                    pa.array([obj], type=self.arrow_type))[0].as_py()
                return one
            obj = json_value(obj)
        encoded: bytes | None = self.framed.encode(obj)
        return encoded


def needs_format(settings: SinkSettings, part: str) -> bool:
    """True when the ``part`` column ("value" or "key") is written in a registry format."""
    f = settings.formats
    return f is not None and getattr(f, part) is not None


# -- the tasks' row path ----------------------------------------------------------------------------
def python_value(v: Any) -> Any:
    """A pyspark value as the encoders take it: Rows as dicts (recursively, in field order),
    bytearray as bytes, a naive datetime (pyspark gives TimestampType values in the local time
    zone) as an aware one."""
    from pyspark.sql import Row

    if isinstance(v, Row):
        return {k: python_value(x) for k, x in zip(v.__fields__, v)}
    if isinstance(v, list):
        return [python_value(x) for x in v]
    if isinstance(v, dict):
        return {k: python_value(x) for k, x in v.items()}
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, datetime.datetime) and v.tzinfo is None:
        return v.astimezone(datetime.timezone.utc)
    return v


def json_value(v: Any) -> Any:
    """A Python value in the JSON rules' form, for JSON without a known Arrow type: bytes as
    base64 text, dates as ``YYYY-MM-DD``, timestamps as RFC 3339 text in UTC (microseconds), a
    decimal as an int when it is whole, else as the float nearest to it."""
    import base64
    import decimal

    if isinstance(v, dict):
        return {k: json_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [json_value(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.astimezone(datetime.timezone.utc)
        return v.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


__all__ = ["ColumnEncoder", "json_value", "resolve_encoders", "python_value", "strategy_of", "take_format_kwargs",
           "format_options", "registry_client", "DEFAULT_RECORD_NAME"]
