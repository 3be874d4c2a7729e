"""Tool parameter declarations -> JSON Schema, and validation of the arguments an LLM produces.

Tools declare parameters in one of three forms (DESIGN.md §3):

- shorthand: `{"city": "string", "limit": "number?"}`, a trailing `?` marking it optional;
- long form: `{"city": {"type": "string", "description": "...", "enum": [...]}}`, optionally
  with `"optional": true` or `"required": false`; it can be mixed with shorthand;
- raw JSON Schema, recognised by a root `"type"` key and passed through once checked.

Error messages name the offending path because tool authors read them in the dashboard, and
argument errors are short because they go back to the LLM so it can correct its call.
"""

from __future__ import annotations

import copy
import json
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, cast

import jsonschema
import referencing.exceptions
from jsonschema import Draft202012Validator

MAX_PROPERTIES = 64
MAX_RAW_SCHEMA_BYTES = 16 * 1024
MAX_REPORTED_ERRORS = 5
MAX_SCHEMA_DEPTH = 64  # objects and lists inside one another (a property level is two)
MAX_REF_CHAIN = 32  # schemas standing for one value through $ref/allOf/anyOf/... in a row
_MAX_MESSAGE_CHARS = 200

SIMPLE_TYPES = ("string", "number", "integer", "boolean")
_LONG_FORM_KEYS = frozenset({"type", "description", "enum", "optional", "required"})
_PROPERTY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class SchemaError(ValueError):
    """A tool's parameter declaration is unusable; the message is ``<path>: <reason>``,
    the path from ``parameters`` down (``parameters.unit.enum``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.path, _, self.reason = message.partition(": ")


class ArgumentsInvalid(ValueError):
    """The LLM's arguments do not fit the tool's schema; the message is meant for the LLM."""

    def __init__(self, *errors: str) -> None:
        super().__init__("; ".join(errors))
        self.errors = list(errors)


def to_json_schema(parameters: object) -> dict[str, Any]:
    """Convert a tool's declared parameters to a JSON Schema for an object of arguments."""
    if parameters is None or parameters == {}:
        return {"type": "object", "properties": {}, "required": []}
    if not isinstance(parameters, dict):
        raise SchemaError(
            f"parameters: expected an object mapping argument names to types, "
            f"got {_json_type(parameters)}"
        )
    if "type" in parameters:
        return _checked_raw_schema(parameters)
    return _from_simplified(parameters)


# --- simplified forms -------------------------------------------------------------------------


def _from_simplified(parameters: dict[Any, Any]) -> dict[str, Any]:
    if len(parameters) > MAX_PROPERTIES:
        raise SchemaError(
            f"parameters: at most {MAX_PROPERTIES} arguments are allowed, got {len(parameters)}"
        )
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, declaration in parameters.items():
        path = f"parameters.{name}"
        if not isinstance(name, str) or not _PROPERTY_NAME.fullmatch(name):
            raise SchemaError(
                f"{path}: invalid argument name {name!r} (letters, digits and underscores, "
                f"not starting with a digit, at most 64 characters)"
            )
        properties[name], optional = _property(declaration, path)
        if not optional:
            required.append(name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _property(declaration: object, path: str) -> tuple[dict[str, Any], bool]:
    """Return the property's JSON Schema and whether it is optional."""
    if isinstance(declaration, str):
        type_name, optional = _simple_type(declaration, path)
        return {"type": type_name}, optional
    if isinstance(declaration, dict):
        return _long_form(declaration, path)
    raise SchemaError(
        f"{path}: expected a type name such as 'string' or an object with a 'type', "
        f"got {_json_type(declaration)}"
    )


def _simple_type(declaration: object, path: str) -> tuple[str, bool]:
    if not isinstance(declaration, str):
        raise SchemaError(f"{path}: type must be a string, got {_json_type(declaration)}")
    type_name = declaration.strip()
    optional = type_name.endswith("?")
    type_name = type_name.removesuffix("?").strip()
    if type_name not in SIMPLE_TYPES:
        raise SchemaError(
            f"{path}: unknown type {type_name!r} (use string, number, integer or boolean)"
        )
    return type_name, optional


def _long_form(declaration: dict[Any, Any], path: str) -> tuple[dict[str, Any], bool]:
    unknown = sorted(str(key) for key in declaration if key not in _LONG_FORM_KEYS)
    if unknown:
        raise SchemaError(
            f"{path}: unknown key {unknown[0]!r} (allowed: type, description, enum, optional, "
            f"required; use a raw JSON Schema for anything else)"
        )
    if "type" not in declaration:
        raise SchemaError(f"{path}: missing 'type'")
    type_name, optional = _simple_type(declaration["type"], f"{path}.type")
    schema: dict[str, Any] = {"type": type_name}
    if "description" in declaration:
        if not isinstance(declaration["description"], str):
            raise SchemaError(f"{path}.description: must be a string")
        schema["description"] = declaration["description"]
    if "enum" in declaration:
        schema["enum"] = _checked_enum(declaration["enum"], type_name, f"{path}.enum")
    return schema, _is_optional(declaration, optional, path)


def _checked_enum(values: object, type_name: str, path: str) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise SchemaError(f"{path}: must be a non-empty list")
    type_check = Draft202012Validator({"type": type_name})
    for index, value in enumerate(values):
        if not type_check.is_valid(value):
            raise SchemaError(f"{path}[{index}]: {value!r} is not of type {type_name!r}")
    if len({json.dumps(value) for value in values}) != len(values):
        raise SchemaError(f"{path}: values must be unique")
    return list(values)


def _is_optional(declaration: dict[Any, Any], marked_optional: bool, path: str) -> bool:
    for flag in ("optional", "required"):
        if flag in declaration and not isinstance(declaration[flag], bool):
            raise SchemaError(f"{path}.{flag}: must be true or false")
    optional = bool(
        marked_optional or declaration.get("optional") or declaration.get("required") is False
    )
    if optional and declaration.get("required") is True:
        raise SchemaError(f"{path}: declared both optional and required")
    return optional


# --- raw JSON Schema --------------------------------------------------------------------------


def _checked_raw_schema(schema: dict[Any, Any]) -> dict[str, Any]:
    _check_depth(schema)
    try:
        size = len(json.dumps(schema).encode())
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"parameters: not representable as JSON ({exc})") from None
    if size > MAX_RAW_SCHEMA_BYTES:
        raise SchemaError(
            f"parameters: raw JSON Schema is {size} bytes, the limit is {MAX_RAW_SCHEMA_BYTES}"
        )
    try:
        Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaError(_located("parameters", exc.absolute_path, exc.message)) from None
    if schema["type"] != "object":
        raise SchemaError(
            f"parameters.type: a raw JSON Schema must have type 'object', got {schema['type']!r}"
            f" (an argument named 'type' needs the raw form)"
        )
    _check_local_refs(schema, "parameters")
    _check_ref_loops(schema)
    return copy.deepcopy(schema)


def _check_depth(schema: object) -> None:
    """Deep nesting would make every check of it recurse that deep: refused up front."""
    stack: list[tuple[object, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"parameters: nested more than {MAX_SCHEMA_DEPTH} levels deep")
        children = list(node.values()) if isinstance(node, dict) else node
        if isinstance(children, list):
            stack += [(child, depth + 1) for child in children if isinstance(child, dict | list)]


def _check_ref_loops(root: dict[Any, Any]) -> None:
    """A schema whose references come back to themselves for the same value
    (``A: {$ref: B}, B: {$ref: A}``) would make validation recurse for ever: refused.
    (A reference inside ``properties``/``items`` is fine: it describes a nested value.)"""
    done: set[int] = set()
    for start in _dicts(root):
        if id(start) in done:
            continue
        on_path = {id(start)}
        stack = [(start, iter(_same_value(root, start)))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.discard(id(node))
                done.add(id(node))
            elif id(child) in on_path:
                raise SchemaError("parameters: its $ref references loop back to themselves")
            elif id(child) not in done:
                if len(stack) >= MAX_REF_CHAIN:
                    raise SchemaError(f"parameters: more than {MAX_REF_CHAIN} references in a row")
                on_path.add(id(child))
                stack.append((child, iter(_same_value(root, child))))


def _dicts(root: object) -> Iterator[dict[Any, Any]]:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node


def _same_value(root: dict[Any, Any], node: dict[Any, Any]) -> list[dict[Any, Any]]:
    """The schemas that ``node`` applies to the very value it describes."""
    found: list[object] = [_pointed(root, node.get(key)) for key in ("$ref", "$dynamicRef")]
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            found += node[key]
    found += [node.get(key) for key in ("not", "if", "then", "else")]
    if isinstance(node.get("dependentSchemas"), dict):
        found += node["dependentSchemas"].values()
    return [schema for schema in found if isinstance(schema, dict)]


def _pointed(root: dict[Any, Any], ref: object) -> object:
    """What a local JSON pointer (``#/$defs/A``) points at; None for anything else (an
    anchor is left to the validator, whose failure then fails the call, not the turn)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: object = root
    for raw in ref[2:].split("/"):
        part = urllib.parse.unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _check_local_refs(node: object, path: str) -> None:
    # Only "#..." pointers: a tenant's schema must not make the platform fetch anything.
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and not str(value).startswith("#"):
                raise SchemaError(f"{path}.{key}: only local references ('#...') are allowed")
            _check_local_refs(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _check_local_refs(value, f"{path}[{index}]")


# --- arguments --------------------------------------------------------------------------------


def parse_arguments(raw: str) -> dict[str, Any]:
    """Parse the JSON text of an LLM tool call; an empty string means no arguments."""
    if not raw.strip():
        return {}
    try:
        arguments = json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ArgumentsInvalid(
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ArgumentsInvalid("arguments are nested too deeply") from None
    if not isinstance(arguments, dict):
        raise ArgumentsInvalid(f"arguments must be a JSON object, got {_json_type(arguments)}")
    return arguments


def _reject_constant(name: str) -> NoReturn:
    raise ArgumentsInvalid(f"arguments are not valid JSON: {name} is not allowed")


def validate_arguments(schema: dict[str, Any], arguments: object) -> None:
    """Raise `ArgumentsInvalid` listing (up to a few of) the ways `arguments` break `schema`."""
    if not isinstance(arguments, dict):
        raise ArgumentsInvalid(f"arguments must be a JSON object, got {_json_type(arguments)}")
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    try:
        errors = sorted(validator.iter_errors(arguments), key=_error_sort_key)
    except referencing.exceptions.Unresolvable as exc:
        # The tool's schema is broken, not the call; the LLM cannot fix that.
        raise SchemaError(f"parameters: unresolvable reference ({exc})") from None
    except RecursionError:
        raise SchemaError("parameters: the schema refers to itself without end") from None
    except Exception as exc:  # whatever else a broken schema does fails the tool, not the turn
        why = type(exc).__name__
        raise SchemaError(f"parameters: the schema could not be used ({why})") from None
    messages = list(dict.fromkeys(_messages(errors)))
    if not messages:
        return
    shown = messages[:MAX_REPORTED_ERRORS]
    if len(messages) > len(shown):
        shown.append(f"and {len(messages) - len(shown)} more")
    raise ArgumentsInvalid(*shown)


def _error_sort_key(error: jsonschema.ValidationError) -> tuple[Any, ...]:
    # Paths mix names and list indexes; tag each part so the two never get compared.
    return tuple((isinstance(part, str), part) for part in error.absolute_path)


def _messages(errors: Iterable[jsonschema.ValidationError]) -> Iterator[str]:
    for error in errors:
        if error.validator == "required" and isinstance(error.instance, dict):
            for name in cast("list[str]", error.validator_value):  # the required names
                if name not in error.instance:
                    yield _located("", error.absolute_path, f"missing required argument {name!r}")
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            for name in _unexpected(error.schema, error.instance):
                yield _located("", error.absolute_path, f"unexpected argument {name!r}")
        else:
            yield _located("", error.absolute_path, error.message)


def _unexpected(schema: Any, instance: dict[str, Any]) -> list[str]:
    declared = schema.get("properties", {}) if isinstance(schema, dict) else {}
    patterns = schema.get("patternProperties", {}) if isinstance(schema, dict) else {}
    return [
        name
        for name in instance
        if name not in declared and not any(re.search(pattern, name) for pattern in patterns)
    ]


def _located(root: str, path: Iterable[str | int], message: str) -> str:
    location = root
    for part in path:
        if isinstance(part, int):
            location += f"[{part}]"
        else:
            location = f"{location}.{part}" if location else part
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[: _MAX_MESSAGE_CHARS - 3] + "..."
    return f"{location}: {message}" if location else message


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)
