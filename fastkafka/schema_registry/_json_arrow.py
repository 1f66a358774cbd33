"""JSON Schema for the JSON serializer: the Arrow rules.

* :func:`json_schema_from_arrow` derives a schema from an Arrow type, following the JSON form the
  compiled JSON encoder writes for each Arrow type.
* :func:`check_arrow` checks an Arrow type against a schema before any row is encoded, naming the
  first field path that does not fit; :func:`has_value_constraints` says whether rows must also be
  validated one by one (the schema constrains values beyond what the Arrow type guarantees).
"""


from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from fastkafka.schema_registry._errors import SchemaMismatchError


from ._json_schema import DRAFT_07, ParsedJsonSchema, SchemaLike, _escape_pointer, parse_json_schema
from ._json_validate import _FORMATS, Check, compile_validator

__all__ = ['json_schema_from_arrow', 'check_arrow', 'has_value_constraints']

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
