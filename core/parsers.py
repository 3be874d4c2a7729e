"""The REST API's JSON parser: DRF's, with a ceiling on how deep a body may nest.

Python's parser gives up past about a thousand levels with a RecursionError (not the
ValueError DRF answers 400 for: a 500), and every check that walks a value recursively
(NUL and surrogate scans, serializers) fails a little below that. No body of this API
needs more than a few dozen levels (a tool's JSON Schema: 64), so a deeper one is refused
before anything walks it.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

JSON_BODY_MAX_DEPTH = 100
TOO_DEEP = f"JSON parse error - the body nests more than {JSON_BODY_MAX_DEPTH} levels deep"


def nesting_depth(value: Any) -> int:
    """How many arrays and objects deep ``value`` goes (walked without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if isinstance(children, list) or isinstance(node, dict):
            deepest = max(deepest, depth)
            stack += [(child, depth + 1) for child in children if isinstance(child, dict | list)]
    return deepest


class JsonParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if nesting_depth(data) > JSON_BODY_MAX_DEPTH:
            raise ParseError(TOO_DEEP)
        return data
