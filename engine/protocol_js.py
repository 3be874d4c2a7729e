"""The browser library's copy of the protocol's names, generated from ``protocol.py``.

``frontend/lib`` is served as it is (a page loads it with no build step), so the
generated files are committed: ``manage.py protocol_js`` writes them, and a test fails
when they differ from what this module renders (a new event, error or close code).
"""

from __future__ import annotations

import json
import re
from enum import Enum

from engine import protocol

JS_NAME = "protocol-generated.js"
DTS_NAME = "protocol-generated.d.ts"
_HEADER = "// Generated from engine/protocol.py by `python manage.py protocol_js`: do not edit.\n"


def _constant(name: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")


def _tables() -> list[tuple[str, str, dict[str, str | int]]]:
    """(constant, its TypeScript type, name → wire value), in the files' order."""

    def members(enum: type[Enum]) -> dict[str, str | int]:
        return {name: member.value for name, member in enum.__members__.items()}

    return [
        ("SERVER_EVENTS", "ServerEventType", {_constant(n): n for n in protocol.SERVER_EVENTS}),
        ("CLIENT_MESSAGES", "ClientMessageType", {_constant(n): n for n in protocol.MESSAGE_TYPES}),
        ("ERROR_CODES", "ErrorCode", members(protocol.ErrorCode)),
        ("CLOSE_CODES", "CloseCode", members(protocol.CloseCode)),
        ("TOOL_STATUSES", "ToolStatus", members(protocol.ToolStatus)),
    ]


def render_js() -> str:
    lines = [_HEADER]
    for table, _type, entries in _tables():
        lines.append(f"export const {table} = Object.freeze({{")
        lines.extend(f"  {key}: {json.dumps(value)}," for key, value in entries.items())
        lines.append("});\n")
    return "\n".join(lines)


def render_dts() -> str:
    lines = [_HEADER]
    for table, type_name, entries in _tables():
        lines.append(f"export declare const {table}: {{")
        lines.extend(f"  readonly {key}: {json.dumps(value)};" for key, value in entries.items())
        lines.append("};")
        union = " | ".join(sorted({json.dumps(value) for value in entries.values()}))
        lines.append(f"export type {type_name} = {union};\n")
    return "\n".join(lines)


def rendered() -> dict[str, str]:
    """File name in ``frontend/lib`` → its generated text."""
    return {JS_NAME: render_js(), DTS_NAME: render_dts()}
