"""A turn that answers from the agent's knowledge bases: the passage it came from is in the
turn's ``chat`` steps and in the session's record, in both modes (the LLM's tool call, or
the platform's search before the LLM is asked)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from engine.providers.audio import float_to_pcm16, pcm16_to_float, resample
from engine.providers.tts.local.adapter import LocalTTS
from knowledge_app import dispatch, services
from knowledge_app.models import Chunk
from knowledge_app.search import source_label
from sessions_app import services as agent_services
from sessions_app.models import Session, ToolCallRecord
from tests.engine.providers.llm.openai import fake_server as fake_openai
from tests.factories import Tenant
from tests.knowledge_app import documents
from tests.sessions_app.wsclient import Client

pytestmark = [pytest.mark.usefixtures("no_leases"), pytest.mark.django_db(transaction=True)]


def _agent_with_knowledge(owner: Tenant, outsider: Tenant, mode: str) -> Chunk:
    base = services.knowledge_base_create(workspace=owner.workspace, name="Constitution")
    for name in ("constitution_article1.txt", "bill_of_rights.md", "gettysburg.txt"):
        services.document_upload(base=base, filename=name, content=documents.corpus(name))
    # The outsider's document answers the same question, differently: it must never show.
    theirs = services.knowledge_base_create(workspace=outsider.workspace, name="Theirs")
    services.document_upload(
        base=theirs, filename="senate.txt", content=b"A senator must be at least 99 years old."
    )
    dispatch.wait_idle()
    agent = agent_services.agent_create(
        workspace=owner.workspace, name="Civics", slug="civics", instructions="Be brief."
    )
    services.agent_knowledge_set(agent=agent, knowledge_base_uids=[str(base.uid)], mode=mode)
    return Chunk.objects.get(workspace=owner.workspace, text__contains="thirty Years")


async def _turn(owner: Tenant, text: str) -> tuple[dict[str, Any], Session]:
    async with Client(f"/v1/session?key={owner.publishable_key}") as client:
        await client.send({"type": "configure", "agent": "civics", "mode": "text"})
        ready = await client.until("ready")
        await client.send({"type": "text", "text": text})
        chat = await client.until("chat")
        await client.until("metrics")
    session = await sync_to_async(Session.objects.get)(public_id=ready["sessionId"])
    return chat, session


def _tool_message(request: fake_openai.RecordedRequest) -> dict[str, Any]:
    (message,) = [m for m in request.json["messages"] if m["role"] == "tool"]
    return json.loads(message["content"])


async def test_the_llm_searches_and_the_answer_cites_the_passage(
    owner: Tenant, outsider: Tenant, llm: fake_openai.FakeOpenAIServer
) -> None:
    chunk = await sync_to_async(_agent_with_knowledge)(owner, outsider, "tool")
    chunk_id = chunk.pk
    llm.script(
        *fake_openai.tool_call(
            0, "call_1", "search_knowledge", '{"query": "minimum age of a senator"}'
        ),
        fake_openai.Finish("tool_calls"),
        fake_openai.Done(),
    )
    llm.script(fake_openai.text_reply("A senator must be at least thirty."))
    chat, session = await _turn(owner, "How old must a senator be?")

    offered = [tool["function"]["name"] for tool in llm.requests[0].json["tools"]]
    assert offered == ["search_knowledge"]
    passages = _tool_message(llm.requests[1])["passages"]
    assert passages[0]["source"] == source_label(chunk_id) and "thirty Years" in passages[0]["text"]
    assert not any("99 years" in passage["text"] for passage in passages)
    assert chat["text"] == "A senator must be at least thirty."
    assert chat["steps"][0] == "Using search_knowledge"
    assert chat["steps"][1] == (
        f"Source {source_label(chunk_id)}: constitution_article1.txt, passage {chunk.position}"
    )
    record = await sync_to_async(ToolCallRecord.objects.get)(session=session)
    assert record.name == "search_knowledge" and record.status == "completed"
    assert json.loads(record.result)["passages"][0]["source"] == source_label(chunk_id)


async def test_prefetch_puts_the_passages_in_the_first_request(
    owner: Tenant, outsider: Tenant, llm: fake_openai.FakeOpenAIServer
) -> None:
    chunk_id = (await sync_to_async(_agent_with_knowledge)(owner, outsider, "prefetch")).pk
    llm.script(fake_openai.text_reply("Thirty years."))
    chat, _session = await _turn(owner, "How old must a senator be?")

    assert len(llm.requests) == 1  # the passages came with the first and only request
    passages = _tool_message(llm.requests[0])["passages"]
    assert passages[0]["source"] == source_label(chunk_id)
    assert chat["steps"][1].startswith(f"Source {source_label(chunk_id)}: ")


async def test_a_spoken_question_is_answered_from_the_passage(
    owner: Tenant, outsider: Tenant, llm: fake_openai.FakeOpenAIServer, settings: Any
) -> None:
    """The offline recogniser hears the question (spoken by the offline voice), the search
    runs with its words, and the answer cites the passage. (tiny.en may mishear a word, as
    tests/speech.py says: the search is what must still find the passage.)"""
    settings.STT_PROVIDER, settings.TTS_PROVIDER = "local", "fake"
    await sync_to_async(_agent_with_knowledge)(owner, outsider, "prefetch")
    soldiers = await sync_to_async(Chunk.objects.get)(
        workspace=owner.workspace, text__contains="No Soldier shall"
    )
    llm.script(fake_openai.text_reply("Not in time of peace without your consent."))
    spoken = "Can soldiers be quartered in my house?"
    pcm_24k = b"".join([c async for c in LocalTTS().synthesize(spoken)])
    audio = float_to_pcm16(resample(pcm16_to_float(pcm_24k), 24_000, 16_000))
    audio = b"\0" * 9600 + audio + b"\0" * 32000  # 300 ms before, 1 s after
    async with Client(f"/v1/session?key={owner.publishable_key}") as client:
        await client.send({"type": "configure", "agent": "civics", "mode": "voice"})
        await client.until("ready")
        for start in range(0, len(audio), 640):  # 20 ms frames, in real time
            await client.send_raw(data=audio[start : start + 640])
            await asyncio.sleep(0.02)
        turn = await client.until("turn", timeout=30)
        chat = await client.until("chat", timeout=30)
    request = llm.requests[0].json
    (call,) = [m for m in request["messages"] if m["role"] == "assistant"][-1]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"query": turn["text"]}
    assert chat["steps"][1].startswith(f"Source {source_label(soldiers.pk)}: bill_of_rights.md")
    assert _tool_message(llm.requests[0])["passages"][0]["source"] == source_label(soldiers.pk)
