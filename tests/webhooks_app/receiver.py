"""A customer's webhook receiver, on a real socket: it checks every request's signature with
the docs' own Python snippet (docs/webhooks.md), and answers as scripted (500, 500, then 200…)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.egress_server import EgressTestServer, RecordedRequest, respond

WEBHOOK_DOCS = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
PATH = "/hooks/voice"


def docs_snippet(language: str, marker: str) -> str:
    """The fenced ``language`` block of the webhooks page that contains ``marker``."""
    blocks = re.findall(rf"```{language}\n(.*?)```", WEBHOOK_DOCS.read_text(), re.DOTALL)
    return next(block for block in blocks if marker in block)


def docs_verifier() -> Any:
    namespace: dict[str, Any] = {}
    exec(docs_snippet("python", "def verify_signature"), namespace)
    return namespace["verify_signature"]


@dataclass
class Receiver:
    server: EgressTestServer
    statuses: list[int]  # answered in turn; the last one from then on
    secret: str = ""
    verified: list[bool] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url(PATH)

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.server.requests

    def install(self) -> None:
        verify = docs_verifier()

        async def handler(
            request: RecordedRequest, writer: asyncio.StreamWriter, server: object
        ) -> None:
            self.verified.append(verify(request.body, request.headers["signature"], self.secret))
            status = self.statuses[min(len(self.answered), len(self.statuses) - 1)]
            self.answered.append(status)
            await respond(status, b"ok" if status < 300 else b"try later")(request, writer, server)

        self.server.route(PATH, handler)
