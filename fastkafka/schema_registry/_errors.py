"""The errors of :mod:`fastkafka.schema_registry`'s schemas and encoders."""

from __future__ import annotations

from fastkafka.errors import ConfigError, MalformedRecordError


class SchemaError(ConfigError):
    """A schema that is not valid (Avro or JSON Schema); the message names the place in it."""

    code, name, description = -180, "SCHEMA_ERROR", "The schema is not valid."


class SchemaMismatchError(SchemaError):
    """Data whose type does not fit the schema (an Arrow type, checked before any row is encoded);
    the message names the first field path that does not fit, its type and the type expected."""

    code, name, description = (-181, "SCHEMA_MISMATCH",
                               "The data's type does not fit the schema.")


class EncodeError(MalformedRecordError):
    """A value the schema cannot take (a null in a non-nullable field, an enum symbol the schema
    lacks, a number out of range, ...): the message names the field path, the row (for a column)
    and the value's type, never the whole record. Nothing of the call is encoded or sent. An
    :class:`~fastkafka.errors.InvalidRecordError` and a ``ValueError``."""

    code, name, description = (-182, "ENCODE_ERROR",
                               "A value does not fit the schema it is encoded with.")


class ValidationError(EncodeError):
    """A value that breaks a constraint of its JSON Schema (pattern, minimum, required, ...); the
    message gives the JSON path of the first violation."""

    code, name, description = (-183, "VALIDATION_ERROR",
                               "A value does not validate against its JSON Schema.")
