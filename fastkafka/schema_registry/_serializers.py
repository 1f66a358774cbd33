"""AvroSerializer and JSONSerializer: values framed for a Schema Registry, encoded by compiled code.

A value in Confluent's wire format is the byte 0, the schema id as 4 bytes big-endian, then the Avro
binary datum (or the JSON text). The serializers here are shaped like confluent-kafka's
(``serializer(obj, SerializationContext(topic, MessageField.VALUE))``, the same ``conf`` keys), and
add what columnar data needs: :meth:`encode_arrow` encodes a whole pyarrow Table, RecordBatch or
StructArray (a Polars or pandas frame through Arrow) in one compiled call, with no Python object
per row and the GIL released.

The registry is asked once per subject: :meth:`encoder_for` resolves the subject and the schema id
(registering the schema when ``auto.register.schemas``) and returns a :class:`FramedEncoder`, which
holds the id and the compiled encoder and never calls the registry again. A FramedEncoder pickles
as its format, id and schema text, so Spark's driver resolves it once and ships it to its tasks.

As a ``value_serializer``/``key_serializer`` of :class:`fastkafka.Producer`, ``send()`` encodes
one value with the compiled per-record encoder and ``send_batch(topic, table)`` encodes the table
in C.
"""

from __future__ import annotations

import abc
import json
import threading
from typing import Any, Callable, Mapping

from fastkafka.errors import ConfigError

from ._context import (MessageField, SerializationContext, strategy_named,
                       topic_subject_name_strategy)
from ._errors import EncodeError, SchemaError

MAGIC = 0

_AVRO_NAMED = ("record", "enum", "fixed")


def _header(schema_id: int) -> bytes:
    if not isinstance(schema_id, int) or isinstance(schema_id, bool) or not 0 <= schema_id < 2**31:
        raise ConfigError(f"a schema id is an int from 0 to 2**31-1, got {schema_id!r}")
    return bytes((MAGIC,)) + schema_id.to_bytes(4, "big")


def as_arrow(data: Any) -> Any:
    """``data`` as a pyarrow Table/RecordBatch/Array/ChunkedArray: those as they are; anything
    exporting the Arrow PyCapsule interface (a Polars frame, a pandas frame, ...) through it."""
    import pyarrow as pa

    if isinstance(data, (pa.Table, pa.RecordBatch, pa.Array, pa.ChunkedArray)):
        return data
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data) if _is_tabular(data) else pa.chunked_array(data)
    if hasattr(data, "__arrow_c_array__"):
        return pa.array(data)
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise EncodeError(f"expected Arrow data (a pyarrow Table, RecordBatch, StructArray or Array, or "
                      f"a frame exporting __arrow_c_stream__), got {type(data).__name__}")


def _is_tabular(data: Any) -> bool:
    import pyarrow as pa

    try:
        return isinstance(pa.table(data), pa.Table)
    except (TypeError, ValueError):
        return False


def observed_type(data: Any) -> Any:
    """The Arrow type of ``data``'s rows with every field marked nullable only where ``data``
    holds a null: pyarrow makes every field of a table built from Python values nullable, and a
    schema that takes no null still takes such a column when it has none."""
    import pyarrow as pa

    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return pa.struct([pa.field(f.name, observed_type(col), nullable=col.null_count > 0)
                          for f, col in zip(data.schema, data.columns)])
    if isinstance(data, pa.ChunkedArray):
        kinds = {observed_type(chunk) for chunk in data.chunks}
        return kinds.pop() if len(kinds) == 1 else data.type
    t = data.type
    if pa.types.is_struct(t):
        if data.null_count:   # a null row is a null value, whatever its fields hold
            data = data.filter(data.is_valid())
        children = [data.field(i) for i in range(t.num_fields)]
        return pa.struct([pa.field(t.field(i).name, observed_type(c), nullable=c.null_count > 0)
                          for i, c in enumerate(children)])
    if pa.types.is_map(t):
        items = data.items
        return pa.map_(t.key_type, pa.field(t.item_field.name, observed_type(items),
                                            nullable=items.null_count > 0))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        values = data.flatten()
        item = pa.field(t.value_field.name, observed_type(values), nullable=values.null_count > 0)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(item, t.list_size)
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    return t


def _non_null(t: Any) -> Any:
    """``t`` with no field nullable, at any depth."""
    import pyarrow as pa

    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _non_null(f.type), nullable=False) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_type, pa.field(t.item_field.name, _non_null(t.item_type),
                                            nullable=False))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = pa.field(t.value_field.name, _non_null(t.value_type), nullable=False)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(item, t.list_size)
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    return t


def arrow_type_of(data: Any) -> Any:
    """The Arrow type of the rows of ``data``: a struct for tables and batches."""
    import pyarrow as pa

    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return pa.struct(list(data.schema))
    return data.type


class FramedEncoder:
    """One schema under one registry id: encodes values in the registry's framing, without asking
    the registry anything. ``format`` is ``"avro"`` or ``"json"``.

    Picklable (as its format, id and schema text; the compiled encoder is rebuilt on unpickling),
    so it can be made once on Spark's driver and used by every task."""

    __slots__ = ("format", "schema_id", "schema_str", "_header", "_avro", "_json_schema",
                 "_validate", "_checked", "_json_arrow", "_json_constraints", "_checked_nulls")

    def __init__(self, format: str, schema_id: int, schema_str: str) -> None:
        if format not in ("avro", "json"):
            raise ConfigError(f"format must be 'avro' or 'json', got {format!r}")
        self.format = format
        self.schema_id = schema_id
        self.schema_str = schema_str
        self._header = _header(schema_id)
        self._checked: set = set()
        self._checked_nulls: set = set()
        self._avro = None
        if format == "avro":
            from ._encode import AvroEncoder

            self._avro = AvroEncoder(schema_str)
        else:
            from ._json_schema import parse_json_schema
            from ._json_validate import compile_validator

            self._json_schema = parse_json_schema(schema_str)
            # formats are annotations, as confluent-kafka's serializer takes them (it validates
            # with no format checker): a value it sends is never refused here
            self._validate = compile_validator(self._json_schema, check_formats=False)
            self._json_constraints: dict = {}   # Arrow type -> whether rows must be validated
            self._json_arrow = None

    def __reduce__(self):
        return (FramedEncoder, (self.format, self.schema_id, self.schema_str))

    def __repr__(self) -> str:
        return f"<FramedEncoder {self.format} schema id {self.schema_id}>"

    @property
    def header(self) -> bytes:
        """The 5 bytes every value starts with."""
        return self._header

    def encode(self, obj: Any) -> bytes | None:
        """One value, framed; None (a null Kafka value) for None. EncodeError for a value the
        schema cannot take (ValidationError for a broken JSON Schema constraint)."""
        if obj is None:
            return None
        if self._avro is not None:
            return self._avro.encode(obj, self._header)
        self._validate(obj)
        try:
            text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise EncodeError(f"value cannot be written as JSON: {e}") from e
        return self._header + text.encode("utf-8", "surrogatepass")

    def check_arrow(self, arrow_type: Any) -> None:
        """SchemaMismatchError when rows of ``arrow_type`` do not fit the schema (naming the first
        field that does not fit); checked once per type."""
        if arrow_type in self._checked:
            return
        if self._avro is not None:
            self._avro.check_arrow(arrow_type)
        else:
            from ._json_arrow import check_arrow

            # the type and shape; nulls are checked against the data (encode_arrow)
            check_arrow(self._json_schema, _non_null(arrow_type))
        self._checked.add(arrow_type)

    def encode_arrow(self, data: Any) -> Any:
        """Every row of ``data`` (a Table, RecordBatch, StructArray, any Array for a non-record
        schema, or a frame exporting Arrow), framed: a pyarrow binary array with one entry per row,
        null for a null row. Nothing is returned when a row cannot be encoded (EncodeError naming
        the row and field)."""
        data = as_arrow(data)
        if self._avro is not None:
            # a null where the schema takes none is found row by row, naming the row
            self.check_arrow(arrow_type_of(data))
            return self._avro.encode_arrow(data, self._header)
        self.check_arrow(arrow_type_of(data))
        # the nulls: a field the schema takes no null in may be nullable (pyarrow and Spark make
        # every field so) but must hold none
        observed = observed_type(data)
        if observed not in self._checked_nulls:
            from ._json_arrow import check_arrow

            check_arrow(self._json_schema, observed)
            self._checked_nulls.add(observed)
        if self._json_arrow is None:
            from ._encode import JsonEncoder

            self._json_arrow = JsonEncoder()
        out = self._json_arrow.encode_arrow(data, self._header)
        constrained = self._json_constraints.get(observed)
        if constrained is None:
            from ._json_arrow import has_value_constraints

            constrained = self._json_constraints[observed] = has_value_constraints(
                self._json_schema, observed, check_formats=False)
        if constrained:
            # constraints beyond type and shape (pattern, minimum, ...): each row as it is sent
            self._validate_rows(out)
        return out

    def _validate_rows(self, out: Any) -> None:
        from ._errors import ValidationError

        for i, entry in enumerate(out.to_pylist()):
            if entry is None:
                continue
            try:
                self._validate(json.loads(entry[5:]))
            except ValidationError as e:
                raise ValidationError(f"row {i}: {e}") from None


class _SchemaSerializer(abc.ABC):
    """What AvroSerializer and JSONSerializer share: the conf, the subject and the registry."""

    _format = ""
    _schema_type = ""
    _conf_defaults: Mapping[str, Any] = {
        "auto.register.schemas": True,
        "normalize.schemas": False,
        "use.schema.id": None,
        "use.latest.version": False,
        "subject.name.strategy": None,
        "subject.name.strategy.type": None,
    }

    def __init__(self, schema_registry_client: Any, schema_str: Any, to_dict: Callable | None,
                 conf: Mapping[str, Any] | None) -> None:
        from ._client import Schema

        if schema_registry_client is None:
            raise ConfigError(f"{type(self).__name__} needs a SchemaRegistryClient")
        self._registry = schema_registry_client
        if isinstance(schema_str, Schema):
            if schema_str.references:
                raise ConfigError(f"{type(self).__name__}: schemas with references are not "
                                  f"supported yet; inline the referenced types")
            schema_str = schema_str.schema_str
        if schema_str is not None and not isinstance(schema_str, str):
            raise ConfigError(f"schema_str must be a str or a Schema, got "
                              f"{type(schema_str).__name__}")
        self._schema_str: str | None = schema_str
        if to_dict is not None and not callable(to_dict):
            raise ConfigError(f"to_dict must be a callable(obj, ctx) -> dict, got "
                              f"{type(to_dict).__name__}")
        self._to_dict = to_dict
        conf = dict(conf or {})
        unknown = sorted(set(conf) - set(self._conf_defaults))
        if unknown:
            raise ConfigError(f"{type(self).__name__} does not know {', '.join(unknown)}; its "
                              f"settings: {', '.join(sorted(self._conf_defaults))}")
        c = {**self._conf_defaults, **conf}
        for name in ("auto.register.schemas", "normalize.schemas", "use.latest.version"):
            if not isinstance(c[name], bool):
                raise ConfigError(f"{name} must be a bool, got {c[name]!r}")
        self._auto_register: bool = c["auto.register.schemas"]
        self._normalize: bool = c["normalize.schemas"]
        self._use_latest: bool = c["use.latest.version"]
        self._use_schema_id = c["use.schema.id"]
        if self._use_schema_id is not None:
            _header(self._use_schema_id)   # checks it
        if self._use_latest and self._auto_register:
            raise ConfigError("use.latest.version=True cannot be used with auto.register.schemas="
                              "True (the default); set auto.register.schemas to False")
        if c["subject.name.strategy"] is not None:
            if not callable(c["subject.name.strategy"]):
                raise ConfigError("subject.name.strategy must be a callable(ctx, record_name) -> "
                                  "str; subject.name.strategy.type takes TOPIC, RECORD or "
                                  "TOPIC_RECORD")
            self._strategy = c["subject.name.strategy"]
        elif c["subject.name.strategy.type"] is not None:
            self._strategy = strategy_named(c["subject.name.strategy.type"])
        else:
            self._strategy = topic_subject_name_strategy
        if self._schema_str is not None:
            self._parse(self._schema_str)   # a bad schema fails here, not at the first record
        self._encoders: dict[tuple, FramedEncoder] = {}
        self._lock = threading.Lock()

    # -- what the formats differ in (AvroSerializer, JSONSerializer) ------------------------
    @abc.abstractmethod
    def _parse(self, schema_str: str) -> Any:
        """The schema read and checked (SchemaError when it is not valid)."""

    @abc.abstractmethod
    def _record_name(self, schema_str: str) -> str | None:
        """The name the record subject strategies use."""

    @abc.abstractmethod
    def _derive(self, arrow_type: Any, ctx: SerializationContext | None) -> str:
        """A schema for rows of ``arrow_type``."""

    # -- confluent-kafka's shape ------------------------------------------------------------
    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        """``obj`` framed for the registry (None for None), as confluent-kafka's serializers."""
        if obj is None:
            return None
        if self._to_dict is not None:
            obj = self._to_dict(obj, ctx)
        return self.encoder_for(ctx).encode(obj)

    def encode_arrow(self, data: Any, ctx: SerializationContext | None = None) -> Any:
        """Every row of ``data`` (Table, RecordBatch, StructArray, ...) framed: a pyarrow binary
        array, one entry per row. The schema, when none was given, is derived from the Arrow
        type."""
        data = as_arrow(data)
        return self.encoder_for(ctx, arrow_type_of(data)).encode_arrow(data)

    def encoder_for(self, ctx: SerializationContext | None,
                    arrow_type: Any = None) -> FramedEncoder:
        """The :class:`FramedEncoder` for ``ctx``'s subject: the registry is asked the first time
        only. ``arrow_type`` (the rows' Arrow type) is checked against the schema, and is where
        the schema comes from when the serializer was given none."""
        key = (None if ctx is None else (ctx.topic, str(ctx.field)),
               arrow_type if self._schema_str is None and not self._schema_given() else None)
        enc = self._encoders.get(key)
        if enc is None:
            with self._lock:
                enc = self._encoders.get(key)
                if enc is None:
                    enc = self._encoders[key] = self._resolve(ctx, arrow_type)
        if arrow_type is not None:
            enc.check_arrow(arrow_type)
        return enc

    def _schema_given(self) -> bool:
        return self._use_schema_id is not None or self._use_latest

    def _resolve(self, ctx: SerializationContext | None, arrow_type: Any) -> FramedEncoder:
        from ._client import Schema

        if self._use_schema_id is not None:
            schema = self._registry.get_schema(self._use_schema_id)
            return FramedEncoder(self._format, self._use_schema_id, schema.schema_str)
        schema_str = self._schema_str
        if schema_str is None and not self._use_latest:
            if arrow_type is None:
                raise ConfigError(
                    f"{type(self).__name__} was given no schema: one is derived only from Arrow "
                    f"data (send_batch/encode_arrow); for single values pass schema_str, or "
                    f"use.latest.version=True with auto.register.schemas=False")
            schema_str = self._derive(arrow_type, ctx)
        record_name = None if schema_str is None else self._record_name(schema_str)
        subject = self._strategy(ctx, record_name)
        if subject is None:
            raise ConfigError(f"the subject name strategy gave no subject for {ctx!r} (a record "
                              f"name strategy needs a named schema: an Avro record or a JSON "
                              f"Schema with a title)")
        if self._use_latest:
            latest = self._registry.get_latest_version(subject)
            return FramedEncoder(self._format, latest.schema_id, latest.schema.schema_str)
        schema = Schema(schema_str, self._schema_type)
        if self._auto_register:
            registered = self._registry.register_schema_full_response(
                subject, schema, normalize_schemas=self._normalize)
        else:
            registered = self._registry.lookup_schema(subject, schema,
                                                      normalize_schemas=self._normalize)
        return FramedEncoder(self._format, registered.schema_id, schema_str)

    @staticmethod
    def takes_arrow(data: Any) -> bool:
        """Whether :meth:`encode_arrow` takes ``data`` whole (the producer's send_batch asks)."""
        return arrow_like(data)

    @staticmethod
    def context(topic: str, field: str) -> SerializationContext:
        """The context of ``field`` ("key" or "value") of records to ``topic``."""
        return SerializationContext(topic, field)

    def _topic_serializer(self, field: MessageField | str) -> Callable[[str, Any], bytes | None]:
        """``serialize(topic, obj)`` for the producer's send path: the encoder of each topic found
        once, then one compiled call per value."""
        field = MessageField(field)
        encoders: dict[str, Callable[[Any], bytes | None]] = {}
        contexts: dict[str, SerializationContext] = {}
        to_dict = self._to_dict

        def serialize(topic: str, obj: Any) -> bytes | None:
            encode = encoders.get(topic)
            if encode is None:
                ctx = contexts[topic] = SerializationContext(topic, field)
                encode = encoders[topic] = self.encoder_for(ctx).encode
            if to_dict is not None and obj is not None:
                obj = to_dict(obj, contexts[topic])
            return encode(obj)

        serialize.schema_serializer = self   # type: ignore[attr-defined]
        return serialize


class AvroSerializer(_SchemaSerializer):
    """Avro values framed for a Schema Registry, as ``confluent_kafka.schema_registry.avro.
    AvroSerializer(schema_registry_client, schema_str, to_dict, conf)``.

    ``schema_str`` may be None: the schema is then derived from the Arrow type of the data given
    to :meth:`encode_arrow` (a record named after the topic), or taken from the registry with
    ``use.latest.version``/``use.schema.id``."""

    _format = "avro"
    _schema_type = "AVRO"

    def __init__(self, schema_registry_client: Any, schema_str: Any = None,
                 to_dict: Callable | None = None, conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(schema_registry_client, schema_str, to_dict, conf)

    def _parse(self, schema_str: str) -> Any:
        from ._avro_schema import parse_avro_schema

        return parse_avro_schema(schema_str)

    def _record_name(self, schema_str: str) -> str | None:
        try:
            schema = json.loads(schema_str)
        except ValueError as e:
            raise SchemaError(f"the Avro schema is not JSON: {e}") from None
        if isinstance(schema, dict) and schema.get("type") in _AVRO_NAMED:
            name = schema.get("name")
            ns = schema.get("namespace")
            if isinstance(name, str) and "." not in name and ns:
                return f"{ns}.{name}"
            return name if isinstance(name, str) else None
        return None

    def _derive(self, arrow_type: Any, ctx: SerializationContext | None) -> str:
        from ._avro_schema import avro_schema_from_arrow

        name = _record_name_for(ctx)
        return json.dumps(avro_schema_from_arrow(arrow_type, name=name))


class JSONSerializer(_SchemaSerializer):
    """JSON values checked against a JSON Schema and framed for a Schema Registry, as
    ``confluent_kafka.schema_registry.json_schema.JSONSerializer(schema_str,
    schema_registry_client, to_dict, conf)`` (note the order: the schema first)."""

    _format = "json"
    _schema_type = "JSON"

    def __init__(self, schema_str: Any, schema_registry_client: Any,
                 to_dict: Callable | None = None, conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(schema_registry_client, schema_str, to_dict, conf)

    def _parse(self, schema_str: str) -> Any:
        from ._json_schema import parse_json_schema

        return parse_json_schema(schema_str)

    def _record_name(self, schema_str: str) -> str | None:
        try:
            schema = json.loads(schema_str)
        except ValueError as e:
            raise SchemaError(f"the JSON Schema is not JSON: {e}") from None
        title = schema.get("title") if isinstance(schema, dict) else None
        return title if isinstance(title, str) else None

    def _derive(self, arrow_type: Any, ctx: SerializationContext | None) -> str:
        from ._json_arrow import json_schema_from_arrow

        return json.dumps(json_schema_from_arrow(arrow_type, title=_record_name_for(ctx)))


def _record_name_for(ctx: SerializationContext | None) -> str:
    """The name of a record schema derived from Arrow: the topic's, as an Avro name."""
    base = "Record" if ctx is None else "".join(c if c.isalnum() or c == "_" else "_"
                                                for c in ctx.topic)
    if not base or base[0].isdigit():
        base = "_" + base
    return base + ("_key" if ctx is not None and ctx.field == MessageField.KEY else "")


def topic_serializer(serializer: Any, field: str) -> Callable[[str, Any], Any] | None:
    """For the producer: ``serialize(topic, obj)`` when ``serializer`` wants the topic (this
    package's serializers, or confluent-kafka's ``Serializer`` objects, called as
    ``serializer(obj, SerializationContext(topic, field))``); None for a plain ``f(obj)``."""
    if isinstance(serializer, _SchemaSerializer):
        return serializer._topic_serializer(field)
    cls = type(serializer)
    if any(c.__module__.startswith("confluent_kafka.") and c.__name__ == "Serializer"
           for c in cls.__mro__):
        from confluent_kafka.serialization import MessageField as CMessageField
        from confluent_kafka.serialization import SerializationContext as CContext

        cfield = CMessageField.KEY if field == "key" else CMessageField.VALUE
        contexts: dict[str, Any] = {}

        def serialize(topic: str, obj: Any) -> Any:
            ctx = contexts.get(topic)
            if ctx is None:
                ctx = contexts[topic] = CContext(topic, cfield)
            return serializer(obj, ctx)

        return serialize
    return None


def bound_serializer(serializer: Any, field: str) -> tuple:
    """For the producer: (what its send path calls, whether it is called with the topic). A
    Schema Registry serializer becomes ``serialize(topic, obj)`` (:func:`topic_serializer`); any
    other callable stays ``f(obj)``."""
    if serializer is None:
        return None, False
    bound = topic_serializer(serializer, field)
    return (serializer, False) if bound is None else (bound, True)


def arrow_like(data: Any) -> bool:
    """Arrow data a schema serializer encodes whole: a pyarrow Table/RecordBatch/Array, or a frame
    exporting the Arrow PyCapsule interface (Polars, pandas)."""
    return (hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__")
            or type(data).__module__.startswith("pandas"))
