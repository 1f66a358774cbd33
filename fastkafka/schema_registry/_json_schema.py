"""JSON Schema for the JSON serializer: reading a schema.

:func:`parse_json_schema` reads a schema (text or dict) and refuses shapes that are not JSON Schema
(a ``"type"`` that is no JSON type, a ``"required"`` that is not a list of strings, a pattern that
does not compile, ...), naming the place in the schema as a JSON pointer. Drafts 4, 6, 7, 2019-09
and 2020-12 are read, each with its own meaning of the keywords that changed between them
(``exclusiveMaximum`` as a boolean or a number, ``items`` as a list or ``prefixItems``, ``$ref``
beside other keywords). A schema without ``"$schema"`` is read as 2020-12, as the ``jsonschema``
package (and with it confluent-kafka's serializer) does. Keywords that would change validity but
are not implemented (``$dynamicRef``, ``$recursiveRef``, ``unevaluatedProperties``,
``unevaluatedItems``, a ``$ref`` to another document) are refused with a :class:`SchemaError`,
never ignored.

The validator is in ``_json_validate`` and the Arrow rules in ``_json_arrow``; all is done once per
schema, never per record.
"""


from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any, Dict, Optional, Tuple, Union

from fastkafka.schema_registry._errors import SchemaError


__all__ = ['ParsedJsonSchema', 'parse_json_schema', 'DRAFT_07', 'CHECKED_FORMATS']


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
