"""The jailed worker holds what the fetch limits allow: the most parallel fetches, each of
the largest body, bytes that are not UTF-8 (read as text, each byte grows to U+FFFD)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from engine.tools.call import ToolRequest
from tests.factories import make_tenant
from tests.fakes.egress_server import EgressTestServer, respond
from tools_app.services import tool_execute

pytestmark = pytest.mark.django_db(transaction=True)

READ_ALL = """async (args, ctx) => {
  const read = async (url) => {
    const response = await ctx.fetch(url);
    const text = args.as === 'text' ? await response.text() : null;
    const bytes = args.as === 'bytes' ? new Uint8Array(await response.arrayBuffer()) : null;
    return {status: response.status, length: text ? text.length : bytes.length,
            replaced: text ? text.charCodeAt(0) === 0xfffd : bytes[0] === 0xff};
  };
  return Promise.all(args.urls.map(read));
}"""


@pytest.fixture
async def workspace_id(settings: Any) -> int:
    settings.DEV_ALLOW_PRIVATE_EGRESS = True
    tenant = await sync_to_async(make_tenant)("big-fetches@example.com")
    return int(tenant.workspace.pk)


@pytest.mark.parametrize("read_as", ["text", "bytes"])
async def test_the_most_parallel_fetches_of_the_largest_non_utf8_bodies_all_succeed(
    workspace_id: int, read_as: str
) -> None:
    size = django_settings.SANDBOX_FETCH_MAX_BYTES
    parallel = django_settings.SANDBOX_MAX_CONCURRENT_FETCHES
    body = bytes([0xFF, 0xFE]) * (size // 2)  # not UTF-8 anywhere
    async with EgressTestServer() as server:
        server.route("/big", respond(body=body))
        urls = [server.url(f"/big?n={n}") for n in range(parallel)]
        outcome = await tool_execute(
            ToolRequest(
                call_id="big", workspace_id=workspace_id, name="read_all", handler=READ_ALL,
                arguments={"urls": urls, "as": read_as}, timeout_s=30, pinned=True,
            )
        )  # fmt: skip
        assert outcome.status == "completed", outcome.error
        results = json.loads(outcome.result or "[]")
        assert results == [{"status": 200, "length": size, "replaced": True}] * parallel

        # The worker is still the same one, and serves the next call.
        again = await tool_execute(
            ToolRequest(
                call_id="next", workspace_id=workspace_id, name="ok", handler="() => 'ok'",
                arguments={}, timeout_s=5, pinned=True,
            )
        )  # fmt: skip
        assert (again.status, again.result) == ("completed", '"ok"')
