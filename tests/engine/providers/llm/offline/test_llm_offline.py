"""The offline stand-in used when no language model is configured."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.providers import registry
from engine.providers.base import LLMDone, LLMEvent, TextDelta, ToolCallsRequested, ToolSpec
from engine.providers.llm.offline.adapter import OfflineLLM

LOOKUP = ToolSpec(name="lookup", description="Look something up.", parameters={})


async def collect(messages: list[dict[str, Any]], tools: Sequence[ToolSpec] = ()) -> list[LLMEvent]:
    llm = OfflineLLM()
    return [event async for event in llm.stream(messages=messages, tools=list(tools))]


def spoken(events: list[LLMEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_repeats_the_last_user_message_in_several_deltas() -> None:
    messages = [
        {"role": "system", "content": "You are a pizza shop."},
        {"role": "user", "content": "Hello?"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "  I would like a   large pizza  "},
    ]

    events = await collect(messages, tools=[LOOKUP])

    assert spoken(events) == (
        "No language model is configured on this platform, so I can only repeat what I "
        "heard: I would like a large pizza."
    )
    assert sum(isinstance(event, TextDelta) for event in events) > 2
    assert not any(isinstance(event, ToolCallsRequested) for event in events)
    assert events[-1] == LLMDone("stop")


async def test_without_a_user_message_only_says_no_model_is_configured() -> None:
    events = await collect([{"role": "system", "content": "Greet the caller."}])

    assert spoken(events) == "No language model is configured on this platform."
    assert events[-1] == LLMDone("stop")


async def test_reads_content_parts_and_keeps_the_speakers_punctuation() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Are you there?"}]}]

    events = await collect(messages)

    assert spoken(events).endswith("what I heard: Are you there?")


def test_is_registered_as_an_offline_llm() -> None:
    llm = registry.create("llm", "offline")

    assert isinstance(llm, OfflineLLM)
    assert llm.name == "offline"
    assert llm.capabilities.offline is True
    assert llm.capabilities.tools is False
