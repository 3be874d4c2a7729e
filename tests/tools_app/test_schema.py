from __future__ import annotations

import json
from typing import Any

import pytest

from engine.tools.schema import (
    MAX_REPORTED_ERRORS,
    ArgumentsInvalid,
    SchemaError,
    parse_arguments,
    to_json_schema,
    validate_arguments,
)

EMPTY = {"type": "object", "properties": {}, "required": []}


def simplified(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


RAW_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "integer"}},
        "address": {"$ref": "#/$defs/address"},
    },
    "$defs": {"address": {"type": "object", "properties": {"zip": {"type": "string"}}}},
}

CONVERSIONS = [
    ("none", None, EMPTY),
    ("empty", {}, EMPTY),
    (
        "shorthand",
        {"city": "string", "limit": "number?", "verbose": "boolean", "count": "integer"},
        simplified(
            {
                "city": {"type": "string"},
                "limit": {"type": "number"},
                "verbose": {"type": "boolean"},
                "count": {"type": "integer"},
            },
            ["city", "verbose", "count"],
        ),
    ),
    (
        "long form keeps description and enum",
        {"city": {"type": "string", "description": "City name", "enum": ["Paris", "Rome"]}},
        simplified(
            {"city": {"type": "string", "description": "City name", "enum": ["Paris", "Rome"]}},
            ["city"],
        ),
    ),
    (
        "long form optional true",
        {"limit": {"type": "integer", "optional": True}},
        simplified({"limit": {"type": "integer"}}, []),
    ),
    (
        "long form required false",
        {"limit": {"type": "integer", "required": False}},
        simplified({"limit": {"type": "integer"}}, []),
    ),
    (
        "long form question mark",
        {"limit": {"type": "number?"}},
        simplified({"limit": {"type": "number"}}, []),
    ),
    (
        "mixed forms keep declaration order",
        {"zeta": "string", "alpha": {"type": "boolean", "description": "Flag"}, "mid": "number?"},
        simplified(
            {
                "zeta": {"type": "string"},
                "alpha": {"type": "boolean", "description": "Flag"},
                "mid": {"type": "number"},
            },
            ["zeta", "alpha"],
        ),
    ),
    ("raw schema passes through", RAW_SCHEMA, RAW_SCHEMA),
]


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [row[1:] for row in CONVERSIONS],
    ids=[row[0] for row in CONVERSIONS],
)
def test_to_json_schema(parameters: object, expected: dict[str, Any]) -> None:
    assert to_json_schema(parameters) == expected


def test_raw_schema_is_copied() -> None:
    schema = to_json_schema(RAW_SCHEMA)
    schema["properties"]["tags"]["items"]["type"] = "string"
    assert RAW_SCHEMA["properties"]["tags"]["items"]["type"] == "integer"


def _wide_schema(size: int) -> dict[str, Any]:
    return {"type": "object", "description": "x" * size}


SCHEMA_ERRORS = [
    ("not an object", ["city"], "parameters: expected an object mapping argument names"),
    (
        "unknown type",
        {"city": "strng"},
        "parameters.city: unknown type 'strng' (use string, number, integer or boolean)",
    ),
    ("unknown long form type", {"city": {"type": "text"}}, "parameters.city.type: unknown type"),
    ("type not a string", {"city": {"type": 3}}, "parameters.city.type: type must be a string"),
    ("declaration not a type", {"city": 3}, "parameters.city: expected a type name"),
    ("missing long form type", {"city": {"description": "x"}}, "parameters.city: missing 'type'"),
    ("unknown long form key", {"city": {"type": "string", "min": 1}}, "unknown key 'min'"),
    (
        "description not a string",
        {"city": {"type": "string", "description": 1}},
        "parameters.city.description: must be a string",
    ),
    ("empty enum", {"city": {"type": "string", "enum": []}}, "parameters.city.enum: must be a"),
    (
        "enum of wrong type",
        {"city": {"type": "string", "enum": ["Paris", 2]}},
        "parameters.city.enum[1]: 2 is not of type 'string'",
    ),
    (
        "duplicate enum",
        {"city": {"type": "string", "enum": ["a", "a"]}},
        "parameters.city.enum: values must be unique",
    ),
    (
        "optional not a bool",
        {"city": {"type": "string", "optional": "yes"}},
        "parameters.city.optional: must be true or false",
    ),
    (
        "contradictory flags",
        {"city": {"type": "string?", "required": True}},
        "parameters.city: declared both optional and required",
    ),
    ("name with dash", {"my-city": "string"}, "parameters.my-city: invalid argument name"),
    ("name starting with digit", {"1city": "string"}, "parameters.1city: invalid argument name"),
    ("name too long", {"a" * 65: "string"}, "invalid argument name"),
    ("name with newline", {"city\n": "string"}, "invalid argument name"),
    (
        "too many properties",
        {f"p{i}": "string" for i in range(65)},
        "parameters: at most 64 arguments are allowed, got 65",
    ),
    (
        "invalid raw schema",
        {"type": "object", "properties": {"city": {"type": "strng"}}},
        "parameters.properties.city.type: 'strng' is not valid",
    ),
    (
        "invalid raw pattern",
        {"type": "object", "properties": {"city": {"type": "string", "pattern": "("}}},
        "parameters.properties.city.pattern: '(' is not a 'regex'",
    ),
    ("raw root not object", {"type": "string"}, "parameters.type: a raw JSON Schema must have"),
    (
        "remote reference",
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
        "parameters.properties.a.$ref: only local references",
    ),
    ("raw schema too large", _wide_schema(16 * 1024), "parameters: raw JSON Schema is"),
    ("raw schema not JSON", {"type": "object", "default": {1, 2}}, "not representable as JSON"),
]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [row[1:] for row in SCHEMA_ERRORS],
    ids=[row[0] for row in SCHEMA_ERRORS],
)
def test_schema_errors(parameters: object, message: str) -> None:
    with pytest.raises(SchemaError) as raised:
        to_json_schema(parameters)
    assert message in str(raised.value)


def test_limits_are_inclusive() -> None:
    assert len(to_json_schema({f"p{i}": "string" for i in range(64)})["properties"]) == 64
    assert to_json_schema({"a" * 64: "string"})["required"] == ["a" * 64]
    padding = 16 * 1024 - len(json.dumps(_wide_schema(0)))
    assert to_json_schema(_wide_schema(padding)) == _wide_schema(padding)


def test_schema_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown type"):
        to_json_schema({"city": "strng"})


WEATHER = to_json_schema(
    {
        "city": {"type": "string", "enum": ["Paris", "Rome"]},
        "limit": "number?",
        "days": "integer?",
        "metric": "boolean?",
    }
)
NESTED = {
    "type": "object",
    "properties": {
        "when": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "integer"}},
        "address": {
            "type": "object",
            "properties": {"zip": {"type": "string"}},
            "required": ["zip"],
        },
    },
}

VALID_ARGUMENTS = [
    ("required only", WEATHER, {"city": "Paris"}),
    ("all fields", WEATHER, {"city": "Rome", "limit": 2.5, "days": 3, "metric": False}),
    ("empty schema", EMPTY, {}),
    ("nested", NESTED, {"when": "2024-05-01", "tags": [1, 2], "address": {"zip": "75001"}}),
]


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [row[1:] for row in VALID_ARGUMENTS],
    ids=[row[0] for row in VALID_ARGUMENTS],
)
def test_valid_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    validate_arguments(schema, arguments)


INVALID_ARGUMENTS = [
    ("not in enum", WEATHER, {"city": "x"}, "city: 'x' is not one of ['Paris', 'Rome']"),
    (
        "wrong type",
        WEATHER,
        {"city": "Paris", "limit": "ten"},
        "limit: 'ten' is not of type 'number'",
    ),
    ("boolean is not a number", WEATHER, {"city": "Paris", "limit": True}, "limit: True is not"),
    ("float is not an integer", WEATHER, {"city": "Paris", "days": 1.5}, "days: 1.5 is not of"),
    ("missing required", WEATHER, {}, "missing required argument 'city'"),
    ("unexpected", WEATHER, {"city": "Paris", "units": "C"}, "unexpected argument 'units'"),
    (
        "all errors sorted by path",
        WEATHER,
        {"metric": "yes", "city": "x", "limit": "ten"},
        "city: 'x' is not one of ['Paris', 'Rome']; limit: 'ten' is not of type 'number'; "
        "metric: 'yes' is not of type 'boolean'",
    ),
    (
        "nested paths",
        NESTED,
        {"tags": [1, "a"], "address": {}},
        "address: missing required argument 'zip'; tags[1]: 'a' is not of type 'integer'",
    ),
    ("format", NESTED, {"when": "tomorrow"}, "when: 'tomorrow' is not a 'date'"),
    ("list instead of object", WEATHER, [1, 2], "arguments must be a JSON object, got array"),
    ("string instead of object", WEATHER, "Paris", "arguments must be a JSON object, got string"),
    ("null instead of object", WEATHER, None, "arguments must be a JSON object, got null"),
]


@pytest.mark.parametrize(
    ("schema", "arguments", "message"),
    [row[1:] for row in INVALID_ARGUMENTS],
    ids=[row[0] for row in INVALID_ARGUMENTS],
)
def test_invalid_arguments(schema: dict[str, Any], arguments: object, message: str) -> None:
    with pytest.raises(ArgumentsInvalid) as raised:
        validate_arguments(schema, arguments)
    if message.count(";"):
        assert str(raised.value) == message
    else:
        assert message in str(raised.value)


def test_error_count_is_capped() -> None:
    schema = to_json_schema({f"p{i}": "integer" for i in range(8)})
    with pytest.raises(ArgumentsInvalid) as raised:
        validate_arguments(schema, {f"p{i}": "x" for i in range(8)})
    assert raised.value.errors[:MAX_REPORTED_ERRORS] == [
        f"p{i}: 'x' is not of type 'integer'" for i in range(MAX_REPORTED_ERRORS)
    ]
    assert raised.value.errors[MAX_REPORTED_ERRORS:] == ["and 3 more"]


def test_long_values_are_shortened() -> None:
    with pytest.raises(ArgumentsInvalid) as raised:
        validate_arguments(WEATHER, {"city": "x" * 5000})
    assert str(raised.value).startswith("city: 'xxx")
    assert len(str(raised.value)) <= 210


def test_unresolvable_local_reference_is_a_schema_error() -> None:
    schema = to_json_schema({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}})
    with pytest.raises(SchemaError, match="unresolvable reference"):
        validate_arguments(schema, {"a": 1})


PARSED = [
    ("empty string", "", {}),
    ("whitespace", "  \n", {}),
    ("object", '{"city": "Paris", "limit": 3}', {"city": "Paris", "limit": 3}),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [row[1:] for row in PARSED], ids=[row[0] for row in PARSED]
)
def test_parse_arguments(raw: str, expected: dict[str, Any]) -> None:
    assert parse_arguments(raw) == expected


UNPARSABLE = [
    ("invalid json", '{"city": ', "arguments are not valid JSON: Expecting value at line 1"),
    ("trailing comma", '{"a": 1,}', "arguments are not valid JSON"),
    ("array", "[1, 2]", "arguments must be a JSON object, got array"),
    ("string", '"Paris"', "arguments must be a JSON object, got string"),
    ("null", "null", "arguments must be a JSON object, got null"),
    ("number", "3", "arguments must be a JSON object, got number"),
    ("nan", '{"limit": NaN}', "arguments are not valid JSON: NaN is not allowed"),
    ("too deep", "[" * 100_000 + "]" * 100_000, "arguments are nested too deeply"),
]


@pytest.mark.parametrize(
    ("raw", "message"), [row[1:] for row in UNPARSABLE], ids=[row[0] for row in UNPARSABLE]
)
def test_parse_arguments_errors(raw: str, message: str) -> None:
    with pytest.raises(ArgumentsInvalid) as raised:
        parse_arguments(raw)
    assert message in str(raised.value)


# --- schemas that would make validation recurse without end -------------------------------

LOOPS = [
    {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
     "properties": {"x": {"$ref": "#/$defs/A"}}},
    {"$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]}},
     "properties": {"x": {"$ref": "#/$defs/A"}}},
    {"anyOf": [{"$ref": "#"}]},
    {"$defs": {"A": {"not": {"$ref": "#/$defs/B"}}, "B": {"if": {"$ref": "#/$defs/A"}}}},
]  # fmt: skip


@pytest.mark.parametrize("schema", LOOPS)
def test_looping_references_are_refused_when_declared(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaError, match="loop back"):
        to_json_schema({"type": "object", **schema})


def test_a_recursive_tree_is_still_a_schema() -> None:
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    schema = to_json_schema(node)
    validate_arguments(schema, {"kids": [{"kids": []}]})


def test_nesting_past_the_depth_limit_is_refused() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(SchemaError, match="levels deep"):
        to_json_schema(deep)


def test_a_looping_schema_that_got_through_fails_validation_as_a_schema_error() -> None:
    """Stored before the check (or slipping past it): the call fails, never the turn."""
    loop = {"type": "object", **LOOPS[0]}
    with pytest.raises(SchemaError, match="refers to itself"):
        validate_arguments(loop, {"x": "a"})
    with pytest.raises(SchemaError, match="could not be used"):
        validate_arguments({"type": "object", "properties": {"x": {"pattern": "("}}}, {"x": "a"})
