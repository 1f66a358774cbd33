"""The rig's Schema Registry server speaks Confluent's REST API: confluent-kafka's own
``SchemaRegistryClient``, ``AvroSerializer``/``AvroDeserializer`` and ``JSONSerializer``/
``JSONDeserializer`` work against it, and fastkafka's client gives the same results as confluent-kafka's
on it and on mock://. Also its Avro checks (fastavro parse, compatibility) and its command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from confluent_kafka.schema_registry import Schema as CSchema
from confluent_kafka.schema_registry import SchemaRegistryClient as CClient
from confluent_kafka.schema_registry.error import SchemaRegistryError as CError
from confluent_kafka.serialization import MessageField, SerializationContext

from fastkafka.schema_registry._client import Schema, SchemaRegistryClient, SchemaRegistryError
from fastkafka.schema_registry._mock import clear_mock_registries
from fastkafka_tools.localbroker import free_port
from fastkafka_tools.schema_registry_server import CONTENT_TYPE, start_registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

USER = {"type": "record", "name": "User", "namespace": "test", "fields": [
    {"name": "name", "type": "string"},
    {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "scores", "type": {"type": "map", "values": "double"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
]}


def _avro(d) -> str:
    return json.dumps(d)


@pytest.fixture
def server():
    s = start_registry()
    try:
        yield s
    finally:
        s.stop()


# --------------------------------------------------------------------------------------------------
# confluent-kafka's client and serializers against the server
# --------------------------------------------------------------------------------------------------
def test_confluent_client_every_call(server):
    c = CClient({"url": server.url})
    v1 = CSchema(_avro(USER), "AVRO")
    assert c.register_schema("users-value", v1) == 1
    assert c.register_schema("users-value", v1) == 1
    assert c.get_subjects() == ["users-value"]
    assert c.get_versions("users-value") == [1]
    latest = c.get_latest_version("users-value")
    assert (latest.schema_id, latest.version, latest.subject) == (1, 1, "users-value")
    assert json.loads(latest.schema.schema_str) == USER
    assert c.get_version("users-value", 1).schema_id == 1
    assert json.loads(CClient({"url": server.url}).get_schema(1).schema_str) == USER
    found = c.lookup_schema("users-value", v1)
    assert (found.schema_id, found.version) == (1, 1)
    assert c.get_compatibility() == "BACKWARD"
    v2 = dict(USER, fields=USER["fields"] + [{"name": "city", "type": "string", "default": ""}])
    assert c.test_compatibility("users-value", CSchema(_avro(v2), "AVRO")) is True
    bad = dict(USER, fields=USER["fields"] + [{"name": "city", "type": "string"}])
    assert c.test_compatibility("users-value", CSchema(_avro(bad), "AVRO")) is False
    with pytest.raises(CError) as info:
        c.register_schema("users-value", CSchema(_avro(bad), "AVRO"))
    assert (info.value.http_status_code, info.value.error_code) == (409, 409)
    c.set_compatibility("users-value", "NONE")
    assert c.get_compatibility("users-value") == "NONE"
    assert c.register_schema("users-value", CSchema(_avro(bad), "AVRO")) == 2
    with pytest.raises(CError) as info:
        c.get_latest_version("nobody-value")
    assert (info.value.http_status_code, info.value.error_code) == (404, 40401)
    with pytest.raises(CError) as info:
        c.get_version("users-value", 9)
    assert info.value.error_code == 40402
    with pytest.raises(CError) as info:
        c.lookup_schema("users-value", CSchema('{"type": "string"}', "AVRO"))
    assert info.value.error_code == 40403
    assert c.delete_version("users-value", 2) == 2
    assert c.delete_subject("users-value") == [1]
    assert c.delete_subject("users-value", permanent=True) == [1, 2]
    assert c.get_subjects() == []


def test_confluent_avro_serializer_and_deserializer(server):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    ser = AvroSerializer(CClient({"url": server.url}), _avro(USER))
    ctx = SerializationContext("users", MessageField.VALUE)
    record = {"name": "Ada Lovelace ✓", "age": 36, "email": None, "tags": ["x", ""],
              "scores": {"m": 1.5}, "kind": "B"}
    payload = ser(record, ctx)
    assert payload[:5] == b"\x00\x00\x00\x00\x01"          # magic byte, schema id 1
    assert server.state.subjects() == ["users-value"]
    de = AvroDeserializer(CClient({"url": server.url}))     # a fresh client: fetches the schema by id
    assert de(payload, ctx) == record
    assert server.count("GET", "/schemas/ids/1") == 1
    # what fastkafka's client registers, confluent-kafka's deserializer reads back
    sid = SchemaRegistryClient({"url": server.url}).register_schema(
        "other-value", Schema(_avro({"type": "record", "name": "P", "fields": [
            {"name": "n", "type": "long"}]})))
    import fastavro
    import io

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(
        {"type": "record", "name": "P", "fields": [{"name": "n", "type": "long"}]}), {"n": -2**63})
    framed = b"\x00" + sid.to_bytes(4, "big") + buf.getvalue()
    assert AvroDeserializer(CClient({"url": server.url}))(
        framed, SerializationContext("other", MessageField.VALUE)) == {"n": -2**63}


def test_confluent_json_serializer_and_deserializer(server):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "User",
                         "type": "object", "properties": {
                             "name": {"type": "string"}, "age": {"type": "integer"},
                             "tags": {"type": "array", "items": {"type": "string"}}},
                         "required": ["name", "age"]})
    ser = JSONSerializer(schema, CClient({"url": server.url}))
    ctx = SerializationContext("people", MessageField.VALUE)
    record = {"name": "Zoë", "age": 7, "tags": []}
    payload = ser(record, ctx)
    assert payload[0] == 0 and int.from_bytes(payload[1:5], "big") == 1
    assert json.loads(payload[5:]) == record
    assert SchemaRegistryClient({"url": server.url}).get_schema(1).schema_type == "JSON"
    de = JSONDeserializer(None, schema_registry_client=CClient({"url": server.url}))
    assert de(payload, ctx) == record


# --------------------------------------------------------------------------------------------------
# fastkafka's client agrees with confluent-kafka's, on the server; fastkafka's mock agrees too
# --------------------------------------------------------------------------------------------------
A = _avro({"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]})
A2 = _avro({"type": "record", "name": "A", "fields": [{"name": "x", "type": "long"},
                                                       {"name": "y", "type": "string", "default": "-"}]})
B = _avro({"type": "enum", "name": "E", "symbols": ["P", "Q"]})


def _scenario(register, lookup, latest, versions, subjects, get_schema, version, compat):
    """One sequence of calls; what it returns is compared across clients and registries."""
    out = [register("a-value", A), register("a-value", A), register("b-value", A),
           register("a-value", A2), register("c-value", B), versions("a-value"), versions("b-value"),
           subjects(), latest("a-value"), version("a-value", 1), lookup("b-value", A),
           get_schema(1), get_schema(2), get_schema(3), compat("a-value", B), compat("a-value", A2)]
    for call in (lambda: latest("none-value"), lambda: version("a-value", 5),
                 lambda: lookup("a-value", B), lambda: get_schema(77),
                 lambda: register("d-value", '{"type": "nothing"}')):
        try:
            out.append(("ok", call()))
        except (CError, SchemaRegistryError) as e:
            out.append(("error", e.http_status_code, e.error_code))
    return out


def _run_confluent(url):
    c = CClient({"url": url})

    def reg(s):
        return (s.schema_id, s.version, s.subject, json.loads(s.schema.schema_str))

    return _scenario(
        register=lambda subj, text: c.register_schema(subj, CSchema(text, "AVRO")),
        lookup=lambda subj, text: reg(c.lookup_schema(subj, CSchema(text, "AVRO"))),
        latest=lambda subj: reg(c.get_latest_version(subj)),
        versions=c.get_versions, subjects=c.get_subjects,
        get_schema=lambda i: json.loads(CClient({"url": url}).get_schema(i).schema_str),
        version=lambda subj, v: reg(c.get_version(subj, v)),
        compat=lambda subj, text: c.test_compatibility(subj, CSchema(text, "AVRO")))


def _run_fastkafka(url):
    c = SchemaRegistryClient({"url": url})

    def reg(s):
        return (s.schema_id, s.version, s.subject, json.loads(s.schema.schema_str))

    return _scenario(
        register=lambda subj, text: c.register_schema(subj, Schema(text)),
        lookup=lambda subj, text: reg(c.lookup_schema(subj, Schema(text))),
        latest=lambda subj: reg(c.get_latest_version(subj)),
        versions=c.get_versions, subjects=c.get_subjects,
        get_schema=lambda i: json.loads(SchemaRegistryClient({"url": url}).get_schema(i).schema_str),
        version=lambda subj, v: reg(c.get_version(subj, v)),
        compat=lambda subj, text: c.test_compatibility(subj, Schema(text)))


def test_fastkafka_client_equals_confluent_client_on_the_server_and_on_mock():
    with start_registry() as s1, start_registry() as s2:
        theirs = _run_confluent(s1.url)
        ours = _run_fastkafka(s2.url)
    try:
        on_mock = _run_fastkafka("mock://equality-scenario")
    finally:
        clear_mock_registries("equality-scenario")
    assert ours == theirs
    # the mock's own shape check (no fastavro) finds the same invalid schema
    assert on_mock == theirs
    # and the results are a registry's: ids shared across subjects, versions per subject
    assert theirs[:5] == [1, 1, 1, 2, 3] and theirs[5:7] == [[1, 2], [1]]
    assert theirs[-5:] == [("error", 404, 40401), ("error", 404, 40402), ("error", 404, 40403),
                           ("error", 404, 40403), ("error", 422, 42201)]


# --------------------------------------------------------------------------------------------------
# The server's own checks
# --------------------------------------------------------------------------------------------------
def _raw(server, method, path, body=None, headers=None):
    req = urllib.request.Request(server.url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": CONTENT_TYPE, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def test_rest_shapes_and_error_bodies(server):
    status, ctype, text = _raw(server, "POST", "/subjects/t-value/versions", {"schema": A})
    assert (status, ctype) == (200, CONTENT_TYPE) and json.loads(text)["id"] == 1
    assert _raw(server, "GET", "/schemas/ids/1/schema")[2] == A
    assert _raw(server, "GET", "/subjects/t-value/versions/latest/schema")[2] == A
    assert json.loads(_raw(server, "GET", "/schemas/ids/1")[2]) == {"schema": A}
    status, ctype, text = _raw(server, "GET", "/subjects/nope/versions")
    assert (status, ctype) == (404, CONTENT_TYPE)
    assert json.loads(text) == {"error_code": 40401, "message": "Subject 'nope' not found."}
    status, _, text = _raw(server, "GET", "/subjects/t-value/versions/zero")
    assert (status, json.loads(text)["error_code"]) == (422, 42202)
    status, _, text = _raw(server, "PUT", "/config", {"compatibility": "SOMETIMES"})
    assert (status, json.loads(text)["error_code"]) == (422, 42203)
    status, _, text = _raw(server, "GET", "/config/t-value?defaultToGlobal=true")
    assert json.loads(text) == {"compatibilityLevel": "BACKWARD"}


def test_fastavro_parses_every_avro_schema(server):
    # valid in shape, but its default does not fit its type: only a full Avro parse finds it
    bad = _avro({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int",
                                                              "default": "seven"}]})
    with pytest.raises(CError) as info:
        CClient({"url": server.url}).register_schema("r", CSchema(bad, "AVRO"))
    assert info.value.error_code == 42201


@pytest.mark.parametrize("level, old, new, ok", [
    # BACKWARD: the new schema reads the old data
    ("BACKWARD", [("a", "int")], [("a", "int"), ("b", "string", "x")], True),
    ("BACKWARD", [("a", "int")], [("a", "int"), ("b", "string")], False),
    ("BACKWARD", [("a", "int"), ("b", "string")], [("a", "int")], True),       # field removed
    ("BACKWARD", [("a", "int")], [("a", "long")], True),                        # int -> long
    ("BACKWARD", [("a", "long")], [("a", "int")], False),
    ("BACKWARD", [("a", "float")], [("a", "double")], True),
    ("BACKWARD", [("a", "string")], [("a", "bytes")], True),
    ("BACKWARD", [("a", "int")], [("a", ["null", "int"])], True),
    ("BACKWARD", [("a", ["null", "int"])], [("a", "int")], False),
    # FORWARD: the old schema reads the new data
    ("FORWARD", [("a", "int"), ("b", "string")], [("a", "int")], False),      # b has no default
    ("FORWARD", [("a", "int"), ("b", "string", "")], [("a", "int")], True),
    ("FORWARD", [("a", "int")], [("a", "int"), ("b", "string")], True),
    ("FULL", [("a", "int")], [("a", "int"), ("b", "string", "x")], True),
    ("FULL", [("a", "int")], [("a", "long")], False),                           # long -> int fails
    ("NONE", [("a", "int")], [("a", "string")], True),
])
def test_avro_compatibility(level, old, new, ok):
    def rec(fields):
        return Schema(_avro({"type": "record", "name": "R", "fields": [
            dict(zip(("name", "type", "default"), f)) for f in fields]}))

    with start_registry() as s:
        c = SchemaRegistryClient({"url": s.url})
        c.set_compatibility("s", level)
        c.register_schema("s", rec(old))
        assert c.test_compatibility("s", rec(new)) is ok
        if ok:
            assert c.register_schema("s", rec(new)) == 2
        else:
            with pytest.raises(SchemaRegistryError) as info:
                c.register_schema("s", rec(new))
            assert info.value.error_code == 409 and "s" == info.value.subject


def test_transitive_checks_every_version():
    with start_registry() as s:
        c = SchemaRegistryClient({"url": s.url})
        c.set_compatibility("s", "BACKWARD")
        r = lambda *f: Schema(_avro({"type": "record", "name": "R", "fields": [  # noqa: E731
            dict(zip(("name", "type", "default"), x)) for x in f]}))
        c.register_schema("s", r(("a", "int")))
        c.register_schema("s", r(("a", "int"), ("b", "int", 0)))
        v3 = r(("a", "int"), ("b", "int"))                  # reads v2's data, not v1's
        assert c.test_compatibility("s", v3) is True
        c.set_compatibility("s", "BACKWARD_TRANSITIVE")
        assert c.test_compatibility("s", v3) is False


def test_enum_and_named_type_compatibility():
    with start_registry() as s:
        c = SchemaRegistryClient({"url": s.url})
        e = lambda syms, **kw: Schema(_avro({"type": "enum", "name": "E",  # noqa: E731
                                             "symbols": syms, **kw}))
        c.register_schema("e", e(["A", "B"]))
        assert c.test_compatibility("e", e(["A", "B", "C"])) is True       # reader has more
        c.set_compatibility("e", "FORWARD")
        assert c.test_compatibility("e", e(["A", "B", "C"])) is False      # old reader lacks C
        c.set_compatibility("e", "BACKWARD")
        assert c.test_compatibility("e", e(["A"])) is False
        assert c.test_compatibility("e", e(["A"], default="A")) is True
        renamed = Schema(_avro({"type": "enum", "name": "F", "symbols": ["A", "B"]}))
        assert c.test_compatibility("e", renamed) is False


def test_runs_from_the_command_line():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fastkafka_tools.schema_registry_server",
                             "--port", str(port), "--user", "u:p"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == f"Schema Registry listening on http://127.0.0.1:{port}", \
            line + proc.stderr.read() if proc.poll() is not None else line
        c = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}", "basic.auth.user.info": "u:p"})
        assert c.register_schema("cli-value", Schema(A)) == 1
        with pytest.raises(SchemaRegistryError) as info:
            SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"}).get_subjects()
        assert info.value.http_status_code == 401
    finally:
        proc.terminate()
        proc.wait(10)


def test_session_fixture_serves_a_registry(schema_registry, schema_registry_server):
    assert schema_registry == schema_registry_server.url and schema_registry.startswith("http://")
    subject = f"fixture-check-{os.getpid()}-value"
    sid = CClient({"url": schema_registry}).register_schema(subject, CSchema(A, "AVRO"))
    assert SchemaRegistryClient({"url": schema_registry}).get_schema(sid).schema_str == A
