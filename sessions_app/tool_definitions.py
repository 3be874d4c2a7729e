"""The shape of a tool definition, shared by saved agents and the browser's configure."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import ValidationError as PydanticError

from tools_app.schema import SchemaError, to_json_schema

MAX_TOOLS = 32
TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
DESCRIPTION_MAX = 1024
HANDLER_MAX = 64 * 1024


class ToolDefinitionInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = Field(default="", max_length=DESCRIPTION_MAX)
    parameters: dict[str, Any] | None = None
    handler: str | None = Field(default=None, min_length=1, max_length=HANDLER_MAX)
    client: bool = False
    timeoutMs: int | None = Field(default=None, ge=100, le=60_000)

    @model_validator(mode="after")
    def _one_kind(self) -> ToolDefinitionInput:
        if (self.handler is not None) == self.client:
            raise ValueError("give either a handler (server tool) or client: true, not both")
        try:
            to_json_schema(self.parameters)
        except SchemaError as exc:
            raise ValueError(str(exc)) from None
        return self


def format_pydantic_errors(exc: PydanticError, prefix: str = "", limit: int = 5) -> str:
    """'tools[2].name: String should match pattern …' for the first few errors."""
    parts = []
    for error in exc.errors()[:limit]:
        path = prefix
        for item in error["loc"]:
            path += f"[{item}]" if isinstance(item, int) else (f".{item}" if path else str(item))
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{path}: {message}" if path else message)
    return "; ".join(parts)


def clean_tool_definitions(tools: list[Any]) -> list[dict[str, Any]]:
    """Validated tool definitions as plain dicts; ValidationError names the bad field."""
    if not isinstance(tools, list):
        raise ValidationError("must be a list")
    if len(tools) > MAX_TOOLS:
        raise ValidationError(f"at most {MAX_TOOLS} tools")
    cleaned: list[dict[str, Any]] = []
    for index, raw in enumerate(tools):
        try:
            tool = ToolDefinitionInput.model_validate(raw)
        except PydanticError as exc:
            raise ValidationError(format_pydantic_errors(exc, prefix=f"tools[{index}]")) from None
        if any(existing["name"] == tool.name for existing in cleaned):
            raise ValidationError(f"tools[{index}].name: {tool.name!r} is repeated")
        cleaned.append(tool.model_dump(exclude_none=True, exclude_defaults=False))
    return cleaned
