"""A client of the Confluent Schema Registry REST API, shaped like confluent-kafka's.

``SchemaRegistryClient(conf)`` takes confluent-kafka's configuration keys and has its method names and
return types, so code moves with the import changed. It uses the standard library only
(``http.client`` and ``ssl``). A ``url`` of the form ``mock://<scope>`` gives the in-process registry
of :mod:`fastkafka.schema_registry._mock` (shared by every client of the same scope in the process),
for tests.

What a registry answered is cached: a schema by its id and the id of a (subject, schema) pair for the
life of the client (the registry never changes them), the latest version of a subject for
``cache.latest.ttl.sec`` seconds (without it: until this client registers under, or deletes from,
that subject). The caches are guarded by a lock: the producer's threads and Spark's tasks share a
client.

Requests that fail on the way (no connection, a reset, a timeout) or with HTTP 408, 429 or 5xx are
tried again, on the next URL of the list and then after an exponential backoff with jitter
(``retries.wait.ms`` doubled per attempt up to ``retries.max.wait.ms``), at most ``max.retries`` times
and never past ``timeout`` seconds from the call's start. Other answers (4xx) are not retried. Every
failure is a :class:`SchemaRegistryError` that names the subject of the call, the HTTP status and the
registry's error code and message; never a password or token.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import random
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import quote, unquote, urlencode, urlsplit

from fastkafka.errors import ConfigError, KafkaError

__all__ = [
    "SchemaRegistryClient",
    "Schema",
    "SchemaReference",
    "RegisteredSchema",
    "SchemaRegistryError",
]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
_RETRIABLE_STATUS = frozenset({408, 429})
_COMPATIBILITY_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                         "FULL", "FULL_TRANSITIVE", "NONE")

_CONF_KEYS = (
    "url", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "basic.auth.credentials.source", "basic.auth.user.info", "bearer.auth.credentials.source",
    "bearer.auth.token", "bearer.auth.logical.cluster", "bearer.auth.identity.pool.id", "timeout",
    "cache.capacity", "cache.latest.ttl.sec", "max.retries", "retries.wait.ms", "retries.max.wait.ms",
)


# --------------------------------------------------------------------------------------------------
# The error
# --------------------------------------------------------------------------------------------------
class SchemaRegistryError(KafkaError):
    """A request to the Schema Registry failed.

    ``http_status_code`` is the HTTP status of the answer (None when no answer came: the registry
    could not be reached or did not answer in time), ``error_code`` the registry's own code (40401
    subject not found, 40402 version not found, 40403 schema not found, 409 incompatible schema,
    42201 invalid schema, 42202 invalid version, 42203 invalid compatibility level, 401/403 refused
    credentials, ...; ``-1`` when the answer carried none), ``error_message`` the registry's message
    and ``subject`` the subject the call was about (None for calls without one). ``retriable`` is
    true for the failures a later call may not meet (no answer, 408, 429, 5xx). The message never
    contains a password or token.
    """

    code, name, description = (-185, "SCHEMA_REGISTRY_ERROR", "A Schema Registry request failed.")
    UNKNOWN = -1

    def __init__(self, http_status_code: Optional[int], error_code: int, error_message: str, *,
                 subject: Optional[str] = None, url: Optional[str] = None):
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message
        self.subject = subject
        self.url = url
        parts = []
        if subject is not None:
            parts.append(f"subject {subject!r}")
        if http_status_code is not None:
            parts.append(f"HTTP {http_status_code}")
        parts.append(f"registry error code {error_code}")
        where = f" (from {url})" if url else ""
        super().__init__(f"{', '.join(parts)}: {error_message}{where}")
        self.retriable = (http_status_code is None or http_status_code in _RETRIABLE_STATUS
                          or http_status_code >= 500)


# --------------------------------------------------------------------------------------------------
# The data types
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SchemaReference:
    """A reference of a schema to another registered schema: ``name`` is how the referring schema
    names it (an Avro full name, a JSON Schema ``$ref`` URL), ``subject`` and ``version`` where it is
    registered."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SchemaReference":
        return cls(d.get("name"), d.get("subject"), d.get("version"))  # type: ignore[arg-type]


class Schema:
    """A schema as the registry keeps it: its text, its type (``"AVRO"``, ``"JSON"`` or
    ``"PROTOBUF"``) and its references. Immutable, hashable; two are equal when their text, type and
    references are."""

    __slots__ = ("schema_str", "schema_type", "references", "_hash")

    schema_str: str
    schema_type: str
    references: Tuple[SchemaReference, ...]
    _hash: int

    def __init__(self, schema_str: str, schema_type: str = "AVRO",
                 references: Optional[Iterable[SchemaReference]] = None):
        if not isinstance(schema_str, str):
            raise ConfigError(f"Schema: schema_str must be a str, not {type(schema_str).__name__}")
        if not isinstance(schema_type, str) or not schema_type:
            raise ConfigError(f"Schema: schema_type must be a non-empty str, got {schema_type!r}")
        refs = tuple(references or ())
        for r in refs:
            if not isinstance(r, SchemaReference):
                raise ConfigError(f"Schema: references must be SchemaReference objects, "
                                  f"got {type(r).__name__}")
        object.__setattr__(self, "schema_str", schema_str)
        object.__setattr__(self, "schema_type", schema_type.upper())
        object.__setattr__(self, "references", refs)
        object.__setattr__(self, "_hash", hash((schema_str, self.schema_type, refs)))

    def __setattr__(self, name, value):
        raise AttributeError("Schema is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schema):
            return NotImplemented
        return (self.schema_str == other.schema_str and self.schema_type == other.schema_type
                and self.references == other.references)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        text = self.schema_str if len(self.schema_str) <= 60 else self.schema_str[:57] + "..."
        refs = f", references={list(self.references)!r}" if self.references else ""
        return f"Schema({text!r}, schema_type={self.schema_type!r}{refs})"

    def __reduce__(self):
        return (Schema, (self.schema_str, self.schema_type, self.references))

    def to_dict(self) -> Dict[str, Any]:
        """The schema as the REST API takes it (``schemaType`` left out for Avro, as the registry
        does)."""
        d: Dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            d["schemaType"] = self.schema_type
        if self.references:
            d["references"] = [r.to_dict() for r in self.references]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Schema":
        return cls(d.get("schema", ""), d.get("schemaType") or "AVRO",
                   [SchemaReference.from_dict(r) for r in d.get("references") or ()])


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as registered: its id, the schema, and the subject and version it is registered
    under (``version`` is None where the registry did not say, as after a register on a registry
    that answers with the id alone). ``guid`` is the registry's global id where it gives one."""

    schema_id: int
    schema: Schema
    subject: Optional[str]
    version: Optional[int]
    guid: Optional[str] = None


def _registered_from_answer(answer: Mapping[str, Any], *, subject: Optional[str],
                            schema: Optional[Schema] = None) -> RegisteredSchema:
    if not isinstance(answer, Mapping) or not isinstance(answer.get("id"), int):
        raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                  f"the registry's answer has no schema id: {str(answer)[:200]}",
                                  subject=subject)
    if schema is None:
        schema = Schema.from_dict(answer) if answer.get("schema") is not None else None
    return RegisteredSchema(schema_id=answer["id"], schema=schema,  # type: ignore[arg-type]
                            subject=answer.get("subject") or subject, version=answer.get("version"),
                            guid=answer.get("guid"))


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------
def _number(conf: Mapping[str, Any], key: str, default, *, minimum=0, integer=False):
    value = conf.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(f"{key} must be a number, got {value!r}") from None
        else:
            raise ConfigError(f"{key} must be a number, not {type(value).__name__}")
    if value < minimum:
        raise ConfigError(f"{key} must be >= {minimum}, got {value!r}")
    return int(value) if integer else float(value)


class _Endpoint:
    """One base URL: scheme, host, port and path prefix (userinfo removed)."""

    __slots__ = ("scheme", "host", "port", "prefix", "shown")

    def __init__(self, scheme: str, host: str, port: int, prefix: str):
        self.scheme, self.host, self.port, self.prefix = scheme, host, port, prefix
        h = f"[{host}]" if ":" in host else host
        self.shown = f"{scheme}://{h}:{port}{prefix}"


def _parse_urls(value: Any) -> Tuple[List[_Endpoint], Optional[Tuple[str, str]], str]:
    """The endpoints, the first URL's userinfo (if any) and the scheme kind ("http" or "mock")."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("url is required: the Schema Registry's URL (http://host:port, "
                          "https://host:port, a comma-separated list of them, or mock://scope)")
    endpoints: List[_Endpoint] = []
    userinfo: Optional[Tuple[str, str]] = None
    for i, raw in enumerate(u.strip() for u in value.split(",")):
        if not raw:
            continue
        parts = urlsplit(raw)
        scheme = parts.scheme.lower()
        if scheme == "mock":
            raise ConfigError("url: a mock:// URL cannot be listed with others")
        if scheme not in ("http", "https"):
            shown = raw.split("@")[-1]
            raise ConfigError(f"url: {shown!r} is not an http:// or https:// URL")
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(f"url: {parts.hostname!r} has an invalid port") from None
        if not parts.hostname:
            raise ConfigError(f"url: {raw.split('@')[-1]!r} has no host")
        if i == 0 and (parts.username or parts.password):
            userinfo = (unquote(parts.username or ""), unquote(parts.password or ""))
        endpoints.append(_Endpoint(scheme, parts.hostname,
                                   port or (443 if scheme == "https" else 80),
                                   parts.path.rstrip("/")))
    if not endpoints:
        raise ConfigError("url is required: no URL in the list")
    return endpoints, userinfo, "http"


# --------------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------------
class SchemaRegistryClient:
    """A Schema Registry client (Confluent's REST API); see the module's text.

    ``conf`` keys (confluent-kafka's): ``url`` (required; a comma-separated list is tried in order;
    ``mock://<scope>`` for the in-process registry), ``ssl.ca.location``, ``ssl.certificate.location``,
    ``ssl.key.location``, ``ssl.key.password``, ``basic.auth.credentials.source`` (``USER_INFO`` or
    ``URL``), ``basic.auth.user.info`` (``"user:password"``), ``bearer.auth.credentials.source``
    (``STATIC_TOKEN``), ``bearer.auth.token``, ``bearer.auth.logical.cluster``,
    ``bearer.auth.identity.pool.id``, ``timeout`` (seconds per call, retries included; default 30),
    ``cache.capacity`` (entries per cache, default 1000), ``cache.latest.ttl.sec``, ``max.retries``
    (default 3), ``retries.wait.ms`` (default 1000), ``retries.max.wait.ms`` (default 20000).
    """

    def __new__(cls, conf: Mapping[str, Any]):
        if cls is SchemaRegistryClient and isinstance(conf, Mapping):
            url = conf.get("url")
            if isinstance(url, str) and url.strip().lower().startswith("mock://"):
                from fastkafka.schema_registry._mock import MockSchemaRegistryClient
                return super().__new__(MockSchemaRegistryClient)
        return super().__new__(cls)

    @staticmethod
    def new_client(conf: Mapping[str, Any]) -> "SchemaRegistryClient":
        """The client for ``conf`` (the mock one for a ``mock://`` URL), as confluent-kafka's."""
        return SchemaRegistryClient(conf)

    def __init__(self, conf: Mapping[str, Any]):
        if not isinstance(conf, Mapping):
            raise ConfigError(f"SchemaRegistryClient: conf must be a dict, not {type(conf).__name__}")
        unknown = [k for k in conf if k not in _CONF_KEYS]
        if unknown:
            raise ConfigError(f"SchemaRegistryClient: unknown configuration key(s) "
                              f"{', '.join(map(repr, unknown))}; accepted keys: {', '.join(_CONF_KEYS)}")
        self._conf_url = conf.get("url")
        self._configure_transport(conf)
        self.timeout = _number(conf, "timeout", 30.0, minimum=0.001)
        self.max_retries = _number(conf, "max.retries", 3, integer=True)
        self.retries_wait_ms = _number(conf, "retries.wait.ms", 1000, integer=True)
        self.retries_max_wait_ms = _number(conf, "retries.max.wait.ms", 20000, integer=True)
        self.cache_capacity = _number(conf, "cache.capacity", 1000, minimum=1, integer=True)
        self.cache_latest_ttl_sec = _number(conf, "cache.latest.ttl.sec", None)
        self._lock = threading.RLock()
        self._closed = False
        self._schema_by_id: Dict[int, Schema] = {}
        self._id_by_subject_schema: Dict[Tuple[str, Schema, bool], int] = {}
        self._registered_by_subject_schema: Dict[Tuple[str, Schema, bool], RegisteredSchema] = {}
        self._by_subject_version: Dict[Tuple[str, int], RegisteredSchema] = {}
        self._latest: Dict[str, Tuple[RegisteredSchema, Optional[float]]] = {}

    # -- transport -------------------------------------------------------------------------------
    def _configure_transport(self, conf: Mapping[str, Any]) -> None:
        self._endpoints, url_userinfo, _ = _parse_urls(conf.get("url"))
        self._headers: Dict[str, str] = {"Accept": _ACCEPT}
        self._configure_auth(conf, url_userinfo)
        self._ssl_context: Optional[ssl.SSLContext] = None
        tls_keys = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                    "ssl.key.password")
        if any(e.scheme == "https" for e in self._endpoints) or any(k in conf for k in tls_keys):
            self._ssl_context = self._make_ssl_context(conf)

    def _configure_auth(self, conf: Mapping[str, Any], url_userinfo: Optional[Tuple[str, str]]) -> None:
        basic_source = conf.get("basic.auth.credentials.source")
        user_info = conf.get("basic.auth.user.info")
        bearer_source = conf.get("bearer.auth.credentials.source")
        credentials: Optional[Tuple[str, str]] = None
        if basic_source is not None:
            basic_source = str(basic_source).upper()
            if basic_source not in ("USER_INFO", "URL"):
                raise ConfigError(f"basic.auth.credentials.source {basic_source!r} is not supported; "
                                  f"supported: USER_INFO, URL")
        if user_info is not None and url_userinfo is not None:
            raise ConfigError("basic.auth.user.info is set and the url has credentials too: keep one")
        if basic_source == "USER_INFO" and user_info is None:
            raise ConfigError("basic.auth.credentials.source USER_INFO needs basic.auth.user.info "
                              "(\"user:password\")")
        if basic_source == "URL" and url_userinfo is None:
            raise ConfigError("basic.auth.credentials.source URL needs credentials in the url "
                              "(https://user:password@host:port)")
        if user_info is not None and basic_source != "URL":
            if not isinstance(user_info, str) or ":" not in user_info:
                raise ConfigError("basic.auth.user.info must be \"user:password\" "
                                  "(the value is not shown)")
            user, password = user_info.split(":", 1)
            credentials = (user, password)
        elif url_userinfo is not None:
            credentials = url_userinfo
        if bearer_source is not None:
            bearer_source = str(bearer_source).upper()
            if bearer_source != "STATIC_TOKEN":
                raise ConfigError(f"bearer.auth.credentials.source {bearer_source!r} is not supported; "
                                  f"supported: STATIC_TOKEN (with bearer.auth.token)")
            if credentials is not None:
                raise ConfigError("basic auth and bearer auth are both configured: keep one")
            token = conf.get("bearer.auth.token")
            if not isinstance(token, str) or not token:
                raise ConfigError("bearer.auth.credentials.source STATIC_TOKEN needs bearer.auth.token")
            self._headers["Authorization"] = f"Bearer {token}"
            cluster = conf.get("bearer.auth.logical.cluster")
            if cluster:
                self._headers["target-sr-cluster"] = str(cluster)
            pool = conf.get("bearer.auth.identity.pool.id")
            if pool:
                self._headers["Confluent-Identity-Pool-Id"] = str(pool)
        else:
            for key in ("bearer.auth.token", "bearer.auth.logical.cluster",
                        "bearer.auth.identity.pool.id"):
                if key in conf:
                    raise ConfigError(f"{key} is set but bearer.auth.credentials.source is not "
                                      f"(set it to STATIC_TOKEN)")
        if credentials is not None:
            raw = f"{credentials[0]}:{credentials[1]}".encode("utf-8")
            self._headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")

    @staticmethod
    def _make_ssl_context(conf: Mapping[str, Any]) -> ssl.SSLContext:
        ca = conf.get("ssl.ca.location")
        cert = conf.get("ssl.certificate.location")
        key = conf.get("ssl.key.location")
        password = conf.get("ssl.key.password")
        try:
            if ca is None:
                ctx = ssl.create_default_context()
            elif os.path.isdir(ca):
                ctx = ssl.create_default_context(capath=ca)
            else:
                ctx = ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"ssl.ca.location {ca!r} cannot be loaded: {e}") from None
        if (key is not None or password is not None) and cert is None:
            raise ConfigError("ssl.key.location / ssl.key.password need ssl.certificate.location")
        if cert is not None:
            try:
                ctx.load_cert_chain(certfile=cert, keyfile=key, password=password)
            except (OSError, ssl.SSLError) as e:
                # the error text of the ssl module never contains the password
                raise ConfigError(f"ssl.certificate.location {cert!r} (key {key!r}) cannot be "
                                  f"loaded: {e}") from None
        return ctx

    def _send_once(self, endpoint: _Endpoint, method: str, path: str, body: Optional[bytes],
                   timeout: float) -> Tuple[int, bytes]:
        if endpoint.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                endpoint.host, endpoint.port, timeout=timeout, context=self._ssl_context)
        else:
            conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=timeout)
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = _CONTENT_TYPE
        try:
            conn.request(method, endpoint.prefix + path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def _request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                 body: Any = None, subject: Optional[str] = None) -> Any:
        """One call: the registry's JSON answer, or a :class:`SchemaRegistryError`."""
        if self._closed:
            raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN, "the client is closed",
                                      subject=subject)
        if query:
            q = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in query.items()
                 if v is not None}
            if q:
                path = f"{path}?{urlencode(q)}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            last: Optional[SchemaRegistryError] = None
            for endpoint in self._endpoints:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    status, raw = self._send_once(endpoint, method, path, data, remaining)
                except ssl.SSLCertVerificationError as e:
                    raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                              f"TLS certificate of {endpoint.shown} not trusted: "
                                              f"{e.verify_message or e}", subject=subject) from None
                except (OSError, http.client.HTTPException) as e:
                    reason = "timed out" if isinstance(e, (socket.timeout, TimeoutError)) else (
                        str(e) or type(e).__name__)
                    last = SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                               f"{endpoint.shown} could not be reached: {reason}",
                                               subject=subject)
                    continue
                if 200 <= status < 300:
                    if status == 204 or not raw:
                        return None
                    try:
                        return json.loads(raw)
                    except ValueError:
                        raise SchemaRegistryError(status, SchemaRegistryError.UNKNOWN,
                                                  f"{endpoint.shown} answered with something that "
                                                  f"is not JSON: {raw[:200]!r}",
                                                  subject=subject) from None
                last = self._error_from_answer(status, raw, subject, endpoint)
                if not last.retriable:
                    raise last
            attempt += 1
            if last is None:
                raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                          f"no answer within timeout {self.timeout:g} s",
                                          subject=subject)
            if attempt > self.max_retries:
                raise last
            wait = min(self.retries_max_wait_ms, self.retries_wait_ms * (2 ** (attempt - 1))) / 1000.0
            wait = wait * (0.5 + random.random() / 2)       # jitter: between half and the whole
            if time.monotonic() + wait >= deadline:
                raise SchemaRegistryError(
                    last.http_status_code, last.error_code,
                    f"{last.error_message} (gave up after {attempt} attempt(s): timeout "
                    f"{self.timeout:g} s)", subject=subject, url=last.url)
            time.sleep(wait)

    @staticmethod
    def _error_from_answer(status: int, raw: bytes, subject: Optional[str],
                           endpoint: _Endpoint) -> SchemaRegistryError:
        code, message = SchemaRegistryError.UNKNOWN, ""
        try:
            answer = json.loads(raw)
            if isinstance(answer, Mapping):
                c = answer.get("error_code")
                code = c if isinstance(c, int) else code
                message = str(answer.get("message") or "")
        except ValueError:
            pass
        if not message:
            text = raw[:200].decode("utf-8", "replace").strip()
            message = text or http.client.responses.get(status, "no message")
        if code == SchemaRegistryError.UNKNOWN and status in (401, 403):
            code = status
        return SchemaRegistryError(status, code, message, subject=subject, url=endpoint.shown)

    # -- cache helpers ---------------------------------------------------------------------------
    def _put(self, cache: Dict, key, value) -> None:
        cache.pop(key, None)
        cache[key] = value
        while len(cache) > self.cache_capacity:
            del cache[next(iter(cache))]

    def _remember_schema(self, schema_id: int, schema: Optional[Schema]) -> None:
        if schema is not None and schema_id not in self._schema_by_id:
            self._put(self._schema_by_id, schema_id, schema)

    def _forget_subject(self, subject: str, version: Optional[int] = None) -> None:
        with self._lock:
            self._latest.pop(subject, None)
            for sv in [sv for sv in self._by_subject_version if sv[0] == subject
                       and (version is None or sv[1] == version)]:
                del self._by_subject_version[sv]
            for cache in (self._id_by_subject_schema, self._registered_by_subject_schema):
                for key in [key for key in cache if key[0] == subject]:
                    del cache[key]

    @staticmethod
    def _check_subject(subject_name: Any) -> str:
        if not isinstance(subject_name, str) or not subject_name:
            raise ConfigError(f"subject_name must be a non-empty str, got {subject_name!r}")
        return subject_name

    @staticmethod
    def _check_schema(schema: Any) -> "Schema":
        if not isinstance(schema, Schema):
            raise ConfigError(f"schema must be a fastkafka.schema_registry.Schema, "
                              f"not {type(schema).__name__}")
        return schema

    @staticmethod
    def _s(subject: str) -> str:
        return quote(subject, safe="")

    # -- the API ---------------------------------------------------------------------------------
    def register_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> int:
        """Registers ``schema`` under ``subject_name`` (or finds it registered there) and returns
        its schema id."""
        return self.register_schema_full_response(subject_name, schema, normalize_schemas).schema_id

    def register_schema_full_response(self, subject_name: str, schema: Schema,
                                      normalize_schemas: bool = False) -> RegisteredSchema:
        """Registers ``schema`` under ``subject_name``; the :class:`RegisteredSchema` (its version
        is None when the registry answered with the id alone)."""
        subject = self._check_subject(subject_name)
        self._check_schema(schema)
        key = (subject, schema, bool(normalize_schemas))
        with self._lock:
            schema_id = self._id_by_subject_schema.get(key)
            if schema_id is not None:
                known = self._registered_by_subject_schema.get(key)
                return known or RegisteredSchema(schema_id, schema, subject, None)
        answer = self._request("POST", f"/subjects/{self._s(subject)}/versions",
                               query={"normalize": bool(normalize_schemas)}, body=schema.to_dict(),
                               subject=subject)
        registered = _registered_from_answer(answer, subject=subject, schema=schema)
        with self._lock:
            self._put(self._id_by_subject_schema, key, registered.schema_id)
            if registered.version is not None:
                self._put(self._registered_by_subject_schema, key, registered)
            self._remember_schema(registered.schema_id, schema)
            self._latest.pop(subject, None)          # this register may have made a new version
        return registered

    def get_schema(self, schema_id: int, subject_name: Optional[str] = None,
                   fmt: Optional[str] = None) -> Schema:
        """The schema of id ``schema_id`` (cached for the life of the client)."""
        if isinstance(schema_id, bool) or not isinstance(schema_id, int):
            raise ConfigError(f"schema_id must be an int, got {schema_id!r}")
        if fmt is None:
            with self._lock:
                cached = self._schema_by_id.get(schema_id)
            if cached is not None:
                return cached
        answer = self._request("GET", f"/schemas/ids/{schema_id}",
                               query={"subject": subject_name, "format": fmt}, subject=subject_name)
        schema = Schema.from_dict(answer)
        if fmt is None:
            with self._lock:
                self._put(self._schema_by_id, schema_id, schema)
        return schema

    def lookup_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False,
                      deleted: bool = False) -> RegisteredSchema:
        """The registration of ``schema`` under ``subject_name`` (40403 if it is not registered
        there, 40401 if the subject does not exist)."""
        subject = self._check_subject(subject_name)
        self._check_schema(schema)
        key = (subject, schema, bool(normalize_schemas))
        with self._lock:
            known = self._registered_by_subject_schema.get(key)
        if known is not None:
            return known
        answer = self._request("POST", f"/subjects/{self._s(subject)}",
                               query={"normalize": bool(normalize_schemas), "deleted": bool(deleted)},
                               body=schema.to_dict(), subject=subject)
        registered = _registered_from_answer(answer, subject=subject, schema=schema)
        with self._lock:
            self._put(self._registered_by_subject_schema, key, registered)
            self._put(self._id_by_subject_schema, key, registered.schema_id)
            self._remember_schema(registered.schema_id, schema)
        return registered

    def get_subjects(self) -> List[str]:
        """The registry's subjects (not soft-deleted)."""
        return list(self._request("GET", "/subjects") or [])

    def delete_subject(self, subject_name: str, permanent: bool = False) -> List[int]:
        """Deletes the subject (soft, or ``permanent`` after a soft delete); the versions deleted."""
        subject = self._check_subject(subject_name)
        try:
            answer = self._request("DELETE", f"/subjects/{self._s(subject)}",
                                   query={"permanent": True} if permanent else None, subject=subject)
        finally:
            self._forget_subject(subject)
        return list(answer or [])

    def get_latest_version(self, subject_name: str, fmt: Optional[str] = None) -> RegisteredSchema:
        """The subject's latest version (cached for ``cache.latest.ttl.sec``, or until this client
        registers under or deletes from the subject)."""
        subject = self._check_subject(subject_name)
        now = time.monotonic()
        if fmt is None:
            with self._lock:
                cached = self._latest.get(subject)
            if cached is not None and (cached[1] is None or now < cached[1]):
                return cached[0]
        answer = self._request("GET", f"/subjects/{self._s(subject)}/versions/latest",
                               query={"format": fmt}, subject=subject)
        registered = _registered_from_answer(answer, subject=subject)
        if fmt is None:
            ttl = self.cache_latest_ttl_sec
            with self._lock:
                self._put(self._latest, subject, (registered, None if ttl is None else now + ttl))
                self._remember_schema(registered.schema_id, registered.schema)
        return registered

    def get_version(self, subject_name: str, version: int, deleted: bool = False,
                    fmt: Optional[str] = None) -> RegisteredSchema:
        """Version ``version`` of the subject (a version number never changes: cached)."""
        subject = self._check_subject(subject_name)
        if version == "latest":
            return self.get_latest_version(subject, fmt)
        if isinstance(version, bool) or not isinstance(version, int):
            raise ConfigError(f"version must be an int, got {version!r}")
        key = (subject, version)
        if fmt is None and not deleted:
            with self._lock:
                cached = self._by_subject_version.get(key)
            if cached is not None:
                return cached
        answer = self._request("GET", f"/subjects/{self._s(subject)}/versions/{version}",
                               query={"deleted": True if deleted else None, "format": fmt},
                               subject=subject)
        registered = _registered_from_answer(answer, subject=subject)
        if fmt is None and not deleted:
            with self._lock:
                self._put(self._by_subject_version, key, registered)
                self._remember_schema(registered.schema_id, registered.schema)
        return registered

    def get_versions(self, subject_name: str) -> List[int]:
        """The subject's version numbers (not soft-deleted)."""
        subject = self._check_subject(subject_name)
        return list(self._request("GET", f"/subjects/{self._s(subject)}/versions", subject=subject)
                    or [])

    def delete_version(self, subject_name: str, version: int, permanent: bool = False) -> int:
        """Deletes a version of the subject (soft, or ``permanent`` after a soft delete); its
        number."""
        subject = self._check_subject(subject_name)
        if isinstance(version, bool) or not isinstance(version, int):
            raise ConfigError(f"version must be an int, got {version!r}")
        try:
            answer = self._request("DELETE", f"/subjects/{self._s(subject)}/versions/{version}",
                                   query={"permanent": True} if permanent else None, subject=subject)
        finally:
            self._forget_subject(subject, version)
            with self._lock:
                self._latest.pop(subject, None)
        return int(answer)

    @staticmethod
    def _check_level(level: Any) -> str:
        if not isinstance(level, str) or level.upper() not in _COMPATIBILITY_LEVELS:
            raise ConfigError(f"compatibility level {level!r} is not one of "
                              f"{', '.join(_COMPATIBILITY_LEVELS)}")
        return level.upper()

    def set_compatibility(self, subject_name: Optional[str] = None, level: Optional[str] = None) -> str:
        """Sets the compatibility level of the subject (of the registry when ``subject_name`` is
        None); the level set."""
        level = self._check_level(level)
        path = "/config" if subject_name is None else f"/config/{self._s(self._check_subject(subject_name))}"
        answer = self._request("PUT", path, body={"compatibility": level}, subject=subject_name)
        return str(answer.get("compatibility", level)) if isinstance(answer, Mapping) else level

    def get_compatibility(self, subject_name: Optional[str] = None) -> str:
        """The compatibility level of the subject (40408 when the subject has none of its own), or
        of the registry when ``subject_name`` is None."""
        path = "/config" if subject_name is None else f"/config/{self._s(self._check_subject(subject_name))}"
        answer = self._request("GET", path, subject=subject_name)
        if not isinstance(answer, Mapping):
            raise SchemaRegistryError(None, SchemaRegistryError.UNKNOWN,
                                      f"unexpected answer to GET {path}: {str(answer)[:200]}",
                                      subject=subject_name)
        return str(answer.get("compatibilityLevel") or answer.get("compatibility"))

    def test_compatibility(self, subject_name: str, schema: Schema, version: Any = "latest") -> bool:
        """Whether ``schema`` is compatible with version ``version`` of the subject under the
        subject's compatibility level."""
        subject = self._check_subject(subject_name)
        self._check_schema(schema)
        answer = self._request("POST", f"/compatibility/subjects/{self._s(subject)}/versions/{version}",
                               body=schema.to_dict(), subject=subject)
        return bool(isinstance(answer, Mapping) and answer.get("is_compatible"))

    # -- life ------------------------------------------------------------------------------------
    def clear_latest_caches(self) -> None:
        with self._lock:
            self._latest.clear()

    def clear_caches(self) -> None:
        with self._lock:
            for cache in (self._schema_by_id, self._id_by_subject_schema,
                          self._registered_by_subject_schema, self._by_subject_version, self._latest):
                cache.clear()

    def close(self) -> None:
        """Drops the caches; later calls fail. Idempotent."""
        self.clear_caches()
        self._closed = True

    def __enter__(self) -> "SchemaRegistryClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def urls(self) -> List[str]:
        """The registry URLs, without credentials."""
        return [e.shown for e in self._endpoints]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(urls={self.urls!r})"
