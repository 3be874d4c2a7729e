"""The tool runner used until a sandbox is configured: every server tool fails clearly."""

from __future__ import annotations

from engine.protocol import ToolStatus
from engine.providers.spec import ProviderSpec
from engine.tools.call import ToolRequest, ToolResult
from engine.tools.runner import ToolRunner


class UnavailableToolRunner(ToolRunner):
    def __init__(self, **_options: object) -> None:
        pass

    async def run(self, request: ToolRequest) -> ToolResult:
        return ToolResult(
            status=ToolStatus.FAILED,
            error="server tools cannot run: no sandbox is configured on this platform",
        )


PROVIDER = ProviderSpec(
    kind="tools", name="unavailable", label="Unavailable", adapter=UnavailableToolRunner
)
