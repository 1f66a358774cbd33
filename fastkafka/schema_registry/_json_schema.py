"""JSON Schema for the JSON serializer: parsing, the Arrow rules and a compiled per-record validator.

Four things, all pure Python and all done once per schema, never per record:

* :func:`parse_json_schema` reads a schema (text or dict) and refuses shapes that are not JSON Schema
  (a ``"type"`` that is no JSON type, a ``"required"`` that is not a list of strings, a pattern that
  does not compile, ...), naming the place in the schema as a JSON pointer. Drafts 4, 6, 7, 2019-09
  and 2020-12 are read, each with its own meaning of the keywords that changed between them
  (``exclusiveMaximum`` as a boolean or a number, ``items`` as a list or ``prefixItems``, ``$ref``
  beside other keywords). A schema without ``"$schema"`` is read as 2020-12, as the ``jsonschema``
  package (and with it confluent-kafka's serializer) does.
* :func:`json_schema_from_arrow` derives a schema from an Arrow type, following the JSON form the
  compiled JSON encoder writes for each Arrow type.
* :func:`check_arrow` checks an Arrow type against a schema before any row is encoded, naming the
  first field path that does not fit; :func:`has_value_constraints` says whether rows must also be
  validated one by one (the schema constrains values beyond what the Arrow type guarantees).
* :func:`compile_validator` turns a schema into nested closures that validate one JSON value
  (dicts, lists, ``str``, ``int``, ``float``, :class:`decimal.Decimal`, ``bool``, ``None``) and raise
  :class:`~fastkafka.schema_registry._errors.ValidationError` with the JSON path of the first
  violation. The value itself is never put whole into the message: scalars are shown shortened,
  objects and arrays by their size.

Formats: ``date``, ``date-time``, ``time``, ``uuid``, ``email``, ``ipv4`` and ``ipv6`` are checked;
every other format is an annotation, as the specification allows. Keywords that would change validity
but are not implemented (``$dynamicRef``, ``$recursiveRef``, ``unevaluatedProperties``,
``unevaluatedItems``, a ``$ref`` to another document) are refused with a :class:`SchemaError` when
the schema is compiled, never ignored.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import math
import operator
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from fastkafka.schema_registry._errors import SchemaError, SchemaMismatchError, ValidationError

__all__ = ["ParsedJsonSchema", "parse_json_schema", "json_schema_from_arrow", "check_arrow",
           "has_value_constraints", "compile_validator", "DRAFT_07", "CHECKED_FORMATS"]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

_DRAFTS = {
    "http://json-schema.org/draft-04/schema": 4,
    "http://json-schema.org/draft-06/schema": 6,
    "http://json-schema.org/draft-07/schema": 7,
    "https://json-schema.org/draft/2019-09/schema": 2019,
    "https://json-schema.org/draft/2020-12/schema": 2020,
    "http://json-schema.org/schema": 2020,
}
# The same drafts named with https, as schemas in the wild often do.
_DRAFTS.update({"https" + uri[4:]: d for uri, d in list(_DRAFTS.items()) if uri.startswith("http:")})
_DRAFT_NAMES = {4: "draft-04", 6: "draft-06", 7: "draft-07", 2019: "2019-09", 2020: "2020-12"}

_TYPES = frozenset(("null", "boolean", "object", "array", "number", "string", "integer"))

# Keywords that would change validity and that this module does not implement.
_UNSUPPORTED = {"$dynamicRef": 2020, "$recursiveRef": 2019, "unevaluatedProperties": 2019,
                "unevaluatedItems": 2019}

# The keywords a node of one scalar type may have and still be checked by one closure
# (:meth:`_Compiler.scalar`): the type's own keywords and annotations.
_SCALAR_KEYWORDS = frozenset((
    "type", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "title", "description", "default",
    "examples", "$comment", "contentEncoding", "contentMediaType", "readOnly", "writeOnly",
    "deprecated",
))

# Formats that are checked; any other format is an annotation.
CHECKED_FORMATS = frozenset(("date", "date-time", "time", "uuid", "email", "ipv4", "ipv6"))

SchemaLike = Union[str, bytes, dict, bool, "ParsedJsonSchema"]


class ParsedJsonSchema:
    """A JSON Schema that passed :func:`parse_json_schema`: the schema (a dict, or a bool for the
    drafts that allow it), its draft (4, 6, 7, 2019 or 2020) and its text (as given, or the dict
    dumped compactly)."""

    __slots__ = ("schema", "draft", "text", "_anchors", "_root_id")

    def __init__(self, schema: Any, draft: int, text: str, anchors: Dict[str, str],
                 root_id: Optional[str]):
        self.schema = schema
        self.draft = draft
        self.text = text
        self._anchors = anchors
        self._root_id = root_id

    @property
    def draft_name(self) -> str:
        return _DRAFT_NAMES[self.draft]

    def resolve(self, ref: str, where: str) -> Tuple[Any, str]:
        """The subschema a ``$ref`` points at and its JSON pointer; SchemaError for a reference to
        another document or to nothing."""
        target = ref
        if self._root_id and ref.startswith(self._root_id.split("#", 1)[0]) and "#" in ref:
            target = "#" + ref.split("#", 1)[1]
        elif self._root_id and ref == self._root_id.split("#", 1)[0]:
            target = "#"
        if not target.startswith("#"):
            raise SchemaError(f"JSON Schema at {where!r}: $ref {ref!r} points to another document; "
                              f"only references inside the schema (#/...) are supported")
        fragment = _unquote(target[1:])
        if fragment and not fragment.startswith("/"):
            pointer = self._anchors.get(fragment)
            if pointer is None:
                raise SchemaError(f"JSON Schema at {where!r}: $ref {ref!r} names no anchor of the schema")
            return self._at(pointer, ref, where), pointer
        return self._at(fragment, ref, where), "#" + fragment

    def _at(self, pointer: str, ref: str, where: str) -> Any:
        node = self.schema
        if pointer in ("", "#"):
            return node
        for raw in pointer.lstrip("#").split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"JSON Schema at {where!r}: $ref {ref!r} points to nothing")
        return node

    def __repr__(self) -> str:
        return f"ParsedJsonSchema({_DRAFT_NAMES[self.draft]}, {len(self.text)} chars)"


def _unquote(text: str) -> str:
    if "%" not in text:
        return text
    from urllib.parse import unquote
    return unquote(text)


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------

def parse_json_schema(schema: SchemaLike) -> ParsedJsonSchema:
    """Read a JSON Schema given as text or as an already decoded dict (or bool).

    Raises :class:`SchemaError` for text that is not JSON, a ``$schema`` that is not one of the
    drafts read here, or a keyword whose value has a shape JSON Schema does not allow; the message
    names the place as a JSON pointer (``#/properties/zip/pattern``)."""
    if isinstance(schema, ParsedJsonSchema):
        return schema
    if isinstance(schema, (bytes, bytearray)):
        schema = bytes(schema).decode("utf-8", "replace")
    if isinstance(schema, str):
        text = schema
        try:
            doc = json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"JSON Schema is not valid JSON: {exc}") from None
    elif isinstance(schema, (dict, bool)):
        doc = schema
        try:
            text = json.dumps(schema, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"JSON Schema holds a value JSON cannot write: {exc}") from None
    else:
        raise SchemaError(f"a JSON Schema is a str or a dict, not {type(schema).__name__}")
    if not isinstance(doc, (dict, bool)):
        raise SchemaError(f"a JSON Schema is a JSON object (or a boolean), not {_json_type_name(doc)}")
    draft = 2020
    if isinstance(doc, dict) and "$schema" in doc:
        uri = doc["$schema"]
        if not isinstance(uri, str) or uri.rstrip("#") not in _DRAFTS:
            raise SchemaError(f"JSON Schema's $schema {uri!r} is not a draft read here "
                              f"(draft-04, draft-06, draft-07, 2019-09, 2020-12)")
        draft = _DRAFTS[uri.rstrip("#")]
    if isinstance(doc, bool) and draft == 4:
        raise SchemaError("JSON Schema draft-04 does not allow a boolean schema")
    anchors: Dict[str, str] = {}
    _check_node(doc, "#", draft, anchors)
    root_id = None
    if isinstance(doc, dict):
        rid = doc.get("id" if draft == 4 else "$id")
        root_id = rid if isinstance(rid, str) and not rid.startswith("#") else None
    return ParsedJsonSchema(doc, draft, text, anchors, root_id)


def _bad(where: str, keyword: str, what: str) -> SchemaError:
    return SchemaError(f"JSON Schema at '{where}/{keyword}': {what}")


def _is_count(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v >= 0
    return isinstance(v, float) and v.is_integer() and v >= 0


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_node(node: Any, where: str, draft: int, anchors: Dict[str, str]) -> None:
    if isinstance(node, bool):
        if draft == 4:
            raise SchemaError(f"JSON Schema at '{where}': draft-04 does not allow a boolean schema")
        return
    if not isinstance(node, dict):
        raise SchemaError(f"JSON Schema at '{where}': a schema is an object"
                          f"{'' if draft == 4 else ' or a boolean'}, not {_json_type_name(node)}")
    for kw, since in _UNSUPPORTED.items():
        if kw in node and draft >= since:
            raise SchemaError(f"JSON Schema at '{where}': keyword {kw!r} is not supported")
    if "type" in node:
        t = node["type"]
        names = t if isinstance(t, list) else [t]
        if not names and isinstance(t, list):
            raise _bad(where, "type", "an empty list of types")
        for name in names:
            if not isinstance(name, str) or name not in _TYPES:
                raise _bad(where, "type", f"{name!r} is not a JSON Schema type "
                                          f"(one of {', '.join(sorted(_TYPES))})")
        if len(set(names)) != len(names):
            raise _bad(where, "type", "a type is listed twice")
    if "required" in node:
        r = node["required"]
        if not isinstance(r, list) or not all(isinstance(x, str) for x in r):
            raise _bad(where, "required", "must be a list of strings")
    if "enum" in node and not isinstance(node["enum"], list):
        raise _bad(where, "enum", "must be a list")
    for kw in ("minimum", "maximum", "multipleOf"):
        if kw in node and not _is_num(node[kw]):
            raise _bad(where, kw, f"must be a number, not {node[kw]!r}")
    if "multipleOf" in node and node["multipleOf"] <= 0:
        raise _bad(where, "multipleOf", "must be greater than 0")
    for kw in ("exclusiveMinimum", "exclusiveMaximum"):
        if kw in node:
            v = node[kw]
            if draft == 4 and not isinstance(v, bool):
                raise _bad(where, kw, "must be a boolean in draft-04")
            if draft != 4 and not _is_num(v):
                raise _bad(where, kw, f"must be a number (draft-06 and later), not {v!r}")
    for kw in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
               "minContains", "maxContains"):
        if kw in node and not _is_count(node[kw]):
            raise _bad(where, kw, f"must be a non-negative integer, not {node[kw]!r}")
    if "uniqueItems" in node and not isinstance(node["uniqueItems"], bool):
        raise _bad(where, "uniqueItems", "must be a boolean")
    if "format" in node and not isinstance(node["format"], str):
        raise _bad(where, "format", "must be a string")
    if "pattern" in node:
        _compile_pattern(node["pattern"], f"{where}/pattern")
    if "$ref" in node and not isinstance(node["$ref"], str):
        raise _bad(where, "$ref", "must be a string")
    id_kw = "id" if draft == 4 else "$id"
    if isinstance(node.get(id_kw), str) and node[id_kw].startswith("#") and draft <= 7:
        anchors[node[id_kw][1:]] = where[1:]
    if draft >= 2019 and "$anchor" in node:
        if not isinstance(node["$anchor"], str):
            raise _bad(where, "$anchor", "must be a string")
        anchors[node["$anchor"]] = where[1:]
    # Subschemas.
    for kw in ("additionalProperties", "additionalItems", "not", "contains", "propertyNames",
               "if", "then", "else", "items"):
        if kw in node:
            v = node[kw]
            if kw == "items" and isinstance(v, list):
                if draft == 2020:
                    raise _bad(where, "items", "a list of schemas is 'prefixItems' in 2020-12")
                for i, sub in enumerate(v):
                    _check_node(sub, f"{where}/items/{i}", draft, anchors)
            elif isinstance(v, bool) and kw in ("additionalProperties", "additionalItems"):
                continue
            else:
                _check_node(v, f"{where}/{kw}", draft, anchors)
    for kw in ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas"):
        if kw in node:
            v = node[kw]
            if not isinstance(v, dict):
                raise _bad(where, kw, "must be an object of schemas")
            for name, sub in v.items():
                if kw == "patternProperties":
                    _compile_pattern(name, f"{where}/patternProperties")
                _check_node(sub, f"{where}/{kw}/{_escape_pointer(name)}", draft, anchors)
    for kw in ("allOf", "anyOf", "oneOf", "prefixItems"):
        if kw in node:
            v = node[kw]
            if not isinstance(v, list) or not v:
                raise _bad(where, kw, "must be a non-empty list of schemas")
            for i, sub in enumerate(v):
                _check_node(sub, f"{where}/{kw}/{i}", draft, anchors)
    if "dependencies" in node:
        v = node["dependencies"]
        if not isinstance(v, dict):
            raise _bad(where, "dependencies", "must be an object")
        for name, dep in v.items():
            if isinstance(dep, list):
                if not all(isinstance(x, str) for x in dep):
                    raise _bad(where, f"dependencies/{_escape_pointer(name)}", "must be a list of strings")
            else:
                _check_node(dep, f"{where}/dependencies/{_escape_pointer(name)}", draft, anchors)
    if "dependentRequired" in node:
        v = node["dependentRequired"]
        if not isinstance(v, dict) or not all(
                isinstance(d, list) and all(isinstance(x, str) for x in d) for d in v.values()):
            raise _bad(where, "dependentRequired", "must be an object of lists of strings")


def _escape_pointer(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _compile_pattern(pattern: Any, where: str) -> "re.Pattern[str]":
    if not isinstance(pattern, str):
        raise SchemaError(f"JSON Schema at '{where}': a pattern must be a string, not {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise SchemaError(f"JSON Schema at '{where}': pattern {pattern!r} is not a valid "
                          f"regular expression ({exc})") from None


# --------------------------------------------------------------------------------------------------
# Values: JSON types, equality, display
# --------------------------------------------------------------------------------------------------

def _json_type_name(x: Any) -> str:
    if x is None:
        return "null"
    if x is True or x is False:
        return "boolean"
    if isinstance(x, str):
        return "string"
    if isinstance(x, (int, float, Decimal)):
        return "number"
    if isinstance(x, (list, tuple)):
        return "array"
    if isinstance(x, dict):
        return "object"
    return type(x).__name__


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, Decimal)) and not isinstance(x, bool)


def _is_integer(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    if isinstance(x, float):
        return x.is_integer()
    if isinstance(x, Decimal):
        return x.is_finite() and x == x.to_integral_value()
    return False


_TYPE_TESTS: Dict[str, Callable[[Any], bool]] = {
    "null": lambda x: x is None,
    "boolean": lambda x: x is True or x is False,
    "string": lambda x: isinstance(x, str),
    "integer": _is_integer,
    "number": _is_number,
    "array": lambda x: isinstance(x, (list, tuple)),
    "object": lambda x: isinstance(x, dict),
}


def _key(x: Any) -> Any:
    """A hashable key equal for JSON-equal values (1 == 1.0, but True != 1)."""
    if x is True or x is False:
        return ("b", x)
    if x is None:
        return ("z",)
    if isinstance(x, str):
        return ("s", x)
    if isinstance(x, (int, float, Decimal)):
        return ("n", x)
    if isinstance(x, (list, tuple)):
        return ("l", tuple(_key(v) for v in x))
    if isinstance(x, dict):
        return ("d", frozenset((k, _key(v)) for k, v in x.items()))
    return ("?", id(x))


def _show(x: Any) -> str:
    """A value for a message: scalars shortened, objects and arrays by their size only."""
    if isinstance(x, dict):
        return f"an object of {len(x)} properties"
    if isinstance(x, (list, tuple)):
        return f"an array of {len(x)} items"
    if x is None or x is True or x is False:
        return json.dumps(x)
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _path_text(parts: List[Any]) -> str:
    out = ["$"]
    for p in reversed(parts):
        if isinstance(p, int):
            out.append(f"[{p}]")
        elif p.isidentifier():
            out.append("." + p)
        else:
            out.append("[" + json.dumps(p) + "]")
    return "".join(out)


class _Fail(Exception):
    """A violation on its way up: the message and the path, innermost part first."""

    __slots__ = ("msg", "path")

    def __init__(self, msg: str):
        self.msg = msg
        self.path: List[Any] = []


# --------------------------------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------------------------------

_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}\Z", re.ASCII)
_TIME_RE = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$", re.ASCII)
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _is_date(s: str) -> bool:
    if _DATE_RE.match(s) is None:
        return False
    try:
        _fromisoformat(s)
    except ValueError:
        return False
    return True


_fromisoformat = datetime.date.fromisoformat


def _is_time(s: str) -> bool:
    m = _TIME_RE.match(s)
    if not m:
        return False
    if int(m[1]) > 23 or int(m[2]) > 59 or int(m[3]) > 60:
        return False
    return m[6] is None or (int(m[6]) <= 23 and int(m[7]) <= 59)


def _is_date_time(s: str) -> bool:
    if len(s) < 11 or s[10] not in "Tt":
        return False
    return _is_date(s[:10]) and _is_time(s[11:])


def _is_ip(kind: Callable[[str], Any]) -> Callable[[str], bool]:
    def test(s: str) -> bool:
        try:
            kind(s)
        except ValueError:
            return False
        return True
    return test


_FORMATS: Dict[str, Callable[[str], bool]] = {
    "date": _is_date,
    "time": _is_time,
    "date-time": _is_date_time,
    "uuid": lambda s: _UUID_RE.match(s) is not None,
    "email": lambda s: "@" in s,
    "ipv4": _is_ip(ipaddress.IPv4Address),
    "ipv6": _is_ip(ipaddress.IPv6Address),
}


# --------------------------------------------------------------------------------------------------
# The compiled validator
# --------------------------------------------------------------------------------------------------

Check = Callable[[Any], None]


def _ok(x: Any) -> None:
    return None


def compile_validator(schema: SchemaLike, check_formats: bool = True) -> Callable[[Any], None]:
    """Compile a schema into a function ``validate(value) -> None``.

    ``check_formats`` False makes every ``"format"`` an annotation, as confluent-kafka's
    JSONSerializer treats them (it validates without a format checker); True checks the formats
    listed in :data:`CHECKED_FORMATS`.

    The schema is walked once, here; the returned function runs nested closures and raises
    :class:`ValidationError` naming the JSON path of the first violation, e.g.
    ``$.address.zip: 'abc' does not match pattern '^[0-9]{5}$'``. A keyword that would change
    validity but is not supported raises :class:`SchemaError` here."""
    parsed = parse_json_schema(schema)
    root = _Compiler(parsed, check_formats).compile_root()

    def validate(value: Any) -> None:
        try:
            root(value)
        except _Fail as f:
            raise ValidationError(f"{_path_text(f.path)}: {f.msg}") from None
        except RecursionError:
            raise ValidationError("$: the value is nested too deeply to validate") from None

    validate.__doc__ = f"Validate one value against a {parsed.draft_name} JSON Schema."
    return validate


class _Compiler:
    def __init__(self, parsed: ParsedJsonSchema, check_formats: bool):
        self.parsed = parsed
        self.draft = parsed.draft
        self.formats = _FORMATS if check_formats else {}
        self.table: Dict[str, Check] = {}

    def compile_root(self) -> Check:
        return self.node(self.parsed.schema, "#")

    def ref(self, ref: str, where: str) -> Check:
        target, pointer = self.parsed.resolve(ref, where)
        if pointer not in self.table:
            self.table[pointer] = _ok  # placeholder while compiling a recursive schema
            self.table[pointer] = self.node(target, pointer)
        table = self.table

        def check_ref(x: Any) -> None:
            table[pointer](x)
        return check_ref

    def node(self, node: Any, where: str) -> Check:
        if node is True or node == {}:
            return _ok
        if node is False:
            def never(x: Any) -> None:
                raise _Fail("no value is allowed here (the schema is false)")
            return never
        if node.keys() <= _SCALAR_KEYWORDS:
            t = node.get("type")
            if t in ("string", "integer", "number"):
                return self.scalar(node, where, t, False)
            if isinstance(t, list) and len(t) == 2 and "null" in t:
                kind = t[0] if t[1] == "null" else t[1]
                if kind in ("string", "integer", "number"):
                    return self.scalar(node, where, kind, True)
        draft = self.draft
        checks: List[Check] = []
        if "$ref" in node:
            checks.append(self.ref(node["$ref"], f"{where}/$ref"))
            if draft <= 7:
                return checks[0]
        if "type" in node:
            checks.insert(0, _type_check(node["type"]))
        checks.extend(self.numbers(node))
        checks.extend(self.strings(node, where))
        if "enum" in node:
            checks.append(_enum_check(node["enum"]))
        if "const" in node and draft >= 6:
            checks.append(_const_check(node["const"]))
        arr = self.arrays(node, where)
        if arr is not None:
            checks.append(arr)
        obj = self.objects(node, where)
        if obj is not None:
            checks.append(obj)
        checks.extend(self.combinators(node, where))
        if not checks:
            return _ok
        if len(checks) == 1:
            return checks[0]
        if len(checks) == 2:
            a, b = checks

            def two(x: Any) -> None:
                a(x)
                b(x)
            return two
        seq = tuple(checks)

        def all_checks(x: Any) -> None:
            for c in seq:
                c(x)
        return all_checks

    # -- one closure for the common scalar node -------------------------------------------------
    def scalar(self, node: dict, where: str, kind: str, nullable: bool) -> Check:
        """A node of one scalar type ("string", "integer" or "number", or it or null) and only the
        keywords of that type: one closure that checks the type and every keyword, the commonest
        node of a record's schema (one call per value instead of one per keyword)."""
        type_check = _type_check(node["type"])
        if kind == "string":
            min_n = int(node["minLength"]) if "minLength" in node else None
            max_n = int(node["maxLength"]) if "maxLength" in node else None
            search = _compile_pattern(node["pattern"], f"{where}/pattern").search \
                if "pattern" in node else None
            pat = node.get("pattern")
            fmt = node.get("format")
            fmt_test = self.formats.get(fmt) if isinstance(fmt, str) else None
            if min_n is None and max_n is None and search is None and fmt_test is None:
                return type_check

            def string_node(x: Any) -> None:
                if type(x) is not str:
                    type_check(x)  # raises, unless a subclass of str (or null, if allowed)
                    if x is None:
                        return
                if min_n is not None and len(x) < min_n:
                    raise _Fail(f"{_show(x)} is shorter than {min_n} characters")
                if max_n is not None and len(x) > max_n:
                    raise _Fail(f"{_show(x)} is longer than {max_n} characters")
                if search is not None and search(x) is None:
                    raise _Fail(f"{_show(x)} does not match pattern {pat!r}")
                if fmt_test is not None and not fmt_test(x):
                    raise _Fail(f"{_show(x)} is not a valid {fmt!r}")
            return string_node
        checks = tuple(self.numbers(node))
        if not checks:
            return type_check
        first = checks[0] if len(checks) == 1 else None

        def number_node(x: Any) -> None:
            tx = type(x)
            if tx is not int and (tx is not float or kind == "integer"):
                type_check(x)  # raises, unless an integral float, a Decimal, a subclass or null
                if x is None:
                    return
            if first is not None:
                first(x)
            else:
                for c in checks:
                    c(x)
        return number_node

    # -- numbers --------------------------------------------------------------------------------
    def numbers(self, node: dict) -> List[Check]:
        out: List[Check] = []
        bounds = []  # (limit, exclusive, is_min)
        if self.draft == 4:
            if "minimum" in node:
                bounds.append((node["minimum"], bool(node.get("exclusiveMinimum")), True))
            if "maximum" in node:
                bounds.append((node["maximum"], bool(node.get("exclusiveMaximum")), False))
        else:
            for kw, excl, is_min in (("minimum", False, True), ("maximum", False, False),
                                     ("exclusiveMinimum", True, True), ("exclusiveMaximum", True, False)):
                if kw in node:
                    bounds.append((node[kw], excl, is_min))
        for limit, excl, is_min in bounds:
            out.append(_bound_check(limit, excl, is_min))
        if "multipleOf" in node:
            out.append(_multiple_check(node["multipleOf"]))
        return out

    # -- strings --------------------------------------------------------------------------------
    def strings(self, node: dict, where: str) -> List[Check]:
        out: List[Check] = []
        if "minLength" in node:
            n = int(node["minLength"])

            def min_len(x: Any) -> None:
                if isinstance(x, str) and len(x) < n:
                    raise _Fail(f"{_show(x)} is shorter than {n} characters")
            out.append(min_len)
        if "maxLength" in node:
            m = int(node["maxLength"])

            def max_len(x: Any) -> None:
                if isinstance(x, str) and len(x) > m:
                    raise _Fail(f"{_show(x)} is longer than {m} characters")
            out.append(max_len)
        if "pattern" in node:
            rx = _compile_pattern(node["pattern"], f"{where}/pattern")
            search = rx.search
            pat = node["pattern"]

            def pattern(x: Any) -> None:
                if isinstance(x, str) and search(x) is None:
                    raise _Fail(f"{_show(x)} does not match pattern {pat!r}")
            out.append(pattern)
        fmt = node.get("format")
        if fmt in self.formats:
            test = self.formats[fmt]

            def format_check(x: Any) -> None:
                if isinstance(x, str) and not test(x):
                    raise _Fail(f"{_show(x)} is not a valid {fmt!r}")
            out.append(format_check)
        return out

    # -- arrays ---------------------------------------------------------------------------------
    def arrays(self, node: dict, where: str) -> Optional[Check]:
        draft = self.draft
        prefix: Tuple[Check, ...] = ()
        rest: Optional[Check] = None  # schema for items after the prefix
        items = node.get("items")
        if draft == 2020:
            if "prefixItems" in node:
                prefix = tuple(self.node(s, f"{where}/prefixItems/{i}")
                               for i, s in enumerate(node["prefixItems"]))
            if "items" in node:
                rest = self.node(items, f"{where}/items")
        elif isinstance(items, list):
            prefix = tuple(self.node(s, f"{where}/items/{i}") for i, s in enumerate(items))
            if "additionalItems" in node:
                ai = node["additionalItems"]
                rest = self.node(ai, f"{where}/additionalItems") if ai is not True else None
        elif "items" in node:
            rest = self.node(items, f"{where}/items")
        if rest is _ok:
            rest = None
        min_items = int(node["minItems"]) if "minItems" in node else None
        max_items = int(node["maxItems"]) if "maxItems" in node else None
        unique = bool(node.get("uniqueItems"))
        contains = None
        min_c, max_c = 1, None
        if "contains" in node and draft >= 6:
            contains = self.node(node["contains"], f"{where}/contains")
            if draft >= 2019:
                min_c = int(node.get("minContains", 1))
                max_c = int(node["maxContains"]) if "maxContains" in node else None
        if not prefix and rest is None and min_items is None and max_items is None \
                and not unique and contains is None:
            return None
        n_prefix = len(prefix)

        def check_array(x: Any) -> None:
            if not isinstance(x, (list, tuple)):
                return
            n = len(x)
            if min_items is not None and n < min_items:
                raise _Fail(f"{_show(x)} has fewer than {min_items} items")
            if max_items is not None and n > max_items:
                raise _Fail(f"{_show(x)} has more than {max_items} items")
            i = 0
            try:
                if n_prefix:
                    for i in range(min(n, n_prefix)):
                        prefix[i](x[i])
                if rest is not None:
                    i = n_prefix
                    for v in (x[n_prefix:] if n_prefix else x):
                        rest(v)
                        i += 1
            except _Fail as f:
                f.path.append(i)
                raise
            if unique and n > 1:
                seen = set()
                for i, v in enumerate(x):
                    k = _key(v)
                    if k in seen:
                        raise _Fail(f"{_show(x)} has non-unique items (item {i} repeats an earlier one)")
                    seen.add(k)
            if contains is not None:
                found = 0
                for v in x:
                    try:
                        contains(v)
                    except _Fail:
                        continue
                    found += 1
                if found < min_c:
                    raise _Fail(f"{_show(x)} contains {found} items valid under 'contains', "
                                f"fewer than {min_c}")
                if max_c is not None and found > max_c:
                    raise _Fail(f"{_show(x)} contains {found} items valid under 'contains', "
                                f"more than {max_c}")
        return check_array

    # -- objects --------------------------------------------------------------------------------
    def objects(self, node: dict, where: str) -> Optional[Check]:
        draft = self.draft
        props = {name: self.node(sub, f"{where}/properties/{_escape_pointer(name)}")
                 for name, sub in node.get("properties", {}).items()}
        patterns = tuple((_compile_pattern(p, f"{where}/patternProperties").search,
                          self.node(sub, f"{where}/patternProperties/{_escape_pointer(p)}"))
                         for p, sub in node.get("patternProperties", {}).items())
        additional: Optional[Check] = None
        closed = False
        if "additionalProperties" in node:
            ap = node["additionalProperties"]
            if ap is False:
                closed = True
            elif ap is not True:
                additional = self.node(ap, f"{where}/additionalProperties")
                if additional is _ok:
                    additional = None
        required = tuple(node.get("required", ()))
        required_set = frozenset(required)
        min_p = int(node["minProperties"]) if "minProperties" in node else None
        max_p = int(node["maxProperties"]) if "maxProperties" in node else None
        names: Optional[Check] = None
        if "propertyNames" in node and draft >= 6:
            names = self.node(node["propertyNames"], f"{where}/propertyNames")
        dep_required: List[Tuple[str, Tuple[str, ...]]] = []
        dep_schemas: List[Tuple[str, Check]] = []
        if "dependencies" in node and draft <= 7:
            for name, dep in node["dependencies"].items():
                if isinstance(dep, list):
                    dep_required.append((name, tuple(dep)))
                else:
                    dep_schemas.append((name, self.node(dep, f"{where}/dependencies/{name}")))
        if draft >= 2019:
            for name, dep in node.get("dependentRequired", {}).items():
                dep_required.append((name, tuple(dep)))
            for name, dep in node.get("dependentSchemas", {}).items():
                dep_schemas.append((name, self.node(dep, f"{where}/dependentSchemas/{name}")))
        if not props and not patterns and additional is None and not closed and not required \
                and min_p is None and max_p is None and names is None and not dep_required \
                and not dep_schemas:
            return None
        # Only properties with a real check are looked up per value; every declared property
        # still counts as "in properties" for additionalProperties.
        subs_get = {k: f for k, f in props.items() if f is not _ok}.get
        prop_keys = frozenset(props)
        has_tail = names is not None or bool(dep_required) or bool(dep_schemas)

        def first_extra(x: dict) -> str:
            for k in x:
                if k not in prop_keys:
                    return k
            return ""  # not reached: called only when there is one

        def check_object(x: Any) -> None:
            if not isinstance(x, dict):
                return
            if required and not required_set <= x.keys():
                for name in required:
                    if name not in x:
                        raise _Fail(f"required property {name!r} is missing")
            if min_p is not None and len(x) < min_p:
                raise _Fail(f"{_show(x)} has fewer than {min_p} properties")
            if max_p is not None and len(x) > max_p:
                raise _Fail(f"{_show(x)} has more than {max_p} properties")
            key = None
            try:
                if not patterns:
                    if closed and not x.keys() <= prop_keys:
                        raise _Fail(f"additional property {_show(first_extra(x))} is not allowed")
                    if additional is None:
                        for key, v in x.items():
                            sub = subs_get(key)
                            if sub is not None:
                                sub(v)
                    else:
                        for key, v in x.items():
                            sub = subs_get(key)
                            if sub is not None:
                                sub(v)
                            elif key not in prop_keys:
                                additional(v)
                else:
                    for key, v in x.items():
                        sub = subs_get(key)
                        if sub is not None:
                            sub(v)
                        matched = key in prop_keys
                        for search, psub in patterns:
                            if search(key) is not None:
                                matched = True
                                psub(v)
                        if not matched:
                            if closed:
                                extra, key = key, None
                                raise _Fail(f"additional property {_show(extra)} is not allowed")
                            if additional is not None:
                                additional(v)
            except _Fail as f:
                if key is not None:
                    f.path.append(key)
                raise
            if has_tail:
                tail(x)

        def tail(x: dict) -> None:
            if names is not None:
                for k in x:
                    try:
                        names(k)
                    except _Fail as f:
                        raise _Fail(f"property name {_show(k)} is not valid: {f.msg}") from None
            for name, deps in dep_required:
                if name in x:
                    for d in deps:
                        if d not in x:
                            raise _Fail(f"property {d!r} is required when {name!r} is present")
            for name, dsub in dep_schemas:
                if name in x:
                    dsub(x)
        return check_object

    # -- combinators ----------------------------------------------------------------------------
    def combinators(self, node: dict, where: str) -> List[Check]:
        out: List[Check] = []
        if "allOf" in node:
            subs = tuple(self.node(s, f"{where}/allOf/{i}") for i, s in enumerate(node["allOf"]))

            def all_of(x: Any) -> None:
                for s in subs:
                    s(x)
            out.append(all_of)
        if "anyOf" in node:
            any_subs = tuple(self.node(s, f"{where}/anyOf/{i}") for i, s in enumerate(node["anyOf"]))

            def any_of(x: Any) -> None:
                for s in any_subs:
                    try:
                        s(x)
                        return
                    except _Fail:
                        pass
                raise _Fail(f"{_show(x)} is not valid under any of the schemas of 'anyOf'")
            out.append(any_of)
        if "oneOf" in node:
            one_subs = tuple(self.node(s, f"{where}/oneOf/{i}") for i, s in enumerate(node["oneOf"]))

            def one_of(x: Any) -> None:
                first = -1
                for i, s in enumerate(one_subs):
                    try:
                        s(x)
                    except _Fail:
                        continue
                    if first >= 0:
                        raise _Fail(f"{_show(x)} is valid under more than one schema of 'oneOf' "
                                    f"({first} and {i})")
                    first = i
                if first < 0:
                    raise _Fail(f"{_show(x)} is not valid under any of the schemas of 'oneOf'")
            out.append(one_of)
        if "not" in node:
            neg = self.node(node["not"], f"{where}/not")

            def not_(x: Any) -> None:
                try:
                    neg(x)
                except _Fail:
                    return
                raise _Fail(f"{_show(x)} is valid under the schema of 'not'")
            out.append(not_)
        if "if" in node and self.draft >= 7 and ("then" in node or "else" in node):
            cond = self.node(node["if"], f"{where}/if")
            then = self.node(node["then"], f"{where}/then") if "then" in node else _ok
            else_ = self.node(node["else"], f"{where}/else") if "else" in node else _ok

            def if_then_else(x: Any) -> None:
                try:
                    cond(x)
                except _Fail:
                    else_(x)
                    return
                then(x)
            out.append(if_then_else)
        return out


# The exact Python types that are certainly of a JSON type: checked first, by one set look-up.
_EXACT_TYPES: Dict[str, Tuple[type, ...]] = {
    "null": (type(None),), "boolean": (bool,), "string": (str,), "integer": (int,),
    "number": (int, float, Decimal), "array": (list, tuple), "object": (dict,),
}


def _type_check(t: Union[str, List[str]]) -> Check:
    names = [t] if isinstance(t, str) else list(t)
    if "integer" in names and "number" in names:
        names.remove("integer")
    label = names[0] if len(names) == 1 else names
    exact = frozenset(tp for n in names for tp in _EXACT_TYPES[n])
    tests = tuple(_TYPE_TESTS[n] for n in names)

    def is_type(x: Any) -> None:
        if type(x) in exact:
            return
        for test in tests:  # subclasses, and floats or Decimals that are integers
            if test(x):
                return
        raise _Fail(f"{_show(x)} is not of type {label!r}")
    return is_type


def _bound_check(limit: Any, exclusive: bool, is_min: bool) -> Check:
    word = ("greater than" if is_min else "less than") + ("" if exclusive else " or equal to")
    lim = limit
    op = (operator.gt if exclusive else operator.ge) if is_min else \
        (operator.lt if exclusive else operator.le)

    def bound(x: Any) -> None:
        tx = type(x)
        if tx is not int and tx is not float and not _is_number(x):
            return
        try:
            if op(x, lim):
                return
        except (TypeError, ArithmeticError):  # a Decimal NaN
            pass
        raise _Fail(f"{_show(x)} is not {word} {lim!r}")
    return bound


def _multiple_check(m: Any) -> Check:
    """multipleOf on the numbers as JSON writes them: 0.07 is a multiple of 0.01 (in binary floating
    point 0.07 / 0.01 is 7.000000000000001, which the ``jsonschema`` package reports as a violation).
    Exact integer arithmetic for integers; floats are compared through their shortest decimal text."""
    m_frac = Fraction(Decimal(repr(m))) if isinstance(m, float) else Fraction(m)

    def multiple(x: Any) -> None:
        if not _is_number(x):
            return
        if type(x) is int and type(m) is int:
            bad = x % m != 0
        else:
            try:
                if isinstance(x, float):
                    q = x / m
                    if math.isfinite(q) and int(q) == q:
                        return
                    xd = Decimal(repr(x))
                else:
                    xd = Decimal(x)
                bad = not xd.is_finite() or (Fraction(xd) / m_frac).denominator != 1
            except (ArithmeticError, ValueError, OverflowError):
                bad = True
        if bad:
            raise _Fail(f"{_show(x)} is not a multiple of {m!r}")
    return multiple


def _enum_check(values: List[Any]) -> Check:
    keys = frozenset(_key(v) for v in values)
    if all(isinstance(v, str) for v in values):
        strs = frozenset(values)

        def enum_str(x: Any) -> None:
            if not (isinstance(x, str) and x in strs):
                raise _Fail(f"{_show(x)} is not one of the enum's {len(strs)} values")
        return enum_str

    def enum(x: Any) -> None:
        if _key(x) not in keys:
            raise _Fail(f"{_show(x)} is not one of the enum's {len(values)} values")
    return enum


def _const_check(value: Any) -> Check:
    k = _key(value)

    def const(x: Any) -> None:
        if _key(x) != k:
            raise _Fail(f"{_show(x)} is not the constant {_show(value)}")
    return const


# --------------------------------------------------------------------------------------------------
# Arrow
# --------------------------------------------------------------------------------------------------

def _pa() -> Any:
    import pyarrow as pa
    return pa


def json_schema_from_arrow(arrow_type_or_schema: Any, title: Optional[str] = None) -> dict:
    """Derive a draft-07 JSON Schema from an Arrow type (or a ``pyarrow.Schema``), one that every
    value the JSON encoder writes for that type validates against.

    Structs (and a ``pyarrow.Schema``) become objects with ``"properties"`` in field order,
    ``"required"`` listing the non-nullable fields and ``"additionalProperties": false``: a closed
    content model, so that adding an optional field later is a backward-compatible change under the
    Schema Registry's JSON Schema compatibility rules (with an open model it is not). A nullable
    field's type is ``[T, "null"]``; maps become objects whose ``"additionalProperties"`` is the
    value's schema. Raises :class:`SchemaMismatchError` for an Arrow type that has no JSON form."""
    pa = _pa()
    if isinstance(arrow_type_or_schema, pa.Schema):
        body = _struct_schema(list(arrow_type_or_schema), "$")
    elif isinstance(arrow_type_or_schema, pa.DataType):
        body = _arrow_to_schema(arrow_type_or_schema, "$")
    else:
        raise SchemaMismatchError(f"a pyarrow DataType or Schema is needed to derive a JSON Schema, "
                                  f"not {type(arrow_type_or_schema).__name__}")
    out: Dict[str, Any] = {"$schema": DRAFT_07}
    if title is not None:
        out["title"] = title
    out.update(body)
    return out


def _child_path(path: str, name: str) -> str:
    return f"{path}.{name}" if name.isidentifier() else f"{path}[{json.dumps(name)}]"


def _nullable(schema: dict, nullable: bool) -> dict:
    if not nullable:
        return schema
    t = schema.get("type")
    if isinstance(t, str):
        return {**schema, "type": [t, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _struct_schema(fields: List[Any], path: str) -> dict:
    props = {}
    required = []
    for f in fields:
        props[f.name] = _nullable(_arrow_to_schema(f.type, _child_path(path, f.name)), f.nullable)
        if not f.nullable:
            required.append(f.name)
    out: Dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _arrow_to_schema(t: Any, path: str) -> dict:
    pa = _pa()
    types = pa.types
    if types.is_boolean(t):
        return {"type": "boolean"}
    if types.is_integer(t):
        return {"type": "integer"}
    if types.is_floating(t) or types.is_decimal(t):
        return {"type": "number"}
    if types.is_string(t) or types.is_large_string(t) or _is_string_view(t):
        return {"type": "string"}
    if types.is_dictionary(t):
        if _is_stringish(t.value_type):
            return {"type": "string"}
    elif types.is_binary(t) or types.is_large_binary(t) or types.is_fixed_size_binary(t):
        return {"type": "string", "contentEncoding": "base64"}
    elif types.is_date32(t):
        return {"type": "string", "format": "date"}
    elif types.is_timestamp(t):
        return {"type": "string", "format": "date-time"}
    elif types.is_struct(t):
        return _struct_schema([t.field(i) for i in range(t.num_fields)], path)
    elif types.is_map(t):
        if not _is_stringish(t.key_type):
            raise SchemaMismatchError(f"{path}: an Arrow {t} has no JSON form (JSON object keys are "
                                      f"strings; the map's keys are {t.key_type})")
        return {"type": "object",
                "additionalProperties": _nullable(_arrow_to_schema(t.item_type, path + ".*"),
                                                  t.item_field.nullable)}
    elif types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return {"type": "array",
                "items": _nullable(_arrow_to_schema(t.value_type, path + "[*]"), t.value_field.nullable)}
    elif types.is_null(t):
        return {"type": "null"}
    raise SchemaMismatchError(f"{path}: Arrow type {t} has no JSON form for the JSON serializer")


def _is_string_view(t: Any) -> bool:
    pa = _pa()
    is_view = getattr(pa.types, "is_string_view", None)
    return bool(is_view and is_view(t))


def _is_stringish(t: Any) -> bool:
    types = _pa().types
    return types.is_string(t) or types.is_large_string(t) or _is_string_view(t)


def _arrow_json_type(t: Any, path: str) -> Tuple[str, Optional[str]]:
    """The JSON type the encoder writes for an Arrow type, and the format it guarantees."""
    schema = _arrow_to_schema(t, path) if not _is_container(t) else None
    if schema is None:
        types = _pa().types
        if types.is_struct(t) or types.is_map(t):
            return "object", None
        return "array", None
    return schema["type"], schema.get("format")


def _is_container(t: Any) -> bool:
    types = _pa().types
    return (types.is_struct(t) or types.is_map(t) or types.is_list(t) or types.is_large_list(t)
            or types.is_fixed_size_list(t))


def check_arrow(schema: SchemaLike, arrow_type: Any) -> None:
    """Check that every row of an Arrow type (a struct type, any other type, or a
    ``pyarrow.Schema``) is written by the JSON encoder as a value of the schema's types and shape.

    Raises :class:`SchemaMismatchError` naming the first field path that does not fit, its Arrow
    type and what the schema expects: a nullable field into a property that does not allow null, an
    Arrow type whose JSON type the schema does not allow, a required property the Arrow struct
    lacks, an Arrow field the schema does not allow (``additionalProperties: false``). Constraints
    on values (patterns, bounds, enums, ...) are not checked here: see :func:`has_value_constraints`.
    A null row is a tombstone, never encoded, so the top level is not required to allow null."""
    _ArrowWalk(parse_json_schema(schema)).top(arrow_type)


def has_value_constraints(schema: SchemaLike, arrow_type: Any = None,
                          check_formats: bool = True) -> bool:
    """Whether values must be validated one by one: the schema has keywords that constrain values
    beyond their JSON type and shape (bounds, multipleOf, lengths, pattern, a checked format, enum,
    const, item and property counts, uniqueItems, dependencies, if/then/else, not, oneOf beyond
    "T or null", patternProperties, propertyNames, ...).

    Given the Arrow type the data has, only the parts of the schema that data reaches count, and what
    the Arrow type guarantees does not: ``"format": "date"`` on an Arrow date32, ``"date-time"`` on a
    timestamp, an integer bound an Arrow integer type cannot exceed is still counted (bounds are
    always checked). Without it, every subschema reachable from the root counts. With
    ``check_formats`` False (as for :func:`compile_validator`) formats never count."""
    parsed = parse_json_schema(schema)
    if arrow_type is not None:
        walk = _ArrowWalk(parsed, check_formats)
        walk.top(arrow_type)
        return walk.constrained
    return _scan_constraints(parsed, check_formats)


_VALUE_KEYWORDS = frozenset((
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
    "maxLength", "pattern", "enum", "const", "minItems", "maxItems", "uniqueItems", "contains",
    "minProperties", "maxProperties", "dependencies", "dependentRequired", "dependentSchemas",
    "if", "not", "patternProperties", "propertyNames",
))


def _node_constraints(node: dict, draft: int, arrow_format: Optional[str] = None,
                      check_formats: bool = True) -> bool:
    """Whether one schema node (without its subschemas) constrains values beyond type and shape."""
    if "$ref" in node and draft <= 7:
        return False
    for kw in _VALUE_KEYWORDS:
        if kw in node:
            if kw == "uniqueItems" and node[kw] is False:
                continue
            if kw == "if" and not ("then" in node or "else" in node):
                continue
            if kw in ("const", "contains", "propertyNames") and draft < 6:
                continue
            return True
    fmt = node.get("format")
    if check_formats and fmt in _FORMATS and fmt != arrow_format:
        return True
    if "oneOf" in node and not _is_null_or_t(node["oneOf"]):
        return True
    return False


def _is_null_or_t(branches: List[Any]) -> bool:
    """oneOf/anyOf of exactly one schema and {"type": "null"}: the nullable-T shape."""
    if len(branches) == 1:
        return True
    if len(branches) != 2:
        return False
    nulls = [b for b in branches if isinstance(b, dict) and b.get("type") == "null"
             and len(b) == 1]
    return len(nulls) == 1 and not _allows_null(branches[0] if branches[1] in nulls else branches[1])


def _allows_null(node: Any) -> bool:
    if node is True or node == {}:
        return True
    if not isinstance(node, dict):
        return False
    t = node.get("type")
    return t is None or t == "null" or (isinstance(t, list) and "null" in t)


def _scan_constraints(parsed: ParsedJsonSchema, check_formats: bool) -> bool:
    seen = set()
    stack = [(parsed.schema, "#")]
    while stack:
        node, where = stack.pop()
        if node is False:
            return True
        if not isinstance(node, dict):
            continue
        if _node_constraints(node, parsed.draft, None, check_formats):
            return True
        if "$ref" in node:
            target, pointer = parsed.resolve(node["$ref"], where)
            if pointer not in seen:
                seen.add(pointer)
                stack.append((target, pointer))
            if parsed.draft <= 7:
                continue
        if node.get("additionalProperties") is False and "properties" not in node:
            return True
        for kw in ("additionalProperties", "additionalItems", "items", "not", "contains",
                   "propertyNames", "if", "then", "else"):
            v = node.get(kw)
            if isinstance(v, list):
                stack.extend((s, f"{where}/{kw}") for s in v)
            elif v is not None and not isinstance(v, bool):
                stack.append((v, f"{where}/{kw}"))
            elif v is False and kw in ("items", "additionalItems"):
                return True
        for kw in ("properties", "patternProperties", "dependentSchemas"):
            stack.extend((s, f"{where}/{kw}") for s in node.get(kw, {}).values())
        for kw in ("allOf", "anyOf", "oneOf", "prefixItems"):
            stack.extend((s, f"{where}/{kw}") for s in node.get(kw, ()))
    return False


def _describe(node: Any) -> str:
    if isinstance(node, dict) and "type" in node:
        return f"JSON Schema type {node['type']!r}"
    return "its JSON Schema"


class _ArrowWalk:
    """Walks an Arrow type and a schema side by side: mismatches raise, and whether any reached
    part of the schema constrains values is collected in :attr:`constrained`."""

    def __init__(self, parsed: ParsedJsonSchema, check_formats: bool = True):
        self.parsed = parsed
        self.draft = parsed.draft
        self.check_formats = check_formats
        self.constrained = False
        self.active: set = set()

    def top(self, arrow_type: Any) -> None:
        pa = _pa()
        if isinstance(arrow_type, pa.Schema):
            arrow_type = pa.struct(list(arrow_type))
        elif isinstance(arrow_type, pa.Field):
            arrow_type = arrow_type.type
        elif not isinstance(arrow_type, pa.DataType):
            raise SchemaMismatchError(f"a pyarrow DataType or Schema is needed, not "
                                      f"{type(arrow_type).__name__}")
        self.check(self.parsed.schema, "#", arrow_type, False, "$")

    def fail(self, path: str, t: Any, nullable: bool, node: Any, why: str) -> SchemaMismatchError:
        null = " (nullable)" if nullable else ""
        return SchemaMismatchError(f"{path}: Arrow {t}{null} does not fit {_describe(node)}: {why}")

    def fits(self, node: Any, where: str, t: Any, nullable: bool, path: str) -> bool:
        try:
            self.check(node, where, t, nullable, path)
        except SchemaMismatchError:
            return False
        return True

    def check(self, node: Any, where: str, t: Any, nullable: bool, path: str) -> None:
        if node is True:
            return
        if node is False:
            raise self.fail(path, t, nullable, node, "the schema allows no value here")
        if "$ref" in node:
            target, pointer = self.parsed.resolve(node["$ref"], f"{where}/$ref")
            key = (pointer, str(t), nullable)
            if key not in self.active:  # a recursive schema meets a finite Arrow type
                self.active.add(key)
                try:
                    self.check(target, pointer, t, nullable, path)
                finally:
                    self.active.discard(key)
            if self.draft <= 7:
                return
        json_type, fmt = _arrow_json_type(t, path)
        if _node_constraints(node, self.draft, fmt, self.check_formats):
            self.constrained = True
        if "type" in node:
            allowed = node["type"] if isinstance(node["type"], list) else [node["type"]]
            if nullable and "null" not in allowed:
                raise self.fail(path, t, nullable, node, "the schema does not allow null")
            if json_type not in allowed and not (json_type == "integer" and "number" in allowed):
                if json_type == "number" and "integer" in allowed and _pa().types.is_decimal(t):
                    if t.scale > 0:
                        self.constrained = True  # 1.50 is not an integer, 1.00 is: per row
                elif not (json_type == "null" and nullable):
                    raise self.fail(path, t, nullable, node,
                                    f"it is written as a JSON {json_type}")
        for kw, i, sub in _subs(node, "allOf"):
            self.check(sub, f"{where}/allOf/{i}", t, nullable, path)
        for kw in ("anyOf", "oneOf"):
            if kw in node:
                branches = node[kw]
                where_kw = f"{where}/{kw}"
                if nullable and not any(self.allows_null(b, f"{where_kw}/{i}")
                                        for i, b in enumerate(branches)):
                    raise self.fail(path, t, nullable, node, f"no schema of '{kw}' allows null")
                fitting = [i for i, b in enumerate(branches)
                           if self.fits(b, f"{where_kw}/{i}", t, False, path)]
                if not fitting:
                    # Name the first branch that is not just {"type": "null"} for the error.
                    for i, b in enumerate(branches):
                        if not (isinstance(b, dict) and b.get("type") == "null"):
                            self.check(b, f"{where_kw}/{i}", t, False, path)
                    raise self.fail(path, t, nullable, node, f"no schema of '{kw}' fits")
                if len(fitting) > 1 or kw == "oneOf" and not _is_null_or_t(branches):
                    self.constrained = True
        if json_type == "object":
            self.object(node, where, t, path)
        elif json_type == "array":
            self.array(node, where, t, path)

    def allows_null(self, node: Any, where: str, depth: int = 0) -> bool:
        """Whether a schema's type allows null, through ``$ref`` chains."""
        if isinstance(node, dict) and "$ref" in node and depth < 32:
            target, pointer = self.parsed.resolve(node["$ref"], f"{where}/$ref")
            if not self.allows_null(target, pointer, depth + 1):
                return False
            if self.draft <= 7:
                return True
        return _allows_null(node)

    def object(self, node: dict, where: str, t: Any, path: str) -> None:
        types = _pa().types
        props = node.get("properties", {})
        ap = node.get("additionalProperties", True)
        patterns = node.get("patternProperties", {})
        if types.is_map(t):
            if not _is_stringish(t.key_type):
                raise SchemaMismatchError(f"{path}: Arrow {t} has no JSON form (map keys are "
                                          f"{t.key_type}, JSON object keys are strings)")
            if props or ap is False or node.get("required") or patterns:
                self.constrained = True  # which keys a map has is known only per row
            vpath = path + ".*"
            vnull = t.item_field.nullable
            for name, sub in props.items():
                self.check(sub, f"{where}/properties/{_escape_pointer(name)}", t.item_type, vnull, vpath)
            for p, sub in patterns.items():
                self.check(sub, f"{where}/patternProperties/{_escape_pointer(p)}", t.item_type,
                           vnull, vpath)
            if isinstance(ap, dict):
                self.check(ap, f"{where}/additionalProperties", t.item_type, vnull, vpath)
            return
        fields = [t.field(i) for i in range(t.num_fields)]
        names = {f.name for f in fields}
        for name in node.get("required", ()):
            if name not in names:
                raise SchemaMismatchError(f"{_child_path(path, name)}: required property {name!r} "
                                          f"is missing from the Arrow struct ({t})")
        compiled = [(re.compile(p), p, sub) for p, sub in patterns.items()]
        for f in fields:
            fpath = _child_path(path, f.name)
            matched = False
            if f.name in props:
                matched = True
                self.check(props[f.name], f"{where}/properties/{_escape_pointer(f.name)}",
                           f.type, f.nullable, fpath)
            for rx, p, sub in compiled:
                if rx.search(f.name):
                    matched = True
                    self.check(sub, f"{where}/patternProperties/{_escape_pointer(p)}",
                               f.type, f.nullable, fpath)
            if not matched:
                if ap is False:
                    raise SchemaMismatchError(f"{fpath}: Arrow field {f.name!r} ({f.type}) is not "
                                              f"in the schema's properties, and "
                                              f"additionalProperties is false")
                if isinstance(ap, dict):
                    self.check(ap, f"{where}/additionalProperties", f.type, f.nullable, fpath)
        for name, dep in (node.get("dependencies", {}) if self.draft <= 7 else {}).items():
            if name in names and isinstance(dep, list):
                for d in dep:
                    if d not in names:
                        raise SchemaMismatchError(f"{_child_path(path, d)}: property {d!r} is "
                                                  f"required when {name!r} is present, and the "
                                                  f"Arrow struct lacks it")

    def array(self, node: dict, where: str, t: Any, path: str) -> None:
        vt, vnull = t.value_type, t.value_field.nullable
        ipath = path + "[*]"
        items = node.get("items")
        if self.draft == 2020:
            prefix = node.get("prefixItems", [])
            rest = items
            rest_kw = "items"
        elif isinstance(items, list):
            prefix, rest, rest_kw = items, node.get("additionalItems"), "additionalItems"
        else:
            prefix, rest, rest_kw = [], items, "items"
        if prefix:
            self.constrained = True  # which position an item has is known only per row
            for i, sub in enumerate(prefix):
                self.check(sub, f"{where}/{'prefixItems' if self.draft == 2020 else 'items'}/{i}",
                           vt, vnull, f"{path}[{i}]")
        if rest is False:
            self.constrained = True
        elif isinstance(rest, dict):
            self.check(rest, f"{where}/{rest_kw}", vt, vnull, ipath)


def _subs(node: dict, kw: str):
    for i, sub in enumerate(node.get(kw, ())):
        yield kw, i, sub
