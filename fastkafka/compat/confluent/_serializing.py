"""confluent-kafka's ``SerializingProducer``: a :class:`Producer` whose ``produce()`` passes the key
and value through ``key.serializer`` / ``value.serializer`` (``serializer(obj, ctx)``) first.

A serializer of :mod:`fastkafka.schema_registry` (``AvroSerializer``, ``JSONSerializer``) is bound
to its field and encodes with compiled code; confluent-kafka's own serializers (its
``AvroSerializer``, ``StringSerializer``, ...) and any ``callable(obj, ctx)`` work as there.
Errors are raised as confluent-kafka raises them: ``KeySerializationError`` /
``ValueSerializationError`` (``SerializationError``s, so ``KafkaException``s), the serializer's
exception as the cause, and nothing is queued.
"""

from __future__ import annotations

from typing import Any

from fastkafka.schema_registry._context import MessageField, SerializationContext
from fastkafka.schema_registry._serializers import _SchemaSerializer

from ._producer import Producer
from ._types import KafkaError, KafkaException


class SerializationError(KafkaException):
    """A key or value serializer failed (confluent_kafka.error.SerializationError)."""

    def __init__(self, exception: BaseException | None = None, kafka_message: Any = None):
        super().__init__(KafkaError(KafkaError._VALUE_SERIALIZATION
                                    if isinstance(self, ValueSerializationError) else
                                    KafkaError._KEY_SERIALIZATION, str(exception)))
        self.exception = exception
        self.kafka_message = kafka_message


class KeySerializationError(SerializationError):
    """``key.serializer`` failed."""


class ValueSerializationError(SerializationError):
    """``value.serializer`` failed."""


def _check(name: str, serializer: Any) -> Any:
    if serializer is not None and not callable(serializer):
        raise TypeError(f"{name} must be a callable(obj, ctx) -> bytes, got "
                        f"{type(serializer).__name__}")
    return serializer


class SerializingProducer(Producer):
    """``SerializingProducer(conf)`` with ``key.serializer`` / ``value.serializer`` in ``conf``
    (confluent-kafka's shape); every other setting as :class:`Producer`."""

    def __init__(self, conf: dict | None = None, **kwargs: Any):
        conf = dict(conf or {})
        self._key_serializer = _check("key.serializer", conf.pop("key.serializer", None))
        self._value_serializer = _check("value.serializer", conf.pop("value.serializer", None))
        super().__init__(conf, **kwargs)
        self._key_bound = self._bind(self._key_serializer, MessageField.KEY)
        self._value_bound = self._bind(self._value_serializer, MessageField.VALUE)

    @staticmethod
    def _bind(serializer: Any, field: MessageField) -> Any:
        if isinstance(serializer, _SchemaSerializer):
            return serializer._topic_serializer(field)
        return None

    def produce(self, topic, key=None, value=None, partition=-1, on_delivery=None,
                timestamp=0, headers=None):
        """produce(topic, [key], [value], [partition], [on_delivery], [timestamp], [headers]):
        note confluent-kafka's order here, the key before the value."""
        if self._key_serializer is not None:
            try:
                key = (self._key_bound(topic, key) if self._key_bound is not None else
                       self._key_serializer(key, SerializationContext(topic, MessageField.KEY,
                                                                      headers)))
            except Exception as e:
                raise KeySerializationError(e) from e
        if self._value_serializer is not None:
            try:
                value = (self._value_bound(topic, value) if self._value_bound is not None else
                         self._value_serializer(value, SerializationContext(
                             topic, MessageField.VALUE, headers)))
            except Exception as e:
                raise ValueSerializationError(e) from e
        super().produce(topic, value, key, partition=partition, on_delivery=on_delivery,
                        timestamp=timestamp, headers=headers)
