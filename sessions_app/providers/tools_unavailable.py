"""The tool runner used until a sandbox is configured: every server tool fails clearly."""

from __future__ import annotations

from sessions_app.providers.base import ToolInvocation, ToolOutcome, ToolRunner
from sessions_app.providers.spec import ProviderSpec


class UnavailableToolRunner(ToolRunner):
    def __init__(self, **_options: object) -> None:
        pass

    async def run(self, invocation: ToolInvocation) -> ToolOutcome:
        return ToolOutcome(
            status="failed",
            error="server tools cannot run: no sandbox is configured on this platform",
        )


PROVIDER = ProviderSpec(
    kind="tools", name="unavailable", label="Unavailable", adapter=UnavailableToolRunner
)
