from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from egress import guard
from tests.mcp_app.mcp_server import McpTestServer
from tests.sessions_app.conftest import _pools_closed, no_leases  # noqa: F401 (fixtures)

# Two names for the one loopback server: the host a connection is made for, and another.
HOST, OTHER_HOST = "tools.example.test", "other.example.test"


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpTestServer]:
    server = McpTestServer().start()
    yield server
    server.stop()


@pytest.fixture
def server(mcp_server: McpTestServer) -> McpTestServer:
    mcp_server.seen.clear()
    mcp_server.calls.clear()
    return mcp_server


@pytest.fixture
def loopback_allowed(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The private-address override, on in these tests only, and a scripted DNS that
    answers both test names with the loopback address."""
    settings.DEV_ALLOW_PRIVATE_EGRESS = True

    async def lookup(host: str, port: int) -> list[str]:
        if host in (HOST, OTHER_HOST):
            return ["127.0.0.1"]
        raise OSError("no such name")

    monkeypatch.setattr(guard, "lookup", lookup)
