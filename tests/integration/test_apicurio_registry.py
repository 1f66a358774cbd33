"""The Apicurio Registry rig against confluent-kafka's own registry client and serializers.

Apicurio Registry (``fastkafka_tools.apicurio``) is a Schema Registry server the project did not
write; these tests show that it answers confluent-kafka's ``SchemaRegistryClient`` as Confluent's
server would, so that the project's serializers can be proven against it: Avro and JSON Schema
values framed by confluent-kafka's serializers (magic byte, the registry's schema id) and read back
by its deserializers through a second client with an empty cache (the schema fetched by id from the
server), and read back once more by fastavro from the schema text the server returns.
"""
from __future__ import annotations

import io
import json
import urllib.error
import urllib.request

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from brokers import unique_name

# A JVM server started by the fixtures: with the brokers ("-m 'not broker'" leaves it out).
pytestmark = pytest.mark.broker

AVRO_SCHEMA = json.dumps({
    "type": "record", "name": "Person", "namespace": "fastkafka.test",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "balance", "type": "long"},
        {"name": "score", "type": "double"},
        {"name": "active", "type": "boolean"},
        {"name": "photo", "type": "bytes"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "nickname", "type": ["null", "string"], "default": None},
    ],
})

PERSON = {"name": "Zoë Ŧest ✓", "age": -36, "balance": 2**62 + 7, "score": -1.5e300, "active": True,
          "photo": b"\x00\xff\x10", "color": "GREEN", "tags": ["a", "", "ü"], "counts": {"k": -1, "": 0},
          "nickname": None}

JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"type": ["string", "null"]},
    },
    "required": ["id", "item"],
})

ORDER = {"id": 12345678901, "item": "tea ☕", "price": 3.25, "tags": ["x", "y"], "note": None}


def _schema_id(framed: bytes) -> int:
    assert framed[:1] == b"\x00", f"no magic byte: {framed[:8]!r}"
    return int.from_bytes(framed[1:5], "big")


def test_avro_values_round_trip_through_the_server(apicurio_registry):
    client = SchemaRegistryClient({"url": apicurio_registry})
    topic = unique_name("apicurio-avro")
    ctx = SerializationContext(topic, MessageField.VALUE)
    framed = AvroSerializer(client, AVRO_SCHEMA)(PERSON, ctx)

    schema_id = _schema_id(framed)
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema_id == schema_id and latest.version == 1
    assert client.get_subjects().count(f"{topic}-value") == 1

    # A client with an empty cache: the schema comes from the server, by the id in the frame.
    fresh = SchemaRegistryClient({"url": apicurio_registry})
    assert AvroDeserializer(fresh)(framed, ctx) == PERSON
    served = fresh.get_schema(schema_id)
    assert served.schema_type == "AVRO"
    reader = fastavro.parse_schema(json.loads(served.schema_str))
    assert fastavro.schemaless_reader(io.BytesIO(framed[5:]), reader) == PERSON


def test_avro_registration_ids_and_versions(apicurio_registry):
    client = SchemaRegistryClient({"url": apicurio_registry})
    subject = unique_name("apicurio-versions") + "-value"
    v1 = Schema(AVRO_SCHEMA, "AVRO")
    first = client.register_schema(subject, v1)
    assert client.register_schema(subject, v1) == first      # the same schema: the same id
    found = client.lookup_schema(subject, v1)
    assert (found.schema_id, found.version) == (first, 1)

    widened = json.loads(AVRO_SCHEMA)
    widened["fields"].append({"name": "email", "type": ["null", "string"], "default": None})
    second = client.register_schema(subject, Schema(json.dumps(widened), "AVRO"))
    assert second != first
    assert client.get_versions(subject) == [1, 2]
    assert client.get_version(subject, 1).schema_id == first
    assert client.get_latest_version(subject).schema_id == second


def test_json_schema_values_round_trip_through_the_server(apicurio_registry):
    client = SchemaRegistryClient({"url": apicurio_registry})
    topic = unique_name("apicurio-json")
    ctx = SerializationContext(topic, MessageField.VALUE)
    framed = JSONSerializer(JSON_SCHEMA, client)(ORDER, ctx)

    schema_id = _schema_id(framed)
    assert json.loads(framed[5:]) == ORDER
    assert client.get_latest_version(f"{topic}-value").schema_id == schema_id

    fresh = SchemaRegistryClient({"url": apicurio_registry})
    served = fresh.get_schema(schema_id)
    assert served.schema_type == "JSON"
    assert json.loads(served.schema_str) == json.loads(JSON_SCHEMA)
    # No schema given to the deserializer: it validates against the one the server returns.
    assert JSONDeserializer(None, schema_registry_client=fresh)(framed, ctx) == ORDER


def test_unknown_schema_id_is_not_found(apicurio_registry):
    client = SchemaRegistryClient({"url": apicurio_registry})
    with pytest.raises(SchemaRegistryError) as err:
        client.get_schema(2_000_000_000)
    assert err.value.http_status_code == 404


def test_start_apicurio_serves_until_stopped():
    from fastkafka_tools.apicurio import start_apicurio

    url, stop = start_apicurio()
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=5) as resp:
            assert resp.status == 200 and json.loads(resp.read()) == []
    finally:
        code = stop()
    assert code is not None
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/subjects", timeout=5)
