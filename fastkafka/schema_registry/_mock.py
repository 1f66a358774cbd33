"""The in-process Schema Registry of ``mock://<scope>`` URLs, for users' tests.

Every :class:`MockSchemaRegistryClient` of the same scope in the process shares one registry (as
confluent-kafka's mock does): schema ids are given per scope from 1; the same schema registered twice
under a subject keeps its id and version; the same schema under another subject keeps its id and is a
new version there. The registry answers the same REST paths, bodies and error codes as the Confluent
Schema Registry (40401 subject not found, 40402 version not found, 40403 schema not found, 409
incompatible, 42201 invalid schema, 42202 invalid version, 42203 invalid compatibility level, ...),
so the client's code, caches and errors are those used with a real registry.

Compatibility (default ``BACKWARD``, as a registry's) is checked for Avro schemas: record fields added
(a reader's field the writer lacks needs a default), removed, renamed through aliases; the type
promotions int -> long -> float -> double and string <-> bytes; unions (every writer branch must be
readable); enums (new writer symbols need the reader's default); fixed sizes; arrays and maps
element-wise; named types by name. JSON Schema and Protobuf schemas are taken as compatible.
An Avro schema must be JSON of a valid shape (names, types, fields); a deeper check can be given to
:class:`RegistryState` (the test server parses with a full Avro library).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import parse_qsl, unquote, urlsplit

from fastkafka.errors import ConfigError
from fastkafka.schema_registry._client import SchemaRegistryClient, _Endpoint

__all__ = ["MockSchemaRegistryClient", "RegistryState", "clear_mock_registries"]

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE", "NONE")
TYPES = ("AVRO", "JSON", "PROTOBUF")
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
               ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string")}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Fail(Exception):
    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# --------------------------------------------------------------------------------------------------
# Avro: shape check and reader/writer compatibility, on the parsed JSON
# --------------------------------------------------------------------------------------------------
def _fullname(name: str, namespace: Optional[str]) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _collect(schema: Any, names: Dict[str, Any], namespace: Optional[str], path: str) -> None:
    """Checks the shape of an Avro schema and records its named types by full name."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return
        if schema in names or _fullname(schema, namespace) in names:
            return
        raise _Fail(422, 42201, f"Invalid schema: {path}: unknown type {schema!r}")
    if isinstance(schema, list):
        if not schema:
            raise _Fail(422, 42201, f"Invalid schema: {path}: empty union")
        for i, branch in enumerate(schema):
            if isinstance(branch, list):
                raise _Fail(422, 42201, f"Invalid schema: {path}[{i}]: a union inside a union")
            _collect(branch, names, namespace, f"{path}[{i}]")
        return
    if not isinstance(schema, dict) or "type" not in schema:
        raise _Fail(422, 42201, f"Invalid schema: {path}: not an Avro type: {str(schema)[:80]}")
    kind = schema["type"]
    if kind in ("record", "error", "enum", "fixed"):
        name = schema.get("name")
        if not isinstance(name, str) or not all(_NAME.match(p) for p in name.split(".")):
            raise _Fail(422, 42201, f"Invalid schema: {path}: {kind} without a valid name")
        ns = schema.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
        full = _fullname(name, ns)
        if full in names:
            raise _Fail(422, 42201, f"Invalid schema: {path}: {full!r} is defined twice")
        names[full] = schema
        if kind == "enum":
            symbols = schema.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) and _NAME.match(s)
                                                        for s in symbols):
                raise _Fail(422, 42201, f"Invalid schema: {path}: enum {full!r} needs valid symbols")
        elif kind == "fixed":
            if not isinstance(schema.get("size"), int) or schema["size"] < 0:
                raise _Fail(422, 42201, f"Invalid schema: {path}: fixed {full!r} needs a size")
        else:
            fields = schema.get("fields")
            if not isinstance(fields, list):
                raise _Fail(422, 42201, f"Invalid schema: {path}: record {full!r} needs fields")
            seen = set()
            for f in fields:
                if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                    raise _Fail(422, 42201, f"Invalid schema: {path}: a field of {full!r} needs "
                                            f"a name and a type")
                if f["name"] in seen:
                    raise _Fail(422, 42201, f"Invalid schema: {path}: field {f['name']!r} twice")
                seen.add(f["name"])
                _collect(f["type"], names, ns, f"{path}.{f['name']}")
    elif kind == "array":
        _collect(schema.get("items"), names, namespace, f"{path}[]")
    elif kind == "map":
        _collect(schema.get("values"), names, namespace, f"{path}{{}}")
    else:
        _collect(kind, names, namespace, path)


def _avro_names(schema: Any) -> Dict[str, Any]:
    names: Dict[str, Any] = {}
    _collect(schema, names, None, "$")
    return names


def _resolve(schema: Any, names: Dict[str, Any]) -> Any:
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        if schema in names:
            return names[schema]
        for full, s in names.items():
            if full.rsplit(".", 1)[-1] == schema:
                return s
    if isinstance(schema, dict) and schema.get("type") not in (
            "record", "error", "enum", "fixed", "array", "map"):
        return _resolve(schema["type"], names)
    return schema


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    t = schema["type"]
    return "record" if t == "error" else t


def _short(schema: Any) -> str:
    return str(schema.get("name", "")).rsplit(".", 1)[-1]


def avro_can_read(reader: Any, writer: Any, r_names: Dict[str, Any], w_names: Dict[str, Any],
                  path: str = "$", seen: Optional[set] = None) -> List[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty when it can)."""
    seen = set() if seen is None else seen
    reader, writer = _resolve(reader, r_names), _resolve(writer, w_names)
    rk, wk = _kind(reader), _kind(writer)
    if wk == "union":
        out: List[str] = []
        for i, branch in enumerate(writer):
            out += avro_can_read(reader, branch, r_names, w_names, f"{path}", seen)
        return out
    if rk == "union":
        for branch in reader:
            if not avro_can_read(branch, writer, r_names, w_names, path, seen):
                return []
        return [f"{path}: the reader's union has no branch for the writer's {wk}"]
    if rk != wk:
        if (wk, rk) in _PROMOTIONS:
            return []
        return [f"{path}: the reader's type {rk} cannot read the writer's {wk}"]
    if rk in _PRIMITIVES:
        return []
    if rk in ("record", "enum", "fixed") and _short(reader) != _short(writer):
        return [f"{path}: the reader's {rk} {_short(reader)!r} is not the writer's {_short(writer)!r}"]
    if rk == "fixed":
        if reader.get("size") != writer.get("size"):
            return [f"{path}: fixed size {writer.get('size')} cannot be read as {reader.get('size')}"]
        return []
    if rk == "enum":
        missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
        if missing and "default" not in reader:
            return [f"{path}: the reader's enum lacks symbol(s) {missing} (and has no default)"]
        return []
    if rk == "array":
        return avro_can_read(reader["items"], writer["items"], r_names, w_names, f"{path}[]", seen)
    if rk == "map":
        return avro_can_read(reader["values"], writer["values"], r_names, w_names, f"{path}{{}}", seen)
    key = (id(reader), id(writer))
    if key in seen:
        return []
    seen.add(key)
    out = []
    writer_fields = {f["name"]: f for f in writer["fields"]}
    for f in reader["fields"]:
        wf = writer_fields.get(f["name"])
        if wf is None:
            for alias in f.get("aliases") or ():
                wf = writer_fields.get(alias)
                if wf is not None:
                    break
        if wf is None:
            if "default" not in f:
                out.append(f"{path}.{f['name']}: the reader's field is not in the writer's record "
                           f"and has no default")
            continue
        out += avro_can_read(f["type"], wf["type"], r_names, w_names, f"{path}.{f['name']}", seen)
    return out


# --------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------
class _Version:
    __slots__ = ("version", "schema_id", "deleted")

    def __init__(self, version: int, schema_id: int):
        self.version, self.schema_id, self.deleted = version, schema_id, False


class RegistryState:
    """A Schema Registry's state and its REST API (the paths the client uses), in memory.

    ``handle(method, path, query, body)`` answers ``(status, body)`` as the registry's server does;
    ``validate(schema_type, parsed)`` (optional) is a deeper check of a schema than its shape: it
    raises ``ValueError`` (or any exception) with the reason for an invalid one. Thread-safe.
    """

    def __init__(self, validate: Optional[Callable[[str, Any], None]] = None):
        self._lock = threading.RLock()
        self._validate = validate
        self._schemas: Dict[int, Dict[str, Any]] = {}            # id -> {"schema", "schemaType", "references"}
        self._ids: Dict[Tuple, int] = {}                          # identity key -> id
        self._subjects: Dict[str, List[_Version]] = {}
        self._deleted_subjects: set = set()
        self._global_level = "BACKWARD"
        self._levels: Dict[str, str] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def _parse(self, body: Any) -> Tuple[str, str, List[Dict[str, Any]], Any]:
        if not isinstance(body, Mapping) or not isinstance(body.get("schema"), str):
            raise _Fail(422, 42201, "Invalid schema: the request has no \"schema\" string")
        schema_type = (body.get("schemaType") or "AVRO").upper()
        if schema_type not in TYPES:
            raise _Fail(422, 42201, f"Invalid schema: unknown schemaType {schema_type!r}")
        refs = list(body.get("references") or [])
        for r in refs:
            if not isinstance(r, Mapping) or not {"name", "subject", "version"} <= set(r):
                raise _Fail(422, 42201, "Invalid schema: a reference needs name, subject, version")
            self._version(r["subject"], r["version"], deleted=False)     # 40401/40402 if unknown
        parsed: Any = None
        if schema_type in ("AVRO", "JSON"):
            try:
                parsed = json.loads(body["schema"])
            except ValueError as e:
                raise _Fail(422, 42201, f"Invalid schema: not JSON: {e}") from None
            if schema_type == "AVRO" and not refs:
                _avro_names(parsed)
        if self._validate is not None and not refs:
            try:
                self._validate(schema_type, parsed if parsed is not None else body["schema"])
            except _Fail:
                raise
            except Exception as e:  # noqa: BLE001 - the reason is the registry's answer
                raise _Fail(422, 42201, f"Invalid schema: {e}") from None
        return body["schema"], schema_type, [dict(r) for r in refs], parsed

    @staticmethod
    def _identity(text: str, schema_type: str, refs: List[Dict[str, Any]], parsed: Any,
                  normalize: bool) -> Tuple:
        if parsed is not None:
            text = json.dumps(parsed, separators=(",", ":"), sort_keys=normalize)
        return (schema_type, text, tuple((r["name"], r["subject"], r["version"]) for r in refs))

    def _live(self, subject: str, *, deleted: bool = False) -> List[_Version]:
        versions = self._subjects.get(subject)
        if versions is None or (not deleted and not any(not v.deleted for v in versions)):
            raise _Fail(404, 40401, f"Subject '{subject}' not found.")
        return [v for v in versions if deleted or not v.deleted]

    def _version(self, subject: str, version: Any, *, deleted: bool) -> _Version:
        versions = self._live(subject, deleted=deleted)
        if version in ("latest", "-1", -1):
            if not versions:
                raise _Fail(404, 40402, f"Version latest not found.")
            return versions[-1]
        try:
            n = int(version)
        except (TypeError, ValueError):
            n = 0
        if n < 1:
            raise _Fail(422, 42202, f"The specified version '{version}' is not a valid version id. "
                                    f"Allowed values are between [1, 2^31-1] and the string \"latest\"")
        for v in versions:
            if v.version == n:
                return v
        raise _Fail(404, 40402, f"Version {n} not found.")

    def _schema_body(self, schema_id: int) -> Dict[str, Any]:
        s = self._schemas[schema_id]
        d: Dict[str, Any] = {"schema": s["schema"]}
        if s["schemaType"] != "AVRO":
            d["schemaType"] = s["schemaType"]
        if s["references"]:
            d["references"] = s["references"]
        return d

    def _subject_version_body(self, subject: str, v: _Version) -> Dict[str, Any]:
        return {"subject": subject, "version": v.version, "id": v.schema_id,
                **self._schema_body(v.schema_id)}

    def level(self, subject: Optional[str]) -> str:
        return self._levels.get(subject, self._global_level) if subject else self._global_level

    def _incompatibilities(self, subject: str, new: Tuple[str, Any], against: List[_Version],
                           level: str) -> List[str]:
        schema_type, parsed = new
        if level == "NONE" or schema_type != "AVRO" or parsed is None or not against:
            return []
        if not level.endswith("_TRANSITIVE"):
            against = against[-1:]
        new_names = _avro_names(parsed)
        problems: List[str] = []
        for v in against:
            old = self._schemas[v.schema_id]
            if old["schemaType"] != "AVRO" or old["references"]:
                continue
            old_parsed = json.loads(old["schema"])
            old_names = _avro_names(old_parsed)
            if level.startswith(("BACKWARD", "FULL")):
                problems += [f"version {v.version} (backward): {p}" for p in
                             avro_can_read(parsed, old_parsed, new_names, old_names)]
            if level.startswith(("FORWARD", "FULL")):
                problems += [f"version {v.version} (forward): {p}" for p in
                             avro_can_read(old_parsed, parsed, old_names, new_names)]
        return problems

    # -- the operations --------------------------------------------------------------------------
    def register(self, subject: str, body: Any, normalize: bool = False) -> Dict[str, Any]:
        with self._lock:
            text, schema_type, refs, parsed = self._parse(body)
            key = self._identity(text, schema_type, refs, parsed, normalize)
            versions = self._subjects.get(subject, [])
            schema_id = self._ids.get(key)
            for v in versions:
                if schema_id is not None and v.schema_id == schema_id and not v.deleted:
                    return {"id": schema_id, "subject": subject, "version": v.version,
                            **self._schema_body(schema_id)}
            live = [v for v in versions if not v.deleted]
            problems = self._incompatibilities(subject, (schema_type, parsed), live,
                                               self.level(subject))
            if problems:
                raise _Fail(409, 409, f"Schema being registered is incompatible with an earlier "
                                      f"schema for subject \"{subject}\", details: {problems}")
            if schema_id is None:
                schema_id = max(self._schemas, default=0) + 1
                self._schemas[schema_id] = {"schema": text, "schemaType": schema_type,
                                            "references": refs}
                self._ids[key] = schema_id
            version = _Version(max((v.version for v in versions), default=0) + 1, schema_id)
            self._subjects.setdefault(subject, []).append(version)
            self._deleted_subjects.discard(subject)
            return {"id": schema_id, "subject": subject, "version": version.version,
                    **self._schema_body(schema_id)}

    def lookup(self, subject: str, body: Any, normalize: bool = False,
               deleted: bool = False) -> Dict[str, Any]:
        with self._lock:
            versions = self._live(subject, deleted=deleted)
            text, schema_type, refs, parsed = self._parse(body)
            schema_id = self._ids.get(self._identity(text, schema_type, refs, parsed, normalize))
            for v in versions:
                if v.schema_id == schema_id:
                    return self._subject_version_body(subject, v)
            raise _Fail(404, 40403, "Schema not found")

    def schema_by_id(self, schema_id: Any) -> Dict[str, Any]:
        with self._lock:
            try:
                n = int(schema_id)
            except (TypeError, ValueError):
                n = -1
            if n not in self._schemas:
                raise _Fail(404, 40403, f"Schema {schema_id} not found")
            return self._schema_body(n)

    def subjects(self, deleted: bool = False) -> List[str]:
        with self._lock:
            return sorted(s for s, vs in self._subjects.items()
                          if deleted or any(not v.deleted for v in vs))

    def versions(self, subject: str, deleted: bool = False) -> List[int]:
        with self._lock:
            return [v.version for v in self._live(subject, deleted=deleted)]

    def get_version(self, subject: str, version: Any, deleted: bool = False) -> Dict[str, Any]:
        with self._lock:
            return self._subject_version_body(subject, self._version(subject, version,
                                                                     deleted=deleted))

    def delete_subject(self, subject: str, permanent: bool = False) -> List[int]:
        with self._lock:
            versions = self._subjects.get(subject)
            if versions is None:
                raise _Fail(404, 40401, f"Subject '{subject}' not found.")
            live = [v for v in versions if not v.deleted]
            if permanent:
                if live:
                    raise _Fail(404, 40405, f"Subject '{subject}' was not deleted first before "
                                            f"being permanently deleted")
                del self._subjects[subject]
                self._levels.pop(subject, None)
                return [v.version for v in versions]
            if not live:
                raise _Fail(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true "
                                        f"to delete permanently")
            for v in live:
                v.deleted = True
            return [v.version for v in live]

    def delete_version(self, subject: str, version: Any, permanent: bool = False) -> int:
        with self._lock:
            v = self._version(subject, version, deleted=True)
            if version in ("latest", "-1", -1):
                live = [x for x in self._subjects[subject] if not x.deleted]
                if not live:
                    raise _Fail(404, 40402, "Version latest not found.")
                v = live[-1]
            if permanent:
                if not v.deleted:
                    raise _Fail(404, 40407, f"Subject '{subject}' Version {v.version} was not "
                                            f"deleted first before being permanently deleted")
                self._subjects[subject].remove(v)
                if not self._subjects[subject]:
                    del self._subjects[subject]
                return v.version
            if v.deleted:
                raise _Fail(404, 40406, f"Subject '{subject}' Version {v.version} was soft "
                                        f"deleted.Set permanent=true to delete permanently")
            v.deleted = True
            return v.version

    def get_config(self, subject: Optional[str], default_to_global: bool = False) -> Dict[str, Any]:
        with self._lock:
            if subject is None:
                return {"compatibilityLevel": self._global_level}
            if subject in self._levels:
                return {"compatibilityLevel": self._levels[subject]}
            if default_to_global:
                return {"compatibilityLevel": self._global_level}
            raise _Fail(404, 40408, f"Subject '{subject}' does not have subject-level "
                                    f"compatibility configured")

    def set_config(self, subject: Optional[str], body: Any) -> Dict[str, Any]:
        level = body.get("compatibility") if isinstance(body, Mapping) else None
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise _Fail(422, 42203, "Invalid compatibility level. Valid values are none, backward, "
                                    "forward, full, backward_transitive, forward_transitive, and "
                                    "full_transitive")
        with self._lock:
            if subject is None:
                self._global_level = level.upper()
            else:
                self._levels[subject] = level.upper()
            return {"compatibility": level.upper()}

    def delete_config(self, subject: str) -> Dict[str, Any]:
        with self._lock:
            old = self._levels.pop(subject, None)
            if old is None:
                raise _Fail(404, 40401, f"Subject '{subject}' not found.")
            return {"compatibilityLevel": old}

    def test_compatibility(self, subject: str, version: Any, body: Any,
                           verbose: bool = False) -> Dict[str, Any]:
        with self._lock:
            text, schema_type, refs, parsed = self._parse(body)
            level = self.level(subject)
            if level.endswith("_TRANSITIVE") and version in ("latest", "-1", -1):
                against = self._live(subject)
            else:
                against = [self._version(subject, version, deleted=False)]
                level = level.replace("_TRANSITIVE", "")
            problems = self._incompatibilities(subject, (schema_type, parsed), against, level)
            answer: Dict[str, Any] = {"is_compatible": not problems}
            if verbose:
                answer["messages"] = problems
            return answer

    # -- REST ------------------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: Mapping[str, str], body: Any) -> Tuple[int, Any]:
        """The answer ``(status, JSON body)`` to a REST request; an error's body is
        ``{"error_code", "message"}``. ``path`` is percent-decoded per segment here."""
        try:
            return 200, self._route(method.upper(), path, query, body)
        except _Fail as f:
            return f.status, {"error_code": f.code, "message": f.message}

    def _route(self, method: str, path: str, query: Mapping[str, str], body: Any) -> Any:
        seg = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []

        def flag(name: str) -> bool:
            return str(query.get(name, "false")).lower() == "true"

        n = len(seg)
        if n >= 1 and seg[0] == "subjects":
            if n == 1 and method == "GET":
                return self.subjects(flag("deleted"))
            subject = seg[1] if n >= 2 else ""
            if n == 2 and method == "POST":
                return self.lookup(subject, body, flag("normalize"), flag("deleted"))
            if n == 2 and method == "DELETE":
                return self.delete_subject(subject, flag("permanent"))
            if n == 3 and seg[2] == "versions" and method == "GET":
                return self.versions(subject, flag("deleted"))
            if n == 3 and seg[2] == "versions" and method == "POST":
                return self.register(subject, body, flag("normalize"))
            if n in (4, 5) and seg[2] == "versions" and method == "GET":
                answer = self.get_version(subject, seg[3], flag("deleted"))
                if n == 5 and seg[4] == "schema":
                    return _Raw(answer["schema"])
                if n == 4:
                    return answer
            if n == 4 and seg[2] == "versions" and method == "DELETE":
                return self.delete_version(subject, seg[3], flag("permanent"))
        elif n >= 3 and seg[0] == "schemas" and seg[1] == "ids" and method == "GET":
            answer = self.schema_by_id(seg[2])
            if n == 3:
                return answer
            if n == 4 and seg[3] == "schema":
                return _Raw(answer["schema"])
        elif seg == ["schemas", "types"] and method == "GET":
            return list(TYPES)
        elif n in (1, 2) and seg[0] == "config":
            config_subject = seg[1] if n == 2 else None
            if method == "GET":
                return self.get_config(config_subject, flag("defaultToGlobal"))
            if method == "PUT":
                return self.set_config(config_subject, body)
            if method == "DELETE" and config_subject is not None:
                return self.delete_config(config_subject)
        elif n == 5 and seg[0] == "compatibility" and seg[1] == "subjects" and seg[3] == "versions" \
                and method == "POST":
            return self.test_compatibility(seg[2], seg[4], body, flag("verbose"))
        elif n == 0 and method == "GET":
            return {}
        raise _Fail(404, 404, f"HTTP 404 Not Found: {method} /{'/'.join(seg)}")


class _Raw(str):
    """An answer sent as the text itself (the ``.../schema`` paths answer with the bare schema)."""


# --------------------------------------------------------------------------------------------------
# The mock client
# --------------------------------------------------------------------------------------------------
_registries: Dict[str, RegistryState] = {}
_registries_lock = threading.Lock()


def _registry_for(scope: str) -> RegistryState:
    with _registries_lock:
        state = _registries.get(scope)
        if state is None:
            state = _registries[scope] = RegistryState()
        return state


def clear_mock_registries(scope: Optional[str] = None) -> None:
    """Forgets the in-process registry of ``scope`` (of every scope when None): the next client of
    it starts empty, ids from 1."""
    with _registries_lock:
        if scope is None:
            _registries.clear()
        else:
            _registries.pop(scope, None)


class MockSchemaRegistryClient(SchemaRegistryClient):
    """A :class:`SchemaRegistryClient` of the in-process registry of its ``mock://<scope>`` URL.
    ``SchemaRegistryClient({"url": "mock://scope"})`` gives one. The other configuration keys are
    checked as for a real registry and otherwise not used."""

    def __init__(self, conf: Mapping[str, Any]):
        super().__init__(conf)

    def _configure_transport(self, conf: Mapping[str, Any]) -> None:
        url = str(conf.get("url", "")).strip()
        if not url.lower().startswith("mock://"):
            raise ConfigError(f"MockSchemaRegistryClient: url must be mock://<scope>, got "
                              f"{url.split('@')[-1]!r}")
        scope = url[len("mock://"):].rstrip("/")
        self.scope = scope
        self._registry = _registry_for(scope)
        self._endpoints = [_Endpoint("mock", scope or "default", 0, "")]
        self._endpoints[0].shown = f"mock://{scope}"
        self._headers = {}
        self._ssl_context = None

    def _send_once(self, endpoint: _Endpoint, method: str, path: str, body: Optional[bytes],
                   timeout: float) -> Tuple[int, bytes]:
        parts = urlsplit(path)
        query = dict(parse_qsl(parts.query))
        status, answer = self._registry.handle(method, parts.path, query,
                                               json.loads(body) if body is not None else None)
        raw = answer if isinstance(answer, _Raw) else json.dumps(answer)
        return status, raw.encode("utf-8")
