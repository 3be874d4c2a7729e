"""An agent's tools, checked once: by the REST API, the dashboard's editor and the admin.

The rules are a browser's ``configure`` (so a saved agent always loads), the parameters'
schema, and each server handler's syntax. Every refusal is a ``ToolError`` on the field
it names (``tools[1].handler``): the API answers them as its fields, the editor puts them
on its tool blocks' fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from pydantic import ValidationError as PydanticError

from engine import protocol
from engine.tools.schema import SchemaError, to_json_schema
from tools_app.services import handler_check


@dataclass(frozen=True)
class ToolError:
    message: str
    index: int | None = None  # which tool; None: the list as a whole
    field: str | None = None  # that tool's field, by its wire name (``timeoutMs``)
    within: str = ""  # where inside the field: ``x`` of the parameters, ``[0]``

    @property
    def path(self) -> str:
        """``tools[0].parameters.x``, as the API names the field."""
        loc = tuple(part for part in ("tools", self.index, self.field) if part is not None)
        path = protocol.format_loc(loc)
        if not self.within:
            return path
        return path + (self.within if self.within.startswith("[") else f".{self.within}")

    @property
    def inside_field(self) -> str:
        """The message as the field itself shows it (``x: bad type``)."""
        return f"{self.within}: {self.message}" if self.within else self.message


class AgentToolsInvalid(ValidationError):
    """Tools refused; ``tool_errors`` says where. A ValidationError keyed by path."""

    def __init__(self, tool_errors: list[ToolError]) -> None:
        by_path: dict[str, list[str]] = {}
        for error in tool_errors:
            by_path.setdefault(error.path, []).append(error.message)
        super().__init__(by_path)
        self.tool_errors = tool_errors

    def __str__(self) -> str:
        return "; ".join(f"{error.path}: {error.message}" for error in self.tool_errors)


def _located(loc: tuple[Any, ...], message: str) -> ToolError:
    if len(loc) >= 2 and loc[0] == "tools" and isinstance(loc[1], int):
        field = loc[2] if len(loc) > 2 and isinstance(loc[2], str) else None
        within = protocol.format_loc(loc[3 if field else 2 :])
        return ToolError(message, index=loc[1], field=field, within=within)
    return ToolError(message, within=protocol.format_loc(loc[1:]))


def _schema_error(index: int, exc: SchemaError) -> ToolError:
    # exc.path is "parameters" or "parameters.x.enum[2]": the field, then inside it.
    within = exc.path.removeprefix("parameters").lstrip(".")
    return ToolError(exc.reason, index=index, field="parameters", within=within)


def agent_tools_check(tools: list[Any]) -> list[protocol.ToolDeclaration]:
    """The declared tools, or ``AgentToolsInvalid`` with every refusal found."""
    if any("\x00" in text for text in protocol.strings_in(tools)):  # jsonb cannot hold NUL
        raise AgentToolsInvalid([ToolError("text must not contain NUL characters")])
    try:
        message = protocol.ConfigureMessage.model_validate(
            {"type": "configure", "tools": tools}, by_alias=True, by_name=False
        )
    except PydanticError as exc:
        located = protocol.error_locations(exc)
        raise AgentToolsInvalid([_located(loc, text) for loc, text in located]) from None
    declared = list(message.tools or [])
    errors = []
    for index, tool in enumerate(declared):
        try:
            to_json_schema(tool.parameters)
        except SchemaError as exc:
            errors.append(_schema_error(index, exc))
        # Refused here, not at the first call: a broken handler would only surface as
        # a failed tool call in the middle of a conversation. Parsed in a sandbox
        # worker, never run; about 3 ms per handler.
        syntax_error = None if tool.handler is None else handler_check(tool.handler)
        if syntax_error is not None:
            errors.append(ToolError(syntax_error, index=index, field="handler"))
    if errors:
        raise AgentToolsInvalid(errors)
    return declared
