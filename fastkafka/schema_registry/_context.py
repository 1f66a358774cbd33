"""Where a value is going (:class:`SerializationContext`) and the subject its schema is kept under.

The names and shapes are confluent-kafka's (``confluent_kafka.serialization`` and
``confluent_kafka.schema_registry``), so code written for it moves with the import changed.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable, Optional

from fastkafka.errors import ConfigError


class MessageField(str, Enum):
    """Which part of a record is serialized: its key or its value."""

    KEY = "key"
    VALUE = "value"

    def __str__(self) -> str:
        return self.value


class SerializationContext:
    """The topic and field (key or value) a serializer works for, and the record's headers."""

    __slots__ = ("topic", "field", "headers")

    def __init__(self, topic: str, field: MessageField | str, headers: Any = None) -> None:
        self.topic = topic
        self.field = MessageField(field) if not isinstance(field, MessageField) else field
        self.headers = headers

    def __repr__(self) -> str:
        return f"SerializationContext({self.topic!r}, {self.field!s})"


SubjectNameStrategy = Callable[[Optional[SerializationContext], Optional[str]], Optional[str]]


def _needs_context(ctx: SerializationContext | None, strategy: str) -> SerializationContext:
    if ctx is None:
        raise ValueError(f"{strategy} needs a SerializationContext (the topic and field); pass "
                         f"one, or use record_subject_name_strategy")
    return ctx


def topic_subject_name_strategy(ctx: SerializationContext | None, record_name: str | None) -> str:
    """``{topic}-key`` or ``{topic}-value`` (the default; Java's TopicNameStrategy)."""
    ctx = _needs_context(ctx, "topic_subject_name_strategy")
    return f"{ctx.topic}-{ctx.field}"


def topic_record_subject_name_strategy(ctx: SerializationContext | None,
                                       record_name: str | None) -> str | None:
    """``{topic}-{record name}`` (Java's TopicRecordNameStrategy)."""
    ctx = _needs_context(ctx, "topic_record_subject_name_strategy")
    return None if record_name is None else f"{ctx.topic}-{record_name}"


def record_subject_name_strategy(ctx: SerializationContext | None,
                                 record_name: str | None) -> str | None:
    """``{record name}``, the schema's full name, whatever the topic (Java's RecordNameStrategy)."""
    return record_name


# confluent-kafka's ``subject.name.strategy.type`` values and the Java class names (Spark options)
STRATEGIES: dict[str, SubjectNameStrategy] = {
    "TOPIC": topic_subject_name_strategy,
    "RECORD": record_subject_name_strategy,
    "TOPIC_RECORD": topic_record_subject_name_strategy,
    "TopicNameStrategy": topic_subject_name_strategy,
    "RecordNameStrategy": record_subject_name_strategy,
    "TopicRecordNameStrategy": topic_record_subject_name_strategy,
    "io.confluent.kafka.serializers.subject.TopicNameStrategy": topic_subject_name_strategy,
    "io.confluent.kafka.serializers.subject.RecordNameStrategy": record_subject_name_strategy,
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy":
        topic_record_subject_name_strategy,
}


def strategy_named(name: Any, setting: str = "subject.name.strategy.type") -> SubjectNameStrategy:
    """The strategy a setting names (TOPIC, RECORD, TOPIC_RECORD, or a Java class name)."""
    if callable(name):
        return name
    found = STRATEGIES.get(name) if isinstance(name, str) else None
    if found is None and isinstance(name, str):
        found = STRATEGIES.get(name.upper())
    if found is None:
        if isinstance(name, str) and name.upper() == "ASSOCIATED":
            raise ConfigError(
                f"{setting}=ASSOCIATED (subjects associated with a topic in Confluent Cloud) is not "
                f"supported; use TOPIC (the subject {{topic}}-value, what ASSOCIATED falls back "
                f"to when the registry has no association), RECORD or TOPIC_RECORD")
        raise ConfigError(f"{setting}={name!r} is not a subject name strategy; use one of "
                          f"TOPIC, RECORD, TOPIC_RECORD (or TopicNameStrategy, RecordNameStrategy, "
                          f"TopicRecordNameStrategy), or a callable(ctx, record_name) -> str")
    return found
