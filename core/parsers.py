"""The REST API's JSON parser: DRF's, refusing what nothing after it could handle.

- Depth. Python's parser gives up past about a thousand levels with a RecursionError (not
  the ValueError DRF answers 400 for: a 500), and every check that walks a value
  recursively (NUL scans, serializers) fails a little below that. No body of this API
  needs more than a few dozen levels (a tool's JSON Schema: 64), so a deeper one is
  refused before anything walks it.
- Lone surrogates. JSON lets ``"\\ud800"`` through; UTF-8 cannot carry half a UTF-16 pair,
  so the value could not be stored, sealed, or even quoted back in an error (the answer's
  own encoding failed: a 500). Refused as the WebSocket's frames are (``protocol.decode``).
"""

from __future__ import annotations

import json
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from engine.protocol import SURROGATE

JSON_BODY_MAX_DEPTH = 100
TOO_DEEP = f"JSON parse error - the body nests more than {JSON_BODY_MAX_DEPTH} levels deep"
LONE_SURROGATE = (
    "JSON parse error - a string holds a lone UTF-16 surrogate (\\ud800-\\udfff without its "
    "pair), which UTF-8 cannot carry"
)


class Refused(ValueError):
    """The JSON is too deep, or holds a lone surrogate; the message says which."""


def check_body(value: Any) -> None:
    """``Refused`` if ``value`` nests too deep or holds a lone surrogate (one walk, no
    recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if SURROGATE.search(node):  # after parsing, a pair is one character
                raise Refused(LONE_SURROGATE)
            continue
        if depth > JSON_BODY_MAX_DEPTH:
            raise Refused(TOO_DEEP)
        if isinstance(node, dict):
            stack += [(key, depth) for key in node]
            node = list(node.values())
        elif not isinstance(node, list):
            continue  # a number, true, false or null
        stack += [(child, depth + 1) for child in node if isinstance(child, str | dict | list)]


def loads(text: str) -> Any:
    """``json.loads`` for text a person or a model wrote (a dashboard form, a stored tool
    call): what the API's parser refuses is a ``Refused`` (a ValueError) here too, never a
    RecursionError."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise Refused(TOO_DEEP) from None
    check_body(value)
    return value


class JsonParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        try:
            check_body(data)
        except Refused as refused:
            raise ParseError(str(refused)) from None
        return data
