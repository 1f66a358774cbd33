"""Avro schemas: parsing and validation, the Parsing Canonical Form, and the rules between Arrow
types and Avro types (a schema derived from an Arrow type; an Arrow type checked against a schema).

The compiled encoders (``_encode.pyx``) take a :class:`ParsedAvro`: a tree of :class:`AvroNode`
whose named types are resolved once here, so that no name is looked up while encoding.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional, Union

from fastkafka.schema_registry._errors import SchemaError, SchemaMismatchError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# logical type -> the Avro types it may annotate (an annotation on another type is ignored, as the
# specification says, and the value is encoded as the underlying type)
LOGICAL_BASES = {
    "decimal": ("bytes", "fixed"),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
}


class AvroField:
    """A field of a record: its name, type, default (``has_default`` tells a null default from
    none) and the dotted path from the root record (for messages)."""

    __slots__ = ("name", "type", "default", "has_default", "path")

    def __init__(self, name: str, type: "AvroNode", default: Any, has_default: bool, path: str):
        self.name = name
        self.type = type
        self.default = default
        self.has_default = has_default
        self.path = path

    def __repr__(self) -> str:
        return f"AvroField({self.name!r}, {self.type!r})"


class AvroNode:
    """One Avro type. ``kind`` is a primitive name or record/enum/array/map/union/fixed; a named
    type is one node, shared by every reference to it (a recursive record is a cycle)."""

    __slots__ = ("kind", "name", "fields", "items", "values", "branches", "symbols", "size",
                 "logical", "precision", "scale", "default", "path")

    def __init__(self, kind: str, path: str = ""):
        self.kind = kind
        self.path = path
        self.name: Optional[str] = None          # full name of a record, enum or fixed
        self.fields: list[AvroField] = []
        self.items: Optional[AvroNode] = None
        self.values: Optional[AvroNode] = None
        self.branches: list[AvroNode] = []
        self.symbols: list[str] = []
        self.size = 0
        self.logical: Optional[str] = None
        self.precision = 0
        self.scale = 0
        self.default: Any = None               # an enum's default symbol

    def type_name(self) -> str:
        """A short description for messages: ``int``, ``record com.x.User``, ``["null", "string"]``."""
        if self.kind == "union":
            return "[" + ", ".join(b.type_name() for b in self.branches) + "]"
        base = self.kind if self.name is None else f"{self.kind} {self.name}"
        if self.kind == "array" and self.items is not None:
            base = f"array<{self.items.type_name()}>"
        elif self.kind == "map" and self.values is not None:
            base = f"map<{self.values.type_name()}>"
        if self.logical == "decimal":
            return f"{base} (decimal({self.precision}, {self.scale}))"
        if self.logical:
            return f"{base} ({self.logical})"
        return base

    def __repr__(self) -> str:
        return f"AvroNode({self.type_name()})"


class ParsedAvro:
    """A validated Avro schema: ``root`` (an :class:`AvroNode`), ``schema`` (the JSON value it
    was parsed from), ``named`` (full name -> node) and ``canonical`` (its Parsing Canonical
    Form)."""

    __slots__ = ("root", "schema", "named", "_canonical")

    def __init__(self, root: AvroNode, schema: Any, named: dict[str, AvroNode]):
        self.root = root
        self.schema = schema
        self.named = named
        self._canonical: Optional[str] = None

    @property
    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = _canonical_of(self.root)
        return self._canonical

    def __repr__(self) -> str:
        return f"ParsedAvro({self.root.type_name()})"


def _full_name(name: Any, namespace: Optional[str], where: str) -> tuple[str, Optional[str]]:
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{where}: a named type needs a non-empty string 'name', got {name!r}")
    if "." in name:
        full = name
        ns: Optional[str] = name.rsplit(".", 1)[0]
    else:
        full = f"{namespace}.{name}" if namespace else name
        ns = namespace
    for part in full.split("."):
        if not _NAME.match(part):
            raise SchemaError(f"{where}: invalid name {name!r} (each part of a name matches "
                              f"[A-Za-z_][A-Za-z0-9_]*)")
    return full, ns


class _Parser:
    def __init__(self) -> None:
        self.named: dict[str, AvroNode] = {}

    def where(self, path: str) -> str:
        return f"field {path!r}" if path else "schema"

    def parse(self, s: Any, namespace: Optional[str], path: str) -> AvroNode:
        if isinstance(s, str):
            if s in PRIMITIVES:
                return AvroNode(s, path)
            for cand in ((f"{namespace}.{s}" if namespace and "." not in s else s), s):
                if cand in self.named:
                    return self.named[cand]
            raise SchemaError(f"{self.where(path)}: unknown type {s!r}")
        if isinstance(s, list):
            node = AvroNode("union", path)
            seen = set()
            for i, b in enumerate(s):
                if isinstance(b, list):
                    raise SchemaError(f"{self.where(path)}: a union may not contain a union "
                                      f"(branch {i})")
                child = self.parse(b, namespace, path)
                if child.kind == "union":
                    raise SchemaError(f"{self.where(path)}: a union may not contain a union")
                key = child.name if child.name is not None else child.kind
                if key in seen:
                    raise SchemaError(f"{self.where(path)}: the union has {key!r} twice")
                seen.add(key)
                node.branches.append(child)
            if not node.branches:
                raise SchemaError(f"{self.where(path)}: an empty union")
            return node
        if not isinstance(s, dict):
            raise SchemaError(f"{self.where(path)}: a schema is a string, an object or an array, "
                              f"not {type(s).__name__}")
        t = s.get("type")
        if t is None:
            raise SchemaError(f"{self.where(path)}: an object schema without 'type'")
        if isinstance(t, (dict, list)):
            # {"type": {...}} or {"type": [...]}: the inner schema (other attributes, such as a
            # doc, change nothing in the encoding)
            return self.parse(t, namespace, path)
        if t in PRIMITIVES:
            node = AvroNode(t, path)
        elif t == "record" or t == "error":
            node = self._record(s, namespace, path)
        elif t == "enum":
            node = self._enum(s, namespace, path)
        elif t == "fixed":
            node = self._fixed(s, namespace, path)
        elif t == "array":
            if "items" not in s:
                raise SchemaError(f"{self.where(path)}: an array without 'items'")
            node = AvroNode("array", path)
            node.items = self.parse(s["items"], namespace, path + "[]")
        elif t == "map":
            if "values" not in s:
                raise SchemaError(f"{self.where(path)}: a map without 'values'")
            node = AvroNode("map", path)
            node.values = self.parse(s["values"], namespace, path + "{}")
        elif isinstance(t, str):
            # {"type": "com.x.Named"}: a reference, possibly with a logical type around it
            node = self.parse(t, namespace, path)
            return node
        else:
            raise SchemaError(f"{self.where(path)}: unknown type {t!r}")
        self._logical(node, s, path)
        return node

    def _logical(self, node: AvroNode, s: dict, path: str) -> None:
        lt = s.get("logicalType")
        if lt is None:
            return
        if lt not in LOGICAL_BASES or node.kind not in LOGICAL_BASES[lt]:
            return                               # unknown or misplaced: ignored (the spec's rule)
        if lt == "decimal":
            p, sc = s.get("precision"), s.get("scale", 0)
            if (not isinstance(p, int) or isinstance(p, bool) or p <= 0 or not isinstance(sc, int)
                    or isinstance(sc, bool) or sc < 0 or sc > p):
                raise SchemaError(f"{self.where(path)}: decimal needs an integer precision > 0 "
                                  f"and 0 <= scale <= precision, got precision={p!r} scale={sc!r}")
            if node.kind == "fixed" and p > int((8 * node.size - 1) * 0.30102999566398120):
                raise SchemaError(f"{self.where(path)}: decimal precision {p} does not fit a "
                                  f"fixed of {node.size} bytes")
            node.precision, node.scale = p, sc
        if lt == "uuid" and node.kind == "fixed" and node.size != 16:
            return
        node.logical = lt

    def _register(self, node: AvroNode, s: dict, namespace: Optional[str], path: str) -> Optional[str]:
        ns_in = s.get("namespace", namespace)
        if ns_in == "":
            ns_in = None
        full, ns = _full_name(s.get("name"), ns_in, self.where(path))
        if full in self.named:
            raise SchemaError(f"{self.where(path)}: the name {full!r} is defined twice")
        if full.rsplit(".", 1)[-1] in PRIMITIVES:
            raise SchemaError(f"{self.where(path)}: a primitive type's name {full!r} cannot name a type")
        node.name = full
        self.named[full] = node
        return ns

    def _record(self, s: dict, namespace: Optional[str], path: str) -> AvroNode:
        node = AvroNode("record", path)
        ns = self._register(node, s, namespace, path)
        fields = s.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"{self.where(path)}: record {node.name!r} needs a list 'fields'")
        names = set()
        for f in fields:
            if not isinstance(f, dict):
                raise SchemaError(f"{self.where(path)}: a field of record {node.name!r} is not an object")
            fname = f.get("name")
            fpath = f"{path}.{fname}" if path else str(fname)
            if not isinstance(fname, str) or not _NAME.match(fname):
                raise SchemaError(f"field {fpath!r}: invalid field name {fname!r}")
            if fname in names:
                raise SchemaError(f"field {fpath!r}: record {node.name!r} has the field twice")
            names.add(fname)
            if "type" not in f:
                raise SchemaError(f"field {fpath!r}: a field without 'type'")
            ftype = self.parse(f["type"], ns, fpath)
            has_default = "default" in f
            default = f.get("default")
            if has_default:
                _check_default(ftype, default, fpath)
            node.fields.append(AvroField(fname, ftype, default, has_default, fpath))
        return node

    def _enum(self, s: dict, namespace: Optional[str], path: str) -> AvroNode:
        node = AvroNode("enum", path)
        self._register(node, s, namespace, path)
        symbols = s.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(x, str) and _NAME.match(x) for x in symbols):
            raise SchemaError(f"{self.where(path)}: enum {node.name!r} needs 'symbols', a list of names")
        if len(set(symbols)) != len(symbols):
            raise SchemaError(f"{self.where(path)}: enum {node.name!r} has a symbol twice")
        node.symbols = list(symbols)
        if "default" in s:
            if s["default"] not in symbols:
                raise SchemaError(f"{self.where(path)}: enum {node.name!r} default "
                                  f"{s['default']!r} is not one of its symbols")
            node.default = s["default"]
        return node

    def _fixed(self, s: dict, namespace: Optional[str], path: str) -> AvroNode:
        node = AvroNode("fixed", path)
        self._register(node, s, namespace, path)
        size = s.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise SchemaError(f"{self.where(path)}: fixed {node.name!r} needs a 'size' >= 0, got {size!r}")
        node.size = size
        return node


def _check_default(t: AvroNode, d: Any, path: str) -> None:
    """A default must be a value of the field's type (of a union's first branch)."""
    k = t.kind
    if k == "union":
        _check_default(t.branches[0], d, path)
        return
    ok = True
    if k == "null":
        ok = d is None
    elif k == "boolean":
        ok = isinstance(d, bool)
    elif k in ("int", "long"):
        ok = isinstance(d, int) and not isinstance(d, bool)
    elif k in ("float", "double"):
        ok = isinstance(d, (int, float)) and not isinstance(d, bool)
    elif k in ("bytes", "string", "fixed"):
        ok = isinstance(d, str)
    elif k == "enum":
        ok = d in t.symbols
    elif k == "array":
        ok = isinstance(d, list)
    elif k in ("map", "record"):
        ok = isinstance(d, dict)
    if not ok:
        raise SchemaError(f"field {path!r}: default {json.dumps(d)[:40]} is not a value of "
                          f"type {t.type_name()}")


def parse_avro_schema(schema: Union[str, bytes, dict[str, Any], list[Any], "ParsedAvro"]) -> ParsedAvro:
    """Parse and validate an Avro schema (JSON text, or its parsed value); named types (records,
    enums, fixed) are resolved, with namespaces, and may be referred to after their definition.
    Raises :class:`SchemaError` naming the place."""
    if isinstance(schema, ParsedAvro):
        return schema
    if isinstance(schema, (bytes, bytearray)):
        schema = schema.decode()
    if isinstance(schema, str):
        text = schema.strip()
        if text in PRIMITIVES:
            value: Any = text
        else:
            try:
                value = json.loads(text)
            except ValueError as e:
                raise SchemaError(f"schema: not JSON ({e})") from None
    else:
        value = schema
    p = _Parser()
    root = p.parse(value, None, "")
    return ParsedAvro(root, value, p.named)


def _canonical_of(root: AvroNode) -> str:
    done: set = set()

    def c(n: AvroNode) -> str:
        k = n.kind
        if k in PRIMITIVES:
            return json.dumps(k)
        if k == "union":
            return "[" + ",".join(c(b) for b in n.branches) + "]"
        if k == "array":
            return '{"type":"array","items":' + c(n.items) + "}"   # type: ignore[arg-type]
        if k == "map":
            return '{"type":"map","values":' + c(n.values) + "}"   # type: ignore[arg-type]
        if n.name in done:
            return json.dumps(n.name)
        done.add(n.name)
        head = '{"name":' + json.dumps(n.name) + ',"type":"' + k + '"'
        if k == "record":
            fs = ",".join('{"name":' + json.dumps(f.name) + ',"type":' + c(f.type) + "}" for f in n.fields)
            return head + ',"fields":[' + fs + "]}"
        if k == "enum":
            return head + ',"symbols":[' + ",".join(json.dumps(s) for s in n.symbols) + "]}"
        return head + ',"size":' + str(n.size) + "}"

    return c(root)


def canonical_avro(schema: Union[str, bytes, dict[str, Any], list[Any], ParsedAvro]) -> str:
    """Avro's Parsing Canonical Form of ``schema``: full names, only the attributes that matter
    to the binary encoding, in the specification's order, no whitespace."""
    return parse_avro_schema(schema).canonical


# ---------------------------------------------------------------------------------------------
# Arrow -> Avro

def _pa():
    import pyarrow as pa
    return pa


def avro_schema_from_arrow(arrow_type_or_schema: Any, name: str = "Record",
                           namespace: Optional[str] = None) -> Any:
    """An Avro schema (its JSON value: a dict for an Arrow schema or struct type, a str or dict
    for another Arrow type) derived from ``arrow_type_or_schema``.

    Rules: a nullable field -> ``["null", T]`` with ``"default": null``; int8/16/32, uint8/16 ->
    int; int64, uint32 -> long; uint64 refused (no Avro type holds it); float16/float32 -> float;
    float64 -> double; bool -> boolean; string, large_string, string_view and dictionary<string>
    -> string; binary/large_binary -> bytes; fixed_size_binary(n) -> fixed (named after the
    field path); list/large_list/fixed_size_list -> array; map<string, T> -> map; struct ->
    record (named after the field path); decimal128/256(p, s) -> bytes with the decimal logical
    type; date32/date64 -> int (date); timestamp(s, ms) -> long (timestamp-millis), timestamp(us,
    ns) -> long (timestamp-micros: nanoseconds are floored to microseconds when encoded); the
    uuid extension type -> string (uuid), another extension type -> its storage type's;
    time32 -> int (time-millis); time64 -> long (time-micros). A timestamp's time zone is not
    kept: the values are UTC instants.
    """
    pa = _pa()
    used: set = set()

    def rec_name(path: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", path) or name
        if not re.match(r"[A-Za-z_]", base):
            base = "_" + base
        cand, i = base, 2
        while cand in used:
            cand, i = f"{base}_{i}", i + 1
        used.add(cand)
        return cand

    def conv(t: Any, path: str) -> Any:
        types = pa.types
        if isinstance(t, pa.BaseExtensionType):
            if t.extension_name == "arrow.uuid":
                return {"type": "string", "logicalType": "uuid"}
            return conv(t.storage_type, path)
        if types.is_dictionary(t):
            vt = t.value_type
            if types.is_string(vt) or types.is_large_string(vt):
                return "string"
            return conv(vt, path)
        if types.is_boolean(t):
            return "boolean"
        if types.is_int8(t) or types.is_int16(t) or types.is_int32(t) or types.is_uint8(t) or types.is_uint16(t):
            return "int"
        if types.is_int64(t) or types.is_uint32(t):
            return "long"
        if types.is_uint64(t):
            raise SchemaMismatchError(f"field {path or '<root>'!r}: Arrow type uint64 has no Avro "
                                      f"type (long is signed 64-bit); cast it to int64")
        if types.is_float16(t) or types.is_float32(t):
            return "float"
        if types.is_float64(t):
            return "double"
        if types.is_string(t) or types.is_large_string(t) or str(t) == "string_view":
            return "string"
        if types.is_binary(t) or types.is_large_binary(t) or str(t) == "binary_view":
            return "bytes"
        if types.is_fixed_size_binary(t) and not types.is_decimal(t):
            return {"type": "fixed", "name": rec_name(path or name), "size": t.byte_width}
        if types.is_decimal(t):
            return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
        if types.is_date(t):
            return {"type": "int", "logicalType": "date"}
        if types.is_timestamp(t):
            lt = "timestamp-millis" if t.unit in ("s", "ms") else "timestamp-micros"
            return {"type": "long", "logicalType": lt}
        if types.is_time32(t):
            return {"type": "int", "logicalType": "time-millis"}
        if types.is_time64(t):
            return {"type": "long", "logicalType": "time-micros"}
        if types.is_map(t):
            kt = t.key_type
            if not (types.is_string(kt) or types.is_large_string(kt)):
                raise SchemaMismatchError(f"field {path or '<root>'!r}: Arrow map key type {kt} "
                                          f"has no Avro form (map keys are strings)")
            return {"type": "map", "values": nullable(t.item_field, path + "{}")}
        if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
            return {"type": "array", "items": nullable(t.value_field, path + "[]")}
        if types.is_struct(t):
            rname = name if not path else rec_name(path)
            if not path:
                used.add(name)
            fields = []
            for f in t:
                fp = f"{path}.{f.name}" if path else f.name
                ft = nullable(f, fp)
                entry: dict = {"name": f.name, "type": ft}
                if isinstance(ft, list):
                    entry["default"] = None
                fields.append(entry)
            out: dict = {"type": "record", "name": rname, "fields": fields}
            if not path:
                if namespace:
                    out["namespace"] = namespace
            return out
        if types.is_null(t):
            return "null"
        raise SchemaMismatchError(f"field {path or '<root>'!r}: Arrow type {t} has no Avro form")

    def nullable(f: Any, path: str) -> Any:
        inner = conv(f.type, path)
        if f.nullable and inner != "null":
            return ["null", inner]
        return inner

    t = arrow_type_or_schema
    if isinstance(t, pa.Schema):
        t = pa.struct(list(t))
    return conv(t, "")
