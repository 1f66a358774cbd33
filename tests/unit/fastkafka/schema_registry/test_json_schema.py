"""JSON Schema for the JSON serializer: parsing, the Arrow rules and the compiled validator.

The validator's matrix states, for every case, whether the value is valid; the same matrix is run
against the ``jsonschema`` package (the validator confluent-kafka's JSONSerializer uses, a test
dependency), so the expectations are not only this module's opinion.
"""
from __future__ import annotations

import json
from decimal import Decimal

import jsonschema
import jsonschema_specifications
import pyarrow as pa
import pytest

from fastkafka.schema_registry._errors import SchemaError, SchemaMismatchError, ValidationError
from fastkafka.schema_registry._json_arrow import (check_arrow, has_value_constraints,
                                                   json_schema_from_arrow)
from fastkafka.schema_registry._json_schema import (CHECKED_FORMATS, DRAFT_07, ParsedJsonSchema,
                                                    parse_json_schema)
from fastkafka.schema_registry._json_validate import compile_validator

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def _s(draft, **kw):
    return {"$schema": draft, **kw}


ADDRESS = {"type": "object",
           "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                          "street": {"type": "string", "minLength": 1}},
           "required": ["zip"]}

# (case id, schema, value, valid)
MATRIX = [
    # type, including integer vs number
    ("int-is-integer", {"type": "integer"}, 3, True),
    ("float-1.0-is-integer", {"type": "integer"}, 1.0, True),
    ("float-1.5-not-integer", {"type": "integer"}, 1.5, False),
    ("bool-not-integer", {"type": "integer"}, True, False),
    ("bool-not-number", {"type": "number"}, False, False),
    ("int-is-number", {"type": "number"}, 7, True),
    ("str-not-number", {"type": "number"}, "7", False),
    ("null-type", {"type": "null"}, None, True),
    ("null-not-string", {"type": "string"}, None, False),
    ("type-list", {"type": ["string", "null"]}, None, True),
    ("type-list-miss", {"type": ["string", "null"]}, 3, False),
    ("array-type", {"type": "array"}, [1, "a"], True),
    ("object-not-array", {"type": "array"}, {"a": 1}, False),
    ("boolean-type", {"type": "boolean"}, True, True),
    ("boolean-not-zero", {"type": "boolean"}, 0, False),
    # one scalar type with its keywords (one closure)
    ("scalar-string", {"type": "string", "minLength": 2, "maxLength": 10, "format": "date"},
     "2024-01-31", True),
    ("scalar-string-type", {"type": "string", "minLength": 2}, 12, False),
    ("scalar-string-length", {"type": "string", "minLength": 2, "title": "t"}, "a", False),
    ("scalar-string-format", {"type": "string", "format": "date", "description": "d"}, "2024-13-01", False),
    ("scalar-string-ignores-minimum", {"type": "string", "minimum": 5}, "1", True),
    ("scalar-integer", {"type": "integer", "minimum": 1, "multipleOf": 2}, 4.0, True),
    ("scalar-integer-odd", {"type": "integer", "minimum": 1, "multipleOf": 2}, 3, False),
    ("scalar-integer-bool", {"type": "integer", "minimum": 0}, True, False),
    ("scalar-integer-float", {"type": "integer", "maximum": 10}, 2.5, False),
    ("scalar-number-bound", {"type": "number", "exclusiveMaximum": 1.5}, 1.5, False),
    ("scalar-number-ignores-pattern", {"type": "number", "pattern": "^x"}, 3, True),
    ("scalar-number-d4", _s(D4, type="number", minimum=0, exclusiveMinimum=True), 0, False),
    ("scalar-nullable-null", {"type": ["string", "null"], "minLength": 2}, None, True),
    ("scalar-nullable-short", {"type": ["null", "string"], "minLength": 2}, "a", False),
    ("scalar-nullable-type", {"type": ["integer", "null"], "minimum": 2}, "2", False),
    ("scalar-nullable-int", {"type": ["integer", "null"], "minimum": 2}, None, True),
    ("scalar-nullable-bound", {"type": ["number", "null"], "minimum": 2}, 1.5, False),
    # objects
    ("nested-ok", {"type": "object", "properties": {"address": ADDRESS}},
     {"address": {"zip": "12345", "street": "Main"}}, True),
    ("nested-pattern", {"type": "object", "properties": {"address": ADDRESS}},
     {"address": {"zip": "abc"}}, False),
    ("nested-required", {"type": "object", "properties": {"address": ADDRESS}},
     {"address": {"street": "Main"}}, False),
    ("additional-false", {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
     {"a": 1, "b": 2}, False),
    ("additional-false-ok", {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
     {"a": 1}, True),
    ("additional-schema", {"additionalProperties": {"type": "integer"}}, {"a": 1, "b": 2}, True),
    ("additional-schema-bad", {"additionalProperties": {"type": "integer"}}, {"a": 1, "b": "x"}, False),
    ("pattern-properties", {"patternProperties": {"^x_": {"type": "integer"}},
                            "additionalProperties": False}, {"x_a": 1, "x_b": 2}, True),
    ("pattern-properties-bad", {"patternProperties": {"^x_": {"type": "integer"}}}, {"x_a": "1"}, False),
    ("pattern-properties-not-additional", {"patternProperties": {"^x_": {}},
                                           "additionalProperties": False}, {"y": 1}, False),
    ("min-properties", {"minProperties": 2}, {"a": 1}, False),
    ("max-properties", {"maxProperties": 1}, {"a": 1}, True),
    ("property-names", {"propertyNames": {"maxLength": 3}}, {"abcd": 1}, False),
    ("dependencies-list", _s(D7, dependencies={"a": ["b"]}), {"a": 1}, False),
    ("dependencies-schema", _s(D7, dependencies={"a": {"required": ["c"]}}), {"a": 1, "c": 2}, True),
    ("dependent-required", {"dependentRequired": {"a": ["b"]}}, {"a": 1, "b": 1}, True),
    ("dependent-required-bad", {"dependentRequired": {"a": ["b"]}}, {"a": 1}, False),
    ("dependent-schemas-bad", {"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}},
     {"a": 1, "b": 2}, False),
    # arrays
    ("items-schema", {"items": {"type": "integer"}}, [1, 2, 3], True),
    ("items-schema-bad", {"items": {"type": "integer"}}, [1, "2"], False),
    ("items-list-d7", _s(D7, items=[{"type": "string"}, {"type": "integer"}]), ["a", 1, None], True),
    ("items-list-d7-bad", _s(D7, items=[{"type": "string"}, {"type": "integer"}]), [1, 1], False),
    ("additional-items-false", _s(D7, items=[{}], additionalItems=False), [1, 2], False),
    ("prefix-items", {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
     ["a", 1, 2], True),
    ("prefix-items-rest-bad", {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
     ["a", 1, "b"], False),
    ("prefix-items-rest-false", {"prefixItems": [{}], "items": False}, [1, 2], False),
    ("min-items", {"minItems": 2}, [1], False),
    ("max-items", {"maxItems": 2}, [1, 2], True),
    ("unique-items", {"uniqueItems": True}, [1, 2, 3], True),
    ("unique-items-1-1.0", {"uniqueItems": True}, [1, 1.0], False),
    ("unique-items-true-1", {"uniqueItems": True}, [True, 1], True),
    ("unique-items-objects", {"uniqueItems": True}, [{"a": [1]}, {"a": [1]}], False),
    ("contains", {"contains": {"type": "string"}}, [1, "a"], True),
    ("contains-none", {"contains": {"type": "string"}}, [1, 2], False),
    ("max-contains", {"contains": {"type": "string"}, "maxContains": 1}, ["a", "b"], False),
    ("items-list-2019", _s(D2019, items=[{"type": "string"}]), [1], False),
    ("prefix-items-ignored-d7", _s(D7, prefixItems=[{"type": "string"}]), [1], True),
    ("min-contains-0", {"contains": {"type": "string"}, "minContains": 0}, [1], True),
    ("max-contains-ignored-d7", _s(D7, contains={"type": "string"}, maxContains=0), ["a"], True),
    # keywords of later drafts are unknown (annotations) in earlier ones
    ("property-names-ignored-d4", _s(D4, propertyNames={"maxLength": 1}), {"ab": 1}, True),
    ("if-ignored-d6", _s(D6, **{"if": {"type": "string"}, "then": {"minLength": 3}}), "a", True),
    ("if-then-2020", {"if": {"type": "string"}, "then": {"minLength": 3}}, "a", False),
    ("dependencies-ignored-2020", {"dependencies": {"a": ["b"]}}, {"a": 1}, True),
    ("dependent-required-ignored-d7", _s(D7, dependentRequired={"a": ["b"]}), {"a": 1}, True),
    # numbers
    ("minimum", {"minimum": 5}, 5, True),
    ("minimum-bad", {"minimum": 5}, 4.99, False),
    ("exclusive-minimum-d6", _s(D6, exclusiveMinimum=5), 5, False),
    ("exclusive-maximum-d7", _s(D7, exclusiveMaximum=5), 4.5, True),
    ("exclusive-maximum-d4", _s(D4, maximum=5, exclusiveMaximum=True), 5, False),
    ("exclusive-maximum-d4-false", _s(D4, maximum=5, exclusiveMaximum=False), 5, True),
    ("maximum-ignores-strings", {"maximum": 5}, "999", True),
    ("multiple-of-int", {"multipleOf": 3}, 9, True),
    ("multiple-of-int-bad", {"multipleOf": 3}, 10, False),
    ("multiple-of-float", {"multipleOf": 0.5}, 4.5, True),
    ("multiple-of-float-bad", {"multipleOf": 0.5}, 4.2, False),
    ("multiple-of-0.01", {"multipleOf": 0.01}, 0.07, True),
    ("multiple-of-0.01-bad", {"multipleOf": 0.01}, 0.075, False),
    ("multiple-of-int-float", {"multipleOf": 2}, 4.0, True),
    ("multiple-of-big", {"multipleOf": 0.5}, 1e308, True),
    # strings
    ("min-length-code-points", {"minLength": 2}, "\U0001F600", False),
    ("max-length-code-points", {"maxLength": 1}, "\U0001F600", True),
    ("max-length-bad", {"maxLength": 3}, "abcd", False),
    ("pattern-search", {"pattern": "b"}, "abc", True),
    ("pattern-bad", {"pattern": "^b"}, "abc", False),
    ("pattern-unicode", {"pattern": "^[äö]+$"}, "äöä", True),
    # enum / const
    ("enum", {"enum": ["a", "b"]}, "b", True),
    ("enum-bad", {"enum": ["a", "b"]}, "c", False),
    ("enum-1-1.0", {"enum": [1, "x"]}, 1.0, True),
    ("enum-true-not-1", {"enum": [1]}, True, False),
    ("enum-object", {"enum": [{"a": [1, 2]}]}, {"a": [1, 2]}, True),
    ("const", {"const": {"k": None}}, {"k": None}, True),
    ("const-bad", {"const": 0}, False, False),
    ("const-ignored-d4", _s(D4, const=0), 1, True),
    # combinators
    ("any-of", {"anyOf": [{"type": "string"}, {"type": "null"}]}, None, True),
    ("any-of-bad", {"anyOf": [{"type": "string"}, {"type": "null"}]}, 1, False),
    ("one-of-two", {"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1, False),
    ("one-of-one", {"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1.5, True),
    ("all-of", {"allOf": [{"minimum": 1}, {"maximum": 3}]}, 4, False),
    ("not", {"not": {"type": "string"}}, 1, True),
    ("not-bad", {"not": {"type": "string"}}, "x", False),
    ("if-then", {"if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["x"]},
                 "else": {"required": ["y"]}}, {"k": "a", "y": 1}, False),
    ("if-else", {"if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["x"]},
                 "else": {"required": ["y"]}}, {"k": "b", "y": 1}, True),
    ("bool-schema-false", {"properties": {"a": False}}, {"a": 1}, False),
    ("bool-schema-false-absent", {"properties": {"a": False}}, {"b": 1}, True),
    # $ref
    ("ref-definitions", _s(D7, definitions={"pos": {"type": "integer", "minimum": 0}},
                           properties={"n": {"$ref": "#/definitions/pos"}}), {"n": -1}, False),
    ("ref-defs", {"$defs": {"pos": {"type": "integer", "minimum": 0}},
                  "properties": {"n": {"$ref": "#/$defs/pos"}}}, {"n": 2}, True),
    ("ref-siblings-ignored-d7", _s(D7, definitions={"s": {"type": "string"}},
                                   properties={"n": {"$ref": "#/definitions/s", "maxLength": 1}}),
     {"n": "long"}, True),
    ("ref-siblings-apply-2020", {"$defs": {"s": {"type": "string"}},
                                 "properties": {"n": {"$ref": "#/$defs/s", "maxLength": 1}}},
     {"n": "long"}, False),
    ("ref-recursive", {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node"}, {"v": 1, "next": {"v": 2, "next": {"v": "3"}}}, False),
    ("ref-anchor", {"$defs": {"s": {"$anchor": "str", "type": "string"}},
                    "items": {"$ref": "#str"}}, ["a", 1], False),
    ("ref-root", {"properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}},
     {"child": {"child": {"n": "x"}}}, False),
    # formats
    ("date", {"format": "date"}, "2024-02-29", True),
    ("date-bad-day", {"format": "date"}, "2023-02-29", False),
    ("date-bad-shape", {"format": "date"}, "2024-2-29", False),
    ("date-time", {"format": "date-time"}, "2024-02-29T23:59:59.123456Z", True),
    ("date-time-offset", {"format": "date-time"}, "2024-02-29T23:59:59+05:30", True),
    ("date-time-no-zone", {"format": "date-time"}, "2024-02-29T23:59:59", False),
    ("date-time-bad-hour", {"format": "date-time"}, "2024-02-29T24:00:00Z", False),
    ("uuid", {"format": "uuid"}, "3e4666bf-d5e5-4aa7-b8ce-cefe41c7568a", True),
    ("uuid-bad", {"format": "uuid"}, "3e4666bfd5e54aa7b8cecefe41c7568a", False),
    ("email", {"format": "email"}, "ada@example.com", True),
    ("email-bad", {"format": "email"}, "ada", False),
    ("ipv4", {"format": "ipv4"}, "10.0.0.1", True),
    ("ipv4-bad", {"format": "ipv4"}, "10.0.0.256", False),
    ("format-ignores-numbers", {"format": "date"}, 12, True),
    ("format-unknown-annotation", {"format": "x-custom"}, "anything", True),
]


@pytest.mark.parametrize("schema, value, valid", [c[1:] for c in MATRIX], ids=[c[0] for c in MATRIX])
def test_validator_matrix(schema, value, valid):
    validate = compile_validator(schema)
    if valid:
        validate(value)
    else:
        with pytest.raises(ValidationError):
            validate(value)


def _jsonschema_valid(schema, value):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return validator.is_valid(value)


# Cases where this module deliberately differs from the jsonschema package, and why.
DIFFERS_FROM_JSONSCHEMA = {
    # jsonschema divides binary floats (0.07 / 0.01 == 7.000000000000001); the value as JSON writes
    # it, 0.07, is a multiple of 0.01.
    "multiple-of-0.01",
}


@pytest.mark.parametrize("case, schema, value, valid", MATRIX, ids=[c[0] for c in MATRIX])
def test_matrix_agrees_with_jsonschema(case, schema, value, valid):
    fmt = schema.get("format")
    # jsonschema checks date-time only with rfc3339-validator installed (a test dependency)
    assert fmt not in CHECKED_FORMATS or fmt in jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers, \
        f"jsonschema here does not check format {fmt!r}: install the test extra (rfc3339-validator)"
    expected = (not valid) if case in DIFFERS_FROM_JSONSCHEMA else valid
    assert _jsonschema_valid(schema, value) is expected


def test_matrix_covers_every_draft_and_both_outcomes():
    drafts = {c[1].get("$schema") for c in MATRIX}
    assert {D4, D6, D7, None} <= drafts
    assert sum(c[3] for c in MATRIX) > 30 and sum(not c[3] for c in MATRIX) > 30


# -- messages -----------------------------------------------------------------------------------

def _error(schema, value):
    with pytest.raises(ValidationError) as info:
        compile_validator(schema)(value)
    return str(info.value)


def test_message_names_the_json_path_of_the_first_violation():
    schema = {"type": "object", "properties": {"address": ADDRESS, "tags": {"items": {"type": "string"}}}}
    assert "$.address.zip: 'abc' does not match pattern '^[0-9]{5}$'" in _error(
        schema, {"address": {"zip": "abc"}})
    assert "$.tags[2]: 3 is not of type 'string'" in _error(schema, {"tags": ["a", "b", 3]})
    assert "$.address: required property 'zip' is missing" in _error(schema, {"address": {}})
    assert "$.n: 'x' is not of type ['integer', 'null']" in _error(
        {"properties": {"n": {"type": ["integer", "null"], "minimum": 0}}}, {"n": "x"})
    assert '$["odd key"]: ' in _error({"properties": {"odd key": {"type": "null"}}}, {"odd key": 1})


def test_message_never_holds_the_whole_record():
    secret = "s3cr3t-" + "x" * 100
    msg = _error({"type": "object", "properties": {"n": {"type": "integer"}}},
                 {"password": secret, "n": "nope"})
    assert "s3cr3t" not in msg and "$.n" in msg
    msg = _error({"type": "string"}, {"password": secret})
    assert "s3cr3t" not in msg and "an object of 1 properties" in msg
    msg = _error({"maxLength": 3}, secret)
    assert secret not in msg and len(msg) < 200


def test_additional_property_is_named():
    msg = _error({"properties": {"a": {}}, "additionalProperties": False}, {"a": 1, "zz": 2})
    assert "$: additional property 'zz' is not allowed" in msg


def test_formats_can_be_annotations_as_in_confluent_kafka():
    schema = {"properties": {"day": {"type": "string", "format": "date"}}}
    with pytest.raises(ValidationError, match=r"\$\.day: 'soon' is not a valid 'date'"):
        compile_validator(schema)({"day": "soon"})
    compile_validator(schema, check_formats=False)({"day": "soon"})
    assert has_value_constraints(schema) is True
    assert has_value_constraints(schema, check_formats=False) is False
    assert has_value_constraints(schema, _struct(day=(pa.string(), False)), check_formats=False) is False


def test_decimal_values_are_numbers():
    validate = compile_validator({"type": "integer", "maximum": 10, "multipleOf": 0.5})
    validate(Decimal("2.00"))
    with pytest.raises(ValidationError):
        validate(Decimal("2.5"))  # a number, not an integer
    with pytest.raises(ValidationError):
        validate(Decimal("12"))


def test_deep_recursion_is_a_validation_error():
    schema = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    value: list = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(ValidationError, match="nested too deeply"):
        compile_validator(schema)(value)


# -- parsing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("schema, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ({"type": "strng"}, "'strng' is not a JSON Schema type"),
    ({"properties": {"a": {"type": ["string", "string"]}}}, "#/properties/a/type"),
    ({"type": [["string"]]}, "is not a JSON Schema type"),
    ({"required": "a"}, "required"),
    ({"required": ["a", 1]}, "list of strings"),
    ({"pattern": "(unclosed"}, "not a valid regular expression"),
    ({"patternProperties": {"[": {}}}, "not a valid regular expression"),
    ({"$schema": "http://json-schema.org/draft-03/schema#"}, "draft-03"),
    (_s(D4, exclusiveMaximum=3), "boolean in draft-04"),
    (_s(D7, exclusiveMaximum=True), "must be a number"),
    (_s(D4, properties={"a": True}), "draft-04 does not allow a boolean schema"),
    ({"minLength": -1}, "non-negative integer"),
    ({"maxItems": 1.5}, "non-negative integer"),
    ({"multipleOf": 0}, "greater than 0"),
    ({"allOf": []}, "non-empty list"),
    ({"items": [{}]}, "prefixItems"),
    ({"properties": []}, "object of schemas"),
    ({"enum": "a"}, "must be a list"),
    ({"properties": {"a": 3}}, "#/properties/a"),
])
def test_invalid_schemas_are_refused(schema, words):
    with pytest.raises(SchemaError) as info:
        parse_json_schema(schema)
    assert words in str(info.value)


@pytest.mark.parametrize("schema, words", [
    ({"$defs": {"a": {}}, "$dynamicRef": "#a"}, "$dynamicRef"),
    (_s(D2019, **{"$recursiveRef": "#"}), "$recursiveRef"),
    ({"properties": {"a": {}}, "unevaluatedProperties": False}, "unevaluatedProperties"),
    ({"unevaluatedItems": False}, "unevaluatedItems"),
    ({"properties": {"a": {"$ref": "https://example.com/other.json#/x"}}}, "another document"),
    ({"items": {"$ref": "#/$defs/missing"}}, "points to nothing"),
    ({"items": {"$ref": "#nowhere"}}, "names no anchor"),
])
def test_unsupported_keywords_are_refused_at_construction(schema, words):
    with pytest.raises(SchemaError) as info:
        compile_validator(schema)
    assert words in str(info.value)


def test_parse_reads_text_and_dicts_and_drafts():
    text = json.dumps(_s(D4, type="object"))
    parsed = parse_json_schema(text)
    assert isinstance(parsed, ParsedJsonSchema) and parsed.draft == 4 and parsed.text == text
    assert parse_json_schema({"type": "string"}).draft == 2020
    assert parse_json_schema(_s(D2019)).draft == 2019
    assert parse_json_schema({"$schema": "https://json-schema.org/draft-07/schema"}).draft == 7
    assert parse_json_schema(parsed) is parsed
    assert parse_json_schema(True).schema is True


def test_ref_through_root_id():
    schema = {"$id": "https://example.com/person.json",
              "definitions": {"age": {"type": "integer"}},
              "properties": {"age": {"$ref": "https://example.com/person.json#/definitions/age"}}}
    validate = compile_validator(_s(D7, **schema))
    validate({"age": 3})
    with pytest.raises(ValidationError):
        validate({"age": "3"})


# -- Arrow: deriving -----------------------------------------------------------------------------

ARROW = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("score", pa.float64(), nullable=False),
    pa.field("price", pa.decimal128(10, 4)),
    pa.field("raw", pa.binary()),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("tags", pa.list_(pa.field("item", pa.string(), nullable=False))),
    pa.field("attrs", pa.map_(pa.string(), pa.int32())),
    pa.field("address", pa.struct([pa.field("zip", pa.string(), nullable=False),
                                   pa.field("flag", pa.bool_())])),
    pa.field("cat", pa.dictionary(pa.int8(), pa.string())),
])


def test_json_schema_from_arrow():
    schema = json_schema_from_arrow(ARROW, title="Person")
    assert schema["$schema"] == DRAFT_07 and schema["title"] == "Person"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["id", "score"]
    p = schema["properties"]
    assert list(p) == [f.name for f in ARROW]
    assert p["id"] == {"type": "integer"}
    assert p["name"] == {"type": ["string", "null"]}
    assert p["price"] == {"type": ["number", "null"]}
    assert p["raw"] == {"type": ["string", "null"], "contentEncoding": "base64"}
    assert p["day"] == {"type": ["string", "null"], "format": "date"}
    assert p["at"] == {"type": ["string", "null"], "format": "date-time"}
    assert p["tags"] == {"type": ["array", "null"], "items": {"type": "string"}}
    assert p["attrs"] == {"type": ["object", "null"], "additionalProperties": {"type": ["integer", "null"]}}
    assert p["address"] == {"type": ["object", "null"], "required": ["zip"], "additionalProperties": False,
                            "properties": {"zip": {"type": "string"}, "flag": {"type": ["boolean", "null"]}}}
    assert p["cat"] == {"type": ["string", "null"]}
    # The derived schema fits its own Arrow type, with nothing left to check per row.
    check_arrow(schema, ARROW)
    assert has_value_constraints(schema, ARROW) is False
    assert json_schema_from_arrow(pa.string()) == {"$schema": DRAFT_07, "type": "string"}


def test_derived_schema_validates_the_encoders_json_form():
    schema = json_schema_from_arrow(ARROW)
    row = {"id": 1, "name": None, "score": 1.5, "price": Decimal("-123.4500"), "raw": "AAE=",
           "day": "2024-02-29", "at": "2024-02-29T12:00:00.000001Z", "tags": ["a"],
           "attrs": {"k": 1, "n": None}, "address": {"zip": "12345", "flag": None}, "cat": "x"}
    compile_validator(schema)(row)
    jsonschema.Draft7Validator.check_schema(schema)
    assert _jsonschema_valid(schema, json.loads(json.dumps(row, default=float)))


@pytest.mark.parametrize("arrow_type, words", [
    (pa.struct([pa.field("t", pa.time64("us"))]), "$.t: Arrow type time64[us]"),
    (pa.map_(pa.int32(), pa.string()), "keys are int32"),
    (pa.struct([pa.field("d", pa.duration("s"))]), "$.d"),
])
def test_arrow_types_without_json_form(arrow_type, words):
    with pytest.raises(SchemaMismatchError) as info:
        json_schema_from_arrow(arrow_type)
    assert words in str(info.value)


# -- Arrow: checking ------------------------------------------------------------------------------

def _struct(**fields):
    return pa.struct([pa.field(name, t[0], nullable=t[1]) if isinstance(t, tuple) else pa.field(name, t)
                      for name, t in fields.items()])


def _mismatch(schema, arrow_type):
    with pytest.raises(SchemaMismatchError) as info:
        check_arrow(schema, arrow_type)
    return str(info.value)


def test_check_arrow_names_the_first_field_that_does_not_fit():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                               "c": {"type": "string"}}}
    msg = _mismatch(schema, _struct(a=(pa.int32(), False), b=(pa.int64(), False), c=(pa.int64(), False)))
    assert "$.b: Arrow int64" in msg and "'string'" in msg and "$.c" not in msg


def test_nullable_field_into_a_type_without_null():
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert "$.name: Arrow string (nullable)" in _mismatch(schema, _struct(name=pa.string()))
    check_arrow(schema, _struct(name=(pa.string(), False)))
    check_arrow({"properties": {"name": {"type": ["string", "null"]}}}, _struct(name=pa.string()))
    check_arrow({"properties": {"name": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
                _struct(name=pa.string()))
    check_arrow({"properties": {"name": {"oneOf": [{"type": "null"}, {"type": "string"}]}}},
                _struct(name=pa.string()))
    refs = {"$defs": {"s": {"type": "string"}, "n": {"type": ["string", "null"]}}}
    assert "no schema of 'anyOf' allows null" in _mismatch(
        {**refs, "properties": {"name": {"anyOf": [{"$ref": "#/$defs/s"}]}}}, _struct(name=pa.string()))
    check_arrow({**refs, "properties": {"name": {"anyOf": [{"$ref": "#/$defs/n"}]}}}, _struct(name=pa.string()))
    assert "no schema of 'anyOf' allows null" in _mismatch(
        {"properties": {"name": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
        _struct(name=pa.string()))


def test_missing_required_property_and_extra_field():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    assert "$.b: required property 'b' is missing" in _mismatch(schema, _struct(a=(pa.int64(), False)))
    msg = _mismatch(schema, _struct(a=(pa.int64(), False), b=(pa.int64(), False), z=pa.int64()))
    assert "$.z: Arrow field 'z'" in msg and "additionalProperties is false" in msg
    # Open content model: an extra field is written and allowed.
    check_arrow({"properties": {"a": {"type": "integer"}}}, _struct(a=(pa.int64(), False), z=pa.string()))
    # additionalProperties as a schema applies to the extra field.
    assert "$.z" in _mismatch({"additionalProperties": {"type": "integer"}}, _struct(z=(pa.string(), False)))


def test_numbers_and_strings():
    check_arrow({"type": "number"}, pa.int8())
    check_arrow({"type": "integer"}, pa.uint64())
    check_arrow({"type": "integer"}, pa.decimal128(10, 0))
    assert "written as a JSON number" in _mismatch({"type": "integer"}, pa.float32())
    assert has_value_constraints({"type": "integer"}, pa.decimal128(10, 2)) is True
    check_arrow({"type": "string"}, pa.large_string())
    check_arrow({"type": "string", "format": "date"}, pa.date32())
    check_arrow({"type": "string"}, pa.timestamp("ns"))
    check_arrow({"type": "string", "contentEncoding": "base64"}, pa.binary(16))
    assert "JSON boolean" in _mismatch({"type": ["string", "integer"]}, pa.bool_())


def test_refs_nested_objects_arrays_and_maps():
    schema = _s(D7, definitions={"addr": {"type": "object", "properties": {"zip": {"type": "string"}},
                                          "required": ["zip"]}},
                type="object",
                properties={"home": {"$ref": "#/definitions/addr"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "attrs": {"type": "object", "additionalProperties": {"type": "number"}}})
    good = _struct(home=(_struct(zip=(pa.string(), False)), False),
                   tags=(pa.list_(pa.field("item", pa.string(), nullable=False)), False),
                   attrs=(pa.map_(pa.string(), pa.field("v", pa.float64(), nullable=False)), False))
    check_arrow(schema, good)
    assert has_value_constraints(schema, good) is False
    assert "$.home.zip: required property" in _mismatch(schema, _struct(home=(_struct(x=pa.int8()), False)))
    assert "$.tags[*]: Arrow int64" in _mismatch(
        schema, _struct(tags=(pa.list_(pa.field("item", pa.int64(), nullable=False)), False)))
    assert "$.tags[*]: Arrow string (nullable)" in _mismatch(schema, _struct(tags=(pa.list_(pa.string()), False)))
    assert "$.attrs.*: Arrow string" in _mismatch(
        schema, _struct(attrs=(pa.map_(pa.string(), pa.field("v", pa.string(), nullable=False)), False)))
    assert "$.attrs: Arrow" in _mismatch(schema, _struct(attrs=(pa.list_(pa.int8()), False)))
    # $defs and a schema given as text.
    text = json.dumps({"$defs": {"n": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/n"}}})
    check_arrow(text, pa.schema([pa.field("n", pa.int16(), nullable=False)]))
    assert "$.n" in _mismatch(text, pa.schema([pa.field("n", pa.string(), nullable=False)]))


def test_recursive_schema_meets_finite_arrow_type():
    schema = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}},
        "$ref": "#/$defs/node"}
    inner = _struct(v=(pa.int64(), False))
    check_arrow(schema, _struct(v=(pa.int64(), False), next=_struct(v=(pa.int64(), False), next=inner)))
    assert "$.next.v" in _mismatch(schema, _struct(v=(pa.int64(), False), next=_struct(v=(pa.string(), False))))


def test_the_top_level_may_be_null_free():
    # A null row is a tombstone, never encoded: the top level need not allow null.
    check_arrow({"type": "object", "properties": {}}, pa.struct([]))
    check_arrow({"type": "string"}, pa.field("v", pa.string(), nullable=True))


# -- value constraints ------------------------------------------------------------------------

@pytest.mark.parametrize("schema, expected", [
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, False),
    ({"type": ["string", "null"], "contentEncoding": "base64", "title": "t", "description": "d"}, False),
    ({"properties": {"a": {"type": "string", "pattern": "x"}}}, True),
    ({"properties": {"a": {"type": "integer", "minimum": 0}}}, True),
    ({"items": {"enum": [1, 2]}}, True),
    ({"properties": {"a": {"const": 1}}}, True),
    ({"uniqueItems": True}, True),
    ({"uniqueItems": False}, False),
    ({"properties": {"d": {"type": "string", "format": "date"}}}, True),
    ({"properties": {"d": {"type": "string", "format": "x-annotation"}}}, False),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, False),
    ({"oneOf": [{"type": "null"}, {"type": "string"}]}, False),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, True),
    ({"not": {"type": "null"}}, True),
    ({"if": {}, "then": {}}, True),
    ({"$defs": {"z": {"maxLength": 5}}, "properties": {"z": {"$ref": "#/$defs/z"}}}, True),
    ({"$defs": {"unused": {"maxLength": 5}}, "properties": {"z": {"type": "string"}}}, False),
    ({"patternProperties": {"^a": {}}}, True),
    ({"properties": {"a": False}}, True),
    ({"allOf": [{"type": "object"}, {"minProperties": 1}]}, True),
])
def test_has_value_constraints(schema, expected):
    assert has_value_constraints(schema) is expected


def test_has_value_constraints_with_the_arrow_type():
    schema = {"type": "object", "properties": {"day": {"type": "string", "format": "date"},
                                               "at": {"type": "string", "format": "date-time"}}}
    typed = _struct(day=(pa.date32(), False), at=(pa.timestamp("ms"), False))
    assert has_value_constraints(schema) is True
    assert has_value_constraints(schema, typed) is False  # the encoder writes valid dates itself
    as_text = _struct(day=(pa.string(), False), at=(pa.timestamp("ms"), False))
    assert has_value_constraints(schema, as_text) is True
    # A map: which keys it has is only known per row.
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    int_map = pa.map_(pa.string(), pa.field("v", pa.int64(), nullable=False))
    assert has_value_constraints(closed, int_map) is True
    assert has_value_constraints(closed, _struct(a=(pa.int64(), False))) is False
    # Only constraints the data reaches count.
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 2}}}
    assert has_value_constraints(schema, _struct(a=(pa.int64(), False))) is False
    assert has_value_constraints(schema, _struct(a=(pa.int64(), False), b=(pa.string(), False))) is True


def _random_value(rng, depth=0):
    kind = rng.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randrange(-3, 12)
    if kind == 2:
        return rng.choice([0.0, 1.0, 1.5, 4.5, 4.2, -0.5, 5.0, 1e300])
    if kind in (3, 4, 5):
        return rng.choice(["", "a", "b", "abc", "abcd", "12345", "x", "EUR", "2024-02-29", "2023-02-30",
                           "ada@example.com", "10.0.0.1", "\U0001F600", "äö"])
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["a", "b", "k", "x", "y", "n", "v", "zip", "street", "address", "child", "next", "x_a",
            "x_b", "abcd", "tags"]
    return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_random_values_agree_with_jsonschema():
    """Every schema of the matrix against random values: the verdicts (valid or not) agree."""
    import random

    rng = random.Random(40)
    checked = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers
    compared = 0
    for case, schema, _, _ in MATRIX:
        if case in DIFFERS_FROM_JSONSCHEMA or (schema.get("format") in CHECKED_FORMATS
                                               and schema["format"] not in checked):
            continue
        ours = compile_validator(schema)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        theirs = cls(schema, format_checker=cls.FORMAT_CHECKER)
        for _ in range(60):
            value = _random_value(rng)
            try:
                ours(value)
                valid = True
            except ValidationError:
                valid = False
            assert theirs.is_valid(value) is valid, (case, value)
            compared += 1
    assert compared > 5000


@pytest.mark.parametrize("uri", [D4, D6, D7])
def test_the_draft_meta_schemas_compile_and_agree_with_jsonschema(uri):
    """The draft-04/06/07 meta-schemas (recursive $ref to "#", definitions, dependencies, anyOf of
    types) are schemas like any other: every schema of the matrix and its value, and a few invalid
    schemas, get the same verdict from the compiled validator and from jsonschema."""
    meta = jsonschema_specifications.REGISTRY.contents(uri)
    ours = compile_validator(meta)
    theirs = jsonschema.validators.validator_for(meta)(meta)
    instances = [c[1] for c in MATRIX] + [c[2] for c in MATRIX] + [
        {"type": "strng"}, {"minLength": -1}, {"required": "a"}, {"properties": {"a": 3}},
        {"items": [{"type": 1}]}, {"enum": []}, {"dependencies": {"a": [1]}}]
    verdicts = []
    for instance in instances:
        try:
            ours(instance)
            valid = True
        except ValidationError:
            valid = False
        assert theirs.is_valid(instance) is valid, instance
        verdicts.append(valid)
    assert True in verdicts and False in verdicts
    with pytest.raises(ValidationError, match=r"^.*\$\.minLength: -1 is not greater than or equal to 0"):
        ours({"minLength": -1})
