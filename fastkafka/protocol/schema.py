"""The vocabulary the message definitions in :mod:`fastkafka.protocol.messages` are written in.

A message is a list of :class:`Field`; the generic codec (:mod:`fastkafka.protocol.codec`) compiles a
(message, version) pair into encode/decode closures once and caches them.

Field types (``Field.type``):

* fixed width: ``int8 int16 int32 int64 uint16 bool float64 uuid``
* variable width integers: ``varint`` (zigzag int32), ``varlong`` (zigzag int64), ``uvarint``
* ``string`` (int16 length, or uvarint(len+1) in flexible versions; ``nullable`` allows ``None``)
* ``bytes`` (int32 length, or uvarint(len+1) in flexible versions)
* ``records``: like nullable ``bytes`` but the value (``bytes``, ``memoryview`` or a list/tuple of
  buffers) is passed to the output by reference, never copied
* ``struct``: a nested structure (``fields=``), value is a ``dict``
* ``[]T``: an array of ``T`` (a primitive type name above, or ``struct`` with ``fields=``); value is a
  ``list``; compact (uvarint(n+1)) in flexible versions; ``nullable`` allows ``None``

Versions are written like the Kafka JSON schemas: ``"3+"``, ``"0-12"``, ``"8"``, ``"none"``.
A field with ``tag=`` is a tagged field (only in flexible versions, in ``tagged`` versions).
"""

from __future__ import annotations

from typing import Optional, Sequence

_INF = 1 << 30
MISSING = object()


def parse_versions(spec: Optional[str]) -> Optional[tuple]:
    """``"3+"`` -> (3, inf); ``"0-12"`` -> (0, 12); ``"8"`` -> (8, 8); ``"none"``/None -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), _INF)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def in_versions(rng: Optional[tuple], version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


_PRIMITIVE_DEFAULTS = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "float64": 0.0, "bool": False,
    "varint": 0, "varlong": 0, "uvarint": 0, "string": "", "bytes": b"", "records": None,
}


class Field:
    """One field of a message or nested structure."""

    __slots__ = ("name", "type", "versions", "nullable", "default", "tag", "tagged", "fields",
                 "elem", "row")

    def __init__(self, name: str, type: str, versions: str = "0+", *, nullable: Optional[str] = None,
                 default=MISSING, tag: Optional[int] = None, tagged: Optional[str] = None,
                 fields: Optional[Sequence["Field"]] = None, row=None):
        self.name = name
        # For an array of structs: a callable turning each element as it is decoded (a dict) into
        # a compact read-only mapping kept in its place. Arrays a broker can make huge (a topic's
        # partitions) then cost little memory per element even while the response is decoded.
        self.row = row
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.tag = tag
        self.tagged = parse_versions(tagged if tagged is not None else (versions if tag is not None else None))
        self.fields = list(fields) if fields is not None else None
        self.elem = type[2:] if type.startswith("[]") else None
        if (type == "struct" or self.elem == "struct") and not self.fields:
            raise ValueError(f"field {name}: struct type needs fields")
        self.default = default

    def default_value(self):
        """A fresh default value (lists and dicts are new objects on every call)."""
        if self.elem is not None:
            return [] if self.default is MISSING else (None if self.default is None else list(self.default))
        if self.type == "struct":
            return {f.name: f.default_value() for f in self.fields}
        if self.default is not MISSING:
            return self.default
        if self.type == "uuid":
            from uuid import UUID
            return UUID(int=0)
        return _PRIMITIVE_DEFAULTS[self.type]

    def is_mutable_default(self) -> bool:
        return self.elem is not None or self.type == "struct"

    def __repr__(self):
        return f"Field({self.name!r}, {self.type!r})"


class Message:
    """A request or response body definition."""

    __slots__ = ("name", "api_key", "valid", "flexible", "fields")

    def __init__(self, name: str, api_key: int, valid: str, flexible: str, fields: Sequence[Field]):
        self.name = name
        self.api_key = api_key
        self.valid = parse_versions(valid)
        self.flexible = parse_versions(flexible)
        self.fields = list(fields)

    def is_flexible(self, version: int) -> bool:
        return in_versions(self.flexible, version)

    def __repr__(self):
        return f"Message({self.name!r})"
