"""JSON Schema for the JSON serializer: the compiled per-record validator.

:func:`compile_validator` turns a schema (``_json_schema``) into nested closures that validate one
JSON value (dicts, lists, ``str``, ``int``, ``float``, :class:`decimal.Decimal`, ``bool``, ``None``)
and raise :class:`~fastkafka.schema_registry._errors.ValidationError` with the JSON path of the
first violation. The value itself is never put whole into the message: scalars are shown
shortened, objects and arrays by their size.

Formats: ``date``, ``date-time``, ``time``, ``uuid``, ``email``, ``ipv4`` and ``ipv6`` are checked
(unless ``check_formats`` is False); every other format is an annotation, as the specification
allows.
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

from fastkafka.schema_registry._errors import SchemaError, ValidationError


from ._json_schema import (CHECKED_FORMATS, ParsedJsonSchema, SchemaLike, _SCALAR_KEYWORDS,
                           _compile_pattern, _escape_pointer, _json_type_name, parse_json_schema)

__all__ = ['compile_validator']

# --------------------------------------------------------------------------------------------------
# Values: JSON types, equality, display
# --------------------------------------------------------------------------------------------------


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
