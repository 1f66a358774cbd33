"""Records with a schema, framed for a Schema Registry, at the producer's speed.

Shaped like ``confluent_kafka.schema_registry`` (code moves with the import changed)::

    from fastkafka import Producer
    from fastkafka.schema_registry import SchemaRegistryClient, AvroSerializer

    registry = SchemaRegistryClient({"url": "http://registry:8081"})
    with Producer(bootstrap_servers="kafka:9092",
                  value_serializer=AvroSerializer(registry, schema_str)) as p:
        p.send("users", {"name": "ada", "age": 36})     # one value, compiled encoder
        p.send_batch("users", table)                     # a pyarrow Table: every row, in C

Values are in Confluent's wire format (the byte 0, the schema id in 4 bytes big-endian, then the
Avro binary or the JSON text), read by every registry-aware consumer. See docs/schema-registry.md.
"""

from __future__ import annotations

from typing import Any

# name -> the module holding it; imported on first use (a producer without a schema serializer
# never imports the registry client)
_WHERE = {
    "SchemaRegistryClient": "_client", "Schema": "_client", "RegisteredSchema": "_client",
    "SchemaReference": "_client", "SchemaRegistryError": "_client",
    "MockSchemaRegistryClient": "_mock", "clear_mock_registries": "_mock",
    "MessageField": "_context", "SerializationContext": "_context",
    "record_subject_name_strategy": "_context", "topic_record_subject_name_strategy": "_context",
    "topic_subject_name_strategy": "_context",
    "EncodeError": "_errors", "SchemaError": "_errors", "SchemaMismatchError": "_errors",
    "ValidationError": "_errors",
    "AvroSerializer": "_serializers", "FramedEncoder": "_serializers",
    "JSONSerializer": "_serializers",
    "avro_schema_from_arrow": "_avro_schema", "json_schema_from_arrow": "_json_arrow",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'fastkafka.schema_registry' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
