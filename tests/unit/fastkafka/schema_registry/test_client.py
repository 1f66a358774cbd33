"""fastkafka.schema_registry's client: every method against the test rig's registry server and the
mock:// registry, its caches (counted in the server's request log), retries and their bounds,
authentication (basic, bearer), TLS, and its typed errors."""
from __future__ import annotations

import json
import pickle
import threading
import time

import pytest

from fastkafka.errors import ConfigError, KafkaError
from fastkafka.schema_registry._client import (RegisteredSchema, Schema, SchemaReference,
                                               SchemaRegistryClient, SchemaRegistryError)
from fastkafka.schema_registry._mock import MockSchemaRegistryClient, clear_mock_registries
from fastkafka_tools.schema_registry_server import start_registry


def _record(*fields: tuple, name: str = "User") -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "namespace": "test",
                              "fields": [dict(zip(("name", "type", "default"), f)) for f in fields]}))


V1 = _record(("name", "string"), ("age", "int"))
V2 = _record(("name", "string"), ("age", "long"), ("email", ["null", "string"], None))   # backward ok
BAD_V2 = _record(("name", "string"), ("age", "int"), ("email", "string"))   # new field, no default


@pytest.fixture
def server():
    s = start_registry()
    try:
        yield s
    finally:
        s.stop()


_scopes = iter(range(10**6))


@pytest.fixture(params=["server", "mock"])
def client(request):
    """A client of a fresh registry: the rig's server over HTTP, or a fresh mock:// scope."""
    if request.param == "server":
        s = start_registry()
        c = SchemaRegistryClient({"url": s.url, "retries.wait.ms": 10})
        yield c
        c.close()
        s.stop()
    else:
        scope = f"client-test-{next(_scopes)}"
        c = SchemaRegistryClient({"url": f"mock://{scope}"})
        assert isinstance(c, MockSchemaRegistryClient)
        yield c
        c.close()
        clear_mock_registries(scope)


# --------------------------------------------------------------------------------------------------
# Every method, on the server and on mock://
# --------------------------------------------------------------------------------------------------
def test_register_gives_ids_and_versions_as_a_registry(client):
    assert client.register_schema("users-value", V1) == 1
    assert client.register_schema("users-value", V1) == 1                 # same schema: same id
    full = client.register_schema_full_response("users-value", V1)
    assert (full.schema_id, full.subject, full.version) == (1, "users-value", 1)
    assert client.register_schema("users-value", V2) == 2
    assert client.get_versions("users-value") == [1, 2]
    # the same schema under another subject: the same id, that subject's own version 1
    other = client.register_schema_full_response("others-value", V1)
    assert (other.schema_id, other.version) == (1, 1)
    assert client.get_subjects() == ["others-value", "users-value"]


def test_get_schema_version_latest_and_lookup(client):
    client.register_schema("s", V1)
    client.register_schema("s", V2)
    assert client.get_schema(1) == V1
    assert client.get_schema(2).schema_str == V2.schema_str
    latest = client.get_latest_version("s")
    assert isinstance(latest, RegisteredSchema)
    assert (latest.schema_id, latest.version, latest.subject, latest.schema) == (2, 2, "s", V2)
    v1 = client.get_version("s", 1)
    assert (v1.schema_id, v1.version, v1.schema) == (1, 1, V1)
    found = client.lookup_schema("s", V1)
    assert (found.schema_id, found.version, found.subject) == (1, 1, "s")


def test_compatibility_levels_and_checks(client):
    assert client.get_compatibility() == "BACKWARD"
    client.register_schema("s", V1)
    assert client.test_compatibility("s", V2) is True
    assert client.test_compatibility("s", BAD_V2) is False
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("s", BAD_V2)
    assert (info.value.http_status_code, info.value.error_code, info.value.subject) == (409, 409, "s")
    with pytest.raises(SchemaRegistryError) as info:
        client.get_compatibility("s")                   # no subject-level config yet
    assert info.value.error_code == 40408
    assert client.set_compatibility("s", "none") == "NONE"
    assert client.get_compatibility("s") == "NONE"
    assert client.register_schema("s", BAD_V2) == 2     # NONE: anything goes
    assert client.set_compatibility(level="FULL") == "FULL"
    assert client.get_compatibility() == "FULL"
    with pytest.raises(ConfigError, match="SOMETIMES"):
        client.set_compatibility("s", "SOMETIMES")


def test_deletes_soft_then_permanent(client):
    client.register_schema("s", V1)
    client.register_schema("s", V2)
    assert client.delete_version("s", 2) == 2
    assert client.get_versions("s") == [1]
    assert client.get_latest_version("s").version == 1
    assert client.get_version("s", 2, deleted=True).schema == V2
    with pytest.raises(SchemaRegistryError) as info:
        client.get_version("s", 2)
    assert info.value.error_code == 40402
    assert client.delete_version("s", 2, permanent=True) == 2
    with pytest.raises(SchemaRegistryError) as info:
        client.delete_subject("s", permanent=True)      # not soft-deleted first
    assert info.value.error_code == 40405
    assert client.delete_subject("s") == [1]
    assert client.get_subjects() == []
    assert client.delete_subject("s", permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as info:
        client.get_versions("s")
    assert info.value.error_code == 40401


def test_subject_not_found_names_the_subject_and_40401(client):
    with pytest.raises(SchemaRegistryError) as info:
        client.get_latest_version("orders-value")
    e = info.value
    assert (e.http_status_code, e.error_code, e.subject) == (404, 40401, "orders-value")
    assert "orders-value" in str(e) and "40401" in str(e) and "HTTP 404" in str(e)
    assert isinstance(e, KafkaError) and not e.retriable


def test_lookup_of_an_unregistered_schema_is_40403(client):
    client.register_schema("s", V1)
    with pytest.raises(SchemaRegistryError) as info:
        client.lookup_schema("s", V2)
    assert (info.value.error_code, info.value.subject) == (40403, "s")
    with pytest.raises(SchemaRegistryError) as info:
        client.get_schema(99)
    assert info.value.error_code == 40403


def test_invalid_schema_is_42201(client):
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("s", Schema('{"type": "record", "name": "R", "fields": [{"name": "a"}]}'))
    assert (info.value.http_status_code, info.value.error_code) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("s", Schema("{not json"))
    assert info.value.error_code == 42201


def test_json_schema_and_references(client):
    js = Schema(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}), "JSON")
    reg = client.register_schema_full_response("j-value", js)
    assert client.get_schema(reg.schema_id) == js
    assert client.get_latest_version("j-value").schema.schema_type == "JSON"
    address = _record(("street", "string"), name="Address")
    client.register_schema("address", address)
    person = Schema(json.dumps({"type": "record", "name": "Person", "namespace": "test",
                                "fields": [{"name": "home", "type": "test.Address"}]}),
                    references=[SchemaReference("test.Address", "address", 1)])
    pid = client.register_schema("person-value", person)
    got = client.get_schema(pid)
    assert got.references == (SchemaReference("test.Address", "address", 1),)
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("x", Schema(person.schema_str,
                                           references=[SchemaReference("test.Address", "nowhere", 1)]))
    assert info.value.error_code == 40401


def test_subject_names_are_escaped_in_paths(client):
    subject = "my topic/with:odd?chars-value"
    assert client.register_schema(subject, V1) == 1
    assert client.get_latest_version(subject).subject == subject
    assert subject in client.get_subjects()


def test_close_and_context_manager(client):
    with client as c:
        c.register_schema("s", V1)
    with pytest.raises(SchemaRegistryError, match="closed"):
        client.get_subjects()


# --------------------------------------------------------------------------------------------------
# mock:// scopes
# --------------------------------------------------------------------------------------------------
def test_mock_scope_is_shared_and_scopes_are_apart():
    try:
        a = SchemaRegistryClient({"url": "mock://shared-a"})
        b = SchemaRegistryClient.new_client({"url": "mock://shared-a"})
        other = SchemaRegistryClient({"url": "mock://shared-b"})
        assert a.register_schema("s", V1) == 1
        assert a.register_schema("s", V2) == 2
        assert b.get_latest_version("s").schema_id == 2                  # the same registry
        assert other.register_schema("s", V2) == 1                       # ids start at 1 per scope
        assert other.get_subjects() == ["s"] and other.get_versions("s") == [1]
        clear_mock_registries("shared-a")
        assert SchemaRegistryClient({"url": "mock://shared-a"}).get_subjects() == []
    finally:
        clear_mock_registries("shared-a")
        clear_mock_registries("shared-b")


# --------------------------------------------------------------------------------------------------
# Caches, counted by the server's request log
# --------------------------------------------------------------------------------------------------
def test_caches_save_round_trips(server):
    c = SchemaRegistryClient({"url": server.url})
    sid = c.register_schema("s", V1)
    c.register_schema("s", V1)
    c.register_schema_full_response("s", V1)
    assert server.count("POST", "/subjects/s/versions") == 1
    assert c.get_schema(sid) == V1                   # known from the register: no request
    assert server.count("GET", "/schemas/ids/") == 0
    fresh = SchemaRegistryClient({"url": server.url})
    fresh.get_schema(sid)
    fresh.get_schema(sid)
    assert server.count("GET", f"/schemas/ids/{sid}") == 1
    fresh.lookup_schema("s", V1)
    fresh.lookup_schema("s", V1)
    assert server.count("POST", "/subjects/s?") == 1
    fresh.get_version("s", 1)
    fresh.get_version("s", 1)
    assert server.count("GET", "/subjects/s/versions/1") == 1


def test_latest_version_cached_until_a_register_on_this_client(server):
    c = SchemaRegistryClient({"url": server.url})
    c.register_schema("s", V1)
    assert c.get_latest_version("s").version == 1
    assert c.get_latest_version("s").version == 1
    assert server.count("GET", "/subjects/s/versions/latest") == 1
    c.register_schema("s", V2)                          # a register here forgets the latest
    assert c.get_latest_version("s").version == 2
    assert server.count("GET", "/subjects/s/versions/latest") == 2


def test_latest_version_ttl(server):
    writer = SchemaRegistryClient({"url": server.url})
    reader = SchemaRegistryClient({"url": server.url, "cache.latest.ttl.sec": 0.3})
    writer.register_schema("s", V1)
    assert reader.get_latest_version("s").version == 1
    writer.register_schema("s", V2)                     # another client: the reader does not know
    assert reader.get_latest_version("s").version == 1
    time.sleep(0.4)
    assert reader.get_latest_version("s").version == 2
    assert server.count("GET", "/subjects/s/versions/latest") == 2


def test_cache_capacity_bounds_the_caches(server):
    c = SchemaRegistryClient({"url": server.url, "cache.capacity": 2})
    c.set_compatibility(level="NONE")
    ids = [c.register_schema("s", _record(("f", "int"), name=f"R{i}")) for i in range(4)]
    assert len(c._schema_by_id) <= 2 and len(c._id_by_subject_schema) <= 2
    assert c.get_schema(ids[0]).schema_str == _record(("f", "int"), name="R0").schema_str


def test_concurrent_calls_share_the_client(server):
    c = SchemaRegistryClient({"url": server.url})
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(c.register_schema("s", V1))
                results.append(c.get_schema(1).schema_str == V1.schema_str)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert set(results) == {1, True} and len(results) == 80
    assert server.state.versions("s") == [1]


# --------------------------------------------------------------------------------------------------
# Retries and their bounds
# --------------------------------------------------------------------------------------------------
def test_retries_on_503_then_succeeds(server):
    c = SchemaRegistryClient({"url": server.url, "retries.wait.ms": 20, "max.retries": 3})
    server.fail_next(503, 2)
    assert c.register_schema("s", V1) == 1
    assert server.count("POST", "/subjects/s/versions") == 3


@pytest.mark.parametrize("status", [408, 429, 500, 502])
def test_retries_on_retriable_statuses(server, status):
    c = SchemaRegistryClient({"url": server.url, "retries.wait.ms": 5})
    server.fail_next(status, 1)
    assert c.get_subjects() == []
    assert server.count("GET", "/subjects") == 2


def test_gives_up_after_max_retries_with_the_last_error(server):
    c = SchemaRegistryClient({"url": server.url, "retries.wait.ms": 5, "max.retries": 2})
    server.fail_next(503, 10)
    with pytest.raises(SchemaRegistryError) as info:
        c.get_latest_version("s")
    assert (info.value.http_status_code, info.value.subject) == (503, "s")
    assert info.value.retriable
    assert server.count("GET", "/subjects/s/versions/latest") == 3       # 1 + 2 retries


def test_no_retry_on_404(server):
    c = SchemaRegistryClient({"url": server.url, "retries.wait.ms": 5})
    with pytest.raises(SchemaRegistryError) as info:
        c.get_version("missing", 1)
    assert info.value.error_code == 40401
    assert server.count("GET", "/subjects/missing") == 1


def test_backoff_is_bounded_by_timeout(server):
    c = SchemaRegistryClient({"url": server.url, "timeout": 0.6, "max.retries": 100,
                              "retries.wait.ms": 100, "retries.max.wait.ms": 10000})
    server.fail_next(503, 1000)
    start = time.monotonic()
    with pytest.raises(SchemaRegistryError) as info:
        c.register_schema("s", V1)
    took = time.monotonic() - start
    assert took < 0.6 + 0.3, f"the call took {took:.2f} s with timeout 0.6 s"
    assert info.value.http_status_code == 503 and "gave up" in str(info.value)
    assert 2 <= server.count("POST", "/subjects/s/versions") < 10


def test_a_slow_registry_times_out_typed(server):
    c = SchemaRegistryClient({"url": server.url, "timeout": 0.3, "max.retries": 0})
    server.fail_next(0, 1, delay=1.0)                      # answers only after 1 s
    with pytest.raises(SchemaRegistryError) as info:
        c.get_subjects()
    assert info.value.http_status_code is None and info.value.retriable
    assert "timed out" in str(info.value) or "no answer" in str(info.value)


def test_connection_refused_is_retried_then_the_next_url_answers(server):
    dead = start_registry()
    dead_url = dead.url
    dead.stop()
    c = SchemaRegistryClient({"url": dead_url, "max.retries": 2, "retries.wait.ms": 5})
    with pytest.raises(SchemaRegistryError) as info:
        c.get_subjects()
    assert info.value.http_status_code is None and "could not be reached" in str(info.value)
    both = SchemaRegistryClient({"url": f"{dead_url}, {server.url}"})
    assert both.register_schema("s", V1) == 1
    assert both.urls == [dead_url, server.url]


# --------------------------------------------------------------------------------------------------
# Authentication
# --------------------------------------------------------------------------------------------------
PASSWORD = "pa55-w0rd-never-shown"
TOKEN = "tok-never-shown-42"


def test_basic_auth_accepted_and_refused():
    with start_registry(users={"alice": PASSWORD}) as s:
        ok = SchemaRegistryClient({"url": s.url, "basic.auth.credentials.source": "USER_INFO",
                                   "basic.auth.user.info": f"alice:{PASSWORD}"})
        assert ok.register_schema("s", V1) == 1
        host = s.url.split("://")[1]
        in_url = SchemaRegistryClient({"url": f"http://alice:{PASSWORD}@{host}"})
        assert in_url.get_subjects() == ["s"]
        assert PASSWORD not in repr(in_url) and "alice" not in repr(in_url)
        for conf in ({"basic.auth.user.info": "alice:wrong-password-xyz"}, {}):
            bad = SchemaRegistryClient({"url": s.url, "retries.wait.ms": 5, **conf})
            s.clear_log()
            with pytest.raises(SchemaRegistryError) as info:
                bad.get_latest_version("s")
            e = info.value
            assert (e.http_status_code, e.error_code, e.subject) == (401, 401, "s")
            assert not e.retriable and len(s.requests) == 1              # 401 is not retried
            for text in (str(e), repr(e), str(pickle.loads(pickle.dumps(e)))):
                assert PASSWORD not in text and "wrong-password-xyz" not in text


def test_bearer_token():
    with start_registry(tokens=[TOKEN]) as s:
        c = SchemaRegistryClient({"url": s.url, "bearer.auth.credentials.source": "STATIC_TOKEN",
                                  "bearer.auth.token": TOKEN, "bearer.auth.logical.cluster": "lsrc-1",
                                  "bearer.auth.identity.pool.id": "pool-1"})
        assert c.register_schema("s", V1) == 1
        assert s.auth_headers[-1] == f"Bearer {TOKEN}"
        bad = SchemaRegistryClient({"url": s.url, "bearer.auth.credentials.source": "STATIC_TOKEN",
                                    "bearer.auth.token": "not-the-token"})
        with pytest.raises(SchemaRegistryError) as info:
            bad.get_subjects()
        assert info.value.http_status_code == 401
        assert "not-the-token" not in str(info.value) and TOKEN not in repr(c)


# --------------------------------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from fastkafka_tools.tlsrig import make_pki

    return make_pki(str(tmp_path_factory.mktemp("pki")))


def test_tls_with_a_ca_made_here(pki):
    with start_registry(tls=(pki.server_cert, pki.server_key)) as s:
        assert s.url.startswith("https://")
        c = SchemaRegistryClient({"url": s.url, "ssl.ca.location": pki.ca})
        assert c.register_schema("s", V1) == 1
        untrusted = SchemaRegistryClient({"url": s.url, "ssl.ca.location": pki.other_ca})
        with pytest.raises(SchemaRegistryError, match="not trusted"):
            untrusted.get_subjects()


def test_mutual_tls(pki):
    with start_registry(tls=(pki.server_cert, pki.server_key), client_ca=pki.ca) as s:
        c = SchemaRegistryClient({"url": s.url, "ssl.ca.location": pki.ca,
                                  "ssl.certificate.location": pki.client_cert,
                                  "ssl.key.location": pki.client_key_encrypted,
                                  "ssl.key.password": pki.client_key_password})
        assert c.register_schema("s", V1) == 1
        anonymous = SchemaRegistryClient({"url": s.url, "ssl.ca.location": pki.ca,
                                          "max.retries": 0})
        with pytest.raises(SchemaRegistryError):
            anonymous.get_subjects()
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient({"url": "https://127.0.0.1:1", "ssl.ca.location": pki.ca,
                              "ssl.certificate.location": pki.client_cert,
                              "ssl.key.location": pki.client_key_encrypted,
                              "ssl.key.password": "wrong-key-pass-zz"})
    assert "wrong-key-pass-zz" not in str(info.value)


# --------------------------------------------------------------------------------------------------
# Configuration and the data types
# --------------------------------------------------------------------------------------------------
def test_unknown_key_is_named_with_the_accepted_ones():
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient({"url": "http://127.0.0.1:8081", "schema.registry.url": "x"})
    assert "'schema.registry.url'" in str(info.value) and "basic.auth.user.info" in str(info.value)


@pytest.mark.parametrize("conf, words", [
    ({}, "url is required"),
    ({"url": "ftp://host:1"}, "not an http"),
    ({"url": "http://h:1", "bearer.auth.credentials.source": "OAUTHBEARER"}, "STATIC_TOKEN"),
    ({"url": "http://h:1", "basic.auth.credentials.source": "SASL_INHERIT"}, "USER_INFO, URL"),
    ({"url": "http://h:1", "bearer.auth.credentials.source": "STATIC_TOKEN"}, "bearer.auth.token"),
    ({"url": "http://h:1", "basic.auth.user.info": "no-colon-secret"}, "user:password"),
    ({"url": "http://u:p@h:1", "basic.auth.user.info": "a:b"}, "keep one"),
    ({"url": "http://h:1", "timeout": "soon"}, "timeout"),
    ({"url": "http://h:1", "max.retries": -1}, "max.retries"),
])
def test_bad_configuration_is_a_clear_config_error(conf, words):
    with pytest.raises(ConfigError, match=words) as info:
        SchemaRegistryClient(conf)
    assert "no-colon-secret" not in str(info.value)


def test_repr_shows_urls_without_userinfo():
    c = SchemaRegistryClient({"url": f"https://bob:{PASSWORD}@reg.example:8443/api/, http://h2:8081"})
    assert repr(c) == "SchemaRegistryClient(urls=['https://reg.example:8443/api', 'http://h2:8081'])"


def test_schema_is_hashable_and_equal_by_content():
    a = Schema('{"type": "string"}')
    b = Schema('{"type": "string"}', "avro")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Schema('{"type": "string"}', "JSON")
    assert a != Schema('{"type": "string"}', references=[SchemaReference("n", "s", 1)])
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):
        a.schema_str = "x"
    with pytest.raises(ConfigError):
        Schema(b"bytes")


def test_error_pickles_with_its_fields():
    e = SchemaRegistryError(404, 40401, "Subject 'x' not found.", subject="x")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is SchemaRegistryError and str(back) == str(e)
    assert (back.http_status_code, back.error_code, back.subject) == (404, 40401, "x")


def test_mock_client_takes_only_mock_urls():
    with pytest.raises(ConfigError, match="mock://"):
        MockSchemaRegistryClient({"url": "http://127.0.0.1:8081"})
    with pytest.raises(ConfigError, match="cannot be listed"):
        SchemaRegistryClient({"url": "http://127.0.0.1:8081, mock://x"})


def test_backoff_doubles_with_jitter_up_to_the_max(server, monkeypatch):
    from fastkafka.schema_registry import _client

    waits: list = []
    monkeypatch.setattr(_client.time, "sleep", waits.append)
    c = SchemaRegistryClient({"url": server.url, "max.retries": 5, "retries.wait.ms": 100,
                              "retries.max.wait.ms": 500})
    server.fail_next(503, 5)
    assert c.get_subjects() == []
    assert len(waits) == 5
    for wait, full in zip(waits, (0.1, 0.2, 0.4, 0.5, 0.5)):
        assert full / 2 <= wait <= full, (waits, full)
    assert len(set(waits)) > 1
