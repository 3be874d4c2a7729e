"""Text that PostgreSQL can keep: what a server or an LLM wrote, made storable.

PostgreSQL ``text`` and ``jsonb`` refuse a NUL character, and ``jsonb`` a lone UTF-16
surrogate (``"\\ud800"`` in JSON): one such character in an answer would fail the whole
save (``DataError``). Both are dropped; nothing else changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    return _UNSTORABLE.sub("", text)


def strings_mapped(value: Any, change: Callable[[str], str]) -> Any:
    """A JSON value with ``change`` applied to every string in it, keys included (for
    values whose depth was checked: it recurses)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(str(key)): strings_mapped(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [strings_mapped(item, change) for item in value]
    return value
