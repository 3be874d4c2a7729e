"""Attacks through what a language model writes, now regressions. The model writes what the
caller asks for (anyone with the page's `pk_` key), and a workspace's own LLM URL answers
whatever its server sends:

- tool-call arguments holding a NUL or a lone surrogate (`"\\u0000"`, `"\\ud800"`), or
  nested 5000 levels deep: the call ran (or failed) as it should, but its row in the
  session's record was lost (`DataError` / `RecursionError` in the record writer), so the
  session page had no trace of the call. Now the row is kept: JSON without what PostgreSQL
  cannot hold, or the text as the model wrote it.
- a reply holding a lone surrogate (`"Hi \\ud800"`, which JSON allows a server to write):
  the page got it, then every later turn of the session failed as `internal error` (the
  next request's size could not be measured: nothing encodes half a UTF-16 pair) and the
  transcript row was lost. Now the adapter reads it as a browser would, U+FFFD.
- an event of the LLM stream nested 5000 levels deep failed the turn as the platform's
  `internal error`; now it is the provider's `llm_failed` (tested at the adapter:
  tests/engine/providers/llm/openai/test_llm_openai.py), and the session goes on.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import ToolCallRecord, TranscriptEntry
from tests.engine.providers.llm.openai.fake_server import (
    Done,
    FakeOpenAIServer,
    Finish,
    Raw,
    text_reply,
    tool_call,
)
from tests.factories import make_tenant, order_tool
from tests.sessions_app.recording import ended_session
from tests.sessions_app.wsclient import Client

pytestmark = pytest.mark.django_db(transaction=True)

DEEP = "[" * 5000 + "]" * 5000
CONFIG = {"type": "configure", "mode": "text", "instructions": "Be brief.", "tools": [order_tool()]}


@pytest.fixture(autouse=True)
def _fake_tools(settings: Any) -> None:
    settings.TOOL_RUNNER = "fake"


async def _kept_arguments(llm: FakeOpenAIServer, arguments: str) -> list[Any]:
    tenant = await sync_to_async(make_tenant)("caller@example.com")
    llm.script(*tool_call(0, "call_1", "track_order", arguments), Finish("tool_calls"), Done())
    llm.script(text_reply("Done."))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send(CONFIG)
        await client.until("ready")
        await client.send({"type": "text", "text": "Track my order"})
        assert (await client.until("chat"))["text"] == "Done."
    session = await ended_session(tenant.workspace)
    rows = ToolCallRecord.objects.filter(session=session)
    return await sync_to_async(lambda: [row.arguments for row in rows])()


async def test_arguments_with_nul_and_a_lone_surrogate_keep_the_calls_record(
    llm: FakeOpenAIServer,
) -> None:
    kept = await _kept_arguments(llm, '{"order_number": "A\\u00001\\ud800", "\\u0000": 1}')
    assert kept == [{"order_number": "A1", "": 1}]


async def test_arguments_nested_past_the_parser_keep_the_calls_record(
    llm: FakeOpenAIServer,
) -> None:
    (kept,) = await _kept_arguments(llm, DEEP)
    assert isinstance(kept, str) and kept.startswith("[[[[")


async def test_a_stream_event_nested_past_the_parser_is_the_llms_failure(
    llm: FakeOpenAIServer, settings: Any
) -> None:
    settings.PROVIDER_RETRY_DELAYS_MS = []
    tenant = await sync_to_async(make_tenant)("caller@example.com")
    llm.script(Raw(b"data: " + DEEP.encode() + b"\n\n"), Done())
    llm.script(text_reply("Fine now."))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "one"})
        error = await client.until("error")
        assert error["code"] == "llm_failed"
        await client.send({"type": "text", "text": "two"})
        assert (await client.until("chat"))["text"] == "Fine now."


async def test_a_reply_with_lone_surrogates_is_read_as_a_browser_would(
    llm: FakeOpenAIServer,
) -> None:
    tenant = await sync_to_async(make_tenant)("caller@example.com")
    reply = b'{"choices": [{"index": 0, "delta": {"content": "Hi \\ud800 there."}}]}'
    llm.script(Raw(b"data: " + reply + b"\n\n"), Finish("stop"), Done())
    llm.script(text_reply("Fine."))
    async with Client(f"/v1/session?key={tenant.publishable_key}") as client:
        await client.send({"type": "configure", "mode": "text"})
        await client.until("ready")
        await client.send({"type": "text", "text": "one"})
        assert (await client.until("chat"))["text"] == "Hi \ufffd there."
        await client.send({"type": "text", "text": "two"})
        assert (await client.until("chat"))["text"] == "Fine."
    session = await ended_session(tenant.workspace)
    rows = TranscriptEntry.objects.filter(session=session, role="assistant")
    said = await sync_to_async(lambda: [row.text for row in rows])()
    assert said == ["Hi \ufffd there.", "Fine."]
