from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.providers import registry
from tests.engine.providers.fake import FakeToolRunner, ToolHandler


def _echo(args: dict[str, Any]) -> Any:
    return {"status": "shipped", "order": args.get("order_number")}


@dataclass
class EchoToolRunner(FakeToolRunner):
    """Server tools in process: ``track_order`` answers with the order number it was given."""

    handlers: dict[str, ToolHandler] = field(default_factory=lambda: {"track_order": _echo})


@pytest.fixture(autouse=True)
def _pools_closed(http_pools_closed: None) -> None:
    """Sessions here reach the fake LLM."""


@pytest.fixture
def echo_tools(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._ADDED["tools"], "echo", f"{__name__}.{EchoToolRunner.__name__}")
    settings.TOOL_RUNNER = "echo"
