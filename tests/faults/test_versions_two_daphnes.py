"""Versions with live sessions on two real daphne processes: a version published while a
session runs changes nothing for it, across a resume on the other process too; new
sessions get the published version, a rollback's, and a split's."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.engine.providers.llm.openai.fake_server import FakeOpenAIServer, text_reply
from tests.faults.test_two_daphnes import (  # noqa: F401 (fixtures)
    ORIGIN,
    Browser,
    Stack,
    _ended_record,
    _two_daphnes,
    stack,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def _api(platform: Stack, base: str, method: str, path: str, body: Any = None) -> Any:
    response = httpx.request(
        method, f"{base}/api/v1/{path}", json=body, timeout=10,
        headers={"Authorization": f"Bearer {platform.secret_key}"},
    )  # fmt: skip
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def _system_prompt(server: FakeOpenAIServer, request: int) -> str:
    return str(server.requests[request].json["messages"][0]["content"])


async def _one_turn(url: str, server: FakeOpenAIServer, reply: str) -> str:
    server.script(text_reply(reply))
    async with connect(url, origin=ORIGIN) as ws:
        browser = Browser()
        await ws.send(json.dumps({"type": "configure", "mode": "text"}))
        ready = await browser.until(ws, "ready")
        await ws.send(json.dumps({"type": "text", "text": "Which rules?"}))
        await browser.until(ws, "chat")
    return str(ready["sessionId"])


async def test_a_session_keeps_its_version_across_a_publish_and_a_resume(
    stack: Stack,  # noqa: F811 (the fixture)
    llm: FakeOpenAIServer,
) -> None:
    first, second = await _two_daphnes(stack)
    call = lambda *args: asyncio.to_thread(_api, stack, first.http, *args)  # noqa: E731
    shop = {"name": "Shop", "slug": "shop", "mode": "text", "drafts": True}
    await call("POST", "agents", {**shop, "instructions": "Rules of version one."})
    assert (await call("POST", "agents/shop/publish", {}))["number"] == 1
    url_a = first.ws(stack.publishable_key) + "&agent=shop"
    url_b = second.ws(stack.publishable_key) + "&agent=shop"

    llm.script(text_reply("Version one answers."))
    llm.script(text_reply("Still version one."))
    browser = Browser()
    ws = await connect(url_a, origin=ORIGIN)
    await ws.send(json.dumps({"type": "configure", "mode": "text"}))
    ready = await browser.until(ws, "ready")
    await ws.send(json.dumps({"type": "text", "text": "Hello"}))
    await browser.until(ws, "chat")
    assert _system_prompt(llm, 0) == "Rules of version one."

    await call("PATCH", "agents/shop", {"instructions": "Rules of version two."})
    assert (await call("POST", "agents/shop/publish", {}))["number"] == 2
    ws.transport.abort()  # the network drops; the page comes back on the other process

    async with connect(url_b, origin=ORIGIN) as resumed:
        await browser.resume(resumed, ready)
        await browser.until(resumed, "pong")
        await resumed.send(json.dumps({"type": "text", "text": "Which rules now?"}))
        assert (await browser.until(resumed, "chat"))["text"] == "Still version one."
        await resumed.close()
    assert _system_prompt(llm, 1) == "Rules of version one."  # kept across the resume
    record = await _ended_record(stack, second.http, ready["sessionId"])
    assert record["agent_version"] == 1

    new_session = await _one_turn(url_b, llm, "Version two answers.")
    assert _system_prompt(llm, 2) == "Rules of version two."
    await call("POST", "agents/shop/rollback", {"version": 1})
    await _one_turn(url_a, llm, "Rolled back.")
    assert _system_prompt(llm, 3) == "Rules of version one."
    await call("POST", "agents/shop/rollback", {"version": 2})
    await call("PUT", "agents/shop/traffic-split", {"version": 1, "percent": 100})
    split_session = await _one_turn(url_b, llm, "Split to one.")
    assert _system_prompt(llm, 4) == "Rules of version one."

    sessions = {s["id"]: s["agent_version"] for s in (await call("GET", "sessions"))["results"]}
    assert sessions[str(uuid.UUID(hex=new_session))] == 2
    assert sessions[str(uuid.UUID(hex=split_session))] == 1
