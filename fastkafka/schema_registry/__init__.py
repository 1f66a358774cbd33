"""Records with a schema, framed for a Schema Registry, at the producer's speed.

Shaped like ``confluent_kafka.schema_registry``: code moves with the import changed.
"""
